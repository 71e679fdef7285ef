//! Syslog as rsyslog, syslog-ng, `logger` and network devices forward it:
//! RFC 5424 (`<PRI>1 TIMESTAMP HOST APP PROCID MSGID SD MSG`) and RFC 3164
//! (`<PRI>Mmm dd hh:mm:ss HOST TAG[PID]: MSG`), framed over TCP by octet
//! counting (RFC 6587, `LEN <PRI>…`) or by line ends, one message a
//! datagram over UDP.
//!
//! A message becomes its MSG part as the line (so the line's own time and
//! level are read from it as from any other input), with the host and the
//! app name as labels; what is not syslog at all is taken as a plain line
//! rather than dropped.

/// One message: its labels (host, app) and its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// `host` and `app` when the header names them.
    pub labels: Vec<(String, String)>,
    /// The MSG part (the whole text when it is not syslog).
    pub line: String,
}

/// Parses one message (without its framing).
pub fn parse(raw: &[u8]) -> Message {
    let text = super::line_text(trim_end(raw));
    let Some((_pri, rest)) = pri(&text) else {
        return Message {
            labels: Vec::new(),
            line: text,
        };
    };
    let (host, app, msg) = match rest.strip_prefix("1 ") {
        Some(r) => rfc5424(r),
        None => rfc3164(rest),
    };
    let mut labels = Vec::new();
    if let Some(a) = app.filter(|a| *a != "-" && !a.is_empty()) {
        labels.push(("app".to_string(), a.to_string()));
    }
    if let Some(h) = host.filter(|h| *h != "-" && !h.is_empty()) {
        labels.push(("host".to_string(), h.to_string()));
    }
    Message {
        labels,
        line: msg.to_string(),
    }
}

fn trim_end(b: &[u8]) -> &[u8] {
    let mut end = b.len();
    while end > 0 && matches!(b[end - 1], b'\n' | b'\r' | b'\0') {
        end -= 1;
    }
    &b[..end]
}

/// `<PRI>` (0–191) and what follows.
fn pri(s: &str) -> Option<(u8, &str)> {
    let r = s.strip_prefix('<')?;
    let close = r.find('>')?;
    if close == 0 || close > 3 {
        return None;
    }
    let n: u8 = r[..close].parse().ok()?;
    (n <= 191).then(|| (n, &r[close + 1..]))
}

/// Splits one space-separated header field off.
fn field(s: &str) -> (&str, &str) {
    match s.split_once(' ') {
        Some((f, r)) => (f, r),
        None => (s, ""),
    }
}

/// `TIMESTAMP HOST APP PROCID MSGID SD MSG` → (host, app, MSG).
fn rfc5424(s: &str) -> (Option<&str>, Option<&str>, &str) {
    let (_ts, r) = field(s);
    let (host, r) = field(r);
    let (app, r) = field(r);
    let (_procid, r) = field(r);
    let (_msgid, r) = field(r);
    let msg = skip_structured_data(r);
    let msg = msg.strip_prefix('\u{feff}').unwrap_or(msg);
    (Some(host), Some(app), msg)
}

/// `-` or one or more `[id k="v" …]` elements (values may hold escaped
/// `]` and `"`), then a space and the MSG.
fn skip_structured_data(s: &str) -> &str {
    if let Some(r) = s.strip_prefix('-') {
        return r.strip_prefix(' ').unwrap_or(r);
    }
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i] == b'[' {
        let mut quoted = false;
        i += 1;
        while i < b.len() {
            match b[i] {
                b'\\' if quoted => i += 1,
                b'"' => quoted = !quoted,
                b']' if !quoted => break,
                _ => {}
            }
            i += 1;
        }
        i += 1;
    }
    let r = s.get(i.min(s.len())..).unwrap_or("");
    r.strip_prefix(' ').unwrap_or(r)
}

/// `Mmm dd hh:mm:ss HOST TAG[PID]: MSG` → (host, app, MSG); a message
/// without the stamp is all MSG.
fn rfc3164(s: &str) -> (Option<&str>, Option<&str>, &str) {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let stamped = s.len() > 16
        && MONTHS.iter().any(|m| s.starts_with(m))
        && s.as_bytes().get(15) == Some(&b' ')
        && s.get(9..10) == Some(":");
    if !stamped {
        return (None, None, s);
    }
    let (host, r) = field(&s[16..]);
    // The tag ends at '[' (a pid follows) or ':'; without either the
    // second word is the message's own.
    let tag_end = r.find(['[', ':', ' ']);
    match tag_end {
        Some(i) if matches!(r.as_bytes()[i], b'[' | b':') => {
            let app = &r[..i];
            let msg = r[i..]
                .split_once(": ")
                .map(|(_, m)| m)
                .or_else(|| r[i..].strip_prefix(':'))
                .unwrap_or(&r[i..]);
            (Some(host), Some(app), msg)
        }
        _ => (Some(host), None, r),
    }
}

/// Splits a TCP stream's bytes into messages: octet-counted frames
/// (`LEN SP MSG`) when a frame starts with a digit, else line-framed.
/// Keeps what is incomplete for the next read; a frame or line longer than
/// `max` is cut there (the rest skipped) and counted.
#[derive(Debug, Default)]
pub struct Framer {
    buf: Vec<u8>,
    /// Bytes of an overlong line still to skip up to its end.
    skipping: bool,
    /// Bytes of an overlong octet-counted frame still to skip.
    skip_count: usize,
}

impl Framer {
    /// Adds bytes read; returns the complete messages.
    pub fn push(&mut self, data: &[u8], max: usize) -> Vec<Vec<u8>> {
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        loop {
            if self.skip_count > 0 {
                let n = self.skip_count.min(self.buf.len());
                self.buf.drain(..n);
                self.skip_count -= n;
                if self.skip_count > 0 {
                    break;
                }
            }
            if self.skipping {
                match memchr::memchr(b'\n', &self.buf) {
                    Some(i) => {
                        self.buf.drain(..=i);
                        self.skipping = false;
                    }
                    None => {
                        self.buf.clear();
                        break;
                    }
                }
            }
            // Stray line ends between frames.
            let lead = self
                .buf
                .iter()
                .take_while(|b| matches!(b, b'\n' | b'\r' | b'\0'))
                .count();
            self.buf.drain(..lead);
            let Some(&first) = self.buf.first() else {
                break;
            };
            if first.is_ascii_digit() {
                let Some(sp) = self.buf.iter().position(|b| *b == b' ') else {
                    if self.buf.len() > 10 {
                        // Digits without an end: not a count after all.
                        if let Some(m) = self.line(max) {
                            out.push(m);
                            continue;
                        }
                    }
                    break;
                };
                let count = std::str::from_utf8(&self.buf[..sp])
                    .ok()
                    .and_then(|c| c.parse::<usize>().ok());
                let Some(count) = count.filter(|_| sp <= 10) else {
                    match self.line(max) {
                        Some(m) => {
                            out.push(m);
                            continue;
                        }
                        None => break,
                    }
                };
                let start = sp + 1;
                if count > max {
                    let have = (self.buf.len() - start).min(max);
                    if have < max {
                        break;
                    }
                    out.push(self.buf[start..start + max].to_vec());
                    crate::stats::count_truncated();
                    let taken = start + max;
                    self.skip_count = count - max;
                    self.buf.drain(..taken);
                    continue;
                }
                if self.buf.len() < start + count {
                    break;
                }
                out.push(self.buf[start..start + count].to_vec());
                self.buf.drain(..start + count);
            } else {
                match self.line(max) {
                    Some(m) => out.push(m),
                    None => break,
                }
            }
        }
        out
    }

    /// One line-framed message, or None when its end is not in yet (an
    /// overlong one is cut at `max` and the rest skipped).
    fn line(&mut self, max: usize) -> Option<Vec<u8>> {
        match memchr::memchr(b'\n', &self.buf) {
            Some(i) if i <= max => {
                let m = self.buf[..i].to_vec();
                self.buf.drain(..=i);
                Some(m)
            }
            Some(_) => {
                let m = self.buf[..max].to_vec();
                crate::stats::count_truncated();
                self.skipping = true;
                self.buf.drain(..max);
                Some(m)
            }
            None if self.buf.len() > max => {
                let m = self.buf[..max].to_vec();
                crate::stats::count_truncated();
                self.skipping = true;
                self.buf.drain(..max);
                Some(m)
            }
            None => None,
        }
    }

    /// What is left at the end of the stream (a last line without its
    /// line end).
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        let rest = std::mem::take(&mut self.buf);
        (!self.skipping && self.skip_count == 0 && !trim_end(&rest).is_empty()).then_some(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::labels as l;

    #[test]
    fn both_rfcs_and_plain_lines() {
        let m = parse(b"<165>1 2025-07-16T12:00:31.100Z egress-7 egress 4242 ID47 [exampleSDID@32473 iut=\"3\" eventSource=\"App]\\\"x\"] \xef\xbb\xbfNo space left on the resource.\n");
        assert_eq!(m.labels, l(&[("app", "egress"), ("host", "egress-7")]));
        assert_eq!(m.line, "No space left on the resource.");
        // As rsyslog forwards what `logger` gave it (RSYSLOG_SyslogProtocol23Format).
        let m = parse(b"<13>1 2026-12-04T19:38:38.748310+00:00 vm egress - - [timeQuality tzKnown=\"1\" isSynced=\"0\"] egress-5021-nsx9j egress 2025-07-16T12:00:02.457Z\tDEBUG\tcpu check\n");
        assert_eq!(m.labels, l(&[("app", "egress"), ("host", "vm")]));
        assert_eq!(
            m.line,
            "egress-5021-nsx9j egress 2025-07-16T12:00:02.457Z\tDEBUG\tcpu check"
        );
        let m = parse(b"<13>1 2025-07-16T12:00:31Z host-a - - - - a message");
        assert_eq!(m.labels, l(&[("host", "host-a")]));
        assert_eq!(m.line, "a message");
        let m = parse(b"<34>Oct 11 22:14:15 mymachine su[230]: 'su root' failed on /dev/pts/8");
        assert_eq!(m.labels, l(&[("app", "su"), ("host", "mymachine")]));
        assert_eq!(m.line, "'su root' failed on /dev/pts/8");
        let m = parse(b"<13>Jul  6 12:00:00 node-1 kubelet: Liveness probe failed");
        assert_eq!(m.labels, l(&[("app", "kubelet"), ("host", "node-1")]));
        assert_eq!(m.line, "Liveness probe failed");
        let m = parse(b"<13>just a message");
        assert_eq!((m.labels.len(), m.line.as_str()), (0, "just a message"));
        let m = parse(b"no syslog at all \xff");
        assert_eq!(m.line, "no syslog at all \u{fffd}");
        assert!(parse(b"<999>x").labels.is_empty());
    }

    #[test]
    fn tcp_framing_octet_counted_and_by_line_in_any_pieces() {
        let a = b"<13>1 - h a - - - first";
        let stream = [
            format!("{} ", a.len()).into_bytes(),
            a.to_vec(),
            b"<13>Jul  6 12:00:00 h app: second\n".to_vec(),
            b"\n<13>third\r\n".to_vec(),
        ]
        .concat();
        // Every split of the stream gives the same messages.
        for cut in 0..stream.len() {
            let mut f = Framer::default();
            let mut got = f.push(&stream[..cut], 1 << 20);
            got.extend(f.push(&stream[cut..], 1 << 20));
            let lines: Vec<String> = got.iter().map(|m| parse(m).line).collect();
            assert_eq!(lines, ["first", "second", "third"], "cut at {cut}");
            assert!(f.finish().is_none());
        }
        let mut f = Framer::default();
        assert!(f.push(b"<13>last without end", 100).is_empty());
        assert_eq!(f.finish().unwrap(), b"<13>last without end");
    }

    #[test]
    fn overlong_messages_are_cut_and_the_next_is_whole() {
        let mut f = Framer::default();
        let long = "x".repeat(5000);
        let mut got = f.push(format!("{long}\n<13>next\n").as_bytes(), 1024);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].len(), 1024);
        assert_eq!(got.pop().unwrap(), b"<13>next");
        let mut f = Framer::default();
        let framed = format!("5000 {long}9 <13>after");
        let mut got = Vec::new();
        for piece in framed.as_bytes().chunks(700) {
            got.extend(f.push(piece, 1024));
        }
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].len(), 1024);
        assert_eq!(got[1], b"<13>after");
    }
}
