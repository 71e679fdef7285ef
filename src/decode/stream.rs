//! Streams: one producer's lines (a source, narrowed by a kubectl/stern
//! prefix or a shipper's envelope), and what the decoder remembers per
//! stream — labels, sticky values, the last time, a partial line — in a
//! bounded table where the stream forgotten longest ago makes room.

use super::{quick, wrapper, Decoder, Labels};
use crate::source::Source;
use std::sync::Arc;

#[derive(Debug, Default)]
pub(super) struct StreamState {
    pub(super) key: Option<Arc<str>>,
    /// Unique id of the stream (slots are reused after eviction).
    pub(super) uid: u64,
    /// Bumped whenever a sticky value (or the multiplexed flag) changes.
    pub(super) sticky_version: u64,
    pub(super) labels: Labels,
    pub(super) last_time: Option<i64>,
    pub(super) sticky: Vec<(String, String)>,
    /// Values each sticky key had before its current one (a few, newest last).
    pub(super) previous: Vec<(String, String)>,
    /// Set when a sticky value flips back to an older one: the stream mixes
    /// several producers, so inheriting would misattribute lines.
    pub(super) multiplexed: bool,
    pub(super) partial: Option<(String, Option<i64>)>,
    /// A pretty-printed JSON object being reassembled: text, brace depth,
    /// inside-a-string flag, line count.
    pub(super) block: Option<(String, usize, bool, usize)>,
}

/// A stream prefix with owned parts: (pod, container, namespace).
pub(super) type OwnedPrefix = (String, String, Option<String>);

/// The pod of a Fluent Bit / Vector record (`kubernetes.pod_name`,
/// `kubernetes.container_name`, `kubernetes.namespace_name`), found cheaply.
pub(super) fn envelope_pod(text: &str) -> Option<OwnedPrefix> {
    let t = text.trim_start();
    if !t.starts_with('{') || memchr::memmem::find(t.as_bytes(), b"\"pod_name\"").is_none() {
        return None;
    }
    let pod = quick::quick_get_path(t, "kubernetes.pod_name")?.into_owned();
    let container = quick::quick_get_path(t, "kubernetes.container_name")
        .map_or_else(String::new, |c| c.into_owned());
    let ns = quick::quick_get_path(t, "kubernetes.namespace_name").map(|n| n.into_owned());
    Some((pod, container, ns))
}

/// A stream prefix, borrowed from the line (or owned, from an envelope).
pub(super) enum StreamPrefix<'p> {
    Borrowed(wrapper::Prefix<'p>),
    Owned(OwnedPrefix),
}

impl StreamPrefix<'_> {
    fn parts(&self) -> (&str, &str, Option<&str>) {
        match self {
            StreamPrefix::Borrowed(p) => (p.pod, p.container, p.namespace),
            StreamPrefix::Owned((p, c, n)) => (p, c, n.as_deref()),
        }
    }
}

impl Decoder {
    /// The slot of the stream named by the source and prefix, created if
    /// new.
    pub(super) fn ensure_stream(
        &mut self,
        source: &Source,
        prefix: Option<&StreamPrefix<'_>>,
    ) -> usize {
        self.key_buf.clear();
        self.key_buf.push_str(&source.name);
        let parts = prefix.map(StreamPrefix::parts);
        if let Some((pod, container, _)) = parts {
            self.key_buf.push('/');
            self.key_buf.push_str(pod);
            self.key_buf.push('/');
            self.key_buf.push_str(container);
        }
        if let Some(i) = self.last_stream {
            if self.slab.get(i).and_then(|st| st.key.as_deref()) == Some(self.key_buf.as_str()) {
                return i;
            }
        }
        if let Some(&i) = self.streams.get(self.key_buf.as_str()) {
            self.last_stream = Some(i);
            return i;
        }
        let mut labels = source.labels.clone();
        if let Some((pod, container, ns)) = parts {
            labels.push(("pod".into(), pod.to_string()));
            labels.push(("container".into(), container.to_string()));
            if let Some(ns) = ns {
                labels.push(("namespace".into(), ns.to_string()));
            }
        }
        let key: Arc<str> = Arc::from(self.key_buf.as_str());
        let sticky = self
            .restored
            .remove(self.key_buf.as_str())
            .unwrap_or_default();
        self.created += 1;
        let state = StreamState {
            sticky,
            key: Some(key.clone()),
            uid: self.created,
            labels: Arc::new(labels),
            ..StreamState::default()
        };
        let slot = if self.streams.len() == self.streams.cap().get() {
            // Reuse the slot of the stream forgotten longest ago.
            self.stats.streams_evicted += 1;
            match self.streams.pop_lru() {
                Some((_, i)) => {
                    self.slab[i] = state;
                    i
                }
                None => {
                    self.slab.push(state);
                    self.slab.len() - 1
                }
            }
        } else {
            self.slab.push(state);
            self.slab.len() - 1
        };
        self.streams.put(key, slot);
        self.last_stream = Some(slot);
        slot
    }

    /// Sticky values of every stream that does not mix producers, to save
    /// across a restart (a Loki consumer resumes after the startup lines
    /// that declared them).
    pub fn sticky_snapshot(&self) -> Vec<(String, Vec<(String, String)>)> {
        let mut v: Vec<(String, Vec<(String, String)>)> = self
            .slab
            .iter()
            .filter(|s| !s.multiplexed && !s.sticky.is_empty())
            .filter_map(|s| Some((s.key.as_deref()?.to_string(), s.sticky.clone())))
            .collect();
        v.extend(self.restored.iter().map(|(k, s)| (k.clone(), s.clone())));
        v.sort();
        v
    }

    /// Restores sticky values saved by a previous run.
    pub fn restore_sticky(&mut self, saved: Vec<(String, Vec<(String, String)>)>) {
        self.restored.extend(saved);
    }

    /// Emits partial lines still buffered (end of input) as complete lines.
    pub fn drain_partials(&mut self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for st in self.slab.iter_mut() {
            if let Some((text, _)) = st.partial.take() {
                out.push((st.key.as_deref().unwrap_or("").to_string(), text));
            }
        }
        out.sort();
        out
    }
}
