//! DestinationRules as istiod consolidates and finds them (`pilot/pkg/model/destination_rule.go`,
//! `PushContext.setDestinationRules` and `destinationRule`): rules of one namespace for one host
//! merge (the oldest keeps its traffic policy and exportTo, later ones add the subsets it lacks and
//! a traffic policy when it has none), rules with different exportTo or different workload
//! selectors stay apart, and a proxy looks in its own namespace, then the service's, then the root
//! namespace, stopping at the first namespace with a rule for the host.

use crate::config::Config;
use crate::config::host;
use crate::config::networking::DestinationRule;
use crate::model::policy::{Attachment, Workload, attaches};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// A DestinationRule with its host resolved to an FQDN.
pub struct DrEntry {
    pub config: Arc<Config>,
    pub spec: DestinationRule,
    pub host: String,
    /// The later rules merged into this one (for `/debug`: every object behind a cluster).
    pub merged_from: Vec<Arc<Config>>,
}

/// One consolidated rule: the merged spec under the oldest rule's metadata, and the exportTo set
/// it was indexed with.
struct MergedDr {
    entry: DrEntry,
    export_to: BTreeSet<String>,
}

/// The rules of one namespace (or of one visibility of it) by host.
#[derive(Default)]
struct Consolidated {
    specific: HashMap<String, Vec<MergedDr>>,
    /// Wildcard hosts in the order first seen.
    wildcard: Vec<(String, Vec<MergedDr>)>,
}

impl Consolidated {
    fn slot(&mut self, host: &str) -> &mut Vec<MergedDr> {
        if host.starts_with('*') {
            let at = match self.wildcard.iter().position(|(h, _)| h == host) {
                Some(at) => at,
                None => {
                    self.wildcard.push((host.to_string(), Vec::new()));
                    self.wildcard.len() - 1
                }
            };
            &mut self.wildcard[at].1
        } else {
            self.specific.entry(host.to_string()).or_default()
        }
    }

    /// istiod's `MostSpecificHostMatch`: the exact host, else the narrowest wildcard covering it.
    fn most_specific(&self, hostname: &str) -> Option<&[MergedDr]> {
        if let Some(drs) = self.specific.get(hostname) {
            return Some(drs);
        }
        self.wildcard
            .iter()
            .filter(|(h, _)| host::subset_of(hostname, h))
            .max_by_key(|(h, _)| h.len())
            .map(|(_, drs)| drs.as_slice())
    }

    /// istiod's `mergeDestinationRule`.
    fn merge(&mut self, rule: &DrEntry, export_to: &BTreeSet<String>) {
        let slot = self.slot(&rule.host);
        let mut separately = true;
        for merged in slot.iter_mut() {
            if *export_to == merged.export_to {
                separately = false;
            } else if merged.export_to.is_empty() || !export_to.is_superset(&merged.export_to) {
                separately = true;
                continue;
            } else {
                separately = true;
            }
            let existing = &merged.entry.spec;
            let selectors = (&existing.workload_selector, &rule.spec.workload_selector);
            match selectors {
                (Some(a), Some(b)) if a.match_labels != b.match_labels => {
                    separately = true;
                    continue;
                }
                (None, None) | (Some(_), Some(_)) => separately = false,
                _ => {}
            }
            merged.entry.merged_from.push(rule.config.clone());
            merge_into(&mut merged.entry.spec, &rule.spec);
        }
        if separately {
            slot.push(MergedDr {
                entry: DrEntry {
                    config: rule.config.clone(),
                    spec: rule.spec.clone(),
                    host: rule.host.clone(),
                    merged_from: Vec::new(),
                },
                export_to: export_to.clone(),
            });
        }
    }
}

/// Adds `incoming`'s subsets that `merged` lacks (a repeated name is dropped, counted by
/// `pilot_destrule_subsets`), and its traffic policy when `merged` has none.
fn merge_into(merged: &mut DestinationRule, incoming: &DestinationRule) {
    let names: BTreeSet<String> = merged.subsets.iter().map(|s| s.name.clone()).collect();
    merged.subsets.extend(
        incoming
            .subsets
            .iter()
            .filter(|s| !names.contains(&s.name))
            .cloned(),
    );
    if merged.traffic_policy.is_none() {
        merged.traffic_policy = incoming.traffic_policy.clone();
    }
}

/// The consolidated DestinationRules of a snapshot.
#[derive(Default)]
pub struct DrIndex {
    /// Every namespace's rules visible in that namespace.
    namespace_local: HashMap<String, Consolidated>,
    /// Every namespace's rules exported beyond it.
    exported: HashMap<String, Consolidated>,
    /// The root namespace's private rules, for proxies of the root namespace.
    root_local: Consolidated,
}

impl DrIndex {
    /// `rules` as istiod indexes them; `default_export_to` is the mesh's default for the kind.
    pub fn build(rules: &[DrEntry], default_export_to: &[String], root_namespace: &str) -> DrIndex {
        // With a selector first, then oldest first (istiod's sortConfigBySelectorAndCreationTime).
        let mut order: Vec<&DrEntry> = rules.iter().collect();
        order.sort_by(|a, b| {
            (a.spec.workload_selector.is_none(), a.config.age_key())
                .cmp(&(b.spec.workload_selector.is_none(), b.config.age_key()))
        });
        let mut index = DrIndex::default();
        for rule in order {
            let ns = rule.config.metadata.namespace.as_str();
            let export_to: BTreeSet<String> = if rule.spec.workload_selector.is_some() {
                [".".to_string()].into()
            } else {
                rule.spec.export_to.iter().cloned().collect()
            };
            let visible_at_home = export_to.is_empty()
                || export_to.contains("*")
                || export_to.contains(".")
                || export_to.contains(ns);
            if visible_at_home {
                index
                    .namespace_local
                    .entry(ns.to_string())
                    .or_default()
                    .merge(rule, &export_to);
            }
            let private_only = (export_to.is_empty() && default_export_to.iter().any(|e| e == "."))
                || (export_to.len() == 1 && (export_to.contains(".") || export_to.contains(ns)));
            if !private_only {
                index
                    .exported
                    .entry(ns.to_string())
                    .or_default()
                    .merge(rule, &export_to);
            } else if ns == root_namespace {
                index.root_local.merge(rule, &export_to);
            }
        }
        index
    }

    /// The rule a proxy of `proxy_ns` with `labels` uses for `hostname` of a service in
    /// `service_ns`: among the first namespace's rules for the host, one whose selector (in the
    /// proxy's namespace) selects the proxy, else the one without a selector.
    pub fn lookup(
        &self,
        proxy_ns: &str,
        labels: &BTreeMap<String, String>,
        hostname: &str,
        service_ns: &str,
        root_namespace: &str,
    ) -> Option<&DrEntry> {
        let candidates = self.candidates(proxy_ns, hostname, service_ns, root_namespace)?;
        let workload = Workload {
            namespace: proxy_ns,
            labels,
            waypoint: false,
            service: None,
        };
        let mut catch_all = None;
        for merged in candidates {
            let entry = &merged.entry;
            if entry.spec.workload_selector.is_none() {
                catch_all = Some(entry);
            } else if attaches(
                &entry.config.metadata.namespace,
                &entry.spec,
                root_namespace,
                &workload,
            ) == Some(Attachment::Selector)
            {
                return Some(entry);
            }
        }
        catch_all
    }

    fn candidates(
        &self,
        proxy_ns: &str,
        hostname: &str,
        service_ns: &str,
        root_namespace: &str,
    ) -> Option<Vec<&MergedDr>> {
        let local = if proxy_ns != root_namespace {
            self.namespace_local.get(proxy_ns)
        } else {
            Some(&self.root_local)
        };
        if let Some(drs) = local.and_then(|c| c.most_specific(hostname)) {
            return Some(drs.iter().collect());
        }
        for owner in [service_ns, root_namespace] {
            if owner.is_empty() {
                continue;
            }
            if let Some(drs) = self
                .exported
                .get(owner)
                .and_then(|c| c.most_specific(hostname))
            {
                // A host matched in this namespace ends the search, exported here or not.
                return Some(
                    drs.iter()
                        .filter(|d| {
                            d.export_to.is_empty()
                                || d.export_to.contains("*")
                                || d.export_to.contains(proxy_ns)
                        })
                        .collect(),
                );
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{push_context, sidecar};
    use std::collections::BTreeMap;

    const SERVICE: &str = "---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: shop}
spec: {hosts: [web.shop.svc.cluster.local], ports: [{number: 80, name: http, protocol: HTTP}], resolution: STATIC, endpoints: [{address: 10.1.1.1}]}
";

    fn dr(ns: &str, name: &str, created: &str, extra: &str) -> String {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: {name}, namespace: {ns}, creationTimestamp: \"{created}\"}}\nspec: {{host: web.shop.svc.cluster.local{extra}}}\n"
        )
    }

    /// (name of the rule found, its subsets, its load balancer) for a proxy.
    fn found(
        yaml: &str,
        ns: &str,
        labels: &[(&str, &str)],
    ) -> Option<(String, Vec<String>, String)> {
        let c = push_context(yaml);
        let svc = c
            .registry
            .services
            .values()
            .find(|s| s.hostname == "web.shop.svc.cluster.local")
            .cloned()
            .unwrap();
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let _ = sidecar(ns, &[]);
        c.destination_rule_for(ns, &labels, &svc).map(|d| {
            (
                d.config.metadata.name.clone(),
                d.spec.subsets.iter().map(|s| s.name.clone()).collect(),
                d.spec
                    .traffic_policy
                    .as_ref()
                    .and_then(|t| t.load_balancer.as_ref())
                    .map(|l| format!("{:?}", l.simple))
                    .unwrap_or_default(),
            )
        })
    }

    #[test]
    fn rules_of_one_namespace_for_one_host_merge_as_istiod() {
        let yaml = [
            SERVICE,
            &dr("shop", "a-first", "2024-01-01T00:00:00Z", ", subsets: [{name: v1, labels: {v: '1'}}]"),
            &dr(
                "shop",
                "b-second",
                "2024-01-02T00:00:00Z",
                ", trafficPolicy: {loadBalancer: {simple: RANDOM}}, subsets: [{name: v2, labels: {v: '2'}}, {name: v1, labels: {v: other}}]",
            ),
        ]
        .concat();
        let (name, subsets, lb) = found(&yaml, "shop", &[]).unwrap();
        assert_eq!(name, "a-first", "the oldest names the merged rule");
        assert_eq!(
            subsets,
            ["v1", "v2"],
            "subsets unioned, a repeated name dropped"
        );
        assert!(
            lb.contains("RANDOM"),
            "the oldest had no policy: the next one's is taken ({lb})"
        );
        // Seen from another namespace: the same merged rule, exported from the service's.
        assert_eq!(found(&yaml, "other", &[]).unwrap().1, ["v1", "v2"]);
    }

    #[test]
    fn the_oldest_traffic_policy_wins() {
        let yaml = [
            SERVICE,
            &dr(
                "shop",
                "a",
                "2024-01-01T00:00:00Z",
                ", trafficPolicy: {loadBalancer: {simple: LEAST_REQUEST}}",
            ),
            &dr(
                "shop",
                "b",
                "2024-01-02T00:00:00Z",
                ", trafficPolicy: {loadBalancer: {simple: RANDOM}}",
            ),
        ]
        .concat();
        assert!(
            found(&yaml, "shop", &[])
                .unwrap()
                .2
                .contains("LEAST_REQUEST")
        );
    }

    #[test]
    fn rules_with_different_export_to_stay_apart() {
        let yaml = [
            SERVICE,
            &dr(
                "shop",
                "a-private",
                "2024-01-01T00:00:00Z",
                ", exportTo: [.], subsets: [{name: internal, labels: {v: '1'}}]",
            ),
            &dr(
                "shop",
                "b-public",
                "2024-01-02T00:00:00Z",
                ", exportTo: ['*'], subsets: [{name: v2, labels: {v: '2'}}]",
            ),
        ]
        .concat();
        let (name, subsets, _) = found(&yaml, "other", &[]).unwrap();
        assert_eq!(
            (name.as_str(), subsets),
            ("b-public", vec!["v2".to_string()])
        );
    }

    #[test]
    fn a_selected_workload_gets_its_rule_and_others_the_namespace_rule() {
        let yaml = [
            SERVICE,
            &dr("client", "for-all", "2024-01-01T00:00:00Z", ", subsets: [{name: v1, labels: {v: '1'}}]"),
            &dr(
                "client",
                "for-canary",
                "2024-01-02T00:00:00Z",
                ", workloadSelector: {matchLabels: {app: canary}}, subsets: [{name: v2, labels: {v: '2'}}]",
            ),
        ]
        .concat();
        let (name, subsets, _) = found(&yaml, "client", &[("app", "canary")]).unwrap();
        assert_eq!(name, "for-canary");
        assert_eq!(
            subsets,
            ["v2"],
            "a selector makes a rule private, so it does not merge with the namespace-wide one"
        );
        let (name, subsets, _) = found(&yaml, "client", &[("app", "other")]).unwrap();
        assert_eq!(
            (name.as_str(), subsets),
            ("for-all", vec!["v1".to_string()])
        );
    }

    #[test]
    fn the_first_namespace_with_a_rule_decides_and_others_are_not_looked_at() {
        let in_shop = dr("shop", "in-shop", "2024-01-01T00:00:00Z", "");
        let in_client = dr("client", "in-client", "2024-01-01T00:00:00Z", "");
        let in_third = dr("third", "in-third", "2024-01-01T00:00:00Z", "");
        let yaml = [SERVICE, &in_shop, &in_client, &in_third].concat();
        assert_eq!(found(&yaml, "client", &[]).unwrap().0, "in-client");
        assert_eq!(found(&yaml, "elsewhere", &[]).unwrap().0, "in-shop");
        let yaml = [SERVICE, &in_third].concat();
        assert_eq!(
            found(&yaml, "elsewhere", &[]),
            None,
            "a rule in a namespace that is neither the proxy's, the service's nor the root is not used"
        );
    }
}
