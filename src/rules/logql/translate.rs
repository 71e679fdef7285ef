//! From a LogQL alerting expression to sigwatch's model, exactly or not at
//! all: each shape the ruler's metric can take that has a meaning here (a
//! grouped count against a threshold, N groups at once, one group's part of
//! the cluster's count, absence) becomes one detector with the match block
//! of its log query; anything else is a [`Skip`] naming the part of the
//! expression that could not be carried.

use super::ast::{Agg, Bin, BinOp, Expr, RangeAgg};
use super::parse::parse;
use super::pipeline::{log_match, skip, text, LogMatch};
pub use super::pipeline::{Cond, Skip};
use std::collections::BTreeMap;

/// The detector an expression becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// `count`: at least `threshold` lines within `window_ns`.
    Count {
        /// Fewest lines.
        threshold: u64,
        /// The range.
        window_ns: i64,
    },
    /// `spread`: at least `groups` groups within `window_ns`.
    Spread {
        /// Fewest groups.
        groups: u64,
        /// The range.
        window_ns: i64,
        /// `partition_by`.
        partition: Option<String>,
        /// The LogQL label of the partition.
        partition_label: Option<String>,
    },
    /// `share`: the top group's part of the count.
    Share {
        /// The range.
        window_ns: i64,
        /// Least share (inclusive).
        min_share: f64,
        /// Fewest lines in the window.
        min_total: u64,
    },
    /// `absent`: no line for `for_ns`.
    Absent {
        /// The range.
        for_ns: i64,
    },
}

/// A translated expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Translation {
    /// The detector.
    pub kind: Kind,
    /// The match block.
    pub cond: Cond,
    /// The group key's paths, first present wins (empty: one group).
    pub group_by: Vec<String>,
    /// The LogQL label the alert is grouped by.
    pub group_label: Option<String>,
    /// Labels fixed by the selector (`app="livekit"`): constant in every series.
    pub constants: BTreeMap<String, String>,
    /// Whether a parser stage made the line's fields labels.
    pub parsed: bool,
    /// What the reader should know (a reading that is exact but not obvious).
    pub notes: Vec<String>,
    /// The `regexp`/`pattern` stages' regexes and their capture names.
    pub captures: Vec<(String, Vec<String>)>,
}

/// Translates an alerting rule's `expr`.
pub fn translate(src: &str) -> Result<Translation, Skip> {
    let e = parse(src).map_err(|e| skip(format!("does not parse: {e}"), src))?;
    top(&e, src)
}

fn top(e: &Expr, src: &str) -> Result<Translation, Skip> {
    match e {
        Expr::Bin(b) if b.op == BinOp::And => share_and_total(b, src),
        Expr::Bin(b) if b.op.is_comparison() => {
            if b.bool_mod {
                return Err(skip(
                    "a `bool` comparison returns 0 or 1 for every series: it never stops firing",
                    text(src, b.span),
                ));
            }
            let (metric, op, v) = orient(b, src)?;
            match metric {
                Expr::Agg(a) if a.op == "count" => spread(a, op, v, src),
                Expr::Bin(d) if d.op == BinOp::Div => share(d, op, v, 1, src),
                Expr::Range(r) if r.func == "absent_over_time" => absent(r, Some((op, v)), src),
                _ => count(metric, op, v, src),
            }
        }
        Expr::Range(r) if r.func == "absent_over_time" => absent(r, None, src),
        // A bare metric fires for every series it returns: a count of at least one.
        Expr::Agg(a) if a.op == "count" => spread(a, BinOp::Gt, 0.0, src),
        Expr::Agg(_) | Expr::Range(_) => count(e, BinOp::Gt, 0.0, src),
        Expr::Bin(b) => Err(skip(
            format!(
                "the binary operation {:?} has no counterpart: sigwatch compares one count, its groups or its share with a number",
                b.op
            ),
            text(src, b.span),
        )),
        Expr::Num(_) => Err(skip("a constant is no condition on logs", src)),
        Expr::Other(s, _) => Err(other(s)),
    }
}

fn other(s: &str) -> Skip {
    skip(
        "not a range aggregation over a log query (a recorded series, a Prometheus metric or a function such as vector or label_replace)",
        s,
    )
}

/// The metric side of a comparison with a number, the operator as if the
/// metric stood on the left.
fn orient<'a>(b: &'a Bin, src: &str) -> Result<(&'a Expr, BinOp, f64), Skip> {
    match (&b.lhs, &b.rhs) {
        (m, Expr::Num(v)) => Ok((m, b.op, *v)),
        (Expr::Num(v), m) => {
            let op = match b.op {
                BinOp::Gt => BinOp::Lt,
                BinOp::Ge => BinOp::Le,
                BinOp::Lt => BinOp::Gt,
                BinOp::Le => BinOp::Ge,
                o => o,
            };
            Ok((m, op, *v))
        }
        _ => Err(skip(
            "a comparison of two series: sigwatch compares with a number",
            text(src, b.span),
        )),
    }
}

/// The least whole count that satisfies `count op x`.
fn least_count(op: BinOp, x: f64, part: &str) -> Result<u64, Skip> {
    let x = if (x - x.round()).abs() < 1e-9 {
        x.round()
    } else {
        x
    };
    let n = match op {
        BinOp::Gt => x.floor() + 1.0,
        BinOp::Ge => x.ceil(),
        _ => {
            return Err(skip(
                format!(
                    "the comparison {} fires on few lines or an exact number; sigwatch's detectors fire on at least a number",
                    op_str(op)
                ),
                part,
            ))
        }
    };
    if !(n.is_finite()) || n > 1e15 {
        return Err(skip("the threshold is out of range", part));
    }
    Ok(n.max(1.0) as u64)
}

fn op_str(op: BinOp) -> &'static str {
    match op {
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        _ => "?",
    }
}

/// A range aggregation's count factor (rate × range = count).
fn counted(r: &RangeAgg, src: &str) -> Result<f64, Skip> {
    let part = text(src, r.span);
    if let Some(o) = &r.offset {
        return Err(skip(
            format!("`offset {o}` looks at the past; sigwatch judges the lines as they come"),
            part,
        ));
    }
    match r.func.as_str() {
        "count_over_time" => Ok(1.0),
        "rate" => Ok(r.range_ns as f64 / 1e9),
        "bytes_over_time" | "bytes_rate" => Err(skip(
            format!("{} measures bytes; sigwatch counts lines", r.func),
            part,
        )),
        f => Err(skip(
            format!("{f} aggregates values unwrapped from the lines; sigwatch counts lines"),
            part,
        )),
    }
}

/// `[sum by (L)] (count_over_time(…) | rate(…)) op v`.
fn count(metric: &Expr, op: BinOp, v: f64, src: &str) -> Result<Translation, Skip> {
    let (grouping, r) = summed(metric, src)?;
    let factor = counted(r, src)?;
    let threshold = least_count(op, v * factor, text(src, r.span).trim()).map_err(|s| Skip {
        part: src.trim().to_string(),
        ..s
    })?;
    let mut t = from_log(log_match(&r.log, src)?);
    group(&mut t, grouping, src)?;
    t.kind = Kind::Count {
        threshold,
        window_ns: r.range_ns,
    };
    if r.func == "rate" {
        t.notes.push(format!(
            "rate {} {v} over {} read as {threshold} lines or more",
            op_str(op),
            crate::duration::Dur(r.range_ns)
        ));
    }
    Ok(t)
}

/// Whether two range aggregations count the same lines over the same range
/// (as written, spaces aside; `rate` and `count_over_time` alike, since a
/// ratio of either is the same).
fn same_query(a: &RangeAgg, b: &RangeAgg, src: &str) -> bool {
    let norm = |r: &RangeAgg| -> String {
        text(src, r.log.span)
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect()
    };
    a.range_ns == b.range_ns && a.offset == b.offset && norm(a) == norm(b)
}

/// `sum by (L) (range)` or `sum (range)`: the grouping and the range.
fn summed<'a>(metric: &'a Expr, src: &str) -> Result<(Option<&'a [String]>, &'a RangeAgg), Skip> {
    match metric {
        Expr::Agg(a) => {
            let part = text(src, a.span);
            if a.op != "sum" {
                return Err(skip(
                    match a.op.as_str() {
                        "max" | "min" | "avg" => format!(
                            "{} by compares the streams' counts; sigwatch counts a group's lines together (write sum by)",
                            a.op
                        ),
                        o => format!("the aggregation {o} has no counterpart in sigwatch's detectors"),
                    },
                    part,
                ));
            }
            let Expr::Range(r) = &*a.inner else {
                return Err(match &*a.inner {
                    Expr::Other(s, _) => other(s),
                    _ => skip("sum of something other than a range aggregation", part),
                });
            };
            if r.grouping.is_some() {
                return Err(skip("a grouping on the range function itself", part));
            }
            match &a.grouping {
                Some(g) if g.without => Err(skip(
                    "`without` groups by every label but some; sigwatch groups by named keys",
                    part,
                )),
                Some(g) => Ok((Some(&g.labels), r)),
                None => Ok((None, r)),
            }
        }
        Expr::Range(r) => Err(counted(r, src).err().unwrap_or_else(|| skip(
            "one series per stream (no sum by): sigwatch groups by named keys; write sum by (the labels that name a stream)",
            text(src, r.span),
        ))),
        Expr::Other(s, _) => Err(other(s)),
        _ => Err(skip("not a count of log lines", src)),
    }
}

/// Sets the group key from a `by (…)` list.
fn group(t: &mut Translation, labels: Option<&[String]>, src: &str) -> Result<(), Skip> {
    let labels = labels.unwrap_or_default();
    let free: Vec<&String> = labels
        .iter()
        .filter(|l| !t.constants.contains_key(*l))
        .collect();
    match free.as_slice() {
        [] => {}
        [l] => {
            t.group_label = Some((*l).clone());
            t.group_by = key_paths(t, l);
            // Grouped by a capture: its regex must run to make the field.
            let re = t
                .captures
                .iter()
                .find(|(_, names)| names.iter().any(|n| n == *l))
                .map(|(re, _)| re.clone());
            if let Some(re) = re {
                if !t.cond.regex.contains(&re) {
                    t.cond.regex.insert(0, re);
                    t.cond.regex_literals.insert(0, Vec::new());
                }
            }
        }
        more => {
            return Err(skip(
                format!(
                    "grouped by {} labels at once ({}); sigwatch groups by one key",
                    more.len(),
                    more.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                src,
            ))
        }
    }
    Ok(())
}

/// Where a LogQL label stands in sigwatch: a stream label, or (after a
/// parser) the line's field of that name, the stream's winning as in Loki.
fn key_paths(t: &Translation, label: &str) -> Vec<String> {
    if label == "detected_level" {
        return vec!["level".into()];
    }
    let mut out = vec![format!("labels.{label}")];
    if t.parsed {
        out.push(label.to_string());
    }
    out
}

/// `count [by (P)] (sum by (P, L) (…) [> 0]) op N`.
fn spread(outer: &Agg, op: BinOp, v: f64, src: &str) -> Result<Translation, Skip> {
    let part = text(src, outer.span);
    let groups = least_count(op, v, src.trim())?;
    let inner = match &*outer.inner {
        Expr::Bin(b) if b.op.is_comparison() => {
            let (m, iop, iv) = orient(b, src)?;
            if least_count(iop, iv, part)? != 1 {
                return Err(skip(
                    "counts the groups above a threshold other than one line; sigwatch's spread counts the groups with any line",
                    text(src, b.span),
                ));
            }
            m
        }
        m => m,
    };
    let (grouping, r) = summed(inner, src).map_err(|s| {
        if matches!(inner, Expr::Agg(a) if a.op == "count") {
            skip("count of a count: write count(sum by (L) (…) > 0)", part)
        } else {
            s
        }
    })?;
    if r.func != "count_over_time" && r.func != "rate" {
        counted(r, src)?;
    }
    if let Some(o) = &r.offset {
        return Err(skip(
            format!("`offset {o}` looks at the past"),
            text(src, r.span),
        ));
    }
    let mut t = from_log(log_match(&r.log, src)?);
    let outer_labels: Vec<String> = match &outer.grouping {
        Some(g) if g.without => return Err(skip("`without` in the outer count", part)),
        Some(g) => g
            .labels
            .iter()
            .filter(|l| !t.constants.contains_key(*l))
            .cloned()
            .collect(),
        None => Vec::new(),
    };
    if outer_labels.len() > 1 {
        return Err(skip(
            "the groups are counted per several labels; sigwatch partitions by one key",
            part,
        ));
    }
    let inner_labels: Vec<String> = grouping
        .unwrap_or_default()
        .iter()
        .filter(|l| !outer_labels.contains(l))
        .cloned()
        .collect();
    group(&mut t, Some(&inner_labels), src)?;
    if t.group_label.is_none() {
        return Err(skip(
            "counts groups of one: the inner sum has no label to tell groups apart",
            part,
        ));
    }
    let partition_label = outer_labels.first().cloned();
    let partition = partition_label.as_ref().map(|l| {
        // partition_by takes one path: the stream's label, or the field
        // when a parser made it (the stream's winning is kept in group_by).
        key_paths(&t, l)
            .pop()
            .unwrap_or_else(|| format!("labels.{l}"))
    });
    t.kind = Kind::Spread {
        groups,
        window_ns: r.range_ns,
        partition,
        partition_label,
    };
    Ok(t)
}

/// `sum by (L) (X) / on() group_left sum (X) op s`.
fn share(d: &Bin, op: BinOp, s: f64, min_total: u64, src: &str) -> Result<Translation, Skip> {
    let part = text(src, d.span);
    let (g_num, r_num) = summed(&d.lhs, src)?;
    let (g_den, r_den) = summed(&d.rhs, src)?;
    counted(r_num, src)?;
    if !same_query(r_num, r_den, src) {
        return Err(skip(
            "a ratio of two different queries; sigwatch's share divides a group's count by the whole count of the same query",
            part,
        ));
    }
    let mut t = from_log(log_match(&r_num.log, src)?);
    let den_free = g_den
        .unwrap_or_default()
        .iter()
        .any(|l| !t.constants.contains_key(l));
    if den_free {
        return Err(skip(
            "the denominator is grouped; sigwatch's share divides by the whole count",
            part,
        ));
    }
    match &d.matching {
        Some(m) if m.group_left == Some(true) => {}
        _ => {
            return Err(skip(
                "a ratio of a group to the whole needs on() group_left (or ignoring(L) group_left)",
                part,
            ))
        }
    }
    group(&mut t, g_num, src)?;
    if t.group_label.is_none() {
        return Err(skip(
            "the numerator is not grouped: its share is always the whole",
            part,
        ));
    }
    // The share detector names the top group only: exact when no two
    // groups can both pass, which a share above one half guarantees.
    let min_share = match op {
        BinOp::Gt if (0.5..1.0).contains(&s) => s + 1e-9,
        BinOp::Ge if s > 0.5 && s <= 1.0 => s,
        BinOp::Gt | BinOp::Ge => {
            return Err(skip(
                format!(
                    "a share {} {s}: more than one group can hold it at once, and sigwatch's share names the top group (write a share above 0.5)",
                    op_str(op)
                ),
                src,
            ))
        }
        _ => {
            return Err(skip(
                format!("a share {} {s} fires on small shares; sigwatch's share fires on a large one", op_str(op)),
                src,
            ))
        }
    };
    if op == BinOp::Gt {
        t.notes
            .push(format!("share > {s} read as min_share {min_share}"));
    }
    t.kind = Kind::Share {
        window_ns: r_num.range_ns,
        min_share,
        min_total,
    };
    Ok(t)
}

/// `(share op s) and on() (sum(X) op N)`: the share with a least total.
fn share_and_total(b: &Bin, src: &str) -> Result<Translation, Skip> {
    let part = text(src, b.span);
    let Expr::Bin(lhs) = &b.lhs else {
        return Err(skip("`and` joins a share and its least total only", part));
    };
    let Expr::Bin(rhs) = &b.rhs else {
        return Err(skip("`and` joins a share and its least total only", part));
    };
    if !lhs.op.is_comparison() || !rhs.op.is_comparison() {
        return Err(skip("`and` joins a share and its least total only", part));
    }
    let (ratio, op, s) = orient(lhs, src)?;
    let (total, top, tv) = orient(rhs, src)?;
    let Expr::Bin(d) = ratio else {
        return Err(skip("`and` joins a share and its least total only", part));
    };
    if d.op != BinOp::Div
        || !b
            .matching
            .as_ref()
            .is_some_and(|m| m.on && m.labels.is_empty())
    {
        return Err(skip(
            "`and` joins a share and, with on(), its least total only",
            part,
        ));
    }
    let (g, r) = summed(total, src)?;
    let (_, r_num) = summed(&d.lhs, src)?;
    if !same_query(r, r_num, src) || g.is_some_and(|g| !g.is_empty()) {
        return Err(skip(
            "the least total counts another query than the share",
            text(src, rhs.span),
        ));
    }
    let min_total = least_count(
        top,
        tv * counted(r, src)? / counted(r_num, src)?,
        text(src, rhs.span),
    )?;
    share(d, op, s, min_total, src)
}

/// `absent_over_time(X[R])` (alone, `== 1`, `> 0` or `>= 1`).
fn absent(r: &RangeAgg, cmp: Option<(BinOp, f64)>, src: &str) -> Result<Translation, Skip> {
    let part = text(src, r.span);
    if let Some((op, v)) = cmp {
        let fires = match op {
            BinOp::Eq => v == 1.0,
            BinOp::Gt => (0.0..1.0).contains(&v),
            BinOp::Ge => v > 0.0 && v <= 1.0,
            _ => false,
        };
        if !fires {
            return Err(skip(
                format!(
                    "absent_over_time {} {v} never fires (its value is 1)",
                    op_str(op)
                ),
                src,
            ));
        }
    }
    if let Some(o) = &r.offset {
        return Err(skip(format!("`offset {o}` looks at the past"), part));
    }
    let mut t = from_log(log_match(&r.log, src)?);
    t.kind = Kind::Absent { for_ns: r.range_ns };
    t.notes.push(
        "absent fires for a query that matched before: sigwatch cannot miss lines it never saw"
            .into(),
    );
    Ok(t)
}

fn from_log(m: LogMatch) -> Translation {
    Translation {
        kind: Kind::Count {
            threshold: 1,
            window_ns: 0,
        },
        cond: m.cond,
        group_by: Vec::new(),
        group_label: None,
        constants: m.constants,
        parsed: m.parsed,
        notes: m.notes,
        captures: m.captures,
    }
}
