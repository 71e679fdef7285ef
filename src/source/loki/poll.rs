//! Forward paging over `GET /loki/api/v1/query_range`.
//!
//! Each poll covers `[cursor, now - lag)`. A page is complete only when it
//! holds fewer than `limit` entries; otherwise the next page restarts *at*
//! the page's last timestamp (`start` is inclusive) and drops what was
//! already emitted, keyed by (stream labels, ts, line). A page filled by one
//! timestamp cannot move forward, so the limit is raised (to Loki's 5000
//! cap) rather than looping. Now and then the poller re-scans an overlap
//! behind the cursor for lines that arrived later than `lag`; a bounded LRU
//! of recent keys drops the repeats.

use super::{parse_streams, Entry, LokiConfig, LokiError, MAX_LIMIT};
use lru::LruCache;
use std::num::NonZeroUsize;

/// A duration in nanoseconds, saturating instead of wrapping.
fn ns(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Recent entry keys remembered for dedup (boundary and overlap).
pub const DEDUP_KEYS: usize = 200_000;

/// Entries one poll returns at most: a longer window (a catch-up) is read
/// in parts of about this many, so a backlog never sits in memory whole.
pub const POLL_ENTRIES: usize = 5_000;

/// Counters of one poller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PollStats {
    /// Requests sent.
    pub requests: u64,
    /// Entries emitted.
    pub entries: u64,
    /// Entries received again and dropped by dedup.
    pub duplicates: u64,
    /// Pages saturated by one timestamp (limit raised).
    pub saturated_pages: u64,
    /// Entries possibly skipped: a timestamp holding more than 5000 entries.
    pub skipped_saturated: u64,
}

/// One query's poller.
pub struct Poller {
    cfg: LokiConfig,
    query: String,
    client: reqwest::Client,
    cursor: i64,
    limit: u32,
    seen: LruCache<u64, ()>,
    last_rescan: i64,
    /// Where this poller started: a re-scan never reaches before it, since
    /// what lies before was processed by a previous run whose dedup keys
    /// are gone (it would be processed twice).
    floor: i64,
    stats: PollStats,
    /// The query its reads are counted under on /metrics (its own, or the
    /// query a shard's narrowed selector stands for).
    meter: String,
    /// A window read in part: (next start, end, a re-scan).
    partial: Option<(i64, i64, bool)>,
}

impl Poller {
    /// A poller starting at `cursor` (ns; from a checkpoint, or now − since).
    pub fn new(cfg: LokiConfig, query: &str, cursor: i64) -> Result<Poller, LokiError> {
        Poller::resumed(cfg, query, cursor, cursor, DEDUP_KEYS)
    }

    /// A poller at `cursor` whose re-scans may reach back to `floor` (what
    /// lies between was read by this process, whose caller drops the
    /// repeats), remembering `dedup` keys of its own (at least the page
    /// boundary's).
    pub fn resumed(
        cfg: LokiConfig,
        query: &str,
        cursor: i64,
        floor: i64,
        dedup: usize,
    ) -> Result<Poller, LokiError> {
        let client = super::http_client(&cfg)?;
        super::check_url(&cfg.url)?;
        let limit = cfg.limit.clamp(1, MAX_LIMIT);
        let cap = NonZeroUsize::new(dedup.max(2 * MAX_LIMIT as usize)).unwrap_or(NonZeroUsize::MIN);
        Ok(Poller {
            cfg,
            query: query.to_string(),
            client,
            cursor,
            limit,
            seen: LruCache::new(cap),
            last_rescan: cursor,
            floor: floor.min(cursor),
            stats: PollStats::default(),
            meter: query.to_string(),
            partial: None,
        })
    }

    /// Counts its reads on /metrics under `query`.
    pub fn metered_as(mut self, query: &str) -> Poller {
        self.meter = query.to_string();
        self
    }

    /// The cursor: everything before it has been emitted.
    pub fn cursor(&self) -> i64 {
        self.cursor
    }

    /// The query.
    pub fn query(&self) -> &str {
        &self.query
    }

    /// Counters.
    pub fn stats(&self) -> &PollStats {
        &self.stats
    }

    /// One `query_range` request for `[start, end)`, forward, at most
    /// `limit` entries, parsed into forward order.
    pub(super) async fn fetch(
        &mut self,
        start: i64,
        end: i64,
        limit: u32,
    ) -> Result<Vec<Entry>, LokiError> {
        self.stats.requests += 1;
        let url = format!("{}/loki/api/v1/query_range", self.cfg.url);
        let req = self
            .client
            .get(&url)
            .query(&[
                ("query", self.query.as_str()),
                ("start", &start.to_string()),
                ("end", &end.to_string()),
                ("limit", &limit.to_string()),
                ("direction", "forward"),
            ])
            .header("X-Loki-Response-Encoding-Flags", "categorize-labels");
        let req = super::authorize(req, &self.cfg);
        let body = super::send(req).await?;
        let entries = parse_streams(&body)?;
        super::meter::read(&self.meter, body.len(), entries.len());
        Ok(entries)
    }

    /// Polls once at wall time `now` (ns): returns new entries in forward
    /// order and advances the cursor. A window holding more than
    /// [`POLL_ENTRIES`] entries (a catch-up after a start or an outage) is
    /// returned a part at a time — [`Poller::behind`] says more is due at
    /// once — so memory stays bounded whatever the backlog. On error
    /// nothing is lost: the cursor stays where it was and the next poll
    /// retries from there.
    pub async fn poll(&mut self, now: i64) -> Result<Vec<Entry>, LokiError> {
        let (mut start, end, rescan) = match self.partial {
            Some(p) => p,
            None => {
                let end = now.saturating_sub(ns(self.cfg.lag));
                if end <= self.cursor {
                    return Ok(Vec::new());
                }
                let rescan = now.saturating_sub(self.last_rescan) >= ns(self.cfg.rescan_every);
                let start = if rescan {
                    (self.cursor - ns(self.cfg.overlap)).max(self.floor)
                } else {
                    self.cursor
                };
                (start, end, rescan)
            }
        };
        let mut out = Vec::new();
        let mut limit = self.limit;
        loop {
            let page = self.fetch(start, end, limit).await?;
            let n = page.len();
            let last = page.last().map(|e| e.ts);
            let saturated = n as u32 >= limit && page.first().map(|e| e.ts) == last;
            for e in page {
                if self.seen.put(e.key(), ()).is_some() {
                    self.stats.duplicates += 1;
                    continue;
                }
                out.push(e);
            }
            if (n as u32) < limit {
                break;
            }
            let Some(t) = last else { break };
            if saturated {
                // One timestamp fills the page: restarting at it would loop.
                self.stats.saturated_pages += 1;
                if limit < MAX_LIMIT {
                    limit = (limit.saturating_mul(2)).min(MAX_LIMIT);
                    continue;
                }
                // More than 5000 entries at one nanosecond: move past it.
                self.stats.skipped_saturated += 1;
                tracing::warn!(query = %self.query, at = %chrono::DateTime::from_timestamp_nanos(t).to_rfc3339_opts(chrono::SecondsFormat::Nanos, true), "More than 5000 entries share one timestamp; some may be skipped.");
                start = t + 1;
            } else {
                start = t;
            }
            if out.len() >= POLL_ENTRIES {
                // Everything before `start` is out (its own timestamp's
                // entries are remembered); the rest of the window next.
                self.partial = Some((start, end, rescan));
                self.cursor = self.cursor.max(start);
                self.stats.entries += out.len() as u64;
                return Ok(out);
            }
        }
        self.partial = None;
        self.cursor = end;
        if rescan {
            self.last_rescan = now;
        }
        self.stats.entries += out.len() as u64;
        Ok(out)
    }

    /// Whether the last poll left part of its window for the next (poll
    /// again at once).
    pub fn behind(&self) -> bool {
        self.partial.is_some()
    }
}
