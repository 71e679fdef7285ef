//! `sigwatch import loki-rules`: LogQL alerting rules into sigwatch rules,
//! exactly or not at all. A table of expressions and the rule each becomes,
//! a table of the ones left out and why, the written file loading through
//! `check`, the generated rule tests passing, and the pack's signatures
//! written as Loki rules firing on the incident fixtures where the pack's
//! rules fire.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use sigwatch::rules::logql::translate::{translate, Kind};
use sigwatch::rules::model::{FieldCond, NumBounds};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

fn eq(v: &str) -> FieldCond {
    FieldCond::Equals(v.into())
}

/// (LogQL, detector, group_by, match block parts as `key=value` strings).
const M: i64 = 60_000_000_000;

#[test]
fn each_construct_translates_to_its_rule() {
    struct Row {
        q: &'static str,
        kind: Kind,
        group_by: &'static [&'static str],
        check: fn(&sigwatch::rules::logql::translate::Cond),
    }
    let rows = [
        Row {
            q: r#"sum by (node_id) (count_over_time({app="livekit"} |= "failed to mark as draining" [5m])) > 0"#,
            kind: Kind::Count {
                threshold: 1,
                window_ns: 5 * M,
            },
            group_by: &["labels.node_id"],
            check: |c| {
                assert_eq!(c.contains_all, ["failed to mark as draining"]);
                assert_eq!(c.labels["app"], eq("livekit"));
            },
        },
        Row {
            // Selector operators: != is not-equal (a missing label passes),
            // =~ is anchored, !~ anchored and negated, ="" is absence.
            q: r#"sum(count_over_time({app="a", env!="dev", pod=~"api-.+", zone!~"eu-.+", canary=""} != "debug" [2m])) >= 3"#,
            kind: Kind::Count {
                threshold: 3,
                window_ns: 2 * M,
            },
            group_by: &[],
            check: |c| {
                assert_eq!(c.labels["env"], FieldCond::NotEquals("dev".into()));
                assert_eq!(c.labels["pod"], FieldCond::Regex("^(?:api-.+)$".into()));
                assert_eq!(c.labels["zone"], FieldCond::NotRegex("^(?:eu-.+)$".into()));
                assert_eq!(c.labels["canary"], FieldCond::Exists(false));
                assert_eq!(c.not_contains, ["debug"]);
            },
        },
        Row {
            // Line filters chained and with `or`; regex filters unanchored.
            q: r#"sum by (pod) (count_over_time({app="a"} |= "timeout" or "deadline" |= "rpc" |~ "code = (Unavailable|DeadlineExceeded)" !~ "health.?check" |= "x" or "y" [1m])) > 4"#,
            kind: Kind::Count {
                threshold: 5,
                window_ns: M,
            },
            group_by: &["labels.pod"],
            check: |c| {
                assert_eq!(c.contains, ["timeout", "deadline"]);
                assert_eq!(c.contains_all, ["rpc"]);
                assert_eq!(c.regex, ["code = (Unavailable|DeadlineExceeded)", "x|y"]);
                assert_eq!(c.not_regex, ["health.?check"]);
            },
        },
        Row {
            // rate × range = count: rate > 0.1 over 5m is more than 30 lines.
            q: r#"sum by (pod) (rate({app="a"} |= "error" [5m])) > 0.1"#,
            kind: Kind::Count {
                threshold: 31,
                window_ns: 5 * M,
            },
            group_by: &["labels.pod"],
            check: |_| {},
        },
        Row {
            // json: fields, levels as sigwatch reads them, numeric bounds
            // joined; the grouping label is the stream's, else the field's.
            q: r#"sum by (nodeID) (count_over_time({app="a"} | json | level="warning" and status >= 500 and status < 600 | __error__="" [10m])) > 2"#,
            kind: Kind::Count {
                threshold: 3,
                window_ns: 10 * M,
            },
            group_by: &["labels.nodeID", "nodeID"],
            check: |c| {
                assert_eq!(c.fields["level"], eq("warn"));
                assert_eq!(
                    c.fields["status"],
                    FieldCond::Number(NumBounds {
                        ge: Some(500.0),
                        lt: Some(600.0),
                        ..NumBounds::default()
                    })
                );
            },
        },
        Row {
            // json parameters map a label to a path; `or` of one label's values.
            q: r#"sum(count_over_time({app="a"} | json code="response.status", lvl="severity" | code="503" or code="504" | lvl=~"error|fatal" [5m])) > 0"#,
            kind: Kind::Count {
                threshold: 1,
                window_ns: 5 * M,
            },
            group_by: &[],
            check: |c| {
                assert_eq!(
                    c.fields["response.status"],
                    FieldCond::OneOf(vec!["503".into(), "504".into()])
                );
                // The raw field, not sigwatch's normalised level: as Loki reads it.
                assert_eq!(
                    c.fields["severity"],
                    FieldCond::Regex("^(?:error|fatal)$".into())
                );
            },
        },
        Row {
            q: r#"sum by (pod) (count_over_time({job="nginx"} | logfmt --strict | method!="GET", duration_ms > 250 [5m])) > 10"#,
            kind: Kind::Count {
                threshold: 11,
                window_ns: 5 * M,
            },
            group_by: &["labels.pod", "pod"],
            check: |c| {
                assert_eq!(c.fields["method"], FieldCond::NotEquals("GET".into()));
                assert_eq!(
                    c.fields["duration_ms"],
                    FieldCond::Number(NumBounds {
                        gt: Some(250.0),
                        ..NumBounds::default()
                    })
                );
            },
        },
        Row {
            // regexp: its captures are fields once a filter reads them.
            q: r#"sum by (upstream) (count_over_time({app="envoy"} | regexp "upstream=(?P<upstream>\\S+) code=(?P<code>\\d+)" | code >= 500 [1m])) > 0"#,
            kind: Kind::Count {
                threshold: 1,
                window_ns: M,
            },
            group_by: &["labels.upstream", "upstream"],
            check: |c| {
                assert_eq!(c.regex, [r"upstream=(?P<upstream>\S+) code=(?P<code>\d+)"]);
                assert!(matches!(c.fields["code"], FieldCond::Number(_)));
            },
        },
        Row {
            // pattern: the same, written as a pattern.
            q: r#"sum(count_over_time({app="web"} | pattern "<ip> - - <_> \"<method> <uri> <_>\" <status> <_>" | status="500" [1m])) > 0"#,
            kind: Kind::Count {
                threshold: 1,
                window_ns: M,
            },
            group_by: &[],
            check: |c| {
                let re = regex::Regex::new(&c.regex[0]).unwrap();
                let caps = re
                    .captures(
                        r#"10.0.0.1 - - [07/Dec/2026:10:00:00 +0000] "GET /x HTTP/1.1" 500 12"#,
                    )
                    .unwrap();
                assert_eq!(&caps["status"], "500");
                assert_eq!(c.fields["status"], eq("500"));
            },
        },
        Row {
            // N groups at once: spread.
            q: r#"count(sum by (pod) (count_over_time({app="web"} |= "Liveness probe failed" [3m])) > 0) >= 3"#,
            kind: Kind::Spread {
                groups: 3,
                window_ns: 3 * M,
                partition: None,
                partition_label: None,
            },
            group_by: &["labels.pod"],
            check: |_| {},
        },
        Row {
            // ... per partition.
            q: r#"count by (namespace) (sum by (namespace, pod) (count_over_time({app="web"} |= "Back-off restarting" [10m]))) > 2"#,
            kind: Kind::Spread {
                groups: 3,
                window_ns: 10 * M,
                partition: Some("labels.namespace".into()),
                partition_label: Some("namespace".into()),
            },
            group_by: &["labels.pod"],
            check: |_| {},
        },
        Row {
            // A group's part of the cluster's count: share.
            q: r#"sum by (nodeID) (count_over_time({app="egress"} |= "egress_failed" [15m])) / on() group_left sum(count_over_time({app="egress"} |= "egress_failed" [15m])) >= 0.8 and on() sum(count_over_time({app="egress"} |= "egress_failed" [15m])) > 9"#,
            kind: Kind::Share {
                window_ns: 15 * M,
                min_share: 0.8,
                min_total: 10,
            },
            group_by: &["labels.nodeID"],
            check: |_| {},
        },
        Row {
            q: r#"absent_over_time({app="livekit"} |= "updated node stats" [5m]) == 1"#,
            kind: Kind::Absent { for_ns: 5 * M },
            group_by: &[],
            check: |c| assert_eq!(c.contains_all, ["updated node stats"]),
        },
        Row {
            // A constant label in `by` is no grouping of its own; a number
            // on the left is turned round.
            q: r#"5 < sum by (app, pod) (count_over_time({app="a"} |= "panic" [1m]))"#,
            kind: Kind::Count {
                threshold: 6,
                window_ns: M,
            },
            group_by: &["labels.pod"],
            check: |_| {},
        },
    ];
    for r in rows {
        let t = translate(r.q)
            .unwrap_or_else(|s| panic!("{}: skipped: {} in {}", r.q, s.reason, s.part));
        assert_eq!(t.kind, r.kind, "{}", r.q);
        assert_eq!(t.group_by, r.group_by, "{}", r.q);
        (r.check)(&t.cond);
    }
}

#[test]
fn what_cannot_be_carried_is_skipped_with_its_reason_and_part() {
    let rows = [
        (
            r#"quantile_over_time(0.99, {app="a"} | logfmt | unwrap latency [5m]) by (pod) > 2"#,
            "unwrapped",
            "quantile_over_time",
        ),
        (
            r#"sum by (pod) (count_over_time({app="a"} | logfmt | unwrap bytes [5m])) > 2"#,
            "unwrap",
            "| unwrap bytes",
        ),
        (
            r#"sum(count_over_time({app="a"} |= "x" [5m] offset 1h)) > 0"#,
            "offset 1h",
            "offset",
        ),
        (
            r#"sum(bytes_over_time({app="a"} [5m])) > 1000"#,
            "bytes",
            "bytes_over_time",
        ),
        (
            r#"count_over_time({app="a"} |= "x" [5m]) > 1"#,
            "per stream",
            "count_over_time",
        ),
        (
            r#"max by (pod) (count_over_time({app="a"} |= "x" [5m])) > 1"#,
            "max by",
            "max by",
        ),
        (
            r#"sum by (pod, node) (count_over_time({app="a"} |= "x" [5m])) > 1"#,
            "2 labels",
            "",
        ),
        (
            r#"sum without (pod) (count_over_time({app="a"} |= "x" [5m])) > 1"#,
            "without",
            "",
        ),
        (
            r#"sum(count_over_time({app="a"} |= "x" [5m])) < 1"#,
            "<",
            "",
        ),
        (
            r#"sum(count_over_time({app="a"} | line_format "{{.msg}}" |= "x" [5m])) > 1"#,
            "line_format",
            "line_format",
        ),
        (
            r#"sum(count_over_time({app="a"} | json | latency > 10s [5m])) > 1"#,
            "10s",
            "latency > 10s",
        ),
        (
            r#"sum(count_over_time({app=~"a|"} |= "x" [5m])) > 1"#,
            "empty value",
            "app=~",
        ),
        (
            r#"sum by (n) (count_over_time({app="a"} |= "x" [5m])) / on() group_left sum(count_over_time({app="a"} |= "x" [5m])) > 0.3"#,
            "top group",
            "",
        ),
        (
            r#"sum by (n) (count_over_time({app="a"} |= "x" [5m])) / on() group_left sum(count_over_time({app="b"} |= "x" [5m])) > 0.8"#,
            "two different queries",
            "",
        ),
        (
            r#"job:errors:rate5m > 1"#,
            "recorded series",
            "job:errors:rate5m",
        ),
        (
            r#"sum(count_over_time({app="a"} |= ip("10.0.0.0/8") [5m])) > 1"#,
            "ip()",
            "",
        ),
        (
            r#"sum(count_over_time({app="a"} |= [5m])) > 1"#,
            "does not parse",
            "",
        ),
        (
            r#"sum(count_over_time({app="a"} |= "x" [5m])) > bool 1"#,
            "bool",
            "",
        ),
        (
            r#"sum(count_over_time({app="a"} | json | level="loud" [5m])) > 1"#,
            "level \"loud\"",
            "",
        ),
        (
            r#"sum(count_over_time({app="a"} | json | a="x" or b="y" [5m])) > 1"#,
            "or",
            "",
        ),
    ];
    for (q, reason, part) in rows {
        match translate(q) {
            Ok(t) => panic!("{q}: translated as {:?}", t.kind),
            Err(s) => {
                assert!(
                    s.reason.contains(reason),
                    "{q}: reason {:?} lacks {reason:?}",
                    s.reason
                );
                assert!(
                    s.part.contains(part),
                    "{q}: part {:?} lacks {part:?}",
                    s.part
                );
                assert!(!s.part.is_empty(), "{q}: no part");
            }
        }
    }
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_sigwatch")
}

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The pack's signatures as Loki rules: the command writes a file `check`
/// accepts and tests that `sigwatch test` passes; `for`, labels and
/// annotations come along; skipped rules say why and set the exit status.
#[test]
fn the_command_writes_rules_that_check_and_tests_that_pass() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("imported.yaml");
    let tests = dir.path().join("tests");
    let run = Command::new(bin())
        .args(["import", "loki-rules"])
        .arg(fixtures().join("loki-rules"))
        .arg("--out")
        .arg(&out)
        .arg("--tests")
        .arg(&tests)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        stdout.contains(
            "translated  fake/pack.yaml: livekit / LivekitDrainStuck → LivekitDrainStuck"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("skipped: a recording rule"), "{stdout}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("for: 10m"), "{text}");
    assert!(
        text.contains("summary: '{{ group }} failed to mark itself as draining'"),
        "{text}"
    );
    assert!(text.contains("logql: "), "{text}");
    let check = Command::new(bin())
        .args(["check", "--rules"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let n_tests = std::fs::read_dir(&tests).unwrap().count();
    assert!(n_tests >= 4, "{n_tests} test files");
    let test = Command::new(bin())
        .args(["test", "--rules"])
        .arg(&out)
        .arg(&tests)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&test.stdout);
    assert!(test.status.success(), "{report}");
    assert!(report.contains(" 0 failed"), "{report}");

    // A rule that cannot be carried: exit 1, unless --allow-partial.
    let partial = dir.path().join("partial.yaml");
    std::fs::write(
        &partial,
        "groups:\n  - name: g\n    rules:\n      - alert: Slow\n        expr: 'quantile_over_time(0.99, {app=\"a\"} | logfmt | unwrap latency [5m]) by (pod) > 2'\n      - alert: Errors\n        expr: 'sum by (pod) (count_over_time({app=\"a\"} |= \"error\" [5m])) > 5'\n",
    )
    .unwrap();
    let o = Command::new(bin())
        .args(["import", "loki-rules"])
        .arg(&partial)
        .arg("--out")
        .arg(dir.path().join("p.yaml"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("skipped: quantile_over_time aggregates values unwrapped"),
        "{s}"
    );
    assert!(s.contains("translated  partial.yaml: g / Errors"), "{s}");
    let o = Command::new(bin())
        .args(["import", "loki-rules", "--allow-partial"])
        .arg(&partial)
        .arg("--out")
        .arg(dir.path().join("p.yaml"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
}

/// Lines without stream labels are selected by an imported rule's
/// selector once `--label` gives them the label; a line whose prefix names
/// the label keeps its own value; a malformed `--label` is refused.
#[test]
fn piped_lines_are_given_the_labels_a_selector_selects_by() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("imported.yaml");
    let o = Command::new(bin())
        .args(["import", "loki-rules"])
        .arg(fixtures().join("loki-rules/fake/pack.yaml"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("select streams by container (egress, livekit-server)"),
        "{s}"
    );
    let fired = |log: &str, labels: &[&str]| -> BTreeSet<String> {
        let mut c = Command::new(bin());
        c.args([
            "replay",
            "--no-builtin-rules",
            "--output",
            "json",
            "--no-summary",
        ])
        .arg("--rules")
        .arg(&out);
        for l in labels {
            c.args(["--label", l]);
        }
        let o = c.arg(fixtures().join(log)).output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|n| n["state"] == "firing")
            .map(|n| {
                format!(
                    "{} {}",
                    n["rule"].as_str().unwrap(),
                    n["group"].as_str().unwrap()
                )
            })
            .collect()
    };
    let bare = "egress-black-hole-timestamps.log";
    assert!(fired(bare, &[]).is_empty());
    let given = fired(bare, &["container=egress", "app=egress"]);
    assert!(
        given.iter().any(|a| a.starts_with("EgressBlackHole ")),
        "{given:?}"
    );
    assert!(
        given.iter().any(|a| a.starts_with("EgressDiskFull ")),
        "{given:?}"
    );
    // The kubectl prefix names the container: --label does not override it.
    let prefixed = "egress-black-hole.log";
    assert_eq!(
        fired(prefixed, &["container=livekit-server"]),
        fired(prefixed, &[])
    );
    assert!(!fired(prefixed, &[]).is_empty());
    for bad in ["container", "9x=a", "container="] {
        let o = Command::new(bin())
            .args(["replay", "--label", bad])
            .arg(fixtures().join(bare))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "--label {bad}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("--label"),
            "--label {bad}"
        );
    }
}

/// (rule, group) pairs that fire on a fixture.
fn fired(set: sigwatch::rules::RuleSet, fixture: &str) -> BTreeSet<(String, String)> {
    let text = std::fs::read_to_string(fixtures().join(fixture)).unwrap();
    let mut e = sigwatch::Engine::new(set, sigwatch::Options::default()).unwrap();
    e.set_default_labels(default_labels(fixture));
    let src = sigwatch::source::Source::named(fixture);
    let mut out = Vec::new();
    for l in text.lines() {
        e.push_line(&src, l, None, &mut out);
    }
    e.finish(&mut out);
    out.iter()
        .filter(|n| n.state == sigwatch::alert::AlertState::Firing)
        .map(|n| (n.rule.clone(), n.group.clone()))
        .collect()
}

/// The imported pack fires on the incident fixtures for the groups the
/// pack's own rules fire for, and on the quiet day for none.
#[test]
fn the_imported_pack_fires_where_the_pack_does() {
    let files: Vec<(String, String)> = vec![(
        "fake/pack.yaml".into(),
        std::fs::read_to_string(fixtures().join("loki-rules/fake/pack.yaml")).unwrap(),
    )];
    let imp = sigwatch::rules::logql::import_texts(&files, "x.yaml").unwrap();
    let pairs: BTreeMap<&str, &str> = [
        ("livekit.drain_failed", "LivekitDrainFailed"),
        ("livekit.drain_stuck", "LivekitDrainStuck"),
        ("livekit.redis_unreachable", "LivekitRedisUnreachable"),
        ("egress.black_hole", "EgressBlackHole"),
        ("egress.disk_full", "EgressDiskFull"),
    ]
    .into_iter()
    .collect();
    let mut compared = 0;
    for fixture in [
        "livekit-redis-outage.log",
        "livekit-redis-outage-timestamps.log",
        "egress-black-hole.log",
        "egress-black-hole-timestamps.log",
        "control-day.log",
    ] {
        let pack = fired(sigwatch::rules::load_builtin().unwrap(), fixture);
        let own =
            sigwatch::rules::compile(&[("imported.yaml".into(), imp.rules_yaml.clone())]).unwrap();
        let imported = fired(own, fixture);
        for (pack_id, imported_id) in &pairs {
            let mut want: BTreeSet<&str> = pack
                .iter()
                .filter(|(r, _)| r == pack_id)
                .map(|(_, g)| g.as_str())
                .collect();
            // A spread: the pack names its alert by its partition (the
            // LiveKit container), the imported `count(...)` by `cluster`;
            // what compares is that it fires.
            if *pack_id == "livekit.redis_unreachable" && !want.is_empty() {
                want = ["cluster"].into();
            }
            let got: BTreeSet<&str> = imported
                .iter()
                .filter(|(r, _)| r == imported_id)
                .map(|(_, g)| g.as_str())
                .collect();
            assert_eq!(got, want, "{fixture}: {imported_id} vs {pack_id}");
            compared += want.len();
        }
    }
    assert!(compared >= 20, "only {compared} alerts compared");
}

/// The labels a fixture's lines carry where their prefix names none, as
/// `--label` gives them: the egress log with bare Docker-time lines is one
/// container's.
fn default_labels(fixture: &str) -> Vec<(String, String)> {
    match fixture {
        "egress-black-hole-timestamps.log" => vec![("container".into(), "egress".into())],
        _ => Vec::new(),
    }
}

/// The metric a Loki ruler evaluates, written here from LogQL's
/// definition rather than from the importer: which lines count, per-group
/// counts over `(t - range, t]` at each evaluation step, and the
/// comparison the rule makes of them.
struct LokiRule {
    alert: &'static str,
    container: &'static str,
    /// `|= "a" or "b"`: a line holding any of these.
    any_of: &'static [&'static str],
    range_s: i64,
    for_s: i64,
    metric: Metric,
}

enum Metric {
    /// `sum by (nodeID) (count_over_time(…)) > n`: the groups above n.
    CountAbove(u64),
    /// `count(sum by (nodeID) (…) > 0) >= n`: `cluster` when n groups count.
    GroupsAtLeast(usize),
    /// `g / on() group_left total >= r and on() total >= n`: the groups
    /// holding at least r of a total of at least n.
    ShareAtLeast(f64, u64),
}

/// A matching line as Loki would see it: its time and its `nodeID`.
fn loki_lines(rule: &LokiRule, fixture: &str) -> Vec<(i64, String)> {
    let text = std::fs::read_to_string(fixtures().join(fixture)).unwrap();
    let mut d = sigwatch::decode::Decoder::new(&sigwatch::decode::KeyConfig::default(), false);
    d.set_default_labels(default_labels(fixture));
    let src = sigwatch::source::Source::named(fixture);
    let mut out = Vec::new();
    for l in text.lines() {
        let Some(p) = d.prepare(&src, l, None) else {
            continue;
        };
        let e = d.event(&p);
        let container = e.get("labels.container");
        if container.as_deref() != Some(rule.container) {
            continue;
        }
        if !rule.any_of.iter().any(|s| e.text.contains(s)) {
            continue;
        }
        let node = e
            .get("labels.nodeID")
            .or_else(|| e.get("nodeID"))
            .filter(|v| !v.is_empty())
            .map(|v| v.into_owned())
            // The group of lines without the label: `{nodeID=""}` in
            // Loki, `unknown` in sigwatch.
            .unwrap_or_else(|| "unknown".into());
        out.push((e.time, node));
    }
    out
}

/// The groups the rule's expression returns at instant `t`.
fn loki_eval(rule: &LokiRule, lines: &[(i64, String)], t: i64) -> BTreeSet<String> {
    let range = rule.range_s * 1_000_000_000;
    let mut per: BTreeMap<&str, u64> = BTreeMap::new();
    for (at, g) in lines {
        if *at > t - range && *at <= t {
            *per.entry(g.as_str()).or_default() += 1;
        }
    }
    let total: u64 = per.values().sum();
    match rule.metric {
        Metric::CountAbove(n) => per
            .iter()
            .filter(|(_, c)| **c > n)
            .map(|(g, _)| g.to_string())
            .collect(),
        Metric::GroupsAtLeast(n) if per.len() >= n => ["cluster".to_string()].into(),
        Metric::GroupsAtLeast(_) => BTreeSet::new(),
        Metric::ShareAtLeast(r, n) if total >= n => per
            .iter()
            .filter(|(_, c)| **c as f64 / total as f64 >= r)
            .map(|(g, _)| g.to_string())
            .collect(),
        Metric::ShareAtLeast(..) => BTreeSet::new(),
    }
}

/// On the incident fixtures, at every one-minute evaluation step, the
/// imported rule is firing for exactly the groups a Loki ruler would have
/// firing: the expression true for the group at this step and, with a
/// `for`, at every step of the `for` before it.
#[test]
fn the_imported_rules_fire_for_the_groups_and_minutes_the_logql_metric_does() {
    const NODE_ERRS: &[&str] = &[
        "redis: connection pool: failed to dial",
        "redis: connection pool timeout",
        "redis: discarding bad PubSub connection",
        "could not update node",
        "could not register node",
        "unable to connect to redis",
        "redis: client is closed",
        "redis: connection pool exhausted",
        ":6379: connect: connection refused",
        ":6379: i/o timeout",
    ];
    let rules = [
        LokiRule {
            alert: "LivekitDrainFailed",
            container: "livekit-server",
            any_of: &["failed to mark as draining"],
            range_s: 900,
            for_s: 0,
            metric: Metric::CountAbove(0),
        },
        LokiRule {
            alert: "LivekitDrainStuck",
            container: "livekit-server",
            any_of: &["waiting for participants to exit"],
            range_s: 60,
            for_s: 600,
            metric: Metric::CountAbove(0),
        },
        LokiRule {
            alert: "LivekitRedisUnreachable",
            container: "livekit-server",
            any_of: NODE_ERRS,
            range_s: 60,
            for_s: 30,
            metric: Metric::GroupsAtLeast(3),
        },
        LokiRule {
            alert: "EgressBlackHole",
            container: "egress",
            any_of: &["egress_failed", "EGRESS_FAILED"],
            range_s: 900,
            for_s: 0,
            metric: Metric::ShareAtLeast(0.8, 10),
        },
        LokiRule {
            alert: "EgressDiskFull",
            container: "egress",
            any_of: &["No space left on the resource.", "no space left on device"],
            range_s: 600,
            for_s: 0,
            metric: Metric::CountAbove(0),
        },
    ];
    let files = vec![(
        "fake/pack.yaml".to_string(),
        std::fs::read_to_string(fixtures().join("loki-rules/fake/pack.yaml")).unwrap(),
    )];
    let imp = sigwatch::rules::logql::import_texts(&files, "x.yaml").unwrap();
    let step = 60_000_000_000i64;
    let mut firing_steps = 0;
    let mut compared = 0;
    let mut wrong = Vec::new();
    for fixture in [
        "livekit-redis-outage.log",
        "livekit-redis-outage-timestamps.log",
        "egress-black-hole.log",
        "egress-black-hole-timestamps.log",
        "control-day.log",
    ] {
        let set =
            sigwatch::rules::compile(&[("imported.yaml".into(), imp.rules_yaml.clone())]).unwrap();
        let notes = replay(set, fixture);
        for rule in &rules {
            let lines = loki_lines(rule, fixture);
            let Some(last) = notes.last_time else {
                continue;
            };
            let first = notes.first_time;
            // Episodes of the imported rule: group → [fired, resolved).
            let mut episodes: BTreeMap<&str, Vec<(i64, i64)>> = BTreeMap::new();
            for n in notes
                .out
                .iter()
                .filter(|n| n.rule == rule.alert && !n.repeat)
            {
                let e = episodes.entry(n.group.as_str()).or_default();
                match n.state {
                    sigwatch::alert::AlertState::Firing => e.push((n.at, i64::MAX)),
                    _ => {
                        if let Some(open) = e.last_mut() {
                            open.1 = n.at;
                        }
                    }
                }
            }
            // Prometheus's `for` on a 1m evaluation: the expression true at
            // every step back to one at least `for` before this one.
            let hold = (rule.for_s * 1_000_000_000 + step - 1) / step * step;
            // Every step a whole `for` after the first line, up to the last.
            let mut t = (first / step + 1) * step + hold;
            while t <= last {
                let mut want = loki_eval(rule, &lines, t);
                let mut back = t - step;
                while back >= t - hold {
                    let held = loki_eval(rule, &lines, back);
                    want.retain(|g| held.contains(g));
                    back -= step;
                }
                let got: BTreeSet<String> = episodes
                    .iter()
                    .filter(|(_, eps)| eps.iter().any(|(a, b)| *a <= t && t < *b))
                    .map(|(g, _)| g.to_string())
                    .collect();
                if got != want {
                    wrong.push(format!(
                        "{fixture} {} at {}: sigwatch {got:?}, Loki {want:?}",
                        rule.alert,
                        sigwatch::clock::Stamp::at(t).as_str()
                    ));
                }
                firing_steps += want.len();
                compared += 1;
                t += step;
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {compared} steps differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(
        firing_steps >= 100,
        "only {firing_steps} firing group-steps compared"
    );
}

struct Replayed {
    out: Vec<sigwatch::alert::Notification>,
    first_time: i64,
    last_time: Option<i64>,
}

fn replay(set: sigwatch::rules::RuleSet, fixture: &str) -> Replayed {
    let text = std::fs::read_to_string(fixtures().join(fixture)).unwrap();
    let mut e = sigwatch::Engine::new(set, sigwatch::Options::default()).unwrap();
    e.set_default_labels(default_labels(fixture));
    let src = sigwatch::source::Source::named(fixture);
    let mut d = sigwatch::decode::Decoder::new(&sigwatch::decode::KeyConfig::default(), false);
    let (mut first, mut last) = (i64::MAX, None);
    let mut out = Vec::new();
    for l in text.lines() {
        if let Some(p) = d.prepare(&src, l, None) {
            first = first.min(p.time);
            last = Some(last.map_or(p.time, |x: i64| x.max(p.time)));
        }
        e.push_line(&src, l, None, &mut out);
    }
    e.finish(&mut out);
    Replayed {
        out,
        first_time: first,
        last_time: last,
    }
}

/// A `for` between evaluations waits for the next one in the ruler; the
/// import holds as long, and says so. A whole number of intervals, or a
/// group's own interval that divides it, is kept as written.
#[test]
fn a_for_between_evaluations_is_held_as_the_ruler_holds_it() {
    let text = r#"
groups:
  - name: a
    rules:
      - alert: Short
        expr: sum(count_over_time({app="a"} |= "x" [1m])) > 0
        for: 30s
      - alert: Whole
        expr: sum(count_over_time({app="a"} |= "x" [1m])) > 0
        for: 2m
  - name: b
    interval: 15s
    rules:
      - alert: Fast
        expr: sum(count_over_time({app="a"} |= "x" [1m])) > 0
        for: 30s
"#;
    let imp =
        sigwatch::rules::logql::import_texts(&[("t.yaml".into(), text.into())], "x.yaml").unwrap();
    let rules: serde_yaml_ng::Value = serde_yaml_ng::from_str(&imp.rules_yaml).unwrap();
    let fors: Vec<&str> = rules["rules"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|r| r["for"].as_str().unwrap())
        .collect();
    assert_eq!(fors, ["1m", "2m", "30s"]);
    let notes = |i: usize| imp.outcomes[i].result.clone().unwrap().join(" ");
    assert!(notes(0).contains("for 30s held for 1m"), "{}", notes(0));
    assert!(!notes(1).contains("held for"), "{}", notes(1));
    assert!(!notes(2).contains("held for"), "{}", notes(2));
}

/// Whatever a ruler file holds, the import answers with a rule or a
/// reason, never a panic: every prefix of expressions with non-ASCII text
/// in strings, escapes, patterns and regexes.
#[test]
fn any_expression_gets_a_rule_or_a_reason() {
    let exprs = [
        r#"sum by (nodeID) (count_over_time({app="ä"} |= "fehlgeschlagen: größe" | json | level="error" [5m])) > 0"#,
        r#"sum(count_over_time({app="a"} |= "\é\ü" !~ "ß+" [1m])) > 2"#,
        r#"sum(count_over_time({app="a"} | pattern "é<x> ü <_> «<y>»" | x="1" [1m])) > 2"#,
        r#"sum(count_over_time({app="a"} |> "<_> é <_>" !> "ü<_>" [1m])) > 2"#,
        r#"sum by (p) (count_over_time({app="a"} | regexp `(?P<p>\w+) – failed` [1m])) / on() group_left sum(count_over_time({app="a"} | regexp `(?P<p>\w+) – failed` [1m])) > 0.6"#,
        "absent_over_time({app=\"日本\"} |= `ログ` [5m])",
    ];
    let mut answered = 0;
    for e in exprs {
        for (i, _) in e.char_indices().chain([(e.len(), ' ')]) {
            let _ = translate(&e[..i]);
            answered += 1;
        }
        // Whole, each must translate: they are valid and in the model.
        assert!(translate(e).is_ok(), "{e}: {:?}", translate(e).err());
    }
    assert!(answered > 300);
}

/// Bursts of errors followed by silence, among other nodes' traffic, at
/// every one-minute step against the ruler's evaluation of
/// `sum by (nodeID) (count_over_time({app="livekit"} | json |
/// level="error" [5m])) > 5` with `for: 1m`: a burst whose count stays
/// above 5 for minutes after its last line fires (the ruler holds `for` on
/// its clock, not on the lines), one too short does not, and the alert
/// resolves at the step the count falls; a count above 5 only between two
/// evaluations is not seen, by either.
#[test]
fn an_imported_for_holds_on_the_clock_through_bursts_and_silence() {
    let text = r#"
groups:
  - name: lk
    rules:
      - alert: NodeErrors
        expr: sum by (nodeID) (count_over_time({app="livekit"} | json | level="error" [5m])) > 5
        for: 1m
"#;
    let imp =
        sigwatch::rules::logql::import_texts(&[("t.yaml".into(), text.into())], "x.yaml").unwrap();
    let notes = imp.outcomes[0].result.clone().unwrap().join(" ");
    assert!(notes.contains("evaluated every 1m"), "{notes}");
    const S: i64 = 1_000_000_000;
    let step = 60 * S;
    let range = 300 * S;
    let hold = 60 * S;
    let nodes = ["ND_a1", "ND_b2", "ND_c3", "ND_d4"];
    let (mut compared, mut fired_in_silence, mut unseen, mut firing_steps) = (0, 0, 0, 0);
    let mut wrong = Vec::new();
    for seed in 1..=12u64 {
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        // 40 minutes from 12:00:00 (plus a random offset within a minute).
        let t0 = 1_751_371_200 * S + next(60) as i64 * S;
        let mut lines: Vec<(i64, String, bool)> = Vec::new();
        // Every node's ordinary traffic: an info line every 4-10 s.
        for n in nodes {
            let mut t = t0 + next(5000) as i64 * 1_000_000;
            while t < t0 + 40 * step {
                lines.push((t, n.to_string(), false));
                t += (4000 + next(6000) as i64) * 1_000_000;
            }
        }
        // Three to five bursts: 3-12 errors over 5-150 s on one node.
        for _ in 0..3 + next(3) {
            let node = nodes[next(4) as usize];
            let start = t0 + (next(33 * 60) as i64) * S;
            let k = 3 + next(10) as i64;
            let spread = (5 + next(146) as i64) * S;
            for i in 0..k {
                lines.push((start + spread * i / k.max(1), node.to_string(), true));
            }
        }
        lines.sort_by_key(|l| l.0);
        let errors: Vec<(i64, &str)> = lines
            .iter()
            .filter(|l| l.2)
            .map(|l| (l.0, l.1.as_str()))
            .collect();
        let count = |g: &str, t: i64| {
            errors
                .iter()
                .filter(|(at, n)| *n == g && *at > t - range && *at <= t)
                .count()
        };
        let mut e = sigwatch::Engine::new(
            sigwatch::rules::compile(&[("imported.yaml".into(), imp.rules_yaml.clone())]).unwrap(),
            sigwatch::Options::default(),
        )
        .unwrap();
        e.set_default_labels(vec![("app".into(), "livekit".into())]);
        let src = sigwatch::source::Source::named("burst.log");
        let mut out = Vec::new();
        for (t, node, err) in &lines {
            let (level, msg) = if *err {
                ("error", "could not update node")
            } else {
                ("info", "participant active")
            };
            let l = format!(
                r#"{{"level":"{level}","ts":{}.{:03},"logger":"livekit","msg":"{msg}","nodeID":"{node}"}}"#,
                t / S,
                (t % S) / 1_000_000
            );
            e.push_line(&src, &l, None, &mut out);
        }
        e.finish(&mut out);
        let last = lines.last().unwrap().0;
        let mut episodes: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
        for n in out.iter().filter(|n| n.rule == "NodeErrors" && !n.repeat) {
            let ep = episodes.entry(n.group.clone()).or_default();
            match n.state {
                sigwatch::alert::AlertState::Firing => ep.push((n.at, i64::MAX)),
                _ => {
                    if let Some(open) = ep.last_mut() {
                        open.1 = n.at;
                    }
                }
            }
        }
        let mut t = (t0 / step + 1) * step + hold;
        while t <= last {
            for g in nodes {
                let want = (0..=hold / step).all(|k| count(g, t - k * step) > 5);
                // True between steps only (the ruler does not see it):
                // counted, to show such cases were compared.
                let between = errors.iter().any(|(at, n)| {
                    let u = at + range;
                    *n == g && u > t - step && u < t && count(g, u - 1) > 5 && count(g, t) <= 5
                });
                if between && !want {
                    unseen += 1;
                }
                let got = episodes
                    .get(g)
                    .is_some_and(|eps| eps.iter().any(|(a, b)| *a <= t && t < *b));
                compared += 1;
                if want {
                    firing_steps += 1;
                    // Fired with no error of the node in the last `for`.
                    if !errors
                        .iter()
                        .any(|(at, n)| *n == g && *at > t - hold && *at <= t)
                    {
                        fired_in_silence += 1;
                    }
                }
                if got != want {
                    wrong.push(format!(
                        "seed {seed} {g} at {}: sigwatch {got}, Loki {want} (count {})",
                        sigwatch::clock::Stamp::at(t).as_str(),
                        count(g, t)
                    ));
                }
            }
            t += step;
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {compared} steps differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    eprintln!(
        "{compared} node-steps compared, {firing_steps} firing, {fired_in_silence} firing with no error in the last minute, {unseen} above 5 only between evaluations"
    );
    assert!(firing_steps >= 40, "only {firing_steps} firing steps");
    assert!(
        fired_in_silence >= 10,
        "only {fired_in_silence} steps firing on silence"
    );
    assert!(
        unseen >= 5,
        "only {unseen} steps with a count above 5 between evaluations only"
    );
}

/// An imported rule that selects by a label cannot match piped lines,
/// which carry none: replay and run say which rules, once each, with the
/// `--label` that fixes it; given the label, they say nothing and fire.
#[test]
fn rules_selecting_by_a_label_no_line_carried_are_named_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let ruler = dir.path().join("ruler.yaml");
    std::fs::write(
        &ruler,
        r#"
groups:
  - name: lk
    rules:
      - alert: NodeErrors
        expr: sum by (nodeID) (count_over_time({app="livekit"} | json | level="error" [5m])) > 2
"#,
    )
    .unwrap();
    let rules = dir.path().join("imported.yaml");
    let st = Command::new(bin())
        .args(["import", "loki-rules", "--out"])
        .arg(&rules)
        .arg(&ruler)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let mut log = String::new();
    for i in 0..6 {
        log.push_str(&format!(
            "{{\"level\":\"error\",\"ts\":{}.5,\"msg\":\"could not update node\",\"nodeID\":\"ND_a\"}}\n",
            1_751_371_800 + i
        ));
    }
    let input = dir.path().join("piped.log");
    std::fs::write(&input, &log).unwrap();
    let run = |cmd: &str, label: Option<&str>| {
        let mut c = Command::new(bin());
        c.arg(cmd)
            .args(["--no-builtin-rules", "--rules"])
            .arg(&rules)
            .args(["--log-level", "warn"]);
        if let Some(l) = label {
            c.args(["--label", l]);
        }
        if cmd == "replay" {
            c.arg("--no-summary").arg(&input);
        }
        let mut child = c
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            if cmd == "run" {
                stdin.write_all(log.as_bytes()).unwrap();
            }
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{cmd}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for cmd in ["replay", "run"] {
        let (stdout, stderr) = run(cmd, None);
        assert_eq!(
            stderr.matches("selects by the label \"app\"").count(),
            1,
            "{cmd}: {stderr}"
        );
        assert!(stderr.contains("--label app=livekit"), "{cmd}: {stderr}");
        assert!(!stdout.contains("firing"), "{cmd}: {stdout}");
        let (stdout, stderr) = run(cmd, Some("app=livekit"));
        assert!(!stderr.contains("selects by the label"), "{cmd}: {stderr}");
        assert!(stdout.contains("NodeErrors"), "{cmd}: {stdout}");
    }
}
