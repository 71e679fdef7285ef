//! Verification: every suggested rule replayed over both inputs; one
//! that fires on the baseline is tightened or dropped, one that misses
//! the incident is loosened once or dropped; literals found in the
//! baseline are narrowed with a second one.

use super::emit::rules_yaml;
use super::{Kind, SuggestOptions, Suggestion, NS, ROUNDS};
use crate::alert::{AlertState, Notification};
use crate::app::AppError;
use crate::engine::{Engine, Options};
use crate::rules::RuleSet;
use crate::source::replay::Merged;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Lines of `files` holding each of `literals` (a line counts once per
/// literal).
pub(super) fn count_in(files: &[String], literals: &[String]) -> Result<Vec<u64>, AppError> {
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
pub(super) fn narrow(found: &mut [Suggestion], baseline: &[String]) -> Result<(), AppError> {
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

/// Stricter after it fired on the baseline (None: as strict as it goes).
pub(super) fn tighten(k: &Kind) -> Option<Kind> {
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
pub(super) fn loosen(k: &Kind) -> Option<Kind> {
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
pub(super) fn replay(
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
pub(super) fn check(
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

/// Loaded rules whose literals every kept line of `s` contains already.
pub(super) fn covered(set: &RuleSet, s: &Suggestion) -> Vec<(String, String)> {
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
