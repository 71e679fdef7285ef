//! A sliding event counter with bounded memory.
//!
//! While the window holds few distinct instants (at most [`EXACT`]) it
//! keeps each one: the count is exact to the nanosecond, so a threshold of
//! "more than 5 in 5m" changes at the instants a ruler's evaluation of
//! `count_over_time` would see. Past that it keeps at most [`BUCKETS`] time
//! buckets per window, so a group that logs a million matches costs the
//! same few hundred bytes as one that logs two; the price is resolution:
//! the window edge is exact to `window / BUCKETS` (1 s for a 60 s window).
//! A window that empties is exact again.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Buckets per window once it holds many instants.
pub const BUCKETS: i64 = 60;
/// Distinct instants kept exactly before the window turns to buckets.
pub const EXACT: usize = 2 * BUCKETS as usize;

/// Sliding count over event time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Window {
    /// The bucket width now (1: exact instants).
    width: i64,
    span: i64,
    buckets: VecDeque<(i64, u64)>,
    total: u64,
    /// The width of buckets (`span / BUCKETS`); 0 in a checkpoint written
    /// before exact instants, whose `width` is that.
    #[serde(default)]
    coarse: i64,
}

impl Window {
    /// A window of `span` nanoseconds.
    pub fn new(span: i64) -> Window {
        let span = span.max(1);
        Window {
            width: 1,
            span,
            buckets: VecDeque::new(),
            total: 0,
            coarse: (span / BUCKETS).max(1),
        }
    }

    /// Adds one event at time `t`.
    pub fn add(&mut self, t: i64) {
        let b = t.div_euclid(self.width);
        match self.buckets.back_mut() {
            Some(last) if last.0 == b => last.1 += 1,
            Some(last) if last.0 < b => self.buckets.push_back((b, 1)),
            None => self.buckets.push_back((b, 1)),
            Some(_) => match self.buckets.iter_mut().rev().find(|(k, _)| *k == b) {
                Some(slot) => slot.1 += 1,
                None => {
                    // Keep buckets ordered; late events go in their place.
                    let pos = self
                        .buckets
                        .iter()
                        .rposition(|(k, _)| *k < b)
                        .map_or(0, |p| p + 1);
                    self.buckets.insert(pos, (b, 1));
                }
            },
        }
        self.total += 1;
        if self.width == 1 && self.buckets.len() > EXACT {
            self.coarsen();
        }
    }

    /// From exact instants to buckets of `span / BUCKETS`.
    fn coarsen(&mut self) {
        let w = if self.coarse > 0 {
            self.coarse
        } else {
            (self.span / BUCKETS).max(1)
        };
        let mut merged: VecDeque<(i64, u64)> = VecDeque::with_capacity(BUCKETS as usize + 1);
        for &(t, c) in &self.buckets {
            let k = t.div_euclid(w);
            match merged.back_mut() {
                Some(last) if last.0 == k => last.1 += c,
                _ => merged.push_back((k, c)),
            }
        }
        self.buckets = merged;
        self.width = w;
    }

    /// Drops events at or before `now - span`, then returns the count.
    pub fn count(&mut self, now: i64) -> u64 {
        let cutoff = (now - self.span).div_euclid(self.width);
        while let Some(&(k, c)) = self.buckets.front() {
            if k > cutoff {
                break;
            }
            self.total -= c;
            self.buckets.pop_front();
        }
        if self.total == 0 && self.width != 1 {
            // Empty: exact again.
            if self.coarse == 0 {
                self.coarse = self.width;
            }
            self.width = 1;
        }
        self.total
    }

    /// Count without expiring.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// When bucket `k` leaves the window: the first `now` at which
    /// [`Window::count`] no longer counts it.
    fn expiry(&self, k: i64) -> i64 {
        k.saturating_mul(self.width).saturating_add(self.span)
    }

    /// The event time at which the count, without new events, falls below
    /// `n` (`n` = 1: the window empties); None when it is below already.
    /// Exact: buckets leave at known instants.
    pub fn falls_below(&self, n: u64) -> Option<i64> {
        if self.total < n.max(1) {
            return None;
        }
        let mut left = self.total;
        for &(k, c) in &self.buckets {
            left -= c;
            if left < n {
                return Some(self.expiry(k));
            }
        }
        None
    }

    /// The event time at which the oldest bucket leaves (the count's next
    /// change without new events), if any.
    pub fn next_change(&self) -> Option<i64> {
        self.buckets.front().map(|&(k, _)| self.expiry(k))
    }

    /// True when no events remain.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const S: i64 = 1_000_000_000;

    #[test]
    fn counts_inside_the_window_only() {
        let mut w = Window::new(60 * S);
        for t in [0, 10, 20, 59] {
            w.add(t * S);
        }
        assert_eq!(w.count(59 * S), 4);
        assert_eq!(
            w.count(60 * S),
            3,
            "the event at 0 is exactly one window old"
        );
        assert_eq!(w.count(80 * S), 1);
        assert_eq!(w.count(200 * S), 0);
        assert!(w.is_empty());
    }

    #[test]
    fn the_instants_the_count_changes_are_exact() {
        let mut w = Window::new(60 * S);
        for t in [0, 10, 20, 59] {
            w.add(t * S);
        }
        assert_eq!(w.next_change(), Some(60 * S));
        assert_eq!(w.falls_below(4), Some(60 * S));
        assert_eq!(w.falls_below(3), Some(70 * S), "two must leave");
        assert_eq!(w.falls_below(1), Some(119 * S), "empty when 59 s leaves");
        assert_eq!(w.falls_below(5), None, "below already");
        // The instants agree with count().
        assert_eq!(w.count(70 * S - 1), 3);
        assert_eq!(w.count(70 * S), 2);
        assert_eq!(w.count(119 * S - 1), 1);
        assert_eq!(w.count(119 * S), 0);
        assert_eq!((w.next_change(), w.falls_below(1)), (None, None));
    }

    #[test]
    fn late_events_land_in_order_and_memory_is_bounded() {
        let mut w = Window::new(60 * S);
        w.add(30 * S);
        w.add(10 * S);
        assert_eq!(w.count(75 * S), 1);
        for i in 0..100_000 {
            w.add(100 * S + i % (60 * S));
        }
        assert!(w.buckets.len() <= BUCKETS as usize + 1);
    }

    #[test]
    fn few_instants_are_exact_and_many_are_bucketed_until_the_window_empties() {
        // 5m window: buckets would be 5 s wide.
        let mut w = Window::new(300 * S);
        let ms = 1_000_000;
        w.add(2_400 * ms); // 2.4 s: a bucket would drop it at 300 s
        w.add(7_000 * ms);
        assert_eq!(w.count(300 * S), 2, "2.4 s is in (0 s, 300 s]");
        assert_eq!(w.falls_below(2), Some(302_400 * ms));
        assert_eq!(w.count(302_400 * ms), 1);
        // Many distinct instants: bucketed, memory bounded.
        for i in 0..10_000 {
            w.add(400 * S + i * 10 * ms);
        }
        assert!(
            w.buckets.len() <= BUCKETS as usize + 2,
            "{}",
            w.buckets.len()
        );
        assert_eq!(w.count(400 * S), 10_000);
        // Emptied, it is exact again.
        assert_eq!(w.count(2_000 * S), 0);
        w.add(2_001_500 * ms);
        assert_eq!(w.count(2_301_499 * ms), 1);
        assert_eq!(w.count(2_301_500 * ms), 0);
    }

    #[test]
    fn a_checkpoint_from_before_exact_instants_reads_as_buckets() {
        let old = r#"{"width":5000000000,"span":300000000000,"buckets":[[1,2]],"total":2}"#;
        let mut w: Window = serde_json::from_str(old).unwrap();
        assert_eq!(w.count(304 * S), 2);
        assert_eq!(w.count(305 * S), 0);
        w.add(400 * S + 1);
        assert_eq!(w.count(700 * S + 1), 0);
    }
}
