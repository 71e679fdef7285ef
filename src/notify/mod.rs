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
use std::sync::Arc;

mod dispatcher;
mod lane;
mod spool;
pub use dispatcher::Dispatcher;
pub use lane::{DeliveryStats, LaneConfig, ReceiverSnapshot, TokenBucket, FALLBACK_AFTER};
pub use spool::{delivery_key, spool_path, Receipt, MAX_RECEIPTS};

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

#[cfg(test)]
mod tests {
    use super::spool::load_spool;
    use super::*;
    use crate::alert::AlertState;
    use std::collections::BTreeMap;
    use std::sync::atomic::Ordering;
    use std::sync::Mutex;
    use std::time::Duration;

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
            at: 0,
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
    async fn a_new_episode_goes_out_though_its_resolve_was_replaced() {
        let (p, d, _) = gated_with_fp1_queued().await;
        // fp0's page is in flight; it resolves and fires again meanwhile.
        let mut resolved = note(0);
        resolved.state = AlertState::Resolved;
        d.dispatch(resolved).await;
        let mut again = note(0);
        again.starts_at = "2024-05-01T13:01:20.000Z".into();
        d.dispatch(again).await;
        p.gate.add_permits(100);
        assert!(d.shutdown(Duration::from_secs(5)).await.is_empty());
        // The resolve was replaced by the new firing, which takes fp0's
        // place in the queue: another episode is news and goes out.
        assert_eq!(
            p.states(),
            vec![
                ("fp0".into(), AlertState::Firing),
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
    async fn receivers_of_one_name_keep_spools_of_their_own() {
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
        assert_eq!(fps(&pa), ["fp1"], "the routed receiver spooled it");
        assert!(fps(&pb).is_empty(), "the other one shares nothing");
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
