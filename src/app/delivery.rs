//! Between the engine and the dispatcher: every alert notification passes
//! the ledger (after a restart, a notification the previous run had made
//! already takes back that run's identity), the incident tracker (which
//! may add incident-level notifications and, when grouping, labels the
//! alert with its incident), the status board of the live page, and the
//! replay's report recorder, then the dispatcher, which sends each
//! receiver the level it takes (and whose receipts drop what a receiver
//! was told before the restart). [`finish`] is the end of every run and
//! replay: the bounded drain, what was not delivered, the last counters.

use crate::alert::{FlapHold, Notification};
use crate::incident::{IncidentConfig, Incidents};
use crate::links::{LinkOptions, Linker};
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
    /// With `--state-dir`: the ledger of what was made last per alert.
    pub ledger: Option<Ledger>,
    /// Links notifications to their lines (unless `--no-links`).
    linker: Option<Linker>,
    /// `run`'s silences, when it has them.
    silences: Option<std::sync::Arc<crate::silence::SilenceBook>>,
    /// Firing alerts silenced, by fingerprint: sent if still firing when
    /// their silence ends.
    held: std::collections::BTreeMap<String, Notification>,
    /// Alert-level flap damping (the incidents' flap window, when alerts
    /// are not grouped into incidents).
    pub flaps: FlapHold,
    passed: Vec<Notification>,
    /// The held resolutions stay held at the stop (the checkpoint keeps
    /// them for the next run) instead of going out.
    keep_flaps: bool,
}

/// Most silenced firing alerts remembered for when their silence ends.
const MAX_HELD: usize = 10_000;

/// What the engine made last per alert (fingerprint): its phase and the
/// start and end of its episode, saved at once after every step that
/// notified (`state-dir/ledger.json`). A restart goes on from a
/// checkpoint up to a few seconds older and reads again the lines since,
/// so it makes some notifications again — the same alerts, but an
/// evaluation instant may differ, and with it a share alert's start. The
/// ledger gives such a notification back the start the first run sent, so
/// its incident keeps its id and every receiver's receipts recognise it
/// ([`crate::notify::Receipt::covers`]): nothing is paged twice.
pub struct Ledger {
    last: lru::LruCache<String, Made>,
    writer: crate::durable::Rewriter,
    dirty: bool,
}

/// One alert's last notification, as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Made {
    phase: String,
    starts_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ends_at: Option<String>,
}

/// Alerts the ledger remembers.
pub const LEDGER_ALERTS: usize = 4096;

impl Ledger {
    /// The ledger of a state directory (read if it exists; unreadable:
    /// logged, empty).
    pub fn open(dir: &std::path::Path) -> Ledger {
        let path = dir.join("ledger.json");
        let cap = std::num::NonZeroUsize::new(LEDGER_ALERTS).unwrap_or(std::num::NonZeroUsize::MIN);
        let mut last = lru::LruCache::new(cap);
        if let Ok(bytes) = std::fs::read(&path) {
            match serde_json::from_slice::<Vec<(String, Made)>>(&bytes) {
                Ok(v) => {
                    for (fp, m) in v {
                        last.put(fp, m);
                    }
                }
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "Ledger unreadable; starting without it.")
                }
            }
        }
        Ledger {
            last,
            writer: crate::durable::Rewriter::new(path, "ledger"),
            dirty: false,
        }
    }

    /// Gives a notification made again after a restart the identity the
    /// first one had, and records it.
    pub fn take(&mut self, n: &mut Notification) {
        use crate::decode::time::parse_rfc3339;
        if n.incident.is_some() {
            return;
        }
        if let Some(m) = self.last.peek(&n.fingerprint) {
            let ongoing = m.phase == "firing" || m.phase == "repeat";
            // An episode that started before the last one ended is that
            // episode, made again.
            let earlier = m
                .ends_at
                .as_deref()
                .and_then(parse_rfc3339)
                .is_some_and(|end| n.starts_at.ns().is_some_and(|start| start < end));
            if (ongoing || earlier) && n.starts_at.as_str() != m.starts_at {
                n.starts_at = crate::clock::Stamp::from(m.starts_at.as_str());
            }
        }
        let made = Made {
            phase: crate::notify::phase(n).to_string(),
            starts_at: n.starts_at.to_string(),
            ends_at: n.ends_at.as_ref().map(|e| e.to_string()),
        };
        if self.last.peek(&n.fingerprint) != Some(&made) {
            self.last.put(n.fingerprint.clone(), made);
            self.dirty = true;
        }
    }

    /// Writes the ledger if it changed (at once: it must be on disk before
    /// the next step can be lost).
    pub fn save(&mut self) {
        if !self.dirty {
            return;
        }
        let v: Vec<(&String, &Made)> = self.last.iter().rev().collect();
        if let Ok(bytes) = serde_json::to_vec(&v) {
            if self.writer.write(&bytes) == crate::durable::Outcome::Written {
                self.dirty = false;
            }
        }
    }
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
        let mut flaps = FlapHold::new(if grouping { 0 } else { cfg.flap_window });
        flaps.set_rules(set.rules.iter().map(|r| r.id.as_str()));
        Delivery {
            dispatcher,
            flaps,
            passed: Vec::new(),
            keep_flaps: false,
            incidents: Incidents::new(set, cfg),
            board: Board::default(),
            recorder: None,
            grouping,
            scratch: Vec::new(),
            ledger: None,
            linker: None,
            silences: None,
            held: std::collections::BTreeMap::new(),
        }
    }

    /// The resolutions held for their flap window, for the status page:
    /// rule, group, when it resolved and until when it is held.
    pub fn flap_status(&self) -> serde_json::Value {
        let window = self.flaps.window();
        self.flaps
            .held()
            .map(|n| {
                serde_json::json!({
                    "rule": n.rule,
                    "group": n.group,
                    "severity": n.severity,
                    "starts_at": n.starts_at.as_str(),
                    "resolved_at": n.ends_at.as_ref().map(|e| e.to_string()),
                    "held_until": crate::clock::format_rfc3339(n.at.saturating_add(window)),
                })
            })
            .collect()
    }

    /// Also holds back what `book`'s silences cover.
    pub fn with_silences(mut self, book: std::sync::Arc<crate::silence::SilenceBook>) -> Delivery {
        self.silences = Some(book);
        self
    }

    /// The silences, when this delivery has them.
    pub fn silence_book(&self) -> Option<&crate::silence::SilenceBook> {
        self.silences.as_deref()
    }

    /// Whether `n` is silenced now. A silenced firing alert (or opened
    /// incident) is remembered; its resolution is held back only if its
    /// firing was: a page that went out always gets its resolution.
    fn silenced(&mut self, n: &Notification) -> bool {
        let Some(book) = &self.silences else {
            return false;
        };
        if n.state == crate::alert::AlertState::Resolved {
            if self.held.remove(&n.fingerprint).is_some() {
                book.count();
                return true;
            }
            return false;
        }
        if book.silencing(n, crate::clock::wall_ns()).is_none() {
            return false;
        }
        book.count();
        // Held: the first page of an episode (a firing alert, an opened
        // incident) and what follows it while it is held; never what
        // follows a page that went out.
        let first = match &n.incident {
            Some(i) => i.event == crate::alert::IncidentEvent::Opened,
            None => !n.repeat,
        } || self.held.contains_key(&n.fingerprint);
        if first && (self.held.len() < MAX_HELD || self.held.contains_key(&n.fingerprint)) {
            self.held.insert(n.fingerprint.clone(), n.clone());
        }
        true
    }

    /// The silenced alerts still firing whose silence has ended: sent now.
    async fn release_held(&mut self) {
        let Some(book) = self.silences.clone() else {
            return;
        };
        if self.held.is_empty() {
            return;
        }
        let now = crate::clock::wall_ns();
        let free: Vec<String> = self
            .held
            .iter()
            .filter(|(_, n)| book.silencing(n, now).is_none())
            .map(|(k, _)| k.clone())
            .collect();
        for k in free {
            if let Some(n) = self.held.remove(&k) {
                self.dispatcher.dispatch(n).await;
            }
        }
    }

    /// Also links every notification to its lines.
    pub fn with_links(mut self, set: &RuleSet, opts: Option<LinkOptions>) -> Delivery {
        self.linker = opts.map(|o| Linker::new(set, o));
        self
    }

    /// Also records what the report needs.
    pub fn with_recorder(mut self, set: &RuleSet) -> Delivery {
        self.recorder = Some(Recorder::new(set));
        self
    }

    /// Also records the live report of `run` (`/report`).
    pub fn record_live(&mut self, set: &RuleSet) {
        self.recorder = Some(Recorder::live(set));
    }

    /// New rules: new links for incidents still to come.
    pub fn set_rules(&mut self, set: &RuleSet) {
        self.incidents.set_rules(set);
        self.flaps
            .set_rules(set.rules.iter().map(|r| r.id.as_str()));
        if let Some(l) = self.linker.as_mut() {
            l.set_rules(set);
        }
    }

    /// Hands the engine's notifications on, in order; `now` (event time)
    /// releases incident updates that were held back.
    pub async fn deliver(&mut self, out: &mut Vec<Notification>, now: Option<i64>) {
        for mut n in out.drain(..) {
            if let Some(l) = &self.linker {
                l.attach(&mut n);
            }
            if let Some(l) = self.ledger.as_mut() {
                l.take(&mut n);
            }
            let id = self.incidents.observe(&n, &mut self.scratch);
            if self.grouping {
                if let Some(id) = id {
                    n.labels.insert("incident".to_string(), id);
                }
            }
            if let Some(r) = self.recorder.as_mut() {
                r.alert(&n);
            }
            let mut passed = std::mem::take(&mut self.passed);
            self.flaps.observe(n, &mut passed);
            self.send_alerts(&mut passed).await;
            self.passed = passed;
            self.send_incidents().await;
        }
        if let Some(now) = now {
            let mut passed = std::mem::take(&mut self.passed);
            self.flaps.tick(now, &mut passed);
            self.send_alerts(&mut passed).await;
            self.passed = passed;
            self.incidents.tick(now, &mut self.scratch);
            self.send_incidents().await;
        }
        self.release_held().await;
        // After the spools took them: on disk before the next step.
        if let Some(l) = self.ledger.as_mut() {
            l.save();
        }
    }

    /// A state directory keeps the held resolutions across the stop: the
    /// next run sends them when their window ends, or takes them back when
    /// the alert fires again; [`Delivery::flush`] leaves them.
    pub fn keep_flaps_at_stop(&mut self) {
        self.keep_flaps = true;
    }

    /// End of input: the resolutions (unless a state directory keeps
    /// them) and incident updates still held back.
    pub async fn flush(&mut self) {
        let mut passed = std::mem::take(&mut self.passed);
        if !self.keep_flaps {
            self.flaps.finish(&mut passed);
        }
        self.send_alerts(&mut passed).await;
        self.incidents.finish(&mut self.scratch);
        self.send_incidents().await;
    }

    /// Alert notifications past the flap hold: on the status board, then
    /// to the receivers unless silenced.
    async fn send_alerts(&mut self, passed: &mut Vec<Notification>) {
        for n in passed.drain(..) {
            self.board.alert(&n);
            if !self.silenced(&n) {
                self.dispatcher.dispatch(n).await;
            }
        }
    }

    async fn send_incidents(&mut self) {
        // Without grouping the dispatcher sends incident notifications
        // nowhere: skip them here.
        if !self.grouping {
            self.scratch.clear();
            return;
        }
        for n in std::mem::take(&mut self.scratch) {
            if !self.silenced(&n) {
                self.dispatcher.dispatch(n).await;
            }
        }
    }
}
/// The end of a run or replay: drains deliveries (bounded by the shutdown
/// timeout), logs what was not delivered and the input's counters, and
/// prints `--stats`. Returns how many notifications were not delivered
/// (rejected, or dropped: a full queue, or left at the stop with no spool).
pub async fn finish(
    p: &super::PipelineOptions,
    engine: &crate::engine::Engine,
    mut delivery: Delivery,
) -> u64 {
    delivery.flush().await;
    let d = delivery.dispatcher;
    let timeout = std::time::Duration::from_nanos(p.shutdown_timeout.ns().max(0) as u64);
    // Counters are read after the drain: a rejection during it counts.
    let stats = d.snapshot_reader();
    let left = d.shutdown(timeout).await;
    if !left.is_empty() {
        tracing::warn!(receivers = ?left, "Shutdown timeout reached with notifications still queued.");
    }
    let s = engine.stats();
    tracing::info!(
        lines = s.decode.lines,
        hits = s.hits,
        firing = s.alerts.firing,
        resolved = s.alerts.resolved,
        malformed = s.decode.malformed,
        late = s.late,
        "Input finished."
    );
    let receivers = stats();
    for r in &receivers {
        if r.failed > 0 || r.dropped > 0 {
            tracing::warn!(receiver = %r.name, sent = r.sent, failed = r.failed, dropped = r.dropped, "Some notifications were not delivered.");
        }
    }
    if p.stats {
        // Not eprintln!: a stderr that cannot be written (a full disk)
        // must not turn the end of a run into a panic.
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{}", stats_json(&s, &receivers));
    }
    receivers.iter().map(|r| r.failed + r.dropped).sum()
}

/// `--stats`: every counter the logs mention, in one JSON object — the
/// engine's, the readers' (lines cut, lines repaired from invalid UTF-8),
/// failed state writes, and each receiver's deliveries.
pub fn stats_json(
    s: &crate::engine::Stats,
    receivers: &[crate::notify::ReceiverSnapshot],
) -> String {
    let mut v = serde_json::to_value(s).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "input".into(),
            serde_json::json!({
                "truncated_lines": crate::stats::truncated_lines(),
                "invalid_utf8_lines": crate::stats::invalid_utf8_lines(),
            }),
        );
        o.insert(
            "state_write_errors".into(),
            crate::durable::write_errors().into(),
        );
        o.insert(
            "receivers".into(),
            serde_json::to_value(receivers).unwrap_or_default(),
        );
    }
    v.to_string()
}
