//! The replay of `sigwatch replay`: event time only, never the clock; a
//! progress bar on a terminal and a summary at the end.

use super::delivery::finish;
use super::delivery::Delivery;
use super::sources::LokiRangeOptions;
use super::{build_engine, receivers, AppError, PipelineOptions};
use crate::alert::Notification;
use crate::engine::Engine;
use crate::scan::Hints;
use crate::source::block::Block;
use crate::source::loki::range::{Merged, Range};
use crate::source::Source;
use std::collections::BTreeMap;
use std::time::Duration;

/// How a replay ends: a table on stderr, one structured log event (with
/// `--log-format json`, so stderr stays one JSON object per line), or nothing.
#[derive(Clone, Copy, PartialEq)]
pub enum Summary {
    /// A table on stderr.
    Table,
    /// One structured log event.
    Log,
    /// Nothing.
    Off,
}

/// What a replay reads.
#[derive(Debug, Clone)]
pub enum ReplayFrom {
    /// Files (`-` for stdin), merged by event time.
    Files(Vec<String>),
    /// A time range of Loki, read with `query_range` page by page.
    Loki(Box<LokiRangeOptions>),
}

impl ReplayFrom {
    /// What the report's title and the log call it.
    fn title(&self) -> String {
        match self {
            ReplayFrom::Files(f) => f.join(" "),
            ReplayFrom::Loki(l) => format!(
                "{} {} from {} to {}",
                l.loki.as_deref().unwrap_or_default(),
                l.queries.join(" "),
                l.from.as_deref().unwrap_or_default(),
                l.to.as_deref().unwrap_or("now")
            ),
        }
    }
}

/// Blocks scanned off the detection path, with the sources of their runs
/// when they differ per block (Loki's streams).
type Scanned = Result<(Block, Hints, Option<Vec<Source>>), AppError>;

/// Entries per block read from Loki.
const LOKI_BLOCK_ENTRIES: usize = 4096;

/// Reads the Loki range into scanned blocks on a task of its own, a few
/// blocks ahead of detection (bounded: the task waits when they pile up).
fn spawn_loki(
    l: &LokiRangeOptions,
    slot: crate::scan::ScannerSlot,
) -> Result<tokio::sync::mpsc::Receiver<Scanned>, AppError> {
    let url = l.loki.clone().unwrap_or_default();
    let (cfg, from, to) = l.resolve(&url)?;
    let shard = l.shard();
    tracing::info!(url = %url, queries = l.queries.len(), from = %crate::clock::format_rfc3339(from), to = %crate::clock::format_rfc3339(to), shard = ?shard.as_ref().map(|s| format!("{}/{}", s.index, s.count)), "Replaying a range of Loki.");
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let queries = l.queries.clone();
    tokio::spawn(async move {
        // A shard lists the range's streams first and reads only its own.
        let ranges = match shard_ranges(&cfg, &queries, shard.as_ref(), from, to).await {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(Err(AppError::Setup(format!("--loki: {e}")))).await;
                return;
            }
        };
        let mut merged = Merged::new(ranges);
        let mut consumed: u64 = 0;
        loop {
            let item = match merged.next_batch(LOKI_BLOCK_ENTRIES).await {
                Ok(v) if v.is_empty() => break,
                Ok(mut v) => {
                    if let Some(s) = &shard {
                        let before = v.len();
                        v.retain(|e| s.owns(&e.labels));
                        crate::stats::count_shard_skipped((before - v.len()) as u64);
                        if v.is_empty() {
                            continue;
                        }
                    }
                    let (mut block, sources) = crate::source::loki::block_of(&v);
                    consumed += block.data.len() as u64;
                    block.consumed = consumed;
                    let hints = slot.get().scan(&block.data);
                    Ok((block, hints, Some(sources)))
                }
                Err(e) => Err(AppError::Setup(format!("--loki: {e}"))),
            };
            let last = item.is_err();
            if tx.send(item).await.is_err() || last {
                return;
            }
        }
        for (query, st) in merged.stats() {
            tracing::info!(query = %query, requests = st.requests, entries = st.entries, duplicates = st.duplicates, retries = st.retries, skipped_saturated = st.skipped_saturated, "Loki range read.");
        }
    });
    Ok(rx)
}

/// The ranges to read: one per query, or with a shard one per selector
/// naming its streams of the range (the whole query when the series API
/// is refused or no selector can name them; each such query logged and
/// counted). Several selectors of one query never select a stream twice
/// (each names other values of one label).
async fn shard_ranges(
    cfg: &crate::source::loki::LokiConfig,
    queries: &[String],
    shard: Option<&crate::source::shard::Shard>,
    from: i64,
    to: i64,
) -> Result<Vec<Range>, crate::source::loki::LokiError> {
    use crate::source::loki::{meter, selector, series, LokiError};
    let mut out = Vec::new();
    for q in queries {
        let Some(shard) = shard else {
            out.push(Range::new(cfg.clone(), q, from, to)?);
            continue;
        };
        let planned = match selector::stream_selector(q) {
            None => Err(format!("{q:?} has no stream selector")),
            Some(sel) => {
                let client = crate::source::loki::http_client(cfg)?;
                match series::series(&client, cfg, &sel, from, to, q).await {
                    Ok(listed) => selector::plan(q, shard, &listed),
                    Err(LokiError::Config { status, body }) => Err(format!(
                        "Loki refused the series API (HTTP {status}: {body})"
                    )),
                    Err(e) => return Err(e),
                }
            }
        };
        match planned {
            Ok(p) => {
                tracing::info!(query = %q, owned = p.owned.len(), selected = p.selected, selectors = p.queries.len(), "This shard reads its own streams of the range.");
                for nq in p.queries {
                    out.push(Range::new(cfg.clone(), &nq, from, to)?.metered_as(q));
                }
            }
            Err(why) => {
                tracing::warn!(query = %q, reason = %why, "This shard reads the whole query and drops the other shards' lines.");
                meter::with(q, |m| m.fallbacks += 1);
                out.push(Range::new(cfg.clone(), q, from, to)?);
            }
        }
    }
    Ok(out)
}

/// `sigwatch replay`: files (or stdin) merged by event time, or a range of
/// Loki, read and scanned off the detection path, detected and delivered in
/// order; the same input always gives the same notifications.
pub async fn replay(
    p: PipelineOptions,
    from: ReplayFrom,
    show: Summary,
    report: Option<std::path::PathBuf>,
) -> Result<u64, AppError> {
    let mut engine = build_engine(&p, false)?;
    if let ReplayFrom::Loki(l) = &from {
        if let Some(s) = l.shard() {
            engine.set_local_cluster_alerts(false);
            tracing::info!(shard = s.index, of = s.count, "Sharded: per-node alerts of this share of the streams; spread and share rules need every shard and are not alerted.");
        }
    }
    let (d, _) = receivers::dispatcher(
        receivers::receivers(&p, receivers::Scope::Replay)?,
        true,
        None,
    );
    let (grouping, incident_cfg) = super::incident_settings(&p)?;
    let loki_url = match &from {
        ReplayFrom::Loki(l) => l.loki.as_deref(),
        ReplayFrom::Files(_) => None,
    };
    let mut d = Delivery::new(d, engine.rules(), incident_cfg, grouping)
        .with_links(engine.rules(), p.links(loki_url));
    if report.is_some() {
        d = d.with_recorder(engine.rules());
        engine.record_hits(true, true);
    }
    let mut out = Vec::new();
    let started = std::time::Instant::now();
    // Reading and the block scan run off the detection path, a few blocks
    // ahead of it (bounded: the reader waits when they pile up).
    let (mut rx, reader, sources, total) = start_reading(&from, engine.scanner())?;
    let bar = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| progress_bar(total));
    if let Some(bar) = &bar {
        // Notifications printed on the same terminal go around the bar
        // instead of through it.
        let bar = bar.clone();
        crate::notify::stdout::print_around(std::sync::Arc::new(
            move |print: &mut dyn FnMut()| bar.suspend(&mut *print),
        ));
    }
    let mut alerts: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut lines: u64 = 0;
    let mut bytes: u64 = 0;
    while let Some(item) = rx.recv().await {
        let (block, hints, own) = item?;
        lines += engine.push_block(own.as_deref().unwrap_or(&sources), &block, &hints, &mut out);
        bytes = block.consumed;
        if let Some(r) = d.recorder.as_mut() {
            r.record(engine.take_recording());
        }
        if let Some(bar) = &bar {
            bar.set_position(bytes);
            let rate = lines as f64 / started.elapsed().as_secs_f64().max(1e-3);
            bar.set_message(format!(
                "{} lines {}/s",
                indicatif::HumanCount(lines),
                indicatif::HumanCount(rate as u64)
            ));
        }
        tally(&out, &mut alerts);
        d.deliver(&mut out, engine.watermark()).await;
        if report.is_none() && d.dispatcher.all_gone() {
            // `sigwatch replay … | head -3`: nobody reads any more.
            tracing::info!("Every receiver has closed; the replay stops.");
            break;
        }
    }
    // A reader still sending blocks ends when the channel is gone.
    drop(rx);
    // The reader logs lines it cut or repaired as it ends.
    if let Some(reader) = reader {
        reader
            .join()
            .map_err(|_| AppError::Setup("the reader thread panicked".into()))?;
    }
    engine.finish(&mut out);
    super::warn_labels_never_carried(&engine, &mut Default::default());
    if let Some(r) = d.recorder.as_mut() {
        r.record(engine.take_recording());
    }
    tally(&out, &mut alerts);
    d.deliver(&mut out, engine.watermark()).await;
    d.flush().await;
    if let (Some(path), Some(r)) = (&report, &d.recorder) {
        let title = from.title();
        std::fs::write(path, r.render(&d.incidents, &title)).map_err(AppError::io(format!(
            "cannot write the report {}",
            path.display()
        )))?;
        tracing::info!(path = %path.display(), incidents = d.incidents.stats().opened, "Report written.");
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    // Before finish(): with --stats the counters' JSON stays the last line.
    match show {
        Summary::Table => eprint!(
            "{}",
            summary(&engine, &d, &alerts, lines, bytes, started.elapsed())
        ),
        Summary::Log => log_summary(&engine, &alerts, lines, bytes, started.elapsed()),
        Summary::Off => {}
    }
    Ok(finish(&p, &engine, d).await)
}

/// The files merged by time, or the Loki range, read and block-scanned on a
/// thread (or task) of its own a few blocks ahead of detection: the
/// channel of scanned blocks, the reader thread, the files' sources, and
/// the bytes to read when known.
#[allow(clippy::type_complexity)]
fn start_reading(
    from: &ReplayFrom,
    slot: crate::scan::ScannerSlot,
) -> Result<
    (
        tokio::sync::mpsc::Receiver<Scanned>,
        Option<std::thread::JoinHandle<Vec<(String, crate::source::stdin::ReadStats)>>>,
        Vec<Source>,
        Option<u64>,
    ),
    AppError,
> {
    match from {
        ReplayFrom::Files(files) => {
            let input = crate::source::replay::open(files, crate::decode::peek_time)?;
            let (tx, rx) = tokio::sync::mpsc::channel::<Scanned>(4);
            let reader = crate::source::block::spawn_into(input.blocks, tx, move |item| {
                let b = item?;
                let hints = slot.get().scan(&b.data);
                Ok((b, hints, None))
            })
            .map_err(AppError::io("cannot start the reader thread"))?;
            Ok((rx, Some(reader), input.sources, input.total))
        }
        ReplayFrom::Loki(l) => Ok((spawn_loki(l, slot)?, None, Vec::new(), None)),
    }
}

/// The summary as one log line (per rule: matches, fired, resolved).
fn log_summary(
    engine: &Engine,
    alerts: &BTreeMap<String, (u64, u64)>,
    lines: u64,
    bytes: u64,
    took: Duration,
) {
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
        seconds = took.as_secs_f64(),
        first = span.map(|(a, _)| crate::clock::format_rfc3339(a)),
        last = span.map(|(_, b)| crate::clock::format_rfc3339(b)),
        formats = %serde_json::to_string(&s.decode.formats).unwrap_or_default(),
        rules = %serde_json::to_string(&rules).unwrap_or_default(),
        "Replay summary (per rule: matches, fired, resolved)."
    );
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
            crate::alert::AlertState::Firing if !n.repeat => e.0 += 1,
            crate::alert::AlertState::Resolved => e.1 += 1,
            _ => {}
        }
    }
}

/// The end-of-replay table: throughput, time span, lines by format, drops
/// by reason, matches and alerts per rule.
fn summary(
    engine: &Engine,
    delivery: &Delivery,
    alerts: &BTreeMap<String, (u64, u64)>,
    lines: u64,
    bytes: u64,
    took: Duration,
) -> String {
    let s = engine.stats();
    let mut o = String::new();
    summary_input(&mut o, engine, &s, lines, bytes, took);
    summary_counted(&mut o, &s, lines);
    if let Some(n) = &s.novelty {
        summary_templates(&mut o, n);
    }
    summary_end(&mut o, delivery);
    summary_rules(&mut o, engine, alerts);
    o
}

/// Throughput, the time span and the lines by format.
fn summary_input(
    o: &mut String,
    engine: &Engine,
    s: &crate::engine::Stats,
    lines: u64,
    bytes: u64,
    took: Duration,
) {
    use std::fmt::Write;
    let secs = took.as_secs_f64().max(1e-3);
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
            let _ = crate::duration::format_duration(b - a, &mut span);
            let _ = writeln!(
                o,
                "time span  {} → {} ({span})",
                crate::clock::format_rfc3339(a),
                crate::clock::format_rfc3339(b)
            );
        }
        None if lines > 0 => {
            let _ = writeln!(o, "time span  (no line had a time of its own)");
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
}

/// What was counted rather than read as usual: hints about the input,
/// drops, cuts and late lines.
fn summary_counted(o: &mut String, s: &crate::engine::Stats, lines: u64) {
    use std::fmt::Write;
    let d = &s.decode;
    for h in d.input_hints() {
        let _ = writeln!(o, "note       {h}");
    }
    let drops: Vec<String> = [
        ("truncated", crate::stats::truncated_lines()),
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
    if s.late * 10 > lines.max(1) {
        let _ = writeln!(
            o,
            "note       {} of {} lines came more than --lateness behind the newest time already seen: inputs whose times do not overlap (replay them one at a time), or lines far out of order (a larger --lateness)",
            indicatif::HumanCount(s.late),
            indicatif::HumanCount(lines)
        );
    }
}

/// The templates novelty knows and how far its learning is.
fn summary_templates(o: &mut String, n: &crate::mining::watch::WatchStats) {
    use std::fmt::Write;
    let _ = writeln!(
        o,
        "templates  {} known from {} lines mined{}{}{}",
        indicatif::HumanCount(n.templates),
        indicatif::HumanCount(n.mined),
        match (n.learning, n.learn_lines_left) {
            (true, 0) => " · still learning (its learn_for of event time has not passed)".to_string(),
            (true, left) => format!(
                " · still learning: {} more lines to mine before new templates count (novelty.learn_lines)",
                indicatif::HumanCount(left)
            ),
            (false, _) => String::new(),
        },
        if n.novel_templates > 0 {
            format!(" · {} new after learning", n.novel_templates)
        } else {
            String::new()
        },
        if n.templates_evicted > 0 {
            format!(" · {} evicted", n.templates_evicted)
        } else {
            String::new()
        }
    );
}

/// Incidents and alerts still open at the end.
fn summary_end(o: &mut String, delivery: &Delivery) {
    use std::fmt::Write;
    let open = delivery.incidents.open();
    let st = delivery.incidents.stats();
    if delivery.flaps.flaps() > 0 {
        let _ = writeln!(
            o,
            "flaps      {} alert(s) fired again within the flap window ({}) of their resolution: held as one episode each",
            delivery.flaps.flaps(),
            crate::duration::Dur(delivery.flaps.window())
        );
    }
    if st.opened > 0 {
        let _ = writeln!(
            o,
            "incidents  {} opened · {} resolved · {} open at the end{}{}",
            st.opened,
            st.resolved,
            open.len(),
            if st.flaps > 0 {
                format!(" · {} flap(s) held", st.flaps)
            } else {
                String::new()
            },
            if st.below_min > 0 {
                format!(" · {} below min_alerts", st.below_min)
            } else {
                String::new()
            }
        );
        for inc in open.iter().take(5) {
            let _ = writeln!(
                o,
                "           {}  {} — {} still affected",
                inc.id,
                inc.title(),
                crate::incident::nodes_text(inc.affected().len())
            );
        }
    }
    let firing = delivery.board.firing();
    if !firing.is_empty() {
        let _ = writeln!(o, "firing     {} alert(s) at the end", firing.len());
        for n in firing.iter().take(10) {
            let _ = writeln!(
                o,
                "           {}  {}  since {}",
                n.rule, n.group, n.starts_at
            );
        }
        if firing.len() > 10 {
            let _ = writeln!(o, "           … and {} more", firing.len() - 10);
        }
    }
}

/// Matches and alerts per rule that saw something; the others in one line.
fn summary_rules(o: &mut String, engine: &Engine, alerts: &BTreeMap<String, (u64, u64)>) {
    use std::fmt::Write;
    let discounted = engine.rule_discounted();
    let rules: Vec<(String, u64, u64, u64, u64)> = engine
        .rule_stats()
        .into_iter()
        .enumerate()
        .map(|(i, (id, hits, _))| {
            let (fired, resolved) = alerts.get(&id).copied().unwrap_or_default();
            let d = discounted.get(i).copied().unwrap_or(0);
            (id, hits, d, fired, resolved)
        })
        .collect();
    let active: Vec<&(String, u64, u64, u64, u64)> = rules
        .iter()
        .filter(|r| r.1 > 0 || r.3 > 0 || r.4 > 0)
        .collect();
    let quiet = rules.len() - active.len();
    // Matches of groups that were starting or stopping (`unless`): shown
    // only when some rule had any, as "matches (not counted)".
    let any_discounted = active.iter().any(|r| r.2 > 0);
    if !active.is_empty() {
        let w = active.iter().map(|r| r.0.len()).max().unwrap_or(4).max(4);
        let m = if any_discounted { 21 } else { 9 };
        let head = if any_discounted {
            "matches (not counted)"
        } else {
            "matches"
        };
        let _ = writeln!(
            o,
            "\n{:<w$}  {:>m$}  {:>6}  {:>8}",
            "rule", head, "fired", "resolved"
        );
        for (id, hits, d, fired, resolved) in active {
            let mut n = indicatif::HumanCount(*hits).to_string();
            if *d > 0 {
                n.push_str(&format!(" ({})", indicatif::HumanCount(*d)));
            }
            let _ = writeln!(o, "{id:<w$}  {n:>m$}  {fired:>6}  {resolved:>8}");
        }
    }
    if quiet > 0 {
        let _ = writeln!(
            o,
            "{}{quiet} other rule(s) matched nothing",
            if rules.len() == quiet { "\n" } else { "" }
        );
    }
}
