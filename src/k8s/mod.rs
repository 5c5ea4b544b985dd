//! Kubernetes plumbing shared by every module that talks to the API server: the client, leader
//! election, and the table of API calls the chart's RBAC must allow. The watchers that write the
//! store are a config source (`source::kube`).

pub mod leader;
pub mod metrics;
pub mod rbac;

/// Where the kubelet mounts a pod's service-account credentials (token, CA bundle, namespace).
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Overrides [`SERVICE_ACCOUNT_DIR`]: for tests, and for running outside a pod with a copy of a
/// pod's credentials.
pub const SERVICE_ACCOUNT_DIR_ENV: &str = "RUDDER_SERVICE_ACCOUNT_DIR";

/// Why no Kubernetes client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error("no kubeconfig ({kubeconfig}) and no in-cluster service account ({dir}: {in_cluster})")]
    NoConfig {
        kubeconfig: kube::config::KubeconfigError,
        dir: String,
        in_cluster: String,
    },
    #[error(transparent)]
    Client(#[from] kube::Error),
}

/// Builds a client from `kubeconfig` if given, else as client-go (and so istiod) does: KUBECONFIG
/// or ~/.kube/config, else the pod's service account.
pub async fn client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig_error = |source| ClientError::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let kc = kube::config::Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(kubeconfig_error)?
        }
        None => match kube::Config::from_kubeconfig(&Default::default()).await {
            Ok(config) => config,
            Err(kubeconfig) => {
                let dir = std::env::var_os(SERVICE_ACCOUNT_DIR_ENV)
                    .map(std::path::PathBuf::from)
                    .unwrap_or_else(|| SERVICE_ACCOUNT_DIR.into());
                in_cluster(&dir).map_err(|e| ClientError::NoConfig {
                    kubeconfig,
                    dir: dir.display().to_string(),
                    in_cluster: e,
                })?
            }
        },
    };
    Ok(kube::Client::try_from(config)?)
}

/// The in-cluster configuration from `dir`: the API server from KUBERNETES_SERVICE_HOST/PORT, its
/// CA from `ca.crt` and the bearer token from `token`. Both files are named, not read once: the
/// kubelet rotates projected tokens (and the CA bundle may rotate), and the client re-reads them
/// every minute, so a daemon that runs for weeks keeps a valid token.
fn in_cluster(dir: &std::path::Path) -> Result<kube::Config, String> {
    let var = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
    let host = var("KUBERNETES_SERVICE_HOST")?;
    let port: u16 = var("KUBERNETES_SERVICE_PORT")?
        .parse()
        .map_err(|e| format!("KUBERNETES_SERVICE_PORT: {e}"))?;
    let authority = match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
        _ => format!("{host}:{port}"),
    };
    let url: axum::http::Uri = format!("https://{authority}")
        .parse()
        .map_err(|e| format!("API server address {authority}: {e}"))?;
    let ca_file = dir.join("ca.crt");
    let ca = std::fs::read(&ca_file).map_err(|e| format!("{}: {e}", ca_file.display()))?;
    let roots: Vec<Vec<u8>> = pem::parse_many(&ca)
        .map_err(|e| format!("{}: {e}", ca_file.display()))?
        .into_iter()
        .filter(|p| p.tag() == "CERTIFICATE")
        .map(|p| p.into_contents())
        .collect();
    if roots.is_empty() {
        return Err(format!("{} holds no certificate", ca_file.display()));
    }
    let token_file = dir.join("token");
    if !token_file.is_file() {
        return Err(format!("{} does not exist", token_file.display()));
    }
    let namespace = std::fs::read_to_string(dir.join("namespace"))
        .map(|ns| ns.trim().to_string())
        .unwrap_or_default();
    let mut config = kube::Config::new(url);
    if !namespace.is_empty() {
        config.default_namespace = namespace;
    }
    config.root_cert = Some(roots);
    config.root_cert_file = Some(ca_file);
    config.auth_info.token_file = Some(token_file.display().to_string());
    Ok(config)
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
    pub const FIRST: std::time::Duration = std::time::Duration::from_millis(100);
    pub const MAX: std::time::Duration = std::time::Duration::from_secs(1);
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

/// `watcher(api, config)` with [`WatchBackoff`] between failed attempts, reset only once the
/// API server answered. kube-rs's `.backoff()` resets on any event, and the watcher announces
/// each retry with an `Event::Init` before it lists: against an API server that never answers
/// (a bad remote secret) the delay never grew past its first step. The wait is taken before the
/// next poll, so a caller selecting on its cancellation stops at once.
pub fn backed_off_watch<K>(
    api: kube::Api<K>,
    config: kube::runtime::watcher::Config,
) -> futures::stream::BoxStream<
    'static,
    Result<kube::runtime::watcher::Event<K>, kube::runtime::watcher::Error>,
>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    use futures::StreamExt;
    use kube::runtime::utils::Backoff;
    use kube::runtime::watcher::Event;
    let inner = kube::runtime::watcher::watcher(api, config).boxed();
    futures::stream::unfold(
        (inner, WatchBackoff::default(), None::<std::time::Duration>),
        |(mut inner, mut backoff, wait)| async move {
            if let Some(wait) = wait {
                tokio::time::sleep(wait).await;
            }
            let item = inner.next().await?;
            let wait = match &item {
                Err(_) => Some(backoff.next().unwrap_or(WatchBackoff::MAX)),
                Ok(Event::Init) => None,
                Ok(_) => {
                    backoff.reset();
                    None
                }
            };
            Some((item, (inner, backoff, wait)))
        },
    )
    .boxed()
}

/// How often one repeating failure (a watcher retrying, a lease renewal failing) is logged: the
/// first at once, then one line per this long saying how many were left out (each still counted
/// in its metric). During an API server outage every watcher retries every second; logging each
/// retry wrote hundreds of lines in seconds.
const REPEAT_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// One repeating failure's log: at most a line per `REPEAT_LOG_EVERY`, and a line when it ends.
#[derive(Debug, Default)]
pub struct RepeatLog {
    last_logged: Option<std::time::Instant>,
    not_logged: u64,
    failures: u64,
}

impl RepeatLog {
    /// Notes a failure of `what` (a kind, a lease), logging `message` with it when due.
    pub fn failed(&mut self, what: &str, message: &str, error: &dyn std::fmt::Display) {
        self.failures += 1;
        if self
            .last_logged
            .is_some_and(|at| at.elapsed() < REPEAT_LOG_EVERY)
        {
            self.not_logged += 1;
            return;
        }
        tracing::warn!(what, %error, failures_not_logged = self.not_logged, "{message}");
        self.last_logged = Some(std::time::Instant::now());
        self.not_logged = 0;
    }

    /// Logs `message` once when `what` works again after failures.
    pub fn recovered(&mut self, what: &str, message: &str) {
        if self.failures > 0 {
            tracing::info!(what, failures = self.failures, "{message}");
            *self = RepeatLog::default();
        }
    }
}

#[cfg(test)]
mod repeat_log_tests {
    use super::RepeatLog;

    #[test]
    fn a_repeating_failure_is_logged_once_per_period_and_its_end_once() {
        let mut log = RepeatLog::default();
        for _ in 0..100 {
            log.failed("Service", "watch failed", &"503");
        }
        assert_eq!((log.failures, log.not_logged), (100, 99));
        assert!(log.last_logged.is_some());
        log.recovered("Service", "watch recovered");
        assert_eq!(log.failures, 0, "reset once recovered");
        log.recovered("Service", "watch recovered");
        log.failed("Service", "watch failed", &"503");
        assert_eq!(log.not_logged, 0, "a new failure after recovery is logged");
    }
}
