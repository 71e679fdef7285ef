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
