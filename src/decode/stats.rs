//! The decode stage's counters: lines, partial and multi-line joins, every
//! drop (cut, malformed, absurd time), and lines by wrapper and format.

/// Counters of the decode stage.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DecodeStats {
    /// Lines read.
    pub lines: u64,
    /// Partial chunks joined into a line.
    pub partial_chunks: u64,
    /// Reassembled lines cut at the line bound (`--max-line-bytes`).
    pub partial_overflow: u64,
    /// Lines that looked structured but did not parse (kept as plain text).
    pub malformed: u64,
    /// Streams forgotten because more than [`super::MAX_STREAMS`] were active.
    pub streams_evicted: u64,
    /// Lines without a time of their own (nor their wrapper's): each took
    /// its stream's previous time (live: the arrival time; replay, when
    /// nothing came before: the file's modification time).
    pub untimed: u64,
    /// Streams found to mix producers (sticky inheritance turned off).
    pub multiplexed_streams: u64,
    /// Pretty-printed JSON objects reassembled from several lines.
    pub json_blocks: u64,
    /// Lines whose own timestamp was absurd (before 2000 or after 2200) and
    /// was ignored, so one bad line cannot drag event time away.
    pub bad_time: u64,
    /// Items split out of Kubernetes `List` objects.
    pub list_items: u64,
    /// Continuation lines (a trace's frames) attached to the text record
    /// above them.
    pub continuation_lines: u64,
    /// Continuation lines past a record's bound, kept as lines of their own.
    pub continuation_overflow: u64,
    /// Lines by wrapper and payload format (see [`super::Prepared::format`]).
    pub formats: FormatCounts,
}

/// Lines by wrapper and by payload format. Wrappers overlap formats: a CRI
/// line carrying JSON counts once under `cri` and once under `json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct FormatCounts {
    /// Container runtime wrapper: CRI (containerd, CRI-O).
    pub cri: u64,
    /// Container runtime wrapper: Docker json-file.
    pub docker: u64,
    /// `kubectl logs --prefix` or stern prefix.
    pub prefixed: u64,
    /// Behind a leading timestamp (`kubectl logs --timestamps`, `stern
    /// --timestamps`).
    pub stamped: u64,
    /// JSON objects (incl. shipper envelopes and Kubernetes events).
    pub json: u64,
    /// zap console.
    pub console: u64,
    /// syslog / journal text lines.
    pub syslog: u64,
    /// klog.
    pub klog: u64,
    /// Go `log` prefix.
    pub golog: u64,
    /// Text behind a header that was read (a stamp, a level).
    pub text: u64,
    /// logfmt.
    pub logfmt: u64,
    /// Anything else.
    pub plain: u64,
}

impl DecodeStats {
    /// What a user should hear about the input so far, once: when most
    /// lines are in no format sigwatch reads, or carry no time of their
    /// own. None when neither is the case.
    pub fn input_hints(&self) -> Vec<String> {
        let mut hints = Vec::new();
        let lines = self.lines.max(1);
        if self.formats.plain * 2 > lines {
            hints.push(format!(
                "{} of {} lines are in no format sigwatch reads (no time, no level, no fields; rules still match their text): try a few with `sigwatch explain`",
                self.formats.plain, self.lines
            ));
        }
        if self.untimed * 2 > lines {
            hints.push(format!(
                "{} of {} lines have no time of their own: each took its stream's previous time (or the file's modification time) and moved no clock, so windows and `for:` see them as one instant",
                self.untimed, self.lines
            ));
        }
        hints
    }
}

impl FormatCounts {
    pub(super) fn add(&mut self, format: &str) {
        match format {
            "json" => self.json += 1,
            "console" => self.console += 1,
            "syslog" => self.syslog += 1,
            "klog" => self.klog += 1,
            "golog" => self.golog += 1,
            "text" => self.text += 1,
            "logfmt" => self.logfmt += 1,
            _ => self.plain += 1,
        }
    }

    /// (name, count) of the non-zero counters, wrappers first.
    pub fn nonzero(&self) -> Vec<(&'static str, u64)> {
        [
            ("cri", self.cri),
            ("docker", self.docker),
            ("prefixed", self.prefixed),
            ("stamped", self.stamped),
            ("json", self.json),
            ("console", self.console),
            ("syslog", self.syslog),
            ("klog", self.klog),
            ("golog", self.golog),
            ("text", self.text),
            ("logfmt", self.logfmt),
            ("plain", self.plain),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect()
    }
}
