//! `sigwatch suggest` end to end: rules suggested from the egress black
//! hole fixture against a quiet day fire on *another* black hole made by
//! the fixture generator with other IDs, times, node count, bad node and
//! shapes — naming its bad node, and only it — and stay quiet on another
//! quiet day; they load, their examples and their written tests pass, and
//! their literals copy no ID, number or path.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;

use common::BIN;
use std::path::Path;
use std::process::Command;

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Firing notifications of the suggested rules: (rule, group).
fn fired(rules: &str, log: &Path) -> Vec<(String, String)> {
    let (ok, out, err) = run(&[
        "replay",
        "--no-builtin-rules",
        "--rules",
        rules,
        "--no-novelty",
        "--no-summary",
        "--output",
        "json",
        log.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    out.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|n| n["state"] == "firing" && n["rule"].as_str().unwrap().starts_with("suggested."))
        .map(|n| {
            (
                n["rule"].as_str().unwrap().to_string(),
                n["group"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Other days from the fixture generator into `dir`; the bad node of its
/// second black hole.
fn variants(dir: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let gen = Command::new("python3")
        .arg(root.join("fixtures/gen.py"))
        .arg("variants")
        .arg(dir)
        .output()
        .expect("python3 runs the fixture generator");
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    String::from_utf8(gen.stdout).unwrap().trim().to_string()
}

#[test]
fn suggested_rules_fire_on_another_incident_of_the_kind_and_not_on_quiet_logs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let bad = variants(dir.path());
    assert!(bad.starts_with("NE_"), "{bad}");
    let incident = root.join("fixtures/egress-black-hole.log");
    let rules = dir.path().join("suggested.yaml");
    let tests = dir.path().join("tests");
    let (ok, report, err) = run(&[
        "suggest",
        "--baseline",
        dir.path().join("egress-quiet-a.log").to_str().unwrap(),
        "--incident",
        incident.to_str().unwrap(),
        "--out",
        rules.to_str().unwrap(),
        "--tests",
        tests.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let rules_s = rules.to_str().unwrap();
    // A ranked explanation naming the incident's bad node.
    assert!(report.contains("1. suggested."), "{report}");
    assert!(report.contains("NE_2rANN76DeYtZ"), "{report}");
    // They load and their examples pass; their tests pass.
    let (ok, out, err) = run(&["check", "--rules", rules_s]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = run(&["test", "--rules", rules_s, tests.to_str().unwrap()]);
    assert!(ok && out.contains("0 failed"), "{out}{err}");
    // Generalised: the literals hold no ID, number or path.
    let text = std::fs::read_to_string(&rules).unwrap();
    let y: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    let list = y["rules"].as_sequence().unwrap();
    assert!(!list.is_empty(), "{text}");
    for r in list {
        for key in ["contains", "contains_all"] {
            for lit in r["match"][key].as_sequence().into_iter().flatten() {
                let lit = lit.as_str().unwrap();
                assert!(
                    !lit.bytes().any(|b| b.is_ascii_digit())
                        && !lit.contains("NE_")
                        && !lit.contains('/'),
                    "a literal copies a variable: {lit:?}"
                );
            }
        }
        assert!(
            r["examples"]["match"]
                .as_sequence()
                .is_some_and(|e| !e.is_empty()),
            "examples: {r:?}"
        );
    }
    // Another black hole: its bad node, and only it.
    let other = fired(rules_s, &dir.path().join("egress-incident-b.log"));
    assert!(!other.is_empty(), "nothing fired on the other incident");
    assert!(
        other.iter().all(|(_, g)| *g == bad),
        "{other:?}, bad node {bad}"
    );
    // Another quiet day: nothing.
    let quiet = fired(rules_s, &dir.path().join("egress-quiet-b.log"));
    assert!(quiet.is_empty(), "{quiet:?}");
}

#[test]
fn suggest_explains_what_it_left_out_and_refuses_stdin() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.yaml");
    let (ok, _, err) = run(&[
        "suggest",
        "--baseline",
        "-",
        "--incident",
        root.join("fixtures/egress-black-hole.log")
            .to_str()
            .unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("not - (stdin)"), "{err}");
    // The same logs on both sides: nothing new, nothing written but an
    // empty rule list that still loads.
    let same = root.join("fixtures/egress-black-hole.log");
    let (ok, report, err) = run(&[
        "suggest",
        "--baseline",
        same.to_str().unwrap(),
        "--incident",
        same.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(report.starts_with("0 rule(s) written"), "{report}");
    let (ok, o, e) = run(&["check", "--rules", out.to_str().unwrap()]);
    assert!(ok, "{o}{e}");
}

#[test]
fn suggested_rules_catch_another_redis_outage_and_not_another_quiet_day() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    variants(dir.path());
    let rules = dir.path().join("outage.yaml");
    let (ok, report, err) = run(&[
        "suggest",
        "--baseline",
        root.join("fixtures/control-day.log").to_str().unwrap(),
        "--incident",
        root.join("fixtures/livekit-redis-outage.log")
            .to_str()
            .unwrap(),
        "--out",
        rules.to_str().unwrap(),
        "--tests",
        dir.path().join("tests").to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    // The control day has a 10 s Redis blip ("i/o timeout") on every node:
    // the rule on the refused connections must not take it for an outage.
    assert!(
        report.contains("also \"connect: connection refused\""),
        "{report}"
    );
    // One line per node at start or stop is a lifecycle event, not a rule.
    assert!(
        report.contains("\"exit requested, shutting down\": one info line per node"),
        "{report}"
    );
    let rules_s = rules.to_str().unwrap();
    let (ok, out, err) = run(&[
        "test",
        "--rules",
        rules_s,
        dir.path().join("tests").to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    let other = fired(rules_s, &dir.path().join("livekit-outage-b.log"));
    assert!(
        other
            .iter()
            .any(|(r, _)| r == "suggested.could_not_register_node_dial_tcp"),
        "{other:?}"
    );
    let quiet = fired(rules_s, &dir.path().join("control-day-b.log"));
    assert!(quiet.is_empty(), "{quiet:?}");
}
