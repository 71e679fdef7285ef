//! The live loop of `sigwatch run`: input blocks into the engine, the wall
//! clock advancing event time while input is idle, rule reloads (SIGHUP,
//! `--watch-rules`), checkpoints and alert state after every step, health
//! and metrics, and a bounded drain on shutdown.

use super::delivery::Delivery;
use super::sources::{self, Input, SourceOptions};
use super::{build_engine, AppError, PipelineOptions, RulesOptions};
use crate::alert::Notification;
use crate::clock::wall_ns;
use crate::engine::Engine;
use crate::rules;
use crate::server::{Snapshot, Telemetry};
use crate::source::loki::cursor;
use crate::source::{file, Source};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The end of a run or replay: drains deliveries (bounded by the shutdown
/// timeout), logs what was not delivered and the input's counters, and
/// prints `--stats`.
pub async fn finish(p: &PipelineOptions, engine: &Engine, mut delivery: Delivery) {
    delivery.flush().await;
    let d = delivery.dispatcher;
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

/// `sigwatch run`: the live pipeline, until its input ends or a signal.
pub async fn run(p: PipelineOptions, mut a: SourceOptions) -> Result<(), AppError> {
    sources::apply_config(&mut a, &p.config)?;
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
    if let Some(dir) = &a.state_dir {
        let state = load_state(dir)?;
        let adopted = engine.restore(state);
        if adopted > 0 {
            tracing::info!(
                adopted,
                "Alerts firing before the restart adopted; they will not page again."
            );
        }
        // The templates of the previous run: no second learning period.
        let t = templates_path(dir);
        if t.exists() {
            super::load_templates(&mut engine, &t)?;
        }
    }
    let (d, ams) = super::receivers::dispatcher(
        super::receivers::receivers(&p)?,
        false,
        a.state_dir.as_deref(),
    );
    let (grouping, incident_cfg) = super::incident_settings(&p)?;
    let d = Delivery::new(d, engine.rules(), incident_cfg, grouping);
    // Alertmanager forgets alerts not re-sent: keep them alive.
    let _resenders: Vec<_> = ams.iter().map(|a| a.spawn_resender()).collect();
    let (tx, rx) = tokio::sync::mpsc::channel::<Input>(8);
    // Each source feeds the one loop through a bounded channel; blocks are
    // scanned on the way (off the detection thread).
    let cursors = sources::start(&a, engine.scanner(), &tx)?;
    drop(tx);
    let telemetry = Arc::new(Telemetry::new());
    telemetry.set_rules_loaded();
    if a.listen != "none" {
        let listener = tokio::net::TcpListener::bind(&a.listen)
            .await
            .map_err(AppError::io(format!("cannot listen on {}", a.listen)))?;
        tracing::info!(addr = %a.listen, "Serving /healthz, /readyz, /metrics, and the status page at /.");
        let t = telemetry.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::server::serve(listener, t).await {
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
    p: &PipelineOptions,
    why: &str,
    engine: &mut Engine,
    telemetry: &Telemetry,
    out: &mut Vec<Notification>,
) {
    let result = super::pipeline_rules(p)
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
    p: PipelineOptions,
    a: SourceOptions,
    mut engine: Engine,
    mut d: Delivery,
    (mut rx, mut reloads): (tokio::sync::mpsc::Receiver<Input>, ReloadRx),
    mut cursors: BTreeMap<String, i64>,
    telemetry: Arc<Telemetry>,
) -> Result<(), AppError> {
    let stdin = Source::named("stdin");
    let mut out = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // (newest event time, wall time when it was seen): idle time advances event time.
    let mut clock: Option<(i64, i64)> = None;
    let mut newest_entry: Option<i64> = None;
    let mut saved = crate::alert::SavedState::default();
    let mut templates_saved = std::time::Instant::now();
    let mut shutdown = Box::pin(shutdown_signal());
    loop {
        tokio::select! {
            input = rx.recv() => {
                let Some(input) = input else {
                    // End of input (stdin closed): flush and stop.
                    engine.finish(&mut out);
                    d.deliver(&mut out, engine.watermark()).await;
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
                d.set_rules(engine.rules());
            },
            _ = tick.tick() => {
                if let Some((e, w)) = clock {
                    engine.advance_to(e + (wall_ns() - w).max(0), &mut out);
                }
                telemetry.update(&Snapshot {
                    stats: engine.stats(),
                    rules: engine.rule_stats(),
                    firing: engine.firing() as u64,
                    receivers: d.dispatcher.snapshots(),
                    loki_lag_seconds: newest_entry.map(|n| (wall_ns() - n) as f64 / 1e9),
                    truncated_lines: crate::stats::truncated_lines(),
                    status: Some(d.board.status(&d.incidents, &telemetry.source())),
                    exports: engine.exports(),
                    shard_skipped: crate::stats::shard_skipped(),
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
        d.deliver(&mut out, engine.watermark()).await;
        telemetry.beat();
        // After every step, so an alert delivered just before a kill -9 is
        // already saved (cheap: written only when it changed).
        if let Some(dir) = &a.state_dir {
            save_state(dir, &engine, &mut saved);
            if templates_saved.elapsed() >= TEMPLATES_EVERY {
                save_templates(dir, &engine);
                templates_saved = std::time::Instant::now();
            }
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
        save_templates(dir, &engine);
    }
    finish(&p, &engine, d).await;
    Ok(())
}

/// Where the mined templates are kept under `--state-dir`.
fn templates_path(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join("templates.json")
}

/// How often (wall time) the templates are saved while running.
const TEMPLATES_EVERY: Duration = Duration::from_secs(60);

/// Saves the mined templates (novelty on only); failures are logged.
fn save_templates(dir: &std::path::Path, engine: &Engine) {
    if let Some(state) = engine.templates_state() {
        let p = templates_path(dir);
        if let Err(e) = crate::mining::save(&p, &state) {
            tracing::error!(error = %e, "Cannot save the templates.");
        }
    }
}

/// Reads `state-dir/state.json` (missing: a fresh start).
fn load_state(dir: &std::path::Path) -> Result<crate::alert::SavedState, AppError> {
    let p = dir.join("state.json");
    match std::fs::read_to_string(&p) {
        Ok(t) => serde_json::from_str(&t).map_err(|e| {
            AppError::Setup(format!(
                "{}: {e}: corrupt; move it away to start fresh",
                p.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Default::default()),
        Err(e) => Err(AppError::Io {
            what: format!("cannot read {}", p.display()),
            source: e,
        }),
    }
}

/// Saves firing alerts and sticky values when they changed, atomically.
fn save_state(dir: &std::path::Path, engine: &Engine, last: &mut crate::alert::SavedState) {
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
