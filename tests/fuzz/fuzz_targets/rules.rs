//! The rule loader and the configuration loader on arbitrary text: they
//! accept or reject with located errors, never panic, never run away.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).into_owned();
    if let Ok(set) = sigwatch::rules::compile(&[("fuzz.yaml".into(), text.clone())]) {
        // A set that compiles must also build a matcher and check its examples.
        let _ = sigwatch::check_examples(&set);
        let _ = sigwatch::Engine::new(set, sigwatch::Options::default());
    }
    let _ = sigwatch::config::parse("fuzz.yaml", &text);
});
