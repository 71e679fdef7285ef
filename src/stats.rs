//! Process-wide counters that several stages feed and `/metrics` reads:
//! kept here, not in the stage that happens to count first, so the server
//! depends on no source module to report them.
//!
//! And the registry's vocabulary: every stage writes what it counted as
//! [`Sample`]s, each naming its own metric (family, `kind` and labels), so
//! the name of a counter lives beside the counting, and the server exports
//! whatever samples it is given without knowing any stage's counters.

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

/// Where a sample goes on `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// `sigwatch_events_total{kind=…}`: a total that only grows.
    Events,
    /// `sigwatch_state{kind=…}`: a level now (alerts firing, queue depth).
    State,
    /// `sigwatch_signature_hits_total{rule,partition,group}`: signature hits of
    /// one group of a cluster-wide rule (for Prometheus rules over shards).
    GroupHits,
    /// `sigwatch_group_last_seen_seconds{rule,partition,group}`: when that
    /// group last logged anything (event time, s).
    GroupLastSeen,
}

/// One counted fact, as exported: its family, its labels (`kind` first for
/// [`Family::Events`] and [`Family::State`]) and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric family.
    pub family: Family,
    /// Label names and values, in order.
    pub labels: Vec<(&'static str, String)>,
    /// The value: a total for counters, a level for gauges.
    pub value: i64,
}

impl Sample {
    /// A total of `kind`.
    pub fn event(kind: &'static str, value: u64) -> Sample {
        Sample {
            family: Family::Events,
            labels: vec![("kind", kind.to_string())],
            value: i64::try_from(value).unwrap_or(i64::MAX),
        }
    }

    /// A level of `kind`.
    pub fn state(kind: &'static str, value: i64) -> Sample {
        Sample {
            family: Family::State,
            labels: vec![("kind", kind.to_string())],
            value,
        }
    }

    /// The same sample with one more label.
    pub fn with(mut self, name: &'static str, value: &str) -> Sample {
        self.labels.push((name, value.to_string()));
        self
    }
}

/// This module's process-wide counters, as samples.
pub fn samples(out: &mut Vec<Sample>) {
    out.push(Sample::event("truncated_lines", truncated_lines()));
    out.push(Sample::event("invalid_utf8_lines", invalid_utf8_lines()));
    out.push(Sample::event("shard_skipped", shard_skipped()));
}
