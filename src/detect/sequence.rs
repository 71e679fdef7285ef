//! `sequence`: step A then step B on the same group within W —
//! e.g. `exit requested, shutting down` then `failed to mark as draining`.
//!
//! A B without a preceding A (within W) is ignored; each A is consumed by
//! the first B that completes it. Active while a completion happened within
//! the last W.

use super::{Detector, Evidence, Groups, Hit, Samples, Status, Step};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct G {
    last_a: Option<(i64, String)>,
    /// Where the pending A was read.
    #[serde(default)]
    last_a_origin: Option<super::Origin>,
    completions: u64,
    first: Option<i64>,
    last_done: Option<i64>,
    samples: Samples,
    since: Option<i64>,
}

impl super::GroupState for G {
    fn count(&self) -> u64 {
        self.completions
    }
    fn first_seen(&self) -> Option<i64> {
        self.first
    }
    fn last_seen(&self) -> Option<i64> {
        self.last_done
    }
    fn samples(&self) -> &Samples {
        &self.samples
    }
}

/// The sequence detector.
#[derive(Serialize, Deserialize)]
pub struct Sequence {
    within: i64,
    groups: Groups<G>,
}

impl Sequence {
    /// B must follow A within `within` ns.
    pub fn new(within: i64, max_groups: usize) -> Sequence {
        Sequence {
            within,
            groups: Groups::new(max_groups),
        }
    }
}

impl Sequence {
    /// Active: when the last completion is `within` old. Else: when the
    /// group is forgotten (no recent completion, no pending A), which ends
    /// its episode.
    fn group_due(&self, g: &G) -> Option<i64> {
        let quiet = g.last_done.map(|d| d.saturating_add(self.within));
        if g.since.is_some() {
            return quiet;
        }
        let stale = g
            .last_a
            .as_ref()
            .map(|(a, _)| a.saturating_add(self.within).saturating_add(1));
        match (quiet, stale) {
            (Some(q), Some(s)) => Some(q.max(s)),
            (q, s) => q.or(s),
        }
    }
}

impl Detector for Sequence {
    fn observe(&mut self, hit: &Hit<'_>) {
        let within = self.within;
        let g = self.groups.entry(hit.group, || G {
            last_a: None,
            last_a_origin: None,
            completions: 0,
            first: None,
            last_done: None,
            samples: Samples::default(),
            since: None,
        });
        match hit.step {
            Step::Primary => {
                let (line, origin) = Samples::keep(hit);
                g.last_a = Some((hit.time, line));
                g.last_a_origin = origin;
            }
            Step::Progress | Step::Unless(_) | Step::Until(_) | Step::Baseline => {}
            Step::Then => {
                let Some((a, sample_a)) = g.last_a.take() else {
                    return;
                };
                let origin_a = g.last_a_origin.take();
                if hit.time < a || hit.time - a > within {
                    if hit.time < a {
                        g.last_a = Some((a, sample_a));
                        g.last_a_origin = origin_a;
                    }
                    return;
                }
                g.completions += 1;
                g.first.get_or_insert(a);
                g.last_done = Some(g.last_done.map_or(hit.time, |d| d.max(hit.time)));
                if g.samples.len() + 2 <= super::MAX_SAMPLES + 1 {
                    g.samples.push_kept(sample_a, origin_a);
                    g.samples.push(hit);
                }
                g.samples.truncate(super::MAX_SAMPLES);
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
        let active = g.last_done.is_some_and(|d| now - d < self.within);
        let support = g.last_done.unwrap_or(now);
        super::report(out, key, active, support, support, &mut g.since);
        let stale_a = g.last_a.as_ref().is_none_or(|(a, _)| now - a > self.within);
        if !active && stale_a {
            self.groups.remove(key);
        }
        true
    }

    super::per_group_bookkeeping!();
}

#[cfg(test)]
mod tests {
    use super::*;
    const S: i64 = 1_000_000_000;

    fn h(d: &mut Sequence, step: Step, t: i64) {
        d.observe(&Hit {
            group: "n",
            partition: "cluster",
            time: t * S,
            step,
            sample: "x",
            origin: None,
        });
    }
    fn act(d: &mut Sequence, now: i64) -> Vec<bool> {
        let mut v = Vec::new();
        d.evaluate(now * S, &mut v);
        v.into_iter().map(|s| s.active).collect()
    }

    #[test]
    fn b_needs_a_recent_a() {
        let mut d = Sequence::new(10 * S, 10);
        h(&mut d, Step::Then, 1);
        assert!(act(&mut d, 1).is_empty(), "B alone is nothing");
        h(&mut d, Step::Primary, 2);
        h(&mut d, Step::Then, 13);
        assert!(act(&mut d, 13).is_empty(), "11 s is too late");
        h(&mut d, Step::Primary, 20);
        h(&mut d, Step::Then, 25);
        assert_eq!(act(&mut d, 25), vec![true]);
        assert_eq!(d.evidence("n").count, 1);
        assert_eq!(act(&mut d, 36), vec![false]);
    }
}
