//! Every Kubernetes permission Rudder's controllers use, in one place: the Helm chart's RBAC is
//! tested against this table, so a new API call without a matching rule fails a test, not a cluster.

/// Where a permission is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Across all namespaces (a ClusterRole).
    Cluster,
    /// Only in the system namespace (a Role there).
    SystemNamespace,
}

/// One rule: API group, resource, verbs, and where.
#[derive(Debug, Clone, Copy)]
pub struct Permission {
    pub scope: Scope,
    pub group: &'static str,
    pub resource: &'static str,
    pub verbs: &'static [&'static str],
    /// Which module needs it, for the reader of a failing test.
    pub used_by: &'static str,
    /// Granted only when the chart sets `env.EXTERNAL_CA` (as istiod's chart).
    pub external_ca_only: bool,
}

const WATCH: &[&str] = &["get", "list", "watch"];

const fn rule(
    scope: Scope,
    group: &'static str,
    resource: &'static str,
    verbs: &'static [&'static str],
    used_by: &'static str,
) -> Permission {
    Permission {
        scope,
        group,
        resource,
        verbs,
        used_by,
        external_ca_only: false,
    }
}

/// A permission only an external CA (`EXTERNAL_CA`) needs.
const fn external_ca_rule(resource: &'static str, verbs: &'static [&'static str]) -> Permission {
    Permission {
        scope: Scope::Cluster,
        group: "certificates.k8s.io",
        resource,
        verbs,
        used_by: "ca::external (EXTERNAL_CA=ISTIOD_RA_KUBERNETES_API)",
        external_ca_only: true,
    }
}

pub const PERMISSIONS: &[Permission] = &[
    rule(
        Scope::Cluster,
        "authorization.k8s.io",
        "subjectaccessreviews",
        &["create"],
        "ca::auth (may a gateway read its namespace's secrets)",
    ),
    external_ca_rule(
        "certificatesigningrequests",
        &["create", "list", "watch", "delete"],
    ),
    external_ca_rule("certificatesigningrequests/approval", &["patch"]),
    // For the signers named in `global.certSigners` only.
    external_ca_rule("signers", &["approve"]),
    rule(
        Scope::Cluster,
        "",
        "services",
        &["get", "list", "watch", "create", "update", "patch"],
        "source::kube::controller, gateway_deploy (managed Gateways' Services)",
    ),
    rule(
        Scope::Cluster,
        "",
        "pods",
        WATCH,
        "source::kube::controller",
    ),
    rule(
        Scope::Cluster,
        "",
        "namespaces",
        WATCH,
        "source::kube::controller",
    ),
    rule(
        Scope::Cluster,
        "",
        "nodes",
        WATCH,
        "source::kube::controller",
    ),
    rule(
        Scope::Cluster,
        "discovery.k8s.io",
        "endpointslices",
        WATCH,
        "source::kube::controller",
    ),
    rule(
        Scope::Cluster,
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        WATCH,
        "source::kube::controller (Istio CRDs)",
    ),
    rule(
        Scope::Cluster,
        "networking.istio.io",
        "*",
        WATCH,
        "source::kube::controller",
    ),
    rule(
        Scope::Cluster,
        "networking.istio.io",
        "virtualservices/status",
        &["patch"],
        "status::writer (PILOT_ENABLE_ANALYSIS)",
    ),
    rule(
        Scope::Cluster,
        "networking.istio.io",
        "gateways/status",
        &["patch"],
        "status::writer (PILOT_ENABLE_ANALYSIS)",
    ),
    rule(
        Scope::Cluster,
        "networking.istio.io",
        "serviceentries/status",
        &["patch"],
        "status::writer (ambient conditions, auto-allocated addresses)",
    ),
    rule(
        Scope::Cluster,
        "networking.istio.io",
        "workloadentries/status",
        &["patch"],
        "status::writer (ambient conditions)",
    ),
    rule(
        Scope::Cluster,
        "networking.istio.io",
        "workloadentries",
        &["create", "patch", "delete"],
        "autoregistration (a VM's WorkloadEntry from its WorkloadGroup)",
    ),
    rule(
        Scope::Cluster,
        "security.istio.io",
        "authorizationpolicies/status",
        &["patch"],
        "status::writer (ambient conditions)",
    ),
    rule(
        Scope::Cluster,
        "",
        "services/status",
        &["patch"],
        "status::writer (ambient conditions)",
    ),
    rule(
        Scope::Cluster,
        "security.istio.io",
        "*",
        WATCH,
        "source::kube::controller",
    ),
    rule(
        Scope::Cluster,
        "telemetry.istio.io",
        "*",
        WATCH,
        "source::kube::controller",
    ),
    rule(
        Scope::Cluster,
        "extensions.istio.io",
        "*",
        WATCH,
        "source::kube::controller",
    ),
    rule(
        Scope::Cluster,
        "gateway.networking.k8s.io",
        "*",
        WATCH,
        "source::kube::controller (the Gateway API)",
    ),
    rule(
        Scope::Cluster,
        "gateway.networking.k8s.io",
        "gatewayclasses",
        &["create"],
        "status::gateway_api (the leader creates istiod's GatewayClasses)",
    ),
    rule(
        Scope::Cluster,
        "gateway.networking.k8s.io",
        "*/status",
        &["patch"],
        "status::writer (Gateway API conditions)",
    ),
    rule(
        Scope::Cluster,
        "networking.k8s.io",
        "ingresses",
        WATCH,
        "source::kube::controller (Kubernetes Ingress)",
    ),
    rule(
        Scope::Cluster,
        "networking.k8s.io",
        "ingressclasses",
        WATCH,
        "source::kube::controller (Kubernetes Ingress)",
    ),
    rule(
        Scope::Cluster,
        "networking.k8s.io",
        "ingresses/status",
        &["patch"],
        "status::ingress (the ingress gateway's addresses)",
    ),
    rule(
        Scope::Cluster,
        "apps",
        "deployments",
        &["get", "list", "watch", "create", "update", "patch"],
        "gateway_deploy (managed Gateways' Deployments)",
    ),
    rule(
        Scope::Cluster,
        "",
        "serviceaccounts",
        &["get", "list", "watch", "create", "update", "patch"],
        "gateway_deploy (managed Gateways' ServiceAccounts)",
    ),
    rule(
        Scope::Cluster,
        "autoscaling",
        "horizontalpodautoscalers",
        &["get", "list", "watch", "create", "update", "patch"],
        "gateway_deploy (managed Gateways' autoscalers, from their parameters)",
    ),
    rule(
        Scope::Cluster,
        "policy",
        "poddisruptionbudgets",
        &["get", "list", "watch", "create", "update", "patch"],
        "gateway_deploy (managed Gateways' disruption budgets, from their parameters)",
    ),
    rule(
        Scope::Cluster,
        "",
        "configmaps",
        &["get", "list", "watch", "create", "update"],
        "ca::rootcert (istio-ca-root-cert in every namespace), source::kube::controller (mesh, injector)",
    ),
    rule(
        Scope::Cluster,
        "",
        "secrets",
        &["get", "list", "watch"],
        "source::kube::controller (gateway credentialName secrets, served over SDS)",
    ),
    rule(
        Scope::Cluster,
        "authentication.k8s.io",
        "tokenreviews",
        &["create"],
        "ca::auth (workload tokens)",
    ),
    rule(
        Scope::Cluster,
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        &["get", "list", "watch", "update"],
        "webhook::cabundle",
    ),
    rule(
        Scope::Cluster,
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        &["get", "list", "watch", "update"],
        "webhook::cabundle, webhook::tags",
    ),
    rule(
        Scope::SystemNamespace,
        "",
        "secrets",
        &["get", "create"],
        "ca::material (cacerts, istio-ca-secret)",
    ),
    rule(
        Scope::SystemNamespace,
        "coordination.k8s.io",
        "leases",
        &["get", "create", "update"],
        "k8s::leader",
    ),
];

/// The calls made in a remote cluster with its remote secret's credentials (the
/// `istio-reader-service-account` that `istioctl create-remote-secret` names): the remote's
/// watchers (`source::kube::multicluster`) and the CA's TokenReviews of its pods. The chart
/// grants them as istiod's chart grants its reader role, in every install, so any cluster can be
/// made a remote of another.
pub const REMOTE_PERMISSIONS: &[Permission] = &[
    rule(
        Scope::Cluster,
        "",
        "services",
        WATCH,
        "source::kube::multicluster",
    ),
    rule(
        Scope::Cluster,
        "",
        "pods",
        WATCH,
        "source::kube::multicluster",
    ),
    rule(
        Scope::Cluster,
        "",
        "nodes",
        WATCH,
        "source::kube::multicluster",
    ),
    rule(
        Scope::Cluster,
        "",
        "namespaces",
        WATCH,
        "source::kube::multicluster",
    ),
    rule(
        Scope::Cluster,
        "",
        "configmaps",
        WATCH,
        "source::kube::multicluster (istio-ca-root-cert)",
    ),
    rule(
        Scope::Cluster,
        "discovery.k8s.io",
        "endpointslices",
        WATCH,
        "source::kube::multicluster",
    ),
    rule(
        Scope::Cluster,
        "gateway.networking.k8s.io",
        "gateways",
        WATCH,
        "source::kube::multicluster (east-west gateways, ambient multi-network)",
    ),
    rule(
        Scope::Cluster,
        "authentication.k8s.io",
        "tokenreviews",
        &["create"],
        "ca::auth (a remote pod's token)",
    ),
];

/// What a control plane with EXTERNAL_ISTIOD also does in a remote it leads (`cmd::serve::remote`):
/// granted in the remote by Istio's remote profile (`istiodRemote.enabled`), whose reader role
/// has these rules, and by the lease role of the remote's system namespace.
pub const LED_REMOTE_PERMISSIONS: &[Permission] = &[
    rule(
        Scope::Cluster,
        "",
        "configmaps",
        &["create", "get", "list", "watch", "update"],
        "ca::rootcert (istio-ca-root-cert in a led remote)",
    ),
    rule(
        Scope::Cluster,
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        &["get", "list", "watch", "update"],
        "webhook::cabundle (a led remote)",
    ),
    rule(
        Scope::Cluster,
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        &["get", "list", "watch", "update"],
        "webhook::cabundle (a led remote)",
    ),
    rule(
        Scope::SystemNamespace,
        "coordination.k8s.io",
        "leases",
        &["get", "create", "update"],
        "k8s::leader (istio-namespace-controller-election in a led remote)",
    ),
];
