//! The engine across a restart: the checkpoint of every detector, alert,
//! stream and clock (saved with the input positions it belongs to, see
//! `app::checkpoint`), its restore into a fresh engine, and the mined
//! templates of novelty.

use super::{novelty_rule, rule_index, Engine};
use crate::alert::{self, Notification};
use crate::decode;
use crate::detect;
use crate::mining::{watch::Watch, MinerState};
use serde::Serialize;

/// One rule's detector in a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct SavedRule {
    /// The rule's identity, to resolve its alerts if it is gone.
    #[serde(flatten)]
    pub card: alert::RuleCard,
    /// A digest of everything that shapes the detector's state (see
    /// [`crate::rules::RuleSet::detection_signature`]) and its group bound: state is
    /// restored only into the same detection.
    pub detection: String,
    /// The detector's state.
    pub detector: serde_json::Value,
}

/// The engine in a checkpoint (`--state-dir`): every detector's state,
/// every tracked alert, the streams' context and the clocks, so a restart
/// goes on where the previous run stopped.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct EngineState {
    /// Per rule.
    pub rules: Vec<SavedRule>,
    /// Pending and firing alerts.
    pub alerts: alert::AlertsState,
    /// Streams: sticky values and times.
    pub streams: decode::StreamsState,
    /// Earliest event time (ns).
    pub min_time: i64,
    /// Latest event time (ns).
    pub max_time: Option<i64>,
    /// Time of untimed lines while none had a time.
    pub untimed_at: Option<i64>,
    /// Watermark (ns).
    pub watermark: i64,
    /// Last evaluation tick (ns).
    pub last_tick: i64,
}

/// What restoring a checkpoint did (see [`Engine::restore_checkpoint`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RestoreSummary {
    /// Rules whose detector state was restored.
    pub kept: usize,
    /// Rules whose detection changed since (fresh detector; firing alerts adopted).
    pub changed: usize,
    /// Rules not in the checkpoint (fresh).
    pub added: usize,
    /// Rules of the checkpoint that are gone (their firing alerts resolved).
    pub removed: usize,
    /// Alerts restored (pending and firing, or adopted).
    pub alerts: usize,
    /// Firing alerts resolved because their rule is gone.
    pub resolved: usize,
    /// Rules whose saved state could not be read (started fresh, logged).
    pub unreadable: Vec<String>,
}

impl Engine {
    /// The digest of a rule's detection and group bound.
    fn detection_digest(&self, ri: usize) -> String {
        use std::hash::Hasher;
        let mut h = fnv::FnvHasher::default();
        h.write(self.rules.detection_signature(ri).as_bytes());
        h.write(&self.rules.rules[ri].max_groups.to_le_bytes());
        format!("{:016x}", h.finish())
    }

    /// Everything a restart needs to go on where this run is (see
    /// [`EngineState`]). A detector whose state cannot be written is left
    /// out (logged): it starts fresh after a restart.
    pub fn checkpoint(&self) -> EngineState {
        let rules = self
            .rules
            .rules
            .iter()
            .enumerate()
            .filter_map(|(ri, r)| match self.detectors[ri].save_state() {
                Ok(detector) => Some(SavedRule {
                    card: alert::RuleCard::of(r),
                    detection: self.detection_digest(ri),
                    detector,
                }),
                Err(e) => {
                    tracing::warn!(rule = %r.id, error = %e, "Detector state left out of the checkpoint; it starts fresh after a restart.");
                    None
                }
            })
            .collect();
        EngineState {
            rules,
            alerts: self.alerts.save(&self.rules.rules),
            streams: self.decoder.streams_state(),
            min_time: self.min_time,
            max_time: self.max_time,
            untimed_at: self.untimed_at,
            watermark: self.watermark,
            last_tick: self.last_tick,
        }
    }

    /// Restores a [`Engine::checkpoint`] into a fresh engine. Per rule id:
    /// the same detection takes its saved detector state and alerts as
    /// they were; a changed detection starts fresh and adopts its firing
    /// alerts (no second page; resolved if not confirmed within
    /// [`alert::adoption_grace`]); a rule that is gone has its firing alerts
    /// resolved into `out` (receivers must not keep an alert nobody will
    /// resolve).
    pub fn restore_checkpoint(
        &mut self,
        state: EngineState,
        out: &mut Vec<Notification>,
    ) -> RestoreSummary {
        let mut summary = RestoreSummary::default();
        let index = rule_index(&self.rules);
        let mut fates: std::collections::HashMap<String, alert::Restore> =
            std::collections::HashMap::new();
        let mut cards: std::collections::HashMap<String, alert::RuleCard> =
            std::collections::HashMap::new();
        for saved in state.rules {
            let id = saved.card.id.clone();
            let fate = match index.get(id.as_str()) {
                None => {
                    summary.removed += 1;
                    alert::Restore::Drop
                }
                Some(&ri) if saved.detection == self.detection_digest(ri) => {
                    match self.detectors[ri].load_state(saved.detector) {
                        Ok(()) => {
                            summary.kept += 1;
                            alert::Restore::Keep(ri)
                        }
                        Err(e) => {
                            tracing::warn!(rule = %id, error = %e, "Saved detector state unreadable; the rule starts fresh (its firing alerts are adopted).");
                            self.detectors[ri] = detect::build(&self.rules.rules[ri]);
                            summary.unreadable.push(id.clone());
                            alert::Restore::Adopt(ri)
                        }
                    }
                }
                Some(&ri) => {
                    summary.changed += 1;
                    alert::Restore::Adopt(ri)
                }
            };
            fates.insert(id.clone(), fate);
            cards.insert(id, saved.card);
        }
        summary.added = self
            .rules
            .rules
            .len()
            .saturating_sub(summary.kept + summary.changed + summary.unreadable.len());
        let (orphans, restored) = self.alerts.restore(state.alerts, |id| {
            fates
                .get(id)
                .copied()
                .unwrap_or_else(|| match index.get(id) {
                    Some(&ri) => alert::Restore::Adopt(ri),
                    None => alert::Restore::Drop,
                })
        });
        summary.alerts = restored;
        let at = state.max_time.unwrap_or(state.watermark);
        for o in orphans {
            let card = cards
                .get(&o.rule)
                .cloned()
                .unwrap_or_else(|| alert::RuleCard {
                    id: o.rule.clone(),
                    title: o.rule.clone(),
                    severity: "warning".into(),
                    labels: Default::default(),
                });
            let at = if at == i64::MIN { o.notified_at } else { at };
            tracing::info!(rule = %o.rule, group = %o.key, "A rule of the previous run is gone: its firing alert is resolved.");
            out.push(alert::render_orphan(&card, &o, at));
            self.alerts.count_resolved();
            summary.resolved += 1;
        }
        self.decoder.restore_streams(state.streams);
        self.min_time = self.min_time.min(state.min_time);
        self.max_time = match (self.max_time, state.max_time) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.untimed_at = self.untimed_at.or(state.untimed_at);
        self.watermark = self.watermark.max(state.watermark);
        self.last_tick = self.last_tick.max(state.last_tick);
        self.reschedule_all();
        summary
    }

    /// The mined templates with the novelty state, to save across a
    /// restart (`--state-dir`); None when novelty is off.
    pub fn templates_state(&self) -> Option<MinerState> {
        self.novelty.as_ref().map(|(_, w)| w.state())
    }

    /// Starts novelty from saved templates (a baseline from `sigwatch
    /// learn`, or a previous run's state). Returns the number of templates
    /// loaded (0 when novelty is off).
    pub fn load_templates(&mut self, state: &MinerState) -> usize {
        let Some((ri, _)) = self.novelty.as_ref() else {
            return 0;
        };
        let ri = *ri;
        let Some((_, spec)) = novelty_rule(&self.rules) else {
            return 0;
        };
        let w = Watch::restore(spec, state);
        let n = w.miner().len();
        self.novelty = Some((ri, w));
        n
    }

    /// Marks novelty template `id` as known for good (`templates
    /// --known`): it is no longer new and never will be. Returns its text;
    /// None when novelty is off or no such template is kept.
    pub fn know_template(&mut self, id: u64) -> Option<String> {
        self.novelty.as_mut().and_then(|(_, w)| w.know(id))
    }
}
