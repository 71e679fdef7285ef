//! Stamps: one grammar per shape of timestamp a header may start with
//! (RFC 3339 and its cousins, compact and two-digit dates, month names,
//! clocks with zones and abbreviations, epoch numbers), read on bytes
//! without allocating, each completed from a reference when it lacks a
//! year or a date.

use super::token::is_space;
use super::Reference;
use crate::decode::severity::{self, Level};
use crate::decode::time::{self, NS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StampKind {
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
pub(super) struct Stamp {
    pub(super) end: usize,
    pub(super) year: Option<i32>,
    /// 0 when the stamp is a time of day only.
    pub(super) month: u32,
    pub(super) day: u32,
    pub(super) clock: Option<(u32, u32, u32, u32)>,
    /// Seconds east of UTC.
    pub(super) offset: Option<i64>,
    pub(super) epoch: Option<i64>,
    pub(super) level: Option<Level>,
    pub(super) kind: StampKind,
}

impl Stamp {
    pub(super) fn new(end: usize) -> Stamp {
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
    pub(super) fn has_time(&self) -> bool {
        self.epoch.is_some() || self.clock.is_some()
    }

    pub(super) fn resolve(&self, reference: Reference) -> Option<i64> {
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

pub(super) fn digit(b: &[u8], i: usize) -> bool {
    b.get(i).is_some_and(u8::is_ascii_digit)
}

/// Consecutive digits at `i`.
pub(super) fn run(b: &[u8], i: usize) -> usize {
    b.get(i..)
        .map_or(0, |s| s.iter().take_while(|c| c.is_ascii_digit()).count())
}

/// The value of exactly `n` digits at `i`.
pub(super) fn num(b: &[u8], i: usize, n: usize) -> Option<u32> {
    let s = b.get(i..i + n)?;
    s.iter().try_fold(0u32, |acc, c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

/// 1 or 2 digits at `i` (no more): (value, end).
pub(super) fn num12(b: &[u8], i: usize) -> Option<(u32, usize)> {
    match run(b, i) {
        1 => Some((num(b, i, 1)?, i + 1)),
        2 => Some((num(b, i, 2)?, i + 2)),
        _ => None,
    }
}

/// Whether a stamp may end at `i`: end of text or a delimiter.
pub(super) fn boundary(b: &[u8], i: usize) -> bool {
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

pub(super) const MONTHS: [&[u8; 3]; 12] = [
    b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov", b"dec",
];
pub(super) const WEEKDAYS: [&[u8; 3]; 7] = [b"mon", b"tue", b"wed", b"thu", b"fri", b"sat", b"sun"];

/// A three-letter English month name at `i` (`May`, `MAY`, `may`), not
/// followed by another letter.
pub(super) fn month_at(b: &[u8], i: usize) -> Option<u32> {
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

pub(super) fn weekday_at(b: &[u8], i: usize) -> bool {
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
pub(super) fn clock(b: &[u8], i: usize) -> Option<((u32, u32, u32, u32), usize)> {
    clock_of(b, i, false)
}

pub(super) fn clock_of(b: &[u8], i: usize, padded: bool) -> Option<((u32, u32, u32, u32), usize)> {
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
pub(super) fn clock_rest(
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
pub(super) fn frac(b: &[u8], i: usize, n: usize) -> u32 {
    let n9 = n.min(9);
    let v = b.get(i..i + n9).map_or(0, |d| {
        d.iter().fold(0u32, |v, c| v * 10 + u32::from(c - b'0'))
    });
    v * 10u32.pow((9 - n9) as u32)
}

/// A zone after a clock: `Z`, `+02:00`, `+0200`, `+02` attached, or
/// after one space `UTC`, `GMT`, `+0200`, `-07:00` or a common
/// abbreviation. (seconds east of UTC, end).
pub(super) fn zone(b: &[u8], i: usize) -> Option<(i64, usize)> {
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
pub(super) fn offset(b: &[u8], i: usize) -> Option<(i64, usize)> {
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
pub(super) fn abbreviation(name: &[u8]) -> Option<i64> {
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
pub(super) fn finish_stamp(b: &[u8], mut st: Stamp) -> Option<Stamp> {
    if let Some((off, end)) = zone(b, st.end) {
        st.offset = Some(off);
        st.end = end;
    }
    boundary(b, st.end).then_some(st)
}

/// A level joined to a stamp by colons: `:DEBUG:` or `::WARNING::` at
/// `i` (one or two colons each side, a level word between). The level and
/// where the message starts.
pub(super) fn colon_level(b: &[u8], i: usize) -> Option<(Level, usize)> {
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

pub(super) fn valid_date(y: Option<i32>, m: u32, d: u32) -> bool {
    (1..=12).contains(&m) && (1..=31).contains(&d) && y.is_none_or(|y| (1970..=2200).contains(&y))
}

/// A stamp starting at `i`. `first`: the stamp is the line's first
/// token, where a bare time of day is accepted too.
pub(super) fn stamp_at(b: &[u8], i: usize, first: bool) -> Option<Stamp> {
    let c = *b.get(i)?;
    if c.is_ascii_digit() {
        numeric(b, i, first)
    } else if c.is_ascii_alphabetic() {
        named(b, i)
    } else {
        None
    }
}

pub(super) fn numeric(b: &[u8], i: usize, first: bool) -> Option<Stamp> {
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
pub(super) fn year_first(b: &[u8], i: usize) -> Option<Stamp> {
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
pub(super) fn dotted_clock(b: &[u8], i: usize) -> Option<((u32, u32, u32, u32), usize)> {
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
pub(super) fn dot_fraction(b: &[u8], k: usize) -> (u32, usize) {
    if b.get(k) == Some(&b'.') && digit(b, k + 1) {
        let n = run(b, k + 1);
        (frac(b, k + 1, n), k + 1 + n)
    } else {
        (0, k)
    }
}

/// `YYYYMMDD-HH:MM:SS:mmm`, `YYYYMMDD HH:MM:SS`, ISO basic
/// `YYYYMMDDTHHMMSS[.f][Z]`.
pub(super) fn compact(b: &[u8], i: usize) -> Option<Stamp> {
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
pub(super) fn yymmdd(b: &[u8], i: usize) -> Option<Stamp> {
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
pub(super) fn two_digits(b: &[u8], i: usize, first: bool) -> Option<Stamp> {
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
pub(super) fn epoch(b: &[u8], i: usize) -> Option<Stamp> {
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
    if !(crate::decode::SANE_TIME_MIN..crate::decode::SANE_TIME_MAX).contains(&ns) {
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
pub(super) fn named(b: &[u8], i: usize) -> Option<Stamp> {
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
pub(super) fn month_first(b: &[u8], i: usize, mo: u32) -> Option<Stamp> {
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
