//! Notify: delivers notifications to receivers.
//!
//! Each receiver gets its own bounded queue and task, so a slow or dead
//! receiver never stalls detection or the other receivers. In live mode a
//! full queue drops the notification — counted and logged, never silent;
//! in replay mode the pipeline waits instead, so replay output is complete
//! and deterministic. The full delivery engine (spool, rate limit, routing)
//! plugs in behind [`Receiver`].

pub mod alertmanager;
pub mod http;
pub mod pagerduty;
pub mod route;
pub mod slack;
pub mod stdout;
pub mod webhook;

use crate::alert::Notification;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Default capacity of each receiver's queue.
pub const DEFAULT_QUEUE: usize = 1024;

/// A delivery failure.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// Network error, timeout, or a retryable status after all retries.
    #[error("{receiver}: delivery failed after {attempts} attempts: {reason}")]
    Exhausted {
        /// Receiver name.
        receiver: String,
        /// Attempts made.
        attempts: u32,
        /// Last error.
        reason: String,
    },
    /// A status that retrying cannot fix (4xx other than 408/429).
    #[error("{receiver}: rejected with HTTP {status}: {body}")]
    Rejected {
        /// Receiver name.
        receiver: String,
        /// HTTP status.
        status: u16,
        /// Start of the response body.
        body: String,
    },
    /// Local I/O (stdout closed).
    #[error("{receiver}: {source}")]
    Io {
        /// Receiver name.
        receiver: String,
        /// The error.
        source: std::io::Error,
    },
    /// Bad receiver configuration (invalid URL).
    #[error("{0}")]
    Config(String),
    /// The receiver is gone for good (stdout closed: `sigwatch replay … |
    /// head -3`): its lane stops quietly, the others go on.
    #[error("{receiver} is closed")]
    Gone {
        /// Receiver name.
        receiver: String,
    },
}

/// A boxed future, for object-safe async receivers.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A place notifications go.
pub trait Receiver: Send + Sync {
    /// Name for logs and counters (never contains secrets).
    fn name(&self) -> &str;
    /// What makes this receiver this one and not another of its kind (its
    /// URL, key…): it names the receiver's spool (hashed, so a secret in
    /// it never reaches the file system), so two receivers never share one.
    fn identity(&self) -> String {
        self.name().to_string()
    }
    /// Delivers one notification, retrying as the receiver sees fit.
    fn send<'a>(&'a self, n: &'a Notification) -> BoxFuture<'a, Result<(), NotifyError>>;
    /// The lane settings that suit this kind of receiver (rate limit).
    fn lane(&self) -> LaneConfig {
        LaneConfig::default()
    }
    /// With incident grouping on, whether this receiver gets incident-level
    /// notifications (most) or the alerts, labelled with their incident
    /// (Alertmanager, which groups them itself).
    fn takes_incidents(&self) -> bool {
        true
    }
}

/// A receiver under the name `sigwatch.yaml` gives it: the name joins its
/// identity, so two configured receivers of one kind and URL keep spools
/// of their own.
pub struct Configured {
    /// The configured name.
    pub label: String,
    /// The receiver.
    pub inner: Arc<dyn Receiver>,
}

impl Receiver for Configured {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn identity(&self) -> String {
        format!("{}\n{}", self.label, self.inner.identity())
    }
    fn send<'a>(&'a self, n: &'a Notification) -> BoxFuture<'a, Result<(), NotifyError>> {
        self.inner.send(n)
    }
    fn lane(&self) -> LaneConfig {
        self.inner.lane()
    }
    fn takes_incidents(&self) -> bool {
        self.inner.takes_incidents()
    }
}

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
    rate: f64,
    burst: f64,
    tokens: f64,
    last: tokio::time::Instant,
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
struct LaneQueue {
    order: std::collections::VecDeque<String>,
    items: std::collections::HashMap<String, Arc<Notification>>,
    /// Per alert (fingerprint), what was delivered last (or rejected for
    /// good): the receipts a restart checks (see [`Receipt`]). Bounded.
    receipts: Option<lru::LruCache<String, Receipt>>,
    closed: bool,
    /// Replay: every notification is delivered, none replaced, so the
    /// output does not depend on how fast a receiver is.
    keep_every: bool,
    seq: u64,
}

impl LaneQueue {
    /// Remembers that `n` is done (delivered, or rejected for good).
    fn receipt(&mut self, n: &Notification) {
        self.remember(n.fingerprint.clone(), Receipt::of(n));
    }

    fn remember(&mut self, fingerprint: String, r: Receipt) {
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
    fn already_told(&self, n: &Notification) -> bool {
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
    fn place(&mut self, n: &Notification) -> (String, bool) {
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

struct LaneShared {
    name: String,
    cap: usize,
    /// Where the queue and the receipts are persisted (with
    /// `--state-dir`). Held while the queue is read and written, so writes
    /// land in the order of their snapshots: the file always ends with the
    /// latest queue (a delivered notification never comes back).
    spool: Option<std::sync::Mutex<crate::durable::Rewriter>>,
    /// The last spool write failed or was put off (full disk): the worker
    /// retries it.
    spool_dirty: AtomicBool,
    /// The lane that takes over after repeated failures.
    fallback: std::sync::OnceLock<Arc<LaneShared>>,
    /// Whether the last attempt failed (shown as degraded).
    failing: AtomicBool,
    /// The receiver is gone for good (stdout closed): nothing more is
    /// queued for it, what was is let go without a word per notification.
    gone: AtomicBool,
    q: std::sync::Mutex<LaneQueue>,
    wake: tokio::sync::Notify,
    space: tokio::sync::Notify,
    stats: DeliveryStats,
}

struct Lane {
    name: String,
    shared: Arc<LaneShared>,
    task: JoinHandle<()>,
    takes_incidents: bool,
}

/// Fans notifications out to receivers, each through its own lane.
pub struct Dispatcher {
    lanes: Vec<Lane>,
    wait_when_full: bool,
    router: Option<route::Router>,
    grouping: bool,
}

/// Alerts whose last delivery a spool remembers per receiver: enough to
/// recognise every notification a restart can produce again (those of the
/// seconds between the last checkpoint and the stop).
pub const MAX_RECEIPTS: usize = 4096;

/// What a receiver was told last about one alert (or incident).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Receipt {
    /// `firing`, `repeat`, `resolved`; for incidents `opened`, `updated`,
    /// `resolved`.
    pub phase: String,
    /// Its [`delivery_key`].
    pub key: String,
    /// The start of the episode it was about.
    #[serde(default)]
    pub starts_at: String,
}

impl Receipt {
    /// The receipt of delivering `n`.
    pub fn of(n: &Notification) -> Receipt {
        Receipt {
            phase: phase(n).to_string(),
            key: delivery_key(n),
            starts_at: n.starts_at.to_string(),
        }
    }

    /// Whether a receiver told this already has nothing to learn from `n`:
    /// the very same notification, or the same state again — firing after
    /// firing, resolved after resolved, the firing of an episode whose
    /// resolve it already has, an incident opened or updated after it was
    /// opened (an incident id belongs to one episode). That is what a
    /// restart produces when it reads again the lines after its checkpoint:
    /// the same alerts, though not always byte for byte (evaluation ticks
    /// fall elsewhere, so counts differ). A repeat and an incident update
    /// that differ are news and go out.
    pub fn covers(&self, n: &Notification) -> bool {
        if self.key == delivery_key(n) {
            return true;
        }
        match (phase(n), self.phase.as_str()) {
            ("firing", "firing" | "repeat") => true,
            ("firing", "resolved") => n.starts_at.as_str() == self.starts_at,
            ("resolved", "resolved") => true,
            ("opened", _) => true,
            ("updated", "resolved") => true,
            _ => false,
        }
    }
}

/// The phase of a notification in its alert's (or incident's) life:
/// `firing`, `repeat`, `resolved`; for incidents `opened`, `updated`,
/// `resolved`.
pub fn phase(n: &Notification) -> &'static str {
    use crate::alert::{AlertState, IncidentEvent};
    match (&n.incident, n.state) {
        (Some(i), _) => match i.event {
            IncidentEvent::Opened => "opened",
            IncidentEvent::Updated => "updated",
            IncidentEvent::Resolved => "resolved",
        },
        (None, AlertState::Resolved) => "resolved",
        (None, AlertState::Firing) if n.repeat => "repeat",
        (None, AlertState::Firing) => "firing",
    }
}

/// The spool format this version writes (the first was a bare list).
const SPOOL_VERSION: u32 = 2;

/// A spool file: the receiver's undelivered queue and the receipts of
/// what it delivered last.
#[derive(serde::Serialize, serde::Deserialize)]
struct SpoolFile {
    version: u32,
    /// The receiver's name, for people reading the file.
    receiver: String,
    queue: Vec<Notification>,
    /// Per alert fingerprint, least recently delivered first.
    delivered: Vec<(String, Receipt)>,
}

/// What identifies one delivery of a notification: its alert, state and
/// start, and what tells apart the notifications one alert sends in one
/// state (a repeat's latest match and count; an incident update's chain).
/// The same input gives the same keys, so a restart that reads some lines
/// again recognises what it had already delivered.
pub fn delivery_key(n: &Notification) -> String {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    let mut put = |s: &str| {
        h.write(s.as_bytes());
        h.write(&[0]);
    };
    put(&n.fingerprint);
    put(match n.state {
        crate::alert::AlertState::Firing => "firing",
        crate::alert::AlertState::Resolved => "resolved",
    });
    put(&n.starts_at);
    if n.repeat {
        put("repeat");
        put(n.last_seen.as_deref().unwrap_or(""));
        put(&n.count.to_string());
    }
    if let Some(i) = &n.incident {
        put(match i.event {
            crate::alert::IncidentEvent::Opened => "opened",
            crate::alert::IncidentEvent::Updated => "updated",
            crate::alert::IncidentEvent::Resolved => "resolved",
        });
        for c in &i.chain {
            put(&c.fingerprint);
            put(&c.starts_at);
            put(c.ends_at.as_deref().unwrap_or("-"));
        }
        put(&i.omitted.to_string());
        put(&i.affected.join(","));
        put(n.last_seen.as_deref().unwrap_or(""));
    }
    format!("{:016x}", h.finish())
}

fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The spool file of a receiver: its name made file-safe and a digest of
/// its identity ([`Receiver::identity`]: URL, key, configured name), so
/// two receivers of one kind and host never share a spool, and no secret
/// reaches a file name.
pub fn spool_path(dir: &std::path::Path, name: &str, identity: &str) -> std::path::PathBuf {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(identity.as_bytes());
    dir.join("spool").join(format!(
        "{}-{:08x}.json",
        file_safe(name),
        h.finish() as u32
    ))
}

/// The first format's spool name (the receiver's name only).
fn legacy_spool_path(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    dir.join("spool").join(format!("{}.json", file_safe(name)))
}

/// Loads a spool (missing: empty; unreadable: logged, empty): the queue
/// and the receipts. Reads the first format (a bare list) too.
fn load_spool(path: &std::path::Path) -> (Vec<Notification>, Vec<(String, Receipt)>) {
    let Ok(bytes) = std::fs::read(path) else {
        return (Vec::new(), Vec::new());
    };
    if let Ok(f) = serde_json::from_slice::<SpoolFile>(&bytes) {
        if f.version <= SPOOL_VERSION {
            return (f.queue, f.delivered);
        }
        tracing::error!(path = %path.display(), version = f.version, "Spool of a newer format; starting with an empty queue (move it away to silence this).");
        return (Vec::new(), Vec::new());
    }
    match serde_json::from_slice::<Vec<Notification>>(&bytes) {
        Ok(q) => (q, Vec::new()),
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "Spool unreadable; starting with an empty queue.");
            (Vec::new(), Vec::new())
        }
    }
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
    fn try_enqueue(&self, n: &Arc<Notification>, drop_oldest: bool) -> bool {
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
    fn persist_with(&self, force: bool) {
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

    fn persist(&self) {
        self.persist_with(false);
    }

    /// When a spool write put off by a failing disk is due again.
    fn spool_retry_at(&self) -> Option<std::time::Instant> {
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

fn is_transient(e: &NotifyError) -> bool {
    matches!(e, NotifyError::Exhausted { .. })
}

async fn lane_worker(r: Arc<dyn Receiver>, shared: Arc<LaneShared>, cfg: LaneConfig) {
    let mut bucket = cfg.rate.map(|(rate, burst)| TokenBucket::new(rate, burst));
    let mut failures: u32 = 0;
    let mut forwarded: Option<Arc<Notification>> = None;
    loop {
        let notified = shared.wake.notified();
        let head = {
            let Ok(q) = shared.q.lock() else { return };
            match q
                .order
                .front()
                .and_then(|fp| q.items.get(fp).map(|n| (fp.clone(), n.clone())))
            {
                Some(h) => Some(h),
                None if q.closed => {
                    drop(q);
                    if shared.spool_dirty.load(Ordering::Relaxed) {
                        // The last chance to get the receipts on disk.
                        shared.persist_with(true);
                    }
                    return;
                }
                None => None,
            }
        };
        if let Some((fp, n)) = head.as_ref() {
            let told = shared.q.lock().is_ok_and(|q| q.already_told(n));
            if told {
                // Made again by a restart that read its lines again: the
                // receiver knows already.
                if let Ok(mut q) = shared.q.lock() {
                    if q.items.get(fp).is_some_and(|cur| Arc::ptr_eq(cur, n)) {
                        q.items.remove(fp);
                        q.order.retain(|f| f != fp);
                    }
                }
                shared.stats.duplicates.fetch_add(1, Ordering::Relaxed);
                tracing::info!(receiver = %shared.name, rule = %n.rule, group = %n.group, state = ?n.state, "Already delivered before the restart; not sent again.");
                shared.persist();
                shared.space.notify_waiters();
                continue;
            }
        }
        let Some((fp, n)) = head else {
            match shared.spool_retry_at() {
                // A spool write put off by a failing disk: retried when due.
                Some(at) => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(at.into()) => shared.persist(),
                    }
                }
                None => notified.await,
            }
            continue;
        };
        if let Some(b) = bucket.as_mut() {
            b.take().await;
        }
        let result = r.send(&n).await;
        let remove = match &result {
            Ok(()) => {
                shared.stats.sent.fetch_add(1, Ordering::Relaxed);
                shared.failing.store(false, Ordering::Relaxed);
                failures = 0;
                true
            }
            Err(e) if is_transient(e) => {
                shared.stats.retries.fetch_add(1, Ordering::Relaxed);
                shared.failing.store(true, Ordering::Relaxed);
                failures = failures.saturating_add(1);
                if failures == 1 || failures.is_power_of_two() {
                    tracing::warn!(receiver = r.name(), error = %e, failures, "Receiver failing; retrying with backoff, nothing dropped.");
                }
                if failures >= FALLBACK_AFTER
                    && !forwarded.as_ref().is_some_and(|f| Arc::ptr_eq(f, &n))
                {
                    if let Some(fb) = shared.fallback.get() {
                        // The primary stays queued and retried; the fallback
                        // makes sure someone hears about it meanwhile.
                        fb.try_enqueue(&n, true);
                        fb.persist();
                        fb.wake.notify_one();
                        forwarded = Some(n.clone());
                        tracing::warn!(receiver = r.name(), fallback = %fb.name, rule = %n.rule, group = %n.group, "Receiver keeps failing; notification handed to the fallback.");
                    }
                }
                false
            }
            Err(NotifyError::Gone { .. }) => {
                // Whoever read it stopped reading (`| head`): let the rest
                // go quietly, once.
                let left = shared.q.lock().map(|mut q| {
                    let n = q.order.len();
                    q.order.clear();
                    q.items.clear();
                    n
                });
                // Said once: a notification queued before the flag was up
                // fails the same way and goes quietly too.
                let already = shared.gone.swap(true, Ordering::Relaxed);
                shared.space.notify_waiters();
                if !already {
                    tracing::info!(
                        receiver = r.name(),
                        not_sent = left.unwrap_or(0),
                        "The receiver closed; nothing more is sent to it."
                    );
                }
                continue;
            }
            Err(e) => {
                shared.stats.failed.fetch_add(1, Ordering::Relaxed);
                tracing::error!(receiver = r.name(), error = %e, rule = %n.rule, group = %n.group, state = ?n.state, "Notification rejected; dropped.");
                true
            }
        };
        if remove {
            if let Ok(mut q) = shared.q.lock() {
                // Remove only what was sent: a newer state that replaced it
                // while sending stays queued.
                if q.items.get(&fp).is_some_and(|cur| Arc::ptr_eq(cur, &n)) {
                    q.items.remove(&fp);
                    q.order.retain(|f| f != &fp);
                }
                q.receipt(&n);
            }
            // At once (no await since the send): the receipt is on disk
            // before anything else can happen, so a kill -9 right after a
            // delivery cannot make a restart deliver it again.
            shared.persist();
            shared.space.notify_waiters();
        } else {
            let base = Duration::from_millis(500)
                .saturating_mul(1u32 << failures.min(8).saturating_sub(1));
            let jitter = base.mul_f64((crate::clock::wall_ns() % 1000) as f64 / 4000.0);
            tokio::time::sleep((base + jitter).min(cfg.max_backoff)).await;
        }
    }
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
                if let (Some(path), Some(dir)) = (&spool, state_dir) {
                    let (mut left, mut receipts) = load_spool(path);
                    // A spool of the first format, named by the receiver
                    // alone: taken over by the first receiver of that name.
                    let legacy = legacy_spool_path(dir, r.name());
                    if !path.exists() && legacy.exists() {
                        let (q, d) = load_spool(&legacy);
                        left.extend(q);
                        receipts.extend(d);
                        let _ = std::fs::remove_file(&legacy);
                    }
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

    /// After [`FALLBACK_AFTER`] consecutive failures of receiver `primary`,
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

/// The counters of these lanes, as the dispatcher reports them.
fn snapshots_of(lanes: &[(String, Arc<LaneShared>)]) -> Vec<ReceiverSnapshot> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::AlertState;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    fn note(i: u64) -> Notification {
        Notification {
            state: AlertState::Firing,
            rule: "r".into(),
            title: "t".into(),
            severity: "info".into(),
            group: format!("g{i}"),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            starts_at: Default::default(),
            ends_at: None,
            count: i,
            first_seen: None,
            last_seen: None,
            top_groups: vec![],
            share: None,
            samples: vec![],
            template: None,
            fingerprint: format!("fp{i}"),
            repeat: false,
            incident: None,
            links: None,
            origins: Vec::new(),
        }
    }

    /// Records what it got; fails transiently while `down` is set; blocks
    /// while `gate` is closed.
    struct Probe {
        got: Mutex<Vec<(String, AlertState, std::time::Instant)>>,
        counts: Mutex<Vec<u64>>,
        down: std::sync::atomic::AtomicBool,
        gate: tokio::sync::Semaphore,
    }
    impl Probe {
        /// (fingerprint, state) of every notification received, in order.
        fn states(&self) -> Vec<(String, AlertState)> {
            self.got
                .lock()
                .unwrap()
                .iter()
                .map(|g| (g.0.clone(), g.1))
                .collect()
        }

        fn new(open: bool) -> Arc<Probe> {
            Arc::new(Probe {
                got: Mutex::new(vec![]),
                counts: Mutex::new(vec![]),
                down: false.into(),
                gate: tokio::sync::Semaphore::new(if open { 1_000_000 } else { 0 }),
            })
        }
    }
    impl Receiver for Probe {
        fn name(&self) -> &str {
            "probe"
        }
        fn send<'a>(&'a self, n: &'a Notification) -> BoxFuture<'a, Result<(), NotifyError>> {
            Box::pin(async move {
                let _permit = self
                    .gate
                    .acquire()
                    .await
                    .map_err(|_| NotifyError::Config("closed".into()))?;
                if self.down.load(Ordering::SeqCst) {
                    return Err(NotifyError::Exhausted {
                        receiver: "probe".into(),
                        attempts: 1,
                        reason: "HTTP 503".into(),
                    });
                }
                self.got.lock().unwrap().push((
                    n.fingerprint.clone(),
                    n.state,
                    std::time::Instant::now(),
                ));
                self.counts.lock().unwrap().push(n.count);
                Ok(())
            })
        }
    }

    /// A dispatcher whose receiver holds fp0 in flight (gated) while fp1's
    /// page waits in the queue; returns fp1's resolve, not yet dispatched.
    async fn gated_with_fp1_queued() -> (Arc<Probe>, Dispatcher, Notification) {
        let p = Probe::new(false);
        let d = Dispatcher::new(vec![p.clone()], 16, false);
        d.dispatch(note(0)).await; // in flight, blocked by the gate
        tokio::time::sleep(Duration::from_millis(20)).await;
        d.dispatch(note(1)).await;
        let mut resolved = note(1);
        resolved.state = AlertState::Resolved;
        (p, d, resolved)
    }

    fn incident_note(event: crate::alert::IncidentEvent, count: u64) -> Notification {
        let mut n = note(count);
        n.fingerprint = "inc".into();
        n.incident = Some(crate::alert::IncidentInfo {
            id: "inc-1".into(),
            event,
            root: "r".into(),
            chain: vec![],
            nodes: vec![],
            affected: vec![],
            omitted: 0,
        });
        n
    }

    #[tokio::test]
    async fn with_grouping_incidents_and_alerts_go_to_their_receivers_and_opened_stays() {
        use crate::alert::IncidentEvent::{Opened, Updated};
        struct AlertsOnly(Arc<Probe>);
        impl Receiver for AlertsOnly {
            fn name(&self) -> &str {
                "am"
            }
            fn send<'a>(&'a self, n: &'a Notification) -> BoxFuture<'a, Result<(), NotifyError>> {
                self.0.send(n)
            }
            fn takes_incidents(&self) -> bool {
                false
            }
        }
        let p = Probe::new(false);
        let am = Probe::new(true);
        let mut d = Dispatcher::new(vec![p.clone(), Arc::new(AlertsOnly(am.clone()))], 16, false);
        d.set_grouping(true);
        let mut first = incident_note(Opened, 1);
        first.fingerprint = "other".into();
        d.dispatch(first).await; // in flight, gated
        tokio::time::sleep(Duration::from_millis(20)).await;
        d.dispatch(incident_note(Opened, 2)).await;
        d.dispatch(incident_note(Updated, 3)).await;
        d.dispatch(incident_note(Updated, 4)).await; // replaces 3, not 2
        d.dispatch(note(7)).await; // an alert: Alertmanager's only
        p.gate.add_permits(100);
        assert!(d.shutdown(Duration::from_secs(5)).await.is_empty());
        assert_eq!(*p.counts.lock().unwrap(), vec![1, 2, 4]);
        assert_eq!(*am.counts.lock().unwrap(), vec![7]);
    }

    #[tokio::test]
    async fn without_grouping_incident_notifications_go_nowhere() {
        let p = Probe::new(true);
        let d = Dispatcher::new(vec![p.clone()], 16, false);
        d.dispatch(incident_note(crate::alert::IncidentEvent::Opened, 1))
            .await;
        d.dispatch(note(2)).await;
        assert!(d.shutdown(Duration::from_secs(5)).await.is_empty());
        assert_eq!(*p.counts.lock().unwrap(), vec![2]);
    }

    #[tokio::test]
    async fn replay_mode_replaces_nothing() {
        let p = Probe::new(false);
        let d = Dispatcher::new(vec![p.clone()], 16, true);
        d.dispatch(note(0)).await; // in flight, gated
        tokio::time::sleep(Duration::from_millis(20)).await;
        for count in 1..=3 {
            let mut n = note(1);
            n.count = count;
            d.dispatch(n).await;
        }
        p.gate.add_permits(100);
        assert!(d.shutdown(Duration::from_secs(5)).await.is_empty());
        assert_eq!(*p.counts.lock().unwrap(), vec![0, 1, 2, 3]);
    }

    #[tokio::test]
    async fn a_newer_state_replaces_an_undelivered_one() {
        let (p, d, resolved) = gated_with_fp1_queued().await;
        d.dispatch(resolved).await; // replaces fp1 firing before it was sent
        d.dispatch(note(2)).await;
        p.gate.add_permits(100);
        assert!(d.shutdown(Duration::from_secs(5)).await.is_empty());
        let got = p.states();
        // fp1's page was still queued when it resolved: both go out, in
        // order (a resolve alone would never page).
        assert_eq!(
            got,
            vec![
                ("fp0".into(), AlertState::Firing),
                ("fp1".into(), AlertState::Firing),
                ("fp1".into(), AlertState::Resolved),
                ("fp2".into(), AlertState::Firing)
            ]
        );
    }

    #[tokio::test]
    async fn a_new_firing_replaces_a_queued_page_and_its_resolve() {
        let (p, d, resolved) = gated_with_fp1_queued().await;
        d.dispatch(resolved.clone()).await;
        d.dispatch(resolved).await; // replaces the queued resolve
        let mut again = note(1);
        again.count = 99;
        d.dispatch(again).await; // firing again: one page, the newest
        p.gate.add_permits(100);
        assert!(d.shutdown(Duration::from_secs(5)).await.is_empty());
        let got = p.states();
        assert_eq!(
            got,
            vec![
                ("fp0".into(), AlertState::Firing),
                ("fp1".into(), AlertState::Firing)
            ]
        );
    }

    #[tokio::test]
    async fn the_rate_never_exceeds_the_bucket() {
        let p = Probe::new(true);
        let cfg = LaneConfig {
            rate: Some((20.0, 4)),
            ..LaneConfig::default()
        };
        let d = Dispatcher::with_lanes(vec![(p.clone(), cfg)], true);
        for i in 0..24 {
            d.dispatch(note(i)).await;
        }
        assert!(d.shutdown(Duration::from_secs(10)).await.is_empty());
        let times: Vec<std::time::Instant> = p.got.lock().unwrap().iter().map(|g| g.2).collect();
        assert_eq!(times.len(), 24);
        // In any window of length T there are at most burst + rate × T sends.
        for i in 0..times.len() {
            for j in i..times.len() {
                let t = times[j].duration_since(times[i]).as_secs_f64();
                let n = (j - i + 1) as f64;
                assert!(n <= 4.0 + 20.0 * t + 1.0, "{n} sends in {t:.3}s");
            }
        }
        assert!(
            times[23].duration_since(times[0]) >= Duration::from_millis(900),
            "24 at 20/s with a burst of 4 take ≥ 1 s"
        );
    }

    #[tokio::test]
    async fn the_spool_survives_a_crash_and_delivers_once() {
        let dir = tempfile::tempdir().unwrap();
        let down = Probe::new(true);
        down.down.store(true, Ordering::SeqCst);
        let cfg = LaneConfig {
            max_backoff: Duration::from_millis(100),
            ..LaneConfig::default()
        };
        let d = Dispatcher::with_spool(vec![(down.clone(), cfg)], false, Some(dir.path()));
        for i in 0..3 {
            d.dispatch(note(i)).await;
        }
        let mut resolved = note(1);
        resolved.state = AlertState::Resolved;
        d.dispatch(resolved).await;
        // A crash: the lanes are aborted, nothing is drained.
        for lane in &d.lanes {
            lane.task.abort();
        }
        drop(d);
        let path = spool_path(dir.path(), "probe", "probe");
        // fp1's resolve queues behind its undelivered page.
        assert_eq!(load_spool(&path).0.len(), 4, "on disk before any delivery");
        // Restart with the receiver up: each spooled alert is delivered once.
        let up = Probe::new(true);
        let d = Dispatcher::with_spool(
            vec![(up.clone(), LaneConfig::default())],
            false,
            Some(dir.path()),
        );
        assert!(d.shutdown(Duration::from_secs(5)).await.is_empty());
        let got = up.states();
        assert_eq!(
            got,
            vec![
                ("fp0".into(), AlertState::Firing),
                ("fp1".into(), AlertState::Firing),
                ("fp2".into(), AlertState::Firing),
                ("fp1".into(), AlertState::Resolved)
            ]
        );
        let (left, receipts) = load_spool(&path);
        assert!(left.is_empty(), "delivered notifications leave the spool");
        assert_eq!(
            receipts.len(),
            3,
            "each alert's last delivery leaves a receipt"
        );
        // A restart that reads its input again makes the same
        // notifications: recognised, not sent a second time.
        let again = Probe::new(true);
        let d = Dispatcher::with_spool(
            vec![(again.clone(), LaneConfig::default())],
            false,
            Some(dir.path()),
        );
        for i in 0..3 {
            let mut n = note(i);
            // Made again, at another evaluation instant.
            n.count += 10;
            d.dispatch(n).await;
        }
        let mut resolved = note(1);
        resolved.state = AlertState::Resolved;
        d.dispatch(resolved).await;
        let mut later = note(3);
        later.starts_at = "later".into();
        d.dispatch(later).await;
        let counters = d.snapshot_reader();
        assert!(d.shutdown(Duration::from_secs(5)).await.is_empty());
        assert_eq!(
            again.states(),
            vec![("fp3".into(), AlertState::Firing)],
            "only the new one"
        );
        assert_eq!(counters()[0].duplicates, 4, "each one counted");
    }

    #[tokio::test]
    async fn receivers_of_one_name_keep_spools_of_their_own_and_the_first_format_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        struct Hook(String);
        impl Receiver for Hook {
            fn name(&self) -> &str {
                "webhook hooks.example"
            }
            fn identity(&self) -> String {
                self.0.clone()
            }
            fn send<'a>(&'a self, _: &'a Notification) -> BoxFuture<'a, Result<(), NotifyError>> {
                Box::pin(async {
                    Err(NotifyError::Exhausted {
                        receiver: "hook".into(),
                        attempts: 1,
                        reason: "down".into(),
                    })
                })
            }
        }
        // A spool of the first format under the shared name.
        let legacy = legacy_spool_path(dir.path(), "webhook hooks.example");
        std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
        std::fs::write(&legacy, serde_json::to_vec(&vec![note(9)]).unwrap()).unwrap();
        let slow = LaneConfig {
            max_backoff: Duration::from_secs(60),
            ..LaneConfig::default()
        };
        let a: Arc<dyn Receiver> = Arc::new(Hook("https://hooks.example/a".into()));
        let b: Arc<dyn Receiver> = Arc::new(Hook("https://hooks.example/b".into()));
        let mut d = Dispatcher::with_spool(vec![(a, slow), (b, slow)], false, Some(dir.path()));
        d.set_router(route::Router::default().with_always(vec![0]));
        d.dispatch(note(1)).await;
        let names: Vec<String> = d.snapshots().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["webhook hooks.example", "webhook hooks.example #2"]);
        for lane in &d.lanes {
            lane.task.abort();
        }
        let pa = spool_path(
            dir.path(),
            "webhook hooks.example",
            "https://hooks.example/a",
        );
        let pb = spool_path(
            dir.path(),
            "webhook hooks.example #2",
            "https://hooks.example/b",
        );
        assert_ne!(pa, pb);
        let fps = |p: &std::path::Path| -> Vec<String> {
            load_spool(p).0.into_iter().map(|n| n.fingerprint).collect()
        };
        assert_eq!(
            fps(&pa),
            ["fp9", "fp1"],
            "the first receiver took the old spool over"
        );
        assert!(fps(&pb).is_empty(), "the other one shares nothing");
        assert!(!legacy.exists());
        let text = std::fs::read_to_string(&pa).unwrap();
        assert!(
            !text.contains("hooks.example/a"),
            "no URL in the spool: {text}"
        );
    }

    #[tokio::test]
    async fn a_failing_receiver_hands_over_to_its_fallback() {
        let primary = Probe::new(true);
        primary.down.store(true, Ordering::SeqCst);
        let fallback = Probe::new(true);
        let fast = LaneConfig {
            max_backoff: Duration::from_millis(20),
            ..LaneConfig::default()
        };
        let mut d = Dispatcher::with_lanes(
            vec![(primary.clone(), fast), (fallback.clone(), fast)],
            false,
        );
        d.set_fallback(0, 1);
        d.set_router(route::Router::default().with_always(vec![0]));
        d.dispatch(note(7)).await;
        for _ in 0..100 {
            if !fallback.got.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(fallback.got.lock().unwrap().len(), 1, "handed over once");
        primary.down.store(false, Ordering::SeqCst);
        assert!(d.shutdown(Duration::from_secs(5)).await.is_empty());
        assert_eq!(
            primary.got.lock().unwrap().len(),
            1,
            "the primary still gets it when it recovers"
        );
        assert_eq!(fallback.got.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn an_outage_delays_but_loses_nothing() {
        let p = Probe::new(true);
        p.down.store(true, Ordering::SeqCst);
        let cfg = LaneConfig {
            max_backoff: Duration::from_millis(200),
            ..LaneConfig::default()
        };
        let d = Dispatcher::with_lanes(vec![(p.clone(), cfg)], false);
        for i in 0..10 {
            d.dispatch(note(i)).await;
        }
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert!(p.got.lock().unwrap().is_empty());
        p.down.store(false, Ordering::SeqCst);
        assert!(d.shutdown(Duration::from_secs(5)).await.is_empty());
        let mut fps: Vec<String> = p.got.lock().unwrap().iter().map(|g| g.0.clone()).collect();
        fps.sort();
        fps.dedup();
        assert_eq!(fps.len(), 10, "each exactly once");
        assert_eq!(p.got.lock().unwrap().len(), 10);
    }

    struct Slow(Mutex<Vec<u64>>, Duration);
    impl Receiver for Slow {
        fn name(&self) -> &str {
            "slow"
        }
        fn send<'a>(&'a self, n: &'a Notification) -> BoxFuture<'a, Result<(), NotifyError>> {
            Box::pin(async move {
                tokio::time::sleep(self.1).await;
                if let Ok(mut v) = self.0.lock() {
                    v.push(n.count);
                }
                Ok(())
            })
        }
    }

    #[tokio::test]
    async fn live_mode_drops_and_counts_when_full_and_shutdown_is_bounded() {
        let r = Arc::new(Slow(Mutex::new(vec![]), Duration::from_millis(200)));
        let d = Dispatcher::new(vec![r.clone()], 2, false);
        for i in 0..10 {
            d.dispatch(note(i)).await;
        }
        let dropped = d.snapshots()[0].dropped;
        assert!(dropped >= 7, "dropped {dropped}");
        let left = d.shutdown(Duration::from_millis(100)).await;
        assert_eq!(left, vec!["slow".to_string()]);
    }

    #[tokio::test]
    async fn replay_mode_waits_and_delivers_everything_in_order() {
        let r = Arc::new(Slow(Mutex::new(vec![]), Duration::from_millis(1)));
        let d = Dispatcher::new(vec![r.clone()], 2, true);
        for i in 0..20 {
            d.dispatch(note(i)).await;
        }
        assert!(d.shutdown(Duration::from_secs(5)).await.is_empty());
        assert_eq!(*r.0.lock().unwrap(), (0..20).collect::<Vec<_>>());
    }
}
