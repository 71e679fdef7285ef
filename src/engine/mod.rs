//! The engine: decode, match, detect and alert wired into one synchronous,
//! deterministic state machine. It is fed lines or scanned blocks (and,
//! when live, clock ticks) and returns notifications; it never reads the
//! clock, the network or a file, so replay and live runs are the same
//! computation and tests drive it directly.

use crate::alert::{self, Alerts, Notification};
use crate::decode::{self, resolve_key, Decoder, Prepared};
use crate::detect::{self, Detector, Hit, Status, Step, CLUSTER};
use crate::matcher::{Matcher, MatcherError, Scratch};
use crate::mining::watch::{Novel, Watch, WatchStats};
use crate::rules::{self, Detect, RuleSet};
use crate::scan;
use crate::source::{self, Source};
use serde::Serialize;

mod exports;
mod here;
mod recording;
mod state;

pub use exports::{Counts, Exports, MAX_EXPORTED_GROUPS, OTHER_GROUP};
pub use recording::{HitRecord, Recording, MAX_HIT_LOG};
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
    /// Hits, sightings and volume kept for `replay --report` (off unless
    /// asked; bounded).
    hit_log: Option<Recording>,
    /// Per-group counters of cluster-wide rules, for `/metrics`.
    exports: Exports,
    /// Whether spread and share rules alert here (not when sharded: their
    /// groups are spread over replicas; Prometheus evaluates them).
    local_cluster_alerts: bool,
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

/// The parts of an engine derived from the rule set alone.
struct Wiring {
    matcher: Matcher,
    cond_users: Vec<Vec<(usize, Role)>>,
    population_rules: Vec<usize>,
    partition_keys: Vec<Option<String>>,
    /// Group and partition keys of population rules, for the decoder.
    names: Vec<String>,
}

impl Wiring {
    fn new(rules: &RuleSet) -> Result<Wiring, MatcherError> {
        let matcher = Matcher::new(rules)?;
        let mut cond_users = vec![Vec::new(); rules.conditions.len()];
        let mut population_rules = Vec::new();
        let mut partition_keys = Vec::new();
        for (ri, r) in rules.rules.iter().enumerate() {
            cond_users[r.cond].push((ri, Role::Primary));
            if let Detect::Sequence { then, .. } = r.detect {
                cond_users[then].push((ri, Role::Then));
            }
            if let Some(c) = r.resolve_on {
                cond_users[c].push((ri, Role::ResolveOn));
            }
            if r.detect.needs_population() {
                population_rules.push(ri);
            }
            partition_keys.push(match &r.detect {
                Detect::Spread(s) => s.partition_by.clone(),
                Detect::Share(s) => s.partition_by.clone(),
                _ => None,
            });
        }
        // The cheap path resolves every population key once per line.
        let mut names: Vec<String> = Vec::new();
        for &ri in &population_rules {
            names.extend(rules.rules[ri].group_by.iter().cloned());
            names.extend(partition_keys[ri].iter().cloned());
        }
        Ok(Wiring {
            matcher,
            cond_users,
            population_rules,
            partition_keys,
            names,
        })
    }

    #[allow(clippy::type_complexity)]
    fn pop_keys(
        &self,
        rules: &RuleSet,
        decoder: &Decoder,
    ) -> Vec<(Vec<decode::keys::KeyId>, Option<decode::keys::KeyId>)> {
        self.population_rules
            .iter()
            .map(|&ri| {
                let ids = rules.rules[ri]
                    .group_by
                    .iter()
                    .filter_map(|k| decoder.key_id(k))
                    .collect();
                (
                    ids,
                    self.partition_keys[ri]
                        .as_ref()
                        .and_then(|k| decoder.key_id(k)),
                )
            })
            .collect()
    }
}

/// Rule id → index in the set.
fn rule_index(set: &RuleSet) -> std::collections::HashMap<&str, usize> {
    set.rules
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id.as_str(), i))
        .collect()
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
    /// Builds an engine for a compiled rule set.
    pub fn new(rules: RuleSet, opts: Options) -> Result<Engine, MatcherError> {
        let w = Wiring::new(&rules)?;
        let detectors: Vec<Box<dyn Detector>> = rules.rules.iter().map(detect::build).collect();
        let period = sample_period(&detectors);
        let decoder = Decoder::with_group_keys(&rules.keys, opts.live, &w.names);
        let pop_keys = w.pop_keys(&rules, &decoder);
        let n = rules.rules.len();
        let scanner = scanner_for(&w.matcher, &decoder);
        let scan_generation = scanner.generation();
        Ok(Engine {
            scan_slot: scan::ScannerSlot::new(scanner),
            here: here::Here::default(),
            scan_generation,
            rules,
            matcher: w.matcher,
            decoder,
            pop_keys,
            key_cache: Vec::new(),
            sampler: detect::Sampler::new(period),
            scratch: Scratch::default(),
            detectors,
            alerts: Alerts::new(),
            cond_users: w.cond_users,
            population_rules: w.population_rules,
            partition_keys: w.partition_keys,
            opts,
            min_time: i64::MAX,
            max_time: None,
            untimed_at: None,
            watermark: i64::MIN,
            last_tick: i64::MIN,
            statuses: Vec::new(),
            stats: Stats::default(),
            rule_hits: vec![0; n],
            evicted_base: vec![0; n],
            retired_evictions: 0,
            novelty: None,
            hit_log: None,
            exports: Exports::default(),
            local_cluster_alerts: true,
        })
        .map(|mut e| {
            e.novelty = novelty_rule(&e.rules).map(|(ri, spec)| (ri, Watch::new(spec)));
            e
        })
    }

    /// Replaces the rule set at run time (SIGHUP, `--watch-rules`). The new
    /// set is wired completely before anything changes, so an error leaves
    /// the old set running. Rules whose [`RuleSet::detection_signature`] is
    /// unchanged keep their detector state and alerts; changed rules start
    /// a fresh detector and adopt their firing alerts (no second page;
    /// resolved if not confirmed within the adoption grace); firing alerts
    /// of removed rules are resolved into `out`. Stream state (sticky
    /// values, partial lines) and all counters carry over.
    pub fn reload(
        &mut self,
        new: RuleSet,
        out: &mut Vec<Notification>,
    ) -> Result<ReloadSummary, MatcherError> {
        let w = Wiring::new(&new)?;
        let mut summary = ReloadSummary::default();
        let old_ids = rule_index(&self.rules);
        let mut old_dets: Vec<Option<Box<dyn Detector>>> = std::mem::take(&mut self.detectors)
            .into_iter()
            .map(Some)
            .collect();
        let mut fate = vec![alert::Fate::Drop; old_dets.len()];
        let n = new.rules.len();
        let mut detectors = Vec::with_capacity(n);
        let mut rule_hits = vec![0; n];
        let mut evicted_base = vec![0; n];
        for (ni, r) in new.rules.iter().enumerate() {
            let Some(&oi) = old_ids.get(r.id.as_str()) else {
                summary.added += 1;
                detectors.push(detect::build(r));
                continue;
            };
            rule_hits[ni] = self.rule_hits.get(oi).copied().unwrap_or(0);
            let base = self.evicted_base.get(oi).copied().unwrap_or(0);
            let kept = self.rules.detection_signature(oi) == new.detection_signature(ni);
            match old_dets.get_mut(oi).and_then(Option::take) {
                Some(d) if kept => {
                    summary.kept += 1;
                    fate[oi] = alert::Fate::Keep(ni);
                    evicted_base[ni] = base;
                    detectors.push(d);
                }
                old => {
                    summary.changed += 1;
                    fate[oi] = alert::Fate::Adopt(ni);
                    evicted_base[ni] = base + old.map_or(0, |d| d.evicted());
                    detectors.push(detect::build(r));
                }
            }
        }
        // Evictions of removed rules stay in the total.
        for (oi, d) in old_dets.iter().enumerate() {
            if let Some(d) = d {
                summary.removed += 1;
                self.retired_evictions +=
                    d.evicted() + self.evicted_base.get(oi).copied().unwrap_or(0);
            }
        }
        let now = if self.max_time.is_some() {
            self.watermark
        } else {
            i64::MIN
        };
        let before = out.len();
        self.alerts.reload(&self.rules.rules, &fate, now, out);
        summary.resolved = out.len() - before;
        self.decoder.rekey(&new.keys, &w.names);
        self.pop_keys = w.pop_keys(&new, &self.decoder);
        let scanner = scanner_for(&w.matcher, &self.decoder);
        self.scan_generation = scanner.generation();
        self.scan_slot.set(scanner);
        self.key_cache.clear();
        self.scratch = Scratch::default();
        self.matcher = w.matcher;
        self.cond_users = w.cond_users;
        self.population_rules = w.population_rules;
        self.partition_keys = w.partition_keys;
        self.sampler = detect::Sampler::new(sample_period(&detectors));
        self.detectors = detectors;
        self.rule_hits = rule_hits;
        self.evicted_base = evicted_base;
        self.novelty = match (self.novelty.take(), novelty_rule(&new)) {
            (Some((_, mut w)), Some((ri, spec))) => {
                w.reconfigure(spec);
                Some((ri, w))
            }
            (None, Some((ri, spec))) => Some((ri, Watch::new(spec))),
            (_, None) => None,
        };
        self.rules = new;
        Ok(summary)
    }

    /// Sharded: spread and share rules count and export, but do not alert
    /// (their groups are spread over replicas; see [`Engine::exports`]).
    pub fn set_local_cluster_alerts(&mut self, on: bool) {
        self.local_cluster_alerts = on;
    }

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
        }
        for (format, v) in d.formats.nonzero() {
            out.push(Sample::event("lines_by_format", v).with("format", format));
        }
        for (rule, hits, evicted) in self.rule_stats() {
            out.push(Sample::event("rule_matches", hits).with("rule", &rule));
            out.push(Sample::event("evicted_groups", evicted).with("rule", &rule));
        }
        out.push(Sample::state("alerts_firing", self.firing() as i64));
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

    /// Feeds a block of lines with what the block scan found in it (hints
    /// of an older rule set are ignored). `sources` are the inputs the
    /// block's runs refer to; the arrival time is the block's. Returns the
    /// number of lines.
    pub fn push_block(
        &mut self,
        sources: &[Source],
        block: &source::block::Block,
        hints: &scan::Hints,
        out: &mut Vec<Notification>,
    ) -> u64 {
        let fallback = Source::named("stdin");
        let mut cursor = hints.cursor(self.scan_generation);
        let mut n = 0;
        self.here.begin(sources);
        for line in block.lines() {
            let src = sources.get(line.input).unwrap_or(&fallback);
            self.here.line(line.input);
            let hint = cursor.line(line.start, line.end);
            match line.time {
                Some(t) => {
                    if let Some(p) = self.decoder.prepare_at(src, line.text, t, hint) {
                        self.ingest(&p, out);
                    }
                }
                None => self.push_hinted(src, line.text, block.arrival, hint, out),
            }
            n += 1;
        }
        n
    }

    /// Feeds one raw line. `arrival` is the wall clock in live mode.
    pub fn push_line(
        &mut self,
        source: &Source,
        line: &str,
        arrival: Option<i64>,
        out: &mut Vec<Notification>,
    ) {
        self.here.line_of(source);
        self.push_hinted(source, line, arrival, None, out);
    }

    fn push_hinted(
        &mut self,
        source: &Source,
        line: &str,
        arrival: Option<i64>,
        hint: Option<decode::LineHint<'_>>,
        out: &mut Vec<Notification>,
    ) {
        let p = match hint {
            Some(h) => self.decoder.prepare_hinted(source, line, arrival, h),
            None => self.decoder.prepare(source, line, arrival),
        };
        if let Some(p) = p {
            self.ingest(&p, out);
        }
        while self.decoder.has_queued() {
            if let Some(p) = self.decoder.prepare_queued(arrival) {
                self.ingest(&p, out);
            }
        }
    }

    /// Feeds one line whose event time is known from its transport (a Loki
    /// entry's timestamp, ns).
    pub fn push_line_at(
        &mut self,
        source: &Source,
        line: &str,
        time: i64,
        out: &mut Vec<Notification>,
    ) {
        self.here.line_of(source);
        if let Some(p) = self.decoder.prepare_at(source, line, time, None) {
            self.ingest(&p, out);
        }
    }

    fn ingest(&mut self, p: &Prepared<'_>, out: &mut Vec<Notification>) {
        let mut t = p.time;
        let timed = p.time_from.moves_clocks();
        if timed {
            self.min_time = self.min_time.min(t);
            let max = self.max_time.map_or(t, |m| m.max(t));
            self.max_time = Some(max);
            self.watermark = self.watermark.max(max - self.opts.lateness_ns);
            if t < self.watermark {
                self.stats.late += 1;
                t = self.watermark;
            }
        } else if let Some(max) = self.max_time {
            // A line without a time of its own stands at its stream's
            // previous time, within the window already open: it moves no
            // clock and is never late.
            t = t.min(max).max(self.watermark);
        } else {
            // No line had a time yet: evaluated at the end (all at one
            // instant) if none ever does.
            self.untimed_at = Some(self.untimed_at.map_or(t, |u| u.max(t)));
        }
        if let Some(log) = self.hit_log.as_mut() {
            let bad = log.levels
                && self
                    .decoder
                    .level(p)
                    .is_some_and(|l| l >= crate::decode::severity::Level::Error);
            let sec = t.div_euclid(1_000_000_000);
            let room = log.volume.len() < MAX_HIT_LOG;
            match log.volume.last_mut() {
                Some(v) if v.0 == sec => {
                    v.1 = v.1.saturating_add(1);
                    v.2 = v.2.saturating_add(u32::from(bad));
                }
                _ if room => log.volume.push((sec, 1, u32::from(bad))),
                _ => {}
            }
        }
        // Population: every event's group key, for spread and share. Each
        // compiled key is resolved at most once per line, whatever the
        // number of rules sharing it.
        self.key_cache.clear();
        let due = !self.population_rules.is_empty() && {
            let digest = self.decoder.population_digest(p);
            self.sampler.due(digest, t)
        };
        for i in 0..self.population_rules.len() {
            if !due {
                break;
            }
            let ri = self.population_rules[i];
            let mut group = None;
            for j in 0..self.pop_keys[i].0.len() {
                let id = self.pop_keys[i].0[j];
                if let Some(v) = self.cached_key(id, p) {
                    group = Some(v);
                    break;
                }
            }
            let Some(g) = group else { continue };
            let part = match self.pop_keys[i].1 {
                Some(id) => self.cached_key(id, p),
                None => Some(CLUSTER.to_string()),
            };
            if let Some(part) = part {
                self.detectors[ri].seen(&g, &part, t);
                if self
                    .hit_log
                    .as_ref()
                    .is_some_and(|l| l.sightings.len() < MAX_HIT_LOG)
                {
                    // The pod as the population reads its keys: from the
                    // line's scan, memoised per line, no full decode.
                    let pod = self
                        .decoder
                        .key_id("pod")
                        .and_then(|id| self.cached_key(id, p))
                        .filter(|pod| *pod != g);
                    if let Some(log) = self.hit_log.as_mut() {
                        log.sightings.push((ri, g, pod, t));
                    }
                }
            }
        }
        let candidate = match p.prefiltered {
            Some(false) if self.matcher.needs_scan_on_every_line() => {
                self.matcher.scan(&p.text, &mut self.scratch)
            }
            Some(false) => false,
            _ => self.matcher.scan(&p.text, &mut self.scratch),
        };
        if candidate {
            self.stats.candidates += 1;
            let mut event = self.decoder.event(p);
            event.time = t;
            let candidates = std::mem::take(&mut self.scratch.candidates);
            for &cid in &candidates {
                if !Matcher::confirm(&self.rules.conditions[cid], &mut event) {
                    continue;
                }
                for ui in 0..self.cond_users[cid].len() {
                    let (ri, role) = self.cond_users[cid][ui];
                    self.route(ri, role, &event, out);
                }
            }
            self.scratch.candidates = candidates;
        } else {
            let text = p.text.trim_ascii();
            if text.starts_with('{') && !text.ends_with('}') {
                self.decoder.count_malformed();
            }
        }
        if let Some((ri, w)) = self.novelty.as_mut() {
            let ri = *ri;
            let level = self.decoder.level(p);
            // A trace's frames are mined with their record, not one by one.
            if w.mines(level) && !p.continues {
                if let Some(novel) =
                    w.observe(level, &p.text, p.format, p.header.as_ref(), t, timed)
                {
                    self.route_novel(ri, &novel, p, t, out);
                }
            }
        }
        if self.watermark >= self.last_tick.saturating_add(TICK_NS) {
            self.tick(self.watermark, out);
        }
    }

    fn cached_key(&mut self, id: decode::keys::KeyId, p: &Prepared<'_>) -> Option<String> {
        if self.key_cache.len() <= id {
            self.key_cache.resize(id + 1, None);
        }
        if let Some(v) = &self.key_cache[id] {
            return v.clone();
        }
        let v = self.decoder.resolve_quick(id, p);
        self.key_cache[id] = Some(v.clone());
        v
    }

    fn route(&mut self, ri: usize, role: Role, event: &decode::Event, out: &mut Vec<Notification>) {
        let rule = &self.rules.rules[ri];
        let keys = &self.rules.keys;
        let get = |k: &str| event.get(k);
        let group = if rule.group_by.is_empty() {
            Some(CLUSTER.to_string())
        } else {
            rule.group_by
                .iter()
                .find_map(|k| resolve_key(keys, k, &get))
        };
        let is_population = rule.detect.needs_population();
        let group = match group {
            Some(g) => g,
            None => {
                self.stats.ungrouped += 1;
                if is_population {
                    return;
                }
                "unknown".to_string()
            }
        };
        let partition = match &self.partition_keys[ri] {
            Some(k) => resolve_key(keys, k, &get).unwrap_or_else(|| "unknown".to_string()),
            None => CLUSTER.to_string(),
        };
        match role {
            Role::ResolveOn => {
                let key = if is_population { partition } else { group };
                self.detectors[ri].reset(&key);
                let rule = &self.rules.rules[ri];
                self.alerts.resolve(ri, rule, &key, event.time, out);
            }
            Role::Primary | Role::Then => {
                self.stats.hits += 1;
                if self.rule_hits.len() <= ri {
                    self.rule_hits.resize(ri + 1, 0);
                }
                self.rule_hits[ri] += 1;
                let step = if role == Role::Then {
                    Step::Then
                } else {
                    Step::Primary
                };
                let hit = Hit {
                    group: &group,
                    partition: &partition,
                    time: event.time,
                    step,
                    sample: &event.text,
                    origin: self.here.origin(),
                };
                self.detectors[ri].observe(&hit);
                if self.hit_log.is_some() {
                    let pod = resolve_key(keys, "pod", &get);
                    self.log_hit(ri, &group, pod, event.time, &event.text);
                }
                if self.is_cluster(ri) {
                    let id = &self.rules.rules[ri].id;
                    self.exports.hit(id, &partition, &group);
                }
                let now = self
                    .watermark
                    .max(event.time.min(self.max_time.unwrap_or(event.time)));
                self.evaluate_hit(ri, &group, now, out);
            }
        }
    }

    /// A line of a new template: a hit of the novelty rule, keyed by the
    /// template, grouped by the rule's keys. Rare (only new templates after
    /// learning), so the line is fully decoded for its group.
    fn route_novel(
        &mut self,
        ri: usize,
        novel: &Novel,
        p: &Prepared<'_>,
        t: i64,
        out: &mut Vec<Notification>,
    ) {
        let event = self.decoder.event(p);
        let rule = &self.rules.rules[ri];
        let keys = &self.rules.keys;
        let get = |k: &str| event.get(k);
        let group = rule
            .group_by
            .iter()
            .find_map(|k| resolve_key(keys, k, &get))
            .unwrap_or_else(|| {
                self.stats.ungrouped += 1;
                "unknown".to_string()
            });
        self.stats.hits += 1;
        if let Some(h) = self.rule_hits.get_mut(ri) {
            *h += 1;
        }
        let hit = Hit {
            group: &group,
            partition: &novel.key,
            time: t,
            step: Step::Primary,
            sample: &event.text,
            origin: self.here.origin(),
        };
        self.detectors[ri].observe(&hit);
        if self.hit_log.is_some() {
            let pod = resolve_key(keys, "pod", &get);
            self.log_hit(ri, &group, pod, t, &event.text);
        }
        self.detectors[ri].annotate(&novel.key, &novel.template, Some(novel.level.as_str()));
        let now = self.watermark.max(t.min(self.max_time.unwrap_or(t)));
        self.evaluate_hit(ri, &novel.key, now, out);
    }

    fn evaluate(&mut self, ri: usize, now: i64, out: &mut Vec<Notification>) {
        self.statuses.clear();
        self.detectors[ri].evaluate(now, &mut self.statuses);
        if !self.local_cluster_alerts && self.is_cluster(ri) {
            return;
        }
        let rule = &self.rules.rules[ri];
        let det = self.detectors[ri].as_ref();
        self.alerts.apply(ri, rule, &self.statuses, det, now, out);
        self.alerts.resolve_due(ri, rule, det, now, out);
    }

    /// After a hit: evaluates just that group where the detector can (so a
    /// flood of distinct groups costs O(1) per hit); spread and share wait
    /// for the next tick (≤ 1 s of event time).
    fn evaluate_hit(&mut self, ri: usize, key: &str, now: i64, out: &mut Vec<Notification>) {
        self.statuses.clear();
        if !self.local_cluster_alerts && self.is_cluster(ri) {
            return;
        }
        if self.detectors[ri].evaluate_key(key, now, &mut self.statuses) {
            let rule = &self.rules.rules[ri];
            self.alerts.apply(
                ri,
                rule,
                &self.statuses,
                self.detectors[ri].as_ref(),
                now,
                out,
            );
        }
    }

    /// Evaluates every rule at `now` (event time).
    fn tick(&mut self, now: i64, out: &mut Vec<Notification>) {
        self.last_tick = now;
        for ri in 0..self.rules.rules.len() {
            self.evaluate(ri, now, out);
        }
    }

    /// Live mode: advances event time while input is idle, so windows slide,
    /// alerts resolve and absences fire. `now` is the event time the clock
    /// implies (e.g. newest event time + wall time since it arrived).
    pub fn advance_to(&mut self, now: i64, out: &mut Vec<Notification>) {
        if self.max_time.is_none() {
            return;
        }
        let wm = now - self.opts.lateness_ns;
        if wm > self.watermark {
            self.watermark = wm;
            self.tick(wm, out);
        }
    }

    /// End of input: flushes partial lines and evaluates at the newest event
    /// time (the lateness allowance is no longer needed).
    pub fn finish(&mut self, out: &mut Vec<Notification>) {
        for (_, text) in self.decoder.drain_partials() {
            let src = Source::named("partial");
            self.push_line(&src, &text, None, out);
        }
        if let Some(m) = self.max_time.or(self.untimed_at) {
            self.watermark = self.watermark.max(m);
            self.tick(self.watermark, out);
        }
        self.decoder.log_input_hints();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
