//! The code's shape follows the data (docs/architecture.md): every module
//! imports only the stages before it, so a newcomer can read `src/` in the
//! order the data flows, and a change to a late stage cannot reach back into
//! an early one. This test reads the sources and fails on any import
//! against the table below (tests and comments aside), and on sibling
//! files of one module that import each other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The ground floor: small modules with no stage in them (the wall clock
/// and time formatting, process-wide counters, crash-safe files, errors
/// with causes, text helpers), which import nothing of the crate and which
/// every module may import.
const GROUND: &[&str] = &["clock", "stats", "durable", "cause", "duration", "text"];

/// Each stage and the stages it may import (besides [`GROUND`]). The order
/// is the data flow: source → decode → rules → matcher → scan → detect →
/// alert → engine → notify → server, with the assembly (`app`) at the top.
/// notify reads alerts, never detectors; the server exports the samples
/// it is given (`stats::Sample`: each stage names its own metrics), so it
/// imports no stage's counters — only the receivers' status and the report.
const ALLOWED: &[(&str, &[&str])] = &[
    ("clock", &[]),
    ("stats", &[]),
    ("durable", &[]),
    ("cause", &[]),
    ("duration", &[]),
    ("text", &[]),
    ("source", &[]),
    ("decode", &["source"]),
    ("rules", &["decode"]),
    ("matcher", &["decode", "rules", "source"]),
    ("mining", &["decode", "rules"]),
    ("scan", &["decode", "matcher", "source"]),
    ("detect", &["rules"]),
    ("alert", &["decode", "detect", "rules"]),
    (
        "engine",
        &[
            "alert", "decode", "detect", "matcher", "mining", "rules", "scan", "source",
        ],
    ),
    ("notify", &["alert", "decode", "rules"]),
    ("incident", &["alert", "decode", "rules"]),
    ("links", &["alert", "detect", "rules"]),
    (
        "report",
        &["alert", "decode", "engine", "incident", "rules"],
    ),
    ("server", &["notify", "report"]),
    (
        "explain",
        &["decode", "detect", "matcher", "mining", "rules", "source"],
    ),
    (
        "ruletest",
        &["alert", "decode", "engine", "rules", "source"],
    ),
    ("config", &["notify", "rules"]),
    (
        "app",
        &[
            "alert", "config", "decode", "engine", "explain", "incident", "links", "matcher",
            "mining", "notify", "report", "rules", "ruletest", "scan", "server", "source",
        ],
    ),
];

/// Items the crate root re-exports, and the module they belong to.
const ROOT_ITEMS: &[(&str, &str)] = &[
    ("Engine", "engine"),
    ("Options", "engine"),
    ("Stats", "engine"),
    ("ReloadSummary", "engine"),
    ("ExampleFailure", "explain"),
    ("check_examples", "explain"),
    ("DEFAULT_LATENESS_NS", "engine"),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The file's code without its test module (by convention at the end)
/// and without comments, where module names appear in prose.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .map(|l| match l.find("//") {
            // Keep `//` inside string literals (URLs): only cut when no quote
            // precedes it on the line.
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Names following `prefix` in `text` (`crate::decode::x` → `decode`).
fn names_after<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let after = &rest[i + prefix.len()..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        out.push(&after[..end]);
        rest = &after[end..];
    }
    out
}

#[test]
fn every_module_imports_only_the_stages_before_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(m, d)| (*m, d.iter().copied().collect()))
        .collect();
    let root: BTreeMap<&str, &str> = ROOT_ITEMS.iter().copied().collect();
    let mut violations = Vec::new();
    let mut seen = BTreeSet::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let top = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        seen.insert(top.clone());
        let Some(ok) = allowed.get(top.as_str()) else {
            violations.push(format!("{rel}: module {top} is not in the layering table"));
            continue;
        };
        let body = code(f);
        for name in names_after(&body, "crate::") {
            let module = root.get(name).copied().unwrap_or(name);
            let ground = GROUND.contains(&module) && !GROUND.contains(&top.as_str());
            if module != top && !ground && !ok.contains(module) {
                violations.push(format!(
                    "{rel}: {top} must not import {module} (crate::{name})"
                ));
            }
        }
    }
    for (m, _) in ALLOWED {
        assert!(
            seen.contains(*m),
            "the table names {m}, which no longer exists"
        );
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn sibling_files_of_a_module_do_not_import_each_other_both_ways() {
    // e.g. decode/keys.rs and decode/payload read each other once; now both
    // take what they share from decode/quick.rs and decode/time.rs.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut uses: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) else {
            continue;
        };
        let stem = rel.file_stem().unwrap().to_string_lossy().into_owned();
        if stem == "mod" {
            continue;
        }
        let parent = parent.to_string_lossy().replace('/', "::");
        let body = code(f);
        let mut targets: BTreeSet<String> = names_after(&body, "super::")
            .into_iter()
            .map(str::to_string)
            .collect();
        targets.extend(
            names_after(&body, &format!("crate::{parent}::"))
                .into_iter()
                .map(str::to_string),
        );
        uses.insert((parent, stem), targets);
    }
    let mut cycles = Vec::new();
    for ((parent, a), ta) in &uses {
        for b in ta {
            if a < b
                && uses
                    .get(&(parent.clone(), b.clone()))
                    .is_some_and(|tb| tb.contains(a))
            {
                cycles.push(format!("{parent}: {a} and {b} import each other"));
            }
        }
    }
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}
