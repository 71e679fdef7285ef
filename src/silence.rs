//! Silences: "I know, stop paging me about this" for a while. Alertmanager's
//! silences reach only Alertmanager's own receivers; sigwatch pages
//! webhooks, Slack and PagerDuty directly, so it keeps its own. A silence
//! names the alerts it covers by exact label matchers (`alertname` is the
//! rule id, `group` the node or partition, `severity`, and the rule's own
//! labels) and lasts until a wall-clock time; who set it and why are kept
//! beside it. Silenced notifications are still recorded (status page,
//! report) and counted, never sent; an alert silenced while it fired and
//! still firing when its silence ends is sent then. An incident is silenced
//! when its own labels match or every alert of its chain is silenced.
//!
//! A live instance serves them at `/api/silences` (behind the status page's
//! credentials) and keeps them in `--state-dir` (`silences.json`), so a
//! restart keeps every silence.

use crate::alert::Notification;
use crate::clock::format_rfc3339;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Most silences kept (active and recently ended).
pub const MAX_SILENCES: usize = 1000;

/// How long an ended silence is still listed (ns).
const KEEP_ENDED: i64 = 7 * 86_400 * 1_000_000_000;

/// Longest silence (ns): a year; longer is a rule to delete.
const MAX_DURATION: i64 = 366 * 86_400 * 1_000_000_000;

/// What can go wrong with a silence.
#[derive(Debug, thiserror::Error)]
pub enum SilenceError {
    /// The request is not a valid silence.
    #[error("{0}")]
    Invalid(String),
    /// No silence has that id.
    #[error("no silence {0}")]
    Unknown(String),
    /// `MAX_SILENCES` are kept already.
    #[error("{MAX_SILENCES} silences are kept already; expire some first")]
    Full,
    /// The file of silences cannot be read or written.
    #[error("silences file {path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// What failed.
        reason: String,
    },
}

/// One silence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Silence {
    /// `s-` and a sequence number.
    pub id: String,
    /// Exact matches on the notification's labels, all of which must hold.
    pub matchers: BTreeMap<String, String>,
    /// From (wall clock, ns).
    pub starts_at: i64,
    /// Until (wall clock, ns); an expired silence ends when it was expired.
    pub ends_at: i64,
    /// Who set it.
    pub created_by: String,
    /// Why.
    pub comment: String,
}

impl Silence {
    /// Whether it covers a notification with `labels` at `now`.
    fn covers(&self, labels: &dyn Fn(&str) -> Option<String>, now: i64) -> bool {
        self.active(now)
            && self
                .matchers
                .iter()
                .all(|(k, v)| labels(k).as_deref() == Some(v.as_str()))
    }

    /// Whether it is in force at `now`.
    pub fn active(&self, now: i64) -> bool {
        self.starts_at <= now && now < self.ends_at
    }

    /// Its form for `/api/silences` and `silence list`.
    pub fn view(&self, now: i64) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "matchers": self.matchers,
            "starts_at": format_rfc3339(self.starts_at),
            "ends_at": format_rfc3339(self.ends_at),
            "state": if self.active(now) { "active" } else if now < self.starts_at { "pending" } else { "expired" },
            "created_by": self.created_by,
            "comment": self.comment,
        })
    }
}

/// A request for a new silence (the body of `POST /api/silences`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NewSilence {
    /// Exact label matchers (at least one).
    #[serde(default)]
    pub matchers: BTreeMap<String, String>,
    /// Shorthand for the matcher `alertname` (the rule id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// How long from now (`24h`, `90m`).
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Who sets it.
    #[serde(default)]
    pub created_by: String,
    /// Why (required: the next person on call reads it).
    #[serde(default)]
    pub comment: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Saved {
    next: u64,
    silences: Vec<Silence>,
}

/// The silences of a live instance, shared by the HTTP API and delivery.
#[derive(Debug)]
pub struct SilenceBook {
    inner: Mutex<Saved>,
    path: Option<PathBuf>,
    silenced: AtomicU64,
}

impl SilenceBook {
    /// The silences kept in `path` (none yet if it does not exist), or in
    /// memory only.
    pub fn open(path: Option<PathBuf>) -> Result<SilenceBook, SilenceError> {
        let saved = match &path {
            Some(p) => match std::fs::read(p) {
                Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| SilenceError::File {
                    path: p.display().to_string(),
                    reason: e.to_string(),
                })?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Saved::default(),
                Err(e) => {
                    return Err(SilenceError::File {
                        path: p.display().to_string(),
                        reason: e.to_string(),
                    })
                }
            },
            None => Saved::default(),
        };
        Ok(SilenceBook {
            inner: Mutex::new(saved),
            path,
            silenced: AtomicU64::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Saved> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn save(&self, saved: &Saved) -> Result<(), SilenceError> {
        let Some(p) = &self.path else { return Ok(()) };
        let bytes = serde_json::to_vec_pretty(saved).map_err(|e| SilenceError::File {
            path: p.display().to_string(),
            reason: e.to_string(),
        })?;
        crate::durable::write_atomic(p, &bytes).map_err(|e| SilenceError::File {
            path: p.display().to_string(),
            reason: e.to_string(),
        })
    }

    /// Adds a silence from `now` on.
    pub fn add(&self, req: NewSilence, now: i64) -> Result<Silence, SilenceError> {
        let mut matchers = req.matchers;
        if let Some(r) = req.rule {
            matchers.insert("alertname".into(), r);
        }
        matchers.retain(|k, _| !k.is_empty());
        if matchers.is_empty() {
            return Err(SilenceError::Invalid(
                "a silence needs at least one matcher (--rule R or --match label=value): one that matches everything would hide every page".into(),
            ));
        }
        if req.comment.trim().is_empty() {
            return Err(SilenceError::Invalid(
                "a silence needs a comment: the next person on call reads why".into(),
            ));
        }
        let d = req
            .duration
            .as_deref()
            .ok_or_else(|| SilenceError::Invalid("a silence needs a duration (for: 24h)".into()))?;
        let d = humantime::parse_duration(d.trim())
            .map_err(|e| SilenceError::Invalid(format!("duration {d:?}: {e}")))?;
        let d = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        if d <= 0 || d > MAX_DURATION {
            return Err(SilenceError::Invalid(
                "a silence lasts more than nothing and at most a year".into(),
            ));
        }
        let mut saved = self.lock();
        saved
            .silences
            .retain(|s| s.active(now) || now.saturating_sub(s.ends_at) < KEEP_ENDED);
        if saved.silences.len() >= MAX_SILENCES {
            return Err(SilenceError::Full);
        }
        saved.next += 1;
        let s = Silence {
            id: format!("s-{}", saved.next),
            matchers,
            starts_at: now,
            ends_at: now.saturating_add(d),
            created_by: req.created_by.trim().to_string(),
            comment: req.comment.trim().to_string(),
        };
        saved.silences.push(s.clone());
        self.save(&saved)?;
        Ok(s)
    }

    /// Ends silence `id` at `now`.
    pub fn expire(&self, id: &str, now: i64) -> Result<Silence, SilenceError> {
        let mut saved = self.lock();
        let s = saved
            .silences
            .iter_mut()
            .find(|s| s.id == id)
            .ok_or_else(|| SilenceError::Unknown(id.to_string()))?;
        s.ends_at = s.ends_at.min(now);
        let s = s.clone();
        self.save(&saved)?;
        Ok(s)
    }

    /// Every silence kept, newest first, as `/api/silences` shows them.
    pub fn list(&self, now: i64) -> serde_json::Value {
        let saved = self.lock();
        serde_json::Value::Array(saved.silences.iter().rev().map(|s| s.view(now)).collect())
    }

    /// The active silences, as the status page shows them.
    pub fn active(&self, now: i64) -> serde_json::Value {
        let saved = self.lock();
        serde_json::Value::Array(
            saved
                .silences
                .iter()
                .filter(|s| s.active(now))
                .map(|s| s.view(now))
                .collect(),
        )
    }

    /// The silence that covers `n` at `now`, if any. An incident is covered
    /// by a silence of its own labels, or when a silence covers every alert
    /// of its chain.
    pub fn silencing(&self, n: &Notification, now: i64) -> Option<String> {
        let saved = self.lock();
        if saved.silences.is_empty() {
            return None;
        }
        let labels = |k: &str| n.labels.get(k).cloned();
        if let Some(s) = saved.silences.iter().find(|s| s.covers(&labels, now)) {
            return Some(s.id.clone());
        }
        let chain = &n.incident.as_ref()?.chain;
        let mut by = None;
        for link in chain {
            let labels = |k: &str| match k {
                "alertname" => Some(link.rule.clone()),
                "group" => Some(link.group.clone()),
                "severity" => Some(link.severity.clone()),
                _ => None,
            };
            by = Some(
                saved
                    .silences
                    .iter()
                    .find(|s| s.covers(&labels, now))?
                    .id
                    .clone(),
            );
        }
        by
    }

    /// Counts a notification silenced.
    pub fn count(&self) {
        self.silenced.fetch_add(1, Ordering::Relaxed);
    }

    /// Notifications silenced so far.
    pub fn silenced(&self) -> u64 {
        self.silenced.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::AlertState;
    use crate::clock::Stamp;

    const H: i64 = 3_600_000_000_000;

    fn note(rule: &str, group: &str) -> Notification {
        let mut n = crate::alert::test_notification(rule, group);
        n.labels.insert("severity".into(), "critical".into());
        n
    }

    fn req(rule: Option<&str>, m: &[(&str, &str)], d: &str) -> NewSilence {
        NewSilence {
            matchers: m
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            rule: rule.map(str::to_string),
            duration: Some(d.into()),
            created_by: "ana".into(),
            comment: "deploy adds this line".into(),
        }
    }

    #[test]
    fn a_silence_covers_its_matches_until_it_ends_or_is_expired() {
        let book = SilenceBook::open(None).unwrap();
        let s = book
            .add(req(Some("novel"), &[("group", "template-7")], "2h"), 0)
            .unwrap();
        assert_eq!(
            book.silencing(&note("novel", "template-7"), H),
            Some(s.id.clone())
        );
        assert_eq!(book.silencing(&note("novel", "template-8"), H), None);
        assert_eq!(book.silencing(&note("disk", "template-7"), H), None);
        // Ends by itself.
        assert_eq!(book.silencing(&note("novel", "template-7"), 2 * H), None);
        // Or when expired.
        let t = book.add(req(Some("disk"), &[], "24h"), 0).unwrap();
        assert!(book.silencing(&note("disk", "n1"), H).is_some());
        book.expire(&t.id, H).unwrap();
        assert_eq!(book.silencing(&note("disk", "n1"), H), None);
        assert!(matches!(
            book.expire("s-99", H),
            Err(SilenceError::Unknown(_))
        ));
        let list = book.list(H);
        assert_eq!(list[0]["state"], "expired");
        assert_eq!(list[0]["created_by"], "ana");
    }

    #[test]
    fn a_silence_needs_a_matcher_a_comment_and_a_sane_duration() {
        let book = SilenceBook::open(None).unwrap();
        assert!(book.add(req(None, &[], "1h"), 0).is_err());
        let mut r = req(Some("disk"), &[], "1h");
        r.comment = " ".into();
        assert!(book.add(r, 0).is_err());
        assert!(book.add(req(Some("disk"), &[], "soon"), 0).is_err());
        assert!(book.add(req(Some("disk"), &[], "400days"), 0).is_err());
        assert!(book.add(req(Some("disk"), &[], "1h"), 0).is_ok());
    }

    #[test]
    fn an_incident_is_silenced_when_every_alert_of_its_chain_is() {
        let book = SilenceBook::open(None).unwrap();
        book.add(req(Some("disk"), &[], "1h"), 0).unwrap();
        let mut inc = note("incident", "inc-1");
        let link = |rule: &str| crate::alert::ChainLink {
            rule: rule.into(),
            title: rule.into(),
            severity: "critical".into(),
            group: "n1".into(),
            state: AlertState::Firing,
            starts_at: Stamp::at(0),
            ends_at: None,
            summary: String::new(),
            fingerprint: String::new(),
        };
        inc.incident = Some(crate::alert::IncidentInfo {
            id: "inc-1".into(),
            event: crate::alert::IncidentEvent::Opened,
            root: "disk".into(),
            chain: vec![link("disk")],
            nodes: vec!["n1".into()],
            affected: vec!["n1".into()],
            omitted: 0,
        });
        assert!(book.silencing(&inc, 1).is_some());
        if let Some(i) = inc.incident.as_mut() {
            i.chain.push(link("upload"));
        }
        assert!(book.silencing(&inc, 1).is_none());
    }

    #[test]
    fn silences_survive_a_restart_in_their_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("silences.json");
        let book = SilenceBook::open(Some(path.clone())).unwrap();
        let s = book.add(req(Some("disk"), &[], "1h"), 0).unwrap();
        drop(book);
        let again = SilenceBook::open(Some(path.clone())).unwrap();
        assert_eq!(again.silencing(&note("disk", "n1"), 1), Some(s.id));
        // Ids go on from where they were.
        let t = again.add(req(Some("x"), &[], "1h"), 0).unwrap();
        assert_eq!(t.id, "s-2");
        std::fs::write(&path, "{not json").unwrap();
        assert!(SilenceBook::open(Some(path)).is_err());
    }
}
