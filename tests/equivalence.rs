//! The block pipeline is the line pipeline, faster. Every fixture, in every
//! wrapper sigwatch reads (kubectl and stern prefixes, stern's colours,
//! CRLF, `kubectl --timestamps`, CRI with partial lines, Docker json-file,
//! Fluent Bit envelopes,
//! several producers on one stream), gives exactly the same notifications
//! and counters whether its lines are pushed one by one (each scanned on
//! its own) or in blocks cut at arbitrary lines with the block scan's
//! hints — and with hints from an older rule set, which must be ignored.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use sigwatch::alert::Notification;
use sigwatch::source::block::Block;
use sigwatch::source::Source;
use sigwatch::{Engine, Options, Stats};
use std::path::Path;

fn fixture(name: &str) -> Vec<String> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    String::from_utf8_lossy(&std::fs::read(&p).unwrap())
        .lines()
        .map(str::to_string)
        .collect()
}

fn engine() -> Engine {
    Engine::new(sigwatch::rules::load_builtin().unwrap(), Options::default()).unwrap()
}

fn by_line(lines: &[String]) -> (String, Stats) {
    let mut e = engine();
    let src = Source::named("f");
    let mut out = Vec::new();
    for l in lines {
        e.push_line(&src, l, None, &mut out);
    }
    e.finish(&mut out);
    (json(&out), e.stats())
}

/// Blocks of pseudo-random sizes (1 to `max` lines), scanned like the
/// reader thread does; `stale` scans with another engine's scanner.
fn by_block(lines: &[String], seed: u64, max: usize, stale: bool) -> (String, Stats) {
    let mut e = engine();
    let other = engine();
    let scanner = if stale {
        other.scanner().get()
    } else {
        e.scanner().get()
    };
    let sources = vec![Source::named("f")];
    let mut out = Vec::new();
    let mut rng = seed | 1;
    let mut i = 0;
    while i < lines.len() {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let n = 1 + (rng as usize) % max;
        let end = (i + n).min(lines.len());
        let block = Block::from_lines(lines[i..end].iter().map(|l| (0, l.as_str())));
        let hints = scanner.scan(&block.data);
        e.push_block(&sources, &block, &hints, &mut out);
        i = end;
    }
    e.finish(&mut out);
    (json(&out), e.stats())
}

fn json(out: &[Notification]) -> String {
    serde_json::to_string(out).unwrap()
}

fn assert_same(what: &str, lines: &[String]) {
    let (want, want_stats) = by_line(lines);
    for (seed, max, stale) in [
        (1, 1, false),
        (7, 5, false),
        (42, 200, false),
        (9, 5000, false),
        (3, 64, true),
    ] {
        let (got, stats) = by_block(lines, seed, max, stale);
        assert_eq!(
            got, want,
            "{what}: notifications differ (blocks ≤ {max}, stale hints {stale})"
        );
        assert_eq!(
            serde_json::to_string(&stats).unwrap(),
            serde_json::to_string(&want_stats).unwrap(),
            "{what}: counters differ (blocks ≤ {max}, stale hints {stale})"
        );
    }
}

/// `[pod/P/C] rest` split into its parts.
fn prefix(l: &str) -> Option<(&str, &str, &str)> {
    let rest = l.strip_prefix("[pod/")?;
    let (inner, body) = rest.split_once("] ")?;
    let (pod, c) = inner.split_once('/')?;
    Some((pod, c, body))
}

fn variants(lines: &[String]) -> Vec<(&'static str, Vec<String>)> {
    let map = |f: &dyn Fn(&str) -> String| lines.iter().map(|l| f(l)).collect::<Vec<_>>();
    vec![
        ("as is", lines.to_vec()),
        (
            "stern",
            map(&|l| match prefix(l) {
                Some((p, c, b)) => format!("{p} {c} {b}"),
                None => l.to_string(),
            }),
        ),
        (
            "stern colours",
            map(&|l| match prefix(l) {
                Some((p, c, b)) => format!("\x1b[32m{p}\x1b[0m \x1b[33m{c}\x1b[0m {b}"),
                None => l.to_string(),
            }),
        ),
        ("crlf", map(&|l| format!("{l}\r"))),
        (
            "kubectl --timestamps",
            map(&|l| match prefix(l) {
                Some((p, c, b)) => format!("[pod/{p}/{c}] 2025-07-16T12:00:00.000000001Z {b}"),
                None => format!("2025-07-16T12:00:00.000000001Z {l}"),
            }),
        ),
        (
            "cri",
            map(&|l| format!("2025-07-16T12:00:00.000000001Z stdout F {l}")),
        ),
        (
            "cri partials",
            lines
                .iter()
                .flat_map(|l| {
                    let cut = l
                        .char_indices()
                        .nth(l.chars().count() / 2)
                        .map_or(0, |(i, _)| i);
                    vec![
                        format!("2025-07-16T12:00:00.000000001Z stdout P {}", &l[..cut]),
                        format!("2025-07-16T12:00:00.000000002Z stdout F {}", &l[cut..]),
                    ]
                })
                .collect(),
        ),
        (
            "docker",
            map(&|l| {
                let j = serde_json::json!({"log": format!("{l}\n"), "stream": "stderr", "time": "2025-07-16T12:00:00.000000001Z"});
                match prefix(l) {
                    Some((p, c, _)) => format!("[pod/{p}/{c}] {j}"),
                    None => j.to_string(),
                }
            }),
        ),
        (
            "envelope",
            map(&|l| {
                match prefix(l) {
            Some((p, c, b)) => serde_json::json!({
                "date": 1751371200.0, "log": format!("{b}\n"), "stream": "stderr",
                "kubernetes": {"pod_name": p, "container_name": c, "namespace_name": "ns", "host": "worker-1"}
            })
            .to_string(),
            None => l.to_string(),
        }
            }),
        ),
        (
            "one stream, many producers",
            map(&|l| match prefix(l) {
                Some((_, _, b)) => b.to_string(),
                None => l.to_string(),
            }),
        ),
    ]
}

#[test]
fn blocks_and_lines_agree_on_every_fixture_in_every_wrapper() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".log") && n != "control-day.log")
        .collect();
    names.sort();
    assert!(names.len() >= 6);
    for name in names {
        for (kind, lines) in variants(&fixture(&name)) {
            assert_same(&format!("{name} ({kind})"), &lines);
        }
    }
}

#[test]
fn blocks_and_lines_agree_on_the_control_day() {
    // The quiet day: thousands of lines, hostile ones among them, no alert.
    let lines = fixture("control-day.log");
    assert_same("control-day.log", &lines);
    assert_eq!(by_line(&lines).0, "[]");
}

#[test]
fn the_population_keeps_a_quiet_node_among_busy_ones() {
    // One stream, six nodes: five log four lines a second, one a line a
    // minute. Population sampling (one line per distinct key inputs per few
    // seconds) keeps every group: when three nodes fail, the spread is
    // "3 of 6", as exact tracking says, not "3 of 5".
    let set = sigwatch::rules::compile(&[(
        "t.yaml".into(),
        r#"rules:
  - id: t.spread
    title: spread
    severity: warning
    match: {contains: ["redis down"]}
    group_by: node
    detect: {spread: {window: 1m, fraction: 0.5, min_groups: 2}}
    annotations: {summary: "{{ groups }} of {{ population }}"}
"#
        .into(),
    )])
    .unwrap();
    let t0 = 1_764_000_000.0f64;
    let mut lines = Vec::new();
    for s in 0..900 {
        for n in 0..5 {
            for k in 0..4 {
                let t = t0 + f64::from(s) + f64::from(n * 4 + k) * 0.01;
                lines.push(format!(
                    r#"{{"level":"debug","ts":{t:.3},"msg":"cpu check","nodeID":"N_busy{n}"}}"#
                ));
            }
        }
        if s % 60 == 30 {
            lines.push(format!(
                r#"{{"level":"debug","ts":{:.3},"msg":"cpu check","nodeID":"N_quiet"}}"#,
                t0 + f64::from(s) + 0.5
            ));
        }
        if s >= 700 && s % 5 == 0 {
            for n in 0..3 {
                lines.push(format!(
                    r#"{{"level":"error","ts":{:.3},"msg":"redis down","nodeID":"N_busy{n}"}}"#,
                    t0 + f64::from(s) + 0.7
                ));
            }
        }
    }
    let run = |blocks: bool| {
        let mut e = Engine::new(set.clone(), Options::default()).unwrap();
        let sources = vec![Source::named("one")];
        let mut out = Vec::new();
        if blocks {
            let scanner = e.scanner().get();
            for chunk in lines.chunks(97) {
                let b = Block::from_lines(chunk.iter().map(|l| (0, l.as_str())));
                let h = scanner.scan(&b.data);
                e.push_block(&sources, &b, &h, &mut out);
            }
        } else {
            for l in &lines {
                e.push_line(&sources[0], l, None, &mut out);
            }
        }
        e.finish(&mut out);
        out
    };
    let (a, b) = (run(false), run(true));
    assert_eq!(json(&a), json(&b));
    let fired = a
        .iter()
        .find(|n| n.rule == "t.spread")
        .expect("the spread fires");
    assert_eq!(fired.annotations["summary"], "3 of 6", "{fired:?}");
}

#[test]
fn loki_entries_with_their_own_times_and_newlines_agree() {
    // Loki entries: a time and labels each, some holding a newline (a stack
    // trace after the message), the signature sometimes only in the second
    // part. As one block (the live loop's way) or entry by entry.
    let lines = fixture("livekit-redis-outage.log");
    let mut entries: Vec<(usize, String, i64)> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some((pod, _, body)) = prefix(l) else {
            continue;
        };
        let pod_idx = pod.bytes().map(usize::from).sum::<usize>() % 3;
        let ts = 1_751_371_200_000_000_000 + i as i64 * 40_000_000;
        let text = if i % 7 == 0 {
            format!("goroutine dump follows\n{body}")
        } else {
            body.to_string()
        };
        entries.push((pod_idx, text, ts));
    }
    let sources: Vec<Source> = (0..3)
        .map(|i| Source {
            name: format!("{{pod=\"lk-{i}\"}}"),
            labels: vec![("pod".into(), format!("lk-{i}"))],
            modified: None,
            kind: Default::default(),
        })
        .collect();
    let mut a = engine();
    let mut want = Vec::new();
    for (i, text, ts) in &entries {
        a.push_line_at(&sources[*i], text, *ts, &mut want);
    }
    a.finish(&mut want);
    let mut b = engine();
    let scanner = b.scanner().get();
    let mut got = Vec::new();
    for chunk in entries.chunks(50) {
        let block = Block::from_entries(chunk.iter().map(|(i, t, ts)| (*i, t.as_str(), *ts)));
        let hints = scanner.scan(&block.data);
        b.push_block(&sources, &block, &hints, &mut got);
    }
    b.finish(&mut got);
    assert!(!want.is_empty());
    assert_eq!(json(&got), json(&want));
    assert_eq!(
        serde_json::to_string(&b.stats()).unwrap(),
        serde_json::to_string(&a.stats()).unwrap()
    );
}

#[test]
fn the_kubectl_events_table_agrees() {
    // `kubectl get events -w`: no timestamps, the pod only as `pod/NAME`
    // in the text (an `after:` group-key path), some behind a kubectl
    // prefix whose own `[pod/` must not count.
    // A row each time an event repeats: the kubelet's third failure is the
    // one that restarts a pod.
    let failures = "0s          Warning   Unhealthy   pod/api-5f6d7c8b9-a1s2d        Liveness probe failed: Get \"http://10.1.4.10:8080/healthz\": context deadline exceeded
[pod/watcher-0/kubectl] 0s          Warning   Unhealthy   pod/api-5f6d7c8b9-z9x8c        Liveness probe failed: Get \"http://10.1.4.11:8080/healthz\": context deadline exceeded
0s          Warning   Unhealthy   pod/api-5f6d7c8b9-q2w3e        Liveness probe failed: Get \"http://10.1.4.12:8080/healthz\": context deadline exceeded
";
    let table = "LAST SEEN   TYPE      REASON      OBJECT                         MESSAGE
0s          Normal    Pulled      pod/api-5f6d7c8b9-q2w3e        Container image \"api:1.4\" already present on machine
".to_string()
        + &failures.repeat(3)
        + "[pod/watcher-0/kubectl] 0s          Normal    Started     pod/web-7d9c8b6f5-m4n5b        Started container web
0s          Normal    Pulled      pod/api-5f6d7c8b9-b1b1b        Container image \"api:1.4\" already present on machine
0s          Normal    Pulled      pod/api-5f6d7c8b9-b2b2b        Container image \"api:1.4\" already present on machine
[pod/watcher-0/kubectl] 0s          Normal    Pulled      pod/api-5f6d7c8b9-b3b3b        Container image \"api:1.4\" already present on machine";
    let lines: Vec<String> = table.lines().map(str::to_string).collect();
    assert_same("events table", &lines);
    // Four replicas of api are alive (lines behind the watcher's kubectl
    // prefix belong to its own pod, which the `pod` alias reads first), two
    // failing: the quiet ones count, though they appear only after `pod/`
    // in lines no rule matches.
    let out = by_line(&lines).0;
    assert!(out.contains("2 of 4 replicas of api"), "{out}");
}
