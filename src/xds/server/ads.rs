//! The ADS gRPC service: admits a stream (new-stream rate limit, authentication on the TLS port),
//! reads its first request, identifies the proxy, and hands the stream to its own task.

use super::delta::Delta;
use super::sotw::Sotw;
use super::stream::{ResponseStream, STREAM_BUFFER, StreamHandler, serve_stream};
use super::xds_server::XdsServer;
use crate::model::identity::{AuthError, Authenticate, Identity};
use crate::xds::proxy::Proxy;
use crate::xds::wire::{AdsHandler, AdsServer, MessageStream};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use tracing::{Instrument, info_span, warn};

/// How long a new stream waits for the rate limiter before it is refused.
const RATE_LIMIT_WAIT: Duration = Duration::from_secs(5);

/// The node metadata key of the proxy's cluster (`ISTIO_META_CLUSTER_ID`).
const CLUSTER_ID: &str = "CLUSTER_ID";

#[derive(Clone)]
pub struct AdsService {
    server: Arc<XdsServer>,
    /// Set on the TLS port: streams that present credentials are verified (istiod's XDS_AUTH).
    auth: Option<Arc<dyn Authenticate>>,
}

impl AdsService {
    /// The plaintext port: nobody is authenticated.
    pub fn new(server: Arc<XdsServer>) -> Self {
        AdsService { server, auth: None }
    }

    /// The TLS port: a bearer token or client certificate, when presented, must be valid, and gives
    /// the stream its identity; a stream that presents nothing is served without one.
    pub fn authenticated(server: Arc<XdsServer>, auth: Arc<dyn Authenticate>) -> Self {
        AdsService {
            server,
            auth: Some(auth),
        }
    }

    pub fn into_server(self) -> AdsServer<AdsService> {
        let max = self.server.limits.max_message_bytes;
        AdsServer::new(self, max)
    }

    /// Waits for the new-stream rate limiter (shared by both ports); refuses the stream if it
    /// stays over the limit.
    async fn admit(&self) -> Result<(), Status> {
        let Some(limiter) = &self.server.rate_limiter else {
            return Ok(());
        };
        if tokio::time::timeout(RATE_LIMIT_WAIT, limiter.until_ready())
            .await
            .is_err()
        {
            self.server.refuse("rate_limited");
            warn!("refusing an xDS stream: request rate limit exceeded");
            return Err(Status::resource_exhausted(
                "request rate limit exceeded; retry with backoff",
            ));
        }
        Ok(())
    }

    async fn caller<R>(&self, request: &Request<R>) -> Result<Option<Identity>, Status> {
        let Some(auth) = &self.auth else {
            return Ok(None);
        };
        let sent = crate::grpc::RequestCredentials::of(request);
        auth.identify(sent.credentials()).await.map_err(|e| {
            self.server.refuse("authentication");
            warn!(error = %e, "refusing xDS stream: authentication failed");
            match e {
                AuthError::Unavailable(_) => Status::unavailable(e.to_string()),
                _ => Status::unauthenticated(e.to_string()),
            }
        })
    }

    /// The proxy behind a stream; a node that is not Istio's is refused, logged and counted.
    fn identify(&self, peer: &str, node: Option<&Node>, mode: &str) -> Result<Arc<Proxy>, Status> {
        Proxy::from_node(node).map(Arc::new).map_err(|e| {
            self.server.refuse("bad_node");
            warn!(peer, mode, error = %e, "refusing xDS stream");
            Status::invalid_argument(e.to_string())
        })
    }

    /// What both RPCs do: admit the stream, read its first request, identify the proxy, then serve
    /// the stream on its own task.
    async fn open<H: StreamHandler>(
        &self,
        request: Request<MessageStream<H::Request>>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.admit().await?;
        // The connection is in use while this stream lives (see `idle`).
        let open = self
            .server
            .idle
            .stream_opened(request.local_addr(), request.remote_addr());
        let identity = self.caller(&request).await?;
        let (peer, first, inbound) = accept(request, self.server.limits.idle_timeout)
            .await
            .inspect_err(|e| self.server.stream_failed(e))?;
        let mut proxy = self.identify(&peer, H::node(&first), H::MODE)?;
        Arc::make_mut(&mut proxy).peer = peer.clone();
        // A proxy reporting an alias of a cluster is of that cluster (istiod's initConnection).
        if let Some(cluster) = proxy
            .metadata
            .get(CLUSTER_ID)
            .and_then(|alias| self.server.cluster_aliases.get(alias))
        {
            let cluster = cluster.clone();
            Arc::make_mut(&mut proxy)
                .metadata
                .insert(CLUSTER_ID.to_string(), cluster);
        }
        if let Some(identity) = identity {
            if let Err(reason) = node_matches_identity(&proxy, &identity) {
                self.server.refuse("identity_mismatch");
                warn!(peer, proxy = %proxy.id, identity = %identity.uri(), reason, "refusing xDS stream");
                return Err(Status::permission_denied(format!(
                    "authorization failed: {reason}"
                )));
            }
            let secrets_refused = match &self.auth {
                Some(auth) => match auth.secrets_refused(&identity).await {
                    Ok(answer) => answer,
                    // A gateway lives on its secrets: refuse the stream (fail closed) and let it
                    // reconnect and be asked again. A sidecar is served, without secrets.
                    Err(e) if proxy.proxy_type == crate::xds::proxy::ProxyType::Router => {
                        self.server.refuse("authorization_unavailable");
                        warn!(peer, proxy = %proxy.id, error = %e, "refusing xDS stream: cannot check the gateway's access to secrets");
                        return Err(Status::unavailable(e));
                    }
                    Err(e) => Some(format!("access to secrets could not be checked: {e}")),
                },
                None => None,
            };
            let proxy = Arc::make_mut(&mut proxy);
            proxy.identity = Some(identity);
            proxy.secrets_refused = secrets_refused;
        }
        // What the connection means elsewhere (a VM's WorkloadEntry registered): refused here,
        // the proxy is told why and retries.
        let observer = self.server.connection_observer.get().cloned();
        if let Some(observer) = &observer
            && let Err(e) = observer.connected(&proxy).await
        {
            self.server.refuse("registration");
            warn!(peer, proxy = %proxy.id, error = %e, "refusing xDS stream");
            return Err(Status::failed_precondition(e));
        }
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let span = info_span!("ads", proxy = %proxy.id, peer, mode = H::MODE);
        let left = proxy.clone();
        let stream = serve_stream::<H>(self.server.clone(), proxy, tx, first, inbound);
        tokio::spawn(
            async move {
                let _open = open;
                stream.await;
                if let Some(observer) = observer {
                    observer.disconnected(left);
                }
            }
            .instrument(span),
        );
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

impl AdsHandler for AdsService {
    async fn stream_aggregated_resources(
        &self,
        request: Request<MessageStream<crate::xds::wire::SotwRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.open::<Sotw>(request).await
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<MessageStream<DeltaDiscoveryRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.open::<Delta>(request).await
    }
}

/// As istiod: an authenticated stream may only speak for a node in its own namespace and, when the
/// node names one (`SERVICE_ACCOUNT`), with its own service account; otherwise a workload could ask
/// for another namespace's config by editing its node metadata.
fn node_matches_identity(proxy: &Proxy, identity: &Identity) -> Result<(), String> {
    if proxy.namespace != identity.namespace {
        return Err(format!(
            "node namespace {:?} is not the caller's namespace {:?}",
            proxy.namespace, identity.namespace
        ));
    }
    match proxy.metadata.get("SERVICE_ACCOUNT") {
        Some(sa) if !sa.is_empty() && *sa != identity.service_account => Err(format!(
            "node service account {sa:?} is not the caller's {:?}",
            identity.service_account
        )),
        _ => Ok(()),
    }
}

/// Reads a stream's first request (which must carry the node), within `wait`, and the peer
/// address.
async fn accept<R: prost::Message + Default>(
    request: Request<MessageStream<R>>,
    wait: Duration,
) -> Result<(String, R, MessageStream<R>), Status> {
    let peer = request
        .remote_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let mut inbound = request.into_inner();
    let first = tokio::time::timeout(wait, inbound.message())
        .await
        .map_err(|_| Status::deadline_exceeded(format!("no first request within {wait:?}")))?;
    match first? {
        Some(first) => Ok((peer, first, inbound)),
        None => Err(Status::cancelled("stream closed before the first request")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};

    fn proxy(namespace: &str, service_account: Option<&str>) -> Proxy {
        let fields = service_account
            .map(|sa| {
                (
                    "SERVICE_ACCOUNT".to_string(),
                    Value {
                        kind: Some(Kind::StringValue(sa.into())),
                    },
                )
            })
            .into_iter()
            .collect();
        Proxy::from_node(Some(&Node {
            id: format!("sidecar~10.0.0.1~app-1.{namespace}~{namespace}.svc.cluster.local"),
            metadata: Some(Struct { fields }),
            ..Default::default()
        }))
        .unwrap()
    }

    fn caller() -> Identity {
        Identity {
            trust_domain: "cluster.local".into(),
            namespace: "shop".into(),
            service_account: "web".into(),
        }
    }

    #[test]
    fn a_caller_speaks_only_for_nodes_of_its_own_namespace_and_account() {
        assert!(node_matches_identity(&proxy("shop", Some("web")), &caller()).is_ok());
        assert!(node_matches_identity(&proxy("shop", None), &caller()).is_ok());
        let other_ns = node_matches_identity(&proxy("bank", Some("web")), &caller());
        assert!(other_ns.unwrap_err().contains("\"bank\""));
        let other_sa = node_matches_identity(&proxy("shop", Some("admin")), &caller());
        assert!(other_sa.unwrap_err().contains("\"admin\""));
    }
}
