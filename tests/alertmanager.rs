//! The Alertmanager receiver against a real Alertmanager (Debian's
//! `prometheus-alertmanager` 0.25, installed by `.ci/run`), started here on
//! 127.0.0.1 with its own config and storage, clustering off, and a webhook
//! to an in-test receiver: what sigwatch posts must show up in
//! `GET /api/v2/alerts` with the right labels, resolve, be delivered by
//! Alertmanager's own webhook, and two replicas must make one alert.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;
use common::free_port;
use sigwatch::alert::{AlertState, Notification};
use sigwatch::notify::alertmanager::{Alertmanager, AlertmanagerConfig};
use sigwatch::notify::Receiver;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn binary() -> String {
    let b = std::env::var("SIGWATCH_TEST_ALERTMANAGER")
        .unwrap_or_else(|_| "/usr/bin/prometheus-alertmanager".into());
    assert!(
        std::path::Path::new(&b).exists(),
        "{b} not found: install it with `apt-get install -y prometheus-alertmanager` (bash .ci/run does)"
    );
    b
}

struct Am {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Am {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_alertmanager(hook: &str) -> Am {
    start_alertmanager_grouped(hook, "alertname").await
}

/// An Alertmanager whose route groups alerts by `group_by`.
async fn start_alertmanager_grouped(hook: &str, group_by: &str) -> Am {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("alertmanager.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  resolve_timeout: 5m\nroute:\n  receiver: test\n  group_by: ['{group_by}']\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: test\n    webhook_configs:\n      - url: {hook}\n        send_resolved: true\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let mut child = Command::new(binary())
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    for _ in 0..100 {
        if client
            .get(format!("{url}/-/ready"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return Am {
                child,
                url,
                _dir: dir,
            };
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("Alertmanager did not become ready on {url}");
}

async fn start_hook() -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: axum::Json<serde_json::Value>| {
            let g = g.clone();
            async move {
                g.lock().unwrap().push(body.0);
                axum::http::StatusCode::OK
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    (format!("http://{addr}/hook"), got)
}

fn notification(state: AlertState) -> Notification {
    let mut n = common::black_hole(state);
    n.labels
        .insert("alertname".to_string(), "egress.black_hole".to_string());
    n.labels
        .insert("severity".to_string(), "critical".to_string());
    n.labels
        .insert("group".to_string(), "NE_2rANN76DeYtZ".to_string());
    n.labels.insert("k8s.ns".to_string(), "media".to_string());
    n.annotations.insert(
        "summary".to_string(),
        "NE_2rANN76DeYtZ takes 96% of egress failures".to_string(),
    );
    let now = sigwatch::clock::wall_ns();
    n.starts_at = sigwatch::clock::Stamp::at(now - 60_000_000_000);
    n.ends_at =
        (state == AlertState::Resolved).then(|| sigwatch::clock::Stamp::at(now - 1_000_000_000));
    n.samples = vec!["{\"msg\":\"egress_failed\"}".into()];
    n
}

async fn active_alerts(url: &str) -> Vec<serde_json::Value> {
    let v: serde_json::Value = reqwest::get(format!("{url}/api/v2/alerts?active=true"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v.as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firing_then_resolved_through_a_real_alertmanager() {
    let (hook, delivered) = start_hook().await;
    let am = start_alertmanager(&hook).await;
    let r = Alertmanager::new(AlertmanagerConfig::new(std::slice::from_ref(&am.url))).unwrap();
    r.send(&notification(AlertState::Firing)).await.unwrap();
    let alerts = active_alerts(&am.url).await;
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    let labels = &alerts[0]["labels"];
    assert_eq!(labels["alertname"], "egress.black_hole");
    assert_eq!(labels["group"], "NE_2rANN76DeYtZ");
    assert_eq!(
        labels["k8s_ns"], "media",
        "label name sanitised, not rejected"
    );
    assert!(
        labels.get("count").is_none(),
        "counts are annotations, never identity"
    );
    assert_eq!(alerts[0]["annotations"]["count"], "48");
    // Alertmanager's own webhook delivers it.
    let mut firing_seen = false;
    for _ in 0..100 {
        if delivered
            .lock()
            .unwrap()
            .iter()
            .any(|p| p["status"] == "firing")
        {
            firing_seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(firing_seen, "Alertmanager notified the firing alert");
    // Resolve: endsAt in the past.
    r.send(&notification(AlertState::Resolved)).await.unwrap();
    assert!(
        active_alerts(&am.url).await.is_empty(),
        "resolved alerts are not active"
    );
    let mut resolved_seen = false;
    for _ in 0..100 {
        if delivered
            .lock()
            .unwrap()
            .iter()
            .any(|p| p["status"] == "resolved")
        {
            resolved_seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(resolved_seen, "Alertmanager notified the resolve");
    // Retention: the resolve keeps being re-sent.
    assert_eq!(r.resend(sigwatch::clock::wall_ns()).await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_make_one_alert_and_firing_alerts_are_resent() {
    let (hook, _) = start_hook().await;
    let am = start_alertmanager(&hook).await;
    let mut cfg = AlertmanagerConfig::new(std::slice::from_ref(&am.url));
    cfg.resend_interval = Duration::from_secs(1);
    let a = Alertmanager::new(cfg.clone()).unwrap();
    let b = Alertmanager::new(cfg).unwrap();
    let n = notification(AlertState::Firing);
    a.send(&n).await.unwrap();
    b.send(&n).await.unwrap();
    let alerts = active_alerts(&am.url).await;
    assert_eq!(
        alerts.len(),
        1,
        "identical labels from two replicas are one alert: {alerts:?}"
    );
    let ends_before = alerts[0]["endsAt"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(a.resend(sigwatch::clock::wall_ns()).await.unwrap(), 1);
    let after = active_alerts(&am.url).await;
    assert_eq!(after.len(), 1);
    assert!(
        after[0]["endsAt"].as_str().unwrap() > ends_before.as_str(),
        "re-send pushes endsAt ahead"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_instance_does_not_block_the_others() {
    let (hook, _) = start_hook().await;
    let am = start_alertmanager(&hook).await;
    let dead = format!("http://127.0.0.1:{}", free_port());
    let mut cfg = AlertmanagerConfig::new(&[dead, am.url.clone()]);
    cfg.retries = 1;
    cfg.timeout = Duration::from_secs(1);
    let r = Alertmanager::new(cfg).unwrap();
    r.send(&notification(AlertState::Firing)).await.unwrap();
    assert_eq!(active_alerts(&am.url).await.len(), 1);
}

/// `sigwatch replay --alertmanager URL ARGS…`, which must succeed.
async fn replay_into(url: &str, args: &[&str]) -> std::process::Output {
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_sigwatch"))
            .args(["replay", "--log-level", "warn", "--alertmanager", url])
            .args(args)
            .output(),
    )
    .await
    .expect("replay finished")
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_pages_through_alertmanager() {
    let (hook, _) = start_hook().await;
    let am = start_alertmanager(&hook).await;
    let fixture = format!(
        "{}/fixtures/egress-black-hole.log",
        env!("CARGO_MANIFEST_DIR")
    );
    replay_into(&am.url, &["--no-stdout", &fixture]).await;
    let mut got: Vec<String> = active_alerts(&am.url)
        .await
        .iter()
        .map(|a| {
            format!(
                "{} {}",
                a["labels"]["alertname"].as_str().unwrap(),
                a["labels"]["group"].as_str().unwrap()
            )
        })
        .collect();
    got.sort();
    let expected: Vec<String> = std::fs::read_to_string(format!(
        "{}/fixtures/egress-black-hole.expected",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
    .lines()
    .map(|l| l.trim_start_matches("firing ").to_string())
    .collect();
    assert_eq!(got, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_incidents_page_once_through_alertmanager_grouping() {
    // Alertmanager grouped by the `incident` label sigwatch adds: the 13
    // alerts of the Redis outage make one Alertmanager group, one page.
    let (hook, got) = start_hook().await;
    let am = start_alertmanager_grouped(&hook, "incident").await;
    let fixture = format!(
        "{}/fixtures/livekit-redis-outage.log",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = replay_into(&am.url, &["--no-summary", "--group-incidents", &fixture]).await;
    // stdout took the incident-level notifications: one incident.
    let stdout: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(stdout.iter().all(|n| n["rule"] == "incident"));
    let id = stdout[0]["incident"]["id"].as_str().unwrap().to_string();
    assert!(stdout.iter().all(|n| n["incident"]["id"] == id.as_str()));
    // Alertmanager got the 13 alerts, each labelled with that incident.
    let active = active_alerts(&am.url).await;
    assert_eq!(active.len(), 12, "12 still firing (Redis resolved)");
    assert!(active
        .iter()
        .all(|a| a["labels"]["incident"] == id.as_str()));
    // Its webhook: every notification is the one group of that incident,
    // which soon holds all 13 alerts.
    let mut bodies = Vec::new();
    for _ in 0..150 {
        bodies = got.lock().unwrap().clone();
        if bodies
            .iter()
            .any(|b| b["alerts"].as_array().map_or(0, |a| a.len()) == 13)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let keys: std::collections::BTreeSet<String> = bodies
        .iter()
        .map(|b| b["groupKey"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(bodies
        .iter()
        .all(|b| b["groupLabels"]["incident"] == id.as_str()));
    assert!(
        bodies
            .iter()
            .any(|b| b["alerts"].as_array().map_or(0, |a| a.len()) == 13),
        "{bodies:?}"
    );
}
