//! What a stream publishes about itself for `/debug`, and the read-only handle the admin server
//! reads the xDS server through: connections, push history, and a proxy's current config.

pub use super::watches::{ConnectionStatus, TypeStatus, WatchMap, Watches};
use super::xds_server::XdsServer;
use crate::xds::context::PushContext;
use crate::xds::generate::ztunnel;
use crate::xds::proxy::ProxyType;
use crate::xds::push::request::PushRecord;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// istiod's per-proxy endpoint gauges, computed when scraped from the connected proxies and the
/// registry being served: `pilot_no_ip` (proxies whose address no service's endpoints list) and
/// `pilot_endpoint_not_ready` (proxies listed only as not ready). ztunnel, which serves a node
/// rather than a pod, is not counted.
pub struct ProxyEndpointGauges {
    pub status: Arc<std::sync::OnceLock<XdsStatus>>,
}

impl std::fmt::Debug for ProxyEndpointGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProxyEndpointGauges")
    }
}

impl ProxyEndpointGauges {
    /// (proxies no endpoint lists, proxies whose endpoints are not ready), once per proxy.
    fn count(status: &XdsStatus) -> (i64, i64) {
        let registry = status.context().registry.clone();
        let mut seen = BTreeSet::new();
        let (mut no_ip, mut not_ready) = (0, 0);
        for connection in status.connections() {
            let proxy = &connection.proxy;
            if proxy.proxy_type == ProxyType::Ztunnel
                || proxy.is_debug_client()
                || !seen.insert(proxy.id.clone())
            {
                continue;
            }
            match registry.endpoint_readiness(&proxy.ip) {
                None => no_ip += 1,
                Some(false) => not_ready += 1,
                Some(true) => {}
            }
        }
        (no_ip, not_ready)
    }
}

impl prometheus_client::collector::Collector for ProxyEndpointGauges {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::gauge::Gauge;
        // Before the xDS server starts no proxy is connected.
        let (no_ip, not_ready) = self.status.get().map_or((0, 0), Self::count);
        for (name, help, value) in [
            (
                "pilot_no_ip",
                "Connected proxies whose address is in no service's endpoints",
                no_ip,
            ),
            (
                "pilot_endpoint_not_ready",
                "Connected proxies whose endpoints are not ready",
                not_ready,
            ),
        ] {
            let gauge = Gauge::<i64>::default();
            gauge.set(value);
            let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

/// Read-only access to the xDS server for the admin server.
#[derive(Clone)]
pub struct XdsStatus {
    pub(super) server: Arc<XdsServer>,
}

impl XdsStatus {
    pub(super) fn new(server: Arc<XdsServer>) -> XdsStatus {
        XdsStatus { server }
    }

    /// The push context proxies are being served from.
    pub fn context(&self) -> Arc<PushContext> {
        self.server.context()
    }

    /// Connected streams, by connection id.
    pub fn connections(&self) -> Vec<ConnectionStatus> {
        self.server.connections.statuses()
    }

    /// The most recent pushes, oldest first.
    pub fn history(&self) -> Vec<PushRecord> {
        self.server.history()
    }

    /// The whole ambient view, in ztunnel's `/config_dump` shape.
    pub fn ambient_dump(&self) -> serde_json::Value {
        ztunnel::dump::config_dump(&ztunnel::index(&self.context()))
    }

    /// The xDS cache of the current push, as istiod's `/debug/cachez` shows its cache: each
    /// type URL's resource names or, with `sizes`, the bytes by type URL and in total (in its
    /// human units).
    pub fn cachez(&self, sizes: bool) -> serde_json::Value {
        let entries = self.context().cache_entries();
        if sizes {
            let mut by_type: BTreeMap<&str, usize> = BTreeMap::new();
            let mut total = 0;
            for (type_url, r) in &entries {
                *by_type.entry(type_url.url()).or_default() += r.any.value.len();
                total += r.any.value.len();
            }
            let mut out: serde_json::Map<String, serde_json::Value> = by_type
                .into_iter()
                .map(|(t, n)| (t.to_string(), byte_count(n).into()))
                .collect();
            out.insert("total".into(), byte_count(total).into());
            return serde_json::Value::Object(out);
        }
        let mut names: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (type_url, r) in &entries {
            names.entry(type_url.url()).or_default().push(&r.name);
        }
        for list in names.values_mut() {
            list.sort_unstable();
        }
        serde_json::to_value(names).unwrap_or_default()
    }

    /// Empties the current push's xDS cache (`/debug/cachez?clear=true`).
    pub fn clear_cache(&self) {
        self.context().clear_cache();
    }

    /// The network gateways, for `/debug/networkz`.
    pub fn network_gateways(&self) -> serde_json::Value {
        ztunnel::dump::network_gateways(&self.context())
    }
}

/// Bytes in istiod's `ByteCount` form: `512B`, `1.5kB`, `2.0MB` (powers of 1000).
fn byte_count(bytes: usize) -> String {
    const UNIT: usize = 1000;
    if bytes < UNIT {
        return format!("{bytes}B");
    }
    let (mut div, mut exp) = (UNIT, 0);
    let mut n = bytes / UNIT;
    while n >= UNIT {
        div *= UNIT;
        exp += 1;
        n /= UNIT;
    }
    format!(
        "{:.1}{}B",
        bytes as f64 / div as f64,
        ['k', 'M', 'G', 'T', 'P', 'E'][exp]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_read_as_istiods() {
        assert_eq!(byte_count(999), "999B");
        assert_eq!(byte_count(1500), "1.5kB");
        assert_eq!(byte_count(2_000_000), "2.0MB");
    }
}
