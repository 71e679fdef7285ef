//! The offline commands: `check` (rules and their examples), `test` (rule
//! test files) and `explain` (a line through the decoder and matcher).

use super::{load_rules, RulesOptions};
use std::path::PathBuf;

/// The rules, or the exit status after saying why not: 1 for invalid
/// rules (located), 2 for a configuration that cannot be read.
fn rules_for(rules: &RulesOptions) -> Result<crate::rules::RuleSet, u8> {
    match load_rules(rules) {
        Ok(s) => Ok(s),
        Err(super::AppError::Rules(e)) => {
            eprintln!("{e}");
            // A rule file that cannot be read is a setup error (2); one
            // that reads but is wrong is a finding (1).
            let unreadable =
                e.0.iter()
                    .all(|x| matches!(x, crate::rules::RuleError::Io { .. }));
            Err(if unreadable { 2 } else { 1 })
        }
        Err(e) => {
            eprintln!("sigwatch: {e}");
            Err(2)
        }
    }
}

/// `sigwatch explain`: each line (or stdin's) through the decoder and
/// matcher, step by step; `only` names rules to show even when none of
/// their literals occur. Returns the exit status.
pub fn explain(rules: &RulesOptions, only: &[String], lines: &[String], json: bool) -> u8 {
    let set = match rules_for(rules) {
        Ok(s) => s,
        Err(code) => return code,
    };
    for id in only {
        if !set.rules.iter().any(|r| &r.id == id) {
            eprintln!("no rule {id:?} in the rule set");
            return 1;
        }
    }
    let mut ex = match crate::explain::Explainer::new(set) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let mut out = std::io::stdout().lock();
    let mut one = |ex: &mut crate::explain::Explainer, l: &str| {
        use std::io::Write;
        let text = if json {
            format!("{}\n", ex.explain_json(l, only))
        } else {
            ex.explain(l, only)
        };
        // A closed pipe (`| head`) ends the output quietly.
        out.write_all(text.as_bytes()).is_ok()
    };
    if !lines.is_empty() {
        for l in lines {
            if !one(&mut ex, l) {
                return 0;
            }
        }
        return 0;
    }
    ex.set_modified(crate::source::replay::source_for("-").modified);
    let mut reader = crate::source::stdin::LineReader::new(std::io::stdin().lock());
    loop {
        match reader.next_line_ref() {
            Ok(Some(l)) => {
                if !one(&mut ex, l) {
                    return 0;
                }
            }
            Ok(None) => return 0,
            Err(e) => {
                eprintln!("stdin: {e}");
                return 1;
            }
        }
    }
}

/// `sigwatch test`: runs rule test files (directories: their YAML files),
/// prints each case and a diff for failures. Returns the exit status.
pub fn test(rules: &RulesOptions, paths: &[PathBuf]) -> u8 {
    let set = match rules_for(rules) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let mut files = Vec::new();
    // A path that is not there is a setup error (2), not a failed test.
    if let Some(p) = paths.iter().find(|p| !p.exists()) {
        eprintln!("sigwatch: {}: no such file or directory", p.display());
        return 2;
    }
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = match std::fs::read_dir(p) {
                Ok(rd) => rd
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|e| {
                        e.is_file() && e.extension().is_some_and(|x| x == "yaml" || x == "yml")
                    })
                    .collect(),
                Err(e) => {
                    eprintln!("sigwatch: {}: {e}", p.display());
                    return 2;
                }
            };
            found.sort();
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    let (mut passed, mut failed) = (0, 0);
    let color = std::io::IsTerminal::is_terminal(&std::io::stdout())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    for f in &files {
        println!("{}", f.display());
        match crate::ruletest::run_file(f, &set) {
            Ok(results) => {
                for r in &results {
                    let text = crate::ruletest::render(r);
                    print!("{}", if color { colorize(&text) } else { text });
                    if r.passed {
                        passed += 1;
                    } else {
                        failed += 1;
                    }
                }
            }
            Err(e) => {
                println!("  ERROR {e}");
                failed += 1;
            }
        }
    }
    let (green, red, reset) = if color {
        ("\x1b[32m", "\x1b[1m\x1b[31m", "\x1b[0m")
    } else {
        ("", "", "")
    };
    let failed_text = if failed > 0 {
        format!("{red}{failed} failed{reset}")
    } else {
        format!("{failed} failed")
    };
    println!(
        "\n{green}{passed} passed{reset}, {failed_text} ({} file{})",
        files.len(),
        if files.len() == 1 { "" } else { "s" }
    );
    if failed > 0 || passed == 0 {
        1
    } else {
        0
    }
}

/// `sigwatch check`: validates the rules and their inline examples and
/// prints one line per rule, or (with `literals`) the automaton's literals.
/// Returns the exit status.
pub fn check(rules: &RulesOptions, literals: bool) -> u8 {
    if let Some(path) = &rules.config {
        if !literals {
            match check_config(path) {
                Ok(lines) => {
                    for l in lines {
                        println!("ok   {l}");
                    }
                }
                Err(e) => {
                    eprintln!("{e}");
                    // A file that cannot be read is a setup error; one
                    // that reads but is wrong is a finding.
                    let unreadable = matches!(
                        e,
                        super::AppError::Config(crate::config::ConfigError::Io { .. })
                    );
                    return if unreadable { 2 } else { 1 };
                }
            }
        }
    }
    let set = match rules_for(rules) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if literals {
        return match crate::matcher::Matcher::new(&set) {
            Ok(m) => {
                for l in m.literals() {
                    println!("{l}");
                }
                0
            }
            Err(e) => {
                eprintln!("sigwatch: {e}");
                1
            }
        };
    }
    let failures = match crate::explain::check_examples(&set) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("sigwatch: {e}");
            return 1;
        }
    };
    for r in &set.rules {
        let (m, n) = (&r.examples.0, &r.examples.1);
        let bad = failures.iter().filter(|f| f.rule == r.id).count();
        let verdict = if bad == 0 { "ok" } else { "FAIL" };
        println!(
            "{verdict:4} {:<34} {:<8} {:<8} group_by={:<10} examples={}+{} {}",
            r.id,
            r.severity.as_str(),
            r.detect.kind(),
            if r.group_by.is_empty() {
                "-".to_string()
            } else {
                r.group_by.join(",")
            },
            m.len(),
            n.len(),
            if r.origin.line == 0 {
                "(default, no rule file)".to_string()
            } else {
                format!("{}:{}", r.origin.file, r.origin.line)
            }
        );
        let fed_by_miner = matches!(r.detect, crate::rules::Detect::Novelty(_));
        if !fed_by_miner && (m.is_empty() || n.is_empty()) {
            println!(
                "     warning: {} has no {} examples",
                r.id,
                if m.is_empty() { "match" } else { "no_match" }
            );
        }
    }
    for f in &failures {
        eprintln!(
            "{}:{}:1: rule {}: example {}: {}",
            f.origin.file,
            f.origin.line,
            f.rule,
            if f.expected_match {
                "should match but does not"
            } else {
                "should not match but does"
            },
            f.line
        );
    }
    if failures.is_empty() {
        println!(
            "{} rules, {} literals, all examples pass",
            set.rules.len(),
            crate::matcher::Matcher::new(&set)
                .map(|m| m.literal_count())
                .unwrap_or(0)
        );
        0
    } else {
        1
    }
}

/// `sigwatch check --config FILE`: the configuration as `run` would read
/// it — its shape (unknown keys located), its sources (Loki URL, queries,
/// credential files; globs) and receivers (secrets read, URLs parsed,
/// routes compiled), without connecting or sending anything. Returns a
/// line for each part, or the first error (its file named).
fn check_config(path: &std::path::Path) -> Result<Vec<String>, super::AppError> {
    let c = crate::config::load(path)?;
    let name = path.display();
    let in_file = |e: super::AppError| match e {
        super::AppError::Config(c) => super::AppError::Config(c),
        e => super::AppError::Setup(format!("{name}: {e}")),
    };
    let mut lines = vec![format!("config {name}")];
    lines.extend(super::sources::check_config(&c).map_err(in_file)?);
    let receivers = super::receivers::check_config(&c).map_err(in_file)?;
    if !receivers.is_empty() {
        lines.push(format!(
            "receivers {}; {} route(s){}",
            receivers.join(", "),
            c.routes.len(),
            if c.default.is_empty() {
                String::new()
            } else {
                format!(", default {}", c.default.join(", "))
            }
        ));
    }
    if let Some(r) = &c.rules {
        lines.push(format!(
            "rules {}{}",
            if r.builtin.unwrap_or(true) {
                "built-in pack"
            } else {
                "no built-in pack"
            },
            r.files
                .iter()
                .map(|f| format!(" + {}", f.display()))
                .collect::<String>()
        ));
    }
    Ok(lines)
}

/// `sigwatch prometheus-rules`: the Prometheus rules that evaluate the
/// spread and share rules over every shard (docs/scaling.md), on stdout.
pub fn prometheus_rules(rules: &RulesOptions) -> u8 {
    let set = match rules_for(rules) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match crate::rules::prometheus::rules_file(&set) {
        Some(text) => {
            print!("{text}");
            0
        }
        None => {
            eprintln!("sigwatch: these rules have no spread or share rule: nothing for Prometheus to evaluate");
            1
        }
    }
}

/// `sigwatch hash-password`: the bcrypt hash of the first line of stdin
/// (without its line end), on stdout.
pub fn hash_password(cost: u32) -> u8 {
    let mut line = String::new();
    if let Err(e) = std::io::stdin().read_line(&mut line) {
        eprintln!("sigwatch: cannot read the password from stdin: {e}");
        return 2;
    }
    let password = line.trim_end_matches(['\r', '\n']);
    if password.is_empty() {
        eprintln!("sigwatch: no password on stdin");
        return 2;
    }
    match bcrypt::hash(password, cost) {
        Ok(h) => {
            println!("{h}");
            0
        }
        Err(e) => {
            eprintln!("sigwatch: {e}");
            2
        }
    }
}

/// A rendered test result in colour: `ok` green, `FAIL` red, the diff's
/// missing lines red, unexpected green, changed yellow.
fn colorize(text: &str) -> String {
    const RESET: &str = "\x1b[0m";
    let mut out = String::with_capacity(text.len() + 32);
    for line in text.split_inclusive('\n') {
        let (code, rest) = if let Some(r) = line.strip_prefix("  ok") {
            out.push_str("  \x1b[32mok");
            out.push_str(RESET);
            out.push_str(r);
            continue;
        } else if let Some(r) = line.strip_prefix("  FAIL") {
            out.push_str("  \x1b[1m\x1b[31mFAIL");
            out.push_str(RESET);
            out.push_str(r);
            continue;
        } else if line.starts_with("        - ") {
            ("\x1b[31m", line)
        } else if line.starts_with("        + ") {
            ("\x1b[32m", line)
        } else if line.starts_with("        ~ ") {
            ("\x1b[33m", line)
        } else {
            out.push_str(line);
            continue;
        };
        let body = rest.trim_end_matches('\n');
        out.push_str(code);
        out.push_str(body);
        out.push_str(RESET);
        if rest.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// `sigwatch import loki-rules`: Loki ruler files translated into the rule
/// file `out` (and, with `tests`, a rule test per rule); one line per ruler
/// rule on stdout. Returns 1 when an alerting rule was skipped, unless
/// `allow_partial`; 2 when the files cannot be read or written.
pub fn import_loki_rules(
    files: &[PathBuf],
    out: &std::path::Path,
    tests: Option<&std::path::Path>,
    allow_partial: bool,
) -> u8 {
    let rules_path = match tests {
        Some(dir) => relative(dir, out),
        None => out.display().to_string(),
    };
    let imp = match crate::rules::logql::import(files, &rules_path) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("sigwatch: {e}");
            return 2;
        }
    };
    let (mut translated, mut skipped, mut recording) = (0, 0, 0);
    for o in &imp.outcomes {
        match &o.result {
            Ok(notes) => {
                translated += 1;
                println!(
                    "translated  {} / {} → {}",
                    o.origin,
                    o.name,
                    o.id.as_deref().unwrap_or("")
                );
                for n in notes {
                    println!("            note: {n}");
                }
            }
            Err(s) => {
                if o.recording {
                    recording += 1;
                } else {
                    skipped += 1;
                }
                println!("skipped: {}  ({} / {})", s.reason, o.origin, o.name);
                println!("            in: {}", s.part);
            }
        }
    }
    // What is written must load: a failure here is sigwatch's own bug,
    // said before anything is written.
    let named = [(out.display().to_string(), imp.rules_yaml.clone())];
    if translated > 0 {
        if let Err(e) = crate::rules::compile(&named) {
            eprintln!("sigwatch: the translated rules do not load (please report): {e}");
            return 2;
        }
    }
    if let Err(e) = std::fs::write(out, &imp.rules_yaml) {
        eprintln!("sigwatch: cannot write {}: {e}", out.display());
        return 2;
    }
    if let Some(dir) = tests {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("sigwatch: cannot create {}: {e}", dir.display());
            return 2;
        }
        for (name, text) in &imp.tests {
            let p = dir.join(name);
            if let Err(e) = std::fs::write(&p, text) {
                eprintln!("sigwatch: cannot write {}: {e}", p.display());
                return 2;
            }
        }
    }
    println!(
        "{translated} translated, {skipped} skipped, {recording} recording rule(s) listed; wrote {}{}",
        out.display(),
        tests
            .map(|d| format!(" and {} test file(s) in {}", imp.tests.len(), d.display()))
            .unwrap_or_default()
    );
    if !imp.selector_labels.is_empty() {
        let said: Vec<String> = imp
            .selector_labels
            .iter()
            .map(|(k, vs)| {
                let vs: Vec<&str> = vs.iter().map(String::as_str).collect();
                format!("{k} ({})", vs.join(", "))
            })
            .collect();
        println!(
            "note: the rules select streams by {}. Lines from Loki carry their labels; piped or read from files, a kubectl --prefix gives pod and container, and `--label NAME=VALUE` any other.",
            said.join(", ")
        );
    }
    if imp.partial() && !allow_partial {
        eprintln!("sigwatch: {skipped} alerting rule(s) were not translated (see above); --allow-partial accepts that");
        return 1;
    }
    0
}

/// `to` as a path relative to the directory `from` (both made absolute).
fn relative(from: &std::path::Path, to: &std::path::Path) -> String {
    let abs = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (from, to) = (abs(from), abs(to));
    let f: Vec<_> = from.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    out.display().to_string()
}
