//! Tail mode over `GET /loki/api/v1/tail` (websocket): lower latency than
//! polling, but best-effort by Loki's own account. So every reconnect and
//! every `dropped_entries` report triggers a `query_range` backfill of the
//! gap, reconnects start at the last timestamp seen, and a bounded LRU of
//! (labels, ts, line) keys drops what both paths deliver. Loki closes a tail
//! with 1011 after `tail_max_duration` (1 h): that is routine, not an error.

use super::poll::{Poller, DEDUP_KEYS};
use super::{backoff, Auth, Batch, Entry, LokiConfig, LokiError};
use futures_util::{SinkExt, StreamExt};
use lru::LruCache;
use std::num::NonZeroUsize;
use tokio_tungstenite::tungstenite::{client::IntoClientRequest, http::HeaderValue, Message};

/// A tail frame: entries and the timestamps Loki dropped.
#[derive(Debug, Default, PartialEq)]
pub struct Frame {
    /// Entries, forward order.
    pub entries: Vec<Entry>,
    /// Timestamps of dropped entries (their `labels` field is not trusted:
    /// Loki sometimes puts the log line there).
    pub dropped: Vec<i64>,
}

#[derive(serde::Deserialize)]
struct RawFrame {
    #[serde(default)]
    streams: serde_json::Value,
    #[serde(default)]
    dropped_entries: Vec<RawDropped>,
}

#[derive(serde::Deserialize)]
struct RawDropped {
    #[serde(default)]
    timestamp: String,
}

/// Parses one tail frame.
pub fn parse_frame(text: &str) -> Result<Frame, LokiError> {
    let raw: RawFrame = serde_json::from_str(text).map_err(|e| LokiError::Parse(e.to_string()))?;
    // Reuse the query_range parser on the same stream shape.
    let wrapped = serde_json::json!({"status": "success", "data": {"resultType": "streams", "result": raw.streams}});
    let entries = if raw.streams.is_null() {
        Vec::new()
    } else {
        super::parse_streams(&wrapped.to_string())?
    };
    let dropped = raw
        .dropped_entries
        .iter()
        .filter_map(|d| d.timestamp.parse().ok())
        .collect();
    Ok(Frame { entries, dropped })
}

/// The websocket URL of a tail starting at `start` (ns).
pub fn tail_url(cfg: &LokiConfig, query: &str, start: i64) -> Result<String, LokiError> {
    let mut url = reqwest::Url::parse(&format!("{}/loki/api/v1/tail", cfg.url))
        .map_err(|e| LokiError::Setup(e.to_string()))?;
    let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
    url.set_scheme(scheme)
        .map_err(|_| LokiError::Setup("cannot build the websocket URL".into()))?;
    url.query_pairs_mut()
        .append_pair("query", query)
        .append_pair("start", &start.to_string())
        .append_pair("limit", &cfg.limit.min(super::MAX_LIMIT).to_string());
    Ok(url.to_string())
}

struct Tail {
    cfg: LokiConfig,
    query: String,
    /// What its health, batches and counters are under.
    name: String,
    last_ts: i64,
    /// Where this tail started (a checkpoint's cursor): what lies before
    /// was processed by a previous run, whose dedup keys are gone, so
    /// neither the backfill nor the tail reaches before it.
    floor: i64,
    seen: LruCache<u64, ()>,
    tx: tokio::sync::mpsc::Sender<Batch>,
    health: std::sync::Arc<super::Health>,
}

impl Tail {
    /// Sends the entries not seen before; false when the receiver is gone.
    async fn emit(&mut self, entries: Vec<Entry>) -> bool {
        let mut fresh = Vec::new();
        for e in entries {
            if e.ts < self.floor {
                continue;
            }
            if self.seen.put(e.key(), ()).is_none() {
                self.last_ts = self.last_ts.max(e.ts);
                fresh.push(e);
            }
        }
        if fresh.is_empty() {
            return true;
        }
        // Everything up to the newest entry is processed: a restart from
        // this cursor starts just after it.
        let batch = Batch {
            query: self.name.clone(),
            entries: fresh,
            cursor: self.last_ts.saturating_add(1),
        };
        self.tx.send(batch).await.is_ok()
    }

    /// Fills exactly `[from, to)` from query_range.
    async fn backfill(&mut self, from: i64, to: i64) -> Result<bool, LokiError> {
        let mut cfg = self.cfg.clone();
        cfg.lag = std::time::Duration::ZERO;
        cfg.overlap = std::time::Duration::ZERO;
        let mut p = Poller::new(cfg, &self.query, from)?.metered_as(&self.name);
        loop {
            let entries = p.poll(to).await?;
            if !self.emit(entries).await {
                return Ok(false);
            }
            if !p.behind() {
                return Ok(true);
            }
        }
    }

    async fn connect_and_read(&mut self) -> Result<bool, LokiError> {
        let url = tail_url(&self.cfg, &self.query, self.last_ts)?;
        let mut req = url
            .into_client_request()
            .map_err(|e| LokiError::Setup(e.to_string()))?;
        let h = req.headers_mut();
        h.insert(
            "X-Loki-Response-Encoding-Flags",
            HeaderValue::from_static("categorize-labels"),
        );
        if let Some(t) = &self.cfg.tenant {
            h.insert(
                "X-Scope-OrgID",
                HeaderValue::from_str(t).map_err(|e| LokiError::Setup(e.to_string()))?,
            );
        }
        let auth = match &self.cfg.auth {
            Auth::None => None,
            Auth::Bearer(t) => Some(format!("Bearer {t}")),
            Auth::Basic { user, password } => {
                use base64::Engine;
                Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
                ))
            }
        };
        if let Some(a) = auth {
            h.insert(
                "Authorization",
                HeaderValue::from_str(&a)
                    .map_err(|_| LokiError::Setup("bad credentials".into()))?,
            );
        }
        let (mut ws, _) = tokio_tungstenite::connect_async(req)
            .await
            .map_err(|e| match e {
                tokio_tungstenite::tungstenite::Error::Http(resp) => {
                    let status = resp.status().as_u16();
                    let body = resp
                        .body()
                        .as_ref()
                        .map(|b| String::from_utf8_lossy(b).trim().to_string())
                        .unwrap_or_default();
                    if status == 429 || status >= 500 {
                        LokiError::Transient(format!("HTTP {status}: {body}"))
                    } else {
                        LokiError::Config { status, body }
                    }
                }
                other => LokiError::Transient(crate::cause::chain(&other)),
            })?;
        // Whatever happened while we were away comes from query_range,
        // reaching back by `lag` for lines that arrived after their time.
        let from = self
            .last_ts
            .saturating_sub(i64::try_from(self.cfg.lag.as_nanos()).unwrap_or(0))
            .max(self.floor);
        if !self.backfill(from, crate::clock::wall_ns()).await? {
            return Ok(false);
        }
        self.health.ok(&self.name);
        while let Some(msg) = ws.next().await {
            let msg = msg.map_err(|e| LokiError::Transient(crate::cause::chain(&e)))?;
            self.health.ok(&self.name);
            match msg {
                Message::Text(t) => {
                    let frame = parse_frame(&t)?;
                    super::meter::with(&self.name, |m| {
                        m.bytes += t.len() as u64;
                        m.lines += frame.entries.len() as u64;
                    });
                    if !self.emit(frame.entries).await {
                        return Ok(false);
                    }
                    if let (Some(lo), Some(hi)) =
                        (frame.dropped.iter().min(), frame.dropped.iter().max())
                    {
                        tracing::warn!(query = %self.query, dropped = frame.dropped.len(), "Loki's tail dropped entries; backfilling from query_range.");
                        if !self.backfill(*lo, hi + 1).await? {
                            return Ok(false);
                        }
                    }
                }
                Message::Ping(p) => {
                    let _ = ws.send(Message::Pong(p)).await;
                }
                Message::Close(frame) => {
                    let (code, reason) = frame
                        .map(|f| (u16::from(f.code), f.reason.to_string()))
                        .unwrap_or((1000, String::new()));
                    if code == 1011 && reason.contains("tail max duration") {
                        tracing::info!(query = %self.query, "Loki closed the tail after its maximum duration; reconnecting.");
                    } else {
                        tracing::warn!(query = %self.query, code, reason = %reason, "Loki closed the tail; reconnecting with backfill.");
                    }
                    return Ok(true);
                }
                _ => {}
            }
        }
        Ok(true)
    }
}

/// Runs a tail for one query until the receiver goes away, reconnecting
/// (with backfill) on every close or error; never returns on Loki errors.
pub async fn run_tail(
    cfg: LokiConfig,
    query: String,
    start: i64,
    tx: tokio::sync::mpsc::Sender<Batch>,
    health: std::sync::Arc<super::Health>,
) {
    run_tail_as(cfg, query.clone(), query, start, tx, health).await;
}

/// [`run_tail`] of `query` on behalf of `name` (a shard's narrowed selector
/// stands for its query): health, batches and counters go under `name`.
pub async fn run_tail_as(
    cfg: LokiConfig,
    query: String,
    name: String,
    start: i64,
    tx: tokio::sync::mpsc::Sender<Batch>,
    health: std::sync::Arc<super::Health>,
) {
    health.register(&name, None);
    let cap = NonZeroUsize::new(DEDUP_KEYS).unwrap_or(NonZeroUsize::MIN);
    let mut t = Tail {
        cfg,
        query,
        name,
        last_ts: start,
        floor: start,
        seen: LruCache::new(cap),
        tx,
        health,
    };
    let mut failures = 0u32;
    loop {
        let result = t.connect_and_read().await;
        if let Err(e) = &result {
            t.health.failed(&t.name, &e.to_string());
        }
        match result {
            Ok(true) => failures = 0,
            Ok(false) => return,
            Err(LokiError::Config { status, body }) => {
                tracing::error!(query = %t.query, status, body = %body, "Loki rejected the tail; fix the configuration (retrying every minute).");
                tokio::time::sleep(super::MAX_BACKOFF).await;
                continue;
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                if failures == 1 || failures.is_power_of_two() {
                    tracing::warn!(query = %t.query, failures, error = %e, "Loki tail failed; reconnecting with backoff.");
                }
                tokio::time::sleep(backoff(failures)).await;
                continue;
            }
        }
        if t.tx.is_closed() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_tail_frames_parse() {
        let p =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/loki/tail-frames.json");
        let text = std::fs::read_to_string(p).unwrap();
        let frames: Vec<serde_json::Value> =
            match serde_json::from_str::<serde_json::Value>(&text).unwrap() {
                serde_json::Value::Array(a) => a,
                other => vec![other],
            };
        let mut n = 0;
        for f in frames {
            n += parse_frame(&f.to_string()).unwrap().entries.len();
        }
        assert!(n > 0);
        let d = parse_frame(
            r#"{"streams":[],"dropped_entries":[{"labels":"a raw line","timestamp":"17"}]}"#,
        )
        .unwrap();
        assert_eq!(d.dropped, vec![17]);
    }

    #[test]
    fn tail_urls() {
        let mut c = LokiConfig::new("https://loki.example:3100/");
        c.limit = 9000;
        let u = tail_url(&c, "{a=\"b\"}", 5).unwrap();
        assert!(u.starts_with("wss://loki.example:3100/loki/api/v1/tail?query=%7Ba%3D%22b%22%7D&start=5&limit=5000"), "{u}");
    }
}
