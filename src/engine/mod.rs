//! The engine: decode, match, detect and alert wired into one synchronous,
//! deterministic state machine. It is fed lines or scanned blocks (and,
//! when live, clock ticks) and returns notifications; it never reads the
//! clock, the network or a file, so replay and live runs are the same
//! computation and tests drive it directly.

use crate::alert::{self, Alerts};
use crate::decode::{self, Decoder};
use crate::detect::{self, Detector, Status};
use crate::matcher::{Matcher, Scratch};
use crate::mining::watch::{Watch, WatchStats};
use crate::rules::{self, Detect, RuleSet};
use crate::scan;
use serde::Serialize;

mod exports;
mod here;
mod recording;
mod state;

mod disorder;
mod ingest;
mod schedule;
mod time;
mod timers;
mod wiring;

pub use disorder::MIN_LIVE_LATENESS_NS;
pub use exports::{Counts, Exports, MAX_EXPORTED_GROUPS, OTHER_GROUP};
pub use recording::{HitRecord, Recording, MAX_HIT_LOG};
pub use schedule::CLUSTER_EVAL_NS;
pub use state::{EngineState, RestoreSummary, SavedRule};

/// Default allowed lateness of events behind the newest one (5 s).
pub const DEFAULT_LATENESS_NS: i64 = 5_000_000_000;

/// How the engine places events in time: whether arrival may stand in
/// for a missing event time (live) and how late an event may be and still
/// count in its own window.
#[derive(Debug, Clone)]
pub struct Options {
    /// Live mode: arrival time may stand in for a missing event time.
    pub live: bool,
    /// How far behind the newest event time an event may arrive and still
    /// be placed in its window exactly.
    pub lateness_ns: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            live: false,
            lateness_ns: DEFAULT_LATENESS_NS,
        }
    }
}

/// What the engine counted so far, from the first line: totals that only
/// grow (a checkpoint restores detection, not these), as `--stats` prints
/// them; `/metrics` gets them through [`Engine::samples`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    /// Decode counters.
    pub decode: decode::DecodeStats,
    /// Lines that the automaton flagged.
    pub candidates: u64,
    /// Confirmed matches routed to detectors.
    pub hits: u64,
    /// Events older than the watermark (counted at the watermark).
    pub late: u64,
    /// Hits without a value for the rule's group key.
    pub ungrouped: u64,
    /// Groups evicted by `max_groups`, over all rules.
    pub evicted_groups: u64,
    /// Alert counters.
    pub alerts: alert::AlertStats,
    /// Template mining and novelty counters (when novelty is on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub novelty: Option<WatchStats>,
}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    Primary,
    Then,
    ResolveOn,
    /// A line of the rule's `progress`.
    Progress,
    /// A line of `unless` entry N ([`crate::rules::Rule::recents`]).
    Unless(u8),
    /// A line of the `until` of `unless` entry N.
    Until(u8),
}

/// The detection engine: decode, match, detect, alert. Feed it lines (or
/// scanned blocks) in order; it returns notifications, and the same lines
/// always give the same notifications.
///
/// ```
/// use sigwatch::engine::{Engine, Options};
/// use sigwatch::source::Source;
///
/// let rules = sigwatch::rules::compile(&[(
///     "mine.yaml".to_string(),
///     r#"
/// rules:
///   - id: redis.refused
///     title: Redis refuses connections
///     severity: critical
///     match: {contains: ["connect: connection refused"]}
///     group_by: node
///     detect: {count: {threshold: 2, window: 1m}}
/// "#
///     .to_string(),
/// )])
/// .expect("valid rules");
/// let mut engine = Engine::new(rules, Options::default()).expect("rules compile");
/// let (src, mut out) = (Source::named("stdin"), Vec::new());
/// for s in 0..3 {
///     let line = format!(
///         r#"{{"level":"error","ts":{},"msg":"dial tcp 10.0.0.5:6379: connect: connection refused","nodeID":"ND_1"}}"#,
///         1_714_568_400 + s
///     );
///     engine.push_line(&src, &line, None, &mut out);
/// }
/// engine.finish(&mut out);
/// let fired = out.iter().find(|n| n.rule == "redis.refused").expect("it fires");
/// assert_eq!(fired.group, "ND_1");
/// ```
pub struct Engine {
    rules: RuleSet,
    matcher: Matcher,
    decoder: Decoder,
    scratch: Scratch,
    detectors: Vec<Box<dyn Detector>>,
    alerts: Alerts,
    cond_users: Vec<Vec<(usize, Role)>>,
    population_rules: Vec<usize>,
    partition_keys: Vec<Option<String>>,
    /// Per population rule: compiled ids of its group keys and partition key.
    pop_keys: Vec<(Vec<decode::keys::KeyId>, Option<decode::keys::KeyId>)>,
    /// Per rule with a `progress`: compiled ids of its group keys.
    progress_keys: Vec<Vec<decode::keys::KeyId>>,
    /// Per line: resolved value of each compiled key (resolved at most once).
    key_cache: Vec<Option<Option<String>>>,
    /// Which lines feed the population of spread and share rules.
    sampler: detect::Sampler,
    /// The block scan of the rules in force, shared with readers.
    scan_slot: scan::ScannerSlot,
    scan_generation: u64,
    /// Where the current line was read.
    here: here::Here,
    opts: Options,
    min_time: i64,
    max_time: Option<i64>,
    /// The latest time of lines without one of their own, while no line
    /// had one (an input without times is evaluated at its end).
    untimed_at: Option<i64>,
    watermark: i64,
    last_tick: i64,
    statuses: Vec<Status>,
    stats: Stats,
    /// Confirmed matches per rule.
    rule_hits: Vec<u64>,
    /// Per rule: evictions of detectors replaced by reloads.
    evicted_base: Vec<u64>,
    /// Evictions of rules removed by reloads.
    retired_evictions: u64,
    /// Template mining for the novelty rule, and that rule's index.
    novelty: Option<(usize, Watch)>,
    /// The anomaly rule's index and its index among the population
    /// rules (whose keys read its lines' groups), when anomalies are on.
    anomaly: Option<(usize, usize)>,
    /// Templates the anomaly detector was told the text of.
    anomaly_named: std::collections::HashSet<u64>,
    /// Hits, sightings and volume kept for `replay --report` (off unless
    /// asked; bounded).
    hit_log: Option<Recording>,
    /// Per-group counters of cluster-wide rules, for `/metrics`.
    exports: Exports,
    /// Whether spread and share rules alert here (not when sharded: their
    /// groups are spread over replicas; Prometheus evaluates them).
    local_cluster_alerts: bool,
    /// When the cluster-wide rules are evaluated between ticks.
    schedule: schedule::Schedule,
    /// How out of order the input arrives, for the live clock.
    disorder: disorder::Disorder,
    /// The live clock's last event time (`advance_to`), if ahead of the input.
    clock_now: i64,
    /// When time alone next changes each rule's keys.
    timers: timers::Timers,
}

/// What a rule reload changed (see [`Engine::reload`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReloadSummary {
    /// Rules kept with their detector state.
    pub kept: usize,
    /// Rules with the same id but a changed detection (fresh detector).
    pub changed: usize,
    /// New rules.
    pub added: usize,
    /// Rules no longer present.
    pub removed: usize,
    /// Firing alerts resolved because their rule was removed.
    pub resolved: usize,
}

/// Rule id → index in the set.
fn rule_index(set: &RuleSet) -> std::collections::HashMap<&str, usize> {
    set.rules
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id.as_str(), i))
        .collect()
}

/// The anomaly rule of a set: its index and its place among the
/// population rules, if anomalies are on.
fn anomaly_rule(rules: &RuleSet, population_rules: &[usize]) -> Option<(usize, usize)> {
    let ri = rules
        .rules
        .iter()
        .position(|r| matches!(r.detect, Detect::Anomaly(_)))?;
    let pi = population_rules.iter().position(|&p| p == ri)?;
    Some((ri, pi))
}

/// The novelty rule of a set and its settings, if novelty is on.
fn novelty_rule(rules: &RuleSet) -> Option<(usize, &rules::Novelty)> {
    rules
        .rules
        .iter()
        .enumerate()
        .find_map(|(i, r)| match &r.detect {
            Detect::Novelty(n) => Some((i, n)),
            _ => None,
        })
}

/// The population sampling period for a set of detectors.
fn sample_period(detectors: &[Box<dyn Detector>]) -> i64 {
    detect::Sampler::period_for(detectors.iter().filter_map(|d| d.population_window()).min())
}

/// The block scan for a matcher and a decoder's field scanner.
fn scanner_for(matcher: &Matcher, decoder: &Decoder) -> std::sync::Arc<scan::Scanner> {
    std::sync::Arc::new(scan::Scanner::new(
        matcher.literal_searcher(),
        matcher.needs_scan_on_every_line(),
        decoder.key_index(),
    ))
}

/// The tick granularity of evaluation in event time (1 s).
const TICK_NS: i64 = 1_000_000_000;

impl Engine {
    /// Per-group counters of the spread and share rules: hits as counted,
    /// last sightings read from their populations (nothing on the hot path).
    pub fn exports(&self) -> Exports {
        let mut e = self.exports.clone();
        let mut seen = Vec::new();
        for (ri, r) in self.rules.rules.iter().enumerate() {
            if !self.is_cluster(ri) {
                continue;
            }
            seen.clear();
            if let Some(d) = self.detectors.get(ri) {
                d.population(&mut seen);
            }
            for (partition, group, t) in &seen {
                e.seen(&r.id, partition, group, *t);
            }
        }
        e
    }

    fn is_cluster(&self, ri: usize) -> bool {
        self.rules
            .rules
            .get(ri)
            .is_some_and(|r| r.detect.needs_population())
    }

    /// Keeps every signature hit, population sighting and line time for
    /// [`Engine::take_recording`] (the report); at most [`MAX_HIT_LOG`] of
    /// each wait, the rest are not kept.
    /// `levels`: also count the lines of level error or worse per second
    /// (a parse per JSON line: the replay's report, not the live page's).
    pub fn record_hits(&mut self, on: bool, levels: bool) {
        self.hit_log = on.then(|| Recording {
            levels,
            ..Recording::default()
        });
    }

    /// What was recorded since the last call (see [`Engine::record_hits`]).
    pub fn take_recording(&mut self) -> Recording {
        match self.hit_log.as_mut() {
            Some(log) => {
                let levels = log.levels;
                std::mem::replace(
                    log,
                    Recording {
                        levels,
                        ..Recording::default()
                    },
                )
            }
            None => Recording::default(),
        }
    }

    fn log_hit(&mut self, rule: usize, group: &str, pod: Option<String>, time: i64, line: &str) {
        if let Some(log) = self.hit_log.as_mut() {
            if log.hits.len() < MAX_HIT_LOG {
                log.hits.push(HitRecord {
                    rule,
                    group: group.to_string(),
                    pod: pod.filter(|p| p != group),
                    time,
                    line: crate::text::truncate(line, 400),
                });
            }
        }
    }

    /// The rules in use.
    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    /// The matcher in use.
    pub fn matcher(&self) -> &Matcher {
        &self.matcher
    }

    /// The rules that select by a label no line read so far carried, with
    /// that label and the value they want (when one value): such a rule
    /// cannot match (piped lines carry no labels unless `--label` gives
    /// them). Empty before any line.
    pub fn labels_never_carried(&self) -> Vec<(String, String, Option<String>)> {
        if self.max_time.is_none() && self.untimed_at.is_none() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for r in &self.rules.rules {
            let Some(c) = self.rules.conditions.get(r.cond) else {
                continue;
            };
            for (k, v) in &c.labels {
                let wants = match v {
                    rules::ValueCond::Equals(x) => Some(Some(x.clone())),
                    rules::ValueCond::OneOf(xs) => Some(xs.first().cloned()),
                    rules::ValueCond::Regex(_) | rules::ValueCond::Exists(true) => Some(None),
                    _ => None,
                };
                if let Some(value) = wants {
                    if !self.decoder.label_carried(k) {
                        out.push((r.id.clone(), k.clone(), value));
                    }
                }
            }
        }
        out
    }

    /// A copy of the counters now (decoding, matching, alerts, novelty,
    /// evictions over all rules).
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        s.decode = self.decoder.stats().clone();
        s.alerts = self.alerts.stats().clone();
        s.novelty = self.novelty.as_ref().map(|(_, w)| w.stats());
        s.evicted_groups = self.retired_evictions
            + self.evicted_base.iter().sum::<u64>()
            + self.detectors.iter().map(|d| d.evicted()).sum::<u64>();
        s
    }

    /// Everything the engine counts, as the samples `/metrics` exports:
    /// decoding, matching, alerts, novelty, per rule, and the per-group
    /// series of the cluster-wide rules. The metric names live here, beside
    /// the counters.
    pub fn samples(&self, out: &mut Vec<crate::stats::Sample>) {
        use crate::stats::{Family, Sample};
        let s = self.stats();
        let d = &s.decode;
        for (kind, v) in [
            ("lines", d.lines),
            ("malformed", d.malformed),
            ("partial_chunks", d.partial_chunks),
            ("partial_overflow", d.partial_overflow),
            ("streams_evicted", d.streams_evicted),
            ("multiplexed_streams", d.multiplexed_streams),
            ("candidates", s.candidates),
            ("hits", s.hits),
            ("late", s.late),
            ("ungrouped", s.ungrouped),
            ("alerts_firing", s.alerts.firing),
            ("alerts_resolved", s.alerts.resolved),
        ] {
            out.push(Sample::event(kind, v));
        }
        if let Some(n) = &s.novelty {
            for (kind, v) in [
                ("lines_mined", n.mined),
                ("lines_mined_ignored", n.ignored),
                ("lines_chatter_skipped", n.chatter_skipped),
                ("novel_lines", n.novel_lines),
                ("novel_templates", n.novel_templates),
                ("templates_evicted", n.templates_evicted),
            ] {
                out.push(Sample::event(kind, v));
            }
            out.push(Sample::state("templates", n.templates as i64));
            out.push(Sample::state("novelty_learning", i64::from(n.learning)));
        }
        for (format, v) in d.formats.nonzero() {
            out.push(Sample::event("lines_by_format", v).with("format", format));
        }
        let discounted = self.rule_discounted();
        for (ri, (rule, hits, evicted)) in self.rule_stats().into_iter().enumerate() {
            out.push(Sample::event("rule_matches", hits).with("rule", &rule));
            out.push(Sample::event("evicted_groups", evicted).with("rule", &rule));
            let r = &self.rules.rules[ri];
            if !r.unless.is_empty() {
                let n = discounted.get(ri).copied().unwrap_or(0);
                out.push(Sample::event("rule_matches_discounted", n).with("rule", &rule));
            }
            if r.progress.as_ref().is_some_and(|p| !p.unless.is_empty()) {
                let n = self.detectors[ri].progress_ignored();
                out.push(Sample::event("rule_progress_ignored", n).with("rule", &rule));
            }
        }
        out.push(Sample::state("alerts_firing", self.firing() as i64));
        for (ri, r) in self.rules.rules.iter().enumerate() {
            let n = i64::try_from(self.alerts.firing_of(ri)).unwrap_or(i64::MAX);
            out.push(
                Sample::state("rule_alerts_firing", n)
                    .with("rule", &r.id)
                    .with("severity", r.severity.as_str()),
            );
        }
        for ((rule, partition, group), c) in self.exports.series() {
            let labels = vec![
                ("rule", rule.to_string()),
                ("partition", partition.to_string()),
                ("group", group.to_string()),
            ];
            if c.seen != i64::MIN {
                out.push(Sample {
                    family: Family::GroupLastSeen,
                    labels: labels.clone(),
                    value: c.seen.div_euclid(1_000_000_000),
                });
            }
            out.push(Sample {
                family: Family::GroupHits,
                labels,
                value: i64::try_from(c.hits).unwrap_or(i64::MAX),
            });
        }
    }

    /// The template miner of the novelty rule, if on.
    pub fn miner(&self) -> Option<&crate::mining::Miner> {
        self.novelty.as_ref().map(|(_, w)| w.miner())
    }

    /// Per rule: matches that did not count because an `unless` held
    /// (a pod starting or being stopped).
    pub fn rule_discounted(&self) -> Vec<u64> {
        self.detectors.iter().map(|d| d.discounted()).collect()
    }

    /// Per rule: (id, confirmed matches, groups evicted by `max_groups`).
    pub fn rule_stats(&self) -> Vec<(String, u64, u64)> {
        self.rules
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                (
                    r.id.clone(),
                    self.rule_hits.get(i).copied().unwrap_or(0),
                    self.detectors[i].evicted() + self.evicted_base.get(i).copied().unwrap_or(0),
                )
            })
            .collect()
    }

    /// Number of alerts firing now.
    pub fn firing(&self) -> usize {
        self.alerts.firing()
    }

    /// Earliest and latest event time seen (ns), if any event was seen.
    pub fn time_span(&self) -> Option<(i64, i64)> {
        self.max_time.map(|m| (self.min_time.min(m), m))
    }

    /// The current watermark (ns), if any event was seen.
    pub fn watermark(&self) -> Option<i64> {
        self.max_time.map(|_| self.watermark)
    }

    /// Where readers find the block scan of the rules in force (it changes
    /// on reload; see `scan`).
    pub fn scanner(&self) -> scan::ScannerSlot {
        self.scan_slot.clone()
    }
}

/// An engine over one rule file's text, for the engine's own unit tests.
#[cfg(test)]
fn test_engine(yaml: &str) -> Engine {
    let rules = match rules::compile(&[("t.yaml".into(), yaml.into())]) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    match Engine::new(rules, Options::default()) {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::Notification;
    use crate::source::Source;
    use alert::AlertState;

    const T0: i64 = 1_714_570_000_000_000_000;

    fn set(threshold: u32, summary: &str, extra: &str) -> RuleSet {
        let text = format!(
            r#"novelty: {{enabled: false}}
rules:
  - id: t.errors
    title: Errors
    severity: warning
    match: {{contains: ["boom"]}}
    group_by: node
    detect: {{count: {{threshold: {threshold}, window: 1m}}}}
    annotations: {{summary: "{summary}"}}
{extra}"#
        );
        match rules::compile(&[("t.yaml".into(), text)]) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    const OTHER: &str = r#"  - id: t.other
    title: Other
    severity: critical
    match: {contains: ["crash"]}
    group_by: node
    detect: {count: {threshold: 1, window: 1m}}
"#;

    fn feed(e: &mut Engine, at_s: i64, text: &str, out: &mut Vec<Notification>) {
        let line = format!(
            r#"{{"ts":{}.0,"msg":"{text}","nodeID":"ND_a"}}"#,
            (T0 / 1_000_000_000) + at_s
        );
        e.push_line(&Source::named("s"), &line, None, out);
    }

    fn states(out: &[Notification]) -> Vec<(String, AlertState)> {
        out.iter().map(|n| (n.rule.clone(), n.state)).collect()
    }

    /// A checkpoint through its file form, restored into a fresh engine.
    fn restarted(
        e: &Engine,
        rules: RuleSet,
        out: &mut Vec<Notification>,
    ) -> (Engine, RestoreSummary) {
        let bytes = serde_json::to_vec(&e.checkpoint()).unwrap();
        let state: EngineState = serde_json::from_slice(&bytes).unwrap();
        let mut fresh = Engine::new(rules, Options::default()).unwrap();
        let s = fresh.restore_checkpoint(state, out);
        (fresh, s)
    }

    #[test]
    fn a_checkpoint_carries_windows_pending_alerts_and_sticky_values() {
        let mut e =
            Engine::new(set(3, "{{ group }} x{{ count }}", ""), Options::default()).unwrap();
        let mut out = Vec::new();
        // The node is named once, then forgotten by the lines.
        e.push_line(
            &Source::named("s"),
            &format!(
                r#"{{"ts":{}.0,"msg":"starting","nodeID":"ND_a"}}"#,
                T0 / 1_000_000_000
            ),
            None,
            &mut out,
        );
        let bare = |at: i64| format!(r#"{{"ts":{}.0,"msg":"boom"}}"#, T0 / 1_000_000_000 + at);
        e.push_line(&Source::named("s"), &bare(1), None, &mut out);
        e.push_line(&Source::named("s"), &bare(2), None, &mut out);
        assert!(out.is_empty(), "two of three");
        let (mut e, s) = restarted(&e, set(3, "{{ group }} x{{ count }}", ""), &mut out);
        assert_eq!((s.kept, s.changed, s.removed), (1, 0, 0));
        assert!(out.is_empty());
        e.push_line(&Source::named("s"), &bare(3), None, &mut out);
        assert_eq!(states(&out), vec![("t.errors".into(), AlertState::Firing)]);
        assert_eq!(out[0].group, "ND_a", "the sticky nodeID came along");
        assert_eq!(out[0].annotations["summary"], "ND_a x3", "the window too");
        assert_eq!(
            out[0].starts_at,
            crate::clock::format_rfc3339(T0 + 3_000_000_000)
        );
        // Firing alerts go on firing after another restart: no second page.
        out.clear();
        let (mut e, _) = restarted(&e, set(3, "{{ group }} x{{ count }}", ""), &mut out);
        e.push_line(&Source::named("s"), &bare(4), None, &mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn a_restart_resolves_the_alerts_of_removed_rules_and_adopts_changed_ones() {
        let mut e = Engine::new(set(1, "a", OTHER), Options::default()).unwrap();
        let mut out = Vec::new();
        feed(&mut e, 0, "boom", &mut out);
        feed(&mut e, 1, "crash", &mut out);
        assert_eq!(out.len(), 2);
        out.clear();
        // t.other is gone, t.errors now needs two hits.
        let (mut e, s) = restarted(&e, set(2, "a", ""), &mut out);
        assert_eq!((s.kept, s.changed, s.removed, s.resolved), (0, 1, 1, 1));
        assert_eq!(states(&out), vec![("t.other".into(), AlertState::Resolved)]);
        assert_eq!(out[0].group, "ND_a");
        out.clear();
        // The changed rule's alert was adopted: confirmed, it pages no more.
        feed(&mut e, 2, "boom", &mut out);
        feed(&mut e, 3, "boom", &mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn reload_keeps_the_state_of_rules_whose_detection_is_unchanged() {
        let mut e = Engine::new(set(3, "a", ""), Options::default()).unwrap();
        let mut out = Vec::new();
        feed(&mut e, 0, "boom", &mut out);
        feed(&mut e, 1, "boom", &mut out);
        // New annotation text and a new rule: t.errors keeps its two hits.
        let s = e.reload(set(3, "b", OTHER), &mut out).unwrap();
        assert_eq!((s.kept, s.changed, s.added, s.removed), (1, 0, 1, 0));
        feed(&mut e, 2, "boom", &mut out);
        assert_eq!(states(&out), vec![("t.errors".into(), AlertState::Firing)]);
        assert_eq!(
            out[0].annotations.get("summary").map(String::as_str),
            Some("b")
        );
        assert_eq!(e.rule_stats()[0].1, 3, "match counter carried over");
    }

    #[test]
    fn a_changed_detection_starts_fresh_but_does_not_page_again() {
        let mut e = Engine::new(set(2, "a", ""), Options::default()).unwrap();
        let mut out = Vec::new();
        feed(&mut e, 0, "boom", &mut out);
        feed(&mut e, 1, "boom", &mut out);
        assert_eq!(states(&out).len(), 1, "fires at 2");
        out.clear();
        let s = e.reload(set(5, "a", ""), &mut out).unwrap();
        assert_eq!((s.kept, s.changed), (0, 1));
        assert!(out.is_empty(), "the firing alert is adopted, not re-paged");
        assert_eq!(e.firing(), 1);
        // The fresh detector does not see the old hits: two more are not
        // enough for the new threshold, and the adopted alert resolves after
        // its grace (window + for + resolve_after) without confirmation.
        feed(&mut e, 2, "boom", &mut out);
        feed(&mut e, 3, "boom", &mut out);
        assert!(out.is_empty());
        e.advance_to(T0 + 200 * 1_000_000_000, &mut out);
        assert_eq!(
            states(&out),
            vec![("t.errors".into(), AlertState::Resolved)]
        );
    }

    #[test]
    fn a_removed_rule_resolves_its_firing_alerts() {
        let mut e = Engine::new(set(1, "a", OTHER), Options::default()).unwrap();
        let mut out = Vec::new();
        feed(&mut e, 0, "crash", &mut out);
        assert_eq!(states(&out), vec![("t.other".into(), AlertState::Firing)]);
        out.clear();
        let s = e.reload(set(1, "a", ""), &mut out).unwrap();
        assert_eq!((s.kept, s.removed, s.resolved), (1, 1, 1));
        assert_eq!(states(&out), vec![("t.other".into(), AlertState::Resolved)]);
        assert_eq!(e.firing(), 0);
        feed(&mut e, 1, "crash", &mut out);
        assert_eq!(out.len(), 1, "the removed rule no longer matches");
    }

    #[test]
    fn changed_aliases_count_as_a_changed_detection() {
        let a = set(3, "a", "");
        let mut b = set(3, "a", "");
        b.keys
            .aliases
            .insert("node".into(), vec!["labels.pod".into()]);
        assert_ne!(a.detection_signature(0), b.detection_signature(0));
        assert_eq!(
            a.detection_signature(0),
            set(3, "b", "").detection_signature(0)
        );
    }
}
