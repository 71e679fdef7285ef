//! A replay notifies in the order a live run would: every notification
//! carries the event time it was made at (`at`), and they come out in that
//! order — a resolution held for the flap window goes out at the window's
//! end, between the firings made before and after it, not at the end of
//! input. Checked on every fixture, alone and with `--group-incidents`
//! (incident updates carry their own instant too), and with the flap
//! window off. The rule tests' order is checked beside the runner
//! (src/ruletest.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;

use common::BIN;
use std::path::Path;
use std::process::Command;

fn replay(log: &Path, extra: &[&str], config: Option<&Path>) -> Vec<serde_json::Value> {
    let mut c = Command::new(BIN);
    c.args([
        "replay",
        "--no-summary",
        "--no-links",
        "--log-level",
        "error",
    ]);
    if let Some(cfg) = config {
        c.arg("--config").arg(cfg);
    }
    let out = c.args(extra).arg(log).output().unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        log.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn instant(n: &serde_json::Value) -> i64 {
    let at = n["at"].as_str().unwrap_or_else(|| panic!("no `at` in {n}"));
    chrono::DateTime::parse_from_rfc3339(at)
        .unwrap()
        .timestamp_nanos_opt()
        .unwrap()
}

#[test]
fn every_fixture_replays_in_the_order_its_notifications_were_made() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let tmp = tempfile::tempdir().unwrap();
    let no_flap = tmp.path().join("no-flap.yaml");
    std::fs::write(&no_flap, "incidents:\n  flap_window: 0s\n").unwrap();
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    // And the distinct days as one stream, one after the other: alerts of
    // one incident resolve while later ones fire, in the same block.
    let days = [
        "livekit-redis-outage",
        "egress-black-hole",
        "k8s-liveness-cascade",
        "grpc-slow-auth",
        "livekit-deadlock-cri",
        "control-day",
        "k8s-readiness-loss",
        "routine-livekit-upgrade",
        "routine-k8s-maintenance",
    ];
    let mut all = Vec::new();
    for d in days {
        all.extend(std::fs::read(dir.join(format!("{d}.log"))).unwrap());
    }
    let stream = tmp.path().join("every-day.log");
    std::fs::write(&stream, all).unwrap();
    logs.push(stream);
    let mut failures = Vec::new();
    let mut resolutions = 0;
    for log in &logs {
        let name = log.file_name().unwrap().to_string_lossy().into_owned();
        for (how, extra, cfg) in [
            ("alone", &[][..], None),
            ("grouped", &["--group-incidents"][..], None),
            ("flap window off", &[][..], Some(no_flap.as_path())),
        ] {
            let notes = replay(log, extra, cfg);
            let mut last: Option<(i64, String)> = None;
            for n in &notes {
                let at = instant(n);
                let what = format!("{} {} {}", n["state"], n["rule"], n["group"]);
                if n["state"] == "resolved" {
                    resolutions += 1;
                    let ends = n["ends_at"].as_str().unwrap();
                    assert!(
                        n["at"].as_str().unwrap() >= ends,
                        "{name} ({how}): {what} made at {at} before it ended at {ends}"
                    );
                }
                if let Some((t, prev)) = &last {
                    if at < *t {
                        failures.push(format!(
                            "{name} ({how}): {what} at {} after {prev} at {}",
                            n["at"],
                            sigwatch::clock::format_rfc3339(*t)
                        ));
                    }
                }
                last = Some((at, what));
            }
        }
    }
    assert!(logs.len() >= 10, "{} fixtures", logs.len());
    assert!(
        resolutions > 0,
        "no fixture resolves anything: the order of resolutions went untested"
    );
    assert!(failures.is_empty(), "{failures:#?}");
}
