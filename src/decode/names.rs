//! The usual spellings of a structured line's time, level and message keys.
//!
//! The fast paths read the spellings most lines use (`time`, `level`,
//! `msg`…), byte for byte. Producers spell them otherwise: .NET's Serilog
//! and NLog write `Timestamp`/`Level`/`MessageTemplate`, OpenTelemetry
//! `Timestamp`/`SeverityText`/`Body` (or `timeUnixNano` and a `body` object
//! in OTLP JSON), log4j's JSON layout an `instant` object, loguru a `record`
//! object whose level is `{"name": "ERROR"}`, the Elastic Common Schema a
//! `log.level` path or a nested `log` object, structlog an `event`. Rather
//! than a list of producers, a key is matched by its *name* — compared
//! without case, `_`, `-` and `.` — against one ordered table per role, at
//! the top level first and then inside the objects that carry a record
//! (`record`, `log`, `entry`); a value is read by its shape: a stamp string
//! in any format the header reader knows, an epoch number of any unit, an
//! object holding the stamp or the level's name.
//!
//! This runs only when the fast path found nothing, so its cost is paid by
//! the lines that need it.

use super::header::{self, Reference};
use super::severity::{self, Level, Scale};
use super::time::parse_any;
use aho_corasick::AhoCorasick;
use serde_json::{Map, Value};
use std::sync::LazyLock;

/// Time keys, most specific first (normalised: lower case, no `_ - .`).
const TIME: &[&str] = &[
    "timestamp",
    "@timestamp",
    "time",
    "ts",
    "@t",
    "timeunixnano",
    "datetime",
    "eventtime",
    "logtime",
    "timemillis",
    "instant",
    "asctime",
    "date",
    "t",
    "timelocal",
    "observedtimeunixnano",
    "observedtimestamp",
    "lasttimestamp",
    "timecreated",
    "eventtime",
    "timegenerated",
];

/// Level keys. `severitynumber` last: a number on OpenTelemetry's scale,
/// read only when no name is given.
const LEVEL: &[&str] = &[
    "level",
    "severitytext",
    "severity",
    "loglevel",
    "levelname",
    "lvl",
    "@l",
    "@level",
    "priority",
    "levelstr",
    "s",
    "severitynumber",
    "levelno",
    "levelvalue",
];

/// Message keys. `@mt`/`messagetemplate` (a template) after the rendered
/// message.
const MESSAGE: &[&str] = &[
    "msg",
    "message",
    "@m",
    "@message",
    "body",
    "event",
    "shortmessage",
    "fullmessage",
    "rendered",
    "@mt",
    "messagetemplate",
    "log",
];

/// Objects that carry the record itself (loguru's `record`, ECS's `log`).
const CONTAINERS: &[&str] = &["record", "log", "entry", "logentry"];

/// Which role's table a key is looked up in.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    Time,
    Level,
    Message,
}

impl Role {
    fn table(self) -> &'static [&'static str] {
        match self {
            Role::Time => TIME,
            Role::Level => LEVEL,
            Role::Message => MESSAGE,
        }
    }
}

/// Compares a key with a normalised name: ASCII case ignored, `_ - .`
/// skipped in the key.
fn same_name(key: &str, name: &str) -> bool {
    let mut n = name.bytes();
    for c in key.bytes() {
        if matches!(c, b'_' | b'-' | b'.') {
            continue;
        }
        if n.next() != Some(c.to_ascii_lowercase()) {
            return false;
        }
    }
    n.next().is_none()
}

/// The rank of `key` in `role`'s table.
fn rank(key: &str, role: Role) -> Option<usize> {
    if key.len() > 32 {
        return None;
    }
    role.table().iter().position(|n| same_name(key, n))
}

/// The best-ranked keys of `role` in `m`, best first (several, because the
/// best one's value may not read: a `time` that is a duration).
fn candidates(m: &Map<String, Value>, role: Role) -> Vec<(usize, &str, &Value)> {
    let mut found: Vec<(usize, &str, &Value)> = m
        .iter()
        .filter_map(|(k, v)| rank(k, role).map(|r| (r, k.as_str(), v)))
        .collect();
    found.sort_by_key(|c| c.0);
    found
}

/// The first readable value of `role` in `m`, then in its record objects.
fn find<T>(
    m: &Map<String, Value>,
    role: Role,
    read: &dyn Fn(&str, &Value) -> Option<T>,
) -> Option<T> {
    let top = candidates(m, role)
        .into_iter()
        .find_map(|(_, k, v)| read(k, v));
    top.or_else(|| {
        m.iter()
            .filter(|(k, _)| CONTAINERS.iter().any(|c| same_name(k, c)))
            .find_map(|(_, v)| match v {
                Value::Object(inner) => candidates(inner, role)
                    .into_iter()
                    .find_map(|(_, k, v)| read(k, v)),
                _ => None,
            })
    })
}

/// The event time of a JSON object by any usual spelling.
pub fn json_time(m: &Map<String, Value>, reference: Option<i64>) -> Option<i64> {
    find(m, Role::Time, &|_, v| time_value(v, reference, 0)).or_else(|| {
        // A key no table names but that says what it holds
        // (Cloudflare's `EdgeStartTimestamp`, `requestTimestamp`): a
        // start before an end.
        let mut keys: Vec<(&String, &Value)> = m
            .iter()
            .filter(|(k, _)| k.len() <= 32 && k.to_ascii_lowercase().ends_with("timestamp"))
            .collect();
        keys.sort_by_key(|(k, _)| !k.to_ascii_lowercase().contains("start"));
        keys.into_iter()
            .find_map(|(_, v)| time_value(v, reference, 0))
    })
}

/// The level of a JSON object by any usual spelling.
pub fn json_level(m: &Map<String, Value>) -> Option<Level> {
    // A Windows event (Get-WinEvent, NXLog, Event Viewer exports) writes
    // its level as a number on Windows' own scale.
    let windows = m
        .keys()
        .any(|k| WINDOWS_KEYS.iter().any(|w| same_name(k, w)));
    find(m, Role::Level, &|k, v| level_value(k, v, 0, windows))
}

/// Keys only a Windows event record has: its numeric `Level` is on
/// [`Scale::Windows`].
const WINDOWS_KEYS: &[&str] = &[
    "eventid",
    "eventrecordid",
    "providername",
    "leveldisplayname",
];

/// The scale a number under level key `key` is on.
fn key_scale(key: &str, windows: bool) -> Option<Scale> {
    Some(if same_name(key, "severitynumber") {
        Scale::OpenTelemetry
    } else if same_name(key, "levelno") || same_name(key, "no") {
        Scale::Python
    } else if same_name(key, "levelvalue") {
        Scale::Java
    } else if same_name(key, "priority") {
        Scale::Syslog
    } else if windows && same_name(key, "level") {
        Scale::Windows
    } else if same_name(key, "s") {
        // `s` is a level name only (`{"s":"ERROR"}`), a number there is
        // something else.
        return None;
    } else {
        Scale::Pino
    })
}

/// The message of a JSON object by any usual spelling.
pub fn json_message(m: &Map<String, Value>) -> Option<String> {
    find(m, Role::Message, &|_, v| message_value(v, 0))
}

/// A time value: a stamp string (RFC 3339 or any stamp the header reader
/// knows), an epoch number in any unit, or an object holding one (log4j's
/// `instant`, MongoDB's `$date`, loguru's `{"repr":…,"timestamp":…}`).
fn time_value(v: &Value, reference: Option<i64>, depth: u8) -> Option<i64> {
    match v {
        Value::String(s) => parse_any(s).or_else(|| stamp(s, reference)),
        Value::Number(n) => parse_any(&n.to_string()),
        Value::Object(o) if depth < 2 => {
            let field = |name: &str| o.iter().find(|(k, _)| same_name(k, name)).map(|p| p.1);
            if let Some(secs) = field("epochsecond").and_then(Value::as_i64) {
                let nanos = field("nanoofsecond").and_then(Value::as_i64).unwrap_or(0);
                return secs
                    .checked_mul(super::time::NS)
                    .and_then(|t| t.checked_add(nanos));
            }
            ["$date", "timestamp", "$numberlong", "repr"]
                .iter()
                .find_map(|n| field(n).and_then(|v| time_value(v, reference, depth + 1)))
        }
        _ => None,
    }
}

/// A stamp string in a format the header reader knows
/// (`2024-05-30 12:50:13,457`, `30/May/2024:12:50:13 +0000`…): the whole
/// value must be the stamp.
fn stamp(s: &str, reference: Option<i64>) -> Option<i64> {
    let s = s.trim();
    let h = header::read_at(s, Reference::near(reference));
    h.time.filter(|_| {
        h.stamp
            .is_some_and(|(a, e)| a == 0 && s[e.min(s.len())..].trim().is_empty())
    })
}

/// A level written as text under a key whose numbers are on `scale`: a
/// number on that scale, else a name.
fn scaled(scale: Option<Scale>, v: &str) -> Option<Level> {
    match scale {
        Some(scale) if scale != Scale::Pino => match v.trim().parse::<i64>() {
            Ok(n) => scale.level(n),
            Err(_) => Level::parse(v),
        },
        _ => severity::value(v),
    }
}

/// A level value: a name, a number on the key's scale, or an object holding
/// the name (`{"Name":"DEBUG"}`, loguru's `{"name":"ERROR","no":40}`).
fn level_value(key: &str, v: &Value, depth: u8, windows: bool) -> Option<Level> {
    match v {
        Value::String(s) => scaled(key_scale(key, windows), s),
        Value::Number(n) => key_scale(key, windows)?.level(n.as_i64()?),
        Value::Object(o) if depth < 2 => ["name", "level", "value", "no"].iter().find_map(|name| {
            o.iter()
                .find(|(k, _)| same_name(k, name))
                .and_then(|(k, v)| level_value(k, v, depth + 1, windows))
        }),
        _ => None,
    }
}

/// A message value: a string, or an OTLP `AnyValue` (`{"stringValue":…}`).
fn message_value(v: &Value, depth: u8) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) if depth < 2 => {
            ["stringvalue", "message", "msg", "text"]
                .iter()
                .find_map(|name| {
                    o.iter()
                        .find(|(k, _)| same_name(k, name))
                        .and_then(|(_, v)| message_value(v, depth + 1))
                })
        }
        _ => None,
    }
}

/// The value of the best-ranked pair of `role`.
fn pair(pairs: &[(String, String)], role: Role) -> impl Iterator<Item = (&str, &str)> {
    let mut found: Vec<(usize, &str, &str)> = pairs
        .iter()
        .filter_map(|(k, v)| rank(k, role).map(|r| (r, k.as_str(), v.as_str())))
        .collect();
    found.sort_by_key(|c| c.0);
    found.into_iter().map(|(_, k, v)| (k, v))
}

/// The event time of logfmt pairs by any usual spelling.
pub fn pairs_time(pairs: &[(String, String)], reference: Option<i64>) -> Option<i64> {
    pair(pairs, Role::Time).find_map(|(_, v)| parse_any(v).or_else(|| stamp(v, reference)))
}

/// The level of logfmt pairs by any usual spelling.
pub fn pairs_level(pairs: &[(String, String)]) -> Option<Level> {
    pair(pairs, Role::Level).find_map(|(k, v)| scaled(key_scale(k, false), v))
}

/// The message of logfmt pairs by any usual spelling.
pub fn pairs_message(pairs: &[(String, String)]) -> Option<String> {
    pair(pairs, Role::Message)
        .next()
        .map(|(_, v)| v.to_string())
}

/// How often a fallback that keeps finding nothing is still tried: a
/// producer whose lines mention `time` or `level` without such a key
/// (`"timeout"`, an audit log's `"level":"Metadata"`) would otherwise pay a
/// parse on every line. After [`Backoff::PATIENCE`] misses in a row, one
/// line in [`Backoff::EVERY`] is tried; a hit makes it try every line again.
#[derive(Debug, Default, Clone, Copy)]
pub struct Backoff {
    misses: u32,
    skipped: u32,
}

impl Backoff {
    /// A fresh one: every line tried.
    pub const fn new() -> Backoff {
        Backoff {
            misses: 0,
            skipped: 0,
        }
    }

    /// Misses in a row before the fallback is tried less often.
    pub const PATIENCE: u32 = 32;
    /// One line in this many is tried once it is.
    pub const EVERY: u32 = 64;

    /// Whether to try the fallback on this line.
    pub fn try_now(&mut self) -> bool {
        if self.misses < Self::PATIENCE {
            return true;
        }
        self.skipped += 1;
        if self.skipped >= Self::EVERY {
            self.skipped = 0;
            return true;
        }
        false
    }

    /// What the try found.
    pub fn record(&mut self, hit: bool) {
        if hit {
            self.misses = 0;
            self.skipped = 0;
        } else {
            self.misses = self.misses.saturating_add(1);
        }
    }
}

/// Case-blind searchers for the words every spelling of a role contains.
struct Hints {
    time: Option<AhoCorasick>,
    level: Option<AhoCorasick>,
}

static HINTS: LazyLock<Hints> = LazyLock::new(|| {
    let build = |words: &[&str]| {
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(words)
            .ok()
    };
    Hints {
        time: build(&["time", "date", "instant", "\"t\"", "\"@t\""]),
        level: build(&["level", "severity", "lvl", "@l", "priority", "\"s\""]),
    }
});

/// Whether a structured text may hold a time key the fast path does not
/// read (a cheap test before a parse).
pub fn may_hold_time(text: &str) -> bool {
    HINTS.time.as_ref().is_some_and(|ac| ac.is_match(text))
}

/// Whether a structured text may hold a level key the fast path does not
/// read.
pub fn may_hold_level(text: &str) -> bool {
    HINTS.level.as_ref().is_some_and(|ac| ac.is_match(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(s: &str) -> Map<String, Value> {
        match serde_json::from_str(s) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        }
    }

    const T: i64 = 1_717_073_413_457_000_000;

    /// One real-shaped line per producer family: time, level, message.
    #[test]
    fn families_of_json_spellings() {
        type Case<'a> = (
            &'a str,
            &'a str,
            Option<i64>,
            Option<Level>,
            Option<&'a str>,
        );
        let cases: &[Case] = &[
            (
                "Serilog (JsonFormatter)",
                r#"{"Timestamp":"2024-05-30T12:50:13.457Z","Level":"Information","MessageTemplate":"Request finished in {Elapsed} ms","Properties":{"Elapsed":12.5}}"#,
                Some(T),
                Some(Level::Info),
                Some("Request finished in {Elapsed} ms"),
            ),
            (
                "capitalised keys",
                r#"{"Time":"2024-05-30T12:50:13.457Z","Level":"WARN","Message":"disk usage high"}"#,
                Some(T),
                Some(Level::Warn),
                Some("disk usage high"),
            ),
            (
                "a nested level name",
                r#"{"Timestamp":"2024-05-30T12:50:13.457Z","Level":{"Name":"DEBUG","Value":10},"Message":"connection opened"}"#,
                Some(T),
                Some(Level::Debug),
                Some("connection opened"),
            ),
            (
                "ECS nested log object",
                r#"{"@timestamp":"2024-05-30T12:50:13.457Z","log":{"level":"ERROR","logger":"app"},"message":"failed to connect"}"#,
                Some(T),
                Some(Level::Error),
                Some("failed to connect"),
            ),
            (
                "ECS dotted",
                r#"{"@timestamp":"2024-05-30T12:50:13.457Z","log.level":"error","message":"failed","ecs.version":"1.6.0"}"#,
                Some(T),
                Some(Level::Error),
                Some("failed"),
            ),
            (
                "OTLP JSON log record",
                r#"{"timeUnixNano":"1717073413457000000","severityNumber":17,"severityText":"ERROR","body":{"stringValue":"export failed"}}"#,
                Some(T),
                Some(Level::Error),
                Some("export failed"),
            ),
            (
                "OpenTelemetry, number only",
                r#"{"Timestamp":"2024-05-30T12:50:13.457Z","SeverityNumber":13,"Body":"queue full"}"#,
                Some(T),
                Some(Level::Warn),
                Some("queue full"),
            ),
            (
                "log4j2 JsonLayout",
                r#"{"instant":{"epochSecond":1717073413,"nanoOfSecond":457000000},"thread":"main","level":"WARN","loggerName":"com.example.App","message":"slow query"}"#,
                Some(T),
                Some(Level::Warn),
                Some("slow query"),
            ),
            (
                "loguru serialize=True",
                r#"{"text":"2024-05-30 12:50:13.457 | ERROR | app:main:1 - boom\n","record":{"elapsed":{"repr":"0:00:01","seconds":1.0},"level":{"icon":"x","name":"ERROR","no":40},"message":"boom","time":{"repr":"2024-05-30 12:50:13.457000+00:00","timestamp":1717073413.457}}}"#,
                Some(T),
                Some(Level::Error),
                Some("boom"),
            ),
            (
                "python-json-logger",
                r#"{"asctime":"2024-05-30 12:50:13,457","levelname":"ERROR","name":"app","message":"boom"}"#,
                Some(T),
                Some(Level::Error),
                Some("boom"),
            ),
            (
                "structlog",
                r#"{"event":"user logged in","level":"info","timestamp":"2024-05-30T12:50:13.457Z"}"#,
                Some(T),
                Some(Level::Info),
                Some("user logged in"),
            ),
            (
                "GELF",
                r#"{"version":"1.1","host":"h","short_message":"boom","timestamp":1717073413.457,"level":3}"#,
                Some(T),
                Some(Level::Error),
                Some("boom"),
            ),
            (
                "Windows event (Get-WinEvent | ConvertTo-Json): 3 is a warning",
                r#"{"Id":1014,"Level":3,"ProviderName":"Microsoft-Windows-DNS-Client","LogName":"System","TimeCreated":"2024-05-30T12:50:13.457Z","Message":"Name resolution for the name wpad timed out"}"#,
                Some(T),
                Some(Level::Warn),
                Some("Name resolution for the name wpad timed out"),
            ),
            (
                "Windows event, information is 4 (syslog's 4 would be a warning)",
                r#"{"EventID":7036,"Level":4,"Channel":"System","TimeCreated":"2024-05-30T12:50:13.457Z","Message":"The Windows Update service entered the running state."}"#,
                Some(T),
                Some(Level::Info),
                Some("The Windows Update service entered the running state."),
            ),
            (
                "Python logging, the number only",
                r#"{"timestamp":1717073413.457,"levelno":40,"msg":"boom"}"#,
                Some(T),
                Some(Level::Error),
                Some("boom"),
            ),
            (
                "java.util.logging's value",
                r#"{"timestamp":"2024-05-30T12:50:13.457Z","levelValue":900,"message":"pool nearly exhausted"}"#,
                Some(T),
                Some(Level::Warn),
                Some("pool nearly exhausted"),
            ),
            (
                "journald's PRIORITY as text",
                r#"{"time":"2024-05-30T12:50:13.457Z","PRIORITY":"3","MESSAGE":"Failed to start unit"}"#,
                Some(T),
                Some(Level::Error),
                Some("Failed to start unit"),
            ),
            (
                "a key that says it holds a stamp (Cloudflare): the start",
                r#"{"EdgeEndTimestamp":1717073413500000000,"EdgeStartTimestamp":1717073413457000000,"ClientRequestURI":"/"}"#,
                Some(T),
                None,
                None,
            ),
            (
                "pino",
                r#"{"level":50,"time":1717073413457,"pid":7,"hostname":"h","msg":"boom"}"#,
                Some(T),
                Some(Level::Error),
                Some("boom"),
            ),
        ];
        for (name, line, time, level, message) in cases {
            let m = obj(line);
            assert_eq!(json_time(&m, None), *time, "{name}: time");
            assert_eq!(json_level(&m), *level, "{name}: level");
            assert_eq!(json_message(&m).as_deref(), *message, "{name}: message");
        }
    }

    #[test]
    fn a_fallback_that_keeps_missing_is_tried_less_often() {
        let mut b = Backoff::default();
        let mut tried = 0;
        for _ in 0..(Backoff::PATIENCE + 10 * Backoff::EVERY) {
            if b.try_now() {
                tried += 1;
                b.record(false);
            }
        }
        assert_eq!(tried, Backoff::PATIENCE + 10);
        // A hit: every line again.
        b.record(true);
        assert!((0..Backoff::PATIENCE).all(|_| b.try_now()));
    }

    #[test]
    fn logfmt_spellings() {
        let pairs: Vec<(String, String)> = [
            ("Timestamp", "2024-05-30T12:50:13.457Z"),
            ("SeverityText", "ERROR"),
            ("Body", "export failed"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(pairs_time(&pairs, None), Some(T));
        assert_eq!(pairs_level(&pairs), Some(Level::Error));
        assert_eq!(pairs_message(&pairs).as_deref(), Some("export failed"));
    }

    #[test]
    fn names_that_only_look_alike_are_not_read() {
        // A duration named `time`, a `level` that is a game's level number
        // out of range, an unrelated nested object.
        let m =
            obj(r#"{"time":"12ms","level":7000,"request":{"timestamp":"2024-05-30T12:50:13Z"}}"#);
        assert_eq!(json_time(&m, None), None);
        assert_eq!(json_level(&m), None);
        assert!(!same_name("timestamps", "timestamp"));
        assert!(same_name("Time_Stamp", "timestamp"));
    }
}
