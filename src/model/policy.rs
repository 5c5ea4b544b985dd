//! Which policies attach to a workload: one rule for every attachable kind, istiod's
//! `pilot/pkg/model/policyattachment.go` (`WorkloadPolicyMatcher.ShouldAttachPolicy`) with the
//! per-kind scope of a selector written in the root namespace. AuthorizationPolicy,
//! RequestAuthentication, PeerAuthentication, Sidecar, DestinationRule, EnvoyFilter, Telemetry,
//! WasmPlugin and ProxyConfig implement [`Attachable`]; [`attaches`] decides for all of them.
//! A new attachable kind (Gateway API policies) implements the trait and nothing else.

use crate::config::common::PolicyTargetReference;
use crate::config::mesh::labels_match;
use crate::config::{Config, Kind, Spec};
use crate::store::Snapshot;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The label naming the Gateway API `Gateway` a gateway pod serves.
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

/// What a selector written in the root namespace applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootSelector {
    /// Matching workloads of every namespace (AuthorizationPolicy, RequestAuthentication,
    /// EnvoyFilter, WasmPlugin, Telemetry).
    Mesh,
    /// Only the root namespace's own workloads, as any namespace's selector (Sidecar,
    /// DestinationRule, ProxyConfig).
    OwnNamespace,
    /// Nothing: istiod ignores a root-namespace PeerAuthentication with a selector.
    Ignored,
}

/// A policy that names the workloads it applies to.
pub trait Attachable {
    /// The labels its selector requires (`selector.matchLabels`, `workloadSelector.labels`);
    /// `None` when it has no selector, or an empty one: it applies namespace- or mesh-wide.
    fn selector(&self) -> Option<&BTreeMap<String, String>>;
    /// `targetRefs`, or the single `targetRef`; empty for kinds without them.
    fn target_refs(&self) -> Vec<&PolicyTargetReference> {
        Vec::new()
    }
    fn root_selector(&self) -> RootSelector;
    /// Whether it applies to its whole namespace (the mesh, from the root namespace) at the
    /// namespace level of a levelled kind ([`levels_among`]): no selector (an empty one is none)
    /// and no targetRefs. ProxyConfig reads `selector: {}` as neither namespace-wide nor a
    /// workload's, as istiod does.
    fn namespace_wide(&self) -> bool {
        self.selector().is_none() && self.target_refs().is_empty()
    }
    /// Whether an empty selector (present, without labels) is a selector that every workload
    /// matches, at the workload level of a levelled kind: a Sidecar's `workloadSelector: {}`
    /// is, as istiod's subset test of no labels.
    fn empty_selector_selects_all(&self) -> bool {
        false
    }
}

/// A non-empty label map, as an `Option` (an empty selector selects everything).
fn labels(selector: Option<&BTreeMap<String, String>>) -> Option<&BTreeMap<String, String>> {
    selector.filter(|l| !l.is_empty())
}

fn targets<'a>(
    one: Option<&'a PolicyTargetReference>,
    many: &'a [PolicyTargetReference],
) -> Vec<&'a PolicyTargetReference> {
    if many.is_empty() {
        one.into_iter().collect()
    } else {
        many.iter().collect()
    }
}

macro_rules! attachable {
    ($ty:ty, $root:expr, |$s:ident| $sel:expr $(, targets: |$t:ident| $refs:expr)? $(, wide: |$w:ident| $wide:expr, empty_selects_all: $empty:expr)?) => {
        impl Attachable for $ty {
            fn selector(&self) -> Option<&BTreeMap<String, String>> {
                let $s = self;
                labels($sel)
            }
            $(fn target_refs(&self) -> Vec<&PolicyTargetReference> {
                let $t = self;
                $refs
            })?
            $(fn namespace_wide(&self) -> bool {
                let $w = self;
                $wide
            }
            fn empty_selector_selects_all(&self) -> bool {
                $empty
            })?
            fn root_selector(&self) -> RootSelector {
                $root
            }
        }
    };
}

use crate::config::extensions::{TrafficExtension, WasmPlugin};
use crate::config::networking::{DestinationRule, EnvoyFilter, ProxyConfig, Sidecar};
use crate::config::security::{AuthorizationPolicy, PeerAuthentication, RequestAuthentication};
use crate::config::telemetry::Telemetry;

attachable!(AuthorizationPolicy, RootSelector::Mesh, |p| p.selector.as_ref().map(|s| &s.match_labels),
    targets: |p| targets(p.target_ref.as_ref(), &p.target_refs));
attachable!(RequestAuthentication, RootSelector::Mesh, |p| p.selector.as_ref().map(|s| &s.match_labels),
    targets: |p| targets(p.target_ref.as_ref(), &p.target_refs));
attachable!(Telemetry, RootSelector::Mesh, |p| p.selector.as_ref().map(|s| &s.match_labels),
    targets: |p| targets(p.target_ref.as_ref(), &p.target_refs));
attachable!(WasmPlugin, RootSelector::Mesh, |p| p.selector.as_ref().map(|s| &s.match_labels),
    targets: |p| targets(p.target_ref.as_ref(), &p.target_refs));
attachable!(TrafficExtension, RootSelector::Mesh, |p| p.selector.as_ref().map(|s| &s.match_labels),
    targets: |p| p.target_refs.iter().collect());
attachable!(EnvoyFilter, RootSelector::Mesh, |p| p.workload_selector.as_ref().map(|s| &s.labels),
    targets: |p| p.target_refs.iter().collect());
attachable!(PeerAuthentication, RootSelector::Ignored, |p| p
    .selector
    .as_ref()
    .map(|s| &s.match_labels));
attachable!(Sidecar, RootSelector::OwnNamespace, |p| p
    .workload_selector
    .as_ref()
    .map(|s| &s.labels), wide: |p| p.workload_selector.is_none(), empty_selects_all: true);
attachable!(DestinationRule, RootSelector::OwnNamespace, |p| p
    .workload_selector
    .as_ref()
    .map(|s| &s.match_labels));
attachable!(ProxyConfig, RootSelector::OwnNamespace, |p| p
    .selector
    .as_ref()
    .map(|s| &s.match_labels), wide: |p| p.selector.is_none(), empty_selects_all: false);

/// The attachable view of a spec, for the kinds that have one.
pub fn attachable(spec: &Spec) -> Option<&dyn Attachable> {
    Some(match spec {
        Spec::AuthorizationPolicy(p) => p,
        Spec::RequestAuthentication(p) => p,
        Spec::PeerAuthentication(p) => p,
        Spec::Sidecar(p) => p,
        Spec::DestinationRule(p) => p,
        Spec::EnvoyFilter(p) => p,
        Spec::Telemetry(p) => p,
        Spec::WasmPlugin(p) => p,
        Spec::TrafficExtension(p) => p,
        Spec::ProxyConfig(p) => p,
        Spec::VirtualService(_)
        | Spec::Gateway(_)
        | Spec::ServiceEntry(_)
        | Spec::WorkloadEntry(_)
        | Spec::WorkloadGroup(_)
        | Spec::GatewayClass(_)
        | Spec::KubernetesGateway(_)
        | Spec::HTTPRoute(_)
        | Spec::GRPCRoute(_)
        | Spec::TCPRoute(_)
        | Spec::TLSRoute(_)
        | Spec::ReferenceGrant(_)
        | Spec::BackendTLSPolicy(_)
        | Spec::ListenerSet(_)
        | Spec::Service(_)
        | Spec::EndpointSlice(_)
        | Spec::Pod(_)
        | Spec::Namespace(_)
        | Spec::Secret(_)
        | Spec::Node(_)
        | Spec::ConfigMap(_)
        | Spec::Ingress(_)
        | Spec::IngressClass(_) => return None,
    })
}

/// The workload a policy may attach to.
#[derive(Debug, Clone, Copy)]
pub struct Workload<'a> {
    pub namespace: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    /// A waypoint takes only policies that target it.
    pub waypoint: bool,
    /// At a waypoint, the service whose traffic is being served: policies targeting that
    /// Service or ServiceEntry apply to it.
    pub service: Option<ServiceTarget<'a>>,
}

/// A service a waypoint serves, as a policy's targetRef names it.
#[derive(Debug, Clone, Copy)]
pub struct ServiceTarget<'a> {
    /// `Service` or `ServiceEntry`.
    pub kind: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

impl<'a> ServiceTarget<'a> {
    /// The Service or ServiceEntry `svc` came from.
    pub fn of(svc: &'a crate::model::Service) -> ServiceTarget<'a> {
        let (kind, name) = svc.origin();
        ServiceTarget {
            kind,
            namespace: &svc.namespace,
            name,
        }
    }
}

/// The GatewayClass of waypoints: a root-namespace policy targeting it applies to every one.
pub const WAYPOINT_CLASS: &str = "istio-waypoint";

/// How a policy attaches to a workload, when it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attachment {
    /// No selector and no targetRefs: every workload of its namespace (of the mesh, from the
    /// root namespace).
    Namespace,
    /// Its selector matches the workload's labels.
    Selector,
    /// A targetRef names the workload's Gateway (or, for a waypoint, its GatewayClass).
    TargetRef,
    /// A targetRef names the Service or ServiceEntry a waypoint is serving.
    Service,
}

/// Whether the policy `policy` of namespace `policy_ns` attaches to `workload`, and how:
/// - a policy from neither the workload's namespace nor the root namespace never does;
/// - a workload that is not a Gateway API gateway takes policies by selector (none: the whole
///   namespace); a policy with targetRefs never attaches to it;
/// - a Gateway API gateway (labelled with its Gateway's name) takes a policy whose targetRef
///   names that Gateway (group `gateway.networking.k8s.io`, kind `Gateway`, from the gateway's
///   own namespace), or, without targetRefs, by selector (istiod's
///   `ENABLE_SELECTOR_BASED_K8S_GATEWAY_POLICY`, on by default), except waypoints, which take
///   only targeted policies.
///
/// A waypoint also takes, as istiod attaches them: a root-namespace policy targeting the
/// `istio-waypoint` GatewayClass, and, for the traffic of one service it serves, a policy of that
/// service's namespace targeting the Service or ServiceEntry (kind and group must match).
pub fn attaches(
    policy_ns: &str,
    policy: &dyn Attachable,
    root: &str,
    workload: &Workload,
) -> Option<Attachment> {
    let own = policy_ns == workload.namespace;
    let served_ns = workload.service.is_some_and(|s| s.namespace == policy_ns);
    if !own && policy_ns != root && !served_ns {
        return None;
    }
    let targets = policy.target_refs();
    let by_selector = || match policy.selector() {
        None => Some(Attachment::Namespace),
        Some(selector) => {
            let in_scope = own && policy_ns != root
                || match policy.root_selector() {
                    RootSelector::Mesh => true,
                    RootSelector::OwnNamespace => own,
                    RootSelector::Ignored => false,
                };
            (in_scope && labels_match(selector, workload.labels)).then_some(Attachment::Selector)
        }
    };
    match workload.labels.get(GATEWAY_NAME_LABEL) {
        None if targets.is_empty() && (own || policy_ns == root) => by_selector(),
        None => None,
        Some(_) if targets.is_empty() => (!workload.waypoint && (own || policy_ns == root))
            .then(by_selector)
            .flatten(),
        Some(gateway) => {
            let api = crate::config::gateway_api::GROUP;
            let to_gateway = own
                && targets.iter().any(|t| {
                    t.group == api
                        && t.kind == "Gateway"
                        && &t.name == gateway
                        && (t.namespace.is_empty() || t.namespace == workload.namespace)
                });
            let to_class = workload.waypoint
                && policy_ns == root
                && targets.iter().any(|t| {
                    t.group == api && t.kind == "GatewayClass" && t.name == WAYPOINT_CLASS
                });
            if to_gateway || to_class {
                return Some(Attachment::TargetRef);
            }
            let service = workload.service.filter(|_| workload.waypoint)?;
            let group = if service.kind == "Service" {
                ""
            } else {
                "networking.istio.io"
            };
            (policy_ns == service.namespace
                && targets.iter().any(|t| {
                    t.kind == service.kind
                        && t.group == group
                        && t.name == service.name
                        && (t.namespace.is_empty() || t.namespace == service.namespace)
                }))
            .then_some(Attachment::Service)
        }
    }
}

/// Policies of `kind` from a workload's namespace, then the root namespace, that attach to it
/// ([`attaches`]), in that order.
pub fn selecting<'a>(
    snapshot: &'a Snapshot,
    root: &str,
    workload: &Workload,
    kind: Kind,
) -> Vec<&'a Config> {
    let mut out = Vec::new();
    let service_ns = workload
        .service
        .map(|s| s.namespace)
        .filter(|ns| *ns != workload.namespace && *ns != root);
    for ns in [Some(workload.namespace), service_ns, Some(root)]
        .into_iter()
        .flatten()
    {
        for e in snapshot.list_namespace(kind, ns) {
            let attached = attachable(&e.config.spec)
                .and_then(|p| attaches(ns, p, root, workload))
                .is_some();
            if attached {
                out.push(e.config.as_ref());
            }
        }
        if ns == root {
            break;
        }
    }
    out
}

/// The objects of `kind` in `namespace`, oldest first (`Config::age_key`): where several
/// policies could apply at one level, istiod takes the oldest.
pub fn oldest_first<'a>(
    snapshot: &'a Snapshot,
    kind: Kind,
    namespace: &str,
) -> Vec<&'a Arc<Config>> {
    let mut found: Vec<&Arc<Config>> = snapshot
        .list_namespace(kind, namespace)
        .map(|e| &e.config)
        .collect();
    found.sort_by(|a, b| a.age_key().cmp(&b.age_key()));
    found
}

/// The policies of one levelled kind (Sidecar, PeerAuthentication, ProxyConfig, Telemetry) a
/// workload takes, one per level, each the oldest of its level (`Config::age_key`) as istiod
/// picks.
#[derive(Debug, Clone, Copy)]
pub struct Levels<T> {
    /// The root namespace's namespace-wide policy: the mesh's.
    pub root: Option<T>,
    /// The workload's namespace's namespace-wide policy (none in the root namespace, whose
    /// namespace-wide policy is the mesh's).
    pub namespace: Option<T>,
    /// A policy of the workload's own namespace whose selector matches it, or whose targetRef
    /// names its Gateway ([`attaches`]: a root-namespace selector applies as the kind's
    /// [`RootSelector`] says).
    pub workload: Option<T>,
}

/// The [`Levels`] among `candidates` (policies of one kind; those of other namespaces than the
/// workload's and the root are ignored), `config` giving each one's object.
pub fn levels_among<'a, T: Copy>(
    candidates: impl IntoIterator<Item = T>,
    config: impl Fn(T) -> &'a Config,
    root: &str,
    workload: &Workload,
) -> Levels<T> {
    let mut levels = Levels {
        root: None,
        namespace: None,
        workload: None,
    };
    let older = |slot: &mut Option<T>, candidate: T| {
        if slot.is_none_or(|held| config(candidate).age_key() < config(held).age_key()) {
            *slot = Some(candidate);
        }
    };
    for candidate in candidates {
        let c = config(candidate);
        let Some(policy) = attachable(&c.spec) else {
            continue;
        };
        let ns = c.metadata.namespace.as_str();
        if policy.namespace_wide() {
            if ns == root {
                older(&mut levels.root, candidate);
            } else if ns == workload.namespace {
                older(&mut levels.namespace, candidate);
            }
        }
        let attachment = attaches(ns, policy, root, workload);
        let selects = matches!(
            attachment,
            Some(Attachment::Selector | Attachment::TargetRef)
        ) || (attachment == Some(Attachment::Namespace)
            && !policy.namespace_wide()
            && policy.empty_selector_selects_all());
        if ns == workload.namespace && selects {
            older(&mut levels.workload, candidate);
        }
    }
    levels
}

/// The [`Levels`] of `kind` for `workload` in `snapshot`.
pub fn levels<'a>(
    snapshot: &'a Snapshot,
    kind: Kind,
    root: &str,
    workload: &Workload,
) -> Levels<&'a Arc<Config>> {
    let own = snapshot.list_namespace(kind, workload.namespace);
    let mesh = (workload.namespace != root)
        .then(|| snapshot.list_namespace(kind, root))
        .into_iter()
        .flatten();
    levels_among(own.chain(mesh).map(|e| &e.config), |c| c, root, workload)
}

/// The Sidecar that applies to `workload`: the oldest of its namespace selecting it, else its
/// namespace's oldest default, else the root namespace's, as istiod chooses.
pub fn sidecar<'a>(
    snapshot: &'a Snapshot,
    root_namespace: &str,
    workload: &Workload,
) -> Option<&'a Arc<Config>> {
    let levels = levels(snapshot, Kind::Sidecar, root_namespace, workload);
    levels.workload.or(levels.namespace).or(levels.root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    const POLICIES: &str = "
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ns-wide, namespace: shop}
spec: {}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: by-label, namespace: shop}
spec: {selector: {matchLabels: {app: web}}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-gateway, namespace: shop}
spec: {targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: ingress}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-other-gateway, namespace: shop}
spec: {targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: other}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-service, namespace: shop}
spec: {targetRefs: [{kind: Service, group: \"\", name: web}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: mesh-wide, namespace: istio-system}
spec: {}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: root-to-gateway, namespace: istio-system}
spec: {targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: ingress}]}
";

    fn names(labels: &[(&str, &str)], waypoint: bool) -> Vec<String> {
        let store = Store::from_yaml(POLICIES);
        let snap = store.snapshot();
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let workload = Workload {
            namespace: "shop",
            labels: &labels,
            waypoint,
            service: None,
        };
        selecting(&snap, "istio-system", &workload, Kind::AuthorizationPolicy)
            .into_iter()
            .map(|c| c.metadata.name.clone())
            .collect()
    }

    #[test]
    fn workloads_take_selector_policies_and_never_targeted_ones() {
        assert_eq!(
            names(&[("app", "web")], false),
            ["by-label", "ns-wide", "mesh-wide"]
        );
        assert_eq!(names(&[("app", "db")], false), ["ns-wide", "mesh-wide"]);
    }

    #[test]
    fn gateway_api_gateways_take_policies_targeting_their_gateway() {
        assert_eq!(
            names(&[(GATEWAY_NAME_LABEL, "ingress")], false),
            ["ns-wide", "to-gateway", "mesh-wide"],
            "its Gateway's policy (not another's, not one from the root namespace), and selector policies"
        );
        assert_eq!(
            names(&[(GATEWAY_NAME_LABEL, "ingress")], true),
            ["to-gateway"],
            "a waypoint never takes selector policies"
        );
    }

    /// Each attachable kind: its header, its spec with a selector and without one, whether it has
    /// targetRefs, and what a selector in the root namespace reaches.
    const KINDS: &[(Kind, &str, &str, &str, bool, RootSelector)] = &[
        (
            Kind::AuthorizationPolicy,
            "security.istio.io/v1",
            "selector: {matchLabels: {app: web}}",
            "",
            true,
            RootSelector::Mesh,
        ),
        (
            Kind::RequestAuthentication,
            "security.istio.io/v1",
            "selector: {matchLabels: {app: web}}",
            "",
            true,
            RootSelector::Mesh,
        ),
        (
            Kind::PeerAuthentication,
            "security.istio.io/v1",
            "selector: {matchLabels: {app: web}}",
            "",
            false,
            RootSelector::Ignored,
        ),
        (
            Kind::Telemetry,
            "telemetry.istio.io/v1",
            "selector: {matchLabels: {app: web}}",
            "",
            true,
            RootSelector::Mesh,
        ),
        (
            Kind::WasmPlugin,
            "extensions.istio.io/v1alpha1",
            "url: oci://x, selector: {matchLabels: {app: web}}",
            "url: oci://x",
            true,
            RootSelector::Mesh,
        ),
        (
            Kind::EnvoyFilter,
            "networking.istio.io/v1alpha3",
            "workloadSelector: {labels: {app: web}}",
            "",
            true,
            RootSelector::Mesh,
        ),
        (
            Kind::Sidecar,
            "networking.istio.io/v1",
            "workloadSelector: {labels: {app: web}}",
            "",
            false,
            RootSelector::OwnNamespace,
        ),
        (
            Kind::DestinationRule,
            "networking.istio.io/v1",
            "host: a, workloadSelector: {matchLabels: {app: web}}",
            "host: a",
            false,
            RootSelector::OwnNamespace,
        ),
        (
            Kind::ProxyConfig,
            "networking.istio.io/v1beta1",
            "selector: {matchLabels: {app: web}}",
            "",
            false,
            RootSelector::OwnNamespace,
        ),
    ];

    /// How the object `p` of `kind` in `yaml` attaches to a workload of `ns` with `labels`.
    fn attachment(kind: Kind, yaml: &str, ns: &str, labels: &[(&str, &str)]) -> Option<Attachment> {
        let store = Store::from_yaml(yaml);
        let snap = store.snapshot();
        let e = snap.list(kind).next().expect("the object parses");
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let workload = Workload {
            namespace: ns,
            labels: &labels,
            waypoint: false,
            service: None,
        };
        let policy = attachable(&e.config.spec).expect("an attachable kind");
        attaches(
            &e.config.metadata.namespace,
            policy,
            "istio-system",
            &workload,
        )
    }

    #[test]
    fn every_attachable_kind_follows_the_one_rule() {
        for (kind, api, selector, plain, has_targets, root) in KINDS {
            let object = |ns: &str, spec: &str| {
                format!(
                    "apiVersion: {api}\nkind: {kind:?}\nmetadata: {{name: p, namespace: {ns}}}\nspec: {{{spec}}}\n"
                )
            };
            let at =
                |yaml: &str, ns: &str, labels: &[(&str, &str)]| attachment(*kind, yaml, ns, labels);
            let web = [("app", "web")];
            let db = [("app", "db")];
            let own = object("shop", selector);
            assert_eq!(
                at(&own, "shop", &web),
                Some(Attachment::Selector),
                "{kind:?}"
            );
            assert_eq!(at(&own, "shop", &db), None, "{kind:?}");
            assert_eq!(at(&own, "bank", &web), None, "{kind:?}: another namespace");
            let from_root = object("istio-system", selector);
            let want = (*root == RootSelector::Mesh).then_some(Attachment::Selector);
            assert_eq!(
                at(&from_root, "shop", &web),
                want,
                "{kind:?}: root selector"
            );
            let want = (*root != RootSelector::Ignored).then_some(Attachment::Selector);
            assert_eq!(
                at(&from_root, "istio-system", &web),
                want,
                "{kind:?}: root workload"
            );
            let wide = object("istio-system", plain);
            assert_eq!(
                at(&wide, "shop", &db),
                Some(Attachment::Namespace),
                "{kind:?}: mesh-wide"
            );
            if *has_targets {
                let refs = "targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: ingress}]";
                let targeted = object(
                    "shop",
                    &[plain, refs].join(if plain.is_empty() { "" } else { ", " }),
                );
                let gateway = [(GATEWAY_NAME_LABEL, "ingress")];
                assert_eq!(
                    at(&targeted, "shop", &gateway),
                    Some(Attachment::TargetRef),
                    "{kind:?}"
                );
                assert_eq!(
                    at(&targeted, "shop", &web),
                    None,
                    "{kind:?}: targeted, not selected"
                );
            }
        }
    }

    /// Of the Sidecars that could apply, the one selecting the workload wins over its
    /// namespace's default, which wins over the root namespace's; at each level the oldest.
    #[test]
    fn the_sidecar_of_a_workload_is_the_oldest_of_the_nearest_level() {
        let object = |name: &str, ns: &str, at: &str, selector: &str| {
            format!(
                "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: {name}, namespace: {ns}, creationTimestamp: \"{at}\"}}\nspec: {{{selector}egress: [{{hosts: [\"./*\"]}}]}}\n---\n"
            )
        };
        let yaml = [
            object("root-default", "istio-system", "2024-01-01T00:00:00Z", ""),
            object("newer-default", "shop", "2024-03-01T00:00:00Z", ""),
            object("older-default", "shop", "2024-02-01T00:00:00Z", ""),
            object(
                "newer-web",
                "shop",
                "2024-05-01T00:00:00Z",
                "workloadSelector: {labels: {app: web}}, ",
            ),
            object(
                "older-web",
                "shop",
                "2024-04-01T00:00:00Z",
                "workloadSelector: {labels: {app: web}}, ",
            ),
        ]
        .concat();
        let snapshot = crate::testing::store(&yaml).snapshot();
        let chosen = |namespace: &str, app: &str| {
            let labels = BTreeMap::from([("app".to_string(), app.to_string())]);
            let workload = Workload {
                namespace,
                labels: &labels,
                waypoint: false,
                service: None,
            };
            sidecar(&snapshot, "istio-system", &workload).map(|c| c.metadata.name.clone())
        };
        assert_eq!(chosen("shop", "web").as_deref(), Some("older-web"));
        assert_eq!(chosen("shop", "db").as_deref(), Some("older-default"));
        assert_eq!(chosen("other", "web").as_deref(), Some("root-default"));
    }

    /// Sidecar, PeerAuthentication, ProxyConfig and Telemetry choose their levels by one rule,
    /// each kind saying what a selector is: at each level the oldest; a root-namespace selector
    /// selects the root's own workloads for Sidecar, ProxyConfig and Telemetry and nothing for
    /// PeerAuthentication; an empty selector is a Sidecar's that selects every workload
    /// (istiod's subset test), at no level for ProxyConfig (`GetSelector() == nil` for a
    /// namespace's, non-empty labels for a workload's), and namespace-wide for
    /// PeerAuthentication and Telemetry.
    #[test]
    fn levelled_kinds_share_one_rule() {
        let header = |kind: Kind| match kind {
            Kind::Sidecar => "apiVersion: networking.istio.io/v1\nkind: Sidecar",
            Kind::PeerAuthentication => {
                "apiVersion: security.istio.io/v1\nkind: PeerAuthentication"
            }
            Kind::Telemetry => "apiVersion: telemetry.istio.io/v1\nkind: Telemetry",
            _ => "apiVersion: networking.istio.io/v1beta1\nkind: ProxyConfig",
        };
        let selector = |kind: Kind, labels: &str| match kind {
            Kind::Sidecar => format!("workloadSelector: {{labels: {labels}}}"),
            _ => format!("selector: {{matchLabels: {labels}}}"),
        };
        for kind in [
            Kind::Sidecar,
            Kind::PeerAuthentication,
            Kind::ProxyConfig,
            Kind::Telemetry,
        ] {
            let object = |name: &str, ns: &str, at: &str, spec: &str| {
                format!(
                    "{}\nmetadata: {{name: {name}, namespace: {ns}, creationTimestamp: \"{at}\"}}\nspec: {{{spec}}}\n---\n",
                    header(kind)
                )
            };
            let yaml = [
                object("root-default", "istio-system", "2024-01-01T00:00:00Z", ""),
                object(
                    "root-web",
                    "istio-system",
                    "2024-01-02T00:00:00Z",
                    &selector(kind, "{app: web}"),
                ),
                object(
                    "empty-selector",
                    "shop",
                    "2023-01-01T00:00:00Z",
                    &selector(kind, "{}"),
                ),
                object("newer-default", "shop", "2024-03-01T00:00:00Z", ""),
                object("older-default", "shop", "2024-02-01T00:00:00Z", ""),
                object(
                    "newer-web",
                    "shop",
                    "2024-05-01T00:00:00Z",
                    &selector(kind, "{app: web}"),
                ),
                object(
                    "older-web",
                    "shop",
                    "2024-04-01T00:00:00Z",
                    &selector(kind, "{app: web}"),
                ),
            ]
            .concat();
            let snapshot = crate::testing::store(&yaml).snapshot();
            let chosen = |namespace: &str| {
                let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
                let workload = Workload {
                    namespace,
                    labels: &labels,
                    waypoint: false,
                    service: None,
                };
                let l = levels(&snapshot, kind, "istio-system", &workload);
                let name = |c: Option<&Arc<Config>>| c.map(|c| c.metadata.name.clone());
                (name(l.root), name(l.namespace), name(l.workload))
            };
            let (shop_default, shop_workload) = match kind {
                Kind::ProxyConfig => ("older-default", "older-web"),
                Kind::Sidecar => ("older-default", "empty-selector"),
                _ => ("empty-selector", "older-web"),
            };
            assert_eq!(
                chosen("shop"),
                (
                    Some("root-default".into()),
                    Some(shop_default.into()),
                    Some(shop_workload.into())
                ),
                "{kind:?} in shop"
            );
            let root_workload = match kind {
                Kind::PeerAuthentication => None,
                _ => Some("root-web".into()),
            };
            assert_eq!(
                chosen("istio-system"),
                (Some("root-default".into()), None, root_workload),
                "{kind:?} in the root namespace"
            );
        }
    }
}
