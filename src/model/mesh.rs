//! The effective mesh settings: Rudder's defaults with the mesh ConfigMap (`istio` in the root
//! namespace) applied. Read by the registry, the generators and ambient alike.

use super::network::networks_from_snapshot;
pub use super::network::{ClusterLocalHosts, ClusterNetworks, NetworkGateway};
use crate::config::mesh::{
    ExtensionProvider, MESH_CONFIGMAP, MESH_KEY, MeshConfig, PathNormalization,
};
use crate::config::{ConfigKey, Kind, Spec};
use crate::store::Snapshot;
use std::collections::BTreeMap;

/// Reads the mesh config from the store, if the ConfigMap exists and parses. A malformed one is
/// reported by the caller and the defaults stay in force.
pub fn from_snapshot(
    snapshot: &Snapshot,
    root_namespace: &str,
) -> Result<Option<MeshConfig>, String> {
    let key = ConfigKey {
        kind: Kind::ConfigMap,
        namespace: root_namespace.into(),
        name: MESH_CONFIGMAP.into(),
        cluster: String::new(),
    };
    let Some(entry) = snapshot.get(&key) else {
        return Ok(None);
    };
    let Spec::ConfigMap(cm) = &entry.config.spec else {
        return Ok(None);
    };
    let Some(text) = cm.data.as_ref().and_then(|d| d.get(MESH_KEY)) else {
        return Ok(None);
    };
    MeshConfig::parse(text).map(Some)
}

/// Mesh-wide settings (MeshConfig fields that matter to generation).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MeshSettings {
    pub domain_suffix: String,
    pub root_namespace: String,
    /// `outboundTrafficPolicy: ALLOW_ANY` (Istio's default): unknown destinations pass through.
    pub outbound_allow_any: bool,
    /// MeshConfig `connectTimeout`: every cluster's, unless its DestinationRule sets one.
    pub connect_timeout: std::time::Duration,
    /// MeshConfig `tcpKeepalive`: on every upstream connection, a DestinationRule's fields winning.
    pub tcp_keepalive: Option<crate::config::networking::TcpKeepalive>,
    /// MeshConfig `h2UpgradePolicy: UPGRADE`: outbound HTTP clusters speak HTTP/2 upstream.
    pub h2_upgrade: bool,
    /// MeshConfig `tlsDefaults`: TLS clusters originate (SIMPLE, MUTUAL) and gateways terminate.
    pub tls_defaults: MeshTls,
    /// MeshConfig `meshMTLS`: the mesh's mTLS on sidecar inbound.
    pub mesh_mtls: MeshTls,
    /// MeshConfig `inboundTrafficPolicy.mode: LOCALHOST`: inbound clusters deliver to
    /// 127.0.0.1 (`::1`) instead of the address the client dialled.
    pub inbound_localhost: bool,
    pub trust_domain: String,
    /// This cluster's id (`--cluster-id`): part of every ambient workload uid.
    pub cluster_id: String,
    /// MeshConfig `extensionProviders` (AuthorizationPolicy CUSTOM).
    pub extension_providers: Vec<ExtensionProvider>,
    /// Namespaces whose services are part of the mesh (none: all).
    pub discovery_selectors: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    /// MeshConfig `pathNormalization` (istiod's default: BASE).
    pub path_normalization: PathNormalization,
    /// MeshConfig `defaultServiceExportTo`, `defaultVirtualServiceExportTo`,
    /// `defaultDestinationRuleExportTo`: visibility when an object sets none (empty: everywhere).
    pub default_service_export_to: Vec<String>,
    /// MeshConfig `trustDomainAliases`: principals of the trust domain match in these too.
    pub trust_domain_aliases: Vec<String>,
    pub default_virtual_service_export_to: Vec<String>,
    pub default_destination_rule_export_to: Vec<String>,
    /// MeshConfig `localityLbSetting` (istiod's default: enabled, no rules).
    pub locality_lb: Option<crate::config::networking::LocalityLoadBalancerSetting>,
    /// MeshConfig `defaultConfig.gatewayTopology`: for gateways whose node sends no ProxyConfig.
    pub default_gateway_topology: Option<crate::config::mesh::GatewayTopology>,
    /// MeshConfig `accessLogFile` and its format; none: no access log.
    pub access_log: Option<AccessLogSettings>,
    /// MeshConfig `enableTracing` (istiod's default: on) with `defaultConfig.tracing`: what
    /// connection managers get where no Telemetry configures tracing.
    pub legacy_tracing: Option<LegacyTracing>,
    /// MeshConfig's Kubernetes Ingress settings.
    pub ingress: IngressSettings,
    /// MeshConfig `defaultProviders.accessLogging`: the providers Telemetry access logging
    /// falls back to (and every proxy logs to, with no Telemetry at all).
    pub default_access_logging: Vec<String>,
    /// MeshConfig `defaultProviders.metrics`: the metrics providers of a proxy no Telemetry
    /// configures (the istiod chart's mesh config names `prometheus`).
    pub default_metrics: Vec<String>,
    /// Mesh `defaultConfig.proxyHeaders.metadataExchangeHeaders.mode: IN_MESH`.
    pub default_skip_mx_headers: bool,
    /// Sidecars and gateways reach ambient workloads over HBONE (istiod's PILOT_ENABLE_SENDING_HBONE,
    /// on by default once PILOT_ENABLE_AMBIENT is): `connect_originate`, and tunnelled endpoints.
    pub send_hbone: bool,
    /// The leader allocates addresses to ServiceEntries that declare none (istiod's
    /// PILOT_ENABLE_IP_AUTOALLOCATE, on by default): DNS-capturing proxies use them.
    pub ip_autoallocate: bool,
    /// MeshConfig `enableAutoMtls` (on by default): clusters without a DestinationRule TLS
    /// setting send mTLS to endpoints with sidecars.
    pub enable_auto_mtls: bool,
    /// istiod's PILOT_AUTO_ALLOW_WAYPOINT_POLICY: a workload behind a waypoint references an
    /// implicit ztunnel policy allowing the waypoint's identity.
    pub auto_allow_waypoint_policy: bool,
    /// Sidecars that ask for it (`ENABLE_HBONE` metadata) take HBONE on 15008 (istiod's
    /// PILOT_ENABLE_SIDECAR_LISTENING_HBONE, on by default once PILOT_ENABLE_AMBIENT is).
    pub sidecar_hbone_listen: bool,
    /// Ambient across clusters and networks (istiod's alpha AMBIENT_ENABLE_MULTI_NETWORK): remote
    /// clusters' workloads and global services for ztunnel, other networks through their
    /// east-west gateways.
    pub ambient_multi_network: bool,
    /// Under ambient multi-network, waypoints reach other networks' endpoints over double HBONE
    /// through their east-west gateways (istiod's AMBIENT_ENABLE_MULTI_NETWORK_WAYPOINT, on).
    pub ambient_multi_network_waypoint: bool,
    /// Under ambient multi-network, ingress gateways sending HBONE reach other networks over
    /// double HBONE too (istiod's AMBIENT_ENABLE_MULTI_NETWORK_INGRESS, off).
    pub ambient_multi_network_ingress: bool,
    /// MeshConfig `serviceScopeConfigs`: which services are global under ambient multi-network.
    pub service_scope: Vec<crate::config::mesh::ServiceScopeConfig>,
    /// `meshNetworks`: each network's gateways (none: one network, endpoints reached directly).
    pub network_gateways: BTreeMap<String, Vec<NetworkGateway>>,
    /// The network of each cluster's endpoints that name none themselves.
    pub cluster_networks: ClusterNetworks,
    /// Hosts whose endpoints a proxy gets only from its own cluster (`serviceSettings`).
    pub cluster_local: ClusterLocalHosts,
    /// Mesh `defaultConfig.tracing`: the tracing settings of a proxy that sends no ProxyConfig
    /// of its own (istiod's `ProxyConfigOrDefault`).
    pub default_proxy_tracing: Option<serde_json::Value>,
    /// MeshConfig `defaultProviders.tracing`: the provider Telemetry tracing falls back to (the
    /// first; and every proxy traces to it, with no Telemetry at all).
    pub default_tracing: Vec<String>,
}

/// MeshConfig `ingressClass`, `ingressService`, `ingressSelector`, `ingressControllerMode`, with
/// istiod's defaults (`istio`, `istio-ingressgateway`, none, `STRICT`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IngressSettings {
    pub class: String,
    pub service: String,
    pub selector: String,
    /// `DEFAULT` (an Ingress without a class too), `STRICT` (only the class), `OFF`.
    pub mode: String,
}

impl Default for IngressSettings {
    fn default() -> Self {
        IngressSettings {
            class: "istio".into(),
            service: "istio-ingressgateway".into(),
            selector: String::new(),
            mode: "STRICT".into(),
        }
    }
}

/// Tracing as MeshConfig's `enableTracing` asks for it: sampling and Istio's tags in each
/// connection manager, no provider (the proxy's bootstrap tracer reports).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LegacyTracing {
    /// `defaultConfig.tracing.sampling` (percent), else istiod's 1%.
    pub sampling: f64,
    /// `defaultConfig.tracing.enableIstioTags` (default true).
    pub istio_tags: bool,
}

impl LegacyTracing {
    fn from_default_config(config: Option<&serde_json::Value>) -> LegacyTracing {
        let tracing = config.and_then(|c| c.get("tracing"));
        let sampling = tracing
            .and_then(|t| t.get("sampling"))
            .and_then(serde_json::Value::as_f64)
            .filter(|s| *s != 0.0)
            .map_or(1.0, |s| if s > 100.0 { 1.0 } else { s });
        LegacyTracing {
            sampling,
            istio_tags: tracing
                .and_then(|t| t.get("enableIstioTags"))
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(true),
        }
    }
}

/// MeshConfig's Envoy file access log.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct AccessLogSettings {
    pub path: String,
    /// `accessLogEncoding: JSON`.
    pub json: bool,
    /// `accessLogFormat` (empty: Istio's default format for the encoding).
    pub format: String,
    /// Also on listeners, for connections that match no filter chain (unless
    /// `disableEnvoyListenerLog`).
    pub listener: bool,
}

impl MeshSettings {
    /// These settings with the mesh ConfigMap (`istio` in the root namespace) applied. A malformed
    /// mesh config leaves the settings as they are and returns the error to report.
    pub fn with_mesh_config(&self, snapshot: &Snapshot) -> (MeshSettings, Option<String>) {
        let mut out = self.clone();
        // A malformed meshNetworks is a malformed mesh config: the caller keeps the last good
        // settings, networks included.
        let networks_error = match networks_from_snapshot(
            snapshot,
            &self.root_namespace,
            &self.domain_suffix,
            &self.cluster_id,
        ) {
            Ok(networks) => {
                out.network_gateways = networks.gateways;
                out.cluster_networks = networks.clusters;
                None
            }
            Err(e) => Some(e),
        };
        let (out, error) = self.apply_mesh_config(out, snapshot);
        (out, error.or(networks_error))
    }

    fn apply_mesh_config(
        &self,
        mut out: MeshSettings,
        snapshot: &Snapshot,
    ) -> (MeshSettings, Option<String>) {
        match from_snapshot(snapshot, &self.root_namespace) {
            Ok(Some(mc)) => {
                if let Some(td) = mc.trust_domain.filter(|t| !t.is_empty()) {
                    out.trust_domain = td;
                }
                out.discovery_selectors = mc.discovery_selectors;
                out.enable_auto_mtls = mc.enable_auto_mtls != Some(false);
                out.service_scope = mc.service_scope_configs;
                out.extension_providers = mc.extension_providers;
                out.path_normalization = mc
                    .path_normalization
                    .map(|p| p.normalization)
                    .unwrap_or_default();
                out.default_service_export_to = mc.default_service_export_to;
                out.trust_domain_aliases = mc.trust_domain_aliases;
                out.default_virtual_service_export_to = mc.default_virtual_service_export_to;
                out.default_destination_rule_export_to = mc.default_destination_rule_export_to;
                out.default_gateway_topology = mc
                    .default_config
                    .as_ref()
                    .and_then(crate::config::mesh::GatewayTopology::of_proxy_config);
                out.legacy_tracing = (mc.enable_tracing != Some(false))
                    .then(|| LegacyTracing::from_default_config(mc.default_config.as_ref()));
                out.access_log =
                    mc.access_log_file
                        .filter(|f| !f.is_empty())
                        .map(|path| AccessLogSettings {
                            path,
                            json: mc
                                .access_log_encoding
                                .is_some_and(|e| e.eq_ignore_ascii_case("JSON")),
                            format: mc.access_log_format.unwrap_or_default(),
                            listener: mc.disable_envoy_listener_log != Some(true),
                        });
                out.default_access_logging = mc
                    .default_providers
                    .as_ref()
                    .map(|d| d.access_logging.clone())
                    .unwrap_or_default();
                out.default_tracing = mc
                    .default_providers
                    .as_ref()
                    .map(|d| d.tracing.clone())
                    .unwrap_or_default();
                out.default_proxy_tracing = mc
                    .default_config
                    .as_ref()
                    .and_then(|c| c.get("tracing"))
                    .cloned();
                out.default_skip_mx_headers = mc
                    .default_config
                    .as_ref()
                    .is_some_and(crate::config::mesh::skips_mx_headers);
                out.default_metrics = mc
                    .default_providers
                    .as_ref()
                    .map(|d| d.metrics.clone())
                    .unwrap_or_default();
                let default = IngressSettings::default();
                out.ingress = IngressSettings {
                    class: mc.ingress_class.unwrap_or(default.class),
                    service: mc.ingress_service.unwrap_or(default.service),
                    selector: mc.ingress_selector.unwrap_or(default.selector),
                    mode: match mc.ingress_controller_mode {
                        Some(serde_json::Value::String(m)) => m,
                        Some(serde_json::Value::Bool(false)) => "OFF".into(),
                        _ => default.mode,
                    },
                };
                if let Some(l) = mc.locality_lb_setting {
                    out.locality_lb = Some(l);
                }
                if let Some(timeout) = mc.connect_timeout {
                    out.connect_timeout = timeout.as_std();
                }
                out.tcp_keepalive = mc.tcp_keepalive;
                out.h2_upgrade = mc.h2_upgrade_policy.as_deref() == Some("UPGRADE");
                out.tls_defaults = MeshTls::of(mc.tls_defaults);
                out.inbound_localhost = mc
                    .inbound_traffic_policy
                    .and_then(|p| p.mode)
                    .is_some_and(|m| m == "LOCALHOST");
                // istiod refuses curves here; the version and ciphers are what it reads.
                out.mesh_mtls = MeshTls {
                    ecdh_curves: Vec::new(),
                    ..MeshTls::of(mc.mesh_mtls)
                };
                if let Some(mode) = mc.outbound_traffic_policy.and_then(|p| p.mode) {
                    out.outbound_allow_any = mode != "REGISTRY_ONLY";
                }
                out.cluster_local = ClusterLocalHosts::new(
                    &mc.service_settings,
                    &out.domain_suffix,
                    &discovery_host(mc.default_config.as_ref(), &self.root_namespace),
                );
                (out, None)
            }
            Ok(None) => {
                out.cluster_local = ClusterLocalHosts::new(
                    &[],
                    &out.domain_suffix,
                    &discovery_host(None, &self.root_namespace),
                );
                (out, None)
            }
            Err(e) => (out, Some(e)),
        }
    }
}

/// The host of the mesh's `defaultConfig.discoveryAddress` (istiod's default:
/// `istiod.<root namespace>.svc:15012`).
fn discovery_host(default_config: Option<&serde_json::Value>, root_namespace: &str) -> String {
    let address = default_config
        .and_then(|c| c.get("discoveryAddress"))
        .and_then(|a| a.as_str())
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| format!("istiod.{root_namespace}.svc:15012"));
    match address.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host.to_string(),
        _ => address,
    }
}

/// A MeshConfig `TLSConfig`, with what Envoy would reject left out (warned where the mesh
/// config enters): the minimum version is TLS 1.3 or 1.2 (`TLS_AUTO`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MeshTls {
    pub min_tls13: bool,
    pub ecdh_curves: Vec<String>,
    pub cipher_suites: Vec<String>,
}

impl MeshTls {
    fn of(c: Option<crate::config::mesh::TlsConfig>) -> MeshTls {
        let Some(c) = c else {
            return MeshTls::default();
        };
        let mut curves: Vec<String> = Vec::new();
        for curve in c.ecdh_curves {
            if crate::config::mesh::ECDH_CURVES.contains(&curve.as_str())
                && !curves.contains(&curve)
            {
                curves.push(curve);
            }
        }
        MeshTls {
            min_tls13: c.min_protocol_version.as_deref() == Some("TLSV1_3"),
            ecdh_curves: curves,
            cipher_suites: crate::config::networking::envoy_cipher_suites(&c.cipher_suites),
        }
    }
}

impl Default for MeshSettings {
    fn default() -> Self {
        MeshSettings {
            domain_suffix: "cluster.local".into(),
            root_namespace: "istio-system".into(),
            outbound_allow_any: true,
            connect_timeout: std::time::Duration::from_secs(10),
            tcp_keepalive: None,
            h2_upgrade: false,
            tls_defaults: MeshTls::default(),
            mesh_mtls: MeshTls::default(),
            inbound_localhost: false,
            trust_domain: "cluster.local".into(),
            cluster_id: "Kubernetes".into(),
            extension_providers: Vec::new(),
            discovery_selectors: Vec::new(),
            path_normalization: PathNormalization::DEFAULT,
            default_service_export_to: Vec::new(),
            trust_domain_aliases: Vec::new(),
            default_virtual_service_export_to: Vec::new(),
            default_destination_rule_export_to: Vec::new(),
            locality_lb: Some(crate::config::networking::LocalityLoadBalancerSetting {
                enabled: Some(true),
                ..Default::default()
            }),
            default_gateway_topology: None,
            access_log: None,
            legacy_tracing: Some(LegacyTracing::from_default_config(None)),
            ingress: IngressSettings::default(),
            default_access_logging: Vec::new(),
            default_metrics: Vec::new(),
            default_skip_mx_headers: false,
            send_hbone: false,
            ip_autoallocate: true,
            enable_auto_mtls: true,
            auto_allow_waypoint_policy: false,
            sidecar_hbone_listen: false,
            ambient_multi_network: false,
            ambient_multi_network_waypoint: true,
            ambient_multi_network_ingress: false,
            service_scope: Vec::new(),
            network_gateways: BTreeMap::new(),
            cluster_networks: ClusterNetworks::default(),
            cluster_local: ClusterLocalHosts::new(&[], "cluster.local", "istiod.istio-system.svc"),
            default_proxy_tracing: None,
            default_tracing: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings a mesh ConfigMap holding `mesh` (YAML) gives.
    fn settings(mesh: &str) -> serde_json::Value {
        let indented: String = mesh.lines().map(|l| format!("    {l}\n")).collect();
        let yaml = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: istio, namespace: istio-system}}\ndata:\n  mesh: |\n{indented}"
        );
        let snapshot = crate::testing::store(&yaml).snapshot();
        let (s, error) = MeshSettings::default().with_mesh_config(&snapshot);
        assert_eq!(error, None, "{mesh}");
        serde_json::to_value(s).unwrap()
    }

    /// Every MeshConfig field is either read (setting it changes what the generators are given) or
    /// listed as not honoured (setting it is warned about): none is accepted and dropped.
    #[test]
    fn every_mesh_config_field_is_read_or_warned() {
        // A value for each field Rudder reads, and what else it needs to be read.
        let read: &[(&str, &str, &str)] = &[
            ("trustDomain", "example.org", ""),
            ("discoverySelectors", "[{matchLabels: {mesh: enabled}}]", ""),
            (
                "extensionProviders",
                "[{name: authz, envoyExtAuthzHttp: {service: authz.example.com, port: 80}}]",
                "",
            ),
            ("pathNormalization", "{normalization: NONE}", ""),
            ("outboundTrafficPolicy", "{mode: REGISTRY_ONLY}", ""),
            (
                "defaultConfig",
                "{gatewayTopology: {numTrustedProxies: 2}}",
                "",
            ),
            ("localityLbSetting", "{enabled: false}", ""),
            (
                "serviceSettings",
                "[{settings: {clusterLocal: true}, hosts: [a.example.com]}]",
                "",
            ),
            ("defaultServiceExportTo", "[.]", ""),
            ("defaultVirtualServiceExportTo", "[.]", ""),
            ("defaultDestinationRuleExportTo", "[.]", ""),
            ("trustDomainAliases", "[old.example.org]", ""),
            ("accessLogFile", "/dev/stdout", ""),
            ("accessLogEncoding", "JSON", "accessLogFile: /dev/stdout"),
            (
                "accessLogFormat",
                "'%PROTOCOL%'",
                "accessLogFile: /dev/stdout",
            ),
            (
                "disableEnvoyListenerLog",
                "true",
                "accessLogFile: /dev/stdout",
            ),
            ("enableTracing", "false", ""),
            ("enableAutoMtls", "false", ""),
            ("ingressClass", "nginx", ""),
            ("ingressService", "edge", ""),
            ("ingressSelector", "edge", ""),
            ("ingressControllerMode", "OFF", ""),
            ("defaultProviders", "{accessLogging: [envoy]}", ""),
            ("connectTimeout", "3s", ""),
            ("tcpKeepalive", "{time: 30s}", ""),
            ("h2UpgradePolicy", "UPGRADE", ""),
            ("tlsDefaults", "{ecdhCurves: [P-256]}", ""),
            ("meshMTLS", "{minProtocolVersion: TLSV1_3}", ""),
            ("inboundTrafficPolicy", "{mode: LOCALHOST}", ""),
        ];
        // Read only at the value Rudder follows; any other value is warned about.
        let warned_otherwise: &[(&str, &str)] = &[("protocolDetectionTimeout", "5s")];
        for (field, value, base) in read {
            assert!(
                crate::config::mesh::HONOURED_MESH_FIELDS.contains(field),
                "{field} is read but not listed as honoured"
            );
            let with = if base.is_empty() {
                format!("{field}: {value}")
            } else {
                format!("{base}\n{field}: {value}")
            };
            assert_ne!(settings(&with), settings(base), "{field} is not read");
        }
        for field in crate::config::mesh::MESH_FIELDS {
            if read.iter().any(|(f, _, _)| f == field) {
                continue;
            }
            let value = warned_otherwise
                .iter()
                .find(|(f, _)| f == field)
                .map_or("true", |(_, v)| v);
            let warned = crate::config::mesh::unhonoured_mesh_fields(&format!("{field}: {value}"));
            assert!(
                warned
                    .iter()
                    .any(|(f, _)| f == &format!("data.mesh.{field}")),
                "{field} is neither read nor warned about: {warned:?}"
            );
        }
    }
}
