//! Delivery under a receiver outage: a real HTTP receiver on 127.0.0.1 is
//! down (503) for 60 seconds while an alert storm is dispatched; after it
//! recovers, every alert arrives exactly once in its newest state — and an
//! alert that fired and resolved during the outage arrives as its page then
//! its resolve (a resolve alone never pages in PagerDuty or Alertmanager) —
//! and the request rate never exceeds the token bucket (asserted on the
//! receiver's own timestamps).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;
use sigwatch::alert::{AlertState, Notification};
use sigwatch::notify::webhook::{Webhook, WebhookConfig};
use sigwatch::notify::{Dispatcher, LaneConfig, Receiver};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// (arrival, accepted, fingerprint, state) of one request.
type Request = (Instant, bool, String, String);

fn note(i: usize, state: AlertState) -> Notification {
    let mut n = common::black_hole(state);
    n.rule = "t.storm".into();
    n.title = "storm".into();
    n.group = format!("node-{i}");
    n.starts_at = "2026-11-29T00:00:00.000Z".into();
    n.ends_at = None;
    n.count = 1;
    n.top_groups = vec![];
    n.share = None;
    n.samples = vec![];
    n.fingerprint = format!("{i:016x}");
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sixty_second_outage_during_a_storm_loses_nothing_and_never_bursts() {
    const OUTAGE: Duration = Duration::from_secs(60);
    let start = Instant::now();
    let log: Arc<Mutex<Vec<Request>>> = Arc::default();
    let l = log.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: axum::Json<serde_json::Value>| {
            let l = l.clone();
            async move {
                let up = start.elapsed() >= OUTAGE;
                let fp = body["fingerprint"].as_str().unwrap_or_default().to_string();
                let st = body["state"].as_str().unwrap_or_default().to_string();
                l.lock().unwrap().push((Instant::now(), up, fp, st));
                if up {
                    axum::http::StatusCode::OK
                } else {
                    axum::http::StatusCode::SERVICE_UNAVAILABLE
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let mut wc = WebhookConfig::new(&format!("http://{addr}/hook"));
    wc.retries = 1;
    wc.backoff = Duration::from_millis(200);
    let hook: Arc<dyn Receiver> = Arc::new(Webhook::new(wc).unwrap());
    let lane = LaneConfig {
        max_backoff: Duration::from_secs(3),
        ..hook.lane()
    };
    let (rate, burst) = lane.rate.unwrap();
    let d = Dispatcher::with_lanes(vec![(hook, lane)], false);

    // The storm: 40 alerts fire; half of them resolve while the receiver is down.
    for i in 0..40 {
        d.dispatch(note(i, AlertState::Firing)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in 0..20 {
        d.dispatch(note(i, AlertState::Resolved)).await;
    }
    tokio::time::sleep(OUTAGE.saturating_sub(start.elapsed())).await;
    let unfinished = d.shutdown(Duration::from_secs(30)).await;
    assert!(unfinished.is_empty(), "drained after recovery");

    let log = log.lock().unwrap().clone();
    let accepted: Vec<&Request> = log.iter().filter(|e| e.1).collect();
    let mut final_state: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (_, _, fp, st) in &accepted {
        final_state.entry(fp.clone()).or_default().push(st.clone());
    }
    assert_eq!(final_state.len(), 40, "every alert arrived");
    for (fp, states) in &final_state {
        let i = usize::from_str_radix(fp, 16).unwrap();
        let want: &[&str] = if i < 20 {
            &["firing", "resolved"]
        } else {
            &["firing"]
        };
        assert_eq!(states, &want, "{fp}: each state once, the page first");
    }
    // The rate bound holds over every window, failed attempts included.
    let times: Vec<Instant> = log.iter().map(|e| e.0).collect();
    for i in 0..times.len() {
        for j in i..times.len() {
            let t = times[j].duration_since(times[i]).as_secs_f64();
            let n = (j - i + 1) as f64;
            // A lane send may make one extra attempt (retries = 1) per token.
            assert!(
                n <= 2.0 * (f64::from(burst) + rate * t) + 2.0,
                "{n} requests in {t:.2}s"
            );
        }
    }
    let after: Vec<Instant> = accepted.iter().map(|e| e.0).collect();
    for i in 0..after.len() {
        for j in i..after.len() {
            let t = after[j].duration_since(after[i]).as_secs_f64();
            assert!(
                ((j - i + 1) as f64) <= f64::from(burst) + rate * t + 1.0,
                "recovery is smooth, not a burst"
            );
        }
    }
}
