//! ADS over gRPC: `StreamAggregatedResources` (State of the World) and `DeltaAggregatedResources`.
//!
//! Each stream is served by one task that owns the stream's state (`stream`): per type, what the
//! client subscribed to, the last nonce sent, and what it ACKed or NACKed. Pushes reach a stream
//! through its one-slot mailbox (`connections`), so a slow proxy only ever delays itself. `ads` is the
//! gRPC service (admission, authentication, the first request); `sotw` and `delta` the two protocols;
//! `status` the read-only view the admin server gets.

mod ads;
mod connections;
pub mod debug;
mod debug_pages;
mod delta;
mod held;
pub mod idle;
mod lock;
pub mod observer;
mod retire;
mod shared_names;
mod sotw;
pub mod status;
mod stream;
mod watches;
mod xds_server;

pub use ads::AdsService;
pub use xds_server::{XdsLimits, XdsServer};

impl XdsServer {
    /// The read-only handle for the admin server.
    pub fn status(self: &std::sync::Arc<Self>) -> status::XdsStatus {
        status::XdsStatus::new(self.clone())
    }
}
