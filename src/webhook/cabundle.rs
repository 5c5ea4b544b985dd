//! Keeps our CA's root in the `caBundle` of the webhook configurations we own, so the API server
//! trusts the webhook port's certificate. Ownership is by label (`istio.io/rev=<revision>`, as
//! istiod's charts label `istio-sidecar-injector` and `istio-validator-*`). Only the leader writes;
//! an edit that removes or changes the bundle is repaired from the watch.

use crate::metrics::ReasonLabels;
use crate::webhook::metrics::{ConfigFailureLabels, ConfigNameLabels, WebhookMetrics};
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use std::fmt::Debug;
use std::sync::Arc;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

/// A webhook configuration kind whose entries carry a `clientConfig.caBundle`.
pub trait WebhookConfiguration:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
    + Clone
    + Debug
    + serde::de::DeserializeOwned
    + serde::Serialize
    + Send
    + Sync
    + 'static
{
    fn bundles(&mut self) -> Vec<&mut Option<ByteString>>;
}

/// Both kinds keep their entries in `webhooks`, each with a `clientConfig`.
macro_rules! webhook_configuration {
    ($($kind:ty),*) => {$(
        impl WebhookConfiguration for $kind {
            fn bundles(&mut self) -> Vec<&mut Option<ByteString>> {
                self.webhooks
                    .iter_mut()
                    .flatten()
                    .map(|w| &mut w.client_config.ca_bundle)
                    .collect()
            }
        }
    )*};
}

webhook_configuration!(ValidatingWebhookConfiguration, MutatingWebhookConfiguration);

/// Sets every entry's caBundle to `bundle`; true when something changed.
pub fn set_bundle<K: WebhookConfiguration>(config: &mut K, bundle: &[u8]) -> bool {
    let mut changed = false;
    for slot in config.bundles() {
        if slot.as_ref().map(|b| b.0.as_slice()) != Some(bundle) {
            *slot = Some(ByteString(bundle.to_vec()));
            changed = true;
        }
    }
    changed
}

#[derive(Clone)]
pub struct CaBundlePatcher {
    pub client: kube::Client,
    pub label_selector: String,
    /// The trust bundle to set; a new one (a root rotation) re-lists and re-patches every
    /// configuration.
    pub roots: watch::Receiver<Arc<str>>,
    pub metrics: Arc<WebhookMetrics>,
}

impl CaBundlePatcher {
    pub async fn run(mut self, mut leading: watch::Receiver<bool>, cancel: CancellationToken) {
        loop {
            if *leading.borrow_and_update() {
                let stop = cancel.child_token();
                let validating = tokio::spawn(
                    self.clone()
                        .watch::<ValidatingWebhookConfiguration>(stop.clone())
                        .instrument(info_span!(
                            "webhook-ca-bundle",
                            kind = "ValidatingWebhookConfiguration"
                        )),
                );
                let mutating = tokio::spawn(
                    self.clone()
                        .watch::<MutatingWebhookConfiguration>(stop.clone())
                        .instrument(info_span!(
                            "webhook-ca-bundle",
                            kind = "MutatingWebhookConfiguration"
                        )),
                );
                let lost = loop {
                    tokio::select! {
                        _ = cancel.cancelled() => break false,
                        changed = leading.changed() => {
                            if changed.is_err() { break false }
                            if !*leading.borrow_and_update() { break true }
                        }
                        changed = self.roots.changed() => {
                            if changed.is_err() { break false }
                            info!("CA root changed: patching every webhook configuration again");
                            break true;
                        }
                    }
                };
                stop.cancel();
                let _ = validating.await;
                let _ = mutating.await;
                if !lost {
                    return;
                }
            } else {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    changed = leading.changed() => if changed.is_err() { return },
                }
            }
        }
    }

    async fn watch<K: WebhookConfiguration>(self, stop: CancellationToken) {
        let api: Api<K> = Api::all(self.client.clone());
        let config = watcher::Config::default().labels(&self.label_selector);
        let mut stream = crate::k8s::backed_off_watch(api.clone(), config);
        let mut errors = crate::k8s::RepeatLog::default();
        let kind = <K as kube::Resource>::kind(&()).to_string();
        loop {
            let event = tokio::select! {
                _ = stop.cancelled() => return,
                e = stream.next() => e,
            };
            // `Init` is announced before the list: nothing has answered yet.
            if matches!(event, Some(Ok(ref e)) if !matches!(e, watcher::Event::Init)) {
                errors.recovered(&kind, "webhook configuration watch recovered");
            }
            let object = match event {
                None => return,
                Some(Err(e)) => {
                    errors.failed(&kind, "webhook configuration watch failed; retrying", &e);
                    continue;
                }
                Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => o,
                Some(Ok(_)) => continue,
            };
            self.patch(&api, object).await;
        }
    }

    async fn patch<K: WebhookConfiguration>(&self, api: &Api<K>, mut object: K) {
        let name = object.meta().name.clone().unwrap_or_default();
        let labels = ConfigNameLabels { name: name.clone() };
        let failed = |reason: &str| {
            self.metrics
                .patch_failures
                .get_or_create(&ConfigFailureLabels {
                    name: name.clone(),
                    reason: reason.into(),
                })
                .inc();
        };
        let bundle = self.roots.borrow().clone();
        for attempt in 0..5u32 {
            if !set_bundle(&mut object, bundle.as_bytes()) {
                return;
            }
            self.metrics.patch_attempts.get_or_create(&labels).inc();
            if attempt > 0 {
                self.metrics.patch_retries.get_or_create(&labels).inc();
            }
            // A replace carries the resourceVersion we read: a concurrent edit wins, and we re-read.
            let result = api.replace(&name, &PostParams::default(), &object).await;
            let outcome = if result.is_ok() { "patched" } else { "error" };
            self.metrics
                .webhook_ca_patches
                .get_or_create(&ReasonLabels {
                    reason: outcome.into(),
                })
                .inc();
            match result {
                Ok(_) => {
                    info!(name, "caBundle written into webhook configuration");
                    return;
                }
                Err(e) => {
                    warn!(name, attempt, error = %e, "caBundle write failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(250 << attempt)).await;
                    match api.get(&name).await {
                        Ok(fresh) => object = fresh,
                        Err(e) => {
                            warn!(name, error = %e, "webhook configuration cannot be re-read");
                            failed("webhook_config_not_found");
                            return;
                        }
                    }
                }
            }
        }
        failed("webhook_update_failure");
    }
}
