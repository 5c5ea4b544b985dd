//! Whether a connection is in use, for closing idle ones: the number of requests (or streams)
//! open on it, and when the last one ended. The webhook port and the gRPC ports share it; `http`
//! is the HTTP ports' connection loop built on it.

pub mod http;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Activity {
    in_use: AtomicUsize,
    /// Something was opened on the connection at least once.
    ever: AtomicBool,
    /// When the connection opened, or the last request on it ended.
    last: Mutex<Instant>,
}

/// A request or stream open on a connection; dropping it marks the connection active now.
pub struct InUse(Arc<Activity>);

impl Activity {
    /// A connection just opened (which counts as activity).
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            in_use: AtomicUsize::new(0),
            ever: AtomicBool::new(false),
            last: Mutex::new(Instant::now()),
        })
    }

    pub fn begin(self: &Arc<Self>) -> InUse {
        self.in_use.fetch_add(1, Ordering::AcqRel);
        self.ever.store(true, Ordering::Release);
        InUse(self.clone())
    }

    /// When the connection turns idle for `timeout` if nothing opens on it before: `None` while
    /// something is open.
    pub fn idle_at(&self, timeout: Duration) -> Option<Instant> {
        if self.in_use.load(Ordering::Acquire) != 0 {
            return None;
        }
        self.last.lock().ok().map(|last| *last + timeout)
    }

    /// Whether anything was ever opened on the connection.
    pub fn ever_used(&self) -> bool {
        self.ever.load(Ordering::Acquire)
    }

    /// True when nothing is open and nothing was for `timeout`.
    pub fn idle_for(&self, timeout: Duration) -> bool {
        self.in_use.load(Ordering::Acquire) == 0
            && self
                .last
                .lock()
                .map(|last| last.elapsed() >= timeout)
                .unwrap_or(false)
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        if let Ok(mut last) = self.0.last.lock() {
            *last = Instant::now();
        }
        self.0.in_use.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::Activity;
    use std::time::Duration;

    #[test]
    fn idle_only_with_nothing_open_for_the_timeout() {
        let a = Activity::new();
        assert!(!a.idle_for(Duration::from_secs(60)), "just opened");
        assert!(a.idle_for(Duration::ZERO));
        let open = a.begin();
        assert!(!a.idle_for(Duration::ZERO), "a request is open");
        drop(open);
        assert!(a.idle_for(Duration::ZERO));
        assert!(!a.idle_for(Duration::from_secs(60)), "it just ended");
    }
}
