//! Gateways: server ports, credentials with revocation lists, gatewayTopology and XFCC.

use super::*;

#[test]
fn gateway_servers_sharing_a_port_never_produce_conflicting_chains() {
    let yaml = concat!(
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: a}\n",
        "spec:\n  selector: {app: gw}\n  servers:\n",
        "  - {port: {number: 8443, name: one, protocol: HTTPS}, hosts: ['*'], tls: {mode: SIMPLE, credentialName: one}}\n",
        "  - {port: {number: 8443, name: two, protocol: HTTPS}, hosts: ['*'], tls: {mode: SIMPLE, credentialName: two}}\n",
        "  - {port: {number: 8443, name: plain, protocol: HTTP}, hosts: ['*']}\n",
    );
    let c = ctx(yaml);
    let gw = labelled("router~10.0.0.5~gw-0.a~a.svc.cluster.local", "gw");
    let l = listener_named(&c, &gw, "0.0.0.0_8443");
    let chains: Vec<(String, String)> = l
        .filter_chains
        .iter()
        .map(|ch| {
            (
                ch.name.clone(),
                ch.filter_chain_match
                    .clone()
                    .unwrap_or_default()
                    .transport_protocol,
            )
        })
        .collect();
    assert_eq!(
        chains,
        [
            ("http.8443".to_string(), "raw_buffer".to_string()),
            ("https.8443.one.gw.a".into(), "".into()),
        ],
        "the duplicate TLS server is dropped; plaintext takes only non-TLS connections"
    );
}

#[test]
fn the_oldest_gateway_keeps_a_port_two_gateways_claim() {
    let gateway = |name: &str, created: &str, credential: &str| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: a, creationTimestamp: \"{created}\"}}\n\
spec:\n  selector: {{app: gw}}\n  servers:\n  - {{port: {{number: 8443, name: tls, protocol: HTTPS}}, hosts: ['*'], tls: {{mode: SIMPLE, credentialName: {credential}}}}}\n"
        )
    };
    // "a-new" sorts first by name, but "z-old" was created first.
    let yaml = gateway("a-new", "2026-02-01T00:00:00Z", "new")
        + &gateway("z-old", "2026-01-01T00:00:00Z", "old");
    let c = ctx(&yaml);
    let gw = labelled("router~10.0.0.5~gw-0.a~a.svc.cluster.local", "gw");
    let l = listener_named(&c, &gw, "0.0.0.0_8443");
    let names: Vec<&str> = l.filter_chains.iter().map(|ch| ch.name.as_str()).collect();
    assert_eq!(names, ["https.8443.tls.z-old.a"]);
}

/// A credential's CA bundle carries its revocation list, as istiod serves it (`ca.crl` of a TLS
/// Secret, `crl` of a generic one): without it a revoked client certificate got in.
#[test]
fn credential_ca_bundles_carry_their_revocation_list() {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        Secret, secret as sds_secret,
    };
    let b64 = |s: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    use crate::source::kube::convert::IntoConfig;
    let store = StoreWriter::default();
    for (name, data) in [
        (
            "tls-style",
            serde_json::json!({"tls.crt": b64("CERT"), "tls.key": b64("KEY"), "ca.crt": b64("CA"), "ca.crl": b64("CRL")}),
        ),
        (
            "generic",
            serde_json::json!({"cert": b64("CERT"), "key": b64("KEY"), "cacert": b64("CA"), "crl": b64("CRL")}),
        ),
        ("no-crl", serde_json::json!({"ca.crt": b64("CA")})),
    ] {
        let secret: k8s_openapi::api::core::v1::Secret =
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "gw"}, "data": data
            }))
            .unwrap();
        store.upsert(secret.into_config());
    }
    let snap = store.snapshot();
    let reg = Arc::new(Registry::build(&snap, "cluster.local"));
    let ctx = PushContext::new(1, snap, reg, MeshSettings::default());
    let mut p = proxy("gw", &[]);
    p.identity = Some(crate::model::identity::Identity {
        trust_domain: "cluster.local".into(),
        namespace: "gw".into(),
        service_account: "gateway".into(),
    });
    let names: std::collections::BTreeSet<String> = [
        "kubernetes://tls-style-cacert",
        "kubernetes://generic-cacert",
        "kubernetes://no-crl-cacert",
    ]
    .map(String::from)
    .into();
    let served: std::collections::BTreeMap<String, (Vec<u8>, Option<Vec<u8>>)> =
        generate(&ctx, &p, &ctx.scope(&p), TypeUrl::Secret, Some(&names))
            .iter()
            .map(|r| {
                let s = Secret::decode(r.any.value.as_slice()).unwrap();
                let Some(sds_secret::Type::ValidationContext(v)) = s.r#type else {
                    panic!("{} is not a CA bundle", s.name);
                };
                let bytes = |d: Option<envoy_types::pb::envoy::config::core::v3::DataSource>| {
                    d.and_then(|d| {
                        match d.specifier {
                Some(
                    envoy_types::pb::envoy::config::core::v3::data_source::Specifier::InlineBytes(
                        b,
                    ),
                ) => Some(b),
                _ => None,
            }
                    })
                };
                (s.name, (bytes(v.trusted_ca).unwrap(), bytes(v.crl)))
            })
            .collect();
    assert_eq!(
        served["kubernetes://tls-style-cacert"],
        (b"CA".to_vec(), Some(b"CRL".to_vec()))
    );
    assert_eq!(
        served["kubernetes://generic-cacert"],
        (b"CA".to_vec(), Some(b"CRL".to_vec()))
    );
    assert_eq!(served["kubernetes://no-crl-cacert"], (b"CA".to_vec(), None));
}

/// A gateway's HTTP connection manager as istiod's `buildGatewayConnectionManager` writes it:
/// the client from the connection, `X-Forwarded-For` trusted as far as `gatewayTopology` says
/// (the mesh `defaultConfig`, unless the node sends a ProxyConfig of its own), XFCC handling,
/// and the PROXY protocol listener filter.
#[test]
fn gateway_topology_decides_the_client_address_and_xfcc() {
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
        HttpConnectionManager, http_connection_manager::ForwardClientCertDetails,
    };
    let yaml = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: a}\n\
spec:\n  selector: {app: gw}\n  servers:\n  - {port: {number: 8080, name: http, protocol: HTTP}, hosts: ['*']}\n---\n\
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    defaultConfig:\n      gatewayTopology: {numTrustedProxies: 2, forwardClientCertDetails: FORWARD_ONLY, proxyProtocol: {}}\n";
    let snap = crate::testing::store(yaml).snapshot();
    let (mesh, error) = MeshSettings::default().with_mesh_config(&snap);
    assert_eq!(error, None);
    let c = push_context_with(yaml, mesh);
    let hcm_of = |l: &Listener| {
        let f = &l.filter_chains[0].filters[0];
        let Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(a)) =
            &f.config_type
        else {
            panic!("no HCM");
        };
        HttpConnectionManager::decode(a.value.as_slice()).unwrap()
    };
    let listener_filters = |l: &Listener| {
        l.listener_filters
            .iter()
            .map(|f| f.name.clone())
            .collect::<Vec<_>>()
    };
    // The mesh default.
    let gw = labelled("router~10.0.0.5~gw-0.a~a.svc.cluster.local", "gw");
    let l = listener_named(&c, &gw, "0.0.0.0_8080");
    let hcm = hcm_of(&l);
    assert_eq!(hcm.use_remote_address.map(|b| b.value), Some(true));
    assert_eq!(hcm.xff_num_trusted_hops, 2);
    assert_eq!(
        hcm.forward_client_cert_details,
        ForwardClientCertDetails::ForwardOnly as i32
    );
    assert!(hcm.set_current_client_cert_details.is_none());
    assert_eq!(
        listener_filters(&l),
        ["envoy.filters.listener.proxy_protocol"]
    );
    // The node's own ProxyConfig wins, even without a topology (istiod's ProxyConfigOrDefault).
    let mut own = gw.clone();
    own.proxy_config = Some(serde_json::json!({"concurrency": 2}));
    let l = listener_named(&c, &own, "0.0.0.0_8080");
    let hcm = hcm_of(&l);
    assert_eq!(hcm.use_remote_address.map(|b| b.value), Some(true));
    assert_eq!(hcm.xff_num_trusted_hops, 0);
    assert_eq!(
        hcm.forward_client_cert_details,
        ForwardClientCertDetails::SanitizeSet as i32
    );
    let set = hcm.set_current_client_cert_details.unwrap();
    assert!(set.subject.is_some_and(|b| b.value) && set.cert && set.dns && set.uri);
    assert!(listener_filters(&l).is_empty());
}

/// A gateway's VirtualService routes whose `sourceLabels` or `sourceNamespace` the gateway's own
/// pod does not match are left out, as istiod's sourceMatchHTTP leaves them (they were applied to
/// every gateway).
#[test]
fn gateway_routes_keep_only_matches_whose_source_is_this_gateway() {
    let yaml = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: a}
spec:
  selector: {app: gw}
  servers: [{port: {number: 8080, name: http, protocol: HTTP}, hosts: ['*']}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: a}
spec:
  hosts: [web.example.com]
  gateways: [gw]
  http:
  - name: other-pods
    match: [{uri: {prefix: /x}, sourceLabels: {app: other}}]
    route: [{destination: {host: web.example.com}}]
  - name: other-namespace
    match: [{uri: {prefix: /y}, sourceNamespace: elsewhere}]
    route: [{destination: {host: web.example.com}}]
  - name: this-gateway
    match: [{uri: {prefix: /z}, sourceLabels: {app: gw}, sourceNamespace: a}]
    route: [{destination: {host: web.example.com}}]
"#;
    let c = ctx(yaml);
    let gw = labelled("router~10.0.0.5~gw-0.a~a.svc.cluster.local", "gw");
    let rc = route_config(&c, &gw, "http.8080");
    let names: Vec<&str> = rc
        .virtual_hosts
        .iter()
        .flat_map(|v| v.routes.iter().map(|r| r.name.as_str()))
        .collect();
    assert_eq!(names, ["this-gateway"]);
}

/// istiod reads a VirtualService's route semantics from its annotation on any object, not only
/// on those it derives: a user's VirtualService saying `ingress` semantics has its path prefixes
/// match whole segments, as a derived Ingress's do; without it, a prefix is a string prefix.
#[test]
fn a_virtual_service_annotated_with_ingress_semantics_takes_them() {
    let yaml = |annotations: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: a}}\n\
spec: {{selector: {{app: gw}}, servers: [{{port: {{number: 80, name: http, protocol: HTTP}}, hosts: ['*']}}]}}\n\
---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: web, namespace: a{annotations}}}\n\
spec: {{hosts: [web.example.com], gateways: [gw], http: [{{match: [{{uri: {{prefix: /api}}}}], route: [{{destination: {{host: web.example.com}}}}]}}]}}\n"
        )
    };
    let gw = labelled("router~10.0.0.5~gw-0.a~a.svc.cluster.local", "gw");
    let path = |yaml: &str| {
        let rc = route_config(&ctx(yaml), &gw, "http.80");
        rc.virtual_hosts[0].routes[0]
            .r#match
            .clone()
            .and_then(|m| m.path_specifier)
    };
    use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
    assert_eq!(
        path(&yaml(
            ", annotations: {internal.istio.io/route-semantics: ingress}"
        )),
        Some(PathSpecifier::PathSeparatedPrefix("/api".into()))
    );
    assert_eq!(path(&yaml("")), Some(PathSpecifier::Prefix("/api".into())));
}

/// As istiod's `VirtualServicesForGateway`: a VirtualService bound to a gateway serves that
/// gateway's proxies only where it is exported to their namespace (`exportTo: ["."]` in another
/// namespace keeps it away), and a mesh `defaultVirtualServiceExportTo` applies to those that
/// name none.
#[test]
fn gateways_take_only_virtual_services_exported_to_them() {
    let vs = |name: &str, export: &str| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: apps}}\n\
spec: {{hosts: [{name}.example.com], gateways: [edge/gw], {export}http: [{{route: [{{destination: {{host: {name}.apps.svc.cluster.local}}}}]}}]}}\n"
        )
    };
    let yaml = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: edge}\n\
spec: {selector: {app: gw}, servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*/*']}]}\n"
        .to_string()
        + &vs("open", "")
        + &vs("private", "exportTo: ['.'], ")
        + &vs("shared", "exportTo: [edge], ");
    let gw = labelled("router~10.0.0.5~gw-0.edge~edge.svc.cluster.local", "gw");
    let hosts = |c: &PushContext| -> Vec<String> {
        let mut hosts: Vec<String> = route_config(c, &gw, "http.80")
            .virtual_hosts
            .iter()
            .flat_map(|v| v.domains.clone())
            .filter(|d| !d.contains(':'))
            .collect();
        hosts.sort();
        hosts
    };
    assert_eq!(
        hosts(&ctx(&yaml)),
        ["open.example.com", "shared.example.com"]
    );
    let mesh = MeshSettings {
        default_virtual_service_export_to: vec![".".into()],
        ..MeshSettings::default()
    };
    assert_eq!(
        hosts(&push_context_with(&yaml, mesh)),
        ["shared.example.com"]
    );
}

/// A managed Gateway's certificate goes to its proxies because the Gateway's listener references
/// it (istiod's verified certificate references), not because the proxy may read Secrets: a
/// Secret of its namespace and one a ReferenceGrant lets it use are served to a service account
/// with no Secret permission; a Secret no listener names, a `kubernetes://` name, and a proxy of
/// another Gateway get nothing.
#[test]
fn a_gateways_certificate_is_authorised_by_its_listener_reference() {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
    let secret = |ns: &str, name: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}}}\ntype: kubernetes.io/tls\ndata: {{tls.crt: Q0VSVA==, tls.key: S0VZ}}\n"
        )
    };
    let yaml = [
        secret("edge", "web-cert"),
        secret("edge", "unreferenced"),
        secret("certs", "shared"),
        "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: edge-certs, namespace: certs}\nspec: {from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: edge}], to: [{group: '', kind: Secret}]}\n".to_string(),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: web, namespace: edge}\nspec:\n  gatewayClassName: istio\n  listeners:\n  - {name: own, port: 443, protocol: HTTPS, hostname: a.example.com, tls: {certificateRefs: [{name: web-cert}]}}\n  - {name: shared, port: 443, protocol: HTTPS, hostname: b.example.com, tls: {certificateRefs: [{name: shared, namespace: certs}]}}\n".to_string(),
    ]
    .join("---\n");
    let c = ctx(&yaml);
    let gateway = |pod: &str, gateway_name: &str| {
        let mut p = crate::testing::proxy(
            &format!("router~10.0.0.7~{pod}.edge~edge.svc.cluster.local"),
            &[],
            &[("gateway.networking.k8s.io/gateway-name", gateway_name)],
        );
        p.identity = Some(crate::model::identity::Identity {
            trust_domain: "cluster.local".into(),
            namespace: "edge".into(),
            service_account: format!("{gateway_name}-istio"),
        });
        p.secrets_refused = Some("may not list Secrets".into());
        p
    };
    let names: std::collections::BTreeSet<String> = [
        "kubernetes-gateway://edge/web-cert",
        "kubernetes-gateway://certs/shared",
        "kubernetes-gateway://edge/unreferenced",
        "kubernetes://edge/web-cert",
    ]
    .map(String::from)
    .into();
    let served = |p: &Proxy| -> Vec<String> {
        generate(&c, p, &c.scope(p), TypeUrl::Secret, Some(&names))
            .iter()
            .map(|r| Secret::decode(r.any.value.as_slice()).unwrap().name)
            .collect()
    };
    assert_eq!(
        served(&gateway("web-istio-0", "web")),
        [
            "kubernetes-gateway://certs/shared",
            "kubernetes-gateway://edge/web-cert"
        ]
    );
    assert!(served(&gateway("other-istio-0", "other")).is_empty());
}
