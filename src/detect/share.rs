//! `share`: one group takes most of the failures — the black-hole detector.
//!
//! Per partition, over the window: active for the top group when the total
//! is ≥ `min_total`, the top group's share is ≥ `min_share`, and at least
//! `min_groups` (default 2) groups are alive (logged anything within
//! `population_window`). The alert names the top group only; the healthy
//! groups get none. When the top group changes, the old one's alert clears.

use super::window::Window;
use super::{top_n, Detector, Evidence, Groups, Hit, Population, Samples, Status};
use crate::rules::model::ShareSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Serialize, Deserialize)]
struct G {
    win: Window,
    episode: u64,
    first: i64,
    last: i64,
    samples: Samples,
}

#[derive(Serialize, Deserialize)]
struct Part {
    groups: Groups<G>,
    population: Population,
    active_key: Option<(String, i64)>,
    total: u64,
    alive: usize,
    counts: Vec<(String, u64)>,
}

/// The share detector.
#[derive(Serialize, Deserialize)]
pub struct Share {
    window: i64,
    min_total: u64,
    min_share: f64,
    min_groups: usize,
    pop_window: i64,
    max_groups: usize,
    parts: Groups<Part>,
    /// Alert key → partition, for evidence lookups.
    key_part: BTreeMap<String, String>,
}

impl Share {
    /// From the rule's parameters.
    pub fn new(s: &ShareSpec, max_groups: usize) -> Share {
        Share {
            window: s.window.ns(),
            min_total: s.min_total,
            min_share: s.min_share,
            min_groups: s.min_groups.unwrap_or(2).max(1),
            // A node seen within the hour is part of the fleet even if it is
            // idle now: a black hole makes the healthy nodes quiet.
            pop_window: s
                .population_window
                .map(|d| d.ns())
                .unwrap_or(s.window.ns().max(3_600_000_000_000)),
            max_groups,
            parts: Groups::new(super::spread::MAX_PARTITIONS),
            key_part: BTreeMap::new(),
        }
    }

    /// The partition's state, created if new (allocation only then).
    fn part(&mut self, name: &str) -> &mut Part {
        let (mg, pw) = (self.max_groups, self.pop_window);
        self.parts.entry(name, || Part {
            groups: Groups::new(mg),
            population: Population::new(pw, mg),
            active_key: None,
            total: 0,
            alive: 0,
            counts: Vec::new(),
        })
    }
}

impl Share {
    /// A partition's shares change whenever a bucket of any group leaves
    /// the window, and its guard of groups alive when one falls silent.
    fn part_due(p: &Part) -> Option<i64> {
        let next = p
            .groups
            .iter()
            .filter_map(|(_, g)| g.win.next_change())
            .min()?;
        Some(next.min(p.population.next_leave().unwrap_or(i64::MAX)))
    }
}

impl Detector for Share {
    fn observe(&mut self, hit: &Hit<'_>) {
        let w = self.window;
        let p = self.part(hit.partition);
        p.population.seen(hit.group, hit.time);
        let g = p.groups.entry(hit.group, || G {
            win: Window::new(w),
            episode: 0,
            first: hit.time,
            last: hit.time,
            samples: Samples::default(),
        });
        g.win.add(hit.time);
        g.episode += 1;
        g.first = g.first.min(hit.time);
        g.last = g.last.max(hit.time);
        g.samples.push(hit);
    }

    fn seen(&mut self, group: &str, partition: &str, time: i64) {
        self.part(partition).population.seen(group, time);
    }

    super::partitioned_bookkeeping!();

    fn evaluate(&mut self, now: i64, out: &mut Vec<Status>) {
        // Alert keys of partitions evicted since the last evaluation.
        self.key_part.retain(|_, pn| self.parts.peek(pn).is_some());
        for pname in self.parts.sorted_keys() {
            let Some(p) = self.parts.peek_mut(&pname) else {
                continue;
            };
            let mut counts = Vec::new();
            let mut dead = Vec::new();
            for key in p.groups.sorted_keys() {
                if let Some(g) = p.groups.peek_mut(&key) {
                    let n = g.win.count(now);
                    if n == 0 {
                        dead.push(key);
                    } else {
                        counts.push((key, n));
                    }
                }
            }
            let total: u64 = counts.iter().map(|c| c.1).sum();
            let alive = p.population.alive(now).max(counts.len());
            let top = top_n(counts.clone(), 1).into_iter().next();
            let winner = top.as_ref().and_then(|(k, n)| {
                let share = *n as f64 / total.max(1) as f64;
                (total >= self.min_total && share >= self.min_share && alive >= self.min_groups)
                    .then(|| k.clone())
            });
            let mut since = None;
            if let Some((old, old_since)) = p.active_key.take() {
                if winner.as_deref() == Some(old.as_str()) {
                    since = Some(old_since);
                } else {
                    let support = p.groups.peek(&old).map_or(now, |g| g.last);
                    out.push(Status {
                        key: old.clone(),
                        active: false,
                        support,
                        since: support,
                        hold: None,
                    });
                    self.key_part.remove(&old);
                }
            }
            let mut next = None;
            if let Some(w) = &winner {
                let support = p.groups.peek(w).map_or(now, |g| g.last);
                let since = since.unwrap_or(support);
                out.push(Status {
                    key: w.clone(),
                    active: true,
                    support,
                    since,
                    hold: None,
                });
                self.key_part.insert(w.clone(), pname.clone());
                next = Some((w.clone(), since));
            }
            for k in dead {
                if winner.as_deref() != Some(k.as_str()) {
                    p.groups.remove(&k);
                }
            }
            p.active_key = next;
            p.total = total;
            p.alive = alive;
            p.counts = counts;
        }
    }

    fn evidence(&self, key: &str) -> Evidence {
        let Some(p) = self.key_part.get(key).and_then(|pn| self.parts.peek(pn)) else {
            return Evidence::default();
        };
        let Some(g) = p.groups.peek(key) else {
            return Evidence::default();
        };
        let n = p.counts.iter().find(|c| c.0 == key).map_or(0, |c| c.1);
        Evidence {
            count: n,
            first_seen: Some(g.first),
            last_seen: Some(g.last),
            top_groups: top_n(p.counts.clone(), 10),
            share: Some(n as f64 / p.total.max(1) as f64),
            population: Some(p.alive),
            groups: Some(p.counts.len()),
            total: Some(p.total),
            samples: g.samples.lines.clone(),
            origins: g.samples.origins.clone(),
            ..Evidence::default()
        }
    }

    fn reset(&mut self, key: &str) {
        if let Some(pn) = self.key_part.remove(key) {
            if let Some(p) = self.parts.peek_mut(&pn) {
                p.groups.remove(key);
                if p.active_key.as_ref().is_some_and(|(k, _)| k == key) {
                    p.active_key = None;
                }
            }
        }
    }

    fn due(&self, _key: &str) -> Option<i64> {
        self.parts
            .iter()
            .filter_map(|(_, p)| Share::part_due(p))
            .min()
    }

    fn dues(&self, out: &mut Vec<(String, i64)>) {
        if let Some(d) = self.due("") {
            out.push((String::new(), d));
        }
    }

    fn population(&self, out: &mut Vec<(String, String, i64)>) {
        for (name, p) in self.parts.iter() {
            out.extend(
                p.population
                    .last_seen()
                    .map(|(g, t)| (name.clone(), g.clone(), t)),
            );
        }
    }

    fn evicted(&self) -> u64 {
        self.parts.evicted()
            + self
                .parts
                .iter()
                .map(|(_, p)| p.groups.evicted() + p.population.evicted())
                .sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::Step;
    use crate::duration::Dur;
    const S: i64 = 1_000_000_000;

    fn spec() -> ShareSpec {
        ShareSpec {
            window: Dur::secs(900),
            min_total: 10,
            min_share: 0.8,
            min_groups: None,
            population_window: None,
            partition_by: None,
        }
    }
    fn hit(d: &mut Share, g: &str, t: i64) {
        d.observe(&Hit {
            group: g,
            partition: "cluster",
            time: t * S,
            step: Step::Primary,
            sample: g,
            origin: None,
        });
    }
    fn eval(d: &mut Share, now: i64) -> Vec<(String, bool)> {
        let mut v = Vec::new();
        d.evaluate(now * S, &mut v);
        v.into_iter().map(|s| (s.key, s.active)).collect()
    }

    #[test]
    fn black_hole_names_only_the_top_group() {
        let mut d = Share::new(&spec(), 100);
        for n in ["a", "b", "c"] {
            d.seen(n, "cluster", 0);
        }
        for t in 0..7 {
            hit(&mut d, "a", t);
        }
        hit(&mut d, "b", 7);
        assert!(eval(&mut d, 7).is_empty(), "8 failures are below min_total");
        hit(&mut d, "a", 8);
        hit(&mut d, "a", 9);
        assert_eq!(eval(&mut d, 9), vec![("a".into(), true)]);
        let e = d.evidence("a");
        assert_eq!((e.count, e.total), (9, Some(10)));
        assert!((e.share.unwrap() - 0.9).abs() < 1e-9);
    }

    #[test]
    fn a_single_node_cluster_is_not_a_black_hole() {
        let mut d = Share::new(&spec(), 100);
        for t in 0..20 {
            hit(&mut d, "only", t);
        }
        assert!(eval(&mut d, 20).is_empty());
    }

    #[test]
    fn evenly_spread_failures_do_not_fire_and_a_moved_top_clears() {
        let mut d = Share::new(&spec(), 100);
        for t in 0..30 {
            hit(&mut d, ["a", "b", "c"][t as usize % 3], t);
        }
        assert!(eval(&mut d, 30).is_empty());
        let mut d = Share::new(&spec(), 100);
        d.seen("b", "cluster", 0);
        for t in 0..12 {
            hit(&mut d, "a", t);
        }
        assert_eq!(eval(&mut d, 12), vec![("a".into(), true)]);
        for t in 13..100 {
            hit(&mut d, "b", t);
        }
        assert_eq!(
            eval(&mut d, 100),
            vec![("a".into(), false), ("b".into(), true)]
        );
    }
}
