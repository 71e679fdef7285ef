//! Slack, PagerDuty and the signed webhook against local HTTP servers on
//! 127.0.0.1 that check what a real one checks.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;
use sigwatch::alert::{AlertState, Notification};
use sigwatch::notify::pagerduty::PagerDuty;
use sigwatch::notify::slack::Slack;
use sigwatch::notify::webhook::{signature, Webhook, WebhookConfig, SIGNATURE_HEADER};
use sigwatch::notify::{NotifyError, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn note(state: AlertState) -> Notification {
    let mut n = common::black_hole(state);
    n.annotations
        .insert("summary".to_string(), "x".repeat(2000));
    n.ends_at = None;
    n.top_groups = vec![];
    n.fingerprint = "821a94053e655138".into();
    n
}

type Seen = Arc<Mutex<Vec<(Instant, axum::http::HeaderMap, Vec<u8>)>>>;

/// A server answering each request with the next scripted (status, headers, body).
async fn server(script: Vec<(u16, Option<&'static str>, &'static str)>) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let script = Arc::new(Mutex::new(script.into_iter()));
    let app = axum::Router::new().route(
        "/",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let (s, script) = (s.clone(), script.clone());
                async move {
                    s.lock()
                        .unwrap()
                        .push((Instant::now(), headers, body.to_vec()));
                    let (code, retry_after, text) =
                        script.lock().unwrap().next().unwrap_or((200, None, "ok"));
                    let mut resp = axum::response::Response::new(axum::body::Body::from(text));
                    *resp.status_mut() = axum::http::StatusCode::from_u16(code).unwrap();
                    if let Some(ra) = retry_after {
                        resp.headers_mut()
                            .insert("retry-after", ra.parse().unwrap());
                    }
                    resp
                }
            },
        ),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    (format!("http://{addr}/"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_honours_retry_after_and_sends_blocks() {
    let (url, seen) = server(vec![(429, Some("1"), "rate_limited")]).await;
    let r = Slack::new(&url, Duration::from_secs(5)).unwrap();
    assert!(
        !r.name().contains(&url[7..]),
        "the secret URL is not the name"
    );
    r.send(&note(AlertState::Firing)).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(
        seen[1].0.duration_since(seen[0].0) >= Duration::from_millis(950),
        "waited Retry-After"
    );
    let msg: serde_json::Value = serde_json::from_slice(&seen[1].2).unwrap();
    assert_eq!(msg["blocks"][0]["type"], "header");
    let all = msg.to_string();
    assert!(
        all.contains("NE_2rANN76DeYtZ")
            && all.contains("share 96%")
            && all.contains("No space left"),
        "{all}"
    );
    for b in msg["blocks"].as_array().unwrap() {
        if let Some(t) = b["text"]["text"].as_str() {
            assert!(t.chars().count() <= 3000);
        }
    }
    assert_eq!(
        r.lane().rate,
        Some((1.0, 1)),
        "one message a second per webhook"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_archived_channel_is_final() {
    let (url, seen) = server(vec![(410, None, "channel_is_archived")]).await;
    let r = Slack::new(&url, Duration::from_secs(5)).unwrap();
    match r.send(&note(AlertState::Firing)).await {
        Err(NotifyError::Rejected {
            status: 410, body, ..
        }) => assert_eq!(body, "channel_is_archived"),
        other => panic!("{other:?}"),
    }
    assert_eq!(seen.lock().unwrap().len(), 1, "not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagerduty_triggers_and_resolves_one_incident() {
    let (url, seen) = server(vec![
        (500, None, ""),
        (202, None, "{\"status\":\"success\"}"),
    ])
    .await;
    let r = PagerDuty::new(
        "0123456789abcdef0123456789abcdef",
        Some(&url),
        Duration::from_secs(5),
    )
    .unwrap();
    r.send(&note(AlertState::Firing)).await.unwrap();
    r.send(&note(AlertState::Resolved)).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3, "a 500 is retried");
    let trigger: serde_json::Value = serde_json::from_slice(&seen[1].2).unwrap();
    let resolve: serde_json::Value = serde_json::from_slice(&seen[2].2).unwrap();
    assert_eq!(trigger["event_action"], "trigger");
    assert_eq!(resolve["event_action"], "resolve");
    assert_eq!(trigger["dedup_key"], "821a94053e655138");
    assert_eq!(resolve["dedup_key"], trigger["dedup_key"]);
    assert_eq!(
        trigger["payload"]["summary"]
            .as_str()
            .unwrap()
            .chars()
            .count(),
        1024
    );
    assert_eq!(trigger["payload"]["severity"], "critical");
    assert_eq!(trigger["payload"]["source"], "NE_2rANN76DeYtZ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_signed_and_carry_extra_headers() {
    let (url, seen) = server(vec![]).await;
    let mut cfg = WebhookConfig::new(&url);
    cfg.secret = Some("s3cret".into());
    cfg.headers
        .push(("Authorization".into(), "Bearer abc".into()));
    let r = Webhook::new(cfg).unwrap();
    r.send(&note(AlertState::Firing)).await.unwrap();
    let seen = seen.lock().unwrap();
    let (_, headers, body) = &seen[0];
    assert_eq!(
        headers[SIGNATURE_HEADER].to_str().unwrap(),
        signature("s3cret", body),
        "the receiver can verify us"
    );
    assert_eq!(headers["authorization"], "Bearer abc");
    assert_ne!(signature("other", body), signature("s3cret", body));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_receiver_times_out_and_is_retried_within_bounds() {
    let hits = Arc::new(Mutex::new(0usize));
    let h = hits.clone();
    let app = axum::Router::new().route(
        "/",
        axum::routing::post(move || {
            let h = h.clone();
            async move {
                *h.lock().unwrap() += 1;
                tokio::time::sleep(Duration::from_secs(30)).await;
                axum::http::StatusCode::OK
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    let mut cfg = WebhookConfig::new(&format!("http://{addr}/"));
    cfg.timeout = Duration::from_millis(300);
    cfg.retries = 2;
    cfg.backoff = Duration::from_millis(100);
    let r = Webhook::new(cfg).unwrap();
    let start = Instant::now();
    match r.send(&note(AlertState::Firing)).await {
        Err(NotifyError::Exhausted {
            attempts: 3,
            reason,
            ..
        }) => assert_eq!(reason, "timeout"),
        other => panic!("{other:?}"),
    }
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "3 × 300 ms + backoff, not 30 s: {took:?}"
    );
    assert_eq!(*hits.lock().unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alertmanager_keeps_resending_what_the_previous_run_sent() {
    use sigwatch::notify::alertmanager::{ActiveState, Alertmanager, AlertmanagerConfig};
    let posted: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let p = posted.clone();
    let app = axum::Router::new().route(
        "/api/v2/alerts",
        axum::routing::post(move |body: axum::body::Bytes| {
            let p = p.clone();
            async move {
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                p.lock()
                    .unwrap()
                    .extend(v.as_array().unwrap().iter().cloned());
                "ok"
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    let cfg = || AlertmanagerConfig::new(&[format!("http://{addr}")]);
    let first = Alertmanager::new(cfg()).unwrap();
    first.send(&note(AlertState::Firing)).await.unwrap();
    // The checkpoint's form, read back by the next run.
    let saved: ActiveState =
        serde_json::from_slice(&serde_json::to_vec(&first.active_state()).unwrap()).unwrap();
    let next = Alertmanager::new(cfg()).unwrap();
    let now = sigwatch::clock::wall_ns();
    assert_eq!(next.resend(now).await.unwrap(), 0, "nothing of its own yet");
    next.restore_active(saved);
    let later = now + 90_000_000_000;
    assert_eq!(next.resend(later).await.unwrap(), 1);
    let got = posted.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "the first send and the re-send: {got:?}");
    let resent = &got[1];
    assert_eq!(resent["labels"], got[0]["labels"], "the same alert");
    let ends = sigwatch::decode::time::parse_rfc3339(resent["endsAt"].as_str().unwrap()).unwrap();
    assert!(
        ends > later + 60_000_000_000,
        "kept alive beyond the restart: endsAt {}",
        resent["endsAt"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_error_says_its_cause() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let mut cfg = WebhookConfig::new(&format!("http://127.0.0.1:{port}/"));
    cfg.retries = 0;
    let r = Webhook::new(cfg).unwrap();
    match r.send(&note(AlertState::Firing)).await {
        Err(NotifyError::Exhausted { reason, .. }) => assert!(
            reason.contains("error sending request") && reason.contains("onnection refused"),
            "the cause, not only that sending failed: {reason}"
        ),
        other => panic!("{other:?}"),
    }
}

/// Every receiver carries the links to the alert's lines: the webhook in
/// its JSON, Slack as a link section, PagerDuty in `links`, Alertmanager
/// as `generatorURL` and annotations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_receiver_carries_the_links_to_the_lines() {
    use sigwatch::alert::Links;
    use sigwatch::notify::alertmanager::{Alertmanager, AlertmanagerConfig};
    let mut n = note(AlertState::Firing);
    n.links = Some(Links {
        loki: Some("http://loki:3100/loki/api/v1/query_range?query=%7Bpod%3D%60egress-1%60%7D&start=1&end=2".into()),
        grafana: Some("https://grafana.example/explore?schemaVersion=1&panes=%7B%7D".into()),
        query: Some("{pod=`egress-1`} |= `egress_failed`".into()),
        lines: vec!["egress-1.log:4711".into()],
    });
    let links = n.links.clone().unwrap();
    // Webhook: the notification's own JSON.
    let (url, seen) = server(vec![]).await;
    Webhook::new(WebhookConfig::new(&url))
        .unwrap()
        .send(&n)
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&seen.lock().unwrap()[0].2).unwrap();
    assert_eq!(body["links"]["loki"], links.loki.clone().unwrap());
    assert_eq!(body["links"]["lines"][0], "egress-1.log:4711");
    // Slack: a section linking Grafana and Loki, and the sample's place.
    let (url, seen) = server(vec![]).await;
    Slack::new(&url, Duration::from_secs(5))
        .unwrap()
        .send(&n)
        .await
        .unwrap();
    let msg = String::from_utf8(seen.lock().unwrap()[0].2.clone()).unwrap();
    let grafana = links.grafana.clone().unwrap();
    assert!(msg.contains(&format!("<{grafana}|")), "{msg}");
    assert!(msg.contains("egress-1.log:4711"), "{msg}");
    // PagerDuty: the Events v2 `links` array.
    let (url, seen) = server(vec![(202, None, "{\"status\":\"success\"}")]).await;
    PagerDuty::new(
        "0123456789abcdef0123456789abcdef",
        Some(&url),
        Duration::from_secs(5),
    )
    .unwrap()
    .send(&n)
    .await
    .unwrap();
    let ev: serde_json::Value = serde_json::from_slice(&seen.lock().unwrap()[0].2).unwrap();
    assert_eq!(ev["links"][0]["href"], grafana.as_str());
    assert_eq!(ev["links"][1]["href"], links.loki.clone().unwrap());
    assert_eq!(
        ev["payload"]["custom_details"]["sample_lines"][0],
        "egress-1.log:4711"
    );
    // Alertmanager: generatorURL is where the lines are.
    let mut cfg = AlertmanagerConfig::new(&["http://127.0.0.1:9".to_string()]);
    cfg.generator_url = Some("http://sigwatch:9464".into());
    let am = Alertmanager::new(cfg).unwrap();
    let body = am.alert_body(&n, sigwatch::clock::wall_ns());
    assert_eq!(body["generatorURL"], grafana.as_str());
    assert_eq!(body["annotations"]["logs_url"], grafana.as_str());
    assert_eq!(
        body["annotations"]["logs_query"],
        links.query.clone().unwrap()
    );
    assert_eq!(body["annotations"]["log_lines"], "egress-1.log:4711");
    let plain = am.alert_body(&note(AlertState::Firing), 0);
    assert_eq!(
        plain["generatorURL"], "http://sigwatch:9464/?rule=egress.black_hole&group=NE_2rANN76DeYtZ",
        "without links, sigwatch's own page"
    );
}
