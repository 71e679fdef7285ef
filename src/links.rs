//! Links from an alert back to the lines behind it — what on-call opens
//! first, and what Loki's own ruler cannot put in an alert
//! (grafana/loki#5844).
//!
//! Every sample keeps where it was read (`detect::Origin`). From a
//! Loki source a notification gets a `query_range` URL that returns those
//! lines: a selector of the samples' streams (labels every stream shares
//! pinned with `=`, the others with `=~` over their values), the rule's
//! literals as line filters (`contains` as `|~` over the alternatives,
//! each `contains_all` as `|=`, each `not_contains` as `!=`), and the
//! alert's time range, first sample to last match (Loki's `end` is
//! exclusive: one nanosecond past it). With `--grafana-url` the same query
//! on a Grafana Explore page. From files, `path:line` of each sample.

use crate::alert::{Links, Notification};
use crate::rules::{Detect, Rule, RuleSet};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Where links point.
#[derive(Debug, Clone, Default)]
pub struct LinkOptions {
    /// The Loki the lines came from (its base URL).
    pub loki_url: Option<String>,
    /// A Grafana to open the lines in (its base URL).
    pub grafana_url: Option<String>,
    /// The UID of Grafana's Loki data source.
    pub grafana_datasource: String,
}

/// Entries a link asks Loki for: enough for an episode's first page.
pub const LINK_LIMIT: u32 = 1000;

/// Makes the links of notifications, with each rule's line filter
/// prepared once.
pub struct Linker {
    opts: LinkOptions,
    filters: HashMap<String, String>,
}

impl Linker {
    /// A linker for the rules of `set`.
    pub fn new(set: &RuleSet, opts: LinkOptions) -> Linker {
        let mut l = Linker {
            opts,
            filters: HashMap::new(),
        };
        l.set_rules(set);
        l
    }

    /// New rules (a reload): new line filters.
    pub fn set_rules(&mut self, set: &RuleSet) {
        self.filters = set
            .rules
            .iter()
            .map(|r| (r.id.clone(), line_filter(set, r)))
            .collect();
    }

    /// Adds the links of `n` from the origins of its samples; a
    /// notification whose samples have none gets none.
    pub fn attach(&self, n: &mut Notification) {
        if n.incident.is_some() || n.origins.iter().all(Option::is_none) {
            return;
        }
        let origins: Vec<&crate::detect::Origin> = n.origins.iter().flatten().collect();
        let mut links = Links {
            lines: origins
                .iter()
                .filter_map(|o| o.line.map(|l| format!("{}:{l}", o.source)))
                .collect(),
            ..Links::default()
        };
        let streams: Vec<&[(String, String)]> =
            origins.iter().filter_map(|o| o.stream.as_deref()).collect();
        if let (Some(sel), false) = (selector(&streams), streams.is_empty()) {
            let filter = self.filters.get(&n.rule).map_or("", String::as_str);
            let query = format!("{sel}{filter}");
            let times = origins.iter().map(|o| o.time);
            let seen = [n.first_seen.as_ref(), n.last_seen.as_ref()];
            let seen = seen.iter().flatten().filter_map(|s| s.ns());
            let all: Vec<i64> = times.chain(seen).collect();
            let (from, to) = (
                all.iter().copied().min().unwrap_or(0),
                all.iter().copied().max().unwrap_or(0).saturating_add(1),
            );
            if let Some(base) = &self.opts.loki_url {
                links.loki = Some(loki_url(base, &query, from, to));
            }
            if let Some(base) = &self.opts.grafana_url {
                links.grafana = Some(grafana_url(
                    base,
                    &self.opts.grafana_datasource,
                    &query,
                    from,
                    to,
                ));
            }
            links.query = Some(query);
        }
        if links != Links::default() {
            n.links = Some(links);
        }
    }
}

/// A LogQL string literal: a raw (backquoted) string when the text holds
/// no backquote, else a double-quoted one with Go's escapes.
pub fn logql_string(s: &str) -> String {
    if !s.contains('`') {
        return format!("`{s}`");
    }
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            '\r' => o.push_str("\\r"),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// The selector of every stream given: each label all of them carry,
/// with `=` when they agree and `=~` over the values when not; labels
/// some lack are left out (the selector may then name more streams: the
/// line filter and time range narrow it). None when no label is shared.
pub fn selector(streams: &[&[(String, String)]]) -> Option<String> {
    let mut values: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in streams {
        let mut names = BTreeSet::new();
        for (k, v) in s.iter() {
            if names.insert(k.as_str()) {
                *counts.entry(k).or_default() += 1;
            }
            values.entry(k).or_default().insert(v);
        }
    }
    let matchers: Vec<String> = values
        .iter()
        .filter(|(k, _)| counts.get(*k) == Some(&streams.len()))
        .map(|(k, vs)| match vs.len() {
            1 => format!(
                "{k}={}",
                logql_string(vs.iter().next().copied().unwrap_or(""))
            ),
            _ => {
                let alts: Vec<String> = vs.iter().map(|v| re_escape(v)).collect();
                format!("{k}=~{}", logql_string(&alts.join("|")))
            }
        })
        .collect();
    (!matchers.is_empty()).then(|| format!("{{{}}}", matchers.join(", ")))
}

/// The rule's literals as LogQL line filters (empty for rules without
/// literals, such as novelty). A literal also matches JSON-escaped, as
/// sigwatch's matcher does, so a literal with a quote or a backslash is
/// looked for in both spellings.
pub fn line_filter(set: &RuleSet, rule: &Rule) -> String {
    let mut conds = vec![rule.cond];
    if let Detect::Sequence { then, .. } = &rule.detect {
        conds.push(*then);
    }
    let conds: Vec<&crate::rules::Condition> = conds
        .iter()
        .filter_map(|c| set.conditions.get(*c))
        .collect();
    let spellings = |lit: &str| -> Vec<String> {
        let escaped = lit.replace('\\', "\\\\").replace('"', "\\\"");
        let mut v = vec![re_escape(lit)];
        if escaped != lit {
            v.push(re_escape(&escaped));
        }
        v
    };
    let mut o = String::new();
    // Any step's `contains` may be what a line matched.
    let any: Vec<String> = conds
        .iter()
        .flat_map(|c| c.any.iter())
        .flat_map(|l| spellings(l))
        .collect();
    let all_steps_have_any = conds.iter().all(|c| !c.any.is_empty());
    if all_steps_have_any && !any.is_empty() {
        match (any.len(), conds.iter().map(|c| c.any.len()).sum::<usize>()) {
            (1, _) => {
                let lit = conds.iter().flat_map(|c| c.any.iter()).next();
                o.push_str(&format!(
                    " |= {}",
                    logql_string(lit.map_or("", String::as_str))
                ));
            }
            _ => o.push_str(&format!(" |~ {}", logql_string(&any.join("|")))),
        }
    }
    // `contains_all` and `not_contains` hold for every line of a
    // one-step rule only.
    if let [c] = conds.as_slice() {
        for lit in &c.all {
            match spellings(lit).as_slice() {
                [_] => o.push_str(&format!(" |= {}", logql_string(lit))),
                alts => o.push_str(&format!(" |~ {}", logql_string(&alts.join("|")))),
            }
        }
        for lit in &c.none {
            o.push_str(&format!(" != {}", logql_string(lit)));
        }
    }
    o
}

/// A `query_range` URL over `[from, to)` (ns), forward.
pub fn loki_url(base: &str, query: &str, from: i64, to: i64) -> String {
    let mut u = format!("{}/loki/api/v1/query_range?", base.trim_end_matches('/'));
    let params = [
        ("query", query.to_string()),
        ("start", from.to_string()),
        ("end", to.to_string()),
        ("limit", LINK_LIMIT.to_string()),
        ("direction", "forward".to_string()),
    ];
    let pairs: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect();
    u.push_str(&pairs.join("&"));
    u
}

/// A Grafana Explore URL (the `panes` form of Grafana 10 and later) for
/// `query` on data source `uid` over `[from, to)` (ns, shown in ms,
/// rounded outwards).
pub fn grafana_url(base: &str, uid: &str, query: &str, from: i64, to: i64) -> String {
    let ms_from = from.div_euclid(1_000_000);
    let ms_to = (to + 999_999).div_euclid(1_000_000);
    let panes = serde_json::json!({
        "sigwatch": {
            "datasource": uid,
            "queries": [{
                "refId": "A",
                "expr": query,
                "queryType": "range",
                "datasource": {"type": "loki", "uid": uid},
            }],
            "range": {"from": ms_from.to_string(), "to": ms_to.to_string()},
        }
    });
    format!(
        "{}/explore?schemaVersion=1&panes={}&orgId=1",
        base.trim_end_matches('/'),
        encode(&panes.to_string())
    )
}

/// Escapes RE2's metacharacters (Loki's regexes are Go's), and only those,
/// so the query stays readable.
fn re_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            o.push('\\');
        }
        o.push(c);
    }
    o
}

/// Percent-encodes a query parameter's value (RFC 3986 unreserved kept).
fn encode(s: &str) -> String {
    let mut o = String::with_capacity(s.len() * 3 / 2);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                o.push(b as char)
            }
            _ => o.push_str(&format!("%{b:02X}")),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn one_stream_is_pinned_several_are_matched_by_their_values() {
        let a = pairs(&[("namespace", "media"), ("pod", "egress-1")]);
        let b = pairs(&[("namespace", "media"), ("pod", "egress-2.x"), ("node", "n")]);
        assert_eq!(
            selector(&[&a]).as_deref(),
            Some("{namespace=`media`, pod=`egress-1`}")
        );
        assert_eq!(
            selector(&[&a, &b]).as_deref(),
            Some(r"{namespace=`media`, pod=~`egress-1|egress-2\.x`}"),
            "a label one stream lacks is left out; values are regex-escaped"
        );
        assert_eq!(
            selector(&[&pairs(&[("a", "1")]), &pairs(&[("b", "2")])]),
            None
        );
    }

    #[test]
    fn strings_are_raw_unless_they_hold_a_backquote() {
        assert_eq!(logql_string(r#"say "hi" \ there"#), r#"`say "hi" \ there`"#);
        assert_eq!(logql_string("a`b\"c\\"), r#""a`b\"c\\""#);
    }

    fn set(yaml: &str) -> RuleSet {
        crate::rules::compile(&[("t.yaml".to_string(), yaml.to_string())]).unwrap()
    }

    #[test]
    fn line_filters_follow_the_rule_literals() {
        let s = set(r#"
rules:
  - id: one
    title: One
    severity: warning
    match: { contains: ["No space left"] }
    detect: { count: { threshold: 1, window: 1m } }
  - id: alts
    title: Alts
    severity: warning
    match: { contains: ["EGRESS_FAILED", "probeType=\"Liveness\""], contains_all: ["egress"], not_contains: ["retrying"] }
    detect: { count: { threshold: 1, window: 1m } }
"#);
        assert_eq!(line_filter(&s, &s.rules[0]), " |= `No space left`");
        assert_eq!(
            line_filter(&s, &s.rules[1]),
            r#" |~ `EGRESS_FAILED|probeType="Liveness"|probeType=\\"Liveness\\"` |= `egress` != `retrying`"#,
            "a quoted literal is looked for JSON-escaped too"
        );
    }

    #[test]
    fn urls_carry_the_query_and_the_exclusive_end() {
        let u = loki_url("http://loki:3100/", "{a=`1`} |= `x y`", 5, 10);
        assert_eq!(
            u,
            "http://loki:3100/loki/api/v1/query_range?query=%7Ba%3D%601%60%7D%20%7C%3D%20%60x%20y%60&start=5&end=10&limit=1000&direction=forward"
        );
        let g = grafana_url(
            "https://grafana.example",
            "P8E80F9AEF21F6940",
            "{a=`1`}",
            1_500_000,
            2_000_001,
        );
        assert!(
            g.starts_with("https://grafana.example/explore?schemaVersion=1&panes="),
            "{g}"
        );
        assert!(
            g.contains("P8E80F9AEF21F6940")
                && g.contains("%22from%22%3A%221%22")
                && g.contains("%22to%22%3A%223%22"),
            "{g}"
        );
    }
}
