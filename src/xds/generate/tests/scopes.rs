//! What a proxy sees: scopes, shared views, exportTo, Sidecar selection and the conflicts istiod counts.

use super::*;

#[test]
fn proxies_sharing_a_scope_share_built_resources() {
    let c = ctx(&format!(
        "{}{}",
        se("a", "web", "HTTP"),
        se("a", "db", "TCP")
    ));
    let (p1, p2, other) = (proxy("a", &[]), proxy("a", &[]), proxy("b", &[]));
    let (s1, s2, s3) = (c.scope(&p1), c.scope(&p2), c.scope(&other));
    let r1 = generate(&c, &p1, &s1, TypeUrl::Cluster, None);
    let r2 = generate(&c, &p2, &s2, TypeUrl::Cluster, None);
    assert!(
        r1.iter().zip(&r2).all(|(a, b)| Arc::ptr_eq(a, b)),
        "built once, shared"
    );
    let r3 = generate(&c, &other, &s3, TypeUrl::Cluster, None);
    assert!(
        !Arc::ptr_eq(&r1[0], &r3[0]),
        "another namespace is another scope"
    );
}

/// An endpoint-only push keeps its predecessor's proxy views: a proxy whose address a moved
/// endpoint now serves must still get that service's inbound cluster, never the view it had.
#[test]
fn shared_views_follow_the_ports_a_moved_endpoint_serves() {
    let at = |ip: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: billing, namespace: vms}}\nspec: {{hosts: [billing.vms.svc.cluster.local], ports: [{{number: 8080, name: http, protocol: HTTP}}], resolution: STATIC, endpoints: [{{address: {ip}}}]}}\n"
        )
    };
    let vm = vm_at("10.9.0.1");
    let inbound = |c: &PushContext| -> Vec<String> {
        clusters_of(c, &vm)
            .into_iter()
            .map(|cl| cl.name)
            .filter(|n| n.starts_with("inbound|"))
            .collect()
    };
    let before = ctx(&at("10.9.0.2"));
    assert!(inbound(&before).is_empty());
    let after = ctx(&at("10.9.0.1")).sharing_scopes(&before.scope_cache());
    assert_eq!(inbound(&after), ["inbound|8080||"]);
    let back = ctx(&at("10.9.0.2")).sharing_scopes(&after.scope_cache());
    assert!(inbound(&back).is_empty());
}

#[test]
fn same_label_proxies_at_different_ips_get_their_own_inbound_config() {
    // Two VMs with the same labels behind different services: each must get the inbound
    // clusters and listener chains of the ports served at its own address, never the other's.
    let c = ctx("
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: billing, namespace: vms}
spec:
  hosts: [billing.vms.svc.cluster.local]
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.9.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ledger, namespace: vms}
spec:
  hosts: [ledger.vms.svc.cluster.local]
  ports: [{number: 9090, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.9.0.2}]
");
    let (first, second) = (vm_at("10.9.0.1"), vm_at("10.9.0.2"));
    assert_eq!(first.labels, second.labels);
    let inbound = |p: &Proxy| -> Vec<String> {
        clusters_of(&c, p)
            .into_iter()
            .map(|cl| cl.name)
            .filter(|n| n.starts_with("inbound|"))
            .collect()
    };
    // Generated in this order, the second VM would be served the first's cached clusters if the
    // cache key left out what the generator reads of the proxy's address.
    assert_eq!(inbound(&first), ["inbound|8080||"]);
    assert_eq!(inbound(&second), ["inbound|9090||"]);
    let chains = |p: &Proxy| -> Vec<String> {
        inbound_chains(&listener_named(&c, p, "virtualInbound"))
            .into_iter()
            .map(|(name, _)| name)
            .filter(|n| !n.starts_with("inbound-passthrough"))
            .collect()
    };
    assert_eq!(chains(&first), ["inbound|8080||"]);
    assert_eq!(chains(&second), ["inbound|9090||"]);
}

#[test]
fn sidecar_egress_and_export_to_scope_what_a_proxy_sees() {
    let yaml = format!(
        "{}{}{}---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: a}}\nspec: {{egress: [{{hosts: [\"./*\"]}}]}}\n",
        se("a", "web", "HTTP"),
        se("b", "api", "HTTP"),
        se("b", "private", "HTTP").replace(
            "resolution: STATIC",
            "resolution: STATIC, exportTo: [\".\"]"
        )
    );
    let c = ctx(&yaml);
    let names = |ns: &str| -> Vec<String> {
        c.scope(&proxy(ns, &[]))
            .services
            .iter()
            .map(|s| s.hostname.clone())
            .collect()
    };
    assert_eq!(
        names("a"),
        ["web.a.svc.cluster.local"],
        "Sidecar egress ./* keeps a proxy to its namespace"
    );
    assert_eq!(
        names("c"),
        ["api.b.svc.cluster.local", "web.a.svc.cluster.local"],
        "exportTo . hides private from others"
    );
    assert!(names("b").contains(&"private.b.svc.cluster.local".to_string()));
}

/// A Sidecar that sets only its outbound traffic policy (or only ingress) imports `*/*`, as
/// istiod fills in a missing egress: it does not hide every service.
#[test]
fn a_sidecar_without_egress_imports_everything() {
    let yaml = format!(
        "{}{}---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: a}}\nspec: {{outboundTrafficPolicy: {{mode: REGISTRY_ONLY}}}}\n",
        se("a", "web", "HTTP"),
        se("b", "api", "HTTP"),
    );
    let c = ctx(&yaml);
    let scope = c.scope(&proxy("a", &[]));
    let names: Vec<&str> = scope.services.iter().map(|s| s.hostname.as_str()).collect();
    assert_eq!(
        names,
        ["api.b.svc.cluster.local", "web.a.svc.cluster.local"]
    );
}

#[test]
fn lookups_prefer_exact_hosts_then_the_most_specific_wildcard_and_respect_export_to() {
    let c = ctx(r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a-wild, namespace: default}
spec: {hosts: ["*.example.com"], http: [{route: [{destination: {host: x}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: b-narrow, namespace: default}
spec: {hosts: ["*.api.example.com"], http: [{route: [{destination: {host: x}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: c-hidden, namespace: default}
spec: {hosts: [v1.api.example.com], exportTo: ["."], http: [{route: [{destination: {host: x}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: d-exact, namespace: other}
spec: {hosts: [v1.api.example.com], http: [{route: [{destination: {host: x}}]}]}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: wild, namespace: default}
spec: {host: "*.example.com", trafficPolicy: {loadBalancer: {simple: RANDOM}}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: exact, namespace: default}
spec: {host: v1.api.example.com, trafficPolicy: {loadBalancer: {simple: RANDOM}}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: se, namespace: default}
spec: {hosts: [v1.api.example.com, v2.api.example.com, www.example.com], ports: [{number: 80, name: http, protocol: HTTP}], resolution: DNS}
"#);
    let vs = |ns: &str, host: &str| {
        c.virtual_service_for(ns, host)
            .map(|v| v.config.metadata.name.clone())
    };
    assert_eq!(
        vs("default", "v1.api.example.com").as_deref(),
        Some("c-hidden"),
        "exact, same namespace"
    );
    assert_eq!(
        vs("third", "v1.api.example.com").as_deref(),
        Some("d-exact"),
        "exportTo . hides c-hidden"
    );
    assert_eq!(
        vs("default", "v2.api.example.com").as_deref(),
        Some("b-narrow"),
        "most specific wildcard"
    );
    assert_eq!(vs("default", "www.example.com").as_deref(), Some("a-wild"));
    assert_eq!(vs("default", "www.other.com"), None);
    let svc = |host: &str| {
        c.registry
            .services
            .values()
            .find(|s| s.hostname == host)
            .cloned()
            .unwrap_or_else(|| panic!("{host} not in the registry"))
    };
    let dr = |host: &str| {
        c.destination_rule_for("default", &Default::default(), &svc(host))
            .map(|d| d.config.metadata.name.clone())
    };
    assert_eq!(dr("v1.api.example.com").as_deref(), Some("exact"));
    assert_eq!(dr("www.example.com").as_deref(), Some("wild"));
}

#[test]
fn mesh_default_export_to_applies_to_objects_without_export_to() {
    let yaml = format!(
        "{}{}",
        se("a", "web", "HTTP"),
        se("a", "shared", "HTTP").replace("spec: {", "spec: {exportTo: [\"*\"], ")
    );
    let mesh = MeshSettings {
        default_service_export_to: vec![".".into()],
        ..MeshSettings::default()
    };
    let c = push_context_with(&yaml, mesh);
    let names = |ns: &str| -> Vec<String> {
        clusters_of(&c, &proxy(ns, &[]))
            .into_iter()
            .map(|c| c.name)
            .filter(|n| n.starts_with("outbound|"))
            .collect()
    };
    assert!(names("a").contains(&"outbound|80||web.a.svc.cluster.local".to_string()));
    assert_eq!(
        names("b"),
        ["outbound|80||shared.a.svc.cluster.local"],
        "web sets no exportTo: the mesh's default keeps it in its namespace"
    );
}

#[test]
fn the_oldest_sidecar_selecting_a_workload_wins() {
    let sidecar = |name: &str, created: &str, host: &str| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: {name}, namespace: a, creationTimestamp: \"{created}\"}}\n\
spec: {{workloadSelector: {{labels: {{app: x}}}}, egress: [{{hosts: [\"./{host}\"]}}]}}\n"
        )
    };
    let yaml = format!(
        "{}{}{}{}",
        se("a", "web", "HTTP"),
        se("a", "other", "HTTP"),
        sidecar(
            "a-newer",
            "2026-06-01T00:00:00Z",
            "other.a.svc.cluster.local"
        ),
        sidecar("z-older", "2025-01-01T00:00:00Z", "web.a.svc.cluster.local")
    );
    let c = ctx(&yaml);
    let p = labelled("sidecar~10.0.0.1~x-1.a~a.svc.cluster.local", "x");
    let names: Vec<String> = clusters_of(&c, &p)
        .into_iter()
        .map(|c| c.name)
        .filter(|n| n.starts_with("outbound|"))
        .collect();
    assert_eq!(names, ["outbound|80||web.a.svc.cluster.local"]);
}

/// The conflicts istiod counts: a host two mesh VirtualServices claim, a subset two
/// DestinationRules of one host and namespace both name (another namespace's rule is no conflict).
#[test]
fn conflicts_are_counted_as_istiod_does() {
    let vs = |name: &str, host: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: a}}\nspec:\n  hosts: [{host}]\n  http:\n  - route:\n    - destination: {{host: {host}}}\n---\n"
        )
    };
    let dr = |name: &str, ns: &str, subset: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  host: web.a.svc.cluster.local\n  subsets:\n  - name: {subset}\n    labels: {{version: {subset}}}\n---\n"
        )
    };
    let yaml = [
        vs("one", "web.a.svc.cluster.local"),
        vs("two", "web.a.svc.cluster.local"),
        vs("three", "other.a.svc.cluster.local"),
        dr("d1", "a", "v1"),
        dr("d2", "a", "v1"),
        dr("d3", "b", "v1"),
        dr("d4", "a", "v2"),
    ]
    .concat();
    assert_eq!(
        ctx(&yaml).conflicts(),
        crate::xds::context::Conflicts {
            duplicate_domains: 1,
            duplicate_subsets: 1,
        }
    );
}

/// istiod's listener conflicts: two TCP services without addresses on one port (the first keeps
/// the listener's connections), and a pod port two services select with different protocols.
#[test]
fn listener_conflicts_are_counted_as_istiod_does() {
    let se = |name: &str, port: u32, proto: &str, target: u32| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: a}}\nspec: {{hosts: [{name}.example.com], ports: [{{number: {port}, name: p, protocol: {proto}, targetPort: {target}}}], resolution: STATIC, endpoints: [{{address: 10.0.0.9}}]}}\n"
        )
    };
    let quiet = ctx(&[se("one", 9000, "TCP", 9000), se("two", 9001, "TCP", 9001)].concat());
    let p = proxy("a", &[]);
    let conflicted = |listeners: Vec<std::sync::Arc<crate::xds::resource::Resource>>| {
        listeners
            .iter()
            .filter(|l| !l.findings.is_empty())
            .map(|l| l.name.to_string())
            .collect::<Vec<_>>()
    };
    let listeners = generate(&quiet, &p, &quiet.scope(&p), TypeUrl::Listener, None);
    assert!(conflicted(listeners).is_empty());
    assert_eq!(quiet.inbound_conflicts(), 0);

    let yaml = [
        se("db-a", 5432, "TCP", 5432),
        se("db-b", 5432, "TCP", 5432),
        se("web", 80, "HTTP", 8080),
        se("raw", 81, "TCP", 8080),
    ]
    .concat();
    let c = ctx(&yaml);
    let listeners = generate(&c, &p, &c.scope(&p), TypeUrl::Listener, None);
    assert_eq!(conflicted(listeners), ["0.0.0.0_5432"], "two TCP services");
    assert_eq!(
        c.inbound_conflicts(),
        1,
        "the proxy at 10.0.0.9 has two protocols on 8080"
    );
}
