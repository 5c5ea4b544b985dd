//! The revision tags that point at this revision, as istiod's tag watcher finds them: every
//! MutatingWebhookConfiguration labelled `istio.io/tag=<tag>` and `istio.io/rev=<revision>`, whether
//! the chart made it (`revisionTags`) or `istioctl tag set` did. The injector accepts namespaces and
//! pods labelled with any of them. Every replica watches (the injector runs on every replica).

use arc_swap::ArcSwap;
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::api::Api;
use kube::runtime::watcher;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// The tag label on a webhook configuration.
pub const TAG_LABEL: &str = "istio.io/tag";

/// The tags found in the cluster, shared with the injector.
pub type ClusterTags = Arc<ArcSwap<BTreeSet<String>>>;

/// Tag of each webhook configuration, by its name; what is published is the set of values.
#[derive(Default)]
struct Tracked {
    by_config: BTreeMap<String, String>,
    /// Filled during a (re)list, then swapped in whole, so a relist drops configurations deleted
    /// while the watch was down.
    relisting: Option<BTreeMap<String, String>>,
}

impl Tracked {
    /// Applies one watch event; true when the published set may have changed.
    fn apply(&mut self, event: watcher::Event<MutatingWebhookConfiguration>) -> bool {
        let entry = |c: &MutatingWebhookConfiguration| {
            let name = c.metadata.name.clone().unwrap_or_default();
            let tag = c
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(TAG_LABEL))
                .cloned()
                .unwrap_or_default();
            (name, tag)
        };
        match event {
            watcher::Event::Init => {
                self.relisting = Some(BTreeMap::new());
                false
            }
            watcher::Event::InitApply(c) => {
                let (name, tag) = entry(&c);
                self.relisting.get_or_insert_default().insert(name, tag);
                false
            }
            watcher::Event::InitDone => {
                self.by_config = self.relisting.take().unwrap_or_default();
                true
            }
            watcher::Event::Apply(c) => {
                let (name, tag) = entry(&c);
                self.by_config.insert(name, tag);
                true
            }
            watcher::Event::Delete(c) => {
                let (name, _) = entry(&c);
                self.by_config.remove(&name).is_some()
            }
        }
    }

    fn tags(&self) -> BTreeSet<String> {
        self.by_config
            .values()
            .filter(|t| !t.is_empty())
            .cloned()
            .collect()
    }
}

/// Keeps `tags` equal to the tags of `revision` in the cluster until `cancel`.
pub async fn run(
    client: kube::Client,
    revision: String,
    tags: ClusterTags,
    cancel: CancellationToken,
) {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client);
    let selector = format!("{TAG_LABEL},istio.io/rev={revision}");
    let mut stream =
        crate::k8s::backed_off_watch(api, watcher::Config::default().labels(&selector));
    let mut tracked = Tracked::default();
    let mut errors = crate::k8s::RepeatLog::default();
    loop {
        let event = tokio::select! {
            _ = cancel.cancelled() => return,
            e = stream.next() => e,
        };
        match event {
            None => return,
            Some(Err(e)) => {
                errors.failed("revision tags", "revision tag watch failed; retrying", &e)
            }
            Some(Ok(event)) => {
                // `Init` is announced before the list: nothing has answered yet.
                if !matches!(event, watcher::Event::Init) {
                    errors.recovered(
                        "MutatingWebhookConfiguration",
                        "revision tag watch recovered",
                    );
                }
                if tracked.apply(event) {
                    let now = tracked.tags();
                    if **tags.load() != now {
                        info!(revision, tags = ?now, "revision tags changed");
                        tags.store(Arc::new(now));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn config(name: &str, tag: &str) -> MutatingWebhookConfiguration {
        MutatingWebhookConfiguration {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([(TAG_LABEL.to_string(), tag.to_string())].into()),
                ..ObjectMeta::default()
            },
            webhooks: None,
        }
    }

    #[test]
    fn tags_follow_the_watch_and_a_relist_drops_what_is_gone() {
        let mut t = Tracked::default();
        t.apply(watcher::Event::Init);
        t.apply(watcher::Event::InitApply(config(
            "istio-revision-tag-prod",
            "prod",
        )));
        t.apply(watcher::Event::InitDone);
        t.apply(watcher::Event::Apply(config(
            "istio-revision-tag-next",
            "next",
        )));
        assert_eq!(t.tags(), ["next".to_string(), "prod".to_string()].into());
        t.apply(watcher::Event::Delete(config(
            "istio-revision-tag-next",
            "next",
        )));
        assert_eq!(t.tags(), ["prod".to_string()].into());
        // Relisted after an outage during which "prod" was deleted and "blue" made.
        t.apply(watcher::Event::Init);
        t.apply(watcher::Event::InitApply(config(
            "istio-revision-tag-blue",
            "blue",
        )));
        assert_eq!(t.tags(), ["prod".to_string()].into(), "old set until done");
        t.apply(watcher::Event::InitDone);
        assert_eq!(t.tags(), ["blue".to_string()].into());
    }
}
