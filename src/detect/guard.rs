//! `unless` and `progress`: the lines around a rule's matches that decide
//! whether the matches mean what they say.
//!
//! The same words are written by an incident and by the routine operation
//! that looks like it: a pod that is starting fails its readiness probe
//! twice, a pod being stopped fails it while it drains, a LiveKit node
//! waits for participants to exit during every planned upgrade. What tells
//! them apart is the group's other lines: `Successfully assigned` or
//! `Stopping container` before the probe failures, participants leaving
//! while the node waits. A guard wraps any detector kind and reads those
//! lines for it:
//!
//! * an `unless` entry marks a group for `within` after a line matching its
//!   `after` (until a line matching its `until`): the group's matches in
//!   that time are not counted (counted as discounted instead);
//! * a `progress` line tells the detector that the group's condition moved,
//!   so it starts the group over ([`Detector::progress`]) — unless one of
//!   the progress's own `unless` entries holds (a drain that began by
//!   failing is stuck whatever leaves it).
//!
//! The detector behind the guard never sees the context lines; its state
//! and the guard's marks are saved together in a checkpoint.

use super::{Detector, Evidence, Groups, Hit, Saved, Status, Step};
use crate::clock::format_rfc3339;
use crate::rules::Rule;
use serde::{Deserialize, Serialize};

/// Which lines an `unless` entry discounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// The rule's matches.
    Matches,
    /// The rule's progress lines.
    Progress,
}

#[derive(Debug, Clone)]
struct Entry {
    scope: Scope,
    within: i64,
    name: String,
    hold: Option<i64>,
}

/// What the guard remembers: per entry, when each group last logged its
/// `after` line; per group, its last progress that counted.
#[derive(Serialize, Deserialize)]
struct Marks {
    marks: Vec<Groups<i64>>,
    progress: Groups<i64>,
    discounted: u64,
    progress_ignored: u64,
}

/// A detector behind its rule's `unless` and `progress`.
pub struct Guarded {
    inner: Box<dyn Detector>,
    entries: Vec<Entry>,
    progress_name: Option<String>,
    state: Marks,
}

/// Why a line does not count, for `explain` and the alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The entry's index in [`Rule::recents`].
    pub entry: usize,
    /// When the group logged the entry's line.
    pub since: i64,
}

impl Guarded {
    /// The guard of `rule` around its detector.
    pub fn new(rule: &Rule, inner: Box<dyn Detector>) -> Guarded {
        let mut entries: Vec<Entry> = rule
            .unless
            .iter()
            .map(|u| Entry {
                scope: Scope::Matches,
                within: u.within,
                name: u.name.clone(),
                hold: None,
            })
            .collect();
        if let Some(p) = &rule.progress {
            entries.extend(p.unless.iter().map(|u| Entry {
                scope: Scope::Progress,
                within: u.within,
                name: u.name.clone(),
                hold: u.hold,
            }));
        }
        let max = rule.max_groups;
        Guarded {
            inner,
            state: Marks {
                marks: entries.iter().map(|_| Groups::new(max)).collect(),
                progress: Groups::new(max),
                discounted: 0,
                progress_ignored: 0,
            },
            entries,
            progress_name: rule.progress.as_ref().map(|p| p.name.clone()),
        }
    }

    /// The entry of `scope` that holds for `group` at `time`, if any: its
    /// line was logged within its `within` before `time` (or after it, by
    /// no more than the input's disorder).
    fn holding(&self, scope: Scope, group: &str, time: i64) -> Option<Held> {
        self.entries
            .iter()
            .zip(&self.state.marks)
            .enumerate()
            .filter(|(_, (e, _))| e.scope == scope)
            .find_map(|(i, (e, m))| {
                let since = *m.peek(group)?;
                (time.saturating_sub(since) <= e.within).then_some(Held { entry: i, since })
            })
    }

    /// Sets the hold of the statuses from `from` on whose group a
    /// progress `unless` entry with a `for` holds.
    fn holds(&self, out: &mut [Status], from: usize) {
        if !self.entries.iter().any(|e| e.hold.is_some()) {
            return;
        }
        for s in out.iter_mut().skip(from).filter(|s| s.active) {
            if let Some(h) = self.holding(Scope::Progress, &s.key, s.support) {
                if let Some(hold) = self.entries[h.entry].hold {
                    s.hold = Some(hold);
                }
            }
        }
    }

    /// Why `key`'s condition holds, in words, when the guard knows it:
    /// progress stopped counting after a line, or none came since when.
    fn reason(&self, key: &str, at: i64) -> Option<String> {
        let name = self.progress_name.as_ref()?;
        if let Some(h) = self.holding(Scope::Progress, key, at) {
            return Some(format!(
                "progress does not count after {} at {}",
                self.entries[h.entry].name,
                format_rfc3339(h.since)
            ));
        }
        Some(match self.state.progress.peek(key) {
            Some(t) => format!("no {name} since {}", format_rfc3339(*t)),
            None => format!("no {name} since it began"),
        })
    }
}

impl Saved for Guarded {
    fn save_state(&self) -> Result<serde_json::Value, serde_json::Error> {
        Ok(serde_json::json!({
            "detector": self.inner.save_state()?,
            "guard": serde_json::to_value(&self.state)?,
        }))
    }

    fn load_state(&mut self, mut saved: serde_json::Value) -> Result<(), serde_json::Error> {
        let guard: Marks = serde_json::from_value(saved["guard"].take())?;
        if guard.marks.len() != self.entries.len() {
            return Err(serde::de::Error::custom(
                "the saved guard has other unless entries",
            ));
        }
        self.inner.load_state(saved["detector"].take())?;
        self.state = guard;
        Ok(())
    }
}

impl Detector for Guarded {
    fn observe(&mut self, hit: &Hit<'_>) {
        match hit.step {
            Step::Primary => {
                if self.holding(Scope::Matches, hit.group, hit.time).is_some() {
                    self.state.discounted += 1;
                } else {
                    self.inner.observe(hit);
                }
            }
            Step::Then | Step::Baseline => self.inner.observe(hit),
            Step::Progress => {
                if self.holding(Scope::Progress, hit.group, hit.time).is_some() {
                    self.state.progress_ignored += 1;
                    return;
                }
                let t = self.state.progress.entry(hit.group, || hit.time);
                *t = (*t).max(hit.time);
                self.inner.progress(hit);
            }
            Step::Unless(i) => {
                if let Some(m) = self.state.marks.get_mut(usize::from(i)) {
                    let t = m.entry(hit.group, || hit.time);
                    *t = (*t).max(hit.time);
                }
                if self.entries.get(usize::from(i)).map(|e| e.scope) == Some(Scope::Matches) {
                    self.inner.leave(hit.group);
                }
            }
            Step::Until(i) => {
                if let Some(m) = self.state.marks.get_mut(usize::from(i)) {
                    m.remove(hit.group);
                }
            }
        }
    }

    /// A group that is starting or stopping is not part of the
    /// population: it is neither evidence nor the fleet it is measured on.
    fn seen(&mut self, group: &str, partition: &str, time: i64) {
        if self.holding(Scope::Matches, group, time).is_none() {
            self.inner.seen(group, partition, time);
        }
    }

    fn leave(&mut self, group: &str) {
        self.inner.leave(group);
    }

    fn idle(&self) -> bool {
        self.inner.idle()
    }

    fn holds(&self, group: &str) -> bool {
        self.inner.holds(group)
    }

    fn population_window(&self) -> Option<i64> {
        self.inner.population_window()
    }

    fn annotate(&mut self, key: &str, template: &str, level: Option<&str>) {
        self.inner.annotate(key, template, level);
    }

    fn evaluate(&mut self, now: i64, out: &mut Vec<Status>) {
        let from = out.len();
        self.inner.evaluate(now, out);
        self.holds(out, from);
    }

    fn due(&self, key: &str) -> Option<i64> {
        self.inner.due(key)
    }

    fn dues(&self, out: &mut Vec<(String, i64)>) {
        self.inner.dues(out);
    }

    fn evaluate_key(&mut self, key: &str, now: i64, out: &mut Vec<Status>) -> bool {
        let from = out.len();
        let done = self.inner.evaluate_key(key, now, out);
        self.holds(out, from);
        done
    }

    fn tracks(&self, key: &str) -> bool {
        self.inner.tracks(key)
    }

    fn evidence(&self, key: &str) -> Evidence {
        let mut e = self.inner.evidence(key);
        if self.inner.population_window().is_none() {
            if let Some(at) = e.last_seen {
                e.reason = self.reason(key, at);
            }
        }
        e
    }

    fn reset(&mut self, key: &str) {
        self.inner.reset(key);
    }

    fn progress(&mut self, hit: &Hit<'_>) {
        self.inner.progress(hit);
    }

    fn discounted(&self) -> u64 {
        self.state.discounted
    }

    fn progress_ignored(&self) -> u64 {
        self.state.progress_ignored
    }

    fn evicted(&self) -> u64 {
        self.inner.evicted()
            + self.state.progress.evicted()
            + self.state.marks.iter().map(Groups::evicted).sum::<u64>()
    }

    fn population(&self, out: &mut Vec<(String, String, i64)>) {
        self.inner.population(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::compile;
    const S: i64 = 1_000_000_000;

    fn rule(detect_and_context: &str) -> Rule {
        let text = format!(
            "rules:\n  - id: r\n    title: t\n    severity: warning\n    match: {{contains: [\"probe failed\"]}}\n    group_by: pod\n{detect_and_context}"
        );
        let set = compile(&[("r.yaml".to_string(), text)]).expect("rule compiles");
        set.rules.into_iter().next().expect("one rule")
    }

    fn hit<'a>(group: &'a str, step: Step, t: i64) -> Hit<'a> {
        Hit {
            group,
            partition: "cluster",
            time: t * S,
            step,
            sample: "line",
            origin: None,
        }
    }

    fn active(d: &mut Guarded, now: i64) -> Vec<(String, bool)> {
        let mut v = Vec::new();
        d.evaluate(now * S, &mut v);
        v.into_iter().map(|s| (s.key, s.active)).collect()
    }

    #[test]
    fn matches_within_an_unless_do_not_count_and_are_counted_as_discounted() {
        let r = rule(
            "    unless:\n      - {after: {contains: [starting]}, within: 60s}\n    detect: {count: {threshold: 2, window: 5m}}\n",
        );
        let mut d = Guarded::new(&r, crate::detect::build_kind(&r));
        d.observe(&hit("new", Step::Unless(0), 0));
        for t in [10, 20, 30] {
            d.observe(&hit("new", Step::Primary, t));
            d.observe(&hit("old", Step::Primary, t));
        }
        assert_eq!(
            active(&mut d, 30),
            vec![("old".into(), true)],
            "the starting pod does not count"
        );
        assert_eq!(d.discounted(), 3);
        // Past `within`, its matches count again.
        d.observe(&hit("new", Step::Primary, 70));
        d.observe(&hit("new", Step::Primary, 80));
        assert!(active(&mut d, 80).contains(&("new".into(), true)));
    }

    #[test]
    fn until_ends_an_exclusion_early() {
        let r = rule(
            "    unless:\n      - {after: {contains: [stopping]}, within: 6h, until: {contains: [assigned]}}\n    detect: {count: {threshold: 1, window: 5m}}\n",
        );
        let mut d = Guarded::new(&r, crate::detect::build_kind(&r));
        d.observe(&hit("db-0", Step::Unless(0), 0));
        d.observe(&hit("db-0", Step::Primary, 600));
        assert!(
            active(&mut d, 600).is_empty(),
            "stopping for 10 minutes: not counted"
        );
        d.observe(&hit("db-0", Step::Until(0), 700));
        d.observe(&hit("db-0", Step::Primary, 800));
        assert_eq!(active(&mut d, 800), vec![("db-0".into(), true)]);
    }

    #[test]
    fn progress_restarts_a_persist_run_unless_it_follows_the_progress_unless() {
        let r = rule(
            "    progress:\n      match: {contains: [left]}\n      unless:\n        - {after: {contains: [failed]}, within: 1h}\n    detect: {persist: {for: 10m, max_gap: 1m}}\n",
        );
        let mut d = Guarded::new(&r, crate::detect::build_kind(&r));
        let mut t = 0;
        while t <= 900 {
            d.observe(&hit("n1", Step::Primary, t));
            d.observe(&hit("n2", Step::Primary, t));
            if t % 300 == 0 && t > 0 {
                d.observe(&hit("n1", Step::Progress, t));
                d.observe(&hit("n2", Step::Progress, t));
            }
            if t == 5 {
                d.observe(&hit("n2", Step::Unless(0), t));
            }
            t += 5;
        }
        assert_eq!(
            active(&mut d, 900),
            vec![("n2".into(), true)],
            "n1 keeps making progress; n2's progress follows a failure"
        );
        let e = d.evidence("n2");
        let reason = e.reason.expect("a reason");
        assert!(
            reason.contains("progress does not count after `failed`"),
            "{reason}"
        );
        let e1 = d.evidence("n1");
        assert!(e1.reason.expect("a reason").starts_with("no `left` since "));
        // Nothing moves on n1 for 10 more minutes: stuck.
        while t <= 1500 {
            d.observe(&hit("n1", Step::Primary, t));
            t += 5;
        }
        assert!(active(&mut d, 1500).contains(&("n1".into(), true)));
    }

    #[test]
    fn progress_drops_a_group_from_a_spread_and_the_state_round_trips() {
        let r = rule(
            "    progress:\n      match: {contains: [ready]}\n    unless:\n      - {after: {contains: [assigned]}, within: 5m}\n    detect: {spread: {groups: 2, window: 3m, min_count: 2}}\n",
        );
        let mut d = Guarded::new(&r, crate::detect::build_kind(&r));
        for t in [0, 10] {
            d.observe(&hit("a", Step::Primary, t));
            d.observe(&hit("b", Step::Primary, t));
        }
        assert_eq!(active(&mut d, 10), vec![("cluster".into(), true)]);
        d.observe(&hit("b", Step::Progress, 20));
        assert_eq!(
            active(&mut d, 20),
            vec![("cluster".into(), false)],
            "b is ready again"
        );
        d.observe(&hit("c", Step::Unless(0), 25));
        let saved = d.save_state().expect("saves");
        let mut back = Guarded::new(&r, crate::detect::build_kind(&r));
        back.load_state(saved).expect("loads");
        for t in [30, 40] {
            back.observe(&hit("c", Step::Primary, t));
        }
        assert!(
            active(&mut back, 40).is_empty(),
            "c is still starting after the restart"
        );
        assert_eq!(back.discounted(), 2);
    }
}
