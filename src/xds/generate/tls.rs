//! TLS contexts shared by sidecar inbound chains and gateway servers.

use super::cluster::sds;
use super::util::any;
use envoy_types::pb::envoy::config::core::v3::{TransportSocket, transport_socket};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, DownstreamTlsContext, common_tls_context::ValidationContextType,
};
use envoy_types::pb::google::protobuf::BoolValue;

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
