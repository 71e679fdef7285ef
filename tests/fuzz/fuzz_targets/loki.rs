//! Loki response parsers on arbitrary bodies: query_range JSON (streams,
//! 2- and 3-element rows, categorize-labels), tail frames, and the
//! self-query check on selectors.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let body = String::from_utf8_lossy(data);
    let _ = sigwatch::source::loki::parse_streams(&body);
    let _ = sigwatch::source::loki::tail::parse_frame(&body);
    let _ = sigwatch::source::loki::may_match_loki_itself(&body);
});
