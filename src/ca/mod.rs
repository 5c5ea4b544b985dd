//! The certificate authority: signs workload CSRs with the caller's SPIFFE identity, and issues the
//! control plane's own serving certificates. Root material comes from a plugged-in CA (`cacerts`), a
//! persisted self-signed root (`istio-ca-secret`), or a directory in file mode.

pub mod auth;
mod authority;
pub mod external;
pub mod issuer;
pub mod keys;
pub mod material;
pub mod metrics;
pub mod node_auth;
pub mod rootcert;
pub mod rotation;
pub mod server;
pub mod shared;

pub mod pb {
    tonic::include_proto!("istio.v1.auth");
}

pub use crate::model::identity::Identity;
pub use authority::{Authority, CaError, check_csr, not_after, serving_request, workload_ttl};

/// Who signs workload CSRs: Rudder's own CA, or an external CA through the Kubernetes CSR API.
pub enum Signer {
    Local(std::sync::Arc<shared::SharedAuthority>),
    External(std::sync::Arc<external::KubernetesRa>),
}

impl Signer {
    pub async fn sign_workload(
        &self,
        csr_pem: &str,
        caller: &Identity,
        requested_ttl_secs: i64,
    ) -> Result<Vec<String>, CaError> {
        match self {
            Signer::Local(authority) => {
                authority
                    .load()
                    .sign_workload(csr_pem, caller, requested_ttl_secs)
            }
            Signer::External(ra) => ra.sign_workload(csr_pem, caller, requested_ttl_secs).await,
        }
    }
}
