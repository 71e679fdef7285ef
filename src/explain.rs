//! `sigwatch explain`: answers "why didn't my rule fire?" for a line. It
//! runs the line through the same decoder and matcher as the pipeline and
//! reports every step: wrapper and format, event time and where it came
//! from, level, message, fields, group keys and the path each came from,
//! and per rule which literal, regex, field and label checks passed or
//! failed and what value was seen.

use crate::decode::WORKLOAD_KEY;
use crate::decode::{header, payload, resolve_key, wrapper, Decoder};
use crate::matcher::{Matcher, MatcherError};
use crate::rules::{Detect, RuleSet};
use crate::source::Source;
use crate::text::truncate as clip;
use std::fmt::Write;

/// Explains lines against a rule set. Lines given in one session share a
/// decoder, so stream context (sticky `nodeID`, partial lines) works as in
/// the pipeline.
pub struct Explainer {
    set: RuleSet,
    matcher: Matcher,
    decoder: Decoder,
    source: Source,
    /// What earlier lines said about groups, per rule: when each `unless`
    /// entry's line was seen per group, and the last progress per group.
    context: Vec<RuleContext>,
    /// Now stands in for a missing time (lines given on the command line),
    /// not a file's modification time.
    now_stands_in: bool,
}

/// The context lines explained so far for one rule (bounded: explain reads
/// lines a person pastes or pipes).
#[derive(Default)]
struct RuleContext {
    marks: Vec<std::collections::BTreeMap<String, i64>>,
    progress: std::collections::BTreeMap<String, i64>,
}

/// Most groups an explanation remembers per `unless` entry.
const MAX_EXPLAIN_MARKS: usize = 10_000;

/// How a rule's detector decides, in words.
pub fn describe_detector(d: &Detect) -> String {
    match d {
        Detect::Count(c) => format!("count: {} match(es) within {}", c.threshold, c.window),
        Detect::Persist(p) => format!(
            "persist: matches keep coming for {} with gaps under {}",
            p.for_, p.max_gap
        ),
        Detect::Spread(s) => {
            let mut v = Vec::new();
            if let Some(g) = s.groups {
                v.push(format!("{g} groups"));
            }
            if let Some(f) = s.fraction {
                v.push(format!("{:.0}% of the groups seen", f * 100.0));
            }
            if let Some(m) = s.min_groups {
                v.push(format!("at least {m}"));
            }
            let each = match s.min_count {
                Some(n) if n > 1 => format!(" ({n} times each)"),
                _ => String::new(),
            };
            format!(
                "spread: {} matching{each} within {}",
                v.join(", "),
                s.window
            )
        }
        Detect::Share(s) => format!(
            "share: one group holds ≥{:.0}% of ≥{} matches within {}",
            s.min_share * 100.0,
            s.min_total,
            s.window
        ),
        Detect::Absent(a) => format!("absent: no match for {}", a.for_),
        Detect::Sequence { within, .. } => {
            format!("sequence: this, then the `then` match within {within}")
        }
        Detect::Novelty(n) => {
            let mut w = String::new();
            let _ = crate::duration::format_duration(n.window, &mut w);
            let mut l = String::new();
            let _ = crate::duration::format_duration(n.learn_for, &mut l);
            format!(
                "novelty: a new {} template on {} group(s), or {} line(s) on one, within {w} (learning the first {l} and {} lines)",
                n.page_levels.iter().map(|l| l.as_str()).collect::<Vec<_>>().join("/"),
                n.min_groups,
                n.min_count,
                n.learn_lines
            )
        }
        Detect::Anomaly(a) => format!(
            "anomaly: a known warn/error template on ≥{:.0}% of the groups alive (≥{}) within {}, ≥{:.0}% of its lines from one group (≥{}) or ≥{} lines on a lone group within {}, each ≥{}× its baseline",
            a.min_fraction * 100.0,
            a.min_groups,
            crate::duration::Dur(a.spread_window),
            a.min_share * 100.0,
            a.min_lines,
            a.surge_lines,
            crate::duration::Dur(a.window),
            a.factor
        ),
    }
}

fn wrapper_of(raw: &str) -> String {
    let mut parts = Vec::new();
    let rest = match wrapper::kubectl_prefix(raw) {
        Some((p, r)) => {
            parts.push(format!(
                "kubectl --prefix (pod {}, container {})",
                p.pod, p.container
            ));
            r.to_string()
        }
        None => {
            let plain = wrapper::strip_ansi(raw).into_owned();
            match wrapper::stern_prefix(&plain) {
                Some((p, r)) => {
                    parts.push(format!("stern (pod {}, container {})", p.pod, p.container));
                    r.to_string()
                }
                None => match wrapper::compose_prefix(&plain) {
                    Some((p, r)) => {
                        parts.push(format!(
                            "docker compose (container {}, service {})",
                            p.pod, p.container
                        ));
                        r.to_string()
                    }
                    None => plain,
                },
            }
        }
    };
    if let Some(u) = wrapper::cri(&rest) {
        parts.push(format!(
            "CRI ({}, {})",
            u.stream.unwrap_or("?"),
            if u.partial {
                "partial chunk"
            } else {
                "full line"
            }
        ));
    } else if let Some(u) = wrapper::docker(&rest) {
        parts.push(format!(
            "Docker json-file ({})",
            if u.partial {
                "partial chunk"
            } else {
                "full line"
            }
        ));
    }
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(" · ")
    }
}

impl Explainer {
    /// An explainer for a rule set.
    pub fn new(set: RuleSet) -> Result<Explainer, MatcherError> {
        let matcher = Matcher::new(&set)?;
        let decoder = Decoder::new(&set.keys, false);
        let mut source = Source::named("explain");
        source.modified = Some(crate::clock::wall_ns());
        let context = set
            .rules
            .iter()
            .map(|r| RuleContext {
                marks: r.recents().map(|_| Default::default()).collect(),
                progress: Default::default(),
            })
            .collect();
        Ok(Explainer {
            set,
            matcher,
            decoder,
            source,
            context,
            now_stands_in: true,
        })
    }

    /// The time that completes stamps without a year (and stands in for
    /// lines without a time) when nothing before gives one: the file's
    /// modification time when lines come from a file; now by default.
    pub fn set_modified(&mut self, modified: Option<i64>) {
        self.source.modified = modified;
        self.now_stands_in = false;
    }

    /// The line's log template and what novelty does with it.
    fn template_of(&self, p: &crate::decode::Prepared<'_>) -> String {
        use crate::decode::mined::mining_message;
        let level = self.decoder.level(p);
        if p.continues {
            return "(continues the record above: mined with it)".into();
        }
        let Some(msg) = mining_message(&p.text, p.format, p.header.as_ref(), level, Some(p.time))
        else {
            return "(no message)".into();
        };
        let template = format!("`{}`", clip(&crate::mining::tokenize(&msg).join(" "), 160));
        let novelty = self.set.rules.iter().find_map(|r| match &r.detect {
            Detect::Novelty(n) => Some(n),
            _ => None,
        });
        let verdict = match (novelty, level) {
            (None, _) => "novelty is off".to_string(),
            (Some(n), None) if n.unleveled => {
                "no level: mined (levels has none); never pages".to_string()
            }
            (Some(_), None) => "no level: novelty does not mine it".to_string(),
            (Some(n), Some(l)) if !n.levels.contains(&l) => {
                format!("level {}: novelty does not mine it", l.as_str())
            }
            (Some(n), Some(l)) if n.page_levels.contains(&l) => {
                format!("level {}: mined; pages when new", l.as_str())
            }
            (Some(_), Some(l)) => format!("level {}: mined; never pages", l.as_str()),
        };
        if novelty.is_some_and(|n| n.ignore.iter().any(|i| msg.contains(i.as_str()))) {
            return format!("{template} (ignored by novelty.ignore)");
        }
        format!("{template} ({verdict})")
    }

    /// Explains one line as text. `only`: rule ids to explain in full even
    /// when none of their literals occur (empty: the rules whose literals
    /// occur).
    pub fn explain(&mut self, raw: &str, only: &[String]) -> String {
        self.explanation(raw, only).render()
    }

    /// Explains one line as one JSON object (`sigwatch explain --json`):
    /// the same facts as the text, for scripts and measurements.
    pub fn explain_json(&mut self, raw: &str, only: &[String]) -> serde_json::Value {
        serde_json::to_value(self.explanation(raw, only)).unwrap_or(serde_json::Value::Null)
    }

    /// What the pipeline makes of one line, step by step.
    pub fn explanation(&mut self, raw: &str, only: &[String]) -> Explanation {
        let stamped_before = self.decoder.stats().formats.stamped;
        let mut wrapper = wrapper_of(raw);
        let mut x = Explanation {
            line: raw.to_string(),
            wrapper: String::new(),
            held: false,
            format: String::new(),
            malformed: false,
            time: None,
            time_from: String::new(),
            time_detail: None,
            timed: false,
            level: None,
            message: String::new(),
            template: String::new(),
            fields: Vec::new(),
            labels: Vec::new(),
            sticky: Vec::new(),
            keys: Vec::new(),
            rules: Vec::new(),
            quiet: 0,
        };
        let Some(p) = self.decoder.prepare(&self.source, raw, None) else {
            x.wrapper = wrapper;
            x.held = true;
            return x;
        };
        if self.decoder.stats().formats.stamped > stamped_before {
            let stamp = "leading timestamp (kubectl/stern --timestamps)";
            wrapper = if wrapper == "none" {
                stamp.to_string()
            } else {
                format!("{wrapper} · {stamp}")
            };
        }
        x.wrapper = wrapper;
        let decoded = payload::decode(&p.text, Some(p.time));
        x.format = format!("{:?}", decoded.format).to_lowercase();
        x.malformed = decoded.malformed;
        x.time = Some(crate::clock::format_rfc3339(p.time));
        x.time_from = if p.time_from == crate::decode::TimeFrom::Modified && self.now_stands_in {
            "none in the line: now, when explain ran; it moves no clock".to_string()
        } else {
            p.time_from.describe().to_string()
        };
        x.timed = p.time_from.is_own();
        if p.time_from == crate::decode::TimeFrom::Line {
            x.time_detail = stamp_detail(&p.text, p.time);
        }
        let mut event = self.decoder.event(&p);
        x.level = self.decoder.level(&p).map(|l| l.as_str().to_string());
        x.message = event.message.clone();
        x.template = self.template_of(&p);
        x.fields = fields_of(&event);
        x.labels = event.labels.iter().cloned().collect();
        x.sticky = event
            .sticky
            .iter()
            .filter(|(k, v)| event.fields.get(k).as_deref() != Some(v.as_str()))
            .cloned()
            .collect();
        x.keys = self.keys_of(&event);
        for ri in 0..self.set.rules.len() {
            let rule = &self.set.rules[ri];
            let mut r = self.rule_explanation(rule, &p.text, &mut event, only);
            event.captures.clear();
            let notes = self.context_of(ri, &p.text, &mut event, r.as_ref());
            event.captures.clear();
            let asked = only.is_empty() || only.contains(&self.set.rules[ri].id);
            if !notes.is_empty() && asked {
                let r = r.get_or_insert_with(|| RuleExplanation {
                    id: self.set.rules[ri].id.clone(),
                    matched: false,
                    group: None,
                    group_note: None,
                    detector: None,
                    checks: Vec::new(),
                    prefilter_missed: false,
                    context: Vec::new(),
                });
                r.context = notes;
            }
            match r {
                Some(r) => x.rules.push(r),
                None => x.quiet += 1,
            }
        }
        x
    }

    /// What the rule's `unless` and `progress` make of the line: a line
    /// that starts or ends an exclusion, a progress line, or a match that
    /// does not count because an earlier line of its group excluded it.
    fn context_of(
        &mut self,
        ri: usize,
        text: &str,
        event: &mut crate::decode::Event,
        matched: Option<&RuleExplanation>,
    ) -> Vec<String> {
        let rule = &self.set.rules[ri];
        let mut notes = Vec::new();
        if rule.unless.is_empty() && rule.progress.is_none() {
            return notes;
        }
        let t = event.time;
        let keys = &self.set.keys;
        let group_of = |by: &[String], event: &crate::decode::Event| {
            let by = if by.is_empty() { &rule.group_by } else { by };
            by.iter()
                .find_map(|k| resolve_key(keys, k, &|k: &str| event.get(k)))
        };
        let hits = |c: crate::rules::CondId, event: &mut crate::decode::Event| {
            self.matcher.literal_candidate(text, c)
                && Matcher::confirm(&self.set.conditions[c], event)
        };
        let ctx = &mut self.context[ri];
        let recents: Vec<&crate::rules::Recent> = rule.recents().collect();
        let own = rule.unless.len();
        for (i, u) in recents.iter().enumerate() {
            let what = if i < own {
                "its matches"
            } else {
                "its progress"
            };
            if hits(u.after, event) {
                if let Some(g) = group_of(&u.group_by, event) {
                    notes.push(format!(
                        "context: {g:?} logged {}: {what} within {} do not count",
                        u.name,
                        crate::duration::Dur(u.within)
                    ));
                    if ctx.marks[i].len() < MAX_EXPLAIN_MARKS || ctx.marks[i].contains_key(&g) {
                        ctx.marks[i].insert(g, t);
                    }
                }
            }
            if let Some(c) = u.until {
                if hits(c, event) {
                    if let Some(g) = group_of(&u.group_by, event) {
                        if ctx.marks[i].remove(&g).is_some() {
                            notes.push(format!(
                                "context: {g:?} ends the exclusion after {}",
                                u.name
                            ));
                        }
                    }
                }
            }
        }
        let holding = |ctx: &RuleContext, range: std::ops::Range<usize>, g: &str| {
            range.into_iter().find_map(|i| {
                let since = *ctx.marks[i].get(g)?;
                (t.saturating_sub(since) <= recents[i].within).then_some((i, since))
            })
        };
        if let Some(p) = &rule.progress {
            if hits(p.cond, event) {
                if let Some(g) = group_of(&[], event) {
                    match holding(ctx, own..recents.len(), &g) {
                        Some((i, since)) => notes.push(format!(
                            "progress of {g:?} ({}) does not count: it logged {} at {}",
                            p.name,
                            recents[i].name,
                            crate::clock::format_rfc3339(since)
                        )),
                        None => {
                            notes.push(format!(
                                "progress of {g:?} ({}): the detector starts the group over",
                                p.name
                            ));
                            ctx.progress.insert(g, t);
                        }
                    }
                }
            }
        }
        if let Some(g) = matched
            .filter(|m| m.matched)
            .and_then(|m| m.group.as_deref())
        {
            if let Some((i, since)) = holding(ctx, 0..own, g) {
                notes.push(format!(
                    "NOT COUNTED: {g:?} logged {} at {} ({} before; unless within {})",
                    recents[i].name,
                    crate::clock::format_rfc3339(since),
                    crate::duration::Dur(t.saturating_sub(since).max(0)),
                    crate::duration::Dur(recents[i].within)
                ));
            } else if let Some(p) = &rule.progress {
                notes.push(match ctx.progress.get(g) {
                    Some(at) => format!(
                        "counted; last progress of {g:?} ({}) at {}",
                        p.name,
                        crate::clock::format_rfc3339(*at)
                    ),
                    None => format!("counted; no progress of {g:?} ({}) seen", p.name),
                });
            }
        }
        notes
    }

    /// Each group key alias of the set: its value on this line and the
    /// path it came from; the workload, from the pod name.
    fn keys_of(&self, event: &crate::decode::Event) -> Vec<Key> {
        let mut keys = Vec::new();
        let get = |k: &str| event.get(k);
        for (alias, paths) in &self.set.keys.aliases {
            let found = paths
                .iter()
                .find_map(|p| get(p).filter(|v| !v.is_empty()).map(|v| (p, v)));
            keys.push(match found {
                Some((p, _)) => Key {
                    key: alias.clone(),
                    value: resolve_key(&self.set.keys, alias, &get),
                    via: Some(p.clone()),
                },
                None => Key {
                    key: alias.clone(),
                    value: None,
                    via: None,
                },
            });
        }
        if let Some(w) = resolve_key(&self.set.keys, WORKLOAD_KEY, &get) {
            keys.push(Key {
                key: WORKLOAD_KEY.to_string(),
                value: Some(w),
                via: Some("the pod name".into()),
            });
        }
        keys
    }

    /// What one rule makes of the line: its checks, its group, its
    /// detector; None for a rule none of whose literals is on it (unless
    /// asked for by name).
    fn rule_explanation(
        &self,
        rule: &crate::rules::Rule,
        text: &str,
        event: &mut crate::decode::Event,
        only: &[String],
    ) -> Option<RuleExplanation> {
        let cond = &self.set.conditions[rule.cond];
        let literal_pass = self.matcher.literal_candidate(text, rule.cond);
        let checks = crate::matcher::Matcher::explain(cond, event);
        let any_literal = checks
            .iter()
            .any(|c| c.ok && (c.what.starts_with("contains") || c.what.starts_with("regex")));
        if !literal_pass && !any_literal && !only.contains(&rule.id) {
            return None;
        }
        let matched = literal_pass && checks.iter().all(|c| c.ok);
        let mut r = RuleExplanation {
            id: rule.id.clone(),
            matched,
            group: None,
            group_note: None,
            detector: None,
            checks: checks.iter().map(|c| (c.ok, c.what.clone())).collect(),
            prefilter_missed: !literal_pass && checks.iter().all(|c| c.ok),
            context: Vec::new(),
        };
        if matched {
            let group = if rule.group_by.is_empty() {
                Some("cluster".to_string())
            } else {
                rule.group_by
                    .iter()
                    .find_map(|k| resolve_key(&self.set.keys, k, &|k: &str| event.get(k)))
            };
            if group.is_none() {
                r.group_note = Some(format!(
                    "no value for group_by {:?}: {}",
                    rule.group_by,
                    if rule.detect.needs_population() {
                        "not counted (ungrouped)"
                    } else {
                        "counted under \"unknown\""
                    }
                ));
            }
            r.group = group;
            r.detector = Some(format!(
                "{}{}",
                describe_detector(&rule.detect),
                if rule.for_ > 0 {
                    format!(", held for {}", crate::duration::Dur(rule.for_))
                } else {
                    String::new()
                }
            ));
        }
        Some(r)
    }
}

/// A line's decoded fields, values clipped for the screen.
fn fields_of(event: &crate::decode::Event) -> Vec<(String, String)> {
    match &event.fields {
        payload::Fields::Json(m) => m
            .iter()
            .map(|(k, v)| {
                let v = payload::value_str(v).unwrap_or_default();
                (k.clone(), clip(&v, 60))
            })
            .collect(),
        payload::Fields::Pairs(p) => p.iter().map(|(k, v)| (k.clone(), clip(v, 60))).collect(),
        payload::Fields::None => Vec::new(),
    }
}

/// Where a line's own stamp was and what was assumed to read it.
fn stamp_detail(text: &str, at: i64) -> Option<String> {
    let t = text.trim_start();
    let h = header::read_at(t, header::Reference::Near(at));
    let (a, b) = h.stamp?;
    let mut notes = Vec::new();
    if h.yearless {
        notes.push("no year: taken from the lines around it or the file's modification time");
    }
    if h.dateless {
        notes.push("no date: taken from the lines around it");
    }
    if h.zoneless {
        notes.push("no zone: read as UTC");
    }
    let mut out = format!("`{}`", t.get(a..b)?);
    for n in notes {
        out.push_str(", ");
        out.push_str(n);
    }
    Some(out)
}

/// A group key of a line, and where its value came from.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Key {
    /// The key (an alias such as `node`, or `workload`).
    pub key: String,
    /// Its value, if the line has one.
    pub value: Option<String>,
    /// The field path (or label) the value came from.
    pub via: Option<String>,
}

/// One rule's verdict on a line.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RuleExplanation {
    /// Rule id.
    pub id: String,
    /// Whether every check passed.
    pub matched: bool,
    /// The group the match counts under.
    pub group: Option<String>,
    /// Why a match has no group.
    pub group_note: Option<String>,
    /// How the rule's detector decides, in words.
    pub detector: Option<String>,
    /// Each check: passed, and what it looked at.
    pub checks: Vec<(bool, String)>,
    /// Every check passed but the literal prefilter did not select the
    /// line (a literal inside an escape or in a different case).
    pub prefilter_missed: bool,
    /// What the rule's `unless` and `progress` make of the line, given
    /// the lines explained before it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<String>,
}

/// What the pipeline makes of one line.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Explanation {
    /// The raw line.
    pub line: String,
    /// Its wrappers (`none` when there are none).
    pub wrapper: String,
    /// Held: a partial line or the start of a multi-line object.
    pub held: bool,
    /// The payload format.
    pub format: String,
    /// It looked structured but did not parse.
    pub malformed: bool,
    /// Event time (RFC 3339).
    pub time: Option<String>,
    /// Where the time came from.
    pub time_from: String,
    /// The stamp it was read from, and what reading it assumed.
    pub time_detail: Option<String>,
    /// The time is the line's own (or its wrapper's).
    pub timed: bool,
    /// Level.
    pub level: Option<String>,
    /// Message.
    pub message: String,
    /// Log template and what novelty does with it.
    pub template: String,
    /// Fields (values clipped).
    pub fields: Vec<(String, String)>,
    /// Stream labels.
    pub labels: Vec<(String, String)>,
    /// Sticky values inherited from the stream.
    pub sticky: Vec<(String, String)>,
    /// Group keys.
    pub keys: Vec<Key>,
    /// Rules whose literals occur (or named with `--rule`).
    pub rules: Vec<RuleExplanation>,
    /// Rules none of whose literals occur.
    pub quiet: usize,
}

impl Explanation {
    /// The text `sigwatch explain` prints.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "line      {}", clip(&self.line, 160));
        let _ = writeln!(o, "  wrapper   {}", self.wrapper);
        if self.held {
            let _ = writeln!(
                o,
                "  (held: a partial line or the start of a multi-line JSON object; it is explained with the line that completes it)\n"
            );
            return o;
        }
        let _ = writeln!(
            o,
            "  format    {}{}",
            self.format,
            if self.malformed {
                " (looked structured but did not parse: read as plain text)"
            } else {
                ""
            }
        );
        let detail = self
            .time_detail
            .as_ref()
            .map_or(String::new(), |d| format!(": {d}"));
        let _ = writeln!(
            o,
            "  time      {} ({}{detail})",
            self.time.as_deref().unwrap_or("-"),
            self.time_from
        );
        let _ = writeln!(
            o,
            "  level     {}",
            self.level.as_deref().unwrap_or("(none)")
        );
        let _ = writeln!(o, "  message   {:?}", clip(&self.message, 160));
        let _ = writeln!(o, "  template  {}", self.template);
        self.render_context(&mut o);
        self.render_rules(&mut o);
        if self.quiet > 0 {
            let _ = writeln!(
                o,
                "    ·      {} other rule{}: none of {} literals occur (name one with --rule ID to see its checks)",
                self.quiet,
                if self.quiet == 1 { "" } else { "s" },
                if self.quiet == 1 { "its" } else { "their" }
            );
        }
        o.push('\n');
        o
    }

    /// The line's fields, labels, sticky values and group keys.
    fn render_context(&self, o: &mut String) {
        if !self.fields.is_empty() {
            let n = self.fields.len();
            let shown: Vec<String> = self
                .fields
                .iter()
                .take(12)
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect();
            let more = if n > 12 {
                format!(" … ({} more)", n - 12)
            } else {
                String::new()
            };
            let _ = writeln!(o, "  fields    {}{more}", shown.join(" "));
        }
        if !self.labels.is_empty() {
            let l: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect();
            let _ = writeln!(o, "  labels    {}", l.join(" "));
        }
        if !self.sticky.is_empty() {
            let l: Vec<String> = self
                .sticky
                .iter()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect();
            let _ = writeln!(
                o,
                "  sticky    {} (not in this line: remembered from an earlier line of the stream)",
                l.join(" ")
            );
        }
        let keys: Vec<String> = self
            .keys
            .iter()
            .map(|k| match (&k.value, &k.via) {
                (Some(v), Some(via)) if k.key == WORKLOAD_KEY => {
                    format!("{}={v:?} (from {via})", k.key)
                }
                (Some(v), Some(via)) => format!("{}={v:?} (via {via})", k.key),
                (Some(v), None) => format!("{}={v:?}", k.key),
                _ => format!("{}=—", k.key),
            })
            .collect();
        let _ = writeln!(o, "  keys      {}", keys.join(" · "));
    }

    /// What each rule made of the line.
    fn render_rules(&self, o: &mut String) {
        let _ = writeln!(o, "  rules");
        for r in &self.rules {
            if r.matched {
                let group = match (&r.group, &r.group_note) {
                    (Some(g), _) => format!("group {g:?}"),
                    (None, Some(n)) => n.clone(),
                    (None, None) => String::new(),
                };
                let _ = writeln!(o, "    MATCH  {}  → {group}", r.id);
                if let Some(d) = &r.detector {
                    let _ = writeln!(o, "           {d}");
                }
            } else if r.checks.is_empty() {
                let _ = writeln!(o, "    ctx    {}", r.id);
            } else {
                let _ = writeln!(o, "    no     {}", r.id);
            }
            for (ok, what) in &r.checks {
                let _ = writeln!(o, "           {} {}", if *ok { "✓" } else { "✗" }, what);
            }
            if r.prefilter_missed {
                let _ = writeln!(
                    o,
                    "           ✗ the literal prefilter did not select this line (a literal is inside an escape or a different case)"
                );
            }
            for c in &r.context {
                let _ = writeln!(o, "           ↳ {c}");
            }
        }
    }
}

/// The result of checking one rule's inline examples.
#[derive(Debug, Clone, PartialEq)]
pub struct ExampleFailure {
    /// Rule id.
    pub rule: String,
    /// Where the rule is defined.
    pub origin: crate::rules::Origin,
    /// Whether the line was expected to match.
    pub expected_match: bool,
    /// The example line.
    pub line: String,
}

/// Runs every rule's inline examples through the real decoder and matcher.
pub fn check_examples(
    set: &crate::rules::RuleSet,
) -> Result<Vec<ExampleFailure>, crate::matcher::MatcherError> {
    let matcher = crate::matcher::Matcher::new(set)?;
    let mut failures = Vec::new();
    let mut scratch = crate::matcher::Scratch::default();
    for rule in &set.rules {
        let (yes, no) = &rule.examples;
        for (lines, expected) in [(yes, true), (no, false)] {
            for line in lines {
                let mut dec = crate::decode::Decoder::new(&set.keys, false);
                let matched =
                    match dec.prepare(&crate::source::Source::named("example"), line, None) {
                        Some(p) => {
                            matcher.scan(&p.text, &mut scratch)
                                && scratch.candidates.contains(&rule.cond)
                                && crate::matcher::Matcher::confirm(
                                    &set.conditions[rule.cond],
                                    &mut dec.event(&p),
                                )
                        }
                        None => false,
                    };
                if matched != expected {
                    failures.push(ExampleFailure {
                        rule: rule.id.clone(),
                        origin: rule.origin.clone(),
                        expected_match: expected,
                        line: line.clone(),
                    });
                }
            }
        }
    }
    Ok(failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn explain(line: &str, only: &[&str]) -> String {
        let set = crate::rules::load_builtin().unwrap();
        let mut e = Explainer::new(set).unwrap();
        let only: Vec<String> = only.iter().map(|s| s.to_string()).collect();
        e.explain(line, &only)
    }

    #[test]
    fn a_matching_line_shows_format_time_keys_and_group() {
        let out = explain(
            r#"[pod/livekit-server-7c9d8f6b5-x2x7q/livekit-server] {"level":"error","ts":1714568400.55,"logger":"livekit","msg":"failed to mark as draining","nodeID":"ND_7TqVmyndaB8f","error":"dial tcp 10.0.0.21:6379: connect: connection refused"}"#,
            &[],
        );
        assert!(
            out.contains("kubectl --prefix (pod livekit-server-7c9d8f6b5-x2x7q"),
            "{out}"
        );
        assert!(out.contains("format    json"), "{out}");
        assert!(
            out.contains("2024-05-01T13:00:00.550Z (from the line's own timestamp)"),
            "{out}"
        );
        assert!(
            out.contains(r#"node="ND_7TqVmyndaB8f" (via nodeID)"#),
            "{out}"
        );
        assert!(
            out.contains(r#"MATCH  livekit.drain_failed  → group "ND_7TqVmyndaB8f""#),
            "{out}"
        );
        assert!(out.contains(r#"MATCH  livekit.redis_unreachable"#), "{out}");
    }

    #[test]
    fn a_near_miss_says_which_check_failed() {
        // Looks like a black-hole failure but is a completed recording.
        let out = explain(
            r#"{"level":"info","ts":1714570101.9,"logger":"egress","msg":"egress_complete","nodeID":"NE_x","egressID":"EG_a"}"#,
            &["egress.black_hole"],
        );
        assert!(out.contains("no     egress.black_hole"), "{out}");
        assert!(
            out.contains(r#"✗ contains: none of "egress_failed", "EGRESS_FAILED" occurs (closest: the text has "egress_" then "complet" where the literal has "failed")"#),
            "{out}"
        );
        // A Readiness line is not a liveness failure: the literal says so.
        let out = explain(
            r#"I0501 12:00:40.118204    1187 prober.go:107] "Probe failed" probeType="Readiness" pod="prod/api-0""#,
            &["k8s.liveness_spread"],
        );
        assert!(out.contains("format    klog"), "{out}");
        assert!(out.contains("no     k8s.liveness_spread"), "{out}");
        assert!(out.contains("MATCH  k8s.readiness_lost"), "{out}");
    }

    #[test]
    fn field_conditions_report_the_value_seen() {
        let set = crate::rules::compile(&[(
            "t.yaml".into(),
            r#"rules:
  - id: t.err
    title: t
    severity: info
    match: {contains: ["boom"], field: {level: error}}
    detect: {count: {window: 1m}}
"#
            .into(),
        )])
        .unwrap();
        let mut e = Explainer::new(set).unwrap();
        let out = e.explain(r#"{"level":"warn","msg":"boom"}"#, &[]);
        assert!(out.contains("no     t.err"), "{out}");
        assert!(
            out.contains(r#"✗ field level must be "error": is "warn""#),
            "{out}"
        );
        assert!(out.contains(r#"✓ contains: "boom" found"#), "{out}");
    }

    #[test]
    fn a_routine_line_says_why_it_did_not_count() {
        let set = crate::rules::load_builtin().unwrap();
        let mut e = Explainer::new(set).unwrap();
        let only = vec!["k8s.readiness_lost".to_string()];
        let created = r#"{"kind":"Event","involvedObject":{"kind":"ReplicaSet","name":"web-6d4cf56db6"},"lastTimestamp":"2024-05-01T12:00:00Z","reason":"SuccessfulCreate","message":"Created pod: web-6d4cf56db6-xyz12","type":"Normal"}"#;
        let failed = r#"{"kind":"Event","involvedObject":{"kind":"Pod","name":"web-6d4cf56db6-xyz12"},"lastTimestamp":"2024-05-01T12:00:12Z","reason":"Unhealthy","message":"Readiness probe failed: HTTP probe failed with statuscode: 503","type":"Warning"}"#;
        let other = failed.replace("xyz12", "abc34");
        let out = e.explain(created, &only);
        assert!(
            out.contains(r#"context: "web-6d4cf56db6-xyz12" logged `Created pod: `"#),
            "{out}"
        );
        assert!(
            !out.contains("k8s.liveness_spread"),
            "only the rule asked for: {out}"
        );
        let out = e.explain(failed, &only);
        assert!(
            out.contains(r#"NOT COUNTED: "web-6d4cf56db6-xyz12" logged `Created pod: ` at 2024-05-01T12:00:00.000Z (12s before; unless within 5m)"#),
            "{out}"
        );
        let out = e.explain(&other, &only);
        assert!(out.contains("MATCH  k8s.readiness_lost"), "{out}");
        assert!(!out.contains("NOT COUNTED"), "another pod counts: {out}");
    }

    #[test]
    fn a_progress_line_and_its_void_are_explained() {
        let set = crate::rules::load_builtin().unwrap();
        let mut e = Explainer::new(set).unwrap();
        let only = vec!["livekit.drain_stuck".to_string()];
        let leave = r#"[pod/lk-0/livekit-server] {"level":"info","ts":1714568460,"logger":"livekit","msg":"participant closing","room":"r","nodeID":"ND_a"}"#;
        let out = e.explain(leave, &only);
        assert!(out.contains("the detector starts the group over"), "{out}");
        let failed = r#"[pod/lk-1/livekit-server] {"level":"error","ts":1714568400,"logger":"livekit","msg":"failed to mark as draining","nodeID":"ND_b","error":"redis: client is closed"}"#;
        e.explain(failed, &only);
        let out = e.explain(
            &leave.replace("lk-0", "lk-1").replace("ND_a", "ND_b"),
            &only,
        );
        assert!(
            out.contains("does not count: it logged `failed to mark as draining`"),
            "{out}"
        );
    }
}
