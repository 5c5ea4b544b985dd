//! Node-mode ztunnel: a ztunnel DaemonSet pod asks for the certificates of the pods on its node,
//! naming each in the request's `ImpersonatedIdentity` metadata. As istiod's node authorizer, this
//! is allowed only when the caller's service account is a trusted node account
//! (`CA_TRUSTED_NODE_ACCOUNTS`), its token is bound to a pod that exists with that UID and
//! service account, and a pod running the requested service account is scheduled on the same
//! node. Anything else is refused: never a blanket permission.

use super::Identity;
use crate::config::{ConfigKey, Kind, Spec};
use crate::store::Store;
use std::sync::Arc;

/// The pod a bound service-account token was issued for (TokenReview's user extra).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub name: String,
    pub uid: String,
}

/// Who called: the identity the credential proves, and the pod it is bound to, when known.
#[derive(Debug, Clone)]
pub struct Caller {
    pub identity: Identity,
    pub pod: Option<PodRef>,
    /// The remote cluster whose API server vouched for the caller's token; empty for the
    /// config cluster. Its pod, and the pods on its node, are that cluster's.
    pub cluster: String,
}

/// The metadata key ztunnel names the identity it asks for in.
pub const IMPERSONATED_IDENTITY: &str = "ImpersonatedIdentity";

pub struct NodeAuthorizer {
    pub store: Arc<Store>,
    /// `namespace/serviceaccount` of callers that may ask for the pods of their node.
    pub trusted: Vec<(String, String)>,
}

impl NodeAuthorizer {
    /// `CA_TRUSTED_NODE_ACCOUNTS`: comma-separated `namespace/serviceaccount`.
    pub fn parse_trusted(list: &str) -> Result<Vec<(String, String)>, String> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.split_once('/')
                    .filter(|(ns, sa)| !ns.is_empty() && !sa.is_empty())
                    .map(|(ns, sa)| (ns.to_string(), sa.to_string()))
                    .ok_or_else(|| format!("{s:?} is not namespace/serviceaccount"))
            })
            .collect()
    }

    /// The identity `caller` may be issued a certificate for when it asks for `requested`; the
    /// error says why not (logged, never returned to the caller).
    pub fn authorize(&self, caller: &Caller, requested: &str) -> Result<Identity, String> {
        let id = &caller.identity;
        if !self
            .trusted
            .iter()
            .any(|(ns, sa)| *ns == id.namespace && *sa == id.service_account)
        {
            return Err(format!("{} may not impersonate", id.uri()));
        }
        let wanted = Identity::parse(requested)
            .ok_or_else(|| format!("{requested:?} is not a SPIFFE identity"))?;
        if wanted.trust_domain != id.trust_domain {
            return Err(format!(
                "{requested} is not in trust domain {}",
                id.trust_domain
            ));
        }
        let pod_ref = caller
            .pod
            .as_ref()
            .ok_or("the caller's token is not bound to a pod")?;
        let snapshot = self.store.snapshot();
        let key = ConfigKey {
            kind: Kind::Pod,
            namespace: id.namespace.clone(),
            name: pod_ref.name.clone(),
            cluster: caller.cluster.clone(),
        };
        let Some(Spec::Pod(pod)) = snapshot.get(&key).map(|e| &e.config.spec) else {
            return Err(format!("pod {}/{} not found", id.namespace, pod_ref.name));
        };
        if pod.metadata.uid.as_deref() != Some(pod_ref.uid.as_str()) {
            return Err(format!(
                "pod {}/{} has another UID",
                id.namespace, pod_ref.name
            ));
        }
        let spec = pod.spec.as_ref();
        if spec.and_then(|s| s.service_account_name.as_deref()) != Some(&id.service_account) {
            return Err(format!(
                "pod {}/{} runs as another service account",
                id.namespace, pod_ref.name
            ));
        }
        let node = spec
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("pod {}/{} is not on a node", id.namespace, pod_ref.name))?;
        let on_node = snapshot
            .list_namespace(Kind::Pod, &wanted.namespace)
            // The caller's node is a node of its own cluster: another cluster's pods on a node
            // of the same name vouch for nothing.
            .filter(|e| e.config.metadata.cluster == caller.cluster)
            .any(|e| match &e.config.spec {
                Spec::Pod(p) => {
                    let s = p.spec.as_ref();
                    s.and_then(|s| s.node_name.as_deref()) == Some(node)
                        && s.and_then(|s| s.service_account_name.as_deref())
                            == Some(wanted.service_account.as_str())
                        && p.status.as_ref().and_then(|st| st.phase.as_deref()) != Some("Failed")
                }
                _ => false,
            });
        if !on_node {
            return Err(format!(
                "no pod of {}/{} on node {node}",
                wanted.namespace, wanted.service_account
            ));
        }
        Ok(wanted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, name: &str, uid: &str, sa: &str, node: &str) -> crate::config::Config {
        let json = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": uid},
            "spec": {"serviceAccountName": sa, "nodeName": node, "containers": []},
        });
        crate::config::Config {
            api_version: "v1".into(),
            kind: Kind::Pod,
            metadata: crate::config::ObjectMeta {
                name: name.into(),
                namespace: ns.into(),
                uid: uid.into(),
                ..Default::default()
            },
            spec: Spec::Pod(Box::new(serde_json::from_value(json).unwrap())),
            status: None,
        }
    }

    fn caller(ns: &str, sa: &str, pod: &str, uid: &str) -> Caller {
        Caller {
            identity: Identity {
                trust_domain: "cluster.local".into(),
                namespace: ns.into(),
                service_account: sa.into(),
            },
            pod: Some(PodRef {
                name: pod.into(),
                uid: uid.into(),
            }),
            cluster: String::new(),
        }
    }

    #[test]
    fn a_trusted_node_agent_gets_only_the_identities_on_its_node() {
        let store = crate::store::StoreWriter::new(16);
        for p in [
            pod("istio-system", "ztunnel-a", "u-a", "ztunnel", "node-a"),
            pod("shop", "cart-1", "u-1", "cart", "node-a"),
            pod("shop", "pay-1", "u-2", "pay", "node-b"),
            pod("shop", "web-1", "u-3", "web", "node-a"),
        ] {
            store.upsert(p);
        }
        let auth = NodeAuthorizer {
            store: store.reader(),
            trusted: NodeAuthorizer::parse_trusted("istio-system/ztunnel").unwrap(),
        };
        let z = caller("istio-system", "ztunnel", "ztunnel-a", "u-a");
        let cart = "spiffe://cluster.local/ns/shop/sa/cart";
        assert_eq!(auth.authorize(&z, cart).unwrap().uri(), cart);
        assert!(
            auth.authorize(&z, "spiffe://cluster.local/ns/shop/sa/pay")
                .is_err(),
            "pay runs on another node"
        );
        assert!(
            auth.authorize(&caller("shop", "web", "web-1", "u-3"), cart)
                .is_err(),
            "web is not a node agent"
        );
        assert!(
            auth.authorize(
                &caller("istio-system", "ztunnel", "ztunnel-a", "other-uid"),
                cart
            )
            .is_err(),
            "a token for a pod that was replaced"
        );
        assert!(
            auth.authorize(&caller("istio-system", "ztunnel", "ztunnel-b", "u-a"), cart)
                .is_err(),
            "no such pod"
        );
        let mut unbound = z.clone();
        unbound.pod = None;
        assert!(
            auth.authorize(&unbound, cart).is_err(),
            "a token bound to no pod"
        );
        assert!(
            auth.authorize(&z, "spiffe://other.domain/ns/shop/sa/cart")
                .is_err(),
            "another trust domain"
        );
    }
}
