//! Helpers shared by the integration tests that start the binary.
#![allow(dead_code)]

use std::process::Child;

/// The sigwatch binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_sigwatch");

/// A free port on 127.0.0.1 (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed and reaped when dropped, so a failing test never
/// leaves a sigwatch running.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
