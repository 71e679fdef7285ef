//! zap's console encoder: `time\tLEVEL\tlogger\tcaller\tmessage\t{json}`
//! (also with the tabs turned into runs of spaces).

use super::{Fields, Format, Level, Payload};
use crate::decode::time::parse_rfc3339;
use serde_json::Value;

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

/// zap console: tab separated, or with the tabs turned into runs of spaces
/// (as happens when lines are copied from a terminal).
pub(super) fn decode_console(t: &str) -> Option<Payload> {
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
        Some(i) if rest.trim_end().ends_with('}') => {
            let js = rest[i..].trim();
            match serde_json::from_str::<Value>(js) {
                Ok(Value::Object(m)) => (&rest[..i], Fields::Json(m)),
                _ => (rest, Fields::None),
            }
        }
        _ => (rest, Fields::None),
    };
    // head: [logger] [caller] msg — tab separated, or whitespace runs.
    let parts: Vec<&str> = if head.contains('\t') {
        head.split('\t').collect()
    } else {
        head.split("  ")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    };
    let mut fields_out = fields;
    let message = match parts.iter().position(|p| is_caller(p.trim())) {
        Some(ci) => {
            let logger = if ci > 0 { Some(parts[0].trim()) } else { None };
            if let (Some(l), Fields::Json(m)) = (logger, &mut fields_out) {
                m.entry("logger")
                    .or_insert_with(|| Value::String(l.to_string()));
            }
            parts[ci + 1..].join(" ").trim().to_string()
        }
        None => {
            // No caller column: `logger\tmessage` (Istio's scopes).
            if let (true, Fields::Json(m)) = (parts.len() >= 2, &mut fields_out) {
                m.entry("logger")
                    .or_insert_with(|| Value::String(parts[0].trim().to_string()));
            } else if parts.len() >= 2 && matches!(fields_out, Fields::None) {
                fields_out = Fields::Pairs(vec![("logger".into(), parts[0].trim().to_string())]);
            }
            parts
                .last()
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        }
    };
    Some(Payload {
        format: Format::Console,
        time: Some(time),
        level: Level::parse(lvl),
        message,
        fields: fields_out,
        malformed: false,
    })
}
