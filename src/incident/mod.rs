//! Incidents: the alerts of one failure, joined into one story. The Redis
//! outage that motivates sigwatch raises 13 alerts (one cluster-wide, two
//! per node); on-call needs one page that says Redis went away from every
//! node, then each node failed to drain, then each got stuck — and which
//! nodes are still affected.
//!
//! An alert joins an open incident when it is related to one of its
//! alerts: a rule link (`caused_by:` either way, or the same `incident:`
//! name), the same rule on another node, a shared node (a per-node alert
//! on a node a cluster-wide alert named, or two alerts of one node), or a
//! shared sample line (two rules raised by the same log line). Links
//! hold while the related alert fires and for `window` after it resolved;
//! the same-rule link only within `window` of the incident's last change.
//! An incident opens (pages) once it holds `min_alerts` related alerts
//! (default 1); one whose alerts all resolve before that never opened and
//! is dropped, counted. It resolves when its last alert resolves and none
//! fires again within `flap_window`: an alert that flaps (firing, resolved,
//! firing) holds its incident open and pages nothing new. A resolved
//! incident is closed for good: a later alert of the same chain opens a new
//! one, which names the old one in its story. Everything is driven
//! by the alerts' own event times, so a replay groups exactly as the live
//! run did, and two replicas give the same incident ids.

use crate::alert::{fingerprint, AlertState, IncidentEvent, Notification};
use crate::rules::RuleSet;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};

mod saved;
mod story;
pub use saved::IncidentsState;
use saved::SavedIncident;
#[cfg(test)]
use story::affected_text;
pub use story::{nodes_text, Incident, Member};

/// The rule id of incident-level notifications.
pub const INCIDENT_RULE: &str = "incident";

const MINUTE: i64 = 60_000_000_000;

/// How incidents are formed and reported.
#[derive(Debug, Clone, PartialEq)]
pub struct IncidentConfig {
    /// How long after a related alert resolved (or the incident last
    /// changed, for the same-rule link) a new alert still joins (ns).
    pub window: i64,
    /// Least time between two `updated` notifications of one incident (ns);
    /// changes in between are sent together.
    pub update_interval: i64,
    /// Most incidents open at once (the least recently changed one is
    /// closed early, counted).
    pub max_open: usize,
    /// Most alerts listed in one incident's chain (the rest counted).
    pub max_chain: usize,
    /// Most resolved incidents remembered (status page, report).
    pub max_closed: usize,
    /// Related alerts an incident needs before it opens (pages).
    pub min_alerts: usize,
    /// How long an incident whose alerts all resolved waits before it
    /// resolves: an alert firing again within it keeps the incident, and
    /// nothing new is sent (ns; 0: resolve at once).
    pub flap_window: i64,
}

impl Default for IncidentConfig {
    fn default() -> Self {
        IncidentConfig {
            window: 15 * MINUTE,
            update_interval: MINUTE,
            max_open: 256,
            max_chain: 200,
            max_closed: 1000,
            min_alerts: 1,
            flap_window: 5 * MINUTE,
        }
    }
}

/// What the rules say about how their alerts relate.
#[derive(Debug, Clone, Default)]
struct RuleLinks {
    caused_by: Vec<String>,
    incident: Option<String>,
    /// Spread, share and novelty alerts speak for several nodes (their top
    /// groups), not for their group key.
    cluster: bool,
}

/// Counters of incident grouping.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct IncidentStats {
    /// Incidents opened.
    pub opened: u64,
    /// Incidents resolved.
    pub resolved: u64,
    /// Alerts that joined an open incident.
    pub joined: u64,
    /// Incidents closed early by the `max_open` bound.
    pub evicted: u64,
    /// Alerts not listed in a full chain.
    pub omitted: u64,
    /// Alerts that fired again within the flap window of their incident
    /// (kept it open; nothing sent).
    #[serde(default)]
    pub flaps: u64,
    /// Incidents whose alerts all resolved before `min_alerts` joined
    /// (never opened, never paged).
    #[serde(default)]
    pub below_min: u64,
}

/// Resolved incidents a checkpoint keeps (the status page's recent list).
pub const SAVED_CLOSED: usize = 50;

/// The incident tracker: fed every alert notification, in order.
#[derive(Debug, Clone)]
pub struct Incidents {
    cfg: IncidentConfig,
    links: HashMap<String, RuleLinks>,
    open: Vec<Incident>,
    /// Alert fingerprint → incident id, for the alerts of open incidents.
    member_of: HashMap<String, String>,
    closed: VecDeque<Incident>,
    stats: IncidentStats,
}

impl Incidents {
    /// A tracker for the rules of `set`.
    pub fn new(set: &RuleSet, cfg: IncidentConfig) -> Incidents {
        let mut i = Incidents {
            cfg,
            links: HashMap::new(),
            open: Vec::new(),
            member_of: HashMap::new(),
            closed: VecDeque::new(),
            stats: IncidentStats::default(),
        };
        i.set_rules(set);
        i
    }

    /// Takes the links of a reloaded rule set (open incidents stay).
    pub fn set_rules(&mut self, set: &RuleSet) {
        self.links = set
            .rules
            .iter()
            .map(|r| {
                (
                    r.id.clone(),
                    RuleLinks {
                        caused_by: r.caused_by.clone(),
                        incident: r.incident.clone(),
                        cluster: r.detect.speaks_for_many(),
                    },
                )
            })
            .collect();
    }

    /// The state for a checkpoint.
    pub fn save(&self) -> IncidentsState {
        IncidentsState {
            open: self.open.iter().map(SavedIncident::of).collect(),
            closed: self
                .closed
                .iter()
                .rev()
                .take(SAVED_CLOSED)
                .rev()
                .map(SavedIncident::of)
                .collect(),
            stats: self.stats.clone(),
        }
    }

    /// Restores [`Incidents::save`]: open incidents go on (their alerts
    /// join, update and resolve them as before the restart).
    pub fn restore(&mut self, state: IncidentsState) {
        self.open = state
            .open
            .into_iter()
            .filter(|i| !i.members.is_empty())
            .take(self.cfg.max_open)
            .map(SavedIncident::incident)
            .collect();
        self.member_of = self
            .open
            .iter()
            .flat_map(|i| {
                i.members
                    .iter()
                    .map(|m| (m.fingerprint.clone(), i.id.clone()))
            })
            .collect();
        self.closed = state
            .closed
            .into_iter()
            .filter(|i| !i.members.is_empty())
            .map(SavedIncident::incident)
            .collect();
        while self.closed.len() > self.cfg.max_closed {
            self.closed.pop_front();
        }
        self.stats = state.stats;
    }

    /// Counters.
    pub fn stats(&self) -> &IncidentStats {
        &self.stats
    }

    /// Open incidents (those that opened: `min_alerts` alerts), oldest
    /// first; an incident within its flap window is still open.
    pub fn open(&self) -> Vec<&Incident> {
        self.open.iter().filter(|i| i.opened).collect()
    }

    /// Resolved incidents remembered, oldest first.
    pub fn closed(&self) -> impl DoubleEndedIterator<Item = &Incident> {
        self.closed.iter()
    }

    /// The incident of an alert of an open incident (or of one still
    /// gathering its `min_alerts`).
    pub fn incident_of(&self, alert_fingerprint: &str) -> Option<&str> {
        self.member_of.get(alert_fingerprint).map(String::as_str)
    }

    /// Takes one alert notification; pushes the incident notifications it
    /// causes (opened and resolved at once, updates at most every
    /// `update_interval`) and returns the alert's incident id.
    pub fn observe(&mut self, n: &Notification, out: &mut Vec<Notification>) -> Option<String> {
        if n.incident.is_some() {
            return None;
        }
        // What was due before this alert happens first: an incident whose
        // flap window ran out an hour ago is closed, not joined.
        let t = event_time(n);
        self.tick(t, out);
        let id = match n.state {
            AlertState::Firing if n.repeat => self.member_of.get(&n.fingerprint).cloned(),
            AlertState::Firing => self.fire(n, out),
            AlertState::Resolved => self.resolve(n, out),
        };
        self.tick(t, out);
        id
    }

    /// Sends the updates that are due at event time `now`, and resolves
    /// the incidents whose flap window has passed, each at the instant it
    /// became due (the window's end; an update when it was allowed and
    /// something had changed), however late the call.
    pub fn tick(&mut self, now: i64, out: &mut Vec<Notification>) {
        let flap = self.cfg.flap_window;
        while let Some(i) = self.open.iter().position(|inc| {
            inc.resolving_since
                .is_some_and(|r| now >= r.saturating_add(flap))
        }) {
            let end = self.open[i].resolving_since.unwrap_or(now);
            self.close(i, end, end.saturating_add(flap), out);
        }
        for inc in &mut self.open {
            if !inc.opened {
                continue;
            }
            let due = inc.sent_at.saturating_add(self.cfg.update_interval);
            if inc.dirty && now >= due {
                inc.dirty = false;
                inc.sent_at = due.max(inc.last_change);
                out.push(inc.notification_at(IncidentEvent::Updated, inc.sent_at));
            }
        }
    }

    /// End of input: resolves the incidents within their flap window (no
    /// alert can fire again) and sends every pending update.
    pub fn finish(&mut self, out: &mut Vec<Notification>) {
        while let Some(i) = self
            .open
            .iter()
            .position(|inc| inc.resolving_since.is_some())
        {
            let end = self.open[i].resolving_since.unwrap_or_default();
            self.close(i, end, end.saturating_add(self.cfg.flap_window), out);
        }
        for inc in &mut self.open {
            if inc.dirty && inc.opened {
                inc.dirty = false;
                let at = inc.last_change.max(inc.sent_at);
                out.push(inc.notification_at(IncidentEvent::Updated, at));
            }
        }
    }

    fn links(&self, rule: &str) -> &RuleLinks {
        static NONE: RuleLinks = RuleLinks {
            caused_by: Vec::new(),
            incident: None,
            cluster: false,
        };
        self.links.get(rule).unwrap_or(&NONE)
    }

    fn member(&self, n: &Notification, t: i64) -> Member {
        let cluster = self.links(&n.rule).cluster;
        let nodes = if cluster {
            let mut v: Vec<String> = n.top_groups.iter().map(|g| g.group.clone()).collect();
            v.sort();
            v.dedup();
            v
        } else {
            vec![n.group.clone()]
        };
        Member {
            rule: n.rule.clone(),
            title: n.title.clone(),
            severity: n.severity.clone(),
            group: n.group.clone(),
            state: AlertState::Firing,
            starts_at: t,
            ends_at: None,
            summary: n
                .annotations
                .get("summary")
                .cloned()
                .unwrap_or_else(|| n.title.clone()),
            fingerprint: n.fingerprint.clone(),
            nodes,
            cluster,
            samples: n.samples.iter().take(3).cloned().collect(),
            links: n.links.clone(),
        }
    }

    /// Whether new alert `m` relates to member `o` of an incident whose
    /// last change was at `last_change`.
    fn related(&self, m: &Member, o: &Member, last_change: i64) -> bool {
        let live = o.state == AlertState::Firing
            || o.ends_at
                .is_some_and(|e| m.starts_at <= e.saturating_add(self.cfg.window));
        if !live {
            return false;
        }
        let (lm, lo) = (self.links(&m.rule), self.links(&o.rule));
        let linked = lm.caused_by.contains(&o.rule)
            || lo.caused_by.contains(&m.rule)
            || (lm.incident.is_some() && lm.incident == lo.incident);
        let same_rule =
            m.rule == o.rule && m.starts_at <= last_change.saturating_add(self.cfg.window);
        let shared_node = m.nodes.iter().any(|n| o.nodes.contains(n));
        // Two alerts raised by the same log line are one failure seen twice
        // (a new template and the rule that names it, say).
        let shared_line = m.samples.iter().any(|l| o.samples.contains(l));
        linked || same_rule || shared_node || shared_line
    }

    fn fire(&mut self, n: &Notification, out: &mut Vec<Notification>) -> Option<String> {
        let t = event_time(n);
        // A member firing again (after resolving) within its open incident.
        if let Some(id) = self.member_of.get(&n.fingerprint).cloned() {
            if let Some(inc) = self.open.iter_mut().find(|i| i.id == id) {
                if let Some(m) = inc
                    .members
                    .iter_mut()
                    .find(|m| m.fingerprint == n.fingerprint)
                {
                    m.state = AlertState::Firing;
                    m.ends_at = None;
                }
                inc.last_change = t;
                if inc.resolving_since.take().is_some() {
                    // A flap: the incident holds; nothing new is sent.
                    self.stats.flaps += 1;
                } else {
                    inc.dirty = true;
                }
                return Some(id);
            }
        }
        let m = self.member(n, t);
        let target = self.open.iter().position(|inc| {
            inc.members
                .iter()
                .any(|o| self.related(&m, o, inc.last_change))
        });
        match target {
            Some(i) => {
                self.stats.joined += 1;
                let cap = self.cfg.max_chain;
                let min = self.cfg.min_alerts;
                let inc = &mut self.open[i];
                inc.last_change = t;
                inc.resolving_since = None;
                if inc.members.len() >= cap {
                    inc.omitted += 1;
                    self.stats.omitted += 1;
                    return Some(inc.id.clone());
                }
                inc.members.push(m);
                inc.dirty = true;
                let id = inc.id.clone();
                let root = choose_root(&inc.members, &self.links);
                self.open[i].root = root;
                self.member_of.insert(n.fingerprint.clone(), id.clone());
                let inc = &mut self.open[i];
                if !inc.opened && inc.members.len() >= min {
                    // Enough related alerts: it opens now, with them all.
                    inc.opened = true;
                    inc.dirty = false;
                    inc.sent_at = t;
                    out.push(inc.notification_at(IncidentEvent::Opened, t));
                    self.stats.opened += 1;
                }
                Some(id)
            }
            None => {
                let id = format!("inc-{}", &fingerprint(&n.fingerprint, &n.starts_at)[..8]);
                let follows = self.follows(&m);
                let opened = self.cfg.min_alerts <= 1;
                let inc = Incident {
                    id: id.clone(),
                    members: vec![m],
                    root: 0,
                    start: t,
                    end: None,
                    omitted: 0,
                    follows,
                    resolving_since: None,
                    opened,
                    last_change: t,
                    sent_at: t,
                    dirty: false,
                };
                if opened {
                    out.push(inc.notification_at(IncidentEvent::Opened, t));
                    self.stats.opened += 1;
                }
                self.member_of.insert(n.fingerprint.clone(), id.clone());
                self.open.push(inc);
                if self.open.len() > self.cfg.max_open {
                    self.evict_oldest(t, out);
                }
                Some(id)
            }
        }
    }

    fn resolve(&mut self, n: &Notification, out: &mut Vec<Notification>) -> Option<String> {
        let id = self.member_of.get(&n.fingerprint).cloned()?;
        let t = event_time(n);
        let i = self.open.iter().position(|inc| inc.id == id)?;
        let inc = &mut self.open[i];
        if let Some(m) = inc
            .members
            .iter_mut()
            .find(|m| m.fingerprint == n.fingerprint)
        {
            m.state = AlertState::Resolved;
            m.ends_at = Some(t);
        }
        inc.last_change = t;
        if inc.firing() {
            inc.dirty = true;
        } else if !inc.opened {
            // Never opened: it goes without a word.
            self.stats.below_min += 1;
            let inc = self.open.remove(i);
            for m in &inc.members {
                self.member_of.remove(&m.fingerprint);
            }
        } else if self.cfg.flap_window > 0 {
            inc.resolving_since = Some(t);
        } else {
            self.close(i, t, t, out);
        }
        Some(id)
    }

    /// The most recent resolved incident that new alert `m` relates to
    /// (within `window` of its alert's end): the one a new incident
    /// follows.
    fn follows(&self, m: &Member) -> Option<String> {
        self.closed
            .iter()
            .rev()
            .find(|inc| {
                inc.members
                    .iter()
                    .any(|o| self.related(m, o, inc.last_change))
            })
            .map(|inc| inc.id.clone())
    }

    /// Closes open incident `i`, ended at `t`; its resolution is made at
    /// `made` (the flap window's end when it was held).
    fn close(&mut self, i: usize, t: i64, made: i64, out: &mut Vec<Notification>) {
        let mut inc = self.open.remove(i);
        inc.end = Some(t);
        inc.resolving_since = None;
        inc.dirty = false;
        for m in &inc.members {
            self.member_of.remove(&m.fingerprint);
        }
        out.push(inc.notification_at(IncidentEvent::Resolved, made));
        self.stats.resolved += 1;
        self.closed.push_back(inc);
        while self.closed.len() > self.cfg.max_closed {
            self.closed.pop_front();
        }
    }

    fn evict_oldest(&mut self, t: i64, out: &mut Vec<Notification>) {
        let Some(i) = self
            .open
            .iter()
            .enumerate()
            .min_by_key(|(_, inc)| inc.last_change)
            .map(|(i, _)| i)
        else {
            return;
        };
        self.stats.evicted += 1;
        tracing::warn!(
            incident = %self.open[i].id,
            max_open = self.cfg.max_open,
            "Too many open incidents: the least recently changed one is closed early (its alerts still deliver)."
        );
        self.close(i, t, t, out);
    }
}

/// The root: an alert no other member causes, cluster-wide first, then the
/// earliest.
fn choose_root(members: &[Member], links: &HashMap<String, RuleLinks>) -> usize {
    let caused = |m: &Member| {
        links.get(&m.rule).is_some_and(|l| {
            members
                .iter()
                .any(|o| o.rule != m.rule && l.caused_by.contains(&o.rule))
        })
    };
    members
        .iter()
        .enumerate()
        .filter(|(_, m)| !caused(m))
        .min_by_key(|(_, m)| (!m.cluster, m.starts_at))
        .map_or(0, |(i, _)| i)
}

/// The event time of an alert notification: its end when resolved, else
/// its start (repeats: their latest match).
fn event_time(n: &Notification) -> i64 {
    let s = match n.state {
        AlertState::Resolved => n.ends_at.as_ref().unwrap_or(&n.starts_at),
        AlertState::Firing if n.repeat => n.last_seen.as_ref().unwrap_or(&n.starts_at),
        AlertState::Firing => &n.starts_at,
    };
    s.ns().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::TopGroup;
    use crate::clock::Stamp;
    use std::collections::BTreeMap;

    #[test]
    fn affected_nodes_read_as_words() {
        assert_eq!(affected_text(6, 6, true), "6 nodes, all still affected");
        assert_eq!(affected_text(1, 1, true), "1 node, still affected");
        assert_eq!(
            affected_text(6, 2, true),
            "6 nodes affected: 2 still, 4 recovered"
        );
        assert_eq!(
            affected_text(3, 0, false),
            "3 nodes affected, all recovered"
        );
        assert_eq!(affected_text(1, 0, false), "1 node affected, all recovered");
        assert_eq!(affected_text(0, 0, true), "still firing");
    }

    const RULES: &str = r#"
rules:
  - id: redis
    title: Redis unreachable
    severity: critical
    match: {contains: ["redis down"]}
    group_by: node
    detect: {spread: {window: 1m, groups: 2}}
  - id: drain_failed
    title: Drain failed
    severity: critical
    match: {contains: ["failed to mark as draining"]}
    group_by: node
    caused_by: redis
    detect: {count: {window: 15m}}
  - id: drain_stuck
    title: Drain stuck
    severity: critical
    match: {contains: ["waiting for participants"]}
    group_by: node
    caused_by: [drain_failed]
    detect: {persist: {for: 10m, max_gap: 1m}}
  - id: disk
    title: Disk full
    severity: warning
    match: {contains: ["no space"]}
    group_by: node
    incident: storage
    detect: {count: {window: 5m}}
  - id: upload
    title: Uploads failing
    severity: warning
    match: {contains: ["upload failed"]}
    group_by: pod
    incident: storage
    detect: {count: {window: 5m}}
"#;

    fn tracker(cfg: IncidentConfig) -> Incidents {
        let set = crate::rules::compile(&[("t.yaml".into(), RULES.into())]).unwrap();
        Incidents::new(&set, cfg)
    }

    fn at(min: i64) -> Stamp {
        Stamp::at(min * MINUTE)
    }

    fn alert(rule: &str, group: &str, min: i64, nodes: &[&str]) -> Notification {
        Notification {
            state: AlertState::Firing,
            rule: rule.into(),
            title: rule.to_uppercase(),
            severity: "critical".into(),
            group: group.into(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::from([("summary".into(), format!("{rule} on {group}"))]),
            starts_at: at(min),
            ends_at: None,
            count: 1,
            first_seen: None,
            last_seen: None,
            top_groups: nodes
                .iter()
                .map(|n| TopGroup {
                    group: n.to_string(),
                    count: 1,
                })
                .collect(),
            share: None,
            samples: vec![format!("a line of {rule} on {group}")],
            template: None,
            fingerprint: fingerprint(rule, group),
            repeat: false,
            incident: None,
            links: None,
            origins: Vec::new(),
            at: 0,
        }
    }

    fn resolved(rule: &str, group: &str, start: i64, end: i64) -> Notification {
        let mut n = alert(rule, group, start, &[]);
        n.state = AlertState::Resolved;
        n.ends_at = Some(at(end));
        n
    }

    fn events(out: &[Notification]) -> Vec<(String, IncidentEvent)> {
        out.iter()
            .map(|n| {
                let i = n.incident.as_ref().unwrap();
                (i.id.clone(), i.event)
            })
            .collect()
    }

    #[test]
    fn the_redis_outage_is_one_incident_rooted_at_the_cluster_alert() {
        let mut inc = tracker(IncidentConfig::default());
        let mut out = Vec::new();
        let nodes = ["n1", "n2", "n3"];
        let id = inc
            .observe(&alert("redis", "cluster", 10, &nodes), &mut out)
            .unwrap();
        for n in nodes {
            let got = inc.observe(&alert("drain_failed", n, 11, &[n]), &mut out);
            assert_eq!(got.as_deref(), Some(id.as_str()));
        }
        inc.observe(&resolved("redis", "cluster", 10, 20), &mut out);
        for n in nodes {
            inc.observe(&alert("drain_stuck", n, 21, &[n]), &mut out);
        }
        inc.finish(&mut out);
        assert_eq!(inc.open().len(), 1);
        let i = &inc.open()[0];
        assert_eq!(i.members.len(), 7);
        assert_eq!(i.root().unwrap().rule, "redis");
        assert_eq!(i.title(), "REDIS");
        assert_eq!(i.affected(), vec!["n1", "n2", "n3"]);
        let n = i.notification(IncidentEvent::Updated);
        let info = n.incident.as_ref().unwrap();
        let rules: Vec<&str> = info.chain.iter().map(|c| c.rule.as_str()).collect();
        assert_eq!(
            rules,
            [
                "redis",
                "drain_failed",
                "drain_failed",
                "drain_failed",
                "drain_stuck",
                "drain_stuck",
                "drain_stuck"
            ]
        );
        assert_eq!(info.chain[0].state, AlertState::Resolved);
        assert_eq!(
            n.annotations["summary"],
            "REDIS (recovered) → DRAIN_FAILED on 3 nodes → DRAIN_STUCK on 3 nodes — 3 nodes, all still affected"
        );
        assert_eq!(n.labels["incident"], id);
        // Opened once; 12 changes in 5 updates, at most one a minute: the
        // first join at 11m (the other two wait), those two at 12m when
        // the minute is over (not held until the next change at 20m), the
        // resolve at 20m, the first stuck node at 21m, the other two at
        // the end.
        let ev = events(&out);
        assert_eq!(ev[0], (id.clone(), IncidentEvent::Opened));
        assert!(ev[1..]
            .iter()
            .all(|e| e == &(id.clone(), IncidentEvent::Updated)));
        assert_eq!(ev.len(), 6, "{ev:?}");
        let members = |k: usize| out[k].incident.as_ref().unwrap().chain.len();
        let resolved =
            |k: usize| out[k].incident.as_ref().unwrap().chain[0].state == AlertState::Resolved;
        assert_eq!(
            (members(1), members(2), members(3), members(4), members(5)),
            (2, 4, 4, 5, 7)
        );
        assert!(
            !resolved(2) && resolved(3),
            "the 12m update before the resolve"
        );
    }

    #[test]
    fn the_root_follows_caused_by_when_the_cause_fires_last() {
        let mut inc = tracker(IncidentConfig::default());
        let mut out = Vec::new();
        inc.observe(&alert("drain_failed", "n1", 10, &["n1"]), &mut out);
        inc.observe(&alert("redis", "cluster", 11, &["n1", "n2"]), &mut out);
        assert_eq!(inc.open().len(), 1);
        assert_eq!(inc.open()[0].root().unwrap().rule, "redis");
        // The id stays the first alert's.
        assert_eq!(events(&out)[0].0, inc.open()[0].id);
    }

    #[test]
    fn unrelated_alerts_are_separate_incidents_and_each_resolves() {
        let mut inc = tracker(IncidentConfig::default());
        let mut out = Vec::new();
        let a = inc.observe(&alert("drain_failed", "n1", 10, &["n1"]), &mut out);
        let b = inc.observe(&alert("disk", "n9", 10, &["n9"]), &mut out);
        assert_ne!(a, b);
        assert_eq!(inc.open().len(), 2);
        inc.observe(&resolved("disk", "n9", 10, 15), &mut out);
        // Within the flap window it holds, then resolves at its alert's end.
        assert_eq!(inc.open().len(), 2);
        inc.tick(at(19).ns().unwrap(), &mut out);
        assert_eq!(inc.open().len(), 2);
        inc.tick(at(20).ns().unwrap(), &mut out);
        assert_eq!(inc.open().len(), 1);
        assert_eq!(inc.closed().count(), 1);
        let last = out.last().unwrap();
        assert_eq!(last.state, AlertState::Resolved);
        assert_eq!(
            last.incident.as_ref().unwrap().event,
            IncidentEvent::Resolved
        );
        assert_eq!(last.ends_at.as_deref(), Some(at(15).as_str()));
        assert!(inc.incident_of(&fingerprint("disk", "n9")).is_none());
        assert_eq!(inc.stats().opened, 2);
        assert_eq!(inc.stats().resolved, 1);
    }

    #[test]
    fn an_incident_name_links_rules_without_a_shared_node() {
        let mut inc = tracker(IncidentConfig::default());
        let mut out = Vec::new();
        let a = inc.observe(&alert("disk", "n1", 10, &["n1"]), &mut out);
        let b = inc.observe(&alert("upload", "api-7", 12, &["api-7"]), &mut out);
        assert_eq!(a, b);
    }

    #[test]
    fn the_same_rule_elsewhere_joins_only_within_the_window() {
        let cfg = IncidentConfig {
            window: 5 * MINUTE,
            ..IncidentConfig::default()
        };
        let mut inc = tracker(cfg);
        let mut out = Vec::new();
        let a = inc.observe(&alert("drain_failed", "n1", 10, &["n1"]), &mut out);
        let b = inc.observe(&alert("drain_failed", "n2", 14, &["n2"]), &mut out);
        assert_eq!(a, b);
        // 20 min after the last change: a new incident, though n1 still fires.
        let c = inc.observe(&alert("drain_failed", "n3", 34, &["n3"]), &mut out);
        assert_ne!(a, c);
        // Rules sharing an incident name link while the other fires.
        let d = inc.observe(&alert("disk", "n8", 40, &["n8"]), &mut out);
        let e = inc.observe(&alert("disk", "n9", 90, &["n9"]), &mut out);
        assert_eq!(d, e);
    }

    #[test]
    fn a_resolved_alert_links_for_the_window_only() {
        let cfg = IncidentConfig {
            window: 5 * MINUTE,
            ..IncidentConfig::default()
        };
        let mut inc = tracker(cfg);
        let mut out = Vec::new();
        let a = inc.observe(&alert("drain_failed", "n1", 10, &["n1"]), &mut out);
        inc.observe(&alert("disk", "n1", 11, &["n1"]), &mut out);
        inc.observe(&resolved("drain_failed", "n1", 10, 12), &mut out);
        // Still open (disk fires); drain_stuck on n1 links to the resolved
        // drain_failed within 5 minutes…
        let b = inc.observe(&alert("drain_stuck", "n1", 16, &["n1"]), &mut out);
        assert_eq!(a, b);
        // …and through the shared node anyway; another node's stuck drain
        // 20 minutes later links to nothing live.
        let c = inc.observe(&alert("drain_stuck", "n7", 40, &["n7"]), &mut out);
        assert_ne!(a, c);
    }

    #[test]
    fn chains_and_open_incidents_are_bounded_and_counted() {
        let cfg = IncidentConfig {
            max_chain: 2,
            max_open: 2,
            ..IncidentConfig::default()
        };
        let mut inc = tracker(cfg);
        let mut out = Vec::new();
        for n in ["n1", "n2", "n3"] {
            inc.observe(&alert("disk", n, 10, &[n]), &mut out);
        }
        assert_eq!(inc.open()[0].members.len(), 2);
        assert_eq!(inc.open()[0].omitted, 1);
        assert_eq!(inc.stats().omitted, 1);
        inc.observe(&alert("drain_failed", "x1", 30, &["x1"]), &mut out);
        inc.observe(&alert("drain_failed", "y1", 90, &["y1"]), &mut out);
        assert_eq!(inc.open().len(), 2);
        assert_eq!(inc.stats().evicted, 1);
    }

    #[test]
    fn repeats_and_incident_notifications_change_nothing() {
        let mut inc = tracker(IncidentConfig::default());
        let mut out = Vec::new();
        let a = inc.observe(&alert("disk", "n1", 10, &["n1"]), &mut out);
        let mut rep = alert("disk", "n1", 10, &["n1"]);
        rep.repeat = true;
        rep.last_seen = Some(at(250));
        assert_eq!(inc.observe(&rep, &mut out), a);
        let own = out[0].clone();
        assert_eq!(inc.observe(&own, &mut out), None);
        assert_eq!(out.len(), 1);
        assert_eq!(inc.open()[0].members.len(), 1);
    }

    #[test]
    fn alerts_raised_by_the_same_line_are_one_incident() {
        let mut inc = tracker(IncidentConfig::default());
        let mut out = Vec::new();
        let mut a = alert("disk", "n1", 10, &["n1"]);
        let mut b = alert("drain_failed", "pod-7", 11, &["pod-7"]);
        a.samples = vec!["the same line".into()];
        b.samples = vec!["another".into(), "the same line".into()];
        let ia = inc.observe(&a, &mut out);
        assert_eq!(inc.observe(&b, &mut out), ia);
    }

    #[test]
    fn a_flapping_alert_holds_its_incident_and_pages_once() {
        let mut inc = tracker(IncidentConfig::default());
        let mut out = Vec::new();
        // An hour of flapping: firing 2 minutes, resolved 2 minutes.
        for k in 0..15 {
            let start = 10 + 4 * k;
            inc.observe(&alert("disk", "n9", start, &["n9"]), &mut out);
            inc.observe(&resolved("disk", "n9", start, start + 2), &mut out);
        }
        inc.tick(at(100).ns().unwrap(), &mut out);
        let ev = events(&out);
        assert_eq!(
            ev.iter().map(|e| e.1).collect::<Vec<_>>(),
            vec![IncidentEvent::Opened, IncidentEvent::Resolved],
            "{ev:?}"
        );
        assert_eq!(inc.stats().flaps, 14);
        assert_eq!((inc.stats().opened, inc.stats().resolved), (1, 1));
        // It resolved when its alert last did, not when the window ran out.
        assert_eq!(
            out.last().unwrap().ends_at.as_deref(),
            Some(at(68).as_str())
        );
    }

    #[test]
    fn an_alert_firing_again_after_its_flap_window_opens_a_new_incident_without_a_tick() {
        // Resolved at 12 min, firing again an hour later, with nothing in
        // between to tick the tracker: the flap window (5 min) ran out at
        // 17 min, so the first incident is closed then, not held as a flap.
        let mut inc = tracker(IncidentConfig::default());
        let mut out = Vec::new();
        let first = inc.observe(&alert("disk", "n9", 10, &["n9"]), &mut out);
        inc.observe(&resolved("disk", "n9", 10, 12), &mut out);
        let second = inc.observe(&alert("disk", "n9", 72, &["n9"]), &mut out);
        assert_ne!(first, second);
        assert_eq!(inc.stats().flaps, 0);
        let ev: Vec<IncidentEvent> = events(&out).into_iter().map(|e| e.1).collect();
        assert_eq!(
            ev,
            [
                IncidentEvent::Opened,
                IncidentEvent::Resolved,
                IncidentEvent::Opened
            ]
        );
        assert_eq!(out[1].ends_at.as_deref(), Some(at(12).as_str()));
    }

    #[test]
    fn without_a_flap_window_every_resolution_closes_the_incident() {
        let mut inc = tracker(IncidentConfig {
            flap_window: 0,
            ..IncidentConfig::default()
        });
        let mut out = Vec::new();
        for k in 0..3 {
            inc.observe(&alert("disk", "n9", 10 + 4 * k, &["n9"]), &mut out);
            inc.observe(&resolved("disk", "n9", 10 + 4 * k, 12 + 4 * k), &mut out);
        }
        assert_eq!((inc.stats().opened, inc.stats().resolved), (3, 3));
    }

    #[test]
    fn an_alert_after_its_incident_resolved_opens_a_new_one_that_follows_it() {
        let mut inc = tracker(IncidentConfig::default());
        let mut out = Vec::new();
        let first = inc.observe(&alert("drain_failed", "n1", 10, &["n1"]), &mut out);
        inc.observe(&resolved("drain_failed", "n1", 10, 12), &mut out);
        inc.tick(at(18).ns().unwrap(), &mut out);
        assert_eq!(inc.open().len(), 0);
        // The same chain, after the flap window (within the 15 minutes
        // that relate it): a new incident, never the old one reopened or
        // swollen.
        let second = inc.observe(&alert("stuck", "n1", 20, &["n1"]), &mut out);
        assert_ne!(first, second);
        let closed: Vec<&Incident> = inc.closed().collect();
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].members.len(), 1);
        let open = inc.open();
        assert_eq!(open[0].follows, first);
        assert!(open[0].story().contains("follows"), "{}", open[0].story());
        // An unrelated alert follows nothing.
        inc.observe(&alert("disk", "n9", 21, &["n9"]), &mut out);
        assert_eq!(inc.open()[1].follows, None);
    }

    #[test]
    fn an_incident_opens_only_with_its_minimum_of_related_alerts() {
        let mut inc = tracker(IncidentConfig {
            min_alerts: 3,
            ..IncidentConfig::default()
        });
        let mut out = Vec::new();
        // A lone alert: never opens, never pages, counted when it resolves.
        inc.observe(&alert("disk", "n9", 5, &["n9"]), &mut out);
        assert!(inc.open().is_empty());
        inc.observe(&resolved("disk", "n9", 5, 6), &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(inc.stats().below_min, 1);
        // Three related ones: opens at the third, with all three.
        inc.observe(&alert("redis", "cluster", 10, &["n1", "n2"]), &mut out);
        inc.observe(&alert("drain_failed", "n1", 11, &["n1"]), &mut out);
        assert!(out.is_empty());
        let id = inc.observe(&alert("drain_failed", "n2", 12, &["n2"]), &mut out);
        let ev = events(&out);
        assert_eq!(ev, vec![(id.clone().unwrap(), IncidentEvent::Opened)]);
        assert_eq!(out[0].incident.as_ref().unwrap().chain.len(), 3);
        assert_eq!(inc.open().len(), 1);
        assert_eq!(inc.stats().opened, 1);
    }

    #[test]
    fn an_incident_in_its_flap_window_survives_a_restart() {
        let mut inc = tracker(IncidentConfig::default());
        let mut out = Vec::new();
        inc.observe(&alert("disk", "n9", 10, &["n9"]), &mut out);
        inc.observe(&resolved("disk", "n9", 10, 12), &mut out);
        let saved = serde_json::to_string(&inc.save()).unwrap();
        let mut again = tracker(IncidentConfig::default());
        again.restore(serde_json::from_str(&saved).unwrap());
        out.clear();
        // Firing again within the window after the restart: still a flap.
        again.observe(&alert("disk", "n9", 14, &["n9"]), &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(again.stats().flaps, 1);
        assert_eq!(again.open().len(), 1);
    }
}
