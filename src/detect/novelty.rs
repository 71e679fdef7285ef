//! `novelty`: a log template never seen before, on enough lines of one
//! group or on several groups at once — the failure mode nobody wrote a rule
//! for.
//!
//! The engine mines templates (see [`crate::mining`]) and routes the lines
//! of new templates here as hits whose partition is the template's alert
//! key. Per template, a group "logs it" when it has a hit in the window.
//! Active when one group has at least `min_count` hits in the window, or
//! when at least `min_groups` groups log it: one page per template, naming
//! its groups, whatever the number of nodes. Once active it holds while any
//! group still logs the template within the window.

use super::window::Window;
use super::{top_n, Detector, Evidence, Groups, Hit, Samples, Status};
use crate::rules::Novelty as Spec;
use serde::{Deserialize, Serialize};

/// Most templates tracked at once; past it the one idle longest goes.
pub const MAX_TEMPLATES: usize = 1024;

#[derive(Serialize, Deserialize)]
struct Part {
    groups: Groups<(Window, u64)>,
    template: String,
    level: Option<String>,
    first: i64,
    last: i64,
    samples: Samples,
    sample_groups: Vec<String>,
    since: Option<i64>,
    logging: usize,
}

/// The novelty detector.
#[derive(Serialize, Deserialize)]
pub struct Novelty {
    window: i64,
    min_count: u64,
    min_groups: usize,
    max_groups: usize,
    parts: Groups<Part>,
}

impl Novelty {
    /// From the rule's parameters.
    pub fn new(s: &Spec, max_groups: usize) -> Novelty {
        Novelty {
            window: s.window,
            min_count: s.min_count.max(1),
            min_groups: s.min_groups.max(1),
            max_groups,
            parts: Groups::new(MAX_TEMPLATES),
        }
    }

    fn part(&mut self, key: &str, t: i64) -> &mut Part {
        let mg = self.max_groups;
        self.parts.entry(key, || Part {
            groups: Groups::new(mg),
            template: String::new(),
            level: None,
            first: t,
            last: t,
            samples: Samples::default(),
            sample_groups: Vec::new(),
            since: None,
            logging: 0,
        })
    }

    /// Once active, the template resolves when its last group stops
    /// logging it; before, time alone cannot make it active.
    fn part_due(p: &Part) -> Option<i64> {
        p.since?;
        p.groups
            .iter()
            .filter_map(|(_, g)| g.0.falls_below(1))
            .max()
    }

    /// Evaluates one template's condition at `now`.
    fn judge(
        p: &mut Part,
        now: i64,
        min_count: u64,
        min_groups: usize,
        out: &mut Vec<Status>,
        key: &str,
    ) {
        let mut logging = 0;
        let mut busiest = 0;
        let mut quiet = Vec::new();
        for g in p.groups.sorted_keys() {
            if let Some(e) = p.groups.peek_mut(&g) {
                let n = e.0.count(now);
                if n > 0 {
                    logging += 1;
                    busiest = busiest.max(n);
                } else {
                    quiet.push(g);
                }
            }
        }
        // Groups that stopped logging it leave (their totals are in the
        // episode's evidence until then).
        if p.since.is_none() {
            for g in quiet {
                p.groups.remove(&g);
            }
        }
        // Once firing, it holds while any group still logs the template:
        // resolved means the new message stopped, not that it slowed.
        let active = if p.since.is_some() {
            logging > 0
        } else {
            busiest >= min_count || logging >= min_groups
        };
        super::report(out, key, active, p.last, p.last, &mut p.since);
        p.logging = logging;
    }
}

impl Detector for Novelty {
    fn observe(&mut self, hit: &Hit<'_>) {
        let w = self.window;
        let p = self.part(hit.partition, hit.time);
        let g = p.groups.entry(hit.group, || (Window::new(w), 0));
        g.0.add(hit.time);
        g.1 += 1;
        p.first = p.first.min(hit.time);
        p.last = p.last.max(hit.time);
        // Samples from distinct groups show the spread best.
        if !p.sample_groups.iter().any(|g| g == hit.group) && p.samples.len() < super::MAX_SAMPLES {
            p.sample_groups.push(hit.group.to_string());
            p.samples.push(hit);
        }
    }

    fn annotate(&mut self, key: &str, template: &str, level: Option<&str>) {
        if let Some(p) = self.parts.peek_mut(key) {
            if p.template != template {
                p.template = template.to_string();
            }
            if p.level.as_deref() != level {
                p.level = level.map(str::to_string);
            }
        }
    }

    fn evaluate(&mut self, now: i64, out: &mut Vec<Status>) {
        let (mc, mg) = (self.min_count, self.min_groups);
        for key in self.parts.sorted_keys() {
            if let Some(p) = self.parts.peek_mut(&key) {
                Novelty::judge(p, now, mc, mg, out, &key);
            }
        }
    }

    fn evaluate_key(&mut self, key: &str, now: i64, out: &mut Vec<Status>) -> bool {
        let (mc, mg) = (self.min_count, self.min_groups);
        if let Some(p) = self.parts.peek_mut(key) {
            Novelty::judge(p, now, mc, mg, out, key);
        }
        true
    }

    fn tracks(&self, key: &str) -> bool {
        self.parts.peek(key).is_some()
    }

    fn due(&self, key: &str) -> Option<i64> {
        self.parts.peek(key).and_then(Novelty::part_due)
    }

    fn dues(&self, out: &mut Vec<(String, i64)>) {
        for (k, p) in self.parts.iter() {
            if let Some(d) = Novelty::part_due(p) {
                out.push((k.clone(), d));
            }
        }
    }

    fn evidence(&self, key: &str) -> Evidence {
        let Some(p) = self.parts.peek(key) else {
            return Evidence::default();
        };
        let counts: Vec<(String, u64)> = p.groups.iter().map(|(k, g)| (k.clone(), g.1)).collect();
        let count = counts.iter().map(|c| c.1).sum();
        Evidence {
            count,
            first_seen: Some(p.first),
            last_seen: Some(p.last),
            top_groups: top_n(counts, 10),
            // The groups of the episode (kept while it fires).
            groups: Some(p.groups.len()),
            samples: p.samples.lines.clone(),
            origins: p.samples.origins.clone(),
            template: (!p.template.is_empty()).then(|| p.template.clone()),
            level: p.level.clone(),
            ..Evidence::default()
        }
    }

    fn reset(&mut self, key: &str) {
        self.parts.remove(key);
    }

    fn evicted(&self) -> u64 {
        self.parts.evicted()
            + self
                .parts
                .iter()
                .map(|(_, p)| p.groups.evicted())
                .sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::Step;
    const S: i64 = 1_000_000_000;

    fn spec(min_count: u64, min_groups: usize) -> Spec {
        Spec {
            levels: Vec::new(),
            unleveled: false,
            chatter_per_second: 0,
            page_levels: Vec::new(),
            learn_for: 0,
            learn_lines: 0,
            window: 60 * S,
            min_count,
            min_groups,
            novel_for: 3600 * S,
            forget_after: 0,
            max_templates: 10,
            variable_after: 3,
            ignore: Vec::new(),
        }
    }
    fn hit(d: &mut Novelty, tpl: &str, g: &str, t: i64) -> Vec<(String, bool)> {
        d.observe(&Hit {
            group: g,
            partition: tpl,
            time: t * S,
            step: Step::Primary,
            sample: g,
            origin: None,
        });
        d.annotate(tpl, "disk <*> full", Some("error"));
        let mut v = Vec::new();
        d.evaluate_key(tpl, t * S, &mut v);
        v.into_iter().map(|s| (s.key, s.active)).collect()
    }

    #[test]
    fn two_groups_fire_at_once_and_one_group_needs_its_rate() {
        let mut d = Novelty::new(&spec(3, 2), 100);
        assert!(hit(&mut d, "template-1", "n1", 1).is_empty());
        assert_eq!(
            hit(&mut d, "template-1", "n2", 2),
            vec![("template-1".into(), true)]
        );
        let e = d.evidence("template-1");
        assert_eq!(e.template.as_deref(), Some("disk <*> full"));
        assert_eq!((e.groups, e.count, e.samples.len()), (Some(2), 2, 2));
        // Another template on one node: fires on its third line only.
        assert!(hit(&mut d, "template-2", "n1", 3).is_empty());
        assert!(hit(&mut d, "template-2", "n1", 4).is_empty());
        assert_eq!(
            hit(&mut d, "template-2", "n1", 5),
            vec![("template-2".into(), true)]
        );
    }

    #[test]
    fn a_rate_below_the_threshold_never_fires_and_the_window_slides() {
        let mut d = Novelty::new(&spec(3, 2), 100);
        // One line every 40 s on one node: never 3 within a minute.
        for i in 0..10 {
            assert!(hit(&mut d, "template-9", "n1", i * 40).is_empty(), "at {i}");
        }
        // Fires on a second node; holds while one node still logs it,
        // ends once both have gone quiet for the window.
        assert_eq!(
            hit(&mut d, "template-9", "n2", 400),
            vec![("template-9".into(), true)]
        );
        assert_eq!(
            hit(&mut d, "template-9", "n1", 450),
            vec![("template-9".into(), true)]
        );
        let mut v = Vec::new();
        d.evaluate(500 * S, &mut v);
        assert_eq!(
            v.iter().map(|s| s.active).collect::<Vec<_>>(),
            vec![true],
            "n1 at 450 is in the window"
        );
        v.clear();
        d.evaluate(520 * S, &mut v);
        assert_eq!(v.iter().map(|s| s.active).collect::<Vec<_>>(), vec![false]);
    }

    #[test]
    fn templates_tracked_are_bounded() {
        let mut d = Novelty::new(&spec(3, 2), 100);
        for i in 0..(MAX_TEMPLATES as i64 + 5) {
            hit(&mut d, &format!("template-{i}"), "n1", i);
        }
        assert_eq!(d.parts.len(), MAX_TEMPLATES);
        assert_eq!(d.evicted(), 5);
        assert!(!d.tracks("template-0") && d.tracks("template-1028"));
    }
}
