//! Flap damping at the alert level: an alert that resolves and fires again
//! within the flap window is one episode for its receivers. Without it an
//! hour of a condition that comes and goes pages on-call a dozen times;
//! with `--group-incidents` the incident's flap window does this for
//! incidents, and this stage does it for alerts when they are not grouped.
//!
//! A resolution is held for the window (event time). A firing of the same
//! alert before the window ends takes the held resolution back: nothing is
//! sent, and what follows carries the episode's first `starts_at`, so every
//! receiver (Alertmanager, PagerDuty's dedup key, the spools' receipts)
//! sees one episode. When the window passes with no new firing, the held
//! resolution goes out with its own `ends_at`, made at the end of the
//! window. Held resolutions are bounded ([`MAX_HELD`]: past it a
//! resolution passes at once), counted, kept in the checkpoint, and shown
//! on the status page.

use super::{AlertState, Notification};
use crate::clock::Stamp;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Most resolutions held at once; past it a resolution is sent at once.
pub const MAX_HELD: usize = 10_000;

/// The alert-level flap hold.
#[derive(Debug, Default)]
pub struct FlapHold {
    window: i64,
    /// Held resolutions by fingerprint, with the instant they were made.
    held: BTreeMap<String, Notification>,
    /// Episodes that went on through a flap: fingerprint → the `starts_at`
    /// receivers were sent.
    continued: HashMap<String, Stamp>,
    /// Re-firings taken back into their episode since the start.
    flaps: u64,
    /// Resolutions sent at once because [`MAX_HELD`] were held.
    overflow: u64,
    /// The ids of the rules loaded, when known: a resolution of a rule
    /// that is gone (removed by a reload) cannot flap and goes at once.
    rules: Option<HashSet<String>>,
    /// No held resolution is due before this instant (a lower bound:
    /// a tick before it has nothing to do and scans nothing).
    next_due: i64,
}

/// What a checkpoint keeps of the hold.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FlapState {
    /// Held resolutions and the instant (ns) each was made.
    #[serde(default)]
    pub held: Vec<(Notification, i64)>,
    /// Fingerprint → the episode's first `starts_at`.
    #[serde(default)]
    pub continued: Vec<(String, String)>,
    /// Flaps held so far.
    #[serde(default)]
    pub flaps: u64,
}

impl FlapHold {
    /// A hold of `window_ns` (0: off, every notification passes).
    pub fn new(window_ns: i64) -> FlapHold {
        FlapHold {
            window: window_ns.max(0),
            next_due: i64::MAX,
            ..FlapHold::default()
        }
    }

    /// Whether resolutions are held.
    pub fn on(&self) -> bool {
        self.window > 0
    }

    /// The flap window (ns; 0 when off).
    pub fn window(&self) -> i64 {
        self.window
    }

    /// The rules loaded now (at the start and after every reload).
    pub fn set_rules<'a>(&mut self, ids: impl IntoIterator<Item = &'a str>) {
        self.rules = Some(ids.into_iter().map(str::to_string).collect());
        // A resolution of a rule now gone is due at once.
        self.next_due = i64::MIN;
    }

    /// Holds a resolution until its window passes.
    fn hold(&mut self, r: Notification) {
        self.next_due = self.next_due.min(r.at.saturating_add(self.window));
        self.held.insert(r.fingerprint.clone(), r);
    }

    fn loaded(&self, rule: &str) -> bool {
        self.rules.as_ref().is_none_or(|r| r.contains(rule))
    }

    /// Re-firings taken back into their episode since the start.
    pub fn flaps(&self) -> u64 {
        self.flaps
    }

    /// Resolutions sent at once because the hold was full.
    pub fn overflow(&self) -> u64 {
        self.overflow
    }

    /// The resolutions held now, oldest first.
    pub fn held(&self) -> impl Iterator<Item = &Notification> {
        self.held.values()
    }

    /// One notification from the engine: what goes on (none, it, or a
    /// held resolution whose window had passed and then it) into `out`.
    pub fn observe(&mut self, mut n: Notification, out: &mut Vec<Notification>) {
        if self.window == 0 || n.incident.is_some() {
            out.push(n);
            return;
        }
        // Every resolution whose window passed before this notification
        // was made goes first, at its own instant: a block of input that
        // makes a resolution and, minutes later, another alert's firing
        // sends them in that order, as a live run would.
        if n.at > 0 {
            self.tick(n.at, out);
        }
        if let Some(first) = self.continued.get(&n.fingerprint) {
            n.starts_at = first.clone();
        }
        match n.state {
            AlertState::Resolved if !self.loaded(&n.rule) => {
                self.held.remove(&n.fingerprint);
                self.continued.remove(&n.fingerprint);
                out.push(n);
            }
            AlertState::Resolved => {
                if self.held.len() >= MAX_HELD && !self.held.contains_key(&n.fingerprint) {
                    self.overflow += 1;
                    if self.overflow == 1 {
                        tracing::warn!(
                            held = MAX_HELD,
                            "Too many resolutions held for their flap window; further ones are sent at once (counted)."
                        );
                    }
                    self.continued.remove(&n.fingerprint);
                    out.push(n);
                    return;
                }
                self.hold(n);
            }
            AlertState::Firing => match self.held.remove(&n.fingerprint) {
                Some(r) if !n.repeat => {
                    // A flap: the episode goes on as its receivers know it.
                    self.flaps += 1;
                    self.continued.insert(n.fingerprint.clone(), r.starts_at);
                }
                Some(r) => {
                    // A repeat of a held alert (the engine's episode
                    // changed without a new firing): the resolution stands.
                    self.hold(r);
                    out.push(n);
                }
                None => out.push(n),
            },
        }
    }

    /// Event time is `now`: the resolutions whose window has passed go
    /// out, made at the window's end.
    pub fn tick(&mut self, now: i64, out: &mut Vec<Notification>) {
        if now < self.next_due {
            return;
        }
        let due: Vec<String> = self
            .held
            .iter()
            .filter(|(_, r)| r.at.saturating_add(self.window) <= now || !self.loaded(&r.rule))
            .map(|(k, _)| k.clone())
            .collect();
        let mut released = Vec::new();
        for k in due {
            self.release(k, &mut released);
        }
        released.sort_by_key(|r| r.at);
        out.extend(released);
        self.next_due = self
            .held
            .values()
            .map(|r| r.at.saturating_add(self.window))
            .min()
            .unwrap_or(i64::MAX);
    }

    /// End of input: every held resolution goes out (nothing can fire
    /// again), each at its window's end.
    pub fn finish(&mut self, out: &mut Vec<Notification>) {
        self.tick(i64::MAX, out);
    }

    fn release(&mut self, key: String, out: &mut Vec<Notification>) {
        if let Some(mut r) = self.held.remove(&key) {
            if self.loaded(&r.rule) {
                r.at = r.at.saturating_add(self.window);
            }
            self.continued.remove(&key);
            out.push(r);
        }
    }

    /// What a checkpoint keeps.
    pub fn save(&self) -> FlapState {
        FlapState {
            held: self.held.values().map(|n| (n.clone(), n.at)).collect(),
            continued: self
                .continued
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
            flaps: self.flaps,
        }
    }

    /// Takes back what a checkpoint kept.
    pub fn restore(&mut self, s: FlapState) {
        for (mut n, at) in s.held {
            n.at = at;
            if self.held.len() < MAX_HELD {
                self.hold(n);
            }
        }
        self.continued = s
            .continued
            .into_iter()
            .map(|(k, v)| (k, Stamp::from(v)))
            .collect();
        self.flaps = s.flaps;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: i64 = 60_000_000_000;

    fn note(state: AlertState, at: i64, starts: i64) -> Notification {
        let mut n = crate::alert::test_notification("r", "g");
        n.state = state;
        n.at = at;
        n.starts_at = Stamp::at(starts);
        if state == AlertState::Resolved {
            n.ends_at = Some(Stamp::at(at));
        }
        n
    }

    #[test]
    fn an_hour_of_flapping_is_one_firing_and_one_resolution() {
        let mut h = FlapHold::new(5 * M);
        let mut out = Vec::new();
        // Firing 2 minutes, resolved 2 minutes, for an hour.
        for k in 0..15 {
            let t = k * 4 * M;
            h.observe(note(AlertState::Firing, t, t), &mut out);
            h.tick(t, &mut out);
            h.observe(note(AlertState::Resolved, t + 2 * M, t), &mut out);
            h.tick(t + 2 * M, &mut out);
        }
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(h.flaps(), 14);
        assert_eq!(h.held().count(), 1);
        h.tick(58 * M, &mut out);
        assert_eq!(out.len(), 1, "the window has not passed at 58m");
        h.tick(63 * M, &mut out);
        assert_eq!(out.len(), 2);
        let (f, r) = (&out[0], &out[1]);
        assert_eq!(
            (f.state, r.state),
            (AlertState::Firing, AlertState::Resolved)
        );
        // One episode: the resolution carries the first start and its own end.
        assert_eq!(r.starts_at, f.starts_at);
        assert_eq!(r.ends_at, Some(Stamp::at(58 * M)));
        assert_eq!(r.at, 63 * M, "made when the window ran out");
    }

    #[test]
    fn each_held_resolution_goes_at_its_own_window_end_whatever_was_taken_back() {
        let mut h = FlapHold::new(5 * M);
        let mut out = Vec::new();
        let mut a = note(AlertState::Firing, 0, 0);
        a.fingerprint = "a".into();
        let mut b = a.clone();
        b.fingerprint = "b".into();
        let at = |n: &Notification, state, t| {
            let mut n = n.clone();
            n.state = state;
            n.at = t;
            n
        };
        for n in [&a, &b] {
            h.observe(n.clone(), &mut out);
        }
        h.observe(at(&a, AlertState::Resolved, M), &mut out);
        h.observe(at(&b, AlertState::Resolved, 3 * M), &mut out);
        // a flaps back (its hold, the earliest due, is taken back) and
        // resolves again later than b.
        h.observe(at(&a, AlertState::Firing, 2 * M), &mut out);
        h.observe(at(&a, AlertState::Resolved, 4 * M), &mut out);
        let mut sent = Vec::new();
        for t in (0..=10).map(|k| k * M) {
            let before = out.len();
            h.tick(t, &mut out);
            sent.extend(
                out[before..]
                    .iter()
                    .map(|n| (n.fingerprint.clone(), t, n.at)),
            );
        }
        assert_eq!(
            sent,
            [
                ("b".to_string(), 8 * M, 8 * M),
                ("a".to_string(), 9 * M, 9 * M)
            ]
        );
        assert_eq!(h.held().count(), 0);
    }

    #[test]
    fn a_firing_after_the_window_is_a_new_episode_and_the_resolution_goes_first() {
        let mut h = FlapHold::new(5 * M);
        let mut out = Vec::new();
        h.observe(note(AlertState::Firing, 0, 0), &mut out);
        h.observe(note(AlertState::Resolved, 2 * M, 0), &mut out);
        // No tick between: the next firing comes 10 minutes later.
        h.observe(note(AlertState::Firing, 12 * M, 12 * M), &mut out);
        let states: Vec<_> = out.iter().map(|n| (n.state, n.at)).collect();
        assert_eq!(
            states,
            [
                (AlertState::Firing, 0),
                (AlertState::Resolved, 7 * M),
                (AlertState::Firing, 12 * M)
            ]
        );
        assert_eq!(out[2].starts_at, Stamp::at(12 * M));
        assert_eq!(h.flaps(), 0);
    }

    #[test]
    fn another_alerts_later_firing_comes_after_a_resolution_due_before_it() {
        let mut h = FlapHold::new(5 * M);
        let mut out = Vec::new();
        let mut a = note(AlertState::Firing, 0, 0);
        a.fingerprint = "a".into();
        h.observe(a.clone(), &mut out);
        a.state = AlertState::Resolved;
        a.at = 2 * M;
        a.ends_at = Some(Stamp::at(2 * M));
        h.observe(a, &mut out);
        // One block of input made both: no tick between them.
        let mut b = note(AlertState::Firing, 11 * M, 11 * M);
        b.fingerprint = "b".into();
        h.observe(b, &mut out);
        let seen: Vec<_> = out
            .iter()
            .map(|n| (n.fingerprint.as_str(), n.state, n.at))
            .collect();
        assert_eq!(
            seen,
            [
                ("a", AlertState::Firing, 0),
                ("a", AlertState::Resolved, 7 * M),
                ("b", AlertState::Firing, 11 * M)
            ]
        );
    }

    #[test]
    fn a_removed_rule_cannot_flap_its_resolution_goes_at_once() {
        let mut h = FlapHold::new(5 * M);
        h.set_rules(["r"]);
        let mut out = Vec::new();
        h.observe(note(AlertState::Firing, 0, 0), &mut out);
        h.observe(note(AlertState::Resolved, M, 0), &mut out);
        assert_eq!(out.len(), 1, "held while the rule is loaded");
        // A reload removes the rule: what was held goes at the next tick,
        // at the instant it was made.
        h.set_rules(["other"]);
        h.tick(2 * M, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].at, M);
        h.observe(note(AlertState::Firing, 3 * M, 3 * M), &mut out);
        h.observe(note(AlertState::Resolved, 4 * M, 3 * M), &mut out);
        assert_eq!(out.len(), 4, "not held: {out:?}");
        assert_eq!(h.held().count(), 0);
    }

    #[test]
    fn the_hold_survives_a_restart_and_off_passes_everything() {
        let mut h = FlapHold::new(5 * M);
        let mut out = Vec::new();
        h.observe(note(AlertState::Firing, 0, 0), &mut out);
        h.observe(note(AlertState::Resolved, 2 * M, 0), &mut out);
        h.observe(note(AlertState::Firing, 3 * M, 3 * M), &mut out);
        h.observe(note(AlertState::Resolved, 4 * M, 3 * M), &mut out);
        let saved = serde_json::to_string(&h.save()).unwrap();
        let mut again = FlapHold::new(5 * M);
        again.restore(serde_json::from_str(&saved).unwrap());
        assert_eq!(again.flaps(), 1);
        again.observe(note(AlertState::Firing, 6 * M, 6 * M), &mut out);
        again.observe(note(AlertState::Resolved, 7 * M, 6 * M), &mut out);
        again.finish(&mut out);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(
            out[1].starts_at,
            Stamp::at(0),
            "the first start, across the restart"
        );
        assert_eq!(out[1].at, 12 * M);
        let mut off = FlapHold::new(0);
        let mut all = Vec::new();
        off.observe(note(AlertState::Firing, 0, 0), &mut all);
        off.observe(note(AlertState::Resolved, M, 0), &mut all);
        off.observe(note(AlertState::Firing, 2 * M, 2 * M), &mut all);
        assert_eq!(all.len(), 3);
    }
}
