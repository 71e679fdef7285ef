//! Node-local file source: follows log files matching globs, as a DaemonSet
//! reading `/var/log/pods` would.
//!
//! Files are identified by (device, inode), not by path, so rotation by
//! rename-and-create is seen as what it is: the renamed file is read to its
//! end and then dropped, the new file at the same path is read from its
//! start. A file that shrinks below the read offset was truncated in place
//! (copytruncate) and is read again from 0. Only complete lines are handed
//! over; the offset checkpointed in `--state-dir` is the end of the last
//! complete line delivered, so a restart neither repeats nor skips lines.
//! Files are read round-robin in bounded slices, so one big file's backlog
//! cannot starve the others or get far ahead of them in time.

use super::Source;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Bytes read from one file per round.
pub const SLICE_BYTES: usize = 256 * 1024;
/// Longest line kept; the rest is dropped and counted.
pub const MAX_LINE_BYTES: usize = super::MAX_LINE_BYTES;

/// A file-source error.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A glob that does not parse.
    #[error("bad glob {0:?}: {1}")]
    Glob(String, String),
    /// The directory a path or glob lives in does not exist: a typo, not a
    /// file yet to be written.
    #[error("{0}: the directory {1} does not exist")]
    NoDirectory(String, String),
}

/// The directory part of a path or glob before its first wildcard.
fn literal_dir(glob: &str) -> PathBuf {
    let mut dir = PathBuf::new();
    let path = Path::new(glob);
    let n = path.components().count();
    for (i, c) in path.components().enumerate() {
        let s = c.as_os_str().to_string_lossy();
        if i + 1 == n || s.contains(['*', '?', '[']) {
            break;
        }
        dir.push(c);
    }
    if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir
    }
}

/// Counters of the file source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileStats {
    /// Files opened.
    pub opened: u64,
    /// Rotations seen (a path now names another file).
    pub rotations: u64,
    /// Truncations seen (a file shrank below its offset).
    pub truncations: u64,
    /// Lines cut at [`MAX_LINE_BYTES`].
    pub truncated_lines: u64,
    /// Read errors (file vanished, permission) — the file is retried.
    pub read_errors: u64,
}

/// Identity of a file: (device, inode).
pub type FileId = (u64, u64);

struct Tracked {
    path: PathBuf,
    file: File,
    /// Offset of the end of the last complete line handed over.
    offset: u64,
    /// Next byte to read (≥ offset: bytes of an incomplete line were read).
    read_pos: u64,
    /// Bytes after `offset` read but not yet ending in a newline (bounded).
    pending: Vec<u8>,
    skipping: bool,
    source: Source,
    /// The path no longer names this file: drop it once drained.
    rotated: bool,
}

/// Lines read in one round from one file.
#[derive(Debug)]
pub struct FileLines {
    /// The file's source (stream name and labels from its path).
    pub source: Source,
    /// Complete lines, without newlines.
    pub lines: Vec<String>,
}

/// The tailer: globs, tracked files, offsets.
pub struct Tailer {
    globs: Vec<String>,
    files: HashMap<FileId, Tracked>,
    /// Offsets from a checkpoint, used when a file is first opened.
    resume: HashMap<FileId, u64>,
    stats: FileStats,
}

/// Context labels from a kubelet log path:
/// `/var/log/pods/<ns>_<pod>_<uid>/<container>/N.log` or
/// `/var/log/containers/<pod>_<ns>_<container>-<id>.log`.
pub fn labels_from_path(path: &Path) -> Vec<(String, String)> {
    let parts: Vec<&str> = path.iter().filter_map(|p| p.to_str()).collect();
    let mut out = Vec::new();
    if let Some(i) = parts.iter().position(|p| *p == "pods") {
        if let (Some(dir), Some(container)) = (parts.get(i + 1), parts.get(i + 2)) {
            let mut it = dir.splitn(3, '_');
            if let (Some(ns), Some(pod), Some(_uid)) = (it.next(), it.next(), it.next()) {
                out.push(("namespace".to_string(), ns.to_string()));
                out.push(("pod".to_string(), pod.to_string()));
                if parts.len() > i + 3 {
                    out.push(("container".to_string(), container.to_string()));
                }
                return out;
            }
        }
    }
    if parts.contains(&"containers") {
        if let Some(name) = path.file_stem().and_then(|s| s.to_str()) {
            let mut it = name.splitn(3, '_');
            if let (Some(pod), Some(ns), Some(rest)) = (it.next(), it.next(), it.next()) {
                let container = rest.rsplit_once('-').map_or(rest, |(c, _)| c);
                out.push(("namespace".to_string(), ns.to_string()));
                out.push(("pod".to_string(), pod.to_string()));
                out.push(("container".to_string(), container.to_string()));
            }
        }
    }
    out
}

fn source_for(path: &Path) -> Source {
    let labels = labels_from_path(path);
    let get = |k: &str| labels.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    // One stream per container, so a rotated file continues its stream
    // (sticky fields, partial lines) under the new inode.
    let name = match (get("namespace"), get("pod"), get("container")) {
        (Some(ns), Some(pod), Some(c)) => format!("{ns}/{pod}/{c}"),
        _ => path.display().to_string(),
    };
    let mut labels = labels;
    if let Some(f) = path.file_name().and_then(|f| f.to_str()) {
        labels.push(("file".to_string(), f.to_string()));
    }
    Source {
        name,
        labels,
        modified: None,
        kind: super::SourceKind::Named,
    }
}

fn file_id(meta: &std::fs::Metadata) -> FileId {
    (meta.dev(), meta.ino())
}

impl Tailer {
    /// A tailer over these globs, resuming from checkpointed offsets.
    pub fn new(globs: &[String], resume: HashMap<FileId, u64>) -> Result<Tailer, FileError> {
        for g in globs {
            glob::Pattern::new(g).map_err(|e| FileError::Glob(g.clone(), e.to_string()))?;
            let dir = literal_dir(g);
            if !dir.is_dir() {
                return Err(FileError::NoDirectory(g.clone(), dir.display().to_string()));
            }
            let now = glob::glob(g).map(|p| p.flatten().any(|p| p.is_file()));
            if now.is_ok_and(|any| !any) {
                tracing::warn!(
                    file = %g,
                    "No file is at {g} yet: sigwatch waits for it and reads each file from its start when it appears."
                );
            }
        }
        Ok(Tailer {
            globs: globs.to_vec(),
            files: HashMap::new(),
            resume,
            stats: FileStats::default(),
        })
    }

    /// Counters.
    pub fn stats(&self) -> &FileStats {
        &self.stats
    }

    /// Offsets of complete lines delivered, per file: the checkpoint.
    pub fn offsets(&self) -> BTreeMap<String, (String, u64)> {
        self.files
            .iter()
            .map(|((dev, ino), t)| {
                (
                    format!("{dev}:{ino}"),
                    (t.path.display().to_string(), t.offset),
                )
            })
            .collect()
    }

    /// Finds new files, rotations and truncations.
    fn discover(&mut self) {
        let mut live: HashMap<PathBuf, FileId> = HashMap::new();
        for g in &self.globs {
            let Ok(paths) = glob::glob(g) else { continue };
            for p in paths.flatten() {
                let Ok(meta) = std::fs::metadata(&p) else {
                    continue;
                };
                if meta.is_file() {
                    live.insert(p, file_id(&meta));
                }
            }
        }
        // Tracked files whose path now names another file were rotated away.
        for t in self.files.values_mut() {
            if !t.rotated && live.get(&t.path).is_none_or(|id| !self_id_eq(&t.file, *id)) {
                t.rotated = true;
                self.stats.rotations += 1;
            }
        }
        let mut paths: Vec<_> = live.into_iter().collect();
        paths.sort();
        for (p, id) in paths {
            if self.files.contains_key(&id) {
                continue;
            }
            let Ok(file) = File::open(&p) else {
                self.stats.read_errors += 1;
                continue;
            };
            let offset = self.resume.remove(&id).unwrap_or(0);
            self.stats.opened += 1;
            let source = source_for(&p);
            let t = Tracked {
                path: p,
                file,
                offset,
                read_pos: offset,
                pending: Vec::new(),
                skipping: false,
                source,
                rotated: false,
            };
            self.files.insert(id, t);
        }
    }

    /// One round: discover files, then read up to [`SLICE_BYTES`] from each.
    /// Returns complete lines per file, in file order (by path).
    pub fn poll(&mut self) -> Vec<FileLines> {
        self.discover();
        let mut ids: Vec<FileId> = self.files.keys().copied().collect();
        ids.sort_by(|a, b| self.files[a].path.cmp(&self.files[b].path).then(a.cmp(b)));
        let mut out = Vec::new();
        let mut drained = Vec::new();
        for id in ids {
            let Some(t) = self.files.get_mut(&id) else {
                continue;
            };
            let (lines, at_eof) = read_slice(t, &mut self.stats);
            if !lines.is_empty() {
                out.push(FileLines {
                    source: t.source.clone(),
                    lines,
                });
            }
            if t.rotated && at_eof {
                drained.push(id);
            }
        }
        for id in drained {
            self.files.remove(&id);
        }
        out
    }
}

fn self_id_eq(f: &File, id: FileId) -> bool {
    f.metadata().map(|m| file_id(&m) == id).unwrap_or(false)
}

/// Reads one slice from a tracked file; returns complete lines and whether
/// the file is at its end.
fn read_slice(t: &mut Tracked, stats: &mut FileStats) -> (Vec<String>, bool) {
    let len = match t.file.metadata() {
        Ok(m) => m.len(),
        Err(_) => {
            stats.read_errors += 1;
            return (Vec::new(), true);
        }
    };
    if len < t.read_pos {
        // Truncated in place (copytruncate): start over from the beginning.
        stats.truncations += 1;
        t.offset = 0;
        t.read_pos = 0;
        t.pending.clear();
        t.skipping = false;
    }
    if t.file.seek(SeekFrom::Start(t.read_pos)).is_err() {
        stats.read_errors += 1;
        return (Vec::new(), true);
    }
    let mut buf = vec![0u8; SLICE_BYTES];
    let n = match t.file.read(&mut buf) {
        Ok(n) => n,
        Err(_) => {
            stats.read_errors += 1;
            return (Vec::new(), true);
        }
    };
    buf.truncate(n);
    let base = t.read_pos;
    t.read_pos += n as u64;
    let mut lines = Vec::new();
    let mut idx = 0usize;
    while let Some(rel) = memchr::memchr(b'\n', &buf[idx..]) {
        let nl = idx + rel;
        push_bounded(t, &buf[idx..nl], stats);
        let line = std::mem::take(&mut t.pending);
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        let text = String::from_utf8_lossy(line);
        if matches!(text, std::borrow::Cow::Owned(_)) {
            crate::stats::count_invalid_utf8();
        }
        lines.push(text.into_owned());
        // The offset covers the whole line, including any part dropped.
        t.offset = base + nl as u64 + 1;
        t.skipping = false;
        idx = nl + 1;
    }
    push_bounded(t, &buf[idx..], stats);
    (lines, t.read_pos >= len)
}

/// Appends to the pending line up to the line bound ([`super::max_line_bytes`]); the rest of an
/// over-long line is dropped (and counted once).
fn push_bounded(t: &mut Tracked, bytes: &[u8], stats: &mut FileStats) {
    if t.skipping {
        return;
    }
    let room = super::max_line_bytes().saturating_sub(t.pending.len());
    if bytes.len() > room {
        stats.truncated_lines += 1;
        crate::stats::count_truncated();
        t.skipping = true;
    }
    t.pending.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

/// Lines of one round and the offsets after them.
#[derive(Debug)]
pub struct FileBatch {
    /// Complete lines per file.
    pub files: Vec<FileLines>,
    /// Offsets covering exactly the lines above and everything before.
    pub offsets: BTreeMap<String, (String, u64)>,
    /// Wall time the round was read (ns).
    pub arrival: i64,
}

/// The pause between two idle rounds over `files` tracked files: 50 ms
/// (a line appended to a quiet file is read within 50 ms), a quarter of a
/// millisecond more per file — a round lists the directories and checks
/// every file — up to `most`.
pub fn idle_pause(files: usize, most: std::time::Duration) -> std::time::Duration {
    let ms = 50.0 + files as f64 / 4.0;
    std::time::Duration::from_micros((ms * 1000.0) as u64).min(most)
}

/// Runs the tailer on its own thread (file I/O blocks), a round at once
/// while there is more to read and after [`idle_pause`] (at most
/// `interval`) when not, into a bounded channel: when detection falls
/// behind, reading waits instead of buffering without bound.
pub fn spawn(
    mut tailer: Tailer,
    interval: std::time::Duration,
) -> tokio::sync::mpsc::Receiver<FileBatch> {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    std::thread::spawn(move || loop {
        let files = tailer.poll();
        let busy = !files.is_empty();
        if busy {
            let batch = FileBatch {
                files,
                offsets: tailer.offsets(),
                arrival: crate::clock::wall_ns(),
            };
            if tx.blocking_send(batch).is_err() {
                return;
            }
        } else if tx.is_closed() {
            return;
        }
        if !busy {
            std::thread::sleep(idle_pause(tailer.files.len(), interval));
        }
    });
    rx
}

/// Offsets as [`Tailer::offsets`] gives them ("dev:ino" → (path,
/// offset)), keyed by file identity for [`Tailer::new`].
pub fn parse_offsets(m: &BTreeMap<String, (String, u64)>) -> HashMap<FileId, u64> {
    let mut out = HashMap::new();
    for (k, (_, off)) in m {
        if let Some((d, i)) = k.split_once(':') {
            if let (Ok(d), Ok(i)) = (d.parse(), i.parse()) {
                out.insert((d, i), *off);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_few_files_are_checked_often_and_thousands_no_more_than_asked() {
        let most = std::time::Duration::from_millis(250);
        assert_eq!(idle_pause(0, most).as_millis(), 50);
        assert_eq!(idle_pause(100, most).as_millis(), 75);
        assert_eq!(idle_pause(5000, most), most);
        assert_eq!(
            idle_pause(1, std::time::Duration::from_millis(10)).as_millis(),
            10
        );
    }

    fn collect(t: &mut Tailer) -> Vec<String> {
        let mut out = Vec::new();
        // As the live loop does: keep polling (a long line spans slices).
        for _ in 0..12 {
            for f in t.poll() {
                out.extend(f.lines);
            }
        }
        out
    }

    fn append(p: &Path, lines: &[String]) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
    }

    fn range(prefix: &str, a: usize, b: usize) -> Vec<String> {
        (a..b).map(|i| format!("{prefix}{i}")).collect()
    }

    #[test]
    fn labels_come_from_kubelet_paths() {
        let l = labels_from_path(Path::new(
            "/var/log/pods/livekit_livekit-server-0_5e7b1fd3-11/livekit-server/0.log",
        ));
        assert_eq!(
            l,
            vec![
                ("namespace".into(), "livekit".into()),
                ("pod".into(), "livekit-server-0".into()),
                ("container".into(), "livekit-server".into())
            ]
        );
        let l = labels_from_path(Path::new(
            "/var/log/containers/egress-5f7d9c8b4-qx2lm_media_egress-0123abcd.log",
        ));
        assert_eq!(l[1], ("pod".into(), "egress-5f7d9c8b4-qx2lm".into()));
        assert_eq!(l[2], ("container".into(), "egress".into()));
        assert!(labels_from_path(Path::new("/tmp/app.log")).is_empty());
    }

    #[test]
    fn follows_growth_rotation_truncation_and_new_files_exactly_once() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("pods/ns_pod-a_uid/app");
        std::fs::create_dir_all(&dir).unwrap();
        let f0 = dir.join("0.log");
        append(&f0, &range("a", 0, 10));
        let glob = format!("{}/pods/*/*/*.log", d.path().display());
        let mut t = Tailer::new(&[glob], HashMap::new()).unwrap();
        let mut got = collect(&mut t);
        // Growth, with a partial line completed later.
        append(&f0, &range("a", 10, 15));
        std::fs::OpenOptions::new()
            .append(true)
            .open(&f0)
            .unwrap()
            .write_all(b"a1")
            .unwrap();
        got.extend(collect(&mut t));
        std::fs::OpenOptions::new()
            .append(true)
            .open(&f0)
            .unwrap()
            .write_all(b"5\n")
            .unwrap();
        // Rotation: rename, then lines still land in the old file before the new one appears.
        std::fs::rename(&f0, dir.join("0.log.20261129")).unwrap();
        append(&dir.join("0.log.20261129"), &range("a", 16, 18));
        append(&f0, &range("b", 0, 5));
        got.extend(collect(&mut t));
        // A new file for another container appears.
        let other = d.path().join("pods/ns_pod-b_uid/side/0.log");
        std::fs::create_dir_all(other.parent().unwrap()).unwrap();
        append(&other, &range("c", 0, 3));
        got.extend(collect(&mut t));
        let mut want = range("a", 0, 18);
        want.extend(range("b", 0, 5));
        want.extend(range("c", 0, 3));
        let mut sorted = got.clone();
        sorted.sort();
        want.sort();
        assert_eq!(sorted, want, "every line exactly once");
        assert_eq!(t.stats().rotations, 1);
        // Truncation in place (copytruncate) restarts at 0.
        std::fs::write(&f0, b"").unwrap();
        collect(&mut t);
        append(&f0, &range("d", 0, 2));
        assert_eq!(collect(&mut t), range("d", 0, 2));
        assert_eq!(t.stats().truncations, 1);
    }

    #[test]
    fn restart_from_checkpoint_reads_only_new_lines() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("app.log");
        append(&f, &range("x", 0, 5));
        let glob = format!("{}/*.log", d.path().display());
        let mut t = Tailer::new(std::slice::from_ref(&glob), HashMap::new()).unwrap();
        assert_eq!(collect(&mut t), range("x", 0, 5));
        // A partial line at the crash: not delivered, so not checkpointed.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&f)
            .unwrap()
            .write_all(b"x5-part")
            .unwrap();
        collect(&mut t);
        let saved = parse_offsets(&t.offsets());
        drop(t);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&f)
            .unwrap()
            .write_all(b"ial\n")
            .unwrap();
        append(&f, &range("x", 6, 8));
        let mut t = Tailer::new(&[glob], saved).unwrap();
        let mut want = vec!["x5-partial".to_string()];
        want.extend(range("x", 6, 8));
        assert_eq!(collect(&mut t), want);
    }

    #[test]
    fn long_lines_are_cut_and_counted() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("big.log");
        let big = "y".repeat(MAX_LINE_BYTES + 100);
        append(&f, &[big, "after".to_string()]);
        let mut t =
            Tailer::new(&[format!("{}/*.log", d.path().display())], HashMap::new()).unwrap();
        let got = collect(&mut t);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].len(), MAX_LINE_BYTES);
        assert_eq!(got[1], "after");
        assert_eq!(t.stats().truncated_lines, 1);
    }
}
