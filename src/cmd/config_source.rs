//! The config a daemon started with the same flags would serve, read once into a store of this
//! process (for `rudder shadow`, `what-if` and `precheck`): the directory of `--config-dir`, or
//! the cluster's objects through the same watchers, stopped after their initial list. Nothing is
//! written anywhere: no status, no lease, no webhook patch.

use super::serve::{ServeArgs, check_files_mode};
use crate::model::mesh::MeshSettings;
use crate::source::file::FileSource;
use crate::source::kube::controller::{KubeSource, KubeSourceConfig, Readiness};
use crate::store::StoreWriter;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Longest the initial list of every watched kind may take.
const SYNC_WAIT: Duration = Duration::from_secs(120);

pub struct Loaded {
    pub store: StoreWriter,
    /// The flags' mesh settings (the mesh ConfigMap in the store applies on top).
    pub mesh: MeshSettings,
    /// What was read, for the report: the directory, or the cluster.
    pub described: String,
    /// The cluster's client, in Kubernetes mode.
    pub client: Option<kube::Client>,
}

/// Reads the config `args` points at.
pub async fn load(args: &ServeArgs) -> anyhow::Result<Loaded> {
    let use_kubernetes = args.uses_kubernetes();
    check_files_mode(args, use_kubernetes)?;
    let store = StoreWriter::default();
    let mut registry = crate::metrics::Registry::new();
    if !use_kubernetes {
        let metrics = Arc::new(crate::source::metrics::FileMetrics::register(&mut registry));
        let mut source = FileSource::new(
            &args.config_dir,
            &args.default_namespace,
            store.clone(),
            metrics,
        );
        if let Some(path) = &args.mesh_config {
            source = source.with_mesh_file(path, &args.system_namespace);
        }
        source.sync();
        let rejected: Vec<String> = source
            .status_handle()
            .lock()
            .map(|files| {
                files
                    .iter()
                    .filter_map(|f| Some(format!("{}: {}", f.path.display(), f.error.as_ref()?)))
                    .collect()
            })
            .unwrap_or_default();
        if !rejected.is_empty() {
            anyhow::bail!(
                "{} file(s) in {} are invalid (`rudder validate -f {}` says why): {}",
                rejected.len(),
                args.config_dir.display(),
                args.config_dir.display(),
                rejected.join(", ")
            );
        }
        return Ok(Loaded {
            store,
            mesh: args.mesh_settings(),
            described: format!("files in {}", args.config_dir.display()),
            client: None,
        });
    }
    let client = crate::k8s::client(args.kubeconfig.as_deref())
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach Kubernetes: {e}"))?;
    let metrics = Arc::new(crate::source::metrics::KubeMetrics::register(&mut registry));
    let readiness = Arc::new(Readiness::default());
    let (tasks, cancel) = (TaskTracker::new(), CancellationToken::new());
    KubeSource::new(
        client.clone(),
        store.clone(),
        metrics,
        readiness.clone(),
        KubeSourceConfig {
            root_namespace: args.system_namespace.clone(),
            injector_configmap: crate::webhook::inject::injector_configmap(&args.revision),
            mesh_configmap: super::serve::mesh_configmap(&args.revision),
            revision: args.revision.clone(),
        },
    )
    .spawn(&tasks, &cancel);
    let synced = tokio::time::timeout(SYNC_WAIT, readiness.wait()).await;
    cancel.cancel();
    tasks.close();
    tasks.wait().await;
    synced.map_err(|_| {
        anyhow::anyhow!("the cluster's objects were not all listed within {SYNC_WAIT:?}")
    })?;
    Ok(Loaded {
        store,
        mesh: args.mesh_settings(),
        described: format!("the cluster (revision {})", args.revision),
        client: Some(client),
    })
}
