//! Log-template mining, online. Messages that differ only in their
//! variables — numbers, IDs, addresses, hex, UUIDs, durations, embedded
//! timestamps, and words that take many values in one place — share a
//! template such as `failed to open <*>: no space left on device`.
//! Novelty detection pages on templates never seen before; `sigwatch
//! templates` lists them.
//!
//! How a message finds its template: it is split into tokens and its
//! variables are masked to `<*>` ([`tokenize`]); a template with exactly
//! those tokens, or with those tokens outside its own wildcards, takes it
//! (a hash lookup, one per wildcard pattern of that length). Otherwise it
//! founds a template. Templates that differ from each other in one
//! position only are siblings; once `variable_after` of them (3) show
//! distinct words there, the position is a variable: they merge into the
//! oldest, whose id the others' lines answer to from then on
//! ([`Miner::canonical`]). Unlike Drain (He et al., ICWS 2017), which joins
//! a message to the most similar template when enough tokens agree, two
//! messages never share a template because they are *similar*: a different
//! word is a different event until the position proves variable — which is
//! what the ground truth of the standard benchmark (LogHub) says, and what
//! keeps `Received disconnect … Bye Bye` apart from `… disconnected by
//! user`.
//!
//! Written here rather than taken from a crate: the crates found
//! (`logdrain`, `drain3`) stamp templates with the wall clock (replay must
//! stay deterministic, on event time), or lock for multi-threaded use
//! that the single-threaded engine pays for without needing. Here every
//! structure is bounded — templates (one LRU over the whole miner,
//! evictions counted), index entries, aliases, tokens per message — and a
//! cache of exact messages skips tokenising for the structured logs whose
//! messages are constant strings.

pub mod watch;

use crate::decode::severity::Level;
use lru::LruCache;
use rustc_hash::{FxBuildHasher, FxHashMap as HashMap, FxHashSet as HashSet};
use serde::{Deserialize, Serialize};
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;

/// The placeholder of a variable.
pub const WILDCARD: &str = "<*>";

/// Tokens kept per message; the rest of a longer message is dropped.
pub const MAX_TOKENS: usize = 64;

/// Miner settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MinerConfig {
    /// Distinct words in one position, among templates otherwise alike,
    /// that make the position a variable.
    #[serde(default = "default_variable_after")]
    pub variable_after: usize,
    /// Templates in all; past it the least recently used one goes.
    pub max_templates: usize,
}

fn default_variable_after() -> usize {
    4
}

impl Default for MinerConfig {
    fn default() -> Self {
        MinerConfig {
            variable_after: default_variable_after(),
            max_templates: 10_000,
        }
    }
}

/// Lines of a template by level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelCounts {
    /// Fatal, panic, critical.
    #[serde(default)]
    pub fatal: u64,
    /// Error.
    #[serde(default)]
    pub error: u64,
    /// Warning.
    #[serde(default)]
    pub warn: u64,
    /// Info.
    #[serde(default)]
    pub info: u64,
    /// Debug, trace.
    #[serde(default)]
    pub debug: u64,
    /// No level.
    #[serde(default)]
    pub none: u64,
}

impl LevelCounts {
    fn add(&mut self, level: Option<Level>) {
        match level {
            Some(Level::Fatal) => self.fatal += 1,
            Some(Level::Error) => self.error += 1,
            Some(Level::Warn) => self.warn += 1,
            Some(Level::Info) => self.info += 1,
            Some(Level::Debug) => self.debug += 1,
            None => self.none += 1,
        }
    }

    fn merge(&mut self, o: &LevelCounts) {
        self.fatal += o.fatal;
        self.error += o.error;
        self.warn += o.warn;
        self.info += o.info;
        self.debug += o.debug;
        self.none += o.none;
    }

    /// The most severe level seen.
    pub fn highest(&self) -> Option<Level> {
        [
            (self.fatal, Level::Fatal),
            (self.error, Level::Error),
            (self.warn, Level::Warn),
            (self.info, Level::Info),
            (self.debug, Level::Debug),
        ]
        .into_iter()
        .find(|(n, _)| *n > 0)
        .map(|(_, l)| l)
    }
}

/// A template and what is known of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Template {
    /// Stable id (unique for the miner's lifetime, saved with it).
    pub id: u64,
    /// Tokens, variables as [`WILDCARD`].
    pub tokens: Vec<String>,
    /// Messages matched.
    pub count: u64,
    /// Event time of the first and the latest message (ns).
    pub first_seen: i64,
    /// See `first_seen`.
    pub last_seen: i64,
    /// Messages by level.
    pub levels: LevelCounts,
}

impl Template {
    /// The template as text.
    pub fn text(&self) -> String {
        self.tokens.join(" ")
    }
}

/// What [`Miner::add`] found for a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sighting {
    /// The template.
    pub id: u64,
    /// The message founded it.
    pub created: bool,
    /// When the template was last seen before this message (ns).
    pub previous: Option<i64>,
}

/// The miner's saved form (`templates.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MinerState {
    /// Format version.
    pub version: u32,
    /// Settings the templates were mined with.
    pub config: Option<MinerConfig>,
    /// Next template id.
    pub next_id: u64,
    /// Event time until which the miner only learns (ns), if set.
    #[serde(default)]
    pub learn_until: Option<i64>,
    /// Lines the learning period still needs after that time, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learn_lines_left: Option<u64>,
    /// Templates evicted so far.
    #[serde(default)]
    pub evicted: u64,
    /// Templates that became new after learning, with when (ns): they stay
    /// new for a while across a restart.
    #[serde(default)]
    pub born: Vec<(u64, i64)>,
    /// The templates, by id.
    pub templates: Vec<TemplateState>,
}

/// One saved template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemplateState {
    /// Id.
    pub id: u64,
    /// The template text (tokens joined by spaces).
    pub template: String,
    /// Tree keys of an older miner (read, not used).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<String>,
    /// Messages matched.
    pub count: u64,
    /// First message (ns).
    pub first_seen: i64,
    /// Latest message (ns).
    pub last_seen: i64,
    /// Messages by level.
    pub levels: LevelCounts,
}

/// Errors loading a miner.
#[derive(Debug, thiserror::Error)]
pub enum MiningError {
    /// The file cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a template state.
    #[error("{path}: not a template file: {message}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// Exact messages remembered (with their template) before tokenising.
const MESSAGE_CACHE: usize = 4096;

/// Templates a key of the indexes points at, most (a key shared by more is
/// a hash collision storm; the rest are not indexed).
const MAX_PER_KEY: usize = 64;

/// Least agreeing words around a position for it to become a variable.
const MIN_SHARED: usize = 1;

/// Words remembered as standing before variables, at most.
const MAX_VALUE_WORDS: usize = 4096;

/// The key of a word that may stand before a value: lower case, without
/// closing punctuation (`User:` and `user` are one); None for a variable
/// or a word without letters.
fn value_word_key(tok: &str) -> Option<u64> {
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

/// The same for the first word, which names the event more often than not
/// (`boot (command <*>)`, `wait (command <*>)` are two events).
const MIN_SHARED_FIRST: usize = 3;

/// The online miner.
pub struct Miner {
    cfg: MinerConfig,
    templates: HashMap<u64, Template>,
    /// Recency of templates, for eviction.
    lru: LruCache<u64, (), FxBuildHasher>,
    /// Exact message hash → template id.
    cache: HashMap<u64, u64>,
    /// The token buffers of [`Miner::add`], reused line after line.
    scratch: Tokens,
    /// Hash of a template's tokens → templates with them.
    exact: HashMap<u64, Vec<u64>>,
    /// Per token count, the wildcard masks templates have, with how many.
    masks: HashMap<usize, Vec<(u64, usize)>>,
    /// Hash of a template's tokens outside its wildcards → templates.
    masked: HashMap<u64, Vec<u64>>,
    /// Hash of a template's tokens outside its wildcards and one more
    /// position → templates: the siblings that differ from each other in
    /// that position only.
    siblings: HashMap<u64, Vec<u64>>,
    /// Merged template → the one it was merged into.
    aliases: LruCache<u64, u64, FxBuildHasher>,
    next_id: u64,
    evicted: u64,
    merged: u64,
    /// Words seen before a variable in some template (`user` of `session
    /// closed for user <*>`): where one stands before a position that
    /// varies, two values prove it a variable (see [`Miner::generalise`]).
    value_words: HashSet<u64>,
    /// Value words learned since the templates were last revisited.
    new_value_words: Vec<u64>,
}

/// A token of a masked message: a literal or a variable, with the
/// punctuation around it (`(<*>)`, `<*>:`, `key=<*>`).
fn is_wild(t: &str) -> bool {
    t.contains(WILDCARD)
}

/// `key=<*>` for a `key=value` token (its closing punctuation kept:
/// `(uid=0),` → `(uid=<*>),`), if it is one and its value is not already
/// a variable.
/// Whether a token that opens a bracket also closes it (`(httpd).`,
/// `[main]`), with nothing of the bracket left open.
fn closes_own_bracket(tok: &str) -> bool {
    let (open, close) = match tok.as_bytes().first() {
        Some(b'(') => (b'(', b')'),
        Some(b'[') => (b'[', b']'),
        _ => return false,
    };
    let b = tok.as_bytes();
    let mut depth = 0i32;
    for (i, c) in b.iter().enumerate() {
        if *c == open {
            depth += 1;
        } else if *c == close {
            depth -= 1;
            if depth == 0 {
                // Only punctuation may follow the closing bracket.
                return b[i + 1..].iter().all(|c| c.is_ascii_punctuation());
            }
        }
    }
    false
}

/// The variable form of a word in a frame of punctuation or a key: `key=
/// <*>` for `key=value` ([`keyed_wild`]), `(<*>).` for `(httpd).`, `<*>,`
/// for `com.example.Service,`. A template with the framed variable there
/// takes the word, whatever shape the word has.
fn framed_wild(tok: &str) -> Option<String> {
    keyed_wild(tok)
        .or_else(|| bracketed_wild(tok))
        .or_else(|| punct_wild(tok))
}

/// `<*>,` for `word,`, `"<*>"` for `"word"`: a word with punctuation
/// before or after it (a bare word is a bare variable's already).
fn punct_wild(tok: &str) -> Option<String> {
    if is_wild(tok) {
        return None;
    }
    let head = tok.find(|c: char| !is_punct(c))?;
    let tail = tok
        .char_indices()
        .rfind(|(_, c)| !is_punct(*c))
        .map(|(i, c)| i + c.len_utf8())?;
    let (pre, post) = (&tok[..head], &tok[tail..]);
    // Brackets are [`bracketed_wild`]'s; a frame must be there.
    if (pre.is_empty() && post.is_empty()) || pre.contains(['(', '[']) || post.contains([')', ']'])
    {
        return None;
    }
    Some(format!("{pre}{WILDCARD}{post}"))
}

/// `(<*>).` for a bracketed word `(httpd).` (one token that opens and
/// closes its bracket), None for anything else.
fn bracketed_wild(tok: &str) -> Option<String> {
    if is_wild(tok) || !closes_own_bracket(tok) {
        return None;
    }
    let head = tok.find(|c: char| !is_punct(c))?;
    let tail = tok
        .char_indices()
        .rfind(|(_, c)| !is_punct(*c))
        .map(|(i, c)| i + c.len_utf8())?;
    (head < tail).then(|| format!("{}{WILDCARD}{}", &tok[..head], &tok[tail..]))
}

/// Whether a template token is a framed variable (`key=<*>`, `(<*>).`):
/// one wildcard, a key or punctuation before it, punctuation after it.
fn is_framed_wild(tok: &str) -> bool {
    let Some(at) = tok.find(WILDCARD) else {
        return false;
    };
    let (head, tail) = (&tok[..at], &tok[at + WILDCARD.len()..]);
    if tok == WILDCARD || tail.contains(WILDCARD) || !tail.chars().all(is_punct) {
        return false;
    }
    head.chars().all(is_punct)
        || head
            .strip_suffix('=')
            .is_some_and(|k| !k.is_empty() && !k.contains(WILDCARD))
}

fn keyed_wild(tok: &str) -> Option<String> {
    let eq = tok.find('=')?;
    let value = &tok[eq + 1..];
    if value.is_empty() || value.contains(WILDCARD) {
        return None;
    }
    let tail_at = value
        .char_indices()
        .rfind(|(_, c)| !is_punct(*c))
        .map(|(i, c)| i + c.len_utf8())?;
    Some(format!("{}{WILDCARD}{}", &tok[..=eq], &value[tail_at..]))
}

/// The mask of a template's variable positions, bare (`<*>`) or framed
/// (`(<*>).`, `key=<*>`, `<*>,`): a bit per position. A message joins a
/// template whatever shape its values take there, as long as a framed
/// variable's frame fits ([`fits_frame`]).
fn mask_of(tokens: &[String]) -> u64 {
    tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| t.as_str() == WILDCARD || is_framed_wild(t))
        .fold(0u64, |m, (i, _)| m | (1u64 << i))
}

/// Whether token `tok` fits template token `tmpl` at a variable position:
/// anything fits a bare `<*>`; a framed one takes a token with its frame
/// (`(mode=fast)` fits `(<*>)`, `gid=5` does not fit `uid=<*>`).
fn fits_frame(tmpl: &str, tok: &str) -> bool {
    if tmpl == WILDCARD || tmpl == tok {
        return true;
    }
    match tmpl.split_once(WILDCARD) {
        Some((pre, post)) => {
            tok.len() > pre.len() + post.len() && tok.starts_with(pre) && tok.ends_with(post)
        }
        None => false,
    }
}

/// A hash of `tokens` with the positions in `blank` left out (and `extra`
/// too, when it is a position): the key of the indexes.
fn hash_blanked(tokens: &[String], blank: u64, extra: Option<usize>) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    tokens.len().hash(&mut h);
    blank.hash(&mut h);
    extra.hash(&mut h);
    for (i, t) in tokens.iter().enumerate() {
        if blank & (1u64 << i) != 0 || extra == Some(i) {
            0u8.hash(&mut h);
        } else {
            t.hash(&mut h);
        }
    }
    h.finish()
}

fn index_add(map: &mut HashMap<u64, Vec<u64>>, key: u64, id: u64) {
    let v = map.entry(key).or_default();
    if v.len() < MAX_PER_KEY && !v.contains(&id) {
        v.push(id);
    }
}

fn index_remove(map: &mut HashMap<u64, Vec<u64>>, key: u64, id: u64) {
    if let Some(v) = map.get_mut(&key) {
        v.retain(|x| *x != id);
        if v.is_empty() {
            map.remove(&key);
        }
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
        let sighting = self.add_tokens(tokens.as_slice(), time, level);
        self.scratch = tokens;
        if self.cache.len() >= MESSAGE_CACHE {
            self.cache.clear();
        }
        self.cache.insert(key, sighting.id);
        sighting
    }

    /// Counts another line of known template `id`.
    fn seen_again(&mut self, id: u64, time: i64, level: Option<Level>) -> Option<Sighting> {
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
    fn find(&self, tokens: &[String]) -> Option<u64> {
        if let Some(id) = self.find_shape(tokens) {
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
            if let Some(id) = self.find_shape(&probe) {
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
            if let Some(id) = self.find_shape(&joined) {
                return Some(id);
            }
        }
        None
    }

    /// [`Miner::find`] for the tokens as they are.
    fn find_shape(&self, tokens: &[String]) -> Option<u64> {
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
                let fits = literal
                    && t.tokens.iter().zip(tokens).enumerate().all(|(i, (a, b))| {
                        if mask & (1u64 << i) != 0 {
                            fits_frame(a, b)
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

    fn add_tokens(&mut self, tokens: &[String], time: i64, level: Option<Level>) -> Sighting {
        if let Some(id) = self.find(tokens) {
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
    fn register(&mut self, id: u64) {
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
    fn unregister(&mut self, id: u64) {
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

    /// Merges the siblings of `id` that differ from it in one position
    /// into one template with a wildcard there, once `variable_after`
    /// distinct values were seen in that position; repeats while merges
    /// make more. Returns the template `id`'s lines now belong to.
    fn generalise(&mut self, id: u64) -> Option<u64> {
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
    fn subsume(&mut self, id: u64) -> u64 {
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
        let tokens = t.tokens.clone();
        let mut group: Vec<u64> = found.iter().map(|(o, _)| *o).collect();
        group.push(id);
        group.sort_unstable();
        group.dedup();
        self.fold(&group, tokens).unwrap_or(id)
    }

    /// Merges templates that differ in position `q` only into the oldest,
    /// which gets a wildcard there (and absorbs a twin that already had
    /// one). Returns the survivor.
    fn merge(&mut self, group: &[u64], q: usize) -> u64 {
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
                self.absorb(&mut merged, &t);
                self.lru.pop(&id);
                self.aliases.put(id, survivor);
                self.merged += 1;
            }
        }
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
    /// [`MAX_VALUE_WORDS`] of them, each a scan of the templates.
    fn revisit(&mut self, mut id: u64) -> u64 {
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
    fn absorb_fitting(&mut self, id: u64) -> u64 {
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
        let tokens = t.tokens.clone();
        let mut group = fitting;
        group.push(id);
        group.sort_unstable();
        self.fold(&group, tokens).unwrap_or(id)
    }

    /// Folds the templates of `group` (sorted, deduplicated) into its
    /// oldest, which takes `tokens`; the others' ids answer to it through
    /// the alias table. The survivor, None if it was gone.
    fn fold(&mut self, group: &[u64], tokens: Vec<String>) -> Option<u64> {
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
        self.templates.insert(survivor, merged);
        self.lru.promote(&survivor);
        self.register(survivor);
        Some(survivor)
    }

    fn absorb(&self, into: &mut Template, t: &Template) {
        into.count += t.count;
        into.first_seen = into.first_seen.min(t.first_seen);
        into.last_seen = into.last_seen.max(t.last_seen);
        into.levels.merge(&t.levels);
    }

    /// Forgets a template.
    fn remove(&mut self, id: u64) {
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
            templates,
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
                },
            );
            m.lru.put(t.id, ());
            m.register(t.id);
        }
        m
    }
}

/// Writes a saved form to `path` atomically (temporary file, rename).
pub fn save(path: &std::path::Path, state: &MinerState) -> Result<(), MiningError> {
    let body = serde_json::to_vec(state).map_err(|e| MiningError::Format {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    crate::durable::write_atomic(path, &body).map_err(|e| MiningError::Io {
        path: e.path,
        source: e.source,
    })
}

/// Reads a saved form.
pub fn load(path: &std::path::Path) -> Result<MinerState, MiningError> {
    let text = std::fs::read_to_string(path).map_err(|source| MiningError::Io {
        path: path.display().to_string(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| MiningError::Format {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

/// Whether a token (without surrounding punctuation) is a variable: a
/// number, a duration (`1.5s`, `250ms`), hex, an address, a UUID or any
/// other token holding a digit (IDs, versions, sizes) — except short names
/// with one digit (`ssh2`, `ipv6`) — and prefixed IDs without digits.
fn is_variable(core: &str) -> bool {
    let b = core.as_bytes();
    // One pass: what kinds of bytes the token has.
    let (mut digits, mut alnum, mut hex_letters, mut dot) = (0usize, true, true, false);
    for &c in b {
        if c.is_ascii_digit() {
            digits += 1;
        } else if !c.is_ascii_alphabetic() {
            alnum = false;
            dot |= c == b'.';
        }
        hex_letters &= matches!(c, b'a'..=b'f' | b'A'..=b'F');
    }
    if digits > 0 {
        // A short word with one digit is a name, not a value: ssh2,
        // ipv6, http2, k8s, s3.
        let name = digits == 1 && b.len() <= 6 && b[0].is_ascii_alphabetic() && alnum;
        return !name;
    }
    if alnum {
        // Hex without a digit (`deadbeef`), 8 characters or more.
        return b.len() >= 8 && hex_letters;
    }
    // A path or a URL (`/latest/meta-data`, `./run`, `C:\\Windows`, `https://…`).
    if (b.len() >= 2 && b[0] == b'/')
        || core.starts_with("./")
        || core.starts_with("../")
        || core.starts_with("~/")
        || core.contains("://")
        || (b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'\\')
    {
        return true;
    }
    if dot && is_domain(core) {
        return true;
    }
    // A prefixed ID (`RM_hXkTqfzqjBkR`), not a constant (`EGRESS_FAILED`).
    if let Some((p, rest)) = core.split_once('_') {
        if (1..=4).contains(&p.len())
            && p.bytes().all(|c| c.is_ascii_uppercase())
            && rest.len() >= 6
            && rest.bytes().all(|c| c.is_ascii_alphanumeric())
            && rest.bytes().any(|c| c.is_ascii_lowercase())
        {
            return true;
        }
    }
    false
}

/// A host name (`ns.example.com`, `db-3.eu.example.de`): labels of letters,
/// digits and `-` joined by dots, ending in a top-level domain. A Java
/// package (`com.android.systemui`) or a file (`main.go`) is not one.
fn is_domain(core: &str) -> bool {
    let Some((_, tld)) = core.rsplit_once('.') else {
        return false;
    };
    let dots = core.bytes().filter(|b| *b == b'.').count();
    let labels_ok = core
        .split('.')
        .all(|l| !l.is_empty() && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'));
    let known = matches!(
        tld,
        "com"
            | "net"
            | "org"
            | "io"
            | "edu"
            | "gov"
            | "mil"
            | "info"
            | "biz"
            | "local"
            | "internal"
            | "lan"
            | "arpa"
            | "cloud"
            | "dev"
            | "app"
    );
    let country = dots >= 2 && tld.len() == 2 && tld.bytes().all(|c| c.is_ascii_lowercase());
    labels_ok && (known || country)
}

/// Punctuation a token's core is taken out of: brackets, quotes, and the
/// separators that follow words.
fn is_punct(c: char) -> bool {
    matches!(
        c,
        '(' | ')'
            | '['
            | ']'
            | '{'
            | '}'
            | ','
            | ';'
            | ':'
            | '.'
            | '<'
            | '>'
            | '"'
            | '\''
            | '!'
            | '?'
    )
}

/// Units that belong to the number before them (`5 ms`, `1.16 KB`).
fn is_unit(w: &str) -> bool {
    matches!(
        w,
        "ns" | "us"
            | "µs"
            | "ms"
            | "s"
            | "sec"
            | "secs"
            | "second"
            | "seconds"
            | "min"
            | "mins"
            | "minute"
            | "minutes"
            | "h"
            | "hr"
            | "hrs"
            | "hour"
            | "hours"
            | "day"
            | "days"
            | "B"
            | "KB"
            | "MB"
            | "GB"
            | "TB"
            | "KiB"
            | "MiB"
            | "GiB"
            | "TiB"
            | "kB"
            | "bytes"
            | "byte"
            | "%"
    )
}

/// Whether a `key=value` value is a variable: it has a digit, is quoted,
/// or reads like a path, host, address or dotted name; plain words
/// (`user=root`, `ws=null`, `state=running`) stay.
fn value_is_variable(v: &str) -> bool {
    let core = v.trim_matches(is_punct);
    v.starts_with(['"', '\''])
        || core.bytes().any(|b| b.is_ascii_digit())
        || core.contains(['.', '/', ':', '@', '\\'])
        || (!core.is_empty() && is_variable(core))
}

/// Masks one whitespace-separated token (the rules, in order):
///
/// | token | masked | rule |
/// |---|---|---|
/// | `port=22`, `name=com.android.ui`, `tag="View Lock"` | `port=<*>`, `name=<*>`, `tag=<*>` | `key=value`: the key stays, a value with a digit, a dot, a slash, a colon, or quotes is a variable |
/// | `user=root`, `logname=` | unchanged | a plain word or an empty value stays |
/// | `(10.0.0.1:22),` | `(<*>),` | punctuation around a variable stays |
/// | `<1`, `~5` | `<*>` | a sign before a number is the number's |
/// | `()`, `[]` | `(<*>)`, `[<*>]` | an empty bracket is an empty value |
/// | `index:0`, `onExtend:1514038530000` | `index:<*>`, `onExtend:<*>` | a name keeps its `:`/`,`/`#`-joined value masked |
/// | `"GET`, `HTTP/1.1"` | `"GET`, `<*>"` | quotes are punctuation: a quoted text is tokenised word by word |
/// | `blk_-69522958`, `node-140`, `0x1F`, `LOCAL(0)` | `<*>` | a digit makes a variable… |
/// | `ssh2`, `ipv6` | `ssh2`, `ipv6` | …except in a short name with one digit |
/// | `/latest/meta-data/`, `https://x.io/a`, `C:\\Temp` | `<*>` | paths and URLs are variables (`i/o` is a word) |
/// | `ns.example.com`, `db-3.eu.example.de` | `<*>` | host names are variables (`com.android.ui`, `main.go` are not) |
/// | `RM_hXkTqfzqjBkR`, `deadbeefcafe` | `<*>` | prefixed IDs and long hex without digits |
/// | `EGRESS_FAILED`, `PacketResponder` | unchanged | words and constants stay |
fn mask_token(tok: &str, out: &mut String) {
    use std::fmt::Write as _;
    if let Some((k, v)) = tok.split_once('=') {
        let key = k.trim_start_matches(is_punct);
        if !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
        {
            if v.is_empty() || !value_is_variable(v) {
                out.push_str(tok);
                return;
            }
            // Keep the value's closing punctuation (`(uid=0)` → `(uid=<*>)`).
            let tail_at = v
                .char_indices()
                .rfind(|(_, c)| !is_punct(*c))
                .map_or(v.len(), |(i, c)| i + c.len_utf8());
            let tail = &v[tail_at..];
            let tail = if v.starts_with(['"', '\'']) {
                tail.trim_start_matches(['"', '\''])
            } else {
                tail
            };
            let _ = write!(out, "{k}={WILDCARD}{tail}");
            return;
        }
    }
    let start = tok.find(|c: char| !is_punct(c)).unwrap_or(tok.len());
    let end = tok.rfind(|c: char| !is_punct(c)).map_or(start, |i| {
        i + tok[i..].chars().next().map_or(1, char::len_utf8)
    });
    let (pre, core, post) = (
        &tok[..start],
        &tok[start..end.max(start)],
        &tok[end.max(start)..],
    );
    if core.is_empty() {
        // `()`, `[]`, `{}`: an empty value.
        match tok {
            "()" | "[]" | "{}" | "<>" => {
                let _ = write!(out, "{}{WILDCARD}{}", &tok[..1], &tok[1..]);
            }
            _ => out.push_str(tok),
        }
        return;
    }
    if core == WILDCARD {
        out.push_str(tok);
        return;
    }
    // A name and its value: `index:0`, `cancelNotification,index:0`.
    if !core.contains(['/', '(', '[', '{']) {
        if let Some(sep) = core.rfind([':', ',', '#']) {
            let (name, value) = (&core[..sep], &core[sep + 1..]);
            let letters = name.bytes().filter(u8::is_ascii_alphabetic).count();
            if letters >= 2
                && !name.bytes().any(|b| b.is_ascii_digit() || b == b'.')
                && !value.is_empty()
                && is_variable(value)
            {
                let _ = write!(out, "{pre}{}{WILDCARD}{post}", &core[..=sep]);
                return;
            }
        }
    }
    if is_variable(core) {
        // A sign before a number is part of it (`<1 sec`, `~5`); a bracket
        // opened inside the value closes with it (`LOCAL(0),` → `<*>,`).
        let pre = pre.trim_start_matches(['<', '>', '~']);
        out.push_str(pre);
        out.push_str(WILDCARD);
        if core.contains(['(', '[', '{']) {
            let mut post = post.to_string();
            for (open, close) in [('(', ')'), ('[', ']'), ('{', '}')] {
                if core.contains(open) && !pre.contains(open) {
                    if let Some(at) = post.find(close) {
                        post.remove(at);
                    }
                }
            }
            out.push_str(&post);
        } else {
            out.push_str(post);
        }
    } else {
        out.push_str(tok);
    }
}

/// The end of the token at `i` (the next space), and whether it is a word
/// that [`mask_token`] leaves as it is: ASCII letters between punctuation
/// (no `=`), and not 8 or more hex letters. One pass over its bytes.
fn scan_token(b: &[u8], i: usize) -> (usize, bool) {
    let (mut core, mut gap, mut letters, mut hex) = (0usize, false, true, true);
    let mut end = b.len();
    for (k, &c) in b[i..].iter().enumerate() {
        let class = BYTE_CLASS[usize::from(c)];
        if class & SPACE != 0 {
            end = i + k;
            break;
        }
        if class & PUNCT != 0 {
            gap |= core > 0;
            continue;
        }
        // Punctuation inside the core (`a.b`) makes it more than a word;
        // so does anything but a letter (`=`, a digit, `*`, UTF-8).
        letters &= class & ALPHA != 0 && !gap;
        hex &= class & HEX != 0;
        core += 1;
    }
    let word = core > 0 && letters && !(core >= 8 && hex);
    (end, word)
}

const SPACE: u8 = 1;
const PUNCT: u8 = 2;
const ALPHA: u8 = 4;
const HEX: u8 = 8;

/// What [`scan_token`] needs of each byte, looked up once: ASCII space,
/// [`is_punct`], letter, hex digit.
static BYTE_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0usize;
    while c < 256 {
        let b = c as u8;
        let mut v = 0;
        if b.is_ascii_whitespace() {
            v |= SPACE;
        }
        if matches!(
            b,
            b'(' | b')'
                | b'['
                | b']'
                | b'{'
                | b'}'
                | b','
                | b';'
                | b':'
                | b'.'
                | b'<'
                | b'>'
                | b'"'
                | b'\''
                | b'!'
                | b'?'
        ) {
            v |= PUNCT;
        }
        if b.is_ascii_alphabetic() {
            v |= ALPHA;
        }
        if b.is_ascii_hexdigit() {
            v |= HEX;
        }
        t[c] = v;
        c += 1;
    }
    t
};

/// Whether a timestamp may start at a token ([`stamp_len`] is asked only
/// then): a digit, a bracket, klog's letter and date, or a month or
/// weekday name.
///
/// [`stamp_len`]: crate::decode::header::stamp_len
fn may_start_stamp(tok: &[u8]) -> bool {
    match tok.first() {
        Some(c) if c.is_ascii_digit() || matches!(c, b'[' | b'(') => true,
        // klog's `I0501 12:00:40.118204`.
        Some(b'I' | b'W' | b'E' | b'F') if tok.get(1).is_some_and(u8::is_ascii_digit) => true,
        Some(c) if c.is_ascii_alphabetic() => {
            let mut head = [0u8; 3];
            for (h, c) in head.iter_mut().zip(tok) {
                *h = c.to_ascii_lowercase();
            }
            matches!(
                &head,
                b"jan"
                    | b"feb"
                    | b"mar"
                    | b"apr"
                    | b"may"
                    | b"jun"
                    | b"jul"
                    | b"aug"
                    | b"sep"
                    | b"oct"
                    | b"nov"
                    | b"dec"
                    | b"mon"
                    | b"tue"
                    | b"wed"
                    | b"thu"
                    | b"fri"
                    | b"sat"
                    | b"sun"
            )
        }
        _ => false,
    }
}

/// Where a `key="quoted value"` that spans spaces ends (after its closing
/// quote), if the token at `i` starts one.
fn quoted_value_end(b: &[u8], i: usize, end: usize) -> Option<usize> {
    let tok = &b[i..end];
    let eq = tok.iter().position(|c| *c == b'=')?;
    let q = *tok.get(eq + 1)?;
    if !(q == b'"' || q == b'\'') || tok.len() > eq + 2 && tok[tok.len() - 1] == q {
        return None;
    }
    let close = b[i + eq + 2..].iter().position(|c| *c == q)?;
    let stop = i + eq + 2 + close + 1;
    // The token goes on to the next space.
    Some(
        b[stop..]
            .iter()
            .position(u8::is_ascii_whitespace)
            .map_or(b.len(), |p| stop + p),
    )
}

/// Splits a message into masked tokens (`mask_token`'s rules): a
/// timestamp inside the message (`at Fri Jun 17 07:07:00 2005`) is one
/// variable, a run of variables (`( 3552 3534 3375 )`) is one, a unit after
/// a variable (`5 ms`, `1190 bytes (1.16 KB)`) is the variable's, and a
/// `key="value with spaces"` is one token; at most [`MAX_TOKENS`].
pub fn tokenize(message: &str) -> Vec<String> {
    let mut t = Tokens::default();
    tokenize_into(message, &mut t);
    t.as_slice().to_vec()
}

/// A reusable list of tokens: the strings of earlier messages are kept
/// and written over, so tokenising a message allocates nothing once the
/// buffers have grown.
#[derive(Debug, Default)]
struct Tokens {
    bufs: Vec<String>,
    len: usize,
}

impl Tokens {
    fn clear(&mut self) {
        self.len = 0;
    }

    /// A new, empty last token.
    fn push(&mut self) -> &mut String {
        if self.len == self.bufs.len() {
            self.bufs.push(String::new());
        }
        let s = &mut self.bufs[self.len];
        s.clear();
        self.len += 1;
        s
    }

    fn as_slice(&self) -> &[String] {
        &self.bufs[..self.len]
    }
}

/// [`tokenize`] into `out`.
fn tokenize_into(message: &str, out: &mut Tokens) {
    out.clear();
    let text = message.trim();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() && out.len < MAX_TOKENS {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let (end, word) = scan_token(b, i);
        // A stamp ends where a token may: `00:11:43:e3:ba:c3` is an
        // address, not a time of day and the rest.
        let stamp = if may_start_stamp(&b[i..end]) {
            crate::decode::header::stamp_len(text, i).filter(|n| {
                b.get(i + n)
                    .is_none_or(|c| c.is_ascii_whitespace() || b",;)]\"'".contains(c))
            })
        } else {
            None
        };
        let slot = out.push();
        match stamp {
            Some(n) => {
                i += n;
                slot.push_str(WILDCARD);
            }
            // Most tokens are words: nothing to mask.
            None if word => {
                slot.push_str(&text[i..end]);
                i = end;
            }
            None => {
                let mut end = end;
                if let Some(e) = quoted_value_end(b, i, end) {
                    end = e;
                }
                mask_token(&text[i..end], slot);
                i = end;
            }
        }
        let n = out.len;
        if n < 2 || out.bufs[n - 2] != WILDCARD {
            continue;
        }
        let tok = &out.bufs[n - 1];
        // A run of variables is one; a unit or a bracketed value after a
        // variable is the variable's.
        let core = tok.trim_matches(is_punct);
        // A bracketed size that opens after its number (`1190 bytes
        // (1.16 KB)`) is the number's. A bracketed value on its own
        // (`27154 (ld-linux.so.2).`) keeps its place: its neighbour in
        // another line may read as a word (`28473 (httpd).`), and a
        // value's shape must not change the token count.
        let opens_size = is_wild(tok) && tok.starts_with(['(', '[']) && !closes_own_bracket(tok);
        if tok == WILDCARD || is_unit(core) || opens_size {
            let tail = tok.trim_start_matches(|c: char| !is_punct(c) || c == '(' || c == '[');
            let keep = (tok != WILDCARD && tail.ends_with([',', ':', ';']))
                .then(|| tail.as_bytes()[tail.len() - 1] as char);
            out.len -= 1;
            if let Some(c) = keep {
                out.bufs[n - 2].push(c);
            }
            continue;
        }
        // `<*> <*>"`: the variable run ends where the punctuation does.
        if let Some(rest) = tok.strip_prefix(WILDCARD) {
            if !rest.is_empty() && rest.chars().all(is_punct) {
                out.bufs.swap(n - 2, n - 1);
                out.len -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn miner() -> Miner {
        Miner::new(MinerConfig::default())
    }

    fn masked(m: &str) -> String {
        tokenize(m).join(" ")
    }

    #[test]
    fn variables_are_masked_by_one_rule_set() {
        // One row per rule of `mask_token` and `tokenize`.
        let rows = [
            (
                "failed to open /data/seg-0042.log: no space left on device",
                "failed to open <*>: no space left on device",
            ),
            (
                "dial tcp 10.0.0.21:6379: i/o timeout after 1.5s",
                "dial tcp <*>: i/o timeout after <*>",
            ),
            // key=value: values with digits, dots, quotes are variables.
            (
                r#"acquire lock=233570404, flags=0x1, tag="View Lock", name=com.android.systemui, ws=null"#,
                "acquire lock=<*>, flags=<*>, tag=<*>, name=<*>, ws=null",
            ),
            ("session opened for user root by (uid=0)", "session opened for user root by (uid=<*>)"),
            ("user=jörg1 team=dév", "user=<*> team=dév"),
            ("logname= uid=0 euid=0 tty=NODEVssh ruser= rhost=218.188.2.4", "logname= uid=<*> euid=<*> tty=NODEVssh ruser= rhost=<*>"),
            // Quotes are punctuation: methods stay words.
            (
                r#"10.11.10.1 "GET /v2/servers/detail HTTP/1.1" status: 200 len: 1893 time: 0.2477829"#,
                r#"<*> "GET <*>" status: <*> len: <*> time: <*>"#,
            ),
            // Units and bracketed sizes belong to their numbers; a run of
            // variables is one.
            (
                "close, 1190 bytes (1.16 KB) sent, 1671 bytes (1.63 KB) received, lifetime <1 sec",
                "close, <*> sent, <*> received, lifetime <*>",
            ),
            ("close, 0 bytes sent, 0 bytes received, lifetime 00:01", "close, <*> sent, <*> received, lifetime <*>"),
            ("Fan speeds ( 3552 3534 3375 4245 3515 3479 )", "Fan speeds ( <*> )"),
            // An embedded timestamp is one variable; a bracketed value
            // keeps its place (its neighbour may be a word: `(localhost)`).
            (
                "connection from 24.54.76.216 (host.example.net) at Fri Jun 17 07:07:00 2005",
                "connection from <*> (<*>) at <*>",
            ),
            // Names keep their joined values masked; empty brackets are a value.
            ("cancelNotification,index:0", "cancelNotification,index:<*>"),
            ("onExtend:1514038530000 14 0 4", "onExtend:<*> <*>"),
            ("connection from 202.82.200.188 () at", "connection from <*> (<*>) at"),
            ("synchronized to LOCAL(0), stratum 10", "synchronized to <*>, stratum <*>"),
            // IDs, hex, prefixed IDs; words and constants stay.
            (
                "room RM_hXkTqfzqjBkR closed by deadbeefcafe after EGRESS_FAILED in PacketResponder",
                "room <*> closed by <*> after EGRESS_FAILED in PacketResponder",
            ),
            (
                "Failed password for root from 183.62.140.253 port 54447 ssh2 over ipv6 worker42",
                "Failed password for root from <*> port <*> ssh2 over ipv6 <*>",
            ),
        ];
        for (line, want) in rows {
            assert_eq!(masked(line), want, "{line}");
        }
        assert_eq!(tokenize("  ").len(), 0);
        assert_eq!(tokenize(&"w ".repeat(500)).len(), MAX_TOKENS);
    }

    #[test]
    fn the_byte_table_agrees_with_is_punct() {
        for c in 0u8..128 {
            assert_eq!(
                BYTE_CLASS[usize::from(c)] & PUNCT != 0,
                is_punct(char::from(c)),
                "{c}"
            );
        }
        assert!((128..256).all(|c| BYTE_CLASS[c] == 0));
    }

    #[test]
    fn a_key_keeps_its_name_when_its_values_vary() {
        let mut m = miner();
        // Word values that vary become `key=<*>`, in either order with a
        // masked value, and the key stays.
        let a = m.add("authentication failure; rhost=10.0.0.1 user=admin", 1, None);
        let b = m.add("authentication failure; rhost=10.0.0.2 user=test9", 2, None);
        let c = m.add("authentication failure; rhost=10.0.0.3 user=root", 3, None);
        assert_eq!(m.canonical(a.id), m.canonical(b.id));
        assert_eq!(m.canonical(c.id), m.canonical(b.id));
        let t = m.get(m.canonical(c.id)).map(|t| t.text());
        assert_eq!(
            t.as_deref(),
            Some("authentication failure; rhost=<*> user=<*>")
        );
        let mut m = miner();
        for (i, u) in ["admin", "root", "guest", "oracle"].iter().enumerate() {
            m.add(
                &format!("session opened for user={u} by (uid=0)"),
                i as i64,
                None,
            );
        }
        let id = m.lookup("session opened for user=nobody by (uid=0)");
        let t = id.and_then(|id| m.get(id)).map(|t| t.text());
        assert_eq!(
            t.as_deref(),
            Some("session opened for user=<*> by (uid=<*>)")
        );
        assert_eq!(m.len(), 1);
        // Another key is another event.
        assert_ne!(m.lookup("session opened for group=wheel by (uid=0)"), id);
    }

    #[test]
    fn same_shape_joins_and_different_messages_stay_apart() {
        let mut m = miner();
        let a = m.add(
            "Receiving block blk_38865049064139660 src: /10.250.19.102:54106",
            1,
            Some(Level::Info),
        );
        let b = m.add(
            "Receiving block blk_-6952295868487656571 src: /10.250.10.6:40524",
            2,
            Some(Level::Info),
        );
        assert!(a.created && !b.created && a.id == b.id);
        let c = m.add("Deleting block blk_38865049064139660 file /mnt/hadoop/dfs/data/current/subdir9/blk_38865049064139660", 3, None);
        assert_ne!(c.id, a.id);
        assert_eq!(m.get(a.id).map(|t| t.count), Some(2));
        assert_eq!(b.previous, Some(1));
        // One word apart is another event (not Drain's "similar enough").
        let x = m.add(
            "Received disconnect from 10.0.0.1: 11: Bye Bye [preauth]",
            4,
            None,
        );
        let y = m.add(
            "Received disconnect from 10.0.0.2: 11: disconnected by user",
            5,
            None,
        );
        assert_ne!(x.id, y.id);
        // Messages of variables only join each other, never a word.
        let v = m.add("14 0 4", 6, None);
        let w = m.add("7 7 7", 7, None);
        let word = m.add("initEnvironment", 8, None);
        assert_eq!(v.id, w.id);
        assert_ne!(word.id, v.id);
    }

    /// An event's instances keep one template whatever shape their values
    /// take: a bracketed name that reads as a variable (`ld-linux.so.2`)
    /// or as a word (`httpd`), in either order.
    #[test]
    fn a_values_shape_does_not_split_its_event() {
        for first in ["ld-linux.so.2", "httpd"] {
            let mut m = miner();
            let a = m
                .add(
                    &format!("Out of Memory: Killed process 27154 ({first})."),
                    0,
                    None,
                )
                .id;
            for (i, name) in ["httpd", "ld-linux.so.2", "httpd", "sshd"]
                .iter()
                .enumerate()
            {
                let s = m.add(
                    &format!("Out of Memory: Killed process {} ({name}).", 28000 + i),
                    1,
                    None,
                );
                assert_eq!(m.canonical(s.id), m.canonical(a), "{first} then {name}");
            }
            assert_eq!(m.len(), 1);
        }
        // A constant bracketed word after a variable stays a literal of
        // its template.
        let mut m = miner();
        let a = m
            .add(
                "input_userauth_request: invalid user admin [preauth]",
                0,
                None,
            )
            .id;
        let b = m
            .add(
                "input_userauth_request: invalid user 1234 [preauth]",
                0,
                None,
            )
            .id;
        assert_eq!(m.canonical(a), m.canonical(b));
        let text = m.get(m.canonical(b)).map(Template::text);
        assert_eq!(
            text.as_deref(),
            Some("input_userauth_request: invalid user <*> [preauth]")
        );
    }

    /// A variable position takes a value of any shape once it is one,
    /// bare or framed (`(<*>)`, `<*>,`, `key=<*>`), in several positions
    /// at once, and templates founded before the position became a
    /// variable join it when it does.
    #[test]
    fn variable_positions_take_values_of_any_shape() {
        let mut m = miner();
        let a = m
            .add(
                "connection from 24.54.76.216 (host1.example.net) at Fri Jun 17 07:07:00 2005",
                0,
                None,
            )
            .id;
        // A word where the address was, a word in the bracket.
        let b = m
            .add(
                "connection from worker-7 (localhost) at Sun Jul 17 12:30:47 2005",
                1,
                None,
            )
            .id;
        assert_eq!(m.canonical(a), m.canonical(b));
        let mut m = miner();
        let a = m
            .add("synchronized to 10.100.20.250, stratum 3", 0, None)
            .id;
        let b = m
            .add("synchronized to ntp.example.net, stratum 2", 0, None)
            .id;
        assert_eq!(m.canonical(a), m.canonical(b));
        // `uid=<*>` takes `uid=root`, not `gid=5`.
        let mut m = miner();
        let a = m.add("session opened by (uid=0)", 0, None).id;
        let b = m.add("session opened by (uid=root)", 0, None).id;
        let c = m.add("session opened by (gid=5)", 0, None).id;
        assert_eq!(m.canonical(a), m.canonical(b));
        assert_ne!(m.canonical(a), m.canonical(c));
        // Founded before the positions were variables: absorbed when they
        // become so.
        let mut m = miner();
        let early = m
            .add(
                "Failed password for invalid user webmaster from 173.234.31.186 port 38926 ssh2",
                0,
                None,
            )
            .id;
        for u in ["admin", "oracle", "test", "guest", "support"] {
            m.add(
                &format!("Failed password for invalid user {u} from 10.0.0.9 port 22 ssh2"),
                1,
                None,
            );
        }
        let later = m
            .add(
                "Failed password for invalid user ftp from 10.0.0.7 port 2201 ssh2",
                2,
                None,
            )
            .id;
        assert_eq!(m.canonical(early), m.canonical(later));
        assert_eq!(m.len(), 1);
    }

    /// A word seen before a variable elsewhere (`user` of `session closed
    /// for user <*>`) makes three values enough where it stands, also for
    /// templates founded before it was known; two are not (`state
    /// 'Active'`, `state 'Inactive'` stay two events).
    #[test]
    fn a_word_known_to_precede_values_needs_fewer_of_them() {
        let mut m = miner();
        for u in ["cyrus", "news", "test"] {
            m.add(&format!("session opened for user {u} by (uid=0)"), 0, None);
        }
        assert_eq!(m.len(), 3, "three users and nothing known yet");
        for u in ["root", "admin", "guest", "mail", "ftp"] {
            m.add(&format!("session closed for user {u}"), 1, None);
        }
        let s = m.add("session opened for user cyrus by (uid=0)", 2, None);
        let text = m.get(s.id).map(Template::text);
        assert_eq!(
            text.as_deref(),
            Some("session opened for user <*> by (uid=<*>)")
        );
        assert_eq!(m.len(), 2);
        let mut m = miner();
        m.add("location state 42 reached", 0, None);
        for s in ["'Active'", "'Inactive'"] {
            m.add(&format!("icon in state {s} is shown"), 0, None);
        }
        assert_eq!(m.len(), 3);
    }

    /// A value that reads as a word beside a variable joins the template
    /// whose variable run stands there.
    #[test]
    fn a_word_beside_a_variable_run_joins_the_run() {
        let mut m = miner();
        let a = m
            .add(
                "BLOCK* NameSystem.allocateBlock: /user/root/part-00742 blk_-7878121102",
                0,
                None,
            )
            .id;
        let b = m
            .add(
                "BLOCK* NameSystem.allocateBlock: httpd blk_-4882986256",
                0,
                None,
            )
            .id;
        assert_eq!(m.canonical(a), m.canonical(b));
        // Not when too little of the line is left to name the event.
        let mut m = miner();
        let a = m
            .add("Launching attempt_1445144423722_0020_m_000000_0", 0, None)
            .id;
        let b = m
            .add("ATTEMPT_START task_1445144423722_0020_m_000000", 0, None)
            .id;
        assert_ne!(m.canonical(a), m.canonical(b));
    }

    /// An address whose first groups read like a clock is one token.
    #[test]
    fn a_mac_address_is_not_a_time_of_day() {
        assert_eq!(
            masked("DHCPDISCOVER from 00:11:43:e3:ba:c3 via eth1"),
            "DHCPDISCOVER from <*> via eth1"
        );
        assert_eq!(masked("at 12:00:40 the job ran"), "at <*> the job ran");
    }

    /// A first word varies only with the evidence of the rest of the
    /// line: many distinct words before a short common text.
    #[test]
    fn a_first_word_generalises_with_enough_distinct_words() {
        let mut m = miner();
        let daemons = [
            "cupsd", "klogd", "syslogd", "atd", "crond", "sshd", "xfs", "portmap",
        ];
        for d in &daemons[..7] {
            m.add(&format!("{d} startup succeeded"), 0, None);
        }
        assert_eq!(m.len(), 7, "seven daemons are not yet evidence");
        let s = m.add(&format!("{} startup succeeded", daemons[7]), 0, None);
        assert_eq!(m.len(), 1);
        assert_eq!(
            m.get(s.id).map(Template::text).as_deref(),
            Some("<*> startup succeeded")
        );
        // One shared word is not enough, however many first words.
        let mut m = miner();
        for d in daemons {
            m.add(&format!("{d} running"), 0, None);
        }
        assert_eq!(m.len(), daemons.len());
    }

    #[test]
    fn a_position_becomes_a_variable_after_enough_distinct_words() {
        let mut m = miner();
        let users = ["alice", "bob", "carol", "dave", "erin"];
        let ids: Vec<Sighting> = users
            .iter()
            .enumerate()
            .map(|(i, u)| m.add(&format!("session closed for user {u}"), i as i64, None))
            .collect();
        // Three users are three templates; the fourth makes the position a
        // variable: all four are one template, the oldest id, and the
        // others' ids answer to it.
        assert!(ids[..3].iter().all(|s| s.created));
        assert_eq!(ids[3].id, ids[0].id);
        assert!(!ids[3].created);
        assert_eq!(m.len(), 1);
        assert_eq!(m.canonical(ids[1].id), ids[0].id);
        assert_eq!(
            m.get(ids[0].id).map(Template::text).as_deref(),
            Some("session closed for user <*>")
        );
        assert_eq!(ids[4].id, ids[0].id);
        assert_eq!(m.get(ids[0].id).map(|t| t.count), Some(5));
        assert_eq!(m.merged(), 3);
        // Three values of a closed set stay three events.
        let methods: Vec<u64> = ["GET", "POST", "DELETE"]
            .iter()
            .map(|v| {
                m.add(&format!("10.0.0.1 \"{v} /x\" status: 200"), 9, None)
                    .id
            })
            .collect();
        assert_eq!(
            methods
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            3
        );
        // A one-word message has no company: `normal`, `running`, `warning`,
        // `failed` stay four.
        let one: Vec<u64> = ["normal", "running", "warning", "failed"]
            .iter()
            .map(|w| m.add(w, 10, None).id)
            .collect();
        assert_eq!(
            one.iter().collect::<std::collections::BTreeSet<_>>().len(),
            4
        );
        // Nor does the first word before a short text: `boot (command 1)`,
        // `wait (command 2)` … are events.
        let first: Vec<u64> = ["boot", "wait", "halt", "reset"]
            .iter()
            .enumerate()
            .map(|(i, w)| m.add(&format!("{w} (command {i})"), 11, None).id)
            .collect();
        assert_eq!(
            first
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            4
        );
    }

    #[test]
    fn caps_evict_least_recently_used_templates_and_count_them() {
        let mut m = Miner::new(MinerConfig {
            max_templates: 3,
            ..MinerConfig::default()
        });
        let mut created = 0;
        for (i, w) in ["alpha", "bravo", "charlie", "delta", "echo"]
            .iter()
            .enumerate()
        {
            created += u64::from(
                m.add(&format!("{w} went away unexpectedly here"), i as i64, None)
                    .created,
            );
            created += u64::from(m.add(&format!("{w} {w} {w} {w}"), i as i64, None).created);
        }
        assert_eq!(m.len(), 3);
        assert!(created >= 8, "{created}");
        assert_eq!(
            m.evicted() + m.merged(),
            created - 3,
            "every template made and gone is counted"
        );
        // The oldest went first: the newest word's templates are still there.
        assert!(m.templates().iter().any(|t| t.text().starts_with("echo")));
        // The indexes stay bounded too, whatever the variety.
        for i in 0..10_000 {
            m.add(&format!("word{i}x unique{i}y thing {i}"), i, None);
        }
        let entries = m.exact.len() + m.masked.len() + m.siblings.len();
        assert!(entries <= 3 * (MAX_TOKENS + 2), "{entries}");
    }

    #[test]
    fn state_round_trips_and_keeps_matching() {
        let mut m = miner();
        let a = m.add("worker 7 crashed with signal 11", 10, Some(Level::Error));
        m.add("worker 9 crashed with signal 6", 20, Some(Level::Error));
        m.add("lease renewed for shard alpha", 30, Some(Level::Info));
        let mut st = m.state();
        st.learn_until = Some(99);
        let dir = std::env::temp_dir().join(format!("sigwatch-mining-{}", std::process::id()));
        let path = dir.join("templates.json");
        save(&path, &st).unwrap();
        let back = load(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(back.learn_until, Some(99));
        let mut r = Miner::restore(&back, MinerConfig::default());
        assert_eq!(r.len(), 2);
        let again = r.add("worker 12 crashed with signal 9", 40, Some(Level::Error));
        assert_eq!(again.id, a.id);
        assert!(!again.created);
        assert_eq!(again.previous, Some(20));
        let fresh = r.add("brand new failure of the flux capacitor", 50, None);
        assert!(fresh.created && fresh.id > a.id);
    }
}
