//! Who is asking for a certificate. A caller proves its identity with a client certificate from our
//! CA, or a Kubernetes service-account token (checked with TokenReview, audience `istio-ca`), or in
//! file mode a token listed in a token file.

use super::Identity;
use super::node_auth::{Caller, PodRef};
use crate::model::identity::Credentials;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use std::collections::HashMap;
use std::sync::Arc;
use x509_parser::prelude::*;

pub const AUDIENCE: &str = "istio-ca";

pub use crate::model::identity::AuthError;

/// How bearer tokens are checked.
pub enum TokenAuthority {
    Kubernetes(kube::Client),
    /// token → "namespace/serviceaccount"
    Static(HashMap<String, (String, String)>),
    None,
}

impl TokenAuthority {
    /// A file of `token: namespace/serviceaccount` lines (YAML mapping).
    pub fn from_file(path: &std::path::Path) -> Result<TokenAuthority, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let map: HashMap<String, String> =
            serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut tokens = HashMap::new();
        for (token, who) in map {
            let (ns, sa) = who.split_once('/').ok_or_else(|| {
                format!(
                    "{}: {who:?} is not namespace/serviceaccount",
                    path.display()
                )
            })?;
            tokens.insert(token, (ns.to_string(), sa.to_string()));
        }
        Ok(TokenAuthority::Static(tokens))
    }

    pub async fn authenticate(
        &self,
        token: &str,
        trust_domain: &str,
    ) -> Result<Identity, AuthError> {
        self.authenticate_caller(token, trust_domain)
            .await
            .map(|c| c.identity)
    }

    /// The identity a token proves, with the pod it is bound to (Kubernetes tokens only).
    pub async fn authenticate_caller(
        &self,
        token: &str,
        trust_domain: &str,
    ) -> Result<Caller, AuthError> {
        let mut pod = None;
        let (namespace, service_account) = match self {
            TokenAuthority::None => {
                return Err(AuthError::Rejected(
                    "token authentication is not configured".into(),
                ));
            }
            TokenAuthority::Static(map) => map
                .get(token)
                .cloned()
                .ok_or_else(|| AuthError::Rejected("unknown token".into()))?,
            TokenAuthority::Kubernetes(client) => {
                let (ns, sa, bound) = review(client, token).await?;
                pod = bound;
                (ns, sa)
            }
        };
        Ok(Caller {
            identity: Identity {
                trust_domain: trust_domain.into(),
                namespace,
                service_account,
            },
            pod,
            cluster: String::new(),
        })
    }
}

async fn review(
    client: &kube::Client,
    token: &str,
) -> Result<(String, String, Option<PodRef>), AuthError> {
    let api: Api<TokenReview> = Api::all(client.clone());
    let req = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.into()),
            audiences: Some(vec![AUDIENCE.into()]),
        },
        ..Default::default()
    };
    let resp = api
        .create(&PostParams::default(), &req)
        .await
        .map_err(|e| AuthError::Unavailable(e.to_string()))?;
    let status = resp.status.unwrap_or_default();
    if status.authenticated != Some(true) {
        return Err(AuthError::Rejected(
            status.error.unwrap_or_else(|| "not authenticated".into()),
        ));
    }
    if !status
        .audiences
        .as_ref()
        .is_some_and(|a| a.iter().any(|x| x == AUDIENCE))
    {
        return Err(AuthError::Rejected(format!(
            "token is not for audience {AUDIENCE}"
        )));
    }
    let user = status.user.unwrap_or_default();
    // A token bound to a pod (projected service-account tokens) names it.
    let extra = |key: &str| {
        user.extra
            .as_ref()
            .and_then(|e| e.get(key))
            .and_then(|v| v.first())
            .cloned()
    };
    let pod = match (
        extra("authentication.kubernetes.io/pod-name"),
        extra("authentication.kubernetes.io/pod-uid"),
    ) {
        (Some(name), Some(uid)) => Some(PodRef { name, uid }),
        _ => None,
    };
    let username = user.username.unwrap_or_default();
    let rest = username
        .strip_prefix("system:serviceaccount:")
        .ok_or_else(|| AuthError::Rejected(format!("{username:?} is not a service account")))?;
    let (ns, sa) = rest
        .split_once(':')
        .ok_or_else(|| AuthError::Rejected(format!("{username:?} is not a service account")))?;
    Ok((ns.to_string(), sa.to_string(), pod))
}

/// Who a gRPC caller is, from what it presents: a bearer token (checked by the token authority)
/// wins over a client certificate, as in istiod (a workload renewing with its current certificate
/// may still send its token).
pub struct Authenticator {
    pub tokens: TokenAuthority,
    pub trust_domain: String,
    /// SubjectAccessReview answers by identity, for a minute (as istiod caches them).
    pub secret_access: SecretAccessCache,
    /// Kubernetes mode: the config cluster's ID and the remote clusters' clients, so a token
    /// from a remote cluster's pod is reviewed by that cluster's API server.
    pub clusters: Option<Clusters>,
}

/// The clusters whose tokens the CA can review, as istiod's `KubeJWTAuthenticator` knows them.
pub struct Clusters {
    pub local_id: String,
    /// Alias → cluster ID (`--cluster-aliases`).
    pub aliases: Arc<std::collections::BTreeMap<String, String>>,
    /// A remote cluster's client by ID, while its remote secret names it.
    pub remote: RemoteClients,
}

/// Finds a remote cluster's client by its ID.
pub trait RemoteClientLookup: Send + Sync {
    fn client(&self, cluster: &str) -> Option<kube::Client>;
    /// The remote clusters known now, for the refusal message.
    fn ids(&self) -> Vec<String>;
}

pub type RemoteClients = Arc<dyn RemoteClientLookup>;

impl Clusters {
    /// The token authority for a caller that says it runs in `cluster`: the config cluster's
    /// when it names none or this one, a remote's by its client; `None` for a cluster the
    /// control plane does not know (refused, as istiod refuses it).
    fn authority(&self, cluster: Option<&str>) -> Option<Option<TokenAuthority>> {
        match cluster {
            None => Some(None),
            Some(id) if id == self.local_id || self.resolve(id) == self.local_id => Some(None),
            Some(id) => self
                .remote
                .client(id)
                .or_else(|| self.remote.client(self.resolve(id)))
                .map(|c| Some(TokenAuthority::Kubernetes(c))),
        }
    }

    /// The cluster `id` names: the one it is an alias of, else itself.
    pub fn resolve<'a>(&'a self, id: &'a str) -> &'a str {
        self.aliases.get(id).map_or(id, String::as_str)
    }
}

/// Recent answers to "may this service account list secrets in its namespace?".
#[derive(Default)]
pub struct SecretAccessCache {
    answers: std::sync::Mutex<HashMap<Identity, (std::time::Instant, Option<String>)>>,
    /// One review at a time per identity: a thousand pods of one service account reconnecting
    /// together (a control-plane restart) make one review, not a thousand.
    turns: std::sync::Mutex<HashMap<Identity, Arc<tokio::sync::Mutex<()>>>>,
}

const SECRET_ACCESS_TTL: std::time::Duration = std::time::Duration::from_secs(60);

impl SecretAccessCache {
    fn get(&self, id: &Identity) -> Option<Option<String>> {
        let answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        answers
            .get(id)
            .filter(|(at, _)| at.elapsed() < SECRET_ACCESS_TTL)
            .map(|(_, answer)| answer.clone())
    }

    fn put(&self, id: &Identity, answer: Option<String>) {
        let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        answers.retain(|_, (at, _)| at.elapsed() < SECRET_ACCESS_TTL);
        answers.insert(id.clone(), (std::time::Instant::now(), answer));
    }

    /// The lock whose holder asks for `id`; turns nobody waits for are dropped.
    fn turn(&self, id: &Identity) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self.turns.lock().unwrap_or_else(|p| p.into_inner());
        turns.retain(|_, t| Arc::strong_count(t) > 1);
        turns.entry(id.clone()).or_default().clone()
    }

    /// The cached answer for `id`, else `review`'s (asked once however many callers wait).
    async fn answer(
        &self,
        id: &Identity,
        review: impl std::future::Future<Output = Result<Option<String>, String>>,
    ) -> Result<Option<String>, String> {
        if let Some(answer) = self.get(id) {
            return Ok(answer);
        }
        let turn = self.turn(id);
        let _mine = turn.lock().await;
        if let Some(answer) = self.get(id) {
            return Ok(answer);
        }
        // Only answers are kept: a failed review is asked again by the next stream.
        let answer = review.await?;
        self.put(id, answer.clone());
        Ok(answer)
    }
}

/// Asks the API server whether `id`'s service account may list secrets in its namespace: `None`
/// when it may, else why not.
async fn review_secret_access(
    client: &kube::Client,
    id: &Identity,
) -> Result<Option<String>, String> {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(id.namespace.clone()),
                verb: Some("list".into()),
                resource: Some("secrets".into()),
                ..Default::default()
            }),
            user: Some(format!(
                "system:serviceaccount:{}:{}",
                id.namespace, id.service_account
            )),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: kube::Api<SubjectAccessReview> = kube::Api::all(client.clone());
    let answer = api
        .create(&kube::api::PostParams::default(), &review)
        .await
        .map_err(|e| format!("SubjectAccessReview failed: {e}"))?;
    let status = answer.status.unwrap_or_default();
    Ok((!status.allowed).then(|| {
        format!(
            "{}/{} is not authorized to read secrets: {}",
            id.namespace,
            id.service_account,
            status.reason.unwrap_or_default()
        )
    }))
}

impl Authenticator {
    /// `Ok(None)` when the caller presented nothing; an error when what it presented is refused.
    pub async fn identify(
        &self,
        credentials: Credentials<'_>,
    ) -> Result<Option<Identity>, AuthError> {
        Ok(self.identify_caller(credentials).await?.map(|c| c.identity))
    }

    /// As `identify`, with the pod a bound token names.
    pub async fn identify_caller(
        &self,
        credentials: Credentials<'_>,
    ) -> Result<Option<Caller>, AuthError> {
        if let Some(token) = credentials.bearer() {
            let remote = match &self.clusters {
                None => None,
                Some(clusters) => match clusters.authority(credentials.cluster_id) {
                    Some(remote) => remote,
                    None => {
                        return Err(AuthError::Rejected(format!(
                            "client claims to be in cluster {:?}, but only the local cluster {:?} and remote clusters {:?} are known",
                            credentials.cluster_id.unwrap_or_default(),
                            clusters.local_id,
                            clusters.remote.ids()
                        )));
                    }
                },
            };
            let mut caller = remote
                .as_ref()
                .unwrap_or(&self.tokens)
                .authenticate_caller(token, &self.trust_domain)
                .await?;
            if let (Some(_), Some(clusters)) = (&remote, &self.clusters) {
                let claimed = credentials.cluster_id.unwrap_or_default();
                caller.cluster = clusters.resolve(claimed).to_string();
            }
            return Ok(Some(caller));
        }
        Ok(credentials
            .client_cert
            .and_then(from_client_cert)
            .map(|identity| Caller {
                identity,
                pod: None,
                cluster: String::new(),
            }))
    }
}

/// The identity in a client certificate TLS already verified against our root.
pub fn from_client_cert(der: &[u8]) -> Option<Identity> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let san = cert.subject_alternative_name().ok()??;
    san.value.general_names.iter().find_map(|g| match g {
        GeneralName::URI(u) => Identity::parse(u),
        _ => None,
    })
}

impl crate::model::identity::Authenticate for Authenticator {
    fn identify<'a>(
        &'a self,
        credentials: Credentials<'a>,
    ) -> crate::model::identity::BoxFuture<'a, Result<Option<Identity>, AuthError>> {
        Box::pin(Authenticator::identify(self, credentials))
    }

    fn secrets_refused<'a>(
        &'a self,
        id: &'a Identity,
    ) -> crate::model::identity::BoxFuture<'a, Result<Option<String>, String>> {
        Box::pin(async move {
            let TokenAuthority::Kubernetes(client) = &self.tokens else {
                return Ok(None);
            };
            self.secret_access
                .answer(id, review_secret_access(client, id))
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A thousand pods of one service account reconnecting together make one review.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_review_per_identity_however_many_streams_wait() {
        let cache = Arc::new(SecretAccessCache::default());
        let reviews = Arc::new(AtomicUsize::new(0));
        let id = Identity {
            trust_domain: "cluster.local".into(),
            namespace: "gw".into(),
            service_account: "ingress".into(),
        };
        let waiting: Vec<_> = (0..50)
            .map(|_| {
                let (cache, reviews, id) = (cache.clone(), reviews.clone(), id.clone());
                tokio::spawn(async move {
                    cache
                        .answer(&id, async {
                            reviews.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                            Ok(Some("no RBAC rule allows it".to_string()))
                        })
                        .await
                })
            })
            .collect();
        for w in waiting {
            assert_eq!(
                w.await.expect("task"),
                Ok(Some("no RBAC rule allows it".to_string()))
            );
        }
        assert_eq!(reviews.load(Ordering::SeqCst), 1);

        // A failed review is not kept: the next caller asks again.
        let other = Identity {
            service_account: "egress".into(),
            ..id
        };
        let failed = cache
            .answer(&other, async { Err("API server unavailable".to_string()) })
            .await;
        assert!(failed.is_err());
        let asked = cache.answer(&other, async { Ok(None) }).await;
        assert_eq!(asked, Ok(None));
    }
}
