//! The server's bounds: how many connections, how long a client may take,
//! how old a connection may get. Slow, idle or many clients must never take
//! from the process what its liveness needs (the probes keep a reserve).

/// Bounds of the HTTP server, so that clients — slow, idle, or many —
/// cannot take from the process what its liveness needs.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; past it new connections get only
    /// `/healthz` and `/readyz` (from the reserve) or are closed.
    pub max_connections: usize,
    /// Connections beyond `max_connections` still answered, for the
    /// probes only (one request each, which must arrive within
    /// `reserve_timeout`: a client that connects and waits is let go at
    /// once, so idle clients cannot hold the reserve).
    pub health_reserve: usize,
    /// How long a reserve connection may take to send its request.
    pub reserve_timeout: std::time::Duration,
    /// How long a client may take to send a request's headers, and how long
    /// a kept-alive connection may wait idle for its next request.
    pub header_timeout: std::time::Duration,
    /// Oldest a connection gets before it is closed (after its request in
    /// flight).
    pub max_age: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: default_max_connections(),
            health_reserve: 32,
            reserve_timeout: std::time::Duration::from_millis(300),
            header_timeout: std::time::Duration::from_secs(5),
            max_age: std::time::Duration::from_secs(120),
        }
    }
}

/// 256 connections, or a quarter of the descriptors the process may open
/// if that is less: the server can never take the descriptors the rest of
/// the process (inputs, state files, receivers) needs.
pub fn default_max_connections() -> usize {
    let nofile = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse::<usize>().ok())
        })
        .unwrap_or(1024);
    (nofile / 4).clamp(8, 256)
}
