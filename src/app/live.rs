//! The live loop of `sigwatch run`: input blocks into the engine, the wall
//! clock advancing event time while input is idle, rule reloads (SIGHUP,
//! `--watch-rules`), checkpoints and alert state after every step, health
//! and metrics, and a bounded drain on shutdown.

use super::checkpoint;
use super::delivery::{finish, Delivery};
use super::sources::{self, Input, SourceOptions};
use super::state::{
    final_checkpoint, lock_state_dir, restore, templates_path, Kept, Restored, StateKeeper,
};
use super::{build_engine, AppError, PipelineOptions, RulesOptions};
use crate::alert::Notification;
use crate::clock::wall_ns;
use crate::engine::Engine;
use crate::rules;
use crate::server::{Snapshot, Telemetry};
use crate::source::Source;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// `sigwatch run`: the live pipeline, until its input ends or a signal.
/// Returns how many notifications were not delivered (see `delivery::finish`).
pub async fn run(p: PipelineOptions, mut a: SourceOptions) -> Result<u64, AppError> {
    sources::apply_config(&mut a, p.rules.config_file()?.as_deref())?;
    // Before anything else: a SIGHUP must never kill us (its default action).
    let reloads = reload_triggers(&p.rules, a.watch_rules);
    let mut engine = build_engine(&p, true)?;
    if let Some(shard) = a.shard().filter(|s| s.is_split()) {
        engine.set_local_cluster_alerts(false);
        tracing::info!(
            shard = shard.index,
            of = shard.count,
            "Sharded: this replica takes its share of the Loki streams; spread and share rules are exported to /metrics for Prometheus, not alerted here."
        );
    }
    let lock = match &a.state_dir {
        Some(dir) => Some(lock_state_dir(dir).await?),
        None => None,
    };
    let loaded = match &a.state_dir {
        Some(dir) => checkpoint::load(dir)?,
        None => checkpoint::Loaded::Fresh,
    };
    let mut out = Vec::new();
    let Restored {
        resume,
        saved_files,
        restored,
    } = restore(&mut engine, loaded, &mut out);
    if let Some(dir) = &a.state_dir {
        // The templates of the previous run: no second learning period.
        let t = templates_path(dir);
        if t.exists() {
            super::load_templates(&mut engine, &t)?;
        }
    }
    let (d, ams) = super::receivers::dispatcher(
        super::receivers::receivers(&p, super::receivers::Scope::Run)?,
        false,
        a.state_dir.as_deref(),
    );
    let (grouping, incident_cfg) = super::incident_settings(&p)?;
    let mut d = Delivery::new(d, engine.rules(), incident_cfg, grouping)
        .with_links(engine.rules(), p.links(a.loki.as_deref()));
    if let Some(Kept {
        incidents,
        board,
        flaps,
        alertmanager: mut active,
    }) = restored
    {
        d.incidents.restore(incidents);
        d.board.restore(board);
        d.flaps.restore(flaps);
        for am in &ams {
            use crate::notify::Receiver;
            if let Some(a) = active.remove(&checkpoint::receiver_key(&am.identity())) {
                am.restore_active(a);
            }
        }
    }
    if let Some(dir) = &a.state_dir {
        d.ledger = Some(super::delivery::Ledger::open(dir));
    }
    // Silences: kept in the state directory (else for this run only).
    let silences = Arc::new(
        crate::silence::SilenceBook::open(a.state_dir.as_ref().map(|d| d.join("silences.json")))
            .map_err(|e| AppError::Setup(e.to_string()))?,
    );
    let mut d = d.with_silences(silences.clone());
    // Alertmanager forgets alerts not re-sent: keep them alive.
    let _resenders: Vec<_> = ams.iter().map(|a| a.spawn_resender()).collect();
    let (tx, rx) = tokio::sync::mpsc::channel::<Input>(8);
    let telemetry = Arc::new(Telemetry::new());
    if let Some(shard) = a.shard().filter(|s| s.is_split()) {
        // Which share this replica reads, for dashboards (one series, 1).
        let (i, n) = (shard.index.to_string(), shard.count.to_string());
        telemetry.set_state(&[("kind", "shard"), ("shard", &i), ("shards", &n)], 1);
    }
    telemetry.set_silences(silences);
    // Each source feeds the one loop through a bounded channel; blocks are
    // scanned on the way (off the detection thread).
    let wal_at = resume.ingest_wal;
    let (started, pushed, wal) = if a.ingest.is_some() || a.syslog.is_some() {
        let (what, wal) = start_pushes(&a, engine.scanner(), &tx, &telemetry, wal_at).await?;
        (sources::Started::default(), Some(what), wal)
    } else {
        (
            sources::start(&a, engine.scanner(), &tx, resume)?,
            None,
            None,
        )
    };
    let cursors = started.cursors;
    drop(tx);
    let state = match &a.state_dir {
        Some(dir) => Some(
            StateKeeper::new(dir, &a, cursors, saved_files, lock, ams.clone())?
                .with_wal(wal, wal_at),
        ),
        None => None,
    };
    // Resolves of alerts whose rules are gone since the checkpoint.
    d.deliver(&mut out, engine.watermark()).await;
    telemetry.set_rules_loaded();
    serve_status(&a, &mut d, &mut engine, &telemetry).await?;
    match (&started.loki_health, a.files.is_empty()) {
        _ if pushed.is_some() => telemetry.set_source(true, pushed.as_deref().unwrap_or("ingest")),
        (Some(health), _) => {
            let health = health.clone();
            telemetry.set_source_check(Box::new(move || health.readiness(wall_ns())));
        }
        (None, false) => telemetry.set_source(true, &format!("files {}", a.files.join(" "))),
        (None, true) => telemetry.set_source(true, "stdin"),
    }
    drive(p, engine, d, (rx, reloads), state, telemetry).await
}

/// The push sources — `--ingest` (HTTP) and `--syslog` (UDP, TCP) —
/// started (`ingest`), their batches fed into the loop's channel in their
/// order. Returns what `/readyz` says of the source, and the ingest log.
async fn start_pushes(
    a: &SourceOptions,
    slot: crate::scan::ScannerSlot,
    tx: &tokio::sync::mpsc::Sender<Input>,
    telemetry: &Arc<Telemetry>,
    wal_at: Option<u64>,
) -> Result<(String, Option<Arc<crate::ingest::Wal>>), AppError> {
    let o = sources::push_options(a);
    let crate::ingest::Started { mut rx, what, wal } =
        crate::ingest::start(&o, slot, telemetry.clone(), wal_at).await?;
    let tx = tx.clone();
    tokio::spawn(async move {
        while let Some(p) = rx.recv().await {
            if tx.send(Input::Push(p)).await.is_err() {
                return;
            }
        }
    });
    Ok((what, wal))
}

/// The status page, `/healthz`, `/readyz` and `/metrics`, unless
/// `--listen none`; a default address that is taken is no error (piping
/// into a second sigwatch is normal), an address asked for is.
async fn serve_status(
    a: &SourceOptions,
    d: &mut Delivery,
    engine: &mut crate::engine::Engine,
    telemetry: &Arc<Telemetry>,
) -> Result<(), AppError> {
    use crate::server::{auth, Surface};
    let access = Arc::new(sources::web_access(a)?);
    let tls = sources::web_tls(a)?;
    telemetry.set_group_labels(a.metrics_group_labels);
    // With --listen-metrics alone the probes and the scrape are there, and
    // the status page is served only where --listen asks.
    let addr = match (&a.listen, &a.listen_metrics) {
        (Some(l), _) => l.as_str(),
        (None, Some(_)) => "none",
        (None, None) => sources::DEFAULT_LISTEN,
    };
    if a.guard_metrics && !access.is_configured() {
        return Err(AppError::Setup(
            "--guard-metrics without a credential would answer /metrics to nobody: give --web-token-file FILE (or SIGWATCH_WEB_TOKEN, or web.basic_auth_users in --config)".into(),
        ));
    }
    if addr != "none" && !auth::is_loopback(addr) && !access.is_configured() && !a.insecure_ui {
        return Err(AppError::Setup(format!(
            "--listen {addr} would show the status page, /api/status and /report (log lines, node names) to anyone who can reach it: give a credential (--web-token-file FILE, SIGWATCH_WEB_TOKEN, or web.basic_auth_users in --config), serve only /healthz, /readyz and /metrics there with --listen-metrics {addr} --listen 127.0.0.1:9464, or say --insecure-ui"
        )));
    }
    if let Some(m) = &a.listen_metrics {
        let listener = tokio::net::TcpListener::bind(m.as_str())
            .await
            .map_err(|e| AppError::io(format!("cannot listen on {m}"))(e))?;
        tracing::info!(addr = %m, "Serving /healthz, /readyz and /metrics (open).");
        let surface = Surface {
            access: access.clone(),
            ui: false,
            tls: None,
            guard_metrics: a.guard_metrics,
        };
        spawn_server(listener, telemetry.clone(), surface);
    }
    if addr == "none" {
        return Ok(());
    }
    match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => {
            // The status page links to a report of this run, rendered
            // when asked for.
            d.record_live(engine.rules());
            engine.record_hits(true, false);
            tracing::info!(
                addr,
                guarded = access.is_configured(),
                tls = tls.is_some(),
                "Serving /healthz, /readyz, /metrics, and the status page at / (with /api/status and /report behind the credentials when any is configured)."
            );
            if let Some(t) = &tls {
                t.reloading.reload_on_sighup();
            }
            let surface = Surface {
                access,
                ui: true,
                tls: tls.map(|t| t.config),
                guard_metrics: a.guard_metrics,
            };
            spawn_server(listener, telemetry.clone(), surface);
        }
        // Piping into a second sigwatch is normal: only an address
        // asked for must be free.
        Err(e) if a.listen.is_none() => {
            tracing::warn!(addr, error = %e, "The default address for /healthz, /readyz and /metrics is taken (another sigwatch?); going on without them. Give --listen ADDR, or --listen none to silence this.");
        }
        Err(e) => return Err(AppError::io(format!("cannot listen on {addr}"))(e)),
    }
    Ok(())
}

/// Runs one listener of the server on a task of its own.
fn spawn_server(
    listener: tokio::net::TcpListener,
    t: Arc<Telemetry>,
    surface: crate::server::Surface,
) {
    tokio::spawn(async move {
        if let Err(e) = crate::server::serve(listener, t, surface).await {
            tracing::error!(error = %e, "The health and metrics server stopped.");
        }
    });
}

/// Why the rules are reloaded.
type ReloadRx = tokio::sync::mpsc::Receiver<&'static str>;

/// SIGHUP and, with `--watch-rules`, changes of the rule files (compared by
/// content every 2 s, so a ConfigMap's symlink swap counts too) request a
/// reload through a small channel; requests while one is queued coalesce.
fn reload_triggers(rules: &RulesOptions, watch: bool) -> ReloadRx {
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
        // The files of one's own, the configuration's included.
        let own = rules.layers().map(|(_, p)| p).unwrap_or_default();
        if own.is_empty() {
            tracing::warn!(
                "--watch-rules without rule files of one's own: the built-in pack never changes."
            );
        } else {
            let paths = own;
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
    p: &PipelineOptions,
    why: &str,
    engine: &mut Engine,
    telemetry: &Telemetry,
    out: &mut Vec<Notification>,
) {
    // The configuration's `rules:` section may have changed too.
    let result = p
        .rules
        .reread_config()
        .and_then(|()| super::pipeline_rules(p))
        .map_err(|e| match e {
            // The located errors themselves, on the log line.
            AppError::Rules(r) => r.to_string(),
            e => e.to_string(),
        })
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

/// How often the live loop moves event time on with the wall clock.
const CLOCK_TICK: Duration = Duration::from_millis(250);

/// The live loop: feeds input to the engine, advances event time with the
/// wall clock while input is idle, checkpoints (see [`StateKeeper`]),
/// stops on end of input or a signal.
async fn drive(
    p: PipelineOptions,
    mut engine: Engine,
    mut d: Delivery,
    (mut rx, mut reloads): (tokio::sync::mpsc::Receiver<Input>, ReloadRx),
    mut state: Option<StateKeeper>,
    telemetry: Arc<Telemetry>,
) -> Result<u64, AppError> {
    let stdin = Source::named("stdin");
    let mut out = Vec::new();
    // The status page and /metrics each second; the live clock four times a
    // second (an absence is decided within 0.25 s of its time plus the
    // input's observed disorder, see engine::disorder).
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut clock_tick = tokio::time::interval(CLOCK_TICK);
    clock_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // (newest event time, wall time when it was seen): idle time advances event time.
    let mut clock: Option<(i64, i64)> = None;
    let mut newest_entry: Option<i64> = None;
    let mut shutdown = Box::pin(shutdown_signal());
    let mut report_answered = 0u64;
    // Rules that select by a label no line carried: told once, a minute
    // into the input (labels come with streams; a minute shows most), and
    // at the end.
    let mut labels_warned = std::collections::HashSet::new();
    let mut labels_checked = false;
    let started = std::time::Instant::now();
    loop {
        let mut moved = true;
        tokio::select! {
            input = rx.recv() => {
                let Some(input) = input else {
                    // End of input (stdin closed): flush and stop.
                    engine.finish(&mut out);
                    d.deliver(&mut out, engine.watermark()).await;
                    break;
                };
                let arrival = feed(&mut engine, &stdin, input, &mut state, &mut newest_entry, &mut out);
                if let Some(w) = engine.watermark() {
                    let newest = w + p.lateness.ns();
                    if clock.is_none_or(|(e, _)| newest > e) {
                        clock = Some((newest, arrival));
                    }
                }
            },
            Some(why) = reloads.recv() => {
                if let Some(r) = d.recorder.as_mut() {
                    r.record(engine.take_recording());
                }
                reload(&p, why, &mut engine, &telemetry, &mut out);
                d.set_rules(engine.rules());
                if d.recorder.is_some() {
                    // Rule indices changed: the report starts again.
                    d.recorder = Some(crate::report::Recorder::live(engine.rules()));
                }
            },
            _ = until_due(clock, engine.due()) => {
                // A cluster-wide rule whose hits came in a burst is due.
                if let Some((e, w)) = clock {
                    engine.evaluate_due(e + (wall_ns() - w).max(0), &mut out);
                }
            },
            _ = clock_tick.tick() => {
                moved = false;
                if let Some((e, w)) = clock {
                    let before = engine.watermark();
                    engine.advance_live(e + (wall_ns() - w).max(0), &mut out);
                    moved = engine.watermark() != before;
                }
            },
            _ = tick.tick() => {
                moved = false;
                publish(&mut engine, &mut d, &telemetry, newest_entry, &mut report_answered);
                if !labels_checked && started.elapsed() >= Duration::from_secs(60) {
                    labels_checked = engine.watermark().is_some();
                    super::warn_labels_never_carried(&engine, &mut labels_warned);
                }
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
        super::mine::answer_known(&mut engine, &telemetry, p.templates.as_deref());
        let notified = !out.is_empty();
        if let Some(r) = d.recorder.as_mut() {
            r.record(engine.take_recording());
        }
        d.deliver(&mut out, engine.watermark()).await;
        telemetry.beat();
        if d.dispatcher.all_gone() {
            tracing::info!("Every receiver has closed; stopping.");
            break;
        }
        if let Some(k) = state.as_mut() {
            k.step(&engine, &d, moved, notified);
        }
    }
    if let Some(n) = newest_entry {
        tracing::info!(
            consumer_lag_ms = (wall_ns() - n) / 1_000_000,
            "Loki consumer stopped."
        );
    }
    super::warn_labels_never_carried(&engine, &mut labels_warned);
    if let Some(k) = state.as_mut() {
        final_checkpoint(k, &engine, &d, &p);
        d.keep_flaps_at_stop();
    }
    Ok(finish(&p, &engine, d).await)
}

/// Resolves when the wall clock reaches event time `due` on the live
/// clock `(newest event time, wall time it was seen)`; never without both.
async fn until_due(clock: Option<(i64, i64)>, due: Option<i64>) {
    match (clock, due) {
        (Some((e, w)), Some(d)) => {
            let wait = w.saturating_add(d.saturating_sub(e)) - wall_ns();
            tokio::time::sleep(Duration::from_nanos(wait.max(0) as u64)).await;
        }
        _ => std::future::pending().await,
    }
}

/// Feeds one input's block to the engine; returns its arrival time. A
/// Loki cursor or a file offset moves only after its lines were
/// processed, and is saved with the state they made.
fn feed(
    engine: &mut Engine,
    stdin: &Source,
    input: Input,
    state: &mut Option<StateKeeper>,
    newest_entry: &mut Option<i64>,
    out: &mut Vec<Notification>,
) -> i64 {
    match input {
        Input::Stdin(block, hints) => {
            engine.push_block(std::slice::from_ref(stdin), &block, &hints, out);
            block.arrival.unwrap_or_else(wall_ns)
        }
        Input::Failed(e) => {
            tracing::error!(error = %e, "Reading the input failed; stopping as at its end.");
            wall_ns()
        }
        Input::Loki {
            query,
            cursor: at,
            newest,
            block,
            hints,
            sources,
        } => {
            engine.push_block(&sources, &block, &hints, out);
            if let Some(n) = newest {
                *newest_entry = Some(newest_entry.map_or(n, |m| m.max(n)));
            }
            // The cursor moves only after its entries were
            // processed, and is saved with the state they made.
            if let Some(k) = state.as_mut() {
                k.loki.insert(query, at);
            }
            wall_ns()
        }
        Input::Push(crate::ingest::Pushed {
            newest,
            block,
            hints,
            sources,
            held: _held,
            wal,
        }) => {
            engine.push_block(&sources, &block, &hints, out);
            if let Some(n) = newest {
                *newest_entry = Some(newest_entry.map_or(n, |m| m.max(n)));
            }
            // Like a cursor: moves only after its lines were processed.
            if let (Some(k), Some(w)) = (state.as_mut(), wal) {
                k.wal_at = Some(w);
            }
            wall_ns()
        }
        Input::Files {
            offsets,
            block,
            hints,
            sources,
        } => {
            engine.push_block(&sources, &block, &hints, out);
            if let Some(k) = state.as_mut() {
                k.files = offsets;
            }
            block.arrival.unwrap_or_else(wall_ns)
        }
    }
}

/// Once a second: the counters, receivers and status board to the
/// server, and the live report rendered when someone asked for it.
fn publish(
    engine: &mut Engine,
    d: &mut Delivery,
    telemetry: &Telemetry,
    newest_entry: Option<i64>,
    report_answered: &mut u64,
) {
    let receivers = d.dispatcher.snapshots();
    let mut samples = Vec::new();
    engine.samples(&mut samples);
    crate::stats::samples(&mut samples);
    crate::source::loki::meter::samples(&mut samples);
    samples.push(crate::stats::Sample::event(
        "state_write_errors",
        crate::durable::write_errors(),
    ));
    for r in &receivers {
        r.samples(&mut samples);
    }
    if let Some(n) = newest_entry {
        let lag = (wall_ns() - n) as f64 / 1e9;
        samples.push(crate::stats::Sample::state(
            "loki_lag_seconds",
            lag.round() as i64,
        ));
    }
    samples.push(crate::stats::Sample::event("flaps_held", d.flaps.flaps()));
    samples.push(crate::stats::Sample::event(
        "flap_hold_overflow",
        d.flaps.overflow(),
    ));
    samples.push(crate::stats::Sample::state(
        "resolutions_held",
        i64::try_from(d.flaps.held().count()).unwrap_or(i64::MAX),
    ));
    let mut status = d.board.status(&d.incidents, &telemetry.source());
    status["flapping"] = d.flap_status();
    if let Some(book) = d.silence_book() {
        samples.push(crate::stats::Sample::event(
            "notifications_silenced",
            book.silenced(),
        ));
        let active = book.active(wall_ns());
        let n = active.as_array().map_or(0, Vec::len);
        samples.push(crate::stats::Sample::state(
            "silences_active",
            i64::try_from(n).unwrap_or(i64::MAX),
        ));
        status["silences"] = active;
    }
    telemetry.update(&Snapshot {
        samples,
        receivers,
        status: Some(status),
    });
    let wanted = telemetry.report_wanted();
    if let Some(r) = d.recorder.as_mut() {
        if wanted > *report_answered {
            r.record(engine.take_recording());
            let title = format!("live — {}", telemetry.source());
            telemetry.publish_report(wanted, r.render(&d.incidents, &title));
            *report_answered = wanted;
        }
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
