//! A fixed time range read from Loki page by page, for `sigwatch replay
//! --loki`: "what would this rule have paged last week?".
//!
//! The paging is the live poller's (`start` inclusive, `end` exclusive, a
//! full page restarts *at* its last timestamp), but the dedup differs: a
//! range is read once, front to back, so only the entries of the last
//! timestamp of the previous page can come again, and those are all it
//! remembers. Memory is one page per query, whatever the range's size.
//! Several queries are merged by time in the order a single query's page
//! has (time, stream labels, line), so the same range always replays the
//! same way.

use super::poll::Poller;
use super::{Entry, LokiConfig, LokiError, MAX_LIMIT};
use std::collections::{HashSet, VecDeque};

/// Counters of one range read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeStats {
    /// Requests sent (retries included).
    pub requests: u64,
    /// Entries read.
    pub entries: u64,
    /// Entries received again at a page boundary and dropped.
    pub duplicates: u64,
    /// Entries possibly skipped: a timestamp holding more than 5000 entries.
    pub skipped_saturated: u64,
    /// Transient failures retried.
    pub retries: u64,
}

/// One query's range, read forward one page at a time.
pub struct Range {
    poller: Poller,
    start: i64,
    end: i64,
    limit: u32,
    /// The last timestamp emitted and the keys of its entries: the only
    /// ones the next page (which starts there) can repeat.
    boundary: (i64, HashSet<u64>),
    done: bool,
    buf: VecDeque<Entry>,
    stats: RangeStats,
}

/// How often a transient failure (429, 5xx, a timeout) is retried before
/// the replay gives up: a replay has no cursor to resume from, so it fails
/// clearly instead of waiting forever.
pub const RETRIES: u32 = 6;

impl Range {
    /// The range `[from, to)` (ns) of `query`.
    pub fn new(cfg: LokiConfig, query: &str, from: i64, to: i64) -> Result<Range, LokiError> {
        if to <= from {
            return Err(LokiError::Setup(format!(
                "the range ends ({}) before it starts ({})",
                crate::clock::format_rfc3339(to),
                crate::clock::format_rfc3339(from)
            )));
        }
        let limit = cfg.limit.clamp(1, MAX_LIMIT);
        Ok(Range {
            poller: Poller::new(cfg, query, from)?,
            start: from,
            end: to,
            limit,
            boundary: (i64::MIN, HashSet::new()),
            done: false,
            buf: VecDeque::new(),
            stats: RangeStats::default(),
        })
    }

    /// Counts its reads on /metrics under `query` (a shard's narrowed
    /// selector stands for its query).
    pub fn metered_as(mut self, query: &str) -> Range {
        self.poller = self.poller.metered_as(query);
        self
    }

    /// The query.
    pub fn query(&self) -> &str {
        self.poller.query()
    }

    /// Counters.
    pub fn stats(&self) -> &RangeStats {
        &self.stats
    }

    /// The next page's new entries, in forward order; None at the end of
    /// the range. A page may be empty only at the end.
    pub async fn next_page(&mut self) -> Result<Option<Vec<Entry>>, LokiError> {
        loop {
            if self.done {
                return Ok(None);
            }
            let page = self.fetch_retrying().await?;
            let n = page.len();
            let first = page.first().map(|e| e.ts);
            let last = page.last().map(|e| e.ts);
            let saturated = n as u32 >= self.limit && first == last;
            let mut out = Vec::with_capacity(n);
            let mut keys = HashSet::new();
            for e in page {
                let key = e.key();
                if Some(e.ts) == last {
                    keys.insert(key);
                }
                if e.ts == self.boundary.0 && self.boundary.1.contains(&key) {
                    self.stats.duplicates += 1;
                    continue;
                }
                out.push(e);
            }
            match last {
                Some(t) if t == self.boundary.0 => self.boundary.1.extend(keys),
                Some(t) => self.boundary = (t, keys),
                None => {}
            }
            if (n as u32) < self.limit {
                self.done = true;
            } else if let Some(t) = last {
                if saturated && self.limit < MAX_LIMIT {
                    // One timestamp fills the page: ask for more at once.
                    self.limit = self.limit.saturating_mul(2).min(MAX_LIMIT);
                    self.start = t;
                } else if saturated {
                    self.stats.skipped_saturated += 1;
                    tracing::warn!(query = %self.query(), at = %crate::clock::format_rfc3339(t), "More than 5000 entries share one timestamp; some may be skipped.");
                    self.start = t + 1;
                } else {
                    self.start = t;
                }
            }
            self.stats.entries += out.len() as u64;
            if !out.is_empty() || self.done {
                return Ok(Some(out));
            }
        }
    }

    async fn fetch_retrying(&mut self) -> Result<Vec<Entry>, LokiError> {
        let mut failures = 0;
        loop {
            self.stats.requests += 1;
            match self.poller.fetch(self.start, self.end, self.limit).await {
                Err(LokiError::Transient(e)) if failures < RETRIES => {
                    failures += 1;
                    self.stats.retries += 1;
                    tracing::warn!(query = %self.query(), failures, error = %e, "Loki request failed; retrying.");
                    tokio::time::sleep(super::backoff(failures)).await;
                }
                other => return other,
            }
        }
    }

    /// Fetches a page when no entry is held and the range goes on.
    async fn fill(&mut self) -> Result<(), LokiError> {
        while self.buf.is_empty() {
            match self.next_page().await? {
                Some(page) => self.buf.extend(page),
                None => return Ok(()),
            }
        }
        Ok(())
    }
}

/// Several ranges merged into one stream of entries by (time, stream
/// labels, line): the order one query's page has.
pub struct Merged {
    ranges: Vec<Range>,
}

impl Merged {
    /// The ranges to merge.
    pub fn new(ranges: Vec<Range>) -> Merged {
        Merged { ranges }
    }

    /// Counters of each query.
    pub fn stats(&self) -> Vec<(String, RangeStats)> {
        self.ranges
            .iter()
            .map(|r| (r.query().to_string(), r.stats().clone()))
            .collect()
    }

    /// Up to `max` next entries in merged order; empty at the end of every
    /// range.
    pub async fn next_batch(&mut self, max: usize) -> Result<Vec<Entry>, LokiError> {
        let mut out = Vec::new();
        while out.len() < max.max(1) {
            for r in &mut self.ranges {
                r.fill().await?;
            }
            let best = (0..self.ranges.len())
                .filter_map(|i| self.ranges[i].buf.front().map(|e| (i, e)))
                .min_by(|a, b| order(a.1, b.1))
                .map(|(i, _)| i);
            let Some(b) = best else { break };
            if let Some(e) = self.ranges[b].buf.pop_front() {
                out.push(e);
            }
        }
        Ok(out)
    }
}

fn order(a: &Entry, b: &Entry) -> std::cmp::Ordering {
    a.ts.cmp(&b.ts)
        .then_with(|| a.labels.cmp(&b.labels))
        .then_with(|| a.line.cmp(&b.line))
}
