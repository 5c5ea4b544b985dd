//! `rudder log [LEVEL]`: shows or changes a running daemon's log levels, like `istioctl admin log`.
//! LEVEL is `ads:debug,default:info` (Istio scopes) or a tracing filter (`rudder::xds=debug,info`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Returns the daemon's answer, or an error a person can act on.
pub fn run(addr: &str, level: Option<&str>) -> Result<String, String> {
    let host = addr.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(host).map_err(|e| format!("cannot reach {host}: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let request = match level {
        None => format!("GET /debug/log HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        Some(l) => {
            let query: String = l
                .bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || b"-_.:".contains(&b) {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect();
            format!(
                "PUT /debug/log?level={query} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
        }
    };
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).map_err(|e| e.to_string())?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let ok = head.split_whitespace().nth(1) == Some("200");
    if ok {
        Ok(body.trim().to_string())
    } else {
        Err(body.trim().to_string())
    }
}
