//! The tokeniser: a message split into tokens with its variables masked
//! to `<*>` — numbers, IDs, addresses, hex, UUIDs, durations, embedded
//! timestamps, quoted values — one pass over the bytes with a class
//! table, bounded to [`super::MAX_TOKENS`] tokens.

use super::{MAX_TOKENS, WILDCARD};

/// A token of a masked message: a literal or a variable, with the
/// punctuation around it (`(<*>)`, `<*>:`, `key=<*>`).
pub(super) fn is_wild(t: &str) -> bool {
    t.contains(WILDCARD)
}

/// Whether a token that opens a bracket also closes it (`(httpd).`,
/// `[main]`), with nothing of the bracket left open.
pub(super) fn closes_own_bracket(tok: &str) -> bool {
    let (open, close) = match tok.as_bytes().first() {
        Some(b'(') => (b'(', b')'),
        Some(b'[') => (b'[', b']'),
        _ => return false,
    };
    let b = tok.as_bytes();
    let mut depth = 0i32;
    for (i, c) in b.iter().enumerate() {
        if *c == open {
            depth += 1;
        } else if *c == close {
            depth -= 1;
            if depth == 0 {
                // Only punctuation may follow the closing bracket.
                return b[i + 1..].iter().all(|c| c.is_ascii_punctuation());
            }
        }
    }
    false
}

/// Whether a token (without surrounding punctuation) is a variable: a
/// number, a duration (`1.5s`, `250ms`), hex, an address, a UUID or any
/// other token holding a digit (IDs, versions, sizes) — except short names
/// with one digit (`ssh2`, `ipv6`) — and prefixed IDs without digits.
pub(super) fn is_variable(core: &str) -> bool {
    let b = core.as_bytes();
    // One pass: what kinds of bytes the token has.
    let (mut digits, mut alnum, mut hex_letters, mut dot) = (0usize, true, true, false);
    for &c in b {
        if c.is_ascii_digit() {
            digits += 1;
        } else if !c.is_ascii_alphabetic() {
            alnum = false;
            dot |= c == b'.';
        }
        hex_letters &= matches!(c, b'a'..=b'f' | b'A'..=b'F');
    }
    if digits > 0 {
        // A short word with one digit is a name, not a value: ssh2,
        // ipv6, http2, k8s, s3.
        let name = digits == 1 && b.len() <= 6 && b[0].is_ascii_alphabetic() && alnum;
        // A device's message tag names its event (`%LINK-3-UPDOWN`,
        // `%ASA-4-106023`), digits and all.
        let tag = b[0] == b'%' && crate::decode::severity::device_tag(b).is_some();
        return !(name || tag);
    }
    if alnum {
        // Hex without a digit (`deadbeef`), 8 characters or more.
        return b.len() >= 8 && hex_letters;
    }
    // A path or a URL (`/latest/meta-data`, `./run`, `C:\\Windows`, `https://…`).
    if (b.len() >= 2 && b[0] == b'/')
        || core.starts_with("./")
        || core.starts_with("../")
        || core.starts_with("~/")
        || core.contains("://")
        || (b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'\\')
    {
        return true;
    }
    if dot && is_domain(core) {
        return true;
    }
    // A prefixed ID (`RM_hXkTqfzqjBkR`), not a constant (`EGRESS_FAILED`).
    if let Some((p, rest)) = core.split_once('_') {
        if (1..=4).contains(&p.len())
            && p.bytes().all(|c| c.is_ascii_uppercase())
            && rest.len() >= 6
            && rest.bytes().all(|c| c.is_ascii_alphanumeric())
            && rest.bytes().any(|c| c.is_ascii_lowercase())
        {
            return true;
        }
    }
    false
}

/// A host name (`ns.example.com`, `db-3.eu.example.de`): labels of letters,
/// digits and `-` joined by dots, ending in a top-level domain. A Java
/// package (`com.android.systemui`) or a file (`main.go`) is not one.
pub(super) fn is_domain(core: &str) -> bool {
    let Some((_, tld)) = core.rsplit_once('.') else {
        return false;
    };
    let dots = core.bytes().filter(|b| *b == b'.').count();
    let labels_ok = core
        .split('.')
        .all(|l| !l.is_empty() && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'));
    let known = matches!(
        tld,
        "com"
            | "net"
            | "org"
            | "io"
            | "edu"
            | "gov"
            | "mil"
            | "info"
            | "biz"
            | "local"
            | "internal"
            | "lan"
            | "arpa"
            | "cloud"
            | "dev"
            | "app"
    );
    let country = dots >= 2 && tld.len() == 2 && tld.bytes().all(|c| c.is_ascii_lowercase());
    labels_ok && (known || country)
}

/// Punctuation a token's core is taken out of: brackets, quotes, and the
/// separators that follow words.
pub(super) fn is_punct(c: char) -> bool {
    matches!(
        c,
        '(' | ')'
            | '['
            | ']'
            | '{'
            | '}'
            | ','
            | ';'
            | ':'
            | '.'
            | '<'
            | '>'
            | '"'
            | '\''
            | '!'
            | '?'
    )
}

/// Units that belong to the number before them (`5 ms`, `1.16 KB`).
pub(super) fn is_unit(w: &str) -> bool {
    matches!(
        w,
        "ns" | "us"
            | "µs"
            | "ms"
            | "s"
            | "sec"
            | "secs"
            | "second"
            | "seconds"
            | "min"
            | "mins"
            | "minute"
            | "minutes"
            | "h"
            | "hr"
            | "hrs"
            | "hour"
            | "hours"
            | "day"
            | "days"
            | "B"
            | "KB"
            | "MB"
            | "GB"
            | "TB"
            | "KiB"
            | "MiB"
            | "GiB"
            | "TiB"
            | "kB"
            | "bytes"
            | "byte"
            | "%"
    )
}

/// Whether a `key=value` value is a variable: it has a digit, is quoted,
/// or reads like a path, host, address or dotted name; plain words
/// (`user=root`, `ws=null`, `state=running`) stay.
pub(super) fn value_is_variable(v: &str) -> bool {
    let core = v.trim_matches(is_punct);
    v.starts_with(['"', '\''])
        || core.bytes().any(|b| b.is_ascii_digit())
        || core.contains(['.', '/', ':', '@', '\\'])
        || (!core.is_empty() && is_variable(core))
}

/// Masks one whitespace-separated token (the rules, in order):
///
/// | token | masked | rule |
/// |---|---|---|
/// | `port=22`, `name=com.android.ui`, `tag="View Lock"` | `port=<*>`, `name=<*>`, `tag=<*>` | `key=value`: the key stays, a value with a digit, a dot, a slash, a colon, or quotes is a variable |
/// | `user=root`, `logname=` | unchanged | a plain word or an empty value stays |
/// | `(10.0.0.1:22),` | `(<*>),` | punctuation around a variable stays |
/// | `<1`, `~5` | `<*>` | a sign before a number is the number's |
/// | `()`, `[]` | `(<*>)`, `[<*>]` | an empty bracket is an empty value |
/// | `index:0`, `onExtend:1514038530000` | `index:<*>`, `onExtend:<*>` | a name keeps its `:`/`,`/`#`-joined value masked |
/// | `"GET`, `HTTP/1.1"` | `"GET`, `<*>"` | quotes are punctuation: a quoted text is tokenised word by word |
/// | `blk_-69522958`, `node-140`, `0x1F`, `LOCAL(0)` | `<*>` | a digit makes a variable… |
/// | `ssh2`, `ipv6` | `ssh2`, `ipv6` | …except in a short name with one digit |
/// | `/latest/meta-data/`, `https://x.io/a`, `C:\\Temp` | `<*>` | paths and URLs are variables (`i/o` is a word) |
/// | `ns.example.com`, `db-3.eu.example.de` | `<*>` | host names are variables (`com.android.ui`, `main.go` are not) |
/// | `RM_hXkTqfzqjBkR`, `deadbeefcafe` | `<*>` | prefixed IDs and long hex without digits |
/// | `EGRESS_FAILED`, `PacketResponder` | unchanged | words and constants stay |
pub(super) fn mask_token(tok: &str, out: &mut String) {
    use std::fmt::Write as _;
    if let Some((k, v)) = tok.split_once('=') {
        let key = k.trim_start_matches(is_punct);
        if !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
        {
            if v.is_empty() || !value_is_variable(v) {
                out.push_str(tok);
                return;
            }
            // Keep the value's closing punctuation (`(uid=0)` → `(uid=<*>)`).
            let tail_at = v
                .char_indices()
                .rfind(|(_, c)| !is_punct(*c))
                .map_or(v.len(), |(i, c)| i + c.len_utf8());
            let tail = &v[tail_at..];
            let tail = if v.starts_with(['"', '\'']) {
                tail.trim_start_matches(['"', '\''])
            } else {
                tail
            };
            let _ = write!(out, "{k}={WILDCARD}{tail}");
            return;
        }
    }
    let start = tok.find(|c: char| !is_punct(c)).unwrap_or(tok.len());
    let end = tok.rfind(|c: char| !is_punct(c)).map_or(start, |i| {
        i + tok[i..].chars().next().map_or(1, char::len_utf8)
    });
    let (pre, core, post) = (
        &tok[..start],
        &tok[start..end.max(start)],
        &tok[end.max(start)..],
    );
    if core.is_empty() {
        // `()`, `[]`, `{}`: an empty value.
        match tok {
            "()" | "[]" | "{}" | "<>" => {
                let _ = write!(out, "{}{WILDCARD}{}", &tok[..1], &tok[1..]);
            }
            _ => out.push_str(tok),
        }
        return;
    }
    if core == WILDCARD {
        out.push_str(tok);
        return;
    }
    // A name and its value: `index:0`, `cancelNotification,index:0`.
    if !core.contains(['/', '(', '[', '{']) {
        if let Some(sep) = core.rfind([':', ',', '#']) {
            let (name, value) = (&core[..sep], &core[sep + 1..]);
            let letters = name.bytes().filter(u8::is_ascii_alphabetic).count();
            if letters >= 2
                && !name.bytes().any(|b| b.is_ascii_digit() || b == b'.')
                && !value.is_empty()
                && is_variable(value)
            {
                let _ = write!(out, "{pre}{}{WILDCARD}{post}", &core[..=sep]);
                return;
            }
        }
    }
    if is_variable(core) {
        // A sign before a number is part of it (`<1 sec`, `~5`); a bracket
        // opened inside the value closes with it (`LOCAL(0),` → `<*>,`).
        let pre = pre.trim_start_matches(['<', '>', '~']);
        out.push_str(pre);
        out.push_str(WILDCARD);
        if core.contains(['(', '[', '{']) {
            let mut post = post.to_string();
            for (open, close) in [('(', ')'), ('[', ']'), ('{', '}')] {
                if core.contains(open) && !pre.contains(open) {
                    if let Some(at) = post.find(close) {
                        post.remove(at);
                    }
                }
            }
            out.push_str(&post);
        } else {
            out.push_str(post);
        }
    } else {
        out.push_str(tok);
    }
}

/// The end of the token at `i` (the next space), and whether it is a word
/// that [`mask_token`] leaves as it is: ASCII letters between punctuation
/// (no `=`), and not 8 or more hex letters. One pass over its bytes.
pub(super) fn scan_token(b: &[u8], i: usize) -> (usize, bool) {
    let (mut core, mut gap, mut letters, mut hex) = (0usize, false, true, true);
    let mut end = b.len();
    for (k, &c) in b[i..].iter().enumerate() {
        let class = BYTE_CLASS[usize::from(c)];
        if class & SPACE != 0 {
            end = i + k;
            break;
        }
        if class & PUNCT != 0 {
            gap |= core > 0;
            continue;
        }
        // Punctuation inside the core (`a.b`) makes it more than a word;
        // so does anything but a letter (`=`, a digit, `*`, UTF-8).
        letters &= class & ALPHA != 0 && !gap;
        hex &= class & HEX != 0;
        core += 1;
    }
    let word = core > 0 && letters && !(core >= 8 && hex);
    (end, word)
}

pub(super) const SPACE: u8 = 1;
pub(super) const PUNCT: u8 = 2;
pub(super) const ALPHA: u8 = 4;
pub(super) const HEX: u8 = 8;

/// What [`scan_token`] needs of each byte, looked up once: ASCII space,
/// [`is_punct`], letter, hex digit.
pub(super) static BYTE_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0usize;
    while c < 256 {
        let b = c as u8;
        let mut v = 0;
        if b.is_ascii_whitespace() {
            v |= SPACE;
        }
        if matches!(
            b,
            b'(' | b')'
                | b'['
                | b']'
                | b'{'
                | b'}'
                | b','
                | b';'
                | b':'
                | b'.'
                | b'<'
                | b'>'
                | b'"'
                | b'\''
                | b'!'
                | b'?'
        ) {
            v |= PUNCT;
        }
        if b.is_ascii_alphabetic() {
            v |= ALPHA;
        }
        if b.is_ascii_hexdigit() {
            v |= HEX;
        }
        t[c] = v;
        c += 1;
    }
    t
};

/// Whether a timestamp may start at a token ([`stamp_len`] is asked only
/// then): a digit, a bracket, klog's letter and date, or a month or
/// weekday name.
///
/// [`stamp_len`]: crate::decode::header::stamp_len
pub(super) fn may_start_stamp(tok: &[u8]) -> bool {
    match tok.first() {
        Some(c) if c.is_ascii_digit() || matches!(c, b'[' | b'(') => true,
        // klog's `I0501 12:00:40.118204`.
        Some(b'I' | b'W' | b'E' | b'F') if tok.get(1).is_some_and(u8::is_ascii_digit) => true,
        Some(c) if c.is_ascii_alphabetic() => {
            let mut head = [0u8; 3];
            for (h, c) in head.iter_mut().zip(tok) {
                *h = c.to_ascii_lowercase();
            }
            matches!(
                &head,
                b"jan"
                    | b"feb"
                    | b"mar"
                    | b"apr"
                    | b"may"
                    | b"jun"
                    | b"jul"
                    | b"aug"
                    | b"sep"
                    | b"oct"
                    | b"nov"
                    | b"dec"
                    | b"mon"
                    | b"tue"
                    | b"wed"
                    | b"thu"
                    | b"fri"
                    | b"sat"
                    | b"sun"
            )
        }
        _ => false,
    }
}

/// Whether a masked value reads as a name rather than a number: it has a
/// letter other than hex digits and `x` (`ns.example.com`, `/var/log/a`,
/// `node-140`, `250ms`; not `0x1F`, `10.0.0.1:22`, `2.5`).
fn names_something(tok: &[u8]) -> bool {
    let value = match memchr::memchr(b'=', tok) {
        Some(eq) => &tok[eq + 1..],
        None => tok,
    };
    value
        .iter()
        .any(|c| c.is_ascii_alphabetic() && !c.is_ascii_hexdigit() && !matches!(c, b'x' | b'X'))
}

/// Where a `key="quoted value"` that spans spaces ends (after its closing
/// quote), if the token at `i` starts one.
pub(super) fn quoted_value_end(b: &[u8], i: usize, end: usize) -> Option<usize> {
    let tok = &b[i..end];
    let eq = tok.iter().position(|c| *c == b'=')?;
    let q = *tok.get(eq + 1)?;
    if !(q == b'"' || q == b'\'') || tok.len() > eq + 2 && tok[tok.len() - 1] == q {
        return None;
    }
    let close = b[i + eq + 2..].iter().position(|c| *c == q)?;
    let stop = i + eq + 2 + close + 1;
    // The token goes on to the next space.
    Some(
        b[stop..]
            .iter()
            .position(u8::is_ascii_whitespace)
            .map_or(b.len(), |p| stop + p),
    )
}

/// Splits a message into masked tokens (`mask_token`'s rules): a
/// timestamp inside the message (`at Fri Jun 17 07:07:00 2005`) is one
/// variable, a run of variables (`( 3552 3534 3375 )`) is one, a unit after
/// a variable (`5 ms`, `1190 bytes (1.16 KB)`) is the variable's, and a
/// `key="value with spaces"` is one token; at most [`MAX_TOKENS`].
pub fn tokenize(message: &str) -> Vec<String> {
    let mut t = Tokens::default();
    tokenize_into(message, &mut t);
    t.as_slice().to_vec()
}

/// A reusable list of tokens: the strings of earlier messages are kept
/// and written over, so tokenising a message allocates nothing once the
/// buffers have grown.
#[derive(Debug, Default)]
pub(super) struct Tokens {
    pub(super) bufs: Vec<String>,
    pub(super) len: usize,
    /// The variables masked from a value that reads as a name (it has
    /// letters: a path, a host, an ID), a bit per position: their place
    /// may hold a plain word too ([`super::Template::words`]); a variable
    /// of numbers only does not.
    pub(super) names: u64,
}

impl Tokens {
    pub(super) fn clear(&mut self) {
        self.len = 0;
        self.names = 0;
    }

    /// The last token goes; its variable joins the one before it.
    fn join_last(&mut self) {
        let n = self.len;
        if (2..=64).contains(&n) && self.names & (1u64 << (n - 1)) != 0 {
            self.names &= !(1u64 << (n - 1));
            self.names |= 1u64 << (n - 2);
        }
        self.len -= 1;
    }

    /// A new, empty last token.
    pub(super) fn push(&mut self) -> &mut String {
        if self.len == self.bufs.len() {
            self.bufs.push(String::new());
        }
        let s = &mut self.bufs[self.len];
        s.clear();
        self.len += 1;
        s
    }

    pub(super) fn as_slice(&self) -> &[String] {
        &self.bufs[..self.len]
    }
}

/// [`tokenize`] into `out`.
pub(super) fn tokenize_into(message: &str, out: &mut Tokens) {
    out.clear();
    let text = message.trim();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() && out.len < MAX_TOKENS {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let (end, word) = scan_token(b, i);
        // A stamp ends where a token may: `00:11:43:e3:ba:c3` is an
        // address, not a time of day and the rest.
        let stamp = if may_start_stamp(&b[i..end]) {
            crate::decode::header::stamp_len(text, i).filter(|n| {
                b.get(i + n)
                    .is_none_or(|c| c.is_ascii_whitespace() || b",;)]\"'".contains(c))
            })
        } else {
            None
        };
        let slot = out.push();
        match stamp {
            Some(n) => {
                i += n;
                slot.push_str(WILDCARD);
            }
            // Most tokens are words: nothing to mask.
            None if word => {
                slot.push_str(&text[i..end]);
                i = end;
            }
            None => {
                let mut end = end;
                if let Some(e) = quoted_value_end(b, i, end) {
                    end = e;
                }
                mask_token(&text[i..end], slot);
                if is_wild(slot) && names_something(&b[i..end]) && out.len <= 64 {
                    out.names |= 1u64 << (out.len - 1);
                }
                i = end;
            }
        }
        let n = out.len;
        if n < 2 || out.bufs[n - 2] != WILDCARD {
            continue;
        }
        let tok = &out.bufs[n - 1];
        // A run of variables is one; a unit or a bracketed value after a
        // variable is the variable's.
        let core = tok.trim_matches(is_punct);
        // A bracketed size that opens after its number (`1190 bytes
        // (1.16 KB)`) is the number's. A bracketed value on its own
        // (`27154 (ld-linux.so.2).`) keeps its place: its neighbour in
        // another line may read as a word (`28473 (httpd).`), and a
        // value's shape must not change the token count.
        let opens_size = is_wild(tok) && tok.starts_with(['(', '[']) && !closes_own_bracket(tok);
        if tok == WILDCARD || is_unit(core) || opens_size {
            let tail = tok.trim_start_matches(|c: char| !is_punct(c) || c == '(' || c == '[');
            let keep = (tok != WILDCARD && tail.ends_with([',', ':', ';']))
                .then(|| tail.as_bytes()[tail.len() - 1] as char);
            out.join_last();
            if let Some(c) = keep {
                out.bufs[n - 2].push(c);
            }
            continue;
        }
        // `<*> <*>"`: the variable run ends where the punctuation does.
        if let Some(rest) = tok.strip_prefix(WILDCARD) {
            if !rest.is_empty() && rest.chars().all(is_punct) {
                out.bufs.swap(n - 2, n - 1);
                out.join_last();
            }
        }
    }
}
