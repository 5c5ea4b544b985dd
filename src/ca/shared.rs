//! The authority every part of the daemon signs and trusts with, replaceable while it runs: a
//! root rotation swaps it in one step, and whoever distributes the root (SDS `ROOTCA`, the
//! `istio-ca-root-cert` ConfigMaps, webhook `caBundle`s) is told through `roots()`.

use super::authority::Authority;
use arc_swap::ArcSwap;
use std::sync::Arc;
use tokio::sync::watch;

pub struct SharedAuthority {
    current: ArcSwap<Authority>,
    roots: watch::Sender<Arc<str>>,
}

impl SharedAuthority {
    pub fn new(authority: Authority) -> Arc<SharedAuthority> {
        let roots = watch::Sender::new(Arc::from(authority.root_pem()));
        Arc::new(SharedAuthority {
            current: ArcSwap::from_pointee(authority),
            roots,
        })
    }

    /// The authority now; a request holds it for its whole signing.
    pub fn load(&self) -> Arc<Authority> {
        self.current.load_full()
    }

    /// The trust bundle now (PEM).
    pub fn root_pem(&self) -> Arc<str> {
        self.roots.borrow().clone()
    }

    /// Changes to the trust bundle, starting from the current one.
    pub fn roots(&self) -> watch::Receiver<Arc<str>> {
        self.roots.subscribe()
    }

    /// Signs with `authority` from now on; subscribers of `roots()` hear of a changed bundle.
    pub fn replace(&self, authority: Authority) {
        let bundle: Arc<str> = Arc::from(authority.root_pem());
        self.current.store(Arc::new(authority));
        self.roots.send_if_modified(|current| {
            if *current == bundle {
                return false;
            }
            *current = bundle;
            true
        });
    }
}
