//! The syslog and klog tails of a header: `host prog[pid]: ` after a BSD
//! stamp, RFC 5424's fields, klog's pid and `file.go:N]`.

use super::stamp::stamp_at;
use super::token::{caller_like, is_space};
use super::walk::Walker;
use super::{Kind, Part, Reference};
use crate::decode::severity::{self, Level};

impl Walker<'_> {
    /// After a syslog stamp: `host prog[pid]: ` (the host may be absent),
    /// then the program's own header. Returns true when it read the
    /// header to its end.
    pub(super) fn syslog_rest(&mut self, i: usize) -> bool {
        let b = self.b;
        let h0 = self.skip_spaces(i);
        let h1 = self.token_end(h0);
        if h1 == h0 {
            return false;
        }
        let host_is_tag = b[h1 - 1] == b':';
        let (prog_start, host) = if host_is_tag {
            (h0, None)
        } else {
            (self.skip_spaces(h1), Some((h0, h1)))
        };
        // The program ends at the first `: ` within a few tokens.
        let stop = b.len().min(prog_start + 128);
        let mut colon = None;
        let mut spaces = 0;
        let mut k = prog_start;
        while k < stop {
            match b[k] {
                b':' if b.get(k + 1).is_none_or(|c| is_space(*c)) => {
                    colon = Some(k);
                    break;
                }
                b' ' => {
                    spaces += 1;
                    if spaces > 2 {
                        break;
                    }
                }
                b'"' | b'{' | b'=' => break,
                _ => {}
            }
            k += 1;
        }
        // A program name with spaces (macOS's `Microsoft Word[14463]:`,
        // `sandboxd[129] ([31211]):`) ends with its pid; `Kernel command
        // line:` is a message.
        let colon = colon.filter(|&c| {
            let p = &b[prog_start..c];
            !p.contains(&b' ')
                || (p.ends_with(b"]") && p.contains(&b'['))
                || (p.ends_with(b"])") && p.contains(&b'('))
        });
        if let Some((a, e)) = host {
            self.h.push(Part::Host, a, e);
        }
        self.h.kind = Kind::Syslog;
        // A device's severity tag where the program would be (`N7K
        // %ETHPORT-5-IF_DOWN: …`): it names the event, so it stays in the
        // message, and it gives the level.
        let device_tag = colon.and_then(|c| severity::device_tag(&b[prog_start..c + 1]));
        if let Some(l) = device_tag {
            if self.h.level.is_none() {
                self.h.level = Some(l);
            }
        }
        let Some(colon) = colon.filter(|c| *c > prog_start && device_tag.is_none()) else {
            // No program tag: the message follows the host.
            self.commit(host.map_or(i, |(_, e)| e));
            self.h.inner = self.skip_spaces(self.committed);
            return true;
        };
        self.tag_parts(Part::Program, prog_start, colon);
        self.commit(colon + 1);
        // The program's own header (kubelet writes klog, others a level).
        let inner_start = self.skip_spaces(colon + 1);
        self.h.inner = inner_start;
        let reference = match self.h.time {
            Some(t) => Reference::Near(t),
            None => self.reference,
        };
        let mut inner = Walker::new(&b[inner_start..], reference);
        inner.walk(0);
        let ih = inner.finish(false);
        if ih.found() && (ih.level.is_some() || ih.kind == Kind::Klog) {
            if self.h.level.is_none() {
                self.h.level = ih.level;
            }
            if ih.time.is_some() && ih.kind == Kind::Klog {
                self.h.time = ih.time;
            }
            for (p, a, e) in ih.parts[..usize::from(ih.n_parts)].iter() {
                if let Some(p) = p {
                    self.h.push(
                        *p,
                        inner_start + usize::from(*a),
                        inner_start + usize::from(*e),
                    );
                }
            }
            self.committed = inner_start + ih.body;
        }
        if self.h.level.is_none() {
            // A sequence number or a device's clock before its tag
            // (`1234: *Jan 14 19:06:02.123: %LINK-3-UPDOWN: …`).
            self.h.level = severity::tag(b.get(self.committed..).unwrap_or_default());
        }
        // A message without a priority is user.notice (RFC 3164 §4.3.3:
        // a relay gives it PRI 13), and notice reads as info.
        if self.h.level.is_none() {
            self.h.level = Some(Level::Info);
        }
        true
    }

    /// Whether `host prog[pid]: ` follows (syslog with an RFC 3339 stamp,
    /// as rsyslog and `journalctl -o short-iso` write it).
    pub(super) fn program_follows(&self, i: usize) -> bool {
        let b = self.b;
        let h0 = self.skip_spaces(i);
        let h1 = self.token_end(h0);
        let p0 = self.skip_spaces(h1);
        let p1 = self.token_end(p0);
        if h1 == h0 || p1 <= p0 + 3 || b[h1 - 1] == b':' {
            return false;
        }
        let host_ok = b[h0..h1]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'@' | b'/'));
        let prog = &b[p0..p1];
        host_ok
            && prog.ends_with(b"]:")
            && prog.iter().position(|c| *c == b'[').is_some_and(|o| {
                o > 0 && prog[o + 1..prog.len() - 2].iter().all(u8::is_ascii_digit)
            })
    }

    /// After a klog stamp: the pid and `file.go:107]`.
    pub(super) fn klog_rest(&mut self, i: usize) {
        let b = self.b;
        let j = self.skip_spaces(i);
        let e = self.token_end(j);
        let mut k = j;
        if e > j && b[j..e].iter().all(u8::is_ascii_digit) {
            self.h.push(Part::Pid, j, e);
            self.commit(e);
            k = self.skip_spaces(e);
        }
        let e = self.token_end(k);
        if e > k && b[e - 1] == b']' && caller_like(&b[k..e - 1]) {
            self.h.push(Part::Caller, k, e - 1);
            self.commit(e);
        }
        self.h.kind = Kind::Klog;
    }

    /// RFC 5424: `<PRI>1 TIMESTAMP HOST APP PROCID MSGID SD MSG` (at `i`,
    /// after the version); `-` is a nil value.
    pub(super) fn rfc5424(&mut self, i: usize) {
        let b = self.b;
        self.h.kind = Kind::Syslog;
        let mut fields = [(0usize, 0usize); 5];
        let mut k = i;
        for f in fields.iter_mut() {
            let e = self.token_end(k);
            *f = (k, e);
            k = self.skip_spaces(e);
        }
        let (ts, host, app, pid, msgid) = (fields[0], fields[1], fields[2], fields[3], fields[4]);
        if &b[ts.0..ts.1] != b"-" {
            if let Some(st) = stamp_at(b, ts.0, false).filter(|s| s.end == ts.1) {
                self.stamp_found(&st, ts.0, ts.1);
            }
        }
        for (part, (a, e)) in [
            (Part::Host, host),
            (Part::Program, app),
            (Part::Pid, pid),
            (Part::MsgId, msgid),
        ] {
            if &b[a..e] != b"-" {
                self.h.push(part, a, e);
            }
        }
        // Structured data: `-` or `[id k="v"]…`.
        let mut m = k;
        if b.get(m) == Some(&b'-') {
            m += 1;
        } else {
            while b.get(m) == Some(&b'[') {
                let mut q = m;
                let mut quoted = false;
                while q < b.len() {
                    match b[q] {
                        b'\\' => q += 1,
                        b'"' => quoted = !quoted,
                        b']' if !quoted => break,
                        _ => {}
                    }
                    q += 1;
                }
                if q >= b.len() {
                    break;
                }
                self.h.push(Part::Context, m, q + 1);
                m = q + 1;
            }
        }
        let mut m = self.skip_spaces(m);
        if b[m..].starts_with("\u{feff}".as_bytes()) {
            m += 3;
        }
        self.committed = m.min(b.len());
        self.h.inner = self.committed;
    }
}
