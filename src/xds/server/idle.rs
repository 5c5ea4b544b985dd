//! Idle connections on the gRPC ports: a connection that has had no stream open for the idle
//! timeout is closed. Proxies keep their ADS stream open for the connection's whole life, so only a
//! client that connects and does nothing (or whose streams all ended) is affected; without this,
//! every such socket and its HTTP/2 state would be kept until the maximum connection age.
//!
//! Each accepted socket is wrapped (`Tracked`) and registered by its address pair, which tonic
//! also hands to every request (`TcpConnectInfo`), so a stream finds its connection's activity
//! without a connect-info type of our own (that would hide the peer address and certificates
//! tonic's `Request` reads from `TcpConnectInfo`).

use crate::activity::{Activity, InUse};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;
use tonic::transport::server::{Connected, TcpConnectInfo};

type Key = (SocketAddr, SocketAddr);

/// The live connections of the gRPC ports and how long one may go without a stream.
pub struct IdleConnections {
    timeout: Duration,
    live: Mutex<HashMap<Key, Arc<Activity>>>,
    /// Connections closed for being idle (`rudder_xds_errors_total{reason="idle_connection"}`).
    closed: Box<dyn Fn() + Send + Sync>,
}

impl IdleConnections {
    pub fn new(timeout: Duration, closed: impl Fn() + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(IdleConnections {
            timeout,
            live: Mutex::default(),
            closed: Box::new(closed),
        })
    }

    /// Wraps the sockets `listener` accepts (for `serve_with_incoming`).
    pub fn incoming(
        self: &Arc<Self>,
        listener: TcpListener,
    ) -> impl tokio_stream::Stream<Item = std::io::Result<Tracked>> + use<> {
        let me = self.clone();
        futures::stream::unfold((listener, me), |(listener, me)| async move {
            let accepted = listener.accept().await.map(|(tcp, _)| me.track(tcp));
            Some((accepted, (listener, me)))
        })
    }

    fn track(self: &Arc<Self>, tcp: TcpStream) -> Tracked {
        let key = (
            tcp.local_addr().unwrap_or(([0, 0, 0, 0], 0).into()),
            tcp.peer_addr().unwrap_or(([0, 0, 0, 0], 0).into()),
        );
        let activity = Activity::new();
        if let Ok(mut live) = self.live.lock() {
            live.insert(key, activity.clone());
        }
        Tracked {
            inner: tcp,
            key,
            activity,
            registry: self.clone(),
            check: Box::pin(tokio::time::sleep(self.timeout)),
        }
    }

    /// Marks a stream open on the connection between `local` and `remote` until the guard drops.
    pub fn stream_opened(
        &self,
        local: Option<SocketAddr>,
        remote: Option<SocketAddr>,
    ) -> Option<InUse> {
        let key = (local?, remote?);
        let activity = self.live.lock().ok()?.get(&key)?.clone();
        Some(activity.begin())
    }
}

/// An accepted socket that ends (reads end of stream) once its connection has been idle too long.
pub struct Tracked {
    inner: TcpStream,
    key: Key,
    activity: Arc<Activity>,
    registry: Arc<IdleConnections>,
    check: Pin<Box<Sleep>>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Ok(mut live) = self.registry.live.lock() {
            live.remove(&self.key);
        }
    }
}

impl Connected for Tracked {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.inner.connect_info()
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
            return read;
        }
        while self.check.as_mut().poll(cx).is_ready() {
            if self.activity.idle_for(self.registry.timeout) {
                (self.registry.closed)();
                tracing::debug!(peer = %self.key.1, "closing an idle gRPC connection");
                // End of stream: the HTTP/2 server closes the connection.
                return Poll::Ready(Ok(()));
            }
            let next = tokio::time::Instant::now() + self.registry.timeout / 2;
            self.check.as_mut().reset(next);
        }
        Poll::Pending
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
