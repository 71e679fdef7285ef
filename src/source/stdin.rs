//! Line framing: bounded lines from any reader (for `explain` and merged
//! replays) and the [`Chunker`] that cuts byte streams into complete lines
//! (for blocks, see [`super::block`]).

use std::io::{self, BufRead};

/// Counters of a line reader.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadStats {
    /// Lines cut at the line bound ([`super::max_line_bytes`]).
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
    /// Bytes consumed from the reader (for progress).
    pub consumed: u64,
}

impl<R: BufRead> LineReader<R> {
    /// Wraps a reader.
    pub fn new(inner: R) -> LineReader<R> {
        LineReader {
            inner,
            buf: Vec::with_capacity(8192),
            repaired: String::new(),
            stats: ReadStats::default(),
            consumed: 0,
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
            let room = super::max_line_bytes().saturating_sub(self.buf.len());
            if room < take {
                overflow = true;
            }
            self.buf.extend_from_slice(&chunk[..take.min(room)]);
            self.inner.consume(take);
            self.consumed += take as u64;
            if done {
                break;
            }
        }
        if overflow {
            self.stats.truncated += 1;
            crate::stats::count_truncated();
        }
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        if std::str::from_utf8(&self.buf).is_err() {
            self.stats.invalid_utf8 += 1;
            crate::stats::count_invalid_utf8();
            self.repaired = String::from_utf8_lossy(&self.buf).into_owned();
            return Ok(Some(&self.repaired));
        }
        Ok(std::str::from_utf8(&self.buf).ok())
    }
}

/// Splits a byte stream into chunks of complete lines, cutting any line
/// longer than the line bound ([`super::max_line_bytes`]) (the rest of it is dropped and counted).
#[derive(Debug, Default)]
pub struct Chunker {
    pending: Vec<u8>,
    skipping: bool,
    /// Counters.
    pub stats: ReadStats,
}

impl Chunker {
    /// Adds bytes; returns the complete lines now available (maybe empty).
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.push_into(bytes, &mut out);
        out
    }

    /// Adds bytes, appending the complete lines now available to `out`.
    pub fn push_into(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) {
        let max = super::max_line_bytes();
        if !self.skipping && self.pending.len() + bytes.len() <= max {
            // No line here can be too long: copy every complete line at once.
            match memchr::memrchr(b'\n', bytes) {
                Some(last) => {
                    out.append(&mut self.pending);
                    out.extend_from_slice(&bytes[..=last]);
                    self.pending.extend_from_slice(&bytes[last + 1..]);
                }
                None => self.pending.extend_from_slice(bytes),
            }
            return;
        }
        while !bytes.is_empty() {
            match memchr::memchr(b'\n', bytes) {
                Some(nl) => {
                    if !self.skipping {
                        let room = super::max_line_bytes().saturating_sub(self.pending.len());
                        if nl > room {
                            self.stats.truncated += 1;
                            crate::stats::count_truncated();
                        }
                        self.pending.extend_from_slice(&bytes[..nl.min(room)]);
                        out.append(&mut self.pending);
                        out.push(b'\n');
                    }
                    self.skipping = false;
                    bytes = &bytes[nl + 1..];
                }
                None => {
                    if !self.skipping {
                        let room = super::max_line_bytes().saturating_sub(self.pending.len());
                        if bytes.len() > room {
                            // Emit the cut line now and drop the rest of it.
                            self.stats.truncated += 1;
                            crate::stats::count_truncated();
                            self.pending.extend_from_slice(&bytes[..room]);
                            out.append(&mut self.pending);
                            out.push(b'\n');
                            self.skipping = true;
                        } else {
                            self.pending.extend_from_slice(bytes);
                        }
                    }
                    bytes = &[];
                }
            }
        }
    }

    /// Takes the partial line carried from earlier bytes, in a buffer with
    /// room for `more` bytes, to read new bytes right after it (then
    /// [`Chunker::frame`]).
    pub fn take_pending(&mut self, more: usize) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.pending);
        buf.reserve(more);
        buf
    }

    /// Frames a buffer made of [`Chunker::take_pending`] plus new bytes:
    /// returns its complete lines (the same buffer when no line in it can
    /// be too long) and carries the rest.
    pub fn frame(&mut self, mut buf: Vec<u8>) -> Vec<u8> {
        if !self.skipping && buf.len() <= super::max_line_bytes() {
            match memchr::memrchr(b'\n', &buf) {
                Some(last) => {
                    self.pending.extend_from_slice(&buf[last + 1..]);
                    buf.truncate(last + 1);
                    buf
                }
                None => {
                    self.pending = buf;
                    Vec::new()
                }
            }
        } else {
            let mut out = Vec::new();
            self.push_into(&buf, &mut out);
            out
        }
    }

    /// End of input: the last line if it had no newline.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.pending);
        if !out.is_empty() {
            out.push(b'\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::MAX_LINE_BYTES;

    #[test]
    fn chunker_splits_bounds_and_keeps_partial_lines() {
        let mut c = Chunker::default();
        assert_eq!(c.push(b"a\nb"), b"a\n");
        assert_eq!(c.push(b"c\r\nd"), b"bc\r\n");
        let big = vec![b'x'; MAX_LINE_BYTES + 10];
        let out = c.push(&big);
        assert_eq!(out.len(), MAX_LINE_BYTES + 1, "d + cut line");
        assert_eq!(c.push(b"tail of the long line\ne\n"), b"e\n");
        assert_eq!(c.finish(), b"");
        assert_eq!(c.stats.truncated, 1);
    }

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
