//! The dispatcher: one lane per receiver, routing (incident-level
//! notifications to the receivers that take them, routes by label), the
//! spools loaded at start, and a bounded shutdown.

use super::lane::{
    lane_worker, snapshots_of, DeliveryStats, Lane, LaneConfig, LaneQueue, LaneShared,
    ReceiverSnapshot,
};
use super::spool::{load_spool, spool_path};
use super::{route, Receiver};
use crate::alert::Notification;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Fans notifications out to receivers, each through its own lane.
pub struct Dispatcher {
    pub(super) lanes: Vec<Lane>,
    pub(super) wait_when_full: bool,
    pub(super) router: Option<route::Router>,
    pub(super) grouping: bool,
}

impl Dispatcher {
    /// Starts one lane per receiver with its kind's settings
    /// ([`Receiver::lane`]) and this queue capacity. With
    /// `wait_when_full`, [`Dispatcher::dispatch`] waits for room and
    /// replaces nothing (replay: the output is the same at any speed);
    /// otherwise a full queue drops its oldest notification (live).
    pub fn new(
        receivers: Vec<Arc<dyn Receiver>>,
        queue: usize,
        wait_when_full: bool,
    ) -> Dispatcher {
        let lanes = receivers
            .into_iter()
            .map(|r| {
                let cfg = LaneConfig { queue, ..r.lane() };
                (r, cfg)
            })
            .collect();
        Dispatcher::with_lanes(lanes, wait_when_full)
    }

    /// Starts one lane per (receiver, settings).
    pub fn with_lanes(
        receivers: Vec<(Arc<dyn Receiver>, LaneConfig)>,
        wait_when_full: bool,
    ) -> Dispatcher {
        Dispatcher::with_spool(receivers, wait_when_full, None)
    }

    /// Like [`Dispatcher::with_lanes`], persisting each lane's queue under
    /// `state_dir/spool/` and first re-queueing what a previous run left
    /// there, so a restart (even kill -9) loses no undelivered notification.
    pub fn with_spool(
        receivers: Vec<(Arc<dyn Receiver>, LaneConfig)>,
        wait_when_full: bool,
        state_dir: Option<&std::path::Path>,
    ) -> Dispatcher {
        // Names are what logs and metrics show: two receivers of one kind
        // and host get a number each.
        let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        let names: Vec<String> = receivers
            .iter()
            .map(|(r, _)| {
                let n = seen.entry(r.name().to_string()).or_insert(0);
                *n += 1;
                match *n {
                    1 => r.name().to_string(),
                    k => format!("{} #{k}", r.name()),
                }
            })
            .collect();
        let lanes = receivers
            .into_iter()
            .zip(names)
            .map(|((r, cfg), name)| {
                let spool = state_dir.map(|d| spool_path(d, &name, &r.identity()));
                let mut queue = LaneQueue {
                    keep_every: wait_when_full,
                    ..LaneQueue::default()
                };
                if let Some(path) = &spool {
                    let (left, receipts) = load_spool(path);
                    if !left.is_empty() {
                        tracing::info!(
                            receiver = %name,
                            notifications = left.len(),
                            "Re-queueing notifications spooled by a previous run."
                        );
                    }
                    for (fp, r) in receipts {
                        queue.remember(fp, r);
                    }
                    for n in left {
                        let (key, _) = queue.place(&n);
                        if !queue.items.contains_key(&key) {
                            queue.order.push_back(key.clone());
                        }
                        queue.items.insert(key, Arc::new(n));
                    }
                }
                let shared = Arc::new(LaneShared {
                    name: name.clone(),
                    cap: cfg.queue,
                    fallback: std::sync::OnceLock::new(),
                    failing: AtomicBool::new(false),
                    gone: AtomicBool::new(false),
                    spool: spool
                        .map(|p| std::sync::Mutex::new(crate::durable::Rewriter::new(p, "spool"))),
                    spool_dirty: AtomicBool::new(false),
                    q: std::sync::Mutex::new(queue),
                    wake: tokio::sync::Notify::new(),
                    space: tokio::sync::Notify::new(),
                    stats: DeliveryStats::default(),
                });
                let takes_incidents = r.takes_incidents();
                let task = tokio::spawn(lane_worker(r, shared.clone(), cfg));
                Lane {
                    name,
                    shared,
                    task,
                    takes_incidents,
                }
            })
            .collect();
        Dispatcher {
            lanes,
            wait_when_full,
            router: None,
            grouping: false,
        }
    }

    /// Incident grouping: incident-level notifications go to the receivers
    /// that take them, alerts to the others (Alertmanager). Without it,
    /// alerts go everywhere and incident notifications nowhere.
    pub fn set_grouping(&mut self, on: bool) {
        self.grouping = on;
    }

    /// After [`super::FALLBACK_AFTER`] consecutive failures of receiver `primary`,
    /// its notifications also go to receiver `fallback` (indices in the
    /// order given at construction).
    pub fn set_fallback(&self, primary: usize, fallback: usize) {
        if let (Some(p), Some(f)) = (self.lanes.get(primary), self.lanes.get(fallback)) {
            if primary != fallback {
                let _ = p.shared.fallback.set(f.shared.clone());
            }
        }
    }

    /// Sends each notification only to the receivers its route selects
    /// (receiver indices in the order given at construction).
    pub fn set_router(&mut self, router: route::Router) {
        self.router = Some(router);
    }

    /// Queues a notification for the receivers its route selects (every
    /// receiver when there is no router).
    pub async fn dispatch(&self, n: Notification) {
        let targets: Option<Vec<usize>> = self.router.as_ref().map(|r| r.select(&n));
        let n = Arc::new(n);
        let incident = n.incident.is_some();
        for (li, lane) in self.lanes.iter().enumerate() {
            if targets.as_ref().is_some_and(|t| !t.contains(&li)) {
                continue;
            }
            let wanted = if self.grouping {
                lane.takes_incidents == incident
            } else {
                !incident
            };
            if !wanted {
                continue;
            }
            loop {
                let space = lane.shared.space.notified();
                if lane.shared.try_enqueue(&n, !self.wait_when_full) {
                    break;
                }
                space.await;
            }
            lane.shared.persist();
            lane.shared.wake.notify_one();
        }
    }

    /// Whether every receiver is gone for good (stdout closed and no other
    /// receiver): nothing the pipeline makes can reach anyone any more.
    pub fn all_gone(&self) -> bool {
        !self.lanes.is_empty()
            && self
                .lanes
                .iter()
                .all(|l| l.shared.gone.load(Ordering::Relaxed))
    }

    /// Per-receiver counters and queue depth, for `/metrics` and `/readyz`.
    pub fn snapshots(&self) -> Vec<ReceiverSnapshot> {
        self.snapshot_reader()()
    }

    /// A reader of [`Dispatcher::snapshots`] that outlives the dispatcher,
    /// to read them after [`Dispatcher::shutdown`] has drained the queues.
    pub fn snapshot_reader(&self) -> impl Fn() -> Vec<ReceiverSnapshot> + Send + Sync {
        let lanes: Vec<(String, Arc<LaneShared>)> = self
            .lanes
            .iter()
            .map(|l| (l.name.clone(), l.shared.clone()))
            .collect();
        move || snapshots_of(&lanes)
    }

    /// Closes the queues and waits up to `timeout` for them to drain. What is
    /// left stays in the spool (or, without one, is counted as dropped) and is
    /// logged; returns the receivers that did not finish in time.
    pub async fn shutdown(self, timeout: Duration) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + timeout;
        for lane in &self.lanes {
            if let Ok(mut q) = lane.shared.q.lock() {
                q.closed = true;
            }
            lane.shared.wake.notify_one();
        }
        let mut unfinished = Vec::new();
        for mut lane in self.lanes {
            if tokio::time::timeout_at(deadline, &mut lane.task)
                .await
                .is_err()
            {
                lane.task.abort();
                let left = lane.shared.q.lock().map(|q| q.order.len()).unwrap_or(0) as u64;
                if lane.shared.spool.is_some() {
                    tracing::warn!(receiver = %lane.name, left, "Shutdown timeout: undelivered notifications stay in the spool for the next start.");
                } else {
                    lane.shared.stats.dropped.fetch_add(left, Ordering::Relaxed);
                    tracing::warn!(receiver = %lane.name, left, "Shutdown timeout: undelivered notifications dropped (no --state-dir spool).");
                }
                unfinished.push(lane.name);
            }
        }
        unfinished
    }
}
