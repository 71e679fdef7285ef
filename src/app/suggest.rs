//! `sigwatch suggest`: the postmortem's "add an alert for this", done by
//! the tool. Sumo Logic's LogCompare diffs a window against a baseline but
//! writes no rule; here the diff becomes rules in the pack's own idiom,
//! with examples and tests, checked before they are written.
//!
//! How: the templates of the baseline and the incident are mined together
//! (the novelty miner, so a template means the same in both), then both
//! are read again and every line is counted under its final template, per
//! group (each key alias the lines carry: node, pod, upstream…). A
//! template is a candidate when the incident has it and the baseline has
//! not, or has it much more often, or on one node while its peers are
//! quiet; it is ranked by how new, how severe and how telling its shape is
//! (concentrated on one group, on every group at once, lasting for
//! minutes). Each candidate becomes a rule: its longest run of constant
//! words that holds no number, ID or path as the literal, the alias most
//! of its lines carry as the group, and a detector chosen from the shape
//! it had — `share` (one group takes most of it), `spread` (most groups at
//! once), `persist` (one group for minutes), `count` — with a threshold
//! above what the baseline ever reached. Then every rule is replayed over
//! both inputs; one that fires on the baseline is tightened (at most a
//! few times) or dropped, one that misses the incident is loosened once
//! or dropped. What is written fires on the incident and stays quiet on
//! the baseline, with its examples and its tests passing.

use super::{load_rules, AppError, RulesOptions};
use crate::alert::{AlertState, Notification};
use crate::decode::mined::mining_message;
use crate::decode::severity::Level;
use crate::decode::{resolve_key, KeyConfig};
use crate::engine::{Engine, Options};
use crate::mining::{Miner, MinerConfig, WILDCARD};
use crate::rules::RuleSet;
use crate::source::replay::Merged;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const NS: i64 = 1_000_000_000;
/// The window of `count` and `spread` suggestions.
const WINDOW: i64 = 5 * 60 * NS;
/// Longest pause that still continues a `persist` run.
const MAX_GAP: i64 = 60 * NS;
/// Shortest run that makes a template persistent.
const MIN_PERSIST: i64 = 5 * 60 * NS;
/// Lines of a template kept to choose its literal and examples.
const KEEP_LINES: usize = 20;
/// Groups counted per template and alias.
const MAX_GROUPS: usize = 10_000;
/// Rounds of tightening a rule that fires on the baseline.
const ROUNDS: usize = 4;

/// Options of `sigwatch suggest`.
#[derive(clap::Args, Debug, Clone)]
pub struct SuggestOptions {
    /// Logs of normal operation (merged by time).
    #[arg(long, required = true, num_args = 1.., value_name = "FILE")]
    pub baseline: Vec<String>,
    /// Logs of the incident (merged by time).
    #[arg(long, required = true, num_args = 1.., value_name = "FILE")]
    pub incident: Vec<String>,
    /// Only incident lines from this instant on (RFC 3339, a date, Unix
    /// seconds).
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,
    /// Only incident lines before this instant.
    #[arg(long, value_name = "TIME")]
    pub to: Option<String>,
    /// Where to write the suggested rules (YAML).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Also write rule tests into this directory: the incident fires them,
    /// the baseline does not.
    #[arg(long, value_name = "DIR")]
    pub tests: Option<PathBuf>,
    /// Most rules suggested.
    #[arg(long, default_value_t = 8)]
    pub max: usize,
    /// Prefix of the suggested rules' ids.
    #[arg(long, default_value = "suggested")]
    pub prefix: String,
}

/// One group's sightings of a template.
#[derive(Debug, Clone, Default)]
struct GroupStat {
    count: u64,
    /// Times within the last [`WINDOW`], for the busiest window.
    recent: VecDeque<i64>,
    max_window: usize,
    run_start: i64,
    last: Option<i64>,
    run_gap: i64,
    longest_run: i64,
    longest_gap: i64,
}

impl GroupStat {
    fn add(&mut self, t: i64) {
        self.count += 1;
        self.recent.push_back(t);
        while self.recent.front().is_some_and(|&f| t - f >= WINDOW) {
            self.recent.pop_front();
        }
        self.max_window = self.max_window.max(self.recent.len());
        match self.last {
            Some(l) if t - l <= MAX_GAP => self.run_gap = self.run_gap.max(t - l),
            _ => {
                self.run_start = t;
                self.run_gap = 0;
            }
        }
        self.last = Some(t);
        if t - self.run_start > self.longest_run {
            self.longest_run = t - self.run_start;
            self.longest_gap = self.run_gap;
        }
    }
}

/// The sightings of the last [`WINDOW`] and how many each group has, so
/// the groups at once are known without a pass over the window.
#[derive(Debug, Clone, Default)]
struct Recent {
    seen: VecDeque<(i64, String)>,
    per_group: HashMap<String, usize>,
}

impl Recent {
    /// A sighting of `group` at `t`; the groups within the window now.
    fn add(&mut self, t: i64, group: String) -> usize {
        *self.per_group.entry(group.clone()).or_default() += 1;
        self.seen.push_back((t, group));
        while let Some((f, g)) = self.seen.front() {
            if t - f < WINDOW {
                break;
            }
            if let Some(n) = self.per_group.get_mut(g) {
                *n -= 1;
                if *n == 0 {
                    self.per_group.remove(g);
                }
            }
            self.seen.pop_front();
        }
        self.per_group.len()
    }
}

/// What one side (baseline or incident) says of a template.
#[derive(Debug, Clone, Default)]
struct Side {
    count: u64,
    first: Option<i64>,
    last: Option<i64>,
    level: Option<Level>,
    /// Alias → group → sightings.
    groups: BTreeMap<String, BTreeMap<String, GroupStat>>,
    /// Alias → the groups of the last [`WINDOW`], for the most groups at
    /// once.
    recent: BTreeMap<String, Recent>,
    most_at_once: BTreeMap<String, usize>,
    lines: Vec<String>,
}

/// Everything one side's lines say.
#[derive(Debug, Default)]
struct Tally {
    templates: HashMap<u64, Side>,
    /// Alias → groups that logged anything, with their first and last
    /// line's time.
    population: BTreeMap<String, BTreeMap<String, (i64, i64)>>,
    first: Option<i64>,
    last: Option<i64>,
    lines: u64,
}

impl Tally {
    /// The groups of `alias` that logged anything while `s` was logged
    /// (from a window before its first line to its last): its peers.
    fn peers(&self, alias: &str, s: &Side) -> usize {
        let (Some(a), Some(b)) = (s.first, s.last) else {
            return 0;
        };
        self.population.get(alias).map_or(0, |g| {
            g.values()
                .filter(|(first, last)| *last >= a - WINDOW && *first <= b)
                .count()
        })
    }

    fn span_secs(&self) -> f64 {
        match (self.first, self.last) {
            (Some(a), Some(b)) => ((b - a) as f64 / NS as f64).max(60.0),
            _ => 60.0,
        }
    }
}

/// The detector of a suggestion, with its parameters.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Count { threshold: u64 },
    Share { min_total: u64, min_share: f64 },
    Spread { fraction: f64, min_groups: usize },
    Persist { for_: i64, max_gap: i64 },
}

/// A suggested rule and why.
#[derive(Debug, Clone)]
struct Suggestion {
    id: String,
    literal: String,
    /// A second literal every line must hold (`contains_all`).
    also: Option<String>,
    /// Every run of constant words the lines hold.
    runs: Vec<String>,
    alias: String,
    kind: Kind,
    severity: &'static str,
    level: Option<Level>,
    template: String,
    why: Vec<String>,
    score: f64,
    examples: Vec<String>,
    no_match: Vec<String>,
    /// What replaying said: groups fired on the incident.
    fired: BTreeSet<String>,
}

/// `sigwatch suggest`: writes the rules (and tests) and returns the ranked
/// explanation to print.
pub fn suggest(rules: &RulesOptions, o: &SuggestOptions) -> Result<String, AppError> {
    if o.baseline.iter().chain(&o.incident).any(|f| f == "-") {
        return Err(AppError::Setup(
            "suggest reads its inputs twice: name files, not - (stdin)".into(),
        ));
    }
    let set = load_rules(rules)?;
    let keys = &set.keys;
    let now = crate::clock::wall_ns();
    let at = |flag: &str, v: &Option<String>| -> Result<Option<i64>, AppError> {
        v.as_deref()
            .map(|s| crate::clock::parse_instant(s, now))
            .transpose()
            .map_err(|e| AppError::Setup(format!("{flag}: {e}")))
    };
    let range = (at("--from", &o.from)?, at("--to", &o.to)?);
    // Pass 1: the templates of both, mined together.
    let mut miner = Miner::new(MinerConfig {
        max_templates: 20_000,
        variable_after: 4,
    });
    mine(&mut miner, &o.baseline, keys, (None, None))?;
    mine(&mut miner, &o.incident, keys, range)?;
    // Pass 2: every line under its final template, per group.
    let aliases = aliases(keys);
    let base = tally(&o.baseline, keys, (None, None), &miner, &aliases)?;
    let inc = tally(&o.incident, keys, range, &miner, &aliases)?;
    if inc.lines == 0 {
        return Err(AppError::Setup(
            "the incident has no lines (in --from/--to)".into(),
        ));
    }
    let mut skipped = Vec::new();
    let mut found = candidates(&miner, &base, &inc, &aliases, &o.prefix, &mut skipped);
    found.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
    // Twice as many as asked: some will not survive the check.
    found.truncate(o.max.saturating_mul(2).max(1));
    narrow(&mut found, &o.baseline)?;
    let mut dropped = Vec::new();
    let kept = check(found, o, range, &mut dropped)?;
    let mut kept = kept;
    kept.truncate(o.max);
    let yaml = rules_yaml(&kept, o);
    std::fs::write(&o.out, &yaml)
        .map_err(AppError::io(format!("cannot write {}", o.out.display())))?;
    let mut report = String::new();
    let _ = writeln!(
        report,
        "{} rule(s) written to {} from {} incident line(s) against {} baseline line(s)",
        kept.len(),
        o.out.display(),
        inc.lines,
        base.lines
    );
    if let Some(dir) = &o.tests {
        let path = write_tests(dir, &kept, o)?;
        let _ = writeln!(report, "tests written to {}", path.display());
    }
    for (i, s) in kept.iter().enumerate() {
        let _ = writeln!(
            report,
            "\n{}. {}  {}",
            i + 1,
            s.id,
            describe(&s.kind, &s.alias)
        );
        let _ = writeln!(report, "   {:?}  ({})", s.literal, s.template);
        for w in &s.why {
            let _ = writeln!(report, "   - {w}");
        }
        let fired: Vec<&str> = s.fired.iter().map(String::as_str).take(5).collect();
        let _ = writeln!(
            report,
            "   fires on the incident for {}{}; quiet on the baseline",
            fired.join(", "),
            if s.fired.len() > 5 { ", …" } else { "" }
        );
        for (id, lit) in covered(&set, s) {
            let _ = writeln!(report, "   - the loaded rule {id} matches {lit:?} already");
        }
    }
    if !dropped.is_empty() || !skipped.is_empty() {
        let _ = writeln!(report, "\nleft out:");
        for d in &dropped {
            let _ = writeln!(report, "   {d}");
        }
        for d in skipped.iter().take(10) {
            let _ = writeln!(report, "   {d}");
        }
        if skipped.len() > 10 {
            let _ = writeln!(report, "   … and {} more", skipped.len() - 10);
        }
    }
    Ok(report)
}

/// Whether `t` lies in `range` (`[from, to)`, either end open).
fn in_range(t: i64, range: (Option<i64>, Option<i64>)) -> bool {
    !(range.0.is_some_and(|a| t < a) || range.1.is_some_and(|b| t >= b))
}

/// Pass 1 over one side: every message in `range` into the miner.
fn mine(
    miner: &mut Miner,
    files: &[String],
    keys: &KeyConfig,
    range: (Option<i64>, Option<i64>),
) -> Result<(), AppError> {
    super::mine::each_line(files, keys, |d, p, _| {
        if !in_range(p.time, range) || p.continues {
            return;
        }
        let level = d.level(p);
        if let Some(m) = mining_message(&p.text, p.format, p.header.as_ref(), level, Some(p.time)) {
            miner.add(&m, p.time, level);
        }
    })?;
    Ok(())
}

/// The key aliases lines are grouped by, most telling first.
fn aliases(keys: &KeyConfig) -> Vec<String> {
    let mut v: Vec<String> = keys.aliases.keys().cloned().collect();
    let rank = |a: &str| match a {
        "node" => 0,
        "pod" => 1,
        "upstream" => 2,
        _ => 3,
    };
    v.sort_by_key(|a| (rank(a), a.clone()));
    v
}

/// Pass 2 over one side: every line in `range` counted under its final
/// template, per group of each alias.
fn tally(
    files: &[String],
    keys: &KeyConfig,
    range: (Option<i64>, Option<i64>),
    miner: &Miner,
    aliases: &[String],
) -> Result<Tally, AppError> {
    let mut t = Tally::default();
    super::mine::each_line(files, keys, |dec, p, raw| {
        let time = p.time;
        if !in_range(time, range) {
            return;
        }
        t.lines += 1;
        t.first.get_or_insert(time);
        t.last = Some(t.last.map_or(time, |l| l.max(time)));
        let level = dec.level(p);
        // A trace's frames belong to their record's template.
        let message = (!p.continues)
            .then(|| mining_message(&p.text, p.format, p.header.as_ref(), level, Some(time)))
            .flatten()
            .map(|m| m.into_owned());
        let event = dec.event(p);
        let get = |k: &str| event.get(k);
        let groups: Vec<(String, String)> = aliases
            .iter()
            .filter_map(|a| resolve_key(keys, a, &get).map(|g| (a.clone(), g)))
            .collect();
        for (a, g) in &groups {
            let pop = t.population.entry(a.clone()).or_default();
            if let Some(span) = pop.get_mut(g) {
                span.1 = span.1.max(time);
            } else if pop.len() < MAX_GROUPS {
                pop.insert(g.clone(), (time, time));
            }
        }
        let Some(id) = message.and_then(|m| miner.lookup(&m)) else {
            return;
        };
        let side = t.templates.entry(miner.canonical(id)).or_default();
        side.count += 1;
        side.first.get_or_insert(time);
        side.last = Some(side.last.map_or(time, |l| l.max(time)));
        side.level = side.level.max(level);
        if side.lines.len() < KEEP_LINES {
            side.lines.push(raw.to_string());
        }
        for (a, g) in groups {
            let per = side.groups.entry(a.clone()).or_default();
            if per.len() < MAX_GROUPS || per.contains_key(&g) {
                per.entry(g.clone()).or_default().add(time);
            }
            let at_once = side.recent.entry(a.clone()).or_default().add(time, g);
            let m = side.most_at_once.entry(a).or_default();
            *m = (*m).max(at_once);
        }
    })?;
    Ok(t)
}

/// A constant word a rule may anchor on: no digit (numbers, IDs,
/// versions), no path, not a placeholder.
fn constant_word(w: &str) -> bool {
    w != WILDCARD
        && !w.contains(WILDCARD)
        && !w.bytes().any(|b| b.is_ascii_digit())
        && !w.contains('/')
        && !w.contains('\\')
        && !w.contains('=')
        && w.chars().any(|c| c.is_alphabetic())
}

/// The literal of a template: its longest run of constant words that
/// occurs as written in every kept line.
#[cfg(test)]
fn literal(tokens: &[String], lines: &[String]) -> Option<String> {
    runs(tokens, lines).into_iter().next()
}

/// The runs of constant words of a template that occur as written in
/// every kept line, longest first: the literals a rule may anchor on.
fn runs(tokens: &[String], lines: &[String]) -> Vec<String> {
    let mut runs: Vec<String> = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    for t in tokens
        .iter()
        .map(String::as_str)
        .chain(std::iter::once(WILDCARD))
    {
        if constant_word(t) {
            cur.push(t);
        } else if !cur.is_empty() {
            // Every contiguous sub-run, longest first, so a run whose
            // full spelling differs in the line still yields a part.
            for len in (1..=cur.len()).rev() {
                for w in cur.windows(len) {
                    runs.push(w.join(" "));
                }
            }
            cur.clear();
        }
    }
    let mut runs: Vec<String> = runs
        .into_iter()
        .map(|r| {
            r.trim_matches(|c: char| c == ',' || c == ';' || c == ':')
                .to_string()
        })
        .filter(|r| r.len() >= 6 && lines.iter().all(|l| l.contains(r.as_str())))
        .collect();
    runs.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    runs.dedup();
    runs
}

/// Lines of `files` holding each of `literals` (a line counts once per
/// literal).
fn count_in(files: &[String], literals: &[String]) -> Result<Vec<u64>, AppError> {
    let mut counts = vec![0u64; literals.len()];
    if literals.is_empty() {
        return Ok(counts);
    }
    let ac = aho_corasick::AhoCorasick::new(literals)
        .map_err(|e| AppError::Setup(format!("literal search: {e}")))?;
    let mut merged = Merged::open(files, crate::decode::peek_time)?;
    let mut seen = vec![false; literals.len()];
    while let Some((_, line)) = merged.next_indexed()? {
        seen.iter_mut().for_each(|s| *s = false);
        for m in ac.find_overlapping_iter(line) {
            let i = m.pattern().as_usize();
            if !seen[i] {
                seen[i] = true;
                counts[i] += 1;
            }
        }
    }
    Ok(counts)
}

/// Narrows a literal that the baseline's other lines hold too: the
/// longest other run of the template that no baseline line holds becomes
/// `contains_all`.
fn narrow(found: &mut [Suggestion], baseline: &[String]) -> Result<(), AppError> {
    let all: Vec<String> = found
        .iter()
        .flat_map(|s| s.runs.iter().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let counts = count_in(baseline, &all)?;
    let count = |r: &str| all.iter().position(|a| a == r).map_or(0, |i| counts[i]);
    for s in found.iter_mut() {
        let here = count(&s.literal);
        if here == 0 {
            continue;
        }
        if let Some(r) = s
            .runs
            .iter()
            .find(|r| count(r) == 0 && !s.literal.contains(r.as_str()))
        {
            s.why.push(format!(
                "{here} baseline line(s) hold {:?} too: also {r:?}",
                s.literal
            ));
            s.also = Some(r.clone());
        }
    }
    Ok(())
}

fn slug(s: &str) -> String {
    let mut o = String::new();
    for w in s
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if o.len() + w.len() > 40 {
            break;
        }
        if !o.is_empty() {
            o.push('_');
        }
        o.push_str(&w.to_ascii_lowercase());
    }
    if o.is_empty() {
        o.push_str("signature");
    }
    o
}

/// The ranked candidates, each with a first choice of detector.
fn candidates(
    miner: &Miner,
    base: &Tally,
    inc: &Tally,
    aliases: &[String],
    prefix: &str,
    skipped: &mut Vec<String>,
) -> Vec<Suggestion> {
    let mut out = Vec::new();
    let mut ids: BTreeSet<String> = BTreeSet::new();
    let mut literals: BTreeSet<String> = BTreeSet::new();
    let empty = Side::default();
    let mut order: Vec<(&u64, &Side)> = inc.templates.iter().collect();
    order.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(b.0)));
    for (id, s) in order {
        let Some(tpl) = miner.get(*id) else { continue };
        let b = base.templates.get(id).unwrap_or(&empty);
        // The alias most of its lines carry, among those that tell its
        // groups apart (a file name alone names one group): the first of
        // node, pod, upstream… that does, else the first carried at all.
        let carried = |a: &String| {
            let n: u64 = s
                .groups
                .get(a)
                .map_or(0, |g| g.values().map(|x| x.count).sum());
            n * 2 >= s.count && n > 0
        };
        let several = |a: &String| inc.peers(a, s) >= 2;
        let Some(alias) = aliases
            .iter()
            .find(|a| carried(a) && several(a))
            .or_else(|| aliases.iter().find(|a| carried(a)))
        else {
            continue;
        };
        let runs = runs(&tpl.tokens, &s.lines);
        let Some(lit) = runs.first().cloned() else {
            continue;
        };
        if !literals.insert(lit.clone()) {
            continue;
        }
        let groups = &s.groups[alias];
        let pop = inc.peers(alias, s);
        let total: u64 = groups.values().map(|g| g.count).sum();
        let (top, top_count) = groups
            .iter()
            .max_by(|a, b| a.1.count.cmp(&b.1.count).then(b.0.cmp(a.0)))
            .map(|(g, x)| (g.clone(), x.count))
            .unwrap_or_default();
        let share = top_count as f64 / total.max(1) as f64;
        let at_once = s.most_at_once.get(alias).copied().unwrap_or(0);
        let b_groups = b.groups.get(alias);
        let b_total: u64 = b_groups.map_or(0, |g| g.values().map(|x| x.count).sum());
        let b_share = b_groups
            .and_then(|g| g.values().map(|x| x.count).max())
            .map_or(0.0, |m| m as f64 / b_total.max(1) as f64);
        let b_max_window = b_groups
            .and_then(|g| g.values().map(|x| x.max_window).max())
            .unwrap_or(0) as u64;
        let b_at_once = b.most_at_once.get(alias).copied().unwrap_or(0);
        let b_pop = base.peers(alias, b).max(1);
        let longest = groups.values().max_by_key(|g| g.longest_run);
        let b_longest = b_groups
            .and_then(|g| g.values().map(|x| x.longest_run).max())
            .unwrap_or(0);
        let new = b.count == 0;
        let rate = s.count as f64 / inc.span_secs();
        let b_rate = (b.count as f64).max(0.5) / base.span_secs();
        let rise = rate / b_rate;
        let concentrated = pop >= 3 && share >= 0.8 && total >= 3 && b_share < 0.8;
        let everywhere = pop >= 2
            && at_once >= 2
            && at_once * 10 >= pop * 8
            && (b_at_once as f64 / b_pop as f64) < 0.5;
        let persistent = longest.is_some_and(|g| g.longest_run >= MIN_PERSIST)
            && b_longest * 2 < longest.map_or(0, |g| g.longest_run);
        if !(new || rise >= 5.0 || concentrated) {
            continue;
        }
        let lvl = s.level.or(tpl.levels.highest());
        // Debug lines come and go with verbosity, and one info line per
        // node is a lifecycle event (a start, a stop), not a signature: a
        // rule on either pages on the next deploy.
        if lvl.is_some_and(|l| l < Level::Info) {
            skipped.push(format!("{:?}: debug lines", tpl.text()));
            continue;
        }
        let most = groups.values().map(|g| g.count).max().unwrap_or(0);
        if lvl.is_none_or(|l| l <= Level::Info) && most <= 1 {
            skipped.push(format!(
                "{:?}: one info line per {alias} (a lifecycle event)",
                tpl.text()
            ));
            continue;
        }
        let mut why = Vec::new();
        let mut score = 0.0;
        if new {
            score += 3.0;
            why.push(format!(
                "new: {} line(s) in the incident, none in the baseline",
                s.count
            ));
        } else if rise >= 5.0 {
            score += if rise >= 20.0 { 2.0 } else { 1.0 };
            why.push(format!(
                "rose {rise:.0}×: {} line(s) in the incident, {} in the baseline",
                s.count, b.count
            ));
        }
        match lvl {
            Some(l) if l >= Level::Error => score += 2.0,
            Some(l) if l >= Level::Warn => score += 1.0,
            _ => {}
        }
        let threshold_count = (b_max_window + 1)
            .max((groups.values().map(|g| g.max_window).max().unwrap_or(1) as u64) / 3)
            .max(1);
        let kind = if concentrated {
            score += 2.0;
            why.push(format!(
                "concentrated: {:.0} % on {alias} {top} while {} other {alias}(s) log",
                share * 100.0,
                pop - 1
            ));
            Kind::Share {
                min_total: (total / 2).clamp(3, 10),
                min_share: 0.8,
            }
        } else if everywhere {
            score += 2.0;
            why.push(if b.count == 0 {
                format!("everywhere: on {at_once} of {pop} {alias}s within 5m")
            } else {
                format!("everywhere: on {at_once} of {pop} {alias}s within 5m (the baseline: {b_at_once} of {b_pop})")
            });
            let frac = ((at_once as f64 / pop as f64) * 0.6 * 10.0).floor() / 10.0;
            Kind::Spread {
                fraction: frac.clamp(0.3, 0.8),
                min_groups: 2,
            }
        } else if let (true, Some(g)) = (persistent, longest) {
            score += 1.0;
            why.push(format!(
                "lasting: {} logged it for {} without a pause over {}",
                alias,
                human(g.longest_run),
                human(MAX_GAP)
            ));
            Kind::Persist {
                for_: round_minutes(g.longest_run / 2).clamp(2 * 60 * NS, 10 * 60 * NS),
                max_gap: round_seconds((g.longest_gap * 2).max(30 * NS)).min(MAX_GAP * 2),
            }
        } else {
            why.push(format!(
                "at most {} in 5m per {alias} in the baseline",
                b_max_window
            ));
            Kind::Count {
                threshold: threshold_count,
            }
        };
        score += (s.count as f64).log10() / 4.0;
        let mut id = format!("{prefix}.{}", slug(&lit));
        let mut n = 2;
        while ids.contains(&id) {
            id = format!("{prefix}.{}_{n}", slug(&lit));
            n += 1;
        }
        ids.insert(id.clone());
        let no_match = no_match_example(base, &lit);
        out.push(Suggestion {
            id,
            severity: match lvl {
                Some(l) if l >= Level::Error => "critical",
                _ => "warning",
            },
            level: lvl,
            template: tpl.text(),
            examples: s
                .lines
                .iter()
                .filter(|l| l.len() <= 4096)
                .take(2)
                .cloned()
                .collect(),
            no_match,
            literal: lit,
            also: None,
            runs,
            alias: alias.clone(),
            kind,
            why,
            score,
            fired: BTreeSet::new(),
        });
    }
    out
}

/// A baseline line a rule must not match: one of the kept lines of the
/// baseline's templates that lacks the literal.
fn no_match_example(base: &Tally, lit: &str) -> Vec<String> {
    let mut sides: Vec<(&u64, &Side)> = base.templates.iter().collect();
    sides.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(b.0)));
    sides
        .iter()
        .flat_map(|(_, s)| s.lines.first())
        .find(|l| !l.contains(lit) && l.len() <= 4096)
        .cloned()
        .into_iter()
        .collect()
}

fn round_minutes(ns: i64) -> i64 {
    (ns / (60 * NS)).max(1) * 60 * NS
}

fn round_seconds(ns: i64) -> i64 {
    ((ns + NS - 1) / NS).max(1) * NS
}

fn human(ns: i64) -> String {
    let mut s = String::new();
    let _ = crate::duration::format_duration(ns, &mut s);
    s
}

fn describe(k: &Kind, alias: &str) -> String {
    match k {
        Kind::Count { threshold } => format!("count ≥ {threshold} in 5m per {alias}"),
        Kind::Share {
            min_total,
            min_share,
        } => format!(
            "share ≥ {:.0} % of ≥ {min_total} in 15m on one {alias}",
            min_share * 100.0
        ),
        Kind::Spread {
            fraction,
            min_groups,
        } => format!(
            "spread over ≥ {:.0} % (≥ {min_groups}) of the {alias}s in 5m",
            fraction * 100.0
        ),
        Kind::Persist { for_, max_gap } => format!(
            "persist for {} per {alias} (pauses up to {})",
            human(*for_),
            human(*max_gap)
        ),
    }
}

/// Stricter after it fired on the baseline (None: as strict as it goes).
fn tighten(k: &Kind) -> Option<Kind> {
    Some(match k {
        Kind::Count { threshold } if *threshold < 1_000 => Kind::Count {
            threshold: threshold * 2 + 1,
        },
        Kind::Share {
            min_total,
            min_share,
        } if *min_total < 1_000 => Kind::Share {
            min_total: min_total * 2,
            min_share: (min_share + 0.1).min(0.95),
        },
        Kind::Spread {
            fraction,
            min_groups,
        } if *fraction < 1.0 => Kind::Spread {
            fraction: (fraction + 0.2).min(1.0),
            min_groups: min_groups + 1,
        },
        Kind::Persist { for_, max_gap } if *for_ < 3_600 * NS => Kind::Persist {
            for_: for_ * 2,
            max_gap: *max_gap,
        },
        _ => return None,
    })
}

/// Looser after it missed the incident (None: as loose as it goes).
fn loosen(k: &Kind) -> Option<Kind> {
    Some(match k {
        Kind::Count { threshold } if *threshold > 1 => Kind::Count { threshold: 1 },
        Kind::Share {
            min_total,
            min_share,
        } if *min_total > 3 => Kind::Share {
            min_total: 3,
            min_share: *min_share,
        },
        Kind::Spread {
            fraction,
            min_groups,
        } if *fraction > 0.3 => Kind::Spread {
            fraction: 0.3,
            min_groups: *min_groups,
        },
        Kind::Persist { for_, max_gap } if *for_ > 2 * 60 * NS => Kind::Persist {
            for_: 2 * 60 * NS,
            max_gap: *max_gap,
        },
        _ => return None,
    })
}

/// Replays `files` (in `range`) through `set`; the notifications of the
/// rules named `ids`.
fn replay(
    set: &RuleSet,
    files: &[String],
    range: (Option<i64>, Option<i64>),
    ids: &BTreeSet<String>,
) -> Result<Vec<Notification>, AppError> {
    let mut engine = Engine::new(set.clone(), Options::default())?;
    let mut merged = Merged::open(files, crate::decode::peek_time)?;
    let sources = merged.sources();
    let fallback = crate::source::Source::named("input");
    let mut out = Vec::new();
    let mut keep = true;
    while let Some((i, line)) = merged.next_indexed()? {
        if let Some(t) = crate::decode::peek_time(line, None, None) {
            keep = !(range.0.is_some_and(|a| t < a) || range.1.is_some_and(|b| t >= b));
        }
        if keep {
            engine.push_line(sources.get(i).unwrap_or(&fallback), line, None, &mut out);
        }
    }
    engine.finish(&mut out);
    out.retain(|n| ids.contains(&n.rule));
    Ok(out)
}

/// Compiles the suggestions, checks their examples, replays them over both
/// sides and adjusts them until they fire on the incident and not on the
/// baseline; drops (with the reason) those that cannot.
fn check(
    mut found: Vec<Suggestion>,
    o: &SuggestOptions,
    range: (Option<i64>, Option<i64>),
    dropped: &mut Vec<String>,
) -> Result<Vec<Suggestion>, AppError> {
    let mut loosened: BTreeSet<String> = BTreeSet::new();
    for _ in 0..=ROUNDS + 1 {
        if found.is_empty() {
            break;
        }
        let yaml = rules_yaml(&found, o);
        let set = match crate::rules::compile(&[(o.out.display().to_string(), yaml)]) {
            Ok(s) => s,
            Err(e) => {
                return Err(AppError::Setup(format!(
                    "a suggested rule does not load (a bug): {e}"
                )))
            }
        };
        // Examples that do not do what they say are dropped (the literal
        // stays what the lines were checked against).
        if let Ok(failures) = crate::explain::check_examples(&set) {
            for f in failures {
                if let Some(s) = found.iter_mut().find(|s| s.id == f.rule) {
                    s.examples.retain(|l| *l != f.line);
                    s.no_match.retain(|l| *l != f.line);
                }
            }
        }
        let ids: BTreeSet<String> = found.iter().map(|s| s.id.clone()).collect();
        // The rules that fire on the baseline: merged, and each file alone
        // as the written tests replay it.
        let mut noisy: BTreeSet<String> = replay(&set, &o.baseline, (None, None), &ids)?
            .into_iter()
            .filter(|n| n.state == AlertState::Firing)
            .map(|n| n.rule)
            .collect();
        for f in &o.baseline {
            let abs = std::fs::canonicalize(f).unwrap_or_else(|_| PathBuf::from(f));
            let case = crate::ruletest::Case::of_file("baseline", &abs.display().to_string());
            let seen =
                crate::ruletest::observe(&case, &set, Path::new("/")).map_err(AppError::Setup)?;
            noisy.extend(
                seen.into_iter()
                    .filter(|(state, rule, _)| state == "firing" && ids.contains(rule))
                    .map(|(_, rule, _)| rule),
            );
        }
        let on_inc = replay(&set, &o.incident, range, &ids)?;
        let mut changed = false;
        let mut keep = Vec::new();
        for mut s in found {
            let is_noisy = noisy.contains(&s.id);
            let fired: BTreeSet<String> = on_inc
                .iter()
                .filter(|n| n.rule == s.id && n.state == AlertState::Firing)
                .map(|n| n.group.clone())
                .collect();
            if is_noisy {
                match tighten(&s.kind) {
                    Some(k) => {
                        s.why
                            .push("tightened: the first choice fired on the baseline".into());
                        s.kind = k;
                        keep.push(s);
                    }
                    None => dropped.push(format!("{}: fires on the baseline however strict", s.id)),
                }
                changed = true;
            } else if fired.is_empty() {
                match loosen(&s.kind).filter(|_| !loosened.contains(&s.id)) {
                    Some(k) => {
                        loosened.insert(s.id.clone());
                        s.kind = k;
                        keep.push(s);
                    }
                    None => dropped.push(format!("{}: does not fire on the incident", s.id)),
                }
                changed = true;
            } else {
                s.fired = fired;
                keep.push(s);
            }
        }
        found = keep;
        if !changed {
            return Ok(found);
        }
    }
    // Still changing after every round: keep only what is settled.
    for s in found.iter().filter(|s| s.fired.is_empty()) {
        dropped.push(format!("{}: did not settle", s.id));
    }
    found.retain(|s| !s.fired.is_empty());
    Ok(found)
}

/// A YAML string: JSON's quoting is YAML's double-quoted style.
fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn dur(ns: i64) -> String {
    human(ns)
}

/// The rules in the pack's idiom.
fn rules_yaml(found: &[Suggestion], o: &SuggestOptions) -> String {
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# Suggested by `sigwatch suggest` from the incident {} against the\n# baseline {}. Each rule fired on the incident and stayed quiet on the\n# baseline when written; read them, rename them, then add them to your rules.",
        o.incident.join(" "),
        o.baseline.join(" ")
    );
    y.push_str("rules:\n");
    for s in found {
        let lit = q(&s.literal);
        let (detect, summary, title) = match &s.kind {
            Kind::Count { threshold } => (
                format!("count: {{threshold: {threshold}, window: 5m}}"),
                format!("{{{{ group }}}} logged {:?} {{{{ count }}}} time(s)", s.literal),
                format!("{:?} new or rising on a {}", s.literal, s.alias),
            ),
            Kind::Share {
                min_total,
                min_share,
            } => (
                format!("share: {{window: 15m, min_total: {min_total}, min_share: {min_share:.2}, min_groups: 2}}"),
                format!("{{{{ group }}}} takes {{{{ share }}}} of {:?} ({{{{ count }}}} of {{{{ total }}}} in the window)", s.literal),
                format!("One {} takes most of {:?}", s.alias, s.literal),
            ),
            Kind::Spread {
                fraction,
                min_groups,
            } => (
                format!("spread: {{window: 5m, fraction: {fraction:.2}, min_groups: {min_groups}}}"),
                format!("{{{{ groups }}}} of {{{{ population }}}} {}s log {:?}", s.alias, s.literal),
                format!("{:?} on many {}s at once", s.literal, s.alias),
            ),
            Kind::Persist { for_, max_gap } => (
                format!("persist: {{for: {}, max_gap: {}}}", dur(*for_), dur(*max_gap)),
                format!("{{{{ group }}}} has logged {:?} for {{{{ duration }}}}", s.literal),
                format!("{:?} on one {} for minutes", s.literal, s.alias),
            ),
        };
        let _ = writeln!(y, "\n  - id: {}", s.id);
        let _ = writeln!(y, "    title: {}", q(&title));
        let _ = writeln!(y, "    severity: {}", s.severity);
        let mut description = format!("Template `{}`", s.template);
        if let Some(l) = s.level {
            let _ = write!(description, " at {}", l.as_str());
        }
        let _ = write!(description, ": {}.", s.why.join("; "));
        let _ = writeln!(y, "    description: {}", q(&description));
        let _ = writeln!(y, "    match:\n      contains: [{lit}]");
        if let Some(a) = &s.also {
            let _ = writeln!(y, "      contains_all: [{}]", q(a));
        }
        let _ = writeln!(y, "    group_by: {}", s.alias);
        let _ = writeln!(y, "    detect:\n      {detect}");
        let _ = writeln!(y, "    annotations:\n      summary: {}", q(&summary));
        if !s.examples.is_empty() || !s.no_match.is_empty() {
            y.push_str("    examples:\n");
            if !s.examples.is_empty() {
                y.push_str("      match:\n");
                for l in &s.examples {
                    let _ = writeln!(y, "        - {}", q(l));
                }
            }
            if !s.no_match.is_empty() {
                y.push_str("      no_match:\n");
                for l in &s.no_match {
                    let _ = writeln!(y, "        - {}", q(l));
                }
            }
        }
    }
    if found.is_empty() {
        y.push_str("  []\n");
    }
    y
}

/// `to` relative to the directory `from` (both made absolute first).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let abs = |p: &Path| {
        std::fs::canonicalize(p).unwrap_or_else(|_| {
            std::env::current_dir()
                .map(|d| d.join(p))
                .unwrap_or_else(|_| p.to_path_buf())
        })
    };
    let (from, to) = (abs(from), abs(to));
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c.as_os_str());
    }
    out
}

/// The rule tests: each incident file fires the suggested rules (every
/// notification they make, in order), each baseline file makes none. The
/// expectations are what `sigwatch test` sees, checked by running it.
fn write_tests(dir: &Path, found: &[Suggestion], o: &SuggestOptions) -> Result<PathBuf, AppError> {
    std::fs::create_dir_all(dir)
        .map_err(AppError::io(format!("cannot create {}", dir.display())))?;
    let stem = o
        .out
        .file_stem()
        .map_or_else(|| "suggested".into(), |s| s.to_string_lossy().into_owned());
    let path = dir.join(format!("{stem}.yaml"));
    let rules_rel = relative(dir, &o.out);
    let set = crate::rules::load_layered(false, std::slice::from_ref(&o.out))?;
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# Tests of {}, written by `sigwatch suggest`: the incident fires the\n# suggested rules, the baseline does not. Run: sigwatch test {}",
        rules_rel.display(),
        path.display()
    );
    let names: Vec<&str> = found.iter().map(|s| s.id.as_str()).collect();
    let _ = writeln!(y, "# The rules: {}.", names.join(", "));
    let _ = writeln!(y, "rules: [{}]", q(&rules_rel.display().to_string()));
    y.push_str("tests:\n");
    for f in &o.incident {
        let rel = relative(dir, Path::new(f));
        let case = crate::ruletest::Case::of_file(
            &format!("the incident {f} fires the suggested rules"),
            &rel.display().to_string(),
        );
        let seen = crate::ruletest::observe(&case, &set, dir).map_err(AppError::Setup)?;
        let _ = writeln!(y, "  - name: {}", q(&case.name));
        let _ = writeln!(
            y,
            "    input:\n      - file: {}",
            q(&rel.display().to_string())
        );
        if o.from.is_some() || o.to.is_some() {
            y.push_str(
                "    # The whole file: --from/--to narrowed what suggest mined, not the test.\n",
            );
        }
        y.push_str("    expect:\n");
        // Every notification, in order: the suggested rules' and any the
        // file's rules make besides (novelty's).
        let any = !seen.is_empty();
        for (state, rule, group) in &seen {
            let _ = writeln!(
                y,
                "      - {{rule: {rule}, group: {}, state: {state}}}",
                q(group)
            );
        }
        if !any {
            y.push_str("      []\n");
        }
    }
    for f in &o.baseline {
        let rel = relative(dir, Path::new(f));
        let _ = writeln!(
            y,
            "  - name: {}",
            q(&format!("the baseline {f} stays quiet"))
        );
        let _ = writeln!(
            y,
            "    input:\n      - file: {}",
            q(&rel.display().to_string())
        );
        y.push_str("    expect: []\n");
    }
    std::fs::write(&path, &y).map_err(AppError::io(format!("cannot write {}", path.display())))?;
    // They must pass as written.
    let results =
        crate::ruletest::run_file(&path, &set).map_err(|e| AppError::Setup(e.to_string()))?;
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.passed)
        .map(crate::ruletest::render)
        .collect();
    if !failed.is_empty() {
        return Err(AppError::Setup(format!(
            "the written tests fail (a bug):\n{}",
            failed.join("\n")
        )));
    }
    Ok(path)
}

/// Loaded rules whose literals every kept line of `s` contains already.
fn covered(set: &RuleSet, s: &Suggestion) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for r in &set.rules {
        let Some(c) = set.conditions.get(r.cond) else {
            continue;
        };
        if let Some(l) = c
            .any
            .iter()
            .find(|l| !s.examples.is_empty() && s.examples.iter().all(|e| e.contains(l.as_str())))
        {
            out.push((r.id.clone(), l.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn literals_skip_ids_numbers_and_paths() {
        let lines = vec![
            r#"{"msg":"failed to open /var/lib/x: no space left on device","nodeID":"N_1"}"#
                .to_string(),
        ];
        assert_eq!(
            literal(&words("failed to open <*> no space left on device"), &lines).as_deref(),
            Some("no space left on device")
        );
        assert_eq!(literal(&words("<*> ND_8dWKnHfDNxSI v1.9"), &lines), None);
        assert!(!constant_word("pool.go:762:"));
        assert!(!constant_word("/workspace/pkg"));
        assert!(constant_word("draining"));
    }

    #[test]
    fn a_persistent_run_breaks_on_a_long_pause() {
        let mut g = GroupStat::default();
        for s in [0, 5, 10, 15, 200, 205] {
            g.add(s * NS);
        }
        assert_eq!(g.longest_run, 15 * NS);
        assert_eq!(g.longest_gap, 5 * NS);
        assert_eq!(g.max_window, 6);
    }

    #[test]
    fn relative_paths_climb_out_of_the_tests_directory() {
        assert_eq!(
            relative(Path::new("/a/b/tests"), Path::new("/a/b/rules.yaml")),
            PathBuf::from("../rules.yaml")
        );
        assert_eq!(
            relative(Path::new("/a/b"), Path::new("/a/c/x.log")),
            PathBuf::from("../c/x.log")
        );
    }

    #[test]
    fn ids_are_slugs_of_the_literal() {
        assert_eq!(
            slug("No space left on the resource."),
            "no_space_left_on_the_resource"
        );
        assert_eq!(slug("!!"), "signature");
    }
}
