//! The ingest write-ahead log: with `--state-dir`, a push is answered 2xx
//! only once its lines are on disk, so a crash (kill -9) after the answer
//! loses none of them. Every batch the listeners take is appended here and
//! fsynced — in groups: one fsync covers every batch that arrived while the
//! previous one ran — before it goes to the detection loop, in log order.
//! The checkpoint records the log position its state covers; at a start
//! the batches after it are fed again (the ledger keeps what was already
//! notified from being sent twice), and segments wholly before a written
//! checkpoint are removed.
//!
//! A segment is `wal/<first position>.log`, a sequence of records
//! `[length u32 LE][crc32 u32 LE][JSON batch]`; a torn tail (a record cut
//! by the crash, or one whose checksum fails) ends the segment there.

use super::{IngestError, Pushed};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use tokio::sync::{mpsc, oneshot};

/// A segment is closed and a new one begun past this size.
const SEGMENT_BYTES: u64 = 16 << 20;
/// Batches written under one fsync at most.
const GROUP: usize = 256;
/// The largest record read back (a torn length beyond it ends the segment).
const MAX_RECORD: u32 = 512 << 20;

/// What the listeners took, as it is logged and fed again.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum Batch {
    /// Loki or OTLP entries: (stream labels, metadata, time ns, line).
    Entries(Vec<EntryRow>),
    /// Syslog messages: their labels and lines, and when they arrived.
    Lines {
        /// Arrival (wall ns), standing in for lines without a time.
        arrival: i64,
        /// (labels, line).
        lines: Vec<(Vec<(String, String)>, String)>,
    },
}

/// One logged entry: (stream labels, metadata, time ns, line).
pub type EntryRow = (Vec<(String, String)>, Vec<(String, String)>, i64, String);

/// A batch on its way: the input it becomes, the reserved place in the
/// loop's channel, and who waits for it to be on disk.
struct Job {
    bytes: Vec<u8>,
    input: Pushed,
    slot: mpsc::OwnedPermit<Pushed>,
    done: oneshot::Sender<bool>,
}

/// The writer's handle.
pub struct Wal {
    tx: mpsc::Sender<Job>,
    dir: PathBuf,
}

fn segment_path(dir: &Path, start: u64) -> PathBuf {
    dir.join(format!("{start:020}.log"))
}

/// The segments of `dir`, by first position.
fn segments(dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut out: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            let start = p.file_stem()?.to_str()?.parse::<u64>().ok()?;
            (p.extension()? == "log").then_some((start, p))
        })
        .collect();
    out.sort();
    out
}

/// Reads a segment's whole records: (end position, batch) each, and the
/// position where the valid part ends.
fn read_segment(start: u64, path: &Path) -> (Vec<(u64, Batch)>, u64) {
    let mut out = Vec::new();
    let mut bytes = Vec::new();
    if std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .is_err()
    {
        return (out, start);
    }
    let mut at = 0usize;
    while at + 8 <= bytes.len() {
        let len = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        let crc = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]);
        let end = at + 8 + len as usize;
        if len > MAX_RECORD || end > bytes.len() {
            break;
        }
        let payload = &bytes[at + 8..end];
        if crc32fast::hash(payload) != crc {
            break;
        }
        let Ok(batch) = serde_json::from_slice::<Batch>(payload) else {
            break;
        };
        at = end;
        out.push((start + at as u64, batch));
    }
    (out, start + at as u64)
}

impl Wal {
    /// Opens the log under `state_dir/wal`: the batches after `after` (the
    /// checkpoint's position) to feed again, and the writer, which starts a
    /// fresh segment where the valid log ends.
    pub fn open(
        state_dir: &Path,
        after: Option<u64>,
    ) -> Result<(Wal, Vec<(u64, Batch)>), IngestError> {
        let dir = state_dir.join("wal");
        crate::durable::private_dir(&dir).map_err(|e| {
            IngestError::io(format!("cannot create the ingest log {}", dir.display()))(e.source)
        })?;
        let after = after.unwrap_or(0);
        let mut again = Vec::new();
        let mut end = 0u64;
        for (start, path) in segments(&dir) {
            let (records, valid_end) = read_segment(start, &path);
            end = end.max(valid_end);
            again.extend(records.into_iter().filter(|(e, _)| *e > after));
        }
        let end = end.max(after);
        let (tx, rx) = mpsc::channel::<Job>(GROUP);
        let file = open_segment(&dir, end)?;
        let d = dir.clone();
        std::thread::Builder::new()
            .name("sigwatch-wal".into())
            .spawn(move || write_loop(rx, d, file, end))
            .map_err(IngestError::io("cannot start the ingest log writer"))?;
        Ok((Wal { tx, dir }, again))
    }

    /// Logs a batch: once it is on disk, `input` (marked with its position)
    /// goes to the loop through `slot`; returns whether it was written.
    pub async fn append(
        &self,
        batch: &Batch,
        input: Pushed,
        slot: mpsc::OwnedPermit<Pushed>,
    ) -> bool {
        let Ok(bytes) = serde_json::to_vec(batch) else {
            return false;
        };
        let (done, wait) = oneshot::channel();
        let job = Job {
            bytes,
            input,
            slot,
            done,
        };
        if self.tx.send(job).await.is_err() {
            return false;
        }
        wait.await.unwrap_or(false)
    }

    /// Removes the segments whose every record ends at or before `pos` (a
    /// position a checkpoint on disk covers). The newest segment stays.
    pub fn trim(&self, pos: u64) {
        trim(&self.dir, pos);
    }
}

fn trim(dir: &Path, pos: u64) {
    let segs = segments(dir);
    for w in segs.windows(2) {
        let (_, path) = &w[0];
        let (next_start, _) = w[1];
        if next_start <= pos {
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!(file = %path.display(), error = %e, "Cannot remove an ingest log segment the checkpoint covers.");
            }
        }
    }
}

fn open_segment(dir: &Path, start: u64) -> Result<std::fs::File, IngestError> {
    let path = segment_path(dir, start);
    let f = crate::durable::private_file(&path, true)
        .map_err(IngestError::io(format!("cannot open {}", path.display())))?;
    // The new file's name must be on disk too.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(f)
}

/// Appends groups of batches, one fsync a group, then hands each batch to
/// the loop in log order and answers its push.
fn write_loop(mut rx: mpsc::Receiver<Job>, dir: PathBuf, mut file: std::fs::File, mut pos: u64) {
    let mut seg_start = pos;
    while let Some(first) = rx.blocking_recv() {
        let mut jobs = vec![first];
        while jobs.len() < GROUP {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(_) => break,
            }
        }
        let mut buf = Vec::new();
        let mut ends = Vec::with_capacity(jobs.len());
        let mut at = pos;
        for j in &jobs {
            let len = u32::try_from(j.bytes.len()).unwrap_or(u32::MAX);
            buf.extend_from_slice(&len.to_le_bytes());
            buf.extend_from_slice(&crc32fast::hash(&j.bytes).to_le_bytes());
            buf.extend_from_slice(&j.bytes);
            at += 8 + j.bytes.len() as u64;
            ends.push(at);
        }
        let ok = file.write_all(&buf).and_then(|()| file.sync_data()).is_ok();
        if !ok {
            crate::durable::count_write_error();
            tracing::error!("Cannot write the ingest log; pushes are answered 503 until it can.");
            // What was half written is cut off where the log was whole.
            let _ = file.set_len(pos - seg_start);
        } else {
            pos = at;
        }
        for (j, end) in jobs.into_iter().zip(ends) {
            if ok {
                let mut input = j.input;
                input.wal = Some(end);
                j.slot.send(input);
            }
            let _ = j.done.send(ok);
        }
        if ok && pos - seg_start >= SEGMENT_BYTES {
            match open_segment(&dir, pos) {
                Ok(f) => {
                    file = f;
                    seg_start = pos;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Cannot begin a new ingest log segment; the current one grows.")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(line: &str) -> Batch {
        Batch::Entries(vec![(
            vec![("job".into(), "x".into())],
            vec![],
            1,
            line.into(),
        )])
    }

    #[test]
    fn a_torn_tail_ends_the_segment_and_later_records_survive_a_reopen() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("wal");
        std::fs::create_dir_all(&dir).unwrap();
        let mut bytes = Vec::new();
        let mut ends = Vec::new();
        for l in ["one", "two", "three"] {
            let p = serde_json::to_vec(&entries(l)).unwrap();
            bytes.extend_from_slice(&(p.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
            bytes.extend_from_slice(&p);
            ends.push(bytes.len() as u64);
        }
        // The third record torn by a crash.
        bytes.truncate(bytes.len() - 3);
        std::fs::write(segment_path(&dir, 0), &bytes).unwrap();
        let (records, end) = read_segment(0, &segment_path(&dir, 0));
        assert_eq!(records.len(), 2);
        assert_eq!(end, ends[1]);
        // A flipped byte fails the checksum.
        let mut bad = bytes.clone();
        bad[10] ^= 1;
        std::fs::write(segment_path(&dir, 0), &bad).unwrap();
        assert_eq!(read_segment(0, &segment_path(&dir, 0)).0.len(), 0);
        std::fs::write(segment_path(&dir, 0), &bytes).unwrap();
        // After the first record's position only the second is fed again.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (wal, again) = rt.block_on(async { Wal::open(d.path(), Some(ends[0])).unwrap() });
        assert_eq!(again.len(), 1);
        assert!(matches!(&again[0].1, Batch::Entries(e) if e[0].3 == "two"));
        // The writer begins a fresh segment where the valid log ends; the
        // old one goes once a checkpoint covers the new segment's start.
        assert!(segment_path(&dir, ends[1]).exists());
        wal.trim(ends[1]);
        assert!(!segment_path(&dir, 0).exists());
        assert!(segment_path(&dir, ends[1]).exists());
    }
}
