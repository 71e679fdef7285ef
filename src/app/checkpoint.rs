//! The checkpoint of `sigwatch run --state-dir`: everything a restart
//! needs so that on-call cannot tell it happened — every detector's
//! windows, pending `for` timers and populations, every pending and firing
//! alert, the streams' sticky values, the open incidents, the status page's
//! firing alerts — together with the input positions they are the result
//! of (Loki cursors, file offsets). One file, `checkpoint.json`, written
//! atomically ([`crate::durable`]) by a thread of its own, so the live loop
//! never waits on the disk.
//!
//! Because the positions and the state are saved together, a restart
//! resumes reading exactly where the saved state stopped: lines after it
//! are read again and give the same alerts, which the receivers' spools
//! recognise as already delivered (never paged twice). From a pipe
//! (stdin) nothing can be read again: a crash loses what the detectors
//! learnt since the last checkpoint (at most one interval, 5 s by default);
//! SIGTERM loses nothing.
//!
//! The file is versioned: a file of another format is refused with a
//! message saying so (and what to do), never half-read.

use super::AppError;
use crate::alert::Notification;
use crate::durable::{Outcome, Rewriter};
use crate::engine::EngineState;
use crate::incident::IncidentsState;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The format this version writes.
pub const VERSION: u32 = 2;

/// The checkpoint's file name in the state directory.
pub const FILE: &str = "checkpoint.json";

/// The checkpoint file's content.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Checkpoint {
    /// Format version ([`VERSION`]).
    pub version: u32,
    /// The sigwatch version that wrote it.
    pub written_by: String,
    /// Wall time of the write (RFC 3339).
    pub saved_at: String,
    /// Detectors, alerts, streams, clocks.
    pub engine: EngineState,
    /// Open and recent incidents.
    pub incidents: IncidentsState,
    /// Firing alerts as the status page shows them.
    #[serde(default)]
    pub board: Vec<Notification>,
    /// Resolutions held for their flap window, and the episodes that went
    /// on through a flap.
    #[serde(default)]
    pub flaps: crate::alert::FlapState,
    /// Loki query → cursor (ns): everything before it is in this state.
    #[serde(default)]
    pub loki: BTreeMap<String, i64>,
    /// Followed files: "dev:ino" → (path, offset of the next line).
    #[serde(default)]
    pub files: BTreeMap<String, (String, u64)>,
    /// Per Alertmanager receiver (a digest of its URLs): the alerts it keeps
    /// re-sending.
    #[serde(default)]
    pub alertmanager: BTreeMap<String, crate::notify::alertmanager::ActiveState>,
    /// The ingest log's position (`run --ingest`/`--syslog` with a state
    /// directory): every batch logged before it is in this state.
    #[serde(default)]
    pub ingest_wal: Option<u64>,
}

/// The key of an Alertmanager receiver in [`Checkpoint::alertmanager`].
pub fn receiver_key(identity: &str) -> String {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(identity.as_bytes());
    format!("{:016x}", h.finish())
}

/// What a state directory held at start.
#[derive(Debug)]
pub enum Loaded {
    /// Nothing: a fresh start.
    Fresh,
    /// A checkpoint of this format.
    Current(Box<Checkpoint>),
}

/// The checkpoint file of a state directory.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// Reads the state directory: this format's checkpoint, or nothing. A file that cannot be read, or of a newer
/// format, is a setup error saying what to do.
pub fn load(dir: &Path) -> Result<Loaded, AppError> {
    let p = path(dir);
    match std::fs::read(&p) {
        Ok(bytes) => parse(&p, &bytes).map(|c| Loaded::Current(Box::new(c))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Loaded::Fresh),
        Err(e) => Err(AppError::Io {
            what: format!("cannot read {}", p.display()),
            source: e,
        }),
    }
}

fn parse(p: &Path, bytes: &[u8]) -> Result<Checkpoint, AppError> {
    #[derive(serde::Deserialize)]
    struct Head {
        version: u32,
        #[serde(default)]
        written_by: String,
    }
    let fresh = "move it away to start fresh (alerts firing now will then page again)";
    let head: Head = serde_json::from_slice(bytes).map_err(|e| {
        AppError::Setup(format!(
            "{}: not a sigwatch checkpoint ({e}); {fresh}",
            p.display()
        ))
    })?;
    if head.version > VERSION {
        return Err(AppError::Setup(format!(
            "{}: written by sigwatch {} in checkpoint format {}; this sigwatch {} reads formats up to {VERSION}. Run the newer version, or {fresh}",
            p.display(),
            if head.written_by.is_empty() { "(unknown)" } else { &head.written_by },
            head.version,
            env!("CARGO_PKG_VERSION"),
        )));
    }
    if head.version < VERSION {
        return Err(AppError::Setup(format!(
            "{}: checkpoint format {} is not one this version writes or reads; {fresh}",
            p.display(),
            head.version
        )));
    }
    serde_json::from_slice(bytes).map_err(|e| {
        AppError::Setup(format!(
            "{}: corrupt checkpoint ({e}); {fresh}",
            p.display()
        ))
    })
}

/// Files written off the live loop: the latest bytes submitted for a file
/// replace older ones not yet written, so a slow disk delays state but
/// never queues it up; a failing disk is retried with backoff
/// ([`Rewriter`]).
pub struct Writer {
    shared: Arc<(Mutex<Slots>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct Slots {
    /// Path → (generation, bytes) waiting to be written.
    pending: BTreeMap<PathBuf, (u64, Vec<u8>)>,
    /// Path → newest generation written.
    written: BTreeMap<PathBuf, u64>,
    /// A write is under way (taken from `pending`, not yet done).
    busy: bool,
    /// Flushing: every pending file is tried once now, backoff or not,
    /// and given up if that fails (the stop does not wait on a full disk).
    force: bool,
    /// Files whose last forced write failed.
    failed: std::collections::BTreeSet<PathBuf>,
    stop: bool,
}

impl Writer {
    /// Starts the writer thread.
    pub fn spawn() -> Result<Writer, AppError> {
        let shared: Arc<(Mutex<Slots>, Condvar)> = Arc::default();
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("sigwatch-state".into())
            .spawn(move || write_loop(&s))
            .map_err(AppError::io("cannot start the state writer"))?;
        Ok(Writer {
            shared,
            thread: Some(thread),
        })
    }

    /// Queues `bytes` as generation `generation` of `path`.
    pub fn submit(&self, path: PathBuf, generation: u64, bytes: Vec<u8>) {
        let (lock, cv) = &*self.shared;
        if let Ok(mut s) = lock.lock() {
            s.pending.insert(path, (generation, bytes));
            cv.notify_all();
        }
    }

    /// The newest generation of `path` on disk.
    pub fn written(&self, path: &Path) -> Option<u64> {
        let (lock, _) = &*self.shared;
        lock.lock().ok()?.written.get(path).copied()
    }

    /// Waits up to `timeout` for everything submitted to be written;
    /// returns whether it was.
    pub fn flush(&self, timeout: Duration) -> bool {
        let (lock, cv) = &*self.shared;
        let deadline = Instant::now() + timeout;
        let Ok(mut s) = lock.lock() else {
            return false;
        };
        s.force = true;
        cv.notify_all();
        while !s.pending.is_empty() || s.busy {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                s.force = false;
                return false;
            }
            match cv.wait_timeout(s, left.min(Duration::from_millis(100))) {
                Ok((g, _)) => s = g,
                Err(_) => return false,
            }
        }
        s.force = false;
        // Whether everything submitted made it to disk.
        s.failed.is_empty()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let (lock, cv) = &*self.shared;
        if let Ok(mut s) = lock.lock() {
            s.stop = true;
            cv.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn write_loop(shared: &(Mutex<Slots>, Condvar)) {
    let (lock, cv) = shared;
    let mut writers: BTreeMap<PathBuf, Rewriter> = BTreeMap::new();
    let Ok(mut s) = lock.lock() else { return };
    loop {
        // The next file due: pending and not backing off.
        let now = Instant::now();
        let mut due = None;
        let mut wake = None::<Instant>;
        for p in s.pending.keys() {
            match writers.get(p).and_then(Rewriter::retry_at) {
                Some(t) if t > now && !s.force => {
                    wake = Some(wake.map_or(t, |w: Instant| w.min(t)))
                }
                _ => {
                    due = Some(p.clone());
                    break;
                }
            }
        }
        let Some(p) = due else {
            if s.stop {
                return;
            }
            let wait = wake.map_or(Duration::from_secs(3600), |w| {
                w.saturating_duration_since(now)
            });
            s = match cv.wait_timeout(s, wait) {
                Ok((g, _)) => g,
                Err(_) => return,
            };
            continue;
        };
        let Some((generation, bytes)) = s.pending.remove(&p) else {
            continue;
        };
        s.busy = true;
        let force = s.force;
        drop(s);
        let w = writers
            .entry(p.clone())
            .or_insert_with(|| Rewriter::new(p.clone(), what(&p)));
        if force {
            w.retry_now();
        }
        let outcome = w.write(&bytes);
        s = match lock.lock() {
            Ok(g) => g,
            Err(_) => return,
        };
        s.busy = false;
        match outcome {
            Outcome::Written => {
                s.failed.remove(&p);
                s.written.insert(p, generation);
            }
            Outcome::Failed | Outcome::Deferred if force || s.stop => {
                // Flushing or stopping: one attempt is all it gets.
                s.failed.insert(p);
            }
            Outcome::Failed | Outcome::Deferred => {
                // Keep it for the retry unless something newer came.
                s.pending.entry(p).or_insert((generation, bytes));
            }
        }
        cv.notify_all();
    }
}

/// What a state file is called in logs.
fn what(p: &Path) -> &'static str {
    match p.file_name().and_then(|n| n.to_str()) {
        Some(FILE) => "checkpoint",
        Some("templates.json") => "templates",
        _ => "state file",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_format_is_refused_with_a_clear_message_and_garbage_too() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            path(d.path()),
            r#"{"version": 9, "written_by": "9.9.9", "future": true}"#,
        )
        .unwrap();
        let e = load(d.path()).unwrap_err().to_string();
        assert!(
            e.contains("format 9") && e.contains("9.9.9") && e.contains("reads formats up to 2"),
            "{e}"
        );
        std::fs::write(path(d.path()), "{not json").unwrap();
        let e = load(d.path()).unwrap_err().to_string();
        assert!(e.contains("not a sigwatch checkpoint"), "{e}");
    }

    #[test]
    fn the_writer_keeps_the_latest_bytes_and_flushes() {
        let d = tempfile::tempdir().unwrap();
        let w = Writer::spawn().unwrap();
        let p = d.path().join("x.json");
        for g in 1..=20u64 {
            w.submit(p.clone(), g, g.to_string().into_bytes());
        }
        assert!(w.flush(Duration::from_secs(10)));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "20");
        assert_eq!(w.written(&p), Some(20));
    }
}
