//! The code's shape follows the data (docs/architecture.md): every module
//! imports only the stages before it, so a newcomer can read `src/` in the
//! order the data flows, and a change to a late stage cannot reach back into
//! an early one. This test reads the sources and fails on any import
//! against the table below (tests and comments aside), and on sibling
//! files of one module that import each other.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

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
/// Push ingest is a source the shippers feed: it serves its listeners with
/// the server's guard, scans what it takes and hands it to the assembly.
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
    ("silence", &["alert"]),
    ("links", &["alert", "detect", "rules"]),
    (
        "report",
        &["alert", "decode", "engine", "incident", "rules"],
    ),
    ("server", &["notify", "report", "silence"]),
    ("ingest", &["scan", "server", "source"]),
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
            "alert", "config", "decode", "engine", "explain", "incident", "ingest", "links",
            "matcher", "mining", "notify", "report", "rules", "ruletest", "scan", "server",
            "silence", "source",
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

/// The file's product code: without its test module (by convention at
/// the end; a `#[cfg(test)]` item elsewhere is no test module).
fn product(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod ") {
        Some(i) => &text[..i],
        None => text,
    }
}

/// The file's code without its test module and without comments, where
/// module names appear in prose.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = product(&text);
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

/// `text` with comments, string and char literals blanked (line breaks
/// kept), so that its braces can be counted.
fn blanked(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        let ident_before = i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_');
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && !ident_before && matches!(next, Some('"' | '#')) {
            let mut j = i + 1;
            while b.get(j) == Some(&'#') {
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            j += 1;
            while j < b.len()
                && !(b[j] == '"' && (0..hashes).all(|h| b.get(j + 1 + h) == Some(&'#')))
            {
                out.push(blank(b[j]));
                j += 1;
            }
            i = j + 1 + hashes;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                if let Some(&x) = b.get(i) {
                    out.push(blank(x));
                }
                i += 1;
            }
            i += 1;
        } else if c == '\'' && (next == Some('\\') || b.get(i + 2) == Some(&'\'')) {
            // A char literal (a lifetime has no closing quote).
            i += 1;
            while i < b.len() && b[i] != '\'' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Every function of `code` (blanked) with its length in lines.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find("fn ") {
        let at = from + k;
        from = at + 3;
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
            continue;
        }
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body: the first `{` outside parentheses; a `;` first is a
        // declaration.
        let mut depth = 0i32;
        let mut open = None;
        for (j, &c) in b.iter().enumerate().skip(at) {
            match c {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    open = Some(j);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let mut braces = 0i32;
        let mut close = open;
        for (j, &c) in b.iter().enumerate().skip(open) {
            match c {
                b'{' => braces += 1,
                b'}' => {
                    braces -= 1;
                    if braces == 0 {
                        close = j;
                        break;
                    }
                }
                _ => {}
            }
        }
        let line = code[..at].matches('\n').count() + 1;
        let lines = code[at..=close].matches('\n').count() + 1;
        out.push((name, line, lines));
    }
    out
}

#[test]
fn rooms_stay_small_enough_to_read() {
    // A file a newcomer can read in one sitting, a function whose steps fit
    // on a screen or two: past these, split by concept (see the folders of
    // decode/header, mining, notify, app/suggest).
    const MAX_FILE_LINES: usize = 900;
    const MAX_FN_LINES: usize = 120;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut too_big = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let code = blanked(product(&text));
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        let lines = code.lines().count();
        if lines > MAX_FILE_LINES {
            too_big.push(format!(
                "{rel}: {lines} product lines (at most {MAX_FILE_LINES})"
            ));
        }
        for (name, line, n) in functions(&code) {
            if n > MAX_FN_LINES {
                too_big.push(format!(
                    "{rel}:{line} fn {name}: {n} lines (at most {MAX_FN_LINES})"
                ));
            }
        }
    }
    assert!(files.len() > 50, "the sources were found");
    assert!(too_big.is_empty(), "{}", too_big.join("\n"));
}

#[test]
fn the_shape_reader_counts_what_it_should() {
    let code = blanked(
        "fn a() {\n    let s = \"}\";\n    let c = '{';\n    // }\n}\nfn b<'x>(v: &'x str) -> &'x str {\n    v\n}\ntrait T { fn c(&self); }\n",
    );
    let f = functions(&code);
    assert_eq!(
        f,
        vec![("a".to_string(), 1, 5), ("b".to_string(), 6, 3)],
        "{code}"
    );
}
