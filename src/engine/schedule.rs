//! When the cluster-wide rules (spread, share) are evaluated.
//!
//! A per-node rule is decided at the hit that completes it. A cluster-wide
//! rule looks at every group of its partition, so evaluating it at every
//! hit would cost a scan of the fleet per line in a storm. Waiting for the
//! once-a-second tick instead would put up to a second between the line that
//! completed a spread and its page. The schedule does both: a hit evaluates
//! its rule at once unless the rule was evaluated less than
//! [`CLUSTER_EVAL_NS`] of event time ago; then the rule is due that long
//! after its last evaluation, and the engine evaluates it when event time
//! gets there — by the
//! next line's time (replay, deterministic) or, on a live input that went
//! quiet, by the wall clock ([`super::Engine::due`],
//! [`super::Engine::evaluate_due`]). A storm costs at most ten scans per
//! rule and second; a lone line is decided at once.

/// Least event time between two evaluations of one cluster-wide rule
/// (100 ms).
pub const CLUSTER_EVAL_NS: i64 = 100_000_000;

/// Per rule: the event time of its last evaluation and when it is due
/// again (hits arrived since).
#[derive(Debug, Default)]
pub(super) struct Schedule {
    last: Vec<i64>,
    due: Vec<Option<i64>>,
    /// The earliest due time (`i64::MAX` when none): one comparison per line.
    next: i64,
}

impl Schedule {
    /// For `n` rules, none evaluated yet.
    pub(super) fn new(n: usize) -> Schedule {
        Schedule {
            last: vec![i64::MIN; n],
            due: vec![None; n],
            next: i64::MAX,
        }
    }

    /// A hit of rule `ri` at event time `now`: true when the rule is to be
    /// evaluated now; otherwise it is due later.
    pub(super) fn hit(&mut self, ri: usize, now: i64) -> bool {
        if ri >= self.last.len() {
            self.last.resize(ri + 1, i64::MIN);
            self.due.resize(ri + 1, None);
        }
        let at = self.last[ri].saturating_add(CLUSTER_EVAL_NS);
        if now >= at {
            return true;
        }
        if self.due[ri].is_none() {
            self.due[ri] = Some(at);
            self.next = self.next.min(at);
        }
        false
    }

    /// Rule `ri` was evaluated at event time `now` (at a hit, when due, or
    /// on a tick): nothing is due for it any more.
    pub(super) fn evaluated(&mut self, ri: usize, now: i64) {
        if let Some(l) = self.last.get_mut(ri) {
            *l = (*l).max(now);
        }
        if let Some(d) = self.due.get_mut(ri) {
            if d.take().is_some() {
                self.recompute();
            }
        }
    }

    /// The earliest due time, if any.
    pub(super) fn next(&self) -> Option<i64> {
        (self.next != i64::MAX).then_some(self.next)
    }

    /// Whether a rule is due at or before `now` (one comparison).
    pub(super) fn is_due(&self, now: i64) -> bool {
        now >= self.next
    }

    /// The rules due at or before `now` with their due times, in rule order.
    pub(super) fn due_at(&self, now: i64) -> Vec<(usize, i64)> {
        if now < self.next {
            return Vec::new();
        }
        self.due
            .iter()
            .enumerate()
            .filter_map(|(ri, d)| d.filter(|&d| d <= now).map(|d| (ri, d)))
            .collect()
    }

    fn recompute(&mut self) {
        self.next = self.due.iter().flatten().copied().min().unwrap_or(i64::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::{AlertState, Notification};
    use crate::engine::Engine;
    use crate::source::Source;
    const MS: i64 = 1_000_000;
    const T0: i64 = 1_714_570_000_000;

    fn engine() -> Engine {
        let text = r#"novelty: {enabled: false}
rules:
  - id: t.spread
    title: Everyone fails
    severity: critical
    match: {contains: ["boom"]}
    group_by: node
    detect: {spread: {groups: 2, window: 1m}}
"#;
        crate::engine::test_engine(text)
    }

    fn line(e: &mut Engine, at_ms: i64, msg: &str, node: &str, out: &mut Vec<Notification>) {
        let l = format!(
            r#"{{"ts":{:.3},"msg":"{msg}","nodeID":"{node}"}}"#,
            (T0 + at_ms) as f64 / 1000.0
        );
        e.push_line(&Source::named("s"), &l, None, out);
    }

    fn fired(out: &[Notification]) -> Vec<&str> {
        out.iter()
            .filter(|n| n.state == AlertState::Firing)
            .map(|n| n.starts_at.as_str())
            .collect()
    }

    #[test]
    fn a_spread_completed_by_a_lone_line_pages_at_that_line() {
        let mut e = engine();
        let mut out = Vec::new();
        line(&mut e, 0, "boom", "a", &mut out);
        line(&mut e, 400, "boom", "b", &mut out);
        assert_eq!(
            fired(&out),
            vec!["2024-05-01T13:26:40.400Z"],
            "no tick, no later line"
        );
        assert_eq!(e.due(), None);
    }

    #[test]
    fn a_spread_completed_in_a_burst_is_due_and_evaluated_by_clock_or_next_line() {
        for by_clock in [true, false] {
            let mut e = engine();
            let mut out = Vec::new();
            line(&mut e, 0, "boom", "a", &mut out);
            line(&mut e, 50, "boom", "b", &mut out);
            assert!(out.is_empty(), "50 ms after the last evaluation: waits");
            assert_eq!(e.due(), Some((T0 + 100) * MS));
            if by_clock {
                e.evaluate_due((T0 + 99) * MS, &mut out);
                assert!(out.is_empty(), "not due yet");
                e.evaluate_due((T0 + 100) * MS, &mut out);
            } else {
                line(&mut e, 130, "quiet", "c", &mut out);
            }
            assert_eq!(
                fired(&out),
                vec!["2024-05-01T13:26:40.050Z"],
                "by clock: {by_clock}"
            );
            assert_eq!(e.due(), None);
        }
    }

    #[test]
    fn a_lone_hit_is_evaluated_at_once_and_a_storm_ten_times_a_second() {
        let mut s = Schedule::new(2);
        assert!(s.hit(1, 0), "never evaluated: now");
        s.evaluated(1, 0);
        assert!(!s.hit(1, 30 * MS), "30 ms later: due");
        assert!(!s.hit(1, 60 * MS), "still due, once");
        assert_eq!(s.next(), Some(100 * MS));
        assert!(s.due_at(99 * MS).is_empty());
        assert!(!s.is_due(99 * MS));
        assert_eq!(s.due_at(100 * MS), vec![(1, 100 * MS)]);
        s.evaluated(1, 100 * MS);
        assert_eq!(s.next(), None);
        assert!(s.hit(1, 250 * MS), "a quiet 150 ms: at once again");
        assert!(s.hit(0, 250 * MS), "rules are scheduled apart");
    }

    #[test]
    fn a_tick_clears_what_was_due() {
        let mut s = Schedule::new(3);
        s.evaluated(0, 0);
        s.evaluated(2, 0);
        assert!(!s.hit(2, 10 * MS));
        assert!(!s.hit(0, 20 * MS));
        assert_eq!(s.next(), Some(100 * MS));
        s.evaluated(0, 50 * MS);
        assert_eq!(s.next(), Some(100 * MS), "rule 2 still due");
        s.evaluated(2, 50 * MS);
        assert_eq!(s.next(), None);
        assert!(s.due_at(i64::MAX - 1).is_empty());
    }
}
