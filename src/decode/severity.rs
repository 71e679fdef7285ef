//! Severity: the one scale every level is read onto, and the one reader of
//! level names. JSON and logfmt values, text headers, syslog priorities
//! and klog or logcat letters all end here, so a rule's `field: {level:
//! error}`, `explain`, `templates` and novelty agree on every line.

/// Normalised severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// trace / debug / verbose / fine.
    Debug,
    /// info / notice / log.
    Info,
    /// warn / warning.
    Warn,
    /// error / severe.
    Error,
    /// fatal / panic / critical / alert / emergency.
    Fatal,
}

const LOG: u64 = pack(b"log");
const NOTE: u64 = pack(b"note");
const CONFIG: u64 = pack(b"config");

const fn pack(name: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let mut i = 0;
    while i < name.len() {
        buf[i] = name[i];
        i += 1;
    }
    u64::from_le_bytes(buf)
}

/// A name (lower case, at most 8 bytes) packed into an integer.
fn packed(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 8 {
        return None;
    }
    let mut buf = [0u8; 8];
    buf[..b.len()].copy_from_slice(b);
    buf.make_ascii_lowercase();
    Some(u64::from_le_bytes(buf))
}

/// Level words as headers write them (any case; the header reader decides
/// which cases count where). Single letters are not here: they are levels
/// only in their places (klog, logcat, Rails).
fn word_packed(w: u64) -> Option<Level> {
    const TRACE: u64 = pack(b"trace");
    const TRC: u64 = pack(b"trc");
    const TRCE: u64 = pack(b"trce");
    const DEBUG: u64 = pack(b"debug");
    const DBUG: u64 = pack(b"dbug");
    const DBG: u64 = pack(b"dbg");
    const DEBUG1: u64 = pack(b"debug1");
    const DEBUG2: u64 = pack(b"debug2");
    const DEBUG3: u64 = pack(b"debug3");
    const DEBUG4: u64 = pack(b"debug4");
    const DEBUG5: u64 = pack(b"debug5");
    const VERBOSE: u64 = pack(b"verbose");
    const FINE: u64 = pack(b"fine");
    const FINER: u64 = pack(b"finer");
    const FINEST: u64 = pack(b"finest");
    const INFO: u64 = pack(b"info");
    const INF: u64 = pack(b"inf");
    const NOTICE: u64 = pack(b"notice");
    const WARN: u64 = pack(b"warn");
    const WRN: u64 = pack(b"wrn");
    const WARNING: u64 = pack(b"warning");
    const ERROR: u64 = pack(b"error");
    const ERR: u64 = pack(b"err");
    const EROR: u64 = pack(b"eror");
    const FAIL: u64 = pack(b"fail");
    const FAILURE: u64 = pack(b"failure");
    const SEVERE: u64 = pack(b"severe");
    const FATAL: u64 = pack(b"fatal");
    const FTL: u64 = pack(b"ftl");
    const PANIC: u64 = pack(b"panic");
    const PNC: u64 = pack(b"pnc");
    const DPANIC: u64 = pack(b"dpanic");
    const CRITICAL: u64 = pack(b"critical");
    const CRIT: u64 = pack(b"crit");
    const CRT: u64 = pack(b"crt");
    const ALERT: u64 = pack(b"alert");
    const EMERG: u64 = pack(b"emerg");
    Some(match w {
        TRACE | TRC | TRCE | DEBUG | DBUG | DBG | DEBUG1 | DEBUG2 | DEBUG3 | DEBUG4 | DEBUG5
        | VERBOSE | FINE | FINER | FINEST => Level::Debug,
        INFO | INF | NOTICE | NOTE | LOG | CONFIG => Level::Info,
        WARN | WRN | WARNING => Level::Warn,
        ERROR | ERR | EROR | FAIL | FAILURE | SEVERE => Level::Error,
        FATAL | FTL | PANIC | PNC | DPANIC | CRITICAL | CRIT | CRT | ALERT | EMERG => Level::Fatal,
        _ => return None,
    })
}

/// Longer level words: `information(al)`, `emergency`, and PostgreSQL's
/// message kinds that continue an entry (`STATEMENT:`, `DETAIL:` …, read
/// as info).
fn long_word(b: &[u8]) -> Option<Level> {
    const INFO: &[&[u8]] = &[
        b"information",
        b"informational",
        b"statement",
        b"detail",
        b"hint",
        b"context",
        b"location",
        b"query",
    ];
    if INFO.iter().any(|w| w.eq_ignore_ascii_case(b)) {
        return Some(Level::Info);
    }
    b.eq_ignore_ascii_case(b"emergency").then_some(Level::Fatal)
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

    /// Parses a level value of a structured field: the names of zap,
    /// logrus, slog, log4j, syslog and Windows in any case, klog letters,
    /// syslog severity digits (0 emerg … 7 debug).
    pub fn parse(s: &str) -> Option<Level> {
        // Runs on every line when novelty is on: the name packed into an
        // integer and matched as one.
        let b = s.trim_ascii().as_bytes();
        if let [c] = b {
            // klog's letters and syslog's severity digits.
            return match c {
                b'0'..=b'7' => Some(Level::from_syslog_priority(u32::from(c - b'0'))),
                b'i' | b'I' | b'w' | b'W' | b'e' | b'E' | b'f' | b'F' => letter(*c),
                _ => None,
            };
        }
        match packed(b) {
            // PostgreSQL's and MySQL's header words are no level values.
            Some(LOG | NOTE | CONFIG) => None,
            Some(w) => word_packed(w),
            None => matches_word(b, &[b"information", b"informational"])
                .then_some(Level::Info)
                .or_else(|| b.eq_ignore_ascii_case(b"emergency").then_some(Level::Fatal)),
        }
    }

    /// The syslog severity of a priority value (`<PRI>`: facility × 8 +
    /// severity).
    pub fn from_syslog_priority(pri: u32) -> Level {
        match pri & 7 {
            0..=2 => Level::Fatal,
            3 => Level::Error,
            4 => Level::Warn,
            5 | 6 => Level::Info,
            _ => Level::Debug,
        }
    }
}

fn matches_word(b: &[u8], words: &[&[u8]]) -> bool {
    words.iter().any(|w| w.eq_ignore_ascii_case(b))
}

/// A single-letter level as klog, logcat and Rails write it: `V`, `D`,
/// `I`, `W`, `E`, `F`, and `A` (Android's assert).
pub fn letter(c: u8) -> Option<Level> {
    Some(match c.to_ascii_uppercase() {
        b'V' | b'D' => Level::Debug,
        b'I' => Level::Info,
        b'W' => Level::Warn,
        b'E' => Level::Error,
        b'F' | b'A' => Level::Fatal,
        _ => return None,
    })
}

/// A level word of a text header (`INFO`, `Warning`, `notice`, `DEBUG3`,
/// `SEVERE`, `LOG` …), any case; None for anything else, single letters
/// included.
pub fn header_word(b: &[u8]) -> Option<Level> {
    if b.len() < 3 {
        return None;
    }
    match packed(b) {
        Some(w) => word_packed(w),
        None => long_word(b),
    }
}

/// Whether a header word is a level in its own right, also when written
/// like a word of prose (`Info`, `Error:`), rather than only in capitals
/// or brackets (`LOG`, `NOTE`, `FINE`, `ALERT`, `DETAIL`: words that
/// start sentences too).
pub fn strong_word(b: &[u8]) -> bool {
    const STRONG: &[&[u8]] = &[
        b"trace",
        b"debug",
        b"info",
        b"notice",
        b"warn",
        b"warning",
        b"error",
        b"err",
        b"fatal",
        b"critical",
        b"crit",
        b"panic",
        b"severe",
        b"emerg",
        b"dbug",
        b"eror",
        b"wrn",
        b"inf",
        b"dbg",
        b"trc",
        b"ftl",
        b"verbose",
        b"dpanic",
    ];
    STRONG.iter().any(|w| w.eq_ignore_ascii_case(b))
}

/// A level value: a name, or pino's and bunyan's numbers (10 trace … 60
/// fatal).
pub fn value(v: &str) -> Option<Level> {
    if let Some(l) = Level::parse(v) {
        return Some(l);
    }
    let n: u32 = v.trim().parse().ok()?;
    Some(match n {
        10..=29 => Level::Debug,
        30..=39 => Level::Info,
        40..=49 => Level::Warn,
        50..=59 => Level::Error,
        60..=69 => Level::Fatal,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_values_in_any_case() {
        let cases = [
            ("trace", Level::Debug),
            ("DEBUG", Level::Debug),
            ("dbug", Level::Debug),
            ("7", Level::Debug),
            (" Info ", Level::Info),
            ("information", Level::Info),
            ("INFORMATION", Level::Info),
            ("Informational", Level::Info),
            ("notice", Level::Info),
            ("I", Level::Info),
            ("warn", Level::Warn),
            ("Warning", Level::Warn),
            ("W", Level::Warn),
            ("4", Level::Warn),
            ("error", Level::Error),
            ("ERR", Level::Error),
            ("e", Level::Error),
            ("3", Level::Error),
            ("SEVERE", Level::Error),
            ("dpanic", Level::Fatal),
            ("CRITICAL", Level::Fatal),
            ("crit", Level::Fatal),
            ("emerg", Level::Fatal),
            ("Emergency", Level::Fatal),
            ("0", Level::Fatal),
        ];
        for (name, level) in cases {
            assert_eq!(Level::parse(name), Some(level), "{name}");
        }
        for other in [
            "",
            "errors",
            "warn ing",
            "x",
            "8",
            "critical!",
            "log",
            "note",
            "Normal",
        ] {
            assert_eq!(Level::parse(other), None, "{other}");
        }
    }

    #[test]
    fn header_words_and_their_scale() {
        for (w, l) in [
            ("INFO", Level::Info),
            ("Info", Level::Info),
            ("notice", Level::Info),
            ("LOG", Level::Info),
            ("STATEMENT", Level::Info),
            ("DEBUG3", Level::Debug),
            ("FINEST", Level::Debug),
            ("VERBOSE", Level::Debug),
            ("WRN", Level::Warn),
            ("SEVERE", Level::Error),
            ("FAILURE", Level::Error),
            ("fail", Level::Error),
            ("FATAL", Level::Fatal),
            ("EMERGENCY", Level::Fatal),
        ] {
            assert_eq!(header_word(w.as_bytes()), Some(l), "{w}");
        }
        for w in ["I", "E", "Inform", "ERRORS", "x"] {
            assert_eq!(header_word(w.as_bytes()), None, "{w}");
        }
        assert_eq!(Level::from_syslog_priority(34), Level::Fatal);
        assert_eq!(Level::from_syslog_priority(165), Level::Info);
        assert_eq!(Level::from_syslog_priority(11), Level::Error);
        assert_eq!(value("50"), Some(Level::Error));
        assert_eq!(value("30"), Some(Level::Info));
    }
}
