//! The walk over a line's leading tokens: what is committed to the
//! header, what is pending until another header element follows, and
//! where the message starts. One handler per kind of token.

use super::stamp::{colon_level, num, run, stamp_at, Stamp, StampKind};
use super::token::{caller_like, filler_like, is_space, java_like, tag_like, tag_part, trim_range};
use super::{Header, Kind, Part, Reference, ERROR_STARTS, MAX_TOKENS, SCAN_BYTES};
use crate::decode::severity::{self, Level};

// ---------------------------------------------------------------------
// The walk

/// A byte range of the line.
pub(super) type Span = (usize, usize);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Last {
    Start,
    Stamp,
    Level,
    Pid,
    Group,
    Logger,
    Sep,
    /// `--` (Ruby's Logger puts the program after it).
    Dashes,
    Filler,
    /// A group that is not known to belong to the header yet.
    PendingGroup,
}

/// What a token handler did: the walk goes on at a byte, the token is not
/// of its kind (the next handler looks), or the header ends.
enum Step {
    Next(usize),
    Pass,
    End,
}

pub(super) struct Walker<'b> {
    pub(super) b: &'b [u8],
    pub(super) lim: usize,
    pub(super) reference: Reference,
    pub(super) h: Header,
    /// End of the last element known to belong to the header.
    pub(super) committed: usize,
    /// Parts of pending elements (committed with them).
    pub(super) pending: [(Option<Part>, usize, usize); 4],
    pub(super) n_pending: usize,
    /// Pending elements exist (fillers, groups) after `committed`.
    pub(super) has_pending: bool,
    pub(super) anchored: bool,
    pub(super) last: Last,
    pub(super) pipe: bool,
    pub(super) tokens: usize,
    /// A stamp gave the time (later ones are header elements only).
    pub(super) timed: bool,
    pub(super) stamp_kind: Option<StampKind>,
    /// The level came from a single letter.
    pub(super) letter_level: bool,
    /// The first token was identifier-like (a column).
    pub(super) first_filler: bool,
    /// Words were passed before any anchor (only an epoch may follow).
    pub(super) prose_before: bool,
    /// The walk found no header after all.
    pub(super) abort: bool,
    /// `|` separators seen.
    pub(super) pipes: u8,
}

impl<'b> Walker<'b> {
    pub(super) fn new(b: &'b [u8], reference: Reference) -> Walker<'b> {
        Walker {
            b,
            lim: b.len().min(SCAN_BYTES),
            reference,
            h: Header::default(),
            committed: 0,
            pending: [(None, 0, 0); 4],
            n_pending: 0,
            has_pending: false,
            anchored: false,
            last: Last::Start,
            pipe: false,
            tokens: 0,
            timed: false,
            stamp_kind: None,
            letter_level: false,
            first_filler: false,
            prose_before: false,
            abort: false,
            pipes: 0,
        }
    }

    pub(super) fn token_end(&self, i: usize) -> usize {
        let rest = self.b.get(i..).unwrap_or_default();
        let n = if self.pipe {
            memchr::memchr3(b' ', b'\t', b'|', rest)
        } else {
            memchr::memchr2(b' ', b'\t', rest)
        };
        i + n.unwrap_or(rest.len())
    }

    /// Commits every pending element and `end`'s element with it.
    pub(super) fn commit(&mut self, end: usize) {
        for k in 0..self.n_pending {
            if let (Some(p), a, b) = self.pending[k] {
                self.h.push(p, a, b);
            }
        }
        self.n_pending = 0;
        self.has_pending = false;
        self.committed = self.committed.max(end);
    }

    /// A pending element (a filler has no part until something closes
    /// it). Only the last few are remembered; older ones keep no part.
    pub(super) fn pend(&mut self, part: Option<Part>, a: usize, b: usize) {
        if self.n_pending == self.pending.len() {
            self.pending.copy_within(1.., 0);
            self.n_pending -= 1;
        }
        self.pending[self.n_pending] = (part, a, b);
        self.n_pending += 1;
        self.has_pending = true;
    }

    /// The last pending element is an address (`10.1.0.9:52114`): digits
    /// first, then dots or colons (a pid is digits only).
    pub(super) fn pending_is_address(&self) -> bool {
        if self.n_pending == 0 {
            return false;
        }
        let (_, a, e) = self.pending[self.n_pending - 1];
        let t = self.b.get(a..e).unwrap_or_default();
        t.first().is_some_and(u8::is_ascii_digit) && t.iter().any(|c| matches!(c, b'.' | b':'))
    }

    pub(super) fn has_logger(&self) -> bool {
        self.h.parts[..usize::from(self.h.n_parts)]
            .iter()
            .any(|(p, _, _)| *p == Some(Part::Logger))
    }

    /// Names the last pending element when it is a filler that a
    /// separator, a column gap or a group closes: the logger or component.
    pub(super) fn close_filler(&mut self) {
        if self.last == Last::Filler && self.n_pending > 0 {
            let k = self.n_pending - 1;
            if self.pending[k].0.is_none() {
                self.pending[k].0 = Some(Part::Logger);
            }
        }
    }

    pub(super) fn stamp_found(&mut self, st: &Stamp, start: usize, end: usize) {
        if self.prose_before && !self.anchored && st.kind != StampKind::Epoch {
            self.abort = true;
            return;
        }
        if !self.timed && st.has_time() {
            self.timed = true;
            self.h.time = st.resolve(self.reference);
            self.h.stamp = Some((start, end));
            self.h.yearless = st.epoch.is_none() && st.year.is_none() && st.month != 0;
            self.h.dateless = st.epoch.is_none() && st.month == 0;
            self.h.zoneless = st.epoch.is_none() && st.offset.is_none();
            self.stamp_kind = Some(st.kind);
        }
        if self.h.level.is_none() {
            self.h.level = st.level;
        }
        self.anchored = true;
        self.last = Last::Stamp;
        self.commit(end);
    }

    pub(super) fn level_found(&mut self, l: Level, end: usize, letter: bool) {
        if self.prose_before && !self.anchored {
            self.abort = true;
            return;
        }
        self.letter_level = letter;
        self.h.level = Some(l);
        self.anchored = true;
        self.last = Last::Level;
        self.commit(end);
    }

    /// Whether an epoch number here is a time rather than a count: before
    /// any level or other stamp, and near the reference when there is
    /// one.
    pub(super) fn epoch_plausible(&self, st: &Stamp) -> bool {
        if self.h.level.is_some() || self.timed {
            return false;
        }
        st.epoch.is_none_or(|e| self.reference.admits(e))
    }

    pub(super) fn walk(&mut self, from: usize) {
        let Some(mut i) = self.lead(from) else {
            return;
        };
        while i < self.lim && self.tokens < MAX_TOKENS {
            let gap_start = i;
            i = self.skip_spaces(i);
            if i >= self.lim {
                break;
            }
            self.column_gap(gap_start, i);
            self.tokens += 1;
            if self.abort {
                return;
            }
            match self.token(i) {
                Step::Next(e) => i = e,
                Step::Pass | Step::End => break,
            }
        }
    }

    /// Before the first token: a line that is an error whatever follows
    /// (a Go panic, a Python traceback), a syslog priority `<34>` (and RFC
    /// 5424's version after it). Returns where the tokens start, or None
    /// when the header is read already.
    fn lead(&mut self, from: usize) -> Option<usize> {
        let b = self.b;
        let mut i = self.skip_spaces(from);
        if from == 0 {
            for (start, l) in ERROR_STARTS {
                if b[i..].starts_with(start) {
                    self.h.level = Some(*l);
                    self.h.kind = Kind::Text;
                    self.anchored = true;
                    return None;
                }
            }
        }
        if b.get(i) == Some(&b'<') {
            let n = run(b, i + 1);
            if (1..=3).contains(&n) && b.get(i + 1 + n) == Some(&b'>') {
                if let Some(pri) = num(b, i + 1, n).filter(|p| *p <= 191) {
                    self.h.level = Some(Level::from_syslog_priority(pri));
                    self.anchored = true;
                    i += n + 2;
                    self.commit(i);
                    if b.get(i) == Some(&b'1') && b.get(i + 1) == Some(&b' ') {
                        self.rfc5424(i + 2);
                        return None;
                    }
                    self.last = Last::Level;
                }
            }
        }
        Some(i)
    }

    /// A column gap (a tab, or two spaces or more) after a filler that
    /// follows the level closes it: a component column.
    fn column_gap(&mut self, gap_start: usize, i: usize) {
        let gap = &self.b[gap_start..i];
        if self.last == Last::Filler
            && self.h.level.is_some()
            && (gap.len() >= 2 || gap.contains(&b'\t'))
        {
            self.close_filler();
            self.commit(gap_start);
            self.last = Last::Logger;
        }
    }

    /// One token at `i`, by the first kind that takes it.
    fn token(&mut self, i: usize) -> Step {
        macro_rules! try_kind {
            ($e:expr) => {
                match $e {
                    Step::Pass => {}
                    step => return step,
                }
            };
        }
        match self.b[i] {
            b'|' => return self.pipe_separator(i),
            b',' if self.last == Last::Stamp => return Step::Next(i + 1),
            _ => {}
        }
        let end = self.token_end(i);
        try_kind!(self.separator(i, end));
        try_kind!(self.stamp_token(i));
        try_kind!(self.bracket_token(i));
        try_kind!(self.level_word(i, end));
        try_kind!(self.tag(i, end));
        try_kind!(self.number(i, end));
        try_kind!(self.caller_or_filler(i, end));
        self.prose(i, end)
    }

    /// `|`: a pipe-separated header has a few fields; later pipes are the
    /// message's (`tryToReload…|3786|0|0`).
    fn pipe_separator(&mut self, i: usize) -> Step {
        self.pipe = true;
        self.pipes += 1;
        if self.pipes > 3 {
            return Step::End;
        }
        if self.anchored || self.has_pending {
            self.close_filler();
            self.commit(i);
        }
        self.last = Last::Sep;
        Step::Next(i + 1)
    }

    /// `-`, `--`, `---`, `:`, `::` between header elements, or where the
    /// header ends.
    fn separator(&mut self, i: usize, end: usize) -> Step {
        let tok = &self.b[i..end];
        let dashes = tok.iter().all(|c| *c == b'-') && tok.len() <= 3;
        if !(dashes || tok == b":" || tok == b"::") || self.pipe {
            return Step::Pass;
        }
        if self.anchored
            && self.h.level.is_some()
            && matches!(self.last, Last::Group | Last::Logger)
        {
            // `LEVEL [thread] - message`: the header ends here.
            self.commit(end);
            return Step::End;
        }
        if self.anchored
            && self.last == Last::Filler
            && self.h.level.is_some()
            && self.pending_is_address()
        {
            // `[ERR] 10.1.0.9:52114 - cid:12 - …`: an address is no
            // logger; the message starts at it.
            return Step::End;
        }
        if self.anchored || self.has_pending {
            if self.has_logger() {
                if self.has_pending {
                    // `CSI    00000008@… PopulateKey - Begin`: past the
                    // logger's column, `X - Y` is the message.
                    return Step::End;
                }
            } else {
                self.close_filler();
            }
            self.commit(i);
        }
        self.last = if tok == b"--" {
            Last::Dashes
        } else {
            Last::Sep
        };
        Step::Next(end)
    }

    /// A stamp (bracketed too), and what its kind says follows it: a
    /// syslog host and program, a colon-joined level, klog's pid and
    /// caller, Redis's role character.
    fn stamp_token(&mut self, i: usize) -> Step {
        let Some((st, s_end, logger)) = self.stamp_here(i) else {
            return Step::Pass;
        };
        if st.kind == StampKind::Epoch && !self.epoch_plausible(&st) {
            // A count, not a time: a filler or the message.
            return Step::Pass;
        }
        self.stamp_found(&st, i, s_end);
        if let Some((a, e)) = logger {
            self.h.push(Part::Logger, a, e);
        }
        let i = s_end;
        let syslog =
            st.kind == StampKind::Syslog || (self.h.level.is_none() && self.program_follows(i));
        if syslog && self.syslog_rest(i) {
            return Step::End;
        }
        if let Some((l, e)) = colon_level(self.b, i) {
            // `stamp:DEBUG:msg`, `stamp::WARNING::msg` (Python and
            // sabnzbd-style colon-joined headers).
            self.level_found(l, e, false);
            self.commit(e);
            return Step::Next(e);
        }
        match st.kind {
            StampKind::Klog => {
                self.klog_rest(i);
                Step::End
            }
            StampKind::Redis => Step::Next(self.redis_role(i)),
            _ => Step::Next(i),
        }
    }

    /// Redis's role character after its stamp (`.`/`-` debug, `*` info,
    /// `#` warning) is the level. Returns where the walk goes on.
    fn redis_role(&mut self, i: usize) -> usize {
        let j = i + 1;
        let lvl = match self.b.get(j) {
            Some(b'.' | b'-') => Some(Level::Debug),
            Some(b'*') => Some(Level::Info),
            Some(b'#') => Some(Level::Warn),
            _ => None,
        };
        match lvl {
            Some(l) if self.b.get(j + 1).is_none_or(|c| is_space(*c)) => {
                self.level_found(l, j + 1, false);
                j + 1
            }
            _ => i,
        }
    }

    /// Bracket groups: a level, a pid, a thread or context.
    fn bracket_token(&mut self, i: usize) -> Step {
        if !matches!(self.b[i], b'[' | b'<') {
            return Step::Pass;
        }
        match self.group(i) {
            Some(e) => Step::Next(e),
            None => Step::End,
        }
    }

    /// A level word; after a letter's level, the word repeats it (Ruby's
    /// `E, [stamp #pid] ERROR -- `).
    fn level_word(&mut self, i: usize, end: usize) -> Step {
        let Some((l, l_end)) = self.level_token(i, end) else {
            return Step::Pass;
        };
        let echo = self.letter_level && self.last == Last::Stamp;
        if self.h.level.is_some() && !echo {
            return Step::Pass;
        }
        if echo {
            self.commit(l_end);
            self.last = Last::Level;
        } else {
            let letter = l_end == i + 1 || self.b.get(i + 1) == Some(&b',');
            self.level_found(l, l_end, letter);
        }
        if self.python_logger(l_end) {
            return Step::End;
        }
        Step::Next(l_end)
    }

    /// A tag: `prog[pid]:`, `org.foo.Bar:`, `pool.go:762:`, `31#31:`, a
    /// subsystem after the level (`INFO Remoting: …`).
    fn tag(&mut self, i: usize, end: usize) -> Step {
        let tok = &self.b[i..end];
        if tok.len() <= 1 || tok.last() != Some(&b':') {
            return Step::Pass;
        }
        let t = &tok[..tok.len() - 1];
        if t.iter().all(u8::is_ascii_digit) {
            if self.has_pending && self.last == Last::Filler && self.anchored {
                // `felix/sync_client.go 356:`: a caller in two tokens.
                self.relabel_last_pending(Part::Caller, end - 1);
                self.commit(end);
            }
            return Step::End;
        }
        let part = tag_part(t);
        if tag_like(t)
            && !(part == Part::Logger
                && self.anchored
                && (matches!(self.last, Last::Logger) || self.h.level.is_none()))
        {
            if self.anchored {
                self.tag_parts(part, i, end - 1);
                self.commit(end);
                self.last = Last::Logger;
                return Step::End;
            }
            // Before any stamp or level (`redis: 2024/05/01 …`).
            self.pend(Some(part), i, end - 1);
            self.last = Last::Filler;
            return Step::Next(end);
        }
        self.name_tag(t, i, end)
    }

    /// A `name:` tag that is no program, logger or caller: a subsystem
    /// after the level, Ruby's progname, a prefix before a stamp — or the
    /// message's first word.
    fn name_tag(&mut self, t: &[u8], i: usize, end: usize) -> Step {
        let word = t.len() <= 32
            && t.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_'));
        // Not a level word, and not a verb in the past (`exited: worker`):
        // those start messages.
        let verb = t.ends_with(b"ed");
        let name = word
            && t.len() >= 2
            && t[0].is_ascii_alphabetic()
            && !verb
            && severity::header_word(t).is_none();
        if ((name && self.last == Last::Level) || (word && self.last == Last::Dashes))
            && self.anchored
        {
            // `[INFO]  core: …`, `INFO Remoting: …`: the subsystem or
            // logger right after the level; Ruby's Logger: `ERROR --
            // progname: message`.
            self.h.push(Part::Logger, i, end - 1);
            self.commit(end);
            return Step::End;
        }
        if word && !self.anchored && self.tokens == 1 {
            // A prefix before a stamp (go-redis's `redis: `); if no stamp
            // follows, there is no header.
            self.pend(Some(Part::Logger), i, end - 1);
            self.last = Last::Filler;
            return Step::Next(end);
        }
        Step::End
    }

    /// Numbers: pid and tid after a stamp, pending elsewhere.
    fn number(&mut self, i: usize, end: usize) -> Step {
        let tok = &self.b[i..end];
        let number = tok.strip_prefix(b"-").unwrap_or(tok);
        if number.is_empty() || !number.iter().all(u8::is_ascii_digit) || tok.len() > 10 {
            return Step::Pass;
        }
        if self.tokens == 1 {
            self.first_filler = true;
        }
        let part = if self.last == Last::Pid {
            Part::Tid
        } else {
            Part::Pid
        };
        if matches!(self.last, Last::Stamp | Last::Pid) && self.anchored {
            self.h.push(part, i, end);
            self.commit(end);
            self.last = Last::Pid;
        } else {
            // Before any anchor a number is a column of unknown meaning;
            // after a level, a pid only if more follows.
            self.pend(self.anchored.then_some(part), i, end);
            self.last = Last::Filler;
        }
        Step::Next(end)
    }

    /// A caller (`pool.go:762`), a Java logger after the level or thread,
    /// or a filler: an identifier that is a logger when a separator, a
    /// column or a group closes it.
    fn caller_or_filler(&mut self, i: usize, end: usize) -> Step {
        let tok = &self.b[i..end];
        if caller_like(tok) {
            if self.anchored {
                self.h.push(Part::Caller, i, end);
                self.commit(end);
                self.last = Last::Logger;
            } else {
                self.pend(Some(Part::Caller), i, end);
                self.last = Last::Filler;
            }
            return Step::Next(end);
        }
        if !filler_like(tok) || tok.len() > 96 {
            return Step::Pass;
        }
        if self.tokens == 1 {
            self.first_filler = true;
        }
        // `INFO [main] org.apache.catalina.Foo.log Server …`, log4j's `%p %c`.
        if self.anchored
            && matches!(self.last, Last::Level | Last::Group)
            && java_like(tok)
            && !self.has_logger()
        {
            self.h.push(Part::Logger, i, end);
            self.commit(end);
            self.last = Last::Logger;
            return Step::Next(end);
        }
        self.pend(None, i, end);
        self.last = Last::Filler;
        Step::Next(end)
    }

    /// Prose: the message starts (or, before any anchor, there is no
    /// header) — but for a tab-separated scope column after the level, and
    /// the words among the columns a line may start with (`2568643 node-70
    /// action start 1074119817 …`) before an epoch stamp.
    fn prose(&mut self, i: usize, end: usize) -> Step {
        let short = end - i <= 32;
        if self.anchored
            && self.h.level.is_some()
            && matches!(self.last, Last::Level | Last::Logger | Last::Group)
            && self.b.get(end) == Some(&b'\t')
            && short
            && !self.has_logger()
        {
            // `info\tads\tADS: …`.
            self.h.push(Part::Logger, i, end);
            self.commit(end);
            self.last = Last::Logger;
            return Step::Next(end);
        }
        if !self.anchored && self.first_filler && self.tokens <= 5 && short {
            self.prose_before = true;
            self.pend(None, i, end);
            self.last = Last::Filler;
            return Step::Next(end);
        }
        Step::End
    }

    /// Re-labels the last pending part (a filler before `356:`) and
    /// extends it to `end`.
    pub(super) fn relabel_last_pending(&mut self, part: Part, end: usize) {
        if self.n_pending > 0 {
            let k = self.n_pending - 1;
            self.pending[k].0 = Some(part);
            self.pending[k].2 = end;
        }
    }

    /// The parts of a tag: `prog[pid]` → program and pid; `31#31` → pid
    /// and tid; `file.go:12` → caller; anything else → `part`.
    pub(super) fn tag_parts(&mut self, part: Part, a: usize, b: usize) {
        let t = &self.b[a..b];
        if part == Part::Program {
            if let Some(open) = t.iter().position(|c| *c == b'[') {
                if let Some(close) = t.iter().rposition(|c| *c == b']') {
                    self.h.push(Part::Program, a, a + open);
                    if close > open + 1 {
                        self.h.push(Part::Pid, a + open + 1, a + close);
                    }
                    return;
                }
            }
        }
        if let Some(hash) = t.iter().position(|c| *c == b'#') {
            if t.iter().all(|c| c.is_ascii_digit() || *c == b'#') {
                self.h.push(Part::Pid, a, a + hash);
                self.h.push(Part::Tid, a + hash + 1, b);
                return;
            }
        }
        self.h.push(part, a, b);
    }

    /// A stamp at `i`, bracketed or not: (stamp, end of the element, the
    /// logger named inside the bracket after the stamp, if any).
    pub(super) fn stamp_here(&self, i: usize) -> Option<(Stamp, usize, Option<Span>)> {
        let b = self.b;
        // A bare time of day is a stamp as the first token, or after a
        // leading number (strace's `478760 12:21:46.284771 execve(…)`).
        let after_number = self.tokens == 2 && self.committed == 0 && {
            let head = b[..i].trim_ascii();
            !head.is_empty() && head.len() <= 10 && head.iter().all(u8::is_ascii_digit)
        };
        let first = (self.tokens <= 1 && self.committed == 0 && !self.has_pending) || after_number;
        if b[i] != b'[' {
            let st = stamp_at(b, i, first)?;
            return Some((st, st.end, None));
        }
        let mut st = stamp_at(b, i + 1, true)?;
        let mut j = st.end;
        // `[2024-05-07T10:55:53.434123 #12345]` (Ruby's Logger).
        if b.get(j) == Some(&b' ') && b.get(j + 1) == Some(&b'#') && run(b, j + 2) > 0 {
            j += 2 + run(b, j + 2);
        }
        if b.get(j) == Some(&b']') {
            st.end = j + 1;
            return Some((st, j + 1, None));
        }
        // More inside the bracket: `[2024-05-07 10:55:53,434: INFO/MainProcess]`
        // (Celery), `[2024-05-07T10:55:53Z INFO  myapp::server]` (Rust's
        // env_logger): a level, then a logger.
        let close = j + b
            .get(j..b.len().min(j + 160))?
            .iter()
            .position(|c| *c == b']')?;
        let mut k = j;
        while k < close && matches!(b[k], b' ' | b':' | b',' | b'-' | b'\t') {
            k += 1;
        }
        let n = b[k..close]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric())
            .count();
        let mut logger = None;
        if let Some(l) = severity::header_word(&b[k..k + n]) {
            st.level = Some(l);
            k += n;
            while k < close && matches!(b[k], b' ' | b'/' | b':' | b'\t') {
                k += 1;
            }
            let (a, e) = trim_range(&b[k..close], k);
            if a < e && !b[a..e].contains(&b' ') {
                logger = Some((a, e));
            }
        } else if n > 0 {
            return None;
        }
        st.end = close + 1;
        Some((st, close + 1, logger))
    }

    /// A level token at `i` (the token ends at `end`): a level word in
    /// capitals or capitalised (`INFO`, `Info`, `INFO:`), in lower case
    /// only where delimited (`info:`, `|info|`, a tab), or a single
    /// letter where logcat and Rails put one.
    pub(super) fn level_token(&self, i: usize, end: usize) -> Option<(Level, usize)> {
        let b = self.b;
        let n = b[i..end]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric())
            .count();
        if n == 0 || n > 13 || !b[i].is_ascii_alphabetic() {
            return None;
        }
        let w = &b[i..i + n];
        let after = b.get(i + n).copied();
        let delimited_after = match after {
            None => true,
            Some(c) => is_space(c) || matches!(c, b':' | b'|' | b','),
        };
        if !delimited_after {
            return None;
        }
        if n == 1 {
            let l = severity::letter(w[0])?;
            // logcat threadtime: `D Tag: …`; Rails: `I, [stamp …]`.
            let rails =
                after == Some(b',') && b.get(i + 2) == Some(&b' ') && b.get(i + 3) == Some(&b'[');
            if rails {
                return Some((l, i + 2));
            }
            if after.is_some_and(is_space) {
                let j = self.skip_spaces(i + 1);
                let e = self.token_end(j);
                let next = &b[j..e];
                if next.len() > 1 && next.last() == Some(&b':') && tag_like(&next[..next.len() - 1])
                {
                    return Some((l, i + 1));
                }
                // A padded tag: `I chatty  : uid=1000 …`.
                let k = self.skip_spaces(e);
                if !next.is_empty() && b.get(k) == Some(&b':') && k > e {
                    return Some((l, i + 1));
                }
            }
            return None;
        }
        let l = severity::header_word(w)?;
        let upper = w
            .iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        let capital = w[0].is_ascii_uppercase() && w[1..].iter().all(|c| c.is_ascii_lowercase());
        let prev = i.checked_sub(1).and_then(|p| b.get(p)).copied();
        let delimited =
            matches!(after, Some(b':' | b'|' | b'\t')) || matches!(prev, Some(b'|' | b'\t'));
        // Capitals are a level anywhere in the header; a word written as
        // prose (`Info`, `error`) only where a header puts one: after a
        // stamp or pid, or closed by a colon, a pipe or a tab; words that
        // also start sentences (`Log`, `Note`, `Alert`) only in capitals.
        let strong = severity::strong_word(w);
        let ok = if upper {
            true
        } else if capital {
            strong && (delimited || matches!(self.last, Last::Stamp | Last::Pid | Last::Sep))
        } else {
            strong && delimited
        };
        if !ok {
            return None;
        }
        let mut e = i + n;
        if after == Some(b':') {
            // `error:[-50]` is a message's; Python's `ERROR:root:` starts
            // its line.
            if b.get(i + n + 1).is_some_and(|c| !is_space(*c)) && self.tokens > 1 {
                return None;
            }
            e += 1;
        }
        Some((l, e))
    }

    pub(super) fn skip_spaces(&self, mut i: usize) -> usize {
        while i < self.b.len() && is_space(self.b[i]) {
            i += 1;
        }
        i
    }

    /// Python's `LEVEL:logger:message`: after the level's colon, a logger
    /// name and its colon. Returns true when it consumed one (the header
    /// then ends).
    pub(super) fn python_logger(&mut self, i: usize) -> bool {
        let b = self.b;
        if i == 0 || b[i - 1] != b':' || b.get(i).is_none_or(|c| is_space(*c)) {
            return false;
        }
        let n = b[i..]
            .iter()
            .take(96)
            .take_while(|c| !is_space(**c) && **c != b':')
            .count();
        if n == 0 || b.get(i + n) != Some(&b':') {
            return false;
        }
        self.h.push(Part::Logger, i, i + n);
        self.commit(i + n + 1);
        true
    }

    pub(super) fn finish(mut self, top: bool) -> Header {
        if !self.anchored || self.abort {
            return Header::default();
        }
        if self.h.kind == Kind::None {
            self.h.kind = match self.stamp_kind {
                Some(StampKind::Klog) => Kind::Klog,
                Some(StampKind::GoLog) => Kind::GoLog,
                Some(StampKind::Syslog) if top => Kind::Syslog,
                _ => Kind::Text,
            };
        }
        // Separators after the header belong to it: `] - msg`, `INFO: msg`.
        let b = self.b;
        let mut i = self.committed.min(b.len());
        loop {
            let j = self.skip_spaces(i);
            let e = self.token_end(j);
            let tok = &b[j..e];
            let sep = (!tok.is_empty() && tok.len() <= 3 && tok.iter().all(|c| *c == b'-'))
                || tok == b":"
                || tok == b"|"
                || tok == b",";
            if sep && e < b.len() {
                i = e;
                continue;
            }
            if b.get(j) == Some(&b'|') {
                i = j + 1;
                continue;
            }
            i = j;
            break;
        }
        self.h.body = i.min(b.len());
        self.h
    }
}
