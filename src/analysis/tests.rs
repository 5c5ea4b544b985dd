use super::*;
use crate::store::{Store, StoreWriter};

fn findings(yaml: &str) -> Findings {
    let snapshot = Store::from_yaml(yaml).snapshot();
    let registry = Registry::build(&snapshot, "cluster.local");
    analyze(&snapshot, &registry, "cluster.local")
}

fn codes(f: &Findings, kind: Kind, ns: &str, name: &str) -> Vec<(String, String)> {
    let key = ConfigKey {
        kind,
        namespace: ns.into(),
        name: name.into(),
        cluster: String::new(),
    };
    f.get(&key)
        .into_iter()
        .flatten()
        .map(|m| (m.code.to_string(), m.text.clone()))
        .collect()
}

const SERVICES: &str = "
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: shop}
spec: {hosts: [reviews.shop.svc.cluster.local], ports: [{number: 80, name: http, protocol: HTTP}], resolution: STATIC}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: shop}
spec: {hosts: ['*.example.com'], ports: [{number: 443, name: tls, protocol: TLS}], resolution: NONE}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec: {host: reviews, subsets: [{name: v1, labels: {version: v1}}]}
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: public, namespace: shop}
spec: {selector: {istio: ingressgateway}, servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]}
";

fn vs(name: &str, body: &str) -> String {
    format!(
        "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n{body}\n"
    )
}

#[test]
fn references_that_resolve_have_no_findings() {
    let yaml = format!(
        "{SERVICES}{}",
        vs(
            "ok",
            "  hosts: [reviews]\n  gateways: [mesh, public, shop/public]\n  http:\n  - route:\n    - destination: {host: reviews, subset: v1}\n    mirror: {host: api.example.com}\n"
        )
    );
    assert_eq!(findings(&yaml), Findings::new());
}

#[test]
fn missing_hosts_subsets_and_gateways_are_ist0101() {
    let yaml = format!(
        "{SERVICES}{}",
        vs(
            "broken",
            "  hosts: [reviews]\n  gateways: [elsewhere/gw, mesh]\n  http:\n  - route:\n    - destination: {host: ratings}\n    - destination: {host: reviews, subset: v2}\n    mirror: {host: shadow}\n  tcp:\n  - route:\n    - destination: {host: db.example.org}\n"
        )
    );
    let got = codes(&findings(&yaml), Kind::VirtualService, "shop", "broken");
    let want = [
        "Referenced gateway not found: \"elsewhere/gw\"",
        "Referenced host not found: \"db.example.org\"",
        "Referenced host not found: \"ratings\"",
        "Referenced host+subset in destinationrule not found: \"reviews+v2\"",
        "Referenced mirror host not found: \"shadow\"",
    ];
    let mut texts: Vec<&str> = got.iter().map(|(_, t)| t.as_str()).collect();
    texts.sort();
    assert_eq!(texts, want);
    assert!(got.iter().all(|(c, _)| c == "IST0101"));
    let m = &findings(&yaml)[&ConfigKey {
        kind: Kind::VirtualService,
        namespace: "shop".into(),
        name: "broken".into(),
        cluster: String::new(),
    }];
    assert_eq!(
        m.iter().next().unwrap().to_status(),
        serde_json::json!({
            "documentationUrl": "https://istio.io/v1.30/docs/reference/config/analysis/ist0101/",
            "level": "ERROR",
            "type": {"code": "IST0101"},
        })
    );
}

#[test]
fn two_mesh_virtual_services_for_one_host_are_ist0109_on_both() {
    let body = "  hosts: [reviews]\n  http:\n  - route:\n    - destination: {host: reviews}\n";
    let gateway_only = "  hosts: [reviews]\n  gateways: [public]\n  http:\n  - route:\n    - destination: {host: reviews}\n";
    let yaml = format!(
        "{SERVICES}{}{}{}",
        vs("a", body),
        vs("b", body),
        vs("c", gateway_only)
    );
    let f = findings(&yaml);
    for name in ["a", "b"] {
        let got = codes(&f, Kind::VirtualService, "shop", name);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, "IST0109");
        assert!(got[0].1.contains("shop/a,shop/b"), "{}", got[0].1);
    }
    assert!(codes(&f, Kind::VirtualService, "shop", "c").is_empty());
}

fn pod(labels: &[(&str, &str)]) -> crate::config::Config {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    crate::config::Config {
        api_version: "v1".into(),
        kind: Kind::Pod,
        metadata: crate::config::ObjectMeta {
            name: "app".into(),
            namespace: "shop".into(),
            labels,
            ..Default::default()
        },
        spec: Spec::Pod(Box::default()),
        status: None,
    }
}

fn findings_with(yaml: &str, pods: Vec<crate::config::Config>) -> Findings {
    let store = StoreWriter::from_yaml(yaml);
    for p in pods {
        store.upsert(p);
    }
    let snapshot = store.snapshot();
    let registry = Registry::build(&snapshot, "cluster.local");
    analyze(&snapshot, &registry, "cluster.local")
}

#[test]
fn a_gateway_selecting_no_pod_is_reported_when_pods_are_known() {
    // Files mode: no pods in the store, so nothing is said.
    assert!(codes(&findings(SERVICES), Kind::Gateway, "shop", "public").is_empty());
    let got = codes(
        &findings_with(SERVICES, vec![pod(&[("app", "reviews")])]),
        Kind::Gateway,
        "shop",
        "public",
    );
    assert_eq!(
        got,
        [(
            "IST0101".to_string(),
            "Referenced selector not found: \"istio=ingressgateway\"".to_string()
        )]
    );
    let gateway_pod = pod(&[("istio", "ingressgateway")]);
    assert!(
        codes(
            &findings_with(SERVICES, vec![gateway_pod]),
            Kind::Gateway,
            "shop",
            "public"
        )
        .is_empty()
    );
}
