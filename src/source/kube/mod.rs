//! The Kubernetes source: watchers that turn API objects into store changes.

pub mod controller;
pub mod convert;
pub mod kubeconfig_dir;
pub mod multicluster;
