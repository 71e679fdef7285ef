//! Rule unit tests (`sigwatch test`): people trust alert rules they can
//! test, the way Prometheus users test theirs with `promtool test rules`.
//!
//! A test file holds cases; each case feeds log lines at chosen instants
//! (relative like `+30s` or absolute RFC 3339, or a fixture file whose
//! lines carry their own times) through the real engine, and compares the
//! notifications it produced with the expected ones: rule, group, state,
//! optionally the instant (within a tolerance) and annotations. The result
//! is a readable diff, so a broken rule points at its cause.
//!
//! ```yaml
//! tests:
//!   - name: one node fails every recording
//!     start: 2024-05-01T13:00:00Z
//!     input:
//!       - at: +0s
//!         every: 10s
//!         repeat: 12
//!         line: '{"level":"info","ts":{{ts}},"msg":"egress_failed","nodeID":"NE_bad","egressID":"EG_{{n}}"}'
//!     expect:
//!       - {rule: egress.black_hole, group: NE_bad, state: firing, at: +1m50s}
//! ```

use crate::alert::{AlertState, FlapHold, Notification};
use crate::decode::time;
use crate::duration::{format_duration, Dur};
use crate::engine::{Engine, Options};
use crate::rules::RuleSet;
use crate::source::Source;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A test file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFile {
    /// Rule files or directories, relative to the test file. Default: the
    /// rules given on the command line (or the built-in pack).
    #[serde(default)]
    pub rules: Vec<String>,
    /// The cases.
    pub tests: Vec<Case>,
}

/// One test case.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// What the case shows.
    pub name: String,
    /// The instant relative times count from (RFC 3339). Default
    /// 2024-05-01T12:00:00Z.
    #[serde(default)]
    pub start: Option<String>,
    /// How far a notification's instant may be from its expected `at`.
    /// Default 30s.
    #[serde(default)]
    pub tolerance: Option<Dur>,
    /// Allowed lateness of events (the engine's `--lateness`). Default 5s.
    #[serde(default)]
    pub lateness: Option<Dur>,
    /// Input lines, fed in the order written.
    pub input: Vec<Input>,
    /// Event time to advance to after the input (windows slide, alerts
    /// resolve, absences fire), e.g. `+30m`. Default: the last input time.
    #[serde(default)]
    pub end: Option<String>,
    /// Every notification expected, in order. Anything else produced is a
    /// failure.
    #[serde(default)]
    pub expect: Vec<Expect>,
    /// Hold each resolution this long, as `run` and `replay` do without
    /// `--group-incidents` (sigwatch.yaml `incidents.flap_window`): a
    /// firing within it continues the episode. Default: none, the engine's
    /// notifications as they are made.
    #[serde(default)]
    pub flap_window: Option<Dur>,
}

/// Input of a case: one line (maybe repeated), or a fixture file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// A log line exactly as a source delivers it (any wrapper, any format).
    /// `{{ts}}` becomes the line's instant in epoch seconds (with
    /// milliseconds), `{{rfc3339}}` in RFC 3339, `{{n}}` the repetition
    /// number (0, 1, …).
    #[serde(default)]
    pub line: Option<String>,
    /// A log file (relative to the test file) replayed with its own times.
    #[serde(default)]
    pub file: Option<String>,
    /// The line's instant (`+30s`, `+1h2m`, or RFC 3339); it is the event
    /// time whatever the line says. Without it the line's own time counts.
    #[serde(default)]
    pub at: Option<String>,
    /// Repeat the line this many times (default 1).
    #[serde(default)]
    pub repeat: Option<u32>,
    /// Time between repetitions (default 1s).
    #[serde(default)]
    pub every: Option<Dur>,
    /// Stream name (one container's output), default `test`. Streams keep
    /// their own sticky values (e.g. `nodeID`).
    #[serde(default)]
    pub stream: Option<String>,
    /// Stream labels, as Loki or a prefix would give them (`pod`, `node`…).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// An expected notification.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Rule id.
    pub rule: String,
    /// Group (node, pod, upstream, or `cluster`); any when omitted.
    #[serde(default)]
    pub group: Option<String>,
    /// `firing` (default) or `resolved`.
    #[serde(default)]
    pub state: Option<String>,
    /// When it is expected (`+5m` or RFC 3339), within the case's tolerance.
    #[serde(default)]
    pub at: Option<String>,
    /// Annotations that must render exactly so (others are not compared).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// Errors that stop a test file (as opposed to failing cases).
#[derive(Debug, thiserror::Error)]
pub enum TestError {
    /// The file cannot be read.
    #[error("{path}: {message}")]
    Io {
        /// Path.
        path: String,
        /// Reason.
        message: String,
    },
    /// The file is not a valid test file.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        /// Path.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// Reason.
        message: String,
    },
    /// The rules the file names do not load.
    #[error("{path}: rules: {source}")]
    Rules {
        /// Test file.
        path: String,
        /// The rule errors.
        source: crate::rules::RuleErrors,
    },
}

/// One notification as the test runner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// Rule id.
    pub rule: String,
    /// Group.
    pub group: String,
    /// `firing` or `resolved`.
    pub state: String,
    /// Event time it was emitted at (ns).
    pub at: i64,
    /// Rendered annotations.
    pub annotations: BTreeMap<String, String>,
}

/// One line of a case's diff.
#[derive(Debug, Clone, PartialEq)]
pub enum DiffLine {
    /// Expected and produced.
    Same(String),
    /// Expected, not produced.
    Missing(String),
    /// Produced, not expected.
    Unexpected(String),
    /// Produced, but not as expected (time or annotations): what differs.
    Differs(String),
}

/// The outcome of one case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// Case name.
    pub name: String,
    /// Whether it passed.
    pub passed: bool,
    /// Expected vs actual (only interesting when failed).
    pub diff: Vec<DiffLine>,
    /// A problem in the case itself (bad time, missing fixture).
    pub error: Option<String>,
}

const DEFAULT_START: &str = "2024-05-01T12:00:00Z";
/// Most lines one case may feed (repeats and files together).
pub const MAX_CASE_LINES: usize = 1_000_000;
/// Longest `end` after the last input: the clock is stepped second by second.
pub const MAX_END_SPAN_NS: i64 = 7 * 24 * 3600 * 1_000_000_000;

/// Reads and parses a test file.
pub fn load(path: &Path) -> Result<TestFile, TestError> {
    let text = std::fs::read_to_string(path).map_err(|e| TestError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    serde_yaml_ng::from_str::<TestFile>(&text).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((1, 1));
        let msg = e.to_string();
        let message = match msg.rfind(" at line ") {
            Some(i) => msg[..i].to_string(),
            None => msg,
        };
        TestError::Parse {
            path: path.display().to_string(),
            line,
            column,
            message,
        }
    })
}

/// Runs every case of a test file. `default_rules` is used when the file
/// names none.
pub fn run_file(path: &Path, default_rules: &RuleSet) -> Result<Vec<CaseResult>, TestError> {
    let file = load(path)?;
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let own;
    let rules = if file.rules.is_empty() {
        default_rules
    } else {
        let paths: Vec<PathBuf> = file.rules.iter().map(|r| dir.join(r)).collect();
        own = crate::rules::load_paths(&paths).map_err(|source| TestError::Rules {
            path: path.display().to_string(),
            source,
        })?;
        &own
    };
    Ok(file
        .tests
        .iter()
        .map(|c| run_case(c, rules, &dir))
        .collect())
}

/// Parses `+30s` (relative to `start`) or an RFC 3339 instant.
fn instant(s: &str, start: i64) -> Result<i64, String> {
    let t = s.trim();
    if let Some(rel) = t.strip_prefix('+') {
        return Dur::parse(rel).map(|d| start.saturating_add(d.ns()));
    }
    time::parse_rfc3339(t).ok_or_else(|| {
        format!("invalid instant {t:?}: write +30s (after start) or 2024-05-01T12:00:30Z")
    })
}

fn relative(ns: i64, start: i64) -> String {
    let mut s = String::new();
    let d = ns - start;
    if d < 0 {
        s.push('-');
    } else {
        s.push('+');
    }
    let _ = format_duration(d.abs(), &mut s);
    s
}

fn substitute(line: &str, t: i64, n: u32) -> String {
    if !line.contains("{{") {
        return line.to_string();
    }
    let secs = t.div_euclid(1_000_000_000);
    let ms = t.rem_euclid(1_000_000_000) / 1_000_000;
    line.replace("{{ts}}", &format!("{secs}.{ms:03}"))
        .replace("{{rfc3339}}", &crate::clock::format_rfc3339(t))
        .replace("{{n}}", &n.to_string())
}

/// Runs one case.
pub fn run_case(case: &Case, rules: &RuleSet, dir: &Path) -> CaseResult {
    match execute(case, rules, dir) {
        Ok((mut seen, start, hits)) => {
            // Rules of one's own are tested beside the built-in pack: the
            // pack's notifications count only where the case expects them.
            let own = rules.rules.iter().any(|r| !r.origin.pack);
            if own {
                let pack: std::collections::HashSet<&str> = rules
                    .rules
                    .iter()
                    .filter(|r| r.origin.pack)
                    .map(|r| r.id.as_str())
                    .filter(|id| !case.expect.iter().any(|e| e.rule == *id))
                    .collect();
                seen.retain(|s| !pack.contains(s.rule.as_str()));
            }
            compare(case, &seen, start, &hits)
        }
        Err(e) => CaseResult {
            name: case.name.clone(),
            passed: false,
            diff: Vec::new(),
            error: Some(e),
        },
    }
}

/// One line to feed: its instant when `at` forces it, and where it sorts.
struct Fed {
    key: i64,
    forced: Option<i64>,
    source: usize,
    text: String,
}

/// Expands a case's input into lines, merged by time the way the sources
/// deliver them (several streams interleave): `at` lines at their instant,
/// other lines at their own time (or right after the previous line).
fn expand(case: &Case, start: i64, dir: &Path) -> Result<(Vec<Fed>, Vec<Source>), String> {
    let mut fed = Vec::new();
    let mut sources = Vec::new();
    let mut prev = start;
    for (i, input) in case.input.iter().enumerate() {
        let labels: Vec<(String, String)> = input
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let name = input
            .stream
            .clone()
            .or_else(|| input.file.clone())
            .unwrap_or_else(|| "test".to_string());
        let source = match sources
            .iter()
            .position(|s: &Source| s.name == name && s.labels == labels)
        {
            Some(p) => p,
            None => {
                sources.push(Source {
                    name,
                    labels,
                    modified: None,
                    kind: crate::source::SourceKind::Named,
                });
                sources.len() - 1
            }
        };
        let texts: Vec<(Option<i64>, String)> = match (&input.line, &input.file) {
            (Some(line), None) => {
                let at = input.at.as_deref().map(|a| instant(a, start)).transpose()?;
                let every = input.every.unwrap_or(Dur::secs(1)).ns();
                let repeat = input.repeat.unwrap_or(1);
                if repeat as usize > MAX_CASE_LINES {
                    return Err(format!(
                        "input {}: repeat {repeat} is over the limit of {MAX_CASE_LINES} lines per case",
                        i + 1
                    ));
                }
                (0..repeat)
                    .map(|n| {
                        let t = at.map(|a| a.saturating_add(every.saturating_mul(i64::from(n))));
                        (t, substitute(line, t.unwrap_or(prev), n))
                    })
                    .collect()
            }
            (None, Some(file)) => {
                if input.at.is_some() || input.repeat.is_some() {
                    return Err(format!(
                        "input {}: a file's lines keep their own times (no `at`/`repeat`)",
                        i + 1
                    ));
                }
                let path = dir.join(file);
                std::fs::read_to_string(&path)
                    .map_err(|e| format!("input {}: {}: {e}", i + 1, path.display()))?
                    .lines()
                    .map(|l| (None, l.to_string()))
                    .collect()
            }
            _ => {
                return Err(format!(
                    "input {}: give exactly one of `line` and `file`",
                    i + 1
                ))
            }
        };
        if fed.len() + texts.len() > MAX_CASE_LINES {
            return Err(format!(
                "input {}: the case would feed more than {MAX_CASE_LINES} lines",
                i + 1
            ));
        }
        for (forced, text) in texts {
            let key = forced
                .or_else(|| crate::decode::peek_time(&text, Some(prev), None))
                .unwrap_or(prev);
            prev = key;
            fed.push(Fed {
                key,
                forced,
                source,
                text,
            });
        }
    }
    // Stable: lines at the same instant keep the order written.
    fed.sort_by_key(|f| f.key);
    Ok((fed, sources))
}

impl Case {
    /// A case that replays one file and expects nothing yet (`sigwatch
    /// suggest` writes down what [`observe`] sees).
    pub(crate) fn of_file(name: &str, file: &str) -> Case {
        Case {
            name: name.to_string(),
            start: None,
            tolerance: None,
            lateness: None,
            input: vec![Input {
                line: None,
                file: Some(file.to_string()),
                at: None,
                repeat: None,
                every: None,
                stream: None,
                labels: BTreeMap::new(),
            }],
            end: None,
            flap_window: None,
            expect: Vec::new(),
        }
    }
}

/// What a case makes: (state, rule, group) of each notification, in order,
/// exactly as `sigwatch test` sees them.
pub(crate) fn observe(
    case: &Case,
    rules: &RuleSet,
    dir: &Path,
) -> Result<Vec<(String, String, String)>, String> {
    let (seen, _, _) = execute(case, rules, dir)?;
    Ok(seen
        .into_iter()
        .map(|s| (s.state, s.rule, s.group))
        .collect())
}

/// Feeds a case's input; returns the notifications and the start instant.
#[allow(clippy::type_complexity)]
fn execute(
    case: &Case,
    rules: &RuleSet,
    dir: &Path,
) -> Result<(Vec<Seen>, i64, BTreeMap<String, (u64, u64)>), String> {
    let start = instant(case.start.as_deref().unwrap_or(DEFAULT_START), 0)?;
    let lateness = case
        .lateness
        .map_or(crate::engine::DEFAULT_LATENESS_NS, |d| d.ns());
    let mut engine = Engine::new(
        rules.clone(),
        Options {
            live: false,
            lateness_ns: lateness,
        },
    )
    .map_err(|e| e.to_string())?;
    engine.mute_input_hints();
    let (fed, sources) = expand(case, start, dir)?;
    let mut out = Vec::new();
    let mut seen = Vec::new();
    let mut hold = FlapHold::new(case.flap_window.map_or(0, |d| d.ns()));
    let mut passed = Vec::new();
    // A notification's instant: the event time the engine made it at (a
    // resolution when it became due, whatever line came next), else the
    // event-time clock of the feed when it came out; then the flap hold.
    let mut collect = |out: &mut Vec<Notification>, seen: &mut Vec<Seen>, clock: Option<i64>| {
        for mut n in out.drain(..) {
            if n.at == 0 {
                n.at = clock.unwrap_or(i64::MAX);
            }
            hold.observe(n, &mut passed);
        }
        match clock {
            Some(c) => hold.tick(c, &mut passed),
            None => hold.finish(&mut passed),
        }
        for n in passed.drain(..) {
            seen.push(Seen {
                state: match n.state {
                    AlertState::Firing => "firing",
                    AlertState::Resolved => "resolved",
                }
                .to_string(),
                rule: n.rule,
                group: n.group,
                at: n.at,
                annotations: n.annotations,
            });
        }
    };
    let mut last = start;
    for f in &fed {
        let src = &sources[f.source];
        match f.forced {
            Some(t) => engine.push_line_at(src, &f.text, t, &mut out),
            None => engine.push_line(src, &f.text, None, &mut out),
        }
        last = last.max(f.key);
        collect(&mut out, &mut seen, Some(last));
    }
    if let Some(end) = &case.end {
        let end = instant(end, start)?;
        if end.saturating_sub(last) > MAX_END_SPAN_NS {
            return Err(format!(
                "end {} is more than 7 days after the last input",
                relative(end, start)
            ));
        }
        // Every notification carries its own instant: one step to the end.
        engine.advance_to(end.saturating_add(lateness), &mut out);
        collect(&mut out, &mut seen, Some(end));
    }
    engine.finish(&mut out);
    let t = engine.watermark().unwrap_or(last);
    let mut end_of_input = std::mem::take(&mut out);
    for n in &mut end_of_input {
        if n.at == 0 {
            n.at = t;
        }
    }
    collect(&mut end_of_input, &mut seen, None);
    let discounted = engine.rule_discounted();
    let hits = engine
        .rule_stats()
        .into_iter()
        .zip(discounted)
        .map(|((id, hits, _), d)| (id, (hits, d)))
        .collect();
    Ok((seen, start, hits))
}

fn describe(state: &str, rule: &str, group: &str, at: &str) -> String {
    format!("{state:<9}{rule:<32} {group:<24} at {at}")
}

fn compare(
    case: &Case,
    seen: &[Seen],
    start: i64,
    hits: &BTreeMap<String, (u64, u64)>,
) -> CaseResult {
    let tolerance = case.tolerance.unwrap_or(Dur::secs(30)).ns();
    let expected = match expected_of(case, start) {
        Ok(e) => e,
        Err(errors) => {
            return CaseResult {
                name: case.name.clone(),
                passed: false,
                diff: Vec::new(),
                error: Some(errors.join("; ")),
            }
        }
    };
    let identity = |e: &Expect, state: &str, s: &Seen| {
        e.rule == s.rule && state == s.state && e.group.as_ref().is_none_or(|g| *g == s.group)
    };
    let timely = |at: Option<i64>, s: &Seen| at.is_none_or(|a| (s.at - a).abs() <= tolerance);
    let annotated = |e: &Expect, s: &Seen| {
        e.annotations
            .iter()
            .all(|(k, v)| s.annotations.get(k) == Some(v))
    };
    // Pass 1: exact matches, in order. Pass 2: same identity, but the
    // instant or an annotation differs — reported as such, which says more
    // than a missing line plus an unexpected one.
    let mut taken = vec![false; seen.len()];
    let mut matched: Vec<Option<usize>> = vec![None; expected.len()];
    for (ei, (e, state, at)) in expected.iter().enumerate() {
        matched[ei] = (0..seen.len()).find(|&si| {
            !taken[si]
                && identity(e, state, &seen[si])
                && timely(*at, &seen[si])
                && annotated(e, &seen[si])
        });
        if let Some(si) = matched[ei] {
            taken[si] = true;
        }
    }
    let mut near: Vec<Option<usize>> = vec![None; expected.len()];
    for (ei, (e, state, _)) in expected.iter().enumerate() {
        if matched[ei].is_some() {
            continue;
        }
        near[ei] = (0..seen.len()).find(|&si| !taken[si] && identity(e, state, &seen[si]));
        if let Some(si) = near[ei] {
            taken[si] = true;
        }
    }
    let mut diff = Vec::new();
    let mut passed = true;
    for (ei, (e, state, at)) in expected.iter().enumerate() {
        let want_at = at.map_or("any time".to_string(), |a| relative(a, start));
        if let Some(si) = matched[ei] {
            let s = &seen[si];
            diff.push(DiffLine::Same(describe(
                state,
                &s.rule,
                &s.group,
                &relative(s.at, start),
            )));
        } else if let Some(si) = near[ei] {
            passed = false;
            diff.push(differs(e, state, *at, &seen[si], tolerance, start));
        } else {
            passed = false;
            diff.push(missing(e, state, &want_at, hits));
        }
    }
    for (si, s) in seen.iter().enumerate() {
        if !taken[si] {
            passed = false;
            diff.push(DiffLine::Unexpected(describe(
                &s.state,
                &s.rule,
                &s.group,
                &relative(s.at, start),
            )));
        }
    }
    CaseResult {
        name: case.name.clone(),
        passed,
        diff,
        error: None,
    }
}

/// The case's expected notifications, their instants read (relative to
/// `start`), or what is wrong with them.
#[allow(clippy::type_complexity)]
fn expected_of(case: &Case, start: i64) -> Result<Vec<(Expect, String, Option<i64>)>, Vec<String>> {
    let mut errors = Vec::new();
    let expected: Vec<(Expect, String, Option<i64>)> = case
        .expect
        .iter()
        .map(|e| {
            let state = e.state.clone().unwrap_or_else(|| "firing".to_string());
            let at = match e.at.as_deref().map(|a| instant(a, start)).transpose() {
                Ok(a) => a,
                Err(msg) => {
                    errors.push(msg);
                    None
                }
            };
            (e.clone(), state, at)
        })
        .collect();
    if errors.is_empty() {
        Ok(expected)
    } else {
        Err(errors)
    }
}

/// A notification of the expected rule, state and group that came at
/// another instant or with other annotations: what differs.
fn differs(
    e: &Expect,
    state: &str,
    at: Option<i64>,
    s: &Seen,
    tolerance: i64,
    start: i64,
) -> DiffLine {
    let want_at = at.map_or("any time".to_string(), |a| relative(a, start));
    let mut why = Vec::new();
    if at.is_some_and(|a| (s.at - a).abs() > tolerance) {
        why.push(format!(
            "expected at {want_at} ±{}, came at {}",
            Dur(tolerance),
            relative(s.at, start)
        ));
    }
    for (k, v) in &e.annotations {
        match s.annotations.get(k) {
            Some(got) if got == v => {}
            Some(got) => why.push(format!("annotation {k}: expected {v:?}, got {got:?}")),
            None => why.push(format!("annotation {k}: expected {v:?}, not set")),
        }
    }
    DiffLine::Differs(format!(
        "{}\n            {}",
        describe(state, &s.rule, &s.group, &relative(s.at, start)),
        why.join("\n            ")
    ))
}

/// An expected notification that never came: where to look (the match, or
/// the detector).
fn missing(
    e: &Expect,
    state: &str,
    want_at: &str,
    hits: &BTreeMap<String, (u64, u64)>,
) -> DiffLine {
    let group = e.group.as_deref().unwrap_or("(any group)");
    // Say where to look: the match, the rule's `unless`, or the detector.
    let why = match hits.get(&e.rule) {
        None => "no such rule in the rule set".to_string(),
        Some((0, _)) => {
            "the rule matched no line: check its match with `sigwatch explain`".to_string()
        }
        Some((n, d)) if *d > 0 => format!(
            "the rule matched {n} line{}, {d} of them not counted (its `unless` held: pipe the lines to `sigwatch explain`), but its detector did not produce this",
            if *n == 1 { "" } else { "s" }
        ),
        Some((n, _)) => format!(
            "the rule matched {n} line{}, but its detector did not produce this",
            if *n == 1 { "" } else { "s" }
        ),
    };
    DiffLine::Missing(format!(
        "{}\n            {why}",
        describe(state, &e.rule, group, want_at)
    ))
}

/// Renders a case result the way a test runner does.
pub fn render(r: &CaseResult) -> String {
    let mut s = String::new();
    if r.passed {
        s.push_str(&format!("  ok    {}\n", r.name));
        return s;
    }
    s.push_str(&format!("  FAIL  {}\n", r.name));
    if let Some(e) = &r.error {
        s.push_str(&format!("        error: {e}\n"));
        return s;
    }
    s.push_str("        expected (-) vs produced (+), times after start:\n");
    for d in &r.diff {
        let (mark, text) = match d {
            DiffLine::Same(t) => (' ', t),
            DiffLine::Missing(t) => ('-', t),
            DiffLine::Unexpected(t) => ('+', t),
            DiffLine::Differs(t) => ('~', t),
        };
        s.push_str(&format!("        {mark} {text}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> RuleSet {
        crate::rules::compile(&[(
            "t.yaml".into(),
            r#"rules:
  - id: t.errors
    title: Errors
    severity: warning
    match: {contains: ["boom"]}
    group_by: node
    detect: {count: {threshold: 3, window: 1m}}
    annotations: {summary: "{{ group }} failed {{ count }} times"}
"#
            .into(),
        )])
        .unwrap()
    }

    fn case(yaml: &str) -> Case {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    const INPUT: &str = r#"
name: three errors
input:
  - at: +10s
    every: 5s
    repeat: 3
    line: '{"ts":{{ts}},"level":"error","msg":"boom {{n}}","nodeID":"ND_a"}'
end: +5m
"#;

    #[test]
    fn a_matching_expectation_passes() {
        let c = case(&format!(
            "{INPUT}expect:\n  - {{rule: t.errors, group: ND_a, at: +20s, annotations: {{summary: ND_a failed 3 times}}}}\n  - {{rule: t.errors, group: ND_a, state: resolved, at: +2m}}\n"
        ));
        let r = run_case(&c, &rules(), Path::new("."));
        assert!(r.passed, "{}", render(&r));
    }

    #[test]
    fn wrong_time_annotation_missing_and_unexpected_are_each_reported() {
        let c = case(&format!(
            "{INPUT}tolerance: 10s\nexpect:\n  - {{rule: t.errors, group: ND_a, at: +4m, annotations: {{summary: nope}}}}\n  - {{rule: t.other, group: ND_a}}\n"
        ));
        let r = run_case(&c, &rules(), Path::new("."));
        assert!(!r.passed);
        let text = render(&r);
        assert!(
            text.contains("expected at +4m ±10s, came at +20s"),
            "{text}"
        );
        assert!(
            text.contains(r#"annotation summary: expected "nope", got "ND_a failed 3 times""#),
            "{text}"
        );
        assert!(text.contains("- firing   t.other"), "{text}");
        assert!(text.contains("+ resolved t.errors"), "{text}");
    }

    #[test]
    fn lines_keep_their_own_time_without_at() {
        let c = case(
            r#"
name: own times
input:
  - line: '{"ts":1714564800.0,"msg":"boom","nodeID":"ND_b"}'
  - line: '{"ts":1714564801.0,"msg":"boom","nodeID":"ND_b"}'
  - line: '{"ts":1714564802.0,"msg":"boom","nodeID":"ND_b"}'
expect:
  - {rule: t.errors, group: ND_b, at: 2024-05-01T12:00:02Z}
"#,
        );
        let r = run_case(&c, &rules(), Path::new("."));
        assert!(r.passed, "{}", render(&r));
    }

    #[test]
    fn case_errors_are_reported_not_panicked() {
        let c = case("name: bad\ninput:\n  - at: soon\n    line: boom\n");
        let r = run_case(&c, &rules(), Path::new("."));
        assert!(!r.passed);
        assert!(
            r.error
                .as_deref()
                .is_some_and(|e| e.contains("invalid instant")),
            "{r:?}"
        );
        let c = case("name: both\ninput:\n  - {line: a, file: b}\n");
        let r = run_case(&c, &rules(), Path::new("."));
        assert!(
            r.error
                .as_deref()
                .is_some_and(|e| e.contains("exactly one")),
            "{r:?}"
        );
    }

    #[test]
    fn runaway_cases_are_refused() {
        let c = case("name: huge\ninput:\n  - {at: +0s, repeat: 4000000000, line: boom}\n");
        let r = run_case(&c, &rules(), Path::new("."));
        assert!(
            r.error
                .as_deref()
                .is_some_and(|e| e.contains("over the limit")),
            "{r:?}"
        );
        let c = case("name: far\ninput:\n  - {at: +0s, line: boom}\nend: +100days\n");
        let r = run_case(&c, &rules(), Path::new("."));
        assert!(
            r.error
                .as_deref()
                .is_some_and(|e| e.contains("more than 7 days")),
            "{r:?}"
        );
    }

    #[test]
    fn a_held_resolution_goes_out_before_a_later_firing_of_the_same_step() {
        let rules = crate::rules::compile(&[(
            "t.yaml".into(),
            r#"rules:
  - id: t.errors
    title: Errors
    severity: warning
    match: {contains: ["boom"]}
    group_by: node
    detect: {count: {threshold: 3, window: 1m}}
  - id: t.silent
    title: Silent
    severity: warning
    match: {contains: ["heartbeat"]}
    group_by: node
    detect: {absent: {for: 20m}}
"#
            .into(),
        )])
        .unwrap();
        // Errors for 10 s and one heartbeat, then nothing until +1h: the
        // errors resolve a minute later, their resolution is held 5 minutes,
        // and the absence fires 20 minutes after the heartbeat — all in the
        // one step to `end`.
        let c = case(
            r#"
name: resolution then absence
flap_window: 5m
input:
  - at: +0s
    line: '{"ts":{{ts}},"level":"info","msg":"heartbeat","nodeID":"ND_b"}'
  - at: +1s
    every: 3s
    repeat: 4
    line: '{"ts":{{ts}},"level":"error","msg":"boom {{n}}","nodeID":"ND_a"}'
end: +1h
"#,
        );
        let (seen, start, _) = execute(&c, &rules, Path::new(".")).unwrap();
        let got: Vec<_> = seen
            .iter()
            .map(|s| {
                (
                    s.state.as_str(),
                    s.rule.as_str(),
                    (s.at - start) / 60_000_000_000,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("firing", "t.errors", 0),
                ("resolved", "t.errors", 7),
                ("firing", "t.silent", 20)
            ]
        );
    }

    #[test]
    fn every_pack_case_notifies_in_the_order_of_the_instants_they_were_made() {
        let pack = crate::rules::load_builtin().unwrap();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules/tests");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        let mut cases = 0;
        let mut out_of_order = Vec::new();
        for f in &files {
            let file = load(f).unwrap();
            let own;
            let rules = if file.rules.is_empty() {
                &pack
            } else {
                let paths: Vec<PathBuf> = file.rules.iter().map(|r| dir.join(r)).collect();
                own = crate::rules::load_paths(&paths).unwrap();
                &own
            };
            for c in &file.tests {
                // Flap holds on too: a held resolution goes out at its
                // window's end, between what came before and after it.
                for window in [c.flap_window.map(|d| d.ns()), Some(300_000_000_000)] {
                    let mut c = c.clone();
                    c.flap_window = window.map(Dur);
                    let (seen, _, _) = execute(&c, rules, &dir).unwrap();
                    cases += 1;
                    if let Some(w) = seen.windows(2).find(|w| w[1].at < w[0].at) {
                        out_of_order.push(format!(
                            "{}: {} {} at {} before {} {} at {}",
                            c.name, w[0].state, w[0].rule, w[0].at, w[1].state, w[1].rule, w[1].at
                        ));
                    }
                }
            }
        }
        assert!(cases > 40, "{cases} cases");
        assert!(out_of_order.is_empty(), "{out_of_order:#?}");
    }
}
