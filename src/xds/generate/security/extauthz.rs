//! AuthorizationPolicy `CUSTOM` → Envoy ext_authz, as istiod builds it: an RBAC filter in shadow
//! mode marks requests that match a CUSTOM rule, and the ext_authz filter runs only for those (its
//! `filter_enabled_metadata`), asking the provider named in MeshConfig `extensionProviders`. On
//! TCP a gRPC provider is asked through the network ext_authz filter; an HTTP provider does not
//! apply to TCP (as istiod). A provider that MeshConfig does not define (or that is not an
//! ext_authz provider) denies what its rules match, as istiod: never allows it unchecked.

use super::rbac::{
    NETWORK_RBAC_FILTER, RBAC_FILTER, http_rbac_filter, network_rbac_filter, rbac_bytes,
};
use crate::config::mesh::ExtAuthzProvider;
use crate::xds::context::PushContext;
use crate::xds::generate::encode::{any, put_field};
use crate::xds::generate::shared::util::{duration, outbound_cluster};
use crate::xds::generate::typed_listener::NetworkFilter;
use envoy_types::pb::envoy::config::core::v3::{
    ApiVersion, GrpcService, HttpUri, grpc_service, http_uri,
};
use envoy_types::pb::envoy::config::listener::v3::filter;
use envoy_types::pb::envoy::config::rbac::v3::{Policy, rbac};
use envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3::{
    AuthorizationResponse, ExtAuthz, HttpService, ext_authz,
};
use envoy_types::pb::envoy::extensions::filters::network::ext_authz::v3::ExtAuthz as NetworkExtAuthz;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    ListStringMatcher, MetadataMatcher, StringMatcher, ValueMatcher, metadata_matcher,
    string_matcher, value_matcher,
};
use envoy_types::pb::envoy::r#type::v3::{HttpStatus, StatusCode};
use std::collections::BTreeMap;
use tracing::{debug, warn};

pub const EXT_AUTHZ_FILTER: &str = "envoy.filters.http.ext_authz";
pub const NETWORK_EXT_AUTHZ_FILTER: &str = "envoy.filters.network.ext_authz";
/// The shadow RBAC filter's stat prefix; Envoy writes the matched policy's name under
/// `<prefix>shadow_effective_policy_id` in the RBAC filter's dynamic metadata.
const SHADOW_PREFIX: &str = "istio_ext_authz_";
const POLICY_PREFIX: &str = "istio-ext-authz";

/// Which provider the CUSTOM policies of a workload name.
pub enum CustomProvider<'a> {
    None,
    One(&'a str),
    /// More than one: nothing can be asked, so what the rules match is denied.
    Several,
}

/// The ext_authz provider `name` in MeshConfig; `None` (logged) when there is none of that name
/// or it is another kind of provider.
fn provider_service<'a>(ctx: &'a PushContext, name: &str) -> Option<Service<'a>> {
    let Some(found) = ctx.mesh.extension_providers.iter().find(|p| p.name == name) else {
        warn!(provider = %name, "CUSTOM policy names a provider that MeshConfig extensionProviders does not define; what it matches is denied");
        return None;
    };
    match (&found.envoy_ext_authz_http, &found.envoy_ext_authz_grpc) {
        (Some(http), _) => Some(Service::Http(http)),
        (None, Some(grpc)) => Some(Service::Grpc(grpc)),
        (None, None) => {
            warn!(provider = %name, "extension provider is not an ext_authz provider; what the CUSTOM policy matches is denied");
            None
        }
    }
}

/// The shadow RBAC and ext_authz filters for the CUSTOM `rules` of one `provider`; a DENY RBAC
/// filter of the same rules when the provider cannot be used.
pub fn http_filters(
    ctx: &PushContext,
    rules: &BTreeMap<String, Policy>,
    provider: CustomProvider,
) -> Vec<HttpFilter> {
    let name = match provider {
        _ if rules.is_empty() => return Vec::new(),
        CustomProvider::None => return Vec::new(),
        CustomProvider::One(name) => Some(name),
        CustomProvider::Several => None,
    };
    let Some(service) = name.and_then(|name| provider_service(ctx, name)) else {
        let mut deny = Vec::new();
        put_field(1, &rbac_bytes(rbac::Action::Deny, rules), &mut deny);
        return vec![http_rbac_filter(deny)];
    };
    let mut shadow = Vec::new();
    put_field(2, &rbac_bytes(rbac::Action::Allow, rules), &mut shadow);
    put_field(3, SHADOW_PREFIX.as_bytes(), &mut shadow);
    vec![
        http_rbac_filter(shadow),
        HttpFilter {
            name: EXT_AUTHZ_FILTER.into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(any(&ext_authz(
                ctx, &service,
            )))),
            ..Default::default()
        },
    ]
}

/// The network filters for the CUSTOM `rules` (L4 parts only) on TCP: a shadow RBAC filter and
/// the network ext_authz filter for a gRPC provider; nothing for an HTTP provider (it speaks
/// HTTP only, and istiod leaves TCP to the other policies); a DENY RBAC filter when the provider
/// cannot be used.
pub fn network_filters(
    ctx: &PushContext,
    rules: &BTreeMap<String, Policy>,
    provider: CustomProvider,
) -> Vec<NetworkFilter> {
    let name = match provider {
        _ if rules.is_empty() => return Vec::new(),
        CustomProvider::None => return Vec::new(),
        CustomProvider::One(name) => Some(name),
        CustomProvider::Several => None,
    };
    let grpc = match name.and_then(|name| provider_service(ctx, name)) {
        None => {
            let mut deny = Vec::new();
            put_field(1, &rbac_bytes(rbac::Action::Deny, rules), &mut deny);
            put_field(3, b"tcp.", &mut deny);
            return vec![network_rbac_filter(deny)];
        }
        Some(Service::Http(_)) => {
            debug!(
                provider = name.unwrap_or_default(),
                "an HTTP ext_authz provider does not apply to TCP traffic (as istiod)"
            );
            return Vec::new();
        }
        Some(Service::Grpc(p)) => p,
    };
    let mut shadow = Vec::new();
    put_field(2, &rbac_bytes(rbac::Action::Allow, rules), &mut shadow);
    put_field(3, b"tcp.", &mut shadow);
    put_field(5, SHADOW_PREFIX.as_bytes(), &mut shadow);
    let authz = NetworkExtAuthz {
        stat_prefix: "tcp.".into(),
        grpc_service: Some(grpc_target(ctx, grpc)),
        failure_mode_allow: grpc.fail_open,
        transport_api_version: ApiVersion::V3 as i32,
        filter_enabled_metadata: Some(shadow_matched(NETWORK_RBAC_FILTER)),
        ..Default::default()
    };
    vec![
        network_rbac_filter(shadow),
        NetworkFilter::encoded(
            NETWORK_EXT_AUTHZ_FILTER,
            filter::ConfigType::TypedConfig(any(&authz)),
        ),
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
        Service::Grpc(p) => (p, ext_authz::Services::GrpcService(grpc_target(ctx, p))),
    };
    ExtAuthz {
        transport_api_version: ApiVersion::V3 as i32,
        allowed_headers: exact_list(&provider.include_request_headers_in_check),
        failure_mode_allow: provider.fail_open,
        status_on_error: Some(HttpStatus {
            code: StatusCode::Forbidden as i32,
        }),
        filter_enabled_metadata: Some(shadow_matched(RBAC_FILTER)),
        services: Some(services),
        ..Default::default()
    }
}

/// The provider's gRPC service: its cluster and authority, and its timeout.
fn grpc_target(ctx: &PushContext, p: &ExtAuthzProvider) -> GrpcService {
    let (host, cluster) = target(ctx, p);
    GrpcService {
        timeout: timeout(p),
        target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
            grpc_service::EnvoyGrpc {
                cluster_name: cluster,
                authority: host,
                ..Default::default()
            },
        )),
        ..Default::default()
    }
}

/// "The shadow RBAC filter `rbac_filter` matched a CUSTOM rule": when ext_authz runs.
fn shadow_matched(rbac_filter: &str) -> MetadataMatcher {
    MetadataMatcher {
        filter: rbac_filter.into(),
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
    }
}
