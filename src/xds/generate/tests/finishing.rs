//! The finishing step: a pass sees every typed Cluster, Listener and HTTP connection manager of a
//! scope with its class, and what it changes is what gets encoded.

use super::*;
use crate::xds::generate::finish::{Built, Class, Pass, Typed, finish_with};
use envoy_types::pb::envoy::config::listener::v3::Listener;
use std::sync::Mutex;

/// Records what it sees and renames every HTTP connection manager's stat prefix.
#[derive(Default)]
struct Recording {
    seen: Mutex<Vec<(String, String, Class)>>,
}

impl Pass for Recording {
    fn name(&self) -> &'static str {
        "recording"
    }
    fn applies(&self, _: &PushContext, _: &ScopeView) -> bool {
        true
    }
    fn apply(&self, _: &PushContext, _: &ScopeView, resources: &mut Vec<Typed>) {
        let mut seen = self.seen.lock().unwrap();
        for r in resources.iter_mut() {
            let what = match &r.built {
                Built::Cluster(_) => "cluster",
                Built::Listener(_) => "listener",
                Built::Route(_) => "route",
                Built::LoadAssignment(_) => "endpoints",
                Built::Secret(_) => "secret",
                Built::ExtensionConfig(_) => "extension",
                Built::Istio(_) => "istio",
            };
            seen.push((what.into(), r.name.clone(), r.class));
            let (name, class) = (r.name.clone(), r.class);
            r.edit_http_connection_managers(|chain, hcm| {
                seen.push(("hcm".into(), format!("{name}/{}", chain.name), class));
                hcm.stat_prefix = "patched".into();
            });
        }
    }
}

fn names(resources: &[Arc<crate::xds::resource::Resource>]) -> Vec<String> {
    resources.iter().map(|r| r.name.to_string()).collect()
}

#[test]
fn a_pass_sees_every_resource_of_a_scope_with_its_class() {
    let c = ctx(&workload_yaml(""));
    let p = verified("a");
    let scope = c.scope(&p);
    let pass = Recording::default();
    let passes: [&dyn Pass; 1] = [&pass];
    let clusters = finish_with(&passes, &c, &scope, build_all(&c, &scope, TypeUrl::Cluster));
    let listeners = finish_with(
        &passes,
        &c,
        &scope,
        build_all(&c, &scope, TypeUrl::Listener),
    );
    // The pass saw exactly what the proxy is sent.
    assert_eq!(
        names(&clusters),
        names(&generate(&c, &p, &scope, TypeUrl::Cluster, None))
    );
    assert_eq!(
        names(&listeners),
        names(&generate(&c, &p, &scope, TypeUrl::Listener, None))
    );
    let seen = pass.seen.lock().unwrap().clone();
    let class_of = |what: &str, name: &str| {
        seen.iter()
            .find(|(w, n, _)| w == what && n == name)
            .map(|(_, _, class)| *class)
    };
    assert_eq!(
        class_of("cluster", "outbound|80||app.a.svc.cluster.local"),
        Some(Class::SidecarOutbound)
    );
    assert_eq!(
        class_of("cluster", "inbound|80||"),
        Some(Class::SidecarInbound)
    );
    assert_eq!(
        class_of("listener", "virtualInbound"),
        Some(Class::SidecarInbound)
    );
    assert_eq!(
        class_of("listener", "0.0.0.0_80"),
        Some(Class::SidecarOutbound)
    );
    let hcms: Vec<&String> = seen
        .iter()
        .filter(|(w, _, _)| w == "hcm")
        .map(|(_, n, _)| n)
        .collect();
    assert!(
        hcms.iter().any(|n| n.starts_with("0.0.0.0_80/")),
        "the outbound HTTP listener's connection manager: {hcms:?}"
    );
    assert!(
        hcms.iter().any(|n| n.starts_with("virtualInbound/")),
        "the inbound HTTP chain's connection manager: {hcms:?}"
    );
    // What the pass changed is what was encoded.
    for r in &listeners {
        let l = Listener::decode(r.any.value.as_slice()).unwrap();
        let mut typed = Typed::new(
            l.name.clone(),
            Class::SidecarOutbound,
            crate::xds::generate::typed_listener::TypedListener::decoded(l),
        );
        typed.edit_http_connection_managers(|_, hcm| assert_eq!(hcm.stat_prefix, "patched"));
    }
}

#[test]
fn gateways_are_their_own_class() {
    let yaml = concat!(
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: a}\n",
        "spec:\n  selector: {app: gw}\n  servers:\n",
        "  - {port: {number: 8080, name: http, protocol: HTTP}, hosts: ['*']}\n",
    );
    let c = ctx(yaml);
    let gw = labelled("router~10.0.0.5~gw-0.a~a.svc.cluster.local", "gw");
    let scope = c.scope(&gw);
    let listeners = build_all(&c, &scope, TypeUrl::Listener);
    assert!(!listeners.is_empty());
    assert!(listeners.iter().all(|l| l.class == Class::Gateway));
    assert!(
        build_all(&c, &scope, TypeUrl::Cluster)
            .iter()
            .all(|c| c.class == Class::Gateway)
    );
}

#[test]
fn no_pass_means_the_bytes_of_a_plain_encoding() {
    let c = ctx(&workload_yaml(""));
    let p = verified("a");
    let scope = c.scope(&p);
    let typed = build_all(&c, &scope, TypeUrl::Listener);
    let plain: Vec<Vec<u8>> = typed
        .iter()
        .map(|t| match &t.built {
            Built::Listener(l) => l.as_ref().clone().encode().encode_to_vec(),
            _ => Vec::new(),
        })
        .collect();
    let finished: Vec<Vec<u8>> = finish_with(&[], &c, &scope, typed)
        .iter()
        .map(|r| r.any.value.clone())
        .collect();
    assert_eq!(plain, finished);
}

/// What a builder packs itself no pass can see: every listener of every role of the varied mesh
/// comes out of its builder with its connection managers and TCP proxies typed.
#[test]
fn builders_hand_over_connection_managers_and_tcp_proxies_typed() {
    use crate::xds::generate::typed_listener::{FilterConfig, TypedListener};
    use envoy_types::pb::envoy::config::listener::v3::filter::ConfigType;
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
    use prost::Name;
    let packed = [HttpConnectionManager::type_url(), TcpProxy::type_url()];
    let (mut http, mut tcp) = (0, 0);
    for (label, mut typed) in every_listener() {
        let name = typed.name.clone();
        let Some(listener) = typed.listener_mut() else {
            continue;
        };
        let TypedListener {
            listener: proto, ..
        } = listener;
        assert!(proto.filter_chains.is_empty() && proto.default_filter_chain.is_none());
        assert!(
            proto
                .api_listener
                .as_ref()
                .is_none_or(|a| a.api_listener.is_none())
        );
        http += usize::from(listener.api.is_some());
        for chain in listener.all_chains() {
            for f in &chain.filters {
                match &f.config {
                    FilterConfig::Http(_) => http += 1,
                    FilterConfig::Tcp(_) => tcp += 1,
                    FilterConfig::Encoded(Some(c)) => {
                        if let ConfigType::TypedConfig(any) = c.as_ref() {
                            assert!(
                                !packed.contains(&any.type_url),
                                "{label}: {name} packs {}",
                                any.type_url
                            );
                        }
                    }
                    FilterConfig::Encoded(None) => {}
                }
            }
        }
    }
    assert!(
        http > 10 && tcp > 10,
        "{http} connection managers, {tcp} TCP proxies"
    );
}

/// Every listener built for every role of the varied mesh, with its proxy's label.
fn every_listener() -> Vec<(&'static str, Typed)> {
    let c = crate::testing::push_context_with_mesh_config(&super::snapshot::mesh());
    let mut out = Vec::new();
    for (label, p) in super::snapshot::proxies() {
        let scope = c.scope(&p);
        let mut listeners = build_all(&c, &scope, TypeUrl::Listener);
        for target in super::snapshot::GRPC_TARGETS {
            listeners.extend(crate::xds::generate::grpc::api_listener(&c, &scope, target));
        }
        out.extend(listeners.into_iter().map(|l| (label, l)));
    }
    out
}

/// The passes act on what a listener is for, never on its name: each builder says it. Capture
/// listeners log connections and take per-chain port matches, tunnel ends report nothing of
/// their own, a waypoint's destinations listener has each service's chains marked with it.
#[test]
fn every_listener_says_what_it_is_for() {
    use crate::xds::generate::typed_listener::ListenerRole;
    use crate::xds::generate::waypoint::{CONNECT_ORIGINATE, CONNECT_TERMINATE, MAIN_INTERNAL};
    let mut seen = std::collections::BTreeSet::new();
    for (label, typed) in every_listener() {
        let Built::Listener(l) = &typed.built else {
            continue;
        };
        let expected = match l.name() {
            "virtualInbound" | "virtualOutbound" => ListenerRole::Capture,
            CONNECT_ORIGINATE | CONNECT_TERMINATE => ListenerRole::TunnelEnd,
            MAIN_INTERNAL if typed.class == Class::Waypoint => ListenerRole::Destinations,
            _ => ListenerRole::Traffic,
        };
        assert_eq!(l.role, expected, "{label}: {}", l.name());
        seen.insert(format!("{expected:?}"));
        for chain in &l.chains {
            let host = crate::xds::generate::shared::util::parse_service_cluster(&chain.name)
                .map(|(_, _, host)| host);
            let marked = (l.role == ListenerRole::Destinations)
                .then_some(host)
                .flatten();
            assert_eq!(chain.service.as_deref(), marked, "{label}: {}", chain.name);
        }
    }
    assert_eq!(
        seen.len(),
        4,
        "every role is built by the varied mesh: {seen:?}"
    );
}
