//! External CA through the Kubernetes CSR API, as istiod's RA mode
//! (`EXTERNAL_CA=ISTIOD_RA_KUBERNETES_API`, `K8S_SIGNER=<signer>`): Rudder holds no signing key.
//! It checks a workload's CSR as it would sign it itself (the caller's identity only), then
//! creates a `CertificateSigningRequest` for the signer, approves it, waits for the signer's
//! certificate, verifies it chains to the configured root, and deletes the request. Its own
//! serving certificate comes the same way.

use super::authority::CaError;
use crate::model::identity::Identity;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use std::time::Duration;
use tracing::{debug, warn};

/// istiod's only external CA type.
pub const KUBERNETES_RA: &str = "ISTIOD_RA_KUBERNETES_API";
/// Where istiod's chart mounts the external CA's root.
pub const DEFAULT_ROOT_FILE: &str = "/etc/external-ca-cert/root-cert.pem";
/// How long a signer may take (istiod waits as long).
const SIGN_TIMEOUT: Duration = Duration::from_secs(60);
/// The shortest lifetime the API server accepts in `expirationSeconds`.
const MIN_EXPIRATION: Duration = Duration::from_secs(600);

const WORKLOAD_USAGES: &[&str] = &[
    "digital signature",
    "key encipherment",
    "server auth",
    "client auth",
];
const SERVING_USAGES: &[&str] = &["digital signature", "key encipherment", "server auth"];

pub struct KubernetesRa {
    pub client: kube::Client,
    /// `K8S_SIGNER`, e.g. `example.com/istio`.
    pub signer: String,
    /// The roots the signer's certificates must chain to (PEM), what proxies trust.
    pub root_pem: String,
    pub default_ttl: Duration,
    pub max_ttl: Duration,
}

impl KubernetesRa {
    /// A workload certificate for `caller`, after the checks Rudder's own CA makes.
    pub async fn sign_workload(
        &self,
        csr_pem: &str,
        caller: &Identity,
        requested_ttl_secs: i64,
    ) -> Result<Vec<String>, CaError> {
        super::authority::check_csr(csr_pem, caller)?;
        let ttl =
            super::authority::workload_ttl(requested_ttl_secs, self.default_ttl, self.max_ttl);
        self.sign(csr_pem, WORKLOAD_USAGES, "csr-workload-", ttl)
            .await
    }

    /// A serving certificate (chain, key) for the control plane's own names.
    pub async fn serving_cert(
        &self,
        dns_names: &[String],
        ips: &[std::net::IpAddr],
        ttl: Duration,
    ) -> Result<(Vec<String>, String), CaError> {
        let (key, params) = super::authority::serving_request(dns_names, ips)?;
        let csr = params
            .serialize_request(&key)
            .and_then(|r| r.pem())
            .map_err(|e| CaError::Sign(e.to_string()))?;
        let chain = self.sign(&csr, SERVING_USAGES, "csr-istiod-", ttl).await?;
        Ok((chain, key.serialize_pem()))
    }

    async fn sign(
        &self,
        csr_pem: &str,
        usages: &[&str],
        prefix: &str,
        ttl: Duration,
    ) -> Result<Vec<String>, CaError> {
        let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
        let request = CertificateSigningRequest {
            metadata: kube::api::ObjectMeta {
                generate_name: Some(prefix.into()),
                ..Default::default()
            },
            spec: CertificateSigningRequestSpec {
                request: ByteString(csr_pem.as_bytes().to_vec()),
                signer_name: self.signer.clone(),
                usages: Some(usages.iter().map(|u| u.to_string()).collect()),
                expiration_seconds: Some(
                    i32::try_from(ttl.max(MIN_EXPIRATION).as_secs()).unwrap_or(i32::MAX),
                ),
                ..Default::default()
            },
            status: None,
        };
        let created = api
            .create(&PostParams::default(), &request)
            .await
            .map_err(|e| CaError::Sign(format!("creating CertificateSigningRequest: {e}")))?;
        let name = created.metadata.name.clone().unwrap_or_default();
        let result = self.approve_and_wait(&api, &name).await;
        if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
            warn!(csr = %name, error = %e, "could not delete the CertificateSigningRequest");
        }
        let issued = result?;
        self.chain(&issued)
    }

    async fn approve_and_wait(
        &self,
        api: &Api<CertificateSigningRequest>,
        name: &str,
    ) -> Result<String, CaError> {
        let message = format!("approved by Rudder for signer {}", self.signer);
        let approval = serde_json::json!({"status": {"conditions": [{
            "type": "Approved", "status": "True", "reason": "RudderApproved", "message": message}]}});
        api.patch_approval(name, &PatchParams::default(), &Patch::Merge(&approval))
            .await
            .map_err(|e| {
                CaError::Sign(format!("approving CertificateSigningRequest {name}: {e}"))
            })?;
        debug!(csr = %name, signer = %self.signer, "CertificateSigningRequest approved");
        let settled = |csr: Option<&CertificateSigningRequest>| {
            csr.and_then(|c| c.status.as_ref()).is_some_and(|s| {
                s.certificate.is_some()
                    || s.conditions
                        .iter()
                        .flatten()
                        .any(|c| (c.type_ == "Denied" || c.type_ == "Failed") && c.status == "True")
            })
        };
        let done = tokio::time::timeout(
            SIGN_TIMEOUT,
            kube::runtime::wait::await_condition(api.clone(), name, settled),
        )
        .await
        .map_err(|_| {
            CaError::Sign(format!(
                "signer {} did not sign CertificateSigningRequest {name} within {}s",
                self.signer,
                SIGN_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|e| CaError::Sign(format!("watching CertificateSigningRequest {name}: {e}")))?;
        let status = done.and_then(|c| c.status).unwrap_or_default();
        if let Some(refusal) = status
            .conditions
            .iter()
            .flatten()
            .find(|c| (c.type_ == "Denied" || c.type_ == "Failed") && c.status == "True")
        {
            return Err(CaError::Sign(format!(
                "signer {} refused CertificateSigningRequest {name}: {} {}",
                self.signer,
                refusal.reason.as_deref().unwrap_or_default(),
                refusal.message.as_deref().unwrap_or_default()
            )));
        }
        let certificate = status.certificate.map(|c| c.0).unwrap_or_default();
        String::from_utf8(certificate)
            .map_err(|_| CaError::Sign(format!("CertificateSigningRequest {name}: not PEM")))
    }

    /// The signer's certificates, checked to chain to our root, with the root last (as istiod
    /// appends it when the signer leaves it out).
    fn chain(&self, issued: &str) -> Result<Vec<String>, CaError> {
        let mut chain = super::authority::pem_blocks(issued);
        if chain.is_empty() {
            return Err(CaError::Sign("the signer returned no certificate".into()));
        }
        for pair in chain.windows(2) {
            if !super::authority::issued(&pair[1], &pair[0]) {
                return Err(CaError::Sign(
                    "the signer's chain does not link up (a certificate not issued by the next)"
                        .into(),
                ));
            }
        }
        let roots = super::authority::pem_blocks(&self.root_pem);
        let top = chain.last().cloned().unwrap_or_default();
        if roots.contains(&top) {
            return Ok(chain);
        }
        let Some(root) = roots.iter().find(|r| super::authority::issued(r, &top)) else {
            return Err(CaError::Sign(
                "the signer's certificate does not chain to the configured external CA root".into(),
            ));
        };
        chain.push(root.clone());
        Ok(chain)
    }
}
