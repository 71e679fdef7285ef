//! Grafana Loki as a source: sigwatch as a Loki consumer, with the same
//! detection as on stdin and Loki's stream labels (`node_id`, `pod`,
//! `container`, `namespace`) as the per-node context.
//!
//! Loki's `query_range` has no cursor and no "truncated" flag, its `start` is
//! inclusive and `end` exclusive, and entries of different streams share
//! nanosecond timestamps. [`poll::Poller`] pages forward with those exact
//! semantics: no gap, no duplicate (research/apis.md §1.4).

pub mod meter;
pub mod poll;
pub mod range;
pub mod selector;
pub mod series;
pub mod sharded;
pub mod tail;

use serde::Deserialize;
use std::time::Duration;

/// Loki's own cap on `limit` (`max_entries_limit_per_query`): above it the
/// query fails with 400 instead of being clamped.
pub const MAX_LIMIT: u32 = 5000;

/// How to authenticate to Loki (or the gateway in front of it).
#[derive(Clone, Default)]
pub enum Auth {
    /// No credentials.
    #[default]
    None,
    /// HTTP Basic (Grafana Cloud: user = tenant, password = token).
    Basic {
        /// User.
        user: String,
        /// Password (never logged).
        password: String,
    },
    /// `Authorization: Bearer` (never logged).
    Bearer(String),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Auth::None => "none",
            Auth::Basic { .. } => "basic (redacted)",
            Auth::Bearer(_) => "bearer (redacted)",
        })
    }
}

/// Settings of the Loki source.
#[derive(Debug, Clone)]
pub struct LokiConfig {
    /// Base URL, e.g. `http://loki:3100`.
    pub url: String,
    /// `X-Scope-OrgID`, needed unless Loki runs with `auth_enabled: false`.
    pub tenant: Option<String>,
    /// Credentials.
    pub auth: Auth,
    /// Extra CA certificate (PEM) to trust.
    pub ca_file: Option<std::path::PathBuf>,
    /// Entries per page (≤ [`MAX_LIMIT`]; default 1000).
    pub limit: u32,
    /// Query up to `now - lag`, so lines still in flight are not skipped
    /// (default 10 s).
    pub lag: Duration,
    /// Re-scan this far behind the cursor now and then, for lines that
    /// arrive later than `lag` (default 2 min; dedup drops repeats).
    pub overlap: Duration,
    /// How often to re-scan the overlap (default 30 s).
    pub rescan_every: Duration,
    /// Polling period (default 2 s).
    pub interval: Duration,
    /// Where a fresh start (no checkpoint) begins: `now - since` (default 15 min).
    pub since: Duration,
    /// Per-request timeout (default 30 s).
    pub timeout: Duration,
}

impl LokiConfig {
    /// Defaults for a URL.
    pub fn new(url: &str) -> LokiConfig {
        LokiConfig {
            url: url.trim_end_matches('/').to_string(),
            tenant: None,
            auth: Auth::None,
            ca_file: None,
            limit: 1000,
            lag: Duration::from_secs(10),
            overlap: Duration::from_secs(120),
            rescan_every: Duration::from_secs(30),
            interval: Duration::from_secs(2),
            since: Duration::from_secs(900),
            timeout: Duration::from_secs(30),
        }
    }
}

/// A Loki source failure.
#[derive(Debug, thiserror::Error)]
pub enum LokiError {
    /// 400/401/403/404: retrying cannot fix it; the body says why.
    #[error("Loki rejected the query (HTTP {status}): {body}")]
    Config {
        /// HTTP status.
        status: u16,
        /// Plain-text body from Loki.
        body: String,
    },
    /// 429, 5xx, 504, timeouts, network errors: retried with backoff.
    #[error("Loki unavailable: {0}")]
    Transient(String),
    /// A response that is not Loki's JSON.
    #[error("cannot read Loki's response: {0}")]
    Parse(String),
    /// Local setup (bad URL, unreadable CA file).
    #[error("{0}")]
    Setup(String),
}

/// One log entry from Loki.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Stream labels, sorted by name.
    pub labels: Vec<(String, String)>,
    /// Structured metadata and parsed labels of this entry (categorize-labels).
    pub metadata: Vec<(String, String)>,
    /// Timestamp (ns).
    pub ts: i64,
    /// The log line.
    pub line: String,
}

impl Entry {
    /// The stream's canonical name: `{a="1", b="2"}` with sorted labels.
    pub fn stream_name(&self) -> String {
        let inner: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect();
        format!("{{{}}}", inner.join(", "))
    }

    /// The identity used for dedup: (stream labels, ts, line).
    pub fn key(&self) -> u64 {
        use std::hash::Hasher;
        let mut h = fnv::FnvHasher::default();
        for (k, v) in &self.labels {
            h.write(k.as_bytes());
            h.write(&[0]);
            h.write(v.as_bytes());
            h.write(&[1]);
        }
        h.write(&self.ts.to_le_bytes());
        h.write(self.line.as_bytes());
        h.finish()
    }
}

/// Loki entries as a block: one line per entry (entries may hold newlines),
/// each with its entry's time and source (stream labels and metadata).
pub fn block_of(entries: &[Entry]) -> (crate::source::block::Block, Vec<crate::source::Source>) {
    let mut sources: Vec<crate::source::Source> = Vec::new();
    let mut index = std::collections::BTreeMap::<(String, Vec<(String, String)>), usize>::new();
    let mut refs = Vec::with_capacity(entries.len());
    for e in entries {
        let mut labels = e.labels.clone();
        let stream = labels.len();
        labels.extend(e.metadata.iter().cloned());
        let name = e.stream_name();
        let i = *index
            .entry((name.clone(), labels.clone()))
            .or_insert_with(|| {
                sources.push(crate::source::Source {
                    name,
                    labels,
                    modified: None,
                    kind: crate::source::SourceKind::Loki(stream),
                });
                sources.len() - 1
            });
        refs.push((i, e.line.as_str(), e.ts));
    }
    (crate::source::block::Block::from_entries(refs), sources)
}

#[derive(Deserialize)]
struct Response {
    status: String,
    data: Data,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    #[serde(default)]
    result: Vec<StreamResult>,
}

#[derive(Deserialize)]
struct StreamResult {
    #[serde(default)]
    stream: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<Vec<serde_json::Value>>,
}

fn flatten_metadata(v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    let Some(obj) = v.as_object() else { return };
    for (k, v) in obj {
        match v {
            // categorize-labels: {"structuredMetadata": {...}, "parsed": {...}}
            serde_json::Value::Object(inner) => {
                for (ik, iv) in inner {
                    if let Some(s) = iv.as_str() {
                        out.push((ik.clone(), s.to_string()));
                    }
                }
            }
            // push format: a plain map of structured metadata.
            serde_json::Value::String(s) => out.push((k.clone(), s.clone())),
            _ => {}
        }
    }
}

/// Parses a `query_range` (or tail frame `streams`) body into entries in
/// forward order: by timestamp, then stream labels, then line.
pub fn parse_streams(body: &str) -> Result<Vec<Entry>, LokiError> {
    let r: Response = serde_json::from_str(body).map_err(|e| LokiError::Parse(e.to_string()))?;
    if r.status != "success" {
        return Err(LokiError::Parse(format!("status {:?}", r.status)));
    }
    if r.data.result_type != "streams" {
        return Err(LokiError::Config {
            status: 200,
            body: format!(
                "the query returns {:?}, not log lines: use a log query, not a metric query",
                r.data.result_type
            ),
        });
    }
    let mut out = Vec::new();
    for s in r.data.result {
        let labels: Vec<(String, String)> = s.stream.into_iter().collect();
        for row in s.values {
            let ts = row
                .first()
                .and_then(|t| t.as_str())
                .and_then(|t| t.parse::<i64>().ok())
                .ok_or_else(|| {
                    LokiError::Parse("a row without a nanosecond timestamp string".into())
                })?;
            let line = row
                .get(1)
                .and_then(|l| l.as_str())
                .ok_or_else(|| LokiError::Parse("a row without a line".into()))?;
            let mut metadata = Vec::new();
            if let Some(m) = row.get(2) {
                flatten_metadata(m, &mut metadata);
            }
            out.push(Entry {
                labels: labels.clone(),
                metadata,
                ts,
                line: line.to_string(),
            });
        }
    }
    out.sort_by(|a, b| {
        a.ts.cmp(&b.ts)
            .then_with(|| a.labels.cmp(&b.labels))
            .then_with(|| a.line.cmp(&b.line))
    });
    Ok(out)
}

/// Whether a selector can match Loki's own logs. Loki logs every query it
/// runs, with its text; a detector reading them reads its own queries in a
/// loop. Safe only if an equality matcher pins a label to a non-Loki value.
pub fn may_match_loki_itself(query: &str) -> bool {
    let selector = query
        .split('}')
        .next()
        .unwrap_or(query)
        .trim_start_matches('{');
    let pinned = selector.split(',').any(|m| {
        let m = m.trim();
        if m.contains("!=") || m.contains("=~") || m.contains("!~") {
            return false;
        }
        match m.split_once('=') {
            Some((_, v)) => {
                let v = v.trim().trim_matches('"').to_ascii_lowercase();
                !v.is_empty()
                    && !v.contains("loki")
                    && !v.contains("monitoring")
                    && !v.contains("logging")
            }
            None => false,
        }
    });
    !pinned
}

/// The HTTP client of every Loki request: the timeout, the user agent and
/// the extra CA certificate of `cfg`.
pub(crate) fn http_client(cfg: &LokiConfig) -> Result<reqwest::Client, LokiError> {
    let mut b = reqwest::Client::builder()
        .timeout(cfg.timeout)
        .user_agent(concat!("sigwatch/", env!("CARGO_PKG_VERSION")));
    if let Some(ca) = &cfg.ca_file {
        let pem = std::fs::read(ca)
            .map_err(|e| LokiError::Setup(format!("CA file {}: {e}", ca.display())))?;
        let cert = reqwest::Certificate::from_pem(&pem)
            .map_err(|e| LokiError::Setup(format!("CA file {}: {e}", ca.display())))?;
        b = b.add_root_certificate(cert);
    }
    b.build()
        .map_err(|e| LokiError::Setup(format!("HTTP client: {e}")))
}

/// A request with the tenant and the credentials of `cfg`.
pub(crate) fn authorize(
    mut req: reqwest::RequestBuilder,
    cfg: &LokiConfig,
) -> reqwest::RequestBuilder {
    if let Some(t) = &cfg.tenant {
        req = req.header("X-Scope-OrgID", t);
    }
    match &cfg.auth {
        Auth::None => req,
        Auth::Basic { user, password } => req.basic_auth(user, Some(password)),
        Auth::Bearer(t) => req.bearer_auth(t),
    }
}

/// Sends a request and reads its body: a success's text, or the error it
/// means (429, 408 and 5xx are transient, the rest of 4xx configuration;
/// Loki's plain-text reason kept, cut to 300 characters).
pub(crate) async fn send(req: reqwest::RequestBuilder) -> Result<String, LokiError> {
    let resp = req.send().await.map_err(|e| {
        LokiError::Transient(if e.is_timeout() {
            "timeout".to_string()
        } else {
            crate::cause::chain(&e.without_url())
        })
    })?;
    let status = resp.status();
    let body = resp
        .text()
        .await
        .map_err(|e| LokiError::Transient(crate::cause::chain(&e.without_url())))?;
    if status.is_success() {
        return Ok(body);
    }
    let code = status.as_u16();
    let body: String = body.trim().chars().take(300).collect();
    if code == 429 || code == 408 || status.is_server_error() {
        return Err(LokiError::Transient(format!("HTTP {code}: {body}")));
    }
    Err(LokiError::Config { status: code, body })
}

/// Entries from one poll of one query, and the cursor after them.
#[derive(Debug)]
pub struct Batch {
    /// The query.
    pub query: String,
    /// New entries, forward order.
    pub entries: Vec<Entry>,
    /// Everything before this (ns) has been delivered.
    pub cursor: i64,
}

/// Longest wait between retries of a failing Loki (so a Loki that is back
/// is read again, and readiness back, within this long).
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Checks a Loki base URL before anything starts: a URL without its
/// scheme (`loki:3100`) parses as something else entirely and would fail
/// at every poll, retried forever; it is a setup error instead.
pub fn check_url(url: &str) -> Result<(), LokiError> {
    let u =
        reqwest::Url::parse(url).map_err(|e| LokiError::Setup(format!("Loki URL {url:?}: {e}")))?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return Err(LokiError::Setup(format!(
            "Loki URL {url:?} needs http:// or https:// and a host, e.g. http://loki:3100"
        )));
    }
    Ok(())
}

/// Whether each query reaches Loki, for `/readyz`: a consumer that cannot
/// read Loki should say so (a probe then shows it), while detection itself
/// never waits on Loki.
#[derive(Debug, Default)]
pub struct Health {
    queries: std::sync::Mutex<std::collections::BTreeMap<String, QueryHealth>>,
}

#[derive(Debug, Clone, Default)]
struct QueryHealth {
    /// Last success (wall ns).
    ok_at: Option<i64>,
    /// Start of the current run of failures (wall ns).
    failing_since: Option<i64>,
    error: Option<String>,
    /// Polling: a success is expected every interval, so a long silence
    /// (a request hanging on a stopped Loki) counts as a failure too.
    stale_after: Option<i64>,
}

/// How long a query may fail before `/readyz` says so: one blip is not an
/// outage.
pub const UNREADY_AFTER: Duration = Duration::from_secs(10);

impl Health {
    /// A query starts (not yet answered). `poll_interval`: polling (its
    /// successes are expected that often), None for a tail.
    pub fn register(&self, query: &str, poll_interval: Option<Duration>) {
        if let Ok(mut q) = self.queries.lock() {
            q.entry(query.to_string()).or_default().stale_after = poll_interval.map(|i| {
                i64::try_from((i * 3).max(Duration::from_secs(20)).as_nanos()).unwrap_or(i64::MAX)
            });
        }
    }

    /// The query was answered.
    pub fn ok(&self, query: &str) {
        if let Ok(mut q) = self.queries.lock() {
            let h = q.entry(query.to_string()).or_default();
            h.ok_at = Some(crate::clock::wall_ns());
            h.failing_since = None;
            h.error = None;
        }
    }

    /// The query failed.
    pub fn failed(&self, query: &str, error: &str) {
        if let Ok(mut q) = self.queries.lock() {
            let h = q.entry(query.to_string()).or_default();
            h.failing_since.get_or_insert_with(crate::clock::wall_ns);
            h.error = Some(error.to_string());
        }
    }

    /// (ready, what is wrong or right): ready when every query has been
    /// answered and none has failed, or been silent, for
    /// [`UNREADY_AFTER`] (polling: 20 s or three intervals).
    pub fn readiness(&self, now: i64) -> (bool, String) {
        let Ok(q) = self.queries.lock() else {
            return (false, "loki: state unavailable".into());
        };
        let grace = i64::try_from(UNREADY_AFTER.as_nanos()).unwrap_or(i64::MAX);
        let mut problems = Vec::new();
        for (query, h) in q.iter() {
            let failing = h.failing_since.is_some_and(|s| now - s >= grace);
            let silent = match (h.ok_at, h.stale_after) {
                (Some(ok), Some(stale)) => now - ok >= stale,
                _ => false,
            };
            if h.ok_at.is_none() {
                problems.push(format!(
                    "{query}: not answered yet{}",
                    h.error
                        .as_ref()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                ));
            } else if failing || silent {
                let secs = (now - h.ok_at.unwrap_or(now)) / 1_000_000_000;
                problems.push(format!(
                    "{query}: no answer for {secs} s{}",
                    h.error
                        .as_ref()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                ));
            }
        }
        if problems.is_empty() {
            (true, format!("loki: {} query(ies) answering", q.len()))
        } else {
            (false, format!("loki: {}", problems.join("; ")))
        }
    }
}

/// Runs one query's poller until the receiver goes away: polls every
/// `interval`, retries transient errors with capped exponential backoff and
/// jitter (counting and logging them), logs a configuration error once and
/// retries it slowly (a fixed secret or selector then recovers by itself).
/// Detection never waits on Loki: batches go through a bounded channel.
pub async fn run_poller(
    mut poller: poll::Poller,
    interval: Duration,
    tx: tokio::sync::mpsc::Sender<Batch>,
    health: std::sync::Arc<Health>,
) {
    let mut retry = Retry::default();
    health.register(poller.query(), Some(interval));
    loop {
        let now = crate::clock::wall_ns();
        let query = poller.query().to_string();
        let error = match poller.poll(now).await {
            Ok(entries) => {
                let batch = Batch {
                    query: query.clone(),
                    entries,
                    cursor: poller.cursor(),
                };
                if tx.send(batch).await.is_err() {
                    return;
                }
                None
            }
            Err(e) => Some(e),
        };
        let ok = error.is_none();
        let wait = retry.after(&query, &health, error, interval);
        if ok && poller.behind() {
            // A backlog: the rest of the window at once.
            tokio::task::yield_now().await;
            continue;
        }
        tokio::time::sleep(wait).await;
    }
}

/// A polling loop's failures: how long to wait before the next poll, what
/// `/readyz` says, and what is logged (a transient failure at its 1st, 2nd,
/// 4th… occurrence, a configuration error once per new message).
#[derive(Debug, Default)]
pub(crate) struct Retry {
    failures: u32,
    last_config_error: Option<String>,
}

impl Retry {
    /// After a poll of `query` that ended with `error` (None: success).
    pub(crate) fn after(
        &mut self,
        query: &str,
        health: &Health,
        error: Option<LokiError>,
        interval: Duration,
    ) -> Duration {
        match &error {
            None => health.ok(query),
            Some(e) => health.failed(query, &e.to_string()),
        }
        match error {
            None => {
                if self.failures > 0 {
                    tracing::info!(
                        query,
                        failures = self.failures,
                        "Loki reachable again; catching up from the cursor."
                    );
                }
                self.failures = 0;
                self.last_config_error = None;
                interval
            }
            Some(LokiError::Config { status, body }) => {
                let msg = format!("HTTP {status}: {body}");
                if self.last_config_error.as_deref() != Some(msg.as_str()) {
                    tracing::error!(query, status, body = %body, "Loki rejected the query; fix the configuration (retrying every minute).");
                    self.last_config_error = Some(msg);
                }
                MAX_BACKOFF
            }
            Some(e) => {
                self.failures = self.failures.saturating_add(1);
                if self.failures == 1 || self.failures.is_power_of_two() {
                    tracing::warn!(query, failures = self.failures, error = %e, "Loki poll failed; retrying with backoff.");
                }
                backoff(self.failures)
            }
        }
    }
}

/// Exponential backoff from 1 s, capped at [`MAX_BACKOFF`], with up to 25 %
/// jitter so replicas do not retry in step.
pub fn backoff(failures: u32) -> Duration {
    let base = Duration::from_secs(1u64 << failures.saturating_sub(1).min(6)).min(MAX_BACKOFF);
    let noise = (crate::clock::wall_ns() % 1000) as f64 / 4000.0;
    base.mul_f64(1.0 + noise).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        assert!(backoff(1) >= Duration::from_secs(1) && backoff(1) < Duration::from_millis(1300));
        assert!(backoff(3) >= Duration::from_secs(4));
        assert_eq!(backoff(30), MAX_BACKOFF);
    }

    fn captured(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/loki")
            .join(name);
        std::fs::read_to_string(p).unwrap()
    }

    #[test]
    fn real_bodies_parse_in_forward_order() {
        let all = parse_streams(&captured("qr-forward-all.json")).unwrap();
        assert!(all.len() >= 10, "{}", all.len());
        assert!(all.windows(2).all(|w| w[0].ts <= w[1].ts));
        let limited = parse_streams(&captured("qr-forward-limit5.json")).unwrap();
        assert_eq!(limited.len(), 5);
        let cat = parse_streams(&captured("qr-forward-categorized.json")).unwrap();
        assert_eq!(cat.len(), all.len());
        // categorize-labels keeps stream labels to the indexed ones and moves
        // structured metadata to the row.
        assert!(cat
            .iter()
            .all(|e| !e.labels.iter().any(|(k, _)| k == "detected_level")));
        assert!(cat
            .iter()
            .any(|e| e.metadata.iter().any(|(k, _)| k == "trace_id")));
        assert!(cat
            .iter()
            .any(|e| e.labels.iter().any(|(k, v)| k == "node_id" && v == "NE_x")));
    }

    #[test]
    fn keys_tell_streams_apart_at_one_timestamp() {
        let a = Entry {
            labels: vec![("pod".into(), "a".into())],
            metadata: vec![],
            ts: 1,
            line: "x".into(),
        };
        let mut b = a.clone();
        b.labels[0].1 = "b".into();
        assert_ne!(a.key(), b.key());
        assert_eq!(a.key(), a.clone().key());
        assert_eq!(a.stream_name(), "{pod=\"a\"}");
    }

    #[test]
    fn selectors_that_can_read_loki_itself() {
        assert!(may_match_loki_itself(
            r#"{namespace=~".+"} |= "EGRESS_FAILED""#
        ));
        assert!(may_match_loki_itself(r#"{namespace="monitoring"}"#));
        assert!(may_match_loki_itself(r#"{app!="egress"}"#));
        assert!(!may_match_loki_itself(r#"{namespace="livekit"}"#));
        assert!(!may_match_loki_itself(
            r#"{namespace=~"media.*", container="egress"} |= "x""#
        ));
    }
}
