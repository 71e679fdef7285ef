//! The state directory of `sigwatch run`: taken for this process alone
//! (waiting while the pod being replaced still holds it), the checkpoint
//! restored into the engine and the delivery side, and the keeper that
//! decides when a checkpoint is taken and what goes in.

use super::checkpoint;
use super::delivery::Delivery;
use super::sources::{self, SourceOptions};
use super::{AppError, PipelineOptions};
use crate::alert::Notification;
use crate::clock::wall_ns;
use crate::engine::Engine;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The state directory is this process's alone (see [`take_state_dir`]);
/// writers that died mid-write left temporary files, removed before
/// anything else.
pub(super) async fn lock_state_dir(
    dir: &std::path::Path,
) -> Result<crate::durable::DirLock, AppError> {
    let lock = take_state_dir(dir).await?;
    let stale = crate::durable::remove_stale_temps(dir)
        + crate::durable::remove_stale_temps(&dir.join("spool"));
    if stale > 0 {
        tracing::info!(
            files = stale,
            "Temporary files of an interrupted write removed."
        );
    }
    Ok(lock)
}

/// What a checkpoint gives back beyond the engine's state: where the
/// sources resume, the files' saved offsets, and the incidents, the board
/// and the Alertmanager receivers' active alerts.
pub(super) struct Restored {
    pub(super) resume: sources::Resume,
    pub(super) saved_files: BTreeMap<String, (String, u64)>,
    pub(super) restored: Option<Kept>,
}

/// What the delivery side gets back from a checkpoint.
pub(super) struct Kept {
    pub(super) incidents: crate::incident::IncidentsState,
    pub(super) board: Vec<Notification>,
    pub(super) flaps: crate::alert::FlapState,
    pub(super) alertmanager: BTreeMap<String, crate::notify::alertmanager::ActiveState>,
}

/// Restores the engine from what the state directory held (resolves of
/// alerts whose rules are gone go into `out`).
pub(super) fn restore(
    engine: &mut crate::engine::Engine,
    loaded: checkpoint::Loaded,
    out: &mut Vec<Notification>,
) -> Restored {
    let mut resume = sources::Resume::default();
    let mut saved_files = BTreeMap::new();
    let mut restored: Option<Kept> = None;
    match loaded {
        checkpoint::Loaded::Fresh => {}
        checkpoint::Loaded::Current(c) => {
            let c = *c;
            let s = engine.restore_checkpoint(c.engine, out);
            tracing::info!(
                saved_at = %c.saved_at,
                rules_restored = s.kept,
                rules_changed = s.changed,
                rules_added = s.added,
                rules_removed = s.removed,
                alerts = s.alerts,
                resolved = s.resolved,
                "Checkpoint restored: detection goes on where it stopped."
            );
            resume.loki = c.loki;
            resume.ingest_wal = c.ingest_wal;
            resume.files = crate::source::file::parse_offsets(&c.files);
            saved_files = c.files;
            restored = Some(Kept {
                incidents: c.incidents,
                board: c.board,
                flaps: c.flaps,
                alertmanager: c.alertmanager,
            });
        }
    }
    Restored {
        resume,
        saved_files,
        restored,
    }
}

/// How long a start waits for the state directory while another sigwatch
/// (the pod being replaced, in a rolling update with surge) still holds it.
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// Takes the state directory, waiting (bounded) while another process
/// still holds it.
async fn take_state_dir(dir: &std::path::Path) -> Result<crate::durable::DirLock, AppError> {
    use crate::durable::{DirLock, LockError};
    let deadline = tokio::time::Instant::now() + LOCK_WAIT;
    let mut said = false;
    loop {
        match DirLock::take(dir) {
            Ok(lock) => return Ok(lock),
            Err(LockError::Held { .. }) if tokio::time::Instant::now() < deadline => {
                if !said {
                    tracing::warn!(dir = %dir.display(), wait = LOCK_WAIT.as_secs(), "The state directory is held by another sigwatch; waiting for it to stop.");
                    said = true;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(AppError::Setup(e.to_string())),
        }
    }
}

/// The state at the stop, whatever the reason: a restart goes on from
/// exactly here.
pub(super) fn final_checkpoint(
    k: &mut StateKeeper,
    engine: &Engine,
    d: &Delivery,
    p: &PipelineOptions,
) {
    k.save(engine, d, true);
    let budget =
        Duration::from_nanos(p.shutdown_timeout.ns().max(0) as u64).max(Duration::from_secs(1));
    if !k.flush(budget) {
        tracing::warn!(
            "The final checkpoint was not written (see above); a restart resumes from the previous one."
        );
    }
}

/// Where the mined templates are kept under `--state-dir`.
pub(super) fn templates_path(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join("templates.json")
}

/// The state directory of a running `sigwatch run`: when to checkpoint and
/// what goes in (see `checkpoint`). Checkpoints are taken every
/// `--checkpoint-interval` while anything moves, soon after a step that
/// notified (so a firing alert is in the state that follows it; at most
/// every 20 times what a checkpoint costs, so a flood of alerts cannot
/// spend the loop on checkpoints), and at the stop. The templates are
/// saved beside it at the same interval when they changed.
pub struct StateKeeper {
    dir: PathBuf,
    writer: checkpoint::Writer,
    interval: Duration,
    /// Loki cursors of the state in memory.
    pub(super) loki: BTreeMap<String, i64>,
    /// File offsets of the state in memory.
    pub(super) files: BTreeMap<String, (String, u64)>,
    generation: u64,
    last: std::time::Instant,
    cost: Duration,
    dirty: bool,
    urgent: bool,
    mined: Option<u64>,
    /// Alertmanager receivers, whose re-sent alerts are saved too.
    alertmanagers: Vec<Arc<crate::notify::alertmanager::Alertmanager>>,
    /// The ingest log, the position the state in memory covers, and the
    /// positions of checkpoints submitted (generation, position): a
    /// segment goes once a checkpoint past it is on disk.
    wal: Option<Arc<crate::ingest::Wal>>,
    pub(super) wal_at: Option<u64>,
    wal_saved: std::collections::VecDeque<(u64, u64)>,
    _lock: Option<crate::durable::DirLock>,
}

impl StateKeeper {
    pub(super) fn new(
        dir: &std::path::Path,
        a: &SourceOptions,
        loki: BTreeMap<String, i64>,
        files: BTreeMap<String, (String, u64)>,
        lock: Option<crate::durable::DirLock>,
        alertmanagers: Vec<Arc<crate::notify::alertmanager::Alertmanager>>,
    ) -> Result<StateKeeper, AppError> {
        Ok(StateKeeper {
            dir: dir.to_path_buf(),
            writer: checkpoint::Writer::spawn()?,
            interval: Duration::from_nanos(a.checkpoint_interval.ns().max(1) as u64),
            loki,
            files,
            generation: 0,
            last: std::time::Instant::now(),
            cost: Duration::ZERO,
            dirty: false,
            urgent: false,
            mined: None,
            alertmanagers,
            wal: None,
            wal_at: None,
            wal_saved: Default::default(),
            _lock: lock,
        })
    }

    /// Keeps the ingest log's position in the checkpoints, from `at`.
    pub(super) fn with_wal(
        mut self,
        wal: Option<Arc<crate::ingest::Wal>>,
        at: Option<u64>,
    ) -> StateKeeper {
        self.wal = wal;
        self.wal_at = at;
        self
    }

    /// Removes the log segments a checkpoint on disk covers.
    pub(super) fn trim_wal(&mut self) {
        let Some(wal) = &self.wal else { return };
        let written = self.writer.written(&checkpoint::path(&self.dir));
        let mut upto = None;
        while let Some(&(generation, pos)) = self.wal_saved.front() {
            if written.is_none_or(|w| generation > w) {
                break;
            }
            upto = Some(pos);
            self.wal_saved.pop_front();
        }
        if let Some(pos) = upto {
            wal.trim(pos);
        }
    }

    /// After a step of the loop: `moved` when input or time moved the
    /// state, `notified` when the step sent notifications.
    pub(super) fn step(&mut self, engine: &Engine, d: &Delivery, moved: bool, notified: bool) {
        self.dirty |= moved || notified;
        self.urgent |= notified;
        let since = self.last.elapsed();
        let gap = (self.cost * 20).clamp(Duration::from_millis(100), self.interval);
        if (self.urgent && since >= gap) || (self.dirty && since >= self.interval) {
            let templates = since >= self.interval || self.mined.is_none();
            self.save(engine, d, templates);
        }
    }

    /// Takes a checkpoint now (and saves the templates if `templates` and
    /// they changed); the write happens off the loop.
    pub(super) fn save(&mut self, engine: &Engine, d: &Delivery, templates: bool) {
        let start = std::time::Instant::now();
        let c = checkpoint::Checkpoint {
            version: checkpoint::VERSION,
            written_by: env!("CARGO_PKG_VERSION").to_string(),
            saved_at: crate::clock::format_rfc3339(wall_ns()),
            engine: engine.checkpoint(),
            incidents: d.incidents.save(),
            board: d.board.save(),
            flaps: d.flaps.save(),
            loki: self.loki.clone(),
            files: self.files.clone(),
            ingest_wal: self.wal_at,
            alertmanager: self
                .alertmanagers
                .iter()
                .map(|am| {
                    use crate::notify::Receiver;
                    (checkpoint::receiver_key(&am.identity()), am.active_state())
                })
                .collect(),
        };
        match serde_json::to_vec(&c) {
            Ok(bytes) => {
                self.generation += 1;
                self.writer
                    .submit(checkpoint::path(&self.dir), self.generation, bytes);
                if let Some(pos) = self.wal_at.filter(|_| self.wal.is_some()) {
                    self.wal_saved.push_back((self.generation, pos));
                }
                self.trim_wal();
            }
            Err(e) => tracing::error!(error = %e, "Cannot serialise the checkpoint."),
        }
        if templates {
            // Not before the first line is mined: a state saved before its
            // learning period started would read, at the next start, as a
            // baseline whose learning is over.
            let mined = engine.stats().novelty.map(|n| n.mined);
            if mined.is_some_and(|m| m > 0) && mined != self.mined {
                if let Some(st) = engine.templates_state() {
                    if let Ok(bytes) = serde_json::to_vec(&st) {
                        self.writer
                            .submit(templates_path(&self.dir), self.generation, bytes);
                    }
                }
                self.mined = mined;
            }
        }
        self.cost = start.elapsed();
        self.last = std::time::Instant::now();
        self.dirty = false;
        self.urgent = false;
    }

    /// Waits (bounded) for what was submitted to be on disk.
    pub(super) fn flush(&self, timeout: Duration) -> bool {
        self.writer.flush(timeout)
    }
}
