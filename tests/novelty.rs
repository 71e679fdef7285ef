//! Novelty end to end: a baseline learned on the control day, then the
//! incident fixtures replayed against it must page for the incidents' own
//! new error messages, naming the nodes; the control day itself must not
//! page, even with a learning period short enough for its Redis blip to
//! come after it; and a restart with `--state-dir` does not learn again.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;

use common::BIN;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

fn run(args: &[&str]) -> Vec<Value> {
    let out = Command::new(BIN)
        .args(args)
        .args(["--log-level", "error"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn novel(alerts: &[Value]) -> Vec<&Value> {
    alerts
        .iter()
        .filter(|a| a["rule"] == "novel" && a["state"] == "firing")
        .collect()
}

fn nodes(a: &Value) -> Vec<String> {
    a["top_groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap().to_string())
        .collect()
}

/// A baseline learned from the control day.
fn baseline(dir: &Path) -> String {
    let out = dir.join("templates.json");
    let o = Command::new(BIN)
        .args(["learn", "--out"])
        .arg(&out)
        .arg(fixture("control-day.log"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("learned 14 templates"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out.display().to_string()
}

fn replay_after(base: &str, log: &str, extra: &[&str]) -> Vec<Value> {
    let f = fixture(log).display().to_string();
    let mut args = vec!["replay", "--no-summary", "--templates", base];
    args.extend_from_slice(extra);
    args.push(&f);
    run(&args)
}

#[test]
fn incidents_page_for_their_own_new_error_templates_after_a_control_day_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let base = baseline(dir.path());

    // Redis refuses connections on every node: a template the control day
    // (which only saw i/o timeouts) never had, on all six nodes.
    let a = replay_after(&base, "livekit-redis-outage.log", &[]);
    let n = novel(&a);
    assert_eq!(n.len(), 1, "{n:#?}");
    let t = n[0]["template"].as_str().unwrap();
    assert!(
        t.starts_with("could not update node:") && t.ends_with("connect: connection refused"),
        "{t}"
    );
    assert_eq!(nodes(n[0]).len(), 6, "{:?}", nodes(n[0]));
    assert!(n[0]["annotations"]["summary"]
        .as_str()
        .unwrap()
        .starts_with("new error template on 6 node(s): `could not update node:"));

    // The black hole: both of the full-disk node's error messages, on it alone.
    let a = replay_after(&base, "egress-black-hole.log", &[]);
    let n = novel(&a);
    let templates: Vec<&str> = n.iter().map(|a| a["template"].as_str().unwrap()).collect();
    assert!(
        templates.contains(&"No space left on the resource."),
        "{templates:?}"
    );
    assert!(
        templates.contains(&"controller onError invoked: No space left on the resource."),
        "{templates:?}"
    );
    for a in &n {
        assert_eq!(
            nodes(a),
            vec!["NE_2rANN76DeYtZ"],
            "the black-hole node, from .expected"
        );
        assert!(a["first_seen"]
            .as_str()
            .unwrap()
            .starts_with("2025-07-16T12:00:31"));
        assert!(!a["samples"].as_array().unwrap().is_empty());
    }

    // The slow auth instance's failures are a message the control day never logged.
    let a = replay_after(&base, "grpc-slow-auth.log", &[]);
    let n = novel(&a);
    assert_eq!(n.len(), 1, "{n:#?}");
    assert_eq!(
        n[0]["template"],
        "auth check failed: rpc error: code = DeadlineExceeded desc = context deadline exceeded"
    );

    // The known-signature alerts are unchanged by novelty.
    for (log, expected) in [
        ("egress-black-hole.log", "egress-black-hole.expected"),
        ("grpc-slow-auth.log", "grpc-slow-auth.expected"),
    ] {
        let a = replay_after(&base, log, &[]);
        let want = std::fs::read_to_string(fixture(expected)).unwrap();
        for l in want.lines() {
            let mut p = l.split_whitespace();
            let (state, rule, group) = (p.next().unwrap(), p.next().unwrap(), p.next().unwrap());
            assert!(
                a.iter()
                    .any(|x| x["state"] == state && x["rule"] == rule && x["group"] == group),
                "{log}: {l}"
            );
        }
    }
}

#[test]
fn a_single_new_error_line_pages_only_when_tuned_to() {
    // The deadlock fixture logs its error once, on one node: below the
    // default rate (5 lines in 5m, held 30 s), so it does not page...
    let dir = tempfile::tempdir().unwrap();
    let base = baseline(dir.path());
    assert!(novel(&replay_after(&base, "livekit-deadlock-cri.log", &[])).is_empty());
    // ...unless novelty is set to page on one line.
    let rules = dir.path().join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    for f in [
        "livekit.yaml",
        "egress.yaml",
        "kubernetes.yaml",
        "grpc.yaml",
    ] {
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("rules").join(f),
            rules.join(f),
        )
        .unwrap();
    }
    std::fs::write(
        rules.join("novelty.yaml"),
        "novelty:\n  min_count: 1\n  for: 0s\nrules: []\n",
    )
    .unwrap();
    let r = rules.display().to_string();
    let a = replay_after(&base, "livekit-deadlock-cri.log", &["--rules", &r]);
    let n = novel(&a);
    assert_eq!(n.len(), 1, "{a:#?}");
    assert_eq!(n[0]["template"], "status update delayed, possible deadlock");
    assert_eq!(nodes(n[0]), vec!["ND_YVOK56Yk5sSj"]);
}

#[test]
fn the_control_day_does_not_page() {
    let dir = tempfile::tempdir().unwrap();
    let day = fixture("control-day.log").display().to_string();
    // Default: the hour is the learning period.
    assert!(novel(&run(&["replay", "--no-summary", &day])).is_empty());
    // A 20-minute learning period: the 10-second Redis blip at 12:30 is a
    // new error on six nodes, but a blip; nothing pages.
    let rules = dir.path().join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(
        rules.join("novelty.yaml"),
        "novelty:\n  learn_for: 20m\nrules: []\n",
    )
    .unwrap();
    let r = rules.display().to_string();
    let a = run(&["replay", "--no-summary", "--rules", &r, &day]);
    assert!(a.is_empty(), "{a:#?}");
    // The same with the blip allowed to page shows what the guard holds back.
    std::fs::write(
        rules.join("novelty.yaml"),
        "novelty:\n  learn_for: 20m\n  for: 0s\nrules: []\n",
    )
    .unwrap();
    let a = run(&["replay", "--no-summary", "--rules", &r, &day]);
    let n = novel(&a);
    assert_eq!(n.len(), 1, "{a:#?}");
    assert!(n[0]["template"]
        .as_str()
        .unwrap()
        .starts_with("could not update node"));
    // After its own baseline, the day is all known.
    let base = baseline(dir.path());
    assert!(novel(&run(&[
        "replay",
        "--no-summary",
        "--templates",
        &base,
        &day
    ]))
    .is_empty());
}

fn line(t: i64, level: &str, node: &str, msg: &str) -> String {
    format!(
        "{{\"level\":\"{level}\",\"ts\":{}.0,\"msg\":\"{msg}\",\"nodeID\":\"{node}\"}}\n",
        1_754_000_000 + t
    )
}

fn run_stdin(state: &Path, input: &str) -> Vec<Value> {
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--listen",
            "none",
            "--log-level",
            "error",
            "--state-dir",
        ])
        .arg(state)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_restart_with_state_dir_does_not_learn_again() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    // First run: 70 minutes of a known error, past the learning hour and
    // its 100 lines.
    let mut first = String::new();
    for i in 0..140 {
        first += &line(
            i * 30,
            "error",
            "ND_a",
            "cache refresh failed after 3 retries",
        );
    }
    assert!(run_stdin(&state, &first).is_empty());
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(state.join("templates.json")).unwrap())
            .unwrap();
    assert_eq!(saved["templates"].as_array().unwrap().len(), 1);
    assert!(saved["learn_until"].is_null(), "learning is over: {saved}");
    // Second run, later: a known error stays quiet, a new one on two nodes
    // pages at once (a fresh start would spend its first hour learning).
    let mut second = String::new();
    for i in 0..12 {
        let t = 5000 + i * 5;
        second += &line(t, "error", "ND_a", "cache refresh failed after 4 retries");
        second += &line(t, "error", "ND_a", "segment 12 checksum mismatch");
        second += &line(t + 1, "error", "ND_b", "segment 7 checksum mismatch");
    }
    let a = run_stdin(&state, &second);
    let n = novel(&a);
    assert_eq!(n.len(), 1, "{a:#?}");
    assert_eq!(n[0]["template"], "segment <*> checksum mismatch");
    assert_eq!(nodes(n[0]), vec!["ND_a", "ND_b"]);
    // Without the state, the same input is only learned.
    let fresh = dir.path().join("fresh");
    assert!(novel(&run_stdin(&fresh, &second)).is_empty());
}

#[test]
fn templates_lists_the_mined_templates_per_level() {
    let out = Command::new(BIN)
        .args(["templates", "--top", "3"])
        .arg(fixture("livekit-redis-outage.log"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let error = text.find("== error (2 templates").expect(&text);
    let info = text.find("== info (").expect(&text);
    assert!(error < info, "errors first:\n{text}");
    assert!(text.contains("failed to mark as draining: could not register node: dial tcp <*>: connect: connection refused"));
    assert!(
        text.contains("(3 more)"),
        "--top 3 of the 6 info templates:\n{text}"
    );
    // JSON lines, every line mined, counts adding up to the lines read.
    let out = Command::new(BIN)
        .args(["templates", "--json"])
        .arg(fixture("livekit-redis-outage.log"))
        .output()
        .unwrap();
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let total: u64 = rows.iter().map(|r| r["count"].as_u64().unwrap()).sum();
    let lines = std::fs::read_to_string(fixture("livekit-redis-outage.log"))
        .unwrap()
        .lines()
        .count() as u64;
    assert_eq!(total, lines);
    // --level keeps warn and above only.
    let out = Command::new(BIN)
        .args(["templates", "--json", "--level", "warn"])
        .arg(fixture("livekit-redis-outage.log"))
        .output()
        .unwrap();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["level"], "error", "{v}");
    }
}

#[test]
fn untimed_lines_of_another_file_neither_start_learning_nor_page() {
    // `sigwatch replay control-day.log other-system.log`, the second file's
    // lines carrying a level but no time: they sort first, and must not
    // start the learning period in 1970 (which ended it before the control
    // day began, so the control day paged for its own errors).
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other-system.log");
    let mut f = std::fs::File::create(&other).unwrap();
    for i in 0..40 {
        writeln!(f, "ERROR disk controller reset on bay {}", i % 4).unwrap();
        writeln!(f, "WARN fan {i} speed low").unwrap();
    }
    drop(f);
    let out = Command::new(BIN)
        .args(["replay", "--log-level", "error"])
        .arg(fixture("control-day.log"))
        .arg(&other)
        .output()
        .unwrap();
    assert!(out.status.success());
    let alerts: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(alerts.is_empty(), "{alerts:#?}");
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        summary.contains("time span  2025-08-03T12:00:00.000Z → 2025-08-03T12:59:59.924Z"),
        "{summary}"
    );
    // Counted one by one: the 80 lines of the other file and the control
    // day's own three.
    assert!(summary.contains("untimed 83"), "{summary}");
}

#[test]
fn a_file_without_times_says_so_in_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("stderr.log");
    std::fs::write(
        &f,
        "starting\nERROR cannot open /data: permission denied\nexiting\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["replay", "--log-level", "error"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success());
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        summary.contains("time span  (no line had a time of its own)"),
        "{summary}"
    );
    assert!(
        summary.contains("note       3 of 3 lines have no time of their own"),
        "{summary}"
    );
    assert!(
        summary.contains("note       2 of 3 lines are in no format sigwatch reads"),
        "{summary}"
    );
}

/// A quiet day: six start-up lines, an hour of nothing, then the service's
/// everyday traffic (two error templates it logs all day on two nodes).
/// Learning by the clock alone would end before the traffic and page both;
/// learning needs its lines too, says so while it lasts, and pages nothing.
#[test]
fn a_quiet_start_learns_the_traffic_that_follows_instead_of_paging_it() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("quiet.log");
    let mut text = String::new();
    for (i, step) in [
        "loading config",
        "opening database",
        "warming cache",
        "binding port 8080",
        "registering with discovery",
        "ready",
    ]
    .iter()
    .enumerate()
    {
        text += &line(i as i64, "info", "ND_a", step);
    }
    for i in 0..60 {
        let t = 3700 + i * 20;
        text += &line(
            t,
            "error",
            "ND_a",
            &format!("upstream auth timed out after {}ms", 900 + i),
        );
        text += &line(
            t + 1,
            "error",
            "ND_b",
            &format!("order {} retried: lock wait timeout", 4000 + i),
        );
    }
    std::fs::write(&f, &text).unwrap();
    let out = Command::new(BIN)
        .args(["replay", "--log-level", "error"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success());
    let alerts: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(novel(&alerts).is_empty(), "{alerts:#?}");
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(summary.contains("templates  "), "{summary}");
    assert!(!summary.contains("new after learning"), "{summary}");
    // By the clock alone, the same day pages its everyday errors.
    let rules = dir.path().join("clock.yaml");
    std::fs::write(&rules, "novelty:\n  learn_lines: 0\nrules: []\n").unwrap();
    let out = Command::new(BIN)
        .args([
            "replay",
            "--log-level",
            "error",
            "--no-builtin-rules",
            "--rules",
        ])
        .arg(&rules)
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let alerts: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!novel(&alerts).is_empty(), "{alerts:#?}");
}
