//! A rule file that does not parse, read again rule by rule: the YAML
//! parser stops at a file's first mistake, and five mistakes should not
//! take five runs. Each item of the top-level `rules:` list is parsed on
//! its own (its errors located in the file), and the file is parsed again
//! with the items in error blanked out, so the other rules are compiled
//! and checked in the same run.

use super::model::RuleFile;

/// The items of a rule file's top-level `rules:` block sequence, as line
/// ranges (0-based, end exclusive); None when the file has no such block.
fn rule_items(lines: &[&str]) -> Option<Vec<(usize, usize)>> {
    let start = lines
        .iter()
        .position(|l| l.trim_end() == "rules:" || l.starts_with("rules: #"))?;
    let blank = |l: &str| l.trim().is_empty() || l.trim_start().starts_with('#');
    let first = (start + 1..lines.len()).find(|&i| !blank(lines[i]))?;
    let indent = lines[first].len() - lines[first].trim_start().len();
    if !lines[first].trim_start().starts_with('-') {
        return None;
    }
    let mut items: Vec<(usize, usize)> = Vec::new();
    let mut end = lines.len();
    for (i, l) in lines.iter().enumerate().skip(first) {
        if blank(l) {
            continue;
        }
        let ind = l.len() - l.trim_start().len();
        let item = ind == indent && l.trim_start().starts_with('-');
        if item {
            if let Some(last) = items.last_mut() {
                last.1 = i;
            }
            items.push((i, lines.len()));
        } else if ind < indent || (ind == indent && indent == 0) {
            end = i;
            break;
        }
    }
    if let Some(last) = items.last_mut() {
        last.1 = end;
    }
    Some(items)
}

/// A rule file that does not parse, rule by rule: each rule's error
/// (line, column, message), and the file with the rules in error blanked
/// out (lines kept, so every other error is located where it is) when
/// that parses.
#[allow(clippy::type_complexity)]
pub(super) fn parse_each_rule(text: &str) -> (Vec<(usize, usize, String)>, Option<RuleFile>) {
    let lines: Vec<&str> = text.lines().collect();
    let Some(items) = rule_items(&lines) else {
        return (Vec::new(), None);
    };
    let mut errors = Vec::new();
    let mut bad = Vec::new();
    for (k, &(a, b)) in items.iter().enumerate() {
        let one = format!("rules:\n{}\n", lines[a..b].join("\n"));
        if let Err(e) = serde_yaml_ng::from_str::<RuleFile>(&one) {
            let (line, column) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((2, 1));
            // Line 1 is `rules:`; line 2 the item's first.
            let message = strip_location(&e.to_string());
            let message = match message.strip_prefix("rules[0]") {
                Some(rest) => format!("rules[{k}]{rest}"),
                None => message,
            };
            errors.push((a + line.max(2) - 1, column, message));
            bad.push((a, b));
        }
    }
    if bad.is_empty() {
        return (errors, None);
    }
    let rest: Vec<&str> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if bad.iter().any(|&(a, b)| i >= a && i < b) {
                ""
            } else {
                l
            }
        })
        .collect();
    let mut rest = rest.join("\n");
    if bad.len() == items.len() {
        // Every rule was in error: an empty list keeps the file's other keys.
        rest = rest.replacen("rules:", "rules: []", 1);
    }
    (errors, serde_yaml_ng::from_str::<RuleFile>(&rest).ok())
}

/// A parser's message without its location (given apart).
pub(super) fn strip_location(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}
