//! zap's console encoder: `time\tLEVEL\tlogger\tcaller\tmessage\t{json}`
//! (also with the tabs turned into runs of spaces).

use super::{Fields, Format, Level, Payload};
use crate::decode::time::parse_rfc3339;
use serde_json::Value;
use std::borrow::Cow;

pub(super) fn is_caller(s: &str) -> bool {
    s.rsplit_once(':').is_some_and(|(f, l)| {
        f.contains('.') && !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Whether a line starts like zap's console encoder: an RFC 3339 stamp
/// with a `T`, a column gap (a tab, or two spaces and more when tabs were
/// turned into spaces), a level (upper or lower case) and another column gap. One
/// space is not zap's (Rust's tracing, Spring Boot: the header reader's).
pub(super) fn looks_like_console(b: &[u8]) -> bool {
    if b.len() < 24 || !b[0].is_ascii_digit() || b[4] != b'-' || b[10] != b'T' {
        return false;
    }
    let Some(sp) = memchr::memchr2(b'\t', b' ', b) else {
        return false;
    };
    let rest = &b[sp..];
    let from = column_gap(rest);
    if from == 0 {
        return false;
    }
    let word = &rest[from..];
    let n = word.iter().take_while(|c| c.is_ascii_alphabetic()).count();
    console_level(&word[..n]) && (n == word.len() || column_gap(&word[n..]) > 0)
}

/// A level as zap's console encoder writes it: `INFO`, or `info` with the
/// lower-case encoder (OpenTelemetry's collector, Istio).
fn console_level(w: &[u8]) -> bool {
    if !(4..=7).contains(&w.len()) {
        return false;
    }
    let mut buf = [0u8; 7];
    buf[..w.len()].copy_from_slice(w);
    let upper = w.iter().all(u8::is_ascii_uppercase);
    if !upper {
        if !w.iter().all(u8::is_ascii_lowercase) {
            return false;
        }
        buf.make_ascii_uppercase();
    }
    matches!(
        &buf[..w.len()],
        b"DEBUG" | b"INFO" | b"WARN" | b"WARNING" | b"ERROR" | b"DPANIC" | b"PANIC" | b"FATAL"
    )
}

/// The length of a column gap at the start of `b`: a tab, or two spaces
/// and more; 0 when there is none.
fn column_gap(b: &[u8]) -> usize {
    let n = b.iter().take_while(|c| **c == b' ' || **c == b'\t').count();
    if n >= 2 || b.first() == Some(&b'\t') {
        n
    } else {
        0
    }
}

/// A zap console line taken apart: its stamp, level word, logger column,
/// message and trailing JSON object (the part `fields` accepted).
pub(super) struct Split<'t, F> {
    time: i64,
    level: &'t str,
    logger: Option<&'t str>,
    /// The message columns, joined by one space.
    pub(super) message: Cow<'t, str>,
    /// The trailing object, as `fields` read it.
    pub(super) fields: Option<F>,
}

/// Takes a console line apart; `fields` reads the trailing `{…}` (a text
/// that is not an object stays in the message).
pub(super) fn split<'t, F>(
    t: &'t str,
    fields: impl Fn(&'t str) -> Option<F>,
) -> Option<Split<'t, F>> {
    let b = t.as_bytes();
    if !looks_like_console(b) {
        return None;
    }
    let (ts, rest) = t.split_once(['\t', ' '])?;
    let time = parse_rfc3339(ts)?;
    let rest = rest.trim_start();
    let (lvl, rest) = rest.split_once(['\t', ' ']).unwrap_or((rest, ""));
    if !console_level(lvl.as_bytes()) {
        return None;
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    // Trailing JSON object of fields.
    let (head, fields) = match rest
        .find("\t{")
        .or_else(|| rest.find("  {\""))
        .or_else(|| rest.find(" {\""))
    {
        Some(i) if rest.trim_end().ends_with('}') => match fields(rest[i..].trim()) {
            Some(f) => (&rest[..i], Some(f)),
            None => (rest, None),
        },
        _ => (rest, None),
    };
    // head: [logger] [caller] msg — tab separated, or whitespace runs.
    let (logger, message) = if head.contains('\t') {
        columns(head.split('\t'))
    } else {
        columns(head.split("  ").map(str::trim).filter(|s| !s.is_empty()))
    };
    Some(Split {
        time,
        level: lvl,
        logger,
        message,
        fields,
    })
}

/// zap console: tab separated, or with the tabs turned into runs of spaces
/// (as happens when lines are copied from a terminal).
pub(super) fn decode_console(t: &str) -> Option<Payload> {
    let s = split(t, |js| match serde_json::from_str::<Value>(js) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    })?;
    let fields = match (s.fields, s.logger) {
        (Some(mut m), Some(l)) => {
            m.entry("logger")
                .or_insert_with(|| Value::String(l.to_string()));
            Fields::Json(m)
        }
        (Some(m), None) => Fields::Json(m),
        (None, Some(l)) => Fields::Pairs(vec![("logger".into(), l.to_string())]),
        (None, None) => Fields::None,
    };
    Some(Payload {
        format: Format::Console,
        time: Some(s.time),
        level: Level::parse(s.level),
        message: s.message.into_owned(),
        fields,
        malformed: false,
    })
}

/// The logger and the message of a console line's columns: after a caller
/// column (`file.go:12`) the rest is the message and the column before the
/// caller, if any, the logger; without one (Istio's scopes) the last column
/// is the message and the first, when there are two or more, the logger.
fn columns<'t, I>(cols: I) -> (Option<&'t str>, Cow<'t, str>)
where
    I: Iterator<Item = &'t str> + Clone,
{
    let first = cols.clone().next().map(str::trim);
    match cols.clone().position(|p| is_caller(p.trim())) {
        Some(ci) => {
            let mut rest = cols.skip(ci + 1);
            let message = match (rest.next(), rest.clone().next()) {
                (None, _) => Cow::Borrowed(""),
                (Some(one), None) => Cow::Borrowed(one.trim()),
                (Some(one), Some(_)) => {
                    let mut m = one.to_string();
                    for p in rest {
                        m.push(' ');
                        m.push_str(p);
                    }
                    Cow::Owned(m.trim().to_string())
                }
            };
            (first.filter(|_| ci > 0), message)
        }
        None => {
            let n = cols.clone().count();
            let last = cols.last().map_or("", str::trim);
            (first.filter(|_| n >= 2), Cow::Borrowed(last))
        }
    }
}
