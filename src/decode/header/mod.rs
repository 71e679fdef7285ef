//! Text headers: the timestamp, level and named parts (logger, thread,
//! pid, host, program, caller) that plain-text logs write before their
//! message, whatever their order and punctuation — log4j and Python
//! logging, Kafka's bracketed stamps, Calico's `[LEVEL][pid]`, HDFS's
//! compact dates, Apache and nginx error logs, logcat, PostgreSQL, Redis,
//! syslog (RFC 3164 and 5424), Go's `log`, klog, epoch numbers.
//!
//! Rules cannot be written for every logging library, so the reader is
//! one general mechanism rather than a list of formats: it walks the
//! leading tokens, recognising *stamps* (many shapes, one grammar each),
//! *level words*, *pids*, *bracket groups*, *tags* (`name:`) and
//! separators (`-`, `|`, `:`). Identifier-like tokens between them
//! (hosts, node ids, `RAS KERNEL`) belong to the header only when another
//! header element follows; the first prose word ends it. The message is
//! what follows. The walk is bounded ([`SCAN_BYTES`], [`MAX_TOKENS`]) and
//! allocates nothing, because the time and level of every plain line are
//! read here.

use super::severity::{self, Level};
use super::time::{self, NS};

mod group;
mod stamp;
mod syslog;
mod token;
mod walk;
use stamp::{stamp_at, StampKind};
use token::is_space;
use walk::Walker;

/// Bytes of a line the header reader looks at.
pub const SCAN_BYTES: usize = 320;
/// Tokens of a line the header reader looks at.
pub const MAX_TOKENS: usize = 18;
/// Most named parts kept per header.
const MAX_PARTS: usize = 8;

/// A named part of a header, which becomes a field of the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Logger, component or tag (`org.apache.Foo`, `WindowManager`).
    Logger,
    /// Thread (`[main]`).
    Thread,
    /// A bracketed context with spaces (`[req-1 user project]`).
    Context,
    /// Process id.
    Pid,
    /// Thread id (a second number after the pid).
    Tid,
    /// Host (syslog).
    Host,
    /// Program (syslog `prog[pid]:`).
    Program,
    /// Source location (`pool.go:762`).
    Caller,
    /// Syslog (RFC 5424) message id.
    MsgId,
}

impl Part {
    /// The field name the part is found under.
    pub fn name(self) -> &'static str {
        match self {
            Part::Logger => "logger",
            Part::Thread => "thread",
            Part::Context => "context",
            Part::Pid => "pid",
            Part::Tid => "tid",
            Part::Host => "host",
            Part::Program => "program",
            Part::Caller => "caller",
            Part::MsgId => "msgid",
        }
    }
}

/// The family of a header, for the format counters and the decoders that
/// read what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    /// No header.
    #[default]
    None,
    /// Any other text header.
    Text,
    /// syslog: `[<PRI>]Mon DD HH:MM:SS host prog[pid]: …` or RFC 5424.
    Syslog,
    /// klog / glog: `I0501 12:00:40.118204 1187 file.go:107] …`.
    Klog,
    /// Go's `log` stamp: `[prefix: ]2024/05/01 12:00:03 …`.
    GoLog,
}

/// What the header reader found at the start of a line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Header {
    /// Event time of the first stamp with a time of day (ns), when it
    /// could be resolved (a stamp without a year needs a reference).
    pub time: Option<i64>,
    /// Byte range of that stamp.
    pub stamp: Option<(usize, usize)>,
    /// The stamp had no year: it was completed from the reference.
    pub yearless: bool,
    /// The stamp had no date: it was completed from the reference.
    pub dateless: bool,
    /// The stamp had no zone: read as UTC.
    pub zoneless: bool,
    /// Level.
    pub level: Option<Level>,
    /// Byte offset where the message starts (0 when there is no header).
    pub body: usize,
    /// The family of the header.
    pub kind: Kind,
    /// syslog: where the program's own text starts (after `prog[pid]: `),
    /// which may have a header of its own (then `body` is after it).
    pub inner: usize,
    parts: [(Option<Part>, u16, u16); MAX_PARTS],
    n_parts: u8,
}

impl Header {
    /// Whether a header was found (a stamp, a level or a syslog priority).
    pub fn found(&self) -> bool {
        self.kind != Kind::None
    }

    /// The named parts, as (part, value) slices of `text`.
    pub fn parts<'s, 't: 's>(
        &'s self,
        text: &'t str,
    ) -> impl Iterator<Item = (Part, &'t str)> + 's {
        self.parts[..usize::from(self.n_parts)]
            .iter()
            .filter_map(move |(p, a, b)| {
                let v = text.get(usize::from(*a)..usize::from(*b))?;
                Some(((*p)?, v.trim()))
            })
            .filter(|(_, v)| !v.is_empty())
    }

    /// The message: the text after the header.
    pub fn message<'t>(&self, text: &'t str) -> &'t str {
        text.get(self.body..).unwrap_or("")
    }

    fn push(&mut self, part: Part, a: usize, b: usize) {
        if usize::from(self.n_parts) < MAX_PARTS && b <= usize::from(u16::MAX) && a < b {
            self.parts[usize::from(self.n_parts)] = (Some(part), a as u16, b as u16);
            self.n_parts += 1;
        }
    }
}

/// A known time near a line, which completes stamps without a year or a
/// date and tells an epoch number from a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    /// Nothing is known.
    None,
    /// The time of a neighbouring line (ns): the stamp is near it.
    Near(i64),
    /// A time the line cannot be much later than (ns): the file's
    /// modification time, the arrival time.
    Bound(i64),
}

impl Reference {
    /// A neighbour's time, if known.
    pub fn near(t: Option<i64>) -> Reference {
        t.map_or(Reference::None, Reference::Near)
    }

    fn at(self) -> Option<i64> {
        match self {
            Reference::None => None,
            Reference::Near(t) | Reference::Bound(t) => Some(t),
        }
    }

    /// Whether `t` can be the time of a line with this reference.
    fn admits(self, t: i64) -> bool {
        const YEAR: i64 = 366 * 86_400 * NS;
        match self {
            Reference::None => true,
            Reference::Near(r) => (t - r).abs() <= 5 * YEAR,
            Reference::Bound(r) => t <= r.saturating_add(86_400 * NS),
        }
    }
}

/// Reads the header of a line. `reference` (ns, a neighbouring line's
/// time) completes stamps without a year or a date; without one, such
/// stamps are recognised (the header and message are still split) but
/// give no time.
pub fn read(text: &str, reference: Option<i64>) -> Header {
    read_at(text, Reference::near(reference))
}

/// [`read`] with a reference of either kind.
pub fn read_at(text: &str, reference: Reference) -> Header {
    let mut w = Walker::new(text.as_bytes(), reference);
    w.walk(0);
    let mut h = w.finish(true);
    if h.time.is_none() {
        late_stamp(text.as_bytes(), reference, &mut h);
    }
    if h.level.is_none() {
        // Devices that write the severity as a number in a tag of the
        // message (`%LINK-3-UPDOWN:`, CEF's header).
        h.level = severity::tag(text.as_bytes().get(h.body..).unwrap_or_default());
    }
    h
}

/// How far into a line a stamp after columns is looked for.
const LATE_STAMP_BYTES: usize = 72;

/// Columns a stamp after them may follow, at most.
const LATE_STAMP_TOKENS: usize = 6;

/// Words after which a date and time is one the message mentions, not the
/// line's own (`finished at 2024-…`, `valid until …`).
const MENTIONS: &[&[u8]] = &[
    b"at",
    b"on",
    b"since",
    b"until",
    b"till",
    b"from",
    b"to",
    b"before",
    b"after",
    b"by",
    b"of",
    b"in",
    b"is",
    b"was",
    b"for",
    b"expires",
    b"expired",
    b"valid",
    b"scheduled",
    b"last",
    b"next",
];

/// A line whose header gave no time but whose first columns hold a
/// complete stamp — a date with its year and a time of day, or the common
/// log format's bracketed one — after a few columns the walk could not
/// place: an access log's vhost and user (`example.com 10.0.0.5 - req1 -
/// [29/Sep/2021:17:29:58 +0200]`), a load balancer's type (`http
/// 2023-04-26T12:22:55Z …`), a comment's key (`# Time: …`), a thread and
/// level joined by `::` (`MainThread::INFO::2011-12-05 07:04:56,101::`).
/// The stamp gives the time; the message keeps the line. A stamp after a
/// word that mentions a time (`at`, `until`, `since` …) or inside quotes
/// is the message's.
fn late_stamp(b: &[u8], reference: Reference, h: &mut Header) {
    let lim = b.len().min(LATE_STAMP_BYTES);
    // A time of day has digits on both sides of a `:` (`12:22`); most
    // lines without a header have none this early.
    let clock = memchr::memchr_iter(b':', &b[..lim]).any(|k| {
        k >= 1
            && b[k - 1].is_ascii_digit()
            && b.get(k + 1).is_some_and(u8::is_ascii_digit)
            && b.get(k + 2).is_some_and(u8::is_ascii_digit)
    });
    if !clock {
        return;
    }
    let mut tokens = 0;
    let mut i = 0;
    let mut quoted = false;
    let mut prev: &[u8] = b"";
    while i < lim && tokens <= LATE_STAMP_TOKENS {
        while i < lim && is_space(b[i]) {
            i += 1;
        }
        if i >= lim {
            break;
        }
        let end = b[i..]
            .iter()
            .position(|c| is_space(*c))
            .map_or(b.len(), |p| i + p);
        let tok = &b[i..end];
        if !quoted {
            // The stamp may start the token, follow its bracket, or follow
            // the second `::` inside it.
            let bracket = matches!(b[i], b'[' | b'(').then_some(i + 1);
            let joined = tok
                .windows(2)
                .enumerate()
                .filter(|(_, w)| *w == b"::")
                .nth(1)
                .map(|(k, _)| i + k + 2);
            for at in [Some(i), bracket, joined].into_iter().flatten() {
                if !may_start_date(&b[at.min(b.len())..]) {
                    continue;
                }
                if let Some(st) = stamp_at(b, at, false) {
                    let complete = st.epoch.is_none()
                        && st.month != 0
                        && st.clock.is_some()
                        && (st.year.is_some() || b[i] == b'[');
                    let mention = || {
                        MENTIONS
                            .iter()
                            .any(|w| w.eq_ignore_ascii_case(prev.trim_ascii_end()))
                    };
                    if complete && mention() {
                        return;
                    }
                    if complete {
                        h.time = st.resolve(reference);
                        if h.time.is_some() {
                            h.stamp = Some((at, st.end));
                            h.yearless = st.year.is_none();
                            h.dateless = false;
                            h.zoneless = st.offset.is_none();
                        }
                        return;
                    }
                }
            }
        }
        quoted ^= tok.iter().filter(|c| **c == b'"').count() % 2 == 1;
        prev = tok;
        tokens += 1;
        i = end;
    }
}

/// Whether a date may start here (a cheap test before the stamp grammar):
/// digits then a date separator (`2024-`, `07/`, `29.`), or a capitalised
/// month or weekday name (`Sun Mar 13 …`, `May 07`).
fn may_start_date(b: &[u8]) -> bool {
    let sep = |k: usize| matches!(b.get(k), Some(b'-' | b'/' | b'.'));
    match b.first() {
        Some(c) if c.is_ascii_digit() => {
            (b.get(1).is_some_and(u8::is_ascii_digit) && sep(2))
                || (b
                    .get(1..4)
                    .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
                    && sep(4))
        }
        Some(c) if c.is_ascii_uppercase() => {
            b.get(1..3)
                .is_some_and(|w| w.iter().all(u8::is_ascii_lowercase))
                && matches!(b.get(3), Some(b' ' | b','))
        }
        _ => false,
    }
}

/// A stamp at the very start of `text` followed by one space, the way
/// `kubectl logs --timestamps` (RFC 3339) and `stern --timestamps`
/// (RFC 3339, or `MM-DD HH:MM:SS` when short) put one before each line:
/// its time (None when it needs a reference and has none) and where the
/// rest starts. Whether the stamp is a wrapper or the line's own header
/// depends on the rest; the decoder decides (`Decoder::peel_stamp`).
pub fn leading_stamp(text: &str, reference: Reference) -> Option<(Option<i64>, usize)> {
    if !may_lead_with_stamp(text) {
        return None;
    }
    let b = text.as_bytes();
    let iso = b[4] == b'-';
    // zap's console encoder: a tab after the stamp, not a wrapper.
    if iso && b[10] == b'T' && memchr::memchr2(b' ', b'\t', b).is_some_and(|i| b[i] == b'\t') {
        return None;
    }
    let st = stamp_at(b, 0, false)?;
    if !st.has_time() || b.get(st.end) != Some(&b' ') {
        return None;
    }
    Some((st.resolve(reference), st.end + 1))
}

/// The length in bytes of a timestamp starting at byte `at` of `text`
/// (any shape the header reader knows that names a date or a time of day,
/// bracketed or not), for masking stamps inside messages; None when none
/// starts there.
pub fn stamp_len(text: &str, at: usize) -> Option<usize> {
    let b = text.as_bytes();
    let c = *b.get(at)?;
    let (st, start) = if c == b'[' || c == b'(' {
        (stamp_at(b, at + 1, true)?, at)
    } else {
        (stamp_at(b, at, true)?, at)
    };
    if !(st.has_time() || st.year.is_some()) || st.kind == StampKind::Epoch {
        return None;
    }
    let mut end = st.end;
    if c == b'[' || c == b'(' {
        let close = if c == b'[' { b']' } else { b')' };
        if b.get(end) != Some(&close) {
            return None;
        }
        end += 1;
    }
    Some(end - start)
}

/// A klog stamp at the start of `text` (`I0501 12:00:40.118204`): its time
/// (completed from the reference: klog writes no year) and where it ends.
/// The payload decoder's klog reader takes its stamp from here, so one
/// grammar reads it.
pub fn klog_stamp(text: &str, reference: Reference) -> Option<(Option<i64>, usize)> {
    let st = stamp_at(text.as_bytes(), 0, true).filter(|s| s.kind == StampKind::Klog)?;
    Some((st.resolve(reference), st.end))
}

/// Whether `text` starts with the shape of a [`leading_stamp`]: an RFC
/// 3339 date and time, or stern's short `MM-DD HH:MM:SS` (a cheap test
/// of a few bytes).
pub fn may_lead_with_stamp(text: &str) -> bool {
    let b = text.as_bytes();
    (b.len() > 20 && b[4] == b'-' && b[7] == b'-' && matches!(b[10], b'T' | b' '))
        || (b.len() > 15 && b[2] == b'-' && b[5] == b' ' && b[8] == b':')
}

/// The header of a zap console line (`2024-05-01T12:00:00.553Z\tERROR\t…`,
/// tabs or runs of spaces): its RFC 3339 stamp and level word, read
/// directly (the format has its own decoder for the rest).
pub fn console(text: &str) -> Header {
    let b = text.as_bytes();
    let mut h = Header::default();
    let Some(sp) = memchr::memchr2(b' ', b'\t', b) else {
        return h;
    };
    h.time = time::parse_rfc3339(&text[..sp]);
    h.stamp = Some((0, sp));
    let from = sp + b[sp..].iter().take_while(|c| is_space(**c)).count();
    let n = b[from..]
        .iter()
        .take_while(|c| c.is_ascii_alphabetic())
        .count();
    h.level = severity::header_word(&b[from..from + n]);
    h.kind = Kind::Text;
    h.body = from + n;
    h
}

/// Starts of lines that are errors whatever follows: Go panics and runtime
/// failures, Python tracebacks, Java's uncaught exceptions. The message
/// keeps them.
const ERROR_STARTS: &[(&[u8], Level)] = &[
    (b"panic: ", Level::Fatal),
    (b"fatal error: ", Level::Fatal),
    (b"Traceback (most recent call last)", Level::Error),
    (b"Exception in thread ", Level::Error),
];

// ---------------------------------------------------------------------
// Stamps

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::format_rfc3339;
    use crate::decode::time::parse_rfc3339;

    /// One header shape: a real-shaped line, the time it names (RFC 3339,
    /// ms), its level, where its message starts, and its named parts.
    struct Case {
        name: &'static str,
        line: &'static str,
        time: Option<&'static str>,
        level: Option<Level>,
        message: &'static str,
        parts: &'static [(&'static str, &'static str)],
    }

    const REFERENCE: &str = "2024-05-07T12:00:00Z";

    const CASES: &[Case] = &[
        Case {
            name: "log4j / Hadoop",
            line: "2015-10-18 18:01:47,978 INFO [main] org.apache.hadoop.mapreduce.v2.app.MRAppMaster: Created MRAppMaster for application appattempt_1445144423722_0020_000001",
            time: Some("2015-10-18T18:01:47.978Z"),
            level: Some(Level::Info),
            message: "Created MRAppMaster for application appattempt_1445144423722_0020_000001",
            parts: &[("thread", "main"), ("logger", "org.apache.hadoop.mapreduce.v2.app.MRAppMaster")],
        },
        Case {
            name: "Kafka (bracketed log4j)",
            line: "[2024-05-07 10:55:53,434] INFO [LocalLog partition=__consumer_offsets-3, dir=/var/lib/kafka/data] Rolled new log segment at offset 0 in 2 ms. (kafka.log.LocalLog)",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: Some(Level::Info),
            message: "[LocalLog partition=__consumer_offsets-3, dir=/var/lib/kafka/data] Rolled new log segment at offset 0 in 2 ms. (kafka.log.LocalLog)",
            parts: &[],
        },
        Case {
            name: "Calico felix",
            line: "2024-05-08 15:23:58.902 [DEBUG][606918] felix/sync_client.go 356: Pong received from Typha connID=0x0",
            time: Some("2024-05-08T15:23:58.902Z"),
            level: Some(Level::Debug),
            message: "Pong received from Typha connID=0x0",
            parts: &[("pid", "606918"), ("caller", "felix/sync_client.go 356")],
        },
        Case {
            name: "HDFS compact date",
            line: "081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 for block blk_38865049064139660 terminating",
            time: Some("2008-11-09T20:36:15.000Z"),
            level: Some(Level::Info),
            message: "PacketResponder 1 for block blk_38865049064139660 terminating",
            parts: &[("pid", "148"), ("logger", "dfs.DataNode$PacketResponder")],
        },
        Case {
            name: "Apache error log",
            line: "[Sun Dec 04 04:47:44 2005] [error] [client 222.166.160.184] Directory index forbidden by rule: /var/www/html/",
            time: Some("2005-12-04T04:47:44.000Z"),
            level: Some(Level::Error),
            message: "[client 222.166.160.184] Directory index forbidden by rule: /var/www/html/",
            parts: &[],
        },
        Case {
            name: "Apache 2.4 error log",
            line: "[Wed Oct 11 14:32:52.123456 2023] [core:error] [pid 35708:tid 4328636416] [client 72.15.99.187] File does not exist: /usr/local/apache2/htdocs/favicon.ico",
            time: Some("2023-10-11T14:32:52.123Z"),
            level: Some(Level::Error),
            message: "[client 72.15.99.187] File does not exist: /usr/local/apache2/htdocs/favicon.ico",
            parts: &[("pid", "35708")],
        },
        Case {
            name: "Android logcat",
            line: "03-17 16:13:38.811  1702  2395 D WindowManager: printFreezingDisplayLogsopening app wtoken = AppWindowToken{9f4ef63}",
            time: Some("2024-03-17T16:13:38.811Z"),
            level: Some(Level::Debug),
            message: "printFreezingDisplayLogsopening app wtoken = AppWindowToken{9f4ef63}",
            parts: &[("pid", "1702"), ("tid", "2395"), ("logger", "WindowManager")],
        },
        Case {
            name: "pipe-separated (HealthApp)",
            line: "20171223-22:15:29:606|Step_LSC|30002312|onStandStepChanged 3579",
            time: Some("2017-12-23T22:15:29.606Z"),
            level: None,
            message: "onStandStepChanged 3579",
            parts: &[("logger", "Step_LSC"), ("pid", "30002312")],
        },
        Case {
            name: "Windows CBS",
            line: "2016-09-28 04:30:30, Info                  CBS    Loaded Servicing Stack v6.1.7601.23505 with Core: C:\\Windows\\winsxs\\cbscore.dll",
            time: Some("2016-09-28T04:30:30.000Z"),
            level: Some(Level::Info),
            message: "Loaded Servicing Stack v6.1.7601.23505 with Core: C:\\Windows\\winsxs\\cbscore.dll",
            parts: &[("logger", "CBS")],
        },
        Case {
            name: "BGL (epoch, dates, node, RAS KERNEL INFO)",
            line: "- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.50.675872 R02-M1-N0-C:J12-U11 RAS KERNEL INFO instruction cache parity error corrected",
            time: Some("2005-06-03T22:42:50.000Z"),
            level: Some(Level::Info),
            message: "instruction cache parity error corrected",
            parts: &[],
        },
        Case {
            name: "Thunderbird (epoch, then syslog)",
            line: "- 1131566461 2005.11.09 dn228 Nov 9 12:01:01 dn228/dn228 crond(pam_unix)[2915]: session closed for user root",
            time: Some("2005-11-09T20:01:01.000Z"),
            level: Some(Level::Info),
            message: "session closed for user root",
            parts: &[("host", "dn228/dn228"), ("program", "crond(pam_unix)"), ("pid", "2915")],
        },
        Case {
            name: "HPC (columns, epoch)",
            line: "134681 node-246 unix.hw state_change.unavailable 1077804742 1 Component State Change: Component \\042alt0\\042 is in the unavailable state (HWID=1973)",
            time: Some("2004-02-26T14:12:22.000Z"),
            level: None,
            message: "Component State Change: Component \\042alt0\\042 is in the unavailable state (HWID=1973)",
            parts: &[],
        },
        Case {
            name: "ZooKeeper",
            line: "2015-07-29 17:41:44,747 - INFO  [QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181:FastLeaderElection@774] - Notification time out: 3200",
            time: Some("2015-07-29T17:41:44.747Z"),
            level: Some(Level::Info),
            message: "Notification time out: 3200",
            parts: &[("thread", "QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181:FastLeaderElection@774")],
        },
        Case {
            name: "Spark (yy/MM/dd)",
            line: "17/06/09 20:10:40 INFO executor.CoarseGrainedExecutorBackend: Registered signal handlers for [TERM, HUP, INT]",
            time: Some("2017-06-09T20:10:40.000Z"),
            level: Some(Level::Info),
            message: "Registered signal handlers for [TERM, HUP, INT]",
            parts: &[("logger", "executor.CoarseGrainedExecutorBackend")],
        },
        Case {
            name: "Proxifier",
            line: "[10.30 16:49:06] chrome.exe - proxy.cse.cuhk.edu.hk:5070 open through proxy proxy.cse.cuhk.edu.hk:5070 HTTPS",
            time: Some("2023-10-30T16:49:06.000Z"),
            level: None,
            message: "proxy.cse.cuhk.edu.hk:5070 open through proxy proxy.cse.cuhk.edu.hk:5070 HTTPS",
            parts: &[("logger", "chrome.exe")],
        },
        Case {
            name: "OpenStack (oslo.log)",
            line: "nova-api.log.1.2017-05-16_13:53:08 2017-05-16 00:00:00.008 25746 INFO nova.osapi_compute.wsgi.server [req-38101a0b-2096 113d3a99c3da401f 54fadb412c4e40cd - - -] 10.11.10.1 \"GET /v2/servers/detail HTTP/1.1\" status: 200",
            time: Some("2017-05-16T00:00:00.008Z"),
            level: Some(Level::Info),
            message: "10.11.10.1 \"GET /v2/servers/detail HTTP/1.1\" status: 200",
            parts: &[("pid", "25746"), ("logger", "nova.osapi_compute.wsgi.server"), ("context", "req-38101a0b-2096 113d3a99c3da401f 54fadb412c4e40cd - - -")],
        },
        Case {
            name: "syslog (RFC 3164)",
            line: "Jun 14 15:16:01 combo sshd(pam_unix)[19939]: authentication failure; logname= uid=0 euid=0 tty=NODEVssh ruser= rhost=218.188.2.4",
            time: Some("2023-06-14T15:16:01.000Z"),
            level: Some(Level::Info),
            message: "authentication failure; logname= uid=0 euid=0 tty=NODEVssh ruser= rhost=218.188.2.4",
            parts: &[("host", "combo"), ("program", "sshd(pam_unix)"), ("pid", "19939")],
        },
        Case {
            name: "syslog with a priority",
            line: "<34>Oct 11 22:14:15 mymachine su: 'su root' failed for lonvick on /dev/pts/8",
            time: Some("2023-10-11T22:14:15.000Z"),
            level: Some(Level::Fatal),
            message: "'su root' failed for lonvick on /dev/pts/8",
            parts: &[("host", "mymachine"), ("program", "su")],
        },
        Case {
            name: "syslog (RFC 5424)",
            line: "<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog 1912 ID47 [exampleSDID@32473 iut=\"3\" eventSource=\"Application\"] An application event log entry",
            time: Some("2003-10-11T22:14:15.003Z"),
            level: Some(Level::Info),
            message: "An application event log entry",
            parts: &[("host", "mymachine.example.com"), ("program", "evntslog"), ("pid", "1912"), ("msgid", "ID47")],
        },
        Case {
            name: "Go log",
            line: "2024/05/07 10:55:53 main.go:42: listening on :8080",
            time: Some("2024-05-07T10:55:53.000Z"),
            level: None,
            message: "listening on :8080",
            parts: &[("caller", "main.go:42")],
        },
        Case {
            name: "go-redis (Go log with a prefix: no level)",
            line: "redis: 2024/05/01 12:00:03 pool.go:762: redis: connection pool: failed to dial after 5 attempts: dial tcp 10.0.0.21:6379: connect: connection refused",
            time: Some("2024-05-01T12:00:03.000Z"),
            level: None,
            message: "redis: connection pool: failed to dial after 5 attempts: dial tcp 10.0.0.21:6379: connect: connection refused",
            parts: &[("logger", "redis"), ("caller", "pool.go:762")],
        },
        Case {
            name: "nginx error log",
            line: "2024/05/07 10:55:53 [error] 31#31: *1 open() \"/usr/share/nginx/html/x\" failed (2: No such file or directory), client: 10.1.2.3",
            time: Some("2024-05-07T10:55:53.000Z"),
            level: Some(Level::Error),
            message: "*1 open() \"/usr/share/nginx/html/x\" failed (2: No such file or directory), client: 10.1.2.3",
            parts: &[("pid", "31"), ("tid", "31")],
        },
        Case {
            name: "PostgreSQL",
            line: "2024-05-07 10:55:53.434 UTC [123] LOG:  database system is ready to accept connections",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: Some(Level::Info),
            message: "database system is ready to accept connections",
            parts: &[("pid", "123")],
        },
        Case {
            name: "PostgreSQL error with a zone",
            line: "2024-05-07 12:55:53.434 CEST [4711] postgres@shop FATAL:  password authentication failed for user \"postgres\"",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: Some(Level::Fatal),
            message: "password authentication failed for user \"postgres\"",
            parts: &[("pid", "4711")],
        },
        Case {
            name: "Redis server",
            line: "1:M 07 May 2024 10:55:53.434 * Ready to accept connections tcp",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: Some(Level::Info),
            message: "Ready to accept connections tcp",
            parts: &[],
        },
        Case {
            name: "Redis warning",
            line: "1:M 07 May 2024 10:55:53.434 # WARNING Memory overcommit must be enabled!",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: Some(Level::Warn),
            message: "WARNING Memory overcommit must be enabled!",
            parts: &[],
        },
        Case {
            name: "Redis before 7 (no year): a save child's notice",
            line: "4961:C 30 May 12:50:13.460 * DB saved on disk",
            time: Some("2024-05-30T12:50:13.460Z"),
            level: Some(Level::Info),
            message: "DB saved on disk",
            parts: &[],
        },
        Case {
            name: "Redis before 7 (no year): verbose",
            line: "4961:M 30 May 12:50:13.457 - Accepted 127.0.0.1:51234",
            time: Some("2024-05-30T12:50:13.457Z"),
            level: Some(Level::Debug),
            message: "Accepted 127.0.0.1:51234",
            parts: &[],
        },
        Case {
            name: "hclog",
            line: "2024-05-07T10:58:13.877Z [INFO]  expiration: revoked lease: lease_id=auth/token/create/h1",
            time: Some("2024-05-07T10:58:13.877Z"),
            level: Some(Level::Info),
            message: "revoked lease: lease_id=auth/token/create/h1",
            parts: &[("logger", "expiration")],
        },
        Case {
            name: "Python logging",
            line: "2024-05-07 10:55:53,434 - myapp.db - ERROR - connection lost",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: Some(Level::Error),
            message: "connection lost",
            parts: &[("logger", "myapp.db")],
        },
        Case {
            name: "Python basicConfig",
            line: "WARNING:urllib3.connectionpool:Retrying (Retry(total=4)) after connection broken",
            time: None,
            level: Some(Level::Warn),
            message: "Retrying (Retry(total=4)) after connection broken",
            parts: &[("logger", "urllib3.connectionpool")],
        },
        Case {
            name: "Spring Boot",
            line: "2024-05-07T10:55:53.434+02:00  INFO 12345 --- [           main] o.s.b.w.embedded.tomcat.TomcatWebServer  : Tomcat started on port 8080 (http)",
            time: Some("2024-05-07T08:55:53.434Z"),
            level: Some(Level::Info),
            message: "Tomcat started on port 8080 (http)",
            parts: &[("pid", "12345"), ("thread", "main"), ("logger", "o.s.b.w.embedded.tomcat.TomcatWebServer")],
        },
        Case {
            name: "logback (time of day only)",
            line: "10:55:53.434 [main] WARN  com.example.Service - cache miss storm",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: Some(Level::Warn),
            message: "cache miss storm",
            parts: &[("thread", "main"), ("logger", "com.example.Service")],
        },
        Case {
            name: "Cassandra (level first)",
            line: "INFO  [main] 2024-05-07 10:55:53,434 StorageService.java:2740 - Node /10.0.0.1 state jump to NORMAL",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: Some(Level::Info),
            message: "Node /10.0.0.1 state jump to NORMAL",
            parts: &[("thread", "main"), ("caller", "StorageService.java:2740")],
        },
        Case {
            name: "Elasticsearch",
            line: "[2024-05-07T10:55:53,434][INFO ][o.e.n.Node               ] [node-1] started",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: Some(Level::Info),
            message: "started",
            parts: &[("logger", "o.e.n.Node"), ("thread", "node-1")],
        },
        Case {
            name: "Envoy",
            line: "[2024-05-07 10:55:53.434][12][warning][config] [source/common/config/grpc_stream.h:101] StreamAggregatedResources gRPC config stream closed",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: Some(Level::Warn),
            message: "StreamAggregatedResources gRPC config stream closed",
            parts: &[("pid", "12"), ("thread", "config"), ("caller", "source/common/config/grpc_stream.h:101")],
        },
        Case {
            name: "Ruby Logger",
            line: "E, [2024-05-07T10:55:53.434123 #12345] ERROR -- worker: job failed",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: Some(Level::Error),
            message: "job failed",
            parts: &[("logger", "worker")],
        },
        Case {
            name: "MySQL",
            line: "2024-05-07T10:55:53.434567Z 0 [Warning] [MY-010068] [Server] CA certificate ca.pem is self signed.",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: Some(Level::Warn),
            message: "CA certificate ca.pem is self signed.",
            parts: &[("pid", "0")],
        },
        Case {
            name: "CoreDNS (level only)",
            line: "[INFO] plugin/reload: Running configuration SHA512 = 591cf328cccc12bc490481273e738df5",
            time: None,
            level: Some(Level::Info),
            message: "Running configuration SHA512 = 591cf328cccc12bc490481273e738df5",
            parts: &[("logger", "plugin/reload")],
        },
        Case {
            name: "klog",
            line: "E0501 12:00:40.118204    1187 prober.go:107] \"Probe failed\" probeType=\"Liveness\"",
            time: Some("2024-05-01T12:00:40.118Z"),
            level: Some(Level::Error),
            message: "\"Probe failed\" probeType=\"Liveness\"",
            parts: &[("pid", "1187"), ("caller", "prober.go:107")],
        },
        Case {
            name: "journal with klog inside",
            line: "May 01 12:00:40 node-a kubelet[1187]: W0501 12:00:40.118204    1187 prober.go:107] \"Probe failed\"",
            time: Some("2024-05-01T12:00:40.118Z"),
            level: Some(Level::Warn),
            message: "\"Probe failed\"",
            parts: &[("host", "node-a"), ("program", "kubelet"), ("pid", "1187")],
        },
        Case {
            name: "common log format",
            line: "10.1.2.3 - - [07/May/2024:10:55:53 +0200] \"GET /healthz HTTP/1.1\" 200 2",
            time: Some("2024-05-07T08:55:53.000Z"),
            level: None,
            message: "\"GET /healthz HTTP/1.1\" 200 2",
            parts: &[],
        },
        Case {
            name: "epoch milliseconds",
            line: "1715079353434 WARN disk 91% full",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: Some(Level::Warn),
            message: "disk 91% full",
            parts: &[],
        },
        Case {
            name: "a stamp after an access log's vhost, client and request id",
            line: "shop.example.org 10.0.0.5 - req-77 - [07/May/2024:10:55:53 +0200] \"GET /cart HTTP/1.1\" 200 512",
            time: Some("2024-05-07T08:55:53.000Z"),
            level: None,
            message: "shop.example.org 10.0.0.5 - req-77 - [07/May/2024:10:55:53 +0200] \"GET /cart HTTP/1.1\" 200 512",
            parts: &[],
        },
        Case {
            name: "a load balancer's type column before its stamp",
            line: "https 2024-05-07T10:55:53.434121Z app/lb-1/50dc6c495c0c9188 10.0.0.5:2817 10.0.1.9:80 0.000 0.001 0.000 200",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: None,
            message: "https 2024-05-07T10:55:53.434121Z app/lb-1/50dc6c495c0c9188 10.0.0.5:2817 10.0.1.9:80 0.000 0.001 0.000 200",
            parts: &[],
        },
        Case {
            name: "a comment line's key and stamp (MySQL's slow log)",
            line: "# Time: 2024-05-07T10:55:53.434567Z",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: None,
            message: "# Time: 2024-05-07T10:55:53.434567Z",
            parts: &[],
        },
        Case {
            name: "thread and level joined by :: before the stamp",
            line: "MainThread::INFO::2024-05-07 10:55:53,434::vdsm::71::vds::(run) started",
            time: Some("2024-05-07T10:55:53.434Z"),
            level: None,
            message: "MainThread::INFO::2024-05-07 10:55:53,434::vdsm::71::vds::(run) started",
            parts: &[],
        },
        Case {
            name: "NX-OS: the severity in the tag, which stays in the message",
            line: "May 07 10:55:53 N7K-core-2 %ETHPORT-3-IF_DOWN_ERROR_DISABLED: Interface Ethernet3/1 is down (Error disabled)",
            time: Some("2024-05-07T10:55:53.000Z"),
            level: Some(Level::Error),
            message: "%ETHPORT-3-IF_DOWN_ERROR_DISABLED: Interface Ethernet3/1 is down (Error disabled)",
            parts: &[("host", "N7K-core-2")],
        },
        Case {
            name: "IOS through a relay: sequence number and device clock before the tag",
            line: "May 07 10:55:53 10.20.0.1 88412: *May  7 10:55:53.112: %LINK-5-CHANGED: Interface Gi0/2, changed state to administratively down",
            time: Some("2024-05-07T10:55:53.000Z"),
            level: Some(Level::Info),
            message: "*May  7 10:55:53.112: %LINK-5-CHANGED: Interface Gi0/2, changed state to administratively down",
            parts: &[("host", "10.20.0.1")],
        },
        Case {
            name: "ASA without a header",
            line: "%ASA-2-106001: Inbound TCP connection denied from 198.51.100.4/4711 to 10.0.0.5/22 flags SYN on interface outside",
            time: None,
            level: Some(Level::Fatal),
            message: "%ASA-2-106001: Inbound TCP connection denied from 198.51.100.4/4711 to 10.0.0.5/22 flags SYN on interface outside",
            parts: &[],
        },
        Case {
            name: "CEF after a syslog header",
            line: "May 07 10:55:53 udm-1 CEF:0|Ubiquiti|UniFi Network|9.4.19|201|Threat Detected and Blocked|7|proto=TCP src=10.9.8.7",
            time: Some("2024-05-07T10:55:53.000Z"),
            level: Some(Level::Error),
            message: "CEF:0|Ubiquiti|UniFi Network|9.4.19|201|Threat Detected and Blocked|7|proto=TCP src=10.9.8.7",
            parts: &[("host", "udm-1")],
        },
        Case {
            name: "a panic",
            line: "panic: runtime error: index out of range [5] with length 3",
            time: None,
            level: Some(Level::Fatal),
            message: "panic: runtime error: index out of range [5] with length 3",
            parts: &[],
        },
    ];

    #[test]
    fn every_family_of_headers() {
        let reference = parse_rfc3339(REFERENCE).map_or(Reference::None, Reference::Bound);
        let mut failures = Vec::new();
        for c in CASES {
            let h = read_at(c.line, reference);
            let got_time = h.time.map(format_rfc3339);
            let parts: Vec<(&str, &str)> = h.parts(c.line).map(|(p, v)| (p.name(), v)).collect();
            let message = h.message(c.line);
            if got_time.as_deref() != c.time
                || h.level != c.level
                || message != c.message
                || c.parts.iter().any(|p| !parts.contains(p))
            {
                failures.push(format!(
                    "{}:\n  line     {}\n  time     {:?} (want {:?})\n  level    {:?} (want {:?})\n  message  {:?}\n  want     {:?}\n  parts    {:?} (want {:?})",
                    c.name, c.line, got_time, c.time, h.level, c.level, message, c.message, parts, c.parts
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn prose_has_no_header() {
        for line in [
            "could not register node: READONLY You can't write against a read only replica.",
            "Processing order 1714568400 for customer",
            "the error budget is fine today",
            "Accepted password for alice from 10.0.0.5 port 22 ssh2",
            "back-off restarting failed container",
            "",
            "   ",
            "{\"level\":\"info\"}",
            "time=2024-05-01T12:00:00Z level=info msg=x",
            // A stamp the message mentions is not the line's.
            "backup finished at 2024-05-07T10:55:53Z without errors",
            "certificate valid until 2027-01-01 00:00:00 for host a",
            "job \"started 2024-05-07 10:55:53\" twice",
        ] {
            let h = read(line, None);
            assert!(!h.found(), "{line:?}: {h:?}");
            assert_eq!(h.time, None, "{line:?}");
            assert_eq!(h.body, 0, "{line:?}");
        }
    }
}
