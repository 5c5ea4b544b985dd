//! CDS: DestinationRule policies, TLS origination and automatic mTLS, DNS families, inbound clusters.

use super::*;

#[test]
fn destination_rule_policies_become_cluster_settings() {
    let yaml = format!(
        "{}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: web, namespace: a}}\nspec:\n  host: web\n  trafficPolicy:\n    loadBalancer: {{consistentHash: {{httpHeaderName: x-user}}}}\n    connectionPool: {{tcp: {{maxConnections: 7, connectTimeout: 250ms}}, http: {{http2MaxRequests: 9}}}}\n    outlierDetection: {{consecutive5xxErrors: 3, interval: 5s, baseEjectionTime: 30s}}\n    tls: {{mode: SIMPLE, caCertificates: /etc/ca.pem, sni: web.example}}\n  subsets:\n  - name: v1\n    labels: {{version: v1}}\n    trafficPolicy: {{loadBalancer: {{simple: ROUND_ROBIN}}}}\n",
        se("a", "web", "GRPC")
    );
    let c = ctx(&yaml);
    let p = proxy("a", &[]);
    let base = cluster(&c, &p, "outbound|80||web.a.svc.cluster.local");
    assert_eq!(base.lb_policy, LbPolicy::RingHash as i32);
    let t = &base.circuit_breakers.as_ref().unwrap().thresholds[0];
    assert_eq!(
        (
            t.max_connections.unwrap().value,
            t.max_requests.unwrap().value
        ),
        (7, 9)
    );
    assert_eq!(base.connect_timeout.unwrap().nanos, 250_000_000);
    let od = base.outlier_detection.as_ref().unwrap();
    assert_eq!(
        (
            od.consecutive_5xx.unwrap().value,
            od.enforcing_consecutive_5xx.unwrap().value
        ),
        (3, 100)
    );
    assert!(base.transport_socket.is_some(), "SIMPLE TLS");
    assert!(
        base.typed_extension_protocol_options
            .contains_key("envoy.extensions.upstreams.http.v3.HttpProtocolOptions"),
        "gRPC port speaks HTTP/2 upstream"
    );
    let v1 = cluster(&c, &p, "outbound|80|v1|web.a.svc.cluster.local");
    assert_eq!(
        v1.lb_policy,
        LbPolicy::RoundRobin as i32,
        "subset policy overrides"
    );
    let rc = route_config(&c, &p, "80");
    let Some(route::Action::Route(action)) = &rc.virtual_hosts[0].routes[0].action else {
        panic!()
    };
    assert!(
        format!("{:?}", action.hash_policy).contains("x-user"),
        "hash policy on the route"
    );
}

#[test]
fn automatic_mtls_for_mesh_endpoints_when_the_proxy_has_an_identity() {
    let c = ctx(&workload_yaml(""));
    let with = cluster(&c, &verified("b"), "outbound|80||app.a.svc.cluster.local");
    let names: Vec<&str> = with
        .transport_socket_matches
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(names, ["tlsMode-istio", "tlsMode-disabled"]);
    // The TLS server name names the cluster, as istiod's (`connection.sni` policies read it).
    let sni = b"outbound_.80_._.app.a.svc.cluster.local";
    let bytes = with.encode_to_vec();
    assert!(bytes.windows(sni.len()).any(|w| w == sni));
    let without = cluster(&c, &proxy("b", &[]), "outbound|80||app.a.svc.cluster.local");
    assert!(without.transport_socket_matches.is_empty());

    let scope = c.scope(&verified("b"));
    let names = ["outbound|80||app.a.svc.cluster.local".to_string()]
        .into_iter()
        .collect();
    let cla = generate(&c, &verified("b"), &scope, TypeUrl::Endpoint, Some(&names));
    let cla = envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment::decode(
        cla[0].any.value.as_slice(),
    )
    .unwrap();
    let md = cla.endpoints[0].lb_endpoints[0].metadata.clone().unwrap();
    assert!(
        md.filter_metadata
            .contains_key("envoy.transport_socket_match")
    );
}

/// Automatic mTLS follows istiod's `BestEffortInferServiceMTLSMode` and MeshConfig: a service
/// whose namespace's (or the mesh's) PeerAuthentication is DISABLE is reached in plain text, and
/// `enableAutoMtls: false` turns automatic mTLS off. Before, both still sent mTLS, which a
/// DISABLE workload's sidecar does not accept.
#[test]
fn automatic_mtls_follows_peer_authentication_disable_and_the_mesh_switch() {
    let name = "outbound|80||app.a.svc.cluster.local";
    let matches = |yaml: &str| -> usize {
        let c = crate::testing::push_context_with_mesh_config(yaml);
        cluster(&c, &verified("b"), name)
            .transport_socket_matches
            .len()
    };
    assert_eq!(matches(&workload_yaml("")), 2, "on by default");
    let disable = |ns: &str| {
        format!(
            "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: default, namespace: {ns}}}\nspec: {{mtls: {{mode: DISABLE}}}}\n"
        )
    };
    assert_eq!(
        matches(&workload_yaml(&disable("a"))),
        0,
        "namespace DISABLE"
    );
    assert_eq!(
        matches(&workload_yaml(&disable("istio-system"))),
        0,
        "mesh DISABLE"
    );
    let strict_ns = "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: default, namespace: a}\nspec: {mtls: {mode: STRICT}}\n";
    assert_eq!(
        matches(&workload_yaml(&format!(
            "{}{strict_ns}",
            disable("istio-system")
        ))),
        2,
        "the namespace's STRICT over the mesh's DISABLE"
    );
    let off = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    enableAutoMtls: false\n";
    assert_eq!(matches(&workload_yaml(off)), 0, "enableAutoMtls: false");
}

/// DNS clusters resolve the address family the proxy has, as istiod does with dual stack off:
/// IPv6 only for a proxy whose every address is IPv6, IPv4 only otherwise.
#[test]
fn dns_clusters_resolve_the_proxys_address_family() {
    use envoy_types::pb::envoy::config::cluster::v3::cluster::DnsLookupFamily;
    let c = ctx("apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: default}
spec: {hosts: [db.example.com], ports: [{number: 8080, name: http, protocol: HTTP}], resolution: DNS}
");
    let family = |p: &Proxy| cluster(&c, p, "outbound|8080||db.example.com").dns_lookup_family;
    assert_eq!(family(&vm_at("10.0.0.5")), DnsLookupFamily::V4Only as i32);
    assert_eq!(family(&vm_at("fd00::5")), DnsLookupFamily::V6Only as i32);
    let dual = proxy("default", &[("INSTANCE_IPS", "fd00::9,10.0.0.9")]);
    assert_eq!(family(&dual), DnsLookupFamily::V4Only as i32);
}

/// Inbound clusters speak the port's protocol to the application: HTTP/2 for gRPC and HTTP/2
/// ports (a gRPC server would otherwise get HTTP/1.1), nothing added for HTTP/1.1 ports.
#[test]
fn inbound_clusters_speak_http2_to_grpc_apps() {
    let c = ctx("
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: vms}
spec:
  hosts: [api.vms.svc.cluster.local]
  ports: [{number: 7070, name: grpc, protocol: GRPC}, {number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.9.0.3}]
");
    let vm = vm_at("10.9.0.3");
    let h2 = |name: &str| {
        cluster(&c, &vm, name)
            .typed_extension_protocol_options
            .values()
            .any(|opts| opts.type_url.ends_with("HttpProtocolOptions"))
    };
    assert!(h2("inbound|7070||"));
    assert!(!h2("inbound|8080||"));
}

/// A ServiceEntry's `subjectAltNames` pin the identity its servers must present under mTLS, as
/// istiod adds them to the service's accounts.
#[test]
fn service_entry_subject_alt_names_pin_the_server_identity() {
    let c = ctx("apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: a}
spec:
  hosts: [db.a.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.2.0.1}]
  subjectAltNames: [\"spiffe://cluster.local/ns/a/sa/db\"]
");
    let cl = cluster(&c, &verified("b"), "outbound|5432||db.a.svc.cluster.local");
    let socket = format!("{:?}", cl.transport_socket_matches);
    assert!(
        String::from_utf8_lossy(
            &cl.transport_socket_matches[0]
                .transport_socket
                .as_ref()
                .and_then(|t| match &t.config_type {
                    Some(envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(a)) => Some(a.value.clone()),
                    _ => None,
                })
                .unwrap_or_default()
        )
        .contains("spiffe://cluster.local/ns/a/sa/db"),
        "{socket}"
    );
}

/// `insecureSkipVerify` turns server verification off for `credentialName` origination too, as
/// istiod; without it the secret's CA verifies the server.
#[test]
fn credential_name_origination_verifies_unless_told_not_to() {
    use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext;
    let validated = |skip: bool| {
        let c = ctx(&format!(
            "{}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: web, namespace: a}}\nspec: {{host: web.a.svc.cluster.local, trafficPolicy: {{tls: {{mode: SIMPLE, credentialName: web-ca, insecureSkipVerify: {skip}}}}}}}\n",
            se("a", "web", "HTTP")
        ));
        let cl = cluster(&c, &proxy("a", &[]), "outbound|80||web.a.svc.cluster.local");
        let Some(ConfigType::TypedConfig(any)) = cl.transport_socket.and_then(|t| t.config_type)
        else {
            panic!("no TLS transport socket");
        };
        UpstreamTlsContext::decode(any.value.as_slice())
            .unwrap()
            .common_tls_context
            .and_then(|c| c.validation_context_type)
            .is_some()
    };
    assert!(validated(false));
    assert!(!validated(true));
}

#[test]
fn destination_rule_workload_selector_applies_to_selected_proxies_only() {
    let yaml = format!(
        "{}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: all, namespace: a}}\n\
spec: {{host: web.a.svc.cluster.local, trafficPolicy: {{connectionPool: {{tcp: {{maxConnections: 5}}}}}}}}\n\
---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: for-x, namespace: a}}\n\
spec: {{host: web.a.svc.cluster.local, workloadSelector: {{matchLabels: {{app: x}}}}, trafficPolicy: {{connectionPool: {{tcp: {{maxConnections: 7}}}}}}}}\n",
        se("a", "web", "HTTP")
    );
    let c = ctx(&yaml);
    let max = |p: &Proxy| {
        cluster(&c, p, "outbound|80||web.a.svc.cluster.local")
            .circuit_breakers
            .unwrap()
            .thresholds[0]
            .max_connections
            .unwrap()
            .value
    };
    let x = labelled("sidecar~10.0.0.1~x-1.a~a.svc.cluster.local", "x");
    let y = labelled("sidecar~10.0.0.2~y-1.a~a.svc.cluster.local", "y");
    let elsewhere = labelled("sidecar~10.0.0.3~x-1.b~b.svc.cluster.local", "x");
    assert_eq!(max(&x), 7, "the selected proxy gets its own rule");
    assert_eq!(max(&y), 5, "others get the rule without a selector");
    assert_eq!(
        max(&elsewhere),
        5,
        "a selector applies in its own namespace only"
    );
}

#[test]
fn tcp_proxies_take_the_destination_rules_idle_timeout() {
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
    let dr = "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: db, namespace: a}\n\
spec: {host: db.a.svc.cluster.local, trafficPolicy: {connectionPool: {tcp: {idleTimeout: 30s}}}}\n";
    let c = ctx(&format!("{OUTBOUND_MESH}{dr}"));
    let all = listeners_of(&c, &proxy("a", &[]));
    let db = all.iter().find(|l| l.name == "10.96.0.5_3306").unwrap();
    let Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(a)) =
        &db.filter_chains[0].filters[0].config_type
    else {
        panic!("typed config")
    };
    let tcp = TcpProxy::decode(a.value.as_slice()).unwrap();
    assert_eq!(tcp.idle_timeout.unwrap().seconds, 30);
}

#[test]
fn sidecar_inbound_connection_pool_limits_inbound_clusters() {
    let sidecar = "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: a}\n\
spec: {inboundConnectionPool: {tcp: {maxConnections: 9}, http: {http1MaxPendingRequests: 3}}}\n";
    let c = ctx(&workload_yaml(sidecar));
    let inbound = cluster(&c, &verified("a"), "inbound|80||");
    let t = &inbound.circuit_breakers.unwrap().thresholds[0];
    assert_eq!(t.max_connections.unwrap().value, 9);
    assert_eq!(t.max_pending_requests.unwrap().value, 3);
    // Without a Sidecar, inbound clusters are unlimited as istiod makes them (not Envoy's 1024).
    let plain = cluster(&ctx(&workload_yaml("")), &verified("a"), "inbound|80||");
    assert_eq!(
        plain.circuit_breakers.unwrap().thresholds[0]
            .max_connections
            .unwrap()
            .value,
        u32::MAX
    );
}

/// As istiod, the DestinationRule of the service behind an inbound port limits its inbound
/// cluster too (circuit breakers on the server side); a Sidecar's inbound pool wins over it.
#[test]
fn destination_rule_connection_pools_limit_inbound_clusters() {
    let rule = "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: app, namespace: a}\n\
spec: {host: app.a.svc.cluster.local, trafficPolicy: {connectionPool: {tcp: {maxConnections: 7}}}}\n";
    let limit = |yaml: &str| {
        let c = ctx(&workload_yaml(yaml));
        cluster(&c, &verified("a"), "inbound|80||")
            .circuit_breakers
            .unwrap()
            .thresholds[0]
            .max_connections
            .unwrap()
            .value
    };
    assert_eq!(limit(rule), 7);
    let sidecar = "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: a}\n\
spec: {inboundConnectionPool: {tcp: {maxConnections: 9}}}\n";
    assert_eq!(
        limit(&format!("{rule}{sidecar}")),
        9,
        "the Sidecar's pool wins"
    );
}

/// With `trustDomainAliases`, a client accepts its server's identity in every alias trust domain
/// too (istiod expands the pinned service accounts the same way), so a server still holding a
/// certificate of the old domain keeps working during a trust-domain migration.
#[test]
fn pinned_server_identities_cover_trust_domain_aliases() {
    let yaml = workload_yaml("").replace("tlsMode: istio}", "tlsMode: istio}, serviceAccount: db");
    let mesh = MeshSettings {
        trust_domain_aliases: vec!["old.example".into()],
        ..MeshSettings::default()
    };
    let c = push_context_with(&yaml, mesh);
    let bytes = cluster(&c, &verified("b"), "outbound|80||app.a.svc.cluster.local").encode_to_vec();
    let has = |uri: &str| bytes.windows(uri.len()).any(|w| w == uri.as_bytes());
    assert!(has("spiffe://cluster.local/ns/a/sa/db"));
    assert!(has("spiffe://old.example/ns/a/sa/db"));
}

/// TLS origination gets istiod's automatic SNI and SAN validation: SNI from the request's host
/// unless `sni` is set, the server's certificate checked against that host unless
/// `subjectAltNames` pin it or `insecureSkipVerify` is set; a ServiceEntry's `subjectAltNames`
/// pin its servers when the DestinationRule names none.
#[test]
fn tls_origination_sends_the_host_as_sni_and_checks_the_certificate_for_it() {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        UpstreamTlsContext, common_tls_context::ValidationContextType,
    };
    use envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions;
    let service = |name: &str, tls: &str, sans: &str| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: a}}\n\
spec: {{hosts: [{name}.example.com], ports: [{{number: 443, name: https, protocol: HTTP}}], resolution: DNS, location: MESH_EXTERNAL{sans}}}\n\
---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: {name}, namespace: a}}\n\
spec: {{host: {name}.example.com, trafficPolicy: {{tls: {tls}}}}}\n"
        )
    };
    let yaml = [
        service("plain", "{mode: SIMPLE}", ""),
        service("named", "{mode: SIMPLE, sni: api.example.com}", ""),
        service(
            "pinned",
            "{mode: SIMPLE, subjectAltNames: [x.example.com]}",
            "",
        ),
        service("skip", "{mode: SIMPLE, insecureSkipVerify: true}", ""),
        service(
            "se-pinned",
            "{mode: SIMPLE}",
            ", subjectAltNames: [se.example.com]",
        ),
    ]
    .concat();
    let c = ctx(&yaml);
    let p = proxy("a", &[]);
    let auto = |name: &str| {
        let cl = cluster(&c, &p, &format!("outbound|443||{name}.example.com"));
        cl.typed_extension_protocol_options
            .get("envoy.extensions.upstreams.http.v3.HttpProtocolOptions")
            .map(|a| HttpProtocolOptions::decode(a.value.as_slice()).unwrap())
            .and_then(|o| o.upstream_http_protocol_options)
            .map(|u| (u.auto_sni, u.auto_san_validation))
    };
    assert_eq!(auto("plain"), Some((true, true)));
    assert_eq!(auto("named"), None, "an explicit SNI");
    assert_eq!(auto("pinned"), Some((true, false)), "SANs pin the server");
    assert_eq!(auto("skip"), Some((true, false)), "verification off");
    assert_eq!(auto("se-pinned"), Some((true, true)));
    let cl = cluster(&c, &p, "outbound|443||se-pinned.example.com");
    let Some(envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
        a,
    )) = cl.transport_socket.and_then(|t| t.config_type)
    else {
        panic!("no TLS");
    };
    let tls = UpstreamTlsContext::decode(a.value.as_slice()).unwrap();
    let Some(ValidationContextType::ValidationContext(v)) =
        tls.common_tls_context.unwrap().validation_context_type
    else {
        panic!("no validation context");
    };
    assert!(
        v.match_typed_subject_alt_names.iter().any(|m| m
            .matcher
            .as_ref()
            .is_some_and(|m| format!("{m:?}").contains("se.example.com"))),
        "{v:?}"
    );
}

/// Outlier detection as istiod applies it: the deprecated consecutiveErrors sets nothing (it is
/// only warned about), and local-origin failures are counted apart, and enforced, only when split.
#[test]
fn outlier_detection_follows_istiod() {
    let dr = |od: &str| {
        format!(
            "{}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: web, namespace: a}}\nspec:\n  host: web\n  trafficPolicy:\n    outlierDetection: {od}\n",
            se("a", "web", "HTTP")
        )
    };
    let od = |yaml: &str| {
        cluster(
            &ctx(yaml),
            &proxy("a", &[]),
            "outbound|80||web.a.svc.cluster.local",
        )
        .outlier_detection
        .unwrap()
    };
    let deprecated = od(&dr("{consecutiveErrors: 7}"));
    assert_eq!(deprecated.consecutive_5xx, None);
    let unsplit = od(&dr("{consecutiveLocalOriginFailures: 4}"));
    assert_eq!(unsplit.consecutive_local_origin_failure, None);
    let split = od(&dr(
        "{splitExternalLocalOriginErrors: true, consecutiveLocalOriginFailures: 4}",
    ));
    assert_eq!(
        split.consecutive_local_origin_failure.map(|v| v.value),
        Some(4)
    );
    assert_eq!(
        split
            .enforcing_consecutive_local_origin_failure
            .map(|v| v.value),
        Some(100)
    );
    assert_eq!(
        split.enforcing_local_origin_success_rate.map(|v| v.value),
        Some(0)
    );
}

/// MeshConfig `connectTimeout` and `tcpKeepalive` as istiod applies them: every cluster's connect
/// timeout (service, passthrough, blackhole, inbound) where no DestinationRule sets one, and the
/// mesh's keepalive on every upstream connection with a rule's fields over it.
#[test]
fn mesh_connect_timeout_and_keepalive_reach_every_cluster() {
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    connectTimeout: 3s\n    tcpKeepalive: {time: 60s, interval: 20s}\n---\n"
        .to_string()
        + &se("a", "web", "HTTP")
        + &se("a", "db", "TCP")
        + "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: db, namespace: a}\nspec: {host: db.a.svc.cluster.local, trafficPolicy: {connectionPool: {tcp: {connectTimeout: 1s, tcpKeepalive: {probes: 4, time: 30s}}}}}\n";
    let c = crate::testing::push_context_with_mesh_config(&yaml);
    let p = proxy("a", &[]);
    let secs = |cl: &Cluster| cl.connect_timeout.as_ref().map(|d| d.seconds);
    let keepalive = |cl: &Cluster| {
        let k = cl
            .upstream_connection_options
            .as_ref()
            .and_then(|o| o.tcp_keepalive.as_ref())
            .cloned()
            .unwrap_or_default();
        (
            k.keepalive_probes.map(|v| v.value),
            k.keepalive_time.map(|v| v.value),
            k.keepalive_interval.map(|v| v.value),
        )
    };
    let web = cluster(&c, &p, "outbound|80||web.a.svc.cluster.local");
    assert_eq!(secs(&web), Some(3));
    assert_eq!(keepalive(&web), (None, Some(60), Some(20)));
    let db = cluster(&c, &p, "outbound|80||db.a.svc.cluster.local");
    assert_eq!(secs(&db), Some(1), "the rule's own timeout wins");
    assert_eq!(
        keepalive(&db),
        (Some(4), Some(30), Some(20)),
        "field by field"
    );
    for name in ["PassthroughCluster", "BlackHoleCluster"] {
        assert_eq!(secs(&cluster(&c, &p, name)), Some(3), "{name}");
    }
    let default = ctx(&se("a", "web", "HTTP"));
    assert_eq!(
        secs(&cluster(
            &default,
            &p,
            "outbound|80||web.a.svc.cluster.local"
        )),
        Some(10),
        "istiod's default"
    );
}

/// MeshConfig `h2UpgradePolicy: UPGRADE` as istiod's `shouldH2Upgrade`: an outbound cluster of a
/// port declared HTTP speaks HTTP/2 upstream; a TCP port does not, nor a service whose
/// DestinationRule says DO_NOT_UPGRADE.
#[test]
fn mesh_h2_upgrade_policy_upgrades_http_clusters() {
    use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
        HttpProtocolOptions, http_protocol_options,
    };
    let mesh = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    h2UpgradePolicy: UPGRADE\n---\n";
    let yaml = mesh.to_string()
        + &se("a", "web", "HTTP")
        + &se("a", "db", "TCP")
        + &se("a", "old", "HTTP")
        + "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: old, namespace: a}\nspec: {host: old.a.svc.cluster.local, trafficPolicy: {connectionPool: {http: {h2UpgradePolicy: DO_NOT_UPGRADE}}}}\n";
    let c = crate::testing::push_context_with_mesh_config(&yaml);
    let p = proxy("a", &[]);
    let h2 = |host: &str| {
        let cl = cluster(&c, &p, &format!("outbound|80||{host}.a.svc.cluster.local"));
        cl.typed_extension_protocol_options
            .values()
            .filter_map(|a| HttpProtocolOptions::decode(a.value.as_slice()).ok())
            .any(|o| {
                matches!(
                    o.upstream_protocol_options,
                    Some(http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                        http_protocol_options::ExplicitHttpConfig {
                            protocol_config: Some(
                                http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(_)
                            )
                        }
                    ))
                )
            })
    };
    assert!(h2("web"));
    assert!(!h2("db"));
    assert!(!h2("old"));
}
