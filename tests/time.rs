//! Time passes between lines. When event time moves on — by a
//! line, by the live clock, at the end — everything due before the new
//! time happens first, each at its own instant, and only then the line
//! acts. So lines that match no rule change nothing: whether an hour of
//! silence holds a heartbeat every ten seconds or no line at all, every
//! notification comes out with the same state at the same instant, for
//! every detector kind; and `sigwatch test`, `replay` and `run` agree on
//! the same lines.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use sigwatch::alert::{AlertState, Notification};
use sigwatch::source::Source;
use sigwatch::{Engine, Options};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

const S: i64 = 1_000_000_000;
/// 2024-05-01T12:00:00Z.
const T0: i64 = 1_714_564_800 * S;

/// One rule of every detector kind, with `for`, `resolve_after`,
/// `repeat_interval` and `resolve_on` among them, and novelty.
const RULES: &str = r#"
novelty: {levels: [error], learn_for: 1m, learn_lines: 3, min_count: 2, min_groups: 2, window: 2m, for: 10s}
rules:
  - id: p.count
    title: Disk full
    severity: warning
    match: {contains: ["disk full"]}
    group_by: node
    detect: {count: {threshold: 3, window: 2m}}
    resolve_after: 1m
    repeat_interval: 10m
  - id: p.count_for
    title: Slow queries
    severity: warning
    match: {contains: ["slow query"]}
    group_by: node
    detect: {count: {threshold: 2, window: 1m}}
    for: 20s
    resolve_on: {contains: ["queries fast again"]}
  - id: p.persist
    title: Stuck draining
    severity: warning
    match: {contains: ["waiting for exit"]}
    group_by: node
    detect: {persist: {for: 1m, max_gap: 20s}}
  - id: p.spread
    title: Redis refused everywhere
    severity: warning
    match: {contains: ["redis refused"]}
    group_by: node
    detect: {spread: {window: 1m, groups: 2}}
    resolve_after: 30s
  - id: p.spread_fraction
    title: Half the fleet times out
    severity: warning
    match: {contains: ["dial timeout"]}
    group_by: node
    detect: {spread: {window: 1m, fraction: 0.5, min_groups: 2}}
  - id: p.share
    title: Black hole
    severity: warning
    match: {contains: ["egress failed"]}
    group_by: node
    detect: {share: {window: 2m, min_total: 3, min_share: 0.7, min_groups: 2}}
  - id: p.absent
    title: Heartbeat missing
    severity: warning
    match: {contains: ["beat ok"]}
    group_by: node
    detect: {absent: {for: 1m}}
    for: 10s
    repeat_interval: 5m
  - id: p.sequence
    title: Drain failed after shutdown
    severity: warning
    match: {contains: ["shutting down"]}
    group_by: node
    detect:
      sequence:
        then: {contains: ["drain failed"]}
        within: 1m
"#;

fn rules() -> sigwatch::rules::RuleSet {
    sigwatch::rules::compile(&[("p.yaml".into(), RULES.into())]).unwrap()
}

/// What a node logs, one message per signature (and one that only the
/// miner reads).
const MESSAGES: &[&str] = &[
    "disk full on /data",
    "slow query took 3s",
    "queries fast again",
    "waiting for exit",
    "redis refused connection",
    "dial timeout to 10.0.0.9",
    "egress failed: no space",
    "beat ok",
    "shutting down",
    "drain failed",
    "cache shard 7 rebuilt from snapshot",
];

/// A node's line at `t` (ns).
fn line(t: i64, msg: &str, node: &str) -> String {
    let ts = sigwatch::clock::format_rfc3339(t);
    format!(r#"{{"level":"error","ts":"{ts}","msg":"{msg}","nodeID":"{node}"}}"#)
}

/// A line that matches no rule, names no node and is never mined.
fn filler(t: i64) -> String {
    let ts = sigwatch::clock::format_rfc3339(t);
    format!(r#"{{"level":"debug","ts":"{ts}","msg":"tick","component":"clock"}}"#)
}

/// Every notification by alert, in order: what it says and when.
type ByAlert = BTreeMap<(String, String), Vec<String>>;

fn by_alert(out: &[Notification]) -> ByAlert {
    let mut m: ByAlert = BTreeMap::new();
    for n in out {
        m.entry((n.rule.clone(), n.group.clone()))
            .or_default()
            .push(format!(
                "{:?} at {} starts {} ends {:?} count {} repeat {} {:?}",
                n.state,
                sigwatch::clock::format_rfc3339(n.at),
                n.starts_at.as_str(),
                n.ends_at.as_ref().map(|s| s.as_str().to_string()),
                n.count,
                n.repeat,
                n.annotations.get("summary")
            ));
    }
    m
}

/// Feeds `(time, source, text)` lines in time order, then ends at `end`.
fn replay(lines: &[(i64, &str, String)], end: i64) -> Vec<Notification> {
    let mut e = Engine::new(rules(), Options::default()).unwrap();
    let mut out = Vec::new();
    for (_, src, text) in lines {
        e.push_line(&Source::named(src), text, None, &mut out);
    }
    e.advance_to(end + Options::default().lateness_ns, &mut out);
    e.finish(&mut out);
    out
}

/// A scenario: runs of one node's message (a line, or a few dozen a few
/// seconds apart) after generated steps (small ones and long silences),
/// fillers at generated instants strictly inside its span.
fn scenario() -> impl Strategy<Value = (Vec<(i64, String, String)>, Vec<i64>)> {
    let step = prop_oneof![
        6 => 0i64..4_000,
        3 => 4_000i64..40_000,
        1 => 300_000i64..7_200_000,
    ];
    let run = (
        step,
        0..MESSAGES.len(),
        prop::sample::select(vec!["n1", "n2", "n3", "n4"]),
        prop_oneof![2 => Just(1u32), 1 => 2u32..25],
        1_000i64..15_000,
    );
    (
        prop::collection::vec(run, 1..60),
        prop::collection::vec(0.0f64..1.0, 0..200),
    )
        .prop_map(|(runs, fill)| {
            let mut t = T0;
            let mut lines: Vec<(i64, String, String)> = Vec::new();
            for (ms, m, node, repeat, every) in runs {
                t += ms * 1_000_000;
                for i in 0..i64::from(repeat) {
                    if i > 0 {
                        t += every * 1_000_000;
                    }
                    lines.push((t, node.to_string(), line(t, MESSAGES[m], node)));
                }
            }
            let (first, last) = (lines[0].0, lines[lines.len() - 1].0);
            let fillers = fill
                .into_iter()
                .map(|f| first + ((last - first) as f64 * f) as i64)
                .collect();
            (lines, fillers)
        })
}

/// Lines as fed to the engine: event time, stream, text.
type Fed = Vec<(i64, &'static str, String)>;

/// The node lines, alone and with fillers among them (each filler after
/// the node lines of its instant).
fn with_and_without(lines: &[(i64, String, String)], fillers: &[i64]) -> (Fed, Fed) {
    let plain: Fed = lines
        .iter()
        .map(|(t, node, text)| (*t, stream(node), text.clone()))
        .collect();
    let mut filled = plain.clone();
    filled.extend(fillers.iter().map(|&t| (t, "filler", filler(t))));
    filled.sort_by_key(|(t, src, _)| (*t, *src == "filler"));
    (plain, filled)
}

fn stream(node: &str) -> &'static str {
    match node {
        "n1" => "pod-1",
        "n2" => "pod-2",
        "n3" => "pod-3",
        _ => "pod-4",
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn lines_that_match_no_rule_change_no_notification((lines, fillers) in scenario()) {
        let (plain, filled) = with_and_without(&lines, &fillers);
        let end = lines[lines.len() - 1].0 + 3 * 3_600 * S;
        let a = by_alert(&replay(&plain, end));
        let b = by_alert(&replay(&filled, end));
        prop_assert_eq!(a, b);
    }
}

/// The kinds the property covers do fire in its scenarios: a property
/// over silent rules would hold for nothing.
#[test]
fn the_scenarios_exercise_every_rule() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut fired: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for _ in 0..96 {
        let (lines, fillers) = scenario().new_tree(&mut runner).unwrap().current();
        let (_, filled) = with_and_without(&lines, &fillers);
        for n in replay(&filled, lines[lines.len() - 1].0 + 3 * 3_600 * S) {
            let e = fired.entry(n.rule.clone()).or_default();
            match n.state {
                AlertState::Firing => e.0 += 1,
                AlertState::Resolved => e.1 += 1,
            }
        }
    }
    for id in rules().rules.iter().map(|r| r.id.clone()) {
        let (f, r) = fired.get(&id).copied().unwrap_or_default();
        assert!(
            f > 0 && r > 0,
            "{id}: fired {f}, resolved {r} in 96 scenarios: {fired:?}"
        );
    }
}

/// The count example of docs/rules.md, twice an hour apart: each burst
/// fires at its third failure, goes quiet when the first leaves the
/// two-minute window and resolves a minute later,
/// with an hour of silence — or of heartbeats — between them.
#[test]
fn two_bursts_an_hour_apart_resolve_on_time_with_or_without_lines_between() {
    let burst = |from: i64| (0..3).map(move |i| from + i * 40 * S);
    let times: Vec<i64> = burst(T0).chain(burst(T0 + 3_600 * S)).collect();
    let lines: Vec<(i64, String, String)> = times
        .iter()
        .map(|&t| {
            (
                t,
                "n1".to_string(),
                line(t, "disk full on /data", "NE_d1sk"),
            )
        })
        .collect();
    let heartbeats: Vec<i64> = (1..360).map(|i| T0 + 80 * S + i * 10 * S).collect();
    let (plain, filled) = with_and_without(&lines, &heartbeats);
    let expect = [
        ("firing", "12:01:20.000"),
        ("resolved", "12:03:00.000"),
        ("firing", "13:01:20.000"),
        ("resolved", "13:03:00.000"),
    ];
    for input in [&plain, &filled] {
        let out = replay(input, T0 + 4 * 3_600 * S);
        let got: Vec<(&str, String)> = out
            .iter()
            .filter(|n| n.rule == "p.count")
            .map(|n| {
                let state = match n.state {
                    AlertState::Firing => "firing",
                    AlertState::Resolved => "resolved",
                };
                (
                    state,
                    sigwatch::clock::format_rfc3339(n.at)[11..23].to_string(),
                )
            })
            .collect();
        let want: Vec<(&str, String)> = expect.iter().map(|(s, t)| (*s, t.to_string())).collect();
        assert_eq!(got, want, "{} lines", input.len());
        // The second episode counts its own three failures.
        let second = out.iter().filter(|n| n.rule == "p.count").nth(2).unwrap();
        assert_eq!(second.count, 3);
        assert_eq!(second.starts_at.as_str(), "2024-05-01T13:01:20.000Z");
    }
}

/// The same six lines through `sigwatch replay`, `sigwatch run` (stdin)
/// and `sigwatch test`: one firing and one resolution per burst, at the
/// same instants.
#[test]
fn test_replay_and_run_agree_on_a_quiet_hour() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("disk.yaml");
    std::fs::write(
        &rules,
        r#"rules:
  - id: ex.disk_full
    title: Disk full
    severity: warning
    match: {contains: ["No space left on the resource."]}
    group_by: node
    detect: {count: {threshold: 3, window: 5m}}
"#,
    )
    .unwrap();
    let log = dir.path().join("two-bursts.log");
    let mut text = String::new();
    for from in [0, 3_600] {
        for i in 0..3 {
            let t = 1_714_564_800 + from + 40 * i;
            text.push_str(&format!(
                "{{\"level\":\"error\",\"ts\":{t},\"msg\":\"No space left on the resource.\",\"nodeID\":\"NE_d1sk\"}}\n"
            ));
        }
    }
    std::fs::write(&log, &text).unwrap();
    let common_args = ["--no-builtin-rules", "--log-level", "error", "--no-links"];
    let replay = Command::new(common::BIN)
        .arg("replay")
        .args(common_args)
        .arg("--no-summary")
        .arg("--rules")
        .arg(&rules)
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    let mut run = Command::new(common::BIN)
        .arg("run")
        .args(common_args)
        .arg("--rules")
        .arg(&rules)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    run.stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let run = run.wait_with_output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let states = |out: &[u8]| -> Vec<(String, String, Option<String>)> {
        String::from_utf8_lossy(out)
            .lines()
            .map(|l| {
                let n: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    n["state"].as_str().unwrap().to_string(),
                    n["starts_at"].as_str().unwrap().to_string(),
                    n["ends_at"].as_str().map(str::to_string),
                )
            })
            .collect()
    };
    let want = vec![
        (
            "firing".to_string(),
            "2024-05-01T12:01:20.000Z".to_string(),
            None,
        ),
        (
            "resolved".to_string(),
            "2024-05-01T12:01:20.000Z".to_string(),
            Some("2024-05-01T12:10:00.000Z".to_string()),
        ),
        (
            "firing".to_string(),
            "2024-05-01T13:01:20.000Z".to_string(),
            None,
        ),
    ];
    assert_eq!(states(&replay.stdout), want, "replay");
    // Live, a lane still holding an alert's firing when its resolve and
    // its next firing come sends the latest state only (notify::lane): what
    // `run` prints is the replay's notifications, in order, with some
    // left out, and ends where the replay ends.
    let live = states(&run.stdout);
    let mut rest = want.iter();
    for n in &live {
        assert!(
            rest.any(|w| w == n),
            "run printed {n:?}, not in order in {want:?}"
        );
    }
    assert_eq!(live.last(), want.last(), "run on stdin: {live:?}");
    // The rule test of the issue, at its instants to the second.
    let tests = dir.path().join("two-bursts.yaml");
    std::fs::write(
        &tests,
        r#"tests:
  - name: two bursts an hour apart
    input:
      - {at: +0s, every: 40s, repeat: 3, line: '{"level":"error","ts":{{ts}},"msg":"No space left on the resource.","nodeID":"NE_d1sk"}'}
      - {at: +1h, every: 40s, repeat: 3, line: '{"level":"error","ts":{{ts}},"msg":"No space left on the resource.","nodeID":"NE_d1sk"}'}
    end: +2h
    tolerance: 0s
    expect:
      - {rule: ex.disk_full, group: NE_d1sk, at: +1m20s}
      - {rule: ex.disk_full, group: NE_d1sk, state: resolved, at: +10m}
      - {rule: ex.disk_full, group: NE_d1sk, at: +1h1m20s}
      - {rule: ex.disk_full, group: NE_d1sk, state: resolved, at: +1h10m}
"#,
    )
    .unwrap();
    let test = Command::new(common::BIN)
        .args(["test", "--no-builtin-rules", "--rules"])
        .arg(&rules)
        .arg(&tests)
        .output()
        .unwrap();
    assert!(
        test.status.success(),
        "{}",
        String::from_utf8_lossy(&test.stdout)
    );
}
