//! Incident grouping through the binary: the seed incidents replayed with
//! `--group-incidents` are one incident each, told in causal order; without
//! it, per-alert delivery is unchanged (tests/golden.rs holds that).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;
use common::BIN;
use serde_json::Value;
use std::process::Command;

fn fixture(name: &str) -> String {
    format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn replay(args: &[&str]) -> Vec<Value> {
    let out = Command::new(BIN)
        .args(["replay", "--no-summary", "--log-level", "error"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn events(notes: &[Value]) -> Vec<String> {
    notes
        .iter()
        .map(|n| n["incident"]["event"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_redis_outage_is_one_incident_instead_of_13_pages() {
    let notes = replay(&["--group-incidents", &fixture("livekit-redis-outage.log")]);
    assert!(notes.iter().all(|n| n["rule"] == "incident"), "{notes:?}");
    let ev = events(&notes);
    assert_eq!(ev.iter().filter(|e| *e == "opened").count(), 1, "{ev:?}");
    assert_eq!(ev[0], "opened");
    assert!(notes.len() < 13, "{} notifications", notes.len());
    let id = notes[0]["incident"]["id"].as_str().unwrap();
    assert!(notes.iter().all(|n| n["incident"]["id"] == id));
    assert!(notes
        .iter()
        .all(|n| n["fingerprint"] == notes[0]["fingerprint"]));
    let last = notes.last().unwrap();
    let chain = last["incident"]["chain"].as_array().unwrap();
    assert_eq!(chain.len(), 13);
    // Causal order: the cluster-wide Redis alert, then 6 failed drains, then
    // 6 stuck drains.
    let rules: Vec<&str> = chain.iter().map(|c| c["rule"].as_str().unwrap()).collect();
    assert_eq!(rules[0], "livekit.redis_unreachable");
    assert!(
        rules[1..7].iter().all(|r| *r == "livekit.drain_failed"),
        "{rules:?}"
    );
    assert!(
        rules[7..].iter().all(|r| *r == "livekit.drain_stuck"),
        "{rules:?}"
    );
    assert_eq!(last["incident"]["root"], "livekit.redis_unreachable");
    assert_eq!(last["title"], "Redis unreachable from many LiveKit nodes");
    assert_eq!(last["incident"]["nodes"].as_array().unwrap().len(), 6);
    assert_eq!(last["incident"]["affected"].as_array().unwrap().len(), 6);
    assert_eq!(last["labels"]["incident"], id);
    assert_eq!(last["severity"], "critical");
    assert_eq!(
        last["annotations"]["summary"],
        "Redis unreachable from many LiveKit nodes (recovered) → LiveKit node failed to mark \
         itself as draining on 6 nodes → LiveKit node stuck draining on 6 nodes — 6 nodes, \
         all still affected"
    );
    // The same input gives the same incident id, run after run.
    let again = replay(&["--group-incidents", &fixture("livekit-redis-outage.log")]);
    assert_eq!(again, notes);
}

#[test]
fn the_black_hole_incident_is_rooted_at_the_full_disk() {
    let notes = replay(&["--group-incidents", &fixture("egress-black-hole.log")]);
    let last = notes.last().unwrap();
    let chain = last["incident"]["chain"].as_array().unwrap();
    assert_eq!(chain.len(), 2, "{last}");
    assert_eq!(last["incident"]["root"], "egress.disk_full");
    assert_eq!(events(&notes).iter().filter(|e| *e == "opened").count(), 1);
    assert_eq!(
        last["incident"]["nodes"],
        serde_json::json!(["NE_2rANN76DeYtZ"])
    );
}

#[test]
fn unrelated_incidents_stay_apart_and_the_config_file_can_ask_for_grouping() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("sigwatch.yaml");
    std::fs::write(
        &cfg,
        "incidents:\n  group: true\n  window: 10m\n  update_interval: 30s\n",
    )
    .unwrap();
    let notes = replay(&[
        "--config",
        cfg.to_str().unwrap(),
        &fixture("egress-black-hole.log"),
        &fixture("grpc-slow-auth.log"),
    ]);
    let opened: Vec<&Value> = notes
        .iter()
        .filter(|n| n["incident"]["event"] == "opened")
        .collect();
    assert_eq!(opened.len(), 2, "{notes:?}");
    assert_ne!(opened[0]["incident"]["id"], opened[1]["incident"]["id"]);
    // The gRPC file, merged after two weeks of egress logs, also raises a
    // novelty alert for its new error: the same lines as the upstream
    // rule's, so the same incident.
    let grpc = notes
        .iter()
        .rfind(|n| n["incident"]["id"] == opened[1]["incident"]["id"])
        .unwrap();
    let rules: Vec<&str> = grpc["incident"]["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["novel", "grpc.upstream_concentrated"], "{grpc}");
    // A bad section is a located error.
    std::fs::write(&cfg, "incidents:\n  group: true\n  windw: 10m\n").unwrap();
    let out = Command::new(BIN)
        .args([
            "replay",
            "--config",
            cfg.to_str().unwrap(),
            &fixture("egress-black-hole.log"),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sigwatch.yaml:3:"), "{err}");
}

#[test]
fn without_grouping_receivers_get_the_alerts_unchanged() {
    let notes = replay(&[&fixture("livekit-redis-outage.log")]);
    assert_eq!(notes.len(), 14);
    assert!(notes.iter().all(|n| n.get("incident").is_none()));
    assert!(notes.iter().all(|n| n["labels"].get("incident").is_none()));
}

#[test]
fn caused_by_must_name_a_rule() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("r.yaml");
    std::fs::write(
        &rules,
        "rules:\n  - id: a\n    title: A\n    severity: info\n    match: {contains: [\"x\"]}\n    caused_by: [nope]\n    detect: {count: {window: 1m}}\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["check", "--rules", rules.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("r.yaml:6:") && err.contains("unknown rule \"nope\""),
        "{err}"
    );
}

/// An hour in which one node's disk fills and frees every four minutes:
/// three errors, then quiet chatter (the count rule resolves after its
/// one-minute window).
fn flapping(dir: &std::path::Path) -> (String, String) {
    let rules = dir.join("flap.yaml");
    std::fs::write(
        &rules,
        "rules:\n  - id: disk.full\n    title: Disk full\n    severity: critical\n    match: {contains: [\"no space left\"]}\n    group_by: node\n    detect: {count: {window: 1m}}\n",
    )
    .unwrap();
    let log = dir.join("flap.log");
    let t0 = 1_764_000_000i64;
    let mut text = String::new();
    for k in 0..15 {
        for j in 0..3 {
            text.push_str(&format!(
                "{{\"level\":\"error\",\"ts\":{},\"msg\":\"write failed: no space left on device\",\"node\":\"n1\"}}\n",
                t0 + k * 240 + j * 5
            ));
        }
        for j in 0..10 {
            text.push_str(&format!(
                "{{\"level\":\"info\",\"ts\":{},\"msg\":\"tick\",\"node\":\"n2\"}}\n",
                t0 + k * 240 + 30 + j * 20
            ));
        }
    }
    std::fs::write(&log, text).unwrap();
    (
        rules.to_str().unwrap().to_string(),
        log.to_str().unwrap().to_string(),
    )
}

#[test]
fn a_flapping_alert_pages_once_as_an_incident_and_the_config_tunes_it() {
    let dir = tempfile::tempdir().unwrap();
    let (rules, log) = flapping(dir.path());
    let base = ["--no-builtin-rules", "--no-novelty", "--rules", &rules];
    // The alerts as receivers get them without grouping: the flap window
    // holds each resolution, so the hour is one episode.
    let alerts = replay(&[&base[..], &[log.as_str()]].concat());
    let states: Vec<&str> = alerts
        .iter()
        .map(|n| n["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["firing", "resolved"], "{alerts:?}");
    assert_eq!(alerts[1]["starts_at"], alerts[0]["starts_at"]);
    // Without a flap window: every transition of the engine.
    let cfg = dir.path().join("sigwatch.yaml");
    std::fs::write(&cfg, "incidents:\n  flap_window: 0s\n").unwrap();
    let every = replay(
        &[
            &base[..],
            &["--config", cfg.to_str().unwrap(), log.as_str()],
        ]
        .concat(),
    );
    let firing = every.iter().filter(|n| n["state"] == "firing").count();
    assert_eq!(firing, 15);
    // The held resolution carries the end the last transition had.
    assert_eq!(alerts[1]["ends_at"], every.last().unwrap()["ends_at"]);
    // As incidents: one page, resolved when the alert last resolved.
    let notes = replay(&[&base[..], &["--group-incidents", log.as_str()]].concat());
    assert_eq!(events(&notes), ["opened", "resolved"], "{notes:?}");
    assert_eq!(notes[1]["ends_at"], every.last().unwrap()["ends_at"]);
    // No flap window: a page per flap.
    std::fs::write(&cfg, "incidents:\n  group: true\n  flap_window: 0s\n").unwrap();
    let notes = replay(
        &[
            &base[..],
            &["--config", cfg.to_str().unwrap(), log.as_str()],
        ]
        .concat(),
    );
    let opened = events(&notes).iter().filter(|e| *e == "opened").count();
    assert_eq!(opened, 15);
    // Two related alerts needed: one node's lone alert never pages.
    std::fs::write(&cfg, "incidents:\n  group: true\n  min_alerts: 2\n").unwrap();
    let notes = replay(
        &[
            &base[..],
            &["--config", cfg.to_str().unwrap(), log.as_str()],
        ]
        .concat(),
    );
    assert!(notes.is_empty(), "{notes:?}");
}
