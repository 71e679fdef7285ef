//! `spread`: the same signature on many groups at once — a shared dependency,
//! not a bad node.
//!
//! Per partition (one for the whole cluster unless `partition_by` is set),
//! a group "matches" when it has a match in the window. Active when
//! `matching ≥ groups` (if set), or when `matching ≥ min_groups` (default 2)
//! and `matching / alive ≥ fraction` (if set), where alive is every group that
//! logged anything within `population_window` (default max(window, 10m)).

use super::window::Window;
use super::{top_n, Detector, Evidence, Groups, Hit, Population, Samples, Status};
use crate::rules::model::SpreadSpec;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Part {
    groups: Groups<(Window, u64, i64)>,
    population: Population,
    first: i64,
    last: i64,
    samples: Samples,
    sample_groups: Vec<String>,
    since: Option<i64>,
    matching: usize,
    alive: usize,
}

/// The spread detector.
#[derive(Serialize, Deserialize)]
pub struct Spread {
    window: i64,
    groups_k: Option<usize>,
    fraction: Option<f64>,
    min_groups: usize,
    #[serde(default = "one")]
    min_count: u64,
    pop_window: i64,
    max_groups: usize,
    parts: Groups<Part>,
}

fn one() -> u64 {
    1
}

/// Most partitions a spread or share rule tracks; past it the one used
/// least recently goes (counted with the rule's evicted groups).
pub const MAX_PARTITIONS: usize = 1024;

impl Spread {
    /// From the rule's parameters.
    pub fn new(s: &SpreadSpec, max_groups: usize) -> Spread {
        Spread {
            window: s.window.ns(),
            groups_k: s.groups,
            fraction: s.fraction,
            min_groups: s.min_groups.unwrap_or(2).max(1),
            min_count: s.min_count.unwrap_or(1).max(1),
            pop_window: s
                .population_window
                .map(|d| d.ns())
                .unwrap_or(s.window.ns().max(600_000_000_000)),
            max_groups,
            parts: Groups::new(MAX_PARTITIONS),
        }
    }

    /// The partition's state, created if new (allocation only then).
    fn part(&mut self, name: &str, t: i64) -> &mut Part {
        let (mg, pw) = (self.max_groups, self.pop_window);
        self.parts.entry(name, || Part {
            groups: Groups::new(mg),
            population: Population::new(pw, mg),
            first: t,
            last: t,
            samples: Samples::default(),
            sample_groups: Vec::new(),
            since: None,
            matching: 0,
            alive: 0,
        })
    }
}

impl Spread {
    /// A partition changes when a matching group's window empties, and —
    /// for a fraction of the fleet, while groups match — when a group of
    /// the population falls silent.
    fn part_due(&self, p: &Part) -> Option<i64> {
        let left = p
            .groups
            .iter()
            .filter_map(|(_, g)| g.0.falls_below(self.min_count))
            .min()?;
        let leave = self
            .fraction
            .and_then(|_| p.population.next_leave())
            .unwrap_or(i64::MAX);
        Some(left.min(leave))
    }
}

impl Detector for Spread {
    fn observe(&mut self, hit: &Hit<'_>) {
        let w = self.window;
        let p = self.part(hit.partition, hit.time);
        let g = p.groups.entry(hit.group, || (Window::new(w), 0, hit.time));
        g.0.add(hit.time);
        g.1 += 1;
        g.2 = g.2.max(hit.time);
        p.population.seen(hit.group, hit.time);
        if p.groups.len() == 1 && p.samples.is_empty() {
            p.first = hit.time;
        }
        p.first = p.first.min(hit.time);
        p.last = p.last.max(hit.time);
        // Samples from distinct groups show the spread best.
        if !p.sample_groups.iter().any(|g| g == hit.group) && p.samples.len() < super::MAX_SAMPLES {
            p.sample_groups.push(hit.group.to_string());
            p.samples.push(hit);
        }
    }

    fn seen(&mut self, group: &str, partition: &str, time: i64) {
        self.part(partition, time).population.seen(group, time);
    }

    super::partitioned_bookkeeping!();

    fn evaluate(&mut self, now: i64, out: &mut Vec<Status>) {
        for name in self.parts.sorted_keys() {
            let Some(p) = self.parts.peek_mut(&name) else {
                continue;
            };
            let mut matching = 0;
            let mut dead = Vec::new();
            for key in p.groups.sorted_keys() {
                if let Some(g) = p.groups.peek_mut(&key) {
                    let n = g.0.count(now);
                    if n >= self.min_count {
                        matching += 1;
                    } else if n == 0 {
                        dead.push(key);
                    }
                }
            }
            for k in dead {
                p.groups.remove(&k);
            }
            let alive = p.population.alive(now).max(matching);
            let by_count = self.groups_k.is_some_and(|k| matching >= k);
            let by_fraction = self.fraction.is_some_and(|f| {
                matching >= self.min_groups && alive > 0 && matching as f64 / alive as f64 >= f
            });
            let active = by_count || by_fraction;
            super::report(out, &name, active, p.last, p.last, &mut p.since);
            if !active && matching == 0 {
                p.samples.clear();
                p.sample_groups.clear();
            }
            p.matching = matching;
            p.alive = alive;
        }
    }

    fn evidence(&self, key: &str) -> Evidence {
        let Some(p) = self.parts.peek(key) else {
            return Evidence::default();
        };
        let counts: Vec<(String, u64)> = p
            .groups
            .iter()
            .map(|(k, g)| (k.clone(), g.0.total()))
            .collect();
        let total: u64 = counts.iter().map(|c| c.1).sum();
        Evidence {
            count: p.groups.iter().map(|(_, g)| g.1).sum(),
            first_seen: Some(p.first),
            last_seen: Some(p.last),
            top_groups: top_n(counts, 10),
            groups: Some(p.matching),
            population: Some(p.alive),
            total: Some(total),
            samples: p.samples.lines.clone(),
            origins: p.samples.origins.clone(),
            ..Evidence::default()
        }
    }

    fn reset(&mut self, key: &str) {
        self.parts.remove(key);
    }

    fn due(&self, _key: &str) -> Option<i64> {
        self.parts
            .iter()
            .filter_map(|(_, p)| self.part_due(p))
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
                .map(|(_, p)| p)
                .map(|p| p.groups.evicted() + p.population.evicted())
                .sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::Step;
    use crate::duration::Dur;
    const S: i64 = 1_000_000_000;

    fn spec(groups: Option<usize>, fraction: Option<f64>) -> SpreadSpec {
        SpreadSpec {
            window: Dur::secs(60),
            groups,
            fraction,
            min_groups: None,
            min_count: None,
            population_window: None,
            partition_by: None,
        }
    }
    fn hit(d: &mut Spread, g: &str, t: i64) {
        d.observe(&Hit {
            group: g,
            partition: "cluster",
            time: t * S,
            step: Step::Primary,
            sample: g,
            origin: None,
        });
    }
    fn eval(d: &mut Spread, now: i64) -> Vec<(String, bool)> {
        let mut v = Vec::new();
        d.evaluate(now * S, &mut v);
        v.into_iter().map(|s| (s.key, s.active)).collect()
    }

    #[test]
    fn fraction_of_population_not_of_matches() {
        let mut d = Spread::new(&spec(None, Some(0.5)), 100);
        for n in ["n1", "n2", "n3", "n4", "n5", "n6"] {
            d.seen(n, "cluster", 0);
        }
        hit(&mut d, "n1", 1);
        hit(&mut d, "n2", 2);
        assert!(eval(&mut d, 2).is_empty(), "2 of 6 is below half");
        hit(&mut d, "n3", 3);
        assert_eq!(eval(&mut d, 3), vec![("cluster".into(), true)]);
        let e = d.evidence("cluster");
        assert_eq!((e.groups, e.population), (Some(3), Some(6)));
        // The window slides past all matches.
        assert_eq!(eval(&mut d, 64), vec![("cluster".into(), false)]);
    }

    #[test]
    fn one_group_alone_never_spreads_by_fraction() {
        let mut d = Spread::new(&spec(None, Some(0.5)), 100);
        hit(&mut d, "n1", 1);
        hit(&mut d, "n1", 2);
        assert!(eval(&mut d, 2).is_empty());
    }

    #[test]
    fn absolute_group_count() {
        let mut d = Spread::new(&spec(Some(2), None), 100);
        hit(&mut d, "a", 1);
        assert!(eval(&mut d, 1).is_empty());
        hit(&mut d, "b", 30);
        assert_eq!(eval(&mut d, 30), vec![("cluster".into(), true)]);
        assert_eq!(
            eval(&mut d, 61),
            vec![("cluster".into(), false)],
            "a left the window at 61 s"
        );
    }

    #[test]
    fn min_count_asks_each_group_to_match_that_often() {
        let mut s = spec(Some(2), None);
        s.min_count = Some(3);
        let mut d = Spread::new(&s, 100);
        for t in [0, 10] {
            hit(&mut d, "a", t);
            hit(&mut d, "b", t);
        }
        assert!(
            eval(&mut d, 10).is_empty(),
            "two failures each are not sustained"
        );
        hit(&mut d, "a", 20);
        assert!(eval(&mut d, 20).is_empty(), "one group at three");
        hit(&mut d, "b", 25);
        assert_eq!(eval(&mut d, 25), vec![("cluster".into(), true)]);
        // a's first match leaves the window at 60 s: a falls below three.
        assert_eq!(d.due(""), Some(60 * S));
        assert_eq!(eval(&mut d, 60), vec![("cluster".into(), false)]);
    }
}
