//! Blocks: input read in large pieces of complete lines, on a thread of its
//! own. The engine consumes blocks, not lines, so reading (and whatever
//! per-block work the caller adds, such as the literal scan) overlaps with
//! detection on the other core; a bounded channel between the two pushes
//! back on the reader when detection falls behind, so memory stays bounded.

use super::stdin::{Chunker, ReadStats};
use std::io::{self, Read};

/// Target size of a block read from a file (256 KiB).
pub const BLOCK_BYTES: usize = 1 << 18;

/// Complete lines, each ending in `\n`, valid UTF-8 (invalid bytes were
/// replaced), none longer than the line bound.
#[derive(Debug, Default, Clone)]
pub struct Block {
    /// The lines.
    pub data: String,
    /// For merged inputs: (end offset, input index) of each run of lines
    /// from one input, in order. Empty: every line is from input 0.
    pub runs: Vec<(u32, u32)>,
    /// Wall time the bytes arrived (live input only).
    pub arrival: Option<i64>,
    /// Bytes consumed from the inputs so far, this block included.
    pub consumed: u64,
    /// End offsets of the lines (their newlines), when known: found in one
    /// pass on the reader's thread ([`Block::index_lines`]), or given for
    /// lines that may hold newlines (Loki entries). Empty: lines end at
    /// each `\n`, found as they are read.
    pub ends: Vec<u32>,
    /// Lines are whole entries that may hold newlines and carriage returns
    /// of their own (Loki): nothing is trimmed.
    pub entries: bool,
    /// Each line's time from its transport (Loki), in line order. Empty:
    /// lines carry their own time.
    pub times: Vec<i64>,
}

/// One line of a block: its offsets and the input it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineAt<'b> {
    /// The line without its newline and trailing carriage returns.
    pub text: &'b str,
    /// Offset of the line's first byte in the block.
    pub start: usize,
    /// Offset of the line's end (its newline) in the block.
    pub end: usize,
    /// Index of the input it came from.
    pub input: usize,
    /// The line's time from its transport, if any (Loki).
    pub time: Option<i64>,
}

impl Block {
    /// A block of whole lines (which must not hold newlines), each with the
    /// index of its input.
    pub fn from_lines<'l>(lines: impl IntoIterator<Item = (usize, &'l str)>) -> Block {
        let mut b = Block::default();
        let mut last: Option<usize> = None;
        for (input, line) in lines {
            b.close_run(last, input);
            last = Some(input);
            b.data.push_str(line);
            b.data.push('\n');
        }
        b.close_run(last, usize::MAX);
        b
    }

    /// A block of entries that may hold newlines, each with its input and
    /// its transport time (Loki).
    pub fn from_entries<'l>(entries: impl IntoIterator<Item = (usize, &'l str, i64)>) -> Block {
        let mut b = Block {
            entries: true,
            ..Block::default()
        };
        let mut last: Option<usize> = None;
        for (input, line, time) in entries {
            b.close_run(last, input);
            last = Some(input);
            b.data.push_str(line);
            b.ends.push(b.data.len() as u32);
            b.data.push('\n');
            b.times.push(time);
        }
        b.close_run(last, usize::MAX);
        b
    }

    /// Finds every line end in one pass (cheaper than a search per line;
    /// done on the reader's thread). Blocks of entries keep theirs.
    pub fn index_lines(&mut self) {
        if self.entries || u32::try_from(self.data.len()).is_err() {
            return;
        }
        self.ends.clear();
        self.ends
            .extend(memchr::memchr_iter(b'\n', self.data.as_bytes()).map(|i| i as u32));
        if !self.data.ends_with('\n') && !self.data.is_empty() {
            self.ends.push(self.data.len() as u32);
        }
    }

    /// Ends the current run of lines from `last` if the next is from
    /// another input.
    pub(super) fn close_run(&mut self, last: Option<usize>, next: usize) {
        if let Some(l) = last.filter(|&l| l != next) {
            self.runs.push((self.data.len() as u32, l as u32));
        }
    }

    /// The block's lines, in order.
    pub fn lines(&self) -> impl Iterator<Item = LineAt<'_>> {
        let data = self.data.as_str();
        let mut start = 0;
        let mut run = 0;
        let mut n = 0;
        std::iter::from_fn(move || {
            if start >= data.len() {
                return None;
            }
            let end = match self.ends.get(n) {
                Some(&e) => (e as usize).min(data.len()),
                None if !self.ends.is_empty() => return None,
                None => memchr::memchr(b'\n', &data.as_bytes()[start..])
                    .map_or(data.len(), |i| start + i),
            };
            while self
                .runs
                .get(run)
                .is_some_and(|&(e, _)| (e as usize) <= start)
            {
                run += 1;
            }
            let input = self.runs.get(run).map_or(0, |&(_, i)| i as usize);
            let text = data.get(start..end).unwrap_or("");
            let text = if self.entries {
                text
            } else {
                text.trim_end_matches('\r')
            };
            let line = LineAt {
                text,
                start,
                end,
                input,
                time: self.times.get(n).copied(),
            };
            n += 1;
            start = end + 1;
            Some(line)
        })
    }
}

/// An input that cannot be opened or read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct ReadError {
    /// The input (a path, `stdin`).
    pub path: String,
    /// The I/O error.
    pub source: io::Error,
}

/// Turns framed bytes (complete lines) into text, replacing invalid UTF-8
/// line by line and counting the lines repaired.
fn to_text(bytes: Vec<u8>, stats: &mut ReadStats) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => {
            let bytes = e.into_bytes();
            let mut out = String::with_capacity(bytes.len() + 64);
            for line in bytes.split_inclusive(|&b| b == b'\n') {
                match std::str::from_utf8(line) {
                    Ok(l) => out.push_str(l),
                    Err(_) => {
                        stats.invalid_utf8 += 1;
                        crate::stats::count_invalid_utf8();
                        out.push_str(&String::from_utf8_lossy(line));
                    }
                }
            }
            out
        }
    }
}

/// Where blocks come from.
pub trait BlockSource {
    /// The next block, or None at the end of input.
    fn next_block(&mut self) -> Result<Option<Block>, ReadError>;
    /// Reader counters per input (name, counters).
    fn stats(&self) -> Vec<(String, ReadStats)>;
}

impl<B: BlockSource + ?Sized> BlockSource for Box<B> {
    fn next_block(&mut self) -> Result<Option<Block>, ReadError> {
        (**self).next_block()
    }
    fn stats(&self) -> Vec<(String, ReadStats)> {
        (**self).stats()
    }
}

/// Blocks from one reader (a file, stdin).
pub struct ReadBlocks<R> {
    name: String,
    inner: R,
    buf: Vec<u8>,
    chunker: Chunker,
    live: bool,
    consumed: u64,
    done: bool,
}

impl<R: Read> ReadBlocks<R> {
    /// Blocks of about [`BLOCK_BYTES`]; `live` hands out each read's
    /// complete lines at once (with their arrival time), so a lone line on
    /// an idle pipe is not held back.
    pub fn new(name: &str, inner: R, live: bool) -> ReadBlocks<R> {
        ReadBlocks {
            name: name.to_string(),
            inner,
            buf: vec![0; BLOCK_BYTES],
            chunker: Chunker::default(),
            live,
            consumed: 0,
            done: false,
        }
    }
}

impl<R: Read> BlockSource for ReadBlocks<R> {
    fn next_block(&mut self) -> Result<Option<Block>, ReadError> {
        if self.done {
            return Ok(None);
        }
        let err = |name: &str, e| ReadError {
            path: name.to_string(),
            source: e,
        };
        let mut arrival = None;
        let out = if self.live {
            // Each read's complete lines at once.
            let mut out = Vec::new();
            loop {
                let n = match self.inner.read(&mut self.buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(err(&self.name, e)),
                };
                if n == 0 {
                    self.done = true;
                    out.extend(self.chunker.finish());
                    break;
                }
                self.consumed += n as u64;
                self.chunker.push_into(&self.buf[..n], &mut out);
                if !out.is_empty() {
                    arrival = Some(crate::clock::wall_ns());
                    break;
                }
            }
            out
        } else {
            loop {
                // Read straight after the carried partial line: no copy.
                let mut buf = self.chunker.take_pending(BLOCK_BYTES);
                let before = buf.len();
                (&mut self.inner)
                    .take(BLOCK_BYTES as u64)
                    .read_to_end(&mut buf)
                    .map_err(|e| err(&self.name, e))?;
                let n = buf.len() - before;
                self.consumed += n as u64;
                // Short of the limit means the reader reached its end.
                if n < BLOCK_BYTES {
                    self.done = true;
                }
                let mut out = self.chunker.frame(buf);
                if self.done {
                    out.extend(self.chunker.finish());
                }
                // A long line may span several reads before one completes.
                if !out.is_empty() || self.done {
                    break out;
                }
            }
        };
        if out.is_empty() {
            return Ok(None);
        }
        let mut block = Block {
            data: to_text(out, &mut self.chunker.stats),
            arrival,
            consumed: self.consumed,
            ..Block::default()
        };
        block.index_lines();
        Ok(Some(block))
    }

    fn stats(&self) -> Vec<(String, ReadStats)> {
        vec![(self.name.clone(), self.chunker.stats)]
    }
}

/// Runs `source` on a thread of its own, passes each block through `stage`
/// on that thread (the caller's per-block work, e.g. the literal scan), and
/// sends the results through a channel of `capacity` blocks. The thread
/// stops at the end of input, on a read error (sent as the last item), or
/// when the receiver is dropped; joining it gives the reader counters.
/// Fails only if the thread cannot be started.
#[allow(clippy::type_complexity)]
pub fn spawn<S, T, F>(
    source: S,
    capacity: usize,
    mut stage: F,
) -> io::Result<(
    tokio::sync::mpsc::Receiver<Result<T, ReadError>>,
    std::thread::JoinHandle<Vec<(String, ReadStats)>>,
)>
where
    S: BlockSource + Send + 'static,
    T: Send + 'static,
    F: FnMut(Block) -> T + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(capacity.max(1));
    let handle = spawn_into(source, tx, move |item| item.map(&mut stage))?;
    Ok((rx, handle))
}

/// Like [`spawn`], into the caller's channel: `stage` turns each block, or
/// the read error that ends the input, into the channel's item. Lines cut
/// or repaired are logged when the input ends.
pub fn spawn_into<S, T, F>(
    mut source: S,
    tx: tokio::sync::mpsc::Sender<T>,
    mut stage: F,
) -> io::Result<std::thread::JoinHandle<Vec<(String, ReadStats)>>>
where
    S: BlockSource + Send + 'static,
    T: Send + 'static,
    F: FnMut(Result<Block, ReadError>) -> T + Send + 'static,
{
    std::thread::Builder::new()
        .name("sigwatch-read".into())
        .spawn(move || {
            loop {
                let (item, last) = match source.next_block() {
                    Ok(Some(b)) => (stage(Ok(b)), false),
                    Ok(None) => break,
                    Err(e) => (stage(Err(e)), true),
                };
                if tx.blocking_send(item).is_err() || last {
                    break;
                }
            }
            let stats = source.stats();
            for (name, st) in &stats {
                if st.truncated + st.invalid_utf8 > 0 {
                    tracing::warn!(input = %name, truncated = st.truncated, invalid_utf8 = st.invalid_utf8, "Some lines were cut or repaired.");
                }
            }
            stats
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_hold_complete_repaired_lines_and_their_inputs() {
        let data = b"one\r\n\ntwo \xff\nlast".to_vec();
        let mut r = ReadBlocks::new("t", &data[..], false);
        let b = r.next_block().unwrap().unwrap();
        let lines: Vec<&str> = b.lines().map(|l| l.text).collect();
        assert_eq!(lines, vec!["one", "", "two \u{fffd}", "last"]);
        assert!(r.next_block().unwrap().is_none());
        assert_eq!(r.stats()[0].1.invalid_utf8, 1);
        let b = Block::from_lines([(1, "a"), (0, "b"), (0, "c")]);
        assert_eq!(b.runs, vec![(2, 1), (6, 0)]);
        let inputs: Vec<(usize, &str)> = b.lines().map(|l| (l.input, l.text)).collect();
        assert_eq!(inputs, vec![(1, "a"), (0, "b"), (0, "c")]);
        let e = Block::from_entries([(0, "one\ntwo", 5), (2, "three\r", 7)]);
        let got: Vec<(usize, &str, Option<i64>)> =
            e.lines().map(|l| (l.input, l.text, l.time)).collect();
        assert_eq!(got, vec![(0, "one\ntwo", Some(5)), (2, "three\r", Some(7))]);
    }

    #[test]
    fn a_line_longer_than_a_block_is_cut_and_reading_goes_on() {
        let mut data = b"first\n".to_vec();
        data.extend(vec![b'x'; 3 * BLOCK_BYTES]);
        data.extend(b"\nlast\n");
        let mut r = ReadBlocks::new("t", &data[..], false);
        let mut lines = Vec::new();
        while let Some(b) = r.next_block().unwrap() {
            lines.extend(b.lines().map(|l| l.text.len()));
        }
        let max = crate::source::max_line_bytes();
        assert_eq!(lines, vec![5, (3 * BLOCK_BYTES).min(max), 4]);
        assert_eq!(r.stats()[0].1.truncated, u64::from(3 * BLOCK_BYTES > max));
    }

    /// Endless input that counts the blocks it produced.
    struct Endless(std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl BlockSource for Endless {
        fn next_block(&mut self) -> Result<Option<Block>, ReadError> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Some(Block::from_lines([(0, "x")])))
        }
        fn stats(&self) -> Vec<(String, ReadStats)> {
            Vec::new()
        }
    }

    #[test]
    fn a_slow_consumer_holds_the_reader_back() {
        let made = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (mut rx, h) = spawn(Endless(made.clone()), 2, |b| b).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        // Two in the channel, one waiting to be sent, one being read.
        let ahead = made.load(std::sync::atomic::Ordering::SeqCst);
        assert!(ahead <= 4, "the reader ran {ahead} blocks ahead");
        for _ in 0..10 {
            assert!(rx.blocking_recv().is_some());
        }
        drop(rx);
        // The reader stops once nobody listens.
        assert!(h.join().is_ok());
    }

    #[test]
    fn a_reader_thread_sends_bounded_blocks_in_order() {
        let text: String = (0..100_000).map(|i| format!("line {i}\n")).collect();
        let src = ReadBlocks::new("t", io::Cursor::new(text.clone().into_bytes()), false);
        let (mut rx, h) = spawn(src, 2, |b| b).unwrap();
        let mut got = String::new();
        let mut blocks = 0;
        while let Some(b) = rx.blocking_recv() {
            let b = b.unwrap();
            assert!(b.data.ends_with('\n'));
            got.push_str(&b.data);
            blocks += 1;
        }
        assert_eq!(got, text);
        assert!(blocks > 1);
        assert_eq!(h.join().unwrap()[0].1, ReadStats::default());
    }
}
