//! Output: the rules in the pack's own idiom (YAML with a why-comment per
//! rule), their test file with examples that must and must not match,
//! and the ranked explanation printed for the operator.

use super::{human, Kind, SuggestOptions, Suggestion};
use crate::app::AppError;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub(super) fn describe(k: &Kind, alias: &str) -> String {
    match k {
        Kind::Count { threshold } => format!("count ≥ {threshold} in 5m per {alias}"),
        Kind::Share {
            min_total,
            min_share,
        } => format!(
            "share ≥ {:.0} % of ≥ {min_total} in 15m on one {alias}",
            min_share * 100.0
        ),
        Kind::Spread {
            fraction,
            min_groups,
        } => format!(
            "spread over ≥ {:.0} % (≥ {min_groups}) of the {alias}s in 5m",
            fraction * 100.0
        ),
        Kind::Persist { for_, max_gap } => format!(
            "persist for {} per {alias} (pauses up to {})",
            human(*for_),
            human(*max_gap)
        ),
    }
}

/// A YAML string: JSON's quoting is YAML's double-quoted style.
pub(super) fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

pub(super) fn dur(ns: i64) -> String {
    human(ns)
}

/// The rules in the pack's idiom.
pub(super) fn rules_yaml(found: &[Suggestion], o: &SuggestOptions) -> String {
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# Suggested by `sigwatch suggest` from the incident {} against the\n# baseline {}. Each rule fired on the incident and stayed quiet on the\n# baseline when written; read them, rename them, then add them to your rules.",
        o.incident.join(" "),
        o.baseline.join(" ")
    );
    y.push_str("rules:\n");
    for s in found {
        let lit = q(&s.literal);
        let (detect, summary, title) = match &s.kind {
            Kind::Count { threshold } => (
                format!("count: {{threshold: {threshold}, window: 5m}}"),
                format!("{{{{ group }}}} logged {:?} {{{{ count }}}} time(s)", s.literal),
                format!("{:?} new or rising on a {}", s.literal, s.alias),
            ),
            Kind::Share {
                min_total,
                min_share,
            } => (
                format!("share: {{window: 15m, min_total: {min_total}, min_share: {min_share:.2}, min_groups: 2}}"),
                format!("{{{{ group }}}} takes {{{{ share }}}} of {:?} ({{{{ count }}}} of {{{{ total }}}} in the window)", s.literal),
                format!("One {} takes most of {:?}", s.alias, s.literal),
            ),
            Kind::Spread {
                fraction,
                min_groups,
            } => (
                format!("spread: {{window: 5m, fraction: {fraction:.2}, min_groups: {min_groups}}}"),
                format!("{{{{ groups }}}} of {{{{ population }}}} {}s log {:?}", s.alias, s.literal),
                format!("{:?} on many {}s at once", s.literal, s.alias),
            ),
            Kind::Persist { for_, max_gap } => (
                format!("persist: {{for: {}, max_gap: {}}}", dur(*for_), dur(*max_gap)),
                format!("{{{{ group }}}} has logged {:?} for {{{{ duration }}}}", s.literal),
                format!("{:?} on one {} for minutes", s.literal, s.alias),
            ),
        };
        let _ = writeln!(y, "\n  - id: {}", s.id);
        let _ = writeln!(y, "    title: {}", q(&title));
        let _ = writeln!(y, "    severity: {}", s.severity);
        let mut description = format!("Template `{}`", s.template);
        if let Some(l) = s.level {
            let _ = write!(description, " at {}", l.as_str());
        }
        let _ = write!(description, ": {}.", s.why.join("; "));
        let _ = writeln!(y, "    description: {}", q(&description));
        let _ = writeln!(y, "    match:\n      contains: [{lit}]");
        if let Some(a) = &s.also {
            let _ = writeln!(y, "      contains_all: [{}]", q(a));
        }
        let _ = writeln!(y, "    group_by: {}", s.alias);
        let _ = writeln!(y, "    detect:\n      {detect}");
        let _ = writeln!(y, "    annotations:\n      summary: {}", q(&summary));
        if !s.examples.is_empty() || !s.no_match.is_empty() {
            y.push_str("    examples:\n");
            if !s.examples.is_empty() {
                y.push_str("      match:\n");
                for l in &s.examples {
                    let _ = writeln!(y, "        - {}", q(l));
                }
            }
            if !s.no_match.is_empty() {
                y.push_str("      no_match:\n");
                for l in &s.no_match {
                    let _ = writeln!(y, "        - {}", q(l));
                }
            }
        }
    }
    if found.is_empty() {
        y.push_str("  []\n");
    }
    y
}

/// `to` relative to the directory `from` (both made absolute first).
pub(super) fn relative(from: &Path, to: &Path) -> PathBuf {
    let abs = |p: &Path| {
        std::fs::canonicalize(p).unwrap_or_else(|_| {
            std::env::current_dir()
                .map(|d| d.join(p))
                .unwrap_or_else(|_| p.to_path_buf())
        })
    };
    let (from, to) = (abs(from), abs(to));
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c.as_os_str());
    }
    out
}

/// The rule tests: each incident file fires the suggested rules (every
/// notification they make, in order), each baseline file makes none. The
/// expectations are what `sigwatch test` sees, checked by running it.
pub(super) fn write_tests(
    dir: &Path,
    found: &[Suggestion],
    o: &SuggestOptions,
) -> Result<PathBuf, AppError> {
    std::fs::create_dir_all(dir)
        .map_err(AppError::io(format!("cannot create {}", dir.display())))?;
    let stem = o
        .out
        .file_stem()
        .map_or_else(|| "suggested".into(), |s| s.to_string_lossy().into_owned());
    let path = dir.join(format!("{stem}.yaml"));
    let rules_rel = relative(dir, &o.out);
    let set = crate::rules::load_layered(false, std::slice::from_ref(&o.out))?;
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# Tests of {}, written by `sigwatch suggest`: the incident fires the\n# suggested rules, the baseline does not. Run: sigwatch test {}",
        rules_rel.display(),
        path.display()
    );
    let names: Vec<&str> = found.iter().map(|s| s.id.as_str()).collect();
    let _ = writeln!(y, "# The rules: {}.", names.join(", "));
    let _ = writeln!(y, "rules: [{}]", q(&rules_rel.display().to_string()));
    y.push_str("tests:\n");
    for f in &o.incident {
        let rel = relative(dir, Path::new(f));
        let case = crate::ruletest::Case::of_file(
            &format!("the incident {f} fires the suggested rules"),
            &rel.display().to_string(),
        );
        let seen = crate::ruletest::observe(&case, &set, dir).map_err(AppError::Setup)?;
        let _ = writeln!(y, "  - name: {}", q(&case.name));
        let _ = writeln!(
            y,
            "    input:\n      - file: {}",
            q(&rel.display().to_string())
        );
        if o.from.is_some() || o.to.is_some() {
            y.push_str(
                "    # The whole file: --from/--to narrowed what suggest mined, not the test.\n",
            );
        }
        y.push_str("    expect:\n");
        // Every notification, in order: the suggested rules' and any the
        // file's rules make besides (novelty's).
        let any = !seen.is_empty();
        for (state, rule, group) in &seen {
            let _ = writeln!(
                y,
                "      - {{rule: {rule}, group: {}, state: {state}}}",
                q(group)
            );
        }
        if !any {
            y.push_str("      []\n");
        }
    }
    for f in &o.baseline {
        let rel = relative(dir, Path::new(f));
        let _ = writeln!(
            y,
            "  - name: {}",
            q(&format!("the baseline {f} stays quiet"))
        );
        let _ = writeln!(
            y,
            "    input:\n      - file: {}",
            q(&rel.display().to_string())
        );
        y.push_str("    expect: []\n");
    }
    std::fs::write(&path, &y).map_err(AppError::io(format!("cannot write {}", path.display())))?;
    // They must pass as written.
    let results =
        crate::ruletest::run_file(&path, &set).map_err(|e| AppError::Setup(e.to_string()))?;
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.passed)
        .map(crate::ruletest::render)
        .collect();
    if !failed.is_empty() {
        return Err(AppError::Setup(format!(
            "the written tests fail (a bug):\n{}",
            failed.join("\n")
        )));
    }
    Ok(path)
}
