//! Kubernetes watchers feeding the store, like client-go informers: list, then watch; relist on 410
//! Gone; back off on errors. Every (re)list replaces the kind's contents in one store batch, so a
//! restarted watch never drops or duplicates objects.

use super::convert::IntoConfig;
use crate::config::{Config, ConfigKey, Kind};
use crate::metrics::{K8sEventLabels, KindLabels, TypeLabels};
use crate::source::metrics::KubeMetrics;
use crate::store::{Change, StoreWriter};
use crate::validation::validate;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher::{self, Event};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, info, info_span, warn};

/// Readiness across watchers: ready once every registered part finished its initial sync.
#[derive(Default)]
pub struct Readiness {
    parts: Mutex<BTreeMap<String, bool>>,
    changed: tokio::sync::Notify,
}

impl Readiness {
    pub fn register(&self, part: &str) {
        self.parts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(part.to_string())
            .or_insert(false);
    }

    pub fn set(&self, part: &str) {
        self.parts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(part.to_string(), true);
        self.changed.notify_waiters();
    }

    pub fn is_ready(&self) -> bool {
        self.parts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .all(|v| *v)
    }

    pub fn pending(&self) -> Vec<String> {
        self.parts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, v)| !**v)
            .map(|(k, _)| k.clone())
            .collect()
    }

    pub async fn wait(&self) {
        loop {
            let notified = self.changed.notified();
            if self.is_ready() {
                return;
            }
            notified.await;
        }
    }
}

/// Shared by every watcher task.
#[derive(Clone)]
pub(super) struct Ctx {
    pub(super) store: StoreWriter,
    pub(super) metrics: Arc<KubeMetrics>,
    pub(super) readiness: Arc<Readiness>,
}

/// Turns a watched object into a store object, says why it cannot be one, or (`None`) that the
/// watcher leaves it to another (a ConfigMap a named watcher keeps).
pub(super) type Convert<K> =
    Arc<dyn Fn(K) -> Result<Option<Config>, (ConfigKey, String)> + Send + Sync>;

pub(super) fn typed<K: IntoConfig>() -> Convert<K> {
    Arc::new(|k: K| Ok(Some(k.into_config())))
}

/// What one watcher feeds: its kind, its readiness part, how objects convert, and which store keys
/// it is authoritative for (what a relist may delete).
pub(super) struct WatchSpec<K> {
    pub(super) kind: Kind,
    pub(super) part: String,
    pub(super) convert: Convert<K>,
    pub(super) owns: Arc<dyn Fn(&ConfigKey) -> bool + Send + Sync>,
    /// This control plane's revision, for kinds istiod reads by revision (Istio's config, the
    /// Gateway API's routes and policies): an object labelled `istio.io/rev` for another revision
    /// is not ours, as if it did not exist; one without the label is everyone's.
    pub(super) revision: Option<String>,
}

/// istiod's `LabelsInRevision`: unlabelled objects belong to every revision, labelled ones to the
/// revision they name (tags do not count for config, as in istiod).
pub fn in_revision(labels: Option<&BTreeMap<String, String>>, revision: &str) -> bool {
    match labels.and_then(|l| l.get(REVISION_LABEL)) {
        None => true,
        Some(rev) => revision.is_empty() || rev == revision,
    }
}

/// The label that assigns an object (config, a namespace, a pod) to one control-plane revision.
pub const REVISION_LABEL: &str = "istio.io/rev";

/// Starts one watcher whose `spec.part` the initial sync waits for; it runs until `cancel`,
/// under `span`. The local and remote clusters' watchers start here (a remote cluster's
/// Gateways, outside its sync, start `run_watch` themselves).
pub(super) fn spawn_watch<K>(
    ctx: &Ctx,
    tasks: &TaskTracker,
    cancel: &CancellationToken,
    api: Api<K>,
    config: watcher::Config,
    spec: WatchSpec<K>,
    span: tracing::Span,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Debug + Send + 'static,
{
    ctx.readiness.register(&spec.part);
    tasks.spawn(run_watch::<K>(ctx.clone(), api, config, spec, cancel.clone()).instrument(span));
}

/// Runs one watcher until cancelled.
pub(super) async fn run_watch<K>(
    ctx: Ctx,
    api: Api<K>,
    config: watcher::Config,
    spec: WatchSpec<K>,
    cancel: CancellationToken,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Debug + Send + 'static,
{
    let WatchSpec {
        kind,
        part,
        convert,
        owns,
        revision,
    } = spec;
    let foreign = |obj: &K| {
        revision
            .as_deref()
            .is_some_and(|rev| !in_revision(obj.meta().labels.as_ref(), rev))
    };
    let mut stream = crate::k8s::backed_off_watch(api, config);
    let mut relist: Option<(Vec<Config>, BTreeSet<ConfigKey>)> = None;
    let mut errors = crate::k8s::RepeatLog::default();
    let type_label = kind.qualified_name();
    let family = if kind.is_istio() {
        &ctx.metrics.k8s_cfg_events
    } else {
        &ctx.metrics.k8s_events
    };
    let count = |event: &str| {
        family
            .get_or_create(&K8sEventLabels {
                r#type: type_label.clone(),
                event: event.into(),
            })
            .inc();
    };
    loop {
        let next = tokio::select! {
            _ = cancel.cancelled() => return,
            next = stream.next() => next,
        };
        let event = match next {
            None => return,
            Some(Err(e)) => {
                watch_failed(&ctx, &mut errors, &part, kind, &e);
                continue;
            }
            // Announced before the list request: nothing has answered yet.
            Some(Ok(Event::Init)) => Event::Init,
            Some(Ok(event)) => {
                errors.recovered(part.trim_start_matches("watch/"), "watch recovered");
                event
            }
        };
        let judged = || {
            ctx.metrics
                .k8s_events_judged
                .get_or_create(&KindLabels {
                    kind: kind.qualified_name(),
                })
                .inc();
        };
        // Counted once the event is applied (below), so the store already shows it.
        let counted = matches!(event, Event::Apply(_) | Event::Delete(_) | Event::InitDone);
        match event {
            Event::Init => relist = Some((Vec::new(), BTreeSet::new())),
            Event::InitApply(obj) => {
                let (configs, keep) = relist.get_or_insert_with(Default::default);
                if foreign(&obj) {
                    debug!(kind = %kind, name = ?obj.meta().name, "another revision's object; not served");
                    continue;
                }
                match convert(obj) {
                    Ok(Some(c)) => configs.push(c),
                    Ok(None) => {}
                    Err((key, why)) => {
                        reject(&ctx, kind, &key, &why);
                        keep.insert(key);
                    }
                }
            }
            Event::InitDone => {
                let (configs, keep) = relist.take().unwrap_or_default();
                replace_kind(&ctx, kind, &*owns, configs, keep, &count);
                ctx.readiness.set(&part);
            }
            // Relabelled for another revision: gone for this one.
            Event::Apply(obj) if foreign(&obj) => {
                let key = ConfigKey {
                    kind,
                    namespace: obj.meta().namespace.clone().unwrap_or_default(),
                    name: obj.meta().name.clone().unwrap_or_default(),
                    cluster: String::new(),
                };
                debug!(object = %key, "another revision's object; not served");
                if owns(&key) && ctx.store.delete(&key).is_some() {
                    count("delete");
                }
            }
            Event::Apply(obj) => match convert(obj) {
                Ok(None) => {}
                Ok(Some(c)) => {
                    if let Some(e) = ctx.store.upsert(c) {
                        count(&format!("{:?}", e.kind).to_lowercase());
                    }
                }
                // The last good version, if any, stays in the store.
                Err((key, why)) => reject(&ctx, kind, &key, &why),
            },
            Event::Delete(obj) => {
                let key = match convert(obj) {
                    Ok(None) => continue,
                    Ok(Some(c)) => c.key(),
                    Err((key, _)) => key,
                };
                if ctx.store.delete(&key).is_some() {
                    count("delete");
                }
            }
        }
        if counted {
            judged();
        }
    }
}

/// A (re)list's objects replace what the store holds of `kind` (of the keys this watcher owns)
/// in one batch; `keep` are keys listed but invalid, whose last good version stays.
fn replace_kind(
    ctx: &Ctx,
    kind: Kind,
    owns: &(dyn Fn(&ConfigKey) -> bool + Send + Sync),
    configs: Vec<Config>,
    keep: BTreeSet<ConfigKey>,
    count: &dyn Fn(&str),
) {
    let listed: BTreeSet<ConfigKey> = configs.iter().map(Config::key).chain(keep).collect();
    let snapshot = ctx.store.snapshot();
    let gone: Vec<Change> = snapshot
        .list(kind)
        .map(|e| e.config.key())
        .filter(|k| owns(k) && !listed.contains(k))
        .map(Change::Delete)
        .collect();
    let n = configs.len();
    let events = ctx.store.apply(
        gone.into_iter()
            .chain(configs.into_iter().map(Change::Upsert))
            .collect(),
    );
    for e in &events {
        count(&format!("{:?}", e.kind).to_lowercase());
    }
    info!(kind = %kind, objects = n, changes = events.len(), "synced");
}

/// A watch error: logged once per outage (then counted), and counted by kind.
fn watch_failed(
    ctx: &Ctx,
    errors: &mut crate::k8s::RepeatLog,
    part: &str,
    kind: Kind,
    error: &dyn std::fmt::Display,
) {
    errors.failed(
        part.trim_start_matches("watch/"),
        "watch failed; retrying with backoff",
        error,
    );
    ctx.metrics
        .k8s_watch_errors
        .get_or_create(&TypeLabels {
            r#type: kind.qualified_name(),
        })
        .inc();
}

fn reject(ctx: &Ctx, kind: Kind, key: &ConfigKey, why: &str) {
    warn!(object = %key, error = why, "invalid object from the API server; keeping its last good version");
    ctx.metrics
        .k8s_invalid_objects
        .get_or_create(&KindLabels {
            kind: kind.qualified_name(),
        })
        .inc();
}

/// Which objects the Kubernetes source watches, and where.
#[derive(Debug, Clone)]
pub struct KubeSourceConfig {
    /// Namespace of the mesh ConfigMap `istio` (Istio's root namespace).
    pub root_namespace: String,
    /// Name of the injector ConfigMap (`istio-sidecar-injector[-<revision>]`).
    pub injector_configmap: String,
    /// Name of the mesh ConfigMap (`istio`, or `istio-<revision>` as istiod's chart names it for
    /// a revision); stored as `istio`.
    pub mesh_configmap: String,
    /// This control plane's revision (`--revision`, istiod's REVISION): config labelled
    /// `istio.io/rev` for another one is not read.
    pub revision: String,
}

pub struct KubeSource {
    client: kube::Client,
    ctx: Ctx,
    config: KubeSourceConfig,
}

/// What the config cluster's watchers own: every key of their kind but those remote clusters'
/// watchers wrote (`source::kube::multicluster`).
fn any_key(key: &ConfigKey) -> bool {
    key.cluster.is_empty()
}

impl KubeSource {
    pub fn new(
        client: kube::Client,
        store: StoreWriter,
        metrics: Arc<KubeMetrics>,
        readiness: Arc<Readiness>,
        config: KubeSourceConfig,
    ) -> Self {
        KubeSource {
            client,
            ctx: Ctx {
                store,
                metrics,
                readiness,
            },
            config,
        }
    }

    /// Starts every watcher on `tasks`; they stop when `cancel` fires.
    pub fn spawn(self, tasks: &TaskTracker, cancel: &CancellationToken) {
        let all = watcher::Config::default;
        self.watch_all::<Service>(tasks, cancel, Kind::Service, all());
        self.watch_all::<EndpointSlice>(tasks, cancel, Kind::EndpointSlice, all());
        self.watch_all::<Pod>(tasks, cancel, Kind::Pod, all());
        self.watch_all::<Namespace>(tasks, cancel, Kind::Namespace, all());
        self.watch_all::<Node>(tasks, cancel, Kind::Node, all());
        // Kubernetes Ingress of the mesh's ingress class, served by the ingress gateway.
        self.watch_all::<Ingress>(tasks, cancel, Kind::Ingress, all());
        self.watch_all::<IngressClass>(tasks, cancel, Kind::IngressClass, all());
        // TLS secrets for gateways (`credentialName`); service-account tokens and Helm releases
        // are never TLS material, so the API server filters them out (istiod does the same).
        self.watch_all::<Secret>(
            tasks,
            cancel,
            Kind::Secret,
            all().fields("type!=kubernetes.io/service-account-token,type!=helm.sh/release.v1"),
        );
        self.watch_mesh_config(tasks, cancel);
        self.watch_named_config_maps(tasks, cancel);
        self.watch_ca_bundles(tasks, cancel);
        self.watch_istio_kinds(tasks, cancel);
    }

    /// A Kubernetes kind in every namespace, each object as it is.
    fn watch_all<K>(
        &self,
        tasks: &TaskTracker,
        cancel: &CancellationToken,
        kind: Kind,
        config: watcher::Config,
    ) where
        K: kube::Resource<DynamicType = ()>
            + IntoConfig
            + Clone
            + serde::de::DeserializeOwned
            + Debug
            + Send
            + 'static,
    {
        let spec = WatchSpec {
            kind,
            part: format!("watch/{}", kind.name()),
            convert: typed::<K>(),
            owns: Arc::new(any_key),
            revision: None,
        };
        let span = info_span!("k8s-watch", kind = kind.name());
        spawn_watch(
            &self.ctx,
            tasks,
            cancel,
            Api::all(self.client.clone()),
            config,
            spec,
            span,
        );
    }

    /// The mesh ConfigMap of this revision (istiod's: `istio`, or `istio-<revision>`), kept in
    /// the store as `istio`, the name every reader of the mesh config looks for.
    fn watch_mesh_config(&self, tasks: &TaskTracker, cancel: &CancellationToken) {
        let root = self.config.root_namespace.clone();
        let mesh_only = move |k: &ConfigKey| {
            k.cluster.is_empty()
                && k.namespace == root
                && k.name == crate::config::mesh::MESH_CONFIGMAP
        };
        let spec = WatchSpec {
            kind: Kind::ConfigMap,
            part: "watch/ConfigMap".to_string(),
            convert: Arc::new(|mut cm: ConfigMap| {
                cm.metadata.name = Some(crate::config::mesh::MESH_CONFIGMAP.to_string());
                Ok(Some(cm.into_config()))
            }),
            owns: Arc::new(mesh_only),
            revision: None,
        };
        spawn_watch(
            &self.ctx,
            tasks,
            cancel,
            Api::namespaced(self.client.clone(), &self.config.root_namespace),
            watcher::Config::default()
                .fields(&format!("metadata.name={}", self.config.mesh_configmap)),
            spec,
            info_span!("k8s-watch", kind = "ConfigMap", name = %self.config.mesh_configmap),
        );
    }

    /// ConfigMaps watched by name, each with its own readiness part: the injector's template
    /// (istiod's `istio-sidecar-injector`) in the root namespace, and the CA's root cert in every
    /// namespace (written by the leader, repaired on edits).
    fn watch_named_config_maps(&self, tasks: &TaskTracker, cancel: &CancellationToken) {
        let c = &self.client;
        let root = self.config.root_namespace.clone();
        let injector_name = self.config.injector_configmap.clone();
        let named = [
            (
                Api::namespaced(c.clone(), &self.config.root_namespace),
                self.config.injector_configmap.clone(),
                Arc::new(move |k: &ConfigKey| {
                    k.cluster.is_empty() && k.namespace == root && k.name == injector_name
                }) as Arc<dyn Fn(&ConfigKey) -> bool + Send + Sync>,
            ),
            (
                Api::all(c.clone()),
                crate::config::mesh::ROOT_CERT_CONFIGMAP.to_string(),
                Arc::new(|k: &ConfigKey| {
                    k.cluster.is_empty() && k.name == crate::config::mesh::ROOT_CERT_CONFIGMAP
                }),
            ),
        ];
        for (api, name, owns) in named {
            let spec = WatchSpec {
                kind: Kind::ConfigMap,
                part: format!("watch/ConfigMap/{name}"),
                convert: typed::<ConfigMap>(),
                owns,
                revision: None,
            };
            spawn_watch(
                &self.ctx,
                tasks,
                cancel,
                api,
                watcher::Config::default().fields(&format!("metadata.name={name}")),
                spec,
                info_span!("k8s-watch", kind = "ConfigMap", name = %name),
            );
        }
    }

    /// ConfigMaps with a CA bundle (`ca.crt`), which BackendTLSPolicies name, in every
    /// namespace: kept with that key alone and without the metadata every write changes, so
    /// an unrelated edit changes nothing in the store. The ConfigMaps the watchers above keep
    /// are left to them.
    fn watch_ca_bundles(&self, tasks: &TaskTracker, cancel: &CancellationToken) {
        let root = self.config.root_namespace.clone();
        let names = [
            self.config.mesh_configmap.clone(),
            crate::config::mesh::MESH_CONFIGMAP.to_string(),
            self.config.injector_configmap.clone(),
        ];
        let named = Arc::new(move |namespace: &str, name: &str| {
            name == crate::config::mesh::ROOT_CERT_CONFIGMAP
                || (namespace == root && names.iter().any(|n| n == name))
        });
        let part = "watch/ConfigMap/ca-bundles".to_string();
        let skip = named.clone();
        let spec = WatchSpec {
            kind: Kind::ConfigMap,
            part,
            convert: Arc::new(move |cm: ConfigMap| {
                let namespace = cm.metadata.namespace.clone().unwrap_or_default();
                let name = cm.metadata.name.clone().unwrap_or_default();
                if skip(&namespace, &name) {
                    return Ok(None);
                }
                let ca = cm
                    .data
                    .and_then(|mut d| d.remove(crate::config::CA_BUNDLE_KEY))
                    .map(|c| BTreeMap::from([(crate::config::CA_BUNDLE_KEY.to_string(), c)]));
                let bundle = ConfigMap {
                    metadata: kube::api::ObjectMeta {
                        name: Some(name),
                        namespace: Some(namespace),
                        ..Default::default()
                    },
                    data: ca,
                    ..Default::default()
                };
                Ok(Some(bundle.into_config()))
            }),
            owns: Arc::new(move |k: &ConfigKey| {
                k.cluster.is_empty() && !named(&k.namespace, &k.name)
            }),
            revision: None,
        };
        spawn_watch(
            &self.ctx,
            tasks,
            cancel,
            Api::all(self.client.clone()),
            watcher::Config::default(),
            spec,
            info_span!("k8s-watch", kind = "ConfigMap", name = "ca-bundles"),
        );
    }

    /// Istio's and the Gateway API's kinds: watched once their CRDs are installed, at the best
    /// version both sides serve.
    fn watch_istio_kinds(&self, tasks: &TaskTracker, cancel: &CancellationToken) {
        let (crd_tx, crd_rx) = watch::channel(None::<BTreeMap<String, Vec<String>>>);
        self.ctx
            .readiness
            .register("watch/CustomResourceDefinition");
        tasks.spawn(
            watch_crds(
                self.client.clone(),
                self.ctx.clone(),
                crd_tx,
                cancel.clone(),
            )
            .instrument(info_span!("k8s-watch", kind = "CustomResourceDefinition")),
        );
        for kind in Kind::config_kinds() {
            // Gateway API kinds by group too: its `Gateway` is not Istio's.
            let part = if kind.is_gateway_api() {
                format!("watch/{}.{}", kind.name(), kind.group())
            } else {
                format!("watch/{}", kind.name())
            };
            self.ctx.readiness.register(&part);
            tasks.spawn(
                supervise_istio_kind(
                    self.client.clone(),
                    self.ctx.clone(),
                    (kind, self.config.revision.clone()),
                    part,
                    crd_rx.clone(),
                    cancel.clone(),
                )
                .instrument(info_span!("k8s-watch", kind = kind.name())),
            );
        }
    }
}

/// An API object as config: its status (analysis results, conditions written by the leader) and
/// the resourceVersion a status write bumps are not config, so such a write leaves the store's
/// object unchanged and pushes nothing; `status.addresses` is kept when `keep_addresses` (what a
/// ServiceEntry's VIPs or a remote east-west gateway's reach come from).
pub(super) fn config_value(
    obj: &DynamicObject,
    keep_addresses: bool,
) -> Result<serde_json::Value, String> {
    let mut value = serde_json::to_value(obj).map_err(|e| e.to_string())?;
    if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.remove("managedFields");
        meta.remove("resourceVersion");
    }
    if let Some(obj) = value.as_object_mut() {
        let addresses = keep_addresses
            .then(|| obj.get("status").and_then(|s| s.get("addresses")).cloned())
            .flatten();
        obj.remove("status");
        if let Some(addresses) = addresses {
            obj.insert(
                "status".into(),
                serde_json::json!({ "addresses": addresses }),
            );
        }
    }
    Ok(value)
}

fn crd_name(kind: Kind) -> String {
    format!("{}.{}", kind.plural(), kind.group())
}

/// Keeps `tx` up to date with installed CRDs and their served versions (`None` until the first list).
async fn watch_crds(
    client: kube::Client,
    ctx: Ctx,
    tx: watch::Sender<Option<BTreeMap<String, Vec<String>>>>,
    cancel: CancellationToken,
) {
    let api: Api<CustomResourceDefinition> = Api::all(client);
    let mut stream = crate::k8s::backed_off_watch(api, watcher::Config::default());
    let mut installed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut relist: Option<BTreeMap<String, Vec<String>>> = None;
    let mut crd_errors = crate::k8s::RepeatLog::default();
    let served = |crd: &CustomResourceDefinition| -> Vec<String> {
        crd.spec
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| v.name.clone())
            .collect()
    };
    let name = |crd: &CustomResourceDefinition| crd.metadata.name.clone().unwrap_or_default();
    let mut warned = BTreeSet::new();
    loop {
        let next = tokio::select! {
            _ = cancel.cancelled() => return,
            next = stream.next() => next,
        };
        match next {
            None => return,
            Some(Err(e)) => {
                crd_errors.failed(
                    "CustomResourceDefinition",
                    "watch failed; retrying with backoff",
                    &e,
                );
                ctx.metrics
                    .k8s_watch_errors
                    .get_or_create(&TypeLabels {
                        r#type: "CustomResourceDefinition".into(),
                    })
                    .inc();
                continue;
            }
            Some(Ok(Event::Init)) => relist = Some(BTreeMap::new()),
            Some(Ok(Event::InitApply(crd))) => {
                relist
                    .get_or_insert_with(BTreeMap::new)
                    .insert(name(&crd), served(&crd));
            }
            Some(Ok(Event::InitDone)) => {
                crd_errors.recovered("CustomResourceDefinition", "watch recovered");
                installed = relist.take().unwrap_or_default();
                ctx.readiness.set("watch/CustomResourceDefinition");
            }
            Some(Ok(Event::Apply(crd))) => {
                installed.insert(name(&crd), served(&crd));
            }
            Some(Ok(Event::Delete(crd))) => {
                installed.remove(&name(&crd));
            }
        }
        note_unserved(&ctx, &installed, &mut warned);
        if ctx
            .readiness
            .pending()
            .iter()
            .all(|p| p != "watch/CustomResourceDefinition")
        {
            tx.send_replace(Some(installed.clone()));
        }
    }
}

/// The Gateway API CRDs Rudder does not serve (UDPRoute, the
/// experimental x-k8s.io kinds), when installed, are named in a warning (once each) and counted
/// (`rudder_k8s_unserved_crds`): their objects must not disappear in silence.
fn note_unserved(
    ctx: &Ctx,
    installed: &BTreeMap<String, Vec<String>>,
    warned: &mut BTreeSet<String>,
) {
    let served: BTreeSet<String> = Kind::GATEWAY_API.iter().map(|k| crd_name(*k)).collect();
    let unserved: Vec<&String> = installed
        .keys()
        .filter(|n| {
            n.ends_with(".gateway.networking.k8s.io") || n.ends_with(".gateway.networking.x-k8s.io")
        })
        .filter(|n| !served.contains(*n))
        .collect();
    ctx.metrics.unserved_crds.set(unserved.len() as i64);
    for crd in unserved {
        if warned.insert(crd.clone()) {
            warn!(
                crd = %crd,
                "Gateway API CRD installed that Rudder does not serve; its objects are not watched and nothing is generated for them"
            );
        }
    }
}

/// Watches one Istio kind while its CRD is installed; when the CRD goes, so do its objects.
async fn supervise_istio_kind(
    client: kube::Client,
    ctx: Ctx,
    (kind, revision): (Kind, String),
    part: String,
    mut crds: watch::Receiver<Option<BTreeMap<String, Vec<String>>>>,
    cancel: CancellationToken,
) {
    let name = crd_name(kind);
    let mut current: Option<(String, CancellationToken)> = None;
    loop {
        let version = crds.borrow_and_update().as_ref().map(|installed| {
            installed.get(&name).and_then(|served| {
                kind.served_versions()
                    .iter()
                    .find(|v| served.iter().any(|s| s == *v))
                    .map(|v| v.to_string())
            })
        });
        match version {
            None => {} // CRDs not listed yet
            Some(None) => {
                if let Some((_, stop)) = current.take() {
                    stop.cancel();
                    let gone: Vec<Change> = ctx
                        .store
                        .snapshot()
                        .list(kind)
                        .map(|e| Change::Delete(e.config.key()))
                        .collect();
                    info!(kind = %kind, objects = gone.len(), "CRD removed; dropping its objects");
                    ctx.store.apply(gone);
                } else {
                    debug!(kind = %kind, "CRD not installed; waiting for it");
                }
                // Nothing to sync for a kind that does not exist.
                ctx.readiness.set(&part);
            }
            Some(Some(v)) if current.as_ref().is_none_or(|(cur, _)| *cur != v) => {
                if let Some((_, stop)) = current.take() {
                    stop.cancel();
                }
                info!(kind = %kind, version = v, "watching");
                let stop = cancel.child_token();
                let ar = ApiResource {
                    group: kind.group().into(),
                    version: v.clone(),
                    api_version: format!("{}/{v}", kind.group()),
                    kind: kind.qualified_name(),
                    plural: kind.plural(),
                };
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
                let convert: Convert<DynamicObject> = Arc::new(move |obj: DynamicObject| {
                    let key = ConfigKey {
                        kind,
                        namespace: obj.metadata.namespace.clone().unwrap_or_default(),
                        name: obj.metadata.name.clone().unwrap_or_default(),
                        cluster: String::new(),
                    };
                    // A ServiceEntry's auto-allocated addresses are the one part of a status
                    // that is config: the registry serves them as its VIPs.
                    let value = config_value(&obj, kind == Kind::ServiceEntry)
                        .map_err(|e| (key.clone(), e))?;
                    let config = Config::from_json(value, "default")
                        .map_err(|e| (key.clone(), e.to_string()))?
                        .ok_or_else(|| (key.clone(), "empty object".to_string()))?;
                    validate(&config).map_err(|errs| {
                        (
                            key.clone(),
                            errs.iter()
                                .map(|e| e.to_string())
                                .collect::<Vec<_>>()
                                .join("; "),
                        )
                    })?;
                    Ok(Some(config))
                });
                tokio::spawn(
                    run_watch(
                        ctx.clone(),
                        api,
                        watcher::Config::default(),
                        WatchSpec {
                            kind,
                            part: part.clone(),
                            convert,
                            owns: Arc::new(any_key),
                            // istiod reads a Gateway API Gateway from every revision (its
                            // status only from the owning one).
                            revision: (kind != Kind::KubernetesGateway).then(|| revision.clone()),
                        },
                        stop.clone(),
                    )
                    .instrument(info_span!("k8s-watch", kind = kind.name(), version = %v)),
                );
                current = Some((v, stop));
            }
            Some(Some(_)) => {}
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            changed = crds.changed() => if changed.is_err() { return },
        }
    }
}
