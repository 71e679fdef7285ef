//! Event-time parsing: epoch numbers in any unit, RFC 3339 with or without a
//! colon in the offset, klog and syslog stamps without a year, and Go's `log`
//! prefix. Everything is nanoseconds since the Unix epoch, UTC.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, TimeZone, Utc};

/// Field names read for the event time, in order of preference.
pub const TIME_FIELDS: &[&str] = &[
    "__REALTIME_TIMESTAMP",
    "ts",
    "time",
    "timestamp",
    "@timestamp",
    "eventTime",
    "lastTimestamp",
    "date",
];

/// Nanoseconds in a second.
pub const NS: i64 = 1_000_000_000;

/// Parses an epoch number, guessing the unit from its magnitude
/// (s, ms, µs, ns), as float seconds (`1714568400.5533901`) or an integer.
pub fn parse_epoch(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
        return None;
    }
    // Fast path, no allocation, one pass: digits with an optional
    // fraction of digits.
    let b = s.as_bytes();
    let mut i = 0;
    let mut int = 0i64;
    let mut fits = true;
    while i < b.len() && b[i].is_ascii_digit() {
        let d = i64::from(b[i] - b'0');
        if i < 18 {
            // 18 digits cannot overflow.
            int = int * 10 + d;
        } else {
            match int.checked_mul(10).and_then(|v| v.checked_add(d)) {
                Some(v) => int = v,
                None => {
                    fits = false;
                    break;
                }
            }
        }
        i += 1;
    }
    if fits && i == b.len() {
        return Some(scale_int(int));
    }
    if fits && b[i] == b'.' && int < 100_000_000_000 {
        // Seconds with a fraction: nanosecond precision from the digits.
        let frac = &b[i + 1..];
        let mut nanos = 0i64;
        let mut k = 0;
        let mut digits = true;
        for &d in frac {
            if !d.is_ascii_digit() {
                digits = false;
                break;
            }
            if k < 9 {
                nanos = nanos * 10 + i64::from(d - b'0');
                k += 1;
            }
        }
        if digits {
            const POW10: [i64; 10] = [
                1_000_000_000,
                100_000_000,
                10_000_000,
                1_000_000,
                100_000,
                10_000,
                1_000,
                100,
                10,
                1,
            ];
            return int.checked_mul(NS)?.checked_add(nanos * POW10[k]);
        }
    }
    let f: f64 = s.parse().ok()?;
    if !f.is_finite() || f < 0.0 {
        return None;
    }
    if f < 1e11 {
        // Seconds with a fraction: split to keep nanosecond precision.
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        let secs: i64 = int.parse().ok()?;
        let mut digits: String = frac
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .take(9)
            .collect();
        while digits.len() < 9 {
            digits.push('0');
        }
        let nanos: i64 = digits.parse().ok()?;
        return secs.checked_mul(NS)?.checked_add(nanos);
    }
    Some(scale_int(f as i64))
}

fn scale_int(i: i64) -> i64 {
    let a = i.abs();
    if a < 100_000_000_000 {
        i.saturating_mul(NS)
    } else if a < 100_000_000_000_000 {
        i.saturating_mul(1_000_000)
    } else if a < 100_000_000_000_000_000 {
        i.saturating_mul(1_000)
    } else {
        i
    }
}

/// Parses RFC 3339 / ISO 8601 timestamps: `2024-05-01T12:00:00.553412876Z`,
/// `2024-07-17T12:19:35.209+0300`, `2024-05-01 12:00:00.1+00:00`, and a
/// zoneless `2024-05-01T12:00:00` taken as UTC.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.len() < 19 || s.as_bytes()[4] != b'-' || s.as_bytes()[7] != b'-' {
        return None;
    }
    if let Some(t) = fast_rfc3339(s.as_bytes()) {
        return Some(t);
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return t.timestamp_nanos_opt();
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f%z",
        "%Y-%m-%d %H:%M:%S%.f%z",
        "%Y-%m-%dT%H:%M:%S%.fZ",
    ] {
        if let Ok(t) = DateTime::parse_from_str(s, fmt) {
            return t.timestamp_nanos_opt();
        }
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, fmt) {
            return Utc.from_utc_datetime(&t).timestamp_nanos_opt();
        }
    }
    None
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// Nanoseconds for a valid UTC date and time, computed directly; None for
/// anything out of range (leap seconds included: callers fall back to
/// chrono, which knows them).
fn civil_ns(y: i64, mo: u32, d: u32, h: u32, mi: u32, sec: u32, nanos: u32) -> Option<i64> {
    if !(1..=12).contains(&mo)
        || d == 0
        || d > days_in_month(y, mo)
        || h > 23
        || mi > 59
        || sec > 59
        || nanos >= 1_000_000_000
        || !(1..=9999).contains(&y)
    {
        return None;
    }
    let secs = days_from_civil(y, mo, d) * 86_400 + i64::from(h * 3600 + mi * 60 + sec);
    secs.checked_mul(NS)?.checked_add(i64::from(nanos))
}

fn digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

/// The common RFC 3339 shapes (`2024-05-01T12:00:00.553Z`, `+03:00`,
/// `+0300`, a space for the `T`) without chrono; None sends anything else
/// to the general parser.
fn fast_rfc3339(b: &[u8]) -> Option<i64> {
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let y = i64::from(digits(&b[0..4])?);
    let (mo, d) = (digits(&b[5..7])?, digits(&b[8..10])?);
    let (h, mi, sec) = (
        digits(&b[11..13])?,
        digits(&b[14..16])?,
        digits(&b[17..19])?,
    );
    let mut i = 19;
    let mut nanos = 0u32;
    if b[i] == b'.' {
        let start = i + 1;
        let n = b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return None;
        }
        nanos = digits(&b[start..start + n])? * 10u32.pow(9 - n as u32);
        i = start + n;
    }
    let offset: i64 = match &b[i..] {
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), rest @ ..] => {
            let (oh, om) = match rest {
                [h1, h2, b':', m1, m2] => (digits(&[*h1, *h2])?, digits(&[*m1, *m2])?),
                [h1, h2, m1, m2] => (digits(&[*h1, *h2])?, digits(&[*m1, *m2])?),
                _ => return None,
            };
            if oh > 23 || om > 59 {
                return None;
            }
            let o = i64::from(oh * 3600 + om * 60) * NS;
            if *sign == b'+' {
                o
            } else {
                -o
            }
        }
        _ => return None,
    };
    civil_ns(y, mo, d, h, mi, sec, nanos)?.checked_sub(offset)
}

/// Parses a time value of a structured field: RFC 3339 or an epoch number.
pub fn parse_any(s: &str) -> Option<i64> {
    parse_rfc3339(s).or_else(|| parse_epoch(s))
}

/// Year of a nanosecond timestamp (UTC).
pub fn year_of(ns: i64) -> i32 {
    // Howard Hinnant's civil_from_days, year only.
    let z = ns.div_euclid(86_400 * NS) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let y = yoe + era * 400 + i64::from(mp >= 10);
    i32::try_from(y).unwrap_or_else(|_| DateTime::from_timestamp_nanos(ns).year())
}

/// Builds a UTC time from parts; None if out of range.
pub fn from_parts(
    year: i32,
    month: u32,
    day: u32,
    h: u32,
    m: u32,
    s: u32,
    nanos: u32,
) -> Option<i64> {
    if let Some(t) = civil_ns(i64::from(year), month, day, h, m, s, nanos) {
        return Some(t);
    }
    let d = NaiveDate::from_ymd_opt(year, month, day)?;
    let t = d.and_hms_nano_opt(h, m, s, nanos)?;
    Utc.from_utc_datetime(&t).timestamp_nanos_opt()
}

/// Resolves a stamp without a year against a reference time (a nearby
/// line's time, the file's modification time, or the arrival time): the
/// year that puts the stamp at most 30 days after and at most 335 days
/// before the reference. December lines read against a January
/// reference go back a year; a January line after a December one goes
/// forward.
pub fn with_inferred_year(
    reference: i64,
    month: u32,
    day: u32,
    clock: (u32, u32, u32, u32),
) -> Option<i64> {
    const DAY: i64 = 86_400 * NS;
    let y = year_of(reference);
    let at = |y: i32| from_parts(y, month, day, clock.0, clock.1, clock.2, clock.3);
    // 29 February exists in some years only: try the neighbours.
    let t = at(y).or_else(|| at(y - 1)).or_else(|| at(y + 1))?;
    if t > reference.saturating_add(30 * DAY) {
        at(year_of(t) - 1).or(Some(t))
    } else if t <= reference.saturating_sub(335 * DAY) {
        at(year_of(t) + 1).or(Some(t))
    } else {
        Some(t)
    }
}

/// Resolves a stamp without a year against the time of a neighbouring
/// line: the year that puts the stamp nearest to it (a January line after
/// a December one is in the next year).
pub fn with_nearest_year(
    reference: i64,
    month: u32,
    day: u32,
    clock: (u32, u32, u32, u32),
) -> Option<i64> {
    const HALF_YEAR: i64 = 183 * 86_400 * NS;
    let y = year_of(reference);
    let at = |y: i32| from_parts(y, month, day, clock.0, clock.1, clock.2, clock.3);
    match at(y) {
        // Within half a year: the reference's year (the common case,
        // one calendar computation).
        Some(t) if (t - reference).abs() <= HALF_YEAR => Some(t),
        _ => [y - 1, y, y + 1]
            .into_iter()
            .filter_map(at)
            .min_by_key(|t| (t - reference).unsigned_abs()),
    }
}

/// Resolves a time of day without a date against a reference: the
/// reference's day, or the day before or after when that is nearer (a
/// line just after midnight read against one just before).
pub fn with_inferred_date(reference: i64, clock: (u32, u32, u32, u32)) -> Option<i64> {
    const DAY: i64 = 86_400 * NS;
    let day_start = reference.div_euclid(DAY) * DAY;
    let tod = i64::from(clock.0) * 3600 + i64::from(clock.1) * 60 + i64::from(clock.2);
    if clock.0 > 23 || clock.1 > 59 || clock.2 > 59 || clock.3 >= 1_000_000_000 {
        return None;
    }
    let t = day_start + tod * NS + i64::from(clock.3);
    let best = [t - DAY, t, t + DAY]
        .into_iter()
        .min_by_key(|c| (c - reference).unsigned_abs())?;
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::format_rfc3339;

    #[test]
    fn epoch_units() {
        assert_eq!(
            parse_epoch("1714568400.5533901"),
            Some(1_714_568_400_553_390_100)
        );
        assert_eq!(parse_epoch("1714568400"), Some(1_714_568_400 * NS));
        assert_eq!(
            parse_epoch("1714568400123"),
            Some(1_714_568_400_123_000_000)
        );
        assert_eq!(
            parse_epoch("1714568400123456"),
            Some(1_714_568_400_123_456_000)
        );
        assert_eq!(
            parse_epoch("1714568400123456789"),
            Some(1_714_568_400_123_456_789)
        );
        assert_eq!(parse_epoch("abc"), None);
        assert_eq!(parse_epoch("-5"), None);
        // The one-pass fast path's edges.
        assert_eq!(parse_epoch("1764000000.1"), Some(1_764_000_000_100_000_000));
        assert_eq!(
            parse_epoch("1764000000.0020071234567"),
            Some(1_764_000_000_002_007_123)
        );
        assert_eq!(parse_epoch("1764000000."), Some(1_764_000_000 * NS));
        assert_eq!(
            parse_epoch(" 1764000000.5 "),
            Some(1_764_000_000_500_000_000)
        );
        assert_eq!(parse_epoch(".5"), None);
        assert_eq!(parse_epoch("1764000000.5x"), None);
        assert_eq!(parse_epoch("17640x"), None);
        // Past i64 as digits: read as a float, saturated.
        assert_eq!(parse_epoch("99999999999999999999"), Some(i64::MAX));
        // Milliseconds with a fraction: read as a float.
        assert_eq!(
            parse_epoch("1714568400123.5"),
            Some(1_714_568_400_123_000_000)
        );
    }

    #[test]
    fn rfc3339_variants() {
        let z = parse_rfc3339("2024-05-01T12:00:00.553412876Z").unwrap();
        assert_eq!(z, 1_714_564_800_553_412_876);
        assert_eq!(parse_rfc3339("2024-05-01T15:00:00.553412876+0300"), Some(z));
        assert_eq!(
            parse_rfc3339("2024-05-01T15:00:00.553412876+03:00"),
            Some(z)
        );
        assert_eq!(parse_rfc3339("2024-05-01 12:00:00.553412876"), Some(z));
        assert_eq!(
            parse_rfc3339("2024-05-01T12:00:00Z"),
            Some(1_714_564_800 * NS)
        );
        assert_eq!(parse_rfc3339("not a time at all!!"), None);
    }

    #[test]
    fn the_fast_path_agrees_with_chrono() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..20_000 {
            let frac = match next(4) {
                0 => String::new(),
                k => format!(".{}", "123456789".get(..(k * 3) as usize).unwrap_or("1")),
            };
            let zone = ["Z", "+03:00", "-0130", "+23:59", "-00:00"][next(5) as usize];
            let s = format!(
                "{:04}-{:02}-{:02}{}{:02}:{:02}:{:02}{frac}{zone}",
                1900 + next(300),
                1 + next(13),
                1 + next(31),
                if next(2) == 0 { 'T' } else { ' ' },
                next(25),
                next(61),
                next(61),
            );
            let chrono = DateTime::parse_from_rfc3339(&s)
                .ok()
                .or_else(|| DateTime::parse_from_str(&s, "%Y-%m-%d %H:%M:%S%.f%z").ok())
                .or_else(|| DateTime::parse_from_str(&s, "%Y-%m-%dT%H:%M:%S%.f%z").ok())
                .and_then(|t| t.timestamp_nanos_opt());
            if let Some(fast) = fast_rfc3339(s.as_bytes()) {
                assert_eq!(Some(fast), chrono, "{s}");
            }
            assert_eq!(parse_rfc3339(&s), chrono, "{s}");
        }
        for ns in [
            0,
            -1,
            1_714_564_800 * NS,
            951_782_400 * NS - 1,
            4_102_444_800 * NS,
            i64::MAX,
            i64::MIN,
        ] {
            assert_eq!(
                year_of(ns),
                DateTime::from_timestamp_nanos(ns).year(),
                "{ns}"
            );
        }
        for y in [1970, 1999, 2000, 2024, 2100] {
            for (m, d) in [(1, 1), (2, 28), (3, 1), (12, 31)] {
                assert_eq!(
                    from_parts(y, m, d, 23, 59, 59, 999),
                    NaiveDate::from_ymd_opt(y, m, d)
                        .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 999))
                        .and_then(|t| Utc.from_utc_datetime(&t).timestamp_nanos_opt())
                );
            }
        }
    }

    #[test]
    fn inferred_year_rolls_over_new_year_both_ways() {
        let jan2 = parse_rfc3339("2025-01-02T00:00:00Z").unwrap();
        let t = with_inferred_year(jan2, 12, 31, (23, 59, 0, 0)).unwrap();
        assert_eq!(format_rfc3339(t), "2024-12-31T23:59:00.000Z");
        // A January line after a December one (the previous line's time
        // is the reference) is in the next year.
        let dec31 = parse_rfc3339("2024-12-31T23:59:58Z").unwrap();
        let t = with_inferred_year(dec31, 1, 1, (0, 0, 1, 0)).unwrap();
        assert_eq!(format_rfc3339(t), "2025-01-01T00:00:01.000Z");
        // A file modified in November holds lines from February.
        let nov = parse_rfc3339("2024-11-30T12:00:00Z").unwrap();
        let t = with_inferred_year(nov, 2, 1, (8, 0, 0, 0)).unwrap();
        assert_eq!(format_rfc3339(t), "2024-02-01T08:00:00.000Z");
        // 29 February in a leap year, against a reference in the next one.
        let mar = parse_rfc3339("2025-03-01T00:00:00Z").unwrap();
        let t = with_inferred_year(mar, 2, 29, (1, 0, 0, 0)).unwrap();
        assert_eq!(format_rfc3339(t), "2024-02-29T01:00:00.000Z");
    }

    #[test]
    fn a_time_of_day_takes_the_nearest_date() {
        let r = parse_rfc3339("2024-05-07T23:59:59Z").unwrap();
        let t = with_inferred_date(r, (0, 0, 2, 0)).unwrap();
        assert_eq!(format_rfc3339(t), "2024-05-08T00:00:02.000Z");
        let t = with_inferred_date(r, (23, 0, 0, 500_000_000)).unwrap();
        assert_eq!(format_rfc3339(t), "2024-05-07T23:00:00.500Z");
    }
}
