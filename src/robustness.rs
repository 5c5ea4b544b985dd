//! Entry points for fuzzing: each takes arbitrary bytes as they would arrive from outside and runs
//! them through the same code the daemon runs. They must never panic; every outcome is a value.
//! `fuzz/` drives them with cargo-fuzz; `tests/library/fuzz_regressions.rs` replays the saved inputs.

use crate::config;
use crate::model::mesh::MeshSettings;
use crate::store::{Change, StoreWriter};
use crate::xds::context::PushContext;
use crate::xds::proxy::Proxy;
use std::sync::OnceLock;
use std::time::Duration;

/// A multi-document YAML text: parsed, and every object validated (the file source's path).
pub fn config_yaml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = config::parse_yaml(text, "default");
    for c in &parsed.configs {
        let _ = crate::validation::validate(c);
    }
}

/// The example mesh, built once: a push context worth generating config from.
fn context() -> &'static PushContext {
    static CONTEXT: OnceLock<PushContext> = OnceLock::new();
    CONTEXT.get_or_init(|| {
        let store = StoreWriter::default();
        let examples = concat!(
            include_str!("../examples/services.yaml"),
            "\n---\n",
            include_str!("../examples/routing.yaml")
        );
        let parsed = config::parse_yaml(examples, "default");
        store.apply(parsed.configs.into_iter().map(Change::Upsert).collect());
        crate::xds::push::initial_context(&store, &MeshSettings::default(), None)
    })
}

/// A DiscoveryRequest as bytes on the wire: decoded, its node identified, and config generated for the
/// type and names it asks for (what a stream does with a first request).
pub fn discovery_request(data: &[u8]) {
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
    use prost::Message;
    let Ok(req) = DiscoveryRequest::decode(data) else {
        return;
    };
    let Ok(proxy) = Proxy::from_node(req.node.as_ref()) else {
        return;
    };
    let Some(type_url) = crate::xds::types::TypeUrl::parse(&req.type_url) else {
        return;
    };
    let ctx = context();
    let scope = ctx.scope(&proxy);
    let names: std::collections::BTreeSet<String> = req.resource_names.into_iter().collect();
    let names = (!names.is_empty()).then_some(&names);
    let _ = crate::xds::generate::generate(ctx, &proxy, &scope, type_url, names);
}

fn authority() -> &'static crate::ca::Authority {
    static AUTHORITY: OnceLock<crate::ca::Authority> = OnceLock::new();
    AUTHORITY.get_or_init(|| {
        let (cert, key) = crate::ca::Authority::generate_root("cluster.local")
            .expect("generating a root with a fixed algorithm");
        let day = Duration::from_secs(86400);
        crate::ca::Authority::from_pem(&cert, &key, "", "", day, day)
            .expect("a freshly generated root is valid")
    })
}

/// A CSR as a workload sends it: signed, or refused with a reason.
pub fn csr(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let caller = crate::model::identity::Identity {
        trust_domain: "cluster.local".into(),
        namespace: "default".into(),
        service_account: "sleep".into(),
    };
    let _ = authority().sign_workload(text, &caller, 3600);
}

/// An AdmissionReview body: judged by the validation webhook and by the injector.
pub fn admission_review(data: &[u8]) {
    use kube::core::DynamicObject;
    use kube::core::admission::{AdmissionRequest, AdmissionReview};
    let Ok(review) = serde_json::from_slice::<AdmissionReview<DynamicObject>>(data) else {
        return;
    };
    let Ok(request): Result<AdmissionRequest<DynamicObject>, _> = review.try_into() else {
        return;
    };
    let metrics =
        crate::webhook::metrics::WebhookMetrics::register(&mut crate::metrics::Registry::new());
    let _ = crate::webhook::validate::admit(&metrics, &request);
    let store = StoreWriter::default();
    let injector = crate::webhook::inject::Injector::new(Default::default(), store.reader());
    let _ = crate::webhook::inject::admit(&injector, &metrics, &request, &Default::default());
}
