//! TLS for the listener that serves the status page, so basic-auth
//! passwords and bearer tokens never cross the network in clear. The
//! certificate and key are PEM files (what cert-manager and a Kubernetes
//! TLS Secret mount); they are read again when either file changes (checked
//! at most once a second, at a handshake) and on SIGHUP, so a rotated
//! certificate is served without a restart. A pair that does not load — a
//! half-written rotation, a key that does not match — is logged and the
//! previous pair kept: a bad rotation never takes the page down.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How often a handshake may look at the files' modification times.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// A certificate or key that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file cannot be read or holds no certificate.
    #[error("TLS certificate {path}: {why}")]
    Cert {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// The key file cannot be read, holds no key, or does not match.
    #[error("TLS key {path}: {why}")]
    Key {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// A certificate without its key, or a key without its certificate.
    #[error("a TLS certificate needs its key and a key its certificate: give both --{what}-tls-cert and --{what}-tls-key ({what}.tls_cert_file and {what}.tls_key_file)")]
    Unpaired {
        /// The listener's flags' and configuration section's name.
        what: String,
    },
}

/// What a pair of files looked like when last read: (modified, length)
/// of each.
type Stamp = [(Option<SystemTime>, u64); 2];

fn stamp(cert: &Path, key: &Path) -> Stamp {
    let one = |p: &Path| std::fs::metadata(p).map_or((None, 0), |m| (m.modified().ok(), m.len()));
    [one(cert), one(key)]
}

struct Current {
    key: Arc<CertifiedKey>,
    stamp: Stamp,
    checked: Instant,
}

/// The certificate the listener serves, read again when its files change.
pub struct Reloading {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    current: Mutex<Current>,
}

impl std::fmt::Debug for Reloading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloading")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish()
    }
}

/// Reads a certificate chain and its key.
fn load(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let cert_err = |why: String| TlsError::Cert {
        path: cert.display().to_string(),
        why,
    };
    let key_err = |why: String| TlsError::Key {
        path: key.display().to_string(),
        why,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| cert_err(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| cert_err(e.to_string()))?;
    if chain.is_empty() {
        return Err(cert_err("no PEM certificate in the file".into()));
    }
    let der = PrivateKeyDer::from_pem_file(key).map_err(|e| key_err(e.to_string()))?;
    CertifiedKey::from_der(chain, der, provider).map_err(|e| key_err(e.to_string()))
}

impl Reloading {
    /// Reads the pair once (an error here is a startup error).
    pub fn new(cert: &Path, key: &Path) -> Result<Arc<Reloading>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let loaded = load(cert, key, &provider)?;
        Ok(Arc::new(Reloading {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            current: Mutex::new(Current {
                key: Arc::new(loaded),
                stamp: stamp(cert, key),
                checked: Instant::now(),
            }),
            provider,
        }))
    }

    /// Reads the pair again if it changed since it was last read (or
    /// always, when `force`); keeps the served pair when the new one does
    /// not load.
    pub fn refresh(&self, force: bool) {
        let Ok(mut c) = self.current.lock() else {
            return;
        };
        c.checked = Instant::now();
        let now = stamp(&self.cert, &self.key);
        if !force && now == c.stamp {
            return;
        }
        // Remembered even when the pair fails to load: a half-done
        // rotation is retried when the next file lands, not every second.
        c.stamp = now;
        match load(&self.cert, &self.key, &self.provider) {
            Ok(k) => {
                c.key = Arc::new(k);
                tracing::info!(cert = %self.cert.display(), "TLS certificate reloaded.");
            }
            Err(e) => {
                tracing::warn!(error = %e, "The new TLS certificate does not load; serving the previous one.");
            }
        }
    }

    /// The TLS configuration of a listener serving this certificate.
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let mut c = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Cert {
                path: self.cert.display().to_string(),
                why: e.to_string(),
            })?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        c.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(c))
    }

    /// Reads the pair again at every SIGHUP (beside the change check).
    pub fn reload_on_sighup(self: &Arc<Self>) {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            if let Ok(mut hup) = signal(SignalKind::hangup()) {
                let me = Arc::downgrade(self);
                tokio::spawn(async move {
                    while hup.recv().await.is_some() {
                        let Some(me) = me.upgrade() else { break };
                        tokio::task::spawn_blocking(move || me.refresh(true));
                    }
                });
            }
        }
    }
}

/// A listener's TLS: the certificate, read again when it changes, and the
/// configuration that serves it.
#[derive(Debug)]
pub struct Served {
    /// The certificate.
    pub reloading: Arc<Reloading>,
    /// What the acceptor takes.
    pub config: Arc<rustls::ServerConfig>,
}

impl Served {
    /// Reads the pair and builds the configuration (errors: at startup).
    pub fn load(cert: &Path, key: &Path) -> Result<Served, TlsError> {
        let reloading = Reloading::new(cert, key)?;
        let config = reloading.server_config()?;
        Ok(Served { reloading, config })
    }

    /// A listener's certificate and key, both or neither (`what`: the
    /// flags' and the configuration section's name, e.g. `web`); warns
    /// when the key is readable by others.
    pub fn pair(
        cert: Option<&Path>,
        key: Option<&Path>,
        what: &str,
    ) -> Result<Option<Served>, TlsError> {
        match (cert, key) {
            (None, None) => Ok(None),
            (Some(cert), Some(key)) => {
                crate::durable::warn_if_shared(key, &format!("{what} TLS key"));
                Served::load(cert, key).map(Some)
            }
            _ => Err(TlsError::Unpaired { what: what.into() }),
        }
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let due = self
            .current
            .lock()
            .is_ok_and(|c| c.checked.elapsed() >= CHECK_EVERY);
        if due {
            self.refresh(false);
        }
        self.current.lock().ok().map(|c| c.key.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let c = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        let (cp, kp) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cp, c.cert.pem()).unwrap();
        std::fs::write(&kp, c.signing_key.serialize_pem()).unwrap();
        (cp, kp)
    }

    #[test]
    fn a_pair_loads_a_bad_one_is_an_error_and_a_bad_rotation_keeps_the_old() {
        let d = tempfile::tempdir().unwrap();
        let (cp, kp) = pair(d.path(), "localhost");
        let r = Reloading::new(&cp, &kp).unwrap();
        let first = r.current.lock().unwrap().key.clone();
        // A key that does not match the certificate.
        let other = rcgen::generate_simple_self_signed(vec!["x".into()]).unwrap();
        std::fs::write(&kp, other.signing_key.serialize_pem()).unwrap();
        assert!(matches!(
            Reloading::new(&cp, &kp),
            Err(TlsError::Key { .. })
        ));
        r.refresh(true);
        assert!(Arc::ptr_eq(&first, &r.current.lock().unwrap().key));
        // A whole new pair is taken.
        let (cp, kp) = pair(d.path(), "localhost");
        r.refresh(true);
        assert!(!Arc::ptr_eq(&first, &r.current.lock().unwrap().key));
        std::fs::write(&cp, "not a certificate").unwrap();
        assert!(matches!(
            Reloading::new(&cp, &kp),
            Err(TlsError::Cert { .. })
        ));
        assert!(Reloading::new(&d.path().join("missing"), &kp).is_err());
    }
}
