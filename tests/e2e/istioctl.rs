//! istioctl's requests played against the daemon: `istioctl proxy-status` (`istio.io/debug/syncz`,
//! and `istio.io/debug/config_dump` for one pod), `istioctl x version` (the control plane's
//! identifier in the sync answer) and `istioctl x internal-debug` (`istio.io/debug` pages), sent as
//! istioctl's ADS client sends them (a `GENERATOR=event` node, a nonce on the first request, a
//! service-account token on the TLS port) and read with the protobuf types istioctl reads them
//! with. No registry here ships an istioctl binary, so its requests are replayed.
//! The fake API server always; a real one too when `KUBECONFIG` is set.

use crate::common::ads::{CDS, Sotw};
use crate::common::ca::channel;
use crate::common::cluster::Cluster;
use crate::common::{Daemon, eventually, http_get};
use envoy_types::pb::envoy::admin::v3::{ClustersConfigDump, ConfigDump};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::envoy::service::status::v3::{ClientConfig, ConfigStatus};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use prost::Message;
use serde_json::json;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

const DOMAIN: &str = "istiod.istio-system.svc";
const SYNCZ: &str = "istio.io/debug/syncz";
const CONFIG_DUMP: &str = "istio.io/debug/config_dump";
const DEBUG: &str = "istio.io/debug";

/// istioctl's ADS client (istio's `adsc` as `istioctl` configures it): the node of a sidecar
/// named `test-1` in the caller's namespace with `GENERATOR=event`, one request, one answer.
struct Istioctl {
    tx: mpsc::Sender<DiscoveryRequest>,
    rx: tonic::Streaming<DiscoveryResponse>,
}

fn string(s: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(s.into())),
    }
}

impl Istioctl {
    async fn open(
        channel: tonic::transport::Channel,
        token: Option<&str>,
        namespace: &str,
        type_url: &str,
        names: &[&str],
    ) -> Result<Istioctl, tonic::Status> {
        let (tx, rx) = mpsc::channel(4);
        let metadata = Struct {
            fields: [
                ("GENERATOR", "event"),
                ("SERVICE_ACCOUNT", "default"),
                ("NAMESPACE", namespace),
                ("ISTIO_VERSION", "65536.65536.65536"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), string(v)))
            .collect(),
        };
        tx.send(DiscoveryRequest {
            node: Some(Node {
                id: format!("sidecar~10.0.0.99~test-1.{namespace}~{namespace}.svc.cluster.local"),
                metadata: Some(metadata),
                ..Default::default()
            }),
            type_url: type_url.into(),
            resource_names: names.iter().map(|n| n.to_string()).collect(),
            // adsc sets a nonce (the time) on every request, the first included.
            response_nonce: "2026-12-05 04:00:00.000000001 +0000 UTC".into(),
            ..Default::default()
        })
        .await
        .unwrap();
        let mut request = tonic::Request::new(ReceiverStream::new(rx));
        if let Some(token) = token {
            request
                .metadata_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        let rx = AggregatedDiscoveryServiceClient::new(channel)
            .max_decoding_message_size(64 * 1024 * 1024)
            .stream_aggregated_resources(request)
            .await?
            .into_inner();
        Ok(Istioctl { tx, rx })
    }

    /// The one answer istioctl waits for, or the status the stream ended with.
    async fn answer(&mut self) -> Result<DiscoveryResponse, tonic::Status> {
        match tokio::time::timeout(Duration::from_secs(10), self.rx.message()).await {
            Ok(Ok(Some(r))) => Ok(r),
            Ok(Ok(None)) => Err(tonic::Status::cancelled("stream ended")),
            Ok(Err(status)) => Err(status),
            Err(_) => panic!("no answer in time"),
        }
    }

    async fn ask(
        channel: tonic::transport::Channel,
        token: Option<&str>,
        namespace: &str,
        type_url: &str,
        names: &[&str],
    ) -> Result<DiscoveryResponse, tonic::Status> {
        Istioctl::open(channel, token, namespace, type_url, names)
            .await?
            .answer()
            .await
    }
}

fn client_configs(r: &DiscoveryResponse) -> Vec<ClientConfig> {
    r.resources
        .iter()
        .map(|a| {
            assert_eq!(
                a.type_url,
                "type.googleapis.com/envoy.service.status.v3.ClientConfig"
            );
            ClientConfig::decode(a.value.as_slice()).expect("ClientConfig")
        })
        .collect()
}

fn ids(configs: &[ClientConfig]) -> Vec<String> {
    let mut ids: Vec<String> = configs
        .iter()
        .map(|c| c.node.as_ref().unwrap().id.clone())
        .collect();
    ids.sort();
    ids
}

/// A sidecar that has its clusters and ACKed them.
async fn synced_proxy(daemon: &Daemon, node_id: &str) -> Sotw {
    let mut s = Sotw::open(daemon.addr("grpc-xds"), node_id).await.unwrap();
    let cds = s.recv().await;
    assert_eq!(cds.type_url, CDS);
    s.ack(&cds, &[]).await;
    s
}

#[test]
fn istioctls_debug_requests_are_answered_as_istiod_answers_them() {
    for c in Cluster::all("ctl") {
        let ns = c.ns.clone();
        let apps = format!("{ns}-apps");
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": apps}}));
        c.apply(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": apps},
            "spec": {"ports": [{"name": "http", "port": 80}], "clusterIP": if c.is_fake() { json!("10.96.0.30") } else { serde_json::Value::Null }}}));
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let root = c.ca_root();
        // istioctl's token: the `default` service account of the system namespace.
        let admin = c.token("default");
        let app = c.token_in(&apps, "default");
        let web = format!("web-0.{apps}");
        let gateway = format!("gw-0.{ns}");
        c.rt.block_on(async {
            let _web = synced_proxy(
                &daemon,
                &format!("sidecar~10.1.0.5~{web}~{apps}.svc.cluster.local"),
            )
            .await;
            let _gateway = synced_proxy(
                &daemon,
                &format!("router~10.1.0.6~{gateway}~{ns}.svc.cluster.local"),
            )
            .await;
            let tls = channel(daemon.addr("grpc-xds-tls"), &root, DOMAIN, None)
                .await
                .expect("TLS to 15012");

            // istioctl proxy-status: every proxy's sync state, the caller itself left out.
            let mut ctl = Istioctl::open(tls.clone(), Some(&admin), &ns, SYNCZ, &[])
                .await
                .unwrap();
            let syncz = ctl.answer().await.unwrap();
            assert_eq!(syncz.type_url, SYNCZ);
            let configs = client_configs(&syncz);
            assert_eq!(ids(&configs), [gateway.clone(), web.clone()]);
            // `rudder shadow` reads a control plane with these requests: the same proxies, with
            // the node ids they connected with.
            let shadow = rudder::compare::control_plane::ControlPlane::connect(
                &daemon.addr("grpc-xds-tls").to_string(),
                &ns,
                Some(rudder::compare::control_plane::Tls {
                    ca_pem: root.clone(),
                    server_name: DOMAIN.into(),
                }),
                Some(admin.clone()),
            )
            .await
            .unwrap();
            let served = shadow.proxies("cluster.local").await.unwrap();
            let names: Vec<&str> = served.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(names, [gateway.as_str(), web.as_str()]);
            assert_eq!(
                served[1].node.id,
                format!("sidecar~10.1.0.5~{web}~{apps}.svc.cluster.local")
            );
            let web_config = configs
                .iter()
                .find(|c| c.node.as_ref().unwrap().id == web)
                .unwrap();
            let meta = &web_config
                .node
                .as_ref()
                .unwrap()
                .metadata
                .as_ref()
                .unwrap()
                .fields;
            assert_eq!(meta["NAMESPACE"], string(&apps));
            assert_eq!(meta["CLUSTER_ID"], string("Kubernetes"));
            let cds = web_config
                .generic_xds_configs
                .iter()
                .find(|x| x.type_url == CDS)
                .expect("CDS state");
            assert_eq!(cds.config_status, ConfigStatus::Synced as i32);
            assert!(cds.last_updated.is_some());
            // istioctl x version: the control plane's identity and build, as istiod's JSON.
            let identifier: serde_json::Value = serde_json::from_str(
                &syncz
                    .control_plane
                    .as_ref()
                    .expect("control plane")
                    .identifier,
            )
            .unwrap();
            assert_eq!(identifier["Component"], "istiod");
            // The Istio release Rudder implements, which istioctl compares with the proxies'
            // versions to warn of skew; Rudder's own version beside it.
            assert_eq!(
                identifier["Info"]["version"],
                rudder::metrics::ISTIO_VERSION,
                "{identifier}"
            );
            assert_eq!(
                identifier["Info"]["rudder_version"],
                env!("CARGO_PKG_VERSION"),
                "{identifier}"
            );
            // istioctl ACKs what it got: the ACK is not answered again.
            ctl.tx
                .send(DiscoveryRequest {
                    type_url: SYNCZ.into(),
                    response_nonce: syncz.nonce.clone(),
                    version_info: syncz.version_info.clone(),
                    ..Default::default()
                })
                .await
                .unwrap();
            assert!(
                tokio::time::timeout(Duration::from_millis(300), ctl.rx.message())
                    .await
                    .is_err(),
                "an ACK is not answered"
            );

            // istioctl proxy-status <pod>: the pod's config as Envoy admin dumps.
            let dump = Istioctl::ask(tls.clone(), Some(&admin), &ns, CONFIG_DUMP, &[&web])
                .await
                .unwrap();
            let clusters = dump
                .resources
                .iter()
                .find(|a| a.type_url.ends_with("envoy.admin.v3.ClustersConfigDump"))
                .map(|a| ClustersConfigDump::decode(a.value.as_slice()).unwrap())
                .expect("clusters in the dump");
            let names: Vec<String> = clusters
                .dynamic_active_clusters
                .iter()
                .map(|d| {
                    envoy_types::pb::envoy::config::cluster::v3::Cluster::decode(
                        d.cluster.as_ref().unwrap().value.as_slice(),
                    )
                    .unwrap()
                    .name
                })
                .collect();
            let web_cluster = format!("outbound|80||web.{apps}.svc.cluster.local");
            assert!(names.contains(&web_cluster), "{names:?}");
            // istioctl builds its comparison from the answer's resources as a ConfigDump.
            let as_dump = ConfigDump {
                configs: dump.resources.clone(),
            };
            assert_eq!(as_dump.configs.len(), 7);
            let nobody = Istioctl::ask(tls.clone(), Some(&admin), &ns, CONFIG_DUMP, &["nobody.x"])
                .await
                .unwrap();
            assert!(nobody.resources.is_empty(), "not connected here: no dump");

            // istioctl x internal-debug: an HTTP debug page by path, its body as the resource.
            let page = Istioctl::ask(tls.clone(), Some(&admin), &ns, DEBUG, &["syncz"])
                .await
                .unwrap();
            let body: serde_json::Value = serde_json::from_slice(&page.resources[0].value).unwrap();
            let listed: Vec<&str> = body
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["proxy"].as_str().unwrap())
                .collect();
            assert!(listed.contains(&web.as_str()), "{body}");
            let page = Istioctl::ask(
                tls.clone(),
                Some(&admin),
                &ns,
                DEBUG,
                &[&format!("config_dump?proxyID={web}")],
            )
            .await
            .unwrap();
            let body: serde_json::Value = serde_json::from_slice(&page.resources[0].value).unwrap();
            assert!(body["configs"].is_array(), "{body}");

            // A caller outside the system namespace sees its own namespace only, and of the
            // pages only config dumps.
            let own = Istioctl::ask(tls.clone(), Some(&app), &apps, SYNCZ, &[])
                .await
                .unwrap();
            assert_eq!(ids(&client_configs(&own)), std::slice::from_ref(&web));
            let foreign = Istioctl::ask(tls.clone(), Some(&app), &apps, CONFIG_DUMP, &[&gateway])
                .await
                .unwrap();
            assert!(foreign.resources.is_empty(), "another namespace's proxy");
            let refused = Istioctl::ask(tls.clone(), Some(&app), &apps, DEBUG, &["syncz"])
                .await
                .unwrap_err();
            assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused}");
            let page = Istioctl::ask(
                tls.clone(),
                Some(&app),
                &apps,
                DEBUG,
                &[&format!("config_dump?proxyID={gateway}")],
            )
            .await
            .unwrap();
            assert!(
                String::from_utf8_lossy(&page.resources[0].value)
                    .starts_with("Proxy not connected"),
                "another namespace's proxy is not shown"
            );

            // Nobody is answered without proving who they are: on the plaintext port, or on the
            // TLS port without a token.
            let plain = tonic::transport::Endpoint::from_shared(format!(
                "http://{}",
                daemon.addr("grpc-xds")
            ))
            .unwrap()
            .connect()
            .await
            .unwrap();
            for (ch, token) in [(plain, Some(admin.as_str())), (tls.clone(), None)] {
                let refused = Istioctl::ask(ch, token, &ns, SYNCZ, &[]).await.unwrap_err();
                assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused}");
            }
        });
        c.delete(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": apps}}));
    }
}
