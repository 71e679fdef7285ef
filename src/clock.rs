//! The wall clock, in one place. Detection runs on event time; the wall
//! clock only stamps live arrivals, drives idle ticks, backoff jitter and
//! health heartbeats. Every stage that needs it imports this small module,
//! so none of them depends on another stage for the time of day. Times
//! travel as nanoseconds; [`format_rfc3339`] writes them at the edges (logs,
//! notifications, the report).

/// Formats nanoseconds as RFC 3339 UTC with millisecond precision.
pub fn format_rfc3339(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns)
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// The wall clock in nanoseconds since the Unix epoch.
pub fn wall_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}

/// An instant as a notification carries it: nanoseconds for the process
/// (millisecond precision, as written) and its RFC 3339 text, made once,
/// for receivers. It serializes as the text, so the schema is a string;
/// stages read [`Stamp::ns`] instead of parsing the text back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stamp {
    ns: Option<i64>,
    text: String,
}

impl Stamp {
    /// The instant `ns`, kept to the millisecond its text shows.
    pub fn at(ns: i64) -> Stamp {
        Stamp {
            ns: Some(ns.div_euclid(1_000_000).saturating_mul(1_000_000)),
            text: format_rfc3339(ns),
        }
    }

    /// Nanoseconds since the Unix epoch; None for a text that is not an
    /// RFC 3339 time (only a hand-made notification has one).
    pub fn ns(&self) -> Option<i64> {
        self.ns
    }

    /// The RFC 3339 text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl From<&str> for Stamp {
    fn from(text: &str) -> Stamp {
        Stamp {
            ns: chrono::DateTime::parse_from_rfc3339(text)
                .ok()
                .and_then(|t| t.timestamp_nanos_opt()),
            text: text.to_string(),
        }
    }
}

impl From<String> for Stamp {
    fn from(text: String) -> Stamp {
        Stamp::from(text.as_str())
    }
}

impl std::ops::Deref for Stamp {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for Stamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq<str> for Stamp {
    fn eq(&self, other: &str) -> bool {
        self.text == other
    }
}

impl PartialEq<&str> for Stamp {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

impl PartialEq<String> for Stamp {
    fn eq(&self, other: &String) -> bool {
        self.text == *other
    }
}

impl serde::Serialize for Stamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for Stamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Stamp, D::Error> {
        Ok(Stamp::from(String::deserialize(d)?))
    }
}

/// An instant given on the command line (`--from`, `--to`), in ns: RFC 3339
/// (`2026-11-25T14:00:00Z`), a date (`2026-11-25`, midnight UTC), Unix
/// seconds, milliseconds or nanoseconds (told apart by their size), `now`,
/// or a duration back from `now` (`7d`, `90m`).
pub fn parse_instant(s: &str, now: i64) -> Result<i64, String> {
    let t = s.trim();
    if t == "now" {
        return Ok(now);
    }
    if let Ok(d) = chrono::DateTime::parse_from_rfc3339(t) {
        return d
            .timestamp_nanos_opt()
            .ok_or_else(|| format!("{t:?} is out of range"));
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return d
            .and_hms_opt(0, 0, 0)
            .and_then(|d| d.and_utc().timestamp_nanos_opt())
            .ok_or_else(|| format!("{t:?} is out of range"));
    }
    if let Ok(n) = t.parse::<i64>() {
        return Ok(match n.unsigned_abs() {
            0..=99_999_999_999 => n.saturating_mul(1_000_000_000),
            100_000_000_000..=99_999_999_999_999 => n.saturating_mul(1_000_000),
            100_000_000_000_000..=99_999_999_999_999_999 => n.saturating_mul(1_000),
            _ => n,
        });
    }
    match humantime::parse_duration(t) {
        Ok(d) => Ok(now.saturating_sub(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))),
        Err(_) => Err(format!(
            "cannot read the time {t:?}: write RFC 3339 (2026-11-25T14:00:00Z), a date (2026-11-25), Unix seconds, now, or a duration back from now (24h, 7d)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_is_its_text_and_its_nanoseconds_to_the_millisecond() {
        let s = Stamp::at(1_714_564_800_553_412_876);
        assert_eq!(s.as_str(), "2024-05-01T12:00:00.553Z");
        assert_eq!(s.ns(), Some(1_714_564_800_553_000_000));
        assert_eq!(Stamp::from(s.as_str()), s, "text and ns round-trip");
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            "\"2024-05-01T12:00:00.553Z\""
        );
        let back: Stamp = serde_json::from_str("\"2024-05-01T12:00:00.553Z\"").unwrap();
        assert_eq!(back, s);
        assert_eq!(Stamp::from("later").ns(), None);
        assert_eq!(Stamp::from("later"), "later");
        assert_eq!(Stamp::at(-1).ns(), Some(-1_000_000));
    }

    #[test]
    fn instants_on_the_command_line() {
        let now = 1_764_000_000_000_000_000;
        let at = |s: &str| parse_instant(s, now);
        assert_eq!(at("2025-11-24T16:00:00Z"), Ok(1_764_000_000_000_000_000));
        assert_eq!(
            at("2025-11-24T17:00:00+01:00"),
            Ok(1_764_000_000_000_000_000)
        );
        assert_eq!(at("2025-11-24"), Ok(1_763_942_400_000_000_000));
        assert_eq!(at("1764000000"), Ok(now));
        assert_eq!(at("1764000000000"), Ok(now));
        assert_eq!(at("1764000000000000000"), Ok(now));
        assert_eq!(at("now"), Ok(now));
        assert_eq!(at("1h"), Ok(now - 3_600_000_000_000));
        assert_eq!(at("7d"), Ok(now - 7 * 86_400_000_000_000));
        assert!(at("yesterday").unwrap_err().contains("RFC 3339"));
    }
}
