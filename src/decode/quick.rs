//! Cheap field lookups in raw text, without parsing it: the value of
//! `"key": …`, `key=…` or an escaped `\"key\":…`, a dotted path into nested
//! JSON, the token after a literal. Shared by the field scanner
//! ([`super::keys`]) and the full decoders ([`super::payload`]), so neither
//! imports the other.

use std::borrow::Cow;

/// Unescapes a JSON string body (without its quotes).
pub fn unescape_json(raw: &str) -> Option<String> {
    serde_json::from_str::<String>(&format!("\"{raw}\"")).ok()
}

/// Unescapes a Go-quoted value body (without its quotes).
pub fn parse_pairs_value(raw: &str) -> String {
    read_quoted(&format!("{raw}\"")).0
}

/// Reads a Go-quoted string body (after the opening quote); returns the
/// unescaped text and the bytes consumed including the closing quote.
pub(crate) fn read_quoted(s: &str) -> (String, usize) {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (out, i + 1),
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, other)) => out.push(other),
                None => break,
            },
            c => out.push(c),
        }
    }
    (out, s.len())
}

/// Finds a field's value in raw text without parsing it: `"key": value` (JSON,
/// including a console line's trailing object) or `key=value` (logfmt, klog).
/// This is the cheap path used for lines no rule can match.
pub fn quick_get<'a>(text: &'a str, key: &str) -> Option<Cow<'a, str>> {
    quick_get_by(text, key, &memchr::memmem::Finder::new(key))
}

/// [`quick_get`] with the key's searcher built once by the caller (for
/// keys looked up on every line).
pub fn quick_get_by<'a>(
    text: &'a str,
    key: &str,
    finder: &memchr::memmem::Finder<'_>,
) -> Option<Cow<'a, str>> {
    let bytes = text.as_bytes();
    let kb = key.as_bytes();
    let mut from = 0;
    while let Some(off) = finder.find(&bytes[from..]) {
        let i = from + off;
        let end = i + kb.len();
        from = end;
        // JSON key: "key" then optional spaces then ':'.
        if i > 0 && bytes[i - 1] == b'"' && bytes.get(end) == Some(&b'"') {
            let before = if i >= 2 { bytes[i - 2] } else { b'{' };
            if !matches!(before, b'{' | b',' | b' ' | b'\t') {
                continue;
            }
            let Some(j) = after_colon(bytes, end + 1) else {
                continue;
            };
            return json_scalar_at(text, j);
        }
        // A key inside a JSON string (an envelope): \"key\":\"value\".
        if i >= 2
            && bytes[i - 1] == b'"'
            && bytes[i - 2] == b'\\'
            && text[end..].starts_with("\\\":")
        {
            let after = &text[end + 3..];
            let after = after.trim_start();
            if let Some(body) = after.strip_prefix("\\\"") {
                let stop = body.find("\\\"").unwrap_or(body.len());
                return Some(Cow::Borrowed(&body[..stop]));
            }
            let stop = after.find([',', '}', ' ']).unwrap_or(after.len());
            if stop > 0 {
                return Some(Cow::Borrowed(&after[..stop]));
            }
            continue;
        }
        // A logfmt pair inside a JSON string: pod=\"ns/name\".
        let at_boundary = i == 0 || bytes[i - 1] == b' ';
        if at_boundary && text[end..].starts_with("=\\\"") {
            let body = &text[end + 3..];
            let stop = body.find("\\\"").unwrap_or(body.len());
            return Some(Cow::Borrowed(&body[..stop]));
        }
        // logfmt key: at start or after a space, followed by '='.
        let at_boundary = i == 0 || bytes[i - 1] == b' ';
        if at_boundary && bytes.get(end) == Some(&b'=') {
            let after = &text[end + 1..];
            if let Some(q) = after.strip_prefix('"') {
                return Some(Cow::Owned(read_quoted(q).0));
            }
            let e = after.find(' ').unwrap_or(after.len());
            return Some(Cow::Borrowed(&after[..e]));
        }
    }
    None
}

/// The token after the first occurrence of `lit` in `text`: letters,
/// digits, `.`, `-`, `_`, `:` (e.g. `after:pod/` reads `pod/api-1` → `api-1`).
pub fn token_after<'a>(text: &'a str, lit: &str) -> Option<&'a str> {
    let i = memchr::memmem::find(text.as_bytes(), lit.as_bytes())? + lit.len();
    let rest = &text[i..];
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':')))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Cheap lookup of a dotted path (`involvedObject.name`, `source.host`) in
/// JSON text: a literal key first (zap writes `rtc.portTCP`), else each
/// segment narrows the search to the object value of the one before it.
pub fn quick_get_path<'a>(text: &'a str, path: &str) -> Option<Cow<'a, str>> {
    if let Some(v) = quick_get(text, path) {
        return Some(v);
    }
    let (first, rest) = path.split_once('.')?;
    let obj = quick_object(text, first)?;
    quick_get_path(obj, rest)
}

/// The text of the object value of `key` (from `{` to its matching `}`).
fn quick_object<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let bytes = text.as_bytes();
    let pat = format!("\"{key}\"");
    let mut from = 0;
    while let Some(off) = memchr::memmem::find(&bytes[from..], pat.as_bytes()) {
        from = from + off + pat.len();
        let Some(j) = after_colon(bytes, from) else {
            continue;
        };
        if bytes.get(j) != Some(&b'{') {
            continue;
        }
        let (mut depth, mut in_str, mut k) = (0usize, false, j);
        while k < bytes.len() {
            match bytes[k] {
                b'\\' if in_str => k += 1,
                b'"' => in_str = !in_str,
                b'{' if !in_str => depth += 1,
                b'}' if !in_str => {
                    depth -= 1;
                    if depth == 0 {
                        return text.get(j..=k);
                    }
                }
                _ => {}
            }
            k += 1;
        }
        return None;
    }
    None
}

/// Scans a quoted string body starting at `start` (just after the opening
/// quote): returns the index of the closing quote (or the end) and whether
/// backslash escapes occur.
pub fn quoted_end(b: &[u8], start: usize) -> (usize, bool) {
    let mut k = start;
    let mut escaped = false;
    while k < b.len() {
        match b[k] {
            b'\\' => {
                escaped = true;
                k += 2;
            }
            b'"' => break,
            _ => k += 1,
        }
    }
    (k.min(b.len()), escaped)
}

/// After a JSON key ending at `j`: skips spaces, a ':', spaces; the index
/// of the value, or None when no ':' follows.
fn after_colon(bytes: &[u8], mut j: usize) -> Option<usize> {
    while bytes.get(j).is_some_and(|b| *b == b' ') {
        j += 1;
    }
    if bytes.get(j) != Some(&b':') {
        return None;
    }
    j += 1;
    while bytes.get(j).is_some_and(|b| *b == b' ') {
        j += 1;
    }
    Some(j)
}

fn json_scalar_at(text: &str, j: usize) -> Option<Cow<'_, str>> {
    let rest = text.get(j..)?;
    if let Some(body) = rest.strip_prefix('"') {
        let (k, escaped) = quoted_end(body.as_bytes(), 0);
        let raw = body.get(..k.min(body.len()))?;
        if !escaped {
            return Some(Cow::Borrowed(raw));
        }
        return serde_json::from_str::<String>(&format!("\"{raw}\""))
            .ok()
            .map(Cow::Owned);
    }
    let end = rest.find([',', '}', ' ', ']']).unwrap_or(rest.len());
    let v = &rest[..end];
    if v.is_empty() || v == "null" {
        return None;
    }
    Some(Cow::Borrowed(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_get_finds_keys_not_values() {
        let t = r#"{"msg":"nodeID changed","nodeID":"ND_x","a":{"nodeID2":1}}"#;
        assert_eq!(quick_get(t, "nodeID").as_deref(), Some("ND_x"));
        assert_eq!(
            quick_get(r#"{"a": 1, "nodeID": "ND_\"q"}"#, "nodeID").as_deref(),
            Some("ND_\"q")
        );
        assert_eq!(
            quick_get(r#"x="1" pod="ns/p-0" podUID="u""#, "pod").as_deref(),
            Some("ns/p-0")
        );
        assert_eq!(
            quick_get(r#"{"ts":1714568400.5,"x":1}"#, "ts").as_deref(),
            Some("1714568400.5")
        );
        assert_eq!(quick_get(r#"{"apod":"x"}"#, "pod"), None);
    }

    #[test]
    fn quick_nested_paths_stay_inside_their_object() {
        let t = r#"{"metadata":{"name":"ev.17cb"},"involvedObject":{"kind":"Pod","name":"api-1","x":{"name":"deep"}},"source":{"host":"node-a"},"rtc.portTCP":7881}"#;
        assert_eq!(
            quick_get_path(t, "involvedObject.name").as_deref(),
            Some("api-1")
        );
        assert_eq!(
            quick_get_path(t, "involvedObject.x.name").as_deref(),
            Some("deep")
        );
        assert_eq!(quick_get_path(t, "source.host").as_deref(), Some("node-a"));
        assert_eq!(quick_get_path(t, "rtc.portTCP").as_deref(), Some("7881"));
        assert_eq!(quick_get_path(t, "source.port"), None);
        assert_eq!(
            quick_get_path(r#"{"a":{"s":"}{\"","b":"c"}}"#, "a.b").as_deref(),
            Some("c")
        );
    }
}
