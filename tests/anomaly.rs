//! Population anomalies (`novelty: {anomalies: {enabled: true}}`) with the
//! rule pack off and a baseline learned from a quiet day of the same
//! cluster (`sigwatch learn`): the Redis outage is a spread naming every
//! node, the black-hole egress node and the slow auth upstream are
//! concentrations naming them; the quiet day and the routine operations
//! page nothing from it. What it does not find yet is in docs/rules.md
//! ("Anomalies").
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;

use common::BIN;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// The anomaly notifications of a replay with the pack off, anomalies on
/// and the quiet day's baseline.
fn anomalies(dir: &Path, log: &str) -> Vec<Value> {
    anomalies_of(dir, &fixture(log))
}

fn anomalies_of(dir: &Path, log: &Path) -> Vec<Value> {
    let out = Command::new(BIN)
        .args(["replay", "--no-builtin-rules", "--rules"])
        .arg(dir.join("anomalies.yaml"))
        .arg("--templates")
        .arg(dir.join("baseline.json"))
        .args(["--no-summary", "--no-links", "--log-level", "error"])
        .arg(log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        log.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|n| n["rule"] == "anomaly")
        .collect()
}

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("anomalies.yaml"),
        "novelty:\n  anomalies: {enabled: true}\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["learn", "--out"])
        .arg(dir.path().join("baseline.json"))
        .arg(fixture("control-day.log"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

fn firing(notes: &[Value]) -> Vec<(String, Vec<String>)> {
    notes
        .iter()
        .filter(|n| n["state"] == "firing")
        .map(|n| {
            let groups = n["top_groups"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g["group"].as_str().unwrap().to_string())
                .collect();
            (n["group"].as_str().unwrap().to_string(), groups)
        })
        .collect()
}

#[test]
fn incidents_nobody_wrote_a_rule_for_page_by_their_shape() {
    let dir = setup();
    // Redis down: a known error from every LiveKit node at once.
    let redis = firing(&anomalies(dir.path(), "livekit-redis-outage.log"));
    let spread = redis
        .iter()
        .find(|(k, _)| k.starts_with("spread "))
        .unwrap_or_else(|| panic!("no spread: {redis:?}"));
    assert_eq!(spread.1.len(), 6, "{spread:?}");
    // The black hole: one egress node holds the failures while its peers
    // are healthy.
    let egress = firing(&anomalies(dir.path(), "egress-black-hole.log"));
    assert!(!egress.is_empty());
    assert!(
        egress
            .iter()
            .all(|(k, _)| k.starts_with("concentration ") && k.ends_with(" NE_2rANN76DeYtZ")),
        "{egress:?}"
    );
    // The slow auth instance: its upstream.
    let grpc = firing(&anomalies(dir.path(), "grpc-slow-auth.log"));
    assert!(
        grpc.iter()
            .any(|(k, _)| k.starts_with("concentration ") && k.ends_with(" 10.2.0.14:9090")),
        "{grpc:?}"
    );
    let n = anomalies(dir.path(), "grpc-slow-auth.log")
        .into_iter()
        .find(|n| n["state"] == "firing")
        .unwrap();
    let summary = n["annotations"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("10.2.0.14:9090 logs 100% of its lines"),
        "{summary}"
    );
    assert!(summary.contains("never seen while learning"), "{summary}");
}

#[test]
fn the_quiet_day_and_routine_operations_page_nothing_from_it() {
    let dir = setup();
    for log in [
        "control-day.log",
        "routine-k8s-maintenance.log",
        "routine-k8s-maintenance-events.log",
        "routine-livekit-upgrade.log",
        "routine-livekit-upgrade-events.log",
    ] {
        let notes = anomalies(dir.path(), log);
        assert!(firing(&notes).is_empty(), "{log}: {notes:#?}");
    }
}

/// A deployment of one LiveKit node whose Redis is unreachable for minutes:
/// no peers to compare with, so a storm of an error it never logged is a
/// surge on that node (the pack's `redis_unreachable` needs several nodes).
#[test]
fn a_lone_node_whose_redis_is_down_is_a_surge() {
    let dir = setup();
    let all = std::fs::read_to_string(fixture("livekit-redis-outage.log")).unwrap();
    let one: String = all
        .lines()
        .filter(|l| l.starts_with("[pod/livekit-server-228f219e9-5q4pb/"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(one.lines().count() > 100);
    let log = dir.path().join("one-node.log");
    std::fs::write(&log, one).unwrap();
    let fired = firing(&anomalies_of(dir.path(), &log));
    assert!(
        fired
            .iter()
            .any(|(k, _)| k.starts_with("surge ") && k.ends_with(" ND_8dWKnHfDNxSI")),
        "{fired:?}"
    );
}
