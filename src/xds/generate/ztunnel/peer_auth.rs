//! PeerAuthentication for ztunnel, as istiod expresses it: a workload whose effective mode is STRICT
//! lists the static STRICT policy; a workload policy with port-level modes becomes its own DENY
//! Authorization `converted_peer_authentication_<name>` (plaintext refused on its STRICT ports,
//! allowed on its PERMISSIVE/DISABLE ones), listed instead.

use super::fields::STATIC_STRICT_POLICY;
use super::pb::security::string_match::MatchType;
use super::pb::security::{Action, Authorization, Clause, Match, Rule, Scope, StringMatch};
use crate::config::Config;
use crate::config::security::{MtlsMode, PeerAuthentication};
use crate::model::peer_auth::{Policy, levels, mode, namespace_wide};
use std::collections::BTreeMap;

const CONVERTED_PREFIX: &str = "converted_peer_authentication_";

/// Port-level modes in port order.
fn ports(p: &PeerAuthentication) -> Vec<(u32, MtlsMode)> {
    let mut out: Vec<(u32, MtlsMode)> = p
        .port_level_mtls
        .iter()
        .flatten()
        .filter_map(|(port, m)| Some((port.parse().ok()?, m.mode)))
        .collect();
    out.sort_by_key(|(port, _)| *port);
    out
}

fn converted_name(p: &Config) -> String {
    format!("{CONVERTED_PREFIX}{}", p.metadata.name)
}

/// The PeerAuthentication-derived policies a workload lists (`namespace/name`).
pub fn workload_keys(
    policies: &[Policy],
    root: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Vec<String> {
    let levels = levels(policies, root, namespace, labels);
    // ztunnel honours no workload policy of the root namespace, as in istiod.
    let workload = levels.workload.filter(|_| namespace != root);
    let (mesh, ns) = (levels.mesh, levels.namespace);
    let mut strict = mode(mesh) == MtlsMode::STRICT;
    if mode(ns) != MtlsMode::UNSET {
        strict = mode(ns) == MtlsMode::STRICT;
    }
    let mut converted = None;
    if let Some((cfg, w)) = workload {
        match mode(Some(w)) {
            MtlsMode::STRICT => strict = true,
            MtlsMode::PERMISSIVE | MtlsMode::DISABLE => strict = false,
            MtlsMode::UNSET => {}
        }
        let port_modes = ports(w);
        if !port_modes.is_empty() {
            let any = |wanted: &[MtlsMode]| port_modes.iter().any(|(_, m)| wanted.contains(m));
            let key = format!("{}/{}", cfg.metadata.namespace, converted_name(cfg));
            match mode(Some(w)) {
                MtlsMode::STRICT => {
                    if any(&[MtlsMode::PERMISSIVE, MtlsMode::DISABLE]) {
                        converted = Some(key);
                        strict = false;
                    }
                }
                MtlsMode::PERMISSIVE | MtlsMode::DISABLE => {
                    if any(&[MtlsMode::STRICT]) {
                        converted = Some(key);
                    }
                }
                MtlsMode::UNSET => {
                    if strict {
                        if any(&[MtlsMode::PERMISSIVE]) {
                            converted = Some(key);
                            strict = false;
                        }
                    } else if any(&[MtlsMode::STRICT]) {
                        converted = Some(key);
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    if let Some(key) = converted {
        out.push(key);
    }
    if strict {
        out.push(format!("{root}/{STATIC_STRICT_POLICY}"));
    }
    out.sort();
    out
}

fn no_peer() -> Match {
    Match {
        not_principals: vec![StringMatch {
            match_type: Some(MatchType::Presence(())),
        }],
        ..Default::default()
    }
}

/// The converted DENY policies of every workload PeerAuthentication with port-level modes.
pub fn converted_policies(policies: &[Policy], root: &str) -> Vec<Authorization> {
    let mut out = Vec::new();
    for (cfg, pa) in policies {
        let ns_name = &cfg.metadata.namespace;
        if *ns_name == root || namespace_wide(pa) || ports(pa).is_empty() {
            continue;
        }
        let parents = levels(policies, root, ns_name, &BTreeMap::new());
        let (ns_cfg, root_cfg) = (parents.namespace, parents.mesh);
        let (m, ns_mode, root_mode) = (mode(Some(pa)), mode(ns_cfg), mode(root_cfg));
        let mut clauses = Vec::new();
        let mut rules = Vec::new();
        if m == MtlsMode::STRICT {
            clauses.push(Clause {
                matches: vec![no_peer()],
            });
        }
        let parent_strict = m == MtlsMode::STRICT
            || (m == MtlsMode::UNSET && ns_mode == MtlsMode::STRICT)
            || (m == MtlsMode::UNSET
                && (ns_cfg.is_none() || ns_mode == MtlsMode::UNSET)
                && root_mode == MtlsMode::STRICT);
        let mut non_strict_port = false;
        for (port, port_mode) in ports(pa) {
            match port_mode {
                MtlsMode::STRICT => {
                    if parent_strict {
                        continue;
                    }
                    rules.push(Rule {
                        clauses: vec![Clause {
                            matches: vec![Match {
                                destination_ports: vec![port],
                                ..no_peer()
                            }],
                        }],
                    });
                }
                MtlsMode::PERMISSIVE | MtlsMode::DISABLE => {
                    if matches!(m, MtlsMode::PERMISSIVE | MtlsMode::DISABLE) {
                        continue;
                    }
                    let inherits_non_strict = m == MtlsMode::UNSET
                        && ((ns_cfg.is_some() && ns_mode != MtlsMode::STRICT)
                            || (ns_cfg.is_none()
                                && root_cfg.is_some()
                                && root_mode != MtlsMode::STRICT)
                            || (ns_cfg.is_none() && root_cfg.is_none()));
                    if inherits_non_strict {
                        continue;
                    }
                    non_strict_port = true;
                    clauses.push(Clause {
                        matches: vec![Match {
                            not_destination_ports: vec![port],
                            ..Default::default()
                        }],
                    });
                }
                MtlsMode::UNSET => {}
            }
        }
        if m == MtlsMode::STRICT && !non_strict_port {
            continue;
        }
        if clauses.is_empty() && rules.is_empty() {
            continue;
        }
        let merge_strict = (root_mode == MtlsMode::STRICT
            && (ns_cfg.is_none() || ns_mode == MtlsMode::UNSET || ns_mode == MtlsMode::STRICT))
            || ns_mode == MtlsMode::STRICT;
        if merge_strict && non_strict_port {
            clauses.push(Clause {
                matches: vec![no_peer()],
            });
        }
        if !clauses.is_empty() {
            rules.push(Rule { clauses });
        }
        out.push(Authorization {
            name: converted_name(cfg),
            namespace: ns_name.clone(),
            scope: Scope::WorkloadSelector as i32,
            action: Action::Deny as i32,
            rules,
            dry_run: false,
            extensions: Vec::new(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Kind, Spec};
    use crate::store::Store;

    fn pa(ns: &str, name: &str, spec: &str) -> String {
        format!(
            "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {spec}\n"
        )
    }

    /// (workload keys for app=db in `app`, converted policies).
    fn run(yaml: &str) -> (Vec<String>, Vec<Authorization>) {
        let s = Store::from_yaml(yaml);
        let snap = s.snapshot();
        let policies: Vec<Policy> = snap
            .list(Kind::PeerAuthentication)
            .filter_map(|e| match &e.config.spec {
                Spec::PeerAuthentication(p) => Some((e.config.as_ref(), p)),
                _ => None,
            })
            .collect();
        let labels = BTreeMap::from([("app".to_string(), "db".to_string())]);
        (
            workload_keys(&policies, "istio-system", "app", &labels),
            converted_policies(&policies, "istio-system"),
        )
    }

    const DB: &str = "selector: {matchLabels: {app: db}}";

    #[test]
    fn a_strict_port_on_a_permissive_workload_gets_its_own_deny_policy() {
        let (keys, policies) = run(&pa(
            "app",
            "db",
            &format!("{{{DB}, portLevelMtls: {{8080: {{mode: STRICT}}}}}}"),
        ));
        assert_eq!(keys, ["app/converted_peer_authentication_db"]);
        assert_eq!(policies.len(), 1);
        let p = &policies[0];
        assert_eq!(p.action, Action::Deny as i32);
        assert_eq!(p.rules.len(), 1);
        let m = &p.rules[0].clauses[0].matches[0];
        assert_eq!(m.destination_ports, [8080]);
        assert_eq!(
            m.not_principals.len(),
            1,
            "plaintext (no peer identity) is denied"
        );
    }

    #[test]
    fn a_permissive_port_under_a_strict_mesh_replaces_the_static_policy() {
        let yaml = format!(
            "{}{}",
            pa("istio-system", "default", "{mtls: {mode: STRICT}}"),
            pa(
                "app",
                "db",
                &format!("{{{DB}, portLevelMtls: {{9090: {{mode: PERMISSIVE}}}}}}")
            )
        );
        let (keys, policies) = run(&yaml);
        assert_eq!(keys, ["app/converted_peer_authentication_db"]);
        let clauses = &policies[0].rules[0].clauses;
        assert_eq!(clauses[0].matches[0].not_destination_ports, [9090]);
        assert_eq!(
            clauses[1].matches[0].not_principals.len(),
            1,
            "STRICT elsewhere, merged"
        );
    }

    #[test]
    fn all_strict_is_just_the_static_policy() {
        let (keys, policies) = run(&pa(
            "app",
            "db",
            &format!("{{{DB}, mtls: {{mode: STRICT}}, portLevelMtls: {{8080: {{mode: STRICT}}}}}}"),
        ));
        assert_eq!(keys, [format!("istio-system/{STATIC_STRICT_POLICY}")]);
        assert!(policies.is_empty());
    }
}
