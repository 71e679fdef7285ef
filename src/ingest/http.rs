//! `run --ingest ADDR`: sigwatch as a second destination of the shipper a
//! cluster already runs. `POST /loki/api/v1/push` takes what Promtail,
//! Alloy, Fluent Bit and Vector send to Loki; `POST /v1/logs` what an
//! OpenTelemetry SDK or Collector exports over OTLP/HTTP. Each push is
//! decoded (`ingest::body`), scanned, and queued for the detection loop as
//! one block, its streams' labels exactly those the Loki source would give.
//!
//! Backpressure instead of loss: the queue is bounded in bytes; a push that
//! finds it full (after a short wait) is answered 429 (Loki) or 503 (OTLP)
//! with `Retry-After`, which every one of those clients retries, so a
//! shipper slows down instead of sigwatch dropping what it already
//! accepted. A 2xx means the lines are queued (and with `--state-dir` on
//! disk, `ingest::wal`); every answer is
//! counted (`sigwatch_events_total{kind="ingest_requests", protocol,
//! outcome}`) and so is every line taken (`ingest_lines`).

use super::body::{self, Decoded, PushError};
use super::queue::{Busy, PushQueue};
use super::{IngestError, Options};
use crate::server::Limits;
use axum::body::Bytes;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// How much larger than the body limit a body may be once decompressed.
const EXPANSION: usize = 8;

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

/// Binds `--ingest` and serves the push endpoints on it. A non-loopback
/// address needs a credential (`--ingest-token-file`) unless
/// `--insecure-ingest` says otherwise: whoever can push can page.
pub(crate) async fn start(
    o: &Options,
    addr: &str,
    shared: Arc<PushQueue>,
) -> Result<(), IngestError> {
    let telemetry = shared.telemetry.clone();
    let max_body = shared.max_body;
    let access = Arc::new(super::access(o)?);
    let tls = super::tls(o)?;
    if !crate::server::auth::is_loopback(addr) && !access.is_configured() && !o.insecure {
        return Err(IngestError::Setup(format!(
            "--ingest {addr} would let anyone who can reach it push log lines (and so page on-call): give --ingest-token-file FILE (or ingest.token_files / ingest.basic_auth_users in --config), or say --insecure-ingest"
        )));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| IngestError::io(format!("cannot listen on --ingest {addr}"))(e))?;
    let shared_ready = shared.ready.clone();
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
    let mut ready = shared_ready;
    tokio::spawn(async move {
        // Nothing is taken before the log's batches are fed again.
        if ready.wait_for(|r| *r).await.is_err() {
            return;
        }
        if let Err(e) =
            crate::server::serve_app(listener, app, telemetry, Limits::default(), tls).await
        {
            tracing::error!(error = %e, "The ingest listener stopped.");
        }
    });
    Ok(())
}

fn router(shared: Arc<PushQueue>, max_body: usize) -> axum::Router {
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
async fn receive(
    s: &PushQueue,
    proto: Protocol,
    req: axum::extract::Request,
    max: usize,
) -> Response {
    let too_large = || {
        count(s, proto, "too_large");
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
async fn push(s: &PushQueue, proto: Protocol, h: &HeaderMap, body: Bytes) -> Response {
    let content_type = header_str(h, header::CONTENT_TYPE).to_string();
    let limit = s.max_body.saturating_mul(EXPANSION);
    let decoded = decode(
        proto,
        &content_type,
        header_str(h, header::CONTENT_ENCODING),
        &body,
        limit,
    );
    let tenant = match tenant(h) {
        Ok(t) => t,
        Err(e) => {
            count(s, proto, "malformed");
            return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response();
        }
    };
    let mut d = match decoded {
        Ok(d) => d,
        Err(e) => {
            let outcome = match e {
                PushError::Malformed(_) => "malformed",
                PushError::Unsupported(_) => "unsupported",
                PushError::TooLarge { .. } => "too_large",
            };
            count(s, proto, outcome);
            tracing::debug!(protocol = proto.name(), error = %e, "Push refused.");
            let code = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
            return (code, format!("{e}\n")).into_response();
        }
    };
    if let Some(t) = tenant {
        for e in &mut d.entries {
            e.metadata.push((TENANT_FIELD.to_string(), t.clone()));
        }
    }
    let lines = d.entries.len() as u64;
    let protobuf = content_type.contains("protobuf");
    if lines > 0 {
        if let Err(busy) = s.enqueue(d).await {
            count(s, proto, "busy");
            return busy.answer(proto);
        }
    }
    count(s, proto, "accepted");
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
            body::otlp::response(protobuf, 0, ""),
        )
            .into_response(),
    }
}

/// The field a push's `X-Scope-OrgID` is kept in: the name Loki gives the
/// tenant in the results of a query over several tenants.
pub(crate) const TENANT_FIELD: &str = "__tenant_id__";

/// The push's tenant (`X-Scope-OrgID`, as Promtail's `tenant_id`, Alloy's
/// `tenant_id`, Fluent Bit's `tenant_id` and Vector's `tenant_id` send it),
/// checked as Loki checks it: at most 150 bytes of letters, digits and
/// `!-_.*'()`, neither `.` nor `..`.
fn tenant(h: &HeaderMap) -> Result<Option<String>, String> {
    let Some(v) = h.get("x-scope-orgid") else {
        return Ok(None);
    };
    let t = v.to_str().unwrap_or("").trim();
    let ok = !t.is_empty()
        && t.len() <= 150
        && t != "."
        && t != ".."
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!-_.*'()".contains(&b));
    if ok {
        Ok(Some(t.to_string()))
    } else {
        Err(format!(
            "X-Scope-OrgID {:?} is not a tenant ID (at most 150 of a-z A-Z 0-9 ! - _ . * ' ( ); one tenant per push)",
            String::from_utf8_lossy(v.as_bytes())
        ))
    }
}

fn decode(
    proto: Protocol,
    content_type: &str,
    encoding: &str,
    sent: &[u8],
    limit: usize,
) -> Result<Decoded, PushError> {
    match proto {
        // Loki's protobuf is snappy inside; a Content-Encoding is on top.
        Protocol::Loki => {
            let raw = body::decode_encoding(encoding, sent, limit)?;
            body::loki::decode(content_type, &raw, limit)
        }
        Protocol::Otlp => {
            let raw = body::decode_encoding(encoding, sent, limit)?;
            body::otlp::decode(content_type, &raw)
        }
    }
}

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

fn count(s: &PushQueue, proto: Protocol, outcome: &str) {
    s.add(
        &[
            ("kind", "ingest_requests"),
            ("protocol", proto.name()),
            ("outcome", outcome),
        ],
        1,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::queue::{MAX_BODY_BYTES, QUEUE_BYTES};
    use crate::ingest::Pushed;
    use crate::server::Telemetry;
    use std::time::Duration;
    use tokio::sync::{mpsc, Semaphore};

    /// A queue of the default bound with `free` bytes of it left.
    fn shared(tx: mpsc::Sender<Pushed>, free: usize) -> PushQueue {
        let set = crate::rules::load_builtin().unwrap();
        let engine = crate::engine::Engine::new(set, Default::default()).unwrap();
        PushQueue {
            tx,
            slot: engine.scanner(),
            telemetry: Arc::new(Telemetry::new()),
            queue: Arc::new(Semaphore::new(free)),
            queue_bytes: QUEUE_BYTES,
            max_body: MAX_BODY_BYTES,
            wait: Duration::from_millis(50),
            wal: None,
            ready: tokio::sync::watch::channel(true).1,
        }
    }

    fn headers(ct: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, ct.parse().unwrap());
        h
    }

    async fn json(s: &PushQueue, proto: Protocol, body: &'static str) -> Response {
        push(s, proto, &headers("application/json"), Bytes::from(body)).await
    }

    const LOKI: &str =
        r#"{"streams":[{"stream":{"job":"x"},"values":[["1752667200000000000","a line"]]}]}"#;
    const OTLP: &str = r#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"1752667200000000000","body":{"stringValue":"a line"}}]}]}]}"#;

    #[tokio::test]
    async fn a_full_queue_answers_retry_later_and_room_takes_the_push() {
        let (tx, mut rx) = mpsc::channel(1);
        let s = shared(tx.clone(), QUEUE_BYTES);
        let filler = Pushed {
            newest: None,
            block: crate::source::block::Block::from_lines([(0, "filler")]),
            hints: Default::default(),
            sources: Vec::new(),
            held: None,
            wal: None,
        };
        tx.try_send(filler).unwrap();
        let r = json(&s, Protocol::Loki, LOKI).await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let r = json(&s, Protocol::Otlp, OTLP).await;
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        // The loop takes the filler: the next push is queued, its bytes
        // held until the loop drops it.
        assert!(rx.recv().await.is_some_and(|p| p.block.data == "filler\n"));
        let r = json(&s, Protocol::Loki, LOKI).await;
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        let held = s.queue.available_permits();
        assert!(held < QUEUE_BYTES);
        let Some(Pushed { block, .. }) = rx.recv().await else {
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

    #[tokio::test]
    async fn the_tenant_is_kept_as_a_field_and_a_bad_one_refused() {
        let (tx, mut rx) = mpsc::channel(8);
        let s = shared(tx, QUEUE_BYTES);
        let mut h = headers("application/json");
        h.insert("X-Scope-OrgID", "team-a".parse().unwrap());
        let r = push(&s, Protocol::Loki, &h, Bytes::from(LOKI)).await;
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        let Some(Pushed { sources, .. }) = rx.recv().await else {
            panic!("no push queued");
        };
        assert_eq!(
            sources[0].labels,
            vec![
                ("job".to_string(), "x".to_string()),
                (TENANT_FIELD.to_string(), "team-a".to_string())
            ]
        );
        // The stream's own labels stay what Loki would give.
        assert_eq!(
            sources[0].kind,
            crate::source::SourceKind::Loki(1),
            "the tenant is a field, not a stream label"
        );
        for bad in ["a|b", "..", &"x".repeat(151)] {
            h.insert("X-Scope-OrgID", bad.parse().unwrap());
            let r = push(&s, Protocol::Otlp, &h, Bytes::from(OTLP)).await;
            assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{bad}");
        }
        assert!(rx.try_recv().is_err(), "a refused push queues nothing");
    }
}
