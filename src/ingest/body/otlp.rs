//! `POST /v1/logs` bodies of OTLP/HTTP: `ExportLogsServiceRequest` as
//! protobuf (`application/x-protobuf`) or as the spec's JSON mapping
//! (`application/json`: camelCase names, 64-bit integers as strings, ids
//! as hex). The messages are written here from the field numbers of
//! opentelemetry-proto's logs and common protos.
//!
//! Labels follow Loki's own OTLP ingestion, so a line pushed here and the
//! same line read back from a Loki fed by OTLP group alike: resource and
//! scope attributes with `.` turned into `_` (`k8s.pod.name` →
//! `k8s_pod_name`, `service.name` → `service_name`); the well-known
//! Kubernetes ones also under the names the Loki source and the kubelet
//! paths give (`pod`, `namespace`, `container`, `node`), and `host.name` as
//! `host`. Log record attributes and `trace_id`/`span_id` become fields
//! (structured metadata), the body the line (a map or list body as JSON),
//! `severity_text` (else the level `severity_number` names) a `level` field
//! when the body does not say its own.

use super::{line_text, Decoded, Entry, PushError};
use prost::Message;

#[derive(Clone, PartialEq, Message)]
struct ExportLogsServiceRequest {
    #[prost(message, repeated, tag = "1")]
    resource_logs: Vec<ResourceLogs>,
}

#[derive(Clone, PartialEq, Message)]
struct ResourceLogs {
    #[prost(message, optional, tag = "1")]
    resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    scope_logs: Vec<ScopeLogs>,
}

#[derive(Clone, PartialEq, Message)]
struct Resource {
    #[prost(message, repeated, tag = "1")]
    attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, Message)]
struct ScopeLogs {
    #[prost(message, optional, tag = "1")]
    scope: Option<Scope>,
    #[prost(message, repeated, tag = "2")]
    log_records: Vec<LogRecord>,
}

#[derive(Clone, PartialEq, Message)]
struct Scope {
    #[prost(bytes = "vec", tag = "1")]
    name: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    version: Vec<u8>,
    #[prost(message, repeated, tag = "3")]
    attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, Message)]
struct LogRecord {
    #[prost(fixed64, tag = "1")]
    time_unix_nano: u64,
    #[prost(fixed64, tag = "11")]
    observed_time_unix_nano: u64,
    #[prost(int32, tag = "2")]
    severity_number: i32,
    #[prost(bytes = "vec", tag = "3")]
    severity_text: Vec<u8>,
    #[prost(message, optional, tag = "5")]
    body: Option<AnyValue>,
    #[prost(message, repeated, tag = "6")]
    attributes: Vec<KeyValue>,
    #[prost(bytes = "vec", tag = "9")]
    trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "10")]
    span_id: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
struct KeyValue {
    #[prost(bytes = "vec", tag = "1")]
    key: Vec<u8>,
    #[prost(message, optional, tag = "2")]
    value: Option<AnyValue>,
}

#[derive(Clone, PartialEq, Message)]
struct AnyValue {
    #[prost(oneof = "Value", tags = "1, 2, 3, 4, 5, 6, 7")]
    value: Option<Value>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Value {
    #[prost(bytes = "vec", tag = "1")]
    String(Vec<u8>),
    #[prost(bool, tag = "2")]
    Bool(bool),
    #[prost(int64, tag = "3")]
    Int(i64),
    #[prost(double, tag = "4")]
    Double(f64),
    #[prost(message, tag = "5")]
    Array(ArrayValue),
    #[prost(message, tag = "6")]
    Kvlist(KeyValueList),
    #[prost(bytes = "vec", tag = "7")]
    Bytes(Vec<u8>),
}

#[derive(Clone, PartialEq, Message)]
struct ArrayValue {
    #[prost(message, repeated, tag = "1")]
    values: Vec<AnyValue>,
}

#[derive(Clone, PartialEq, Message)]
struct KeyValueList {
    #[prost(message, repeated, tag = "1")]
    values: Vec<KeyValue>,
}

/// One record as the decoder reads it, from either encoding.
struct Record {
    time: u64,
    observed: u64,
    severity_number: i32,
    severity_text: String,
    /// The line, and whether the body was a map (then it is JSON).
    body: Option<(String, bool)>,
    fields: Vec<(String, String)>,
}

/// Decodes an OTLP/HTTP logs body (already undone of its
/// `Content-Encoding`) by its `Content-Type`.
pub fn decode(content_type: &str, body: &[u8]) -> Result<Decoded, PushError> {
    let ct = super::media_type(content_type);
    let mut d = Decoded::default();
    let mut push = |resource: Vec<(String, String)>, scope: Vec<(String, String)>, r: Record| {
        add(&mut d, &resource, &scope, r);
    };
    match ct.as_str() {
        "application/x-protobuf" | "application/protobuf" => {
            let req = ExportLogsServiceRequest::decode(body).map_err(|e| {
                PushError::Malformed(format!("not an OTLP ExportLogsServiceRequest: {e}"))
            })?;
            for rl in req.resource_logs {
                let resource = attrs(rl.resource.map(|r| r.attributes).unwrap_or_default());
                for sl in rl.scope_logs {
                    let scope = scope_labels(sl.scope);
                    for lr in sl.log_records {
                        push(resource.clone(), scope.clone(), record(lr));
                    }
                }
            }
        }
        "application/json" => json::decode(body, &mut push)?,
        other => {
            return Err(PushError::Unsupported(format!(
                "Content-Type {other:?}: OTLP/HTTP is application/x-protobuf or application/json"
            )))
        }
    }
    d.sort();
    Ok(d)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn attrs(kvs: Vec<KeyValue>) -> Vec<(String, String)> {
    kvs.into_iter()
        .filter_map(|kv| Some((text(&kv.key), value_text(kv.value?)?.0)))
        .collect()
}

fn scope_labels(s: Option<Scope>) -> Vec<(String, String)> {
    let Some(s) = s else { return Vec::new() };
    let mut out = attrs(s.attributes);
    if !s.name.is_empty() {
        out.push(("scope.name".into(), text(&s.name)));
    }
    out
}

/// A value as text: a string as it is, a number or bool as written, a map
/// or list as JSON (and whether it was a map).
fn value_text(v: AnyValue) -> Option<(String, bool)> {
    Some(match v.value? {
        Value::String(s) => (text(&s), false),
        Value::Bool(b) => (b.to_string(), false),
        Value::Int(i) => (i.to_string(), false),
        Value::Double(f) => (f.to_string(), false),
        Value::Bytes(b) => (hex(&b), false),
        Value::Array(a) => (to_json(&Value::Array(a)).to_string(), false),
        Value::Kvlist(m) => (to_json(&Value::Kvlist(m)).to_string(), true),
    })
}

fn to_json(v: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    let any = |a: &AnyValue| a.value.as_ref().map_or(J::Null, to_json);
    match v {
        Value::String(s) => J::String(text(s)),
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::from(*i),
        Value::Double(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        Value::Bytes(b) => J::String(hex(b)),
        Value::Array(a) => J::Array(a.values.iter().map(any).collect()),
        Value::Kvlist(m) => J::Object(
            m.values
                .iter()
                .map(|kv| (text(&kv.key), kv.value.as_ref().map_or(J::Null, any)))
                .collect(),
        ),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn record(lr: LogRecord) -> Record {
    let mut fields = attrs(lr.attributes);
    if !lr.trace_id.is_empty() {
        fields.push(("trace_id".into(), hex(&lr.trace_id)));
    }
    if !lr.span_id.is_empty() {
        fields.push(("span_id".into(), hex(&lr.span_id)));
    }
    Record {
        time: lr.time_unix_nano,
        observed: lr.observed_time_unix_nano,
        severity_number: lr.severity_number,
        severity_text: text(&lr.severity_text),
        body: lr.body.and_then(value_text),
        fields,
    }
}

/// The level a `severity_number` names (the spec's ranges).
fn severity_name(n: i32) -> Option<&'static str> {
    Some(match n {
        1..=4 => "trace",
        5..=8 => "debug",
        9..=12 => "info",
        13..=16 => "warn",
        17..=20 => "error",
        21..=24 => "fatal",
        _ => return None,
    })
}

/// The Loki-style label name of an attribute (`.` → `_`), and the short
/// name the Loki source and the kubelet paths use, for the well-known ones.
fn label_names(key: &str) -> (String, Option<&'static str>) {
    let short = match key {
        "k8s.pod.name" => Some("pod"),
        "k8s.namespace.name" => Some("namespace"),
        "k8s.container.name" => Some("container"),
        "k8s.node.name" => Some("node"),
        "host.name" => Some("host"),
        _ => None,
    };
    (key.replace(['.', '-', '/'], "_"), short)
}

fn add(d: &mut Decoded, resource: &[(String, String)], scope: &[(String, String)], r: Record) {
    let Some((line, is_map)) = r.body.filter(|(l, _)| !l.is_empty()) else {
        d.skipped += 1;
        return;
    };
    let mut labels: Vec<(String, String)> = Vec::new();
    for (k, v) in resource.iter().chain(scope) {
        let (name, short) = label_names(k);
        if let Some(s) = short {
            labels.push((s.to_string(), v.clone()));
        }
        labels.push((name, v.clone()));
    }
    labels.sort();
    labels.dedup_by(|a, b| a.0 == b.0);
    let mut metadata = r.fields;
    let level = if r.severity_text.is_empty() {
        severity_name(r.severity_number).map(str::to_string)
    } else {
        Some(r.severity_text.to_ascii_lowercase())
    };
    // A JSON body says its own level; a plain line is given the record's.
    if let Some(level) = level.filter(|_| !is_map) {
        metadata.push(("level".into(), level));
    }
    let ts = if r.time != 0 { r.time } else { r.observed };
    d.entries.push(Entry {
        labels,
        metadata,
        ts: i64::try_from(ts).unwrap_or(i64::MAX),
        line: line_text(line.as_bytes()),
    });
}

/// The spec's JSON mapping of the same messages.
mod json {
    use super::{PushError, Record};
    use serde::Deserialize;
    use serde_json::Value as J;

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Request {
        #[serde(default)]
        resource_logs: Vec<ResourceLogs>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ResourceLogs {
        #[serde(default)]
        resource: Option<Attributed>,
        #[serde(default)]
        scope_logs: Vec<ScopeLogs>,
    }

    #[derive(Deserialize, Default)]
    struct Attributed {
        #[serde(default)]
        attributes: Vec<KeyValue>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ScopeLogs {
        #[serde(default)]
        scope: Option<Scope>,
        #[serde(default)]
        log_records: Vec<LogRecord>,
    }

    #[derive(Deserialize)]
    struct Scope {
        #[serde(default)]
        name: String,
        #[serde(default)]
        attributes: Vec<KeyValue>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct LogRecord {
        #[serde(default)]
        time_unix_nano: Option<J>,
        #[serde(default)]
        observed_time_unix_nano: Option<J>,
        #[serde(default)]
        severity_number: Option<J>,
        #[serde(default)]
        severity_text: String,
        #[serde(default)]
        body: Option<J>,
        #[serde(default)]
        attributes: Vec<KeyValue>,
        #[serde(default)]
        trace_id: String,
        #[serde(default)]
        span_id: String,
    }

    #[derive(Deserialize)]
    struct KeyValue {
        key: String,
        #[serde(default)]
        value: Option<J>,
    }

    /// A 64-bit integer as JSON writes it: a string (the spec) or a number.
    fn int(v: &Option<J>) -> u64 {
        match v {
            Some(J::String(s)) => s.parse().unwrap_or(0),
            Some(J::Number(n)) => n.as_u64().unwrap_or(0),
            _ => 0,
        }
    }

    /// An `AnyValue` object (`{"stringValue": …}`, `{"kvlistValue": …}`…)
    /// as plain JSON.
    fn plain(v: &J) -> J {
        let Some(o) = v.as_object() else {
            return J::Null;
        };
        if let Some(s) = o.get("stringValue") {
            return s.clone();
        }
        if let Some(b) = o.get("boolValue") {
            return b.clone();
        }
        if let Some(i) = o.get("intValue") {
            return match i {
                J::String(s) => s.parse::<i64>().map_or(i.clone(), J::from),
                other => other.clone(),
            };
        }
        if let Some(d) = o.get("doubleValue") {
            return d.clone();
        }
        if let Some(b) = o.get("bytesValue") {
            return b.clone();
        }
        if let Some(a) = o.get("arrayValue") {
            let vals = a
                .get("values")
                .and_then(J::as_array)
                .cloned()
                .unwrap_or_default();
            return J::Array(vals.iter().map(plain).collect());
        }
        if let Some(m) = o.get("kvlistValue") {
            let vals = m
                .get("values")
                .and_then(J::as_array)
                .cloned()
                .unwrap_or_default();
            return J::Object(
                vals.iter()
                    .filter_map(|kv| {
                        let k = kv.get("key")?.as_str()?.to_string();
                        Some((k, kv.get("value").map_or(J::Null, plain)))
                    })
                    .collect(),
            );
        }
        J::Null
    }

    fn as_text(v: &J) -> Option<(String, bool)> {
        match plain(v) {
            J::Null => None,
            J::String(s) => Some((s, false)),
            m @ J::Object(_) => Some((m.to_string(), true)),
            other => Some((other.to_string(), false)),
        }
    }

    fn attrs(kvs: &[KeyValue]) -> Vec<(String, String)> {
        kvs.iter()
            .filter_map(|kv| Some((kv.key.clone(), as_text(kv.value.as_ref()?)?.0)))
            .collect()
    }

    pub(super) fn decode(
        body: &[u8],
        push: &mut impl FnMut(Vec<(String, String)>, Vec<(String, String)>, Record),
    ) -> Result<(), PushError> {
        let text = super::super::body_text(body);
        let req: Request = serde_json::from_str(&text)
            .map_err(|e| PushError::Malformed(format!("not an OTLP logs request: {e}")))?;
        for rl in req.resource_logs {
            let resource = attrs(&rl.resource.unwrap_or_default().attributes);
            for sl in rl.scope_logs {
                let mut scope = Vec::new();
                if let Some(s) = &sl.scope {
                    scope = attrs(&s.attributes);
                    if !s.name.is_empty() {
                        scope.push(("scope.name".into(), s.name.clone()));
                    }
                }
                for lr in sl.log_records {
                    let mut fields = attrs(&lr.attributes);
                    if !lr.trace_id.is_empty() {
                        fields.push(("trace_id".into(), lr.trace_id.to_ascii_lowercase()));
                    }
                    if !lr.span_id.is_empty() {
                        fields.push(("span_id".into(), lr.span_id.to_ascii_lowercase()));
                    }
                    let severity_number = match &lr.severity_number {
                        Some(J::Number(n)) => n.as_i64().unwrap_or(0) as i32,
                        _ => 0,
                    };
                    let r = Record {
                        time: int(&lr.time_unix_nano),
                        observed: int(&lr.observed_time_unix_nano),
                        severity_number,
                        severity_text: lr.severity_text.clone(),
                        body: lr.body.as_ref().and_then(as_text),
                        fields,
                    };
                    push(resource.clone(), scope.clone(), r);
                }
            }
        }
        Ok(())
    }
}

/// The answer to an export: `{}` when every record was taken, else the
/// spec's partial success with how many were rejected and why (JSON, or
/// the protobuf `ExportLogsServiceResponse` for a protobuf request).
pub fn response(protobuf: bool, rejected: u64, why: &str) -> Vec<u8> {
    #[derive(Clone, PartialEq, Message)]
    struct Response {
        #[prost(message, optional, tag = "1")]
        partial_success: Option<Partial>,
    }
    #[derive(Clone, PartialEq, Message)]
    struct Partial {
        #[prost(int64, tag = "1")]
        rejected_log_records: i64,
        #[prost(string, tag = "2")]
        error_message: String,
    }
    let partial = (rejected > 0).then(|| Partial {
        rejected_log_records: i64::try_from(rejected).unwrap_or(i64::MAX),
        error_message: why.to_string(),
    });
    if protobuf {
        Response {
            partial_success: partial,
        }
        .encode_to_vec()
    } else {
        match partial {
            None => b"{}".to_vec(),
            Some(p) => serde_json::json!({"partialSuccess": {
                "rejectedLogRecords": p.rejected_log_records.to_string(),
                "errorMessage": p.error_message,
            }})
            .to_string()
            .into_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(k: &str, v: &str) -> KeyValue {
        KeyValue {
            key: k.as_bytes().to_vec(),
            value: Some(AnyValue {
                value: Some(Value::String(v.as_bytes().to_vec())),
            }),
        }
    }

    #[test]
    fn protobuf_and_json_exports_decode_alike() {
        let req = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(Resource {
                    attributes: vec![
                        kv("k8s.pod.name", "egress-7"),
                        kv("k8s.node.name", "node-a"),
                        kv("service.name", "egress"),
                    ],
                }),
                scope_logs: vec![ScopeLogs {
                    scope: Some(Scope {
                        name: b"app".to_vec(),
                        version: vec![],
                        attributes: vec![],
                    }),
                    log_records: vec![
                        LogRecord {
                            time_unix_nano: 1_714_572_000_000_000_000,
                            observed_time_unix_nano: 0,
                            severity_number: 17,
                            severity_text: vec![],
                            body: Some(AnyValue {
                                value: Some(Value::String(b"No space left on device".to_vec())),
                            }),
                            attributes: vec![kv("egressID", "EG_1")],
                            trace_id: vec![0xab; 16],
                            span_id: vec![],
                        },
                        LogRecord {
                            time_unix_nano: 0,
                            observed_time_unix_nano: 1_714_572_001_000_000_000,
                            severity_number: 9,
                            severity_text: b"INFO".to_vec(),
                            body: Some(AnyValue {
                                value: Some(Value::Kvlist(KeyValueList {
                                    values: vec![kv("msg", "hello")],
                                })),
                            }),
                            attributes: vec![],
                            trace_id: vec![],
                            span_id: vec![],
                        },
                        LogRecord {
                            time_unix_nano: 1,
                            observed_time_unix_nano: 0,
                            severity_number: 0,
                            severity_text: vec![],
                            body: None,
                            attributes: vec![],
                            trace_id: vec![],
                            span_id: vec![],
                        },
                    ],
                }],
            }],
        };
        let pb = decode("application/x-protobuf", &req.encode_to_vec()).unwrap();
        let js = decode(
            "application/json",
            format!(
                r#"{{"resourceLogs":[{{"resource":{{"attributes":[{{"key":"k8s.pod.name","value":{{"stringValue":"egress-7"}}}},{{"key":"k8s.node.name","value":{{"stringValue":"node-a"}}}},{{"key":"service.name","value":{{"stringValue":"egress"}}}}]}},"scopeLogs":[{{"scope":{{"name":"app"}},"logRecords":[{{"timeUnixNano":"1714572000000000000","severityNumber":17,"body":{{"stringValue":"No space left on device"}},"attributes":[{{"key":"egressID","value":{{"stringValue":"EG_1"}}}}],"traceId":"{}"}},{{"observedTimeUnixNano":"1714572001000000000","severityNumber":9,"severityText":"INFO","body":{{"kvlistValue":{{"values":[{{"key":"msg","value":{{"stringValue":"hello"}}}}]}}}}}},{{"timeUnixNano":"1"}}]}}]}}]}}"#,
                "ab".repeat(16)
            )
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(pb.entries, js.entries);
        assert_eq!((pb.skipped, js.skipped), (1, 1));
        let e = &pb.entries[0];
        assert_eq!(e.line, "No space left on device");
        assert_eq!(e.ts, 1_714_572_000_000_000_000);
        for (k, v) in [
            ("pod", "egress-7"),
            ("k8s_pod_name", "egress-7"),
            ("node", "node-a"),
            ("service_name", "egress"),
            ("scope_name", "app"),
        ] {
            assert!(
                e.labels.contains(&(k.into(), v.into())),
                "{k}: {:?}",
                e.labels
            );
        }
        assert!(e.metadata.contains(&("level".into(), "error".into())));
        assert!(e.metadata.contains(&("egressID".into(), "EG_1".into())));
        assert!(e.metadata.contains(&("trace_id".into(), "ab".repeat(16))));
        // A map body is the JSON line; its time is the observed one.
        let m = &pb.entries[1];
        assert_eq!(m.line, r#"{"msg":"hello"}"#);
        assert_eq!(m.ts, 1_714_572_001_000_000_000);
    }

    #[test]
    fn bad_exports_and_the_answers() {
        assert_eq!(
            decode("application/x-protobuf", b"\x0a\xff")
                .unwrap_err()
                .status(),
            400
        );
        assert_eq!(decode("application/json", b"{").unwrap_err().status(), 400);
        assert_eq!(decode("text/plain", b"").unwrap_err().status(), 415);
        assert_eq!(response(false, 0, ""), b"{}");
        let r = String::from_utf8(response(false, 2, "no body")).unwrap();
        assert!(
            r.contains("\"rejectedLogRecords\":\"2\"") && r.contains("no body"),
            "{r}"
        );
        assert!(response(true, 0, "").is_empty());
    }
}
