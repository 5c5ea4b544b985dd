//! Gateways (`router` proxies): listeners from the servers of the Gateways that select the proxy,
//! routes from the VirtualServices bound to those Gateways. Names follow istiod: listener
//! `0.0.0.0_<port>`, plaintext HTTP routes `http.<port>`, terminated HTTPS routes
//! `https.<port>.<portName>.<gateway>.<namespace>`.

pub mod auto_passthrough;

use crate::config::host;
use crate::config::networking::{
    Gateway, HttpMatchRequest, RouteDestination, Server, ServerTlsMode,
};
use crate::config::{Config, Kind, Spec};
use crate::model::gateway_api;
use crate::model::origin::Origin;
use crate::xds::context::{GatewayVsEntry, PushContext, ScopeView};
use crate::xds::generate::encode::any;
use crate::xds::generate::finish::{Class, Typed};
use crate::xds::generate::shared::network::{RouteSource, hcm_filter};
use crate::xds::generate::shared::route::virtual_service_routes;
use crate::xds::generate::shared::tls::{
    any_san_of, downstream_socket, mesh_tls, sds, server_tls_params_with_defaults,
};
use crate::xds::generate::shared::upstream_tls::file;
use crate::xds::generate::sidecar::listener::{behind_rbac, security_filters};
use crate::xds::generate::typed_listener::{Chain, NetworkFilter, TypedListener};
use envoy_types::pb::envoy::config::core::v3::TransportSocket;
use envoy_types::pb::envoy::config::listener::v3::{
    FilterChainMatch, Listener, ListenerFilter, listener_filter,
};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost, virtual_host};
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, TlsCertificate,
    common_tls_context::{CombinedCertificateValidationContext, ValidationContextType},
};
use envoy_types::pb::google::protobuf::BoolValue;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A server of a Gateway that selects this proxy, with the Gateway's `namespace/name`.
struct BoundServer<'a> {
    /// Derived from a ListenerSet's listener (istiod looks its certificates up in the
    /// ListenerSet's namespace).
    from_listener_set: bool,
    gateway: String,
    gateway_name: String,
    gateway_ns: String,
    server: &'a Server,
}

impl BoundServer<'_> {
    fn port(&self) -> u32 {
        self.server.port.as_ref().map_or(0, |p| p.number)
    }

    fn protocol(&self) -> String {
        self.server
            .port
            .as_ref()
            .map(|p| p.protocol.to_ascii_uppercase())
            .unwrap_or_default()
    }

    fn tls_mode(&self) -> Option<ServerTlsMode> {
        self.server.tls.as_ref().map(|t| t.mode)
    }

    /// Plaintext HTTP: served by the port's shared `http.<port>` routes.
    fn plain_http(&self) -> bool {
        matches!(self.protocol().as_str(), "HTTP" | "HTTP2" | "GRPC")
    }

    /// TLS terminated here (HTTPS or TLS with a certificate), not passed through.
    fn terminated(&self) -> bool {
        matches!(self.protocol().as_str(), "HTTPS" | "TLS")
            && !matches!(
                self.tls_mode(),
                None | Some(ServerTlsMode::PASSTHROUGH) | Some(ServerTlsMode::AUTO_PASSTHROUGH)
            )
    }

    fn https_route_name(&self) -> String {
        let port_name = self.server.port.as_ref().map_or("", |p| p.name.as_str());
        format!(
            "https.{}.{port_name}.{}.{}",
            self.port(),
            self.gateway_name,
            self.gateway_ns
        )
    }

    /// Server hosts without their `namespace/` part, and whether a VirtualService of `vs_ns` may
    /// bind to each.
    fn hosts_for(&self, vs_ns: &str) -> Vec<&str> {
        self.server
            .hosts
            .iter()
            .filter_map(|h| match h.split_once('/') {
                Some(("*", host)) => Some(host),
                Some((".", host)) if vs_ns == self.gateway_ns => Some(host),
                Some((ns, host)) if ns == vs_ns => Some(host),
                Some(_) => None,
                None => Some(h.as_str()),
            })
            .collect()
    }

    /// SNI names the server answers for (none when it takes any).
    fn sni(&self) -> Vec<String> {
        let hosts: Vec<&str> = self
            .server
            .hosts
            .iter()
            .map(|h| h.split_once('/').map_or(h.as_str(), |(_, host)| host))
            .collect();
        if hosts.contains(&"*") {
            Vec::new()
        } else {
            hosts.into_iter().map(str::to_string).collect()
        }
    }
}

/// Gateways whose selector matches the proxy's labels (any namespace, as istiod by default), the
/// oldest first: where two servers claim the same connections, the older Gateway's keeps them, as
/// istiod merges gateways in creation order. Gateways derived from the Gateway API apply to the
/// proxies of their own namespace that are theirs (`derived_gateway_applies`).
fn bound_servers<'a>(ctx: &'a PushContext, scope: &ScopeView) -> Vec<BoundServer<'a>> {
    let mut out = Vec::new();
    let mut gateways: Vec<(&'a Arc<Config>, Arc<Origin>)> = ctx.istio_gateways().collect();
    gateways.sort_by(|(a, _), (b, _)| a.age_key().cmp(&b.age_key()));
    for (config, origin) in gateways {
        let Spec::Gateway(gw) = &config.spec else {
            continue;
        };
        let gw: &'a Gateway = gw;
        let applies = if origin.gateway_api() {
            let services = origin.gateway_services.as_deref().unwrap_or_default();
            derived_gateway_applies(ctx, scope, config, gw, services)
        } else {
            crate::config::mesh::labels_match(&gw.selector, &scope.labels)
        };
        if !applies {
            continue;
        }
        let meta = &config.metadata;
        let from_listener_set = origin.from_listener_set();
        for server in &gw.servers {
            out.push(BoundServer {
                from_listener_set,
                gateway: format!("{}/{}", meta.namespace, meta.name),
                gateway_name: meta.name.clone(),
                gateway_ns: meta.namespace.clone(),
                server,
            });
        }
    }
    out
}

/// The `kubernetes-gateway://` certificates the Gateways this gateway proxy serves reference,
/// as istiod's `VerifiedCertificateReferences`: a Secret of the proxy's verified namespace named
/// by a Gateway of that namespace (a ListenerSet's listener: of the ListenerSet's namespace),
/// or one a ReferenceGrant allows the Gateway; with its `-cacert` for a MUTUAL server. The
/// reference is the authorisation, so a managed gateway needs no Secret permission.
pub fn verified_certificate_references(
    ctx: &PushContext,
    scope: &ScopeView,
    proxy: &crate::xds::proxy::Proxy,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some(identity) = &proxy.identity else {
        return out;
    };
    if proxy.proxy_type != crate::xds::proxy::ProxyType::Router {
        return out;
    }
    for b in bound_servers(ctx, scope) {
        let Some(tls) = &b.server.tls else { continue };
        let names = if tls.credential_names.is_empty() {
            std::slice::from_ref(&tls.credential_name)
        } else {
            tls.credential_names.as_slice()
        };
        let listener_set = b.from_listener_set;
        let lookup_ns = if listener_set {
            b.gateway_ns.as_str()
        } else {
            identity.namespace.as_str()
        };
        for name in names {
            let Some(reference) = name.strip_prefix(gateway_api::KUBERNETES_GATEWAY_SECRET) else {
                continue;
            };
            let secret_ns = reference
                .split_once('/')
                .map_or(identity.namespace.as_str(), |(ns, _)| ns);
            let config_allowed = b.gateway_ns == identity.namespace || listener_set;
            let own = config_allowed && secret_ns == lookup_ns;
            if own || ctx.routing.gateway_api.secret_allowed(lookup_ns, reference) {
                out.insert(name.clone());
                if tls.mode == ServerTlsMode::MUTUAL {
                    out.insert(format!("{name}-cacert"));
                }
            }
        }
    }
    out
}

/// A Gateway API Gateway's server applies to a proxy of the Gateway's namespace that carries
/// the `gateway.networking.k8s.io/gateway-name` label naming it (istiod's automated deployment
/// labels its pods so), or that one of the Gateway's Services selects (its addresses, as
/// istiod matches a proxy's service targets).
fn derived_gateway_applies(
    ctx: &PushContext,
    scope: &ScopeView,
    config: &Config,
    gw: &Gateway,
    services: &[String],
) -> bool {
    let ns = &config.metadata.namespace;
    if scope.namespace != *ns {
        return false;
    }
    if crate::config::mesh::labels_match(&gw.selector, &scope.labels) {
        return true;
    }
    let suffix = format!(".{ns}.svc.{}", ctx.mesh.domain_suffix);
    services
        .iter()
        .filter_map(|host| host.strip_suffix(&suffix))
        .any(|name| {
            let Some(e) = ctx.snapshot.get_named(Kind::Service, ns, name) else {
                return false;
            };
            let Spec::Service(svc) = &e.config.spec else {
                return false;
            };
            svc.spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .is_some_and(|sel| {
                    !sel.is_empty() && crate::config::mesh::labels_match(sel, &scope.labels)
                })
        })
}

/// The server side of TLS per the server's mode, as istiod builds it
/// (`BuildListenerTLSContext`): the certificates of `credentialName(s)` over SDS, or of files
/// (`serverCertificate`/`privateKey`, or each of `tlsCertificates`); for MUTUAL and
/// OPTIONAL_MUTUAL, client certificates checked against the CA (`caCertCredentialName`, the
/// first credential's `-cacert`, or `caCertificates`) and, when given, `subjectAltNames`,
/// `verifyCertificateSpki`/`Hash` and a CRL (`caCrl`, or the credential's); ISTIO_MUTUAL uses
/// the mesh's own certificates, pinned to `subjectAltNames` when given. TLS versions and cipher
/// suites as the server asks.
fn downstream_tls(
    server: &Server,
    http: bool,
    tls_defaults: &crate::model::mesh::MeshTls,
) -> Option<TransportSocket> {
    let tls = server.tls.as_ref()?;
    let alpn: Vec<String> = if http {
        vec!["h2".into(), "http/1.1".into()]
    } else {
        Vec::new()
    };
    let pins = CertificateValidationContext {
        match_typed_subject_alt_names: any_san_of(&tls.subject_alt_names),
        verify_certificate_spki: tls.verify_certificate_spki.clone(),
        verify_certificate_hash: tls.verify_certificate_hash.clone(),
        ..Default::default()
    };
    let common = match tls.mode {
        ServerTlsMode::ISTIO_MUTUAL => {
            let mut common = mesh_tls(alpn);
            if !tls.subject_alt_names.is_empty() || !tls.ca_crl.is_empty() {
                common.validation_context_type = Some(combined(
                    CertificateValidationContext {
                        match_typed_subject_alt_names: any_san_of(&tls.subject_alt_names),
                        crl: file(&tls.ca_crl),
                        ..Default::default()
                    },
                    crate::xds::generate::shared::secret::ROOT_CA,
                ));
            }
            common
        }
        ServerTlsMode::SIMPLE | ServerTlsMode::MUTUAL | ServerTlsMode::OPTIONAL_MUTUAL => {
            let mutual = tls.mode != ServerTlsMode::SIMPLE;
            let credentials: Vec<&str> = if tls.credential_names.is_empty() {
                Some(tls.credential_name.as_str())
                    .filter(|c| !c.is_empty())
                    .into_iter()
                    .collect()
            } else {
                tls.credential_names.iter().map(String::as_str).collect()
            };
            let mut common = CommonTlsContext {
                alpn_protocols: alpn,
                tls_params: server_tls_params_with_defaults(
                    tls_defaults,
                    tls.min_protocol_version,
                    tls.max_protocol_version,
                    &tls.cipher_suites,
                ),
                ..Default::default()
            };
            if let Some(first) = credentials.first() {
                common.tls_certificate_sds_secret_configs = credentials
                    .iter()
                    .map(|c| sds(&credential_resource(c)))
                    .collect();
                if mutual {
                    let ca = if tls.ca_cert_credential_name.is_empty() {
                        credential_ca_resource(first)
                    } else {
                        ca_resource(&tls.ca_cert_credential_name)
                    };
                    common.validation_context_type = Some(combined(pins, &ca));
                }
            } else {
                let files: Vec<(&str, &str)> = if tls.tls_certificates.is_empty() {
                    vec![(&tls.server_certificate, &tls.private_key)]
                } else {
                    tls.tls_certificates
                        .iter()
                        .map(|c| (c.server_certificate.as_str(), c.private_key.as_str()))
                        .collect()
                };
                common.tls_certificates = files
                    .into_iter()
                    .map(|(chain, key)| TlsCertificate {
                        certificate_chain: file(chain),
                        private_key: file(key),
                        ..Default::default()
                    })
                    .collect();
                if mutual {
                    common.validation_context_type = Some(
                        ValidationContextType::ValidationContext(CertificateValidationContext {
                            trusted_ca: file(&tls.ca_certificates),
                            crl: file(&tls.ca_crl),
                            ..pins
                        }),
                    );
                }
            }
            common
        }
        _ => return None,
    };
    let require_client = matches!(
        tls.mode,
        ServerTlsMode::MUTUAL | ServerTlsMode::ISTIO_MUTUAL
    );
    Some(downstream_socket(common, require_client))
}

/// The SDS resource of a `credentialName`: a Kubernetes Secret (`kubernetes://[ns/]name`), the
/// gateway's own workload certificate for `builtin://` (as istiod), or the name as given when it
/// already names its source (`kubernetes://`, `sds://`, ...).
fn credential_resource(name: &str) -> String {
    if name == BUILTIN {
        crate::xds::generate::shared::secret::WORKLOAD_CERT.to_string()
    } else if name.contains("://") {
        name.to_string()
    } else {
        format!("kubernetes://{name}")
    }
}

/// `credentialName: builtin://`: the gateway's own workload certificate and the mesh root.
const BUILTIN: &str = "builtin://";

/// The SDS resource of the CA bundle that comes with a `credentialName`.
fn credential_ca_resource(name: &str) -> String {
    if name == BUILTIN {
        crate::xds::generate::shared::secret::ROOT_CA.to_string()
    } else {
        format!("{}-cacert", credential_resource(name))
    }
}

/// The SDS resource of a `caCertCredentialName`: a Secret's CA bundle (`-cacert`, which SDS
/// answers from `<name>-cacert` or `<name>` itself), or a `configmap://` reference as given.
fn ca_resource(name: &str) -> String {
    if name.contains("://") {
        name.to_string()
    } else {
        format!("kubernetes://{name}-cacert")
    }
}

/// Client certificates checked against the CA of SDS resource `ca`, and by `pins`.
fn combined(pins: CertificateValidationContext, ca: &str) -> ValidationContextType {
    ValidationContextType::CombinedValidationContext(CombinedCertificateValidationContext {
        default_validation_context: Some(pins),
        validation_context_sds_secret_config: Some(sds(ca)),
        ..Default::default()
    })
}

/// The TCP proxy for an L4 route's destinations (split by weight when there are several).
fn l4_filter(
    ctx: &PushContext,
    scope: &ScopeView,
    vs: &GatewayVsEntry,
    route: &[RouteDestination],
    port: u32,
) -> Option<NetworkFilter> {
    let name = format!(
        "{}.{}",
        vs.config.metadata.name, vs.config.metadata.namespace
    );
    crate::xds::generate::sidecar::outbound::l4_route_filter(
        ctx,
        scope,
        &vs.config.metadata.namespace,
        route,
        port,
        &name,
    )
}

/// VirtualServices bound to this server's gateway, with the server hosts each may serve.
fn bound_virtual_services<'a>(
    ctx: &'a PushContext,
    scope: &ScopeView,
    server: &BoundServer,
) -> Vec<(&'a GatewayVsEntry, Vec<String>)> {
    let default_export_to = &ctx.mesh.default_virtual_service_export_to;
    ctx.routing
        .gateway_virtual_services
        .iter()
        .filter(|vs| vs.gateways.contains(&server.gateway))
        .filter(|vs| vs.visible_to(default_export_to, &scope.namespace))
        .filter_map(|vs| {
            let allowed = server.hosts_for(&vs.config.metadata.namespace);
            let domains: Vec<String> = vs
                .hosts
                .iter()
                .filter_map(|h| {
                    allowed.iter().find_map(|s| {
                        if host::subset_of(h, s) {
                            Some(h.clone())
                        } else if host::subset_of(s, h) {
                            Some(s.to_string())
                        } else {
                            None
                        }
                    })
                })
                .collect();
            (!domains.is_empty()).then_some((vs, domains))
        })
        .collect()
}

/// Whether a server of the gateways selecting this proxy is in AUTO_PASSTHROUGH mode (it then
/// gets the SNI-DNAT clusters, as istiod's `ContainsAutoPassthroughGateways`).
pub(super) fn has_auto_passthrough(ctx: &PushContext, scope: &ScopeView) -> bool {
    scope.proxy_type == crate::xds::proxy::ProxyType::Router
        && bound_servers(ctx, scope)
            .iter()
            .any(|s| s.tls_mode() == Some(ServerTlsMode::AUTO_PASSTHROUGH))
}

pub fn listeners(ctx: &PushContext, scope: &ScopeView) -> Vec<Typed> {
    let servers = bound_servers(ctx, scope);
    let mut by_port: BTreeMap<u32, Vec<&BoundServer>> = BTreeMap::new();
    for s in &servers {
        if s.port() != 0 {
            by_port.entry(s.port()).or_default().push(s);
        }
    }
    let security = security_filters(ctx, scope, false);
    let network_rbac = crate::xds::generate::security::authz::network_filters(ctx, scope);
    let mut out = Vec::new();
    for (port, servers) in by_port {
        let name = format!("0.0.0.0_{port}");
        let mut chains: Vec<Chain> = Vec::new();
        let mut inspect_tls = false;
        if servers.iter().any(|s| s.plain_http()) {
            chains.push(Chain {
                name: format!("http.{port}"),
                filters: vec![hcm_filter(
                    ctx,
                    scope,
                    Class::outbound(scope),
                    &format!("outbound_0.0.0.0_{port}"),
                    RouteSource::Rds(format!("http.{port}")),
                    security.clone(),
                )],
                ..Default::default()
            });
        }
        for s in &servers {
            if s.terminated() {
                inspect_tls = true;
                chains.extend(terminated_chain(
                    ctx,
                    scope,
                    s,
                    port,
                    &security,
                    &network_rbac,
                ));
            } else if matches!(s.tls_mode(), Some(ServerTlsMode::AUTO_PASSTHROUGH)) {
                inspect_tls = true;
                let hosts: Vec<&str> = s
                    .server
                    .hosts
                    .iter()
                    .map(|h| h.split_once('/').map_or(h.as_str(), |(_, host)| host))
                    .collect();
                chains.extend(self::auto_passthrough::filter_chains(ctx, scope, &hosts));
            } else if matches!(s.tls_mode(), Some(ServerTlsMode::PASSTHROUGH)) {
                inspect_tls = true;
                chains.extend(passthrough_chains(ctx, scope, s, port, &network_rbac));
            } else if s.protocol() == "TCP" {
                let cluster =
                    bound_virtual_services(ctx, scope, s)
                        .into_iter()
                        .find_map(|(vs, _)| {
                            vs.spec
                                .tcp
                                .iter()
                                .find(|t| {
                                    t.matches.is_empty()
                                        || t.matches.iter().any(|m| m.port == 0 || m.port == port)
                                })
                                .and_then(|t| l4_filter(ctx, scope, vs, &t.route, port))
                        });
                if let Some(proxy) = cluster {
                    chains.push(Chain {
                        name: format!("tcp.{port}"),
                        filters: behind_rbac(&network_rbac, proxy),
                        ..Default::default()
                    });
                }
            }
        }
        if chains.is_empty() {
            continue;
        }
        // Envoy refuses a whole listener (NACK) when two chains match the same connections:
        // the first server keeps the match, later duplicates are dropped and logged.
        let mut matches = std::collections::HashSet::new();
        chains.retain(|c| {
            let key = format!("{:?}", c.filter_chain_match);
            let fresh = matches.insert(key);
            if !fresh {
                tracing::warn!(listener = %name, chain = %c.name,
                    "two gateway servers on this port match the same connections; keeping the first");
            }
            fresh
        });
        // Plaintext next to TLS on one port: the plaintext chain takes only non-TLS connections.
        if inspect_tls {
            for c in chains
                .iter_mut()
                .filter(|c| c.transport_socket.is_none() && c.name.starts_with("http."))
            {
                c.filter_chain_match
                    .get_or_insert_with(Default::default)
                    .transport_protocol = "raw_buffer".into();
            }
        }
        out.push(Typed::new(
            &name,
            Class::outbound(scope),
            TypedListener::new(
                Listener {
                    name: name.clone(),
                    address: Some(crate::xds::generate::shared::cluster::socket(
                        "0.0.0.0", port,
                    )),
                    listener_filters: gateway_listener_filters(scope, inspect_tls),
                    ..Default::default()
                },
                chains,
            ),
        ));
    }
    out
}

/// A server that terminates TLS: HTTPS routed by its route configuration, or TLS then the first
/// TCP route bound to it (none: no chain).
fn terminated_chain(
    ctx: &PushContext,
    scope: &ScopeView,
    s: &BoundServer,
    port: u32,
    security: &[HttpFilter],
    network_rbac: &[NetworkFilter],
) -> Option<Chain> {
    let http = s.protocol() == "HTTPS";
    let filters = if http {
        vec![hcm_filter(
            ctx,
            scope,
            Class::outbound(scope),
            &format!("outbound_0.0.0.0_{port}"),
            RouteSource::Rds(s.https_route_name()),
            security.to_vec(),
        )]
    } else {
        // TLS terminated, then plain TCP to the first bound TCP route.
        let proxy = bound_virtual_services(ctx, scope, s)
            .into_iter()
            .find_map(|(vs, _)| {
                vs.spec
                    .tcp
                    .first()
                    .and_then(|t| l4_filter(ctx, scope, vs, &t.route, port))
            });
        match proxy {
            Some(f) => behind_rbac(network_rbac, f),
            None => return None,
        }
    };
    Some(Chain {
        name: if http {
            s.https_route_name()
        } else {
            format!("tls.{port}.{}", s.gateway)
        },
        filter_chain_match: Some(FilterChainMatch {
            server_names: s.sni(),
            ..Default::default()
        }),
        transport_socket: downstream_tls(s.server, http, &ctx.mesh.tls_defaults),
        filters,
        ..Default::default()
    })
}

/// A PASSTHROUGH server: a chain per bound TLS route, matched by the SNI hosts it names for
/// this port and gateway.
fn passthrough_chains(
    ctx: &PushContext,
    scope: &ScopeView,
    s: &BoundServer,
    port: u32,
    network_rbac: &[NetworkFilter],
) -> Vec<Chain> {
    let mut out = Vec::new();
    for (vs, _) in bound_virtual_services(ctx, scope, s) {
        for tls in &vs.spec.tls {
            let sni: Vec<String> = tls
                .matches
                .iter()
                .filter(|m| m.port == 0 || m.port == port)
                .filter(|m| m.gateways.is_empty() || m.gateways.contains(&s.gateway))
                .flat_map(|m| m.sni_hosts.iter().cloned())
                .collect();
            let Some(proxy) = l4_filter(ctx, scope, vs, &tls.route, port) else {
                continue;
            };
            if sni.is_empty() {
                continue;
            }
            out.push(Chain {
                name: format!("passthrough.{port}.{}", sni.join(",")),
                filter_chain_match: Some(FilterChainMatch {
                    server_names: sni,
                    ..Default::default()
                }),
                filters: behind_rbac(network_rbac, proxy),
                ..Default::default()
            });
        }
    }
    out
}

/// A gateway listener's filters: the PROXY protocol header stripped first when
/// `gatewayTopology.proxyProtocol` asks for it (the client's address is then the one the header
/// carries), then the TLS inspector when a chain matches on SNI.
fn gateway_listener_filters(scope: &ScopeView, inspect_tls: bool) -> Vec<ListenerFilter> {
    let proxy_protocol = scope.gateway_topology.proxy_protocol.is_some().then(|| ListenerFilter {
        name: "envoy.filters.listener.proxy_protocol".into(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(
            &envoy_types::pb::envoy::extensions::filters::listener::proxy_protocol::v3::ProxyProtocol::default(),
        ))),
        ..Default::default()
    });
    let tls = inspect_tls.then(|| ListenerFilter {
        name: "envoy.filters.listener.tls_inspector".into(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(
            &TlsInspector::default(),
        ))),
        ..Default::default()
    });
    proxy_protocol.into_iter().chain(tls).collect()
}

/// `http.<port>` (every plaintext HTTP server on the port) or one terminated server's
/// `https.<port>.<portName>.<gateway>.<namespace>`.
pub fn route_config(ctx: &PushContext, scope: &ScopeView, name: &str) -> Option<Typed> {
    let servers = bound_servers(ctx, scope);
    let chosen: Vec<&BoundServer> = if let Some(port) = name.strip_prefix("http.") {
        let port: u32 = port.parse().ok()?;
        servers
            .iter()
            .filter(|s| s.port() == port && s.plain_http())
            .collect()
    } else {
        servers
            .iter()
            .filter(|s| s.terminated() && s.https_route_name() == name)
            .collect()
    };
    let mut hosts: BTreeMap<String, VirtualHost> = BTreeMap::new();
    let mut seen_routes: BTreeSet<(String, String)> = BTreeSet::new();
    for s in &chosen {
        let port = s.port();
        let redirect = s
            .server
            .tls
            .as_ref()
            .is_some_and(|t| t.https_redirect && s.plain_http());
        for (vs, domains) in bound_virtual_services(ctx, scope, s) {
            let vs_ns = vs.config.metadata.namespace.as_str();
            let vs_key = format!("{vs_ns}/{}", vs.config.metadata.name);
            for domain in domains {
                if !seen_routes.insert((domain.clone(), vs_key.clone())) {
                    continue;
                }
                let vh = hosts.entry(domain.clone()).or_insert_with(|| VirtualHost {
                    name: format!("{domain}:{port}"),
                    domains: vec![domain.clone(), format!("{domain}:*")],
                    require_tls: if redirect {
                        virtual_host::TlsRequirementType::All as i32
                    } else {
                        0
                    },
                    ..Default::default()
                });
                vh.routes
                    .extend(gateway_routes(ctx, scope, vs, port, &s.gateway));
            }
        }
    }
    Some(Typed::new(
        name,
        Class::outbound(scope),
        RouteConfiguration {
            name: name.into(),
            virtual_hosts: hosts.into_values().collect(),
            validate_clusters: Some(BoolValue { value: false }),
            ..Default::default()
        },
    ))
}

/// The HTTP routes of a gateway-bound VirtualService that apply on this gateway and port.
fn gateway_routes(
    ctx: &PushContext,
    scope: &ScopeView,
    vs: &GatewayVsEntry,
    port: u32,
    gateway: &str,
) -> Vec<envoy_types::pb::envoy::config::route::v3::Route> {
    let vs_ns = vs.config.metadata.namespace.as_str();
    // Source conditions compare with the gateway's own pod, as istiod's sourceMatchHTTP does.
    let applies = |m: &HttpMatchRequest| {
        (m.port == 0 || m.port == port)
            && crate::config::mesh::labels_match(&m.source_labels, &scope.labels)
            && (m.source_namespace.is_empty() || m.source_namespace == scope.namespace)
            && (m.gateways.is_empty()
                || m.gateways
                    .iter()
                    .any(|g| crate::xds::context::gateway_key(g, vs_ns) == gateway))
    };
    let source = (&*vs.config, &*vs.origin);
    virtual_service_routes(ctx, scope, source, &vs.spec.http, port, false, &applies)
}
