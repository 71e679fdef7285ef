//! A LogQL log query (stream selector and pipeline) as a match block: label
//! matchers become label conditions, line filters literals and regexes,
//! parser stages make the line's fields available and label filters become
//! field conditions, each with Loki's meaning (a missing label is empty,
//! label regexes are anchored). What has no exact counterpart is a
//! [`Skip`] naming the stage.

use super::ast::{CmpOp, LabelExpr, LabelValue, LineOp, LineValue, LogExpr, MatchOp, Span, Stage};
use crate::decode::severity::Level;
use crate::rules::model::{FieldCond, NumBounds};
use std::collections::{BTreeMap, BTreeSet};

/// Why an expression was not translated, and the part of it at fault.
#[derive(Debug, Clone, PartialEq)]
pub struct Skip {
    /// The reason, in a sentence.
    pub reason: String,
    /// The text of the expression that could not be carried.
    pub part: String,
}

/// A match block, as the translator builds it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cond {
    /// Any of these (the first `or` chain of `|=`).
    pub contains: Vec<String>,
    /// All of these.
    pub contains_all: Vec<String>,
    /// None of these.
    pub not_contains: Vec<String>,
    /// Every regex matches.
    pub regex: Vec<String>,
    /// No regex matches.
    pub not_regex: Vec<String>,
    /// Field conditions.
    pub fields: BTreeMap<String, FieldCond>,
    /// Label conditions.
    pub labels: BTreeMap<String, FieldCond>,
    /// For each regex, the literal alternatives it was built from (empty
    /// for a regex written as one): what a test line may hold.
    pub regex_literals: Vec<Vec<String>>,
}

/// A log query read: its match block and what the metric around it needs.
#[derive(Debug, Clone, PartialEq)]
pub struct LogMatch {
    /// The match block.
    pub cond: Cond,
    /// Labels fixed by the selector.
    pub constants: BTreeMap<String, String>,
    /// Whether a parser stage ran.
    pub parsed: bool,
    /// Notes on the reading.
    pub notes: Vec<String>,
    /// The `regexp`/`pattern` stages' regexes and their capture names.
    pub captures: Vec<(String, Vec<String>)>,
}

pub(super) fn skip(reason: impl Into<String>, part: &str) -> Skip {
    Skip {
        reason: reason.into(),
        part: part.trim().to_string(),
    }
}

pub(super) fn text(src: &str, span: Span) -> &str {
    src.get(span.0..span.1).unwrap_or(src)
}

fn anchored(re: &str) -> String {
    format!("^(?:{re})$")
}

fn matches_empty(re: &str, part: &str) -> Result<bool, Skip> {
    regex::Regex::new(&anchored(re))
        .map(|r| r.is_match(""))
        .map_err(|e| skip(format!("the regex does not compile here: {e}"), part))
}

fn check_regex(re: &str, part: &str) -> Result<(), Skip> {
    regex::Regex::new(re)
        .map(|_| ())
        .map_err(|e| skip(format!("the regex does not compile here: {e}"), part))
}

/// A pattern (`<_> error <code>`) as a regex: literals in order, `<name>`
/// captures up to the next literal.
fn pattern_regex(p: &str, captures: bool, part: &str) -> Result<(String, Vec<String>), Skip> {
    let mut out = String::from("^");
    let mut names = Vec::new();
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(inner) = rest.strip_prefix('<') {
            if let Some(end) = inner.find('>') {
                let name = &inner[..end];
                if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    let last = inner[end + 1..].is_empty();
                    let any = if last { ".*" } else { ".*?" };
                    if name == "_" || !captures {
                        out.push_str(any);
                    } else {
                        out.push_str(&format!("(?P<{name}>{any})"));
                        names.push(name.to_string());
                    }
                    rest = &inner[end + 1..];
                    continue;
                }
            }
        }
        // The next `<` after this character (which may be a `<` that
        // opened no capture).
        let next = rest
            .char_indices()
            .skip(1)
            .find(|(_, c)| *c == '<')
            .map_or(rest.len(), |(i, _)| i);
        out.push_str(&regex::escape(&rest[..next]));
        rest = &rest[next..];
    }
    check_regex(&out, part)?;
    Ok((out, names))
}

fn literal_text(re: &str) -> Option<String> {
    let plain = re.chars().all(|c| !"\\.+*?()|[]{}^$".contains(c));
    plain.then(|| re.to_string())
}

/// A log query as a match block.
pub fn log_match(log: &LogExpr, src: &str) -> Result<LogMatch, Skip> {
    let mut c = Cond::default();
    let constants = selector(log, src, &mut c)?;
    let selector_names: BTreeSet<&str> = log.selector.iter().map(|m| m.name.as_str()).collect();
    let mut parsed = false;
    let mut params: BTreeMap<String, String> = BTreeMap::new();
    let mut captures: Vec<(String, Vec<String>)> = Vec::new();
    let mut used_captures: BTreeSet<String> = BTreeSet::new();
    let mut notes = Vec::new();
    for st in &log.stages {
        match st {
            Stage::Line { op, values, span } => line_filter(*op, values, text(src, *span), &mut c)?,
            Stage::Parser {
                kind,
                params: ps,
                arg,
                span,
            } => {
                parsed = true;
                let part = text(src, *span);
                parser_stage(kind, ps, arg.as_deref(), part, &mut params, &mut captures)?;
            }
            Stage::Labels(e, span) => {
                let part = text(src, *span);
                let ctx = Ctx {
                    parsed,
                    params: &params,
                    captures: &captures,
                    selector: &selector_names,
                };
                label_filter(e, &ctx, &mut c, &mut used_captures, &mut notes, part)?;
            }
            Stage::Other(name, span) => return Err(other_stage(name, text(src, *span))),
        }
    }
    let mut m = LogMatch {
        cond: c,
        constants,
        parsed,
        notes,
        captures: Vec::new(),
    };
    // A capture read by a filter (or the grouping, set later) needs its
    // regex in the match; an unread one changes nothing.
    for (re, names) in &captures {
        if names.iter().any(|n| used_captures.contains(n)) {
            m.cond.regex.insert(0, re.clone());
            m.cond.regex_literals.insert(0, Vec::new());
        }
    }
    m.captures = captures;
    Ok(m)
}

/// The stream selector as label conditions; returns the labels it fixes.
fn selector(log: &LogExpr, src: &str, c: &mut Cond) -> Result<BTreeMap<String, String>, Skip> {
    let mut constants = BTreeMap::new();
    let sel = text(src, log.span);
    for m in &log.selector {
        let part = format!(
            "{}{}{:?}",
            m.name,
            match m.op {
                MatchOp::Eq => "=",
                MatchOp::Ne => "!=",
                MatchOp::Re => "=~",
                MatchOp::NotRe => "!~",
            },
            m.value
        );
        let cond = match m.op {
            MatchOp::Eq if m.value.is_empty() => Some(FieldCond::Exists(false)),
            MatchOp::Eq => {
                constants.insert(m.name.clone(), m.value.clone());
                Some(FieldCond::Equals(m.value.clone()))
            }
            MatchOp::Ne if m.value.is_empty() => Some(FieldCond::Exists(true)),
            MatchOp::Ne => Some(FieldCond::NotEquals(m.value.clone())),
            MatchOp::Re if m.value == ".*" => None,
            MatchOp::Re => {
                if matches_empty(&m.value, &part)? {
                    return Err(skip(
                        "the label regex also matches an empty value, so it selects streams without the label too; sigwatch's regex needs the label",
                        &part,
                    ));
                }
                Some(FieldCond::Regex(anchored(&m.value)))
            }
            MatchOp::NotRe => {
                if matches_empty(&m.value, &part)? {
                    return Err(skip(
                        "the negated label regex matches an empty value, so it excludes streams without the label; sigwatch keeps them",
                        &part,
                    ));
                }
                Some(FieldCond::NotRegex(anchored(&m.value)))
            }
        };
        if let Some(cond) = cond {
            if c.labels.insert(m.name.clone(), cond).is_some() {
                return Err(skip(format!("two matchers on the label {}", m.name), sel));
            }
        }
    }
    Ok(constants)
}

/// One line filter (`|=`, `!=`, `|~`, `!~`, `|>`, `!>`, with `or`).
fn line_filter(op: LineOp, values: &[LineValue], part: &str, c: &mut Cond) -> Result<(), Skip> {
    let mut texts = Vec::new();
    for v in values {
        match v {
            LineValue::Text(t) => texts.push(t.clone()),
            LineValue::Ip(_) => return Err(skip("ip() line filters have no counterpart", part)),
        }
    }
    match op {
        LineOp::Contains => {
            if texts.iter().any(String::is_empty) {
                return Ok(()); // `|= ""` keeps every line
            }
            if texts.len() == 1 {
                c.contains_all.extend(texts);
            } else if c.contains.is_empty() {
                c.contains = texts;
            } else {
                let alt: Vec<String> = texts.iter().map(|t| regex::escape(t)).collect();
                c.regex.push(alt.join("|"));
                c.regex_literals.push(texts);
            }
        }
        LineOp::NotContains => {
            if texts.iter().any(String::is_empty) {
                return Err(skip("`!= \"\"` drops every line", part));
            }
            c.not_contains.extend(texts)
        }
        LineOp::Regex => {
            for t in &texts {
                check_regex(t, part)?;
            }
            let lits: Vec<String> = texts.iter().filter_map(|t| literal_text(t)).collect();
            let re = if texts.len() == 1 {
                texts[0].clone()
            } else {
                texts
                    .iter()
                    .map(|t| format!("(?:{t})"))
                    .collect::<Vec<_>>()
                    .join("|")
            };
            c.regex.push(re);
            c.regex_literals.push(lits);
        }
        LineOp::NotRegex => {
            for t in texts {
                check_regex(&t, part)?;
                c.not_regex.push(t);
            }
        }
        LineOp::Pattern | LineOp::NotPattern => {
            for t in &texts {
                let (re, _) = pattern_regex(t, false, part)?;
                if op == LineOp::Pattern {
                    if texts.len() > 1 {
                        return Err(skip("`or` between pattern filters", part));
                    }
                    c.regex.push(re);
                    c.regex_literals.push(Vec::new());
                } else {
                    c.not_regex.push(re);
                }
            }
        }
    }
    Ok(())
}

/// A parser stage: the `json`/`logfmt` parameters it names, or the
/// captures of a `regexp`/`pattern`.
fn parser_stage(
    kind: &str,
    ps: &[(String, String)],
    arg: Option<&str>,
    part: &str,
    params: &mut BTreeMap<String, String>,
    captures: &mut Vec<(String, Vec<String>)>,
) -> Result<(), Skip> {
    match kind {
        "json" | "logfmt" | "unpack" => {
            for (label, path) in ps {
                if path.contains('[') {
                    return Err(skip("a json path with an index or a quoted key", part));
                }
                params.insert(label.clone(), path.clone());
            }
        }
        "regexp" => {
            let re = arg.unwrap_or_default().to_string();
            let compiled = regex::Regex::new(&re)
                .map_err(|e| skip(format!("the regexp does not compile here: {e}"), part))?;
            let names = compiled
                .capture_names()
                .flatten()
                .map(str::to_string)
                .collect();
            captures.push((re, names));
        }
        _ => captures.push(pattern_regex(arg.unwrap_or(""), true, part)?),
    }
    Ok(())
}

/// Why a stage that rewrites lines or labels is left out.
fn other_stage(name: &str, part: &str) -> Skip {
    skip(
        match name {
            "line_format" => "`line_format` rewrites the line the later filters see",
            "label_format" => "`label_format` renames or rewrites labels",
            "unwrap" => "`unwrap` takes values from the lines; sigwatch counts lines",
            "drop" | "keep" => "`drop`/`keep` change the series' labels",
            "decolorize" => "`decolorize` rewrites the line the later filters see",
            _ => "this stage has no counterpart",
        },
        part,
    )
}

struct Ctx<'a> {
    parsed: bool,
    params: &'a BTreeMap<String, String>,
    captures: &'a [(String, Vec<String>)],
    selector: &'a BTreeSet<&'a str>,
}

enum Target {
    Label(String),
    Field(String),
    Level,
    Ignore,
}

fn target(name: &str, ctx: &Ctx<'_>, used: &mut BTreeSet<String>) -> Target {
    if name == "__error__" || name == "__error_details__" {
        return Target::Ignore;
    }
    if name == "detected_level" || (name == "level" && ctx.parsed && !ctx.selector.contains(name)) {
        return Target::Level;
    }
    if !ctx.parsed || ctx.selector.contains(name) {
        return Target::Label(name.to_string());
    }
    if ctx
        .captures
        .iter()
        .any(|(_, n)| n.iter().any(|n| n == name))
    {
        used.insert(name.to_string());
        return Target::Field(name.to_string());
    }
    let path = ctx
        .params
        .get(name)
        .cloned()
        .unwrap_or_else(|| name.to_string());
    if path == "level" {
        return Target::Level;
    }
    Target::Field(path)
}

fn label_filter(
    e: &LabelExpr,
    ctx: &Ctx<'_>,
    c: &mut Cond,
    used: &mut BTreeSet<String>,
    notes: &mut Vec<String>,
    part: &str,
) -> Result<(), Skip> {
    match e {
        LabelExpr::And(a, b) => {
            label_filter(a, ctx, c, used, notes, part)?;
            label_filter(b, ctx, c, used, notes, part)
        }
        LabelExpr::Or(..) => or_filter(e, ctx, c, used, part),
        LabelExpr::Cmp { name, op, value } => {
            let t = target(name, ctx, used);
            if matches!(t, Target::Ignore) {
                if *op == CmpOp::Eq && *value == LabelValue::Str(String::new()) {
                    notes.push(format!(
                        "{name}=\"\" dropped: sigwatch reads each line in its own format and keeps no parse errors"
                    ));
                    return Ok(());
                }
                return Err(skip(
                    format!("a filter on {name} selects lines that failed to parse"),
                    part,
                ));
            }
            let cond = match (op, value) {
                (_, LabelValue::Unit(u)) => {
                    return Err(skip(
                        format!("a comparison with {u} (a duration, a size or an address); sigwatch compares numbers"),
                        part,
                    ))
                }
                (CmpOp::Eq, LabelValue::Str(v)) if v.is_empty() => FieldCond::Exists(false),
                (CmpOp::Ne, LabelValue::Str(v)) if v.is_empty() => FieldCond::Exists(true),
                (CmpOp::Eq, LabelValue::Str(v)) => match t {
                    Target::Level => FieldCond::Equals(levels(std::slice::from_ref(v), part)?.remove(0)),
                    _ => FieldCond::Equals(v.clone()),
                },
                (CmpOp::Ne, LabelValue::Str(v)) => match t {
                    Target::Level => FieldCond::NotEquals(levels(std::slice::from_ref(v), part)?.remove(0)),
                    _ => FieldCond::NotEquals(v.clone()),
                },
                (CmpOp::Re, LabelValue::Str(v)) => {
                    if matches_empty(v, part)? {
                        return Err(skip("the regex also matches a missing label", part));
                    }
                    match t {
                        Target::Level => {
                            let words: Vec<String> = v.split('|').map(str::to_string).collect();
                            if !words.iter().all(|w| !w.is_empty() && w.chars().all(|ch| ch.is_ascii_alphabetic())) {
                                return Err(skip(
                                    "a regex on the level: sigwatch reads levels as debug, info, warn, error, fatal (write the words as a|b)",
                                    part,
                                ));
                            }
                            FieldCond::OneOf(levels(&words, part)?)
                        }
                        _ => FieldCond::Regex(anchored(v)),
                    }
                }
                (CmpOp::NotRe, LabelValue::Str(v)) => {
                    if matches_empty(v, part)? {
                        return Err(skip("the negated regex excludes lines without the label; sigwatch keeps them", part));
                    }
                    if matches!(t, Target::Level) {
                        return Err(skip("a negated regex on the level", part));
                    }
                    FieldCond::NotRegex(anchored(v))
                }
                (op, LabelValue::Num(n)) => {
                    let mut b = NumBounds::default();
                    match op {
                        CmpOp::Gt => b.gt = Some(*n),
                        CmpOp::Ge => b.ge = Some(*n),
                        CmpOp::Lt => b.lt = Some(*n),
                        CmpOp::Le => b.le = Some(*n),
                        CmpOp::Eq => {
                            b.ge = Some(*n);
                            b.le = Some(*n);
                        }
                        _ => {
                            return Err(skip(
                                "a numeric != or a regex against a number",
                                part,
                            ))
                        }
                    }
                    FieldCond::Number(b)
                }
                (_, LabelValue::Str(_)) => {
                    return Err(skip("a string compared with < or >; sigwatch compares numbers", part))
                }
            };
            put(c, t, cond, part)
        }
    }
}

/// `a="x" or a="y"` on one label is one of; anything else is not one
/// condition per key.
fn or_filter(
    e: &LabelExpr,
    ctx: &Ctx<'_>,
    c: &mut Cond,
    used: &mut BTreeSet<String>,
    part: &str,
) -> Result<(), Skip> {
    // `a="x" or a="y"` on one label is one of; anything else is not
    // one condition per key.
    let mut leaves = Vec::new();
    or_leaves(e, &mut leaves);
    let mut name = None;
    let mut values = Vec::new();
    for l in leaves {
        match l {
            LabelExpr::Cmp {
                name: n,
                op: CmpOp::Eq,
                value: LabelValue::Str(v),
            } if name.as_ref().is_none_or(|m: &String| m == n) && !v.is_empty() => {
                name = Some(n.clone());
                values.push(v.clone());
            }
            _ => {
                return Err(skip(
                    "`or` between label filters other than values of one label",
                    part,
                ))
            }
        }
    }
    let name = name.unwrap_or_default();
    let t = target(&name, ctx, used);
    let cond = match &t {
        Target::Level => FieldCond::OneOf(levels(&values, part)?),
        _ => FieldCond::OneOf(values),
    };
    put(c, t, cond, part)
}

fn or_leaves<'a>(e: &'a LabelExpr, out: &mut Vec<&'a LabelExpr>) {
    match e {
        LabelExpr::Or(a, b) => {
            or_leaves(a, out);
            or_leaves(b, out);
        }
        other => out.push(other),
    }
}

fn levels(values: &[String], part: &str) -> Result<Vec<String>, Skip> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        let Some(l) = Level::parse(v) else {
            return Err(skip(
                format!("the level {v:?} is not one sigwatch reads (debug, info, warn, error, fatal and their spellings)"),
                part,
            ));
        };
        let s = l.as_str().to_string();
        if !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

fn put(c: &mut Cond, t: Target, cond: FieldCond, part: &str) -> Result<(), Skip> {
    let (map, key) = match t {
        Target::Label(k) => (&mut c.labels, k),
        Target::Field(k) => (&mut c.fields, k),
        Target::Level => (&mut c.fields, "level".to_string()),
        Target::Ignore => return Ok(()),
    };
    match (map.get_mut(&key), cond) {
        (None, cond) => {
            map.insert(key, cond);
            Ok(())
        }
        (Some(FieldCond::Number(a)), FieldCond::Number(b)) => {
            a.gt = b.gt.or(a.gt);
            a.ge = b.ge.or(a.ge);
            a.lt = b.lt.or(a.lt);
            a.le = b.le.or(a.le);
            Ok(())
        }
        _ => Err(skip(
            format!("two conditions on {key} that are not numeric bounds"),
            part,
        )),
    }
}
