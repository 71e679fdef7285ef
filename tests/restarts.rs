//! A rolling upgrade in the middle of an incident changes nothing on-call
//! receives: the Redis outage streamed into `sigwatch run --state-dir`,
//! stopped four times (SIGTERM, as Kubernetes does; then kill -9, as an OOM
//! kill does) and started again on the next part of the stream, gives the
//! notifications one uninterrupted replay gives — the six stuck drains
//! included, at the same instants, none twice.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;

use common::{free_port, Killed, BIN};
use std::io::{BufRead, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/fixtures/livekit-redis-outage.log"
);

/// (state, rule, group, starts_at) of each notification, in order.
fn digest(ndjson: &str) -> Vec<String> {
    ndjson
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            format!(
                "{} {} {} {}",
                v["state"].as_str().unwrap(),
                v["rule"].as_str().unwrap(),
                v["group"].as_str().unwrap(),
                v["starts_at"].as_str().unwrap()
            )
        })
        .collect()
}

/// A plain HTTP GET on 127.0.0.1 (body only; None while nothing answers).
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    r.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

/// The `lines` counter of /metrics.
fn lines_seen(port: u16) -> u64 {
    get(port, "/metrics")
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("sigwatch_events_total{kind=\"lines\"}"))
                .and_then(|l| l.split_whitespace().last()?.parse().ok())
        })
        .unwrap_or(0)
}

/// Waits (bounded: 60 s) for `cond`, failing with `what`.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether every receiver's spool in `dir` is empty (all delivered, the
/// receipts written with it). Temporary files of a write in progress are
/// not the spool.
fn spools_empty(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir.join("spool"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.ends_with(".json") && !n.starts_with('.')
        })
        .all(|e| {
            std::fs::read(e.path())
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .is_some_and(|v| v["queue"].as_array().is_some_and(Vec::is_empty))
        })
}

/// When the checkpoint in `dir` was saved (RFC 3339), if there is one.
fn checkpoint_saved_at(dir: &std::path::Path) -> Option<String> {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("checkpoint.json")).ok()?).ok()?;
    v["saved_at"].as_str().map(str::to_string)
}

#[derive(Clone, Copy, PartialEq)]
enum Stop {
    Term,
    Kill,
}

/// Streams the fixture into `parts` successive processes sharing one state
/// directory; each is stopped by `stop` once it has processed its part
/// (and, for kill -9, once a checkpoint newer than that is on disk: a
/// crash forgets what came after the last checkpoint of a pipe). Returns
/// everything they printed.
fn streamed_with_restarts(parts: usize, stop: Stop) -> String {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let dir = tempfile::tempdir().unwrap();
    let mut printed = String::new();
    for k in 0..parts {
        let chunk = &lines[k * lines.len() / parts..(k + 1) * lines.len() / parts];
        let port = free_port();
        let mut child = Command::new(BIN)
            .args(["run", "--log-level", "warn", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["--checkpoint-interval", "200ms", "--state-dir"])
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut out = String::new();
            for l in std::io::BufReader::new(stdout).lines() {
                out.push_str(&l.unwrap());
                out.push('\n');
            }
            out
        });
        let mut stdin = child.stdin.take().unwrap();
        let mut child = Killed(child);
        for l in chunk {
            writeln!(stdin, "{l}").unwrap();
        }
        stdin.flush().unwrap();
        if k + 1 == parts {
            drop(stdin);
        } else {
            wait_for("the part processed", || {
                lines_seen(port) >= chunk.len() as u64
            });
            match stop {
                Stop::Term => {
                    let pid = child.0.id().to_string();
                    let ok = Command::new("kill")
                        .args(["-TERM", &pid])
                        .status()
                        .unwrap()
                        .success();
                    assert!(ok);
                }
                Stop::Kill => {
                    let processed = checkpoint_saved_at(dir.path());
                    wait_for("a checkpoint after the part, every page delivered", || {
                        checkpoint_saved_at(dir.path()) > processed && spools_empty(dir.path())
                    });
                    child.0.kill().unwrap();
                }
            }
        }
        let status = child.0.wait().unwrap();
        if stop == Stop::Term || k + 1 == parts {
            assert!(status.success(), "part {k}: {status}");
        }
        printed.push_str(&reader.join().unwrap());
    }
    printed
}

fn replayed() -> Vec<String> {
    let out = Command::new(BIN)
        .args(["replay", "--no-summary", "--log-level", "warn", FIXTURE])
        .output()
        .unwrap();
    assert!(out.status.success());
    digest(&String::from_utf8(out.stdout).unwrap())
}

#[test]
fn four_sigterm_restarts_during_the_redis_outage_change_nothing() {
    let want = replayed();
    assert_eq!(
        want.iter()
            .filter(|n| n.contains("livekit.drain_stuck"))
            .count(),
        6,
        "the fixture's six stuck drains: {want:#?}"
    );
    let got = digest(&streamed_with_restarts(5, Stop::Term));
    assert_eq!(got, want);
}

#[test]
fn four_kill_9_restarts_during_the_redis_outage_change_nothing() {
    let want = replayed();
    let got = digest(&streamed_with_restarts(5, Stop::Kill));
    assert_eq!(got, want);
}

/// Every file under `dir`, recursively.
fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_disk_that_refuses_writes_gives_one_error_a_counter_and_no_temporaries() {
    // The file-size limit makes every state file bigger than 1 KiB fail
    // to write (EFBIG, as ENOSPC would on a full disk; the signal it sends
    // ignored, as a full disk sends none), while stdout, a pipe, works.
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::fs::File::open(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/egress-black-hole.log"
    ))
    .unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f 2; exec {BIN} run --listen none --stats --checkpoint-interval 100ms --state-dir {}",
            dir.path().display()
        ))
        .stdin(fixture)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        digest(&String::from_utf8_lossy(&out.stdout)).len(),
        2,
        "delivery goes on: {stderr}"
    );
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("ERROR")).collect();
    assert_eq!(errors.len(), 1, "one error, not one per write: {errors:#?}");
    assert!(
        errors[0].contains("File too large") && errors[0].contains("state_write_errors"),
        "{}",
        errors[0]
    );
    let stats: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert!(
        stats["state_write_errors"].as_u64().unwrap() >= 2,
        "every failure counted: {stats}"
    );
    let left: Vec<_> = files(dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}
