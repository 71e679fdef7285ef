//! The checkpoint form of the incident tracker: what `--state-dir` keeps
//! of open incidents (with the bookkeeping the status page does not show:
//! pending updates, the flap window, whether `min_alerts` was reached) and
//! of the recently resolved ones, so a restart goes on where it stopped.

use super::{Incident, IncidentStats, Member};
use serde::Serialize;

/// An incident as a checkpoint keeps it (with the bookkeeping the status
/// page does not show).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub(super) struct SavedIncident {
    id: String,
    pub(super) members: Vec<Member>,
    root: usize,
    start: i64,
    end: Option<i64>,
    omitted: u64,
    last_change: i64,
    sent_at: i64,
    dirty: bool,
    #[serde(default)]
    follows: Option<String>,
    #[serde(default)]
    resolving_since: Option<i64>,
    /// Checkpoints before `min_alerts` held opened incidents only.
    #[serde(default = "yes")]
    opened: bool,
}

fn yes() -> bool {
    true
}

impl SavedIncident {
    pub(super) fn of(i: &Incident) -> SavedIncident {
        SavedIncident {
            id: i.id.clone(),
            members: i.members.clone(),
            root: i.root,
            start: i.start,
            end: i.end,
            omitted: i.omitted,
            last_change: i.last_change,
            sent_at: i.sent_at,
            dirty: i.dirty,
            follows: i.follows.clone(),
            resolving_since: i.resolving_since,
            opened: i.opened,
        }
    }

    pub(super) fn incident(self) -> Incident {
        Incident {
            root: self.root.min(self.members.len().saturating_sub(1)),
            id: self.id,
            members: self.members,
            start: self.start,
            end: self.end,
            omitted: self.omitted,
            last_change: self.last_change,
            sent_at: self.sent_at,
            dirty: self.dirty,
            follows: self.follows,
            resolving_since: self.resolving_since,
            opened: self.opened,
        }
    }
}

/// The incidents in a checkpoint: every open incident (with its pending
/// update), the most recently resolved ones for the status page, the
/// counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct IncidentsState {
    pub(super) open: Vec<SavedIncident>,
    pub(super) closed: Vec<SavedIncident>,
    pub(super) stats: IncidentStats,
}
