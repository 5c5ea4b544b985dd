//! Istio's validation rules, with Istio's messages, for every kind of the config model.
//!
//! `validate` returns every problem found (not just the first) so a person can fix a file in one pass.
//! Each error names the object, the field path and the reason.

mod helpers;
mod networking;
mod security;

pub use helpers::*;

use crate::config::{Config, ConfigError, ObjectRef, Spec};

/// Collects errors for one object; `path` strings use Istio's camelCase field names.
pub struct Report<'a> {
    object: &'a ObjectRef,
    pub errors: Vec<ConfigError>,
}

impl<'a> Report<'a> {
    pub fn new(object: &'a ObjectRef) -> Self {
        Report {
            object,
            errors: Vec::new(),
        }
    }

    pub fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ConfigError::Invalid {
            object: self.object.clone(),
            field: path.into(),
            message: message.into(),
        });
    }

    /// Records `result`'s error, if any, at `path`.
    pub fn check(&mut self, path: impl Into<String>, result: Result<(), String>) {
        if let Err(message) = result {
            self.error(path, message);
        }
    }
}

/// Validates one object as Istio's validation webhook would.
pub fn validate(config: &Config) -> Result<(), Vec<ConfigError>> {
    let object = config.object_ref();
    let mut r = Report::new(&object);
    if !config.kind.is_istio() {
        return Ok(());
    }
    let meta = &config.metadata;
    r.check("metadata.name", helpers::dns1123_subdomain(&meta.name));
    r.check(
        "metadata.namespace",
        helpers::dns1123_label(&meta.namespace),
    );
    let ns = meta.namespace.as_str();
    match &config.spec {
        Spec::VirtualService(s) => networking::virtual_service(&mut r, ns, s),
        Spec::DestinationRule(s) => networking::destination_rule(&mut r, ns, s),
        Spec::Gateway(s) => networking::gateway(&mut r, &meta.name, s),
        Spec::ServiceEntry(s) => networking::service_entry(&mut r, ns, s),
        Spec::Sidecar(s) => networking::sidecar(&mut r, s),
        Spec::WorkloadEntry(s) => networking::workload_entry(&mut r, "spec", s, false),
        Spec::WorkloadGroup(s) => networking::workload_group(&mut r, s),
        Spec::EnvoyFilter(s) => networking::envoy_filter(&mut r, s),
        Spec::PeerAuthentication(s) => security::peer_authentication(&mut r, s),
        Spec::AuthorizationPolicy(s) => security::authorization_policy(&mut r, s),
        Spec::RequestAuthentication(s) => security::request_authentication(&mut r, s),
        Spec::Telemetry(s) => security::telemetry(&mut r, s),
        // The API server has validated Kubernetes objects already.
        _ => return Ok(()),
    }
    if r.errors.is_empty() {
        Ok(())
    } else {
        Err(r.errors)
    }
}
