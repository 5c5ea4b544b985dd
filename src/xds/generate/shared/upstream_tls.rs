//! The TLS a cluster originates: a DestinationRule's `tls` (SIMPLE, MUTUAL, ISTIO_MUTUAL with
//! its SAN checks and automatic SNI), and Istio's automatic mTLS by endpoint label.

use super::tls::sds;
use crate::config::networking::{ClientTlsMode, ClientTlsSettings};
use crate::model::mesh::MeshTls;
use crate::xds::generate::encode::any;
use envoy_types::pb::envoy::config::core::v3::{
    DataSource, TransportSocket, UpstreamHttpProtocolOptions, data_source, transport_socket,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::SubjectAltNameMatcher;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::common_tls_context::CombinedCertificateValidationContext;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::subject_alt_name_matcher::SanType;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, SdsSecretConfig, TlsCertificate,
    UpstreamTlsContext, common_tls_context::ValidationContextType,
};
use envoy_types::pb::envoy::r#type::matcher::v3::StringMatcher;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;

/// Istio's automatic mTLS: ISTIO_MUTUAL to endpoints labelled `tlsMode: istio` (workloads with a
/// proxy), plaintext to the others.
pub(in crate::xds::generate) fn auto_mtls_sockets(
    identities: &[String],
    sni: String,
    defaults: &MeshTls,
) -> Vec<envoy_types::pb::envoy::config::cluster::v3::cluster::TransportSocketMatch> {
    use envoy_types::pb::envoy::config::cluster::v3::cluster::TransportSocketMatch;
    use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind as ValueKind};
    let istio = ClientTlsSettings {
        mode: ClientTlsMode::ISTIO_MUTUAL,
        sni,
        ..Default::default()
    };
    vec![
        TransportSocketMatch {
            name: "tlsMode-istio".into(),
            r#match: Some(Struct {
                fields: [(
                    "tlsMode".to_string(),
                    Value {
                        kind: Some(ValueKind::StringValue("istio".into())),
                    },
                )]
                .into(),
            }),
            transport_socket: tls_socket(&istio, identities, defaults),
        },
        TransportSocketMatch {
            name: "tlsMode-disabled".into(),
            r#match: Some(Struct::default()),
            transport_socket: Some(TransportSocket {
                name: "envoy.transport_sockets.raw_buffer".into(),
                config_type: Some(transport_socket::ConfigType::TypedConfig(any(
                    &envoy_types::pb::envoy::extensions::transport_sockets::raw_buffer::v3::RawBuffer::default(),
                ))),
            }),
        },
    ]
}

pub(in crate::xds::generate) fn file(path: &str) -> Option<DataSource> {
    (!path.is_empty()).then(|| DataSource {
        specifier: Some(data_source::Specifier::Filename(path.into())),
        ..Default::default()
    })
}

/// The system trust store of Istio's proxy image (Debian/Ubuntu and distroless layout), where
/// istio-agent finds the roots istiod's `system` CA path stands for. Rudder serves Envoy directly,
/// so the path is named here (docs/decisions.md).
pub(in crate::xds::generate) const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// A SAN of `kind` that must equal `name` exactly.
fn exact_san(kind: SanType, name: &str) -> SubjectAltNameMatcher {
    SubjectAltNameMatcher {
        san_type: kind as i32,
        matcher: Some(StringMatcher {
            match_pattern: Some(MatchPattern::Exact(name.to_string())),
            ignore_case: false,
        }),
        oid: String::new(),
    }
}

/// `subjectAltNames` of a DestinationRule: each name may be the server's DNS name or URI, as
/// istiod's untyped SAN match accepts either.
fn server_names(names: &[String]) -> Vec<SubjectAltNameMatcher> {
    names
        .iter()
        .flat_map(|name| [SanType::Dns, SanType::Uri].map(|kind| exact_san(kind, name)))
        .collect()
}

/// Server verification against roots served over SDS, pinned to `sans` when there are any.
fn sds_validation(
    roots: SdsSecretConfig,
    sans: Vec<SubjectAltNameMatcher>,
) -> ValidationContextType {
    if sans.is_empty() {
        return ValidationContextType::ValidationContextSdsSecretConfig(roots);
    }
    ValidationContextType::CombinedValidationContext(CombinedCertificateValidationContext {
        default_validation_context: Some(CertificateValidationContext {
            match_typed_subject_alt_names: sans,
            ..Default::default()
        }),
        validation_context_sds_secret_config: Some(roots),
        ..Default::default()
    })
}

/// istiod's automatic SNI and SAN validation for TLS origination (`ENABLE_AUTO_SNI`,
/// `VERIFY_CERTIFICATE_AT_CLIENT`, both on by default): SIMPLE or MUTUAL without `sni` sends the
/// request's host as SNI, and without `subjectAltNames` (and unless `insecureSkipVerify`) the
/// server's certificate must be for that host. Otherwise any publicly trusted certificate for
/// any name would do, and a service hosted by SNI would not answer.
pub(in crate::xds::generate) fn auto_sni_and_san(
    tls: &ClientTlsSettings,
) -> Option<UpstreamHttpProtocolOptions> {
    if !matches!(tls.mode, ClientTlsMode::SIMPLE | ClientTlsMode::MUTUAL) || !tls.sni.is_empty() {
        return None;
    }
    Some(UpstreamHttpProtocolOptions {
        auto_sni: true,
        auto_san_validation: tls.subject_alt_names.is_empty()
            && tls.insecure_skip_verify != Some(true),
        ..Default::default()
    })
}

/// Upstream TLS per DestinationRule `tls`. ISTIO_MUTUAL and `credentialName` take their secrets over SDS
/// (`default`/`ROOTCA` and `kubernetes://<name>`), as istiod configures them.
/// For ISTIO_MUTUAL, `identities` are the SPIFFE identities the server may present (the DestinationRule's
/// `subjectAltNames` win over them); none means any certificate from the mesh root. TLS 1.2 to
/// 1.3 as istiod's upstream contexts (Envoy's client default stops at 1.2); SIMPLE and MUTUAL
/// take MeshConfig `tlsDefaults`' curves and cipher suites.
pub(in crate::xds::generate) fn tls_socket(
    tls: &ClientTlsSettings,
    identities: &[String],
    defaults: &MeshTls,
) -> Option<TransportSocket> {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::TlsParameters;
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::tls_parameters::TlsProtocol;
    let mut common = CommonTlsContext {
        tls_params: Some(TlsParameters {
            tls_minimum_protocol_version: TlsProtocol::TlSv12 as i32,
            tls_maximum_protocol_version: TlsProtocol::TlSv13 as i32,
            ..Default::default()
        }),
        ..Default::default()
    };
    if matches!(tls.mode, ClientTlsMode::SIMPLE | ClientTlsMode::MUTUAL)
        && let Some(params) = common.tls_params.as_mut()
    {
        params.ecdh_curves = defaults.ecdh_curves.clone();
        params.cipher_suites = defaults.cipher_suites.clone();
    }
    match tls.mode {
        ClientTlsMode::DISABLE => return None,
        ClientTlsMode::ISTIO_MUTUAL => {
            common.tls_certificate_sds_secret_configs = vec![sds("default")];
            let sans = if tls.subject_alt_names.is_empty() {
                identities
            } else {
                tls.subject_alt_names.as_slice()
            };
            let sans = sans
                .iter()
                .map(|san| exact_san(SanType::Uri, san))
                .collect();
            common.validation_context_type = Some(sds_validation(sds("ROOTCA"), sans));
            common.alpn_protocols = vec!["istio".into()];
        }
        ClientTlsMode::SIMPLE | ClientTlsMode::MUTUAL => {
            // As istiod: the server is verified unless `insecureSkipVerify` says otherwise; without
            // `caCertificates` or a `credentialName`, against the system roots.
            let verify = tls.insecure_skip_verify != Some(true);
            let sans = server_names(&tls.subject_alt_names);
            let configmap = tls
                .credential_name
                .starts_with(crate::model::gateway_api::backend_tls::CONFIGMAP_CREDENTIAL);
            if configmap {
                // A CA bundle only (BackendTLSPolicy's `caCertificateRefs`), over SDS by its name.
                if verify {
                    common.validation_context_type =
                        Some(sds_validation(sds(&tls.credential_name), sans));
                }
            } else if !tls.credential_name.is_empty() {
                let name = format!("kubernetes://{}", tls.credential_name);
                if tls.mode == ClientTlsMode::MUTUAL {
                    common.tls_certificate_sds_secret_configs = vec![sds(&name)];
                }
                if verify {
                    common.validation_context_type =
                        Some(sds_validation(sds(&format!("{name}-cacert")), sans));
                }
            } else {
                if tls.mode == ClientTlsMode::MUTUAL {
                    common.tls_certificates = vec![TlsCertificate {
                        certificate_chain: file(&tls.client_certificate),
                        private_key: file(&tls.private_key),
                        ..Default::default()
                    }];
                }
                if verify {
                    let roots = if tls.ca_certificates.is_empty() {
                        SYSTEM_ROOTS
                    } else {
                        tls.ca_certificates.as_str()
                    };
                    common.validation_context_type = Some(
                        ValidationContextType::ValidationContext(CertificateValidationContext {
                            trusted_ca: file(roots),
                            match_typed_subject_alt_names: sans,
                            crl: file(&tls.ca_crl),
                            ..Default::default()
                        }),
                    );
                }
            }
        }
    }
    let ctx = UpstreamTlsContext {
        common_tls_context: Some(common),
        sni: tls.sni.clone(),
        ..Default::default()
    };
    Some(TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&ctx))),
    })
}
