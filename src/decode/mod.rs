//! Decode: turns raw lines into events with time, level, message, fields and
//! the context of the stream they came from.
//!
//! Decoding has two paths. Every line is unwrapped (prefix, Docker/CRI
//! wrapper, partial reassembly) and its stream's sticky fields and time are
//! updated cheaply ([`Decoder::prepare`]). Only lines the matcher flags as
//! candidates are fully decoded ([`Decoder::event`]); the rest cost a few
//! substring searches, never a JSON parse.

pub mod context;
mod event;
pub mod header;
pub mod keys;
mod line_time;
pub mod mined;
mod multiline;
pub mod names;
pub mod payload;
mod prepare;
pub mod quick;
pub mod severity;
mod stats;
mod stream;
pub mod time;
pub mod wrapper;

pub use context::{KeyConfig, WORKLOAD_KEY};
use event::label;
pub use event::{resolve_key, workload_of, Event, Labels};
use header::{Header, Reference};
pub use multiline::{continues_record, MAX_BLOCK_LINES, MAX_RECORD_BYTES, MAX_RECORD_LINES};
use severity::Level;
pub use stats::{DecodeStats, FormatCounts};
pub use stream::{SavedStream, StreamsState};

use crate::source::Source;
use lru::LruCache;
use std::borrow::Cow;
use std::num::NonZeroUsize;
use std::sync::Arc;
use stream::StreamState;

/// Default longest reassembled partial line; a longer one is emitted
/// truncated. The bound in force is [`crate::source::max_line_bytes`].
pub const MAX_PARTIAL_BYTES: usize = crate::source::MAX_LINE_BYTES;
/// Most streams whose context (sticky fields, partials) is remembered.
pub const MAX_STREAMS: usize = 16_384;

/// Lines read before the decoder says what it made of the input's
/// formats (see [`Decoder::log_input_hints`]).
pub const HINT_AFTER_LINES: u64 = 1000;

/// Earliest plausible event time: 2000-01-01 (ns).
pub const SANE_TIME_MIN: i64 = 946_684_800 * time::NS;
/// Latest plausible event time: 2200-01-01 (ns).
pub const SANE_TIME_MAX: i64 = 7_258_118_400 * time::NS;

/// Time keys read on every line; rarer ones come from the full scan.
const SMALL_TIME_FIELDS: &[&str] = &["ts", "time", "timestamp"];

/// What the buffer-level scan of a block found on one of its lines (see
/// `scan`): lets the decoder and matcher skip their own per-line
/// searches.
#[derive(Debug, Clone, Copy)]
pub struct LineHint<'h> {
    /// Whether a literal of some rule occurs anywhere in the raw line.
    pub flagged: bool,
    /// Field-pattern matches of the block: (start, pattern), in order,
    /// those of this line first (later ones are ignored). None when the
    /// block scan did not look for fields.
    pub keys: Option<&'h [(u32, u16)]>,
    /// Offset of the line's start in the block (`keys` are block offsets).
    pub base: u32,
    /// Rare needles present in the block (bit 0 an escape byte, bit 1 `"pod_name"`);
    /// an absent one needs no per-line search.
    pub rare: u8,
    /// Block offsets where the group keys' `after:` literals occur in this
    /// line (None: not searched).
    pub afters: Option<&'h [u32]>,
}

/// A line after unwrapping, ready for the matcher.
#[derive(Debug)]
pub struct Prepared<'a> {
    /// The application's text.
    pub text: Cow<'a, str>,
    /// Wrapper time, if the wrapper had one.
    pub wrapper_time: Option<i64>,
    /// The stream's slot in the decoder.
    pub sid: usize,
    /// Event time as resolved by the cheap path.
    pub time: i64,
    /// Whether a rule literal can occur in `text`, when the block scan
    /// already answered it (None: the matcher must scan the text).
    pub prefiltered: Option<bool>,
    /// The payload's format as sniffed from its first bytes: `json`,
    /// `console`, `logfmt`, `syslog`, `klog`, `golog`, `text` or `plain`.
    pub format: &'static str,
    /// The level its header gave (None for JSON and logfmt, whose level
    /// keys [`Decoder::level`] reads when asked).
    pub level: Option<Level>,
    /// The text header read on `text` (its start trimmed), when the line
    /// is text: the message is read behind it without reading it again.
    pub header: Option<Header>,
    /// Where the event time came from.
    pub time_from: TimeFrom,
    /// The line continues the text record above it (a stack trace's frame
    /// under its stamped first line): its level is the record's, and
    /// template mining counts it in that record (see [`continues_record`]).
    pub continues: bool,
}

/// Where a line's event time came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeFrom {
    /// The transport (a Loki entry's timestamp).
    Transport,
    /// The line itself: a time field or its header's stamp.
    Line,
    /// Its wrapper: CRI, Docker, `kubectl`/`stern --timestamps`.
    Wrapper,
    /// None of its own: its stream's (or the input's) previous time.
    Previous,
    /// None of its own nor before it: the arrival time (live).
    Arrival,
    /// None of its own nor before it: the file's modification time
    /// (replay).
    Modified,
    /// No time at all (the Unix epoch stands in).
    None,
}

impl TimeFrom {
    /// Whether the line had a time of its own (or of its wrapper or
    /// transport): only such times move clocks (windows, watermark,
    /// learning periods); in live mode the arrival time is a clock too.
    pub fn is_own(self) -> bool {
        matches!(
            self,
            TimeFrom::Transport | TimeFrom::Line | TimeFrom::Wrapper
        )
    }

    /// Whether this time may move event time forward: a time of the line's
    /// own, or the arrival time.
    pub fn moves_clocks(self) -> bool {
        self.is_own() || self == TimeFrom::Arrival
    }

    /// How `explain` says it.
    pub fn describe(self) -> &'static str {
        match self {
            TimeFrom::Transport => "from the transport (Loki's entry timestamp)",
            TimeFrom::Line => "from the line's own timestamp",
            TimeFrom::Wrapper => "from the wrapper's timestamp",
            TimeFrom::Previous => "none in the line: the stream's previous time; it moves no clock",
            TimeFrom::Arrival => "none in the line: the arrival time",
            TimeFrom::Modified => {
                "none in the line nor before it: the file's modification time; it moves no clock"
            }
            TimeFrom::None => "none in the line nor before it; it moves no clock",
        }
    }
}

/// The decoder: unwrapping, stream context, time resolution.
pub struct Decoder {
    /// Stream key → slot in `slab`, least recently used evicted.
    streams: LruCache<Arc<str>, usize>,
    slab: Vec<StreamState>,
    /// The slot of the previous line's stream: most lines repeat it.
    last_stream: Option<usize>,
    /// Streams created so far (their unique ids).
    created: u64,
    /// The field scanner and compiled group keys of the cheap path.
    index: Arc<keys::KeyIndex>,
    /// The small scanner run on every line: common time keys and sticky keys.
    small: keys::KeyIndex,
    small_spans: Vec<Option<keys::Span>>,
    small_time_slots: Vec<usize>,
    /// How often the time key of another spelling is still looked for.
    spelled_time: names::Backoff,
    /// Slot in `index` of each slot of `small`.
    small_in_index: Vec<usize>,
    /// Whether `spans` holds the full scan of the current line.
    full_scanned: bool,
    /// Whether an `after:` literal may occur in the current line.
    afters_possible: bool,
    /// Event time imposed by the transport for the current line.
    forced_time: Option<i64>,
    /// The time and level the current line's header gave (plain text
    /// formats; None for JSON and logfmt).
    header: (Option<i64>, Option<Level>),
    /// The text header read on the current line (None for JSON, logfmt
    /// and console lines).
    text_header: Option<Header>,
    /// Where the current line's time came from.
    time_from: TimeFrom,
    /// Spans of the fields found on the last prepared line.
    spans: Vec<Option<keys::Span>>,
    time_slots: Vec<usize>,
    sticky_slots: Vec<(usize, String)>,
    key_buf: String,
    /// Sticky values saved by a previous run, applied when their stream
    /// reappears.
    restored: std::collections::HashMap<String, SavedStream>,
    /// Lines produced by splitting one input line (List items): (slot, text).
    queued: std::collections::VecDeque<(usize, String)>,
    last_time: Option<i64>,
    live: bool,
    stats: DecodeStats,
    /// The input hints were logged.
    hinted: bool,
    /// Labels a stream carries when neither its source nor its prefix
    /// gives them (`--label`).
    default_labels: Vec<(String, String)>,
    /// The label names streams carried so far (at most
    /// [`MAX_LABEL_NAMES`]): what a rule selecting by a label can see.
    label_names: std::collections::BTreeSet<String>,
}

/// Most distinct label names remembered (see [`Decoder::label_carried`]).
pub const MAX_LABEL_NAMES: usize = 1024;

impl Decoder {
    /// A decoder. `live` allows arrival time as the last resort for lines with
    /// no time of their own (replay never reads the clock).
    pub fn new(keys: &KeyConfig, live: bool) -> Decoder {
        Decoder::with_group_keys(keys, live, &[])
    }

    /// A decoder whose cheap path can also resolve these group keys
    /// (see [`Decoder::resolve_quick`]).
    pub fn with_group_keys(keys: &KeyConfig, live: bool, group_keys: &[String]) -> Decoder {
        let cap = NonZeroUsize::new(MAX_STREAMS).unwrap_or(NonZeroUsize::MIN);
        let mut decoder = Decoder {
            streams: LruCache::new(cap),
            slab: Vec::new(),
            last_stream: None,
            created: 0,
            index: Arc::new(keys::KeyIndex::new(keys, &[], &[])),
            small: keys::KeyIndex::new(keys, &[], &[]),
            small_spans: Vec::new(),
            small_time_slots: Vec::new(),
            spelled_time: names::Backoff::new(),
            small_in_index: Vec::new(),
            full_scanned: false,
            afters_possible: true,
            forced_time: None,
            header: (None, None),
            text_header: None,
            time_from: TimeFrom::None,
            spans: Vec::new(),
            time_slots: Vec::new(),
            sticky_slots: Vec::new(),
            key_buf: String::new(),
            queued: Default::default(),
            restored: Default::default(),
            last_time: None,
            live,
            stats: DecodeStats::default(),
            hinted: false,
            default_labels: Vec::new(),
            label_names: Default::default(),
        };
        decoder.rekey(keys, group_keys);
        decoder
    }

    /// Labels every stream carries unless its source or its line prefix
    /// names them (`--label app=livekit` for piped lines a Loki selector
    /// would select by). Streams made before keep theirs.
    pub fn set_default_labels(&mut self, labels: Vec<(String, String)>) {
        self.default_labels = labels;
    }

    /// The label names the streams read so far carried (bounded by
    /// [`MAX_LABEL_NAMES`]; past it every name counts as carried).
    pub fn label_carried(&self, name: &str) -> bool {
        self.label_names.len() >= MAX_LABEL_NAMES || self.label_names.contains(name)
    }

    /// Recompiles the field scanners for a new key configuration (after a
    /// rule reload) while keeping every stream's state: sticky values,
    /// partial lines, labels and counters.
    pub fn rekey(&mut self, keys: &KeyConfig, group_keys: &[String]) {
        let mut extra: Vec<&str> = keys::TIME_FIELDS.to_vec();
        extra.extend(keys.sticky.iter().map(String::as_str));
        self.index = Arc::new(keys::KeyIndex::new(keys, group_keys, &extra));
        self.time_slots = keys::TIME_FIELDS
            .iter()
            .filter_map(|f| self.index.slot(f))
            .collect();
        let mut small_extra: Vec<&str> = SMALL_TIME_FIELDS.to_vec();
        small_extra.extend(keys.sticky.iter().map(String::as_str));
        self.small = keys::KeyIndex::new(keys, &[], &small_extra);
        self.small_time_slots = SMALL_TIME_FIELDS
            .iter()
            .filter_map(|f| self.small.slot(f))
            .collect();
        self.sticky_slots = keys
            .sticky
            .iter()
            .filter_map(|k| self.small.slot(k).map(|s| (s, k.clone())))
            .collect();
        // Every small field is also an index field (TIME_FIELDS ⊇ the small
        // time fields; sticky fields are in both).
        self.small_in_index = (0..self.small.slots())
            .map(|i| {
                self.small
                    .slot_name(i)
                    .and_then(|n| self.index.slot(n))
                    .unwrap_or(usize::MAX)
            })
            .collect();
        self.small_spans.clear();
        self.spans.clear();
        self.full_scanned = false;
    }

    /// The full field scanner, shared with the buffer-level scan of blocks
    /// (see `scan`).
    pub fn key_index(&self) -> Arc<keys::KeyIndex> {
        self.index.clone()
    }

    /// The id of a group key compiled for the cheap path.
    pub fn key_id(&self, name: &str) -> Option<keys::KeyId> {
        self.index.id(name)
    }

    fn ensure_full_scan(&mut self, text: &str) {
        if !self.full_scanned {
            self.index.scan(text, &mut self.spans);
            self.full_scanned = true;
        }
    }

    /// Resolves a compiled group key on the line last prepared, without
    /// parsing it: scanned fields, stream labels, sticky values.
    pub fn resolve_quick(&mut self, id: keys::KeyId, p: &Prepared<'_>) -> Option<String> {
        self.ensure_full_scan(&p.text);
        let st = self.slab.get(p.sid);
        let label = |l: &str| st.and_then(|s| label(&s.labels, l)).map(Cow::into_owned);
        let sticky = |k: &str| {
            st.filter(|s| !s.multiplexed).and_then(|s| {
                s.sticky
                    .iter()
                    .find(|(n, _)| n == k)
                    .map(|(_, v)| v.clone())
            })
        };
        self.index
            .resolve(id, &p.text, &self.spans, &label, &sticky)
    }

    /// A digest of everything the compiled group keys read on the line last
    /// prepared: its stream (and so its labels), the stream's sticky values,
    /// and the raw values of the fields and `after:` tokens the keys use.
    /// Two lines with the same digest resolve every group key alike, so the
    /// population needs only some of them (see `detect::Sampler`).
    pub fn population_digest(&mut self, p: &Prepared<'_>) -> u64 {
        use std::hash::Hasher;
        self.ensure_full_scan(&p.text);
        let mut h = rustc_hash::FxHasher::default();
        if let Some(st) = self.slab.get(p.sid) {
            h.write_u64(st.uid);
            h.write_u64(st.sticky_version);
        }
        self.index
            .digest(&p.text, &self.spans, self.afters_possible, &mut h);
        h.finish()
    }

    /// Counters.
    pub fn stats(&self) -> &DecodeStats {
        &self.stats
    }

    /// Never logs input hints: lines a rule test writes on purpose (bare
    /// text, no time) are not an input to advise on.
    pub fn mute_input_hints(&mut self) {
        self.hinted = true;
    }

    /// Logs, once, what the input so far says about its formats (most
    /// lines plain text, most without a time): after the first
    /// [`HINT_AFTER_LINES`] lines, or at the end of a shorter input.
    #[cold]
    pub fn log_input_hints(&mut self) {
        if self.hinted {
            return;
        }
        self.hinted = true;
        for h in self.stats.input_hints() {
            tracing::warn!("Input: {h}.");
        }
    }

    /// Latest event time seen on any stream.
    pub fn last_time(&self) -> Option<i64> {
        self.last_time
    }

    /// Unwraps a raw line. Returns None while a partial line is being
    /// reassembled. `arrival` is the wall-clock time in live mode.
    pub fn prepare<'a>(
        &mut self,
        source: &Source,
        raw: &'a str,
        arrival: Option<i64>,
    ) -> Option<Prepared<'a>> {
        self.forced_time = None;
        self.prepare_inner(source, raw, arrival, None)
    }

    /// Like [`Decoder::prepare`], with what the buffer-level scan found on
    /// this line (positions relative to `raw`'s start).
    pub fn prepare_hinted<'a>(
        &mut self,
        source: &Source,
        raw: &'a str,
        arrival: Option<i64>,
        hint: LineHint<'_>,
    ) -> Option<Prepared<'a>> {
        self.forced_time = None;
        self.prepare_inner(source, raw, arrival, Some(hint))
    }

    /// Like [`Decoder::prepare`] for a line whose event time is known from
    /// its transport (a Loki entry's timestamp), which takes precedence over
    /// any time in the line.
    pub fn prepare_at<'a>(
        &mut self,
        source: &Source,
        raw: &'a str,
        time: i64,
        hint: Option<LineHint<'_>>,
    ) -> Option<Prepared<'a>> {
        self.forced_time = Some(time);
        let p = self.prepare_inner(source, raw, None, hint);
        self.forced_time = None;
        p
    }

    /// The level of a prepared line: its level key (JSON, logfmt) or its
    /// header's level word (see [`header`]) — the level rules,
    /// `explain`, templates and novelty all see.
    pub fn level(&self, p: &Prepared<'_>) -> Option<Level> {
        match p.format {
            "json" | "logfmt" => mined::quick_level(&p.text, p.format),
            _ => p.level,
        }
    }

    /// The span of small-scanner slot `i` on the current line.
    fn small_span(&self, i: usize) -> Option<keys::Span> {
        if self.full_scanned {
            let j = *self.small_in_index.get(i)?;
            self.spans.get(j).copied().flatten()
        } else {
            self.small_spans.get(i).copied().flatten()
        }
    }

    /// Fully decodes a prepared line into an event.
    pub fn event(&mut self, p: &Prepared<'_>) -> Event {
        let reference = Some(p.time);
        let pl = payload::decode(&p.text, reference);
        if pl.malformed {
            self.stats.malformed += 1;
        }
        let (labels, sticky) = match self.slab.get(p.sid) {
            Some(s) => (
                s.labels.clone(),
                if s.multiplexed {
                    Vec::new()
                } else {
                    s.sticky.clone()
                },
            ),
            None => (Labels::default(), Vec::new()),
        };
        Event {
            time: p.time,
            level: pl.level,
            message: pl.message,
            text: p.text.to_string(),
            fields: pl.fields,
            captures: Vec::new(),
            labels,
            sticky,
            malformed: pl.malformed,
        }
    }

    /// Counts a malformed line found by the cheap path.
    pub fn count_malformed(&mut self) {
        self.stats.malformed += 1;
    }
}

/// Estimates a raw line's event time without touching any stream state:
/// the payload's own time, else its wrapper's. Used to merge several files
/// by time; `near` (the previous line's time) or else `bound` (the file's
/// modification time) completes stamps that have no year.
pub fn peek_time(raw: &str, near: Option<i64>, bound: Option<i64>) -> Option<i64> {
    let reference = match (near, bound) {
        (Some(t), _) => Reference::Near(t),
        (None, Some(b)) => Reference::Bound(b),
        (None, None) => Reference::None,
    };
    let rest = match wrapper::kubectl_prefix(raw) {
        Some((_, r)) => r,
        None => wrapper::stern_prefix(raw)
            .or_else(|| wrapper::compose_prefix(raw))
            .map_or(raw, |(_, r)| r),
    };
    match wrapper::cri(rest).or_else(|| wrapper::docker(rest)) {
        Some(u) => {
            let r = u.time.map_or(reference, Reference::Near);
            payload::quick_time_at(&u.content, r).or(u.time)
        }
        None => match header::leading_stamp(rest, reference) {
            Some((t, at)) => {
                let r = t.map_or(reference, Reference::Near);
                payload::quick_time_at(&rest[at..], r).or(t)
            }
            None => payload::quick_time_at(rest, reference),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec() -> Decoder {
        Decoder::new(&KeyConfig::default(), false)
    }

    #[test]
    fn sticky_node_id_is_inherited_by_its_stream_only() {
        let mut d = dec();
        let src = Source::named("stdin");
        let a = "[pod/lk-0/livekit-server] {\"level\":\"info\",\"ts\":1714564800.1,\"msg\":\"starting LiveKit server\",\"nodeID\":\"ND_A\"}";
        let b = "[pod/lk-1/livekit-server] {\"level\":\"info\",\"ts\":1714564800.2,\"msg\":\"starting LiveKit server\",\"nodeID\":\"ND_B\"}";
        let w = "[pod/lk-0/livekit-server] {\"level\":\"info\",\"ts\":1714564900.0,\"msg\":\"waiting for participants to exit\"}";
        for l in [a, b] {
            d.prepare(&src, l, None).unwrap();
        }
        let p = d.prepare(&src, w, None).unwrap();
        let e = d.event(&p);
        let keys = KeyConfig::default();
        assert_eq!(
            resolve_key(&keys, "node", &|k| e.get(k)).as_deref(),
            Some("ND_A")
        );
        assert_eq!(e.get("labels.pod").as_deref(), Some("lk-0"));
        assert_eq!(e.time, 1_714_564_900 * time::NS);
    }

    #[test]
    fn a_multiplexed_stream_stops_inheriting() {
        let mut d = dec();
        let src = Source::named("stdin");
        let keys = KeyConfig::default();
        let node_of = |d: &mut Decoder, l: &str| {
            let p = d.prepare(&src, l, None).unwrap();
            let e = d.event(&p);
            resolve_key(&keys, "node", &|k| e.get(k))
        };
        assert_eq!(
            node_of(&mut d, r#"{"msg":"starting","nodeID":"ND_A"}"#).as_deref(),
            Some("ND_A")
        );
        assert_eq!(
            node_of(&mut d, r#"{"msg":"waiting for participants to exit"}"#).as_deref(),
            Some("ND_A")
        );
        // A restart on the same stream legitimately changes the node.
        assert_eq!(
            node_of(&mut d, r#"{"msg":"starting","nodeID":"ND_B"}"#).as_deref(),
            Some("ND_B")
        );
        assert_eq!(
            node_of(&mut d, r#"{"msg":"waiting for participants to exit"}"#).as_deref(),
            Some("ND_B")
        );
        // Flipping back to A means two producers share this stream.
        assert_eq!(
            node_of(&mut d, r#"{"msg":"x","nodeID":"ND_A"}"#).as_deref(),
            Some("ND_A")
        );
        assert_eq!(
            node_of(&mut d, r#"{"msg":"waiting for participants to exit"}"#),
            None
        );
        assert_eq!(d.stats().multiplexed_streams, 1);
    }

    #[test]
    fn pretty_json_objects_and_lists_are_reassembled() {
        let mut d = dec();
        let src = Source::named("events");
        let obj = "{\n  \"kind\": \"Event\",\n  \"message\": \"Liveness probe failed: {x}\",\n  \"lastTimestamp\": \"2024-05-01T12:00:40Z\"\n}";
        let mut got = Vec::new();
        for l in obj.lines() {
            if let Some(p) = d.prepare(&src, l, None) {
                got.push((p.text.to_string(), p.time));
            }
        }
        assert_eq!(got.len(), 1);
        assert!(
            got[0].0.contains("Liveness probe failed: {x}") && !got[0].0.contains('\n'),
            "{}",
            got[0].0
        );
        assert_eq!(
            got[0].1,
            time::parse_rfc3339("2024-05-01T12:00:40Z").unwrap()
        );
        let list = "{\n\"apiVersion\": \"v1\",\n\"items\": [\n{\"message\": \"a\", \"lastTimestamp\": \"2024-05-01T12:00:41Z\"},\n{\"message\": \"b\"}\n],\n\"kind\": \"List\"\n}";
        let mut texts = Vec::new();
        for l in list.lines() {
            if let Some(p) = d.prepare(&src, l, None) {
                texts.push(p.text.to_string());
            }
        }
        while let Some(p) = d.prepare_queued(None) {
            texts.push(p.text.to_string());
        }
        assert_eq!(texts.len(), 2);
        assert!(texts[0].contains("\"a\"") && texts[1].contains("\"b\""));
        assert_eq!(d.stats().list_items, 2);
        // A truncated one-line object is not a block: it passes through.
        assert!(d
            .prepare(&src, "{\"level\":\"info\",\"msg\":\"trunc", None)
            .is_some());
    }

    /// Lines that never have a time of another spelling stop costing a
    /// parse; a producer that has one is read again within a few lines.
    #[test]
    fn other_spellings_back_off_and_come_back() {
        let mut d = dec();
        let src = Source::named("mixed");
        for i in 0..200 {
            let line = format!(r#"{{"msg":"request timeout after {i} ms"}}"#);
            let p = d.prepare(&src, &line, None).unwrap();
            assert!(!p.time_from.is_own());
        }
        let mut read = 0;
        for i in 0..200 {
            let line = format!(
                r#"{{"Timestamp":"2024-05-30T12:50:{:02}.000Z","Level":"Warning","MessageTemplate":"slow"}}"#,
                i % 60
            );
            let p = d.prepare(&src, &line, None).unwrap();
            if p.time_from.is_own() {
                read += 1;
            }
        }
        assert!(read >= 200 - names::Backoff::EVERY as usize, "{read}");
    }

    /// Each trace family under its stamped first line, also behind a
    /// `kubectl --prefix` prefix: the frames continue the record (its
    /// level, marked), the next stamped line starts a new one, and a
    /// stream's trace does not continue another stream's record.
    #[test]
    fn trace_lines_continue_their_record() {
        let traces: &[(&str, &[&str])] = &[
            (
                "2024-05-30 12:50:13,457 ERROR [main] com.example.App: request failed",
                &[
                    "java.lang.IllegalStateException: pool exhausted",
                    "\tat com.example.Pool.get(Pool.java:42)",
                    "\tat com.example.App.main(App.java:7)",
                    "Caused by: java.io.IOException: No space left on device",
                    "\t... 12 more",
                ],
            ),
            (
                "2024-05-30 12:50:13,457 ERROR app: handler crashed",
                &[
                    "Traceback (most recent call last):",
                    "  File \"/app/main.py\", line 3, in <module>",
                    "    run()",
                    "ValueError: bad value 7",
                ],
            ),
            (
                "2024-05-30 12:50:13.457 +00:00 [ERR] Unhandled exception",
                &[
                    "System.InvalidOperationException: Sequence contains no elements",
                    "   at System.Linq.ThrowHelper.ThrowNoElementsException()",
                    "   --- End of inner exception stack trace ---",
                ],
            ),
        ];
        for prefix in ["", "[pod/api-0/api] "] {
            for (head, frames) in traces {
                let mut d = dec();
                let src = Source::named("app");
                let line = format!("{prefix}{head}");
                let p = d.prepare(&src, &line, None).unwrap();
                assert!(!p.continues, "{head}");
                assert_eq!(d.level(&p), Some(Level::Error), "{head}");
                for f in *frames {
                    let line = format!("{prefix}{f}");
                    let p = d.prepare(&src, &line, None).unwrap();
                    assert!(p.continues, "{f}");
                    assert_eq!(d.level(&p), Some(Level::Error), "{f}");
                }
                let next =
                    format!("{prefix}2024-05-30 12:50:14,000 INFO [main] com.example.App: ok");
                let p = d.prepare(&src, &next, None).unwrap();
                assert!(!p.continues);
                assert_eq!(d.stats().continuation_lines, frames.len() as u64);
                // Another stream's frame has no record above it.
                let p = d
                    .prepare(
                        &src,
                        "[pod/other-0/x] \tat com.example.Pool.get(Pool.java:42)",
                        None,
                    )
                    .unwrap();
                assert!(!p.continues || prefix.is_empty());
            }
        }
        // Plain lines without a stamp are lines of their own; so are frames
        // past the record's bound.
        let mut d = dec();
        let src = Source::named("app");
        d.prepare(&src, "2024-05-30 12:50:13,457 ERROR x: failed", None);
        assert!(
            !d.prepare(&src, "starting worker pool", None)
                .unwrap()
                .continues
        );
        assert!(
            !d.prepare(&src, "\tat a.B.c(B.java:1)", None)
                .unwrap()
                .continues
        );
        d.prepare(&src, "2024-05-30 12:50:13,457 ERROR x: failed", None);
        for _ in 0..MAX_RECORD_LINES {
            assert!(
                d.prepare(&src, "\tat a.B.c(B.java:1)", None)
                    .unwrap()
                    .continues
            );
        }
        assert!(
            !d.prepare(&src, "\tat a.B.c(B.java:1)", None)
                .unwrap()
                .continues
        );
        assert_eq!(d.stats().continuation_overflow, 1);
    }

    #[test]
    fn cri_partials_are_reassembled_and_bounded() {
        let mut d = dec();
        let src = Source::named("f");
        assert!(d
            .prepare(
                &src,
                "2024-05-01T12:00:01.000000001Z stderr P {\"msg\":\"status update",
                None
            )
            .is_none());
        let p = d
            .prepare(
                &src,
                "2024-05-01T12:00:01.000000002Z stderr F  delayed, possible deadlock\"}",
                None,
            )
            .unwrap();
        assert_eq!(
            p.text,
            "{\"msg\":\"status update delayed, possible deadlock\"}"
        );
        let big = "x".repeat(MAX_PARTIAL_BYTES / 2 + 10);
        assert!(d
            .prepare(&src, &format!("2024-05-01T12:00:02Z stdout P {big}"), None)
            .is_none());
        let second = format!("2024-05-01T12:00:02Z stdout P {big}");
        let p = d.prepare(&src, &second, None).unwrap();
        assert_eq!(p.text.len(), MAX_PARTIAL_BYTES);
        assert_eq!(d.stats().partial_overflow, 1);
    }

    #[test]
    fn lines_without_time_take_their_streams_time() {
        let mut d = dec();
        let src = Source::named("s");
        d.prepare(&src, "[pod/a-0/c] {\"ts\":1714564800,\"msg\":\"x\"}", None)
            .unwrap();
        let p = d
            .prepare(&src, "[pod/a-0/c] could not register node: READONLY", None)
            .unwrap();
        assert_eq!(p.time, 1_714_564_800 * time::NS);
        let fresh = Decoder::new(&KeyConfig::default(), true)
            .prepare(&src, "plain", Some(42))
            .unwrap()
            .time;
        assert_eq!(fresh, 42);
    }

    #[test]
    fn workloads_from_pod_names() {
        assert_eq!(workload_of("api-7c9d8f6b5-x2x7q"), "api");
        assert_eq!(
            workload_of("livekit-server-7c9d8f6b5-x2x7q"),
            "livekit-server"
        );
        assert_eq!(workload_of("livekit-server-0"), "livekit-server");
        assert_eq!(workload_of("node-exporter-abcde"), "node-exporter");
        assert_eq!(workload_of("livekit/egress-12"), "egress");
        assert_eq!(workload_of("solo"), "solo");
    }
}
