//! Scraping the daemon's metrics and CPU, and the statistics the report prints.

use super::*;

pub(crate) fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

pub(crate) async fn scrape(addr: SocketAddr, path: &str) -> String {
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
        return String::new();
    };
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = s
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await;
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw).await;
    raw.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// The CPU time of the server under measure: the replay's process, or the daemon's own count.
pub(crate) async fn server_cpu_seconds(args: &LoadgenArgs, replay: Option<&ReplayProcess>) -> f64 {
    match replay {
        Some(r) => r.cpu_seconds(),
        None => metric(
            &scrape(args.monitoring_addr, "/metrics").await,
            "process_cpu_seconds_total",
        ),
    }
}

/// The sum of the samples whose line starts with `name` (a name, or a name and labels).
pub(crate) fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits until `want` proxies saw `type_url` after `since` (matching `filter`), returning each first time.
pub(crate) async fn collect(
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    want: &BTreeSet<usize>,
    type_url: &str,
    since: Instant,
    filter: impl Fn(&Seen) -> bool,
    received: &mut Received,
    patience: Duration,
) -> (HashMap<usize, (Instant, u128)>, bool) {
    let mut got: HashMap<usize, (Instant, u128)> = HashMap::new();
    let deadline = tokio::time::Instant::now() + patience;
    while got.len() < want.len() {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(s)) => {
                received.add(&s);
                if s.type_url == type_url && s.at >= since && want.contains(&s.proxy) && filter(&s)
                {
                    got.entry(s.proxy).or_insert((s.at, s.wall_ms));
                }
            }
            _ => return (got, false),
        }
    }
    (got, true)
}

/// Waits until no response arrived for `quiet` (the proxies finished following the last push).
pub(crate) async fn settle(
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    quiet: Duration,
    received: &mut Received,
) {
    if quiet.is_zero() {
        return;
    }
    while let Ok(Some(s)) = tokio::time::timeout(quiet, rx.recv()).await {
        received.add(&s);
    }
}

/// When the daemon started the push just measured, triggered at `since_ms`; `None` when
/// replaying (the replay has no push start: its pushes are measured from the trigger).
pub(crate) async fn daemon_push_start(
    args: &LoadgenArgs,
    replaying: bool,
    since_ms: u128,
) -> Option<u128> {
    if replaying {
        None
    } else {
        push_start_after(args, since_ms).await
    }
}

/// When the daemon started the first push at or after `since_ms` (wall clock, from
/// /debug/push_status): the push a change written then caused. Not the most recent push: when
/// the slowest proxies take minutes, another push may have started since.
pub(crate) async fn push_start_after(args: &LoadgenArgs, since_ms: u128) -> Option<u128> {
    let body = scrape(args.monitoring_addr, "/debug/push_status").await;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["pushes"]
        .as_array()?
        .iter()
        .filter_map(|p| p["at_unix_ms"].as_u64().map(u128::from))
        .filter(|&at| at >= since_ms)
        .min()
}
