//! The decoded event and the resolution of group keys over it: a key is
//! an alias (`node`, `pod`, `upstream`, `workload`) or a field path; the
//! first present value wins.

use super::payload::Fields;
use super::severity::Level;
use super::{quick, KeyConfig, WORKLOAD_KEY};
use std::borrow::Cow;
use std::sync::Arc;

/// Context labels of a stream: `pod`, `container`, `namespace`, Loki labels.
pub type Labels = Arc<Vec<(String, String)>>;

/// A fully decoded event.
#[derive(Debug, Clone)]
pub struct Event {
    /// Event time (ns since epoch).
    pub time: i64,
    /// Level.
    pub level: Option<Level>,
    /// Message.
    pub message: String,
    /// The payload text.
    pub text: String,
    /// Parsed fields.
    pub fields: Fields,
    /// Regex captures added by the matcher.
    pub captures: Vec<(String, String)>,
    /// Stream context labels.
    pub labels: Labels,
    /// Sticky values inherited from the stream.
    pub sticky: Vec<(String, String)>,
    /// True when the payload looked structured but did not parse.
    pub malformed: bool,
}

impl Event {
    /// Looks up a field: `level`, `msg`/`message`, `labels.NAME`, regex
    /// captures, payload fields, then the stream's sticky values.
    pub fn get(&self, path: &str) -> Option<Cow<'_, str>> {
        match path {
            "level" => return self.level.map(|l| Cow::Borrowed(l.as_str())),
            "msg" | "message" => return Some(Cow::Borrowed(self.message.as_str())),
            _ => {}
        }
        if let Some(l) = path.strip_prefix("labels.") {
            return label(&self.labels, l);
        }
        if let Some(lit) = path.strip_prefix("after:") {
            return quick::token_after(&self.text, lit).map(Cow::Borrowed);
        }
        if let Some((_, v)) = self.captures.iter().find(|(k, _)| k == path) {
            return Some(Cow::Borrowed(v.as_str()));
        }
        if let Some(v) = self.fields.get(path) {
            return Some(v);
        }
        self.sticky
            .iter()
            .find(|(k, _)| k == path)
            .map(|(_, v)| Cow::Borrowed(v.as_str()))
    }
}

pub(super) fn label<'a>(labels: &'a [(String, String)], name: &str) -> Option<Cow<'a, str>> {
    labels
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| Cow::Borrowed(v.as_str()))
}

/// Resolves a group key (an alias, `workload`, or a field path) through a
/// lookup function; first present, non-empty value wins.
pub fn resolve_key<'a>(
    keys: &KeyConfig,
    key: &str,
    get: &dyn Fn(&str) -> Option<Cow<'a, str>>,
) -> Option<String> {
    if key == WORKLOAD_KEY {
        return resolve_key(keys, "pod", get).map(|p| workload_of(&p));
    }
    let found = match keys.aliases.get(key) {
        Some(paths) => paths.iter().find_map(|p| get(p).filter(|v| !v.is_empty())),
        None => get(key).filter(|v| !v.is_empty()),
    }?;
    if key == "pod" {
        // klog writes pods as namespace/name; events and prefixes as name.
        return Some(found.rsplit('/').next().unwrap_or(&found).to_string());
    }
    Some(found.into_owned())
}

/// The workload of a pod: its name without the generated suffixes
/// (`api-7c9d8f6b5-x2x7q` → `api`, `livekit-server-0` → `livekit-server`).
pub fn workload_of(pod: &str) -> String {
    let pod = pod.rsplit('/').next().unwrap_or(pod);
    let Some((base, last)) = pod.rsplit_once('-') else {
        return pod.to_string();
    };
    if !last.is_empty() && last.len() <= 4 && last.bytes().all(|b| b.is_ascii_digit()) {
        return base.to_string();
    }
    if last.len() == 5 {
        // Deployment pods carry a ReplicaSet hash (6–10 chars) before the suffix.
        if let Some((base2, hash)) = base.rsplit_once('-') {
            let hashy =
                (6..=10).contains(&hash.len()) && hash.bytes().all(|b| b.is_ascii_alphanumeric());
            if hashy && hash.bytes().any(|b| b.is_ascii_digit()) {
                return base2.to_string();
            }
        }
        return base.to_string();
    }
    pod.to_string()
}
