//! networking.istio.io: field for field with istio.io/api `networking/v1alpha3` (served as v1,
//! v1beta1 and v1alpha3), a file per kind. Unknown fields are rejected, as `istioctl validate` and
//! the validation webhook do.

macro_rules! istio_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize, schemars::JsonSchema)]
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        pub enum $name {
            #[default]
            $($variant),+
        }
    };
}
pub(crate) use istio_enum;

mod destination_rule;
mod envoy_filter;
mod gateway;
mod proxy_config;
mod service_entry;
mod sidecar;
mod virtual_service;

pub use destination_rule::*;
pub use envoy_filter::*;
pub use gateway::*;
pub use proxy_config::*;
pub use service_entry::*;
pub use sidecar::*;
pub use virtual_service::*;
