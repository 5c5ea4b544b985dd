//! AuthorizationPolicy `CUSTOM` → Envoy ext_authz, as istiod builds it: an RBAC filter in shadow
//! mode marks requests that match a CUSTOM rule, and the ext_authz filter runs only for those (its
//! `filter_enabled_metadata`), asking the provider named in MeshConfig `extensionProviders`.

use super::rbac::{RBAC_FILTER, rbac_bytes};
use super::util::{any, duration, outbound_cluster, put_field};
use crate::config::mesh::ExtAuthzProvider;
use crate::xds::context::PushContext;
use envoy_types::pb::envoy::config::core::v3::{
    ApiVersion, GrpcService, HttpUri, grpc_service, http_uri,
};
use envoy_types::pb::envoy::config::rbac::v3::{Policy, rbac};
use envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3::{
    AuthorizationResponse, ExtAuthz, HttpService, ext_authz,
};
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac as HttpRbac;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    ListStringMatcher, MetadataMatcher, StringMatcher, ValueMatcher, metadata_matcher,
    string_matcher, value_matcher,
};
use envoy_types::pb::envoy::r#type::v3::{HttpStatus, StatusCode};
use envoy_types::pb::google::protobuf::Any;
use std::collections::BTreeMap;
use tracing::warn;

pub const EXT_AUTHZ_FILTER: &str = "envoy.filters.http.ext_authz";
/// The shadow RBAC filter's stat prefix; Envoy writes the matched policy's name under
/// `<prefix>shadow_effective_policy_id` in the RBAC filter's dynamic metadata.
const SHADOW_PREFIX: &str = "istio_ext_authz_";
const POLICY_PREFIX: &str = "istio-ext-authz";

/// The shadow RBAC and ext_authz filters for the CUSTOM `rules` of one `provider` (none when there
/// are no rules or the provider is not in MeshConfig: then the policies are logged and skipped).
pub fn http_filters(
    ctx: &PushContext,
    rules: &BTreeMap<String, Policy>,
    provider: Option<&str>,
) -> Vec<HttpFilter> {
    let Some(name) = provider.filter(|_| !rules.is_empty()) else {
        return Vec::new();
    };
    let Some(found) = ctx.mesh.extension_providers.iter().find(|p| p.name == name) else {
        warn!(provider = %name, "CUSTOM policy names a provider that MeshConfig extensionProviders does not define");
        return Vec::new();
    };
    let service = match (&found.envoy_ext_authz_http, &found.envoy_ext_authz_grpc) {
        (Some(http), _) => Service::Http(http),
        (None, Some(grpc)) => Service::Grpc(grpc),
        (None, None) => {
            warn!(provider = %name, "extension provider is not an ext_authz provider");
            return Vec::new();
        }
    };
    let mut shadow = Vec::new();
    put_field(2, &rbac_bytes(rbac::Action::Allow, rules), &mut shadow);
    put_field(3, SHADOW_PREFIX.as_bytes(), &mut shadow);
    vec![
        HttpFilter {
            name: RBAC_FILTER.into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(Any {
                type_url: <HttpRbac as prost::Name>::type_url(),
                value: shadow,
            })),
            ..Default::default()
        },
        HttpFilter {
            name: EXT_AUTHZ_FILTER.into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(any(&ext_authz(
                ctx, &service,
            )))),
            ..Default::default()
        },
    ]
}

enum Service<'a> {
    Http(&'a ExtAuthzProvider),
    Grpc(&'a ExtAuthzProvider),
}

/// `namespace/host` or `host` (short names in the root namespace) as an FQDN and its cluster.
fn target(ctx: &PushContext, p: &ExtAuthzProvider) -> (String, String) {
    let (ns, host) = p
        .service
        .split_once('/')
        .unwrap_or((ctx.mesh.root_namespace.as_str(), p.service.as_str()));
    let host = crate::model::resolve_host(host, ns, &ctx.mesh.domain_suffix);
    let cluster = outbound_cluster(p.port, "", &host);
    (host, cluster)
}

fn timeout(p: &ExtAuthzProvider) -> Option<envoy_types::pb::google::protobuf::Duration> {
    let text = p.timeout.as_ref()?;
    let d: crate::config::common::Duration =
        serde_json::from_value(serde_json::Value::String(text.clone())).ok()?;
    Some(duration(d.as_std()))
}

fn exact_list(names: &[String]) -> Option<ListStringMatcher> {
    (!names.is_empty()).then(|| ListStringMatcher {
        patterns: names
            .iter()
            .map(|n| StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::Exact(n.clone())),
                ignore_case: true,
            })
            .collect(),
    })
}

fn ext_authz(ctx: &PushContext, service: &Service) -> ExtAuthz {
    let (provider, services) = match service {
        Service::Http(p) => {
            let (host, cluster) = target(ctx, p);
            let http = HttpService {
                server_uri: Some(HttpUri {
                    uri: format!("http://{host}:{}", p.port),
                    timeout: Some(
                        timeout(p).unwrap_or(duration(std::time::Duration::from_millis(600))),
                    ),
                    http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(cluster)),
                }),
                path_prefix: p.path_prefix.clone(),
                authorization_response: Some(AuthorizationResponse {
                    allowed_upstream_headers: exact_list(&p.headers_to_upstream_on_allow),
                    allowed_client_headers: exact_list(&p.headers_to_downstream_on_deny),
                    ..Default::default()
                }),
                ..Default::default()
            };
            (p, ext_authz::Services::HttpService(http))
        }
        Service::Grpc(p) => {
            let (host, cluster) = target(ctx, p);
            let grpc = GrpcService {
                timeout: timeout(p),
                target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                    grpc_service::EnvoyGrpc {
                        cluster_name: cluster,
                        authority: host,
                        ..Default::default()
                    },
                )),
                ..Default::default()
            };
            (p, ext_authz::Services::GrpcService(grpc))
        }
    };
    ExtAuthz {
        transport_api_version: ApiVersion::V3 as i32,
        allowed_headers: exact_list(&provider.include_request_headers_in_check),
        failure_mode_allow: provider.fail_open,
        status_on_error: Some(HttpStatus {
            code: StatusCode::Forbidden as i32,
        }),
        filter_enabled_metadata: Some(MetadataMatcher {
            filter: RBAC_FILTER.into(),
            path: vec![metadata_matcher::PathSegment {
                segment: Some(metadata_matcher::path_segment::Segment::Key(format!(
                    "{SHADOW_PREFIX}shadow_effective_policy_id"
                ))),
            }],
            value: Some(ValueMatcher {
                match_pattern: Some(value_matcher::MatchPattern::StringMatch(StringMatcher {
                    match_pattern: Some(string_matcher::MatchPattern::Prefix(POLICY_PREFIX.into())),
                    ignore_case: false,
                })),
            }),
            invert: false,
        }),
        services: Some(services),
        ..Default::default()
    }
}
