//! TLS contexts shared by sidecar inbound chains and gateway servers.

use crate::xds::generate::encode::any;
use envoy_types::pb::envoy::config::core::v3::{TransportSocket, transport_socket};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::subject_alt_name_matcher::SanType;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::tls_parameters::TlsProtocol as EnvoyTlsProtocol;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, DownstreamTlsContext, SdsSecretConfig, SubjectAltNameMatcher, TlsParameters,
    common_tls_context::ValidationContextType,
};
use envoy_types::pb::envoy::r#type::matcher::v3::StringMatcher;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use envoy_types::pb::google::protobuf::BoolValue;

/// A SAN of `kind` that must equal `name` exactly.
pub fn exact_san(kind: SanType, name: &str) -> SubjectAltNameMatcher {
    SubjectAltNameMatcher {
        san_type: kind as i32,
        matcher: Some(StringMatcher {
            match_pattern: Some(MatchPattern::Exact(name.to_string())),
            ignore_case: false,
        }),
        oid: String::new(),
    }
}

/// `subjectAltNames` as istiod writes them (Envoy's untyped `match_subject_alt_names`, which
/// compares a name with every DNS, URI, email and IP SAN of the certificate): each name as an
/// exact match of each of those types.
pub fn any_san_of(names: &[String]) -> Vec<SubjectAltNameMatcher> {
    names
        .iter()
        .flat_map(|name| {
            [
                SanType::Dns,
                SanType::Uri,
                SanType::Email,
                SanType::IpAddress,
            ]
            .map(|kind| exact_san(kind, name))
        })
        .collect()
}

/// The cipher suites of the mesh's mTLS on sidecar inbound unless MeshConfig `meshMTLS` names
/// others (istiod's `SupportedCiphers`: no CBC, no CHACHA20).
pub const MESH_CIPHER_SUITES: &[&str] = &[
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-GCM-SHA256",
];

/// A TLS server's parameters as istiod's `BuildListenerTLSContext` writes them for SIMPLE,
/// MUTUAL and OPTIONAL_MUTUAL: MeshConfig `tlsDefaults` (curves, ciphers, TLS 1.3 minimum),
/// then the server's own `minProtocolVersion`, `cipherSuites` and `maxProtocolVersion` over
/// them; none when nothing is set.
pub fn server_tls_params_with_defaults(
    defaults: &crate::model::mesh::MeshTls,
    min: Option<crate::config::networking::TlsProtocol>,
    max: Option<crate::config::networking::TlsProtocol>,
    cipher_suites: &[String],
) -> Option<TlsParameters> {
    let mut params = server_tls_params(min, max, cipher_suites).unwrap_or_default();
    params.ecdh_curves = defaults.ecdh_curves.clone();
    if params.cipher_suites.is_empty() {
        params.cipher_suites = defaults.cipher_suites.clone();
    }
    if defaults.min_tls13 && params.tls_minimum_protocol_version == EnvoyTlsProtocol::TlsAuto as i32
    {
        params.tls_minimum_protocol_version = EnvoyTlsProtocol::TlSv13 as i32;
    }
    (params != TlsParameters::default()).then_some(params)
}

/// TLS parameters for a server's `minProtocolVersion`, `maxProtocolVersion` and `cipherSuites`,
/// or none when all are left to Envoy.
pub fn server_tls_params(
    min: Option<crate::config::networking::TlsProtocol>,
    max: Option<crate::config::networking::TlsProtocol>,
    cipher_suites: &[String],
) -> Option<TlsParameters> {
    use crate::config::networking::TlsProtocol as P;
    let version = |v: Option<P>| match v {
        Some(P::TLSV1_0) => EnvoyTlsProtocol::TlSv10 as i32,
        Some(P::TLSV1_1) => EnvoyTlsProtocol::TlSv11 as i32,
        Some(P::TLSV1_2) => EnvoyTlsProtocol::TlSv12 as i32,
        Some(P::TLSV1_3) => EnvoyTlsProtocol::TlSv13 as i32,
        Some(P::TLS_AUTO) | None => EnvoyTlsProtocol::TlsAuto as i32,
    };
    let params = TlsParameters {
        tls_minimum_protocol_version: version(min),
        tls_maximum_protocol_version: version(max),
        cipher_suites: crate::config::networking::envoy_cipher_suites(cipher_suites),
        ..Default::default()
    };
    (params != TlsParameters::default()).then_some(params)
}

/// A secret Envoy fetches over SDS on its ADS stream.
pub fn sds(name: &str) -> SdsSecretConfig {
    SdsSecretConfig {
        name: name.into(),
        sds_config: Some(super::util::ads()),
    }
}

/// The mesh's own TLS: the workload certificate (`default`) checked against the mesh root
/// (`ROOTCA`), both over SDS.
pub fn mesh_tls(alpn_protocols: Vec<String>) -> CommonTlsContext {
    CommonTlsContext {
        tls_certificate_sds_secret_configs: vec![sds(super::secret::WORKLOAD_CERT)],
        validation_context_type: Some(ValidationContextType::ValidationContextSdsSecretConfig(
            sds(super::secret::ROOT_CA),
        )),
        alpn_protocols,
        ..Default::default()
    }
}

/// The mesh's own TLS on a sidecar's inbound side, as istiod: a peer certificate must chain to
/// the mesh root and carry a SPIFFE identity of the mesh's trust domain or one of its
/// `trustDomainAliases` (istiod's `TrustDomainsForValidation`); another domain's workload with a
/// certificate of the same root is refused. TLS 1.2 (1.3 with `meshMTLS.minProtocolVersion`) to
/// 1.3 with the mesh's cipher suites, as istiod's `BuildInboundTLS`.
pub fn inbound_mesh_tls(
    alpn_protocols: Vec<String>,
    mesh: &crate::model::mesh::MeshSettings,
) -> CommonTlsContext {
    let trust_domain = mesh.trust_domain.as_str();
    let aliases = &mesh.trust_domain_aliases;
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::CertificateValidationContext;
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::common_tls_context::CombinedCertificateValidationContext;
    let mut domains: Vec<&str> = Vec::new();
    for td in std::iter::once(trust_domain).chain(aliases.iter().map(String::as_str)) {
        if !td.is_empty() && !domains.contains(&td) {
            domains.push(td);
        }
    }
    let sans = domains
        .into_iter()
        .map(|td| SubjectAltNameMatcher {
            san_type: SanType::Uri as i32,
            matcher: Some(StringMatcher {
                match_pattern: Some(MatchPattern::Prefix(format!("spiffe://{td}/"))),
                ignore_case: false,
            }),
            oid: String::new(),
        })
        .collect();
    CommonTlsContext {
        validation_context_type: Some(ValidationContextType::CombinedValidationContext(
            CombinedCertificateValidationContext {
                default_validation_context: Some(CertificateValidationContext {
                    match_typed_subject_alt_names: sans,
                    ..Default::default()
                }),
                validation_context_sds_secret_config: Some(sds(super::secret::ROOT_CA)),
                ..Default::default()
            },
        )),
        tls_params: Some(TlsParameters {
            tls_minimum_protocol_version: if mesh.mesh_mtls.min_tls13 {
                EnvoyTlsProtocol::TlSv13 as i32
            } else {
                EnvoyTlsProtocol::TlSv12 as i32
            },
            tls_maximum_protocol_version: EnvoyTlsProtocol::TlSv13 as i32,
            cipher_suites: if mesh.mesh_mtls.cipher_suites.is_empty() {
                MESH_CIPHER_SUITES.iter().map(|c| c.to_string()).collect()
            } else {
                mesh.mesh_mtls.cipher_suites.clone()
            },
            ..Default::default()
        }),
        ..mesh_tls(alpn_protocols)
    }
}

/// The mesh's TLS as proxyless gRPC takes it (istiod's `grpcgen`): certificates from the
/// bootstrap's certificate provider `default` (its `default` certificate and `ROOTCA` roots; gRPC
/// has no SDS), in the current fields and in the deprecated ones older gRPC reads, and the
/// peer's SANs in the untyped `match_subject_alt_names` gRPC checks (none on servers, where gRPC
/// checks none).
#[allow(deprecated)]
pub fn grpc_mesh_tls(sans: &[String]) -> CommonTlsContext {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::common_tls_context::{
        CertificateProviderInstance, CombinedCertificateValidationContext,
    };
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        CertificateProviderPluginInstance, CertificateValidationContext,
    };
    let current = |name: &str| CertificateProviderPluginInstance {
        instance_name: "default".into(),
        certificate_name: name.into(),
    };
    let deprecated = |name: &str| CertificateProviderInstance {
        instance_name: "default".into(),
        certificate_name: name.into(),
    };
    CommonTlsContext {
        tls_certificate_provider_instance: Some(current(super::secret::WORKLOAD_CERT)),
        tls_certificate_certificate_provider_instance: Some(deprecated(
            super::secret::WORKLOAD_CERT,
        )),
        validation_context_type: Some(ValidationContextType::CombinedValidationContext(
            CombinedCertificateValidationContext {
                default_validation_context: Some(CertificateValidationContext {
                    match_subject_alt_names: sans
                        .iter()
                        .map(|san| StringMatcher {
                            match_pattern: Some(MatchPattern::Exact(san.clone())),
                            ignore_case: false,
                        })
                        .collect(),
                    ca_certificate_provider_instance: Some(current(super::secret::ROOT_CA)),
                    ..Default::default()
                }),
                validation_context_certificate_provider_instance: Some(deprecated(
                    super::secret::ROOT_CA,
                )),
                ..Default::default()
            },
        )),
        ..Default::default()
    }
}

/// `common` as the server side of a TLS connection.
pub fn downstream_socket(common: CommonTlsContext, require_client: bool) -> TransportSocket {
    let ctx = DownstreamTlsContext {
        common_tls_context: Some(common),
        require_client_certificate: Some(BoolValue {
            value: require_client,
        }),
        ..Default::default()
    };
    TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&ctx))),
    }
}
