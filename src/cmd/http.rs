//! One HTTP/1.1 request to a running daemon's monitoring port (`rudder log`, `rudder what-if`):
//! plain TCP, the connection closed after the answer, a bearer token when the caller is not on
//! the daemon's host.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The status and body of `method path` at `addr` (`host:port`, `http://` allowed).
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> Result<(u16, String), String> {
    let host = addr.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(host).map_err(|e| format!("cannot reach {host}: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok();
    let authorization = token
        .map(|t| format!("Authorization: Bearer {}\r\n", t.trim()))
        .unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{authorization}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(|e| e.to_string())?;
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{host}: not an HTTP answer"))?;
    Ok((status, body.to_string()))
}
