//! What this process reads from Loki, per query: requests, bytes and lines
//! of `query_range` and the tail, series refreshes, the streams a shard
//! owns and the selectors it asks for them with. Kept process-wide (the
//! pollers, tails and range readers run on tasks of their own) and read by
//! the live loop's publication to /metrics, so "how much does each shard
//! download" is a Prometheus query, not a guess.

use crate::stats::Sample;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One query's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryMeter {
    /// Requests to `query_range` and `series` (and tail connections).
    pub requests: u64,
    /// Response bytes read (bodies and tail frames).
    pub bytes: u64,
    /// Entries read (before any shard drops them).
    pub lines: u64,
    /// Series (stream discovery) refreshes answered.
    pub series_refreshes: u64,
    /// Streams that became this shard's.
    pub streams_added: u64,
    /// Streams that left (no line in the read window).
    pub streams_dropped: u64,
    /// Times the shard fell back to reading every stream and dropping the
    /// others (the series API refused, or no selector could name them).
    pub fallbacks: u64,
    /// Streams this shard owns now.
    pub streams_owned: i64,
    /// Queries (selector batches) it reads them with now.
    pub selector_batches: i64,
}

static METERS: Mutex<BTreeMap<String, QueryMeter>> = Mutex::new(BTreeMap::new());

/// Changes `query`'s counts.
pub fn with(query: &str, f: impl FnOnce(&mut QueryMeter)) {
    if let Ok(mut m) = METERS.lock() {
        f(m.entry(query.to_string()).or_default());
    }
}

/// Counts one answered read of `bytes` holding `lines` entries.
pub fn read(query: &str, bytes: usize, lines: usize) {
    with(query, |m| {
        m.requests += 1;
        m.bytes += bytes as u64;
        m.lines += lines as u64;
    });
}

/// A copy of `query`'s counts.
pub fn get(query: &str) -> QueryMeter {
    METERS
        .lock()
        .map(|m| m.get(query).cloned().unwrap_or_default())
        .unwrap_or_default()
}

/// Every query's counts as samples (`sigwatch_events_total{kind="loki_…",
/// query}` and `sigwatch_state{kind="loki_streams_owned"|
/// "loki_selector_batches", query}`).
pub fn samples(out: &mut Vec<Sample>) {
    let Ok(m) = METERS.lock() else { return };
    for (q, c) in m.iter() {
        for (kind, v) in [
            ("loki_requests", c.requests),
            ("loki_bytes", c.bytes),
            ("loki_lines", c.lines),
            ("loki_series_refreshes", c.series_refreshes),
            ("loki_streams_added", c.streams_added),
            ("loki_streams_dropped", c.streams_dropped),
            ("loki_shard_fallbacks", c.fallbacks),
        ] {
            out.push(Sample::event(kind, v).with("query", q));
        }
        if c.series_refreshes > 0 || c.fallbacks > 0 {
            out.push(Sample::state("loki_streams_owned", c.streams_owned).with("query", q));
            out.push(Sample::state("loki_selector_batches", c.selector_batches).with("query", q));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_add_up_per_query_and_become_samples() {
        let q = "{meter_test=\"a\"}";
        read(q, 100, 3);
        read(q, 50, 2);
        with(q, |m| {
            m.series_refreshes += 1;
            m.streams_owned = 4;
        });
        let m = get(q);
        assert_eq!((m.requests, m.bytes, m.lines), (2, 150, 5));
        let mut out = Vec::new();
        samples(&mut out);
        let find = |kind: &str| {
            out.iter()
                .find(|s| {
                    s.labels[0].1 == kind && s.labels.iter().any(|(k, v)| *k == "query" && v == q)
                })
                .map(|s| s.value)
        };
        assert_eq!(find("loki_bytes"), Some(150));
        assert_eq!(find("loki_lines"), Some(5));
        assert_eq!(find("loki_streams_owned"), Some(4));
    }
}
