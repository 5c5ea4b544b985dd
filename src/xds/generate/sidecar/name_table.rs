//! NDS: the DNS name table istio-agent's DNS proxy answers from (`ISTIO_META_DNS_CAPTURE`), as
//! istiod's `BuildNameTable`. Each service the proxy sees, by hostname, with the addresses a
//! query for it gets: its VIPs (a ServiceEntry's auto-allocated ones where the proxy uses them),
//! else, for a headless service, its ready endpoints in the proxy's network, as Kubernetes' DNS
//! answers. A name the table leaves out is forwarded by the agent to the pod's DNS server.

use crate::config::networking::Resolution;
use crate::model::Service;
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::finish::{Class, IstioResource, Typed};
use crate::xds::resource::Resource;
use crate::xds::types::TypeUrl;
use prost::Message;
use std::sync::Arc;

pub mod pb {
    tonic::include_proto!("istio.networking.nds.v1");
}

use pb::NameTable;
use pb::name_table::NameInfo;

/// istiod's registry names (`provider.ID`).
const KUBERNETES: &str = "Kubernetes";
const EXTERNAL: &str = "External";

/// The one (unnamed) NameTable resource for `scope`.
pub fn name_table(ctx: &PushContext, scope: &ScopeView) -> Vec<Arc<Resource>> {
    let mut table = NameTable::default();
    for svc in &scope.services {
        let ips = addresses(ctx, scope, svc);
        if ips.is_empty() {
            // No VIP and no endpoint address to give: the agent forwards the query.
            continue;
        }
        let (kind, name) = svc.origin();
        let kubernetes = kind == "Service";
        // The agent answers `name`, `name.ns` and `name.ns.svc` from these; not for
        // multi-cluster services' `clusterset.local` hosts.
        let (shortname, namespace) = if kubernetes && !svc.hostname.ends_with(".clusterset.local") {
            (name.to_string(), svc.namespace.clone())
        } else {
            Default::default()
        };
        let info = NameInfo {
            ips,
            registry: if kubernetes { KUBERNETES } else { EXTERNAL }.to_string(),
            shortname,
            namespace,
            ..Default::default()
        };
        match table.table.get_mut(&svc.hostname) {
            None => {
                table.table.insert(svc.hostname.clone(), info);
            }
            // A Kubernetes Service wins over a ServiceEntry decorating it; two ServiceEntries of
            // one host merge their addresses.
            Some(existing) if existing.registry != KUBERNETES => {
                if kubernetes {
                    *existing = info;
                } else {
                    existing.ips.extend(info.ips);
                }
            }
            Some(_) => {}
        }
    }
    vec![Typed::istio("", Class::outbound(scope), table).encode()]
}

impl IstioResource for NameTable {
    fn type_url(&self) -> TypeUrl {
        TypeUrl::NameTable
    }
    fn encoded(&self) -> Vec<u8> {
        self.encode_to_vec()
    }
}

/// The addresses a query for `svc` gets: its IP VIPs (CIDRs are not answers), else a headless
/// service's ready endpoints of the proxy's network (every cluster's, as istiod's default
/// PILOT_MULTICLUSTER_HEADLESS), deduplicated in order.
fn addresses(ctx: &PushContext, scope: &ScopeView, svc: &Service) -> Vec<String> {
    let vips = svc.addresses_for(scope.auto_allocated_vips);
    if !vips.is_empty() {
        return vips
            .iter()
            .filter(|a| a.parse::<std::net::IpAddr>().is_ok())
            .cloned()
            .collect();
    }
    if svc.resolution != Resolution::NONE {
        return Vec::new();
    }
    let Some(port) = svc.ports.first() else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for e in ctx.registry.endpoints(&svc.hostname, port.number) {
        let in_network =
            scope.network.is_empty() || e.network.is_empty() || e.network == scope.network;
        if !e.healthy || !in_network || e.address.parse::<std::net::IpAddr>().is_err() {
            continue;
        }
        if !out.contains(&e.address) {
            out.push(e.address.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xds::generate::generate;

    fn table(yaml: &str, meta: &[(&str, &str)]) -> NameTable {
        let ctx = crate::testing::push_context(yaml);
        let p = crate::testing::sidecar("shop", meta);
        let scope = ctx.scope(&p);
        let out = generate(&ctx, &p, &scope, TypeUrl::NameTable, None);
        assert_eq!(out.len(), 1);
        NameTable::decode(out[0].any.value.as_slice()).unwrap()
    }

    const MESH: &str = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: api, namespace: shop}\n\
spec: {hosts: [api.example.com], ports: [{number: 443, name: tls, protocol: TLS}], resolution: DNS}\n\
status: {addresses: [{host: api.example.com, value: 240.240.0.7}]}\n\
---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: db, namespace: shop}\n\
spec: {hosts: [db.example.com], addresses: [10.40.0.9, 10.50.0.0/16], ports: [{number: 5432, name: tcp, protocol: TCP}], resolution: DNS}\n\
---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n\
spec: {clusterIP: 10.96.0.30, ports: [{name: http, port: 80, targetPort: 8080}]}\n\
---\napiVersion: v1\nkind: Service\nmetadata: {name: kafka, namespace: shop}\n\
spec: {clusterIP: None, ports: [{name: tcp, port: 9092}]}\n\
---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: kafka-1, namespace: shop, labels: {kubernetes.io/service-name: kafka}}\n\
addressType: IPv4\nports: [{name: tcp, port: 9092}]\n\
endpoints: [{addresses: [10.44.0.3], conditions: {ready: true}}, {addresses: [10.44.0.4], conditions: {ready: true}}, {addresses: [10.44.0.5], conditions: {ready: false}}]\n";

    #[test]
    fn the_table_holds_what_a_pods_dns_would_answer() {
        let t = table(MESH, &[("DNS_CAPTURE", "true")]);
        let web = &t.table["web.shop.svc.cluster.local"];
        assert_eq!(web.ips, ["10.96.0.30"]);
        assert_eq!(
            (
                web.registry.as_str(),
                web.shortname.as_str(),
                web.namespace.as_str()
            ),
            ("Kubernetes", "web", "shop")
        );
        // A headless Service: its ready endpoints.
        assert_eq!(
            t.table["kafka.shop.svc.cluster.local"].ips,
            ["10.44.0.3", "10.44.0.4"]
        );
        // A ServiceEntry: its IP addresses (a CIDR answers nothing), no short name.
        let db = &t.table["db.example.com"];
        assert_eq!(db.ips, ["10.40.0.9"]);
        assert_eq!(
            (db.registry.as_str(), db.shortname.as_str()),
            ("External", "")
        );
        // Without addresses: the allocated one, for a proxy that captures DNS.
        assert_eq!(t.table["api.example.com"].ips, ["240.240.0.7"]);
    }

    #[test]
    fn allocated_addresses_only_where_the_proxy_uses_them() {
        let t = table(MESH, &[]);
        assert!(!t.table.contains_key("api.example.com"));
        assert!(t.table.contains_key("db.example.com"));
    }

    #[test]
    fn the_same_table_is_the_same_bytes() {
        let ctx = crate::testing::push_context(MESH);
        let p = crate::testing::sidecar("shop", &[("DNS_CAPTURE", "true")]);
        let a = name_table(&ctx, &ctx.scope(&p));
        let b = name_table(&ctx, &ctx.scope(&p));
        assert_eq!(a[0].any.value, b[0].any.value);
    }
}
