//! The binary end to end: `check`, `replay` to stdout, `run` from a pipe,
//! and `--webhook` against a real HTTP server on 127.0.0.1 that fails before
//! it accepts.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_sigwatch");

fn fixture(name: &str) -> String {
    format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn check_builtin_pack_passes() {
    let out = Command::new(BIN).arg("check").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("livekit.drain_stuck") && s.contains("all examples pass"),
        "{s}"
    );
}

#[test]
fn check_reports_file_line_column_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.yaml");
    std::fs::write(&p, "rules:\n  - id: x\n    title: t\n    severity: loud\n    match: {contains: a}\n    detect: {count: {window: 1m}}\n").unwrap();
    let out = Command::new(BIN)
        .args(["check", "--rules"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml:4:"), "{err}");
    // A failing inline example is also an error.
    std::fs::write(&p, "rules:\n  - id: x\n    title: t\n    severity: info\n    match: {contains: alpha}\n    detect: {count: {window: 1m}}\n    examples: {match: [beta]}\n").unwrap();
    let out = Command::new(BIN)
        .args(["check", "--rules"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("should match but does not"));
}

#[test]
fn replay_prints_the_documented_schema() {
    let out = Command::new(BIN)
        .args(["replay", "--log-level", "warn"])
        .arg(fixture("egress-black-hole.log"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for n in &lines {
        for key in [
            "state",
            "rule",
            "title",
            "severity",
            "group",
            "labels",
            "annotations",
            "starts_at",
            "ends_at",
            "count",
            "first_seen",
            "last_seen",
            "top_groups",
            "samples",
            "fingerprint",
        ] {
            assert!(n.get(key).is_some(), "missing {key} in {n}");
        }
        assert_eq!(n["labels"]["alertname"], n["rule"]);
    }
}

#[test]
fn run_from_a_pipe_matches_replay() {
    let mut child = Command::new(BIN)
        .args(["run", "--listen", "none", "--log-level", "warn"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let data = std::fs::read(fixture("k8s-liveness-cascade.log")).unwrap();
    child.stdin.take().unwrap().write_all(&data).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert_eq!(s.lines().count(), 1, "{s}");
    assert!(
        s.contains("\"k8s.liveness_spread\"") && s.contains("\"group\":\"api\""),
        "{s}"
    );
}

#[test]
fn run_resolves_on_idle_wall_clock_ticks() {
    // A one-match rule with a 1 s window: after input stops (stdin stays
    // open), the wall clock alone must resolve the alert.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.yaml");
    std::fs::write(&p, "rules:\n  - id: t.one\n    title: one\n    severity: info\n    match: {contains: BOOM}\n    detect: {count: {window: 1s}}\n    resolve_after: 1s\n").unwrap();
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--listen",
            "none",
            "--log-level",
            "warn",
            "--lateness",
            "0s",
            "--rules",
        ])
        .arg(&p)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"{\"msg\":\"BOOM\"}\n").unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_secs(5));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let states: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["state"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(states, vec!["firing", "resolved"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_retries_5xx_then_delivers_each_notification_once() {
    let received = Arc::new(Mutex::new(Vec::<serde_json::Value>::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let (r, c) = (received.clone(), calls.clone());
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: axum::Json<serde_json::Value>| {
            let (r, c) = (r.clone(), c.clone());
            async move {
                // The first two calls fail with 503: the sender must retry.
                if c.fetch_add(1, Ordering::SeqCst) < 2 {
                    return axum::http::StatusCode::SERVICE_UNAVAILABLE;
                }
                r.lock().unwrap().push(body.0);
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let url = format!("http://{addr}/hook");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(BIN)
            .args([
                "replay",
                "--log-level",
                "warn",
                "--no-stdout",
                "--webhook",
                &url,
            ])
            .arg(fixture("egress-black-hole.log"))
            .output(),
    )
    .await
    .expect("replay finished in time")
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = received.lock().unwrap().clone();
    let mut rules: Vec<String> = got
        .iter()
        .map(|n| n["rule"].as_str().unwrap().to_string())
        .collect();
    rules.sort();
    assert_eq!(rules, vec!["egress.black_hole", "egress.disk_full"]);
    assert_eq!(calls.load(Ordering::SeqCst), 4, "2 failures + 2 deliveries");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_4xx_is_not_retried_and_the_run_still_ends() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let c = c.clone();
            async move {
                c.fetch_add(1, Ordering::SeqCst);
                axum::http::StatusCode::BAD_REQUEST
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(BIN)
            .args([
                "replay",
                "--no-stdout",
                "--webhook",
                &format!("http://{addr}/hook"),
            ])
            .arg(fixture("grpc-slow-auth.log"))
            .output(),
    )
    .await
    .expect("replay finished in time")
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "the replay ends, saying a notification was not delivered"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1, "a 400 is final");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("HTTP 400") && err.contains("not delivered"),
        "{err}"
    );
}

#[test]
fn replay_merges_per_pod_files_by_event_time() {
    // Split the outage into one file per pod (as /var/log/pods has it, in
    // CRI format, its path naming namespace, pod and container): the
    // result must equal the single-stream replay.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("livekit-redis-outage.log")).unwrap();
    let mut files: std::collections::BTreeMap<String, String> = Default::default();
    for l in text.lines() {
        let rest = l.strip_prefix("[pod/").unwrap();
        let (inner, body) = rest.split_once("] ").unwrap();
        let pod = inner.split('/').next().unwrap().to_string();
        let e = files.entry(pod).or_default();
        e.push_str(&format!("2025-07-01T12:00:00.000000000Z stderr F {body}\n"));
    }
    let mut args = vec!["replay".to_string(), "--log-level".into(), "warn".into()];
    // Largest file first, to show that order on the command line does not matter.
    let mut paths: Vec<(usize, String)> = files
        .iter()
        .map(|(pod, body)| {
            let d = dir
                .path()
                .join("pods")
                .join(format!("livekit_{pod}_5e7b1fd3-6c1d-4f55"))
                .join("livekit-server");
            std::fs::create_dir_all(&d).unwrap();
            let p = d.join("0.log");
            std::fs::write(&p, body).unwrap();
            (body.len(), p.display().to_string())
        })
        .collect();
    paths.sort_by_key(|p| std::cmp::Reverse(p.0));
    args.extend(paths.into_iter().map(|(_, p)| p));
    let out = Command::new(BIN).args(&args).output().unwrap();
    assert!(out.status.success());
    let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            format!(
                "{} {} {}",
                v["state"].as_str().unwrap(),
                v["rule"].as_str().unwrap(),
                v["group"].as_str().unwrap()
            )
        })
        .collect();
    got.sort();
    got.dedup();
    let want: Vec<String> = std::fs::read_to_string(fixture("livekit-redis-outage.expected"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(got, want);
}

#[test]
fn run_follows_kubelet_log_files_and_resumes_from_offsets_after_kill_9() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let logdir = dir
        .path()
        .join("pods/livekit_livekit-server-0_5e7b1fd3/livekit-server");
    std::fs::create_dir_all(&logdir).unwrap();
    // The CRI-wrapped deadlock fixture, as containerd writes it.
    std::fs::copy(fixture("livekit-deadlock-cri.log"), logdir.join("0.log")).unwrap();
    let state = dir.path().join("state");
    let glob = format!("{}/pods/*/*/*.log", dir.path().display());
    let spawn = || {
        Command::new(BIN)
            .args([
                "run",
                "--listen",
                "none",
                "--log-level",
                "warn",
                "--file",
                &glob,
                "--state-dir",
            ])
            .arg(&state)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut child = spawn();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(15))
        .expect("an alert from the file");
    assert!(first.contains("livekit.stats_deadlock"), "{first}");
    // Kill once the offsets are saved and the stdout lane has taken the
    // printed alert out of its spool: a kill between printing and that
    // write would rightly deliver it again (the spool is at-least-once).
    let spool = state.join("spool").join("stdout.json");
    let spool_empty = || {
        std::fs::read_to_string(&spool)
            .ok()
            .and_then(|t| serde_json::from_str::<Vec<serde_json::Value>>(&t).ok())
            .is_some_and(|v| v.is_empty())
    };
    for _ in 0..100 {
        if state.join("file-offsets.json").exists() && spool_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    let _ = child.wait();
    // Restart: the offsets say everything was read; nothing is notified again.
    let mut child = spawn();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let again = rx.recv_timeout(Duration::from_millis(2000));
    assert!(again.is_err(), "nothing re-read after restart: {again:?}");
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn a_bad_config_file_is_a_located_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("sigwatch.yaml");
    std::fs::write(
        &p,
        "loki:\n  url: http://127.0.0.1:9\n  queries: ['{a=\"b\"}']\n  pasword_file: /x\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["run", "--listen", "none", "--config"])
        .arg(&p)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("sigwatch.yaml:4:") && err.contains("pasword_file"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_in_the_config_pick_receivers() {
    let got: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let g = got.clone();
    let app = axum::Router::new().route(
        "/{name}",
        axum::routing::post(
            move |axum::extract::Path(name): axum::extract::Path<String>,
                  body: axum::Json<serde_json::Value>| {
                let g = g.clone();
                async move {
                    let sev = body["severity"].as_str().unwrap_or_default();
                    let state = body["state"].as_str().unwrap_or_default();
                    g.lock().unwrap().push((name, format!("{sev} {state}")));
                    axum::http::StatusCode::OK
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("sigwatch.yaml");
    std::fs::write(
        &cfg,
        format!(
            "receivers:\n  - name: pager\n    webhook: {{url: 'http://{addr}/pager'}}\n  - name: chat\n    webhook: {{url: 'http://{addr}/chat'}}\nroutes:\n  - match: {{severity: critical}}\n    receivers: [pager]\ndefault: [chat]\n"
        ),
    )
    .unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(BIN)
            .args([
                "replay",
                "--log-level",
                "warn",
                "--no-stdout",
                "--config-receivers",
                "--config",
            ])
            .arg(&cfg)
            .arg(fixture("grpc-slow-auth.log"))
            .arg(fixture("livekit-deadlock-cri.log"))
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut got = got.lock().unwrap().clone();
    got.sort();
    // Merged by time, the deadlock lies a day after the gRPC incident, so
    // the gRPC alert also resolves; both of its notifications go to chat.
    let want = [
        ("chat", "warning firing"),
        ("chat", "warning resolved"),
        ("pager", "critical firing"),
    ];
    assert_eq!(
        got,
        want.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    );
}

#[test]
fn replay_ends_with_a_plain_summary_when_not_on_a_terminal() {
    let out = Command::new(BIN)
        .args(["replay", "--log-level", "warn"])
        .arg(fixture("livekit-redis-outage.log"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains('\x1b'),
        "no escape codes off a terminal: {err:?}"
    );
    assert!(
        !err.contains("ETA"),
        "no progress bar off a terminal: {err}"
    );
    let lines =
        String::from_utf8_lossy(&std::fs::read(fixture("livekit-redis-outage.log")).unwrap())
            .lines()
            .count();
    assert!(
        err.contains(&format!("replayed   {} lines", {
            // HumanCount's thousands separator
            let s = lines.to_string();
            let mut o = String::new();
            for (i, c) in s.chars().enumerate() {
                if i > 0 && (s.len() - i).is_multiple_of(3) {
                    o.push(',');
                }
                o.push(c);
            }
            o
        })),
        "{err}"
    );
    assert!(err.contains("time span  2025-"), "{err}");
    assert!(err.contains("formats    prefixed"), "{err}");
    // Six nodes failed to drain: six matches, six alerts, none resolved yet
    // (the 15 m window outlasts the log).
    let row = err
        .lines()
        .find(|l| l.starts_with("livekit.drain_failed "))
        .unwrap_or_else(|| panic!("{err}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols, vec!["livekit.drain_failed", "6", "6", "0"], "{row}");
    // What is still wrong at the end, and no row for rules that saw nothing.
    assert!(
        err.contains("firing     12 alert(s) at the end")
            && err.contains("incidents  1 opened · 0 resolved · 1 open at the end")
            && err.contains("6 nodes still affected"),
        "{err}"
    );
    assert!(
        !err.contains("egress.black_hole ") && err.contains("other rule(s) matched nothing"),
        "{err}"
    );
    let quiet = Command::new(BIN)
        .args(["replay", "--log-level", "warn", "--no-summary"])
        .arg(fixture("livekit-redis-outage.log"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&quiet.stderr).trim().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_pages_nobody_its_command_line_does_not_name() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let app = axum::Router::new().fallback(move || {
        let c = c.clone();
        async move {
            c.fetch_add(1, Ordering::SeqCst);
            axum::http::StatusCode::ACCEPTED
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    // A pager everywhere a live run would look: the environment and the
    // configuration file.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("sigwatch.yaml");
    std::fs::write(
        &cfg,
        format!("receivers:\n  - name: audit\n    webhook: {{url: 'http://{addr}/audit'}}\ndefault: [audit]\n"),
    )
    .unwrap();
    let replay = |extra: &[&str]| {
        let mut c = tokio::process::Command::new(BIN);
        c.args(["replay", "--log-level", "info", "--no-summary", "--config"])
            .arg(&cfg)
            .args(["--pagerduty-url", &format!("http://{addr}/v2/enqueue")])
            .args(extra)
            .arg(fixture("egress-black-hole.log"))
            .env("SIGWATCH_WEBHOOK_URL", format!("http://{addr}/hook"))
            .env(
                "SIGWATCH_PAGERDUTY_ROUTING_KEY",
                "0123456789abcdef0123456789abcdef",
            )
            .env("SIGWATCH_SLACK_WEBHOOK_URL", format!("http://{addr}/slack"));
        c
    };
    let out = tokio::time::timeout(Duration::from_secs(60), replay(&[]).output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        2,
        "the notifications are on stdout"
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "nobody was paged: {stderr}"
    );
    assert!(
        stderr.contains("Replay notifies only the receivers on its command line")
            && stderr.contains("receivers=stdout"),
        "which receivers are active is said: {stderr}"
    );
    // Named on the command line, a receiver does get the replay.
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        replay(&["--webhook", &format!("http://{addr}/named")]).output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(out.status.success());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the named webhook got both"
    );
}

#[test]
fn a_dead_webhook_makes_the_replay_exit_3_and_a_closed_stdout_stops_it_quietly() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let out = Command::new(BIN)
        .args([
            "replay",
            "--no-stdout",
            "--no-summary",
            "--shutdown-timeout",
            "1s",
        ])
        .args(["--webhook", &format!("http://127.0.0.1:{port}/hook")])
        .arg(fixture("egress-black-hole.log"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("2 notification(s) were not delivered"),
        "{err}"
    );
    // `replay … | head -1`: the reader goes away; no error per line.
    let mut child = Command::new(BIN)
        .args(["replay", "--no-summary"])
        .arg(fixture("livekit-redis-outage.log"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(first.contains("livekit.redis_unreachable"), "{first}");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("ERROR"), "{err}");
    // (Said once — or not at all when every line fit in the pipe before
    // the reader left.)
    assert!(
        err.matches("The receiver closed").count() <= 1,
        "said once: {err}"
    );
}

#[test]
fn a_loki_url_without_its_scheme_is_a_setup_error() {
    let out = Command::new(BIN)
        .args([
            "run",
            "--listen",
            "none",
            "--loki",
            "loki:3100",
            "--query",
            "{a=\"b\"}",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "not retried forever: {err}");
    assert!(err.contains("needs http:// or https://"), "{err}");
}

#[test]
fn completions_and_man_pages_are_generated() {
    for (shell, marker) in [
        ("bash", "_sigwatch()"),
        ("zsh", "#compdef sigwatch"),
        ("fish", "complete -c sigwatch"),
    ] {
        let out = Command::new(BIN)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(marker), "{shell}: {text:.200}");
        assert!(
            text.contains("replay") && text.contains("--state-dir"),
            "{shell}"
        );
    }
    let out = Command::new(BIN).arg("man").output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        page.contains(".TH sigwatch 1") && page.contains("replay"),
        "{page:.300}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["man", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let run = std::fs::read_to_string(dir.path().join("sigwatch-run.1")).unwrap();
    assert!(run.contains("checkpoint\\-interval"), "{run:.300}");
}

/// Runs `sh -c SCRIPT` on a pseudo-terminal (Python's `pty`), returning
/// what it printed there.
fn on_a_terminal(script: &str, no_color: bool) -> String {
    let mut cmd = Command::new("python3");
    cmd.args([
        "-c",
        "import pty, sys; pty.spawn(['sh', '-c', sys.argv[1]])",
        script,
    ]);
    cmd.env_remove("NO_COLOR");
    if no_color {
        cmd.env("NO_COLOR", "1");
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n")
}

#[test]
fn a_terminal_gets_one_readable_line_per_notification_and_a_pipe_json() {
    let replay = format!(
        "exec {BIN} replay --no-summary --log-level error {} 2>/dev/null",
        fixture("egress-black-hole.log")
    );
    let text = on_a_terminal(&replay, false);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        !text.contains("{\"state\""),
        "no JSON on a terminal: {text}"
    );
    assert!(
        lines[0].contains("FIRING") && lines[0].contains("egress.disk_full"),
        "{text}"
    );
    assert!(text.contains("\x1b[31m"), "coloured: {text:?}");
    let plain = on_a_terminal(&replay, true);
    assert!(!plain.contains('\x1b'), "NO_COLOR: {plain:?}");
    assert!(plain.contains("FIRING"), "{plain}");
    // Asked for, JSON on a terminal too; a pipe gets JSON by default.
    let json = on_a_terminal(&replay.replace(" replay ", " replay --output json "), false);
    assert_eq!(
        json.lines().filter(|l| l.starts_with("{\"state\"")).count(),
        2,
        "{json}"
    );
    let out = Command::new(BIN)
        .args(["replay", "--no-summary", "--log-level", "error"])
        .arg(fixture("egress-black-hole.log"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("{\"state\""));
}

#[test]
fn run_help_is_grouped_and_names_each_variable_once() {
    let out = Command::new(BIN).args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for heading in [
        "Rules:",
        "Receivers:",
        "Loki:",
        "State:",
        "Server:",
        "Delivery:",
    ] {
        assert!(help.lines().any(|l| l == heading), "{heading} in {help}");
    }
    for var in [
        "SIGWATCH_LOKI_URL",
        "SIGWATCH_LOKI_TENANT",
        "SIGWATCH_CONFIG",
    ] {
        assert_eq!(help.matches(var).count(), 1, "{var} once in {help}");
    }
}

#[test]
fn rule_tests_are_coloured_on_a_terminal_only() {
    let script = format!(
        "exec {BIN} test {}/rules/tests/ 2>/dev/null",
        env!("CARGO_MANIFEST_DIR")
    );
    let tty = on_a_terminal(&script, false);
    assert!(tty.contains("\x1b[32mok\x1b[0m"), "{tty:?}");
    assert!(
        tty.contains("\x1b[32m") && tty.contains(" passed"),
        "{tty:?}"
    );
    let plain = on_a_terminal(&script, true);
    assert!(
        !plain.contains('\x1b') && plain.contains("  ok    "),
        "{plain:?}"
    );
    let out = Command::new(BIN)
        .arg("test")
        .arg(format!("{}/rules/tests/", env!("CARGO_MANIFEST_DIR")))
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains('\x1b'));
}

#[test]
fn a_replay_whose_inputs_do_not_overlap_in_time_says_why_lines_were_late() {
    // August first, then July, through one pipe: July's lines are all late.
    let mut child = Command::new(BIN)
        .args(["replay", "--log-level", "warn", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for f in ["control-day.log", "livekit-redis-outage.log"] {
        stdin
            .write_all(&std::fs::read(fixture(f)).unwrap())
            .unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("came more than --lateness behind the newest time")
            && err.contains("replay them one at a time"),
        "{err}"
    );
}

const OWN_RULE: &str = r#"rules:
  - id: acme.oom
    title: Acme worker out of memory
    severity: critical
    match: {contains: "acme: out of memory"}
    group_by: node
    detect: {count: {window: 1m, threshold: 1}}
    examples:
      match: ['{"level":"error","msg":"acme: out of memory","nodeID":"N_1"}']
      no_match: ['{"level":"info","msg":"acme: memory fine"}']
"#;

fn sigwatch(args: &[&str], dir: &std::path::Path) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn own_rules_are_added_to_the_built_in_pack_unless_it_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("own.yaml"), OWN_RULE).unwrap();
    let (code, out, err) = sigwatch(&["check", "--rules", "own.yaml"], dir.path());
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("acme.oom") && out.contains("livekit.drain_stuck"),
        "{out}"
    );
    let (code, out, err) = sigwatch(
        &["check", "--rules", "own.yaml", "--no-builtin-rules"],
        dir.path(),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("acme.oom") && !out.contains("livekit."),
        "{out}"
    );

    // A rule of one's own with a pack rule's id replaces it, and replay
    // uses the pack plus the own rule.
    let replaced = OWN_RULE.replace("acme.oom", "egress.disk_full");
    std::fs::write(dir.path().join("replace.yaml"), replaced).unwrap();
    let (code, out, err) = sigwatch(&["check", "--rules", "replace.yaml"], dir.path());
    assert_eq!(code, Some(0), "{err}");
    let line = out
        .lines()
        .find(|l| l.contains("egress.disk_full"))
        .unwrap();
    assert!(line.contains("replace.yaml"), "{out}");
    assert_eq!(out.matches("egress.disk_full").count(), 1, "{out}");

    let log = dir.path().join("in.log");
    std::fs::write(
        &log,
        "{\"level\":\"error\",\"ts\":1714572000.0,\"msg\":\"acme: out of memory\",\"nodeID\":\"N_7\"}\n",
    )
    .unwrap();
    let (code, out, err) = sigwatch(
        &[
            "replay", "--rules", "own.yaml", "in.log", "--output", "json",
        ],
        dir.path(),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("\"acme.oom\"") && out.contains("N_7"),
        "{out}{err}"
    );
}

#[test]
fn a_config_file_names_rule_files_relative_to_itself() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("r")).unwrap();
    std::fs::write(dir.path().join("r/own.yaml"), OWN_RULE).unwrap();
    std::fs::write(
        dir.path().join("sigwatch.yaml"),
        "rules:\n  files: [r/own.yaml]\n  builtin: false\n",
    )
    .unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let config = dir.path().join("sigwatch.yaml");
    let config = config.to_str().unwrap();
    let (code, out, err) = sigwatch(&["check", "--config", config], elsewhere.path());
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("ok   config") && out.contains("acme.oom") && !out.contains("livekit."),
        "{out}"
    );
    // The same layers in a rule test run.
    std::fs::create_dir(dir.path().join("t")).unwrap();
    std::fs::write(
        dir.path().join("t/own.yaml"),
        "tests:\n  - name: one oom pages\n    start: 2024-05-01T13:00:00Z\n    input:\n      - {at: +0s, stream: w, line: '{\"level\":\"error\",\"ts\":{{ts}},\"msg\":\"acme: out of memory\",\"nodeID\":\"N_3\"}'}\n    expect:\n      - {rule: acme.oom, group: N_3, at: +0s}\n",
    )
    .unwrap();
    let tests = dir.path().join("t");
    let (code, out, err) = sigwatch(
        &["test", "--config", config, tests.to_str().unwrap()],
        elsewhere.path(),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("1 passed"), "{out}");
}

#[test]
fn check_config_names_the_receiver_that_cannot_be_built() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("sigwatch.yaml");
    std::fs::write(
        &p,
        "receivers:\n  - name: hook\n    webhook: {url: \"http://127.0.0.1:9/x\"}\n  - name: chat\n    slack: {webhook_url: {file: missing-secret}}\ndefault: [hook]\n",
    )
    .unwrap();
    let (code, _, err) = sigwatch(&["check", "--config", "sigwatch.yaml"], dir.path());
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("sigwatch.yaml") && err.contains("chat") && err.contains("missing-secret"),
        "{err}"
    );
    std::fs::write(
        &p,
        "receivers:\n  - name: hook\n    webhook: {url: \"http://127.0.0.1:9/x\"}\ndefault: [hook]\n",
    )
    .unwrap();
    let (code, out, err) = sigwatch(&["check", "--config", "sigwatch.yaml"], dir.path());
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("hook (webhook "), "{out}");
    let (code, _, err) = sigwatch(&["check", "--config", "absent.yaml"], dir.path());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("absent.yaml"), "{err}");
}

#[test]
fn check_config_validates_the_web_settings_and_hash_password_makes_a_hash() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["hash-password", "--cost", "4"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"pw of alice\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let hash = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(bcrypt::verify("pw of alice", &hash).unwrap(), "{hash}");
    std::fs::write(dir.path().join("tokens"), "tok\n").unwrap();
    let p = dir.path().join("sigwatch.yaml");
    let write = |web: &str| std::fs::write(&p, format!("web:\n{web}")).unwrap();
    write(&format!(
        "  token_files: [tokens]\n  basic_auth_users:\n    alice: '{hash}'\n"
    ));
    let (code, out, err) = sigwatch(&["check", "--config", "sigwatch.yaml"], dir.path());
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("web 1 token file(s), 1 user(s)"), "{out}");
    // Each mistake is named.
    for (web, names) in [
        ("  basic_auth_users:\n    bob: 'hunter2'\n", "bob"),
        ("  token_files: [missing-tokens]\n", "missing-tokens"),
        ("  tls_cert_file: tls.crt\n", "--web-tls-key"),
        (
            "  tls_cert_file: none.crt\n  tls_key_file: none.key\n",
            "none.crt",
        ),
        ("  token_file: [tokens]\n", "token_file"),
    ] {
        write(web);
        let (code, out, err) = sigwatch(&["check", "--config", "sigwatch.yaml"], dir.path());
        assert_ne!(code, Some(0), "{web}: {out}");
        assert!(err.contains(names), "{web}: {err}");
    }
}

#[test]
fn check_config_validates_the_ingest_listeners() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tokens"), "push-tok\n").unwrap();
    let p = dir.path().join("sigwatch.yaml");
    let write = |ingest: &str| std::fs::write(&p, format!("ingest:\n{ingest}")).unwrap();
    write("  listen: 0.0.0.0:3101\n  syslog: 0.0.0.0:5514\n  token_files: [tokens]\n");
    let (code, out, err) = sigwatch(&["check", "--config", "sigwatch.yaml"], dir.path());
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("ingest 0.0.0.0:3101 (1 token file(s), 0 user(s))"),
        "{out}"
    );
    for (ingest, names) in [
        ("  listen: 3101\n", "ingest.listen"),
        ("  syslog: host\n", "ingest.syslog"),
        (
            "  listen: 0.0.0.0:3101\n  token_files: [absent]\n",
            "absent",
        ),
        (
            "  listen: 0.0.0.0:3101\n  basic_auth_users: {fluentbit: plain}\n",
            "fluentbit",
        ),
        (
            "  listen: 0.0.0.0:3101\n  tls_key_file: k.pem\n",
            "--ingest-tls-cert",
        ),
        ("  listen: 0.0.0.0:3101\n  port: 1\n", "port"),
    ] {
        write(ingest);
        let (code, out, err) = sigwatch(&["check", "--config", "sigwatch.yaml"], dir.path());
        assert_ne!(code, Some(0), "{ingest}: {out}");
        assert!(err.contains(names), "{ingest}: {err}");
    }
}

/// Five mistakes in one rule file are five located errors in one run:
/// each rule that does not parse says where, and the rules that do are
/// still checked (a bad template variable, a regex that does not compile).
#[test]
fn check_reports_every_error_of_every_file_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.yaml");
    std::fs::write(
        &a,
        r#"rules:
  - id: a.one
    title: One
    severity: loud
    match: {contains: [x]}
    detect: {count: {threshold: 2, window: 1m}}
  - id: a.two
    title: Two
    severity: warning
    match: {contains: [y]}
    detect: {count: {threshold: 2, window: 1m}}
    annotations: {summary: "{{ nope }}"}
  - id: a.three
    title: Three
    severity: info
    match: {contans: [z]}
    detect: {count: {threshold: 2, window: 1m}}
"#,
    )
    .unwrap();
    let b = dir.path().join("b.yaml");
    std::fs::write(
        &b,
        r#"rules:
  - id: b.four
    title: Four
    severity: info
    match: {contains: [w]}
    detect: {count: {threshold: 2, windw: 1m}}
  - id: b.five
    title: Five
    severity: info
    match: {regex: "(unclosed"}
    detect: {count: {threshold: 2, window: 1m}}
"#,
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["check", "--no-builtin-rules", "--rules"])
        .arg(&a)
        .arg("--rules")
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    for (at, what) in [
        ("a.yaml:4:15:", "rules[0].severity: unknown variant `loud`"),
        ("a.yaml:12:", "unknown template variable \"nope\""),
        ("a.yaml:16:13:", "rules[2].match: unknown field `contans`"),
        ("b.yaml:6:", "rules[0].detect.count: unknown field `windw`"),
        ("b.yaml:10:", "invalid regex"),
    ] {
        assert!(
            err.lines().any(|l| l.contains(at) && l.contains(what)),
            "{at} {what}:\n{err}"
        );
    }
}

/// The README's exit statuses: a rule file or a test path that is not
/// there is a setup error (2), not a finding (1) or a failed test.
#[test]
fn a_missing_rule_file_or_test_path_exits_2() {
    for args in [
        &["check", "--rules", "/nonexistent/rules.yaml"][..],
        &["test", "/nonexistent/tests"][..],
        &["replay", "--rules", "/nonexistent/rules.yaml", "/dev/null"][..],
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("/nonexistent/"), "{args:?}: {err}");
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("failed"),
            "{args:?}"
        );
    }
}

/// `run --file` on a path whose directory does not exist stops at once
/// with the reason; on a file not written yet it says it waits for it.
#[test]
fn run_file_says_at_once_what_it_does_with_a_missing_path() {
    let mut child = Command::new(BIN)
        .args(["run", "--file", "/nonexistent/dir/x.log"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: a run that waits for the file instead fails here.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.and_then(|s| s.code()), Some(2), "{err}");
    assert!(
        err.contains("the directory /nonexistent/dir does not exist"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let later = dir.path().join("later.log");
    let mut child = Command::new(BIN)
        .args(["run", "--log-format", "json", "--file"])
        .arg(&later)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    let mut said = false;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while let Ok(l) = rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
    {
        if l.contains("waits for it") && l.contains("later.log") {
            said = true;
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(said, "run did not say it waits for the file");
}

/// The README's quick start, run as written in an empty home with the
/// binary where `cargo install` puts it: every command works (the build
/// and the CI script aside, which CI itself is).
#[test]
fn the_readme_quick_start_runs_as_written_in_an_empty_home() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let start = readme.find("## Quick start").unwrap();
    let block = &readme[start..];
    let open = block.find("```sh\n").unwrap() + "```sh\n".len();
    let close = open + block[open..].find("```").unwrap();
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join(".cargo/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(BIN, bin.join("sigwatch")).unwrap();
    let has_man = Command::new("sh")
        .args(["-c", "command -v man"])
        .output()
        .is_ok_and(|o| o.status.success());
    let mut ran = 0;
    for line in block[open..close].lines() {
        let cmd = line.split("  #").next().unwrap_or("").trim();
        if cmd.is_empty() || cmd.starts_with('#') {
            continue;
        }
        if cmd.starts_with("cargo install") || cmd.starts_with("bash .ci/run") {
            continue;
        }
        // Without man on this machine, the page must be where man looks.
        let script = if has_man {
            cmd.to_string()
        } else {
            format!("man() {{ test -s \"$HOME/.cargo/share/man/man1/$1.1\"; }}; {cmd}")
        };
        let out = Command::new("bash")
            .args(["-c", &script])
            .current_dir(root)
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("MANPAGER", "cat")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{cmd}: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    assert!(ran >= 6, "only {ran} commands in the quick start");
}
