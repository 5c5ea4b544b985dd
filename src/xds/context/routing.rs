//! The routing index: VirtualServices and DestinationRules resolved to FQDNs and indexed by
//! host, rebuilt only when one of them (or a setting it read) changes.

use super::destination_rules::{DrEntry, DrIndex};
use crate::config::networking::VirtualService;
use crate::config::{Config, Kind, Spec};
use crate::model::gateway_api::{self, Translation};
use crate::model::ingress::{self, IngressTranslation};
use crate::model::mesh::MeshSettings;
use crate::model::origin::Origin;
use crate::model::resolve_host;
use crate::store::Snapshot;
use std::collections::HashMap;
use std::sync::Arc;

/// A VirtualService with its hosts resolved to FQDNs.
pub struct VsEntry {
    pub config: Arc<Config>,
    /// Where it comes from: the Gateway API's and Ingresses' take their semantics.
    pub origin: Arc<Origin>,
    pub spec: VirtualService,
    pub hosts: Vec<String>,
}

/// A VirtualService bound to gateways: its hosts as written (resolved when short) and its gateways
/// as `namespace/name`.
pub struct GatewayVsEntry {
    pub config: Arc<Config>,
    pub origin: Arc<Origin>,
    pub spec: VirtualService,
    pub hosts: Vec<String>,
    pub gateways: Vec<String>,
}

impl GatewayVsEntry {
    /// Whether a gateway proxy of namespace `ns` takes it: a VirtualService is exported to the
    /// namespace (`exportTo`, else the mesh default), as istiod's `VirtualServicesForGateway`.
    /// Those derived from Gateway API routes and Ingresses are the gateway's by construction.
    pub fn visible_to(&self, default_export_to: &[String], ns: &str) -> bool {
        self.origin.route_semantics.is_some()
            || exported_to(
                &self.spec.export_to,
                default_export_to,
                &self.config.metadata.namespace,
                ns,
            )
    }
}

/// `name` or `namespace/name` of a gateway, as written in a VirtualService of namespace `vs_ns`.
pub fn gateway_key(gateway: &str, vs_ns: &str) -> String {
    if gateway.contains('/') {
        gateway.to_string()
    } else {
        format!("{vs_ns}/{gateway}")
    }
}

/// The VirtualServices and DestinationRules of a snapshot, resolved and indexed by host.
pub struct Routing {
    pub(super) virtual_services: Vec<VsEntry>,
    /// VirtualServices bound to at least one gateway (other than `mesh`).
    pub gateway_virtual_services: Vec<GatewayVsEntry>,
    pub(super) destination_rules: Vec<DrEntry>,
    /// Exact host → indexes into `virtual_services` / `destination_rules` (in list order), and the
    /// entries with a wildcard host: lookups touch only candidates, not every object (a mesh of
    /// 5,000 services with 500 VirtualServices would otherwise scan 2.5 million pairs per push).
    pub(super) vs_by_host: HashMap<String, Vec<usize>>,
    pub(super) vs_wildcards: Vec<usize>,
    /// The DestinationRules consolidated and indexed as istiod finds them.
    pub(super) dr_index: DrIndex,
    /// The Gateway API objects translated (`model::gateway_api`): their Istio Gateways and
    /// VirtualServices are served beside the store's own.
    pub gateway_api: Arc<Translation>,
    /// The Kubernetes Ingresses translated (`model::ingress`), served the same way.
    pub ingress: Arc<IngressTranslation>,
    /// What the index was built under: other settings rebuild it.
    settings: RoutingSettings,
}

/// The mesh settings the routing index reads.
#[derive(PartialEq)]
struct RoutingSettings {
    domain_suffix: String,
    virtual_service_export_to: Vec<String>,
    destination_rule_export_to: Vec<String>,
    root_namespace: String,
    ingress: crate::model::mesh::IngressSettings,
}

impl RoutingSettings {
    fn of(mesh: &MeshSettings) -> RoutingSettings {
        RoutingSettings {
            domain_suffix: mesh.domain_suffix.clone(),
            virtual_service_export_to: mesh.default_virtual_service_export_to.clone(),
            destination_rule_export_to: mesh.default_destination_rule_export_to.clone(),
            root_namespace: mesh.root_namespace.clone(),
            ingress: mesh.ingress.clone(),
        }
    }
}

/// Istio's exportTo rule; `default` (the mesh's default exportTo for the kind) stands in for an
/// empty list.
pub(super) fn exported_to(
    export_to: &[String],
    default: &[String],
    owner_ns: &str,
    ns: &str,
) -> bool {
    let list = if export_to.is_empty() {
        default
    } else {
        export_to
    };
    list.is_empty()
        || list
            .iter()
            .any(|e| e == "*" || e == ns || (e == "." && owner_ns == ns))
}

/// The delegate VirtualService `namespace/name` a root in `root_ns` may use: one without hosts
/// (a delegate serves only through its roots) exported to the root's namespace.
fn delegate_for(
    snapshot: &Declared,
    default_export: &[String],
    root_ns: &str,
    name: &str,
    namespace: &str,
) -> Option<VirtualService> {
    let key = crate::config::ConfigKey {
        kind: Kind::VirtualService,
        namespace: namespace.to_string(),
        name: name.to_string(),
        cluster: String::new(),
    };
    match &snapshot.get(&key)?.config.spec {
        Spec::VirtualService(d)
            if d.hosts.is_empty()
                && exported_to(&d.export_to, default_export, namespace, root_ns) =>
        {
            Some(d.clone())
        }
        _ => None,
    }
}

impl Routing {
    /// The kinds the index is built from, declared once: `build` reads the snapshot only through
    /// a view of these, and `reuse_or_build` rebuilds when one of them changed.
    pub const KINDS: &'static [Kind] = &[Kind::VirtualService, Kind::DestinationRule];

    /// This index if it still holds for `new` (built from `old`): none of its `KINDS` differs
    /// between the snapshots and the settings it read are the same; else one built for `new`.
    pub fn reuse_or_build(
        self: &Arc<Routing>,
        old: &Snapshot,
        new: &Snapshot,
        mesh: &MeshSettings,
    ) -> Arc<Routing> {
        let same_settings = self.settings == RoutingSettings::of(mesh);
        let changes = new.changes_since(old);
        let unchanged = |kinds: &[Kind]| {
            changes
                .as_ref()
                .is_some_and(|c| !kinds.iter().any(|k| c.contains_key(k)))
        };
        let policy_targets_unchanged = (new.count(Kind::BackendTLSPolicy) == 0
            && !self.gateway_api.reads_mesh_parents)
            || unchanged(gateway_api::POLICY_TARGET_KINDS);
        let translation =
            if same_settings && unchanged(gateway_api::KINDS) && policy_targets_unchanged {
                self.gateway_api.clone()
            } else {
                let t = gateway_api::translate(new, &mesh.domain_suffix);
                // A change the translation does not pass on (a Namespace's labels no selector
                // reads) keeps the index.
                if t.gateways == self.gateway_api.gateways
                    && t.virtual_services == self.gateway_api.virtual_services
                    && t.destination_rules == self.gateway_api.destination_rules
                    && t.secret_grants == self.gateway_api.secret_grants
                {
                    self.gateway_api.clone()
                } else {
                    Arc::new(t)
                }
            };
        let ingresses = if same_settings && unchanged(ingress::KINDS) {
            self.ingress.clone()
        } else {
            // Services are read for named ports: most Service changes leave it as it was.
            let t = Routing::ingresses(new, mesh);
            if t == *self.ingress {
                self.ingress.clone()
            } else {
                Arc::new(t)
            }
        };
        if same_settings
            && unchanged(Routing::KINDS)
            && Arc::ptr_eq(&translation, &self.gateway_api)
            && Arc::ptr_eq(&ingresses, &self.ingress)
        {
            self.clone()
        } else {
            Arc::new(Routing::build_with(new, mesh, translation, ingresses))
        }
    }

    pub fn build(snapshot: &Snapshot, mesh: &MeshSettings) -> Routing {
        let translation = Arc::new(gateway_api::translate(snapshot, &mesh.domain_suffix));
        let ingresses = Arc::new(Routing::ingresses(snapshot, mesh));
        Routing::build_with(snapshot, mesh, translation, ingresses)
    }

    /// The Ingresses of `snapshot`; their Gateways live in the root namespace (istiod's
    /// `K8S_INGRESS_NS`, `istio-system` by default).
    fn ingresses(snapshot: &Snapshot, mesh: &MeshSettings) -> IngressTranslation {
        ingress::translate(
            snapshot,
            &mesh.ingress,
            &mesh.root_namespace,
            &mesh.domain_suffix,
        )
    }

    /// The index of `snapshot` with the Gateway API translated as `translation` and the
    /// Ingresses as `ingresses`.
    fn build_with(
        snapshot: &Snapshot,
        mesh: &MeshSettings,
        translation: Arc<Translation>,
        ingresses: Arc<IngressTranslation>,
    ) -> Routing {
        let snapshot = &Declared {
            snapshot,
            kinds: Routing::KINDS,
        };
        let suffix = mesh.domain_suffix.clone();
        // One pass: a VirtualService may serve the mesh (no gateways, or `mesh`), gateways, or both.
        let mut virtual_services: Vec<VsEntry> = Vec::new();
        let mut gateway_virtual_services: Vec<GatewayVsEntry> = Vec::new();
        let derived = translation
            .virtual_services
            .iter()
            .chain(&ingresses.virtual_services)
            .map(|d| (&d.config, d.origin.clone()));
        for (config, origin) in snapshot
            .list(Kind::VirtualService)
            .map(|e| (&e.config, Origin::of(&e.config.metadata)))
            .chain(derived)
        {
            let Spec::VirtualService(vs) = &config.spec else {
                continue;
            };
            let ns = &config.metadata.namespace;
            let expanded;
            let vs = if vs.http.iter().any(|r| r.delegate.is_some()) {
                expanded = crate::model::delegate::expand(ns, vs, &suffix, &|name, d_ns| {
                    delegate_for(
                        snapshot,
                        &mesh.default_virtual_service_export_to,
                        ns,
                        name,
                        d_ns,
                    )
                });
                &expanded
            } else {
                vs
            };
            let hosts: Vec<String> = vs
                .hosts
                .iter()
                .map(|h| resolve_host(h, ns, &suffix))
                .collect();
            let gateways: Vec<String> = vs
                .gateways
                .iter()
                .filter(|g| *g != "mesh")
                .map(|g| gateway_key(g, ns))
                .collect();
            if vs.gateways.is_empty() || vs.gateways.iter().any(|g| g == "mesh") {
                virtual_services.push(VsEntry {
                    config: config.clone(),
                    origin: origin.clone(),
                    spec: vs.clone(),
                    hosts: hosts.clone(),
                });
            }
            if !gateways.is_empty() {
                gateway_virtual_services.push(GatewayVsEntry {
                    config: config.clone(),
                    origin,
                    spec: vs.clone(),
                    hosts,
                    gateways,
                });
            }
        }
        // As istiod: when several objects claim a host, the oldest (creationTimestamp, then
        // namespace and name) wins, so a newer object cannot silently take a host over.
        let age = |a: &Config, b: &Config| a.age_key().cmp(&b.age_key());
        virtual_services.sort_by(|a, b| age(&a.config, &b.config));
        // A GAMMA route of a client's own namespace comes before the service's own (istiod's
        // consumer and producer routes).
        virtual_services.sort_by_key(|v| v.spec.export_to != ["."] || !v.origin.gateway_api());
        gateway_virtual_services.sort_by(|a, b| age(&a.config, &b.config));
        let entry = |config: &Arc<Config>| match &config.spec {
            Spec::DestinationRule(dr) => Some(DrEntry {
                config: config.clone(),
                spec: dr.clone(),
                host: resolve_host(&dr.host, &config.metadata.namespace, &suffix),
                merged_from: Vec::new(),
            }),
            _ => None,
        };
        // BackendTLSPolicies' rules have no creation time, so they sort first, as istiod's
        // generated rules: in the target's namespace a user's DestinationRule for the same host
        // merges into it, adding its subsets but not its traffic policy (docs/gateway-api.md).
        let mut destination_rules: Vec<DrEntry> = snapshot
            .list(Kind::DestinationRule)
            .map(|e| &e.config)
            .chain(&translation.destination_rules)
            .filter_map(entry)
            .collect();
        destination_rules.sort_by(|a, b| age(&a.config, &b.config));
        let mut vs_by_host: HashMap<String, Vec<usize>> = HashMap::new();
        let mut vs_wildcards = Vec::new();
        for (i, v) in virtual_services.iter().enumerate() {
            for h in &v.hosts {
                if h.starts_with('*') {
                    if vs_wildcards.last() != Some(&i) {
                        vs_wildcards.push(i);
                    }
                } else {
                    let slot = vs_by_host.entry(h.clone()).or_default();
                    if slot.last() != Some(&i) {
                        slot.push(i);
                    }
                }
            }
        }
        let dr_index = DrIndex::build(
            &destination_rules,
            &mesh.default_destination_rule_export_to,
            &mesh.root_namespace,
        );
        Routing {
            virtual_services,
            gateway_virtual_services,
            destination_rules,
            vs_by_host,
            vs_wildcards,
            dr_index,
            gateway_api: translation,
            ingress: ingresses,
            settings: RoutingSettings::of(mesh),
        }
    }
}

/// A snapshot as a derived index may read it: only the kinds it declared. Reading another kind
/// is a bug (the index would not be rebuilt when that kind changes): it fails in debug builds and
/// reads nothing in release builds.
struct Declared<'a> {
    snapshot: &'a Snapshot,
    kinds: &'static [Kind],
}

impl Declared<'_> {
    fn declared(&self, kind: Kind) -> bool {
        let ok = self.kinds.contains(&kind);
        debug_assert!(ok, "{kind:?} read by an index that did not declare it");
        ok
    }

    fn list(&self, kind: Kind) -> impl Iterator<Item = &crate::store::Entry> {
        let ok = self.declared(kind);
        self.snapshot.list(kind).filter(move |_| ok)
    }

    fn get(&self, key: &crate::config::ConfigKey) -> Option<&crate::store::Entry> {
        if self.declared(key.kind) {
            self.snapshot.get(key)
        } else {
            None
        }
    }
}
