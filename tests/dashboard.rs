//! deploy/grafana/sigwatch.json asks only for what sigwatch exports: a real
//! Prometheus (Debian's `prometheus`, installed by .ci/run) scrapes a
//! `sigwatch run` that reads the Redis outage live from the in-test Loki as
//! one of two shards, with the push endpoints open, and every panel's every
//! query — with Grafana's variables filled in — must return a series. A
//! panel that names a series sigwatch does not export fails with its title
//! and its query.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;
mod fake_loki;
use fake_loki::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

const PROMETHEUS: &str = "/usr/bin/prometheus";

/// Every (panel title, query) of the dashboard, variables filled in as
/// Grafana fills them for "All".
fn queries() -> Vec<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/grafana/sigwatch.json");
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let vars: Vec<&str> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert!(
        vars.contains(&"datasource"),
        "a datasource variable: {vars:?}"
    );
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        for t in p["targets"].as_array().unwrap() {
            let q = t["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m")
                .replace("$instance", ".*");
            assert!(!q.contains('$'), "an unfilled variable in {q}");
            out.push((p["title"].as_str().unwrap().to_string(), q));
        }
    }
    out
}

async fn prom_query(port: u16, q: &str) -> Option<usize> {
    let r = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/api/v1/query"))
        .query(&[("query", q)])
        .send()
        .await
        .ok()?;
    let v: serde_json::Value = r.json().await.ok()?;
    assert_eq!(v["status"], "success", "{q}: {v}");
    v["data"]["result"].as_array().map(Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_panel_of_the_dashboard_returns_a_series_from_a_real_prometheus() {
    let panels = queries();
    assert!(panels.len() >= 20, "{} queries", panels.len());
    let store = Shared::default();
    let lines = outage(&store);
    let url = start_loki(store.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    // One shard of two reading Loki, with a state directory (silences).
    let port = common::free_port();
    let mut loki_run = tokio::process::Command::new(common::BIN)
        .args(["run", "--log-level", "warn", "--output", "json"])
        .arg(format!("--listen=127.0.0.1:{port}"))
        .args(["--loki", &url, "--query", r#"{namespace="livekit"}"#])
        .args([
            "--loki-lag",
            "0s",
            "--loki-interval",
            "200ms",
            "--since",
            "40m",
        ])
        .args(["--shard", "0/2", "--shard-refresh", "1s"])
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .stdout(Stdio::null())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // And one taking pushes (--ingest is a source of its own).
    let push_port = common::free_port();
    let ingest = common::free_port();
    let mut push_run = tokio::process::Command::new(common::BIN)
        .args(["run", "--log-level", "warn", "--output", "json"])
        .arg(format!("--listen=127.0.0.1:{push_port}"))
        .arg(format!("--ingest=127.0.0.1:{ingest}"))
        .stdout(Stdio::null())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The shard has read its half of the outage.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "sigwatch read nothing from Loki");
        for c in [&mut loki_run, &mut push_run] {
            if let Ok(Some(st)) = c.try_wait() {
                panic!("a sigwatch run stopped: {st}");
            }
        }
        let m = metrics(port).await;
        let pushed = metrics(push_port).await;
        let read = metric_sum(&m, "sigwatch_events_total", &["kind=\"lines\""]);
        if read > (lines / 4) as f64 && pushed.contains("ingest_requests") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let prom = common::free_port();
    std::fs::write(
        dir.path().join("prometheus.yml"),
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n  - job_name: sigwatch\n    static_configs: [{{targets: ['127.0.0.1:{port}', '127.0.0.1:{push_port}']}}]\n"
        ),
    )
    .unwrap();
    let _prometheus = tokio::process::Command::new(PROMETHEUS)
        .arg(format!(
            "--config.file={}",
            dir.path().join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{prom}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Two scrapes at least: rate() needs two samples.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped sigwatch twice"
        );
        let q = r#"count_over_time(up{job="sigwatch"}[1m]) >= 3"#;
        if prom_query(prom, q).await.is_some_and(|n| n == 2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut empty = Vec::new();
    for (title, q) in &panels {
        // Bounded: a series appears within a few scrapes or never.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = 0;
        while Instant::now() < deadline {
            got = prom_query(prom, q).await.unwrap_or(0);
            if got > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if got == 0 {
            empty.push(format!("{title}: {q}"));
        }
    }
    assert!(
        empty.is_empty(),
        "panels without a series:\n{}",
        empty.join("\n")
    );
}
