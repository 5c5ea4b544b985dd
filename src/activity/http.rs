//! The HTTP ports' connection loop (webhooks on 15017, monitoring and debug on 15014 and 8080):
//! every connection has deadlines, so a caller that connects and says nothing, or trickles a
//! request's headers a byte at a time (slowloris), holds a socket and a task for a bounded time:
//! the TLS handshake within `HANDSHAKE_TIMEOUT`, and then a request in flight, or the next
//! request's headers, within the idle timeout (a request counts from its headers' last byte).

use super::Activity;
use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span, warn};

/// Longest a client may take to finish the TLS handshake (or the idle timeout, if shorter).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Ends when a connection has had no request in flight for `idle`.
async fn idle_for(activity: &Activity, idle: Duration) {
    loop {
        match activity.idle_at(idle) {
            Some(at) if at <= std::time::Instant::now() => return,
            Some(at) => tokio::time::sleep_until(at.into()).await,
            None => tokio::time::sleep(idle).await,
        }
    }
}

/// Why `serve` closed a connection itself: `idle` (no request in flight for the idle timeout)
/// or `handshake_timeout`.
pub type OnClose = Arc<dyn Fn(&'static str) + Send + Sync>;

/// Serves `app` (HTTP/1.1 and HTTP/2, over TLS when `tls` is given) on `listener` until `cancel`
/// fires, then lets open requests finish for up to 5 s. Handlers find the peer address in the
/// request's `ConnectInfo<SocketAddr>`. `name` labels the connections' spans and log lines;
/// `on_close` hears of each connection a deadline closed.
pub async fn serve(
    name: &'static str,
    listener: TcpListener,
    app: Router,
    tls: Option<TlsAcceptor>,
    idle_timeout: Duration,
    on_close: OnClose,
    cancel: CancellationToken,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (tcp, peer) = tokio::select! {
            _ = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    warn!(server = name, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (tls, app, watcher) = (tls.clone(), app.clone(), graceful.watcher());
        let on_close = on_close.clone();
        tokio::spawn(
            async move {
                let activity = Activity::new();
                let tracked = activity.clone();
                let service = tower::service_fn(
                    move |mut req: axum::http::Request<hyper::body::Incoming>| {
                        req.extensions_mut().insert(ConnectInfo(peer));
                        let in_flight = tracked.begin();
                        let response = tower::ServiceExt::oneshot(app.clone(), req);
                        async move {
                            let r = response.await;
                            drop(in_flight);
                            r
                        }
                    },
                );
                let service = TowerToHyperService::new(service);
                let builder = auto::Builder::new(TokioExecutor::new());
                match tls {
                    Some(acceptor) => {
                        let stream = match tokio::time::timeout(
                            HANDSHAKE_TIMEOUT.min(idle_timeout),
                            acceptor.accept(tcp),
                        )
                        .await
                        {
                            Ok(Ok(stream)) => stream,
                            Ok(Err(e)) => return debug!(error = %e, "TLS handshake failed"),
                            Err(_) => {
                                on_close("handshake_timeout");
                                return debug!("TLS handshake timed out");
                            }
                        };
                        let conn =
                            builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                        tokio::select! {
                            r = watcher.watch(conn.into_owned()) => if let Err(e) = r {
                                debug!(error = %e, "connection ended with an error");
                            },
                            _ = idle_for(&activity, idle_timeout) => {
                                on_close("idle");
                                debug!("closing an idle connection");
                            }
                        }
                    }
                    None => {
                        let conn =
                            builder.serve_connection_with_upgrades(TokioIo::new(tcp), service);
                        tokio::select! {
                            r = watcher.watch(conn.into_owned()) => if let Err(e) = r {
                                debug!(error = %e, "connection ended with an error");
                            },
                            _ = idle_for(&activity, idle_timeout) => {
                                on_close("idle");
                                debug!("closing an idle connection");
                            }
                        }
                    }
                }
            }
            .instrument(info_span!("http-conn", server = name, %peer)),
        );
    }
    drop(listener);
    if tokio::time::timeout(Duration::from_secs(5), graceful.shutdown())
        .await
        .is_err()
    {
        warn!(server = name, "connections still open after 5s; closing");
    }
}

/// `tls` as an acceptor for `serve`.
pub fn acceptor(tls: Arc<rustls::ServerConfig>) -> TlsAcceptor {
    TlsAcceptor::from(tls)
}
