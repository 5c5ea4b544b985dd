//! The Telemetry API's `tracing`, added by a finishing pass as istiod configures it
//! (`pilot/pkg/networking/core/tracing.go`, `Telemetries.Tracing`): the Telemetries that apply to
//! a proxy (root namespace, its namespace, one selecting it) are merged entry by entry and mode by
//! mode (the first provider named wins; `disableSpanReporting`, `randomSamplingPercentage`,
//! `customTags` and `enableIstioTags` override), and every HTTP connection manager of the mode gets
//! Envoy's tracer: `zipkin`, `opentelemetry` (gRPC, or HTTP with `http.path`), `datadog` or
//! `skywalking` from MeshConfig's `extensionProviders`, sampling 1% unless set, Istio's service
//! tags unless turned off, trace context not propagated where `disableContextPropagation` says so
//! (proxies of 1.30 or later, as istiod).
//! Without a Telemetry, MeshConfig's legacy tracing applies as istiod's default: `enableTracing`
//! (on unless `false`) with the ProxyConfig's `tracing` (`legacy` below).

use crate::xds::generate::finish::{Class, Pass, Typed};
use crate::xds::generate::encode::any;
use crate::config::mesh::{
    CollectorProvider, ExtensionProvider, OpenTelemetryProvider, ProviderHeader, ZipkinProvider,
};
use crate::config::telemetry::{CustomTag, Telemetry, WorkloadMode};
use crate::config::{Kind, Spec};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::proxy::ProxyType;
use envoy_types::pb::envoy::config::core::v3::{
    GrpcService, HeaderValue, HeaderValueOption, HttpService, HttpUri, TypedExtensionConfig,
    grpc_service, header_value_option, http_uri,
};
use envoy_types::pb::envoy::extensions::tracers::opentelemetry::resource_detectors::v3::{
    DynatraceResourceDetectorConfig, EnvironmentResourceDetectorConfig,
};
use envoy_types::pb::envoy::extensions::tracers::opentelemetry::samplers::v3::DynatraceSamplerConfig;
use envoy_types::pb::envoy::config::trace::v3::{
    DatadogConfig, OpenTelemetryConfig, SkyWalkingConfig, ZipkinConfig, tracing::Http,
    tracing::http, zipkin_config,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::RequestIdExtension;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::Tracing;
use envoy_types::pb::envoy::extensions::request_id::uuid::v3::UuidRequestIdConfig;
use envoy_types::pb::envoy::r#type::tracing::v3::{CustomTag as EnvoyTag, custom_tag};
use envoy_types::pb::envoy::r#type::v3::Percent;
use envoy_types::pb::google::protobuf::{Any, BoolValue, UInt32Value};
use std::collections::BTreeMap;

/// istiod's default sampling (`PILOT_TRACE_SAMPLING`) when nothing sets one.
const DEFAULT_SAMPLING: f64 = 1.0;

/// The pass that adds Telemetry tracing.
pub struct TracingPass;

impl Pass for TracingPass {
    fn name(&self) -> &'static str {
        "tracing"
    }

    fn applies(&self, ctx: &PushContext, _scope: &ScopeView) -> bool {
        ctx.mesh.legacy_tracing.is_some()
            || !ctx.mesh.default_tracing.is_empty()
            || ctx
                .snapshot
                .list(Kind::Telemetry)
                .any(|e| matches!(&e.config.spec, Spec::Telemetry(t) if !t.tracing.is_empty()))
    }

    fn apply(&self, ctx: &PushContext, scope: &ScopeView, resources: &mut Vec<Typed>) {
        let telemetries = crate::xds::generate::passes::access_log::applicable(ctx, scope);
        // Per mode: the tracing, and the request id extension when the request id must not
        // decide sampling (`useRequestIdForTraceSampling: false`).
        let with_request_id = |spec: &TracingSpec| {
            let traced = tracing(ctx, scope, spec);
            let request_id = (traced.is_some() && !spec.use_request_id).then(request_id_extension);
            (traced, request_id)
        };
        let modes = |telemetries: &[&Telemetry]| match merged(ctx, telemetries) {
            Some((client, server)) => (with_request_id(&client), with_request_id(&server)),
            None => {
                let legacy = legacy(ctx, scope);
                ((legacy.clone(), None), (legacy, None))
            }
        };
        let (client, server) = modes(&telemetries);
        // A waypoint traces as a server, each service's chains as that service's Telemetry says.
        let mut by_service = std::collections::HashMap::new();
        for r in resources.iter_mut() {
            let mode = match r.class {
                Class::Proxyless | Class::ProxylessServer => continue,
                Class::SidecarInbound | Class::Waypoint => &server,
                _ => &client,
            };
            if r.class != Class::Waypoint {
                if let (Some(t), request_id) = mode {
                    r.edit_http_connection_managers(|_, hcm| {
                        hcm.tracing = Some(t.clone());
                        if let Some(ext) = request_id {
                            hcm.request_id_extension = Some(ext.clone());
                        }
                    });
                }
                continue;
            }
            r.edit_http_connection_managers(|chain, hcm| {
                let (chosen, request_id) =
                    match crate::xds::generate::passes::access_log::served_by_chain(ctx, chain) {
                        Some(svc) => by_service
                            .entry(svc.hostname.clone())
                            .or_insert_with(|| {
                                modes(&crate::xds::generate::passes::access_log::applicable_for(
                                    ctx,
                                    scope,
                                    Some(svc),
                                ))
                                .1
                            })
                            .clone(),
                        None => mode.clone(),
                    };
                if let Some(t) = chosen {
                    hcm.tracing = Some(t);
                    if let Some(ext) = request_id {
                        hcm.request_id_extension = Some(ext);
                    }
                }
            });
        }
    }
}

/// One mode's tracing, as the Telemetries leave it.
#[derive(Clone, Default)]
struct TracingSpec<'a> {
    provider: Option<&'a ExtensionProvider>,
    disabled: bool,
    sampling: Option<f64>,
    custom_tags: Option<&'a BTreeMap<String, CustomTag>>,
    istio_tags: bool,
    /// `useRequestIdForTraceSampling` (istiod's default: true).
    use_request_id: bool,
    /// `disableContextPropagation`.
    no_propagation: bool,
}

/// Whether `ISTIO_VERSION` is `major.minor` or later (an unknown version is not), as istiod
/// gates fields older proxies would refuse.
fn at_least(version: &str, major: u32, minor: u32) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(ma), Some(mi)) => (ma, mi) >= (major, minor),
        _ => false,
    }
}

/// Envoy's UUID request id, told not to decide trace sampling (istiod's
/// `BuildUUIDRequestIDExtension`).
fn request_id_extension() -> RequestIdExtension {
    RequestIdExtension {
        typed_config: Some(any(&UuidRequestIdConfig {
            use_request_id_for_trace_sampling: Some(BoolValue { value: false }),
            ..Default::default()
        })),
    }
}

/// istiod's `Telemetries.Tracing`: (client, server); `None` when no Telemetry sets tracing.
fn merged<'a>(
    ctx: &'a PushContext,
    telemetries: &[&'a Telemetry],
) -> Option<(TracingSpec<'a>, TracingSpec<'a>)> {
    let entries: Vec<_> = telemetries.iter().flat_map(|t| t.tracing.iter()).collect();
    // MeshConfig `defaultProviders.tracing`: its first provider, unless a Telemetry names one.
    let default = ctx.mesh.default_tracing.first().map(|name| {
        ctx.mesh
            .extension_providers
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
    });
    if entries.is_empty() && default.is_none() {
        return None;
    }
    let fresh = TracingSpec {
        istio_tags: true,
        use_request_id: true,
        provider: default.flatten(),
        ..Default::default()
    };
    let (mut client, mut server) = (fresh.clone(), fresh);
    for m in entries {
        let mut specs: Vec<&mut TracingSpec<'a>> = match m.match_.as_ref().map(|s| s.mode) {
            Some(WorkloadMode::CLIENT) => vec![&mut client],
            Some(WorkloadMode::SERVER) => vec![&mut server],
            _ => vec![&mut client, &mut server],
        };
        for spec in specs.iter_mut() {
            if let Some(first) = m.providers.first() {
                spec.provider = ctx
                    .mesh
                    .extension_providers
                    .iter()
                    .find(|p| p.name.eq_ignore_ascii_case(&first.name));
            }
            if let Some(d) = m.disable_span_reporting {
                spec.disabled = d;
            }
            if !m.custom_tags.is_empty() {
                spec.custom_tags = Some(&m.custom_tags);
            }
            if let Some(p) = m.random_sampling_percentage {
                spec.sampling = Some(p);
            }
            if let Some(tags) = m.enable_istio_tags {
                spec.istio_tags = tags;
            }
            if let Some(use_id) = m.use_request_id_for_trace_sampling {
                spec.use_request_id = use_id;
            }
            if let Some(d) = m.disable_context_propagation {
                spec.no_propagation = d;
            }
        }
    }
    Some((client, server))
}

/// The connection manager's tracing for one mode; `None` when disabled, without a provider, or
/// when the provider's service is not in the registry (istiod logs and leaves tracing off).
fn tracing(ctx: &PushContext, scope: &ScopeView, spec: &TracingSpec) -> Option<Tracing> {
    if spec.disabled {
        return None;
    }
    let provider = spec.provider?;
    let (name, config, max_tag_length) = if let Some(z) = &provider.zipkin {
        zipkin(ctx, scope, z)?
    } else if let Some(o) = &provider.opentelemetry {
        opentelemetry(ctx, scope, o)?
    } else if let Some(d) = &provider.datadog {
        datadog(ctx, scope, d)?
    } else if let Some(s) = &provider.skywalking {
        skywalking(ctx, s)?
    } else {
        return None;
    };
    let child_span = scope.proxy_type == ProxyType::Router || provider.skywalking.is_some();
    let mut tags = if spec.istio_tags {
        istio_tags(scope)
    } else {
        Vec::new()
    };
    // The Telemetry's custom tags, else the ProxyConfig's (istiod's configureCustomTags).
    let pt = proxy_tracing(ctx, scope);
    match spec.custom_tags.filter(|t| !t.is_empty()) {
        Some(t) => tags.extend(envoy_tags(t)),
        None => tags.extend(envoy_tags(&pt.custom_tags)),
    }
    tags.sort_by(|a, b| a.tag.cmp(&b.tag));
    let max_tag_length = if max_tag_length != 0 {
        max_tag_length
    } else {
        pt.max_path_tag_length
    };
    // provider's sampler > Telemetry's percentage > ProxyConfig's > istiod's default: with a
    // sampler every span reaches it, which decides.
    let custom_sampler = provider
        .opentelemetry
        .as_ref()
        .is_some_and(|o| o.dynatrace_sampler.is_some());
    let sampling = if custom_sampler {
        100.0
    } else {
        spec.sampling.or(pt.sampling).unwrap_or(DEFAULT_SAMPLING)
    };
    Some(Tracing {
        custom_tags: tags,
        max_path_tag_length: (max_tag_length != 0).then_some(UInt32Value {
            value: max_tag_length,
        }),
        // Gateways start a child span for the upstream request, as istiod's default.
        spawn_upstream_span: child_span.then_some(BoolValue { value: true }),
        // As istiod: only proxies of Istio 1.30 or later know the field.
        no_context_propagation: spec.no_propagation && at_least(&scope.istio_version, 1, 30),
        provider: Some(Http {
            name: name.into(),
            config_type: Some(http::ConfigType::TypedConfig(config)),
        }),
        ..sampled(sampling)
    })
}

/// A provider's Envoy tracer: its name, its config, and the provider's tag length limit.
type Tracer = (&'static str, Any, u32);

/// A Zipkin provider's tracer: the collector as an HTTP service for proxies of 1.29 or later,
/// the legacy fields before.
fn zipkin(ctx: &PushContext, scope: &ScopeView, z: &ZipkinProvider) -> Option<Tracer> {
    let (host, cluster) = collector(ctx, &z.service, z.port)?;
    let endpoint = if z.path.is_empty() {
        "/api/v2/spans".to_string()
    } else {
        z.path.clone()
    };
    let mut config = ZipkinConfig {
        collector_endpoint_version: zipkin_config::CollectorEndpointVersion::HttpJson as i32,
        trace_id_128bit: !z.enable_64bit_trace_id,
        shared_span_context: Some(BoolValue { value: false }),
        ..Default::default()
    };
    // As istiod: proxies of 1.29 or later get the collector as an HTTP service (which
    // carries the timeout and headers), older ones the legacy fields.
    if at_least(&scope.istio_version, 1, 29) {
        config.collector_service = Some(http_service(
            format!("http://{host}{endpoint}"),
            cluster,
            z.timeout.map(|d| d.as_std()),
            &z.headers,
        ));
    } else {
        config.collector_cluster = cluster;
        config.collector_endpoint = endpoint;
        config.collector_hostname = host;
    }
    if at_least(&scope.istio_version, 1, 28)
        && z.trace_context_option.as_deref() == Some("USE_B3_WITH_W3C_PROPAGATION")
    {
        config.trace_context_option =
            zipkin_config::TraceContextOption::UseB3WithW3cPropagation as i32;
    }
    Some(("envoy.tracers.zipkin", any(&config), z.max_tag_length))
}

/// An OpenTelemetry provider's tracer: over HTTP or gRPC, with its resource detectors and
/// sampler.
fn opentelemetry(
    ctx: &PushContext,
    scope: &ScopeView,
    o: &OpenTelemetryProvider,
) -> Option<Tracer> {
    let (host, cluster) = collector(ctx, &o.service, o.port)?;
    let mut config = OpenTelemetryConfig {
        service_name: service_cluster(scope),
        ..Default::default()
    };
    match &o.http {
        Some(h) => {
            config.http_service = Some(http_service(
                format!("{host}/{}", h.path.trim_start_matches('/')),
                cluster.clone(),
                h.timeout.map(|d| d.as_std()),
                &h.headers,
            ))
        }
        None => {
            let grpc = o.grpc.clone().unwrap_or_default();
            config.grpc_service = Some(GrpcService {
                target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                    grpc_service::EnvoyGrpc {
                        cluster_name: cluster.clone(),
                        authority: host.clone(),
                        ..Default::default()
                    },
                )),
                timeout: grpc
                    .timeout
                    .map(|d| crate::xds::generate::shared::util::duration(d.as_std())),
                initial_metadata: grpc
                    .initial_metadata
                    .iter()
                    .map(|h| HeaderValue {
                        key: h.name.clone(),
                        value: h.resolved(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
        }
    }
    if let Some(detectors) = &o.resource_detectors {
        if detectors.environment.is_some() {
            config.resource_detectors.push(TypedExtensionConfig {
                name: "envoy.tracers.opentelemetry.resource_detectors.environment".into(),
                typed_config: Some(any(&EnvironmentResourceDetectorConfig::default())),
            });
        }
        if detectors.dynatrace.is_some() {
            config.resource_detectors.push(TypedExtensionConfig {
                name: "envoy.tracers.opentelemetry.resource_detectors.dynatrace".into(),
                typed_config: Some(any(&DynatraceResourceDetectorConfig::default())),
            });
        }
    }
    if let Some(sampler) = &o.dynatrace_sampler {
        config.sampler = Some(dynatrace_sampler(ctx, o, sampler, &host, &cluster)?);
    }
    Some((
        "envoy.tracers.opentelemetry",
        any(&config),
        o.max_tag_length,
    ))
}

fn datadog(ctx: &PushContext, scope: &ScopeView, d: &CollectorProvider) -> Option<Tracer> {
    let (host, cluster) = collector(ctx, &d.service, d.port)?;
    let config = DatadogConfig {
        collector_cluster: cluster,
        service_name: service_cluster(scope),
        collector_hostname: host,
        ..Default::default()
    };
    Some(("envoy.tracers.datadog", any(&config), d.max_tag_length))
}

fn skywalking(ctx: &PushContext, s: &CollectorProvider) -> Option<Tracer> {
    let (host, cluster) = collector(ctx, &s.service, s.port)?;
    let config = SkyWalkingConfig {
        grpc_service: Some(GrpcService {
            target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                grpc_service::EnvoyGrpc {
                    cluster_name: cluster,
                    authority: host,
                    ..Default::default()
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    };
    // As istiod: SkyWalking always starts a child span upstream, and has no tag limit.
    Some(("envoy.tracers.skywalking", any(&config), 0))
}

/// Tracing that samples `random` percent of requests, client and overall sampling at 100% (as
/// istiod's configureSampling).
fn sampled(random: f64) -> Tracing {
    let percent = |value| Some(Percent { value });
    Tracing {
        client_sampling: percent(100.0),
        overall_sampling: percent(100.0),
        random_sampling: percent(random),
        ..Default::default()
    }
}

/// The tracing settings of the proxy's ProxyConfig (its own, else the mesh's `defaultConfig`:
/// istiod's `ProxyConfigOrDefault`): what applies where a Telemetry says nothing.
#[derive(Debug, Default)]
struct ProxyTracing {
    /// `sampling`, when set (0 is unset; over 100 is istiod's 1%).
    sampling: Option<f64>,
    istio_tags: bool,
    custom_tags: BTreeMap<String, CustomTag>,
    max_path_tag_length: u32,
}

fn proxy_tracing(ctx: &PushContext, scope: &ScopeView) -> ProxyTracing {
    let own;
    let tracing = match &scope.proxy_tracing {
        Some(text) => {
            own = serde_json::from_str::<serde_json::Value>(text).ok();
            own.as_ref()
        }
        None => ctx.mesh.default_proxy_tracing.as_ref(),
    };
    let get = |k: &str| tracing.and_then(|t| t.get(k));
    ProxyTracing {
        sampling: get("sampling")
            .and_then(serde_json::Value::as_f64)
            .filter(|s| *s != 0.0)
            .map(|s| if s > 100.0 { DEFAULT_SAMPLING } else { s }),
        istio_tags: get("enableIstioTags")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(true),
        custom_tags: get("customTags")
            .and_then(|t| serde_json::from_value(t.clone()).ok())
            .unwrap_or_default(),
        max_path_tag_length: get("maxPathTagLength")
            .and_then(serde_json::Value::as_u64)
            .map_or(0, |l| l as u32),
    }
}

/// Envoy's custom tags for Telemetry's (or a ProxyConfig's) tags.
fn envoy_tags(tags: &BTreeMap<String, CustomTag>) -> impl Iterator<Item = EnvoyTag> + '_ {
    tags.iter().map(|(tag, t)| EnvoyTag {
        tag: tag.clone(),
        r#type: Some(match t {
            CustomTag::Literal(l) => custom_tag::Type::Literal(custom_tag::Literal {
                value: l.value.clone(),
            }),
            CustomTag::Environment(e) => custom_tag::Type::Environment(custom_tag::Environment {
                name: e.name.clone(),
                default_value: e.default_value.clone(),
            }),
            CustomTag::Header(h) => custom_tag::Type::RequestHeader(custom_tag::Header {
                name: h.name.clone(),
                default_value: h.default_value.clone(),
            }),
            CustomTag::Formatter(f) => custom_tag::Type::Value(f.value.clone()),
        }),
    })
}

/// Without a Telemetry, MeshConfig's `enableTracing` (istiod's default): the ProxyConfig's
/// sampling, Istio's tags, custom tags and path tag length, no provider, so the tracer in the
/// proxy's bootstrap (pilot-agent writes one) reports; a proxy without one traces nothing.
fn legacy(ctx: &PushContext, scope: &ScopeView) -> Option<Tracing> {
    ctx.mesh.legacy_tracing.as_ref()?;
    let pt = proxy_tracing(ctx, scope);
    let mut tags = if pt.istio_tags {
        istio_tags(scope)
    } else {
        Vec::new()
    };
    tags.extend(envoy_tags(&pt.custom_tags));
    tags.sort_by(|a, b| a.tag.cmp(&b.tag));
    Some(Tracing {
        custom_tags: tags,
        max_path_tag_length: (pt.max_path_tag_length != 0).then_some(UInt32Value {
            value: pt.max_path_tag_length,
        }),
        ..sampled(pt.sampling.unwrap_or(DEFAULT_SAMPLING))
    })
}

/// An HTTP service of a collector (istiod's: Envoy requires a timeout, 5s when none is set),
/// with the provider's headers replacing any of the same name.
fn http_service(
    uri: String,
    cluster: String,
    timeout: Option<std::time::Duration>,
    headers: &[ProviderHeader],
) -> HttpService {
    HttpService {
        http_uri: Some(HttpUri {
            uri,
            http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(cluster)),
            timeout: Some(crate::xds::generate::shared::util::duration(
                timeout.unwrap_or(std::time::Duration::from_secs(5)),
            )),
        }),
        request_headers_to_add: headers
            .iter()
            .map(|h| HeaderValueOption {
                header: Some(HeaderValue {
                    key: h.name.clone(),
                    value: h.resolved(),
                    ..Default::default()
                }),
                append_action: header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd
                    as i32,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// istiod's `configureDynatraceSampler`: Dynatrace's sampling API on the OTLP/HTTP exporter's
/// host (with its timeout and headers), or on the service `httpService` names. `None` (tracing
/// off, logged, as istiod) when neither is there.
fn dynatrace_sampler(
    ctx: &PushContext,
    provider: &crate::config::mesh::OpenTelemetryProvider,
    sampler: &crate::config::mesh::DynatraceSampler,
    host: &str,
    cluster: &str,
) -> Option<TypedExtensionConfig> {
    let service = match (&sampler.http_service, &provider.http) {
        (Some(api), _) => {
            let (api_host, api_cluster) = collector(ctx, &api.service, api.port)?;
            let http = api.http.clone().unwrap_or_default();
            http_service(
                format!("{api_host}/{}", http.path.trim_start_matches('/')),
                api_cluster,
                http.timeout.map(|d| d.as_std()),
                &http.headers,
            )
        }
        (None, Some(exporter)) => http_service(
            format!("{host}/api/v2/samplingConfiguration"),
            cluster.to_string(),
            exporter.timeout.map(|d| d.as_std()),
            &exporter.headers,
        ),
        (None, None) => {
            tracing::warn!(
                "the Dynatrace sampler has no HTTP settings (set its httpService or the provider's http); tracing stays off"
            );
            return None;
        }
    };
    Some(TypedExtensionConfig {
        name: "envoy.tracers.opentelemetry.samplers.dynatrace".into(),
        typed_config: Some(any(&DynatraceSamplerConfig {
            tenant: sampler.tenant.clone(),
            cluster_id: sampler.cluster_id,
            root_spans_per_minute: sampler.root_spans_per_minute,
            http_service: Some(service),
        })),
    })
}

/// A provider's service (`host` or `namespace/host`) and port as (hostname, outbound cluster).
fn collector(ctx: &PushContext, service: &str, port: u32) -> Option<(String, String)> {
    let host = service.rsplit_once('/').map_or(service, |(_, h)| h);
    let Some(svc) = ctx.registry.services.get(host) else {
        tracing::warn!(
            service,
            "tracing provider's service is not in the registry; tracing stays off"
        );
        return None;
    };
    Some((
        svc.hostname.clone(),
        crate::xds::generate::shared::util::outbound_cluster(port, "", &svc.hostname),
    ))
}

/// The proxy's service cluster, as the agent names it (`<canonical service>.<namespace>`): the
/// span's service name.
fn service_cluster(scope: &ScopeView) -> String {
    let name = scope
        .labels
        .get("service.istio.io/canonical-name")
        .or_else(|| scope.labels.get("app.kubernetes.io/name"))
        .or_else(|| scope.labels.get("app"))
        .map_or("istio-proxy", String::as_str);
    format!("{name}.{}", scope.namespace)
}

/// istiod's service tags on every span.
fn istio_tags(scope: &ScopeView) -> Vec<EnvoyTag> {
    let label = |k: &str, default: &str| {
        scope
            .labels
            .get(k)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    };
    let literal = |tag: &str, value: String| EnvoyTag {
        tag: tag.into(),
        r#type: Some(custom_tag::Type::Literal(custom_tag::Literal { value })),
    };
    vec![
        literal(
            "istio.canonical_revision",
            label("service.istio.io/canonical-revision", "latest"),
        ),
        literal(
            "istio.canonical_service",
            label("service.istio.io/canonical-name", "unknown"),
        ),
        literal("istio.cluster_id", scope.trace_cluster_id.clone()),
        literal("istio.mesh_id", scope.trace_mesh_id.clone()),
        literal("istio.namespace", scope.namespace.clone()),
    ]
}

#[cfg(test)]
mod tests;
