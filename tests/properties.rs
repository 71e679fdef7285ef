//! Property tests (run in CI): whatever the bytes, the decoders, the cheap
//! field lookups, the rule loader and the Loki parsers return or reject —
//! they never panic — and replay stays deterministic.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use proptest::prelude::*;
use sigwatch::decode::KeyConfig;
use sigwatch::decode::{payload, peek_time, Decoder};
use sigwatch::source::Source;

static RULES: std::sync::LazyLock<sigwatch::rules::RuleSet> =
    std::sync::LazyLock::new(|| sigwatch::rules::load_builtin().unwrap());

/// Strings biased toward log-like shapes: JSON, CRI, prefixes, klog.
fn loggy() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        "\"",
        ":",
        ",",
        "\\",
        "\\\"",
        "=",
        " ",
        "\t",
        "\n",
        "ts",
        "\"ts\":",
        "nodeID",
        "\"nodeID\":\"",
        "[pod/a-0/c] ",
        "2024-05-01T12:00:00.5Z stdout P ",
        "2024-05-01T12:00:00Z stderr F ",
        "{\"log\":\"",
        "I0501 12:00:40.118204 1 x.go:1] ",
        "May 01 12:00:40 h k[1]: ",
        "2024-05-07 10:55:53,434 ",
        "2024-05-07T10:55:53.434567890Z ",
        "05-07 10:55:53 ",
        "[2024-05-07 10:55:53,434] ",
        "081109 203615 ",
        "17/06/09 20:10:40 ",
        "20171223-22:15:29:606|",
        "[Sun Dec 04 04:47:44 2005] ",
        "1:M 07 May 2024 10:55:53.434 * ",
        "<34>",
        "<165>1 ",
        "INFO ",
        "[ERROR]",
        "Info",
        "|",
        " - ",
        "---",
        "(",
        ")",
        "<",
        ">",
        "#",
        "pool.go:762: ",
        "org.apache.Foo: ",
        "1117838570 ",
        "[pid 12:tid 3]",
        "1714568400.5",
        "99999999999999999999",
        "-",
        "é",
        "\u{fffd}",
        "\0",
        "pod=\"",
        "failed to mark as draining",
        "EGRESS_FAILED",
        "level=error",
    ]);
    prop::collection::vec(
        prop_oneof![atoms.prop_map(str::to_string), any::<String>()],
        0..40,
    )
    .prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn decoding_never_panics(line in loggy()) {
        let _ = payload::decode(&line, None);
        let h = sigwatch::decode::header::read(&line, Some(1_714_568_400_000_000_000));
        prop_assert!(h.body <= line.len() && line.is_char_boundary(h.body));
        for (_, v) in h.parts(&line) {
            prop_assert!(!v.is_empty());
        }
        let _ = sigwatch::decode::header::read(&line, None);
        let _ = peek_time(&line, None, None);
        let _ = sigwatch::decode::quick::quick_get(&line, "nodeID");
        let _ = sigwatch::decode::quick::quick_get_path(&line, "involvedObject.name");
        let _ = peek_time(&line, Some(0), None);
        let mut d = Decoder::with_group_keys(&KeyConfig::default(), false, &["node".into(), "pod".into(), "workload".into()]);
        for part in line.split('\n') {
            if let Some(p) = d.prepare(&Source::named("s"), part, None) {
                let _ = d.resolve_quick(0, &p);
                let e = d.event(&p);
                let _ = e.get("nodeID");
            }
        }
        let _ = d.drain_partials();
    }

    #[test]
    fn replay_is_deterministic_and_survives_anything(lines in prop::collection::vec(loggy(), 0..30)) {
        let run = || {
            let mut e = sigwatch::Engine::new(RULES.clone(), sigwatch::Options::default()).unwrap();
            let mut out = Vec::new();
            for l in &lines {
                e.push_line(&Source::named("s"), l, None, &mut out);
            }
            e.finish(&mut out);
            serde_json::to_string(&out).unwrap()
        };
        prop_assert_eq!(run(), run());
    }

    #[test]
    fn the_rule_loader_rejects_or_accepts_but_never_panics(text in loggy()) {
        let _ = sigwatch::rules::compile(&[("fuzz.yaml".into(), text.clone())]);
        let _ = sigwatch::config::parse("fuzz.yaml", &text);
    }

    #[test]
    fn loki_parsers_never_panic(body in loggy()) {
        let _ = sigwatch::source::loki::parse_streams(&body);
        let _ = sigwatch::source::loki::tail::parse_frame(&body);
        let _ = sigwatch::source::loki::may_match_loki_itself(&body);
    }

    #[test]
    fn blocks_and_lines_agree_whatever_the_lines(lines in prop::collection::vec(loggy(), 1..40), cut in 1usize..8) {
        // Same notifications and counters, line by line or in blocks with
        // the block scan's hints (any bytes; newlines inside become lines).
        let flat: Vec<String> = lines.iter().flat_map(|l| l.split('\n').map(str::to_string)).collect();
        let by_line = {
            let mut e = sigwatch::Engine::new(RULES.clone(), sigwatch::Options::default()).unwrap();
            let mut out = Vec::new();
            for l in &flat {
                e.push_line(&Source::named("s"), l, None, &mut out);
            }
            e.finish(&mut out);
            (serde_json::to_string(&out).unwrap(), serde_json::to_string(&e.stats()).unwrap())
        };
        let by_block = {
            let mut e = sigwatch::Engine::new(RULES.clone(), sigwatch::Options::default()).unwrap();
            let scanner = e.scanner().get();
            let mut out = Vec::new();
            for chunk in flat.chunks(cut) {
                let b = sigwatch::source::block::Block::from_lines(chunk.iter().map(|l| (0, l.as_str())));
                let h = scanner.scan(&b.data);
                e.push_block(&[Source::named("s")], &b, &h, &mut out);
            }
            e.finish(&mut out);
            (serde_json::to_string(&out).unwrap(), serde_json::to_string(&e.stats()).unwrap())
        };
        prop_assert_eq!(by_block, by_line);
    }

    #[test]
    fn field_hints_give_the_spans_of_a_per_line_scan(lines in prop::collection::vec(loggy(), 1..20)) {
        let d = Decoder::with_group_keys(&KeyConfig::default(), false, &["node".into(), "pod".into(), "upstream".into()]);
        let ix = d.key_index();
        let block: String = lines.iter().map(|l| format!("{}\n", l.replace('\n', " "))).collect();
        let mut hits = Vec::new();
        ix.search(block.as_bytes(), |s, p| hits.push((s, p)));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut start = 0;
        for line in block.split_inclusive('\n') {
            let text = &line[..line.len() - 1];
            let end = start + text.len();
            ix.scan(text, &mut a);
            ix.fill(text, hits.iter().filter(|(s, _)| *s >= start && *s < end).map(|(s, p)| (s - start, *p)), &mut b);
            let va: Vec<_> = a.iter().map(|s| s.and_then(|s| s.value(text).map(|v| v.into_owned()))).collect();
            let vb: Vec<_> = b.iter().map(|s| s.and_then(|s| s.value(text).map(|v| v.into_owned()))).collect();
            prop_assert_eq!(va, vb, "{}", text);
            start += line.len();
        }
    }
}
