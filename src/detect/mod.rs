//! Detectors: per-rule state machines over matches in event time.
//!
//! Every detector sits behind [`Detector`]: it observes hits, optionally
//! observes the population (every event's group key, for `spread` and
//! `share`), and on evaluation reports, per alert key, whether its condition
//! holds. Lifecycle (pending, firing, resolved) is the alert stage's job, so
//! the seven kinds stay small and testable on their own.
//!
//! State is bounded: every map of groups is an LRU of at most `max_groups`
//! entries, and every eviction is counted.

pub mod absent;
pub mod anomaly;
pub mod count;
pub mod guard;
pub mod novelty;
pub mod persist;
pub mod sequence;
pub mod share;
pub mod spread;
pub mod window;

use crate::rules::{Detect, Rule};
use lru::LruCache;
use serde::{Deserialize, Serialize};

/// Longest sample line kept as evidence, in bytes.
pub const SAMPLE_BYTES: usize = 512;
/// Samples kept per alert.
pub const MAX_SAMPLES: usize = 3;
/// The key used for cluster-wide alerts that have no partition.
pub const CLUSTER: &str = "cluster";

/// Which step of a rule a hit belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The rule's `match`.
    Primary,
    /// A `sequence`'s `then`.
    Then,
    /// A line of the rule's `progress`: the group's condition moved.
    Progress,
    /// A line of the rule's `unless` entry N (its own entries, then its
    /// progress's: [`crate::rules::Rule::recents`]).
    Unless(u8),
    /// A line of the `until` of `unless` entry N.
    Until(u8),
    /// A line seen while the baseline is learned (`anomaly`): it shapes
    /// what normal looks like and counts toward nothing.
    Baseline,
}

/// A confirmed match routed to a detector.
#[derive(Debug, Clone)]
pub struct Hit<'a> {
    /// The group (node, pod, upstream…).
    pub group: &'a str,
    /// The partition for spread/share (`cluster` when none).
    pub partition: &'a str,
    /// Event time (ns).
    pub time: i64,
    /// Step.
    pub step: Step,
    /// The line, for evidence.
    pub sample: &'a str,
    /// Where the line was read, for links back to it (None: unknown).
    pub origin: Option<OriginRef<'a>>,
}

/// Where a hit's line was read, borrowed from the engine's sources.
#[derive(Debug, Clone, Copy)]
pub struct OriginRef<'a> {
    /// The file's path, `stdin`, or the Loki stream's name.
    pub source: &'a str,
    /// The Loki stream's labels (Loki sources only).
    pub stream: Option<&'a [(String, String)]>,
    /// The line's number in its input, from 1 (inputs read from their
    /// first line: replayed files and stdin).
    pub line: Option<u64>,
}

/// Where a sample line was read: enough to link back to it (a file and
/// line number, or a Loki stream and the line's time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The file's path, `stdin`, or the Loki stream's name.
    pub source: String,
    /// The Loki stream's labels (Loki sources only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<Vec<(String, String)>>,
    /// The line's number in its input, from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The line's event time (ns).
    pub time: i64,
}

impl Origin {
    fn of(hit: &Hit<'_>) -> Option<Origin> {
        let o = hit.origin?;
        Some(Origin {
            source: o.source.to_string(),
            stream: o.stream.map(<[(String, String)]>::to_vec),
            line: o.line,
            time: hit.time,
        })
    }
}

/// The sample lines of an alert, up to [`MAX_SAMPLES`], truncated, each
/// with where it was read. Reads the state of an older version (lines
/// only) too.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "SavedSamples")]
pub struct Samples {
    /// The lines.
    pub lines: Vec<String>,
    /// Where each line was read, by index (shorter when unknown).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<Option<Origin>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SavedSamples {
    Lines(Vec<String>),
    Full {
        lines: Vec<String>,
        #[serde(default)]
        origins: Vec<Option<Origin>>,
    },
}

impl From<SavedSamples> for Samples {
    fn from(s: SavedSamples) -> Samples {
        match s {
            SavedSamples::Lines(lines) => Samples {
                lines,
                origins: Vec::new(),
            },
            SavedSamples::Full { lines, origins } => Samples { lines, origins },
        }
    }
}

impl Samples {
    /// Adds the hit's line, truncated, if fewer than [`MAX_SAMPLES`] are kept.
    pub fn push(&mut self, hit: &Hit<'_>) {
        if self.lines.len() < MAX_SAMPLES {
            self.push_kept(
                crate::text::truncate(hit.sample, SAMPLE_BYTES),
                Origin::of(hit),
            );
        }
    }

    /// Adds a line kept earlier (already truncated) with its origin.
    pub fn push_kept(&mut self, line: String, origin: Option<Origin>) {
        if origin.is_some() {
            self.origins.resize(self.lines.len(), None);
            self.origins.push(origin);
        }
        self.lines.push(line);
    }

    /// The hit's line and origin, kept for later ([`Samples::push_kept`]).
    pub fn keep(hit: &Hit<'_>) -> (String, Option<Origin>) {
        (
            crate::text::truncate(hit.sample, SAMPLE_BYTES),
            Origin::of(hit),
        )
    }

    /// Forgets every sample.
    pub fn clear(&mut self) {
        self.lines.clear();
        self.origins.clear();
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Keeps the first `n`.
    pub fn truncate(&mut self, n: usize) {
        self.lines.truncate(n);
        self.origins.truncate(n);
    }
}

/// The condition of one alert key at an evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// Alert key: the group, or the partition for cluster-wide detectors.
    pub key: String,
    /// Whether the condition holds.
    pub active: bool,
    /// Event time of the latest event supporting the condition.
    pub support: i64,
    /// Event time at which the condition last became true (the start of
    /// the evidence that `for` is measured on).
    pub since: i64,
    /// How long the condition must hold before it fires, when the rule's
    /// context says other than its `for` (None: the rule's `for`).
    pub hold: Option<i64>,
}

/// Evidence for a notification.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Matches in this episode.
    pub count: u64,
    /// First match of the episode.
    pub first_seen: Option<i64>,
    /// Latest match.
    pub last_seen: Option<i64>,
    /// Groups with their match counts, largest first.
    pub top_groups: Vec<(String, u64)>,
    /// Top group's share of the matches (share detector).
    pub share: Option<f64>,
    /// Groups matching (spread).
    pub groups: Option<usize>,
    /// Groups alive (spread, share).
    pub population: Option<usize>,
    /// Matches in the window across groups (share, spread).
    pub total: Option<u64>,
    /// The group's matches in the window when last evaluated (count): a
    /// ruler's `count_over_time` value, where `count` is the episode's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_window: Option<u64>,
    /// Up to [`MAX_SAMPLES`] sample lines.
    pub samples: Vec<String>,
    /// Where each sample was read, by index (shorter when unknown).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<Option<Origin>>,
    /// The log template (novelty).
    pub template: Option<String>,
    /// The template's most severe level (novelty).
    pub level: Option<String>,
    /// Why the condition holds, when the rule's context decides it: no
    /// progress since when, or after which line progress stopped counting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A detector's state in a checkpoint (`--state-dir`): saved as JSON
/// and loaded back into a detector built from the same rule, so windows,
/// pending `for` timers and populations go on across a restart as if
/// there had been none. Every detector kind derives its serde form; this
/// blanket implementation is what the engine calls.
pub trait Saved {
    /// The state as JSON.
    fn save_state(&self) -> Result<serde_json::Value, serde_json::Error>;
    /// Replaces the state with a saved one (of a detector of the same rule
    /// and detection); on error the detector is left as it was.
    fn load_state(&mut self, saved: serde_json::Value) -> Result<(), serde_json::Error>;
}

/// [`Saved`] through the type's own serde form.
macro_rules! saved_by_serde {
    ($($t:ty),*) => {$(
        impl Saved for $t {
            fn save_state(&self) -> Result<serde_json::Value, serde_json::Error> {
                serde_json::to_value(self)
            }
            fn load_state(&mut self, saved: serde_json::Value) -> Result<(), serde_json::Error> {
                *self = serde_json::from_value(saved)?;
                Ok(())
            }
        }
    )*};
}
saved_by_serde!(
    absent::Absent,
    anomaly::Anomaly,
    count::Count,
    novelty::Novelty,
    persist::Persist,
    sequence::Sequence,
    share::Share,
    spread::Spread
);

/// A detector kind.
pub trait Detector: Send + Saved {
    /// Records a confirmed match.
    fn observe(&mut self, hit: &Hit<'_>);
    /// Records that `group` logged something (any line) at `time`; called
    /// for rules whose [`crate::rules::Detect::needs_population`] holds.
    fn seen(&mut self, _group: &str, _partition: &str, _time: i64) {}
    /// How recently a group must have logged to count as alive (ns), for
    /// detectors with a population.
    fn population_window(&self) -> Option<i64> {
        None
    }
    /// Names what a key is about: its log template and level (novelty).
    fn annotate(&mut self, _key: &str, _template: &str, _level: Option<&str>) {}
    /// What normal looked like for a key (anomaly): `lines` over a
    /// learning period of `span` ns.
    fn set_baseline(&mut self, _key: &str, _lines: u64, _span: i64) {}
    /// Reports the condition of every key that is active or just changed.
    fn evaluate(&mut self, now: i64, out: &mut Vec<Status>);
    /// The event time at which `key` would change with no new hit — its
    /// window falls below the threshold or empties, its gap grows past
    /// `max_gap`, its absence begins — so the engine evaluates it exactly
    /// then, however long the input stays quiet (see `engine::timers`).
    /// None: time alone changes nothing. Cluster-wide kinds (spread,
    /// share) answer for the whole rule, whatever the key.
    fn due(&self, key: &str) -> Option<i64>;
    /// Every key's [`Detector::due`] (cluster-wide kinds: one, keyed `""`),
    /// to schedule them all after a full evaluation or a restart.
    fn dues(&self, out: &mut Vec<(String, i64)>);
    /// Reports the condition of one group only, right after its hit; false
    /// when this kind evaluates only on ticks (its keys are not groups), so
    /// a million distinct groups never cost a million-long scan per hit.
    fn evaluate_key(&mut self, _key: &str, _now: i64, _out: &mut Vec<Status>) -> bool {
        false
    }
    /// Whether the detector still tracks this key (false once evicted).
    fn tracks(&self, _key: &str) -> bool {
        true
    }
    /// Evidence for a key.
    fn evidence(&self, key: &str) -> Evidence;
    /// Forgets a key's state (after `resolve_on`).
    fn reset(&mut self, key: &str);
    /// A line of the rule's `progress` from the hit's group: its condition
    /// moved, so the detector starts that group over (the default forgets
    /// it, as [`Detector::reset`]; cluster-wide kinds drop the group from
    /// its partition, `persist` restarts the run's clock).
    fn progress(&mut self, hit: &Hit<'_>) {
        self.reset(hit.group);
    }
    /// The group is starting or stopping (an `unless` line): it leaves
    /// the population of every partition, so a fleet that changes is
    /// not counted as groups that stopped matching — or as groups that
    /// went quiet (spread, share).
    fn leave(&mut self, _group: &str) {}
    /// True when no group holds any state, so that a `progress` line can
    /// change nothing and need not be decoded (LiveKit logs `participant
    /// closing` all day; it matters only while a node drains).
    fn idle(&self) -> bool {
        false
    }
    /// False when the group holds no state, so that its `progress` line
    /// changes nothing (true when unsure).
    fn holds(&self, _group: &str) -> bool {
        true
    }
    /// Matches that did not count because an `unless` held.
    fn discounted(&self) -> u64 {
        0
    }
    /// Progress lines that did not count because a progress `unless`
    /// held.
    fn progress_ignored(&self) -> u64 {
        0
    }
    /// Groups evicted because of `max_groups`.
    fn evicted(&self) -> u64;
    /// The population, as (partition, group, last seen): spread and share.
    fn population(&self, _out: &mut Vec<(String, String, i64)>) {}
}

/// Builds the detector of a rule: its kind, behind the guard of its
/// `unless` and `progress` when it has them.
pub fn build(rule: &Rule) -> Box<dyn Detector> {
    let inner = build_kind(rule);
    if rule.unless.is_empty() && rule.progress.is_none() {
        return inner;
    }
    Box::new(guard::Guarded::new(rule, inner))
}

pub(crate) fn build_kind(rule: &Rule) -> Box<dyn Detector> {
    let max = rule.max_groups;
    match &rule.detect {
        Detect::Count(c) => Box::new(count::Count::new(c.threshold, c.window.ns(), max)),
        Detect::Persist(p) => Box::new(persist::Persist::new(p.for_.ns(), p.max_gap.ns(), max)),
        Detect::Spread(s) => Box::new(spread::Spread::new(s, max)),
        Detect::Share(s) => Box::new(share::Share::new(s, max)),
        Detect::Absent(a) => Box::new(absent::Absent::new(a.for_.ns(), max)),
        Detect::Sequence { within, .. } => Box::new(sequence::Sequence::new(within.ns(), max)),
        Detect::Novelty(n) => Box::new(novelty::Novelty::new(n, max)),
        Detect::Anomaly(a) => Box::new(anomaly::Anomaly::new(a, max)),
    }
}

/// What the evidence of a group says, for detectors that keep one state
/// per group (count, persist, absent, sequence): written once in
/// [`Groups::evidence`] instead of in each of them.
pub trait GroupState {
    /// Matches that make the current episode.
    fn count(&self) -> u64;
    /// When the episode's first match was seen.
    fn first_seen(&self) -> Option<i64>;
    /// When its last match was seen.
    fn last_seen(&self) -> Option<i64>;
    /// The sample lines kept.
    fn samples(&self) -> &Samples;
    /// Its matches in the window, for kinds that keep one.
    fn in_window(&self) -> Option<u64> {
        None
    }
}

/// The bookkeeping every per-group detector shares — `tracks`,
/// `evidence`, `reset`, `evicted` over its `groups` field — as
/// [`Detector`] methods.
macro_rules! per_group_bookkeeping {
    () => {
        fn tracks(&self, key: &str) -> bool {
            self.groups.peek(key).is_some()
        }

        fn evidence(&self, key: &str) -> Evidence {
            self.groups.evidence(key)
        }

        fn reset(&mut self, key: &str) {
            self.groups.remove(key);
        }

        fn evicted(&self) -> u64 {
            self.groups.evicted()
        }

        fn idle(&self) -> bool {
            self.groups.len() == 0
        }

        fn holds(&self, group: &str) -> bool {
            self.groups.peek(group).is_some()
        }

        fn due(&self, key: &str) -> Option<i64> {
            self.groups.peek(key).and_then(|g| self.group_due(g))
        }

        fn dues(&self, out: &mut Vec<(String, i64)>) {
            for (k, g) in self.groups.iter() {
                if let Some(d) = self.group_due(g) {
                    out.push((k.clone(), d));
                }
            }
        }
    };
}
pub(crate) use per_group_bookkeeping;

/// The bookkeeping the cluster-wide kinds (spread, share) share over their
/// `parts` (partitions, each with `groups` and a `population`) and
/// `pop_window`: the population window, and what `unless` and `progress`
/// do to a group.
macro_rules! partitioned_bookkeeping {
    () => {
        fn population_window(&self) -> Option<i64> {
            Some(self.pop_window)
        }

        fn idle(&self) -> bool {
            self.parts.iter().all(|(_, p)| p.groups.len() == 0)
        }

        fn holds(&self, group: &str) -> bool {
            self.parts
                .iter()
                .any(|(_, p)| p.groups.peek(group).is_some())
        }

        fn leave(&mut self, group: &str) {
            for name in self.parts.sorted_keys() {
                if let Some(p) = self.parts.peek_mut(&name) {
                    p.population.remove(group);
                }
            }
        }

        /// The group's matches leave its partition: it counts again only
        /// when it matches again (a pod that became ready).
        fn progress(&mut self, hit: &Hit<'_>) {
            if let Some(p) = self.parts.peek_mut(hit.partition) {
                p.groups.remove(hit.group);
            }
        }
    };
}
pub(crate) use partitioned_bookkeeping;

impl<T: GroupState> Groups<T> {
    /// The evidence of one group: its episode's count, first and last
    /// match and samples; empty for a group not tracked.
    pub fn evidence(&self, key: &str) -> Evidence {
        let Some(g) = self.peek(key) else {
            return Evidence::default();
        };
        Evidence {
            count: g.count(),
            first_seen: g.first_seen(),
            last_seen: g.last_seen(),
            top_groups: vec![(key.to_string(), g.count())],
            in_window: g.in_window(),
            samples: g.samples().lines.clone(),
            origins: g.samples().origins.clone(),
            ..Evidence::default()
        }
    }
}

/// An LRU map of groups that counts evictions. Memory follows the groups
/// actually held: nothing is reserved up front, so a rule with many
/// partitions (one map each) costs what its groups cost, not `max_groups`
/// slots per partition.
pub struct Groups<T> {
    map: LruCache<String, T>,
    cap: usize,
    evicted: u64,
}

impl<T> Groups<T> {
    /// A map of at most `cap` groups.
    pub fn new(cap: usize) -> Groups<T> {
        Groups {
            map: LruCache::unbounded(),
            cap: cap.max(1),
            evicted: 0,
        }
    }
    /// The entry of `key`, created with `make` (evicting the least recently
    /// used group when full).
    pub fn entry(&mut self, key: &str, make: impl FnOnce() -> T) -> &mut T {
        if self.map.len() >= self.cap && !self.map.contains(key) {
            if let Some((old, _)) = self.map.pop_lru() {
                self.evicted += 1;
                tracing::debug!(group = %old, "Group evicted: max_groups reached.");
            }
        }
        // Allocates the key only when the group is new.
        self.map.get_or_insert_mut_ref(key, make)
    }
    /// Read-only access.
    pub fn peek(&self, key: &str) -> Option<&T> {
        self.map.peek(key)
    }
    /// Mutable access without touching recency.
    pub fn peek_mut(&mut self, key: &str) -> Option<&mut T> {
        self.map.peek_mut(key)
    }
    /// The least recently used entry.
    pub fn peek_lru(&self) -> Option<(&String, &T)> {
        self.map.peek_lru()
    }
    /// Removes a group.
    pub fn remove(&mut self, key: &str) -> Option<T> {
        self.map.pop(key)
    }
    /// Keys in sorted order (deterministic evaluation).
    pub fn sorted_keys(&self) -> Vec<String> {
        let mut k: Vec<String> = self.map.iter().map(|(k, _)| k.clone()).collect();
        k.sort();
        k
    }
    /// Iterates entries in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &T)> {
        self.map.iter()
    }
    /// Every group, mutably, without changing their recency.
    pub fn iter_mut_all(&mut self) -> impl Iterator<Item = (&String, &mut T)> {
        self.map.iter_mut()
    }
    /// Number of groups.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    /// Evictions so far.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }
    /// Removes groups from the least recently used end while `gone` says
    /// so; returns how many went.
    pub fn drop_oldest_while(&mut self, mut gone: impl FnMut(&T) -> bool) -> usize {
        let mut n = 0;
        while self.map.peek_lru().is_some_and(|(_, v)| gone(v)) {
            self.map.pop_lru();
            n += 1;
        }
        n
    }
}

/// Saved as its bound, its eviction count and its entries from least to
/// most recently used, so a restored map evicts in the same order.
impl<T: Serialize> Serialize for Groups<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let entries: Vec<(&String, &T)> = self.map.iter().rev().collect();
        let mut st = s.serialize_struct("Groups", 3)?;
        st.serialize_field("cap", &self.cap)?;
        st.serialize_field("evicted", &self.evicted)?;
        st.serialize_field("entries", &entries)?;
        st.end()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Groups<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Saved<T> {
            cap: usize,
            evicted: u64,
            entries: Vec<(String, T)>,
        }
        let s = Saved::<T>::deserialize(d)?;
        let mut g = Groups::new(s.cap);
        g.evicted = s.evicted;
        for (k, v) in s.entries {
            g.map.put(k, v);
        }
        Ok(g)
    }
}

/// Reports one key's condition: active keys every time, an inactive key once
/// (its transition). `since` holds when the condition last became true; it
/// is set to `became` on the transition to active and cleared when it ends.
pub fn report(
    out: &mut Vec<Status>,
    key: &str,
    active: bool,
    support: i64,
    became: i64,
    since: &mut Option<i64>,
) {
    let was = since.is_some();
    let s = if active {
        *since.get_or_insert(became)
    } else {
        support
    };
    if active || was {
        out.push(Status {
            key: key.to_string(),
            active,
            support,
            since: s,
            hold: None,
        });
    }
    if !active {
        *since = None;
    }
}

/// Sorts (group, count) by count descending, then name, and keeps `n`.
pub fn top_n(mut v: Vec<(String, u64)>, n: usize) -> Vec<(String, u64)> {
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

/// The groups that logged anything recently, per partition: the denominator
/// of `spread` and the "≥ 2 groups alive" guard of `share`. It is fed from
/// every event, not only matches, because in a true black hole the healthy
/// nodes log no failures at all.
#[derive(Serialize, Deserialize)]
pub struct Population {
    seen: Groups<i64>,
    window: i64,
}

impl Population {
    /// Groups seen within `window` ns count as alive.
    pub fn new(window: i64, max_groups: usize) -> Population {
        Population {
            seen: Groups::new(max_groups),
            window,
        }
    }
    /// Forgets a group (it left: see [`Detector::leave`]).
    pub fn remove(&mut self, group: &str) {
        self.seen.remove(group);
    }
    /// Records that `group` logged at `time`.
    pub fn seen(&mut self, group: &str, time: i64) {
        let t = self.seen.entry(group, || time);
        *t = (*t).max(time);
    }
    /// Groups alive at `now`, dropping those long gone. The map is in
    /// order of sighting, so the groups gone are found at its old end: the
    /// cost is the number of groups that left, not the population's size.
    /// (A group sighted late with an older time stays until the groups
    /// sighted before it have left: at most the allowed lateness longer.)
    pub fn alive(&mut self, now: i64) -> usize {
        let cutoff = now - self.window;
        self.seen.drop_oldest_while(|t| *t < cutoff);
        self.seen.len()
    }
    /// Evictions.
    pub fn evicted(&self) -> u64 {
        self.seen.evicted()
    }
    /// When the group sighted longest ago leaves (the alive count's next
    /// change without new lines), if any.
    pub fn next_leave(&self) -> Option<i64> {
        self.seen
            .peek_lru()
            .map(|(_, t)| t.saturating_add(self.window).saturating_add(1))
    }
    /// Each group and when it last logged.
    pub fn last_seen(&self) -> impl Iterator<Item = (&String, i64)> {
        self.seen.iter().map(|(g, t)| (g, *t))
    }
}

/// Decides which lines feed the population. Lines whose population inputs
/// are identical (same stream, sticky values and key fields: one digest)
/// resolve to the same groups, so one of them per [`Sampler::every`] ns of
/// event time is enough: the set of groups is exact and each group's last
/// sighting is at most that much older than its last line. A small
/// direct-mapped table; a collision only costs an extra sample.
///
/// The period is a small fraction of the shortest population window (see
/// [`Sampler::period_for`]), so a group leaves the population at most that
/// much earlier than exact tracking would drop it.
pub struct Sampler {
    slots: Vec<(u64, i64)>,
    every: i64,
}

impl Sampler {
    /// Table size (a power of two).
    pub const SLOTS: usize = 4096;

    /// A sampler that lets each digest through once per `every` ns.
    pub fn new(every: i64) -> Sampler {
        Sampler {
            slots: vec![(0, i64::MIN); Sampler::SLOTS],
            every,
        }
    }

    /// The period for populations whose shortest window is `window` ns:
    /// 1/120 of it, between 1 s and 10 s (5 s for the default 10 min).
    pub fn period_for(window: Option<i64>) -> i64 {
        const S: i64 = 1_000_000_000;
        window.map_or(S, |w| (w / 120).clamp(S, 10 * S))
    }

    /// Whether the line with this digest at event time `t` must be read.
    pub fn due(&mut self, digest: u64, t: i64) -> bool {
        let i = (digest ^ (digest >> 29)) as usize & (Sampler::SLOTS - 1);
        let (d, at) = self.slots[i];
        if d == digest && at != i64::MIN && t >= at && t - at < self.every {
            return false;
        }
        self.slots[i] = (digest, t);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_read_an_older_state_and_keep_their_origins_by_index() {
        let old: Samples = serde_json::from_str(r#"["a line", "another"]"#).unwrap();
        assert_eq!(old.lines, ["a line", "another"]);
        assert!(old.origins.is_empty(), "the older state knew no origins");
        let mut s = Samples::default();
        s.push_kept("no origin".into(), None);
        let origin = Origin {
            source: "a.log".into(),
            stream: None,
            line: Some(7),
            time: 1,
        };
        s.push_kept("from a.log".into(), Some(origin.clone()));
        assert_eq!(s.origins, [None, Some(origin)], "aligned with the lines");
        let back: Samples = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s, "the checkpoint round-trips");
        s.truncate(1);
        assert_eq!((s.len(), s.origins.len()), (1, 1));
    }
}
