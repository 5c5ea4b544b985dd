//! Gateways: each listener of a Gateway of an Istio class into an Istio Gateway with one server,
//! and the listener's outcome (istiod's `buildListener`, `buildTLS`, `reportGatewayStatus`).

use super::outcome::{
    Condition, GatewayOutcome, INTERNAL_NAME, ListenerOutcome, Reference, Translation,
};
use super::parents::{Grants, Parent, class_controller, group_or_api};
use crate::config::gateway_api::{
    self as api, Gateway, Listener, RouteGroupKind, UNMANAGED_CONTROLLER,
};
use crate::config::networking::{self as istio, ServerTlsMode, ServerTlsSettings};
use crate::config::{Config, ConfigKey, Kind, ObjectMeta, Spec};
use crate::model::origin::{Derived, Origin, Source};
use crate::store::Snapshot;
use std::collections::BTreeMap;

/// The label istiod's automated deployment puts on a Gateway's pods (the one the policy
/// attachment rule reads): a derived Istio Gateway applies to the pods of its namespace with this
/// label naming it (or to the pods of the Services its addresses name).
pub use crate::model::policy::GATEWAY_NAME_LABEL;
/// Overrides the generated name of a managed Gateway's Deployment and Service.
const NAME_OVERRIDE: &str = "gateway.istio.io/name-override";
/// Listener TLS option: the Istio TLS mode of a terminating listener.
const TLS_TERMINATE_MODE: &str = "gateway.istio.io/tls-terminate-mode";
/// Listener TLS option: cipher suites, comma-separated.
const TLS_CIPHER_SUITES: &str = "gateway.istio.io/tls-cipher-suites";
/// The SDS prefix of Secrets a Gateway API Gateway refers to (istiod's).
pub const KUBERNETES_GATEWAY_SECRET: &str = "kubernetes-gateway://";

/// Managed (Rudder deploys it): no address, or one IP address; else the addresses name the
/// Services that serve it (istiod's `IsManaged`).
pub fn is_managed(gw: &Gateway) -> bool {
    match gw.addresses.as_slice() {
        [] => true,
        [one] => matches!(one.address_type.as_deref(), None | Some("IPAddress")),
        _ => false,
    }
}

/// The name of a managed Gateway's Deployment and Service: `<name>-<class>` (the waypoint class
/// keeps the name), unless the name-override annotation says otherwise.
pub fn managed_service_name(config: &Config, gw: &Gateway, controller: &str) -> String {
    if let Some(name) = config.metadata.annotations.get(NAME_OVERRIDE) {
        return name.clone();
    }
    if api::waypoint_like(controller) {
        config.metadata.name.clone()
    } else {
        format!("{}-{}", config.metadata.name, gw.gateway_class_name)
    }
}

/// The Service hostnames serving a Gateway, and an error for addresses that are not hostnames.
fn gateway_services(
    config: &Config,
    gw: &Gateway,
    controller: &str,
    suffix: &str,
) -> (Vec<String>, Option<Condition>) {
    let ns = &config.metadata.namespace;
    if is_managed(gw) {
        let name = managed_service_name(config, gw, controller);
        return (vec![format!("{name}.{ns}.svc.{suffix}")], None);
    }
    let mut services = Vec::new();
    let mut skipped = Vec::new();
    for a in &gw.addresses {
        if a.address_type.as_deref().is_some_and(|t| t != "Hostname") {
            skipped.push(a.value.clone());
            continue;
        }
        services.push(if a.value.contains('.') {
            a.value.clone()
        } else {
            format!("{}.{ns}.svc.{suffix}", a.value)
        });
    }
    let error = (!skipped.is_empty()).then(|| {
        Condition::failed(
            "UnsupportedAddress",
            format!(
                "only Hostname is supported, ignoring [{}]",
                skipped.join(" ")
            ),
        )
    });
    (services, error)
}

/// The route kinds a listener takes, and whether every kind it allows is one it can take.
fn supported_kinds(l: &Listener) -> (Vec<RouteGroupKind>, bool) {
    let kind = |k: &str| RouteGroupKind {
        group: Some(api::GROUP.into()),
        kind: k.into(),
    };
    let supported = match l.protocol.as_str() {
        "HTTP" | "HTTPS" => vec![kind("HTTPRoute"), kind("GRPCRoute")],
        "TCP" => vec![kind("TCPRoute")],
        "TLS" => {
            let mut k = vec![kind("TLSRoute")];
            if l.tls.as_ref().and_then(|t| t.mode.as_deref()) == Some("Terminate") {
                k.push(kind("TCPRoute"));
            }
            k
        }
        _ => Vec::new(),
    };
    match &l.allowed_routes {
        Some(a) if !a.kinds.is_empty() => {
            let allowed: Vec<RouteGroupKind> = supported
                .into_iter()
                .filter(|s| {
                    a.kinds.iter().any(|k| {
                        k.kind == s.kind && group_or_api(&k.group) == group_or_api(&s.group)
                    })
                })
                .collect();
            let valid = allowed.len() == a.kinds.len();
            (allowed, valid)
        }
        _ => (supported, true),
    }
}

/// The namespaces whose routes a listener accepts: `Same` (the default), `All` (`*`), or those
/// a label selector picks.
fn route_namespaces(snapshot: &Snapshot, gateway_ns: &str, l: &Listener) -> Vec<String> {
    let ns = l
        .allowed_routes
        .as_ref()
        .and_then(|a| a.namespaces.as_ref());
    match ns.map(|n| (n.from.as_deref(), n.selector.as_ref())) {
        None | Some((None | Some("Same"), _)) => vec![gateway_ns.to_string()],
        Some((Some("All"), _)) | Some((Some("Selector"), None)) => vec!["*".into()],
        Some((Some("Selector"), Some(selector))) => {
            let mut out: Vec<String> = snapshot
                .list_local(Kind::Namespace)
                .filter(|e| {
                    let mut labels = e.config.metadata.labels.clone();
                    // Kubernetes labels every namespace with its name.
                    labels.insert(
                        "kubernetes.io/metadata.name".into(),
                        e.config.metadata.name.clone(),
                    );
                    crate::config::mesh::selector_matches(selector, &labels)
                })
                .map(|e| e.config.metadata.name.clone())
                .collect();
            out.sort();
            out
        }
        Some((Some(_), _)) => Vec::new(),
    }
}

/// The protocol of the server, or why the listener's protocol is refused.
fn istio_protocol(protocol: &str) -> Result<String, String> {
    match protocol {
        "HTTP" | "HTTPS" | "TLS" | "TCP" => Ok(protocol.to_string()),
        "HBONE" => Err(format!(
            "protocol {protocol:?} is only supported for waypoint proxies"
        )),
        p if ["HTTP", "HTTPS", "TLS", "TCP"].contains(&p.to_ascii_uppercase().as_str()) => {
            Err(format!(
                "protocol {p:?} is unsupported. hint: {:?} (uppercase) may be supported",
                p.to_ascii_uppercase()
            ))
        }
        p => Err(format!("protocol {p:?} is unsupported")),
    }
}

/// The server TLS of a listener (istiod's `buildTLS`): certificates from Secrets over SDS
/// (`kubernetes-gateway://ns/name`), cross-namespace only with a ReferenceGrant; the Istio mode
/// an option asks for; passthrough. The references are returned for the status to resolve.
fn server_tls(
    config: &Config,
    gateway: &Config,
    l: &Listener,
    grants: &Grants,
    out: &mut Translation,
) -> (Option<ServerTlsSettings>, Vec<Reference>, Option<Condition>) {
    let Some(tls) = &l.tls else {
        return (None, Vec::new(), None);
    };
    let ns = &config.metadata.namespace;
    let mut settings = ServerTlsSettings::default();
    if tls.mode.as_deref() == Some("Passthrough") {
        settings.mode = ServerTlsMode::PASSTHROUGH;
        return (Some(settings), Vec::new(), None);
    }
    settings.mode = ServerTlsMode::SIMPLE;
    match tls.options.get(TLS_TERMINATE_MODE).map(String::as_str) {
        Some("MUTUAL") => settings.mode = ServerTlsMode::MUTUAL,
        Some("OPTIONAL_MUTUAL") => settings.mode = ServerTlsMode::OPTIONAL_MUTUAL,
        Some("ISTIO_SIMPLE") => {
            settings.credential_name = "builtin://".into();
            return (Some(settings), Vec::new(), None);
        }
        Some("ISTIO_MUTUAL") => {
            settings.mode = ServerTlsMode::ISTIO_MUTUAL;
            return (Some(settings), Vec::new(), None);
        }
        _ => {}
    }
    if let Some(ciphers) = tls.options.get(TLS_CIPHER_SUITES) {
        settings.cipher_suites = ciphers
            .split(',')
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect();
    }
    if tls.certificate_refs.len() > 2 {
        return (
            Some(settings),
            Vec::new(),
            Some(Condition::failed(
                "InvalidCertificateRef",
                "TLS mode can only support up to 2 server certificates",
            )),
        );
    }
    let mut names = Vec::new();
    let mut refs = Vec::new();
    let mut error = None;
    for c in &tls.certificate_refs {
        let group = c.group.as_deref().unwrap_or("");
        let kind = c.kind.as_deref().unwrap_or("Secret");
        if !group.is_empty() || kind != "Secret" {
            error = Some(Condition::failed(
                "InvalidCertificateRef",
                format!(
                    "invalid certificate reference {group}/{kind}/{}, only secret is allowed",
                    c.name
                ),
            ));
            continue;
        }
        let secret_ns = c.namespace.clone().unwrap_or_else(|| ns.clone());
        if secret_ns != *ns
            && !grants.allowed(
                (api::GROUP, "Gateway", ns),
                ("", "Secret", &secret_ns, &c.name),
            )
        {
            error = Some(Condition::failed(
                "RefNotPermitted",
                format!(
                    "certificateRef {}/{secret_ns} not accessible to a Gateway in namespace {ns:?} (missing a ReferenceGrant?)",
                    c.name
                ),
            ));
            continue;
        }
        out.secret_grants
            .insert((ns.clone(), format!("{secret_ns}/{}", c.name)));
        names.push(format!("{KUBERNETES_GATEWAY_SECRET}{secret_ns}/{}", c.name));
        refs.push(Reference::Secret {
            namespace: secret_ns,
            name: c.name.clone(),
        });
    }
    match names.len() {
        0 => {}
        1 => settings.credential_name = names.remove(0),
        _ => settings.credential_names = names,
    }
    if let Err(e) = frontend_validation(config, gateway, l, grants, &mut settings) {
        error = Some(e);
    }
    (Some(settings), refs, error)
}

/// The Gateway's `tls.frontend` validation for a terminating listener, as istiod applies it:
/// the listener's port's entry, else the default; one CA reference, a ConfigMap (the
/// Gateway's namespace, or another one a ReferenceGrant opens), whose `ca.crt` clients'
/// certificates are checked against (`MUTUAL`, or `OPTIONAL_MUTUAL` when the listener's options
/// ask for it).
fn frontend_validation(
    config: &Config,
    gateway: &Config,
    l: &Listener,
    grants: &Grants,
    settings: &mut ServerTlsSettings,
) -> Result<(), Condition> {
    // The Gateway's settings; references resolve from the listener's owner's namespace (a
    // ListenerSet's own), as istiod resolves them.
    let Spec::KubernetesGateway(g) = &gateway.spec else {
        return Ok(());
    };
    let Some(frontend) = g.tls.as_ref().and_then(|t| t.frontend.as_ref()) else {
        return Ok(());
    };
    let chosen = frontend
        .per_port
        .iter()
        .find(|p| p.port == l.port)
        .and_then(|p| p.tls.as_ref())
        .or(frontend.default.as_ref());
    let Some(validation) = chosen.and_then(|c| c.validation.as_ref()) else {
        return Ok(());
    };
    let Some(ca) = validation.ca_certificate_refs.first() else {
        return Ok(());
    };
    if validation.ca_certificate_refs.len() > 1 {
        return Err(Condition::failed(
            "InvalidTLSConfig",
            "only one caCertificateRef is supported",
        ));
    }
    let ns = &config.metadata.namespace;
    if !ca.group.is_empty() || ca.kind != "ConfigMap" {
        return Err(Condition::failed(
            "InvalidCACertificateKind",
            format!(
                "caCertificateRef {}/{} is not a ConfigMap",
                ca.kind, ca.name
            ),
        ));
    }
    let ca_ns = ca.namespace.clone().unwrap_or_else(|| ns.clone());
    if ca_ns != *ns
        && !grants.allowed(
            (api::GROUP, config.kind.name(), ns),
            ("", "ConfigMap", &ca_ns, &ca.name),
        )
    {
        return Err(Condition::failed(
            "RefNotPermitted",
            format!(
                "caCertificateRef {ca_ns}/{} not accessible to a Gateway in namespace {ns:?} (missing a ReferenceGrant?)",
                ca.name
            ),
        ));
    }
    if settings.mode != ServerTlsMode::OPTIONAL_MUTUAL {
        settings.mode = ServerTlsMode::MUTUAL;
    }
    settings.ca_cert_credential_name = format!(
        "{}{ca_ns}/{}",
        super::backend_tls::CONFIGMAP_CREDENTIAL,
        ca.name
    );
    Ok(())
}

/// Translates the Gateways of Istio classes into Istio Gateways and outcomes; returns the
/// listeners routes may attach to.
pub(super) fn gateways(
    snapshot: &Snapshot,
    suffix: &str,
    grants: &Grants,
    out: &mut Translation,
) -> Vec<Parent> {
    let mut parents = Vec::new();
    let mut all: Vec<_> = snapshot.list_local(Kind::KubernetesGateway).collect();
    all.sort_by(|a, b| a.config.age_key().cmp(&b.config.age_key()));
    for e in all {
        let config = &e.config;
        let Spec::KubernetesGateway(gw) = &config.spec else {
            continue;
        };
        let Some(controller) = class_controller(snapshot, &gw.gateway_class_name) else {
            continue;
        };
        let key = config.key();
        // A waypoint's proxies get the waypoint listener set (`xds::generate::waypoint`), not
        // servers: its Gateway is accepted, programmed once its Service is there, and its
        // listeners (HBONE on 15008) carry no routes.
        if api::waypoint_like(&controller) {
            let (services, address_error) = gateway_services(config, gw, &controller, suffix);
            let east_west = controller == api::EAST_WEST_CONTROLLER;
            let listeners = gw
                .listeners
                .iter()
                .map(|l| {
                    let mut conditions = clean_listener();
                    // istiod also serves an east-west gateway's TLS passthrough listeners
                    // (exposing, say, an API server across networks); Rudder does not yet, and
                    // says so where the listener's status is read.
                    if east_west && l.protocol != "HBONE" {
                        conditions.insert(
                            "Programmed",
                            Condition::failed(
                                "Invalid",
                                "Rudder serves only the HBONE listener of an east-west gateway",
                            ),
                        );
                    }
                    ListenerOutcome {
                        name: l.name.clone(),
                        supported_kinds: Vec::new(),
                        attached_routes: 0,
                        conditions,
                        certificates: Vec::new(),
                    }
                })
                .collect();
            out.gateway_outcomes.insert(
                key,
                GatewayOutcome {
                    generation: config.metadata.generation,
                    unmanaged: false,
                    accepted: address_error
                        .unwrap_or_else(|| Condition::ok("Accepted", "Resource accepted")),
                    services,
                    listeners,
                    attached_listener_sets: 0,
                },
            );
            continue;
        }
        if controller == UNMANAGED_CONTROLLER {
            out.gateway_outcomes.insert(
                key,
                GatewayOutcome {
                    generation: config.metadata.generation,
                    unmanaged: true,
                    accepted: Condition::ok("Accepted", "Resource accepted"),
                    services: Vec::new(),
                    listeners: Vec::new(),
                    attached_listener_sets: 0,
                },
            );
            continue;
        }
        let (services, address_error) = gateway_services(config, gw, &controller, suffix);
        let mut outcome = GatewayOutcome {
            generation: config.metadata.generation,
            unmanaged: false,
            accepted: address_error
                .clone()
                .unwrap_or_else(|| Condition::ok("Accepted", "Resource accepted")),
            services: services.clone(),
            listeners: Vec::new(),
            attached_listener_sets: 0,
        };
        if services.is_empty() {
            out.gateway_outcomes.insert(key, outcome);
            continue;
        }
        let owner = Owner {
            config,
            kind: Kind::KubernetesGateway,
            gateway: config,
            services: &services,
        };
        for (index, l) in gw.listeners.iter().enumerate() {
            translate_listener(
                snapshot,
                grants,
                &owner,
                (index, l),
                &mut outcome,
                out,
                &mut parents,
            );
        }
        out.gateway_outcomes.insert(key, outcome);
    }
    listener_sets(snapshot, grants, out, &mut parents);
    parents
}

/// ListenerSets, as istiod translates them: the listeners of one whose parent Gateway (of an
/// Istio class, deployed, not a waypoint) allows it (`allowedListeners`: `None` by default,
/// `Same`, `All` or a namespace `Selector`) become servers of that Gateway's proxies, routes may
/// attach to them by the ListenerSet's name, and the Gateway counts it.
fn listener_sets(
    snapshot: &Snapshot,
    grants: &Grants,
    out: &mut Translation,
    parents: &mut Vec<Parent>,
) {
    let mut all: Vec<_> = snapshot.list(Kind::ListenerSet).collect();
    all.sort_by(|a, b| a.config.age_key().cmp(&b.config.age_key()));
    for e in all {
        let config = &e.config;
        let Spec::ListenerSet(ls) = &config.spec else {
            continue;
        };
        let p = &ls.parent_ref;
        if p.group.as_deref().unwrap_or(api::GROUP) != api::GROUP
            || p.kind.as_deref().unwrap_or("Gateway") != "Gateway"
        {
            continue;
        }
        let ns = &config.metadata.namespace;
        let gw_ns = p.namespace.clone().unwrap_or_else(|| ns.clone());
        let gw_key = gateway_key(&gw_ns, &p.name);
        // A parent that is not one of our Gateways: not ours to report on.
        let Some(parent) = out.gateway_outcomes.get(&gw_key) else {
            continue;
        };
        if parent.unmanaged {
            continue;
        }
        let services = parent.services.clone();
        let Some(gateway) = snapshot.get_named(Kind::KubernetesGateway, &gw_ns, &p.name) else {
            continue;
        };
        let gateway = &gateway.config;
        let allowed = match &gateway.spec {
            Spec::KubernetesGateway(gw) => listeners_allowed(snapshot, gw, &gw_ns, ns),
            _ => false,
        };
        let mut outcome = GatewayOutcome {
            generation: config.metadata.generation,
            unmanaged: false,
            accepted: Condition::ok("Accepted", "ListenerSet accepted"),
            services: services.clone(),
            listeners: Vec::new(),
            attached_listener_sets: 0,
        };
        if !allowed {
            outcome.accepted = Condition::failed(
                "NotAllowed",
                "ListenerSet is not allowed to attach to the Gateway",
            );
            out.gateway_outcomes.insert(config.key(), outcome);
            continue;
        }
        let owner = Owner {
            config,
            kind: Kind::ListenerSet,
            gateway,
            services: &services,
        };
        for (index, l) in ls.listeners.iter().enumerate() {
            translate_listener(
                snapshot,
                grants,
                &owner,
                (index, l),
                &mut outcome,
                out,
                parents,
            );
        }
        out.gateway_outcomes.insert(config.key(), outcome);
        if let Some(parent) = out.gateway_outcomes.get_mut(&gw_key) {
            parent.attached_listener_sets += 1;
        }
    }
}

/// The listeners ListenerSets add to Gateway `gw_ns/gw_name` (those it allows), oldest first:
/// what its deployment's Service must also listen on.
pub fn listener_set_listeners(
    snapshot: &Snapshot,
    gw_ns: &str,
    gw_name: &str,
    gw: &crate::config::gateway_api::Gateway,
) -> Vec<Listener> {
    let mut all: Vec<_> = snapshot.list(Kind::ListenerSet).collect();
    all.sort_by(|a, b| a.config.age_key().cmp(&b.config.age_key()));
    all.into_iter()
        .filter_map(|e| match &e.config.spec {
            Spec::ListenerSet(ls) => Some((&e.config.metadata.namespace, ls)),
            _ => None,
        })
        .filter(|(ns, ls)| {
            let p = &ls.parent_ref;
            p.group.as_deref().unwrap_or(api::GROUP) == api::GROUP
                && p.kind.as_deref().unwrap_or("Gateway") == "Gateway"
                && p.name == gw_name
                && p.namespace.as_deref().unwrap_or(ns.as_str()) == gw_ns
                && listeners_allowed(snapshot, gw, gw_ns, ns)
        })
        .flat_map(|(_, ls)| ls.listeners.iter().cloned())
        .collect()
}

/// Whether Gateway `gw` (of `gw_ns`) takes ListenerSets of namespace `ns`.
fn listeners_allowed(
    snapshot: &Snapshot,
    gw: &crate::config::gateway_api::Gateway,
    gw_ns: &str,
    ns: &str,
) -> bool {
    let Some(from) = gw
        .allowed_listeners
        .as_ref()
        .and_then(|a| a.namespaces.as_ref())
    else {
        return false;
    };
    match from.from.as_deref() {
        Some("All") => true,
        Some("Same") => gw_ns == ns,
        Some("Selector") => {
            let Some(selector) = &from.selector else {
                return false;
            };
            snapshot
                .get_named(Kind::Namespace, "", ns)
                .is_some_and(|e| {
                    let mut labels = e.config.metadata.labels.clone();
                    labels.insert("kubernetes.io/metadata.name".into(), ns.to_string());
                    crate::config::mesh::selector_matches(selector, &labels)
                })
        }
        _ => false,
    }
}

/// What holds a listener: a Gateway, or a ListenerSet adding listeners to one (served by that
/// Gateway's proxies).
struct Owner<'a> {
    config: &'a Config,
    kind: Kind,
    /// The Gateway whose proxies serve the listener (a ListenerSet's parent), whose
    /// `tls.frontend` applies to it too, as in istiod.
    gateway: &'a Config,
    /// That Gateway's Services.
    services: &'a [String],
}

/// One listener into an Istio Gateway of one server, its outcome and the parent routes attach to.
fn translate_listener(
    snapshot: &Snapshot,
    grants: &Grants,
    owner: &Owner,
    (index, l): (usize, &Listener),
    outcome: &mut GatewayOutcome,
    out: &mut Translation,
    parents: &mut Vec<Parent>,
) {
    let config = owner.config;
    let ns = config.metadata.namespace.clone();
    let mut conditions = clean_listener();
    let (tls, certificates, tls_error) = server_tls(config, owner.gateway, l, grants, out);
    if let Some(e) = tls_error {
        conditions.insert("ResolvedRefs", e);
        conditions.insert(
            "Programmed",
            Condition::failed("Invalid", "Bad TLS configuration"),
        );
    }
    let protocol = match istio_protocol(&l.protocol) {
        Ok(p) => p,
        Err(message) => {
            conditions.insert(
                "Accepted",
                Condition::failed("UnsupportedProtocol", message),
            );
            String::new()
        }
    };
    let (kinds, kinds_valid) = supported_kinds(l);
    if !kinds_valid {
        conditions.insert(
            "ResolvedRefs",
            Condition::failed("InvalidRouteKinds", "Invalid route kinds"),
        );
    }
    let hostname = l.hostname.clone().unwrap_or_else(|| "*".into());
    let namespaces = route_namespaces(snapshot, &ns, l);
    let hosts: Vec<String> = if namespaces.is_empty() {
        vec![format!("~/{hostname}")]
    } else {
        namespaces
            .iter()
            .map(|n| format!("{n}/{hostname}"))
            .collect()
    };
    let name = format!("{}~{INTERNAL_NAME}~{}", config.metadata.name, l.name);
    let server = istio::Server {
        port: Some(istio::Port {
            number: l.port,
            protocol: protocol.clone(),
            name: "default".into(),
            target_port: 0,
        }),
        hosts: hosts.clone(),
        tls,
        ..Default::default()
    };
    let origin = Origin {
        route_semantics: None,
        sources: vec![Source::new(
            owner.kind,
            &config.metadata.name,
            Some(&l.name),
            &ns,
        )],
        gateway_services: Some(owner.services.to_vec()),
    };
    outcome.listeners.push(ListenerOutcome {
        name: l.name.clone(),
        supported_kinds: kinds.clone(),
        attached_routes: 0,
        conditions,
        certificates,
    });
    if protocol.is_empty() {
        return;
    }
    let gateway = Config {
        api_version: "networking.istio.io/v1".into(),
        kind: Kind::Gateway,
        metadata: ObjectMeta {
            name: name.clone(),
            namespace: ns.clone(),
            creation_timestamp: config.metadata.creation_timestamp.clone(),
            ..Default::default()
        },
        spec: Spec::Gateway(istio::Gateway {
            servers: vec![server],
            selector: BTreeMap::from([(
                GATEWAY_NAME_LABEL.to_string(),
                owner.gateway.metadata.name.clone(),
            )]),
        }),
        status: None,
    };
    out.gateways.push(Derived::new(gateway, origin));
    parents.push(Parent {
        kind: owner.kind,
        gateway: (ns.clone(), config.metadata.name.clone()),
        internal_name: format!("{ns}/{name}"),
        section_name: l.name.clone(),
        port: l.port,
        protocol: l.protocol.clone(),
        hostname: l.hostname.clone().unwrap_or_default(),
        hosts,
        allowed_kinds: kinds,
        listener_index: index,
    });
}

/// The outcome key of Gateway `namespace/name`.
pub(super) fn gateway_key(namespace: &str, name: &str) -> ConfigKey {
    ConfigKey {
        kind: Kind::KubernetesGateway,
        namespace: namespace.to_string(),
        name: name.to_string(),
        cluster: String::new(),
    }
}

/// A listener's conditions when nothing is wrong with it (each problem found then replaces its
/// condition).
fn clean_listener() -> BTreeMap<&'static str, Condition> {
    BTreeMap::from([
        ("Accepted", Condition::ok("Accepted", "No errors found")),
        ("Programmed", Condition::ok("Programmed", "No errors found")),
        (
            "Conflicted",
            Condition::failed("NoConflicts", "No errors found"),
        ),
        (
            "ResolvedRefs",
            Condition::ok("ResolvedRefs", "No errors found"),
        ),
    ])
}
