//! How event time passes: what is due is done at its own instant before
//! anything later happens (see [`super::timers`]) — when a line moves the
//! watermark, before a hit of the key it concerns, on the live clock, at
//! the end of input — and the cluster-wide rules' schedule of hits (see
//! [`super::schedule`]).

use super::timers::WHOLE_RULE;
use super::{Engine, TICK_NS};
use crate::alert::Notification;
use crate::source::Source;

impl Engine {
    /// Does everything due at or before event time `horizon`, each at its
    /// instant, earliest first.
    pub(super) fn pass_time(&mut self, horizon: i64, out: &mut Vec<Notification>) {
        while let Some((at, ri, key)) = self.timers.pop_due(horizon) {
            self.run_due(ri, &key, at, out);
        }
    }

    /// What is due for rule `ri` alone at or before `horizon`.
    fn pass_time_of(&mut self, ri: usize, horizon: i64, out: &mut Vec<Notification>) {
        loop {
            let due = self.timers.take_rule(ri, horizon);
            if due.is_empty() {
                break;
            }
            for (at, key) in due {
                self.run_due(ri, &key, at, out);
            }
        }
    }

    /// Before a hit of rule `ri` on `key` evaluated at `now`: what was due
    /// for that key by then, so the hit finds the key as time left it (an
    /// episode ended, an alert resolved) even while the watermark lags.
    pub(super) fn catch_up(&mut self, ri: usize, key: &str, now: i64, out: &mut Vec<Notification>) {
        while let Some(at) = self.timers.take_key(ri, key, now) {
            self.run_due(ri, key, at, out);
        }
    }

    /// Evaluates what is due for (`ri`, `key`) at `at` and schedules what
    /// comes next for it.
    pub(super) fn run_due(&mut self, ri: usize, key: &str, at: i64, out: &mut Vec<Notification>) {
        if ri >= self.rules.rules.len() {
            return;
        }
        if key == WHOLE_RULE || self.is_cluster(ri) {
            self.evaluate(ri, at, out);
            self.reschedule_rule(ri, at);
            return;
        }
        self.statuses.clear();
        self.detectors[ri].evaluate_key(key, at, &mut self.statuses);
        let rule = &self.rules.rules[ri];
        let det = self.detectors[ri].as_ref();
        self.alerts.apply(ri, rule, &self.statuses, det, at, out);
        self.alerts.resolve_key_due(ri, rule, key, det, at, out);
        self.reschedule_key(ri, key, at);
    }

    /// Schedules the next change of (`ri`, `key`) (cluster-wide rules:
    /// of the rule) after an evaluation at `now`.
    pub(super) fn reschedule_key(&mut self, ri: usize, key: &str, now: i64) {
        let Some(rule) = self.rules.rules.get(ri) else {
            return;
        };
        let (key, det, alert) = if self.is_cluster(ri) {
            (
                WHOLE_RULE,
                self.detectors[ri].due(WHOLE_RULE),
                self.alerts.min_due(ri, rule, now),
            )
        } else {
            (
                key,
                self.detectors[ri].due(key),
                self.alerts.due(ri, rule, key),
            )
        };
        // What is due at or before `now` was done by this evaluation or
        // waits for a hit (a `for` measured on evidence, say): only later
        // instants are time's to keep.
        let later = |d: Option<i64>| d.filter(|&d| d > now);
        let due = match (later(det), later(alert)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(d) = due {
            let d = self.on_grid(ri, d);
            self.timers.set(ri, key, d);
        }
        // Keys evicted from a detector keep their entry until it comes up;
        // past a bound, those nobody tracks any more go at once.
        if self.timers.of_rule(ri) > rule.max_groups.saturating_mul(2).saturating_add(64) {
            let (det, alerts) = (&self.detectors[ri], &self.alerts);
            self.timers
                .retain(ri, |k| det.due(k).is_some() || alerts.tracks(ri, k));
        }
    }

    /// Schedules the next change of every key of rule `ri` after a full
    /// evaluation at `now`.
    fn reschedule_rule(&mut self, ri: usize, now: i64) {
        if self.is_cluster(ri) {
            self.reschedule_key(ri, WHOLE_RULE, now);
            return;
        }
        let Some(rule) = self.rules.rules.get(ri) else {
            return;
        };
        let mut dues = Vec::new();
        self.detectors[ri].dues(&mut dues);
        self.alerts.dues(ri, rule, &mut dues);
        for (k, d) in dues {
            if d > now {
                let d = self.on_grid(ri, d);
                self.timers.set(ri, &k, d);
            }
        }
    }

    /// Schedules every rule's keys afresh (rule indices changed: a reload,
    /// a restart), adopted alerts' grace starting at the watermark. The
    /// cluster-wide rules are evaluated at the watermark first, as their
    /// schedule of hits was lost.
    pub(super) fn reschedule_all(&mut self) {
        self.timers.clear();
        let known = self.max_time.map(|_| self.watermark);
        if let Some(w) = known {
            self.alerts.start_adoptions(w);
        }
        for ri in 0..self.rules.rules.len() {
            self.reschedule_rule(ri, i64::MIN);
            if let (Some(w), true) = (known, self.is_cluster(ri)) {
                let w = self.on_grid(ri, w);
                self.timers.set(ri, WHOLE_RULE, w);
            }
        }
    }

    /// After a hit's detector evicted groups (`max_groups`): a full
    /// evaluation of the rule a second later resolves the alerts of groups
    /// gone (at most one a second in a flood of groups).
    pub(super) fn evicted_since(&mut self, ri: usize, before: u64, now: i64) {
        if self.detectors[ri].evicted() > before {
            let at = self.on_grid(ri, now.saturating_add(TICK_NS));
            self.timers.set(ri, WHOLE_RULE, at);
        }
    }

    /// The first instant at or after `at` at which rule `ri` may be
    /// evaluated: `at` itself, or for a rule evaluated like a ruler's
    /// (`evaluate_every`) the next multiple of its interval.
    pub(super) fn on_grid(&self, ri: usize, at: i64) -> i64 {
        let every = self.rules.rules.get(ri).map_or(0, |r| r.evaluate_every);
        if every <= 0 {
            return at;
        }
        let k = at.div_euclid(every);
        let base = k.saturating_mul(every);
        if base == at {
            at
        } else {
            base.saturating_add(every)
        }
    }

    /// Evaluates every rule at `now` (event time); a rule evaluated like
    /// a ruler's only when `now` is one of its instants.
    pub(super) fn tick(&mut self, now: i64, out: &mut Vec<Notification>) {
        self.last_tick = now;
        for ri in 0..self.rules.rules.len() {
            if self.on_grid(ri, now) != now {
                continue;
            }
            self.evaluate(ri, now, out);
            self.reschedule_rule(ri, now);
        }
    }

    /// The event time at which a cluster-wide rule is next due (hits came
    /// after its last evaluation); a live loop wakes then and calls
    /// [`Engine::evaluate_due`].
    pub fn due(&self) -> Option<i64> {
        self.schedule.next()
    }

    /// Evaluates the cluster-wide rules due at event time `now`, each at
    /// its due time, in rule order.
    pub fn evaluate_due(&mut self, now: i64, out: &mut Vec<Notification>) {
        for (ri, at) in self.schedule.due_at(now) {
            let at = self.watermark.max(at);
            self.catch_up(ri, WHOLE_RULE, at, out);
            self.evaluate(ri, at, out);
            self.reschedule_key(ri, WHOLE_RULE, at);
        }
    }

    /// How far behind the live clock absences are decided: twice the
    /// input's observed disorder, at least 0.5 s, at most the configured
    /// lateness.
    fn live_lateness(&self) -> i64 {
        self.disorder.live_lateness(self.opts.lateness_ns)
    }

    /// The live loop's clock: [`Engine::advance_to`], and then the rules
    /// that time alone makes fire (`absent`) decided at `now` less the
    /// disorder the input showed (the private `engine::disorder`) rather than at
    /// the watermark, which waits the whole lateness allowance. Windows,
    /// counts and resolutions stay on the watermark, as in a replay.
    pub fn advance_live(&mut self, now: i64, out: &mut Vec<Notification>) {
        if self.max_time.is_none() {
            return;
        }
        self.clock_now = self.clock_now.max(now);
        self.advance_to(now, out);
        let early = now - self.live_lateness();
        if early <= self.watermark {
            return;
        }
        for ri in 0..self.rules.rules.len() {
            if !matches!(self.rules.rules[ri].detect, crate::rules::Detect::Absent(_)) {
                continue;
            }
            loop {
                let due = self.timers.take_rule(ri, early);
                if due.is_empty() {
                    break;
                }
                for (at, key) in due {
                    self.run_due(ri, &key, at, out);
                }
            }
        }
    }

    /// Advances event time while input is idle, so windows slide, alerts
    /// resolve and absences fire, each at its instant. `now` is the event
    /// time the clock implies (e.g. newest event time + wall time since it
    /// arrived); the watermark stands the lateness allowance behind it.
    pub fn advance_to(&mut self, now: i64, out: &mut Vec<Notification>) {
        if self.max_time.is_none() {
            return;
        }
        let wm = now - self.opts.lateness_ns;
        if wm > self.watermark {
            self.watermark = wm;
            self.pass_time(wm, out);
        }
    }

    /// End of input: flushes partial lines and evaluates at the newest event
    /// time (the lateness allowance is no longer needed).
    pub fn finish(&mut self, out: &mut Vec<Notification>) {
        for (_, text) in self.decoder.drain_partials() {
            let src = Source::named("partial");
            self.push_line(&src, &text, None, out);
        }
        if let Some(m) = self.max_time.or(self.untimed_at) {
            self.watermark = self.watermark.max(m);
            self.pass_time(self.watermark, out);
            self.tick(self.watermark, out);
            // A rule evaluated like a ruler's gets the ruler's next
            // evaluation after the last line: lines in its window count
            // there, as they would on a ruler whose clock went on.
            for ri in 0..self.rules.rules.len() {
                let at = self.on_grid(ri, self.watermark);
                if at != self.watermark {
                    self.pass_time_of(ri, at, out);
                    self.evaluate(ri, at, out);
                }
            }
        }
        self.decoder.log_input_hints();
    }
}

#[cfg(test)]
mod tests {
    use crate::alert::{AlertState, Notification};
    use crate::source::Source;
    const S: i64 = 1_000_000_000;
    /// 2024-05-01T12:00:00Z.
    const T0: i64 = 1_714_564_800 * S;

    const RULES: &str = r#"novelty: {enabled: false}
rules:
  - id: t.absent
    title: Heartbeat missing
    severity: warning
    match: {contains: ["beat"]}
    group_by: node
    detect: {absent: {for: 1m}}
    for: 30s
  - id: t.persist
    title: Stuck
    severity: warning
    match: {contains: ["waiting"]}
    group_by: node
    detect: {persist: {for: 20s, max_gap: 10s}}
  - id: t.sequence
    title: Drain failed after shutdown
    severity: warning
    match: {contains: ["shutting down"]}
    group_by: node
    detect: {sequence: {then: {contains: ["drain failed"]}, within: 1m}}
  - id: t.share
    title: Black hole
    severity: warning
    match: {contains: ["egress failed"]}
    group_by: node
    detect: {share: {window: 1m, min_total: 3, min_share: 0.8, min_groups: 2}}
    resolve_after: 10s
"#;

    fn feed(e: &mut crate::engine::Engine, at_s: i64, msg: &str, node: &str) -> Vec<Notification> {
        let ts = crate::clock::format_rfc3339(T0 + at_s * S);
        let line = format!(r#"{{"ts":"{ts}","msg":"{msg}","nodeID":"{node}"}}"#);
        let mut out = Vec::new();
        e.push_line(&Source::named(node), &line, None, &mut out);
        out
    }

    /// (rule, state, the instant it was made, HH:MM:SS).
    fn said(out: &[Notification]) -> Vec<(String, AlertState, String)> {
        out.iter()
            .map(|n| {
                let at = crate::clock::format_rfc3339(n.at);
                (n.rule.clone(), n.state, at[11..19].to_string())
            })
            .collect()
    }

    fn fact(rule: &str, state: AlertState, at: &str) -> (String, AlertState, String) {
        (rule.to_string(), state, at.to_string())
    }

    #[test]
    fn an_absence_fires_at_its_instant_when_the_next_line_is_an_hour_later() {
        let mut e = crate::engine::test_engine(RULES);
        assert!(feed(&mut e, 0, "beat", "n1").is_empty());
        // An unrelated line an hour later: the absence began at 12:01:00
        // and held its 30 s at 12:01:30.
        let out = feed(&mut e, 3_600, "unrelated", "n2");
        assert_eq!(
            said(&out),
            [fact("t.absent", AlertState::Firing, "12:01:30")]
        );
        assert_eq!(out[0].starts_at.as_str(), "2024-05-01T12:01:00.000Z");
        // The heartbeat comes back: resolved at once.
        let out = feed(&mut e, 3_700, "beat", "n1");
        assert_eq!(
            said(&out),
            [fact("t.absent", AlertState::Resolved, "13:01:40")]
        );
    }

    #[test]
    fn a_broken_run_resolves_when_its_gap_and_resolve_after_ran_out() {
        let mut e = crate::engine::test_engine(RULES);
        let mut out = Vec::new();
        for s in (0..=30).step_by(5) {
            out.extend(feed(&mut e, s, "waiting", "n1"));
        }
        assert_eq!(
            said(&out),
            [fact("t.persist", AlertState::Firing, "12:00:20")]
        );
        // Silent after 30 s: broken just past 40 s, resolved 10 s later.
        let out = feed(&mut e, 7_200, "unrelated", "n2");
        assert_eq!(
            said(&out),
            [fact("t.persist", AlertState::Resolved, "12:00:50")]
        );
    }

    #[test]
    fn a_sequence_completed_again_after_a_gap_is_a_new_episode() {
        let mut e = crate::engine::test_engine(RULES);
        let mut out = feed(&mut e, 0, "shutting down", "n1");
        out.extend(feed(&mut e, 5, "drain failed", "n1"));
        out.extend(feed(&mut e, 3_600, "shutting down", "n1"));
        out.extend(feed(&mut e, 3_605, "drain failed", "n1"));
        assert_eq!(
            said(&out),
            [
                fact("t.sequence", AlertState::Firing, "12:00:05"),
                fact("t.sequence", AlertState::Resolved, "12:02:05"),
                fact("t.sequence", AlertState::Firing, "13:00:05"),
            ]
        );
        assert_eq!(out[2].count, 1, "the old completion is not counted again");
    }

    #[test]
    fn a_black_hole_clears_when_its_failures_leave_the_window() {
        let mut e = crate::engine::test_engine(RULES);
        let mut out = feed(&mut e, 0, "idle", "n2");
        for s in 1..=4 {
            out.extend(feed(&mut e, s, "egress failed", "n1"));
        }
        assert_eq!(
            said(&out),
            [fact("t.share", AlertState::Firing, "12:00:03")]
        );
        // The failures at 1 and 2 s leave at 61 and 62 s: 2 < min_total;
        // resolved 10 s later, whatever comes next and when.
        let out = feed(&mut e, 10_000, "idle", "n2");
        assert_eq!(
            said(&out),
            [fact("t.share", AlertState::Resolved, "12:01:12")]
        );
    }
}
