//! Plain text behind a header ([`crate::decode::header`]): log4j, Python
//! logging, Go's `log`, nginx, PostgreSQL, logcat… The message is the text
//! after the header; the header's logger, thread, pid and caller are
//! fields; a body that is itself JSON or logfmt is decoded as such, its
//! own time and level preferred to the header's.

use super::{header_fields, json, logfmt, Fields, Format, Payload};
use crate::decode::header::{Header, Kind};
use serde_json::Value;

/// A line whose header `h` was read.
pub(super) fn decode_text(t: &str, h: &Header) -> Payload {
    let body = h.message(t).trim_end();
    let format = if h.kind == Kind::GoLog {
        Format::GoLog
    } else {
        Format::Text
    };
    let pairs = header_fields(t, h);
    let structured = if body.starts_with('{') {
        Some(json::decode_json(body)).filter(|p| !p.malformed)
    } else {
        logfmt::decode_logfmt(body)
    };
    if let Some(mut p) = structured {
        match &mut p.fields {
            Fields::Json(m) => {
                for (k, v) in pairs {
                    m.entry(k).or_insert(Value::String(v));
                }
            }
            Fields::Pairs(existing) => {
                let mut all = pairs;
                all.append(existing);
                p.fields = Fields::Pairs(all);
            }
            Fields::None => p.fields = Fields::Pairs(pairs),
        }
        p.time = p.time.or(h.time);
        p.level = p.level.or(h.level);
        p.format = format;
        if p.message.is_empty() {
            // Pairs without a message key: the pairs are the message.
            p.message = body.to_string();
        }
        return p;
    }
    Payload {
        format,
        time: h.time,
        level: h.level,
        message: body.to_string(),
        fields: if pairs.is_empty() {
            Fields::None
        } else {
            Fields::Pairs(pairs)
        },
        malformed: false,
    }
}
