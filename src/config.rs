//! The `sigwatch.yaml` configuration file: settings that are awkward on a
//! command line (several Loki queries, file globs, state directory), in one
//! reviewed file. Command-line flags override it. Unknown keys are errors
//! with their line and column, like rule files.

use crate::rules::duration::Dur;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A configuration error, located in the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("{path}: {message}")]
    Io {
        /// File.
        path: String,
        /// OS error.
        message: String,
    },
    /// The file does not parse or has unknown keys.
    #[error("{path}:{line}:{column}: {message}")]
    At {
        /// File.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
}

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Consume Grafana Loki.
    #[serde(default)]
    pub loki: Option<LokiSection>,
    /// Follow log files matching these globs.
    #[serde(default)]
    pub files: Vec<String>,
    /// Directory for checkpoints.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
}

/// `loki:` settings; secrets only by file or environment, never inline.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LokiSection {
    /// Base URL.
    pub url: String,
    /// LogQL log queries, each its own stream of events.
    #[serde(default)]
    pub queries: Vec<String>,
    /// `X-Scope-OrgID`.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Basic-auth user (password from `password_file` or SIGWATCH_LOKI_PASSWORD).
    #[serde(default)]
    pub user: Option<String>,
    /// File holding the basic-auth password.
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// File holding a bearer token.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Extra CA certificate (PEM).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Use the websocket tail instead of polling.
    #[serde(default)]
    pub tail: bool,
    /// Entries per page (≤ 5000).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Query up to now minus this.
    #[serde(default)]
    pub lag: Option<Dur>,
    /// Polling period.
    #[serde(default)]
    pub interval: Option<Dur>,
    /// Where a fresh start begins, back from now.
    #[serde(default)]
    pub since: Option<Dur>,
}

/// Loads and validates a configuration file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
        path: name.clone(),
        message: e.to_string(),
    })?;
    parse(&name, &text)
}

/// Parses configuration text (`name` is used in errors).
pub fn parse(name: &str, text: &str) -> Result<Config, ConfigError> {
    let c: Config = serde_yaml_ng::from_str(text).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((1, 1));
        let msg = e.to_string();
        let message = msg
            .rfind(" at line ")
            .map_or(msg.clone(), |i| msg[..i].to_string());
        ConfigError::At {
            path: name.to_string(),
            line,
            column,
            message,
        }
    })?;
    if let Some(l) = &c.loki {
        if l.queries.is_empty() {
            return Err(ConfigError::At {
                path: name.to_string(),
                line: 1,
                column: 1,
                message: "loki: needs at least one entry in queries".into(),
            });
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_file_parses() {
        let c = parse(
            "s.yaml",
            "loki:\n  url: http://loki:3100\n  queries: ['{namespace=\"livekit\"}']\n  tenant: prod\n  lag: 15s\n  tail: true\nfiles: ['/var/log/pods/*/*/*.log']\nstate_dir: /var/lib/sigwatch\n",
        )
        .unwrap();
        let l = c.loki.unwrap();
        assert_eq!(l.queries.len(), 1);
        assert_eq!(l.lag, Some(Dur::secs(15)));
        assert!(l.tail);
        assert_eq!(c.files.len(), 1);
    }

    #[test]
    fn unknown_keys_and_inline_secrets_are_located_errors() {
        let e = parse(
            "s.yaml",
            "loki:\n  url: http://x\n  queries: ['{a=\"b\"}']\n  password: hunter2\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("s.yaml:4:") && e.contains("password"), "{e}");
        let e = parse("s.yaml", "loki:\n  url: http://x\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("queries"), "{e}");
    }
}
