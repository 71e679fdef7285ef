//! Go's standard `log` prefix: `[prefix: ]2024/05/01 12:00:03[.micro] rest`
//! (go-redis, many small Go programs).

use super::{Fields, Format, Level, Payload};
use crate::decode::time::{self, parse_clock};

/// Go `log` prefix: `[prefix: ]2024/05/01 12:00:03[.micro] rest`.
/// `YYYY/MM/DD HH:` at the start: a Go `log` stamp.
pub(super) fn golog_header(b: &[u8]) -> bool {
    b.len() >= 19 && b[4] == b'/' && b[7] == b'/' && b[10] == b' ' && b[13] == b':'
}

pub(super) fn decode_golog(t: &str) -> Option<Payload> {
    let start = t.bytes().position(|b| b.is_ascii_digit())?;
    if start > 40 {
        return None;
    }
    let s = &t[start..];
    if !golog_header(s.as_bytes()) {
        return None;
    }
    let y: i32 = s[..4].parse().ok()?;
    let mo: u32 = s[5..7].parse().ok()?;
    let d: u32 = s[8..10].parse().ok()?;
    let (clock, _) = s[11..].split_once(' ').unwrap_or((&s[11..], ""));
    let c = parse_clock(clock)?;
    let time = time::from_parts(y, mo, d, c.0, c.1, c.2, c.3)?;
    let lower = t.to_ascii_lowercase();
    let level = if lower.contains("error") || lower.contains("failed") {
        Some(Level::Error)
    } else {
        None
    };
    Some(Payload {
        format: Format::GoLog,
        time: Some(time),
        level,
        message: t.to_string(),
        fields: Fields::None,
        malformed: false,
    })
}
