//! Decoders and cheap lookups on arbitrary bytes: every wrapper (CRI,
//! Docker, kubectl/stern prefixes, envelopes) and payload format, partial
//! reassembly across lines, and the field scanner.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sigwatch::decode::{payload, peek_time, Decoder};
use sigwatch::source::Source;
use sigwatch::decode::KeyConfig;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = payload::decode(&text, None);
    let _ = peek_time(&text, None, None);
    let _ = sigwatch::decode::quick::quick_get(&text, "nodeID");
    let _ = sigwatch::decode::quick::quick_get_path(&text, "involvedObject.name");
    let _ = peek_time(&text, Some(0), None);
    let keys = [
        "node".to_string(),
        "pod".to_string(),
        "workload".to_string(),
    ];
    let mut d = Decoder::with_group_keys(&KeyConfig::default(), true, &keys);
    for part in text.split('\n') {
        if let Some(p) = d.prepare(
            &Source::named("fuzz"),
            part,
            Some(1_764_000_000_000_000_000),
        ) {
            for id in 0..keys.len() {
                let _ = d.resolve_quick(id, &p);
            }
            let e = d.event(&p);
            let _ = e.get("nodeID");
            let _ = e.get("labels.pod");
        }
        while d.has_queued() {
            let _ = d.prepare_queued(None);
        }
    }
    let _ = d.drain_partials();
});
