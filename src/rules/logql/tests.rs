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

/// The cases of one rule test file, as they are built.
struct Cases<'a> {
    id: &'a str,
    /// The rule's `for`, in nanoseconds.
    hold: i64,
    /// Its `evaluate_every` (0: at every instant); the cases start on a
    /// whole minute, so on its grid.
    every: i64,
    /// The field or label that names the group, if the rule groups.
    key: Option<&'a str>,
    base: Shape,
    /// The lines with one filter broken, and what was broken.
    neg: Option<(Shape, String)>,
    out: Vec<Value>,
}

impl Cases<'_> {
    /// When a condition true from `t` (after the start) fires: at the
    /// first evaluation at or after it, plus the `for`.
    fn fires(&self, t: i64) -> i64 {
        let first = if self.every > 0 {
            (t + self.every - 1).div_euclid(self.every) * self.every
        } else {
            t
        };
        first + self.hold
    }

    fn case(&mut self, name: String, inputs: Vec<Value>, end: i64, tol: i64, expect: Vec<Value>) {
        let mut m = Mapping::new();
        m.insert("name".into(), name.into());
        m.insert("input".into(), Value::Sequence(inputs));
        m.insert("end".into(), at(end).into());
        m.insert("tolerance".into(), dur(tol.max(30 * SEC)).into());
        m.insert("expect".into(), Value::Sequence(expect));
        self.out.push(Value::Mapping(m));
    }

    fn expect(&self, group: &str, at_ns: i64) -> Value {
        let mut m = Mapping::new();
        m.insert("rule".into(), self.id.into());
        m.insert("group".into(), group.into());
        m.insert("at".into(), at(at_ns).into());
        Value::Mapping(m)
    }

    /// One stream of matching lines in group `g1`, `lines` of them within
    /// the window, that fires (count, share); then the broken lines, that
    /// do not.
    fn steady(&mut self, lines: u64, window_ns: i64, group: &str, name: String) -> Option<()> {
        let step = (window_ns / (2 * lines as i64)).max(SEC / 1000);
        let fire = self.fires((lines as i64 - 1) * step);
        let n = (fire / step) as u64 + 2;
        if n > MAX_LINES {
            return None;
        }
        let end = (n as i64 - 1) * step;
        let tol = window_ns / 60 + 2 * SEC;
        let s = with_key(&self.base, self.key, "g1");
        let expect = vec![self.expect(group, fire)];
        self.case(name, vec![input(&s, 0, step, n, "s1")], end, tol, expect);
        if let Some((b, what)) = self.neg.clone() {
            let s = with_key(&b, self.key, "g1");
            self.case(what, vec![input(&s, 0, step, n, "s1")], end, tol, vec![]);
        }
        Some(())
    }

    /// `groups` streams, one per group, matching at once: they fire; the
    /// broken lines do not.
    fn spread(&mut self, groups: u64, window_ns: i64, partition: Option<&str>) -> Option<()> {
        let every = (window_ns / 2).max(1);
        let fire = self.fires((groups as i64 - 1) * SEC);
        let n = (fire / every) as u64 + 2;
        if groups > 200 || n * groups > MAX_LINES {
            return None;
        }
        let key = self.key;
        let feed = |s: &Shape| -> Vec<Value> {
            (0..groups)
                .map(|g| {
                    let k = format!("g{}", g + 1);
                    let mut s = with_key(s, key, &k);
                    if let Some(p) = partition {
                        s = with_key(&s, Some(p), "p1");
                    }
                    input(&s, g as i64 * SEC, every, n, &k)
                })
                .collect()
        };
        let group = if partition.is_some() { "p1" } else { "cluster" };
        let end = (n as i64 - 1) * every + groups as i64 * SEC;
        let tol = window_ns / 60 + 2 * SEC;
        let inputs = feed(&self.base);
        let expect = vec![self.expect(group, fire)];
        self.case(
            format!("{groups} groups matching at once fire"),
            inputs,
            end,
            tol,
            expect,
        );
        if let Some((b, what)) = self.neg.clone() {
            let inputs = feed(&b);
            self.case(what, inputs, end, tol, vec![]);
        }
        Some(())
    }

    /// One matching line and then silence fires; lines that keep coming
    /// do not.
    fn absent(&mut self, for_ns: i64) {
        let fire = self.fires(for_ns);
        let end = fire + for_ns / 2 + 10 * SEC;
        let tol = for_ns / 60 + 6 * SEC;
        let once = vec![input(&self.base, 0, SEC, 1, "s1")];
        let expect = vec![self.expect("cluster", fire)];
        let name = format!("no matching line for {} after one fires", dur(for_ns));
        self.case(name, once, end, tol, expect);
        let every = (for_ns / 3).max(SEC / 1000);
        let n = (end / every) as u64 + 1;
        if n <= MAX_LINES {
            let steady = vec![input(&self.base, 0, every, n, "s1")];
            let name = "matching lines that keep coming do not fire".to_string();
            self.case(name, steady, end, tol, vec![]);
        }
    }
}

/// A rule test file for an imported rule, or None when no line can be
/// built from its filters.
pub fn rule_test(
    id: &str,
    t: &Translation,
    (hold, every): (i64, i64),
    rules_path: &str,
) -> Option<String> {
    let base = shape(t)?;
    if t.group_by.first().is_some_and(|g| g == "level") {
        return None;
    }
    let key = t.group_by.first().map(String::as_str);
    let neg = broken(t, &base);
    let mut c = Cases {
        id,
        hold,
        every,
        key,
        base,
        neg,
        out: Vec::new(),
    };
    match &t.kind {
        Kind::Count {
            threshold,
            window_ns,
        } => {
            let group = if key.is_some() { "g1" } else { "cluster" };
            let name = format!(
                "{threshold} matching line(s) within {} fire",
                dur(*window_ns)
            );
            c.steady(*threshold, *window_ns, group, name)?;
        }
        Kind::Spread {
            groups,
            window_ns,
            partition,
            ..
        } => c.spread(*groups, *window_ns, partition.as_deref())?,
        Kind::Share {
            window_ns,
            min_total,
            ..
        } => {
            let name = "one group holding every matching line fires".to_string();
            c.steady(*min_total, *window_ns, "g1", name)?;
        }
        Kind::Absent { for_ns } => c.absent(*for_ns),
    }
    let mut top = Mapping::new();
    top.insert("rules".into(), Value::Sequence(vec![rules_path.into()]));
    top.insert("tests".into(), Value::Sequence(c.out));
    let body = serde_yaml_ng::to_string(&Value::Mapping(top)).ok()?;
    Some(format!(
        "# Built by `sigwatch import loki-rules` from the filter strings of {id}.\n{body}"
    ))
}
