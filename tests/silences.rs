//! Silences on a live instance: set with `sigwatch silence` through the
//! guarded `/api/silences`, they hold back the pages they cover (counted,
//! shown on the status page), release a still-firing alert when they end,
//! and survive a restart in `--state-dir`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;

use common::{free_port, Killed, BIN};
use std::io::{BufRead, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RULES: &str = "rules:\n  - id: disk.full\n    title: Disk full\n    severity: critical\n    match: {contains: [\"no space left\"]}\n    group_by: node\n    detect: {count: {window: 10m}}\n";

/// An HTTP request on 127.0.0.1: (status, body); None while nothing answers.
fn http(port: u16, method: &str, path: &str, token: Option<&str>) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    let code = r.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, r.split_once("\r\n\r\n")?.1.to_string()))
}

/// Waits (bounded: 60 s) for `cond`, failing with `what`.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Live {
    child: Killed,
    port: u16,
    out: Arc<Mutex<Vec<serde_json::Value>>>,
}

fn start(dir: &std::path::Path) -> Live {
    let rules = dir.join("rules.yaml");
    launch(
        dir,
        &[
            "--no-novelty".as_ref(),
            "--rules".as_ref(),
            rules.as_os_str(),
        ],
        "state",
    )
}

/// `sigwatch run` on stdin with `extra` flags, its state in `dir/state`,
/// guarded by `dir/token`; its notifications collected from stdout.
fn launch(dir: &std::path::Path, extra: &[&std::ffi::OsStr], state: &str) -> Live {
    let port = free_port();
    let mut child: Child = Command::new(BIN)
        .args(["run", "--log-level", "warn", "--no-builtin-rules"])
        .args(extra)
        .arg("--state-dir")
        .arg(dir.join(state))
        .arg("--web-token-file")
        .arg(dir.join("token"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let out = Arc::new(Mutex::new(Vec::new()));
    let sink = out.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str(&line) {
                sink.lock().unwrap().push(v);
            }
        }
    });
    wait_for("the instance", || {
        http(port, "GET", "/healthz", None).is_some_and(|(c, _)| c == 200)
    });
    Live {
        child: Killed(child),
        port,
        out,
    }
}

impl Live {
    fn say(&mut self, node: &str) {
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let stdin = self.child.0.stdin.as_mut().unwrap();
        writeln!(
            stdin,
            "{{\"level\":\"error\",\"ts\":{ts:.3},\"msg\":\"write failed: no space left on device\",\"node\":\"{node}\"}}"
        )
        .unwrap();
        stdin.flush().unwrap();
    }

    fn fired(&self, node: &str) -> bool {
        self.out
            .lock()
            .unwrap()
            .iter()
            .any(|n| n["state"] == "firing" && n["group"] == node)
    }

    fn cli(&self, dir: &std::path::Path, args: &[&str]) -> std::process::Output {
        Command::new(BIN)
            .arg("silence")
            .args(args)
            .args(["--url", &format!("http://127.0.0.1:{}", self.port)])
            .arg("--token-file")
            .arg(dir.join("token"))
            .env_remove("SIGWATCH_WEB_TOKEN")
            .output()
            .unwrap()
    }

    fn metric(&self, kind: &str) -> u64 {
        http(self.port, "GET", "/metrics", Some("tok-1"))
            .and_then(|(_, m)| {
                m.lines()
                    .find(|l| l.starts_with(&format!("sigwatch_events_total{{kind=\"{kind}\"}}")))
                    .and_then(|l| l.split_whitespace().last()?.parse().ok())
            })
            .unwrap_or(0)
    }
}

#[test]
fn a_silence_holds_its_pages_until_it_ends_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("rules.yaml"), RULES).unwrap();
    std::fs::write(d.join("token"), "tok-1\n").unwrap();
    let mut live = start(d);
    // The API is behind the status page's credential.
    assert_eq!(
        http(live.port, "GET", "/api/silences", None).unwrap().0,
        401
    );
    assert_eq!(
        http(live.port, "GET", "/api/silences", Some("tok-1")).unwrap(),
        (200, "[]".to_string())
    );
    // A bad silence is refused with its reason; nothing is kept.
    let bad = live.cli(d, &["add", "--for", "1h", "--comment", "no matcher"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("matcher"));
    let add = live.cli(
        d,
        &[
            "add",
            "--rule",
            "disk.full",
            "--match",
            "group=n1",
            "--for",
            "1h",
            "--comment",
            "disk swap on n1",
            "--author",
            "ana",
        ],
    );
    assert!(
        add.status.success(),
        "{}",
        String::from_utf8_lossy(&add.stderr)
    );
    assert!(String::from_utf8_lossy(&add.stdout).starts_with("s-1\tactive"));
    // n1's page is held, n2's goes out; the silenced one is counted.
    live.say("n1");
    live.say("n2");
    wait_for("n2's page", || live.fired("n2"));
    wait_for("the count", || live.metric("notifications_silenced") >= 1);
    assert!(!live.fired("n1"));
    // The status page shows who silenced what and why.
    wait_for("the status page's silence", || {
        http(live.port, "GET", "/api/status", Some("tok-1")).is_some_and(|(_, b)| {
            b.contains("disk swap on n1") && b.contains("\"created_by\":\"ana\"")
        })
    });
    // Ending it sends the page of the alert that still fires.
    let exp = live.cli(d, &["expire", "s-1"]);
    assert!(
        exp.status.success(),
        "{}",
        String::from_utf8_lossy(&exp.stderr)
    );
    wait_for("n1's page after the silence", || live.fired("n1"));
    // Another one, then a restart: both are still there.
    let add = live.cli(
        d,
        &[
            "add",
            "--match",
            "group=n3",
            "--for",
            "2h",
            "--comment",
            "n3 drained",
        ],
    );
    assert!(add.status.success());
    let _ = Command::new("kill")
        .args(["-TERM", &live.child.0.id().to_string()])
        .status();
    let _ = live.child.0.wait();
    let live = start(d);
    let list = live.cli(d, &["list", "--json"]);
    assert!(list.status.success());
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let states: Vec<(&str, &str)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), s["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [("s-2", "active"), ("s-1", "expired")]);
    // Unknown ids are a clear error.
    let missing = live.cli(d, &["expire", "s-9"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("404"));
}

/// A live instance started from a baseline, with novelty quick to page.
fn start_novelty(dir: &std::path::Path, state: &str) -> Live {
    let (rules, base) = (dir.join("novelty.yaml"), dir.join("baseline.json"));
    launch(
        dir,
        &[
            "--rules".as_ref(),
            rules.as_os_str(),
            "--templates".as_ref(),
            base.as_os_str(),
        ],
        state,
    )
}

impl Live {
    fn error(&mut self, msg: &str) {
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let stdin = self.child.0.stdin.as_mut().unwrap();
        writeln!(
            stdin,
            "{{\"level\":\"error\",\"ts\":{ts:.3},\"msg\":\"{msg}\",\"node\":\"n1\"}}"
        )
        .unwrap();
        stdin.flush().unwrap();
    }

    /// The group (template-N) of the novelty page for `template`, if any.
    fn novel(&self, template: &str) -> Option<String> {
        self.out
            .lock()
            .unwrap()
            .iter()
            .find(|n| n["rule"] == "novel" && n["template"] == template)
            .map(|n| n["group"].as_str().unwrap().to_string())
    }
}

#[test]
fn a_template_marked_known_never_pages_again_and_joins_the_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("token"), "tok-1\n").unwrap();
    std::fs::write(
        d.join("novelty.yaml"),
        "novelty:\n  min_count: 2\n  for: 0s\n  learn_lines: 0\nrules: []\n",
    )
    .unwrap();
    std::fs::write(
        d.join("base.log"),
        "{\"level\":\"error\",\"ts\":1764000000.1,\"msg\":\"cache refresh failed\",\"node\":\"n1\"}\n",
    )
    .unwrap();
    let learn = Command::new(BIN)
        .args(["learn", "--no-builtin-rules", "--rules"])
        .arg(d.join("novelty.yaml"))
        .arg(d.join("base.log"))
        .arg("--out")
        .arg(d.join("baseline.json"))
        .output()
        .unwrap();
    assert!(
        learn.status.success(),
        "{}",
        String::from_utf8_lossy(&learn.stderr)
    );
    let mut live = start_novelty(d, "state-a");
    // A deploy's new line pages as new.
    for i in 0..3 {
        live.error(&format!("feature flag {i} evaluated late"));
    }
    wait_for("the novelty page", || {
        live.novel("feature flag <*> evaluated late").is_some()
    });
    let group = live.novel("feature flag <*> evaluated late").unwrap();
    // The person on call says it is known.
    let known = Command::new(BIN)
        .args(["templates", "--known", &group])
        .args(["--url", &format!("http://127.0.0.1:{}", live.port)])
        .arg("--token-file")
        .arg(d.join("token"))
        .output()
        .unwrap();
    assert!(
        known.status.success(),
        "{}",
        String::from_utf8_lossy(&known.stderr)
    );
    assert!(
        String::from_utf8_lossy(&known.stdout).contains("known\tfeature flag <*> evaluated late")
    );
    // Without the credential it is refused; an unknown id is a 404.
    assert_eq!(
        http(
            live.port,
            "POST",
            &format!("/api/templates/{group}/known"),
            None
        )
        .unwrap()
        .0,
        401
    );
    assert_eq!(
        http(
            live.port,
            "POST",
            "/api/templates/999999/known",
            Some("tok-1")
        )
        .unwrap()
        .0,
        404
    );
    // In the baseline file now.
    let base = std::fs::read_to_string(d.join("baseline.json")).unwrap();
    assert!(base.contains("feature flag <*> evaluated late"), "{base}");
    drop(live);
    // A fresh instance from that baseline: the known line is not new, an
    // unknown one still is.
    let mut live = start_novelty(d, "state-b");
    for i in 0..3 {
        live.error(&format!("feature flag {i} evaluated late"));
    }
    for i in 0..3 {
        live.error(&format!("disk quota exceeded on volume {i}"));
    }
    wait_for("the other novelty page", || {
        live.novel("disk quota exceeded on volume <*>").is_some()
    });
    assert_eq!(live.novel("feature flag <*> evaluated late"), None);
}
