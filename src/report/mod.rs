//! The picture of an incident: `sigwatch replay --report incident.html`
//! writes one self-contained HTML file (inline CSS, JavaScript and SVG, no
//! network) with one lane per node plus a cluster lane (each drawn when
//! something is on it), signature hits as
//! marks whose density shows where they pile up, alert intervals as bars
//! coloured by severity, incidents outlined, and the sample lines behind a
//! click. The live status page of `run --listen` (`/`) shares its look.
//!
//! Hits are aggregated into time buckets as they arrive (the bucket width
//! doubles when the buckets outgrow their bound) and sample lines are kept
//! evenly spread in time per lane and rule, so a 2 M-line replay gives a
//! file of a few hundred kilobytes that opens at once.

use crate::alert::{AlertState, Notification};
use crate::clock::format_rfc3339;
use crate::engine::{HitRecord, Recording};
use crate::incident::Incidents;
use crate::rules::RuleSet;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

const STYLE: &str = include_str!("style.css");
const REPORT_JS: &str = include_str!("report.js");
const STATUS_JS: &str = include_str!("status.js");

/// The lane of cluster-wide alerts (spread, share, novelty).
pub const CLUSTER_LANE: &str = "cluster";
/// Most buckets kept while recording; past it the width doubles.
const MAX_BUCKETS: usize = 200_000;
/// Most buckets per lane and rule drawn in the page.
const DRAWN_BUCKETS: i64 = 600;
/// Most lanes; hits of further groups go to the last lane, counted.
const MAX_LANES: usize = 400;
/// Most alert bars; further alerts are counted.
const MAX_ALERTS: usize = 5_000;
/// Sample lines kept per lane and rule.
const SAMPLES_PER_SERIES: usize = 24;
/// Sample lines kept per lane and rule by the live report (at most 400
/// lanes × rules × 8 lines of 400 bytes).
const LIVE_SAMPLES_PER_SERIES: usize = 8;
/// Most buckets the live report keeps: it lives as long as the process
/// and shows the recent past, so a quarter of a replay's budget (about
/// 2 MB a map instead of 8).
const LIVE_MAX_BUCKETS: usize = MAX_BUCKETS / 4;

#[derive(Debug, Clone)]
struct RuleMeta {
    id: String,
    title: String,
    severity: String,
    cluster: bool,
    kind: &'static str,
}

/// Sample lines spread over time: when full, every other one goes and the
/// least gap between kept samples doubles.
#[derive(Debug, Clone, Default)]
struct Spread {
    kept: Vec<(i64, String)>,
    gap: i64,
}

impl Spread {
    fn offer(&mut self, t: i64, line: &str, most: usize) {
        if let Some((last, _)) = self.kept.last() {
            if t < last.saturating_add(self.gap) {
                return;
            }
        }
        self.kept.push((t, line.to_string()));
        if self.kept.len() > most {
            let mut i = 0;
            self.kept.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.gap = (self.gap.max(500_000_000)).saturating_mul(2);
        }
    }
}

#[derive(Debug, Clone, Serialize)]
struct AlertBar {
    lane: usize,
    rule: usize,
    group: String,
    severity: String,
    summary: String,
    start: i64,
    end: Option<i64>,
    samples: Vec<String>,
    fingerprint: String,
}

/// Records a replay for its report: hits by lane, rule and time bucket,
/// alert intervals, then the incidents at the end.
#[derive(Debug, Clone)]
pub struct Recorder {
    rules: Vec<RuleMeta>,
    lanes: Vec<String>,
    lane_of: HashMap<String, usize>,
    width: i64,
    buckets: HashMap<(u32, u32, i64), u64>,
    samples: HashMap<(u32, u32), Spread>,
    alerts: Vec<AlertBar>,
    open: HashMap<String, usize>,
    span: Option<(i64, i64)>,
    hits: u64,
    lanes_merged: u64,
    alerts_omitted: u64,
    /// The pod of each lane's lines (the first seen), by lane.
    pods: HashMap<u32, String>,
    /// Population sightings by lane, rule and bucket: a peer that is alive.
    seen: HashMap<(u32, u32, i64), u64>,
    /// Hits per rule: only the peers of rules that saw something are drawn.
    rule_hits: HashMap<u32, u64>,
    /// Lines (and error lines) per bucket, over the whole input.
    volume: HashMap<i64, (u64, u64)>,
    /// Whether the volume counts error lines.
    levels: bool,
    /// Sample lines kept per lane and rule.
    samples_per_series: usize,
    /// Buckets kept at most before the width doubles.
    max_buckets: usize,
}

impl Recorder {
    /// A recorder for the rules of `set` (rule indices as the engine's).
    pub fn new(set: &RuleSet) -> Recorder {
        let rules = set
            .rules
            .iter()
            .map(|r| RuleMeta {
                id: r.id.clone(),
                title: r.title.clone(),
                severity: r.severity.as_str().to_string(),
                cluster: r.detect.speaks_for_many(),
                kind: r.detect.kind(),
            })
            .collect();
        let mut r = Recorder {
            rules,
            lanes: Vec::new(),
            lane_of: HashMap::new(),
            width: 1_000_000_000,
            buckets: HashMap::new(),
            samples: HashMap::new(),
            alerts: Vec::new(),
            open: HashMap::new(),
            span: None,
            hits: 0,
            lanes_merged: 0,
            alerts_omitted: 0,
            pods: HashMap::new(),
            seen: HashMap::new(),
            rule_hits: HashMap::new(),
            volume: HashMap::new(),
            levels: false,
            samples_per_series: SAMPLES_PER_SERIES,
            max_buckets: MAX_BUCKETS,
        };
        r.lane(CLUSTER_LANE);
        r
    }

    /// A recorder for the live report of `run` (`/report`): as [`Recorder::new`]
    /// with fewer sample lines, as it lives as long as the process.
    pub fn live(set: &RuleSet) -> Recorder {
        Recorder {
            samples_per_series: LIVE_SAMPLES_PER_SERIES,
            max_buckets: LIVE_MAX_BUCKETS,
            ..Recorder::new(set)
        }
    }

    fn lane(&mut self, name: &str) -> usize {
        if let Some(&i) = self.lane_of.get(name) {
            return i;
        }
        if self.lanes.len() >= MAX_LANES {
            self.lanes_merged += 1;
            return self.lanes.len() - 1;
        }
        self.lanes.push(name.to_string());
        self.lane_of.insert(name.to_string(), self.lanes.len() - 1);
        self.lanes.len() - 1
    }

    fn widen(&mut self, t: i64) {
        self.span = Some(match self.span {
            Some((a, b)) => (a.min(t), b.max(t)),
            None => (t, t),
        });
    }

    /// Takes what the engine recorded over one block
    /// ([`crate::engine::Engine::take_recording`]).
    pub fn record(&mut self, rec: Recording) {
        self.hits(rec.hits);
        for (rule, group, pod, t) in rec.sightings {
            let lane = self.lane(&group) as u32;
            if let Some(pod) = pod {
                self.pods.entry(lane).or_insert(pod);
            }
            self.widen(t);
            *self
                .seen
                .entry((lane, rule as u32, t.div_euclid(self.width)))
                .or_default() += 1;
            self.coarsen();
        }
        for (sec, lines, errors) in rec.volume {
            let t = sec.saturating_mul(1_000_000_000);
            self.widen(t);
            self.levels |= errors > 0;
            let v = self.volume.entry(t.div_euclid(self.width)).or_default();
            v.0 += u64::from(lines);
            v.1 += u64::from(errors);
            self.coarsen();
        }
    }

    /// Takes signature hits.
    pub fn hits(&mut self, hits: Vec<HitRecord>) {
        for h in hits {
            let lane = self.lane(&h.group) as u32;
            let rule = h.rule as u32;
            self.hits += 1;
            *self.rule_hits.entry(rule).or_default() += 1;
            self.widen(h.time);
            if let Some(pod) = h.pod {
                self.pods.entry(lane).or_insert(pod);
            }
            *self
                .buckets
                .entry((lane, rule, h.time.div_euclid(self.width)))
                .or_default() += 1;
            self.samples.entry((lane, rule)).or_default().offer(
                h.time,
                &h.line,
                self.samples_per_series,
            );
            self.coarsen();
        }
    }

    /// Doubles the bucket width when the buckets outgrow their bound.
    fn coarsen(&mut self) {
        if self.buckets.len() + self.seen.len() + self.volume.len() <= self.max_buckets {
            return;
        }
        self.width = self.width.saturating_mul(2);
        let old = std::mem::take(&mut self.buckets);
        for ((l, r, b), n) in old {
            *self.buckets.entry((l, r, b.div_euclid(2))).or_default() += n;
        }
        let old = std::mem::take(&mut self.seen);
        for ((l, r, b), n) in old {
            *self.seen.entry((l, r, b.div_euclid(2))).or_default() += n;
        }
        let old = std::mem::take(&mut self.volume);
        for (b, (n, e)) in old {
            let v = self.volume.entry(b.div_euclid(2)).or_default();
            v.0 += n;
            v.1 += e;
        }
    }

    /// Takes one alert notification (incident notifications are ignored).
    pub fn alert(&mut self, n: &Notification) {
        if n.incident.is_some() || n.repeat {
            return;
        }
        let Some(rule) = self.rules.iter().position(|r| r.id == n.rule) else {
            return;
        };
        match n.state {
            AlertState::Firing => {
                if self.alerts.len() >= MAX_ALERTS {
                    self.alerts_omitted += 1;
                    return;
                }
                let start = n.starts_at.ns().unwrap_or(0);
                self.widen(start);
                // A cluster-wide alert that names a node (a share rule's
                // black hole) goes to that node's lane; the rest (spread,
                // novelty) to the cluster lane.
                let lane_name =
                    if self.rules[rule].cluster && !self.lane_of.contains_key(n.group.as_str()) {
                        CLUSTER_LANE
                    } else {
                        n.group.as_str()
                    };
                let lane = self.lane(lane_name);
                self.open.insert(n.fingerprint.clone(), self.alerts.len());
                self.alerts.push(AlertBar {
                    lane,
                    rule,
                    group: n.group.clone(),
                    severity: n.severity.clone(),
                    summary: n
                        .annotations
                        .get("summary")
                        .cloned()
                        .unwrap_or_else(|| n.title.clone()),
                    start,
                    end: None,
                    samples: n.samples.clone(),
                    fingerprint: n.fingerprint.clone(),
                });
            }
            AlertState::Resolved => {
                if let Some(i) = self.open.remove(&n.fingerprint) {
                    let end = n.ends_at.as_ref().and_then(|e| e.ns());
                    if let Some(e) = end {
                        self.widen(e);
                    }
                    if let Some(a) = self.alerts.get_mut(i) {
                        a.end = end;
                    }
                }
            }
        }
    }

    /// The report: one HTML page, everything inline.
    pub fn render(&self, incidents: &Incidents, title: &str) -> String {
        let data = self.data(incidents, title);
        let json = serde_json::to_string(&data)
            .unwrap_or_else(|_| "{}".into())
            // Never end the script element early.
            .replace("</", "<\\/");
        page(
            &format!("sigwatch report — {title}"),
            &format!(
                "<div id=\"summary\"></div><div id=\"chart\"></div><div id=\"legend\"></div>\
                 <div id=\"details\" class=\"details\">Click a mark or a bar for its lines.</div>\
                 <script id=\"data\" type=\"application/json\">{json}</script>\
                 <script>{REPORT_JS}</script>"
            ),
        )
    }

    fn data(&self, incidents: &Incidents, title: &str) -> serde_json::Value {
        let (t0, t1) = self.span.unwrap_or((0, 1));
        let t1 = t1.max(t0 + 1);
        let per = ((t1 - t0) / DRAWN_BUCKETS).max(1);
        let drawn = ((per + self.width - 1) / self.width).max(1) * self.width;
        let mut agg: BTreeMap<(u32, u32, i64), u64> = BTreeMap::new();
        for ((l, r, b), n) in &self.buckets {
            let t = b * self.width;
            *agg.entry((*l, *r, (t - t0).div_euclid(drawn))).or_default() += n;
        }
        let hits: Vec<[i64; 4]> = agg
            .into_iter()
            .map(|((l, r, b), n)| [i64::from(l), i64::from(r), b, n as i64])
            .collect();
        let bucket_of = |b: i64| (b * self.width - t0).div_euclid(drawn);
        let lane_of_pod = self.lane_of_pod();
        let (seen, seen_rules) = self.seen_series(&lane_of_pod, bucket_of);
        let mut volume: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
        for (b, (n, e)) in &self.volume {
            let v = volume.entry(bucket_of(*b)).or_default();
            v.0 += n;
            v.1 += e;
        }
        let volume: Vec<[i64; 3]> = volume
            .into_iter()
            .map(|(b, (n, e))| [b, n as i64, e as i64])
            .collect();
        let pods: Vec<Option<&String>> = (0..self.lanes.len())
            .map(|i| {
                self.pods
                    .get(&(i as u32))
                    .filter(|p| lane_of_pod.get(p.as_str()) == Some(&(i as u32)))
            })
            .collect();

        let mut samples: Vec<serde_json::Value> = self
            .samples
            .iter()
            .map(|((l, r), s)| {
                serde_json::json!({
                    "lane": l, "rule": r,
                    "lines": s.kept.iter().map(|(t, line)| serde_json::json!([ms(*t - t0), line])).collect::<Vec<_>>(),
                })
            })
            .collect();
        samples.sort_by_key(|v| (v["lane"].as_u64(), v["rule"].as_u64()));
        let incs = self.incidents_json(incidents, t0);
        serde_json::json!({
            "title": title,
            "start": format_rfc3339(t0),
            "end": format_rfc3339(t1),
            "t0": t0 / 1_000_000,
            "duration": ms(t1 - t0),
            "bucket": ms(drawn),
            "zone": "UTC",
            "lanes": self.lanes,
            "pods": pods,
            "seen": seen,
            "seen_rules": seen_rules,
            "volume": volume,
            "levels": self.levels,
            "rules": self.rules.iter().map(|r| serde_json::json!({
                "id": r.id, "title": r.title, "severity": r.severity, "cluster": r.cluster,
                "kind": r.kind,
            })).collect::<Vec<_>>(),
            "hits": hits,
            "samples": samples,
            "alerts": self.alerts.iter().map(|a| serde_json::json!({
                "lane": a.lane, "rule": a.rule, "group": a.group, "severity": a.severity,
                "summary": a.summary, "start": ms(a.start - t0), "end": a.end.map(|e| ms(e - t0)),
                "samples": a.samples, "fingerprint": a.fingerprint,
            })).collect::<Vec<_>>(),
            "incidents": incs,
            "counts": {
                "hits": self.hits,
                "alerts": self.alerts.len() as u64 + self.alerts_omitted,
                "alerts_omitted": self.alerts_omitted,
                "lanes_merged": self.lanes_merged,
            },
        })
    }

    /// The lane each pod is drawn on. The peers of the population rules
    /// that saw something count too: a node
    /// alive without a hit is the healthy peer a black hole stands out
    /// against.
    /// A group seen by its pod name (its lines before the node ID came)
    /// is drawn on the lane of the node that pod runs.
    /// Only lanes drawn for themselves name a pod: those with hits win,
    /// then peers of rules that saw something (never a group seen only
    /// by a rule that saw nothing, such as an upstream on the same pod).
    fn lane_of_pod(&self) -> HashMap<&str, u32> {
        let mut with_hits: std::collections::HashSet<u32> = std::collections::HashSet::new();
        for (l, _, _) in self.buckets.keys() {
            with_hits.insert(*l);
        }
        let mut lane_of_pod: HashMap<&str, u32> = HashMap::new();
        for (l, r, _) in self.seen.keys() {
            if self.rule_hits.contains_key(r) && !with_hits.contains(l) {
                if let Some(p) = self.pods.get(l) {
                    lane_of_pod.entry(p.as_str()).or_insert(*l);
                }
            }
        }
        for l in &with_hits {
            if let Some(p) = self.pods.get(l) {
                lane_of_pod.insert(p.as_str(), *l);
            }
        }
        lane_of_pod
    }

    /// The population's sightings per lane and drawn bucket, and the rules
    /// each lane was seen by (only rules that saw something).
    #[allow(clippy::type_complexity)]
    fn seen_series(
        &self,
        lane_of_pod: &HashMap<&str, u32>,
        bucket_of: impl Fn(i64) -> i64,
    ) -> (Vec<[i64; 3]>, Vec<Vec<u32>>) {
        let mut seen: BTreeMap<(u32, i64), u64> = BTreeMap::new();
        let mut seen_rules: Vec<Vec<u32>> = vec![Vec::new(); self.lanes.len()];
        for ((l, r, b), n) in &self.seen {
            if !self.rule_hits.contains_key(r) {
                continue;
            }
            let l = self
                .lanes
                .get(*l as usize)
                .and_then(|name| lane_of_pod.get(name.as_str()))
                .unwrap_or(l);
            *seen.entry((*l, bucket_of(*b))).or_default() += n;
            if let Some(v) = seen_rules.get_mut(*l as usize) {
                if !v.contains(r) {
                    v.push(*r);
                    v.sort_unstable();
                }
            }
        }
        let seen: Vec<[i64; 3]> = seen
            .into_iter()
            .map(|((l, b), n)| [i64::from(l), b, n as i64])
            .collect();
        (seen, seen_rules)
    }

    /// The incidents, each with the bars of its alerts.
    fn incidents_json(&self, incidents: &Incidents, t0: i64) -> Vec<serde_json::Value> {
        // An alert may fire, resolve and fire again: its bar is the one
        // that started when the member did.
        let bar = |m: &crate::incident::Member| -> Option<usize> {
            self.alerts
                .iter()
                .position(|a| a.fingerprint == m.fingerprint && a.start == m.starts_at)
                .or_else(|| {
                    self.alerts
                        .iter()
                        .position(|a| a.fingerprint == m.fingerprint)
                })
        };
        incidents
            .closed()
            .chain(incidents.open())
            .map(|i| {
                let alerts: Vec<usize> = i.members.iter().filter_map(bar).collect();
                serde_json::json!({
                    "id": i.id,
                    "title": i.title(),
                    "story": i.story(),
                    "severity": i.severity(),
                    "start": ms(i.start - t0),
                    "end": i.end.map(|e| ms(e - t0)),
                    "nodes": i.nodes(),
                    "affected": i.affected(),
                    "alerts": alerts,
                })
            })
            .collect()
    }
}

fn ms(ns: i64) -> i64 {
    ns / 1_000_000
}

/// A page with sigwatch's look around `body`.
fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head>\
         <body><header><h1>{}</h1></header><main>{body}</main></body></html>\n",
        escape(title),
        escape(title)
    )
}

/// The live status page of `run --listen` (`/`): it polls `/api/status`.
pub fn status_page() -> String {
    page(
        "sigwatch — live status",
        &format!(
            "<div id=\"status\" class=\"status\">Loading…</div>\
             <div id=\"incidents\"></div><div id=\"firing\"></div>\
             <script>{STATUS_JS}</script>"
        ),
    )
}

/// HTML-escapes text.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Firing alerts as the live loop last delivered them, for the status page
/// (bounded by the engine's own alert bounds, and at most `MAX_ALERTS`).
#[derive(Debug, Clone, Default)]
pub struct Board {
    firing: BTreeMap<String, Notification>,
    /// When each firing alert first fired here, by the wall clock (ns): the
    /// page's "firing for", never mixed with the lines' event time.
    fired: HashMap<String, i64>,
}

impl Board {
    /// The alerts firing now, by rule then group.
    pub fn firing(&self) -> Vec<&Notification> {
        let mut v: Vec<&Notification> = self.firing.values().collect();
        v.sort_by(|a, b| (&a.rule, &a.group).cmp(&(&b.rule, &b.group)));
        v
    }

    /// The firing alerts, for a checkpoint.
    pub fn save(&self) -> Vec<Notification> {
        self.firing.values().cloned().collect()
    }

    /// Restores [`Board::save`].
    pub fn restore(&mut self, firing: Vec<Notification>) {
        let now = crate::clock::wall_ns();
        for n in firing.into_iter().take(MAX_ALERTS) {
            // The wall time it fired is not saved: its first line's time
            // stands for it (live input is about now), never the future.
            let at = n.starts_at.ns().map_or(now, |t| t.min(now));
            self.fired.insert(n.fingerprint.clone(), at);
            self.firing.insert(n.fingerprint.clone(), n);
        }
    }

    /// Takes one alert notification.
    pub fn alert(&mut self, n: &Notification) {
        if n.incident.is_some() {
            return;
        }
        match n.state {
            AlertState::Firing => {
                if self.firing.len() < MAX_ALERTS || self.firing.contains_key(&n.fingerprint) {
                    self.fired
                        .entry(n.fingerprint.clone())
                        .or_insert_with(crate::clock::wall_ns);
                    self.firing.insert(n.fingerprint.clone(), n.clone());
                }
            }
            AlertState::Resolved => {
                self.firing.remove(&n.fingerprint);
                self.fired.remove(&n.fingerprint);
            }
        }
    }

    /// The JSON of `/api/status`.
    pub fn status(&self, incidents: &Incidents, source: &str) -> serde_json::Value {
        let incident_of = |fp: &str| incidents.incident_of(fp).map(str::to_string);
        let mut firing: Vec<&Notification> = self.firing.values().collect();
        firing.sort_by(|a, b| a.group.cmp(&b.group).then(a.starts_at.cmp(&b.starts_at)));
        let inc = |i: &crate::incident::Incident| {
            serde_json::json!({
                "id": i.id, "title": i.title(), "story": i.story(), "severity": i.severity(),
                "start": format_rfc3339(i.start), "end": i.end.map(format_rfc3339),
                "nodes": i.nodes(), "affected": i.affected(), "alerts": i.members.len(),
                "follows": i.follows, "resolving_since": i.resolving_since.map(format_rfc3339),
            })
        };
        let now = crate::clock::wall_ns();
        serde_json::json!({
            "generated": format_rfc3339(now),
            "source": source,
            "firing": firing.iter().map(|n| serde_json::json!({
                "rule": n.rule, "title": n.title, "severity": n.severity, "group": n.group,
                "starts_at": n.starts_at,
                "fired_at": format_rfc3339(self.fired.get(&n.fingerprint).copied().unwrap_or(now)),
                "last_line_at": n.last_seen,
                "summary": n.annotations.get("summary").cloned().unwrap_or_else(|| n.title.clone()),
                "nodes": n.top_groups.iter().map(|g| g.group.clone()).collect::<Vec<_>>(),
                "incident": incident_of(&n.fingerprint),
            })).collect::<Vec<_>>(),
            "incidents": incidents.open().into_iter().rev().map(inc).collect::<Vec<_>>(),
            "resolved_incidents": incidents.closed().rev().take(10).map(inc).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::TopGroup;
    use crate::incident::IncidentConfig;

    const S: i64 = 1_000_000_000;

    fn set() -> RuleSet {
        crate::rules::compile(&[(
            "t.yaml".into(),
            r#"
novelty: {enabled: false}
rules:
  - id: a
    title: A
    severity: critical
    match: {contains: ["boom"]}
    group_by: node
    detect: {count: {window: 1m}}
  - id: wide
    title: Wide
    severity: warning
    match: {contains: ["down"]}
    group_by: node
    detect: {spread: {window: 1m, groups: 2}}
"#
            .into(),
        )])
        .unwrap()
    }

    fn hit(rule: usize, group: &str, t: i64) -> HitRecord {
        HitRecord {
            rule,
            group: group.into(),
            pod: Some(format!("pod-{group}")),
            time: t,
            line: format!("line {t} </script><b>"),
        }
    }

    fn note(
        rule: &str,
        group: &str,
        state: AlertState,
        start: i64,
        end: Option<i64>,
    ) -> Notification {
        Notification {
            state,
            rule: rule.into(),
            title: rule.into(),
            severity: "critical".into(),
            group: group.into(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            starts_at: crate::clock::Stamp::at(start),
            ends_at: end.map(crate::clock::Stamp::at),
            count: 1,
            first_seen: None,
            last_seen: None,
            top_groups: vec![TopGroup {
                group: "n1".into(),
                count: 1,
            }],
            share: None,
            samples: vec!["<sample>".into()],
            template: None,
            fingerprint: crate::alert::fingerprint(rule, group),
            repeat: false,
            incident: None,
            links: None,
            origins: Vec::new(),
            at: 0,
        }
    }

    #[test]
    fn lanes_buckets_alerts_and_escaping() {
        let set = set();
        let mut r = Recorder::new(&set);
        r.hits(
            (0..100)
                .map(|i| hit(0, if i % 2 == 0 { "n1" } else { "n2" }, i * S))
                .collect(),
        );
        r.alert(&note("a", "n1", AlertState::Firing, 10 * S, None));
        r.alert(&note("wide", "cluster", AlertState::Firing, 20 * S, None));
        r.alert(&note(
            "wide",
            "cluster",
            AlertState::Resolved,
            20 * S,
            Some(50 * S),
        ));
        let inc = Incidents::new(&set, IncidentConfig::default());
        let d = r.data(&inc, "t");
        assert_eq!(d["lanes"], serde_json::json!(["cluster", "n1", "n2"]));
        let alerts = d["alerts"].as_array().unwrap();
        assert_eq!(alerts.len(), 2);
        assert_eq!(alerts[0]["lane"], 1);
        assert_eq!(
            alerts[1]["lane"], 0,
            "cluster-wide alerts go to the cluster lane"
        );
        assert_eq!(alerts[1]["end"], 50_000);
        assert!(alerts[0]["end"].is_null());
        let total: i64 = d["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h[3].as_i64().unwrap())
            .sum();
        assert_eq!(total, 100);
        let html = r.render(&inc, "t");
        assert!(
            !html.contains("</script><b>"),
            "a line cannot close the script"
        );
        assert!(html.contains("<\\/script><b>"));
    }

    #[test]
    fn peers_of_rules_that_saw_something_are_drawn_with_their_pods() {
        let set = set();
        let mut r = Recorder::new(&set);
        r.record(Recording {
            hits: vec![hit(1, "n1", 5 * S)],
            // n2 is alive in the population of `wide`, which has a hit; n3
            // only in that of `a`, which saw nothing: not drawn.
            sightings: vec![
                (1, "n2".into(), Some("pod-n2".into()), 6 * S),
                (0, "n3".into(), Some("pod-n3".into()), 7 * S),
                // n1's pod seen before its node ID: drawn on n1's lane.
                (1, "pod-n1".into(), None, S),
            ],
            volume: vec![(0, 10, 2), (9, 5, 0)],
            levels: true,
        });
        let inc = Incidents::new(&set, IncidentConfig::default());
        let d = r.data(&inc, "t");
        let lanes: Vec<&str> = d["lanes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let at = |name: &str| lanes.iter().position(|l| *l == name).unwrap() as i64;
        let seen: Vec<(i64, i64)> = d["seen"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s[0].as_i64().unwrap(), s[2].as_i64().unwrap()))
            .collect();
        assert!(seen.contains(&(at("n2"), 1)), "{seen:?}");
        assert!(seen.contains(&(at("n1"), 1)), "{seen:?}");
        assert!(!seen.iter().any(|s| s.0 == at("n3")), "{seen:?}");
        assert_eq!(d["pods"][at("n1") as usize], "pod-n1");
        assert_eq!(d["pods"][at("n2") as usize], "pod-n2");
        // The volume spans the input: 0 s to 9 s, before the first hit.
        let lines: i64 = d["volume"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v[1].as_i64().unwrap())
            .sum();
        assert_eq!(lines, 15);
        assert_eq!(d["levels"], true);
        assert_eq!(d["duration"], 9_000);
    }

    #[test]
    fn buckets_coarsen_and_samples_stay_spread_and_bounded() {
        let set = set();
        let mut r = Recorder::new(&set);
        // 300 000 hits one second apart on 2 lanes outgrow the bucket bound.
        for chunk in 0..30 {
            r.hits(
                (0..10_000)
                    .map(|i| {
                        let t = (chunk * 10_000 + i) * S;
                        hit(0, if i % 2 == 0 { "n1" } else { "n2" }, t)
                    })
                    .collect(),
            );
        }
        assert!(r.buckets.len() <= MAX_BUCKETS);
        assert!(r.width > S);
        let inc = Incidents::new(&set, IncidentConfig::default());
        let d = r.data(&inc, "t");
        let hits = d["hits"].as_array().unwrap();
        let total: i64 = hits.iter().map(|h| h[3].as_i64().unwrap()).sum();
        assert_eq!(total, 300_000, "coarsening loses no hit");
        assert!(
            hits.len() as i64 <= 2 * (DRAWN_BUCKETS + 1),
            "{}",
            hits.len()
        );
        for s in d["samples"].as_array().unwrap() {
            let lines = s["lines"].as_array().unwrap();
            assert!(lines.len() <= SAMPLES_PER_SERIES);
            // Spread over the whole replay, not the first seconds only.
            let last = lines.last().unwrap()[0].as_i64().unwrap();
            assert!(last > 150_000_000, "{last}");
        }
    }
}
