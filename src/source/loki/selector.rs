//! Which queries name a shard's streams and no others (or few). A shard
//! that asks Loki for every stream of its queries and drops the others'
//! downloads N times what it needs; instead its queries get one more label
//! matcher, `LABEL=~"v1|v2|…"`, over the values of the streams it owns
//! (from the series API), split into batches short enough for a URL that
//! gateways accept. The label is the one whose values select the fewest
//! streams beyond the owned ones; what is still over-selected is dropped on
//! arrival and counted.

use super::super::shard::Shard;
use std::collections::{BTreeMap, BTreeSet};

/// A stream's labels, sorted by name.
pub type Labels = Vec<(String, String)>;

/// Longest `query` parameter, URL-encoded, a narrowed query may have: under
/// the 8 KiB request line nginx (Loki's usual gateway) accepts by default,
/// with room for the other parameters.
pub const MAX_QUERY_URL_BYTES: usize = 6000;

/// Most queries one query may be split into before the shard falls back to
/// reading it whole: each is a request per poll (and a tail connection in
/// tail mode, of which Loki allows 10 per tenant by default).
pub const MAX_BATCHES: usize = 16;

/// A query split at its stream selector: `{…}` and what follows (the
/// pipeline). None when it does not start with a selector.
pub fn split(query: &str) -> Option<(&str, &str)> {
    let q = query.trim_start();
    let body = q.strip_prefix('{')?;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if c == '\\' => escaped = true,
            Some(open) if c == open => quote = None,
            Some(_) => {}
            None if c == '"' || c == '`' => quote = Some(c),
            None if c == '}' => return Some((&body[..i], &body[i + 1..])),
            None => {}
        }
    }
    None
}

/// The stream selector of a query (`{…}`, what the series API takes).
pub fn stream_selector(query: &str) -> Option<String> {
    split(query).map(|(inner, _)| format!("{{{inner}}}"))
}

/// `query` with one more matcher, `label=~"regex"`, in its selector.
pub fn with_matcher(query: &str, label: &str, regex: &str) -> Option<String> {
    let (inner, rest) = split(query)?;
    let value = if regex.contains('`') {
        format!("\"{}\"", regex.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        format!("`{regex}`")
    };
    let sep = if inner.trim().is_empty() { "" } else { ", " };
    Some(format!(
        "{{{}{sep}{label}=~{value}}}{rest}",
        inner.trim_end()
    ))
}

/// A regex (RE2, anchored by Loki) matching exactly these values.
pub fn alternation<'a>(values: impl IntoIterator<Item = &'a str>) -> String {
    let escape = |v: &str| {
        let mut out = String::with_capacity(v.len());
        for c in v.chars() {
            if "\\.+*?()|[]{}^$".contains(c) {
                out.push('\\');
            }
            out.push(c);
        }
        out
    };
    values.into_iter().map(escape).collect::<Vec<_>>().join("|")
}

/// How long `query` is as a URL query parameter.
fn url_len(query: &str) -> usize {
    let mut u = match reqwest::Url::parse("http://l/") {
        Ok(u) => u,
        Err(_) => return query.len() * 3,
    };
    u.query_pairs_mut().append_pair("query", query);
    u.as_str().len() - "http://l/?query=".len()
}

/// `query` narrowed to streams whose `label` is one of `values`, in as few
/// queries as fit [`MAX_QUERY_URL_BYTES`] each (values in sorted order).
pub fn batches(query: &str, label: &str, values: &BTreeSet<&str>) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let make = |vals: &[&str]| with_matcher(query, label, &alternation(vals.iter().copied()));
    for v in values {
        current.push(v);
        let q = make(&current).ok_or_else(|| format!("{query:?} has no stream selector"))?;
        if url_len(&q) > MAX_QUERY_URL_BYTES {
            current.pop();
            if current.is_empty() {
                return Err(format!(
                    "the value {v:?} of {label} alone makes a query longer than {MAX_QUERY_URL_BYTES} bytes"
                ));
            }
            out.extend(make(&current));
            current = vec![v];
        }
    }
    if !current.is_empty() {
        out.extend(make(&current));
    }
    if out.len() > MAX_BATCHES {
        return Err(format!(
            "naming this shard's streams takes {} queries (more than {MAX_BATCHES})",
            out.len()
        ));
    }
    Ok(out)
}

/// How a shard reads one query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The queries to ask (none: the shard owns no stream of it).
    pub queries: Vec<String>,
    /// The label they narrow by.
    pub label: Option<String>,
    /// The streams the shard owns (their labels).
    pub owned: Vec<Labels>,
    /// How many streams the queries select (owned ones included).
    pub selected: usize,
}

/// The plan for `query` in `shard`, given the streams the series API
/// listed; Err says why no narrowing selector can be made (the shard then
/// reads the query whole).
pub fn plan(query: &str, shard: &Shard, series: &[Labels]) -> Result<Plan, String> {
    if split(query).is_none() {
        return Err(format!("{query:?} does not start with a stream selector"));
    }
    let owned: Vec<Labels> = series.iter().filter(|s| shard.owns(s)).cloned().collect();
    if owned.is_empty() {
        return Ok(Plan {
            queries: Vec::new(),
            label: None,
            owned,
            selected: 0,
        });
    }
    let candidates: BTreeSet<&str> = owned
        .iter()
        .flat_map(|s| s.iter().map(|(k, _)| k.as_str()))
        .filter(|k| shard.by.is_empty() || shard.by.iter().any(|b| b == k))
        .collect();
    // (streams selected, selector bytes, label, values)
    let mut best: Option<(usize, usize, &str, BTreeSet<&str>)> = None;
    for label in candidates {
        let values: Option<BTreeSet<&str>> = owned.iter().map(|s| value(s, label)).collect();
        let Some(values) = values else {
            continue; // not on every owned stream
        };
        let selected = series
            .iter()
            .filter(|s| value(s, label).is_some_and(|v| values.contains(v)))
            .count();
        let bytes: usize = values.iter().map(|v| v.len() + 1).sum();
        if best.as_ref().is_none_or(|b| (selected, bytes) < (b.0, b.1)) {
            best = Some((selected, bytes, label, values));
        }
    }
    let Some((selected, _, label, values)) = best else {
        return Err("no stream label is on every stream this shard owns".into());
    };
    Ok(Plan {
        queries: batches(query, label, &values)?,
        label: Some(label.to_string()),
        owned,
        selected,
    })
}

fn value<'a>(labels: &'a Labels, name: &str) -> Option<&'a str> {
    labels
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A stream's labels from a series answer's map.
pub fn labels_of(map: BTreeMap<String, String>) -> Labels {
    map.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::labels as l;

    #[test]
    fn selectors_split_past_quoted_braces_and_take_a_matcher() {
        assert_eq!(
            split(r#"{app="a}b", x=`}`} |= "}" "#),
            Some((r#"app="a}b", x=`}`"#, r#" |= "}" "#))
        );
        assert_eq!(split(r#"  {a="\"}"}"#), Some((r#"a="\"}""#, "")));
        assert_eq!(split("no selector"), None);
        assert_eq!(split(r#"{a="b""#), None);
        assert_eq!(
            with_matcher(r#"{namespace="media"} |= "No space""#, "pod", "a|b").as_deref(),
            Some(r#"{namespace="media", pod=~`a|b`} |= "No space""#)
        );
        assert_eq!(
            with_matcher("{}", "pod", "a").as_deref(),
            Some("{pod=~`a`}")
        );
        assert_eq!(
            with_matcher("{a=\"b\"}", "pod", "x`y\\.").as_deref(),
            Some(r#"{a="b", pod=~"x`y\\."}"#)
        );
        assert_eq!(
            stream_selector(r#"{a="b"} |= "x""#).as_deref(),
            Some(r#"{a="b"}"#)
        );
    }

    #[test]
    fn alternations_match_exactly_their_values() {
        let values = ["egress-1", "a.b", "c|d", "(x)"];
        let re = regex::Regex::new(&format!("^(?:{})$", alternation(values))).unwrap();
        for v in values {
            assert!(re.is_match(v), "{v}");
        }
        for v in ["egress-10", "aXb", "c", "x", "egress"] {
            assert!(!re.is_match(v), "{v}");
        }
    }

    #[test]
    fn long_value_lists_split_into_batches_that_fit() {
        let names: Vec<String> = (0..400).map(|i| format!("pod-{i:04}-abcdefgh")).collect();
        let values: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        let qs = batches(r#"{namespace="media"}"#, "pod", &values).unwrap();
        assert!(qs.len() > 1);
        assert!(qs.iter().all(|q| url_len(q) <= MAX_QUERY_URL_BYTES));
        // Every value in exactly one batch.
        let joined = qs.join("\n");
        for n in &names {
            assert_eq!(
                joined.matches(&format!("{n}`")).count() + joined.matches(&format!("{n}|")).count(),
                1,
                "{n}"
            );
        }
        let many: Vec<String> = (0..5000)
            .map(|i| format!("pod-{i:05}-abcdefghijkl"))
            .collect();
        let values: BTreeSet<&str> = many.iter().map(String::as_str).collect();
        assert!(batches("{}", "pod", &values)
            .unwrap_err()
            .contains("queries"));
    }

    #[test]
    fn the_plan_narrows_by_the_label_that_selects_least() {
        let series: Vec<Labels> = (0..8)
            .flat_map(|p| {
                ["server", "sidecar"].map(|c| {
                    l(&[
                        ("container", c),
                        ("namespace", "livekit"),
                        ("pod", &format!("lk-{p}")),
                    ])
                })
            })
            .collect();
        let mut shard = Shard::parse("1/4").unwrap();
        shard.by = vec!["pod".into()];
        let p = plan(r#"{namespace="livekit"}"#, &shard, &series).unwrap();
        assert_eq!(p.label.as_deref(), Some("pod"));
        assert_eq!(
            p.selected,
            p.owned.len(),
            "by pod: exactly the owned streams"
        );
        assert_eq!(p.queries.len(), 1);
        for s in &p.owned {
            assert!(shard.owns(s));
            assert!(p.queries[0].contains(value(s, "pod").unwrap()));
        }
        // Hashing every label: the pod still selects best, a little more
        // than the owned streams (the other container of a pod).
        let all = Shard::parse("0/2").unwrap();
        let p = plan(r#"{namespace="livekit"}"#, &all, &series).unwrap();
        assert_eq!(p.label.as_deref(), Some("pod"));
        assert!(p.selected >= p.owned.len() && p.selected <= series.len());
        // No owned stream: nothing to ask.
        let none = plan(r#"{namespace="livekit"}"#, &shard, &[]).unwrap();
        assert!(none.queries.is_empty());
        // A label missing from some owned stream cannot narrow.
        let odd = vec![l(&[("a", "1")]), l(&[("b", "2")])];
        let mut by_a = Shard::parse("0/1").unwrap();
        by_a.by = vec!["a".into()];
        assert!(plan("{x=\"y\"}", &by_a, &odd).is_err());
        assert!(plan("not a query", &by_a, &odd).is_err());
    }
}
