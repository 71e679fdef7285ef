//! Generic webhook: POSTs each notification as JSON.
//!
//! Retries network errors, timeouts, 408, 429 (honouring `Retry-After`, capped)
//! and 5xx with exponential backoff and jitter; any other 4xx is final,
//! because sending the same request again cannot fix it. The URL may hold a
//! secret token, so only its scheme and host appear in logs.

use super::{BoxFuture, NotifyError, Receiver};
use crate::alert::Notification;
use std::time::Duration;

/// Webhook settings.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Target URL.
    pub url: String,
    /// Per-request timeout (default 5 s).
    pub timeout: Duration,
    /// Retries after the first attempt (default 3).
    pub retries: u32,
    /// First backoff (default 500 ms), doubled per retry.
    pub backoff: Duration,
    /// Longest wait honoured from `Retry-After` or backoff (default 30 s).
    pub max_backoff: Duration,
}

impl WebhookConfig {
    /// Defaults for a URL.
    pub fn new(url: &str) -> WebhookConfig {
        WebhookConfig {
            url: url.to_string(),
            timeout: Duration::from_secs(5),
            retries: 3,
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

/// The webhook receiver.
pub struct Webhook {
    cfg: WebhookConfig,
    name: String,
    client: reqwest::Client,
}

impl Webhook {
    /// Builds the receiver; the URL must be http or https.
    pub fn new(cfg: WebhookConfig) -> Result<Webhook, NotifyError> {
        let url = reqwest::Url::parse(&cfg.url)
            .map_err(|e| NotifyError::Config(format!("invalid webhook URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(NotifyError::Config(
                "webhook URL must be http or https".into(),
            ));
        }
        let name = format!(
            "webhook {}://{}",
            url.scheme(),
            url.host_str().unwrap_or("?")
        );
        let client = reqwest::Client::builder()
            .timeout(cfg.timeout)
            .user_agent(concat!("sigwatch/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| NotifyError::Config(format!("cannot build HTTP client: {e}")))?;
        Ok(Webhook { cfg, name, client })
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let base = self.cfg.backoff.saturating_mul(1u32 << attempt.min(16));
        // Jitter: up to +50 %, from the clock's sub-second noise.
        let noise = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let jitter = base.mul_f64((noise % 1000) as f64 / 2000.0);
        (base + jitter).min(self.cfg.max_backoff)
    }
}

fn retry_after(resp: &reqwest::Response) -> Option<Duration> {
    let v = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?;
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}

impl Receiver for Webhook {
    fn name(&self) -> &str {
        &self.name
    }

    fn lane(&self) -> super::LaneConfig {
        super::LaneConfig {
            rate: Some((10.0, 20)),
            ..super::LaneConfig::default()
        }
    }

    fn send<'a>(&'a self, n: &'a Notification) -> BoxFuture<'a, Result<(), NotifyError>> {
        Box::pin(async move {
            let mut last = String::new();
            for attempt in 0..=self.cfg.retries {
                let wait = match self.client.post(&self.cfg.url).json(n).send().await {
                    Ok(resp) => {
                        let status = resp.status();
                        if status.is_success() {
                            return Ok(());
                        }
                        let code = status.as_u16();
                        let retryable = code == 408 || code == 429 || status.is_server_error();
                        let ra = retry_after(&resp);
                        let body: String = resp
                            .text()
                            .await
                            .unwrap_or_default()
                            .chars()
                            .take(200)
                            .collect();
                        if !retryable {
                            return Err(NotifyError::Rejected {
                                receiver: self.name.clone(),
                                status: code,
                                body,
                            });
                        }
                        last = format!("HTTP {code}");
                        ra.map(|d| d.min(self.cfg.max_backoff))
                            .unwrap_or_else(|| self.backoff(attempt))
                    }
                    Err(e) => {
                        last = if e.is_timeout() {
                            "timeout".to_string()
                        } else {
                            e.without_url().to_string()
                        };
                        self.backoff(attempt)
                    }
                };
                if attempt < self.cfg.retries {
                    tracing::debug!(receiver = %self.name, attempt, error = %last, "Webhook attempt failed; retrying.");
                    tokio::time::sleep(wait).await;
                }
            }
            Err(NotifyError::Exhausted {
                receiver: self.name.clone(),
                attempts: self.cfg.retries + 1,
                reason: last,
            })
        })
    }
}
