//! The rule file as written: serde types with `deny_unknown_fields`, so a typo
//! in a key is an error with its line and column rather than a silently
//! ignored option.

use crate::duration::Dur;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::fmt;

/// One rule file: rules, plus optional key aliases and sticky stream fields.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RuleFile {
    /// The rules of this file.
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
    /// Group-key aliases: `node: [labels.node_id, nodeID, pod]`; replaces the
    /// built-in list for that alias.
    #[serde(default)]
    pub aliases: BTreeMap<String, Vec<String>>,
    /// Field names that, once seen on a stream, are inherited by that stream's
    /// later lines (livekit-server logs `nodeID` only at startup and drain).
    #[serde(default)]
    pub sticky: Vec<String>,
    /// Novelty: page on error templates never seen before (on unless a
    /// file turns it off; at most one file may set it).
    #[serde(default)]
    pub novelty: Option<NoveltySpec>,
    /// Which layer the file belongs to (not in the file: set by the loader).
    #[serde(skip)]
    pub layer: Layer,
}

/// Where a rule file comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Layer {
    /// A file of one's own (`--rules`, sigwatch.yaml).
    #[default]
    Own,
    /// The built-in pack.
    Pack,
}

/// The `novelty:` section: which lines are mined into templates, how long
/// the miner only learns, and when a new template pages.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct NoveltySpec {
    /// On or off (default on).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Population anomalies of every mined warn/error template
    /// (`anomalies: {enabled: true}`; off by default).
    #[serde(default)]
    pub anomalies: Option<AnomalyModel>,
    /// Levels mined into templates (default all five; fatal counts as
    /// error; `none` adds the lines without a level).
    #[serde(default)]
    pub levels: Option<Vec<String>>,
    /// Levels whose new templates page (default error; fatal counts as error).
    #[serde(default)]
    pub page_levels: Option<Vec<String>>,
    /// Event time the miner only learns after its first line (default 1h).
    #[serde(default)]
    pub learn_for: Option<Dur>,
    /// Lines the miner learns at least, however long they take (default
    /// 100): a quiet start (a few start-up lines, then an hour of nothing)
    /// does not end learning before the traffic is seen.
    #[serde(default)]
    pub learn_lines: Option<u64>,
    /// Window for the rate and the spread (default 5m).
    #[serde(default)]
    pub window: Option<Dur>,
    /// Fire when one group logs a new template this often in the window (default 5).
    #[serde(default)]
    pub min_count: Option<u64>,
    /// Or when this many groups log it in the window (default 2).
    #[serde(default)]
    pub min_groups: Option<usize>,
    /// The group keys, first present wins (default node).
    #[serde(default)]
    pub group_by: Option<OneOrMany>,
    /// How long the condition must hold before it pages (default 30s): a
    /// blip of a few seconds does not page.
    #[serde(rename = "for", default)]
    pub for_: Option<Dur>,
    /// How long a template stays new after it first appears (default 1h).
    #[serde(default)]
    pub novel_for: Option<Dur>,
    /// Unseen this long, a known template counts as new again (default 7d).
    #[serde(default)]
    pub forget_after: Option<Dur>,
    /// Most templates kept (default 10000; the least recently seen go, counted).
    #[serde(default)]
    pub max_templates: Option<usize>,
    /// Distinct words in one position, among templates otherwise alike,
    /// that make the position a variable (default 4).
    #[serde(default)]
    pub variable_after: Option<usize>,
    /// Info, debug and unlevelled lines mined per second of event time (a
    /// burst of ten seconds' worth allowed; default 100, 0 no limit): past
    /// it they are counted, not mined. Warn and above always are.
    #[serde(default)]
    pub chatter_per_second: Option<u32>,
    /// An earlier setting (Drain's similarity), refused with a pointer to
    /// `variable_after`.
    #[serde(default)]
    pub similarity: Option<f64>,
    /// Severity of the alert (default warning).
    #[serde(default)]
    pub severity: Option<Severity>,
    /// Messages containing any of these literals are never mined.
    #[serde(default)]
    pub ignore: Vec<String>,
    /// Re-notification interval of a firing alert (default 4h).
    #[serde(default)]
    pub repeat_interval: Option<Dur>,
    /// Extra labels of the alert (routing).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations replacing the default summary and description.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// Alert severity.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Informational.
    Info,
    /// Needs attention soon.
    Warning,
    /// Page now.
    Critical,
}

impl Severity {
    /// The lowercase name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// One rule as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Stable identifier, e.g. `livekit.drain_stuck`.
    pub id: String,
    /// One-line human title.
    pub title: String,
    /// Severity.
    pub severity: Severity,
    /// Longer free text.
    #[serde(default)]
    pub description: Option<String>,
    /// What a line must look like to count.
    #[serde(rename = "match")]
    pub match_: MatchSpec,
    /// The group key: an alias (`node`, `pod`, `workload`) or field paths.
    #[serde(default)]
    pub group_by: Option<OneOrMany>,
    /// The detector.
    pub detect: DetectSpec,
    /// How long the condition must be observed before the alert fires.
    #[serde(rename = "for", default)]
    pub for_: Option<Dur>,
    /// What `for` is measured on: `evidence` (default: from when the
    /// condition became true to the latest line supporting it) or `clock`
    /// (event time: a condition a window keeps true after its lines
    /// stopped goes on holding, as a Prometheus or Loki ruler holds it).
    #[serde(default)]
    pub for_on: Option<ForOn>,
    /// Evaluate only at whole multiples of this interval of event time,
    /// as a Prometheus or Loki ruler evaluates its group (a condition true
    /// between two evaluations is not seen; `for` is on the clock, from
    /// the first evaluation that found it true). Default: at every line
    /// and every instant the condition can change.
    #[serde(default)]
    pub evaluate_every: Option<Dur>,
    /// How long the condition must be false before the alert resolves.
    #[serde(default)]
    pub resolve_after: Option<Dur>,
    /// Resolve only when a line matching this arrives for the same group.
    #[serde(default)]
    pub resolve_on: Option<MatchSpec>,
    /// Re-notify a firing alert this often (default 4h).
    #[serde(default)]
    pub repeat_interval: Option<Dur>,
    /// Bound on the groups tracked by this rule (least recently seen evicted).
    #[serde(default)]
    pub max_groups: Option<usize>,
    /// Annotation templates.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Extra static labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Inline examples verified by `sigwatch check`.
    #[serde(default)]
    pub examples: Option<Examples>,
    /// Rules whose alerts cause this one's: an alert of this rule joins their
    /// open incident (see `incident`).
    #[serde(default)]
    pub caused_by: Option<OneOrMany>,
    /// An incident name: alerts of rules with the same name join one incident.
    #[serde(default)]
    pub incident: Option<String>,
    /// Lines that take a group's matches out of the count for a while: a
    /// match does not count when the same group logged one of these within
    /// `within` before it (a pod that is starting or being stopped).
    #[serde(default)]
    pub unless: Vec<RecentSpec>,
    /// Lines that show a group's condition moving (a participant leaving a
    /// draining node): the detector starts that group over.
    #[serde(default)]
    pub progress: Option<ProgressSpec>,
}

/// What a rule's `for` is measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ForOn {
    /// From when the condition became true to its latest supporting line.
    Evidence,
    /// On event time, as a ruler evaluates: the condition true at every
    /// instant of the `for`, lines or not.
    Clock,
}

/// "The same group logged a line like this recently": an entry of a rule's
/// `unless` (or of its progress's `unless`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecentSpec {
    /// The line that starts the exclusion.
    pub after: MatchSpec,
    /// How long after that line the group's lines do not count.
    pub within: Dur,
    /// A line of the same group that ends the exclusion early (a pod that
    /// was stopped is scheduled again under the same name).
    #[serde(default)]
    pub until: Option<MatchSpec>,
    /// Whose line it is, when it names the group in another place than the
    /// rule's matches do (`after:Created pod: `); default the rule's `group_by`.
    #[serde(default)]
    pub group_by: Option<OneOrMany>,
    /// In a progress's `unless` only: while this entry holds for a group,
    /// the rule's `for` is this instead (a drain that began by failing is
    /// stuck sooner than one that merely stopped moving).
    #[serde(rename = "for", default)]
    pub for_: Option<Dur>,
}

/// A rule's `progress`: which lines show its condition moving, and after
/// which lines they do not.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgressSpec {
    /// A line of the same group that shows progress.
    #[serde(rename = "match")]
    pub match_: MatchSpec,
    /// Progress does not count after these (a drain that began by failing).
    #[serde(default)]
    pub unless: Vec<RecentSpec>,
}

/// Inline examples.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Examples {
    /// Lines that must match.
    #[serde(rename = "match", default)]
    pub match_: Vec<String>,
    /// Lines that must not match.
    #[serde(default)]
    pub no_match: Vec<String>,
}

/// A string or a list of strings.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// One value.
    One(String),
    /// Several values.
    Many(Vec<String>),
}

impl OneOrMany {
    /// The values as a list.
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// A match block. All present conditions must hold.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct MatchSpec {
    /// Any of these literals.
    #[serde(default)]
    pub contains: Option<OneOrMany>,
    /// All of these literals.
    #[serde(default)]
    pub contains_all: Option<OneOrMany>,
    /// None of these literals.
    #[serde(default)]
    pub not_contains: Option<OneOrMany>,
    /// Regexes that must all match the line; named captures become fields.
    #[serde(default)]
    pub regex: Option<OneOrMany>,
    /// Regexes none of which may match the line.
    #[serde(default)]
    pub not_regex: Option<OneOrMany>,
    /// Field conditions.
    #[serde(default)]
    pub field: BTreeMap<String, FieldCond>,
    /// Label / context conditions (Loki labels, pod, container, namespace).
    #[serde(default)]
    pub labels: BTreeMap<String, FieldCond>,
}

/// A condition on one field value.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldCond {
    /// Equal to this value.
    Equals(String),
    /// Equal to one of these values.
    OneOf(Vec<String>),
    /// Matches this regex (source text; compiled later).
    Regex(String),
    /// Present (true) or absent (false).
    Exists(bool),
    /// Not equal to this value; a missing field is not equal.
    NotEquals(String),
    /// Does not match this regex; a missing field does not match.
    NotRegex(String),
    /// A number within these bounds (a missing or non-numeric value is not).
    Number(NumBounds),
}

/// Bounds of a numeric field condition: `{ge: 500, lt: 600}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct NumBounds {
    /// Greater than.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gt: Option<f64>,
    /// Greater than or equal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ge: Option<f64>,
    /// Less than.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lt: Option<f64>,
    /// Less than or equal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub le: Option<f64>,
}

impl NumBounds {
    /// Whether a number is within the bounds.
    pub fn holds(&self, x: f64) -> bool {
        self.gt.is_none_or(|b| x > b)
            && self.ge.is_none_or(|b| x >= b)
            && self.lt.is_none_or(|b| x < b)
            && self.le.is_none_or(|b| x <= b)
    }

    /// Whether every bound is a finite number.
    pub fn finite(&self) -> bool {
        [self.gt, self.ge, self.lt, self.le]
            .iter()
            .flatten()
            .all(|x| x.is_finite())
    }

    /// Sets one bound by its key; false for a key that is no bound.
    fn set(&mut self, key: &str, v: f64) -> bool {
        let slot = match key {
            "gt" => &mut self.gt,
            "ge" => &mut self.ge,
            "lt" => &mut self.lt,
            "le" => &mut self.le,
            _ => return false,
        };
        *slot = Some(v);
        true
    }
}

impl<'de> Deserialize<'de> for FieldCond {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = FieldCond;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a value, a list of values, or {regex: ..} / {exists: ..}")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FieldCond, E> {
                Ok(FieldCond::Equals(v.to_string()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<FieldCond, E> {
                Ok(FieldCond::Equals(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<FieldCond, E> {
                Ok(FieldCond::Equals(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<FieldCond, E> {
                Ok(FieldCond::Equals(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<FieldCond, E> {
                Ok(FieldCond::Equals(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<FieldCond, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = a.next_element::<Scalar>()? {
                    out.push(v.0);
                }
                if out.is_empty() {
                    return Err(serde::de::Error::custom("an empty list matches nothing"));
                }
                Ok(FieldCond::OneOf(out))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<FieldCond, A::Error> {
                let Some(key) = a.next_key::<String>()? else {
                    return Err(serde::de::Error::custom("empty field condition"));
                };
                if NUM_KEYS.contains(&key.as_str()) {
                    // Numeric bounds combine: {ge: 500, lt: 600}.
                    let mut b = NumBounds::default();
                    b.set(&key, a.next_value::<f64>()?);
                    while let Some(k) = a.next_key::<String>()? {
                        if !NUM_KEYS.contains(&k.as_str()) || !b.set(&k, a.next_value::<f64>()?) {
                            return Err(serde::de::Error::custom(format!(
                                "{k:?} cannot be combined with numeric bounds (gt, ge, lt, le)"
                            )));
                        }
                    }
                    return Ok(FieldCond::Number(b));
                }
                let cond = match key.as_str() {
                    "regex" => FieldCond::Regex(a.next_value::<String>()?),
                    "exists" => FieldCond::Exists(a.next_value::<bool>()?),
                    "equals" => FieldCond::Equals(a.next_value::<Scalar>()?.0),
                    "not_equals" => FieldCond::NotEquals(a.next_value::<Scalar>()?.0),
                    "not_regex" => FieldCond::NotRegex(a.next_value::<String>()?),
                    "one_of" => FieldCond::OneOf(
                        a.next_value::<Vec<Scalar>>()?
                            .into_iter()
                            .map(|s| s.0)
                            .collect(),
                    ),
                    other => return Err(serde::de::Error::unknown_field(other, COND_KEYS)),
                };
                if a.next_key::<String>()?.is_some() {
                    return Err(serde::de::Error::custom(
                        "a field condition takes exactly one of regex, exists, equals, one_of, not_equals, not_regex (or numeric bounds gt, ge, lt, le together)",
                    ));
                }
                Ok(cond)
            }
        }
        d.deserialize_any(V)
    }
}

const NUM_KEYS: &[&str] = &["gt", "ge", "lt", "le"];
const COND_KEYS: &[&str] = &[
    "regex",
    "exists",
    "equals",
    "one_of",
    "not_equals",
    "not_regex",
    "gt",
    "ge",
    "lt",
    "le",
];

/// A scalar YAML value read as text.
struct Scalar(String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match FieldCond::deserialize(d)? {
            FieldCond::Equals(s) => Ok(Scalar(s)),
            _ => Err(serde::de::Error::custom("expected a plain value")),
        }
    }
}

/// The detector block: exactly one kind must be set.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct DetectSpec {
    /// `count`: ≥ threshold matches for a group within window.
    #[serde(default)]
    pub count: Option<CountSpec>,
    /// `persist`: a group keeps matching for ≥ for, no gap > max_gap.
    #[serde(default)]
    pub persist: Option<PersistSpec>,
    /// `spread`: many groups match within window.
    #[serde(default)]
    pub spread: Option<SpreadSpec>,
    /// `share`: one group holds most of the matches.
    #[serde(default)]
    pub share: Option<ShareSpec>,
    /// `absent`: a group seen before stops matching.
    #[serde(default)]
    pub absent: Option<AbsentSpec>,
    /// `sequence`: A then B on one group within a time.
    #[serde(default)]
    pub sequence: Option<SequenceSpec>,
}

/// `count` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CountSpec {
    /// Minimum matches (default 1).
    #[serde(default = "one")]
    pub threshold: u64,
    /// Sliding window.
    pub window: Dur,
}

fn one() -> u64 {
    1
}

/// The `anomalies:` settings of the `novelty:` section.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct AnomalyModel {
    /// On or off (default off).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Concentration and surge window (default 10m).
    #[serde(default)]
    pub window: Option<Dur>,
    /// Spread window (default 1m).
    #[serde(default)]
    pub spread_window: Option<Dur>,
    /// How recently a group must have logged to be alive (default 10m).
    #[serde(default)]
    pub population_window: Option<Dur>,
    /// Spread: fraction of the groups alive (default 0.5).
    #[serde(default)]
    pub min_fraction: Option<f64>,
    /// Spread: fewest groups (default 3).
    #[serde(default)]
    pub min_groups: Option<usize>,
    /// Concentration: one group's share of the lines (default 0.9).
    #[serde(default)]
    pub min_share: Option<f64>,
    /// Concentration: fewest lines of that group (default 10).
    #[serde(default)]
    pub min_lines: Option<u64>,
    /// Concentration: fewest peers alive (default 2).
    #[serde(default)]
    pub min_peers: Option<usize>,
    /// Surge: fewest lines of a lone group (default 20).
    #[serde(default)]
    pub surge_lines: Option<u64>,
    /// Times the baseline's most lines per group (default 5).
    #[serde(default)]
    pub factor: Option<f64>,
    /// How long it must hold (default 30s, on the evidence).
    #[serde(rename = "for", default)]
    pub for_: Option<Dur>,
    /// Severity of its alerts (default warning).
    #[serde(default)]
    pub severity: Option<Severity>,
}

/// `persist` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersistSpec {
    /// How long the group must keep matching.
    #[serde(rename = "for")]
    pub for_: Dur,
    /// Longest silence that does not break the run.
    pub max_gap: Dur,
}

/// `spread` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpreadSpec {
    /// Sliding window.
    pub window: Dur,
    /// Fire when at least this many groups match.
    #[serde(default)]
    pub groups: Option<usize>,
    /// Fire when at least this fraction of the groups seen recently match.
    #[serde(default)]
    pub fraction: Option<f64>,
    /// With `fraction`, the fewest matching groups that can fire (default 2).
    #[serde(default)]
    pub min_groups: Option<usize>,
    /// Matches a group needs within the window to count as matching
    /// (default 1): a pod that fails its probe once is not a pod that
    /// stays unready.
    #[serde(default)]
    pub min_count: Option<u64>,
    /// How recently a group must have logged anything to count as alive
    /// (default: the larger of the window and 10m).
    #[serde(default)]
    pub population_window: Option<Dur>,
    /// Split the population by this key (e.g. `workload`); one alert per value.
    #[serde(default)]
    pub partition_by: Option<String>,
}

/// `share` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareSpec {
    /// Sliding window.
    pub window: Dur,
    /// Fewest matches in the window before shares mean anything.
    pub min_total: u64,
    /// The top group's share (0..1) that fires.
    pub min_share: f64,
    /// Fewest groups alive (logging anything) for a share to be meaningful (default 2).
    #[serde(default)]
    pub min_groups: Option<usize>,
    /// How recently a group must have logged anything to count as alive
    /// (default: the larger of the window and 1h).
    #[serde(default)]
    pub population_window: Option<Dur>,
    /// Split by this key; shares are computed within each value.
    #[serde(default)]
    pub partition_by: Option<String>,
}

/// `absent` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbsentSpec {
    /// Silence after which a group that matched before is reported absent.
    #[serde(rename = "for")]
    pub for_: Dur,
}

/// `sequence` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequenceSpec {
    /// The second step; the rule's `match` is the first.
    pub then: MatchSpec,
    /// Longest time from the first step to the second.
    pub within: Dur,
}
