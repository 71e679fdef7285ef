//! Bounded memory under cardinality: 1,000,000 distinct node keys stream
//! through; every per-rule map stays within `max_groups` (LRU), evictions
//! are counted, and the process's resident memory grows by less than the
//! documented bound (64 MiB) however many keys go by.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use sigwatch::source::Source;
use sigwatch::{Engine, Options};

/// Resident memory is the process's: the tests that measure it run one at
/// a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_million_node_keys_stay_within_max_groups() {
    let _one_at_a_time = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let set = sigwatch::rules::load_builtin().unwrap();
    let max_groups = set.rules.iter().map(|r| r.max_groups).max().unwrap();
    let mut e = Engine::new(set, Options::default()).unwrap();
    let src = Source::named("stdin");
    let mut out = Vec::new();
    let mut line = String::new();
    let mut feed = |e: &mut Engine, i: u64, msg: &str| {
        use std::fmt::Write;
        line.clear();
        let _ = write!(
            line,
            "{{\"level\":\"error\",\"ts\":{},\"msg\":\"{msg}\",\"nodeID\":\"ND_{i:012}\"}}",
            1_764_000_000 + i / 1000
        );
        e.push_line(&src, &line, None, &mut out);
        out.clear();
    };
    // Warm up, then measure growth over the rest.
    for i in 0..50_000 {
        feed(
            &mut e,
            i,
            if i % 10 == 0 {
                "failed to mark as draining"
            } else {
                "room closed"
            },
        );
    }
    let before = rss_kib();
    for i in 50_000..1_000_000 {
        // Every node is new: population keys for every line, a count-rule
        // group for every tenth.
        feed(
            &mut e,
            i,
            if i % 10 == 0 {
                "failed to mark as draining"
            } else {
                "room closed"
            },
        );
    }
    let grown_mib = rss_kib().saturating_sub(before) / 1024;
    let s = e.stats();
    assert_eq!(s.decode.lines, 1_000_000);
    assert!(
        s.evicted_groups >= 1_000_000 - 5 * max_groups as u64,
        "evictions counted: {}",
        s.evicted_groups
    );
    for (rule, _, evicted) in e.rule_stats() {
        if rule == "livekit.drain_failed" {
            assert!(evicted >= 100_000 - max_groups as u64, "{rule}: {evicted}");
        }
    }
    assert!(
        grown_mib < 64,
        "resident memory grew {grown_mib} MiB over 950k new keys"
    );
}

#[test]
fn a_pod_per_line_stays_bounded_in_partitions_and_exported_series() {
    let _one_at_a_time = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Every line from a pod of its own: a new stream, a new workload (a
    // partition of the spread rules that split by workload) and a new node
    // in every population, none matching a rule.
    let set = sigwatch::rules::load_builtin().unwrap();
    let cluster_rules = set
        .rules
        .iter()
        .filter(|r| {
            matches!(
                r.detect,
                sigwatch::rules::Detect::Spread(_) | sigwatch::rules::Detect::Share(_)
            )
        })
        .count();
    let mut e = Engine::new(set, Options::default()).unwrap();
    let src = Source::named("stdin");
    let mut out = Vec::new();
    let mut line = String::new();
    let mut feed = |e: &mut Engine, i: u64| {
        use std::fmt::Write;
        line.clear();
        let _ = write!(
            line,
            "[pod/svc{i}-7f9c6d5b4-x2v9q/app] {{\"level\":\"info\",\"ts\":{}.{:03},\"msg\":\"room participant count\",\"nodeID\":\"ND_{i:08}\"}}",
            1_764_000_000 + i / 1000,
            i % 1000
        );
        e.push_line(&src, &line, None, &mut out);
        out.clear();
    };
    for i in 0..20_000 {
        feed(&mut e, i);
    }
    let before = rss_kib();
    for i in 20_000..150_000 {
        feed(&mut e, i);
    }
    let grown_mib = rss_kib().saturating_sub(before) / 1024;
    eprintln!("resident memory grew {grown_mib} MiB over 130k new pods");
    let series = e.exports().series().len();
    assert!(
        series <= cluster_rules * sigwatch::engine::MAX_EXPORTED_GROUPS,
        "{series} exported series for {cluster_rules} cluster-wide rules"
    );
    assert!(
        e.stats().evicted_groups > 0,
        "partitions and groups past their bounds are counted"
    );
    assert!(
        grown_mib < 64,
        "resident memory grew {grown_mib} MiB over 130k new pods"
    );
}
