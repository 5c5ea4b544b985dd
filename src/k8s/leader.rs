//! Leader election on a Kubernetes Lease, for singleton writers (root-cert ConfigMaps, status). Every
//! replica serves xDS; only the leader writes. A replica takes the lease when it is free or its holder
//! stopped renewing for `lease_duration`, using the lease's resourceVersion so two replicas can never
//! both win. On shutdown the leader releases the lease, so a successor need not wait out the TTL.

use crate::k8s::metrics::LeaderMetrics;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

#[derive(Debug, Clone)]
pub struct LeaderElection {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_every: Duration,
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

impl LeaderElection {
    /// Runs until `cancel`; the receiver says whether this replica leads right now.
    pub fn spawn(
        self,
        client: kube::Client,
        metrics: Arc<LeaderMetrics>,
        cancel: CancellationToken,
    ) -> (watch::Receiver<bool>, tokio::task::JoinHandle<()>) {
        let (tx, rx) = watch::channel(false);
        let handle = tokio::spawn(async move {
            let api: Api<Lease> = Api::namespaced(client, &self.namespace);
            let mut ticker = tokio::time::interval(self.renew_every);
            let mut last_renewed: Option<tokio::time::Instant> = None;
            let mut errors = super::RepeatLog::default();
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = ticker.tick() => {}
                }
                let leading = match self.try_acquire_or_renew(&api).await {
                    Ok(won) => {
                        errors.recovered(&self.name, "lease updates work again");
                        if won {
                            last_renewed = Some(tokio::time::Instant::now());
                        }
                        won
                    }
                    Err(e) => {
                        errors.failed(&self.name, "lease update failed", &e);
                        // Keep leading only while our last renewal is still within the TTL.
                        *tx.borrow()
                            && last_renewed.is_some_and(|t| t.elapsed() < self.lease_duration)
                    }
                };
                if leading != *tx.borrow() {
                    info!(lease = %self.name, identity = %self.identity, leading, "leadership changed");
                }
                metrics.leader.set(i64::from(leading));
                tx.send_replace(leading);
            }
            if *tx.borrow() {
                if let Err(e) = self.release(&api).await {
                    warn!(lease = %self.name, error = %e, "could not release the lease");
                }
                metrics.leader.set(0);
                tx.send_replace(false);
            }
        });
        (rx, handle)
    }

    fn spec(&self, acquire: Option<MicroTime>, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.lease_duration.as_secs().max(1) as i32),
            acquire_time: acquire,
            renew_time: Some(now()),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    /// True when this replica holds the lease after the call.
    async fn try_acquire_or_renew(&self, api: &Api<Lease>) -> Result<bool, kube::Error> {
        let Some(mut lease) = api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    namespace: Some(self.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(self.spec(Some(now()), 0)),
            };
            return match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let ttl = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(15)));
        let expired = spec
            .renew_time
            .as_ref()
            .is_none_or(|t| t.0.checked_add(ttl).is_ok_and(|end| end < Timestamp::now()));
        let ours = holder == self.identity;
        if !(ours || holder.is_empty() || expired) {
            return Ok(false);
        }
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!ours);
        let acquire = if ours {
            spec.acquire_time.clone()
        } else {
            Some(now())
        };
        lease.spec = Some(self.spec(acquire, transitions));
        match api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            // Someone else updated it since we read it: they won this round.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn release(&self, api: &Api<Lease>) -> Result<(), kube::Error> {
        let Some(mut lease) = api.get_opt(&self.name).await? else {
            return Ok(());
        };
        if lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            != Some(self.identity.as_str())
        {
            return Ok(());
        }
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.renew_time = None;
        }
        api.replace(&self.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }
}
