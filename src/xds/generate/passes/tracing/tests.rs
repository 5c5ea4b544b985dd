//! Telemetry tracing as istiod configures it, provider by provider and setting by setting.

use super::*;
use prost::Message;

const BASE: &str = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: zipkin, namespace: istio-system}\nspec:\n  hosts: [zipkin.istio-system.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports: [{number: 9411, name: http, protocol: HTTP}]\n  resolution: STATIC\n  endpoints: [{address: 127.0.0.1}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    extensionProviders:\n    - name: zipkin\n      zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}\n    - name: nowhere\n      zipkin: {service: missing.example.com, port: 9411}\n---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: mesh-default, namespace: istio-system}\nspec:\n  tracing: [{providers: [{name: zipkin}], randomSamplingPercentage: 20}]\n";

/// (client tracing, server tracing) for a sidecar of namespace `shop` under `extra`.
fn modes(extra: &str) -> (Option<Tracing>, Option<Tracing>) {
    modes_of(&format!("{BASE}{extra}"), &[])
}

/// (client tracing, server tracing) for a sidecar of namespace `shop` with node `metadata`,
/// under the objects of `yaml` (its mesh config included); tracing must be configured.
fn modes_of(yaml: &str, metadata: &[(&str, &str)]) -> (Option<Tracing>, Option<Tracing>) {
    let ctx = crate::testing::push_context_with_mesh_config(yaml);
    let p = crate::testing::sidecar("shop", metadata);
    let scope = ctx.scope(&p);
    let telemetries = crate::xds::generate::passes::access_log::applicable(&ctx, &scope);
    let (client, server) = merged(&ctx, &telemetries).expect("tracing configured");
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
        modes_of(&yaml, &[]).0
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
        modes_of(&yaml, &[("ISTIO_VERSION", version)])
            .0
            .expect("traced")
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
        modes_of(&yaml, &[("ISTIO_VERSION", version)]).0
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
        let ctx = crate::testing::push_context_with_mesh_config(&yaml);
        let p = crate::testing::sidecar("shop", &[]);
        let scope = ctx.scope(&p);
        crate::xds::generate::generate(&ctx, &p, &scope, crate::xds::types::TypeUrl::Listener, None)
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
        crate::testing::push_context_with_mesh_config(&yaml)
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
    // The mesh's custom tags and path tag length; a proxy's own ProxyConfig wins.
    let tagged = settings(
        "defaultConfig: {tracing: {maxPathTagLength: 99, customTags: {team: {literal: {value: shop}}}}}",
    );
    let t = legacy(&tagged, &tagged.scope(&p)).unwrap();
    assert!(t.custom_tags.iter().any(|t| t.tag == "team"));
    assert_eq!(t.max_path_tag_length.map(|v| v.value), Some(99));
    let mut own = crate::testing::sidecar("shop", &[]);
    own.proxy_config = Some(serde_json::json!({
        "tracing": {"sampling": 50, "customTags": {"pod": {"environment": {"name": "POD_NAME"}}}}
    }));
    let t = legacy(&tagged, &tagged.scope(&own)).unwrap();
    assert!(t.custom_tags.iter().any(|t| t.tag == "pod"));
    assert!(!t.custom_tags.iter().any(|t| t.tag == "team"));
    assert_eq!(t.random_sampling.map(|p| p.value), Some(50.0));
    assert!(t.max_path_tag_length.is_none());
}

/// With a Telemetry: its tags, else the ProxyConfig's; its sampling, else the ProxyConfig's;
/// a Dynatrace sampler takes every span (100%).
#[test]
fn telemetry_falls_back_to_the_proxy_config() {
    let mesh = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    defaultConfig: {tracing: {sampling: 30, maxPathTagLength: 77, customTags: {team: {literal: {value: shop}}}}}\n    extensionProviders:\n    - name: zipkin\n      zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}\n    - name: dt\n      opentelemetry: {service: zipkin.istio-system.svc.cluster.local, port: 9411, http: {path: /v1/traces}, dynatraceSampler: {tenant: t}}\n";
    let svc = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: zipkin, namespace: istio-system}\nspec:\n  hosts: [zipkin.istio-system.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports: [{number: 9411, name: http, protocol: HTTP}]\n  resolution: STATIC\n  endpoints: [{address: 127.0.0.1}]\n";
    let trace = |entry: &str| {
        let yaml = format!(
            "{svc}{mesh}---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: mesh-default, namespace: istio-system}}\nspec:\n  tracing: [{entry}]\n"
        );
        modes_of(&yaml, &[]).0.unwrap()
    };
    let t = trace("{providers: [{name: zipkin}]}");
    assert_eq!(t.random_sampling.map(|p| p.value), Some(30.0));
    assert!(t.custom_tags.iter().any(|t| t.tag == "team"));
    assert_eq!(t.max_path_tag_length.map(|v| v.value), Some(77));
    let t = trace(
        "{providers: [{name: zipkin}], randomSamplingPercentage: 5, customTags: {own: {literal: {value: x}}}}",
    );
    assert_eq!(t.random_sampling.map(|p| p.value), Some(5.0));
    assert!(t.custom_tags.iter().any(|t| t.tag == "own"));
    assert!(!t.custom_tags.iter().any(|t| t.tag == "team"));
    let t = trace("{providers: [{name: dt}], randomSamplingPercentage: 5}");
    assert_eq!(t.random_sampling.map(|p| p.value), Some(100.0));
}

/// Spans name the proxy's own mesh and cluster, as istiod's service tags: its `MESH_ID` and
/// `CLUSTER_ID` metadata (what the injector sets from `global.meshID` and the cluster), else
/// `unknown` (before, the mesh's trust domain and the control plane's cluster).
#[test]
fn spans_name_the_proxys_mesh_and_cluster() {
    let tag = |metadata: &[(&str, &str)], name: &str| -> String {
        let (client, _) = modes_of(BASE, metadata);
        let t = client.expect("client tracing");
        match t
            .custom_tags
            .iter()
            .find(|t| t.tag == name)
            .and_then(|t| t.r#type.clone())
        {
            Some(custom_tag::Type::Literal(l)) => l.value,
            other => panic!("{name}: {other:?}"),
        }
    };
    let named = [("MESH_ID", "mesh1"), ("CLUSTER_ID", "west")];
    assert_eq!(tag(&named, "istio.mesh_id"), "mesh1");
    assert_eq!(tag(&named, "istio.cluster_id"), "west");
    assert_eq!(tag(&[], "istio.mesh_id"), "unknown");
    assert_eq!(tag(&[], "istio.cluster_id"), "unknown");
}
