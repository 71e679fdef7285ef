//! The tally: both sides' lines mined together and counted again under
//! their final templates, per template and per group of each key alias —
//! counts, the busiest window, the longest run without a pause, the most
//! groups at once, the population that logged anything.

use super::{KEEP_LINES, MAX_GAP, MAX_GROUPS, NS, WINDOW};
use crate::app::AppError;
use crate::decode::mined::mining_message;
use crate::decode::severity::Level;
use crate::decode::{resolve_key, KeyConfig};
use crate::mining::Miner;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// One group's sightings of a template.
#[derive(Debug, Clone, Default)]
pub(super) struct GroupStat {
    pub(super) count: u64,
    /// Times within the last [`WINDOW`], for the busiest window.
    pub(super) recent: VecDeque<i64>,
    pub(super) max_window: usize,
    pub(super) run_start: i64,
    pub(super) last: Option<i64>,
    pub(super) run_gap: i64,
    pub(super) longest_run: i64,
    pub(super) longest_gap: i64,
}

impl GroupStat {
    pub(super) fn add(&mut self, t: i64) {
        self.count += 1;
        self.recent.push_back(t);
        while self.recent.front().is_some_and(|&f| t - f >= WINDOW) {
            self.recent.pop_front();
        }
        self.max_window = self.max_window.max(self.recent.len());
        match self.last {
            Some(l) if t - l <= MAX_GAP => self.run_gap = self.run_gap.max(t - l),
            _ => {
                self.run_start = t;
                self.run_gap = 0;
            }
        }
        self.last = Some(t);
        if t - self.run_start > self.longest_run {
            self.longest_run = t - self.run_start;
            self.longest_gap = self.run_gap;
        }
    }
}

/// The sightings of the last [`WINDOW`] and how many each group has, so
/// the groups at once are known without a pass over the window.
#[derive(Debug, Clone, Default)]
pub(super) struct Recent {
    pub(super) seen: VecDeque<(i64, String)>,
    pub(super) per_group: HashMap<String, usize>,
}

impl Recent {
    /// A sighting of `group` at `t`; the groups within the window now.
    pub(super) fn add(&mut self, t: i64, group: String) -> usize {
        *self.per_group.entry(group.clone()).or_default() += 1;
        self.seen.push_back((t, group));
        while let Some((f, g)) = self.seen.front() {
            if t - f < WINDOW {
                break;
            }
            if let Some(n) = self.per_group.get_mut(g) {
                *n -= 1;
                if *n == 0 {
                    self.per_group.remove(g);
                }
            }
            self.seen.pop_front();
        }
        self.per_group.len()
    }
}

/// What one side (baseline or incident) says of a template.
#[derive(Debug, Clone, Default)]
pub(super) struct Side {
    pub(super) count: u64,
    pub(super) first: Option<i64>,
    pub(super) last: Option<i64>,
    pub(super) level: Option<Level>,
    /// Alias → group → sightings.
    pub(super) groups: BTreeMap<String, BTreeMap<String, GroupStat>>,
    /// Alias → the groups of the last [`WINDOW`], for the most groups at
    /// once.
    pub(super) recent: BTreeMap<String, Recent>,
    pub(super) most_at_once: BTreeMap<String, usize>,
    pub(super) lines: Vec<String>,
}

/// Everything one side's lines say.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) templates: HashMap<u64, Side>,
    /// Alias → groups that logged anything, with their first and last
    /// line's time.
    pub(super) population: BTreeMap<String, BTreeMap<String, (i64, i64)>>,
    pub(super) first: Option<i64>,
    pub(super) last: Option<i64>,
    pub(super) lines: u64,
}

impl Tally {
    /// The groups of `alias` that logged anything while `s` was logged
    /// (from a window before its first line to its last): its peers.
    pub(super) fn peers(&self, alias: &str, s: &Side) -> usize {
        let (Some(a), Some(b)) = (s.first, s.last) else {
            return 0;
        };
        self.population.get(alias).map_or(0, |g| {
            g.values()
                .filter(|(first, last)| *last >= a - WINDOW && *first <= b)
                .count()
        })
    }

    pub(super) fn span_secs(&self) -> f64 {
        match (self.first, self.last) {
            (Some(a), Some(b)) => ((b - a) as f64 / NS as f64).max(60.0),
            _ => 60.0,
        }
    }
}

/// Pass 1 over one side: every message in `range` into the miner.
pub(super) fn mine(
    miner: &mut Miner,
    files: &[String],
    keys: &KeyConfig,
    range: (Option<i64>, Option<i64>),
) -> Result<(), AppError> {
    crate::app::mine::each_line(files, keys, |d, p, _| {
        if !in_range(p.time, range) || p.continues {
            return;
        }
        let level = d.level(p);
        if let Some(m) = mining_message(&p.text, p.format, p.header.as_ref(), level, Some(p.time)) {
            miner.add(&m, p.time, level);
        }
    })?;
    Ok(())
}

/// Pass 2 over one side: every line in `range` counted under its final
/// template, per group of each alias.
pub(super) fn tally(
    files: &[String],
    keys: &KeyConfig,
    range: (Option<i64>, Option<i64>),
    miner: &Miner,
    aliases: &[String],
) -> Result<Tally, AppError> {
    let mut t = Tally::default();
    crate::app::mine::each_line(files, keys, |dec, p, raw| {
        let time = p.time;
        if !in_range(time, range) {
            return;
        }
        t.lines += 1;
        t.first.get_or_insert(time);
        t.last = Some(t.last.map_or(time, |l| l.max(time)));
        let level = dec.level(p);
        // A trace's frames belong to their record's template.
        let message = (!p.continues)
            .then(|| mining_message(&p.text, p.format, p.header.as_ref(), level, Some(time)))
            .flatten()
            .map(|m| m.into_owned());
        let event = dec.event(p);
        let get = |k: &str| event.get(k);
        let groups: Vec<(String, String)> = aliases
            .iter()
            .filter_map(|a| resolve_key(keys, a, &get).map(|g| (a.clone(), g)))
            .collect();
        for (a, g) in &groups {
            let pop = t.population.entry(a.clone()).or_default();
            if let Some(span) = pop.get_mut(g) {
                span.1 = span.1.max(time);
            } else if pop.len() < MAX_GROUPS {
                pop.insert(g.clone(), (time, time));
            }
        }
        let Some(id) = message.and_then(|m| miner.lookup(&m)) else {
            return;
        };
        let side = t.templates.entry(miner.canonical(id)).or_default();
        side.count += 1;
        side.first.get_or_insert(time);
        side.last = Some(side.last.map_or(time, |l| l.max(time)));
        side.level = side.level.max(level);
        if side.lines.len() < KEEP_LINES {
            side.lines.push(raw.to_string());
        }
        for (a, g) in groups {
            let per = side.groups.entry(a.clone()).or_default();
            if per.len() < MAX_GROUPS || per.contains_key(&g) {
                per.entry(g.clone()).or_default().add(time);
            }
            let at_once = side.recent.entry(a.clone()).or_default().add(time, g);
            let m = side.most_at_once.entry(a).or_default();
            *m = (*m).max(at_once);
        }
    })?;
    Ok(t)
}

/// Whether `t` lies in `range` (`[from, to)`, either end open).
pub(super) fn in_range(t: i64, range: (Option<i64>, Option<i64>)) -> bool {
    !(range.0.is_some_and(|a| t < a) || range.1.is_some_and(|b| t >= b))
}
