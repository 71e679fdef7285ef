//! `POST /loki/api/v1/push` bodies: protobuf (`logproto.PushRequest`,
//! snappy-compressed, as Promtail, Alloy and Vector send it) or JSON
//! (`{"streams": [{"stream": {…}, "values": [["ns", "line", {…}]]}]}`, as
//! Fluent Bit and the logging handlers send it). The messages are written
//! here from the layout Loki documents (field numbers of `push.proto`);
//! lines and labels are read as bytes so that invalid UTF-8 is repaired,
//! not a reason to refuse the whole push.

use super::{line_text, Decoded, Entry, PushError};
use prost::Message;

/// `logproto.PushRequest`.
#[derive(Clone, PartialEq, Message)]
struct PushRequest {
    #[prost(message, repeated, tag = "1")]
    streams: Vec<Stream>,
}

/// `logproto.StreamAdapter`: labels as a selector string (`{a="b"}`).
#[derive(Clone, PartialEq, Message)]
struct Stream {
    #[prost(bytes = "vec", tag = "1")]
    labels: Vec<u8>,
    #[prost(message, repeated, tag = "2")]
    entries: Vec<EntryAdapter>,
    #[prost(uint64, tag = "3")]
    hash: u64,
}

/// `logproto.EntryAdapter`.
#[derive(Clone, PartialEq, Message)]
struct EntryAdapter {
    #[prost(message, optional, tag = "1")]
    timestamp: Option<Timestamp>,
    #[prost(bytes = "vec", tag = "2")]
    line: Vec<u8>,
    #[prost(message, repeated, tag = "3")]
    structured_metadata: Vec<LabelPair>,
}

/// `logproto.LabelPairAdapter`.
#[derive(Clone, PartialEq, Message)]
struct LabelPair {
    #[prost(bytes = "vec", tag = "1")]
    name: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

/// `google.protobuf.Timestamp`.
#[derive(Clone, PartialEq, Message)]
struct Timestamp {
    #[prost(int64, tag = "1")]
    seconds: i64,
    #[prost(int32, tag = "2")]
    nanos: i32,
}

/// Decodes a push body (already undone of its `Content-Encoding`) by its
/// `Content-Type`: `application/x-protobuf` (snappy inside, as Loki
/// expects it) or `application/json`. `limit` bounds the decompressed
/// protobuf. A stream that does not parse refuses the push (Loki answers
/// 400 too), saying which.
pub fn decode(content_type: &str, body: &[u8], limit: usize) -> Result<Decoded, PushError> {
    let ct = super::media_type(content_type);
    let mut d = match ct.as_str() {
        "application/x-protobuf" | "application/protobuf" | "" => {
            let raw = super::snappy(body, limit)?;
            protobuf(&raw)?
        }
        "application/json" => json(body)?,
        other => {
            return Err(PushError::Unsupported(format!(
                "Content-Type {other:?}: a Loki push is application/x-protobuf (snappy) or application/json"
            )))
        }
    };
    d.sort();
    Ok(d)
}

fn protobuf(raw: &[u8]) -> Result<Decoded, PushError> {
    let req = PushRequest::decode(raw)
        .map_err(|e| PushError::Malformed(format!("not a Loki PushRequest: {e}")))?;
    let mut d = Decoded::default();
    for (i, s) in req.streams.into_iter().enumerate() {
        let labels = parse_labels(&String::from_utf8_lossy(&s.labels))
            .map_err(|e| PushError::Malformed(format!("stream {i}: {e}")))?;
        for e in s.entries {
            let ts = e.timestamp.map_or(0, |t| {
                t.seconds.saturating_mul(1_000_000_000) + i64::from(t.nanos)
            });
            let metadata = e
                .structured_metadata
                .iter()
                .map(|p| {
                    (
                        String::from_utf8_lossy(&p.name).into_owned(),
                        String::from_utf8_lossy(&p.value).into_owned(),
                    )
                })
                .collect();
            d.entries.push(Entry {
                labels: labels.clone(),
                metadata,
                ts,
                line: line_text(&e.line),
            });
        }
    }
    Ok(d)
}

#[derive(serde::Deserialize)]
struct JsonPush {
    #[serde(default)]
    streams: Vec<JsonStream>,
}

#[derive(serde::Deserialize)]
struct JsonStream {
    #[serde(default)]
    stream: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<Vec<serde_json::Value>>,
}

fn json(body: &[u8]) -> Result<Decoded, PushError> {
    let text = super::body_text(body);
    let p: JsonPush = serde_json::from_str(&text)
        .map_err(|e| PushError::Malformed(format!("not a Loki JSON push: {e}")))?;
    let mut d = Decoded::default();
    for (i, s) in p.streams.into_iter().enumerate() {
        let labels: Vec<(String, String)> = s.stream.into_iter().collect();
        for (j, row) in s.values.into_iter().enumerate() {
            let at = || format!("stream {i}, value {j}");
            let ts = match row.first() {
                Some(serde_json::Value::String(t)) => t.parse::<i64>().ok(),
                _ => None,
            }
            .ok_or_else(|| {
                PushError::Malformed(format!("{}: the time is not a string of nanoseconds", at()))
            })?;
            let line = row
                .get(1)
                .and_then(|l| l.as_str())
                .ok_or_else(|| PushError::Malformed(format!("{}: no line", at())))?;
            let mut metadata = Vec::new();
            if let Some(serde_json::Value::Object(m)) = row.get(2) {
                for (k, v) in m {
                    if let Some(v) = v.as_str() {
                        metadata.push((k.clone(), v.to_string()));
                    }
                }
            }
            d.entries.push(Entry {
                labels: labels.clone(),
                metadata,
                ts,
                line: line_text(line.as_bytes()),
            });
        }
    }
    Ok(d)
}

/// Parses a Prometheus label set as Loki's push carries it:
/// `{name="value", other="with \"quotes\""}`, sorted by name.
pub fn parse_labels(text: &str) -> Result<Vec<(String, String)>, String> {
    let t = text.trim();
    let inner = t
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .ok_or_else(|| format!("labels {t:?} are not a {{name=\"value\", …}} set"))?;
    let mut out = Vec::new();
    let mut rest = inner.trim_start();
    while !rest.is_empty() {
        let name_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let name = &rest[..name_end];
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!("labels {t:?}: a label name expected at {rest:?}"));
        }
        rest = rest[name_end..].trim_start();
        rest = rest
            .strip_prefix('=')
            .ok_or_else(|| format!("labels {t:?}: '=' expected after {name}"))?
            .trim_start();
        let (value, after) = quoted(rest)
            .ok_or_else(|| format!("labels {t:?}: the value of {name} is not a quoted string"))?;
        out.push((name.to_string(), value));
        rest = after.trim_start();
        if let Some(r) = rest.strip_prefix(',') {
            rest = r.trim_start();
        } else if !rest.is_empty() {
            return Err(format!("labels {t:?}: ',' expected at {rest:?}"));
        }
    }
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    Ok(out)
}

/// A Go-quoted string at the start of `s`: (its value, what follows).
fn quoted(s: &str) -> Option<(String, &str)> {
    let body = s.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &body[i + 1..])),
            '\\' => {
                let (_, e) = chars.next()?;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'u' => {
                        let hex: String =
                            (0..4).filter_map(|_| chars.next().map(|x| x.1)).collect();
                        out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    }
                    other => out.push(other),
                }
            }
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::labels as l;

    #[test]
    fn label_sets_parse_as_loki_writes_them() {
        assert_eq!(
            parse_labels(r#"{pod="egress-7", namespace="media"}"#).unwrap(),
            l(&[("namespace", "media"), ("pod", "egress-7")])
        );
        assert_eq!(
            parse_labels(r#"{a="say \"hi\"\n", b="\u00e9"}"#).unwrap(),
            l(&[("a", "say \"hi\"\n"), ("b", "é")])
        );
        assert_eq!(parse_labels("{}").unwrap(), l(&[]));
        for bad in [
            "pod=\"x\"",
            "{pod=x}",
            "{=\"x\"}",
            "{pod=\"x\" ns=\"y\"}",
            "{pod=\"x}",
        ] {
            assert!(parse_labels(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn protobuf_and_json_pushes_decode_to_the_same_entries() {
        let req = PushRequest {
            streams: vec![Stream {
                labels: br#"{pod="egress-7", node_id="NE_1"}"#.to_vec(),
                entries: vec![
                    EntryAdapter {
                        timestamp: Some(Timestamp {
                            seconds: 1_714_572_001,
                            nanos: 5,
                        }),
                        line: b"second".to_vec(),
                        structured_metadata: vec![LabelPair {
                            name: b"trace_id".to_vec(),
                            value: b"abc".to_vec(),
                        }],
                    },
                    EntryAdapter {
                        timestamp: Some(Timestamp {
                            seconds: 1_714_572_000,
                            nanos: 0,
                        }),
                        line: b"first \xff".to_vec(),
                        structured_metadata: vec![],
                    },
                ],
                hash: 0,
            }],
        };
        let body = snap::raw::Encoder::new()
            .compress_vec(&req.encode_to_vec())
            .unwrap();
        let pb = decode("application/x-protobuf", &body, 1 << 20).unwrap();
        let js = decode(
            "application/json; charset=utf-8",
            br#"{"streams":[{"stream":{"pod":"egress-7","node_id":"NE_1"},"values":[["1714572001000000005","second",{"trace_id":"abc"}],["1714572000000000000","first \ufffd"]]}]}"#,
            1 << 20,
        )
        .unwrap();
        assert_eq!(pb.entries, js.entries);
        assert_eq!(pb.entries[0].line, "first \u{fffd}");
        assert_eq!(
            pb.entries[0].labels,
            l(&[("node_id", "NE_1"), ("pod", "egress-7")])
        );
        assert_eq!(pb.entries[1].metadata, l(&[("trace_id", "abc")]));
        assert_eq!(pb.entries[1].ts, 1_714_572_001_000_000_005);
    }

    #[test]
    fn bad_pushes_say_what_is_wrong() {
        let truncated = {
            let req = PushRequest {
                streams: vec![Stream {
                    labels: br#"{a="b"}"#.to_vec(),
                    entries: vec![EntryAdapter {
                        timestamp: None,
                        line: b"a line".to_vec(),
                        structured_metadata: vec![],
                    }],
                    hash: 0,
                }],
            };
            let mut raw = req.encode_to_vec();
            raw.truncate(raw.len() - 3);
            snap::raw::Encoder::new().compress_vec(&raw).unwrap()
        };
        let e = decode("application/x-protobuf", &truncated, 1 << 20).unwrap_err();
        assert_eq!(e.status(), 400, "{e}");
        let e = decode("text/plain", b"x", 100).unwrap_err();
        assert_eq!(e.status(), 415);
        let e = decode(
            "application/json",
            br#"{"streams":[{"stream":{},"values":[[1,"x"]]}]}"#,
            100,
        )
        .unwrap_err();
        assert!(e.to_string().contains("stream 0, value 0"), "{e}");
        let bad_labels = PushRequest {
            streams: vec![Stream {
                labels: b"pod=x".to_vec(),
                entries: vec![],
                hash: 0,
            }],
        };
        let body = snap::raw::Encoder::new()
            .compress_vec(&bad_labels.encode_to_vec())
            .unwrap();
        let e = decode("application/x-protobuf", &body, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("stream 0"), "{e}");
    }
}
