//! Line reading from stdin or files, for `run` and `replay`.

use super::MAX_LINE_BYTES;
use std::io::{self, BufRead};

/// Counters of a line reader.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadStats {
    /// Lines cut at [`MAX_LINE_BYTES`].
    pub truncated: u64,
    /// Lines with invalid UTF-8 (replaced with U+FFFD).
    pub invalid_utf8: u64,
}

/// Reads lines from any buffered reader with a bounded line length.
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    repaired: String,
    /// Counters.
    pub stats: ReadStats,
}

impl<R: BufRead> LineReader<R> {
    /// Wraps a reader.
    pub fn new(inner: R) -> LineReader<R> {
        LineReader {
            inner,
            buf: Vec::with_capacity(8192),
            repaired: String::new(),
            stats: ReadStats::default(),
        }
    }

    /// The next line without its newline, or None at end of input.
    pub fn next_line(&mut self) -> io::Result<Option<String>> {
        Ok(self.next_line_ref()?.map(str::to_string))
    }

    /// Like [`LineReader::next_line`], borrowing an internal buffer that is
    /// reused for every line (no allocation per line).
    pub fn next_line_ref(&mut self) -> io::Result<Option<&str>> {
        self.buf.clear();
        let mut overflow = false;
        loop {
            let chunk = self.inner.fill_buf()?;
            if chunk.is_empty() {
                if self.buf.is_empty() && !overflow {
                    return Ok(None);
                }
                break;
            }
            let (take, done) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            let room = MAX_LINE_BYTES.saturating_sub(self.buf.len());
            if room < take {
                overflow = true;
            }
            self.buf.extend_from_slice(&chunk[..take.min(room)]);
            self.inner.consume(take);
            if done {
                break;
            }
        }
        if overflow {
            self.stats.truncated += 1;
        }
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        if std::str::from_utf8(&self.buf).is_err() {
            self.stats.invalid_utf8 += 1;
            self.repaired = String::from_utf8_lossy(&self.buf).into_owned();
            return Ok(Some(&self.repaired));
        }
        Ok(std::str::from_utf8(&self.buf).ok())
    }
}

/// Reads stdin on its own thread (reading blocks) into a bounded channel of
/// (line, arrival wall time). When detection falls behind, the full channel
/// pushes back on the pipe instead of buffering without bound.
pub fn spawn_reader(capacity: usize) -> tokio::sync::mpsc::Receiver<(String, i64)> {
    let (tx, rx) = tokio::sync::mpsc::channel(capacity.max(1));
    std::thread::spawn(move || {
        let mut lines = LineReader::new(io::BufReader::with_capacity(1 << 16, io::stdin()));
        loop {
            match lines.next_line() {
                Ok(Some(l)) => {
                    if tx.blocking_send((l, super::wall_ns())).is_err() {
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::error!(error = %e, "Reading stdin failed.");
                    break;
                }
            }
        }
        let st = lines.stats;
        if st.truncated + st.invalid_utf8 > 0 {
            tracing::warn!(
                truncated = st.truncated,
                invalid_utf8 = st.invalid_utf8,
                "Some stdin lines were cut or repaired."
            );
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_bounded_and_lossy() {
        let mut data = b"one\r\ntwo\n".to_vec();
        data.extend(vec![b'x'; MAX_LINE_BYTES + 5]);
        data.extend(b"\nbad \xff utf8\nlast");
        let mut r = LineReader::new(io::BufReader::with_capacity(64, &data[..]));
        assert_eq!(r.next_line().unwrap().as_deref(), Some("one"));
        assert_eq!(r.next_line().unwrap().as_deref(), Some("two"));
        assert_eq!(
            r.next_line().unwrap().map(|l| l.len()),
            Some(MAX_LINE_BYTES)
        );
        assert_eq!(r.next_line().unwrap().as_deref(), Some("bad \u{fffd} utf8"));
        assert_eq!(r.next_line().unwrap().as_deref(), Some("last"));
        assert_eq!(r.next_line().unwrap(), None);
        assert_eq!(
            r.stats,
            ReadStats {
                truncated: 1,
                invalid_utf8: 1
            }
        );
    }
}
