//! Receivers from the configuration file and the command line, in lanes
//! behind one dispatcher.

use super::{AppError, PipelineOptions};
use crate::config::ReceiverSpec;
use crate::notify::alertmanager::{Alertmanager, AlertmanagerConfig};
use crate::notify::pagerduty::PagerDuty;
use crate::notify::route::Router;
use crate::notify::slack::Slack;
use crate::notify::stdout::Stdout;
use crate::notify::webhook::{Webhook, WebhookConfig};
use crate::notify::{Dispatcher, Receiver, DEFAULT_QUEUE};
use std::sync::Arc;
use std::time::Duration;

fn setup(e: crate::notify::NotifyError) -> AppError {
    AppError::Setup(e.to_string())
}

/// The receivers, the Alertmanager receivers (whose re-send task `run`
/// starts), and the router when the configuration file has routes.
pub struct Receivers {
    /// Every receiver, in lane order.
    pub all: Vec<Arc<dyn Receiver>>,
    /// The Alertmanager receivers among them.
    pub alertmanagers: Vec<Arc<Alertmanager>>,
    /// Routes from the configuration file, if any.
    pub router: Option<Router>,
    /// (primary, fallback) receiver indices.
    pub fallbacks: Vec<(usize, usize)>,
}

/// A receiver built from the configuration, and itself again if it is an
/// Alertmanager (whose re-send task `run` starts).
type Built = (Arc<dyn Receiver>, Option<Arc<Alertmanager>>);

fn from_spec(r: &ReceiverSpec, p: &PipelineOptions, timeout: Duration) -> Result<Built, AppError> {
    let secret = |s: &crate::config::Secret| {
        s.read()
            .map_err(|e| AppError::Setup(format!("receiver {:?}: {e}", r.name)))
    };
    if r.stdout.is_some() {
        return Ok((Arc::new(Stdout::new(p.output.format())), None));
    }
    if let Some(w) = &r.webhook {
        let url = match (&w.url, &w.url_secret) {
            (Some(u), _) => u.clone(),
            (None, Some(s)) => secret(s)?,
            (None, None) => {
                return Err(AppError::Setup(format!(
                    "receiver {:?}: webhook needs url or url_secret",
                    r.name
                )))
            }
        };
        let mut cfg = WebhookConfig::new(&url);
        cfg.timeout = timeout;
        cfg.headers = w
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        cfg.secret = w.secret.as_ref().map(secret).transpose()?;
        return Ok((Arc::new(Webhook::new(cfg).map_err(setup)?), None));
    }
    if let Some(a) = &r.alertmanager {
        let mut cfg = AlertmanagerConfig::new(&a.urls);
        cfg.generator_url = p.external_url.clone();
        let am = Arc::new(Alertmanager::new(cfg).map_err(setup)?);
        return Ok((am.clone(), Some(am)));
    }
    if let Some(sl) = &r.slack {
        return Ok((
            Arc::new(Slack::new(&secret(&sl.webhook_url)?, timeout).map_err(setup)?),
            None,
        ));
    }
    if let Some(pd) = &r.pagerduty {
        return Ok((
            Arc::new(
                PagerDuty::new(&secret(&pd.routing_key)?, pd.url.as_deref(), timeout)
                    .map_err(setup)?,
            ),
            None,
        ));
    }
    Err(AppError::Setup(format!(
        "receiver {:?} has no kind",
        r.name
    )))
}

/// Which receivers a command may page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `run`: the configuration file's receivers, the command line's, and
    /// those the environment names (SIGWATCH_WEBHOOK_URL, Slack, PagerDuty).
    Run,
    /// `replay`, a backtest: only receivers named on its own command line —
    /// a replay of last month must not wake anyone because a pager's key
    /// sits in the environment or in sigwatch.yaml (`--config-receivers`
    /// asks for the configuration's receivers and routes too).
    Replay,
}

/// The receivers of a pipeline: those of the configuration file (with
/// their routes and fallbacks), then the command line's, which get every
/// notification whatever the routes (see [`Scope`] for what a replay
/// takes). Logs which receivers are active.
pub fn receivers(p: &PipelineOptions, scope: Scope) -> Result<Receivers, AppError> {
    let r = build(p, scope)?;
    let names: Vec<&str> = r.all.iter().map(|r| r.name()).collect();
    match scope {
        Scope::Run => {
            tracing::info!(receivers = %names.join(", "), "Notifications go to these receivers.")
        }
        Scope::Replay => {
            tracing::info!(receivers = %names.join(", "), "Replay notifies only the receivers on its command line.")
        }
    }
    Ok(r)
}

fn build(p: &PipelineOptions, scope: Scope) -> Result<Receivers, AppError> {
    let live = scope == Scope::Run;
    // Secrets from a file named on the command line; from the environment
    // only for `run`.
    let secret = |env: &str, file: &Option<std::path::PathBuf>| {
        if live {
            super::read_secret(env, file)
        } else {
            super::read_secret("", file)
        }
    };
    let timeout = super::duration(p.webhook_timeout);
    let mut all: Vec<Arc<dyn Receiver>> = Vec::new();
    let mut alertmanagers = Vec::new();
    let mut router = None;
    let mut fallbacks = Vec::new();
    if let (Some(path), Some(c)) = (&p.rules.config, p.rules.config_file()?) {
        let wanted = live || p.config_receivers;
        if !wanted && !c.receivers.is_empty() {
            tracing::info!(config = %path.display(), "The configuration's receivers are for run; replay sends only to receivers on its command line (--config-receivers to send to them too).");
        }
        if wanted && !c.receivers.is_empty() {
            let mut names = Vec::new();
            for r in &c.receivers {
                let (recv, am) = from_spec(r, p, timeout)?;
                all.push(Arc::new(crate::notify::Configured {
                    label: r.name.clone(),
                    inner: recv,
                }));
                alertmanagers.extend(am);
                names.push(r.name.clone());
            }
            router = Some(
                Router::new(&names, &c.routes, &c.default)
                    .map_err(|e| AppError::Setup(format!("{}: {e}", path.display())))?,
            );
            for (i, r) in c.receivers.iter().enumerate() {
                if let Some(f) = r
                    .fallback
                    .as_ref()
                    .and_then(|f| names.iter().position(|n| n == f))
                {
                    fallbacks.push((i, f));
                }
            }
        }
    }
    // Command-line receivers get every notification, whatever the routes.
    let first_cli = all.len();
    if !p.no_stdout {
        all.push(Arc::new(Stdout::new(p.output.format())));
    }
    if !p.alertmanager.is_empty() {
        let mut cfg = AlertmanagerConfig::new(&p.alertmanager);
        cfg.generator_url = p.external_url.clone();
        let r = Arc::new(Alertmanager::new(cfg).map_err(setup)?);
        all.push(r.clone());
        alertmanagers.push(r);
    }
    let env_webhook = || {
        std::env::var("SIGWATCH_WEBHOOK_URL")
            .ok()
            .filter(|s| live && !s.is_empty())
    };
    if let Some(url) = p.webhook.clone().or_else(env_webhook) {
        let mut cfg = WebhookConfig::new(&url);
        cfg.timeout = timeout;
        for h in &p.webhook_headers {
            let (k, val) = h.split_once(':').ok_or_else(|| {
                AppError::Setup(format!("--webhook-header {h:?}: write Name: value"))
            })?;
            cfg.headers
                .push((k.trim().to_string(), val.trim().to_string()));
        }
        cfg.secret = super::read_secret("SIGWATCH_WEBHOOK_SECRET", &p.webhook_secret_file)?;
        all.push(Arc::new(Webhook::new(cfg).map_err(setup)?));
    }
    if let Some(url) = secret("SIGWATCH_SLACK_WEBHOOK_URL", &p.slack_webhook_file)? {
        all.push(Arc::new(Slack::new(&url, timeout).map_err(setup)?));
    }
    if let Some(key) = secret("SIGWATCH_PAGERDUTY_ROUTING_KEY", &p.pagerduty_key_file)? {
        all.push(Arc::new(
            PagerDuty::new(&key, p.pagerduty_url.as_deref(), timeout).map_err(setup)?,
        ));
    }
    if all.is_empty() {
        return Err(AppError::Setup("--no-stdout with no other receiver (webhook, Alertmanager, Slack, PagerDuty, --config receivers) leaves nowhere to send notifications".into()));
    }
    if let Some(r) = router.as_mut() {
        r.always = (first_cli..all.len()).collect();
    }
    Ok(Receivers {
        all,
        alertmanagers,
        router,
        fallbacks,
    })
}

/// The dispatcher of these receivers: a lane each (with its spool under
/// `state_dir`), fallbacks and routes set; also returns the Alertmanager
/// receivers, whose re-send task the live loop starts. With
/// `wait_when_full` (replay) a full queue waits instead of dropping.
pub fn dispatcher(
    r: Receivers,
    wait_when_full: bool,
    state_dir: Option<&std::path::Path>,
) -> (Dispatcher, Vec<Arc<Alertmanager>>) {
    let lanes = r
        .all
        .into_iter()
        .map(|recv| {
            let cfg = crate::notify::LaneConfig {
                queue: DEFAULT_QUEUE,
                ..recv.lane()
            };
            (recv, cfg)
        })
        .collect();
    let mut d = Dispatcher::with_spool(lanes, wait_when_full, state_dir);
    for (primary, fallback) in r.fallbacks {
        d.set_fallback(primary, fallback);
    }
    if let Some(router) = r.router {
        d.set_router(router);
    }
    (d, r.alertmanagers)
}

/// `sigwatch check --config`: every receiver of the configuration built as
/// `run` would build it (secrets read, URLs parsed; nothing is sent), and
/// its routes compiled. Returns one line per receiver (`name (kind)`).
pub fn check_config(c: &crate::config::Config) -> Result<Vec<String>, AppError> {
    let p = PipelineOptions::default();
    let timeout = super::duration(p.webhook_timeout);
    let mut lines = Vec::new();
    for r in &c.receivers {
        let (recv, _) = from_spec(r, &p, timeout)
            .map_err(|e| AppError::Setup(format!("receiver {}: {e}", r.name)))?;
        lines.push(format!("{} ({})", r.name, recv.name()));
    }
    let names: Vec<String> = c.receivers.iter().map(|r| r.name.clone()).collect();
    Router::new(&names, &c.routes, &c.default).map_err(AppError::Setup)?;
    Ok(lines)
}
