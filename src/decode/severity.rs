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

/// A level value: a name, a syslog severity digit (0 emergency … 7
/// debug), or pino's and bunyan's numbers (10 trace … 60 fatal): the
/// scales a number under a plain `level` key is on when nothing else says
/// which (see [`Scale`] for the others).
pub fn value(v: &str) -> Option<Level> {
    if let Some(l) = Level::parse(v) {
        return Some(l);
    }
    let n: i64 = v.trim().parse().ok()?;
    Scale::Pino.level(n)
}

/// The numeric severity scales producers write, as one table: which
/// number means which level. Which scale a number is on is said by where
/// it stands (the key it is under, the record's other keys, the tag it is
/// part of), never guessed from the number alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Syslog severity (RFC 5424 §6.2.1): 0 emergency, 1 alert, 2
    /// critical, 3 error, 4 warning, 5 notice, 6 informational, 7 debug —
    /// in `<PRI>` (facility × 8 + severity), journald's `PRIORITY`, and the
    /// `%FACILITY-N-MNEMONIC` tags of network devices.
    Syslog,
    /// OpenTelemetry's `SeverityNumber`: 1–4 trace, 5–8 debug, 9–12 info,
    /// 13–16 warn, 17–20 error, 21–24 fatal.
    OpenTelemetry,
    /// Windows event levels: 0 log always, 1 critical, 2 error, 3 warning,
    /// 4 information, 5 verbose.
    Windows,
    /// pino and bunyan: 10 trace, 20 debug, 30 info, 40 warn, 50 error, 60
    /// fatal (a single digit is read as syslog's, which they never write).
    Pino,
    /// Python's `logging` (`levelno`) and loguru (`no`): 5 trace, 10 debug,
    /// 20 info, 25 success, 30 warning, 40 error, 50 critical.
    Python,
    /// java.util.logging's values: 300 finest … 500 fine, 700 config, 800
    /// info, 900 warning, 1000 severe.
    Java,
    /// ArcSight CEF's `Severity` (0–3 low, 4–6 medium, 7–8 high, 9–10
    /// very high), also LEEF's `sev` (1–10).
    Cef,
}

impl Scale {
    /// The level number `n` names on this scale; None off the scale.
    pub fn level(self, n: i64) -> Option<Level> {
        Some(match self {
            Scale::Syslog => match n {
                0..=7 => Level::from_syslog_priority(n as u32),
                _ => return None,
            },
            Scale::OpenTelemetry => match n {
                1..=8 => Level::Debug,
                9..=12 => Level::Info,
                13..=16 => Level::Warn,
                17..=20 => Level::Error,
                21..=24 => Level::Fatal,
                _ => return None,
            },
            Scale::Windows => match n {
                0 | 4 => Level::Info,
                1 => Level::Fatal,
                2 => Level::Error,
                3 => Level::Warn,
                5 => Level::Debug,
                _ => return None,
            },
            Scale::Pino => match n {
                0..=7 => return Scale::Syslog.level(n),
                10..=29 => Level::Debug,
                30..=39 => Level::Info,
                40..=49 => Level::Warn,
                50..=59 => Level::Error,
                60..=69 => Level::Fatal,
                _ => return None,
            },
            Scale::Python => match n {
                1..=19 => Level::Debug,
                20..=29 => Level::Info,
                30..=39 => Level::Warn,
                40..=49 => Level::Error,
                50..=59 => Level::Fatal,
                _ => return None,
            },
            Scale::Java => match n {
                1..=699 => Level::Debug,
                700..=899 => Level::Info,
                900..=999 => Level::Warn,
                1000..=1099 => Level::Error,
                _ => return None,
            },
            Scale::Cef => match n {
                0..=3 => Level::Info,
                4..=6 => Level::Warn,
                7..=8 => Level::Error,
                9..=10 => Level::Fatal,
                _ => return None,
            },
        })
    }

    /// [`Scale::level`] of a number written as text.
    pub fn read(self, v: &str) -> Option<Level> {
        self.level(v.trim().parse().ok()?)
    }
}

/// How far into a message a severity tag is looked for.
const TAG_SCAN: usize = 256;

/// The level a severity tag in the first bytes of `msg` names, where
/// devices write the severity as a number in the message: the
/// `%FACILITY-N-MNEMONIC` tags of Cisco IOS, NX-OS, ASA and Arista
/// (`%LINK-3-UPDOWN:`, `%ASA-4-106023:`, `%ROUTING-BGP-5-ADJCHANGE:`),
/// Huawei's and H3C's `%%01SHELL/5/CMDRECORD(s):`, and ArcSight CEF's
/// header (`CEF:0|vendor|product|version|id|name|severity|`). The tag
/// stays in the message: it names the event.
pub fn tag(msg: &[u8]) -> Option<Level> {
    let b = &msg[..msg.len().min(TAG_SCAN)];
    // Most lines have neither a `|` nor a `%`: two byte searches.
    if memchr::memchr(b'|', b).is_some() {
        if let Some(at) = memchr::memmem::find(b, b"CEF:") {
            if let Some(l) = cef(&b[at..]) {
                return Some(l);
            }
        }
    }
    let mut from = 0;
    while let Some(k) = memchr::memchr(b'%', &b[from..]) {
        let at = from + k;
        if at == 0 || !b[at - 1].is_ascii_alphanumeric() {
            if let Some(l) = percent_tag(&b[at..]) {
                return Some(l);
            }
        }
        from = at + 1;
    }
    None
}

/// `%FAC[-SUB]-N-MNEMONIC` or `%%NNFAC/N/MNEMONIC` at the start of `b`
/// (followed by `:`, a space, `(` or the end): the level its digit names.
pub fn device_tag(b: &[u8]) -> Option<Level> {
    if b.first() != Some(&b'%') {
        return None;
    }
    percent_tag(b)
}

fn percent_tag(b: &[u8]) -> Option<Level> {
    let name = |c: &u8| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_';
    let end = b
        .iter()
        .skip(1)
        .position(|c| !(name(c) || matches!(c, b'-' | b'/' | b'%')))
        .map_or(b.len(), |p| p + 1);
    let after = b.get(end).copied().unwrap_or(b' ');
    if !matches!(after, b':' | b' ' | b'(' | b'\t') {
        return None;
    }
    let t = &b[1..end];
    let (t, sep) = match t.strip_prefix(b"%") {
        // Huawei/H3C: two digits (the version) before the module.
        Some(rest) => (rest.get(2..)?, b'/'),
        None => (t, b'-'),
    };
    let parts: Vec<&[u8]> = t.split(|c| *c == sep).collect();
    let n = parts.len();
    if n < 3 || parts.iter().any(|p| p.is_empty() || !p.iter().all(name)) {
        return None;
    }
    // The facility starts with a letter; the mnemonic may be a number
    // (ASA's `%ASA-4-106023`).
    if !parts[0][0].is_ascii_uppercase() {
        return None;
    }
    match parts[n - 2] {
        [d @ b'0'..=b'7'] => Scale::Syslog.level(i64::from(d - b'0')),
        _ => None,
    }
}

/// CEF's header: the seventh `|`-separated field is the severity, a number
/// (0–10) or a word (`Low`, `Medium`, `High`, `Very-High`, `Unknown`).
fn cef(b: &[u8]) -> Option<Level> {
    let rest = b.strip_prefix(b"CEF:")?;
    // UniFi writes `CEF: 0|…`.
    let rest = rest.strip_prefix(b" ").unwrap_or(rest);
    if !rest.first().is_some_and(u8::is_ascii_digit) {
        return None;
    }
    // Fields may hold `\|`: skip escaped pipes.
    let mut fields = 0;
    let mut start = 0;
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            b'\\' => i += 1,
            b'|' => {
                fields += 1;
                if fields == 7 {
                    return cef_severity(rest.get(start..i)?);
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

fn cef_severity(v: &[u8]) -> Option<Level> {
    let v = std::str::from_utf8(v).ok()?.trim();
    if let Some(l) = Scale::Cef.read(v) {
        return Some(l);
    }
    Some(match v.to_ascii_lowercase().as_str() {
        "low" => Level::Info,
        "medium" => Level::Warn,
        "high" => Level::Error,
        "very-high" | "very high" => Level::Fatal,
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

    #[test]
    fn each_scale_reads_its_own_numbers() {
        use Scale::*;
        // The same number names different levels on different scales.
        let four = [
            (Syslog, Some(Level::Warn)),
            (OpenTelemetry, Some(Level::Debug)),
            (Windows, Some(Level::Info)),
            (Cef, Some(Level::Warn)),
            (Python, Some(Level::Debug)),
        ];
        for (scale, want) in four {
            assert_eq!(scale.level(4), want, "{scale:?}");
        }
        for (scale, n, want) in [
            (Syslog, 0, Level::Fatal),
            (Syslog, 3, Level::Error),
            (Syslog, 6, Level::Info),
            (OpenTelemetry, 1, Level::Debug),
            (OpenTelemetry, 9, Level::Info),
            (OpenTelemetry, 13, Level::Warn),
            (OpenTelemetry, 17, Level::Error),
            (OpenTelemetry, 24, Level::Fatal),
            (Windows, 1, Level::Fatal),
            (Windows, 2, Level::Error),
            (Windows, 3, Level::Warn),
            (Windows, 5, Level::Debug),
            (Pino, 20, Level::Debug),
            (Pino, 30, Level::Info),
            (Pino, 60, Level::Fatal),
            (Python, 20, Level::Info),
            (Python, 25, Level::Info),
            (Python, 30, Level::Warn),
            (Python, 40, Level::Error),
            (Python, 50, Level::Fatal),
            (Java, 300, Level::Debug),
            (Java, 800, Level::Info),
            (Java, 900, Level::Warn),
            (Java, 1000, Level::Error),
            (Cef, 10, Level::Fatal),
            (Cef, 7, Level::Error),
        ] {
            assert_eq!(scale.level(n), Some(want), "{scale:?} {n}");
        }
        for (scale, n) in [
            (Syslog, 8),
            (OpenTelemetry, 0),
            (OpenTelemetry, 25),
            (Windows, 6),
            (Cef, 11),
            (Pino, 8),
        ] {
            assert_eq!(scale.level(n), None, "{scale:?} {n}");
        }
    }

    #[test]
    fn severity_tags_of_devices_and_appliances() {
        // Real shapes: Cisco IOS, IOS-XE, NX-OS, ASA, IOS-XR, Arista,
        // Huawei VRP, H3C Comware, ArcSight CEF.
        for (line, want) in [
            ("%LINK-3-UPDOWN: Interface GigabitEthernet0/1, changed state to down", Level::Error),
            ("%LINEPROTO-5-UPDOWN: Line protocol on Interface Gi0/1, changed state to up", Level::Info),
            ("*Mar  1 18:46:11.123: %SYS-5-CONFIG_I: Configured from console by vty2 (10.34.195.36)", Level::Info),
            ("%ASA-4-106023: Deny tcp src outside:192.0.2.7/4711 dst inside:10.0.0.5/22 by access-group \"OUT\"", Level::Warn),
            ("%ASA-6-302013: Built inbound TCP connection 81 for outside:192.0.2.7/4711", Level::Info),
            ("N7K-1 %ETHPORT-5-IF_DOWN_LINK_FAILURE: Interface Ethernet3/1 is down (Link failure)", Level::Info),
            ("RP/0/RSP0/CPU0:rtr1 bgp[1051]: %ROUTING-BGP-5-ADJCHANGE : neighbor 10.0.0.2 Down", Level::Info),
            ("%SW_MATM-4-MACFLAP_NOTIF: Host 0011.2233.4455 in vlan 10 is flapping", Level::Warn),
            ("%PLATFORM_ENV-1-FAN: Faulty fan detected", Level::Fatal),
            ("Ebra: %LINEPROTO-5-UPDOWN: Line protocol on Interface Ethernet1, changed state to down", Level::Info),
            ("%%01SHELL/5/CMDRECORD(s):Recorded command information. (Task=VT0, Ip=10.1.1.1)", Level::Info),
            ("%%10IFNET/3/PHY_UPDOWN: Physical state on the interface GigabitEthernet1/0/1 changed to down.", Level::Error),
            ("CEF:0|Security|threatmanager|1.0|100|worm successfully stopped|10|src=10.0.0.1 dst=2.1.2.2", Level::Fatal),
            ("host CEF:0|Vendor|Product|2.0|42|name with \\| pipe|Medium|act=blocked", Level::Warn),
            ("CEF:1|Trend Micro|Deep Security Agent|10.0|4000000|Eicar_test_file|6|cn1=1", Level::Warn),
            ("CEF:0|Ubiquiti|UniFi Network|9.4.19|544|Admin Accessed UniFi Network|1|UNIFIcategory=System src=10.9.8.7", Level::Info),
            ("CEF: 0|Ubiquiti|UniFi Network|9.4.19|201|Threat Detected and Blocked|7|proto=TCP src=10.9.8.7 spt=52331", Level::Error),
        ] {
            assert_eq!(tag(line.as_bytes()), Some(want), "{line}");
        }
        for line in [
            "disk at 95% full",
            "progress 50%-3-done: ok",
            "url /a%2F-3-B: moved",
            "%d-%d-%d: format",
            "rate%LINK-3-UPDOWN: glued to a word",
            "%LINK-9-UPDOWN: 9 is no syslog severity",
            "%link-3-updown: lower case is no tag",
            "CEF:x|not|a|header",
        ] {
            assert_eq!(tag(line.as_bytes()), None, "{line}");
        }
    }
}
