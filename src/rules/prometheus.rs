//! Cluster-wide rules as Prometheus rules, for sharded deployments
//! (docs/scaling.md). With `--shard I/N` each replica sees only its share
//! of the nodes, so a `spread` (many nodes at once) or `share` (one node
//! takes most failures) cannot be decided by any one replica. Every replica
//! exports its per-group hits (`sigwatch_signature_hits_total`) and when
//! each group last logged (`sigwatch_group_last_seen_seconds`); the rules
//! written here sum them over replicas and fire the same alerts, with the
//! same `alertname` and `group` labels, so Alertmanager treats them as the
//! ones an unsharded sigwatch would send. `sigwatch prometheus-rules`
//! prints them for any rule set; `deploy/prometheus-rules.yaml` is the
//! built-in pack's, checked by `promtool check rules` and `promtool test
//! rules` in CI.

use super::model::{ShareSpec, SpreadSpec};
use super::{Detect, Rule, RuleSet};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize)]
struct File {
    groups: Vec<Group>,
}

#[derive(Serialize)]
struct Group {
    name: String,
    interval: String,
    rules: Vec<PromRule>,
}

#[derive(Serialize)]
struct PromRule {
    #[serde(skip_serializing_if = "Option::is_none")]
    record: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    alert: Option<String>,
    expr: String,
    #[serde(rename = "for", skip_serializing_if = "Option::is_none")]
    for_: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<String, String>,
}

fn secs(ns: i64) -> String {
    format!("{}s", (ns / 1_000_000_000).max(1))
}

/// A recording rule for sigwatch rule `rule` (the `rule` label keeps the
/// recordings of different rules apart, as promtool's lint wants).
fn record(name: &str, rule: &str, expr: String) -> PromRule {
    PromRule {
        record: Some(name.to_string()),
        alert: None,
        expr,
        for_: None,
        labels: BTreeMap::from([("rule".to_string(), rule.to_string())]),
        annotations: BTreeMap::new(),
    }
}

/// PromQL string literal of a rule id.
fn q(id: &str) -> String {
    format!("{:?}", id)
}

fn population(id: &str, window: i64) -> PromRule {
    record(
        "sigwatch:population_groups",
        id,
        format!(
            "count by (rule, partition) (time() - max by (rule, partition, group) (sigwatch_group_last_seen_seconds{{rule={id}}}) < {})",
            (window / 1_000_000_000).max(1),
            id = q(id)
        ),
    )
}

fn alert(rule: &Rule, expr: String, group: &str, summary: String) -> PromRule {
    let mut labels = BTreeMap::new();
    labels.insert("severity".to_string(), rule.severity.as_str().to_string());
    labels.insert("group".to_string(), group.to_string());
    labels.insert("source".to_string(), "sigwatch-shards".to_string());
    for (k, v) in &rule.labels {
        labels.insert(k.clone(), v.clone());
    }
    let mut annotations = BTreeMap::new();
    annotations.insert("summary".to_string(), summary);
    annotations.insert("title".to_string(), rule.title.clone());
    PromRule {
        record: None,
        alert: Some(rule.id.clone()),
        expr,
        for_: (rule.for_ > 0).then(|| secs(rule.for_)),
        labels,
        annotations,
    }
}

fn spread(rule: &Rule, s: &SpreadSpec) -> Vec<PromRule> {
    let id = q(&rule.id);
    let window = secs(s.window.ns());
    let pw = s
        .population_window
        .map(|d| d.ns())
        .unwrap_or_else(|| s.window.ns().max(600_000_000_000));
    let groups = format!("sigwatch:signature_groups{{rule={id}}}");
    // A group counts once it matched `min_count` times in the window.
    let at_least = match s.min_count {
        Some(n) if n > 1 => format!(">= {n}"),
        _ => "> 0".to_string(),
    };
    let cond = match (s.groups, s.fraction) {
        (Some(g), _) => format!("{groups} >= {g}"),
        (None, Some(f)) => format!(
            "({groups} >= {min}) and on (rule, partition) ({groups} / on (rule, partition) sigwatch:population_groups{{rule={id}}} >= {f})",
            min = s.min_groups.unwrap_or(2)
        ),
        (None, None) => format!("{groups} >= 2"),
    };
    vec![
        record(
            "sigwatch:signature_groups",
            &rule.id,
            format!(
                "count by (rule, partition) (sum by (rule, partition, group) (increase(sigwatch_signature_hits_total{{rule={id}}}[{window}])) {at_least})"
            ),
        ),
        population(&rule.id, pw),
        alert(
            rule,
            cond,
            "{{ $labels.partition }}",
            format!(
                "{}: {{{{ $value }}}} (all shards, last {window})",
                rule.title
            ),
        ),
    ]
}

fn share(rule: &Rule, s: &ShareSpec) -> Vec<PromRule> {
    let id = q(&rule.id);
    let window = secs(s.window.ns());
    let pw = s
        .population_window
        .map(|d| d.ns())
        .unwrap_or_else(|| s.window.ns().max(3_600_000_000_000));
    let hits = format!("sigwatch:signature_hits_window{{rule={id}}}");
    let total = format!("sum by (rule, partition) ({hits})");
    vec![
        record(
            "sigwatch:signature_hits_window",
            &rule.id,
            format!(
                "sum by (rule, partition, group) (increase(sigwatch_signature_hits_total{{rule={id}}}[{window}]))"
            ),
        ),
        population(&rule.id, pw),
        alert(
            rule,
            format!(
                "({hits} / on (rule, partition) group_left {total} >= {share}) and on (rule, partition) ({total} >= {min_total}) and on (rule, partition) (sigwatch:population_groups{{rule={id}}} >= {min_groups})",
                share = s.min_share,
                min_total = s.min_total,
                min_groups = s.min_groups.unwrap_or(2)
            ),
            "{{ $labels.group }}",
            format!(
                "{}: {{{{ $labels.group }}}} takes {{{{ $value | humanizePercentage }}}} (all shards, last {window})",
                rule.title
            ),
        ),
    ]
}

/// The Prometheus rules file (YAML) for the spread and share rules of `set`;
/// `None` when it has none.
pub fn rules_file(set: &RuleSet) -> Option<String> {
    let mut rules = Vec::new();
    for r in &set.rules {
        match &r.detect {
            Detect::Spread(s) => rules.extend(spread(r, s)),
            Detect::Share(s) => rules.extend(share(r, s)),
            _ => {}
        }
    }
    if rules.is_empty() {
        return None;
    }
    let file = File {
        groups: vec![Group {
            name: "sigwatch-shards".into(),
            interval: "15s".into(),
            rules,
        }],
    };
    let body = serde_yaml_ng::to_string(&file).ok()?;
    Some(format!(
        "# Generated by `sigwatch prometheus-rules`: the cluster-wide (spread, share)\n\
         # rules, evaluated over every shard's counters (docs/scaling.md).\n{body}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_and_share_become_recording_and_alerting_rules() {
        let set = crate::rules::load_builtin().unwrap();
        let text = rules_file(&set).unwrap();
        let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
        let rules = v["groups"][0]["rules"].as_sequence().unwrap();
        let alerts: Vec<&str> = rules.iter().filter_map(|r| r["alert"].as_str()).collect();
        for id in [
            "livekit.redis_unreachable",
            "egress.black_hole",
            "grpc.upstream_concentrated",
            "k8s.liveness_spread",
        ] {
            assert!(alerts.contains(&id), "{id} missing: {alerts:?}");
        }
        assert!(
            !alerts.contains(&"livekit.drain_failed"),
            "per-node rules stay local"
        );
        let redis = rules
            .iter()
            .find(|r| r["alert"].as_str() == Some("livekit.redis_unreachable"))
            .unwrap();
        assert_eq!(redis["for"].as_str(), Some("30s"));
        let expr = redis["expr"].as_str().unwrap();
        assert!(expr.contains(">= 2") && expr.contains(">= 0.5"), "{expr}");
    }

    #[test]
    fn no_cluster_rules_no_file() {
        let set = crate::rules::compile(&[(
            "t.yaml".into(),
            "rules:\n  - id: a\n    title: A\n    severity: info\n    match: {contains: [\"x\"]}\n    detect: {count: {window: 1m}}\n"
                .into(),
        )])
        .unwrap();
        assert!(rules_file(&set).is_none());
    }
}
