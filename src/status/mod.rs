//! What Rudder writes into the status of Kubernetes objects, as istiod's status controllers do.
//! Producers are pure functions over what the push loop last judged ([`Input`]: its snapshot,
//! and the registry, mesh settings and Gateway API translation it built for proxies, so a status
//! cannot say other than what proxies get); one leader-only writer (`writer`) applies them, and analysis findings,
//! as merge patches of the status subresource, keeps other writers' conditions, and is
//! rate-limited and counted. A new kind of condition is a producer in a file of its own, listed
//! in [`PRODUCERS`]; the writer does not change.

pub mod ambient;
pub mod gateway_api;
pub mod ingress;
pub mod ip_allocate;
pub mod writer;

mod producer;
pub use producer::{Condition, Conditions, FieldsProducer, Input, Producer, Settings};

/// Every producer.
pub static PRODUCERS: &[&dyn Producer] = &[&ambient::Ambient];

/// Every producer of whole status fields.
pub static FIELD_PRODUCERS: &[&dyn FieldsProducer] = &[
    &gateway_api::GatewayApi,
    &ingress::IngressStatus,
    &ip_allocate::IpAllocator,
];

/// The field producers `settings` enable.
pub fn enabled_fields(settings: &Settings) -> Vec<&'static dyn FieldsProducer> {
    FIELD_PRODUCERS
        .iter()
        .copied()
        .filter(|p| p.enabled(settings))
        .collect()
}

/// The producers `settings` enable.
pub fn enabled(settings: &Settings) -> Vec<&'static dyn Producer> {
    PRODUCERS
        .iter()
        .copied()
        .filter(|p| p.enabled(settings))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producers_follow_their_settings_and_never_share_a_condition_type() {
        assert!(enabled(&Settings::default()).is_empty());
        let on = enabled(&Settings {
            ambient_status: true,
            ..Settings::default()
        });
        assert_eq!(on.iter().map(|p| p.name()).collect::<Vec<_>>(), ["ambient"]);
        let mut types: Vec<&str> = PRODUCERS.iter().flat_map(|p| p.types().to_vec()).collect();
        let all = types.len();
        types.sort();
        types.dedup();
        assert_eq!(types.len(), all, "two producers own one condition type");
    }
}
