//! security.istio.io (v1, v1beta1): field for field with istio.io/api `security/v1beta1`.

use super::common::{Duration, PolicyTargetReference, WorkloadSelector};
use super::networking::istio_enum;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

istio_enum!(MtlsMode {
    UNSET,
    DISABLE,
    PERMISSIVE,
    STRICT
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PeerAuthentication {
    pub selector: Option<WorkloadSelector>,
    pub mtls: Option<MutualTls>,
    /// Keys are port numbers; YAML writes them as integers, JSON as strings.
    pub port_level_mtls: Option<BTreeMap<String, MutualTls>>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MutualTls {
    #[serde(default)]
    pub mode: MtlsMode,
}

istio_enum!(AuthorizationAction {
    ALLOW,
    DENY,
    AUDIT,
    CUSTOM
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthorizationPolicy {
    pub selector: Option<WorkloadSelector>,
    pub target_ref: Option<PolicyTargetReference>,
    #[serde(default)]
    pub target_refs: Vec<PolicyTargetReference>,
    /// `None` (absent) and `Some([])` differ in Istio: an ALLOW policy with `rules: []` allows nothing.
    pub rules: Option<Vec<Rule>>,
    #[serde(default)]
    pub action: AuthorizationAction,
    pub provider: Option<ExtensionProvider>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtensionProvider {
    #[serde(default)]
    pub name: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    pub from: Option<Vec<RuleFrom>>,
    pub to: Option<Vec<RuleTo>>,
    #[serde(default)]
    pub when: Vec<Condition>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleFrom {
    pub source: Option<Source>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleTo {
    pub operation: Option<Operation>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Source {
    #[serde(default)]
    pub principals: Vec<String>,
    #[serde(default)]
    pub not_principals: Vec<String>,
    #[serde(default)]
    pub request_principals: Vec<String>,
    #[serde(default)]
    pub not_request_principals: Vec<String>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub not_namespaces: Vec<String>,
    #[serde(default)]
    pub service_accounts: Vec<String>,
    #[serde(default)]
    pub not_service_accounts: Vec<String>,
    #[serde(default)]
    pub ip_blocks: Vec<String>,
    #[serde(default)]
    pub not_ip_blocks: Vec<String>,
    #[serde(default)]
    pub remote_ip_blocks: Vec<String>,
    #[serde(default)]
    pub not_remote_ip_blocks: Vec<String>,
    #[serde(default)]
    pub trust_domains: Vec<String>,
    #[serde(default)]
    pub not_trust_domains: Vec<String>,
}

impl Source {
    pub fn is_empty(&self) -> bool {
        self.fields().iter().all(|(_, v)| v.is_empty())
    }

    /// Every list with its Istio field name, for checks that apply to all of them alike.
    pub fn fields(&self) -> [(&'static str, &Vec<String>); 14] {
        [
            ("principals", &self.principals),
            ("notPrincipals", &self.not_principals),
            ("requestPrincipals", &self.request_principals),
            ("notRequestPrincipals", &self.not_request_principals),
            ("namespaces", &self.namespaces),
            ("notNamespaces", &self.not_namespaces),
            ("serviceAccounts", &self.service_accounts),
            ("notServiceAccounts", &self.not_service_accounts),
            ("ipBlocks", &self.ip_blocks),
            ("notIpBlocks", &self.not_ip_blocks),
            ("remoteIpBlocks", &self.remote_ip_blocks),
            ("trustDomains", &self.trust_domains),
            ("notTrustDomains", &self.not_trust_domains),
            ("notRemoteIpBlocks", &self.not_remote_ip_blocks),
        ]
    }
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Operation {
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub not_hosts: Vec<String>,
    #[serde(default)]
    pub ports: Vec<String>,
    #[serde(default)]
    pub not_ports: Vec<String>,
    #[serde(default)]
    pub methods: Vec<String>,
    #[serde(default)]
    pub not_methods: Vec<String>,
    #[serde(default)]
    pub paths: Vec<String>,
    #[serde(default)]
    pub not_paths: Vec<String>,
}

impl Operation {
    pub fn is_empty(&self) -> bool {
        self.fields().iter().all(|(_, v)| v.is_empty())
    }

    pub fn fields(&self) -> [(&'static str, &Vec<String>); 8] {
        [
            ("hosts", &self.hosts),
            ("notHosts", &self.not_hosts),
            ("ports", &self.ports),
            ("notPorts", &self.not_ports),
            ("methods", &self.methods),
            ("notMethods", &self.not_methods),
            ("paths", &self.paths),
            ("notPaths", &self.not_paths),
        ]
    }
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub values: Vec<String>,
    #[serde(default)]
    pub not_values: Vec<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestAuthentication {
    pub selector: Option<WorkloadSelector>,
    pub target_ref: Option<PolicyTargetReference>,
    #[serde(default)]
    pub target_refs: Vec<PolicyTargetReference>,
    #[serde(default)]
    pub jwt_rules: Vec<JwtRule>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JwtRule {
    #[serde(default)]
    pub issuer: String,
    #[serde(default)]
    pub audiences: Vec<String>,
    /// Also read under its proto field name, as the CRD lists it.
    #[serde(default, alias = "jwks_uri")]
    pub jwks_uri: String,
    #[serde(default)]
    pub jwks: String,
    #[serde(default)]
    pub from_headers: Vec<JwtHeader>,
    #[serde(default)]
    pub from_params: Vec<String>,
    #[serde(default)]
    pub from_cookies: Vec<String>,
    #[serde(default)]
    pub output_payload_to_header: String,
    #[serde(default)]
    pub forward_original_token: bool,
    #[serde(default)]
    pub output_claim_to_headers: Vec<ClaimToHeader>,
    pub timeout: Option<Duration>,
    /// Claims whose space-separated values are matched one by one (e.g. `scope`).
    #[serde(default)]
    pub space_delimited_claims: Vec<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JwtHeader {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub prefix: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimToHeader {
    #[serde(default)]
    pub header: String,
    #[serde(default)]
    pub claim: String,
}

/// `when` keys Rudder's RBAC translation expresses. A rule with another key is handled fail-closed
/// (an ALLOW rule is left out, a DENY rule widened) and validation warns about it.
pub fn when_key_expressible(key: &str) -> bool {
    matches!(
        key,
        "destination.port"
            | "destination.ip"
            | "source.ip"
            | "remote.ip"
            | "source.principal"
            | "source.namespace"
            | "source.serviceAccount"
            | "source.trustDomain"
            | "request.auth.principal"
            | "request.auth.audiences"
            | "request.auth.presenter"
            | "connection.sni"
    ) || key
        .strip_prefix("request.headers[")
        .is_some_and(|k| k.ends_with(']'))
        || jwt_claim_path(key).is_some()
        || envoy_filter_key(key).is_some()
}

/// The filter and metadata key of an `experimental.envoy.filters.<filter>[<key>]` condition.
pub fn envoy_filter_key(key: &str) -> Option<(&str, &str)> {
    let rest = key.strip_prefix("experimental.")?;
    let (filter, field) = rest.strip_suffix(']')?.split_once('[')?;
    (filter.starts_with("envoy.filters.") && !filter.is_empty() && !field.is_empty())
        .then_some((filter, field))
}

/// The claim path of a `request.auth.claims[a]` or `request.auth.claims[a][b]` key (a nested
/// claim), as istiod reads it; `None` for anything else.
pub fn jwt_claim_path(key: &str) -> Option<Vec<&str>> {
    let mut rest = key.strip_prefix("request.auth.claims")?;
    let mut path = Vec::new();
    while !rest.is_empty() {
        let (name, after) = rest.strip_prefix('[')?.split_once(']')?;
        if name.is_empty() || name.contains('[') {
            return None;
        }
        path.push(name);
        rest = after;
    }
    (!path.is_empty()).then_some(path)
}

/// Marks an AuthorizationPolicy (ALLOW or DENY) as dry run: evaluated and logged, never enforced.
pub const DRY_RUN: &str = "istio.io/dry-run";

/// Go's `strconv.ParseBool`, which istiod uses for boolean annotations.
pub fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Whether a policy with these annotations is dry run (an unparsable value is not, as istiod).
pub fn is_dry_run(annotations: &std::collections::BTreeMap<String, String>) -> bool {
    annotations
        .get(DRY_RUN)
        .and_then(|v| parse_go_bool(v))
        .unwrap_or(false)
}

#[cfg(test)]
mod claim_path_tests {
    use super::jwt_claim_path;

    #[test]
    fn claim_keys_name_a_path_in_the_token() {
        assert_eq!(
            jwt_claim_path("request.auth.claims[groups]"),
            Some(vec!["groups"])
        );
        assert_eq!(
            jwt_claim_path("request.auth.claims[org][team]"),
            Some(vec!["org", "team"])
        );
        for bad in [
            "request.auth.claims",
            "request.auth.claims[]",
            "request.auth.claims[a",
            "request.auth.claims[a]b",
            "request.auth.claimsx[a]",
        ] {
            assert_eq!(jwt_claim_path(bad), None, "{bad}");
        }
    }
}

#[cfg(test)]
mod envoy_filter_key_tests {
    use super::envoy_filter_key;

    #[test]
    fn filter_keys_name_a_filter_and_a_field() {
        assert_eq!(
            envoy_filter_key("experimental.envoy.filters.network.mysql_proxy[db.table]"),
            Some(("envoy.filters.network.mysql_proxy", "db.table"))
        );
        for bad in [
            "experimental.envoy.filters.x",
            "experimental.other[a]",
            "experimental.envoy.filters.x[]",
            "envoy.filters.x[a]",
        ] {
            assert_eq!(envoy_filter_key(bad), None, "{bad}");
        }
    }
}
