//! What proxies connecting and leaving mean outside the xDS server. istiod's WorkloadEntry
//! auto-registration (`crate::autoregistration`) is one such observer; the server knows only
//! this interface.

use crate::model::identity::BoxFuture;
use crate::xds::proxy::Proxy;
use std::sync::Arc;

pub trait ConnectionObserver: Send + Sync {
    /// Called once a stream's proxy is identified, before it is served. An error refuses the
    /// stream with that message (istiod's `OnConnect` failing `initConnection`).
    fn connected<'a>(&'a self, proxy: &'a Proxy) -> BoxFuture<'a, Result<(), String>>;

    /// Called when the stream of a proxy that `connected` accepted has ended.
    fn disconnected(&self, proxy: Arc<Proxy>);
}
