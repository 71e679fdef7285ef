//! The one queue of the push sources (`--ingest`, `--syslog`) in front of
//! the detection loop: bounded in bytes — a batch holds its share of the
//! budget until the loop has processed it — so a burst of pushes waits or
//! is told to retry instead of growing memory. With `--state-dir` each
//! batch is written to the ingest log (`ingest::wal`) and fsynced before it
//! is queued and answered, and the batches a crash left after the
//! checkpoint are fed again before the listeners take anything new.

use super::body::Decoded;
use super::wal::{Batch, Wal};
use super::{IngestError, Options, Pushed};
use crate::scan::ScannerSlot;
use crate::server::Telemetry;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};

/// Default largest body of one push, as sent (compressed).
pub(crate) const MAX_BODY_BYTES: usize = 16 << 20;
/// Default bound of the pushed bytes (decoded lines) queued for the
/// detection loop (`--ingest-queue`).
pub(crate) const QUEUE_BYTES: usize = 32 << 20;
/// How long a push waits for room in the queue before it is answered
/// "retry later", by default (`--ingest-queue-wait`).
const QUEUE_WAIT: Duration = Duration::from_secs(2);

/// The queue and what every listener needs of it.
pub(crate) struct PushQueue {
    pub(crate) tx: mpsc::Sender<Pushed>,
    pub(crate) slot: ScannerSlot,
    pub(crate) telemetry: Arc<Telemetry>,
    pub(crate) queue: Arc<Semaphore>,
    /// The queue's bound in bytes (`--ingest-queue`).
    pub(crate) queue_bytes: usize,
    pub(crate) max_body: usize,
    /// How long a push waits for room ([`QUEUE_WAIT`]).
    pub(crate) wait: Duration,
    /// The ingest log (with a state directory).
    pub(crate) wal: Option<Arc<Wal>>,
    /// True once the log's batches were fed again: the listeners wait.
    pub(crate) ready: tokio::sync::watch::Receiver<bool>,
}

/// The queue had no room within the wait (or the ingest log could not be
/// written): the client is told to retry.
pub(crate) struct Busy;

/// What [`PushQueue::open`] gives.
pub(crate) struct Opened {
    /// The queue.
    pub queue: Arc<PushQueue>,
    /// The ingest log, with a state directory.
    pub wal: Option<Arc<Wal>>,
    /// The logged batches after the checkpoint.
    pub again: Vec<(u64, Batch)>,
    /// Set once they are fed again.
    pub ready: tokio::sync::watch::Sender<bool>,
}

impl PushQueue {
    /// The queue of `run --ingest`/`--syslog`: bounded in bytes; with
    /// `--state-dir` every batch goes through the ingest log (`ingest::wal`)
    /// before it is answered. Returns the queue, the log, the batches a
    /// crash left after the checkpoint's position `wal_at`, and the switch
    /// that lets the listeners take pushes once those are fed again
    /// ([`PushQueue::replay`]).
    pub(crate) fn open(
        o: &Options,
        slot: ScannerSlot,
        tx: &mpsc::Sender<Pushed>,
        telemetry: Arc<Telemetry>,
        wal_at: Option<u64>,
    ) -> Result<Opened, IngestError> {
        let max_body = o.max_body.unwrap_or(MAX_BODY_BYTES).max(1024);
        let queue_bytes = o.queue_bytes.map_or(QUEUE_BYTES, |b| b as usize).max(1024);
        let wait = o.queue_wait.map_or(QUEUE_WAIT, |d| {
            Duration::from_nanos(u64::try_from(d.ns()).unwrap_or(0))
        });
        let (wal, again) = match &o.state_dir {
            Some(dir) => {
                let (w, again) = Wal::open(dir, wal_at)?;
                (Some(Arc::new(w)), again)
            }
            None => (None, Vec::new()),
        };
        let (ready_tx, ready) = tokio::sync::watch::channel(false);
        let queue = Arc::new(PushQueue {
            tx: tx.clone(),
            slot,
            telemetry,
            queue: Arc::new(Semaphore::new(queue_bytes)),
            queue_bytes,
            max_body,
            wait,
            wal: wal.clone(),
            ready,
        });
        queue.publish_depth();
        Ok(Opened {
            queue,
            wal,
            again,
            ready: ready_tx,
        })
    }

    /// Every request outcome of both protocols from 0 (a dashboard's
    /// rate() has its series before the first push), and the queue's
    /// bytes in use as `sigwatch_state{kind="ingest_queue_bytes"}`, four
    /// times a second while the queue lives.
    fn publish_depth(self: &Arc<Self>) {
        for proto in ["loki", "otlp"] {
            for outcome in ["accepted", "busy", "malformed", "unsupported", "too_large"] {
                let pairs = [
                    ("kind", "ingest_requests"),
                    ("protocol", proto),
                    ("outcome", outcome),
                ];
                self.add(&pairs, 0);
            }
            self.add(&[("kind", "ingest_lines"), ("protocol", proto)], 0);
        }
        self.telemetry.set_state(
            &[("kind", "ingest_queue_limit_bytes")],
            i64::try_from(self.queue_bytes).unwrap_or(i64::MAX),
        );
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                let Some(q) = weak.upgrade() else { return };
                let used = q.queue_bytes.saturating_sub(q.queue.available_permits());
                q.telemetry.set_state(
                    &[("kind", "ingest_queue_bytes")],
                    i64::try_from(used).unwrap_or(i64::MAX),
                );
            }
        });
    }

    /// Feeds the logged batches again, in order, then lets the listeners
    /// take pushes.
    pub(crate) fn replay(
        self: &Arc<Self>,
        again: Vec<(u64, Batch)>,
        ready: tokio::sync::watch::Sender<bool>,
    ) {
        if !again.is_empty() {
            tracing::info!(
                batches = again.len(),
                "Feeding again what the ingest log holds after the checkpoint (acknowledged before the stop)."
            );
        }
        let q = self.clone();
        tokio::spawn(async move {
            for (end, batch) in again {
                let input = q.input_of(&batch, None, Some(end));
                if q.tx.send(input).await.is_err() {
                    return;
                }
            }
            let _ = ready.send(true);
        });
    }

    /// Counts an event of the listeners (`sigwatch_events_total`).
    pub(crate) fn add(&self, pairs: &[(&str, &str)], n: u64) {
        self.telemetry.add(pairs, n);
    }

    /// Room in the queue for `bytes`: its share of the byte budget and a
    /// place in the loop's channel, within `wait` (None: as long as it
    /// takes).
    async fn room(
        &self,
        bytes: usize,
        wait: Option<Duration>,
    ) -> Result<(tokio::sync::OwnedSemaphorePermit, mpsc::OwnedPermit<Pushed>), Busy> {
        // One push larger than the whole budget takes all of it.
        let want = u32::try_from(bytes.min(self.queue_bytes)).unwrap_or(u32::MAX);
        let room = async {
            let permit = self.queue.clone().acquire_many_owned(want).await.ok()?;
            let slot = self.tx.clone().reserve_owned().await.ok()?;
            Some((permit, slot))
        };
        let got = match wait {
            Some(w) => tokio::time::timeout(w, room).await.ok().flatten(),
            None => room.await,
        };
        got.ok_or(Busy)
    }

    /// A batch as the loop's input: a block scanned, its streams.
    pub(crate) fn input_of(
        &self,
        batch: &Batch,
        held: Option<tokio::sync::OwnedSemaphorePermit>,
        wal: Option<u64>,
    ) -> Pushed {
        let (newest, block, sources) = match batch {
            Batch::Entries(rows) => {
                let entries: Vec<crate::source::loki::Entry> = rows
                    .iter()
                    .map(|(labels, metadata, ts, line)| crate::source::loki::Entry {
                        labels: labels.clone(),
                        metadata: metadata.clone(),
                        ts: *ts,
                        line: line.clone(),
                    })
                    .collect();
                let newest = entries.iter().map(|e| e.ts).max();
                let (block, sources) = crate::source::loki::block_of(&entries);
                (newest, block, sources)
            }
            Batch::Lines { arrival, lines } => {
                let (mut block, sources) = lines_block(lines);
                block.arrival = Some(*arrival);
                (None, block, sources)
            }
        };
        let hints = self.slot.get().scan(&block.data);
        Pushed {
            newest,
            block,
            hints,
            sources,
            held,
            wal,
        }
    }

    /// Queues a batch, holding its bytes of the queue's budget until the
    /// detection loop has processed it; with the ingest log, only once it
    /// is on disk (a failed write is "busy": the client retries).
    async fn submit(&self, batch: Batch, wait: Option<Duration>) -> Result<(), Busy> {
        let bytes = match &batch {
            Batch::Entries(rows) => rows.iter().map(|r| r.3.len() + 64).sum(),
            Batch::Lines { lines, .. } => lines.iter().map(|l| l.1.len() + 64).sum(),
        };
        let (permit, slot) = self.room(bytes, wait).await?;
        let input = self.input_of(&batch, Some(permit), None);
        match &self.wal {
            Some(w) => {
                if w.append(&batch, input, slot).await {
                    Ok(())
                } else {
                    Err(Busy)
                }
            }
            None => {
                slot.send(input);
                Ok(())
            }
        }
    }

    /// Queues decoded entries as one batch.
    pub(crate) async fn enqueue(&self, d: Decoded) -> Result<(), Busy> {
        let rows = d
            .entries
            .into_iter()
            .map(|e| (e.labels, e.metadata, e.ts, e.line))
            .collect();
        self.submit(Batch::Entries(rows), Some(self.wait)).await
    }

    /// Queues syslog messages as one batch of lines (their own times are
    /// read from them; the arrival stands in for a line without one).
    pub(crate) async fn enqueue_lines(
        &self,
        msgs: Vec<super::body::syslog::Message>,
        wait: Option<Duration>,
    ) -> Result<(), Busy> {
        let lines = msgs.into_iter().map(|m| (m.labels, m.line)).collect();
        let batch = Batch::Lines {
            arrival: crate::clock::wall_ns(),
            lines,
        };
        self.submit(batch, wait).await
    }
}

/// Syslog lines as a block, a source per label set (host, app); a message
/// holding line ends (octet counting lets it) is several lines.
fn lines_block(
    lines: &[(Vec<(String, String)>, String)],
) -> (crate::source::block::Block, Vec<crate::source::Source>) {
    let mut sources: Vec<crate::source::Source> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let mut refs = Vec::with_capacity(lines.len());
    for (labels, line) in lines {
        let i = *index.entry(labels).or_insert_with(|| {
            let name = labels
                .iter()
                .map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
                .join("/");
            sources.push(crate::source::Source {
                name: if name.is_empty() {
                    "syslog".into()
                } else {
                    name
                },
                labels: labels.clone(),
                modified: None,
                kind: crate::source::SourceKind::Named,
            });
            sources.len() - 1
        });
        for l in line.split('\n') {
            refs.push((i, l.trim_end_matches('\r')));
        }
    }
    (crate::source::block::Block::from_lines(refs), sources)
}
