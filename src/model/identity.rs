//! Workload identity (SPIFFE), and the two things the xDS server needs from whoever verifies and
//! certifies identities: authenticating a stream, and a certificate for an identity. The CA
//! implements both; defining them here keeps `xds` and `ca` from importing each other.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A workload identity: `spiffe://<trust domain>/ns/<namespace>/sa/<service account>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Identity {
    pub trust_domain: String,
    pub namespace: String,
    pub service_account: String,
}

impl Identity {
    pub fn uri(&self) -> String {
        format!(
            "spiffe://{}/ns/{}/sa/{}",
            self.trust_domain, self.namespace, self.service_account
        )
    }

    pub fn parse(uri: &str) -> Option<Identity> {
        let rest = uri.strip_prefix("spiffe://")?;
        let (td, path) = rest.split_once('/')?;
        let parts: Vec<&str> = path.split('/').collect();
        match parts.as_slice() {
            ["ns", ns, "sa", sa] if !td.is_empty() && !ns.is_empty() && !sa.is_empty() => {
                Some(Identity {
                    trust_domain: td.into(),
                    namespace: (*ns).into(),
                    service_account: (*sa).into(),
                })
            }
            _ => None,
        }
    }
}

/// Why a stream's credentials were not accepted.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AuthError {
    #[error("no credentials: send a bearer token or a client certificate")]
    Missing,
    #[error("token rejected: {0}")]
    Rejected(String),
    #[error("authentication backend unavailable: {0}")]
    Unavailable(String),
}

/// What a caller presented, in plain terms, so the domain does not depend on a transport.
#[derive(Debug, Clone, Copy, Default)]
pub struct Credentials<'a> {
    /// The `authorization` header's value, as sent.
    pub authorization: Option<&'a str>,
    /// The leaf of the client certificate chain TLS already verified, DER.
    pub client_cert: Option<&'a [u8]>,
    /// The cluster the caller says it runs in (istio-agent's `ClusterID` metadata): its token is
    /// reviewed by that cluster's API server.
    pub cluster_id: Option<&'a str>,
}

impl<'a> Credentials<'a> {
    /// The bearer token of the `authorization` header, if it carries a non-empty one.
    pub fn bearer(&self) -> Option<&'a str> {
        let v = self.authorization?;
        v.strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
    }
}

/// A boxed future, so the traits below can be used as trait objects.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Verifies the credentials a stream presents (bearer token, client certificate).
pub trait Authenticate: Send + Sync {
    /// `Ok(None)`: nothing was presented; `Err`: something was presented and is not valid.
    fn identify<'a>(
        &'a self,
        credentials: Credentials<'a>,
    ) -> BoxFuture<'a, Result<Option<Identity>, AuthError>>;

    /// Whether `id` may be sent the Kubernetes Secrets of its own namespace over SDS (gateway
    /// `credentialName`s), as istiod asks the API server: may its service account list secrets
    /// there? `Ok(Some(reason))` when it may not; `Err` when the answer could not be had.
    /// Without an API server (files mode) it may.
    fn secrets_refused<'a>(
        &'a self,
        id: &'a Identity,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        let _ = id;
        Box::pin(async { Ok(None) })
    }
}

/// Workload certificates for proxies that ask for them over SDS.
pub trait WorkloadCertificates: Send + Sync {
    /// The chain (leaf first) and private key for `id`, PEM.
    fn certificate(&self, id: &Identity) -> Result<(Arc<String>, Arc<String>), String>;
    /// The mesh's trust bundle now, PEM (it changes when the root rotates).
    fn root_pem(&self) -> std::sync::Arc<str>;
}
