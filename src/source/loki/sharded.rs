//! A shard that reads only its own streams (`--shard I/N`). Each query's
//! streams are listed by the series API (over the read window, again every
//! refresh and soon after a line of a stream it did not list arrives); the
//! shard keeps those whose label hash is its own and asks Loki with
//! selectors that name only them (`selector`). A stream that appears is
//! read from the window's start by a catch-up reader, so it loses no line;
//! one that leaves is dropped; both are counted. When the series API is
//! refused or no selector can name the streams, the shard reads the query
//! whole and drops the others' lines (logged once, counted), as it did
//! before: never silently wrong, at worst as costly as before.
//!
//! The readers of one query are driven together, so the query's cursor —
//! what a checkpoint records — is where all of them are; it never moves
//! back. What several readers deliver twice (a catch-up, a rebuilt reader's
//! overlap) is dropped by one LRU of (stream, time, line) keys.

use super::poll::{Poller, DEDUP_KEYS};
use super::selector::{self, Labels};
use super::{Batch, Entry, Health, LokiConfig, LokiError};
use crate::source::shard::Shard;
use lru::LruCache;
use std::collections::{BTreeSet, HashSet};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

/// How often a shard lists its queries' streams, by default (`--shard-refresh`).
pub const REFRESH: Duration = Duration::from_secs(30);

/// The shortest time between two listings that an unknown stream asks for.
const MIN_REFRESH_GAP: i64 = 5_000_000_000;

/// Keys each of a shard's readers remembers itself (its page boundary's):
/// the shard's own LRU covers overlaps and catch-ups.
const READER_KEYS: usize = 2 * super::MAX_LIMIT as usize;

fn ns(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// How a query is read now.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reading {
    /// Narrowed selectors naming the owned streams by `label` (none when
    /// the shard owns no stream).
    Narrowed {
        label: Option<String>,
        queries: Vec<String>,
    },
    /// The whole query, other shards' lines dropped on arrival; why.
    Whole(String),
}

/// One query's streams as this shard sees them: discovery, ownership, the
/// reading plan, and the dedup of what it emitted.
struct Streams {
    cfg: LokiConfig,
    client: reqwest::Client,
    query: String,
    shard: Shard,
    known: HashSet<Labels>,
    owned: HashSet<Labels>,
    reading: Option<Reading>,
    seen: LruCache<u64, ()>,
}

impl Streams {
    fn new(cfg: LokiConfig, query: &str, shard: Shard) -> Result<Streams, LokiError> {
        Ok(Streams {
            client: super::http_client(&cfg)?,
            cfg,
            query: query.to_string(),
            shard,
            known: HashSet::new(),
            owned: HashSet::new(),
            reading: None,
            seen: LruCache::new(NonZeroUsize::new(DEDUP_KEYS).unwrap_or(NonZeroUsize::MIN)),
        })
    }

    /// The queries the reading asks.
    fn queries(&self) -> Vec<String> {
        match &self.reading {
            Some(Reading::Narrowed { queries, .. }) => queries.clone(),
            Some(Reading::Whole(_)) => vec![self.query.clone()],
            None => Vec::new(),
        }
    }

    /// Lists the streams over `[from, now]` and plans the reading. Returns
    /// the streams newly owned while narrowed (to be read from `from`).
    /// A failure keeps the reading there was (none before the first).
    async fn refresh(&mut self, from: i64, now: i64) -> Result<Vec<Labels>, LokiError> {
        let Some(sel) = selector::stream_selector(&self.query) else {
            self.fall_back(format!("{:?} has no stream selector", self.query));
            return Ok(Vec::new());
        };
        let listed = match super::series::series(
            &self.client,
            &self.cfg,
            &sel,
            from,
            now,
            &self.query,
        )
        .await
        {
            Ok(l) => l,
            Err(LokiError::Config { status, body }) => {
                self.fall_back(format!(
                    "Loki refused the series API (HTTP {status}: {body})"
                ));
                return Ok(Vec::new());
            }
            Err(e) => return Err(e),
        };
        let was_narrowed = matches!(self.reading, Some(Reading::Narrowed { .. }));
        let (reading, owned) = match selector::plan(&self.query, &self.shard, &listed) {
            Ok(p) => (
                Reading::Narrowed {
                    label: p.label,
                    queries: p.queries,
                },
                p.owned,
            ),
            Err(why) => {
                let owned = listed.iter().filter(|s| self.shard.owns(s)).cloned();
                (Reading::Whole(why), owned.collect())
            }
        };
        let owned: HashSet<Labels> = owned.into_iter().collect();
        let added: Vec<Labels> = owned.difference(&self.owned).cloned().collect();
        let dropped = self.owned.difference(&owned).count();
        super::meter::with(&self.query, |m| {
            m.streams_added += added.len() as u64;
            m.streams_dropped += dropped as u64;
            m.streams_owned = owned.len() as i64;
        });
        if !added.is_empty() || dropped > 0 {
            tracing::info!(query = %self.query, added = added.len(), dropped, owned = owned.len(), "The shard's streams changed.");
        }
        if let Reading::Whole(why) = &reading {
            self.fall_back(why.clone());
        } else {
            self.reading = Some(reading);
        }
        self.known = listed.into_iter().collect();
        self.owned = owned;
        let n = self.queries().len() as i64;
        super::meter::with(&self.query, |m| m.selector_batches = n);
        Ok(if was_narrowed { added } else { Vec::new() })
    }

    /// Reads the query whole from now on (logged and counted once per
    /// change into this mode).
    fn fall_back(&mut self, why: String) {
        if !matches!(self.reading, Some(Reading::Whole(_))) {
            tracing::warn!(query = %self.query, reason = %why, "This shard reads the whole query and drops the other shards' lines (as many bytes from Loki as an unsharded replica).");
            super::meter::with(&self.query, |m| {
                m.fallbacks += 1;
                m.selector_batches = 1;
            });
        }
        self.reading = Some(Reading::Whole(why));
    }

    /// The queries that read `streams` (newly owned) on their own, by the
    /// narrowing label.
    fn catch_up_queries(&self, streams: &[Labels]) -> Vec<String> {
        let Some(Reading::Narrowed {
            label: Some(label), ..
        }) = &self.reading
        else {
            return Vec::new();
        };
        let values: BTreeSet<&str> = streams
            .iter()
            .filter_map(|s| s.iter().find(|(k, _)| k == label).map(|(_, v)| v.as_str()))
            .collect();
        selector::batches(&self.query, label, &values).unwrap_or_else(|_| vec![self.query.clone()])
    }

    /// Keeps this shard's entries not emitted before, counting the others'
    /// (`shard_skipped`); true when an entry's stream was not listed.
    fn keep(&mut self, entries: &mut Vec<Entry>) -> bool {
        let mut unknown = false;
        let mut skipped = 0u64;
        entries.retain(|e| {
            if !self.known.contains(&e.labels) {
                unknown = true;
            }
            if !self.shard.owns(&e.labels) {
                skipped += 1;
                return false;
            }
            self.seen.put(e.key(), ()).is_none()
        });
        crate::stats::count_shard_skipped(skipped);
        entries.sort_by(|a, b| {
            a.ts.cmp(&b.ts)
                .then_with(|| a.labels.cmp(&b.labels))
                .then_with(|| a.line.cmp(&b.line))
        });
        unknown
    }
}

/// What one round of a sharded poller gave: the entries its readers
/// returned (a failed reader's are not among them) and the first failure.
pub struct Round {
    /// New entries of this shard, in forward order.
    pub entries: Vec<Entry>,
    /// A reader or the listing failed (its part is read again next round).
    pub error: Option<LokiError>,
}

/// One query read by a shard with pollers over its own streams.
pub struct ShardedPoller {
    streams: Streams,
    pollers: Vec<Poller>,
    floor: i64,
    cursor: i64,
    every: i64,
    last_refresh: Option<i64>,
    refresh_soon: bool,
}

impl ShardedPoller {
    /// A sharded poller of `query` starting at `cursor` (ns), listing its
    /// streams every `every`.
    pub fn new(
        cfg: LokiConfig,
        query: &str,
        shard: Shard,
        cursor: i64,
        every: Duration,
    ) -> Result<ShardedPoller, LokiError> {
        super::check_url(&cfg.url)?;
        Ok(ShardedPoller {
            streams: Streams::new(cfg, query, shard)?,
            pollers: Vec::new(),
            floor: cursor,
            cursor,
            every: ns(every).max(1),
            last_refresh: None,
            refresh_soon: false,
        })
    }

    /// The query.
    pub fn query(&self) -> &str {
        &self.streams.query
    }

    /// Everything before this (ns) has been delivered.
    pub fn cursor(&self) -> i64 {
        self.cursor
    }

    /// Whether a reader left part of its window for the next round (a
    /// backlog: poll again at once).
    pub fn behind(&self) -> bool {
        self.pollers.iter().any(Poller::behind)
    }

    /// The queries it reads with now (narrowed selectors, or the query).
    pub fn reading(&self) -> Vec<String> {
        self.pollers.iter().map(|p| p.query().to_string()).collect()
    }

    fn poller(&self, query: &str, at: i64, floor: i64) -> Result<Poller, LokiError> {
        Ok(
            Poller::resumed(self.streams.cfg.clone(), query, at, floor, READER_KEYS)?
                .metered_as(&self.streams.query),
        )
    }

    /// Lists the streams when due; new ones get a catch-up reader from the
    /// window's start.
    async fn refresh_if_due(&mut self, now: i64) -> Result<(), LokiError> {
        let due = match self.last_refresh {
            None => true,
            Some(t) => now - t >= self.every || (self.refresh_soon && now - t >= MIN_REFRESH_GAP),
        };
        if !due {
            return Ok(());
        }
        let from = self
            .cursor
            .saturating_sub(ns(self.streams.cfg.overlap))
            .max(self.floor);
        match self.streams.refresh(from, now).await {
            Ok(added) => {
                self.last_refresh = Some(now);
                self.refresh_soon = false;
                for q in self.streams.catch_up_queries(&added) {
                    let p = self.poller(&q, from, from)?;
                    self.pollers.push(p);
                }
                Ok(())
            }
            Err(e) if self.streams.reading.is_none() => Err(e),
            Err(e) => {
                // Keep reading what was planned; list again next time.
                self.last_refresh = Some(now);
                tracing::debug!(query = %self.streams.query, error = %e, "Listing the streams failed; reading the known ones.");
                Ok(())
            }
        }
    }

    /// At a round boundary where every reader is at the cursor, replaces
    /// them by one reader per planned query (the plan changed, a catch-up
    /// caught up).
    fn align(&mut self) -> Result<(), LokiError> {
        if self
            .pollers
            .iter()
            .any(|p| p.behind() || p.cursor() != self.cursor)
        {
            return Ok(());
        }
        let mut want = self.streams.queries();
        let mut have = self.reading();
        want.sort();
        have.sort();
        if want == have {
            return Ok(());
        }
        self.pollers = want
            .iter()
            .map(|q| self.poller(q, self.cursor, self.floor))
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    /// One round at wall time `now` (ns).
    pub async fn poll(&mut self, now: i64) -> Round {
        if let Err(e) = self.refresh_if_due(now).await {
            return Round {
                entries: Vec::new(),
                error: Some(e),
            };
        }
        if let Err(e) = self.align() {
            return Round {
                entries: Vec::new(),
                error: Some(e),
            };
        }
        let mut entries = Vec::new();
        let mut error = None;
        for p in &mut self.pollers {
            match p.poll(now).await {
                Ok(v) => entries.extend(v),
                Err(e) => error = error.or(Some(e)),
            }
        }
        if self.streams.keep(&mut entries) {
            self.refresh_soon = true;
        }
        if error.is_none() {
            let end = now.saturating_sub(ns(self.streams.cfg.lag));
            let at = self.pollers.iter().map(Poller::cursor).min().unwrap_or(end);
            self.cursor = self.cursor.max(at);
        }
        Round { entries, error }
    }
}

/// Runs a sharded poller until the receiver goes away, as `run_poller`
/// runs a plain one (same backoff, health and logging).
pub async fn run_sharded_poller(
    mut p: ShardedPoller,
    interval: Duration,
    tx: tokio::sync::mpsc::Sender<Batch>,
    health: Arc<Health>,
) {
    let mut retry = super::Retry::default();
    health.register(p.query(), Some(interval));
    loop {
        let round = p.poll(crate::clock::wall_ns()).await;
        let query = p.query().to_string();
        if !round.entries.is_empty() || round.error.is_none() {
            let batch = Batch {
                query: query.clone(),
                entries: round.entries,
                cursor: p.cursor(),
            };
            if tx.send(batch).await.is_err() {
                return;
            }
        }
        let ok = round.error.is_none();
        let wait = retry.after(&query, &health, round.error, interval);
        if ok && p.behind() {
            // A backlog: the rest of the window at once.
            tokio::task::yield_now().await;
            continue;
        }
        tokio::time::sleep(wait).await;
    }
}

/// Runs one query in tail mode for a shard: a tail per planned selector,
/// replaced when the plan changes (restarting a window back, the repeats
/// dropped), until the receiver goes away.
pub async fn run_sharded_tail(
    cfg: LokiConfig,
    query: String,
    shard: Shard,
    start: i64,
    every: Duration,
    tx: tokio::sync::mpsc::Sender<Batch>,
    health: Arc<Health>,
) {
    let mut streams = match Streams::new(cfg.clone(), &query, shard) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(query = %query, error = %e, "Cannot start the sharded tail.");
            return;
        }
    };
    health.register(&query, None);
    let mut tails = Tails::default();
    let mut cursor = start;
    let (ctx, mut crx) = tokio::sync::mpsc::channel::<(u64, usize, Batch)>(16);
    let mut failures = 0u32;
    let mut next_refresh = tokio::time::Instant::now();
    let mut soon = false;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next_refresh) => {
                let now = crate::clock::wall_ns();
                let from = tails.min_cursor(cursor).saturating_sub(ns(cfg.overlap)).max(start);
                match streams.refresh(from, now).await {
                    Err(e) => {
                        health.failed(&query, &e.to_string());
                        failures = failures.saturating_add(1);
                        next_refresh = tokio::time::Instant::now() + if streams.reading.is_none() { super::backoff(failures) } else { every };
                        continue;
                    }
                    Ok(_) => failures = 0,
                }
                soon = false;
                next_refresh = tokio::time::Instant::now() + every;
                let want = streams.queries();
                if want != tails.queries {
                    let at = if tails.queries.is_empty() && tails.generation == 0 { start } else { from };
                    tails.replace(&cfg, &query, want, at, &ctx, &health);
                }
            }
            got = crx.recv() => {
                let Some((generation, i, mut b)) = got else { return };
                if generation != tails.generation {
                    continue;
                }
                if let Some(c) = tails.cursors.get_mut(i) {
                    *c = (*c).max(b.cursor);
                }
                if streams.keep(&mut b.entries) && !soon {
                    soon = true;
                    let gap = tokio::time::Instant::now() + Duration::from_nanos(MIN_REFRESH_GAP as u64);
                    next_refresh = next_refresh.min(gap);
                }
                cursor = cursor.max(tails.min_cursor(cursor));
                if b.entries.is_empty() {
                    continue;
                }
                let batch = Batch { query: query.clone(), entries: b.entries, cursor };
                if tx.send(batch).await.is_err() {
                    tails.stop();
                    return;
                }
            }
        }
    }
}

/// The tails of one generation of a sharded tail's plan.
#[derive(Default)]
struct Tails {
    generation: u64,
    queries: Vec<String>,
    cursors: Vec<i64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Tails {
    /// Where all of them are (`fallback` when there are none).
    fn min_cursor(&self, fallback: i64) -> i64 {
        self.cursors.iter().copied().min().unwrap_or(fallback)
    }

    fn stop(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }

    /// Stops the running tails and starts one per query at `at`.
    fn replace(
        &mut self,
        cfg: &LokiConfig,
        name: &str,
        queries: Vec<String>,
        at: i64,
        out: &tokio::sync::mpsc::Sender<(u64, usize, Batch)>,
        health: &Arc<Health>,
    ) {
        self.stop();
        self.generation += 1;
        self.cursors = vec![at; queries.len()];
        for (i, q) in queries.iter().enumerate() {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<Batch>(4);
            let tail = tokio::spawn(super::tail::run_tail_as(
                cfg.clone(),
                q.clone(),
                name.to_string(),
                at,
                tx,
                health.clone(),
            ));
            let (out, generation) = (out.clone(), self.generation);
            let forward = tokio::spawn(async move {
                while let Some(b) = rx.recv().await {
                    if out.send((generation, i, b)).await.is_err() {
                        return;
                    }
                }
            });
            self.tasks.push(tail);
            self.tasks.push(forward);
        }
        self.queries = queries;
    }
}

impl Drop for Tails {
    fn drop(&mut self) {
        self.stop();
    }
}
