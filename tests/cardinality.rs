//! Bounded memory under cardinality: 1,000,000 distinct node keys stream
//! through; every per-rule map stays within `max_groups` (LRU), evictions
//! are counted, and the process's resident memory grows by less than the
//! documented bound (64 MiB) however many keys go by.

use sigwatch::source::Source;
use sigwatch::{Engine, Options};

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_million_node_keys_stay_within_max_groups() {
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
