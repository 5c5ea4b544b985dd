//! The tests' HTTP/1.1 client: hyper's, over plain TCP or any stream the test opened (TLS to a
//! gateway or the webhook). Tests about malformed or slow requests write their bytes by hand;
//! everything else asks through here.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// One request: `GET path` unless told otherwise.
#[derive(Clone, Default)]
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// The `Host` header; the address asked when empty.
    pub host: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub content_type: &'a str,
    pub body: &'a [u8],
}

impl<'a> Request<'a> {
    pub fn get(path: &'a str) -> Request<'a> {
        Request {
            method: "GET",
            path,
            ..Default::default()
        }
    }
}

/// A response: status, headers (names lowercase) and body.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `req` over `io` (one request, then the connection is closed): the status and body.
pub async fn send_over<S>(
    io: S,
    default_host: &str,
    req: &Request<'_>,
) -> Result<(u16, String), String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    send_over_full(io, default_host, req)
        .await
        .map(|a| (a.status, a.body))
}

/// [`send_over`], with the response's headers.
pub async fn send_over_full<S>(
    io: S,
    default_host: &str,
    req: &Request<'_>,
) -> Result<Answer, String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(conn);
    let host = if req.host.is_empty() {
        default_host
    } else {
        req.host
    };
    let mut builder = hyper::Request::builder()
        .method(if req.method.is_empty() {
            "GET"
        } else {
            req.method
        })
        .uri(req.path)
        .header(hyper::header::HOST, host);
    if !req.content_type.is_empty() {
        builder = builder.header(hyper::header::CONTENT_TYPE, req.content_type);
    }
    for (k, v) in req.headers {
        builder = builder.header(*k, *v);
    }
    let request = builder
        .body(Full::new(Bytes::copy_from_slice(req.body)))
        .map_err(|e| e.to_string())?;
    let answered = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok(Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    };
    let result = tokio::time::timeout(Duration::from_secs(10), answered)
        .await
        .map_err(|_| "no answer within 10 s".to_string())?;
    driver.abort();
    result
}

/// How an error that came before any byte was sent starts.
pub const CONNECT: &str = "cannot connect to ";

/// Connects to `addr` and sends `req`.
pub async fn send_async(addr: SocketAddr, req: &Request<'_>) -> Result<Answer, String> {
    let tcp = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| format!("{CONNECT}{addr} timed out"))?
        .map_err(|e| format!("{CONNECT}{addr}: {e}"))?;
    send_over_full(tcp, &addr.to_string(), req).await
}

/// [`send_full`]'s status and body.
pub fn send(addr: SocketAddr, req: &Request<'_>) -> Result<(u16, String), String> {
    send_full(addr, req).map(|a| (a.status, a.body))
}

/// [`send_async`] from any context, async tests included: on a thread of its own with its own
/// runtime.
pub fn send_full(addr: SocketAddr, req: &Request<'_>) -> Result<Answer, String> {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?
                .block_on(send_async(addr, req))
        })
        .join()
        .unwrap_or_else(|_| Err("the request thread panicked".into()))
    })
}
