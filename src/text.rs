//! Small text helpers every stage shares: cutting a line for a sample or a
//! receiver's field limit, and compiling a regex from a rule or
//! configuration file within fixed bounds. They sit on the ground floor
//! (beside [`crate::clock`]) so that no stage imports another for them.

use regex::Regex;

/// Truncates at a char boundary, marking the cut with `…`.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &s[..cut])
}

/// Compiled size allowed per regex (4 MiB) and per lazy DFA cache (2 MiB):
/// explicit bounds, so a rule file cannot make sigwatch allocate without
/// limit. Matching is linear in the input whatever the pattern (the `regex`
/// crate has no backtracking).
pub const REGEX_SIZE_LIMIT: usize = 4 << 20;
/// See [`REGEX_SIZE_LIMIT`].
pub const REGEX_DFA_SIZE_LIMIT: usize = 2 << 20;
/// Deepest nesting of groups and repetitions allowed in a regex.
pub const REGEX_NEST_LIMIT: u32 = 64;

/// Compiles a regex from a rule or configuration file within the bounds above.
pub fn compile_regex(src: &str) -> Result<Regex, String> {
    regex::RegexBuilder::new(src)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_DFA_SIZE_LIMIT)
        .nest_limit(REGEX_NEST_LIMIT)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => format!(
                "regex {src:?} compiles to more than {} KiB; use literals (contains) for long alternations",
                REGEX_SIZE_LIMIT / 1024
            ),
            e => format!("invalid regex {src:?}: {e}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regexes_are_bounded_in_size_and_nesting() {
        assert!(compile_regex(r"dial tcp (?P<addr>[0-9.]+:6379)").is_ok());
        assert!(compile_regex(r"\w{40}").is_ok());
        assert!(compile_regex(r"[0-9a-f]{4000}").is_ok());
        // Fine under the crate's 10 MiB default, refused under ours.
        assert!(
            regex::Regex::new(r"\w{160}").is_ok(),
            "the default takes it"
        );
        let e = compile_regex(r"\w{160}").unwrap_err();
        assert!(e.contains("compiles to more than 4096 KiB"), "{e}");
        let deep = format!("{}a{}", "(".repeat(100), ")".repeat(100));
        assert!(compile_regex(&deep).is_err());
    }

    #[test]
    fn truncation_keeps_char_boundaries_and_marks_the_cut() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("abcdef", 3), "abc…");
        // "é" is two bytes: a cut inside it moves back to the boundary.
        assert_eq!(truncate("aé", 2), "a…");
    }
}
