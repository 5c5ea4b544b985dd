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

/// Retry delays of a failing watch: from 100 ms, doubling, at most 1 s, back to the start after a
/// success. client-go's (and kube-rs's default) grow to 30 s, so after an API server outage the
/// next relist, the one that learns what changed (a watch answered `410 Gone`), could come a
/// minute late while deleted services were still served; a watcher retries once a second at
/// most, which an API server coming back handles easily.
pub struct WatchBackoff {
    next: std::time::Duration,
}

impl WatchBackoff {
    const FIRST: std::time::Duration = std::time::Duration::from_millis(100);
    const MAX: std::time::Duration = std::time::Duration::from_secs(1);
}

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff { next: Self::FIRST }
    }
}

impl Iterator for WatchBackoff {
    type Item = std::time::Duration;

    fn next(&mut self) -> Option<std::time::Duration> {
        let now = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        Some(now)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}
