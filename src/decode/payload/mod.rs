//! Payload formats: JSON objects (zap production, kube events, journald),
//! zap console lines, klog, syslog, logfmt, and text behind any header the
//! header reader knows ([`super::header`]: log4j, Go's `log`, nginx,
//! PostgreSQL…). Each yields time, level, message and fields; a line that
//! fits none is still an event whose message is the line. One file per
//! family of formats; this one holds what they share and the dispatch that
//! picks one.

mod console;
mod journal;
mod json;
mod logfmt;
mod text;

pub use logfmt::parse_pairs;

use super::header::{self, Header, Kind, Reference};
use super::quick::quick_get;
use super::time::parse_any;
use serde_json::{Map, Value};
use std::borrow::Cow;

use super::severity::Level;

/// Which format a payload was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A JSON object.
    Json,
    /// zap console: `time\tLEVEL\tlogger\tcaller\tmsg\t{json}`.
    Console,
    /// klog: `I0501 12:00:40.118204 1187 file.go:107] "msg" k="v"`.
    Klog,
    /// logfmt: `level=info msg="…"`.
    Logfmt,
    /// Go `log` prefix: `redis: 2024/05/01 12:00:03 pool.go:762: …`.
    GoLog,
    /// syslog: `May 01 12:00:40 host prog[pid]: …` with plain text inside.
    Syslog,
    /// Text behind a header the header reader knows (a stamp, a level).
    Text,
    /// Anything else: no time, no level, no fields of its own.
    Plain,
}

/// Fields of a decoded payload.
#[derive(Debug, Clone, Default)]
pub enum Fields {
    /// No fields.
    #[default]
    None,
    /// A JSON object.
    Json(Map<String, Value>),
    /// Key-value pairs (logfmt, klog, syslog header).
    Pairs(Vec<(String, String)>),
}

impl Fields {
    /// Looks up a field by name, then as a dotted path into nested objects.
    pub fn get(&self, path: &str) -> Option<Cow<'_, str>> {
        match self {
            Fields::None => None,
            Fields::Pairs(p) => p
                .iter()
                .rev()
                .find(|(k, _)| k == path)
                .map(|(_, v)| Cow::Borrowed(v.as_str())),
            Fields::Json(m) => json::json_path(m, path).and_then(value_str),
        }
    }
}

/// The text of a JSON value: strings as is, scalars printed, null absent.
pub fn value_str(v: &Value) -> Option<Cow<'_, str>> {
    match v {
        Value::String(s) => Some(Cow::Borrowed(s.as_str())),
        Value::Null => None,
        Value::Bool(b) => Some(Cow::Owned(b.to_string())),
        Value::Number(n) => Some(Cow::Owned(n.to_string())),
        other => Some(Cow::Owned(other.to_string())),
    }
}

/// A decoded payload.
#[derive(Debug, Clone)]
pub struct Payload {
    /// Detected format.
    pub format: Format,
    /// Event time from the payload itself (ns).
    pub time: Option<i64>,
    /// Level.
    pub level: Option<Level>,
    /// Message.
    pub message: String,
    /// Fields.
    pub fields: Fields,
    /// True when the line looked structured but did not parse.
    pub malformed: bool,
}

/// Message keys: zap, slog, ECS, journald, shippers; Serilog's compact JSON
/// (`@m`, or the template `@mt`) last.
pub(super) const MSG_KEYS: &[&str] = &["msg", "message", "MESSAGE", "log", "@m", "@mt"];

/// Time keys of structured lines, in order of preference (journald's
/// microsecond `__REALTIME_TIMESTAMP`, first in the list, is read apart).
pub(super) const TIME_KEYS: &[&str] = super::time::TIME_FIELDS.split_at(1).1;

/// Level keys, in order: zap, GCP, logrus, journald; the Elastic Common
/// Schema's `log.level`, Serilog's `@l`.
pub(super) const LEVEL_KEYS: &[&str] = &["level", "severity", "lvl", "PRIORITY", "log.level", "@l"];

/// The format of a line that needs no header read: `json`, `logfmt` or
/// `console` (zap's console encoder), from its first bytes; None for
/// anything else.
pub fn structured_kind(text: &str) -> Option<&'static str> {
    let b = text.as_bytes();
    match b.first() {
        None => return None,
        Some(b'{') => return Some("json"),
        _ => {}
    }
    let t = text.trim_start();
    let b = t.as_bytes();
    if b.first() == Some(&b'{') {
        return Some("json");
    }
    if console::looks_like_console(b) {
        return Some("console");
    }
    logfmt_start(t).then_some("logfmt")
}

/// A logfmt line's start: the first token is `key=…` and another `=`
/// follows.
fn logfmt_start(t: &str) -> bool {
    let b = t.as_bytes();
    let first = memchr::memchr(b' ', b).unwrap_or(b.len());
    match memchr::memchr(b'=', &b[..first]) {
        Some(eq) => logfmt::logfmt_key(&t[..eq]) && memchr::memchr(b'=', &b[first..]).is_some(),
        None => false,
    }
}

/// The format name of a line that is not [`structured_kind`], from its
/// header: `syslog`, `klog`, `golog`, `text` (a header was read), `plain`
/// (nothing was recognised).
pub fn header_kind(h: &Header) -> &'static str {
    match h.kind {
        Kind::Syslog => "syslog",
        Kind::Klog => "klog",
        Kind::GoLog => "golog",
        Kind::Text => "text",
        Kind::None => "plain",
    }
}

/// The format [`decode`] picks, by name, as the `lines by format`
/// counters show it: `json`, `console`, `logfmt`, `syslog`, `klog`,
/// `golog`, `text`, `plain`.
#[cfg(test)]
pub(crate) fn sniff(text: &str) -> &'static str {
    structured_kind(text).unwrap_or_else(|| header_kind(&header::read(text.trim_start(), None)))
}

/// Decodes a payload. `reference` is a nearby known time used to complete
/// stamps that carry no year or date (klog, syslog, logcat).
pub fn decode(text: &str, reference: Option<i64>) -> Payload {
    decode_at(text, Reference::near(reference))
}

/// [`decode`] with a reference of either kind.
pub fn decode_at(text: &str, reference: Reference) -> Payload {
    let t = text.trim_end_matches(['\r', '\n']);
    let lead = t.trim_start();
    if lead.starts_with('{') {
        return json::decode_json(t);
    }
    if let Some(p) = console::decode_console(t) {
        return p;
    }
    if let Some(p) = journal::decode_klog(lead, reference) {
        return p;
    }
    if logfmt_start(lead) {
        if let Some(p) = logfmt::decode_logfmt(lead) {
            return p;
        }
    }
    let h = header::read_at(lead, reference);
    match h.kind {
        Kind::None => plain(t, false),
        Kind::Syslog => journal::decode_syslog(lead, &h, reference),
        _ => text::decode_text(lead, &h),
    }
}

/// What template mining reads of a payload: its message, and the text its
/// error detail may be in (a console line's trailing object, a klog
/// line's pairs), the same answers as [`decode`]'s `message` and error
/// field without building the fields (mining reads every mined line).
#[derive(Debug, Clone, PartialEq)]
pub struct MessageParts<'t> {
    /// The message, as [`decode`] gives it.
    pub message: Cow<'t, str>,
    /// Where an `error`/`err` key may be ("" when the format has none).
    pub details: &'t str,
}

/// [`MessageParts`] of a text payload; None when only the full decoder can
/// say (a JSON or logfmt payload, or one behind a header). `header`: the
/// header already read on `text` (start trimmed), if the caller has it.
pub fn message_parts<'t>(
    text: &'t str,
    reference: Reference,
    header: Option<&Header>,
) -> Option<MessageParts<'t>> {
    parts_at(text, reference, header).map(|(p, _)| p)
}

fn parts<'t>(message: Cow<'t, str>, details: &'t str) -> MessageParts<'t> {
    MessageParts { message, details }
}

/// `js` when it reads as one JSON object (a console line's trailing
/// fields): braces and brackets balance outside strings and close at its
/// end. Not a full validation (the decoder parses it), a cheap one that
/// agrees with it on what logs write: an object, or a cut one.
fn json_text(js: &str) -> Option<&str> {
    let b = js.as_bytes();
    if b.first() != Some(&b'{') {
        return None;
    }
    let (mut depth, mut i) = (0usize, 0);
    while i < b.len() {
        match b[i] {
            b'"' => {
                // To the closing quote, over escapes.
                i += 1;
                loop {
                    let at = i + memchr::memchr2(b'"', b'\\', &b[i..])?;
                    if b[at] == b'\\' {
                        i = at + 2;
                    } else {
                        i = at;
                        break;
                    }
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return (i + 1 == b.len()).then_some(js);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// [`message_parts`], and whether the payload was text behind a header
/// without a level (which syslog then reads as its program's whole text).
fn parts_at<'t>(
    text: &'t str,
    reference: Reference,
    header: Option<&Header>,
) -> Option<(MessageParts<'t>, bool)> {
    let t = text.trim_end_matches(['\r', '\n']);
    let lead = t.trim_start();
    if lead.starts_with('{') {
        return None;
    }
    if let Some(s) = console::split(t, json_text) {
        return Some((parts(s.message, s.fields.unwrap_or("")), false));
    }
    if let Some(journal::KlogSplit { body, .. }) = journal::klog_split(lead, Reference::None) {
        return Some(match body.strip_prefix('"') {
            Some(after) => {
                let (msg, used) = super::quick::read_quoted(after);
                (
                    parts(Cow::Owned(msg), after.get(used..).unwrap_or("")),
                    false,
                )
            }
            None => (parts(Cow::Borrowed(body), ""), false),
        });
    }
    if logfmt_start(lead) {
        return None;
    }
    let h = match header {
        Some(h) => *h,
        None => header::read_at(lead, reference),
    };
    match h.kind {
        Kind::None => Some((parts(Cow::Borrowed(t), ""), false)),
        Kind::Syslog => {
            let inner = lead.get(h.inner..).unwrap_or("");
            let inner_ref = h.time.map_or(reference, Reference::Near);
            let (p, bare) = parts_at(inner, inner_ref, None)?;
            Some(if bare {
                (parts(Cow::Borrowed(inner), ""), false)
            } else {
                (p, false)
            })
        }
        _ => {
            let body = h.message(lead).trim_end();
            let first = body.split(' ').next().unwrap_or("");
            if body.starts_with('{') || first.contains('=') {
                return None;
            }
            Some((parts(Cow::Borrowed(body), ""), h.level.is_none()))
        }
    }
}

/// The named parts of a header as fields (`logger`, `thread`, `pid`…).
pub(super) fn header_fields(t: &str, h: &Header) -> Vec<(String, String)> {
    h.parts(t)
        .map(|(p, v)| (p.name().to_string(), v.to_string()))
        .collect()
}

/// A payload read behind a header (syslog's program text, a text line's
/// JSON or logfmt body): the header's parts become fields beside the
/// payload's own (which win), its time and level stand in for missing
/// ones, and pairs without a message key are the message (`body`).
pub(super) fn behind_header(p: &mut Payload, t: &str, h: &Header, body: &str) {
    let pairs = header_fields(t, h);
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
        Fields::None if pairs.is_empty() => {}
        Fields::None => p.fields = Fields::Pairs(pairs),
    }
    p.time = p.time.or(h.time);
    p.level = p.level.or(h.level);
    if p.message.is_empty() && p.format == Format::Logfmt {
        p.message = body.trim_end().to_string();
    }
}

pub(super) fn plain(t: &str, malformed: bool) -> Payload {
    Payload {
        format: Format::Plain,
        time: None,
        level: None,
        message: t.to_string(),
        fields: Fields::None,
        malformed,
    }
}

/// The cheap time extraction for lines that need no full decode: a JSON
/// object's time keys, a header's stamp, a logfmt `ts=`/`time=`.
pub fn quick_time_at(text: &str, reference: Reference) -> Option<i64> {
    let t = text.trim_start();
    if t.starts_with('{') {
        if let Some(us) = quick_get(t, "__REALTIME_TIMESTAMP").and_then(|v| v.parse::<i64>().ok()) {
            return Some(us.saturating_mul(1000));
        }
        return TIME_KEYS
            .iter()
            .find_map(|k| quick_get(t, k).and_then(|v| parse_any(&v)));
    }
    let from_header = if logfmt_start(t) {
        None
    } else {
        header::read_at(t, reference).time
    };
    from_header.or_else(|| {
        ["ts", "time", "timestamp"]
            .iter()
            .find_map(|k| quick_get(t, k).and_then(|v| parse_any(&v)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::quick::quick_get;
    use crate::decode::time::parse_rfc3339;

    #[test]
    fn zap_json_with_duplicate_keys() {
        let p = decode(
            r#"{"level":"error","ts":1714568400.5533901,"logger":"livekit","msg":"failed to mark as draining","nodeID":"ND_a","nodeID":"ND_b"}"#,
            None,
        );
        assert_eq!(p.format, Format::Json);
        assert_eq!(p.level, Some(Level::Error));
        assert_eq!(p.message, "failed to mark as draining");
        assert_eq!(p.fields.get("nodeID").as_deref(), Some("ND_b"));
        // serde_json reads floats as f64: microsecond precision at epoch scale.
        assert!((p.time.unwrap() - 1_714_568_400_553_390_100).abs() < 1_000);
    }

    #[test]
    fn nested_and_dotted_paths() {
        let p = decode(
            r#"{"source":{"host":"node-a"},"rtc.portTCP":7881,"involvedObject":{"name":"p-1"}}"#,
            None,
        );
        assert_eq!(p.fields.get("source.host").as_deref(), Some("node-a"));
        assert_eq!(p.fields.get("rtc.portTCP").as_deref(), Some("7881"));
        assert_eq!(p.fields.get("involvedObject.name").as_deref(), Some("p-1"));
    }

    #[test]
    fn zap_console_tabs_and_spaces() {
        let l = "2025-07-17T12:01:25.055Z\tINFO\tlivekit\tservice/server.go:265\tstarting LiveKit server\t{\"portHttp\": 7880, \"nodeID\": \"ND_GqLvytWtqkB7\"}";
        let p = decode(l, None);
        assert_eq!(p.format, Format::Console);
        assert_eq!(p.message, "starting LiveKit server");
        assert_eq!(p.fields.get("nodeID").as_deref(), Some("ND_GqLvytWtqkB7"));
        assert_eq!(p.fields.get("logger").as_deref(), Some("livekit"));
        let s = "2024-07-07T10:42:41.982Z        ERROR   egress  service/io.go:47        failed to create egress {\"nodeID\": \"NE_s7aGJGh4RzTK\", \"error\": \"no response from servers\"}";
        let p = decode(s, None);
        assert_eq!(p.format, Format::Console);
        assert_eq!(p.level, Some(Level::Error));
        assert_eq!(p.message, "failed to create egress");
        assert_eq!(
            p.fields.get("error").as_deref(),
            Some("no response from servers")
        );
        let offs = decode("2024-07-17T12:19:35.209+0300\tINFO\tlivekit\trtc/participant.go:874\tparticipant closing\t{\"room\": \"r\"}", None);
        assert_eq!(offs.time, parse_rfc3339("2024-07-17T09:19:35.209Z"));
    }

    #[test]
    fn klog_and_syslog() {
        let reference = parse_rfc3339("2024-05-01T00:00:00Z");
        let l = r#"I0501 12:00:40.118204    1187 prober.go:107] "Probe failed" probeType="Liveness" pod="livekit/livekit-server-0" output="HTTP probe failed with statuscode: 406""#;
        let p = decode(l, reference);
        assert_eq!(p.format, Format::Klog);
        assert_eq!(p.message, "Probe failed");
        assert_eq!(
            p.fields.get("pod").as_deref(),
            Some("livekit/livekit-server-0")
        );
        assert_eq!(p.time, parse_rfc3339("2024-05-01T12:00:40.118204Z"));
        let s = format!("May 01 12:00:40 node-a kubelet[1187]: {l}");
        let p = decode(&s, reference);
        assert_eq!(p.format, Format::Klog);
        assert_eq!(p.fields.get("host").as_deref(), Some("node-a"));
        assert_eq!(p.fields.get("probeType").as_deref(), Some("Liveness"));
        let e = decode(
            r#"E0501 12:03:02.145522 1187 pod_workers.go:1298] "Error syncing pod, skipping" err="failed to \"StartContainer\"""#,
            reference,
        );
        assert_eq!(e.level, Some(Level::Error));
        assert_eq!(
            e.fields.get("err").as_deref(),
            Some("failed to \"StartContainer\"")
        );
    }

    #[test]
    fn golog_logfmt_plain() {
        let g = decode("redis: 2024/05/01 12:00:03 pool.go:762: redis: connection pool: failed to dial after 5 attempts: dial tcp 10.0.0.21:6379: connect: connection refused", None);
        assert_eq!(g.format, Format::GoLog);
        assert_eq!(g.time, parse_rfc3339("2024-05-01T12:00:03Z"));
        let l = decode(
            r#"time=2024-05-01T12:00:00Z level=warn msg="slow request" upstream=10.2.0.14:9090"#,
            None,
        );
        assert_eq!(l.format, Format::Logfmt);
        assert_eq!(l.level, Some(Level::Warn));
        assert_eq!(l.fields.get("upstream").as_deref(), Some("10.2.0.14:9090"));
        let p = decode(
            "could not register node: READONLY You can't write against a read only replica.",
            None,
        );
        assert_eq!(p.format, Format::Plain);
        let bad = decode("{\"level\":\"info\",\"msg\":\"trunc", None);
        assert!(bad.malformed);
        assert_eq!(bad.message, "{\"level\":\"info\",\"msg\":\"trunc");
    }

    #[test]
    fn envelopes_expose_the_inner_line() {
        // Fluent Bit / Vector record around a zap JSON line.
        let fb = r#"{"log":"{\"level\":\"error\",\"ts\":1714568400.5,\"msg\":\"failed to mark as draining\",\"nodeID\":\"ND_q\"}\n","stream":"stderr","kubernetes":{"pod_name":"lk-0","host":"node-7"}}"#;
        let p = decode(fb, None);
        assert_eq!(p.message, "failed to mark as draining");
        assert_eq!(p.level, Some(Level::Error));
        assert_eq!(p.fields.get("nodeID").as_deref(), Some("ND_q"));
        assert_eq!(p.fields.get("kubernetes.host").as_deref(), Some("node-7"));
        assert_eq!(quick_get(fb, "nodeID").as_deref(), Some("ND_q"));
        // journald JSON around a klog line.
        let j = r#"{"_HOSTNAME":"node-a","__REALTIME_TIMESTAMP":"1714564840118204","MESSAGE":"I0501 12:00:40.118204    1187 prober.go:107] \"Probe failed\" probeType=\"Liveness\" pod=\"prod/api-0\""}"#;
        let p = decode(j, None);
        assert_eq!(p.message, "Probe failed");
        assert_eq!(p.fields.get("pod").as_deref(), Some("prod/api-0"));
        assert_eq!(p.time, Some(1_714_564_840_118_204_000));
        assert_eq!(quick_get(j, "pod").as_deref(), Some("prod/api-0"));
    }

    #[test]
    fn quick_time_agrees_with_decode() {
        let lines = [
            r#"{"level":"info","ts":1714568405.554187,"msg":"x"}"#,
            "2025-07-17T12:01:25.055Z\tINFO\tlivekit\tservice/server.go:265\tstarting",
            "redis: 2024/05/01 12:00:03 pool.go:762: redis: x",
            r#"I0501 12:00:40.118204    1187 prober.go:107] "Probe failed""#,
        ];
        let r = parse_rfc3339("2024-05-01T00:00:00Z");
        for l in lines {
            assert_eq!(
                quick_time_at(l, Reference::near(r)),
                decode(l, r).time,
                "{l}"
            );
        }
    }
}
