//! `count`: at least N matches for a group within a sliding window W.
//!
//! Active while the window holds ≥ N matches. The episode (its count, first
//! match and samples) lasts until the group's window empties.

use super::window::Window;
use super::{Detector, Evidence, Groups, Hit, Samples, Status};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct G {
    win: Window,
    episode: u64,
    first: i64,
    last: i64,
    samples: Samples,
    since: Option<i64>,
}

impl super::GroupState for G {
    fn count(&self) -> u64 {
        self.episode
    }
    fn first_seen(&self) -> Option<i64> {
        Some(self.first)
    }
    fn last_seen(&self) -> Option<i64> {
        Some(self.last)
    }
    fn samples(&self) -> &Samples {
        &self.samples
    }
    fn in_window(&self) -> Option<u64> {
        Some(self.win.total())
    }
}

/// The count detector.
#[derive(Serialize, Deserialize)]
pub struct Count {
    threshold: u64,
    window: i64,
    groups: Groups<G>,
}

impl Count {
    /// ≥ `threshold` matches within `window` ns; at most `max_groups` groups.
    pub fn new(threshold: u64, window: i64, max_groups: usize) -> Count {
        Count {
            threshold,
            window,
            groups: Groups::new(max_groups),
        }
    }
}

impl Count {
    /// Active: when the count falls below the threshold; else when the
    /// window empties (the episode ends).
    fn group_due(&self, g: &G) -> Option<i64> {
        if g.win.total() >= self.threshold {
            g.win.falls_below(self.threshold)
        } else {
            g.win.falls_below(1)
        }
    }
}

impl Detector for Count {
    fn observe(&mut self, hit: &Hit<'_>) {
        let w = self.window;
        let g = self.groups.entry(hit.group, || G {
            win: Window::new(w),
            episode: 0,
            first: hit.time,
            last: hit.time,
            samples: Samples::default(),
            since: None,
        });
        g.win.add(hit.time);
        g.episode += 1;
        g.first = g.first.min(hit.time);
        g.last = g.last.max(hit.time);
        g.samples.push(hit);
    }

    fn evaluate(&mut self, now: i64, out: &mut Vec<Status>) {
        for key in self.groups.sorted_keys() {
            self.evaluate_key(&key, now, out);
        }
    }

    fn evaluate_key(&mut self, key: &str, now: i64, out: &mut Vec<Status>) -> bool {
        let Some(g) = self.groups.peek_mut(key) else {
            return true;
        };
        let n = g.win.count(now);
        let active = n >= self.threshold;
        super::report(out, key, active, g.last, g.last, &mut g.since);
        if n == 0 {
            self.groups.remove(key);
        }
        true
    }

    super::per_group_bookkeeping!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::Step;
    const S: i64 = 1_000_000_000;

    fn hit(c: &mut Count, g: &str, t: i64) {
        c.observe(&Hit {
            group: g,
            partition: "cluster",
            time: t * S,
            step: Step::Primary,
            sample: "line",
            origin: None,
        });
    }
    fn eval(c: &mut Count, now: i64) -> Vec<Status> {
        let mut v = Vec::new();
        c.evaluate(now * S, &mut v);
        v
    }

    #[test]
    fn threshold_within_window_per_group() {
        let mut c = Count::new(3, 60 * S, 100);
        hit(&mut c, "a", 0);
        hit(&mut c, "a", 30);
        hit(&mut c, "b", 31);
        assert!(eval(&mut c, 31).is_empty());
        hit(&mut c, "a", 59);
        let v = eval(&mut c, 59);
        assert_eq!(
            v,
            vec![Status {
                key: "a".into(),
                active: true,
                support: 59 * S,
                since: 59 * S,
                hold: None,
            }]
        );
        assert_eq!(c.evidence("a").count, 3);
        // At 60 s the first match leaves the window: 2 < 3.
        let v = eval(&mut c, 60);
        assert_eq!(
            v,
            vec![Status {
                key: "a".into(),
                active: false,
                support: 59 * S,
                since: 59 * S,
                hold: None,
            }]
        );
        assert!(
            eval(&mut c, 61).is_empty(),
            "inactive keys are reported once"
        );
    }

    #[test]
    fn eviction_is_bounded_and_counted() {
        let mut c = Count::new(1, 60 * S, 2);
        for (i, g) in ["a", "b", "c", "d"].iter().enumerate() {
            hit(&mut c, g, i as i64);
        }
        assert_eq!(c.evicted(), 2);
        let keys: Vec<String> = eval(&mut c, 5).into_iter().map(|s| s.key).collect();
        assert_eq!(keys, vec!["c", "d"]);
    }
}
