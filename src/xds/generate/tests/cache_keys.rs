//! What each type declares it reads (`generate::inputs`) against what its generators read: every
//! kind of a varied mesh is removed in turn, and each type and role not declaring that kind must
//! come out the same, so a push that changes only that kind may keep it. And a push keeps, as the
//! same resources, what the change did not touch, and rebuilds what it did.

use super::snapshot::{asked, mesh as varied_mesh, proxies};
use crate::config::Kind;
use crate::store::StoreWriter;
use crate::xds::context::PushContext;
use crate::xds::generate::{generate, inputs};
use crate::xds::types::TypeUrl;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

fn mesh() -> String {
    varied_mesh()
}

fn all_proxies() -> Vec<(&'static str, crate::xds::proxy::Proxy)> {
    proxies()
}

fn context(store: &StoreWriter, version: u64) -> PushContext {
    let snapshot = store.snapshot();
    let (mesh, _) = crate::model::mesh::MeshSettings::default().with_mesh_config(&snapshot);
    let registry = Arc::new(crate::model::Registry::build(
        &snapshot,
        &mesh.domain_suffix,
    ));
    PushContext::new(version, snapshot, registry, mesh)
}

/// What the names a proxy asks for come from: the full mesh's listeners, clusters and routes.
type Asked = BTreeMap<(&'static str, TypeUrl), Option<BTreeSet<String>>>;

/// Every type's resources of every proxy, by (proxy, type), with the proxy's scope key and role,
/// asking for `asked`'s names.
type Built =
    BTreeMap<(&'static str, TypeUrl), (u64, crate::xds::context::Role, Vec<(String, u64)>)>;

fn build(ctx: &PushContext, asked: &Asked) -> Built {
    let mut out = Built::new();
    for (label, p) in all_proxies() {
        let scope = ctx.scope(&p);
        for type_url in TypeUrl::ALL {
            let Some(names) = asked.get(&(label, type_url)) else {
                continue;
            };
            let resources = generate(ctx, &p, &scope, type_url, names.as_ref());
            let digests = resources
                .iter()
                .map(|r| (r.name.to_string(), r.digest))
                .collect();
            out.insert((label, type_url), (scope.key, scope.role(), digests));
        }
    }
    out
}

fn asked_of(ctx: &PushContext) -> Asked {
    let mut out = Asked::new();
    for (label, p) in all_proxies() {
        for type_url in TypeUrl::ALL {
            // Workload certificates are per proxy and never cached.
            if type_url != TypeUrl::Secret {
                out.insert((label, type_url), asked(ctx, &p, label, type_url));
            }
        }
    }
    out
}

fn declares(type_url: TypeUrl, role: crate::xds::context::Role, kind: Kind) -> bool {
    inputs::reads(type_url, role)
        .iter()
        .any(|group| group.contains(&kind))
}

/// For each kind of the mesh: without any object of it, every type that does not declare it is
/// built the same for every proxy whose scope it leaves alone (a changed scope is a changed key).
#[test]
fn a_kind_no_type_declares_changes_nothing_of_that_type() {
    let full_store = crate::testing::store(&mesh());
    let full = context(&full_store, 1);
    let asked = asked_of(&full);
    let before = build(&full, &asked);
    let mut absent = Vec::new();
    let mut undeclared = Vec::new();
    for &kind in Kind::ALL {
        let keys: Vec<_> = full.snapshot.list(kind).map(|e| e.config.key()).collect();
        if keys.is_empty() {
            absent.push(kind);
            continue;
        }
        let store = crate::testing::store(&mesh());
        for key in &keys {
            store.delete(key);
        }
        let without = context(&store, 2);
        if without.mesh != full.mesh {
            continue;
        }
        for (at, (key, role, digests)) in build(&without, &asked) {
            let (key_before, _, digests_before) = &before[&at];
            if key == *key_before && !declares(at.1, role, kind) && digests != *digests_before {
                undeclared.push(format!("{:?} of {} ({role:?}) reads {kind:?}", at.1, at.0));
            }
        }
    }
    assert!(undeclared.is_empty(), "{undeclared:#?}");
    assert!(
        absent.is_empty(),
        "the mesh should hold every kind: {absent:?}"
    );
}

/// Every resource of every proxy, by (proxy, type): the resources themselves, to tell a kept one
/// (the same allocation) from a rebuilt one.
fn resources(
    ctx: &PushContext,
    asked: &Asked,
) -> BTreeMap<(&'static str, TypeUrl), Vec<Arc<crate::xds::resource::Resource>>> {
    let mut out = BTreeMap::new();
    for (label, p) in all_proxies() {
        let scope = ctx.scope(&p);
        for type_url in TypeUrl::ALL {
            if let Some(names) = asked.get(&(label, type_url)) {
                out.insert(
                    (label, type_url),
                    generate(ctx, &p, &scope, type_url, names.as_ref()),
                );
            }
        }
    }
    out
}

/// The types of each proxy the next push kept (every resource the same allocation), after
/// `change` was applied to the store of `first`'s mesh. Also checks that what was kept is what a
/// push without any earlier one builds, byte for byte.
fn kept_after(change: &str) -> BTreeSet<(&'static str, TypeUrl)> {
    let store = crate::testing::store(&mesh());
    let first = context(&store, 1);
    let asked = asked_of(&first);
    let before = resources(&first, &asked);
    store.apply_yaml(change);
    let second = context(&store, 2).keeping(&first, inputs::reads);
    let after = resources(&second, &asked);
    let fresh = build(&context(&store, 3), &asked);
    let mut kept = BTreeSet::new();
    for (at, list) in &after {
        let digests: Vec<(String, u64)> = list
            .iter()
            .map(|r| (r.name.to_string(), r.digest))
            .collect();
        assert_eq!(digests, fresh[at].2, "{at:?} differs from a fresh build");
        let same = list.len() == before[at].len()
            && list.iter().zip(&before[at]).all(|(a, b)| Arc::ptr_eq(a, b));
        if same && !list.is_empty() {
            kept.insert(*at);
        }
    }
    kept
}

fn types_kept(kept: &BTreeSet<(&'static str, TypeUrl)>, proxy: &str) -> BTreeSet<TypeUrl> {
    kept.iter()
        .filter(|(p, _)| *p == proxy)
        .map(|(_, t)| *t)
        .collect()
}

/// A new VirtualService leaves every sidecar's and gateway's clusters and endpoints as they were
/// built (not rebuilt: istiod's cluster and endpoint caches), and rebuilds routes and listeners;
/// a waypoint's clusters, which serve its routes' destinations, are rebuilt too.
#[test]
fn a_route_change_keeps_clusters_and_endpoints() {
    let kept = kept_after(
        "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-by-header, namespace: bookinfo}
spec:
  hosts: [ratings.bookinfo.svc.cluster.local]
  http:
  - match: [{headers: {end-user: {exact: jason}}}]
    route: [{destination: {host: ratings.bookinfo.svc.cluster.local}}]
    timeout: 3s
",
    );
    for proxy in ["sidecar-default", "sidecar-reviews", "ingressgateway"] {
        let types = types_kept(&kept, proxy);
        for t in [TypeUrl::Cluster, TypeUrl::Endpoint] {
            assert!(types.contains(&t), "{proxy}'s {t:?} kept: {types:?}");
        }
        for t in [TypeUrl::Listener, TypeUrl::Route] {
            assert!(!types.contains(&t), "{proxy}'s {t:?} rebuilt: {types:?}");
        }
    }
    assert!(types_kept(&kept, "waypoint").contains(&TypeUrl::Endpoint));
    assert!(!types_kept(&kept, "waypoint").contains(&TypeUrl::Cluster));
}

/// An AuthorizationPolicy is on listeners only: everything else is kept. A DestinationRule
/// changes clusters and endpoints, so they are rebuilt.
#[test]
fn a_policy_change_keeps_what_it_does_not_reach() {
    let kept = kept_after(
        "apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-admin, namespace: bookinfo}
spec:
  action: DENY
  rules: [{to: [{operation: {paths: [/admin]}}]}]
",
    );
    let types = types_kept(&kept, "sidecar-reviews");
    for t in [TypeUrl::Cluster, TypeUrl::Endpoint, TypeUrl::Route] {
        assert!(types.contains(&t), "{t:?} kept: {types:?}");
    }
    assert!(!types.contains(&TypeUrl::Listener));
    let kept = kept_after(
        "apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ratings-pool, namespace: bookinfo}
spec:
  host: ratings.bookinfo.svc.cluster.local
  trafficPolicy: {connectionPool: {tcp: {maxConnections: 7}}}
",
    );
    for t in [TypeUrl::Cluster, TypeUrl::Endpoint] {
        assert!(
            !types_kept(&kept, "sidecar-default").contains(&t),
            "{t:?} rebuilt"
        );
    }
}

/// Other mesh settings keep nothing: every type reads them.
#[test]
fn a_mesh_config_change_keeps_nothing() {
    let kept = kept_after(
        "apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    connectTimeout: 3s
",
    );
    assert!(kept.is_empty(), "{kept:?}");
}

/// The same config is the same bytes in every push (a map's order does not depend on the
/// instance that held it): else a cached type would differ from a rebuilt one, and a proxy would
/// be sent unchanged resources as new versions.
#[test]
fn every_push_encodes_the_same_config_to_the_same_bytes() {
    let store = crate::testing::store(&mesh());
    let first = context(&store, 1);
    let asked = asked_of(&first);
    let once = build(&first, &asked);
    for version in 2..8 {
        let again = build(&context(&store, version), &asked);
        for (at, (_, _, digests)) in &again {
            assert_eq!(*digests, once[at].2, "{at:?} encoded differently");
        }
    }
}

/// Each read of the cache is counted by outcome (`rudder_xds_cache_reads_total{type}`): built
/// earlier in the push, kept from the push before, or built now.
#[test]
fn cache_reads_are_counted_by_outcome() {
    let store = crate::testing::store(&mesh());
    let first = context(&store, 1);
    let asked = asked_of(&first);
    resources(&first, &asked);
    store.apply_yaml(
        "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings-timeout, namespace: bookinfo}
spec:
  hosts: [ratings.bookinfo.svc.cluster.local]
  http: [{route: [{destination: {host: ratings.bookinfo.svc.cluster.local}}], timeout: 2s}]
",
    );
    let reads = crate::xds::context::CacheReads::default();
    let second = context(&store, 2)
        .keeping(&first, inputs::reads)
        .counting_reads(reads.clone());
    resources(&second, &asked);
    let (kept, built) = (reads.kept.get(), reads.miss.get());
    assert!(kept > 0 && built > 0, "kept {kept}, built {built}");
    let hits = reads.hit.get();
    resources(&second, &asked);
    assert!(reads.hit.get() > hits, "asked again: found built");
    assert_eq!((reads.kept.get(), reads.miss.get()), (kept, built));
}

/// Endpoints are built from `ScopeInputs::for_endpoints` alone: for every proxy of the mesh,
/// setting every input that projection leaves out to something else builds the same endpoints
/// (nothing it drops is read), and so does the projected view itself (nothing read is dropped).
#[test]
fn endpoints_read_nothing_their_projection_leaves_out() {
    use crate::xds::context::ScopeView;
    let store = crate::testing::store(&mesh());
    let ctx = context(&store, 1);
    let asked = asked_of(&ctx);
    let mut compared = 0;
    for (label, p) in all_proxies() {
        let Some(Some(names)) = asked.get(&(label, TypeUrl::Endpoint)) else {
            continue;
        };
        let scope = ctx.scope(&p);
        let mut other = scope.inputs.clone();
        other.interception_none = !other.interception_none;
        other.auto_allocated_vips = !other.auto_allocated_vips;
        other.ipv6_only = !other.ipv6_only;
        other.inbound = Arc::new([(9999, crate::model::Protocol::Http)].into());
        other.inbound_hosts = Arc::new([(9999, vec!["x.example.com".to_string()])].into());
        other.mtls = !other.mtls;
        other.gateway_topology.num_trusted_proxies = 3;
        other.istio_version = "1.99.0".into();
        other.matched_metadata = [("KEY".to_string(), "value".to_string())].into();
        other.istio_extensions.http_stats = !other.istio_extensions.http_stats;
        other.skip_mx_headers = !other.skip_mx_headers;
        other.proxy_tracing = Some("{}".into());
        other.hbone_listen_ips = vec!["10.99.0.1".into()];
        other.http10 = !other.http10;
        other.catch_all_idle_timeout = Some(std::time::Duration::from_secs(7));
        other.trace_mesh_id = "elsewhere".into();
        other.trace_cluster_id = "elsewhere".into();
        assert_eq!(other.for_endpoints(), scope.inputs.for_endpoints());
        let changed = ScopeView {
            key: scope.key ^ 1,
            inputs: other,
            services: scope.services.clone(),
            sidecar: scope.sidecar.clone(),
        };
        let projected = ctx.projected(&scope, scope.inputs.for_endpoints());
        let router = scope.proxy_type == crate::xds::proxy::ProxyType::Router;
        for name in names {
            let bytes = |s: &ScopeView| {
                crate::xds::generate::finish_one(
                    &ctx,
                    s,
                    crate::xds::generate::load_assignment(&ctx, s, router, name),
                )
                .map(|r| r.digest)
            };
            assert_eq!(bytes(&changed), bytes(&scope), "{label}: {name}");
            assert_eq!(
                bytes(&projected),
                bytes(&scope),
                "{label}: {name} projected"
            );
            compared += 1;
        }
    }
    assert!(compared > 20, "{compared} endpoint resources compared");
}

/// Two sidecars that differ only in what endpoints do not read (their Istio version, HTTP/1.0)
/// get the same endpoint resources, built once.
#[test]
fn scopes_that_differ_only_in_what_endpoints_ignore_share_them() {
    let store = crate::testing::store(&mesh());
    let ctx = context(&store, 1);
    let sidecar = |meta: &[(&str, &str)]| {
        crate::testing::proxy(
            "sidecar~10.0.0.9~productpage-0.bookinfo~bookinfo.svc.cluster.local",
            meta,
            &[("app", "productpage"), ("version", "v1")],
        )
    };
    let (a, b) = (
        sidecar(&[("ISTIO_VERSION", "1.29.0")]),
        sidecar(&[("ISTIO_VERSION", "1.30.3"), ("HTTP10", "1")]),
    );
    let (sa, sb) = (ctx.scope(&a), ctx.scope(&b));
    assert_ne!(sa.key, sb.key, "two scopes");
    let names: BTreeSet<String> =
        ["outbound|9080||reviews.bookinfo.svc.cluster.local".to_string()].into();
    let ea = generate(&ctx, &a, &sa, TypeUrl::Endpoint, Some(&names));
    let eb = generate(&ctx, &b, &sb, TypeUrl::Endpoint, Some(&names));
    assert_eq!(ea.len(), 1);
    assert!(Arc::ptr_eq(&ea[0], &eb[0]), "one resource for both");
}
