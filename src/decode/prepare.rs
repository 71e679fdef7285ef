//! Preparing a line: the layers around a program's own text peeled in
//! order — a stream prefix (kubectl, stern, docker compose, a shipper's
//! envelope), the container runtime's wrapper (CRI, Docker's JSON, with
//! partial lines joined), a leading `--timestamps` stamp — then a
//! pretty-printed block joined, the header or structure read and the
//! block scan's findings applied. Each layer is one step below.

use super::header::{self, Header, Reference};
use super::stream::envelope_pod;
use super::stream::StreamPrefix;
use super::{payload, wrapper, Decoder, LineHint, Prepared, HINT_AFTER_LINES};
use crate::source::Source;
use std::borrow::Cow;

impl Decoder {
    pub(super) fn prepare_inner<'a>(
        &mut self,
        source: &Source,
        line: &'a str,
        arrival: Option<i64>,
        hint: Option<LineHint<'_>>,
    ) -> Option<Prepared<'a>> {
        self.stats.lines += 1;
        let raw = line.strip_suffix('\n').unwrap_or(line);
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let rare = hint.map_or(u8::MAX, |h| h.rare);
        self.afters_possible = true;
        let (sid, rest) = self.peel_prefix(source, raw, rare);
        let (content, wrapper_time, partial, wrapped) = self.unwrap_runtime(rest);
        let (text, wrapper_time) = if wrapped {
            self.join_partial(sid, content, wrapper_time, partial)?
        } else {
            (content, None)
        };
        // The reference of stamps without a year, computed when a stamp
        // needs it (JSON lines, most lines, never do).
        let mut reference = None;
        let (text, wrapper_time) = if !wrapped && header::may_lead_with_stamp(&text) {
            let r = *reference
                .get_or_insert_with(|| self.reference(sid, wrapper_time, arrival, source));
            self.peel_stamps(sid, text, wrapper_time, r)
        } else {
            (text, wrapper_time)
        };
        let text = self.reassemble_block(sid, text)?;
        let format = match payload::structured_kind(&text) {
            Some(k @ ("json" | "logfmt")) => {
                self.header = (None, None);
                self.text_header = None;
                k
            }
            kind => {
                let r = *reference
                    .get_or_insert_with(|| self.reference(sid, wrapper_time, arrival, source));
                self.read_header(&text, kind, r)
            }
        };
        self.stats.formats.add(format);
        if self.stats.lines == HINT_AFTER_LINES {
            self.log_input_hints();
        }
        let borrowed = match &text {
            Cow::Borrowed(t) => Some(*t),
            Cow::Owned(_) => None,
        };
        let prefiltered = self.apply_hint(hint, line, borrowed);
        let time = self.update_stream(sid, &text, wrapper_time, arrival, source, format);
        let continues = self.follow_record(sid, &text, format);
        Some(Prepared {
            text,
            wrapper_time,
            sid,
            time,
            prefiltered,
            format,
            level: self.header.1,
            header: self.text_header,
            time_from: self.time_from,
            continues,
        })
    }

    /// The outer prefix — kubectl's `--prefix`, then stern's (after the
    /// colour codes it adds are removed) or docker compose's, else a
    /// shipper's envelope naming the pod: the line's stream and the text
    /// after it.
    fn peel_prefix<'a>(
        &mut self,
        source: &Source,
        raw: &'a str,
        rare: u8,
    ) -> (usize, Cow<'a, str>) {
        let kube = wrapper::kubectl_prefix(raw);
        let ansi: Option<String> = if kube.is_none() && rare & 0b001 != 0 {
            match wrapper::strip_ansi(raw) {
                Cow::Owned(o) => Some(o),
                Cow::Borrowed(_) => None,
            }
        } else {
            None
        };
        let base: &str = ansi.as_deref().unwrap_or(raw);
        let (prefix, rest_str) = match kube {
            Some((p, r)) => (Some(StreamPrefix::Borrowed(p)), r),
            None => match wrapper::stern_prefix(base).or_else(|| wrapper::compose_prefix(base)) {
                Some((p, r)) => (Some(StreamPrefix::Borrowed(p)), r),
                None => (None, base),
            },
        };
        if prefix.is_some() {
            self.stats.formats.prefixed += 1;
        }
        let prefix = match prefix {
            None if rare & 0b010 != 0 => envelope_pod(rest_str).map(StreamPrefix::Owned),
            p => p,
        };
        let rest: Cow<'a, str> = match &ansi {
            Some(_) => Cow::Owned(rest_str.to_string()),
            None => Cow::Borrowed(&raw[raw.len() - rest_str.len()..]),
        };
        (self.ensure_stream(source, prefix.as_ref()), rest)
    }

    /// The container runtime's wrapper (CRI, Docker's JSON): the content,
    /// the wrapper's time, whether the content is a partial line, and
    /// whether there was a wrapper at all.
    fn unwrap_runtime<'a>(
        &mut self,
        rest: Cow<'a, str>,
    ) -> (Cow<'a, str>, Option<i64>, bool, bool) {
        match rest {
            Cow::Borrowed(b) => match wrapper::cri(b) {
                Some(u) => {
                    self.stats.formats.cri += 1;
                    (u.content, u.time, u.partial, true)
                }
                None => match wrapper::docker(b) {
                    Some(u) => {
                        self.stats.formats.docker += 1;
                        (u.content, u.time, u.partial, true)
                    }
                    None => (Cow::Borrowed(b), None, false, false),
                },
            },
            Cow::Owned(o) => {
                let u = match wrapper::cri(&o) {
                    Some(u) => {
                        self.stats.formats.cri += 1;
                        Some(u)
                    }
                    None => wrapper::docker(&o).inspect(|_| self.stats.formats.docker += 1),
                }
                .map(|u| (u.content.into_owned(), u.time, u.partial));
                match u {
                    Some((c, t, p)) => (Cow::Owned(c), t, p, true),
                    None => (Cow::Owned(o), None, false, false),
                }
            }
        }
    }

    /// A wrapped line's partial chunks joined, up to the line limit (then
    /// what was gathered goes on, counted): None while the line is not
    /// complete.
    fn join_partial<'a>(
        &mut self,
        sid: usize,
        content: Cow<'a, str>,
        wrapper_time: Option<i64>,
        partial: bool,
    ) -> Option<(Cow<'a, str>, Option<i64>)> {
        let st = self.slab.get_mut(sid)?;
        if partial {
            self.stats.partial_chunks += 1;
            let buf = st
                .partial
                .get_or_insert_with(|| (String::new(), wrapper_time));
            let room = crate::source::max_line_bytes().saturating_sub(buf.0.len());
            if room >= content.len() {
                buf.0.push_str(&content);
                return None;
            }
            // Overflow: emit what we have, cut at a char boundary.
            let mut cut = room;
            while !content.is_char_boundary(cut) {
                cut -= 1;
            }
            buf.0.push_str(&content[..cut]);
            self.stats.partial_overflow += 1;
            let (text, t) = st.partial.take().unwrap_or_default();
            Some((Cow::Owned(text), t))
        } else if let Some((mut buf, t)) = st.partial.take() {
            self.stats.partial_chunks += 1;
            buf.push_str(&content);
            Some((Cow::Owned(buf), t.or(wrapper_time)))
        } else {
            Some((content, wrapper_time))
        }
    }

    /// `kubectl logs --timestamps` and `stern --timestamps` put a stamp
    /// before a line that has its own: a wrapper like CRI's (before every
    /// line of a pretty-printed object too). Peeled twice at most:
    /// `kubectl --timestamps` over a line that `docker logs -t` or a
    /// shipper stamped already.
    fn peel_stamps<'a>(
        &mut self,
        sid: usize,
        mut text: Cow<'a, str>,
        mut wrapper_time: Option<i64>,
        r: Reference,
    ) -> (Cow<'a, str>, Option<i64>) {
        let in_block = self.slab.get(sid).is_some_and(|s| s.block.is_some());
        for n in 0..2 {
            let Some((t, at)) = self.peel_stamp(&text, r, in_block) else {
                break;
            };
            if n == 0 {
                self.stats.formats.stamped += 1;
            }
            text = match text {
                Cow::Borrowed(b) => Cow::Borrowed(&b[at..]),
                Cow::Owned(o) => Cow::Owned(o[at..].to_string()),
            };
            wrapper_time = wrapper_time.or(t);
        }
        (text, wrapper_time)
    }

    /// The block scan's findings apply when the text is a slice of the raw
    /// line (`borrowed`: no colour codes removed, no unescaping, no
    /// joining): whether
    /// a literal was flagged on it (None: not known), where `after` keys
    /// may stand, and the key spans it found.
    fn apply_hint(
        &mut self,
        hint: Option<LineHint<'_>>,
        line: &str,
        borrowed: Option<&str>,
    ) -> Option<bool> {
        let mut prefiltered = None;
        self.full_scanned = false;
        let (Some(h), Some(t)) = (hint, borrowed) else {
            return None;
        };
        let off = (t.as_ptr() as usize).wrapping_sub(line.as_ptr() as usize);
        if off <= line.len() && off + t.len() <= line.len() {
            prefiltered = Some(h.flagged);
        }
        if let (true, Some(afters)) = (prefiltered.is_some(), h.afters) {
            let (lo, hi) = (h.base as usize + off, h.base as usize + off + t.len());
            self.afters_possible = afters
                .iter()
                .any(|&p| (p as usize) >= lo && (p as usize) < hi);
        }
        if let (true, Some(keys)) = (prefiltered.is_some(), h.keys) {
            let (lo, hi) = (h.base as usize + off, h.base as usize + off + t.len());
            let hits = keys
                .iter()
                .take_while(|&&(pos, _)| (pos as usize) < hi)
                .filter_map(|&(pos, pat)| {
                    let pos = pos as usize;
                    (pos >= lo).then(|| (pos - lo, pat as usize))
                });
            self.index.fill(t, hits, &mut self.spans);
            self.full_scanned = true;
        }
        prefiltered
    }

    /// The reference that completes the current line's stamps without a
    /// year or a date: a neighbouring time (its wrapper's, its stream's
    /// previous one, the input's latest), else a bound (the arrival time,
    /// the file's modification time).
    pub(super) fn reference(
        &self,
        sid: usize,
        wrapper_time: Option<i64>,
        arrival: Option<i64>,
        source: &Source,
    ) -> Reference {
        if let Some(t) = self.forced_time {
            return Reference::Near(t);
        }
        let stream = self.slab.get(sid).and_then(|s| s.last_time);
        match wrapper_time.or(stream).or(self.last_time) {
            Some(t) => Reference::Near(t),
            None => match arrival.or(source.modified) {
                Some(t) => Reference::Bound(t),
                None => Reference::None,
            },
        }
    }

    /// A leading stamp to peel off as a wrapper: one followed by a single
    /// space and a line that is structured or has a time of its own. Its
    /// time and where the rest starts.
    // Out of line: most lines start with no stamp, and the loop that
    // prepares every line stays small.
    #[inline(never)]
    fn peel_stamp(
        &self,
        text: &str,
        reference: Reference,
        in_block: bool,
    ) -> Option<(Option<i64>, usize)> {
        let (time, at) = header::leading_stamp(text, reference)?;
        let rest = &text[at..];
        if in_block {
            return Some((time, at));
        }
        if rest.starts_with([' ', '\t']) {
            return None;
        }
        let structured = matches!(
            payload::structured_kind(rest),
            Some("json" | "logfmt" | "console")
        );
        (structured || header::read_at(rest, reference).time.is_some()).then_some((time, at))
    }

    /// Reads the current line's header (unless it is JSON or logfmt) and
    /// names its format.
    #[inline(never)]
    pub(super) fn read_header(
        &mut self,
        text: &str,
        kind: Option<&'static str>,
        reference: Reference,
    ) -> &'static str {
        let h: Header = match kind {
            Some("json" | "logfmt") => {
                self.header = (None, None);
                self.text_header = None;
                return kind.unwrap_or("json");
            }
            Some(_) => header::console(text.trim_start()),
            None => header::read_at(text.trim_start(), reference),
        };
        self.header = (h.time, h.level);
        self.text_header = kind.is_none().then_some(h);
        kind.unwrap_or_else(|| payload::header_kind(&h))
    }
}
