//! A lane: one receiver's bounded queue and the task that drains it —
//! in order, at the receiver's rate, with backoff while it fails, handing
//! over to a fallback receiver after [`FALLBACK_AFTER`] failures, and its
//! counters.

use super::spool::{Receipt, SpoolFile, MAX_RECEIPTS, SPOOL_VERSION};
use super::{NotifyError, Receiver, DEFAULT_QUEUE};
use crate::alert::Notification;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Delivery counters of one receiver.
#[derive(Debug, Default)]
pub struct DeliveryStats {
    /// Delivered.
    pub sent: AtomicU64,
    /// Rejected for good (4xx other than 408/429, local errors).
    pub failed: AtomicU64,
    /// Dropped: queue full (oldest dropped) or left at shutdown.
    pub dropped: AtomicU64,
    /// Undelivered notifications replaced by a newer state of the same alert.
    pub replaced: AtomicU64,
    /// Transient failures retried.
    pub retries: AtomicU64,
    /// Notifications already delivered (before a restart, found in the
    /// spool's receipts) and not sent again.
    pub duplicates: AtomicU64,
}

/// How a receiver's lane delivers.
#[derive(Debug, Clone, Copy)]
pub struct LaneConfig {
    /// Queue capacity (distinct alerts waiting).
    pub queue: usize,
    /// Token bucket: (notifications per second, burst); None = unlimited.
    pub rate: Option<(f64, u32)>,
    /// Longest wait between retries of a failing receiver.
    pub max_backoff: Duration,
}

impl Default for LaneConfig {
    fn default() -> Self {
        LaneConfig {
            queue: DEFAULT_QUEUE,
            rate: None,
            max_backoff: Duration::from_secs(30),
        }
    }
}

/// A token bucket: at most `burst + rate × T` sends in any interval T.
#[derive(Debug)]
pub struct TokenBucket {
    pub(super) rate: f64,
    pub(super) burst: f64,
    pub(super) tokens: f64,
    pub(super) last: tokio::time::Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(rate: f64, burst: u32) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            rate: rate.max(1e-6),
            burst,
            tokens: burst,
            last: tokio::time::Instant::now(),
        }
    }

    /// Waits for a token and takes it.
    pub async fn take(&mut self) {
        loop {
            let now = tokio::time::Instant::now();
            self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * self.rate)
                .min(self.burst);
            self.last = now;
            if self.tokens >= 1.0 {
                self.tokens -= 1.0;
                return;
            }
            tokio::time::sleep(Duration::from_secs_f64((1.0 - self.tokens) / self.rate)).await;
        }
    }
}

#[derive(Default)]
pub(super) struct LaneQueue {
    pub(super) order: std::collections::VecDeque<String>,
    pub(super) items: std::collections::HashMap<String, Arc<Notification>>,
    /// Per alert (fingerprint), what was delivered last (or rejected for
    /// good): the receipts a restart checks (see [`Receipt`]). Bounded.
    pub(super) receipts: Option<lru::LruCache<String, Receipt>>,
    pub(super) closed: bool,
    /// Replay: every notification is delivered, none replaced, so the
    /// output does not depend on how fast a receiver is.
    pub(super) keep_every: bool,
    pub(super) seq: u64,
}

impl LaneQueue {
    /// Removes `n` if it is still what `fp` holds: a newer state that
    /// replaced it while it was being sent stays queued.
    fn remove_sent(&mut self, fp: &str, n: &Arc<Notification>) {
        if self.items.get(fp).is_some_and(|cur| Arc::ptr_eq(cur, n)) {
            self.items.remove(fp);
            self.order.retain(|f| f != fp);
        }
    }

    /// Remembers that `n` is done (delivered, or rejected for good).
    pub(super) fn receipt(&mut self, n: &Notification) {
        self.remember(n.fingerprint.clone(), Receipt::of(n));
    }

    pub(super) fn remember(&mut self, fingerprint: String, r: Receipt) {
        if self.keep_every {
            return;
        }
        let cap = std::num::NonZeroUsize::new(MAX_RECEIPTS).unwrap_or(std::num::NonZeroUsize::MIN);
        self.receipts
            .get_or_insert_with(|| lru::LruCache::new(cap))
            .put(fingerprint, r);
    }

    /// Whether `n` says nothing the receiver was not told already: see
    /// [`Receipt::covers`].
    pub(super) fn already_told(&self, n: &Notification) -> bool {
        self.receipts
            .as_ref()
            .and_then(|r| r.peek(&n.fingerprint))
            .is_some_and(|r| r.covers(n))
    }

    /// The queue place of `n`: its alert's, except that a resolve never
    /// replaces an undelivered firing (the page would be lost: PagerDuty
    /// and Alertmanager ignore a resolve for an alert they never saw) and
    /// queues behind it instead; a new firing takes the alert's place and
    /// drops a queued resolve. So an alert holds at most two places (an
    /// incident three: its `opened` keeps its own). In replay every
    /// notification has a place of its own. Returns the key and whether a
    /// queued resolve was dropped.
    pub(super) fn place(&mut self, n: &Notification) -> (String, bool) {
        use crate::alert::AlertState;
        if self.keep_every {
            self.seq += 1;
            return (format!("{}#{}", n.fingerprint, self.seq), false);
        }
        // An incident's `opened` is never replaced by its first update.
        if n.incident
            .as_ref()
            .is_some_and(|i| i.event == crate::alert::IncidentEvent::Opened)
        {
            return (format!("{}#opened", n.fingerprint), false);
        }
        let resolved_key = format!("{}#resolved", n.fingerprint);
        let firing_queued = self
            .items
            .get(&n.fingerprint)
            .is_some_and(|c| c.state != AlertState::Resolved);
        if n.state == AlertState::Resolved && firing_queued {
            return (resolved_key, false);
        }
        let mut dropped = false;
        if n.state != AlertState::Resolved && self.items.remove(&resolved_key).is_some() {
            self.order.retain(|k| k != &resolved_key);
            dropped = true;
        }
        (n.fingerprint.clone(), dropped)
    }
}

pub(super) struct LaneShared {
    pub(super) name: String,
    pub(super) cap: usize,
    /// Where the queue and the receipts are persisted (with
    /// `--state-dir`). Held while the queue is read and written, so writes
    /// land in the order of their snapshots: the file always ends with the
    /// latest queue (a delivered notification never comes back).
    pub(super) spool: Option<std::sync::Mutex<crate::durable::Rewriter>>,
    /// The last spool write failed or was put off (full disk): the worker
    /// retries it.
    pub(super) spool_dirty: AtomicBool,
    /// The lane that takes over after repeated failures.
    pub(super) fallback: std::sync::OnceLock<Arc<LaneShared>>,
    /// Whether the last attempt failed (shown as degraded).
    pub(super) failing: AtomicBool,
    /// The receiver is gone for good (stdout closed): nothing more is
    /// queued for it, what was is let go without a word per notification.
    pub(super) gone: AtomicBool,
    pub(super) q: std::sync::Mutex<LaneQueue>,
    pub(super) wake: tokio::sync::Notify,
    pub(super) space: tokio::sync::Notify,
    pub(super) stats: DeliveryStats,
}

pub(super) struct Lane {
    pub(super) name: String,
    pub(super) shared: Arc<LaneShared>,
    pub(super) task: JoinHandle<()>,
    pub(super) takes_incidents: bool,
}

/// One receiver's delivery counters, as the dispatcher reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReceiverSnapshot {
    /// Receiver name (kind and host; no secrets).
    pub name: String,
    /// Delivered.
    pub sent: u64,
    /// Rejected for good.
    pub failed: u64,
    /// Dropped (queue full, shutdown without spool).
    pub dropped: u64,
    /// Transient failures retried.
    pub retries: u64,
    /// Already delivered before a restart: not sent again.
    pub duplicates: u64,
    /// Waiting in the queue now.
    pub queued: u64,
    /// True when its last attempt failed.
    pub degraded: bool,
}

impl ReceiverSnapshot {
    /// Its counters as the samples `/metrics` exports: notifications by
    /// outcome, and the queue's depth now.
    pub fn samples(&self, out: &mut Vec<crate::stats::Sample>) {
        use crate::stats::Sample;
        for (outcome, v) in [
            ("sent", self.sent),
            ("failed", self.failed),
            ("dropped", self.dropped),
            ("retried", self.retries),
            ("duplicate", self.duplicates),
        ] {
            out.push(
                Sample::event("notifications", v)
                    .with("receiver", &self.name)
                    .with("outcome", outcome),
            );
        }
        out.push(Sample::state("queue_depth", self.queued as i64).with("receiver", &self.name));
    }
}

/// Consecutive transient failures after which a notification is also
/// handed to the receiver's fallback.
pub const FALLBACK_AFTER: u32 = 5;

impl LaneShared {
    /// Queues a notification: a newer state replaces an undelivered older
    /// one in place (see [`LaneQueue::place`] for the one exception); when
    /// full, drops the oldest (if `drop_oldest`, counted and logged) or
    /// returns false.
    pub(super) fn try_enqueue(&self, n: &Arc<Notification>, drop_oldest: bool) -> bool {
        if self.gone.load(Ordering::Relaxed) {
            return true;
        }
        let Ok(mut q) = self.q.lock() else {
            return true;
        };
        let (key, dropped) = q.place(n);
        if dropped {
            self.stats.replaced.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(slot) = q.items.get_mut(&key) {
            *slot = n.clone();
            self.stats.replaced.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        if q.order.len() >= self.cap.max(1) {
            if !drop_oldest {
                return false;
            }
            if let Some(old) = q.order.pop_front() {
                if let Some(o) = q.items.remove(&old) {
                    tracing::warn!(receiver = %self.name, rule = %o.rule, group = %o.group, reason = "queue full", "Oldest undelivered notification dropped.");
                }
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        q.order.push_back(key.clone());
        q.items.insert(key, n.clone());
        true
    }

    /// Writes the queue and the receipts to the spool, atomically and
    /// durably ([`crate::durable`]), so a crash at any moment leaves the
    /// old or the new spool. A failing disk is logged once, counted and
    /// retried with backoff by the lane's worker (`force` tries at once:
    /// the last chance at shutdown).
    pub(super) fn persist_with(&self, force: bool) {
        let Some(spool) = &self.spool else { return };
        let mut w = spool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if force {
            w.retry_now();
        }
        let file = match self.q.lock() {
            Ok(q) => SpoolFile {
                version: SPOOL_VERSION,
                receiver: self.name.clone(),
                queue: q
                    .order
                    .iter()
                    .filter_map(|k| q.items.get(k).map(|a| a.as_ref().clone()))
                    .collect(),
                delivered: q
                    .receipts
                    .as_ref()
                    .map(|r| {
                        r.iter()
                            .rev()
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            Err(_) => return,
        };
        let written = serde_json::to_vec(&file)
            .map(|bytes| w.write(&bytes) == crate::durable::Outcome::Written)
            .unwrap_or(false);
        self.spool_dirty.store(!written, Ordering::Relaxed);
    }

    pub(super) fn persist(&self) {
        self.persist_with(false);
    }

    /// When a spool write put off by a failing disk is due again.
    pub(super) fn spool_retry_at(&self) -> Option<std::time::Instant> {
        if !self.spool_dirty.load(Ordering::Relaxed) {
            return None;
        }
        let spool = self.spool.as_ref()?;
        let w = spool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(w.retry_at().unwrap_or_else(std::time::Instant::now))
    }
}

pub(super) fn is_transient(e: &NotifyError) -> bool {
    matches!(e, NotifyError::Exhausted { .. })
}

/// The task of a lane: sends the queue's head, in order, until the queue
/// is closed and empty.
pub(super) async fn lane_worker(r: Arc<dyn Receiver>, shared: Arc<LaneShared>, cfg: LaneConfig) {
    let mut w = Worker {
        bucket: cfg.rate.map(|(rate, burst)| TokenBucket::new(rate, burst)),
        failures: 0,
        forwarded: None,
        r,
        shared,
        cfg,
    };
    w.run().await
}

/// The queue's head as the task finds it.
enum Head {
    Item(String, Arc<Notification>),
    Empty,
    /// Closed and drained (or its lock poisoned): the task ends.
    Closed,
}

/// What one send came to.
enum Sent {
    /// Delivered, or rejected for good: it leaves the queue.
    Done,
    /// A transient failure: it stays at the head, retried after a backoff.
    Retry,
    /// The receiver is gone: the queue was cleared.
    Gone,
}

struct Worker {
    r: Arc<dyn Receiver>,
    shared: Arc<LaneShared>,
    cfg: LaneConfig,
    bucket: Option<TokenBucket>,
    /// Transient failures in a row.
    failures: u32,
    /// The notification last handed to the fallback.
    forwarded: Option<Arc<Notification>>,
}

impl Worker {
    async fn run(&mut self) {
        let shared = self.shared.clone();
        loop {
            // Armed before the queue is read, so a wake-up between the
            // read and the wait is not lost.
            let notified = shared.wake.notified();
            let (fp, n) = match shared.head() {
                Head::Closed => return,
                Head::Empty => {
                    shared.idle(notified).await;
                    continue;
                }
                Head::Item(fp, n) => (fp, n),
            };
            if shared.forget_if_told(&fp, &n) {
                continue;
            }
            if let Some(b) = self.bucket.as_mut() {
                b.take().await;
            }
            match self.send(&n).await {
                Sent::Done => shared.delivered(&fp, &n),
                Sent::Retry => {
                    let base = Duration::from_millis(500)
                        .saturating_mul(1u32 << self.failures.min(8).saturating_sub(1));
                    let jitter = base.mul_f64((crate::clock::wall_ns() % 1000) as f64 / 4000.0);
                    tokio::time::sleep((base + jitter).min(self.cfg.max_backoff)).await;
                }
                Sent::Gone => {}
            }
        }
    }

    /// Sends one notification and counts what came of it.
    async fn send(&mut self, n: &Arc<Notification>) -> Sent {
        let shared = &self.shared;
        match self.r.send(n).await {
            Ok(()) => {
                shared.stats.sent.fetch_add(1, Ordering::Relaxed);
                shared.failing.store(false, Ordering::Relaxed);
                self.failures = 0;
                Sent::Done
            }
            Err(e) if is_transient(&e) => {
                shared.stats.retries.fetch_add(1, Ordering::Relaxed);
                shared.failing.store(true, Ordering::Relaxed);
                self.failures = self.failures.saturating_add(1);
                let failures = self.failures;
                if failures == 1 || failures.is_power_of_two() {
                    tracing::warn!(receiver = self.r.name(), error = %e, failures, "Receiver failing; retrying with backoff, nothing dropped.");
                }
                if failures >= FALLBACK_AFTER
                    && !self.forwarded.as_ref().is_some_and(|f| Arc::ptr_eq(f, n))
                {
                    self.hand_to_fallback(n);
                }
                Sent::Retry
            }
            Err(NotifyError::Gone { .. }) => {
                self.gone();
                Sent::Gone
            }
            Err(e) => {
                shared.stats.failed.fetch_add(1, Ordering::Relaxed);
                tracing::error!(receiver = self.r.name(), error = %e, rule = %n.rule, group = %n.group, state = ?n.state, "Notification rejected; dropped.");
                Sent::Done
            }
        }
    }

    /// The primary stays queued and retried; the fallback makes sure
    /// someone hears about it meanwhile.
    fn hand_to_fallback(&mut self, n: &Arc<Notification>) {
        if let Some(fb) = self.shared.fallback.get() {
            fb.try_enqueue(n, true);
            fb.persist();
            fb.wake.notify_one();
            self.forwarded = Some(n.clone());
            tracing::warn!(receiver = self.r.name(), fallback = %fb.name, rule = %n.rule, group = %n.group, "Receiver keeps failing; notification handed to the fallback.");
        }
    }

    /// Whoever read it stopped reading (`| head`): the rest goes quietly,
    /// said once — a notification queued before the flag was up fails the
    /// same way and goes quietly too.
    fn gone(&self) {
        let shared = &self.shared;
        let left = shared.q.lock().map(|mut q| {
            let n = q.order.len();
            q.order.clear();
            q.items.clear();
            n
        });
        let already = shared.gone.swap(true, Ordering::Relaxed);
        shared.space.notify_waiters();
        if !already {
            tracing::info!(
                receiver = self.r.name(),
                not_sent = left.unwrap_or(0),
                "The receiver closed; nothing more is sent to it."
            );
        }
    }
}

impl LaneShared {
    /// The queue's head; a closed and empty queue gets its receipts on
    /// disk one last time.
    fn head(&self) -> Head {
        let Ok(q) = self.q.lock() else {
            return Head::Closed;
        };
        let head = q
            .order
            .front()
            .and_then(|fp| q.items.get(fp).map(|n| (fp.clone(), n.clone())));
        match head {
            Some((fp, n)) => Head::Item(fp, n),
            None if q.closed => {
                drop(q);
                if self.spool_dirty.load(Ordering::Relaxed) {
                    self.persist_with(true);
                }
                Head::Closed
            }
            None => Head::Empty,
        }
    }

    /// Waits for work; a spool write put off by a failing disk is retried
    /// when due meanwhile.
    async fn idle(&self, notified: tokio::sync::futures::Notified<'_>) {
        match self.spool_retry_at() {
            Some(at) => {
                tokio::select! {
                    _ = notified => {}
                    _ = tokio::time::sleep_until(at.into()) => self.persist(),
                }
            }
            None => notified.await,
        }
    }

    /// Drops the head when a restart made it again from lines it read
    /// again and the receiver was told already. Returns whether it did.
    fn forget_if_told(&self, fp: &str, n: &Arc<Notification>) -> bool {
        if !self.q.lock().is_ok_and(|q| q.already_told(n)) {
            return false;
        }
        if let Ok(mut q) = self.q.lock() {
            q.remove_sent(fp, n);
        }
        self.stats.duplicates.fetch_add(1, Ordering::Relaxed);
        tracing::info!(receiver = %self.name, rule = %n.rule, group = %n.group, state = ?n.state, "Already delivered before the restart; not sent again.");
        self.persist();
        self.space.notify_waiters();
        true
    }

    /// After a delivery: the notification leaves the queue, its receipt is
    /// kept and on disk at once (no await since the send), so a kill -9
    /// right after a delivery cannot make a restart deliver it again.
    fn delivered(&self, fp: &str, n: &Arc<Notification>) {
        if let Ok(mut q) = self.q.lock() {
            q.remove_sent(fp, n);
            q.receipt(n);
        }
        self.persist();
        self.space.notify_waiters();
    }
}

/// The counters of these lanes, as the dispatcher reports them.
pub(super) fn snapshots_of(lanes: &[(String, Arc<LaneShared>)]) -> Vec<ReceiverSnapshot> {
    lanes
        .iter()
        .map(|(name, shared)| {
            let s = &shared.stats;
            ReceiverSnapshot {
                name: name.clone(),
                sent: s.sent.load(Ordering::Relaxed),
                failed: s.failed.load(Ordering::Relaxed),
                dropped: s.dropped.load(Ordering::Relaxed),
                retries: s.retries.load(Ordering::Relaxed),
                duplicates: s.duplicates.load(Ordering::Relaxed),
                queued: shared.q.lock().map(|q| q.order.len() as u64).unwrap_or(0),
                degraded: shared.failing.load(Ordering::Relaxed),
            }
        })
        .collect()
}
