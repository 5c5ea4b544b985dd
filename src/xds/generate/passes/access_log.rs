//! Envoy access logs, added by a finishing pass as istiod adds them: every HTTP connection manager
//! and TCP proxy logs each request or connection; gateway listeners and the sidecar's
//! `virtualOutbound`/`virtualInbound` also log connections that match no filter chain (`NR`).
//! What is logged where comes from the Telemetry API's `accessLogging` when a Telemetry applies to
//! the proxy (root namespace, then its namespace, then one selecting it; providers `envoy` and
//! `envoyFileAccessLog`, CEL filters, `disabled`, client and server modes), else from MeshConfig
//! (`accessLogFile`, `accessLogEncoding`, `accessLogFormat`, `disableEnvoyListenerLog`).
//! Proxyless gRPC clients have no access log.

use crate::config::telemetry::{Telemetry, WorkloadMode};
use crate::config::{Kind, Spec};
use crate::model::mesh::AccessLogSettings;
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::any;
use crate::xds::generate::finish::{Built, Class, Pass, Typed};
use crate::xds::generate::typed_listener::{ChainId, ListenerRole};
use envoy_types::pb::envoy::config::accesslog::v3::{
    AccessLog, AccessLogFilter, AndFilter, ExtensionFilter, ResponseFlagFilter, access_log,
    access_log_filter, extension_filter,
};
use envoy_types::pb::envoy::config::core::v3::{
    DataSource, JsonFormatOptions, SubstitutionFormatString, TypedExtensionConfig, data_source,
    substitution_format_string,
};
use envoy_types::pb::envoy::extensions::access_loggers::file::v3::{
    FileAccessLog, file_access_log,
};
use envoy_types::pb::envoy::extensions::access_loggers::filters::cel::v3::ExpressionFilter;
use envoy_types::pb::google::protobuf::{Struct, Value, value};
use std::collections::BTreeMap;

/// Istio's default text format (what `istioctl` users and log pipelines expect).
pub const ISTIO_TEXT_FORMAT: &str = concat!(
    "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" ",
    "%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% ",
    "\"%UPSTREAM_TRANSPORT_FAILURE_REASON%\" %BYTES_RECEIVED% %BYTES_SENT% %DURATION% ",
    "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" ",
    "\"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\" %UPSTREAM_CLUSTER_RAW% ",
    "%UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS% ",
    "%REQUESTED_SERVER_NAME% %ROUTE_NAME%\n"
);

/// Istio's default JSON fields, each an Envoy command operator.
pub const ISTIO_JSON_FIELDS: &[(&str, &str)] = &[
    ("authority", "%REQ(:AUTHORITY)%"),
    ("bytes_received", "%BYTES_RECEIVED%"),
    ("bytes_sent", "%BYTES_SENT%"),
    (
        "connection_termination_details",
        "%CONNECTION_TERMINATION_DETAILS%",
    ),
    ("downstream_local_address", "%DOWNSTREAM_LOCAL_ADDRESS%"),
    ("downstream_remote_address", "%DOWNSTREAM_REMOTE_ADDRESS%"),
    ("duration", "%DURATION%"),
    ("method", "%REQ(:METHOD)%"),
    ("path", "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"),
    ("protocol", "%PROTOCOL%"),
    ("request_id", "%REQ(X-REQUEST-ID)%"),
    ("requested_server_name", "%REQUESTED_SERVER_NAME%"),
    ("response_code", "%RESPONSE_CODE%"),
    ("response_code_details", "%RESPONSE_CODE_DETAILS%"),
    ("response_flags", "%RESPONSE_FLAGS%"),
    ("route_name", "%ROUTE_NAME%"),
    ("start_time", "%START_TIME%"),
    ("upstream_cluster", "%UPSTREAM_CLUSTER_RAW%"),
    ("upstream_host", "%UPSTREAM_HOST%"),
    ("upstream_local_address", "%UPSTREAM_LOCAL_ADDRESS%"),
    (
        "upstream_service_time",
        "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
    ),
    (
        "upstream_transport_failure_reason",
        "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
    ),
    ("user_agent", "%REQ(USER-AGENT)%"),
    ("x_forwarded_for", "%REQ(X-FORWARDED-FOR)%"),
];

const FILE_ACCESS_LOG: &str = "envoy.access_loggers.file";
const REQ_WITHOUT_QUERY: &str = "%REQ_WITHOUT_QUERY";

/// The pass that adds MeshConfig's access log.
pub struct AccessLogs;

impl Pass for AccessLogs {
    fn name(&self) -> &'static str {
        "access-logs"
    }

    fn applies(&self, ctx: &PushContext, _scope: &ScopeView) -> bool {
        ctx.mesh.access_log.is_some()
            || !ctx.mesh.default_access_logging.is_empty()
            || ctx.snapshot.list(Kind::Telemetry).any(
                |e| matches!(&e.config.spec, Spec::Telemetry(t) if !t.access_logging.is_empty()),
            )
    }

    fn apply(&self, ctx: &PushContext, scope: &ScopeView, resources: &mut Vec<Typed>) {
        let telemetries = applicable(ctx, scope);
        // (request and connection logs, listener logs) per mode: client, server.
        let logs = |telemetries: &[&Telemetry], server: bool| -> (Vec<AccessLog>, Vec<AccessLog>) {
            match telemetry_logs(ctx, telemetries, server) {
                Some(logs) => {
                    let listener = logs
                        .iter()
                        .map(|l| AccessLog {
                            filter: Some(and(no_route_filter(), l.filter.clone())),
                            ..l.clone()
                        })
                        .collect();
                    (logs, listener)
                }
                None => match &ctx.mesh.access_log {
                    Some(settings) => (
                        vec![file_access_log(settings, None)],
                        if settings.listener {
                            vec![file_access_log(settings, Some(no_route_filter()))]
                        } else {
                            Vec::new()
                        },
                    ),
                    None => (Vec::new(), Vec::new()),
                },
            }
        };
        let (client, server) = (logs(&telemetries, false), logs(&telemetries, true));
        // A waypoint logs as a server, each service's chains as that service's Telemetry says.
        let mut by_service: std::collections::HashMap<String, Vec<AccessLog>> =
            std::collections::HashMap::new();
        let mut chain_logs = |chain: ChainId, default: &[AccessLog]| -> Vec<AccessLog> {
            match served_by_chain(ctx, chain) {
                Some(svc) => by_service
                    .entry(svc.hostname.clone())
                    .or_insert_with(|| logs(&applicable_for(ctx, scope, Some(svc)), true).0)
                    .clone(),
                None => default.to_vec(),
            }
        };
        for r in resources.iter_mut() {
            let (logs, listener_logs) = match r.class {
                Class::Proxyless | Class::ProxylessServer => continue,
                Class::SidecarInbound | Class::Waypoint => &server,
                _ => &client,
            };
            let with_listener_log =
                r.class == Class::Gateway || r.listener_role() == Some(ListenerRole::Capture);
            if r.class == Class::Waypoint {
                r.edit_http_connection_managers(|chain, hcm| {
                    hcm.access_log.extend(chain_logs(chain, logs))
                });
                r.edit_tcp_proxies(|chain, tcp| tcp.access_log.extend(chain_logs(chain, logs)));
            } else if !logs.is_empty() {
                r.edit_http_connection_managers(|_, hcm| hcm.access_log.extend(logs.clone()));
                r.edit_tcp_proxies(|_, tcp| tcp.access_log.extend(logs.clone()));
            }
            if let Built::Listener(l) = &mut r.built
                && with_listener_log
            {
                l.listener.access_log.extend(listener_logs.clone());
            }
        }
    }
}

/// The Telemetries that apply to a proxy, in the order they override each other: the root
/// namespace's, its namespace's (both without a selector or targetRefs), and one of its
/// namespace attached to it by selector, or by a targetRef naming its Gateway API Gateway (the
/// oldest of each; `model::policy::attaches`). Those attached to what only a waypoint serves are
/// warned about and not applied.
pub(in crate::xds::generate) fn applicable<'a>(
    ctx: &'a PushContext,
    scope: &ScopeView,
) -> Vec<&'a Telemetry> {
    applicable_for(ctx, scope, None)
}

/// [`applicable`] at a waypoint serving `served`'s traffic (`model::telemetry::applicable`).
pub(in crate::xds::generate) fn applicable_for<'a>(
    ctx: &'a PushContext,
    scope: &ScopeView,
    served: Option<&crate::model::Service>,
) -> Vec<&'a Telemetry> {
    let workload = crate::model::policy::Workload {
        namespace: &scope.namespace,
        labels: &scope.labels,
        waypoint: scope.proxy_type == crate::xds::proxy::ProxyType::Waypoint,
        service: served.map(crate::model::policy::ServiceTarget::of),
    };
    crate::model::telemetry::applicable(&ctx.snapshot, &ctx.mesh.root_namespace, &workload)
}

/// The service a waypoint's filter chain serves.
pub(in crate::xds::generate) fn served_by_chain<'a>(
    ctx: &'a PushContext,
    chain: ChainId,
) -> Option<&'a crate::model::Service> {
    ctx.registry.services.get(chain.service?).map(AsRef::as_ref)
}

/// What the Telemetries say about access logs for one mode (istiod's mergeLogs): `None` when
/// none of them configures logging (MeshConfig's access log applies), else the logs of the
/// providers in scope that are not disabled, by provider name.
fn telemetry_logs(
    ctx: &PushContext,
    telemetries: &[&Telemetry],
    server: bool,
) -> Option<Vec<AccessLog>> {
    let levels: Vec<_> = telemetries
        .iter()
        .filter(|t| !t.access_logging.is_empty())
        .map(|t| &t.access_logging)
        .collect();
    let defaults = &ctx.mesh.default_access_logging;
    if levels.is_empty() {
        // No Telemetry logs here: MeshConfig's default providers, else its access log file.
        if defaults.is_empty() {
            return None;
        }
        return Some(
            defaults
                .iter()
                .filter_map(|name| provider_log(ctx, name, None))
                .collect(),
        );
    }
    let mode = if server {
        WorkloadMode::SERVER
    } else {
        WorkloadMode::CLIENT
    };
    let applies = |m: &crate::config::telemetry::AccessLogging| {
        m.match_
            .as_ref()
            .is_none_or(|s| s.mode == WorkloadMode::CLIENT_AND_SERVER || s.mode == mode)
    };
    let names = |m: &crate::config::telemetry::AccessLogging| -> Vec<String> {
        m.providers.iter().map(|p| p.name.clone()).collect()
    };
    // The providers in scope: those the lowest level naming any (for this mode) names; MeshConfig's
    // default providers when none does.
    let mut in_scope: Vec<String> = defaults.clone();
    let mut filters: BTreeMap<String, Option<String>> = BTreeMap::new();
    for level in &levels {
        let mut named = Vec::new();
        for m in level.iter().filter(|m| applies(m)) {
            for p in names(m) {
                filters.insert(p.clone(), m.filter.as_ref().map(|f| f.expression.clone()));
                named.push(p);
            }
        }
        if !named.is_empty() {
            in_scope = named;
        }
    }
    // Each provider's last word, level by level (a level without providers speaks for its parent's).
    let mut decided: BTreeMap<String, Option<Option<String>>> = BTreeMap::new();
    let mut parent: Vec<String> = defaults.clone();
    for level in &levels {
        for m in level.iter() {
            let mut providers = names(m);
            if providers.is_empty() {
                providers = parent.clone();
            }
            parent = providers.clone();
            for p in providers {
                if !in_scope.contains(&p) || !applies(m) {
                    continue;
                }
                let decision = if m.disabled == Some(true) {
                    None
                } else {
                    Some(filters.get(&p).cloned().flatten())
                };
                decided.insert(p, decision);
            }
        }
    }
    Some(
        decided
            .into_iter()
            .filter_map(|(name, decision)| {
                let filter = decision?;
                provider_log(ctx, &name, filter.as_deref())
            })
            .collect(),
    )
}

/// The access log of provider `name`: a MeshConfig `envoyFileAccessLog`, `envoyOtelAls`,
/// `envoyHttpAls` or `envoyTcpAls` provider, or the built-in
/// `envoy` (standard output, Istio's text format). Other provider kinds are warned about and
/// give nothing.
fn provider_log(ctx: &PushContext, name: &str, filter: Option<&str>) -> Option<AccessLog> {
    let configured = ctx
        .mesh
        .extension_providers
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name));
    let settings = match configured {
        Some(p) if p.envoy_http_als.is_some() => {
            let als = p.envoy_http_als.as_ref()?;
            return super::grpc_log::http_grpc_access_log(
                ctx,
                als,
                filter.filter(|f| !f.is_empty()).map(cel_filter),
            );
        }
        Some(p) if p.envoy_tcp_als.is_some() => {
            let als = p.envoy_tcp_als.as_ref()?;
            return super::grpc_log::tcp_grpc_access_log(
                ctx,
                als,
                filter.filter(|f| !f.is_empty()).map(cel_filter),
            );
        }
        Some(p) if p.envoy_otel_als.is_some() => {
            let otel = p.envoy_otel_als.as_ref()?;
            return super::grpc_log::otel_access_log(
                ctx,
                otel,
                filter.filter(|f| !f.is_empty()).map(cel_filter),
                ISTIO_TEXT_FORMAT,
                req_without_query,
            );
        }
        Some(p) => {
            let file = p.envoy_file_access_log.as_ref()?;
            let format = file.log_format.as_ref();
            let labels = format.and_then(|f| f.labels.as_ref());
            AccessLogSettings {
                path: file.path.clone(),
                json: labels.is_some(),
                format: match labels {
                    Some(l) => serde_json::Value::Object(l.clone()).to_string(),
                    None => format.and_then(|f| f.text.clone()).unwrap_or_default(),
                },
                listener: true,
            }
        }
        None if name.eq_ignore_ascii_case("envoy") => AccessLogSettings {
            path: "/dev/stdout".into(),
            json: false,
            format: String::new(),
            listener: true,
        },
        None => return None,
    };
    Some(file_access_log(
        &settings,
        filter.filter(|f| !f.is_empty()).map(cel_filter),
    ))
}

/// A Telemetry `filter.expression`, evaluated by Envoy's CEL access-log filter.
fn cel_filter(expression: &str) -> AccessLogFilter {
    AccessLogFilter {
        filter_specifier: Some(access_log_filter::FilterSpecifier::ExtensionFilter(
            ExtensionFilter {
                name: "envoy.access_loggers.extension_filters.cel".into(),
                config_type: Some(extension_filter::ConfigType::TypedConfig(any(
                    &ExpressionFilter {
                        expression: expression.to_string(),
                        ..Default::default()
                    },
                ))),
            },
        )),
    }
}

/// `a` and, when there is one, `b`.
fn and(a: AccessLogFilter, b: Option<AccessLogFilter>) -> AccessLogFilter {
    match b {
        None => a,
        Some(b) => AccessLogFilter {
            filter_specifier: Some(access_log_filter::FilterSpecifier::AndFilter(AndFilter {
                filters: vec![a, b],
            })),
        },
    }
}

/// Connections no filter chain took (`NR`): the only ones the filters' own logs miss.
fn no_route_filter() -> AccessLogFilter {
    AccessLogFilter {
        filter_specifier: Some(access_log_filter::FilterSpecifier::ResponseFlagFilter(
            ResponseFlagFilter {
                flags: vec!["NR".into()],
            },
        )),
    }
}

/// The file access log MeshConfig asks for, as istiod writes it.
pub fn file_access_log(settings: &AccessLogSettings, filter: Option<AccessLogFilter>) -> AccessLog {
    let mut format = if settings.json {
        let fields: Vec<(String, String)> =
            parse_json_format(&settings.format).unwrap_or_else(|| {
                ISTIO_JSON_FIELDS
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            });
        let uses_req_without_query = fields.iter().any(|(_, v)| v.contains(REQ_WITHOUT_QUERY));
        SubstitutionFormatString {
            format: Some(substitution_format_string::Format::JsonFormat(Struct {
                fields: fields
                    .into_iter()
                    .map(|(k, v)| {
                        (
                            k,
                            Value {
                                kind: Some(value::Kind::StringValue(v)),
                            },
                        )
                    })
                    .collect(),
            })),
            // Properties in the order written, as istiod asks.
            json_format_options: Some(JsonFormatOptions::default()),
            formatters: req_without_query(uses_req_without_query),
            ..Default::default()
        }
    } else {
        let text = if settings.format.is_empty() {
            ISTIO_TEXT_FORMAT.to_string()
        } else if settings.format.ends_with('\n') {
            settings.format.clone()
        } else {
            format!("{}\n", settings.format)
        };
        SubstitutionFormatString {
            formatters: req_without_query(text.contains(REQ_WITHOUT_QUERY)),
            format: Some(substitution_format_string::Format::TextFormatSource(
                DataSource {
                    specifier: Some(data_source::Specifier::InlineString(text)),
                    ..Default::default()
                },
            )),
            ..Default::default()
        }
    };
    format.omit_empty_values = false;
    AccessLog {
        name: FILE_ACCESS_LOG.into(),
        filter,
        config_type: Some(access_log::ConfigType::TypedConfig(any(&FileAccessLog {
            path: settings.path.clone(),
            access_log_format: Some(file_access_log::AccessLogFormat::LogFormat(format)),
        }))),
    }
}

/// A custom JSON format: an object of string fields (istiod logs and falls back to its default
/// when it does not parse).
fn parse_json_format(text: &str) -> Option<Vec<(String, String)>> {
    if text.trim().is_empty() {
        return None;
    }
    let parsed: serde_json::Map<String, serde_json::Value> = match serde_json::from_str(text) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(error = %e, "accessLogFormat is not a JSON object; Istio's default JSON format is used");
            return None;
        }
    };
    Some(
        parsed
            .into_iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => (k, s),
                other => (k, other.to_string()),
            })
            .collect(),
    )
}

/// Envoy's `%REQ_WITHOUT_QUERY(...)%` operator lives in a formatter extension, added when used.
fn req_without_query(used: bool) -> Vec<TypedExtensionConfig> {
    use envoy_types::pb::envoy::extensions::formatter::req_without_query::v3::ReqWithoutQuery;
    if !used {
        return Vec::new();
    }
    vec![TypedExtensionConfig {
        name: "envoy.formatter.req_without_query".into(),
        typed_config: Some(any(&ReqWithoutQuery::default())),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_formats_end_in_a_newline_and_json_ones_fall_back_to_istios() {
        let settings = |json: bool, format: &str| AccessLogSettings {
            path: "/dev/stdout".into(),
            json,
            format: format.into(),
            listener: true,
        };
        let text = |log: AccessLog| {
            let Some(access_log::ConfigType::TypedConfig(a)) = log.config_type else {
                panic!()
            };
            let f: FileAccessLog = prost::Message::decode(a.value.as_slice()).unwrap();
            format!("{f:?}")
        };
        assert!(
            text(file_access_log(&settings(false, "%PROTOCOL%"), None)).contains("%PROTOCOL%\\n")
        );
        assert!(text(file_access_log(&settings(false, ""), None)).contains("%ROUTE_NAME%\\n"));
        let fallback = text(file_access_log(&settings(true, "not json"), None));
        assert!(
            fallback.contains("upstream_transport_failure_reason"),
            "{fallback}"
        );
        let custom = text(file_access_log(
            &settings(true, r#"{"p": "%REQ_WITHOUT_QUERY(:PATH)%"}"#),
            None,
        ));
        assert!(custom.contains("req_without_query"), "{custom}");
    }

    /// istiod's merge: a Telemetry selecting the workload overrides its namespace's providers, a
    /// server-only entry says nothing for outbound traffic, `disabled` turns a provider off, and
    /// without any Telemetry logging the mesh config's log applies (`None`).
    /// MeshConfig `defaultProviders.accessLogging`: every proxy logs to them with no Telemetry,
    /// a Telemetry naming no provider means them, and one may turn them off.
    #[test]
    fn default_providers_log_where_telemetry_does_not_say_otherwise() {
        let yaml = r#"
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: quiet, namespace: quiet}
spec:
  accessLogging: [{disabled: true}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: filtered, namespace: filtered}
spec:
  accessLogging: [{filter: {expression: "response.code >= 500"}}]
"#;
        let mesh = crate::model::mesh::MeshSettings {
            default_access_logging: vec!["envoy".into()],
            ..Default::default()
        };
        let ctx = crate::testing::push_context_with(yaml, mesh);
        let logs = |ns: &str| {
            let p = crate::testing::sidecar(ns, &[]);
            let scope = ctx.scope(&p);
            telemetry_logs(&ctx, &applicable(&ctx, &scope), false)
        };
        assert_eq!(
            logs("shop").map(|l| l.len()),
            Some(1),
            "no Telemetry: the defaults"
        );
        assert_eq!(logs("quiet").map(|l| l.len()), Some(0), "turned off");
        // As istiod's mergeLogs: a filter is kept for the providers its entry names, so an
        // entry naming none logs to the defaults unfiltered.
        let filtered = logs("filtered").expect("logs");
        assert_eq!(filtered.len(), 1);
        assert!(filtered[0].filter.is_none());
    }

    /// A Telemetry whose targetRef names a Gateway API Gateway applies to that Gateway's pods,
    /// not to another Gateway's nor to sidecars.
    #[test]
    fn a_telemetry_targeting_a_gateway_applies_to_its_pods() {
        let ctx = crate::testing::push_context(
            r#"
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: edge-logs, namespace: shop}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}]
  accessLogging: [{providers: [{name: envoy}]}]
"#,
        );
        let count = |id: &str, labels: &[(&str, &str)]| {
            let p = crate::testing::proxy(id, &[], labels);
            let scope = ctx.scope(&p);
            telemetry_logs(&ctx, &applicable(&ctx, &scope), false).map(|l| l.len())
        };
        let gateway = "router~10.0.0.8~edge-istio-0.shop~shop.svc.cluster.local";
        assert_eq!(
            count(
                gateway,
                &[("gateway.networking.k8s.io/gateway-name", "edge")]
            ),
            Some(1)
        );
        assert_eq!(
            count(
                gateway,
                &[("gateway.networking.k8s.io/gateway-name", "other")]
            ),
            None
        );
        assert_eq!(
            count("sidecar~10.0.0.9~p.shop~shop.svc.cluster.local", &[]),
            None
        );
    }

    #[test]
    fn telemetries_merge_level_by_level_and_mode_by_mode() {
        let yaml = r#"
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: root, namespace: istio-system}
spec:
  accessLogging: [{providers: [{name: envoy}]}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: web-only, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  accessLogging:
  - {match: {mode: SERVER}, disabled: true}
"#;
        let ctx = crate::testing::push_context(yaml);
        let count = |labels: &[(&str, &str)], server: bool| {
            let p = crate::testing::proxy(
                "sidecar~10.0.0.9~p.shop~shop.svc.cluster.local",
                &[],
                labels,
            );
            let scope = ctx.scope(&p);
            telemetry_logs(&ctx, &applicable(&ctx, &scope), server).map(|l| l.len())
        };
        assert_eq!(count(&[], false), Some(1), "the root's envoy provider");
        assert_eq!(count(&[], true), Some(1));
        assert_eq!(
            count(&[("app", "web")], false),
            Some(1),
            "client side untouched"
        );
        assert_eq!(
            count(&[("app", "web")], true),
            Some(0),
            "server side disabled"
        );
        let none = crate::testing::push_context("");
        let p = crate::testing::sidecar("shop", &[]);
        let scope = none.scope(&p);
        assert_eq!(
            telemetry_logs(&none, &applicable(&none, &scope), false).map(|l| l.len()),
            None
        );
    }

    /// `envoyHttpAls` and `envoyTcpAls` as istiod builds them: Envoy's gRPC loggers to the
    /// collector's outbound cluster, istiod's log names and peer filter state unless the provider
    /// names its own, the HTTP flavour's extra headers; a collector outside the registry logs nothing.
    #[test]
    fn grpc_access_log_services_stream_to_the_collector() {
        use envoy_types::pb::envoy::extensions::access_loggers::grpc::v3::{
            HttpGrpcAccessLogConfig, TcpGrpcAccessLogConfig,
        };
        use prost::Message;
        let yaml = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: als, namespace: istio-system}
spec:
  hosts: [als.istio-system.svc.cluster.local]
  ports: [{number: 9001, name: grpc, protocol: GRPC}]
  resolution: DNS
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  accessLogging: [{providers: [{name: http-als}, {name: tcp-als}, {name: missing}]}]
"#;
        let mesh_text = r#"
extensionProviders:
- name: http-als
  envoyHttpAls:
    service: istio-system/als.istio-system.svc.cluster.local
    port: 9001
    additionalRequestHeadersToLog: [x-user]
- name: tcp-als
  envoyTcpAls:
    service: als.istio-system.svc.cluster.local
    port: 9001
    logName: mine
    filterStateObjectsToLog: [custom]
- name: missing
  envoyTcpAls: {service: nowhere.example, port: 1}
"#;
        let mc = crate::config::mesh::MeshConfig::parse(mesh_text).expect("mesh config");
        let mesh = crate::model::mesh::MeshSettings {
            extension_providers: mc.extension_providers,
            ..Default::default()
        };
        let ctx = crate::testing::push_context_with(yaml, mesh);
        let p = crate::testing::sidecar("shop", &[]);
        let scope = ctx.scope(&p);
        let logs = telemetry_logs(&ctx, &applicable(&ctx, &scope), false).expect("logs");
        assert_eq!(
            logs.len(),
            2,
            "the provider without a collector gives nothing"
        );
        let config = |name: &str| {
            let log = logs.iter().find(|l| l.name == name).expect(name);
            match &log.config_type {
                Some(access_log::ConfigType::TypedConfig(any)) => any.value.clone(),
                _ => panic!("typed config"),
            }
        };
        let http =
            HttpGrpcAccessLogConfig::decode(config("envoy.access_loggers.http_grpc").as_slice())
                .expect("http config");
        let common = http.common_config.expect("common");
        assert_eq!(common.log_name, "http_envoy_accesslog");
        assert_eq!(
            common.filter_state_objects_to_log,
            ["upstream_peer", "downstream_peer"]
        );
        let target = format!("{:?}", common.grpc_service);
        assert!(
            target.contains("outbound|9001||als.istio-system.svc.cluster.local"),
            "{target}"
        );
        assert_eq!(http.additional_request_headers_to_log, ["x-user"]);
        let tcp = TcpGrpcAccessLogConfig::decode(config("envoy.tcp_grpc_access_log").as_slice())
            .expect("tcp config");
        let common = tcp.common_config.expect("common");
        assert_eq!(common.log_name, "mine");
        assert_eq!(common.filter_state_objects_to_log, ["custom"]);
    }
}
