//! Between the engine and the dispatcher: every alert notification passes
//! the incident tracker (which may add incident-level notifications and,
//! when grouping, labels the alert with its incident), the status board of
//! the live page, and the replay's report recorder, then the dispatcher,
//! which sends each receiver the level it takes.

use crate::alert::Notification;
use crate::incident::{IncidentConfig, Incidents};
use crate::notify::Dispatcher;
use crate::report::{Board, Recorder};
use crate::rules::RuleSet;

/// The delivery side of a pipeline.
pub struct Delivery {
    /// The receivers' lanes.
    pub dispatcher: Dispatcher,
    /// Incidents, always tracked (the status page and the report show them).
    pub incidents: Incidents,
    /// Firing alerts, for the status page.
    pub board: Board,
    /// The replay's report, when asked for.
    pub recorder: Option<Recorder>,
    grouping: bool,
    scratch: Vec<Notification>,
}

impl Delivery {
    /// Delivery through `dispatcher` for the rules of `set`; `grouping`
    /// sends incident-level notifications instead of alerts.
    pub fn new(
        mut dispatcher: Dispatcher,
        set: &RuleSet,
        cfg: IncidentConfig,
        grouping: bool,
    ) -> Delivery {
        dispatcher.set_grouping(grouping);
        Delivery {
            dispatcher,
            incidents: Incidents::new(set, cfg),
            board: Board::default(),
            recorder: None,
            grouping,
            scratch: Vec::new(),
        }
    }

    /// Also records what the report needs.
    pub fn with_recorder(mut self, set: &RuleSet) -> Delivery {
        self.recorder = Some(Recorder::new(set));
        self
    }

    /// New rules: new links for incidents still to come.
    pub fn set_rules(&mut self, set: &RuleSet) {
        self.incidents.set_rules(set);
    }

    /// Hands the engine's notifications on, in order; `now` (event time)
    /// releases incident updates that were held back.
    pub async fn deliver(&mut self, out: &mut Vec<Notification>, now: Option<i64>) {
        for mut n in out.drain(..) {
            let id = self.incidents.observe(&n, &mut self.scratch);
            if self.grouping {
                if let Some(id) = id {
                    n.labels.insert("incident".to_string(), id);
                }
            }
            self.board.alert(&n);
            if let Some(r) = self.recorder.as_mut() {
                r.alert(&n);
            }
            self.dispatcher.dispatch(n).await;
            self.send_incidents().await;
        }
        if let Some(now) = now {
            self.incidents.tick(now, &mut self.scratch);
            self.send_incidents().await;
        }
    }

    /// End of input: the incident updates still held back.
    pub async fn flush(&mut self) {
        self.incidents.finish(&mut self.scratch);
        self.send_incidents().await;
    }

    async fn send_incidents(&mut self) {
        // Without grouping the dispatcher sends incident notifications
        // nowhere: skip them here.
        if !self.grouping {
            self.scratch.clear();
            return;
        }
        for n in std::mem::take(&mut self.scratch) {
            self.dispatcher.dispatch(n).await;
        }
    }
}
