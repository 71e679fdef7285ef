//! Routing: which receivers get a notification, from `routes:` in
//! sigwatch.yaml (the first matching route wins unless it says `continue`;
//! nothing matched goes to `default`; command-line receivers get
//! everything). Part of delivery, so the dispatcher needs nothing from the
//! configuration file's model.

use crate::alert::Notification;
use serde::Deserialize;

/// A route.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// Conditions, all required: `severity`, `rule`, `group` or
    /// `labels.NAME`, each an anchored regex.
    #[serde(rename = "match", default)]
    pub match_: std::collections::BTreeMap<String, String>,
    /// Receiver names.
    pub receivers: Vec<String>,
    /// Keep trying later routes after this one matched.
    #[serde(default, rename = "continue")]
    pub continue_: bool,
}

/// A compiled route: conditions (key, anchored regex), receiver indices,
/// and whether later routes are still tried.
type CompiledRoute = (Vec<(String, regex::Regex)>, Vec<usize>, bool);

/// Compiled routes: which receivers (by index) get a notification.
#[derive(Debug, Clone, Default)]
pub struct Router {
    routes: Vec<CompiledRoute>,
    default: Vec<usize>,
    /// Receivers that get every notification (command-line shorthands).
    pub always: Vec<usize>,
}

impl Router {
    /// A router that sends everything to these receivers only.
    #[cfg(test)]
    pub(crate) fn with_always(mut self, always: Vec<usize>) -> Router {
        self.always = always;
        self
    }

    /// Compiles routes against receiver names (in lane order).
    pub fn new(
        names: &[String],
        routes: &[RouteSpec],
        default: &[String],
    ) -> Result<Router, String> {
        let idx = |n: &String| {
            names
                .iter()
                .position(|x| x == n)
                .ok_or_else(|| format!("route names unknown receiver {n:?}"))
        };
        let mut out = Router::default();
        for r in routes {
            let mut conds = Vec::new();
            for (k, v) in &r.match_ {
                if !matches!(k.as_str(), "severity" | "rule" | "group") && !k.starts_with("labels.")
                {
                    return Err(format!(
                        "route match key {k:?}: use severity, rule, group or labels.NAME"
                    ));
                }
                let re = crate::text::compile_regex(&format!("^(?:{v})$"))
                    .map_err(|e| format!("route match {k}: {e}"))?;
                conds.push((k.clone(), re));
            }
            let rs = r.receivers.iter().map(idx).collect::<Result<Vec<_>, _>>()?;
            out.routes.push((conds, rs, r.continue_));
        }
        out.default = default.iter().map(idx).collect::<Result<Vec<_>, _>>()?;
        Ok(out)
    }

    /// The receivers (indices) for a notification, in order, without repeats.
    pub fn select(&self, n: &Notification) -> Vec<usize> {
        let value = |k: &str| -> Option<&str> {
            match k {
                "severity" => Some(n.severity.as_str()),
                "rule" => Some(n.rule.as_str()),
                "group" => Some(n.group.as_str()),
                _ => k
                    .strip_prefix("labels.")
                    .and_then(|l| n.labels.get(l))
                    .map(String::as_str),
            }
        };
        let mut out: Vec<usize> = Vec::new();
        let mut matched = false;
        for (conds, rs, cont) in &self.routes {
            if conds
                .iter()
                .all(|(k, re)| value(k).is_some_and(|v| re.is_match(v)))
            {
                matched = true;
                for r in rs {
                    if !out.contains(r) {
                        out.push(*r);
                    }
                }
                if !cont {
                    break;
                }
            }
        }
        if !matched {
            out = self.default.clone();
        }
        for a in &self.always {
            if !out.contains(a) {
                out.push(*a);
            }
        }
        out
    }
}
