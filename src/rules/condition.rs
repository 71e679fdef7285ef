//! A match block compiled: its literals checked (none empty, none longer
//! than a signature needs), its regexes and field conditions compiled.
//! Shared by a rule's match and every block around it (`resolve_on`,
//! `then`, `unless`, `progress`).

use super::model::{self, FieldCond, MatchSpec};
use super::{CondId, Condition, RuleSet, ValueCond};
use crate::text::compile_regex;

/// Longest literal (`contains`, `contains_all`, `not_contains`, a field
/// value): a signature is a few distinctive words, and every literal joins
/// one automaton whose size follows the literals' bytes. A longer one is a
/// load error, not minutes of compiling and gigabytes of memory.
pub const MAX_LITERAL_BYTES: usize = 1024;

/// Most literal bytes in one rule set (with [`MAX_LITERAL_BYTES`], the
/// automaton and its compile time stay linear and bounded).
pub const MAX_SET_LITERAL_BYTES: usize = 4 << 20;

/// The literal bytes a condition brings to the automaton.
pub(super) fn literal_bytes(c: &Condition) -> usize {
    let lits: usize = c
        .any
        .iter()
        .chain(&c.all)
        .chain(&c.none)
        .map(String::len)
        .sum();
    let values: usize = c
        .fields
        .iter()
        .map(|(_, v)| match v {
            ValueCond::Equals(s) => s.len(),
            ValueCond::OneOf(l) => l.iter().map(String::len).sum(),
            _ => 0,
        })
        .sum();
    lits + values
}

fn check_literal(what: &str, s: &str) -> Result<(), String> {
    if s.len() > MAX_LITERAL_BYTES {
        let start: String = s.chars().take(40).collect();
        return Err(format!(
            "{what} has a literal of {} bytes ({start:?}…), more than the {MAX_LITERAL_BYTES} a literal may have: keep the distinctive words of the signature",
            s.len()
        ));
    }
    Ok(())
}

fn compile_value(c: &FieldCond) -> Result<ValueCond, String> {
    Ok(match c {
        FieldCond::Equals(s) => {
            check_literal("field", s)?;
            ValueCond::Equals(s.clone())
        }
        FieldCond::OneOf(v) => {
            for s in v {
                check_literal("field", s)?;
            }
            ValueCond::OneOf(v.clone())
        }
        FieldCond::Exists(b) => ValueCond::Exists(*b),
        FieldCond::Regex(r) => ValueCond::Regex(compile_regex(r)?),
        FieldCond::NotEquals(s) => ValueCond::NotEquals(s.clone()),
        FieldCond::NotRegex(r) => ValueCond::NotRegex(compile_regex(r)?),
        FieldCond::Number(b) if b.finite() => ValueCond::Number(*b),
        FieldCond::Number(_) => return Err("numeric bounds must be finite numbers".into()),
    })
}

pub(super) fn push_cond(set: &mut RuleSet, m: &MatchSpec) -> Result<CondId, String> {
    let lits = |o: &Option<model::OneOrMany>, what: &str| -> Result<Vec<String>, String> {
        let v = o.as_ref().map(|x| x.to_vec()).unwrap_or_default();
        if v.iter().any(|s| s.is_empty()) {
            return Err(format!(
                "{what} has an empty literal, which would match every line"
            ));
        }
        for s in &v {
            check_literal(what, s)?;
        }
        Ok(v)
    };
    let mut c = Condition {
        any: lits(&m.contains, "contains")?,
        all: lits(&m.contains_all, "contains_all")?,
        none: lits(&m.not_contains, "not_contains")?,
        ..Condition::default()
    };
    for r in m.regex.as_ref().map(|r| r.to_vec()).unwrap_or_default() {
        c.regexes.push(compile_regex(&r)?);
    }
    for r in m.not_regex.as_ref().map(|r| r.to_vec()).unwrap_or_default() {
        c.not_regexes.push(compile_regex(&r)?);
    }
    for (k, v) in &m.field {
        c.fields.push((k.clone(), compile_value(v)?));
    }
    for (k, v) in &m.labels {
        c.labels.push((k.clone(), compile_value(v)?));
    }
    let empty = c.any.is_empty()
        && c.all.is_empty()
        && c.regexes.is_empty()
        && c.fields.is_empty()
        && c.labels.is_empty();
    if empty {
        return Err(
            "a match block needs at least one of contains, contains_all, regex, field, labels"
                .into(),
        );
    }
    set.conditions.push(c);
    Ok(set.conditions.len() - 1)
}
