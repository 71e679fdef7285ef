//! `run --ingest`: pushes as the shippers send them. The Loki push bodies
//! are encoded here from the message layout Loki documents for its push
//! API (PushRequest → streams → entries; field numbers of push.proto,
//! written here as prost messages, not taken from the product), the OTLP
//! ones from opentelemetry-proto's logs layout. A fixture pushed in
//! batches fires the same alerts as `replay` of the file; bad pushes get a
//! clear status and cost nothing else.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;
use common::{free_port, Killed, BIN};
use prost::Message;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Loki's push.proto, as its documentation lays it out.
mod logproto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PushRequest {
        #[prost(message, repeated, tag = "1")]
        pub streams: Vec<StreamAdapter>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct StreamAdapter {
        #[prost(string, tag = "1")]
        pub labels: String,
        #[prost(message, repeated, tag = "2")]
        pub entries: Vec<EntryAdapter>,
        #[prost(uint64, tag = "3")]
        pub hash: u64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct EntryAdapter {
        #[prost(message, optional, tag = "1")]
        pub timestamp: Option<Timestamp>,
        #[prost(string, tag = "2")]
        pub line: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Timestamp {
        #[prost(int64, tag = "1")]
        pub seconds: i64,
        #[prost(int32, tag = "2")]
        pub nanos: i32,
    }
}

/// OTLP logs, as opentelemetry-proto lays it out (the parts used here).
mod otlp {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExportLogsServiceRequest {
        #[prost(message, repeated, tag = "1")]
        pub resource_logs: Vec<ResourceLogs>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResourceLogs {
        #[prost(message, optional, tag = "1")]
        pub resource: Option<Resource>,
        #[prost(message, repeated, tag = "2")]
        pub scope_logs: Vec<ScopeLogs>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Resource {
        #[prost(message, repeated, tag = "1")]
        pub attributes: Vec<KeyValue>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ScopeLogs {
        #[prost(message, repeated, tag = "2")]
        pub log_records: Vec<LogRecord>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct LogRecord {
        #[prost(fixed64, tag = "1")]
        pub time_unix_nano: u64,
        #[prost(message, optional, tag = "5")]
        pub body: Option<AnyValue>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KeyValue {
        #[prost(string, tag = "1")]
        pub key: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<AnyValue>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AnyValue {
        #[prost(string, tag = "1")]
        pub string_value: String,
    }
}

fn loki_push(labels: &str, batch: &[(String, i64)]) -> Vec<u8> {
    let req = logproto::PushRequest {
        streams: vec![logproto::StreamAdapter {
            labels: labels.to_string(),
            entries: batch
                .iter()
                .map(|(line, ts)| logproto::EntryAdapter {
                    timestamp: Some(logproto::Timestamp {
                        seconds: ts.div_euclid(1_000_000_000),
                        nanos: i32::try_from(ts.rem_euclid(1_000_000_000)).unwrap(),
                    }),
                    line: line.clone(),
                })
                .collect(),
            hash: 0,
        }],
    };
    snap::raw::Encoder::new()
        .compress_vec(&req.encode_to_vec())
        .unwrap()
}

fn otlp_export(namespace: &str, batch: &[(String, i64)]) -> Vec<u8> {
    let s = |v: &str| {
        Some(otlp::AnyValue {
            string_value: v.to_string(),
        })
    };
    otlp::ExportLogsServiceRequest {
        resource_logs: vec![otlp::ResourceLogs {
            resource: Some(otlp::Resource {
                attributes: vec![otlp::KeyValue {
                    key: "k8s.namespace.name".into(),
                    value: s(namespace),
                }],
            }),
            scope_logs: vec![otlp::ScopeLogs {
                log_records: batch
                    .iter()
                    .map(|(line, ts)| otlp::LogRecord {
                        time_unix_nano: u64::try_from(*ts).unwrap(),
                        body: s(line),
                    })
                    .collect(),
            }],
        }],
    }
    .encode_to_vec()
}

/// A `run --ingest` on a free port, its stdout read line by line on a
/// thread (so its pipe never fills).
struct Ingest {
    port: u16,
    lines: std::sync::mpsc::Receiver<String>,
    _child: Killed,
}

fn start(extra: &[&str]) -> Ingest {
    start_on("none", extra)
}

/// `start` with the status server (and so /metrics) on a free port: the
/// run and that port.
fn start_with_metrics(extra: &[&str]) -> (Ingest, u16) {
    let m = free_port();
    (start_on(&format!("127.0.0.1:{m}"), extra), m)
}

fn start_on(listen: &str, extra: &[&str]) -> Ingest {
    let port = free_port();
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--log-level",
            "error",
            "--listen",
            listen,
            "--no-links",
        ])
        .arg(format!("--ingest=127.0.0.1:{port}"))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let ingest = Ingest {
        port,
        lines,
        _child: Killed(child),
    };
    // Bounded wait for the listener.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the ingest listener never came up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    ingest
}

/// One POST on 127.0.0.1 (HTTP/1.1, closed after): (status, body).
fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let (code, _, body) = post_full(port, path, headers, body);
    (code, body)
}

/// One POST on 127.0.0.1: (status, the response head, body).
fn post_full(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text.split(' ').nth(1).unwrap().parse().unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (code, head.to_string(), body.to_string())
}

/// The value of the `sigwatch_events_total` sample whose labels include
/// every `k="v"` of `labels` (0 when there is none yet).
fn events(metrics_port: u16, labels: &[&str]) -> u64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", metrics_port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines()
        .filter(|l| l.starts_with("sigwatch_events_total{"))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The firing notifications `replay --no-links` gives for the fixture's
/// lines in time order (written to `dir`).
fn replay_firing(lines: &[String], dir: &std::path::Path) -> Vec<String> {
    let path = dir.join("sorted.log");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let out = Command::new(BIN)
        .args(["replay", "--no-summary", "--no-links"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("{\"state\":\"firing\""))
        .map(str::to_string)
        .collect()
}

/// The first `n` firing notifications the run prints (bounded wait).
fn firing(ingest: &Ingest, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    while got.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{} of {n} firing notifications: {got:#?}",
            got.len()
        );
        if let Ok(l) = ingest.lines.recv_timeout(left) {
            if l.starts_with("{\"state\":\"firing\"") {
                got.push(l);
            }
        }
    }
    got
}

#[test]
fn a_fixture_pushed_in_batches_fires_what_replay_fires_over_loki_push_and_otlp() {
    for fixture in ["egress-black-hole.log", "livekit-redis-outage.log"] {
        let (lines, times) = common::in_time_order(fixture);
        let dir = tempfile::tempdir().unwrap();
        let want = replay_firing(&lines, dir.path());
        assert!(!want.is_empty(), "{fixture} fires");
        let entries: Vec<(String, i64)> = lines.into_iter().zip(times).collect();
        for protocol in ["loki", "otlp"] {
            let ingest = start(&[]);
            let pb = [("Content-Type", "application/x-protobuf")];
            for batch in entries.chunks(200) {
                let (code, body) = match protocol {
                    "loki" => post(
                        ingest.port,
                        "/loki/api/v1/push",
                        &pb,
                        &loki_push(r#"{namespace="media", job="x"}"#, batch),
                    ),
                    _ => post(ingest.port, "/v1/logs", &pb, &otlp_export("media", batch)),
                };
                assert!((200..300).contains(&code), "{protocol}: {code} {body}");
            }
            let got = firing(&ingest, want.len());
            assert_eq!(got, want, "{fixture} over {protocol}");
        }
    }
}

#[test]
fn bad_pushes_get_a_clear_status_and_good_ones_go_on() {
    let (ingest, metrics) = start_with_metrics(&[]);
    let send = |path: &str, ct: &str, body: Vec<u8>| {
        post(ingest.port, path, &[("Content-Type", ct)], &body)
    };
    let good = loki_push(
        r#"{job="x"}"#,
        &[("a line".into(), 1_752_667_200_000_000_000)],
    );
    let mut truncated = snap::raw::Decoder::new().decompress_vec(&good).unwrap();
    truncated.truncate(truncated.len() - 2);
    let truncated = snap::raw::Encoder::new().compress_vec(&truncated).unwrap();
    let (code, body) = send("/loki/api/v1/push", "application/x-protobuf", truncated);
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("PushRequest"), "{body}");
    let (code, _) = send("/loki/api/v1/push", "text/plain", b"x".to_vec());
    assert_eq!(code, 415);
    let (code, body) = send(
        "/v1/logs",
        "application/x-protobuf",
        b"\x0a\xff\xff".to_vec(),
    );
    assert_eq!(code, 400, "{body}");
    let (code, body) = send(
        "/loki/api/v1/push",
        "application/json",
        br#"{"streams":[{"stream":{"job":"x"},"values":[["not a time","x"]]}]}"#.to_vec(),
    );
    assert_eq!(code, 400);
    assert!(body.contains("stream 0, value 0"), "{body}");
    // Invalid UTF-8 in a line: taken, repaired.
    let (code, _) = send(
        "/loki/api/v1/push",
        "application/json",
        b"{\"streams\":[{\"stream\":{\"job\":\"x\"},\"values\":[[\"1752667200000000000\",\"bad \xff\"]]}]}"
            .to_vec(),
    );
    assert_eq!(code, 204);
    // A body announced as 2 GiB is refused before it is read.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", ingest.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    use std::io::{Read, Write};
    write!(
        s,
        "POST /loki/api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 2147483648\r\n\r\n"
    )
    .unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 413");
    // 100,000 streams in one JSON push: taken.
    let streams: Vec<String> = (0..100_000)
        .map(|i| {
            format!(
                r#"{{"stream":{{"pod":"p{i}"}},"values":[["1752667200000000000","line {i}"]]}}"#
            )
        })
        .collect();
    let body = format!(r#"{{"streams":[{}]}}"#, streams.join(","));
    let (code, _) = send("/loki/api/v1/push", "application/json", body.into_bytes());
    assert_eq!(code, 204);
    // And a good push is still taken.
    let (code, _) = send("/loki/api/v1/push", "application/x-protobuf", good);
    assert_eq!(code, 204);
    // Each refusal counted by its reason, each line taken counted once.
    let outcome = |protocol: &str, outcome: &str| {
        events(
            metrics,
            &[
                "kind=\"ingest_requests\"",
                &format!("protocol=\"{protocol}\""),
                &format!("outcome=\"{outcome}\""),
            ],
        )
    };
    assert_eq!(outcome("loki", "malformed"), 2);
    assert_eq!(outcome("otlp", "malformed"), 1);
    assert_eq!(outcome("loki", "unsupported"), 1);
    assert_eq!(outcome("loki", "too_large"), 1);
    assert_eq!(outcome("loki", "accepted"), 3);
    assert_eq!(
        events(metrics, &["kind=\"ingest_lines\"", "protocol=\"loki\""]),
        100_002
    );
    assert!(events_reaching(metrics, &["kind=\"invalid_utf8_lines\""], 1) >= 1);
}

/// A background pusher that keeps a small queue full: pushes of `LINES`
/// lines of one template no rule matches, on a stream of their own, all at
/// one time (the fixture's first, so they move no clock past it). Each push
/// holds the whole queue while the loop works through it, so a push that
/// arrives meanwhile is told to retry.
struct Filler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<u64>>,
}

impl Filler {
    const LINES: usize = 4000;

    /// Starts pushing; returns once the first push is acknowledged.
    fn start(port: u16, ts: i64) -> Filler {
        use std::sync::atomic::{AtomicBool, Ordering};
        let batch: Vec<(String, i64)> = (0..Self::LINES)
            .map(|i| (format!("background chatter {i} from the filler stream"), ts))
            .collect();
        let body = loki_push(r#"{job="filler"}"#, &batch);
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let pb = [("Content-Type", "application/x-protobuf")];
            let mut acked = 0u64;
            while !flag.load(Ordering::Relaxed) {
                let (code, text) = post(port, "/loki/api/v1/push", &pb, &body);
                match code {
                    204 => {
                        acked += Self::LINES as u64;
                        let _ = tx.send(());
                    }
                    429 => std::thread::sleep(Duration::from_millis(5)),
                    _ => panic!("filler push: {code} {text}"),
                }
            }
            acked
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the filler's first push is acknowledged");
        Filler {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops it: the lines of its acknowledged pushes.
    fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap()
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// `events` once it reaches `least` (the process-wide counters reach
/// /metrics once a second): bounded wait.
fn events_reaching(metrics_port: u16, labels: &[&str], least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = events(metrics_port, labels);
        if n >= least || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `Retry-After` of a response head, in seconds.
fn retry_after(head: &str) -> Option<u64> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("retry-after")
            .then(|| v.trim().parse().ok())
            .flatten()
    })
}

#[test]
fn a_full_queue_says_retry_and_the_retries_deliver_every_line_once() {
    let fixture = "egress-black-hole.log";
    let (lines, times) = common::in_time_order(fixture);
    let dir = tempfile::tempdir().unwrap();
    let want = replay_firing(&lines, dir.path());
    let entries: Vec<(String, i64)> = lines.iter().cloned().zip(times.iter().copied()).collect();
    for protocol in ["loki", "otlp"] {
        let (ingest, metrics) =
            start_with_metrics(&["--ingest-queue", "65536", "--ingest-queue-wait", "0s"]);
        let filler = Some(Filler::start(ingest.port, times[0]));
        let mut filler = filler;
        let mut filled = 0;
        let mut retried = 0;
        // A shipper's loop: each batch in order, one at a time; a "retry"
        // answer is waited out as its Retry-After says and the same batch
        // sent again.
        for batch in entries.chunks(100) {
            let (path, body, busy) = match protocol {
                "loki" => (
                    "/loki/api/v1/push",
                    loki_push(r#"{namespace="media", job="x"}"#, batch),
                    429,
                ),
                _ => ("/v1/logs", otlp_export("media", batch), 503),
            };
            let pb = [("Content-Type", "application/x-protobuf")];
            let mut tries = 0;
            loop {
                let (code, head, text) = post_full(ingest.port, path, &pb, &body);
                if (200..300).contains(&code) {
                    break;
                }
                assert_eq!(code, busy, "{protocol}: {text}");
                let wait = retry_after(&head).expect("a Retry-After");
                retried += 1;
                tries += 1;
                assert!(tries < 30, "{protocol}: the queue never drained");
                // Once told to wait, the pressure goes: the rest flows.
                if let Some(f) = filler.take() {
                    filled = f.stop();
                }
                std::thread::sleep(Duration::from_secs(wait));
            }
        }
        if let Some(f) = filler.take() {
            filled = f.stop();
        }
        assert!(retried >= 1, "{protocol}: no push found the queue full");
        assert!(filled >= Filler::LINES as u64);
        let got = firing(&ingest, want.len());
        assert_eq!(
            got, want,
            "{fixture} over {protocol}, retried {retried} times"
        );
        // Every line taken once: the fixture's and the filler's acknowledged
        // ones, none of a refused push.
        let taken = events(metrics, &["kind=\"ingest_lines\""]);
        assert_eq!(taken, lines.len() as u64 + filled, "{protocol}");
        let busy = events(
            metrics,
            &[
                "kind=\"ingest_requests\"",
                &format!("protocol=\"{protocol}\""),
                "outcome=\"busy\"",
            ],
        );
        assert!(busy >= retried, "{protocol}: {busy} busy answers counted");
    }
}

#[test]
fn the_opentelemetry_sdk_retries_a_full_queue_and_delivers_every_line_once() {
    let fixture = "egress-black-hole.log";
    let (lines, times) = common::in_time_order(fixture);
    let dir = tempfile::tempdir().unwrap();
    let want = replay_firing(&lines, dir.path());
    let (ingest, metrics) =
        start_with_metrics(&["--ingest-queue", "65536", "--ingest-queue-wait", "0s"]);
    let input = dir.path().join("records.tsv");
    let rows: Vec<String> = lines
        .iter()
        .zip(&times)
        .map(|(l, t)| format!("{t}\t{l}"))
        .collect();
    std::fs::write(&input, rows.join("\n") + "\n").unwrap();
    let filler = Filler::start(ingest.port, times[0]);
    let mut sdk = Killed(
        Command::new(python())
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/clients/push.py"
            ))
            .arg("otlp")
            .arg(format!("http://127.0.0.1:{}/v1/logs", ingest.port))
            .arg(&input)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // The pressure stays until the exporter has been told to retry.
    let busy = |m| {
        events(
            m,
            &[
                "kind=\"ingest_requests\"",
                "protocol=\"otlp\"",
                "outcome=\"busy\"",
            ],
        )
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while busy(metrics) == 0 {
        assert!(
            Instant::now() < deadline,
            "the exporter never found the queue full"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let filled = filler.stop();
    let status = sdk.0.wait().unwrap();
    let mut err = String::new();
    use std::io::Read;
    sdk.0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "the exporter gave up: {err}");
    let got = firing(&ingest, want.len());
    assert_eq!(got, want, "{fixture} through the SDK under pressure");
    assert_eq!(
        events(metrics, &["kind=\"ingest_lines\"", "protocol=\"otlp\""]),
        lines.len() as u64,
        "every record once"
    );
    assert!(filled >= Filler::LINES as u64);
}

#[test]
fn tcp_syslog_waits_for_room_and_udp_drops_are_counted() {
    let fixture = "egress-black-hole.log";
    let (lines, times) = common::in_time_order(fixture);
    let dir = tempfile::tempdir().unwrap();
    let want = replay_firing(&lines, dir.path());
    let syslog = free_port();
    let (ingest, metrics) = start_with_metrics(&[
        "--syslog",
        &format!("127.0.0.1:{syslog}"),
        "--ingest-queue",
        "65536",
        "--ingest-queue-wait",
        "0s",
    ]);
    wait_listening(syslog);
    let filler = Filler::start(ingest.port, times[0]);
    // UDP under pressure: datagrams that find the queue full are dropped
    // and counted, not queued without bound.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dropped = || events(metrics, &["kind=\"syslog_dropped\"", "transport=\"udp\""]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while dropped() == 0 {
        assert!(Instant::now() < deadline, "no datagram was dropped");
        udp.send_to(
            b"<14>1 2025-07-16T12:00:00Z host app - - - chatter over UDP",
            ("127.0.0.1", syslog),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    // TCP under the same pressure: read only when there is room, so the
    // sender waits and every line arrives once.
    let sender = std::thread::spawn({
        let file = dir.path().join("sorted.log");
        move || logger(syslog, &["--tcp", "--octet-count", "--rfc5424"], &file)
    });
    std::thread::sleep(Duration::from_millis(200));
    filler.stop();
    sender.join().unwrap();
    let got = firing(&ingest, want.len());
    assert_eq!(got, want, "{fixture} over TCP under pressure");
    let deadline = Instant::now() + Duration::from_secs(60);
    while events(metrics, &["kind=\"syslog_messages\"", "transport=\"tcp\""]) < lines.len() as u64 {
        assert!(Instant::now() < deadline, "TCP messages missing");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        events(metrics, &["kind=\"syslog_messages\"", "transport=\"tcp\""]),
        lines.len() as u64
    );
}

#[test]
fn a_syslog_message_of_a_mebibyte_is_cut_and_counted_and_the_next_is_whole() {
    let fixture = "k8s-liveness-cascade.log";
    let (lines, times) = common::in_time_order(fixture);
    let dir = tempfile::tempdir().unwrap();
    let want = replay_firing(&lines, dir.path());
    let syslog = free_port();
    let (ingest, metrics) = start_with_metrics(&["--syslog", &format!("127.0.0.1:{syslog}")]);
    wait_listening(syslog);
    // One line-framed message of 1 MiB (stamped with the fixture's first
    // time, so the wall clock does not stand in for its time), then the
    // fixture on the same connection.
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", syslog)).unwrap();
    let first = std::time::UNIX_EPOCH + Duration::from_nanos(u64::try_from(times[0]).unwrap());
    let mut big = format!(
        "<14>Jul 16 12:00:00 host app: {} ",
        humantime::format_rfc3339_millis(first)
    )
    .into_bytes();
    big.extend(std::iter::repeat_n(b'x', 1 << 20));
    big.push(b'\n');
    s.write_all(&big).unwrap();
    for l in &lines {
        writeln!(s, "<14>Jul 16 12:00:00 host app: {l}").unwrap();
    }
    drop(s);
    let got = firing(&ingest, want.len());
    assert_eq!(got, want, "the messages after the long one");
    assert!(
        events_reaching(metrics, &["kind=\"truncated_lines\""], 1) >= 1,
        "the cut is counted"
    );
    assert_eq!(
        events(metrics, &["kind=\"syslog_messages\"", "transport=\"tcp\""]),
        lines.len() as u64 + 1
    );
}

#[test]
fn pushes_need_the_token_and_a_reachable_address_needs_one() {
    let out = Command::new(BIN)
        .args(["run", "--listen", "none", "--ingest", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--ingest-token-file") && err.contains("--insecure-ingest"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t"), "push-tok\n").unwrap();
    let tokens = dir.path().join("t");
    let ingest = start(&["--ingest-token-file", tokens.to_str().unwrap()]);
    let body = loki_push(
        r#"{job="x"}"#,
        &[("a line".into(), 1_752_667_200_000_000_000)],
    );
    let ct = ("Content-Type", "application/x-protobuf");
    let (code, _) = post(ingest.port, "/loki/api/v1/push", &[ct], &body);
    assert_eq!(code, 401);
    let (code, _) = post(
        ingest.port,
        "/loki/api/v1/push",
        &[ct, ("Authorization", "Bearer push-tok")],
        &body,
    );
    assert_eq!(code, 204);
}

/// The Python with the real clients (tests/clients/requirements.txt),
/// which .ci/run installs into target/test-python.
fn python() -> String {
    let p = std::env::var("SIGWATCH_TEST_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/target/test-python/bin/python",
            env!("CARGO_MANIFEST_DIR")
        )
    });
    assert!(
        std::path::Path::new(&p).exists(),
        "{p} not found: python3 -m venv target/test-python && target/test-python/bin/pip install -r tests/clients/requirements.txt (bash .ci/run does)"
    );
    p
}

#[test]
fn the_opentelemetry_sdk_and_a_loki_logging_handler_push_what_replay_fires() {
    let py = python();
    let fixture = "egress-black-hole.log";
    let (lines, times) = common::in_time_order(fixture);
    let dir = tempfile::tempdir().unwrap();
    let want = replay_firing(&lines, dir.path());
    assert!(!want.is_empty());
    let input = dir.path().join("records.tsv");
    let rows: Vec<String> = times
        .iter()
        .zip(&lines)
        .map(|(t, l)| format!("{t}\t{l}"))
        .collect();
    std::fs::write(&input, rows.join("\n") + "\n").unwrap();
    for (kind, path) in [("otlp", "/v1/logs"), ("loki", "/loki/api/v1/push")] {
        let ingest = start(&[]);
        let url = format!("http://127.0.0.1:{}{path}", ingest.port);
        let out = Command::new(&py)
            .arg(format!(
                "{}/tests/clients/push.py",
                env!("CARGO_MANIFEST_DIR")
            ))
            .args([kind, &url])
            .arg(&input)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = firing(&ingest, want.len());
        assert_eq!(got, want, "{fixture} through the {kind} client");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let ca = common::test_ca("sigwatch ingest CA");
    common::write_leaf(&ca, dir.path());
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let ingest = start(&[
        "--ingest-tls-cert",
        cert.to_str().unwrap(),
        "--ingest-tls-key",
        key.to_str().unwrap(),
    ]);
    let c = common::tls_client(&ca, ingest.port);
    let r = c
        .post(format!(
            "https://localhost:{}/loki/api/v1/push",
            ingest.port
        ))
        .header("content-type", "application/json")
        .body(
            r#"{"streams":[{"stream":{"job":"x"},"values":[["1752667200000000000","over tls"]]}]}"#,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    // Plain HTTP on the TLS port is not taken.
    let port = ingest.port;
    let answer = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.write_all(
            b"POST /loki/api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
        );
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
    .await
    .unwrap();
    assert!(!answer.starts_with("HTTP/1.1 2"), "{answer}");
}

/// Waits (bounded) until a TCP listener answers on `port`.
fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `logger` (util-linux) sending every line of `file` to 127.0.0.1:`port`.
fn logger(port: u16, transport: &[&str], file: &std::path::Path) {
    let out = Command::new("logger")
        .args([
            "--server",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--size",
            "65536",
            "--tag",
            "egress",
        ])
        .args(transport)
        .arg("--file")
        .arg(file)
        .output()
        .expect("logger (util-linux) is installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn logger_over_tcp_and_udp_fires_what_replay_fires() {
    for (fixture, transport) in [
        (
            "egress-black-hole.log",
            &["--tcp", "--octet-count", "--rfc5424"][..],
        ),
        ("egress-black-hole.log", &["--tcp", "--rfc3164"][..]),
        // A small fixture over UDP: a burst larger than the socket buffer
        // may be dropped by the kernel, which is UDP's way, not ours.
        ("k8s-liveness-cascade.log", &["--udp", "--rfc5424"][..]),
    ] {
        let (lines, _) = common::in_time_order(fixture);
        let dir = tempfile::tempdir().unwrap();
        let want = replay_firing(&lines, dir.path());
        assert!(!want.is_empty(), "{fixture}");
        let syslog = free_port();
        let ingest = start(&["--syslog", &format!("127.0.0.1:{syslog}")]);
        wait_listening(syslog);
        logger(syslog, transport, &dir.path().join("sorted.log"));
        let got = firing(&ingest, want.len());
        assert_eq!(got, want, "{fixture} over {transport:?}");
    }
}

#[test]
fn rsyslog_forwarding_fires_what_replay_fires() {
    let rsyslogd =
        std::env::var("SIGWATCH_TEST_RSYSLOGD").unwrap_or_else(|_| "/usr/sbin/rsyslogd".into());
    assert!(
        std::path::Path::new(&rsyslogd).exists(),
        "{rsyslogd} not found: apt-get install -y rsyslog (bash .ci/run does)"
    );
    let fixture = "egress-black-hole.log";
    let (lines, _) = common::in_time_order(fixture);
    let dir = tempfile::tempdir().unwrap();
    let want = replay_firing(&lines, dir.path());
    let (syslog, relay) = (free_port(), free_port());
    let ingest = start(&["--syslog", &format!("127.0.0.1:{syslog}")]);
    wait_listening(syslog);
    // rsyslog takes TCP on `relay` and forwards everything to sigwatch,
    // octet-counted RFC 5424, control characters (the lines' tabs) as
    // they are.
    let conf = dir.path().join("rsyslog.conf");
    std::fs::write(
        &conf,
        format!(
            r#"global(workDirectory="{work}" parser.escapeControlCharactersOnReceive="off" maxMessageSize="64k")
module(load="imtcp")
input(type="imtcp" address="127.0.0.1" port="{relay}")
*.* action(type="omfwd" target="127.0.0.1" port="{syslog}" protocol="tcp" TCP_Framing="octet-counted" template="RSYSLOG_SyslogProtocol23Format")
"#,
            work = dir.path().display()
        ),
    )
    .unwrap();
    let _rsyslog = Killed(
        Command::new(&rsyslogd)
            .arg("-n")
            .arg("-f")
            .arg(&conf)
            .arg(format!("-i{}", dir.path().join("rsyslogd.pid").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(relay);
    logger(
        relay,
        &["--tcp", "--octet-count", "--rfc5424"],
        &dir.path().join("sorted.log"),
    );
    let got = firing(&ingest, want.len());
    assert_eq!(got, want, "{fixture} through rsyslog");
}

#[test]
fn kill_9_after_acknowledged_pushes_loses_no_line_and_pages_nothing_twice() {
    let fixture = "egress-black-hole.log";
    let (lines, times) = common::in_time_order(fixture);
    let dir = tempfile::tempdir().unwrap();
    let want = replay_firing(&lines, dir.path());
    assert!(want.len() >= 2, "{want:?}");
    let state = dir.path().join("state");
    // Split where the last alert is still to come: the lines before the
    // split that it counts (after the checkpoint the first alert caused)
    // reach the second run only through the ingest log.
    let fires = |k: usize| {
        let d = tempfile::tempdir().unwrap();
        replay_firing(&lines[..k], d.path()).len()
    };
    let (mut lo, mut hi) = (1, lines.len());
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if fires(mid) < want.len() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    assert!(fires(lo) >= 1, "the first alert fires before the split");
    let entries: Vec<(String, i64)> = lines.into_iter().zip(times).collect();
    let (first, second) = entries.split_at(lo);
    let args = [
        "--state-dir",
        state.to_str().unwrap(),
        "--checkpoint-interval",
        "10m",
    ];
    let pb = [("Content-Type", "application/x-protobuf")];
    let push_all = |port: u16, part: &[(String, i64)]| {
        for batch in part.chunks(50) {
            let body = loki_push(r#"{namespace="media", job="x"}"#, batch);
            let (code, text) = post(port, "/loki/api/v1/push", &pb, &body);
            assert_eq!(code, 204, "{text}");
        }
    };
    // The first half acknowledged, then kill -9 at once: what the loop had
    // not processed or checkpointed is only in the ingest log.
    let mut got = Vec::new();
    {
        let mut ingest = start(&args);
        push_all(ingest.port, first);
        ingest._child.0.kill().unwrap();
        ingest._child.0.wait().unwrap();
        while let Ok(l) = ingest.lines.recv_timeout(Duration::from_secs(2)) {
            if l.starts_with("{\"state\":\"firing\"") {
                got.push(l);
            }
        }
    }
    assert!(
        std::fs::read_dir(state.join("wal")).unwrap().count() >= 1,
        "the ingest log is on disk"
    );
    let ingest = start(&args);
    push_all(ingest.port, second);
    let rest = want.len() - got.len().min(want.len());
    got.extend(firing(&ingest, rest));
    assert_eq!(got, want, "every alert once, across the kill");
    // Nothing more (no second page for what fired before the kill).
    std::thread::sleep(Duration::from_millis(500));
    while let Ok(l) = ingest.lines.try_recv() {
        assert!(!l.starts_with("{\"state\":\"firing\""), "fired twice: {l}");
    }
    // The ingest log, the checkpoint and the lock hold raw lines and
    // alerts: nobody but the user reads them.
    let mut seen = 0;
    let mut todo = vec![state.clone()];
    while let Some(p) = todo.pop() {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(&p).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{} is {mode:o}", p.display());
        seen += 1;
        if meta.is_dir() {
            todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    assert!(seen >= 4, "only {seen} paths under the state dir");
}
