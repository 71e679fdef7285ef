//! The whole detection pipeline with the built-in pack on arbitrary lines:
//! decode, match, detect, alert, in event time and with clock ticks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sigwatch::source::Source;
use std::sync::LazyLock;

static RULES: LazyLock<Option<sigwatch::rules::RuleSet>> =
    LazyLock::new(|| sigwatch::rules::load_builtin().ok());

fuzz_target!(|data: &[u8]| {
    let Some(rules) = RULES.as_ref() else { return };
    let Ok(mut e) = sigwatch::Engine::new(rules.clone(), sigwatch::Options::default()) else {
        return;
    };
    let mut out = Vec::new();
    let text = String::from_utf8_lossy(data);
    for (i, l) in text.split('\n').enumerate() {
        e.push_line(
            &Source::named(if i % 2 == 0 { "a" } else { "b" }),
            l,
            None,
            &mut out,
        );
    }
    e.advance_to(1_764_000_600_000_000_000, &mut out);
    e.finish(&mut out);
    let _ = serde_json_len(&out);
});

fn serde_json_len(out: &[sigwatch::alert::Notification]) -> usize {
    out.iter().map(|n| n.rule.len() + n.group.len()).sum()
}
