//! istiod's environment variables: those Rudder reads, and a warning naming each one it does not.

/// istiod's environment variables Rudder reads (through the flags above); docs/install.md has the
/// table.
const ISTIOD_ENV_READ: &[&str] = &[
    "PILOT_DEBOUNCE_AFTER",
    "PILOT_DEBOUNCE_MAX",
    "PILOT_ENABLE_EDS_DEBOUNCE",
    "PILOT_PUSH_THROTTLE",
    "PILOT_MAX_REQUESTS_PER_SECOND",
    "ISTIO_GPRC_MAXRECVMSGSIZE",
    "ISTIO_GPRC_MAXSTREAMS",
    "CA_TRUSTED_NODE_ACCOUNTS",
    "CITADEL_SELF_SIGNED_CA_CERT_TTL",
    "CITADEL_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL",
    "CITADEL_SELF_SIGNED_CA_CERT_GRACE_PERIOD_PERCENTILE",
    "PILOT_ENABLE_ANALYSIS",
    "PILOT_ANALYSIS_INTERVAL",
    "PILOT_ENABLE_GATEWAY_API_STATUS",
    "PILOT_ENABLE_GATEWAY_API_GATEWAYCLASS_CONTROLLER",
    "PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER",
    "PILOT_ENABLE_IP_AUTOALLOCATE",
    "PILOT_ENABLE_WORKLOAD_ENTRY_AUTOREGISTRATION",
    "PILOT_WORKLOAD_ENTRY_GRACE_PERIOD",
    "PILOT_REMOTE_CLUSTER_TIMEOUT",
    "PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS",
    "PILOT_MULTICLUSTER_KUBECONFIG_PATH",
    "PILOT_ENABLE_SENDING_HBONE",
    "PILOT_ENABLE_SIDECAR_LISTENING_HBONE",
    "PILOT_AUTO_ALLOW_WAYPOINT_POLICY",
    "AMBIENT_ENABLE_MULTI_NETWORK",
    "AMBIENT_ENABLE_MULTI_NETWORK_WAYPOINT",
    "AMBIENT_ENABLE_MULTI_NETWORK_INGRESS",
];

/// istiod variables without the usual prefixes that Rudder does not read: per-proxy signers of an
/// external CA (`CERT_SIGNER_DOMAIN`, with MeshConfig `caCertificates[].certSigners`).
const ISTIOD_ENV_OTHER: &[&str] = &[
    "CERT_SIGNER_DOMAIN",
    // Multi-cluster Services (MCS): not watched (docs/multicluster.md).
    "ENABLE_MCS_AUTO_EXPORT",
    "ENABLE_MCS_SERVICE_DISCOVERY",
    "ENABLE_MCS_HOST",
    "ENABLE_MCS_CLUSTER_LOCAL",
    "MCS_API_GROUP",
    "MCS_API_VERSION",
    "LOCAL_CLUSTER_SECRET_WATCHER",
    // Ambient switches (istiod's registerAmbient), read at the values in ISTIOD_ENV_ALWAYS.
    "AMBIENT_ENABLE_BAGGAGE",
    "AMBIENT_ENABLE_DRY_RUN_AUTHORIZATION_POLICY",
    "ENABLE_INGRESS_WAYPOINT_ROUTING",
];

/// istiod feature switches whose value here is what Rudder always does: set that way they change
/// nothing, so they are not warned about (`profile: ambient` sets the first).
const ISTIOD_ENV_ALWAYS: &[(&str, &str)] = &[
    ("PILOT_ENABLE_AMBIENT", "true"),
    ("PILOT_ENABLE_AMBIENT_WAYPOINTS", "true"),
    // istiod's defaults, which are what Rudder does: no baggage-based peer metadata, ingress
    // gateways honouring `istio.io/ingress-use-waypoint`.
    ("AMBIENT_ENABLE_BAGGAGE", "false"),
    ("AMBIENT_ENABLE_DRY_RUN_AUTHORIZATION_POLICY", "false"),
    ("ENABLE_INGRESS_WAYPOINT_ROUTING", "true"),
    // istiod's chart sets these by default: istiod's own CA serves its certificate, as Rudder's
    // does, and 1% of requests are traced, Rudder's default.
    ("PILOT_CERT_PROVIDER", "istiod"),
    ("PILOT_TRACE_SAMPLING", "1"),
    ("PILOT_TRACE_SAMPLING", "1.0"),
];

/// The `PILOT_*` (and `ISTIO_GPRC_*`, `CITADEL_*`) variables set in `vars` that Rudder does not
/// read: an istiod Deployment's settings that would otherwise be ignored without a word.
pub(crate) fn unread_istiod_env(vars: impl Iterator<Item = (String, String)>) -> Vec<String> {
    let mut unread: Vec<String> = vars
        .filter(|(k, v)| {
            !ISTIOD_ENV_ALWAYS
                .iter()
                .any(|(name, always)| k == name && v.eq_ignore_ascii_case(always))
        })
        .map(|(k, _)| k)
        .filter(|k| {
            ["PILOT_", "ISTIO_GPRC_", "CITADEL_"]
                .iter()
                .any(|p| k.starts_with(p))
                || ISTIOD_ENV_OTHER.contains(&k.as_str())
        })
        .filter(|k| !ISTIOD_ENV_READ.contains(&k.as_str()))
        .collect();
    unread.sort();
    unread
}

#[cfg(test)]
mod tests {
    use super::unread_istiod_env;

    #[test]
    fn istiod_variables_rudder_does_not_read_are_named() {
        let vars = [
            ("PILOT_DEBOUNCE_AFTER", "100ms"),
            ("PILOT_ENABLE_STATUS", "true"),
            ("CITADEL_ENABLE_JITTER_FOR_ROOT_CERT_ROTATOR", "true"),
            ("CERT_SIGNER_DOMAIN", "example.com"),
            ("ENABLE_MCS_SERVICE_DISCOVERY", "true"),
            ("PILOT_MULTICLUSTER_KUBECONFIG_PATH", "/etc/remote"),
            ("AMBIENT_ENABLE_MULTI_NETWORK", "true"),
            ("AMBIENT_ENABLE_BAGGAGE", "true"),
            ("ENABLE_INGRESS_WAYPOINT_ROUTING", "true"),
            ("HOME", "/root"),
            ("PILOT_ENABLE_AMBIENT", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(
            unread_istiod_env(vars),
            [
                "AMBIENT_ENABLE_BAGGAGE",
                "CERT_SIGNER_DOMAIN",
                "CITADEL_ENABLE_JITTER_FOR_ROOT_CERT_ROTATOR",
                "ENABLE_MCS_SERVICE_DISCOVERY",
                "PILOT_ENABLE_STATUS"
            ]
        );
        let off = std::iter::once(("PILOT_ENABLE_AMBIENT".to_string(), "false".to_string()));
        assert_eq!(unread_istiod_env(off), ["PILOT_ENABLE_AMBIENT"]);
        // istiod's chart defaults are what Rudder does; other values are not read.
        let chart = [
            ("PILOT_CERT_PROVIDER", "istiod"),
            ("PILOT_TRACE_SAMPLING", "1"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        assert!(unread_istiod_env(chart.into_iter()).is_empty());
        let other = [
            ("PILOT_CERT_PROVIDER", "kubernetes"),
            ("PILOT_TRACE_SAMPLING", "10"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(
            unread_istiod_env(other.into_iter()),
            ["PILOT_CERT_PROVIDER", "PILOT_TRACE_SAMPLING"]
        );
    }
}
