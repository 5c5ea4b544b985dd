//! A Kubernetes API for end-to-end scenarios: the in-process fake always, and a real cluster too
//! when `KUBECONFIG` is set (each scenario in its own namespace, removed afterwards).
#![allow(dead_code)]

use super::Daemon;
use super::fake_k8s::FakeApi;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use std::path::PathBuf;

/// Where a scenario runs: the fake, or a real cluster from KUBECONFIG.
pub struct Cluster {
    pub fake: Option<FakeApi>,
    pub kubeconfig: PathBuf,
    pub ns: String,
    pub rt: tokio::runtime::Runtime,
    client: kube::Client,
}

impl Cluster {
    /// The fake always; the real cluster as well when KUBECONFIG is set.
    pub fn all(name: &str) -> Vec<Cluster> {
        let mut out = vec![Cluster::fake(name)];
        if let Some(path) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
            out.push(Cluster::real(PathBuf::from(path), name));
        }
        out
    }

    pub fn fake(name: &str) -> Cluster {
        let fake = FakeApi::start();
        let kubeconfig = fake.kubeconfig.clone();
        let mut c = Cluster::connect(kubeconfig, format!("{name}-ns"));
        c.fake = Some(fake);
        c
    }

    /// The fake as a pod sees it (HTTPS, bearer tokens, a mounted service account); `rudder_in_pod`
    /// starts the daemon with no kubeconfig, as it runs in a cluster.
    pub fn fake_in_cluster(name: &str) -> Cluster {
        let ns = format!("{name}-ns");
        let fake = FakeApi::start_in_cluster(&ns);
        let kubeconfig = fake.kubeconfig.clone();
        let mut c = Cluster::connect(kubeconfig, ns);
        c.fake = Some(fake);
        c
    }

    pub fn real(kubeconfig: PathBuf, name: &str) -> Cluster {
        let c = Cluster::connect(kubeconfig, format!("rudder-{name}-{}", std::process::id()));
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": c.ns}}));
        c
    }

    fn connect(kubeconfig: PathBuf, ns: String) -> Cluster {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let client = rt
            .block_on(rudder::k8s::client(Some(&kubeconfig)))
            .expect("client");
        Cluster {
            fake: None,
            kubeconfig,
            ns,
            rt,
            client,
        }
    }

    /// A token for service account `sa` of this cluster's namespace with audience `istio-ca`, that
    /// TokenReview accepts: vouched for by the fake, or issued by a real API server.
    pub fn token(&self, sa: &str) -> String {
        self.token_in(&self.ns.clone(), sa)
    }

    /// Like `token`, for a service account of namespace `ns` (created if missing).
    pub fn token_in(&self, ns: &str, sa: &str) -> String {
        if let Some(fake) = &self.fake {
            let token = format!("token-{ns}-{sa}");
            fake.add_token(&token, ns, sa, &["istio-ca"]);
            return token;
        }
        let sa_obj = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": ns}});
        self.apply(sa_obj);
        self.request_token(ns, sa, None)
    }

    /// A token of `ns/sa` bound to pod `ns/pod` (which must exist), as the kubelet projects it.
    pub fn pod_token(&self, ns: &str, sa: &str, pod: &str) -> String {
        let uid = self
            .get_json(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": ns}}))
            .and_then(|p| p["metadata"]["uid"].as_str().map(str::to_string))
            .expect("pod uid");
        if let Some(fake) = &self.fake {
            let token = format!("token-{ns}-{sa}-{pod}");
            fake.add_pod_token(&token, ns, sa, (pod, &uid));
            return token;
        }
        let pod_ref = k8s_openapi::api::authentication::v1::BoundObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.into()),
            uid: Some(uid),
        };
        self.request_token(ns, sa, Some(pod_ref))
    }

    /// A real API server's token for `ns/sa` with audience `istio-ca`, bound to `bound` if given.
    fn request_token(
        &self,
        ns: &str,
        sa: &str,
        bound: Option<k8s_openapi::api::authentication::v1::BoundObjectReference>,
    ) -> String {
        use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
        use k8s_openapi::api::core::v1::ServiceAccount;
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), ns);
        let req = TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec!["istio-ca".into()],
                bound_object_ref: bound,
                ..Default::default()
            },
            ..Default::default()
        };
        self.rt
            .block_on(api.create_token_request(sa, &PostParams::default(), &req))
            .expect("token request")
            .status
            .map(|s| s.token)
            .unwrap_or_default()
    }

    /// The root Rudder's CA keeps in Secret `istio-ca-secret` of this cluster's namespace (where the
    /// daemon runs), PEM.
    pub fn ca_root(&self) -> String {
        let secret = self
            .get_json(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "istio-ca-secret", "namespace": self.ns}}))
            .expect("istio-ca-secret created");
        secret_text(&secret, "ca-cert.pem")
    }

    /// The object as the API server has it now, if it exists.
    pub fn get_json(&self, obj: Value) -> Option<Value> {
        let api = self.api(&obj);
        let name = obj["metadata"]["name"].as_str().unwrap().to_string();
        self.rt
            .block_on(async { api.get_opt(&name).await.unwrap() })
            .map(|o| serde_json::to_value(o).unwrap())
    }

    pub fn is_fake(&self) -> bool {
        self.fake.is_some()
    }

    fn resource(obj: &Value) -> (ApiResource, bool) {
        let api_version = obj["apiVersion"].as_str().unwrap();
        let kind = obj["kind"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let (plural, namespaced) = match kind {
            "Namespace" => ("namespaces".to_string(), false),
            "GatewayClass" => ("gatewayclasses".to_string(), false),
            "IngressClass" => ("ingressclasses".to_string(), false),
            "Ingress" => ("ingresses".to_string(), true),
            "Node" => ("nodes".to_string(), false),
            "CustomResourceDefinition" => ("customresourcedefinitions".to_string(), false),
            "CertificateSigningRequest" => ("certificatesigningrequests".to_string(), false),
            "Role" => ("roles".to_string(), true),
            "RoleBinding" => ("rolebindings".to_string(), true),
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
                (format!("{}s", kind.to_lowercase()), false)
            }
            "EndpointSlice" => ("endpointslices".to_string(), true),
            "DestinationRule" => ("destinationrules".to_string(), true),
            "VirtualService" => ("virtualservices".to_string(), true),
            other if other.ends_with('y') && !other.ends_with("ay") => (
                format!("{}ies", other[..other.len() - 1].to_lowercase()),
                true,
            ),
            other => (format!("{}s", other.to_lowercase()), true),
        };
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        (ApiResource::from_gvk_with_plural(&gvk, &plural), namespaced)
    }

    pub fn api(&self, obj: &Value) -> Api<DynamicObject> {
        let (ar, namespaced) = Cluster::resource(obj);
        if namespaced {
            let ns = obj["metadata"]["namespace"]
                .as_str()
                .unwrap_or(&self.ns)
                .to_string();
            Api::namespaced_with(self.client.clone(), &ns, &ar)
        } else {
            Api::all_with(self.client.clone(), &ar)
        }
    }

    /// Create or replace.
    pub async fn put(&self, obj: Value) {
        let api = self.api(&obj);
        let name = obj["metadata"]["name"].as_str().unwrap().to_string();
        let mut dynobj: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
        match api.get_opt(&name).await.unwrap() {
            Some(existing) => {
                dynobj.metadata.resource_version = existing.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &dynobj)
                    .await
                    .unwrap();
            }
            None => {
                api.create(&PostParams::default(), &dynobj).await.unwrap();
            }
        }
    }

    pub async fn remove(&self, obj: Value) {
        let api = self.api(&obj);
        let name = obj["metadata"]["name"].as_str().unwrap().to_string();
        // No grace period: a real cluster would otherwise keep a deleted pod for 30 s.
        api.delete(&name, &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }

    pub fn apply(&self, obj: Value) {
        self.rt.block_on(self.put(obj));
    }

    pub fn delete(&self, obj: Value) {
        self.rt.block_on(self.remove(obj));
    }

    /// Lets `sa` list the secrets of `ns`, as a gateway's chart grants it (a real cluster: a Role
    /// and RoleBinding; the fake allows everything not refused).
    pub fn grant_secret_list(&self, ns: &str, sa: &str) {
        if self.is_fake() {
            return;
        }
        let name = format!("{sa}-secrets");
        self.apply(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": ns},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "watch", "list"]}]}));
        self.apply(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]}),
        );
    }

    /// `sa` may not list the secrets of `ns` (on a real cluster nothing grants it by default).
    pub fn refuse_secret_list(&self, ns: &str, sa: &str) {
        if let Some(fake) = &self.fake {
            fake.refuse_access(ns, sa);
        }
    }

    /// Kubernetes mode, the lease and mesh ConfigMap in this cluster's test namespace, and timings
    /// short enough for tests.
    fn daemon_args(&self) -> Vec<&str> {
        vec![
            "--config-source",
            "kubernetes",
            "--system-namespace",
            &self.ns,
            "--lease-duration",
            "2s",
            "--lease-renew",
            "200ms",
            "--debounce-after",
            "20ms",
        ]
    }

    /// `rudder serve` in Kubernetes mode against this cluster, with the lease and mesh ConfigMap in
    /// this cluster's test namespace.
    pub fn rudder(&self, extra: &[&str]) -> Daemon {
        self.rudder_env(extra, &[])
    }

    /// `rudder` with environment changes, as `Daemon::spawn_env` takes them.
    pub fn rudder_env(&self, extra: &[&str], env: &[(&str, Option<&str>)]) -> Daemon {
        let kc = self.kubeconfig.to_string_lossy().to_string();
        let mut args = self.daemon_args();
        args.extend(["--kubeconfig", kc.as_str()]);
        args.extend_from_slice(extra);
        Daemon::spawn_env("127.0.0.1:0", &args, env)
    }

    /// `rudder serve` as a pod of a `fake_in_cluster` runs it: no kubeconfig anywhere, the API
    /// server from `KUBERNETES_SERVICE_HOST`/`PORT` and the mounted service account.
    pub fn rudder_in_pod(&self, extra: &[&str]) -> Daemon {
        let mut args = self.daemon_args();
        args.extend_from_slice(extra);
        self.rudder_in_pod_with(&args, &[])
    }

    /// `rudder` in a pod of a `fake_in_cluster` with exactly `args` (the subcommand included, as a
    /// chart renders them) and `env` besides the pod's own.
    pub fn rudder_in_pod_with(&self, args: &[&str], env: &[(&str, Option<&str>)]) -> Daemon {
        let fake = self.fake.as_ref().expect("an in-cluster fake");
        let port = fake.addr.port().to_string();
        let sa = fake.sa_dir().to_string_lossy().to_string();
        let home = fake.sa_dir().join("..").to_string_lossy().to_string();
        let mut all: Vec<(&str, Option<&str>)> = vec![
            ("KUBECONFIG", None),
            ("RUST_LOG", None),
            ("HOME", Some(&home)),
            ("KUBERNETES_SERVICE_HOST", Some("127.0.0.1")),
            ("KUBERNETES_SERVICE_PORT", Some(&port)),
            ("RUDDER_SERVICE_ACCOUNT_DIR", Some(&sa)),
        ];
        all.extend_from_slice(env);
        Daemon::spawn_env("127.0.0.1:0", args, &all)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.is_fake() {
            let ns =
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}});
            let api = self.api(&ns);
            let name = self.ns.clone();
            let _ = self
                .rt
                .block_on(async { api.delete(&name, &DeleteParams::default()).await });
        }
    }
}

/// A Secret's `data[key]`, decoded.
pub fn secret_text(s: &Value, key: &str) -> String {
    use base64::Engine;
    let b64 = s["data"][key].as_str().unwrap_or_default();
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
    .unwrap()
}

/// A CustomResourceDefinition serving `v1` and `v1beta1` of an Istio kind.
pub fn istio_crd(group: &str, plural: &str, kind: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": format!("{plural}.{group}")},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": plural, "kind": kind, "singular": kind.to_lowercase()},
                    "versions": [{"name": "v1", "served": true, "storage": true}, {"name": "v1beta1", "served": true, "storage": false}]}})
}
