//! Bad clients and bad moments: a proxy that stops reading, a thousand streams vanishing at once, a
//! NACK storm, an oversized request, a connection flood, and SIGTERM. Every remaining proxy converges
//! and no store state is lost.

use crate::common;
use crate::common::ads::{CDS, Sotw, cluster_names};
use crate::common::{Daemon, eventually, http_get, metric, write_atomic};
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use std::path::Path;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

fn node_id(i: usize) -> String {
    format!(
        "sidecar~10.1.{}.{}~p{i}.default~default.svc.cluster.local",
        i / 250,
        i % 250
    )
}

/// `n` ServiceEntries (hosts `svc-<i>.example.com`), plus one whose port says which `generation` the
/// config is at, so each generation changes the clusters every proxy gets.
fn write_config(dir: &Path, n: usize, generation: u32) {
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: svc-{i}\n  namespace: default\nspec:\n  hosts: [svc-{i}.example.com]\n  ports: [{{number: 80, name: http, protocol: HTTP}}]\n  resolution: DNS\n---\n"
        ));
    }
    text.push_str(&format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: marker\n  namespace: default\nspec:\n  hosts: [marker.example.com]\n  ports: [{{number: {}, name: http, protocol: HTTP}}]\n  resolution: DNS\n",
        10000 + generation
    ));
    write_atomic(&dir.join("services.yaml"), &text);
}

fn marker(generation: u32) -> String {
    format!("outbound|{}||marker.example.com", 10000 + generation)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Reads CDS responses (ACKing them) until one carries `want`.
async fn converge(s: &mut Sotw, want: &str) -> DiscoveryResponse {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let r = s
            .recv_within(left)
            .await
            .unwrap_or_else(|| panic!("no CDS with {want} in time"));
        s.ack(&r, &[]).await;
        if r.type_url == CDS && cluster_names(&r).iter().any(|c| c == want) {
            return r;
        }
    }
}

async fn channel(addr: std::net::SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn daemon(dir: &Path, extra: &[&str]) -> Daemon {
    let mut args = vec!["--debounce-after", "10ms", "--debounce-max", "200ms"];
    args.extend_from_slice(extra);
    let d = Daemon::start(dir, &args);
    eventually(30, "ready", || http_get(d.addr("http"), "/ready").0 == 200);
    d
}

#[test]
fn a_proxy_that_stops_reading_is_dropped_and_never_delays_the_others() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 1500, 0);
    // One push at a time: a stuck proxy holding the only slot would stall everyone without the timeout.
    let d = daemon(
        dir.path(),
        &["--push-concurrency", "1", "--xds-send-timeout", "1s"],
    );
    let rt = runtime();
    rt.block_on(async {
        let addr = d.addr("grpc-xds");
        let mut good = Vec::new();
        for i in 0..3 {
            let mut s = Sotw::open(addr, &node_id(i)).await.unwrap();
            converge(&mut s, &marker(0)).await;
            good.push(s);
        }
        // The stuck proxy: a tiny HTTP/2 window, and it never reads.
        let stuck = stuck_stream(addr, 99).await;
        for generation in 1..=15 {
            write_config(dir.path(), 1500, generation);
            for s in &mut good {
                converge(s, &marker(generation)).await;
            }
        }
        // Its send timeout ends it while it is still connected (the good proxies may have
        // converged faster than that).
        let dropped = async {
            while metric(&d, "rudder_xds_errors_total{reason=\"send_timeout\"}") < 1.0 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), dropped)
            .await
            .expect("the stuck proxy's send timed out");
        drop(stuck);
    });
    assert!(
        metric(&d, "rudder_xds_errors_total{reason=\"send_timeout\"}") >= 1.0,
        "the stuck proxy was dropped"
    );
}

/// Opens a stream on its own connection with a small HTTP/2 window and never reads it.
async fn stuck_stream(addr: std::net::SocketAddr, id: usize) -> Sotw {
    let small = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535)
        .connect()
        .await
        .unwrap();
    Sotw::open_on(small, &node_id(id)).await.unwrap()
}

#[test]
fn more_stuck_streams_than_push_slots_never_delay_a_good_proxy() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 1500, 0);
    // The attack lasts as long as the send timeout: stuck streams are dropped only after it. Every
    // good push must arrive before that, although the stuck streams outnumber the push slots.
    let d = daemon(
        dir.path(),
        &["--push-concurrency", "2", "--xds-send-timeout", "300s"],
    );
    let rt = runtime();
    rt.block_on(async {
        let addr = d.addr("grpc-xds");
        let mut good = Sotw::open(addr, &node_id(0)).await.unwrap();
        converge(&mut good, &marker(0)).await;
        let mut stuck = Vec::new();
        for i in 0..6 {
            stuck.push(stuck_stream(addr, 100 + i).await);
        }
        // Enough generations to fill every stuck stream's response queue several times over.
        for generation in 1..=20 {
            write_config(dir.path(), 1500, generation);
            converge(&mut good, &marker(generation)).await;
        }
        // New streams wait for pushes under way to connected proxies, but not for pushes that
        // wait on clients that do not read: a newcomer starts at once.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut newcomer = Sotw::open(addr, &node_id(1)).await.unwrap();
        converge(&mut newcomer, &marker(20)).await;
        drop(stuck);
    });
    assert_eq!(
        metric(&d, "rudder_xds_errors_total{reason=\"send_timeout\"}"),
        0.0,
        "the good proxy converged while the attack was still on"
    );
    assert_eq!(
        metric(&d, "rudder_xds_new_stream_waits_total"),
        0.0,
        "no new stream waited on the stuck streams' pushes"
    );
}

#[test]
fn a_thousand_streams_vanishing_at_once_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 50, 0);
    let d = daemon(dir.path(), &[]);
    let (_, before) = http_get(d.addr("http"), "/debug/configz");
    let rt = runtime();
    let _survivors = rt.block_on(async {
        let addr = d.addr("grpc-xds");
        let mut survivors = Vec::new();
        for i in 0..5 {
            let mut s = Sotw::open(addr, &node_id(i)).await.unwrap();
            converge(&mut s, &marker(0)).await;
            survivors.push(s);
        }
        // 1,000 streams over 10 connections, each subscribed and served...
        let mut doomed = Vec::new();
        for c in 0..10 {
            let ch = channel(addr).await;
            for k in 0..100 {
                let s = Sotw::open_on(ch.clone(), &node_id(1000 + c * 100 + k))
                    .await
                    .unwrap();
                doomed.push(s);
            }
        }
        for s in &mut doomed {
            let r = s.recv().await;
            assert_eq!(r.type_url, CDS);
        }
        eventually(20, "1005 connected", || metric(&d, "pilot_xds{") == 1005.0);
        // ...then gone without a goodbye, while config changes.
        drop(doomed);
        write_config(dir.path(), 50, 1);
        for s in &mut survivors {
            converge(s, &marker(1)).await;
        }
        survivors
    });
    eventually(20, "only survivors counted", || {
        metric(&d, "pilot_xds{") == 5.0
    });
    let (_, after) = http_get(d.addr("http"), "/debug/configz");
    let count = |t: &str| {
        serde_json::from_str::<serde_json::Value>(t)
            .unwrap()
            .as_array()
            .map(Vec::len)
    };
    assert_eq!(count(&before), count(&after), "store unchanged");
    assert_eq!(http_get(d.addr("http"), "/ready").0, 200);
}

#[test]
fn a_nack_storm_is_counted_and_the_others_converge() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 20, 0);
    let d = daemon(dir.path(), &[]);
    let rt = runtime();
    rt.block_on(async {
        let addr = d.addr("grpc-xds");
        let mut good = Sotw::open(addr, &node_id(0)).await.unwrap();
        converge(&mut good, &marker(0)).await;
        let ch = channel(addr).await;
        let mut nackers = Vec::new();
        for i in 0..200 {
            nackers.push(Sotw::open_on(ch.clone(), &node_id(100 + i)).await.unwrap());
        }
        // Every proxy rejects everything, ten times over, all at once.
        let storms = nackers.into_iter().map(|mut s| {
            tokio::spawn(async move {
                for round in 0..10 {
                    match s.recv_within(Duration::from_millis(100)).await {
                        Some(r) => {
                            s.send(
                                &r.type_url,
                                &[],
                                &r.nonce,
                                "",
                                Some("rejected by a picky proxy"),
                            )
                            .await
                        }
                        None => {
                            s.send(
                                CDS,
                                &[],
                                &format!("stale-{round}"),
                                "",
                                Some("rejected again"),
                            )
                            .await
                        }
                    }
                }
                s
            })
        });
        let nackers = futures::future::join_all(storms).await;
        assert_eq!(nackers.len(), 200);
        write_config(dir.path(), 20, 1);
        converge(&mut good, &marker(1)).await;
        let (_, syncz) = http_get(d.addr("http"), "/debug/syncz");
        assert!(
            syncz.contains("rejected by a picky proxy"),
            "NACK reasons are visible"
        );
        drop(nackers);
    });
    assert!(metric(&d, "pilot_total_xds_rejects{type=\"cds\"}") >= 200.0);
}

#[test]
fn an_oversized_request_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 5, 0);
    let d = daemon(dir.path(), &["--max-grpc-message-size", "65536"]);
    let rt = runtime();
    rt.block_on(async {
        let addr = d.addr("grpc-xds");
        let mut s = Sotw::open(addr, &node_id(0)).await.unwrap();
        converge(&mut s, &marker(0)).await;
        let huge: Vec<String> = (0..10_000)
            .map(|i| format!("outbound|80||host-{i}.example.com"))
            .collect();
        let names: Vec<&str> = huge.iter().map(String::as_str).collect();
        s.send(CDS, &names, "", "", None).await;
        let err = tokio::time::timeout(Duration::from_secs(10), s.rx.message())
            .await
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(
                err.code(),
                tonic::Code::OutOfRange | tonic::Code::ResourceExhausted
            ),
            "{err:?}"
        );
        assert!(err.message().contains("too large"), "{err:?}");
        // Others are unaffected.
        let mut other = Sotw::open(addr, &node_id(1)).await.unwrap();
        converge(&mut other, &marker(0)).await;
    });
    assert_eq!(
        metric(&d, "rudder_xds_errors_total{reason=\"message_too_large\"}"),
        1.0
    );
}

#[test]
fn a_connection_flood_is_rate_limited() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 5, 0);
    let d = daemon(dir.path(), &["--max-requests-per-second", "2"]);
    let rt = runtime();
    let (admitted, refused) = rt.block_on(async {
        let addr = d.addr("grpc-xds");
        let ch = channel(addr).await;
        let attempts = (0..40).map(|i| {
            let ch = ch.clone();
            tokio::spawn(async move { Sotw::open_on(ch, &node_id(i)).await })
        });
        let mut admitted = 0;
        let mut refused = 0;
        for a in futures::future::join_all(attempts).await {
            match a.unwrap() {
                Ok(_) => admitted += 1,
                Err(e) => {
                    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
                    assert!(e.message().contains("rate limit"), "{e:?}");
                    refused += 1;
                }
            }
        }
        (admitted, refused)
    });
    assert!(
        admitted >= 2 && refused >= 10,
        "admitted {admitted}, refused {refused}"
    );
    assert_eq!(
        metric(&d, "rudder_xds_errors_total{reason=\"rate_limited\"}"),
        refused as f64
    );
}

#[test]
fn sigterm_ends_streams_so_proxies_reconnect_elsewhere_and_exits_in_time() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 5, 0);
    let d = daemon(dir.path(), &["--drain-duration", "5s"]);
    let addr = d.addr("grpc-xds");
    let rt = runtime();
    let mut streams = rt.block_on(async {
        let mut v = Vec::new();
        for i in 0..3 {
            let mut s = Sotw::open(addr, &node_id(i)).await.unwrap();
            converge(&mut s, &marker(0)).await;
            v.push(s);
        }
        v
    });
    let started = std::time::Instant::now();
    let status = d.terminate();
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "exited within the drain time"
    );
    rt.block_on(async {
        for s in &mut streams {
            // The stream ends (cleanly or with UNAVAILABLE): the proxy reconnects to another replica.
            let end = tokio::time::timeout(Duration::from_secs(5), s.rx.message())
                .await
                .expect("stream ended");
            assert!(matches!(end, Ok(None) | Err(_)), "{end:?}");
        }
        // Nothing listens any more.
        assert!(
            Endpoint::from_shared(format!("http://{addr}"))
                .unwrap()
                .connect()
                .await
                .is_err()
        );
    });
}

/// A Delta stream that subscribes to 1,000 more endpoint names at a time (of services that do not
/// exist) until it is ended; returns the status it was ended with.
async fn subscribe_until_ended(addr: std::net::SocketAddr, id: usize) -> tonic::Status {
    use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
    let mut greedy = common::ads::Delta::open(
        addr,
        DeltaDiscoveryRequest {
            node: common::ads::node(&node_id(id)),
            type_url: common::ads::EDS.into(),
            resource_names_subscribe: vec!["outbound|80||svc-0.example.com".into()],
            ..Default::default()
        },
    )
    .await;
    let _ = greedy.recv().await;
    for batch in 0..20 {
        let names = (0..1000)
            .map(|i| format!("outbound|80||n{batch}-{i}.example.com"))
            .collect();
        let request = DeltaDiscoveryRequest {
            type_url: common::ads::EDS.into(),
            resource_names_subscribe: names,
            ..Default::default()
        };
        if greedy.tx.send(request).await.is_err() {
            break;
        }
        loop {
            match tokio::time::timeout(Duration::from_millis(500), greedy.rx.message()).await {
                Ok(Ok(Some(_))) => continue,
                Ok(Err(status)) => return status,
                _ => break,
            }
        }
    }
    panic!("the stream was not ended");
}

#[test]
fn a_delta_stream_subscribing_without_end_is_refused_and_others_converge() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 5, 0);
    let d = daemon(
        dir.path(),
        &[
            "--xds-max-subscribed-names",
            "5000",
            "--xds-max-unknown-names",
            "100000",
        ],
    );
    let rt = runtime();
    rt.block_on(async {
        let addr = d.addr("grpc-xds");
        let mut good = Sotw::open(addr, &node_id(0)).await.unwrap();
        converge(&mut good, &marker(0)).await;
        let status = subscribe_until_ended(addr, 1).await;
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
        assert!(status.message().contains("at most 5000"), "{status:?}");
        write_config(dir.path(), 5, 1);
        converge(&mut good, &marker(1)).await;
    });
    assert_eq!(
        metric(&d, "rudder_xds_errors_total{reason=\"too_many_names\"}"),
        1.0
    );
}

/// Names of services that do not exist cost the daemon an (empty) assignment each: far fewer of
/// them are accepted than names of the mesh.
#[test]
fn a_stream_subscribing_to_made_up_names_is_ended() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 5, 0);
    let d = daemon(dir.path(), &["--xds-max-unknown-names", "2500"]);
    let rt = runtime();
    rt.block_on(async {
        let status = subscribe_until_ended(d.addr("grpc-xds"), 1).await;
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
        assert!(
            status
                .message()
                .contains("3000 names of eds that do not exist"),
            "{status:?}"
        );
    });
    assert_eq!(
        metric(
            &d,
            "rudder_xds_errors_total{reason=\"too_many_unknown_names\"}"
        ),
        1.0
    );
}

#[test]
fn nack_text_is_cut_and_a_nack_flood_does_not_flood_the_log() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 5, 0);
    let d = daemon(dir.path(), &[]);
    let rt = runtime();
    let huge = "x".repeat(200_000);
    rt.block_on(async {
        let addr = d.addr("grpc-xds");
        let mut s = Sotw::open(addr, &node_id(0)).await.unwrap();
        let r = s.recv().await;
        // 200 NACKs of 200 KB each for the same response: 40 MB of error text.
        for _ in 0..200 {
            s.send(&r.type_url, &[], &r.nonce, "", Some(&huge)).await;
        }
        // Every NACK is read before the change: one that arrives after the next response names
        // an older nonce and is stale, not a rejection.
        let flood_read = async {
            while metric(&d, "pilot_total_xds_rejects{type=\"cds\"}") < 200.0 {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(30), flood_read)
            .await
            .expect("200 NACKs counted");
        // Still served: a change arrives.
        write_config(dir.path(), 5, 1);
        converge(&mut s, &marker(1)).await;
    });
    assert!(metric(&d, "pilot_total_xds_rejects{type=\"cds\"}") >= 200.0);
    assert!(
        metric(
            &d,
            "rudder_xds_errors_total{reason=\"nack_log_suppressed\"}"
        ) >= 190.0
    );
    let logged: Vec<String> = d
        .log
        .try_iter()
        .filter(|l| l.contains("proxy rejected config"))
        .collect();
    assert!(
        !logged.is_empty() && logged.len() <= 3,
        "{} NACK log lines",
        logged.len()
    );
    assert!(logged.iter().all(|l| l.len() < 2048), "NACK text is cut");
}

#[test]
fn idle_connections_and_silent_streams_are_closed() {
    use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 5, 0);
    let d = daemon(dir.path(), &["--xds-idle-timeout", "1s"]);
    let rt = runtime();
    rt.block_on(async {
        let addr = d.addr("grpc-xds");
        // A connection that never opens a stream.
        let _idle = channel(addr).await;
        // A stream that never sends its first request is refused once the timeout passes.
        let (_tx, rx) = tokio::sync::mpsc::channel::<
            envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest,
        >(1);
        let mut client = AggregatedDiscoveryServiceClient::new(channel(addr).await);
        let silent = client
            .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await;
        assert_eq!(
            silent.err().map(|s| s.code()),
            Some(tonic::Code::DeadlineExceeded)
        );
        // A proxy with its stream open is never idle, however long nothing changes.
        let mut good = Sotw::open(addr, &node_id(0)).await.unwrap();
        converge(&mut good, &marker(0)).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        write_config(dir.path(), 5, 1);
        converge(&mut good, &marker(1)).await;
    });
    assert!(
        metric(
            &d,
            "rudder_xds_errors_total{reason=\"first_request_timeout\"}"
        ) >= 1.0
    );
    // Each bound is listed in /debug with its setting and what it refused.
    let (status, body) = http_get(d.addr("http"), "/debug/limitz");
    assert_eq!(status, 200);
    let limits: serde_json::Value = serde_json::from_str(&body).unwrap();
    let silent = limits
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "xDS stream without its first request")
        .unwrap();
    assert_eq!(silent["value"], "1s");
    assert!(silent["refused"].as_f64().unwrap() >= 1.0, "{silent}");
    // The connection without a stream, and the silent stream's once it ended.
    assert!(metric(&d, "rudder_xds_errors_total{reason=\"idle_connection\"}") >= 1.0);
}

/// A TCP relay in front of `target` whose direction towards the client can be held: what the
/// server sends (responses, its keepalive pings) waits in the relay, as it waits in socket buffers
/// when a proxy reads a large push slowly. What the client sends always goes through.
async fn relay(
    target: std::net::SocketAddr,
) -> (std::net::SocketAddr, tokio::sync::watch::Sender<bool>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (hold, held) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = tokio::net::TcpStream::connect(target).await.unwrap();
            let (mut from_client, mut to_client) = client.into_split();
            let (mut from_server, mut to_server) = server.into_split();
            tokio::spawn(async move { tokio::io::copy(&mut from_client, &mut to_server).await });
            let mut held = held.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    let n = match from_server.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    // What arrived while held is held too.
                    if held.wait_for(|h| !*h).await.is_err()
                        || to_client.write_all(&buf[..n]).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (addr, hold)
}

/// istiod's keepalive (grpc-go) keeps a client from which anything arrives after its ping; it
/// does not need the ping's own answer, which may queue behind the responses still on their way.
/// A proxy that keeps talking while what the server sends it is held up stays connected; one
/// that goes silent is closed after the keepalive interval plus its timeout, and counted.
#[test]
fn keepalive_keeps_a_proxy_that_talks_and_closes_a_silent_one() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 5, 0);
    let d = daemon(
        dir.path(),
        &["--keepalive-interval", "1s", "--keepalive-timeout", "2s"],
    );
    let keepalive_closes = || metric(&d, "rudder_xds_errors_total{reason=\"keepalive_timeout\"}");
    let rt = runtime();
    rt.block_on(async {
        let (addr, hold) = relay(d.addr("grpc-xds")).await;
        let mut talking = Sotw::open(addr, &node_id(0)).await.unwrap();
        let last = converge(&mut talking, &marker(0)).await;
        // Held: the server's ping (sent after 1 s without a request) cannot be answered. The
        // proxy is quiet long enough for that ping, then re-sends its ACK every 250 ms.
        hold.send_replace(true);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        for _ in 0..20 {
            talking.ack(&last, &[]).await;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        hold.send_replace(false);
        write_config(dir.path(), 5, 1);
        converge(&mut talking, &marker(1)).await;
        assert_eq!(keepalive_closes(), 0.0, "the talking proxy was kept");

        // A proxy that sends nothing at all while held is closed.
        let (addr, hold) = relay(d.addr("grpc-xds")).await;
        let mut silent = Sotw::open(addr, &node_id(1)).await.unwrap();
        converge(&mut silent, &marker(1)).await;
        hold.send_replace(true);
        let closed = async {
            while keepalive_closes() < 1.0 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(15), closed)
            .await
            .expect("the silent proxy's connection was closed");
        hold.send_replace(false);
        let ended = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match silent.rx.message().await {
                    Ok(Some(_)) => continue,
                    other => return other.map(|_| ()),
                }
            }
        })
        .await
        .expect("the silent proxy's stream ended");
        assert!(
            ended.is_err(),
            "ended with an error, as a dropped connection does"
        );
        assert_eq!(
            keepalive_closes(),
            1.0,
            "one connection closed, counted once"
        );
    });
    // The bound is listed with its setting.
    let (_, body) = http_get(d.addr("http"), "/debug/limitz");
    assert!(
        !body.contains("-0.0"),
        "a bound that refused nothing shows 0: {body}"
    );
    let limits: serde_json::Value = serde_json::from_str(&body).unwrap();
    let keepalive = limits
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["refusedSeries"] == "rudder_xds_errors_total{reason=\"keepalive_timeout\"}")
        .unwrap_or_else(|| panic!("{limits}"));
    assert_eq!(keepalive["value"], "3s");
    assert!(keepalive["refused"].as_f64().unwrap() >= 1.0, "{keepalive}");
}

/// Sockets that never speak, and callers that trickle a request's headers (slowloris), cost a
/// descriptor for a bounded time on every port: the gRPC ports close a connection that opens no
/// stream by the first-stream deadline (TLS handshake and HTTP/2 preface included), the
/// monitoring, HTTP and webhook ports one with no request in flight by their idle deadline.
/// Before, such sockets stayed open on 15010, 15012, 15014 and 8080.
#[test]
fn silent_sockets_and_trickled_requests_are_closed_on_every_port() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 1, 0);
    let d = daemon(
        dir.path(),
        &[
            "--xds-first-stream-timeout",
            "1s",
            "--http-idle-timeout",
            "1s",
            "--webhook-idle-timeout",
            "1s",
        ],
    );
    let ports = ["grpc-xds", "grpc-xds-tls", "monitoring", "http", "webhook"];
    let mut sockets: Vec<(&str, std::net::TcpStream)> = ports
        .iter()
        .map(|p| (*p, std::net::TcpStream::connect(d.addr(p)).unwrap()))
        .collect();
    // Trickle a request's headers, a byte at a time, on the plaintext HTTP ports.
    let trickle = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaa";
    let started = std::time::Instant::now();
    for i in 0..trickle.len().min(15) {
        for (name, s) in sockets.iter_mut() {
            if matches!(*name, "monitoring" | "http") {
                let _ = s.write_all(&trickle[i..i + 1]);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for (name, mut s) in sockets {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 4096];
        // Whatever the server sent first (HTTP/2 SETTINGS), then the end of the stream.
        let closed = loop {
            match s.read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(_) => break false,
            }
        };
        assert!(closed, "{name}: still open after {:?}", started.elapsed());
    }
    assert!(
        metric(
            &d,
            "rudder_xds_errors_total{reason=\"first_stream_timeout\"}"
        ) >= 2.0
    );
    for (server, reason) in [
        ("monitoring", "idle"),
        ("http", "idle"),
        ("webhook", "handshake_timeout"),
    ] {
        let series = format!(
            "rudder_http_connections_closed_total{{server=\"{server}\",reason=\"{reason}\"}}"
        );
        assert!(metric(&d, &series) >= 1.0, "{series}");
    }
}

/// A mass deletion disconnects no one: proxies still subscribed to the endpoints of thousands of
/// services just deleted (a namespace removed at once) are behind, not making names up, and the
/// unknown-names bound (`--xds-max-unknown-names`, 1,000 here by default) leaves them alone while
/// they follow: a SotW proxy whose next EDS request still lists them with a new name, and a Delta
/// proxy that subscribes to one more name while holding them. Before, both streams were ended.
#[test]
fn a_mass_deletion_disconnects_no_proxy() {
    use common::ads::{Delta, EDS};
    use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 2000, 0);
    let d = daemon(dir.path(), &[]);
    let rt = runtime();
    rt.block_on(async {
        let addr = d.addr("grpc-xds");
        let doomed: Vec<String> = (0..2000)
            .map(|i| format!("outbound|80||svc-{i}.example.com"))
            .collect();
        let mut sotw = Sotw::open(addr, &node_id(1)).await.unwrap();
        converge(&mut sotw, &marker(0)).await;
        let mut names: Vec<&str> = doomed.iter().map(String::as_str).collect();
        let m0 = marker(0);
        names.push(&m0);
        sotw.send(EDS, &names, "", "", None).await;
        let mut delta = Delta::open(
            addr,
            DeltaDiscoveryRequest {
                node: common::ads::node(&node_id(2)),
                type_url: EDS.into(),
                resource_names_subscribe: doomed.clone(),
                ..Default::default()
            },
        )
        .await;
        let first = delta.recv().await;
        delta.ack(&first).await;
        // The whole namespace goes at once.
        write_config(dir.path(), 0, 1);
        converge(&mut sotw, &marker(1)).await;
        // The SotW proxy's next EDS request, sent before it took the new clusters in, still names
        // the deleted ones, and the new marker.
        let m1 = marker(1);
        let mut stale = names.clone();
        stale.push(&m1);
        sotw.send(EDS, &stale, "", "", None).await;
        let mut got_eds = false;
        while let Some(r) = sotw.recv_within(Duration::from_secs(10)).await {
            if r.type_url == EDS {
                got_eds = true;
                break;
            }
        }
        assert!(got_eds, "the SotW stream is served, not ended");
        // The Delta proxy subscribes to one more name while it still holds the deleted ones.
        delta
            .send(DeltaDiscoveryRequest {
                type_url: EDS.into(),
                resource_names_subscribe: vec![m1.clone()],
                ..Default::default()
            })
            .await;
        let mut served = false;
        for _ in 0..5 {
            match tokio::time::timeout(Duration::from_secs(10), delta.rx.message()).await {
                Ok(Ok(Some(r))) => {
                    delta.ack(&r).await;
                    if r.resources.iter().any(|res| res.name == m1) {
                        served = true;
                        break;
                    }
                }
                other => panic!("the Delta stream ended: {other:?}"),
            }
        }
        assert!(served, "the Delta stream is served the new name");
    });
    assert_eq!(
        metric(
            &d,
            "rudder_xds_errors_total{reason=\"too_many_unknown_names\"}"
        ),
        0.0
    );
}
