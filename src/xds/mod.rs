//! The xDS server: ADS (State of the World and Delta), the push pipeline, and resource generation.
//! Layers, each importing only those before it: `types`, `resource` and `proxy` (vocabulary) →
//! `context` → `generate` → `push` → `server` → `wire` (bytes; a leaf that knows no other layer).

pub mod context;
pub mod generate;
pub mod intern;
pub mod metrics;
pub mod provenance;
pub mod proxy;
pub mod push;
pub mod resource;
pub mod server;
pub mod types;
pub mod wire;
