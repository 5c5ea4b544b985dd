//! LDS: interception modes, istiod's outbound layout, TCP/TLS routes, sniffing, Sidecar egress ports.

use super::*;

#[test]
fn listeners_follow_interception_mode() {
    let c = ctx(&format!(
        "{}{}",
        se("a", "web", "HTTP"),
        se("a", "db", "TCP").replace("number: 80", "number: 5432")
    ));
    let names = |p: &Proxy| -> Vec<String> {
        generate(&c, p, &c.scope(p), TypeUrl::Listener, None)
            .iter()
            .map(|r| r.name.to_string())
            .collect()
    };
    assert_eq!(
        names(&proxy("a", &[("INTERCEPTION_MODE", "NONE")])),
        ["127.0.0.1_80", "127.0.0.1_5432"]
    );
    assert_eq!(
        names(&proxy("a", &[])),
        [
            "0.0.0.0_80",
            "0.0.0.0_5432",
            "virtualOutbound",
            "virtualInbound"
        ]
    );
}

#[test]
fn outbound_listeners_follow_istiods_layout() {
    let c = ctx(OUTBOUND_MESH);
    let all = listeners_of(&c, &proxy("a", &[]));
    let mut names: Vec<&str> = all.iter().map(|l| l.name.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "0.0.0.0_443",
            "10.96.0.1_443",
            "10.96.0.5_3306",
            "10.96.0.7_8080",
            "virtualInbound",
            "virtualOutbound"
        ],
        "TCP, TLS and sniffed services with a VIP get their own listener"
    );
    let find = |n: &str| all.iter().find(|l| l.name == n).unwrap();

    // Two TLS hosts without a VIP on 443: told apart by SNI, the rest passes through.
    let shared = find("0.0.0.0_443");
    let sni: Vec<Vec<String>> = shared
        .filter_chains
        .iter()
        .map(|c| {
            c.filter_chain_match
                .clone()
                .unwrap_or_default()
                .server_names
        })
        .collect();
    assert_eq!(
        sni,
        [
            vec!["api.example.com".to_string()],
            vec!["pay.example.com".to_string()]
        ]
    );
    assert_eq!(
        listener_filter_names(shared),
        ["envoy.filters.listener.tls_inspector"]
    );
    let fallback = shared
        .default_filter_chain
        .as_ref()
        .expect("a fallback chain");
    assert_eq!(fallback.name, "PassthroughFilterChain");
    assert_eq!(
        tcp_targets(fallback),
        [("PassthroughCluster".to_string(), 100)]
    );

    // The API server's VIP listener takes everything to it, so no fallback is needed there.
    let kube = find("10.96.0.1_443");
    assert!(!kube.bind_to_port.unwrap().value);
    assert_eq!(kube.filter_chains.len(), 1);
    assert!(kube.default_filter_chain.is_none());
    assert_eq!(
        kube.filter_chains[0].name,
        "outbound|443||kubernetes.default.svc.cluster.local"
    );

    // The unnamed port is sniffed: plaintext HTTP goes to the HTTP connection manager with the
    // service's own route, the rest to the service as TCP.
    let web = find("10.96.0.7_8080");
    assert_eq!(
        listener_filter_names(web),
        ["envoy.filters.listener.http_inspector"]
    );
    let http = &web.filter_chains[0];
    let m = http.filter_chain_match.clone().unwrap();
    assert_eq!(m.transport_protocol, "raw_buffer");
    assert_eq!(m.application_protocols, ["http/1.1", "h2c"]);
    let filters: Vec<&str> = http.filters.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        filters,
        [
            "envoy.filters.network.set_filter_state",
            "envoy.filters.network.http_connection_manager"
        ],
        "the HTTP half tells the server's sidecar (by ALPN) that HTTP follows"
    );
    let Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(a)) =
        &http.filters[1].config_type
    else {
        panic!("typed config")
    };
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
        HttpConnectionManager, http_connection_manager::RouteSpecifier,
    };
    match HttpConnectionManager::decode(a.value.as_slice())
        .unwrap()
        .route_specifier
    {
        Some(RouteSpecifier::Rds(r)) => {
            assert_eq!(r.route_config_name, "web.a.svc.cluster.local:8080")
        }
        other => panic!("RDS expected, got {other:?}"),
    }
    assert_eq!(
        web.default_filter_chain.as_ref().unwrap().name,
        "outbound|8080||web.a.svc.cluster.local"
    );
    let scope = c.scope(&proxy("a", &[]));
    let route = generate(
        &c,
        &proxy("a", &[]),
        &scope,
        TypeUrl::Route,
        Some(&["web.a.svc.cluster.local:8080".to_string()].into()),
    );
    let rc = envoy_types::pb::envoy::config::route::v3::RouteConfiguration::decode(
        route[0].any.value.as_slice(),
    )
    .unwrap();
    assert_eq!(rc.virtual_hosts.len(), 1);
    assert_eq!(
        rc.virtual_hosts[0].domains,
        ["*"],
        "the VIP already chose the service"
    );
}

#[test]
fn sidecar_tcp_and_tls_routes_apply() {
    let vs = "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: db, namespace: a}\n\
spec: {hosts: [db.a.svc.cluster.local], tcp: [{match: [{port: 3306}], route: [{destination: {host: db.a.svc.cluster.local, subset: v1}, weight: 80}, {destination: {host: db.a.svc.cluster.local, subset: v2}, weight: 20}]}]}\n\
---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: ext, namespace: a}\n\
spec: {hosts: [api.example.com], tls: [{match: [{port: 443, sniHosts: [api.example.com]}], route: [{destination: {host: pay.example.com}}]}]}\n";
    let c = ctx(&format!("{OUTBOUND_MESH}{vs}"));
    let all = listeners_of(&c, &proxy("a", &[]));
    let db = all.iter().find(|l| l.name == "10.96.0.5_3306").unwrap();
    assert_eq!(
        db.filter_chains.len(),
        1,
        "the route takes every connection"
    );
    assert_eq!(
        tcp_targets(&db.filter_chains[0]),
        [
            ("outbound|3306|v1|db.a.svc.cluster.local".to_string(), 80),
            ("outbound|3306|v2|db.a.svc.cluster.local".to_string(), 20)
        ],
        "the TCP route splits by weight"
    );
    let shared = all.iter().find(|l| l.name == "0.0.0.0_443").unwrap();
    let api = shared
        .filter_chains
        .iter()
        .find(|ch| ch.filter_chain_match.as_ref().unwrap().server_names == ["api.example.com"])
        .unwrap();
    assert_eq!(
        tcp_targets(api),
        [("outbound|443||pay.example.com".to_string(), 100)],
        "the TLS route sends api.example.com to pay.example.com"
    );
}

#[test]
fn registry_only_blackholes_unmatched_connections_on_every_port() {
    let mesh = MeshSettings {
        outbound_allow_any: false,
        ..MeshSettings::default()
    };
    let c = push_context_with(OUTBOUND_MESH, mesh);
    let all = listeners_of(&c, &proxy("a", &[]));
    let shared = all.iter().find(|l| l.name == "0.0.0.0_443").unwrap();
    assert_eq!(
        tcp_targets(shared.default_filter_chain.as_ref().unwrap()),
        [("BlackHoleCluster".to_string(), 100)]
    );
}

#[test]
fn sniffed_inbound_ports_serve_http_and_tcp() {
    let yaml = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: app, namespace: a}\n\
spec: {hosts: [app.a.svc.cluster.local], location: MESH_INTERNAL, ports: [{number: 9000, name: app}], resolution: STATIC, \
endpoints: [{address: 10.0.0.9, labels: {app: app, security.istio.io/tlsMode: istio}}]}\n";
    let c = ctx(yaml);
    let l = listener_named(&c, &verified("a"), "virtualInbound");
    let chains: Vec<(String, String, Vec<String>)> = l
        .filter_chains
        .iter()
        .map(|ch| {
            let m = ch.filter_chain_match.clone().unwrap_or_default();
            (
                ch.name.clone(),
                m.transport_protocol,
                m.application_protocols,
            )
        })
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        chains,
        [
            (
                "inbound|9000||-mtls-http".into(),
                "tls".into(),
                s(&["istio-http/1.0", "istio-http/1.1", "istio-h2"])
            ),
            (
                "inbound|9000||-http".into(),
                "raw_buffer".into(),
                s(&["http/1.1", "h2c"])
            ),
            (
                "inbound|9000||-mtls-tcp".into(),
                "tls".into(),
                s(&["istio-peer-exchange", "istio"])
            ),
            ("inbound|9000||-tcp".into(), "raw_buffer".into(), vec![]),
            ("inbound|9000||-tls-tcp".into(), "tls".into(), vec![]),
            (
                "inbound-passthrough-mtls-http".into(),
                "tls".into(),
                s(&["istio-http/1.0", "istio-http/1.1", "istio-h2"])
            ),
            (
                "inbound-passthrough-http".into(),
                "raw_buffer".into(),
                s(&["http/1.1", "h2c"])
            ),
            (
                "inbound-passthrough-mtls-tcp".into(),
                "tls".into(),
                s(&["istio-peer-exchange", "istio"])
            ),
            (
                "inbound-passthrough-tcp".into(),
                "raw_buffer".into(),
                vec![]
            ),
            ("inbound-passthrough-tls-tcp".into(), "tls".into(), vec![]),
        ]
    );
    assert!(listener_filter_names(&l).contains(&"envoy.filters.listener.http_inspector"));
}

#[test]
fn sidecar_egress_port_listeners_serve_only_their_hosts() {
    let yaml = format!(
        "{}{}{}---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: a}}\n\
spec: {{egress: [{{port: {{number: 80, protocol: HTTP, name: http}}, hosts: [./web.a.svc.cluster.local]}}, {{hosts: [\"./*\"]}}]}}\n",
        se("a", "web", "HTTP"),
        se("a", "other", "HTTP"),
        se("a", "api", "HTTP").replace("number: 80", "number: 8080")
    );
    let c = ctx(&yaml);
    let p = proxy("a", &[]);
    let rc = route_config(&c, &p, "80");
    let hosts: Vec<&str> = rc
        .virtual_hosts
        .iter()
        .map(|v| v.name.as_str())
        .filter(|n| n.contains(".svc."))
        .collect();
    assert_eq!(
        hosts,
        ["web.a.svc.cluster.local:80"],
        "port 80's egress listener names web only"
    );
    let rc = route_config(&c, &p, "8080");
    assert_eq!(
        rc.virtual_hosts[0].name, "api.a.svc.cluster.local:8080",
        "other ports follow the egress listener without a port"
    );
    // Clusters still exist for every service in scope (a VirtualService may route to them).
    let names: Vec<String> = clusters_of(&c, &p).into_iter().map(|c| c.name).collect();
    assert!(names.contains(&"outbound|80||other.a.svc.cluster.local".to_string()));
}

/// istiod's `nodeUsesAutoallocatedIPs`: a ServiceEntry's auto-allocated address is a VIP only for
/// a proxy whose DNS proxy hands it out. A sidecar that does not capture DNS resolves the real
/// name, so for it the TLS ServiceEntry keeps its SNI chain on the port's shared listener (with
/// the VIP as its listener, that chain would be gone and the traffic would fall to passthrough or
/// the blackhole).
#[test]
fn auto_allocated_vips_only_for_dns_capturing_proxies() {
    let yaml = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: api, namespace: a}\n\
spec: {hosts: [api.example.com], ports: [{number: 443, name: tls, protocol: TLS}], resolution: DNS}\n\
status: {addresses: [{host: api.example.com, value: 240.240.0.7}, {host: api.example.com, value: '2001:2::7'}]}\n";
    let c = ctx(yaml);
    let sni_chain = |l: &Listener| {
        l.filter_chains.iter().any(|ch| {
            ch.filter_chain_match
                .as_ref()
                .is_some_and(|m| m.server_names == ["api.example.com"])
        })
    };
    let plain = listeners_of(&c, &proxy("a", &[]));
    assert!(
        !plain.iter().any(|l| l.name.starts_with("240.240.0.7")),
        "{:?}",
        plain.iter().map(|l| &l.name).collect::<Vec<_>>()
    );
    let shared = plain.iter().find(|l| l.name == "0.0.0.0_443").unwrap();
    assert!(sni_chain(shared), "the SNI chain stays");

    let capturing = listeners_of(&c, &proxy("a", &[("DNS_CAPTURE", "true")]));
    let vip = capturing
        .iter()
        .find(|l| l.name == "240.240.0.7_443")
        .expect("the allocated VIP's listener");
    assert!(!vip.filter_chains.is_empty());

    // With allocation off for the mesh, only the proxy's own DNS_AUTO_ALLOCATE opts in.
    let mesh = MeshSettings {
        ip_autoallocate: false,
        ..Default::default()
    };
    let off = push_context_with(yaml, mesh);
    let capturing = listeners_of(&off, &proxy("a", &[("DNS_CAPTURE", "true")]));
    assert!(!capturing.iter().any(|l| l.name == "240.240.0.7_443"));
    let opted = proxy(
        "a",
        &[("DNS_CAPTURE", "true"), ("DNS_AUTO_ALLOCATE", "true")],
    );
    assert!(
        listeners_of(&off, &opted)
            .iter()
            .any(|l| l.name == "240.240.0.7_443")
    );
}

/// istiod's StatefulSet support: a headless service (resolution NONE, no VIP) on a TCP port gets a
/// listener per endpoint, so two such services on one port never share the wildcard listener.
#[test]
fn headless_tcp_services_get_a_listener_per_endpoint() {
    let yaml = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: kafka, namespace: a}\n\
spec: {hosts: [kafka.a.svc.cluster.local], location: MESH_INTERNAL, ports: [{number: 9092, name: tcp, protocol: TCP}], resolution: NONE, workloadSelector: {labels: {app: kafka}}}\n\
---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: kafka-0, namespace: a}\nspec: {address: 10.1.0.3, labels: {app: kafka}}\n\
---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: kafka-1, namespace: a}\nspec: {address: 10.1.0.4, labels: {app: kafka}}\n\
---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: zk, namespace: a}\n\
spec: {hosts: [zk.a.svc.cluster.local], location: MESH_INTERNAL, ports: [{number: 9092, name: tcp, protocol: TCP}], resolution: NONE, workloadSelector: {labels: {app: zk}}}\n\
---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: zk-0, namespace: a}\nspec: {address: 10.1.0.5, labels: {app: zk}}\n\
---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: any, namespace: a}\n\
spec: {hosts: [any.example.com], ports: [{number: 9092, name: tcp, protocol: TCP}], resolution: NONE}\n";
    let c = ctx(yaml);
    let names: Vec<String> = listeners_of(&c, &proxy("a", &[]))
        .into_iter()
        .map(|l| l.name)
        .collect();
    for name in ["10.1.0.3_9092", "10.1.0.4_9092", "10.1.0.5_9092"] {
        assert!(
            names.iter().any(|n| n == name),
            "{name} missing from {names:?}"
        );
    }
    // A ServiceEntry without endpoints or selector stays on the wildcard listener.
    assert!(names.iter().any(|n| n == "0.0.0.0_9092"), "{names:?}");
}

/// As istiod: a sidecar's inbound HTTP connection manager appends the caller's certificate
/// (subject, SPIFFE URI, DNS names) to `X-Forwarded-Client-Cert` for the application; its
/// outbound one leaves Envoy's default, which strips a header the application wrote.
#[test]
fn sidecar_inbound_forwards_the_callers_certificate() {
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
        HttpConnectionManager, http_connection_manager::ForwardClientCertDetails,
    };
    let yaml = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: app, namespace: a}\n\
spec: {hosts: [app.a.svc.cluster.local], location: MESH_INTERNAL, ports: [{number: 9000, name: http, protocol: HTTP}], resolution: STATIC, \
endpoints: [{address: 10.0.0.9, labels: {app: app, security.istio.io/tlsMode: istio}}]}\n";
    let c = ctx(yaml);
    let managers = |l: &envoy_types::pb::envoy::config::listener::v3::Listener| {
        l.filter_chains
            .iter()
            .flat_map(|ch| &ch.filters)
            .filter(|f| f.name == "envoy.filters.network.http_connection_manager")
            .map(|f| match &f.config_type {
                Some(
                    envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(
                        a,
                    ),
                ) => HttpConnectionManager::decode(a.value.as_slice()).unwrap(),
                _ => panic!("typed config"),
            })
            .collect::<Vec<_>>()
    };
    let inbound = managers(&listener_named(&c, &verified("a"), "virtualInbound"));
    assert!(!inbound.is_empty());
    for m in &inbound {
        assert_eq!(
            m.forward_client_cert_details,
            ForwardClientCertDetails::AppendForward as i32
        );
        let set = m.set_current_client_cert_details.as_ref().unwrap();
        assert!(set.subject.as_ref().unwrap().value && set.uri && set.dns && !set.cert);
    }
    let outbound = managers(&listener_named(&c, &verified("a"), "0.0.0.0_9000"));
    assert!(!outbound.is_empty());
    assert!(outbound.iter().all(|m| m.forward_client_cert_details
        == ForwardClientCertDetails::Sanitize as i32
        && m.set_current_client_cert_details.is_none()));
}

/// istiod's node-metadata switches: `HTTP10: "1"` lets the outbound connection managers accept
/// HTTP/1.0 (inbound keeps Envoy's default), and `IDLE_TIMEOUT` bounds the idle time of the TCP
/// proxies that take unmatched outbound connections.
#[test]
fn http10_and_idle_timeout_metadata_are_applied() {
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
    let yaml = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: app, namespace: a}\n\
spec: {hosts: [app.a.svc.cluster.local], location: MESH_INTERNAL, ports: [{number: 9000, name: http, protocol: HTTP}, {number: 9100, name: tcp, protocol: TCP}], resolution: STATIC, \
endpoints: [{address: 10.0.0.9, labels: {app: app}}]}\n";
    let c = ctx(yaml);
    let typed = |f: &envoy_types::pb::envoy::config::listener::v3::Filter| match &f.config_type {
        Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(a)) => {
            a.value.clone()
        }
        _ => panic!("typed config"),
    };
    let accepts_http10 = |p: &Proxy, listener: &str| {
        listener_named(&c, p, listener)
            .filter_chains
            .iter()
            .flat_map(|ch| &ch.filters)
            .filter(|f| f.name == "envoy.filters.network.http_connection_manager")
            .map(|f| HttpConnectionManager::decode(typed(f).as_slice()).unwrap())
            .all(|m| m.http_protocol_options.is_some_and(|o| o.accept_http_10))
    };
    let idle = |p: &Proxy, listener: &str, chain: &str| {
        let l = listener_named(&c, p, listener);
        let ch = l
            .filter_chains
            .iter()
            .chain(l.default_filter_chain.iter())
            .find(|ch| ch.name == chain)
            .unwrap_or_else(|| panic!("no chain {chain} in {listener}"));
        TcpProxy::decode(typed(&ch.filters[0]).as_slice())
            .unwrap()
            .idle_timeout
            .map(|d| d.seconds)
    };
    let plain = proxy("a", &[]);
    let tuned = proxy("a", &[("HTTP10", "1"), ("IDLE_TIMEOUT", "30s")]);
    assert!(accepts_http10(&tuned, "0.0.0.0_9000"));
    assert!(!accepts_http10(&plain, "0.0.0.0_9000"));
    assert!(!accepts_http10(&tuned, "virtualInbound"), "outbound only");
    assert_eq!(
        idle(&tuned, "virtualOutbound", "virtualOutbound-catchall-tcp"),
        Some(30)
    );
    assert_eq!(
        idle(&plain, "virtualOutbound", "virtualOutbound-catchall-tcp"),
        None
    );
    assert_eq!(
        idle(&tuned, "0.0.0.0_9000", "PassthroughFilterChain"),
        Some(30)
    );
}
