//! AuthorizationPolicy → ztunnel's L4 `Authorization`, with istiod's rules: ztunnel sees no HTTP, so
//! a rule naming HTTP attributes is dropped from an ALLOW policy (it can never match: stricter than
//! asked) and kept without its HTTP parts in a DENY policy (it matches more: stricter again).

use super::pb::security::{
    Action, Address, Authorization, Clause, Match, Rule, Scope, ServiceAccountMatch, StringMatch,
    string_match::MatchType,
};
use crate::config::security::{AuthorizationAction, AuthorizationPolicy, Condition};
use crate::model::l4_policy::unseen_by_ztunnel;
use std::net::IpAddr;

/// What the conversion produced: the resource, or why ztunnel gets nothing, plus the HTTP
/// attributes that were left out (istiod reports them as a warning on the policy's status).
#[derive(Debug, Clone, PartialEq)]
pub struct Converted {
    pub authorization: Option<Authorization>,
    pub ignored_http: Vec<String>,
}

/// Converts one stored policy (its name and namespace from `meta`). A dry-run policy
/// (`istio.io/dry-run`) is not sent, as istiod without AMBIENT_ENABLE_DRY_RUN_AUTHORIZATION_POLICY
/// does not send it: a ztunnel that does not read the field would enforce it.
pub fn convert_stored(
    root_namespace: &str,
    meta: &crate::config::ObjectMeta,
    policy: &AuthorizationPolicy,
) -> Converted {
    if is_dry_run(meta) {
        return Converted {
            authorization: None,
            ignored_http: Vec::new(),
        };
    }
    convert(root_namespace, &meta.namespace, &meta.name, false, policy)
}

/// Whether a stored policy is a dry run (`istio.io/dry-run: "true"`).
pub fn is_dry_run(meta: &crate::config::ObjectMeta) -> bool {
    crate::config::security::is_dry_run(&meta.annotations)
}

/// Converts one policy. `None` when it is not for ztunnel: bound to a waypoint or gateway with
/// `targetRef(s)`, or an AUDIT/CUSTOM action, which ztunnel cannot enforce.
pub fn convert(
    root_namespace: &str,
    namespace: &str,
    name: &str,
    dry_run: bool,
    policy: &AuthorizationPolicy,
) -> Converted {
    let skipped = Converted {
        authorization: None,
        ignored_http: Vec::new(),
    };
    if policy.target_ref.is_some() || !policy.target_refs.is_empty() {
        return skipped;
    }
    let action = match policy.action {
        AuthorizationAction::ALLOW => Action::Allow,
        AuthorizationAction::DENY => Action::Deny,
        _ => return skipped,
    };
    let scope = match &policy.selector {
        Some(_) => Scope::WorkloadSelector,
        None if namespace == root_namespace => Scope::Global,
        None => Scope::Namespace,
    };
    let mut ignored_http = Vec::new();
    let mut rules = Vec::new();
    for rule in policy.rules.iter().flatten() {
        let http = unseen_by_ztunnel(rule);
        let mut clauses = Vec::new();
        let to: Vec<Match> = rule
            .to
            .iter()
            .flatten()
            .filter_map(|t| t.operation.as_ref())
            .map(|op| Match {
                destination_ports: ports(&op.ports),
                not_destination_ports: ports(&op.not_ports),
                ..Default::default()
            })
            .collect();
        if !to.is_empty() {
            clauses.push(Clause { matches: to });
        }
        let from: Vec<Match> = rule
            .from
            .iter()
            .flatten()
            .filter_map(|f| f.source.as_ref())
            .map(|src| Match {
                source_ips: addresses(&src.ip_blocks),
                not_source_ips: addresses(&src.not_ip_blocks),
                namespaces: strings(&src.namespaces),
                not_namespaces: strings(&src.not_namespaces),
                service_accounts: service_accounts(&src.service_accounts, namespace),
                not_service_accounts: service_accounts(&src.not_service_accounts, namespace),
                principals: strings(&src.principals),
                not_principals: strings(&src.not_principals),
                ..Default::default()
            })
            .collect();
        if !from.is_empty() {
            clauses.push(Clause { matches: from });
        }
        for when in &rule.when {
            clauses.push(Clause {
                matches: vec![condition(when)],
            });
        }
        let has_http = !http.is_empty();
        ignored_http.extend(http);
        if action == Action::Allow && has_http {
            continue;
        }
        rules.push(Rule { clauses });
    }
    ignored_http.sort();
    ignored_http.dedup();
    Converted {
        authorization: Some(Authorization {
            name: name.to_string(),
            namespace: namespace.to_string(),
            scope: scope as i32,
            action: action as i32,
            rules,
            dry_run,
            extensions: Vec::new(),
        }),
        ignored_http,
    }
}

/// A `when` condition as one match: its key picks the field, `values`/`notValues` the polarity.
fn condition(when: &Condition) -> Match {
    let (pos, neg) = (&when.values, &when.not_values);
    let mut m = Match::default();
    match when.key.as_str() {
        "source.ip" => {
            m.source_ips = addresses(pos);
            m.not_source_ips = addresses(neg);
        }
        "source.namespace" => {
            m.namespaces = strings(pos);
            m.not_namespaces = strings(neg);
        }
        "source.principal" => {
            m.principals = strings(pos);
            m.not_principals = strings(neg);
        }
        "destination.ip" => {
            m.destination_ips = addresses(pos);
            m.not_destination_ips = addresses(neg);
        }
        "destination.port" => {
            m.destination_ports = ports(pos);
            m.not_destination_ports = ports(neg);
        }
        _ => {}
    }
    m
}

/// Istio's string forms: `*` is presence, `*x` a suffix, `x*` a prefix, anything else exact.
pub(super) fn strings(values: &[String]) -> Vec<StringMatch> {
    values
        .iter()
        .map(|v| {
            let t = if v == "*" {
                MatchType::Presence(())
            } else if let Some(s) = v.strip_prefix('*') {
                MatchType::Suffix(s.to_string())
            } else if let Some(p) = v.strip_suffix('*') {
                MatchType::Prefix(p.to_string())
            } else {
                MatchType::Exact(v.clone())
            };
            StringMatch {
                match_type: Some(t),
            }
        })
        .collect()
}

/// `ns/sa`, or a bare `sa` in the policy's own namespace.
fn service_accounts(values: &[String], namespace: &str) -> Vec<ServiceAccountMatch> {
    values
        .iter()
        .map(|v| match v.split_once('/') {
            Some((ns, sa)) => ServiceAccountMatch {
                namespace: ns.to_string(),
                service_account: sa.to_string(),
            },
            None => ServiceAccountMatch {
                namespace: namespace.to_string(),
                service_account: v.clone(),
            },
        })
        .collect()
}

/// Port strings that are not ports are skipped (validation already refuses them).
fn ports(values: &[String]) -> Vec<u32> {
    values
        .iter()
        .filter_map(|p| p.parse::<u16>().ok())
        .map(u32::from)
        .collect()
}

/// IPs and CIDRs as raw bytes plus prefix length; unparsable entries are skipped.
fn addresses(values: &[String]) -> Vec<Address> {
    values
        .iter()
        .filter_map(|v| {
            let (ip, len) = match v.split_once('/') {
                Some((ip, len)) => (ip.parse::<IpAddr>().ok()?, len.parse::<u32>().ok()?),
                None => {
                    let ip = v.parse::<IpAddr>().ok()?;
                    (ip, if ip.is_ipv4() { 32 } else { 128 })
                }
            };
            Some(Address {
                address: super::fields::ip_bytes(ip),
                length: len,
            })
        })
        .collect()
}

/// istiod's implicit waypoint policy (PILOT_AUTO_ALLOW_WAYPOINT_POLICY): ALLOW from the waypoint's
/// identities, referenced by name from each workload behind it (it selects nothing by labels).
pub fn allow_from_waypoint(
    waypoint: &crate::model::waypoint::WaypointRef,
    trust_domain: &str,
    service_accounts: &[String],
) -> Authorization {
    let principals: Vec<String> = service_accounts
        .iter()
        .map(|sa| format!("{trust_domain}/ns/{}/sa/{sa}", waypoint.namespace))
        .collect();
    Authorization {
        name: waypoint_policy_name(waypoint),
        namespace: waypoint.namespace.clone(),
        scope: Scope::WorkloadSelector as i32,
        action: Action::Allow as i32,
        rules: vec![Rule {
            clauses: vec![Clause {
                matches: vec![Match {
                    principals: principals
                        .into_iter()
                        .map(|p| StringMatch {
                            match_type: Some(MatchType::Exact(p)),
                        })
                        .collect(),
                    ..Default::default()
                }],
            }],
        }],
        dry_run: false,
        extensions: Vec::new(),
    }
}

/// `istio_allow_waypoint_<namespace>_<name>`: `_` cannot appear in a Kubernetes name, so it
/// never meets a user's policy.
pub fn waypoint_policy_name(waypoint: &crate::model::waypoint::WaypointRef) -> String {
    format!(
        "istio_allow_waypoint_{}_{}",
        waypoint.namespace, waypoint.name
    )
}

/// The DENY policy every STRICT workload references: a connection without a peer identity
/// (plaintext) is refused.
pub fn static_strict(root_namespace: &str) -> Authorization {
    Authorization {
        name: super::fields::STATIC_STRICT_POLICY.to_string(),
        namespace: root_namespace.to_string(),
        scope: Scope::WorkloadSelector as i32,
        action: Action::Deny as i32,
        rules: vec![Rule {
            clauses: vec![Clause {
                matches: vec![Match {
                    not_principals: strings(&["*".to_string()]),
                    ..Default::default()
                }],
            }],
        }],
        dry_run: false,
        extensions: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml: &str) -> AuthorizationPolicy {
        serde_saphyr::from_str(yaml).expect("policy")
    }

    fn convert_ns(yaml: &str) -> Converted {
        convert("istio-system", "app", "p", false, &policy(yaml))
    }

    #[test]
    fn l4_allow_rule_becomes_clauses_of_from_to_and_when() {
        let c = convert_ns(
            r#"
selector: {matchLabels: {app: web}}
action: ALLOW
rules:
- from:
  - source: {principals: ["cluster.local/ns/app/sa/client"], namespaces: ["team-*"], ipBlocks: ["10.0.0.0/8"]}
  to:
  - operation: {ports: ["8080"]}
  when:
  - key: source.ip
    notValues: ["10.1.2.3"]
"#,
        );
        assert!(c.ignored_http.is_empty());
        let a = c.authorization.expect("converted");
        assert_eq!(a.scope, Scope::WorkloadSelector as i32);
        assert_eq!(a.action, Action::Allow as i32);
        assert_eq!(a.rules.len(), 1);
        let clauses = &a.rules[0].clauses;
        assert_eq!(clauses.len(), 3, "to, from, when");
        assert_eq!(clauses[0].matches[0].destination_ports, [8080]);
        let from = &clauses[1].matches[0];
        assert_eq!(
            from.principals[0].match_type,
            Some(MatchType::Exact("cluster.local/ns/app/sa/client".into()))
        );
        assert_eq!(
            from.namespaces[0].match_type,
            Some(MatchType::Prefix("team-".into()))
        );
        assert_eq!(from.source_ips[0].address, vec![10, 0, 0, 0]);
        assert_eq!(from.source_ips[0].length, 8);
        assert_eq!(clauses[2].matches[0].not_source_ips[0].length, 32);
    }

    #[test]
    fn http_rules_are_dropped_from_allow_and_stripped_in_deny() {
        let rules = r#"
rules:
- to:
  - operation: {methods: ["GET"], ports: ["80"]}
- from:
  - source: {namespaces: ["other"]}
"#;
        let allow = convert_ns(&format!("action: ALLOW\n{rules}"));
        assert_eq!(allow.ignored_http, ["methods"]);
        let a = allow.authorization.expect("allow");
        assert_eq!(a.rules.len(), 1, "the HTTP rule never matches: dropped");
        assert_eq!(a.scope, Scope::Namespace as i32);
        assert!(!a.rules[0].clauses[0].matches[0].namespaces.is_empty());

        let deny = convert_ns(&format!("action: DENY\n{rules}"));
        let d = deny.authorization.expect("deny");
        assert_eq!(d.rules.len(), 2, "the HTTP rule is kept with its port only");
        assert_eq!(d.rules[0].clauses[0].matches[0].destination_ports, [80]);
    }

    #[test]
    fn waypoint_bound_audit_and_custom_policies_are_not_for_ztunnel() {
        for yaml in [
            "targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: waypoint}]\naction: DENY",
            "action: AUDIT",
            "action: CUSTOM\nprovider: {name: ext}",
        ] {
            assert_eq!(convert_ns(yaml).authorization, None, "{yaml}");
        }
    }

    #[test]
    fn root_namespace_policy_without_selector_is_global_and_empty_rule_matches_all() {
        let c = convert(
            "istio-system",
            "istio-system",
            "g",
            true,
            &policy("rules: [{}]"),
        );
        let a = c.authorization.expect("global");
        assert_eq!(a.scope, Scope::Global as i32);
        assert!(a.dry_run);
        assert_eq!(a.rules, vec![Rule::default()]);
        assert!(
            convert_ns("action: ALLOW")
                .authorization
                .expect("allow nothing")
                .rules
                .is_empty()
        );
    }

    #[test]
    fn service_accounts_default_to_the_policy_namespace() {
        let c =
            convert_ns("rules: [{from: [{source: {serviceAccounts: [\"sa1\", \"other/sa2\"]}}]}]");
        let m = &c.authorization.expect("a").rules[0].clauses[0].matches[0];
        assert_eq!(
            m.service_accounts,
            vec![
                ServiceAccountMatch {
                    namespace: "app".into(),
                    service_account: "sa1".into()
                },
                ServiceAccountMatch {
                    namespace: "other".into(),
                    service_account: "sa2".into()
                },
            ]
        );
    }
}
