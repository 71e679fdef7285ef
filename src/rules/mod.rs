//! Rules: the compiled rule model every later stage reads (conditions,
//! detectors, rules, the rule set). The YAML as written is in [`model`],
//! its validation with `file:line:column` errors and its compilation into
//! these types in `compile.rs`.
//!
//! A rule that is wrong must be rejected when it loads, with the place of the
//! mistake, not discovered as a silent non-alert during an incident.

mod compile;
mod condition;
mod detection;
pub mod logql;
pub mod model;
pub mod prometheus;
mod salvage;
pub mod template;

use crate::decode::severity::Level;
use crate::decode::{KeyConfig, WORKLOAD_KEY};
use crate::duration::Dur;
use model::Severity;
use regex::Regex;
use std::collections::BTreeMap;
use template::Template;

pub use compile::{compile, compile_layers, load_builtin, load_layered, load_paths, read_paths};
pub use condition::{MAX_LITERAL_BYTES, MAX_SET_LITERAL_BYTES};

/// The built-in rule pack, embedded in the binary.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "rules/livekit.yaml",
        include_str!("../../rules/livekit.yaml"),
    ),
    ("rules/egress.yaml", include_str!("../../rules/egress.yaml")),
    (
        "rules/kubernetes.yaml",
        include_str!("../../rules/kubernetes.yaml"),
    ),
    ("rules/grpc.yaml", include_str!("../../rules/grpc.yaml")),
];

/// Default re-notification interval of a firing alert.
pub const DEFAULT_REPEAT_INTERVAL: Dur = Dur::secs(4 * 3600);
/// Default bound on the groups one rule tracks.
pub const DEFAULT_MAX_GROUPS: usize = 10_000;

/// A rule loading or validation error, located in its file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuleError {
    /// A problem at a place in a rule file.
    #[error("{file}:{line}:{column}: {message}")]
    At {
        /// File name as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A file or directory that cannot be read.
    #[error("{path}: {message}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        message: String,
    },
}

/// Several rule errors, reported together.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
pub struct RuleErrors(pub Vec<RuleError>);

/// Index of a compiled condition in [`RuleSet::conditions`].
pub type CondId = usize;

/// A compiled value condition.
#[derive(Debug, Clone)]
pub enum ValueCond {
    /// Equal.
    Equals(String),
    /// One of.
    OneOf(Vec<String>),
    /// Regex match.
    Regex(Regex),
    /// Present / absent.
    Exists(bool),
    /// Not equal (a missing value is not equal).
    NotEquals(String),
    /// Does not match (a missing value does not match).
    NotRegex(Regex),
    /// A number within bounds.
    Number(model::NumBounds),
}

impl ValueCond {
    /// Tests a value (None = the field is absent).
    pub fn test(&self, v: Option<&str>) -> bool {
        match (self, v) {
            (ValueCond::Exists(want), v) => v.is_some() == *want,
            (ValueCond::NotEquals(e), v) => v != Some(e.as_str()),
            (ValueCond::NotRegex(r), v) => v.is_none_or(|v| !r.is_match(v)),
            (_, None) => false,
            (ValueCond::Number(b), Some(v)) => v.trim().parse::<f64>().is_ok_and(|x| b.holds(x)),
            (ValueCond::Equals(e), Some(v)) => e == v,
            (ValueCond::OneOf(list), Some(v)) => list.iter().any(|e| e == v),
            (ValueCond::Regex(r), Some(v)) => r.is_match(v),
        }
    }
}

/// A compiled match block.
#[derive(Debug, Clone, Default)]
pub struct Condition {
    /// Any of these literals must occur (empty: no such requirement).
    pub any: Vec<String>,
    /// All of these literals must occur.
    pub all: Vec<String>,
    /// None of these literals may occur.
    pub none: Vec<String>,
    /// Every regex must match the text; named captures become fields.
    pub regexes: Vec<Regex>,
    /// No regex of these may match the text.
    pub not_regexes: Vec<Regex>,
    /// Field conditions.
    pub fields: Vec<(String, ValueCond)>,
    /// Label / context conditions.
    pub labels: Vec<(String, ValueCond)>,
    /// Never a candidate: the condition of a rule fed by something other
    /// than the matcher (novelty).
    pub never: bool,
}

/// Fields whose values are normalised by the decoder rather than read from
/// the raw text, so their literal form differs by format.
pub const VIRTUAL_FIELDS: &[&str] = &["level", "msg", "message"];

/// The compiled detector of a rule.
#[derive(Debug, Clone)]
pub enum Detect {
    /// See [`model::CountSpec`].
    Count(model::CountSpec),
    /// See [`model::PersistSpec`].
    Persist(model::PersistSpec),
    /// See [`model::SpreadSpec`].
    Spread(model::SpreadSpec),
    /// See [`model::ShareSpec`].
    Share(model::ShareSpec),
    /// See [`model::AbsentSpec`].
    Absent(model::AbsentSpec),
    /// New templates (see [`Novelty`]); fed by the template miner, not
    /// the matcher.
    Novelty(Novelty),
    /// The second step's condition and the time allowed.
    Sequence {
        /// Condition of the second step.
        then: CondId,
        /// Time allowed between the steps.
        within: Dur,
    },
    /// Population anomalies of every mined template (see
    /// [`AnomalySpec`]); fed by the template miner, not the matcher.
    Anomaly(AnomalySpec),
}

impl Detect {
    /// The kind's name as written in rules.
    pub fn kind(&self) -> &'static str {
        match self {
            Detect::Count(_) => "count",
            Detect::Persist(_) => "persist",
            Detect::Spread(_) => "spread",
            Detect::Share(_) => "share",
            Detect::Absent(_) => "absent",
            Detect::Novelty(_) => "novelty",
            Detect::Anomaly(_) => "anomaly",
            Detect::Sequence { .. } => "sequence",
        }
    }

    /// Whether its alerts speak for many groups (their top groups) rather
    /// than for their key: spread, share and novelty — the cluster lane of
    /// the report, the nodes of an incident.
    pub fn speaks_for_many(&self) -> bool {
        matches!(
            self,
            Detect::Spread(_) | Detect::Share(_) | Detect::Novelty(_) | Detect::Anomaly(_)
        )
    }

    /// Whether its detector reads the population (every group that logged
    /// anything, not only its matches): spread's denominator, share's
    /// "other groups alive". The engine feeds those detectors every
    /// sampled line; explain says so. The one place this is decided.
    pub fn needs_population(&self) -> bool {
        matches!(
            self,
            Detect::Spread(_) | Detect::Share(_) | Detect::Anomaly(_)
        )
    }

    /// The natural time scale of the detector, used as the default
    /// `resolve_after`.
    pub fn window(&self) -> Dur {
        match self {
            Detect::Count(c) => c.window,
            Detect::Persist(p) => p.max_gap,
            Detect::Spread(s) => s.window,
            Detect::Share(s) => s.window,
            Detect::Absent(_) => Dur(0),
            Detect::Novelty(n) => Dur(n.window),
            Detect::Anomaly(a) => Dur(a.spread_window),
            Detect::Sequence { within, .. } => *within,
        }
    }
}

/// Lines of chatter (below the lowest of `page_levels`: by default info,
/// debug and warnings) novelty mines per second of event time at most by
/// default, so mining costs a bounded amount however fast the logs come;
/// besides, at most one line of chatter in 32 beyond a tenth of this rate
/// (see `mining::sample`), so the cost follows the line rate too. The
/// sample spreads its picks over the lines, so it holds every template in
/// proportion to its share of the chatter; lines at a paging level are
/// never sampled.
pub const DEFAULT_CHATTER_PER_SECOND: u32 = 100;

/// Lines novelty learns at least before new templates count.
pub const DEFAULT_LEARN_LINES: u64 = 100;

/// The compiled `anomaly:` settings of the `novelty:` section (durations
/// in ns): see the `anomaly` detector.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AnomalySpec {
    /// Window of concentration and surge.
    pub window: i64,
    /// Window of spread: the groups logging a template at once.
    pub spread_window: i64,
    /// How recently a group must have logged anything to be alive.
    pub population_window: i64,
    /// Spread: the fraction of the groups alive that log it.
    pub min_fraction: f64,
    /// Spread: the fewest groups.
    pub min_groups: usize,
    /// Concentration: the share of the template's lines one group logs.
    pub min_share: f64,
    /// Concentration: the fewest lines of that group.
    pub min_lines: u64,
    /// Concentration: the fewest other groups alive.
    pub min_peers: usize,
    /// Surge: the fewest lines of one group.
    pub surge_lines: u64,
    /// Concentration and surge: times the baseline's most lines per group.
    pub factor: f64,
}

/// The id of the anomaly rule (its alerts' `alertname`).
pub const ANOMALY_RULE: &str = "anomaly";

/// The compiled `novelty:` section (durations in ns).
#[derive(Debug, Clone, PartialEq)]
pub struct Novelty {
    /// Levels mined.
    pub levels: Vec<Level>,
    /// Lines without a level are mined too (`none` among the levels).
    pub unleveled: bool,
    /// Lines of chatter (below the lowest paging level, or without a
    /// level) mined per second of event time at most (0: no limit, and no
    /// line-rate share either).
    pub chatter_per_second: u32,
    /// Levels whose new templates page.
    pub page_levels: Vec<Level>,
    /// Learning time from the first line.
    pub learn_for: i64,
    /// Lines mined before learning may end (with `learn_for` of event time).
    pub learn_lines: u64,
    /// Rate and spread window.
    pub window: i64,
    /// Lines of a new template on one group that fire.
    pub min_count: u64,
    /// Groups with a new template that fire.
    pub min_groups: usize,
    /// How long a template stays new.
    pub novel_for: i64,
    /// Unseen this long, a template is new again.
    pub forget_after: i64,
    /// Template cap.
    pub max_templates: usize,
    /// Distinct words in one position that make it a variable.
    pub variable_after: usize,
    /// Literals whose messages are never mined.
    pub ignore: Vec<String>,
}

/// The id of the novelty rule (its alerts' `alertname`).
pub const NOVELTY_RULE: &str = "novel";

/// Where a rule was defined.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    /// File name.
    pub file: String,
    /// 1-based line of the rule's `id`.
    pub line: usize,
    /// From the built-in pack (not a file of one's own).
    pub pack: bool,
}

/// A compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Identifier.
    pub id: String,
    /// Title.
    pub title: String,
    /// Severity.
    pub severity: Severity,
    /// Description.
    pub description: Option<String>,
    /// Primary condition.
    pub cond: CondId,
    /// `resolve_on` condition.
    pub resolve_on: Option<CondId>,
    /// Group key candidates (aliases or field paths), first present wins.
    pub group_by: Vec<String>,
    /// The detector.
    pub detect: Detect,
    /// Hold time before firing (ns).
    pub for_: i64,
    /// `for` is measured on event time, not on the evidence (`for_on: clock`).
    pub for_clock: bool,
    /// Evaluated only at multiples of this (ns; 0: at every instant), as a
    /// ruler evaluates (`evaluate_every`).
    pub evaluate_every: i64,
    /// False time before resolving (ns).
    pub resolve_after: i64,
    /// Re-notify interval (ns).
    pub repeat_interval: i64,
    /// Group bound.
    pub max_groups: usize,
    /// Annotation templates.
    pub annotations: BTreeMap<String, Template>,
    /// Static labels.
    pub labels: BTreeMap<String, String>,
    /// Inline examples (match, no_match).
    pub examples: (Vec<String>, Vec<String>),
    /// Rule ids whose alerts this rule's alerts follow (incident chains).
    pub caused_by: Vec<String>,
    /// Incident name shared with related rules.
    pub incident: Option<String>,
    /// Lines after which a group's matches do not count (see [`Recent`]).
    pub unless: Vec<Recent>,
    /// Lines that show a group's condition moving (see [`Progress`]).
    pub progress: Option<Progress>,
    /// Definition site.
    pub origin: Origin,
}

/// A compiled `unless` entry: for `within` after a line matching `after`
/// (and until a line matching `until`), the group's lines do not count.
#[derive(Debug, Clone)]
pub struct Recent {
    /// The line that starts the exclusion.
    pub after: CondId,
    /// How long it lasts (ns).
    pub within: i64,
    /// The line that ends it early.
    pub until: Option<CondId>,
    /// The group keys of these lines; empty: the rule's own.
    pub group_by: Vec<String>,
    /// What the line says, for explanations and alerts: its literals.
    pub name: String,
    /// While it holds (progress's entries only), the rule's `for` is this
    /// (ns) instead.
    pub hold: Option<i64>,
}

/// A compiled `progress`: a line of the group matching `cond` starts the
/// group's detector over, unless one of `unless` holds for the group.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The progress line.
    pub cond: CondId,
    /// After these, progress does not count.
    pub unless: Vec<Recent>,
    /// What the line says: its literals.
    pub name: String,
}

impl Rule {
    /// Every `unless` entry of the rule, its own then its progress's, in
    /// the order the engine numbers them (a `Step::Unless` index).
    pub fn recents(&self) -> impl Iterator<Item = &Recent> {
        self.unless
            .iter()
            .chain(self.progress.iter().flat_map(|p| p.unless.iter()))
    }
}

/// A compiled, validated set of rules.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    /// Rules in load order.
    pub rules: Vec<Rule>,
    /// Every match block of every rule (primary, `then`, `resolve_on`).
    pub conditions: Vec<Condition>,
    /// Key aliases and sticky fields.
    pub keys: KeyConfig,
}

impl RuleSet {
    /// Everything that decides rule `ri`'s detector state and alert keys:
    /// its conditions, group keys (with the aliases they expand to), detector
    /// and timings. A reload keeps the state of a rule whose signature did not
    /// change; title, severity, annotations, labels and examples may change
    /// freely.
    pub fn detection_signature(&self, ri: usize) -> String {
        let Some(r) = self.rules.get(ri) else {
            return String::new();
        };
        let cond = |c: CondId| format!("{:?}", self.conditions.get(c));
        let expand = |k: &str| match self.keys.aliases.get(k) {
            Some(paths) => format!("{k}={paths:?}"),
            None => k.to_string(),
        };
        let mut keys: Vec<String> = r.group_by.iter().map(|k| expand(k)).collect();
        let detect = match &r.detect {
            Detect::Sequence { then, within } => format!("sequence {} {:?}", cond(*then), within),
            Detect::Spread(s) => {
                keys.extend(s.partition_by.iter().map(|k| expand(k)));
                format!("{:?}", r.detect)
            }
            Detect::Share(s) => {
                keys.extend(s.partition_by.iter().map(|k| expand(k)));
                format!("{:?}", r.detect)
            }
            d => format!("{d:?}"),
        };
        if keys.iter().any(|k| k == WORKLOAD_KEY) {
            keys.push(expand("pod"));
        }
        let recent = |u: &Recent| {
            format!(
                "{}/{}/{}/{:?}/{:?}",
                cond(u.after),
                u.within,
                u.until.map(cond).unwrap_or_default(),
                u.group_by.iter().map(|k| expand(k)).collect::<Vec<_>>(),
                u.hold
            )
        };
        let mut context: Vec<String> = r.unless.iter().map(recent).collect();
        if let Some(p) = &r.progress {
            context.push(format!("progress {}", cond(p.cond)));
            context.extend(p.unless.iter().map(recent));
        }
        format!(
            "{}|{}|{}|{:?}|{}|{}|{}|{}{}",
            r.id,
            cond(r.cond),
            r.resolve_on.map(cond).unwrap_or_default(),
            keys,
            detect,
            r.for_,
            r.resolve_after,
            r.max_groups,
            if context.is_empty() {
                String::new()
            } else {
                format!("|{}", context.join("|"))
            }
        )
    }
}
