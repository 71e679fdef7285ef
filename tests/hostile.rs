//! Hostile input: nothing panics, memory stays bounded, every drop is
//! counted, and a real signature after the garbage still alerts.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_sigwatch");

#[test]
fn a_hostile_corpus_runs_clean() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("hostile.log");
    let mut f = std::fs::File::create(&p).unwrap();
    let ts = 1_764_000_000;
    writeln!(f, "{{\"level\":\"info\",\"ts\":{ts},\"msg\":\"starting LiveKit server\",\"nodeID\":\"ND_h0st1le\"}}").unwrap();
    f.write_all(b"\xff\xfe invalid utf-8 \xc3\x28 here\n")
        .unwrap();
    f.write_all(b"nul\0bytes\0in\0the\0middle\n").unwrap();
    writeln!(f, "{}", "x".repeat(2 * 1024 * 1024)).unwrap(); // over the 1 MiB line limit
                                                             // Deep nesting on a candidate line (it holds a literal), so the JSON
                                                             // parser sees it: its recursion limit makes it malformed, not a crash.
    writeln!(
        f,
        "{{\"msg\":\"waiting for participants to exit\",\"a\":{}{}}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    )
    .unwrap();
    writeln!(f, "{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000)).unwrap();
    writeln!(f, "{{\"ts\":1e400,\"msg\":\"huge float\"}}").unwrap();
    writeln!(
        f,
        "{{\"ts\":99999999999999999999999999,\"msg\":\"huge int\"}}"
    )
    .unwrap();
    writeln!(
        f,
        "{{\"time\":\"9999-12-31T00:00:00Z\",\"msg\":\"far future\"}}"
    )
    .unwrap();
    writeln!(
        f,
        "{{\"msg\":\"a\",\"msg\":\"b\",\"msg\":\"c\",\"ts\":{ts}}}"
    )
    .unwrap();
    writeln!(f, "{{\"level\":\"error\",\"ts\":{},\"msg\":\"failed to mark as draining\",\"nodeID\":\"ND_h0st1le\"}}", ts + 5).unwrap();
    // A CRI partial line that never finishes: three 600 KB chunks, then EOF.
    for _ in 0..3 {
        writeln!(
            f,
            "2025-11-24T16:00:10.000000000Z stdout P {}",
            "p".repeat(600_000)
        )
        .unwrap();
    }
    drop(f);
    let start = Instant::now();
    let out = Command::new(BIN)
        .args(["replay", "--log-level", "error", "--stats"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(30));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("\"livekit.drain_failed\"") && stdout.contains("ND_h0st1le"),
        "the real signature still alerts: {stdout}"
    );
    let stats: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stderr).lines().last().unwrap()).unwrap();
    let d = &stats["decode"];
    // 1e26 as an epoch is absurd and counted; 1e400 and year 9999 are not
    // times at all: all three are ignored.
    assert!(
        d["bad_time"].as_u64().unwrap() >= 1,
        "absurd timestamps ignored and counted: {d}"
    );
    assert!(
        d["malformed"].as_u64().unwrap() >= 1,
        "deep JSON counted as malformed, no stack overflow: {d}"
    );
    assert!(
        d["partial_overflow"].as_u64().unwrap() >= 1,
        "the endless partial is cut and counted: {d}"
    );
    assert_eq!(
        stats["late"], 0,
        "no absurd time dragged the watermark away"
    );
}

#[test]
fn huge_and_nasty_rule_files_are_handled() {
    let dir = tempfile::tempdir().unwrap();
    // 100 000 literals in one rule.
    let p = dir.path().join("big.yaml");
    let mut f = std::fs::File::create(&p).unwrap();
    writeln!(
        f,
        "rules:\n  - id: big\n    title: big\n    severity: info\n    match:\n      contains:"
    )
    .unwrap();
    for i in 0..100_000 {
        writeln!(f, "        - \"signature number {i} of many\"").unwrap();
    }
    writeln!(f, "    detect: {{count: {{window: 1m}}}}").unwrap();
    drop(f);
    let start = Instant::now();
    let out = Command::new(BIN)
        .args(["check", "--rules"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "{:?}",
        start.elapsed()
    );
    // A catastrophic-looking regex is linear in the regex crate.
    let r = dir.path().join("re.yaml");
    std::fs::write(&r, "rules:\n  - id: re\n    title: re\n    severity: info\n    match:\n      contains: aaaa\n      regex: '(a+)+$'\n    detect: {count: {window: 1m}}\n").unwrap();
    let line = dir.path().join("a.log");
    std::fs::write(
        &line,
        format!(
            "{{\"ts\":1764000000,\"msg\":\"{}b\"}}\n",
            "a".repeat(100_000)
        ),
    )
    .unwrap();
    let start = Instant::now();
    let out = Command::new(BIN)
        .args(["replay", "--log-level", "error", "--rules"])
        .arg(&r)
        .arg(&line)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "no catastrophic backtracking: {:?}",
        start.elapsed()
    );
    // A literal of 10 MB (or a periodic one of 30 KB) is a clear load
    // error at its place, not gigabytes and minutes of compiling.
    for (name, lit) in [
        ("long.yaml", "a".repeat(10 << 20)),
        ("periodic.yaml", "abcabcabx".repeat(3_400)),
    ] {
        let p = dir.path().join(name);
        std::fs::write(
            &p,
            format!("rules:\n  - id: long\n    title: t\n    severity: info\n    match: {{contains: '{lit}'}}\n    detect: {{count: {{window: 1m}}}}\n"),
        )
        .unwrap();
        let out = Command::new(BIN)
            .args(["check", "--rules"])
            .arg(&p)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!("{name}:5:5:"))
                && err.contains("more than the 1024 a literal may have"),
            "{err}"
        );
    }
    // A regex too large to compile is a located error, not a crash.
    let huge = dir.path().join("huge.yaml");
    std::fs::write(&huge, "rules:\n  - id: h\n    title: h\n    severity: info\n    match:\n      regex: '(\\w{1000}){1000}'\n    detect: {count: {window: 1m}}\n").unwrap();
    let out = Command::new(BIN)
        .args(["check", "--rules"])
        .arg(&huge)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("huge.yaml:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn max_line_bytes_cuts_long_lines_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("long.log");
    // The literal sits 6 KB into the line: kept under the default 1 MiB
    // bound, cut away under a 4 KiB one.
    let line = format!(
        "{{\"level\":\"error\",\"ts\":1764000000,\"pad\":\"{}\",\"msg\":\"failed to mark as draining\",\"nodeID\":\"ND_l0ng\"}}\n",
        "z".repeat(6000)
    );
    std::fs::write(&p, line.repeat(3)).unwrap();
    let run = |extra: &[&str]| {
        let out = Command::new(BIN)
            .args(["replay", "--log-level", "warn"])
            .args(extra)
            .arg(&p)
            .output()
            .unwrap();
        assert!(out.status.success());
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (stdout, _) = run(&[]);
    assert!(stdout.contains("livekit.drain_failed"), "{stdout}");
    let (stdout, stderr) = run(&["--max-line-bytes", "4096"]);
    assert!(!stdout.contains("drain_failed"), "{stdout}");
    assert!(stderr.contains("truncated=3"), "{stderr}");
    let bad = Command::new(BIN)
        .args(["replay", "--max-line-bytes", "10"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(!bad.status.success(), "a bound below 1 KiB is refused");
}
