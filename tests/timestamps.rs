//! `kubectl logs --timestamps` and `stern --timestamps` put the container
//! runtime's stamp before every line (after the `--prefix` when there is
//! one). Fetched that way, every fixture must raise the alerts its plain
//! shape raises — same rules, groups, states and counts — and the quiet day
//! must page nothing: the stamp is a wrapper, the line behind it is
//! decoded as it would be alone.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use serde_json::Value;
use sigwatch::clock::format_rfc3339;
use sigwatch::decode::peek_time;
use sigwatch::source::Source;
use sigwatch::{Engine, Options};
use std::path::Path;

fn fixture(name: &str) -> Vec<String> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    String::from_utf8_lossy(&std::fs::read(&p).unwrap())
        .lines()
        .map(str::to_string)
        .collect()
}

fn fixtures() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    assert!(names.len() >= 7, "{names:?}");
    names
}

/// (state, rule, group, count) of every notification.
fn alerts(lines: &[String]) -> Vec<(String, String, String, u64)> {
    let mut e = Engine::new(sigwatch::rules::load_builtin().unwrap(), Options::default()).unwrap();
    let src = Source::named("f");
    let mut out = Vec::new();
    for l in lines {
        e.push_line(&src, l, None, &mut out);
    }
    e.finish(&mut out);
    out.iter()
        .map(|n| {
            let v: Value = serde_json::to_value(n).unwrap();
            (
                v["state"].as_str().unwrap_or("").to_string(),
                v["rule"].as_str().unwrap_or("").to_string(),
                v["group"].as_str().unwrap_or("").to_string(),
                v["count"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// The line's prefix (`[pod/P/C] `, or stern's `POD CONTAINER `) and
/// the rest.
fn split_prefix(l: &str) -> (&str, &str) {
    if let Some(rest) = l.strip_prefix("[pod/") {
        if let Some(i) = rest.find("] ") {
            return l.split_at(5 + i + 2);
        }
    }
    if let Some((p, r)) = sigwatch::decode::wrapper::stern_prefix(l) {
        let _ = p;
        return l.split_at(l.len() - r.len());
    }
    ("", l)
}

/// The time the runtime would have stamped on each line: its own time,
/// else the time of the line before (the first lines: the first time), a
/// millisecond later (written, then received).
fn receive_times(lines: &[String]) -> Vec<i64> {
    let mut times: Vec<Option<i64>> = Vec::new();
    let mut prev = None;
    for l in lines {
        let t = peek_time(l, prev, None).or(prev);
        prev = t;
        times.push(t);
    }
    let first = times.iter().flatten().next().copied().unwrap_or(0);
    times
        .into_iter()
        .map(|t| t.unwrap_or(first) + 1_000_000)
        .collect()
}

/// stern's `--timestamps=short`: `MM-DD HH:MM:SS` (here in UTC).
fn short(ns: i64) -> String {
    let full = format_rfc3339(ns);
    format!("{} {}", &full[5..10], &full[11..19])
}

/// kubectl's RFC 3339 with nanoseconds.
fn nano(ns: i64) -> String {
    let full = format_rfc3339(ns);
    format!("{}.{:09}Z", &full[..19], ns.rem_euclid(1_000_000_000))
}

/// The lines as fetched with a stamp before each (after its prefix, if
/// `keep_prefix`; without prefixes otherwise).
fn stamped(lines: &[String], keep_prefix: bool, stamp: fn(i64) -> String) -> Vec<String> {
    let times = receive_times(lines);
    lines
        .iter()
        .zip(times)
        .map(|(l, t)| {
            let (prefix, rest) = split_prefix(l);
            let prefix = if keep_prefix { prefix } else { "" };
            format!("{prefix}{} {rest}", stamp(t))
        })
        .collect()
}

fn unprefixed(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| split_prefix(l).1.to_string())
        .collect()
}

#[test]
fn every_fixture_fetched_with_timestamps_raises_its_plain_alerts() {
    let mut checked = 0;
    for name in fixtures() {
        let lines = fixture(&name);
        let plain = alerts(&lines);
        let bare = alerts(&unprefixed(&lines));
        for (shape, got, want) in [
            (
                "kubectl --timestamps --prefix",
                alerts(&stamped(&lines, true, nano)),
                &plain,
            ),
            (
                "stern --timestamps=short",
                alerts(&stamped(&lines, true, short)),
                &plain,
            ),
            (
                "kubectl --timestamps (no prefix)",
                alerts(&stamped(&lines, false, nano)),
                &bare,
            ),
        ] {
            assert_eq!(&got, want, "{name}, {shape}");
            checked += 1;
        }
        // The quiet day and the routine operations page nothing; every
        // other fixture is an incident.
        if name.starts_with("control-day") || name.starts_with("routine-") {
            assert!(plain.is_empty(), "{name}: the quiet day pages: {plain:?}");
        } else {
            assert!(!plain.is_empty(), "{name} raises nothing");
        }
    }
    assert!(checked >= 21);
}

#[test]
fn the_black_hole_fetched_with_timestamps_names_the_full_disk_node() {
    // The repro: egress logs fetched with `kubectl logs
    // --timestamps` (no prefix) gave no black-hole alert for the full-disk
    // node, and the quiet day a false one naming the file.
    let got = alerts(&stamped(&fixture("egress-black-hole.log"), false, nano));
    let firing: Vec<_> = got
        .iter()
        .filter(|(s, _, _, _)| s == "firing")
        .map(|(_, r, g, _)| (r.as_str(), g.as_str()))
        .collect();
    assert!(
        firing.contains(&("egress.black_hole", "NE_2rANN76DeYtZ")),
        "{firing:?}"
    );
    assert!(
        firing.iter().all(|(_, g)| g.starts_with("NE_")),
        "every alert names a node: {firing:?}"
    );
    assert!(alerts(&stamped(&fixture("control-day.log"), false, nano)).is_empty());
}
