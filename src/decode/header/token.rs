//! What a single token of a header looks like: a filler (an identifier,
//! a host), a tag (`name:`), a Java class, a caller (`file.go:107`) — the
//! tests the walk asks of each token it passes.

use super::Part;

pub(super) fn is_space(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

/// A token that reads like an identifier rather than prose: it has a
/// digit or punctuation, is all capitals, or is CamelCase.
pub(super) fn filler_like(t: &[u8]) -> bool {
    if t.is_empty() {
        return false;
    }
    if t.iter().any(|c| {
        c.is_ascii_digit()
            || matches!(
                c,
                b'.' | b'_'
                    | b'/'
                    | b'@'
                    | b'$'
                    | b'#'
                    | b'='
                    | b'*'
                    | b'+'
                    | b'-'
                    | b':'
                    | b'('
                    | b')'
                    | b'<'
                    | b'>'
                    | b'['
                    | b']'
                    | b'{'
                    | b'}'
                    | b'\\'
            )
    }) {
        return true;
    }
    let letters = t.iter().all(u8::is_ascii_alphabetic);
    if !letters {
        // Non-ASCII words, quotes: prose.
        return false;
    }
    let upper = t.iter().filter(|c| c.is_ascii_uppercase()).count();
    (upper == t.len() && t.len() >= 2)
        || (upper >= 2 && t[0].is_ascii_uppercase())
        || (upper >= 1 && t[0].is_ascii_lowercase())
}

/// Whether `t` (a tag without its colon) names a program, logger or
/// caller: `sshd[123]`, `dfs.DataNode$PacketResponder`, `WindowManager`,
/// `pool.go:762`, `31#31`, `felix`-like lowercase words excluded.
pub(super) fn tag_like(t: &[u8]) -> bool {
    if t.is_empty() || t.len() > 96 || t.iter().any(|c| is_space(*c) || *c == b'"') {
        return false;
    }
    if !(t[0].is_ascii_alphanumeric() || matches!(t[0], b'_' | b'[' | b'(' | b'/' | b'.' | b'<')) {
        return false;
    }
    filler_like(t)
}

/// A Java class or logger name: `org.apache.catalina.Foo.log`, dotted at
/// least twice, identifier characters only.
pub(super) fn java_like(t: &[u8]) -> bool {
    t.first().is_some_and(u8::is_ascii_alphabetic)
        && t.iter().filter(|c| **c == b'.').count() >= 2
        && t.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'$'))
        && !t.ends_with(b".")
}

/// A caller: `file.ext:123` (or `path/file.ext:123`) with a source
/// file's extension.
pub(super) fn caller_like(t: &[u8]) -> bool {
    let Some(colon) = t.iter().rposition(|c| *c == b':') else {
        return false;
    };
    let (f, l) = (&t[..colon], &t[colon + 1..]);
    !l.is_empty() && l.iter().all(u8::is_ascii_digit) && source_file(f)
}

/// `path/file.ext` with a source file's extension (which tells `file.go`
/// from `host.example.com`).
pub(super) fn source_file(f: &[u8]) -> bool {
    let Some(dot) = f.iter().rposition(|c| *c == b'.') else {
        return false;
    };
    let ext = &f[dot + 1..];
    if dot == 0 || ext.is_empty() || ext.len() > 6 {
        return false;
    }
    let mut buf = [0u8; 6];
    buf[..ext.len()].copy_from_slice(ext);
    buf.make_ascii_lowercase();
    let known = matches!(
        &buf[..ext.len()],
        b"go"
            | b"java"
            | b"py"
            | b"rs"
            | b"c"
            | b"cc"
            | b"cpp"
            | b"cxx"
            | b"h"
            | b"hh"
            | b"hpp"
            | b"js"
            | b"mjs"
            | b"cjs"
            | b"ts"
            | b"rb"
            | b"scala"
            | b"kt"
            | b"cs"
            | b"php"
            | b"ex"
            | b"exs"
            | b"erl"
            | b"swift"
            | b"m"
            | b"mm"
            | b"lua"
            | b"pl"
            | b"sh"
            | b"groovy"
            | b"clj"
            | b"dart"
            | b"zig"
            | b"vb"
            | b"fs"
    );
    known
        && f.iter().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'/' | b'-' | b'$' | b'<' | b'>')
        })
}

/// The part a tag names: a caller (`pool.go:762`), a program (`sshd[123]`,
/// `crond(pam_unix)[2915]`) or a logger (`org.foo.Bar`, `WindowManager`).
pub(super) fn tag_part(t: &[u8]) -> Part {
    if caller_like(t) {
        Part::Caller
    } else if t.last() == Some(&b']') && t.contains(&b'[') {
        Part::Program
    } else {
        Part::Logger
    }
}

/// `inner`'s range (offset by `base`) without surrounding spaces.
pub(super) fn trim_range(inner: &[u8], base: usize) -> (usize, usize) {
    let a = inner.iter().take_while(|c| is_space(**c)).count();
    let b = inner.len() - inner.iter().rev().take_while(|c| is_space(**c)).count();
    if a >= b {
        (base, base)
    } else {
        (base + a, base + b)
    }
}
