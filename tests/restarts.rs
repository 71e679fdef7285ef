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

/// 2024-05-01T13:26:40Z, the start of the flapping disk.
const T0: i64 = 1_714_570_000;

/// An egress line at `t` (s): the disk of node NE_fl4p is full.
fn full(t: i64) -> String {
    format!(
        r#"{{"level":"error","ts":{t}.000,"logger":"egress","msg":"No space left on the resource.","nodeID":"NE_fl4p"}}"#
    )
}

/// An egress line at `t` (s) from another node: event time passes.
fn beat(t: i64) -> String {
    format!(
        r#"{{"level":"debug","ts":{t}.000,"logger":"egress","msg":"cpu check","nodeID":"NE_other","available":7.5}}"#
    )
}

/// A resolution held for its flap window is kept across a restart: the
/// alert firing again in the next run continues the episode (nothing
/// sent), and the resolution that finally goes out carries the episode's
/// first start.
#[test]
fn a_held_resolution_survives_restarts_and_the_episode_stays_one() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let t0 = T0;
    let run = |lines: Vec<String>| -> Vec<serde_json::Value> {
        let mut child = Command::new(BIN)
            .args([
                "run",
                "--output",
                "json",
                "--log-level",
                "error",
                "--listen",
                "none",
            ])
            .arg("--state-dir")
            .arg(&state)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        for l in &lines {
            writeln!(stdin, "{l}").unwrap();
        }
        drop(stdin);
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success());
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|n| n["rule"] == "egress.disk_full")
            .collect()
    };
    let m = 60;
    // Run 1: full at t0; out of the window at +10m, resolved at +20m (the
    // rule's resolve_after), held for the flap window (5m).
    let first = run(vec![full(t0), beat(t0 + 10 * m), beat(t0 + 21 * m)]);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["state"], "firing");
    let start = first[0]["starts_at"].clone();
    // Run 2: full again at +23m, within the window: the same episode.
    let second = run(vec![
        full(t0 + 23 * m),
        beat(t0 + 30 * m),
        beat(t0 + 40 * m),
    ]);
    assert!(second.is_empty(), "a flap paged again: {second:?}");
    // Run 3: out of the window at +33m, resolved at +43m, held to +48m.
    let third = run(vec![beat(t0 + 45 * m), beat(t0 + 49 * m)]);
    assert_eq!(third.len(), 1, "{third:?}");
    assert_eq!(third[0]["state"], "resolved");
    assert_eq!(
        third[0]["starts_at"], start,
        "one episode, as receivers know it"
    );
    assert_eq!(third[0]["ends_at"], "2024-05-01T14:09:40.000Z");
}

/// While a resolution is held the status page lists it and /metrics
/// counts it; the firing that takes it back is counted as a flap held.
#[test]
fn a_held_resolution_is_on_the_status_page_and_in_the_metrics() {
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["run", "--output", "json", "--log-level", "error"])
        .arg(format!("--listen=127.0.0.1:{port}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _child = Killed(child);
    let t0 = T0;
    let metric = |name: &str| -> Option<i64> {
        get(port, "/metrics")?
            .lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .last()?
            .parse()
            .ok()
    };
    writeln!(stdin, "{}\n{}", full(t0), beat(t0 + 21 * 60)).unwrap();
    stdin.flush().unwrap();
    wait_for("the held resolution on /api/status", || {
        get(port, "/api/status").is_some_and(|s| {
            let v: serde_json::Value = serde_json::from_str(&s).unwrap_or_default();
            v["flapping"].as_array().is_some_and(|f| {
                f.len() == 1
                    && f[0]["rule"] == "egress.disk_full"
                    && f[0]["group"] == "NE_fl4p"
                    && f[0]["resolved_at"] == "2024-05-01T13:46:40.000Z"
                    && f[0]["held_until"] == "2024-05-01T13:51:40.000Z"
            })
        })
    });
    assert_eq!(metric("sigwatch_state{kind=\"resolutions_held\"}"), Some(1));
    writeln!(stdin, "{}", full(t0 + 23 * 60)).unwrap();
    stdin.flush().unwrap();
    wait_for("the flap counted", || {
        metric("sigwatch_events_total{kind=\"flaps_held\"}") == Some(1)
    });
    wait_for("nothing held any more", || {
        metric("sigwatch_state{kind=\"resolutions_held\"}") == Some(0)
    });
}
