//! The wall clock, in one place. Detection runs on event time; the wall
//! clock only stamps live arrivals, drives idle ticks, backoff jitter and
//! health heartbeats. Every stage that needs it imports this small module,
//! so none of them depends on another stage for the time of day.

/// The wall clock in nanoseconds since the Unix epoch.
pub fn wall_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}
