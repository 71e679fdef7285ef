//! One incident and how it reads: its alerts (members), the root that
//! names it, the story on-call gets ("Redis went away from 6 nodes, then
//! each failed to drain…"), the nodes still affected, and the
//! notification it becomes. The tracker in `mod.rs` decides which alerts
//! belong together and when an incident opens and resolves.

use super::INCIDENT_RULE;
use crate::alert::{
    fingerprint, AlertState, ChainLink, IncidentEvent, IncidentInfo, Notification, TopGroup,
};
use crate::clock::{format_rfc3339, Stamp};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// One alert of an incident.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Member {
    /// Rule id.
    pub rule: String,
    /// Rule title.
    pub title: String,
    /// Severity.
    pub severity: String,
    /// Group or partition.
    pub group: String,
    /// Firing or resolved.
    pub state: AlertState,
    /// Start (ns).
    pub starts_at: i64,
    /// End (ns), once resolved.
    pub ends_at: Option<i64>,
    /// The rendered summary.
    pub summary: String,
    /// The alert's fingerprint.
    pub fingerprint: String,
    /// The nodes it speaks for.
    pub nodes: Vec<String>,
    /// Whether it is a cluster-wide alert.
    pub cluster: bool,
    /// Its sample lines.
    pub samples: Vec<String>,
    /// The links to its lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<crate::alert::Links>,
}

/// Alerts that belong together.
#[derive(Debug, Clone, Serialize)]
pub struct Incident {
    /// Stable id: `inc-` and 8 hex digits of the first alert and its start.
    pub id: String,
    /// The alerts, in the order they joined (the chain sorts them by start).
    pub members: Vec<Member>,
    /// Index of the root alert in `members`.
    pub root: usize,
    /// Start: the first alert's start (ns).
    pub start: i64,
    /// End (ns), once every alert resolved.
    pub end: Option<i64>,
    /// Alerts beyond the chain's bound.
    pub omitted: u64,
    /// The resolved incident of the same chain this one follows (an alert
    /// related to it arrived after it resolved).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follows: Option<String>,
    /// When its last alert resolved, while the flap window runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolving_since: Option<i64>,
    /// Whether it has opened (held `min_alerts` alerts): only an opened
    /// incident pages and is listed.
    #[serde(skip)]
    pub(super) opened: bool,
    #[serde(skip)]
    pub(super) last_change: i64,
    #[serde(skip)]
    pub(super) sent_at: i64,
    #[serde(skip)]
    pub(super) dirty: bool,
}

fn severity_rank(s: &str) -> u8 {
    match s {
        "critical" => 3,
        "warning" => 2,
        "info" => 1,
        _ => 0,
    }
}

impl Incident {
    /// Whether any alert still fires.
    pub fn firing(&self) -> bool {
        self.members.iter().any(|m| m.state == AlertState::Firing)
    }

    /// The root alert: the cause the others follow.
    pub fn root(&self) -> Option<&Member> {
        self.members.get(self.root)
    }

    /// The incident's title: its root alert's.
    pub fn title(&self) -> String {
        self.root().map(|r| r.title.clone()).unwrap_or_default()
    }

    /// The highest severity of its alerts.
    pub fn severity(&self) -> String {
        self.members
            .iter()
            .map(|m| m.severity.as_str())
            .max_by_key(|s| severity_rank(s))
            .unwrap_or("info")
            .to_string()
    }

    /// Every node it touched, sorted.
    pub fn nodes(&self) -> Vec<String> {
        let set: BTreeSet<&String> = self.members.iter().flat_map(|m| &m.nodes).collect();
        set.into_iter().cloned().collect()
    }

    /// The nodes with an alert still firing, sorted.
    pub fn affected(&self) -> Vec<String> {
        let set: BTreeSet<&String> = self
            .members
            .iter()
            .filter(|m| m.state == AlertState::Firing)
            .flat_map(|m| &m.nodes)
            .collect();
        set.into_iter().cloned().collect()
    }

    /// The alerts in the order they started.
    pub fn chain(&self) -> Vec<&Member> {
        let mut v: Vec<&Member> = self.members.iter().collect();
        v.sort_by(|a, b| a.starts_at.cmp(&b.starts_at).then(a.rule.cmp(&b.rule)));
        v
    }

    /// One line: the rules in the order they first fired, with their node
    /// counts, and how many nodes are affected.
    pub fn story(&self) -> String {
        // (title, nodes, cluster-wide, any still firing)
        let mut steps: Vec<(String, BTreeSet<String>, bool, bool)> = Vec::new();
        for m in self.chain() {
            let firing = m.state == AlertState::Firing;
            match steps.iter_mut().find(|s| s.0 == m.title) {
                Some(s) => {
                    s.1.extend(m.nodes.iter().cloned());
                    s.3 |= firing;
                }
                None => steps.push((
                    m.title.clone(),
                    m.nodes.iter().cloned().collect(),
                    m.cluster,
                    firing,
                )),
            }
        }
        let parts: Vec<String> = steps
            .iter()
            .map(|(title, nodes, cluster, firing)| {
                let step = match (nodes.len(), cluster) {
                    (_, true) | (0, _) => title.clone(),
                    (1, false) => format!("{title} on {}", nodes.iter().next().map_or("", |s| s)),
                    (n, false) => format!("{title} on {n} nodes"),
                };
                if *firing || !self.firing() {
                    step
                } else {
                    format!("{step} (recovered)")
                }
            })
            .collect();
        let tail = affected_text(self.nodes().len(), self.affected().len(), self.firing());
        match &self.follows {
            Some(old) => format!("{} — {tail} (again: follows {old})", parts.join(" → ")),
            None => format!("{} — {tail}", parts.join(" → ")),
        }
    }

    /// The incident part of a notification.
    pub fn info(&self, event: IncidentEvent) -> IncidentInfo {
        IncidentInfo {
            id: self.id.clone(),
            event,
            root: self.root().map(|r| r.rule.clone()).unwrap_or_default(),
            chain: self
                .chain()
                .into_iter()
                .map(|m| ChainLink {
                    rule: m.rule.clone(),
                    title: m.title.clone(),
                    severity: m.severity.clone(),
                    group: m.group.clone(),
                    state: m.state,
                    starts_at: Stamp::at(m.starts_at),
                    ends_at: m.ends_at.map(Stamp::at),
                    summary: m.summary.clone(),
                    fingerprint: m.fingerprint.clone(),
                })
                .collect(),
            nodes: self.nodes(),
            affected: self.affected(),
            omitted: self.omitted,
        }
    }

    /// [`Incident::notification`] made at event time `at` (its `at`).
    pub fn notification_at(&self, event: IncidentEvent, at: i64) -> Notification {
        let mut n = self.notification(event);
        n.at = at;
        n
    }

    /// The incident-level notification: rule `incident`, group the id, one
    /// fingerprint per incident (PagerDuty's dedup key, Slack's thread).
    pub fn notification(&self, event: IncidentEvent) -> Notification {
        let severity = self.severity();
        let mut labels = BTreeMap::new();
        labels.insert("alertname".to_string(), INCIDENT_RULE.to_string());
        labels.insert("severity".to_string(), severity.clone());
        labels.insert("group".to_string(), self.id.clone());
        labels.insert("incident".to_string(), self.id.clone());
        let mut annotations = BTreeMap::new();
        annotations.insert("summary".to_string(), self.story());
        if let Some(r) = self.root() {
            annotations.insert("root".to_string(), r.summary.clone());
        }
        let chain: Vec<String> = self
            .chain()
            .iter()
            .map(|m| {
                format!(
                    "{} {} {} {} — {}",
                    format_rfc3339(m.starts_at),
                    match m.state {
                        AlertState::Firing => "firing",
                        AlertState::Resolved => "resolved",
                    },
                    m.rule,
                    m.group,
                    m.summary
                )
            })
            .collect();
        annotations.insert("chain".to_string(), chain.join("\n"));
        let mut per_node: BTreeMap<&str, u64> = BTreeMap::new();
        for m in &self.members {
            for n in &m.nodes {
                *per_node.entry(n).or_default() += 1;
            }
        }
        let mut top_groups: Vec<TopGroup> = per_node
            .into_iter()
            .map(|(g, c)| TopGroup {
                group: g.to_string(),
                count: c,
            })
            .collect();
        top_groups.sort_by(|a, b| b.count.cmp(&a.count).then(a.group.cmp(&b.group)));
        let last = self
            .members
            .iter()
            .map(|m| m.ends_at.unwrap_or(m.starts_at))
            .max();
        Notification {
            state: if event == IncidentEvent::Resolved {
                AlertState::Resolved
            } else {
                AlertState::Firing
            },
            rule: INCIDENT_RULE.to_string(),
            title: self.title(),
            severity,
            group: self.id.clone(),
            labels,
            annotations,
            starts_at: Stamp::at(self.start),
            ends_at: self.end.map(Stamp::at),
            count: self.members.len() as u64 + self.omitted,
            first_seen: Some(Stamp::at(self.start)),
            last_seen: last.map(Stamp::at),
            top_groups,
            share: None,
            samples: self.root().map(|r| r.samples.clone()).unwrap_or_default(),
            template: None,
            fingerprint: fingerprint(INCIDENT_RULE, &self.id),
            repeat: false,
            incident: Some(self.info(event)),
            links: self.root().and_then(|r| r.links.clone()),
            origins: Vec::new(),
            at: 0,
        }
    }
}

/// `n nodes`, `1 node`.
pub fn nodes_text(n: usize) -> String {
    if n == 1 {
        "1 node".to_string()
    } else {
        format!("{n} nodes")
    }
}

/// How many nodes an incident touched and how many are still affected, in
/// words: "6 nodes, all still affected", "6 nodes affected: 2 still, 4
/// recovered", "3 nodes affected, all recovered".
pub fn affected_text(nodes: usize, affected: usize, firing: bool) -> String {
    match (nodes, firing) {
        (0, true) => "still firing".to_string(),
        (0, false) => "recovered".to_string(),
        (1, true) if affected == 1 => "1 node, still affected".to_string(),
        (n, true) if affected == n => format!("{n} nodes, all still affected"),
        (n, true) => format!(
            "{} affected: {affected} still, {} recovered",
            nodes_text(n),
            n - affected
        ),
        (n, false) => format!("{} affected, all recovered", nodes_text(n)),
    }
}
