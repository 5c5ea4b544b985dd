//! Gateway: servers, ports and TLS settings; Envoy's names of the cipher suites.

use crate::config::common::Labels;
use serde::{Deserialize, Serialize};

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gateway {
    #[serde(default)]
    pub servers: Vec<Server>,
    #[serde(default)]
    pub selector: Labels,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Server {
    pub port: Option<Port>,
    #[serde(default)]
    pub bind: String,
    #[serde(default)]
    pub hosts: Vec<String>,
    pub tls: Option<ServerTlsSettings>,
    #[serde(default)]
    pub default_endpoint: String,
    #[serde(default)]
    pub name: String,
}

/// `Port` (Gateway servers) and `ServicePort` (ServiceEntry) share this shape.
#[serde_with::skip_serializing_none]
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Port {
    #[serde(default)]
    pub number: u32,
    #[serde(default)]
    pub protocol: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub target_port: u32,
}

istio_enum!(ServerTlsMode {
    PASSTHROUGH,
    SIMPLE,
    MUTUAL,
    AUTO_PASSTHROUGH,
    ISTIO_MUTUAL,
    OPTIONAL_MUTUAL
});

istio_enum!(TlsProtocol {
    TLS_AUTO,
    TLSV1_0,
    TLSV1_1,
    TLSV1_2,
    TLSV1_3
});

/// Cipher suites Envoy (BoringSSL) accepts by name, as istiod lists them (`ValidCipherSuites`).
pub const CIPHER_SUITES: &[&str] = &[
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA",
    "AES256-SHA",
    "DES-CBC3-SHA",
];

/// The cipher suites of `requested` Envoy is sent: each known name (or `ALL`) once, also with a
/// BoringSSL operator (`-`, `+`, `!`) in front or in an equal-preference group (`[a|b]`) of
/// known names. istiod passes other expressions through and Envoy, which parses the list
/// strictly, rejects the listener; they are dropped instead (validation warns about names it
/// does not know; docs/decisions.md).
pub fn envoy_cipher_suites(requested: &[String]) -> Vec<String> {
    let known = |name: &str| name == "ALL" || CIPHER_SUITES.contains(&name);
    let mut out: Vec<String> = Vec::new();
    for cs in requested {
        let bare = cs.trim_start_matches(['-', '+', '!']);
        let ok = match bare.strip_prefix('[').and_then(|g| g.strip_suffix(']')) {
            Some(group) => group.split('|').all(known),
            None => known(bare),
        };
        if ok && !out.contains(cs) {
            out.push(cs.clone());
        }
    }
    out
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerTlsSettings {
    #[serde(default)]
    pub https_redirect: bool,
    #[serde(default)]
    pub mode: ServerTlsMode,
    #[serde(default)]
    pub server_certificate: String,
    #[serde(default)]
    pub private_key: String,
    #[serde(default)]
    pub ca_certificates: String,
    #[serde(default)]
    pub ca_crl: String,
    #[serde(default)]
    pub credential_name: String,
    #[serde(default)]
    pub credential_names: Vec<String>,
    /// For mutual TLS: the Secret (or `configmap://` ConfigMap) holding the CA certificates,
    /// in place of the CA of `credentialName(s)`.
    #[serde(default)]
    pub ca_cert_credential_name: String,
    #[serde(default)]
    pub tls_certificates: Vec<TlsCertificate>,
    #[serde(default)]
    pub subject_alt_names: Vec<String>,
    #[serde(default)]
    pub verify_certificate_spki: Vec<String>,
    #[serde(default)]
    pub verify_certificate_hash: Vec<String>,
    pub min_protocol_version: Option<TlsProtocol>,
    pub max_protocol_version: Option<TlsProtocol>,
    #[serde(default)]
    pub cipher_suites: Vec<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsCertificate {
    #[serde(default)]
    pub server_certificate: String,
    #[serde(default)]
    pub private_key: String,
    #[serde(default)]
    pub ca_certificates: String,
}
