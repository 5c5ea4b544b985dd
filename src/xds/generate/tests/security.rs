//! Inbound security: PeerAuthentication chains and AuthorizationPolicy as RBAC filters.

use super::*;

#[test]
fn peer_authentication_shapes_inbound_chains() {
    let strict_db = "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: db, namespace: a}\n\
spec: {selector: {matchLabels: {app: app}}, mtls: {mode: PERMISSIVE}, portLevelMtls: {5432: {mode: STRICT}}}\n";
    let c = ctx(&workload_yaml(strict_db));
    let chains = inbound_chains(&listener_named(&c, &verified("a"), "virtualInbound"));
    assert_eq!(
        chains,
        [
            ("inbound|80||-mtls".to_string(), "tls".to_string()),
            ("inbound|80||".into(), "raw_buffer".into()),
            ("inbound|5432||-mtls".into(), "tls".into()),
            ("inbound-passthrough-mtls-http".into(), "tls".into()),
            ("inbound-passthrough-http".into(), "raw_buffer".into()),
            ("inbound-passthrough-mtls-tcp".into(), "tls".into()),
            ("inbound-passthrough-tcp".into(), "raw_buffer".into()),
            ("inbound-passthrough-tls-tcp".into(), "tls".into()),
        ],
        "PERMISSIVE takes mTLS and plaintext, on the workload's ports and any other; the STRICT port mTLS only"
    );
    // Without an identity the proxy cannot terminate mTLS: PERMISSIVE stays plaintext, STRICT
    // stays closed.
    let mut anonymous = proxy("a", &[]);
    anonymous.labels.insert("app".into(), "app".into());
    let chains = inbound_chains(&listener_named(&c, &anonymous, "virtualInbound"));
    assert_eq!(chains[0], ("inbound|80||".to_string(), "".to_string()));
    assert_eq!(
        chains[1],
        (
            "inbound|5432||-strict-without-certificate".to_string(),
            "".to_string()
        ),
        "STRICT without a certificate takes nothing"
    );

    let disabled = "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: default, namespace: istio-system}\nspec: {mtls: {mode: DISABLE}}\n";
    let c = ctx(&workload_yaml(disabled));
    let chains = inbound_chains(&listener_named(&c, &verified("a"), "virtualInbound"));
    assert!(
        chains
            .iter()
            .filter(|(n, _)| n.starts_with("inbound|"))
            .all(|(_, t)| t.is_empty()),
        "{chains:?}"
    );

    // Workload-wide STRICT closes the ports no service names too: only mTLS passes through.
    let strict = "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: default, namespace: a}\nspec: {mtls: {mode: STRICT}}\n";
    let c = ctx(&workload_yaml(strict));
    let l = listener_named(&c, &verified("a"), "virtualInbound");
    let passthrough: Vec<&envoy_types::pb::envoy::config::listener::v3::FilterChain> = l
        .filter_chains
        .iter()
        .filter(|ch| ch.name.starts_with("inbound-passthrough"))
        .collect();
    assert!(!passthrough.is_empty());
    assert!(
        passthrough.iter().all(|ch| ch.transport_socket.is_some()
            && ch.filter_chain_match.as_ref().unwrap().transport_protocol == "tls"),
        "{:?}",
        passthrough.iter().map(|c| &c.name).collect::<Vec<_>>()
    );
}

#[test]
fn authorization_policies_become_rbac_filters_with_stable_bytes() {
    let policies = "---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: deny, namespace: a}\n\
spec: {action: DENY, rules: [{to: [{operation: {methods: [DELETE]}}]}]}\n\
---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: allow-1, namespace: a}\n\
spec: {selector: {matchLabels: {app: app}}, rules: [{from: [{source: {namespaces: [b]}}]}, {to: [{operation: {paths: [/healthz]}}]}]}\n\
---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: other, namespace: a}\n\
spec: {selector: {matchLabels: {app: nope}}, rules: [{}]}\n";
    let filters = |c: &PushContext| {
        crate::xds::generate::security::authz::http_filters(c, &c.scope(&verified("a")))
    };
    let c = ctx(&workload_yaml(policies));
    let built = filters(&c);
    assert_eq!(built.len(), 2, "a DENY filter, then an ALLOW filter");
    let decode = |f: &envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter| {
        match &f.config_type {
            Some(envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_filter::ConfigType::TypedConfig(a)) => {
                envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac::decode(a.value.as_slice()).unwrap()
            }
            _ => panic!("typed config"),
        }
    };
    let deny = decode(&built[0]).rules.unwrap();
    assert_eq!(deny.action, 1);
    assert_eq!(
        deny.policies.keys().collect::<Vec<_>>(),
        ["ns[a]-policy[deny]-rule[0]"]
    );
    let allow = decode(&built[1]).rules.unwrap();
    let mut names: Vec<&String> = allow.policies.keys().collect();
    names.sort();
    assert_eq!(
        names,
        [
            "ns[a]-policy[allow-1]-rule[0]",
            "ns[a]-policy[allow-1]-rule[1]"
        ],
        "the policy selecting another app does not apply"
    );
    // The same config encodes to the same bytes, whatever the hash order.
    let again = filters(&ctx(&workload_yaml(policies)));
    assert_eq!(built, again);
}

#[test]
fn tcp_authorization_drops_http_allow_rules_and_widens_http_deny_rules() {
    let policies = "---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: deny-get, namespace: a}\n\
spec: {action: DENY, rules: [{to: [{operation: {methods: [GET], ports: [\"5432\"]}}]}]}\n\
---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: allow-path, namespace: a}\n\
spec: {rules: [{to: [{operation: {paths: [/x]}}]}]}\n\
---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: audit, namespace: a}\n\
spec: {action: AUDIT, rules: [{}]}\n";
    let c = ctx(&workload_yaml(policies));
    let p = verified("a");
    let http: Vec<String> = crate::xds::generate::security::authz::http_filters(&c, &c.scope(&p))
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(http.len(), 3, "AUDIT (log), DENY and ALLOW on HTTP");
    let tcp: Vec<_> = crate::xds::generate::security::authz::network_filters(&c, &c.scope(&p))
        .into_iter()
        .map(crate::xds::generate::typed_listener::NetworkFilter::encode)
        .collect();
    assert_eq!(tcp.len(), 2, "DENY and ALLOW on TCP");
    let decode = |f: &envoy_types::pb::envoy::config::listener::v3::Filter| match &f.config_type {
        Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(a)) => {
            envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac::decode(
                a.value.as_slice(),
            )
            .unwrap()
        }
        _ => panic!("typed config"),
    };
    let deny = decode(&tcp[0]);
    assert_eq!(deny.stat_prefix, "tcp.");
    let rule = &deny.rules.unwrap().policies["ns[a]-policy[deny-get]-rule[0]"];
    assert!(
        format!("{:?}", rule.permissions).contains("DestinationPort(5432)")
            && !format!("{:?}", rule.permissions).contains(":method"),
        "the method is dropped, the port stays: {:?}",
        rule.permissions
    );
    let allow = decode(&tcp[1]).rules.unwrap();
    assert!(
        allow.policies.is_empty(),
        "an ALLOW rule on paths can never match TCP: nothing is allowed"
    );
    // The TCP inbound chain carries them before the TCP proxy.
    let l = listener_named(&c, &p, "virtualInbound");
    let names: Vec<&str> = l
        .filter_chains
        .iter()
        .find(|ch| ch.name == "inbound|5432||-mtls")
        .unwrap()
        .filters
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "envoy.filters.network.rbac",
            "envoy.filters.network.rbac",
            "envoy.filters.network.tcp_proxy"
        ]
    );
}

#[test]
fn allow_rules_never_admit_more_than_written() {
    // serviceAccounts and trustDomains become identity matches; a `when` key the translation
    // cannot express leaves its ALLOW rule out (it allows nothing) instead of dropping the
    // condition, and widens a DENY rule instead.
    let policies = "---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: by-sa, namespace: a}\n\
spec: {rules: [{from: [{source: {serviceAccounts: [bookinfo/reviews, ratings], trustDomains: [\"*.corp\"]}}]}]}\n\
---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: by-claim, namespace: a}\n\
spec: {rules: [{when: [{key: \"request.auth.claims[group]\", values: [admins]}]}]}\n\
---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: deny-sni, namespace: a}\n\
spec: {action: DENY, rules: [{to: [{operation: {paths: [/admin]}}], when: [{key: connection.sni, values: [x]}]}]}\n";
    let c = ctx(&workload_yaml(policies));
    let p = verified("a");
    let filters = crate::xds::generate::security::authz::http_filters(&c, &c.scope(&p));
    let rbac = |name: &str| -> envoy_types::pb::envoy::config::rbac::v3::Rbac {
        let f = filters
            .iter()
            .filter(|f| f.name == "envoy.filters.http.rbac")
            .find_map(|f| match &f.config_type {
                Some(
                    envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_filter::ConfigType::TypedConfig(a),
                ) => {
                    let r = envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac::decode(a.value.as_slice()).unwrap();
                    r.rules.filter(|rules| rules.policies.keys().any(|k| k.contains(name)))
                }
                _ => None,
            });
        f.unwrap_or_default()
    };
    let allow = rbac("by-sa");
    let by_sa = format!(
        "{:?}",
        allow.policies["ns[a]-policy[by-sa]-rule[0]"].principals
    );
    assert!(
        by_sa.contains("spiffe://.+/ns/bookinfo/(.+/|)sa/reviews(/.+)?"),
        "{by_sa}"
    );
    assert!(
        by_sa.contains("spiffe://.+/ns/a/(.+/|)sa/ratings(/.+)?"),
        "{by_sa}"
    );
    assert!(by_sa.contains("spiffe://[^/]*\\\\.corp/.*"), "{by_sa}");
    let by_claim = format!(
        "{:?}",
        rbac("by-claim").policies["ns[a]-policy[by-claim]-rule[0]"].principals
    );
    assert!(
        by_claim.contains("envoy.filters.http.jwt_authn")
            && by_claim.contains("\"group\"")
            && by_claim.contains("\"admins\"")
            && by_claim.contains("ListMatch"),
        "a claim is matched in the verified payload, as a value or a list element: {by_claim}"
    );
    let deny = rbac("deny-sni");
    let rule = &deny.policies["ns[a]-policy[deny-sni]-rule[0]"];
    assert!(format!("{:?}", rule.permissions).contains("/admin"));
}

#[test]
fn custom_policies_ask_grpc_providers_on_tcp_and_deny_when_no_provider_can_be_asked() {
    let custom = |name: &str, provider: &str, port: &str| {
        format!(
            "---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: {name}, namespace: a}}\n\
spec: {{action: CUSTOM, provider: {{name: {provider}}}, rules: [{{to: [{{operation: {{ports: [\"{port}\"]}}}}]}}]}}\n"
        )
    };
    let providers: Vec<crate::config::mesh::ExtensionProvider> = serde_json::from_value(serde_json::json!([
        {"name": "grpc", "envoyExtAuthzGrpc": {"service": "authz.a.svc.cluster.local", "port": 9000}},
        {"name": "http", "envoyExtAuthzHttp": {"service": "authz.a.svc.cluster.local", "port": 8000}}
    ]))
    .unwrap();
    let p = verified("a");
    let built = |policies: &str| {
        let mut c = ctx(&workload_yaml(policies));
        c.mesh.extension_providers = providers.clone();
        let http: Vec<String> =
            crate::xds::generate::security::authz::http_filters(&c, &c.scope(&p))
                .into_iter()
                .map(|f| f.name)
                .collect();
        let tcp: Vec<_> = crate::xds::generate::security::authz::network_filters(&c, &c.scope(&p))
            .into_iter()
            .map(crate::xds::generate::typed_listener::NetworkFilter::encode)
            .collect();
        (http, tcp)
    };
    let network_rbac =
        |f: &envoy_types::pb::envoy::config::listener::v3::Filter| match &f.config_type {
            Some(
                envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(a),
            ) => envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac::decode(
                a.value.as_slice(),
            )
            .unwrap(),
            _ => panic!("typed config"),
        };

    // A gRPC provider is asked for TCP too: shadow rules mark the connection, ext_authz asks.
    let (http, tcp) = built(&custom("ask", "grpc", "5432"));
    assert_eq!(
        http,
        ["envoy.filters.http.rbac", "envoy.filters.http.ext_authz"]
    );
    let names: Vec<&str> = tcp.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "envoy.filters.network.rbac",
            "envoy.filters.network.ext_authz"
        ]
    );
    let shadow = network_rbac(&tcp[0]);
    assert!(shadow.rules.is_none(), "the shadow filter enforces nothing");
    assert_eq!(shadow.shadow_rules_stat_prefix, "istio_ext_authz_");
    assert!(
        shadow
            .shadow_rules
            .unwrap()
            .policies
            .contains_key("istio-ext-authz-ns[a]-policy[ask]-rule[0]")
    );

    // An HTTP provider does not apply to TCP (as istiod).
    let (_, tcp) = built(&custom("ask", "http", "5432"));
    assert!(tcp.is_empty());

    // A provider MeshConfig does not define, or two providers for one workload: what the rules
    // match is denied, on HTTP and on TCP.
    for policies in [
        custom("missing", "nope", "5432"),
        custom("one", "grpc", "5432") + &custom("two", "http", "5432"),
    ] {
        let (http, tcp) = built(&policies);
        assert_eq!(http, ["envoy.filters.http.rbac"], "{policies}");
        assert_eq!(tcp.len(), 1, "{policies}");
        let deny = network_rbac(&tcp[0]).rules.expect("enforced");
        assert_eq!(
            deny.action,
            envoy_types::pb::envoy::config::rbac::v3::rbac::Action::Deny as i32
        );
        assert!(!deny.policies.is_empty());
    }
}

/// The TLS parameters istiod writes: sidecar inbound mTLS at TLS 1.2–1.3 with its six GCM
/// cipher suites (MeshConfig `meshMTLS` raising the minimum and naming others), and upstream
/// contexts at TLS 1.2–1.3 (Envoy's client default stops at 1.2), MeshConfig `tlsDefaults`'
/// curves and ciphers on SIMPLE origination only.
#[test]
fn mesh_tls_parameters_as_istiod_writes_them() {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        DownstreamTlsContext, TlsParameters, UpstreamTlsContext,
    };
    use prost::Message;
    let inbound_params = |mesh: &str| -> TlsParameters {
        let mut yaml = workload_yaml("");
        if !mesh.is_empty() {
            yaml = format!("{mesh}\n---\n{yaml}");
        }
        let c = crate::testing::push_context_with_mesh_config(&yaml);
        let l = listener_named(&c, &verified("a"), "virtualInbound");
        let chain = l
            .filter_chains
            .iter()
            .find(|ch| ch.name.starts_with("inbound|80") && ch.transport_socket.is_some())
            .expect("an mTLS chain for port 80");
        let Some(
            envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
                any,
            ),
        ) = chain.transport_socket.clone().unwrap().config_type
        else {
            panic!("typed TLS");
        };
        DownstreamTlsContext::decode(any.value.as_slice())
            .unwrap()
            .common_tls_context
            .unwrap()
            .tls_params
            .unwrap()
    };
    let default = inbound_params("");
    assert_eq!(
        (
            default.tls_minimum_protocol_version,
            default.tls_maximum_protocol_version
        ),
        (3, 4),
        "TLS 1.2 to 1.3"
    );
    assert_eq!(
        default.cipher_suites,
        crate::xds::generate::shared::tls::MESH_CIPHER_SUITES
    );
    let configured = inbound_params(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    meshMTLS: {minProtocolVersion: TLSV1_3, cipherSuites: [ECDHE-RSA-AES256-GCM-SHA384]}\n",
    );
    assert_eq!(configured.tls_minimum_protocol_version, 4);
    assert_eq!(configured.cipher_suites, ["ECDHE-RSA-AES256-GCM-SHA384"]);

    let upstream = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    tlsDefaults: {ecdhCurves: [X25519, P-224], cipherSuites: [ECDHE-RSA-AES128-GCM-SHA256]}\n---\n\
apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: ext, namespace: a}\n\
spec: {hosts: [api.example.com], ports: [{number: 443, name: https, protocol: HTTPS}], resolution: DNS, location: MESH_EXTERNAL}\n---\n\
apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: ext, namespace: a}\n\
spec: {host: api.example.com, trafficPolicy: {tls: {mode: SIMPLE}}}\n---\n\
apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: app, namespace: a}\n\
spec: {host: app.a.svc.cluster.local, trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}}\n---\n"
        .to_string()
        + &workload_yaml("");
    let c = crate::testing::push_context_with_mesh_config(&upstream);
    let params = |name: &str| -> TlsParameters {
        let cl = cluster(&c, &proxy("a", &[]), name);
        let socket = cl.transport_socket.or_else(|| {
            cl.transport_socket_matches
                .into_iter()
                .find(|m| m.name == "tlsMode-istio")
                .and_then(|m| m.transport_socket)
        });
        let Some(
            envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
                any,
            ),
        ) = socket
            .unwrap_or_else(|| panic!("no TLS socket on {name}"))
            .config_type
        else {
            panic!("typed TLS");
        };
        UpstreamTlsContext::decode(any.value.as_slice())
            .unwrap()
            .common_tls_context
            .unwrap()
            .tls_params
            .unwrap()
    };
    let simple = params("outbound|443||api.example.com");
    assert_eq!(
        (
            simple.tls_minimum_protocol_version,
            simple.tls_maximum_protocol_version
        ),
        (3, 4)
    );
    assert_eq!(simple.ecdh_curves, ["X25519"], "P-224 is left out");
    assert_eq!(simple.cipher_suites, ["ECDHE-RSA-AES128-GCM-SHA256"]);
    let mesh = params("outbound|80||app.a.svc.cluster.local");
    assert_eq!(
        (
            mesh.tls_minimum_protocol_version,
            mesh.tls_maximum_protocol_version
        ),
        (3, 4)
    );
    assert!(mesh.ecdh_curves.is_empty() && mesh.cipher_suites.is_empty());
}
