//! Sources: where lines come from. Reading is bounded: a line longer than
//! [`max_line_bytes`] (`--max-line-bytes`, default [`MAX_LINE_BYTES`]) is cut
//! (and counted), and invalid UTF-8 is replaced rather than rejected, so one
//! bad line never stops the stream.

pub mod block;
pub mod file;
pub mod loki;
pub mod replay;
pub mod shard;
pub mod stdin;

/// Where lines come from: a name (`stdin`, a file path, a Loki stream) and
/// the labels every line of it carries. The decoder keeps one stream's
/// context per source and prefix.
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// Stream name used when the line names no pod.
    pub name: String,
    /// Labels every line of this source carries.
    pub labels: Vec<(String, String)>,
    /// The file's modification time (ns), for replay: it completes stamps
    /// without a year when no line before gives one, and stands in for
    /// the time of lines that have none (they move no clock).
    pub modified: Option<i64>,
    /// What its lines can be linked back to.
    pub kind: SourceKind,
}

/// What a source's lines can be linked back to from an alert.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SourceKind {
    /// Nothing beyond its name (a followed file read from an offset).
    #[default]
    Named,
    /// An input read from its first line (a replayed file, stdin): its
    /// lines' numbers are known.
    Numbered,
    /// A Loki stream: its first `n` labels are the stream's labels (the
    /// rest are the entry's structured metadata).
    Loki(usize),
}

impl Source {
    /// A source with a name and no labels.
    pub fn named(name: &str) -> Source {
        Source {
            name: name.to_string(),
            labels: Vec::new(),
            modified: None,
            kind: SourceKind::Named,
        }
    }
}

/// Label pairs from string pairs, for tests.
#[cfg(test)]
pub(crate) fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A file's modification time (ns since the epoch), if it can be read.
pub fn modified_ns(meta: &std::fs::Metadata) -> Option<i64> {
    let m = meta.modified().ok()?;
    let d = m.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(d.as_nanos()).ok()
}

/// Default longest line kept; the rest of a longer line is discarded and
/// counted.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The smallest line bound accepted (1 KiB): below it ordinary lines would
/// be cut.
pub const MIN_LINE_BYTES: usize = 1 << 10;

static MAX_LINE: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(MAX_LINE_BYTES);

/// Sets the line bound of every reader and of reassembled (CRI/Docker
/// partial, multi-line JSON) lines, once at start-up (`--max-line-bytes`).
/// Values below [`MIN_LINE_BYTES`] are raised to it.
pub fn set_max_line_bytes(n: usize) {
    MAX_LINE.store(n.max(MIN_LINE_BYTES), std::sync::atomic::Ordering::Relaxed);
}

/// The line bound in force (see [`set_max_line_bytes`]).
pub fn max_line_bytes() -> usize {
    MAX_LINE.load(std::sync::atomic::Ordering::Relaxed)
}
