//! The `sigwatch` command line: flags and subcommands, logging set up,
//! then a call into [`sigwatch::app`], where the pipeline is assembled.

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use sigwatch::app::replay::Summary;
use sigwatch::app::sources::SourceOptions;
use sigwatch::app::{commands, live, mine, replay, PipelineOptions, RulesOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "sigwatch",
    version,
    about = "Recognise incident log signatures per node and cluster-wide, and page on-call."
)]
struct Cli {
    /// Log level for sigwatch's own logs on stderr.
    #[arg(
        long,
        global = true,
        default_value = "info",
        env = "SIGWATCH_LOG",
        value_parser = ["error", "warn", "info", "debug", "trace"]
    )]
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
    /// Watch live logs (stdin, Loki or files); notifications go to stdout and the receivers.
    #[command(
        after_help = "Examples:\n  kubectl logs -f -l app=livekit --prefix --max-log-requests 50 | sigwatch run\n  sigwatch run --loki http://loki:3100 --query '{namespace=\"livekit\"}' --state-dir /var/lib/sigwatch --alertmanager http://alertmanager:9093\n  sigwatch run --file '/var/log/pods/*/*/*.log' --rules /etc/sigwatch/rules --watch-rules\n\nSIGHUP reloads the rules; SIGTERM drains deliveries for --shutdown-timeout, a second signal exits at once.\n/healthz, /readyz and /metrics are served on --listen (127.0.0.1:9464) with the status page, and alone on --listen-metrics; the status page, /api/status and /report need a credential (--web-token-file) on any address other hosts can reach.\n\nExit status: 0 every notification delivered; 2 a setup error; 3 some notification not delivered."
    )]
    Run(Box<RunArgs>),
    /// Replay log files in event time; the same input always gives the same output.
    #[command(
        after_help = "Examples:\n  sigwatch replay node-a.log node-b.log > alerts.ndjson\n  kubectl logs -l app=livekit --prefix --since=24h | sigwatch replay -\n  sigwatch replay incident.log --group-incidents --report incident.html\n  sigwatch replay --loki http://loki:3100 --query '{namespace=\"livekit\"}' --from 7d --rules new.yaml\n\nOn a terminal a progress bar shows bytes and lines per second (and the ETA for\nfiles); a summary table ends every replay on stderr (--no-summary to omit it).\nA replay notifies only the receivers its own flags name (never the environment's).\n\nExit status: 0 every notification delivered; 2 a setup error; 3 some notification not delivered."
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
        after_help = "Examples:\n  sigwatch explain '{\"level\":\"error\",\"msg\":\"failed to mark as draining\",\"nodeID\":\"ND_1\"}'\n  kubectl logs --prefix pod/livekit-0 | tail -5 | sigwatch explain --rule livekit.drain_stuck\n  sigwatch explain --json < app.log | jq -r 'select(.level == null) | .line' | head\n\nLines read from stdin share stream context (sticky nodeID, partial lines), as in the pipeline."
    )]
    Explain(ExplainArgs),
    /// Build a novelty baseline: mine the templates of archived logs into a
    /// file that `run --templates` (or --state-dir) starts from.
    #[command(
        after_help = "Examples:\n  kubectl logs -l app=livekit --prefix --since=168h | sigwatch learn - --out templates.json\n  sigwatch learn /var/log/archive/*.log --out /var/lib/sigwatch/templates.json\n\nOnly the lines novelty mines are learned (its levels, default warn and error;\nits ignore list), with the rules' settings (--rules)."
    )]
    Learn(LearnArgs),
    /// Print the log templates of some logs, most frequent first, per level:
    /// what the logs say, with the variables masked.
    #[command(
        after_help = "Examples:\n  sigwatch templates incident.log --level warn\n  kubectl logs deploy/api --since=1h | sigwatch templates - --top 50\n  sigwatch templates a.log b.log --json | jq -s 'sort_by(-.count)[:5]'"
    )]
    Templates(TemplatesArgs),
    /// Suggest rules from an incident: what its logs have that a baseline's
    /// have not (new templates, sharp rises, one node while its peers are
    /// quiet, every node at once), written as rules with examples and tests,
    /// each checked to fire on the incident and not on the baseline.
    #[command(
        after_help = "Examples:\n  sigwatch suggest --baseline last-week.log --incident outage.log --out rules/outage.yaml --tests rules/tests\n  sigwatch suggest --baseline quiet/*.log --incident incident/*.log --from 2026-11-25T14:00:00Z --to 2026-11-25T15:00:00Z --out new.yaml\n\nThen: sigwatch check --rules new.yaml; sigwatch replay --rules new.yaml --loki URL --query Q --from 7d"
    )]
    Suggest(SuggestArgs),
    /// Print the Prometheus rules that evaluate the cluster-wide (spread,
    /// share) rules over the counters of every shard (`run --shard I/N`).
    #[command(
        name = "prometheus-rules",
        after_help = "Examples:
  sigwatch prometheus-rules > deploy/prometheus-rules.yaml
  sigwatch prometheus-rules --rules my-rules/ | promtool check rules /dev/stdin

See docs/scaling.md."
    )]
    PrometheusRules(PrometheusRulesArgs),
    /// Import alerting rules written for another system as sigwatch rules.
    #[command(subcommand)]
    Import(ImportCmd),
    /// Snooze pages on a live instance: add, list or expire silences through
    /// its /api/silences (behind the status page's credential). Silenced
    /// alerts are still recorded and counted, never sent.
    #[command(
        after_help = "Examples:\n  sigwatch silence add --url http://127.0.0.1:9464 --rule novel --match group=template-42 --for 24h --comment 'deploy 1.8 adds this line'\n  sigwatch silence add --url https://sigwatch:9464 --token-file token --match group=ND_7 --for 2h --comment 'node drained for maintenance'\n  sigwatch silence list --url http://127.0.0.1:9464\n  sigwatch silence expire --url http://127.0.0.1:9464 s-3\n\nThe token also comes from SIGWATCH_WEB_TOKEN."
    )]
    Silence(SilenceArgs),
    /// Print the bcrypt hash of a password read from stdin, for
    /// web.basic_auth_users in sigwatch.yaml (the password never goes on
    /// the command line).
    #[command(
        after_help = "Examples:\n  read -rs PW; printf '%s' \"$PW\" | sigwatch hash-password\n  sigwatch hash-password < password.txt\n\nThe same hash as `htpasswd -nbBC 10 USER PASSWORD` prints after the colon."
    )]
    HashPassword(HashPasswordArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or
    /// powershell.
    #[command(
        after_help = "Examples:\n  sigwatch completions bash > /etc/bash_completion.d/sigwatch\n  sigwatch completions zsh > \"${fpath[1]}/_sigwatch\"\n  sigwatch completions fish > ~/.config/fish/completions/sigwatch.fish"
    )]
    Completions(CompletionsArgs),
    /// Print the man page (roff), or write one per command into a directory.
    #[command(
        after_help = "Examples:\n  sigwatch man | man -l -\n  sigwatch man --out /usr/local/share/man/man1"
    )]
    Man(ManArgs),
}

#[derive(Args)]
struct SilenceArgs {
    #[command(subcommand)]
    action: SilenceCmd,
    /// The instance's address (its --listen).
    #[arg(long, global = true, default_value = "http://127.0.0.1:9464")]
    url: String,
    /// A file holding a bearer token of the instance's --web-token-file
    /// (else SIGWATCH_WEB_TOKEN).
    #[arg(long, global = true)]
    token_file: Option<std::path::PathBuf>,
    /// Print the API's JSON.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand)]
enum SilenceCmd {
    /// Silence the alerts that match, from now for a while.
    Add {
        /// The rule (the alertname label).
        #[arg(long)]
        rule: Option<String>,
        /// A label that must equal a value (group=ND_7, severity=warning);
        /// repeatable, all must hold.
        #[arg(long = "match", value_name = "LABEL=VALUE")]
        matchers: Vec<String>,
        /// How long (24h, 90m).
        #[arg(long = "for", value_name = "DURATION")]
        duration: String,
        /// Why (shown to the next person on call).
        #[arg(long)]
        comment: String,
        /// Who (default: $USER).
        #[arg(long)]
        author: Option<String>,
    },
    /// List the silences kept (active, pending, recently ended).
    List,
    /// End a silence now.
    Expire {
        /// Its id (s-N).
        id: String,
    },
}

#[derive(Args)]
struct HashPasswordArgs {
    /// bcrypt's cost (each step doubles the work of a check and of a guess).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(4..=16))]
    cost: u32,
}

#[derive(Args)]
struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

#[derive(Args)]
struct ManArgs {
    /// Write sigwatch.1 and sigwatch-COMMAND.1 into this directory instead
    /// of printing sigwatch.1.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Args)]
struct SuggestArgs {
    #[command(flatten)]
    rules: RulesOptions,
    #[command(flatten)]
    o: sigwatch::app::suggest::SuggestOptions,
}

#[derive(Subcommand)]
enum ImportCmd {
    /// Translate Loki ruler files (groups of LogQL alerting rules) into a
    /// sigwatch rule file, exactly or not at all: one line per rule says
    /// `translated`, or `skipped:` with the reason and the part of the
    /// expression it could not carry.
    #[command(
        name = "loki-rules",
        after_help = "Examples:\n  sigwatch import loki-rules /etc/loki/rules/fake/ --out rules/from-loki.yaml --tests rules/tests/from-loki\n  sigwatch import loki-rules livekit-alerts.yaml --out imported.yaml --allow-partial\n\nThen: sigwatch check --rules imported.yaml; sigwatch test --rules imported.yaml rules/tests/from-loki;\nsigwatch replay --loki URL --query Q --from 7d --rules imported.yaml\n\nExit status: 0 every alerting rule translated; 1 some skipped (unless --allow-partial); 2 files unreadable."
    )]
    LokiRules(LokiRulesArgs),
}

#[derive(Args)]
struct LokiRulesArgs {
    /// Ruler files, or directories of them (the ruler's tenant/namespace.yaml layout too).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The sigwatch rule file to write.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Also write a rule test per translated rule into this directory,
    /// built from the rule's own filter strings.
    #[arg(long, value_name = "DIR")]
    tests: Option<PathBuf>,
    /// Exit 0 even when some alerting rules could not be translated.
    #[arg(long)]
    allow_partial: bool,
}

#[derive(Args)]
struct PrometheusRulesArgs {
    #[command(flatten)]
    rules: RulesOptions,
}

#[derive(Args)]
struct LearnArgs {
    #[command(flatten)]
    rules: RulesOptions,
    /// Where to write the templates.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Log files, merged by event time; `-` is stdin.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<String>,
}

#[derive(Args)]
struct TemplatesArgs {
    #[command(flatten)]
    rules: RulesOptions,
    #[command(flatten)]
    o: mine::TemplatesOptions,
    /// Log files, merged by event time; `-` is stdin.
    #[arg(required_unless_present = "known", value_name = "FILE")]
    files: Vec<String>,
    /// Mark these novelty templates (42 or template-42) known for good on
    /// the live instance at --url: no longer new, never new again, and
    /// added to the baseline file it was started with (--templates).
    #[arg(long, value_name = "ID", num_args = 1.., conflicts_with = "files")]
    known: Vec<String>,
    /// With --known: the instance's address (its --listen).
    #[arg(long, default_value = "http://127.0.0.1:9464", requires = "known")]
    url: String,
    /// With --known: a file holding a bearer token of the instance's
    /// --web-token-file (else SIGWATCH_WEB_TOKEN).
    #[arg(long, requires = "known")]
    token_file: Option<std::path::PathBuf>,
}

#[derive(Args)]
struct ExplainArgs {
    #[command(flatten)]
    rules: RulesOptions,
    /// Show this rule's checks even when none of its literals occur (repeatable).
    #[arg(long = "rule", value_name = "ID")]
    only: Vec<String>,
    /// One JSON object per line instead of the text (wrapper, format,
    /// time and its source, level, message, fields, keys, rules).
    #[arg(long)]
    json: bool,
    /// Lines to explain; none: read lines from stdin.
    #[arg(value_name = "LINE")]
    lines: Vec<String>,
}

#[derive(Args)]
struct TestArgs {
    #[command(flatten)]
    rules: RulesOptions,
    /// Test files, or directories of them (*.yaml, *.yml).
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    rules: RulesOptions,
    /// Print the automaton's literals, one per line, instead of the summary
    /// (for `rg -F -f` / `grep -F -f` comparisons).
    #[arg(long)]
    literals: bool,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    p: PipelineOptions,
    #[command(flatten)]
    source: SourceOptions,
}

#[derive(Args)]
struct ReplayArgs {
    #[command(flatten)]
    p: PipelineOptions,
    /// Files to replay, merged by event time; `-` is stdin.
    #[arg(
        required_unless_present = "loki",
        conflicts_with = "loki",
        value_name = "FILE"
    )]
    files: Vec<String>,
    #[command(flatten)]
    loki: sigwatch::app::sources::LokiRangeOptions,
    /// Do not print the summary table on stderr at the end.
    #[arg(long)]
    no_summary: bool,
    /// Write a self-contained HTML timeline: one lane per node and a
    /// cluster lane, signature hits, alert bars, incidents outlined, sample
    /// lines on click.
    #[arg(long, value_name = "FILE")]
    report: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::new(format!("sigwatch={}", cli.log_level));
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
        Cmd::Completions(a) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(a.shell, &mut cmd, "sigwatch", &mut std::io::stdout());
            return ExitCode::SUCCESS;
        }
        Cmd::Man(a) => man(a.out.as_deref()).map(|()| 0),
        Cmd::Check(a) => return ExitCode::from(commands::check(&a.rules, a.literals)),
        Cmd::PrometheusRules(a) => return ExitCode::from(commands::prometheus_rules(&a.rules)),
        Cmd::Import(ImportCmd::LokiRules(a)) => {
            return ExitCode::from(commands::import_loki_rules(
                &a.files,
                &a.out,
                a.tests.as_deref(),
                a.allow_partial,
            ))
        }
        Cmd::HashPassword(a) => return ExitCode::from(commands::hash_password(a.cost)),
        Cmd::Test(a) => return ExitCode::from(commands::test(&a.rules, &a.paths)),
        Cmd::Explain(a) => {
            return ExitCode::from(commands::explain(&a.rules, &a.only, &a.lines, a.json))
        }
        Cmd::Learn(a) => mine::learn(&a.rules, &a.files, &a.out)
            .map(|()| 0)
            .map_err(Into::into),
        Cmd::Suggest(a) => sigwatch::app::suggest::suggest(&a.rules, &a.o)
            .map(|report| {
                print!("{report}");
                0
            })
            .map_err(Into::into),
        Cmd::Templates(a) if !a.known.is_empty() => known(a),
        Cmd::Templates(a) => {
            mine::templates(&a.rules, &a.files, &a.o, &mut std::io::stdout().lock())
                .map(|()| 0)
                .map_err(Into::into)
        }
        Cmd::Run(a) => runtime().and_then(|rt| Ok(rt.block_on(live::run(a.p, a.source))?)),
        Cmd::Silence(a) => silence(a),
        Cmd::Replay(a) => {
            let summary = match (a.no_summary, cli.log_format) {
                (true, _) => Summary::Off,
                (false, LogFormat::Json) => Summary::Log,
                (false, LogFormat::Text) => Summary::Table,
            };
            let a = *a;
            let from = match a.loki.loki {
                Some(_) => replay::ReplayFrom::Loki(Box::new(a.loki)),
                None => replay::ReplayFrom::Files(a.files),
            };
            let (p, report) = (a.p, a.report);
            runtime().and_then(|rt| Ok(rt.block_on(replay::replay(p, from, summary, report))?))
        }
    };
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(undelivered) => {
            eprintln!(
                "sigwatch: {undelivered} notification(s) were not delivered (see the log above)"
            );
            ExitCode::from(EXIT_UNDELIVERED)
        }
        Err(e) => {
            eprintln!("sigwatch: {}", chain(&e));
            ExitCode::from(2)
        }
    }
}

/// Exit status of `run` and `replay` when notifications were rejected or
/// dropped: the work was done, but someone may not have been told. (1 is
/// findings — failed rule tests, invalid rules; 2 a setup error.)
const EXIT_UNDELIVERED: u8 = 3;

/// `sigwatch templates --known ID…`: marks each template known on the
/// instance; prints each answer.
fn known(a: TemplatesArgs) -> Result<u64> {
    let instance = sigwatch::app::silence::Instance {
        url: a.url,
        token: web_token(a.token_file.as_deref())?,
    };
    let rt = runtime()?;
    for id in &a.known {
        let out = rt.block_on(sigwatch::app::silence::know_template(&instance, id))?;
        print!("{out}");
    }
    Ok(0)
}

/// The bearer token of a live instance: from `file`, else SIGWATCH_WEB_TOKEN.
fn web_token(file: Option<&std::path::Path>) -> Result<Option<String>> {
    Ok(match file {
        Some(f) => Some(
            std::fs::read_to_string(f)
                .with_context(|| format!("cannot read {}", f.display()))?
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_string)
                .with_context(|| format!("{} holds no token", f.display()))?,
        ),
        None => std::env::var("SIGWATCH_WEB_TOKEN")
            .ok()
            .filter(|t| !t.is_empty()),
    })
}

/// `sigwatch silence …`: prints the instance's answer.
fn silence(a: SilenceArgs) -> Result<u64> {
    use sigwatch::app::silence::{Instance, SilenceAction};
    let token = web_token(a.token_file.as_deref())?;
    let action = match a.action {
        SilenceCmd::Add {
            rule,
            matchers,
            duration,
            comment,
            author,
        } => {
            let mut m = std::collections::BTreeMap::new();
            for kv in matchers {
                let (k, v) = kv
                    .split_once('=')
                    .with_context(|| format!("--match {kv}: give LABEL=VALUE"))?;
                m.insert(k.trim().to_string(), v.trim().to_string());
            }
            SilenceAction::Add(sigwatch::silence::NewSilence {
                matchers: m,
                rule,
                duration: Some(duration),
                created_by: author
                    .or_else(|| std::env::var("USER").ok())
                    .unwrap_or_default(),
                comment,
            })
        }
        SilenceCmd::List => SilenceAction::List,
        SilenceCmd::Expire { id } => SilenceAction::Expire(id),
    };
    let instance = Instance { url: a.url, token };
    let out = runtime()?.block_on(sigwatch::app::silence::silence(&instance, action, a.json))?;
    print!("{out}");
    Ok(0)
}

/// The man pages: sigwatch(1) on stdout, or every page into `dir`.
fn man(dir: Option<&std::path::Path>) -> Result<()> {
    let cmd = <Cli as clap::CommandFactory>::command();
    let Some(dir) = dir else {
        let mut out = std::io::stdout().lock();
        return clap_mangen::Man::new(cmd)
            .render(&mut out)
            .context("cannot write the man page");
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    clap_mangen::generate_to(cmd, dir)
        .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
    Ok(())
}

/// An error and its causes, each said once.
fn chain(e: &anyhow::Error) -> String {
    sigwatch::cause::chain(e.as_ref())
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the runtime")
}
