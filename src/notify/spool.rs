//! The spool: a receiver's undelivered queue and the receipts of what it
//! delivered, kept in the state directory, so a restart neither loses a
//! notification nor sends one twice.

use super::phase;
use crate::alert::Notification;

/// Alerts whose last delivery a spool remembers per receiver: enough to
/// recognise every notification a restart can produce again (those of the
/// seconds between the last checkpoint and the stop).
pub const MAX_RECEIPTS: usize = 4096;

/// What a receiver was told last about one alert (or incident).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Receipt {
    /// `firing`, `repeat`, `resolved`; for incidents `opened`, `updated`,
    /// `resolved`.
    pub phase: String,
    /// Its [`delivery_key`].
    pub key: String,
    /// The start of the episode it was about.
    #[serde(default)]
    pub starts_at: String,
}

impl Receipt {
    /// The receipt of delivering `n`.
    pub fn of(n: &Notification) -> Receipt {
        Receipt {
            phase: phase(n).to_string(),
            key: delivery_key(n),
            starts_at: n.starts_at.to_string(),
        }
    }

    /// Whether a receiver told this already has nothing to learn from `n`:
    /// the very same notification, or the same state again — the firing of
    /// an episode it was told fires (or already resolved), resolved after
    /// resolved, an incident opened or updated after it was
    /// opened (an incident id belongs to one episode). That is what a
    /// restart produces when it reads again the lines after its checkpoint:
    /// the same alerts, though not always byte for byte (counts can differ).
    /// A firing of another episode (its resolve was replaced before it went
    /// out), a repeat and an incident update that differ are news and go out.
    pub fn covers(&self, n: &Notification) -> bool {
        if self.key == delivery_key(n) {
            return true;
        }
        match (phase(n), self.phase.as_str()) {
            ("firing", "firing" | "repeat" | "resolved") => n.starts_at.as_str() == self.starts_at,
            ("resolved", "resolved") => true,
            ("opened", _) => true,
            ("updated", "resolved") => true,
            _ => false,
        }
    }
}

/// The spool format this version writes.
pub(super) const SPOOL_VERSION: u32 = 2;

/// A spool file: the receiver's undelivered queue and the receipts of
/// what it delivered last.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct SpoolFile {
    pub(super) version: u32,
    /// The receiver's name, for people reading the file.
    pub(super) receiver: String,
    pub(super) queue: Vec<Notification>,
    /// Per alert fingerprint, least recently delivered first.
    pub(super) delivered: Vec<(String, Receipt)>,
}

/// What identifies one delivery of a notification: its alert, state and
/// start, and what tells apart the notifications one alert sends in one
/// state (a repeat's latest match and count; an incident update's chain).
/// The same input gives the same keys, so a restart that reads some lines
/// again recognises what it had already delivered.
pub fn delivery_key(n: &Notification) -> String {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    let mut put = |s: &str| {
        h.write(s.as_bytes());
        h.write(&[0]);
    };
    put(&n.fingerprint);
    put(match n.state {
        crate::alert::AlertState::Firing => "firing",
        crate::alert::AlertState::Resolved => "resolved",
    });
    put(&n.starts_at);
    if n.repeat {
        put("repeat");
        put(n.last_seen.as_deref().unwrap_or(""));
        put(&n.count.to_string());
    }
    if let Some(i) = &n.incident {
        put(match i.event {
            crate::alert::IncidentEvent::Opened => "opened",
            crate::alert::IncidentEvent::Updated => "updated",
            crate::alert::IncidentEvent::Resolved => "resolved",
        });
        for c in &i.chain {
            put(&c.fingerprint);
            put(&c.starts_at);
            put(c.ends_at.as_deref().unwrap_or("-"));
        }
        put(&i.omitted.to_string());
        put(&i.affected.join(","));
        put(n.last_seen.as_deref().unwrap_or(""));
    }
    format!("{:016x}", h.finish())
}

pub(super) fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The spool file of a receiver: its name made file-safe and a digest of
/// its identity ([`super::Receiver::identity`]: URL, key, configured name), so
/// two receivers of one kind and host never share a spool, and no secret
/// reaches a file name.
pub fn spool_path(dir: &std::path::Path, name: &str, identity: &str) -> std::path::PathBuf {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(identity.as_bytes());
    dir.join("spool").join(format!(
        "{}-{:08x}.json",
        file_safe(name),
        h.finish() as u32
    ))
}

/// Loads a spool (missing: empty; unreadable: logged, empty): the queue
/// and the receipts.
pub(super) fn load_spool(path: &std::path::Path) -> (Vec<Notification>, Vec<(String, Receipt)>) {
    let Ok(bytes) = std::fs::read(path) else {
        return (Vec::new(), Vec::new());
    };
    match serde_json::from_slice::<SpoolFile>(&bytes) {
        Ok(f) if f.version <= SPOOL_VERSION => (f.queue, f.delivered),
        Ok(f) => {
            tracing::error!(path = %path.display(), version = f.version, "Spool of a newer format; starting with an empty queue (move it away to silence this).");
            (Vec::new(), Vec::new())
        }
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "Spool unreadable; starting with an empty queue.");
            (Vec::new(), Vec::new())
        }
    }
}
