//! Sources: where lines come from. Reading is bounded: a line longer than
//! [`max_line_bytes`] (`--max-line-bytes`, default [`MAX_LINE_BYTES`]) is cut
//! (and counted), and invalid UTF-8 is replaced rather than rejected, so one
//! bad line never stops the stream.

pub mod block;
pub mod file;
pub mod loki;
pub mod replay;
pub mod stdin;

/// The wall clock in nanoseconds since the epoch.
pub fn wall_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}

/// Default longest line kept; the rest of a longer line is discarded and
/// counted.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The smallest line bound accepted (1 KiB): below it ordinary lines would
/// be cut.
pub const MIN_LINE_BYTES: usize = 1 << 10;

static MAX_LINE: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(MAX_LINE_BYTES);

/// Sets the line bound of every reader and of reassembled (CRI/Docker
/// partial, multi-line JSON) lines, once at start-up (`--max-line-bytes`).
/// Values below [`MIN_LINE_BYTES`] are raised to it.
pub fn set_max_line_bytes(n: usize) {
    MAX_LINE.store(n.max(MIN_LINE_BYTES), std::sync::atomic::Ordering::Relaxed);
}

static TRUNCATED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Counts one line cut at the line bound (every reader calls this, so the
/// total reaches `/metrics` whatever the source).
pub fn count_truncated() {
    TRUNCATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Lines cut at the line bound so far, over all readers of the process.
pub fn truncated_lines() -> u64 {
    TRUNCATED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The line bound in force (see [`set_max_line_bytes`]).
pub fn max_line_bytes() -> usize {
    MAX_LINE.load(std::sync::atomic::Ordering::Relaxed)
}
