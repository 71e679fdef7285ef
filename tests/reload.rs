//! Rule reload of a running binary: SIGHUP and `--watch-rules` swap the rule
//! set without losing the detector state of unchanged rules; an invalid set
//! is rejected, logged and counted, and the old set keeps running.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

mod common;
use common::{free_port, Killed, BIN};
const T0: i64 = 1_714_570_000;

fn rules(threshold: u32, summary: &str) -> String {
    format!(
        r#"rules:
  - id: t.errors
    title: Errors
    severity: warning
    match: {{contains: ["boom"]}}
    group_by: node
    detect: {{count: {{threshold: {threshold}, window: 10m}}}}
    annotations: {{summary: "{summary}"}}
  - id: t.crash
    title: Crash
    severity: critical
    match: {{contains: ["crash"]}}
    group_by: node
    detect: {{count: {{threshold: 1, window: 10m}}}}
"#
    )
}

fn line(at: i64, msg: &str) -> String {
    format!(
        "{{\"ts\":{}.0,\"level\":\"error\",\"msg\":\"{msg}\",\"nodeID\":\"ND_r\"}}\n",
        T0 + at
    )
}

async fn metric(port: u16, name: &str) -> u64 {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let Ok(r) = reqwest::Client::new()
        .get(&url)
        .timeout(Duration::from_secs(2))
        .send()
        .await
    else {
        return 0;
    };
    let body = r.text().await.unwrap_or_default();
    body.lines()
        .filter(|l| l.contains(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

async fn wait_metric(port: u16, name: &str, want: u64) {
    for _ in 0..200 {
        if metric(port, name).await >= want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} never reached {want}");
}

fn hup(child: &Child) {
    let ok = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

struct Running {
    child: Killed,
    stdin: ChildStdin,
    out: mpsc::Receiver<serde_json::Value>,
    err: mpsc::Receiver<String>,
    port: u16,
}

fn start(rule_file: &std::path::Path, extra: &[&str]) -> Running {
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["run", "--rules"])
        .arg(rule_file)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (otx, out) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&l) {
                let _ = otx.send(v);
            }
        }
    });
    let (etx, err) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = etx.send(l);
        }
    });
    Running {
        child: Killed(child),
        stdin,
        out,
        err,
        port,
    }
}

fn next_notification(r: &Running) -> serde_json::Value {
    r.out
        .recv_timeout(Duration::from_secs(10))
        .expect("a notification within 10 s")
}

fn stderr_until(r: &Running, needle: &str) -> String {
    let mut seen = String::new();
    while let Ok(l) = r.err.recv_timeout(Duration::from_secs(10)) {
        seen.push_str(&l);
        seen.push('\n');
        if l.contains(needle) {
            return seen;
        }
    }
    panic!("stderr never said {needle:?}; got:\n{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_keeps_state_of_unchanged_rules_and_rejects_a_bad_set() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rules.yaml");
    std::fs::write(&f, rules(3, "old text")).unwrap();
    let mut r = start(&f, &[]);
    r.stdin.write_all(line(0, "boom").as_bytes()).unwrap();
    r.stdin.write_all(line(1, "boom").as_bytes()).unwrap();
    r.stdin.flush().unwrap();
    wait_metric(r.port, "kind=\"hits\"", 2).await;

    // Only the wording changes: t.errors keeps its two hits.
    std::fs::write(&f, rules(3, "new text")).unwrap();
    hup(&r.child.0);
    wait_metric(r.port, "outcome=\"ok\"", 1).await;
    r.stdin.write_all(line(2, "boom").as_bytes()).unwrap();
    r.stdin.flush().unwrap();
    let n = next_notification(&r);
    assert_eq!(n["rule"], "t.errors");
    assert_eq!(n["state"], "firing");
    assert_eq!(n["annotations"]["summary"], "new text", "{n}");

    // A broken file is rejected with its location; the old set keeps running.
    std::fs::write(&f, rules(3, "x").replace("detect:", "detetc:")).unwrap();
    hup(&r.child.0);
    let log = stderr_until(&r, "reload rejected");
    assert!(log.contains("rules.yaml:"), "{log}");
    wait_metric(r.port, "outcome=\"failed\"", 1).await;
    r.stdin.write_all(line(3, "crash").as_bytes()).unwrap();
    r.stdin.flush().unwrap();
    let n = next_notification(&r);
    assert_eq!(n["rule"], "t.crash", "{n}");
    let ready = reqwest::get(format!("http://127.0.0.1:{}/readyz", r.port))
        .await
        .unwrap();
    assert_eq!(
        ready.status().as_u16(),
        200,
        "a rejected reload is not unready"
    );
    let body = ready.text().await.unwrap();
    assert!(
        body.contains("rule_reload_error") && body.contains("detetc"),
        "{body}"
    );
    assert_eq!(metric(r.port, "rule_reload_ok").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_rules_picks_up_a_changed_file_and_a_removed_rule_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rules.yaml");
    std::fs::write(&f, rules(3, "s")).unwrap();
    let mut r = start(&f, &["--watch-rules"]);
    r.stdin.write_all(line(0, "crash").as_bytes()).unwrap();
    r.stdin.flush().unwrap();
    let n = next_notification(&r);
    assert_eq!(
        (n["rule"].as_str(), n["state"].as_str()),
        (Some("t.crash"), Some("firing"))
    );

    // Drop t.crash and lower t.errors' threshold; no signal, just the file.
    let only_errors: String = rules(1, "s")
        .split("  - id: t.crash")
        .next()
        .unwrap()
        .to_string();
    std::fs::write(&f, only_errors).unwrap();
    let n = next_notification(&r);
    assert_eq!(
        (n["rule"].as_str(), n["state"].as_str()),
        (Some("t.crash"), Some("resolved")),
        "a removed rule's alert resolves at receivers: {n}"
    );
    assert_eq!(metric(r.port, "outcome=\"ok\"").await, 1);
    r.stdin.write_all(line(1, "boom").as_bytes()).unwrap();
    r.stdin.flush().unwrap();
    let n = next_notification(&r);
    assert_eq!(
        n["rule"], "t.errors",
        "the new threshold (1) is in force: {n}"
    );
}
