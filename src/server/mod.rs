//! The HTTP side of a running sigwatch: `/healthz`, `/readyz`, `/metrics`,
//! and the live status page `/` with its data, `/api/status`.
//!
//! sigwatch runs in the clusters it watches, so its own probes must not
//! repeat the incidents it detects. Liveness is in-process only — the live
//! loop's heartbeat — and never touches Loki, a receiver or the disk; it is
//! answered from its own task from atomics, so a busy pipeline still
//! answers. A failing receiver shows as *degraded* in `/readyz`'s body and
//! in the metrics, not as unready: a consumer has no traffic to shed, and
//! taking it out would only hide the problem.

mod api;
pub mod auth;
mod limits;
pub use limits::{default_max_connections, Limits};
pub mod tls;

use crate::notify::ReceiverSnapshot;
use auth::{Access, Verdict};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

type Labels = Vec<(String, String)>;

/// The counter families whose values the live loop publishes as totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Fam {
    Events,
    Hits,
}

/// How long the live loop may go without a heartbeat before liveness fails
/// (it beats at least once a second, idle or not).
pub const STALL_NS: i64 = 30_000_000_000;

/// Everything the live loop publishes once a second.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Every stage's counters, as samples that name their own metrics:
    /// the server exports them without knowing any stage's counters.
    pub samples: Vec<crate::stats::Sample>,
    /// Receivers (for `/readyz`: which are degraded).
    pub receivers: Vec<ReceiverSnapshot>,
    /// The status page's data (firing alerts, incidents).
    pub status: Option<serde_json::Value>,
}

/// Health, readiness and metrics shared by the live loop and the server.
pub struct Telemetry {
    registry: Registry,
    heartbeat: AtomicI64,
    rules_loaded: AtomicBool,
    source_ready: AtomicBool,
    source: Mutex<String>,
    receivers: Mutex<Vec<ReceiverSnapshot>>,
    counters: Family<Labels, Counter>,
    gauges: Family<Labels, Gauge>,
    hits: Family<Labels, Counter>,
    last_seen: Family<Labels, Gauge>,
    /// The value each counter was last raised to, by (family, labels).
    seen: Mutex<HashMap<(Fam, Labels), u64>>,
    /// The per-group series published last time: a group that left the
    /// export is removed from the registry, so `/metrics` stays bounded
    /// while nodes come and go.
    exported: Mutex<std::collections::HashSet<Labels>>,
    reload_error: Mutex<Option<String>>,
    /// Whether the per-group series are exported (`--metrics-group-labels`).
    group_labels: AtomicBool,
    status: Mutex<String>,
    /// `/report`: requests so far, and the last report the live loop
    /// rendered with the request count it answers.
    report_wanted: std::sync::atomic::AtomicU64,
    report: Mutex<(u64, String)>,
    report_ready: tokio::sync::Notify,
    /// Asked at every `/readyz` when set: whether the source answers now
    /// (Loki), instead of the flag [`Telemetry::set_source`] sets.
    source_check: Mutex<Option<SourceCheck>>,
    /// `run`'s silences, served at `/api/silences`.
    silences: Mutex<Option<Arc<crate::silence::SilenceBook>>>,
    /// `POST /api/templates/ID/known` requests for the live loop, with
    /// where its answer (the template's text, or None) goes.
    known: Mutex<Vec<KnownRequest>>,
}

/// A template to mark known, and where the live loop answers.
pub type KnownRequest = (u64, tokio::sync::oneshot::Sender<Option<String>>);

/// A source's own readiness: (ready, what it says).
pub type SourceCheck = Box<dyn Fn() -> (bool, String) + Send + Sync>;

fn l(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry::new()
    }
}

impl Telemetry {
    /// A fresh registry with sigwatch's metric families.
    pub fn new() -> Telemetry {
        let mut registry = Registry::with_prefix("sigwatch");
        let counters = Family::<Labels, Counter>::default();
        let gauges = Family::<Labels, Gauge>::default();
        registry.register(
            "events",
            "Counts by kind: lines, candidates, hits, malformed, late, ungrouped, partial chunks and overflows, truncated lines, evicted streams/groups, lines mined into templates, novel lines and templates, templates evicted, lines by wrapper and format, notifications by receiver and outcome, matches by rule, rule reloads by outcome",
            counters.clone(),
        );
        registry.register(
            "state",
            "Gauges: alerts firing, templates known, queue depth by receiver, Loki lag seconds, whether the last rule reload succeeded, build info",
            gauges.clone(),
        );
        let hits = Family::<Labels, Counter>::default();
        let last_seen = Family::<Labels, Gauge>::default();
        registry.register(
            "signature_hits",
            "Signature hits of the cluster-wide (spread, share) rules by rule, partition and group: summed over shards by the recording rules of deploy/prometheus-rules.yaml",
            hits.clone(),
        );
        registry.register(
            "group_last_seen_seconds",
            "When each group of a cluster-wide rule's population last logged (event time, Unix seconds): the population the spread and share rules divide by",
            last_seen.clone(),
        );
        gauges
            .get_or_create(&l(&[
                ("kind", "build_info"),
                ("version", env!("CARGO_PKG_VERSION")),
            ]))
            .set(1);
        Telemetry {
            registry,
            heartbeat: AtomicI64::new(crate::clock::wall_ns()),
            rules_loaded: AtomicBool::new(false),
            source_ready: AtomicBool::new(false),
            source: Mutex::new(String::new()),
            receivers: Mutex::new(Vec::new()),
            counters,
            gauges,
            hits,
            last_seen,
            seen: Mutex::new(HashMap::new()),
            exported: Mutex::new(std::collections::HashSet::new()),
            reload_error: Mutex::new(None),
            group_labels: AtomicBool::new(true),
            status: Mutex::new(String::new()),
            report_wanted: std::sync::atomic::AtomicU64::new(0),
            report: Mutex::new((0, String::new())),
            report_ready: tokio::sync::Notify::new(),
            source_check: Mutex::new(None),
            silences: Mutex::new(None),
            known: Mutex::new(Vec::new()),
        }
    }

    /// The templates asked to be marked known since the last call (the
    /// live loop answers each).
    pub fn take_known(&self) -> Vec<KnownRequest> {
        std::mem::take(
            &mut *self
                .known
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Asks the live loop to mark template `id` known; its text, None when
    /// no such template is kept, or Err when the loop did not answer in 5 s.
    async fn ask_known(&self, id: u64) -> Result<Option<String>, ()> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        {
            let mut q = self
                .known
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if q.len() >= 64 {
                return Err(());
            }
            q.push((id, tx));
        }
        match tokio::time::timeout(std::time::Duration::from_secs(5), rx).await {
            Ok(Ok(v)) => Ok(v),
            _ => Err(()),
        }
    }

    /// Serves `book` at `/api/silences`.
    pub fn set_silences(&self, book: Arc<crate::silence::SilenceBook>) {
        *self
            .silences
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(book);
    }

    fn silences(&self) -> Option<Arc<crate::silence::SilenceBook>> {
        self.silences
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// How many times `/report` was asked for: the live loop renders a new
    /// report when this passes the count its last one answered.
    pub fn report_wanted(&self) -> u64 {
        self.report_wanted.load(Ordering::Relaxed)
    }

    /// The live loop's report, answering the requests up to `wanted`.
    pub fn publish_report(&self, wanted: u64, html: String) {
        if let Ok(mut r) = self.report.lock() {
            *r = (wanted, html);
        }
        self.report_ready.notify_waiters();
    }

    /// `/report`: asks the live loop for a fresh report and waits for it
    /// (up to `wait`); `None` when none came (the loop is busy or the run
    /// records none).
    pub async fn fresh_report(&self, wait: std::time::Duration) -> Option<String> {
        let n = self.report_wanted.fetch_add(1, Ordering::Relaxed) + 1;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let ready = self.report_ready.notified();
            tokio::pin!(ready);
            ready.as_mut().enable();
            if let Ok(r) = self.report.lock() {
                if r.0 >= n {
                    return Some(r.1.clone());
                }
            }
            if tokio::time::timeout_at(deadline, ready).await.is_err() {
                return None;
            }
        }
    }

    /// The live loop is alive (call every iteration).
    pub fn beat(&self) {
        self.heartbeat
            .store(crate::clock::wall_ns(), Ordering::Relaxed);
    }

    /// Rules are loaded.
    pub fn set_rules_loaded(&self) {
        self.rules_loaded.store(true, Ordering::Relaxed);
    }

    /// A rule reload finished: counted by outcome; a failed one is shown on
    /// `/readyz` (still ready: the previous rules keep running) until the
    /// next successful reload.
    pub fn reloaded(&self, error: Option<&str>) {
        let outcome = if error.is_some() { "failed" } else { "ok" };
        self.counters
            .get_or_create(&l(&[("kind", "rule_reloads"), ("outcome", outcome)]))
            .inc();
        self.gauges
            .get_or_create(&l(&[("kind", "rule_reload_ok")]))
            .set(i64::from(error.is_none()));
        if let Ok(mut e) = self.reload_error.lock() {
            *e = error.map(str::to_string);
        }
    }

    /// Whether `/metrics` shows the per-group series (their label values
    /// are node and pod names); on by default.
    pub fn set_group_labels(&self, on: bool) {
        self.group_labels.store(on, Ordering::Relaxed);
    }

    /// Sets the gauge `sigwatch_state` with these labels (the ingest
    /// queue's bytes).
    pub fn set_state(&self, pairs: &[(&str, &str)], value: i64) {
        self.gauges.get_or_create(&l(pairs)).set(value);
    }

    /// Adds `n` to the counter `sigwatch_events_total` with these labels
    /// (the ingest endpoints' requests and lines).
    pub fn add(&self, pairs: &[(&str, &str)], n: u64) {
        self.counters.get_or_create(&l(pairs)).inc_by(n);
    }

    /// Counts one event of the server's own (`sigwatch_events_total{kind}`):
    /// a failed credential, a client answered 429, a cross-origin write.
    fn count_event(&self, kind: &str) {
        self.counters.get_or_create(&l(&[("kind", kind)])).inc();
    }

    /// The source is (or is not) connected, with a description.
    pub fn set_source(&self, ready: bool, what: &str) {
        self.source_ready.store(ready, Ordering::Relaxed);
        if let Ok(mut s) = self.source.lock() {
            *s = what.to_string();
        }
    }

    /// From now on `/readyz` asks `check` whether the source is connected
    /// (Loki: every query answered recently).
    pub fn set_source_check(&self, check: SourceCheck) {
        if let Ok(mut c) = self.source_check.lock() {
            *c = Some(check);
        }
    }

    /// (connected, detail) of the source now.
    fn source_state(&self) -> (bool, String) {
        if let Ok(c) = self.source_check.lock() {
            if let Some(check) = c.as_ref() {
                return check();
            }
        }
        (
            self.source_ready.load(Ordering::Relaxed),
            self.source.lock().map(|s| s.clone()).unwrap_or_default(),
        )
    }

    /// A counter that only moves forward: raises it to `value`.
    fn counter(&self, labels: Labels, value: u64) {
        self.forward(Fam::Events, labels, value);
    }

    /// Raises a counter of family `fam` to `value` (never down).
    fn forward(&self, fam: Fam, labels: Labels, value: u64) {
        let Ok(mut seen) = self.seen.lock() else {
            return;
        };
        let family = match fam {
            Fam::Events => &self.counters,
            Fam::Hits => &self.hits,
        };
        let prev = seen.entry((fam, labels.clone())).or_insert(0);
        // Created at 0: a dashboard's rate() has a series from the start.
        let c = family.get_or_create(&labels);
        if value > *prev {
            c.inc_by(value - *prev);
            *prev = value;
        }
    }

    /// Publishes a snapshot.
    pub fn update(&self, s: &Snapshot) {
        use crate::stats::Family;
        let mut now_exported = std::collections::HashSet::new();
        for sample in &s.samples {
            let labels: Labels = sample
                .labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            let total = u64::try_from(sample.value).unwrap_or(0);
            match sample.family {
                Family::Events => self.counter(labels, total),
                Family::State => {
                    self.gauges.get_or_create(&labels).set(sample.value);
                }
                Family::GroupLastSeen | Family::GroupHits
                    if !self.group_labels.load(Ordering::Relaxed) => {}
                Family::GroupLastSeen => {
                    self.last_seen.get_or_create(&labels).set(sample.value);
                }
                Family::GroupHits => {
                    now_exported.insert(labels.clone());
                    // A group's hit counter exists (at 0) from its first
                    // line, so Prometheus' increase() counts its first hits.
                    let _ = self.hits.get_or_create(&labels);
                    self.forward(Fam::Hits, labels, total);
                }
            }
        }
        if let Ok(mut prev) = self.exported.lock() {
            for gone in prev.difference(&now_exported) {
                self.last_seen.remove(gone);
                self.hits.remove(gone);
                if let Ok(mut seen) = self.seen.lock() {
                    seen.remove(&(Fam::Hits, gone.clone()));
                }
            }
            *prev = now_exported;
        }
        if let Some(status) = &s.status {
            if let Ok(mut st) = self.status.lock() {
                *st = status.to_string();
            }
        }
        if let Ok(mut r) = self.receivers.lock() {
            *r = s.receivers.clone();
        }
    }

    /// `/healthz`: (ok, body).
    pub fn health(&self) -> (bool, String) {
        let age = crate::clock::wall_ns() - self.heartbeat.load(Ordering::Relaxed);
        if age < STALL_NS {
            (true, "ok\n".to_string())
        } else {
            (
                false,
                format!("pipeline stalled for {} s\n", age / 1_000_000_000),
            )
        }
    }

    /// `/readyz`: (ready, JSON body with degraded receivers).
    pub fn readiness(&self) -> (bool, String) {
        let rules = self.rules_loaded.load(Ordering::Relaxed);
        let (source, detail) = self.source_state();
        let receivers = self.receivers.lock().map(|r| r.clone()).unwrap_or_default();
        let degraded: Vec<&str> = receivers
            .iter()
            .filter(|r| r.degraded)
            .map(|r| r.name.as_str())
            .collect();
        let body = serde_json::json!({
            "ready": rules && source,
            "rules_loaded": rules,
            "rule_reload_error": self.reload_error.lock().ok().and_then(|e| e.clone()),
            "source": {"connected": source, "detail": detail},
            "degraded_receivers": degraded,
            "receivers": receivers,
        });
        (rules && source, format!("{body}\n"))
    }

    /// What the source is doing, as `/readyz` says it.
    pub fn source(&self) -> String {
        self.source_state().1
    }

    /// `/api/status`: the last published status (firing alerts, incidents).
    pub fn status(&self) -> String {
        let s = self.status.lock().map(|s| s.clone()).unwrap_or_default();
        if s.is_empty() {
            serde_json::json!({
                "generated": "not yet",
                "source": self.source(),
                "firing": [], "incidents": [], "resolved_incidents": [],
            })
            .to_string()
        } else {
            s
        }
    }

    /// `/metrics` in the Prometheus text format.
    pub fn metrics(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// What one listener serves: everything (the status page, its data and
/// the report behind [`Access`]), or the open endpoints only (`/healthz`,
/// `/readyz`, `/metrics`: `--listen-metrics`).
#[derive(Clone)]
pub struct Surface {
    /// The credentials the guarded endpoints accept.
    pub access: Arc<Access>,
    /// Whether the guarded endpoints are served here at all.
    pub ui: bool,
    /// TLS, when the listener speaks it (the handshake is done within the
    /// header timeout).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Whether `/metrics` needs the credentials too (`--guard-metrics`:
    /// Prometheus scrapes with a bearer token or basic auth).
    pub guard_metrics: bool,
}

impl Default for Surface {
    /// Everything, without credentials (a loopback listener).
    fn default() -> Self {
        Surface {
            access: Arc::new(Access::default()),
            ui: true,
            tls: None,
            guard_metrics: false,
        }
    }
}

/// Answers a guarded request: a valid credential (when any is
/// configured), and for a write a same-origin request (no cross-site
/// form or script can post with the browser's basic credentials).
async fn guard(
    axum::extract::State((access, t)): axum::extract::State<(Arc<Access>, Arc<Telemetry>)>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{header, Method, StatusCode};
    use axum::response::IntoResponse;
    let client = req
        .extensions()
        .get::<Peer>()
        .map_or(std::net::IpAddr::from([0, 0, 0, 0]), |p| p.0);
    if access.is_configured() {
        let authorization = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        match access.check(authorization, client).await {
            Verdict::Allowed => {}
            Verdict::Denied => {
                t.count_event("http_auth_failures");
                return (
                    StatusCode::UNAUTHORIZED,
                    [
                        (
                            header::WWW_AUTHENTICATE,
                            "Basic realm=\"sigwatch\", charset=\"UTF-8\"",
                        ),
                        (header::CACHE_CONTROL, "no-store"),
                    ],
                    "unauthorized\n",
                )
                    .into_response();
            }
            Verdict::Limited => {
                t.count_event("http_auth_limited");
                return (
                    StatusCode::TOO_MANY_REQUESTS,
                    [
                        (header::RETRY_AFTER, "60"),
                        (header::CACHE_CONTROL, "no-store"),
                    ],
                    "too many failed attempts; try again later\n",
                )
                    .into_response();
            }
        }
    }
    if !matches!(*req.method(), Method::GET | Method::HEAD) && !same_origin(req.headers()) {
        t.count_event("http_cross_origin_refused");
        return (StatusCode::FORBIDDEN, "cross-origin write refused\n").into_response();
    }
    next.run(req).await
}

/// Whether a request's `Origin` (when a browser sent one) names the host
/// it was sent to.
fn same_origin(h: &axum::http::HeaderMap) -> bool {
    let Some(origin) = h
        .get(axum::http::header::ORIGIN)
        .and_then(|v| v.to_str().ok())
    else {
        return true;
    };
    let host = h
        .get(axum::http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    !host.is_empty() && origin_host.trim_end_matches('/') == host
}

/// The client's address, put on each request by the connection that
/// carried it.
#[derive(Debug, Clone, Copy)]
struct Peer(std::net::IpAddr);

/// The routes of the server.
fn router(t: Arc<Telemetry>, surface: &Surface) -> axum::Router {
    use axum::http::StatusCode;
    let code = |ok: bool| {
        if ok {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        }
    };
    let (r, m, st, rep) = (t.clone(), t.clone(), t.clone(), t.clone());
    let (sl, sa, se, kn) = (t.clone(), t.clone(), t.clone(), t.clone());
    let page = crate::report::status_page();
    let open = healthz(t.clone()).route(
        "/readyz",
        axum::routing::get(move || async move {
            let (ok, b) = r.readiness();
            (code(ok), [("content-type", "application/json")], b)
        }),
    );
    let metrics = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || async move {
            (
                [(
                    "content-type",
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                )],
                m.metrics(),
            )
        }),
    );
    let not_found = || async { (StatusCode::NOT_FOUND, "not found\n") };
    let guard_layer =
        axum::middleware::from_fn_with_state((surface.access.clone(), t.clone()), guard);
    if !surface.ui {
        return if surface.guard_metrics {
            open.merge(metrics.fallback(not_found).layer(guard_layer))
        } else {
            open.merge(metrics).fallback(not_found)
        };
    }
    let (open, guarded) = if surface.guard_metrics {
        (open, metrics)
    } else {
        (open.merge(metrics), axum::Router::new())
    };
    let guarded = guarded
        .route(
            "/",
            axum::routing::get(move || {
                let page = page.clone();
                async move { axum::response::Html(page) }
            }),
        )
        .route(
            "/api/status",
            axum::routing::get(move || async move {
                (
                    [
                        ("content-type", "application/json"),
                        ("cache-control", "no-store"),
                    ],
                    st.status(),
                )
            }),
        )
        .route(
            "/api/silences",
            axum::routing::get(move || async move { api::silences_answer(&sl, |b, now| Ok(b.list(now))) })
                .post(move |body: String| async move {
                    api::silences_answer(&sa, |b, now| {
                        let req: crate::silence::NewSilence = serde_json::from_str(&body)
                            .map_err(|e| crate::silence::SilenceError::Invalid(format!("body: {e}")))?;
                        b.add(req, now).map(|s| s.view(now))
                    })
                }),
        )
        .route(
            "/api/silences/{id}",
            axum::routing::delete(move |axum::extract::Path(id): axum::extract::Path<String>| async move {
                api::silences_answer(&se, |b, now| b.expire(&id, now).map(|s| s.view(now)))
            }),
        )
        .route(
            "/api/templates/{id}/known",
            axum::routing::post(move |axum::extract::Path(id): axum::extract::Path<String>| async move {
                api::known_answer(&kn, &id).await
            }),
        )
        .route(
            "/report",
            axum::routing::get(move || async move {
                match rep.fresh_report(std::time::Duration::from_secs(5)).await {
                    Some(html) => (
                        StatusCode::OK,
                        [
                            ("content-type", "text/html; charset=utf-8"),
                            ("cache-control", "no-store"),
                        ],
                        html,
                    ),
                    None => (
                        StatusCode::SERVICE_UNAVAILABLE,
                        [
                            ("content-type", "text/plain; charset=utf-8"),
                            ("cache-control", "no-store"),
                        ],
                        "The report is not ready: the detection loop did not answer within 5 s. Try again.\n".to_string(),
                    ),
                }
            }),
        )
        .fallback(not_found)
        .layer(guard_layer);
    open.merge(guarded)
}

/// `/healthz` alone: what the reserve answers when the server is full
/// (everything else there is a 503 saying so).
fn probes(t: Arc<Telemetry>) -> axum::Router {
    healthz(t).fallback(|| async {
        (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            [("connection", "close")],
            "connection limit reached; only /healthz is answered\n",
        )
    })
}

/// The liveness probe's route.
fn healthz(t: Arc<Telemetry>) -> axum::Router {
    use axum::http::StatusCode;
    axum::Router::new().route(
        "/healthz",
        axum::routing::get(move || async move {
            let (ok, b) = t.health();
            let code = if ok {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            (code, b)
        }),
    )
}

/// Serves `/healthz`, `/readyz`, `/metrics` and the status page on an
/// already-bound listener until the task is dropped, within [`Limits`]:
/// at most `max_connections` at once, each closed if its headers are not in
/// within `header_timeout` or it idles that long between requests; past
/// the cap a small reserve still answers `/healthz` (one request per
/// connection), and beyond that connections are closed at once. Rejected
/// connections are counted (`http_connections_rejected`).
pub async fn serve(
    listener: tokio::net::TcpListener,
    t: Arc<Telemetry>,
    surface: Surface,
) -> std::io::Result<()> {
    serve_with(listener, t, Limits::default(), surface).await
}

/// [`serve`] with explicit limits.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    t: Arc<Telemetry>,
    limits: Limits,
    surface: Surface,
) -> std::io::Result<()> {
    let app = router(t.clone(), &surface);
    serve_app(listener, app, t, limits, surface.tls).await
}

/// The routes `app` has, guarded by `access` as the status page is (a
/// credential when one is configured, same-origin writes), failures
/// counted in `t`: for the ingest endpoints.
pub fn guarded(app: axum::Router, access: Arc<Access>, t: Arc<Telemetry>) -> axum::Router {
    app.layer(axum::middleware::from_fn_with_state((access, t), guard))
}

/// Serves `app` on an already-bound listener within [`Limits`], with the
/// probes' reserve past the connection cap, over TLS when `tls` is given;
/// each request carries its client's address (for the failure limit).
pub async fn serve_app(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    t: Arc<Telemetry>,
    limits: Limits,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> std::io::Result<()> {
    use tokio::sync::Semaphore;
    let reserve_app = probes(t.clone());
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let full = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    // The reserve's connections, oldest first: when it is full the oldest
    // goes, so a crowd of idle clients can never hold it against a probe
    // (which sends its request as soon as it connects).
    let mut reserve: std::collections::VecDeque<tokio::task::AbortHandle> =
        std::collections::VecDeque::new();
    let rejected = t
        .counters
        .get_or_create(&l(&[("kind", "http_connections_rejected")]))
        .clone();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok((s, a)) => (s, Peer(a.ip())),
            Err(e) => {
                // Out of descriptors or a reset before accept: wait a
                // moment instead of spinning, and go on.
                tracing::debug!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        match full.clone().try_acquire_owned() {
            Ok(permit) => {
                let app = app.clone().layer(axum::Extension(peer));
                let tls = acceptor.clone();
                tokio::spawn(async move {
                    let (h, age) = (limits.header_timeout, limits.max_age);
                    match tls {
                        None => connection(stream, app, true, h, age).await,
                        Some(tls) => {
                            if let Ok(Ok(s)) = tokio::time::timeout(h, tls.accept(stream)).await {
                                connection(s, app, true, h, age).await;
                            }
                        }
                    }
                    drop(permit);
                });
            }
            Err(_) => {
                rejected.inc();
                reserve.retain(|h| !h.is_finished());
                if reserve.len() >= limits.health_reserve.max(1) {
                    if let Some(oldest) = reserve.pop_front() {
                        oldest.abort();
                    }
                }
                let app = reserve_app.clone();
                let timeout = limits.reserve_timeout;
                let tls = acceptor.clone();
                let task = tokio::spawn(async move {
                    match tls {
                        None => connection(stream, app, false, timeout, timeout * 4).await,
                        Some(tls) => {
                            if let Ok(Ok(s)) =
                                tokio::time::timeout(timeout, tls.accept(stream)).await
                            {
                                connection(s, app, false, timeout, timeout * 4).await;
                            }
                        }
                    }
                });
                reserve.push_back(task.abort_handle());
            }
        }
    }
}

/// Serves one connection: headers within `header_timeout` (also the
/// longest idle wait between kept-alive requests), closed after `max_age`.
async fn connection<S>(
    stream: S,
    app: axum::Router,
    keep_alive: bool,
    header_timeout: std::time::Duration,
    max_age: std::time::Duration,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let io = hyper_util::rt::TokioIo::new(stream);
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(keep_alive);
    let conn = b.serve_connection(io, hyper_util::service::TowerToHyperService::new(app));
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = tokio::time::sleep(max_age) => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(header_timeout, conn).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_follow_snapshots_and_readiness_shows_degraded_receivers() {
        let t = Telemetry::new();
        use crate::stats::Sample;
        let receiver = ReceiverSnapshot {
            name: "webhook http://x".into(),
            retries: 2,
            queued: 4,
            degraded: true,
            ..Default::default()
        };
        let snapshot = |lines: u64| {
            let mut samples = vec![
                Sample::event("lines", lines),
                Sample::event("lines_by_format", 7).with("format", "cri"),
                Sample::event("lines_by_format", 9).with("format", "json"),
                Sample::event("truncated_lines", 1),
                Sample::event("rule_matches", 3).with("rule", "egress.black_hole"),
            ];
            receiver.samples(&mut samples);
            Snapshot {
                samples,
                receivers: vec![receiver.clone()],
                status: None,
            }
        };
        t.update(&snapshot(10));
        // Totals only move forward: a smaller one (a restarted count) is
        // not subtracted.
        t.update(&snapshot(25));
        t.update(&snapshot(20));
        let m = t.metrics();
        assert!(
            m.contains("sigwatch_events_total{kind=\"lines\"} 25"),
            "{m}"
        );
        assert!(
            m.contains("kind=\"rule_matches\",rule=\"egress.black_hole\"} 3"),
            "{m}"
        );
        assert!(
            m.contains("sigwatch_state{kind=\"queue_depth\",receiver=\"webhook http://x\"} 4"),
            "{m}"
        );
        assert!(m.contains("build_info"), "{m}");
        assert!(
            m.contains("kind=\"lines_by_format\",format=\"cri\"} 7")
                && m.contains("kind=\"lines_by_format\",format=\"json\"} 9")
                && m.contains("kind=\"truncated_lines\"} 1"),
            "{m}"
        );
        t.reloaded(Some("t.yaml:3:1: bad"));
        t.reloaded(None);
        t.reloaded(Some("t.yaml:3:1: bad"));
        let m = t.metrics();
        assert!(
            m.contains("kind=\"rule_reloads\",outcome=\"failed\"} 2"),
            "{m}"
        );
        assert!(m.contains("kind=\"rule_reloads\",outcome=\"ok\"} 1"), "{m}");
        assert!(
            m.contains("sigwatch_state{kind=\"rule_reload_ok\"} 0"),
            "{m}"
        );
        let (ready, body) = t.readiness();
        assert!(!ready, "no rules, no source yet");
        t.set_rules_loaded();
        t.set_source(true, "stdin");
        let (ready, body2) = t.readiness();
        assert!(ready, "{body} {body2}");
        assert!(
            body2.contains("\"degraded_receivers\":[\"webhook http://x\"]"),
            "{body2}"
        );
        assert!(t.health().0);
    }
}
