//! The access-log providers that stream entries over gRPC to a service of the registry, as istiod
//! builds them: `envoyOtelAls` (`openTelemetryLog`: Envoy's OpenTelemetry access logger, the body
//! Istio's text format or the provider's, its labels as attributes, Envoy's built-in labels off)
//! and `envoyHttpAls` / `envoyTcpAls` (Envoy's gRPC access-log service, HTTP and TCP flavours).

use crate::config::mesh::{GrpcAccessLogProvider, OtelAccessLogProvider};
use crate::xds::context::PushContext;
use crate::xds::generate::encode::any;
use crate::xds::generate::shared::util::outbound_cluster;
use envoy_types::pb::envoy::config::accesslog::v3::{AccessLog, AccessLogFilter, access_log};
use envoy_types::pb::envoy::config::core::v3::{
    ApiVersion, GrpcService, TypedExtensionConfig, grpc_service,
};
use envoy_types::pb::envoy::extensions::access_loggers::grpc::v3::{
    CommonGrpcAccessLogConfig, HttpGrpcAccessLogConfig, TcpGrpcAccessLogConfig,
};
use envoy_types::pb::envoy::extensions::access_loggers::open_telemetry::v3::OpenTelemetryAccessLogConfig;
use envoy_types::pb::opentelemetry::proto::common::v1::{
    AnyValue, KeyValue, KeyValueList, any_value,
};

/// Envoy's names for the loggers as istiod writes them, and istiod's default log names.
const LOGGER: &str = "envoy.access_loggers.open_telemetry";
const DEFAULT_LOG_NAME: &str = "otel_envoy_accesslog";
const HTTP_LOGGER: &str = "envoy.access_loggers.http_grpc";
const HTTP_LOG_NAME: &str = "http_envoy_accesslog";
const TCP_LOGGER: &str = "envoy.tcp_grpc_access_log";
const TCP_LOG_NAME: &str = "tcp_envoy_accesslog";
/// What the gRPC access-log service is sent of filter state unless the provider says otherwise:
/// the peer metadata istio-proxy's metadata exchange keeps.
const PEER_STATE: [&str; 2] = ["upstream_peer", "downstream_peer"];
/// The peer metadata istio-proxy keeps in filter state, logged as istiod asks.
const FILTER_STATE: [&str; 4] = [
    "wasm.upstream_peer",
    "wasm.upstream_peer_id",
    "wasm.downstream_peer",
    "wasm.downstream_peer_id",
];

fn text(value: String) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(value)),
    }
}

/// The access log for provider `p`; `None` (logged) when its service is not in the registry.
/// `istio_format` is the body when the provider sets none; `formatters` the command-operator
/// extensions a format using `%REQ_WITHOUT_QUERY%` needs (the access-log pass owns both).
pub(in crate::xds::generate) fn otel_access_log(
    ctx: &PushContext,
    p: &OtelAccessLogProvider,
    filter: Option<AccessLogFilter>,
    istio_format: &str,
    formatters: fn(bool) -> Vec<TypedExtensionConfig>,
) -> Option<AccessLog> {
    let collector = collector(ctx, &p.service, p.port)?;
    let format = p.log_format.as_ref();
    let body = format
        .and_then(|f| f.text.clone())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| istio_format.trim_end_matches('\n').to_string());
    let attributes = format
        .and_then(|f| f.labels.as_ref())
        .filter(|l| !l.is_empty())
        .map(|labels| KeyValueList {
            values: labels
                .iter()
                .map(|(k, v)| KeyValue {
                    key: k.clone(),
                    value: Some(text(
                        v.as_str().map_or_else(|| v.to_string(), str::to_string),
                    )),
                    ..Default::default()
                })
                .collect(),
        });
    let uses_req_without_query = body.contains("%REQ_WITHOUT_QUERY")
        || attributes.as_ref().is_some_and(|a| {
            a.values.iter().any(|kv| {
                matches!(&kv.value, Some(AnyValue { value: Some(any_value::Value::StringValue(v)) }) if v.contains("%REQ_WITHOUT_QUERY"))
            })
        });
    // istiod 1.30 still writes `common_config` (deprecated in Envoy 1.40, still accepted).
    #[allow(deprecated)]
    let config = OpenTelemetryAccessLogConfig {
        common_config: Some(CommonGrpcAccessLogConfig {
            log_name: if p.log_name.is_empty() {
                DEFAULT_LOG_NAME.into()
            } else {
                p.log_name.clone()
            },
            grpc_service: Some(collector),
            transport_api_version: ApiVersion::V3 as i32,
            filter_state_objects_to_log: FILTER_STATE.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }),
        disable_builtin_labels: true,
        body: Some(text(body)),
        attributes,
        formatters: formatters(uses_req_without_query),
        ..Default::default()
    };
    Some(AccessLog {
        name: LOGGER.into(),
        filter,
        config_type: Some(access_log::ConfigType::TypedConfig(any(&config))),
    })
}

/// The gRPC service of the collector `service` (`host` or `namespace/host`) on `port`: its
/// outbound cluster, the host as authority; `None` (logged) when it is not in the registry.
fn collector(ctx: &PushContext, service: &str, port: u32) -> Option<GrpcService> {
    let host = service.rsplit_once('/').map_or(service, |(_, h)| h);
    let Some(svc) = ctx.registry.services.get(host) else {
        tracing::warn!(
            %service,
            "access-log provider's service is not in the registry; not logged"
        );
        return None;
    };
    Some(GrpcService {
        target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
            grpc_service::EnvoyGrpc {
                cluster_name: outbound_cluster(port, "", &svc.hostname),
                authority: svc.hostname.clone(),
                ..Default::default()
            },
        )),
        ..Default::default()
    })
}

/// What both flavours of the gRPC access-log service share: the log name, the collector and the
/// filter state sent.
fn common(
    ctx: &PushContext,
    p: &GrpcAccessLogProvider,
    default_name: &str,
) -> Option<CommonGrpcAccessLogConfig> {
    Some(CommonGrpcAccessLogConfig {
        log_name: if p.log_name.is_empty() {
            default_name.into()
        } else {
            p.log_name.clone()
        },
        grpc_service: Some(collector(ctx, &p.service, p.port)?),
        transport_api_version: ApiVersion::V3 as i32,
        filter_state_objects_to_log: if p.filter_state_objects_to_log.is_empty() {
            PEER_STATE.iter().map(|s| s.to_string()).collect()
        } else {
            p.filter_state_objects_to_log.clone()
        },
        ..Default::default()
    })
}

/// The `envoyHttpAls` access log: Envoy's HTTP gRPC access logger, with the provider's extra
/// request headers, response headers and trailers.
pub(in crate::xds::generate) fn http_grpc_access_log(
    ctx: &PushContext,
    p: &GrpcAccessLogProvider,
    filter: Option<AccessLogFilter>,
) -> Option<AccessLog> {
    let config = HttpGrpcAccessLogConfig {
        common_config: Some(common(ctx, p, HTTP_LOG_NAME)?),
        additional_request_headers_to_log: p.additional_request_headers_to_log.clone(),
        additional_response_headers_to_log: p.additional_response_headers_to_log.clone(),
        additional_response_trailers_to_log: p.additional_response_trailers_to_log.clone(),
    };
    Some(AccessLog {
        name: HTTP_LOGGER.into(),
        filter,
        config_type: Some(access_log::ConfigType::TypedConfig(any(&config))),
    })
}

/// The `envoyTcpAls` access log: Envoy's TCP gRPC access logger.
pub(in crate::xds::generate) fn tcp_grpc_access_log(
    ctx: &PushContext,
    p: &GrpcAccessLogProvider,
    filter: Option<AccessLogFilter>,
) -> Option<AccessLog> {
    let config = TcpGrpcAccessLogConfig {
        common_config: Some(common(ctx, p, TCP_LOG_NAME)?),
    };
    Some(AccessLog {
        name: TCP_LOGGER.into(),
        filter,
        config_type: Some(access_log::ConfigType::TypedConfig(any(&config))),
    })
}
