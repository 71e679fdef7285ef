//! Every fixture's notifications, byte for byte, are the ones recorded in
//! `fixtures/golden/` by a line-at-a-time pipeline: buffer-level scanning,
//! the reader thread and population sampling change no alert, no time, no
//! count, no annotation (spread's "N of M nodes" and share's percentages
//! included).
//!
//! Links (`links`) name the fixture's path, which differs per
//! checkout: they are left out here (`--no-links`) and tested in
//! tests/links.rs.
//!
//! After an intended change of output, rewrite them with
//! `SIGWATCH_BLESS=1 cargo test --test golden` and review the diff.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;

use common::BIN;
use std::path::Path;
use std::process::Command;

#[test]
fn every_fixture_replays_to_its_recorded_notifications() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut checked = 0;
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    names.sort();
    let mut failures = Vec::new();
    for log in names {
        let stem = log.file_stem().unwrap().to_string_lossy().into_owned();
        let golden = dir.join("golden").join(format!("{stem}.ndjson"));
        let out = Command::new(BIN)
            .args([
                "replay",
                "--no-summary",
                "--no-links",
                "--log-level",
                "error",
            ])
            .arg(&log)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{stem}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if std::env::var_os("SIGWATCH_BLESS").is_some() {
            std::fs::write(&golden, &out.stdout).unwrap();
        }
        let want = std::fs::read(&golden).unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
        if out.stdout != want {
            failures.push(format!(
                "{stem}:\n--- recorded\n{}\n+++ now\n{}",
                String::from_utf8_lossy(&want),
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        checked += 1;
    }
    assert!(checked >= 7, "fixtures found: {checked}");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
