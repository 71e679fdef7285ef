//! JSON objects: zap production lines, Kubernetes events, journald's JSON
//! output, and shippers' envelopes (Fluent Bit, Vector), whose inner line
//! is decoded too.

use super::{decode, plain, Fields, Format, Level, Payload, LEVEL_KEYS, MSG_KEYS, TIME_KEYS};
use crate::decode::names;
use crate::decode::time::parse_any;
use serde_json::{Map, Value};

pub(super) fn json_path<'a>(m: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    if let Some(v) = m.get(path) {
        return Some(v);
    }
    // Try every split point so keys that themselves contain dots still resolve.
    let mut from = 0;
    while let Some(i) = path[from..].find('.') {
        let cut = from + i;
        if let Some(Value::Object(inner)) = m.get(&path[..cut]) {
            if let Some(v) = json_path(inner, &path[cut + 1..]) {
                return Some(v);
            }
        }
        from = cut + 1;
    }
    None
}

/// Keys under which an envelope (journald JSON, Fluent Bit, Vector, Docker
/// via a shipper) carries the application's own line.
const ENVELOPE_KEYS: &[&str] = &["MESSAGE", "log", "message"];

pub(super) fn decode_json(t: &str) -> Payload {
    // serde_json into a Map: duplicate keys are allowed, the last one wins.
    let mut map = match serde_json::from_str::<Value>(t.trim()) {
        Ok(Value::Object(m)) => m,
        _ => return plain(t, true),
    };
    // An envelope: decode the inner line and lift its fields beside the
    // envelope's own (which win), so `nodeID` inside a Fluent Bit `log`
    // string or klog pairs inside journald's `MESSAGE` are fields.
    let inner = ENVELOPE_KEYS.iter().find_map(|k| match map.get(*k) {
        Some(Value::String(s)) if s.len() > 2 => {
            let p = decode(s, None);
            (p.format != Format::Plain).then_some(p)
        }
        _ => None,
    });
    let (inner_msg, inner_time, inner_level) = match inner {
        Some(p) => {
            match p.fields {
                Fields::Json(m) => {
                    for (k, v) in m {
                        map.entry(k).or_insert(v);
                    }
                }
                Fields::Pairs(pairs) => {
                    for (k, v) in pairs {
                        map.entry(k).or_insert(Value::String(v));
                    }
                }
                Fields::None => {}
            }
            (Some(p.message), p.time, p.level)
        }
        None => (None, None, None),
    };
    let fields = Fields::Json(map);
    let message = MSG_KEYS
        .iter()
        .find_map(|k| fields.get(k))
        .map(|c| c.into_owned())
        .unwrap_or_default();
    let message = inner_msg.unwrap_or(message);
    // Other spellings (`Timestamp`, `SeverityText`, a nested level name…):
    // read by name only when the usual keys gave nothing.
    let spelled = |f: &dyn Fn(&Map<String, Value>) -> Option<String>| match &fields {
        Fields::Json(m) => f(m),
        _ => None,
    };
    let message = if message.is_empty() {
        spelled(&names::json_message).unwrap_or(message)
    } else {
        message
    };
    let time = json_time(&fields).or(inner_time).or_else(|| match &fields {
        Fields::Json(m) => names::json_time(m, None),
        _ => None,
    });
    let level = LEVEL_KEYS
        .iter()
        .find_map(|k| {
            fields
                .get(k)
                .and_then(|v| crate::decode::severity::value(&v))
        })
        .or(inner_level);
    let level = level.or_else(|| match &fields {
        Fields::Json(m) => names::json_level(m),
        _ => None,
    });
    // Kubernetes events carry their severity as type: Warning / Normal.
    let level = level.or_else(|| match fields.get("type").as_deref() {
        Some("Warning") => Some(Level::Warn),
        Some("Normal") => Some(Level::Info),
        _ => None,
    });
    Payload {
        format: Format::Json,
        time,
        level,
        message,
        fields,
        malformed: false,
    }
}

fn json_time(fields: &Fields) -> Option<i64> {
    if let Some(us) = fields
        .get("__REALTIME_TIMESTAMP")
        .and_then(|v| v.parse::<i64>().ok())
    {
        return Some(us.saturating_mul(1000));
    }
    TIME_KEYS
        .iter()
        .find_map(|k| fields.get(k).and_then(|v| parse_any(&v)))
        .or_else(|| {
            ["t.$date", "@t"]
                .iter()
                .find_map(|k| fields.get(k).and_then(|v| parse_any(&v)))
        })
}
