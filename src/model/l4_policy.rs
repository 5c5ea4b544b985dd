//! What ztunnel can enforce of an AuthorizationPolicy: it sees connections, not requests, so the
//! attributes of a rule it cannot see (HTTP ones, and those not expressed for it yet) decide what
//! happens to the rule. One answer for ztunnel's policies and the `ZtunnelAccepted` status.

use crate::config::security::{AuthorizationPolicy, Rule};

/// `when` keys ztunnel can evaluate; any other key is an HTTP attribute.
pub const L4_CONDITIONS: [&str; 5] = [
    "source.ip",
    "source.namespace",
    "source.principal",
    "destination.ip",
    "destination.port",
];

/// The attributes of `rule` ztunnel cannot see, in the rule's order (its operations' fields, its
/// sources' fields, its conditions' keys). An ALLOW rule with any is dropped, a DENY rule is kept
/// without them: either way stricter than written.
pub fn unseen_by_ztunnel(rule: &Rule) -> Vec<String> {
    let mut unseen = Vec::new();
    for op in rule
        .to
        .iter()
        .flatten()
        .filter_map(|t| t.operation.as_ref())
    {
        for (field, used) in [
            ("hosts", !op.hosts.is_empty()),
            ("notHosts", !op.not_hosts.is_empty()),
            ("methods", !op.methods.is_empty()),
            ("notMethods", !op.not_methods.is_empty()),
            ("paths", !op.paths.is_empty()),
            ("notPaths", !op.not_paths.is_empty()),
        ] {
            if used {
                unseen.push(field.to_string());
            }
        }
    }
    for src in rule.from.iter().flatten().filter_map(|f| f.source.as_ref()) {
        for (field, used) in [
            ("remoteIpBlocks", !src.remote_ip_blocks.is_empty()),
            ("notRemoteIpBlocks", !src.not_remote_ip_blocks.is_empty()),
            ("requestPrincipals", !src.request_principals.is_empty()),
            // Not expressed for ztunnel yet: treated like an HTTP attribute (an ALLOW rule is
            // dropped, a DENY rule widened), so policy is never weaker.
            ("trustDomains", !src.trust_domains.is_empty()),
            ("notTrustDomains", !src.not_trust_domains.is_empty()),
            (
                "notRequestPrincipals",
                !src.not_request_principals.is_empty(),
            ),
        ] {
            if used {
                unseen.push(field.to_string());
            }
        }
    }
    for when in &rule.when {
        if !L4_CONDITIONS.contains(&when.key.as_str()) {
            unseen.push(when.key.clone());
        }
    }
    unseen
}

/// Every attribute of `policy`'s rules ztunnel cannot see, sorted, each once (what istiod
/// reports on the policy's status).
pub fn policy_unseen_by_ztunnel(policy: &AuthorizationPolicy) -> Vec<String> {
    let mut unseen: Vec<String> = policy
        .rules
        .iter()
        .flatten()
        .flat_map(unseen_by_ztunnel)
        .collect();
    unseen.sort();
    unseen.dedup();
    unseen
}
