//! Config sources: writers of the store. Today the file source; Kubernetes watchers come next.

pub mod file;
