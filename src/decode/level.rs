//! The level and the message of a line, for template mining (novelty and
//! `sigwatch templates`). The level is read on every line, so it is cheap:
//! a JSON or logfmt key, the zap console or klog header, or a level word
//! near the start of plain text. The message is read only for lines whose
//! level is mined, so it may decode the payload fully.

use super::payload::{self, Level};
use super::quick::quick_get;

/// Level words of plain text (Log4j, Python logging, HDFS, ZooKeeper,
/// nginx), upper case or bracketed.
const WORDS: &[(&str, Level)] = &[
    ("TRACE", Level::Debug),
    ("DEBUG", Level::Debug),
    ("INFO", Level::Info),
    ("NOTICE", Level::Info),
    ("WARN", Level::Warn),
    ("WARNING", Level::Warn),
    ("ERROR", Level::Error),
    ("SEVERE", Level::Error),
    ("FATAL", Level::Fatal),
    ("PANIC", Level::Fatal),
    ("CRITICAL", Level::Fatal),
    ("CRIT", Level::Fatal),
];

/// Leading tokens of plain text searched for a level word.
const HEADER_TOKENS: usize = 6;

/// Starts of plain lines that are errors whatever their header says: Go
/// panics and runtime failures, Python tracebacks, Java's uncaught
/// exceptions.
const ERROR_STARTS: &[(&str, Level)] = &[
    ("panic: ", Level::Fatal),
    ("fatal error: ", Level::Fatal),
    ("Traceback (most recent call last)", Level::Error),
    ("Exception in thread ", Level::Error),
];

/// The level of a payload whose format [`payload::sniff`] named `format`.
pub fn quick_level(text: &str, format: &str) -> Option<Level> {
    match format {
        "json" | "logfmt" => ["level", "severity", "lvl", "PRIORITY"]
            .iter()
            .find_map(|k| quick_get(text, k))
            .and_then(|v| parse_value(&v))
            // Kubernetes events: type Warning (Normal is no level).
            .or_else(|| quick_get(text, "type").and_then(|v| Level::parse(&v))),
        "console" => {
            let rest = text.trim_start();
            let rest = rest.split_once(['\t', ' '])?.1.trim_start();
            let word = rest.split(['\t', ' ']).next()?;
            Level::parse(word)
        }
        "klog" => Level::parse(text.trim_start().get(..1)?),
        _ => plain_level(text).map(|(l, _)| l),
    }
}

/// A level value: a name, or pino's and bunyan's numbers (10 trace … 60
/// fatal).
fn parse_value(v: &str) -> Option<Level> {
    if let Some(l) = Level::parse(v) {
        return Some(l);
    }
    let n: u32 = v.trim().parse().ok()?;
    Some(match n {
        10..=29 => Level::Debug,
        30..=39 => Level::Info,
        40..=49 => Level::Warn,
        50..=59 => Level::Error,
        60.. => Level::Fatal,
        _ => return None,
    })
}

/// A level word among the first tokens of plain text, and the byte offset
/// just after it (where the message starts).
fn plain_level(text: &str) -> Option<(Level, usize)> {
    let t = text.trim_start();
    let lead = text.len() - t.len();
    for (start, l) in ERROR_STARTS {
        if t.starts_with(start) {
            return Some((*l, lead));
        }
    }
    let mut pos = lead;
    for tok in text[lead..].split_whitespace().take(HEADER_TOKENS) {
        let at = pos + text[pos..].find(tok).unwrap_or(0);
        pos = at + tok.len();
        let bracketed = tok.len() > 2
            && ((tok.starts_with('[') && tok.trim_end_matches(':').ends_with(']'))
                || (tok.starts_with('<') && tok.ends_with('>')));
        let word = tok.trim_matches(|c: char| matches!(c, '[' | ']' | '<' | '>' | ':' | '|'));
        let found = WORDS.iter().find(|(w, _)| {
            if bracketed {
                w.eq_ignore_ascii_case(word)
            } else {
                *w == word
            }
        });
        if let Some((_, l)) = found {
            return Some((*l, pos));
        }
    }
    None
}

/// Field names whose value details an error message.
const ERROR_FIELDS: &[&str] = &["error", "err", "exception"];

/// Longest message mined, in bytes.
const MAX_MESSAGE: usize = 1024;

/// The message of a payload for mining: its message field (or, for plain
/// text, what follows the level word) with the error detail appended
/// (`could not update node: dial tcp <*>: i/o timeout`), first line only
/// (a Python traceback's last line). None when there is no message.
pub fn mining_message(text: &str, format: &str, reference: Option<i64>) -> Option<String> {
    let mut msg = match format {
        "plain" | "golog" | "syslog" => {
            let pl = payload::decode(text, reference);
            match plain_level(&pl.message) {
                Some((_, at)) => pl.message[at..]
                    .trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '-' | ':' | '|'))
                    .to_string(),
                None => pl.message,
            }
        }
        _ => {
            let pl = payload::decode(text, reference);
            let mut m = pl.message;
            if let Some(e) = ERROR_FIELDS
                .iter()
                .find_map(|k| pl.fields.get(k))
                .filter(|e| !e.is_empty() && !m.contains(e.as_ref()))
            {
                if m.is_empty() {
                    m = e.into_owned();
                } else {
                    m = format!("{m}: {e}");
                }
            }
            m
        }
    };
    if msg.starts_with("Traceback (most recent call last)") {
        msg = msg
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_string();
    } else if let Some(i) = msg.find('\n') {
        msg.truncate(i);
    }
    if msg.len() > MAX_MESSAGE {
        let mut cut = MAX_MESSAGE;
        while !msg.is_char_boundary(cut) {
            cut -= 1;
        }
        msg.truncate(cut);
    }
    let msg = msg.trim();
    (!msg.is_empty()).then(|| msg.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(text: &str) -> Option<Level> {
        quick_level(text, payload::sniff(text))
    }
    fn message(text: &str) -> Option<String> {
        mining_message(text, payload::sniff(text), None)
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
        assert_eq!(
            level(r#"{"kind":"Event","type":"Normal","reason":"Started"}"#),
            None
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
            Some("[QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181:Learner@233] - Unexpected exception")
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
