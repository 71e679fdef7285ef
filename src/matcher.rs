//! The matcher: every literal of every rule in one Aho-Corasick automaton,
//! scanned once per line; regexes and field conditions only confirm the
//! candidates the scan produced.
//!
//! Two automata share the literal set. A leftmost-first automaton (which the
//! aho-corasick crate can run with its packed SIMD searcher) answers "does
//! this line contain any literal at all?" — false for almost every line. Only
//! when it says yes does an overlapping scan list every literal present, so a
//! literal hidden inside another one's match is never missed.
//!
//! Each literal is also added in its JSON-escaped form, so `contains: ['a "b"']`
//! matches inside a JSON string value as well as in plain text.

use crate::decode::Event;
use crate::rules::{CondId, Condition, RuleSet, VIRTUAL_FIELDS};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use std::collections::HashMap;

/// Largest literal set compiled as a DFA (beyond it, a contiguous NFA).
pub const DFA_MAX_PATTERNS: usize = 5_000;
/// Most literal bytes compiled as a DFA: its size grows with the bytes
/// times the byte classes, so past this a contiguous NFA (linear in the
/// bytes to build and to hold) takes over.
pub const DFA_MAX_BYTES: usize = 64 << 10;

/// Most patterns the SIMD (Teddy) searcher takes; larger literal sets are
/// searched through a covering set of anchors of at most this size.
pub const TEDDY_MAX_PATTERNS: usize = 64;

/// The block scan's search for lines where a literal may occur.
#[derive(Clone)]
pub enum LiteralSearch {
    /// Every pattern in one automaton (the SIMD searcher for small sets).
    Whole(AhoCorasick),
    /// A set too large for the SIMD searcher: searched through anchors.
    Anchors(std::sync::Arc<AnchorSearch>),
}

impl std::fmt::Debug for LiteralSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LiteralSearch::Whole(_) => f.write_str("LiteralSearch::Whole"),
            LiteralSearch::Anchors(a) => write!(f, "LiteralSearch::Anchors({:?})", a.anchors()),
        }
    }
}

impl LiteralSearch {
    /// Start of the first possible literal in `hay[at..]`.
    pub fn find(&self, hay: &[u8], at: usize) -> Option<usize> {
        match self {
            LiteralSearch::Whole(ac) => whole_find(ac, hay, at),
            LiteralSearch::Anchors(a) => a.find(hay, at),
        }
    }
}

fn whole_find(ac: &AhoCorasick, hay: &[u8], at: usize) -> Option<usize> {
    ac.find(aho_corasick::Input::new(hay).span(at..hay.len()))
        .map(|m| m.start())
}

/// The search for a literal set too large for the SIMD searcher: a small
/// set of anchors (substrings) such that every pattern contains one, found
/// with the SIMD searcher. A line with an anchor may hold a literal and gets
/// the exact per-line scan; a line without any anchor holds none. Anchors
/// are chosen on the first sizeable block of input, to be rare in it (see
/// [`cover_anchors`]); until then, and when no cover fits, the whole
/// automaton is used. The choice changes speed, never results.
pub struct AnchorSearch {
    patterns: Vec<String>,
    whole: AhoCorasick,
    chosen: std::sync::OnceLock<Option<(Vec<String>, aho_corasick::packed::Searcher)>>,
}

/// The smallest block anchors are chosen on (64 KiB).
pub const ANCHOR_SAMPLE_BYTES: usize = 1 << 16;

impl AnchorSearch {
    fn new(patterns: Vec<String>, whole: AhoCorasick) -> AnchorSearch {
        AnchorSearch {
            patterns,
            whole,
            chosen: std::sync::OnceLock::new(),
        }
    }

    /// The anchors in use, once chosen.
    pub fn anchors(&self) -> Option<&[String]> {
        self.chosen
            .get()
            .and_then(|c| c.as_ref())
            .map(|(a, _)| a.as_slice())
    }

    fn find(&self, hay: &[u8], at: usize) -> Option<usize> {
        let chosen = match self.chosen.get() {
            Some(c) => c,
            None if hay.len() >= ANCHOR_SAMPLE_BYTES => self.chosen.get_or_init(|| {
                let anchors = cover_anchors(&self.patterns, TEDDY_MAX_PATTERNS, hay)?;
                let searcher = aho_corasick::packed::Config::new()
                    .match_kind(aho_corasick::packed::MatchKind::LeftmostFirst)
                    .builder()
                    .extend(&anchors)
                    .build()?;
                tracing::debug!(anchors = ?anchors, "Literal anchors chosen for the block scan.");
                Some((anchors, searcher))
            }),
            None => return whole_find(&self.whole, hay, at),
        };
        match chosen {
            Some((_, p)) => p
                .find_in(hay, aho_corasick::Span::from(at..hay.len()))
                .map(|m| m.start()),
            None => whole_find(&self.whole, hay, at),
        }
    }
}

/// Chooses at most `max` anchors such that every pattern contains one:
/// substrings of 4 to 10 bytes (a shorter pattern is its own anchor). A
/// greedy set cover weighted by how often each anchor occurs in `sample`
/// (estimated from its rarest 4-byte window): at each step the anchor with
/// the most still-uncovered patterns per occurrence, then the longest.
/// Scores only fall as patterns get covered, so a heap re-scores lazily
/// only the anchor on top. None when `max` do not suffice.
pub fn cover_anchors(patterns: &[String], max: usize, sample: &[u8]) -> Option<Vec<String>> {
    use std::collections::{BinaryHeap, HashMap};
    let n = patterns.len();
    let words = n.div_ceil(64);
    let mut cands: HashMap<&str, Vec<u64>> = HashMap::new();
    for (i, p) in patterns.iter().enumerate() {
        let lens = if p.len() < 4 {
            p.len()..=p.len()
        } else {
            4..=p.len().min(10)
        };
        for l in lens {
            for s in 0..=p.len() - l {
                let Some(w) = p.get(s..s + l) else { continue };
                let bits = cands.entry(w).or_insert_with(|| vec![0; words]);
                bits[i / 64] |= 1 << (i % 64);
            }
        }
    }
    // Occurrences in the sample of every 4-byte window.
    let sample = &sample[..sample.len().min(ANCHOR_SAMPLE_BYTES)];
    let mut grams: HashMap<u32, u32> = HashMap::new();
    for w in sample.windows(4) {
        let k = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        *grams.entry(k).or_insert(0) += 1;
    }
    let seen = |k: &str| -> u64 {
        let b = k.as_bytes();
        if b.len() < 4 {
            return memchr::memmem::find_iter(sample, b).count() as u64;
        }
        b.windows(4)
            .map(|w| {
                let g = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                grams.get(&g).copied().unwrap_or(0)
            })
            .min()
            .map_or(0, u64::from)
    };
    let mut uncovered = vec![u64::MAX; words];
    if !n.is_multiple_of(64) {
        uncovered[words - 1] = (1u64 << (n % 64)) - 1;
    }
    let covered = |bits: &[u64], uncovered: &[u64]| -> u64 {
        bits.iter()
            .zip(uncovered)
            .map(|(a, u)| u64::from((a & u).count_ones()))
            .sum()
    };
    // (score, length, reversed text for a deterministic order, text).
    #[derive(PartialEq)]
    struct Entry<'a>(f64, usize, std::cmp::Reverse<&'a str>);
    impl Eq for Entry<'_> {}
    impl PartialOrd for Entry<'_> {
        fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for Entry<'_> {
        fn cmp(&self, o: &Self) -> std::cmp::Ordering {
            self.0
                .total_cmp(&o.0)
                .then(self.1.cmp(&o.1))
                .then(self.2.cmp(&o.2))
        }
    }
    let seen_of: HashMap<&str, f64> = cands.keys().map(|k| (*k, 1.0 + seen(k) as f64)).collect();
    let mut heap: BinaryHeap<Entry<'_>> = cands
        .iter()
        .map(|(k, bits)| {
            Entry(
                covered(bits, &uncovered) as f64 / seen_of[k],
                k.len(),
                std::cmp::Reverse(*k),
            )
        })
        .collect();
    let mut anchors = Vec::new();
    while uncovered.iter().any(|w| *w != 0) {
        let Entry(score, len, std::cmp::Reverse(k)) = heap.pop()?;
        let now = covered(&cands[k], &uncovered) as f64 / seen_of[k];
        if now <= 0.0 {
            continue;
        }
        if now < score {
            heap.push(Entry(now, len, std::cmp::Reverse(k)));
            continue;
        }
        if anchors.len() == max {
            return None;
        }
        for (u, a) in uncovered.iter_mut().zip(&cands[k]) {
            *u &= !a;
        }
        anchors.push(k.to_string());
    }
    Some(anchors)
}

/// Errors building the matcher.
#[derive(Debug, thiserror::Error)]
pub enum MatcherError {
    /// The automaton could not be built (too many or too long literals).
    #[error("cannot build the literal automaton: {0}")]
    Build(#[from] aho_corasick::BuildError),
}

/// How a condition uses its literal groups.
#[derive(Debug, Clone)]
struct CondPlan {
    /// Groups of literal ids; each group needs one present literal.
    required: Vec<Vec<usize>>,
    /// Literal ids that must be absent.
    forbidden: Vec<usize>,
}

/// The compiled matcher.
pub struct Matcher {
    prefilter: Option<AhoCorasick>,
    /// The block scan's search (the prefilter, or anchors for large sets).
    block_search: Option<LiteralSearch>,
    exact: Option<AhoCorasick>,
    /// Pattern index → literal id.
    pattern_literal: Vec<usize>,
    /// Literal id → conditions that require it (to seed candidates).
    literal_conds: Vec<Vec<CondId>>,
    plans: Vec<CondPlan>,
    /// Conditions with no required literal: candidates on every line.
    always: Vec<CondId>,
    literal_count: usize,
    literals: Vec<String>,
}

/// Reusable per-line scratch space, so matching does not allocate.
#[derive(Default)]
pub struct Scratch {
    present: Vec<bool>,
    touched: Vec<usize>,
    seen: Vec<bool>,
    /// Candidate conditions of the last scan.
    pub candidates: Vec<CondId>,
}

fn json_escape(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    quoted
        .get(1..quoted.len().saturating_sub(1))
        .unwrap_or(s)
        .to_string()
}

/// The literals of a rule set, each once, with the patterns that find it
/// (itself, and its JSON-escaped form when that differs).
#[derive(Default)]
struct Interner {
    ids: HashMap<String, usize>,
    patterns: Vec<String>,
    /// Pattern index → literal id.
    pattern_literal: Vec<usize>,
}

impl Interner {
    fn intern(&mut self, lit: &str) -> usize {
        if let Some(id) = self.ids.get(lit) {
            return *id;
        }
        let id = self.ids.len();
        self.ids.insert(lit.to_string(), id);
        self.patterns.push(lit.to_string());
        self.pattern_literal.push(id);
        let esc = json_escape(lit);
        if esc != lit {
            self.patterns.push(esc);
            self.pattern_literal.push(id);
        }
        id
    }

    /// A condition's literal plan: the groups of which one literal each
    /// must occur, and the literals that must not.
    fn plan(&mut self, c: &crate::rules::Condition) -> CondPlan {
        let mut required = Vec::new();
        if !c.any.is_empty() {
            required.push(c.any.iter().map(|l| self.intern(l)).collect());
        }
        for l in &c.all {
            required.push(vec![self.intern(l)]);
        }
        // Field equality values appear verbatim in the raw text (or
        // JSON-escaped); normalised virtual fields do not.
        for (k, v) in &c.fields {
            if VIRTUAL_FIELDS.contains(&k.as_str()) {
                continue;
            }
            let values: Vec<&String> = match v {
                crate::rules::ValueCond::Equals(s) => vec![s],
                crate::rules::ValueCond::OneOf(list) => list.iter().collect(),
                _ => continue,
            };
            if values.iter().any(|s| s.is_empty()) {
                continue;
            }
            required.push(values.into_iter().map(|l| self.intern(l)).collect());
        }
        let forbidden = c.none.iter().map(|l| self.intern(l)).collect();
        CondPlan {
            required,
            forbidden,
        }
    }
}

/// The automata over every pattern: the prefilter (leftmost-first; a DFA
/// keeps large literal sets, past what the SIMD searcher takes, at one
/// table lookup per byte, and for huge sets, whose DFA memory would
/// explode, the crate's compact NFA) and the exact matcher (overlapping).
#[allow(clippy::type_complexity)]
fn automata(
    patterns: &[String],
) -> Result<
    (
        Option<aho_corasick::AhoCorasick>,
        Option<aho_corasick::AhoCorasick>,
    ),
    MatcherError,
> {
    if patterns.is_empty() {
        return Ok((None, None));
    }
    let kind = if patterns.len() <= DFA_MAX_PATTERNS
        && patterns.iter().map(String::len).sum::<usize>() <= DFA_MAX_BYTES
    {
        aho_corasick::AhoCorasickKind::DFA
    } else {
        aho_corasick::AhoCorasickKind::ContiguousNFA
    };
    let prefilter = AhoCorasickBuilder::new()
        .match_kind(MatchKind::LeftmostFirst)
        .kind(Some(kind))
        .build(patterns)?;
    let exact = AhoCorasickBuilder::new()
        .match_kind(MatchKind::Standard)
        .build(patterns)?;
    Ok((Some(prefilter), Some(exact)))
}

impl Matcher {
    /// Builds the matcher for a rule set.
    pub fn new(set: &RuleSet) -> Result<Matcher, MatcherError> {
        let mut lits = Interner::default();
        let plans: Vec<CondPlan> = set.conditions.iter().map(|c| lits.plan(c)).collect();
        let Interner {
            ids: literal_ids,
            patterns,
            pattern_literal,
        } = lits;
        let literal_count = literal_ids.len();
        let mut literals: Vec<(usize, String)> =
            literal_ids.iter().map(|(l, i)| (*i, l.clone())).collect();
        literals.sort();
        let literals: Vec<String> = literals.into_iter().map(|(_, l)| l).collect();
        let mut literal_conds = vec![Vec::new(); literal_count];
        let mut always = Vec::new();
        for (cid, plan) in plans.iter().enumerate() {
            if set.conditions[cid].never {
                // Fed by something other than the matcher (novelty).
                continue;
            }
            if plan.required.is_empty() {
                always.push(cid);
                continue;
            }
            // Seed from the first group: every candidate has one of those.
            for &lit in &plan.required[0] {
                if !literal_conds[lit].contains(&cid) {
                    literal_conds[lit].push(cid);
                }
            }
        }
        let (prefilter, exact) = automata(&patterns)?;
        let block_search = match &prefilter {
            Some(ac) if patterns.len() > TEDDY_MAX_PATTERNS => Some(LiteralSearch::Anchors(
                std::sync::Arc::new(AnchorSearch::new(patterns.clone(), ac.clone())),
            )),
            Some(ac) => Some(LiteralSearch::Whole(ac.clone())),
            None => None,
        };
        Ok(Matcher {
            prefilter,
            block_search,
            exact,
            pattern_literal,
            literal_conds,
            plans,
            always,
            literal_count,
            literals,
        })
    }

    /// The block scan's search for lines where a literal may occur (cheap
    /// to clone: automata are shared).
    pub fn literal_searcher(&self) -> Option<LiteralSearch> {
        self.block_search.clone()
    }

    /// Whether some condition has no literal, so every line is a candidate
    /// and no literal prefilter may skip a line.
    pub fn needs_scan_on_every_line(&self) -> bool {
        !self.always.is_empty()
    }

    /// The distinct literals, in first-use order (without escaped variants).
    pub fn literals(&self) -> &[String] {
        &self.literals
    }

    /// Number of distinct literals in the automaton.
    pub fn literal_count(&self) -> usize {
        self.literal_count
    }

    /// Heap bytes of the automata.
    pub fn memory_usage(&self) -> usize {
        self.prefilter.as_ref().map_or(0, |a| a.memory_usage())
            + self.exact.as_ref().map_or(0, |a| a.memory_usage())
    }

    /// Scans a line; afterwards `scratch.candidates` lists the conditions
    /// whose literal requirements hold. Returns true if there is any.
    pub fn scan(&self, text: &str, scratch: &mut Scratch) -> bool {
        scratch.candidates.clear();
        if scratch.present.len() != self.literal_count || scratch.seen.len() != self.plans.len() {
            // First use, or a scratch of another matcher (after a reload).
            scratch.present = vec![false; self.literal_count];
            scratch.seen = vec![false; self.plans.len()];
            scratch.touched.clear();
        }
        for &t in &scratch.touched {
            scratch.present[t] = false;
        }
        scratch.touched.clear();
        let hit = self.prefilter.as_ref().is_some_and(|p| p.is_match(text));
        if hit {
            if let Some(exact) = &self.exact {
                for m in exact.find_overlapping_iter(text) {
                    let lit = self.pattern_literal[m.pattern().as_usize()];
                    if !scratch.present[lit] {
                        scratch.present[lit] = true;
                        scratch.touched.push(lit);
                    }
                }
            }
            for i in 0..scratch.touched.len() {
                let lit = scratch.touched[i];
                for &cid in &self.literal_conds[lit] {
                    if !scratch.seen[cid] && self.literals_hold(cid, &scratch.present) {
                        scratch.seen[cid] = true;
                        scratch.candidates.push(cid);
                    }
                }
            }
            for &cid in &scratch.candidates {
                scratch.seen[cid] = false;
            }
        }
        for &cid in &self.always {
            if self.plans[cid]
                .forbidden
                .iter()
                .all(|&l| !scratch.present[l])
            {
                scratch.candidates.push(cid);
            }
        }
        scratch.candidates.sort_unstable();
        !scratch.candidates.is_empty()
    }

    fn literals_hold(&self, cid: CondId, present: &[bool]) -> bool {
        let plan = &self.plans[cid];
        plan.required.iter().all(|g| g.iter().any(|&l| present[l]))
            && plan.forbidden.iter().all(|&l| !present[l])
    }

    /// Whether the literal stage passes condition `cid` on this text (the
    /// same automaton as [`Matcher::scan`]).
    pub fn literal_candidate(&self, text: &str, cid: CondId) -> bool {
        let mut scratch = Scratch::default();
        self.scan(text, &mut scratch) && scratch.candidates.contains(&cid)
    }

    /// Every check of a condition with its outcome and the value seen, for
    /// `sigwatch explain` ("why didn't my rule fire?"). Unlike
    /// [`Matcher::confirm`] it does not stop at the first failure.
    pub fn explain(cond: &Condition, event: &mut Event) -> Vec<Check> {
        let text = event.text.clone();
        let occurs = |lit: &str| {
            text.contains(lit)
                || serde_json::to_string(lit)
                    .ok()
                    .and_then(|q| q.get(1..q.len() - 1).map(|e| text.contains(e)))
                    .unwrap_or(false)
        };
        let q = |l: &str| format!("{l:?}");
        let mut out = Vec::new();
        if !cond.any.is_empty() {
            let found: Vec<String> = cond
                .any
                .iter()
                .filter(|l| occurs(l))
                .map(|l| q(l))
                .collect();
            out.push(if found.is_empty() {
                let near: Vec<String> = cond.any.iter().filter_map(|l| nearest(&text, l)).collect();
                Check {
                    ok: false,
                    what: format!(
                        "contains: none of {} occurs{}",
                        cond.any.iter().map(|l| q(l)).collect::<Vec<_>>().join(", "),
                        if near.is_empty() {
                            String::new()
                        } else {
                            format!(" (closest: {})", near.join("; "))
                        }
                    ),
                }
            } else {
                Check {
                    ok: true,
                    what: format!("contains: {} found", found.join(", ")),
                }
            });
        }
        for l in &cond.all {
            let ok = occurs(l);
            let near = if ok { None } else { nearest(&text, l) };
            out.push(Check {
                ok,
                what: format!(
                    "contains_all: {} {}{}",
                    q(l),
                    if ok { "found" } else { "missing" },
                    near.map(|n| format!(" (closest: {n})")).unwrap_or_default()
                ),
            });
        }
        for l in &cond.none {
            let bad = occurs(l);
            out.push(Check {
                ok: !bad,
                what: format!(
                    "not_contains: {} {}",
                    q(l),
                    if bad { "occurs: excluded" } else { "absent" }
                ),
            });
        }
        for re in &cond.regexes {
            match re.captures(&text) {
                Some(caps) => {
                    let mut got = Vec::new();
                    for name in re.capture_names().flatten() {
                        if let Some(m) = caps.name(name) {
                            got.push(format!("{name}={:?}", m.as_str()));
                            event
                                .captures
                                .push((name.to_string(), m.as_str().to_string()));
                        }
                    }
                    out.push(Check {
                        ok: true,
                        what: format!(
                            "regex /{}/ matches{}",
                            re.as_str(),
                            if got.is_empty() {
                                String::new()
                            } else {
                                format!(" ({})", got.join(", "))
                            }
                        ),
                    });
                }
                None => out.push(Check {
                    ok: false,
                    what: format!("regex /{}/ does not match the text", re.as_str()),
                }),
            }
        }
        not_regex_checks(cond, &text, &mut out);
        for (k, v) in &cond.labels {
            let val = event
                .labels
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone());
            out.push(Check {
                ok: v.test(val.as_deref()),
                what: format!("label {k} {}: {}", describe(v), seen(val.as_deref())),
            });
        }
        for (k, v) in &cond.fields {
            let val = event.get(k).map(|c| c.into_owned());
            out.push(Check {
                ok: v.test(val.as_deref()),
                what: format!("field {k} {}: {}", describe(v), seen(val.as_deref())),
            });
        }
        out
    }

    /// Confirms a candidate on the decoded event: regexes (adding named
    /// captures to the event), field and label conditions.
    pub fn confirm(cond: &Condition, event: &mut Event) -> bool {
        if cond.never {
            return false;
        }
        for re in &cond.regexes {
            let Some(caps) = re.captures(&event.text) else {
                return false;
            };
            for name in re.capture_names().flatten() {
                if let Some(m) = caps.name(name) {
                    event
                        .captures
                        .push((name.to_string(), m.as_str().to_string()));
                }
            }
        }
        if cond.not_regexes.iter().any(|re| re.is_match(&event.text)) {
            return false;
        }
        for (k, v) in &cond.labels {
            let val = event
                .labels
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str());
            if !v.test(val) {
                return false;
            }
        }
        for (k, v) in &cond.fields {
            if !v.test(event.get(k).as_deref()) {
                return false;
            }
        }
        true
    }
}

/// One check of a condition and its outcome (see [`Matcher::explain`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// Whether it passed.
    pub ok: bool,
    /// What was checked and what was seen.
    pub what: String,
}

/// For a literal that does not occur: the longest start of it (at least
/// half, at least 6 bytes) that does, and what the text has instead.
fn nearest(text: &str, lit: &str) -> Option<String> {
    let min = (lit.len() / 2).max(6);
    let mut k = lit.len().saturating_sub(1);
    while k >= min {
        if lit.is_char_boundary(k) {
            if let Some(at) = text.find(&lit[..k]) {
                let after = &text[at + k..];
                let mut end = after.len().min(k.min(24));
                while !after.is_char_boundary(end) {
                    end -= 1;
                }
                return Some(format!(
                    "the text has {:?} then {:?} where the literal has {:?}",
                    &lit[..k],
                    &after[..end],
                    &lit[k..]
                ));
            }
        }
        k -= 1;
    }
    None
}

fn not_regex_checks(cond: &crate::rules::Condition, text: &str, out: &mut Vec<Check>) {
    for re in &cond.not_regexes {
        let bad = re.is_match(text);
        let what = if bad {
            "matches: excluded"
        } else {
            "does not match"
        };
        out.push(Check {
            ok: !bad,
            what: format!("not_regex /{}/ {what}", re.as_str()),
        });
    }
}

fn describe(v: &crate::rules::ValueCond) -> String {
    use crate::rules::ValueCond;
    match v {
        ValueCond::Equals(e) => format!("must be {e:?}"),
        ValueCond::OneOf(l) => format!("must be one of {l:?}"),
        ValueCond::Regex(r) => format!("must match /{}/", r.as_str()),
        ValueCond::Exists(true) => "must be present".to_string(),
        ValueCond::Exists(false) => "must be absent".to_string(),
        ValueCond::NotEquals(e) => format!("must not be {e:?}"),
        ValueCond::NotRegex(r) => format!("must not match /{}/", r.as_str()),
        ValueCond::Number(b) => {
            let parts: Vec<String> = [("> ", b.gt), (">= ", b.ge), ("< ", b.lt), ("<= ", b.le)]
                .iter()
                .filter_map(|(op, v)| v.map(|v| format!("{op}{v}")))
                .collect();
            format!("must be a number {}", parts.join(" and "))
        }
    }
}

fn seen(v: Option<&str>) -> String {
    match v {
        Some(v) => format!("is {v:?}"),
        None => "absent".to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn automaton_memory_is_linear_in_the_literal_bytes() {
        // Long, distinct literals: the worst case for a DFA (every byte a
        // state). Past DFA_MAX_BYTES the automata are NFAs, linear in size.
        let per_byte = |n: usize| {
            let mut y = String::from("rules:\n");
            let mut x: u64 = 7;
            for i in 0..n {
                let lit: String = (0..1000)
                    .map(|_| {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        char::from(b'a' + (x >> 60) as u8 % 10)
                    })
                    .collect();
                y.push_str(&format!("  - id: r{i}\n    title: t\n    severity: info\n    match: {{contains: '{lit}'}}\n    detect: {{count: {{window: 1m}}}}\n"));
            }
            let m = Matcher::new(&set(&y)).unwrap();
            m.memory_usage() as f64 / (n * 1000) as f64
        };
        let (small, large) = (per_byte(200), per_byte(800));
        assert!(large < 200.0, "{large} bytes of automaton per literal byte");
        assert!(
            large < small * 1.5,
            "memory per literal byte grows with the set: {small} then {large}"
        );
    }

    #[test]
    fn anchors_cover_every_pattern_and_avoid_what_the_sample_is_full_of() {
        let words = ["quota", "shard", "lease", "vault", "queue", "tenant"];
        let mut pats: Vec<String> = (0..200)
            .map(|i| format!("{} failed for {} {i}", words[i % 6], words[(i / 6) % 6]))
            .collect();
        pats.push("ok".into());
        // "failed for" is everywhere in the sample: a poor anchor.
        let sample = "request failed for user 42, retrying\n".repeat(2000);
        let anchors = super::cover_anchors(&pats, 64, sample.as_bytes()).unwrap();
        for p in &pats {
            assert!(
                anchors.iter().any(|a| p.contains(a.as_str())),
                "{p} uncovered by {anchors:?}"
            );
        }
        assert!(anchors.len() <= 12, "{anchors:?}");
        // None of them occurs in the sample, though "failed for" would
        // have covered every pattern at once.
        assert!(
            anchors.iter().all(|a| !sample.contains(a.as_str())),
            "{anchors:?}"
        );
        assert!(
            anchors.contains(&"ok".to_string()),
            "a short pattern is its own anchor"
        );
        // Too few anchors allowed: no cover, and the caller keeps the whole set.
        assert_eq!(super::cover_anchors(&pats, 3, sample.as_bytes()), None);
    }

    #[test]
    fn a_large_literal_set_flags_the_same_lines_after_its_anchors_are_chosen() {
        let mut rules = String::from("rules:\n");
        for i in 0..150 {
            rules.push_str(&format!(
                "  - id: r{i}\n    title: t\n    severity: info\n    match: {{contains: [\"disk {i} of shelf {} is gone\"]}}\n    detect: {{count: {{window: 1m}}}}\n",
                i % 7
            ));
        }
        let set = crate::rules::compile(&[("r.yaml".into(), rules)]).unwrap();
        let m = Matcher::new(&set).unwrap();
        let search = m.literal_searcher().unwrap();
        assert!(matches!(search, super::LiteralSearch::Anchors(_)));
        let mut block = String::new();
        for i in 0..4000 {
            if i % 97 == 0 {
                block.push_str(&format!(
                    "ts=1 msg=\"disk {} of shelf {} is gone\"\n",
                    i % 150,
                    (i % 150) % 7
                ));
            } else {
                block.push_str("ts=1 msg=\"disk usage of shelf 3 is fine\" level=info\n");
            }
        }
        let flagged = |s: &super::LiteralSearch| {
            let b = block.as_bytes();
            let mut n = 0;
            let mut pos = 0;
            while let Some(at) = s.find(b, pos) {
                n += 1;
                pos = at + memchr::memchr(b'\n', &b[at..]).unwrap_or(b.len() - at) + 1;
            }
            n
        };
        // The first call chooses anchors on the block (it is large enough).
        assert_eq!(flagged(&search), 42);
        let super::LiteralSearch::Anchors(a) = &search else {
            unreachable!()
        };
        assert!(a.anchors().is_some_and(|x| x.len() <= 64));
        assert_eq!(
            flagged(&search),
            42,
            "every hit line, and the near-misses are not flagged"
        );
    }

    use super::*;
    use crate::decode::Decoder;
    use crate::rules::compile;
    use crate::source::Source;

    fn set(yaml: &str) -> RuleSet {
        compile(&[("t.yaml".into(), yaml.into())]).unwrap()
    }

    const RULES: &str = r#"
rules:
  - id: a
    title: a
    severity: info
    match: {contains: ["failed to mark as draining", "mark as"]}
    detect: {count: {window: 1m}}
  - id: b
    title: b
    severity: info
    match: {contains_all: ["redis", "connection refused"], not_contains: ["redis: nil"]}
    detect: {count: {window: 1m}}
  - id: c
    title: c
    severity: info
    match:
      contains: "EGRESS"
      field: {status: EGRESS_FAILED}
    detect: {count: {window: 1m}}
  - id: d
    title: d
    severity: info
    match: {contains: 'say "hi"'}
    detect: {count: {window: 1m}}
"#;

    fn cands(m: &Matcher, text: &str) -> Vec<CondId> {
        let mut s = Scratch::default();
        m.scan(text, &mut s);
        s.candidates.clone()
    }

    #[test]
    fn overlapping_literals_are_all_found() {
        let s = set(RULES);
        let m = Matcher::new(&s).unwrap();
        assert_eq!(cands(&m, "x failed to mark as draining"), vec![0]);
        assert_eq!(cands(&m, "dial redis: connection refused"), vec![1]);
        assert_eq!(
            cands(&m, "redis connection refused redis: nil"),
            Vec::<usize>::new()
        );
        assert_eq!(cands(&m, "connection refused"), Vec::<usize>::new());
        assert_eq!(cands(&m, "draining RTP buffer"), Vec::<usize>::new());
    }

    #[test]
    fn field_values_prefilter_and_confirm() {
        let s = set(RULES);
        let m = Matcher::new(&s).unwrap();
        assert!(cands(&m, r#"{"status":"EGRESS_ACTIVE"}"#).is_empty());
        let line = r#"{"msg":"egress_failed","status":"EGRESS_FAILED"}"#;
        assert_eq!(cands(&m, line), vec![2]);
        let mut d = Decoder::new(&s.keys, false);
        let p = d.prepare(&Source::named("x"), line, None).unwrap();
        let mut e = d.event(&p);
        assert!(Matcher::confirm(&s.conditions[2], &mut e));
        let p = d
            .prepare(
                &Source::named("x"),
                r#"{"msg":"EGRESS_FAILED seen","status":"EGRESS_OK"}"#,
                None,
            )
            .unwrap();
        let mut e = d.event(&p);
        assert!(!Matcher::confirm(&s.conditions[2], &mut e));
    }

    #[test]
    fn escaped_literals_match_inside_json() {
        let s = set(RULES);
        let m = Matcher::new(&s).unwrap();
        assert_eq!(cands(&m, r#"{"msg":"they say \"hi\" now"}"#), vec![3]);
        assert_eq!(cands(&m, r#"they say "hi" now"#), vec![3]);
    }

    #[test]
    fn excluded_regexes_and_negated_fields_confirm() {
        let s = set("rules:\n  - id: n\n    title: n\n    severity: info\n    match:\n      contains: timeout\n      not_regex: 'health.?check'\n      field: {method: {not_equals: GET}, status: {ge: 500, lt: 600}}\n    detect: {count: {window: 1m}}\n");
        let mut d = Decoder::new(&s.keys, false);
        let mut confirm = |line: &str| {
            let p = d.prepare(&Source::named("x"), line, None).unwrap();
            let mut e = d.event(&p);
            Matcher::confirm(&s.conditions[0], &mut e)
        };
        assert!(confirm(
            r#"{"msg":"upstream timeout","method":"POST","status":503}"#
        ));
        // No method at all is not GET.
        assert!(confirm(r#"{"msg":"upstream timeout","status":"502"}"#));
        assert!(!confirm(
            r#"{"msg":"health check timeout","method":"POST","status":503}"#
        ));
        assert!(!confirm(
            r#"{"msg":"healthcheck timeout","method":"POST","status":503}"#
        ));
        assert!(!confirm(
            r#"{"msg":"upstream timeout","method":"GET","status":503}"#
        ));
        assert!(!confirm(
            r#"{"msg":"upstream timeout","method":"POST","status":600}"#
        ));
        assert!(!confirm(r#"{"msg":"upstream timeout","method":"POST"}"#));
    }

    #[test]
    fn regex_captures_become_fields() {
        let s = set("rules:\n  - id: g\n    title: g\n    severity: info\n    match:\n      contains: DeadlineExceeded\n      regex: 'upstream=(?P<upstream>\\S+)'\n    detect: {count: {window: 1m}}\n");
        let m = Matcher::new(&s).unwrap();
        let line = "level=error msg=\"rpc error: code = DeadlineExceeded desc = x\" upstream=10.2.0.14:9090";
        assert_eq!(cands(&m, line), vec![0]);
        let mut d = Decoder::new(&s.keys, false);
        let p = d.prepare(&Source::named("x"), line, None).unwrap();
        let mut e = d.event(&p);
        assert!(Matcher::confirm(&s.conditions[0], &mut e));
        assert_eq!(e.get("upstream").as_deref(), Some("10.2.0.14:9090"));
    }
}
