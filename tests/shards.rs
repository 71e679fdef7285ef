//! `run --loki … --shard I/N` against the in-test Loki (tests/fake_loki):
//! each shard lists its query's streams with the series API and asks only
//! for its own, so the shards together download each line about once, and
//! together alert exactly as one process does. A stream born mid-run is
//! read from its first line by exactly one shard; a Loki that refuses the
//! series API gets the old behaviour (read all, drop the others), counted;
//! the tail and `replay --loki` shard the same way.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;
mod fake_loki;
use fake_loki::*;
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

const QUERY: &str = r#"{namespace="livekit"}"#;
/// The cluster-wide rule: alerted by Prometheus over the shards, not by a
/// shard.
const CLUSTER: &str = "livekit.redis_unreachable";

/// One `sigwatch run` on the in-test Loki, notifications to `dir/name.ndjson`.
struct Run {
    name: String,
    child: tokio::process::Child,
    port: u16,
}

fn spawn(url: &str, dir: &std::path::Path, name: &str, shard: Option<&str>, extra: &[&str]) -> Run {
    let port = common::free_port();
    let out = std::fs::File::create(dir.join(format!("{name}.ndjson"))).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_sigwatch"));
    cmd.args([
        "run",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--log-level",
        "warn",
        "--loki",
        url,
        "--query",
        QUERY,
        "--loki-lag",
        "0s",
        "--loki-interval",
        "200ms",
        "--since",
        "40m",
    ]);
    if let Some(s) = shard {
        cmd.args(["--shard", s, "--shard-refresh", "1s"]);
    }
    cmd.args(extra);
    let child = cmd
        .stdout(Stdio::from(out))
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    Run {
        name: name.to_string(),
        child,
        port,
    }
}

/// A counter summed over the runs.
async fn total(runs: &[&Run], name: &str, with: &[&str]) -> f64 {
    let mut sum = 0.0;
    for r in runs {
        sum += metric_sum(&metrics(r.port).await, name, with);
    }
    sum
}

fn lines_processed() -> [&'static str; 1] {
    ["kind=\"lines\""]
}

/// Waits (bounded) until the runs together processed `n` lines.
async fn until_lines(runs: &[&Run], n: usize, what: &str) {
    until_lines_within(runs, n, what, 300).await;
}

/// `until_lines`, within `tenths` tenths of a second.
async fn until_lines_within(runs: &[&Run], n: usize, what: &str, tenths: usize) {
    for _ in 0..tenths {
        if total(runs, "sigwatch_events_total", &lines_processed()).await as usize == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let got = total(runs, "sigwatch_events_total", &lines_processed()).await;
    panic!("{what}: {got} of {n} lines processed");
}

/// `sigwatch_signature_hits_total` summed by (rule, partition, group) over
/// the runs: what the shipped Prometheus rules aggregate across shards.
async fn hits_by_group(runs: &[&Run]) -> BTreeMap<String, f64> {
    let mut sums = BTreeMap::new();
    for r in runs {
        for l in metrics(r.port).await.lines() {
            let Some(rest) = l.strip_prefix("sigwatch_signature_hits_total{") else {
                continue;
            };
            let Some((labels, v)) = rest.rsplit_once("} ") else {
                continue;
            };
            let mut kept: Vec<&str> = labels
                .split(',')
                .filter(|kv| {
                    ["rule=", "partition=", "group="]
                        .iter()
                        .any(|k| kv.starts_with(k))
                })
                .collect();
            kept.sort();
            *sums.entry(kept.join(",")).or_insert(0.0) += v.parse::<f64>().unwrap_or(f64::NAN);
        }
    }
    sums
}

/// The notifications of a run as "state rule group" keys.
fn keys(dir: &std::path::Path, run: &Run) -> Vec<String> {
    std::fs::read_to_string(dir.join(format!("{}.ndjson", run.name)))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|n| {
            format!(
                "{} {} {}",
                n["state"].as_str().unwrap_or_default(),
                n["rule"].as_str().unwrap_or_default(),
                n["group"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

fn per_node(v: &[String]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().filter(|k| !k.contains(CLUSTER)).cloned().collect();
    v.sort();
    v
}

/// Waits (bounded) for the per-node alerts of the single run and of the
/// shards together, then checks they are the same, none twice, and that
/// no shard alerted the cluster-wide rule.
async fn same_alerts(dir: &std::path::Path, single: &Run, shards: &[&Run], what: &str) {
    let together = || {
        let mut v: Vec<String> = shards.iter().flat_map(|r| keys(dir, r)).collect();
        v.sort();
        v
    };
    for _ in 0..100 {
        if per_node(&keys(dir, single)).len() >= 12 && per_node(&together()).len() >= 12 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (one, both) = (keys(dir, single), together());
    assert!(one.iter().any(|k| k.contains(CLUSTER)), "{one:?}");
    assert_eq!(per_node(&one).len(), 12, "{what}: {one:?}");
    let mut dedup = both.clone();
    dedup.dedup();
    assert_eq!(both, dedup, "{what}: an alert came from two shards");
    assert_eq!(per_node(&both), per_node(&one), "{what}");
    if shards.len() > 1 {
        assert!(
            !both.iter().any(|k| k.contains(CLUSTER)),
            "{what}: {both:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_read_only_their_streams_and_together_alert_like_one_process() {
    let store: Shared = Default::default();
    let n = outage(&store);
    let url = start_loki(store.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let by = ["--shard-by", "pod"];
    let mut single = spawn(&url, d, "single", None, &[]);
    let mut groups: Vec<Vec<Run>> = [1u32, 2, 4]
        .iter()
        .map(|&count| {
            (0..count)
                .map(|i| {
                    spawn(
                        &url,
                        d,
                        &format!("s{i}of{count}"),
                        Some(&format!("{i}/{count}")),
                        &by,
                    )
                })
                .collect()
        })
        .collect();
    until_lines(&[&single], n, "single").await;
    for g in &groups {
        let g: Vec<&Run> = g.iter().collect();
        until_lines(&g, n, &format!("{} shards", g.len())).await;
        same_alerts(d, &single, &g, &format!("{} shards", g.len())).await;
        // The cluster-wide rules run in Prometheus over the shards'
        // counters: summed by group, the shards export the single run's.
        let one = hits_by_group(&[&single]).await;
        assert!(
            one.keys().any(|k| k.contains("redis_unreachable")),
            "{one:?}"
        );
        assert_eq!(hits_by_group(&g).await, one, "{} shards", g.len());
        if g.len() == 1 {
            continue; // 0/1 is the unsharded path
        }
        // Read once: the lines downloaded by all shards together are the
        // query's (the first poll reads the 40 minutes once per selector),
        // none dropped as another shard's.
        let downloaded = total(&g, "sigwatch_events_total", &["kind=\"loki_lines\""]).await;
        assert!(
            downloaded >= n as f64 && downloaded <= 1.1 * n as f64,
            "{} shards downloaded {downloaded} lines for {n}",
            g.len()
        );
        let skipped = total(&g, "sigwatch_events_total", &["kind=\"shard_skipped\""]).await;
        assert_eq!(skipped, 0.0, "{} shards", g.len());
        let owned = total(&g, "sigwatch_state", &["kind=\"loki_streams_owned\""]).await;
        assert_eq!(owned, 6.0, "{} shards own the six pods once", g.len());
        for r in &g {
            let batches = metric_sum(
                &metrics(r.port).await,
                "sigwatch_state",
                &["kind=\"loki_selector_batches\""],
            );
            assert!(batches <= 1.0, "{}: {batches} selectors", r.name);
        }
    }
    // A pod born now: its lines are read from the first, by exactly one
    // shard of each group (and by the single run).
    let born = 25;
    {
        let mut s = store.lock().unwrap();
        // Stamped two seconds ahead: a poller passes them only once they
        // are in.
        let t0 = sigwatch::clock::wall_ns() + 2_000_000_000;
        for i in 0..born {
            s.entries.push((
                labels(&[
                    ("namespace", "livekit"),
                    ("pod", "livekit-server-9f0e1d2c3-newbn"),
                    ("container", "livekit-server"),
                ]),
                t0 + i as i64 * 1_000_000,
                format!(
                    r#"{{"level":"info","ts":{},"msg":"room started","room":"r{i}"}}"#,
                    t0 / 1_000_000_000
                ),
                BTreeMap::new(),
            ));
        }
    }
    until_lines(&[&single], n + born, "single, the new pod").await;
    for g in &groups {
        let g: Vec<&Run> = g.iter().collect();
        // Within a few refreshes, long before the 30-second re-scan of
        // the overlap could pick the lines up: the shard that lists the
        // new stream reads it from the window's start.
        until_lines_within(
            &g,
            n + born,
            &format!("{} shards, the new pod", g.len()),
            150,
        )
        .await;
        if g.len() > 1 {
            let added = total(
                &g,
                "sigwatch_events_total",
                &["kind=\"loki_streams_added\""],
            )
            .await;
            // Six at the start, the new one once.
            assert_eq!(added, 7.0, "{} shards", g.len());
        }
    }
    for r in groups
        .iter_mut()
        .flatten()
        .chain(std::iter::once(&mut single))
    {
        r.child.start_kill().unwrap();
        let _ = r.child.wait().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_series_api_shards_read_everything_and_drop_the_rest() {
    let store: Shared = Default::default();
    let n = outage(&store);
    store.lock().unwrap().series_refused = true;
    let url = start_loki(store.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let by = ["--shard-by", "pod"];
    let single = spawn(&url, d, "single", None, &[]);
    let shards = [
        spawn(&url, d, "a", Some("0/2"), &by),
        spawn(&url, d, "b", Some("1/2"), &by),
    ];
    let g: Vec<&Run> = shards.iter().collect();
    until_lines(&[&single], n, "single").await;
    until_lines(&g, n, "two shards").await;
    same_alerts(d, &single, &g, "fallback").await;
    let skipped = total(&g, "sigwatch_events_total", &["kind=\"shard_skipped\""]).await;
    assert_eq!(
        skipped as usize, n,
        "each line kept by one shard, dropped by the other"
    );
    for r in &g {
        let m = metrics(r.port).await;
        assert_eq!(
            metric_sum(
                &m,
                "sigwatch_events_total",
                &["kind=\"loki_shard_fallbacks\""]
            ),
            1.0,
            "{}",
            r.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tail_follows_the_shards_selectors() {
    let store: Shared = Default::default();
    let n = outage(&store);
    store.lock().unwrap().general_tail = true;
    let url = start_loki(store.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tail = ["--shard-by", "pod", "--loki-tail"];
    let single = spawn(&url, d, "single", None, &["--loki-tail"]);
    let shards = [
        spawn(&url, d, "a", Some("0/2"), &tail),
        spawn(&url, d, "b", Some("1/2"), &tail),
    ];
    let g: Vec<&Run> = shards.iter().collect();
    until_lines(&[&single], n, "single").await;
    until_lines(&g, n, "two shards").await;
    same_alerts(d, &single, &g, "tail").await;
    let skipped = total(&g, "sigwatch_events_total", &["kind=\"shard_skipped\""]).await;
    assert_eq!(skipped, 0.0);
    let owned = total(&g, "sigwatch_state", &["kind=\"loki_streams_owned\""]).await;
    assert_eq!(owned, 6.0);
}

async fn sigwatch(args: &[&str]) -> String {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_sigwatch"))
            .args(args)
            .env_remove("SIGWATCH_LOKI_URL")
            .output(),
    )
    .await
    .expect("sigwatch finishes")
    .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_range_splits_across_shards_like_the_live_run() {
    let store: Shared = Default::default();
    outage(&store);
    let url = start_loki(store.clone()).await;
    let (from, to) = {
        let s = store.lock().unwrap();
        let ts = s.entries.iter().map(|e| e.1);
        (ts.clone().min().unwrap(), ts.max().unwrap() + 1)
    };
    let (from, to) = (from.to_string(), to.to_string());
    let args = |shard: Option<&'static str>| {
        let mut a = vec![
            "replay",
            "--no-summary",
            "--no-links",
            "--output",
            "json",
            "--loki",
            &url,
            "--query",
            QUERY,
            "--from",
            &from,
            "--to",
            &to,
        ];
        if let Some(s) = shard {
            a.extend(["--shard", s, "--shard-by", "pod"]);
        }
        a.iter().map(|s| s.to_string()).collect::<Vec<String>>()
    };
    let run = |a: Vec<String>| async move {
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        sigwatch(&refs).await
    };
    let key = |out: &str| -> Vec<String> {
        out.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|n| {
                format!(
                    "{} {} {}",
                    n["state"].as_str().unwrap_or_default(),
                    n["rule"].as_str().unwrap_or_default(),
                    n["group"].as_str().unwrap_or_default()
                )
            })
            .collect()
    };
    let whole = key(&run(args(None)).await);
    let served_whole = store.lock().unwrap().served;
    let mut parts: Vec<String> = Vec::new();
    for s in ["0/2", "1/2"] {
        parts.extend(key(&run(args(Some(s))).await));
    }
    let served_shards = store.lock().unwrap().served - served_whole;
    parts.sort();
    let mut dedup = parts.clone();
    dedup.dedup();
    assert_eq!(parts, dedup, "an alert from both shards");
    assert_eq!(per_node(&parts), per_node(&whole));
    assert!(!per_node(&whole).is_empty());
    assert!(!parts.iter().any(|k| k.contains(CLUSTER)), "{parts:?}");
    // Each line sent once in all: the two shards together downloaded what
    // the whole replay did.
    assert_eq!(served_shards, served_whole);
}
