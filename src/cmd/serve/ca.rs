//! The CA at start: its root and signer (self-signed, from a Secret, or external), and the daemon's own serving certificate.

use super::args::ServeArgs;
use super::metrics::DaemonMetrics;
use crate::ca::material::{self, Ttls};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tracing::info;

/// The CA as configured: who signs, the trust bundle everything distributes, and the control
/// plane's own serving certificate.
pub(super) struct CaSetup {
    pub(super) signer: crate::ca::Signer,
    /// Rudder's own CA (none with an external CA).
    pub(super) local: Option<Arc<crate::ca::shared::SharedAuthority>>,
    pub(super) source: Option<material::CaSource>,
    pub(super) roots: tokio::sync::watch::Receiver<Arc<str>>,
    /// Keeps an external CA's (fixed) trust bundle open for its followers.
    pub(super) _fixed_roots: Option<tokio::sync::watch::Sender<Arc<str>>>,
    pub(super) certificates: Arc<dyn crate::model::identity::WorkloadCertificates>,
    pub(super) serving: (Vec<String>, String),
}

pub(super) async fn ca_setup(
    args: &ServeArgs,
    kube_client: Option<&kube::Client>,
    trust_domain: &str,
    ttls: Ttls,
    (dns_names, ips): (&[String], &[std::net::IpAddr]),
    metrics: &DaemonMetrics,
) -> anyhow::Result<CaSetup> {
    let serving_ttl = Duration::from_secs(365 * 86400);
    if let Some(kind) = &args.external_ca {
        if kind != crate::ca::external::KUBERNETES_RA {
            anyhow::bail!(
                "EXTERNAL_CA={kind}: the only external CA is {} (the Kubernetes CSR API)",
                crate::ca::external::KUBERNETES_RA
            );
        }
        let client = kube_client
            .ok_or_else(|| anyhow::anyhow!("EXTERNAL_CA needs Kubernetes mode (the CSR API)"))?;
        let signer = args
            .k8s_signer
            .clone()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| anyhow::anyhow!("EXTERNAL_CA needs K8S_SIGNER, the signer to ask"))?;
        let root_file = if args.external_ca_root.exists() {
            args.external_ca_root.clone()
        } else {
            let dir = std::env::var_os(crate::k8s::SERVICE_ACCOUNT_DIR_ENV)
                .map(PathBuf::from)
                .unwrap_or_else(|| crate::k8s::SERVICE_ACCOUNT_DIR.into());
            info!(missing = %args.external_ca_root.display(), "external CA root not mounted; using the service account's ca.crt, as istiod");
            dir.join("ca.crt")
        };
        let root_pem = std::fs::read_to_string(&root_file)
            .map_err(|e| anyhow::anyhow!("external CA root {}: {e}", root_file.display()))?;
        if !root_pem.contains("BEGIN CERTIFICATE") {
            anyhow::bail!(
                "external CA root {} holds no certificate",
                root_file.display()
            );
        }
        metrics
            .ca
            .root_cert_expiry
            .set(crate::ca::not_after(&root_pem));
        let ra = Arc::new(crate::ca::external::KubernetesRa {
            client: client.clone(),
            signer: signer.clone(),
            root_pem: root_pem.clone(),
            default_ttl: ttls.default,
            max_ttl: ttls.max,
        });
        let serving = ra.serving_cert(dns_names, ips, serving_ttl).await?;
        info!(signer, root = %root_file.display(), "CA: workload certificates are signed by an external CA through the Kubernetes CSR API");
        let bundle: Arc<str> = Arc::from(root_pem.as_str());
        let (fixed, roots) = tokio::sync::watch::channel(bundle.clone());
        return Ok(CaSetup {
            signer: crate::ca::Signer::External(ra),
            local: None,
            source: None,
            roots,
            _fixed_roots: Some(fixed),
            certificates: Arc::new(crate::ca::issuer::ExternalRoots { root_pem: bundle }),
            serving,
        });
    }
    let (authority, source) = match kube_client {
        Some(client) => {
            let (authority, source) = material::from_kubernetes(
                client.clone(),
                &args.system_namespace,
                trust_domain,
                ttls,
            )
            .await?;
            (authority, Some(source))
        }
        None => (material::from_dir(&args.ca_dir, trust_domain, ttls)?, None),
    };
    let (root_expiry, chain_expiry) = authority.expiry_timestamps();
    metrics.ca.root_cert_expiry.set(root_expiry);
    metrics.ca.cert_chain_expiry.set(chain_expiry);
    let serving = authority.serving_cert(dns_names, ips, serving_ttl)?;
    let authority = crate::ca::shared::SharedAuthority::new(authority);
    Ok(CaSetup {
        signer: crate::ca::Signer::Local(authority.clone()),
        roots: authority.roots(),
        _fixed_roots: None,
        certificates: Arc::new(crate::ca::issuer::WorkloadIssuer::new(authority.clone())),
        local: Some(authority),
        source,
        serving,
    })
}
