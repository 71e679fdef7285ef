//! Coming from the Loki ruler: its rule files (Prometheus-style groups whose
//! `expr` is LogQL) read and translated into a sigwatch rule file, rule by
//! rule, exactly or not at all. A team that alerts from Loki today can take
//! its rules over without rewriting them by hand, and can see, per rule,
//! what was carried and what was left out and why ([`Outcome`]).
//!
//! [`parse`] reads LogQL into [`ast`], [`pipeline`] makes a log query a match
//! block, [`translate`] maps the metric around it onto a detector,
//! [`tests`] writes rule tests from a rule's own filter strings; this file
//! reads ruler files and writes the rule file.

pub mod ast;
pub mod parse;
pub mod pipeline;
pub mod tests;
pub mod translate;

use crate::rules::model::FieldCond;
use serde::Deserialize;
use serde_yaml_ng::{Mapping, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use translate::{Kind, Skip, Translation};

/// Why ruler files could not be read (a rule that cannot be translated is
/// no error: it is an [`Outcome`]).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A file or directory could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A file is not a ruler file.
    #[error("{path}: not a Loki ruler file: {message}")]
    Format {
        /// The path.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// No `*.yaml`/`*.yml` file under the paths.
    #[error("no ruler files (*.yaml, *.yml) under {0}")]
    NoFiles(String),
}

#[derive(Debug, Deserialize)]
struct RulerFile {
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    groups: Vec<RulerGroup>,
}

#[derive(Debug, Deserialize)]
struct RulerGroup {
    name: String,
    /// How often the ruler evaluates the group (`evaluation_interval`,
    /// 1m by default, when absent).
    #[serde(default)]
    interval: Option<String>,
    #[serde(default)]
    rules: Vec<RulerRule>,
}

#[derive(Debug, Deserialize)]
struct RulerRule {
    #[serde(default)]
    alert: Option<String>,
    #[serde(default)]
    record: Option<String>,
    expr: String,
    #[serde(rename = "for", default)]
    for_: Option<String>,
    #[serde(default)]
    keep_firing_for: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

/// What became of one ruler rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Where it was: `file` (and namespace) and group.
    pub origin: String,
    /// The alert's (or recording rule's) name.
    pub name: String,
    /// The sigwatch rule id, when translated.
    pub id: Option<String>,
    /// Notes on the translation, or why it was skipped.
    pub result: Result<Vec<String>, Skip>,
    /// A recording rule (listed, never translated: it pages nobody).
    pub recording: bool,
}

/// The result of an import.
#[derive(Debug, Default)]
pub struct Import {
    /// The sigwatch rule file.
    pub rules_yaml: String,
    /// Rule tests: (file name, text), one per translated rule that has one.
    pub tests: Vec<(String, String)>,
    /// One per ruler rule, in file order.
    pub outcomes: Vec<Outcome>,
    /// The labels the translated rules' selectors fix, with their values:
    /// what piped lines must be given (`--label`) to be selected.
    pub selector_labels: BTreeMap<String, BTreeSet<String>>,
}

impl Import {
    /// Whether an alerting rule was skipped.
    pub fn partial(&self) -> bool {
        self.outcomes
            .iter()
            .any(|o| !o.recording && o.result.is_err())
    }
}

/// Reads ruler files (files, directories of them, the ruler's
/// `tenant/namespace.yaml` layout) and translates their alerting rules.
/// `rules_path` is how the tests name the rule file.
pub fn import(paths: &[PathBuf], rules_path: &str) -> Result<Import, ImportError> {
    let mut files = Vec::new();
    for p in paths {
        collect(p, p, &mut files)?;
    }
    if files.is_empty() {
        return Err(ImportError::NoFiles(
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    let mut texts = Vec::new();
    for (name, path) in files {
        let text = std::fs::read_to_string(&path).map_err(|source| ImportError::Io {
            path: path.display().to_string(),
            source,
        })?;
        texts.push((name, text));
    }
    import_texts(&texts, rules_path)
}

fn collect(root: &Path, p: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<(), ImportError> {
    let io = |source| ImportError::Io {
        path: p.display().to_string(),
        source,
    };
    if p.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            let yaml = e.extension().is_some_and(|x| x == "yaml" || x == "yml");
            if e.is_dir() || yaml {
                collect(root, &e, out)?;
            }
        }
        return Ok(());
    }
    // Named by the path under the directory given: the ruler's local
    // storage keeps one file per namespace under a folder per tenant.
    let under = p
        .strip_prefix(root)
        .ok()
        .filter(|r| !r.as_os_str().is_empty());
    let name = match under {
        Some(r) => r.display().to_string(),
        None => p
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| p.display().to_string()),
    };
    out.push((name, p.to_path_buf()));
    Ok(())
}

/// Translates ruler files given as (name, text).
pub fn import_texts(files: &[(String, String)], rules_path: &str) -> Result<Import, ImportError> {
    let mut imp = Import::default();
    let mut rules = Vec::new();
    let mut ids = BTreeSet::new();
    for (name, text) in files {
        let file: RulerFile = serde_yaml_ng::from_str(text).map_err(|e| ImportError::Format {
            path: name.clone(),
            message: e.to_string(),
        })?;
        let ns = file.namespace.clone().unwrap_or_else(|| {
            name.trim_end_matches(".yaml")
                .trim_end_matches(".yml")
                .to_string()
        });
        for g in &file.groups {
            for r in &g.rules {
                let origin = format!("{name}: {}", g.name);
                if let Some(rec) = &r.record {
                    imp.outcomes.push(Outcome {
                        origin,
                        name: rec.clone(),
                        id: None,
                        result: Err(Skip {
                            reason: "a recording rule: it records a series and pages nobody".into(),
                            part: r.expr.trim().to_string(),
                        }),
                        recording: true,
                    });
                    continue;
                }
                let alert = r.alert.clone().unwrap_or_default();
                let id = unique_id(&alert, &ns, &g.name, &mut ids);
                let built = held_for(r, g.interval.as_deref()).and_then(|(hold, note, every)| {
                    rule(r, &alert, &id, &origin, &ns, (hold, note), every)
                });
                match built {
                    Ok((value, t, notes, timing)) => {
                        for (k, v) in &t.constants {
                            imp.selector_labels
                                .entry(k.clone())
                                .or_default()
                                .insert(v.clone());
                        }
                        if let Some(test) = tests::rule_test(&id, &t, timing, rules_path) {
                            imp.tests.push((format!("{id}.yaml"), test));
                        }
                        rules.push(value);
                        imp.outcomes.push(Outcome {
                            origin,
                            name: alert,
                            id: Some(id),
                            result: Ok(notes),
                            recording: false,
                        });
                    }
                    Err(s) => {
                        ids.remove(&id);
                        imp.outcomes.push(Outcome {
                            origin,
                            name: alert,
                            id: None,
                            result: Err(s),
                            recording: false,
                        });
                    }
                }
            }
        }
    }
    let mut top = Mapping::new();
    top.insert("rules".into(), Value::Sequence(rules));
    let body = serde_yaml_ng::to_string(&Value::Mapping(top)).unwrap_or_default();
    imp.rules_yaml = format!(
        "# Imported from Loki ruler files by `sigwatch import loki-rules`.\n# Each rule's `logql` annotation is the expression it came from.\n{body}"
    );
    Ok(imp)
}

/// The alert name as an id (unique: the namespace and group prefix a name
/// that repeats).
fn unique_id(alert: &str, ns: &str, group: &str, ids: &mut BTreeSet<String>) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let base = if alert.is_empty() {
        "loki_alert".to_string()
    } else {
        clean(alert)
    };
    let mut id = base.clone();
    if ids.contains(&id) {
        id = format!("{}.{}.{base}", clean(ns), clean(group));
    }
    let mut n = 2;
    while ids.contains(&id) {
        id = format!("{}.{}.{base}.{n}", clean(ns), clean(group));
        n += 1;
    }
    ids.insert(id.clone());
    id
}

/// A duration exactly as sigwatch reads it back (`1h30m15s`, `250ms`).
pub fn dur(ns: i64) -> String {
    if ns <= 0 {
        return "0s".into();
    }
    let mut out = String::new();
    let ms = ns / 1_000_000;
    let (h, m, s, ms) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    for (v, u) in [(h, "h"), (m, "m"), (s, "s"), (ms, "ms")] {
        if v > 0 {
            out.push_str(&format!("{v}{u}"));
        }
    }
    if out.is_empty() {
        out = format!("{ns}ns");
    }
    out
}

fn prom_dur(s: &str, what: &str) -> Result<i64, Skip> {
    crate::duration::Dur::parse(s)
        .map(|d| d.ns())
        .map_err(|e| Skip {
            reason: format!("`{what}`: {e}"),
            part: s.to_string(),
        })
}

/// The ruler's default `evaluation_interval`.
const EVERY_NS: i64 = 60_000_000_000;

/// How long the condition must hold, as the ruler holds it: it evaluates
/// every `interval` and fires at the first evaluation at least `for`
/// after the first true one, so a `for` between evaluations waits for the
/// next (`for: 30s` on a 1m interval holds 1m). sigwatch evaluates at every
/// line; the import keeps the ruler's hold, with a note when it differs.
fn held_for(r: &RulerRule, interval: Option<&str>) -> Result<(i64, Option<String>, i64), Skip> {
    let every = match interval {
        Some(i) => prom_dur(i, "interval")?,
        None => EVERY_NS,
    };
    let f = match &r.for_ {
        Some(f) => prom_dur(f, "for")?,
        None => 0,
    };
    if every <= 0 || f % every == 0 {
        return Ok((f, None, every));
    }
    let held = (f / every + 1) * every;
    let note = format!(
        "for {} held for {}: the ruler evaluates every {} and fires at the first evaluation a whole `for` after the first true one",
        dur(f),
        dur(held),
        dur(every)
    );
    Ok((held, Some(note), every))
}

/// The rule, its translation, its notes, and its (`for`, `evaluate_every`).
type Built = (Value, Translation, Vec<String>, (i64, i64));

fn rule(
    r: &RulerRule,
    alert: &str,
    id: &str,
    origin: &str,
    ns: &str,
    (hold, hold_note): (i64, Option<String>),
    every: i64,
) -> Result<Built, Skip> {
    let mut t = translate::translate(&r.expr)?;
    let mut notes = std::mem::take(&mut t.notes);
    notes.extend(hold_note);
    let mut m = Mapping::new();
    m.insert("id".into(), id.into());
    m.insert(
        "title".into(),
        if alert.is_empty() {
            id.into()
        } else {
            alert.into()
        },
    );
    let (severity, note) = severity(r.labels.get("severity").map(String::as_str));
    if let Some(n) = note {
        notes.push(n);
    }
    m.insert("severity".into(), severity.into());
    m.insert(
        "description".into(),
        format!("Imported from the Loki ruler: {origin} (namespace {ns}).").into(),
    );
    m.insert("match".into(), cond_value(&t.cond));
    match t.group_by.as_slice() {
        [] => {}
        [one] => {
            m.insert("group_by".into(), one.as_str().into());
        }
        many => {
            m.insert(
                "group_by".into(),
                Value::Sequence(many.iter().map(|s| s.as_str().into()).collect()),
            );
        }
    }
    m.insert("detect".into(), detect_value(&t.kind));
    if hold > 0 {
        m.insert("for".into(), dur(hold).into());
    }
    // Evaluated as the ruler evaluates: every `interval` of event time,
    // `for` on that clock from the first evaluation that found the
    // condition true (a burst that keeps the window's count up for
    // minutes after its last line fires; one true only between two
    // evaluations does not).
    if every > 0 {
        m.insert("evaluate_every".into(), dur(every).into());
        notes.push(format!(
            "evaluated every {} of event time, at whole multiples of it; the ruler evaluates at an offset of its own within the interval",
            dur(every)
        ));
    }
    // Loki resolves at the first evaluation the condition is false, or
    // keep_firing_for later.
    let keep = match &r.keep_firing_for {
        Some(k) => prom_dur(k, "keep_firing_for")?,
        None => 0,
    };
    if !matches!(t.kind, Kind::Absent { .. }) {
        m.insert("resolve_after".into(), dur(keep).into());
    }
    let mut ann = Mapping::new();
    for (k, v) in &r.annotations {
        let tv = template(v, &t, &r.labels).map_err(|mut s| {
            s.reason = format!("annotation {k}: {}", s.reason);
            s
        })?;
        ann.insert(k.as_str().into(), tv.into());
    }
    // The expression it came from; `{{` would read as a template.
    ann.insert("logql".into(), r.expr.trim().replace("{{", "{ {").into());
    m.insert("annotations".into(), Value::Mapping(ann));
    let labels: Mapping = r
        .labels
        .iter()
        .filter(|(k, _)| k.as_str() != "severity")
        .map(|(k, v)| (Value::from(k.as_str()), Value::from(v.as_str())))
        .collect();
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Mapping(labels));
    }
    Ok((Value::Mapping(m), t, notes, (hold, every)))
}

fn severity(label: Option<&str>) -> (&'static str, Option<String>) {
    let Some(l) = label else {
        return ("warning", Some("no severity label: warning".into()));
    };
    let s = match l.to_ascii_lowercase().as_str() {
        "critical" => return ("critical", None),
        "warning" => return ("warning", None),
        "info" => return ("info", None),
        "page" | "high" | "error" | "emergency" | "alert" | "fatal" | "p1" | "sev1" => "critical",
        "info_only" | "low" | "none" | "notice" | "debug" | "p4" | "p5" => "info",
        _ => "warning",
    };
    (s, Some(format!("severity {l:?} read as {s}")))
}

fn field_value(c: &FieldCond) -> Value {
    let one = |k: &str, v: Value| {
        let mut m = Mapping::new();
        m.insert(k.into(), v);
        Value::Mapping(m)
    };
    match c {
        FieldCond::Equals(s) => s.as_str().into(),
        FieldCond::OneOf(v) => Value::Sequence(v.iter().map(|s| s.as_str().into()).collect()),
        FieldCond::Regex(r) => one("regex", r.as_str().into()),
        FieldCond::Exists(b) => one("exists", (*b).into()),
        FieldCond::NotEquals(s) => one("not_equals", s.as_str().into()),
        FieldCond::NotRegex(r) => one("not_regex", r.as_str().into()),
        FieldCond::Number(b) => {
            let mut m = Mapping::new();
            for (k, v) in [("gt", b.gt), ("ge", b.ge), ("lt", b.lt), ("le", b.le)] {
                if let Some(v) = v {
                    m.insert(k.into(), v.into());
                }
            }
            Value::Mapping(m)
        }
    }
}

fn list(v: &[String]) -> Value {
    Value::Sequence(v.iter().map(|s| s.as_str().into()).collect())
}

fn cond_value(c: &translate::Cond) -> Value {
    let mut m = Mapping::new();
    for (k, v) in [
        ("contains", &c.contains),
        ("contains_all", &c.contains_all),
        ("not_contains", &c.not_contains),
        ("regex", &c.regex),
        ("not_regex", &c.not_regex),
    ] {
        if !v.is_empty() {
            m.insert(k.into(), list(v));
        }
    }
    for (k, v) in [("field", &c.fields), ("labels", &c.labels)] {
        if !v.is_empty() {
            m.insert(
                k.into(),
                Value::Mapping(
                    v.iter()
                        .map(|(n, c)| (Value::from(n.as_str()), field_value(c)))
                        .collect(),
                ),
            );
        }
    }
    Value::Mapping(m)
}

fn detect_value(k: &Kind) -> Value {
    let mut inner = Mapping::new();
    let name = match k {
        Kind::Count {
            threshold,
            window_ns,
        } => {
            inner.insert("threshold".into(), (*threshold).into());
            inner.insert("window".into(), dur(*window_ns).into());
            "count"
        }
        Kind::Spread {
            groups,
            window_ns,
            partition,
            ..
        } => {
            inner.insert("window".into(), dur(*window_ns).into());
            inner.insert("groups".into(), (*groups).into());
            if let Some(p) = partition {
                inner.insert("partition_by".into(), p.as_str().into());
            }
            "spread"
        }
        Kind::Share {
            window_ns,
            min_share,
            min_total,
        } => {
            inner.insert("window".into(), dur(*window_ns).into());
            inner.insert("min_total".into(), (*min_total).into());
            inner.insert("min_share".into(), (*min_share).into());
            // LogQL's ratio needs no other group alive.
            inner.insert("min_groups".into(), 1u64.into());
            "share"
        }
        Kind::Absent { for_ns } => {
            inner.insert("for".into(), dur(*for_ns).into());
            "absent"
        }
    };
    let mut m = Mapping::new();
    m.insert(name.into(), Value::Mapping(inner));
    Value::Mapping(m)
}

/// A Go template of the ruler (`{{ $labels.node_id }}`, `{{ $value }}`) in
/// sigwatch's template fields.
fn template(src: &str, t: &Translation, labels: &BTreeMap<String, String>) -> Result<String, Skip> {
    let mut out = String::new();
    let mut rest = src;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(Skip {
                reason: "an unclosed {{".into(),
                part: src.to_string(),
            });
        };
        let inner = after[..end].trim_matches(|c: char| c == '-' || c.is_whitespace());
        out.push_str(&template_part(inner, t, labels).ok_or_else(|| Skip {
            reason: format!(
                "{{{{ {inner} }}}} has no counterpart among sigwatch's template fields"
            ),
            part: src.to_string(),
        })?);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn template_part(
    inner: &str,
    t: &Translation,
    labels: &BTreeMap<String, String>,
) -> Option<String> {
    let words: Vec<&str> = inner.split_whitespace().filter(|w| *w != "|").collect();
    let value = words.iter().any(|w| *w == "$value" || *w == ".Value");
    if value {
        // `$value`, `$value | humanize`, `printf "%.0f" $value`.
        let fine = words.iter().all(|w| {
            matches!(*w, "$value" | ".Value" | "humanize" | "printf")
                // sigwatch renders a share as a percentage.
                || (*w == "humanizePercentage" && matches!(t.kind, Kind::Share { .. }))
                || (w.starts_with('"') && w.contains('%'))
        });
        if !fine {
            return None;
        }
        return Some(
            match t.kind {
                Kind::Count { .. } => "{{ value }}",
                Kind::Spread { .. } => "{{ groups }}",
                Kind::Share { .. } => "{{ share }}",
                Kind::Absent { .. } => "1",
            }
            .to_string(),
        );
    }
    let [one] = words.as_slice() else {
        return None;
    };
    let label = one
        .strip_prefix("$labels.")
        .or_else(|| one.strip_prefix(".Labels."))?;
    if t.group_label.as_deref() == Some(label) {
        return Some("{{ group }}".into());
    }
    if let Kind::Spread {
        partition_label: Some(p),
        ..
    } = &t.kind
    {
        if p == label {
            return Some("{{ partition }}".into());
        }
    }
    if let Some(v) = t.constants.get(label).or_else(|| labels.get(label)) {
        return Some(v.clone());
    }
    if label == "alertname" {
        return Some("{{ title }}".into());
    }
    // Not in the series: Prometheus renders it empty.
    Some(String::new())
}
