//! HTTP delivery shared by the webhook, Slack and PagerDuty receivers:
//! POST a JSON body with a timeout, retry network errors, timeouts, 408,
//! 429 (honouring `Retry-After`, capped) and 5xx with exponential backoff
//! and jitter, and never retry any other 4xx, because sending the same
//! request again cannot fix it.

use super::NotifyError;
use std::time::Duration;

/// Retry policy of one HTTP receiver.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub retries: u32,
    /// First backoff, doubled per retry.
    pub backoff: Duration,
    /// Longest wait, also the cap on `Retry-After`.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            retries: 3,
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

/// Builds a client with a timeout and our user agent.
pub fn client(timeout: Duration) -> Result<reqwest::Client, NotifyError> {
    reqwest::Client::builder()
        .timeout(timeout)
        .user_agent(concat!("sigwatch/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| NotifyError::Config(format!("cannot build HTTP client: {e}")))
}

/// Validates an http(s) URL and returns a name for logs that holds no
/// secret (webhook URLs often embed tokens): `kind scheme://host`.
pub fn safe_name(kind: &str, url: &str) -> Result<String, NotifyError> {
    let u = reqwest::Url::parse(url)
        .map_err(|e| NotifyError::Config(format!("invalid {kind} URL: {e}")))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(NotifyError::Config(format!(
            "{kind} URL must be http or https"
        )));
    }
    Ok(format!(
        "{kind} {}://{}",
        u.scheme(),
        u.host_str().unwrap_or("?")
    ))
}

fn backoff(p: &RetryPolicy, attempt: u32) -> Duration {
    let base = p.backoff.saturating_mul(1u32 << attempt.min(16));
    let noise = (crate::clock::wall_ns() % 1000) as f64 / 2000.0;
    (base + base.mul_f64(noise)).min(p.max_backoff)
}

/// POSTs `body` (already serialised JSON) with `headers`, retrying as the
/// module documents. `name` is the receiver's log name.
pub async fn post(
    client: &reqwest::Client,
    name: &str,
    url: &str,
    body: Vec<u8>,
    headers: &[(String, String)],
    policy: &RetryPolicy,
) -> Result<(), NotifyError> {
    let mut last = String::new();
    for attempt in 0..=policy.retries {
        let mut req = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone());
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let wait = match req.send().await {
            Ok(resp) => {
                let status = resp.status();
                if status.is_success() {
                    return Ok(());
                }
                let code = status.as_u16();
                let retry_after = resp
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                let text: String = resp
                    .text()
                    .await
                    .unwrap_or_default()
                    .chars()
                    .take(300)
                    .collect();
                if !(code == 408 || code == 429 || status.is_server_error()) {
                    return Err(NotifyError::Rejected {
                        receiver: name.to_string(),
                        status: code,
                        body: text,
                    });
                }
                last = format!("HTTP {code}");
                retry_after
                    .map(|d| d.min(policy.max_backoff))
                    .unwrap_or_else(|| backoff(policy, attempt))
            }
            Err(e) => {
                last = if e.is_timeout() {
                    "timeout".to_string()
                } else {
                    crate::cause::chain(&e.without_url())
                };
                backoff(policy, attempt)
            }
        };
        if attempt < policy.retries {
            tracing::debug!(receiver = name, attempt, error = %last, "Delivery attempt failed; retrying.");
            tokio::time::sleep(wait).await;
        }
    }
    Err(NotifyError::Exhausted {
        receiver: name.to_string(),
        attempts: policy.retries + 1,
        reason: last,
    })
}
