//! The Kubernetes-sourced churn benchmark of docs/performance.md: the in-process fake API server
//! (the tests' own, speaking the real list/watch protocol), a release `rudder serve` watching it,
//! and `rudder-loadgen --kubeconfig` writing the mesh there and churning it: deployments scaling
//! (EndpointSlice updates at `--scale-rate`), a rolling restart, new Services.
//!
//! `cargo bench --bench kube_churn -- [loadgen flags]`. The defaults are 1,000 Services in 50
//! Sidecar-scoped namespaces and 10,000 proxies; flags given here override them. The daemon gets
//! this process's environment (e.g. `PILOT_ENABLE_EDS_DEBOUNCE=false`); `RUDDER_BIN=path` and
//! `LOADGEN_BIN=path` run other builds of the daemon and the generator instead of this one's.
//! `REMOTE_CLUSTERS=N` adds N remote clusters (each a fake API server of its own, named by a
//! remote secret in the primary as `istioctl create-remote-secret` writes it): the generator writes
//! the same Services into each, with pods of their own, and churns all of them.

#[path = "../tests/e2e/common/fake_k8s.rs"]
mod fake_k8s;

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

/// Below the ephemeral port range, which the proxies' connections fill.
const XDS: &str = "127.0.0.1:26010";
const MONITORING: &str = "127.0.0.1:26014";

fn sidecar_crd() -> serde_json::Value {
    serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "sidecars.networking.istio.io"},
        "spec": {"group": "networking.istio.io", "scope": "Namespaced",
                 "names": {"plural": "sidecars", "kind": "Sidecar", "singular": "sidecar"},
                 "versions": [{"name": "v1", "served": true, "storage": true}]}})
}

fn ready(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.write_all(b"GET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

/// `--remote-kubeconfigs` naming every remote fake, or nothing without remotes.
fn remote_args(remotes: &[fake_k8s::FakeApi]) -> Vec<String> {
    if remotes.is_empty() {
        return Vec::new();
    }
    let paths: Vec<String> = remotes
        .iter()
        .map(|r| r.kubeconfig.display().to_string())
        .collect();
    vec!["--remote-kubeconfigs".to_string(), paths.join(",")]
}

fn main() -> ExitCode {
    // `cargo test --all-targets` runs benches without `--bench`: nothing to measure then.
    if !std::env::args().any(|a| a == "--bench") {
        return ExitCode::SUCCESS;
    }
    let extra: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let fake = fake_k8s::FakeApi::start();
    let remotes: Vec<fake_k8s::FakeApi> = (0..std::env::var("REMOTE_CLUSTERS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0))
        .map(|_| fake_k8s::FakeApi::start())
        .collect();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let client = rudder::k8s::client(Some(&fake.kubeconfig))
            .await
            .expect("client");
        let crds: kube::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
            kube::Api::all(client.clone());
        let crd = serde_json::from_value(sidecar_crd()).expect("CRD");
        crds.create(&Default::default(), &crd).await.expect("create the Sidecar CRD");
        let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
            kube::Api::namespaced(client, "istio-system");
        for (i, remote) in remotes.iter().enumerate() {
            let id = format!("remote-{}", i + 1);
            let kubeconfig = std::fs::read_to_string(&remote.kubeconfig).expect("kubeconfig");
            let secret = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("istio-remote-secret-{id}"), "namespace": "istio-system",
                             "labels": {"istio/multiCluster": "true"}},
                "stringData": {id: kubeconfig},
            }))
            .expect("secret");
            secrets
                .create(&Default::default(), &secret)
                .await
                .expect("create the remote secret");
        }
    });
    let work = tempfile::tempdir().expect("temporary directory");
    let http = "127.0.0.1:26080";
    for port in [XDS, MONITORING, http] {
        if std::net::TcpListener::bind(port).is_err() {
            eprintln!("error: {port} is in use (is an earlier run still going?)");
            return ExitCode::FAILURE;
        }
    }
    // RUDDER_BIN runs another daemon build against this bench (an A/B comparison).
    let rudder = std::env::var_os("RUDDER_BIN").unwrap_or(env!("CARGO_BIN_EXE_rudder").into());
    let mut daemon = Command::new(rudder)
        .args(["serve", "--config-source", "kubernetes", "--kubeconfig"])
        .arg(&fake.kubeconfig)
        .args(["--system-namespace", "istio-system", "--ca-dir"])
        .arg(work.path().join("ca"))
        .args([
            "--grpc-addr",
            XDS,
            "--monitoring-addr",
            MONITORING,
            "--http-addr",
            http,
        ])
        .args([
            "--secure-grpc-addr",
            "127.0.0.1:26012",
            "--https-addr",
            "127.0.0.1:26017",
        ])
        .args([
            "--log-level",
            "warn",
            "--max-requests-per-second",
            "1000000",
        ])
        .spawn()
        .expect("start rudder");
    let started = Instant::now();
    // A daemon that could not start ends the bench at once, rather than after the wait below
    // with the generator measuring nothing.
    while !ready(http) && started.elapsed() < Duration::from_secs(60) {
        if let Ok(Some(exit)) = daemon.try_wait() {
            eprintln!("error: rudder exited before the run: {exit}");
            return ExitCode::FAILURE;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let loadgen =
        std::env::var_os("LOADGEN_BIN").unwrap_or(env!("CARGO_BIN_EXE_rudder-loadgen").into());
    let status = Command::new(loadgen)
        .args([
            "--xds-addr",
            XDS,
            "--monitoring-addr",
            MONITORING,
            "--kubeconfig",
        ])
        .arg(&fake.kubeconfig)
        .args([
            "--services",
            "1000",
            "--namespaces",
            "50",
            "--sidecar-scope",
        ])
        .args(["--proxies", "10000"])
        .args(remote_args(&remotes))
        .args(&extra)
        .status();
    let _ = daemon.kill();
    let _ = daemon.wait();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}
