//! Helpers shared by the tests that run the real binary as a process (`e2e.rs`, `scale.rs`):
//! a free port for its `--address`, a plain HTTP GET of its endpoints, the tail of its log.

// Each test crate includes this module and uses a subset of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The last 12,000 bytes of `s` (on a character boundary), for printing a process's log.
pub fn tail(s: &str) -> &str {
    let start = s.len().saturating_sub(12_000);
    let start = (start..s.len())
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(s.len());
    &s[start..]
}

/// A loopback port free at the time of the call (released again: a small race, acceptable in
/// tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// A minimal HTTP/1.1 GET with `Connection: close`: `(status code, body)`, or `None` if
/// nothing answers.
pub fn http_get(address: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(address).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Some((code, body.to_string()))
}
