//! `sigwatch explain`: answers "why didn't my rule fire?" for a line. It
//! runs the line through the same decoder and matcher as the pipeline and
//! reports every step: wrapper and format, event time and where it came
//! from, level, message, fields, group keys and the path each came from,
//! and per rule which literal, regex, field and label checks passed or
//! failed and what value was seen.

use crate::decode::WORKLOAD_KEY;
use crate::decode::{payload, resolve_key, time, wrapper, Decoder};
use crate::detect::truncate as clip;
use crate::matcher::{Matcher, MatcherError};
use crate::rules::{Detect, RuleSet};
use crate::source::Source;
use std::fmt::Write;

/// Explains lines against a rule set. Lines given in one session share a
/// decoder, so stream context (sticky `nodeID`, partial lines) works as in
/// the pipeline.
pub struct Explainer {
    set: RuleSet,
    matcher: Matcher,
    decoder: Decoder,
}

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
            format!("spread: {} matching within {}", v.join(", "), s.window)
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
            let _ = crate::rules::duration::format_duration(n.window, &mut w);
            let mut l = String::new();
            let _ = crate::rules::duration::format_duration(n.learn_for, &mut l);
            format!(
                "novelty: a new {} template on {} group(s), or {} line(s) on one, within {w} (learning the first {l})",
                n.page_levels.iter().map(|l| l.as_str()).collect::<Vec<_>>().join("/"),
                n.min_groups,
                n.min_count
            )
        }
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
                None => plain,
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
        Ok(Explainer {
            set,
            matcher,
            decoder,
        })
    }

    /// The line's log template and what novelty does with it.
    fn template_of(&self, p: &crate::decode::Prepared<'_>) -> String {
        use crate::decode::level::mining_message;
        let Some(msg) = mining_message(&p.text, p.format, Some(p.time)) else {
            return "(no message)".into();
        };
        let template = format!("`{}`", clip(&crate::mining::tokenize(&msg).join(" "), 160));
        let level = self.decoder.level(p);
        let novelty = self.set.rules.iter().find_map(|r| match &r.detect {
            Detect::Novelty(n) => Some(n),
            _ => None,
        });
        let verdict = match (novelty, level) {
            (None, _) => "novelty is off".to_string(),
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

    /// Explains one line. `only`: rule ids to explain in full even when
    /// none of their literals occur (empty: the rules whose literals occur).
    pub fn explain(&mut self, raw: &str, only: &[String]) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "line      {}", clip(raw, 160));
        let _ = writeln!(o, "  wrapper   {}", wrapper_of(raw));
        let Some(p) = self.decoder.prepare(&Source::named("explain"), raw, None) else {
            let _ = writeln!(
                o,
                "  (held: a partial line or the start of a multi-line JSON object; it is explained with the line that completes it)\n"
            );
            return o;
        };
        let decoded = payload::decode(&p.text, Some(p.time));
        let format = format!("{:?}", decoded.format).to_lowercase();
        let _ = writeln!(
            o,
            "  format    {format}{}",
            if decoded.malformed {
                " (looked structured but did not parse: read as plain text)"
            } else {
                ""
            }
        );
        let from = if decoded.time.is_some() {
            "from the line's own timestamp"
        } else if p.wrapper_time.is_some() {
            "from the wrapper's timestamp"
        } else {
            "none in the line: the stream's previous time would be used (arrival time when live)"
        };
        let _ = writeln!(o, "  time      {} ({from})", time::format_rfc3339(p.time));
        let mut event = self.decoder.event(&p);
        let _ = writeln!(
            o,
            "  level     {}",
            event.level.map_or("(none)", |l| l.as_str())
        );
        let _ = writeln!(o, "  message   {:?}", clip(&event.message, 160));
        let _ = writeln!(o, "  template  {}", self.template_of(&p));
        let fields: Vec<String> = match &event.fields {
            payload::Fields::Json(m) => m
                .iter()
                .map(|(k, v)| {
                    let v = payload::value_str(v).unwrap_or_default();
                    format!("{k}={:?}", clip(&v, 60))
                })
                .collect(),
            payload::Fields::Pairs(p) => p
                .iter()
                .map(|(k, v)| format!("{k}={:?}", clip(v, 60)))
                .collect(),
            payload::Fields::None => Vec::new(),
        };
        if !fields.is_empty() {
            let n = fields.len();
            let shown: Vec<String> = fields.into_iter().take(12).collect();
            let more = if n > 12 {
                format!(" … ({} more)", n - 12)
            } else {
                String::new()
            };
            let _ = writeln!(o, "  fields    {}{more}", shown.join(" "));
        }
        if !event.labels.is_empty() {
            let l: Vec<String> = event
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect();
            let _ = writeln!(o, "  labels    {}", l.join(" "));
        }
        let inherited: Vec<String> = event
            .sticky
            .iter()
            .filter(|(k, v)| event.fields.get(k).as_deref() != Some(v.as_str()))
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect();
        if !inherited.is_empty() {
            let _ = writeln!(
                o,
                "  sticky    {} (not in this line: remembered from an earlier line of the stream)",
                inherited.join(" ")
            );
        }
        // Group keys and the path each value came from.
        let mut keys = Vec::new();
        let get = |k: &str| event.get(k);
        for (alias, paths) in &self.set.keys.aliases {
            let found = paths
                .iter()
                .find_map(|p| get(p).filter(|v| !v.is_empty()).map(|v| (p, v)));
            keys.push(match found {
                Some((p, _)) => {
                    let v = resolve_key(&self.set.keys, alias, &get).unwrap_or_default();
                    format!("{alias}={v:?} (via {p})")
                }
                None => format!("{alias}=—"),
            });
        }
        if let Some(w) = resolve_key(&self.set.keys, WORKLOAD_KEY, &get) {
            keys.push(format!("{WORKLOAD_KEY}={w:?} (from the pod name)"));
        }
        let _ = writeln!(o, "  keys      {}", keys.join(" · "));
        let _ = writeln!(o, "  rules");
        let mut quiet = 0;
        for rule in &self.set.rules {
            let cond = &self.set.conditions[rule.cond];
            let literal_pass = self.matcher.literal_candidate(&p.text, rule.cond);
            let checks = crate::matcher::Matcher::explain(cond, &mut event);
            let any_literal = checks
                .iter()
                .any(|c| c.ok && (c.what.starts_with("contains") || c.what.starts_with("regex")));
            if !literal_pass && !any_literal && !only.contains(&rule.id) {
                quiet += 1;
                event.captures.clear();
                continue;
            }
            let matched = literal_pass && checks.iter().all(|c| c.ok);
            if matched {
                let group = if rule.group_by.is_empty() {
                    Some("cluster".to_string())
                } else {
                    rule.group_by
                        .iter()
                        .find_map(|k| resolve_key(&self.set.keys, k, &|k: &str| event.get(k)))
                };
                let group = match group {
                    Some(g) => format!("group {g:?}"),
                    None => format!(
                        "no value for group_by {:?}: {}",
                        rule.group_by,
                        if matches!(rule.detect, Detect::Spread(_) | Detect::Share(_)) {
                            "not counted (ungrouped)"
                        } else {
                            "counted under \"unknown\""
                        }
                    ),
                };
                let _ = writeln!(o, "    MATCH  {}  → {group}", rule.id);
                let _ = writeln!(
                    o,
                    "           {}{}",
                    describe_detector(&rule.detect),
                    if rule.for_ > 0 {
                        format!(", held for {}", crate::rules::duration::Dur(rule.for_))
                    } else {
                        String::new()
                    }
                );
            } else {
                let _ = writeln!(o, "    no     {}", rule.id);
            }
            for c in &checks {
                let _ = writeln!(o, "           {} {}", if c.ok { "✓" } else { "✗" }, c.what);
            }
            if !literal_pass && checks.iter().all(|c| c.ok) {
                let _ = writeln!(
                    o,
                    "           ✗ the literal prefilter did not select this line (a literal is inside an escape or a different case)"
                );
            }
            event.captures.clear();
        }
        if quiet > 0 {
            let _ = writeln!(
                o,
                "    ·      {quiet} other rule{}: none of {} literals occur (name one with --rule ID to see its checks)",
                if quiet == 1 { "" } else { "s" },
                if quiet == 1 { "its" } else { "their" }
            );
        }
        o.push('\n');
        o
    }
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
}
