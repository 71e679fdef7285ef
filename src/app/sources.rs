//! Live inputs: stdin, followed files and Grafana Loki, each turned into
//! scanned blocks for the one live loop.

use super::{read_secret, AppError};
use crate::clock::wall_ns;
use crate::duration::Dur;
use crate::scan::{Hints, ScannerSlot};
use crate::source::block::{self, Block, ReadBlocks};
use crate::source::file;
use crate::source::loki::poll::Poller;
use crate::source::loki::sharded;
use crate::source::loki::tail::run_tail;
use crate::source::loki::{may_match_loki_itself, run_poller, Auth, Batch, Health, LokiConfig};
use crate::source::shard::Shard;
use crate::source::Source;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

fn parse_dur(s: &str) -> Result<Dur, String> {
    Dur::parse(s)
}

fn parse_checkpoint_interval(s: &str) -> Result<Dur, String> {
    let d = Dur::parse(s)?;
    if d.ns() < 100_000_000 || d.ns() > 600_000_000_000 {
        return Err("between 100ms and 10m".into());
    }
    Ok(d)
}

/// Who sigwatch is to Loki: tenant and credentials, for `run` and
/// `replay --loki` alike. Secrets come from the environment or files,
/// never from the command line (where `ps` shows them).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LokiAccess {
    /// Tenant sent as X-Scope-OrgID.
    #[arg(help_heading = "Loki", long, env = "SIGWATCH_LOKI_TENANT")]
    pub loki_tenant: Option<String>,
    /// Basic-auth user; the password comes from SIGWATCH_LOKI_PASSWORD or --loki-password-file.
    #[arg(help_heading = "Loki", long, env = "SIGWATCH_LOKI_USER")]
    pub loki_user: Option<String>,
    /// File holding the basic-auth password.
    #[arg(help_heading = "Loki", long, value_name = "FILE")]
    pub loki_password_file: Option<PathBuf>,
    /// File holding a bearer token (or env SIGWATCH_LOKI_TOKEN).
    #[arg(help_heading = "Loki", long, value_name = "FILE")]
    pub loki_token_file: Option<PathBuf>,
    /// Extra CA certificate (PEM) to trust for Loki's TLS.
    #[arg(help_heading = "Loki", long, value_name = "FILE")]
    pub loki_ca_file: Option<PathBuf>,
}

/// Where live lines come from: stdin (default), Grafana Loki, or files.
/// Loki secrets come from the
/// environment or files, never from the command line (where `ps` shows them).
#[derive(clap::Args, Debug, Clone)]
pub struct SourceOptions {
    /// Consume Grafana Loki at this base URL instead of stdin.
    #[arg(
        help_heading = "Loki",
        long,
        value_name = "URL",
        env = "SIGWATCH_LOKI_URL"
    )]
    pub loki: Option<String>,
    /// LogQL log query, e.g. '{namespace="livekit"}' (repeatable: each runs as its own stream).
    #[arg(help_heading = "Loki", long = "query", value_name = "LOGQL")]
    pub queries: Vec<String>,
    #[command(flatten)]
    /// Who sigwatch is to Loki.
    pub access: LokiAccess,
    /// Follow Loki's websocket tail instead of polling (lower latency; every
    /// reconnect and dropped-entries report is backfilled from query_range).
    #[arg(help_heading = "Loki", long)]
    pub loki_tail: bool,
    /// Entries per query_range page (Loki's cap is 5000) [default: 1000].
    #[arg(help_heading = "Loki", long)]
    pub loki_limit: Option<u32>,
    /// Query up to now minus this, so lines still being shipped are not skipped [default: 10s].
    #[arg(help_heading = "Loki", long, value_parser = parse_dur)]
    pub loki_lag: Option<Dur>,
    /// Polling period [default: 2s].
    #[arg(help_heading = "Loki", long, value_parser = parse_dur)]
    pub loki_interval: Option<Dur>,
    /// Where a fresh start (no checkpoint) begins, back from now [default: 15m].
    #[arg(help_heading = "Loki", long, value_parser = parse_dur)]
    pub since: Option<Dur>,
    /// Directory for the state that survives restarts: the checkpoint
    /// (detector windows, pending and firing alerts, incidents, with the
    /// Loki cursors and file offsets they belong to), the receivers' spools
    /// and the mined templates. One process per directory.
    #[arg(help_heading = "State", long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// With --state-dir: time between checkpoints while input flows (also
    /// taken soon after every notification, and at the stop). A crash
    /// (kill -9) of a stdin consumer forgets at most this much detection
    /// state; Loki and files are read again from the checkpoint.
    #[arg(help_heading = "State", long, default_value = "5s", value_parser = parse_checkpoint_interval, value_name = "DURATION")]
    pub checkpoint_interval: Dur,
    /// Serve /healthz, /readyz, /metrics and the status page here ("none"
    /// to disable). An address given here must be free; the default, when
    /// taken (a second sigwatch on the host), is a warning and the run goes
    /// on without them. [default: 127.0.0.1:9464]
    #[arg(help_heading = "Server", long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Serve the open endpoints only (/healthz, /readyz, /metrics) here:
    /// the probes and the scrape on a cluster-internal port, the status
    /// page on --listen behind credentials (with --listen-metrics and no
    /// --listen, the status page is not served).
    #[arg(help_heading = "Server", long, value_name = "ADDR")]
    pub listen_metrics: Option<String>,
    /// A file of bearer tokens (one per line) that open the status page,
    /// /api/… and /report (repeatable, for rotation; also the environment's
    /// SIGWATCH_WEB_TOKEN, and the web: section of --config).
    #[arg(help_heading = "Server", long, value_name = "FILE")]
    pub web_token_file: Vec<PathBuf>,
    /// Serve the status page, /api/… and /report without credentials on an
    /// address other hosts can reach (they show log lines and node names).
    #[arg(help_heading = "Server", long)]
    pub insecure_ui: bool,
    /// Serve --listen over TLS with this PEM certificate (chain) and
    /// --web-tls-key; both are read again when they change and on SIGHUP.
    #[arg(
        help_heading = "Server",
        long,
        value_name = "FILE",
        requires = "web_tls_key"
    )]
    pub web_tls_cert: Option<PathBuf>,
    /// The PEM private key of --web-tls-cert.
    #[arg(
        help_heading = "Server",
        long,
        value_name = "FILE",
        requires = "web_tls_cert"
    )]
    pub web_tls_key: Option<PathBuf>,
    /// Export the per-group series (sigwatch_signature_hits_total,
    /// sigwatch_group_last_seen_seconds), whose label values are node and
    /// pod names. Off, /metrics names no group, and the cluster-wide
    /// recording rules of deploy/prometheus-rules.yaml see nothing.
    #[arg(
        help_heading = "Server",
        long,
        value_name = "BOOL",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub metrics_group_labels: bool,
    /// /metrics needs the credentials too (Prometheus' scrape config then
    /// sends a bearer token or basic auth); the probes stay open.
    #[arg(help_heading = "Server", long)]
    pub guard_metrics: bool,
    /// Users and bcrypt hashes from the configuration's web: section.
    #[arg(skip)]
    pub web_users: Vec<(String, String)>,
    /// Take pushed logs on this address instead of reading stdin: POST
    /// /loki/api/v1/push (Promtail, Alloy, Fluent Bit, Vector: protobuf or
    /// JSON) and POST /v1/logs (OTLP/HTTP: protobuf or JSON); gzip taken.
    #[arg(help_heading = "Ingest", long, value_name = "ADDR", conflicts_with_all = ["loki", "files"])]
    pub ingest: Option<String>,
    /// Take syslog on this address, over UDP and TCP (RFC 5424 and 3164;
    /// TCP framed by octet counting or line ends), instead of reading stdin;
    /// with --ingest or alone. Beyond loopback it needs --insecure-ingest
    /// (syslog carries no credentials).
    #[arg(help_heading = "Ingest", long, value_name = "ADDR", conflicts_with_all = ["loki", "files"])]
    pub syslog: Option<String>,
    /// A file of bearer tokens (one per line) that pushes must carry
    /// (repeatable; also ingest.token_files in --config). Required on an
    /// address other hosts can reach, unless --insecure-ingest.
    #[arg(help_heading = "Ingest", long, value_name = "FILE")]
    pub ingest_token_file: Vec<PathBuf>,
    /// Take pushes without credentials on an address other hosts can
    /// reach (whoever can push can page).
    #[arg(help_heading = "Ingest", long)]
    pub insecure_ingest: bool,
    /// Largest push body as sent, in bytes (larger: 413); once
    /// decompressed at most 8 times that. [default: 16777216]
    #[arg(help_heading = "Ingest", long, value_name = "BYTES")]
    pub ingest_max_body: Option<usize>,
    /// Pushed bytes waiting for the detection loop at most, across every
    /// listener (a push holds its share until processed); beyond it pushes
    /// are told to retry (429/503), TCP syslog is not read and UDP syslog
    /// dropped (counted). [default: 33554432]
    #[arg(help_heading = "Ingest", long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(1024..))]
    pub ingest_queue: Option<u32>,
    /// How long a push waits for room in a full queue before it is told to
    /// retry. [default: 2s]
    #[arg(help_heading = "Ingest", long, value_name = "DURATION", value_parser = parse_dur)]
    pub ingest_queue_wait: Option<Dur>,
    /// Take pushes over TLS with this PEM certificate (chain) and
    /// --ingest-tls-key; both are read again when they change and on SIGHUP.
    #[arg(
        help_heading = "Ingest",
        long,
        value_name = "FILE",
        requires = "ingest_tls_key"
    )]
    pub ingest_tls_cert: Option<PathBuf>,
    /// The PEM private key of --ingest-tls-cert.
    #[arg(
        help_heading = "Ingest",
        long,
        value_name = "FILE",
        requires = "ingest_tls_cert"
    )]
    pub ingest_tls_key: Option<PathBuf>,
    /// Users and bcrypt hashes from the configuration's ingest: section.
    #[arg(skip)]
    pub ingest_users: Vec<(String, String)>,
    /// Follow log files matching this glob instead of stdin (repeatable),
    /// e.g. '/var/log/pods/*/*/*.log'.
    #[arg(help_heading = "Files", long = "file", value_name = "GLOB")]
    pub files: Vec<String>,
    /// Reload the rules when a rule file changes (checked every 2 s; also
    /// follows Kubernetes ConfigMap updates). SIGHUP always reloads. An
    /// invalid set is rejected and the running one kept.
    #[arg(help_heading = "Rules", long)]
    pub watch_rules: bool,
    /// Take only this replica's share of the Loki streams: I/N (from 0),
    /// by a stable hash of the stream labels, so one node's lines always
    /// reach one replica. Cluster-wide rules (spread, share) then alert
    /// from Prometheus, over every shard's exported counters
    /// (docs/scaling.md).
    #[arg(help_heading = "Sharding", long, value_name = "I/N", value_parser = Shard::parse)]
    pub shard: Option<Shard>,
    /// Stream labels hashed for --shard (repeatable; default every label).
    /// Name the labels that identify a node, e.g. pod.
    #[arg(
        help_heading = "Sharding",
        long,
        value_name = "LABEL",
        requires = "shard"
    )]
    pub shard_by: Vec<String>,
    /// How often a shard lists its queries' streams (Loki's series API) to
    /// pick up new ones and drop gone ones [default: 30s].
    #[arg(help_heading = "Sharding", long, value_name = "DURATION", value_parser = parse_dur, requires = "shard")]
    pub shard_refresh: Option<Dur>,
}

impl SourceOptions {
    /// The shard with its labels, when sharding.
    pub fn shard(&self) -> Option<Shard> {
        self.shard.clone().map(|s| Shard {
            by: self.shard_by.clone(),
            ..s
        })
    }
}

impl Default for SourceOptions {
    fn default() -> Self {
        SourceOptions {
            loki: None,
            queries: Vec::new(),
            access: LokiAccess::default(),
            loki_tail: false,
            loki_limit: None,
            loki_lag: None,
            loki_interval: None,
            since: None,
            state_dir: None,
            checkpoint_interval: Dur::secs(5),
            listen: None,
            listen_metrics: None,
            web_token_file: Vec::new(),
            insecure_ui: false,
            web_tls_cert: None,
            web_tls_key: None,
            metrics_group_labels: true,
            guard_metrics: false,
            web_users: Vec::new(),
            ingest: None,
            syslog: None,
            ingest_token_file: Vec::new(),
            insecure_ingest: false,
            ingest_max_body: None,
            ingest_queue: None,
            ingest_queue_wait: None,
            ingest_users: Vec::new(),
            ingest_tls_cert: None,
            ingest_tls_key: None,
            files: Vec::new(),
            watch_rules: false,
            shard: None,
            shard_by: Vec::new(),
            shard_refresh: None,
        }
    }
}

/// The Loki client settings of these options (secrets read from files or
/// the environment).
pub fn loki_config(a: &SourceOptions, url: &str) -> Result<LokiConfig, AppError> {
    let mut c = LokiConfig::new(url);
    c.tenant = a.access.loki_tenant.clone();
    c.ca_file = a.access.loki_ca_file.clone();
    let d = |v: Option<Dur>, default: Dur| {
        Duration::from_nanos(v.unwrap_or(default).ns().max(1) as u64)
    };
    c.limit = a.loki_limit.unwrap_or(1000);
    c.lag = d(a.loki_lag, Dur::secs(10));
    c.interval = d(a.loki_interval, Dur::secs(2));
    c.since = d(a.since, Dur::secs(900));
    if let Some(token) = read_secret("SIGWATCH_LOKI_TOKEN", &a.access.loki_token_file)? {
        c.auth = Auth::Bearer(token);
    } else if let Some(user) = &a.access.loki_user {
        let password = read_secret("SIGWATCH_LOKI_PASSWORD", &a.access.loki_password_file)?
            .ok_or_else(|| {
                AppError::Setup(
                    "--loki-user needs SIGWATCH_LOKI_PASSWORD or --loki-password-file".into(),
                )
            })?;
        c.auth = Auth::Basic {
            user: user.clone(),
            password,
        };
    }
    Ok(c)
}

/// A range of Loki to replay (`sigwatch replay --loki`): the queries, the
/// time range and the client settings. The URL comes from this flag only,
/// never from the environment, so a replay reads what its command line
/// says.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LokiRangeOptions {
    /// Replay this Loki's lines (query_range) instead of files.
    #[arg(help_heading = "Loki", long, value_name = "URL", requires_all = ["queries", "from"])]
    pub loki: Option<String>,
    /// LogQL log query (repeatable; their lines are merged by time).
    #[arg(
        help_heading = "Loki",
        long = "query",
        value_name = "LOGQL",
        requires = "loki"
    )]
    pub queries: Vec<String>,
    /// Start of the range (inclusive): RFC 3339, a date, Unix seconds, or a
    /// duration back from now (7d).
    #[arg(help_heading = "Loki", long, value_name = "TIME", requires = "loki")]
    pub from: Option<String>,
    /// End of the range (exclusive), same forms [default: now].
    #[arg(help_heading = "Loki", long, value_name = "TIME", requires = "loki")]
    pub to: Option<String>,
    #[command(flatten)]
    /// Who sigwatch is to Loki.
    pub access: LokiAccess,
    /// Entries per query_range page (Loki's cap is 5000) [default: 1000].
    #[arg(help_heading = "Loki", long)]
    pub loki_limit: Option<u32>,
    /// Replay only this share of the streams, as `run --shard I/N` reads
    /// it: a backtest of a long range split across machines (per-node
    /// alerts; spread and share rules need every shard and are not alerted).
    #[arg(help_heading = "Sharding", long, value_name = "I/N", value_parser = Shard::parse, requires = "loki")]
    pub shard: Option<Shard>,
    /// Stream labels hashed for --shard (repeatable; default every label).
    #[arg(
        help_heading = "Sharding",
        long,
        value_name = "LABEL",
        requires = "shard"
    )]
    pub shard_by: Vec<String>,
}

impl LokiRangeOptions {
    /// The shard with its labels, when split.
    pub fn shard(&self) -> Option<Shard> {
        self.shard
            .clone()
            .map(|s| Shard {
                by: self.shard_by.clone(),
                ..s
            })
            .filter(Shard::is_split)
    }

    /// The client settings and the range `[from, to)` in ns, checked.
    pub fn resolve(&self, url: &str) -> Result<(LokiConfig, i64, i64), AppError> {
        if self.queries.is_empty() {
            return Err(AppError::Setup(
                "--loki needs at least one --query, e.g. --query '{namespace=\"livekit\"}'".into(),
            ));
        }
        crate::source::loki::check_url(url).map_err(|e| AppError::Setup(e.to_string()))?;
        let now = wall_ns();
        let at = |flag: &str, v: &str| {
            crate::clock::parse_instant(v, now).map_err(|e| AppError::Setup(format!("{flag}: {e}")))
        };
        let from = at("--from", self.from.as_deref().unwrap_or_default())?;
        let to = match &self.to {
            Some(t) => at("--to", t)?,
            None => now,
        };
        if to <= from {
            return Err(AppError::Setup(format!(
                "--to ({}) must come after --from ({})",
                crate::clock::format_rfc3339(to),
                crate::clock::format_rfc3339(from)
            )));
        }
        let live = SourceOptions {
            access: self.access.clone(),
            loki_limit: self.loki_limit,
            ..SourceOptions::default()
        };
        Ok((loki_config(&live, url)?, from, to))
    }
}

/// Where `run` serves its probes, metrics and status page by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9464";

/// Where a restart resumes its inputs: the positions saved with the state
/// they produced (see `app::checkpoint`).
#[derive(Debug, Clone, Default)]
pub struct Resume {
    /// Loki query → cursor (ns).
    pub loki: BTreeMap<String, i64>,
    /// Followed files: identity → offset.
    pub files: std::collections::HashMap<file::FileId, u64>,
    /// The ingest log's position the state covers.
    pub ingest_wal: Option<u64>,
}

/// What the started inputs report back to the live loop.
#[derive(Debug, Default)]
pub struct Started {
    /// The Loki cursors the pollers start from (empty for other inputs).
    pub cursors: BTreeMap<String, i64>,
    /// Whether Loki answers, per query (Loki only), for `/readyz`.
    pub loki_health: Option<std::sync::Arc<Health>>,
}

/// Starts one poller per query; returns the batch channel and the cursors.
fn start_loki(
    a: &SourceOptions,
    url: &str,
    mut cursors: BTreeMap<String, i64>,
    health: &std::sync::Arc<Health>,
) -> Result<(tokio::sync::mpsc::Receiver<Batch>, BTreeMap<String, i64>), AppError> {
    if a.queries.is_empty() {
        return Err(AppError::Setup(
            "--loki needs at least one --query, e.g. --query '{namespace=\"livekit\"}'".into(),
        ));
    }
    crate::source::loki::check_url(url).map_err(|e| AppError::Setup(e.to_string()))?;
    let cfg = loki_config(a, url)?;
    // Cursors of queries no longer asked for are dropped with the next
    // checkpoint.
    cursors.retain(|q, _| a.queries.contains(q));
    // Batches are up to a page (5000 entries) each: a few in flight bound
    // the memory a backlog can take.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let fresh = wall_ns().saturating_sub(i64::try_from(cfg.since.as_nanos()).unwrap_or(i64::MAX));
    for q in &a.queries {
        if may_match_loki_itself(q) {
            tracing::warn!(query = %q, "This selector can match Loki's own logs, which record every query: sigwatch would read its own queries in a loop. Pin a label to your workload, e.g. {{namespace=\"livekit\"}}.");
        }
        let start = *cursors.entry(q.clone()).or_insert(fresh);
        tracing::info!(query = %q, start = %crate::clock::format_rfc3339(start), resumed = start != fresh, "Loki query starting.");
        if let Some(shard) = a.shard().filter(Shard::is_split) {
            // A shard reads only its own streams (series API, narrowed
            // selectors), falling back to reading all and dropping.
            let every = a.shard_refresh.map_or(sharded::REFRESH, |d| {
                Duration::from_nanos(u64::try_from(d.ns()).unwrap_or(0))
                    .max(Duration::from_millis(100))
            });
            if a.loki_tail {
                tokio::spawn(sharded::run_sharded_tail(
                    cfg.clone(),
                    q.clone(),
                    shard,
                    start,
                    every,
                    tx.clone(),
                    health.clone(),
                ));
            } else {
                let p = sharded::ShardedPoller::new(cfg.clone(), q, shard, start, every)
                    .map_err(|e| AppError::Setup(format!("loki query {q}: {e}")))?;
                tokio::spawn(sharded::run_sharded_poller(
                    p,
                    cfg.interval,
                    tx.clone(),
                    health.clone(),
                ));
            }
        } else if a.loki_tail {
            tokio::spawn(run_tail(
                cfg.clone(),
                q.clone(),
                start,
                tx.clone(),
                health.clone(),
            ));
        } else {
            let poller = Poller::new(cfg.clone(), q, start)
                .map_err(|e| AppError::Setup(format!("loki query {q}: {e}")))?;
            tokio::spawn(run_poller(poller, cfg.interval, tx.clone(), health.clone()));
        }
    }
    Ok((rx, cursors))
}

/// What the live loop consumes, whatever the source: blocks of lines
/// already scanned (off the detection thread), with the sources their runs
/// refer to.
pub enum Input {
    /// Lines from stdin.
    Stdin(Block, Hints),
    /// The input broke off (a read error, already the last item).
    Failed(String),
    /// A Loki batch: one line per entry, with its time and stream.
    Loki {
        /// The query it answers.
        query: String,
        /// Everything before this (ns) has been delivered.
        cursor: i64,
        /// The newest entry's time (ns), for the consumer lag.
        newest: Option<i64>,
        /// The entries as a block.
        block: Block,
        /// What the scan found in it.
        hints: Hints,
        /// The streams the block's runs refer to.
        sources: Vec<Source>,
    },
    /// A batch of pushed lines (`--ingest`, `--syslog`).
    Push(crate::ingest::Pushed),
    /// A round of the file tailer.
    Files {
        /// Offsets covering exactly these lines and everything before.
        offsets: BTreeMap<String, (String, u64)>,
        /// The lines as a block, a run per file.
        block: Block,
        /// What the scan found in it.
        hints: Hints,
        /// The files the block's runs refer to.
        sources: Vec<Source>,
    },
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
pub fn apply_config(
    a: &mut SourceOptions,
    config: Option<&crate::config::Config>,
) -> Result<(), AppError> {
    let Some(c) = config else {
        return Ok(());
    };
    if a.state_dir.is_none() {
        a.state_dir = c.state_dir.clone();
    }
    if let Some(i) = &c.ingest {
        if a.ingest.is_none() {
            a.ingest = i.listen.clone();
        }
        if a.syslog.is_none() {
            a.syslog = i.syslog.clone();
        }
        a.ingest_token_file.extend(i.token_files.iter().cloned());
        a.ingest_users = i
            .basic_auth_users
            .iter()
            .map(|(u, h)| (u.clone(), h.clone()))
            .collect();
        a.ingest_max_body = a.ingest_max_body.or(i.max_body_bytes);
        a.ingest_queue = a.ingest_queue.or(i.queue_bytes);
        a.ingest_queue_wait = a.ingest_queue_wait.or(i.queue_wait);
        if a.ingest_tls_cert.is_none() && a.ingest_tls_key.is_none() {
            a.ingest_tls_cert = i.tls_cert_file.clone();
            a.ingest_tls_key = i.tls_key_file.clone();
        }
    }
    if let Some(w) = &c.web {
        a.web_token_file.extend(w.token_files.iter().cloned());
        a.guard_metrics |= w.guard_metrics;
        if a.web_tls_cert.is_none() && a.web_tls_key.is_none() {
            a.web_tls_cert = w.tls_cert_file.clone();
            a.web_tls_key = w.tls_key_file.clone();
        }
        a.web_users = w
            .basic_auth_users
            .iter()
            .map(|(u, h)| (u.clone(), h.clone()))
            .collect();
    }
    if a.files.is_empty() {
        a.files = c.files.clone();
    }
    if let Some(l) = &c.loki {
        if a.loki.is_none() {
            a.loki = Some(l.url.clone());
        }
        if a.queries.is_empty() {
            a.queries = l.queries.clone();
        }
        a.access.loki_tenant = a.access.loki_tenant.take().or_else(|| l.tenant.clone());
        a.access.loki_user = a.access.loki_user.take().or_else(|| l.user.clone());
        a.access.loki_password_file = a
            .access
            .loki_password_file
            .take()
            .or_else(|| l.password_file.clone());
        a.access.loki_token_file = a
            .access
            .loki_token_file
            .take()
            .or_else(|| l.token_file.clone());
        a.access.loki_ca_file = a.access.loki_ca_file.take().or_else(|| l.ca_file.clone());
        a.loki_tail = a.loki_tail || l.tail;
        a.loki_limit = a.loki_limit.or(l.limit);
        a.loki_lag = a.loki_lag.or(l.lag);
        a.loki_interval = a.loki_interval.or(l.interval);
        a.since = a.since.or(l.since);
    }
    Ok(())
}

/// Entries of one Loki block at most (a batch is split into such blocks).
const LOKI_BLOCK_ENTRIES: usize = 1000;

/// Starts the input the options name — Loki (one poller or tail per
/// query), followed files, or stdin — feeding `tx` with scanned blocks
/// (the scan runs off the detection thread, with the scanner `slot` holds).
/// `resume` holds the positions of a checkpoint.
pub fn start(
    a: &SourceOptions,
    slot: ScannerSlot,
    tx: &tokio::sync::mpsc::Sender<Input>,
    resume: Resume,
) -> Result<Started, AppError> {
    let mut started = Started::default();
    if a.shard.is_some() && a.loki.is_none() {
        return Err(AppError::Setup(
            "--shard splits Loki streams between replicas: it needs --loki (a file-reading DaemonSet is sharded by its nodes already)".into(),
        ));
    }
    if let Some(url) = &a.loki {
        let health = std::sync::Arc::new(Health::default());
        let (mut lrx, c) = start_loki(a, url, resume.loki, &health)?;
        let mut at = c.clone();
        started.cursors = c;
        started.loki_health = Some(health);
        let tx = tx.clone();
        // A shard's readers keep only its own streams (source::loki::sharded).
        tokio::spawn(async move {
            while let Some(mut b) = lrx.recv().await {
                // Blocks of a bounded size, so the loop's queue holds a
                // bounded number of lines; the query's cursor moves with
                // the last one (before, it stays where it was).
                let before = at.get(&b.query).copied().unwrap_or(b.cursor);
                let mut parts = Vec::new();
                while b.entries.len() > LOKI_BLOCK_ENTRIES {
                    let rest = b.entries.split_off(LOKI_BLOCK_ENTRIES);
                    parts.push((std::mem::replace(&mut b.entries, rest), before));
                }
                parts.push((b.entries, b.cursor));
                at.insert(b.query.clone(), b.cursor);
                for (entries, cursor) in parts {
                    let (block, sources) = crate::source::loki::block_of(&entries);
                    let hints = slot.get().scan(&block.data);
                    let input = Input::Loki {
                        newest: entries.iter().map(|e| e.ts).max(),
                        query: b.query.clone(),
                        cursor,
                        block,
                        hints,
                        sources,
                    };
                    if tx.send(input).await.is_err() {
                        return;
                    }
                }
            }
        });
    } else if !a.files.is_empty() {
        let tailer = file::Tailer::new(&a.files, resume.files)
            .map_err(|e| AppError::Setup(format!("--file: {e}")))?;
        let mut frx = file::spawn(tailer, Duration::from_millis(250));
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
        })
        .map_err(AppError::io("cannot start the stdin reader"))?;
    }
    Ok(started)
}

/// `sigwatch check --config`: the sources the configuration names, set up
/// as `run` would (Loki's URL, credentials files and queries; the file
/// globs), without connecting. Returns a line describing each.
pub fn check_config(config: &crate::config::Config) -> Result<Vec<String>, AppError> {
    let mut a = SourceOptions::default();
    apply_config(&mut a, Some(config))?;
    let mut lines = Vec::new();
    if let Some(url) = &a.loki {
        crate::source::loki::check_url(url).map_err(|e| AppError::Setup(e.to_string()))?;
        let cfg = loki_config(&a, url)?;
        for q in &a.queries {
            Poller::new(cfg.clone(), q, 0)
                .map_err(|e| AppError::Setup(format!("loki query {q}: {e}")))?;
        }
        lines.push(format!(
            "loki {url} ({} quer{}{})",
            a.queries.len(),
            if a.queries.len() == 1 { "y" } else { "ies" },
            if a.loki_tail { ", tail" } else { "" }
        ));
    }
    if !a.files.is_empty() {
        file::Tailer::new(&a.files, Default::default())
            .map_err(|e| AppError::Setup(e.to_string()))?;
        lines.push(format!("files {}", a.files.join(" ")));
    }
    if let Some(d) = &a.state_dir {
        lines.push(format!("state_dir {}", d.display()));
    }
    if config.ingest.is_some() {
        for (what, addr) in [("listen", &a.ingest), ("syslog", &a.syslog)] {
            let Some(addr) = addr else { continue };
            let port = addr
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse::<u16>().ok());
            if port.is_none() {
                return Err(AppError::Setup(format!(
                    "ingest.{what}: {addr:?} is not HOST:PORT (e.g. 0.0.0.0:3101)"
                )));
            }
        }
        let o = push_options(&a);
        crate::ingest::access(&o)?;
        let tls = crate::ingest::tls(&o)?;
        lines.push(format!(
            "ingest {} ({} token file(s), {} user(s){})",
            a.ingest.as_deref().unwrap_or("(no address: give --ingest)"),
            a.ingest_token_file.len(),
            a.ingest_users.len(),
            if tls.is_some() { ", TLS" } else { "" }
        ));
    }
    if config.web.is_some() {
        // The token files read, the hashes bcrypt's, the pair loads.
        web_access(&a)?;
        let tls = web_tls(&a)?;
        lines.push(format!(
            "web {} token file(s), {} user(s){}",
            a.web_token_file.len(),
            a.web_users.len(),
            if tls.is_some() { ", TLS" } else { "" }
        ));
    }
    Ok(lines)
}

/// What push ingest takes from the options (`--ingest`, `--syslog`, the
/// `ingest:` section).
pub(crate) fn push_options(a: &SourceOptions) -> crate::ingest::Options {
    crate::ingest::Options {
        http: a.ingest.clone(),
        syslog: a.syslog.clone(),
        token_files: a.ingest_token_file.clone(),
        users: a.ingest_users.clone(),
        insecure: a.insecure_ingest,
        max_body: a.ingest_max_body,
        queue_bytes: a.ingest_queue,
        queue_wait: a.ingest_queue_wait,
        tls_cert: a.ingest_tls_cert.clone(),
        tls_key: a.ingest_tls_key.clone(),
        state_dir: a.state_dir.clone(),
    }
}

/// The credentials of the guarded endpoints: the token files', the
/// environment's `SIGWATCH_WEB_TOKEN`, the configuration's users.
pub fn web_access(a: &SourceOptions) -> Result<crate::server::auth::Access, AppError> {
    let mut tokens = Vec::new();
    for f in &a.web_token_file {
        crate::durable::warn_if_shared(f, "web token file");
        tokens.extend(
            crate::server::auth::tokens_from_file(f).map_err(|e| AppError::Setup(e.to_string()))?,
        );
    }
    if let Ok(t) = std::env::var("SIGWATCH_WEB_TOKEN") {
        if !t.trim().is_empty() {
            tokens.push(t.trim().to_string());
        }
    }
    crate::server::auth::Access::new(&tokens, &a.web_users)
        .map_err(|e| AppError::Setup(e.to_string()))
}

/// The TLS configuration of `--listen`, when a certificate is given.
pub fn web_tls(a: &SourceOptions) -> Result<Option<crate::server::tls::Served>, AppError> {
    crate::server::tls::Served::pair(a.web_tls_cert.as_deref(), a.web_tls_key.as_deref(), "web")
        .map_err(|e| AppError::Setup(e.to_string()))
}
