//! MeshConfig: the `mesh` key of ConfigMap `istio` in the root namespace (the fields that matter
//! here), and Kubernetes label-selector matching, which mesh settings and registries share.

mod mesh_config;
mod providers;
mod unhonoured;

pub use mesh_config::*;
pub use providers::*;
pub use unhonoured::*;
