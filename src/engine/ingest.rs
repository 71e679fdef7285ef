//! The line path: a block or a line decoded, matched, routed to its
//! rule's detector (or to novelty), and the alerts evaluated on each hit
//! and on every tick of event time.

use super::timers::WHOLE_RULE;
use super::{Engine, Role, MAX_HIT_LOG};
use crate::alert::Notification;
use crate::decode::{self, resolve_key, Prepared};
use crate::detect::{Hit, Step, CLUSTER};
use crate::matcher::Matcher;
use crate::mining::watch::Novel;
use crate::scan;
use crate::source::{self, Source};

impl Engine {
    /// Feeds a block of lines with what the block scan found in it (hints
    /// of an older rule set are ignored). `sources` are the inputs the
    /// block's runs refer to; the arrival time is the block's. Returns the
    /// number of lines.
    pub fn push_block(
        &mut self,
        sources: &[Source],
        block: &source::block::Block,
        hints: &scan::Hints,
        out: &mut Vec<Notification>,
    ) -> u64 {
        let fallback = Source::named("stdin");
        let mut cursor = hints.cursor(self.scan_generation);
        let mut n = 0;
        self.here.begin(sources);
        for line in block.lines() {
            let src = sources.get(line.input).unwrap_or(&fallback);
            self.here.line(line.input);
            let hint = cursor.line(line.start, line.end);
            match line.time {
                Some(t) => {
                    if let Some(p) = self.decoder.prepare_at(src, line.text, t, hint) {
                        self.ingest(&p, out);
                    }
                }
                None => self.push_hinted(src, line.text, block.arrival, hint, out),
            }
            n += 1;
        }
        n
    }

    /// Feeds one raw line. `arrival` is the wall clock in live mode.
    pub fn push_line(
        &mut self,
        source: &Source,
        line: &str,
        arrival: Option<i64>,
        out: &mut Vec<Notification>,
    ) {
        self.here.line_of(source);
        self.push_hinted(source, line, arrival, None, out);
    }

    fn push_hinted(
        &mut self,
        source: &Source,
        line: &str,
        arrival: Option<i64>,
        hint: Option<decode::LineHint<'_>>,
        out: &mut Vec<Notification>,
    ) {
        let p = match hint {
            Some(h) => self.decoder.prepare_hinted(source, line, arrival, h),
            None => self.decoder.prepare(source, line, arrival),
        };
        if let Some(p) = p {
            self.ingest(&p, out);
        }
        while self.decoder.has_queued() {
            if let Some(p) = self.decoder.prepare_queued(arrival) {
                self.ingest(&p, out);
            }
        }
    }

    /// Feeds one line whose event time is known from its transport (a Loki
    /// entry's timestamp, ns).
    pub fn push_line_at(
        &mut self,
        source: &Source,
        line: &str,
        time: i64,
        out: &mut Vec<Notification>,
    ) {
        self.here.line_of(source);
        if let Some(p) = self.decoder.prepare_at(source, line, time, None) {
            self.ingest(&p, out);
        }
    }

    fn ingest(&mut self, p: &Prepared<'_>, out: &mut Vec<Notification>) {
        if p.time_from.moves_clocks() {
            // Time passes before the line acts: what was due before the
            // watermark it brings is done first, each at its instant.
            let max = self.max_time.map_or(p.time, |m| m.max(p.time));
            let wm = self
                .watermark
                .max(max.saturating_sub(self.opts.lateness_ns));
            if self.timers.next().is_some_and(|t| t <= wm) {
                self.pass_time(wm, out);
            }
            // Cluster-wide rules due before this line's time are evaluated
            // on the state before it, as a live clock would have done.
            if self.schedule.is_due(p.time) {
                self.evaluate_due(p.time, out);
            }
        }
        let (t, timed) = self.event_time(p);
        if self.hit_log.is_some() {
            self.log_volume(p, t);
        }
        self.observe_population(p, t);
        self.match_line(p, t, out);
        self.mine(p, t, timed, out);
    }

    /// The time a line is evaluated at, and whether it moves the clocks:
    /// its own (moving the watermark; a late line is counted and evaluated
    /// at the watermark), or its stream's previous time.
    fn event_time(&mut self, p: &Prepared<'_>) -> (i64, bool) {
        let mut t = p.time;
        let timed = p.time_from.moves_clocks();
        if timed {
            self.min_time = self.min_time.min(t);
            let max = self.max_time.map_or(t, |m| m.max(t));
            self.max_time = Some(max);
            self.disorder.note(t, max.max(self.clock_now));
            self.watermark = self.watermark.max(max - self.opts.lateness_ns);
            if t < self.watermark {
                self.stats.late += 1;
                t = self.watermark;
            }
        } else if let Some(max) = self.max_time {
            // A line without a time of its own stands at its stream's
            // previous time, within the window already open: it moves no
            // clock and is never late.
            t = t.min(max).max(self.watermark);
        } else {
            // No line had a time yet: evaluated at the end (all at one
            // instant) if none ever does.
            self.untimed_at = Some(self.untimed_at.map_or(t, |u| u.max(t)));
        }
        (t, timed)
    }

    /// Lines (and bad ones) per second, for the recording's volume chart.
    fn log_volume(&mut self, p: &Prepared<'_>, t: i64) {
        if let Some(log) = self.hit_log.as_mut() {
            let bad = log.levels
                && self
                    .decoder
                    .level(p)
                    .is_some_and(|l| l >= crate::decode::severity::Level::Error);
            let sec = t.div_euclid(1_000_000_000);
            let room = log.volume.len() < MAX_HIT_LOG;
            match log.volume.last_mut() {
                Some(v) if v.0 == sec => {
                    v.1 = v.1.saturating_add(1);
                    v.2 = v.2.saturating_add(u32::from(bad));
                }
                _ if room => log.volume.push((sec, 1, u32::from(bad))),
                _ => {}
            }
        }
    }

    /// Population: every event's group key, for spread and share. Each
    /// compiled key is resolved at most once per line, whatever the
    /// number of rules sharing it.
    fn observe_population(&mut self, p: &Prepared<'_>, t: i64) {
        self.key_cache.clear();
        let due = !self.population_rules.is_empty() && {
            let digest = self.decoder.population_digest(p);
            self.sampler.due(digest, t)
        };
        for i in 0..self.population_rules.len() {
            if !due {
                break;
            }
            let ri = self.population_rules[i];
            let mut group = None;
            for j in 0..self.pop_keys[i].0.len() {
                let id = self.pop_keys[i].0[j];
                if let Some(v) = self.cached_key(id, p) {
                    group = Some(v);
                    break;
                }
            }
            let Some(g) = group else { continue };
            let part = match self.pop_keys[i].1 {
                Some(id) => self.cached_key(id, p).or_else(|| Some(CLUSTER.to_string())),
                None => Some(CLUSTER.to_string()),
            };
            if let Some(part) = part {
                self.detectors[ri].seen(&g, &part, t);
                if self
                    .hit_log
                    .as_ref()
                    .is_some_and(|l| l.sightings.len() < MAX_HIT_LOG)
                {
                    // The pod as the population reads its keys: from the
                    // line's scan, memoised per line, no full decode.
                    let pod = self
                        .decoder
                        .key_id("pod")
                        .and_then(|id| self.cached_key(id, p))
                        .filter(|pod| *pod != g);
                    if let Some(log) = self.hit_log.as_mut() {
                        log.sightings.push((ri, g, pod, t));
                    }
                }
            }
        }
    }

    /// A line whose every candidate condition is a rule's `progress` needs
    /// no decoding: progress asks only whose line it is and when. The
    /// rules to tell, with the line's group (read by the cheap key path);
    /// empty when none holds anything for it (LiveKit logs `participant
    /// closing` all day, it matters only for a node that is draining).
    /// None when the line must be decoded: another kind of condition, a
    /// progress condition that checks more than its literals, a rule with
    /// partitions, or a group the cheap path cannot read.
    fn progress_only(&mut self, p: &Prepared<'_>) -> Option<Vec<(usize, String)>> {
        let mut to_tell = Vec::new();
        for c in 0..self.scratch.candidates.len() {
            let cid = self.scratch.candidates[c];
            if self.cond_users[cid].is_empty() {
                return None;
            }
            let cond = &self.rules.conditions[cid];
            let literals_only = cond.all.is_empty()
                && cond.none.is_empty()
                && cond.regexes.is_empty()
                && cond.not_regexes.is_empty()
                && cond.fields.is_empty()
                && cond.labels.is_empty();
            for u in 0..self.cond_users[cid].len() {
                let (ri, role) = self.cond_users[cid][u];
                if role != Role::Progress {
                    return None;
                }
                if self.detectors[ri].idle() {
                    continue;
                }
                let mut group = None;
                for k in 0..self.progress_keys.get(ri).map_or(0, Vec::len) {
                    let id = self.progress_keys[ri][k];
                    if let Some(g) = self.cached_key(id, p) {
                        group = Some(g);
                        break;
                    }
                }
                let g = group?;
                if !self.detectors[ri].holds(&g) {
                    continue;
                }
                if !literals_only || self.partition_keys[ri].is_some() {
                    return None;
                }
                to_tell.push((ri, g));
            }
        }
        Some(to_tell)
    }

    /// The rules' conditions: a candidate line (by the matcher's scan, or
    /// the block scan's hint) is decoded into an event and confirmed per
    /// condition; each confirmed one goes to the rules that use it.
    fn match_line(&mut self, p: &Prepared<'_>, t: i64, out: &mut Vec<Notification>) {
        let candidate = match p.prefiltered {
            Some(false) if self.matcher.needs_scan_on_every_line() => {
                self.matcher.scan(&p.text, &mut self.scratch)
            }
            Some(false) => false,
            _ => self.matcher.scan(&p.text, &mut self.scratch),
        };
        let progress = if candidate {
            self.progress_only(p)
        } else {
            None
        };
        if let Some(to_tell) = progress {
            self.stats.candidates += 1;
            for (ri, group) in to_tell {
                let now = self.watermark.max(t.min(self.max_time.unwrap_or(t)));
                self.act(
                    ri,
                    Step::Progress,
                    &group,
                    CLUSTER,
                    now,
                    (t, &p.text),
                    None,
                    out,
                );
            }
        } else if candidate {
            self.stats.candidates += 1;
            let mut event = self.decoder.event(p);
            event.time = t;
            let candidates = std::mem::take(&mut self.scratch.candidates);
            for &cid in &candidates {
                if !Matcher::confirm(&self.rules.conditions[cid], &mut event) {
                    continue;
                }
                for ui in 0..self.cond_users[cid].len() {
                    let (ri, role) = self.cond_users[cid][ui];
                    if role == Role::Progress && self.detectors[ri].idle() {
                        continue;
                    }
                    self.route(ri, role, &event, out);
                }
            }
            self.scratch.candidates = candidates;
        } else {
            let text = p.text.trim_ascii();
            if text.starts_with('{') && !text.ends_with('}') {
                self.decoder.count_malformed();
            }
        }
    }

    /// Novelty: the line's template mined, a new one routed to its rule.
    fn mine(&mut self, p: &Prepared<'_>, t: i64, timed: bool, out: &mut Vec<Notification>) {
        // A trace's frames are mined with their record, not one by one.
        if p.continues {
            return;
        }
        let mut mined = None;
        if let Some((ri, w)) = self.novelty.as_mut() {
            let ri = *ri;
            let level = self.decoder.level(p);
            if w.mines(level) {
                let novel = w.observe(level, &p.text, p.format, p.header.as_ref(), t, timed);
                mined = w.last_mined().zip(level);
                if let Some(novel) = novel {
                    self.route_novel(ri, &novel, p, t, out);
                }
            }
        }
        if let (Some((ai, pi)), Some(((id, learning), level))) = (self.anomaly, mined) {
            if level >= crate::decode::severity::Level::Warn {
                self.route_anomaly(ai, pi, id, learning, level, p, t, out);
            }
        }
    }

    /// A mined line at a watched level: a hit of the anomaly rule, keyed
    /// by its template, grouped by the rule's keys (read by the cheap key
    /// path, no decoding). While the miner learns, it shapes the baseline.
    #[allow(clippy::too_many_arguments)]
    fn route_anomaly(
        &mut self,
        ri: usize,
        pi: usize,
        id: u64,
        learning: bool,
        level: crate::decode::severity::Level,
        p: &Prepared<'_>,
        t: i64,
        out: &mut Vec<Notification>,
    ) {
        let mut group = None;
        for j in 0..self.pop_keys.get(pi).map_or(0, |k| k.0.len()) {
            let key = self.pop_keys[pi].0[j];
            if let Some(v) = self.cached_key(key, p) {
                group = Some(v);
                break;
            }
        }
        let Some(group) = group else {
            return;
        };
        let key = crate::mining::watch::template_key(id);
        let now = self.watermark.max(t.min(self.max_time.unwrap_or(t)));
        let step = if learning {
            Step::Baseline
        } else {
            Step::Primary
        };
        if !learning && self.anomaly_named.insert(id) {
            if self.anomaly_named.len() > 4096 {
                // Bounded: a template forgotten here is named again, which
                // changes nothing where its name is kept.
                self.anomaly_named.clear();
            }
            if let Some(text) = self
                .novelty
                .as_ref()
                .and_then(|(_, w)| w.miner().get(id).map(crate::mining::Template::text))
            {
                self.detectors[ri].annotate(&key, &text, Some(level.as_str()));
            }
            if let Some((lines, span)) = self.novelty.as_ref().and_then(|(_, w)| w.baseline(id)) {
                self.detectors[ri].set_baseline(&key, lines, span);
            }
        }
        self.act(ri, step, &group, &key, now, (t, &p.text), None, out);
    }

    fn cached_key(&mut self, id: decode::keys::KeyId, p: &Prepared<'_>) -> Option<String> {
        if self.key_cache.len() <= id {
            self.key_cache.resize(id + 1, None);
        }
        if let Some(v) = &self.key_cache[id] {
            return v.clone();
        }
        let v = self.decoder.resolve_quick(id, p);
        self.key_cache[id] = Some(v.clone());
        v
    }

    /// The group and partition a line of rule `ri` counts under, in its
    /// role; None when it counts under none (counted as ungrouped where
    /// that is a match's loss).
    fn group_of(
        &mut self,
        ri: usize,
        role: Role,
        event: &decode::Event,
    ) -> Option<(String, String)> {
        let rule = &self.rules.rules[ri];
        let keys = &self.rules.keys;
        let get = |k: &str| event.get(k);
        // A context line may name its group elsewhere than the matches do.
        let group_by = match role {
            Role::Unless(i) | Role::Until(i) => rule
                .recents()
                .nth(usize::from(i))
                .map(|u| &u.group_by)
                .filter(|g| !g.is_empty())
                .unwrap_or(&rule.group_by),
            _ => &rule.group_by,
        };
        let group = if group_by.is_empty() {
            Some(CLUSTER.to_string())
        } else {
            group_by.iter().find_map(|k| resolve_key(keys, k, &get))
        };
        let context = matches!(role, Role::Progress | Role::Unless(_) | Role::Until(_));
        let group = match group {
            Some(g) => g,
            // A context line without a group says nothing about any group.
            None if context => return None,
            None => {
                self.stats.ungrouped += 1;
                if rule.detect.needs_population() {
                    return None;
                }
                "unknown".to_string()
            }
        };
        let partition = match &self.partition_keys[ri] {
            // A line without the partition key belongs to the whole
            // cluster's partition, as its population sightings do.
            Some(k) => resolve_key(keys, k, &get).unwrap_or_else(|| CLUSTER.to_string()),
            None => CLUSTER.to_string(),
        };
        Some((group, partition))
    }

    fn route(&mut self, ri: usize, role: Role, event: &decode::Event, out: &mut Vec<Notification>) {
        let Some((group, partition)) = self.group_of(ri, role, event) else {
            return;
        };
        let now = self
            .watermark
            .max(event.time.min(self.max_time.unwrap_or(event.time)));
        let step = match role {
            Role::ResolveOn => {
                let is_population = self.rules.rules[ri].detect.needs_population();
                let timer_key = if is_population { WHOLE_RULE } else { &group };
                self.catch_up(ri, timer_key, now, out);
                let key = if is_population { &partition } else { &group };
                self.detectors[ri].reset(key);
                let rule = &self.rules.rules[ri];
                self.alerts.resolve(ri, rule, key, event.time, out);
                self.reschedule_key(ri, timer_key, now);
                return;
            }
            Role::Unless(i) => Step::Unless(i),
            Role::Until(i) => Step::Until(i),
            Role::Progress => Step::Progress,
            Role::Then => Step::Then,
            Role::Primary => Step::Primary,
        };
        let line = (event.time, event.text.as_str());
        self.act(ri, step, &group, &partition, now, line, Some(event), out);
    }

    /// A line of rule `ri` in its step, for its group and partition at
    /// `now`: time passes first, then the detector hears it, then the
    /// group (or the rule) is evaluated. `event`: the decoded line, for
    /// the hit log (None for a progress line routed without decoding).
    #[allow(clippy::too_many_arguments)]
    fn act(
        &mut self,
        ri: usize,
        step: Step,
        group: &str,
        partition: &str,
        now: i64,
        (time, text): (i64, &str),
        event: Option<&decode::Event>,
        out: &mut Vec<Notification>,
    ) {
        let is_population = self.rules.rules[ri].detect.needs_population();
        let timer_key = if is_population { WHOLE_RULE } else { group };
        self.catch_up(ri, timer_key, now, out);
        let matched = matches!(step, Step::Primary | Step::Then);
        if matched {
            self.stats.hits += 1;
            if self.rule_hits.len() <= ri {
                self.rule_hits.resize(ri + 1, 0);
            }
            self.rule_hits[ri] += 1;
        }
        let hit = Hit {
            group,
            partition,
            time,
            step,
            sample: text,
            origin: if matched { self.here.origin() } else { None },
        };
        let evicted = self.detectors[ri].evicted();
        let discounted = self.detectors[ri].discounted();
        self.detectors[ri].observe(&hit);
        if matches!(step, Step::Unless(_) | Step::Until(_) | Step::Baseline) {
            // A mark changes no condition by itself; a baseline line
            // only shapes what normal looks like.
            return;
        }
        if matched {
            if let (Some(event), true) = (event, self.hit_log.is_some()) {
                let pod = resolve_key(&self.rules.keys, "pod", &|k: &str| event.get(k));
                self.log_hit(ri, group, pod, time, text);
            }
            // Shards count only the matches their detector counted.
            let anomaly = matches!(
                self.rules.rules[ri].detect,
                crate::rules::Detect::Anomaly(_)
            );
            if self.is_cluster(ri) && !anomaly && self.detectors[ri].discounted() == discounted {
                let id = &self.rules.rules[ri].id;
                self.exports.hit(id, partition, group);
            }
        }
        if self.rules.rules[ri].evaluate_every > 0 {
            // Evaluated like a ruler: at its next instant, not at the hit.
            // An instant older than lines already heard (this line came
            // late) was evaluated before them or had nothing to do: the
            // next one after the newest line takes it.
            let newest = self.max_time.unwrap_or(now).max(now);
            let at = self.on_grid(ri, newest);
            if at == now {
                self.run_due(ri, timer_key, now, out);
            } else {
                self.timers.set(ri, timer_key, at);
            }
        } else if !is_population {
            self.evaluate_hit(ri, group, now, out);
        } else if self.local_cluster_alerts && self.schedule.hit(ri, now) {
            self.evaluate(ri, now, out);
        }
        self.reschedule_key(ri, timer_key, now);
        self.evicted_since(ri, evicted, now);
    }

    /// A line of a new template: a hit of the novelty rule, keyed by the
    /// template, grouped by the rule's keys. Rare (only new templates after
    /// learning), so the line is fully decoded for its group.
    fn route_novel(
        &mut self,
        ri: usize,
        novel: &Novel,
        p: &Prepared<'_>,
        t: i64,
        out: &mut Vec<Notification>,
    ) {
        let event = self.decoder.event(p);
        let rule = &self.rules.rules[ri];
        let keys = &self.rules.keys;
        let get = |k: &str| event.get(k);
        let group = rule
            .group_by
            .iter()
            .find_map(|k| resolve_key(keys, k, &get))
            .unwrap_or_else(|| {
                self.stats.ungrouped += 1;
                "unknown".to_string()
            });
        self.stats.hits += 1;
        if let Some(h) = self.rule_hits.get_mut(ri) {
            *h += 1;
        }
        let now = self.watermark.max(t.min(self.max_time.unwrap_or(t)));
        self.catch_up(ri, &novel.key, now, out);
        let hit = Hit {
            group: &group,
            partition: &novel.key,
            time: t,
            step: Step::Primary,
            sample: &event.text,
            origin: self.here.origin(),
        };
        let evicted = self.detectors[ri].evicted();
        self.detectors[ri].observe(&hit);
        if self.hit_log.is_some() {
            let pod = resolve_key(&self.rules.keys, "pod", &get);
            self.log_hit(ri, &group, pod, t, &event.text);
        }
        self.detectors[ri].annotate(&novel.key, &novel.template, Some(novel.level.as_str()));
        self.evaluate_hit(ri, &novel.key, now, out);
        self.reschedule_key(ri, &novel.key, now);
        self.evicted_since(ri, evicted, now);
    }

    pub(super) fn evaluate(&mut self, ri: usize, now: i64, out: &mut Vec<Notification>) {
        let cluster = self.is_cluster(ri);
        if cluster {
            self.schedule.evaluated(ri, now);
        }
        self.statuses.clear();
        self.detectors[ri].evaluate(now, &mut self.statuses);
        if !self.local_cluster_alerts && cluster {
            return;
        }
        let rule = &self.rules.rules[ri];
        let det = self.detectors[ri].as_ref();
        self.alerts.apply(ri, rule, &self.statuses, det, now, out);
        self.alerts.resolve_due(ri, rule, det, now, out);
    }

    /// After a hit: evaluates just that group where the detector can (so a
    /// flood of distinct groups costs O(1) per hit); spread and share go by
    /// their schedule (see [`super::schedule`]).
    fn evaluate_hit(&mut self, ri: usize, key: &str, now: i64, out: &mut Vec<Notification>) {
        self.statuses.clear();
        if !self.local_cluster_alerts && self.is_cluster(ri) {
            return;
        }
        if self.detectors[ri].evaluate_key(key, now, &mut self.statuses) {
            let rule = &self.rules.rules[ri];
            let det = self.detectors[ri].as_ref();
            self.alerts.apply(ri, rule, &self.statuses, det, now, out);
            // A hit that ends the condition (an absence's group is back)
            // resolves at once when nothing is to be waited for.
            self.alerts.resolve_key_due(ri, rule, key, det, now, out);
        }
    }
}
