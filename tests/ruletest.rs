//! `sigwatch test`: the built-in pack's tests pass, and a deliberately
//! broken rule makes its test fail with a diff that points at the cause.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_sigwatch");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run_tests(rules: Option<&Path>, tests: &Path) -> (bool, String) {
    let mut c = Command::new(BIN);
    c.arg("test");
    if let Some(r) = rules {
        c.arg("--rules").arg(r);
    }
    let out = c.arg(tests).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The pack's rule files copied to a temporary directory, with one edit.
fn pack_with(file: &str, from: &str, to: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(root().join("rules")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            let mut text = std::fs::read_to_string(&p).unwrap();
            if p.file_name().is_some_and(|n| n == file) {
                assert!(text.contains(from), "{from:?} not in {file}");
                text = text.replacen(from, to, 1);
            }
            std::fs::write(dir.path().join(p.file_name().unwrap()), text).unwrap();
        }
    }
    dir
}

#[test]
fn the_pack_tests_pass_and_cover_every_rule() {
    let (ok, out) = run_tests(None, &root().join("rules/tests"));
    assert!(ok, "{out}");
    assert!(out.contains(" 0 failed"), "{out}");
    // Every built-in rule is expected to fire in at least one case.
    let set = sigwatch::rules::load_builtin().unwrap();
    let mut tests = String::new();
    for e in std::fs::read_dir(root().join("rules/tests")).unwrap() {
        tests += &std::fs::read_to_string(e.unwrap().path()).unwrap();
    }
    for r in &set.rules {
        assert!(
            tests.contains(&format!("rule: {}", r.id)),
            "no test expects {}",
            r.id
        );
    }
}

#[test]
fn the_same_tests_pass_against_the_rule_files_on_disk() {
    let (ok, out) = run_tests(Some(&root().join("rules")), &root().join("rules/tests"));
    assert!(ok, "{out}");
}

#[test]
fn a_raised_threshold_shows_the_late_notification() {
    let pack = pack_with("egress.yaml", "min_total: 10", "min_total: 14");
    let (ok, out) = run_tests(Some(pack.path()), &root().join("rules/tests/egress.yaml"));
    assert!(!ok, "{out}");
    assert!(
        out.contains("FAIL  one full-disk node swallowing the recordings is a black hole"),
        "{out}"
    );
    // The black hole now fires at the 14th failure: 40 s late, and with
    // other numbers in its summary.
    assert!(
        out.contains("~ firing   egress.black_hole")
            && out.contains("expected at +1m30s ±30s, came at +2m10s"),
        "{out}"
    );
    assert!(out.contains("(14 of 14 in the window)"), "{out}");
}

#[test]
fn a_broken_match_says_the_rule_matched_nothing() {
    let pack = pack_with(
        "livekit.yaml",
        r#"contains: ["failed to mark as draining"]"#,
        r#"contains: ["failed to mark node as draining"]"#,
    );
    let (ok, out) = run_tests(Some(pack.path()), &root().join("rules/tests/livekit.yaml"));
    assert!(!ok, "{out}");
    assert!(out.contains("- firing   livekit.drain_failed"), "{out}");
    assert!(
        out.contains("the rule matched no line: check its match with `sigwatch explain`"),
        "{out}"
    );
}

#[test]
fn a_bad_test_file_is_reported_with_its_location() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.yaml");
    std::fs::write(&f, "tests:\n  - name: x\n    inptu: []\n").unwrap();
    let (ok, out) = run_tests(None, &f);
    assert!(!ok);
    assert!(
        out.contains("bad.yaml:3:") && out.contains("inptu"),
        "{out}"
    );
}

#[test]
fn explain_answers_why_a_near_miss_did_not_fire() {
    use std::io::Write;
    // From stdin, two lines of one stream: the second inherits nodeID.
    let mut child = Command::new(BIN)
        .args(["explain", "--rule", "livekit.drain_stuck"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(
            br#"{"level":"error","ts":1714568400.5,"msg":"failed to mark as draining","nodeID":"ND_n34r"}
{"level":"info","ts":1714568405.5,"msg":"waiting for participant to exit"}
"#,
        )
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(r#"MATCH  livekit.drain_failed  → group "ND_n34r""#),
        "{text}"
    );
    assert!(text.contains("no     livekit.drain_stuck"), "{text}");
    assert!(
        text.contains(r#"the text has "waiting for participant" then " to exit"#),
        "{text}"
    );
    assert!(text.contains(r#"sticky    nodeID="ND_n34r""#), "{text}");
    let bad = Command::new(BIN)
        .args(["explain", "--rule", "no.such", "x"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
}
