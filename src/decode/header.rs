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
    w.finish(true)
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StampKind {
    Plain,
    /// BSD syslog: host and program follow.
    Syslog,
    /// klog: pid and `file.go:N]` follow.
    Klog,
    /// Redis: a role character is the level.
    Redis,
    /// Go's `log`: `YYYY/MM/DD`.
    GoLog,
    /// An epoch number.
    Epoch,
}

#[derive(Debug, Clone, Copy)]
struct Stamp {
    end: usize,
    year: Option<i32>,
    /// 0 when the stamp is a time of day only.
    month: u32,
    day: u32,
    clock: Option<(u32, u32, u32, u32)>,
    /// Seconds east of UTC.
    offset: Option<i64>,
    epoch: Option<i64>,
    level: Option<Level>,
    kind: StampKind,
}

impl Stamp {
    fn new(end: usize) -> Stamp {
        Stamp {
            end,
            year: None,
            month: 0,
            day: 0,
            clock: None,
            offset: None,
            epoch: None,
            level: None,
            kind: StampKind::Plain,
        }
    }

    /// Whether it names an instant (a date-only stamp does not).
    fn has_time(&self) -> bool {
        self.epoch.is_some() || self.clock.is_some()
    }

    fn resolve(&self, reference: Reference) -> Option<i64> {
        if let Some(e) = self.epoch {
            return Some(e);
        }
        let c = self.clock?;
        let near = matches!(reference, Reference::Near(_));
        let reference = reference.at();
        let local = if self.month == 0 {
            // A time of day: the date comes from the reference (in the
            // stamp's own zone).
            let off = self.offset.unwrap_or(0) * NS;
            return time::with_inferred_date(reference?.saturating_add(off), c).map(|t| t - off);
        } else {
            match self.year {
                Some(y) => time::from_parts(y, self.month, self.day, c.0, c.1, c.2, c.3)?,
                None => {
                    let r = reference?.saturating_add(self.offset.unwrap_or(0) * NS);
                    if near {
                        time::with_nearest_year(r, self.month, self.day, c)?
                    } else {
                        time::with_inferred_year(r, self.month, self.day, c)?
                    }
                }
            }
        };
        local.checked_sub(self.offset.unwrap_or(0) * NS)
    }
}

fn digit(b: &[u8], i: usize) -> bool {
    b.get(i).is_some_and(u8::is_ascii_digit)
}

/// Consecutive digits at `i`.
fn run(b: &[u8], i: usize) -> usize {
    b.get(i..)
        .map_or(0, |s| s.iter().take_while(|c| c.is_ascii_digit()).count())
}

/// The value of exactly `n` digits at `i`.
fn num(b: &[u8], i: usize, n: usize) -> Option<u32> {
    let s = b.get(i..i + n)?;
    s.iter().try_fold(0u32, |acc, c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

/// 1 or 2 digits at `i` (no more): (value, end).
fn num12(b: &[u8], i: usize) -> Option<(u32, usize)> {
    match run(b, i) {
        1 => Some((num(b, i, 1)?, i + 1)),
        2 => Some((num(b, i, 2)?, i + 2)),
        _ => None,
    }
}

/// Whether a stamp may end at `i`: end of text or a delimiter.
fn boundary(b: &[u8], i: usize) -> bool {
    match b.get(i) {
        None => true,
        Some(c) => {
            matches!(
                c,
                b' ' | b'\t' | b']' | b')' | b',' | b'|' | b';' | b'>' | b'"' | b'\'' | b'}'
            ) || (*c == b':' && !digit(b, i + 1))
        }
    }
}

const MONTHS: [&[u8; 3]; 12] = [
    b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov", b"dec",
];
const WEEKDAYS: [&[u8; 3]; 7] = [b"mon", b"tue", b"wed", b"thu", b"fri", b"sat", b"sun"];

/// A three-letter English month name at `i` (`May`, `MAY`, `may`), not
/// followed by another letter.
fn month_at(b: &[u8], i: usize) -> Option<u32> {
    let s = b.get(i..i + 3)?;
    if b.get(i + 3).is_some_and(u8::is_ascii_alphabetic) {
        return None;
    }
    let l = [
        s[0].to_ascii_lowercase(),
        s[1].to_ascii_lowercase(),
        s[2].to_ascii_lowercase(),
    ];
    MONTHS.iter().position(|m| **m == l).map(|p| p as u32 + 1)
}

fn weekday_at(b: &[u8], i: usize) -> bool {
    let Some(s) = b.get(i..i + 3) else {
        return false;
    };
    let l = [
        s[0].to_ascii_lowercase(),
        s[1].to_ascii_lowercase(),
        s[2].to_ascii_lowercase(),
    ];
    WEEKDAYS.contains(&&l) && !b.get(i + 3).is_some_and(u8::is_ascii_alphabetic)
}

/// `HH:MM:SS` with an optional fraction (`.`, `,`, or `:` and three
/// digits); after a date, the fields may be unpadded (`0:0:7`).
/// (h, m, s, ns), end.
fn clock(b: &[u8], i: usize) -> Option<((u32, u32, u32, u32), usize)> {
    clock_of(b, i, false)
}

fn clock_of(b: &[u8], i: usize, padded: bool) -> Option<((u32, u32, u32, u32), usize)> {
    // The common `HH:MM:SS`, read directly.
    if let Some(&[h1, h2, b':', m1, m2, b':', s1, s2]) = b.get(i..i + 8) {
        let d = |c: u8| c.wrapping_sub(b'0');
        if [h1, h2, m1, m2, s1, s2].iter().all(|c| c.is_ascii_digit()) {
            let (h, m, s) = (
                u32::from(d(h1) * 10 + d(h2)),
                u32::from(d(m1) * 10 + d(m2)),
                u32::from(d(s1) * 10 + d(s2)),
            );
            return clock_rest(b, i + 8, (h, m, s));
        }
    }
    let (h, j) = num12(b, i)?;
    if b.get(j) != Some(&b':') {
        return None;
    }
    let (m, j) = if padded {
        (num(b, j + 1, 2)?, j + 3)
    } else {
        num12(b, j + 1)?
    };
    if b.get(j) != Some(&b':') {
        return None;
    }
    let (s, k) = if padded {
        (num(b, j + 1, 2)?, j + 3)
    } else {
        num12(b, j + 1)?
    };
    clock_rest(b, k, (h, m, s))
}

/// A clock's fraction after `HH:MM:SS` (which ends at `k`).
fn clock_rest(
    b: &[u8],
    mut k: usize,
    (h, m, s): (u32, u32, u32),
) -> Option<((u32, u32, u32, u32), usize)> {
    if digit(b, k) || h > 23 || m > 59 || s > 59 {
        return None;
    }
    let mut nanos = 0;
    match b.get(k) {
        Some(b'.' | b',') if digit(b, k + 1) => {
            let n = run(b, k + 1);
            nanos = frac(b, k + 1, n);
            k += 1 + n;
        }
        Some(b':') if (1..=3).contains(&run(b, k + 1)) && boundary(b, k + 1 + run(b, k + 1)) => {
            // `22:15:29:606`, milliseconds, not always padded (`:11`).
            let n = run(b, k + 1);
            nanos = num(b, k + 1, n).unwrap_or(0) * 1_000_000;
            k += 1 + n;
        }
        _ => {}
    }
    Some(((h, m, s, nanos), k))
}

/// The nanoseconds of a fraction of `n` digits at `i` (digits past the
/// ninth ignored).
fn frac(b: &[u8], i: usize, n: usize) -> u32 {
    let n9 = n.min(9);
    let v = b.get(i..i + n9).map_or(0, |d| {
        d.iter().fold(0u32, |v, c| v * 10 + u32::from(c - b'0'))
    });
    v * 10u32.pow((9 - n9) as u32)
}

/// A zone after a clock: `Z`, `+02:00`, `+0200`, `+02` attached, or
/// after one space `UTC`, `GMT`, `+0200`, `-07:00` or a common
/// abbreviation. (seconds east of UTC, end).
fn zone(b: &[u8], i: usize) -> Option<(i64, usize)> {
    match b.get(i) {
        Some(b'Z' | b'z') if boundary(b, i + 1) => return Some((0, i + 1)),
        Some(b'+' | b'-') => {
            if let Some(z) = offset(b, i) {
                return Some(z);
            }
        }
        Some(b' ') => {
            let j = i + 1;
            if matches!(b.get(j), Some(b'+' | b'-')) {
                return offset(b, j);
            }
            let n = b.get(j..).map_or(0, |s| {
                s.iter().take_while(|c| c.is_ascii_uppercase()).count()
            });
            if (1..=5).contains(&n) && boundary(b, j + n) {
                let name = b.get(j..j + n)?;
                if let Some(z) = abbreviation(name) {
                    // `UTC+3` and the like.
                    if matches!(b.get(j + n), Some(b'+' | b'-')) {
                        return None;
                    }
                    return Some((z, j + n));
                }
            }
        }
        _ => {}
    }
    None
}

/// `+HH:MM`, `+HHMM` or `+HH` at `i`, followed by a boundary.
fn offset(b: &[u8], i: usize) -> Option<(i64, usize)> {
    let sign = if b.get(i)? == &b'-' { -1 } else { 1 };
    let h = num(b, i + 1, 2)?;
    let (m, end) = if b.get(i + 3) == Some(&b':') {
        (num(b, i + 4, 2)?, i + 6)
    } else if run(b, i + 3) == 2 {
        (num(b, i + 3, 2)?, i + 5)
    } else {
        (0, i + 3)
    };
    if h > 23 || m > 59 || digit(b, end) || !boundary(b, end) {
        return None;
    }
    Some((sign * i64::from(h * 3600 + m * 60), end))
}

/// Zone abbreviations whose offset is unambiguous enough to rely on
/// (`CST` is read as US Central). Others are not zones here.
fn abbreviation(name: &[u8]) -> Option<i64> {
    const H: i64 = 3600;
    Some(match name {
        b"UTC" | b"GMT" | b"UT" | b"Z" | b"WET" => 0,
        b"WEST" | b"CET" | b"MET" => H,
        b"CEST" | b"MEST" | b"EET" => 2 * H,
        b"EEST" | b"MSK" => 3 * H,
        b"PKT" => 5 * H,
        b"ICT" | b"WIB" => 7 * H,
        b"HKT" | b"SGT" | b"AWST" => 8 * H,
        b"JST" | b"KST" => 9 * H,
        b"AEST" => 10 * H,
        b"AEDT" => 11 * H,
        b"NZST" => 12 * H,
        b"NZDT" => 13 * H,
        b"BRT" | b"ART" => -3 * H,
        b"EDT" => -4 * H,
        b"EST" | b"CDT" => -5 * H,
        b"CST" | b"MDT" => -6 * H,
        b"MST" | b"PDT" => -7 * H,
        b"PST" | b"AKDT" => -8 * H,
        b"AKST" => -9 * H,
        b"HST" => -10 * H,
        _ => return None,
    })
}

/// Adds an optional zone after the clock, then checks the boundary.
fn finish_stamp(b: &[u8], mut st: Stamp) -> Option<Stamp> {
    if let Some((off, end)) = zone(b, st.end) {
        st.offset = Some(off);
        st.end = end;
    }
    boundary(b, st.end).then_some(st)
}

/// A level joined to a stamp by colons: `:DEBUG:` or `::WARNING::` at
/// `i` (one or two colons each side, a level word between). The level and
/// where the message starts.
fn colon_level(b: &[u8], i: usize) -> Option<(Level, usize)> {
    let colons = |j: usize| {
        b[j.min(b.len())..]
            .iter()
            .take(2)
            .take_while(|c| **c == b':')
            .count()
    };
    let before = colons(i);
    if before == 0 {
        return None;
    }
    let start = i + before;
    let len = b[start..]
        .iter()
        .take(12)
        .take_while(|c| c.is_ascii_alphabetic())
        .count();
    let word = &b[start..start + len];
    let after = colons(start + len);
    if after != before || !severity::strong_word(word) {
        return None;
    }
    let l = severity::header_word(word)?;
    let mut e = start + len + after;
    while b.get(e).is_some_and(|c| is_space(*c)) {
        e += 1;
    }
    Some((l, e))
}

fn valid_date(y: Option<i32>, m: u32, d: u32) -> bool {
    (1..=12).contains(&m) && (1..=31).contains(&d) && y.is_none_or(|y| (1970..=2200).contains(&y))
}

/// A stamp starting at `i`. `first`: the stamp is the line's first
/// token, where a bare time of day is accepted too.
fn stamp_at(b: &[u8], i: usize, first: bool) -> Option<Stamp> {
    let c = *b.get(i)?;
    if c.is_ascii_digit() {
        numeric(b, i, first)
    } else if c.is_ascii_alphabetic() {
        named(b, i)
    } else {
        None
    }
}

fn numeric(b: &[u8], i: usize, first: bool) -> Option<Stamp> {
    match run(b, i) {
        4 => year_first(b, i),
        8 => compact(b, i),
        6 => yymmdd(b, i),
        1 | 2 => two_digits(b, i, first),
        10 | 13 | 16 | 19 => epoch(b, i),
        _ => None,
    }
}

/// `YYYY-MM-DD[T ]HH:MM:SS…`, `YYYY-MM-DD-HH.MM.SS.ffffff`,
/// `YYYY/MM/DD HH:MM:SS`, `YYYY.MM.DD[ HH:MM:SS]`, and date-only forms.
fn year_first(b: &[u8], i: usize) -> Option<Stamp> {
    let y = i32::try_from(num(b, i, 4)?).ok()?;
    let sep = *b.get(i + 4)?;
    if !matches!(sep, b'-' | b'/' | b'.') {
        return None;
    }
    let (mo, j) = num12(b, i + 5)?;
    if b.get(j) != Some(&sep) {
        return None;
    }
    let (d, k) = num12(b, j + 1)?;
    if !valid_date(Some(y), mo, d) {
        return None;
    }
    let mut st = Stamp::new(k);
    st.year = Some(y);
    st.month = mo;
    st.day = d;
    if sep == b'/' {
        st.kind = StampKind::GoLog;
    }
    match b.get(k) {
        Some(b'T' | b' ' | b'_') | Some(b'-') if sep != b'.' || b.get(k) == Some(&b' ') => {
            if let Some((c, end)) = clock(b, k + 1) {
                st.clock = Some(c);
                st.end = end;
                return finish_stamp(b, st);
            }
            if b.get(k) == Some(&b' ') && b.get(k + 1) == Some(&b'-') && b.get(k + 2) == Some(&b' ')
            {
                // Gin's `2022/02/07 - 10:49:33`.
                if let Some((c, end)) = clock(b, k + 3) {
                    st.clock = Some(c);
                    st.end = end;
                    return finish_stamp(b, st);
                }
            }
            if b.get(k) == Some(&b'-') {
                // DB2 and BGL: `2005-06-03-15.42.50.675872`.
                if let Some((c, end)) = dotted_clock(b, k + 1) {
                    st.clock = Some(c);
                    st.end = end;
                    return boundary(b, end).then_some(st);
                }
            }
        }
        _ => {}
    }
    // A date alone (`2005.06.03`): a header element without a time.
    (boundary(b, k) && b.get(k) != Some(&b':')).then_some(st)
}

/// `HH.MM.SS.ffffff`.
fn dotted_clock(b: &[u8], i: usize) -> Option<((u32, u32, u32, u32), usize)> {
    let h = num(b, i, 2)?;
    let m = num(b, i + 3, 2)?;
    let s = num(b, i + 6, 2)?;
    if b.get(i + 2) != Some(&b'.') || b.get(i + 5) != Some(&b'.') || h > 23 || m > 59 || s > 59 {
        return None;
    }
    let (nanos, k) = dot_fraction(b, i + 8);
    Some(((h, m, s, nanos), k))
}

/// An optional `.fraction` at `k`: (nanoseconds, end).
fn dot_fraction(b: &[u8], k: usize) -> (u32, usize) {
    if b.get(k) == Some(&b'.') && digit(b, k + 1) {
        let n = run(b, k + 1);
        (frac(b, k + 1, n), k + 1 + n)
    } else {
        (0, k)
    }
}

/// `YYYYMMDD-HH:MM:SS:mmm`, `YYYYMMDD HH:MM:SS`, ISO basic
/// `YYYYMMDDTHHMMSS[.f][Z]`.
fn compact(b: &[u8], i: usize) -> Option<Stamp> {
    let y = i32::try_from(num(b, i, 4)?).ok()?;
    let (mo, d) = (num(b, i + 4, 2)?, num(b, i + 6, 2)?);
    if !valid_date(Some(y), mo, d) {
        return None;
    }
    let mut st = Stamp::new(i + 8);
    st.year = Some(y);
    st.month = mo;
    st.day = d;
    let k = i + 8;
    match b.get(k) {
        Some(b'-' | b' ' | b'T') => {
            if let Some((c, end)) = clock(b, k + 1) {
                st.clock = Some(c);
                st.end = end;
                return finish_stamp(b, st);
            }
            if b.get(k) == Some(&b'T') && run(b, k + 1) == 6 {
                let (h, m, s) = (num(b, k + 1, 2)?, num(b, k + 3, 2)?, num(b, k + 5, 2)?);
                if h > 23 || m > 59 || s > 59 {
                    return None;
                }
                let (nanos, end) = dot_fraction(b, k + 7);
                st.clock = Some((h, m, s, nanos));
                st.end = end;
                return finish_stamp(b, st);
            }
            None
        }
        _ => None,
    }
}

/// HDFS's `YYMMDD HHMMSS` (also `YYMMDD HH:MM:SS`).
fn yymmdd(b: &[u8], i: usize) -> Option<Stamp> {
    let (yy, mo, d) = (num(b, i, 2)?, num(b, i + 2, 2)?, num(b, i + 4, 2)?);
    let y = if yy < 70 { 2000 + yy } else { 1900 + yy } as i32;
    if !valid_date(Some(y), mo, d) || b.get(i + 6) != Some(&b' ') {
        return None;
    }
    let k = i + 7;
    let mut st = Stamp::new(k);
    st.year = Some(y);
    st.month = mo;
    st.day = d;
    if run(b, k) == 6 {
        let (h, m, s) = (num(b, k, 2)?, num(b, k + 2, 2)?, num(b, k + 4, 2)?);
        if h > 23 || m > 59 || s > 59 || !boundary(b, k + 6) {
            return None;
        }
        st.clock = Some((h, m, s, 0));
        st.end = k + 6;
        return Some(st);
    }
    let (c, end) = clock(b, k)?;
    st.clock = Some(c);
    st.end = end;
    finish_stamp(b, st)
}

/// Stamps that start with one or two digits: a time of day, `MM-DD
/// HH:MM:SS` (logcat, stern), `YY/MM/DD`, `MM/DD/YYYY`, `DD.MM.YYYY`,
/// `MM.DD HH:MM:SS`, `DD Mon YYYY HH:MM:SS` (Redis), `DD-Mon-YYYY` and the
/// common log format's `DD/Mon/YYYY:HH:MM:SS ±zzzz`.
fn two_digits(b: &[u8], i: usize, first: bool) -> Option<Stamp> {
    let (a, j) = num12(b, i)?;
    let sep = *b.get(j)?;
    if sep == b':' {
        if !first {
            return None;
        }
        let (c, end) = clock_of(b, i, true)?;
        let mut st = Stamp::new(end);
        st.clock = Some(c);
        return finish_stamp(b, st);
    }
    if !matches!(sep, b'-' | b'/' | b'.' | b' ') {
        return None;
    }
    if let Some(mo) = month_at(b, j + 1) {
        // DD Mon YYYY, DD-Mon-YYYY, DD/Mon/YYYY:
        let k = j + 4;
        let y_sep = *b.get(k)?;
        if sep == b' ' && y_sep == b' ' && run(b, k + 1) == 2 && b.get(k + 3) == Some(&b':') {
            // Redis without a year (`30 May 12:50:13.457`, before 7.x):
            // the year comes from the reference like syslog's.
            if !valid_date(None, mo, a) {
                return None;
            }
            let (c, end) = clock(b, k + 1)?;
            let mut st = Stamp::new(end);
            st.month = mo;
            st.day = a;
            st.clock = Some(c);
            st.kind = StampKind::Redis;
            return finish_stamp(b, st);
        }
        if y_sep != sep || run(b, k + 1) != 4 {
            return None;
        }
        let y = i32::try_from(num(b, k + 1, 4)?).ok()?;
        if !valid_date(Some(y), mo, a) {
            return None;
        }
        let t_sep = *b.get(k + 5)?;
        if !(t_sep == b' ' || (sep == b'/' && t_sep == b':')) {
            return None;
        }
        let (c, end) = clock(b, k + 6)?;
        let mut st = Stamp::new(end);
        st.year = Some(y);
        st.month = mo;
        st.day = a;
        st.clock = Some(c);
        if sep == b' ' {
            st.kind = StampKind::Redis;
        }
        return finish_stamp(b, st);
    }
    if sep == b' ' {
        return None;
    }
    let (m2, k) = num12(b, j + 1)?;
    let mut st = Stamp::new(k);
    match (b.get(k), run(b, k + 1)) {
        (Some(s), 4) if *s == sep => {
            // MM/DD/YYYY (DD/MM when the first can only be a day),
            // DD.MM.YYYY.
            let y = i32::try_from(num(b, k + 1, 4)?).ok()?;
            let (mo, d) = if sep == b'.' || a > 12 {
                (m2, a)
            } else {
                (a, m2)
            };
            st.year = Some(y);
            st.month = mo;
            st.day = d;
            st.end = k + 5;
        }
        (Some(s), 2) if *s == sep && sep == b'/' => {
            // YY/MM/DD (log4j's yy/MM/dd); MM/DD/YY when the middle can
            // only be a day (`01/25/22`, ZoneMinder, Windows).
            let last = num(b, k + 1, 2)?;
            let (y, mo, d) = if m2 > 12 && a <= 12 {
                (last, a, m2)
            } else {
                (a, m2, last)
            };
            st.year = Some(2000 + i32::try_from(y).ok()?);
            st.month = mo;
            st.day = d;
            st.end = k + 3;
        }
        (Some(b' '), _) if sep != b'/' => {
            // MM-DD or MM.DD without a year (DD.MM when it must be).
            let (mo, d) = if a > 12 { (m2, a) } else { (a, m2) };
            st.month = mo;
            st.day = d;
        }
        _ => return None,
    }
    if !valid_date(st.year, st.month, st.day) || b.get(st.end) != Some(&b' ') {
        return None;
    }
    let (c, end) = clock(b, st.end + 1)?;
    st.clock = Some(c);
    st.end = end;
    finish_stamp(b, st)
}

/// Seconds (10 digits, optionally with a fraction), milliseconds (13),
/// microseconds (16) or nanoseconds (19) since the epoch, between 2001
/// and 2200.
fn epoch(b: &[u8], i: usize) -> Option<Stamp> {
    let n = run(b, i);
    let mut v: i64 = 0;
    for k in 0..n {
        v = v.checked_mul(10)?.checked_add(i64::from(b[i + k] - b'0'))?;
    }
    let mut end = i + n;
    let ns = match n {
        10 => {
            let mut ns = v.checked_mul(NS)?;
            if b.get(end) == Some(&b'.') && digit(b, end + 1) {
                let f = run(b, end + 1);
                ns = ns.checked_add(i64::from(frac(b, end + 1, f)))?;
                end += 1 + f;
            }
            ns
        }
        13 => v.checked_mul(1_000_000)?,
        16 => v.checked_mul(1_000)?,
        _ => v,
    };
    if !boundary(b, end) || b.get(end) == Some(&b':') {
        return None;
    }
    if !(super::SANE_TIME_MIN..super::SANE_TIME_MAX).contains(&ns) {
        return None;
    }
    let mut st = Stamp::new(end);
    st.epoch = Some(ns);
    st.kind = StampKind::Epoch;
    Some(st)
}

/// Stamps that start with a letter: klog's `I0501 12:00:40.118204`,
/// syslog's `May  1 12:00:40` (optionally with a year), Java's `May 07,
/// 2024 10:55:53 AM`, ctime's `Sun Dec 04 04:47:44 2005` (and `date`'s
/// `Tue May  7 10:55:53 UTC 2024`), RFC 2822's `Tue, 07 May 2024 10:55:53
/// GMT`.
fn named(b: &[u8], i: usize) -> Option<Stamp> {
    let c = b[i];
    if matches!(c, b'I' | b'W' | b'E' | b'F') && run(b, i + 1) == 4 && b.get(i + 5) == Some(&b' ') {
        let (mo, d) = (num(b, i + 1, 2)?, num(b, i + 3, 2)?);
        let (cl, end) = clock(b, i + 6)?;
        if !valid_date(None, mo, d) || !boundary(b, end) {
            return None;
        }
        let mut st = Stamp::new(end);
        st.month = mo;
        st.day = d;
        st.clock = Some(cl);
        st.level = severity::letter(c);
        st.kind = StampKind::Klog;
        return Some(st);
    }
    if let Some(mo) = month_at(b, i) {
        return month_first(b, i, mo);
    }
    if weekday_at(b, i) {
        let j = i + 3;
        if b.get(j) == Some(&b',') && b.get(j + 1) == Some(&b' ') {
            // RFC 2822: Www, DD Mon YYYY HH:MM:SS zone.
            let st = two_digits(b, j + 2, false)?;
            return (st.kind == StampKind::Redis).then_some(Stamp {
                kind: StampKind::Plain,
                ..st
            });
        }
        if b.get(j) != Some(&b' ') {
            return None;
        }
        let mo = month_at(b, j + 1)?;
        let mut st = month_first(b, j + 1, mo)?;
        if st.year.is_none() {
            // ctime: the year after the clock (and date's zone before it).
            let mut k = st.end;
            if let Some((off, end)) = zone(b, k) {
                st.offset = Some(off);
                k = end;
            }
            if b.get(k) == Some(&b' ') && run(b, k + 1) == 4 && boundary(b, k + 5) {
                st.year = Some(i32::try_from(num(b, k + 1, 4)?).ok()?);
                st.end = k + 5;
            }
        }
        st.kind = StampKind::Plain;
        return Some(st);
    }
    None
}

/// `Mon DD HH:MM:SS`, `Mon DD YYYY HH:MM:SS`, `Mon DD, YYYY HH:MM:SS [AM|PM]`.
fn month_first(b: &[u8], i: usize, mo: u32) -> Option<Stamp> {
    let mut j = i + 3;
    if b.get(j) != Some(&b' ') {
        return None;
    }
    j += 1;
    if b.get(j) == Some(&b' ') {
        j += 1;
    }
    let (d, mut k) = num12(b, j)?;
    let mut st = Stamp::new(k);
    st.month = mo;
    st.day = d;
    st.kind = StampKind::Syslog;
    let comma = b.get(k) == Some(&b',');
    if comma {
        k += 1;
    }
    if b.get(k) != Some(&b' ') {
        return None;
    }
    if run(b, k + 1) == 4 && b.get(k + 5) == Some(&b' ') {
        st.year = Some(i32::try_from(num(b, k + 1, 4)?).ok()?);
        k += 5;
    } else if comma {
        return None;
    }
    let (mut c, end) = clock(b, k + 1)?;
    st.end = end;
    if comma {
        st.kind = StampKind::Plain;
        // Java's util.logging: a 12-hour clock.
        match b.get(end + 1..end + 3) {
            Some(b"AM") | Some(b"PM") if b.get(end) == Some(&b' ') => {
                if c.0 == 12 {
                    c.0 = 0;
                }
                if b.get(end + 1) == Some(&b'P') {
                    c.0 += 12;
                }
                st.end = end + 3;
            }
            _ => {}
        }
    }
    st.clock = Some(c);
    if !valid_date(st.year, mo, d) {
        return None;
    }
    finish_stamp(b, st)
}

// ---------------------------------------------------------------------
// The walk

/// A byte range of the line.
type Span = (usize, usize);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Last {
    Start,
    Stamp,
    Level,
    Pid,
    Group,
    Logger,
    Sep,
    /// `--` (Ruby's Logger puts the program after it).
    Dashes,
    Filler,
    /// A group that is not known to belong to the header yet.
    PendingGroup,
}

struct Walker<'b> {
    b: &'b [u8],
    lim: usize,
    reference: Reference,
    h: Header,
    /// End of the last element known to belong to the header.
    committed: usize,
    /// Parts of pending elements (committed with them).
    pending: [(Option<Part>, usize, usize); 4],
    n_pending: usize,
    /// Pending elements exist (fillers, groups) after `committed`.
    has_pending: bool,
    anchored: bool,
    last: Last,
    /// The previous element ended here (for gaps and adjacency).
    prev_end: usize,
    pipe: bool,
    tokens: usize,
    /// A stamp gave the time (later ones are header elements only).
    timed: bool,
    stamp_kind: Option<StampKind>,
    /// The level came from a single letter.
    letter_level: bool,
    /// The first token was identifier-like (a column).
    first_filler: bool,
    /// Words were passed before any anchor (only an epoch may follow).
    prose_before: bool,
    /// The walk found no header after all.
    abort: bool,
    /// `|` separators seen.
    pipes: u8,
}

fn is_space(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

/// A token that reads like an identifier rather than prose: it has a
/// digit or punctuation, is all capitals, or is CamelCase.
fn filler_like(t: &[u8]) -> bool {
    if t.is_empty() {
        return false;
    }
    if t.iter().any(|c| {
        c.is_ascii_digit()
            || matches!(
                c,
                b'.' | b'_'
                    | b'/'
                    | b'@'
                    | b'$'
                    | b'#'
                    | b'='
                    | b'*'
                    | b'+'
                    | b'-'
                    | b':'
                    | b'('
                    | b')'
                    | b'<'
                    | b'>'
                    | b'['
                    | b']'
                    | b'{'
                    | b'}'
                    | b'\\'
            )
    }) {
        return true;
    }
    let letters = t.iter().all(u8::is_ascii_alphabetic);
    if !letters {
        // Non-ASCII words, quotes: prose.
        return false;
    }
    let upper = t.iter().filter(|c| c.is_ascii_uppercase()).count();
    (upper == t.len() && t.len() >= 2)
        || (upper >= 2 && t[0].is_ascii_uppercase())
        || (upper >= 1 && t[0].is_ascii_lowercase())
}

/// Whether `t` (a tag without its colon) names a program, logger or
/// caller: `sshd[123]`, `dfs.DataNode$PacketResponder`, `WindowManager`,
/// `pool.go:762`, `31#31`, `felix`-like lowercase words excluded.
fn tag_like(t: &[u8]) -> bool {
    if t.is_empty() || t.len() > 96 || t.iter().any(|c| is_space(*c) || *c == b'"') {
        return false;
    }
    if !(t[0].is_ascii_alphanumeric() || matches!(t[0], b'_' | b'[' | b'(' | b'/' | b'.' | b'<')) {
        return false;
    }
    filler_like(t)
}

/// A Java class or logger name: `org.apache.catalina.Foo.log`, dotted at
/// least twice, identifier characters only.
fn java_like(t: &[u8]) -> bool {
    t.first().is_some_and(u8::is_ascii_alphabetic)
        && t.iter().filter(|c| **c == b'.').count() >= 2
        && t.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'$'))
        && !t.ends_with(b".")
}

/// A caller: `file.ext:123` (or `path/file.ext:123`) with a source
/// file's extension.
fn caller_like(t: &[u8]) -> bool {
    let Some(colon) = t.iter().rposition(|c| *c == b':') else {
        return false;
    };
    let (f, l) = (&t[..colon], &t[colon + 1..]);
    !l.is_empty() && l.iter().all(u8::is_ascii_digit) && source_file(f)
}

/// `path/file.ext` with a source file's extension (which tells `file.go`
/// from `host.example.com`).
fn source_file(f: &[u8]) -> bool {
    let Some(dot) = f.iter().rposition(|c| *c == b'.') else {
        return false;
    };
    let ext = &f[dot + 1..];
    if dot == 0 || ext.is_empty() || ext.len() > 6 {
        return false;
    }
    let mut buf = [0u8; 6];
    buf[..ext.len()].copy_from_slice(ext);
    buf.make_ascii_lowercase();
    let known = matches!(
        &buf[..ext.len()],
        b"go"
            | b"java"
            | b"py"
            | b"rs"
            | b"c"
            | b"cc"
            | b"cpp"
            | b"cxx"
            | b"h"
            | b"hh"
            | b"hpp"
            | b"js"
            | b"mjs"
            | b"cjs"
            | b"ts"
            | b"rb"
            | b"scala"
            | b"kt"
            | b"cs"
            | b"php"
            | b"ex"
            | b"exs"
            | b"erl"
            | b"swift"
            | b"m"
            | b"mm"
            | b"lua"
            | b"pl"
            | b"sh"
            | b"groovy"
            | b"clj"
            | b"dart"
            | b"zig"
            | b"vb"
            | b"fs"
    );
    known
        && f.iter().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'/' | b'-' | b'$' | b'<' | b'>')
        })
}

impl<'b> Walker<'b> {
    fn new(b: &'b [u8], reference: Reference) -> Walker<'b> {
        Walker {
            b,
            lim: b.len().min(SCAN_BYTES),
            reference,
            h: Header::default(),
            committed: 0,
            pending: [(None, 0, 0); 4],
            n_pending: 0,
            has_pending: false,
            anchored: false,
            last: Last::Start,
            prev_end: 0,
            pipe: false,
            tokens: 0,
            timed: false,
            stamp_kind: None,
            letter_level: false,
            first_filler: false,
            prose_before: false,
            abort: false,
            pipes: 0,
        }
    }

    fn token_end(&self, i: usize) -> usize {
        let rest = self.b.get(i..).unwrap_or_default();
        let n = if self.pipe {
            memchr::memchr3(b' ', b'\t', b'|', rest)
        } else {
            memchr::memchr2(b' ', b'\t', rest)
        };
        i + n.unwrap_or(rest.len())
    }

    /// Commits every pending element and `end`'s element with it.
    fn commit(&mut self, end: usize) {
        for k in 0..self.n_pending {
            if let (Some(p), a, b) = self.pending[k] {
                self.h.push(p, a, b);
            }
        }
        self.n_pending = 0;
        self.has_pending = false;
        self.committed = self.committed.max(end);
    }

    /// A pending element (a filler has no part until something closes
    /// it). Only the last few are remembered; older ones keep no part.
    fn pend(&mut self, part: Option<Part>, a: usize, b: usize) {
        if self.n_pending == self.pending.len() {
            self.pending.copy_within(1.., 0);
            self.n_pending -= 1;
        }
        self.pending[self.n_pending] = (part, a, b);
        self.n_pending += 1;
        self.has_pending = true;
    }

    /// The last pending element is an address (`10.1.0.9:52114`): digits
    /// first, then dots or colons (a pid is digits only).
    fn pending_is_address(&self) -> bool {
        if self.n_pending == 0 {
            return false;
        }
        let (_, a, e) = self.pending[self.n_pending - 1];
        let t = self.b.get(a..e).unwrap_or_default();
        t.first().is_some_and(u8::is_ascii_digit) && t.iter().any(|c| matches!(c, b'.' | b':'))
    }

    fn has_logger(&self) -> bool {
        self.h.parts[..usize::from(self.h.n_parts)]
            .iter()
            .any(|(p, _, _)| *p == Some(Part::Logger))
    }

    /// Names the last pending element when it is a filler that a
    /// separator, a column gap or a group closes: the logger or component.
    fn close_filler(&mut self) {
        if self.last == Last::Filler && self.n_pending > 0 {
            let k = self.n_pending - 1;
            if self.pending[k].0.is_none() {
                self.pending[k].0 = Some(Part::Logger);
            }
        }
    }

    fn stamp_found(&mut self, st: &Stamp, start: usize, end: usize) {
        if self.prose_before && !self.anchored && st.kind != StampKind::Epoch {
            self.abort = true;
            return;
        }
        if !self.timed && st.has_time() {
            self.timed = true;
            self.h.time = st.resolve(self.reference);
            self.h.stamp = Some((start, end));
            self.h.yearless = st.epoch.is_none() && st.year.is_none() && st.month != 0;
            self.h.dateless = st.epoch.is_none() && st.month == 0;
            self.h.zoneless = st.epoch.is_none() && st.offset.is_none();
            self.stamp_kind = Some(st.kind);
        }
        if self.h.level.is_none() {
            self.h.level = st.level;
        }
        self.anchored = true;
        self.last = Last::Stamp;
        self.commit(end);
    }

    fn level_found(&mut self, l: Level, end: usize, letter: bool) {
        if self.prose_before && !self.anchored {
            self.abort = true;
            return;
        }
        self.letter_level = letter;
        self.h.level = Some(l);
        self.anchored = true;
        self.last = Last::Level;
        self.commit(end);
    }

    /// Whether an epoch number here is a time rather than a count: before
    /// any level or other stamp, and near the reference when there is
    /// one.
    fn epoch_plausible(&self, st: &Stamp) -> bool {
        if self.h.level.is_some() || self.timed {
            return false;
        }
        st.epoch.is_none_or(|e| self.reference.admits(e))
    }

    fn walk(&mut self, from: usize) {
        let b = self.b;
        let mut i = from;
        while i < b.len() && is_space(b[i]) {
            i += 1;
        }
        if from == 0 {
            for (start, l) in ERROR_STARTS {
                if b[i..].starts_with(start) {
                    self.h.level = Some(*l);
                    self.h.kind = Kind::Text;
                    self.anchored = true;
                    return;
                }
            }
        }
        // A syslog priority: `<34>` (and RFC 5424's version after it).
        if b.get(i) == Some(&b'<') {
            let n = run(b, i + 1);
            if (1..=3).contains(&n) && b.get(i + 1 + n) == Some(&b'>') {
                if let Some(pri) = num(b, i + 1, n).filter(|p| *p <= 191) {
                    self.h.level = Some(Level::from_syslog_priority(pri));
                    self.anchored = true;
                    i += n + 2;
                    self.commit(i);
                    if b.get(i) == Some(&b'1') && b.get(i + 1) == Some(&b' ') {
                        self.rfc5424(i + 2);
                        return;
                    }
                    self.last = Last::Level;
                }
            }
        }
        self.prev_end = i;
        while i < self.lim && self.tokens < MAX_TOKENS {
            let gap_start = i;
            while i < b.len() && is_space(b[i]) {
                i += 1;
            }
            if i >= self.lim {
                break;
            }
            let gap = &b[gap_start..i];
            // A column gap (a tab, or two spaces or more) after a filler
            // that follows the level closes it: a component column.
            if self.last == Last::Filler
                && self.h.level.is_some()
                && (gap.len() >= 2 || gap.contains(&b'\t'))
            {
                self.close_filler();
                self.commit(gap_start);
                self.last = Last::Logger;
            }
            self.tokens += 1;
            if self.abort {
                return;
            }
            let c = b[i];
            // Separators.
            if c == b'|' {
                self.pipe = true;
                self.pipes += 1;
                if self.pipes > 3 {
                    // A pipe-separated header has a few fields; later pipes
                    // are the message's (`tryToReload…|3786|0|0`).
                    break;
                }
                if self.anchored || self.has_pending {
                    self.close_filler();
                    self.commit(i);
                }
                i += 1;
                self.last = Last::Sep;
                self.prev_end = i;
                continue;
            }
            if c == b',' && self.last == Last::Stamp {
                i += 1;
                self.prev_end = i;
                continue;
            }
            let end = self.token_end(i);
            let tok = &b[i..end];
            if (tok.iter().all(|c| *c == b'-') && tok.len() <= 3 || tok == b":" || tok == b"::")
                && !self.pipe
            {
                if self.anchored
                    && self.h.level.is_some()
                    && matches!(self.last, Last::Group | Last::Logger)
                {
                    // `LEVEL [thread] - message`: the header ends here.
                    self.commit(end);
                    break;
                }
                if self.anchored
                    && self.last == Last::Filler
                    && self.h.level.is_some()
                    && self.pending_is_address()
                {
                    // `[ERR] 10.1.0.9:52114 - cid:12 - …`: an address is
                    // no logger; the message starts at it.
                    break;
                }
                if self.anchored || self.has_pending {
                    if self.has_logger() {
                        if self.has_pending {
                            // `CSI    00000008@… PopulateKey - Begin`: past
                            // the logger's column, `X - Y` is the message.
                            break;
                        }
                    } else {
                        self.close_filler();
                    }
                    self.commit(i);
                }
                self.last = if tok == b"--" {
                    Last::Dashes
                } else {
                    Last::Sep
                };
                i = end;
                self.prev_end = i;
                continue;
            }
            // A stamp (bracketed too).
            if let Some((st, s_end, logger)) = self.stamp_here(i) {
                if st.kind == StampKind::Epoch && !self.epoch_plausible(&st) {
                    // A count, not a time: a filler or the message.
                } else {
                    self.stamp_found(&st, i, s_end);
                    if let Some((a, e)) = logger {
                        self.h.push(Part::Logger, a, e);
                    }
                    i = s_end;
                    self.prev_end = i;
                    let syslog = st.kind == StampKind::Syslog
                        || (self.h.level.is_none() && self.program_follows(i));
                    if syslog && self.syslog_rest(i) {
                        return;
                    }
                    if let Some((l, e)) = colon_level(b, i) {
                        // `stamp:DEBUG:msg`, `stamp::WARNING::msg` (Python
                        // and sabnzbd-style colon-joined headers).
                        self.level_found(l, e, false);
                        i = e;
                        self.prev_end = i;
                        self.commit(i);
                        continue;
                    }
                    match st.kind {
                        StampKind::Klog => {
                            self.klog_rest(i);
                            return;
                        }
                        StampKind::Redis => {
                            let j = i + 1;
                            if let Some(&role) = b.get(j) {
                                let lvl = match role {
                                    b'.' | b'-' => Some(Level::Debug),
                                    b'*' => Some(Level::Info),
                                    b'#' => Some(Level::Warn),
                                    _ => None,
                                };
                                if let (Some(l), true) =
                                    (lvl, b.get(j + 1).is_none_or(|c| is_space(*c)))
                                {
                                    self.level_found(l, j + 1, false);
                                    i = j + 1;
                                    self.prev_end = i;
                                }
                            }
                        }
                        _ => {}
                    }
                    continue;
                }
            }
            // Bracket groups: a level, a pid, a thread or context.
            if c == b'[' || c == b'<' {
                match self.group(i) {
                    Some(e) => {
                        i = e;
                        self.prev_end = i;
                        continue;
                    }
                    None if self.anchored => break,
                    None => return,
                }
            }
            // A level word; after a letter's level, the word repeats it
            // (Ruby's `E, [stamp #pid] ERROR -- `).
            if let Some((l, l_end)) = self.level_token(i, end) {
                let echo = self.letter_level && self.last == Last::Stamp;
                if self.h.level.is_none() || echo {
                    if echo {
                        self.commit(l_end);
                        self.last = Last::Level;
                    } else {
                        self.level_found(
                            l,
                            l_end,
                            l_end == i + 1 || self.b.get(i + 1) == Some(&b','),
                        );
                    }
                    i = l_end;
                    self.prev_end = i;
                    if self.python_logger(i) {
                        break;
                    }
                    continue;
                }
            }
            // A tag: `prog[pid]:`, `org.foo.Bar:`, `pool.go:762:`, `31#31:`.
            if tok.len() > 1 && tok.last() == Some(&b':') {
                let t = &tok[..tok.len() - 1];
                if t.iter().all(u8::is_ascii_digit) {
                    if self.has_pending && self.last == Last::Filler && self.anchored {
                        // `felix/sync_client.go 356:`: a caller in two tokens.
                        self.relabel_last_pending(Part::Caller, end - 1);
                        self.commit(end);
                    }
                    break;
                }
                let part = tag_part(t);
                if tag_like(t)
                    && !(part == Part::Logger
                        && self.anchored
                        && (matches!(self.last, Last::Logger) || self.h.level.is_none()))
                {
                    if self.anchored {
                        self.tag_parts(part, i, end - 1);
                        self.commit(end);
                        self.last = Last::Logger;
                        break;
                    }
                    // Before any stamp or level (`redis: 2024/05/01 …`).
                    self.pend(Some(part), i, end - 1);
                    self.last = Last::Filler;
                    i = end;
                    self.prev_end = i;
                    continue;
                }
                let word = t.len() <= 32
                    && t.iter()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_'));
                // Not a level word, and not a verb in the past (`exited:
                // worker`): those start messages.
                let verb = t.ends_with(b"ed");
                let name = word
                    && t.len() >= 2
                    && t[0].is_ascii_alphabetic()
                    && !verb
                    && severity::header_word(t).is_none();
                if name && self.last == Last::Level && self.anchored {
                    // `[INFO]  core: …`, `INFO Remoting: …`: the subsystem
                    // or logger right after the level.
                    self.h.push(Part::Logger, i, end - 1);
                    self.commit(end);
                    break;
                }
                if word && self.last == Last::Dashes && self.anchored {
                    // Ruby's Logger: `ERROR -- progname: message`.
                    self.h.push(Part::Logger, i, end - 1);
                    self.commit(end);
                    break;
                }
                if word && !self.anchored && self.tokens == 1 {
                    // A prefix before a stamp (go-redis's `redis: `); if no
                    // stamp follows, there is no header.
                    self.pend(Some(Part::Logger), i, end - 1);
                    self.last = Last::Filler;
                    i = end;
                    self.prev_end = i;
                    continue;
                }
                if self.anchored {
                    break;
                }
                return;
            }
            // Numbers: pid and tid after a stamp, pending elsewhere.
            let number = tok.strip_prefix(b"-").unwrap_or(tok);
            if !number.is_empty() && number.iter().all(u8::is_ascii_digit) && tok.len() <= 10 {
                if self.tokens == 1 {
                    self.first_filler = true;
                }
                let part = if self.last == Last::Pid {
                    Part::Tid
                } else {
                    Part::Pid
                };
                if matches!(self.last, Last::Stamp | Last::Pid) && self.anchored {
                    self.h.push(part, i, end);
                    self.commit(end);
                    self.last = Last::Pid;
                } else {
                    // Before any anchor a number is a column of unknown
                    // meaning; after a level, a pid only if more follows.
                    self.pend(self.anchored.then_some(part), i, end);
                    self.last = Last::Filler;
                }
                i = end;
                self.prev_end = i;
                continue;
            }
            if caller_like(tok) {
                if self.anchored {
                    self.h.push(Part::Caller, i, end);
                    self.commit(end);
                    self.last = Last::Logger;
                } else {
                    self.pend(Some(Part::Caller), i, end);
                    self.last = Last::Filler;
                }
                i = end;
                self.prev_end = i;
                continue;
            }
            if filler_like(tok) && tok.len() <= 96 {
                if self.tokens == 1 {
                    self.first_filler = true;
                }
                // A Java logger after the level or thread (`INFO [main]
                // org.apache.catalina.Foo.log Server …`, log4j's `%p %c`).
                if self.anchored
                    && matches!(self.last, Last::Level | Last::Group)
                    && java_like(tok)
                    && !self.has_logger()
                {
                    self.h.push(Part::Logger, i, end);
                    self.commit(end);
                    self.last = Last::Logger;
                    i = end;
                    self.prev_end = i;
                    continue;
                }
                // A filler: a logger when a separator, a column or a
                // group closes it; otherwise the message may start here.
                self.pend(None, i, end);
                self.last = Last::Filler;
                i = end;
                self.prev_end = i;
                continue;
            }
            // Prose: the message starts (or, before any anchor, there is
            // no header). A line that starts with columns (`2568643
            // node-70 action start 1074119817 …`) may have words among
            // them, before an epoch stamp only.
            if self.anchored
                && self.h.level.is_some()
                && matches!(self.last, Last::Level | Last::Logger | Last::Group)
                && b.get(end) == Some(&b'\t')
                && tok.len() <= 32
                && !self.has_logger()
            {
                // A tab-separated scope column (`info\tads\tADS: …`).
                self.h.push(Part::Logger, i, end);
                self.commit(end);
                self.last = Last::Logger;
                i = end;
                self.prev_end = i;
                continue;
            }
            if !self.anchored && self.first_filler && self.tokens <= 5 && tok.len() <= 32 {
                self.prose_before = true;
                self.pend(None, i, end);
                self.last = Last::Filler;
                i = end;
                self.prev_end = i;
                continue;
            }
            break;
        }
    }

    /// Re-labels the last pending part (a filler before `356:`) and
    /// extends it to `end`.
    fn relabel_last_pending(&mut self, part: Part, end: usize) {
        if self.n_pending > 0 {
            let k = self.n_pending - 1;
            self.pending[k].0 = Some(part);
            self.pending[k].2 = end;
        }
    }

    /// The parts of a tag: `prog[pid]` → program and pid; `31#31` → pid
    /// and tid; `file.go:12` → caller; anything else → `part`.
    fn tag_parts(&mut self, part: Part, a: usize, b: usize) {
        let t = &self.b[a..b];
        if part == Part::Program {
            if let Some(open) = t.iter().position(|c| *c == b'[') {
                if let Some(close) = t.iter().rposition(|c| *c == b']') {
                    self.h.push(Part::Program, a, a + open);
                    if close > open + 1 {
                        self.h.push(Part::Pid, a + open + 1, a + close);
                    }
                    return;
                }
            }
        }
        if let Some(hash) = t.iter().position(|c| *c == b'#') {
            if t.iter().all(|c| c.is_ascii_digit() || *c == b'#') {
                self.h.push(Part::Pid, a, a + hash);
                self.h.push(Part::Tid, a + hash + 1, b);
                return;
            }
        }
        self.h.push(part, a, b);
    }

    /// A stamp at `i`, bracketed or not: (stamp, end of the element, the
    /// logger named inside the bracket after the stamp, if any).
    fn stamp_here(&self, i: usize) -> Option<(Stamp, usize, Option<Span>)> {
        let b = self.b;
        // A bare time of day is a stamp as the first token, or after a
        // leading number (strace's `478760 12:21:46.284771 execve(…)`).
        let after_number = self.tokens == 2 && self.committed == 0 && {
            let head = b[..i].trim_ascii();
            !head.is_empty() && head.len() <= 10 && head.iter().all(u8::is_ascii_digit)
        };
        let first = (self.tokens <= 1 && self.committed == 0 && !self.has_pending) || after_number;
        if b[i] != b'[' {
            let st = stamp_at(b, i, first)?;
            return Some((st, st.end, None));
        }
        let mut st = stamp_at(b, i + 1, true)?;
        let mut j = st.end;
        // `[2024-05-07T10:55:53.434123 #12345]` (Ruby's Logger).
        if b.get(j) == Some(&b' ') && b.get(j + 1) == Some(&b'#') && run(b, j + 2) > 0 {
            j += 2 + run(b, j + 2);
        }
        if b.get(j) == Some(&b']') {
            st.end = j + 1;
            return Some((st, j + 1, None));
        }
        // More inside the bracket: `[2024-05-07 10:55:53,434: INFO/MainProcess]`
        // (Celery), `[2024-05-07T10:55:53Z INFO  myapp::server]` (Rust's
        // env_logger): a level, then a logger.
        let close = j + b
            .get(j..b.len().min(j + 160))?
            .iter()
            .position(|c| *c == b']')?;
        let mut k = j;
        while k < close && matches!(b[k], b' ' | b':' | b',' | b'-' | b'\t') {
            k += 1;
        }
        let n = b[k..close]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric())
            .count();
        let mut logger = None;
        if let Some(l) = severity::header_word(&b[k..k + n]) {
            st.level = Some(l);
            k += n;
            while k < close && matches!(b[k], b' ' | b'/' | b':' | b'\t') {
                k += 1;
            }
            let (a, e) = trim_range(&b[k..close], k);
            if a < e && !b[a..e].contains(&b' ') {
                logger = Some((a, e));
            }
        } else if n > 0 {
            return None;
        }
        st.end = close + 1;
        Some((st, close + 1, logger))
    }

    /// A level token at `i` (the token ends at `end`): a level word in
    /// capitals or capitalised (`INFO`, `Info`, `INFO:`), in lower case
    /// only where delimited (`info:`, `|info|`, a tab), or a single
    /// letter where logcat and Rails put one.
    fn level_token(&self, i: usize, end: usize) -> Option<(Level, usize)> {
        let b = self.b;
        let n = b[i..end]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric())
            .count();
        if n == 0 || n > 13 || !b[i].is_ascii_alphabetic() {
            return None;
        }
        let w = &b[i..i + n];
        let after = b.get(i + n).copied();
        let delimited_after = match after {
            None => true,
            Some(c) => is_space(c) || matches!(c, b':' | b'|' | b','),
        };
        if !delimited_after {
            return None;
        }
        if n == 1 {
            let l = severity::letter(w[0])?;
            // logcat threadtime: `D Tag: …`; Rails: `I, [stamp …]`.
            let rails =
                after == Some(b',') && b.get(i + 2) == Some(&b' ') && b.get(i + 3) == Some(&b'[');
            if rails {
                return Some((l, i + 2));
            }
            if after.is_some_and(is_space) {
                let j = self.skip_spaces(i + 1);
                let e = self.token_end(j);
                let next = &b[j..e];
                if next.len() > 1 && next.last() == Some(&b':') && tag_like(&next[..next.len() - 1])
                {
                    return Some((l, i + 1));
                }
                // A padded tag: `I chatty  : uid=1000 …`.
                let k = self.skip_spaces(e);
                if !next.is_empty() && b.get(k) == Some(&b':') && k > e {
                    return Some((l, i + 1));
                }
            }
            return None;
        }
        let l = severity::header_word(w)?;
        let upper = w
            .iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        let capital = w[0].is_ascii_uppercase() && w[1..].iter().all(|c| c.is_ascii_lowercase());
        let prev = i.checked_sub(1).and_then(|p| b.get(p)).copied();
        let delimited =
            matches!(after, Some(b':' | b'|' | b'\t')) || matches!(prev, Some(b'|' | b'\t'));
        // Capitals are a level anywhere in the header; a word written as
        // prose (`Info`, `error`) only where a header puts one: after a
        // stamp or pid, or closed by a colon, a pipe or a tab; words that
        // also start sentences (`Log`, `Note`, `Alert`) only in capitals.
        let strong = severity::strong_word(w);
        let ok = if upper {
            true
        } else if capital {
            strong && (delimited || matches!(self.last, Last::Stamp | Last::Pid | Last::Sep))
        } else {
            strong && delimited
        };
        if !ok {
            return None;
        }
        let mut e = i + n;
        if after == Some(b':') {
            // `error:[-50]` is a message's; Python's `ERROR:root:` starts
            // its line.
            if b.get(i + n + 1).is_some_and(|c| !is_space(*c)) && self.tokens > 1 {
                return None;
            }
            e += 1;
        }
        Some((l, e))
    }

    fn skip_spaces(&self, mut i: usize) -> usize {
        while i < self.b.len() && is_space(self.b[i]) {
            i += 1;
        }
        i
    }

    /// Python's `LEVEL:logger:message`: after the level's colon, a logger
    /// name and its colon. Returns true when it consumed one (the header
    /// then ends).
    fn python_logger(&mut self, i: usize) -> bool {
        let b = self.b;
        if i == 0 || b[i - 1] != b':' || b.get(i).is_none_or(|c| is_space(*c)) {
            return false;
        }
        let n = b[i..]
            .iter()
            .take(96)
            .take_while(|c| !is_space(**c) && **c != b':')
            .count();
        if n == 0 || b.get(i + n) != Some(&b':') {
            return false;
        }
        self.h.push(Part::Logger, i, i + n);
        self.commit(i + n + 1);
        true
    }

    /// A bracketed element at `i` (`[…]`, `<…>`, `(…)`): returns its end,
    /// or None when it is not one (unbalanced, too long).
    fn group(&mut self, i: usize) -> Option<usize> {
        let b = self.b;
        let open = b[i];
        let close = match open {
            b'[' => b']',
            b'<' => b'>',
            _ => b')',
        };
        let mut depth = 0usize;
        let mut j = i;
        let stop = b.len().min(i + 200);
        let end = loop {
            if j >= stop {
                return None;
            }
            if b[j] == open {
                depth += 1;
            } else if b[j] == close {
                depth -= 1;
                if depth == 0 {
                    break j + 1;
                }
            }
            j += 1;
        };
        let inner = &b[i + 1..end - 1];
        let (ia, ib) = trim_range(inner, i + 1);
        let content = &b[ia..ib];
        let adjacent = i > 0 && matches!(b[i - 1], b']' | b'>' | b')');
        // A level: `[INFO]`, `[ WARN ]`, `<error>`, `[core:error]`, and
        // the first of pipe-joined fields (`[ERROR|auth|L83]`).
        if self.h.level.is_none() {
            let piped = content
                .iter()
                .position(|c| *c == b'|')
                .map(|p| &content[..p])
                .filter(|w| severity::strong_word(w));
            let word = match (piped, content.iter().rposition(|c| *c == b':')) {
                (Some(w), _) => w,
                (None, Some(p)) if open == b'[' => &content[p + 1..],
                _ => content,
            };
            if let Some(l) =
                severity::header_word(word).filter(|_| word.iter().all(u8::is_ascii_alphanumeric))
            {
                let mut e = end;
                if b.get(e) == Some(&b':') {
                    e += 1;
                }
                self.level_found(l, e, false);
                return Some(e);
            }
        }
        if open == b'<' && (!self.anchored || content.contains(&b' ') || content.is_empty()) {
            return None;
        }
        // A pid: `[123]`, `[pid 35708:tid 4328636416]`.
        if !content.is_empty() && content.iter().all(u8::is_ascii_digit) {
            let placed = adjacent
                || matches!(
                    self.last,
                    Last::Stamp | Last::Pid | Last::Level | Last::Group
                );
            if self.anchored && placed {
                let part = if self.last == Last::Pid {
                    Part::Tid
                } else {
                    Part::Pid
                };
                self.h.push(part, ia, ib);
                self.commit(end);
                self.last = Last::Pid;
                return Some(end);
            }
            self.pend(Some(Part::Pid), ia, ib);
            self.last = Last::Pid;
            return Some(end);
        }
        if content.starts_with(b"pid ") {
            if self.anchored {
                let digits = run(content, 4);
                self.h.push(Part::Pid, ia + 4, ia + 4 + digits);
                self.commit(end);
                self.last = Last::Pid;
                return Some(end);
            }
            return None;
        }
        if !self.anchored && open == b'(' {
            return None;
        }
        let part = if content.contains(&b' ') {
            Part::Context
        } else if content.contains(&b'.')
            && content.first().is_some_and(u8::is_ascii_alphabetic)
            && !caller_like(content)
        {
            Part::Logger
        } else if caller_like(content) {
            Part::Caller
        } else {
            Part::Thread
        };
        // A group closes the header only in some places: adjacent to
        // another group, right after a stamp, pid or logger, or naming
        // a caller. After a level it is pending (Apache's `[client …]`
        // is the message; log4j's `[main] org.Foo:` is not).
        // After a level (or a pid or another group) a group without
        // spaces is a thread, code or subsystem (`[main]`, `[MY-010068]`);
        // one with spaces may be the message's own context (Apache's
        // `[client 1.2.3.4]`, Kafka's `[LocalLog partition=…]`), so it
        // waits for what follows.
        let spaced = part == Part::Context;
        let commits = self.anchored
            && (adjacent
                || matches!(self.last, Last::Stamp | Last::Logger)
                || (self.last == Last::Filler && self.h.level.is_some())
                || part == Part::Caller
                || (!spaced && matches!(self.last, Last::Level | Last::Pid | Last::Group)));
        if commits {
            // `nova.compute.manager [req-…]`: the filler is the logger.
            self.close_filler();
            self.h.push(part, ia, ib);
            self.commit(end);
            self.last = Last::Group;
        } else {
            self.pend(Some(part), ia, ib);
            self.last = Last::PendingGroup;
        }
        Some(end)
    }

    /// After a syslog stamp: `host prog[pid]: ` (the host may be absent),
    /// then the program's own header. Returns true when it read the
    /// header to its end.
    fn syslog_rest(&mut self, i: usize) -> bool {
        let b = self.b;
        let h0 = self.skip_spaces(i);
        let h1 = self.token_end(h0);
        if h1 == h0 {
            return false;
        }
        let host_is_tag = b[h1 - 1] == b':';
        let (prog_start, host) = if host_is_tag {
            (h0, None)
        } else {
            (self.skip_spaces(h1), Some((h0, h1)))
        };
        // The program ends at the first `: ` within a few tokens.
        let stop = b.len().min(prog_start + 128);
        let mut colon = None;
        let mut spaces = 0;
        let mut k = prog_start;
        while k < stop {
            match b[k] {
                b':' if b.get(k + 1).is_none_or(|c| is_space(*c)) => {
                    colon = Some(k);
                    break;
                }
                b' ' => {
                    spaces += 1;
                    if spaces > 2 {
                        break;
                    }
                }
                b'"' | b'{' | b'=' => break,
                _ => {}
            }
            k += 1;
        }
        // A program name with spaces (macOS's `Microsoft Word[14463]:`,
        // `sandboxd[129] ([31211]):`) ends with its pid; `Kernel command
        // line:` is a message.
        let colon = colon.filter(|&c| {
            let p = &b[prog_start..c];
            !p.contains(&b' ')
                || (p.ends_with(b"]") && p.contains(&b'['))
                || (p.ends_with(b"])") && p.contains(&b'('))
        });
        if let Some((a, e)) = host {
            self.h.push(Part::Host, a, e);
        }
        self.h.kind = Kind::Syslog;
        let Some(colon) = colon.filter(|c| *c > prog_start) else {
            // No program tag: the message follows the host.
            self.commit(host.map_or(i, |(_, e)| e));
            self.h.inner = self.skip_spaces(self.committed);
            return true;
        };
        self.tag_parts(Part::Program, prog_start, colon);
        self.commit(colon + 1);
        // The program's own header (kubelet writes klog, others a level).
        let inner_start = self.skip_spaces(colon + 1);
        self.h.inner = inner_start;
        let reference = match self.h.time {
            Some(t) => Reference::Near(t),
            None => self.reference,
        };
        let mut inner = Walker::new(&b[inner_start..], reference);
        inner.walk(0);
        let ih = inner.finish(false);
        if ih.found() && (ih.level.is_some() || ih.kind == Kind::Klog) {
            if self.h.level.is_none() {
                self.h.level = ih.level;
            }
            if ih.time.is_some() && ih.kind == Kind::Klog {
                self.h.time = ih.time;
            }
            for (p, a, e) in ih.parts[..usize::from(ih.n_parts)].iter() {
                if let Some(p) = p {
                    self.h.push(
                        *p,
                        inner_start + usize::from(*a),
                        inner_start + usize::from(*e),
                    );
                }
            }
            self.committed = inner_start + ih.body;
        }
        // A message without a priority is user.notice (RFC 3164 §4.3.3:
        // a relay gives it PRI 13), and notice reads as info.
        if self.h.level.is_none() {
            self.h.level = Some(Level::Info);
        }
        true
    }

    /// Whether `host prog[pid]: ` follows (syslog with an RFC 3339 stamp,
    /// as rsyslog and `journalctl -o short-iso` write it).
    fn program_follows(&self, i: usize) -> bool {
        let b = self.b;
        let h0 = self.skip_spaces(i);
        let h1 = self.token_end(h0);
        let p0 = self.skip_spaces(h1);
        let p1 = self.token_end(p0);
        if h1 == h0 || p1 <= p0 + 3 || b[h1 - 1] == b':' {
            return false;
        }
        let host_ok = b[h0..h1]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'@' | b'/'));
        let prog = &b[p0..p1];
        host_ok
            && prog.ends_with(b"]:")
            && prog.iter().position(|c| *c == b'[').is_some_and(|o| {
                o > 0 && prog[o + 1..prog.len() - 2].iter().all(u8::is_ascii_digit)
            })
    }

    /// After a klog stamp: the pid and `file.go:107]`.
    fn klog_rest(&mut self, i: usize) {
        let b = self.b;
        let j = self.skip_spaces(i);
        let e = self.token_end(j);
        let mut k = j;
        if e > j && b[j..e].iter().all(u8::is_ascii_digit) {
            self.h.push(Part::Pid, j, e);
            self.commit(e);
            k = self.skip_spaces(e);
        }
        let e = self.token_end(k);
        if e > k && b[e - 1] == b']' && caller_like(&b[k..e - 1]) {
            self.h.push(Part::Caller, k, e - 1);
            self.commit(e);
        }
        self.h.kind = Kind::Klog;
    }

    /// RFC 5424: `<PRI>1 TIMESTAMP HOST APP PROCID MSGID SD MSG` (at `i`,
    /// after the version); `-` is a nil value.
    fn rfc5424(&mut self, i: usize) {
        let b = self.b;
        self.h.kind = Kind::Syslog;
        let mut fields = [(0usize, 0usize); 5];
        let mut k = i;
        for f in fields.iter_mut() {
            let e = self.token_end(k);
            *f = (k, e);
            k = self.skip_spaces(e);
        }
        let (ts, host, app, pid, msgid) = (fields[0], fields[1], fields[2], fields[3], fields[4]);
        if &b[ts.0..ts.1] != b"-" {
            if let Some(st) = stamp_at(b, ts.0, false).filter(|s| s.end == ts.1) {
                self.stamp_found(&st, ts.0, ts.1);
            }
        }
        for (part, (a, e)) in [
            (Part::Host, host),
            (Part::Program, app),
            (Part::Pid, pid),
            (Part::MsgId, msgid),
        ] {
            if &b[a..e] != b"-" {
                self.h.push(part, a, e);
            }
        }
        // Structured data: `-` or `[id k="v"]…`.
        let mut m = k;
        if b.get(m) == Some(&b'-') {
            m += 1;
        } else {
            while b.get(m) == Some(&b'[') {
                let mut q = m;
                let mut quoted = false;
                while q < b.len() {
                    match b[q] {
                        b'\\' => q += 1,
                        b'"' => quoted = !quoted,
                        b']' if !quoted => break,
                        _ => {}
                    }
                    q += 1;
                }
                if q >= b.len() {
                    break;
                }
                self.h.push(Part::Context, m, q + 1);
                m = q + 1;
            }
        }
        let mut m = self.skip_spaces(m);
        if b[m..].starts_with("\u{feff}".as_bytes()) {
            m += 3;
        }
        self.committed = m.min(b.len());
        self.h.inner = self.committed;
    }

    fn finish(mut self, top: bool) -> Header {
        if !self.anchored || self.abort {
            return Header::default();
        }
        if self.h.kind == Kind::None {
            self.h.kind = match self.stamp_kind {
                Some(StampKind::Klog) => Kind::Klog,
                Some(StampKind::GoLog) => Kind::GoLog,
                Some(StampKind::Syslog) if top => Kind::Syslog,
                _ => Kind::Text,
            };
        }
        // Separators after the header belong to it: `] - msg`, `INFO: msg`.
        let b = self.b;
        let mut i = self.committed.min(b.len());
        loop {
            let j = self.skip_spaces(i);
            let e = self.token_end(j);
            let tok = &b[j..e];
            let sep = (!tok.is_empty() && tok.len() <= 3 && tok.iter().all(|c| *c == b'-'))
                || tok == b":"
                || tok == b"|"
                || tok == b",";
            if sep && e < b.len() {
                i = e;
                continue;
            }
            if b.get(j) == Some(&b'|') {
                i = j + 1;
                continue;
            }
            i = j;
            break;
        }
        self.h.body = i.min(b.len());
        self.h
    }
}

/// The part a tag names: a caller (`pool.go:762`), a program (`sshd[123]`,
/// `crond(pam_unix)[2915]`) or a logger (`org.foo.Bar`, `WindowManager`).
fn tag_part(t: &[u8]) -> Part {
    if caller_like(t) {
        Part::Caller
    } else if t.last() == Some(&b']') && t.contains(&b'[') {
        Part::Program
    } else {
        Part::Logger
    }
}

/// `inner`'s range (offset by `base`) without surrounding spaces.
fn trim_range(inner: &[u8], base: usize) -> (usize, usize) {
    let a = inner.iter().take_while(|c| is_space(**c)).count();
    let b = inner.len() - inner.iter().rev().take_while(|c| is_space(**c)).count();
    if a >= b {
        (base, base)
    } else {
        (base + a, base + b)
    }
}

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
        ] {
            let h = read(line, None);
            assert!(!h.found(), "{line:?}: {h:?}");
            assert_eq!(h.body, 0, "{line:?}");
        }
    }
}
