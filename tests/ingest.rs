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
    let port = free_port();
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--log-level",
            "error",
            "--listen",
            "none",
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
    (
        code,
        text.split_once("\r\n\r\n")
            .map_or(String::new(), |(_, b)| b.to_string()),
    )
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
    let ingest = start(&[]);
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
}
