//! ServiceEntry IP auto-allocation, as istiod 1.30's controller does it
//! (`pilot/pkg/controllers/ipallocate`, `PILOT_ENABLE_IP_AUTOALLOCATE`, on by default): every host
//! of a ServiceEntry without addresses of its own gets one IPv4 address from 240.240.0.0/16 and
//! one IPv6 address from 2001:2::/48, written to `status.addresses` (`host`, `value`). Addresses
//! once written are kept; two ServiceEntries holding the same address leave it to the older, the
//! other is given new ones; a ServiceEntry that no longer qualifies has them removed. The
//! registry serves them as the service's VIPs. Pure over a snapshot.

use super::producer::Input;
use crate::config::{Config, ConfigKey, Kind, Spec};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// istiod's default prefixes (`PILOT_IP_AUTOALLOCATE_IPV4_PREFIX`, `..._IPV6_PREFIX`).
const V4_BASE: Ipv4Addr = Ipv4Addr::new(240, 240, 0, 0);
const V4_BITS: u32 = 16;
const V6_BASE: Ipv6Addr = Ipv6Addr::new(0x2001, 0x2, 0, 0, 0, 0, 0, 0);
const V6_BITS: u32 = 48;

pub struct IpAllocator;

impl super::producer::FieldsProducer for IpAllocator {
    fn name(&self) -> &'static str {
        "ip-autoallocate"
    }
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::ServiceEntry]
    }
    fn enabled(&self, settings: &super::producer::Settings) -> bool {
        settings.ip_autoallocate
    }
    fn statuses(&self, input: &Input) -> BTreeMap<ConfigKey, Value> {
        let mut wanted = allocate(input.snapshot.list(Kind::ServiceEntry).map(|e| &*e.config));
        // What the API server already holds (the store keeps `status.addresses`) is not
        // written again: a leader's first round reads nothing it need not.
        wanted.retain(|key, want| {
            let held = input.snapshot.get(key).and_then(|e| {
                e.config
                    .status
                    .as_ref()
                    .and_then(|s| s.get("addresses"))
                    .cloned()
            });
            match held {
                Some(held) => held != want["addresses"],
                None => !want["addresses"].is_null(),
            }
        });
        wanted
    }
    fn merge(&self, _kind: Kind, current: &Value, wanted: &Value, _now: &str) -> Value {
        let mut out = if current.is_object() {
            current.clone()
        } else {
            json!({})
        };
        match wanted.get("addresses").filter(|a| !a.is_null()) {
            Some(a) => out["addresses"] = a.clone(),
            None => {
                if let Some(o) = out.as_object_mut() {
                    o.remove("addresses");
                }
            }
        }
        out
    }
}

/// The addresses already written, per host.
fn written(config: &Config) -> BTreeMap<String, Vec<IpAddr>> {
    let mut out: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
    for a in config
        .status
        .as_ref()
        .and_then(|s| s.get("addresses"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(host), Some(Ok(ip))) = (
            a["host"].as_str(),
            a["value"].as_str().map(str::parse::<IpAddr>),
        ) {
            out.entry(host.to_string()).or_default().push(ip);
        }
    }
    out
}

/// The lowest address of the prefix not in `used` (the first usable: the prefix's own address
/// is never given), marked used.
fn next(used: &mut BTreeSet<IpAddr>, v6: bool) -> Option<IpAddr> {
    let (base, size): (u128, u128) = if v6 {
        (u128::from(V6_BASE), 1u128 << (128 - V6_BITS))
    } else {
        (u128::from(u32::from(V4_BASE)), 1u128 << (32 - V4_BITS))
    };
    (1..size).find_map(|offset| {
        let ip = if v6 {
            IpAddr::V6(Ipv6Addr::from(base + offset))
        } else {
            IpAddr::V4(Ipv4Addr::from((base + offset) as u32))
        };
        used.insert(ip).then_some(ip)
    })
}

/// The `status.addresses` every ServiceEntry should carry: `{"addresses": [...]}` for those that
/// qualify, `{"addresses": null}` for those that carry addresses and no longer qualify. The
/// oldest keeps a contested address.
pub fn allocate<'a>(entries: impl Iterator<Item = &'a Config>) -> BTreeMap<ConfigKey, Value> {
    let mut all: Vec<&Config> = entries.collect();
    all.sort_by(|a, b| a.age_key().cmp(&b.age_key()));
    let mut used: BTreeSet<IpAddr> = BTreeSet::new();
    // First pass: what is written stays with its oldest holder.
    let mut kept: BTreeMap<ConfigKey, BTreeMap<String, Vec<IpAddr>>> = BTreeMap::new();
    for config in &all {
        let Spec::ServiceEntry(se) = &config.spec else {
            continue;
        };
        // Addresses users gave are never handed out.
        used.extend(se.addresses.iter().filter_map(|a| a.parse::<IpAddr>().ok()));
        if !se.auto_allocates(&config.metadata.labels) {
            continue;
        }
        let hosts: BTreeSet<&String> = se.allocated_hosts().collect();
        let mut mine = BTreeMap::new();
        for (host, ips) in written(config) {
            if !hosts.contains(&host) {
                continue;
            }
            let free: Vec<IpAddr> = ips.into_iter().filter(|ip| used.insert(*ip)).collect();
            // Both families or none: a host missing one is given a fresh pair.
            if free.iter().any(IpAddr::is_ipv4) && free.iter().any(IpAddr::is_ipv6) {
                mine.insert(host, free);
            }
        }
        kept.insert(config.key(), mine);
    }
    let mut out = BTreeMap::new();
    for config in all {
        let Spec::ServiceEntry(se) = &config.spec else {
            continue;
        };
        if !se.auto_allocates(&config.metadata.labels) {
            if !written(config).is_empty() {
                out.insert(config.key(), json!({ "addresses": null }));
            }
            continue;
        }
        let mine = kept.remove(&config.key()).unwrap_or_default();
        let mut addresses = Vec::new();
        let mut seen = BTreeSet::new();
        for host in se.allocated_hosts() {
            if !seen.insert(host) {
                continue;
            }
            let ips = match mine.get(host) {
                Some(ips) => ips.clone(),
                None => [next(&mut used, false), next(&mut used, true)]
                    .into_iter()
                    .flatten()
                    .collect(),
            };
            addresses.extend(
                ips.iter()
                    .map(|ip| json!({"value": ip.to_string(), "host": host})),
            );
        }
        out.insert(config.key(), json!({ "addresses": addresses }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(yaml: &str) -> Vec<Config> {
        crate::config::parse_yaml(yaml, "default").configs
    }

    fn addresses(out: &BTreeMap<ConfigKey, Value>, name: &str) -> Vec<(String, String)> {
        let (_, v) = out
            .iter()
            .find(|(k, _)| k.name == name)
            .unwrap_or_else(|| panic!("no status for {name}"));
        v["addresses"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| {
                        (
                            x["host"].as_str().unwrap().to_string(),
                            x["value"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    const MESH: &str = "
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a, namespace: ns, creationTimestamp: '2024-01-01T00:00:00Z'}
spec: {hosts: [a.example.com, '*.wild.example.com'], ports: [{number: 9000, name: tcp, protocol: TCP}], resolution: DNS}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: b, namespace: ns, creationTimestamp: '2024-01-02T00:00:00Z'}
spec: {hosts: [b.example.com], ports: [{number: 9000, name: tcp, protocol: TCP}], resolution: DNS}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: own, namespace: ns}
spec: {hosts: [own.example.com], addresses: [10.9.9.9], ports: [{number: 9000, name: tcp, protocol: TCP}], resolution: STATIC, endpoints: [{address: 10.1.1.1}]}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: none, namespace: ns}
spec: {hosts: [none.example.com], ports: [{number: 9000, name: tcp, protocol: TCP}], resolution: NONE}
";

    #[test]
    fn hosts_without_addresses_get_one_of_each_family_in_creation_order() {
        let configs = entries(MESH);
        let out = allocate(configs.iter());
        assert_eq!(
            addresses(&out, "a"),
            [
                ("a.example.com".to_string(), "240.240.0.1".to_string()),
                ("a.example.com".into(), "2001:2::1".into())
            ],
            "a wildcard host gets none without DYNAMIC_DNS"
        );
        assert_eq!(
            addresses(&out, "b"),
            [
                ("b.example.com".to_string(), "240.240.0.2".to_string()),
                ("b.example.com".into(), "2001:2::2".into())
            ]
        );
        assert!(out.keys().all(|k| k.name != "own" && k.name != "none"));
    }

    #[test]
    fn written_addresses_are_kept_and_a_contested_one_goes_to_the_older() {
        let yaml = MESH.replace(
            "metadata: {name: b, namespace: ns, creationTimestamp: '2024-01-02T00:00:00Z'}",
            "metadata: {name: b, namespace: ns, creationTimestamp: '2024-01-02T00:00:00Z'}\nstatus: {addresses: [{host: b.example.com, value: 240.240.0.7}, {host: b.example.com, value: '2001:2::7'}]}",
        )
        .replace(
            "metadata: {name: a, namespace: ns, creationTimestamp: '2024-01-01T00:00:00Z'}",
            "metadata: {name: a, namespace: ns, creationTimestamp: '2024-01-01T00:00:00Z'}\nstatus: {addresses: [{host: a.example.com, value: 240.240.0.7}, {host: a.example.com, value: '2001:2::7'}]}",
        );
        let out = allocate(entries(&yaml).iter());
        assert_eq!(
            addresses(&out, "a")[0].1,
            "240.240.0.7",
            "the older keeps it"
        );
        assert_eq!(
            addresses(&out, "b")[0].1,
            "240.240.0.1",
            "the newer is given the lowest free"
        );
        // Given addresses of its own, a ServiceEntry's allocated ones are removed.
        let owned = yaml.replace(
            "spec: {hosts: [b.example.com], ports",
            "spec: {hosts: [b.example.com], addresses: [10.0.0.5], ports",
        );
        let out = allocate(entries(&owned).iter());
        let b = out.iter().find(|(k, _)| k.name == "b").unwrap().1;
        assert_eq!(b["addresses"], Value::Null);
    }
}
