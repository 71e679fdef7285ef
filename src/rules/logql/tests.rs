//! Rule tests for imported rules, built from each rule's own filter
//! strings: lines that hold what the LogQL filters ask for must fire, and
//! the same lines with one filter broken must not. A rule whose filters no
//! line can be built from here (a free regex, a label regex) gets no test,
//! rather than a test that proves nothing.

use super::dur;
use super::translate::{Kind, Translation};
use crate::rules::model::FieldCond;
use serde_yaml_ng::{Mapping, Value};
use std::collections::BTreeMap;

/// The lines a test feeds: text pieces, stream labels, line fields.
#[derive(Clone)]
struct Shape {
    pieces: Vec<String>,
    labels: BTreeMap<String, String>,
    fields: BTreeMap<String, serde_json::Value>,
    json: bool,
}

impl Shape {
    fn line(&self) -> String {
        let msg = if self.pieces.is_empty() {
            "sigwatch import test line".to_string()
        } else {
            self.pieces.join(" ")
        };
        if !self.json {
            return msg;
        }
        let mut o = serde_json::Map::new();
        o.insert("ts".into(), serde_json::Value::from(0));
        o.insert("msg".into(), msg.into());
        for (k, v) in &self.fields {
            o.insert(k.clone(), v.clone());
        }
        // The instant goes where `ts` stands.
        serde_json::Value::Object(o)
            .to_string()
            .replacen("\"ts\":0", "\"ts\":{{ts}}", 1)
    }
}

fn shape(t: &Translation) -> Option<Shape> {
    let c = &t.cond;
    let mut pieces: Vec<String> = c.contains_all.clone();
    pieces.extend(c.contains.first().cloned());
    for lits in &c.regex_literals {
        pieces.push(lits.first()?.clone());
    }
    if c.regex_literals.len() != c.regex.len() {
        return None;
    }
    let mut labels = BTreeMap::new();
    for (k, v) in &c.labels {
        match v {
            FieldCond::Equals(s) => {
                labels.insert(k.clone(), s.clone());
            }
            FieldCond::OneOf(l) => {
                labels.insert(k.clone(), l.first()?.clone());
            }
            FieldCond::NotEquals(s) => {
                labels.insert(k.clone(), format!("{s}-other"));
            }
            FieldCond::Exists(true) => {
                labels.insert(k.clone(), "x".into());
            }
            FieldCond::Exists(false) => {}
            _ => return None,
        }
    }
    let mut fields = BTreeMap::new();
    for (k, v) in &c.fields {
        let val: serde_json::Value = match v {
            FieldCond::Equals(s) => s.as_str().into(),
            FieldCond::OneOf(l) => l.first()?.as_str().into(),
            FieldCond::NotEquals(s) => format!("{s}-other").into(),
            FieldCond::Exists(true) => "x".into(),
            FieldCond::Exists(false) => continue,
            FieldCond::Number(b) => {
                let x =
                    b.ge.or(b.gt.map(|g| g + 1.0))
                        .or(b.le)
                        .or(b.lt.map(|l| l - 1.0))
                        .unwrap_or(0.0);
                if !b.holds(x) {
                    return None;
                }
                serde_json::Number::from_f64(x)?.into()
            }
            _ => return None,
        };
        fields.insert(k.clone(), val);
    }
    let s = Shape {
        pieces,
        labels,
        json: !fields.is_empty() || t.parsed,
        fields,
    };
    let line = s.line();
    if c.not_contains.iter().any(|n| line.contains(n.as_str())) {
        return None;
    }
    for r in c.not_regex.iter().chain(&c.regex) {
        regex::Regex::new(r).ok()?;
    }
    if c.not_regex
        .iter()
        .any(|r| regex::Regex::new(r).is_ok_and(|r| r.is_match(&line)))
    {
        return None;
    }
    Some(s)
}

/// The same lines with one filter broken, and what was broken.
fn broken(t: &Translation, s: &Shape) -> Option<(Shape, String)> {
    let c = &t.cond;
    let mut b = s.clone();
    if let Some(n) = c.not_contains.first() {
        b.pieces.push(n.clone());
        return Some((b, format!("a line holding {n:?} is left out")));
    }
    if let Some(first) = c.contains_all.first() {
        b.pieces.retain(|p| p != first);
        return Some((b, format!("a line without {first:?} is left out")));
    }
    if !c.contains.is_empty() {
        b.pieces.retain(|p| !c.contains.contains(p));
        return Some((b, "a line with none of the alternatives is left out".into()));
    }
    if let Some(first) = c.regex_literals.iter().find_map(|l| l.first()) {
        b.pieces.retain(|p| p != first);
        return Some((b, format!("a line without {first:?} is left out")));
    }
    for (k, v) in &c.labels {
        if let FieldCond::Equals(x) = v {
            b.labels.insert(k.clone(), format!("{x}-other"));
            return Some((b, format!("a stream with another {k} is left out")));
        }
    }
    for (k, v) in &c.fields {
        if let FieldCond::Equals(x) = v {
            b.fields.insert(k.clone(), format!("{x}-other").into());
            return Some((b, format!("a line with another {k} is left out")));
        }
    }
    None
}

fn at(ns: i64) -> String {
    format!("+{}", dur(ns))
}

fn input(s: &Shape, at_ns: i64, every_ns: i64, repeat: u64, stream: &str) -> Value {
    let mut m = Mapping::new();
    m.insert("at".into(), at(at_ns).into());
    if repeat > 1 {
        m.insert("every".into(), dur(every_ns).into());
        m.insert("repeat".into(), repeat.into());
    }
    m.insert("stream".into(), stream.into());
    if !s.labels.is_empty() {
        m.insert(
            "labels".into(),
            Value::Mapping(
                s.labels
                    .iter()
                    .map(|(k, v)| (Value::from(k.as_str()), Value::from(v.as_str())))
                    .collect(),
            ),
        );
    }
    m.insert("line".into(), s.line().into());
    Value::Mapping(m)
}

/// Sets the group's value on a shape: a stream label or a field.
fn with_key(s: &Shape, path: Option<&str>, value: &str) -> Shape {
    let mut s = s.clone();
    match path {
        Some(p) if p.starts_with("labels.") => {
            s.labels
                .insert(p["labels.".len()..].to_string(), value.into());
        }
        Some(p) => {
            s.fields.insert(p.to_string(), value.into());
            s.json = true;
        }
        None => {}
    }
    s
}

const SEC: i64 = 1_000_000_000;
const MAX_LINES: u64 = 5000;

/// A rule test file for an imported rule, or None when no line can be
/// built from its filters.
pub fn rule_test(
    id: &str,
    t: &Translation,
    for_: Option<&str>,
    rules_path: &str,
) -> Option<String> {
    let hold = for_
        .and_then(|f| crate::duration::Dur::parse(f).ok())
        .map(|d| d.ns())
        .unwrap_or(0);
    let base = shape(t)?;
    if t.group_by.first().is_some_and(|g| g == "level") {
        return None;
    }
    let key = t.group_by.first().map(String::as_str);
    let mut cases = Vec::new();
    let mut case = |name: String, inputs: Vec<Value>, end: i64, tol: i64, expect: Vec<Value>| {
        let mut m = Mapping::new();
        m.insert("name".into(), name.into());
        m.insert("input".into(), Value::Sequence(inputs));
        m.insert("end".into(), at(end).into());
        m.insert("tolerance".into(), dur(tol.max(30 * SEC)).into());
        m.insert("expect".into(), Value::Sequence(expect));
        cases.push(Value::Mapping(m));
    };
    let expect = |group: &str, at_ns: i64| {
        let mut m = Mapping::new();
        m.insert("rule".into(), id.into());
        m.insert("group".into(), group.into());
        m.insert("at".into(), at(at_ns).into());
        Value::Mapping(m)
    };
    let neg = broken(t, &base);
    match &t.kind {
        Kind::Count {
            threshold,
            window_ns,
        } => {
            let step = (window_ns / (2 * *threshold as i64)).max(SEC / 1000);
            let n = threshold + (hold / step) as u64 + 2;
            if n > MAX_LINES {
                return None;
            }
            let s = with_key(&base, key, "g1");
            let group = if key.is_some() { "g1" } else { "cluster" };
            let fire = (*threshold as i64 - 1) * step + hold;
            let end = (n as i64 - 1) * step;
            let tol = window_ns / 60 + 2 * SEC;
            case(
                format!(
                    "{threshold} matching line(s) within {} fire",
                    dur(*window_ns)
                ),
                vec![input(&s, 0, step, n, "s1")],
                end,
                tol,
                vec![expect(group, fire)],
            );
            if let Some((b, what)) = &neg {
                case(
                    what.clone(),
                    vec![input(&with_key(b, key, "g1"), 0, step, n, "s1")],
                    end,
                    tol,
                    vec![],
                );
            }
        }
        Kind::Spread {
            groups,
            window_ns,
            partition,
            ..
        } => {
            let every = window_ns / 2;
            let n = (hold / every.max(1)) as u64 + 2;
            if *groups > 200 || n * groups > MAX_LINES {
                return None;
            }
            let part = |s: &Shape| match partition {
                Some(p) => with_key(s, Some(p), "p1"),
                None => s.clone(),
            };
            let feed = |s: &Shape| -> Vec<Value> {
                (0..*groups)
                    .map(|g| {
                        let k = format!("g{}", g + 1);
                        input(&part(&with_key(s, key, &k)), g as i64 * SEC, every, n, &k)
                    })
                    .collect()
            };
            let group = if partition.is_some() { "p1" } else { "cluster" };
            let fire = (*groups as i64 - 1) * SEC + hold;
            let end = (n as i64 - 1) * every + *groups as i64 * SEC;
            let tol = window_ns / 60 + 2 * SEC;
            case(
                format!("{groups} groups matching at once fire"),
                feed(&base),
                end,
                tol,
                vec![expect(group, fire)],
            );
            if let Some((b, what)) = &neg {
                case(what.clone(), feed(b), end, tol, vec![]);
            }
        }
        Kind::Share {
            window_ns,
            min_total,
            ..
        } => {
            let step = (window_ns / (2 * *min_total as i64)).max(SEC / 1000);
            let n = min_total + (hold / step) as u64 + 2;
            if n > MAX_LINES {
                return None;
            }
            let fire = (*min_total as i64 - 1) * step + hold;
            let end = (n as i64 - 1) * step;
            let tol = window_ns / 60 + 2 * SEC;
            case(
                "one group holding every matching line fires".into(),
                vec![input(&with_key(&base, key, "g1"), 0, step, n, "s1")],
                end,
                tol,
                vec![expect("g1", fire)],
            );
            if let Some((b, what)) = &neg {
                case(
                    what.clone(),
                    vec![input(&with_key(b, key, "g1"), 0, step, n, "s1")],
                    end,
                    tol,
                    vec![],
                );
            }
        }
        Kind::Absent { for_ns } => {
            let fire = for_ns + hold;
            let end = fire + for_ns / 2 + 10 * SEC;
            let tol = for_ns / 60 + 6 * SEC;
            case(
                format!("no matching line for {} after one fires", dur(*for_ns)),
                vec![input(&base, 0, SEC, 1, "s1")],
                end,
                tol,
                vec![expect("cluster", fire)],
            );
            let every = (for_ns / 3).max(SEC / 1000);
            let n = (end / every) as u64 + 1;
            if n <= MAX_LINES {
                case(
                    "matching lines that keep coming do not fire".into(),
                    vec![input(&base, 0, every, n, "s1")],
                    end,
                    tol,
                    vec![],
                );
            }
        }
    }
    let mut top = Mapping::new();
    top.insert("rules".into(), Value::Sequence(vec![rules_path.into()]));
    top.insert("tests".into(), Value::Sequence(cases));
    let body = serde_yaml_ng::to_string(&Value::Mapping(top)).ok()?;
    Some(format!(
        "# Built by `sigwatch import loki-rules` from the filter strings of {id}.\n{body}"
    ))
}
