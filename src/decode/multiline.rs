//! Lines that are parts of one event: a pretty-printed JSON object (a
//! line that is exactly `{` up to its closing brace) joined into one text,
//! a Kubernetes `List` split into its items, and the continuation lines of
//! a text record (a Java, Python, .NET or Go trace under its stamped first
//! line) attached to that record. Bounded in bytes and lines.
//!
//! A text record's continuation lines are not held back to be joined with
//! their first line: a record ends only when the next one starts, and a
//! page must not wait for a line that may never come. Each continuation
//! line goes on at once, marked as such ([`super::Prepared::continues`]):
//! it takes its record's level (an `at …` line under an ERROR is an
//! error's), rules still match it (`Caused by: …: No space left on device`
//! pages wherever it sits), and template mining counts it in its record
//! instead of mining each frame as an event of its own.

use super::{Decoder, Level, Prepared};
use std::borrow::Cow;

/// Longest pretty-printed JSON object reassembled, in lines.
pub const MAX_BLOCK_LINES: usize = 100_000;

/// Most continuation lines attached to one text record; later ones stand
/// as lines of their own.
pub const MAX_RECORD_LINES: u32 = 1_000;
/// Most bytes of continuation lines attached to one text record.
pub const MAX_RECORD_BYTES: usize = 256 * 1024;

/// A text record that continuation lines may follow.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record {
    level: Option<Level>,
    lines: u32,
    bytes: usize,
}

/// Whether an unstamped line without a level word reads as a continuation
/// of the record above it: indented (`\tat …`, `  File "…"`, `   at …
/// in …:line 12`), a trace's own head or joint (`Traceback (most recent
/// call last):`, `Caused by: …`, `... 12 more`, `--- End of inner exception
/// stack trace ---`, `goroutine 1 [running]:`), a chained Python
/// exception's sentence, or an exception's name line (`java.lang.
/// IllegalStateException: …`, `ValueError: …`).
pub fn continues_record(line: &str) -> bool {
    let b = line.as_bytes();
    match b.first() {
        None => return true,
        Some(b' ' | b'\t') => return true,
        _ => {}
    }
    const HEADS: &[&str] = &[
        "Caused by:",
        "Suppressed:",
        "Traceback (most recent call last)",
        "During handling of the above exception",
        "The above exception was the direct cause",
        "... ",
        "--- ",
        "goroutine ",
        "Exception in thread ",
    ];
    if HEADS.iter().any(|h| line.starts_with(h)) {
        return true;
    }
    exception_name(line)
}

/// `pkg.Name(Exception|Error|…)` alone or followed by `: message`.
fn exception_name(line: &str) -> bool {
    let name = line.split_once(':').map_or(line, |(n, _)| n).trim_end();
    if name.is_empty()
        || name.len() > 200
        || !name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'$'))
    {
        return false;
    }
    let last = name.rsplit('.').next().unwrap_or(name);
    last.bytes().next().is_some_and(|c| c.is_ascii_uppercase())
        && [
            "Exception",
            "Error",
            "Throwable",
            "Interrupt",
            "Exit",
            "Fault",
        ]
        .iter()
        .any(|s| last.ends_with(s))
}

/// Tracks brace depth through a chunk of JSON text.
fn json_depth(text: &str, mut depth: usize, in_str: &mut bool) -> usize {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if *in_str => i += 1,
            b'"' => *in_str = !*in_str,
            b'{' | b'[' if !*in_str => depth += 1,
            b'}' | b']' if !*in_str => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    depth
}

impl Decoder {
    /// Joins a pretty-printed JSON object (a line that is exactly `{` up to
    /// its closing brace) into one text; splits a Kubernetes `List` into its
    /// items, the first returned and the rest queued.
    pub(super) fn reassemble_block<'a>(
        &mut self,
        sid: usize,
        text: Cow<'a, str>,
    ) -> Option<Cow<'a, str>> {
        let st = self.slab.get_mut(sid)?;
        let done = match &mut st.block {
            Some((buf, depth, in_str, lines)) => {
                buf.push('\n');
                buf.push_str(&text);
                *depth = json_depth(&text, *depth, in_str);
                *lines += 1;
                if *depth > 0
                    && buf.len() < crate::source::max_line_bytes()
                    && *lines < MAX_BLOCK_LINES
                {
                    return None;
                }
                if *depth > 0 {
                    self.stats.partial_overflow += 1;
                }
                st.block.take().map(|b| b.0)
            }
            None if text.trim_end() == "{" => {
                st.block = Some((text.into_owned(), 1, false, 1));
                return None;
            }
            None => return Some(text),
        };
        let joined = done?;
        self.stats.json_blocks += 1;
        if let Ok(serde_json::Value::Object(mut m)) =
            serde_json::from_str::<serde_json::Value>(&joined)
        {
            let is_list = m
                .get("kind")
                .and_then(|k| k.as_str())
                .is_some_and(|k| k.ends_with("List"));
            if let (true, Some(serde_json::Value::Array(items))) = (is_list, m.remove("items")) {
                let mut texts: Vec<String> = items.iter().map(|i| i.to_string()).collect();
                self.stats.list_items += texts.len() as u64;
                if texts.is_empty() {
                    return Some(Cow::Owned(joined));
                }
                let first = texts.remove(0);
                self.queued.extend(texts.into_iter().map(|t| (sid, t)));
                return Some(Cow::Owned(first));
            }
            // One line, so the text and its samples stay readable.
            return Some(Cow::Owned(serde_json::Value::Object(m).to_string()));
        }
        Some(Cow::Owned(joined))
    }

    /// Follows the text records of stream `sid`: a stamped text line opens
    /// one, a structured or other line closes it, and an unstamped line
    /// that [`continues_record`] within its bounds is its continuation
    /// (true: the line takes the record's level).
    pub(super) fn follow_record(&mut self, sid: usize, text: &str, format: &str) -> bool {
        let (time, level) = self.header;
        let text_like = !matches!(format, "json" | "logfmt" | "console");
        let Some(st) = self.slab.get_mut(sid) else {
            return false;
        };
        // A trace's head may carry a level the header reader gave it
        // (`Traceback …` reads as an error): the record's own wins.
        if text_like && time.is_none() {
            if let Some(r) = st.record.as_mut() {
                if continues_record(text) {
                    if r.lines < MAX_RECORD_LINES && r.bytes + text.len() <= MAX_RECORD_BYTES {
                        r.lines += 1;
                        r.bytes += text.len();
                        self.header.1 = r.level.or(level);
                        self.stats.continuation_lines += 1;
                        return true;
                    }
                    self.stats.continuation_overflow += 1;
                    return false;
                }
            }
        }
        st.record = (text_like && time.is_some()).then_some(Record {
            level,
            lines: 0,
            bytes: 0,
        });
        false
    }

    /// Whether lines split out of a List wait in the queue.
    pub fn has_queued(&self) -> bool {
        !self.queued.is_empty()
    }

    /// Prepares the next queued line (an item of a split List), if any.
    pub fn prepare_queued(&mut self, arrival: Option<i64>) -> Option<Prepared<'static>> {
        let (sid, text) = self.queued.pop_front()?;
        self.full_scanned = false;
        self.afters_possible = true;
        let source = crate::source::Source::named("");
        let reference = self.reference(sid, None, arrival, &source);
        let format = self.read_header(&text, super::payload::structured_kind(&text), reference);
        let time = self.update_stream(sid, &text, None, arrival, &source, format);
        Some(Prepared {
            text: Cow::Owned(text),
            wrapper_time: None,
            sid,
            time,
            prefiltered: None,
            format,
            level: self.header.1,
            header: self.text_header,
            time_from: self.time_from,
            continues: false,
        })
    }
}
