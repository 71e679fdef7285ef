//! How templates grow together: siblings that differ in one position
//! merge once the position proves variable; a template subsumes the ones
//! its wildcards cover; value words are revisited. Each step folds a
//! group into its oldest template, whose id the others answer to.

use super::miner::{value_word_key, Miner, MIN_SHARED, MIN_SHARED_FIRST};
use super::tokenize::is_wild;
use super::wild::{fits_frame, framed_wild, hash_blanked, is_framed_wild, mask_of};
use super::{Template, MAX_TOKENS, WILDCARD};

impl Miner {
    /// Merges the siblings of `id` that differ from it in one position
    /// into one template with a wildcard there, once `variable_after`
    /// distinct values were seen in that position; repeats while merges
    /// make more. Returns the template `id`'s lines now belong to.
    pub(super) fn generalise(&mut self, id: u64) -> Option<u64> {
        let mut id = id;
        let need = self.cfg.variable_after.max(2);
        'again: for _ in 0..MAX_TOKENS {
            let t = self.templates.get(&id)?;
            let mask = mask_of(&t.tokens);
            // The first word names the event (Drain's premise too): it
            // becomes a variable only before a long common text.
            for q in 0..t.tokens.len() {
                if mask & (1u64 << q) != 0 || is_wild(&t.tokens[q]) {
                    continue;
                }
                let key = hash_blanked(&t.tokens, mask, Some(q));
                let Some(ids) = self.siblings.get(&key) else {
                    continue;
                };
                let group: Vec<u64> = ids
                    .iter()
                    .copied()
                    .filter(|o| {
                        self.templates.get(o).is_some_and(|s| {
                            s.tokens.len() == t.tokens.len()
                                && mask_of(&s.tokens) == mask
                                && s.tokens
                                    .iter()
                                    .zip(&t.tokens)
                                    .enumerate()
                                    .all(|(i, (a, b))| i == q || a == b)
                        })
                    })
                    .collect();
                // A variable needs company: enough agreeing words around it
                // (one-word messages `normal`, `running` stay apart), and
                // enough distinct values (`GET`, `POST`, `DELETE` stay three
                // events; user names become one).
                let shared = t
                    .tokens
                    .iter()
                    .enumerate()
                    .filter(|(i, tok)| *i != q && !is_wild(tok))
                    .count();
                // A first word takes the evidence of the rest of the line:
                // a long common text, or many distinct first words before
                // a shorter one (`cupsd startup succeeded`, `klogd …`,
                // `atd …`).
                // After a word that stands before variables elsewhere
                // (`user` of `session closed for user <*>`), two values
                // are evidence enough (`… for user cyrus by …`, `… for
                // user news by …`).
                let introduced = q > 0
                    && value_word_key(&t.tokens[q - 1])
                        .is_some_and(|k| self.value_words.contains(&k));
                let enough = if q == 0 {
                    (group.len() >= need && shared >= MIN_SHARED_FIRST)
                        || (group.len() >= 2 * need && shared >= MIN_SHARED_FIRST - 1)
                } else if introduced {
                    group.len() >= 3 && shared > MIN_SHARED
                } else {
                    group.len() >= need && shared >= MIN_SHARED
                };
                if enough {
                    id = self.merge(&group, q);
                    id = self.subsume(id);
                    id = self.absorb_fitting(id);
                    continue 'again;
                }
            }
            break;
        }
        Some(id)
    }

    /// Takes into template `id` the templates that differ from it only by
    /// a word where it has a variable (`for ns.example.com [<*>]` into
    /// `for <*> [<*>]`), with the company a variable needs; returns the
    /// survivor (the oldest).
    pub(super) fn subsume(&mut self, id: u64) -> u64 {
        let Some(t) = self.templates.get(&id) else {
            return id;
        };
        let mask = mask_of(&t.tokens);
        // A bare variable, or a framed one (`key=<*>` takes `key=word`,
        // `(<*>).` takes `(word).`).
        let keyed = |tok: &str| is_framed_wild(tok);
        if mask == 0 && !t.tokens.iter().any(|x| keyed(x)) {
            return id;
        }
        let literals = t.tokens.iter().filter(|x| !is_wild(x)).count();
        let mut found: Vec<(u64, usize)> = Vec::new();
        for q in 0..t.tokens.len() {
            let bare = mask & (1u64 << q) != 0;
            if !bare && !keyed(&t.tokens[q]) {
                continue;
            }
            // Words are taken into a bare variable only where words
            // proved it.
            if t.tokens[q] == WILDCARD && !self.word_fits(t, &t.tokens, q) {
                continue;
            }
            let company = if q == 0 { MIN_SHARED_FIRST } else { MIN_SHARED };
            if literals < company {
                continue;
            }
            let rest = mask & !(1u64 << q);
            let key = hash_blanked(&t.tokens, rest, Some(q));
            let Some(ids) = self.siblings.get(&key) else {
                continue;
            };
            for &o in ids {
                let fits = o != id
                    && self.templates.get(&o).is_some_and(|s| {
                        s.tokens.len() == t.tokens.len()
                            && mask_of(&s.tokens) == rest
                            && s.tokens
                                .iter()
                                .zip(&t.tokens)
                                .enumerate()
                                .all(|(i, (a, b))| i == q || a == b)
                            && fits_frame(&t.tokens[q], &s.tokens[q])
                    });
                if fits {
                    found.push((o, q));
                }
            }
        }
        if found.is_empty() {
            return id;
        }
        let (tokens, words) = (t.tokens.clone(), t.words);
        let mut group: Vec<u64> = found.iter().map(|(o, _)| *o).collect();
        group.push(id);
        group.sort_unstable();
        group.dedup();
        self.fold(&group, tokens, words).unwrap_or(id)
    }

    /// Merges templates that differ in position `q` only into the oldest,
    /// which gets a wildcard there (and absorbs a twin that already had
    /// one). Returns the survivor.
    pub(super) fn merge(&mut self, group: &[u64], q: usize) -> u64 {
        let survivor = group.iter().copied().min().unwrap_or(0);
        for &id in group {
            self.unregister(id);
        }
        let keys: Vec<Option<String>> = group
            .iter()
            .map(|id| {
                self.templates
                    .get(id)
                    .and_then(|t| t.tokens.get(q))
                    .and_then(|t| framed_wild(t))
            })
            .collect();
        let mut merged = match self.templates.remove(&survivor) {
            Some(t) => t,
            None => return survivor,
        };
        for &id in group.iter().filter(|&&id| id != survivor) {
            if let Some(t) = self.templates.remove(&id) {
                merged.words |= t.words;
                self.absorb(&mut merged, &t);
                self.lru.pop(&id);
                self.aliases.put(id, survivor);
                self.merged += 1;
            }
        }
        // Distinct words made the position a variable: it takes words.
        merged.words |= 1u64 << q;
        // Values of one key vary: the key stays (`user=<*>`); so does the
        // frame of bracketed words (`(<*>).`).
        let keyed = merged.tokens.get(q).and_then(|t| framed_wild(t));
        if let Some(tok) = merged.tokens.get_mut(q) {
            *tok = keyed
                .filter(|k| keys.iter().all(|o| o.as_ref() == Some(k)))
                .unwrap_or_else(|| WILDCARD.to_string());
        }
        // A twin: a template that already had these tokens.
        let h = hash_blanked(&merged.tokens, 0, None);
        let twins: Vec<u64> = self
            .exact
            .get(&h)
            .map(|v| {
                v.iter()
                    .copied()
                    .filter(|o| {
                        self.templates
                            .get(o)
                            .is_some_and(|t| t.tokens == merged.tokens)
                    })
                    .collect()
            })
            .unwrap_or_default();
        for twin in twins {
            self.unregister(twin);
            if let Some(t) = self.templates.remove(&twin) {
                merged.words |= t.words;
                self.absorb(&mut merged, &t);
                self.lru.pop(&twin);
                self.aliases.put(twin, survivor);
                self.merged += 1;
            }
        }
        self.templates.insert(survivor, merged);
        self.lru.promote(&survivor);
        self.register(survivor);
        survivor
    }

    /// Revisits, once per value word learned, the templates that have that
    /// word before one of their words: their siblings may now be enough
    /// to make the position a variable. Returns what template `id` (the
    /// line's) became. Bounded: a word is learned once, at most
    /// [`MAX_VALUE_WORDS`](super::miner::MAX_VALUE_WORDS) of them, each a scan of the templates.
    pub(super) fn revisit(&mut self, mut id: u64) -> u64 {
        for _ in 0..16 {
            let Some(word) = self.new_value_words.pop() else {
                break;
            };
            let mut ids: Vec<u64> = self
                .templates
                .values()
                .filter(|t| {
                    t.tokens
                        .windows(2)
                        .any(|w| !is_wild(&w[1]) && value_word_key(&w[0]) == Some(word))
                })
                .map(|t| t.id)
                .collect();
            ids.sort_unstable();
            for t in ids {
                if !self.templates.contains_key(&t) {
                    continue;
                }
                let survivor = self.generalise(t).unwrap_or(t);
                if self.canonical(id) == survivor || t == id {
                    id = survivor;
                }
            }
        }
        if self.templates.contains_key(&id) {
            id
        } else {
            self.canonical(id)
        }
    }

    /// Takes into template `id` (which just gained a variable) every older
    /// template its lines would now join: one that differs from it only at
    /// its variables, in any number of them (`… user webmaster … port
    /// 22 …` founded before `… user <*> … port <*> …` existed). A message
    /// arriving later joins it by [`Miner::find`]; this settles the ones
    /// founded before. Runs on merges only, which are rare: a scan of the
    /// templates is affordable there.
    pub(super) fn absorb_fitting(&mut self, id: u64) -> u64 {
        let Some(t) = self.templates.get(&id) else {
            return id;
        };
        let mask = mask_of(&t.tokens);
        if mask.count_ones() < 2 || !t.tokens.iter().any(|x| !is_wild(x)) {
            return id;
        }
        let fitting: Vec<u64> = self
            .templates
            .values()
            .filter(|s| {
                s.id != id
                    && s.tokens.len() == t.tokens.len()
                    && s.tokens
                        .iter()
                        .zip(&t.tokens)
                        .enumerate()
                        .all(|(i, (a, b))| {
                            if mask & (1u64 << i) != 0 {
                                fits_frame(b, a)
                                    && (is_wild(a)
                                        || b != WILDCARD
                                        || self.word_fits(t, &t.tokens, i))
                            } else {
                                a == b
                            }
                        })
            })
            .map(|s| s.id)
            .collect();
        if fitting.is_empty() {
            return id;
        }
        let (tokens, words) = (t.tokens.clone(), t.words);
        let mut group = fitting;
        group.push(id);
        group.sort_unstable();
        self.fold(&group, tokens, words).unwrap_or(id)
    }

    /// Folds the templates of `group` (sorted, deduplicated) into its
    /// oldest, which takes `tokens`; the others' ids answer to it through
    /// the alias table. The survivor, None if it was gone.
    pub(super) fn fold(&mut self, group: &[u64], tokens: Vec<String>, words: u64) -> Option<u64> {
        let survivor = *group.first()?;
        for &g in group {
            self.unregister(g);
        }
        let mut merged = self.templates.remove(&survivor)?;
        for &g in group.iter().skip(1) {
            if let Some(t) = self.templates.remove(&g) {
                self.absorb(&mut merged, &t);
                self.lru.pop(&g);
                self.aliases.put(g, survivor);
                self.merged += 1;
            }
        }
        merged.tokens = tokens;
        merged.words = words;
        self.templates.insert(survivor, merged);
        self.lru.promote(&survivor);
        self.register(survivor);
        Some(survivor)
    }

    pub(super) fn absorb(&self, into: &mut Template, t: &Template) {
        into.count += t.count;
        into.first_seen = into.first_seen.min(t.first_seen);
        into.last_seen = into.last_seen.max(t.last_seen);
        into.levels.merge(&t.levels);
    }
}
