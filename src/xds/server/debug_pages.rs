//! The HTTP debug pages `istio.io/debug` requests read, as the admin server provides them.

use std::future::Future;
use std::pin::Pin;

/// The HTTP debug pages (`/debug/<path>` of the monitoring port), served to `istio.io/debug`.
/// The admin server provides them; `caller_namespace` restricts a page to one namespace's proxies.
pub trait DebugPages: Send + Sync {
    fn page(
        &self,
        path_and_query: String,
        caller_namespace: Option<String>,
    ) -> Pin<Box<dyn Future<Output = Vec<u8>> + Send>>;
}
