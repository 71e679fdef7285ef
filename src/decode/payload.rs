//! Payload formats: JSON objects (zap production, kube events, journald),
//! zap console lines, klog, syslog-style journal lines, Go `log` prefixes,
//! logfmt, and plain text. Each yields time, level, message and fields; a
//! line that fits no structured format is still an event whose message is
//! the line.

use super::time::{self, parse_any, parse_clock, parse_rfc3339, with_inferred_year};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// Normalised severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// trace / debug.
    Debug,
    /// info / notice.
    Info,
    /// warn / warning.
    Warn,
    /// error.
    Error,
    /// fatal / panic / critical.
    Fatal,
}

impl Level {
    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
            Level::Fatal => "fatal",
        }
    }

    /// Parses level names of zap, logrus, slog, klog letters and syslog numbers.
    pub fn parse(s: &str) -> Option<Level> {
        let s = s.trim();
        Some(match s.to_ascii_lowercase().as_str() {
            "trace" | "debug" | "dbug" | "7" => Level::Debug,
            "info" | "information" | "notice" | "i" | "5" | "6" => Level::Info,
            "warn" | "warning" | "w" | "4" => Level::Warn,
            "error" | "err" | "e" | "3" => Level::Error,
            "fatal" | "panic" | "dpanic" | "critical" | "crit" | "alert" | "emerg" | "f" | "0"
            | "1" | "2" => Level::Fatal,
            _ => return None,
        })
    }
}

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
    /// Anything else.
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
            Fields::Json(m) => json_path(m, path).and_then(value_str),
        }
    }
}

fn json_path<'a>(m: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
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

const MSG_KEYS: &[&str] = &["msg", "message", "MESSAGE", "log"];
/// Time keys of structured lines, in order of preference (journald's
/// microsecond `__REALTIME_TIMESTAMP`, first in the list, is read apart).
const TIME_KEYS: &[&str] = super::keys::TIME_FIELDS.split_at(1).1;
const LEVEL_KEYS: &[&str] = &["level", "severity", "lvl", "PRIORITY"];

/// The format [`decode`] would most likely pick, from the first bytes only:
/// cheap enough for every line (the `lines by format` counters), exact
/// only where the header is unambiguous. Names: `json`, `console`,
/// `syslog`, `klog`, `golog`, `logfmt`, `plain`.
pub fn sniff(text: &str) -> &'static str {
    let t = text.trim_start();
    let b = t.as_bytes();
    match b.first() {
        None => return "plain",
        Some(b'{') => return "json",
        _ => {}
    }
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    if b.len() >= 24 && digit(0) && b[4] == b'-' && b.get(10) == Some(&b'T') {
        return "console";
    }
    if b.len() > 16
        && t.get(..3)
            .and_then(super::time::month_from_abbrev)
            .is_some()
        && b[3] == b' '
    {
        return "syslog";
    }
    if matches!(b[0], b'I' | b'W' | b'E' | b'F') && (1..5).all(digit) && b.get(5) == Some(&b' ') {
        return "klog";
    }
    if let Some(start) = b.iter().take(41).position(u8::is_ascii_digit) {
        if golog_header(&b[start..]) {
            return "golog";
        }
    }
    let first = memchr::memchr(b' ', b).unwrap_or(b.len());
    if let Some(eq) = memchr::memchr(b'=', &b[..first]) {
        if logfmt_key(&t[..eq]) && memchr::memchr(b'=', &b[first..]).is_some() {
            return "logfmt";
        }
    }
    "plain"
}

/// Decodes a payload. `reference` is a nearby known time used to complete
/// stamps that carry no year (klog, syslog).
pub fn decode(text: &str, reference: Option<i64>) -> Payload {
    let t = text.trim_end_matches(['\r', '\n']);
    if t.trim_start().starts_with('{') {
        return decode_json(t);
    }
    if let Some(p) = decode_console(t) {
        return p;
    }
    if let Some(p) = decode_syslog(t, reference) {
        return p;
    }
    if let Some(p) = decode_klog(t, reference) {
        return p;
    }
    if let Some(p) = decode_golog(t) {
        return p;
    }
    if let Some(p) = decode_logfmt(t) {
        return p;
    }
    plain(t, false)
}

fn plain(t: &str, malformed: bool) -> Payload {
    Payload {
        format: Format::Plain,
        time: None,
        level: None,
        message: t.to_string(),
        fields: Fields::None,
        malformed,
    }
}

/// Keys under which an envelope (journald JSON, Fluent Bit, Vector, Docker
/// via a shipper) carries the application's own line.
const ENVELOPE_KEYS: &[&str] = &["MESSAGE", "log", "message"];

fn decode_json(t: &str) -> Payload {
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
    let time = json_time(&fields).or(inner_time);
    let level = LEVEL_KEYS
        .iter()
        .find_map(|k| fields.get(k).and_then(|v| Level::parse(&v)))
        .or(inner_level);
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
}

const CONSOLE_LEVELS: &[&str] = &[
    "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "DPANIC", "PANIC", "FATAL",
];

fn is_caller(s: &str) -> bool {
    s.rsplit_once(':').is_some_and(|(f, l)| {
        f.contains('.') && !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit())
    })
}

/// zap console: tab separated, or with the tabs turned into runs of spaces
/// (as happens when lines are copied from a terminal).
fn decode_console(t: &str) -> Option<Payload> {
    let b = t.as_bytes();
    if b.len() < 24 || !b[0].is_ascii_digit() || b[4] != b'-' || b[10] != b'T' {
        return None;
    }
    let (ts, rest) = t.split_once(['\t', ' '])?;
    let time = parse_rfc3339(ts)?;
    let rest = rest.trim_start();
    let (lvl, rest) = rest.split_once(['\t', ' ']).unwrap_or((rest, ""));
    if !CONSOLE_LEVELS.contains(&lvl) {
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
        None => parts
            .last()
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
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

/// `May 01 12:00:40 node-a kubelet[1187]: rest` (journalctl short output).
fn decode_syslog(t: &str, reference: Option<i64>) -> Option<Payload> {
    let month = time::month_from_abbrev(t.get(..3)?)?;
    let rest = t.get(4..)?.trim_start();
    let (day, rest) = rest.split_once(' ')?;
    let day: u32 = day.parse().ok()?;
    let (clock, rest) = rest.split_once(' ')?;
    let clock = parse_clock(clock)?;
    let (host, rest) = rest.split_once(' ')?;
    let (prog, inner) = rest.split_once(": ")?;
    let program = prog.split('[').next().unwrap_or(prog);
    let reference = reference.unwrap_or_else(now_ns);
    let time = with_inferred_year(reference, month, day, clock);
    let mut p = decode(inner, time.or(Some(reference)));
    if p.format == Format::Plain && !p.malformed {
        p.time = None;
    }
    let mut pairs = vec![
        ("host".to_string(), host.to_string()),
        ("program".to_string(), program.to_string()),
    ];
    match &mut p.fields {
        Fields::Json(m) => {
            for (k, v) in pairs {
                m.entry(k).or_insert(Value::String(v));
            }
        }
        Fields::Pairs(existing) => {
            pairs.append(existing);
            p.fields = Fields::Pairs(pairs);
        }
        Fields::None => p.fields = Fields::Pairs(pairs),
    }
    p.time = p.time.or(time);
    Some(p)
}

fn now_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}

/// klog: `I0501 12:00:40.118204    1187 prober.go:107] "Probe failed" k="v"`.
fn decode_klog(t: &str, reference: Option<i64>) -> Option<Payload> {
    // The header (letter, date, clock) is validated and timed by klog_time.
    let time = klog_time(t, reference);
    time?;
    let (_, rest) = t.get(6..)?.split_once(' ')?;
    let close = rest
        .find("] ")
        .or_else(|| rest.strip_suffix(']').map(|r| r.len()))?;
    let header = rest[..close].trim();
    if !header.split_whitespace().last().is_some_and(is_caller) {
        return None;
    }
    let body = rest.get(close + 2..).unwrap_or("");
    let level = Level::parse(&t[..1]);
    let (message, pairs) = if let Some(after) = body.strip_prefix('"') {
        // Structured klog: quoted message then logfmt-style pairs.
        let (msg, used) = read_quoted(after);
        (msg, parse_pairs(&after[used..]))
    } else {
        (body.to_string(), Vec::new())
    };
    Some(Payload {
        format: Format::Klog,
        time,
        level,
        message,
        fields: Fields::Pairs(pairs),
        malformed: false,
    })
}

/// Go `log` prefix: `[prefix: ]2024/05/01 12:00:03[.micro] rest`.
/// `YYYY/MM/DD HH:` at the start: a Go `log` stamp.
fn golog_header(b: &[u8]) -> bool {
    b.len() >= 19 && b[4] == b'/' && b[7] == b'/' && b[10] == b' ' && b[13] == b':'
}

/// A logfmt key: letters, digits, `_ . -`.
fn logfmt_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
}

fn decode_golog(t: &str) -> Option<Payload> {
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

/// logfmt: at least two `key=value` pairs and the first token is one.
fn decode_logfmt(t: &str) -> Option<Payload> {
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
    let message = get(&["msg", "message"]).unwrap_or_default();
    let time = get(&["ts", "time", "t", "timestamp"]).and_then(|v| parse_any(&v));
    let level = get(&["level", "lvl", "severity"]).and_then(|v| Level::parse(&v));
    Some(Payload {
        format: Format::Logfmt,
        time,
        level,
        message,
        fields: Fields::Pairs(pairs),
        malformed: false,
    })
}

/// Unescapes a JSON string body (without its quotes).
pub fn unescape_json(raw: &str) -> Option<String> {
    serde_json::from_str::<String>(&format!("\"{raw}\"")).ok()
}

/// Unescapes a Go-quoted value body (without its quotes).
pub fn parse_pairs_value(raw: &str) -> String {
    read_quoted(&format!("{raw}\"")).0
}

/// Reads a Go-quoted string body (after the opening quote); returns the
/// unescaped text and the bytes consumed including the closing quote.
fn read_quoted(s: &str) -> (String, usize) {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (out, i + 1),
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, other)) => out.push(other),
                None => break,
            },
            c => out.push(c),
        }
    }
    (out, s.len())
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

/// Finds a field's value in raw text without parsing it: `"key": value` (JSON,
/// including a console line's trailing object) or `key=value` (logfmt, klog).
/// This is the cheap path used for lines no rule can match.
pub fn quick_get<'a>(text: &'a str, key: &str) -> Option<Cow<'a, str>> {
    let bytes = text.as_bytes();
    let kb = key.as_bytes();
    let mut from = 0;
    while let Some(off) = memchr::memmem::find(&bytes[from..], kb) {
        let i = from + off;
        let end = i + kb.len();
        from = end;
        // JSON key: "key" then optional spaces then ':'.
        if i > 0 && bytes[i - 1] == b'"' && bytes.get(end) == Some(&b'"') {
            let before = if i >= 2 { bytes[i - 2] } else { b'{' };
            if !matches!(before, b'{' | b',' | b' ' | b'\t') {
                continue;
            }
            let Some(j) = after_colon(bytes, end + 1) else {
                continue;
            };
            return json_scalar_at(text, j);
        }
        // A key inside a JSON string (an envelope): \"key\":\"value\".
        if i >= 2
            && bytes[i - 1] == b'"'
            && bytes[i - 2] == b'\\'
            && text[end..].starts_with("\\\":")
        {
            let after = &text[end + 3..];
            let after = after.trim_start();
            if let Some(body) = after.strip_prefix("\\\"") {
                let stop = body.find("\\\"").unwrap_or(body.len());
                return Some(Cow::Borrowed(&body[..stop]));
            }
            let stop = after.find([',', '}', ' ']).unwrap_or(after.len());
            if stop > 0 {
                return Some(Cow::Borrowed(&after[..stop]));
            }
            continue;
        }
        // A logfmt pair inside a JSON string: pod=\"ns/name\".
        let at_boundary = i == 0 || bytes[i - 1] == b' ';
        if at_boundary && text[end..].starts_with("=\\\"") {
            let body = &text[end + 3..];
            let stop = body.find("\\\"").unwrap_or(body.len());
            return Some(Cow::Borrowed(&body[..stop]));
        }
        // logfmt key: at start or after a space, followed by '='.
        let at_boundary = i == 0 || bytes[i - 1] == b' ';
        if at_boundary && bytes.get(end) == Some(&b'=') {
            let after = &text[end + 1..];
            if let Some(q) = after.strip_prefix('"') {
                return Some(Cow::Owned(read_quoted(q).0));
            }
            let e = after.find(' ').unwrap_or(after.len());
            return Some(Cow::Borrowed(&after[..e]));
        }
    }
    None
}

/// The token after the first occurrence of `lit` in `text`: letters,
/// digits, `.`, `-`, `_`, `:` (e.g. `after:pod/` reads `pod/api-1` → `api-1`).
pub fn token_after<'a>(text: &'a str, lit: &str) -> Option<&'a str> {
    let i = memchr::memmem::find(text.as_bytes(), lit.as_bytes())? + lit.len();
    let rest = &text[i..];
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':')))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Cheap lookup of a dotted path (`involvedObject.name`, `source.host`) in
/// JSON text: a literal key first (zap writes `rtc.portTCP`), else each
/// segment narrows the search to the object value of the one before it.
pub fn quick_get_path<'a>(text: &'a str, path: &str) -> Option<Cow<'a, str>> {
    if let Some(v) = quick_get(text, path) {
        return Some(v);
    }
    let (first, rest) = path.split_once('.')?;
    let obj = quick_object(text, first)?;
    quick_get_path(obj, rest)
}

/// The text of the object value of `key` (from `{` to its matching `}`).
fn quick_object<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let bytes = text.as_bytes();
    let pat = format!("\"{key}\"");
    let mut from = 0;
    while let Some(off) = memchr::memmem::find(&bytes[from..], pat.as_bytes()) {
        from = from + off + pat.len();
        let Some(j) = after_colon(bytes, from) else {
            continue;
        };
        if bytes.get(j) != Some(&b'{') {
            continue;
        }
        let (mut depth, mut in_str, mut k) = (0usize, false, j);
        while k < bytes.len() {
            match bytes[k] {
                b'\\' if in_str => k += 1,
                b'"' => in_str = !in_str,
                b'{' if !in_str => depth += 1,
                b'}' if !in_str => {
                    depth -= 1;
                    if depth == 0 {
                        return text.get(j..=k);
                    }
                }
                _ => {}
            }
            k += 1;
        }
        return None;
    }
    None
}

/// Scans a quoted string body starting at `start` (just after the opening
/// quote): returns the index of the closing quote (or the end) and whether
/// backslash escapes occur.
pub fn quoted_end(b: &[u8], start: usize) -> (usize, bool) {
    let mut k = start;
    let mut escaped = false;
    while k < b.len() {
        match b[k] {
            b'\\' => {
                escaped = true;
                k += 2;
            }
            b'"' => break,
            _ => k += 1,
        }
    }
    (k.min(b.len()), escaped)
}

/// After a JSON key ending at `j`: skips spaces, a ':', spaces; the index
/// of the value, or None when no ':' follows.
fn after_colon(bytes: &[u8], mut j: usize) -> Option<usize> {
    while bytes.get(j).is_some_and(|b| *b == b' ') {
        j += 1;
    }
    if bytes.get(j) != Some(&b':') {
        return None;
    }
    j += 1;
    while bytes.get(j).is_some_and(|b| *b == b' ') {
        j += 1;
    }
    Some(j)
}

fn json_scalar_at(text: &str, j: usize) -> Option<Cow<'_, str>> {
    let rest = text.get(j..)?;
    if let Some(body) = rest.strip_prefix('"') {
        let (k, escaped) = quoted_end(body.as_bytes(), 0);
        let raw = body.get(..k.min(body.len()))?;
        if !escaped {
            return Some(Cow::Borrowed(raw));
        }
        return serde_json::from_str::<String>(&format!("\"{raw}\""))
            .ok()
            .map(Cow::Owned);
    }
    let end = rest.find([',', '}', ' ', ']']).unwrap_or(rest.len());
    let v = &rest[..end];
    if v.is_empty() || v == "null" {
        return None;
    }
    Some(Cow::Borrowed(v))
}

/// The cheap time extraction for lines that need no full decode.
pub fn quick_time(text: &str, reference: Option<i64>) -> Option<i64> {
    let t = text.trim_start();
    if t.starts_with('{') {
        if let Some(us) = quick_get(t, "__REALTIME_TIMESTAMP").and_then(|v| v.parse::<i64>().ok()) {
            return Some(us.saturating_mul(1000));
        }
        return TIME_KEYS
            .iter()
            .find_map(|k| quick_get(t, k).and_then(|v| parse_any(&v)));
    }
    header_time(t, reference).or_else(|| {
        ["ts", "time", "timestamp"]
            .iter()
            .find_map(|k| quick_get(t, k).and_then(|v| parse_any(&v)))
    })
}

/// Time from a line's header: zap console (RFC 3339 first), journal
/// (syslog), klog, Go `log`. None for JSON and logfmt lines.
pub fn header_time(t: &str, reference: Option<i64>) -> Option<i64> {
    let b = t.as_bytes();
    let first = *b.first()?;
    if b.len() >= 20 && first.is_ascii_digit() && b[4] == b'-' {
        let end = memchr::memchr2(b'\t', b' ', b).unwrap_or(b.len());
        return parse_rfc3339(&t[..end]);
    }
    if first.is_ascii_uppercase() {
        return syslog_time(t, reference).or_else(|| klog_time(t, reference));
    }
    decode_golog(t).and_then(|p| p.time)
}

/// The time of a journal line (`May 01 12:00:40 host prog[pid]: …`),
/// preferring an inner klog stamp, without decoding the body.
fn syslog_time(t: &str, reference: Option<i64>) -> Option<i64> {
    let month = time::month_from_abbrev(t.get(..3)?)?;
    let rest = t.get(4..)?.trim_start();
    let (day, rest) = rest.split_once(' ')?;
    let day: u32 = day.parse().ok()?;
    let (clock, rest) = rest.split_once(' ')?;
    let clock = parse_clock(clock)?;
    let reference = reference.unwrap_or_else(now_ns);
    let outer = with_inferred_year(reference, month, day, clock);
    let b = rest.as_bytes();
    let inner = memchr::memchr_iter(b':', b)
        .find(|&i| b.get(i + 1) == Some(&b' '))
        .and_then(|i| klog_time(&rest[i + 2..], outer.or(Some(reference))));
    inner.or(outer)
}

/// The time of a klog header (`I0501 12:00:40.118204 …`), body untouched.
fn klog_time(t: &str, reference: Option<i64>) -> Option<i64> {
    let b = t.as_bytes();
    if b.len() < 21
        || !matches!(b[0], b'I' | b'W' | b'E' | b'F')
        || !b[1..5].iter().all(u8::is_ascii_digit)
        || b[5] != b' '
    {
        return None;
    }
    let month: u32 = t.get(1..3)?.parse().ok()?;
    let day: u32 = t.get(3..5)?.parse().ok()?;
    let clock = parse_clock(t.get(6..)?.split(' ').next()?)?;
    with_inferred_year(reference.unwrap_or_else(now_ns), month, day, clock)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn quick_get_finds_keys_not_values() {
        let t = r#"{"msg":"nodeID changed","nodeID":"ND_x","a":{"nodeID2":1}}"#;
        assert_eq!(quick_get(t, "nodeID").as_deref(), Some("ND_x"));
        assert_eq!(
            quick_get(r#"{"a": 1, "nodeID": "ND_\"q"}"#, "nodeID").as_deref(),
            Some("ND_\"q")
        );
        assert_eq!(
            quick_get(r#"x="1" pod="ns/p-0" podUID="u""#, "pod").as_deref(),
            Some("ns/p-0")
        );
        assert_eq!(
            quick_get(r#"{"ts":1714568400.5,"x":1}"#, "ts").as_deref(),
            Some("1714568400.5")
        );
        assert_eq!(quick_get(r#"{"apod":"x"}"#, "pod"), None);
    }

    #[test]
    fn quick_nested_paths_stay_inside_their_object() {
        let t = r#"{"metadata":{"name":"ev.17cb"},"involvedObject":{"kind":"Pod","name":"api-1","x":{"name":"deep"}},"source":{"host":"node-a"},"rtc.portTCP":7881}"#;
        assert_eq!(
            quick_get_path(t, "involvedObject.name").as_deref(),
            Some("api-1")
        );
        assert_eq!(
            quick_get_path(t, "involvedObject.x.name").as_deref(),
            Some("deep")
        );
        assert_eq!(quick_get_path(t, "source.host").as_deref(), Some("node-a"));
        assert_eq!(quick_get_path(t, "rtc.portTCP").as_deref(), Some("7881"));
        assert_eq!(quick_get_path(t, "source.port"), None);
        assert_eq!(
            quick_get_path(r#"{"a":{"s":"}{\"","b":"c"}}"#, "a.b").as_deref(),
            Some("c")
        );
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
            assert_eq!(quick_time(l, r), decode(l, r).time, "{l}");
        }
    }
}
