//! Log-template mining: the Drain algorithm (He et al., ICWS 2017), online.
//! Messages that differ only in their variables — numbers, IDs, addresses,
//! hex, UUIDs, durations, quoted values — share a template such as
//! `failed to open <*>: no space left on device`. Novelty detection pages
//! on templates never seen before; `sigwatch templates` lists them.
//!
//! How a message finds its template: variables are masked to `<*>`, the
//! message is split into tokens, and a fixed-depth tree routes it by its
//! token count and its first tokens to a leaf holding a few templates; the
//! most similar one (the share of positions where the tokens agree) takes
//! it if similar enough, and positions that differ become `<*>`; otherwise
//! the message founds a new template.
//!
//! Written here rather than taken from a crate: the crates found
//! (`logdrain`, `drain3`) stamp templates with the wall clock (replay must
//! stay deterministic, on event time), bound templates only per leaf (the
//! tree itself grows with every new first token), or lock for
//! multi-threaded use that the single-threaded engine pays for without
//! needing. Here every structure is bounded — templates (an LRU, evictions
//! counted), leaves, tree nodes, tokens per message — and a cache of exact
//! messages skips the tree for the structured logs whose messages are
//! constant strings.

pub mod watch;

use crate::decode::payload::Level;
use lru::LruCache;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;

/// The placeholder of a variable.
pub const WILDCARD: &str = "<*>";

/// Tokens kept per message; the rest of a longer message is dropped.
pub const MAX_TOKENS: usize = 64;

/// Miner settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MinerConfig {
    /// Leading tokens that route a message down the tree.
    pub prefix_tokens: usize,
    /// Least share of agreeing positions for a message to join a template.
    pub similarity: f64,
    /// Children per tree node; past it new tokens share a wildcard child.
    pub max_children: usize,
    /// Templates per leaf; past it the least recently used one goes.
    pub max_per_leaf: usize,
    /// Templates in all; past it the least recently used one goes.
    pub max_templates: usize,
}

impl Default for MinerConfig {
    fn default() -> Self {
        MinerConfig {
            prefix_tokens: 2,
            similarity: 0.5,
            max_children: 100,
            max_per_leaf: 64,
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
    /// The tree keys it lives under (token count, then prefix keys).
    path: Vec<String>,
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

#[derive(Debug, Default, Clone)]
struct Node {
    children: HashMap<String, usize>,
    wildcard: Option<usize>,
    leaf: Vec<u64>,
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
    /// Tree keys.
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

/// Exact messages remembered (with their template) before the tree.
const MESSAGE_CACHE: usize = 4096;

/// The online miner.
pub struct Miner {
    cfg: MinerConfig,
    nodes: Vec<Node>,
    /// Token count → node.
    roots: HashMap<usize, usize>,
    templates: HashMap<u64, Template>,
    /// Recency of templates, for eviction.
    lru: LruCache<u64, ()>,
    /// Exact message hash → template id.
    cache: HashMap<u64, u64>,
    next_id: u64,
    evicted: u64,
}

/// Most tree nodes, relative to the template cap.
const NODES_PER_TEMPLATE: usize = 4;

impl Miner {
    /// An empty miner.
    pub fn new(cfg: MinerConfig) -> Miner {
        let cap = NonZeroUsize::new(cfg.max_templates.max(1)).unwrap_or(NonZeroUsize::MIN);
        Miner {
            cfg,
            nodes: Vec::new(),
            roots: HashMap::new(),
            templates: HashMap::new(),
            lru: LruCache::new(cap),
            cache: HashMap::new(),
            next_id: 1,
            evicted: 0,
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

    /// Templates evicted by the caps so far.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// A template by id.
    pub fn get(&self, id: u64) -> Option<&Template> {
        self.templates.get(&id)
    }

    /// The id a template answers to now: its own, or the one it was merged
    /// into.
    pub fn canonical(&self, id: u64) -> u64 {
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
            if let Some(s) = self.seen_again(id, time, level) {
                return s;
            }
        }
        let tokens = tokenize(message);
        let sighting = self.add_tokens(tokens, time, level);
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
        let tokens = tokenize(message);
        let path = self.path_of(&tokens);
        let node = self.walk(&path)?;
        self.best(node, &tokens).map(|(id, _)| id)
    }

    fn add_tokens(&mut self, tokens: Vec<String>, time: i64, level: Option<Level>) -> Sighting {
        let path = self.path_of(&tokens);
        // Search first (a token with no branch of its own follows the
        // wildcard branch, as in Drain's tree search), then make room.
        let found = self
            .walk(&path)
            .and_then(|n| self.best(n, &tokens))
            .map(|(id, _)| id);
        if let Some(id) = found {
            if let Some(t) = self.templates.get_mut(&id) {
                for (have, new) in t.tokens.iter_mut().zip(&tokens) {
                    if have != new && have != WILDCARD {
                        *have = generalise(have, new);
                    }
                }
            }
            if let Some(s) = self.seen_again(id, time, level) {
                return s;
            }
        }
        let node = self.descend(&path);
        // A new template; make room first.
        if self.nodes[node].leaf.len() >= self.cfg.max_per_leaf.max(1) {
            let victim = self.nodes[node]
                .leaf
                .iter()
                .copied()
                .min_by_key(|id| self.templates.get(id).map_or(i64::MIN, |t| t.last_seen));
            if let Some(v) = victim {
                self.remove(v);
            }
        }
        if self.templates.len() >= self.cfg.max_templates.max(1) {
            if let Some((v, ())) = self.lru.pop_lru() {
                self.remove(v);
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
                tokens,
                count: 1,
                first_seen: time,
                last_seen: time,
                levels,
                path,
            },
        );
        self.nodes[node].leaf.push(id);
        self.lru.put(id, ());
        Sighting {
            id,
            created: true,
            previous: None,
        }
    }

    /// Forgets a template (eviction), counting it.
    fn remove(&mut self, id: u64) {
        if let Some(t) = self.templates.remove(&id) {
            self.evicted += 1;
            self.lru.pop(&id);
            if let Some(node) = self.walk(&t.path) {
                self.nodes[node].leaf.retain(|x| *x != id);
            }
            self.cache.retain(|_, v| *v != id);
        }
    }

    /// The tree keys of a message: its token count, then its first tokens
    /// (variables as the wildcard).
    fn path_of(&self, tokens: &[String]) -> Vec<String> {
        let mut path = Vec::with_capacity(self.cfg.prefix_tokens + 1);
        path.push(tokens.len().to_string());
        for t in tokens.iter().take(self.cfg.prefix_tokens) {
            path.push(if t.contains(WILDCARD) {
                WILDCARD.to_string()
            } else {
                t.clone()
            });
        }
        path
    }

    /// The node at `path`, following wildcard children where a key has no
    /// child of its own.
    fn walk(&self, path: &[String]) -> Option<usize> {
        let (len, rest) = path.split_first()?;
        let mut node = *self.roots.get(&len.parse::<usize>().ok()?)?;
        for key in rest {
            let n = &self.nodes[node];
            node = match n.children.get(key) {
                Some(&c) => c,
                None => n.wildcard?,
            };
        }
        Some(node)
    }

    /// The node at `path`, created as needed within the caps (a full node,
    /// or a full tree, sends new keys to the wildcard child).
    fn descend(&mut self, path: &[String]) -> usize {
        let room = self.cfg.max_templates.max(1) * NODES_PER_TEMPLATE;
        let len: usize = path.first().and_then(|l| l.parse().ok()).unwrap_or(0);
        let mut node = match self.roots.get(&len) {
            Some(&n) => n,
            None => {
                self.nodes.push(Node::default());
                let n = self.nodes.len() - 1;
                self.roots.insert(len, n);
                n
            }
        };
        for key in path.iter().skip(1) {
            let existing = self.nodes[node].children.get(key).copied();
            node = match existing {
                Some(c) => c,
                None => {
                    let full = key == WILDCARD
                        || self.nodes[node].children.len() >= self.cfg.max_children
                        || self.nodes.len() >= room;
                    if !full {
                        self.nodes.push(Node::default());
                        let c = self.nodes.len() - 1;
                        self.nodes[node].children.insert(key.clone(), c);
                        c
                    } else if let Some(w) = self.nodes[node].wildcard {
                        w
                    } else {
                        self.nodes.push(Node::default());
                        let w = self.nodes.len() - 1;
                        self.nodes[node].wildcard = Some(w);
                        w
                    }
                }
            };
        }
        node
    }

    /// The most similar template of a leaf, if similar enough: the share
    /// of positions where template and message agree (wildcards do not
    /// count as agreement), ties to the one with more wildcards, then the
    /// older.
    fn best(&self, node: usize, tokens: &[String]) -> Option<(u64, f64)> {
        let mut best: Option<(u64, f64, usize)> = None;
        for &id in &self.nodes[node].leaf {
            let Some(t) = self.templates.get(&id) else {
                continue;
            };
            if t.tokens.len() != tokens.len() {
                continue;
            }
            let (mut same, mut wild) = (0usize, 0usize);
            for (a, b) in t.tokens.iter().zip(tokens) {
                if a == WILDCARD {
                    wild += 1;
                } else if a == b {
                    same += 1;
                }
            }
            let sim = if tokens.is_empty() {
                1.0
            } else {
                same as f64 / tokens.len() as f64
            };
            let better = match best {
                None => true,
                Some((bid, bs, bw)) => {
                    sim > bs || (sim == bs && (wild > bw || (wild == bw && id < bid)))
                }
            };
            if better {
                best = Some((id, sim, wild));
            }
        }
        best.filter(|(_, s, _)| *s >= self.cfg.similarity)
            .map(|(id, s, _)| (id, s))
    }

    /// The miner's saved form.
    pub fn state(&self) -> MinerState {
        let mut templates: Vec<TemplateState> = self
            .templates
            .values()
            .map(|t| TemplateState {
                id: t.id,
                template: t.text(),
                path: t.path.clone(),
                count: t.count,
                first_seen: t.first_seen,
                last_seen: t.last_seen,
                levels: t.levels,
            })
            .collect();
        templates.sort_by_key(|t| t.id);
        MinerState {
            version: 1,
            config: Some(self.cfg),
            next_id: self.next_id,
            learn_until: None,
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
            let path = if t.path.is_empty() {
                m.path_of(&tokens)
            } else {
                t.path.clone()
            };
            let node = m.descend(&path);
            m.nodes[node].leaf.push(t.id);
            m.lru.put(t.id, ());
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
                    path,
                },
            );
        }
        m
    }
}

/// Writes a saved form to `path` atomically (temporary file, rename).
pub fn save(path: &std::path::Path, state: &MinerState) -> Result<(), MiningError> {
    let err = |source| MiningError::Io {
        path: path.display().to_string(),
        source,
    };
    let body = serde_json::to_vec(state).map_err(|e| MiningError::Format {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, body).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
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

/// The token of a template where two messages differ: the wildcard,
/// keeping a shared `key=` (`user=<*>`).
fn generalise(have: &str, new: &str) -> String {
    match (have.split_once('='), new.split_once('=')) {
        (Some((a, _)), Some((b, _))) if a == b && !a.is_empty() => format!("{a}={WILDCARD}"),
        _ => WILDCARD.to_string(),
    }
}

/// Whether a token (without surrounding punctuation) is a variable: a
/// number, a duration (`1.5s`, `250ms`), hex, an address, a UUID or any
/// other token holding a digit (IDs, versions, sizes) — except short names
/// with one digit (`ssh2`, `ipv6`) — and prefixed IDs without digits.
fn is_variable(core: &str) -> bool {
    let b = core.as_bytes();
    let digits = b.iter().filter(|c| c.is_ascii_digit()).count();
    if digits > 0 {
        // A short word with one digit is a name, not a value: ssh2,
        // ipv6, http2, k8s, s3.
        let name = digits == 1
            && b.len() <= 6
            && b[0].is_ascii_alphabetic()
            && b.iter().all(u8::is_ascii_alphanumeric);
        return !name;
    }
    // Hex without a digit (`deadbeef`), 8 characters or more.
    if b.len() >= 8 && b.iter().all(|c| matches!(c, b'a'..=b'f' | b'A'..=b'F')) {
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

/// Masks one whitespace-separated token: `key=value` keeps its key, a
/// variable keeps its surrounding punctuation (`(<*>)`, `<*>:`).
fn mask_token(tok: &str) -> String {
    if let Some((k, v)) = tok.split_once('=') {
        if !k.is_empty()
            && !v.is_empty()
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
        {
            return format!("{k}={}", mask_token(v));
        }
    }
    let is_punct = |c: char| {
        matches!(
            c,
            '(' | ')' | '[' | ']' | '{' | '}' | ',' | ';' | ':' | '.' | '<' | '>'
        )
    };
    let start = tok.find(|c: char| !is_punct(c)).unwrap_or(tok.len());
    let end = tok.rfind(|c: char| !is_punct(c)).map_or(start, |i| {
        i + tok[i..].chars().next().map_or(1, char::len_utf8)
    });
    let core = &tok[start..end.max(start)];
    if core == WILDCARD || (!core.is_empty() && is_variable(core)) {
        format!("{}{WILDCARD}{}", &tok[..start], &tok[end.max(start)..])
    } else {
        tok.to_string()
    }
}

/// Splits a message into masked tokens: quoted values (`"…"`) and
/// variables become [`WILDCARD`]; at most [`MAX_TOKENS`].
pub fn tokenize(message: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = message.trim();
    while !rest.is_empty() && out.len() < MAX_TOKENS {
        if let Some(body) = rest.strip_prefix('"') {
            // A quoted value: one variable, spaces and all.
            let end = body.find('"').map_or(body.len(), |i| i + 1);
            let after = &body[end.min(body.len())..];
            let tail_end = after.find(char::is_whitespace).unwrap_or(after.len());
            out.push(format!("{WILDCARD}{}", &after[..tail_end]));
            rest = after[tail_end..].trim_start();
            continue;
        }
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        out.push(mask_token(&rest[..end]));
        rest = rest[end..].trim_start();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn miner() -> Miner {
        Miner::new(MinerConfig::default())
    }

    #[test]
    fn variables_are_masked() {
        assert_eq!(
            tokenize("failed to open /data/seg-0042.log: no space left on device").join(" "),
            "failed to open <*>: no space left on device"
        );
        assert_eq!(
            tokenize("dial tcp 10.0.0.21:6379: i/o timeout after 1.5s").join(" "),
            "dial tcp <*>: i/o timeout after <*>"
        );
        assert_eq!(
            tokenize(r#"user "alice smith" logged in from (192.168.1.4) id=ND_8dWK3 retries=x"#)
                .join(" "),
            "user <*> logged in from (<*>) id=<*> retries=x"
        );
        assert_eq!(
            tokenize("room RM_hXkTqfzqjBkR closed by deadbeefcafe token aGVsbG9Xb3JsZEZvbw at getUserById after EGRESS_FAILED").join(" "),
            "room <*> closed by <*> token <*> at getUserById after EGRESS_FAILED"
        );
        // Words, even camel-cased identifiers, stay.
        assert_eq!(
            tokenize("PacketResponder terminating in DataNode").join(" "),
            "PacketResponder terminating in DataNode"
        );
        assert_eq!(
            tokenize(
                "Failed password for root from 183.62.140.253 port 54447 ssh2 over ipv6 worker42"
            )
            .join(" "),
            "Failed password for root from <*> port <*> ssh2 over ipv6 <*>"
        );
        assert_eq!(tokenize("  ").len(), 0);
        assert_eq!(tokenize(&"w ".repeat(500)).len(), MAX_TOKENS);
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
    }

    #[test]
    fn templates_generalise_where_messages_differ() {
        let mut m = miner();
        m.add("connection to peer alpha lost", 1, None);
        let s = m.add("connection to peer beta lost", 2, None);
        assert_eq!(
            m.get(s.id).map(Template::text).as_deref(),
            Some("connection to peer <*> lost")
        );
        // Different wording of the same length: a template of its own.
        let t = m.add("listener on port eighty closed", 3, None);
        assert_ne!(t.id, s.id);
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
            m.evicted(),
            created - 3,
            "every template made and gone is counted"
        );
        // The oldest went first: the newest word's templates are still there.
        assert!(m.templates().iter().any(|t| t.text().starts_with("echo")));
        // Nodes stay bounded too, whatever the variety.
        for i in 0..10_000 {
            m.add(&format!("word{i}x unique{i}y thing"), i, None);
        }
        assert!(
            m.nodes.len() <= 3 * NODES_PER_TEMPLATE + 64,
            "{}",
            m.nodes.len()
        );
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
