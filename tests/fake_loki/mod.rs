//! An in-test Loki: a real HTTP server on 127.0.0.1 that follows Loki's
//! API semantics exactly (research/apis.md §1): `query_range` with an
//! inclusive start, an exclusive end, `limit` applied globally across
//! streams merged by time (a page can end in the middle of a shared
//! timestamp), 400 above 5000, 401 without `X-Scope-OrgID` when auth is on,
//! three-element rows with `categorize-labels`, plain-text errors; the
//! series API (GET or a POST form, `match[]` selectors only, streams with an
//! entry in `[start, end]`); and the tail (websocket), either the scripted
//! one of the tail test or a general one that sends what matches its query
//! from `start` and then what is ingested after.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// (labels, ts, line, structured metadata)
pub type Stored = (
    BTreeMap<String, String>,
    i64,
    String,
    BTreeMap<String, String>,
);

#[derive(Default)]
pub struct Store {
    pub entries: Vec<Stored>,
    pub auth: bool,
    /// Requests to fail with 503 before serving again.
    pub down_for: usize,
    pub requests: usize,
    /// `start` of every query received.
    pub starts: Vec<i64>,
    /// `start` of every tail connection.
    pub tail_starts: Vec<i64>,
    /// Answer the series API with 404, as a gateway that does not route it.
    pub series_refused: bool,
    /// Series requests answered.
    pub series_requests: usize,
    /// Entries sent by `query_range` and the tail (what clients download).
    pub served: usize,
    /// The tail is the general one (else the tail test's script).
    pub general_tail: bool,
}

pub type Shared = Arc<Mutex<Store>>;

pub async fn query_range(
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
    s.served += sel.len();
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
pub fn logql_filter(
    q: &str,
) -> Option<Box<dyn Fn(&BTreeMap<String, String>, &str) -> bool + Send + Sync>> {
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

pub fn frame(entries: &[Stored]) -> String {
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
async fn scripted_tail(
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

/// The series API over the store: the label sets of the streams that
/// any `match[]` selector matches with an entry in `[start, end]`
/// (both inclusive, as Loki's index lookup is), stream labels only.
async fn series(
    st: &Shared,
    headers: &axum::http::HeaderMap,
    pairs: Vec<(String, String)>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut s = st.lock().unwrap();
    let text = |code: u16, body: &str| {
        (
            axum::http::StatusCode::from_u16(code).unwrap(),
            [("content-type", "text/plain; charset=utf-8")],
            body.to_string(),
        )
            .into_response()
    };
    if s.series_refused {
        return text(404, "404 page not found");
    }
    if s.auth && !headers.contains_key("x-scope-orgid") {
        return text(401, "no org id");
    }
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let start: i64 = get("start").and_then(|v| v.parse().ok()).unwrap_or(0);
    let end: i64 = get("end").and_then(|v| v.parse().ok()).unwrap_or(i64::MAX);
    let selectors: Vec<&String> = pairs
        .iter()
        .filter(|(k, _)| k == "match[]")
        .map(|(_, v)| v)
        .collect();
    if selectors.is_empty() {
        return text(400, "at least one match[] argument must be provided");
    }
    let mut filters = Vec::new();
    for sel in selectors {
        // A selector only: a pipeline is a parse error, as in Loki.
        if !sel.trim_end().ends_with('}') {
            return text(
                400,
                &format!("parse error: only stream selectors are accepted: {sel}"),
            );
        }
        match logql_filter(sel) {
            Some(f) => filters.push(f),
            None => return text(400, &format!("parse error: {sel}")),
        }
    }
    s.series_requests += 1;
    let mut found: std::collections::BTreeSet<BTreeMap<String, String>> = Default::default();
    for (labels, ts, line, _) in &s.entries {
        if *ts >= start && *ts <= end && filters.iter().any(|f| f(labels, line)) {
            found.insert(labels.clone());
        }
    }
    let data: Vec<_> = found.into_iter().collect();
    axum::Json(serde_json::json!({"status": "success", "data": data})).into_response()
}

async fn series_get(
    axum::extract::State(st): axum::extract::State<Shared>,
    headers: axum::http::HeaderMap,
    axum::extract::Query(q): axum::extract::Query<Vec<(String, String)>>,
) -> axum::response::Response {
    series(&st, &headers, q).await
}

async fn series_post(
    axum::extract::State(st): axum::extract::State<Shared>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::response::Response {
    // The form body, decoded as a URL's query is.
    let url =
        reqwest::Url::parse(&format!("http://l/?{}", String::from_utf8_lossy(&body))).unwrap();
    let pairs = url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    series(&st, &headers, pairs).await
}

/// The tail of the scripted test, or the general one.
async fn tail(
    ws: axum::extract::ws::WebSocketUpgrade,
    axum::extract::State(st): axum::extract::State<Shared>,
    q: axum::extract::Query<BTreeMap<String, String>>,
) -> axum::response::Response {
    if st.lock().unwrap().general_tail {
        general_tail(ws, st, q.0).await
    } else {
        scripted_tail(ws, axum::extract::State(st), q).await
    }
}

/// What Loki's tail does: the entries matching the query from `start`,
/// then every entry ingested later, a frame at a time, until the client
/// goes.
async fn general_tail(
    ws: axum::extract::ws::WebSocketUpgrade,
    st: Shared,
    q: BTreeMap<String, String>,
) -> axum::response::Response {
    use axum::extract::ws::Message;
    let start: i64 = q.get("start").and_then(|v| v.parse().ok()).unwrap_or(0);
    let query = q.get("query").cloned().unwrap_or_default();
    ws.on_upgrade(move |mut socket| async move {
        let Some(matches) = logql_filter(&query) else {
            return;
        };
        st.lock().unwrap().tail_starts.push(start);
        let mut sent = 0usize; // entries of the store looked at so far
        let mut first = true;
        loop {
            let batch: Vec<Stored> = {
                let mut s = st.lock().unwrap();
                let new: Vec<Stored> = s.entries[sent..]
                    .iter()
                    .filter(|e| (!first || e.1 >= start) && matches(&e.0, &e.2))
                    .cloned()
                    .collect();
                sent = s.entries.len();
                s.served += new.len();
                new
            };
            first = false;
            if !batch.is_empty()
                && socket
                    .send(Message::Text(frame(&batch).into()))
                    .await
                    .is_err()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

pub async fn start_loki(store: Shared) -> String {
    let app = axum::Router::new()
        .route("/loki/api/v1/query_range", axum::routing::get(query_range))
        .route(
            "/loki/api/v1/series",
            axum::routing::get(series_get).post(series_post),
        )
        .route("/loki/api/v1/tail", axum::routing::get(tail))
        .with_state(store);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The counter `name{labels…}` summed over its label sets whose text
/// contains every `with`, from a /metrics body.
pub fn metric_sum(body: &str, name: &str, with: &[&str]) -> f64 {
    body.lines()
        .filter(|l| l.starts_with(name) && with.iter().all(|w| l.contains(w)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

pub async fn metrics(port: u16) -> String {
    match reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// The Redis outage, one stream per pod (kubectl's prefix becomes the pod
/// label), its 25 minutes ending a minute ago. Returns the line count.
pub fn outage(store: &Shared) -> usize {
    let text = std::fs::read_to_string(format!(
        "{}/fixtures/livekit-redis-outage.log",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let now = sigwatch::clock::wall_ns();
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
    let mut s = store.lock().unwrap();
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
    text.lines().count()
}
