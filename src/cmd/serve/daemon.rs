//! What every subsystem of the daemon shares (the store, the metrics, readiness, the tasks and
//! their shutdown), and the name this replica goes by.

use super::metrics::DaemonMetrics;
use crate::store::Store;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::warn;

pub(super) fn identity() -> String {
    std::env::var("POD_NAME").unwrap_or_else(|_| {
        let host = std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "rudder".into());
        format!("{host}-{}", std::process::id())
    })
}

/// What every subsystem shares: the store, the metrics, readiness, and the tasks with their
/// common shutdown.
pub(super) struct Daemon {
    pub(super) store: Arc<Store>,
    pub(super) metrics: DaemonMetrics,
    pub(super) ready: Arc<AtomicBool>,
    pub(super) cancel: CancellationToken,
    pub(super) tasks: TaskTracker,
    /// What the push loop judged last, for the status writers (`model::judged`).
    pub(super) judged: crate::model::judged::JudgedSender,
}

impl Daemon {
    /// Stops every task, waiting at most `drain` for them.
    pub(super) async fn drain(self, drain: Duration) -> anyhow::Result<()> {
        self.cancel.cancel();
        self.tasks.close();
        if tokio::time::timeout(drain, self.tasks.wait())
            .await
            .is_err()
        {
            warn!(?drain, "tasks did not stop within the drain duration");
        }
        Ok(())
    }
}
