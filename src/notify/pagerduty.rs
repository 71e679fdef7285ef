//! PagerDuty Events API v2 (research/apis.md §3): `dedup_key` is the alert's
//! fingerprint, so a firing alert triggers one incident and its resolve
//! closes that incident; severities map to PagerDuty's; `summary` is cut to
//! 1024 characters and custom details are bounded. About 120 events a
//! minute per integration key are allowed, so the lane sends at most 2/s.
//! The routing key is a secret: it is never logged.

use super::http::{self, RetryPolicy};
use super::{BoxFuture, NotifyError, Receiver};
use crate::alert::{AlertState, Notification};
use std::time::Duration;

/// PagerDuty's Events v2 endpoint.
pub const EVENTS_URL: &str = "https://events.pagerduty.com/v2/enqueue";
/// Longest `summary`.
pub const SUMMARY_MAX: usize = 1024;

/// The PagerDuty receiver.
pub struct PagerDuty {
    routing_key: String,
    url: String,
    name: String,
    client: reqwest::Client,
    policy: RetryPolicy,
}

/// PagerDuty severity of ours.
pub fn severity(s: &str) -> &'static str {
    match s {
        "critical" => "critical",
        "warning" => "warning",
        _ => "info",
    }
}

/// The event for a notification.
pub fn event(routing_key: &str, n: &Notification) -> serde_json::Value {
    let dedup_key: String = n.fingerprint.chars().take(255).collect();
    if n.state == AlertState::Resolved {
        return serde_json::json!({"routing_key": routing_key, "event_action": "resolve", "dedup_key": dedup_key});
    }
    let summary = n
        .annotations
        .get("summary")
        .cloned()
        .unwrap_or_else(|| format!("{}: {}", n.title, n.group));
    let summary: String = summary.chars().take(SUMMARY_MAX).collect();
    let samples: Vec<String> = n
        .samples
        .iter()
        .map(|s| crate::text::truncate(s, 1024))
        .collect();
    let links: Vec<serde_json::Value> = n
        .links
        .iter()
        .flat_map(|l| {
            let grafana = l.grafana.as_ref().map(|u| (u, "The lines in Grafana"));
            let loki = l.loki.as_ref().map(|u| (u, "The lines (Loki query_range)"));
            grafana.into_iter().chain(loki)
        })
        .map(|(href, text)| serde_json::json!({"href": href, "text": text}))
        .collect();
    let lines: Vec<&String> = n.links.iter().flat_map(|l| l.lines.iter()).collect();
    let query = n.links.as_ref().and_then(|l| l.query.as_ref());
    serde_json::json!({
        "routing_key": routing_key,
        "event_action": "trigger",
        "links": links,
        "dedup_key": dedup_key,
        "payload": {
            "summary": summary,
            "source": n.group,
            "severity": severity(&n.severity),
            "timestamp": n.starts_at,
            "component": n.rule,
            "class": "log-signature",
            "custom_details": {
                "title": n.title,
                "count": n.count,
                "share": n.share,
                "top_groups": n.top_groups,
                "first_seen": n.first_seen,
                "last_seen": n.last_seen,
                "samples": samples,
                "sample_lines": lines,
                "logs_query": query,
                "annotations": n.annotations,
            }
        },
        "client": "sigwatch",
    })
}

impl PagerDuty {
    /// Builds the receiver; `url` overrides [`EVENTS_URL`] (tests, proxies).
    pub fn new(
        routing_key: &str,
        url: Option<&str>,
        timeout: Duration,
    ) -> Result<PagerDuty, NotifyError> {
        if routing_key.trim().is_empty() {
            return Err(NotifyError::Config(
                "PagerDuty needs a routing (integration) key".into(),
            ));
        }
        let url = url.unwrap_or(EVENTS_URL).to_string();
        Ok(PagerDuty {
            routing_key: routing_key.trim().to_string(),
            name: http::safe_name("pagerduty", &url)?,
            url,
            client: http::client(timeout)?,
            policy: RetryPolicy::default(),
        })
    }
}

impl Receiver for PagerDuty {
    fn identity(&self) -> String {
        format!("{}\n{}", self.url, self.routing_key)
    }
    fn name(&self) -> &str {
        &self.name
    }

    fn lane(&self) -> super::LaneConfig {
        super::LaneConfig {
            rate: Some((2.0, 10)),
            ..super::LaneConfig::default()
        }
    }

    fn send<'a>(&'a self, n: &'a Notification) -> BoxFuture<'a, Result<(), NotifyError>> {
        Box::pin(async move {
            let body = serde_json::to_vec(&event(&self.routing_key, n))
                .map_err(|e| NotifyError::Config(e.to_string()))?;
            http::post(&self.client, &self.name, &self.url, body, &[], &self.policy).await
        })
    }
}
