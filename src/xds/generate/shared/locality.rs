//! Locality load balancing as istiod applies it to a proxy's endpoints: `distribute` weights, or,
//! when outlier detection can eject endpoints, priorities by proximity (`failover`) or by labels
//! (`failoverPriority`). Envoy sends to the lowest priority with healthy endpoints, so a proxy
//! stays in its own zone, then region, until those endpoints fail.

use crate::config::networking::LocalityLoadBalancerSetting as Setting;
use envoy_types::pb::envoy::config::core::v3::Locality;
use envoy_types::pb::envoy::config::endpoint::v3::{ClusterLoadAssignment, LocalityLbEndpoints};
use envoy_types::pb::google::protobuf::UInt32Value;
use std::collections::{BTreeMap, BTreeSet};

const REGION_LABEL: &str = "topology.kubernetes.io/region";
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
const SUBZONE_LABEL: &str = "topology.istio.io/subzone";

/// The setting that applies: the DestinationRule's unless it turns locality balancing off, else the
/// mesh's (on by default, as istiod's MeshConfig).
pub fn setting<'a>(mesh: Option<&'a Setting>, rule: Option<&'a Setting>) -> Option<&'a Setting> {
    match rule {
        Some(r) => (r.enabled != Some(false)).then_some(r),
        None => mesh.filter(|m| m.enabled != Some(false)),
    }
}

/// Whether the cluster needs Envoy's locality-weighted balancing (istiod sets it for `distribute`,
/// and for failover rules when outlier detection is on).
pub fn weighted(setting: Option<&Setting>, outlier_detection: bool) -> bool {
    setting.is_some_and(|s| {
        !s.distribute.is_empty()
            || (outlier_detection && (!s.failover.is_empty() || !s.failover_priority.is_empty()))
    })
}

/// `region/zone/subzone` as Envoy's locality.
pub fn parse(locality: &str) -> Locality {
    let mut parts = locality.splitn(3, '/');
    Locality {
        region: parts.next().unwrap_or_default().into(),
        zone: parts.next().unwrap_or_default().into(),
        sub_zone: parts.next().unwrap_or_default().into(),
    }
}

/// A rule's locality (`region[/zone[/subzone]]`, `*` for any part) matches `l`.
fn matches(l: Option<&Locality>, rule: &str) -> bool {
    let r = parse(rule);
    let (region, zone, sub_zone) = l.map_or(("", "", ""), |l| {
        (l.region.as_str(), l.zone.as_str(), l.sub_zone.as_str())
    });
    (r.region == "*" || r.region == region)
        && (r.zone.is_empty() || r.zone == "*" || r.zone == zone)
        && (r.sub_zone.is_empty() || r.sub_zone == "*" || r.sub_zone == sub_zone)
}

/// 0: same subzone, 1: same zone, 2: same region, 3: elsewhere.
fn proximity(proxy: &Locality, endpoints: Option<&Locality>) -> u32 {
    let e = endpoints.cloned().unwrap_or_default();
    match (
        proxy.region == e.region,
        proxy.zone == e.zone,
        proxy.sub_zone == e.sub_zone,
    ) {
        (true, true, true) => 0,
        (true, true, false) => 1,
        (true, false, _) => 2,
        (false, _, _) => 3,
    }
}

/// Applies `setting` to `cla`. `labels[i][j]` are the labels of `cla.endpoints[i].lb_endpoints[j]`.
/// `failover`: outlier detection is on, so priorities can take effect.
pub fn apply(
    cla: &mut ClusterLoadAssignment,
    labels: &[Vec<&BTreeMap<String, String>>],
    proxy_locality: &str,
    proxy_labels: &BTreeMap<String, String>,
    setting: &Setting,
    failover: bool,
) {
    let proxy = parse(proxy_locality);
    if !setting.distribute.is_empty() {
        distribute(cla, &proxy, setting);
    } else if failover {
        if !setting.failover_priority.is_empty() {
            failover_priority(
                cla,
                labels,
                &proxy,
                proxy_labels,
                &setting.failover_priority,
            );
            if !setting.failover.is_empty() {
                by_proximity(cla, &proxy, setting);
            }
        } else {
            by_proximity(cla, &proxy, setting);
        }
    }
}

/// `distribute`: the first rule whose `from` matches the proxy sets each locality's share; the
/// localities it does not name get no traffic.
fn distribute(cla: &mut ClusterLoadAssignment, proxy: &Locality, setting: &Setting) {
    let Some(rule) = setting
        .distribute
        .iter()
        .find(|d| matches(Some(proxy), &d.from))
    else {
        return;
    };
    let mut unmatched: BTreeSet<usize> = (0..cla.endpoints.len()).collect();
    for (to, share) in &rule.to {
        let chosen: Vec<usize> = unmatched
            .iter()
            .copied()
            .filter(|&i| matches(cla.endpoints[i].locality.as_ref(), to))
            .collect();
        let weight_of = |g: &LocalityLbEndpoints| g.load_balancing_weight.map_or(1, |w| w.value);
        let total: u32 = chosen.iter().map(|&i| weight_of(&cla.endpoints[i])).sum();
        for &i in &chosen {
            unmatched.remove(&i);
            let own = f64::from(weight_of(&cla.endpoints[i]));
            let weight = own * f64::from(*share) / f64::from(total.max(1));
            if weight > 0.0 {
                cla.endpoints[i].load_balancing_weight = Some(UInt32Value {
                    value: weight.ceil() as u32,
                });
            }
        }
    }
    for i in unmatched {
        cla.endpoints[i].lb_endpoints.clear();
    }
}

/// `failover`: priority by proximity to the proxy; another region is the last resort unless a
/// rule names it as the proxy's region's failover target.
fn by_proximity(cla: &mut ClusterLoadAssignment, proxy: &Locality, setting: &Setting) {
    for group in &mut cla.endpoints {
        let mut p = proximity(proxy, group.locality.as_ref());
        if p == 3
            && let Some(rule) = setting.failover.iter().find(|f| f.from == proxy.region)
            && group.locality.as_ref().is_none_or(|l| l.region != rule.to)
        {
            p = 4;
        }
        group.priority = group.priority * 5 + p;
    }
    compact(&mut cla.endpoints);
}

/// A label of an endpoint or proxy, with the topology labels istiod derives from the locality.
fn label<'a>(labels: &'a BTreeMap<String, String>, locality: &'a Locality, key: &str) -> &'a str {
    if let Some(v) = labels.get(key) {
        return v;
    }
    match key {
        REGION_LABEL => &locality.region,
        ZONE_LABEL => &locality.zone,
        SUBZONE_LABEL => &locality.sub_zone,
        _ => "",
    }
}

/// `failoverPriority`: endpoints matching the proxy on all the listed labels first, then on all
/// but the last, and so on. `label=value` compares with `value` instead of the proxy's label.
fn failover_priority(
    cla: &mut ClusterLoadAssignment,
    labels: &[Vec<&BTreeMap<String, String>>],
    proxy: &Locality,
    proxy_labels: &BTreeMap<String, String>,
    priorities: &[String],
) {
    if proxy_labels.is_empty() {
        return;
    }
    let rules: Vec<(&str, Option<&str>)> = priorities
        .iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (p.as_str(), None),
        })
        .collect();
    let lowest = rules.len() as u32;
    let mut out = Vec::new();
    for (group, group_labels) in cla.endpoints.iter().zip(labels) {
        let locality = group.locality.clone().unwrap_or_default();
        let mut by_priority: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (j, endpoint_labels) in group_labels.iter().enumerate() {
            let priority = rules
                .iter()
                .enumerate()
                .find(|(_, (key, fixed))| {
                    let want = fixed.unwrap_or_else(|| label(proxy_labels, proxy, key));
                    want != label(endpoint_labels, &locality, key)
                })
                .map_or(0, |(j, _)| lowest - j as u32);
            by_priority.entry(priority).or_default().push(j);
        }
        for (priority, members) in by_priority {
            let mut g = group.clone();
            g.lb_endpoints = members
                .iter()
                .filter_map(|&j| group.lb_endpoints.get(j).cloned())
                .collect();
            g.load_balancing_weight = Some(UInt32Value {
                value: g
                    .lb_endpoints
                    .iter()
                    .map(|e| e.load_balancing_weight.map_or(0, |w| w.value))
                    .sum(),
            });
            g.priority = priority;
            out.push(g);
        }
    }
    compact(&mut out);
    cla.endpoints = out;
}

/// Renumbers priorities 0, 1, 2… in order (Envoy refuses gaps).
fn compact(groups: &mut [LocalityLbEndpoints]) {
    let used: BTreeSet<u32> = groups.iter().map(|g| g.priority).collect();
    let rank: BTreeMap<u32, u32> = used.into_iter().zip(0..).collect();
    for g in groups {
        g.priority = rank[&g.priority];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::networking::{LocalityDistribute, LocalityFailover};

    fn cla(localities: &[&str]) -> ClusterLoadAssignment {
        ClusterLoadAssignment {
            endpoints: localities
                .iter()
                .map(|l| LocalityLbEndpoints {
                    locality: Some(parse(l)),
                    load_balancing_weight: Some(UInt32Value { value: 1 }),
                    lb_endpoints: vec![Default::default()],
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn priorities(c: &ClusterLoadAssignment) -> Vec<u32> {
        c.endpoints.iter().map(|g| g.priority).collect()
    }

    #[test]
    fn failover_orders_by_proximity_and_follows_region_rules() {
        let mut c = cla(&["us/east/a", "us/east/b", "us/west/a", "eu/x/a", "ap/y/a"]);
        let labels: Vec<Vec<&BTreeMap<String, String>>> = vec![Vec::new(); 5];
        let empty = BTreeMap::new();
        let s = Setting::default();
        apply(&mut c, &labels, "us/east/a", &empty, &s, true);
        assert_eq!(priorities(&c), [0, 1, 2, 3, 3]);
        // With a rule us → eu, other regions come after eu.
        let mut c = cla(&["us/east/a", "us/east/b", "us/west/a", "eu/x/a", "ap/y/a"]);
        let s = Setting {
            failover: vec![LocalityFailover {
                from: "us".into(),
                to: "eu".into(),
            }],
            ..Default::default()
        };
        apply(&mut c, &labels, "us/east/a", &empty, &s, true);
        assert_eq!(priorities(&c), [0, 1, 2, 3, 4]);
        // Without outlier detection nothing changes.
        let mut c = cla(&["us/east/a", "eu/x/a"]);
        apply(&mut c, &labels, "us/east/a", &empty, &s, false);
        assert_eq!(priorities(&c), [0, 0]);
    }

    #[test]
    fn distribute_sets_shares_and_drops_unnamed_localities() {
        let mut c = cla(&["us/east/a", "us/west/a", "eu/x/a"]);
        let s = Setting {
            distribute: vec![LocalityDistribute {
                from: "us/east/*".into(),
                to: [("us/east/*".to_string(), 80), ("us/west/*".to_string(), 20)].into(),
            }],
            ..Default::default()
        };
        apply(&mut c, &[], "us/east/a", &BTreeMap::new(), &s, false);
        let weights: Vec<u32> = c
            .endpoints
            .iter()
            .map(|g| g.load_balancing_weight.unwrap().value)
            .collect();
        assert_eq!(weights[..2], [80, 20]);
        assert!(c.endpoints[2].lb_endpoints.is_empty(), "eu gets nothing");
    }

    #[test]
    fn failover_priority_splits_by_labels() {
        let mut c = cla(&["us/east/a"]);
        c.endpoints[0].lb_endpoints = vec![Default::default(); 3];
        let net =
            |n: &str| BTreeMap::from([("topology.istio.io/network".to_string(), n.to_string())]);
        let (a, b, b2) = (net("a"), net("b"), net("b"));
        let labels = vec![vec![&a, &b, &b2]];
        let s = Setting {
            failover_priority: vec!["topology.istio.io/network".into(), ZONE_LABEL.into()],
            ..Default::default()
        };
        apply(&mut c, &labels, "us/east/a", &net("b"), &s, true);
        let sizes: Vec<(u32, usize)> = c
            .endpoints
            .iter()
            .map(|g| (g.priority, g.lb_endpoints.len()))
            .collect();
        assert_eq!(sizes, [(0, 2), (1, 1)], "same network first");
    }

    #[test]
    fn a_rule_can_turn_it_off() {
        let on = Setting {
            enabled: Some(true),
            ..Default::default()
        };
        let off = Setting {
            enabled: Some(false),
            ..Default::default()
        };
        assert!(setting(Some(&on), Some(&off)).is_none());
        assert!(setting(Some(&on), None).is_some());
        assert!(setting(Some(&off), None).is_none());
    }
}
