use super::*;
use crate::store::StoreWriter;

const SE: &str = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a, namespace: shop}\nspec: {hosts: [a.example.com], ports: [{number: 80, name: http, protocol: HTTP}], resolution: STATIC, endpoints: [{address: 10.0.0.1}]}\n";
const VS: &str = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: a, namespace: shop}\nspec: {hosts: [a.example.com], http: [{timeout: 5s, route: [{destination: {host: a.example.com}}]}]}\n";

/// The routing index is kept across an endpoint change and rebuilt when a VirtualService
/// changes, so a context never routes with a stale one.
#[test]
fn routing_is_reused_only_while_routes_are_unchanged() {
    let mesh = MeshSettings::default();
    let store = StoreWriter::from_yaml(&format!("{SE}---\n{VS}"));
    let first = store.snapshot();
    let routing = Arc::new(Routing::build(&first, &mesh));
    store.apply_yaml(&SE.replace("10.0.0.1", "10.0.0.2"));
    let second = store.snapshot();
    let kept = routing.reuse_or_build(&first, &second, &mesh);
    assert!(Arc::ptr_eq(&kept, &routing));
    store.apply_yaml(&VS.replace("5s", "7s"));
    let third = store.snapshot();
    let rebuilt = kept.reuse_or_build(&second, &third, &mesh);
    assert!(!Arc::ptr_eq(&rebuilt, &kept));
    let timeout = |r: &Routing| r.virtual_services[0].spec.http[0].timeout;
    assert_ne!(timeout(&rebuilt), timeout(&kept));
    let other_suffix = MeshSettings {
        domain_suffix: "example.internal".into(),
        ..MeshSettings::default()
    };
    let resuffixed = rebuilt.reuse_or_build(&third, &third, &other_suffix);
    assert!(!Arc::ptr_eq(&resuffixed, &rebuilt));
}

/// A route whose parent is a ServiceEntry reads the entry's hosts: adding a host routes it too,
/// while an entry change with no such route keeps the translation.
#[test]
fn a_mesh_routes_parent_change_is_translated_again() {
    let mesh = MeshSettings::default();
    let route = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: shop}\nspec: {parentRefs: [{group: networking.istio.io, kind: ServiceEntry, name: a}], rules: [{backendRefs: [{group: networking.istio.io, kind: Hostname, name: a.example.com, port: 80}]}]}\n";
    let store = StoreWriter::from_yaml(&format!("{SE}---\n{route}"));
    let first = store.snapshot();
    let routing = Arc::new(Routing::build(&first, &mesh));
    store.apply_yaml(&SE.replace("[a.example.com]", "[a.example.com, b.example.com]"));
    let second = store.snapshot();
    let rebuilt = routing.reuse_or_build(&first, &second, &mesh);
    let hosts = |r: &Routing| -> Vec<String> {
        r.gateway_api
            .virtual_services
            .iter()
            .filter_map(|c| match &c.config.spec {
                crate::config::Spec::VirtualService(v) => Some(v.hosts[0].clone()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(hosts(&routing), ["a.example.com"]);
    assert_eq!(hosts(&rebuilt), ["a.example.com", "b.example.com"]);

    let plain = StoreWriter::from_yaml(SE);
    let before = plain.snapshot();
    let routing = Arc::new(Routing::build(&before, &mesh));
    plain.apply_yaml(&SE.replace("[a.example.com]", "[a.example.com, b.example.com]"));
    let kept = routing.reuse_or_build(&before, &plain.snapshot(), &mesh);
    assert!(Arc::ptr_eq(&kept.gateway_api, &routing.gateway_api));
}
