//! Hostile clients, for `--attackers`: each loops until the process ends.

use super::*;

fn attacker_node(i: usize) -> Option<Node> {
    Some(Node {
        id: format!(
            "sidecar~10.250.{}.{}~attacker-{i}.load-0~load-0.svc.cluster.local",
            (i / 250) % 250,
            i % 250
        ),
        user_agent_name: "envoy".into(),
        ..Default::default()
    })
}

fn first(i: usize, t: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        node: attacker_node(i),
        type_url: t.into(),
        ..Default::default()
    }
}

async fn channel(addr: SocketAddr) -> Option<Channel> {
    Channel::from_shared(format!("http://{addr}"))
        .ok()?
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535)
        .connect()
        .await
        .ok()
}

/// Subscribes to everything and never reads: pushes fill its window and queue.
async fn stuck(i: usize, addr: SocketAddr) {
    loop {
        if let Some(ch) = channel(addr).await {
            let (tx, rx) = mpsc::channel(4);
            let _ = tx.send(first(i, CDS)).await;
            let _ = tx.send(first(i, LDS)).await;
            if let Ok(stream) = open_ads::<_, light::Response>(ch, SOTW_METHOD, rx).await {
                // Held, never read. The daemon drops it after its send timeout; the client
                // does not notice, as a stuck process would not.
                let _held = (stream, tx);
                std::future::pending::<()>().await;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Rejects every response with 10 KiB of error text.
async fn nacker(i: usize, addr: SocketAddr) {
    let text = "rejected ".repeat(1200);
    loop {
        if let Some(ch) = channel(addr).await {
            let (tx, rx) = mpsc::channel(16);
            let _ = tx.send(first(i, CDS)).await;
            if let Ok(mut stream) = open_ads::<_, light::Response>(ch, SOTW_METHOD, rx).await {
                while let Ok(Some(r)) = stream.message().await {
                    for _ in 0..10 {
                        let nack = DiscoveryRequest {
                            type_url: r.type_url.clone(),
                            response_nonce: r.nonce.clone(),
                            error_detail: Some(envoy_types::pb::google::rpc::Status {
                                code: 3,
                                message: text.clone(),
                                ..Default::default()
                            }),
                            ..Default::default()
                        };
                        if tx.send(nack).await.is_err() {
                            break;
                        }
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Connects, subscribes, reads its first response and leaves, every second.
async fn churner(i: usize, addr: SocketAddr) {
    loop {
        if let Some(ch) = channel(addr).await {
            let (tx, rx) = mpsc::channel(4);
            let _ = tx.send(first(i, CDS)).await;
            if let Ok(mut stream) = open_ads::<_, light::Response>(ch, SOTW_METHOD, rx).await {
                let _ = tokio::time::timeout(Duration::from_secs(1), stream.message()).await;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Subscribes to 10,000 more endpoint names at a time until the stream is ended, then again.
async fn subscriber(i: usize, addr: SocketAddr) {
    loop {
        if let Some(ch) = channel(addr).await {
            let (tx, rx) = mpsc::channel(4);
            let _ = tx
                .send(DeltaDiscoveryRequest {
                    node: attacker_node(i),
                    type_url: EDS.into(),
                    ..Default::default()
                })
                .await;
            if let Ok(mut stream) = open_ads::<_, light::DeltaResponse>(ch, DELTA_METHOD, rx).await
            {
                let mut batch = 0usize;
                loop {
                    let names = (0..10_000)
                        .map(|n| format!("outbound|80||a{i}-{batch}-{n}.example.com"))
                        .collect();
                    batch += 1;
                    let req = DeltaDiscoveryRequest {
                        type_url: EDS.into(),
                        resource_names_subscribe: names,
                        ..Default::default()
                    };
                    if tx.send(req).await.is_err() {
                        break;
                    }
                    match tokio::time::timeout(Duration::from_millis(200), stream.message()).await {
                        Ok(Ok(Some(_))) | Err(_) => {}
                        _ => break,
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Starts `n` attackers on a runtime of their own, on one thread: their work (building
/// 10,000-name requests, reading pushes) must not delay the good proxies' tasks, whose
/// receive times are the measurement; the kernel shares the CPU between the two.
pub fn spawn(n: usize, kinds: &[String], addr: SocketAddr) -> anyhow::Result<()> {
    anyhow::ensure!(!kinds.is_empty(), "--attack-kinds is empty");
    if let Some(other) = kinds
        .iter()
        .find(|k| !["stuck", "nack", "churn", "subscribe"].contains(&k.as_str()))
    {
        anyhow::bail!("unknown attack kind {other:?}");
    }
    let kinds = kinds.to_vec();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("attackers".into())
        .spawn(move || {
            runtime.block_on(async move {
                for i in 0..n {
                    match kinds[i % kinds.len()].as_str() {
                        "stuck" => tokio::spawn(stuck(i, addr)),
                        "nack" => tokio::spawn(nacker(i, addr)),
                        "churn" => tokio::spawn(churner(i, addr)),
                        _ => tokio::spawn(subscriber(i, addr)),
                    };
                }
                std::future::pending::<()>().await
            })
        })?;
    Ok(())
}
