//! Process-wide counters that several stages feed and `/metrics` reads:
//! kept here, not in the stage that happens to count first, so the server
//! depends on no source module to report them.

use std::sync::atomic::{AtomicU64, Ordering};

static TRUNCATED: AtomicU64 = AtomicU64::new(0);

/// Counts one line cut at the line bound (every reader calls this, so the
/// total reaches `/metrics` whatever the source).
pub fn count_truncated() {
    TRUNCATED.fetch_add(1, Ordering::Relaxed);
}

/// Lines cut at the line bound so far, over all readers of the process.
pub fn truncated_lines() -> u64 {
    TRUNCATED.load(Ordering::Relaxed)
}

static INVALID_UTF8: AtomicU64 = AtomicU64::new(0);

/// Counts one line whose invalid UTF-8 was replaced (every reader calls
/// this).
pub fn count_invalid_utf8() {
    INVALID_UTF8.fetch_add(1, Ordering::Relaxed);
}

/// Lines repaired from invalid UTF-8 so far, over all readers.
pub fn invalid_utf8_lines() -> u64 {
    INVALID_UTF8.load(Ordering::Relaxed)
}

static SHARD_SKIPPED: AtomicU64 = AtomicU64::new(0);

/// Counts entries left to other shards (`--shard I/N`).
pub fn count_shard_skipped(n: u64) {
    SHARD_SKIPPED.fetch_add(n, Ordering::Relaxed);
}

/// Entries left to other shards so far.
pub fn shard_skipped() -> u64 {
    SHARD_SKIPPED.load(Ordering::Relaxed)
}
