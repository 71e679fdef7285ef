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
use crate::decode::severity::Level;
use crate::decode::KeyConfig;
use crate::mining::{Miner, MinerConfig};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

mod candidates;
mod emit;
mod tally;
mod verify;
use candidates::candidates;
use emit::{describe, rules_yaml, write_tests};
use tally::{mine, tally};
use verify::{check, covered, narrow};

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

#[cfg(test)]
mod tests {
    use super::candidates::{constant_word, literal, slug};
    use super::emit::relative;
    use super::tally::GroupStat;
    use super::*;
    use std::path::Path;

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
