//! The miner: where a message finds its template (the exact-message
//! cache, the hash lookups by wildcard pattern), where it founds one, the
//! indexes that find siblings, and the saved form.

use super::tokenize::{is_punct, is_wild, tokenize, tokenize_into, Tokens};
use super::wild::{fits_frame, framed_wild, hash_blanked, index_add, index_remove, mask_of};
use super::{
    LevelCounts, MinerConfig, MinerState, Sighting, Template, TemplateState, MAX_TOKENS, WILDCARD,
};
use crate::decode::severity::Level;
use lru::LruCache;
use rustc_hash::{FxBuildHasher, FxHashMap as HashMap, FxHashSet as HashSet};
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;

/// Exact messages remembered (with their template) before tokenising.
pub(super) const MESSAGE_CACHE: usize = 4096;

/// Least agreeing words around a position for it to become a variable.
pub(super) const MIN_SHARED: usize = 1;

/// Words remembered as standing before variables, at most.
pub(super) const MAX_VALUE_WORDS: usize = 4096;

/// The key of a word that may stand before a value: lower case, without
/// closing punctuation (`User:` and `user` are one); None for a variable
/// or a word without letters.
pub(super) fn value_word_key(tok: &str) -> Option<u64> {
    if is_wild(tok) {
        return None;
    }
    let w = tok.trim_end_matches(is_punct);
    if w.is_empty()
        || w.contains('=')
        || !w.chars().all(|c| c.is_alphabetic() || c == '-' || c == '_')
    {
        return None;
    }
    let mut h = rustc_hash::FxHasher::default();
    for c in w.chars() {
        c.to_lowercase().for_each(|l| l.hash(&mut h));
    }
    Some(h.finish())
}

/// The positions of `tokens` that hold a word (no variable), a bit each.
pub(super) fn word_mask(tokens: &[String]) -> u64 {
    tokens
        .iter()
        .enumerate()
        .take(64)
        .filter(|(_, t)| !is_wild(t))
        .fold(0u64, |m, (i, _)| m | (1u64 << i))
}

/// The same for the first word, which names the event more often than not
/// (`boot (command <*>)`, `wait (command <*>)` are two events).
pub(super) const MIN_SHARED_FIRST: usize = 3;

/// The online miner.
pub struct Miner {
    pub(super) cfg: MinerConfig,
    pub(super) templates: HashMap<u64, Template>,
    /// Recency of templates, for eviction.
    pub(super) lru: LruCache<u64, (), FxBuildHasher>,
    /// Exact message hash → template id.
    pub(super) cache: HashMap<u64, u64>,
    /// The token buffers of [`Miner::add`], reused line after line.
    pub(super) scratch: Tokens,
    /// Hash of a template's tokens → templates with them.
    pub(super) exact: HashMap<u64, Vec<u64>>,
    /// Per token count, the wildcard masks templates have, with how many.
    pub(super) masks: HashMap<usize, Vec<(u64, usize)>>,
    /// Hash of a template's tokens outside its wildcards → templates.
    pub(super) masked: HashMap<u64, Vec<u64>>,
    /// Hash of a template's tokens outside its wildcards and one more
    /// position → templates: the siblings that differ from each other in
    /// that position only.
    pub(super) siblings: HashMap<u64, Vec<u64>>,
    /// Merged template → the one it was merged into.
    pub(super) aliases: LruCache<u64, u64, FxBuildHasher>,
    pub(super) next_id: u64,
    pub(super) evicted: u64,
    pub(super) merged: u64,
    /// Words seen before a variable in some template (`user` of `session
    /// closed for user <*>`): where one stands before a position that
    /// varies, two values prove it a variable (see [`Miner::generalise`]).
    pub(super) value_words: HashSet<u64>,
    /// Value words learned since the templates were last revisited.
    pub(super) new_value_words: Vec<u64>,
    /// Words seen before a variable that took words (`user` of `session
    /// closed for user <*>` once `root`, `cyrus`, `news` … stood there): a
    /// word after one of them is a value wherever a variable stands, even
    /// one that so far held numbers only (`invalid user admin` beside
    /// `invalid user 1234`).
    pub(super) name_words: HashSet<u64>,
}

impl Miner {
    /// Whether a word at position `q` of `tokens` may fill a bare
    /// variable of template `t` there: the variable took words, or the
    /// word before it introduces names.
    pub(super) fn word_fits(&self, t: &Template, tokens: &[String], q: usize) -> bool {
        t.words & (1u64 << q) != 0
            || (q > 0
                && value_word_key(&tokens[q - 1]).is_some_and(|k| self.name_words.contains(&k)))
    }
}

impl Miner {
    /// An empty miner.
    pub fn new(cfg: MinerConfig) -> Miner {
        let cap = NonZeroUsize::new(cfg.max_templates.max(1)).unwrap_or(NonZeroUsize::MIN);
        Miner {
            cfg,
            templates: HashMap::default(),
            lru: LruCache::with_hasher(cap, FxBuildHasher),
            cache: HashMap::default(),
            scratch: Tokens::default(),
            exact: HashMap::default(),
            masks: HashMap::default(),
            masked: HashMap::default(),
            siblings: HashMap::default(),
            aliases: LruCache::with_hasher(cap, FxBuildHasher),
            value_words: HashSet::default(),
            new_value_words: Vec::new(),
            name_words: HashSet::default(),
            next_id: 1,
            evicted: 0,
            merged: 0,
        }
    }

    /// Settings in force.
    pub fn config(&self) -> MinerConfig {
        self.cfg
    }

    /// Number of templates.
    pub fn len(&self) -> usize {
        self.templates.len()
    }

    /// Whether no template is known.
    pub fn is_empty(&self) -> bool {
        self.templates.is_empty()
    }

    /// Templates evicted by the cap so far.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Templates merged into others so far (a position found variable).
    pub fn merged(&self) -> u64 {
        self.merged
    }

    /// A template by id.
    pub fn get(&self, id: u64) -> Option<&Template> {
        self.templates.get(&id)
    }

    /// The id a template answers to now: its own, or the one it was merged
    /// into (merges chain; a merge forgotten by the bounded alias table
    /// answers with the old id).
    pub fn canonical(&self, id: u64) -> u64 {
        let mut id = id;
        for _ in 0..MAX_TOKENS {
            match self.aliases.peek(&id) {
                Some(&to) => id = to,
                None => break,
            }
        }
        id
    }

    /// Every template, most frequent first (ties by id).
    pub fn templates(&self) -> Vec<&Template> {
        let mut v: Vec<&Template> = self.templates.values().collect();
        v.sort_by(|a, b| b.count.cmp(&a.count).then(a.id.cmp(&b.id)));
        v
    }

    /// Finds (or founds) the template of `message`, seen at event time
    /// `time` at `level`.
    pub fn add(&mut self, message: &str, time: i64, level: Option<Level>) -> Sighting {
        let key = {
            let mut h = rustc_hash::FxHasher::default();
            message.hash(&mut h);
            h.finish()
        };
        if let Some(&id) = self.cache.get(&key) {
            // Merged since: the template it joined.
            let id = if self.templates.contains_key(&id) {
                id
            } else {
                self.canonical(id)
            };
            if let Some(s) = self.seen_again(id, time, level) {
                return s;
            }
        }
        let mut tokens = std::mem::take(&mut self.scratch);
        tokenize_into(message, &mut tokens);
        let sighting = self.add_tokens(tokens.as_slice(), tokens.names, time, level);
        self.scratch = tokens;
        if self.cache.len() >= MESSAGE_CACHE {
            self.cache.clear();
        }
        self.cache.insert(key, sighting.id);
        sighting
    }

    /// Counts another line of known template `id`.
    pub(super) fn seen_again(
        &mut self,
        id: u64,
        time: i64,
        level: Option<Level>,
    ) -> Option<Sighting> {
        let t = self.templates.get_mut(&id)?;
        let previous = Some(t.last_seen);
        t.count += 1;
        t.last_seen = t.last_seen.max(time);
        t.levels.add(level);
        self.lru.promote(&id);
        Some(Sighting {
            id,
            created: false,
            previous,
        })
    }

    /// The template a message would join, without learning anything.
    pub fn lookup(&self, message: &str) -> Option<u64> {
        self.find(&tokenize(message))
    }

    /// The template whose tokens are `tokens`, or whose tokens outside its
    /// wildcards are.
    pub(super) fn find(&self, tokens: &[String]) -> Option<u64> {
        let words = word_mask(tokens);
        if let Some(id) = self.find_shape(tokens, words) {
            return Some(id);
        }
        // A `key=word` joins a template that has `key=<*>` there, a
        // `(word).` one that has `(<*>).` (a new message only: the common
        // path never gets here).
        let mut probe: Vec<String> = Vec::new();
        for (q, tok) in tokens.iter().enumerate() {
            let Some(keyed) = framed_wild(tok) else {
                continue;
            };
            if probe.is_empty() {
                probe = tokens.to_vec();
            }
            let old = std::mem::replace(&mut probe[q], keyed);
            if let Some(id) = self.find_shape(&probe, words) {
                return Some(id);
            }
            probe[q] = old;
        }
        // A run of variables is one (`allocateBlock: <*>` for a path and a
        // block id): a value that reads as a word beside a variable
        // (`allocateBlock: httpd blk_…`) is the run's in a template that
        // has the run there.
        let mut tried = 0;
        let literals = tokens.iter().filter(|t| !is_wild(t)).count();
        for q in 0..tokens.len() {
            // The rest must still say which event it is.
            if literals < 3 {
                break;
            }
            let beside =
                |j: Option<usize>| j.and_then(|j| tokens.get(j)).is_some_and(|t| t == WILDCARD);
            if is_wild(&tokens[q]) || !(beside(q.checked_sub(1)) || beside(Some(q + 1))) {
                continue;
            }
            tried += 1;
            if tried > 8 {
                break;
            }
            let joined: Vec<String> = tokens
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != q)
                .map(|(_, t)| t.clone())
                .collect();
            if let Some(id) = self.find_shape(&joined, word_mask(&joined)) {
                return Some(id);
            }
        }
        None
    }

    /// [`Miner::find`] for the tokens as they are; `words` marks the
    /// positions where the message has a word (a template's variable there
    /// must have taken words, see [`Template::words`]).
    pub(super) fn find_shape(&self, tokens: &[String], words: u64) -> Option<u64> {
        let h = hash_blanked(tokens, 0, None);
        if let Some(ids) = self.exact.get(&h) {
            if let Some(&id) = ids
                .iter()
                .find(|id| self.templates.get(id).is_some_and(|t| t.tokens == tokens))
            {
                return Some(id);
            }
        }
        // Templates with wildcards, mask by mask (a few per length).
        let masks = self.masks.get(&tokens.len())?;
        let mut best: Option<(u32, u64)> = None;
        for &(mask, _) in masks {
            let h = hash_blanked(tokens, mask, None);
            let Some(ids) = self.masked.get(&h) else {
                continue;
            };
            for &id in ids {
                let Some(t) = self.templates.get(&id) else {
                    continue;
                };
                // A template of variables only takes messages of variables
                // only (its exact twin), never a word.
                let literal = t.tokens.iter().any(|x| !is_wild(x));
                // A word fits a bare variable only where words proved it
                // (a framed one, `key=<*>`, `(<*>)`, takes any: its frame
                // says it holds values).
                let fits = literal
                    && t.tokens.iter().zip(tokens).enumerate().all(|(i, (a, b))| {
                        let bit = 1u64 << i;
                        if mask & bit != 0 {
                            fits_frame(a, b)
                                && (words & bit == 0
                                    || a != WILDCARD
                                    || self.word_fits(t, tokens, i))
                        } else {
                            a == b
                        }
                    });
                // The most specific template wins (fewest wildcards).
                if fits && best.is_none_or(|(w, _)| mask.count_ones() < w) {
                    best = Some((mask.count_ones(), id));
                }
            }
        }
        best.map(|(_, id)| id)
    }

    /// Finds or founds the template of `tokens`; `names` marks their
    /// variables masked from names ([`Tokens::names`]).
    pub(super) fn add_tokens(
        &mut self,
        tokens: &[String],
        names: u64,
        time: i64,
        level: Option<Level>,
    ) -> Sighting {
        if let Some(id) = self.find(tokens) {
            if let Some(t) = self.templates.get_mut(&id) {
                // Names in its variables: words may stand there too.
                t.words |= names & mask_of(&t.tokens);
            }
            if let Some(s) = self.seen_again(id, time, level) {
                return s;
            }
        }
        if self.templates.len() >= self.cfg.max_templates.max(1) {
            if let Some((v, ())) = self.lru.pop_lru() {
                self.remove(v);
                self.evicted += 1;
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        let mut levels = LevelCounts::default();
        levels.add(level);
        self.templates.insert(
            id,
            Template {
                id,
                tokens: tokens.to_vec(),
                count: 1,
                first_seen: time,
                last_seen: time,
                levels,
                words: names & mask_of(tokens),
            },
        );
        self.lru.put(id, ());
        self.register(id);
        // A message with a variable where older templates have a word
        // takes them in; enough siblings differing in one position make
        // it a variable.
        let id = self.subsume(id);
        let generalised = self.generalise(id);
        // Evidence grew: templates with a newly known value word before a
        // word of theirs may now generalise (their siblings founded before
        // the word was known).
        let generalised = generalised.map(|g| self.revisit(g));
        match generalised {
            Some(survivor) if survivor != id => {
                let previous = self.templates.get(&survivor).map(|t| t.last_seen);
                Sighting {
                    id: survivor,
                    created: false,
                    previous,
                }
            }
            _ => Sighting {
                id,
                created: true,
                previous: None,
            },
        }
    }

    /// Adds a template to the indexes.
    pub(super) fn register(&mut self, id: u64) {
        let Some(t) = self.templates.get(&id) else {
            return;
        };
        let tokens = &t.tokens;
        let mask = mask_of(tokens);
        for i in 1..tokens.len() {
            if self.value_words.len() >= MAX_VALUE_WORDS {
                break;
            }
            if mask & (1u64 << i) != 0 && !tokens[i].contains('=') {
                if let Some(k) = value_word_key(&tokens[i - 1]) {
                    if self.value_words.insert(k) {
                        self.new_value_words.push(k);
                    }
                    if t.words & (1u64 << i) != 0 && tokens[i] == WILDCARD {
                        self.name_words.insert(k);
                    }
                }
            }
        }
        index_add(&mut self.exact, hash_blanked(tokens, 0, None), id);
        if mask != 0 {
            index_add(&mut self.masked, hash_blanked(tokens, mask, None), id);
            let masks = self.masks.entry(tokens.len()).or_default();
            match masks.iter_mut().find(|(m, _)| *m == mask) {
                Some(e) => e.1 += 1,
                None => masks.push((mask, 1)),
            }
        }
        for q in 0..tokens.len() {
            if mask & (1u64 << q) == 0 && !is_wild(&tokens[q]) {
                index_add(&mut self.siblings, hash_blanked(tokens, mask, Some(q)), id);
            }
        }
    }

    /// Takes a template out of the indexes.
    pub(super) fn unregister(&mut self, id: u64) {
        let Some(t) = self.templates.get(&id) else {
            return;
        };
        let tokens = &t.tokens;
        let mask = mask_of(tokens);
        index_remove(&mut self.exact, hash_blanked(tokens, 0, None), id);
        if mask != 0 {
            index_remove(&mut self.masked, hash_blanked(tokens, mask, None), id);
            if let Some(masks) = self.masks.get_mut(&tokens.len()) {
                if let Some(e) = masks.iter_mut().find(|(m, _)| *m == mask) {
                    e.1 -= 1;
                }
                masks.retain(|(_, n)| *n > 0);
            }
        }
        for q in 0..tokens.len() {
            if mask & (1u64 << q) == 0 && !is_wild(&tokens[q]) {
                index_remove(&mut self.siblings, hash_blanked(tokens, mask, Some(q)), id);
            }
        }
    }

    /// Forgets a template.
    pub(super) fn remove(&mut self, id: u64) {
        self.unregister(id);
        if self.templates.remove(&id).is_some() {
            self.lru.pop(&id);
            self.cache.retain(|_, v| *v != id);
        }
    }

    /// The miner's saved form.
    pub fn state(&self) -> MinerState {
        let mut templates: Vec<TemplateState> = self
            .templates
            .values()
            .map(|t| TemplateState {
                id: t.id,
                template: t.text(),
                path: Vec::new(),
                count: t.count,
                first_seen: t.first_seen,
                last_seen: t.last_seen,
                levels: t.levels,
                words: t.words,
            })
            .collect();
        templates.sort_by_key(|t| t.id);
        MinerState {
            version: 2,
            config: Some(self.cfg),
            next_id: self.next_id,
            learn_until: None,
            learn_lines_left: None,
            evicted: self.evicted,
            born: Vec::new(),
            known: Vec::new(),
            templates,
            baseline: Vec::new(),
            baseline_span: 0,
        }
    }

    /// A miner restored from its saved form (settings from `cfg`).
    pub fn restore(state: &MinerState, cfg: MinerConfig) -> Miner {
        let mut m = Miner::new(cfg);
        m.next_id = state.next_id.max(1);
        m.evicted = state.evicted;
        let mut sorted: Vec<&TemplateState> = state.templates.iter().collect();
        // Least recently seen first, so the LRU order survives.
        sorted.sort_by_key(|t| (t.last_seen, t.id));
        for t in sorted {
            if m.templates.len() >= m.cfg.max_templates.max(1) {
                break;
            }
            let tokens: Vec<String> = t.template.split(' ').map(str::to_string).collect();
            m.next_id = m.next_id.max(t.id + 1);
            m.templates.insert(
                t.id,
                Template {
                    id: t.id,
                    tokens,
                    count: t.count,
                    first_seen: t.first_seen,
                    last_seen: t.last_seen,
                    levels: t.levels,
                    words: t.words,
                },
            );
            m.lru.put(t.id, ());
            m.register(t.id);
        }
        m
    }
}
