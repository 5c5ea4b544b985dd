//! What the gRPC servers (xDS and the CA) read alike from a tonic request: the caller's
//! credentials, handed to the domain layer as plain bytes and strings.

use crate::model::identity::Credentials;
use std::sync::Arc;
use tonic::Request;
use tonic::transport::CertificateDer;

/// A request's `authorization` header and verified client certificate chain, held so that
/// [`Credentials`] can borrow them.
pub struct RequestCredentials {
    authorization: Option<String>,
    cluster_id: Option<String>,
    certs: Option<Arc<Vec<CertificateDer<'static>>>>,
}

impl RequestCredentials {
    pub fn of<R>(request: &Request<R>) -> RequestCredentials {
        RequestCredentials {
            authorization: request
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            cluster_id: request
                .metadata()
                .get("clusterid")
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
                .map(str::to_string),
            certs: request.peer_certs(),
        }
    }

    /// The header as sent and the leaf of the chain TLS verified.
    pub fn credentials(&self) -> Credentials<'_> {
        Credentials {
            authorization: self.authorization.as_deref(),
            cluster_id: self.cluster_id.as_deref(),
            client_cert: self
                .certs
                .as_deref()
                .and_then(|c| c.first())
                .map(|c| c.as_ref()),
        }
    }
}
