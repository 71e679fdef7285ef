//! Durable files: what `--state-dir` holds (checkpoints, spools,
//! templates) must survive `kill -9`, a full disk and a second process
//! pointed at the same directory.
//!
//! * [`write_atomic`] writes a temporary file of its own (a name no other
//!   writer uses: process id and a sequence number), fsyncs it, renames it
//!   over the target and fsyncs the directory. A crash at any moment leaves
//!   the old or the new file, never a torn one; a failed write removes its
//!   temporary file.
//! * [`Rewriter`] is for files rewritten again and again: a failure is
//!   logged once (with its cause) when it starts and once when writing works
//!   again, counted every time ([`write_errors`]), and retried with backoff
//!   (1 s doubling to 60 s) instead of on every change, so a full disk gives
//!   one error and a counter, not a line per notification.
//! * [`DirLock`] holds the state directory for one process: a second
//!   sigwatch on the same directory is a clear setup error, not two writers
//!   overwriting each other's checkpoints.
//! * Everything here is private to the user sigwatch runs as: the files
//!   hold raw log lines (the ingest log, spools, templates) that the web
//!   credential protects, so directories are created 0700 and files 0600
//!   (less what a stricter umask takes away). [`warn_if_shared`] says so,
//!   as ssh does, when a directory or a credential file is open to others.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A file that could not be written, read or locked, with its cause.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct DurableError {
    /// The file.
    pub path: String,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

fn err(path: &Path) -> impl FnOnce(std::io::Error) -> DurableError + '_ {
    move |source| DurableError {
        path: path.display().to_string(),
        source,
    }
}

static SEQ: AtomicU64 = AtomicU64::new(0);
static WRITE_ERRORS: AtomicU64 = AtomicU64::new(0);
/// Rewriters failing now: the first to fail logs the error, the last to
/// recover says so; the others (a full disk fails them all) stay quiet.
static FAILING: AtomicU64 = AtomicU64::new(0);

/// Failed writes of state files (checkpoint, spools, templates) since the
/// process started.
pub fn write_errors() -> u64 {
    WRITE_ERRORS.load(Ordering::Relaxed)
}

/// Counts a failed write of state kept outside these helpers (the ingest
/// log).
pub fn count_write_error() {
    WRITE_ERRORS.fetch_add(1, Ordering::Relaxed);
}

/// Suffix of every temporary file; [`remove_stale_temps`] removes them.
const TEMP_SUFFIX: &str = ".tmp";

/// The temporary name for `path`: hidden, in the same directory (so the
/// rename is atomic), unique to this process and this write.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.{}.{seq}{TEMP_SUFFIX}", std::process::id()))
}

/// The mode of files sigwatch writes: the user's alone.
pub const FILE_MODE: u32 = 0o600;
/// The mode of directories sigwatch creates.
pub const DIR_MODE: u32 = 0o700;

/// Creates `dir` and its missing parents 0700 (less the umask). A
/// directory that exists keeps its mode: making `/tmp` private would break
/// the machine; [`warn_if_shared`] says when it is open.
pub fn private_dir(dir: &Path) -> Result<(), DurableError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .map_err(err(dir))
}

/// Opens `path` for writing, created 0600 (less the umask) if missing.
pub fn private_file(path: &Path, truncate: bool) -> std::io::Result<File> {
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(truncate)
        .mode(FILE_MODE)
        .open(path)
}

/// Says (once per call, as a warning) when `path` is open to other users:
/// a permission bit for others on a credential file or on the state
/// directory. Returns whether it was. The group's bits are the owner's
/// choice (Kubernetes' `fsGroup` gives a pod's secrets to its group); a
/// path that cannot be read is left to whoever opens it.
pub fn warn_if_shared(path: &Path, what: &str) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o007 == 0 {
        return false;
    }
    let fix = if meta.is_dir() {
        "chmod 700"
    } else {
        "chmod 600"
    };
    tracing::warn!(
        path = %path.display(),
        mode = %format!("{mode:04o}"),
        "The {what} is readable by other users ({fix} it)."
    );
    true
}

/// Writes `bytes` to `path` atomically and durably (see the module docs).
/// Creates the parent directory (0700) if needed; the file is 0600.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), DurableError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(d) = dir {
        private_dir(d)?;
    }
    let tmp = temp_path(path);
    let written = (|| {
        let mut f = File::options()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(path)(e));
    }
    // The rename is durable once the directory is (best effort: some
    // filesystems refuse to open a directory for syncing).
    if let Some(d) = dir {
        if let Ok(f) = File::open(d) {
            let _ = f.sync_all();
        }
    }
    Ok(())
}

/// Removes temporary files left in `dir` by writers that died mid-write
/// (only while holding the directory's [`DirLock`]: nobody else writes
/// there). Returns how many were removed.
pub fn remove_stale_temps(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let stale = name.ends_with(TEMP_SUFFIX) && e.file_type().is_ok_and(|t| t.is_file());
        if stale && std::fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

/// Exclusive use of a state directory by this process, for as long as the
/// value lives (the operating system releases it when the process dies,
/// even by `kill -9`).
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Why a state directory cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it.
    #[error(
        "{dir} is in use by another sigwatch ({holder}); give each process its own --state-dir"
    )]
    Held {
        /// The directory.
        dir: String,
        /// What the lock file says of its holder.
        holder: String,
    },
    /// The lock file cannot be created or locked.
    #[error(transparent)]
    Io(#[from] DurableError),
}

impl DirLock {
    /// Takes `dir` (created if missing) or says who holds it.
    pub fn take(dir: &Path) -> Result<DirLock, LockError> {
        private_dir(dir)?;
        warn_if_shared(dir, "state directory");
        let path = dir.join("lock");
        let mut file = private_file(&path, false).map_err(err(&path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path)
                    .ok()
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "process unknown".into());
                return Err(LockError::Held {
                    dir: dir.display().to_string(),
                    holder,
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(err(&path)(e).into()),
        }
        // Who holds it, for the message a second process prints.
        let _ = file.set_len(0);
        let _ = writeln!(file, "pid {}", std::process::id());
        Ok(DirLock { _file: file })
    }
}

/// How a [`Rewriter`] write went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Written.
    Written,
    /// Failed now (counted; logged if it is the first failure).
    Failed,
    /// Not tried: still backing off after a failure. Try again later.
    Deferred,
}

/// A file rewritten again and again (see the module docs): logs a failure
/// once, counts every one, and backs off.
#[derive(Debug)]
pub struct Rewriter {
    path: PathBuf,
    what: &'static str,
    failures: u32,
    retry_at: Option<Instant>,
}

/// Longest wait between two attempts of a failing [`Rewriter`].
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

impl Rewriter {
    /// A rewriter of `path`; `what` names it in logs ("checkpoint", …).
    pub fn new(path: PathBuf, what: &'static str) -> Rewriter {
        Rewriter {
            path,
            what,
            failures: 0,
            retry_at: None,
        }
    }

    /// Whether the last write failed.
    #[cfg(test)]
    pub fn failing(&self) -> bool {
        self.failures > 0
    }

    /// When the next attempt is due while failing.
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    /// Ends the backoff: the next write is tried at once.
    pub fn retry_now(&mut self) {
        self.retry_at = None;
    }

    /// Writes `bytes` unless still backing off.
    pub fn write(&mut self, bytes: &[u8]) -> Outcome {
        if self.retry_at.is_some_and(|t| Instant::now() < t) {
            return Outcome::Deferred;
        }
        match write_atomic(&self.path, bytes) {
            Ok(()) => {
                if self.failures > 0 && FAILING.fetch_sub(1, Ordering::Relaxed) == 1 {
                    tracing::info!(file = %self.path.display(), failed_writes = write_errors(), "State files are written again.");
                }
                self.failures = 0;
                self.retry_at = None;
                Outcome::Written
            }
            Err(e) => {
                WRITE_ERRORS.fetch_add(1, Ordering::Relaxed);
                self.failures = self.failures.saturating_add(1);
                let wait = Duration::from_secs(1)
                    .saturating_mul(1u32 << self.failures.min(7).saturating_sub(1))
                    .min(MAX_BACKOFF);
                self.retry_at = Some(Instant::now() + wait);
                if self.failures == 1 {
                    if FAILING.fetch_add(1, Ordering::Relaxed) == 0 {
                        tracing::error!(error = %e.source, file = %e.path, "Cannot write the {}; state files are retried with backoff (up to {} s), every failure counted in state_write_errors.", self.what, MAX_BACKOFF.as_secs());
                    } else {
                        tracing::debug!(error = %e.source, file = %e.path, "Cannot write the {} either.", self.what);
                    }
                }
                Outcome::Failed
            }
        }
    }
}

impl Drop for Rewriter {
    fn drop(&mut self) {
        if self.failures > 0 {
            FAILING.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn what_is_written_is_the_users_alone() {
        let d = tempfile::tempdir().unwrap();
        // Under a permissive umask too, what sigwatch creates is private
        // (the process's umask is 022 or stricter in CI; 0600/0700 are
        // the most it leaves).
        let p = d.path().join("state").join("wal").join("checkpoint.json");
        write_atomic(&p, b"lines").unwrap();
        assert_eq!(mode(&p) & 0o077, 0, "file {:o}", mode(&p));
        assert_eq!(mode(p.parent().unwrap()) & 0o077, 0);
        assert_eq!(mode(&d.path().join("state")) & 0o077, 0);
        let _lock = DirLock::take(&d.path().join("state")).unwrap();
        assert_eq!(mode(&d.path().join("state/lock")) & 0o077, 0);
        let seg = d.path().join("state/wal/0000.log");
        drop(private_file(&seg, true).unwrap());
        assert_eq!(mode(&seg) & 0o077, 0);
        // A file made private stays so when rewritten over a shared one.
        let shared = d.path().join("templates.json");
        std::fs::write(&shared, "x").unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_atomic(&shared, b"y").unwrap();
        assert_eq!(mode(&shared), FILE_MODE);
    }

    #[test]
    fn a_directory_that_exists_keeps_its_mode_and_a_shared_file_is_told() {
        let d = tempfile::tempdir().unwrap();
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&open).unwrap();
        assert_eq!(mode(&open), 0o755, "an existing directory is not changed");
        assert!(warn_if_shared(&open, "state directory"));
        let key = d.path().join("token");
        std::fs::write(&key, "t").unwrap();
        for (m, shared) in [
            (0o644, true),
            (0o640, false),
            (0o440, false),
            (0o604, true),
            (0o600, false),
            (0o400, false),
        ] {
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(m)).unwrap();
            assert_eq!(warn_if_shared(&key, "token file"), shared, "{m:o}");
        }
        assert!(!warn_if_shared(&d.path().join("missing"), "token file"));
    }

    #[test]
    fn atomic_writes_replace_the_file_and_leave_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub").join("state.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<String> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["state.json".to_string()]);
    }

    #[test]
    fn concurrent_writers_of_one_file_never_collide() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("spool.json");
        std::thread::scope(|s| {
            for t in 0..8 {
                let p = p.clone();
                s.spawn(move || {
                    for i in 0..50 {
                        write_atomic(&p, format!("{t}-{i}").as_bytes()).unwrap();
                    }
                });
            }
        });
        let last = std::fs::read_to_string(&p).unwrap();
        assert!(last.ends_with("-49"), "{last}");
        assert_eq!(remove_stale_temps(d.path()), 0);
    }

    #[test]
    fn a_failed_write_is_counted_backs_off_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        // A directory where the file should be: every write fails.
        let p = d.path().join("ckpt");
        std::fs::create_dir(&p).unwrap();
        let before = write_errors();
        let mut w = Rewriter::new(p.clone(), "test file");
        assert_eq!(w.write(b"x"), Outcome::Failed);
        assert!(w.failing());
        assert_eq!(w.write(b"x"), Outcome::Deferred, "backing off");
        assert!(write_errors() > before);
        assert_eq!(remove_stale_temps(d.path()), 0, "no temporary left");
        std::fs::remove_dir(&p).unwrap();
        w.retry_at = Some(Instant::now());
        assert_eq!(w.write(b"x"), Outcome::Written);
        assert!(!w.failing());
    }

    #[test]
    fn stale_temporaries_are_removed_and_the_lock_is_exclusive() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(".state.json.1.2.tmp"), "x").unwrap();
        std::fs::write(d.path().join("keep.json"), "x").unwrap();
        assert_eq!(remove_stale_temps(d.path()), 1);
        assert!(d.path().join("keep.json").exists());
        let held = DirLock::take(d.path()).unwrap();
        // flock locks belong to the open file: a second open in this
        // process conflicts like another process would.
        match DirLock::take(d.path()) {
            Err(LockError::Held { holder, .. }) => {
                assert!(holder.contains(&std::process::id().to_string()), "{holder}")
            }
            other => panic!("{other:?}"),
        }
        drop(held);
        assert!(DirLock::take(d.path()).is_ok());
    }
}
