//! What every admin handler reads: the store, metrics, sources, the xDS server's status once it
//! runs, who may use `/debug`, and the caller an `istio.io/debug` request came from.

use crate::metrics::Metrics;
use crate::source::file::FileStatus;
use crate::store::Store;
use crate::xds::server::status::{ConnectionStatus, XdsStatus};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Clone)]
pub struct AdminState {
    pub store: Arc<Store>,
    pub metrics: Arc<Metrics>,
    pub sources: Arc<Mutex<Vec<FileStatus>>>,
    /// Set once every source finished its initial sync.
    pub ready: Arc<AtomicBool>,
    /// Set once the xDS server runs (after the initial sync).
    pub xds: Arc<OnceLock<XdsStatus>>,
    /// Who may use `/debug` from elsewhere than localhost; set once the CA's authenticator exists.
    pub debug_access: Arc<OnceLock<DebugAccess>>,
    /// The bounds on clients, for `/debug/limitz`.
    pub limits: Arc<Vec<crate::metrics::Limit>>,
    /// The injection settings in force, for `/debug/inject`; set once the injector exists.
    pub inject_template: Arc<OnceLock<InjectTemplate>>,
    /// The remote clusters the multicluster secrets name, for `/debug/clusterz`.
    pub remote_clusters: crate::source::kube::multicluster::RemoteClusters,
}

/// Reads the sidecar injection settings in force.
pub type InjectTemplate = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// Debug endpoints show every proxy's config and set log levels: as istiod, a request from
/// anywhere but localhost needs a bearer token (checked as the CA checks them) of a service
/// account in the system namespace, unless access is opened on purpose (`--debug-auth none`).
pub struct DebugAccess {
    pub open: bool,
    pub system_namespace: String,
    pub auth: Arc<dyn crate::model::identity::Authenticate>,
}

/// A page read for an `istio.io/debug` request: the xDS stream already verified the caller, and
/// `namespace` (a caller outside the system namespace) limits what it sees.
#[derive(Clone)]
pub(super) struct InternalCaller {
    pub(super) namespace: Option<String>,
}

/// The caller's namespace when a page must be limited to it.
pub(super) fn caller_namespace(caller: &Option<axum::Extension<InternalCaller>>) -> Option<&str> {
    caller.as_ref().and_then(|c| c.0.namespace.as_deref())
}

pub(super) fn xds_connections(s: &AdminState) -> Vec<ConnectionStatus> {
    xds(s).map(|x| x.connections()).unwrap_or_default()
}

pub(super) fn xds(s: &AdminState) -> Option<&XdsStatus> {
    s.xds.get()
}
