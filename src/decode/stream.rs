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
    /// A line of the stream lacked a sticky key: inheritance was used, so
    /// losing it to multiplexing is worth a warning.
    pub(super) keyless: bool,
    pub(super) partial: Option<(String, Option<i64>)>,
    /// A pretty-printed JSON object being reassembled: text, brace depth,
    /// inside-a-string flag, line count.
    pub(super) block: Option<(String, usize, bool, usize)>,
    /// The text record whose continuation lines (a stack trace under its
    /// stamped first line) may follow: see [`super::multiline`].
    pub(super) record: Option<super::multiline::Record>,
}

/// One stream as a checkpoint keeps it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SavedStream {
    /// The stream key (source name, then `/pod/container` of a prefix).
    pub key: String,
    /// Sticky (field, value) pairs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sticky: Vec<(String, String)>,
    /// Values each sticky key had before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous: Vec<(String, String)>,
    /// The stream mixes producers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub multiplexed: bool,
    /// Its last time (ns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_time: Option<i64>,
}

/// The decoder's streams in a checkpoint.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StreamsState {
    /// The streams.
    pub streams: Vec<SavedStream>,
    /// The latest time of any line (ns).
    #[serde(default)]
    pub last_time: Option<i64>,
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
        for (k, v) in &self.default_labels {
            if !labels.iter().any(|(n, _)| n == k) {
                labels.push((k.clone(), v.clone()));
            }
        }
        for (k, _) in &labels {
            if self.label_names.len() < super::MAX_LABEL_NAMES && !self.label_names.contains(k) {
                self.label_names.insert(k.clone());
            }
        }
        let key: Arc<str> = Arc::from(self.key_buf.as_str());
        let saved = self
            .restored
            .remove(self.key_buf.as_str())
            .unwrap_or_default();
        self.created += 1;
        let state = StreamState {
            sticky: saved.sticky,
            previous: saved.previous,
            multiplexed: saved.multiplexed,
            last_time: saved.last_time,
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

    /// What the decoder remembers of its streams, for a checkpoint: each
    /// stream's sticky values (a Loki consumer resumes after the startup
    /// lines that declared `nodeID`), their previous values and whether the
    /// stream mixes producers, and its last time (lines without a time of
    /// their own stand there). At most [`super::MAX_STREAMS`] streams, most
    /// recently active first; partial lines are not kept (a restarted
    /// source re-reads them or, from a pipe, they are lost).
    pub fn streams_state(&self) -> StreamsState {
        let mut streams: Vec<SavedStream> = Vec::new();
        for (key, &slot) in self.streams.iter() {
            let Some(st) = self.slab.get(slot) else {
                continue;
            };
            if st.sticky.is_empty() && st.last_time.is_none() && !st.multiplexed {
                continue;
            }
            streams.push(SavedStream {
                key: key.to_string(),
                sticky: st.sticky.clone(),
                previous: st.previous.clone(),
                multiplexed: st.multiplexed,
                last_time: st.last_time,
            });
        }
        let room = super::MAX_STREAMS.saturating_sub(streams.len());
        let mut waiting: Vec<&SavedStream> = self.restored.values().collect();
        waiting.sort_by(|a, b| a.key.cmp(&b.key));
        streams.extend(waiting.into_iter().take(room).cloned());
        streams.sort_by(|a, b| a.key.cmp(&b.key));
        StreamsState {
            streams,
            last_time: self.last_time,
        }
    }

    /// Restores [`Decoder::streams_state`]: each stream takes its saved
    /// values when it reappears.
    pub fn restore_streams(&mut self, state: StreamsState) {
        self.last_time = state.last_time.max(self.last_time);
        for s in state.streams.into_iter().take(super::MAX_STREAMS) {
            self.restored.insert(s.key.clone(), s);
        }
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
