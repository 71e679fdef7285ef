//! Sources: where lines come from. Reading is bounded: a line longer than
//! [`MAX_LINE_BYTES`] is cut (and counted), and invalid UTF-8 is replaced
//! rather than rejected, so one bad line never stops the stream.

pub mod file;
pub mod loki;
pub mod replay;
pub mod stdin;

/// The wall clock in nanoseconds since the epoch.
pub fn wall_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}

/// Longest line kept; the rest of a longer line is discarded and counted.
pub const MAX_LINE_BYTES: usize = 1 << 20;
