//! Wiring: what an engine derives from its rule set alone — the matcher,
//! one detector per rule, which rules read which keys and populations —
//! built at start and rebuilt on reload, carrying over what the new set
//! keeps.

use super::{
    here, novelty_rule, rule_index, sample_period, scanner_for, Engine, Exports, Options,
    ReloadSummary, Role, Stats,
};
use crate::alert::{self, Alerts, Notification};
use crate::decode::{self, Decoder};
use crate::detect::{self, Detector};
use crate::matcher::{Matcher, MatcherError, Scratch};
use crate::mining::watch::Watch;
use crate::rules::{Detect, RuleSet};
use crate::scan;

/// The parts of an engine derived from the rule set alone.
pub(super) struct Wiring {
    pub(super) matcher: Matcher,
    pub(super) cond_users: Vec<Vec<(usize, Role)>>,
    pub(super) population_rules: Vec<usize>,
    pub(super) partition_keys: Vec<Option<String>>,
    /// Group and partition keys of population rules, for the decoder.
    pub(super) names: Vec<String>,
}

impl Wiring {
    fn new(rules: &RuleSet) -> Result<Wiring, MatcherError> {
        let matcher = Matcher::new(rules)?;
        let mut cond_users = vec![Vec::new(); rules.conditions.len()];
        let mut population_rules = Vec::new();
        let mut partition_keys = Vec::new();
        for (ri, r) in rules.rules.iter().enumerate() {
            cond_users[r.cond].push((ri, Role::Primary));
            if let Detect::Sequence { then, .. } = r.detect {
                cond_users[then].push((ri, Role::Then));
            }
            if let Some(c) = r.resolve_on {
                cond_users[c].push((ri, Role::ResolveOn));
            }
            if let Some(p) = &r.progress {
                cond_users[p.cond].push((ri, Role::Progress));
            }
            for (i, u) in r.recents().enumerate() {
                // The compiler bounds the entries (MAX_RECENTS).
                let i = u8::try_from(i).unwrap_or(u8::MAX);
                cond_users[u.after].push((ri, Role::Unless(i)));
                if let Some(c) = u.until {
                    cond_users[c].push((ri, Role::Until(i)));
                }
            }
            if r.detect.needs_population() {
                population_rules.push(ri);
            }
            partition_keys.push(match &r.detect {
                Detect::Spread(s) => s.partition_by.clone(),
                Detect::Share(s) => s.partition_by.clone(),
                _ => None,
            });
        }
        // The cheap path resolves every population key once per line.
        let mut names: Vec<String> = Vec::new();
        for &ri in &population_rules {
            names.extend(rules.rules[ri].group_by.iter().cloned());
            names.extend(partition_keys[ri].iter().cloned());
        }
        // And the group of a progress line, to skip the decode of lines
        // of groups the rule holds nothing for.
        for r in rules.rules.iter().filter(|r| r.progress.is_some()) {
            names.extend(r.group_by.iter().cloned());
        }
        Ok(Wiring {
            matcher,
            cond_users,
            population_rules,
            partition_keys,
            names,
        })
    }

    /// Per rule with a `progress`: the compiled ids of its group keys
    /// (empty for the others).
    fn progress_keys(rules: &RuleSet, decoder: &Decoder) -> Vec<Vec<decode::keys::KeyId>> {
        rules
            .rules
            .iter()
            .map(|r| match r.progress {
                Some(_) => r
                    .group_by
                    .iter()
                    .filter_map(|k| decoder.key_id(k))
                    .collect(),
                None => Vec::new(),
            })
            .collect()
    }

    #[allow(clippy::type_complexity)]
    fn pop_keys(
        &self,
        rules: &RuleSet,
        decoder: &Decoder,
    ) -> Vec<(Vec<decode::keys::KeyId>, Option<decode::keys::KeyId>)> {
        self.population_rules
            .iter()
            .map(|&ri| {
                let ids = rules.rules[ri]
                    .group_by
                    .iter()
                    .filter_map(|k| decoder.key_id(k))
                    .collect();
                (
                    ids,
                    self.partition_keys[ri]
                        .as_ref()
                        .and_then(|k| decoder.key_id(k)),
                )
            })
            .collect()
    }
}

impl Engine {
    /// Builds an engine for a compiled rule set.
    pub fn new(rules: RuleSet, opts: Options) -> Result<Engine, MatcherError> {
        let w = Wiring::new(&rules)?;
        let detectors: Vec<Box<dyn Detector>> = rules.rules.iter().map(detect::build).collect();
        let period = sample_period(&detectors);
        let decoder = Decoder::with_group_keys(&rules.keys, opts.live, &w.names);
        let pop_keys = w.pop_keys(&rules, &decoder);
        let progress_keys = Wiring::progress_keys(&rules, &decoder);
        let n = rules.rules.len();
        let scanner = scanner_for(&w.matcher, &decoder);
        let scan_generation = scanner.generation();
        Ok(Engine {
            scan_slot: scan::ScannerSlot::new(scanner),
            here: here::Here::default(),
            scan_generation,
            rules,
            matcher: w.matcher,
            decoder,
            pop_keys,
            progress_keys,
            key_cache: Vec::new(),
            sampler: detect::Sampler::new(period),
            scratch: Scratch::default(),
            detectors,
            alerts: Alerts::new(),
            cond_users: w.cond_users,
            population_rules: w.population_rules,
            partition_keys: w.partition_keys,
            opts,
            min_time: i64::MAX,
            max_time: None,
            untimed_at: None,
            watermark: i64::MIN,
            last_tick: i64::MIN,
            statuses: Vec::new(),
            stats: Stats::default(),
            rule_hits: vec![0; n],
            evicted_base: vec![0; n],
            retired_evictions: 0,
            novelty: None,
            anomaly: None,
            anomaly_named: Default::default(),
            hit_log: None,
            exports: Exports::default(),
            local_cluster_alerts: true,
            schedule: super::schedule::Schedule::new(n),
            disorder: super::disorder::Disorder::default(),
            clock_now: i64::MIN,
            timers: super::timers::Timers::default(),
        })
        .map(|mut e| {
            e.novelty = novelty_rule(&e.rules).map(|(ri, spec)| (ri, Watch::new(spec)));
            e.anomaly = super::anomaly_rule(&e.rules, &e.population_rules);
            e
        })
    }

    /// Replaces the rule set at run time (SIGHUP, `--watch-rules`). The new
    /// set is wired completely before anything changes, so an error leaves
    /// the old set running. Rules whose [`RuleSet::detection_signature`] is
    /// unchanged keep their detector state and alerts; changed rules start
    /// a fresh detector and adopt their firing alerts (no second page;
    /// resolved if not confirmed within the adoption grace); firing alerts
    /// of removed rules are resolved into `out`. Stream state (sticky
    /// values, partial lines) and all counters carry over.
    pub fn reload(
        &mut self,
        new: RuleSet,
        out: &mut Vec<Notification>,
    ) -> Result<ReloadSummary, MatcherError> {
        let w = Wiring::new(&new)?;
        let mut summary = ReloadSummary::default();
        let old_ids = rule_index(&self.rules);
        let mut old_dets: Vec<Option<Box<dyn Detector>>> = std::mem::take(&mut self.detectors)
            .into_iter()
            .map(Some)
            .collect();
        let mut fate = vec![alert::Fate::Drop; old_dets.len()];
        let n = new.rules.len();
        let mut detectors = Vec::with_capacity(n);
        let mut rule_hits = vec![0; n];
        let mut evicted_base = vec![0; n];
        for (ni, r) in new.rules.iter().enumerate() {
            let Some(&oi) = old_ids.get(r.id.as_str()) else {
                summary.added += 1;
                detectors.push(detect::build(r));
                continue;
            };
            rule_hits[ni] = self.rule_hits.get(oi).copied().unwrap_or(0);
            let base = self.evicted_base.get(oi).copied().unwrap_or(0);
            let kept = self.rules.detection_signature(oi) == new.detection_signature(ni);
            match old_dets.get_mut(oi).and_then(Option::take) {
                Some(d) if kept => {
                    summary.kept += 1;
                    fate[oi] = alert::Fate::Keep(ni);
                    evicted_base[ni] = base;
                    detectors.push(d);
                }
                old => {
                    summary.changed += 1;
                    fate[oi] = alert::Fate::Adopt(ni);
                    evicted_base[ni] = base + old.map_or(0, |d| d.evicted());
                    detectors.push(detect::build(r));
                }
            }
        }
        // Evictions of removed rules stay in the total.
        for (oi, d) in old_dets.iter().enumerate() {
            if let Some(d) = d {
                summary.removed += 1;
                self.retired_evictions +=
                    d.evicted() + self.evicted_base.get(oi).copied().unwrap_or(0);
            }
        }
        let now = if self.max_time.is_some() {
            self.watermark
        } else {
            i64::MIN
        };
        let before = out.len();
        self.alerts.reload(&self.rules.rules, &fate, now, out);
        summary.resolved = out.len() - before;
        self.decoder.rekey(&new.keys, &w.names);
        self.pop_keys = w.pop_keys(&new, &self.decoder);
        self.progress_keys = Wiring::progress_keys(&new, &self.decoder);
        let scanner = scanner_for(&w.matcher, &self.decoder);
        self.scan_generation = scanner.generation();
        self.scan_slot.set(scanner);
        self.key_cache.clear();
        self.scratch = Scratch::default();
        self.matcher = w.matcher;
        self.cond_users = w.cond_users;
        self.population_rules = w.population_rules;
        self.partition_keys = w.partition_keys;
        self.sampler = detect::Sampler::new(sample_period(&detectors));
        self.detectors = detectors;
        self.rule_hits = rule_hits;
        self.evicted_base = evicted_base;
        // Indices changed: what was due is evaluated by the next tick.
        self.schedule = super::schedule::Schedule::new(n);
        self.novelty = match (self.novelty.take(), novelty_rule(&new)) {
            (Some((_, mut w)), Some((ri, spec))) => {
                w.reconfigure(spec);
                Some((ri, w))
            }
            (None, Some((ri, spec))) => Some((ri, Watch::new(spec))),
            (_, None) => None,
        };
        self.rules = new;
        self.anomaly = super::anomaly_rule(&self.rules, &self.population_rules);
        self.anomaly_named.clear();
        self.reschedule_all();
        Ok(summary)
    }

    /// Never warns about the input's formats (a rule test's lines are
    /// bare on purpose).
    pub fn mute_input_hints(&mut self) {
        self.decoder.mute_input_hints();
    }

    /// Labels every line carries unless its stream names them (`--label`):
    /// what a Loki selector selects by, for lines piped or read from files.
    pub fn set_default_labels(&mut self, labels: Vec<(String, String)>) {
        self.decoder.set_default_labels(labels);
    }

    /// Sharded: spread and share rules count and export, but do not alert
    /// (their groups are spread over replicas; see [`Engine::exports`]).
    pub fn set_local_cluster_alerts(&mut self, on: bool) {
        self.local_cluster_alerts = on;
    }
}
