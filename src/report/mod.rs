//! The picture of an incident: `sigwatch replay --report incident.html`
//! writes one self-contained HTML file (inline CSS, JavaScript and SVG, no
//! network) with one lane per node plus a cluster lane, signature hits as
//! marks whose density shows where they pile up, alert intervals as bars
//! coloured by severity, incidents outlined, and the sample lines behind a
//! click. The live status page of `run --listen` (`/`) shares its look.
//!
//! Hits are aggregated into time buckets as they arrive (the bucket width
//! doubles when the buckets outgrow their bound) and sample lines are kept
//! evenly spread in time per lane and rule, so a 2 M-line replay gives a
//! file of a few hundred kilobytes that opens at once.

use crate::alert::{AlertState, Notification};
use crate::decode::time::{format_rfc3339, parse_rfc3339};
use crate::engine::HitRecord;
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

#[derive(Debug, Clone)]
struct RuleMeta {
    id: String,
    title: String,
    severity: String,
    cluster: bool,
}

/// Sample lines spread over time: when full, every other one goes and the
/// least gap between kept samples doubles.
#[derive(Debug, Clone, Default)]
struct Spread {
    kept: Vec<(i64, String)>,
    gap: i64,
}

impl Spread {
    fn offer(&mut self, t: i64, line: &str) {
        if let Some((last, _)) = self.kept.last() {
            if t < last.saturating_add(self.gap) {
                return;
            }
        }
        self.kept.push((t, line.to_string()));
        if self.kept.len() > SAMPLES_PER_SERIES {
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
        };
        r.lane(CLUSTER_LANE);
        r
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

    /// Takes the hits of one block ([`crate::engine::Engine::take_hits`]).
    pub fn hits(&mut self, hits: Vec<HitRecord>) {
        for h in hits {
            let lane = self.lane(&h.group) as u32;
            let rule = h.rule as u32;
            self.hits += 1;
            self.widen(h.time);
            *self
                .buckets
                .entry((lane, rule, h.time.div_euclid(self.width)))
                .or_default() += 1;
            self.samples
                .entry((lane, rule))
                .or_default()
                .offer(h.time, &h.line);
            if self.buckets.len() > MAX_BUCKETS {
                self.width = self.width.saturating_mul(2);
                let old = std::mem::take(&mut self.buckets);
                for ((l, r, b), n) in old {
                    *self.buckets.entry((l, r, b.div_euclid(2))).or_default() += n;
                }
            }
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
                let start = parse_rfc3339(&n.starts_at).unwrap_or(0);
                self.widen(start);
                let lane_name = if self.rules[rule].cluster {
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
                    let end = n.ends_at.as_deref().and_then(parse_rfc3339);
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
        let incs: Vec<serde_json::Value> = incidents
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
            .collect();
        serde_json::json!({
            "title": title,
            "start": format_rfc3339(t0),
            "end": format_rfc3339(t1),
            "t0": t0 / 1_000_000,
            "duration": ms(t1 - t0),
            "bucket": ms(drawn),
            "lanes": self.lanes,
            "rules": self.rules.iter().map(|r| serde_json::json!({
                "id": r.id, "title": r.title, "severity": r.severity, "cluster": r.cluster,
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
        for n in firing.into_iter().take(MAX_ALERTS) {
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
                    self.firing.insert(n.fingerprint.clone(), n.clone());
                }
            }
            AlertState::Resolved => {
                self.firing.remove(&n.fingerprint);
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
            })
        };
        serde_json::json!({
            "generated": format_rfc3339(crate::clock::wall_ns()),
            "source": source,
            "firing": firing.iter().map(|n| serde_json::json!({
                "rule": n.rule, "title": n.title, "severity": n.severity, "group": n.group,
                "starts_at": n.starts_at,
                "summary": n.annotations.get("summary").cloned().unwrap_or_else(|| n.title.clone()),
                "nodes": n.top_groups.iter().map(|g| g.group.clone()).collect::<Vec<_>>(),
                "incident": incident_of(&n.fingerprint),
            })).collect::<Vec<_>>(),
            "incidents": incidents.open().iter().rev().map(inc).collect::<Vec<_>>(),
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
            starts_at: format_rfc3339(start),
            ends_at: end.map(format_rfc3339),
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
