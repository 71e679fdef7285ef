//! Notify: delivers notifications to receivers.
//!
//! Each receiver gets its own bounded queue and task, so a slow or dead
//! receiver never stalls detection or the other receivers. In live mode a
//! full queue drops the notification — counted and logged, never silent;
//! in replay mode the pipeline waits instead, so replay output is complete
//! and deterministic. The full delivery engine (spool, rate limit, routing)
//! plugs in behind [`Receiver`].

pub mod alertmanager;
pub mod stdout;
pub mod webhook;

use crate::alert::Notification;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
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
}

/// A boxed future, for object-safe async receivers.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A place notifications go.
pub trait Receiver: Send + Sync {
    /// Name for logs and counters (never contains secrets).
    fn name(&self) -> &str;
    /// Delivers one notification, retrying as the receiver sees fit.
    fn send<'a>(&'a self, n: &'a Notification) -> BoxFuture<'a, Result<(), NotifyError>>;
}

/// Delivery counters of one receiver.
#[derive(Debug, Default)]
pub struct DeliveryStats {
    /// Delivered.
    pub sent: AtomicU64,
    /// Given up on.
    pub failed: AtomicU64,
    /// Dropped because the queue was full.
    pub dropped: AtomicU64,
}

struct Lane {
    name: String,
    tx: mpsc::Sender<Arc<Notification>>,
    stats: Arc<DeliveryStats>,
    task: JoinHandle<()>,
}

/// Fans notifications out to receivers through bounded queues.
pub struct Dispatcher {
    lanes: Vec<Lane>,
    wait_when_full: bool,
}

impl Dispatcher {
    /// Starts one task per receiver. With `wait_when_full`, [`Dispatcher::dispatch`]
    /// waits for room (replay); otherwise it drops and counts (live).
    pub fn new(
        receivers: Vec<Arc<dyn Receiver>>,
        queue: usize,
        wait_when_full: bool,
    ) -> Dispatcher {
        let lanes = receivers
            .into_iter()
            .map(|r| {
                let (tx, mut rx) = mpsc::channel::<Arc<Notification>>(queue.max(1));
                let stats = Arc::new(DeliveryStats::default());
                let st = stats.clone();
                let name = r.name().to_string();
                let task = tokio::spawn(async move {
                    while let Some(n) = rx.recv().await {
                        match r.send(&n).await {
                            Ok(()) => {
                                st.sent.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => {
                                st.failed.fetch_add(1, Ordering::Relaxed);
                                tracing::error!(error = %e, rule = %n.rule, group = %n.group, state = ?n.state, "Notification not delivered.");
                            }
                        }
                    }
                });
                Lane { name, tx, stats, task }
            })
            .collect();
        Dispatcher {
            lanes,
            wait_when_full,
        }
    }

    /// Queues a notification for every receiver.
    pub async fn dispatch(&self, n: Notification) {
        let n = Arc::new(n);
        for lane in &self.lanes {
            if self.wait_when_full {
                if lane.tx.send(n.clone()).await.is_err() {
                    lane.stats.dropped.fetch_add(1, Ordering::Relaxed);
                }
            } else if let Err(e) = lane.tx.try_send(n.clone()) {
                lane.stats.dropped.fetch_add(1, Ordering::Relaxed);
                let reason = match e {
                    mpsc::error::TrySendError::Full(_) => "queue full",
                    mpsc::error::TrySendError::Closed(_) => "receiver stopped",
                };
                tracing::warn!(receiver = %lane.name, rule = %n.rule, group = %n.group, reason, "Notification dropped.");
            }
        }
    }

    /// Per-receiver counters: (name, sent, failed, dropped).
    pub fn stats(&self) -> Vec<(String, u64, u64, u64)> {
        self.lanes
            .iter()
            .map(|l| {
                let s = &l.stats;
                (
                    l.name.clone(),
                    s.sent.load(Ordering::Relaxed),
                    s.failed.load(Ordering::Relaxed),
                    s.dropped.load(Ordering::Relaxed),
                )
            })
            .collect()
    }

    /// Closes the queues and waits up to `timeout` for them to drain. Returns
    /// the names of receivers that did not finish in time.
    pub async fn shutdown(self, timeout: Duration) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut unfinished = Vec::new();
        let mut tasks = Vec::new();
        for lane in self.lanes {
            drop(lane.tx);
            tasks.push((lane.name, lane.task));
        }
        for (name, mut task) in tasks {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                task.abort();
                unfinished.push(name);
            }
        }
        unfinished
    }
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
            starts_at: String::new(),
            ends_at: None,
            count: i,
            first_seen: None,
            last_seen: None,
            top_groups: vec![],
            share: None,
            samples: vec![],
            fingerprint: String::new(),
            repeat: false,
        }
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
        let (_, _, _, dropped) = d.stats()[0].clone();
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
