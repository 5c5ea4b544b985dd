//! Kubernetes plumbing shared by every module that talks to the API server: the client, leader
//! election, and the table of API calls the chart's RBAC must allow. The watchers that write the
//! store are a config source (`source::kube`).

pub mod leader;
pub mod metrics;
pub mod rbac;

/// Builds a client from `kubeconfig` if given, else from the environment (KUBECONFIG, ~/.kube/config,
/// or the in-cluster service account).
pub async fn client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, kube::Error> {
    let config = match kubeconfig {
        Some(path) => {
            let kc =
                kube::config::Kubeconfig::read_from(path).map_err(kube::Error::InferKubeconfig)?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(kube::Error::InferKubeconfig)?
        }
        None => kube::Config::infer()
            .await
            .map_err(kube::Error::InferConfig)?,
    };
    kube::Client::try_from(config)
}

/// True when a Kubernetes API is configured in the environment.
pub fn environment_has_cluster() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
        || std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty())
}
