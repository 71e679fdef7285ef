//! The HTML report and the live status page in a real browser: Debian's
//! `chromium` (installed by `.ci/run`), headless, runs the pages' own
//! JavaScript and dumps the DOM it built, which the tests read.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;
use common::{free_port, Killed, BIN};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn chromium() -> String {
    let b = std::env::var("SIGWATCH_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&b).exists(),
        "{b} not found: install it with `apt-get install -y chromium` (bash .ci/run does)"
    );
    b
}

/// The DOM of `url` after its scripts ran (up to `budget_ms` of virtual
/// time), in a window `width` pixels wide when given.
fn chromium_dom(url: &str, budget_ms: u32, width: Option<u32>) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--headless=new".to_string(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--disable-dev-shm-usage".into(),
        "--no-first-run".into(),
        format!("--user-data-dir={}", profile.path().display()),
        format!("--virtual-time-budget={budget_ms}"),
    ];
    if let Some(w) = width {
        args.push(format!("--window-size={w},900"));
    }
    args.extend(["--dump-dom".to_string(), url.to_string()]);
    let out = Command::new(chromium())
        .args(&args)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium failed on {url}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The DOM of `url` after its scripts ran (up to `budget_ms` of virtual time).
fn dump_dom(url: &str, budget_ms: u32) -> String {
    chromium_dom(url, budget_ms, None)
}

/// Values of `attr` on elements whose class attribute is exactly `class`.
fn attrs(dom: &str, tag: &str, class: &str, attr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let open = format!("<{tag} ");
    for piece in dom.split(&open).skip(1) {
        let head = &piece[..piece.find('>').unwrap_or(piece.len())];
        if !head.contains(&format!("class=\"{class}\"")) {
            continue;
        }
        let key = format!("{attr}=\"");
        if let Some(i) = head.find(&key) {
            let v = &head[i + key.len()..];
            out.push(v[..v.find('"').unwrap_or(v.len())].to_string());
        }
    }
    out
}

fn count_class_prefix(dom: &str, tag: &str, prefix: &str) -> usize {
    dom.split(&format!("<{tag} "))
        .skip(1)
        .filter(|p| {
            let head = &p[..p.find('>').unwrap_or(p.len())];
            head.contains(&format!("class=\"{prefix}"))
        })
        .count()
}

fn fixture(name: &str) -> String {
    format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_redis_outage_report_shows_7_lanes_13_alert_bars_and_1_incident() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("incident.html");
    let out = Command::new(BIN)
        .args(["replay", "--no-summary", "--log-level", "error", "--report"])
        .arg(&report)
        .arg(fixture("livekit-redis-outage.log"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Per-alert delivery is unchanged by the report.
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 14);
    let html = std::fs::read_to_string(&report).unwrap();
    // Self-contained: nothing fetched from anywhere.
    for external in [
        "<script src",
        "<link ",
        "src=\"http",
        "href=\"http",
        "url(http",
        "@import",
    ] {
        assert!(!html.contains(external), "the report references {external}");
    }

    let dom = dump_dom(&format!("file://{}", report.display()), 2000);
    let lanes = attrs(&dom, "g", "lane", "data-lane");
    assert_eq!(lanes.len(), 7, "{lanes:?}");
    assert_eq!(lanes[0], "cluster");
    for node in [
        "ND_0rLGlkoMXGjt",
        "ND_8dWKnHfDNxSI",
        "ND_FjbD0kH8Oool",
        "ND_taWr4Y9OJFLJ",
        "ND_xPFkThf4VucS",
        "ND_y40UVsWmflzd",
    ] {
        assert!(
            lanes.iter().any(|l| l == node),
            "no lane for {node}: {lanes:?}"
        );
    }
    assert_eq!(count_class_prefix(&dom, "rect", "alert "), 13, "alert bars");
    // The cluster alert resolved; the 12 per-node ones still fire at the end.
    assert_eq!(
        count_class_prefix(&dom, "rect", "alert sev-critical open"),
        12
    );
    let incidents = attrs(&dom, "rect", "incident", "data-incident");
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    assert!(incidents[0].starts_with("inc-"));
    // Hits drawn, in every node lane.
    assert!(count_class_prefix(&dom, "rect", "hit") > 100);
    // The incident card tells the chain.
    assert!(
        dom.contains("Redis unreachable from many LiveKit nodes (recovered) → LiveKit node failed to mark itself as draining on 6 nodes → LiveKit node stuck draining on 6 nodes"),
        "{}",
        &dom[..dom.len().min(3000)]
    );
}

#[test]
fn a_long_busy_replay_gives_a_small_report_that_still_renders() {
    // 12 hours, 30 nodes, 120 000 lines of which 40 000 signature hits.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("busy.log");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&log).unwrap());
    let t0 = 1_764_000_000.0f64;
    for i in 0..120_000u64 {
        let t = t0 + i as f64 * 0.36;
        let node = format!("ND_busy{:02}", (i / 3) % 30);
        let line = if i % 3 == 0 {
            format!(
                r#"{{"level":"error","ts":{t:.3},"logger":"livekit","msg":"failed to mark as draining","nodeID":"{node}","error":"could not register node: dial tcp 10.1.2.3:6379: i/o timeout"}}"#
            )
        } else {
            format!(
                r#"{{"level":"info","ts":{t:.3},"logger":"livekit.room","msg":"participant active","nodeID":"{node}","room":"r{i}"}}"#
            )
        };
        writeln!(f, "{line}").unwrap();
    }
    drop(f);
    let report = dir.path().join("busy.html");
    let out = Command::new(BIN)
        .args(["replay", "--no-summary", "--log-level", "error", "--report"])
        .arg(&report)
        .arg(&log)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let size = std::fs::metadata(&report).unwrap().len();
    assert!(size < 2_000_000, "report is {size} bytes");
    let dom = dump_dom(&format!("file://{}", report.display()), 4000);
    assert_eq!(attrs(&dom, "g", "lane", "data-lane").len(), 31);
    let hits = count_class_prefix(&dom, "rect", "hit");
    // Two rules match those lines (drain failed, Redis unreachable): at most
    // 600 buckets each per lane, however many lines.
    assert!(hits > 60 && hits <= 2 * 30 * 601, "{hits} hit marks");
}

/// The text content of elements whose class attribute starts with
/// `prefix` (up to the first child element).
fn texts(dom: &str, tag: &str, prefix: &str) -> Vec<String> {
    dom.split(&format!("<{tag} "))
        .skip(1)
        .filter_map(|p| {
            let end = p.find('>')?;
            if !p[..end].contains(&format!("class=\"{prefix}")) {
                return None;
            }
            let body = &p[end + 1..];
            Some(body[..body.find('<').unwrap_or(body.len())].to_string())
        })
        .collect()
}

/// The DOM of `url` in a window `width` pixels wide.
fn dump_dom_at(url: &str, width: u32) -> String {
    chromium_dom(url, 2000, Some(width))
}

fn report_of(fixture_name: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let report = dir.join(format!("{fixture_name}.html"));
    let out = Command::new(BIN)
        .args(["replay", "--no-summary", "--log-level", "error", "--report"])
        .arg(&report)
        .arg(fixture(&format!("{fixture_name}.log")))
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    report
}

/// The numeric `attr` of the first element whose class starts with `prefix`.
fn first_attr(dom: &str, tag: &str, prefix: &str, attr: &str) -> f64 {
    let piece = dom
        .split(&format!("<{tag} "))
        .skip(1)
        .find(|p| p[..p.find('>').unwrap_or(p.len())].contains(&format!("class=\"{prefix}")))
        .unwrap_or_else(|| panic!("no <{tag} class={prefix}…>"));
    let key = format!(" {attr}=\"");
    let head = format!(" {}", &piece[..piece.find('>').unwrap()]);
    let i = head.find(&key).unwrap() + key.len();
    head[i..i + head[i..].find('"').unwrap()].parse().unwrap()
}

#[test]
fn the_report_labels_bars_rounds_ticks_names_pods_and_shows_the_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let report = report_of("livekit-redis-outage", dir.path());
    let dom = dump_dom(&format!("file://{}", report.display()), 2000);

    // Every alert bar carries its rule and severity.
    let labels = texts(&dom, "text", "alert-label");
    assert_eq!(labels.len(), 13, "{labels:?}");
    assert_eq!(
        labels
            .iter()
            .filter(|l| *l == "livekit.drain_stuck · critical")
            .count(),
        6,
        "{labels:?}"
    );
    assert!(labels.contains(&"livekit.redis_unreachable · critical".to_string()));

    // Round ticks (a 35-minute window: every 5 minutes), with the date and
    // the zone.
    let ticks = texts(&dom, "text", "tick-label");
    assert!(ticks.len() >= 4, "{ticks:?}");
    for t in &ticks {
        let (h, m) = t.split_once(':').unwrap();
        assert!(h.len() == 2 && m.len() == 2, "{t}");
        assert_eq!(
            m.parse::<u32>().unwrap() % 5,
            0,
            "not a round tick: {ticks:?}"
        );
    }
    assert!(texts(&dom, "text", "tick-date").contains(&"2025-07-01".to_string()));
    assert!(texts(&dom, "text", "zone").contains(&"time (UTC)".to_string()));

    // Each node's lane names its pod.
    let lanes = attrs(&dom, "g", "lane", "data-lane");
    let pods = attrs(&dom, "g", "lane", "data-pod");
    assert_eq!(pods.len(), 6, "{lanes:?} {pods:?}");
    assert!(
        pods.iter().all(|p| p.starts_with("livekit-server-")),
        "{pods:?}"
    );
    assert!(dom.contains("livekit-server-1c17149d4-wfxmw"));

    // The baseline: the volume of all lines starts ten minutes before the
    // first signature hit (the fixture's quiet start).
    let first_volume = first_attr(&dom, "rect", "vol", "x");
    let first_hit = first_attr(&dom, "rect", "hit", "x");
    assert!(
        first_hit - first_volume > 100.0,
        "volume from x={first_volume}, first hit at x={first_hit}"
    );
    assert!(
        dom.contains("4,092 lines"),
        "the volume lane counts every line"
    );
}

#[test]
fn a_black_hole_stands_out_against_every_healthy_peer() {
    let dir = tempfile::tempdir().unwrap();
    let report = report_of("egress-black-hole", dir.path());
    let dom = dump_dom(&format!("file://{}", report.display()), 2000);
    let lanes = attrs(&dom, "g", "lane", "data-lane");
    // The bad node and its three healthy peers, which have no hit at all.
    for node in [
        "NE_2rANN76DeYtZ",
        "NE_4soCmZ9cpvnp",
        "NE_hOoSfAqFdpRa",
        "NE_tGADdzfLrjMc",
    ] {
        assert!(
            lanes.iter().any(|l| l == node),
            "no lane for {node}: {lanes:?}"
        );
    }
    assert_eq!(lanes.len(), 4, "4 nodes, no empty cluster lane: {lanes:?}");
    assert!(
        count_class_prefix(&dom, "rect", "seen") > 30,
        "peers drawn alive"
    );
    let subs = texts(&dom, "text", "lane-sub");
    assert!(
        subs.iter().any(|s| s.contains("100% of egress.black_hole")),
        "{subs:?}"
    );
    assert_eq!(
        subs.iter().filter(|s| s.contains("0 hits · peer")).count(),
        3,
        "{subs:?}"
    );
    // The share alert is drawn on the node it names.
    let dom_black = dom.split("data-lane=\"NE_2rANN76DeYtZ\"").nth(1).unwrap();
    let lane = &dom_black[..dom_black.find("</g>").unwrap()];
    assert!(lane.contains("egress.black_hole · critical"), "{lane}");
}

#[test]
fn the_chart_is_as_wide_as_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let report = report_of("egress-black-hole", dir.path());
    let url = format!("file://{}", report.display());
    let width = |dom: &str| -> f64 {
        let i = dom.find("<svg ").unwrap();
        let head = &dom[i..i + dom[i..].find('>').unwrap()];
        let k = head.find(" width=\"").unwrap() + 8;
        head[k..k + head[k..].find('"').unwrap()].parse().unwrap()
    };
    let narrow = width(&dump_dom_at(&url, 1000));
    let wide = width(&dump_dom_at(&url, 1800));
    assert!(narrow > 800.0 && narrow < 1000.0, "{narrow}");
    assert!(wide > 1600.0 && wide < 1800.0, "{wide}");
}

/// What the page's script drew, measured in the browser: `report` with a
/// script appended after the report's own (which draws as it runs), in a
/// window `width` pixels wide. The script leaves a JSON text in
/// `<pre id="probe">`: the svg's width, the chart's scroll and client
/// widths, the boxes (x, y, width, height) of the incident ids, of the
/// incident outlines and of every mark and text of the lanes, the widths
/// of the incident cards' lines, and the colours (as [r, g, b]) of the
/// severities and of each rule's hit marks and legend key.
fn probe(report: &std::path::Path, width: u32) -> serde_json::Value {
    const SCRIPT: &str = r##"<script>(function () {
  function rgb(c) {
    var e = document.createElement("i");
    e.style.color = c;
    document.body.appendChild(e);
    var v = getComputedStyle(e).color.match(/[\d.]+/g).slice(0, 3).map(Number);
    e.remove();
    return v;
  }
  function box(e) { var b = e.getBBox(); return [b.x, b.y, b.width, b.height]; }
  function all(sel) { return [].slice.call(document.querySelectorAll(sel)); }
  var svg = document.getElementById("timeline"), chart = document.getElementById("chart");
  var root = getComputedStyle(document.documentElement), fills = {}, keys = {}, keyWidth = {};
  all("#timeline rect.hit").forEach(function (r) { fills[r.getAttribute("data-rule")] = rgb(r.getAttribute("fill")); });
  all("#legend span").forEach(function (s) {
    var i = s.querySelector("i");
    if (i) keyWidth[s.textContent] = i.getBoundingClientRect().width;
    if (i && s.textContent in fills) keys[s.textContent] = rgb(getComputedStyle(i).backgroundColor);
  });
  var out = {
    svg_width: +svg.getAttribute("width"),
    chart: [chart.scrollWidth, chart.clientWidth],
    ids: all("#timeline text.incident-label").map(function (t) { return { id: t.textContent, box: box(t) }; }),
    outlines: all("#timeline rect.incident, #timeline rect.incident-part").map(box),
    marks: all("#timeline .lane rect.hit, #timeline .lane rect.seen, #timeline .lane rect.alert, #timeline .lane text").map(box),
    cards: all(".incident-card .meta").map(function (m) { return [m.scrollWidth, m.clientWidth]; }),
    severities: ["critical", "warning", "info"].map(function (s) { return rgb(root.getPropertyValue("--" + s)); }),
    fills: fills,
    keys: keys,
    key_width: keyWidth
  };
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();</script>"##;
    let html = std::fs::read_to_string(report).unwrap();
    let at = html.rfind("</body>").unwrap();
    let probed = report.with_extension("probe.html");
    std::fs::write(&probed, format!("{}{SCRIPT}{}", &html[..at], &html[at..])).unwrap();
    let dom = dump_dom_at(&format!("file://{}", probed.display()), width);
    let start = dom.find("<pre id=\"probe\">").expect("the probe ran") + 16;
    let text = &dom[start..start + dom[start..].find("</pre>").unwrap()];
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&text).unwrap()
}

/// A box of [`probe`] as (x0, y0, x1, y1).
fn rect(b: &serde_json::Value) -> (f64, f64, f64, f64) {
    let v: Vec<f64> = b
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_f64().unwrap())
        .collect();
    (v[0], v[1], v[0] + v[2], v[1] + v[3])
}

/// Whether two boxes share some area.
fn overlap(a: (f64, f64, f64, f64), b: (f64, f64, f64, f64)) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

#[test]
fn no_lane_is_drawn_empty_and_the_black_hole_report_has_no_cluster_lane() {
    let dir = tempfile::tempdir().unwrap();
    for (name, cluster) in [
        ("egress-black-hole", false),
        ("livekit-redis-outage", true),
        ("k8s-liveness-cascade", true),
    ] {
        let report = report_of(name, dir.path());
        let dom = dump_dom(&format!("file://{}", report.display()), 2000);
        let lanes = attrs(&dom, "g", "lane", "data-lane");
        assert!(!lanes.is_empty(), "{name}: no lane");
        // Every lane drawn carries a mark: a hit, a sighting or an alert.
        for piece in dom.split("<g class=\"lane\"").skip(1) {
            let lane = &piece[..piece.find("</g>").unwrap()];
            let marks = ["class=\"hit\"", "class=\"seen\"", "class=\"alert "]
                .iter()
                .map(|m| lane.matches(m).count())
                .sum::<usize>();
            assert!(marks > 0, "{name}: an empty lane: <g class=\"lane\"{lane}");
        }
        // The cluster lane only when a cluster-wide alert is on it (the
        // black hole's share alert names its node, so it has none).
        assert_eq!(
            lanes.iter().any(|l| l == "cluster"),
            cluster,
            "{name}: {lanes:?}"
        );
    }
}

/// An sRGB colour in CIELAB (D65).
fn lab(c: &serde_json::Value) -> [f64; 3] {
    let lin = |v: f64| {
        let v = v / 255.0;
        if v <= 0.04045 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    };
    let v: Vec<f64> = c
        .as_array()
        .unwrap()
        .iter()
        .map(|n| lin(n.as_f64().unwrap()))
        .collect();
    let (r, g, b) = (v[0], v[1], v[2]);
    let x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047;
    let y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
    let z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
    let f = |t: f64| {
        if t > 0.008856 {
            t.cbrt()
        } else {
            7.787 * t + 16.0 / 116.0
        }
    };
    [
        116.0 * f(y) - 16.0,
        500.0 * (f(x) - f(y)),
        200.0 * (f(y) - f(z)),
    ]
}

/// The colour difference ΔE*ab (CIE76) of two colours of [`probe`].
fn delta_e(a: &serde_json::Value, b: &serde_json::Value) -> f64 {
    let (a, b) = (lab(a), lab(b));
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

/// The hue angle (degrees, CIELAB) of a colour, when it has one.
fn hue(c: &serde_json::Value) -> Option<f64> {
    let l = lab(c);
    (l[1].hypot(l[2]) > 12.0).then(|| l[2].atan2(l[1]).to_degrees().rem_euclid(360.0))
}

#[test]
fn rule_colours_stand_apart_from_the_severity_colours_and_from_each_other() {
    let dir = tempfile::tempdir().unwrap();
    // Rules 0 and 5 of the pack (drain_failed, disk_full) were drawn in the
    // blue of info and the orange of warning; the routine upgrade has hits
    // of five rules.
    for name in [
        "livekit-redis-outage",
        "egress-black-hole",
        "routine-livekit-upgrade",
    ] {
        let report = report_of(name, dir.path());
        let p = probe(&report, 1280);
        let severities = p["severities"].as_array().unwrap();
        let fills = p["fills"].as_object().unwrap();
        assert!(fills.len() >= 2, "{name}: {fills:?}");
        for (rule, c) in fills {
            for (s, sev) in severities.iter().zip(["critical", "warning", "info"]) {
                let d = delta_e(c, s);
                assert!(d >= 30.0, "{name}: {rule} {c} is {d:.1} ΔE from {sev} {s}");
                if let (Some(a), Some(b)) = (hue(c), hue(s)) {
                    let gap = (a - b).abs().min(360.0 - (a - b).abs());
                    assert!(gap >= 25.0, "{name}: {rule} {c} has the hue of {sev} {s}");
                }
            }
            for (other, o) in fills {
                if other != rule {
                    let d = delta_e(c, o);
                    assert!(d >= 15.0, "{name}: {rule} {c} and {other} {o}: {d:.1} ΔE");
                }
            }
            // The legend shows the colour the marks have.
            assert_eq!(&p["keys"][rule], c, "{name}: legend key of {rule}");
        }
        // Rule keys and severity keys differ in shape too: marks and bars.
        let widths = p["key_width"].as_object().unwrap();
        let critical = widths["critical alert"].as_f64().unwrap();
        for rule in fills.keys() {
            let w = widths[rule].as_f64().unwrap();
            assert!(
                critical >= 2.0 * w,
                "{name}: keys of {rule} {w} px, critical {critical} px"
            );
        }
    }
}

#[test]
fn incident_ids_are_whole_and_clear_of_outlines_and_marks() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "livekit-redis-outage",
        "egress-black-hole",
        "grpc-slow-auth",
        "k8s-liveness-cascade",
    ] {
        let report = report_of(name, dir.path());
        for width in [800, 1280, 1800] {
            let p = probe(&report, width);
            let at = format!("{name} at {width} px");
            let svg = p["svg_width"].as_f64().unwrap();
            let ids = p["ids"].as_array().unwrap();
            assert_eq!(ids.len(), 1, "{at}: {ids:?}");
            // Nothing of the chart is hidden past its right edge.
            let (scroll, client) = (
                p["chart"][0].as_f64().unwrap(),
                p["chart"][1].as_f64().unwrap(),
            );
            assert!(
                scroll <= client,
                "{at}: the chart scrolls {scroll} > {client}"
            );
            for card in p["cards"].as_array().unwrap() {
                assert!(
                    card[0].as_f64() <= card[1].as_f64(),
                    "{at}: a card clipped: {card}"
                );
            }
            for id in ids {
                let b = rect(&id["box"]);
                assert!(id["id"].as_str().unwrap().starts_with("inc-"), "{at}: {id}");
                assert!(
                    b.0 >= 0.0 && b.2 <= svg - 2.0,
                    "{at}: {id} past the edge of the {svg} px chart"
                );
                // No edge of an outline (1.5 px strokes) runs through it.
                for o in p["outlines"].as_array().unwrap() {
                    let (x0, y0, x1, y1) = rect(o);
                    for edge in [
                        (x0 - 0.75, y0, x0 + 0.75, y1),
                        (x1 - 0.75, y0, x1 + 0.75, y1),
                        (x0, y0 - 0.75, x1, y0 + 0.75),
                        (x0, y1 - 0.75, x1, y1 + 0.75),
                    ] {
                        assert!(!overlap(b, edge), "{at}: {id} crosses an outline {o}");
                    }
                }
                // Nor lies on a mark, a bar or a text of a lane.
                for m in p["marks"].as_array().unwrap() {
                    assert!(!overlap(b, rect(m)), "{at}: {id} covers {m}");
                }
            }
        }
    }
}

/// A plain HTTP GET on 127.0.0.1: (status, body).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    get_with(port, path, None)
}

#[test]
fn the_live_status_page_shows_the_incident_and_the_firing_alerts_per_node() {
    let port = free_port();
    let mut child = Killed(
        Command::new(BIN)
            .args([
                "run",
                "--log-level",
                "error",
                "--listen",
                &format!("127.0.0.1:{port}"),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Feed the outage and keep stdin open: the process keeps serving.
    let mut stdin = child.0.stdin.take().unwrap();
    stdin
        .write_all(&std::fs::read(fixture("livekit-redis-outage.log")).unwrap())
        .unwrap();
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        assert!(Instant::now() < deadline, "no status with 12 firing alerts");
        if let Some((200, body)) = get(port, "/api/status") {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            if v["firing"].as_array().map_or(0, |a| a.len()) == 12 {
                break v;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(status["incidents"].as_array().unwrap().len(), 1);
    let (code, page) = get(port, "/").unwrap();
    assert_eq!(code, 200);
    assert!(page.contains("api/status"));

    let dom = dump_dom(&format!("http://127.0.0.1:{port}/"), 5000);
    let nodes = attrs(&dom, "tr", "node-row", "data-node");
    assert_eq!(nodes.len(), 6, "{nodes:?}");
    assert_eq!(count_class_prefix(&dom, "div", "firing-alert"), 12);
    let cards = attrs(
        &dom,
        "div",
        "card incident-card sev-critical",
        "data-incident",
    );
    assert_eq!(cards.len(), 1, "one open incident card");
    assert_eq!(
        cards[0],
        status["incidents"][0]["id"].as_str().unwrap(),
        "the page shows the API's incident"
    );
    assert!(dom.contains("6 nodes, all still affected"));
    // Ages by the wall clock, and a link to the report of the run.
    let ages = texts(&dom, "span", "age");
    assert_eq!(ages.len(), 12, "{ages:?}");
    assert!(
        ages.iter().all(|a| a.starts_with("firing for ")),
        "{ages:?}"
    );
    assert!(dom.contains("href=\"report\""));
    let (code, html) = get(port, "/report").unwrap();
    assert_eq!(code, 200);
    assert!(html.contains("sigwatch report — live — stdin"));
    let dom = dump_dom(&format!("http://127.0.0.1:{port}/report"), 3000);
    assert_eq!(count_class_prefix(&dom, "text", "alert-label"), 13);
    assert_eq!(attrs(&dom, "g", "lane", "data-lane").len(), 7);
    drop(stdin);
}

#[test]
fn the_status_page_loads_in_a_browser_with_basic_auth() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let hash = bcrypt::hash("pw-of-alice", 4).unwrap();
    let config = dir.path().join("sigwatch.yaml");
    std::fs::write(
        &config,
        format!("web:\n  basic_auth_users:\n    alice: '{hash}'\n"),
    )
    .unwrap();
    let mut child = Killed(
        Command::new(BIN)
            .args(["run", "--log-level", "error", "--config"])
            .arg(&config)
            .arg(format!("--listen=127.0.0.1:{port}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut stdin = child.0.stdin.take().unwrap();
    stdin
        .write_all(&std::fs::read(fixture("livekit-redis-outage.log")).unwrap())
        .unwrap();
    stdin.flush().unwrap();
    // Wait (bounded) for the firing alerts, through the same credential.
    let auth = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode("alice:pw-of-alice")
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "no status with 12 firing alerts");
        if let Some((200, body)) = get_with(port, "/api/status", Some(&format!("Basic {auth}"))) {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            if v["firing"].as_array().map_or(0, |a| a.len()) == 12 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // Without the credential the browser gets the 401 page only.
    let dom = dump_dom(&format!("http://127.0.0.1:{port}/"), 2000);
    assert_eq!(count_class_prefix(&dom, "div", "firing-alert"), 0);
    assert!(!dom.contains("node-row"), "{dom}");
    // With it (user and password in the address, as a person types them
    // into the browser's prompt) the page and its data load.
    let dom = dump_dom(&format!("http://alice:pw-of-alice@127.0.0.1:{port}/"), 5000);
    assert_eq!(count_class_prefix(&dom, "div", "firing-alert"), 12, "{dom}");
    assert_eq!(attrs(&dom, "tr", "node-row", "data-node").len(), 6);
    drop(stdin);
}

/// [`get`] with an `Authorization` header when given.
fn get_with(port: u16, path: &str, authorization: Option<&str>) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let auth = authorization.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let status = buf.split(' ').nth(1)?.parse().ok()?;
    let body = buf.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

#[test]
fn the_status_page_shows_a_resolution_held_for_its_flap_window() {
    let port = free_port();
    let mut child = Killed(
        Command::new(BIN)
            .args(["run", "--log-level", "error"])
            .arg(format!("--listen=127.0.0.1:{port}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut stdin = child.0.stdin.take().unwrap();
    let t0 = 1_714_570_000i64;
    writeln!(
        stdin,
        "{}\n{}",
        format_args!(r#"{{"level":"error","ts":{t0}.000,"logger":"egress","msg":"No space left on the resource.","nodeID":"NE_fl4p"}}"#),
        format_args!(r#"{{"level":"debug","ts":{}.000,"logger":"egress","msg":"cpu check","nodeID":"NE_other"}}"#, t0 + 21 * 60),
    )
    .unwrap();
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "no held resolution on /api/status"
        );
        if let Some((200, body)) = get(port, "/api/status") {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            if v["flapping"].as_array().is_some_and(|a| a.len() == 1) {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let dom = dump_dom(&format!("http://127.0.0.1:{port}/"), 5000);
    let held = attrs(&dom, "div", "card flapping sev-critical", "data-flapping");
    assert_eq!(held, ["egress.disk_full/NE_fl4p"], "{dom}");
    assert!(dom.contains("1 resolution(s) held for the flap window"));
    assert!(dom.contains("sent as resolved at 2024-05-01T13:51:40.000Z unless it fires again"));
    drop(stdin);
}
