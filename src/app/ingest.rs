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
use super::wal::{Batch, Wal};
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
    /// The ingest log (with a state directory).
    wal: Option<Arc<Wal>>,
    /// True once the log's batches were fed again: the listeners wait.
    pub(crate) ready: tokio::sync::watch::Receiver<bool>,
}

/// Starts the push listeners the options name — `--ingest` (HTTP) and
/// `--syslog` (UDP and TCP) — feeding `tx` through one bounded queue;
/// returns what `/readyz` says of the source.
///
/// With `--state-dir` every batch goes through the ingest log
/// (`app::wal`) before it is answered; the batches a crash left after the
/// checkpoint's position `wal_at` are fed again first, and the listeners,
/// bound at once, take nothing before that is done.
pub async fn start(
    a: &SourceOptions,
    slot: ScannerSlot,
    tx: &mpsc::Sender<Input>,
    telemetry: Arc<Telemetry>,
    wal_at: Option<u64>,
) -> Result<(String, Option<Arc<Wal>>), AppError> {
    let max_body = a.ingest_max_body.unwrap_or(MAX_BODY_BYTES).max(1024);
    let (wal, again) = match &a.state_dir {
        Some(dir) => {
            let (w, again) = Wal::open(dir, wal_at)?;
            (Some(Arc::new(w)), again)
        }
        None => (None, Vec::new()),
    };
    let (ready_tx, ready) = tokio::sync::watch::channel(false);
    let shared = Arc::new(Shared {
        tx: tx.clone(),
        slot,
        telemetry: telemetry.clone(),
        queue: Arc::new(Semaphore::new(QUEUE_BYTES)),
        max_body,
        wait: QUEUE_WAIT,
        wal: wal.clone(),
        ready,
    });
    let mut what = Vec::new();
    if let Some(addr) = a.ingest.as_deref() {
        http(a, addr, shared.clone()).await?;
        what.push(format!("ingest {addr}"));
    }
    if let Some(addr) = a.syslog.as_deref() {
        super::syslog::start(addr, a.insecure_ingest, shared.clone()).await?;
        what.push(format!("syslog {addr}"));
    }
    if !again.is_empty() {
        tracing::info!(
            batches = again.len(),
            "Feeding again what the ingest log holds after the checkpoint (acknowledged before the stop)."
        );
    }
    tokio::spawn(async move {
        for (end, batch) in again {
            let input = shared.input_of(&batch, None, Some(end));
            if shared.tx.send(input).await.is_err() {
                return;
            }
        }
        let _ = ready_tx.send(true);
    });
    Ok((what.join(", "), wal))
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
    ) -> Result<(tokio::sync::OwnedSemaphorePermit, mpsc::OwnedPermit<Input>), Busy> {
        // One push larger than the whole budget takes all of it.
        let want = u32::try_from(bytes.min(QUEUE_BYTES)).unwrap_or(u32::MAX);
        let room = async {
            let permit = self.queue.clone().acquire_many_owned(want).await.ok()?;
            let slot = self.tx.clone().reserve_owned().await.ok()?;
            Some((permit, slot))
        };
        let got = match wait {
            Some(w) => tokio::time::timeout(w, room).await.ok().flatten(),
            None => room.await,
        };
        got.ok_or(Busy)
    }

    /// A batch as the loop's input: a block scanned, its streams.
    pub(crate) fn input_of(
        &self,
        batch: &Batch,
        held: Option<tokio::sync::OwnedSemaphorePermit>,
        wal: Option<u64>,
    ) -> Input {
        let (newest, block, sources) = match batch {
            Batch::Entries(rows) => {
                let entries: Vec<crate::source::loki::Entry> = rows
                    .iter()
                    .map(|(labels, metadata, ts, line)| crate::source::loki::Entry {
                        labels: labels.clone(),
                        metadata: metadata.clone(),
                        ts: *ts,
                        line: line.clone(),
                    })
                    .collect();
                let newest = entries.iter().map(|e| e.ts).max();
                let (block, sources) = loki_block(&entries);
                (newest, block, sources)
            }
            Batch::Lines { arrival, lines } => {
                let (mut block, sources) = lines_block(lines);
                block.arrival = Some(*arrival);
                (None, block, sources)
            }
        };
        let hints = self.slot.get().scan(&block.data);
        Input::Push {
            newest,
            block,
            hints,
            sources,
            _held: held,
            wal,
        }
    }

    /// Queues a batch, holding its bytes of the queue's budget until the
    /// detection loop has processed it; with the ingest log, only once it
    /// is on disk (a failed write is "busy": the client retries).
    async fn submit(&self, batch: Batch, wait: Option<Duration>) -> Result<(), Busy> {
        let bytes = match &batch {
            Batch::Entries(rows) => rows.iter().map(|r| r.3.len() + 64).sum(),
            Batch::Lines { lines, .. } => lines.iter().map(|l| l.1.len() + 64).sum(),
        };
        let (permit, slot) = self.room(bytes, wait).await?;
        let input = self.input_of(&batch, Some(permit), None);
        match &self.wal {
            Some(w) => {
                if w.append(&batch, input, slot).await {
                    Ok(())
                } else {
                    Err(Busy)
                }
            }
            None => {
                slot.send(input);
                Ok(())
            }
        }
    }

    /// Queues decoded entries as one batch.
    async fn enqueue(&self, d: Decoded) -> Result<(), Busy> {
        let rows = d
            .entries
            .into_iter()
            .map(|e| (e.labels, e.metadata, e.ts, e.line))
            .collect();
        self.submit(Batch::Entries(rows), Some(self.wait)).await
    }

    /// Queues syslog messages as one batch of lines (their own times are
    /// read from them; the arrival stands in for a line without one).
    pub(crate) async fn enqueue_lines(
        &self,
        msgs: Vec<crate::source::push::syslog::Message>,
        wait: Option<Duration>,
    ) -> Result<(), Busy> {
        let lines = msgs.into_iter().map(|m| (m.labels, m.line)).collect();
        let batch = Batch::Lines {
            arrival: crate::clock::wall_ns(),
            lines,
        };
        self.submit(batch, wait).await
    }
}

/// Syslog lines as a block, a source per label set (host, app); a message
/// holding line ends (octet counting lets it) is several lines.
fn lines_block(
    lines: &[(Vec<(String, String)>, String)],
) -> (crate::source::block::Block, Vec<crate::source::Source>) {
    let mut sources: Vec<crate::source::Source> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let mut refs = Vec::with_capacity(lines.len());
    for (labels, line) in lines {
        let i = *index.entry(labels).or_insert_with(|| {
            let name = labels
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
                labels: labels.clone(),
                modified: None,
                kind: crate::source::SourceKind::Named,
            });
            sources.len() - 1
        });
        for l in line.split('\n') {
            refs.push((i, l.trim_end_matches('\r')));
        }
    }
    (crate::source::block::Block::from_lines(refs), sources)
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
            wal: None,
            ready: tokio::sync::watch::channel(true).1,
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
