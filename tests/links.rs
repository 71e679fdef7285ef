//! Links from notifications back to their lines, for files: every sample
//! of every notification names `file:line`, and that line of that file is
//! the sample's, with several files merged by time (each numbered on its
//! own). Loki's links are tested against the in-test Loki in loki.rs.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;

use common::BIN;
use std::path::Path;
use std::process::Command;

fn sample_in(sample: &str, line: &str) -> bool {
    line.contains(sample.strip_suffix('…').unwrap_or(sample))
}

#[test]
fn file_samples_name_their_file_and_line() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let files = [
        dir.join("livekit-redis-outage.log"),
        dir.join("egress-black-hole.log"),
    ];
    let out = Command::new(BIN)
        .args(["replay", "--no-summary", "--output", "json"])
        .args(&files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let texts: Vec<(String, Vec<String>)> = files
        .iter()
        .map(|f| {
            let t = std::fs::read_to_string(f).unwrap();
            (
                f.display().to_string(),
                t.lines().map(str::to_string).collect(),
            )
        })
        .collect();
    let mut checked = std::collections::BTreeSet::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let n: serde_json::Value = serde_json::from_str(line).unwrap();
        let samples = n["samples"].as_array().unwrap();
        let at = n["links"]["lines"]
            .as_array()
            .unwrap_or_else(|| panic!("links: {n}"));
        assert_eq!(at.len(), samples.len(), "one place per sample: {n}");
        assert!(n["links"].get("loki").is_none(), "no Loki link from files");
        for (s, a) in samples.iter().zip(at) {
            let (file, no) = a.as_str().unwrap().rsplit_once(':').unwrap();
            let no: usize = no.parse().unwrap();
            let (_, lines) = texts
                .iter()
                .find(|t| t.0 == file)
                .unwrap_or_else(|| panic!("{file}"));
            assert!(
                sample_in(s.as_str().unwrap(), &lines[no - 1]),
                "{}: {file}:{no} is {:?}, the sample {s}",
                n["rule"],
                lines[no - 1]
            );
            checked.insert(file.to_string());
        }
    }
    assert_eq!(checked.len(), 2, "samples of both files: {checked:?}");
}

#[test]
fn no_links_leaves_them_out() {
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/egress-black-hole.log");
    let out = Command::new(BIN)
        .args(["replay", "--no-summary", "--output", "json", "--no-links"])
        .arg(&log)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.is_empty());
    assert!(!text.contains("\"links\""), "{text}");
}
