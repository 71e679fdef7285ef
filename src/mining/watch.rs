//! The novelty policy over the miner: which lines are mined (their level,
//! the ignore list), how long the miner only learns, and which templates
//! count as new — founded after learning, or back after `forget_after` of
//! silence, for `novel_for`. The engine asks it about every line and routes
//! the lines of new templates to the novelty detector.

use super::sample::Sample;
use super::{Miner, MinerConfig, MinerState, Template};
use crate::decode::header::Header;
use crate::decode::mined::mining_message;
use crate::decode::severity::Level;
use crate::rules::Novelty;
use serde::Serialize;
use std::collections::HashMap;

/// Templates remembered as new at once; past it the oldest births go.
const MAX_BORN: usize = 4096;

/// A line whose template is new.
#[derive(Debug, Clone, PartialEq)]
pub struct Novel {
    /// The template id.
    pub id: u64,
    /// The alert key of the template (`template-ID`).
    pub key: String,
    /// The template text.
    pub template: String,
    /// The line's level.
    pub level: Level,
}

/// Counters of the novelty watch.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WatchStats {
    /// Lines mined into templates.
    pub mined: u64,
    /// Mined lines skipped because of the ignore list.
    pub ignored: u64,
    /// Info, debug and unlevelled lines past `chatter_per_second`: counted,
    /// not mined.
    pub chatter_skipped: u64,
    /// Lines of new templates routed to the detector.
    pub novel_lines: u64,
    /// Templates that became new after learning.
    pub novel_templates: u64,
    /// Templates known now.
    pub templates: u64,
    /// Templates evicted by the cap.
    pub templates_evicted: u64,
    /// The learning period is still on (its time or its lines to come).
    pub learning: bool,
    /// Lines the learning period still needs.
    pub learn_lines_left: u64,
}

/// The miner and the policy of what is new.
pub struct Watch {
    miner: Miner,
    spec: Novelty,
    /// Event time until which the miner only learns; None until the first
    /// line sets it (first line + `learn_for`).
    learn_until: Option<i64>,
    /// Lines still to mine before learning may end (it ends when both
    /// `learn_for` of event time has passed and this is 0).
    learn_lines_left: u64,
    /// New templates and when they became new.
    born: HashMap<u64, i64>,
    /// Templates marked known by a person: never new again.
    known: std::collections::BTreeSet<u64>,
    /// Newest event time mined.
    latest: i64,
    /// Which lines of chatter are mined.
    chatter: Sample,
    /// The lowest level that pages: lines below it are chatter.
    pages_from: Option<Level>,
    /// The levels mined, one bit each (`level_bit`).
    mined: u8,
    stats: WatchStats,
    /// The template of the line mined last, and whether it was learned
    /// (the learning period was on): what `anomaly` measures.
    last: Option<(u64, bool)>,
    /// What normal looks like, for `anomaly`: each template's lines over
    /// the learning period, and that period's length (ns); taken when it
    /// ends (or from a baseline file).
    baseline: Option<(HashMap<u64, u64>, i64)>,
}

/// A level's bit in [`Watch::mines`]'s set (None: lines without one).
fn level_bit(level: Option<Level>) -> u8 {
    match level {
        None => 1,
        Some(Level::Debug) => 2,
        Some(Level::Info) => 4,
        Some(Level::Warn) => 8,
        Some(Level::Error) => 16,
        Some(Level::Fatal) => 32,
    }
}

/// The levels `spec` mines, as bits.
fn mined_bits(spec: &Novelty) -> u8 {
    let levels = spec.levels.iter().fold(0, |m, l| m | level_bit(Some(*l)));
    if spec.unleveled {
        levels | level_bit(None)
    } else {
        levels
    }
}

/// The lowest of `levels`.
fn lowest(levels: &[Level]) -> Option<Level> {
    levels.iter().copied().min()
}

/// The alert key of a template.
pub fn template_key(id: u64) -> String {
    format!("template-{id}")
}

fn config(spec: &Novelty) -> MinerConfig {
    MinerConfig {
        variable_after: spec.variable_after,
        max_templates: spec.max_templates,
    }
}

impl Watch {
    /// A watch that learns from its first line on.
    pub fn new(spec: &Novelty) -> Watch {
        Watch {
            miner: Miner::new(config(spec)),
            spec: spec.clone(),
            learn_until: None,
            learn_lines_left: spec.learn_lines,
            born: HashMap::new(),
            known: std::collections::BTreeSet::new(),
            latest: i64::MIN,
            chatter: Sample::new(spec.chatter_per_second),
            pages_from: lowest(&spec.page_levels),
            mined: mined_bits(spec),
            stats: WatchStats::default(),
            last: None,
            baseline: None,
        }
    }

    /// A watch that starts from saved templates (a baseline from
    /// `sigwatch learn` or a previous run's state): if the saved learning
    /// period is over (or none is saved), new templates count from the
    /// first line on.
    pub fn restore(spec: &Novelty, state: &MinerState) -> Watch {
        let mut w = Watch::new(spec);
        w.miner = Miner::restore(state, config(spec));
        w.learn_until = Some(state.learn_until.unwrap_or(i64::MIN));
        // A baseline or a finished period: nothing left to learn; a period
        // under way goes on where it stopped.
        w.learn_lines_left = match state.learn_until {
            Some(_) => state.learn_lines_left.unwrap_or(0),
            None => 0,
        };
        w.born = state.born.iter().copied().take(MAX_BORN).collect();
        w.baseline = if state.baseline_span > 0 {
            Some((
                state.baseline.iter().copied().collect(),
                state.baseline_span,
            ))
        } else if state.learn_until.is_none() {
            // A baseline file (`sigwatch learn`): its counts over its span.
            w.counts_over_span()
        } else {
            None
        };
        w.known = state
            .known
            .iter()
            .copied()
            .take(spec.max_templates)
            .collect();
        w.refresh_stats();
        w
    }

    /// Takes a new rule set's novelty settings, keeping the templates (the
    /// miner is rebuilt only if its own settings changed).
    pub fn reconfigure(&mut self, spec: &Novelty) {
        if config(spec) != self.miner.config() {
            self.miner = Miner::restore(&self.miner.state(), config(spec));
        }
        if spec.learn_for != self.spec.learn_for {
            if let Some(first) = self.first_line() {
                self.learn_until = Some(first.saturating_add(spec.learn_for));
            }
        }
        if spec.chatter_per_second != self.spec.chatter_per_second {
            self.chatter = Sample::new(spec.chatter_per_second);
        }
        self.spec = spec.clone();
        self.pages_from = lowest(&spec.page_levels);
        self.mined = mined_bits(spec);
        self.refresh_stats();
    }

    fn first_line(&self) -> Option<i64> {
        self.learn_until
            .filter(|&u| u != i64::MIN)
            .map(|u| u.saturating_sub(self.spec.learn_for))
    }

    /// Whether lines at `level` (None: without one) are mined (cheap: the
    /// engine asks first).
    #[inline]
    pub fn mines(&self, level: Option<Level>) -> bool {
        self.mined & level_bit(level) != 0
    }

    /// Whether a line at `level` is chatter: below the lowest level that
    /// pages (all of them when no level pages), or without a level.
    #[inline]
    fn is_chatter(&self, level: Option<Level>) -> bool {
        match (level, self.pages_from) {
            (Some(l), Some(from)) => l < from,
            _ => true,
        }
    }

    /// Mines one payload at `level` (its format as sniffed, its text header
    /// if the decoder read one) at event time `time`; returns what to
    /// report when its template is new at a paging level. `timed`: the
    /// time is the line's own; an inherited one (a line without a time)
    /// never starts or moves the learning period.
    #[inline]
    pub fn observe(
        &mut self,
        level: Option<Level>,
        text: &str,
        format: &str,
        header: Option<&Header>,
        time: i64,
        timed: bool,
    ) -> Option<Novel> {
        self.last = None;
        // The common case, inline: a line not mined, or chatter past its
        // allowance (most lines of a busy log).
        if !self.mines(level) {
            return None;
        }
        if self.is_chatter(level) && !self.chatter.admit(time) {
            self.stats.chatter_skipped += 1;
            return None;
        }
        self.mine(level, text, format, header, time, timed)
    }

    /// [`Watch::observe`] for a line that is mined.
    #[inline(never)]
    fn mine(
        &mut self,
        level: Option<Level>,
        text: &str,
        format: &str,
        header: Option<&Header>,
        time: i64,
        timed: bool,
    ) -> Option<Novel> {
        let message = mining_message(text, format, header, level, Some(time))?;
        if self
            .spec
            .ignore
            .iter()
            .any(|l| message.contains(l.as_str()))
        {
            self.stats.ignored += 1;
            return None;
        }
        self.stats.mined += 1;
        let learn_until = if timed {
            self.latest = self.latest.max(time);
            *self
                .learn_until
                .get_or_insert(time.saturating_add(self.spec.learn_for))
        } else {
            // Before any timed line, an untimed one is learned.
            self.learn_until.unwrap_or(i64::MAX)
        };
        let before = self.miner.evicted() + self.miner.merged();
        let s = self.miner.add(&message, time, level);
        if self.miner.evicted() + self.miner.merged() != before {
            // Evicted or merged into an older one: forget its birth (a
            // merge keeps the older template's).
            self.born.retain(|id, _| self.miner.get(*id).is_some());
        }
        let learning = time < learn_until || self.learn_lines_left > 0;
        self.last = Some((s.id, learning));
        if !learning && self.baseline.is_none() {
            self.baseline = self.counts_over_span();
        }
        if learning {
            self.learn_lines_left = self.learn_lines_left.saturating_sub(1);
            if self.learn_lines_left == 0 && time >= learn_until {
                // The lines came after the time: learning ends here.
                self.learn_until = Some(time);
            }
            return None;
        }
        let back = s
            .previous
            .is_some_and(|p| self.spec.forget_after > 0 && time - p >= self.spec.forget_after);
        if (s.created || back) && !self.known.contains(&s.id) {
            self.birth(s.id, time);
        }
        let born = *self.born.get(&s.id)?;
        let level = level?;
        if time - born > self.spec.novel_for || !self.spec.page_levels.contains(&level) {
            return None;
        }
        self.stats.novel_lines += 1;
        let template = self.miner.get(s.id).map(Template::text)?;
        Some(Novel {
            id: s.id,
            key: template_key(s.id),
            template,
            level,
        })
    }

    fn birth(&mut self, id: u64, time: i64) {
        if self.born.len() >= MAX_BORN {
            let novel_for = self.spec.novel_for;
            self.born.retain(|_, b| time - *b <= novel_for);
            if self.born.len() >= MAX_BORN {
                if let Some((&oldest, _)) = self.born.iter().min_by_key(|(_, b)| **b) {
                    self.born.remove(&oldest);
                }
            }
        }
        self.born.insert(id, time);
        self.stats.novel_templates += 1;
    }

    /// Every template's lines over the span of all of them: the baseline
    /// when learning ends (None before any line).
    fn counts_over_span(&self) -> Option<(HashMap<u64, u64>, i64)> {
        let mut first = i64::MAX;
        let mut last = i64::MIN;
        let mut counts = HashMap::new();
        for t in self.miner.templates() {
            first = first.min(t.first_seen);
            last = last.max(t.last_seen);
            counts.insert(t.id, t.count);
        }
        (last > first).then(|| (counts, last - first))
    }

    /// A template's baseline: its lines over the learning period and the
    /// period's length (ns); None before the period ended.
    pub fn baseline(&self, id: u64) -> Option<(u64, i64)> {
        let (counts, span) = self.baseline.as_ref()?;
        Some((counts.get(&id).copied().unwrap_or(0), *span))
    }

    /// The template of the line [`Watch::observe`] mined last and whether
    /// it was learned; None when that line was not mined.
    pub fn last_mined(&self) -> Option<(u64, bool)> {
        self.last
    }

    /// Whether the learning period is still on at the newest line.
    pub fn learning(&self) -> bool {
        self.learn_until.is_none_or(|u| self.latest < u) || self.learn_lines_left > 0
    }

    /// Lines still to mine before the learning period may end.
    pub fn learn_lines_left(&self) -> u64 {
        self.learn_lines_left
    }

    /// The saved form: templates, the learning period if not over, and the
    /// templates still new.
    pub fn state(&self) -> MinerState {
        let mut st = self.miner.state();
        st.learn_until = self.learn_until.filter(|_| self.learning());
        st.learn_lines_left = st
            .learn_until
            .is_some()
            .then_some(self.learn_lines_left)
            .filter(|n| *n > 0);
        let mut born: Vec<(u64, i64)> = self.born.iter().map(|(k, v)| (*k, *v)).collect();
        born.sort_unstable();
        st.born = born;
        if let Some((counts, span)) = &self.baseline {
            let mut b: Vec<(u64, u64)> = counts
                .iter()
                .filter(|(id, _)| self.miner.get(**id).is_some())
                .map(|(k, v)| (*k, *v))
                .collect();
            b.sort_unstable();
            st.baseline = b;
            st.baseline_span = *span;
        }
        st.known = self
            .known
            .iter()
            .copied()
            .filter(|id| self.miner.get(*id).is_some())
            .collect();
        st
    }

    /// Marks template `id` as known for good: no longer new, never new
    /// again. Returns its text, or None when no such template is kept.
    pub fn know(&mut self, id: u64) -> Option<String> {
        let text = self.miner.get(id).map(Template::text)?;
        if self.known.len() >= self.spec.max_templates {
            // Those of templates evicted since first.
            let miner = &self.miner;
            self.known.retain(|k| miner.get(*k).is_some());
        }
        if self.known.len() < self.spec.max_templates {
            self.known.insert(id);
        }
        self.born.remove(&id);
        Some(text)
    }

    /// The miner.
    pub fn miner(&self) -> &Miner {
        &self.miner
    }

    fn refresh_stats(&mut self) {
        self.stats.templates = self.miner.len() as u64;
        self.stats.templates_evicted = self.miner.evicted();
    }

    /// Counters.
    pub fn stats(&self) -> WatchStats {
        let mut s = self.stats.clone();
        s.templates = self.miner.len() as u64;
        s.templates_evicted = self.miner.evicted();
        s.learning = self.learning();
        s.learn_lines_left = self.learn_lines_left;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const S: i64 = 1_000_000_000;

    fn spec() -> Novelty {
        Novelty {
            levels: vec![Level::Warn, Level::Error, Level::Fatal],
            unleveled: false,
            chatter_per_second: 1000,
            page_levels: vec![Level::Error, Level::Fatal],
            learn_for: 600 * S,
            learn_lines: 0,
            window: 300 * S,
            min_count: 5,
            min_groups: 2,
            novel_for: 3600 * S,
            forget_after: 86_400 * S,
            max_templates: 100,
            variable_after: 3,
            ignore: vec!["healthz".into()],
        }
    }
    fn line(level: &str, msg: &str) -> String {
        format!(r#"{{"level":"{level}","msg":"{msg}"}}"#)
    }
    fn see(w: &mut Watch, t: i64, level: &str, msg: &str) -> Option<String> {
        let text = line(level, msg);
        let l = crate::decode::mined::quick_level(&text, "json");
        w.observe(l, &text, "json", None, t * S, true)
            .map(|n| n.template)
    }

    fn see_ns(w: &mut Watch, t: i64, level: &str, msg: &str) {
        let text = line(level, msg);
        let l = crate::decode::mined::quick_level(&text, "json");
        w.observe(l, &text, "json", None, t, true);
    }

    /// A quiet start: six start-up lines, an hour of nothing, then the
    /// service's everyday traffic. By the clock alone learning would be
    /// over before the traffic; with `learn_lines` it learns the traffic
    /// first, and a restart in the middle goes on where it stopped.
    #[test]
    fn learning_needs_its_lines_as_well_as_its_time() {
        let mut sp = spec();
        sp.learn_lines = 20;
        let mut w = Watch::new(&sp);
        for i in 0..6 {
            assert_eq!(
                see(&mut w, i, "error", &format!("startup step {i} failed")),
                None
            );
        }
        let traffic = [
            "cache miss for key",
            "upstream timeout calling auth",
            "retrying request",
        ];
        let mut t = 3600;
        for round in 0..3 {
            for m in traffic {
                assert_eq!(see(&mut w, t, "error", m), None, "round {round}: {m}");
                t += 1;
            }
        }
        assert!(w.learning());
        assert_eq!(w.stats().learn_lines_left, 20 - 6 - 9);
        // A restart keeps the lines still to learn.
        let st = w.state();
        assert_eq!(st.learn_lines_left, Some(5));
        let mut w = Watch::restore(&sp, &st);
        for m in traffic.iter().chain(traffic[..2].iter()) {
            assert_eq!(see(&mut w, t, "error", m), None);
            t += 1;
        }
        assert!(!w.learning());
        // The everyday lines are known; a really new one is new.
        for m in traffic {
            assert_eq!(see(&mut w, t, "error", m), None);
        }
        assert!(see(&mut w, t + 1, "error", "disk quota exceeded on volume").is_some());
        // By the clock alone (no minimum), the same traffic would page.
        sp.learn_lines = 0;
        let mut w = Watch::new(&sp);
        see(&mut w, 0, "error", "startup step 0 failed");
        assert!(see(&mut w, 3600, "error", traffic[0]).is_some());
    }

    #[test]
    fn chatter_past_its_budget_is_skipped_and_counted_but_paging_levels_never_are() {
        let mut sp = spec();
        sp.levels = vec![Level::Info, Level::Warn, Level::Error, Level::Fatal];
        sp.chatter_per_second = 10;
        let mut w = Watch::new(&sp);
        // 10 s of burst (100 lines, second 0), then 100 lines in each of
        // seconds 1 and 2: by the last second's rate, 1 + 100/32 = 4 of
        // them a second on average (see `sample`).
        for i in 0..300 {
            see(&mut w, i / 100, "info", &format!("tick {i} done"));
        }
        let st = w.stats();
        assert!(
            (102..=114).contains(&st.mined),
            "the burst plus the line-rate share, got {}",
            st.mined
        );
        assert_eq!(st.chatter_skipped, 300 - st.mined);
        // Warnings do not page here (page_levels: error): chatter too.
        for i in 0..50 {
            see(&mut w, 3, "warn", &format!("slow call {i}"));
        }
        let warned = w.stats().mined - st.mined;
        assert!((1..=10).contains(&warned), "{warned} of 50 warnings mined");
        // Errors page: mined whatever the budget.
        let st = w.stats();
        for i in 0..50 {
            see(&mut w, 3, "error", &format!("failed call {i}"));
        }
        assert_eq!(w.stats().mined, st.mined + 50);
        assert_eq!(w.stats().chatter_skipped, st.chatter_skipped);
        // When warnings page, they are never sampled.
        sp.page_levels = vec![Level::Warn, Level::Error, Level::Fatal];
        let mut w = Watch::new(&sp);
        for i in 0..300 {
            see(&mut w, 0, "warn", &format!("slow call {i}"));
        }
        assert_eq!((w.stats().mined, w.stats().chatter_skipped), (300, 0));
        // No limit: every line.
        sp.chatter_per_second = 0;
        let mut w = Watch::new(&sp);
        for i in 0..300 {
            see(&mut w, 0, "info", &format!("tick {i} done"));
        }
        assert_eq!((w.stats().mined, w.stats().chatter_skipped), (300, 0));
    }

    #[test]
    fn the_chatter_sample_follows_the_line_rate_and_keeps_quiet_streams_whole() {
        let mut sp = spec();
        sp.levels = vec![Level::Info, Level::Warn, Level::Error, Level::Fatal];
        sp.chatter_per_second = 100;
        // 400 lines per second of event time for an hour: about 1/32 of
        // them (plus 10 a second), not the 100 a second (25 %) the clock
        // alone would allow.
        let mut w = Watch::new(&sp);
        let n = 400 * 3600;
        for i in 0..n {
            see_ns(&mut w, i * (S / 400), "info", "participant active");
        }
        let share = w.stats().mined as f64 / n as f64;
        assert!(
            (0.045..0.065).contains(&share),
            "mined {share:.3} of the lines"
        );
        assert_eq!(w.stats().chatter_skipped, n as u64 - w.stats().mined);
        // 5 lines a second: every one (the floor is 10).
        let mut w = Watch::new(&sp);
        for i in 0..5 * 3600 {
            see_ns(&mut w, i * (S / 5), "info", "participant active");
        }
        assert_eq!(w.stats().chatter_skipped, 0);
    }

    #[test]
    fn learns_first_then_reports_new_error_templates_only() {
        let mut w = spec_watch();
        assert_eq!(see(&mut w, 0, "error", "disk sda-1 slow"), None, "learning");
        assert_eq!(
            see(&mut w, 599, "error", "cache miss storm on shard 7"),
            None
        );
        assert!(w.learning());
        // After learning: known templates are quiet, new ones report.
        assert_eq!(see(&mut w, 700, "error", "disk sdb-2 slow"), None);
        assert!(!w.learning());
        assert_eq!(
            see(
                &mut w,
                701,
                "error",
                "failed to open /data/seg-0042.log: no space left on device"
            )
            .as_deref(),
            Some("failed to open <*>: no space left on device")
        );
        assert_eq!(
            see(
                &mut w,
                702,
                "error",
                "failed to open /data/seg-0043.log: no space left on device"
            )
            .as_deref(),
            Some("failed to open <*>: no space left on device"),
            "still new"
        );
        // Info never; warn is mined but does not report; ignored literals are skipped.
        assert_eq!(see(&mut w, 703, "info", "brand new chatter appeared"), None);
        assert_eq!(see(&mut w, 704, "warn", "brand new warning appeared"), None);
        assert_eq!(see(&mut w, 705, "error", "probe /healthz failed"), None);
        let st = w.stats();
        assert_eq!((st.novel_lines, st.ignored, st.novel_templates), (2, 1, 2));
        // A template stays new for novel_for only.
        assert_eq!(
            see(
                &mut w,
                701 + 3601,
                "error",
                "failed to open /x/7: no space left on device"
            ),
            None
        );
    }

    fn spec_watch() -> Watch {
        Watch::new(&spec())
    }

    #[test]
    fn a_template_silent_for_forget_after_is_new_again() {
        let mut w = spec_watch();
        see(&mut w, 0, "error", "replica lag 30s on db-2");
        assert_eq!(see(&mut w, 1000, "error", "replica lag 31s on db-2"), None);
        assert!(see(&mut w, 1000 + 86_400, "error", "replica lag 9s on db-3").is_some());
    }

    #[test]
    fn a_baseline_skips_learning_and_a_restart_keeps_what_is_new() {
        let mut learner = spec_watch();
        see(&mut learner, 0, "error", "disk sda-1 slow");
        let mut base = learner.state();
        base.learn_until = None; // what `sigwatch learn` writes
        let mut w = Watch::restore(&spec(), &base);
        assert!(!w.learning(), "a learned baseline does not learn again");
        // Known at once; unknown at once, even before the learn_for of a fresh start.
        assert_eq!(see(&mut w, 10, "error", "disk sdc-3 slow"), None);
        assert!(see(&mut w, 11, "error", "shard 4 lost quorum").is_some());
        // Saved and restored mid-way: the template is still new.
        let saved = w.state();
        assert_eq!(saved.born.len(), 1);
        let mut again = Watch::restore(&spec(), &saved);
        assert!(see(&mut again, 20, "error", "shard 5 lost quorum").is_some());
        // A fresh watch saved during learning keeps its learning period.
        let mut fresh = spec_watch();
        see(&mut fresh, 0, "error", "disk sda-1 slow");
        assert_eq!(fresh.state().learn_until, Some(600 * S));
        let mut resumed = Watch::restore(&spec(), &fresh.state());
        assert_eq!(
            see(&mut resumed, 100, "error", "shard 6 lost quorum"),
            None,
            "still learning"
        );
    }
}
