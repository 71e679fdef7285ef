//! The default receiver: notifications on stdout — one readable line each
//! on a terminal (time, state, severity, rule, subject, summary; coloured
//! unless `NO_COLOR` is set), one JSON object per line (NDJSON) on a pipe,
//! so `sigwatch run | jq` and shell pipelines work; `--output` chooses.

use super::{BoxFuture, NotifyError, Receiver};
use crate::alert::{AlertState, IncidentEvent, Notification};
use std::io::Write;
use std::sync::{Arc, OnceLock};

/// How notifications are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// One JSON object per line: the documented schema.
    #[default]
    Json,
    /// One readable line per notification; `color` adds ANSI colours.
    Text {
        /// Colour the state and severity.
        color: bool,
    },
}

impl Format {
    /// The format for `--output auto`: text with colours on a terminal
    /// (none when `NO_COLOR` is set, as <https://no-color.org> asks), NDJSON
    /// otherwise.
    pub fn for_stdout() -> Format {
        if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            Format::Text {
                color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            }
        } else {
            Format::Json
        }
    }
}

/// Something drawn on the terminal that printing must not tear (the
/// replay's progress bar): printing runs inside it.
pub type Suspend = Arc<dyn Fn(&mut dyn FnMut()) + Send + Sync>;

static SUSPEND: OnceLock<Suspend> = OnceLock::new();

/// Prints notifications through `suspend` from now on (once per process).
pub fn print_around(suspend: Suspend) {
    let _ = SUSPEND.set(suspend);
}

/// Writes notifications to stdout.
#[derive(Debug, Default)]
pub struct Stdout {
    format: Format,
}

impl Stdout {
    /// A stdout receiver printing in `format`.
    pub fn new(format: Format) -> Stdout {
        Stdout { format }
    }
}

const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const BLUE: &str = "\x1b[34m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// One readable line: time, state, severity, rule, subject, summary.
pub fn text_line(n: &Notification, color: bool) -> String {
    let paint = |code: &str, s: &str| {
        if color {
            format!("{code}{s}{RESET}")
        } else {
            s.to_string()
        }
    };
    let (state, state_color) = match (&n.incident, n.state) {
        (Some(i), _) => (
            match i.event {
                IncidentEvent::Opened => "OPENED",
                IncidentEvent::Updated => "UPDATED",
                IncidentEvent::Resolved => "CLOSED",
            },
            if i.event == IncidentEvent::Resolved {
                GREEN
            } else {
                RED
            },
        ),
        (None, AlertState::Resolved) => ("RESOLVED", GREEN),
        (None, AlertState::Firing) if n.repeat => ("REPEAT", RED),
        (None, AlertState::Firing) => ("FIRING", RED),
    };
    let severity_color = match n.severity.as_str() {
        "critical" => RED,
        "warning" => YELLOW,
        _ => BLUE,
    };
    let at = match n.state {
        AlertState::Resolved => n.ends_at.as_deref().unwrap_or(&n.starts_at),
        AlertState::Firing => &n.starts_at,
    };
    // 2025-07-01T12:10:03.520Z → 2025-07-01 12:10:03Z
    let at = match (at.get(..10), at.get(11..19)) {
        (Some(d), Some(t)) => format!("{d} {t}Z"),
        _ => at.to_string(),
    };
    let summary = n
        .annotations
        .get("summary")
        .map(String::as_str)
        .unwrap_or(&n.title);
    // A resolution says it is over, and what it was: the summary is the
    // condition's, written while it held.
    let summary = match (n.state, &n.incident) {
        (AlertState::Resolved, None) => {
            let lasted = match (n.starts_at.ns(), n.ends_at.as_ref().and_then(|e| e.ns())) {
                (Some(a), Some(b)) if b >= a => {
                    format!("over after {}", crate::duration::Dur(b - a))
                }
                _ => "over".to_string(),
            };
            format!("{lasted}; was: {summary}")
        }
        _ => summary.to_string(),
    };
    // Where the first sample is, for a file: what to open next.
    let at_line = match n.links.as_ref().and_then(|l| l.lines.first()) {
        Some(l) if n.state == AlertState::Firing => format!("  {}", paint(DIM, &format!("({l})"))),
        _ => String::new(),
    };
    format!(
        "{}  {}  {}  {}  {}  {}{at_line}",
        paint(DIM, &at),
        paint(&format!("{BOLD}{state_color}"), &format!("{state:<8}")),
        paint(severity_color, &format!("{:<8}", n.severity)),
        paint(BOLD, &n.rule),
        n.group,
        summary.replace('\n', " ")
    )
}

impl Receiver for Stdout {
    fn name(&self) -> &str {
        "stdout"
    }

    fn send<'a>(&'a self, n: &'a Notification) -> BoxFuture<'a, Result<(), NotifyError>> {
        Box::pin(async move {
            let io = |e: std::io::Error| {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    NotifyError::Gone {
                        receiver: "stdout".into(),
                    }
                } else {
                    NotifyError::Io {
                        receiver: "stdout".into(),
                        source: e,
                    }
                }
            };
            let mut line = match self.format {
                Format::Json => serde_json::to_vec(n).map_err(|e| io(e.into()))?,
                Format::Text { color } => text_line(n, color).into_bytes(),
            };
            line.push(b'\n');
            let mut result = Ok(());
            let mut write = || {
                let mut out = std::io::stdout().lock();
                result = out.write_all(&line).and_then(|()| out.flush());
            };
            match SUSPEND.get() {
                Some(suspend) => suspend(&mut write),
                None => write(),
            }
            result.map_err(io)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn note(state: AlertState) -> Notification {
        let mut annotations = BTreeMap::new();
        annotations.insert(
            "summary".to_string(),
            "NE_2 takes 100% of egress failures".to_string(),
        );
        Notification {
            state,
            rule: "egress.black_hole".into(),
            title: "One egress node takes most of the failed recordings".into(),
            severity: "critical".into(),
            group: "NE_2".into(),
            labels: BTreeMap::new(),
            annotations,
            starts_at: "2025-07-16T12:05:16.000Z".into(),
            ends_at: (state == AlertState::Resolved).then(|| "2025-07-16T12:40:00.000Z".into()),
            count: 10,
            first_seen: None,
            last_seen: None,
            top_groups: vec![],
            share: Some(1.0),
            samples: vec![],
            template: None,
            fingerprint: "f".into(),
            repeat: false,
            incident: None,
            links: None,
            origins: Vec::new(),
            at: 0,
        }
    }

    #[test]
    fn a_text_line_says_when_what_and_where() {
        assert_eq!(
            text_line(&note(AlertState::Firing), false),
            "2025-07-16 12:05:16Z  FIRING    critical  egress.black_hole  NE_2  NE_2 takes 100% of egress failures"
        );
        assert_eq!(
            text_line(&note(AlertState::Resolved), false),
            "2025-07-16 12:40:00Z  RESOLVED  critical  egress.black_hole  NE_2  over after 34m44s; was: NE_2 takes 100% of egress failures"
        );
        let coloured = text_line(&note(AlertState::Firing), true);
        assert!(coloured.contains("\x1b[1m\x1b[31mFIRING"), "{coloured:?}");
        assert!(!text_line(&note(AlertState::Firing), false).contains('\x1b'));
    }
}
