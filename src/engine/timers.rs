//! When time alone changes something: every rule's keys with the event
//! time at which they next change with no new line.
//!
//! A window that empties, a run broken by a gap, an absence that begins,
//! an alert whose `resolve_after` or `repeat_interval` runs out: each
//! happens at an instant known in advance (the detector's
//! [`crate::detect::Detector::due`], the alert stage's
//! [`crate::alert::Alerts::due`]). The engine keeps those instants here
//! and, whenever event time moves — a line whose time moves the watermark,
//! the live clock, the end of input — first does what was due before the
//! new time, each at its own instant, and only then applies the line. So
//! an hour without a line is an hour of time passing, whether or not other
//! lines filled it, and a replay, a rule test and a live run stamp every
//! notification at the same instant.
//!
//! A min-heap of (instant, rule, key) with one live entry per key (a map
//! holds its instant); an entry whose key was rescheduled since is stale
//! and skipped when it comes up. An entry due earlier than the key's true
//! next change only costs an evaluation that changes nothing. Bounded:
//! keys are the detectors' and alerts' own (each bounded by `max_groups`),
//! the heap is rebuilt from the live entries when stale ones pile up, and
//! a rule's entries for keys nobody tracks any more are dropped past a
//! bound.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// The key of a rule's whole-rule entry: a cluster-wide rule (its
/// partitions are evaluated together), or a full evaluation of a per-group
/// rule (after evictions).
pub(super) const WHOLE_RULE: &str = "";

/// Stale heap entries tolerated beyond the live ones before a rebuild.
const SLACK: usize = 1024;

/// The instants at which rules' keys are due.
#[derive(Debug, Default)]
pub(super) struct Timers {
    heap: BinaryHeap<Reverse<(i64, usize, String)>>,
    /// Per rule: key → the instant of its live heap entry.
    live: Vec<HashMap<String, i64>>,
    entries: usize,
}

impl Timers {
    /// The earliest instant in the heap (possibly of a stale entry: then
    /// taking it costs a pop and nothing else), if any.
    #[inline]
    pub(super) fn next(&self) -> Option<i64> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    /// Makes (`ri`, `key`) due at `at` unless it is due earlier already.
    pub(super) fn set(&mut self, ri: usize, key: &str, at: i64) {
        if self.live.len() <= ri {
            self.live.resize_with(ri + 1, HashMap::new);
        }
        let live = &mut self.live[ri];
        match live.get_mut(key) {
            Some(t) if *t <= at => return,
            Some(t) => *t = at,
            None => {
                live.insert(key.to_string(), at);
                self.entries += 1;
            }
        }
        self.heap.push(Reverse((at, ri, key.to_string())));
        if self.heap.len() > self.entries.saturating_mul(2) + SLACK {
            self.rebuild();
        }
    }

    /// Takes the earliest live entry due at or before `horizon`.
    pub(super) fn pop_due(&mut self, horizon: i64) -> Option<(i64, usize, String)> {
        while let Some(Reverse((t, ri, _))) = self.heap.peek() {
            if *t > horizon {
                return None;
            }
            let (t, ri) = (*t, *ri);
            let Reverse((_, _, key)) = self.heap.pop()?;
            if self.take_live(ri, &key, t) {
                return Some((t, ri, key));
            }
        }
        None
    }

    /// Takes the live entry of (`ri`, `key`) if it is due at or before
    /// `horizon` (its heap entry goes stale), returning its instant.
    pub(super) fn take_key(&mut self, ri: usize, key: &str, horizon: i64) -> Option<i64> {
        let t = *self.live.get(ri)?.get(key)?;
        (t <= horizon && self.take_live(ri, key, t)).then_some(t)
    }

    /// The keys of rule `ri` due at or before `horizon`, earliest first,
    /// taken out (their heap entries go stale).
    pub(super) fn take_rule(&mut self, ri: usize, horizon: i64) -> Vec<(i64, String)> {
        let Some(live) = self.live.get_mut(ri) else {
            return Vec::new();
        };
        let mut due: Vec<(i64, String)> = live
            .iter()
            .filter(|(_, &t)| t <= horizon)
            .map(|(k, &t)| (t, k.clone()))
            .collect();
        for (_, k) in &due {
            live.remove(k);
        }
        self.entries -= due.len();
        due.sort();
        due
    }

    /// Live entries of rule `ri`.
    pub(super) fn of_rule(&self, ri: usize) -> usize {
        self.live.get(ri).map_or(0, HashMap::len)
    }

    /// Drops rule `ri`'s entries whose key `keep` says nobody tracks.
    pub(super) fn retain(&mut self, ri: usize, mut keep: impl FnMut(&str) -> bool) {
        if let Some(live) = self.live.get_mut(ri) {
            let before = live.len();
            live.retain(|k, _| k == WHOLE_RULE || keep(k));
            self.entries -= before - live.len();
        }
    }

    /// Forgets everything (rule indices changed: a reload, a restore).
    pub(super) fn clear(&mut self) {
        *self = Timers::default();
    }

    fn take_live(&mut self, ri: usize, key: &str, t: i64) -> bool {
        let Some(live) = self.live.get_mut(ri) else {
            return false;
        };
        if live.get(key) != Some(&t) {
            return false;
        }
        live.remove(key);
        self.entries -= 1;
        true
    }

    fn rebuild(&mut self) {
        self.heap = self
            .live
            .iter()
            .enumerate()
            .flat_map(|(ri, m)| m.iter().map(move |(k, &t)| Reverse((t, ri, k.clone()))))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_due_in_order_once_and_earlier_wins() {
        let mut t = Timers::default();
        t.set(0, "b", 30);
        t.set(0, "a", 30);
        t.set(1, "a", 10);
        t.set(0, "b", 50);
        assert_eq!(t.next(), Some(10));
        assert_eq!(t.pop_due(5), None);
        assert_eq!(t.pop_due(40), Some((10, 1, "a".into())));
        assert_eq!(t.pop_due(40), Some((30, 0, "a".into())));
        assert_eq!(t.pop_due(40), Some((30, 0, "b".into())), "30 beat 50");
        assert_eq!(t.pop_due(i64::MAX), None);
        // Rescheduled earlier: the old entry is stale.
        t.set(0, "c", 100);
        t.set(0, "c", 20);
        assert_eq!(t.pop_due(i64::MAX), Some((20, 0, "c".into())));
        assert_eq!(t.pop_due(i64::MAX), None, "the entry at 100 was stale");
    }

    #[test]
    fn a_key_or_a_rule_is_taken_ahead_of_the_others() {
        let mut t = Timers::default();
        t.set(0, "a", 10);
        t.set(0, "b", 20);
        t.set(2, "x", 5);
        assert_eq!(t.take_key(0, "b", 15), None, "not due by 15");
        assert_eq!(t.take_key(0, "b", 20), Some(20));
        assert_eq!(t.take_rule(2, 100), vec![(5, "x".to_string())]);
        assert_eq!(t.pop_due(100), Some((10, 0, "a".into())));
        assert_eq!(t.pop_due(100), None);
        assert_eq!((t.of_rule(0), t.entries), (0, 0));
    }

    #[test]
    fn stale_entries_are_bounded() {
        let mut t = Timers::default();
        for i in 0..100_000i64 {
            t.set(0, "k", 1_000_000 - i);
        }
        assert!(t.heap.len() <= 2 + SLACK + 1, "{}", t.heap.len());
        assert_eq!(
            t.pop_due(i64::MAX),
            Some((1_000_000 - 99_999, 0, "k".into()))
        );
        assert_eq!(t.pop_due(i64::MAX), None);
        t.set(0, "gone", 5);
        t.set(0, "kept", 6);
        t.retain(0, |k| k == "kept");
        assert_eq!(t.pop_due(i64::MAX), Some((6, 0, "kept".into())));
    }
}
