//! Config sources: the only writers of the store. A directory of YAML files, or the Kubernetes API.

pub mod file;
pub mod kube;
pub mod metrics;
