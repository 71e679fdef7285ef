//! Every incident fixture yields exactly its expected set of (state, rule,
//! group), with the built-in pack; and the same incidents still do when the
//! logs arrive in other wrappers, with other IDs, at other times.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use sigwatch::alert::Notification;
use sigwatch::source::Source;
use sigwatch::{Engine, Options};
use std::collections::BTreeSet;
use std::path::Path;

fn replay_lines(lines: &[String]) -> (Vec<Notification>, sigwatch::Stats) {
    let set = sigwatch::rules::load_builtin().expect("built-in rules load");
    let mut e = Engine::new(set, Options::default()).expect("engine");
    let src = Source::named("fixture");
    let mut out = Vec::new();
    for l in lines {
        e.push_line(&src, l, None, &mut out);
    }
    e.finish(&mut out);
    (out, e.stats())
}

fn lines_of(name: &str) -> Vec<String> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .map(str::to_string)
        .collect()
}

fn set_of(out: &[Notification]) -> BTreeSet<String> {
    out.iter()
        .map(|n| {
            format!(
                "{} {} {}",
                serde_json::to_value(n.state).unwrap().as_str().unwrap(),
                n.rule,
                n.group
            )
        })
        .collect()
}

fn expected(name: &str) -> BTreeSet<String> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name.replace(".log", ".expected"));
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn check(name: &str) {
    let (out, _) = replay_lines(&lines_of(name));
    assert_eq!(set_of(&out), expected(name), "{name}");
}

#[test]
fn livekit_redis_outage() {
    check("livekit-redis-outage.log");
    let (out, _) = replay_lines(&lines_of("livekit-redis-outage.log"));
    // One Redis alert for the LiveKit nodes (their container), and each
    // node named by its nodeID, including on `waiting for participants to
    // exit`, which carries none.
    let redis: Vec<_> = out
        .iter()
        .filter(|n| n.rule == "livekit.redis_unreachable")
        .collect();
    assert_eq!(redis[0].group, "livekit-server");
    assert!(
        redis[0].annotations["summary"].contains("of 6 LiveKit nodes"),
        "{}",
        redis[0].annotations["summary"]
    );
    let stuck: BTreeSet<_> = out
        .iter()
        .filter(|n| n.rule == "livekit.drain_stuck")
        .map(|n| n.group.clone())
        .collect();
    let failed: BTreeSet<_> = out
        .iter()
        .filter(|n| n.rule == "livekit.drain_failed")
        .map(|n| n.group.clone())
        .collect();
    assert_eq!(stuck.len(), 6);
    assert_eq!(stuck, failed);
    assert!(stuck.iter().all(|g| g.starts_with("ND_")));
}

#[test]
fn egress_black_hole() {
    check("egress-black-hole.log");
    let (out, _) = replay_lines(&lines_of("egress-black-hole.log"));
    let bh = out.iter().find(|n| n.rule == "egress.black_hole").unwrap();
    assert!(bh.share.unwrap() >= 0.8);
    assert!(bh.samples.len() <= 3 && !bh.samples.is_empty());
}

#[test]
fn the_same_incidents_fetched_with_kubectl_logs_timestamps() {
    // The fixtures as `kubectl logs --timestamps` prints them (see
    // fixtures/gen.py): the same alerts, and a quiet quiet day.
    check("livekit-redis-outage-timestamps.log");
    check("egress-black-hole-timestamps.log");
    let (out, stats) = replay_lines(&lines_of("control-day-timestamps.log"));
    assert!(out.is_empty(), "{:#?}", set_of(&out));
    assert!(
        stats.decode.formats.stamped > 5000,
        "{:?}",
        stats.decode.formats
    );
}

#[test]
fn k8s_liveness_cascade() {
    check("k8s-liveness-cascade.log");
}

#[test]
fn grpc_slow_auth() {
    check("grpc-slow-auth.log");
}

#[test]
fn livekit_deadlock_cri_partials() {
    check("livekit-deadlock-cri.log");
    let (_, stats) = replay_lines(&lines_of("livekit-deadlock-cri.log"));
    assert!(stats.decode.partial_chunks >= 2, "{:?}", stats.decode);
}

/// A fixture replayed with the pack: its notifications, and per rule the
/// matches and the matches not counted (`unless`).
fn replay_counting(name: &str) -> (Vec<Notification>, Vec<(String, u64, u64)>) {
    let set = sigwatch::rules::load_builtin().expect("built-in rules load");
    let mut e = Engine::new(set, Options::default()).expect("engine");
    let src = Source::named("fixture");
    let mut out = Vec::new();
    for l in lines_of(name) {
        e.push_line(&src, &l, None, &mut out);
    }
    e.finish(&mut out);
    let per_rule = e
        .rule_stats()
        .into_iter()
        .zip(e.rule_discounted())
        .map(|((id, hits, _), d)| (id, hits, d))
        .collect();
    (out, per_rule)
}

fn matches_of(per_rule: &[(String, u64, u64)], rule: &str) -> (u64, u64) {
    per_rule
        .iter()
        .find(|r| r.0 == rule)
        .map(|r| (r.1, r.2))
        .unwrap_or_default()
}

#[test]
fn a_rolling_update_scale_events_a_drain_and_restarts_page_nothing() {
    // Three hours of a cluster's weekly maintenance (fixtures/routine.py):
    // a rolling update, a StatefulSet restart, HPA and cluster-autoscaler
    // scale-up and scale-down, a node drain, a deleted pod, an OOM restart.
    // With the application logs, and as an event exporter sees it alone
    // (then the pods that change are most of the population).
    for name in [
        "routine-k8s-maintenance.log",
        "routine-k8s-maintenance-events.log",
    ] {
        let (out, per_rule) = replay_counting(name);
        assert!(out.is_empty(), "{name}: {:#?}", set_of(&out));
        // The probe failures were there and were read: starting and
        // stopping pods' failures are not counted, the rest too few.
        let (hits, discounted) = matches_of(&per_rule, "k8s.readiness_lost");
        assert!(hits >= 60, "{name}: {hits} readiness failures read");
        assert!(
            discounted * 10 >= hits * 7,
            "{name}: {discounted} of {hits} failures were of starting or stopping pods"
        );
    }
}

#[test]
fn a_planned_livekit_upgrade_with_long_meetings_pages_nothing() {
    // Four livekit-server pods drained in turn for 13-22 minutes each while
    // their participants leave, an egress rolling update, a Redis restart,
    // a scale-down (fixtures/routine.py).
    for name in [
        "routine-livekit-upgrade.log",
        "routine-livekit-upgrade-events.log",
    ] {
        let (out, _) = replay_counting(name);
        assert!(out.is_empty(), "{name}: {:#?}", set_of(&out));
    }
    let (_, per_rule) = replay_counting("routine-livekit-upgrade.log");
    let (waiting, _) = matches_of(&per_rule, "livekit.drain_stuck");
    assert!(
        waiting > 500,
        "the drains were read: {waiting} waiting lines"
    );
    let (redis, _) = matches_of(&per_rule, "livekit.redis_unreachable");
    assert!(redis > 10, "the Redis restart was read: {redis} errors");
}

#[test]
fn control_day_fires_nothing_and_survives_hostile_lines() {
    let (out, stats) = replay_lines(&lines_of("control-day.log"));
    assert!(out.is_empty(), "{:#?}", set_of(&out));
    assert!(
        stats.decode.malformed >= 1,
        "the truncated JSON line is counted"
    );
    assert!(
        stats.alerts.pending_dropped >= 1,
        "the Redis blip went pending and never fired"
    );
    assert!(stats.decode.lines > 5000);
}

#[test]
fn replay_is_deterministic() {
    let lines = lines_of("livekit-redis-outage.log");
    let a = serde_json::to_string(&replay_lines(&lines).0).unwrap();
    let b = serde_json::to_string(&replay_lines(&lines).0).unwrap();
    assert_eq!(a, b);
}

/// `[pod/P/C] rest` → stern's `P C rest`.
fn to_stern(l: &str) -> String {
    let Some(rest) = l.strip_prefix("[pod/") else {
        return l.to_string();
    };
    let (inner, body) = rest.split_once("] ").unwrap();
    let (pod, c) = inner.split_once('/').unwrap();
    format!("{pod} {c} {body}")
}

#[test]
fn same_incident_through_stern_with_other_ids_and_times() {
    // Other node IDs, pods and a shifted clock: the mechanism, not the fixture.
    let shift = |l: &str| -> String {
        let l = l.replace("ND_", "ND_z").replace("livekit-server-", "lk-");
        // Shift zap JSON float timestamps by one day.
        if let Some(i) = l.find("\"ts\":") {
            let j = i + 5;
            let end = l[j..]
                .find(|c: char| c != '.' && !c.is_ascii_digit())
                .map(|k| j + k)
                .unwrap();
            let ts: f64 = l[j..end].parse().unwrap();
            return format!("{}{:.6}{}", &l[..j], ts + 86400.0, &l[end..]);
        }
        l
    };
    let lines: Vec<String> = lines_of("livekit-redis-outage.log")
        .iter()
        .map(|l| to_stern(&shift(l)))
        .collect();
    let (out, _) = replay_lines(&lines);
    let got = set_of(&out);
    let want: BTreeSet<String> = expected("livekit-redis-outage.log")
        .iter()
        .map(|l| l.replace("ND_", "ND_z"))
        .collect();
    // Console lines keep their own clock (unshifted); the incident is still found.
    assert_eq!(got, want);
}

#[test]
fn same_incident_in_docker_json_file_wrappers() {
    // Each egress node's lines as Docker json-file, with kubectl prefixes.
    let lines: Vec<String> = lines_of("egress-black-hole.log")
        .iter()
        .map(|l| {
            let (pod, rest) = l.split_once(' ').unwrap();
            let (c, body) = rest.split_once(' ').unwrap();
            let wrapped = serde_json::json!({"log": format!("{body}\n"), "stream": "stderr", "time": "2025-07-16T12:00:00.000000001Z"});
            format!("[pod/{pod}/{c}] {wrapped}")
        })
        .collect();
    let (out, _) = replay_lines(&lines);
    assert_eq!(set_of(&out), expected("egress-black-hole.log"));
}

#[test]
fn a_short_outage_below_for_does_not_page() {
    // Cut the Redis outage fixture to its first 20 s of errors: the spread
    // holds, but not for the rule's 30 s.
    let lines = lines_of("livekit-redis-outage.log");
    let first = lines
        .iter()
        .position(|l| l.contains("could not update node"))
        .unwrap();
    let ts = |l: &str| -> Option<f64> {
        let i = l.find("\"ts\":")? + 5;
        let e = l[i..].find(',')? + i;
        l[i..e].parse().ok()
    };
    let t0 = lines[first..].iter().find_map(|l| ts(l)).unwrap();
    let kept: Vec<String> = lines
        .iter()
        .filter(|l| {
            !(l.contains("could not update node") || l.contains("redis:"))
                || ts(l).is_some_and(|t| t < t0 + 20.0)
        })
        .filter(|l| !l.contains("draining") && !l.contains("waiting for participants"))
        .cloned()
        .collect();
    let (out, stats) = replay_lines(&kept);
    assert!(
        out.iter().all(|n| n.rule != "livekit.redis_unreachable"),
        "{:?}",
        set_of(&out)
    );
    assert!(stats.alerts.pending_dropped >= 1);
}

#[test]
fn k8s_readiness_loss_from_pretty_printed_events() {
    check("k8s-readiness-loss.log");
    let (_, stats) = replay_lines(&lines_of("k8s-readiness-loss.log"));
    assert!(stats.decode.json_blocks > 20, "{:?}", stats.decode);
}

#[test]
fn liveness_cascade_from_the_kubectl_events_table() {
    // `kubectl get events -w` prints a table: no timestamps, the pod only
    // as `pod/NAME` in the text, and a row each time an event repeats
    // (the kubelet's third failure is the one that restarts the pod).
    let mut table = "LAST SEEN   TYPE      REASON      OBJECT                         MESSAGE
0s          Normal    Pulled      pod/api-5f6d7c8b9-q2w3e        Container image \"api:1.4\" already present on machine
".to_string();
    for _ in 0..3 {
        for (pod, ip) in [("a1s2d", 10), ("z9x8c", 11), ("q2w3e", 12)] {
            table.push_str(&format!(
                "0s          Warning   Unhealthy   pod/api-5f6d7c8b9-{pod}        Liveness probe failed: Get \"http://10.1.4.{ip}:8080/healthz\": context deadline exceeded\n"
            ));
        }
    }
    table.push_str(
        "0s          Normal    Started     pod/web-7d9c8b6f5-m4n5b        Started container web",
    );
    let lines: Vec<String> = table.lines().map(str::to_string).collect();
    let (out, _) = replay_lines(&lines);
    assert_eq!(
        set_of(&out),
        ["firing k8s.liveness_spread api".to_string()]
            .into_iter()
            .collect()
    );
    assert!(
        out[0].annotations["summary"].contains("of 3 replicas of api"), // spread is evaluated on the 1 s tick
        "{}",
        out[0].annotations["summary"]
    );
}

#[test]
fn late_events_are_counted_and_placed_at_the_watermark() {
    let set = sigwatch::rules::compile(&[(
        "t.yaml".into(),
        "rules:\n  - id: t\n    title: t\n    severity: info\n    match: {contains: BOOM}\n    detect: {count: {threshold: 2, window: 10s}}\n".into(),
    )])
    .unwrap();
    let mut e = Engine::new(set, Options::default()).unwrap();
    let src = Source::named("s");
    let mut out = Vec::new();
    e.push_line(&src, r#"{"ts":1764001000,"msg":"BOOM"}"#, None, &mut out);
    e.push_line(&src, r#"{"ts":1764001001,"msg":"tick"}"#, None, &mut out);
    // 60 s behind the newest event: beyond the 5 s lateness.
    e.push_line(&src, r#"{"ts":1764000941,"msg":"BOOM"}"#, None, &mut out);
    e.finish(&mut out);
    assert_eq!(e.stats().late, 1);
    assert_eq!(
        out.len(),
        1,
        "the late match still counts, at the watermark"
    );
    // Within the lateness allowance nothing is late.
    let set = sigwatch::rules::load_builtin().unwrap();
    let mut e = Engine::new(set, Options::default()).unwrap();
    e.push_line(&src, r#"{"ts":1764001000,"msg":"a"}"#, None, &mut out);
    e.push_line(&src, r#"{"ts":1764000997,"msg":"b"}"#, None, &mut out);
    assert_eq!(e.stats().late, 0);
}

#[test]
fn same_incident_through_fluent_bit_envelopes() {
    // A shipper's records on one stream: the pod comes from the envelope's
    // kubernetes metadata, the node from the line inside `log`.
    let lines: Vec<String> = lines_of("livekit-redis-outage.log")
        .iter()
        .map(|l| {
            let rest = l.strip_prefix("[pod/").unwrap();
            let (inner, body) = rest.split_once("] ").unwrap();
            let (pod, c) = inner.split_once('/').unwrap();
            serde_json::json!({
                "date": 1751371200.0,
                "log": format!("{body}\n"),
                "stream": "stderr",
                "kubernetes": {"pod_name": pod, "container_name": c, "namespace_name": "livekit", "host": "worker-1"}
            })
            .to_string()
        })
        .collect();
    let (out, stats) = replay_lines(&lines);
    assert_eq!(set_of(&out), expected("livekit-redis-outage.log"));
    assert_eq!(stats.decode.multiplexed_streams, 0);
}

#[test]
fn a_restart_mid_incident_neither_pages_again_nor_loses_alerts() {
    let lines = lines_of("livekit-redis-outage.log");
    let set = sigwatch::rules::load_builtin().unwrap();
    let src = Source::named("fixture");
    // First run, until every drain_stuck alert has fired.
    let mut first = Engine::new(set.clone(), Options::default()).unwrap();
    let mut a = Vec::new();
    let mut split = 0;
    for (i, l) in lines.iter().enumerate() {
        first.push_line(&src, l, None, &mut a);
        if a.iter().filter(|n| n.rule == "livekit.drain_stuck").count() == 6 {
            split = i + 1;
            break;
        }
    }
    assert!(
        split > 0 && split < lines.len() - 100,
        "the incident goes on after the restart"
    );
    let saved = first.checkpoint();
    let mut firing: BTreeSet<(String, String)> = BTreeSet::new();
    for n in &a {
        let k = (n.rule.clone(), n.group.clone());
        if n.state == sigwatch::alert::AlertState::Firing {
            firing.insert(k);
        } else {
            firing.remove(&k);
        }
    }
    assert!(firing.len() >= 12, "{firing:?}");
    assert!(
        saved.alerts.len() >= firing.len(),
        "every firing alert is saved"
    );
    // The saved state survives serialisation, as on disk.
    let saved: sigwatch::engine::EngineState =
        serde_json::from_str(&serde_json::to_string(&saved).unwrap()).unwrap();

    let rest = |adopt: bool| {
        let mut e = Engine::new(set.clone(), Options::default()).unwrap();
        let mut out = Vec::new();
        if adopt {
            let s = e.restore_checkpoint(saved.clone(), &mut out);
            assert_eq!(s.kept, set.rules.len(), "{s:?}");
            assert!(out.is_empty(), "restoring pages nothing: {out:?}");
        }
        for l in &lines[split..] {
            e.push_line(&src, l, None, &mut out);
        }
        e.finish(&mut out);
        (out, e.firing())
    };
    // A page for an alert already firing, under its own name or (sticky
    // nodeID lost) its pod's.
    let repaged = |out: &[Notification]| -> Vec<(String, String)> {
        out.iter()
            .filter(|n| n.state == sigwatch::alert::AlertState::Firing && !n.repeat)
            .map(|n| (n.rule.clone(), n.group.clone()))
            .collect()
    };
    let (without, firing_without) = rest(false);
    let (with, firing_with) = rest(true);
    // Without saved state a restart either pages again or forgets what was
    // firing (the stuck drains are no longer known to be firing): the test
    // has teeth.
    assert!(
        !repaged(&without).is_empty() || firing_without < firing_with,
        "without saved state the restart neither pages again nor forgets: {firing_without} vs {firing_with} firing"
    );
    assert!(
        repaged(&with).is_empty(),
        "paged again: {:?}",
        repaged(&with)
    );
    // Nothing lost: the union of both runs has every expected alert.
    let all: BTreeSet<String> = set_of(&a).union(&set_of(&with)).cloned().collect();
    for want in expected("livekit-redis-outage.log") {
        if want.starts_with("firing") {
            assert!(all.contains(&want), "lost {want}");
        }
    }
}
