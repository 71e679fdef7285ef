//! Who may see what the server shows. The probes and the scrape are open
//! (`/healthz`, `/readyz`, `/metrics`): kubelet and Prometheus must reach
//! them without secrets, and they show counters, not log lines. Everything
//! else — the status page, its data, the report with its sample lines,
//! and any endpoint that writes — is guarded: a bearer token (several, for
//! rotation) or HTTP basic with bcrypt-hashed passwords, as Prometheus'
//! web configuration takes them.
//!
//! Tokens are compared as SHA-256 digests in constant time, so neither
//! their length nor a prefix leaks through timing; a user that does not
//! exist costs the same bcrypt verification as one that does. A client
//! that keeps failing is answered 429 for the rest of a window without any
//! verification, so a password guesser cannot spend the server's CPU, and
//! every failure is counted. A 401 never says which part was wrong.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// Failed attempts a client may make per [`WINDOW`] before it is answered
/// 429 until the window ends.
pub const MAX_FAILURES: u32 = 10;
/// The window of [`MAX_FAILURES`].
pub const WINDOW: Duration = Duration::from_secs(60);
/// Clients whose failures are remembered, at most (the oldest window is
/// forgotten first).
const MAX_CLIENTS: usize = 4096;
/// Successful basic-auth checks remembered, so a browser that sends its
/// credentials with every request pays bcrypt once, not per request.
const MAX_VERIFIED: usize = 64;

/// A credential configuration error (a file that cannot be read, a hash
/// bcrypt does not know).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A token file that cannot be read.
    #[error("cannot read the token file {path}: {source}")]
    TokenFile {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A token file without any token.
    #[error("the token file {0} holds no token (one per line)")]
    EmptyTokenFile(String),
    /// A user's hash that is not bcrypt.
    #[error("web user {0:?}: the password hash is not a bcrypt hash ($2a$/$2b$/$2y$…); make one with `htpasswd -nbBC 10 USER PASSWORD`")]
    BadHash(String),
}

/// The credentials the guarded endpoints accept.
#[derive(Default)]
pub struct Access {
    tokens: Vec<[u8; 32]>,
    users: Vec<(String, String)>,
    /// A hash of the users' cost that no password matches, for unknown
    /// users.
    dummy: Option<String>,
    verified: Mutex<Vec<[u8; 32]>>,
    failures: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("tokens", &self.tokens.len())
            .field(
                "users",
                &self.users.iter().map(|(u, _)| u).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// What a request's credentials came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A valid credential.
    Allowed,
    /// None, or a wrong one.
    Denied,
    /// The client failed too often; answered without checking.
    Limited,
}

fn digest(b: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b);
    h.finalize().into()
}

impl Access {
    /// Accepts these bearer tokens and these users (name → bcrypt hash).
    pub fn new(tokens: &[String], users: &[(String, String)]) -> Result<Access, AuthError> {
        for (u, h) in users {
            if !(h.starts_with("$2a$") || h.starts_with("$2b$") || h.starts_with("$2y$"))
                || bcrypt::verify("", h).is_err()
            {
                return Err(AuthError::BadHash(u.clone()));
            }
        }
        // The dummy costs what the first user's hash costs ($2b$CC$…).
        let cost = users
            .first()
            .and_then(|(_, h)| h.get(4..6)?.parse::<u32>().ok())
            .unwrap_or(10);
        let dummy = if users.is_empty() {
            None
        } else {
            bcrypt::hash("sigwatch: nobody has this password", cost).ok()
        };
        Ok(Access {
            dummy,
            tokens: tokens
                .iter()
                .filter(|t| !t.is_empty())
                .map(|t| digest(t.as_bytes()))
                .collect(),
            users: users.to_vec(),
            ..Access::default()
        })
    }

    /// Whether any credential is configured (without one the guarded
    /// endpoints are open, which `run` allows on loopback addresses or with
    /// `--insecure-ui` only).
    pub fn is_configured(&self) -> bool {
        !self.tokens.is_empty() || !self.users.is_empty()
    }

    /// Takes one attempt of the client's budget, before any verification
    /// (so concurrent guesses cannot all slip under the limit): false when
    /// the budget of this window is spent.
    fn take_attempt(&self, client: IpAddr, now: Instant) -> bool {
        let Ok(mut f) = self.failures.lock() else {
            return true;
        };
        if f.len() >= MAX_CLIENTS && !f.contains_key(&client) {
            f.retain(|_, (_, since)| now.duration_since(*since) < WINDOW);
            if f.len() >= MAX_CLIENTS {
                if let Some(oldest) = f.iter().min_by_key(|(_, (_, s))| *s).map(|(k, _)| *k) {
                    f.remove(&oldest);
                }
            }
        }
        let e = f.entry(client).or_insert((0, now));
        if now.duration_since(e.1) >= WINDOW {
            *e = (0, now);
        }
        if e.0 >= MAX_FAILURES {
            return false;
        }
        e.0 += 1;
        true
    }

    /// Gives back the attempt a valid credential took.
    fn give_back(&self, client: IpAddr) {
        if let Ok(mut f) = self.failures.lock() {
            if let Some(e) = f.get_mut(&client) {
                e.0 = e.0.saturating_sub(1);
                if e.0 == 0 {
                    f.remove(&client);
                }
            }
        }
    }

    /// Checks an `Authorization` header value of a request from `client`.
    /// bcrypt runs on a blocking thread.
    pub async fn check(&self, authorization: Option<&str>, client: IpAddr) -> Verdict {
        let client = client_key(client);
        if !self.take_attempt(client, Instant::now()) {
            return Verdict::Limited;
        }
        let ok = match authorization.and_then(|a| a.split_once(' ')) {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
                self.token_ok(token.trim())
            }
            Some((scheme, b64)) if scheme.eq_ignore_ascii_case("basic") => {
                self.basic_ok(b64.trim()).await
            }
            _ => false,
        };
        if ok {
            self.give_back(client);
            Verdict::Allowed
        } else {
            Verdict::Denied
        }
    }

    /// A bearer token: its digest against every configured one, each in
    /// constant time, all of them always.
    fn token_ok(&self, token: &str) -> bool {
        let d = digest(token.as_bytes());
        let mut any = subtle::Choice::from(0);
        for t in &self.tokens {
            any |= t.ct_eq(&d);
        }
        bool::from(any)
    }

    /// HTTP basic: the user's bcrypt hash (a user that does not exist is
    /// checked against a dummy hash, for the same cost).
    async fn basic_ok(&self, b64: &str) -> bool {
        use base64::Engine as _;
        let Some(pair) = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
        else {
            return false;
        };
        let Some((user, password)) = pair.split_once(':') else {
            return false;
        };
        let key = digest(pair.as_bytes());
        if self
            .verified
            .lock()
            .is_ok_and(|v| v.iter().any(|k| bool::from(k.ct_eq(&key))))
        {
            return true;
        }
        let known = self.users.iter().find(|(u, _)| u == user);
        let Some(hash) = known.map(|(_, h)| h.clone()).or_else(|| self.dummy.clone()) else {
            return false;
        };
        let password = password.to_string();
        let ok =
            tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash).unwrap_or(false))
                .await
                .unwrap_or(false)
                && known.is_some();
        if ok {
            if let Ok(mut v) = self.verified.lock() {
                if v.len() >= MAX_VERIFIED {
                    v.remove(0);
                }
                v.push(key);
            }
        }
        ok
    }
}

/// The address a client's failures are counted under: an IPv4 address as
/// it is (an IPv4-mapped IPv6 one as IPv4), an IPv6 address by its /64 —
/// one host holds a whole /64, and would otherwise get a fresh budget with
/// every address of it.
fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// Reads bearer tokens from a file: one per line, blank lines and `#`
/// comments skipped.
pub fn tokens_from_file(path: &std::path::Path) -> Result<Vec<String>, AuthError> {
    let text = std::fs::read_to_string(path).map_err(|source| AuthError::TokenFile {
        path: path.display().to_string(),
        source,
    })?;
    let tokens: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    if tokens.is_empty() {
        return Err(AuthError::EmptyTokenFile(path.display().to_string()));
    }
    Ok(tokens)
}

/// Whether an address to listen on is reachable from this host only.
pub fn is_loopback(addr: &str) -> bool {
    let host = match addr.rsplit_once(':') {
        Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']'),
        None => addr,
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip() -> IpAddr {
        "10.0.0.7".parse().unwrap()
    }

    #[tokio::test]
    async fn tokens_and_users_are_checked_and_failures_limited() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let a = Access::new(&["tok-1".into(), "tok-2".into()], &[("alice".into(), hash)]).unwrap();
        assert!(a.is_configured());
        assert_eq!(a.check(Some("Bearer tok-2"), ip()).await, Verdict::Allowed);
        assert_eq!(a.check(Some("bearer tok-1"), ip()).await, Verdict::Allowed);
        let basic = |u: &str, p: &str| {
            use base64::Engine as _;
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        };
        assert_eq!(
            a.check(Some(&basic("alice", "s3cret")), ip()).await,
            Verdict::Allowed
        );
        // Cached: the same again is allowed without bcrypt.
        assert_eq!(
            a.check(Some(&basic("alice", "s3cret")), ip()).await,
            Verdict::Allowed
        );
        for wrong in [
            None,
            Some("Bearer tok-3".to_string()),
            Some("Bearer tok-1x".to_string()),
            Some(basic("alice", "S3cret")),
            Some(basic("bob", "s3cret")),
            Some("Basic !!!".to_string()),
        ] {
            assert_eq!(
                a.check(wrong.as_deref(), ip()).await,
                Verdict::Denied,
                "{wrong:?}"
            );
        }
        for _ in 0..MAX_FAILURES {
            a.check(Some("Bearer nope"), ip()).await;
        }
        assert_eq!(a.check(Some("Bearer tok-1"), ip()).await, Verdict::Limited);
        let other: IpAddr = "10.0.0.8".parse().unwrap();
        assert_eq!(a.check(Some("Bearer tok-1"), other).await, Verdict::Allowed);
    }

    #[test]
    fn bad_hashes_and_token_files_are_errors() {
        let e = Access::new(&[], &[("alice".into(), "plain".into())]).unwrap_err();
        assert!(e.to_string().contains("alice"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("tokens");
        std::fs::write(&p, "# rotated monthly\n\n  tok-a \ntok-b\n").unwrap();
        assert_eq!(tokens_from_file(&p).unwrap(), ["tok-a", "tok-b"]);
        std::fs::write(&p, "# none\n").unwrap();
        assert!(tokens_from_file(&p).is_err());
        assert!(tokens_from_file(&d.path().join("missing")).is_err());
        assert!(!Access::default().is_configured());
    }

    #[tokio::test]
    async fn an_ipv6_host_shares_one_budget_across_its_64() {
        let a = Access::new(&["tok".into()], &[]).unwrap();
        for i in 0..MAX_FAILURES {
            let from: IpAddr = format!("2001:db8:1:2::{:x}", i + 1).parse().unwrap();
            assert_eq!(a.check(Some("Bearer no"), from).await, Verdict::Denied);
        }
        let next: IpAddr = "2001:db8:1:2:ffff::1".parse().unwrap();
        assert_eq!(a.check(Some("Bearer tok"), next).await, Verdict::Limited);
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(a.check(Some("Bearer tok"), other).await, Verdict::Allowed);
        let mapped: IpAddr = "::ffff:10.0.0.7".parse().unwrap();
        assert_eq!(client_key(mapped), ip());
    }

    #[test]
    fn loopback_addresses() {
        for a in [
            "127.0.0.1:9464",
            "[::1]:9464",
            "localhost:9464",
            "127.3.0.1:1",
        ] {
            assert!(is_loopback(a), "{a}");
        }
        for a in [
            "0.0.0.0:9464",
            "[::]:9464",
            "10.0.0.1:9464",
            "sigwatch:9464",
        ] {
            assert!(!is_loopback(a), "{a}");
        }
    }
}
