//! `rudder log [LEVEL]`: shows or changes a running daemon's log levels, like `istioctl admin log`.
//! LEVEL is `ads:debug,default:info` (Istio scopes) or a tracing filter (`rudder::xds=debug,info`).

/// Returns the daemon's answer, or an error a person can act on.
pub fn run(addr: &str, level: Option<&str>) -> Result<String, String> {
    let (method, path) = match level {
        None => ("GET", "/debug/log".to_string()),
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
            ("PUT", format!("/debug/log?level={query}"))
        }
    };
    let (status, body) = super::http::request(addr, method, &path, None)?;
    if status == 200 {
        Ok(body.trim().to_string())
    } else {
        Err(body.trim().to_string())
    }
}
