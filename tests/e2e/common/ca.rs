//! CA client helpers: a TLS channel trusting our root, CSRs, and CreateCertificate calls.
#![allow(dead_code)]

use rudder::ca::pb::IstioCertificateRequest;
use rudder::ca::pb::istio_certificate_service_client::IstioCertificateServiceClient;
use std::net::SocketAddr;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

/// A channel to the secure port that verifies the serving cert against `root_pem` and `domain`.
pub async fn channel(
    addr: SocketAddr,
    root_pem: &str,
    domain: &str,
    client_identity: Option<(&str, &str)>,
) -> Result<Channel, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(root_pem))
        .domain_name(domain);
    if let Some((chain, key)) = client_identity {
        tls = tls.identity(Identity::from_pem(chain, key));
    }
    Channel::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)?
        .connect()
        .await
}

/// An ECDSA P-256 key and a CSR for `sans` (URIs).
pub fn csr(sans: &[&str]) -> (String, String) {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.subject_alt_names = sans
        .iter()
        .map(|s| rcgen::SanType::URI((*s).try_into().unwrap()))
        .collect();
    (
        p.serialize_request(&key).unwrap().pem().unwrap(),
        key.serialize_pem(),
    )
}

pub async fn create(
    channel: Channel,
    csr: &str,
    token: Option<&str>,
    ttl_secs: i64,
) -> Result<Vec<String>, tonic::Status> {
    create_as(channel, csr, token, ttl_secs, None).await
}

/// CreateCertificate naming `impersonated` in the request metadata, as node-mode ztunnel does.
pub async fn create_as(
    channel: Channel,
    csr: &str,
    token: Option<&str>,
    ttl_secs: i64,
    impersonated: Option<&str>,
) -> Result<Vec<String>, tonic::Status> {
    create_with(channel, csr, token, ttl_secs, impersonated, None).await
}

/// CreateCertificate from a pod of cluster `cluster_id`, as istio-agent sends its `ClusterID`.
pub async fn create_in_cluster(
    channel: Channel,
    csr: &str,
    token: &str,
    cluster_id: &str,
) -> Result<Vec<String>, tonic::Status> {
    create_with(channel, csr, Some(token), 0, None, Some(cluster_id)).await
}

async fn create_with(
    channel: Channel,
    csr: &str,
    token: Option<&str>,
    ttl_secs: i64,
    impersonated: Option<&str>,
    cluster_id: Option<&str>,
) -> Result<Vec<String>, tonic::Status> {
    let mut client = IstioCertificateServiceClient::new(channel);
    let metadata = impersonated.map(|id| prost_types::Struct {
        fields: [(
            "ImpersonatedIdentity".to_string(),
            prost_types::Value {
                kind: Some(prost_types::value::Kind::StringValue(id.into())),
            },
        )]
        .into(),
    });
    let mut req = tonic::Request::new(IstioCertificateRequest {
        csr: csr.into(),
        validity_duration: ttl_secs,
        metadata,
    });
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    if let Some(id) = cluster_id {
        req.metadata_mut().insert("clusterid", id.parse().unwrap());
    }
    client
        .create_certificate(req)
        .await
        .map(|r| r.into_inner().cert_chain)
}

/// `openssl verify` of `leaf` against `root`, with `intermediates` untrusted: returns its output.
pub fn openssl_verify(dir: &std::path::Path, chain: &[String]) -> (bool, String) {
    let root = dir.join("root.pem");
    let leaf = dir.join("leaf.pem");
    let inter = dir.join("intermediates.pem");
    std::fs::write(&root, chain.last().unwrap()).unwrap();
    std::fs::write(&leaf, &chain[0]).unwrap();
    std::fs::write(&inter, chain[1..chain.len() - 1].join("")).unwrap();
    let mut cmd = std::process::Command::new("openssl");
    cmd.arg("verify").arg("-CAfile").arg(&root);
    if chain.len() > 2 {
        cmd.arg("-untrusted").arg(&inter);
    }
    let out = cmd.arg(&leaf).output().expect("openssl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// A root and an intermediate it signed, as `istioctl`, cert-manager or an external CA provide.
pub struct TwoLevelCa {
    pub root_pem: String,
    pub intermediate_pem: String,
    pub intermediate_params: rcgen::CertificateParams,
    pub intermediate_key: rcgen::KeyPair,
}

pub fn two_level_ca(root_name: &str, intermediate_name: &str) -> TwoLevelCa {
    let (root_pem, mut intermediates) = root_with_intermediates(root_name, &[intermediate_name]);
    let (intermediate_pem, intermediate_params, intermediate_key) = intermediates.remove(0);
    TwoLevelCa {
        root_pem,
        intermediate_pem,
        intermediate_params,
        intermediate_key,
    }
}

/// A root and one intermediate it signed per name (a cluster each, as one mesh's plugged-in CAs
/// are): the root's PEM, and each intermediate's PEM, parameters and key.
pub fn root_with_intermediates(
    root_name: &str,
    names: &[&str],
) -> (
    String,
    Vec<(String, rcgen::CertificateParams, rcgen::KeyPair)>,
) {
    let ca_params = |name: &str, usages: Vec<rcgen::KeyUsagePurpose>| {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name.push(rcgen::DnType::CommonName, name);
        p.key_usages = usages;
        p
    };
    use rcgen::KeyUsagePurpose::{CrlSign, DigitalSignature, KeyCertSign};
    let root_key = rcgen::KeyPair::generate().unwrap();
    let root_params = ca_params(root_name, vec![KeyCertSign, CrlSign]);
    let root = root_params.clone().self_signed(&root_key).unwrap();
    let intermediates = names
        .iter()
        .map(|name| {
            let key = rcgen::KeyPair::generate().unwrap();
            let params = ca_params(name, vec![KeyCertSign, CrlSign, DigitalSignature]);
            let cert = params
                .signed_by(&key, &rcgen::Issuer::new(root_params.clone(), &root_key))
                .unwrap();
            (cert.pem(), params, key)
        })
        .collect();
    (root.pem(), intermediates)
}
