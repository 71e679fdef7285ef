//! `persist`: a group keeps matching for at least D with no gap longer than G.
//!
//! A run starts at a group's first match and is broken by a silence longer
//! than `max_gap`. Active while the run has lasted ≥ D (first to latest
//! match) and is not broken at the watermark. This is the "stuck draining"
//! detector: `waiting for participants to exit` every 5 s for 10 minutes.

use super::{Detector, Evidence, Groups, Hit, Samples, Status};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct G {
    start: i64,
    last: i64,
    count: u64,
    samples: Samples,
    since: Option<i64>,
}

impl super::GroupState for G {
    fn count(&self) -> u64 {
        self.count
    }
    fn first_seen(&self) -> Option<i64> {
        Some(self.start)
    }
    fn last_seen(&self) -> Option<i64> {
        Some(self.last)
    }
    fn samples(&self) -> &Samples {
        &self.samples
    }
}

/// The persist detector.
#[derive(Serialize, Deserialize)]
pub struct Persist {
    for_: i64,
    max_gap: i64,
    groups: Groups<G>,
}

impl Persist {
    /// Runs of ≥ `for_` ns with gaps ≤ `max_gap` ns.
    pub fn new(for_: i64, max_gap: i64, max_groups: usize) -> Persist {
        Persist {
            for_,
            max_gap,
            groups: Groups::new(max_groups),
        }
    }
}

impl Persist {
    /// The run breaks the first instant its silence exceeds `max_gap`.
    fn group_due(&self, g: &G) -> Option<i64> {
        Some(g.last.saturating_add(self.max_gap).saturating_add(1))
    }
}

impl Detector for Persist {
    fn observe(&mut self, hit: &Hit<'_>) {
        let gap = self.max_gap;
        let t = hit.time;
        let g = self.groups.entry(hit.group, || G {
            start: t,
            last: t,
            count: 0,
            samples: Samples::default(),
            since: None,
        });
        if t - g.last > gap {
            // The previous run is over; this match starts a new one.
            *g = G {
                start: t,
                last: t,
                count: 0,
                samples: Samples::default(),
                since: g.since,
            };
        }
        g.start = g.start.min(t);
        g.last = g.last.max(t);
        g.count += 1;
        g.samples.push(hit);
    }

    /// Progress restarts the run's clock: `for` counts from the latest
    /// progress line, so a drain that keeps losing participants never
    /// lasts long enough, while one where nothing moves does.
    fn progress(&mut self, hit: &Hit<'_>) {
        if let Some(g) = self.groups.peek_mut(hit.group) {
            if hit.time > g.start {
                g.start = hit.time;
                g.count = 0;
            }
        }
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
        let broken = now - g.last > self.max_gap;
        let active = !broken && g.last - g.start >= self.for_;
        super::report(out, key, active, g.last, g.last, &mut g.since);
        if broken {
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

    fn run(p: &mut Persist, g: &str, from: i64, to: i64, every: i64) {
        let mut t = from;
        while t <= to {
            p.observe(&Hit {
                group: g,
                partition: "cluster",
                time: t * S,
                step: Step::Primary,
                sample: "w",
                origin: None,
            });
            t += every;
        }
    }
    fn active(p: &mut Persist, now: i64) -> Vec<(String, bool)> {
        let mut v = Vec::new();
        p.evaluate(now * S, &mut v);
        v.into_iter().map(|s| (s.key, s.active)).collect()
    }

    #[test]
    fn fires_after_duration_without_gaps() {
        let mut p = Persist::new(600 * S, 60 * S, 10);
        run(&mut p, "n1", 0, 595, 5);
        assert!(active(&mut p, 595).is_empty());
        run(&mut p, "n1", 600, 600, 5);
        assert_eq!(active(&mut p, 600), vec![("n1".into(), true)]);
        assert_eq!(p.evidence("n1").count, 121);
        // Silence longer than max_gap breaks the run.
        assert_eq!(active(&mut p, 661), vec![("n1".into(), false)]);
    }

    #[test]
    fn a_gap_restarts_the_run() {
        let mut p = Persist::new(600 * S, 60 * S, 10);
        run(&mut p, "n1", 0, 300, 5);
        run(&mut p, "n1", 400, 900, 5);
        assert!(
            active(&mut p, 900).is_empty(),
            "run since 400 s is only 500 s long"
        );
        run(&mut p, "n1", 905, 1000, 5);
        assert_eq!(active(&mut p, 1000), vec![("n1".into(), true)]);
    }
}
