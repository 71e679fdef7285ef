//! `sigwatch silence add|list|expire`: the client of a live instance's
//! `/api/silences` (see [`crate::silence`]), so a person on call can snooze
//! a page from a terminal, with the status page's credential.

use super::AppError;
use crate::silence::NewSilence;
use std::time::Duration;

/// What to do.
#[derive(Debug, Clone)]
pub enum SilenceAction {
    /// Add a silence.
    Add(NewSilence),
    /// List the silences kept.
    List,
    /// End a silence now.
    Expire(String),
}

/// Where the instance is and how to pass its guard.
#[derive(Debug, Clone)]
pub struct Instance {
    /// Its base URL (`http://127.0.0.1:9464`).
    pub url: String,
    /// A bearer token (the status page's `--web-token-file`).
    pub token: Option<String>,
}

/// Runs `action` against `instance`; returns what to print (the JSON
/// answer with `json`, else one line per silence).
pub async fn silence(
    instance: &Instance,
    action: SilenceAction,
    json: bool,
) -> Result<String, AppError> {
    let base = format!("{}/api/silences", instance.url.trim_end_matches('/'));
    let text = send(instance, &base, |client| match &action {
        SilenceAction::Add(n) => client
            .post(&base)
            .header("content-type", "application/json")
            .body(serde_json::to_string(n).unwrap_or_default()),
        SilenceAction::List => client.get(&base),
        SilenceAction::Expire(id) => client.delete(format!("{base}/{id}")),
    })
    .await?;
    if json {
        return Ok(format!("{}\n", text.trim()));
    }
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| AppError::Setup(format!("{base}: {e}")))?;
    let rows = match v {
        serde_json::Value::Array(a) => a,
        one => vec![one],
    };
    Ok(rows.iter().map(line).collect())
}

/// `templates --known ID`: marks template `id` (42 or template-42) known
/// on `instance`; returns the line to print.
pub async fn know_template(instance: &Instance, id: &str) -> Result<String, AppError> {
    let url = format!(
        "{}/api/templates/{id}/known",
        instance.url.trim_end_matches('/')
    );
    let text = send(instance, &url, |client| client.post(&url)).await?;
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    Ok(format!(
        "{}\tknown\t{}\n",
        v["id"].as_str().unwrap_or(id),
        v["template"].as_str().unwrap_or_default()
    ))
}

/// Sends the request `build` makes to `url` with the instance's token;
/// the body of a 2xx answer, else the error the API gave.
async fn send(
    instance: &Instance,
    url: &str,
    build: impl FnOnce(&reqwest::Client) -> reqwest::RequestBuilder,
) -> Result<String, AppError> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .map_err(|e| AppError::Setup(format!("HTTP client: {e}")))?;
    let req = build(&client);
    let req = match &instance.token {
        Some(t) => req.bearer_auth(t),
        None => req,
    };
    let resp = req
        .send()
        .await
        .map_err(|e| AppError::Setup(format!("{url}: {e}")))?;
    let status = resp.status();
    let text = resp
        .text()
        .await
        .map_err(|e| AppError::Setup(format!("{url}: {e}")))?;
    if !status.is_success() {
        let why = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or_else(|| text.trim().to_string());
        return Err(AppError::Setup(format!("{url}: HTTP {status}: {why}")));
    }
    Ok(text)
}

/// One silence as a line: id, state, until, matchers, who, why.
fn line(s: &serde_json::Value) -> String {
    let matchers = s["matchers"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    format!(
        "{}\t{}\tuntil {}\t{}\tby {}\t{}\n",
        s["id"].as_str().unwrap_or_default(),
        s["state"].as_str().unwrap_or_default(),
        s["ends_at"].as_str().unwrap_or_default(),
        matchers,
        s["created_by"].as_str().unwrap_or("?"),
        s["comment"].as_str().unwrap_or_default(),
    )
}
