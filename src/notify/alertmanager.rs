//! Prometheus Alertmanager v2 receiver (research/apis.md §2).
//!
//! Alertmanager keeps alerts in memory and resolves a firing alert once its
//! `endsAt` passes, so a client must keep re-sending: firing alerts every
//! `resend_interval` with `endsAt` four intervals ahead (as Prometheus does,
//! surviving a few failed sends), resolved alerts with `endsAt` at the
//! resolve time for `resolved_retention` afterwards. Every alert goes to
//! **every** configured instance, never load-balanced: that is how an
//! Alertmanager cluster dedups, and how two sigwatch replicas sending
//! identical labels produce one alert. Labels are stable identity only and
//! sanitised to Alertmanager's label-name rules.

use super::{BoxFuture, NotifyError, Receiver};
use crate::alert::{AlertState, Notification};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Alertmanager settings.
#[derive(Debug, Clone)]
pub struct AlertmanagerConfig {
    /// Base URLs of every instance (`http://am-0:9093`, `http://am-1:9093`).
    pub urls: Vec<String>,
    /// Per-request timeout (default 5 s).
    pub timeout: Duration,
    /// Re-send cadence of active alerts (default 1 min).
    pub resend_interval: Duration,
    /// How long a resolved alert keeps being re-sent (default 15 min).
    pub resolved_retention: Duration,
    /// Base of `generatorURL` (`http://sigwatch:8080`); omitted when unset.
    pub generator_url: Option<String>,
    /// Retries per send after the first attempt (default 3).
    pub retries: u32,
}

impl AlertmanagerConfig {
    /// Defaults for these instances.
    pub fn new(urls: &[String]) -> AlertmanagerConfig {
        AlertmanagerConfig {
            urls: urls
                .iter()
                .map(|u| u.trim_end_matches('/').to_string())
                .collect(),
            timeout: Duration::from_secs(5),
            resend_interval: Duration::from_secs(60),
            resolved_retention: Duration::from_secs(900),
            generator_url: None,
            retries: 3,
        }
    }
}

/// A label name Alertmanager 0.25 accepts: `[a-zA-Z_][a-zA-Z0-9_]*`.
pub fn sanitize_label_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Tracked {
    body: serde_json::Value,
    firing: bool,
    /// Wall time of the resolve (for retention), ns.
    resolved_at: Option<i64>,
}

/// The alerts an Alertmanager receiver keeps re-sending, as a checkpoint
/// keeps them: after a restart it goes on re-sending them, so Alertmanager
/// does not let a firing alert expire (it would resolve it by itself four
/// minutes later) just because nothing had to be sent again.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ActiveState(Vec<(String, Tracked)>);

/// The receiver.
pub struct Alertmanager {
    cfg: AlertmanagerConfig,
    client: reqwest::Client,
    name: String,
    active: Arc<Mutex<HashMap<String, Tracked>>>,
}

fn rfc3339(ns: i64) -> String {
    crate::clock::format_rfc3339(ns)
}

impl Alertmanager {
    /// Builds the receiver; URLs must be http(s).
    pub fn new(cfg: AlertmanagerConfig) -> Result<Alertmanager, NotifyError> {
        if cfg.urls.is_empty() {
            return Err(NotifyError::Config(
                "Alertmanager needs at least one URL".into(),
            ));
        }
        let mut hosts = Vec::new();
        for u in &cfg.urls {
            let url = reqwest::Url::parse(u)
                .map_err(|e| NotifyError::Config(format!("invalid Alertmanager URL: {e}")))?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(NotifyError::Config(
                    "Alertmanager URL must be http or https".into(),
                ));
            }
            hosts.push(url.host_str().unwrap_or("?").to_string());
        }
        let client = super::http::client(cfg.timeout)?;
        let name = format!("alertmanager {}", hosts.join(","));
        Ok(Alertmanager {
            cfg,
            client,
            name,
            active: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    /// The v2 alert body for a notification at wall time `now` (ns).
    pub fn alert_body(&self, n: &Notification, now: i64) -> serde_json::Value {
        let labels: BTreeMap<String, String> = n
            .labels
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (sanitize_label_name(k), v.clone()))
            .collect();
        let mut annotations = n.annotations.clone();
        annotations
            .entry("title".into())
            .or_insert_with(|| n.title.clone());
        annotations.insert("count".into(), n.count.to_string());
        if let Some(s) = n.samples.first() {
            annotations.insert("sample".into(), s.clone());
        }
        if !n.top_groups.is_empty() {
            let top: Vec<String> = n
                .top_groups
                .iter()
                .take(5)
                .map(|g| format!("{} ({})", g.group, g.count))
                .collect();
            annotations.insert("top_groups".into(), top.join(", "));
        }
        if let Some(l) = &n.links {
            if let Some(u) = l.url() {
                annotations.insert("logs_url".into(), u.to_string());
            }
            if let Some(q) = &l.query {
                annotations.insert("logs_query".into(), q.clone());
            }
            if !l.lines.is_empty() {
                annotations.insert("log_lines".into(), l.lines.join(" "));
            }
        }
        let ends = match n.state {
            // Ahead by four resend intervals: a few failed sends do not
            // resolve the alert behind our back.
            AlertState::Firing => rfc3339(
                now + 4 * i64::try_from(self.cfg.resend_interval.as_nanos())
                    .unwrap_or(i64::MAX / 8),
            ),
            AlertState::Resolved => n
                .ends_at
                .as_ref()
                .map_or_else(|| rfc3339(now), |e| e.to_string()),
        };
        let mut body = serde_json::json!({
            "labels": labels,
            "annotations": annotations,
            "startsAt": n.starts_at,
            "endsAt": ends,
        });
        // The lines behind the alert are where it came from; without them,
        // sigwatch's own page.
        if let Some(u) = n.links.as_ref().and_then(|l| l.url()) {
            body["generatorURL"] = serde_json::Value::String(u.to_string());
        } else if let Some(base) = &self.cfg.generator_url {
            body["generatorURL"] = serde_json::Value::String(format!(
                "{}/?rule={}&group={}",
                base.trim_end_matches('/'),
                n.rule,
                n.group
            ));
        }
        body
    }

    async fn post_all(&self, alerts: &[serde_json::Value]) -> Result<(), NotifyError> {
        let mut first_err = None;
        let mut delivered = 0;
        for url in &self.cfg.urls {
            match self.post_one(url, alerts).await {
                Ok(()) => delivered += 1,
                Err(e) => {
                    tracing::warn!(receiver = %self.name, error = %e, "Alertmanager instance did not take the alerts.");
                    first_err.get_or_insert(e);
                }
            }
        }
        match (delivered, first_err) {
            (0, Some(e)) => Err(e),
            _ => Ok(()),
        }
    }

    async fn post_one(&self, base: &str, alerts: &[serde_json::Value]) -> Result<(), NotifyError> {
        // A 400 is final: Alertmanager stores the valid alerts of a batch
        // even then, and the invalid ones will not become valid by retrying.
        let body = serde_json::to_vec(alerts).map_err(|e| NotifyError::Config(e.to_string()))?;
        let policy = super::http::RetryPolicy {
            retries: self.cfg.retries,
            backoff: Duration::from_millis(250),
            ..Default::default()
        };
        super::http::post(
            &self.client,
            &self.name,
            &format!("{base}/api/v2/alerts"),
            body,
            &[],
            &policy,
        )
        .await
    }

    /// What it keeps re-sending, for a checkpoint.
    pub fn active_state(&self) -> ActiveState {
        let mut v: Vec<(String, Tracked)> = self
            .active
            .lock()
            .map(|m| m.iter().map(|(k, t)| (k.clone(), t.clone())).collect())
            .unwrap_or_default();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        ActiveState(v)
    }

    /// Takes over what a previous run kept re-sending (what this run sent
    /// already stays).
    pub fn restore_active(&self, state: ActiveState) {
        if let Ok(mut m) = self.active.lock() {
            for (k, t) in state.0 {
                m.entry(k).or_insert(t);
            }
        }
    }

    /// Re-sends what Alertmanager must keep hearing about: firing alerts
    /// (with a fresh `endsAt`) and recently resolved ones. Call every
    /// `resend_interval`; [`Alertmanager::spawn_resender`] does.
    pub async fn resend(&self, now: i64) -> Result<usize, NotifyError> {
        let retention = i64::try_from(self.cfg.resolved_retention.as_nanos()).unwrap_or(i64::MAX);
        let ahead = 4 * i64::try_from(self.cfg.resend_interval.as_nanos()).unwrap_or(i64::MAX / 8);
        let bodies: Vec<serde_json::Value> = {
            let Ok(mut m) = self.active.lock() else {
                return Ok(0);
            };
            m.retain(|_, t| t.resolved_at.is_none_or(|r| now - r < retention));
            m.values_mut()
                .map(|t| {
                    if t.firing {
                        t.body["endsAt"] = serde_json::Value::String(rfc3339(now + ahead));
                    }
                    t.body.clone()
                })
                .collect()
        };
        if bodies.is_empty() {
            return Ok(0);
        }
        self.post_all(&bodies).await.map(|()| bodies.len())
    }

    /// Starts the periodic re-send task (needs a Tokio runtime).
    pub fn spawn_resender(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let me = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(me.cfg.resend_interval);
            tick.tick().await;
            loop {
                tick.tick().await;
                if let Err(e) = me.resend(crate::clock::wall_ns()).await {
                    tracing::warn!(receiver = %me.name, error = %e, "Alertmanager re-send failed; will retry next interval.");
                }
            }
        })
    }
}

impl Receiver for Alertmanager {
    fn identity(&self) -> String {
        self.cfg.urls.join("\n")
    }
    fn name(&self) -> &str {
        &self.name
    }

    fn lane(&self) -> super::LaneConfig {
        super::LaneConfig {
            rate: Some((50.0, 100)),
            ..super::LaneConfig::default()
        }
    }

    /// Alertmanager groups alerts itself (`group_by: [incident]`): it gets
    /// the alerts, each labelled with its incident.
    fn takes_incidents(&self) -> bool {
        false
    }

    fn send<'a>(&'a self, n: &'a Notification) -> BoxFuture<'a, Result<(), NotifyError>> {
        Box::pin(async move {
            let now = crate::clock::wall_ns();
            let body = self.alert_body(n, now);
            if let Ok(mut m) = self.active.lock() {
                let firing = n.state == AlertState::Firing;
                let resolved_at = (!firing).then_some(now);
                m.insert(
                    n.fingerprint.clone(),
                    Tracked {
                        body: body.clone(),
                        firing,
                        resolved_at,
                    },
                );
            }
            self.post_all(std::slice::from_ref(&body)).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_names_follow_alertmanager_rules() {
        assert_eq!(sanitize_label_name("k8s.ns"), "k8s_ns");
        assert_eq!(sanitize_label_name("9lives"), "_9lives");
        assert_eq!(sanitize_label_name("app-name"), "app_name");
        assert_eq!(sanitize_label_name("severity"), "severity");
        assert_eq!(sanitize_label_name(""), "_");
    }
}
