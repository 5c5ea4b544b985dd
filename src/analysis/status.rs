//! The leader's writer of analysis findings (istiod's status controller with
//! `PILOT_ENABLE_ANALYSIS`): after a quiet second following a change, and every analysis interval,
//! the findings of the current snapshot are compared with what each object's status holds, and
//! only the differences are written. A write is a JSON merge patch of the status subresource that
//! sets only `validationMessages` and `observedGeneration`, so fields other writers own are left
//! alone; writes are rate-limited. The store never sees status (the Kubernetes source drops it),
//! so a write does not cause a push.

use super::{Findings, analyze};
use crate::config::{ConfigKey, Kind};
use crate::metrics::{ReasonLabels, Registry};
use crate::model::Registry as ServiceRegistry;
use crate::store::Store;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// The kinds analyzers report on (and whose statuses are read when leadership starts).
const ANALYZED: &[Kind] = &[Kind::VirtualService, Kind::Gateway];

/// Status writes by outcome (`rudder_status_writes_total{reason}`: written, conflict, error).
pub struct StatusMetrics {
    pub writes: Family<ReasonLabels, Counter>,
}

impl StatusMetrics {
    pub fn register(registry: &mut Registry) -> StatusMetrics {
        StatusMetrics {
            writes: registry.register(
                "rudder_status_writes",
                "Analysis results written into the status of Istio objects, by outcome",
                Family::default(),
            ),
        }
    }

    fn count(&self, outcome: &str) {
        self.writes
            .get_or_create(&ReasonLabels {
                reason: outcome.into(),
            })
            .inc();
    }
}

pub struct StatusWriter {
    pub client: kube::Client,
    pub store: Arc<Store>,
    pub domain_suffix: String,
    /// Time between full analyses (istiod's `PILOT_ANALYSIS_INTERVAL`).
    pub interval: Duration,
    pub writes_per_second: NonZeroU32,
    pub metrics: Arc<StatusMetrics>,
}

/// What an object's status says, as far as this writer owns it.
#[derive(Debug, Clone, PartialEq)]
struct Written {
    messages: Vec<Value>,
    generation: Option<i64>,
}

fn api_resource(kind: Kind) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(kind.group(), "v1", kind.name()),
        &kind.plural(),
    )
}

impl StatusWriter {
    /// Runs while this replica leads, until `cancel`.
    pub async fn run(self, mut leading: watch::Receiver<bool>, cancel: CancellationToken) {
        let limiter =
            governor::RateLimiter::direct(governor::Quota::per_second(self.writes_per_second));
        loop {
            if *leading.borrow_and_update() {
                info!("leading: writing analysis results into object status");
                let mut written = self.read_current().await;
                let mut events = self.store.subscribe();
                let mut tick = tokio::time::interval(self.interval);
                loop {
                    self.write_differences(&mut written, &limiter, &leading, &cancel)
                        .await;
                    // The next run: the interval, or a quiet second after a change.
                    let lost = tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tick.tick() => false,
                        _ = quiet_after_change(&mut events) => false,
                        changed = leading.changed() => changed.is_err() || !*leading.borrow_and_update(),
                    };
                    if lost {
                        break;
                    }
                }
            } else {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    changed = leading.changed() => if changed.is_err() { return },
                }
            }
        }
    }

    /// The statuses objects have now (written by an earlier leader, or by istiod), so that stale
    /// messages are cleared and nothing is rewritten unchanged.
    async fn read_current(&self) -> BTreeMap<ConfigKey, Written> {
        let mut out = BTreeMap::new();
        for &kind in ANALYZED {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &api_resource(kind));
            let list = match api.list(&Default::default()).await {
                Ok(l) => l,
                Err(e) => {
                    warn!(kind = kind.name(), error = %e, "cannot read current statuses");
                    continue;
                }
            };
            for obj in list.items {
                let status = &obj.data["status"];
                let messages = status["validationMessages"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if messages.is_empty() {
                    continue;
                }
                let key = ConfigKey {
                    kind,
                    namespace: obj.metadata.namespace.clone().unwrap_or_default(),
                    name: obj.metadata.name.clone().unwrap_or_default(),
                };
                let generation = status["observedGeneration"]
                    .as_str()
                    .and_then(|g| g.parse().ok())
                    .or_else(|| status["observedGeneration"].as_i64());
                out.insert(
                    key,
                    Written {
                        messages,
                        generation,
                    },
                );
            }
        }
        out
    }

    /// Analyzes the current snapshot and writes each object whose status differs.
    async fn write_differences(
        &self,
        written: &mut BTreeMap<ConfigKey, Written>,
        limiter: &governor::DefaultDirectRateLimiter,
        leading: &watch::Receiver<bool>,
        cancel: &CancellationToken,
    ) {
        let snapshot = self.store.snapshot();
        let registry = ServiceRegistry::build(&snapshot, &self.domain_suffix);
        let findings: Findings = analyze(&snapshot, &registry, &self.domain_suffix);
        for (key, messages) in &findings {
            for m in messages {
                debug!(object = %key, code = m.code, "configuration analysis: {}", m.text);
            }
        }
        // Objects with findings now, and objects whose old findings must be cleared.
        let mut wanted: BTreeMap<ConfigKey, Written> = BTreeMap::new();
        for key in findings.keys().chain(written.keys()) {
            let Some(entry) = snapshot.get(key) else {
                continue;
            };
            let messages = findings
                .get(key)
                .map(|m| m.iter().map(|m| m.to_status()).collect())
                .unwrap_or_default();
            wanted.insert(
                key.clone(),
                Written {
                    messages,
                    generation: entry.config.metadata.generation,
                },
            );
        }
        written.retain(|k, _| snapshot.get(k).is_some());
        for (key, want) in wanted {
            if written.get(&key) == Some(&want)
                || (want.messages.is_empty() && !written.contains_key(&key))
            {
                continue;
            }
            if cancel.is_cancelled() || !*leading.borrow() {
                return;
            }
            limiter.until_ready().await;
            match self.patch(&key, &want).await {
                Ok(()) => {
                    self.metrics.count("written");
                    if want.messages.is_empty() {
                        written.remove(&key);
                    } else {
                        written.insert(key, want);
                    }
                }
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {
                    self.metrics.count("conflict");
                    debug!(object = %key, error = %e, "status not written; the object changed");
                }
                Err(e) => {
                    self.metrics.count("error");
                    warn!(object = %key, error = %e, "status not written; will retry");
                }
            }
        }
    }

    async fn patch(&self, key: &ConfigKey, want: &Written) -> Result<(), kube::Error> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &key.namespace, &api_resource(key.kind));
        let mut status = json!({"validationMessages": want.messages});
        if let Some(g) = want.generation {
            status["observedGeneration"] = g.to_string().into();
        }
        api.patch_status(
            &key.name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .map(|_| ())
    }
}

/// Resolves once a store change has been followed by a second without another.
async fn quiet_after_change(events: &mut tokio::sync::broadcast::Receiver<crate::store::Event>) {
    if events.recv().await.is_err() && events.is_closed() {
        std::future::pending::<()>().await;
    }
    loop {
        match tokio::time::timeout(Duration::from_secs(1), events.recv()).await {
            Err(_) => return,
            Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) => {
                std::future::pending::<()>().await
            }
            Ok(_) => continue,
        }
    }
}
