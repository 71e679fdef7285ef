//! `/healthz`, `/readyz` and `/metrics` of a running binary: liveness keeps
//! answering while a receiver is stalled and while Loki is down; a failing
//! receiver shows as degraded, not as unready; Loki down is not ready.

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
        body.contains("\"connected\":false")
            && body.contains("not answered yet"),
        "{body}"
    );
}

/// Starts `run` with a webhook that never answers and feeds it the black-hole
/// fixture, so alerts are stuck in delivery; returns the child and its stdin.
async fn stuck_run(shutdown_timeout: &str) -> (Killed, std::process::ChildStdin) {
    let hang = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hang_addr = hang.local_addr().unwrap();
    tokio::spawn(async move {
        let mut keep = Vec::new();
        while let Ok((s, _)) = hang.accept().await {
            keep.push(s);
        }
    });
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--log-level",
            "error",
            "--listen",
            "none",
            "--no-stdout",
            "--shutdown-timeout",
            shutdown_timeout,
        ])
        .args(["--webhook", &format!("http://{hang_addr}/hook")])
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
    tokio::time::sleep(Duration::from_millis(1500)).await;
    (Killed(child), stdin)
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
async fn sigterm_with_a_hanging_receiver_exits_within_the_deadline() {
    let (mut child, _stdin) = stuck_run("2s").await;
    signal(&child, "-TERM");
    let (code, took) = wait_exit(&mut child, Duration::from_secs(10)).await;
    assert_eq!(code, 0, "a bounded drain, then a clean exit");
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(5),
        "waited about the 2 s deadline: {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once() {
    let (mut child, _stdin) = stuck_run("60s").await;
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
