//! Bracketed elements of a header (`[…]`, `<…>`, `(…)`): a stamp, a
//! level, a pid, a thread or logger name, or the start of the message.

use super::stamp::run;
use super::token::{caller_like, trim_range};
use super::walk::{Last, Walker};
use super::Part;
use crate::decode::severity::{self, Level};

impl Walker<'_> {
    /// A bracketed element at `i` (`[…]`, `<…>`, `(…)`): returns its end,
    /// or None when it is not one (unbalanced, too long).
    pub(super) fn group(&mut self, i: usize) -> Option<usize> {
        let b = self.b;
        let open = b[i];
        let end = bracket_end(b, i)?;
        let inner = &b[i + 1..end - 1];
        let (ia, ib) = trim_range(inner, i + 1);
        let content = &b[ia..ib];
        let adjacent = i > 0 && matches!(b[i - 1], b']' | b'>' | b')');
        if self.h.level.is_none() {
            if let Some(l) = group_level(open, content) {
                let mut e = end;
                if b.get(e) == Some(&b':') {
                    e += 1;
                }
                self.level_found(l, e, false);
                return Some(e);
            }
        }
        if open == b'<' && (!self.anchored || content.contains(&b' ') || content.is_empty()) {
            return None;
        }
        // A pid: `[123]`, `[pid 35708:tid 4328636416]`.
        if !content.is_empty() && content.iter().all(u8::is_ascii_digit) {
            let placed = adjacent
                || matches!(
                    self.last,
                    Last::Stamp | Last::Pid | Last::Level | Last::Group
                );
            if self.anchored && placed {
                let part = if self.last == Last::Pid {
                    Part::Tid
                } else {
                    Part::Pid
                };
                self.h.push(part, ia, ib);
                self.commit(end);
                self.last = Last::Pid;
                return Some(end);
            }
            self.pend(Some(Part::Pid), ia, ib);
            self.last = Last::Pid;
            return Some(end);
        }
        if content.starts_with(b"pid ") {
            if self.anchored {
                let digits = run(content, 4);
                self.h.push(Part::Pid, ia + 4, ia + 4 + digits);
                self.commit(end);
                self.last = Last::Pid;
                return Some(end);
            }
            return None;
        }
        if !self.anchored && open == b'(' {
            return None;
        }
        let part = group_part(content);
        // A group closes the header only in some places: adjacent to
        // another group, right after a stamp, pid or logger, or naming
        // a caller. After a level it is pending (Apache's `[client …]`
        // is the message; log4j's `[main] org.Foo:` is not).
        // After a level (or a pid or another group) a group without
        // spaces is a thread, code or subsystem (`[main]`, `[MY-010068]`);
        // one with spaces may be the message's own context (Apache's
        // `[client 1.2.3.4]`, Kafka's `[LocalLog partition=…]`), so it
        // waits for what follows.
        let spaced = part == Part::Context;
        let commits = self.anchored
            && (adjacent
                || matches!(self.last, Last::Stamp | Last::Logger)
                || (self.last == Last::Filler && self.h.level.is_some())
                || part == Part::Caller
                || (!spaced && matches!(self.last, Last::Level | Last::Pid | Last::Group)));
        if commits {
            // `nova.compute.manager [req-…]`: the filler is the logger.
            self.close_filler();
            self.h.push(part, ia, ib);
            self.commit(end);
            self.last = Last::Group;
        } else {
            self.pend(Some(part), ia, ib);
            self.last = Last::PendingGroup;
        }
        Some(end)
    }
}

/// Where the bracket group opened at `i` ends (after its closing
/// bracket, nested ones balanced); None when it does not close within
/// 200 bytes.
fn bracket_end(b: &[u8], i: usize) -> Option<usize> {
    let open = b[i];
    let close = match open {
        b'[' => b']',
        b'<' => b'>',
        _ => b')',
    };
    let mut depth = 0usize;
    let stop = b.len().min(i + 200);
    for (j, c) in b.iter().enumerate().take(stop).skip(i) {
        if *c == open {
            depth += 1;
        } else if *c == close {
            depth -= 1;
            if depth == 0 {
                return Some(j + 1);
            }
        }
    }
    None
}

/// A group that is a level: `[INFO]`, `[ WARN ]`, `<error>`,
/// `[core:error]`, and the first of pipe-joined fields
/// (`[ERROR|auth|L83]`).
fn group_level(open: u8, content: &[u8]) -> Option<Level> {
    let piped = content
        .iter()
        .position(|c| *c == b'|')
        .map(|p| &content[..p])
        .filter(|w| severity::strong_word(w));
    let word = match (piped, content.iter().rposition(|c| *c == b':')) {
        (Some(w), _) => w,
        (None, Some(p)) if open == b'[' => &content[p + 1..],
        _ => content,
    };
    severity::header_word(word).filter(|_| word.iter().all(u8::is_ascii_alphanumeric))
}

/// What a group that is no level, pid or stamp names: a context (with
/// spaces), a logger (`org.foo.Bar`), a caller (`pool.go:762`), else a
/// thread.
fn group_part(content: &[u8]) -> Part {
    if content.contains(&b' ') {
        Part::Context
    } else if content.contains(&b'.')
        && content.first().is_some_and(u8::is_ascii_alphabetic)
        && !caller_like(content)
    {
        Part::Logger
    } else if caller_like(content) {
        Part::Caller
    } else {
        Part::Thread
    }
}
