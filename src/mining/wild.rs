//! Wildcard tokens and the keys that find templates: the shapes a `<*>`
//! takes with the punctuation around it (`(<*>)`, `<*>:`, `key=<*>`),
//! whether a literal fits a template's frame, and the hashes of a token
//! list with positions blanked.

use super::tokenize::{closes_own_bracket, is_punct, is_wild};
use super::WILDCARD;
use rustc_hash::FxHashMap as HashMap;
use std::hash::{Hash, Hasher};

/// Templates a key of the indexes points at, most (a key shared by more is
/// a hash collision storm; the rest are not indexed).
pub(super) const MAX_PER_KEY: usize = 64;

/// The variable form of a word in a frame of punctuation or a key: `key=
/// <*>` for `key=value` ([`keyed_wild`]), `(<*>).` for `(httpd).`, `<*>,`
/// for `com.example.Service,`. A template with the framed variable there
/// takes the word, whatever shape the word has.
pub(super) fn framed_wild(tok: &str) -> Option<String> {
    keyed_wild(tok)
        .or_else(|| bracketed_wild(tok))
        .or_else(|| punct_wild(tok))
}

/// Where the word inside `tok`'s punctuation starts and ends (byte
/// offsets), None for a token of punctuation only.
fn word_bounds(tok: &str) -> Option<(usize, usize)> {
    let head = tok.find(|c: char| !is_punct(c))?;
    let tail = tok
        .char_indices()
        .rfind(|(_, c)| !is_punct(*c))
        .map(|(i, c)| i + c.len_utf8())?;
    Some((head, tail))
}

/// `<*>,` for `word,`, `"<*>"` for `"word"`: a word with punctuation
/// before or after it (a bare word is a bare variable's already).
pub(super) fn punct_wild(tok: &str) -> Option<String> {
    if is_wild(tok) {
        return None;
    }
    let (head, tail) = word_bounds(tok)?;
    let (pre, post) = (&tok[..head], &tok[tail..]);
    // Brackets are [`bracketed_wild`]'s; a frame must be there.
    if (pre.is_empty() && post.is_empty()) || pre.contains(['(', '[']) || post.contains([')', ']'])
    {
        return None;
    }
    Some(format!("{pre}{WILDCARD}{post}"))
}

/// `(<*>).` for a bracketed word `(httpd).` (one token that opens and
/// closes its bracket), None for anything else.
pub(super) fn bracketed_wild(tok: &str) -> Option<String> {
    if is_wild(tok) || !closes_own_bracket(tok) {
        return None;
    }
    let (head, tail) = word_bounds(tok)?;
    (head < tail).then(|| format!("{}{WILDCARD}{}", &tok[..head], &tok[tail..]))
}

/// Whether a template token is a framed variable (`key=<*>`, `(<*>).`):
/// one wildcard, a key or punctuation before it, punctuation after it.
pub(super) fn is_framed_wild(tok: &str) -> bool {
    let Some(at) = tok.find(WILDCARD) else {
        return false;
    };
    let (head, tail) = (&tok[..at], &tok[at + WILDCARD.len()..]);
    if tok == WILDCARD || tail.contains(WILDCARD) || !tail.chars().all(is_punct) {
        return false;
    }
    head.chars().all(is_punct)
        || head
            .strip_suffix('=')
            .is_some_and(|k| !k.is_empty() && !k.contains(WILDCARD))
}

/// `key=<*>` for a `key=value` token (its closing punctuation kept:
/// `(uid=0),` → `(uid=<*>),`), if it is one and its value is not already
/// a variable.
pub(super) fn keyed_wild(tok: &str) -> Option<String> {
    let eq = tok.find('=')?;
    let value = &tok[eq + 1..];
    if value.is_empty() || value.contains(WILDCARD) {
        return None;
    }
    let tail_at = value
        .char_indices()
        .rfind(|(_, c)| !is_punct(*c))
        .map(|(i, c)| i + c.len_utf8())?;
    Some(format!("{}{WILDCARD}{}", &tok[..=eq], &value[tail_at..]))
}

/// The mask of a template's variable positions, bare (`<*>`) or framed
/// (`(<*>).`, `key=<*>`, `<*>,`): a bit per position. A message joins a
/// template whatever shape its values take there, as long as a framed
/// variable's frame fits ([`fits_frame`]).
pub(super) fn mask_of(tokens: &[String]) -> u64 {
    tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| t.as_str() == WILDCARD || is_framed_wild(t))
        .fold(0u64, |m, (i, _)| m | (1u64 << i))
}

/// Whether token `tok` fits template token `tmpl` at a variable position:
/// anything fits a bare `<*>`; a framed one takes a token with its frame
/// (`(mode=fast)` fits `(<*>)`, `gid=5` does not fit `uid=<*>`).
pub(super) fn fits_frame(tmpl: &str, tok: &str) -> bool {
    if tmpl == WILDCARD || tmpl == tok {
        return true;
    }
    match tmpl.split_once(WILDCARD) {
        Some((pre, post)) => {
            // A key's value may be empty (`logname=` beside
            // `logname=root`): the same event without the value.
            let least = pre.len() + post.len() + usize::from(!pre.ends_with('='));
            tok.len() >= least && tok.starts_with(pre) && tok.ends_with(post)
        }
        None => false,
    }
}

/// A hash of `tokens` with the positions in `blank` left out (and `extra`
/// too, when it is a position): the key of the indexes.
pub(super) fn hash_blanked(tokens: &[String], blank: u64, extra: Option<usize>) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    tokens.len().hash(&mut h);
    blank.hash(&mut h);
    extra.hash(&mut h);
    for (i, t) in tokens.iter().enumerate() {
        if blank & (1u64 << i) != 0 || extra == Some(i) {
            0u8.hash(&mut h);
        } else {
            t.hash(&mut h);
        }
    }
    h.finish()
}

pub(super) fn index_add(map: &mut HashMap<u64, Vec<u64>>, key: u64, id: u64) {
    let v = map.entry(key).or_default();
    if v.len() < MAX_PER_KEY && !v.contains(&id) {
        v.push(id);
    }
}

pub(super) fn index_remove(map: &mut HashMap<u64, Vec<u64>>, key: u64, id: u64) {
    if let Some(v) = map.get_mut(&key) {
        v.retain(|x| *x != id);
        if v.is_empty() {
            map.remove(&key);
        }
    }
}
