//! Durations written as `30s`, `10m`, `1h` in rule and configuration files.
//!
//! A newtype so that a malformed duration is reported by the YAML parser with
//! the exact line and column of the bad value.

use serde::{Deserialize, Deserializer};
use std::fmt;

/// A non-negative duration in nanoseconds, parsed from humantime syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub i64);

impl Dur {
    /// Nanoseconds.
    pub fn ns(self) -> i64 {
        self.0
    }
    /// Builds a duration from whole seconds.
    pub const fn secs(s: i64) -> Dur {
        Dur(s * 1_000_000_000)
    }
    /// Parses `30s`, `10m`, `1h30m`, `250ms`; a bare `0` is zero.
    pub fn parse(s: &str) -> Result<Dur, String> {
        let t = s.trim();
        if t == "0" {
            return Ok(Dur(0));
        }
        let d = humantime::parse_duration(t)
            .map_err(|e| format!("invalid duration {t:?}: {e} (write e.g. 30s, 10m, 1h)"))?;
        i64::try_from(d.as_nanos())
            .map(Dur)
            .map_err(|_| format!("duration {t:?} is too long"))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        format_duration(self.0, f)
    }
}

/// Writes a duration the way an operator reads it: `7m12s`, `45s`, `2h3m`.
pub fn format_duration(ns: i64, f: &mut impl fmt::Write) -> fmt::Result {
    let total = ns.max(0) / 1_000_000_000;
    let (h, m, s) = (total / 3600, (total % 3600) / 60, total % 60);
    if h > 0 {
        write!(f, "{h}h{m}m")
    } else if m > 0 {
        if s > 0 {
            write!(f, "{m}m{s}s")
        } else {
            write!(f, "{m}m")
        }
    } else {
        write!(f, "{s}s")
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as 30s, 10m or 1h")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Dur, E> {
                Dur::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Dur, E> {
                if v == 0 {
                    Ok(Dur(0))
                } else {
                    Err(E::custom(format!(
                        "duration {v} has no unit: write {v}s, {v}m or {v}h"
                    )))
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Dur, E> {
                self.visit_u64(v.max(1) as u64)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(Dur::parse("30s").unwrap(), Dur::secs(30));
        assert_eq!(Dur::parse("10m").unwrap(), Dur::secs(600));
        assert_eq!(Dur::parse("1h30m").unwrap(), Dur::secs(5400));
        assert_eq!(Dur::parse("250ms").unwrap(), Dur(250_000_000));
        assert_eq!(Dur::parse("0").unwrap(), Dur(0));
        assert!(Dur::parse("10").is_err());
        assert!(Dur::parse("ten minutes").is_err());
    }

    #[test]
    fn formats_for_humans() {
        let s = |n: i64| Dur::secs(n).to_string();
        assert_eq!(s(45), "45s");
        assert_eq!(s(432), "7m12s");
        assert_eq!(s(600), "10m");
        assert_eq!(s(7380), "2h3m");
    }
}
