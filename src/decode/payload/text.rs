//! Plain text behind a header ([`crate::decode::header`]): log4j, Python
//! logging, Go's `log`, nginx, PostgreSQL, logcat… The message is the text
//! after the header; the header's logger, thread, pid and caller are
//! fields; a body that is itself JSON or logfmt is decoded as such, its
//! own time and level preferred to the header's.

use super::{behind_header, header_fields, json, logfmt, Fields, Format, Payload};
use crate::decode::header::{Header, Kind};

/// A line whose header `h` was read.
pub(super) fn decode_text(t: &str, h: &Header) -> Payload {
    let body = h.message(t).trim_end();
    let format = if h.kind == Kind::GoLog {
        Format::GoLog
    } else {
        Format::Text
    };
    let structured = if body.starts_with('{') {
        Some(json::decode_json(body)).filter(|p| !p.malformed)
    } else {
        logfmt::decode_logfmt(body)
    };
    if let Some(mut p) = structured {
        behind_header(&mut p, t, h, body);
        p.format = format;
        return p;
    }
    let pairs = header_fields(t, h);
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
