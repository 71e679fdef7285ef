//! syslog (`[<PRI>]May 01 12:00:40 host prog[pid]: …`, RFC 5424, the
//! journal's short output) and klog headers (`I0501 12:00:40.118204 1187
//! file.go:107] …`): the program's own text is decoded in turn, so klog,
//! JSON or a level word inside a journal line are read as such.

use super::console::is_caller;
use super::logfmt::parse_pairs;
use super::{behind_header, decode_at, Fields, Format, Level, Payload};
use crate::decode::header::{Header, Reference};
use crate::decode::quick::read_quoted;
use crate::decode::time::{parse_clock, with_inferred_year, with_nearest_year};

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

/// A klog line taken apart: month, day, clock, level letter, and the text
/// after `file.go:N] `.
pub(super) struct KlogSplit<'t> {
    month: u32,
    day: u32,
    clock: (u32, u32, u32, u32),
    letter: &'t str,
    /// The text after the header.
    pub(super) body: &'t str,
}

/// Takes a klog line apart ([`KlogSplit`]), if it is one.
pub(super) fn klog_split(t: &str) -> Option<KlogSplit<'_>> {
    let b = t.as_bytes();
    if b.len() < 21
        || !matches!(b[0], b'I' | b'W' | b'E' | b'F')
        || !b[1..5].iter().all(u8::is_ascii_digit)
        || b[5] != b' '
    {
        return None;
    }
    let month: u32 = t.get(1..3)?.parse().ok()?;
    let day: u32 = t.get(3..5)?.parse().ok()?;
    let clock = parse_clock(t.get(6..)?.split(' ').next()?)?;
    let (_, rest) = t.get(6..)?.split_once(' ')?;
    let close = rest
        .find("] ")
        .or_else(|| rest.strip_suffix(']').map(|r| r.len()))?;
    let header = rest[..close].trim();
    if !header.split_whitespace().last().is_some_and(is_caller) {
        return None;
    }
    Some(KlogSplit {
        month,
        day,
        clock,
        letter: &t[..1],
        body: rest.get(close + 2..).unwrap_or(""),
    })
}

/// klog: `I0501 12:00:40.118204    1187 prober.go:107] "Probe failed" k="v"`.
pub(super) fn decode_klog(t: &str, reference: Reference) -> Option<Payload> {
    let KlogSplit {
        month,
        day,
        clock,
        letter,
        body,
    } = klog_split(t)?;
    // A stamp without a year: completed from the reference, if any.
    let time = match reference {
        Reference::Near(r) => with_nearest_year(r, month, day, clock),
        Reference::Bound(r) => with_inferred_year(r, month, day, clock),
        Reference::None => None,
    };
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
