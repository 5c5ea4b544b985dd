//! Multi-cluster: a primary reading remote clusters through remote secrets, as istiod does. Two
//! in-process fake API servers always; a real primary and remotes too when `KUBECONFIG` and
//! `REMOTE_KUBECONFIGS` (comma-separated kubeconfig paths) are set. The scenarios that need the
//! fake's hooks (pods with labels, a remote going away) say so and run on the fakes only.

use crate::common::ads::{CDS, EDS, Sotw, claims, cluster_names};
use crate::common::cluster::Cluster;
use crate::common::{Daemon, eventually, http_get};
use serde_json::{Value, json};
use std::path::PathBuf;

/// The primary and its remotes: the fakes, and the real clusters when both variables are set.
/// Every cluster of a set uses the same test namespace, so a Service has one hostname in all.
fn cluster_sets(name: &str) -> Vec<(Cluster, Vec<Cluster>)> {
    let mut out = vec![(Cluster::fake(name), vec![Cluster::fake(name)])];
    let primary = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty());
    let remotes = std::env::var("REMOTE_KUBECONFIGS").unwrap_or_default();
    if let Some(primary) = primary
        && !remotes.trim().is_empty()
    {
        let remotes = remotes
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| Cluster::real(PathBuf::from(p.trim()), name))
            .collect();
        out.push((Cluster::real(PathBuf::from(primary), name), remotes));
    }
    out
}

fn service(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
           "spec": {"ports": [{"name": "http-web", "port": 80, "targetPort": 8080}], "clusterIP": "10.96.0.10"}})
}

/// An EndpointSlice of `svc`; with `pods`, each endpoint points at pod `<svc>-<i>`.
fn slice(ns: &str, svc: &str, ips: &[&str], pods: bool) -> Value {
    let endpoints: Vec<Value> = ips
        .iter()
        .enumerate()
        .map(|(i, ip)| {
            let mut e = json!({"addresses": [ip], "conditions": {"ready": true}});
            if pods {
                e["targetRef"] =
                    json!({"kind": "Pod", "name": format!("{svc}-{i}"), "namespace": ns});
            }
            e
        })
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": format!("{svc}-slice"), "namespace": ns,
                        "labels": {"kubernetes.io/service-name": svc, "endpointslice.kubernetes.io/managed-by": "rudder-tests"}},
           "addressType": "IPv4", "ports": [{"name": "http-web", "port": 8080, "protocol": "TCP"}], "endpoints": endpoints})
}

/// The remote secret `istioctl create-remote-secret` writes: one kubeconfig per cluster ID.
fn remote_secret(ns: &str, name: &str, kubeconfigs: &[(&str, String)]) -> Value {
    use base64::Engine;
    let data: serde_json::Map<String, Value> = kubeconfigs
        .iter()
        .map(|(id, text)| {
            (
                id.to_string(),
                json!(base64::engine::general_purpose::STANDARD.encode(text)),
            )
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
           "metadata": {"name": name, "namespace": ns, "labels": {"istio/multiCluster": "true"},
                        "annotations": {"networking.istio.io/cluster": kubeconfigs[0].0}},
           "data": data})
}

fn outbound(ns: &str, svc: &str) -> String {
    format!("outbound|80||{svc}.{ns}.svc.cluster.local")
}

/// What a sidecar of `ns` is sent for `cluster` now: `None` when CDS does not have it, else the
/// endpoint addresses of its EDS.
fn endpoints_of(c: &Cluster, d: &Daemon, cluster: &str) -> Option<Vec<String>> {
    endpoints_in(c, d, cluster, "east")
}

/// `endpoints_of` for a sidecar of cluster `proxy_cluster` (`ISTIO_META_CLUSTER_ID`).
fn endpoints_in(
    c: &Cluster,
    d: &Daemon,
    cluster: &str,
    proxy_cluster: &str,
) -> Option<Vec<String>> {
    let mut out: Vec<String> = assignments_in(c, d, cluster, proxy_cluster)?
        .iter()
        .flat_map(|cla| cla.endpoints.iter())
        .flat_map(|l| l.lb_endpoints.iter())
        .filter_map(socket_ip)
        .collect();
    out.sort();
    Some(out)
}

/// The ClusterLoadAssignments a sidecar of `ns` in cluster `proxy_cluster`
/// (`ISTIO_META_CLUSTER_ID`) is sent for `cluster`; `None` when CDS does not have it.
fn assignments_in(
    c: &Cluster,
    d: &Daemon,
    cluster: &str,
    proxy_cluster: &str,
) -> Option<Vec<envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment>> {
    let id = format!("sidecar~10.9.9.9~client.{0}~{0}.svc.cluster.local", c.ns);
    c.rt.block_on(async {
        let metadata = [("CLUSTER_ID", proxy_cluster)];
        let mut s = Sotw::open_with_metadata(d.addr("grpc-xds"), &id, &metadata)
            .await
            .ok()?;
        let cds = s.recv().await;
        assert_eq!(cds.type_url, CDS);
        if !cluster_names(&cds).iter().any(|n| n == cluster) {
            return None;
        }
        s.ack(&cds, &[]).await;
        s.send(EDS, &[cluster], "", "", None).await;
        // A push of another type may come first.
        let mut eds = s.recv().await;
        while eds.type_url != EDS {
            s.ack(&eds, &[]).await;
            eds = s.recv().await;
        }
        Some(claims(&eds))
    })
}

/// The DNS name table (NDS) a DNS-capturing sidecar of `c.ns` in the config cluster is sent, as
/// istio-agent asks for it.
fn name_table(
    c: &Cluster,
    d: &Daemon,
) -> rudder::xds::generate::sidecar::name_table::pb::NameTable {
    use prost::Message;
    let id = format!("sidecar~10.9.9.9~client.{0}~{0}.svc.cluster.local", c.ns);
    c.rt.block_on(async {
        let metadata = [("DNS_CAPTURE", "true"), ("DNS_AUTO_ALLOCATE", "true")];
        let mut s = Sotw::open_with_metadata(d.addr("grpc-xds"), &id, &metadata)
            .await
            .unwrap();
        let cds = s.recv().await;
        s.ack(&cds, &[]).await;
        let nds = rudder::xds::types::TypeUrl::NameTable.url();
        s.send(nds, &[], "", "", None).await;
        let mut resp = s.recv().await;
        while resp.type_url != nds {
            s.ack(&resp, &[]).await;
            resp = s.recv().await;
        }
        assert_eq!(resp.resources.len(), 1, "one table");
        rudder::xds::generate::sidecar::name_table::pb::NameTable::decode(
            resp.resources[0].value.as_slice(),
        )
        .unwrap()
    })
}

/// The IP of an endpoint's socket address.
fn socket_ip(e: &envoy_types::pb::envoy::config::endpoint::v3::LbEndpoint) -> Option<String> {
    use envoy_types::pb::envoy::config::core::v3::address::Address;
    use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier;
    let Some(HostIdentifier::Endpoint(endpoint)) = &e.host_identifier else {
        return None;
    };
    match endpoint.address.as_ref()?.address.as_ref()? {
        Address::SocketAddress(socket) => Some(socket.address.clone()),
        _ => None,
    }
}

/// The `istio.workload` metadata istiod writes on an endpoint.
fn workload_label(e: &envoy_types::pb::envoy::config::endpoint::v3::LbEndpoint) -> Option<String> {
    use envoy_types::pb::google::protobuf::value::Kind;
    let value = e
        .metadata
        .as_ref()?
        .filter_metadata
        .get("istio")?
        .fields
        .get("workload")?;
    match &value.kind {
        Some(Kind::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

fn clusterz(d: &Daemon) -> Value {
    serde_json::from_str(&http_get(d.addr("monitoring"), "/debug/clusterz").1).unwrap()
}

fn metric_line(d: &Daemon, prefix: &str) -> Option<String> {
    let (_, metrics) = http_get(d.addr("monitoring"), "/metrics");
    metrics
        .lines()
        .find(|l| l.starts_with(prefix))
        .map(str::to_string)
}

/// A remote secret makes the remote cluster's Services and endpoints part of the mesh: a
/// hostname both clusters have gets both clusters' endpoints, a Service only the remote has
/// becomes a cluster; `/debug/clusterz` and the metrics show the remote synced. Deleting the
/// secret removes exactly that cluster's state.
#[test]
fn a_remote_secret_merges_the_remote_clusters_services_and_removing_it_removes_them() {
    for (primary, remotes) in cluster_sets("mc") {
        let ns = primary.ns.clone();
        let remote = &remotes[0];
        primary.apply(service(&ns, "reviews"));
        primary.apply(slice(&ns, "reviews", &["10.1.0.5"], false));
        remote.apply(service(&ns, "reviews"));
        remote.apply(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "reviews-0", "namespace": ns,
                         "labels": {"app": "reviews", "version": "v3"}},
            "spec": {"containers": [{"name": "app", "image": "reviews"}]}}));
        remote.apply(slice(&ns, "reviews", &["10.2.0.7"], true));
        remote.apply(service(&ns, "ratings"));
        remote.apply(slice(&ns, "ratings", &["10.2.0.9"], false));
        let kubeconfig = std::fs::read_to_string(&remote.kubeconfig).unwrap();
        let secret = remote_secret(&ns, "istio-remote-secret-west", &[("west", kubeconfig)]);
        primary.apply(secret.clone());
        // istiod's forms: the cluster ID from `CLUSTER_ID` (its chart's), and proxies still
        // reporting a cluster's old name are of that cluster.
        let daemon = primary.rudder_env(
            &["--clusterAliases=west-old=west"],
            &[("CLUSTER_ID", Some("east"))],
        );
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let reviews = outbound(&ns, "reviews");
        let ratings = outbound(&ns, "ratings");
        // The start waited for the remote's sync: both clusters' endpoints at once.
        assert_eq!(
            endpoints_of(&primary, &daemon, &reviews),
            Some(vec!["10.1.0.5".to_string(), "10.2.0.7".to_string()])
        );
        assert_eq!(
            endpoints_of(&primary, &daemon, &ratings),
            Some(vec!["10.2.0.9".to_string()])
        );
        // Each endpoint names its workload and cluster for Istio's metrics (istiod's
        // `istio.workload`): the remote's pod by its canonical labels, the primary's endpoint
        // without a pod by its namespace and cluster alone.
        let workloads: Vec<(String, String)> = assignments_in(&primary, &daemon, &reviews, "east")
            .expect("reviews' endpoints")
            .iter()
            .flat_map(|cla| cla.endpoints.iter())
            .flat_map(|l| l.lb_endpoints.iter())
            .filter_map(|e| Some((socket_ip(e)?, workload_label(e)?)))
            .collect();
        let mut workloads = workloads;
        workloads.sort();
        assert_eq!(
            workloads,
            [
                ("10.1.0.5".to_string(), format!(";{ns};;;east")),
                (
                    "10.2.0.7".to_string(),
                    format!("reviews-0;{ns};reviews;v3;west")
                ),
            ]
        );
        // A DNS-capturing sidecar resolves a Service only the remote cluster has by its name
        // (istio-agent's NameTable), as Kubernetes' DNS could not.
        let table = name_table(&primary, &daemon);
        let ratings_host = format!("ratings.{ns}.svc.cluster.local");
        let entry = table
            .table
            .get(&ratings_host)
            .unwrap_or_else(|| panic!("{ratings_host} not in {:?}", table.table.keys()));
        assert_eq!(entry.ips, ["10.96.0.10"]);
        assert_eq!(
            (entry.shortname.as_str(), entry.namespace.as_str()),
            ("ratings", ns.as_str())
        );
        assert_eq!(entry.registry, "Kubernetes");
        let clusters = clusterz(&daemon);
        assert_eq!(clusters[0]["id"], "east", "{clusters}");
        assert_eq!(clusters[1]["id"], "west", "{clusters}");
        assert_eq!(
            clusters[1]["secretName"],
            format!("{ns}/istio-remote-secret-west")
        );
        assert_eq!(clusters[1]["syncStatus"], "synced");
        assert_eq!(
            metric_line(&daemon, "istiod_managed_clusters{cluster_type=\"remote\"}").as_deref(),
            Some("istiod_managed_clusters{cluster_type=\"remote\"} 1")
        );

        // A cluster-local host (MeshConfig serviceSettings): each cluster's proxies get their
        // own cluster's endpoints only.
        primary.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "istio", "namespace": ns},
            "data": {"mesh": format!("serviceSettings:\n- settings: {{clusterLocal: true}}\n  hosts: [reviews.{ns}.svc.cluster.local]\n")}}));
        eventually(10, "reviews kept in each proxy's cluster", || {
            endpoints_of(&primary, &daemon, &reviews) == Some(vec!["10.1.0.5".to_string()])
                && endpoints_in(&primary, &daemon, &reviews, "west")
                    == Some(vec!["10.2.0.7".to_string()])
        });
        assert_eq!(
            endpoints_in(&primary, &daemon, &reviews, "west-old"),
            Some(vec!["10.2.0.7".to_string()]),
            "a proxy reporting the alias is of the aliased cluster"
        );
        primary.delete(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "istio", "namespace": ns}}));
        eventually(10, "reviews global again", || {
            endpoints_of(&primary, &daemon, &reviews).is_some_and(|e| e.len() == 2)
        });

        // A change in the remote follows.
        primary
            .rt
            .block_on(remote.put(slice(&ns, "reviews", &["10.2.0.7", "10.2.0.8"], false)));
        eventually(10, "the remote's new endpoint", || {
            endpoints_of(&primary, &daemon, &reviews).is_some_and(|e| e.len() == 3)
        });

        // The secret goes: the remote's services and endpoints go with it, the primary's stay.
        primary.delete(secret);
        eventually(10, "the remote's state removed", || {
            endpoints_of(&primary, &daemon, &ratings).is_none()
                && endpoints_of(&primary, &daemon, &reviews) == Some(vec!["10.1.0.5".to_string()])
        });
        assert_eq!(clusterz(&daemon).as_array().map(Vec::len), Some(1));
        assert_eq!(
            metric_line(&daemon, "istiod_managed_clusters{cluster_type=\"remote\"}").as_deref(),
            Some("istiod_managed_clusters{cluster_type=\"remote\"} 0")
        );
    }
}

/// Networks across clusters, on the fakes: the remote's system namespace names its network,
/// its east-west gateway is a Service labelled with that network, and a primary's sidecar is
/// sent the gateway for the remote's mTLS endpoints. The remote going away keeps its last
/// endpoints; a kubeconfig that would run a program is refused and shown as failed.
#[test]
fn remote_networks_outages_and_refused_kubeconfigs() {
    let primary = Cluster::fake("mcnet");
    let remote = Cluster::fake("mcnet");
    let ns = primary.ns.clone();
    primary.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    remote.apply(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": ns, "labels": {"topology.istio.io/network": "west-net"}}}));
    primary.apply(service(&ns, "reviews"));
    primary.apply(slice(&ns, "reviews", &["10.1.0.5"], false));
    remote.apply(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "reviews-0", "namespace": ns,
                     "labels": {"app": "reviews", "security.istio.io/tlsMode": "istio"}},
        "spec": {"serviceAccountName": "reviews", "containers": [{"name": "app", "image": "reviews"}]}}));
    remote.apply(service(&ns, "reviews"));
    remote.apply(slice(&ns, "reviews", &["10.2.0.7"], true));
    remote.apply(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "istio-eastwestgateway", "namespace": ns,
                     "labels": {"topology.istio.io/network": "west-net"}},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "tls", "port": 15443}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.50"}]}}}));
    let kubeconfig = std::fs::read_to_string(&remote.kubeconfig).unwrap();
    let evil = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://192.0.2.1\"}}]\nusers: [{name: u, user: {exec: {command: /bin/sh, args: [-c, \"cat /etc/shadow\"], apiVersion: client.authentication.k8s.io/v1}}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n";
    primary.apply(remote_secret(
        &ns,
        "istio-remote-secret-west",
        &[("west", kubeconfig.clone()), ("evil", evil.to_string())],
    ));
    let daemon = primary.rudder(&["--cluster-id", "east"]);
    eventually(60, "rudder ready", || {
        http_get(daemon.addr("http"), "/ready").0 == 200
    });
    let reviews = outbound(&ns, "reviews");
    // The local endpoint directly (its cluster has no network), the remote one through its
    // network's gateway.
    eventually(
        10,
        "the remote endpoint behind its network's gateway",
        || {
            endpoints_of(&primary, &daemon, &reviews)
                == Some(vec!["10.1.0.5".to_string(), "192.0.2.50".to_string()])
        },
    );
    let clusters = clusterz(&daemon);
    let evil = clusters
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "evil")
        .expect("the refused cluster is listed");
    assert_eq!(evil["syncStatus"], "failed", "{clusters}");
    assert!(
        evil["error"]
            .as_str()
            .unwrap()
            .contains("exec is not allowed"),
        "{clusters}"
    );
    assert!(metric_line(&daemon, "rudder_remote_cluster_errors_total{type=\"evil\"}").is_some());
    // istiod's `/debug/networkz`: the remote's gateway Service, of its cluster.
    let (status, body) = http_get(daemon.addr("http"), "/debug/networkz");
    assert_eq!(status, 200);
    let gateways: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        gateways,
        json!([{"Network": "west-net", "Cluster": "west", "Addr": "192.0.2.50", "Port": 15443,
                "HBONEPort": 0, "ServiceAccount": {"Namespace": "", "Name": ""}}])
    );
    // The refused kubeconfig leaves the secret: its cluster leaves `/debug/clusterz`.
    primary.apply(remote_secret(
        &ns,
        "istio-remote-secret-west",
        &[("west", kubeconfig)],
    ));
    eventually(10, "the refused cluster no longer listed", || {
        let clusters = clusterz(&daemon);
        clusters
            .as_array()
            .is_some_and(|list| list.len() == 2 && list.iter().all(|c| c["id"] != "evil"))
    });

    // The remote's API server goes away: its last endpoints stay, as istiod keeps them.
    drop(remote);
    std::thread::sleep(std::time::Duration::from_secs(2));
    primary.apply(slice(&ns, "reviews", &["10.1.0.5", "10.1.0.6"], false));
    eventually(
        10,
        "the primary's change, with the remote's last state",
        || {
            endpoints_of(&primary, &daemon, &reviews)
                == Some(vec![
                    "10.1.0.5".to_string(),
                    "10.1.0.6".to_string(),
                    "192.0.2.50".to_string(),
                ])
        },
    );
}

/// The CA reviews a token with the API server of the cluster the caller says it runs in
/// (istio-agent's `ClusterID`), as istiod: a remote pod's token is good there only, a cluster the
/// control plane does not know is refused, and so is a remote once its secret is gone. Fake
/// only: the tokens must be ones the API servers vouch for.
#[test]
fn the_ca_reviews_remote_tokens_with_their_own_cluster() {
    let primary = Cluster::fake("mcca");
    let remote = Cluster::fake("mcca");
    let ns = primary.ns.clone();
    remote
        .fake
        .as_ref()
        .unwrap()
        .add_token("remote-token", &ns, "reviews", &["istio-ca"]);
    let kubeconfig = std::fs::read_to_string(&remote.kubeconfig).unwrap();
    let secret = remote_secret(&ns, "istio-remote-secret-west", &[("west", kubeconfig)]);
    primary.apply(secret.clone());
    let daemon = primary.rudder(&[
        "--cluster-id",
        "east",
        "--clusterAliases",
        "west-old=west,east-old=east",
    ]);
    eventually(60, "rudder ready", || {
        http_get(daemon.addr("http"), "/ready").0 == 200
    });
    let root = primary.ca_root();
    let (csr, _) = crate::common::ca::csr(&[]);
    let ask = |cluster: Option<&str>| {
        primary.rt.block_on(async {
            let ch = crate::common::ca::channel(
                daemon.addr("grpc-xds-tls"),
                &root,
                "istiod.istio-system.svc",
                None,
            )
            .await
            .unwrap();
            match cluster {
                Some(id) => {
                    crate::common::ca::create_in_cluster(ch, &csr, "remote-token", id).await
                }
                None => crate::common::ca::create(ch, &csr, Some("remote-token"), 0).await,
            }
        })
    };
    let chain = ask(Some("west")).expect("reviewed by the remote's API server");
    assert!(chain[0].contains("BEGIN CERTIFICATE"));
    // A cluster's alias (istiod's --clusterAliases) is that cluster.
    ask(Some("west-old")).expect("an alias of the remote: reviewed by the remote");
    for (cluster, why) in [
        (None, "invalid bearer token"),
        (Some("east"), "invalid bearer token"),
        (Some("east-old"), "invalid bearer token"),
        (Some("north"), "claims to be in cluster \"north\""),
    ] {
        let err = ask(cluster).expect_err("refused");
        assert_eq!(
            err.code(),
            tonic::Code::Unauthenticated,
            "{cluster:?}: {err:?}"
        );
        assert!(err.message().contains(why), "{cluster:?}: {err:?}");
    }
    primary.delete(secret);
    eventually(10, "the remote forgotten", || {
        ask(Some("west")).is_err_and(|e| e.message().contains("claims to be in cluster"))
    });
}

/// EXTERNAL_ISTIOD (a primary–remote install): a remote whose system namespace names this
/// cluster in `topology.istio.io/controlPlaneClusters` gets the root certificate ConfigMap in
/// each of its namespaces, repaired when deleted, and our root in its webhook configurations of
/// this revision; a remote that does not name it gets nothing. On the fakes.
#[test]
fn a_led_remote_gets_root_certificates_and_webhook_bundles() {
    use crate::kubernetes::{ca_bundles, webhook_configuration};
    let primary = Cluster::fake("mclead");
    let led = Cluster::fake("mclead");
    let other = Cluster::fake("mclead");
    let ns = primary.ns.clone();
    led.apply(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": ns, "annotations": {"topology.istio.io/controlPlaneClusters": "east"}}}));
    other.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    for remote in [&led, &other] {
        remote
            .apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}));
    }
    let injector = webhook_configuration(
        "MutatingWebhookConfiguration",
        "istio-sidecar-injector",
        "default",
        "https://192.0.2.10:15017/inject",
        json!({"name": "sidecar-injector.istio.io"}),
    );
    led.apply(injector.clone());
    let secret = remote_secret(
        &ns,
        "istio-remote-secrets",
        &[
            ("led", std::fs::read_to_string(&led.kubeconfig).unwrap()),
            ("other", std::fs::read_to_string(&other.kubeconfig).unwrap()),
        ],
    );
    primary.apply(secret);
    let daemon = primary.rudder_env(
        &["--cluster-id", "east"],
        &[("EXTERNAL_ISTIOD", Some("true"))],
    );
    eventually(60, "rudder ready", || {
        http_get(daemon.addr("http"), "/ready").0 == 200
    });
    let root = primary.ca_root();
    let root_cm = |c: &Cluster, namespace: &str| {
        c.get_json(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "istio-ca-root-cert", "namespace": namespace}}))
            .and_then(|cm| cm["data"]["root-cert.pem"].as_str().map(str::to_string))
    };
    for namespace in [ns.as_str(), "apps"] {
        eventually(20, "the led remote's root ConfigMap", || {
            root_cm(&led, namespace).as_deref() == Some(root.as_str())
        });
    }
    eventually(20, "the led remote's injector trusts our root", || {
        ca_bundles(&led, &injector) == [root.clone()]
    });
    led.delete(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "istio-ca-root-cert", "namespace": "apps"}}));
    eventually(20, "repaired", || {
        root_cm(&led, "apps").as_deref() == Some(root.as_str())
    });
    assert_eq!(
        root_cm(&other, "apps"),
        None,
        "a remote that does not name us"
    );
}

/// `failoverPriority: [topology.istio.io/cluster]` ("prefer my own cluster"): istiod labels every
/// endpoint and proxy with its cluster, so each cluster's proxies get their own cluster's
/// endpoints at priority 0 and the other's at 1. On the fakes (the DestinationRule CRD).
#[test]
fn failover_priority_prefers_the_proxys_own_cluster() {
    let primary = Cluster::fake("mcfail");
    let remote = Cluster::fake("mcfail");
    let ns = primary.ns.clone();
    assert!(crate::kubernetes::crds_installed(
        &primary,
        [crate::common::cluster::istio_crd(
            "networking.istio.io",
            "destinationrules",
            "DestinationRule"
        )]
    ));
    primary.apply(service(&ns, "reviews"));
    primary.apply(slice(&ns, "reviews", &["10.1.0.5"], false));
    remote.apply(service(&ns, "reviews"));
    remote.apply(slice(&ns, "reviews", &["10.2.0.7"], false));
    primary.apply(json!({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
        "metadata": {"name": "reviews", "namespace": ns},
        "spec": {"host": format!("reviews.{ns}.svc.cluster.local"), "trafficPolicy": {
            "outlierDetection": {"consecutive5xxErrors": 3, "interval": "10s", "baseEjectionTime": "30s"},
            "loadBalancer": {"localityLbSetting": {"enabled": true,
                "failoverPriority": ["topology.istio.io/cluster"]}}}}}));
    let kubeconfig = std::fs::read_to_string(&remote.kubeconfig).unwrap();
    primary.apply(remote_secret(
        &ns,
        "istio-remote-secret-west",
        &[("west", kubeconfig)],
    ));
    let daemon = primary.rudder(&["--cluster-id", "east"]);
    eventually(60, "rudder ready", || {
        http_get(daemon.addr("http"), "/ready").0 == 200
    });
    let reviews = outbound(&ns, "reviews");
    for (proxy_cluster, first, second) in [
        ("east", "10.1.0.5", "10.2.0.7"),
        ("west", "10.2.0.7", "10.1.0.5"),
    ] {
        eventually(10, "the proxy's own cluster first", || {
            priorities_in(&primary, &daemon, &reviews, proxy_cluster)
                == vec![(first.to_string(), 0), (second.to_string(), 1)]
        });
    }
}

/// The endpoints of `cluster` a sidecar of `proxy_cluster` is sent, with their priorities,
/// highest first.
fn priorities_in(
    c: &Cluster,
    d: &Daemon,
    cluster: &str,
    proxy_cluster: &str,
) -> Vec<(String, u32)> {
    let mut out: Vec<(String, u32)> = assignments_in(c, d, cluster, proxy_cluster)
        .unwrap_or_default()
        .iter()
        .flat_map(|cla| cla.endpoints.iter())
        .flat_map(|l| {
            l.lb_endpoints
                .iter()
                .filter_map(socket_ip)
                .map(move |ip| (ip, l.priority))
        })
        .collect();
    out.sort_by_key(|(ip, p)| (*p, ip.clone()));
    out
}

/// A remote's watch history expires while its watches are down (410 Gone) and its API server
/// throttles the relist (429): that cluster's watchers relist, its objects deleted and changed
/// meanwhile follow, nothing is lost or duplicated, and the config cluster's objects are
/// untouched. On the fakes (their fault hooks).
#[test]
fn a_remote_relists_after_its_history_expires() {
    let primary = Cluster::fake("mcrelist");
    let remote = Cluster::fake("mcrelist");
    let ns = primary.ns.clone();
    primary.apply(service(&ns, "local"));
    primary.apply(slice(&ns, "local", &["10.1.0.5"], false));
    for svc in ["a", "b"] {
        remote.apply(service(&ns, svc));
        remote.apply(slice(&ns, svc, &["10.2.0.7"], false));
    }
    let kubeconfig = std::fs::read_to_string(&remote.kubeconfig).unwrap();
    primary.apply(remote_secret(
        &ns,
        "istio-remote-secret-west",
        &[("west", kubeconfig)],
    ));
    let daemon = primary.rudder(&["--cluster-id", "east"]);
    eventually(60, "rudder ready", || {
        http_get(daemon.addr("http"), "/ready").0 == 200
    });
    assert!(endpoints_of(&primary, &daemon, &outbound(&ns, "a")).is_some());
    let fake = remote.fake.as_ref().unwrap();
    fake.pause_watches();
    primary.rt.block_on(async {
        remote.remove(service(&ns, "a")).await;
        remote.put(service(&ns, "c")).await;
        remote.put(slice(&ns, "b", &["10.2.0.8"], false)).await;
    });
    fake.compact();
    fake.fail_next("/api/v1/services", 429, 3);
    fake.resume_watches();
    eventually(20, "the remote's changes after the relist", || {
        endpoints_of(&primary, &daemon, &outbound(&ns, "a")).is_none()
            && endpoints_of(&primary, &daemon, &outbound(&ns, "c")).is_some()
            && endpoints_of(&primary, &daemon, &outbound(&ns, "b"))
                == Some(vec!["10.2.0.8".to_string()])
    });
    assert_eq!(
        endpoints_of(&primary, &daemon, &outbound(&ns, "local")),
        Some(vec!["10.1.0.5".to_string()]),
        "the config cluster's objects untouched"
    );
    assert!(
        metric_line(&daemon, "rudder_k8s_watch_errors_total{type=\"Service\"}").is_some(),
        "410 and 429 were seen and retried"
    );
}

/// PILOT_MULTICLUSTER_KUBECONFIG_PATH: the remote clusters come from a directory of
/// kubeconfig files (the cluster ID from the kubeconfig) instead of remote secrets, followed as
/// files come, change and go; a cluster two files name keeps what it had.
#[test]
fn remote_clusters_from_a_kubeconfig_directory() {
    for (primary, remotes) in cluster_sets("mcdir") {
        let ns = primary.ns.clone();
        let remote = &remotes[0];
        remote.apply(service(&ns, "ratings"));
        remote.apply(slice(&ns, "ratings", &["10.2.0.9"], false));
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = std::fs::read_to_string(&remote.kubeconfig).unwrap();
        let file = dir.path().join("remote.yaml");
        std::fs::write(&file, &kubeconfig).unwrap();
        // A remote secret is not read in this mode (the directory takes precedence, as istiod).
        primary.apply(remote_secret(
            &ns,
            "istio-remote-secret-ignored",
            &[("ignored", kubeconfig.clone())],
        ));
        let dir_text = dir.path().to_string_lossy().to_string();
        let daemon = primary.rudder_env(
            &["--cluster-id", "east"],
            &[(
                "PILOT_MULTICLUSTER_KUBECONFIG_PATH",
                Some(dir_text.as_str()),
            )],
        );
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let ratings = outbound(&ns, "ratings");
        assert_eq!(
            endpoints_of(&primary, &daemon, &ratings),
            Some(vec!["10.2.0.9".to_string()]),
            "the remote's service, waited for at the start"
        );
        let clusters = clusterz(&daemon);
        assert_eq!(clusters.as_array().map(Vec::len), Some(2), "{clusters}");
        assert_eq!(clusters[1]["syncStatus"], "synced", "{clusters}");
        assert_eq!(
            clusters[1]["secretName"],
            file.to_string_lossy().as_ref(),
            "{clusters}"
        );

        // A second file for the same cluster: a conflict; the cluster keeps what it had.
        std::fs::write(dir.path().join("copy.yml"), &kubeconfig).unwrap();
        eventually(10, "the conflict counted", || {
            metric_line(&daemon, "rudder_remote_cluster_errors_total{type=\"fake\"}")
                .or_else(|| metric_line(&daemon, "rudder_remote_cluster_errors_total{"))
                .is_some()
        });
        assert_eq!(
            endpoints_of(&primary, &daemon, &ratings),
            Some(vec!["10.2.0.9".to_string()])
        );
        std::fs::remove_file(dir.path().join("copy.yml")).unwrap();

        // The file goes: exactly that cluster's state goes with it; it comes back with the file.
        std::fs::remove_file(&file).unwrap();
        eventually(10, "the remote's state removed", || {
            endpoints_of(&primary, &daemon, &ratings).is_none()
        });
        assert_eq!(clusterz(&daemon).as_array().map(Vec::len), Some(1));
        std::fs::write(&file, &kubeconfig).unwrap();
        eventually(30, "the remote back", || {
            endpoints_of(&primary, &daemon, &ratings) == Some(vec!["10.2.0.9".to_string()])
        });
    }
}

/// Ambient across networks (AMBIENT_ENABLE_MULTI_NETWORK), on the fakes (the pods' addresses and
/// the east-west gateway's status are set by the test): a ztunnel of the primary's network gets
/// the primary's pods, and the remote network's pods of a global service as one workload at the
/// remote's east-west gateway, which goes when the gateway does.
#[test]
fn ambient_across_networks_reaches_the_remote_network_through_its_east_west_gateway() {
    use crate::common::ads::Delta;
    use crate::common::ca::channel;
    use crate::common::cluster::istio_crd;
    use envoy_types::pb::envoy::config::core::v3::Node;
    use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
    use prost::Message;
    use rudder::xds::generate::ztunnel::pb::workload::{Address, Workload, address};
    const ADDRESS: &str = "type.googleapis.com/istio.workload.Address";

    let primary = Cluster::fake("mcamb");
    let remote = Cluster::fake("mcamb");
    let ns = primary.ns.clone();
    let pod = |name: &str, ip: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}},
            "spec": {"serviceAccountName": "web", "containers": [{"name": "app", "image": "web"}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                       "conditions": [{"type": "Ready", "status": "True"}]}})
    };
    let global_web = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": ns, "labels": {"istio.io/global": "true"}},
        "spec": {"ports": [{"name": "http-web", "port": 80, "targetPort": 8080}], "clusterIP": "10.96.0.10"}});
    for (c, network) in [(&primary, "net1"), (&remote, "net2")] {
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns,
            "labels": {"topology.istio.io/network": network, "istio.io/dataplane-mode": "ambient"}}}));
        c.apply(global_web.clone());
    }
    primary.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "istio", "namespace": ns},
        "data": {"mesh": "serviceScopeConfigs:\n- servicesSelector: {matchLabels: {istio.io/global: \"true\"}}\n  scope: GLOBAL\n"}}));
    primary.apply(pod("web-0", "10.1.0.5"));
    primary.apply(slice(&ns, "web", &["10.1.0.5"], true));
    remote.apply(pod("web-0", "10.2.0.7"));
    remote.apply(pod("web-1", "10.2.0.8"));
    remote.apply(slice(&ns, "web", &["10.2.0.7", "10.2.0.8"], true));
    remote.apply(istio_crd(
        "gateway.networking.k8s.io",
        "gateways",
        "Gateway",
    ));
    let gateway = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "eastwest", "namespace": ns, "labels": {"topology.istio.io/network": "net2"}},
        "spec": {"gatewayClassName": "istio-east-west", "listeners": [
            {"name": "mesh", "port": 15008, "protocol": "HBONE", "tls": {"mode": "Terminate"}}]},
        "status": {"addresses": [{"type": "IPAddress", "value": "192.0.2.60"}]}});
    remote.apply(gateway.clone());
    let kubeconfig = std::fs::read_to_string(&remote.kubeconfig).unwrap();
    primary.apply(remote_secret(
        &ns,
        "istio-remote-secret-west",
        &[("west", kubeconfig)],
    ));
    let daemon = primary.rudder_env(
        &["--cluster-id", "east"],
        &[("AMBIENT_ENABLE_MULTI_NETWORK", Some("true"))],
    );
    eventually(60, "rudder ready", || {
        http_get(daemon.addr("http"), "/ready").0 == 200
    });
    let root = primary.ca_root();
    let token = primary.token("ztunnel");
    let far = format!(
        "net2/SplitHorizonWorkload/{ns}/eastwest/192.0.2.60/{ns}/web.{ns}.svc.cluster.local"
    );
    let workload =
        |r: &envoy_types::pb::envoy::service::discovery::v3::Resource| -> Option<Workload> {
            match Address::decode(r.resource.as_ref()?.value.as_slice())
                .ok()?
                .r#type?
            {
                address::Type::Workload(w) => Some(w),
                address::Type::Service(_) => None,
            }
        };
    primary.rt.block_on(async {
        let tls = channel(
            daemon.addr("grpc-xds-tls"),
            &root,
            "istiod.istio-system.svc",
            None,
        )
        .await
        .expect("TLS to 15012");
        let bearer = format!("Bearer {token}");
        let headers = [("authorization", bearer.as_str()), ("clusterid", "east")];
        let request = DeltaDiscoveryRequest {
            node: Some(Node {
                id: format!("ztunnel~10.1.0.99~ztunnel-abcde.{ns}~{ns}.svc.cluster.local"),
                ..Default::default()
            }),
            type_url: ADDRESS.into(),
            ..Default::default()
        };
        let mut z = Delta::open_on(tls, request, &headers)
            .await
            .expect("ztunnel's stream");
        let mut seen: std::collections::BTreeMap<String, Workload> = Default::default();
        for _ in 0..30 {
            let resp = z.recv().await;
            z.ack(&resp).await;
            for r in &resp.resources {
                if let Some(w) = workload(r) {
                    seen.insert(r.name.clone(), w);
                }
            }
            if seen.contains_key(&far) {
                break;
            }
        }
        let w = seen
            .get(&far)
            .unwrap_or_else(|| panic!("{:?}", seen.keys()));
        assert_eq!(
            w.capacity,
            Some(2),
            "both of the remote's pods behind one workload"
        );
        assert_eq!(w.cluster_id, "west");
        assert!(seen.contains_key(&format!("east//Pod/{ns}/web-0")));
        assert!(
            !seen.keys().any(|uid| uid.starts_with("west//")),
            "{:?}",
            seen.keys()
        );

        // A third pod in the remote network: the same workload, one more behind it.
        remote.put(pod("web-2", "10.2.0.9")).await;
        remote
            .put(slice(
                &ns,
                "web",
                &["10.2.0.7", "10.2.0.8", "10.2.0.9"],
                true,
            ))
            .await;
        let mut capacity = None;
        for _ in 0..30 {
            let resp = z.recv().await;
            z.ack(&resp).await;
            capacity = resp
                .resources
                .iter()
                .filter(|r| r.name == far)
                .find_map(workload)
                .and_then(|w| w.capacity)
                .or(capacity);
            if capacity == Some(3) {
                break;
            }
        }
        assert_eq!(capacity, Some(3), "the remote's new pod counts");

        // The gateway goes: the far network is unreachable, its workload is removed.
        remote.remove(gateway).await;
        let mut removed = false;
        for _ in 0..30 {
            let resp = z.recv().await;
            z.ack(&resp).await;
            if resp.removed_resources.contains(&far) {
                removed = true;
                break;
            }
        }
        assert!(
            removed,
            "the split-horizon workload is removed with its gateway"
        );
    });
}

/// A remote secret naming an API server that refuses every connection, never reachable: each of
/// its watchers retries with a growing delay (100 ms doubling to 1 s), not ~37 times a second as
/// when every retry's announcement reset the backoff. Over 8 s a watcher makes about 11
/// attempts; the bound leaves room for a slow machine and is far below the old 300.
#[test]
fn an_unreachable_remote_is_retried_with_a_growing_backoff() {
    let primary = Cluster::fake("mcdead");
    let ns = primary.ns.clone();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let kubeconfig = kubeconfig_to(closed, "dead");
    primary.apply(remote_secret(
        &ns,
        "istio-remote-secret-dead",
        &[("dead", kubeconfig)],
    ));
    let daemon = primary.rudder_env(
        &["--cluster-id", "east"],
        &[("PILOT_REMOTE_CLUSTER_TIMEOUT", Some("1s"))],
    );
    let errors = |d: &Daemon| -> f64 {
        let (_, metrics) = http_get(d.addr("monitoring"), "/metrics");
        metrics
            .lines()
            .filter(|l| l.starts_with("rudder_k8s_watch_errors_total{type=\"Service\"}"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    eventually(60, "the remote's Service watcher failing", || {
        errors(&daemon) > 0.0
    });
    let start = errors(&daemon);
    std::thread::sleep(std::time::Duration::from_secs(8));
    let attempts = errors(&daemon) - start;
    assert!(
        attempts <= 25.0,
        "{attempts} failed attempts in 8 s: the backoff does not grow"
    );
    assert!(attempts >= 1.0, "the watcher stopped retrying");

    // Missing the sync timeout is counted once per cluster, for a cluster added after start too.
    let timeouts = |d: &Daemon| metric_line(d, "remote_cluster_sync_timeouts_total");
    assert_eq!(
        timeouts(&daemon).as_deref(),
        Some("remote_cluster_sync_timeouts_total 1")
    );
    let later = kubeconfig_to(closed, "later");
    primary.apply(remote_secret(
        &ns,
        "istio-remote-secret-later",
        &[("later", later)],
    ));
    eventually(10, "the later cluster's timeout counted", || {
        timeouts(&daemon).as_deref() == Some("remote_cluster_sync_timeouts_total 2")
    });
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(
        timeouts(&daemon).as_deref(),
        Some("remote_cluster_sync_timeouts_total 2"),
        "once per cluster"
    );
}

/// A kubeconfig of cluster `name` whose API server is `127.0.0.1:<port>`.
fn kubeconfig_to(port: u16, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: {name}, cluster: {{server: \"http://127.0.0.1:{port}\"}}}}]\nusers: [{{name: {name}, user: {{}}}}]\ncontexts: [{{name: {name}, context: {{cluster: {name}, user: {name}}}}}]\ncurrent-context: {name}\n"
    )
}
