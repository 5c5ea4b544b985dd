//! The Telemetry API's `tracing`, added by a finishing pass as istiod configures it
//! (`pilot/pkg/networking/core/tracing.go`, `Telemetries.Tracing`): the Telemetries that apply to
//! a proxy (root namespace, its namespace, one selecting it) are merged entry by entry and mode by
//! mode (the first provider named wins; `disableSpanReporting`, `randomSamplingPercentage`,
//! `customTags` and `enableIstioTags` override), and every HTTP connection manager of the mode gets
//! Envoy's tracer: `zipkin`, `opentelemetry` (gRPC, or HTTP with `http.path`), `datadog` or
//! `skywalking` from MeshConfig's `extensionProviders`, sampling 1% unless set, Istio's service
//! tags unless turned off, trace context not propagated where `disableContextPropagation` says so
//! (proxies of 1.30 or later, as istiod).
//! MeshConfig's legacy `enableTracing` is warned about and not applied.

use super::finish::{Class, Pass, Typed};
use super::util::any;
use crate::config::mesh::{ExtensionProvider, ProviderHeader};
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
use envoy_types::pb::google::protobuf::{BoolValue, UInt32Value};
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
        let telemetries = super::access_log::applicable(ctx, scope);
        // Per mode: the tracing, and the request id extension when the request id must not
        // decide sampling (`useRequestIdForTraceSampling: false`).
        let with_request_id = |spec: &TracingSpec| {
            let traced = tracing(ctx, scope, spec);
            let request_id = (traced.is_some() && !spec.use_request_id).then(request_id_extension);
            (traced, request_id)
        };
        let (client, server) = match merged(ctx, &telemetries) {
            Some((client, server)) => (with_request_id(&client), with_request_id(&server)),
            None => {
                let legacy = legacy(ctx, scope);
                ((legacy.clone(), None), (legacy, None))
            }
        };
        for r in resources.iter_mut() {
            let (chosen, request_id) = match r.class {
                Class::Proxyless | Class::ProxylessServer => continue,
                Class::SidecarInbound => &server,
                _ => &client,
            };
            if let Some(t) = chosen {
                r.edit_http_connection_managers(|_, hcm| {
                    hcm.tracing = Some(t.clone());
                    if let Some(ext) = request_id {
                        hcm.request_id_extension = Some(ext.clone());
                    }
                });
            }
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
        ("envoy.tracers.zipkin", any(&config), z.max_tag_length)
    } else if let Some(o) = &provider.opentelemetry {
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
                    timeout: grpc.timeout.map(|d| super::util::duration(d.as_std())),
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
        (
            "envoy.tracers.opentelemetry",
            any(&config),
            o.max_tag_length,
        )
    } else if let Some(d) = &provider.datadog {
        let (host, cluster) = collector(ctx, &d.service, d.port)?;
        let config = DatadogConfig {
            collector_cluster: cluster,
            service_name: service_cluster(scope),
            collector_hostname: host,
            ..Default::default()
        };
        ("envoy.tracers.datadog", any(&config), d.max_tag_length)
    } else if let Some(s) = &provider.skywalking {
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
        ("envoy.tracers.skywalking", any(&config), 0)
    } else {
        return None;
    };
    let child_span = scope.proxy_type == ProxyType::Router || provider.skywalking.is_some();
    let mut tags = if spec.istio_tags {
        istio_tags(ctx, scope)
    } else {
        Vec::new()
    };
    tags.extend(
        spec.custom_tags
            .into_iter()
            .flatten()
            .map(|(tag, t)| EnvoyTag {
                tag: tag.clone(),
                r#type: Some(match t {
                    CustomTag::Literal(l) => custom_tag::Type::Literal(custom_tag::Literal {
                        value: l.value.clone(),
                    }),
                    CustomTag::Environment(e) => {
                        custom_tag::Type::Environment(custom_tag::Environment {
                            name: e.name.clone(),
                            default_value: e.default_value.clone(),
                        })
                    }
                    CustomTag::Header(h) => custom_tag::Type::RequestHeader(custom_tag::Header {
                        name: h.name.clone(),
                        default_value: h.default_value.clone(),
                    }),
                    CustomTag::Formatter(f) => custom_tag::Type::Value(f.value.clone()),
                }),
            }),
    );
    tags.sort_by(|a, b| a.tag.cmp(&b.tag));
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
        ..sampled(spec.sampling.unwrap_or(DEFAULT_SAMPLING))
    })
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

/// Without a Telemetry, MeshConfig's `enableTracing` (istiod's default): sampling and Istio's tags,
/// no provider, so the tracer in the proxy's bootstrap (pilot-agent writes one) reports; a proxy
/// without one traces nothing.
fn legacy(ctx: &PushContext, scope: &ScopeView) -> Option<Tracing> {
    let settings = ctx.mesh.legacy_tracing.as_ref()?;
    Some(Tracing {
        custom_tags: if settings.istio_tags {
            istio_tags(ctx, scope)
        } else {
            Vec::new()
        },
        ..sampled(settings.sampling)
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
            timeout: Some(super::util::duration(
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
        super::util::outbound_cluster(port, "", &svc.hostname),
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
fn istio_tags(ctx: &PushContext, scope: &ScopeView) -> Vec<EnvoyTag> {
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
        literal("istio.cluster_id", ctx.mesh.cluster_id.clone()),
        literal("istio.mesh_id", ctx.mesh.trust_domain.clone()),
        literal("istio.namespace", scope.namespace.clone()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    const BASE: &str = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: zipkin, namespace: istio-system}\nspec:\n  hosts: [zipkin.istio-system.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports: [{number: 9411, name: http, protocol: HTTP}]\n  resolution: STATIC\n  endpoints: [{address: 127.0.0.1}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    extensionProviders:\n    - name: zipkin\n      zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}\n    - name: nowhere\n      zipkin: {service: missing.example.com, port: 9411}\n---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: mesh-default, namespace: istio-system}\nspec:\n  tracing: [{providers: [{name: zipkin}], randomSamplingPercentage: 20}]\n";

    /// (client tracing, server tracing) for a sidecar of namespace `shop` under `extra`.
    fn modes(extra: &str) -> (Option<Tracing>, Option<Tracing>) {
        let yaml = format!("{BASE}{extra}");
        let snapshot = crate::testing::store(&yaml).snapshot();
        let (mesh, _) = crate::model::mesh::MeshSettings::default().with_mesh_config(&snapshot);
        let ctx = crate::testing::push_context_with(&yaml, mesh);
        let p = crate::testing::sidecar("shop", &[]);
        let scope = ctx.scope(&p);
        let telemetries = super::super::access_log::applicable(&ctx, &scope);
        let (client, server) = merged(&ctx, &telemetries).unwrap();
        (
            tracing(&ctx, &scope, &client),
            tracing(&ctx, &scope, &server),
        )
    }

    /// MeshConfig `defaultProviders.tracing`: with no Telemetry at all, every proxy traces to
    /// the default provider; a Telemetry that names none still has it.
    #[test]
    fn the_default_tracing_provider_applies_without_a_telemetry() {
        let yaml = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: zipkin, namespace: istio-system}\nspec:\n  hosts: [zipkin.istio-system.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports: [{number: 9411, name: http, protocol: HTTP}]\n  resolution: STATIC\n  endpoints: [{address: 127.0.0.1}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    defaultProviders: {tracing: [zipkin]}\n    extensionProviders:\n    - name: zipkin\n      zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}\n";
        let trace = |extra: &str| {
            let yaml = format!("{yaml}{extra}");
            let snapshot = crate::testing::store(&yaml).snapshot();
            let (mesh, _) = crate::model::mesh::MeshSettings::default().with_mesh_config(&snapshot);
            let ctx = crate::testing::push_context_with(&yaml, mesh);
            let p = crate::testing::sidecar("shop", &[]);
            let scope = ctx.scope(&p);
            let telemetries = super::super::access_log::applicable(&ctx, &scope);
            let (client, _) = merged(&ctx, &telemetries).expect("tracing configured");
            tracing(&ctx, &scope, &client)
        };
        let provider = |t: Option<Tracing>| t.and_then(|t| t.provider).map(|p| p.name);
        assert_eq!(
            provider(trace("")),
            Some("envoy.tracers.zipkin".to_string())
        );
        let sampled = trace(
            "---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: shop, namespace: shop}\nspec:\n  tracing: [{randomSamplingPercentage: 5}]\n",
        );
        assert_eq!(
            sampled
                .as_ref()
                .and_then(|t| t.random_sampling)
                .map(|p| p.value),
            Some(5.0)
        );
        assert!(provider(sampled).is_some());
    }

    /// Datadog and SkyWalking providers as istiod builds them (the collector's cluster and
    /// host; SkyWalking always spawns an upstream span); `disableContextPropagation` reaches
    /// proxies of Istio 1.30 or later only, as istiod sets it.
    #[test]
    fn datadog_skywalking_and_context_propagation_are_istiods() {
        let yaml = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: collector, namespace: istio-system}\nspec:\n  hosts: [collector.istio-system.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports: [{number: 8126, name: grpc, protocol: GRPC}]\n  resolution: STATIC\n  endpoints: [{address: 127.0.0.1}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    extensionProviders:\n    - name: dd\n      datadog: {service: collector.istio-system.svc.cluster.local, port: 8126, maxTagLength: 99}\n    - name: sw\n      skywalking: {service: collector.istio-system.svc.cluster.local, port: 8126}\n";
        let trace = |provider: &str, extra: &str, version: &str| {
            let yaml = format!(
                "{yaml}---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: mesh-default, namespace: istio-system}}\nspec:\n  tracing: [{{providers: [{{name: {provider}}}]{extra}}}]\n"
            );
            let snapshot = crate::testing::store(&yaml).snapshot();
            let (mesh, _) = crate::model::mesh::MeshSettings::default().with_mesh_config(&snapshot);
            let ctx = crate::testing::push_context_with(&yaml, mesh);
            let p = crate::testing::sidecar("shop", &[("ISTIO_VERSION", version)]);
            let scope = ctx.scope(&p);
            let telemetries = super::super::access_log::applicable(&ctx, &scope);
            let (client, _) = merged(&ctx, &telemetries).expect("tracing configured");
            tracing(&ctx, &scope, &client).expect("traced")
        };
        let config = |t: &Tracing| match t.provider.as_ref().and_then(|p| p.config_type.as_ref()) {
            Some(http::ConfigType::TypedConfig(a)) => a.clone(),
            None => panic!("a provider config"),
        };
        let dd = trace("dd", "", "1.30.0");
        assert_eq!(dd.provider.as_ref().unwrap().name, "envoy.tracers.datadog");
        let c = DatadogConfig::decode(config(&dd).value.as_slice()).unwrap();
        assert_eq!(
            c.collector_cluster,
            "outbound|8126||collector.istio-system.svc.cluster.local"
        );
        assert_eq!(
            c.collector_hostname,
            "collector.istio-system.svc.cluster.local"
        );
        assert_eq!(dd.max_path_tag_length.map(|v| v.value), Some(99));
        assert!(dd.spawn_upstream_span.is_none());
        assert!(!dd.no_context_propagation);

        let sw = trace("sw", "", "1.30.0");
        assert_eq!(
            sw.provider.as_ref().unwrap().name,
            "envoy.tracers.skywalking"
        );
        let c = SkyWalkingConfig::decode(config(&sw).value.as_slice()).unwrap();
        match c.grpc_service.and_then(|g| g.target_specifier) {
            Some(grpc_service::TargetSpecifier::EnvoyGrpc(g)) => {
                assert_eq!(
                    g.cluster_name,
                    "outbound|8126||collector.istio-system.svc.cluster.local"
                );
                assert_eq!(g.authority, "collector.istio-system.svc.cluster.local");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(sw.spawn_upstream_span.map(|b| b.value), Some(true));

        let off = ", disableContextPropagation: true";
        assert!(trace("dd", off, "1.30.2").no_context_propagation);
        assert!(!trace("dd", off, "1.29.1").no_context_propagation);
        assert!(!trace("dd", off, "").no_context_propagation);
    }

    /// The provider settings istiod reads, version-gated as istiod gates them: Zipkin's collector
    /// as an HTTP service with timeout and headers for 1.29+ (legacy fields before),
    /// `traceContextOption` for 1.28+; OpenTelemetry's gRPC timeout and metadata, HTTP headers,
    /// resource detectors and the Dynatrace sampler (on the exporter's host, or its own API).
    #[test]
    fn provider_settings_are_istiods() {
        let base = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: collector, namespace: istio-system}\nspec:\n  hosts: [collector.istio-system.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports: [{number: 4317, name: grpc, protocol: GRPC}]\n  resolution: STATIC\n  endpoints: [{address: 127.0.0.1}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    extensionProviders:\n    - name: z\n      zipkin: {service: collector.istio-system.svc.cluster.local, port: 4317, timeout: 2s, traceContextOption: USE_B3_WITH_W3C_PROPAGATION, headers: [{name: x-token, value: t1}, {name: x-env, envName: HOME}]}\n    - name: og\n      opentelemetry: {service: collector.istio-system.svc.cluster.local, port: 4317, grpc: {timeout: 3s, initialMetadata: [{name: authorization, value: k}]}, resourceDetectors: {environment: {}, dynatrace: {}}}\n    - name: oh\n      opentelemetry: {service: collector.istio-system.svc.cluster.local, port: 4317, http: {path: /v1/traces, timeout: 4s, headers: [{name: api-token, value: dt}]}, dynatraceSampler: {tenant: abc, clusterId: 7, rootSpansPerMinute: 100}}\n    - name: broken\n      opentelemetry: {service: collector.istio-system.svc.cluster.local, port: 4317, dynatraceSampler: {tenant: abc}}\n";
        let trace = |provider: &str, version: &str| {
            let yaml = format!(
                "{base}---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: mesh-default, namespace: istio-system}}\nspec:\n  tracing: [{{providers: [{{name: {provider}}}]}}]\n"
            );
            let snapshot = crate::testing::store(&yaml).snapshot();
            let (mesh, _) = crate::model::mesh::MeshSettings::default().with_mesh_config(&snapshot);
            let ctx = crate::testing::push_context_with(&yaml, mesh);
            let p = crate::testing::sidecar("shop", &[("ISTIO_VERSION", version)]);
            let scope = ctx.scope(&p);
            let telemetries = super::super::access_log::applicable(&ctx, &scope);
            let (client, _) = merged(&ctx, &telemetries).expect("tracing configured");
            tracing(&ctx, &scope, &client)
        };
        let config = |t: &Tracing| match t.provider.as_ref().and_then(|p| p.config_type.as_ref()) {
            Some(http::ConfigType::TypedConfig(a)) => a.value.clone(),
            None => panic!("a provider config"),
        };
        let z = ZipkinConfig::decode(config(&trace("z", "1.30.0").unwrap()).as_slice()).unwrap();
        let service = z.collector_service.expect("an HTTP service for 1.29+");
        let uri = service.http_uri.unwrap();
        assert_eq!(
            uri.uri,
            "http://collector.istio-system.svc.cluster.local/api/v2/spans"
        );
        assert_eq!(uri.timeout.map(|d| d.seconds), Some(2));
        let headers: Vec<(String, String)> = service
            .request_headers_to_add
            .iter()
            .map(|h| h.header.clone().unwrap())
            .map(|h| (h.key, h.value))
            .collect();
        assert_eq!(
            headers,
            [
                ("x-token".to_string(), "t1".to_string()),
                (
                    "x-env".to_string(),
                    std::env::var("HOME").unwrap_or_default()
                )
            ]
        );
        assert_eq!(z.trace_context_option, 1);
        assert!(z.collector_cluster.is_empty());
        let old = ZipkinConfig::decode(config(&trace("z", "1.27.0").unwrap()).as_slice()).unwrap();
        assert!(old.collector_service.is_none());
        assert_eq!(
            old.collector_cluster,
            "outbound|4317||collector.istio-system.svc.cluster.local"
        );
        assert_eq!(old.trace_context_option, 0);

        let og = OpenTelemetryConfig::decode(config(&trace("og", "").unwrap()).as_slice()).unwrap();
        let grpc = og.grpc_service.unwrap();
        assert_eq!(grpc.timeout.map(|d| d.seconds), Some(3));
        assert_eq!(grpc.initial_metadata[0].key, "authorization");
        let detectors: Vec<&str> = og
            .resource_detectors
            .iter()
            .map(|d| d.name.as_str())
            .collect();
        assert_eq!(
            detectors,
            [
                "envoy.tracers.opentelemetry.resource_detectors.environment",
                "envoy.tracers.opentelemetry.resource_detectors.dynatrace"
            ]
        );

        let oh = OpenTelemetryConfig::decode(config(&trace("oh", "").unwrap()).as_slice()).unwrap();
        let exporter = oh.http_service.unwrap();
        assert_eq!(
            exporter
                .http_uri
                .as_ref()
                .unwrap()
                .timeout
                .map(|d| d.seconds),
            Some(4)
        );
        assert_eq!(exporter.request_headers_to_add.len(), 1);
        let sampler = oh.sampler.unwrap();
        assert_eq!(
            sampler.name,
            "envoy.tracers.opentelemetry.samplers.dynatrace"
        );
        let dt =
            DynatraceSamplerConfig::decode(sampler.typed_config.unwrap().value.as_slice()).unwrap();
        assert_eq!(
            (dt.tenant.as_str(), dt.cluster_id, dt.root_spans_per_minute),
            ("abc", 7, 100)
        );
        assert_eq!(
            dt.http_service.unwrap().http_uri.unwrap().uri,
            "collector.istio-system.svc.cluster.local/api/v2/samplingConfiguration"
        );
        // A Dynatrace sampler with nowhere to ask: tracing off, as istiod.
        assert!(trace("broken", "").is_none());
    }

    /// `useRequestIdForTraceSampling: false` gives the connection managers Envoy's UUID request
    /// id told not to decide sampling; left unset, they keep Envoy's default.
    #[test]
    fn the_request_id_decides_sampling_unless_told_not_to() {
        let lds = |extra: &str| {
            let yaml = format!("{BASE}{extra}");
            let snapshot = crate::testing::store(&yaml).snapshot();
            let (mesh, _) = crate::model::mesh::MeshSettings::default().with_mesh_config(&snapshot);
            let ctx = crate::testing::push_context_with(&yaml, mesh);
            let p = crate::testing::sidecar("shop", &[]);
            let scope = ctx.scope(&p);
            super::super::generate(&ctx, &p, &scope, crate::xds::types::TypeUrl::Listener, None)
                .iter()
                .any(|r| {
                    let needle = b"envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig";
                    r.any.value.windows(needle.len()).any(|w| w == needle)
                })
        };
        assert!(!lds(""), "Envoy's default");
        assert!(lds(
            "---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: shop, namespace: shop}\nspec:\n  tracing: [{useRequestIdForTraceSampling: false}]\n"
        ));
    }

    /// istiod's merge: a namespace entry for one mode overrides the root's for that mode only;
    /// a provider whose service is not in the registry leaves tracing off.
    #[test]
    fn telemetry_tracing_merges_by_level_and_mode() {
        let (client, server) = modes("");
        let sampling =
            |t: &Option<Tracing>| t.as_ref().and_then(|t| t.random_sampling).map(|p| p.value);
        assert_eq!(
            (sampling(&client), sampling(&server)),
            (Some(20.0), Some(20.0))
        );
        let (client, server) = modes(
            "---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: shop, namespace: shop}\nspec:\n  tracing: [{match: {mode: SERVER}, disableSpanReporting: true}]\n",
        );
        assert!(
            client.is_some() && server.is_none(),
            "server spans off in shop only"
        );
        let (client, _) = modes(
            "---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: shop, namespace: shop}\nspec:\n  tracing: [{providers: [{name: nowhere}]}]\n",
        );
        assert!(
            client.is_none(),
            "a provider without a service traces nothing"
        );
    }

    /// MeshConfig's `enableTracing` (on by default, as istiod's mesh defaults) without a
    /// Telemetry: sampling from `defaultConfig.tracing.sampling` (1% unset) and Istio's tags, no
    /// provider; off when `enableTracing: false`.
    #[test]
    fn enable_tracing_samples_and_tags_for_the_bootstrap_tracer() {
        let settings = |mesh: &str| {
            let yaml = format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: istio, namespace: istio-system}}\ndata:\n  mesh: |\n    {mesh}\n"
            );
            let snapshot = crate::testing::store(&yaml).snapshot();
            let (mesh, _) = crate::model::mesh::MeshSettings::default().with_mesh_config(&snapshot);
            crate::testing::push_context_with(&yaml, mesh)
        };
        let p = crate::testing::sidecar("shop", &[]);
        let default = crate::testing::push_context("");
        let t = legacy(&default, &default.scope(&p)).expect("on by default");
        assert_eq!(t.random_sampling.map(|p| p.value), Some(1.0));
        assert!(t.provider.is_none(), "the bootstrap's tracer reports");
        assert!(t.custom_tags.iter().any(|t| t.tag == "istio.namespace"));
        let sampled = settings("defaultConfig: {tracing: {sampling: 25}}");
        let t = legacy(&sampled, &sampled.scope(&p)).unwrap();
        assert_eq!(t.random_sampling.map(|p| p.value), Some(25.0));
        let off = settings("enableTracing: false");
        assert!(legacy(&off, &off.scope(&p)).is_none());
    }
}
