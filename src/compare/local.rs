//! What Rudder would send a proxy, built in this process from a store (files or Kubernetes) the
//! way the daemon builds it: one push context, the proxy's scope, the generators. Nothing is
//! served; the node is taken as a verified proxy of its own namespace and service account, as a
//! sidecar is on the TLS port.

use super::config::{NAMED, ProxyConfig};
use crate::model::identity::Identity;
use crate::model::mesh::MeshSettings;
use crate::store::Store;
use crate::xds::context::PushContext;
use crate::xds::generate;
use crate::xds::proxy::{Generator, Proxy, ProxyType};
use crate::xds::types::TypeUrl;
use envoy_types::pb::envoy::config::core::v3::Node;
use std::collections::BTreeSet;

/// Why Rudder's config for a proxy is not compared.
#[derive(Debug, thiserror::Error)]
pub enum Unsupported {
    #[error("node: {0}")]
    Node(#[from] crate::xds::proxy::ProxyError),
    #[error("ztunnel: its workloads and policies are not compared yet")]
    Ztunnel,
    #[error("proxyless gRPC: its listeners are asked for by name and are not compared yet")]
    Grpc,
}

/// Rudder's config for any node, from one state of the store.
pub struct Local {
    ctx: PushContext,
}

impl Local {
    /// The push context the daemon would build from `store` now, under `mesh` (the flags' mesh
    /// settings; MeshConfig from the store applies on top, as in the daemon).
    pub fn new(store: &Store, mesh: &MeshSettings) -> Local {
        Local {
            ctx: crate::xds::push::initial_context(store, mesh, None),
        }
    }

    pub fn context(&self) -> &PushContext {
        &self.ctx
    }

    /// The proxy `node` describes, as a verified one.
    pub fn proxy(&self, node: &Node) -> Result<Proxy, Unsupported> {
        let mut proxy = Proxy::from_node(Some(node))?;
        if proxy.proxy_type == ProxyType::Ztunnel {
            return Err(Unsupported::Ztunnel);
        }
        if proxy.generator == Generator::Grpc {
            return Err(Unsupported::Grpc);
        }
        proxy.identity = Some(Identity {
            trust_domain: self.ctx.mesh.trust_domain.clone(),
            namespace: proxy.namespace.clone(),
            service_account: proxy
                .metadata
                .get("SERVICE_ACCOUNT")
                .cloned()
                .unwrap_or_else(|| "default".into()),
        });
        Ok(proxy)
    }

    /// What Rudder sends `proxy` (from [`Local::proxy`]): its clusters and listeners, and the
    /// endpoints, routes and filter configs they name.
    pub fn config(&self, proxy: &Proxy) -> ProxyConfig {
        let scope = self.ctx.scope(proxy);
        let mut config = ProxyConfig::default();
        let add =
            |config: &mut ProxyConfig, type_url: TypeUrl, names: Option<&BTreeSet<String>>| {
                config.hold(type_url);
                for r in generate::generate(&self.ctx, proxy, &scope, type_url, names) {
                    config.insert_any(type_url, &r.any);
                }
            };
        add(&mut config, TypeUrl::Cluster, None);
        add(&mut config, TypeUrl::Listener, None);
        let named = NAMED.map(|t| (t, config.names_asked(t)));
        for (type_url, names) in &named {
            add(&mut config, *type_url, Some(names));
        }
        config
    }

    /// The config objects behind one of `proxy`'s resources (Rudder's provenance).
    pub fn sources(&self, proxy: &Proxy, type_url: TypeUrl, name: &str) -> Vec<String> {
        crate::xds::provenance::sources(
            &self.ctx,
            &proxy.namespace,
            proxy.proxy_type == ProxyType::Router,
            type_url,
            name,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::diff;

    const MESH: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a, namespace: default}
spec:
  hosts: [a.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.9.0.1}]
"#;

    const TIMEOUT: &str = r#"
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a, namespace: default}
spec:
  hosts: [a.example.com]
  http: [{timeout: 3s, route: [{destination: {host: a.example.com}}]}]
"#;

    fn node() -> Node {
        Node {
            id: "sidecar~10.0.0.5~app-1.default~default.svc.cluster.local".into(),
            ..Default::default()
        }
    }

    fn config_of(local: &Local) -> ProxyConfig {
        local.config(&local.proxy(&node()).unwrap())
    }

    #[test]
    fn a_virtual_service_shows_as_the_route_field_it_changes_and_nothing_else() {
        let before = crate::testing::store(MESH);
        let after = crate::testing::store(&format!("{MESH}{TIMEOUT}"));
        let mesh = MeshSettings::default();
        let (a, b) = (
            config_of(&Local::new(&before.reader(), &mesh)),
            config_of(&Local::new(&after.reader(), &mesh)),
        );
        assert!(a.resources[&TypeUrl::Endpoint].contains_key("outbound|80||a.example.com"));
        let d = diff(&a, &b);
        assert!(!d.is_empty());
        for d in &d {
            assert_eq!(
                (d.type_url, d.resource.as_str()),
                (TypeUrl::Route, "80"),
                "{d:?}"
            );
            assert!(
                d.path.starts_with("/virtualHosts[a.example.com:80]/routes"),
                "{d:?}"
            );
        }
        assert!(
            d.iter()
                .any(|d| d.path.ends_with("/route/timeout") && d.right == Some("3s".into())),
            "{d:?}"
        );
    }

    #[test]
    fn ztunnel_is_not_compared_and_says_so() {
        let local = Local::new(
            &crate::testing::store(MESH).reader(),
            &MeshSettings::default(),
        );
        let ztunnel = Node {
            id: "ztunnel~10.0.0.1~ztunnel-x.istio-system~istio-system.svc.cluster.local".into(),
            ..Default::default()
        };
        assert!(matches!(local.proxy(&ztunnel), Err(Unsupported::Ztunnel)));
    }
}
