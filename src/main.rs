//! The `sigwatch` command line: `run`, `replay`, `check`.

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use sigwatch::alert::Notification;
use sigwatch::clock::wall_ns;
use sigwatch::config::ReceiverSpec;
use sigwatch::notify::alertmanager::{Alertmanager, AlertmanagerConfig};
use sigwatch::notify::pagerduty::PagerDuty;
use sigwatch::notify::route::Router;
use sigwatch::notify::slack::Slack;
use sigwatch::notify::stdout::Stdout;
use sigwatch::notify::webhook::{Webhook, WebhookConfig};
use sigwatch::notify::{Dispatcher, Receiver, DEFAULT_QUEUE};
use sigwatch::rules::{self, duration::Dur, RuleSet};
use sigwatch::scan::Hints;
use sigwatch::server::{Snapshot, Telemetry};
use sigwatch::source::block::{self, Block, ReadBlocks};
use sigwatch::source::file;
use sigwatch::source::loki::poll::Poller;
use sigwatch::source::loki::tail::run_tail;
use sigwatch::source::loki::{cursor, may_match_loki_itself, run_poller, Auth, Batch, LokiConfig};
use sigwatch::source::Source;
use sigwatch::{Engine, Options};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "sigwatch",
    version,
    about = "Recognise incident log signatures per node and cluster-wide, and page on-call."
)]
struct Cli {
    /// Log level for sigwatch's own logs on stderr (error, warn, info, debug).
    #[arg(long, global = true, default_value = "info", env = "SIGWATCH_LOG")]
    log_level: String,
    /// Log format for sigwatch's own logs: text (readable) or json (one object per line).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "SIGWATCH_LOG_FORMAT"
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Cmd {
    /// Watch live logs (stdin, Loki or files); notifications go to stdout (NDJSON).
    #[command(
        after_help = "Examples:\n  kubectl logs -f -l app=livekit --prefix --max-log-requests 50 | sigwatch run\n  sigwatch run --loki http://loki:3100 --query '{namespace=\"livekit\"}' --state-dir /var/lib/sigwatch --alertmanager http://alertmanager:9093\n  sigwatch run --file '/var/log/pods/*/*/*.log' --rules /etc/sigwatch/rules --watch-rules\n\nSIGHUP reloads the rules; SIGTERM drains deliveries for --shutdown-timeout, a second signal exits at once.\n/healthz, /readyz and /metrics are served on --listen (127.0.0.1:9464)."
    )]
    Run(Box<RunArgs>),
    /// Replay log files in event time; the same input always gives the same output.
    #[command(
        after_help = "Examples:\n  sigwatch replay node-a.log node-b.log > alerts.ndjson\n  kubectl logs -l app=livekit --prefix --since=24h | sigwatch replay -\n\nOn a terminal a progress bar shows bytes and lines per second (and the ETA for\nfiles); a summary table ends every replay on stderr (--no-summary to omit it)."
    )]
    Replay(Box<ReplayArgs>),
    /// Validate rules and their inline examples; print one line per rule.
    #[command(
        after_help = "Examples:\n  sigwatch check\n  sigwatch check --rules my-rules/\n  sigwatch check --literals > literals.txt\n\nErrors are printed as file:line:column: message; exit status 1 on any error."
    )]
    Check(CheckArgs),
    /// Run rule unit tests: log lines at chosen instants in, expected
    /// notifications out (see docs/rules.md).
    #[command(
        after_help = "Examples:\n  sigwatch test rules/tests/\n  sigwatch test --rules my-rules/ my-rules/tests/black-hole.yaml\n\nExit status: 0 when every case passes, 1 otherwise."
    )]
    Test(TestArgs),
    /// Explain a line: how it decodes (wrapper, format, time, level, fields,
    /// group keys) and which rules match it, or which check failed.
    #[command(
        after_help = "Examples:\n  sigwatch explain '{\"level\":\"error\",\"msg\":\"failed to mark as draining\",\"nodeID\":\"ND_1\"}'\n  kubectl logs --prefix pod/livekit-0 | tail -5 | sigwatch explain --rule livekit.drain_stuck\n\nLines read from stdin share stream context (sticky nodeID, partial lines), as in the pipeline."
    )]
    Explain(ExplainArgs),
}

#[derive(Args)]
struct ExplainArgs {
    #[command(flatten)]
    rules: RulesArgs,
    /// Show this rule's checks even when none of its literals occur (repeatable).
    #[arg(long = "rule", value_name = "ID")]
    only: Vec<String>,
    /// Lines to explain; none: read lines from stdin.
    #[arg(value_name = "LINE")]
    lines: Vec<String>,
}

#[derive(Args)]
struct TestArgs {
    #[command(flatten)]
    rules: RulesArgs,
    /// Test files, or directories of them (*.yaml, *.yml).
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
}

#[derive(Args, Clone)]
struct RulesArgs {
    /// Rule file or directory (repeatable). Default: the built-in pack.
    #[arg(long = "rules", value_name = "PATH")]
    rules: Vec<PathBuf>,
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    rules: RulesArgs,
    /// Print the automaton's literals, one per line, instead of the summary
    /// (for `rg -F -f` / `grep -F -f` comparisons).
    #[arg(long)]
    literals: bool,
}

#[derive(Args, Clone)]
struct PipelineArgs {
    #[command(flatten)]
    rules: RulesArgs,
    /// Also POST every notification as JSON to this URL (env: SIGWATCH_WEBHOOK_URL).
    #[arg(
        long,
        value_name = "URL",
        env = "SIGWATCH_WEBHOOK_URL",
        hide_env_values = true
    )]
    webhook: Option<String>,
    /// Also send alerts to this Alertmanager (v2 API), e.g. http://alertmanager:9093.
    /// Repeat for every instance of an Alertmanager cluster: each gets every alert.
    #[arg(long, value_name = "URL")]
    alertmanager: Vec<String>,
    /// Extra webhook header, "Name: value" (repeatable). A signing secret
    /// comes from SIGWATCH_WEBHOOK_SECRET or --webhook-secret-file.
    #[arg(long = "webhook-header", value_name = "HEADER")]
    webhook_headers: Vec<String>,
    /// File holding the webhook HMAC-SHA256 secret (X-Sigwatch-Signature).
    #[arg(long, value_name = "FILE")]
    webhook_secret_file: Option<PathBuf>,
    /// Slack incoming-webhook URL from this file (or env SIGWATCH_SLACK_WEBHOOK_URL).
    #[arg(long, value_name = "FILE")]
    slack_webhook_file: Option<PathBuf>,
    /// PagerDuty Events v2 routing key from this file (or env SIGWATCH_PAGERDUTY_ROUTING_KEY).
    #[arg(long, value_name = "FILE")]
    pagerduty_key_file: Option<PathBuf>,
    /// PagerDuty events endpoint (default https://events.pagerduty.com/v2/enqueue).
    #[arg(long, value_name = "URL")]
    pagerduty_url: Option<String>,
    /// This sigwatch's own URL, used as the alerts' generatorURL.
    #[arg(long, value_name = "URL")]
    external_url: Option<String>,
    /// Do not print notifications on stdout (useful with --webhook).
    #[arg(long)]
    no_stdout: bool,
    /// How late an event may arrive behind the newest one and still count in its window.
    #[arg(long, default_value = "5s", value_parser = parse_dur)]
    lateness: Dur,
    /// Webhook request timeout.
    #[arg(long, default_value = "5s", value_parser = parse_dur)]
    webhook_timeout: Dur,
    /// Longest wait for queued notifications at exit.
    #[arg(long, default_value = "10s", value_parser = parse_dur)]
    shutdown_timeout: Dur,
    /// Configuration file (sigwatch.yaml): sources, receivers, routes;
    /// command-line flags override it.
    #[arg(long, value_name = "FILE", env = "SIGWATCH_CONFIG")]
    config: Option<PathBuf>,
    /// Print pipeline counters as JSON on stderr at exit.
    #[arg(long)]
    stats: bool,
    /// Longest line kept, in bytes (at least 1024); the rest of a longer line
    /// is dropped and counted (`truncated_lines`). Also bounds reassembled
    /// CRI/Docker partial lines and multi-line JSON.
    #[arg(long, default_value_t = sigwatch::source::MAX_LINE_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(1024..))]
    max_line_bytes: u64,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    p: PipelineArgs,
    #[command(flatten)]
    loki: SourceArgs,
}

/// Where live lines come from: stdin (default), Grafana Loki, or files.
/// Loki secrets come from the
/// environment or files, never from the command line (where `ps` shows them).
#[derive(Args)]
struct SourceArgs {
    /// Consume Grafana Loki at this base URL instead of stdin (env: SIGWATCH_LOKI_URL).
    #[arg(long, value_name = "URL", env = "SIGWATCH_LOKI_URL")]
    loki: Option<String>,
    /// LogQL log query, e.g. '{namespace="livekit"}' (repeatable: each runs as its own stream).
    #[arg(long = "query", value_name = "LOGQL")]
    queries: Vec<String>,
    /// Tenant sent as X-Scope-OrgID (env: SIGWATCH_LOKI_TENANT).
    #[arg(long, env = "SIGWATCH_LOKI_TENANT")]
    loki_tenant: Option<String>,
    /// Basic-auth user; the password comes from SIGWATCH_LOKI_PASSWORD or --loki-password-file.
    #[arg(long, env = "SIGWATCH_LOKI_USER")]
    loki_user: Option<String>,
    /// File holding the basic-auth password.
    #[arg(long, value_name = "FILE")]
    loki_password_file: Option<PathBuf>,
    /// File holding a bearer token (or env SIGWATCH_LOKI_TOKEN).
    #[arg(long, value_name = "FILE")]
    loki_token_file: Option<PathBuf>,
    /// Extra CA certificate (PEM) to trust for Loki's TLS.
    #[arg(long, value_name = "FILE")]
    loki_ca_file: Option<PathBuf>,
    /// Follow Loki's websocket tail instead of polling (lower latency; every
    /// reconnect and dropped-entries report is backfilled from query_range).
    #[arg(long)]
    loki_tail: bool,
    /// Entries per query_range page (Loki's cap is 5000) [default: 1000].
    #[arg(long)]
    loki_limit: Option<u32>,
    /// Query up to now minus this, so lines still being shipped are not skipped [default: 10s].
    #[arg(long, value_parser = parse_dur)]
    loki_lag: Option<Dur>,
    /// Polling period [default: 2s].
    #[arg(long, value_parser = parse_dur)]
    loki_interval: Option<Dur>,
    /// Where a fresh start (no checkpoint) begins, back from now [default: 15m].
    #[arg(long, value_parser = parse_dur)]
    since: Option<Dur>,
    /// Directory for checkpoints (Loki cursors, file offsets) that survive restarts.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Serve /healthz, /readyz and /metrics here ("none" to disable).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
    listen: String,
    /// Follow log files matching this glob instead of stdin (repeatable),
    /// e.g. '/var/log/pods/*/*/*.log'.
    #[arg(long = "file", value_name = "GLOB")]
    files: Vec<String>,
    /// Reload the rules when a rule file changes (checked every 2 s; also
    /// follows Kubernetes ConfigMap updates). SIGHUP always reloads. An
    /// invalid set is rejected and the running one kept.
    #[arg(long)]
    watch_rules: bool,
}

fn read_secret(env: &str, file: &Option<PathBuf>) -> Result<Option<String>> {
    if let Some(f) = file {
        let s =
            std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
        return Ok(Some(s.trim().to_string()));
    }
    Ok(std::env::var(env).ok().filter(|s| !s.is_empty()))
}

fn loki_config(a: &SourceArgs, url: &str) -> Result<LokiConfig> {
    let mut c = LokiConfig::new(url);
    c.tenant = a.loki_tenant.clone();
    c.ca_file = a.loki_ca_file.clone();
    let d = |v: Option<Dur>, default: Dur| {
        Duration::from_nanos(v.unwrap_or(default).ns().max(1) as u64)
    };
    c.limit = a.loki_limit.unwrap_or(1000);
    c.lag = d(a.loki_lag, Dur::secs(10));
    c.interval = d(a.loki_interval, Dur::secs(2));
    c.since = d(a.since, Dur::secs(900));
    if let Some(token) = read_secret("SIGWATCH_LOKI_TOKEN", &a.loki_token_file)? {
        c.auth = Auth::Bearer(token);
    } else if let Some(user) = &a.loki_user {
        let password = read_secret("SIGWATCH_LOKI_PASSWORD", &a.loki_password_file)?
            .context("--loki-user needs SIGWATCH_LOKI_PASSWORD or --loki-password-file")?;
        c.auth = Auth::Basic {
            user: user.clone(),
            password,
        };
    }
    Ok(c)
}

#[derive(Args)]
struct ReplayArgs {
    #[command(flatten)]
    p: PipelineArgs,
    /// Files to replay, merged by event time; `-` is stdin.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<String>,
    /// Do not print the summary table on stderr at the end.
    #[arg(long)]
    no_summary: bool,
}

fn parse_dur(s: &str) -> Result<Dur, String> {
    Dur::parse(s)
}

fn load_rules(a: &RulesArgs) -> Result<RuleSet, rules::RuleErrors> {
    if a.rules.is_empty() {
        rules::load_builtin()
    } else {
        rules::load_paths(&a.rules)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(format!("sigwatch={}", cli.log_level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("sigwatch=info"));
    let fmt = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_target(false);
    match cli.log_format {
        LogFormat::Json => fmt.json().init(),
        LogFormat::Text => fmt
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
    }
    let result = match cli.cmd {
        Cmd::Check(a) => return check(&a),
        Cmd::Test(a) => return test(&a),
        Cmd::Explain(a) => return explain(&a),
        Cmd::Run(a) => runtime().and_then(|rt| rt.block_on(run(a.p, a.loki))),
        Cmd::Replay(a) => {
            let summary = match (a.no_summary, cli.log_format) {
                (true, _) => Summary::Off,
                (false, LogFormat::Json) => Summary::Log,
                (false, LogFormat::Text) => Summary::Table,
            };
            runtime().and_then(|rt| rt.block_on(replay(a.p, a.files, summary)))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sigwatch: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the runtime")
}

fn explain(a: &ExplainArgs) -> ExitCode {
    let set = match load_rules(&a.rules) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    for id in &a.only {
        if !set.rules.iter().any(|r| &r.id == id) {
            eprintln!("no rule {id:?} in the rule set");
            return ExitCode::from(1);
        }
    }
    let mut ex = match sigwatch::explain::Explainer::new(set) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    if !a.lines.is_empty() {
        for l in &a.lines {
            print!("{}", ex.explain(l, &a.only));
        }
        return ExitCode::SUCCESS;
    }
    let mut reader = sigwatch::source::stdin::LineReader::new(std::io::stdin().lock());
    loop {
        match reader.next_line_ref() {
            Ok(Some(l)) => print!("{}", ex.explain(l, &a.only)),
            Ok(None) => return ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("stdin: {e}");
                return ExitCode::from(1);
            }
        }
    }
}

fn test(a: &TestArgs) -> ExitCode {
    let set = match load_rules(&a.rules) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let mut files = Vec::new();
    for p in &a.paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = match std::fs::read_dir(p) {
                Ok(rd) => rd
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|e| {
                        e.is_file() && e.extension().is_some_and(|x| x == "yaml" || x == "yml")
                    })
                    .collect(),
                Err(e) => {
                    eprintln!("{}: {e}", p.display());
                    return ExitCode::from(1);
                }
            };
            found.sort();
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    let (mut passed, mut failed) = (0, 0);
    for f in &files {
        println!("{}", f.display());
        match sigwatch::ruletest::run_file(f, &set) {
            Ok(results) => {
                for r in &results {
                    print!("{}", sigwatch::ruletest::render(r));
                    if r.passed {
                        passed += 1;
                    } else {
                        failed += 1;
                    }
                }
            }
            Err(e) => {
                println!("  ERROR {e}");
                failed += 1;
            }
        }
    }
    println!(
        "\n{passed} passed, {failed} failed ({} file{})",
        files.len(),
        if files.len() == 1 { "" } else { "s" }
    );
    if failed > 0 || passed == 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn check(a: &CheckArgs) -> ExitCode {
    let set = match load_rules(&a.rules) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    if a.literals {
        return match sigwatch::matcher::Matcher::new(&set) {
            Ok(m) => {
                for l in m.literals() {
                    println!("{l}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("sigwatch: {e}");
                ExitCode::from(1)
            }
        };
    }
    let failures = match sigwatch::check_examples(&set) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("sigwatch: {e}");
            return ExitCode::from(1);
        }
    };
    for r in &set.rules {
        let (m, n) = (&r.examples.0, &r.examples.1);
        let bad = failures.iter().filter(|f| f.rule == r.id).count();
        let verdict = if bad == 0 { "ok" } else { "FAIL" };
        println!(
            "{verdict:4} {:<34} {:<8} {:<8} group_by={:<10} examples={}+{} {}:{}",
            r.id,
            r.severity.as_str(),
            r.detect.kind(),
            if r.group_by.is_empty() {
                "-".to_string()
            } else {
                r.group_by.join(",")
            },
            m.len(),
            n.len(),
            r.origin.file,
            r.origin.line
        );
        if m.is_empty() || n.is_empty() {
            println!(
                "     warning: {} has no {} examples",
                r.id,
                if m.is_empty() { "match" } else { "no_match" }
            );
        }
    }
    for f in &failures {
        eprintln!(
            "{}:{}:1: rule {}: example {}: {}",
            f.origin.file,
            f.origin.line,
            f.rule,
            if f.expected_match {
                "should match but does not"
            } else {
                "should not match but does"
            },
            f.line
        );
    }
    if failures.is_empty() {
        println!(
            "{} rules, {} literals, all examples pass",
            set.rules.len(),
            sigwatch::matcher::Matcher::new(&set)
                .map(|m| m.literal_count())
                .unwrap_or(0)
        );
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The receivers, and the Alertmanager receiver (if any) whose re-send task
/// `run` starts.
/// The receivers, the Alertmanager receivers (whose re-send task `run`
/// starts), and the router when the configuration file has routes.
struct Receivers {
    all: Vec<Arc<dyn Receiver>>,
    alertmanagers: Vec<Arc<Alertmanager>>,
    router: Option<Router>,
    /// (primary, fallback) receiver indices.
    fallbacks: Vec<(usize, usize)>,
}

/// A receiver built from the configuration, and itself again if it is an
/// Alertmanager (whose re-send task `run` starts).
type Built = (Arc<dyn Receiver>, Option<Arc<Alertmanager>>);

fn from_spec(r: &ReceiverSpec, p: &PipelineArgs, timeout: Duration) -> Result<Built> {
    let secret = |s: &sigwatch::config::Secret| {
        s.read()
            .map_err(|e| anyhow::anyhow!("receiver {:?}: {e}", r.name))
    };
    if r.stdout.is_some() {
        return Ok((Arc::new(Stdout), None));
    }
    if let Some(w) = &r.webhook {
        let url = match (&w.url, &w.url_secret) {
            (Some(u), _) => u.clone(),
            (None, Some(s)) => secret(s)?,
            (None, None) => bail!("receiver {:?}: webhook needs url or url_secret", r.name),
        };
        let mut cfg = WebhookConfig::new(&url);
        cfg.timeout = timeout;
        cfg.headers = w
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        cfg.secret = w.secret.as_ref().map(secret).transpose()?;
        return Ok((Arc::new(Webhook::new(cfg)?), None));
    }
    if let Some(a) = &r.alertmanager {
        let mut cfg = AlertmanagerConfig::new(&a.urls);
        cfg.generator_url = p.external_url.clone();
        let am = Arc::new(Alertmanager::new(cfg)?);
        return Ok((am.clone(), Some(am)));
    }
    if let Some(sl) = &r.slack {
        return Ok((
            Arc::new(Slack::new(&secret(&sl.webhook_url)?, timeout)?),
            None,
        ));
    }
    if let Some(pd) = &r.pagerduty {
        return Ok((
            Arc::new(PagerDuty::new(
                &secret(&pd.routing_key)?,
                pd.url.as_deref(),
                timeout,
            )?),
            None,
        ));
    }
    bail!("receiver {:?} has no kind", r.name)
}

fn receivers(p: &PipelineArgs) -> Result<Receivers> {
    let timeout = Duration::from_nanos(p.webhook_timeout.ns().max(1) as u64);
    let mut all: Vec<Arc<dyn Receiver>> = Vec::new();
    let mut alertmanagers = Vec::new();
    let mut router = None;
    let mut fallbacks = Vec::new();
    if let Some(path) = &p.config {
        let c = sigwatch::config::load(path)?;
        if !c.receivers.is_empty() {
            let mut names = Vec::new();
            for r in &c.receivers {
                let (recv, am) = from_spec(r, p, timeout)?;
                all.push(recv);
                alertmanagers.extend(am);
                names.push(r.name.clone());
            }
            router = Some(
                Router::new(&names, &c.routes, &c.default)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
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
        all.push(Arc::new(Stdout));
    }
    if !p.alertmanager.is_empty() {
        let mut cfg = AlertmanagerConfig::new(&p.alertmanager);
        cfg.generator_url = p.external_url.clone();
        let r = Arc::new(Alertmanager::new(cfg)?);
        all.push(r.clone());
        alertmanagers.push(r);
    }
    if let Some(url) = &p.webhook {
        let mut cfg = WebhookConfig::new(url);
        cfg.timeout = timeout;
        for h in &p.webhook_headers {
            let (k, val) = h
                .split_once(':')
                .with_context(|| format!("--webhook-header {h:?}: write Name: value"))?;
            cfg.headers
                .push((k.trim().to_string(), val.trim().to_string()));
        }
        cfg.secret = read_secret("SIGWATCH_WEBHOOK_SECRET", &p.webhook_secret_file)?;
        all.push(Arc::new(Webhook::new(cfg)?));
    }
    if let Some(url) = read_secret("SIGWATCH_SLACK_WEBHOOK_URL", &p.slack_webhook_file)? {
        all.push(Arc::new(Slack::new(&url, timeout)?));
    }
    if let Some(key) = read_secret("SIGWATCH_PAGERDUTY_ROUTING_KEY", &p.pagerduty_key_file)? {
        all.push(Arc::new(PagerDuty::new(
            &key,
            p.pagerduty_url.as_deref(),
            timeout,
        )?));
    }
    if all.is_empty() {
        bail!("--no-stdout with no other receiver (webhook, Alertmanager, Slack, PagerDuty, --config receivers) leaves nowhere to send notifications");
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

fn dispatcher(
    r: Receivers,
    wait_when_full: bool,
    state_dir: Option<&std::path::Path>,
) -> (Dispatcher, Vec<Arc<Alertmanager>>) {
    let lanes = r
        .all
        .into_iter()
        .map(|recv| {
            let cfg = sigwatch::notify::LaneConfig {
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

fn build_engine(p: &PipelineArgs, live: bool) -> Result<Engine> {
    sigwatch::source::set_max_line_bytes(usize::try_from(p.max_line_bytes).unwrap_or(usize::MAX));
    let set = load_rules(&p.rules).map_err(|e| anyhow::anyhow!("invalid rules:\n{e}"))?;
    tracing::info!(rules = set.rules.len(), "Rules loaded.");
    Ok(Engine::new(
        set,
        Options {
            live,
            lateness_ns: p.lateness.ns(),
        },
    )?)
}

async fn deliver(d: &Dispatcher, out: &mut Vec<Notification>) {
    for n in out.drain(..) {
        d.dispatch(n).await;
    }
}

async fn finish(p: &PipelineArgs, engine: &Engine, d: Dispatcher) {
    let timeout = Duration::from_nanos(p.shutdown_timeout.ns().max(0) as u64);
    // Counters are read after the drain: a rejection during it counts.
    let stats = d.stats_reader();
    let left = d.shutdown(timeout).await;
    if !left.is_empty() {
        tracing::warn!(receivers = ?left, "Shutdown timeout reached with notifications still queued.");
    }
    let s = engine.stats();
    tracing::info!(
        lines = s.decode.lines,
        hits = s.hits,
        firing = s.alerts.firing,
        resolved = s.alerts.resolved,
        malformed = s.decode.malformed,
        late = s.late,
        "Input finished."
    );
    for (name, sent, failed, dropped) in stats() {
        if failed > 0 || dropped > 0 {
            tracing::warn!(receiver = %name, sent, failed, dropped, "Some notifications were not delivered.");
        }
    }
    if p.stats {
        eprintln!("{}", serde_json::to_string(&s).unwrap_or_default());
    }
}

/// How a replay ends: a table on stderr, one structured log event (with
/// `--log-format json`, so stderr stays one JSON object per line), or nothing.
#[derive(Clone, Copy, PartialEq)]
enum Summary {
    Table,
    Log,
    Off,
}

async fn replay(p: PipelineArgs, files: Vec<String>, show: Summary) -> Result<()> {
    let mut engine = build_engine(&p, false)?;
    let (d, _) = dispatcher(receivers(&p)?, true, None);
    let mut out = Vec::new();
    let input = sigwatch::source::replay::open(&files, sigwatch::decode::peek_time)?;
    let started = std::time::Instant::now();
    let bar =
        std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| progress_bar(input.total));
    let mut alerts: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut lines: u64 = 0;
    let mut bytes: u64 = 0;
    // Reading and the block scan run on their own thread, a few blocks
    // ahead of detection (bounded: the reader waits when they pile up).
    let slot = engine.scanner();
    let (mut rx, reader) = sigwatch::source::block::spawn(input.blocks, 4, move |b| {
        let hints = slot.get().scan(&b.data);
        (b, hints)
    })?;
    while let Some(item) = rx.recv().await {
        let (block, hints) = item?;
        lines += engine.push_block(&input.sources, &block, &hints, &mut out);
        bytes = block.consumed;
        if let Some(bar) = &bar {
            bar.set_position(bytes);
            let rate = lines as f64 / started.elapsed().as_secs_f64().max(1e-3);
            bar.set_message(format!(
                "{} lines {}/s",
                indicatif::HumanCount(lines),
                indicatif::HumanCount(rate as u64)
            ));
        }
        if !out.is_empty() {
            tally(&out, &mut alerts);
            deliver(&d, &mut out).await;
        }
    }
    // The reader logs lines it cut or repaired as it ends.
    reader
        .join()
        .map_err(|_| anyhow::anyhow!("the reader thread panicked"))?;
    engine.finish(&mut out);
    tally(&out, &mut alerts);
    deliver(&d, &mut out).await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    // Before finish(): with --stats the counters' JSON stays the last line.
    match show {
        Summary::Table => eprint!(
            "{}",
            summary(&engine, &alerts, lines, bytes, started.elapsed())
        ),
        Summary::Log => {
            let s = engine.stats();
            let rules: BTreeMap<String, (u64, u64, u64)> = engine
                .rule_stats()
                .into_iter()
                .map(|(id, hits, _)| {
                    let (f, r) = alerts.get(&id).copied().unwrap_or_default();
                    (id, (hits, f, r))
                })
                .collect();
            let span = engine.time_span();
            tracing::info!(
                lines,
                bytes,
                seconds = started.elapsed().as_secs_f64(),
                first = span.map(|(a, _)| sigwatch::decode::time::format_rfc3339(a)),
                last = span.map(|(_, b)| sigwatch::decode::time::format_rfc3339(b)),
                formats = %serde_json::to_string(&s.decode.formats).unwrap_or_default(),
                rules = %serde_json::to_string(&rules).unwrap_or_default(),
                "Replay summary (per rule: matches, fired, resolved)."
            );
        }
        Summary::Off => {}
    }
    finish(&p, &engine, d).await;
    Ok(())
}

fn progress_bar(total: Option<u64>) -> indicatif::ProgressBar {
    let (bar, template) = match total {
        Some(t) => (
            indicatif::ProgressBar::new(t),
            "[{wide_bar}] {percent:>3}% {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} {msg} ETA {eta}",
        ),
        None => (
            indicatif::ProgressBar::new_spinner(),
            "{spinner} {elapsed_precise} {binary_bytes} {binary_bytes_per_sec} {msg}",
        ),
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr_with_hz(4));
    bar
}

/// Counts first firing and resolved notifications per rule.
fn tally(out: &[Notification], alerts: &mut BTreeMap<String, (u64, u64)>) {
    for n in out {
        let e = alerts.entry(n.rule.clone()).or_default();
        match n.state {
            sigwatch::alert::AlertState::Firing if !n.repeat => e.0 += 1,
            sigwatch::alert::AlertState::Resolved => e.1 += 1,
            _ => {}
        }
    }
}

/// The end-of-replay table: throughput, time span, lines by format, drops
/// by reason, matches and alerts per rule.
fn summary(
    engine: &Engine,
    alerts: &BTreeMap<String, (u64, u64)>,
    lines: u64,
    bytes: u64,
    took: Duration,
) -> String {
    use std::fmt::Write;
    let s = engine.stats();
    let secs = took.as_secs_f64().max(1e-3);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\nreplayed   {} lines, {:.1} MiB in {:.2} s ({} lines/s)",
        indicatif::HumanCount(lines),
        bytes as f64 / (1024.0 * 1024.0),
        secs,
        indicatif::HumanCount((lines as f64 / secs) as u64)
    );
    match engine.time_span() {
        Some((a, b)) => {
            let mut span = String::new();
            let _ = sigwatch::rules::duration::format_duration(b - a, &mut span);
            let _ = writeln!(
                o,
                "time span  {} → {} ({span})",
                sigwatch::decode::time::format_rfc3339(a),
                sigwatch::decode::time::format_rfc3339(b)
            );
        }
        None => {
            let _ = writeln!(o, "time span  (no events)");
        }
    }
    let formats: Vec<String> = s
        .decode
        .formats
        .nonzero()
        .iter()
        .map(|(k, v)| format!("{k} {}", indicatif::HumanCount(*v)))
        .collect();
    let _ = writeln!(
        o,
        "formats    {}",
        if formats.is_empty() {
            "-".to_string()
        } else {
            formats.join(" · ")
        }
    );
    let d = &s.decode;
    let drops: Vec<String> = [
        ("truncated", sigwatch::stats::truncated_lines()),
        ("malformed", d.malformed),
        ("late", s.late),
        ("bad_time", d.bad_time),
        ("untimed", d.untimed),
        ("ungrouped", s.ungrouped),
        ("partial_overflow", d.partial_overflow),
        ("streams_evicted", d.streams_evicted),
        ("evicted_groups", s.evicted_groups),
    ]
    .iter()
    .filter(|(_, v)| *v > 0)
    .map(|(k, v)| format!("{k} {}", indicatif::HumanCount(*v)))
    .collect();
    let _ = writeln!(
        o,
        "counted    {}",
        if drops.is_empty() {
            "nothing dropped, cut or late".to_string()
        } else {
            drops.join(" · ")
        }
    );
    let rules = engine.rule_stats();
    let w = rules
        .iter()
        .map(|(id, _, _)| id.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        o,
        "\n{:<w$}  {:>9}  {:>6}  {:>8}",
        "rule", "matches", "fired", "resolved"
    );
    for (id, hits, _) in &rules {
        let (fired, resolved) = alerts.get(id).copied().unwrap_or_default();
        let _ = writeln!(
            o,
            "{id:<w$}  {:>9}  {fired:>6}  {resolved:>8}",
            indicatif::HumanCount(*hits).to_string()
        );
    }
    o
}

/// Starts one poller per query; returns the batch channel and the cursors.
fn start_loki(
    a: &SourceArgs,
    url: &str,
) -> Result<(tokio::sync::mpsc::Receiver<Batch>, BTreeMap<String, i64>)> {
    if a.queries.is_empty() {
        bail!("--loki needs at least one --query, e.g. --query '{{namespace=\"livekit\"}}'");
    }
    let cfg = loki_config(a, url)?;
    let mut cursors = match &a.state_dir {
        Some(d) => cursor::load(d).map_err(|e| anyhow::anyhow!("checkpoint: {e}"))?,
        None => BTreeMap::new(),
    };
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let fresh = wall_ns().saturating_sub(i64::try_from(cfg.since.as_nanos()).unwrap_or(i64::MAX));
    for q in &a.queries {
        if may_match_loki_itself(q) {
            tracing::warn!(query = %q, "This selector can match Loki's own logs, which record every query: sigwatch would read its own queries in a loop. Pin a label to your workload, e.g. {{namespace=\"livekit\"}}.");
        }
        let start = *cursors.entry(q.clone()).or_insert(fresh);
        tracing::info!(query = %q, start, resumed = start != fresh, "Loki query starting.");
        if a.loki_tail {
            tokio::spawn(run_tail(cfg.clone(), q.clone(), start, tx.clone()));
        } else {
            let poller = Poller::new(cfg.clone(), q, start)?;
            tokio::spawn(run_poller(poller, cfg.interval, tx.clone()));
        }
    }
    Ok((rx, cursors))
}

/// What the live loop consumes, whatever the source: blocks of lines
/// already scanned (off the detection thread), with the sources their runs
/// refer to.
enum Input {
    Stdin(Block, Hints),
    /// The input broke off (a read error, already the last item).
    Failed(String),
    Loki {
        query: String,
        cursor: i64,
        newest: Option<i64>,
        block: Block,
        hints: Hints,
        sources: Vec<Source>,
    },
    Files {
        offsets: BTreeMap<String, (String, u64)>,
        block: Block,
        hints: Hints,
        sources: Vec<Source>,
    },
}

/// A Loki batch as a block: one line per entry (entries may hold newlines),
/// each with its entry's time and source (stream labels and metadata).
fn loki_block(batch: &Batch) -> (Block, Vec<Source>) {
    let mut sources: Vec<Source> = Vec::new();
    let mut index: BTreeMap<(String, Vec<(String, String)>), usize> = BTreeMap::new();
    let mut refs = Vec::with_capacity(batch.entries.len());
    for e in &batch.entries {
        let mut labels = e.labels.clone();
        labels.extend(e.metadata.iter().cloned());
        let name = e.stream_name();
        let i = *index
            .entry((name.clone(), labels.clone()))
            .or_insert_with(|| {
                sources.push(Source { name, labels });
                sources.len() - 1
            });
        refs.push((i, e.line.as_str(), e.ts));
    }
    (Block::from_entries(refs), sources)
}

/// A round of the file tailer as a block, a run of lines per file.
fn files_block(batch: &file::FileBatch) -> (Block, Vec<Source>) {
    let sources = batch.files.iter().map(|f| f.source.clone()).collect();
    let lines = batch
        .files
        .iter()
        .enumerate()
        .flat_map(|(i, f)| f.lines.iter().map(move |l| (i, l.as_str())));
    let mut block = Block::from_lines(lines);
    block.arrival = Some(batch.arrival);
    (block, sources)
}

/// Fills what the command line left unset from the configuration file.
fn apply_config(a: &mut SourceArgs, config: &Option<PathBuf>) -> Result<()> {
    let Some(path) = config.clone() else {
        return Ok(());
    };
    let c = sigwatch::config::load(&path)?;
    if a.state_dir.is_none() {
        a.state_dir = c.state_dir;
    }
    if a.files.is_empty() {
        a.files = c.files;
    }
    if let Some(l) = c.loki {
        if a.loki.is_none() {
            a.loki = Some(l.url);
        }
        if a.queries.is_empty() {
            a.queries = l.queries;
        }
        a.loki_tenant = a.loki_tenant.take().or(l.tenant);
        a.loki_user = a.loki_user.take().or(l.user);
        a.loki_password_file = a.loki_password_file.take().or(l.password_file);
        a.loki_token_file = a.loki_token_file.take().or(l.token_file);
        a.loki_ca_file = a.loki_ca_file.take().or(l.ca_file);
        a.loki_tail = a.loki_tail || l.tail;
        a.loki_limit = a.loki_limit.or(l.limit);
        a.loki_lag = a.loki_lag.or(l.lag);
        a.loki_interval = a.loki_interval.or(l.interval);
        a.since = a.since.or(l.since);
    }
    Ok(())
}

async fn run(p: PipelineArgs, mut a: SourceArgs) -> Result<()> {
    apply_config(&mut a, &p.config)?;
    // Before anything else: a SIGHUP must never kill us (its default action).
    let reloads = reload_triggers(&p.rules, a.watch_rules);
    let mut engine = build_engine(&p, true)?;
    if let Some(dir) = &a.state_dir {
        let state = load_state(dir)?;
        let adopted = engine.restore(state);
        if adopted > 0 {
            tracing::info!(
                adopted,
                "Alerts firing before the restart adopted; they will not page again."
            );
        }
    }
    let (d, ams) = dispatcher(receivers(&p)?, false, a.state_dir.as_deref());
    // Alertmanager forgets alerts not re-sent: keep them alive.
    let _resenders: Vec<_> = ams.iter().map(|a| a.spawn_resender()).collect();
    let (tx, rx) = tokio::sync::mpsc::channel::<Input>(8);
    let mut cursors = BTreeMap::new();
    // Each source feeds the one loop through a bounded channel; blocks are
    // scanned on the way (off the detection thread).
    let slot = engine.scanner();
    if let Some(url) = &a.loki {
        let (mut lrx, c) = start_loki(&a, url)?;
        cursors = c;
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(b) = lrx.recv().await {
                let (block, sources) = loki_block(&b);
                let hints = slot.get().scan(&block.data);
                let input = Input::Loki {
                    newest: b.entries.iter().map(|e| e.ts).max(),
                    query: b.query,
                    cursor: b.cursor,
                    block,
                    hints,
                    sources,
                };
                if tx.send(input).await.is_err() {
                    break;
                }
            }
        });
    } else if !a.files.is_empty() {
        let resume = match &a.state_dir {
            Some(dir) => file::load_checkpoint(dir)?,
            None => Default::default(),
        };
        let mut frx = file::spawn(
            file::Tailer::new(&a.files, resume)?,
            Duration::from_millis(250),
        );
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(b) = frx.recv().await {
                let (block, sources) = files_block(&b);
                let hints = slot.get().scan(&block.data);
                let input = Input::Files {
                    offsets: b.offsets,
                    block,
                    hints,
                    sources,
                };
                if tx.send(input).await.is_err() {
                    break;
                }
            }
        });
    } else {
        // Each read's complete lines at once, so a lone line on an idle pipe
        // is not held back; the scan runs on the reader's thread.
        let stdin = ReadBlocks::new("stdin", std::io::stdin(), true);
        block::spawn_into(stdin, tx.clone(), move |item| match item {
            Ok(b) => {
                let hints = slot.get().scan(&b.data);
                Input::Stdin(b, hints)
            }
            Err(e) => Input::Failed(e.to_string()),
        })?;
    }
    drop(tx);
    let telemetry = Arc::new(Telemetry::new());
    telemetry.set_rules_loaded();
    if a.listen != "none" {
        let listener = tokio::net::TcpListener::bind(&a.listen)
            .await
            .with_context(|| format!("cannot listen on {}", a.listen))?;
        tracing::info!(addr = %a.listen, "Serving /healthz, /readyz, /metrics.");
        let t = telemetry.clone();
        tokio::spawn(async move {
            if let Err(e) = sigwatch::server::serve(listener, t).await {
                tracing::error!(error = %e, "The health and metrics server stopped.");
            }
        });
    }
    match (&a.loki, a.files.is_empty()) {
        (Some(url), _) => telemetry.set_source(
            false,
            &format!("loki {url}: waiting for the first successful poll"),
        ),
        (None, false) => telemetry.set_source(true, &format!("files {}", a.files.join(" "))),
        (None, true) => telemetry.set_source(true, "stdin"),
    }
    drive(p, a, engine, d, (rx, reloads), cursors, telemetry).await
}

/// Why the rules are reloaded.
type ReloadRx = tokio::sync::mpsc::Receiver<&'static str>;

/// SIGHUP and, with `--watch-rules`, changes of the rule files (compared by
/// content every 2 s, so a ConfigMap's symlink swap counts too) request a
/// reload through a small channel; requests while one is queued coalesce.
fn reload_triggers(rules: &RulesArgs, watch: bool) -> ReloadRx {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::hangup()) {
            Ok(mut hup) => {
                let tx = tx.clone();
                tokio::spawn(async move {
                    while hup.recv().await.is_some() {
                        let _ = tx.try_send("SIGHUP");
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "Cannot listen for SIGHUP; reload with --watch-rules.")
            }
        }
    }
    if watch {
        if rules.rules.is_empty() {
            tracing::warn!("--watch-rules without --rules: the built-in pack never changes.");
        } else {
            let paths = rules.rules.clone();
            tokio::spawn(async move {
                let digest = |paths: Vec<PathBuf>| {
                    tokio::task::spawn_blocking(move || {
                        use std::hash::{Hash, Hasher};
                        let mut h = std::collections::hash_map::DefaultHasher::new();
                        match rules::read_paths(&paths) {
                            Ok(files) => files.hash(&mut h),
                            Err(e) => e.to_string().hash(&mut h),
                        }
                        h.finish()
                    })
                };
                let mut last = digest(paths.clone()).await.ok();
                let mut every = tokio::time::interval(Duration::from_secs(2));
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    every.tick().await;
                    let now = digest(paths.clone()).await.ok();
                    if now.is_some() && now != last {
                        last = now;
                        if tx.send("rule files changed").await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    }
    rx
}

/// Reloads the rules into the running engine; an invalid set is logged and
/// counted and the running set stays.
fn reload(
    p: &PipelineArgs,
    why: &str,
    engine: &mut Engine,
    telemetry: &Telemetry,
    out: &mut Vec<Notification>,
) {
    let result = load_rules(&p.rules)
        .map_err(|e| e.to_string())
        .and_then(|set| engine.reload(set, out).map_err(|e| e.to_string()));
    match result {
        Ok(s) => {
            tracing::info!(
                trigger = why,
                kept = s.kept,
                changed = s.changed,
                added = s.added,
                removed = s.removed,
                resolved = s.resolved,
                "Rules reloaded."
            );
            telemetry.reloaded(None);
        }
        Err(e) => {
            tracing::error!(trigger = why, error = %e, "Rule reload rejected; the previous rules keep running.");
            telemetry.reloaded(Some(&e));
        }
    }
}

/// The live loop: feeds input to the engine, advances event time with the
/// wall clock while input is idle, checkpoints after processing, stops on
/// end of input or a signal.
async fn drive(
    p: PipelineArgs,
    a: SourceArgs,
    mut engine: Engine,
    d: Dispatcher,
    (mut rx, mut reloads): (tokio::sync::mpsc::Receiver<Input>, ReloadRx),
    mut cursors: BTreeMap<String, i64>,
    telemetry: Arc<Telemetry>,
) -> Result<()> {
    let stdin = Source::named("stdin");
    let mut out = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // (newest event time, wall time when it was seen): idle time advances event time.
    let mut clock: Option<(i64, i64)> = None;
    let mut newest_entry: Option<i64> = None;
    let mut saved = sigwatch::alert::SavedState::default();
    let mut shutdown = Box::pin(shutdown_signal());
    loop {
        tokio::select! {
            input = rx.recv() => {
                let Some(input) = input else {
                    // End of input (stdin closed): flush and stop.
                    engine.finish(&mut out);
                    deliver(&d, &mut out).await;
                    break;
                };
                let arrival = match input {
                    Input::Stdin(block, hints) => {
                        engine.push_block(std::slice::from_ref(&stdin), &block, &hints, &mut out);
                        block.arrival.unwrap_or_else(wall_ns)
                    }
                    Input::Failed(e) => {
                        tracing::error!(error = %e, "Reading the input failed; stopping as at its end.");
                        wall_ns()
                    }
                    Input::Loki { query, cursor: at, newest, block, hints, sources } => {
                        if newest_entry.is_none() {
                            telemetry.set_source(true, &format!("loki: query {query} answering"));
                        }
                        engine.push_block(&sources, &block, &hints, &mut out);
                        if let Some(n) = newest {
                            newest_entry = Some(newest_entry.map_or(n, |m| m.max(n)));
                        }
                        // The cursor moves only after its entries were processed.
                        cursors.insert(query, at);
                        if let Some(dir) = &a.state_dir {
                            if let Err(e) = cursor::save(dir, &cursors) {
                                tracing::error!(error = %e, "Cannot save the Loki checkpoint.");
                            }
                        }
                        wall_ns()
                    }
                    Input::Files { offsets, block, hints, sources } => {
                        engine.push_block(&sources, &block, &hints, &mut out);
                        // Offsets move only after their lines were processed.
                        if let Some(dir) = &a.state_dir {
                            if let Err(e) = file::save_checkpoint(dir, &offsets) {
                                tracing::error!(error = %e, "Cannot save the file checkpoint.");
                            }
                        }
                        block.arrival.unwrap_or_else(wall_ns)
                    }
                };
                if let Some(w) = engine.watermark() {
                    let newest = w + p.lateness.ns();
                    if clock.is_none_or(|(e, _)| newest > e) {
                        clock = Some((newest, arrival));
                    }
                }
            },
            Some(why) = reloads.recv() => {
                reload(&p, why, &mut engine, &telemetry, &mut out);
            },
            _ = tick.tick() => {
                if let Some((e, w)) = clock {
                    engine.advance_to(e + (wall_ns() - w).max(0), &mut out);
                }
                telemetry.update(&Snapshot {
                    stats: engine.stats(),
                    rules: engine.rule_stats(),
                    firing: engine.firing() as u64,
                    receivers: d.snapshots(),
                    loki_lag_seconds: newest_entry.map(|n| (wall_ns() - n) as f64 / 1e9),
                    truncated_lines: sigwatch::stats::truncated_lines(),
                });
            },
            _ = &mut shutdown => {
                tracing::info!(deadline = %p.shutdown_timeout, "Signal received; draining deliveries (a second signal exits at once).");
                // A second SIGTERM/SIGINT means now: never hold the operator hostage.
                tokio::spawn(async {
                    shutdown_signal().await;
                    eprintln!("sigwatch: second signal; exiting now");
                    std::process::exit(130);
                });
                break;
            }
        }
        deliver(&d, &mut out).await;
        telemetry.beat();
        // After every step, so an alert delivered just before a kill -9 is
        // already saved (cheap: written only when it changed).
        if let Some(dir) = &a.state_dir {
            save_state(dir, &engine, &mut saved);
        }
    }
    if let Some(n) = newest_entry {
        tracing::info!(
            consumer_lag_ms = (wall_ns() - n) / 1_000_000,
            "Loki consumer stopped."
        );
    }
    if let Some(dir) = &a.state_dir {
        save_state(dir, &engine, &mut saved);
    }
    finish(&p, &engine, d).await;
    Ok(())
}

/// Reads `state-dir/state.json` (missing: a fresh start).
fn load_state(dir: &std::path::Path) -> Result<sigwatch::alert::SavedState> {
    let p = dir.join("state.json");
    match std::fs::read_to_string(&p) {
        Ok(t) => serde_json::from_str(&t)
            .with_context(|| format!("{} is corrupt; move it away to start fresh", p.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Default::default()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
    }
}

/// Saves firing alerts and sticky values when they changed, atomically.
fn save_state(dir: &std::path::Path, engine: &Engine, last: &mut sigwatch::alert::SavedState) {
    let now = engine.saved_state();
    if now == *last {
        return;
    }
    let p = dir.join("state.json");
    let tmp = dir.join("state.json.tmp");
    let res = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, serde_json::to_vec(&now).unwrap_or_default()))
        .and_then(|()| std::fs::rename(&tmp, &p));
    match res {
        Ok(()) => *last = now,
        Err(e) => tracing::error!(path = %p.display(), error = %e, "Cannot save the alert state."),
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = tokio::signal::ctrl_c() => {},
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
