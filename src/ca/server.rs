//! `istio.v1.auth.IstioCertificateService/CreateCertificate`, served on the TLS port with xDS.

use super::auth::{AuthError, Authenticator};
use super::pb::istio_certificate_service_server::{
    IstioCertificateService, IstioCertificateServiceServer,
};
use super::pb::{IstioCertificateRequest, IstioCertificateResponse};
use super::{CaError, Identity};
use crate::ca::metrics::CaMetrics;
use crate::metrics::ReasonLabels;
use std::sync::Arc;
use tonic::{Request, Response, Status};
use tracing::{info, warn};

/// Largest CreateCertificate request accepted; a CSR is a few kilobytes.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

pub struct CaService {
    pub signer: crate::ca::Signer,
    pub auth: Arc<Authenticator>,
    pub metrics: Arc<CaMetrics>,
    /// Node-mode ztunnel's impersonation check; `None` (files mode): impersonation is refused.
    pub node_auth: Option<super::node_auth::NodeAuthorizer>,
}

impl CaService {
    pub fn into_server(self) -> IstioCertificateServiceServer<CaService> {
        IstioCertificateServiceServer::new(self).max_decoding_message_size(MAX_REQUEST_BYTES)
    }

    fn refuse(&self, reason: &str, status: Status) -> Status {
        self.metrics
            .csr_errors
            .get_or_create(&ReasonLabels {
                reason: reason.into(),
            })
            .inc();
        let istiod = match reason {
            "authentication" | "impersonation" => &self.metrics.authentication_failures,
            "csr" => &self.metrics.csr_parsing_errors,
            "identity" => &self.metrics.id_extraction_errors,
            _ => &self.metrics.csr_sign_errors,
        };
        istiod.inc();
        warn!(
            reason,
            error = status.message(),
            "certificate request refused"
        );
        status
    }

    async fn caller(
        &self,
        req: &Request<IstioCertificateRequest>,
    ) -> Result<super::node_auth::Caller, Status> {
        let sent = crate::grpc::RequestCredentials::of(req);
        match self.auth.identify_caller(sent.credentials()).await {
            Ok(Some(id)) => Ok(id),
            Ok(None) => Err(self.refuse(
                "authentication",
                Status::unauthenticated(AuthError::Missing.to_string()),
            )),
            Err(e @ AuthError::Unavailable(_)) => {
                Err(self.refuse("authentication", Status::unavailable(e.to_string())))
            }
            Err(e) => Err(self.refuse("authentication", Status::unauthenticated(e.to_string()))),
        }
    }
}

#[tonic::async_trait]
impl IstioCertificateService for CaService {
    async fn create_certificate(
        &self,
        req: Request<IstioCertificateRequest>,
    ) -> Result<Response<IstioCertificateResponse>, Status> {
        self.metrics.csr_count.inc();
        let caller = self.caller(&req).await?;
        let body = req.into_inner();
        let impersonated = body
            .metadata
            .as_ref()
            .and_then(|m| m.fields.get(super::node_auth::IMPERSONATED_IDENTITY))
            .and_then(|v| match &v.kind {
                Some(prost_types::value::Kind::StringValue(s)) if !s.is_empty() => Some(s.clone()),
                _ => None,
            });
        let identity: Identity = match impersonated {
            None => caller.identity,
            Some(requested) => {
                let allowed = match &self.node_auth {
                    Some(na) => na.authorize(&caller, &requested),
                    None => Err("impersonation needs the Kubernetes pod view".to_string()),
                };
                match allowed {
                    Ok(id) => id,
                    Err(why) => {
                        // As istiod: an opaque answer, the reason in the log.
                        warn!(caller = %caller.identity.uri(), requested, why, "impersonation refused");
                        return Err(self.refuse(
                            "impersonation",
                            Status::unauthenticated("request impersonation authentication failure"),
                        ));
                    }
                }
            }
        };
        match self
            .signer
            .sign_workload(&body.csr, &identity, body.validity_duration)
            .await
        {
            Ok(cert_chain) => {
                self.metrics.cert_issued.inc();
                info!(identity = %identity.uri(), "issued workload certificate");
                Ok(Response::new(IstioCertificateResponse { cert_chain }))
            }
            Err(e @ CaError::IdentityMismatch { .. }) => {
                Err(self.refuse("identity", Status::permission_denied(e.to_string())))
            }
            Err(e @ CaError::BadCsr(_)) => {
                Err(self.refuse("csr", Status::invalid_argument(e.to_string())))
            }
            Err(e) => Err(self.refuse("signing", Status::internal(e.to_string()))),
        }
    }
}

/// TLS for the secure gRPC port: our serving certificate; client certificates from our root are
/// verified when offered (workloads renewing with their current certificate), never required.
pub fn tls_config(
    chain: &[String],
    key_pem: &str,
    root_pem: &str,
) -> tonic::transport::ServerTlsConfig {
    tonic::transport::ServerTlsConfig::new()
        .identity(tonic::transport::Identity::from_pem(
            chain.join(""),
            key_pem,
        ))
        .client_ca_root(tonic::transport::Certificate::from_pem(root_pem))
        .client_auth_optional(true)
}
