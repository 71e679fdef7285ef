//! Cheap field extraction: one Aho-Corasick pass per line finds every field
//! the cheap path needs (time keys, sticky keys, the fields behind every
//! population group key), as spans into the line. Group keys resolve from
//! those spans without parsing the line.
//!
//! A field is recognised in three spellings: a JSON key (`"nodeID": …`, also
//! in a zap console line's trailing object), a JSON key escaped inside an
//! envelope string (`\"nodeID\":\"…\"`), and a logfmt/klog pair
//! (`pod="ns/name"`, at the start of the line or after a space).

use super::quick::{parse_pairs_value, unescape_json};
pub use super::time::TIME_FIELDS;
use super::{KeyConfig, WORKLOAD_KEY};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use std::borrow::Cow;
use std::collections::HashMap;

/// Index of a compiled group key.
pub type KeyId = usize;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Spelling {
    /// `"name`: a JSON key (`"name":`) or, followed by `\"`, an escaped one.
    Quoted,
    /// `name=`: a logfmt / klog pair.
    Logfmt,
    /// `name` alone: a JSON key when a quote comes before it, a logfmt
    /// pair when `=` follows (one pattern instead of two, see
    /// [`KeyIndex::new`]).
    Bare,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ValKind {
    /// A JSON string body without escapes.
    Str,
    /// A JSON string body with escapes.
    StrEscaped,
    /// A Go-quoted logfmt value body.
    Quoted,
    /// A bare token (number, bool, logfmt bare value).
    Bare,
    /// An object: the span starts at `{` and ends at the line's end.
    Object,
}

/// Where a field's value sits in the line.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    start: u32,
    end: u32,
    kind: ValKind,
}

impl Span {
    /// The value's raw bytes in the line (before any unescaping).
    pub fn raw<'t>(&self, text: &'t [u8]) -> &'t [u8] {
        text.get(self.start as usize..self.end as usize)
            .unwrap_or_default()
    }

    /// The value's text.
    pub fn value<'t>(&self, text: &'t str) -> Option<Cow<'t, str>> {
        let raw = text.get(self.start as usize..self.end as usize)?;
        Some(match self.kind {
            ValKind::Str | ValKind::Bare | ValKind::Object => Cow::Borrowed(raw),
            ValKind::StrEscaped => Cow::Owned(unescape_json(raw)?),
            ValKind::Quoted => Cow::Owned(parse_pairs_value(raw)),
        })
    }
}

enum PathSpec {
    Label(String),
    After(Box<memchr::memmem::Finder<'static>>, usize),
    Field {
        slot: usize,
        rest: Option<String>,
        name: String,
    },
}

struct KeySpec {
    name: String,
    paths: Vec<PathSpec>,
}

/// The key-pattern searcher: Teddy (SIMD) when the CPU and pattern set
/// allow it, else a plain automaton. aho-corasick's own prefilter heuristic
/// would pick a rare-byte search for `"` and `=`, which are everywhere in logs.
enum Searcher {
    Packed(aho_corasick::packed::Searcher),
    Ac(AhoCorasick),
}

impl Searcher {
    fn new(patterns: &[String]) -> Option<Searcher> {
        let packed = aho_corasick::packed::Config::new()
            .match_kind(aho_corasick::packed::MatchKind::LeftmostLongest)
            .builder()
            .extend(patterns)
            .build();
        match packed {
            Some(p) => Some(Searcher::Packed(p)),
            None => AhoCorasickBuilder::new()
                .match_kind(MatchKind::LeftmostLongest)
                .build(patterns)
                .ok()
                .map(Searcher::Ac),
        }
    }

    /// Calls `f(pattern, start, end)` for each leftmost-longest match.
    fn for_each(&self, text: &[u8], mut f: impl FnMut(usize, usize, usize)) {
        match self {
            Searcher::Packed(p) => {
                for m in p.find_iter(text) {
                    f(m.pattern().as_usize(), m.start(), m.end());
                }
            }
            Searcher::Ac(a) => {
                for m in a.find_iter(text) {
                    f(m.pattern().as_usize(), m.start(), m.end());
                }
            }
        }
    }
}

/// The scanner and the compiled group keys.
pub struct KeyIndex {
    ac: Option<Searcher>,
    pats: Vec<(usize, Spelling)>,
    pattern_lens: Vec<usize>,
    block_safe: bool,
    /// Field paths of the compiled keys: (slot, rest of a dotted path,
    /// slot of the whole dotted name).
    digest_paths: Vec<(usize, Option<String>, Option<usize>)>,
    /// Literals of the compiled keys' `after:` paths.
    after_finders: Vec<memchr::memmem::Finder<'static>>,
    slot_names: Vec<String>,
    keys: Vec<KeySpec>,
    ids: HashMap<String, KeyId>,
}

/// The searcher's patterns for the slot names, with each pattern's slot
/// and spelling.
///
/// A field is `"name` (JSON, escaped JSON) or `name=` (logfmt). Searching
/// the bare `name` and reading the byte before or after finds the same
/// keys with half the patterns, which keeps the usual key set (about 30
/// names) within the fast SIMD searcher's 32 (a larger set needs the
/// 16-bucket variant, half as fast per byte). It finds exactly what the two
/// spelled patterns find, leftmost-longest, because a key is preceded by a
/// quote, a space or the line's start, so no earlier match of a name can
/// cover its start, unless the name holds such a byte. So these keep the
/// two spelled patterns: names shorter than 3 bytes (the searcher's masks
/// take 3), names holding a quote, `=`, `\\` or whitespace, and names that
/// begin with a name kept spelled (whose `"name` match, starting one byte
/// earlier, would cover theirs).
fn key_patterns(slot_names: &[String], spell_all: bool) -> (Vec<String>, Vec<(usize, Spelling)>) {
    let odd = |n: &str| {
        n.len() < 3
            || n.bytes()
                .any(|c| matches!(c, b'"' | b'=' | b'\\') || c.is_ascii_whitespace())
    };
    // Names beginning with a spelled name are spelled too. A prefix is
    // shorter than the name, so deciding the shortest first settles every
    // chain of prefixes in one pass.
    let mut order: Vec<usize> = (0..slot_names.len()).collect();
    order.sort_by_key(|&i| slot_names[i].len());
    let mut spelled = vec![false; slot_names.len()];
    for &i in &order {
        let n = &slot_names[i];
        spelled[i] = spell_all
            || odd(n)
            || slot_names
                .iter()
                .zip(&spelled)
                .any(|(m, &sp)| sp && m.len() < n.len() && n.starts_with(m.as_str()));
    }
    let mut patterns = Vec::new();
    let mut pats = Vec::new();
    for (slot, n) in slot_names.iter().enumerate() {
        if spelled[slot] {
            for (p, s) in [
                (format!("\"{n}"), Spelling::Quoted),
                (format!("{n}="), Spelling::Logfmt),
            ] {
                patterns.push(p);
                pats.push((slot, s));
            }
        } else {
            patterns.push(n.clone());
            pats.push((slot, Spelling::Bare));
        }
    }
    (patterns, pats)
}

impl KeyIndex {
    /// Compiles the scanner for `extra` field names (time, sticky) and the
    /// group keys named in `keys` (aliases, `workload`, or field paths).
    pub fn new(cfg: &KeyConfig, keys: &[String], extra: &[&str]) -> KeyIndex {
        KeyIndex::build(cfg, keys, extra, false)
    }

    /// [`KeyIndex::new`], optionally with every name spelled out in both
    /// patterns (the reference the bare-name search is tested against).
    fn build(cfg: &KeyConfig, keys: &[String], extra: &[&str], spell_all: bool) -> KeyIndex {
        let mut slot_names: Vec<String> = Vec::new();
        let slot_of = |name: &str, slot_names: &mut Vec<String>| -> usize {
            match slot_names.iter().position(|n| n == name) {
                Some(i) => i,
                None => {
                    slot_names.push(name.to_string());
                    slot_names.len() - 1
                }
            }
        };
        for e in extra {
            slot_of(e, &mut slot_names);
        }
        let mut specs = Vec::new();
        let mut ids = HashMap::new();
        for k in keys {
            if ids.contains_key(k) {
                continue;
            }
            let base = if k == WORKLOAD_KEY { "pod" } else { k.as_str() };
            let paths: Vec<String> = cfg
                .aliases
                .get(base)
                .cloned()
                .unwrap_or_else(|| vec![base.to_string()]);
            let compiled = paths
                .iter()
                .map(|p| {
                    if let Some(l) = p.strip_prefix("labels.") {
                        PathSpec::Label(l.to_string())
                    } else if let Some(lit) = p.strip_prefix("after:") {
                        PathSpec::After(
                            Box::new(memchr::memmem::Finder::new(lit.as_bytes()).into_owned()),
                            lit.len(),
                        )
                    } else {
                        // The whole path may be a literal key (zap's `rtc.portTCP`):
                        // scan for both it and its first segment.
                        let (first, rest) = match p.split_once('.') {
                            Some((f, r)) => (f, Some(r.to_string())),
                            None => (p.as_str(), None),
                        };
                        if rest.is_some() {
                            slot_of(p, &mut slot_names);
                        }
                        PathSpec::Field {
                            slot: slot_of(first, &mut slot_names),
                            rest,
                            name: p.clone(),
                        }
                    }
                })
                .collect();
            ids.insert(k.clone(), specs.len());
            specs.push(KeySpec {
                name: k.clone(),
                paths: compiled,
            });
        }
        let (patterns, pats) = key_patterns(&slot_names, spell_all);
        let ac = if patterns.is_empty() {
            None
        } else {
            Searcher::new(&patterns)
        };
        let pattern_lens = patterns.iter().map(String::len).collect();
        let block_safe = patterns
            .iter()
            .all(|p| !p.bytes().any(|b| b.is_ascii_whitespace()));
        let mut digest_paths = Vec::new();
        let mut after_finders: Vec<memchr::memmem::Finder<'static>> = Vec::new();
        for spec in &specs {
            for p in &spec.paths {
                match p {
                    PathSpec::Field { slot, rest, name } => {
                        let whole = rest
                            .as_ref()
                            .and_then(|_| slot_names.iter().position(|n| n == name));
                        let d = (*slot, rest.clone(), whole);
                        if !digest_paths.contains(&d) {
                            digest_paths.push(d);
                        }
                    }
                    PathSpec::After(f, _) => {
                        if !after_finders.iter().any(|a| a.needle() == f.needle()) {
                            after_finders.push((**f).clone());
                        }
                    }
                    PathSpec::Label(_) => {}
                }
            }
        }
        KeyIndex {
            ac,
            pats,
            pattern_lens,
            block_safe,
            digest_paths,
            after_finders,
            slot_names,
            keys: specs,
            ids,
        }
    }

    /// Whether a buffer-level [`KeyIndex::search`] finds exactly what
    /// per-line scans find: no pattern may contain a space or a newline
    /// (which could join a prefix to its text, or two lines).
    pub fn block_safe(&self) -> bool {
        self.block_safe
    }

    /// The id of a compiled key.
    pub fn id(&self, name: &str) -> Option<KeyId> {
        self.ids.get(name).copied()
    }

    /// The slot of a field name given in `extra` or used by a key.
    pub fn slot(&self, name: &str) -> Option<usize> {
        self.slot_names.iter().position(|n| n == name)
    }

    /// The field name of a slot.
    pub fn slot_name(&self, slot: usize) -> Option<&str> {
        self.slot_names.get(slot).map(String::as_str)
    }

    /// Number of slots (size of the `spans` buffer).
    pub fn slots(&self) -> usize {
        self.slot_names.len()
    }

    /// Scans a line, filling `spans` (one entry per slot; the first
    /// occurrence of a field wins).
    pub fn scan(&self, text: &str, spans: &mut Vec<Option<Span>>) {
        spans.clear();
        spans.resize(self.slot_names.len(), None);
        let Some(ac) = &self.ac else { return };
        let b = text.as_bytes();
        // Every pattern is `"name` or `name=`: a line with neither byte
        // (plain text) has no field, and one SIMD test says so.
        if memchr::memchr2(b'"', b'=', b).is_none() {
            return;
        }
        ac.for_each(text.as_bytes(), |pat, s, e| {
            self.accept(b, pat, s, e, spans)
        });
    }

    /// Fills `spans` from pattern matches found beforehand (a buffer-level
    /// [`KeyIndex::search`] over the block the line came from): `hits` are
    /// (start in `text`, pattern), in order. Gives exactly what
    /// [`KeyIndex::scan`] of `text` gives, because no pattern spans a line
    /// or a prefix's closing space.
    pub fn fill(
        &self,
        text: &str,
        hits: impl Iterator<Item = (usize, usize)>,
        spans: &mut Vec<Option<Span>>,
    ) {
        spans.clear();
        spans.resize(self.slot_names.len(), None);
        let b = text.as_bytes();
        for (s, pat) in hits {
            let e = s + self.pattern_lens.get(pat).copied().unwrap_or(0);
            if e <= b.len() {
                self.accept(b, pat, s, e, spans);
            }
        }
    }

    /// Runs the field-pattern searcher over any bytes (a whole block of
    /// lines), calling `f(start, pattern)` for each leftmost-longest match.
    pub fn search(&self, bytes: &[u8], mut f: impl FnMut(usize, usize)) {
        if let Some(ac) = &self.ac {
            ac.for_each(bytes, |pat, s, _| f(s, pat));
        }
    }

    /// Records pattern `pat` found at `s..e` of line `b` in its slot, if it
    /// is a real key there and the slot is still empty.
    fn accept(&self, b: &[u8], pat: usize, s: usize, e: usize, spans: &mut [Option<Span>]) {
        let (slot, spelling) = self.pats[pat];
        if spans[slot].is_some() {
            return;
        }
        // A bare name is read as the spelled pattern its neighbours make:
        // `"name` starting at the quote, or `name=`.
        let (spelling, s, e) = match spelling {
            Spelling::Bare if s > 0 && b[s - 1] == b'"' => (Spelling::Quoted, s - 1, e),
            Spelling::Bare if b.get(e) == Some(&b'=') => (Spelling::Logfmt, s, e + 1),
            Spelling::Bare => return,
            other => (other, s, e),
        };
        let span = match spelling {
            Spelling::Quoted => match b.get(e) {
                Some(b'"') => {
                    let before = if s == 0 { b'{' } else { b[s - 1] };
                    if !matches!(before, b'{' | b',' | b' ' | b'\t') {
                        return;
                    }
                    json_value(b, e + 1)
                }
                Some(b'\\') if s > 0 && b[s - 1] == b'\\' && b.get(e + 1) == Some(&b'"') => {
                    escaped_value(b, e + 2)
                }
                _ => return,
            },
            Spelling::Logfmt => {
                if s > 0 && b[s - 1] != b' ' {
                    return;
                }
                logfmt_value(b, e)
            }
            Spelling::Bare => return,
        };
        spans[slot] = span;
    }

    /// Calls `f` with every position in `bytes` where an `after:` literal
    /// of the compiled keys occurs. False (and no call) when some literal
    /// holds whitespace, which could join a prefix to its text: then only
    /// a per-line search tells.
    pub fn after_positions(&self, bytes: &[u8], mut f: impl FnMut(usize)) -> bool {
        if self
            .after_finders
            .iter()
            .any(|a| a.needle().iter().any(u8::is_ascii_whitespace))
        {
            return false;
        }
        for finder in &self.after_finders {
            for p in finder.find_iter(bytes) {
                f(p);
            }
        }
        true
    }

    /// Feeds `h` with everything the compiled keys read from a scanned line
    /// (besides stream labels and sticky values): the raw value of each
    /// field path, the nested value of each dotted path, the token after
    /// each `after:` literal (unless `afters` is false: none occurs). Lines
    /// that feed the same bytes resolve every key alike.
    pub fn digest(
        &self,
        text: &str,
        spans: &[Option<Span>],
        afters: bool,
        h: &mut impl std::hash::Hasher,
    ) {
        let b = text.as_bytes();
        for (i, (slot, rest, whole)) in self.digest_paths.iter().enumerate() {
            let Some(sp) = spans.get(*slot).copied().flatten() else {
                continue;
            };
            h.write_usize(i);
            match (rest, whole.and_then(|w| spans.get(w).copied().flatten())) {
                (None, _) => h.write(sp.raw(b)),
                (Some(_), Some(w)) => h.write(w.raw(b)),
                (Some(r), None) => {
                    let nested = text
                        .get(sp.start as usize..)
                        .and_then(|obj| super::quick::quick_get_path(obj, r));
                    h.write(nested.as_deref().unwrap_or("\0").as_bytes());
                }
            }
        }
        for (i, f) in self.after_finders.iter().enumerate() {
            if !afters {
                break;
            }
            if let Some(at) = f.find(b) {
                h.write_usize(usize::MAX - i);
                let lit = std::str::from_utf8(f.needle()).unwrap_or("");
                let tok = text
                    .get(at..)
                    .and_then(|t| super::quick::token_after(t, lit));
                h.write(tok.unwrap_or("").as_bytes());
            }
        }
    }

    /// Resolves a compiled key on a scanned line: first present path wins.
    /// `label` reads stream labels; `sticky` reads inherited stream fields.
    pub fn resolve(
        &self,
        id: KeyId,
        text: &str,
        spans: &[Option<Span>],
        label: &dyn Fn(&str) -> Option<String>,
        sticky: &dyn Fn(&str) -> Option<String>,
    ) -> Option<String> {
        let spec = self.keys.get(id)?;
        let mut found = None;
        for p in &spec.paths {
            let v = match p {
                PathSpec::Label(l) => label(l),
                PathSpec::After(f, len) => f.find(text.as_bytes()).and_then(|i| {
                    super::quick::token_after(&text[i..], &text[i..i + len]).map(str::to_string)
                }),
                PathSpec::Field { slot, rest, name } => {
                    let direct = match rest {
                        None => spans
                            .get(*slot)
                            .copied()
                            .flatten()
                            .and_then(|sp| sp.value(text))
                            .map(Cow::into_owned),
                        Some(r) => {
                            let whole = self
                                .slot(name)
                                .and_then(|i| spans.get(i).copied().flatten());
                            match whole {
                                Some(sp) => sp.value(text).map(Cow::into_owned),
                                None => spans.get(*slot).copied().flatten().and_then(|sp| {
                                    let obj = text.get(sp.start as usize..)?;
                                    super::quick::quick_get_path(obj, r).map(Cow::into_owned)
                                }),
                            }
                        }
                    };
                    direct.or_else(|| sticky(name))
                }
            };
            if let Some(v) = v.filter(|v| !v.is_empty()) {
                found = Some(v);
                break;
            }
        }
        let found = found?;
        Some(match spec.name.as_str() {
            "pod" => found.rsplit('/').next().unwrap_or(&found).to_string(),
            WORKLOAD_KEY => super::workload_of(&found),
            _ => found,
        })
    }
}

fn skip_spaces(b: &[u8], mut j: usize) -> usize {
    while b.get(j).is_some_and(|c| *c == b' ') {
        j += 1;
    }
    j
}

fn json_value(b: &[u8], e: usize) -> Option<Span> {
    let mut j = skip_spaces(b, e);
    if b.get(j) != Some(&b':') {
        return None;
    }
    j = skip_spaces(b, j + 1);
    match b.get(j)? {
        b'"' => {
            let start = j + 1;
            let (end, escaped) = super::quick::quoted_end(b, start);
            Some(Span {
                start: start as u32,
                end: end as u32,
                kind: if escaped {
                    ValKind::StrEscaped
                } else {
                    ValKind::Str
                },
            })
        }
        b'{' => Some(Span {
            start: j as u32,
            end: b.len() as u32,
            kind: ValKind::Object,
        }),
        _ => {
            let end = b[j..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b' ' | b']'))
                .map_or(b.len(), |p| j + p);
            let v = &b[j..end];
            (!v.is_empty() && v != b"null").then_some(Span {
                start: j as u32,
                end: end as u32,
                kind: ValKind::Bare,
            })
        }
    }
}

fn escaped_value(b: &[u8], e: usize) -> Option<Span> {
    // After `\"key\"` comes `:` then `\"value\"` or a bare token.
    let mut j = skip_spaces(b, e);
    if b.get(j) != Some(&b':') {
        return None;
    }
    j = skip_spaces(b, j + 1);
    if b.get(j) == Some(&b'\\') && b.get(j + 1) == Some(&b'"') {
        let start = j + 2;
        let end = memchr::memmem::find(&b[start..], b"\\\"").map_or(b.len(), |p| start + p);
        return Some(Span {
            start: start as u32,
            end: end as u32,
            kind: ValKind::Str,
        });
    }
    let end = b[j..]
        .iter()
        .position(|c| matches!(c, b',' | b'}' | b' '))
        .map_or(b.len(), |p| j + p);
    (end > j).then_some(Span {
        start: j as u32,
        end: end as u32,
        kind: ValKind::Bare,
    })
}

fn logfmt_value(b: &[u8], e: usize) -> Option<Span> {
    match b.get(e) {
        // pod=\"ns/name\" inside a JSON string (journald MESSAGE).
        Some(b'\\') if b.get(e + 1) == Some(&b'"') => {
            let start = e + 2;
            let end = memchr::memmem::find(&b[start..], b"\\\"").map_or(b.len(), |p| start + p);
            Some(Span {
                start: start as u32,
                end: end as u32,
                kind: ValKind::Str,
            })
        }
        Some(b'"') => {
            let start = e + 1;
            let (end, escaped) = super::quick::quoted_end(b, start);
            Some(Span {
                start: start as u32,
                end: end as u32,
                kind: if escaped {
                    ValKind::Quoted
                } else {
                    ValKind::Str
                },
            })
        }
        _ => {
            let end = b[e..]
                .iter()
                .position(|c| *c == b' ')
                .map_or(b.len(), |p| e + p);
            (end > e).then_some(Span {
                start: e as u32,
                end: end as u32,
                kind: ValKind::Bare,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(keys: &[&str]) -> KeyIndex {
        let keys: Vec<String> = keys.iter().map(|s| s.to_string()).collect();
        KeyIndex::new(&KeyConfig::default(), &keys, TIME_FIELDS)
    }

    fn resolve(ix: &KeyIndex, key: &str, text: &str) -> Option<String> {
        let mut spans = Vec::new();
        ix.scan(text, &mut spans);
        let labels = |l: &str| (l == "pod").then(|| "from-label".to_string());
        ix.resolve(ix.id(key)?, text, &spans, &|_| None, &|_| None)
            .or_else(|| {
                if key == "labelled" {
                    labels("pod")
                } else {
                    None
                }
            })
    }

    #[test]
    fn keys_resolve_in_every_spelling() {
        let ix = idx(&["node", "pod", "workload", "upstream"]);
        assert_eq!(
            resolve(
                &ix,
                "node",
                r#"{"msg":"nodeID x","nodeID":"ND_1","node":"n"}"#
            )
            .as_deref(),
            Some("ND_1")
        );
        assert_eq!(resolve(&ix, "node", "2025-07-17T12:01:25.055Z\tINFO\tlk\tx.go:1\tm\t{\"portHttp\": 7880, \"nodeID\": \"ND_2\"}").as_deref(), Some("ND_2"));
        assert_eq!(
            resolve(&ix, "node", r#"{"log":"{\"nodeID\":\"ND_3\"}"}"#).as_deref(),
            Some("ND_3")
        );
        assert_eq!(
            resolve(
                &ix,
                "pod",
                r#"I0501 12:00:40.1 1 p.go:1] "Probe failed" pod="prod/api-0" podUID="u""#
            )
            .as_deref(),
            Some("api-0")
        );
        assert_eq!(
            resolve(
                &ix,
                "pod",
                r#"{"involvedObject":{"kind":"Pod","name":"api-1"},"metadata":{"name":"ev"}}"#
            )
            .as_deref(),
            Some("api-1")
        );
        assert_eq!(
            resolve(
                &ix,
                "workload",
                r#"{"involvedObject":{"name":"api-7c9d8f6b5-x2x7q"}}"#
            )
            .as_deref(),
            Some("api")
        );
        assert_eq!(
            resolve(
                &ix,
                "pod",
                "0s  Warning  Unhealthy  pod/web-1  Readiness probe failed"
            )
            .as_deref(),
            Some("web-1")
        );
        assert_eq!(
            resolve(
                &ix,
                "upstream",
                "time=x level=info upstream=10.2.0.14:9090 status=200"
            )
            .as_deref(),
            Some("10.2.0.14:9090")
        );
        assert_eq!(
            resolve(&ix, "node", r#"{"source":{"host":"node-a"}}"#).as_deref(),
            Some("node-a")
        );
        assert_eq!(resolve(&ix, "node", r#"{"msg":"x"}"#), None);
        assert_eq!(resolve(&ix, "upstream", "xupstream=1 nothing"), None);
    }

    #[test]
    fn time_fields_are_found() {
        let ix = idx(&[]);
        let mut spans = Vec::new();
        let t = r#"{"level":"info","ts":1714568400.55,"msg":"x"}"#;
        ix.scan(t, &mut spans);
        let ts = spans[ix.slot("ts").unwrap()].unwrap();
        assert_eq!(ts.value(t).as_deref(), Some("1714568400.55"));
        let l = r#"time="2024-05-01T12:00:00Z" level=info"#;
        ix.scan(l, &mut spans);
        assert_eq!(
            spans[ix.slot("time").unwrap()].unwrap().value(l).as_deref(),
            Some("2024-05-01T12:00:00Z")
        );
    }

    #[test]
    fn bare_names_find_exactly_what_spelled_patterns_find() {
        let keys: Vec<String> = ["node", "pod", "workload", "upstream", "room", "trace"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut cfg = KeyConfig::default();
        cfg.aliases.insert(
            "room".into(),
            vec!["ro".into(), "room".into(), "roomName".into()],
        );
        cfg.aliases
            .insert("trace".into(), vec!["t\"x".into(), "trace id".into()]);
        let extra: Vec<&str> = TIME_FIELDS.iter().copied().chain(["ts2", "a"]).collect();
        let bare = KeyIndex::build(&cfg, &keys, &extra, false);
        let spelled = KeyIndex::build(&cfg, &keys, &extra, true);
        assert!(bare.pats.len() < spelled.pats.len());
        assert!(bare.pats.iter().any(|p| p.1 == Spelling::Bare));
        let lines = [
            r#"{"hosts":"a","host":"b","ts":1714568400.5,"nodeID":"N1"}"#,
            r#"xnode=1 node=2 pod=p-1 time="2024-05-01T12:00:00Z""#,
            r#"{"update":"x","msg":"could not update node date=5","date":"d"} date=7"#,
            r#"{"log":"{\"nodeID\":\"N2\",\"ts\":1}","stream":"stdout"}"#,
            r#"{"nodeIDs":"no","node":"yes","ts2":3,"tss":4,"ro":"r","roomName":"rn"}"#,
            r#"level=info ts=2024-05-01T12:00:00Z a=1 ro=9 room="R 1" upstream=10.0.0.1:80"#,
            r#"{"t\"x":"q","trace id":"z","peer.address":"1.2.3.4","peer":{"address":"5"}}"#,
            r#"""node""host"=h "ts"tsx"=1 =node= "pod"#,
            r#"{"source":{"host":"sh"},"kubernetes":{"host":"kh"},"_HOSTNAME":"hn"}"#,
            "plain text with node and host and time but no keys",
        ];
        for line in lines {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            bare.scan(line, &mut a);
            spelled.scan(line, &mut b);
            let show = |ix: &KeyIndex, sp: &[Option<Span>]| -> Vec<Option<String>> {
                sp.iter()
                    .map(|s| s.and_then(|s| s.value(line)).map(|v| v.into_owned()))
                    .chain(
                        (0..ix.keys.len()).map(|id| ix.resolve(id, line, sp, &|_| None, &|_| None)),
                    )
                    .collect()
            };
            assert_eq!(show(&bare, &a), show(&spelled, &b), "{line}");
            // The block search and fill give what the line scan gives.
            let mut hits = Vec::new();
            bare.search(line.as_bytes(), |s, p| hits.push((s, p)));
            let mut c = Vec::new();
            bare.fill(line, hits.into_iter(), &mut c);
            assert_eq!(show(&bare, &c), show(&bare, &a), "{line}");
        }
        let mut spans = Vec::new();
        bare.scan(lines[0], &mut spans);
        let host = bare
            .slot("host")
            .and_then(|s| spans[s])
            .and_then(|s| s.value(lines[0]));
        assert_eq!(host.as_deref(), Some("b"));
    }
}
