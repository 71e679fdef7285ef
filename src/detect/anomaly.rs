//! `anomaly`: the incident nobody wrote a rule for, found by its shape
//! rather than its words. Every mined template at the watched levels (warn
//! and error) is measured against the population the lines come from and
//! against its own baseline, learned while the miner learns:
//!
//! * **spread** — the template comes from at least half of the groups alive
//!   (and at least `min_groups`) within `spread_window`, where its baseline
//!   had it on few (more than twice the most groups it ever came from in
//!   one such window while learning): a shared dependency down;
//! * **concentration** — one group logs at least `min_share` of the
//!   template's lines within `window`, at least `min_lines` of them and
//!   `factor` times its baseline, while at least `min_peers` other groups
//!   are alive: the black-hole node, the slow upstream;
//! * **surge** — a group logs the template at least `surge_lines` times
//!   within `window` and `factor` times the most any group logged it in one
//!   window while learning, with no peers to compare with (a deployment of
//!   one node): a rare error become a storm.
//!
//! Keys are `spread TEMPLATE` and `concentration TEMPLATE GROUP` /
//! `surge TEMPLATE GROUP`. Memory is bounded: [`MAX_TEMPLATES`] templates,
//! `max_groups` groups per template and alive, least recently seen evicted
//! and counted.

use super::window::Window;
use super::{top_n, Detector, Evidence, Groups, Hit, Population, Samples, Status, Step};
use crate::rules::AnomalySpec as Spec;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Most templates tracked at once; past it the one idle longest goes.
pub const MAX_TEMPLATES: usize = 1024;

/// What a template looked like while the baseline was learned: its lines
/// over the whole cluster, and the learning period's length (ns).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Baseline {
    /// Lines of the template over the period.
    pub lines: u64,
    /// The period (ns; 0: none known, as for a template never seen).
    pub span: i64,
    /// The most lines of it within one `window` while learning in this
    /// run (bursty noise: a template that comes in bursts is normal in
    /// bursts); 0 when the baseline came from a file.
    #[serde(default)]
    pub peak: u64,
}

impl Baseline {
    /// Lines expected within `window` ns: at the baseline's rate, or its
    /// peak if higher.
    pub fn expected(&self, window: i64) -> f64 {
        let mean = if self.span <= 0 {
            0.0
        } else {
            self.lines as f64 * window as f64 / self.span as f64
        };
        mean.max(self.peak as f64)
    }

    /// The rate in words: "12 a day", "about 1 an hour", "never".
    fn describe(&self) -> String {
        if (self.span <= 0 || self.lines == 0) && self.peak == 0 {
            return "never seen while learning".to_string();
        }
        let per_hour = if self.span > 0 {
            self.lines as f64 * 3.6e12 / self.span as f64
        } else {
            0.0
        };
        let rate = if per_hour >= 1.0 {
            format!("{per_hour:.0} an hour while learning")
        } else {
            format!("{:.0} a day while learning", per_hour * 24.0)
        };
        if self.peak > 0 {
            format!("{rate}, at most {} in one window", self.peak)
        } else {
            rate
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Template {
    text: String,
    level: Option<String>,
    /// Per group: its lines within `window`, and its latest line.
    groups: Groups<(Window, i64)>,
    base: Baseline,
    /// The template's lines over the cluster while learning (for the
    /// baseline's peak); dropped once learning is over.
    #[serde(default)]
    learning: Option<Window>,
    samples: Samples,
    sample_groups: Vec<String>,
    first: i64,
    last: i64,
}

/// The anomaly detector.
#[derive(Serialize, Deserialize)]
pub struct Anomaly {
    spec: Spec,
    max_groups: usize,
    templates: Groups<Template>,
    /// Groups that logged anything (every line's group, sampled).
    alive: Population,
    /// Templates with lines in their window now.
    active: BTreeSet<String>,
    /// Keys whose condition holds, and since when.
    since: BTreeMap<String, i64>,
    /// The latest evaluation's findings, for the evidence.
    found: BTreeMap<String, Finding>,
    /// No key changes before this without a hit.
    next_due: Option<i64>,
}

/// Why a key holds, as the latest evaluation saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Finding {
    /// The latest line supporting it (`for` is measured up to it).
    support: i64,
    groups: Vec<(String, u64)>,
    alive: usize,
    total: u64,
    share: Option<f64>,
    reason: String,
}

impl Anomaly {
    /// From the `anomaly:` settings.
    pub fn new(spec: &Spec, max_groups: usize) -> Anomaly {
        Anomaly {
            spec: spec.clone(),
            max_groups,
            templates: Groups::new(MAX_TEMPLATES),
            alive: Population::new(spec.population_window, max_groups),
            active: BTreeSet::new(),
            since: BTreeMap::new(),
            found: BTreeMap::new(),
            next_due: None,
        }
    }

    fn note_due(&mut self, at: i64) {
        self.next_due = Some(self.next_due.map_or(at, |d| d.min(at)));
    }

    /// What holds now, by key.
    fn findings(&mut self, now: i64) -> BTreeMap<String, Finding> {
        let s = &self.spec;
        let alive = self.alive.alive(now);
        let mut out = BTreeMap::new();
        let mut next: Option<i64> = self.alive.next_leave();
        let mut idle = Vec::new();
        for key in &self.active {
            let Some(t) = self.templates.peek_mut(key) else {
                idle.push(key.clone());
                continue;
            };
            let mut counts: Vec<(String, u64)> = Vec::new();
            let mut recent = 0usize;
            let mut gone = Vec::new();
            for (g, (w, last)) in t.groups.iter_mut_all() {
                let c = w.count(now);
                if c == 0 && *last <= now - s.spread_window {
                    gone.push(g.clone());
                    continue;
                }
                if *last > now - s.spread_window {
                    recent += 1;
                    let leave = last.saturating_add(s.spread_window);
                    next = Some(next.map_or(leave, |n| n.min(leave)));
                }
                if let Some(ch) = w.next_change() {
                    next = Some(next.map_or(ch, |n| n.min(ch)));
                }
                if c > 0 {
                    counts.push((g.clone(), c));
                }
            }
            for g in gone {
                t.groups.remove(&g);
            }
            if t.groups.len() == 0 {
                idle.push(key.clone());
                continue;
            }
            let total: u64 = counts.iter().map(|(_, c)| c).sum();
            let population = alive.max(recent);
            // Far past the rate it had while learning, over the whole
            // cluster (a template one node always logs is not anomalous
            // when that node logs it).
            let past = (s.factor * t.base.expected(s.window)).ceil() as u64;
            let normal = t.base.describe();
            // Spread: many groups at once, far more lines than normal.
            if recent >= s.min_groups
                && recent as f64 >= s.min_fraction * population as f64
                && total >= past.max(s.min_groups as u64)
            {
                let mut groups: Vec<(String, u64)> = counts.clone();
                groups.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                out.insert(
                    format!("spread {key}"),
                    Finding {
                        support: t.last,
                        groups,
                        alive: population,
                        total,
                        share: None,
                        reason: format!(
                            "on {recent} of {population} groups within {}, {total} lines in {}; baseline: {normal}",
                            crate::duration::Dur(s.spread_window),
                            crate::duration::Dur(s.window),
                        ),
                    },
                );
            }
            for (g, c) in &counts {
                let floor = past;
                let share = *c as f64 / total.max(1) as f64;
                let peers = population.saturating_sub(1);
                if peers >= s.min_peers && share >= s.min_share && *c >= s.min_lines.max(floor) {
                    out.insert(
                        format!("concentration {key} {g}"),
                        Finding {
                            support: t.groups.peek(g).map_or(t.last, |x| x.1),
                            groups: vec![(g.clone(), *c)],
                            alive: population,
                            total,
                            share: Some(share),
                            reason: format!(
                                "{g} logs {:.0}% of its lines ({c} of {total} within {}) while {peers} peers are alive; baseline: {normal}",
                                share * 100.0,
                                crate::duration::Dur(s.window),
                            ),
                        },
                    );
                } else if peers < s.min_peers && *c >= s.surge_lines.max(floor) {
                    out.insert(
                        format!("surge {key} {g}"),
                        Finding {
                            support: t.groups.peek(g).map_or(t.last, |x| x.1),
                            groups: vec![(g.clone(), *c)],
                            alive: population,
                            total,
                            share: None,
                            reason: format!(
                                "{g} logged it {c} times within {}; baseline: {normal}",
                                crate::duration::Dur(s.window),
                            ),
                        },
                    );
                }
            }
        }
        for k in idle {
            self.active.remove(&k);
        }
        self.next_due = next;
        out
    }

    fn template(&mut self, key: &str, t: i64) -> &mut Template {
        let mg = self.max_groups;
        self.templates.entry(key, || Template {
            text: String::new(),
            level: None,
            groups: Groups::new(mg),
            base: Baseline::default(),
            learning: None,
            samples: Samples::default(),
            sample_groups: Vec::new(),
            first: t,
            last: t,
        })
    }
}

impl Detector for Anomaly {
    fn observe(&mut self, hit: &Hit<'_>) {
        self.alive.seen(hit.group, hit.time);
        let w = self.spec.window;
        if hit.step == Step::Baseline {
            // The rate is the miner's (its counts when learning ended, see
            // `set_baseline`); the peak is measured here.
            let t = self.template(hit.partition, hit.time);
            let win = t.learning.get_or_insert_with(|| Window::new(w));
            win.add(hit.time);
            t.base.peak = t.base.peak.max(win.count(hit.time));
            return;
        }
        let t = self.template(hit.partition, hit.time);
        t.learning = None;
        let g = t.groups.entry(hit.group, || (Window::new(w), hit.time));
        g.0.add(hit.time);
        g.1 = g.1.max(hit.time);
        if t.samples.lines.is_empty() {
            t.first = hit.time;
        }
        t.last = t.last.max(hit.time);
        if !t.sample_groups.iter().any(|x| x == hit.group)
            && t.samples.lines.len() < super::MAX_SAMPLES
        {
            t.sample_groups.push(hit.group.to_string());
            t.samples.push(hit);
        }
        self.active.insert(hit.partition.to_string());
        self.note_due(hit.time);
    }

    fn seen(&mut self, group: &str, _partition: &str, time: i64) {
        self.alive.seen(group, time);
    }

    fn population_window(&self) -> Option<i64> {
        Some(self.spec.population_window)
    }

    fn set_baseline(&mut self, key: &str, lines: u64, span: i64) {
        let b = &mut self.template(key, 0).base;
        b.lines = lines;
        b.span = span;
    }

    fn annotate(&mut self, key: &str, template: &str, level: Option<&str>) {
        let t = self.template(key, 0);
        if t.text.is_empty() {
            t.text = template.to_string();
        }
        if level.is_some() {
            t.level = level.map(str::to_string);
        }
    }

    fn evaluate(&mut self, now: i64, out: &mut Vec<Status>) {
        let found = self.findings(now);
        let keys: BTreeSet<String> = self.since.keys().chain(found.keys()).cloned().collect();
        for k in keys {
            let support = found.get(&k).map_or(now, |f| f.support);
            let active = found.contains_key(&k);
            let mut since = self.since.get(&k).copied();
            super::report(out, &k, active, support, support, &mut since);
            match since {
                Some(s) => {
                    self.since.insert(k, s);
                }
                None => {
                    self.since.remove(&k);
                }
            }
        }
        // Keep the findings of keys that hold (and of those that just
        // stopped, so a resolution tells what it was).
        for (k, f) in found {
            self.found.insert(k, f);
        }
        let since = &self.since;
        self.found.retain(|k, _| since.contains_key(k));
    }

    fn due(&self, _key: &str) -> Option<i64> {
        self.next_due
    }

    fn dues(&self, out: &mut Vec<(String, i64)>) {
        if let Some(d) = self.next_due {
            out.push((String::new(), d));
        }
    }

    fn evidence(&self, key: &str) -> Evidence {
        let mut parts = key.splitn(3, ' ');
        let (_shape, template) = (parts.next(), parts.next().unwrap_or(""));
        let Some(t) = self.templates.peek(template) else {
            return Evidence::default();
        };
        let f = self.found.get(key);
        Evidence {
            count: f.map_or(0, |f| f.groups.iter().map(|(_, c)| c).sum()),
            first_seen: Some(t.first),
            last_seen: Some(t.last),
            top_groups: f.map(|f| top_n(f.groups.clone(), 10)).unwrap_or_default(),
            share: f.and_then(|f| f.share),
            groups: f.map(|f| f.groups.len()),
            population: f.map(|f| f.alive),
            total: f.map(|f| f.total),
            samples: t.samples.lines.clone(),
            origins: t.samples.origins.clone(),
            template: Some(t.text.clone()),
            level: t.level.clone(),
            reason: f.map(|f| f.reason.clone()),
            ..Evidence::default()
        }
    }

    fn reset(&mut self, key: &str) {
        self.since.remove(key);
    }

    fn evicted(&self) -> u64 {
        self.templates.evicted() + self.alive.evicted()
    }

    fn population(&self, out: &mut Vec<(String, String, i64)>) {
        for (g, t) in self.alive.last_seen() {
            out.push((super::CLUSTER.to_string(), g.clone(), t));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const S: i64 = 1_000_000_000;
    const M: i64 = 60 * S;

    fn spec() -> Spec {
        Spec {
            window: 10 * M,
            spread_window: M,
            population_window: 10 * M,
            min_fraction: 0.5,
            min_groups: 3,
            min_share: 0.9,
            min_lines: 10,
            min_peers: 2,
            surge_lines: 20,
            factor: 5.0,
        }
    }

    fn hit(a: &mut Anomaly, template: &str, group: &str, t: i64, step: Step) {
        a.observe(&Hit {
            group,
            partition: template,
            time: t,
            step,
            sample: "line",
            origin: None,
        });
    }

    fn active(a: &mut Anomaly, now: i64) -> Vec<String> {
        let mut out = Vec::new();
        a.evaluate(now, &mut out);
        out.into_iter()
            .filter(|s| s.active)
            .map(|s| s.key)
            .collect()
    }

    #[test]
    fn a_known_error_from_every_node_at_once_is_a_spread() {
        let mut a = Anomaly::new(&spec(), 100);
        a.set_baseline("t1", 2, 24 * 60 * M); // twice a day
        for n in ["n1", "n2", "n3", "n4", "n5", "n6"] {
            a.seen(n, "cluster", 0);
        }
        for i in 0..30 {
            for n in ["n1", "n2", "n3", "n4", "n5"] {
                hit(&mut a, "t1", n, M + i * 2 * S, Step::Primary);
            }
        }
        assert_eq!(active(&mut a, 2 * M), ["spread t1"]);
        let e = a.evidence("spread t1");
        assert_eq!(e.groups, Some(5));
        assert_eq!(e.population, Some(6));
        assert!(e.reason.unwrap().contains("on 5 of 6 groups"));
    }

    #[test]
    fn the_same_spread_at_its_usual_rate_is_normal() {
        let mut a = Anomaly::new(&spec(), 100);
        // 150 lines every ten minutes while learning: this is what it does.
        a.set_baseline("t1", 150 * 6, 60 * M);
        for i in 0..30 {
            for n in ["n1", "n2", "n3", "n4", "n5"] {
                hit(&mut a, "t1", n, M + i * 2 * S, Step::Primary);
            }
        }
        assert!(active(&mut a, 2 * M).is_empty());
    }

    #[test]
    fn one_node_with_nearly_all_of_a_template_while_peers_are_healthy_is_a_concentration() {
        let mut a = Anomaly::new(&spec(), 100);
        for n in ["n1", "n2", "n3"] {
            a.seen(n, "cluster", 0);
        }
        for i in 0..12 {
            hit(&mut a, "t1", "n1", M + i * 20 * S, Step::Primary);
        }
        a.seen("n2", "cluster", 4 * M);
        a.seen("n3", "cluster", 4 * M);
        assert_eq!(active(&mut a, 5 * M), ["concentration t1 n1"]);
        assert_eq!(a.evidence("concentration t1 n1").share, Some(1.0));
        // Nine lines are below the floor: a one-off never pages.
        let mut b = Anomaly::new(&spec(), 100);
        for n in ["n1", "n2", "n3"] {
            b.seen(n, "cluster", 0);
        }
        for i in 0..9 {
            hit(&mut b, "t1", "n1", M + i * 20 * S, Step::Primary);
        }
        assert!(active(&mut b, 5 * M).is_empty());
    }

    #[test]
    fn bursts_seen_while_learning_are_normal_later() {
        let mut a = Anomaly::new(&spec(), 100);
        for n in ["n1", "n2", "n3"] {
            a.seen(n, "cluster", 0);
        }
        // While learning, n1 logs bursts of 30.
        for i in 0..30 {
            hit(&mut a, "t1", "n1", i * S, Step::Baseline);
        }
        a.set_baseline("t1", 30, 60 * M);
        for n in ["n2", "n3"] {
            a.seen(n, "cluster", 2 * 60 * M);
        }
        for i in 0..30 {
            hit(&mut a, "t1", "n1", 2 * 60 * M + i * S, Step::Primary);
        }
        assert!(active(&mut a, 2 * 60 * M + M).is_empty());
        // Ten times the burst is not.
        for i in 0..300 {
            hit(
                &mut a,
                "t1",
                "n1",
                2 * 60 * M + M + i * S / 10,
                Step::Primary,
            );
        }
        assert_eq!(active(&mut a, 2 * 60 * M + 2 * M), ["concentration t1 n1"]);
    }

    #[test]
    fn a_lone_node_storm_is_a_surge_and_it_resolves_when_it_stops() {
        let mut a = Anomaly::new(&spec(), 100);
        for i in 0..40 {
            hit(&mut a, "t1", "solo", M + i * 10 * S, Step::Primary);
        }
        let mut out = Vec::new();
        a.evaluate(8 * M, &mut out);
        assert_eq!(out.len(), 1);
        assert!(out[0].active && out[0].key == "surge t1 solo");
        assert_eq!(
            out[0].support,
            M + 39 * 10 * S,
            "for is measured to the last line"
        );
        // Ten minutes after its last line the window is empty.
        let mut out = Vec::new();
        a.evaluate(M + 39 * 10 * S + 10 * M, &mut out);
        assert!(out.iter().all(|s| !s.active), "{out:?}");
        assert!(a.due("").is_none() || a.since.is_empty());
    }

    #[test]
    fn memory_is_bounded_by_templates_and_groups() {
        let mut a = Anomaly::new(&spec(), 50);
        for i in 0..(MAX_TEMPLATES as i64 + 200) {
            hit(
                &mut a,
                &format!("t{i}"),
                &format!("g{}", i % 500),
                i * S,
                Step::Primary,
            );
        }
        assert!(a.templates.len() <= MAX_TEMPLATES);
        assert!(a.evicted() > 0);
    }
}
