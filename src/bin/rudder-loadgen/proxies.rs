//! Simulated proxies: SotW and Delta streams that subscribe and ACK as Envoy and gRPC clients do, and the bookkeeping of what each has received.

use super::*;

/// Whether proxy `i` watches service `j`'s endpoints: an Envoy every service it sees (with Sidecar
/// scoping, those of its namespace); a gRPC client only the one it calls, service `i % namespaces`.
pub(crate) fn watches(i: usize, j: usize, args: &LoadgenArgs, grpc: bool) -> bool {
    let namespaces = args.namespaces.max(1);
    if grpc {
        i % namespaces == j
    } else {
        !args.sidecar_scope || i % namespaces == j % namespaces
    }
}

/// An ADS stream whose responses are read whole and decoded `light`ly (the replay's capture and
/// the attackers). Responses are read with the daemon's own message reader, not tonic's: tonic
/// keeps each stream's buffer at the size of the largest message it read (megabytes of clusters in
/// an unscoped mesh), which for thousands of streams was gigabytes held for nothing.
pub(crate) async fn open_ads<Req, Resp>(
    channel: Channel,
    method: &'static str,
    requests: mpsc::Receiver<Req>,
) -> Result<wire::MessageStream<Resp>, tonic::Status>
where
    Req: Message + Send + Sync + 'static,
    Resp: Message + Default + Send + 'static,
{
    let body = open_stream(channel, method, requests).await?;
    Ok(wire::MessageStream::new(body, 256 * 1024 * 1024))
}

/// An ADS stream as a simulated proxy opens it: requests encoded in full, each response digested
/// as it arrives (`digest`).
pub(crate) async fn open_digests<Req>(
    channel: Channel,
    method: &'static str,
    requests: mpsc::Receiver<Req>,
    reading: digest::Reading,
) -> Result<digest::DigestStream, tonic::Status>
where
    Req: Message + Send + Sync + 'static,
{
    let body = open_stream(channel, method, requests).await?;
    Ok(digest::DigestStream::new(body, reading))
}

/// Opens an ADS stream that sends `requests`; the response body, once the server accepted.
pub(crate) async fn open_stream<Req>(
    channel: Channel,
    method: &'static str,
    requests: mpsc::Receiver<Req>,
) -> Result<tonic::body::Body, tonic::Status>
where
    Req: Message + Send + Sync + 'static,
{
    use tokio_stream::StreamExt;
    use tonic::codegen::http;
    use tower::ServiceExt;
    let frames = ReceiverStream::new(requests).map(|request| {
        let len = request.encoded_len();
        let mut buf = Vec::with_capacity(5 + len);
        buf.push(0);
        buf.extend_from_slice(&(len as u32).to_be_bytes());
        request.encode_raw(&mut buf);
        Ok::<_, tonic::Status>(http_body::Frame::data(Bytes::from(buf)))
    });
    let request = http::Request::builder()
        .method(http::Method::POST)
        .uri(method)
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::TE, "trailers")
        .body(tonic::body::Body::new(http_body_util::StreamBody::new(
            frames,
        )))
        .map_err(|e| tonic::Status::internal(e.to_string()))?;
    let response = channel
        .oneshot(request)
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    // A refusal comes as headers only, with the status among them.
    if let Some(status) =
        tonic::Status::from_header_map(response.headers()).filter(|s| s.code() != tonic::Code::Ok)
    {
        return Err(status);
    }
    Ok(response.into_body())
}

/// A lazily connected channel to `target` from local address `source`.
pub(crate) fn channel_from(
    target: SocketAddr,
    source: std::net::Ipv4Addr,
) -> anyhow::Result<Channel> {
    let connect = tower::service_fn(move |_: tonic::codegen::http::Uri| async move {
        let socket = tokio::net::TcpSocket::new_v4()?;
        bind_source(&socket, source)?;
        let stream = socket.connect(target).await?;
        stream.set_nodelay(true)?;
        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
    });
    Ok(Channel::from_shared(format!("http://{target}"))?.connect_with_connector_lazy(connect))
}

/// Binds `socket` to the source address `source`, leaving its port to `connect`. A bind to port 0
/// makes the kernel search the bound ports for one free for any destination, which grows with
/// every connection already open: a quarter of the generator's CPU while 12,500 connections opened
/// (`inet_bind2_bucket_find` in a profile). Chosen at connect time, the port need only be free for
/// this source and destination.
pub(crate) fn bind_source(
    socket: &tokio::net::TcpSocket,
    source: std::net::Ipv4Addr,
) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let on: libc::c_int = 1;
        // SAFETY: an integer option set on a socket this function borrows, from a live c_int of
        // the size given.
        let rc = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    socket.bind(SocketAddr::new(source.into(), 0))
}

pub(crate) fn node(i: usize, args: &LoadgenArgs, grpc: bool) -> Option<Node> {
    let mut fields = std::collections::BTreeMap::new();
    let s = |v: &str| Value {
        kind: Some(VKind::StringValue(v.into())),
    };
    if i < args.gateway_proxies {
        // A pod of Gateway API Gateway gw-N, as its automated deployment labels it.
        let namespace = ns(0, args.namespaces);
        let gateway = format!("gw-{}", i % args.gateway_api_gateways.max(1));
        let labels = Struct {
            fields: [(
                "gateway.networking.k8s.io/gateway-name".to_string(),
                s(&gateway),
            )]
            .into_iter()
            .collect(),
        };
        fields.insert("NAMESPACE".into(), s(&namespace));
        fields.insert(
            "LABELS".into(),
            Value {
                kind: Some(VKind::StructValue(labels)),
            },
        );
        return Some(Node {
            id: format!(
                "router~10.201.{}.{}~{gateway}-istio-{i}.{namespace}~{namespace}.svc.cluster.local",
                (i / 250) % 250,
                i % 250
            ),
            user_agent_name: "envoy".into(),
            metadata: Some(Struct {
                fields: fields.into_iter().collect(),
            }),
            ..Default::default()
        });
    }
    if grpc {
        fields.insert("GENERATOR".to_string(), s("grpc"));
    }
    let namespace = ns(i, args.namespaces);
    fields.insert("NAMESPACE".into(), s(&namespace));
    Some(Node {
        id: format!(
            "sidecar~10.200.{}.{}~load-{i}.{namespace}~{namespace}.svc.cluster.local",
            (i / 250) % 250,
            i % 250
        ),
        user_agent_name: if grpc {
            "gRPC loadgen".into()
        } else {
            "envoy".into()
        },
        metadata: Some(Struct {
            fields: fields.into_iter().collect(),
        }),
        extensions: if args.istio_proxy && !grpc {
            istio_proxy_extensions()
        } else {
            Vec::new()
        },
        ..Default::default()
    })
}

/// The telemetry filters an istio-proxy reports, by category and config type.
fn istio_proxy_extensions() -> Vec<envoy_types::pb::envoy::config::core::v3::Extension> {
    [
        ("envoy.filters.http", "io.istio.http.peer_metadata.Config"),
        ("envoy.filters.http", "stats.PluginConfig"),
        ("envoy.filters.network", "stats.PluginConfig"),
        (
            "envoy.filters.network",
            "envoy.tcp.metadataexchange.config.MetadataExchange",
        ),
        (
            "envoy.filters.upstream_network",
            "envoy.tcp.metadataexchange.config.MetadataExchange",
        ),
    ]
    .into_iter()
    .map(
        |(category, type_name)| envoy_types::pb::envoy::config::core::v3::Extension {
            name: type_name.into(),
            category: category.into(),
            type_urls: vec![type_name.into()],
            ..Default::default()
        },
    )
    .collect()
}

pub(crate) fn names<'a>(
    resources: impl Iterator<Item = &'a light::Any>,
) -> impl Iterator<Item = String> {
    resources.filter_map(|a| light::Named::decode(a.value.clone()).ok().map(|n| n.name))
}

/// The route an Envoy asks for after a listener named `listener`: its port, for an HTTP
/// listener (named address_port).
pub(crate) fn route_name(listener: &str) -> Option<String> {
    listener
        .rsplit('_')
        .next()
        .filter(|p| p.parse::<u32>().is_ok())
        .map(str::to_string)
}

/// The route a gateway asks for after listener `0.0.0.0_<port>`: `http.<port>` (its HTTPS
/// servers' routes are named per server; the load generator's Gateways have none).
pub(crate) fn gateway_route_name(listener: &str) -> Option<String> {
    listener
        .strip_prefix("0.0.0.0_")
        .filter(|p| p.parse::<u32>().is_ok())
        .map(|p| format!("http.{p}"))
}

/// Route names an Envoy asks for: one per HTTP listener port.
pub(crate) fn route_names<'a>(listeners: impl Iterator<Item = &'a light::Any>) -> Vec<String> {
    let mut v: Vec<String> = names(listeners)
        .filter_map(|name| route_name(&name))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The EDS clusters among `clusters`: the names an Envoy asks endpoints for.
pub(crate) fn eds_names<'a>(clusters: impl Iterator<Item = &'a light::Any>) -> Vec<String> {
    clusters
        .filter_map(|a| light::ClusterHead::decode(a.value.clone()).ok())
        .filter(|c| c.discovery_type == 3)
        .map(|c| c.name)
        .collect()
}

/// What an Envoy asks for after a response of type `t`: endpoints of its EDS clusters, routes of
/// its HTTP listeners.
pub(crate) fn envoy_follow<'a>(
    t: &str,
    resources: impl Iterator<Item = &'a light::Any>,
) -> Option<(&'static str, Vec<String>)> {
    match t {
        CDS => Some((EDS, eds_names(resources))),
        LDS => Some((RDS, route_names(resources))),
        _ => None,
    }
}

/// Values equal across simulated proxies, held once: every sidecar of an unscoped mesh subscribes
/// to the same thousands of names, and each holding its own copy cost the generator gigabytes at
/// 10,000 proxies (a real proxy has a machine of its own).
pub(crate) static SUBSCRIPTIONS: std::sync::LazyLock<Interner<wire::SotwRequest>> =
    std::sync::LazyLock::new(Interner::default);
pub(crate) static NAME_SETS: std::sync::LazyLock<Interner<BTreeSet<String>>> =
    std::sync::LazyLock::new(Interner::default);

/// Changes a proxy's set of names by `edit`, then shares the result with the proxies that hold
/// the same set.
pub(crate) fn edit_names(
    names: &mut Arc<BTreeSet<String>>,
    edit: impl FnOnce(&mut BTreeSet<String>),
) {
    edit(Arc::make_mut(names));
    let digest = intern::names_digest(names);
    NAME_SETS.share(names, digest);
}

/// What became of the simulated proxies' streams: those that ended (the proxy reconnects, so
/// otherwise nothing would tell), and what each received last.
pub(crate) struct ProxyStreams {
    count: std::sync::atomic::AtomicUsize,
    first: std::sync::Mutex<Option<String>>,
    /// What each proxy last received (or how far it got before that).
    stages: std::sync::Mutex<std::collections::BTreeMap<usize, &'static str>>,
}

pub(crate) static STREAMS: ProxyStreams = ProxyStreams {
    count: std::sync::atomic::AtomicUsize::new(0),
    first: std::sync::Mutex::new(None),
    stages: std::sync::Mutex::new(std::collections::BTreeMap::new()),
};

impl ProxyStreams {
    pub(crate) fn record(&self, proxy: usize, why: String) {
        self.count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut first) = self.first.lock() {
            first.get_or_insert_with(|| format!("proxy {proxy}: {why}"));
        }
    }

    /// Opens proxy `proxy`'s stream; `None`, recorded, when it could not. Endpoint names are
    /// always kept (a push is converged by them); the other names and endpoint bodies only under
    /// `--kubeconfig`, where new Services are told by name: 5,000 names per response per proxy
    /// were gigabytes waiting in the collector's queue while 10,000 proxies synced.
    pub(crate) async fn open<Req>(
        &self,
        proxy: usize,
        channel: Channel,
        method: &'static str,
        requests: mpsc::Receiver<Req>,
        args: &LoadgenArgs,
    ) -> Option<digest::DigestStream>
    where
        Req: Message + Send + Sync + 'static,
    {
        let kube = args.kubeconfig.is_some();
        let reading = digest::Reading {
            delta: method == DELTA_METHOD,
            names: kube,
            bodies: kube,
            watched: WATCHED_CLUSTER.get().map(String::as_str),
            router: proxy < args.gateway_proxies,
        };
        self.reached(proxy, "opening its stream");
        match open_digests(channel, method, requests, reading).await {
            Ok(stream) => {
                self.reached(proxy, "stream open, nothing received");
                Some(stream)
            }
            Err(status) => {
                self.record(proxy, format!("could not open its stream: {status}"));
                None
            }
        }
    }

    /// The stream's next response; `None`, recorded, when the stream ended.
    pub(crate) async fn next(
        &self,
        proxy: usize,
        stream: &mut digest::DigestStream,
    ) -> Option<digest::Digest> {
        match stream.message().await {
            Ok(Some(r)) => {
                // Only a change of type: the lock, shared by every proxy, taken on every response
                // cost the generator CPU it shares with the daemon.
                if stream.last_type != r.type_url {
                    stream.last_type = r.type_url;
                    self.reached(proxy, r.type_url);
                }
                Some(r)
            }
            Ok(None) => {
                self.record(proxy, "the server ended its stream".into());
                None
            }
            Err(status) => {
                self.record(proxy, format!("its stream failed: {status}"));
                None
            }
        }
    }

    /// Notes how far proxy `proxy` got, for the report on proxies that did not converge.
    pub(crate) fn reached(&self, proxy: usize, stage: &'static str) {
        if let Ok(mut stages) = self.stages.lock() {
            stages.insert(proxy, stage);
        }
    }

    /// Where each of `proxies` got to.
    pub(crate) fn stages_of(&self, proxies: &[usize]) -> String {
        let Ok(stages) = self.stages.lock() else {
            return String::new();
        };
        let shown: Vec<String> = proxies
            .iter()
            .map(|p| format!("proxy {p}: {}", stages.get(p).unwrap_or(&"not started")))
            .collect();
        shown.join("; ")
    }

    /// A line for the report, if any stream ended.
    pub(crate) fn report(&self) -> Option<String> {
        let n = self.count.load(std::sync::atomic::Ordering::Relaxed);
        let first = self.first.lock().ok()?.clone()?;
        Some(format!(
            "proxy streams ended: {n}, each proxy reconnecting after 500 ms as Envoy does (first: {first})"
        ))
    }
}

/// Why the daemon ended streams or closed connections, if it did (the other side of "proxy
/// streams ended"), from its metrics text.
pub(crate) fn daemon_errors(metrics: &str) -> Option<String> {
    let refused: Vec<String> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("rudder_xds_errors_total{reason=\""))
        .filter_map(|rest| {
            let (reason, value) = rest.split_once("\"} ")?;
            let value: f64 = value.trim().parse().ok()?;
            (value > 0.0).then(|| format!("{reason} {value:.0}"))
        })
        .collect();
    (!refused.is_empty()).then(|| {
        format!(
            "daemon's xDS errors (whole run, by reason): {}",
            refused.join(", ")
        )
    })
}

/// Says what the proxies a sync or a push did not reach last received, and what the daemon says
/// it sent them and they acknowledged (its `/debug/syncz`).
pub(crate) async fn not_converged<V>(
    args: &LoadgenArgs,
    got: &HashMap<usize, V>,
    expected: &std::collections::BTreeSet<usize>,
) {
    let missing: Vec<usize> = expected
        .iter()
        .filter(|p| !got.contains_key(*p))
        .take(5)
        .copied()
        .collect();
    println!(
        "not converged, last response received: {}",
        STREAMS.stages_of(&missing)
    );
    if let Some(errors) = daemon_errors(&scrape(args.monitoring_addr, "/metrics").await) {
        println!("{errors}");
    }
    let body = scrape(args.monitoring_addr, "/debug/syncz").await;
    let Ok(serde_json::Value::Array(proxies)) = serde_json::from_str(&body) else {
        return;
    };
    for i in missing {
        let tag = format!("~load-{i}.");
        for p in proxies
            .iter()
            .filter(|p| p["node"].as_str().is_some_and(|id| id.contains(&tag)))
        {
            println!("  the daemon on proxy {i}: {}", p["types"]);
        }
    }
}

/// One State-of-the-World proxy: Envoy-like (wildcard CDS/LDS, then EDS/RDS by name) or gRPC.
pub(crate) async fn sotw_proxy(
    i: usize,
    channel: Channel,
    args: Arc<LoadgenArgs>,
    grpc: bool,
    tx: mpsc::UnboundedSender<Seen>,
) {
    let (req_tx, req_rx) = mpsc::channel(16);
    // A subscription is encoded once, when it changes, and each ACK shares those bytes: every
    // ACK repeats the whole subscription (1,000 names in an unscoped mesh), and building it anew
    // for each ACK cost the generator more CPU than the daemon spent answering, on the cores they
    // share.
    let send = |t: &str, names: &wire::SotwRequest, nonce: &str, version: &str, first: bool| {
        names.with_request(DiscoveryRequest {
            node: if first { node(i, &args, grpc) } else { None },
            type_url: t.into(),
            response_nonce: nonce.into(),
            version_info: version.into(),
            ..Default::default()
        })
    };
    let subscription = |names: &[String]| {
        let mut request = Arc::new(wire::SotwRequest::new(DiscoveryRequest::default(), names));
        let digest = request.names_digest();
        SUBSCRIPTIONS.share(&mut request, digest);
        request
    };
    let unsubscribed = Arc::new(wire::SotwRequest::default());
    // A service in the proxy's own namespace (visible under Sidecar scoping too).
    let svc = i % args.namespaces.max(1);
    let target = format!("{}:{}", host(svc, args.namespaces), 8000 + (svc % 50));
    let target_cluster = format!(
        "outbound|{}||{}",
        8000 + (svc % 50),
        host(svc, args.namespaces)
    );
    if grpc {
        let _ = req_tx
            .send(send(
                LDS,
                &subscription(std::slice::from_ref(&target)),
                "",
                "",
                true,
            ))
            .await;
    } else {
        let _ = req_tx.send(send(CDS, &unsubscribed, "", "", true)).await;
        let _ = req_tx.send(send(LDS, &unsubscribed, "", "", false)).await;
    }
    let Some(mut stream) = STREAMS.open(i, channel, SOTW_METHOD, req_rx, &args).await else {
        return;
    };
    let mut subscribed: HashMap<&'static str, Arc<wire::SotwRequest>> = HashMap::new();
    while let Some(mut r) = STREAMS.next(i, &mut stream).await {
        let t = r.type_url;
        let names = match t {
            EDS | CDS => std::mem::take(&mut r.names),
            _ => Vec::new(),
        };
        let _ = tx.send(Seen::of(i, &mut r, names));
        let mine = subscribed.get(t).unwrap_or(&unsubscribed);
        let _ = req_tx
            .send(send(t, mine, &r.nonce, &r.version, false))
            .await;
        // Follow the dependency chain, as a proxy would.
        let next = match (t, grpc) {
            (LDS, true) => Some((RDS, vec![target.clone()])),
            (RDS, true) => Some((CDS, vec![target_cluster.clone()])),
            _ => r.envoy_follow(),
        };
        let next = next
            .filter(|(_, names)| !names.is_empty())
            .map(|(nt, names)| (nt, subscription(&names)));
        if let Some((nt, names)) = next
            && subscribed.get(nt) != Some(&names)
        {
            subscribed.insert(nt, names.clone());
            let _ = req_tx.send(send(nt, &names, "", "", false)).await;
        }
        if t == CDS && grpc {
            subscribed.insert(CDS, subscription(std::slice::from_ref(&target_cluster)));
        }
    }
}

/// One Delta proxy: wildcard CDS/LDS, named EDS/RDS.
pub(crate) async fn delta_proxy(
    i: usize,
    channel: Channel,
    args: Arc<LoadgenArgs>,
    tx: mpsc::UnboundedSender<Seen>,
) {
    let (req_tx, req_rx) = mpsc::channel(16);
    let _ = req_tx
        .send(DeltaDiscoveryRequest {
            node: node(i, &args, false),
            type_url: CDS.into(),
            ..Default::default()
        })
        .await;
    let _ = req_tx
        .send(DeltaDiscoveryRequest {
            type_url: LDS.into(),
            ..Default::default()
        })
        .await;
    let Some(mut stream) = STREAMS.open(i, channel, DELTA_METHOD, req_rx, &args).await else {
        return;
    };
    let mut known: HashMap<&'static str, Arc<BTreeSet<String>>> = HashMap::new();
    while let Some(mut r) = STREAMS.next(i, &mut stream).await {
        let t = r.type_url;
        let names = std::mem::take(&mut r.names);
        let _ = tx.send(Seen::of(i, &mut r, names));
        let _ = req_tx
            .send(DeltaDiscoveryRequest {
                type_url: t.into(),
                response_nonce: r.nonce.clone(),
                ..Default::default()
            })
            .await;
        // Subscriptions to change: (type, names to add, names to drop).
        let mut edits: Vec<(&'static str, Vec<String>, Vec<String>)> = Vec::new();
        // As Envoy does, a removed cluster's endpoints are unsubscribed: a client that kept them
        // would make the daemon hold a growing subscription in a mesh of constant size.
        if t == CDS && !r.removed.is_empty() {
            let set = known.entry(EDS).or_default();
            let gone: Vec<String> = r
                .removed
                .iter()
                .filter(|n| set.contains(n.as_str()))
                .cloned()
                .collect();
            if !gone.is_empty() {
                edit_names(set, |held| gone.iter().for_each(|n| _ = held.remove(n)));
            }
            edits.push((EDS, Vec::new(), gone));
        }
        if let Some((nt, wanted)) = r.envoy_follow() {
            let set = known.entry(nt).or_default();
            let mut new: Vec<String> = wanted.into_iter().filter(|n| !set.contains(n)).collect();
            new.sort_unstable();
            new.dedup();
            if !new.is_empty() {
                edit_names(set, |held| held.extend(new.iter().cloned()));
            }
            edits.push((nt, new, Vec::new()));
        }
        for (nt, subscribe, unsubscribe) in edits {
            if subscribe.is_empty() && unsubscribe.is_empty() {
                continue;
            }
            let _ = req_tx
                .send(DeltaDiscoveryRequest {
                    type_url: nt.into(),
                    resource_names_subscribe: subscribe,
                    resource_names_unsubscribe: unsubscribe,
                    ..Default::default()
                })
                .await;
        }
    }
}

/// Starts every simulated proxy: `kinds[i]` is (gRPC, Delta) for proxy `i`.
pub(crate) async fn connect_proxies(
    args: Arc<LoadgenArgs>,
    target: SocketAddr,
    kinds: Vec<(bool, bool)>,
    tx: mpsc::UnboundedSender<Seen>,
    connect_start: Instant,
) -> anyhow::Result<()> {
    let mut channel = None;
    for (i, (grpc, delta)) in kinds.into_iter().enumerate() {
        if i % args.streams_per_connection.max(1) == 0 || channel.is_none() {
            // Lazy: every proxy connects at once, as a fleet restarting would.
            let source = std::net::Ipv4Addr::new(
                127,
                0,
                0,
                1 + (i % usize::from(args.source_addresses.max(1))) as u8,
            );
            channel = Some(channel_from(target, source)?);
        }
        let ch = channel.clone().unwrap_or_else(|| unreachable!());
        let (a, t) = (args.clone(), tx.clone());
        if delta {
            // A proxy whose stream fails reconnects after a pause, as Envoy and gRPC do.
            tokio::spawn(async move {
                while !t.is_closed() {
                    delta_proxy(i, ch.clone(), a.clone(), t.clone()).await;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            });
        } else {
            tokio::spawn(async move {
                while !t.is_closed() {
                    sotw_proxy(i, ch.clone(), a.clone(), grpc, t.clone()).await;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            });
        }
        match args.connects_per_second.filter(|r| *r > 0.0) {
            Some(rate) => {
                let at = Duration::from_secs_f64((i + 1) as f64 / rate);
                tokio::time::sleep_until((connect_start + at).into()).await;
            }
            // Ramp like a fleet does: a few hundred new connections at a time.
            None if i % 500 == 499 => tokio::time::sleep(Duration::from_millis(50)).await,
            None => {}
        }
    }
    Ok(())
}
