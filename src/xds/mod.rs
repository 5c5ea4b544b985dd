//! The xDS server: ADS (State of the World and Delta), the push pipeline, and resource generation.

pub mod context;
pub mod generate;
pub mod provenance;
pub mod proxy;
pub mod push;
pub mod server;
pub mod wire;
