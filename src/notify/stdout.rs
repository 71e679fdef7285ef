//! The default receiver: one JSON object per line on stdout (NDJSON), so
//! `sigwatch run | jq` and shell pipelines work.

use super::{BoxFuture, NotifyError, Receiver};
use crate::alert::Notification;
use std::io::Write;

/// Writes notifications as NDJSON to stdout.
#[derive(Debug, Default)]
pub struct Stdout;

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
            let mut line = serde_json::to_vec(n).map_err(|e| io(e.into()))?;
            line.push(b'\n');
            let mut out = std::io::stdout().lock();
            out.write_all(&line).map_err(io)?;
            out.flush().map_err(io)
        })
    }
}
