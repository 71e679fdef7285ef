//! logfmt: `time=… level=info msg="…" key=value`, values bare or Go-quoted.

use super::{Fields, Format, Payload};
use crate::decode::names;
use crate::decode::quick::read_quoted;
use crate::decode::time::parse_any;

/// A logfmt key: letters, digits, `_ . -`.
pub(super) fn logfmt_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
}

/// logfmt: at least two `key=value` pairs and the first token is one.
pub(super) fn decode_logfmt(t: &str) -> Option<Payload> {
    let first = t.split(' ').next()?;
    let (k, _) = first.split_once('=')?;
    if !logfmt_key(k) {
        return None;
    }
    let pairs = parse_pairs(t);
    if pairs.len() < 2 {
        return None;
    }
    let get = |names: &[&str]| {
        pairs
            .iter()
            .find(|(k, _)| names.contains(&k.as_str()))
            .map(|(_, v)| v.clone())
    };
    // The usual keys, then any other spelling of them (`Timestamp=`,
    // `SeverityText=`, `Body=`…).
    let message = get(&["msg", "message"])
        .or_else(|| names::pairs_message(&pairs))
        .unwrap_or_default();
    let time = get(&["ts", "time", "t", "timestamp"])
        .and_then(|v| parse_any(&v))
        .or_else(|| names::pairs_time(&pairs, None));
    let level = get(&["level", "lvl", "severity"])
        .and_then(|v| crate::decode::severity::value(&v))
        .or_else(|| names::pairs_level(&pairs));
    Some(Payload {
        format: Format::Logfmt,
        time,
        level,
        message,
        fields: Fields::Pairs(pairs),
        malformed: false,
    })
}

/// Parses `k=v k2="quoted value"` pairs.
pub fn parse_pairs(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim_start();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else { break };
        let key = &rest[..eq];
        if key.is_empty() || key.contains(' ') {
            // Skip a bare word.
            match rest.find(' ') {
                Some(sp) => {
                    rest = rest[sp..].trim_start();
                    continue;
                }
                None => break,
            }
        }
        let after = &rest[eq + 1..];
        let (val, used) = if let Some(q) = after.strip_prefix('"') {
            let (v, n) = read_quoted(q);
            (v, n + 1)
        } else {
            let end = after.find(' ').unwrap_or(after.len());
            (after[..end].to_string(), end)
        };
        out.push((key.to_string(), val));
        rest = after[used..].trim_start();
    }
    out
}
