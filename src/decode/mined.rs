//! What template mining reads of a line: its level and its message (novelty and
//! `sigwatch templates`). The level is read on every line, so it is cheap:
//! a JSON or logfmt key, or the header's level word ([`super::header`],
//! the same reader the full decoder uses). The message is read only for
//! lines whose level is mined, so it may decode the payload fully.

use super::header;
use super::payload;
use super::quick::quick_get_by;
use super::severity;
use super::severity::Level;
use memchr::memmem::Finder;
use std::borrow::Cow;
use std::sync::LazyLock;

/// Keys searched in every JSON or logfmt line, with their searchers.
struct Keys {
    names: &'static [&'static str],
    finders: Vec<Finder<'static>>,
    /// Whether any of the names occurs at all: one SIMD pass that spares
    /// a line without any of them a search per key (a Kubernetes event
    /// has no level key; its `type` is read instead).
    any: Option<aho_corasick::AhoCorasick>,
}

impl Keys {
    fn new(names: &'static [&'static str]) -> Keys {
        Keys {
            names,
            finders: names.iter().map(|k| Finder::new(k.as_bytes())).collect(),
            any: None,
        }
    }

    /// [`Keys::new`], with the one-pass test for lines that often have
    /// none of the names.
    fn prefiltered(names: &'static [&'static str]) -> Keys {
        Keys {
            any: aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                .build(names)
                .ok(),
            ..Keys::new(names)
        }
    }
    /// The value of the first key present.
    fn get<'a>(&self, text: &'a str) -> Option<Cow<'a, str>> {
        // Any occurrence of a name is found by a leftmost search, so no
        // match means no key.
        if self.any.as_ref().is_some_and(|ac| !ac.is_match(text)) {
            return None;
        }
        self.names
            .iter()
            .zip(&self.finders)
            .find_map(|(k, f)| quick_get_by(text, k, f))
    }
}

static LEVEL_KEYS: LazyLock<Keys> = LazyLock::new(|| Keys::prefiltered(payload::LEVEL_KEYS));
static TYPE_KEY: LazyLock<Keys> = LazyLock::new(|| Keys::new(&["type"]));
static MESSAGE_KEYS: LazyLock<Keys> = LazyLock::new(|| Keys::new(payload::MSG_KEYS));
/// Field names whose value details an error message.
static ERROR_KEYS: LazyLock<Keys> = LazyLock::new(|| Keys::new(&["error", "err", "exception"]));
/// What every error key contains (`err` of `error` and `err`, and
/// `exception`): most lines have neither, and two searches say so.
static ERROR_HINTS: LazyLock<[Finder<'static>; 2]> =
    LazyLock::new(|| [Finder::new("err"), Finder::new("exception")]);

/// The error detail of a JSON, logfmt or klog text (its `error`, `err` or
/// `exception` value).
fn error_detail(text: &str) -> Option<Cow<'_, str>> {
    let b = text.as_bytes();
    if ERROR_HINTS.iter().all(|f| f.find(b).is_none()) {
        return None;
    }
    ERROR_KEYS.get(text)
}

/// The level of a payload whose format ([`super::Prepared::format`]) is `format`,
/// without a decoder (the pipeline reads the level keys from the scan it
/// already made: [`super::Decoder::level`]).
pub fn quick_level(text: &str, format: &str) -> Option<Level> {
    // The common places first: zap's leading `{"level":"…"`, a logfmt
    // `level=` among the first pairs.
    match format {
        "json" => {
            if let Some(rest) = text.trim_start().strip_prefix("{\"level\":\"") {
                // zap's own names, compared in place (this runs on every line).
                let b = rest.as_bytes();
                for (name, level) in [
                    (&b"info\""[..], Level::Info),
                    (b"debug\"", Level::Debug),
                    (b"warn\"", Level::Warn),
                    (b"error\"", Level::Error),
                ] {
                    if b.starts_with(name) {
                        return Some(level);
                    }
                }
                let end = memchr::memchr(b'"', rest.as_bytes())?;
                if let Some(l) = Level::parse(&rest[..end]) {
                    return Some(l);
                }
            }
        }
        "logfmt" => {
            if let Some(l) = logfmt_level(text) {
                return Some(l);
            }
        }
        _ => {}
    }
    match format {
        "json" | "logfmt" => LEVEL_KEYS
            .get(text)
            .and_then(|v| severity::value(&v))
            // Kubernetes events: type Warning or Normal.
            .or_else(|| TYPE_KEY.get(text).and_then(|v| event_type(&v)))
            // Another spelling (`Level`, `SeverityText`, `{"level":{"name":…}}`).
            .or_else(|| other_spelling(text)),
        _ => header::read(text.trim_start(), None).level,
    }
}

/// The level of a structured line whose usual level keys are absent, read
/// by [`super::names`] from the decoded payload.
#[cold]
fn other_spelling(text: &str) -> Option<Level> {
    thread_local! {
        static BACKOFF: std::cell::Cell<super::names::Backoff> = const {
            std::cell::Cell::new(super::names::Backoff::new())
        };
    }
    let mut b = BACKOFF.get();
    if !b.try_now() {
        BACKOFF.set(b);
        return None;
    }
    let level = if super::names::may_hold_level(text) {
        payload::decode(text, None).level
    } else {
        None
    };
    b.record(level.is_some());
    BACKOFF.set(b);
    level
}

/// A Kubernetes event's `type` as a level (`Warning`, `Normal`).
pub fn event_type(v: &str) -> Option<Level> {
    match v {
        "Warning" => Some(Level::Warn),
        "Normal" => Some(Level::Info),
        _ => None,
    }
}

/// `level=` or `lvl=` among the first pairs of a logfmt line.
fn logfmt_level(text: &str) -> Option<Level> {
    let b = text.as_bytes();
    let mut i = 0;
    for _ in 0..4 {
        let rest = &b[i..];
        let value = rest
            .strip_prefix(b"level=")
            .or_else(|| rest.strip_prefix(b"lvl="));
        if let Some(v) = value {
            let v = v.strip_prefix(b"\"").unwrap_or(v);
            let end = v
                .iter()
                .position(|c| *c == b' ' || *c == b'"')
                .unwrap_or(v.len());
            let word = &v[..end];
            // The usual spellings compared in place (this runs on every
            // logfmt line); the rest through the full table.
            for (name, level) in [
                (&b"info"[..], Level::Info),
                (b"debug", Level::Debug),
                (b"warn", Level::Warn),
                (b"error", Level::Error),
            ] {
                if word == name {
                    return Some(level);
                }
            }
            return severity::value(std::str::from_utf8(word).ok()?);
        }
        i += memchr::memchr(b' ', rest)? + 1;
    }
    None
}

/// Longest message mined, in bytes.
pub const MAX_MESSAGE: usize = 1024;

/// The message of a payload for mining: its message field (or, for plain
/// text, what follows the level word) with the error detail appended
/// (`could not update node: dial tcp <*>: i/o timeout`), first line only
/// (a Python traceback's last line). None when there is no message.
/// Borrowed from `text` when nothing had to be joined or unescaped.
/// `header`: the text header the decoder read on `text`, if any. The
/// error detail joins the messages of warnings and above only: chatter
/// (info, debug, no level) is mined on every line, and most of it has
/// none to look for.
pub fn mining_message<'t>(
    text: &'t str,
    format: &str,
    header: Option<&header::Header>,
    level: Option<Level>,
    reference: Option<i64>,
) -> Option<Cow<'t, str>> {
    let detail = level.is_some_and(|l| l >= Level::Warn);
    let msg = match format {
        // The cheap path: the message and error keys found in the text,
        // unless the message is itself an envelope.
        "json" | "logfmt" => match MESSAGE_KEYS.get(text) {
            Some(m) if !m.trim_start().starts_with('{') => {
                with_error(m, detail.then(|| error_detail(text)).flatten())
            }
            _ => decoded(text, detail, reference),
        },
        _ => match payload::message_parts(text, header::Reference::near(reference), header) {
            Some(p) => with_error(p.message, detail.then(|| error_detail(p.details)).flatten()),
            None => decoded(text, detail, reference),
        },
    };
    finish(msg)
}

/// A mined message's first line (a Python traceback's last), at most
/// [`MAX_MESSAGE`] bytes, trimmed; None when empty.
fn finish(msg: Cow<'_, str>) -> Option<Cow<'_, str>> {
    let (from, to) = {
        let m: &str = &msg;
        let line = if m.starts_with("Traceback (most recent call last)") {
            m.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("")
        } else {
            m.split('\n').next().unwrap_or("")
        };
        let mut to = line.len().min(MAX_MESSAGE);
        while !line.is_char_boundary(to) {
            to -= 1;
        }
        let line = line[..to].trim();
        if line.is_empty() {
            return None;
        }
        let from = line.as_ptr() as usize - m.as_ptr() as usize;
        (from, from + line.len())
    };
    Some(match msg {
        Cow::Borrowed(b) => Cow::Borrowed(&b[from..to]),
        Cow::Owned(o) if from == 0 && to == o.len() => Cow::Owned(o),
        Cow::Owned(o) => Cow::Owned(o[from..to].to_string()),
    })
}

/// The message of a fully decoded payload, with its error detail if asked.
fn decoded(text: &str, detail: bool, reference: Option<i64>) -> Cow<'static, str> {
    let pl = payload::decode(text, reference);
    let e = ERROR_KEYS
        .names
        .iter()
        .filter(|_| detail)
        .find_map(|k| pl.fields.get(k));
    Cow::Owned(with_error(Cow::Owned(pl.message), e).into_owned())
}

/// `message: error` (the error alone without a message; the message alone
/// when it already says the error).
fn with_error<'t>(m: Cow<'t, str>, e: Option<Cow<'_, str>>) -> Cow<'t, str> {
    match e.filter(|e| !e.is_empty() && !m.contains(e.as_ref())) {
        Some(e) if m.is_empty() => Cow::Owned(e.into_owned()),
        Some(e) => Cow::Owned(format!("{m}: {e}")),
        None => m,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(text: &str) -> Option<Level> {
        quick_level(text, payload::sniff(text))
    }
    fn message(text: &str) -> Option<String> {
        let sniffed = payload::sniff(text);
        mining_message(text, sniffed, None, quick_level(text, sniffed), None).map(Cow::into_owned)
    }

    #[test]
    fn levels_of_every_format() {
        assert_eq!(level(r#"{"level":"error","msg":"x"}"#), Some(Level::Error));
        assert_eq!(
            level(r#"{"severity":"WARNING","message":"x"}"#),
            Some(Level::Warn)
        );
        assert_eq!(level(r#"{"level":50,"msg":"pino"}"#), Some(Level::Error));
        assert_eq!(level(r#"{"msg":"no level"}"#), None);
        assert_eq!(
            level(
                r#"{"kind":"Event","type":"Warning","reason":"Unhealthy","message":"Liveness probe failed"}"#
            ),
            Some(Level::Warn)
        );
        // The decoder reads `Normal` as info: one reader, one answer.
        assert_eq!(
            level(r#"{"kind":"Event","type":"Normal","reason":"Started"}"#),
            Some(Level::Info)
        );
        assert_eq!(
            level("time=2024-05-01T12:00:00Z level=warn msg=x"),
            Some(Level::Warn)
        );
        assert_eq!(
            level("2024-05-01T12:00:00.000Z\tERROR\tlivekit\tsvc/a.go:1\tboom"),
            Some(Level::Error)
        );
        assert_eq!(
            level("E0501 12:00:40.118204    1187 kubelet.go:107] \"x\""),
            Some(Level::Error)
        );
        // HDFS, ZooKeeper, Log4j, nginx.
        assert_eq!(
            level("081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 terminating"),
            Some(Level::Info)
        );
        assert_eq!(
            level("2015-07-29 17:41:44,747 - WARN  [QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181:Learner@233] - Unexpected exception"),
            Some(Level::Warn)
        );
        assert_eq!(
            level("2024/05/01 12:00:00 [error] 31#31: *1 open() failed"),
            Some(Level::Error)
        );
        assert_eq!(
            level("panic: runtime error: index out of range [5] with length 3"),
            Some(Level::Fatal)
        );
        // A lower-case word in free text is not a level.
        assert_eq!(level("the error budget is fine today"), None);
        assert_eq!(
            level("Accepted password for alice from 10.0.0.5 port 22 ssh2"),
            None
        );
    }

    #[test]
    fn messages_carry_their_error_detail() {
        assert_eq!(
            message(r#"{"level":"error","msg":"could not update node","error":"dial tcp 10.0.0.21:6379: i/o timeout"}"#).as_deref(),
            Some("could not update node: dial tcp 10.0.0.21:6379: i/o timeout")
        );
        assert_eq!(
            message(r#"time=2024-05-01T12:00:00Z level=error msg="auth check" err="rpc error: code = Unavailable""#).as_deref(),
            Some("auth check: rpc error: code = Unavailable")
        );
        assert_eq!(
            message("2015-07-29 17:41:44,747 - WARN  [QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181:Learner@233] - Unexpected exception").as_deref(),
            Some("Unexpected exception")
        );
        assert_eq!(
            message("Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\nValueError: bad value 7").as_deref(),
            Some("ValueError: bad value 7")
        );
        assert_eq!(
            message("panic: boom\n\ngoroutine 1 [running]:\nmain.main()").as_deref(),
            Some("panic: boom")
        );
        assert_eq!(message(r#"{"level":"error","ts":1}"#), None);
    }
}
