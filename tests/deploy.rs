//! The deployment files are part of the product: every manifest under
//! deploy/ parses, its probes and ports match the binary's defaults, every
//! flag it passes exists in `sigwatch run --help`, the ConfigMap's
//! sigwatch.yaml loads, the Containerfile builds a non-root distroless
//! image, and deploy/prometheus-rules.yaml is what `sigwatch
//! prometheus-rules` prints, passes `promtool check rules`, and — fed the
//! counters sigwatch exports while replaying a fixture — fires the alert
//! sigwatch itself raises (`promtool test rules`; Debian's `prometheus`
//! package, installed by .ci/run).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;
use common::BIN;
use serde_yaml_ng::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every document of every YAML file under deploy/kubernetes.
fn manifests() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let dir = root().join("deploy/kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "{files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            use serde::Deserialize;
            let v = Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            out.push((f.file_name().unwrap().to_string_lossy().into_owned(), v));
        }
    }
    out
}

fn kind(v: &Value) -> &str {
    v["kind"].as_str().unwrap_or_default()
}

fn run_help() -> String {
    let out = Command::new(BIN).args(["run", "--help"]).output().unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The port of `--listen` by default, from the help text.
fn default_port(help: &str) -> u16 {
    let i = help.find("--listen").unwrap();
    let rest = &help[i..];
    let d = rest.find("[default: ").unwrap();
    let value = &rest[d + "[default: ".len()..];
    let value = &value[..value.find(']').unwrap()];
    value.rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
fn every_manifest_parses_and_matches_the_binary() {
    let help = run_help();
    let port = default_port(&help);
    let docs = manifests();
    let kinds: BTreeSet<&str> = docs.iter().map(|(_, v)| kind(v)).collect();
    for k in [
        "ServiceAccount",
        "ConfigMap",
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "Service",
        "PodDisruptionBudget",
        "ServiceMonitor",
        "NetworkPolicy",
    ] {
        assert!(kinds.contains(k), "no {k} in deploy/kubernetes: {kinds:?}");
    }
    // Least privilege: no API access at all.
    for k in ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"] {
        assert!(!kinds.contains(k), "sigwatch needs no {k}");
    }
    let sa = docs
        .iter()
        .find(|(_, v)| kind(v) == "ServiceAccount")
        .unwrap();
    assert_eq!(sa.1["automountServiceAccountToken"], Value::Bool(false));

    let mut workloads = 0;
    for (file, v) in &docs {
        assert!(v["apiVersion"].as_str().is_some(), "{file}: no apiVersion");
        assert!(v["metadata"]["name"].as_str().is_some(), "{file}: no name");
        if !matches!(kind(v), "Deployment" | "StatefulSet" | "DaemonSet") {
            continue;
        }
        workloads += 1;
        let pod = &v["spec"]["template"];
        // The selector selects the pod template.
        let sel = v["spec"]["selector"]["matchLabels"].as_mapping().unwrap();
        for (k, val) in sel {
            assert_eq!(
                &pod["metadata"]["labels"][k.as_str().unwrap()],
                val,
                "{file}"
            );
        }
        assert_eq!(
            pod["spec"]["serviceAccountName"].as_str(),
            Some("sigwatch"),
            "{file}"
        );
        for c in pod["spec"]["containers"].as_sequence().unwrap() {
            let args: Vec<&str> = c["args"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            assert_eq!(args[0], "run", "{file}");
            for a in &args[1..] {
                let flag = a.split('=').next().unwrap();
                assert!(flag.starts_with("--"), "{file}: {a}");
                assert!(
                    help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}\n")),
                    "{file}: {flag} is not an option of `sigwatch run`"
                );
            }
            // The probes and the scrape have a listener of their own, on
            // the default port; the probes and the Service use it.
            let value = |flag: &str| {
                args.iter()
                    .find_map(|a| a.strip_prefix(&format!("{flag}=")[..]))
            };
            let metrics = value("--listen-metrics")
                .unwrap_or_else(|| panic!("{file}: --listen-metrics must bind beyond 127.0.0.1"));
            let metrics_port: u16 = metrics.rsplit(':').next().unwrap().parse().unwrap();
            assert_eq!(metrics_port, port, "{file}: not the default port");
            let ports = c["ports"].as_sequence().unwrap();
            let port_of = |name: &str| {
                ports
                    .iter()
                    .find(|p| p["name"].as_str() == Some(name))
                    .and_then(|p| p["containerPort"].as_u64())
            };
            assert_eq!(port_of("http-metrics"), Some(u64::from(port)), "{file}");
            // The status page shows log lines: on the pod's loopback, or
            // behind tokens from a Secret the pod cannot start without.
            assert!(!args.contains(&"--insecure-ui"), "{file}");
            let ui = value("--listen").unwrap_or_else(|| panic!("{file}: no --listen"));
            let ui_port: u64 = ui.rsplit(':').next().unwrap().parse().unwrap();
            assert_ne!(
                ui_port,
                u64::from(port),
                "{file}: the UI shares the metrics port"
            );
            if !ui.starts_with("127.0.0.1:") {
                assert_eq!(port_of("http-ui"), Some(ui_port), "{file}");
                let tokens = value("--web-token-file")
                    .unwrap_or_else(|| panic!("{file}: {ui} without --web-token-file"));
                let dir = Path::new(tokens).parent().unwrap().to_str().unwrap();
                let mount = c["volumeMounts"]
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .find(|m| m["mountPath"].as_str() == Some(dir))
                    .unwrap_or_else(|| panic!("{file}: {tokens} is on no volume of its own"));
                let volume = pod["spec"]["volumes"]
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .find(|v| v["name"] == mount["name"])
                    .unwrap();
                assert!(
                    volume["secret"]["secretName"].as_str().is_some(),
                    "{file}: the tokens come from a Secret"
                );
                assert_ne!(
                    volume["secret"]["optional"],
                    Value::Bool(true),
                    "{file}: a missing Secret must stop the pod, not open the page"
                );
            }
            assert_eq!(
                c["livenessProbe"]["httpGet"]["path"].as_str(),
                Some("/healthz"),
                "{file}"
            );
            assert_eq!(
                c["readinessProbe"]["httpGet"]["path"].as_str(),
                Some("/readyz"),
                "{file}"
            );
            for probe in ["livenessProbe", "readinessProbe"] {
                assert_eq!(
                    c[probe]["httpGet"]["port"].as_str(),
                    Some("http-metrics"),
                    "{file}: {probe}"
                );
            }
            // Sized from the measured RSS (≤ 25 MiB): requests and a limit.
            let limits = &c["resources"]["limits"]["memory"];
            let mib: u64 = limits
                .as_str()
                .and_then(|m| m.strip_suffix("Mi"))
                .and_then(|m| m.parse().ok())
                .unwrap_or_else(|| panic!("{file}: memory limit {limits:?}"));
            assert!((64..=1024).contains(&mib), "{file}: {mib} MiB");
            assert!(
                c["resources"]["requests"]["cpu"].as_str().is_some(),
                "{file}"
            );
            let sc = &c["securityContext"];
            assert_eq!(sc["allowPrivilegeEscalation"], Value::Bool(false), "{file}");
            assert_eq!(sc["readOnlyRootFilesystem"], Value::Bool(true), "{file}");
            assert!(
                sc["capabilities"]["drop"]
                    .as_sequence()
                    .is_some_and(|d| d.iter().any(|c| c.as_str() == Some("ALL"))),
                "{file}: capabilities not dropped"
            );
        }
    }
    assert_eq!(workloads, 3);
    let consumer = docs.iter().find(|(_, v)| kind(v) == "Deployment").unwrap();
    assert_eq!(consumer.1["spec"]["replicas"].as_u64(), Some(2), "HA pair");
    // The PDB and the Service select the pods; the ServiceMonitor the Service.
    let pod_labels = &consumer.1["spec"]["template"]["metadata"]["labels"];
    let pdb = docs
        .iter()
        .find(|(_, v)| kind(v) == "PodDisruptionBudget")
        .unwrap();
    for (k, val) in pdb.1["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .unwrap()
    {
        assert_eq!(&pod_labels[k.as_str().unwrap()], val);
    }
    let svc = docs.iter().find(|(_, v)| kind(v) == "Service").unwrap();
    for (k, val) in svc.1["spec"]["selector"].as_mapping().unwrap() {
        assert_eq!(&pod_labels[k.as_str().unwrap()], val);
    }
    assert_eq!(
        svc.1["spec"]["ports"][0]["port"].as_u64(),
        Some(u64::from(port))
    );
    let sm = docs
        .iter()
        .find(|(_, v)| kind(v) == "ServiceMonitor")
        .unwrap();
    assert_eq!(
        sm.1["spec"]["endpoints"][0]["port"],
        svc.1["spec"]["ports"][0]["name"]
    );
    assert_eq!(
        sm.1["spec"]["endpoints"][0]["path"].as_str(),
        Some("/metrics")
    );
    // The sharded StatefulSet's --shard matches its replicas.
    let sts = docs.iter().find(|(_, v)| kind(v) == "StatefulSet").unwrap();
    let n = sts.1["spec"]["replicas"].as_u64().unwrap();
    let args = sts.1["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_sequence()
        .unwrap();
    assert!(args
        .iter()
        .any(|a| a.as_str() == Some(&format!("--shard=$(SHARD_INDEX)/{n}"))));
}

#[test]
fn only_prometheus_may_reach_the_open_endpoints() {
    let docs = manifests();
    let np = docs
        .iter()
        .find(|(_, v)| kind(v) == "NetworkPolicy")
        .unwrap();
    let spec = &np.1["spec"];
    // It selects every sigwatch pod.
    let sel = spec["podSelector"]["matchLabels"].as_mapping().unwrap();
    for (file, v) in &docs {
        if matches!(kind(v), "Deployment" | "StatefulSet" | "DaemonSet") {
            let labels = &v["spec"]["template"]["metadata"]["labels"];
            for (k, val) in sel {
                assert_eq!(&labels[k.as_str().unwrap()], val, "{file}");
            }
        }
    }
    assert!(spec["policyTypes"]
        .as_sequence()
        .unwrap()
        .iter()
        .any(|t| t.as_str() == Some("Ingress")));
    let rules = spec["ingress"].as_sequence().unwrap();
    let on = |port: &str| {
        rules
            .iter()
            .filter(|r| {
                r["ports"]
                    .as_sequence()
                    .is_some_and(|p| p.iter().any(|p| p["port"].as_str() == Some(port)))
            })
            .collect::<Vec<_>>()
    };
    // The metrics port: from Prometheus pods only, never from anywhere.
    let metrics = on("http-metrics");
    assert_eq!(metrics.len(), 1, "{metrics:?}");
    let from = metrics[0]["from"]
        .as_sequence()
        .expect("a `from` on http-metrics");
    assert!(!from.is_empty());
    for peer in from {
        assert!(
            peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"].as_str()
                == Some("prometheus"),
            "{peer:?}"
        );
    }
    // The UI port is reachable (it asks for credentials itself), and the
    // Service names both.
    assert_eq!(on("http-ui").len(), 1);
    let svc = docs.iter().find(|(_, v)| kind(v) == "Service").unwrap();
    let names: Vec<&str> = svc.1["spec"]["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["http-metrics", "http-ui"]);
}

#[test]
fn the_configmap_configuration_loads() {
    let docs = manifests();
    let cm = docs.iter().find(|(_, v)| kind(v) == "ConfigMap").unwrap();
    let text = cm.1["data"]["sigwatch.yaml"].as_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sigwatch.yaml");
    std::fs::write(&path, text).unwrap();
    let c = sigwatch::config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(c.loki.is_some());
    assert!(c.incidents.is_some_and(|i| i.group));
}

#[test]
fn the_containerfile_builds_a_non_root_distroless_image() {
    let text = std::fs::read_to_string(root().join("deploy/Containerfile")).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let froms: Vec<&&str> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert!(froms.len() >= 2, "multi-stage");
    assert!(froms.last().unwrap().contains("distroless"), "{froms:?}");
    let last_from = lines.iter().rposition(|l| l.starts_with("FROM ")).unwrap();
    let user = lines[last_from..]
        .iter()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("USER in the final stage");
    assert!(
        !user.starts_with('0') && !user.starts_with("root"),
        "{user}"
    );
    assert!(lines.iter().any(|l| l.contains("--locked")));
    let help = run_help();
    assert!(lines.contains(&format!("EXPOSE {}", default_port(&help)).as_str()));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("ENTRYPOINT") && l.contains("sigwatch")));
    // Everything it copies exists.
    for l in &lines {
        if let Some(rest) = l.strip_prefix("COPY ") {
            if rest.starts_with("--from") {
                continue;
            }
            let parts: Vec<&str> = rest.split_whitespace().collect();
            for src in &parts[..parts.len() - 1] {
                assert!(root().join(src).exists(), "COPY {src}: missing");
            }
        }
    }
}

fn promtool() -> String {
    let b = std::env::var("SIGWATCH_TEST_PROMTOOL").unwrap_or_else(|_| "/usr/bin/promtool".into());
    assert!(
        Path::new(&b).exists(),
        "{b} not found: install it with `apt-get install -y prometheus` (bash .ci/run does)"
    );
    b
}

#[test]
fn the_shipped_prometheus_rules_are_current_and_valid() {
    let out = Command::new(BIN).arg("prometheus-rules").output().unwrap();
    assert!(out.status.success());
    let file = root().join("deploy/prometheus-rules.yaml");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        std::fs::read_to_string(&file).unwrap(),
        "deploy/prometheus-rules.yaml is stale: sigwatch prometheus-rules > deploy/prometheus-rules.yaml"
    );
    let check = Command::new(promtool())
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

/// Replays a fixture through the library engine and samples, every 15 s of
/// event time, the counters `/metrics` exports; returns the promtool input
/// series (times relative to the first sample) and when sigwatch itself
/// fired `rule` (seconds from the first sample), with the alert's group.
fn exported_series(fixture: &str, rule: &str) -> (Vec<(String, String)>, i64, String) {
    use sigwatch::engine::{Engine, Exports, Options};
    let set = sigwatch::rules::load_builtin().unwrap();
    let mut engine = Engine::new(set, Options::default()).unwrap();
    let src = sigwatch::source::Source::named(fixture);
    let text = std::fs::read_to_string(root().join("fixtures").join(fixture)).unwrap();
    const STEP: i64 = 15_000_000_000;
    let mut out = Vec::new();
    let mut samples: Vec<Exports> = Vec::new();
    let mut t0: Option<i64> = None;
    let mut fired: Option<(i64, String)> = None;
    for line in text.lines() {
        engine.push_line(&src, line, None, &mut out);
        if let Some(w) = engine.watermark() {
            let start = *t0.get_or_insert(w.div_euclid(STEP) * STEP);
            while start + STEP * samples.len() as i64 <= w {
                samples.push(engine.exports());
            }
        }
        for n in out.drain(..) {
            if n.rule == rule && fired.is_none() {
                let at = sigwatch::decode::time::parse_rfc3339(
                    n.last_seen.as_deref().unwrap_or(&n.starts_at),
                )
                .unwrap();
                fired = Some((at, n.group.clone()));
            }
        }
    }
    let t0 = t0.unwrap();
    let (fired_at, group) = fired.expect("sigwatch fires the rule on its fixture");
    let last = samples.last().cloned().unwrap();
    let mut series = Vec::new();
    for ((r, p, g), _) in last.series().into_iter().filter(|k| k.0 .0 == rule) {
        let labels =
            format!("{{rule=\"{r}\",partition=\"{p}\",group=\"{g}\",instance=\"shard-0\"}}");
        let hits: Vec<String> = samples
            .iter()
            .map(|s| s.get(r, p, g).map_or(0, |c| c.hits).to_string())
            .collect();
        let seen: Vec<String> = samples
            .iter()
            .map(|s| match s.get(r, p, g) {
                Some(c) if c.seen != i64::MIN => ((c.seen - t0) / 1_000_000_000).to_string(),
                _ => "_".to_string(),
            })
            .collect();
        series.push((
            format!("sigwatch_signature_hits_total{labels}"),
            hits.join(" "),
        ));
        series.push((
            format!("sigwatch_group_last_seen_seconds{labels}"),
            seen.join(" "),
        ));
    }
    (series, (fired_at - t0) / 1_000_000_000, group)
}

fn promtool_case(fixture: &str, rule: &str, extra_labels: &str, title: &str, summary: &str) {
    let (series, fired, group) = exported_series(fixture, rule);
    assert!(!series.is_empty());
    // Before the incident nothing fires; a minute after sigwatch fired
    // (scrape, window and `for` granularity), Prometheus fires the same
    // alert: same alertname, same group label.
    let before = 15;
    let after = fired + 60;
    let mut y = String::new();
    y.push_str(&format!(
        "rule_files:\n  - {}\nevaluation_interval: 15s\ntests:\n  - interval: 15s\n    input_series:\n",
        root().join("deploy/prometheus-rules.yaml").display()
    ));
    for (s, v) in &series {
        y.push_str(&format!("      - series: '{s}'\n        values: '{v}'\n"));
    }
    y.push_str(&format!(
        "    alert_rule_test:\n      - eval_time: {before}s\n        alertname: {rule}\n        exp_alerts: []\n"
    ));
    y.push_str(&format!(
        "      - eval_time: {after}s\n        alertname: {rule}\n        exp_alerts:\n          - exp_labels: {{rule: {rule}, group: {group}, severity: critical, source: sigwatch-shards{extra_labels}}}\n            exp_annotations: {{title: \"{title}\", summary: \"{title}: {summary}\"}}\n",
        summary = summary.replace("GROUP", &group)
    ));
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("test.yaml");
    std::fs::write(&f, &y).unwrap();
    let out = Command::new(promtool())
        .args(["test", "rules"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}\n{y}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn prometheus_fires_the_redis_spread_from_the_exported_counters() {
    promtool_case(
        "livekit-redis-outage.log",
        "livekit.redis_unreachable",
        ", partition: livekit-server",
        "Redis unreachable from many LiveKit nodes",
        "6 (all shards, last 60s)",
    );
}

#[test]
fn prometheus_fires_the_black_hole_share_from_the_exported_counters() {
    promtool_case(
        "egress-black-hole.log",
        "egress.black_hole",
        ", partition: egress",
        "One egress node takes most of the failed recordings",
        "GROUP takes 100% (all shards, last 900s)",
    );
}
