//! Alerts: the lifecycle pending → firing → resolved per (rule, group), with
//! `for`, `resolve_after`, `resolve_on` and `repeat_interval`, and the
//! notification that carries the evidence.
//!
//! `for` is measured on the evidence, not on the clock: a condition that
//! became true at T has held for `latest supporting event − T`. A window that
//! merely still remembers a 10-second blip does not make the blip last 30 s,
//! so a `for: 30s` rule does not page for it.

use crate::clock::{format_rfc3339, Stamp};
use crate::detect::{Detector, Evidence, Status};
use crate::rules::Rule;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hasher;

pub mod flap;
mod saved;
pub use flap::{FlapHold, FlapState};
pub use saved::{render_orphan, AlertsState, Fate, Orphan, Restore, RuleCard};

/// A firing notification of `rule` for `group` with nothing else set, for
/// the tests of the stages after the engine.
#[cfg(test)]
pub(crate) fn test_notification(rule: &str, group: &str) -> Notification {
    let labels: BTreeMap<String, String> = [("alertname", rule), ("group", group)]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Notification {
        state: AlertState::Firing,
        rule: rule.into(),
        title: rule.into(),
        severity: "critical".into(),
        group: group.into(),
        labels,
        annotations: BTreeMap::new(),
        starts_at: Stamp::at(0),
        ends_at: None,
        count: 1,
        first_seen: None,
        last_seen: None,
        top_groups: Vec::new(),
        share: None,
        samples: Vec::new(),
        template: None,
        fingerprint: format!("{rule}/{group}"),
        repeat: false,
        incident: None,
        links: None,
        origins: Vec::new(),
        at: 0,
    }
}

/// Notification state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlertState {
    /// The condition holds (first notification or a repeat).
    Firing,
    /// The condition stopped holding.
    Resolved,
}

/// A group and its match count.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct TopGroup {
    /// Group name.
    pub group: String,
    /// Matches in the window.
    pub count: u64,
}

/// What receivers get: the documented NDJSON schema.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Notification {
    /// `firing` or `resolved`.
    pub state: AlertState,
    /// Rule id.
    pub rule: String,
    /// Rule title.
    pub title: String,
    /// `critical`, `warning` or `info`.
    pub severity: String,
    /// The group (node, pod, upstream) or partition (`cluster`).
    pub group: String,
    /// Stable identity labels: `alertname`, `severity`, `group` plus the rule's.
    pub labels: BTreeMap<String, String>,
    /// Rendered annotations.
    pub annotations: BTreeMap<String, String>,
    /// When the condition was first observed (RFC 3339).
    pub starts_at: Stamp,
    /// When it resolved (resolved notifications only).
    pub ends_at: Option<Stamp>,
    /// The event time at which it was made (ns; 0 when not made by the
    /// engine): a resolution at the instant it became due, however late
    /// the next line came; a resolution held for the flap window at the
    /// window's end; an incident update when it was sent. Receivers get it
    /// as `at` (RFC 3339): notifications go out in its order, in a replay
    /// as in a live run.
    #[serde(default, with = "made_at", skip_serializing_if = "made_at::unset")]
    pub at: i64,
    /// Matches in this episode.
    pub count: u64,
    /// First match of the episode.
    pub first_seen: Option<Stamp>,
    /// Latest match.
    pub last_seen: Option<Stamp>,
    /// Groups with counts, largest first.
    pub top_groups: Vec<TopGroup>,
    /// The top group's share (share rules).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// Up to 3 sample lines, truncated.
    pub samples: Vec<String>,
    /// The log template (novelty alerts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Stable hash of (rule, group), 16 hex digits.
    pub fingerprint: String,
    /// True for a repeat of an already-notified firing alert.
    pub repeat: bool,
    /// The incident (incident-level notifications, `--group-incidents`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<IncidentInfo>,
    /// Where to find the lines behind the alert: a Loki query, a Grafana
    /// Explore page, the files and line numbers of its samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<Links>,
    /// Where each sample was read (what the links are made from).
    #[serde(skip)]
    pub origins: Vec<Option<crate::detect::Origin>>,
}

/// `at` on the wire: RFC 3339 text, absent when unknown (0).
mod made_at {
    pub fn unset(at: &i64) -> bool {
        *at == 0 || *at == i64::MAX
    }

    pub fn serialize<S: serde::Serializer>(at: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::clock::format_rfc3339(*at))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(d)?;
        Ok(crate::clock::Stamp::from(text.as_str()).ns().unwrap_or(0))
    }
}

/// Links from an alert back to its lines.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Links {
    /// A Loki `query_range` URL returning the lines: the samples' streams,
    /// the rule's literals as line filters, the alert's time range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loki: Option<String>,
    /// The same query on a Grafana Explore page (`--grafana-url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grafana: Option<String>,
    /// The LogQL query of both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// `file:line` of each sample read from a file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<String>,
}

impl Links {
    /// The link a human clicks first: Grafana, else Loki.
    pub fn url(&self) -> Option<&str> {
        self.grafana.as_deref().or(self.loki.as_deref())
    }
}

/// What happened to an incident.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IncidentEvent {
    /// Its first alert fired.
    Opened,
    /// Alerts joined it, or some of its alerts resolved.
    Updated,
    /// All its alerts resolved.
    Resolved,
}

/// One alert of an incident's chain.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ChainLink {
    /// Rule id.
    pub rule: String,
    /// Rule title.
    pub title: String,
    /// Severity.
    pub severity: String,
    /// The alert's group (node) or partition (`cluster`).
    pub group: String,
    /// `firing` or `resolved`.
    pub state: AlertState,
    /// When it started (RFC 3339).
    pub starts_at: Stamp,
    /// When it resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<Stamp>,
    /// Its rendered summary.
    pub summary: String,
    /// The alert's fingerprint.
    pub fingerprint: String,
}

/// The incident part of an incident-level notification.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct IncidentInfo {
    /// Stable id (`inc-` and 8 hex digits), the same on every replica.
    pub id: String,
    /// Opened, updated or resolved.
    pub event: IncidentEvent,
    /// The rule of the root alert (the cause the others follow).
    pub root: String,
    /// The alerts, in the order they started.
    pub chain: Vec<ChainLink>,
    /// Every node the incident touched.
    pub nodes: Vec<String>,
    /// The nodes with an alert still firing.
    pub affected: Vec<String>,
    /// Alerts beyond the chain's bound, counted, not listed.
    #[serde(default)]
    pub omitted: u64,
}

/// Stable fingerprint of (rule id, group): FNV-1a 64, hex.
pub fn fingerprint(rule: &str, group: &str) -> String {
    let mut h = fnv::FnvHasher::default();
    h.write(rule.as_bytes());
    h.write(&[0]);
    h.write(group.as_bytes());
    format!("{:016x}", h.finish())
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
enum Phase {
    Pending { since: i64 },
    Firing { starts_at: i64, notified_at: i64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
struct Tracked {
    phase: Phase,
    inactive_since: Option<i64>,
    evidence: Evidence,
    /// Adopted from a previous run's state: `Some(i64::MIN)` until the
    /// first evaluation, then the event time its grace period started.
    adopted: Option<i64>,
}

/// How long an adopted alert waits for its condition to be seen again
/// before it resolves: the time a fresh detector needs to re-establish it,
/// plus the rule's hold and resolve times.
pub fn adoption_grace(rule: &Rule) -> i64 {
    let extra = match &rule.detect {
        crate::rules::Detect::Persist(p) => p.for_.ns(),
        crate::rules::Detect::Absent(a) => a.for_.ns(),
        _ => 0,
    };
    rule.detect.window().ns() + extra + rule.for_ + rule.resolve_after
}

/// Counters of the alert stage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AlertStats {
    /// Firing notifications (first and repeats).
    pub firing: u64,
    /// Resolved notifications.
    pub resolved: u64,
    /// Pending alerts that never fired.
    pub pending_dropped: u64,
}

/// All alerts of all rules.
#[derive(Default)]
pub struct Alerts {
    /// Per rule index: alert key → its state.
    rules: Vec<HashMap<String, Tracked>>,
    stats: AlertStats,
}

/// The least time between two repeats that a schedule wakes for (1 s): a
/// `repeat_interval` below it repeats at hits, not on a timer.
const MIN_REPEAT_DUE_NS: i64 = 1_000_000_000;

impl Tracked {
    /// At an evaluation at `now`: a firing alert of a group its detector
    /// evicted turns inactive (`over`: long enough ago to resolve now), an
    /// adoption's grace starts; returns when it resolves if that is now
    /// or before.
    fn settle(
        &mut self,
        key: &str,
        rule: &Rule,
        det: &dyn Detector,
        now: i64,
        over: bool,
    ) -> Option<i64> {
        let firing = matches!(self.phase, Phase::Firing { .. });
        if firing && self.adopted.is_none() && !det.tracks(key) {
            let at = if over {
                now.saturating_sub(rule.resolve_after)
            } else {
                now
            };
            self.inactive_since = Some(self.inactive_since.map_or(at, |s| s.min(at)));
        }
        if self.adopted == Some(i64::MIN) {
            self.adopted = Some(now);
        }
        self.resolves_at(rule, adoption_grace(rule))
            .filter(|&at| at <= now)
    }

    /// When this alert resolves with no change of its condition: its
    /// inactivity reaching `resolve_after` (unless the rule waits for its
    /// `resolve_on` event), an adopted alert's grace running out.
    fn resolves_at(&self, rule: &Rule, grace: i64) -> Option<i64> {
        let inactive = self
            .inactive_since
            .filter(|_| rule.resolve_on.is_none())
            .map(|s| s.saturating_add(rule.resolve_after));
        let adopted = self
            .adopted
            .filter(|&a| a != i64::MIN)
            .map(|a| a.saturating_add(grace));
        match (inactive, adopted) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next instant at which time alone may change this alert: its
    /// resolution, its next repeat while active, the end of its `for`
    /// (which time alone completes when the condition's support is the
    /// clock, as for an absence).
    fn due(&self, rule: &Rule) -> Option<i64> {
        let grace = adoption_grace(rule);
        let other = match self.phase {
            Phase::Pending { since } => (rule.for_ > 0).then(|| since.saturating_add(rule.for_)),
            Phase::Firing { notified_at, .. } => (self.inactive_since.is_none()
                && self.adopted.is_none())
            .then(|| notified_at.saturating_add(rule.repeat_interval.max(MIN_REPEAT_DUE_NS))),
        };
        match (self.resolves_at(rule, grace), other) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl Alerts {
    /// Empty.
    pub fn new() -> Alerts {
        Alerts::default()
    }

    /// Counters.
    pub fn stats(&self) -> &AlertStats {
        &self.stats
    }

    fn of_rule(&mut self, ri: usize) -> &mut HashMap<String, Tracked> {
        if self.rules.len() <= ri {
            self.rules.resize_with(ri + 1, HashMap::new);
        }
        &mut self.rules[ri]
    }

    /// Alerts (pending or firing) tracked for rule `ri`.
    pub fn tracked(&self, ri: usize) -> usize {
        self.rules.get(ri).map_or(0, HashMap::len)
    }

    /// Whether rule `ri` tracks an alert of `key`.
    pub fn tracks(&self, ri: usize, key: &str) -> bool {
        self.rules.get(ri).is_some_and(|m| m.contains_key(key))
    }

    /// Number of alerts currently firing.
    pub fn firing(&self) -> usize {
        self.rules
            .iter()
            .flat_map(HashMap::values)
            .filter(|t| matches!(t.phase, Phase::Firing { .. }))
            .count()
    }

    /// Alerts of rule `ri` firing now.
    pub fn firing_of(&self, ri: usize) -> usize {
        self.rules.get(ri).map_or(0, |m| {
            m.values()
                .filter(|t| matches!(t.phase, Phase::Firing { .. }))
                .count()
        })
    }

    /// The next instant at which time alone may change the alert of
    /// (`ri`, `key`) (see the engine's timers), if it is tracked.
    pub fn due(&self, ri: usize, rule: &Rule, key: &str) -> Option<i64> {
        self.rules.get(ri)?.get(key)?.due(rule)
    }

    /// Every alert of rule `ri` with its [`Alerts::due`].
    pub fn dues(&self, ri: usize, rule: &Rule, out: &mut Vec<(String, i64)>) {
        if let Some(m) = self.rules.get(ri) {
            out.extend(
                m.iter()
                    .filter_map(|(k, t)| Some((k.clone(), t.due(rule)?))),
            );
        }
    }

    /// The earliest [`Alerts::due`] after `after` of rule `ri`'s alerts.
    pub fn min_due(&self, ri: usize, rule: &Rule, after: i64) -> Option<i64> {
        self.rules
            .get(ri)?
            .values()
            .filter_map(|t| t.due(rule).filter(|&d| d > after))
            .min()
    }

    /// Starts the grace period of alerts adopted by a reload or restart at
    /// event time `now`.
    pub fn start_adoptions(&mut self, now: i64) {
        for t in self.rules.iter_mut().flat_map(HashMap::values_mut) {
            if t.adopted == Some(i64::MIN) {
                t.adopted = Some(now);
            }
        }
    }

    /// Applies a detector's statuses for rule `ri` at event time `now`.
    pub fn apply(
        &mut self,
        ri: usize,
        rule: &Rule,
        statuses: &[Status],
        det: &dyn Detector,
        now: i64,
        out: &mut Vec<Notification>,
    ) {
        for s in statuses {
            if s.active {
                self.activate(ri, rule, s, det, now, out);
                continue;
            }
            self.of_rule(ri);
            let map = &mut self.rules[ri];
            let Some(t) = map.get_mut(&s.key) else {
                continue;
            };
            match t.phase {
                Phase::Pending { .. } => {
                    map.remove(&s.key);
                    self.stats.pending_dropped += 1;
                }
                Phase::Firing { .. } => {
                    // The evidence stays what it was while the condition
                    // held: the resolution tells what resolved (6 of 6
                    // nodes), not the last group to fade out.
                    if t.inactive_since.is_none() {
                        t.inactive_since = Some(now);
                    }
                }
            }
        }
    }

    /// An active status: pending until `for` holds on the evidence, then
    /// firing (and repeated every `repeat_interval`).
    fn activate(
        &mut self,
        ri: usize,
        rule: &Rule,
        s: &Status,
        det: &dyn Detector,
        now: i64,
        out: &mut Vec<Notification>,
    ) {
        self.of_rule(ri);
        let map = &mut self.rules[ri];
        if !map.contains_key(&s.key) {
            map.insert(
                s.key.clone(),
                Tracked {
                    // A ruler's `for` starts at the evaluation that first
                    // found the condition true.
                    phase: Phase::Pending {
                        since: if rule.evaluate_every > 0 {
                            now
                        } else {
                            s.since
                        },
                    },
                    inactive_since: None,
                    evidence: Evidence::default(),
                    adopted: None,
                },
            );
        }
        let Some(t) = map.get_mut(&s.key) else {
            return;
        };
        t.inactive_since = None;
        // Seen again after a restart: it simply goes on firing.
        t.adopted = None;
        let (starts_at, repeat) = match t.phase {
            Phase::Pending { since } => {
                // On the evidence, the latest supporting line; on the
                // clock, this evaluation (the condition holds now).
                let held_to = if rule.for_clock {
                    now.max(s.support)
                } else {
                    s.support
                };
                if held_to - since < s.hold.unwrap_or(rule.for_) {
                    return;
                }
                (since, false)
            }
            Phase::Firing {
                starts_at,
                notified_at,
            } => {
                // While it fires, the evidence follows the condition but
                // does not shrink to the groups still matching as it
                // fades: the resolution tells what resolved (5 of 6
                // nodes), not the last groups to go quiet.
                let e = det.evidence(&s.key);
                if e.groups.unwrap_or(0) >= t.evidence.groups.unwrap_or(0) {
                    t.evidence = e;
                }
                if now - notified_at < rule.repeat_interval {
                    return;
                }
                (starts_at, true)
            }
        };
        if !repeat {
            t.evidence = det.evidence(&s.key);
        }
        t.phase = Phase::Firing {
            starts_at,
            notified_at: now,
        };
        self.stats.firing += 1;
        let mut n = render(
            rule,
            &s.key,
            AlertState::Firing,
            starts_at,
            None,
            &t.evidence,
            repeat,
        );
        n.at = now;
        out.push(n);
    }

    /// Resolves this rule's alerts whose condition has been false for
    /// `resolve_after` (rules with `resolve_on` wait for their event instead)
    /// or whose adoption grace ran out, each at the instant it became due.
    /// A firing alert whose group the detector no longer tracks (evicted
    /// by `max_groups`) counts as inactive from `now`; past `max_groups`
    /// alerts, long enough to resolve at once (the alert map stays bounded
    /// too).
    pub fn resolve_due(
        &mut self,
        ri: usize,
        rule: &Rule,
        det: &dyn Detector,
        now: i64,
        out: &mut Vec<Notification>,
    ) {
        let over = self.tracked(ri) > rule.max_groups;
        let mut due: Vec<(i64, String)> = self
            .of_rule(ri)
            .iter_mut()
            .filter_map(|(k, t)| Some((t.settle(k, rule, det, now, over)?, k.clone())))
            .collect();
        due.sort();
        for (at, key) in due {
            self.resolve(ri, rule, &key, at, out);
        }
    }

    /// [`Alerts::resolve_due`] for one alert key.
    pub fn resolve_key_due(
        &mut self,
        ri: usize,
        rule: &Rule,
        key: &str,
        det: &dyn Detector,
        now: i64,
        out: &mut Vec<Notification>,
    ) {
        let over = self.tracked(ri) > rule.max_groups;
        let Some(t) = self.of_rule(ri).get_mut(key) else {
            return;
        };
        if let Some(at) = t.settle(key, rule, det, now, over) {
            self.resolve(ri, rule, key, at, out);
        }
    }

    /// Resolves one alert at event time `now` (also used by `resolve_on`).
    /// Returns whether there was a firing alert to resolve.
    pub fn resolve(
        &mut self,
        ri: usize,
        rule: &Rule,
        key: &str,
        now: i64,
        out: &mut Vec<Notification>,
    ) -> bool {
        match self.rules.get_mut(ri).and_then(|m| m.remove(key)) {
            Some(Tracked {
                phase: Phase::Firing { starts_at, .. },
                evidence,
                ..
            }) => {
                self.stats.resolved += 1;
                let mut n = render(
                    rule,
                    key,
                    AlertState::Resolved,
                    starts_at,
                    Some(now.max(starts_at)),
                    &evidence,
                    false,
                );
                n.at = now;
                out.push(n);
                true
            }
            Some(_) | None => false,
        }
    }
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// The identity labels of an alert: `alertname`, `severity`, `group` and
/// the rule's own.
fn identity_labels(
    rule: &str,
    severity: &str,
    key: &str,
    extra: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    labels.insert("alertname".to_string(), rule.to_string());
    labels.insert("severity".to_string(), severity.to_string());
    labels.insert("group".to_string(), key.to_string());
    for (k, v) in extra {
        labels.insert(k.clone(), v.clone());
    }
    labels
}

/// Builds a notification with rendered annotations.
pub fn render(
    rule: &Rule,
    key: &str,
    state: AlertState,
    starts_at: i64,
    ends_at: Option<i64>,
    e: &Evidence,
    repeat: bool,
) -> Notification {
    let first_sample_fields = e
        .samples
        .first()
        .map(|s| crate::decode::payload::decode(s, None).fields);
    let duration = match (e.first_seen, e.last_seen) {
        (Some(a), Some(b)) => {
            let mut s = String::new();
            let _ = crate::duration::format_duration(b - a, &mut s);
            Some(s)
        }
        _ => None,
    };
    let var = |name: &str| -> Option<String> {
        match name {
            "rule" => Some(rule.id.clone()),
            "title" => Some(rule.title.clone()),
            "severity" => Some(rule.severity.as_str().into()),
            "group" | "partition" => Some(key.to_string()),
            "count" => Some(e.count.to_string()),
            "share" => e.share.map(pct),
            "duration" => duration.clone(),
            "groups" => e.groups.map(|g| g.to_string()),
            "population" => e.population.map(|g| g.to_string()),
            "total" => e.total.map(|g| g.to_string()),
            "top_group" => e.top_groups.first().map(|g| g.0.clone()),
            "first_seen" => e.first_seen.map(format_rfc3339),
            "last_seen" => e.last_seen.map(format_rfc3339),
            "template" => e.template.clone(),
            "level" => e.level.clone(),
            "reason" => e.reason.clone(),
            // What a ruler's expression evaluates to: the window's count,
            // the groups matching, the top group's share.
            "value" => e
                .in_window
                .map(|n| n.to_string())
                .or_else(|| e.groups.map(|g| g.to_string()))
                .or_else(|| e.share.map(pct))
                .or_else(|| Some(e.count.to_string())),
            other => {
                let f = other
                    .strip_prefix("field.")
                    .or_else(|| other.strip_prefix("fields."))?;
                first_sample_fields.as_ref()?.get(f).map(|v| v.into_owned())
            }
        }
    };
    let annotations = rule
        .annotations
        .iter()
        .map(|(k, t)| (k.clone(), t.render(var)))
        .collect();
    assemble(
        Identity {
            rule: &rule.id,
            title: &rule.title,
            severity: rule.severity.as_str(),
            key,
            labels: &rule.labels,
        },
        annotations,
        state,
        (starts_at, ends_at),
        e,
        repeat,
    )
}

/// Who a notification is about: its rule and alert key.
struct Identity<'a> {
    rule: &'a str,
    title: &'a str,
    severity: &'a str,
    key: &'a str,
    labels: &'a BTreeMap<String, String>,
}

/// A notification of `id` in `state` over `(starts_at, ends_at)`, with
/// its evidence.
fn assemble(
    id: Identity<'_>,
    annotations: BTreeMap<String, String>,
    state: AlertState,
    (starts_at, ends_at): (i64, Option<i64>),
    e: &Evidence,
    repeat: bool,
) -> Notification {
    Notification {
        state,
        rule: id.rule.to_string(),
        title: id.title.to_string(),
        severity: id.severity.to_string(),
        group: id.key.to_string(),
        labels: identity_labels(id.rule, id.severity, id.key, id.labels),
        annotations,
        starts_at: Stamp::at(starts_at),
        ends_at: ends_at.map(Stamp::at),
        count: e.count,
        first_seen: e.first_seen.map(Stamp::at),
        last_seen: e.last_seen.map(Stamp::at),
        top_groups: e
            .top_groups
            .iter()
            .map(|(g, c)| TopGroup {
                group: g.clone(),
                count: *c,
            })
            .collect(),
        share: e.share,
        samples: e.samples.clone(),
        template: e.template.clone(),
        fingerprint: fingerprint(id.rule, id.key),
        repeat,
        incident: None,
        links: None,
        origins: e.origins.clone(),
        at: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::count::Count;
    use crate::detect::{Hit, Step};
    use crate::rules::compile;
    const S: i64 = 1_000_000_000;

    fn rule(extra: &str) -> Rule {
        let y = format!("rules:\n  - id: r\n    title: T\n    severity: critical\n    match: {{contains: x}}\n    detect: {{count: {{window: 60s}}}}\n    annotations: {{summary: '{{{{ group }}}} x{{{{ count }}}}'}}\n{extra}");
        compile(&[("t".into(), y)]).unwrap().rules.remove(0)
    }

    fn step(a: &mut Alerts, r: &Rule, d: &mut Count, hits: &[i64], now: i64) -> Vec<Notification> {
        for &t in hits {
            d.observe(&Hit {
                group: "n1",
                partition: "cluster",
                time: t * S,
                step: Step::Primary,
                sample: "x",
                origin: None,
            });
        }
        let mut st = Vec::new();
        d.evaluate(now * S, &mut st);
        let mut out = Vec::new();
        a.apply(0, r, &st, d, now * S, &mut out);
        a.resolve_due(0, r, d, now * S, &mut out);
        out
    }

    #[test]
    fn for_is_measured_on_evidence_not_on_the_window() {
        let r = rule("    for: 30s\n");
        let mut d = Count::new(1, 60 * S, 10);
        let mut a = Alerts::new();
        // A 10 s blip: the window stays non-empty for 60 s, but the evidence spans 10 s.
        assert!(step(&mut a, &r, &mut d, &[0, 5, 10], 10).is_empty());
        assert!(step(&mut a, &r, &mut d, &[], 50).is_empty());
        assert!(step(&mut a, &r, &mut d, &[], 71).is_empty());
        assert_eq!(a.stats().pending_dropped, 1);
        // A sustained signal fires once it has been seen for 30 s.
        assert!(step(&mut a, &r, &mut d, &[100], 100).is_empty());
        assert!(step(&mut a, &r, &mut d, &[115], 115).is_empty());
        let out = step(&mut a, &r, &mut d, &[130], 130);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].state, AlertState::Firing);
        assert_eq!(out[0].annotations["summary"], "n1 x3");
        assert_eq!(out[0].starts_at, format_rfc3339(100 * S));
    }

    #[test]
    fn resolve_after_and_repeat() {
        let r = rule("    resolve_after: 30s\n    repeat_interval: 1h\n");
        let mut d = Count::new(1, 60 * S, 10);
        let mut a = Alerts::new();
        assert_eq!(step(&mut a, &r, &mut d, &[0], 0).len(), 1);
        assert!(step(&mut a, &r, &mut d, &[], 59).is_empty());
        assert!(
            step(&mut a, &r, &mut d, &[], 60).is_empty(),
            "inactive from 60 s"
        );
        assert!(step(&mut a, &r, &mut d, &[], 89).is_empty());
        let out = step(&mut a, &r, &mut d, &[], 90);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].state, AlertState::Resolved);
        assert_eq!(
            out[0].ends_at.as_deref(),
            Some(format_rfc3339(90 * S).as_str())
        );
        assert_eq!(out[0].count, 1, "evidence survives until the resolve");
        // Repeat: keep matching for over an hour.
        let mut d = Count::new(1, 60 * S, 10);
        let mut a = Alerts::new();
        let mut all = Vec::new();
        for t in (0..=3700).step_by(30) {
            all.extend(step(&mut a, &r, &mut d, &[t], t));
        }
        assert_eq!(
            all.iter().map(|n| n.repeat).collect::<Vec<_>>(),
            vec![false, true]
        );
    }

    #[test]
    fn fingerprints_are_stable() {
        assert_eq!(fingerprint("a", "b"), fingerprint("a", "b"));
        assert_ne!(fingerprint("a", "b"), fingerprint("ab", ""));
        assert_eq!(fingerprint("a", "b").len(), 16);
    }
}
