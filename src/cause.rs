//! An error and its causes as one line, each said once. Library errors
//! (reqwest's, io's wrapped in ours) keep their cause as `source()`, and
//! their own message often says it already; printing one without the other
//! gives "error sending request" with no reason, printing both naively gives
//! "X: X". Every stage that logs or returns another crate's error uses this.

/// `e` and each of its sources, joined by ": ", skipping a source whose
/// text the line already holds.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrap(&'static str, Option<std::io::Error>);
    impl std::fmt::Display for Wrap {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for Wrap {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_ref().map(|e| e as _)
        }
    }

    #[test]
    fn each_cause_is_said_once() {
        let refused = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = Wrap("error sending request", Some(refused()));
        assert_eq!(chain(&e), "error sending request: connection refused");
        let e = Wrap("cannot listen: connection refused", Some(refused()));
        assert_eq!(chain(&e), "cannot listen: connection refused");
    }
}
