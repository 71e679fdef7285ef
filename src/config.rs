//! The `sigwatch.yaml` configuration file: settings that are awkward on a
//! command line (several Loki queries, file globs, state directory), in one
//! reviewed file. Command-line flags override it. Unknown keys are errors
//! with their line and column, like rule files.

use crate::duration::Dur;
use crate::notify::route::{RouteSpec, Router};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A configuration error, located in the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("{path}: {message}")]
    Io {
        /// File.
        path: String,
        /// OS error.
        message: String,
    },
    /// The file does not parse or has unknown keys.
    #[error("{path}:{line}:{column}: {message}")]
    At {
        /// File.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
}

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Consume Grafana Loki.
    #[serde(default)]
    pub loki: Option<LokiSection>,
    /// Follow log files matching these globs.
    #[serde(default)]
    pub files: Vec<String>,
    /// Directory for checkpoints.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// Named receivers.
    #[serde(default)]
    pub receivers: Vec<ReceiverSpec>,
    /// Routes, tried in order: the first that matches picks its receivers
    /// (unless it says `continue: true`).
    #[serde(default)]
    pub routes: Vec<RouteSpec>,
    /// Receivers for notifications no route matched.
    #[serde(default)]
    pub default: Vec<String>,
    /// Incident grouping.
    #[serde(default)]
    pub incidents: Option<IncidentsSection>,
    /// Rule files of one's own, and whether the built-in pack stays.
    #[serde(default)]
    pub rules: Option<RulesSection>,
    /// Who may see the status page, its data and the report.
    #[serde(default)]
    pub web: Option<WebSection>,
    /// The push listener (`--ingest`).
    #[serde(default)]
    pub ingest: Option<IngestSection>,
}

/// `ingest:` — the push listener: its address, the credentials a push
/// must carry (bearer tokens from files, users with bcrypt hashes), and
/// the largest body.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestSection {
    /// The address (`--ingest`).
    #[serde(default)]
    pub listen: Option<String>,
    /// The syslog address, UDP and TCP (`--syslog`).
    #[serde(default)]
    pub syslog: Option<String>,
    /// Files of bearer tokens, one per line.
    #[serde(default)]
    pub token_files: Vec<PathBuf>,
    /// User name → bcrypt hash.
    #[serde(default)]
    pub basic_auth_users: std::collections::BTreeMap<String, String>,
    /// The largest body as sent, in bytes.
    #[serde(default)]
    pub max_body_bytes: Option<usize>,
    /// Pushed bytes waiting for the detection loop at most
    /// (`--ingest-queue`).
    #[serde(default)]
    pub queue_bytes: Option<u32>,
    /// How long a push waits for room before "retry" (`--ingest-queue-wait`).
    #[serde(default)]
    pub queue_wait: Option<Dur>,
    /// Pushes over TLS: the PEM certificate (chain)…
    #[serde(default)]
    pub tls_cert_file: Option<PathBuf>,
    /// …and its PEM key.
    #[serde(default)]
    pub tls_key_file: Option<PathBuf>,
}

/// `web:` — the credentials of the guarded endpoints (the status page,
/// `/api/…`, `/report`): bearer tokens from files, and users with bcrypt
/// password hashes (`htpasswd -nbBC 10 USER PASSWORD`), as Prometheus' web
/// configuration takes them. Relative paths are relative to the
/// configuration file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSection {
    /// Files of bearer tokens, one per line (several: rotation).
    #[serde(default)]
    pub token_files: Vec<PathBuf>,
    /// User name → bcrypt hash.
    #[serde(default)]
    pub basic_auth_users: std::collections::BTreeMap<String, String>,
    /// The status page's listener over TLS: the PEM certificate (chain)…
    #[serde(default)]
    pub tls_cert_file: Option<PathBuf>,
    /// …and its PEM key.
    #[serde(default)]
    pub tls_key_file: Option<PathBuf>,
    /// `/metrics` behind the credentials too.
    #[serde(default)]
    pub guard_metrics: bool,
}

/// `rules:` — rule files of one's own (added to the built-in pack; a rule
/// with a pack rule's id replaces it), and `builtin: false` to leave the
/// pack out. Relative paths are relative to the configuration file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RulesSection {
    /// Rule files or directories.
    #[serde(default)]
    pub files: Vec<PathBuf>,
    /// Keep the built-in pack (default true).
    #[serde(default)]
    pub builtin: Option<bool>,
}

/// `incidents:` — how related alerts join one incident.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncidentsSection {
    /// Send incident-level notifications instead of per-alert ones
    /// (Alertmanager still gets the alerts, labelled `incident`).
    #[serde(default)]
    pub group: bool,
    /// How long a resolved alert (or a quiet incident, for the same rule
    /// elsewhere) still draws new alerts in (default 15m).
    #[serde(default)]
    pub window: Option<Dur>,
    /// Least time between two updates of one incident (default 1m).
    #[serde(default)]
    pub update_interval: Option<Dur>,
    /// Related alerts an incident needs before it opens and pages
    /// (default 1).
    #[serde(default)]
    pub min_alerts: Option<usize>,
    /// How long an incident whose alerts all resolved waits before it
    /// resolves; an alert firing again within it keeps the incident and
    /// pages nothing new (default 5m; 0s: resolve at once).
    #[serde(default)]
    pub flap_window: Option<Dur>,
}

/// A secret: from a file, or from an environment variable (never inline).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Secret {
    /// File holding the value.
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// Environment variable holding the value.
    #[serde(default)]
    pub env: Option<String>,
}

impl Secret {
    /// Reads the value.
    pub fn read(&self) -> Result<String, String> {
        if let Some(f) = &self.file {
            return std::fs::read_to_string(f)
                .map(|s| s.trim().to_string())
                .map_err(|e| format!("{}: {e}", f.display()));
        }
        if let Some(v) = &self.env {
            return std::env::var(v).map_err(|_| format!("environment variable {v} is not set"));
        }
        Err("a secret needs file: or env:".into())
    }
}

/// One receiver: a name and exactly one kind.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiverSpec {
    /// Name used by routes.
    pub name: String,
    /// NDJSON on stdout.
    #[serde(default)]
    pub stdout: Option<EmptySpec>,
    /// Generic webhook.
    #[serde(default)]
    pub webhook: Option<WebhookSpec>,
    /// Alertmanager v2 (every instance).
    #[serde(default)]
    pub alertmanager: Option<AlertmanagerSpec>,
    /// Slack incoming webhook.
    #[serde(default)]
    pub slack: Option<SlackSpec>,
    /// PagerDuty Events v2.
    #[serde(default)]
    pub pagerduty: Option<PagerDutySpec>,
    /// Another receiver that also gets this one's notifications after
    /// repeated failures.
    #[serde(default)]
    pub fallback: Option<String>,
}

/// A kind with no settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmptySpec {}

/// A generic webhook receiver: the URL inline or as a secret (a URL that
/// holds a token), extra headers, an optional HMAC key that signs each body.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSpec {
    /// URL, or `url_secret` when it holds a token.
    #[serde(default)]
    pub url: Option<String>,
    /// URL from a file or env var.
    #[serde(default)]
    pub url_secret: Option<Secret>,
    /// Extra headers.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// HMAC signing key.
    #[serde(default)]
    pub secret: Option<Secret>,
}

/// An Alertmanager receiver: every instance of the cluster is sent every
/// alert (Alertmanager deduplicates), as Prometheus does.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertmanagerSpec {
    /// Every instance's base URL.
    pub urls: Vec<String>,
}

/// A Slack receiver: an incoming-webhook URL, read from a file or the
/// environment, never inline.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackSpec {
    /// The incoming-webhook URL (a secret).
    pub webhook_url: Secret,
}

/// A PagerDuty receiver (Events API v2): the routing key from a file or
/// the environment; the endpoint only for tests and proxies.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PagerDutySpec {
    /// The integration (routing) key (a secret).
    pub routing_key: Secret,
    /// The events endpoint, when not PagerDuty's own.
    #[serde(default)]
    pub url: Option<String>,
}

/// `loki:` settings; secrets only by file or environment, never inline.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LokiSection {
    /// Loki's base URL (`http://loki:3100`, with scheme; the API path is
    /// added).
    pub url: String,
    /// LogQL log queries, each its own stream of events.
    #[serde(default)]
    pub queries: Vec<String>,
    /// `X-Scope-OrgID`.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Basic-auth user (password from `password_file` or SIGWATCH_LOKI_PASSWORD).
    #[serde(default)]
    pub user: Option<String>,
    /// File holding the basic-auth password.
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// File holding a bearer token.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Extra CA certificate (PEM).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Use the websocket tail instead of polling.
    #[serde(default)]
    pub tail: bool,
    /// Entries per page (≤ 5000).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Query up to now minus this.
    #[serde(default)]
    pub lag: Option<Dur>,
    /// Polling period.
    #[serde(default)]
    pub interval: Option<Dur>,
    /// Where a fresh start begins, back from now.
    #[serde(default)]
    pub since: Option<Dur>,
}

/// Loads and validates a configuration file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
        path: name.clone(),
        message: e.to_string(),
    })?;
    let mut c = parse(&name, &text)?;
    // Rule paths follow the file, wherever sigwatch runs from.
    if let Some(dir) = path.parent() {
        let rules = c.rules.as_mut().map(|r| &mut r.files);
        let tokens = c.web.as_mut().map(|w| &mut w.token_files);
        let ingest = c.ingest.as_mut().map(|i| &mut i.token_files);
        for f in rules.into_iter().chain(tokens).chain(ingest).flatten() {
            if f.is_relative() {
                *f = dir.join(&*f);
            }
        }
        let web = c
            .web
            .as_mut()
            .map(|w| [&mut w.tls_cert_file, &mut w.tls_key_file]);
        let ingest = c
            .ingest
            .as_mut()
            .map(|i| [&mut i.tls_cert_file, &mut i.tls_key_file]);
        for f in web.into_iter().chain(ingest).flatten().flatten() {
            if f.is_relative() {
                *f = dir.join(&*f);
            }
        }
    }
    Ok(c)
}

/// Parses configuration text (`name` is used in errors).
pub fn parse(name: &str, text: &str) -> Result<Config, ConfigError> {
    let c: Config = serde_yaml_ng::from_str(text).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((1, 1));
        let msg = e.to_string();
        let message = msg
            .rfind(" at line ")
            .map_or(msg.clone(), |i| msg[..i].to_string());
        ConfigError::At {
            path: name.to_string(),
            line,
            column,
            message,
        }
    })?;
    for r in &c.receivers {
        let kinds = [
            r.stdout.is_some(),
            r.webhook.is_some(),
            r.alertmanager.is_some(),
            r.slack.is_some(),
            r.pagerduty.is_some(),
        ];
        if kinds.iter().filter(|k| **k).count() != 1 {
            return Err(ConfigError::At {
                path: name.to_string(),
                line: 1,
                column: 1,
                message: format!("receiver {:?} needs exactly one of stdout, webhook, alertmanager, slack, pagerduty", r.name),
            });
        }
    }
    let names: Vec<String> = c.receivers.iter().map(|r| r.name.clone()).collect();
    for r in &c.receivers {
        if let Some(f) = &r.fallback {
            if !names.contains(f) || f == &r.name {
                return Err(ConfigError::At {
                    path: name.to_string(),
                    line: 1,
                    column: 1,
                    message: format!(
                        "receiver {:?}: fallback {f:?} is not another receiver",
                        r.name
                    ),
                });
            }
        }
    }
    Router::new(&names, &c.routes, &c.default).map_err(|message| ConfigError::At {
        path: name.to_string(),
        line: 1,
        column: 1,
        message,
    })?;
    if let Some(l) = &c.loki {
        if l.queries.is_empty() {
            return Err(ConfigError::At {
                path: name.to_string(),
                line: 1,
                column: 1,
                message: "loki: needs at least one entry in queries".into(),
            });
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_file_parses() {
        let c = parse(
            "s.yaml",
            "loki:\n  url: http://loki:3100\n  queries: ['{namespace=\"livekit\"}']\n  tenant: prod\n  lag: 15s\n  tail: true\nfiles: ['/var/log/pods/*/*/*.log']\nstate_dir: /var/lib/sigwatch\n",
        )
        .unwrap();
        let l = c.loki.unwrap();
        assert_eq!(l.queries.len(), 1);
        assert_eq!(l.lag, Some(Dur::secs(15)));
        assert!(l.tail);
        assert_eq!(c.files.len(), 1);
    }

    fn notification(severity: &str, rule: &str) -> crate::alert::Notification {
        let mut labels = std::collections::BTreeMap::new();
        labels.insert("team".to_string(), "rtc".to_string());
        crate::alert::Notification {
            state: crate::alert::AlertState::Firing,
            rule: rule.into(),
            title: String::new(),
            severity: severity.into(),
            group: "g".into(),
            labels,
            annotations: Default::default(),
            starts_at: Default::default(),
            ends_at: None,
            count: 0,
            first_seen: None,
            last_seen: None,
            top_groups: vec![],
            share: None,
            samples: vec![],
            template: None,
            fingerprint: String::new(),
            repeat: false,
            incident: None,
            links: None,
            origins: Vec::new(),
            at: 0,
        }
    }

    #[test]
    fn routes_pick_receivers() {
        let c = parse(
            "s.yaml",
            r#"
receivers:
  - name: pager
    pagerduty: {routing_key: {env: PD_KEY}}
  - name: chat
    slack: {webhook_url: {file: /run/secrets/slack}}
  - name: am
    alertmanager: {urls: ["http://am:9093"]}
routes:
  - match: {severity: critical}
    receivers: [pager, am]
    continue: true
  - match: {rule: 'egress\..*', labels.team: rtc}
    receivers: [chat]
default: [am]
"#,
        )
        .unwrap();
        let names: Vec<String> = c.receivers.iter().map(|r| r.name.clone()).collect();
        let r = Router::new(&names, &c.routes, &c.default).unwrap();
        assert_eq!(
            r.select(&notification("critical", "egress.black_hole")),
            vec![0, 2, 1]
        );
        assert_eq!(
            r.select(&notification("critical", "livekit.drain_failed")),
            vec![0, 2]
        );
        assert_eq!(
            r.select(&notification("warning", "egress.cpu_exhausted")),
            vec![1]
        );
        assert_eq!(
            r.select(&notification("info", "grpc.x")),
            vec![2],
            "default"
        );
        assert_eq!(
            r.select(&notification("critical2", "x")),
            vec![2],
            "regexes are anchored"
        );
    }

    #[test]
    fn bad_routes_and_receivers_are_errors() {
        let e = parse(
            "s.yaml",
            "receivers:
  - name: a
    stdout: {}
routes:
  - receivers: [b]
",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown receiver \"b\""), "{e}");
        let e = parse(
            "s.yaml",
            "receivers:
  - name: a
",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("exactly one"), "{e}");
        let e = parse(
            "s.yaml",
            "receivers:
  - name: a
    slack: {webhook_url: 'https://hooks.slack.com/x'}
",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("s.yaml:3:"),
            "inline secrets are refused: {e}"
        );
    }

    #[test]
    fn unknown_keys_and_inline_secrets_are_located_errors() {
        let e = parse(
            "s.yaml",
            "loki:\n  url: http://x\n  queries: ['{a=\"b\"}']\n  password: hunter2\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("s.yaml:4:") && e.contains("password"), "{e}");
        let e = parse("s.yaml", "loki:\n  url: http://x\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("queries"), "{e}");
    }
}
