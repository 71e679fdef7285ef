//! `run --syslog ADDR`: syslog over UDP and TCP on one address, as
//! rsyslog's and syslog-ng's forwarding actions, `logger --server` and
//! network devices send it (RFC 5424 and 3164; TCP framed by octet
//! counting or line ends). Messages go into the push queue
//! (`ingest::queue`): a TCP connection waits for room — its sender is slowed
//! by TCP itself, nothing is lost — while a datagram that finds the queue
//! full is dropped and counted (UDP has no way to say "later").

use super::body::syslog::{self, Framer};
use super::queue::PushQueue;
use super::IngestError;
use std::sync::Arc;
use tokio::io::AsyncReadExt;

/// Messages taken from one read or one burst of datagrams at most, as
/// one block.
const BATCH: usize = 1000;
/// TCP connections served at once at most (more wait in the backlog).
const MAX_CONNECTIONS: usize = 1024;

/// Binds UDP and TCP on `addr` and serves both. Syslog has no credentials,
/// so an address other hosts can reach needs `--insecure-ingest`.
pub async fn start(addr: &str, insecure: bool, shared: Arc<PushQueue>) -> Result<(), IngestError> {
    if !crate::server::auth::is_loopback(addr) && !insecure {
        return Err(IngestError::Setup(format!(
            "--syslog {addr}: syslog carries no credentials, so anyone who can reach the port could push lines (and page): say --insecure-ingest, and let only your forwarders reach it (a NetworkPolicy, a firewall)"
        )));
    }
    let udp = tokio::net::UdpSocket::bind(addr)
        .await
        .map_err(|e| IngestError::io(format!("cannot listen on --syslog {addr} (UDP)"))(e))?;
    // The TCP listener on the UDP socket's port (an address ending in :0
    // gets one port for both).
    let bound = udp
        .local_addr()
        .map_err(|e| IngestError::io(format!("--syslog {addr}"))(e))?;
    let tcp = tokio::net::TcpListener::bind(bound)
        .await
        .map_err(|e| IngestError::io(format!("cannot listen on --syslog {bound} (TCP)"))(e))?;
    tracing::info!(addr = %bound, "Taking syslog (RFC 5424 and 3164) over UDP and TCP.");
    let mut ready = shared.ready.clone();
    tokio::spawn(async move {
        // Nothing is taken before the ingest log's batches are fed again.
        if ready.wait_for(|r| *r).await.is_err() {
            return;
        }
        tokio::spawn(udp_loop(udp, shared.clone()));
        tcp_loop(tcp, shared).await;
    });
    Ok(())
}

async fn udp_loop(sock: tokio::net::UdpSocket, shared: Arc<PushQueue>) {
    let mut buf = vec![0u8; 65_536];
    loop {
        let mut msgs = Vec::new();
        // Wait for one datagram, then take what else is already there.
        match sock.recv_from(&mut buf).await {
            Ok((n, _)) => msgs.push(syslog::parse(&buf[..n])),
            Err(e) => {
                tracing::debug!(error = %e, "syslog UDP receive failed");
                continue;
            }
        }
        while msgs.len() < BATCH {
            match sock.try_recv_from(&mut buf) {
                Ok((n, _)) => msgs.push(syslog::parse(&buf[..n])),
                Err(_) => break,
            }
        }
        let n = msgs.len() as u64;
        let labels = [("kind", "syslog_messages"), ("transport", "udp")];
        match shared
            .enqueue_lines(msgs, Some(std::time::Duration::ZERO))
            .await
        {
            Ok(()) => shared.add(&labels, n),
            Err(_) => {
                shared.add(&[("kind", "syslog_dropped"), ("transport", "udp")], n);
                tracing::warn!(messages = n, "The queue is full: syslog datagrams dropped (counted as syslog_dropped). Forward over TCP to be slowed down instead.");
            }
        }
    }
}

async fn tcp_loop(listener: tokio::net::TcpListener, shared: Arc<PushQueue>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::debug!(error = %e, "syslog TCP accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            connection(stream, &shared).await;
            drop(permit);
        });
    }
}

/// Reads one TCP connection to its end; a full queue stops the reading
/// (and so the sender) until there is room.
async fn connection(mut stream: tokio::net::TcpStream, shared: &PushQueue) {
    let max = crate::source::max_line_bytes();
    let mut framer = Framer::default();
    let mut buf = vec![0u8; 64 * 1024];
    let labels = [("kind", "syslog_messages"), ("transport", "tcp")];
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => 0,
            Ok(n) => n,
        };
        let mut frames = if n == 0 {
            framer.finish().into_iter().collect()
        } else {
            framer.push(&buf[..n], max)
        };
        while !frames.is_empty() {
            let rest = frames.split_off(frames.len().min(BATCH));
            let msgs: Vec<_> = frames.iter().map(|f| syslog::parse(f)).collect();
            let count = msgs.len() as u64;
            if shared.enqueue_lines(msgs, None).await.is_err() {
                // The loop is gone: the process is stopping.
                return;
            }
            shared.add(&labels, count);
            frames = rest;
        }
        if n == 0 {
            return;
        }
    }
}
