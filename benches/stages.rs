//! Stage timings on one corpus, in process: the block scan alone (what the
//! reader thread does besides reading) and the engine alone (what the
//! detection thread does), each over the whole file held in memory. The
//! replay's wall time is about the larger of the two, since they overlap.
//!
//!     cargo bench --bench stages -- FILE [RULES_DIR]
//!
//! `benches/run.sh` runs it on its corpora; it is a measurement, not a test.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use sigwatch::source::block::{BlockSource, ReadBlocks};
use sigwatch::source::Source;
use sigwatch::{Engine, Options};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let Some(file) = args.first() else {
        eprintln!("usage: cargo bench --bench stages -- FILE [RULES_DIR]");
        std::process::exit(2);
    };
    let set = match args.get(1) {
        Some(dir) => {
            let mut texts = Vec::new();
            let mut paths: Vec<_> = std::fs::read_dir(dir)
                .expect("rules dir")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                .collect();
            paths.sort();
            for p in paths {
                texts.push((
                    p.display().to_string(),
                    std::fs::read_to_string(&p).expect("rule file"),
                ));
            }
            sigwatch::rules::compile(&texts).expect("rules compile")
        }
        None => sigwatch::rules::load_builtin().expect("built-in rules"),
    };
    let f = std::fs::File::open(file).expect("corpus");
    let mut reader = ReadBlocks::new(file, f, false);
    let mut blocks = Vec::new();
    while let Some(b) = reader.next_block().expect("read") {
        blocks.push(b);
    }
    let bytes: usize = blocks.iter().map(|b| b.data.len()).sum();
    let mut plain = set.clone();
    plain
        .rules
        .retain(|r| !matches!(r.detect, sigwatch::rules::Detect::Novelty(_)));
    let mut engine = Engine::new(set, Options::default()).expect("engine");
    let scanner = engine.scanner().get();
    let t = Instant::now();
    let hints: Vec<_> = blocks.iter().map(|b| scanner.scan(&b.data)).collect();
    let scan = t.elapsed();
    // Each engine reads the hints of its own scanner (rule indices differ
    // without the novelty rule).
    let run = |engine: &mut Engine, hints: &[_]| {
        let sources = vec![sigwatch::source::replay::source_for(file)];
        let mut out = Vec::new();
        let t = Instant::now();
        let mut lines = 0;
        for (b, h) in blocks.iter().zip(hints) {
            lines += engine.push_block(&sources, b, h, &mut out);
            out.clear();
        }
        engine.finish(&mut out);
        (lines, t.elapsed())
    };
    let mut without = Engine::new(plain, Options::default()).expect("engine");
    let plain_scanner = without.scanner().get();
    let plain_hints: Vec<_> = blocks.iter().map(|b| plain_scanner.scan(&b.data)).collect();
    let (_, eng_plain) = run(&mut without, &plain_hints);
    drop((without, plain_hints));
    let (lines, eng) = run(&mut engine, &hints);
    let _ = Source::named("x");
    let per = |d: std::time::Duration| d.as_nanos() as f64 / lines.max(1) as f64;
    println!(
        "{lines} lines, {:.0} MiB: block scan {:.3} s ({:.0} ns/line), engine {:.3} s ({:.0} ns/line; without novelty {:.0} ns/line)",
        bytes as f64 / 1048576.0,
        scan.as_secs_f64(),
        per(scan),
        eng.as_secs_f64(),
        per(eng),
        per(eng_plain)
    );
}
