//! The replay baseline: a server of pre-encoded responses captured from the daemon, run as a process of its own, against which the daemon's push path is measured.

use super::*;

/// The replay baseline: the responses the daemon sent one sidecar (CDS, EDS, LDS, RDS), encoded
/// once and written through the daemon's own framing (`wire::serve_rpc`). Each request is answered
/// with its type's bytes; each trigger sends every type, in push order, to every stream: what a
/// full push sends, without computing anything. Delta streams get the same resources as Delta
/// entries; on a full-push trigger that is all of them, more than a Delta push sends, so the full
/// push ceiling is a SotW one.
pub(crate) struct Replay {
    /// Resource bytes by type, in push order: the `resources` field of a SotW response.
    responses: Vec<(&'static str, Bytes)>,
    /// The same resources as the `resources` field of a Delta response, by type.
    delta: Vec<(&'static str, Bytes)>,
    /// With `--endpoint-only`: what each trigger sends instead, EDS with the one
    /// ClusterLoadAssignment an endpoint push changes (as SotW incremental EDS does); SotW and
    /// Delta encodings.
    endpoint_push: Option<(Bytes, Bytes)>,
    trigger: broadcast::Sender<u64>,
}

/// A Delta response's `Resource`, as the replay server writes it (the simulated proxies read only
/// `light::Resource`).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ReplayResource {
    #[prost(string, tag = "1")]
    version: String,
    #[prost(message, optional, tag = "2")]
    resource: Option<light::Any>,
    #[prost(string, tag = "3")]
    name: String,
}

/// The `resources` field of a Delta response carrying the resources of `sotw` (the `resources`
/// field of a SotW response), each named by its field 1, as every xDS type here is.
pub(crate) fn delta_resources(sotw: &Bytes) -> anyhow::Result<Bytes> {
    let sotw = light::Response::decode(sotw.clone())?;
    let mut out = Vec::new();
    for any in sotw.resources {
        let name = light::Named::decode(any.value.clone())?.name;
        let entry = ReplayResource {
            version: "1".into(),
            resource: Some(any),
            name,
        };
        prost::encoding::message::encode(2, &entry, &mut out);
    }
    Ok(out.into())
}

/// What the replay reads of a request of either protocol.
pub(crate) trait ReplayRequest: Message + Default + Send + 'static {
    /// Whether Delta; the responses are encoded for it.
    const DELTA: bool;
    /// The type asked for, when the request asks for something: a first request or a
    /// subscription. An ACK (it carries a nonce) asks for nothing.
    fn asks(&self) -> Option<&str>;
}

impl ReplayRequest for wire::SotwRequest {
    const DELTA: bool = false;
    fn asks(&self) -> Option<&str> {
        let r = &self.request;
        r.response_nonce.is_empty().then_some(r.type_url.as_str())
    }
}

impl ReplayRequest for DeltaDiscoveryRequest {
    const DELTA: bool = true;
    fn asks(&self) -> Option<&str> {
        self.response_nonce
            .is_empty()
            .then_some(self.type_url.as_str())
    }
}

impl Replay {
    /// The captured responses, as written to a stream of this protocol.
    pub(crate) fn all(&self, delta: bool) -> &[(&'static str, Bytes)] {
        if delta { &self.delta } else { &self.responses }
    }

    /// A stream of either protocol: each request that asks for a type is answered with its
    /// resources, ACKs are read and dropped, and each trigger sends a push.
    pub(crate) async fn stream<Req: ReplayRequest>(
        self: Arc<Self>,
        req: tonic::Request<wire::MessageStream<Req>>,
    ) -> wire::AdsResult {
        let mut inbound = req.into_inner();
        let (tx, rx) = mpsc::channel(8);
        tokio::spawn(async move {
            let mut trigger = self.trigger.subscribe();
            let (mut nonce, mut version) = (0u64, 0u64);
            loop {
                let mut send: Vec<(&'static str, Bytes)> = Vec::new();
                tokio::select! {
                    msg = inbound.message() => match msg {
                        Ok(Some(r)) => {
                            let asked = r.asks().and_then(|t| {
                                self.all(Req::DELTA).iter().find(|(k, _)| *k == t)
                            });
                            send.extend(asked.cloned());
                        }
                        _ => return,
                    },
                    v = trigger.recv() => {
                        let Ok(v) = v else { return };
                        version = v;
                        match &self.endpoint_push {
                            Some((sotw, delta)) => {
                                send.push((EDS, if Req::DELTA { delta } else { sotw }.clone()));
                            }
                            None => send.extend(self.all(Req::DELTA).iter().cloned()),
                        }
                    }
                }
                for (type_url, bytes) in send {
                    nonce += 1;
                    let (v, n) = (version.to_string(), nonce.to_string());
                    let resp = if Req::DELTA {
                        EncodedResponse::delta(&v, type_url, &n, &[], vec![bytes])
                    } else {
                        EncodedResponse::new(&v, type_url, &n, bytes)
                    };
                    if tx.send(Ok(resp)).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(tonic::Response::new(ReceiverStream::new(rx)))
    }
}

/// The replay server as a gRPC service for tonic's router (SotW and Delta).
#[derive(Clone)]
pub(crate) struct ReplayServer(Arc<Replay>);

impl tonic::server::NamedService for ReplayServer {
    const NAME: &'static str = wire::SERVICE_NAME;
}

impl<B> tonic::codegen::Service<tonic::codegen::http::Request<B>> for ReplayServer
where
    B: tonic::codegen::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = tonic::codegen::http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = tonic::codegen::BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: tonic::codegen::http::Request<B>) -> Self::Future {
        let replay = self.0.clone();
        const MAX: usize = 4 * 1024 * 1024;
        match req.uri().path() {
            SOTW_METHOD => Box::pin(async move {
                Ok(
                    wire::serve_rpc::<wire::SotwRequest, _, _>(req, MAX, |r| replay.stream(r))
                        .await,
                )
            }),
            DELTA_METHOD => Box::pin(async move {
                Ok(
                    wire::serve_rpc::<DeltaDiscoveryRequest, _, _>(req, MAX, |r| replay.stream(r))
                        .await,
                )
            }),
            _ => Box::pin(async move {
                Ok(tonic::Status::unimplemented("not an ADS method").into_http())
            }),
        }
    }
}

/// The resources field of a response, encoded: what the replay server writes.
pub(crate) fn resource_bytes(resp: &light::Response) -> Bytes {
    light::Response {
        resources: resp.resources.clone(),
        ..Default::default()
    }
    .encode_to_vec()
    .into()
}

/// The replay server, run as a process of its own (this binary with `--serve-replay`), as the
/// daemon is: the two then share the cores with the generator alike, and each process holds one end
/// of every connection (one process holding both ends could not open 25,000 proxies' connections
/// under this machine's limit of 20,000 open files).
pub(crate) struct ReplayProcess {
    pub(crate) child: tokio::process::Child,
    pub(crate) pushes: tokio::process::ChildStdin,
    pub(crate) addr: SocketAddr,
}

impl ReplayProcess {
    /// Starts the server with this run's arguments and waits for the address it serves.
    pub(crate) async fn start() -> anyhow::Result<ReplayProcess> {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(std::env::current_exe()?)
            .args(std::env::args_os().skip(1))
            .arg("--serve-replay")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let (Some(pushes), Some(out)) = (child.stdin.take(), child.stdout.take()) else {
            anyhow::bail!("the replay server's standard input and output are not piped");
        };
        let mut out = tokio::io::BufReader::new(out).lines();
        let line = tokio::time::timeout(Duration::from_secs(120), out.next_line())
            .await??
            .unwrap_or_default();
        // Anything it prints later is passed on, so a full pipe never stops it.
        tokio::spawn(async move {
            while let Ok(Some(more)) = out.next_line().await {
                println!("replay server: {more}");
            }
        });
        let addr = line
            .trim()
            .strip_prefix(REPLAY_SERVING)
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("the replay server did not start: {line:?}"))?;
        Ok(ReplayProcess {
            child,
            pushes,
            addr,
        })
    }

    /// Has the server send version `version` of every type to every stream.
    pub(crate) async fn push(&mut self, version: u64) -> anyhow::Result<()> {
        use tokio::io::AsyncWriteExt;
        self.pushes
            .write_all(format!("{version}\n").as_bytes())
            .await?;
        Ok(self.pushes.flush().await?)
    }

    pub(crate) fn cpu_seconds(&self) -> f64 {
        self.child
            .id()
            .map_or(0.0, |pid| rudder::metrics::cpu_seconds_of(&pid.to_string()))
    }
}

/// What the replay server prints before the address it serves.
pub(crate) const REPLAY_SERVING: &str = "replay serving on ";

/// The replay server's process: captures what the daemon sends a sidecar, serves it, and sends a
/// full push for each version read from standard input; it ends with its input.
pub(crate) async fn serve_replay(args: LoadgenArgs) -> anyhow::Result<()> {
    use tokio::io::AsyncBufReadExt;
    let responses = capture(&args).await?;
    let endpoint_push = if args.endpoint_only {
        let cluster = moved_cluster(&args);
        let eds = responses
            .iter()
            .find(|(t, _)| *t == EDS)
            .and_then(|(_, b)| light::Response::decode(b.clone()).ok())
            .ok_or_else(|| anyhow::anyhow!("no EDS response was captured"))?;
        let changed: Vec<light::Any> = eds
            .resources
            .into_iter()
            .filter(|a| light::Named::decode(a.value.clone()).is_ok_and(|n| n.name == cluster))
            .collect();
        anyhow::ensure!(changed.len() == 1, "{cluster} was not captured");
        let sotw = resource_bytes(&light::Response {
            resources: changed,
            ..Default::default()
        });
        let delta = delta_resources(&sotw)?;
        Some((sotw, delta))
    } else {
        None
    };
    let delta = responses
        .iter()
        .map(|(t, b)| Ok((*t, delta_resources(b)?)))
        .collect::<anyhow::Result<_>>()?;
    let (trigger, _) = broadcast::channel(16);
    let replay = Arc::new(Replay {
        responses,
        delta,
        endpoint_push,
        trigger: trigger.clone(),
    });
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind("127.0.0.1:0".parse()?)?;
    let listener = socket.listen(16_384)?;
    println!("{REPLAY_SERVING}{}", listener.local_addr()?);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ReplayServer(replay))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let mut versions = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = versions.next_line().await? {
        if let Ok(version) = line.trim().parse::<u64>() {
            let _ = trigger.send(version);
        }
    }
    Ok(())
}

/// Captures what the daemon sends an Envoy-like sidecar of namespace 0 (following CDS to EDS and
/// LDS to RDS as the simulated proxies do), for the replay server.
pub(crate) async fn capture(args: &LoadgenArgs) -> anyhow::Result<Vec<(&'static str, Bytes)>> {
    let channel = Channel::from_shared(format!("http://{}", args.xds_addr))?
        .connect()
        .await?;
    let (req_tx, req_rx) = mpsc::channel(16);
    for (i, t) in [CDS, LDS].into_iter().enumerate() {
        let _ = req_tx
            .send(DiscoveryRequest {
                node: if i == 0 { node(0, args, false) } else { None },
                type_url: t.into(),
                ..Default::default()
            })
            .await;
    }
    let mut stream = open_ads::<_, light::Response>(channel, SOTW_METHOD, req_rx).await?;
    let mut got: HashMap<&'static str, Bytes> = HashMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while got.len() < 4 {
        let Ok(Ok(Some(r))) = tokio::time::timeout_at(deadline, stream.message()).await else {
            break;
        };
        let t = static_type(&r.type_url);
        if let Some((nt, names)) = envoy_follow(t, r.resources.iter())
            && !names.is_empty()
        {
            let _ = req_tx
                .send(DiscoveryRequest {
                    type_url: nt.into(),
                    resource_names: names,
                    ..Default::default()
                })
                .await;
        }
        got.entry(t).or_insert_with(|| resource_bytes(&r));
    }
    anyhow::ensure!(
        got.contains_key(CDS),
        "could not capture a CDS response from {}",
        args.xds_addr
    );
    Ok([CDS, EDS, LDS, RDS]
        .into_iter()
        .filter_map(|t| got.remove(t).map(|b| (t, b)))
        .collect())
}
