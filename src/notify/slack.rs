//! Slack incoming webhook (research/apis.md §4): Block Kit message with the
//! title, the node, count, share and samples; at most one message per second
//! per webhook (Slack's limit; past it Slack answers 429 with `Retry-After`,
//! which is honoured, and may disable an app that keeps going). 403/404/410
//! (revoked or archived) are final. The URL is a secret: it is never logged.

use super::http::{self, RetryPolicy};
use super::{BoxFuture, NotifyError, Receiver};
use crate::alert::{AlertState, Notification};
use std::time::Duration;

/// Longest section text Slack accepts.
pub const SECTION_MAX: usize = 3000;

/// The Slack receiver.
pub struct Slack {
    url: String,
    name: String,
    client: reqwest::Client,
    policy: RetryPolicy,
}

fn cut(s: &str, max: usize) -> String {
    crate::text::truncate(s, max.saturating_sub(3))
}

/// The Block Kit message for a notification.
pub fn message(n: &Notification) -> serde_json::Value {
    let (icon, state) = match n.state {
        AlertState::Firing => (":rotating_light:", "FIRING"),
        AlertState::Resolved => (":white_check_mark:", "RESOLVED"),
    };
    let summary = n
        .annotations
        .get("summary")
        .cloned()
        .unwrap_or_else(|| n.title.clone());
    let mut facts = format!(
        "*{state}* · *{}* · node/group `{}` · count {}",
        n.severity, n.group, n.count
    );
    if let Some(s) = n.share {
        facts.push_str(&format!(" · share {:.0}%", s * 100.0));
    }
    let mut blocks = vec![
        serde_json::json!({"type": "header", "text": {"type": "plain_text", "text": cut(&format!("{} {}", n.title, n.group), 150)}}),
        serde_json::json!({"type": "section", "text": {"type": "mrkdwn", "text": cut(&format!("{summary}\n{facts}"), SECTION_MAX)}}),
    ];
    if let Some(i) = &n.incident {
        // An incident: its chain, in the order the alerts started.
        let chain: Vec<String> = i
            .chain
            .iter()
            .map(|c| {
                let mark = match c.state {
                    AlertState::Firing => ":red_circle:",
                    AlertState::Resolved => ":white_circle:",
                };
                format!("{mark} `{}` {} — {}", c.group, c.starts_at, c.summary)
            })
            .collect();
        let event = match i.event {
            crate::alert::IncidentEvent::Opened => "opened",
            crate::alert::IncidentEvent::Updated => "updated",
            crate::alert::IncidentEvent::Resolved => "resolved",
        };
        let text = format!(
            "*Incident {} {event}* · still affected: {}\n{}",
            i.id,
            if i.affected.is_empty() {
                "none".to_string()
            } else {
                i.affected.join(", ")
            },
            chain.join("\n")
        );
        blocks.push(serde_json::json!({"type": "section", "text": {"type": "mrkdwn", "text": cut(&text, SECTION_MAX)}}));
    }
    if !n.top_groups.is_empty() {
        let top: Vec<String> = n
            .top_groups
            .iter()
            .take(5)
            .map(|g| format!("`{}` {}", g.group, g.count))
            .collect();
        blocks.push(serde_json::json!({"type": "section", "text": {"type": "mrkdwn", "text": cut(&format!("*Top groups:* {}", top.join(", ")), SECTION_MAX)}}));
    }
    if !n.samples.is_empty() {
        let s = n
            .samples
            .iter()
            .map(|l| l.replace("```", "'''"))
            .collect::<Vec<_>>()
            .join("\n");
        blocks.push(serde_json::json!({"type": "section", "text": {"type": "mrkdwn", "text": cut(&format!("*Samples:*\n```{s}```"), SECTION_MAX)}}));
    }
    if let Some(l) = &n.links {
        let mut parts = Vec::new();
        if let Some(u) = &l.grafana {
            parts.push(format!("<{u}|:mag: The lines in Grafana>"));
        }
        if let Some(u) = &l.loki {
            parts.push(format!("<{u}|The lines in Loki>"));
        }
        if !l.lines.is_empty() {
            let at: Vec<String> = l.lines.iter().map(|x| format!("`{x}`")).collect();
            parts.push(format!("Samples at {}", at.join(", ")));
        }
        if !parts.is_empty() {
            blocks.push(serde_json::json!({"type": "section", "text": {"type": "mrkdwn", "text": cut(&parts.join(" · "), SECTION_MAX)}}));
        }
    }
    let mut ctx = format!(
        "rule `{}` · since {} · fingerprint {}",
        n.rule, n.starts_at, n.fingerprint
    );
    if let Some(e) = &n.ends_at {
        ctx.push_str(&format!(" · resolved {e}"));
    }
    blocks.push(serde_json::json!({"type": "context", "elements": [{"type": "mrkdwn", "text": cut(&ctx, SECTION_MAX)}]}));
    serde_json::json!({"text": cut(&format!("{icon} {state}: {} ({})", n.title, n.group), 3000), "blocks": blocks})
}

impl Slack {
    /// Builds the receiver for an incoming-webhook URL.
    pub fn new(url: &str, timeout: Duration) -> Result<Slack, NotifyError> {
        Ok(Slack {
            url: url.to_string(),
            name: http::safe_name("slack", url)?,
            client: http::client(timeout)?,
            policy: RetryPolicy::default(),
        })
    }
}

impl Receiver for Slack {
    fn identity(&self) -> String {
        self.url.clone()
    }
    fn name(&self) -> &str {
        &self.name
    }

    fn lane(&self) -> super::LaneConfig {
        super::LaneConfig {
            rate: Some((1.0, 1)),
            ..super::LaneConfig::default()
        }
    }

    fn send<'a>(&'a self, n: &'a Notification) -> BoxFuture<'a, Result<(), NotifyError>> {
        Box::pin(async move {
            let body =
                serde_json::to_vec(&message(n)).map_err(|e| NotifyError::Config(e.to_string()))?;
            http::post(&self.client, &self.name, &self.url, body, &[], &self.policy).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::{ChainLink, IncidentEvent, IncidentInfo};

    #[test]
    fn an_incident_message_shows_its_chain_and_the_nodes_still_affected() {
        let link = |rule: &str, group: &str, state| ChainLink {
            rule: rule.into(),
            title: rule.into(),
            severity: "critical".into(),
            group: group.into(),
            state,
            starts_at: "2025-07-01T12:10:03.520Z".into(),
            ends_at: None,
            summary: format!("{rule} on {group}"),
            fingerprint: "f".into(),
        };
        let n = Notification {
            state: AlertState::Firing,
            rule: "incident".into(),
            title: "Redis unreachable".into(),
            severity: "critical".into(),
            group: "inc-0001".into(),
            labels: Default::default(),
            annotations: [("summary".to_string(), "Redis → drain".to_string())].into(),
            starts_at: "2025-07-01T12:10:03.520Z".into(),
            ends_at: None,
            count: 2,
            first_seen: None,
            last_seen: None,
            top_groups: vec![],
            share: None,
            samples: vec![],
            template: None,
            fingerprint: "fp".into(),
            repeat: false,
            incident: Some(IncidentInfo {
                id: "inc-0001".into(),
                event: IncidentEvent::Updated,
                root: "redis".into(),
                chain: vec![
                    link("redis", "cluster", AlertState::Resolved),
                    link("drain_failed", "ND_a", AlertState::Firing),
                ],
                nodes: vec!["ND_a".into()],
                affected: vec!["ND_a".into()],
                omitted: 0,
            }),
            links: None,
            origins: Vec::new(),
            at: 0,
        };
        let text = message(&n).to_string();
        assert!(text.contains("Incident inc-0001 updated"), "{text}");
        assert!(text.contains("still affected: ND_a"), "{text}");
        assert!(text.contains(":white_circle: `cluster`"), "{text}");
        assert!(text.contains(":red_circle: `ND_a`"), "{text}");
    }
}
