//! The rule compiler: YAML files (the pack, then the operator's own) read,
//! validated with `file:line:column` errors and compiled into the model of
//! [`super`]. Kept apart from the model so that the stages that only read
//! rules never open the loader.

use super::condition::{literal_bytes, push_cond, MAX_SET_LITERAL_BYTES};
use super::detection::{compile_detect, compile_recents, describe_cond, Located, MAX_RECENTS};
use super::model::{self, ForOn, Layer, RuleFile, RuleSpec, Severity};
use super::template::Template;
use super::{
    Condition, Detect, Novelty, Origin, Progress, Rule, RuleError, RuleErrors, RuleSet, BUILTIN,
    DEFAULT_CHATTER_PER_SECOND, DEFAULT_LEARN_LINES, DEFAULT_MAX_GROUPS, DEFAULT_REPEAT_INTERVAL,
    NOVELTY_RULE,
};
use crate::decode::severity::Level;
use crate::duration::Dur;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// Loads the embedded built-in pack.
pub fn load_builtin() -> Result<RuleSet, RuleErrors> {
    load_layered(true, &[])
}

/// Loads rule files from paths (files or directories of `*.yaml`/`*.yml`).
pub fn load_paths(paths: &[PathBuf]) -> Result<RuleSet, RuleErrors> {
    compile(&read_paths(paths)?)
}

/// Reads the rule files under paths as (name, text), in a stable order,
/// without compiling them (`--watch-rules` compares these).
pub fn read_paths(paths: &[PathBuf]) -> Result<Vec<(String, String)>, RuleErrors> {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for p in paths {
        collect_files(p, &mut files, &mut errors);
    }
    if !errors.is_empty() {
        return Err(RuleErrors(errors));
    }
    if files.is_empty() {
        return Err(RuleErrors(vec![RuleError::Io {
            path: paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            message: "no rule files (*.yaml, *.yml) found".into(),
        }]));
    }
    Ok(files)
}

fn collect_files(p: &Path, files: &mut Vec<(String, String)>, errors: &mut Vec<RuleError>) {
    let io = |e: std::io::Error| RuleError::Io {
        path: p.display().to_string(),
        message: e.to_string(),
    };
    if p.is_dir() {
        let mut entries: Vec<PathBuf> = match std::fs::read_dir(p) {
            Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
            Err(e) => return errors.push(io(e)),
        };
        entries.sort();
        for e in entries {
            let yaml = e.extension().is_some_and(|x| x == "yaml" || x == "yml");
            if yaml && e.is_file() {
                collect_files(&e, files, errors);
            }
        }
    } else {
        match std::fs::read_to_string(p) {
            Ok(t) => files.push((p.display().to_string(), t)),
            Err(e) => errors.push(io(e)),
        }
    }
}

/// Compiles rule files given as (name, text), the operator's own (for the
/// pack plus one's own, see [`compile_layers`]). Every error is collected
/// and located (`file:line:column`), none is skipped: a wrong rule is
/// refused at load, never a silent non-alert later.
///
/// ```
/// let bad = sigwatch::rules::compile(&[(
///     "mine.yaml".to_string(),
///     "rules:\n  - id: x\n    title: t\n    severity: loud\n    match: {contains: [a]}\n    detect: {count: {window: 1m}}\n".to_string(),
/// )])
/// .unwrap_err();
/// assert!(bad.to_string().starts_with("mine.yaml:4:"), "{bad}");
/// ```
pub fn compile(files: &[(String, String)]) -> Result<RuleSet, RuleErrors> {
    compile_layers(files, 0)
}

/// Compiles the built-in pack with rule files of one's own: the pack's
/// files, then `paths` (files or directories). A rule of one's own with
/// the id of a pack rule replaces it; a `novelty:` section of one's own
/// replaces the pack's. `pack: false` (`--no-builtin-rules`) leaves the
/// pack out.
pub fn load_layered(pack: bool, paths: &[PathBuf]) -> Result<RuleSet, RuleErrors> {
    let mut files: Vec<(String, String)> = Vec::new();
    if pack {
        files.extend(BUILTIN.iter().map(|(n, t)| (n.to_string(), t.to_string())));
    }
    let n = files.len();
    if !paths.is_empty() {
        files.extend(read_paths(paths)?);
    }
    if files.is_empty() {
        return Err(RuleErrors(vec![RuleError::Io {
            path: "(none)".into(),
            message: "no rules: without the built-in pack, give --rules PATH".into(),
        }]));
    }
    compile_layers(&files, n)
}

/// [`compile`], where the first `pack` files are the built-in pack: rules
/// and the novelty section of the files after them replace the pack's of
/// the same id instead of clashing with them.
pub fn compile_layers(files: &[(String, String)], pack: usize) -> Result<RuleSet, RuleErrors> {
    let mut c = Compiling::default();
    let mut parsed = c.parse(files, pack);
    // Aliases and sticky fields first: rules of any file may use them.
    for (_, _, f) in &parsed {
        for (k, v) in &f.aliases {
            c.set.keys.aliases.insert(k.clone(), v.clone());
        }
        for s in &f.sticky {
            if !c.set.keys.sticky.contains(s) {
                c.set.keys.sticky.push(s.clone());
            }
        }
    }
    own_replaces_pack(&mut parsed);
    let parsed_meta: Vec<(String, String, Option<model::NoveltySpec>)> = parsed
        .iter()
        .map(|(n, t, f)| (n.to_string(), t.to_string(), f.novelty.clone()))
        .collect();
    for (name, text, f) in parsed {
        c.rules_of(name, text, f);
    }
    c.novelty(&parsed_meta);
    if c.errors.is_empty() {
        // Incident chains name rules of any file (once they all compiled).
        c.check_chains(&parsed_meta);
    }
    if c.errors.is_empty() {
        Ok(c.set)
    } else {
        Err(RuleErrors(c.errors))
    }
}

/// One's own rules and novelty replace the pack's.
fn own_replaces_pack(parsed: &mut [(&String, &String, RuleFile)]) {
    let own_ids: HashSet<String> = parsed
        .iter()
        .filter(|(_, _, f)| f.layer == Layer::Own)
        .flat_map(|(_, _, f)| f.rules.iter().map(|r| r.id.clone()))
        .collect();
    let own_novelty = parsed
        .iter()
        .any(|(_, _, f)| f.layer == Layer::Own && f.novelty.is_some());
    for (name, _, f) in parsed.iter_mut().filter(|(_, _, f)| f.layer == Layer::Pack) {
        let before = f.rules.len();
        f.rules.retain(|r| !own_ids.contains(&r.id));
        if f.rules.len() < before {
            tracing::info!(file = %name, replaced = before - f.rules.len(), "Rules of one's own replace built-in rules of the same id.");
        }
        if own_novelty {
            f.novelty = None;
        }
    }
}

/// A rule set being compiled, and what is wrong with it so far.
#[derive(Default)]
struct Compiling {
    set: RuleSet,
    errors: Vec<RuleError>,
    seen_ids: HashSet<String>,
    /// Literal bytes since the bound was last reported.
    literal_total: usize,
}

impl Compiling {
    /// The files parsed (the first `pack` of them the built-in pack); a
    /// file that does not parse is an error at its line and column.
    fn parse<'f>(
        &mut self,
        files: &'f [(String, String)],
        pack: usize,
    ) -> Vec<(&'f String, &'f String, RuleFile)> {
        let mut parsed = Vec::new();
        for (i, (name, text)) in files.iter().enumerate() {
            match serde_yaml_ng::from_str::<RuleFile>(text) {
                Ok(mut f) => {
                    if i < pack {
                        f.layer = Layer::Pack;
                    }
                    parsed.push((name, text, f))
                }
                Err(e) => {
                    let (line, column) = e
                        .location()
                        .map(|l| (l.line(), l.column()))
                        .unwrap_or((1, 1));
                    // Every rule's mistakes at once: each rule is parsed
                    // on its own, and the file again without the rules
                    // that do not parse, so the others are checked too.
                    let (each, rest) = super::salvage::parse_each_rule(text);
                    let within = each.iter().any(|(l, _, _)| *l == line);
                    if !within {
                        self.errors.push(RuleError::At {
                            file: name.clone(),
                            line,
                            column,
                            message: super::salvage::strip_location(&e.to_string()),
                        });
                    }
                    for (line, column, message) in each {
                        self.errors.push(RuleError::At {
                            file: name.clone(),
                            line,
                            column,
                            message,
                        });
                    }
                    if let Some(mut f) = rest {
                        if i < pack {
                            f.layer = Layer::Pack;
                        }
                        parsed.push((name, text, f));
                    }
                }
            }
        }
        parsed
    }

    /// The rules of one file, each error at the line of its rule (or of
    /// the key it is about).
    fn rules_of(&mut self, name: &str, text: &str, f: RuleFile) {
        let from_pack = f.layer == Layer::Pack;
        let index = Lines::new(text);
        let mut occurrences: std::collections::HashMap<String, usize> =
            std::collections::HashMap::new();
        for spec in f.rules {
            let id = spec.id.clone();
            let nth = {
                let n = occurrences.entry(id.clone()).or_insert(0);
                *n += 1;
                *n - 1
            };
            let (line, col) = index.locate(&id, nth, None);
            let at = |key: Option<&str>, message: String| {
                let (line, column) = key
                    .map(|k| index.locate(&id, nth, Some(k)))
                    .unwrap_or((line, col));
                RuleError::At {
                    file: name.to_string(),
                    line,
                    column,
                    message,
                }
            };
            if !self.seen_ids.insert(spec.id.clone()) {
                self.errors
                    .push(at(None, format!("duplicate rule id {:?}", spec.id)));
                continue;
            }
            let conds_before = self.set.conditions.len();
            let origin = Origin {
                file: name.to_string(),
                line,
                pack: from_pack,
            };
            match compile_rule(spec, &mut self.set, origin) {
                Ok(rule) => {
                    self.literal_total += self.set.conditions[conds_before..]
                        .iter()
                        .map(literal_bytes)
                        .sum::<usize>();
                    if self.literal_total > MAX_SET_LITERAL_BYTES {
                        self.errors.push(at(
                            Some("match"),
                            format!(
                                "the rules' literals pass {} MiB in all here: the automaton they make would not stay small; split the pack",
                                MAX_SET_LITERAL_BYTES >> 20
                            ),
                        ));
                        self.literal_total = 0;
                    }
                    self.set.rules.push(rule)
                }
                Err((key, msg)) => self.errors.push(at(key, msg)),
            }
        }
    }

    /// Novelty: on unless a file turns it off; one file at most sets it.
    fn novelty(&mut self, parsed_meta: &[(String, String, Option<model::NoveltySpec>)]) {
        let mut novelty: Option<(&String, &String, &model::NoveltySpec)> = None;
        for (name, text, f) in parsed_meta {
            let Some(spec) = f else { continue };
            let (line, column) = locate_top(text, "novelty");
            if let Some((first, _, _)) = novelty {
                self.errors.push(RuleError::At {
                    file: name.to_string(),
                    line,
                    column,
                    message: format!("novelty is already configured in {first}; one file sets it"),
                });
                continue;
            }
            novelty = Some((name, text, spec));
        }
        let default_spec = model::NoveltySpec::default();
        let (origin, spec) = match novelty {
            Some((name, text, spec)) => (
                Origin {
                    file: name.clone(),
                    line: locate_top(text, "novelty").0,
                    pack: BUILTIN.iter().any(|(n, t)| n == name && t == text),
                },
                spec,
            ),
            None => (
                Origin {
                    file: "(built in)".into(),
                    line: 0,
                    pack: true,
                },
                &default_spec,
            ),
        };
        if spec.enabled == Some(false) || !self.errors.is_empty() {
            return;
        }
        let at = |message: String| RuleError::At {
            file: origin.file.clone(),
            line: origin.line.max(1),
            column: 1,
            message,
        };
        if self.seen_ids.contains(NOVELTY_RULE) {
            self.errors.push(at(format!(
                "rule id {NOVELTY_RULE:?} is reserved for novelty"
            )));
            return;
        }
        match compile_novelty(spec, &mut self.set, origin.clone()) {
            Ok(rule) => self.set.rules.push(rule),
            Err(message) => self.errors.push(at(format!("novelty: {message}"))),
        }
        let Some(a) = spec.anomalies.as_ref().filter(|a| a.enabled == Some(true)) else {
            return;
        };
        if self.seen_ids.contains(super::ANOMALY_RULE) {
            self.errors.push(at(format!(
                "rule id {:?} is reserved for anomalies",
                super::ANOMALY_RULE
            )));
            return;
        }
        match compile_anomaly(spec, a, &mut self.set, origin.clone()) {
            Ok(rule) => self.set.rules.push(rule),
            Err(message) => self
                .errors
                .push(at(format!("novelty: anomalies: {message}"))),
        }
    }

    /// Incident chains (`caused_by`) name rules that exist, other than
    /// their own; incident names are not empty.
    fn check_chains(&mut self, parsed_meta: &[(String, String, Option<model::NoveltySpec>)]) {
        for r in &self.set.rules {
            for c in &r.caused_by {
                let problem = if c == &r.id {
                    Some("a rule cannot be caused by itself".to_string())
                } else if !self.set.rules.iter().any(|o| &o.id == c) {
                    Some(format!("caused_by names unknown rule {c:?}"))
                } else {
                    None
                };
                if let Some(message) = problem {
                    let (line, column) = parsed_text(parsed_meta, &r.origin.file)
                        .map_or((r.origin.line, 1), |t| {
                            locate(t, &r.id, 0, Some("caused_by"))
                        });
                    self.errors.push(RuleError::At {
                        file: r.origin.file.clone(),
                        line,
                        column,
                        message,
                    });
                }
            }
            if r.incident.as_deref().is_some_and(|n| n.trim().is_empty()) {
                self.errors.push(RuleError::At {
                    file: r.origin.file.clone(),
                    line: r.origin.line,
                    column: 1,
                    message: "incident: the name is empty".into(),
                });
            }
        }
    }
}

/// The text of a parsed rule file, by name.
fn parsed_text<'a>(
    meta: &'a [(String, String, Option<model::NoveltySpec>)],
    file: &str,
) -> Option<&'a str> {
    meta.iter()
        .find(|(n, _, _)| n == file)
        .map(|(_, t, _)| t.as_str())
}

/// Line and column of a top-level `key:` (1, 1 when absent).
fn locate_top(text: &str, key: &str) -> (usize, usize) {
    let pat = format!("{key}:");
    text.lines()
        .position(|l| l.starts_with(&pat))
        .map_or((1, 1), |i| (i + 1, 1))
}

/// Levels named in a novelty section; `error` brings `fatal` along, and
/// `none` (lines without a level) is returned apart.
fn novelty_levels(names: &[String], what: &str) -> Result<(Vec<Level>, bool), String> {
    let mut out = Vec::new();
    let mut none = false;
    for n in names {
        if n.eq_ignore_ascii_case("none") {
            none = true;
            continue;
        }
        let l = Level::parse(n).ok_or_else(|| {
            format!("{what}: unknown level {n:?} (use debug, info, warn, error, fatal, none)")
        })?;
        out.push(l);
        if l == Level::Error {
            out.push(Level::Fatal);
        }
    }
    out.sort_by_key(|l| *l as u8);
    out.dedup();
    Ok((out, none))
}

/// The condition of a synthetic rule, fed by the miner: no line matches it.
fn never_condition(set: &mut RuleSet) -> super::CondId {
    set.conditions.push(Condition {
        never: true,
        ..Condition::default()
    });
    set.conditions.len() - 1
}

/// The synthetic rule of `novelty: {anomalies: …}` (see
/// [`crate::detect::anomaly`]).
fn compile_anomaly(
    spec: &model::NoveltySpec,
    a: &model::AnomalyModel,
    set: &mut RuleSet,
    origin: Origin,
) -> Result<Rule, String> {
    let dur = |d: Option<Dur>, default: i64| d.map_or(default, Dur::ns);
    let m = 60_000_000_000;
    let s = super::AnomalySpec {
        window: dur(a.window, 10 * m),
        spread_window: dur(a.spread_window, m),
        population_window: dur(a.population_window, 10 * m),
        min_fraction: a.min_fraction.unwrap_or(0.5),
        min_groups: a.min_groups.unwrap_or(3),
        min_share: a.min_share.unwrap_or(0.9),
        min_lines: a.min_lines.unwrap_or(10),
        min_peers: a.min_peers.unwrap_or(2),
        surge_lines: a.surge_lines.unwrap_or(20),
        factor: a.factor.unwrap_or(5.0),
    };
    if s.window <= 0 || s.spread_window <= 0 || s.population_window <= 0 {
        return Err("windows must be longer than 0s".into());
    }
    if !(0.0..=1.0).contains(&s.min_fraction) || !(0.0..=1.0).contains(&s.min_share) {
        return Err("min_fraction and min_share are between 0 and 1".into());
    }
    if s.factor < 1.0 || !s.factor.is_finite() {
        return Err("factor must be at least 1".into());
    }
    // The upstream a line names first (a slow instance among its peers),
    // else its node.
    let group_by = spec
        .group_by
        .as_ref()
        .map(|g| g.to_vec())
        .unwrap_or_else(|| vec!["upstream".to_string(), "node".to_string()]);
    let mut annotations = BTreeMap::new();
    annotations.insert(
        "summary".to_string(),
        Template::parse("`{{ template }}` ({{ level }}): {{ reason }}")
            .map_err(|e| e.to_string())?,
    );
    let cond = never_condition(set);
    let window = s.spread_window;
    Ok(Rule {
        id: super::ANOMALY_RULE.to_string(),
        title: "Log template out of its normal shape".into(),
        severity: a.severity.unwrap_or(Severity::Warning),
        description: Some(
            "A known warn or error template from most groups at once, almost all from one group while its peers are \
             healthy, or as a storm on a lone group, each far past what it looked like while the baseline was learned."
                .into(),
        ),
        cond,
        resolve_on: None,
        unless: Vec::new(),
        progress: None,
        group_by,
        resolve_after: window,
        detect: Detect::Anomaly(s),
        for_: non_negative(a.for_, 30, "for")?,
        for_clock: false,
        evaluate_every: 0,
        repeat_interval: DEFAULT_REPEAT_INTERVAL.ns().max(1),
        max_groups: DEFAULT_MAX_GROUPS,
        annotations,
        labels: BTreeMap::new(),
        examples: Default::default(),
        caused_by: Vec::new(),
        incident: None,
        origin,
    })
}

/// The synthetic rule of the `novelty:` section (see [`Novelty`]).
fn compile_novelty(
    spec: &model::NoveltySpec,
    set: &mut RuleSet,
    origin: Origin,
) -> Result<Rule, String> {
    let n = novelty_settings(spec)?;
    let group_by = spec
        .group_by
        .as_ref()
        .map(|g| g.to_vec())
        .unwrap_or_else(|| vec!["node".to_string()]);
    if group_by.is_empty() || group_by.iter().any(|g| g.trim().is_empty()) {
        return Err("group_by needs a key".into());
    }
    let compiled = novelty_annotations(spec, &group_by[0])?;
    let cond = never_condition(set);
    let window = n.window;
    Ok(Rule {
        id: NOVELTY_RULE.to_string(),
        title: "New error template".into(),
        severity: spec.severity.unwrap_or(Severity::Warning),
        description: Some(
            "A log template never seen before (or not for a long time) at a paging level, \
             on enough lines of one group or on several groups: a failure mode no rule names."
                .into(),
        ),
        cond,
        resolve_on: None,
        unless: Vec::new(),
        progress: None,
        group_by,
        resolve_after: window,
        detect: Detect::Novelty(n),
        for_: non_negative(spec.for_, 30, "for")?,
        for_clock: false,
        evaluate_every: 0,
        repeat_interval: spec
            .repeat_interval
            .unwrap_or(DEFAULT_REPEAT_INTERVAL)
            .ns()
            .max(1),
        max_groups: DEFAULT_MAX_GROUPS,
        annotations: compiled,
        labels: spec.labels.clone(),
        examples: Default::default(),
        caused_by: Vec::new(),
        incident: None,
        origin,
    })
}

/// A duration setting, `default` seconds when absent; negative is an error.
fn non_negative(v: Option<Dur>, default: i64, what: &str) -> Result<i64, String> {
    let ns = v.unwrap_or(Dur::secs(default)).ns();
    if ns < 0 {
        return Err(format!("{what} must not be negative"));
    }
    Ok(ns)
}

/// The novelty section's settings, checked, with their defaults.
fn novelty_settings(spec: &model::NoveltySpec) -> Result<Novelty, String> {
    let strs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (levels, unleveled) = novelty_levels(
        spec.levels
            .as_deref()
            .unwrap_or(&strs(&["debug", "info", "warn", "error"])),
        "levels",
    )?;
    let (page_levels, page_none) = novelty_levels(
        spec.page_levels.as_deref().unwrap_or(&strs(&["error"])),
        "page_levels",
    )?;
    if page_none {
        return Err("page_levels cannot name none: a line without a level never pages".into());
    }
    if let Some(l) = page_levels.iter().find(|l| !levels.contains(l)) {
        return Err(format!(
            "page_levels has {} but levels does not: only mined levels can page",
            l.as_str()
        ));
    }
    let d = non_negative;
    let window = d(spec.window, 300, "window")?;
    if window == 0 {
        return Err("window must be positive".into());
    }
    if spec.similarity.is_some() {
        return Err("similarity is no longer a setting: two messages share a template when their words agree, and a position becomes a variable after variable_after distinct words (default 4)".into());
    }
    let variable_after = spec.variable_after.unwrap_or(4);
    if variable_after < 2 {
        return Err("variable_after must be 2 or more".into());
    }
    Ok(Novelty {
        levels,
        unleveled,
        chatter_per_second: spec
            .chatter_per_second
            .unwrap_or(DEFAULT_CHATTER_PER_SECOND),
        page_levels,
        learn_for: d(spec.learn_for, 3600, "learn_for")?,
        learn_lines: spec.learn_lines.unwrap_or(DEFAULT_LEARN_LINES),
        window,
        min_count: spec.min_count.unwrap_or(5).max(1),
        min_groups: spec.min_groups.unwrap_or(2).max(1),
        novel_for: d(spec.novel_for, 3600, "novel_for")?,
        forget_after: d(spec.forget_after, 7 * 86_400, "forget_after")?,
        max_templates: spec.max_templates.unwrap_or(10_000).max(1),
        variable_after,
        ignore: spec
            .ignore
            .iter()
            .filter(|s| !s.is_empty())
            .cloned()
            .collect(),
    })
}

/// The novelty rule's annotations: the defaults, then the section's own;
/// its labels may not override sigwatch's.
fn novelty_annotations(
    spec: &model::NoveltySpec,
    noun: &str,
) -> Result<BTreeMap<String, Template>, String> {
    let mut annotations = BTreeMap::new();
    let defaults = [
        (
            "summary",
            format!("new {{{{ level }}}} template on {{{{ groups }}}} {noun}(s): `{{{{ template }}}}`"),
        ),
        (
            "description",
            "A message never seen before (or not for a long time) at this level, first seen {{ first_seen }} on {{ top_group }}; {{ count }} lines so far.".to_string(),
        ),
    ];
    for (k, v) in defaults {
        annotations.insert(k.to_string(), v);
    }
    for (k, v) in &spec.annotations {
        annotations.insert(k.clone(), v.clone());
    }
    let mut compiled = BTreeMap::new();
    for (k, v) in annotations {
        let t = Template::parse(&v).map_err(|e| format!("annotation {k}: {e}"))?;
        compiled.insert(k, t);
    }
    for k in spec.labels.keys() {
        if ["rule", "severity", "group", "alertname"].contains(&k.as_str()) {
            return Err(format!(
                "label {k:?} is set by sigwatch and cannot be overridden"
            ));
        }
    }
    Ok(compiled)
}

/// Finds the line and column of the `nth` rule with this `id` (or of `key:`
/// inside that rule).
/// A rule file's lines and where each rule id is defined, built once per
/// file so that locating every rule is linear in the file, not quadratic.
struct Lines<'a> {
    lines: Vec<&'a str>,
    ids: std::collections::HashMap<&'a str, Vec<usize>>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Lines<'a> {
        let lines: Vec<&str> = text.lines().collect();
        let mut ids: std::collections::HashMap<&str, Vec<usize>> = std::collections::HashMap::new();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start().trim_start_matches("- ").trim_start();
            if let Some(rest) = t.strip_prefix("id:") {
                let id = rest.trim().trim_matches(|c| c == '"' || c == '\'');
                ids.entry(id).or_default().push(i);
            }
        }
        Lines { lines, ids }
    }

    /// (line, column) of the `nth` rule with this id, or of its `key`.
    fn locate(&self, id: &str, nth: usize, key: Option<&str>) -> (usize, usize) {
        let Some(&start) = self.ids.get(id).and_then(|v| v.get(nth)) else {
            return (1, 1);
        };
        let col_of = |l: &str, pat: &str| l.find(pat).map(|c| c + 1).unwrap_or(1);
        if let Some(key) = key {
            let pat = format!("{key}:");
            for (i, l) in self.lines.iter().enumerate().skip(start) {
                if i > start && l.trim_start().starts_with("- id:") {
                    break;
                }
                let t = l.trim_start().trim_start_matches("- ");
                if t.starts_with(&pat) {
                    return (i + 1, col_of(l, &pat));
                }
            }
        }
        (start + 1, col_of(self.lines[start], "id:"))
    }
}

/// Where a rule (or one of its keys) is in a file (for a single lookup).
fn locate(text: &str, id: &str, nth: usize, key: Option<&str>) -> (usize, usize) {
    Lines::new(text).locate(id, nth, key)
}

fn compile_rule(spec: RuleSpec, set: &mut RuleSet, origin: Origin) -> Result<Rule, Located> {
    if spec.id.trim().is_empty() || spec.id.chars().any(char::is_whitespace) {
        return Err((
            Some("id"),
            format!("rule id {:?} must be non-empty and have no spaces", spec.id),
        ));
    }
    let cond = push_cond(set, &spec.match_).map_err(|m| (Some("match"), m))?;
    let resolve_on = match &spec.resolve_on {
        Some(m) => Some(push_cond(set, m).map_err(|m| (Some("resolve_on"), m))?),
        None => None,
    };
    let detect = compile_detect(&spec.detect, set)?;
    let unless = compile_recents(&spec.unless, set, "unless")?;
    let progress = match &spec.progress {
        Some(p) => {
            let cond = push_cond(set, &p.match_).map_err(|m| (Some("progress"), m))?;
            Some(Progress {
                cond,
                unless: compile_recents(&p.unless, set, "progress")?,
                name: describe_cond(&set.conditions[cond]),
            })
        }
        None => None,
    };
    let entries = unless.len() + progress.as_ref().map_or(0, |p| p.unless.len());
    if entries > MAX_RECENTS {
        return Err((
            Some("unless"),
            format!("a rule takes at most {MAX_RECENTS} unless entries (its own and its progress's), not {entries}"),
        ));
    }
    let group_by = spec
        .group_by
        .as_ref()
        .map(|g| g.to_vec())
        .unwrap_or_default();
    if group_by.iter().any(|g| g.trim().is_empty()) {
        return Err((Some("group_by"), "group_by has an empty key".into()));
    }
    if matches!(detect, Detect::Share(_)) && group_by.is_empty() {
        return Err((
            Some("group_by"),
            "share needs group_by: the share of which group?".into(),
        ));
    }
    if matches!(detect, Detect::Spread(_)) && group_by.is_empty() {
        return Err((
            Some("group_by"),
            "spread needs group_by: spread across which groups?".into(),
        ));
    }
    let mut annotations = BTreeMap::new();
    for (k, v) in &spec.annotations {
        let t = Template::parse(v)
            .map_err(|e| (Some("annotations"), format!("annotation {k}: {e}")))?;
        annotations.insert(k.clone(), t);
    }
    for k in spec.labels.keys() {
        if ["rule", "severity", "group", "alertname"].contains(&k.as_str()) {
            return Err((
                Some("labels"),
                format!("label {k:?} is set by sigwatch and cannot be overridden"),
            ));
        }
    }
    if spec.evaluate_every.is_some_and(|d| d.ns() < 1_000_000_000) {
        return Err((
            Some("evaluate_every"),
            "evaluate_every must be at least 1s".into(),
        ));
    }
    let max_groups = spec.max_groups.unwrap_or(DEFAULT_MAX_GROUPS);
    if max_groups == 0 {
        return Err((Some("max_groups"), "max_groups must be at least 1".into()));
    }
    let resolve_after = spec.resolve_after.unwrap_or(detect.window()).ns();
    let examples = spec
        .examples
        .map(|e| (e.match_, e.no_match))
        .unwrap_or_default();
    Ok(Rule {
        id: spec.id,
        title: spec.title,
        severity: spec.severity,
        description: spec.description,
        cond,
        resolve_on,
        group_by,
        detect,
        for_: spec.for_.unwrap_or_default().ns(),
        for_clock: spec.for_on == Some(ForOn::Clock) || spec.evaluate_every.is_some(),
        evaluate_every: spec.evaluate_every.map_or(0, Dur::ns),
        resolve_after,
        repeat_interval: spec
            .repeat_interval
            .unwrap_or(DEFAULT_REPEAT_INTERVAL)
            .ns()
            .max(1),
        max_groups,
        annotations,
        labels: spec.labels,
        examples,
        caused_by: spec.caused_by.map(|c| c.to_vec()).unwrap_or_default(),
        incident: spec.incident,
        unless,
        progress,
        origin,
    })
}

#[cfg(test)]
mod tests {

    use super::*;

    fn one(text: &str) -> Result<RuleSet, RuleErrors> {
        compile(&[("t.yaml".to_string(), text.to_string())])
    }

    #[test]
    fn builtin_pack_compiles() {
        let set = load_builtin().unwrap();
        assert!(set.rules.len() >= 10, "{} rules", set.rules.len());
        assert!(
            set.rules.iter().all(|r| r.origin.pack),
            "marked as the pack"
        );
    }

    const OWN: &str = "rules:\n  - id: own.oops\n    title: t\n    severity: warning\n    match: {contains: [oops happened]}\n    detect: {count: {threshold: 1, window: 1m}}\n";

    fn own_file(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("own.yaml");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn rules_of_ones_own_are_added_to_the_pack() {
        let dir = tempfile::tempdir().unwrap();
        let pack = load_builtin().unwrap();
        let set = load_layered(true, &[own_file(dir.path(), OWN)]).unwrap();
        assert_eq!(set.rules.len(), pack.rules.len() + 1);
        let own = set.rules.iter().find(|r| r.id == "own.oops").unwrap();
        assert!(!own.origin.pack && own.origin.file.ends_with("own.yaml"));
        assert!(set
            .rules
            .iter()
            .any(|r| r.id == "livekit.drain_stuck" && r.origin.pack));
    }

    #[test]
    fn a_rule_with_a_pack_rules_id_replaces_it_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let text = OWN.replace("own.oops", "egress.disk_full");
        let pack = load_builtin().unwrap();
        let set = load_layered(true, &[own_file(dir.path(), &text)]).unwrap();
        assert_eq!(set.rules.len(), pack.rules.len(), "replaced, not added");
        let r = set
            .rules
            .iter()
            .find(|r| r.id == "egress.disk_full")
            .unwrap();
        assert!(!r.origin.pack, "one's own version");
        assert_eq!(r.severity, Severity::Warning);
        // Twice in one's own files is still a clash.
        let twice = format!("{text}{}", text.trim_start_matches("rules:\n"));
        let e = load_layered(true, &[own_file(dir.path(), &twice)]).unwrap_err();
        assert!(e.to_string().contains("egress.disk_full"), "{e}");
    }

    #[test]
    fn without_the_pack_only_ones_own_rules_load_and_none_at_all_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let set = load_layered(false, &[own_file(dir.path(), OWN)]).unwrap();
        let ids: Vec<&str> = set.rules.iter().map(|r| r.id.as_str()).collect();
        assert!(ids.contains(&"own.oops"), "{ids:?}");
        assert!(!ids.iter().any(|i| i.starts_with("livekit.")), "{ids:?}");
        let e = load_layered(false, &[]).unwrap_err();
        assert!(e.to_string().contains("--rules"), "{e}");
    }

    #[test]
    fn a_novelty_section_of_ones_own_replaces_the_packs() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("{OWN}novelty:\n  enabled: false\n");
        let set = load_layered(true, &[own_file(dir.path(), &text)]);
        let set = match set {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        assert!(
            !set.rules
                .iter()
                .any(|r| matches!(r.detect, Detect::Novelty(_))),
            "one's own novelty section turned it off"
        );
    }

    #[test]
    fn unknown_key_is_located() {
        let e = one("rules:\n  - id: a\n    title: t\n    severity: info\n    match: {contains: x}\n    detect: {count: {window: 1m}}\n    colour: red\n")
            .unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("t.yaml:7:"), "{s}");
        assert!(s.contains("colour"), "{s}");
    }

    #[test]
    fn bad_duration_and_regex_are_located() {
        let e = one("rules:\n  - id: a\n    title: t\n    severity: info\n    match: {contains: x}\n    detect: {count: {window: 10}}\n").unwrap_err();
        assert!(e.to_string().starts_with("t.yaml:6:"), "{e}");
        let e = one("rules:\n  - id: a\n    title: t\n    severity: info\n    match:\n      regex: '(unclosed'\n    detect: {count: {window: 1m}}\n").unwrap_err();
        let s = e.to_string();
        assert!(
            s.starts_with("t.yaml:5:") && s.contains("invalid regex"),
            "{s}"
        );
    }

    #[test]
    fn semantic_errors_name_the_rule_line() {
        let text = "rules:\n  - id: a\n    title: t\n    severity: info\n    match: {contains: x}\n    detect: {spread: {window: 1m}}\n    group_by: node\n";
        let e = one(text).unwrap_err().to_string();
        assert!(e.starts_with("t.yaml:6:") && e.contains("groups"), "{e}");
        let dup = format!("{text}{}", "  - id: a\n    title: t\n    severity: info\n    match: {contains: x}\n    detect: {count: {window: 1m}}\n");
        let e = one(&dup.replace("{spread: {window: 1m}}", "{count: {window: 1m}}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("t.yaml:8:") && e.contains("duplicate"), "{e}");
    }

    #[test]
    fn negated_and_numeric_field_conditions() {
        let set = one("rules:\n  - id: a\n    title: t\n    severity: info\n    match:\n      regex: 'x'\n      not_regex: ['health.?check']\n      field: {method: {not_equals: GET}, path: {not_regex: '^/ping'}, status: {ge: 500, lt: 600}}\n    detect: {count: {window: 1m}}\n").unwrap();
        let c = &set.conditions[0];
        assert_eq!(c.not_regexes.len(), 1);
        let f = |k: &str| &c.fields.iter().find(|(n, _)| n == k).unwrap().1;
        // A missing field is not equal and does not match.
        assert!(
            f("method").test(None)
                && f("method").test(Some("POST"))
                && !f("method").test(Some("GET"))
        );
        assert!(
            f("path").test(None) && f("path").test(Some("/api")) && !f("path").test(Some("/ping"))
        );
        let st = f("status");
        assert!(st.test(Some("500")) && st.test(Some(" 599.5")) && !st.test(Some("600")));
        assert!(!st.test(Some("499")) && !st.test(Some("5xx")) && !st.test(None));
        let e = one("rules:\n  - id: a\n    title: t\n    severity: info\n    match:\n      field: {status: {ge: 500, regex: x}}\n    detect: {count: {window: 1m}}\n").unwrap_err().to_string();
        assert!(e.contains("numeric bounds"), "{e}");
    }

    #[test]
    fn field_conditions_accept_scalars_lists_and_maps() {
        let set = one("rules:\n  - id: a\n    title: t\n    severity: info\n    match:\n      field: {code: 500, level: [error, fatal], msg: {regex: '^x'}, e: {exists: true}}\n    detect: {count: {window: 1m}}\n").unwrap();
        let c = &set.conditions[0];
        assert_eq!(c.fields.len(), 4);
        assert!(c
            .fields
            .iter()
            .any(|(k, v)| k == "code" && v.test(Some("500"))));
        assert!(c
            .fields
            .iter()
            .any(|(k, v)| k == "level" && v.test(Some("fatal")) && !v.test(Some("info"))));
    }

    #[test]
    fn unknown_template_variable_is_an_error() {
        let e = one("rules:\n  - id: a\n    title: t\n    severity: info\n    match: {contains: x}\n    detect: {count: {window: 1m}}\n    annotations: {summary: '{{ nodes }}'}\n").unwrap_err();
        assert!(e.to_string().contains("t.yaml:7:"), "{e}");
    }
}
