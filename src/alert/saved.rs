//! The alerts' part of a restart and of a rule reload: every tracked alert
//! saved by rule id, restored into the rules that still exist (kept as they
//! were, adopted by a changed rule, or resolved because the rule is gone),
//! and the identity a checkpoint keeps of each rule to resolve its alerts
//! if it is gone.

use super::{assemble, render, AlertState, Alerts, Identity, Notification, Phase, Tracked};
use crate::detect::Evidence;
use crate::rules::Rule;
use serde::Serialize;
use std::collections::BTreeMap;

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

impl Alerts {
    /// The state for a checkpoint (sorted, so equal states compare equal).
    pub fn save(&self, rules: &[Rule]) -> AlertsState {
        let mut alerts: Vec<SavedTracked> = self
            .rules
            .iter()
            .enumerate()
            .filter_map(|(ri, m)| Some((rules.get(ri)?, m)))
            .flat_map(|(r, m)| {
                m.iter().map(|(key, t)| SavedTracked {
                    rule: r.id.clone(),
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
            self.of_rule(ri).insert(key, t);
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
    /// new detector does not confirm it within [`adoption_grace`](super::adoption_grace)), or
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
        let old = std::mem::take(&mut self.rules);
        let mut gone: Vec<(usize, String, i64, i64, Evidence)> = Vec::new();
        for (ri, m) in old.into_iter().enumerate() {
            for (key, mut t) in m {
                match fate.get(ri).copied().unwrap_or(Fate::Drop) {
                    Fate::Keep(n) => {
                        self.of_rule(n).insert(key, t);
                    }
                    Fate::Adopt(n) => match t.phase {
                        Phase::Firing { .. } => {
                            t.adopted = Some(i64::MIN);
                            t.inactive_since = None;
                            self.of_rule(n).insert(key, t);
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
        }
        gone.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        for (ri, key, starts_at, at, evidence) in gone {
            let Some(rule) = old_rules.get(ri) else {
                continue;
            };
            self.stats.resolved += 1;
            let mut n = render(
                rule,
                &key,
                AlertState::Resolved,
                starts_at,
                Some(at),
                &evidence,
                false,
            );
            n.at = at;
            out.push(n);
        }
    }
}
