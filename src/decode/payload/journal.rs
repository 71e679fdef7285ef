//! syslog (`[<PRI>]May 01 12:00:40 host prog[pid]: …`, RFC 5424, the
//! journal's short output) and klog headers (`I0501 12:00:40.118204 1187
//! file.go:107] …`): the program's own text is decoded in turn, so klog,
//! JSON or a level word inside a journal line are read as such.

use super::console::is_caller;
use super::logfmt::parse_pairs;
use super::{behind_header, decode_at, Fields, Format, Level, Payload};
use crate::decode::header::{klog_stamp, Header, Reference};
use crate::decode::quick::read_quoted;

/// A syslog line whose header `h` was read: the program's text decoded,
/// with the header's host, program and pid as fields.
pub(super) fn decode_syslog(t: &str, h: &Header, reference: Reference) -> Payload {
    let inner = t.get(h.inner..).unwrap_or("");
    let inner_ref = match h.time {
        Some(at) => Reference::Near(at),
        None => reference,
    };
    let mut p = decode_at(inner, inner_ref);
    if matches!(p.format, Format::Text | Format::GoLog) && p.level.is_none() {
        // The program's text has a stamp of its own but no level: the
        // outer header is the line's (as the header reader reads it).
        p = super::plain(inner, false);
    }
    if matches!(p.format, Format::Plain | Format::Text) && !p.malformed {
        if p.format == Format::Plain {
            p.time = None;
        }
        p.format = Format::Syslog;
    }
    behind_header(&mut p, t, h, inner);
    p
}

/// A klog line taken apart: its time (when the reference completes it),
/// level letter, and the text after `file.go:N] `.
pub(super) struct KlogSplit<'t> {
    time: Option<i64>,
    letter: &'t str,
    /// The text after the header.
    pub(super) body: &'t str,
}

/// Takes a klog line apart ([`KlogSplit`]), if it is one: the header
/// reader's klog stamp, then a pid and the caller before `] `.
pub(super) fn klog_split(t: &str, reference: Reference) -> Option<KlogSplit<'_>> {
    if !t.starts_with(['I', 'W', 'E', 'F']) {
        return None;
    }
    let (time, end) = klog_stamp(t, reference)?;
    let rest = t.get(end..)?;
    let close = rest
        .find("] ")
        .or_else(|| rest.strip_suffix(']').map(|r| r.len()))?;
    let header = rest[..close].trim();
    if !header.split_whitespace().last().is_some_and(is_caller) {
        return None;
    }
    Some(KlogSplit {
        time,
        letter: &t[..1],
        body: rest.get(close + 2..).unwrap_or(""),
    })
}

/// klog: `I0501 12:00:40.118204    1187 prober.go:107] "Probe failed" k="v"`.
pub(super) fn decode_klog(t: &str, reference: Reference) -> Option<Payload> {
    let KlogSplit { time, letter, body } = klog_split(t, reference)?;
    let level = Level::parse(letter);
    let (message, pairs) = if let Some(after) = body.strip_prefix('"') {
        // Structured klog: quoted message then logfmt-style pairs.
        let (msg, used) = read_quoted(after);
        (msg, parse_pairs(&after[used..]))
    } else {
        (body.to_string(), Vec::new())
    };
    Some(Payload {
        format: Format::Klog,
        time,
        level,
        message,
        fields: Fields::Pairs(pairs),
        malformed: false,
    })
}
