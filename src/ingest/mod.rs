//! Push ingest: lines the shippers of a cluster push to sigwatch, instead
//! of sigwatch reading them. One room, because a push is answered 2xx only
//! when sigwatch owns its lines, and everything that promise rests on is
//! here, in the order a push travels:
//!
//! 1. the listeners — HTTP for Loki push and OTLP/HTTP logs (`http`, with
//!    the credentials pushes must carry and TLS), syslog over UDP and TCP
//!    (`syslog`), none beyond loopback without a credential or an explicit
//!    `--insecure-ingest`;
//! 2. the bodies decoded into the entries the Loki source reads ([`body`]),
//!    bounded in size;
//! 3. the one queue of every listener, bounded in bytes (`queue`): a push
//!    that finds no room waits, then is told to retry;
//! 4. with a state directory, the write-ahead log ([`wal`]): a batch is on
//!    disk before it is queued and answered, and at a start what the log
//!    holds past the checkpoint is fed again before any listener takes a
//!    push.
//!
//! What comes out is a stream of [`Pushed`] batches, scanned, for the
//! detection loop; [`start`] is the whole of what `app` wires.

pub mod body;
mod http;
mod queue;
mod syslog;
pub mod wal;

pub use wal::Wal;

use crate::duration::Dur;
use crate::scan::{Hints, ScannerSlot};
use crate::server::Telemetry;
use crate::source::block::Block;
use crate::source::Source;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Batches on their way to the loop at most (each holds its bytes of the
/// queue's budget); also the most batches one fsync of the log covers.
const BATCHES: usize = 8;

/// Why push ingest cannot start.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// Options that do not fit together or a credential that cannot be
    /// used (the message says which and why).
    #[error("{0}")]
    Setup(String),
    /// A socket or a file of the ingest log.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl IngestError {
    fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> IngestError {
        let what = what.into();
        move |source| IngestError::Io { what, source }
    }
}

/// What push ingest listens on and how it is bounded (`run --ingest`,
/// `--syslog` and the `ingest:` section of the configuration).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The HTTP address (Loki push, OTLP/HTTP).
    pub http: Option<String>,
    /// The syslog address (UDP and TCP).
    pub syslog: Option<String>,
    /// Files of bearer tokens pushes must carry.
    pub token_files: Vec<PathBuf>,
    /// Users and bcrypt hashes pushes may carry instead.
    pub users: Vec<(String, String)>,
    /// Take pushes without credentials beyond loopback.
    pub insecure: bool,
    /// Largest body of one push, as sent.
    pub max_body: Option<usize>,
    /// Bound of the queued bytes.
    pub queue_bytes: Option<u32>,
    /// How long a push waits for room.
    pub queue_wait: Option<Dur>,
    /// The HTTP listener's certificate.
    pub tls_cert: Option<PathBuf>,
    /// Its key.
    pub tls_key: Option<PathBuf>,
    /// Where the write-ahead log lives (`wal/` under it).
    pub state_dir: Option<PathBuf>,
}

/// A batch of pushed lines for the detection loop.
pub struct Pushed {
    /// The newest entry's time (ns), for the consumer lag.
    pub newest: Option<i64>,
    /// The lines as a block.
    pub block: Block,
    /// What the scan found in it.
    pub hints: Hints,
    /// The streams the block's runs refer to.
    pub sources: Vec<Source>,
    /// Its bytes of the queue's budget, given back when the loop drops the
    /// batch (after processing it); none for a batch fed again from the log.
    pub held: Option<tokio::sync::OwnedSemaphorePermit>,
    /// Its end in the ingest log (with a state directory): once processed,
    /// the checkpoint may cover up to here.
    pub wal: Option<u64>,
}

/// Push ingest, started.
pub struct Started {
    /// The batches, in log order: first those the log held past the
    /// checkpoint, then every push taken.
    pub rx: mpsc::Receiver<Pushed>,
    /// What `/readyz` says of the source (`ingest ADDR, syslog ADDR`).
    pub what: String,
    /// The ingest log (with a state directory), for the checkpoint to trim.
    pub wal: Option<Arc<Wal>>,
}

/// Binds the listeners the options name, on one queue, and opens the
/// ingest log past `wal_at` (the checkpoint's position). The listeners are
/// bound now and take pushes once what the log held is fed again.
pub async fn start(
    o: &Options,
    slot: ScannerSlot,
    telemetry: Arc<Telemetry>,
    wal_at: Option<u64>,
) -> Result<Started, IngestError> {
    let (tx, rx) = mpsc::channel(BATCHES);
    let q = queue::PushQueue::open(o, slot, &tx, telemetry, wal_at)?;
    let mut what = Vec::new();
    if let Some(addr) = o.http.as_deref() {
        http::start(o, addr, q.queue.clone()).await?;
        what.push(format!("ingest {addr}"));
    }
    if let Some(addr) = o.syslog.as_deref() {
        syslog::start(addr, o.insecure, q.queue.clone()).await?;
        what.push(format!("syslog {addr}"));
    }
    q.queue.replay(q.again, q.ready);
    Ok(Started {
        rx,
        what: what.join(", "),
        wal: q.wal,
    })
}

/// The credentials pushes must carry: the token files' and the users'.
pub fn access(o: &Options) -> Result<crate::server::auth::Access, IngestError> {
    let mut tokens = Vec::new();
    for f in &o.token_files {
        crate::durable::warn_if_shared(f, "ingest token file");
        tokens.extend(
            crate::server::auth::tokens_from_file(f)
                .map_err(|e| IngestError::Setup(e.to_string()))?,
        );
    }
    crate::server::auth::Access::new(&tokens, &o.users)
        .map_err(|e| IngestError::Setup(e.to_string()))
}

/// The HTTP listener's TLS, when a certificate is given.
pub fn tls(o: &Options) -> Result<Option<crate::server::tls::Served>, IngestError> {
    crate::server::tls::Served::pair(o.tls_cert.as_deref(), o.tls_key.as_deref(), "ingest")
        .map_err(|e| IngestError::Setup(e.to_string()))
}
