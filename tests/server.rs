//! `/healthz`, `/readyz` and `/metrics` of a running binary: liveness keeps
//! answering while a receiver is stalled and while Loki is down; a failing
//! receiver shows as degraded, not as unready; Loki down is not ready.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;
use common::{free_port, Killed, BIN};

async fn get(url: &str) -> Option<(u16, String)> {
    let r = reqwest::Client::new()
        .get(url)
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .ok()?;
    let code = r.status().as_u16();
    Some((code, r.text().await.ok()?))
}

async fn wait_for(url: &str, pred: impl Fn(u16, &str) -> bool) -> (u16, String) {
    let mut last = (0, String::new());
    for _ in 0..150 {
        if let Some((c, b)) = get(url).await {
            if pred(c, &b) {
                return (c, b);
            }
            last = (c, b);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{url}: condition not met; last {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn liveness_answers_while_a_receiver_hangs_and_it_shows_as_degraded() {
    // A webhook that never answers.
    let hang = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hang_addr = hang.local_addr().unwrap();
    tokio::spawn(async move {
        let mut keep = Vec::new();
        while let Ok((s, _)) = hang.accept().await {
            keep.push(s);
        }
    });
    let port = free_port();
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--log-level",
            "warn",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--no-stdout",
            "--webhook-timeout",
            "200ms",
        ])
        .args(["--webhook", &format!("http://{hang_addr}/hook")])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let child = Killed(child);
    let fixture = std::fs::read(format!(
        "{}/fixtures/egress-black-hole.log",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    stdin.write_all(&fixture).unwrap();
    stdin.flush().unwrap();
    let base = format!("http://127.0.0.1:{port}");
    // Alerts fired and are stuck in the webhook's lane.
    let (_, metrics) = wait_for(&format!("{base}/metrics"), |_, b| {
        b.contains("kind=\"queue_depth\"")
            && !b.contains("queue_depth\",receiver=\"webhook http://127.0.0.1\"} 0")
    })
    .await;
    assert!(
        metrics.contains("sigwatch_events_total{kind=\"lines\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("kind=\"rule_matches\",rule=\"egress.black_hole\""),
        "{metrics}"
    );
    let (code, body) = get(&format!("{base}/healthz")).await.unwrap();
    assert_eq!(
        (code, body.as_str()),
        (200, "ok\n"),
        "alive while the receiver hangs"
    );
    let (code, body) = wait_for(&format!("{base}/readyz"), |_, b| {
        b.contains("\"degraded_receivers\":[\"webhook")
    })
    .await;
    assert_eq!(
        code, 200,
        "a degraded receiver does not make sigwatch unready: {body}"
    );
    drop(stdin);
    drop(child);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn liveness_answers_while_loki_is_down_and_readiness_says_why() {
    let dead = free_port();
    let port = free_port();
    let child = Command::new(BIN)
        .args([
            "run",
            "--log-level",
            "error",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .args([
            "--loki",
            &format!("http://127.0.0.1:{dead}"),
            "--query",
            "{namespace=\"livekit\"}",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let _child = Killed(child);
    let base = format!("http://127.0.0.1:{port}");
    let (code, _) = wait_for(&format!("{base}/healthz"), |c, _| c != 0).await;
    assert_eq!(code, 200, "Loki down does not kill sigwatch's liveness");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (code, body) = get(&format!("{base}/healthz")).await.unwrap();
    assert_eq!(code, 200, "{body}");
    let (code, body) = get(&format!("{base}/readyz")).await.unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("\"connected\":false") && body.contains("not answered yet"),
        "{body}"
    );
}

/// Starts `run` with a webhook that never answers and feeds it the black-hole
/// fixture, then waits until /metrics shows notifications queued for that
/// webhook (so alerts are stuck in delivery, whatever the machine's speed);
/// returns the child and its stdin. `state_dir`: the spool's directory.
async fn stuck_run(
    shutdown_timeout: &str,
    state_dir: Option<&std::path::Path>,
) -> (Killed, std::process::ChildStdin) {
    let hang = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hang_addr = hang.local_addr().unwrap();
    tokio::spawn(async move {
        let mut keep = Vec::new();
        while let Ok((s, _)) = hang.accept().await {
            keep.push(s);
        }
    });
    let port = free_port();
    let mut cmd = Command::new(BIN);
    cmd.args([
        "run",
        "--log-level",
        "error",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--no-stdout",
        "--shutdown-timeout",
        shutdown_timeout,
    ])
    .args(["--webhook", &format!("http://{hang_addr}/hook")]);
    if let Some(d) = state_dir {
        cmd.arg("--state-dir").arg(d);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let fixture = std::fs::read(format!(
        "{}/fixtures/egress-black-hole.log",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    stdin.write_all(&fixture).unwrap();
    stdin.flush().unwrap();
    let child = Killed(child);
    let queued = |_: u16, m: &str| {
        m.lines().any(|l| {
            l.starts_with("sigwatch_state{kind=\"queue_depth\",receiver=\"webhook")
                && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) > Some(0.0)
        })
    };
    let (_, metrics) = wait_for(&format!("http://127.0.0.1:{port}/metrics"), queued).await;
    assert!(
        queued(0, &metrics),
        "nothing queued for the webhook:\n{metrics}"
    );
    (child, stdin)
}

fn signal(child: &Killed, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.0.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig}");
}

async fn wait_exit(child: &mut Killed, within: Duration) -> (i32, Duration) {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            return (status.code().unwrap_or(-1), start.elapsed());
        }
        assert!(start.elapsed() < within, "still running after {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_hanging_receiver_and_no_spool_exits_within_the_deadline_saying_it_dropped()
{
    let (mut child, _stdin) = stuck_run("2s", None).await;
    signal(&child, "-TERM");
    let (code, took) = wait_exit(&mut child, Duration::from_secs(10)).await;
    assert_eq!(
        code, 3,
        "a bounded drain; without a spool the queued notifications are lost, and the exit says so"
    );
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(5),
        "waited about the 2 s deadline: {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_hanging_receiver_and_a_spool_exits_cleanly_keeping_them() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _stdin) = stuck_run("2s", Some(dir.path())).await;
    signal(&child, "-TERM");
    let (code, took) = wait_exit(&mut child, Duration::from_secs(10)).await;
    assert_eq!(code, 0, "queued notifications stay in the spool: none lost");
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(5),
        "waited about the 2 s deadline: {took:?}"
    );
    let spooled: Vec<_> = std::fs::read_dir(dir.path().join("spool"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("egress.")))
        .collect();
    assert!(
        !spooled.is_empty(),
        "a non-empty spool file is left for the next start"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once() {
    let (mut child, _stdin) = stuck_run("60s", None).await;
    signal(&child, "-TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    signal(&child, "-TERM");
    let (code, took) = wait_exit(&mut child, Duration::from_secs(5)).await;
    assert_eq!(code, 130);
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn json_logs_are_one_object_per_line() {
    let out = Command::new(BIN)
        .args(["replay", "--log-format", "json", "--log-level", "info"])
        .arg(format!(
            "{}/fixtures/grpc-slow-auth.log",
            env!("CARGO_MANIFEST_DIR")
        ))
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert!(!lines.is_empty());
    for l in lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert!(v.get("level").is_some() && v.get("fields").is_some(), "{l}");
    }
}

/// A Loki that answers `query_range` with no entries while `up`, and with
/// 503 otherwise.
async fn switchable_loki(up: std::sync::Arc<std::sync::atomic::AtomicBool>) -> String {
    use std::sync::atomic::Ordering;
    let app = axum::Router::new().route(
        "/loki/api/v1/query_range",
        axum::routing::get(move || {
            let up = up.clone();
            async move {
                if up.load(Ordering::SeqCst) {
                    (
                        axum::http::StatusCode::OK,
                        r#"{"status":"success","data":{"resultType":"streams","result":[]}}"#,
                    )
                } else {
                    (
                        axum::http::StatusCode::SERVICE_UNAVAILABLE,
                        "Some services are not Running",
                    )
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_loki_down_and_back_while_liveness_holds() {
    use std::sync::atomic::Ordering;
    let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let loki = switchable_loki(up.clone()).await;
    let port = free_port();
    let child = Command::new(BIN)
        .args(["run", "--log-level", "error", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--loki", &loki, "--query", "{namespace=\"livekit\"}"])
        .args(["--loki-interval", "200ms", "--loki-lag", "0s"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let _child = Killed(child);
    let base = format!("http://127.0.0.1:{port}");
    let (_, body) = wait_for(&format!("{base}/readyz"), |c, _| c == 200).await;
    assert!(body.contains("answering"), "{body}");
    // Loki stops answering: unready within 30 s (after 10 s of failures),
    // never dead.
    up.store(false, Ordering::SeqCst);
    let down = std::time::Instant::now();
    let mut unready = None;
    while down.elapsed() < Duration::from_secs(35) {
        let (h, _) = get(&format!("{base}/healthz")).await.unwrap();
        assert_eq!(h, 200, "liveness never depends on Loki");
        let (c, b) = get(&format!("{base}/readyz")).await.unwrap();
        if c == 503 {
            unready = Some((down.elapsed(), b));
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (after, body) = unready.expect("/readyz turned 503 while Loki was down");
    assert!(
        after >= Duration::from_secs(9) && after <= Duration::from_secs(30),
        "{after:?}"
    );
    assert!(
        body.contains("no answer for") && body.contains("503"),
        "the reason is shown: {body}"
    );
    // Loki answers again: ready again (the poller's backoff is at most 30 s).
    up.store(true, Ordering::SeqCst);
    let back = std::time::Instant::now();
    loop {
        let (c, _) = get(&format!("{base}/readyz")).await.unwrap();
        if c == 200 {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(45),
            "/readyz back to 200 once Loki answers"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Opens a connection and sends half a request, then leaves it.
async fn half_request(port: u16) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .await
        .unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_half_sent_clients_cannot_starve_liveness() {
    use sigwatch::server::{serve_with, Limits, Telemetry};
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let t = std::sync::Arc::new(Telemetry::new());
    t.set_rules_loaded();
    t.set_source(true, "stdin");
    let limits = Limits {
        max_connections: 4,
        health_reserve: 2,
        reserve_timeout: Duration::from_millis(300),
        // Long enough that the slots stay full while the test looks, on a
        // loaded machine too; the test waits for the closes, not this long.
        header_timeout: Duration::from_secs(3),
        max_age: Duration::from_secs(60),
    };
    tokio::spawn(serve_with(listener, t.clone(), limits, Default::default()));
    let base = format!("http://127.0.0.1:{port}");
    wait_for(&format!("{base}/healthz"), |c, _| c == 200).await;
    // Fill every slot with clients that never finish their headers.
    let mut slow = Vec::new();
    for _ in 0..4 {
        slow.push(half_request(port).await);
    }
    // Wait (bounded) until the server has taken them all (each holds a slot
    // as soon as accepted): then /metrics is refused.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let (code, body) = loop {
        let (code, body) = get(&format!("{base}/metrics")).await.expect("answered");
        if code == 503 || std::time::Instant::now() > deadline {
            break (code, body);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("connection limit"), "{body}");
    let (code, body) = get(&format!("{base}/healthz")).await.expect("answered");
    assert_eq!(code, 200, "liveness from the reserve: {body}");
    // The header timeout closes every half-sent request.
    for mut s in slow {
        let mut buf = Vec::new();
        let r = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await;
        assert!(r.is_ok(), "the server closed the slow client");
    }
    // Slots free again: everything is served, and the rejections counted.
    let (code, m) = wait_for(&format!("{base}/metrics"), |c, _| c == 200).await;
    assert_eq!(code, 200);
    assert!(
        m.lines().any(|l| l
            .starts_with("sigwatch_events_total{kind=\"http_connections_rejected\"}")
            && !l.ends_with(" 0")),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_answers_healthz_past_its_connection_cap() {
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["run", "--log-level", "error", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let _child = Killed(child);
    let base = format!("http://127.0.0.1:{port}");
    wait_for(&format!("{base}/healthz"), |c, _| c == 200).await;
    // More idle clients than the default cap (at most 256).
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(half_request(port).await);
    }
    let (code, body) = get(&format!("{base}/healthz")).await.expect("answered");
    assert_eq!(code, 200, "{body}");
    drop(idle);
    drop(stdin);
}

#[test]
fn a_taken_default_address_is_a_warning_and_an_asked_for_one_is_an_error() {
    // 127.0.0.1:9464 held by this test (another test's sigwatch may hold
    // it a moment: wait for it, bounded; if something holds it for good,
    // it is taken all the same).
    let mut hold = None;
    for _ in 0..300 {
        if let Ok(l) = std::net::TcpListener::bind("127.0.0.1:9464") {
            hold = Some(l);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = Command::new(BIN)
        .args(["run", "--log-level", "warn"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "a second sigwatch runs on: {stderr}");
    assert!(
        stderr.contains("default address") && stderr.contains("--listen none"),
        "{stderr}"
    );
    drop(hold);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(BIN)
        .args(["run", "--log-level", "warn", "--listen", &addr])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.matches("Address already in use").count(),
        1,
        "the cause, once: {stderr}"
    );
}
