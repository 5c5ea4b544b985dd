//! ADS protocol behaviour, driven by a plain Rust xDS client against the `rudder` binary: subscription
//! semantics, ACK/NACK handling, stale nonces, bad clients, and Delta's resume-from-versions.

use crate::common;
use crate::common::ads::{Delta, Sotw as Client, cla_names, cluster_names, node};
use crate::common::{Daemon, eventually, http_get};
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryResponse};
use prost::Message;
use std::collections::HashMap;
use std::time::Duration;

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

fn mesh(extra_host: bool) -> String {
    let mut y = String::from(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a, namespace: ns}\nspec:\n  hosts: [a.ns.svc.cluster.local]\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  resolution: STATIC\n  endpoints: [{address: 10.0.0.1}]\n---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: b, namespace: ns}\nspec:\n  hosts: [b.ns.svc.cluster.local]\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  resolution: STATIC\n  endpoints: [{address: 10.0.0.2}]\n",
    );
    if extra_host {
        y.push_str("---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: c, namespace: ns}\nspec:\n  hosts: [c.ns.svc.cluster.local]\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  resolution: STATIC\n  endpoints: [{address: 10.0.0.3}]\n");
    }
    y
}

const A: &str = "outbound|80||a.ns.svc.cluster.local";
const B: &str = "outbound|80||b.ns.svc.cluster.local";
const C: &str = "outbound|80||c.ns.svc.cluster.local";

fn start() -> (tempfile::TempDir, Daemon) {
    let dir = tempfile::tempdir().unwrap();
    common::write_atomic(&dir.path().join("mesh.yaml"), &mesh(false));
    let daemon = Daemon::start(
        dir.path(),
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    (dir, daemon)
}

fn metrics(daemon: &Daemon) -> String {
    http_get(daemon.addr("monitoring"), "/metrics").1
}

const ID: &str = "sidecar~10.9.9.9~app-1.ns~ns.svc.cluster.local";

/// A daemon and a SotW client that has ACKed the clusters and the endpoints of a and b.
async fn synced_to_a_and_b() -> (tempfile::TempDir, Daemon, Client, DiscoveryResponse) {
    let (dir, daemon) = start();
    let mut s = Client::open(daemon.addr("grpc-xds"), ID).await.unwrap();
    let cds = s.recv().await;
    s.send(CDS, &[], &cds.nonce, &cds.version_info, None).await;
    s.send(EDS, &[A, B], "", "", None).await;
    let eds = s.recv().await;
    s.send(EDS, &[A, B], &eds.nonce, &eds.version_info, None)
        .await;
    (dir, daemon, s, eds)
}

#[tokio::test(flavor = "multi_thread")]
async fn wildcard_gets_everything_and_named_gets_exactly_what_was_asked() {
    let (_dir, daemon) = start();
    let mut s = Client::open(daemon.addr("grpc-xds"), ID).await.unwrap();
    let cds = s.recv().await;
    assert_eq!(cds.type_url, CDS);
    let names = cluster_names(&cds);
    assert!(
        names.contains(&A.to_string()) && names.contains(&B.to_string()),
        "{names:?}"
    );
    assert!(names.contains(&"PassthroughCluster".to_string()));
    s.send(CDS, &[], &cds.nonce, &cds.version_info, None).await;
    s.send(EDS, &[A], "", "", None).await;
    let eds = s.recv().await;
    assert_eq!(cla_names(&eds), [A], "only the named resource");
    s.send(EDS, &[A], &eds.nonce, &eds.version_info, None).await;
    assert!(s.quiet(300).await, "an ACK gets no response");
}

#[tokio::test(flavor = "multi_thread")]
async fn nack_keeps_last_good_config_is_logged_and_counted() {
    let (dir, daemon) = start();
    let mut s = Client::open(daemon.addr("grpc-xds"), ID).await.unwrap();
    let cds = s.recv().await;
    s.send(
        CDS,
        &[],
        &cds.nonce,
        "",
        Some("cluster rejected: test says no"),
    )
    .await;
    assert!(
        s.quiet(300).await,
        "a NACK is not answered with the same config again"
    );
    eventually(10, "reject counted", || {
        metrics(&daemon).contains("pilot_total_xds_rejects{type=\"cds\"} 1")
    });
    // istiod's older per-type series, by proxy and error code.
    let m = metrics(&daemon);
    assert!(
        m.contains(&format!(
            "pilot_xds_cds_reject{{node=\"{ID}\",err=\"3\"}} 1"
        )) && m.contains("# TYPE pilot_xds_cds_reject gauge"),
        "{m}"
    );
    let syncz = http_get(daemon.addr("monitoring"), "/debug/syncz").1;
    assert!(
        syncz.contains("NACKED") && syncz.contains("test says no"),
        "{syncz}"
    );
    // The next config change is pushed as usual.
    common::write_atomic(&dir.path().join("mesh.yaml"), &mesh(true));
    let next = s.recv().await;
    assert!(cluster_names(&next).contains(&C.to_string()));
    s.send(CDS, &[], &next.nonce, &next.version_info, None)
        .await;
    eventually(10, "ACK clears the NACK", || {
        !http_get(daemon.addr("monitoring"), "/debug/syncz")
            .1
            .contains("NACKED")
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn stale_nonce_only_counts_when_the_subscription_changed() {
    let (_dir, daemon) = start();
    let mut s = Client::open(daemon.addr("grpc-xds"), ID).await.unwrap();
    let cds = s.recv().await;
    s.send(CDS, &[], &cds.nonce, &cds.version_info, None).await;
    s.send(EDS, &[A], "", "", None).await;
    let eds = s.recv().await;
    s.send(EDS, &[A], "some-old-nonce", "", None).await;
    assert!(s.quiet(300).await, "stale nonce, same names: ignored");
    s.send(EDS, &[A, B], "some-old-nonce", "", None).await;
    let more = s.recv().await;
    assert_eq!(
        cla_names(&more),
        [A, B],
        "stale nonce with a new subscription list is honoured"
    );
    assert_ne!(more.nonce, eds.nonce);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_clients_get_clear_errors_and_others_keep_serving() {
    let (_dir, daemon) = start();
    let err = Client::open(daemon.addr("grpc-xds"), "not-an-istio-node-id")
        .await
        .err()
        .expect("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message()
            .contains("expected type~ip~pod.namespace~namespace.svc.cluster.local"),
        "{}",
        err.message()
    );
    let mut s = Client::open(daemon.addr("grpc-xds"), ID).await.unwrap();
    let cds = s.recv().await;
    s.send("type.googleapis.com/made.up.Type", &["x"], "", "", None)
        .await;
    s.send(CDS, &[], &cds.nonce, &cds.version_info, None).await;
    assert!(s.quiet(300).await, "unknown types are ignored, not fatal");
    let m = metrics(&daemon);
    assert!(
        m.contains("rudder_xds_errors_total{reason=\"bad_node\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("rudder_xds_errors_total{reason=\"unknown_type\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("pilot_xds{version=\"") && m.contains("\"} 1\n"),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn endpoint_only_changes_push_only_eds() {
    let (dir, _daemon, mut s, _) = synced_to_a_and_b().await;
    common::write_atomic(
        &dir.path().join("mesh.yaml"),
        &mesh(false).replace("10.0.0.2", "10.0.0.22"),
    );
    let push = s.recv().await;
    assert_eq!(push.type_url, EDS, "no CDS push for an endpoint move");
    assert_eq!(
        cla_names(&push),
        [B],
        "only the service whose endpoints changed"
    );
    let cla = ClusterLoadAssignment::decode(push.resources[0].value.as_slice()).unwrap();
    assert!(format!("{cla:?}").contains("10.0.0.22"));
    s.send(EDS, &[A, B], &push.nonce, &push.version_info, None)
        .await;
    assert!(s.quiet(300).await);
}

/// After a full push's clusters, a SotW client gets again the endpoints of the clusters that
/// changed (so Envoy does not keep them warming), and not those of unchanged ones; a new cluster's
/// endpoints come when the client asks for them (istiod's partial EDS push).
#[tokio::test(flavor = "multi_thread")]
async fn a_full_push_resends_only_the_endpoints_of_changed_clusters() {
    let (dir, _daemon, mut s, eds) = synced_to_a_and_b().await;

    // A new service: new clusters, the others unchanged.
    common::write_atomic(&dir.path().join("mesh.yaml"), &mesh(true));
    let cds = s.recv().await;
    assert_eq!(cds.type_url, CDS);
    assert!(cluster_names(&cds).contains(&C.to_string()));
    s.send(CDS, &[], &cds.nonce, &cds.version_info, None).await;
    assert!(
        s.quiet(300).await,
        "no endpoints resent for unchanged clusters"
    );
    s.send(EDS, &[A, B, C], &eds.nonce, &eds.version_info, None)
        .await;
    let eds = s.recv().await;
    assert_eq!(cla_names(&eds), [A, B, C], "asked for: all of them");
    s.send(EDS, &[A, B, C], &eds.nonce, &eds.version_info, None)
        .await;

    // A policy that changes b's cluster only.
    let rule = "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: b, namespace: ns}\nspec:\n  host: b.ns.svc.cluster.local\n  trafficPolicy: {connectionPool: {tcp: {maxConnections: 7}}}\n";
    common::write_atomic(
        &dir.path().join("mesh.yaml"),
        &format!("{}{rule}", mesh(true)),
    );
    let cds = s.recv().await;
    assert_eq!(cds.type_url, CDS);
    let resent = s.recv().await;
    assert_eq!(resent.type_url, EDS);
    assert_eq!(
        cla_names(&resent),
        [B],
        "the changed cluster's endpoints, unchanged"
    );
    s.send(CDS, &[], &cds.nonce, &cds.version_info, None).await;
    s.send(EDS, &[A, B, C], &resent.nonce, &resent.version_info, None)
        .await;
    assert!(s.quiet(300).await);
}

/// A Delta client's first request: every cluster.
fn first_cds() -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        node: node(ID),
        type_url: CDS.into(),
        ..Default::default()
    }
}

/// A Delta stream opened with `first`, the client saying it holds `known` (name → version).
async fn resume(
    daemon: &Daemon,
    first: DeltaDiscoveryRequest,
    known: HashMap<String, String>,
) -> Delta {
    Delta::open(
        daemon.addr("grpc-xds"),
        DeltaDiscoveryRequest {
            initial_resource_versions: known,
            ..first
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn delta_resumes_from_known_versions_and_reports_removals() {
    let (dir, daemon) = start();
    let first = first_cds();
    let mut d = Delta::open(daemon.addr("grpc-xds"), first.clone()).await;
    let all = d.recv().await;
    let versions: HashMap<String, String> = all
        .resources
        .iter()
        .map(|r| (r.name.clone(), r.version.clone()))
        .collect();
    assert!(versions.contains_key(A) && versions.contains_key(B));
    drop(d);

    // Reconnect knowing everything, plus a cluster that no longer exists.
    let mut known = versions.clone();
    known.insert(
        "outbound|80||gone.ns.svc.cluster.local".into(),
        "old".into(),
    );
    let mut d = resume(&daemon, first, known).await;
    let resumed = d.recv().await;
    assert!(
        resumed.resources.is_empty(),
        "nothing unchanged is resent: {:?}",
        resumed
            .resources
            .iter()
            .map(|r| &r.name)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        resumed.removed_resources,
        ["outbound|80||gone.ns.svc.cluster.local"]
    );
    d.tx.send(DeltaDiscoveryRequest {
        type_url: CDS.into(),
        response_nonce: resumed.nonce.clone(),
        ..Default::default()
    })
    .await
    .unwrap();

    // A new service arrives as exactly one added resource.
    common::write_atomic(&dir.path().join("mesh.yaml"), &mesh(true));
    let added = d.recv().await;
    assert_eq!(
        added
            .resources
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        [C]
    );
    d.tx.send(DeltaDiscoveryRequest {
        type_url: CDS.into(),
        response_nonce: added.nonce.clone(),
        ..Default::default()
    })
    .await
    .unwrap();

    // Named subscriptions get exactly what was named; EDS answers unknown clusters with no endpoints.
    d.tx.send(DeltaDiscoveryRequest {
        type_url: EDS.into(),
        resource_names_subscribe: vec![A.into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let eds = d.recv().await;
    assert_eq!(
        eds.resources
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        [A]
    );
    d.tx.send(DeltaDiscoveryRequest {
        type_url: EDS.into(),
        response_nonce: eds.nonce.clone(),
        ..Default::default()
    })
    .await
    .unwrap();
    // A route name that cannot exist is reported removed, so the client stops waiting for it.
    let rds = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
    d.tx.send(DeltaDiscoveryRequest {
        type_url: rds.into(),
        resource_names_subscribe: vec!["80".into(), "no-such-route".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let routes = d.recv().await;
    assert_eq!(
        routes
            .resources
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["80"]
    );
    assert_eq!(routes.removed_resources, ["no-such-route"]);
    d.tx.send(DeltaDiscoveryRequest {
        type_url: EDS.into(),
        resource_names_unsubscribe: vec![A.into()],
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(d.quiet(300).await, "unsubscribing needs no response");
}

/// Delta streams brought level with the same clusters share one record of what they hold; each
/// still gets exactly its own difference, and later pushes add and remove from there.
#[tokio::test(flavor = "multi_thread")]
async fn delta_streams_holding_the_same_clusters_each_get_exactly_what_changed() {
    let (dir, daemon) = start();
    let first = first_cds();
    let names = |r: &envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryResponse| {
        let mut v: Vec<String> = r.resources.iter().map(|r| r.name.clone()).collect();
        v.sort();
        v
    };
    let mut fresh = Delta::open(daemon.addr("grpc-xds"), first.clone()).await;
    let all = fresh.recv().await;
    fresh.ack(&all).await;
    // A second client resumes holding an old version of b: it gets b only.
    let mut known: HashMap<String, String> = all
        .resources
        .iter()
        .map(|r| (r.name.clone(), r.version.clone()))
        .collect();
    known.insert(B.into(), "old".into());
    let mut resumed = resume(&daemon, first, known).await;
    let only_b = resumed.recv().await;
    assert_eq!(names(&only_b), [B]);
    assert!(only_b.removed_resources.is_empty());
    resumed.ack(&only_b).await;

    // b goes and c comes: both clients hold the same clusters, and both get the same change.
    let with_c = mesh(true);
    let without_b: Vec<&str> = with_c
        .split("---\n")
        .filter(|doc| !doc.contains("name: b,"))
        .collect();
    common::write_atomic(&dir.path().join("mesh.yaml"), &without_b.join("---\n"));
    for client in [&mut fresh, &mut resumed] {
        let change = client.recv().await;
        assert_eq!(names(&change), [C]);
        assert_eq!(change.removed_resources, [B]);
        client.ack(&change).await;
    }
    // And back: b again, c removed; nothing else resent.
    common::write_atomic(&dir.path().join("mesh.yaml"), &mesh(false));
    for client in [&mut fresh, &mut resumed] {
        let change = client.recv().await;
        assert_eq!(names(&change), [B]);
        assert_eq!(change.removed_resources, [C]);
        client.ack(&change).await;
        assert!(client.quiet(300).await);
    }
}

/// The gRPC port lets a client send frames of up to 1 MiB (`SETTINGS_MAX_FRAME_SIZE` in the
/// daemon's first SETTINGS frame), so a SotW ACK that repeats thousands of names arrives in one
/// frame rather than in one per 16 KiB, the protocol's default.
#[test]
fn clients_may_send_frames_of_up_to_a_mebibyte() {
    use std::io::{Read, Write};
    let (_dir, daemon) = start();
    let mut conn = std::net::TcpStream::connect(daemon.addr("grpc-xds")).unwrap();
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    // The client preface, then an empty SETTINGS frame.
    conn.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .unwrap();
    let settings = loop {
        let mut head = [0u8; 9];
        conn.read_exact(&mut head).unwrap();
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        conn.read_exact(&mut payload).unwrap();
        const SETTINGS: u8 = 4;
        const ACK: u8 = 1;
        if head[3] == SETTINGS && head[4] & ACK == 0 {
            break payload;
        }
    };
    let max_frame_size = settings
        .chunks_exact(6)
        .find(|s| u16::from_be_bytes([s[0], s[1]]) == 5)
        .map(|s| u32::from_be_bytes([s[2], s[3], s[4], s[5]]));
    assert_eq!(max_frame_size, Some(1 << 20), "{settings:?}");
}

/// A client cannot forge the daemon's log lines: a node id carrying a newline, a carriage
/// return and an ANSI sequence is logged escaped, on the line of the event it belongs to.
#[tokio::test(flavor = "multi_thread")]
async fn node_ids_cannot_forge_log_lines() {
    let (_dir, daemon) = start();
    let forged = "2026-01-01T00:00:00.000000Z ERROR rudder::ca: forged: CA key compromised";
    let bad = format!("not-a-node-id\n{forged}\r\x1b[2K");
    let refused = Client::open(daemon.addr("grpc-xds"), &bad).await;
    assert!(refused.is_err());
    let id = format!("sidecar~10.0.0.1~evil\n{forged}\x1b[2K.shop~shop.svc.cluster.local");
    if let Ok(mut s) = Client::open(daemon.addr("grpc-xds"), &id).await {
        let _ = s.recv_within(Duration::from_secs(5)).await;
    }
    let mut lines = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match daemon.log.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(_) => break,
        }
    }
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with(forged) || l.contains('\x1b') || l.contains('\r')),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains(&format!("\\n{forged}"))),
        "the refused node id is logged, escaped: {lines:#?}"
    );
}

/// istiod's listener-conflict gauges follow what proxies are sent: two TCP services without
/// addresses on one port (the first keeps the connections), and a pod port two services of
/// different protocols select, then both gone once the config no longer has them.
#[tokio::test(flavor = "multi_thread")]
async fn listener_conflicts_are_reported_as_istiod_gauges() {
    let se = |name: &str, port: u32, proto: &str, target: u32, ip: &str| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: ns}}\nspec: {{hosts: [{name}.example.com], ports: [{{number: {port}, name: p, protocol: {proto}, targetPort: {target}}}], resolution: STATIC, endpoints: [{{address: {ip}}}]}}\n"
        )
    };
    let conflicting = [
        se("db-a", 5432, "TCP", 5432, "10.0.0.1"),
        se("db-b", 5432, "TCP", 5432, "10.0.0.2"),
        se("web", 80, "HTTP", 8080, "10.9.9.9"),
        se("raw", 81, "TCP", 8080, "10.9.9.9"),
    ]
    .concat();
    let (dir, daemon) = start();
    common::write_atomic(&dir.path().join("mesh.yaml"), &conflicting);
    let gauges = |d: &Daemon| {
        (
            common::metric(d, "pilot_conflict_inbound_listener "),
            common::metric(d, "pilot_conflict_outbound_listener_tcp_over_current_tcp "),
        )
    };
    common::eventually_async(20, "the new mesh is loaded", || {
        http_get(daemon.addr("monitoring"), "/debug/registryz")
            .1
            .contains("db-b.example.com")
    })
    .await;
    const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
    let mut s = Client::open(daemon.addr("grpc-xds"), ID).await.unwrap();
    let cds = s.recv().await;
    s.send(CDS, &[], &cds.nonce, &cds.version_info, None).await;
    s.send(LDS, &[], "", "", None).await;
    let lds = s.recv().await;
    assert_eq!(lds.type_url, LDS);
    assert_eq!(gauges(&daemon), (1.0, 1.0));

    s.send(LDS, &[], &lds.nonce, &lds.version_info, None).await;
    common::write_atomic(&dir.path().join("mesh.yaml"), &mesh(false));
    let mut cleared = false;
    for _ in 0..20 {
        let Some(r) = s.recv_within(Duration::from_secs(5)).await else {
            break;
        };
        s.send(&r.type_url, &[], &r.nonce, &r.version_info, None)
            .await;
        if r.type_url == LDS && gauges(&daemon) == (0.0, 0.0) {
            cleared = true;
            break;
        }
    }
    assert!(
        cleared,
        "gauges after the conflicts went: {:?}",
        gauges(&daemon)
    );
}
