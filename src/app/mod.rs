//! The assembled pipeline: what `sigwatch run` and `sigwatch replay` build
//! around the [`Engine`] — sources (stdin, files, Loki pollers and tails,
//! their checkpoints), receivers (stdout, webhooks, Alertmanager, Slack,
//! PagerDuty, routes and fallbacks, each in its own lane), the live loop
//! with its clock, reloads, state and shutdown, and the replay loop with
//! its progress and summary. It is a library module so tests and embedders
//! build exactly the pipeline the command line does; `main.rs` only parses
//! flags and calls in here.
//!
//! The option groups derive `clap::Args` so the command line flattens them
//! as they are; an embedder fills them from `Default` instead.

pub(crate) mod checkpoint;
pub mod commands;
pub(crate) mod delivery;
pub mod live;
pub mod mine;
pub(crate) mod receivers;
pub mod replay;
pub mod silence;
pub mod sources;
pub(crate) mod state;
pub mod suggest;

use crate::duration::Dur;
use crate::engine::{Engine, Options};
use crate::rules::{self, RuleSet};
use std::path::PathBuf;

/// What can stop the pipeline from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The rule files are invalid (every error, located).
    #[error("invalid rules:\n{0}")]
    Rules(#[from] rules::RuleErrors),
    /// The literal automaton could not be built.
    #[error(transparent)]
    Matcher(#[from] crate::matcher::MatcherError),
    /// The configuration file is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// An input file cannot be opened or read.
    #[error(transparent)]
    Read(#[from] crate::source::block::ReadError),
    /// A file or socket the pipeline needs.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Options that do not fit together, or a receiver or source that
    /// cannot be set up (the message says which and why).
    #[error("{0}")]
    Setup(String),
    /// Push ingest cannot start (a listener, a credential, the ingest log).
    #[error(transparent)]
    Ingest(#[from] crate::ingest::IngestError),
}

impl AppError {
    fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> AppError {
        let what = what.into();
        move |source| AppError::Io { what, source }
    }
}

/// Which rules to load: the built-in pack, plus rule files of one's own.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RulesOptions {
    /// Rule file or directory of one's own (repeatable), added to the
    /// built-in pack; a rule with a pack rule's id replaces it.
    #[arg(help_heading = "Rules", long = "rules", value_name = "PATH")]
    pub rules: Vec<PathBuf>,
    /// Leave the built-in pack out: only the --rules files (and those of
    /// the configuration file).
    #[arg(help_heading = "Rules", long)]
    pub no_builtin_rules: bool,
    /// Configuration file (sigwatch.yaml): sources, receivers, routes, rule
    /// files; command-line flags override it.
    #[arg(
        help_heading = "Configuration",
        long,
        value_name = "FILE",
        env = "SIGWATCH_CONFIG"
    )]
    pub config: Option<PathBuf>,
    /// The configuration file as parsed for this run (shared by clones).
    #[arg(skip)]
    parsed: std::sync::Arc<std::sync::Mutex<Option<std::sync::Arc<crate::config::Config>>>>,
}

impl RulesOptions {
    /// The configuration file, parsed on first use: sources, rules,
    /// receivers and incident settings of one run all read the same parse
    /// (not the file three times, which could change in between). None
    /// without `--config`.
    pub fn config_file(&self) -> Result<Option<std::sync::Arc<crate::config::Config>>, AppError> {
        let Some(path) = &self.config else {
            return Ok(None);
        };
        let mut slot = match self.parsed.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Some(c) = slot.as_ref() {
            return Ok(Some(c.clone()));
        }
        let c = std::sync::Arc::new(crate::config::load(path)?);
        *slot = Some(c.clone());
        Ok(Some(c))
    }

    /// Reads the configuration file again (a rule reload: its `rules:`
    /// section may have changed). On an error the previous parse stays.
    pub fn reread_config(&self) -> Result<(), AppError> {
        let Some(path) = &self.config else {
            return Ok(());
        };
        let c = std::sync::Arc::new(crate::config::load(path)?);
        match self.parsed.lock() {
            Ok(mut g) => *g = Some(c),
            Err(p) => *p.into_inner() = Some(c),
        }
        Ok(())
    }

    /// The rule paths and whether the pack stays: the flags, then the
    /// configuration file's `rules:` section.
    pub fn layers(&self) -> Result<(bool, Vec<PathBuf>), AppError> {
        let mut paths = self.rules.clone();
        let mut pack = !self.no_builtin_rules;
        if let Some(r) = self.config_file()?.as_ref().and_then(|c| c.rules.as_ref()) {
            paths.extend(r.files.iter().cloned());
            pack &= r.builtin.unwrap_or(true);
        }
        Ok((pack, paths))
    }
}

fn parse_dur(s: &str) -> Result<Dur, String> {
    Dur::parse(s)
}

/// `--label NAME=VALUE`: a Prometheus-style label name and a value that
/// is not empty (an empty label is an absent one).
fn parse_label(s: &str) -> Result<(String, String), String> {
    let Some((name, value)) = s.split_once('=') else {
        return Err(format!("{s:?} is not NAME=VALUE"));
    };
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "{name:?} is not a label name (letters, digits and _, not starting with a digit)"
        ));
    }
    if value.is_empty() {
        return Err(format!(
            "{name}= has no value (an empty label is an absent one)"
        ));
    }
    Ok((name.to_string(), value.to_string()))
}

/// `--output`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Text on a terminal, JSON otherwise.
    Auto,
    /// One JSON object per line.
    Json,
    /// One readable line per notification.
    Text,
}

impl Output {
    /// The stdout format this choice means here.
    pub fn format(self) -> crate::notify::stdout::Format {
        use crate::notify::stdout::Format;
        match self {
            Output::Auto => Format::for_stdout(),
            Output::Json => Format::Json,
            Output::Text => match Format::for_stdout() {
                Format::Text { color } => Format::Text { color },
                Format::Json => Format::Text { color: false },
            },
        }
    }
}

/// What every pipeline (run and replay) is built from: rules, receivers,
/// timing and bounds.
#[derive(clap::Args, Debug, Clone)]
pub struct PipelineOptions {
    #[command(flatten)]
    /// Which rules to load.
    pub rules: RulesOptions,
    /// Also POST every notification as JSON to this URL (`run` also reads
    /// SIGWATCH_WEBHOOK_URL; `replay` only this flag).
    #[arg(help_heading = "Receivers", long, value_name = "URL")]
    pub webhook: Option<String>,
    /// Also send alerts to this Alertmanager (v2 API), e.g. http://alertmanager:9093.
    /// Repeat for every instance of an Alertmanager cluster: each gets every alert.
    #[arg(help_heading = "Receivers", long, value_name = "URL")]
    pub alertmanager: Vec<String>,
    /// Extra webhook header, "Name: value" (repeatable). A signing secret
    /// comes from SIGWATCH_WEBHOOK_SECRET or --webhook-secret-file.
    #[arg(
        help_heading = "Receivers",
        long = "webhook-header",
        value_name = "HEADER"
    )]
    pub webhook_headers: Vec<String>,
    /// File holding the webhook HMAC-SHA256 secret (X-Sigwatch-Signature).
    #[arg(help_heading = "Receivers", long, value_name = "FILE")]
    pub webhook_secret_file: Option<PathBuf>,
    /// Slack incoming-webhook URL from this file (`run` also reads env
    /// SIGWATCH_SLACK_WEBHOOK_URL).
    #[arg(help_heading = "Receivers", long, value_name = "FILE")]
    pub slack_webhook_file: Option<PathBuf>,
    /// PagerDuty Events v2 routing key from this file (`run` also reads env
    /// SIGWATCH_PAGERDUTY_ROUTING_KEY).
    #[arg(help_heading = "Receivers", long, value_name = "FILE")]
    pub pagerduty_key_file: Option<PathBuf>,
    /// PagerDuty events endpoint (default <https://events.pagerduty.com/v2/enqueue>).
    #[arg(help_heading = "Receivers", long, value_name = "URL")]
    pub pagerduty_url: Option<String>,
    /// This sigwatch's own URL, used as the alerts' generatorURL.
    #[arg(help_heading = "Receivers", long, value_name = "URL")]
    pub external_url: Option<String>,
    /// Do not print notifications on stdout (useful with --webhook).
    #[arg(help_heading = "Receivers", long)]
    pub no_stdout: bool,
    /// How notifications are printed on stdout: one readable line each
    /// (text, coloured unless NO_COLOR is set), one JSON object per line
    /// (json, the documented schema), or text on a terminal and json
    /// otherwise (auto).
    #[arg(help_heading = "Output", long, value_enum, default_value = "auto")]
    pub output: Output,
    /// replay: also send to the receivers of the configuration file, with
    /// its routes, as `run` would (a replay otherwise pages only receivers
    /// named by its own flags).
    #[arg(help_heading = "Receivers", long)]
    pub config_receivers: bool,
    /// How late an event may arrive behind the newest one and still count in its window.
    #[arg(help_heading = "Detection", long, default_value = "5s", value_parser = parse_dur)]
    pub lateness: Dur,
    /// A label every line carries unless its stream names it, NAME=VALUE
    /// (repeatable): what a Loki selector selects by (`app=livekit`), for
    /// lines piped in or read from files. A kubectl prefix, a pod log's
    /// path or a Loki stream that names the label keeps its own value.
    #[arg(help_heading = "Detection", long = "label", value_name = "NAME=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Webhook request timeout.
    #[arg(help_heading = "Delivery", long, default_value = "5s", value_parser = parse_dur)]
    pub webhook_timeout: Dur,
    /// Longest wait for queued notifications at exit.
    #[arg(help_heading = "Delivery", long, default_value = "10s", value_parser = parse_dur)]
    pub shutdown_timeout: Dur,
    /// Print pipeline counters as JSON on stderr at exit.
    #[arg(help_heading = "Output", long)]
    pub stats: bool,
    /// Longest line kept, in bytes (at least 1024); the rest of a longer line
    /// is dropped and counted (`truncated_lines`). Also bounds reassembled
    /// CRI/Docker partial lines and multi-line JSON.
    #[arg(help_heading = "Limits",long, default_value_t = crate::source::MAX_LINE_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_line_bytes: u64,
    /// Known templates for novelty (from `sigwatch learn`): no learning
    /// period, templates not in the file are new from the first line.
    /// With --state-dir, the saved templates.json takes precedence.
    #[arg(help_heading = "Detection", long, value_name = "FILE")]
    pub templates: Option<PathBuf>,
    /// Turn novelty (pages on new error templates) off, whatever the rule
    /// files say.
    #[arg(help_heading = "Detection", long)]
    pub no_novelty: bool,
    /// Page per incident, not per alert: related alerts (rule links, the
    /// same rule elsewhere, shared nodes) join one incident; receivers get
    /// it opened, updated and resolved. Alertmanager still gets the alerts,
    /// labelled `incident`. Also `incidents: {group: true}` in sigwatch.yaml.
    #[arg(help_heading = "Detection", long)]
    pub group_incidents: bool,
    /// How long a resolved alert still draws related alerts into its
    /// incident (default 15m; sigwatch.yaml `incidents.window`).
    #[arg(help_heading = "Detection", long, value_parser = parse_dur, value_name = "DURATION")]
    pub incident_window: Option<Dur>,
    /// Open alerts' lines in this Grafana: notifications from Loki carry
    /// an Explore link (links.grafana) beside the Loki query_range one.
    #[arg(
        help_heading = "Links",
        long,
        value_name = "URL",
        env = "SIGWATCH_GRAFANA_URL"
    )]
    pub grafana_url: Option<String>,
    /// The UID of Grafana's Loki data source, for --grafana-url (its
    /// settings page URL ends with it).
    #[arg(
        help_heading = "Links",
        long,
        value_name = "UID",
        default_value = "loki"
    )]
    pub grafana_datasource: String,
    /// Notifications carry no links to their lines (links: Loki, Grafana,
    /// file:line of the samples).
    #[arg(help_heading = "Links", long)]
    pub no_links: bool,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            rules: RulesOptions::default(),
            webhook: None,
            alertmanager: Vec::new(),
            webhook_headers: Vec::new(),
            webhook_secret_file: None,
            slack_webhook_file: None,
            pagerduty_key_file: None,
            pagerduty_url: None,
            external_url: None,
            no_stdout: false,
            output: Output::Auto,
            config_receivers: false,
            lateness: Dur::secs(5),
            labels: Vec::new(),
            webhook_timeout: Dur::secs(5),
            shutdown_timeout: Dur::secs(10),
            stats: false,
            max_line_bytes: crate::source::MAX_LINE_BYTES as u64,
            templates: None,
            no_novelty: false,
            group_incidents: false,
            incident_window: None,
            grafana_url: None,
            grafana_datasource: "loki".to_string(),
            no_links: false,
        }
    }
}

impl PipelineOptions {
    /// Where the links of notifications point, reading from the Loki at
    /// `loki_url` (None: not Loki); None with --no-links.
    pub fn links(&self, loki_url: Option<&str>) -> Option<crate::links::LinkOptions> {
        (!self.no_links).then(|| crate::links::LinkOptions {
            loki_url: loki_url.map(str::to_string),
            grafana_url: self.grafana_url.clone(),
            grafana_datasource: self.grafana_datasource.clone(),
        })
    }
}

/// Incident settings: flags over `incidents:` in sigwatch.yaml over the
/// defaults. Returns (group incidents?, settings).
pub fn incident_settings(
    p: &PipelineOptions,
) -> Result<(bool, crate::incident::IncidentConfig), AppError> {
    let section = p
        .rules
        .config_file()?
        .and_then(|c| c.incidents.clone())
        .unwrap_or_default();
    let mut cfg = crate::incident::IncidentConfig::default();
    if let Some(w) = p.incident_window.or(section.window) {
        cfg.window = w.ns().max(0);
    }
    if let Some(u) = section.update_interval {
        cfg.update_interval = u.ns().max(0);
    }
    if let Some(n) = section.min_alerts {
        cfg.min_alerts = n.max(1);
    }
    if let Some(f) = section.flap_window {
        cfg.flap_window = f.ns().max(0);
    }
    Ok((p.group_incidents || section.group, cfg))
}

/// Loads the rules named (or the built-in pack).
pub fn load_rules(a: &RulesOptions) -> Result<RuleSet, AppError> {
    let (pack, paths) = a.layers()?;
    Ok(rules::load_layered(pack, &paths)?)
}

/// The engine of a pipeline: its rules, bounds and lateness; `live` lets
/// arrival time stand in for a missing event time.
pub fn build_engine(p: &PipelineOptions, live: bool) -> Result<Engine, AppError> {
    crate::source::set_max_line_bytes(usize::try_from(p.max_line_bytes).unwrap_or(usize::MAX));
    let set = pipeline_rules(p)?;
    tracing::info!(rules = set.rules.len(), "Rules loaded.");
    let mut engine = Engine::new(
        set,
        Options {
            live,
            lateness_ns: p.lateness.ns(),
        },
    )?;
    engine.set_default_labels(p.labels.clone());
    if let Some(f) = &p.templates {
        load_templates(&mut engine, f)?;
    }
    Ok(engine)
}

/// Warns, once per rule (`warned` keeps which), of rules that select by a
/// label no line carried: they cannot match, and `--label` fixes it.
pub(crate) fn warn_labels_never_carried(
    engine: &Engine,
    warned: &mut std::collections::HashSet<String>,
) {
    for (rule, label, value) in engine.labels_never_carried() {
        if !warned.insert(rule.clone()) {
            continue;
        }
        let flag = format!("--label {label}={}", value.as_deref().unwrap_or("VALUE"));
        tracing::warn!(
            rule = %rule,
            label = %label,
            fix = %flag,
            "Rule {rule} selects by the label {label:?}, which no line has carried, so it cannot match: \
             piped lines carry labels only from a kubectl --prefix or a kubelet log path. Give them with {flag}."
        );
    }
}

/// The rules of a pipeline: the files named (or the built-in pack),
/// without novelty under `--no-novelty`.
pub fn pipeline_rules(p: &PipelineOptions) -> Result<RuleSet, AppError> {
    let mut set = load_rules(&p.rules)?;
    if p.no_novelty {
        // Anomalies measure the templates novelty's miner finds: they go too.
        set.rules.retain(|r| {
            !matches!(
                r.detect,
                rules::Detect::Novelty(_) | rules::Detect::Anomaly(_)
            )
        });
    }
    Ok(set)
}

/// Starts the engine's novelty from a template file; a file that cannot be
/// read or parsed is an error (it was asked for).
pub fn load_templates(engine: &mut Engine, path: &std::path::Path) -> Result<usize, AppError> {
    let state = crate::mining::load(path).map_err(|e| {
        AppError::Setup(format!(
            "{e} (a file from `sigwatch learn`; move it away to start fresh)"
        ))
    })?;
    let n = engine.load_templates(&state);
    if engine.miner().is_none() {
        tracing::warn!(path = %path.display(), "Novelty is off; the templates are not used.");
    } else {
        tracing::info!(path = %path.display(), templates = n, "Known templates loaded.");
    }
    Ok(n)
}

/// A secret from a file (trimmed) or, failing that, the environment
/// variable `env` (none when `env` is empty).
pub fn read_secret(env: &str, file: &Option<PathBuf>) -> Result<Option<String>, AppError> {
    if let Some(f) = file {
        crate::durable::warn_if_shared(f, "secret file");
        let s = std::fs::read_to_string(f)
            .map_err(AppError::io(format!("cannot read {}", f.display())))?;
        return Ok(Some(s.trim().to_string()));
    }
    if env.is_empty() {
        return Ok(None);
    }
    Ok(std::env::var(env).ok().filter(|s| !s.is_empty()))
}

/// Nanoseconds of a duration option as a `std::time::Duration` (at least 1 ns).
fn duration(d: Dur) -> std::time::Duration {
    std::time::Duration::from_nanos(d.ns().max(1) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_is_parsed_once_per_run_and_again_on_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sigwatch.yaml");
        std::fs::write(&path, "files: [a.log]\nrules: {builtin: false}\n").unwrap();
        let opts = RulesOptions {
            config: Some(path.clone()),
            ..RulesOptions::default()
        };
        let first = opts.config_file().unwrap().unwrap();
        // A clone (the pipeline's) shares the parse.
        let again = opts.clone().config_file().unwrap().unwrap();
        assert!(std::sync::Arc::ptr_eq(&first, &again));
        assert!(!opts.layers().unwrap().0, "builtin: false");
        // Sources, receivers and incidents see the same parse even if the
        // file changes meanwhile; a reload reads it again.
        std::fs::write(&path, "files: [b.log]\n").unwrap();
        assert_eq!(opts.config_file().unwrap().unwrap().files, vec!["a.log"]);
        opts.reread_config().unwrap();
        assert_eq!(opts.config_file().unwrap().unwrap().files, vec!["b.log"]);
        assert!(opts.layers().unwrap().0, "the pack is back");
        // A file that no longer parses: the error, and the last parse stays.
        std::fs::write(&path, "files: [c.log\n").unwrap();
        assert!(opts.reread_config().is_err());
        assert_eq!(opts.config_file().unwrap().unwrap().files, vec!["b.log"]);
        assert!(RulesOptions::default().config_file().unwrap().is_none());
    }
}
