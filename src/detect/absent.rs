//! `absent`: a group that matched before has not matched for D.
//!
//! Only groups seen before can be absent: sigwatch cannot know about a node
//! it never heard from. Active from `last match + D` until the group matches
//! again. The support time is the evaluation time, since it is the passing of
//! time, not an event, that keeps an absence true.

use super::{Detector, Evidence, Groups, Hit, Samples, Status};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct G {
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
        Some(self.last)
    }
    fn last_seen(&self) -> Option<i64> {
        Some(self.last)
    }
    fn samples(&self) -> &Samples {
        &self.samples
    }
}

/// The absent detector.
#[derive(Serialize, Deserialize)]
pub struct Absent {
    for_: i64,
    groups: Groups<G>,
    /// The latest evaluation time: a live clock may decide an absence
    /// ahead of the watermark (see `engine::disorder`); a later tick at the
    /// watermark must not take it back.
    #[serde(default)]
    clock: i64,
}

impl Absent {
    /// Absent after `for_` ns of silence.
    pub fn new(for_: i64, max_groups: usize) -> Absent {
        Absent {
            for_,
            groups: Groups::new(max_groups),
            clock: i64::MIN,
        }
    }
}

impl Absent {
    /// The absence begins `for` after the last match; once absent, only a
    /// match changes it.
    fn group_due(&self, g: &G) -> Option<i64> {
        g.since.is_none().then(|| g.last.saturating_add(self.for_))
    }
}

impl Detector for Absent {
    fn observe(&mut self, hit: &Hit<'_>) {
        let g = self.groups.entry(hit.group, || G {
            last: hit.time,
            count: 0,
            samples: Samples::default(),
            since: None,
        });
        g.last = g.last.max(hit.time);
        g.count += 1;
        g.samples.clear();
        g.samples.push(hit);
    }

    fn evaluate(&mut self, now: i64, out: &mut Vec<Status>) {
        for key in self.groups.sorted_keys() {
            self.evaluate_key(&key, now, out);
        }
    }

    fn evaluate_key(&mut self, key: &str, now: i64, out: &mut Vec<Status>) -> bool {
        self.clock = self.clock.max(now);
        let now = self.clock;
        if let Some(g) = self.groups.peek_mut(key) {
            let active = now - g.last >= self.for_;
            let support = if active { now } else { g.last };
            super::report(out, key, active, support, g.last + self.for_, &mut g.since);
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

    #[test]
    fn only_known_groups_go_absent_and_come_back() {
        let mut d = Absent::new(60 * S, 10);
        let mut v = Vec::new();
        d.evaluate(1000 * S, &mut v);
        assert!(v.is_empty(), "nothing seen, nothing absent");
        d.observe(&Hit {
            group: "hb",
            partition: "cluster",
            time: 0,
            step: Step::Primary,
            sample: "beat",
            origin: None,
        });
        d.evaluate(59 * S, &mut v);
        assert!(v.is_empty());
        d.evaluate(60 * S, &mut v);
        assert_eq!(
            v.pop().map(|s| (s.key, s.active)),
            Some(("hb".into(), true))
        );
        d.observe(&Hit {
            group: "hb",
            partition: "cluster",
            time: 70 * S,
            step: Step::Primary,
            sample: "beat",
            origin: None,
        });
        d.evaluate(71 * S, &mut v);
        assert_eq!(v.pop().map(|s| s.active), Some(false));
    }
}
