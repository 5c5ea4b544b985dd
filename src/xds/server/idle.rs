//! The gRPC ports' connections: one that has had no stream open for the idle timeout is closed,
//! and so is one from which nothing has arrived for the keepalive's interval plus its timeout.
//! A new connection must open its first stream (TLS handshake and HTTP/2 preface included) within
//! the first-stream timeout, and one source address may hold only so many connections that have
//! not yet: a pod that opens sockets and says nothing costs a bounded number of descriptors for a
//! bounded time (loopback is exempt: the generator and tests on the daemon's own host).
//! Proxies keep their ADS stream open for the connection's whole life, so only a client that
//! connects and does nothing (or whose streams all ended) is idle; without this, every such
//! socket and its HTTP/2 state would be kept until the maximum connection age.
//!
//! Keepalive as istiod's gRPC server (grpc-go) judges it: after the interval without a frame from
//! the client the server pings, and the client is alive if *anything* arrives within the timeout,
//! not only the ping's answer. hyper's own keepalive waits for the answer itself, which queues
//! behind every response byte already on the way: a proxy still reading a large push on a slow
//! link or CPU (acknowledging, updating HTTP/2 windows) was dropped, reconnected and was sent it
//! all again. So hyper only sends the pings here, and this wrapper, which sees every byte read,
//! decides.
//!
//! Each accepted socket is wrapped (`Tracked`) and registered by its address pair, which tonic
//! also hands to every request (`TcpConnectInfo`), so a stream finds its connection's activity
//! without a connect-info type of our own (that would hide the peer address and certificates
//! tonic's `Request` reads from `TcpConnectInfo`).

use crate::activity::{Activity, InUse};
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tonic::transport::server::{Connected, TcpConnectInfo};

type Key = (SocketAddr, SocketAddr);

/// Deadlines are checked at most this often per connection (a deadline that just passed is
/// checked again after this, not in a loop).
const CHECK_GRANULARITY: Duration = Duration::from_millis(50);

/// Why a connection was closed (or refused), for `rudder_xds_errors_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// No stream open for the idle timeout (`idle_connection`).
    Idle,
    /// Nothing received for the keepalive's interval plus its timeout (`keepalive_timeout`).
    Silent,
    /// No first stream within the first-stream timeout (`first_stream_timeout`).
    NoFirstStream,
    /// Refused at accept: its source already holds the most connections without a stream yet
    /// (`too_many_pending_connections`).
    TooManyPending,
}

impl Closed {
    pub fn reason(self) -> &'static str {
        match self {
            Closed::Idle => "idle_connection",
            Closed::Silent => "keepalive_timeout",
            Closed::NoFirstStream => "first_stream_timeout",
            Closed::TooManyPending => "too_many_pending_connections",
        }
    }
}

/// How long a gRPC connection may go without a stream, without its first one, or without a byte
/// from its client, and how many connections without a stream yet one source may hold.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub idle_timeout: Duration,
    /// Keepalive interval plus timeout; None: a silent connection is kept.
    pub max_silence: Option<Duration>,
    pub first_stream_timeout: Duration,
    /// Per source address (not loopback); 0: no bound.
    pub max_pending_per_source: usize,
}

/// A live connection: its activity, and its source address while it has opened no stream yet
/// (counted in `pending`).
struct Live {
    activity: Arc<Activity>,
    pending: Option<IpAddr>,
}

/// The live connections of the gRPC ports and how long one may go without a stream, or without
/// a byte from its client.
pub struct IdleConnections {
    bounds: Bounds,
    live: Mutex<HashMap<Key, Live>>,
    /// Connections without a stream yet, by source address.
    pending: Mutex<HashMap<IpAddr, usize>>,
    closed: Box<dyn Fn(Closed) + Send + Sync>,
}

impl IdleConnections {
    pub fn new(bounds: Bounds, closed: impl Fn(Closed) + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(IdleConnections {
            bounds,
            live: Mutex::default(),
            pending: Mutex::default(),
            closed: Box::new(closed),
        })
    }

    /// Wraps the sockets `listener` accepts (for `serve_with_incoming`); a socket from a source
    /// that already holds `max_pending_per_source` connections without a stream is closed at once.
    pub fn incoming(
        self: &Arc<Self>,
        listener: TcpListener,
    ) -> impl tokio_stream::Stream<Item = std::io::Result<Tracked>> + use<> {
        let me = self.clone();
        futures::stream::unfold((listener, me), |(listener, me)| async move {
            loop {
                let accepted = match listener.accept().await {
                    Ok((tcp, peer)) => me.admit(tcp, peer.ip()).map(Ok),
                    Err(e) => Some(Err(e)),
                };
                if let Some(accepted) = accepted {
                    return Some((accepted, (listener, me)));
                }
            }
        })
    }

    /// Tracks `tcp` from `source`, or refuses it (`None`) when that source holds too many
    /// connections without a stream.
    fn admit(self: &Arc<Self>, tcp: TcpStream, source: IpAddr) -> Option<Tracked> {
        let counted = !source.is_loopback() && self.bounds.max_pending_per_source > 0;
        if counted {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            let n = pending.entry(source).or_default();
            if *n >= self.bounds.max_pending_per_source {
                drop(pending);
                (self.closed)(Closed::TooManyPending);
                tracing::debug!(%source, "refusing a gRPC connection: its source holds too many without a stream");
                return None;
            }
            *n += 1;
        }
        Some(self.track(tcp, counted.then_some(source)))
    }

    fn track(self: &Arc<Self>, tcp: TcpStream, pending: Option<IpAddr>) -> Tracked {
        let key = (
            tcp.local_addr().unwrap_or(([0, 0, 0, 0], 0).into()),
            tcp.peer_addr().unwrap_or(([0, 0, 0, 0], 0).into()),
        );
        let activity = Activity::new();
        if let Ok(mut live) = self.live.lock() {
            live.insert(
                key,
                Live {
                    activity: activity.clone(),
                    pending,
                },
            );
        }
        let now = Instant::now();
        let mut tracked = Tracked {
            inner: tcp,
            key,
            activity,
            registry: self.clone(),
            opened: now,
            last_read: now,
            check: Box::pin(tokio::time::sleep_until(now)),
            closed: None,
        };
        let next = tracked.next_check();
        tracked.check.as_mut().reset(next);
        tracked
    }

    /// No longer counts a connection from `source` as pending.
    fn settle(&self, source: Option<IpAddr>) {
        let Some(source) = source else {
            return;
        };
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = pending.get_mut(&source) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                pending.remove(&source);
            }
        }
    }

    /// Marks a stream open on the connection between `local` and `remote` until the guard drops.
    pub fn stream_opened(
        &self,
        local: Option<SocketAddr>,
        remote: Option<SocketAddr>,
    ) -> Option<InUse> {
        let key = (local?, remote?);
        let (activity, pending) = {
            let mut live = self.live.lock().ok()?;
            let entry = live.get_mut(&key)?;
            (entry.activity.clone(), entry.pending.take())
        };
        self.settle(pending);
        Some(activity.begin())
    }
}

/// An accepted socket that ends once its connection has been idle too long, and fails once its
/// client has been silent too long.
pub struct Tracked {
    inner: TcpStream,
    key: Key,
    activity: Arc<Activity>,
    registry: Arc<IdleConnections>,
    opened: Instant,
    /// When bytes last arrived from the client (or were seen waiting to be read).
    last_read: Instant,
    check: Pin<Box<Sleep>>,
    /// Why the connection was closed, once it was: HTTP/2 may poll again before it lets go, and
    /// each close is counted once.
    closed: Option<Closed>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let pending = self
            .registry
            .live
            .lock()
            .ok()
            .and_then(|mut live| live.remove(&self.key))
            .and_then(|l| l.pending);
        self.registry.settle(pending);
    }
}

impl Connected for Tracked {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.inner.connect_info()
    }
}

impl Tracked {
    /// Runs the checks that are due; `Some` closes the connection. Called only when the socket
    /// has nothing to read (`reading`), or when it cannot take more to write: then HTTP/2 stops
    /// reading until it can write, so bytes may be waiting unread, and waiting bytes count as
    /// having arrived.
    fn poll_checks(&mut self, cx: &mut Context<'_>, reading: bool) -> Option<Closed> {
        if self.closed.is_some() {
            return self.closed;
        }
        let bounds = self.registry.bounds;
        while self.check.as_mut().poll(cx).is_ready() {
            let now = Instant::now();
            if reading
                && !self.activity.ever_used()
                && now.duration_since(self.opened) >= bounds.first_stream_timeout
            {
                (self.registry.closed)(Closed::NoFirstStream);
                tracing::debug!(peer = %self.key.1, "closing a gRPC connection that opened no stream");
                self.closed = Some(Closed::NoFirstStream);
                return self.closed;
            }
            if reading && self.activity.idle_for(bounds.idle_timeout) {
                (self.registry.closed)(Closed::Idle);
                tracing::debug!(peer = %self.key.1, "closing an idle gRPC connection");
                self.closed = Some(Closed::Idle);
                return self.closed;
            }
            if let Some(max) = bounds.max_silence
                && now.duration_since(self.last_read) >= max
            {
                if reading || !self.bytes_waiting(cx) {
                    (self.registry.closed)(Closed::Silent);
                    tracing::debug!(peer = %self.key.1, silent_for = ?max, "closing a gRPC connection whose client sent nothing");
                    self.closed = Some(Closed::Silent);
                    return self.closed;
                }
                self.last_read = now;
            }
            let next = self.next_check().max(now + CHECK_GRANULARITY);
            self.check.as_mut().reset(next);
        }
        None
    }

    /// When a deadline of this connection next falls due: its first stream's, its idleness's
    /// (none while a stream is open; checked again after an idle timeout), its silence's.
    fn next_check(&self) -> Instant {
        let bounds = self.registry.bounds;
        let now = Instant::now();
        let mut next = match self.activity.idle_at(bounds.idle_timeout) {
            Some(at) => Instant::from_std(at),
            None => now + bounds.idle_timeout,
        };
        if !self.activity.ever_used() {
            next = next.min(self.opened + bounds.first_stream_timeout);
        }
        if let Some(max) = bounds.max_silence {
            next = next.min(self.last_read + max);
        }
        next
    }

    /// Whether the client has sent bytes not read yet (or closed its side).
    fn bytes_waiting(&self, cx: &mut Context<'_>) -> bool {
        let mut one = [0u8; 1];
        self.inner
            .poll_peek(cx, &mut ReadBuf::new(&mut one))
            .is_ready()
    }

    /// A write that could not proceed: the checks, then the write's own result.
    fn blocked<T>(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        match self.poll_checks(cx, false) {
            Some(Closed::Silent) => Poll::Ready(Err(self.silence_error())),
            Some(_) => Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into())),
            None => Poll::Pending,
        }
    }

    fn silence_error(&self) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "keepalive: nothing received from the client for {:?}",
                self.registry.bounds.max_silence.unwrap_or_default()
            ),
        )
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        // The check's timer only needs the task's waker while the task waits for the socket: a
        // read that gets bytes skips it (HTTP/2 reads a large request in several reads, and
        // polling the timer on each was a measurable part of reading it).
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        if read.is_ready() {
            if self.registry.bounds.max_silence.is_some() {
                self.last_read = Instant::now();
            }
            return read;
        }
        match self.poll_checks(cx, true) {
            Some(Closed::Silent) => Poll::Ready(Err(self.silence_error())),
            // End of stream: the HTTP/2 server closes the connection.
            Some(_) => Poll::Ready(Ok(())),
            None => Poll::Pending,
        }
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Pending => self.blocked(cx),
            ready => ready,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending => self.blocked(cx),
            ready => ready,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Pending => self.blocked(cx),
            ready => ready,
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::{Closed, IdleConnections, Tracked};
    use futures::StreamExt;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    const SILENCE: Duration = Duration::from_millis(300);

    /// A tracked server side and its client, with the closes it counted.
    async fn pair() -> (Tracked, TcpStream, Arc<Mutex<Vec<Closed>>>) {
        let closed = Arc::new(Mutex::new(Vec::new()));
        let counted = closed.clone();
        let registry = IdleConnections::new(
            super::Bounds {
                idle_timeout: Duration::from_secs(60),
                max_silence: Some(SILENCE),
                first_stream_timeout: Duration::from_secs(60),
                max_pending_per_source: 0,
            },
            move |c| counted.lock().unwrap().push(c),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut incoming = Box::pin(registry.incoming(listener));
        let client = TcpStream::connect(addr).await.unwrap();
        let server = incoming.next().await.unwrap().unwrap();
        (server, client, closed)
    }

    /// Sends a byte every 100 ms until dropped.
    fn chatter(mut client: TcpStream) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            while client.write_all(b"x").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    }

    /// A connection that opens no stream is closed at the first-stream deadline, counted once.
    #[tokio::test]
    async fn a_connection_without_a_first_stream_is_closed() {
        let closed = Arc::new(Mutex::new(Vec::new()));
        let counted = closed.clone();
        let registry = IdleConnections::new(
            super::Bounds {
                idle_timeout: Duration::from_secs(60),
                max_silence: None,
                first_stream_timeout: Duration::from_millis(300),
                max_pending_per_source: 0,
            },
            move |c| counted.lock().unwrap().push(c),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut incoming = Box::pin(registry.incoming(listener));
        let _client = TcpStream::connect(addr).await.unwrap();
        let mut server = incoming.next().await.unwrap().unwrap();
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(5), server.read(&mut buf))
            .await
            .expect("closed in time");
        assert_eq!(read.unwrap(), 0, "end of stream");
        assert_eq!(*closed.lock().unwrap(), vec![Closed::NoFirstStream]);
    }

    /// One source may hold only so many connections without a stream: the next is refused and
    /// counted, and a slot frees when one opens a stream or closes. Loopback is never bounded.
    #[tokio::test]
    async fn a_source_holds_a_bounded_number_of_connections_without_a_stream() {
        let closed = Arc::new(Mutex::new(Vec::new()));
        let counted = closed.clone();
        let registry = IdleConnections::new(
            super::Bounds {
                idle_timeout: Duration::from_secs(60),
                max_silence: None,
                first_stream_timeout: Duration::from_secs(60),
                max_pending_per_source: 2,
            },
            move |c| counted.lock().unwrap().push(c),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pod: std::net::IpAddr = "10.1.2.3".parse().unwrap();
        let mut held = Vec::new();
        for _ in 0..3 {
            let client = TcpStream::connect(addr).await.unwrap();
            let (tcp, _) = listener.accept().await.unwrap();
            held.push((client, registry.admit(tcp, pod)));
        }
        assert!(held[0].1.is_some() && held[1].1.is_some());
        assert!(held[2].1.is_none(), "the third is refused");
        assert_eq!(*closed.lock().unwrap(), vec![Closed::TooManyPending]);
        // A stream on the first frees its slot.
        let first = held[0].1.as_ref().unwrap();
        let _stream = registry.stream_opened(Some(first.key.0), Some(first.key.1));
        let client = TcpStream::connect(addr).await.unwrap();
        let (tcp, _) = listener.accept().await.unwrap();
        let fourth = registry.admit(tcp, pod);
        assert!(fourth.is_some());
        drop(client);
        // Closing the second frees another.
        held.remove(1);
        let _client = TcpStream::connect(addr).await.unwrap();
        let (tcp, _) = listener.accept().await.unwrap();
        assert!(registry.admit(tcp, pod).is_some());
        // Another source, and loopback, are not bounded by this one.
        let _client = TcpStream::connect(addr).await.unwrap();
        let (tcp, _) = listener.accept().await.unwrap();
        assert!(registry.admit(tcp, "10.9.9.9".parse().unwrap()).is_some());
        for _ in 0..5 {
            let _client = TcpStream::connect(addr).await.unwrap();
            let (tcp, _) = listener.accept().await.unwrap();
            assert!(registry.admit(tcp, "127.0.0.1".parse().unwrap()).is_some());
        }
    }

    #[tokio::test]
    async fn a_silent_client_is_closed_and_counted() {
        let (mut server, _client, closed) = pair().await;
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(5), server.read(&mut buf))
            .await
            .expect("closed in time");
        assert_eq!(read.unwrap_err().kind(), std::io::ErrorKind::TimedOut);
        let again = server.read(&mut buf).await;
        assert_eq!(again.unwrap_err().kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(
            *closed.lock().unwrap(),
            vec![Closed::Silent],
            "counted once"
        );
    }

    #[tokio::test]
    async fn any_byte_from_the_client_keeps_the_connection() {
        let (mut server, client, closed) = pair().await;
        let talking = chatter(client);
        let mut buf = [0u8; 16];
        let kept = tokio::time::timeout(SILENCE * 4, async {
            loop {
                assert!(server.read(&mut buf).await.unwrap() > 0);
            }
        })
        .await;
        assert!(kept.is_err(), "still reading when the time was up");
        assert!(closed.lock().unwrap().is_empty());
        talking.abort();
    }

    /// The server cannot write (the client reads nothing) and, blocked on writing, does not read.
    async fn write_until_blocked(server: &mut Tracked, within: Duration) -> std::io::Result<()> {
        let chunk = vec![0u8; 1 << 20];
        tokio::time::timeout(within, async {
            loop {
                server.write_all(&chunk).await?;
            }
        })
        .await
        .unwrap_or(Ok(()))
    }

    #[tokio::test]
    async fn a_client_that_neither_reads_nor_sends_is_closed_while_the_server_waits_to_write() {
        let (mut server, _client, closed) = pair().await;
        let written = write_until_blocked(&mut server, Duration::from_secs(5)).await;
        assert_eq!(written.unwrap_err().kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(*closed.lock().unwrap(), vec![Closed::Silent]);
    }

    #[tokio::test]
    async fn bytes_waiting_unread_keep_a_connection_blocked_on_writing() {
        let (mut server, client, closed) = pair().await;
        let talking = chatter(client);
        let written = write_until_blocked(&mut server, SILENCE * 4).await;
        assert!(written.is_ok(), "{written:?}");
        assert!(closed.lock().unwrap().is_empty());
        talking.abort();
    }
}
