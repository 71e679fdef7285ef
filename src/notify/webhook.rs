//! Generic webhook: POSTs each notification as JSON (the NDJSON schema),
//! with optional extra headers and an optional HMAC-SHA256 signature so the
//! receiver can authenticate us: `X-Sigwatch-Signature: sha256=<hex>` over
//! the exact body bytes. Retries as [`super::http`] documents. The URL may
//! hold a secret token, so only its scheme and host appear in logs.

use super::http::{self, RetryPolicy};
use super::{BoxFuture, NotifyError, Receiver};
use crate::alert::Notification;
use hmac::{Hmac, KeyInit, Mac};
use std::time::Duration;

/// The signature header.
pub const SIGNATURE_HEADER: &str = "X-Sigwatch-Signature";

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
    /// Extra headers (e.g. an `Authorization` the receiver expects).
    pub headers: Vec<(String, String)>,
    /// HMAC-SHA256 key; when set, every body is signed.
    pub secret: Option<String>,
}

impl WebhookConfig {
    /// Defaults for a URL.
    pub fn new(url: &str) -> WebhookConfig {
        let p = RetryPolicy::default();
        WebhookConfig {
            url: url.to_string(),
            timeout: Duration::from_secs(5),
            retries: p.retries,
            backoff: p.backoff,
            max_backoff: p.max_backoff,
            headers: Vec::new(),
            secret: None,
        }
    }
}

/// `sha256=<hex>` of HMAC-SHA256(secret, body).
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = match Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
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
        let name = http::safe_name("webhook", &cfg.url)?;
        let client = http::client(cfg.timeout)?;
        Ok(Webhook { cfg, name, client })
    }
}

impl Receiver for Webhook {
    fn identity(&self) -> String {
        self.cfg.url.clone()
    }
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
            let body = serde_json::to_vec(n).map_err(|e| NotifyError::Config(e.to_string()))?;
            let mut headers = self.cfg.headers.clone();
            if let Some(secret) = &self.cfg.secret {
                headers.push((SIGNATURE_HEADER.to_string(), signature(secret, &body)));
            }
            let policy = RetryPolicy {
                retries: self.cfg.retries,
                backoff: self.cfg.backoff,
                max_backoff: self.cfg.max_backoff,
            };
            http::post(
                &self.client,
                &self.name,
                &self.cfg.url,
                body,
                &headers,
                &policy,
            )
            .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_match_a_known_vector() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
