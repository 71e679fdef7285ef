//! journalctl's short output (`May 01 12:00:40 host prog[pid]: …`) and
//! klog headers (`I0501 12:00:40.118204 1187 file.go:107] …`): stamps
//! without a year, completed from a reference time.

use super::console::is_caller;
use super::logfmt::parse_pairs;
use super::{decode, Fields, Format, Level, Payload};
use crate::decode::quick::read_quoted;
use crate::decode::time::{self, parse_clock, with_inferred_year};
use serde_json::Value;

/// The stamp of a journal line (`May 01 12:00:40 …`), its year inferred
/// from `reference` (default: now): (time, the reference used, the rest).
fn syslog_stamp(t: &str, reference: Option<i64>) -> Option<(Option<i64>, i64, &str)> {
    let month = time::month_from_abbrev(t.get(..3)?)?;
    let rest = t.get(4..)?.trim_start();
    let (day, rest) = rest.split_once(' ')?;
    let day: u32 = day.parse().ok()?;
    let (clock, rest) = rest.split_once(' ')?;
    let clock = parse_clock(clock)?;
    let reference = reference.unwrap_or_else(crate::clock::wall_ns);
    Some((
        with_inferred_year(reference, month, day, clock),
        reference,
        rest,
    ))
}

/// `May 01 12:00:40 node-a kubelet[1187]: rest` (journalctl short output).
pub(super) fn decode_syslog(t: &str, reference: Option<i64>) -> Option<Payload> {
    let (time, reference, rest) = syslog_stamp(t, reference)?;
    let (host, rest) = rest.split_once(' ')?;
    let (prog, inner) = rest.split_once(": ")?;
    let program = prog.split('[').next().unwrap_or(prog);
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

/// klog: `I0501 12:00:40.118204    1187 prober.go:107] "Probe failed" k="v"`.
pub(super) fn decode_klog(t: &str, reference: Option<i64>) -> Option<Payload> {
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

/// The time of a journal line (`May 01 12:00:40 host prog[pid]: …`),
/// preferring an inner klog stamp, without decoding the body.
pub(super) fn syslog_time(t: &str, reference: Option<i64>) -> Option<i64> {
    let (outer, reference, rest) = syslog_stamp(t, reference)?;
    let b = rest.as_bytes();
    let inner = memchr::memchr_iter(b':', b)
        .find(|&i| b.get(i + 1) == Some(&b' '))
        .and_then(|i| klog_time(&rest[i + 2..], outer.or(Some(reference))));
    inner.or(outer)
}

/// The time of a klog header (`I0501 12:00:40.118204 …`), body untouched.
pub(super) fn klog_time(t: &str, reference: Option<i64>) -> Option<i64> {
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
    with_inferred_year(
        reference.unwrap_or_else(crate::clock::wall_ns),
        month,
        day,
        clock,
    )
}
