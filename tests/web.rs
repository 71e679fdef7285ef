//! The guarded HTTP surface: without a valid credential no guarded path
//! (`/`, `/api/status`, `/report`, anything unknown) answers with a log
//! line or a group name; the probes and the scrape stay open; failures are
//! rate-limited per client without starving `/healthz`; a non-loopback
//! listener without credentials refuses to start; `--listen-metrics`
//! serves the open endpoints only.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;
use common::{free_port, test_ca, tls_client, write_leaf, Killed, BIN};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 request from the source address `from` (any of 127/8),
/// with extra header lines: (status, head, body). None when the server
/// did not answer within 10 s.
async fn request(
    port: u16,
    from: IpAddr,
    method: &str,
    path: &str,
    headers: &[String],
) -> Option<(u16, String, String)> {
    let sock = tokio::net::TcpSocket::new_v4().ok()?;
    sock.bind(SocketAddr::new(from, 0)).ok()?;
    let fut = async {
        let mut s = sock
            .connect(SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .ok()?;
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: 0\r\n");
        for h in headers {
            req.push_str(h);
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let status = text.split(' ').nth(1)?.parse().ok()?;
        let (head, body) = text.split_once("\r\n\r\n")?;
        Some((status, head.to_string(), body.to_string()))
    };
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .ok()
        .flatten()
}

fn ip(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    format!(
        "Authorization: Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}")
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// A live `run` over the black-hole fixture with two tokens (one in a
/// file, one in the environment) and a basic-auth user in the
/// configuration, serving on `port`; stdin stays open so it keeps serving.
struct Guarded {
    _child: Killed,
    _stdin: std::process::ChildStdin,
    _dir: tempfile::TempDir,
}

fn guarded_run(port: u16) -> Guarded {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tokens"),
        "# rotate monthly\ntok-old-1\ntok-new-2\n",
    )
    .unwrap();
    let hash = bcrypt::hash("correct horse", 4).unwrap();
    std::fs::write(
        dir.path().join("sigwatch.yaml"),
        format!("web:\n  token_files: [tokens]\n  basic_auth_users:\n    alice: '{hash}'\n"),
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .args(["run", "--log-level", "error", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config")
        .arg(dir.path().join("sigwatch.yaml"))
        .env("SIGWATCH_WEB_TOKEN", "tok-env-3")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&fixture("egress-black-hole.log")).unwrap();
    stdin.flush().unwrap();
    Guarded {
        _child: Killed(child),
        _stdin: stdin,
        _dir: dir,
    }
}

/// Waits (bounded) until `/api/status` with `auth` shows a firing alert.
async fn wait_firing(port: u16, auth: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "no firing alert within 60 s");
        if let Some((200, _, body)) =
            request(port, ip(1), "GET", "/api/status", &[auth.to_string()]).await
        {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            if v["firing"].as_array().is_some_and(|a| !a.is_empty()) {
                return v;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_guarded_path_needs_a_valid_credential_and_the_probes_do_not() {
    let port = free_port();
    let _run = guarded_run(port);
    let status = wait_firing(port, &bearer("tok-new-2")).await;
    let group = status["firing"][0]["group"].as_str().unwrap().to_string();
    assert!(!group.is_empty(), "{status}");

    let guarded = ["/", "/api/status", "/report", "/api/nothing-here"];
    // Each kind of wrong credential from a client of its own (the limiter
    // counts per client address).
    let wrong = [
        None,
        Some(bearer("tok-new-")),
        Some(bearer("tok-new-2x")),
        Some(bearer("")),
        Some(basic("alice", "correct horsE")),
        Some(basic("mallory", "correct horse")),
        Some("Authorization: Basic not-base64!".to_string()),
        Some("Authorization: tok-new-2".to_string()),
    ];
    for (i, w) in wrong.iter().enumerate() {
        let from = ip(10 + u8::try_from(i).unwrap());
        for path in guarded {
            let headers: Vec<String> = w.iter().cloned().collect();
            let (code, head, body) = request(port, from, "GET", path, &headers).await.unwrap();
            assert_eq!(code, 401, "{path} with {w:?}: {head}\n{body}");
            assert!(
                head.to_ascii_lowercase()
                    .contains("www-authenticate: basic realm=\"sigwatch\""),
                "{head}"
            );
            // The same answer whatever was wrong: no hint, no log line.
            assert_eq!(body, "unauthorized\n", "{path} with {w:?}");
        }
    }
    // Every valid credential opens every guarded path.
    let valid = [
        bearer("tok-old-1"),
        bearer("tok-new-2"),
        bearer("tok-env-3"),
        basic("alice", "correct horse"),
    ];
    for v in &valid {
        for path in ["/", "/api/status", "/report"] {
            let (code, _, body) = request(port, ip(2), "GET", path, std::slice::from_ref(v))
                .await
                .unwrap();
            assert_eq!(code, 200, "{path} with {v}: {body}");
            if path != "/" {
                assert!(body.contains(&group), "{path} shows the group");
            }
        }
        let (code, _, _) = request(
            port,
            ip(2),
            "GET",
            "/api/nothing-here",
            std::slice::from_ref(v),
        )
        .await
        .unwrap();
        assert_eq!(code, 404);
    }
    let (_, _, report) = request(port, ip(2), "GET", "/report", &[valid[0].clone()])
        .await
        .unwrap();
    assert!(report.contains("No space left"), "the report has the lines");
    // The probes and the scrape need nothing, and the failures are counted.
    for path in ["/healthz", "/readyz", "/metrics"] {
        let (code, _, body) = request(port, ip(99), "GET", path, &[]).await.unwrap();
        assert_eq!(code, 200, "{path}: {body}");
    }
    let (_, _, metrics) = request(port, ip(99), "GET", "/metrics", &[]).await.unwrap();
    let failures = wrong.len() * guarded.len();
    assert!(
        metrics.contains(&format!(
            "sigwatch_events_total{{kind=\"http_auth_failures\"}} {failures}"
        )),
        "{failures} failures counted: {}",
        metrics
            .lines()
            .filter(|l| l.contains("http_auth"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// A server in this process (everything on one listener) with these
/// tokens and users (name, bcrypt hash); its port.
async fn in_process(tokens: &[&str], users: &[(&str, &str)]) -> u16 {
    use sigwatch::server::{auth::Access, serve, Surface, Telemetry};
    use std::sync::Arc;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let t = Arc::new(Telemetry::new());
    t.beat();
    let tokens: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
    let users: Vec<(String, String)> = users
        .iter()
        .map(|(u, h)| (u.to_string(), h.to_string()))
        .collect();
    let access = Arc::new(Access::new(&tokens, &users).unwrap());
    tokio::spawn(serve(
        listener,
        t,
        Surface {
            access,
            ..Default::default()
        },
    ));
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_from_another_origin_are_refused_even_with_a_credential() {
    let port = in_process(&["tok"], &[]).await;
    let auth = bearer("tok");
    // A cross-site form post carries the browser's credentials: refused.
    let evil = [auth.clone(), "Origin: https://evil.example".to_string()];
    let (code, _, body) = request(port, ip(3), "POST", "/api/status", &evil)
        .await
        .unwrap();
    assert_eq!(code, 403, "{body}");
    // Same origin (or no Origin: a script, curl) reaches the route, which
    // takes GET only.
    let same = [auth.clone(), format!("Origin: http://127.0.0.1:{port}")];
    let (code, _, _) = request(port, ip(3), "POST", "/api/status", &same)
        .await
        .unwrap();
    assert_eq!(code, 405);
    let (code, _, _) = request(port, ip(3), "POST", "/api/status", &[auth])
        .await
        .unwrap();
    assert_eq!(code, 405);
    // Without a credential the answer is 401 before any origin check.
    let (code, _, _) = request(port, ip(4), "POST", "/api/status", &evil[1..])
        .await
        .unwrap();
    assert_eq!(code, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_wrong_attempts_are_limited_and_counted_and_healthz_still_answers() {
    let hash = bcrypt::hash("pw", 4).unwrap();
    let port = in_process(&["tok"], &[("alice", &hash)]).await;
    let attacker = ip(66);
    let attempts = 10_000usize;
    // Eight connections at once, keep-alive, guessing basic passwords.
    let mut tasks = Vec::new();
    for w in 0..8 {
        tasks.push(tokio::spawn(async move {
            let sock = tokio::net::TcpSocket::new_v4().unwrap();
            sock.bind(SocketAddr::new(attacker, 0)).unwrap();
            let s = sock
                .connect(SocketAddr::from(([127, 0, 0, 1], port)))
                .await
                .unwrap();
            let (r, mut wr) = s.into_split();
            let mut r = tokio::io::BufReader::new(r);
            let mut codes = std::collections::BTreeMap::<u16, usize>::new();
            for i in (w..attempts).step_by(8) {
                let req = format!(
                    "GET /api/status HTTP/1.1\r\nHost: x\r\n{}\r\n\r\n",
                    basic("alice", &format!("guess-{i}"))
                );
                wr.write_all(req.as_bytes()).await.unwrap();
                let code = read_response(&mut r).await;
                *codes.entry(code).or_default() += 1;
            }
            codes
        }));
    }
    // While the guesser works, liveness answers every time, promptly.
    let mut probes = 0;
    while !tasks.iter().all(|t| t.is_finished()) {
        let started = Instant::now();
        let (code, _, _) = request(port, ip(5), "GET", "/healthz", &[]).await.unwrap();
        assert_eq!(code, 200);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        probes += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut codes = std::collections::BTreeMap::<u16, usize>::new();
    for t in tasks {
        for (c, n) in t.await.unwrap() {
            *codes.entry(c).or_default() += n;
        }
    }
    let max = usize::try_from(sigwatch::server::auth::MAX_FAILURES).unwrap();
    assert_eq!(codes.get(&401), Some(&max), "{codes:?}");
    assert_eq!(codes.get(&429), Some(&(attempts - max)), "{codes:?}");
    assert!(probes >= 1);
    // The limited client is refused even with the right password; others
    // are not.
    let (code, head, _) = request(port, attacker, "GET", "/", &[basic("alice", "pw")])
        .await
        .unwrap();
    assert_eq!(code, 429);
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 60"),
        "{head}"
    );
    let (code, _, _) = request(port, ip(6), "GET", "/", &[basic("alice", "pw")])
        .await
        .unwrap();
    assert_eq!(code, 200);
    let (_, _, m) = request(port, ip(6), "GET", "/metrics", &[]).await.unwrap();
    assert!(
        m.contains(&format!(
            "sigwatch_events_total{{kind=\"http_auth_failures\"}} {max}\n"
        )),
        "{m}"
    );
    assert!(
        m.contains(&format!(
            "sigwatch_events_total{{kind=\"http_auth_limited\"}} {}\n",
            attempts - max + 1
        )),
        "{m}"
    );
}

/// Reads one HTTP/1.1 response (headers and a Content-Length body) and
/// returns its status.
async fn read_response<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> u16 {
    use tokio::io::AsyncBufReadExt;
    let mut line = String::new();
    r.read_line(&mut line).await.unwrap();
    let code: u16 = line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        r.read_line(&mut h).await.unwrap();
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap();
            }
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).await.unwrap();
    code
}

#[test]
fn a_non_loopback_listener_without_credentials_refuses_to_start() {
    for listen in ["0.0.0.0:0", "[::]:0"] {
        let out = Command::new(BIN)
            .args(["run", "--listen", listen])
            .env_remove("SIGWATCH_WEB_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{listen}: {stderr}");
        for flag in ["--web-token-file", "--listen-metrics", "--insecure-ui"] {
            assert!(stderr.contains(flag), "{listen}: names {flag}: {stderr}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_listener_serves_the_open_endpoints_only() {
    let (ui, metrics) = (free_port(), free_port());
    let mut child = Command::new(BIN)
        .args(["run", "--log-level", "error"])
        .arg(format!("--listen=127.0.0.1:{ui}"))
        .arg(format!("--listen-metrics=0.0.0.0:{metrics}"))
        .env_remove("SIGWATCH_WEB_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _child = Killed(child);
    stdin.write_all(&fixture("egress-black-hole.log")).unwrap();
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            Instant::now() < deadline,
            "the metrics listener never answered"
        );
        if let Some((200, _, _)) = request(metrics, ip(1), "GET", "/healthz", &[]).await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for path in ["/readyz", "/metrics"] {
        let (code, _, _) = request(metrics, ip(1), "GET", path, &[]).await.unwrap();
        assert_eq!(code, 200, "{path}");
    }
    for path in ["/", "/api/status", "/report"] {
        let (code, _, body) = request(metrics, ip(1), "GET", path, &[]).await.unwrap();
        assert_eq!(code, 404, "{path} is not on the metrics listener: {body}");
    }
    // The UI listener (loopback, --insecure-ui) has everything.
    let (code, _, _) = request(ui, ip(1), "GET", "/api/status", &[]).await.unwrap();
    assert_eq!(code, 200);
    drop(stdin);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_over_tls_with_a_certificate_rotated_while_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (ca1, ca2) = (test_ca("sigwatch test CA 1"), test_ca("sigwatch test CA 2"));
    write_leaf(&ca1, dir.path());
    std::fs::write(dir.path().join("tokens"), "tok-tls\n").unwrap();
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["run", "--log-level", "error"])
        .arg(format!("--listen=127.0.0.1:{port}"))
        .arg("--web-tls-cert")
        .arg(dir.path().join("tls.crt"))
        .arg("--web-tls-key")
        .arg(dir.path().join("tls.key"))
        .arg("--web-token-file")
        .arg(dir.path().join("tokens"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let _child = Killed(child);
    let url = |path: &str| format!("https://localhost:{port}{path}");
    let c1 = tls_client(&ca1, port);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "no TLS answer within 30 s");
        if let Ok(r) = c1.get(url("/healthz")).send().await {
            assert_eq!(r.status(), 200);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = c1.get(url("/api/status")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = c1
        .get(url("/api/status"))
        .bearer_auth("tok-tls")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Plain HTTP on the TLS port gets no page.
    let plain = request(port, ip(1), "GET", "/healthz", &[]).await;
    assert!(
        plain.as_ref().is_none_or(|(code, _, _)| *code != 200),
        "{plain:?}"
    );
    // A new certificate from another CA lands in the files: served without
    // a restart (bounded wait), and the old CA's clients no longer trust it.
    write_leaf(&ca2, dir.path());
    let c2 = tls_client(&ca2, port);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            Instant::now() < deadline,
            "the rotated certificate was never served"
        );
        if let Ok(r) = c2.get(url("/healthz")).send().await {
            assert_eq!(r.status(), 200);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // (A fresh client: the old one's TLS sessions would resume without
    // looking at the certificate.)
    let c1 = tls_client(&ca1, port);
    assert!(c1.get(url("/healthz")).send().await.is_err());
    // A half-written rotation (a key that does not match) keeps serving
    // the last good pair.
    std::fs::write(
        dir.path().join("tls.key"),
        rcgen::KeyPair::generate().unwrap().serialize_pem(),
    )
    .unwrap();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(600)).await;
        let fresh = tls_client(&ca2, port);
        let r = fresh.get(url("/healthz")).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    drop(stdin);
}

/// A live run without credentials on loopback over the black-hole
/// fixture: (the first firing group, /metrics) once an alert fires.
async fn metrics_of_a_run(extra: &[&str]) -> (String, String) {
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["run", "--log-level", "error"])
        .arg(format!("--listen=127.0.0.1:{port}"))
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _child = Killed(child);
    stdin.write_all(&fixture("egress-black-hole.log")).unwrap();
    stdin.flush().unwrap();
    let status = wait_firing(port, "X-Nothing: 1").await;
    let group = status["firing"][0]["group"].as_str().unwrap().to_string();
    // The counters are published at the next snapshot: wait for the lines.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "no lines counted in /metrics");
        let (_, _, m) = request(port, ip(1), "GET", "/metrics", &[]).await.unwrap();
        if m.contains("sigwatch_events_total{kind=\"hits\"}") {
            drop(stdin);
            return (group, m);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_label_values_leave_metrics_when_turned_off() {
    let (group, on) = metrics_of_a_run(&[]).await;
    assert!(
        on.contains(&group),
        "by default the per-group series name {group}"
    );
    assert!(on.contains("sigwatch_signature_hits_total{"));
    let (group, off) = metrics_of_a_run(&["--metrics-group-labels=false"]).await;
    assert!(!off.contains(&group), "{group} in /metrics:\n{off}");
    assert!(!off.contains("sigwatch_signature_hits_total{"), "{off}");
    assert!(!off.contains("sigwatch_group_last_seen_seconds{"), "{off}");
    assert!(off.contains("sigwatch_events_total{kind=\"lines\"}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_metrics_need_the_credential_and_the_probes_still_do_not() {
    use sigwatch::server::{auth::Access, serve, Surface, Telemetry};
    use std::sync::Arc;
    let t = Arc::new(Telemetry::new());
    t.beat();
    t.set_rules_loaded();
    t.set_source(true, "stdin");
    let access = Arc::new(Access::new(&["scrape-tok".into()], &[]).unwrap());
    let mut ports = Vec::new();
    // The full listener and a metrics-only one, both guarding /metrics.
    for ui in [true, false] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        ports.push(listener.local_addr().unwrap().port());
        let surface = Surface {
            access: access.clone(),
            ui,
            tls: None,
            guard_metrics: true,
        };
        tokio::spawn(serve(listener, t.clone(), surface));
    }
    for port in ports {
        let (code, _, body) = request(port, ip(7), "GET", "/metrics", &[]).await.unwrap();
        assert_eq!(code, 401, "{body}");
        let (code, _, body) = request(port, ip(7), "GET", "/metrics", &[bearer("scrape-tok")])
            .await
            .unwrap();
        assert_eq!(code, 200);
        assert!(body.contains("sigwatch_events_total"), "{body}");
        for path in ["/healthz", "/readyz"] {
            let (code, _, _) = request(port, ip(7), "GET", path, &[]).await.unwrap();
            assert_eq!(code, 200, "{path}");
        }
    }
    // Asked for without any credential: a startup error.
    let out = Command::new(BIN)
        .args(["run", "--guard-metrics", "--listen", "127.0.0.1:0"])
        .env_remove("SIGWATCH_WEB_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--web-token-file"));
}

/// A credential file or a state directory that other users can read is
/// said at start, as ssh says it; a private one is not.
#[test]
fn credentials_and_state_open_to_others_are_warned_of_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "tok-1\n").unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let run = |token_mode: u32, state_mode: u32| -> String {
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(token_mode)).unwrap();
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(state_mode)).unwrap();
        let o = Command::new(BIN)
            .args(["run", "--log-level", "warn"])
            .arg(format!("--listen=127.0.0.1:{}", free_port()))
            .arg("--web-token-file")
            .arg(&tokens)
            .arg("--state-dir")
            .arg(&state)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let open = run(0o644, 0o755);
    assert!(
        open.contains("web token file is readable by other users (chmod 600 it)"),
        "{open}"
    );
    assert!(
        open.contains("state directory is readable by other users (chmod 700 it)"),
        "{open}"
    );
    let private = run(0o600, 0o700);
    assert!(!private.contains("readable by other users"), "{private}");
}
