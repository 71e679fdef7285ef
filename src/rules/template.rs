//! Annotation templates: `{{ group }} failed {{ count }} times`.
//!
//! Deliberately tiny: variable substitution only, no logic, so a template can
//! be validated when rules load and never fail at 3 a.m. while rendering.

use std::fmt;

/// Variables every template may use.
pub const VARIABLES: &[&str] = &[
    "rule",
    "title",
    "severity",
    "group",
    "partition",
    "count",
    "share",
    "duration",
    "groups",
    "population",
    "total",
    "top_group",
    "first_seen",
    "last_seen",
    "template",
    "level",
    "reason",
    "value",
];

/// A parsed template: literal text and variable references.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Var(String),
}

/// A template that does not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(pub String);

impl Template {
    /// Parses and validates a template. Variables are [`VARIABLES`] or
    /// `field.NAME` (a field of the first sample line).
    pub fn parse(src: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut rest = src;
        while let Some(start) = rest.find("{{") {
            if start > 0 {
                parts.push(Part::Text(rest[..start].to_string()));
            }
            let after = &rest[start + 2..];
            let Some(end) = after.find("}}") else {
                return Err(TemplateError(format!(
                    "unclosed '{{{{' in template {src:?}"
                )));
            };
            let name = after[..end].trim();
            let known = VARIABLES.contains(&name)
                || name
                    .strip_prefix("field.")
                    .or_else(|| name.strip_prefix("fields."))
                    .is_some_and(|f| !f.is_empty());
            if !known {
                return Err(TemplateError(format!(
                    "unknown template variable {name:?}; use one of {} or field.NAME",
                    VARIABLES.join(", ")
                )));
            }
            parts.push(Part::Var(name.to_string()));
            rest = &after[end + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        Ok(Template { parts })
    }

    /// Renders with `lookup` giving each variable's value; a missing value
    /// renders as an empty string, and one missing at the very end takes
    /// its separator with it (`draining: {{ field.error }}` on a line
    /// without an error reads `draining`, not `draining: `).
    pub fn render(&self, lookup: impl Fn(&str) -> Option<String>) -> String {
        let mut out = String::new();
        let mut empty_end = false;
        for p in &self.parts {
            match p {
                Part::Text(t) => {
                    out.push_str(t);
                    empty_end = false;
                }
                Part::Var(v) => {
                    let val = lookup(v).unwrap_or_default();
                    empty_end = val.is_empty();
                    out.push_str(&val);
                }
            }
        }
        if empty_end {
            let kept = out
                .trim_end_matches(|c: char| {
                    c.is_whitespace() || matches!(c, ':' | ',' | ';' | '-' | '—' | '=')
                })
                .len();
            out.truncate(kept);
        }
        out
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in &self.parts {
            match p {
                Part::Text(t) => f.write_str(t)?,
                Part::Var(v) => write!(f, "{{{{ {v} }}}}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_variables_and_fields() {
        let t = Template::parse("{{ group }} failed {{count}} times: {{ field.error }}").unwrap();
        let s = t.render(|v| match v {
            "group" => Some("ND_1".into()),
            "count" => Some("3".into()),
            "field.error" => Some("dial tcp".into()),
            _ => None,
        });
        assert_eq!(s, "ND_1 failed 3 times: dial tcp");
    }

    #[test]
    fn a_value_missing_at_the_end_takes_its_separator() {
        let t = Template::parse("{{ group }} failed to drain: {{ field.error }}").unwrap();
        let s = t.render(|v| (v == "group").then(|| "ND_1".to_string()));
        assert_eq!(s, "ND_1 failed to drain");
        let t = Template::parse("{{ group }}: {{ field.error }} (retrying)").unwrap();
        let s = t.render(|v| (v == "group").then(|| "ND_1".to_string()));
        assert_eq!(s, "ND_1:  (retrying)", "only at the end");
    }

    #[test]
    fn rejects_unknown_and_unclosed() {
        assert!(Template::parse("{{ nope }}").is_err());
        assert!(Template::parse("{{ group ").is_err());
        assert!(Template::parse("{{ field. }}").is_err());
    }
}
