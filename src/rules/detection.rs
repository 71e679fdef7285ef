//! What decides a rule's detection besides its match: its detector block
//! checked and compiled, and its `unless` and `progress` — the lines
//! around the matches that say whether they are an incident or the
//! routine operation that writes the same words.

use super::condition::push_cond;
use super::model::{self, DetectSpec};
use super::{Condition, Detect, Recent, RuleSet, ValueCond};

/// A compile error and the rule key it is about.
pub(super) type Located = (Option<&'static str>, String);

pub(super) fn compile_detect(d: &DetectSpec, set: &mut RuleSet) -> Result<Detect, Located> {
    let err = |m: &str| (Some("detect"), m.to_string());
    let mut kinds = Vec::new();
    if let Some(c) = &d.count {
        if c.threshold == 0 {
            return Err(err("count.threshold must be at least 1"));
        }
        if c.window.ns() <= 0 {
            return Err(err("count.window must be positive"));
        }
        kinds.push(Detect::Count(c.clone()));
    }
    if let Some(p) = &d.persist {
        if p.for_.ns() <= 0 || p.max_gap.ns() <= 0 {
            return Err(err("persist.for and persist.max_gap must be positive"));
        }
        kinds.push(Detect::Persist(p.clone()));
    }
    if let Some(s) = &d.spread {
        if s.window.ns() <= 0 {
            return Err(err("spread.window must be positive"));
        }
        if s.groups.is_none() && s.fraction.is_none() {
            return Err(err(
                "spread needs groups (≥ K groups) or fraction (≥ F of the groups seen)",
            ));
        }
        if s.fraction.is_some_and(|f| !(f > 0.0 && f <= 1.0)) {
            return Err(err("spread.fraction must be in (0, 1]"));
        }
        if s.groups == Some(0) {
            return Err(err("spread.groups must be at least 1"));
        }
        if s.min_count == Some(0) {
            return Err(err("spread.min_count must be at least 1"));
        }
        kinds.push(Detect::Spread(s.clone()));
    }
    if let Some(s) = &d.share {
        if s.window.ns() <= 0 {
            return Err(err("share.window must be positive"));
        }
        if !(s.min_share > 0.0 && s.min_share <= 1.0) {
            return Err(err("share.min_share must be in (0, 1]"));
        }
        if s.min_total == 0 {
            return Err(err("share.min_total must be at least 1"));
        }
        kinds.push(Detect::Share(s.clone()));
    }
    if let Some(a) = &d.absent {
        if a.for_.ns() <= 0 {
            return Err(err("absent.for must be positive"));
        }
        kinds.push(Detect::Absent(a.clone()));
    }
    if let Some(s) = &d.sequence {
        if s.within.ns() <= 0 {
            return Err(err("sequence.within must be positive"));
        }
        let then = push_cond(set, &s.then).map_err(|m| (Some("then"), m))?;
        kinds.push(Detect::Sequence {
            then,
            within: s.within,
        });
    }
    match kinds.len() {
        1 => Ok(kinds.remove(0)),
        0 => Err(err(
            "detect needs one of count, persist, spread, share, absent, sequence",
        )),
        _ => Err(err("detect takes exactly one kind")),
    }
}

/// Most `unless` entries a rule may have (its own and its progress's).
pub const MAX_RECENTS: usize = 16;

pub(super) fn compile_recents(
    specs: &[model::RecentSpec],
    set: &mut RuleSet,
    key: &'static str,
) -> Result<Vec<Recent>, Located> {
    let mut out = Vec::new();
    for u in specs {
        let after =
            push_cond(set, &u.after).map_err(|m| (Some(key), format!("unless.after: {m}")))?;
        if u.within.ns() <= 0 {
            return Err((Some(key), "unless.within must be positive".into()));
        }
        let until = match &u.until {
            Some(m) => {
                Some(push_cond(set, m).map_err(|m| (Some(key), format!("unless.until: {m}")))?)
            }
            None => None,
        };
        let group_by = u.group_by.as_ref().map(|g| g.to_vec()).unwrap_or_default();
        if u.for_.is_some() && key == "unless" {
            return Err((
                Some(key),
                "unless.for belongs to a progress's unless entries (a rule's own entries discount matches: there is no alert to hold)".into(),
            ));
        }
        if group_by.iter().any(|g| g.trim().is_empty()) {
            return Err((Some(key), "unless.group_by has an empty key".into()));
        }
        out.push(Recent {
            after,
            within: u.within.ns(),
            until,
            group_by,
            name: describe_cond(&set.conditions[after]),
            hold: u.for_.map(|d| d.ns()),
        });
    }
    Ok(out)
}

/// A match block in a few words, for explanations and alert text: its
/// `contains` literals (`` `a` or `b` ``), else its other literals, else its
/// regexes or field conditions.
pub fn describe_cond(c: &Condition) -> String {
    let quote = |v: &[String], sep: &str| {
        let mut s = v
            .iter()
            .take(3)
            .map(|l| format!("`{l}`"))
            .collect::<Vec<_>>()
            .join(sep);
        if v.len() > 3 {
            s.push_str(" …");
        }
        s
    };
    if !c.any.is_empty() {
        quote(&c.any, " or ")
    } else if !c.all.is_empty() {
        quote(&c.all, " and ")
    } else if let Some(r) = c.regexes.first() {
        format!("/{}/", r.as_str())
    } else if let Some((k, v)) = c.fields.first().or(c.labels.first()) {
        match v {
            ValueCond::Equals(e) => format!("{k}={e:?}"),
            _ => format!("a {k} condition"),
        }
    } else {
        "a line".to_string()
    }
}
