//! The template commands: `sigwatch learn` (a novelty baseline from
//! archived logs) and `sigwatch templates` (the mined templates of some
//! logs, for an investigation). Both read files as `replay` does (merged by
//! event time, `-` for stdin) through the real decoder, so templates are
//! mined from the same messages as in `run`.

use super::{load_rules, AppError, RulesOptions};
use crate::decode::mined::mining_message;
use crate::decode::severity::Level;
use crate::decode::{self, Decoder, Prepared};
use crate::mining::{self, watch::Watch, Miner, MinerConfig, Template};
use crate::rules::{Detect, Novelty};
use crate::source::replay::Merged;
use std::io::Write;
use std::path::Path;

/// Feeds every prepared line of `files` to `f`, with the decoder (for
/// levels and fields) and the raw line (a joined multi-line record or a
/// partial line left at the end: its text); returns the lines read.
pub(super) fn each_line(
    files: &[String],
    keys: &decode::KeyConfig,
    mut f: impl FnMut(&mut Decoder, &Prepared<'_>, &str),
) -> Result<u64, AppError> {
    let mut merged = Merged::open(files, decode::peek_time)?;
    let sources = merged.sources();
    let fallback = crate::source::Source::named("stdin");
    let mut dec = Decoder::new(keys, false);
    let mut n = 0;
    while let Some((i, line)) = merged.next_indexed()? {
        n += 1;
        let src = sources.get(i).unwrap_or(&fallback);
        if let Some(p) = dec.prepare(src, line, None) {
            f(&mut dec, &p, line);
        }
        while dec.has_queued() {
            if let Some(p) = dec.prepare_queued(None) {
                let raw = p.text.clone();
                f(&mut dec, &p, &raw);
            }
        }
    }
    for (_, text) in dec.drain_partials() {
        if let Some(p) = dec.prepare(&crate::source::Source::named("partial"), &text, None) {
            f(&mut dec, &p, &text);
        }
    }
    Ok(n)
}

/// The novelty settings of the rules (the defaults when novelty is off,
/// so a baseline can be built before it is turned on).
fn novelty_spec(rules: &RulesOptions) -> Result<Novelty, AppError> {
    let set = load_rules(rules)?;
    if let Some(n) = set.rules.iter().find_map(|r| match &r.detect {
        Detect::Novelty(n) => Some(n.clone()),
        _ => None,
    }) {
        return Ok(n);
    }
    let on = crate::rules::compile(&[("default".into(), "rules: []".into())])?;
    on.rules
        .into_iter()
        .find_map(|r| match r.detect {
            Detect::Novelty(n) => Some(n),
            _ => None,
        })
        .ok_or_else(|| AppError::Setup("no novelty settings".into()))
}

/// `sigwatch learn`: mines the lines novelty would mine (its levels, its
/// ignore list) from archived logs and writes the templates to `out` as a
/// finished learning period: `run --templates` then reports new templates
/// from its first line.
pub fn learn(rules: &RulesOptions, files: &[String], out: &Path) -> Result<(), AppError> {
    let set = load_rules(rules)?;
    let mut spec = novelty_spec(rules)?;
    spec.learn_for = i64::MAX;
    let mut watch = Watch::new(&spec);
    let lines = each_line(files, &set.keys, |d, p, _| {
        // A trace's frames belong to their record's template.
        if p.continues {
            return;
        }
        watch.observe(
            d.level(p),
            &p.text,
            p.format,
            p.header.as_ref(),
            p.time,
            p.time_from.moves_clocks(),
        );
    })?;
    let mut state = watch.state();
    state.learn_until = None;
    state.born.clear();
    mining::save(out, &state).map_err(|e| AppError::Setup(e.to_string()))?;
    let s = watch.stats();
    eprintln!(
        "learned {} templates from {} of {} lines ({} evicted) -> {}",
        s.templates,
        s.mined,
        lines,
        s.templates_evicted,
        out.display()
    );
    Ok(())
}

/// Options of `sigwatch templates`.
#[derive(clap::Args, Debug, Clone)]
pub struct TemplatesOptions {
    /// Templates shown per level.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Only lines at this level or above (debug, info, warn, error, fatal);
    /// default: every line, with or without a level.
    #[arg(long, value_name = "LEVEL", value_parser = parse_level)]
    pub level: Option<Level>,
    /// One JSON object per template instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Most templates kept (the least recently seen go, counted).
    #[arg(long, default_value_t = 10_000)]
    pub max_templates: usize,
    /// Distinct words in one position, among templates otherwise alike,
    /// that make the position a variable.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub variable_after: usize,
    /// Every mined line with its template id instead of the table
    /// (`--json`: one object per line: `n`, `template`, `level`, `text`).
    /// Ids are final only at the end: files are read a second time to
    /// print them (about 24 bytes per line held); stdin's lines are held.
    #[arg(long)]
    pub lines: bool,
    /// With `--lines`: only the lines of this template (repeatable).
    #[arg(long = "template", value_name = "ID", requires = "lines")]
    pub only: Vec<u64>,
}

fn parse_level(s: &str) -> Result<Level, String> {
    Level::parse(s).ok_or_else(|| format!("unknown level {s:?}"))
}

/// `sigwatch templates`: mines every line (or those at `--level` and
/// above) and prints the templates by level, most frequent first.
pub fn templates(
    rules: &RulesOptions,
    files: &[String],
    o: &TemplatesOptions,
    w: &mut dyn Write,
) -> Result<(), AppError> {
    let set = load_rules(rules)?;
    let mut miner = Miner::new(MinerConfig {
        max_templates: o.max_templates.max(1),
        variable_after: o.variable_after.max(2),
    });
    let mut mined = 0u64;
    // `--lines`: each line's template id (and its text only when the input
    // cannot be read a second time: stdin).
    let keep_text = files.iter().any(|f| f == "-");
    let mut seen: Vec<(Option<String>, Option<u64>, Option<Level>)> = Vec::new();
    // Two stages on two threads: reading and decoding, then mining, with
    // a bounded queue of batches between them. A batch holds its lines'
    // texts in one buffer, and emptied batches go back to the reader, so
    // no line is allocated or freed on its way.
    let lines = std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(PIPELINE_BATCHES);
        let (back_tx, back_rx) = std::sync::mpsc::sync_channel::<Batch>(PIPELINE_BATCHES + 1);
        let keys = &set.keys;
        let reader = scope.spawn(move || {
            let mut batch = Batch::default();
            let n = each_line(files, keys, |d, p, _| {
                // The message is read on the mining thread, which has
                // less to do.
                let level = d.level(p);
                // A trace's frames belong to their record's template.
                let wanted =
                    !p.continues && o.level.is_none_or(|min| level.is_some_and(|l| l >= min));
                let from = batch.text.len();
                batch.text.push_str(&p.text);
                batch.lines.push(Mined {
                    span: (from, batch.text.len()),
                    format: p.format,
                    header: p.header,
                    wanted,
                    time: p.time,
                    level,
                });
                if batch.lines.len() >= PIPELINE_BATCH {
                    let mut next = back_rx.try_recv().unwrap_or_default();
                    next.clear();
                    let full = std::mem::replace(&mut batch, next);
                    // The miner is gone only if it failed: stop reading.
                    let _ = tx.send(full);
                }
            });
            if !batch.lines.is_empty() {
                let _ = tx.send(batch);
            }
            n
        });
        for batch in rx {
            for m in &batch.lines {
                let text = batch.text.get(m.span.0..m.span.1).unwrap_or("");
                let message = m
                    .wanted
                    .then(|| {
                        mining_message(text, m.format, m.header.as_ref(), m.level, Some(m.time))
                    })
                    .flatten();
                let id = message.map(|msg| {
                    mined += 1;
                    miner.add(&msg, m.time, m.level).id
                });
                if o.lines {
                    seen.push((keep_text.then(|| text.to_string()), id, m.level));
                }
            }
            // Back for reuse; dropped when the reader has enough.
            let _ = back_tx.try_send(batch);
        }
        reader
            .join()
            .map_err(|_| AppError::Setup("the reading thread failed".into()))?
    })?;
    if o.lines {
        return write_lines(&miner, &seen, files, &set.keys, o, w);
    }
    let text = render_templates(&miner, mined, lines, o);
    w.write_all(text.as_bytes())
        .map_err(AppError::io("cannot write the templates"))
}

/// Lines per batch between the reading and the mining thread, and batches
/// queued at most (a bounded queue: the reader waits for the miner).
const PIPELINE_BATCH: usize = 1024;
const PIPELINE_BATCHES: usize = 8;

/// Decoded lines on their way to the miner: their texts in one buffer.
#[derive(Default)]
struct Batch {
    text: String,
    lines: Vec<Mined>,
}

impl Batch {
    fn clear(&mut self) {
        self.text.clear();
        self.lines.clear();
    }
}

/// A decoded line on its way to the miner.
struct Mined {
    /// Its text in the batch's buffer.
    span: (usize, usize),
    format: &'static str,
    header: Option<crate::decode::header::Header>,
    wanted: bool,
    time: i64,
    level: Option<Level>,
}

/// `templates --lines`: each mined line with its template's final id (a
/// template merged into another since answers with the other's).
fn write_lines(
    miner: &Miner,
    seen: &[(Option<String>, Option<u64>, Option<Level>)],
    files: &[String],
    keys: &decode::KeyConfig,
    o: &TemplatesOptions,
    w: &mut dyn Write,
) -> Result<(), AppError> {
    let mut out = std::io::BufWriter::new(w);
    let mut write = |n: usize, text: &str| -> bool {
        let Some((_, id, level)) = seen.get(n) else {
            return true;
        };
        let id = id.map(|i| miner.canonical(i));
        if !o.only.is_empty() && !id.is_some_and(|i| o.only.contains(&i)) {
            return true;
        }
        let r = if o.json {
            let v = serde_json::json!({
                "n": n + 1,
                "template": id,
                "level": level.map(Level::as_str),
                "text": text,
            });
            writeln!(out, "{v}")
        } else {
            let id = id.map_or_else(|| "-".to_string(), |i| i.to_string());
            writeln!(out, "{id:>6}  {text}")
        };
        // A closed pipe (`| head`) ends the output quietly.
        r.is_ok()
    };
    if seen.first().is_some_and(|(t, _, _)| t.is_some()) {
        for (n, (text, _, _)) in seen.iter().enumerate() {
            if !write(n, text.as_deref().unwrap_or("")) {
                return Ok(());
            }
        }
    } else {
        // Files: read again, line for line as the first pass prepared
        // them, so only the ids were held in memory.
        let mut n = 0;
        let mut open = true;
        each_line(files, keys, |_, p, _| {
            if open {
                open = write(n, &p.text);
            }
            n += 1;
        })?;
    }
    let _ = out.flush();
    Ok(())
}

/// The `templates` output: a table per level, or JSON lines.
fn render_templates(miner: &Miner, mined: u64, lines: u64, o: &TemplatesOptions) -> String {
    use std::fmt::Write as _;
    let mut w = String::new();
    let all = miner.templates();
    if o.json {
        for t in &all {
            let v = serde_json::json!({
                "id": t.id,
                "count": t.count,
                "level": t.levels.highest().map(Level::as_str),
                "levels": t.levels,
                "first_seen": crate::clock::format_rfc3339(t.first_seen),
                "last_seen": crate::clock::format_rfc3339(t.last_seen),
                "template": t.text(),
            });
            let _ = writeln!(w, "{v}");
        }
        return w;
    }
    let _ = writeln!(
        w,
        "{} templates from {mined} of {lines} lines ({} evicted)",
        all.len(),
        miner.evicted()
    );
    let order = [
        Some(Level::Fatal),
        Some(Level::Error),
        Some(Level::Warn),
        Some(Level::Info),
        Some(Level::Debug),
        None,
    ];
    for level in order {
        let of: Vec<&&Template> = all.iter().filter(|t| t.levels.highest() == level).collect();
        if of.is_empty() {
            continue;
        }
        let total: u64 = of.iter().map(|t| t.count).sum();
        let _ = writeln!(
            w,
            "\n== {} ({} templates, {} lines)\n{:>9}  {:<24}  TEMPLATE",
            level.map_or("no level", Level::as_str),
            of.len(),
            total,
            "COUNT",
            "FIRST SEEN"
        );
        for t in of.iter().take(o.top) {
            let _ = writeln!(
                w,
                "{:>9}  {:<24}  {}",
                t.count,
                crate::clock::format_rfc3339(t.first_seen),
                t.text()
            );
        }
        if of.len() > o.top {
            let _ = writeln!(w, "{:>9}  ({} more)", "…", of.len() - o.top);
        }
    }
    w
}

/// Marks the templates asked for (`templates --known`, the API) known, and
/// adds each to the baseline file the run started from, if any, so a run
/// from that baseline knows it too.
pub(super) fn answer_known(
    engine: &mut crate::engine::Engine,
    telemetry: &crate::server::Telemetry,
    baseline: Option<&std::path::Path>,
) {
    for (id, reply) in telemetry.take_known() {
        let text = engine.know_template(id);
        if let (Some(text), Some(path)) = (&text, baseline) {
            match add_to_baseline(engine, id, path) {
                Ok(()) => {
                    tracing::info!(template = id, text = %text, path = %path.display(), "Template marked known and added to the baseline.")
                }
                Err(e) => {
                    tracing::error!(template = id, error = %e, "Template marked known, but the baseline file could not take it.")
                }
            }
        } else if let Some(text) = &text {
            tracing::info!(template = id, text = %text, "Template marked known.");
        }
        let _ = reply.send(text);
    }
}

/// Appends template `id` of the engine's miner to the baseline at `path`
/// (a `sigwatch learn` file), under the baseline's next id, unless it
/// holds the same text already.
fn add_to_baseline(
    engine: &crate::engine::Engine,
    id: u64,
    path: &std::path::Path,
) -> Result<(), String> {
    let st = engine.templates_state().ok_or("novelty is off")?;
    let t = st
        .templates
        .iter()
        .find(|t| t.id == id)
        .ok_or("template gone")?;
    let mut base = crate::mining::load(path).map_err(|e| e.to_string())?;
    if base.templates.iter().any(|b| b.template == t.template) {
        return Ok(());
    }
    let mut t = t.clone();
    t.id = base.next_id;
    base.next_id += 1;
    base.templates.push(t);
    crate::mining::save(path, &base).map_err(|e| e.to_string())
}
