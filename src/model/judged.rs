//! What the push loop last judged: a snapshot and what the push built from it. Status writers
//! describe this view rather than building their own, so the status of an object says what
//! proxies were given — the same registry (discoverySelectors and cluster networks applied), the
//! same mesh settings (MeshConfig applied, the last good one kept), the same Gateway API
//! translation.

use super::Registry;
use super::gateway_api::Translation;
use super::mesh::MeshSettings;
use crate::store::Snapshot;
use std::sync::Arc;

#[derive(Clone)]
pub struct Judged {
    pub snapshot: Arc<Snapshot>,
    pub registry: Arc<Registry>,
    pub mesh: MeshSettings,
    /// The Gateway API objects of `snapshot`, translated once for proxies and status alike.
    pub gateway_api: Arc<Translation>,
}

/// Where the push loop publishes each view it judged (none before the first).
pub type JudgedSender = tokio::sync::watch::Sender<Option<Arc<Judged>>>;
/// Where a status writer waits for the next.
pub type JudgedReceiver = tokio::sync::watch::Receiver<Option<Arc<Judged>>>;

impl Judged {
    /// The view of `snapshot` under `mesh`, built whole as the push's first round builds it
    /// (tests; the push loop updates its registry and translation incrementally).
    #[cfg(any(test, feature = "testing"))]
    pub fn build(snapshot: Arc<Snapshot>, mesh: MeshSettings) -> Judged {
        let registry = Registry::build_with(
            &snapshot,
            &mesh.domain_suffix,
            &mesh.discovery_selectors,
            &mesh.cluster_networks,
        );
        let gateway_api = super::gateway_api::translate(&snapshot, &mesh.domain_suffix);
        Judged {
            snapshot,
            registry: Arc::new(registry),
            mesh,
            gateway_api: Arc::new(gateway_api),
        }
    }
}
