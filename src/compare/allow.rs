//! Differences a team has looked at and accepts (`rudder shadow --allow FILE`): a YAML list of
//! entries, each matching differences by proxy id, type, resource name and field path, with `*`
//! for any run of characters and a field left out matching everything. A reason is required, so
//! the file says why each difference is fine.
//!
//! ```yaml
//! - proxy: "router~*"
//!   type: lds
//!   resource: "0.0.0.0_8443"
//!   path: "/filterChains[*]/transportSocket*"
//!   reason: "Rudder's gateways take TLS 1.3 by default"
//! ```

use super::diff::Difference;

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allowed {
    #[serde(default)]
    pub proxy: Option<String>,
    /// A short type name: `cds`, `eds`, `lds`, `rds`, `ecds`.
    #[serde(default, rename = "type")]
    pub type_short: Option<String>,
    #[serde(default)]
    pub resource: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    pub reason: String,
}

#[derive(Debug, Default, Clone)]
pub struct AllowList(pub Vec<Allowed>);

#[derive(Debug, thiserror::Error)]
pub enum AllowError {
    #[error("{0}")]
    Yaml(String),
    #[error("entry {0}: unknown type {1:?} (one of cds, eds, lds, rds, ecds)")]
    Type(usize, String),
    #[error("entry {0}: the reason is empty; say why the difference is accepted")]
    NoReason(usize),
}

impl AllowList {
    pub fn parse(text: &str) -> Result<AllowList, AllowError> {
        let entries: Vec<Allowed> = if text.trim().is_empty() {
            Vec::new()
        } else {
            serde_saphyr::from_str(text).map_err(|e| AllowError::Yaml(e.to_string()))?
        };
        for (i, e) in entries.iter().enumerate() {
            if let Some(t) = &e.type_short
                && !super::config::COMPARED.iter().any(|c| c.short() == t)
            {
                return Err(AllowError::Type(i + 1, t.clone()));
            }
            if e.reason.trim().is_empty() {
                return Err(AllowError::NoReason(i + 1));
            }
        }
        Ok(AllowList(entries))
    }

    /// The entry that accepts `proxy` as a whole (one naming only the proxy): a proxy Rudder
    /// cannot compare, or one whose differences are all accepted.
    pub fn allows_proxy(&self, proxy: &str) -> Option<&Allowed> {
        self.0.iter().find(|e| {
            e.type_short.is_none()
                && e.resource.is_none()
                && e.path.is_none()
                && e.proxy.as_deref().is_some_and(|p| glob(p, proxy))
        })
    }

    /// The entry that accepts `d` on `proxy`, if any.
    pub fn allows(&self, proxy: &str, d: &Difference) -> Option<&Allowed> {
        let matches = |pattern: &Option<String>, value: &str| {
            pattern.as_deref().is_none_or(|p| glob(p, value))
        };
        self.0.iter().find(|e| {
            matches(&e.proxy, proxy)
                && matches(&e.type_short, d.type_url.short())
                && matches(&e.resource, &d.resource)
                && matches(&e.path, &d.path)
        })
    }
}

/// `value` matches `pattern`, where `*` stands for any run of characters.
fn glob(pattern: &str, value: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return pattern == value;
    };
    let Some(mut rest) = value.strip_prefix(first) else {
        return false;
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xds::types::TypeUrl;

    #[test]
    fn globs() {
        assert!(glob("*", ""));
        assert!(glob(
            "router~*",
            "router~1.2.3.4~gw.ns~ns.svc.cluster.local"
        ));
        assert!(!glob("router~*", "sidecar~x"));
        assert!(glob(
            "/filterChains[*]/transportSocket*",
            "/filterChains[a]/transportSocket/x"
        ));
        assert!(glob("a*b*c", "abc"));
        assert!(!glob("a*b*c", "acb"));
        assert!(glob("exact", "exact"));
        assert!(!glob("ab*ba", "aba"));
    }

    #[test]
    fn an_entry_matches_on_every_field_it_names() {
        let list = AllowList::parse(
            "- type: cds\n  resource: \"outbound|*\"\n  path: /connectTimeout\n  reason: mesh default differs\n",
        )
        .unwrap();
        let d = |type_url, resource: &str, path: &str| Difference {
            type_url,
            resource: resource.into(),
            path: path.into(),
            left: None,
            right: None,
        };
        assert!(
            list.allows(
                "p",
                &d(TypeUrl::Cluster, "outbound|80||a", "/connectTimeout")
            )
            .is_some()
        );
        assert!(
            list.allows("p", &d(TypeUrl::Cluster, "inbound|80||", "/connectTimeout"))
                .is_none()
        );
        assert!(
            list.allows(
                "p",
                &d(TypeUrl::Listener, "outbound|80||a", "/connectTimeout")
            )
            .is_none()
        );
    }

    #[test]
    fn a_typo_or_a_missing_reason_is_refused() {
        assert!(AllowList::parse("- type: clusters\n  reason: x\n").is_err());
        assert!(AllowList::parse("- type: cds\n  reason: \" \"\n").is_err());
        assert!(AllowList::parse("- typo: cds\n  reason: x\n").is_err());
        assert!(AllowList::parse("").unwrap().0.is_empty());
    }
}
