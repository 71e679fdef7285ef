//! The Loki source against an in-test Loki: a real HTTP server on 127.0.0.1
//! that follows Loki's `query_range` semantics exactly (research/apis.md
//! §1): inclusive start, exclusive end, `limit` applied globally across
//! streams merged by time (a page can end in the middle of a shared
//! timestamp), 400 above 5000, 401 without `X-Scope-OrgID` when auth is on,
//! three-element rows with `categorize-labels`, plain-text errors.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;
mod fake_loki;
use fake_loki::*;
use sigwatch::source::loki::poll::Poller;
use sigwatch::source::loki::{Entry, LokiConfig, LokiError};
use sigwatch::source::Source;
use sigwatch::{Engine, Options};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

#[test]
fn the_in_test_loki_reads_logql() {
    let l = labels(&[("namespace", "media"), ("pod", "egress-1")]);
    let m = |q: &str, line: &str| logql_filter(q).map(|f| f(&l, line));
    assert_eq!(m(r#"{namespace="media"}"#, "x"), Some(true));
    assert_eq!(m(r#"{namespace="other"}"#, "x"), Some(false));
    assert_eq!(
        m(r#"{namespace="media", pod=~"egress-1|egress-2"}"#, "x"),
        Some(true)
    );
    assert_eq!(
        m(r#"{pod=~"egress"}"#, "x"),
        Some(false),
        "label regexes are anchored"
    );
    assert_eq!(
        m(r#"{pod!="egress-2"} |= "No space" "#, "No space left"),
        Some(true)
    );
    assert_eq!(
        m(
            r#"{pod!="egress-2"} |~ "(?i)no SPACE|full""#,
            "No space left"
        ),
        Some(true)
    );
    assert_eq!(m(r#"{pod=~"egress-.*"} |= "a\"b""#, "a\"b"), Some(true));
    assert_eq!(
        m(r#"{pod=~"egress-.*"} != "left""#, "No space left"),
        Some(false)
    );
    assert_eq!(m(r#"{pod="x""#, "x"), None);
}

fn cfg(url: &str, limit: u32) -> LokiConfig {
    let mut c = LokiConfig::new(url);
    c.limit = limit;
    c.lag = Duration::from_secs(0);
    c.timeout = Duration::from_secs(5);
    c
}

/// Polls until the poller has passed `until` (bounded), retrying errors.
async fn drain(p: &mut Poller, now: i64) -> Vec<Entry> {
    let mut out = Vec::new();
    for _ in 0..50 {
        match p.poll(now).await {
            Ok(v) => {
                out.extend(v);
                if p.cursor() >= now {
                    break;
                }
            }
            Err(LokiError::Transient(_)) => continue,
            Err(e) => panic!("{e}"),
        }
    }
    out
}

fn keys(v: &[Entry]) -> Vec<(i64, String)> {
    v.iter().map(|e| (e.ts, e.line.clone())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_across_shared_timestamps_has_no_gap_and_no_duplicate() {
    let store: Shared = Default::default();
    {
        let mut s = store.lock().unwrap();
        // 3 streams, 40 entries, many sharing one ns across (and within) streams.
        for i in 0..40i64 {
            let pod = ["a", "b", "c"][(i % 3) as usize];
            let ts = 1_000 + (i / 4) * 10; // four entries per timestamp
            s.entries.push((
                labels(&[("pod", pod)]),
                ts,
                format!("line {i}"),
                BTreeMap::new(),
            ));
        }
    }
    let url = start_loki(store.clone()).await;
    for limit in [1u32, 3, 4, 5, 7, 100] {
        let mut p = Poller::new(cfg(&url, limit), "{pod=~\"a|b|c\"}", 0).unwrap();
        let got = drain(&mut p, 2_000).await;
        let lines: BTreeSet<String> = got.iter().map(|e| e.line.clone()).collect();
        assert_eq!(got.len(), 40, "limit {limit}: {:?}", keys(&got));
        assert_eq!(lines.len(), 40, "limit {limit}: duplicates");
        assert!(got.windows(2).all(|w| w[0].ts <= w[1].ts), "forward order");
        if limit < 4 {
            assert!(
                p.stats().saturated_pages > 0,
                "a page of one timestamp raises the limit"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_is_read_a_part_at_a_time_and_whole() {
    use sigwatch::source::loki::poll::POLL_ENTRIES;
    // A window of 2.5 × what one poll returns, several entries a
    // nanosecond (pages end inside a shared timestamp).
    let total = POLL_ENTRIES * 5 / 2;
    let store: Shared = Default::default();
    {
        let mut s = store.lock().unwrap();
        for i in 0..total {
            s.entries.push((
                labels(&[("pod", if i % 2 == 0 { "a" } else { "b" })]),
                1_000 + (i / 3) as i64,
                format!("line {i}"),
                BTreeMap::new(),
            ));
        }
    }
    let url = start_loki(store.clone()).await;
    let mut p = Poller::new(cfg(&url, 5000), "{pod=~\"a|b\"}", 0).unwrap();
    let now = 1_000_000;
    let first = p.poll(now).await.unwrap();
    assert!(p.behind(), "a part of the window is left");
    assert!(
        first.len() >= POLL_ENTRIES && first.len() < POLL_ENTRIES + 5000,
        "{}",
        first.len()
    );
    let last = first.last().unwrap().ts;
    assert!(
        p.cursor() <= last && p.cursor() > 1_000,
        "the cursor moved to the part's end"
    );
    let mut all = first;
    while p.behind() {
        all.extend(p.poll(now).await.unwrap());
    }
    assert_eq!(p.cursor(), now);
    let mut k = keys(&all);
    assert_eq!(k.len(), total, "every entry once");
    k.sort();
    k.dedup();
    assert_eq!(k.len(), total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_is_exclusive_and_the_next_window_starts_there() {
    let store: Shared = Default::default();
    store.lock().unwrap().entries.push((
        labels(&[("pod", "a")]),
        100,
        "at 100".into(),
        BTreeMap::new(),
    ));
    let url = start_loki(store.clone()).await;
    let mut p = Poller::new(cfg(&url, 10), "{pod=\"a\"}", 0).unwrap();
    assert!(
        p.poll(100).await.unwrap().is_empty(),
        "end = 100 excludes ts 100"
    );
    assert_eq!(p.cursor(), 100);
    assert_eq!(
        keys(&p.poll(101).await.unwrap()),
        vec![(100, "at 100".to_string())]
    );
    assert!(p.poll(200).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loki_down_then_back_loses_nothing() {
    let store: Shared = Default::default();
    for i in 0..30 {
        store.lock().unwrap().entries.push((
            labels(&[("pod", "a")]),
            1_000 + i,
            format!("l{i}"),
            BTreeMap::new(),
        ));
    }
    let url = start_loki(store.clone()).await;
    let mut p = Poller::new(cfg(&url, 7), "{pod=\"a\"}", 0).unwrap();
    store.lock().unwrap().down_for = 3;
    let mut errors = 0;
    let mut got = Vec::new();
    for _ in 0..20 {
        match p.poll(2_000).await {
            Ok(v) => got.extend(v),
            Err(LokiError::Transient(m)) => {
                assert!(m.contains("503"), "{m}");
                errors += 1;
            }
            Err(e) => panic!("{e}"),
        }
        if p.cursor() >= 2_000 {
            break;
        }
    }
    assert_eq!(errors, 3);
    assert_eq!(got.len(), 30, "{:?}", keys(&got));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_errors_are_final_and_clear() {
    let store: Shared = Default::default();
    store.lock().unwrap().auth = true;
    let url = start_loki(store.clone()).await;
    let mut p = Poller::new(cfg(&url, 10), "{pod=\"a\"}", 0).unwrap();
    match p.poll(1_000).await {
        Err(LokiError::Config { status: 401, body }) => assert_eq!(body, "no org id"),
        other => panic!("{other:?}"),
    }
    assert_eq!(p.cursor(), 0, "nothing was consumed");
    let mut c = cfg(&url, 10);
    c.tenant = Some("team-a".into());
    let mut p = Poller::new(c, "{pod=\"a\"}", 0).unwrap();
    assert!(p.poll(1_000).await.is_ok());
    // A limit above Loki's cap is clamped by us, never sent.
    let mut c = cfg(&url, 6000);
    c.tenant = Some("team-a".into());
    let mut p = Poller::new(c, "{pod=\"a\"}", 0).unwrap();
    assert!(p.poll(1_000).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_from_checkpoint_neither_rereads_nor_skips() {
    let store: Shared = Default::default();
    let push = |from: i64, to: i64| {
        let mut s = store.lock().unwrap();
        for i in from..to {
            s.entries.push((
                labels(&[("pod", "a")]),
                i * 10,
                format!("l{i}"),
                BTreeMap::new(),
            ));
        }
    };
    push(0, 20);
    let url = start_loki(store.clone()).await;
    let q = "{pod=\"a\"}";
    let mut p = Poller::new(cfg(&url, 6), q, 0).unwrap();
    let first = drain(&mut p, 200).await;
    // The cursor as a checkpoint carries it: a JSON map, query -> ns.
    let mut m = BTreeMap::new();
    m.insert(q.to_string(), p.cursor());
    let on_disk = serde_json::to_string(&m).unwrap();
    drop(p);
    push(20, 35);
    let back: BTreeMap<String, i64> = serde_json::from_str(&on_disk).unwrap();
    let saved = back[q];
    let mut p = Poller::new(cfg(&url, 6), q, saved).unwrap();
    let second = drain(&mut p, 400).await;
    let all: Vec<String> = first
        .iter()
        .chain(second.iter())
        .map(|e| e.line.clone())
        .collect();
    assert_eq!(all, (0..35).map(|i| format!("l{i}")).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_lines_are_caught_by_the_overlap_rescan_once() {
    let store: Shared = Default::default();
    store.lock().unwrap().entries.push((
        labels(&[("pod", "a")]),
        100,
        "on time".into(),
        BTreeMap::new(),
    ));
    let url = start_loki(store.clone()).await;
    let mut c = cfg(&url, 10);
    c.overlap = Duration::from_nanos(1_000);
    c.rescan_every = Duration::from_nanos(1_000);
    let mut p = Poller::new(c, "{pod=\"a\"}", 0).unwrap();
    assert_eq!(p.poll(600).await.unwrap().len(), 1);
    // A line stamped before the cursor arrives late.
    store.lock().unwrap().entries.push((
        labels(&[("pod", "a")]),
        300,
        "late".into(),
        BTreeMap::new(),
    ));
    assert!(p.poll(700).await.unwrap().is_empty(), "no rescan yet");
    let got = p.poll(1_200).await.unwrap();
    assert_eq!(
        keys(&got),
        vec![(300, "late".to_string())],
        "rescan finds it; 'on time' is not repeated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_from_loki_equal_replay_and_name_nodes_from_labels() {
    // The egress black-hole fixture, pushed under node_id/pod labels with
    // structured metadata, the way a Loki pipeline stores it.
    let text = std::fs::read_to_string(format!(
        "{}/fixtures/egress-black-hole.log",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let store: Shared = Default::default();
    let set = sigwatch::rules::load_builtin().unwrap();
    let mut replay = Engine::new(set.clone(), Options::default()).unwrap();
    let mut want = Vec::new();
    {
        let mut s = store.lock().unwrap();
        let mut last = 0i64;
        for (i, l) in text.lines().enumerate() {
            let (pod, rest) = l.split_once(' ').unwrap();
            let (_, body) = rest.split_once(' ').unwrap();
            // Entry time: the line's own time (console or JSON), as a shipper stamps it.
            let ts = sigwatch::decode::peek_time(body, None, None)
                .unwrap_or(last)
                .max(last);
            last = ts;
            let node = pod.rsplit('-').next().unwrap();
            let lb = labels(&[
                ("namespace", "media"),
                ("container", "egress"),
                ("pod", pod),
                ("node_id", &format!("node-{node}")),
            ]);
            let mut sm = BTreeMap::new();
            sm.insert("detected_level".to_string(), "info".to_string());
            s.entries
                .push((lb, ts + i as i64 % 3, body.to_string(), sm));
        }
        // The reference: the same entries replayed in Loki's order.
        let mut sorted = s.entries.clone();
        sorted.sort_by(|a, b| {
            a.1.cmp(&b.1)
                .then_with(|| a.0.cmp(&b.0))
                .then_with(|| a.2.cmp(&b.2))
        });
        for (lb, ts, line, _) in sorted {
            let e = Entry {
                labels: lb.into_iter().collect(),
                metadata: vec![],
                ts,
                line,
            };
            let src = Source {
                name: e.stream_name(),
                labels: e.labels.clone(),
                modified: None,
                kind: Default::default(),
            };
            replay.push_line_at(&src, &e.line, e.ts, &mut want);
        }
        replay.finish(&mut want);
    }
    let url = start_loki(store.clone()).await;
    let mut p = Poller::new(cfg(&url, 250), "{namespace=\"media\"}", 0).unwrap();
    let entries = drain(&mut p, i64::MAX / 2).await;
    assert_eq!(entries.len(), text.lines().count());
    let mut live = Engine::new(set, Options::default()).unwrap();
    let mut got = Vec::new();
    for e in &entries {
        let src = Source {
            name: e.stream_name(),
            labels: e.labels.clone(),
            modified: None,
            kind: Default::default(),
        };
        live.push_line_at(&src, &e.line, e.ts, &mut got);
    }
    live.finish(&mut got);
    let view = |v: &[sigwatch::alert::Notification]| -> Vec<String> {
        v.iter()
            .map(|n| format!("{:?} {} {}", n.state, n.rule, n.group))
            .collect()
    };
    assert_eq!(view(&got), view(&want));
    assert!(
        got.iter()
            .any(|n| n.rule == "egress.black_hole" && n.group.starts_with("node-")),
        "{:?}",
        view(&got)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_consumes_loki_and_resumes_from_its_checkpoint_after_kill_9() {
    use std::process::Stdio;
    use tokio::io::AsyncBufReadExt;
    let text = std::fs::read_to_string(format!(
        "{}/fixtures/egress-black-hole.log",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let store: Shared = Default::default();
    let now = sigwatch::clock::wall_ns();
    {
        // Re-stamp the fixture into the last few minutes, one ms apart.
        let mut s = store.lock().unwrap();
        s.auth = true;
        let n = text.lines().count() as i64;
        for (i, l) in text.lines().enumerate() {
            let (pod, rest) = l.split_once(' ').unwrap();
            let (_, body) = rest.split_once(' ').unwrap();
            let ts = now - 240_000_000_000 + (i as i64) * (200_000_000_000 / n);
            s.entries.push((
                labels(&[
                    ("namespace", "media"),
                    ("pod", pod),
                    ("node_id", &format!("node-{pod}")),
                ]),
                ts,
                body.to_string(),
                BTreeMap::new(),
            ));
        }
    }
    let url = start_loki(store.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let runs = std::sync::atomic::AtomicUsize::new(0);
    let spawn = || {
        let n = runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let log = std::fs::File::create(logs.path().join(format!("run-{n}.log"))).unwrap();
        tokio::process::Command::new(env!("CARGO_BIN_EXE_sigwatch"))
            .args([
                "run",
                "--listen",
                "none",
                "--log-level",
                "info",
                "--loki",
                &url,
                "--query",
                "{namespace=\"media\"}",
                "--loki-tenant",
                "t1",
                "--loki-lag",
                "0s",
                "--loki-interval",
                "200ms",
                "--state-dir",
            ])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(log)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    let mut child = spawn();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let l = lines.next_line().await.unwrap().unwrap();
            if l.contains("egress.black_hole") {
                return l;
            }
        }
    })
    .await
    .expect("the black-hole alert arrives from Loki");
    let n: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert!(
        n["group"].as_str().unwrap().starts_with("node-egress-"),
        "named from the node_id label: {n}"
    );
    // `run` from Loki links the alert to its lines on that Loki.
    let link = n["links"]["loki"]
        .as_str()
        .unwrap_or_else(|| panic!("a link: {n}"));
    assert!(
        link.starts_with(&format!("{url}/loki/api/v1/query_range?query=")),
        "{link}"
    );
    // Once the page is recorded as delivered (its receipt in the stdout
    // lane's spool) and a checkpoint holds its alert, kill -9: the restart
    // resumes from that checkpoint and must not deliver it again. Then a
    // crash before any checkpoint: the lines read again make the alert
    // again, and the receipt stops it. (A kill between the write to stdout
    // and the receipt, a few system calls apart, would print it again: the
    // one window at-least-once delivery leaves.)
    let fp = n["fingerprint"].as_str().unwrap().to_string();
    let dir_path = dir.path().to_path_buf();
    let fp2 = fp.clone();
    // Whether the stdout lane's spool holds the page's receipt.
    let receipt = move || -> bool {
        let Ok(entries) = std::fs::read_dir(dir_path.join("spool")) else {
            return false;
        };
        // The spool files themselves, not a write in progress (a hidden
        // temporary that a kill would leave unrenamed).
        entries
            .flatten()
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.ends_with(".json") && !name.starts_with('.')
            })
            .filter_map(|e| std::fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .any(|v| {
                v["delivered"]
                    .as_array()
                    .is_some_and(|d| d.iter().any(|r| r[0] == fp2.as_str()))
            })
    };
    let q = "{namespace=\"media\"}";
    // (saved_at, cursor, whether the status board holds the page).
    let ckpt = |d: &std::path::Path| -> Option<(String, i64, bool)> {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.join("checkpoint.json")).ok()?).ok()?;
        Some((
            v["saved_at"].as_str()?.to_string(),
            v["loki"][q].as_i64()?,
            v["board"]
                .as_array()?
                .iter()
                .any(|b| b["fingerprint"] == fp.as_str()),
        ))
    };
    let d = dir.path().to_path_buf();
    wait_for(
        "the page's receipt, and a checkpoint holding the alert",
        || receipt() && ckpt(&d).is_some_and(|c| c.2),
    )
    .await;
    child.start_kill().unwrap();
    let _ = child.wait().await;
    let (saved_at, saved, _) = ckpt(dir.path()).expect("a checkpoint with the cursor");
    assert!(
        saved > now - 240_000_000_000,
        "the cursor moved past the fixture's start"
    );
    let before = store.lock().unwrap().starts.len();
    let last_entry = store
        .lock()
        .unwrap()
        .entries
        .iter()
        .map(|e| e.1)
        .max()
        .unwrap();
    // Restart: it resumes at the checkpoint, not 15 minutes back, reads
    // to the end, and checkpoints again; then a graceful stop.
    let mut child = spawn();
    let d = dir.path().to_path_buf();
    wait_for("the restart's checkpoint past the last entry", || {
        ckpt(&d).is_some_and(|(at, c, _)| at != saved_at && c > last_entry)
    })
    .await;
    let starts = store.lock().unwrap().starts.clone();
    assert!(starts.len() > before, "the restarted process polled");
    assert!(
        starts[before..].iter().all(|s| *s >= saved),
        "resumed at the checkpoint {saved}: {:?}",
        &starts[before..]
    );
    // A crash before any checkpoint: everything is read again from 15
    // minutes back and the alert made again — its receipt stops it.
    child.start_kill().unwrap();
    let again = read_all(&mut child).await;
    assert!(
        again.is_empty(),
        "nothing notified after the restart: {again:?}\nstate: {}\nlogs: {}",
        state_files(dir.path()),
        state_files(logs.path())
    );
    std::fs::remove_file(dir.path().join("checkpoint.json")).unwrap();
    let mut child = spawn();
    wait_for("a new checkpoint past the last entry", || {
        ckpt(&d).is_some_and(|(_, c, held)| c > last_entry && held)
    })
    .await;
    kill_term(&child);
    let again = read_all(&mut child).await;
    assert!(
        again.is_empty(),
        "nothing was notified a second time: {again:?}\nstate: {}\nlogs: {}",
        state_files(dir.path()),
        state_files(logs.path())
    );
    assert!(
        store
            .lock()
            .unwrap()
            .starts
            .iter()
            .any(|s| *s < now - 240_000_000_000),
        "that run read everything again"
    );
}

/// The state directory's small files, for a failure's message.
fn state_files(dir: &std::path::Path) -> String {
    let mut out = String::new();
    for sub in ["", "spool"] {
        for e in std::fs::read_dir(dir.join(sub))
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = e.path();
            if p.is_file() && !p.ends_with("checkpoint.json") && !p.ends_with("templates.json") {
                out.push_str(&format!(
                    "\n{}: {}",
                    p.display(),
                    std::fs::read_to_string(&p).unwrap_or_default()
                ));
            }
        }
    }
    out
}

/// Every line the child prints until it exits (bounded: 20 s).
async fn read_all(child: &mut tokio::process::Child) -> Vec<String> {
    use tokio::io::AsyncBufReadExt;
    let mut out = Vec::new();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    while let Ok(Ok(Some(l))) =
        tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await
    {
        out.push(l);
    }
    let _ = child.wait().await;
    out
}

/// Waits (bounded: 20 s) until `cond` holds; fails the test naming `what`.
async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..400 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// SIGTERM: the graceful stop a rolling upgrade gives.
fn kill_term(child: &tokio::process::Child) {
    let pid = child.id().expect("running");
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -TERM {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_reconnects_at_the_last_timestamp_and_backfills_drops_exactly_once() {
    let store: Shared = Default::default();
    for i in 1..=3 {
        store.lock().unwrap().entries.push((
            labels(&[("pod", "a")]),
            i,
            format!("l{i}"),
            BTreeMap::new(),
        ));
    }
    let url = start_loki(store.clone()).await;
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let task = tokio::spawn(sigwatch::source::loki::tail::run_tail(
        cfg(&url, 100),
        "{pod=\"a\"}".into(),
        1,
        tx,
        Default::default(),
    ));
    let mut got: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while got.len() < 6 {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(b)) => got.extend(b.entries.into_iter().map(|e| e.line)),
            other => panic!("stopped after {got:?}: {other:?}"),
        }
    }
    // Nothing more: the second connection re-sends 5 and 6, dedup drops them.
    if let Ok(Some(b)) = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await {
        panic!("duplicates: {:?}", b.entries);
    }
    task.abort();
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        (1..=6).map(|i| format!("l{i}")).collect::<Vec<_>>(),
        "{got:?}"
    );
    let starts = store.lock().unwrap().tail_starts.clone();
    assert_eq!(starts.len(), 2, "reconnected once after the 1011 close");
    assert_eq!(
        starts[1], 5,
        "the reconnect starts at the last timestamp seen"
    );
}

/// Serves every line of `fixture` verbatim in one stream, each at the time
/// the decoder gives it (the way a shipper that parses times stamps it),
/// and writes the same lines in Loki's order (time, then line) to `out`:
/// Loki returns lines by time, so "the same lines" are these, in this
/// order. A line without a time of its own takes the time before it,
/// which depends on the order: sorted and stamped again until both agree.
fn serve_fixture(
    store: &Shared,
    fixture: &str,
    stream: &[(&str, &str)],
    out: &std::path::Path,
) -> (i64, i64, usize) {
    let (lines, times) = common::in_time_order(fixture);
    std::fs::write(out, lines.join("\n") + "\n").unwrap();
    let mut s = store.lock().unwrap();
    for (l, t) in lines.iter().zip(&times) {
        s.entries
            .push((labels(stream), *t, l.clone(), BTreeMap::new()));
    }
    (times[0], times[times.len() - 1] + 1, lines.len())
}

async fn sigwatch(args: &[&str]) -> (String, String) {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_sigwatch"))
            .args(args)
            .env_remove("SIGWATCH_LOKI_URL")
            .output(),
    )
    .await
    .expect("sigwatch finishes")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_over_loki_gives_the_notifications_of_replay_file() {
    for (fixture, limit) in [
        ("livekit-redis-outage.log", "97"),
        ("egress-black-hole.log", "1000"),
        ("grpc-slow-auth.log", "5"),
    ] {
        let store: Shared = Default::default();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(fixture);
        let (from, to, n) = serve_fixture(
            &store,
            fixture,
            &[("namespace", "media"), ("job", "x")],
            &path,
        );
        // Noise outside the range and outside the query: never read.
        {
            let mut s = store.lock().unwrap();
            let quiet =
                r#"{"level":"error","msg":"failed to mark as draining","nodeID":"ND_outside"}"#;
            for t in [from - 1, to, to + 1_000] {
                s.entries.push((
                    labels(&[("namespace", "media"), ("job", "x")]),
                    t,
                    quiet.into(),
                    BTreeMap::new(),
                ));
            }
            s.entries.push((
                labels(&[("namespace", "other")]),
                from,
                quiet.into(),
                BTreeMap::new(),
            ));
        }
        let url = start_loki(store.clone()).await;
        let (want, _) = sigwatch(&[
            "replay",
            "--no-summary",
            "--no-links",
            path.to_str().unwrap(),
        ])
        .await;
        let (from_s, to_s) = (from.to_string(), to.to_string());
        // Links name where lines were read (file:line, a Loki query), the
        // one thing that differs by design: left out.
        let (got, log) = sigwatch(&[
            "replay",
            "--no-summary",
            "--no-links",
            "--loki",
            &url,
            "--query",
            r#"{namespace="media"}"#,
            "--from",
            &from_s,
            "--to",
            &to_s,
            "--loki-limit",
            limit,
        ])
        .await;
        assert!(!want.is_empty(), "{fixture}: the fixture alerts");
        let diff = got.lines().zip(want.lines()).position(|(a, b)| a != b);
        assert_eq!(
            got.lines().count(),
            want.lines().count(),
            "{fixture}: {log}"
        );
        assert!(
            got == want,
            "{fixture}: first difference at notification {diff:?}:\n{:?}\n{:?}",
            diff.map(|d| got.lines().nth(d)),
            diff.map(|d| want.lines().nth(d))
        );
        assert!(
            log.contains(&format!("entries={n}")),
            "{fixture}: every line read once: {log}"
        );
        let requests = store.lock().unwrap().requests;
        assert!(
            requests > 1 || limit == "1000",
            "{fixture}: paged ({requests} requests)"
        );
    }
}

/// A sample as kept (cut at 512 bytes with "…") is the start of its line.
fn sample_in(sample: &str, line: &str) -> bool {
    line.contains(sample.strip_suffix('…').unwrap_or(sample))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_link_in_a_notification_returns_its_sample_lines_from_loki() {
    // The black-hole fixture in one stream per pod, the way a shipper
    // labels it (the stern prefix becomes the pod label).
    let text = std::fs::read_to_string(format!(
        "{}/fixtures/egress-black-hole.log",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let store: Shared = Default::default();
    let (mut from, mut to) = (i64::MAX, 0);
    {
        let mut s = store.lock().unwrap();
        let mut last = 0;
        for l in text.lines() {
            let (pod, rest) = l.split_once(' ').unwrap();
            let (_, body) = rest.split_once(' ').unwrap();
            let ts = sigwatch::decode::peek_time(body, None, None)
                .unwrap_or(last)
                .max(last);
            last = ts;
            (from, to) = (from.min(ts), to.max(ts + 1));
            s.entries.push((
                labels(&[
                    ("namespace", "media"),
                    ("container", "egress"),
                    ("pod", pod),
                ]),
                ts,
                body.to_string(),
                BTreeMap::new(),
            ));
        }
    }
    let url = start_loki(store.clone()).await;
    let tmp = tempfile::tempdir().unwrap();
    let report = tmp.path().join("range.html");
    let (out, log) = sigwatch(&[
        "replay",
        "--no-summary",
        "--output",
        "json",
        "--loki",
        &url,
        "--query",
        r#"{namespace="media"}"#,
        "--from",
        &from.to_string(),
        "--to",
        &to.to_string(),
        "--grafana-url",
        "https://grafana.example/",
        "--grafana-datasource",
        "P8E80F9AEF21F6940",
        "--report",
        report.to_str().unwrap(),
    ])
    .await;
    // The postmortem's timeline of the range.
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(
        html.contains("egress.black_hole") && html.contains(&url),
        "a report of the range"
    );
    let notes: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        notes.iter().any(|n| n["rule"] == "egress.black_hole"),
        "{log}"
    );
    let client = reqwest::Client::new();
    let mut checked = 0;
    for n in &notes {
        let links = &n["links"];
        let loki = links["loki"]
            .as_str()
            .unwrap_or_else(|| panic!("a link: {n}"));
        let query = links["query"].as_str().unwrap();
        assert!(
            loki.starts_with(&format!("{url}/loki/api/v1/query_range?")),
            "{loki}"
        );
        assert!(
            query.starts_with("{container=`egress`, namespace=`media`, pod="),
            "{query}"
        );
        let grafana = links["grafana"].as_str().unwrap();
        assert!(grafana.starts_with("https://grafana.example/explore?schemaVersion=1&panes="));
        assert!(grafana.contains("P8E80F9AEF21F6940"), "{grafana}");
        assert!(
            links.get("lines").is_none(),
            "no file lines from Loki: {links}"
        );
        let body = client.get(loki).send().await.unwrap();
        assert!(
            body.status().is_success(),
            "{loki}: {}",
            body.text().await.unwrap()
        );
        let got = sigwatch::source::loki::parse_streams(&body.text().await.unwrap()).unwrap();
        let pods: BTreeSet<&str> = got
            .iter()
            .flat_map(|e| {
                e.labels
                    .iter()
                    .filter(|l| l.0 == "pod")
                    .map(|l| l.1.as_str())
            })
            .collect();
        for s in n["samples"].as_array().unwrap() {
            let s = s.as_str().unwrap();
            assert!(
                got.iter().any(|e| sample_in(s, &e.line)),
                "{}: sample {s:?} not among the {} lines of {query}",
                n["rule"],
                got.len()
            );
        }
        // Only the lines of the rule: the filter is its literals.
        assert!(
            got.len() < text.lines().count() / 2,
            "{query}: {} lines",
            got.len()
        );
        assert!(!pods.is_empty());
        checked += 1;
    }
    assert!(checked >= 2, "{checked}");
}
