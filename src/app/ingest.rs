//! `run --ingest ADDR`: sigwatch as a second destination of the shipper a
//! cluster already runs. `POST /loki/api/v1/push` takes what Promtail,
//! Alloy, Fluent Bit and Vector send to Loki; `POST /v1/logs` what an
//! OpenTelemetry SDK or Collector exports over OTLP/HTTP. Each push is
//! decoded (`source::push`), scanned, and queued for the detection loop as
//! one block, its streams' labels exactly those the Loki source would give.
//!
//! Backpressure instead of loss: the queue is bounded in bytes; a push that
//! finds it full (after a short wait) is answered 429 (Loki) or 503 (OTLP)
//! with `Retry-After`, which every one of those clients retries, so a
//! shipper slows down instead of sigwatch dropping what it already
//! accepted. A 2xx means the lines are queued in memory; every answer is
//! counted (`sigwatch_events_total{kind="ingest_requests", protocol,
//! outcome}`) and so is every line taken (`ingest_lines`).

use super::sources::{loki_block, Input, SourceOptions};
use super::AppError;
use crate::scan::ScannerSlot;
use crate::server::{auth::Access, Limits, Telemetry};
use crate::source::push::{self, Decoded, PushError};
use axum::body::Bytes;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};

/// Default largest body of one push, as sent (compressed).
pub const MAX_BODY_BYTES: usize = 16 << 20;
/// How much larger than the body limit a body may be once decompressed.
const EXPANSION: usize = 8;
/// Pushed bytes (decoded lines) queued for the detection loop at most.
const QUEUE_BYTES: usize = 32 << 20;
/// How long a push waits for room in the queue before it is answered
/// "retry later".
const QUEUE_WAIT: Duration = Duration::from_secs(2);

/// The two protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Loki,
    Otlp,
}

impl Protocol {
    fn name(self) -> &'static str {
        match self {
            Protocol::Loki => "loki",
            Protocol::Otlp => "otlp",
        }
    }
}

/// What every push handler (and the syslog listeners) share.
pub(crate) struct Shared {
    tx: mpsc::Sender<Input>,
    slot: ScannerSlot,
    telemetry: Arc<Telemetry>,
    queue: Arc<Semaphore>,
    max_body: usize,
    /// How long a push waits for room ([`QUEUE_WAIT`]).
    wait: Duration,
}

/// Starts the push listeners the options name — `--ingest` (HTTP) and
/// `--syslog` (UDP and TCP) — feeding `tx` through one bounded queue;
/// returns what `/readyz` says of the source.
pub async fn start(
    a: &SourceOptions,
    slot: ScannerSlot,
    tx: &mpsc::Sender<Input>,
    telemetry: Arc<Telemetry>,
) -> Result<String, AppError> {
    let max_body = a.ingest_max_body.unwrap_or(MAX_BODY_BYTES).max(1024);
    let shared = Arc::new(Shared {
        tx: tx.clone(),
        slot,
        telemetry: telemetry.clone(),
        queue: Arc::new(Semaphore::new(QUEUE_BYTES)),
        max_body,
        wait: QUEUE_WAIT,
    });
    let mut what = Vec::new();
    if let Some(addr) = a.ingest.as_deref() {
        http(a, addr, shared.clone()).await?;
        what.push(format!("ingest {addr}"));
    }
    if let Some(addr) = a.syslog.as_deref() {
        super::syslog::start(addr, a.insecure_ingest, shared).await?;
        what.push(format!("syslog {addr}"));
    }
    Ok(what.join(", "))
}

/// Binds `--ingest` and serves the push endpoints on it. A non-loopback
/// address needs a credential (`--ingest-token-file`) unless
/// `--insecure-ingest` says otherwise: whoever can push can page.
async fn http(a: &SourceOptions, addr: &str, shared: Arc<Shared>) -> Result<(), AppError> {
    let telemetry = shared.telemetry.clone();
    let max_body = shared.max_body;
    let access = Arc::new(access(a)?);
    let tls = super::sources::ingest_tls(a)?;
    if !crate::server::auth::is_loopback(addr) && !access.is_configured() && !a.insecure_ingest {
        return Err(AppError::Setup(format!(
            "--ingest {addr} would let anyone who can reach it push log lines (and so page on-call): give --ingest-token-file FILE (or ingest.token_files / ingest.basic_auth_users in --config), or say --insecure-ingest"
        )));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| AppError::io(format!("cannot listen on --ingest {addr}"))(e))?;
    let app = router(shared, max_body);
    let app = crate::server::guarded(app, access, telemetry.clone());
    if let Some(t) = &tls {
        t.reloading.reload_on_sighup();
    }
    let tls = tls.map(|t| t.config);
    tracing::info!(
        addr,
        tls = tls.is_some(),
        "Taking pushes: POST /loki/api/v1/push (Loki: Promtail, Alloy, Fluent Bit, Vector) and POST /v1/logs (OTLP/HTTP)."
    );
    tokio::spawn(async move {
        if let Err(e) =
            crate::server::serve_app(listener, app, telemetry, Limits::default(), tls).await
        {
            tracing::error!(error = %e, "The ingest listener stopped.");
        }
    });
    Ok(())
}

/// The ingest endpoints' credentials: the token files' and the
/// configuration's users.
pub fn access(a: &SourceOptions) -> Result<Access, AppError> {
    let mut tokens = Vec::new();
    for f in &a.ingest_token_file {
        tokens.extend(
            crate::server::auth::tokens_from_file(f).map_err(|e| AppError::Setup(e.to_string()))?,
        );
    }
    Access::new(&tokens, &a.ingest_users).map_err(|e| AppError::Setup(e.to_string()))
}

fn router(shared: Arc<Shared>, max_body: usize) -> axum::Router {
    let (l, o) = (shared.clone(), shared);
    axum::Router::new()
        .route(
            "/loki/api/v1/push",
            axum::routing::post(move |req: axum::extract::Request| {
                let s = l.clone();
                async move { receive(&s, Protocol::Loki, req, max_body).await }
            }),
        )
        .route(
            "/v1/logs",
            axum::routing::post(move |req: axum::extract::Request| {
                let s = o.clone();
                async move { receive(&s, Protocol::Otlp, req, max_body).await }
            }),
        )
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                "not found: POST /loki/api/v1/push or /v1/logs\n",
            )
        })
}

/// Reads a push's body within the limit: a larger `Content-Length` is
/// answered 413 before a byte of the body is read, a body that grows past
/// it while read too.
async fn receive(s: &Shared, proto: Protocol, req: axum::extract::Request, max: usize) -> Response {
    let too_large = || {
        s.count(proto, "too_large");
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {max} bytes (--ingest-max-body)\n"),
        )
            .into_response()
    };
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > max as u64) {
        return too_large();
    }
    let (parts, body) = req.into_parts();
    match axum::body::to_bytes(body, max).await {
        Ok(b) => push(s, proto, &parts.headers, b).await,
        Err(_) => too_large(),
    }
}

fn header_str(h: &HeaderMap, name: header::HeaderName) -> &str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// One push: decoded, queued, answered.
async fn push(s: &Shared, proto: Protocol, h: &HeaderMap, body: Bytes) -> Response {
    let content_type = header_str(h, header::CONTENT_TYPE).to_string();
    let limit = s.max_body.saturating_mul(EXPANSION);
    let decoded = decode(
        proto,
        &content_type,
        header_str(h, header::CONTENT_ENCODING),
        &body,
        limit,
    );
    let d = match decoded {
        Ok(d) => d,
        Err(e) => {
            let outcome = match e {
                PushError::Malformed(_) => "malformed",
                PushError::Unsupported(_) => "unsupported",
                PushError::TooLarge { .. } => "too_large",
            };
            s.count(proto, outcome);
            tracing::debug!(protocol = proto.name(), error = %e, "Push refused.");
            let code = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
            return (code, format!("{e}\n")).into_response();
        }
    };
    let lines = d.entries.len() as u64;
    let protobuf = content_type.contains("protobuf");
    if lines > 0 {
        if let Err(busy) = s.enqueue(d).await {
            s.count(proto, "busy");
            return busy.answer(proto);
        }
    }
    s.count(proto, "accepted");
    s.telemetry.add(
        &[("kind", "ingest_lines"), ("protocol", proto.name())],
        lines,
    );
    match proto {
        Protocol::Loki => StatusCode::NO_CONTENT.into_response(),
        Protocol::Otlp => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                if protobuf {
                    "application/x-protobuf"
                } else {
                    "application/json"
                },
            )],
            push::otlp::response(protobuf, 0, ""),
        )
            .into_response(),
    }
}

fn decode(
    proto: Protocol,
    content_type: &str,
    encoding: &str,
    body: &[u8],
    limit: usize,
) -> Result<Decoded, PushError> {
    match proto {
        // Loki's protobuf is snappy inside; a Content-Encoding is on top.
        Protocol::Loki => {
            let raw = push::decode_encoding(encoding, body, limit)?;
            push::loki::decode(content_type, &raw, limit)
        }
        Protocol::Otlp => {
            let raw = push::decode_encoding(encoding, body, limit)?;
            push::otlp::decode(content_type, &raw)
        }
    }
}

/// The queue had no room within [`QUEUE_WAIT`].
pub(crate) struct Busy;

impl Busy {
    /// 429 for Loki clients, 503 for OTLP ones (both retry, honouring
    /// `Retry-After`).
    fn answer(self, proto: Protocol) -> Response {
        let code = match proto {
            Protocol::Loki => StatusCode::TOO_MANY_REQUESTS,
            Protocol::Otlp => StatusCode::SERVICE_UNAVAILABLE,
        };
        (
            code,
            [(header::RETRY_AFTER, "1")],
            "sigwatch is behind: retry this push\n",
        )
            .into_response()
    }
}

impl Shared {
    fn count(&self, proto: Protocol, outcome: &str) {
        self.telemetry.add(
            &[
                ("kind", "ingest_requests"),
                ("protocol", proto.name()),
                ("outcome", outcome),
            ],
            1,
        );
    }

    /// Counts an event of the listeners (`sigwatch_events_total`).
    pub(crate) fn add(&self, pairs: &[(&str, &str)], n: u64) {
        self.telemetry.add(pairs, n);
    }

    /// Room in the queue for `bytes`: its share of the byte budget and a
    /// place in the loop's channel, within `wait` (None: as long as it
    /// takes).
    async fn room(
        &self,
        bytes: usize,
        wait: Option<Duration>,
    ) -> Result<(tokio::sync::OwnedSemaphorePermit, mpsc::Permit<'_, Input>), Busy> {
        // One push larger than the whole budget takes all of it.
        let want = u32::try_from(bytes.min(QUEUE_BYTES)).unwrap_or(u32::MAX);
        let room = async {
            let permit = self.queue.clone().acquire_many_owned(want).await.ok()?;
            let slot = self.tx.reserve().await.ok()?;
            Some((permit, slot))
        };
        let got = match wait {
            Some(w) => tokio::time::timeout(w, room).await.ok().flatten(),
            None => room.await,
        };
        got.ok_or(Busy)
    }

    /// Queues the entries as one block, holding their bytes of the
    /// queue's budget until the detection loop has processed them.
    async fn enqueue(&self, d: Decoded) -> Result<(), Busy> {
        let bytes: usize = d.entries.iter().map(|e| e.line.len() + 64).sum();
        let (permit, slot) = self.room(bytes, Some(self.wait)).await?;
        let newest = d.entries.iter().map(|e| e.ts).max();
        let (block, sources) = loki_block(&d.entries);
        let hints = self.slot.get().scan(&block.data);
        slot.send(Input::Push {
            newest,
            block,
            hints,
            sources,
            _held: permit,
        });
        Ok(())
    }

    /// Queues syslog messages as one block of lines (their own times are
    /// read from them; the arrival stands in for a line without one), a
    /// source per (host, app).
    pub(crate) async fn enqueue_lines(
        &self,
        msgs: Vec<crate::source::push::syslog::Message>,
        wait: Option<Duration>,
    ) -> Result<(), Busy> {
        let bytes: usize = msgs.iter().map(|m| m.line.len() + 64).sum();
        let (permit, slot) = self.room(bytes, wait).await?;
        let mut sources: Vec<crate::source::Source> = Vec::new();
        let mut index = std::collections::HashMap::new();
        let mut lines = Vec::with_capacity(msgs.len());
        for m in &msgs {
            let i = *index.entry(&m.labels).or_insert_with(|| {
                let name = m
                    .labels
                    .iter()
                    .map(|(_, v)| v.as_str())
                    .collect::<Vec<_>>()
                    .join("/");
                sources.push(crate::source::Source {
                    name: if name.is_empty() {
                        "syslog".into()
                    } else {
                        name
                    },
                    labels: m.labels.clone(),
                    modified: None,
                    kind: crate::source::SourceKind::Named,
                });
                sources.len() - 1
            });
            // A message may hold line ends (octet counting lets it).
            for l in m.line.split('\n') {
                lines.push((i, l.trim_end_matches('\r')));
            }
        }
        let mut block = crate::source::block::Block::from_lines(lines);
        block.arrival = Some(crate::clock::wall_ns());
        let hints = self.slot.get().scan(&block.data);
        slot.send(Input::Push {
            newest: None,
            block,
            hints,
            sources,
            _held: permit,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(tx: mpsc::Sender<Input>, queue_bytes: usize) -> Shared {
        let set = crate::rules::load_builtin().unwrap();
        let engine = crate::engine::Engine::new(set, Default::default()).unwrap();
        Shared {
            tx,
            slot: engine.scanner(),
            telemetry: Arc::new(Telemetry::new()),
            queue: Arc::new(Semaphore::new(queue_bytes)),
            max_body: MAX_BODY_BYTES,
            wait: Duration::from_millis(50),
        }
    }

    fn headers(ct: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, ct.parse().unwrap());
        h
    }

    async fn json(s: &Shared, proto: Protocol, body: &'static str) -> Response {
        push(s, proto, &headers("application/json"), Bytes::from(body)).await
    }

    const LOKI: &str =
        r#"{"streams":[{"stream":{"job":"x"},"values":[["1752667200000000000","a line"]]}]}"#;
    const OTLP: &str = r#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"1752667200000000000","body":{"stringValue":"a line"}}]}]}]}"#;

    #[tokio::test]
    async fn a_full_queue_answers_retry_later_and_room_takes_the_push() {
        let (tx, mut rx) = mpsc::channel(1);
        let s = shared(tx.clone(), QUEUE_BYTES);
        tx.try_send(Input::Failed("filler".into())).unwrap();
        let r = json(&s, Protocol::Loki, LOKI).await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let r = json(&s, Protocol::Otlp, OTLP).await;
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        // The loop takes the filler: the next push is queued, its bytes
        // held until the loop drops it.
        assert!(matches!(rx.recv().await, Some(Input::Failed(_))));
        let r = json(&s, Protocol::Loki, LOKI).await;
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        let held = s.queue.available_permits();
        assert!(held < QUEUE_BYTES);
        let Some(Input::Push { block, .. }) = rx.recv().await else {
            panic!("a push");
        };
        assert_eq!(block.data, "a line\n");
        assert_eq!(s.queue.available_permits(), QUEUE_BYTES);
        let m = s.telemetry.metrics();
        for (proto, outcome, n) in [
            ("loki", "busy", 1),
            ("otlp", "busy", 1),
            ("loki", "accepted", 1),
        ] {
            let want = format!(
                "kind=\"ingest_requests\",protocol=\"{proto}\",outcome=\"{outcome}\"}} {n}"
            );
            assert!(m.contains(&want), "{want}\n{m}");
        }
    }

    #[tokio::test]
    async fn a_spent_byte_budget_is_busy_too() {
        let (tx, _rx) = mpsc::channel(8);
        let s = shared(tx, 0);
        let r = json(&s, Protocol::Loki, LOKI).await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    }
}
