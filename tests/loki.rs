//! The Loki source against an in-test Loki: a real HTTP server on 127.0.0.1
//! that follows Loki's `query_range` semantics exactly (research/apis.md
//! §1): inclusive start, exclusive end, `limit` applied globally across
//! streams merged by time (a page can end in the middle of a shared
//! timestamp), 400 above 5000, 401 without `X-Scope-OrgID` when auth is on,
//! three-element rows with `categorize-labels`, plain-text errors.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;
use sigwatch::source::loki::poll::Poller;
use sigwatch::source::loki::{Entry, LokiConfig, LokiError};
use sigwatch::source::Source;
use sigwatch::{Engine, Options};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// (labels, ts, line, structured metadata)
type Stored = (
    BTreeMap<String, String>,
    i64,
    String,
    BTreeMap<String, String>,
);

#[derive(Default)]
struct Store {
    entries: Vec<Stored>,
    auth: bool,
    /// Requests to fail with 503 before serving again.
    down_for: usize,
    requests: usize,
    /// `start` of every query received.
    starts: Vec<i64>,
    /// `start` of every tail connection.
    tail_starts: Vec<i64>,
}

type Shared = Arc<Mutex<Store>>;

async fn query_range(
    axum::extract::State(st): axum::extract::State<Shared>,
    headers: axum::http::HeaderMap,
    axum::extract::Query(q): axum::extract::Query<BTreeMap<String, String>>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut s = st.lock().unwrap();
    s.requests += 1;
    let text = |code: u16, body: &str| {
        (
            axum::http::StatusCode::from_u16(code).unwrap(),
            [("content-type", "text/plain; charset=utf-8")],
            body.to_string(),
        )
            .into_response()
    };
    if s.down_for > 0 {
        s.down_for -= 1;
        return text(503, "Some services are not Running");
    }
    if s.auth && !headers.contains_key("x-scope-orgid") {
        return text(401, "no org id");
    }
    let limit: usize = q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(100);
    if limit > 5000 {
        return text(400, &format!("max entries limit per query exceeded, limit > max_entries_limit_per_query ({limit} > 5000)"));
    }
    let start: i64 = q.get("start").and_then(|v| v.parse().ok()).unwrap_or(0);
    s.starts.push(start);
    let end: i64 = q
        .get("end")
        .and_then(|v| v.parse().ok())
        .unwrap_or(i64::MAX);
    assert_eq!(q.get("direction").map(String::as_str), Some("forward"));
    // Forward: merge all streams by time, keep the first `limit` globally.
    let logql = q.get("query").map(String::as_str).unwrap_or("{}");
    let Some(matches) = logql_filter(logql) else {
        return text(400, &format!("parse error: {logql}"));
    };
    let mut sel: Vec<_> = s
        .entries
        .iter()
        .filter(|e| e.1 >= start && e.1 < end && matches(&e.0, &e.2))
        .cloned()
        .collect();
    sel.sort_by_key(|e| e.1);
    sel.truncate(limit);
    let categorize = headers
        .get("x-loki-response-encoding-flags")
        .is_some_and(|v| v == "categorize-labels");
    // Group into streams, output sorted by label string (as the frontend does).
    let mut streams: BTreeMap<String, (BTreeMap<String, String>, Vec<serde_json::Value>)> =
        BTreeMap::new();
    for (labels, ts, line, sm) in sel {
        let mut shown = labels.clone();
        if !categorize {
            shown.extend(sm.clone());
        }
        let key = format!("{shown:?}");
        let row = if categorize {
            let third = if sm.is_empty() {
                serde_json::json!({})
            } else {
                serde_json::json!({"structuredMetadata": sm})
            };
            serde_json::json!([ts.to_string(), line, third])
        } else {
            serde_json::json!([ts.to_string(), line])
        };
        streams
            .entry(key)
            .or_insert_with(|| (shown, Vec::new()))
            .1
            .push(row);
    }
    let result: Vec<_> = streams
        .into_values()
        .map(|(l, v)| serde_json::json!({"stream": l, "values": v}))
        .collect();
    let mut data = serde_json::json!({"resultType": "streams", "result": result, "stats": {}});
    if categorize {
        data["encodingFlags"] = serde_json::json!(["categorize-labels"]);
    }
    axum::Json(serde_json::json!({"status": "success", "data": data})).into_response()
}

/// The LogQL this Loki understands, enough for sigwatch's own queries and
/// links: a selector of `=`, `!=`, `=~`, `!~` matchers, then `|=`, `!=`,
/// `|~`, `!~` line filters (Go-style quoted strings, regexes anchored for
/// labels as in Loki). None: a parse error (400).
#[allow(clippy::type_complexity)]
fn logql_filter(q: &str) -> Option<Box<dyn Fn(&BTreeMap<String, String>, &str) -> bool>> {
    fn quoted(s: &str) -> Option<(String, &str)> {
        let s = s.trim_start();
        let (q, rest) = (s.chars().next()?, &s[1..]);
        if q == '`' {
            let end = rest.find('`')?;
            return Some((rest[..end].to_string(), &rest[end + 1..]));
        }
        if q != '"' {
            return None;
        }
        let mut out = String::new();
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return Some((out, &rest[i + 1..])),
                '\\' => out.push(match chars.next()?.1 {
                    'n' => '\n',
                    't' => '\t',
                    c => c,
                }),
                c => out.push(c),
            }
        }
        None
    }
    let q = q.trim();
    let inner_end = q.find('}')?;
    let selector = q.strip_prefix('{')?;
    let mut rest_sel = &selector[..inner_end - 1];
    let mut labels: Vec<(String, String, String)> = Vec::new();
    while !rest_sel.trim().is_empty() {
        let t = rest_sel.trim_start().trim_start_matches(',').trim_start();
        let name_end = t.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
        let name = t[..name_end].to_string();
        let t = t[name_end..].trim_start();
        let op = ["=~", "!~", "!=", "="]
            .into_iter()
            .find(|o| t.starts_with(o))?;
        let (value, after) = quoted(&t[op.len()..])?;
        labels.push((name, op.to_string(), value));
        rest_sel = after.trim_start().trim_start_matches(',');
    }
    let mut lines: Vec<(String, String)> = Vec::new();
    let mut rest = &q[inner_end + 1..];
    while !rest.trim().is_empty() {
        let t = rest.trim_start();
        let op = ["|=", "!=", "|~", "!~"]
            .into_iter()
            .find(|o| t.starts_with(o))?;
        let (value, after) = quoted(&t[2..])?;
        lines.push((op.to_string(), value));
        rest = after;
    }
    let label_checks: Vec<(String, String, Option<regex::Regex>, String)> = labels
        .into_iter()
        .map(|(n, op, v)| {
            let re = op
                .contains('~')
                .then(|| regex::Regex::new(&format!("^(?:{v})$")).ok())
                .flatten();
            (n, op, re, v)
        })
        .collect();
    let line_checks: Vec<(String, Option<regex::Regex>, String)> = lines
        .into_iter()
        .map(|(op, v)| {
            let re = op
                .contains('~')
                .then(|| regex::Regex::new(&v).ok())
                .flatten();
            (op, re, v)
        })
        .collect();
    if label_checks
        .iter()
        .any(|c| c.1.contains('~') && c.2.is_none())
        || line_checks
            .iter()
            .any(|c| c.0.contains('~') && c.1.is_none())
    {
        return None;
    }
    Some(Box::new(move |l: &BTreeMap<String, String>, line: &str| {
        label_checks.iter().all(|(n, op, re, v)| {
            let have = l.get(n).map(String::as_str).unwrap_or("");
            match (op.as_str(), re) {
                ("=", _) => have == v,
                ("!=", _) => have != v,
                ("=~", Some(re)) => re.is_match(have),
                (_, Some(re)) => !re.is_match(have),
                _ => false,
            }
        }) && line_checks
            .iter()
            .all(|(op, re, v)| match (op.as_str(), re) {
                ("|=", _) => line.contains(v.as_str()),
                ("!=", _) => !line.contains(v.as_str()),
                ("|~", Some(re)) => re.is_match(line),
                (_, Some(re)) => !re.is_match(line),
                _ => false,
            })
    }))
}

#[test]
fn the_in_test_loki_reads_logql() {
    let l = labels(&[("namespace", "media"), ("pod", "egress-1")]);
    let m = |q: &str, line: &str| logql_filter(q).map(|f| f(&l, line));
    assert_eq!(m(r#"{namespace="media"}"#, "x"), Some(true));
    assert_eq!(m(r#"{namespace="other"}"#, "x"), Some(false));
    assert_eq!(
        m(r#"{namespace="media", pod=~"egress-1|egress-2"}"#, "x"),
        Some(true)
    );
    assert_eq!(
        m(r#"{pod=~"egress"}"#, "x"),
        Some(false),
        "label regexes are anchored"
    );
    assert_eq!(
        m(r#"{pod!="egress-2"} |= "No space" "#, "No space left"),
        Some(true)
    );
    assert_eq!(
        m(
            r#"{pod!="egress-2"} |~ "(?i)no SPACE|full""#,
            "No space left"
        ),
        Some(true)
    );
    assert_eq!(m(r#"{pod=~"egress-.*"} |= "a\"b""#, "a\"b"), Some(true));
    assert_eq!(
        m(r#"{pod=~"egress-.*"} != "left""#, "No space left"),
        Some(false)
    );
    assert_eq!(m(r#"{pod="x""#, "x"), None);
}

fn frame(entries: &[Stored]) -> String {
    let mut streams: BTreeMap<String, (BTreeMap<String, String>, Vec<serde_json::Value>)> =
        BTreeMap::new();
    for (l, ts, line, _) in entries {
        streams
            .entry(format!("{l:?}"))
            .or_insert_with(|| (l.clone(), Vec::new()))
            .1
            .push(serde_json::json!([ts.to_string(), line]));
    }
    let s: Vec<_> = streams
        .into_values()
        .map(|(l, v)| serde_json::json!({"stream": l, "values": v}))
        .collect();
    serde_json::json!({"streams": s}).to_string()
}

/// The tail: the first connection sends entries, a ping, a frame whose
/// entry at ts 4 was dropped (reported, not sent), then Loki's routine 1011
/// close; later connections send from their `start` and stay open.
async fn tail(
    ws: axum::extract::ws::WebSocketUpgrade,
    axum::extract::State(st): axum::extract::State<Shared>,
    axum::extract::Query(q): axum::extract::Query<BTreeMap<String, String>>,
) -> axum::response::Response {
    use axum::extract::ws::{CloseFrame, Message};
    let start: i64 = q.get("start").and_then(|v| v.parse().ok()).unwrap_or(0);
    let conn = {
        let mut s = st.lock().unwrap();
        s.tail_starts.push(start);
        if s.tail_starts.len() == 2 {
            s.entries
                .push((labels(&[("pod", "a")]), 6, "l6".into(), BTreeMap::new()));
        }
        s.tail_starts.len()
    };
    ws.on_upgrade(move |mut socket| async move {
        let pick = |from: i64, to: i64| -> Vec<Stored> {
            st.lock()
                .unwrap()
                .entries
                .iter()
                .filter(|e| e.1 >= from && e.1 <= to)
                .cloned()
                .collect()
        };
        if conn == 1 {
            let _ = socket.send(Message::Text(frame(&pick(1, 3)).into())).await;
            let _ = socket.send(Message::Ping(vec![1].into())).await;
            // Ingest 4 and 5 only after the client's connect-time backfill
            // ran, so only the dropped-entries backfill can deliver 4.
            for _ in 0..200 {
                if st.lock().unwrap().requests > 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            {
                let mut s = st.lock().unwrap();
                s.entries
                    .push((labels(&[("pod", "a")]), 4, "l4".into(), BTreeMap::new()));
                s.entries
                    .push((labels(&[("pod", "a")]), 5, "l5".into(), BTreeMap::new()));
            }
            let mut f: serde_json::Value = serde_json::from_str(&frame(&pick(5, 5))).unwrap();
            f["dropped_entries"] =
                serde_json::json!([{"labels": "l4 (Loki puts the line here)", "timestamp": "4"}]);
            let _ = socket.send(Message::Text(f.to_string().into())).await;
            let _ = socket
                .send(Message::Close(Some(CloseFrame {
                    code: 1011,
                    reason: "reached tail max duration limit".into(),
                })))
                .await;
        } else {
            let _ = socket
                .send(Message::Text(frame(&pick(start, i64::MAX)).into()))
                .await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    })
}

async fn start_loki(store: Shared) -> String {
    let app = axum::Router::new()
        .route("/loki/api/v1/query_range", axum::routing::get(query_range))
        .route("/loki/api/v1/tail", axum::routing::get(tail))
        .with_state(store);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn cfg(url: &str, limit: u32) -> LokiConfig {
    let mut c = LokiConfig::new(url);
    c.limit = limit;
    c.lag = Duration::from_secs(0);
    c.timeout = Duration::from_secs(5);
    c
}

/// Polls until the poller has passed `until` (bounded), retrying errors.
async fn drain(p: &mut Poller, now: i64) -> Vec<Entry> {
    let mut out = Vec::new();
    for _ in 0..50 {
        match p.poll(now).await {
            Ok(v) => {
                out.extend(v);
                if p.cursor() >= now {
                    break;
                }
            }
            Err(LokiError::Transient(_)) => continue,
            Err(e) => panic!("{e}"),
        }
    }
    out
}

fn keys(v: &[Entry]) -> Vec<(i64, String)> {
    v.iter().map(|e| (e.ts, e.line.clone())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_across_shared_timestamps_has_no_gap_and_no_duplicate() {
    let store: Shared = Default::default();
    {
        let mut s = store.lock().unwrap();
        // 3 streams, 40 entries, many sharing one ns across (and within) streams.
        for i in 0..40i64 {
            let pod = ["a", "b", "c"][(i % 3) as usize];
            let ts = 1_000 + (i / 4) * 10; // four entries per timestamp
            s.entries.push((
                labels(&[("pod", pod)]),
                ts,
                format!("line {i}"),
                BTreeMap::new(),
            ));
        }
    }
    let url = start_loki(store.clone()).await;
    for limit in [1u32, 3, 4, 5, 7, 100] {
        let mut p = Poller::new(cfg(&url, limit), "{pod=~\"a|b|c\"}", 0).unwrap();
        let got = drain(&mut p, 2_000).await;
        let lines: BTreeSet<String> = got.iter().map(|e| e.line.clone()).collect();
        assert_eq!(got.len(), 40, "limit {limit}: {:?}", keys(&got));
        assert_eq!(lines.len(), 40, "limit {limit}: duplicates");
        assert!(got.windows(2).all(|w| w[0].ts <= w[1].ts), "forward order");
        if limit < 4 {
            assert!(
                p.stats().saturated_pages > 0,
                "a page of one timestamp raises the limit"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_is_exclusive_and_the_next_window_starts_there() {
    let store: Shared = Default::default();
    store.lock().unwrap().entries.push((
        labels(&[("pod", "a")]),
        100,
        "at 100".into(),
        BTreeMap::new(),
    ));
    let url = start_loki(store.clone()).await;
    let mut p = Poller::new(cfg(&url, 10), "{pod=\"a\"}", 0).unwrap();
    assert!(
        p.poll(100).await.unwrap().is_empty(),
        "end = 100 excludes ts 100"
    );
    assert_eq!(p.cursor(), 100);
    assert_eq!(
        keys(&p.poll(101).await.unwrap()),
        vec![(100, "at 100".to_string())]
    );
    assert!(p.poll(200).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loki_down_then_back_loses_nothing() {
    let store: Shared = Default::default();
    for i in 0..30 {
        store.lock().unwrap().entries.push((
            labels(&[("pod", "a")]),
            1_000 + i,
            format!("l{i}"),
            BTreeMap::new(),
        ));
    }
    let url = start_loki(store.clone()).await;
    let mut p = Poller::new(cfg(&url, 7), "{pod=\"a\"}", 0).unwrap();
    store.lock().unwrap().down_for = 3;
    let mut errors = 0;
    let mut got = Vec::new();
    for _ in 0..20 {
        match p.poll(2_000).await {
            Ok(v) => got.extend(v),
            Err(LokiError::Transient(m)) => {
                assert!(m.contains("503"), "{m}");
                errors += 1;
            }
            Err(e) => panic!("{e}"),
        }
        if p.cursor() >= 2_000 {
            break;
        }
    }
    assert_eq!(errors, 3);
    assert_eq!(got.len(), 30, "{:?}", keys(&got));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_errors_are_final_and_clear() {
    let store: Shared = Default::default();
    store.lock().unwrap().auth = true;
    let url = start_loki(store.clone()).await;
    let mut p = Poller::new(cfg(&url, 10), "{pod=\"a\"}", 0).unwrap();
    match p.poll(1_000).await {
        Err(LokiError::Config { status: 401, body }) => assert_eq!(body, "no org id"),
        other => panic!("{other:?}"),
    }
    assert_eq!(p.cursor(), 0, "nothing was consumed");
    let mut c = cfg(&url, 10);
    c.tenant = Some("team-a".into());
    let mut p = Poller::new(c, "{pod=\"a\"}", 0).unwrap();
    assert!(p.poll(1_000).await.is_ok());
    // A limit above Loki's cap is clamped by us, never sent.
    let mut c = cfg(&url, 6000);
    c.tenant = Some("team-a".into());
    let mut p = Poller::new(c, "{pod=\"a\"}", 0).unwrap();
    assert!(p.poll(1_000).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_from_checkpoint_neither_rereads_nor_skips() {
    let store: Shared = Default::default();
    let push = |from: i64, to: i64| {
        let mut s = store.lock().unwrap();
        for i in from..to {
            s.entries.push((
                labels(&[("pod", "a")]),
                i * 10,
                format!("l{i}"),
                BTreeMap::new(),
            ));
        }
    };
    push(0, 20);
    let url = start_loki(store.clone()).await;
    let q = "{pod=\"a\"}";
    let mut p = Poller::new(cfg(&url, 6), q, 0).unwrap();
    let first = drain(&mut p, 200).await;
    // The cursor as a checkpoint carries it: a JSON map, query -> ns.
    let mut m = BTreeMap::new();
    m.insert(q.to_string(), p.cursor());
    let on_disk = serde_json::to_string(&m).unwrap();
    drop(p);
    push(20, 35);
    let back: BTreeMap<String, i64> = serde_json::from_str(&on_disk).unwrap();
    let saved = back[q];
    let mut p = Poller::new(cfg(&url, 6), q, saved).unwrap();
    let second = drain(&mut p, 400).await;
    let all: Vec<String> = first
        .iter()
        .chain(second.iter())
        .map(|e| e.line.clone())
        .collect();
    assert_eq!(all, (0..35).map(|i| format!("l{i}")).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_lines_are_caught_by_the_overlap_rescan_once() {
    let store: Shared = Default::default();
    store.lock().unwrap().entries.push((
        labels(&[("pod", "a")]),
        100,
        "on time".into(),
        BTreeMap::new(),
    ));
    let url = start_loki(store.clone()).await;
    let mut c = cfg(&url, 10);
    c.overlap = Duration::from_nanos(1_000);
    c.rescan_every = Duration::from_nanos(1_000);
    let mut p = Poller::new(c, "{pod=\"a\"}", 0).unwrap();
    assert_eq!(p.poll(600).await.unwrap().len(), 1);
    // A line stamped before the cursor arrives late.
    store.lock().unwrap().entries.push((
        labels(&[("pod", "a")]),
        300,
        "late".into(),
        BTreeMap::new(),
    ));
    assert!(p.poll(700).await.unwrap().is_empty(), "no rescan yet");
    let got = p.poll(1_200).await.unwrap();
    assert_eq!(
        keys(&got),
        vec![(300, "late".to_string())],
        "rescan finds it; 'on time' is not repeated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_from_loki_equal_replay_and_name_nodes_from_labels() {
    // The egress black-hole fixture, pushed under node_id/pod labels with
    // structured metadata, the way a Loki pipeline stores it.
    let text = std::fs::read_to_string(format!(
        "{}/fixtures/egress-black-hole.log",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let store: Shared = Default::default();
    let set = sigwatch::rules::load_builtin().unwrap();
    let mut replay = Engine::new(set.clone(), Options::default()).unwrap();
    let mut want = Vec::new();
    {
        let mut s = store.lock().unwrap();
        let mut last = 0i64;
        for (i, l) in text.lines().enumerate() {
            let (pod, rest) = l.split_once(' ').unwrap();
            let (_, body) = rest.split_once(' ').unwrap();
            // Entry time: the line's own time (console or JSON), as a shipper stamps it.
            let ts = sigwatch::decode::peek_time(body, None, None)
                .unwrap_or(last)
                .max(last);
            last = ts;
            let node = pod.rsplit('-').next().unwrap();
            let lb = labels(&[
                ("namespace", "media"),
                ("container", "egress"),
                ("pod", pod),
                ("node_id", &format!("node-{node}")),
            ]);
            let mut sm = BTreeMap::new();
            sm.insert("detected_level".to_string(), "info".to_string());
            s.entries
                .push((lb, ts + i as i64 % 3, body.to_string(), sm));
        }
        // The reference: the same entries replayed in Loki's order.
        let mut sorted = s.entries.clone();
        sorted.sort_by(|a, b| {
            a.1.cmp(&b.1)
                .then_with(|| a.0.cmp(&b.0))
                .then_with(|| a.2.cmp(&b.2))
        });
        for (lb, ts, line, _) in sorted {
            let e = Entry {
                labels: lb.into_iter().collect(),
                metadata: vec![],
                ts,
                line,
            };
            let src = Source {
                name: e.stream_name(),
                labels: e.labels.clone(),
                modified: None,
                kind: Default::default(),
            };
            replay.push_line_at(&src, &e.line, e.ts, &mut want);
        }
        replay.finish(&mut want);
    }
    let url = start_loki(store.clone()).await;
    let mut p = Poller::new(cfg(&url, 250), "{namespace=\"media\"}", 0).unwrap();
    let entries = drain(&mut p, i64::MAX / 2).await;
    assert_eq!(entries.len(), text.lines().count());
    let mut live = Engine::new(set, Options::default()).unwrap();
    let mut got = Vec::new();
    for e in &entries {
        let src = Source {
            name: e.stream_name(),
            labels: e.labels.clone(),
            modified: None,
            kind: Default::default(),
        };
        live.push_line_at(&src, &e.line, e.ts, &mut got);
    }
    live.finish(&mut got);
    let view = |v: &[sigwatch::alert::Notification]| -> Vec<String> {
        v.iter()
            .map(|n| format!("{:?} {} {}", n.state, n.rule, n.group))
            .collect()
    };
    assert_eq!(view(&got), view(&want));
    assert!(
        got.iter()
            .any(|n| n.rule == "egress.black_hole" && n.group.starts_with("node-")),
        "{:?}",
        view(&got)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_consumes_loki_and_resumes_from_its_checkpoint_after_kill_9() {
    use std::process::Stdio;
    use tokio::io::AsyncBufReadExt;
    let text = std::fs::read_to_string(format!(
        "{}/fixtures/egress-black-hole.log",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let store: Shared = Default::default();
    let now = sigwatch::clock::wall_ns();
    {
        // Re-stamp the fixture into the last few minutes, one ms apart.
        let mut s = store.lock().unwrap();
        s.auth = true;
        let n = text.lines().count() as i64;
        for (i, l) in text.lines().enumerate() {
            let (pod, rest) = l.split_once(' ').unwrap();
            let (_, body) = rest.split_once(' ').unwrap();
            let ts = now - 240_000_000_000 + (i as i64) * (200_000_000_000 / n);
            s.entries.push((
                labels(&[
                    ("namespace", "media"),
                    ("pod", pod),
                    ("node_id", &format!("node-{pod}")),
                ]),
                ts,
                body.to_string(),
                BTreeMap::new(),
            ));
        }
    }
    let url = start_loki(store.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let runs = std::sync::atomic::AtomicUsize::new(0);
    let spawn = || {
        let n = runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let log = std::fs::File::create(logs.path().join(format!("run-{n}.log"))).unwrap();
        tokio::process::Command::new(env!("CARGO_BIN_EXE_sigwatch"))
            .args([
                "run",
                "--listen",
                "none",
                "--log-level",
                "info",
                "--loki",
                &url,
                "--query",
                "{namespace=\"media\"}",
                "--loki-tenant",
                "t1",
                "--loki-lag",
                "0s",
                "--loki-interval",
                "200ms",
                "--state-dir",
            ])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(log)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    let mut child = spawn();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let l = lines.next_line().await.unwrap().unwrap();
            if l.contains("egress.black_hole") {
                return l;
            }
        }
    })
    .await
    .expect("the black-hole alert arrives from Loki");
    let n: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert!(
        n["group"].as_str().unwrap().starts_with("node-egress-"),
        "named from the node_id label: {n}"
    );
    // `run` from Loki links the alert to its lines on that Loki.
    let link = n["links"]["loki"]
        .as_str()
        .unwrap_or_else(|| panic!("a link: {n}"));
    assert!(
        link.starts_with(&format!("{url}/loki/api/v1/query_range?query=")),
        "{link}"
    );
    // Once the page is recorded as delivered (its receipt in the stdout
    // lane's spool) and a checkpoint holds its alert, kill -9: the restart
    // resumes from that checkpoint and must not deliver it again. Then a
    // crash before any checkpoint: the lines read again make the alert
    // again, and the receipt stops it. (A kill between the write to stdout
    // and the receipt, a few system calls apart, would print it again: the
    // one window at-least-once delivery leaves.)
    let fp = n["fingerprint"].as_str().unwrap().to_string();
    let dir_path = dir.path().to_path_buf();
    let fp2 = fp.clone();
    // Whether the stdout lane's spool holds the page's receipt.
    let receipt = move || -> bool {
        let Ok(entries) = std::fs::read_dir(dir_path.join("spool")) else {
            return false;
        };
        // The spool files themselves, not a write in progress (a hidden
        // temporary that a kill would leave unrenamed).
        entries
            .flatten()
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.ends_with(".json") && !name.starts_with('.')
            })
            .filter_map(|e| std::fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .any(|v| {
                v["delivered"]
                    .as_array()
                    .is_some_and(|d| d.iter().any(|r| r[0] == fp2.as_str()))
            })
    };
    let q = "{namespace=\"media\"}";
    // (saved_at, cursor, whether the status board holds the page).
    let ckpt = |d: &std::path::Path| -> Option<(String, i64, bool)> {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.join("checkpoint.json")).ok()?).ok()?;
        Some((
            v["saved_at"].as_str()?.to_string(),
            v["loki"][q].as_i64()?,
            v["board"]
                .as_array()?
                .iter()
                .any(|b| b["fingerprint"] == fp.as_str()),
        ))
    };
    let d = dir.path().to_path_buf();
    wait_for(
        "the page's receipt, and a checkpoint holding the alert",
        || receipt() && ckpt(&d).is_some_and(|c| c.2),
    )
    .await;
    child.start_kill().unwrap();
    let _ = child.wait().await;
    let (saved_at, saved, _) = ckpt(dir.path()).expect("a checkpoint with the cursor");
    assert!(
        saved > now - 240_000_000_000,
        "the cursor moved past the fixture's start"
    );
    let before = store.lock().unwrap().starts.len();
    let last_entry = store
        .lock()
        .unwrap()
        .entries
        .iter()
        .map(|e| e.1)
        .max()
        .unwrap();
    // Restart: it resumes at the checkpoint, not 15 minutes back, reads
    // to the end, and checkpoints again; then a graceful stop.
    let mut child = spawn();
    let d = dir.path().to_path_buf();
    wait_for("the restart's checkpoint past the last entry", || {
        ckpt(&d).is_some_and(|(at, c, _)| at != saved_at && c > last_entry)
    })
    .await;
    let starts = store.lock().unwrap().starts.clone();
    assert!(starts.len() > before, "the restarted process polled");
    assert!(
        starts[before..].iter().all(|s| *s >= saved),
        "resumed at the checkpoint {saved}: {:?}",
        &starts[before..]
    );
    // A crash before any checkpoint: everything is read again from 15
    // minutes back and the alert made again — its receipt stops it.
    child.start_kill().unwrap();
    let again = read_all(&mut child).await;
    assert!(
        again.is_empty(),
        "nothing notified after the restart: {again:?}\nstate: {}\nlogs: {}",
        state_files(dir.path()),
        state_files(logs.path())
    );
    std::fs::remove_file(dir.path().join("checkpoint.json")).unwrap();
    let mut child = spawn();
    wait_for("a new checkpoint past the last entry", || {
        ckpt(&d).is_some_and(|(_, c, held)| c > last_entry && held)
    })
    .await;
    kill_term(&child);
    let again = read_all(&mut child).await;
    assert!(
        again.is_empty(),
        "nothing was notified a second time: {again:?}\nstate: {}\nlogs: {}",
        state_files(dir.path()),
        state_files(logs.path())
    );
    assert!(
        store
            .lock()
            .unwrap()
            .starts
            .iter()
            .any(|s| *s < now - 240_000_000_000),
        "that run read everything again"
    );
}

/// The state directory's small files, for a failure's message.
fn state_files(dir: &std::path::Path) -> String {
    let mut out = String::new();
    for sub in ["", "spool"] {
        for e in std::fs::read_dir(dir.join(sub))
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = e.path();
            if p.is_file() && !p.ends_with("checkpoint.json") && !p.ends_with("templates.json") {
                out.push_str(&format!(
                    "\n{}: {}",
                    p.display(),
                    std::fs::read_to_string(&p).unwrap_or_default()
                ));
            }
        }
    }
    out
}

/// Every line the child prints until it exits (bounded: 20 s).
async fn read_all(child: &mut tokio::process::Child) -> Vec<String> {
    use tokio::io::AsyncBufReadExt;
    let mut out = Vec::new();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    while let Ok(Ok(Some(l))) =
        tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await
    {
        out.push(l);
    }
    let _ = child.wait().await;
    out
}

/// Waits (bounded: 20 s) until `cond` holds; fails the test naming `what`.
async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..400 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// SIGTERM: the graceful stop a rolling upgrade gives.
fn kill_term(child: &tokio::process::Child) {
    let pid = child.id().expect("running");
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -TERM {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_reconnects_at_the_last_timestamp_and_backfills_drops_exactly_once() {
    let store: Shared = Default::default();
    for i in 1..=3 {
        store.lock().unwrap().entries.push((
            labels(&[("pod", "a")]),
            i,
            format!("l{i}"),
            BTreeMap::new(),
        ));
    }
    let url = start_loki(store.clone()).await;
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let task = tokio::spawn(sigwatch::source::loki::tail::run_tail(
        cfg(&url, 100),
        "{pod=\"a\"}".into(),
        1,
        tx,
        Default::default(),
    ));
    let mut got: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while got.len() < 6 {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(b)) => got.extend(b.entries.into_iter().map(|e| e.line)),
            other => panic!("stopped after {got:?}: {other:?}"),
        }
    }
    // Nothing more: the second connection re-sends 5 and 6, dedup drops them.
    if let Ok(Some(b)) = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await {
        panic!("duplicates: {:?}", b.entries);
    }
    task.abort();
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        (1..=6).map(|i| format!("l{i}")).collect::<Vec<_>>(),
        "{got:?}"
    );
    let starts = store.lock().unwrap().tail_starts.clone();
    assert_eq!(starts.len(), 2, "reconnected once after the 1011 close");
    assert_eq!(
        starts[1], 5,
        "the reconnect starts at the last timestamp seen"
    );
}

/// The counter `name{labels…}` summed over its label sets whose text
/// contains every `with`, from a /metrics body.
fn metric_sum(body: &str, name: &str, with: &[&str]) -> f64 {
    body.lines()
        .filter(|l| l.starts_with(name) && with.iter().all(|w| l.contains(w)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn metrics(port: u16) -> String {
    match reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_together_alert_exactly_like_one_process() {
    use std::process::Stdio;
    // The Redis outage, one Loki stream per pod (kubectl's prefix becomes
    // the pod label), ingested in the last minutes.
    let text = std::fs::read_to_string(format!(
        "{}/fixtures/livekit-redis-outage.log",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let store: Shared = Default::default();
    let now = sigwatch::clock::wall_ns();
    let total = text.lines().count();
    {
        // Ingested at their own pace: the 25 minutes of the fixture end a
        // minute ago (the outage's timing is what the rules measure).
        let mut s = store.lock().unwrap();
        let mut last = None;
        let times: Vec<i64> = text
            .lines()
            .map(|l| {
                let t = sigwatch::decode::peek_time(l, last, None).or(last).unwrap();
                last = Some(t);
                t
            })
            .collect();
        let end = *times.iter().max().unwrap();
        for (l, t) in text.lines().zip(times) {
            let (prefix, body) = l.split_once("] ").unwrap();
            let pod = prefix
                .trim_start_matches("[pod/")
                .split('/')
                .next()
                .unwrap();
            s.entries.push((
                labels(&[
                    ("namespace", "livekit"),
                    ("pod", pod),
                    ("container", "livekit-server"),
                ]),
                now - 60_000_000_000 - (end - t),
                body.to_string(),
                BTreeMap::new(),
            ));
        }
    }
    let url = start_loki(store.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let spawn = |name: &str, shard: Option<&str>| {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let out = std::fs::File::create(dir.path().join(format!("{name}.ndjson"))).unwrap();
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_sigwatch"));
        cmd.args([
            "run",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--log-level",
            "warn",
            "--loki",
            &url,
            "--query",
            "{namespace=\"livekit\"}",
            "--loki-lag",
            "0s",
            "--loki-interval",
            "200ms",
            "--since",
            "40m",
        ]);
        if let Some(s) = shard {
            cmd.args(["--shard", s, "--shard-by", "pod"]);
        }
        let child = cmd
            .stdout(Stdio::from(out))
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        (child, port)
    };
    let (mut one, p1) = spawn("one", None);
    let (mut a, pa) = spawn("a", Some("0/2"));
    let (mut b, pb) = spawn("b", Some("1/2"));
    // Until every line went through: all of them in the single process, and
    // between the shards, each exactly once.
    let lines = |body: &str| metric_sum(body, "sigwatch_events_total", &["kind=\"lines\""]);
    let mut done = false;
    for _ in 0..150 {
        let (m1, ma, mb) = (metrics(p1).await, metrics(pa).await, metrics(pb).await);
        if lines(&m1) as usize == total && (lines(&ma) + lines(&mb)) as usize == total {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        done,
        "every line reached the single process and exactly one shard"
    );
    // Let the last evaluations and deliveries land (bounded): until the
    // single process and the two shards together hold their 12 per-node
    // alerts, then compare.
    let per_node_alerts = |name: &str| -> usize {
        std::fs::read_to_string(dir.path().join(format!("{name}.ndjson")))
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.contains("livekit.redis_unreachable"))
            .count()
    };
    for _ in 0..100 {
        if per_node_alerts("one") >= 12 && per_node_alerts("a") + per_node_alerts("b") >= 12 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The counters were complete with the lines (one publication holds
    // both); read them again for the comparison.
    let (m1, ma, mb) = (metrics(p1).await, metrics(pa).await, metrics(pb).await);
    for c in [&mut one, &mut a, &mut b] {
        c.start_kill().unwrap();
        let _ = c.wait().await;
    }
    let read = |name: &str| -> Vec<serde_json::Value> {
        std::fs::read_to_string(dir.path().join(format!("{name}.ndjson")))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let key = |n: &serde_json::Value| {
        format!(
            "{} {} {}",
            n["state"].as_str().unwrap(),
            n["rule"].as_str().unwrap(),
            n["group"].as_str().unwrap()
        )
    };
    let cluster = "livekit.redis_unreachable";
    let single: Vec<String> = read("one").iter().map(key).collect();
    assert!(single.iter().any(|k| k.contains(cluster)), "{single:?}");
    let per_node = |v: &[String]| -> Vec<String> {
        let mut v: Vec<String> = v.iter().filter(|k| !k.contains(cluster)).cloned().collect();
        v.sort();
        v
    };
    let (sa, sb): (Vec<String>, Vec<String>) = (
        read("a").iter().map(key).collect(),
        read("b").iter().map(key).collect(),
    );
    assert!(
        !sa.is_empty() && !sb.is_empty(),
        "both shards own nodes: {sa:?} {sb:?}"
    );
    // Per-node alerts: the shards' together are exactly the single's, none twice.
    let mut both: Vec<String> = sa.iter().chain(&sb).cloned().collect();
    both.sort();
    let mut dedup = both.clone();
    dedup.dedup();
    assert_eq!(both, dedup, "an alert came from both shards");
    assert_eq!(per_node(&both), per_node(&single));
    assert_eq!(per_node(&single).len(), 12, "{single:?}");
    // The cluster-wide rule does not alert in a shard; its per-group
    // counters, summed over shards, are the single process's — what
    // deploy/prometheus-rules.yaml alerts on.
    assert!(!both.iter().any(|k| k.contains(cluster)), "{both:?}");
    let hits = |body: &str, group: &str| {
        metric_sum(
            body,
            "sigwatch_signature_hits_total",
            &[
                &format!("rule=\"{cluster}\""),
                &format!("group=\"{group}\""),
            ],
        )
    };
    let groups: BTreeSet<String> = m1
        .lines()
        .filter(|l| l.starts_with("sigwatch_signature_hits_total") && l.contains(cluster))
        .filter_map(|l| {
            l.split("group=\"")
                .nth(1)?
                .split('"')
                .next()
                .map(str::to_string)
        })
        .collect();
    // Every group of the population has a series (0 until its first hit);
    // the six nodes have hits.
    let hit_groups = groups.iter().filter(|g| hits(&m1, g) > 0.0).count();
    assert_eq!(hit_groups, 6, "{groups:?}");
    for g in &groups {
        assert_eq!(hits(&ma, g) + hits(&mb, g), hits(&m1, g), "{g}");
    }
    let skipped =
        |body: &str| metric_sum(body, "sigwatch_events_total", &["kind=\"shard_skipped\""]);
    assert_eq!((skipped(&ma) + skipped(&mb)) as usize, total);
}

/// Serves every line of `fixture` verbatim in one stream, each at the time
/// the decoder gives it (the way a shipper that parses times stamps it),
/// and writes the same lines in Loki's order (time, then line) to `out`:
/// Loki returns lines by time, so "the same lines" are these, in this
/// order. A line without a time of its own takes the time before it,
/// which depends on the order: sorted and stamped again until both agree.
fn serve_fixture(
    store: &Shared,
    fixture: &str,
    stream: &[(&str, &str)],
    out: &std::path::Path,
) -> (i64, i64, usize) {
    let (lines, times) = common::in_time_order(fixture);
    std::fs::write(out, lines.join("\n") + "\n").unwrap();
    let mut s = store.lock().unwrap();
    for (l, t) in lines.iter().zip(&times) {
        s.entries
            .push((labels(stream), *t, l.clone(), BTreeMap::new()));
    }
    (times[0], times[times.len() - 1] + 1, lines.len())
}

async fn sigwatch(args: &[&str]) -> (String, String) {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_sigwatch"))
            .args(args)
            .env_remove("SIGWATCH_LOKI_URL")
            .output(),
    )
    .await
    .expect("sigwatch finishes")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_over_loki_gives_the_notifications_of_replay_file() {
    for (fixture, limit) in [
        ("livekit-redis-outage.log", "97"),
        ("egress-black-hole.log", "1000"),
        ("grpc-slow-auth.log", "5"),
    ] {
        let store: Shared = Default::default();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(fixture);
        let (from, to, n) = serve_fixture(
            &store,
            fixture,
            &[("namespace", "media"), ("job", "x")],
            &path,
        );
        // Noise outside the range and outside the query: never read.
        {
            let mut s = store.lock().unwrap();
            let quiet =
                r#"{"level":"error","msg":"failed to mark as draining","nodeID":"ND_outside"}"#;
            for t in [from - 1, to, to + 1_000] {
                s.entries.push((
                    labels(&[("namespace", "media"), ("job", "x")]),
                    t,
                    quiet.into(),
                    BTreeMap::new(),
                ));
            }
            s.entries.push((
                labels(&[("namespace", "other")]),
                from,
                quiet.into(),
                BTreeMap::new(),
            ));
        }
        let url = start_loki(store.clone()).await;
        let (want, _) = sigwatch(&[
            "replay",
            "--no-summary",
            "--no-links",
            path.to_str().unwrap(),
        ])
        .await;
        let (from_s, to_s) = (from.to_string(), to.to_string());
        // Links name where lines were read (file:line, a Loki query), the
        // one thing that differs by design: left out.
        let (got, log) = sigwatch(&[
            "replay",
            "--no-summary",
            "--no-links",
            "--loki",
            &url,
            "--query",
            r#"{namespace="media"}"#,
            "--from",
            &from_s,
            "--to",
            &to_s,
            "--loki-limit",
            limit,
        ])
        .await;
        assert!(!want.is_empty(), "{fixture}: the fixture alerts");
        let diff = got.lines().zip(want.lines()).position(|(a, b)| a != b);
        assert_eq!(
            got.lines().count(),
            want.lines().count(),
            "{fixture}: {log}"
        );
        assert!(
            got == want,
            "{fixture}: first difference at notification {diff:?}:\n{:?}\n{:?}",
            diff.map(|d| got.lines().nth(d)),
            diff.map(|d| want.lines().nth(d))
        );
        assert!(
            log.contains(&format!("entries={n}")),
            "{fixture}: every line read once: {log}"
        );
        let requests = store.lock().unwrap().requests;
        assert!(
            requests > 1 || limit == "1000",
            "{fixture}: paged ({requests} requests)"
        );
    }
}

/// A sample as kept (cut at 512 bytes with "…") is the start of its line.
fn sample_in(sample: &str, line: &str) -> bool {
    line.contains(sample.strip_suffix('…').unwrap_or(sample))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_link_in_a_notification_returns_its_sample_lines_from_loki() {
    // The black-hole fixture in one stream per pod, the way a shipper
    // labels it (the stern prefix becomes the pod label).
    let text = std::fs::read_to_string(format!(
        "{}/fixtures/egress-black-hole.log",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let store: Shared = Default::default();
    let (mut from, mut to) = (i64::MAX, 0);
    {
        let mut s = store.lock().unwrap();
        let mut last = 0;
        for l in text.lines() {
            let (pod, rest) = l.split_once(' ').unwrap();
            let (_, body) = rest.split_once(' ').unwrap();
            let ts = sigwatch::decode::peek_time(body, None, None)
                .unwrap_or(last)
                .max(last);
            last = ts;
            (from, to) = (from.min(ts), to.max(ts + 1));
            s.entries.push((
                labels(&[
                    ("namespace", "media"),
                    ("container", "egress"),
                    ("pod", pod),
                ]),
                ts,
                body.to_string(),
                BTreeMap::new(),
            ));
        }
    }
    let url = start_loki(store.clone()).await;
    let tmp = tempfile::tempdir().unwrap();
    let report = tmp.path().join("range.html");
    let (out, log) = sigwatch(&[
        "replay",
        "--no-summary",
        "--output",
        "json",
        "--loki",
        &url,
        "--query",
        r#"{namespace="media"}"#,
        "--from",
        &from.to_string(),
        "--to",
        &to.to_string(),
        "--grafana-url",
        "https://grafana.example/",
        "--grafana-datasource",
        "P8E80F9AEF21F6940",
        "--report",
        report.to_str().unwrap(),
    ])
    .await;
    // The postmortem's timeline of the range.
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(
        html.contains("egress.black_hole") && html.contains(&url),
        "a report of the range"
    );
    let notes: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        notes.iter().any(|n| n["rule"] == "egress.black_hole"),
        "{log}"
    );
    let client = reqwest::Client::new();
    let mut checked = 0;
    for n in &notes {
        let links = &n["links"];
        let loki = links["loki"]
            .as_str()
            .unwrap_or_else(|| panic!("a link: {n}"));
        let query = links["query"].as_str().unwrap();
        assert!(
            loki.starts_with(&format!("{url}/loki/api/v1/query_range?")),
            "{loki}"
        );
        assert!(
            query.starts_with("{container=`egress`, namespace=`media`, pod="),
            "{query}"
        );
        let grafana = links["grafana"].as_str().unwrap();
        assert!(grafana.starts_with("https://grafana.example/explore?schemaVersion=1&panes="));
        assert!(grafana.contains("P8E80F9AEF21F6940"), "{grafana}");
        assert!(
            links.get("lines").is_none(),
            "no file lines from Loki: {links}"
        );
        let body = client.get(loki).send().await.unwrap();
        assert!(
            body.status().is_success(),
            "{loki}: {}",
            body.text().await.unwrap()
        );
        let got = sigwatch::source::loki::parse_streams(&body.text().await.unwrap()).unwrap();
        let pods: BTreeSet<&str> = got
            .iter()
            .flat_map(|e| {
                e.labels
                    .iter()
                    .filter(|l| l.0 == "pod")
                    .map(|l| l.1.as_str())
            })
            .collect();
        for s in n["samples"].as_array().unwrap() {
            let s = s.as_str().unwrap();
            assert!(
                got.iter().any(|e| sample_in(s, &e.line)),
                "{}: sample {s:?} not among the {} lines of {query}",
                n["rule"],
                got.len()
            );
        }
        // Only the lines of the rule: the filter is its literals.
        assert!(
            got.len() < text.lines().count() / 2,
            "{query}: {} lines",
            got.len()
        );
        assert!(!pods.is_empty());
        checked += 1;
    }
    assert!(checked >= 2, "{checked}");
}
