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

/// The alert stage in a checkpoint: every tracked alert — pending with the
/// start its `for` is measured from, firing with when it was last
/// notified, how long it has been inactive, its evidence — by rule id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct AlertsState {
    alerts: Vec<SavedTracked>,
    #[serde(default)]
    firing_total: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
struct SavedTracked {
    rule: String,
    key: String,
    #[serde(flatten)]
    t: Tracked,
}

impl AlertsState {
    /// Alerts saved.
    pub fn len(&self) -> usize {
        self.alerts.len()
    }
    /// True when no alert was tracked.
    pub fn is_empty(&self) -> bool {
        self.alerts.is_empty()
    }
}

/// What a restart does with a saved rule's alerts (see [`Alerts::restore`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restore {
    /// The rule and its detection are unchanged, now at this index: its
    /// alerts go on exactly where they were.
    Keep(usize),
    /// The rule changed its detection, now at this index: firing alerts are
    /// adopted (no second page), pending ones start over.
    Adopt(usize),
    /// The rule is gone: firing alerts are returned to be resolved.
    Drop,
}

/// A firing alert of a rule that no longer exists, to be resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Orphan {
    /// Rule id.
    pub rule: String,
    /// Alert key.
    pub key: String,
    /// When it started (ns).
    pub starts_at: i64,
    /// When it was last notified (ns).
    pub notified_at: i64,
    /// Its evidence.
    pub evidence: Evidence,
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

/// What a rule reload does with an old rule's alerts (see [`Alerts::reload`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Unchanged rule, now at this index: alerts kept as they are.
    Keep(usize),
    /// Changed rule with the same id, now at this index: firing alerts adopted.
    Adopt(usize),
    /// Rule removed: firing alerts resolved.
    Drop,
}

/// All alerts of all rules.
#[derive(Default)]
pub struct Alerts {
    map: HashMap<(usize, String), Tracked>,
    /// Alerts tracked per rule index, so a tick skips rules with none.
    per_rule: Vec<usize>,
    stats: AlertStats,
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

    fn count(&mut self, ri: usize, delta: isize) {
        if self.per_rule.len() <= ri {
            self.per_rule.resize(ri + 1, 0);
        }
        self.per_rule[ri] = self.per_rule[ri].saturating_add_signed(delta);
    }

    fn per_rule_add(&mut self, ri: usize) {
        self.count(ri, 1);
    }

    /// Alerts (pending or firing) tracked for rule `ri`.
    pub fn tracked(&self, ri: usize) -> usize {
        self.per_rule.get(ri).copied().unwrap_or(0)
    }

    /// Number of alerts currently firing.
    pub fn firing(&self) -> usize {
        self.map
            .values()
            .filter(|t| matches!(t.phase, Phase::Firing { .. }))
            .count()
    }

    /// Applies a detector's statuses for rule `ri` at watermark `now`.
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
            let id = (ri, s.key.clone());
            if s.active {
                if !self.map.contains_key(&id) {
                    self.per_rule_add(ri);
                }
                let t = self.map.entry(id).or_insert_with(|| Tracked {
                    phase: Phase::Pending { since: s.since },
                    inactive_since: None,
                    evidence: Evidence::default(),
                    adopted: None,
                });
                t.inactive_since = None;
                // Seen again after a restart: it simply goes on firing.
                t.adopted = None;
                match t.phase {
                    Phase::Pending { since } => {
                        if s.support - since >= rule.for_ {
                            t.evidence = det.evidence(&s.key);
                            t.phase = Phase::Firing {
                                starts_at: since,
                                notified_at: now,
                            };
                            self.stats.firing += 1;
                            out.push(render(
                                rule,
                                &s.key,
                                AlertState::Firing,
                                since,
                                None,
                                &t.evidence,
                                false,
                            ));
                        }
                    }
                    Phase::Firing {
                        starts_at,
                        notified_at,
                    } => {
                        t.evidence = det.evidence(&s.key);
                        if now - notified_at >= rule.repeat_interval {
                            t.phase = Phase::Firing {
                                starts_at,
                                notified_at: now,
                            };
                            self.stats.firing += 1;
                            out.push(render(
                                rule,
                                &s.key,
                                AlertState::Firing,
                                starts_at,
                                None,
                                &t.evidence,
                                true,
                            ));
                        }
                    }
                }
            } else if let Some(t) = self.map.get_mut(&id) {
                match t.phase {
                    Phase::Pending { .. } => {
                        self.map.remove(&id);
                        self.count(ri, -1);
                        self.stats.pending_dropped += 1;
                    }
                    Phase::Firing { .. } => {
                        if t.inactive_since.is_none() {
                            t.inactive_since = Some(now);
                            let e = det.evidence(&s.key);
                            if e.count > 0 {
                                t.evidence = e;
                            }
                        }
                    }
                }
            }
        }
    }

    /// Resolves this rule's alerts whose condition has been false for
    /// `resolve_after` (rules with `resolve_on` wait for their event instead).
    /// A firing alert whose group the detector no longer tracks (evicted
    /// by `max_groups`) counts as inactive. Called on ticks, not per hit.
    pub fn resolve_due(
        &mut self,
        ri: usize,
        rule: &Rule,
        det: &dyn Detector,
        now: i64,
        out: &mut Vec<Notification>,
    ) {
        if rule.resolve_on.is_some() || self.tracked(ri) == 0 {
            return;
        }
        // Past max_groups alerts (a flood of distinct groups), alerts of
        // evicted groups resolve at once: the alert map stays bounded too.
        let over = self.tracked(ri) > rule.max_groups;
        for ((r, key), t) in self.map.iter_mut() {
            let firing = matches!(t.phase, Phase::Firing { .. });
            if *r == ri && firing && t.adopted.is_none() && !det.tracks(key) {
                let at = if over {
                    now.saturating_sub(rule.resolve_after)
                } else {
                    now
                };
                t.inactive_since = Some(t.inactive_since.map_or(at, |s| s.min(at)));
            }
        }
        let grace = adoption_grace(rule);
        for ((r, _), t) in self.map.iter_mut() {
            if *r == ri && t.adopted == Some(i64::MIN) {
                t.adopted = Some(now);
            }
        }
        let mut due: Vec<String> = self
            .map
            .iter()
            .filter(|((r, _), t)| {
                *r == ri
                    && (t
                        .inactive_since
                        .is_some_and(|s| now - s >= rule.resolve_after)
                        || t.adopted.is_some_and(|a| a != i64::MIN && now - a >= grace))
            })
            .map(|((_, k), _)| k.clone())
            .collect();
        due.sort();
        for key in due {
            self.resolve(ri, rule, &key, now, out);
        }
    }

    /// The state for a checkpoint (sorted, so equal states compare equal).
    pub fn save(&self, rules: &[Rule]) -> AlertsState {
        let mut alerts: Vec<SavedTracked> = self
            .map
            .iter()
            .filter_map(|((ri, key), t)| {
                Some(SavedTracked {
                    rule: rules.get(*ri)?.id.clone(),
                    key: key.clone(),
                    t: t.clone(),
                })
            })
            .collect();
        alerts.sort_by(|a, b| (&a.rule, &a.key).cmp(&(&b.rule, &b.key)));
        AlertsState {
            alerts,
            firing_total: self.stats.firing,
        }
    }

    /// Restores a checkpoint's alerts; `fate` says, per rule id, what
    /// becomes of them. Returns the firing alerts of rules that are gone,
    /// for the caller to resolve, and how many alerts were kept or adopted.
    pub fn restore(
        &mut self,
        state: AlertsState,
        fate: impl Fn(&str) -> Restore,
    ) -> (Vec<Orphan>, usize) {
        let mut orphans = Vec::new();
        let mut restored = 0;
        for SavedTracked { rule, key, mut t } in state.alerts {
            let ri = match (fate(&rule), &t.phase) {
                (Restore::Keep(ri), _) => ri,
                (Restore::Adopt(ri), Phase::Firing { .. }) => {
                    t.adopted = Some(i64::MIN);
                    t.inactive_since = None;
                    ri
                }
                (Restore::Adopt(_), Phase::Pending { .. }) => continue,
                (
                    Restore::Drop,
                    Phase::Firing {
                        starts_at,
                        notified_at,
                    },
                ) => {
                    orphans.push(Orphan {
                        rule,
                        key,
                        starts_at: *starts_at,
                        notified_at: *notified_at,
                        evidence: t.evidence,
                    });
                    continue;
                }
                (Restore::Drop, Phase::Pending { .. }) => continue,
            };
            if !self.map.contains_key(&(ri, key.clone())) {
                self.per_rule_add(ri);
            }
            self.map.insert((ri, key), t);
            restored += 1;
        }
        (orphans, restored)
    }

    /// Counts a resolve notification made outside this stage (an orphan
    /// of a removed rule).
    pub fn count_resolved(&mut self) {
        self.stats.resolved += 1;
    }

    /// Carries alerts over a rule reload. `fate[i]` says what becomes of the
    /// alerts of old rule `i`: kept as they are under a new index (the rule's
    /// detection is unchanged and so is its detector state), adopted by a
    /// changed rule (firing goes on without a new page and resolves if the
    /// new detector does not confirm it within [`adoption_grace`]), or
    /// resolved because the rule is gone (a receiver must not keep an alert
    /// nobody will ever resolve). Pending alerts of changed rules are dropped.
    /// `now` is `i64::MIN` when no event was seen yet.
    pub fn reload(
        &mut self,
        old_rules: &[Rule],
        fate: &[Fate],
        now: i64,
        out: &mut Vec<Notification>,
    ) {
        let old = std::mem::take(&mut self.map);
        let mut gone: Vec<(usize, String, i64, i64, Evidence)> = Vec::new();
        for ((ri, key), mut t) in old {
            match fate.get(ri).copied().unwrap_or(Fate::Drop) {
                Fate::Keep(n) => {
                    self.map.insert((n, key), t);
                }
                Fate::Adopt(n) => match t.phase {
                    Phase::Firing { .. } => {
                        t.adopted = Some(i64::MIN);
                        t.inactive_since = None;
                        self.map.insert((n, key), t);
                    }
                    Phase::Pending { .. } => self.stats.pending_dropped += 1,
                },
                Fate::Drop => match t.phase {
                    Phase::Firing {
                        starts_at,
                        notified_at,
                    } => {
                        // Before any event (alerts adopted at start), the
                        // last known instant of the alert stands in for now.
                        let at = if now == i64::MIN {
                            notified_at.max(starts_at)
                        } else {
                            now
                        };
                        gone.push((ri, key, starts_at, at, t.evidence))
                    }
                    Phase::Pending { .. } => self.stats.pending_dropped += 1,
                },
            }
        }
        self.per_rule.clear();
        let rules: Vec<usize> = self.map.keys().map(|(r, _)| *r).collect();
        for r in rules {
            self.per_rule_add(r);
        }
        gone.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        for (ri, key, starts_at, at, evidence) in gone {
            let Some(rule) = old_rules.get(ri) else {
                continue;
            };
            self.stats.resolved += 1;
            out.push(render(
                rule,
                &key,
                AlertState::Resolved,
                starts_at,
                Some(at),
                &evidence,
                false,
            ));
        }
    }

    /// Resolves one alert now (also used by `resolve_on`). Returns whether
    /// there was a firing alert to resolve.
    pub fn resolve(
        &mut self,
        ri: usize,
        rule: &Rule,
        key: &str,
        now: i64,
        out: &mut Vec<Notification>,
    ) -> bool {
        let removed = self.map.remove(&(ri, key.to_string()));
        if removed.is_some() {
            self.count(ri, -1);
        }
        match removed {
            Some(Tracked {
                phase: Phase::Firing { starts_at, .. },
                evidence,
                ..
            }) => {
                self.stats.resolved += 1;
                out.push(render(
                    rule,
                    key,
                    AlertState::Resolved,
                    starts_at,
                    Some(now),
                    &evidence,
                    false,
                ));
                true
            }
            Some(_) => false,
            None => false,
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

/// What a checkpoint keeps of a rule, to resolve its firing alerts if the
/// rule is gone after a restart: the identity its notifications carried.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct RuleCard {
    /// Rule id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Severity name.
    pub severity: String,
    /// The rule's own labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl RuleCard {
    /// The card of a rule.
    pub fn of(rule: &Rule) -> RuleCard {
        RuleCard {
            id: rule.id.clone(),
            title: rule.title.clone(),
            severity: rule.severity.as_str().to_string(),
            labels: rule.labels.clone(),
        }
    }
}

/// The resolve of a firing alert whose rule was removed while sigwatch was
/// down (the same identity as its firing, so receivers close it).
pub fn render_orphan(card: &RuleCard, o: &Orphan, at: i64) -> Notification {
    let mut annotations = BTreeMap::new();
    annotations.insert(
        "summary".to_string(),
        format!(
            "{} on {}: resolved because the rule was removed",
            card.title, o.key
        ),
    );
    assemble(
        Identity {
            rule: &card.id,
            title: &card.title,
            severity: &card.severity,
            key: &o.key,
            labels: &card.labels,
        },
        annotations,
        AlertState::Resolved,
        (o.starts_at, Some(at.max(o.starts_at))),
        &o.evidence,
        false,
    )
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
