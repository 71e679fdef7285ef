//! Candidates: the templates the incident has and the baseline has not
//! (or much less, or not on one group alone), ranked, each with its
//! literal (the longest run of constant words), its group alias and a
//! first choice of detector from the shape its lines had.

use super::tally::{Side, Tally};
use super::{human, round_minutes, round_seconds, Kind, Suggestion, MAX_GAP, MIN_PERSIST, NS};
use crate::decode::severity::Level;
use crate::mining::{Miner, WILDCARD};
use std::collections::BTreeSet;

/// A constant word a rule may anchor on: no digit (numbers, IDs,
/// versions), no path, not a placeholder.
pub(super) fn constant_word(w: &str) -> bool {
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
pub(super) fn literal(tokens: &[String], lines: &[String]) -> Option<String> {
    runs(tokens, lines).into_iter().next()
}

/// The runs of constant words of a template that occur as written in
/// every kept line, longest first: the literals a rule may anchor on.
pub(super) fn runs(tokens: &[String], lines: &[String]) -> Vec<String> {
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

pub(super) fn slug(s: &str) -> String {
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
pub(super) fn candidates(
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
        let Some(alias) = group_alias(inc, s, aliases) else {
            continue;
        };
        let runs = runs(&tpl.tokens, &s.lines);
        let Some(lit) = runs.first().cloned() else {
            continue;
        };
        if !literals.insert(lit.clone()) {
            continue;
        }
        let shape = Shape::of(base, inc, b, s, alias);
        if !(shape.new || shape.rise >= 5.0 || shape.concentrated) {
            continue;
        }
        let lvl = s.level.or(tpl.levels.highest());
        if let Some(why) = not_a_signature(lvl, &shape, alias) {
            skipped.push(format!("{:?}: {why}", tpl.text()));
            continue;
        }
        let (kind, mut score, why) = shape.detector(s, b, lvl, alias);
        score += (s.count as f64).log10() / 4.0;
        out.push(Suggestion {
            id: unique_id(&mut ids, prefix, &lit),
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
            no_match: no_match_example(base, &lit),
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

/// The alias most of a template's lines carry, among those that tell its
/// groups apart (a file name alone names one group): the first of node,
/// pod, upstream… that does, else the first carried at all.
fn group_alias<'a>(inc: &Tally, s: &Side, aliases: &'a [String]) -> Option<&'a String> {
    let carried = |a: &String| {
        let n: u64 = s
            .groups
            .get(a)
            .map_or(0, |g| g.values().map(|x| x.count).sum());
        n * 2 >= s.count && n > 0
    };
    let several = |a: &String| inc.peers(a, s) >= 2;
    aliases
        .iter()
        .find(|a| carried(a) && several(a))
        .or_else(|| aliases.iter().find(|a| carried(a)))
}

/// Why a template is no signature to page on, if it is not: debug lines
/// come and go with verbosity, and one info line per node is a lifecycle
/// event (a start, a stop): a rule on either pages on the next deploy.
fn not_a_signature(lvl: Option<Level>, shape: &Shape, alias: &str) -> Option<String> {
    if lvl.is_some_and(|l| l < Level::Info) {
        return Some("debug lines".into());
    }
    if lvl.is_none_or(|l| l <= Level::Info) && shape.most <= 1 {
        return Some(format!("one info line per {alias} (a lifecycle event)"));
    }
    None
}

/// A rule id from the literal, unique among those given out.
fn unique_id(ids: &mut BTreeSet<String>, prefix: &str, lit: &str) -> String {
    let mut id = format!("{prefix}.{}", slug(lit));
    let mut n = 2;
    while ids.contains(&id) {
        id = format!("{prefix}.{}_{n}", slug(lit));
        n += 1;
    }
    ids.insert(id.clone());
    id
}

/// The shape a template's lines had on one alias, in the incident and in
/// the baseline: how concentrated, how widespread, how lasting, how much
/// more frequent.
struct Shape {
    /// Groups that logged anything meanwhile, and the lines on the alias.
    pop: usize,
    total: u64,
    /// The busiest group and its share of the lines.
    top: String,
    share: f64,
    /// Lines of the busiest group.
    most: u64,
    /// The most groups within one window.
    at_once: usize,
    /// The longest run without a pause of one group: (run, its largest gap).
    longest: Option<(i64, i64)>,
    /// The busiest window of any group (incident and baseline).
    max_window: u64,
    b_max_window: u64,
    b_at_once: usize,
    b_pop: usize,
    /// None in the baseline; how much more frequent than there.
    new: bool,
    rise: f64,
    concentrated: bool,
    everywhere: bool,
    persistent: bool,
}

impl Shape {
    fn of(base: &Tally, inc: &Tally, b: &Side, s: &Side, alias: &str) -> Shape {
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
        let longest = groups
            .values()
            .max_by_key(|g| g.longest_run)
            .map(|g| (g.longest_run, g.longest_gap));
        let b_longest = b_groups
            .and_then(|g| g.values().map(|x| x.longest_run).max())
            .unwrap_or(0);
        let rate = s.count as f64 / inc.span_secs();
        let b_rate = (b.count as f64).max(0.5) / base.span_secs();
        Shape {
            pop,
            total,
            top,
            share,
            most: groups.values().map(|g| g.count).max().unwrap_or(0),
            at_once,
            longest,
            max_window: groups.values().map(|g| g.max_window).max().unwrap_or(1) as u64,
            b_max_window,
            b_at_once,
            b_pop,
            new: b.count == 0,
            rise: rate / b_rate,
            concentrated: pop >= 3 && share >= 0.8 && total >= 3 && b_share < 0.8,
            everywhere: pop >= 2
                && at_once >= 2
                && at_once * 10 >= pop * 8
                && (b_at_once as f64 / b_pop as f64) < 0.5,
            persistent: longest.is_some_and(|(run, _)| run >= MIN_PERSIST && b_longest * 2 < run),
        }
    }

    /// The detector this shape calls for — `share` when concentrated,
    /// `spread` when everywhere, `persist` when lasting, else `count` —
    /// with the score it earns and the reasons to show.
    fn detector(
        &self,
        s: &Side,
        b: &Side,
        lvl: Option<Level>,
        alias: &str,
    ) -> (Kind, f64, Vec<String>) {
        let mut why = Vec::new();
        let mut score = 0.0;
        if self.new {
            score += 3.0;
            why.push(format!(
                "new: {} line(s) in the incident, none in the baseline",
                s.count
            ));
        } else if self.rise >= 5.0 {
            score += if self.rise >= 20.0 { 2.0 } else { 1.0 };
            why.push(format!(
                "rose {:.0}×: {} line(s) in the incident, {} in the baseline",
                self.rise, s.count, b.count
            ));
        }
        match lvl {
            Some(l) if l >= Level::Error => score += 2.0,
            Some(l) if l >= Level::Warn => score += 1.0,
            _ => {}
        }
        let (pop, at_once) = (self.pop, self.at_once);
        let kind = if self.concentrated {
            score += 2.0;
            why.push(format!(
                "concentrated: {:.0} % on {alias} {} while {} other {alias}(s) log",
                self.share * 100.0,
                self.top,
                pop - 1
            ));
            Kind::Share {
                min_total: (self.total / 2).clamp(3, 10),
                min_share: 0.8,
            }
        } else if self.everywhere {
            score += 2.0;
            why.push(if b.count == 0 {
                format!("everywhere: on {at_once} of {pop} {alias}s within 5m")
            } else {
                format!(
                    "everywhere: on {at_once} of {pop} {alias}s within 5m (the baseline: {} of {})",
                    self.b_at_once, self.b_pop
                )
            });
            let frac = ((at_once as f64 / pop as f64) * 0.6 * 10.0).floor() / 10.0;
            Kind::Spread {
                fraction: frac.clamp(0.3, 0.8),
                min_groups: 2,
            }
        } else if let (true, Some((run, gap))) = (self.persistent, self.longest) {
            score += 1.0;
            why.push(format!(
                "lasting: {} logged it for {} without a pause over {}",
                alias,
                human(run),
                human(MAX_GAP)
            ));
            Kind::Persist {
                for_: round_minutes(run / 2).clamp(2 * 60 * NS, 10 * 60 * NS),
                max_gap: round_seconds((gap * 2).max(30 * NS)).min(MAX_GAP * 2),
            }
        } else {
            why.push(format!(
                "at most {} in 5m per {alias} in the baseline",
                self.b_max_window
            ));
            Kind::Count {
                threshold: (self.b_max_window + 1).max(self.max_window / 3).max(1),
            }
        };
        (kind, score, why)
    }
}

/// A baseline line a rule must not match: one of the kept lines of the
/// baseline's templates that lacks the literal.
pub(super) fn no_match_example(base: &Tally, lit: &str) -> Vec<String> {
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
