//! Old push contexts are freed away from the push path. Installing a context used to free the one
//! before it on the spot, ahead of the fan-out: the first endpoint push after the initial sync
//! waited ~100 ms (5,000 services) while every scope's first lists were freed.

use std::sync::mpsc;

/// Old values waiting to be freed, at most; beyond that the caller frees them itself, so a machine
/// too busy to run the low-priority thread cannot pile up old contexts.
const WAITING: usize = 4;

/// Frees what it is given on a thread of its own at the lowest CPU priority, so the cores go to
/// the push first. The thread ends when the `Retirer` is dropped.
pub(super) struct Retirer<T: Send + 'static> {
    waiting: Option<mpsc::SyncSender<T>>,
}

impl<T: Send + 'static> Retirer<T> {
    pub(super) fn new(thread_name: &str) -> Retirer<T> {
        let (waiting, retired) = mpsc::sync_channel::<T>(WAITING);
        let thread = std::thread::Builder::new()
            .name(thread_name.into())
            .spawn(move || {
                lowest_priority();
                while let Ok(old) = retired.recv() {
                    drop(old);
                }
            });
        Retirer {
            // Without the thread, values are freed where they are retired, as before.
            waiting: thread.ok().map(|_| waiting),
        }
    }

    /// Frees `old` on the retiring thread, or here when that thread is behind.
    pub(super) fn retire(&self, old: T) {
        if let Some(waiting) = &self.waiting {
            // A full queue or a gone thread hands the value back inside the error: freed here.
            let _ = waiting.try_send(old);
        }
    }
}

fn lowest_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority changes only the calling thread's (gettid) scheduling weight.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends the name of the thread that drops it.
    struct Noted(mpsc::Sender<Option<String>>);

    impl Drop for Noted {
        fn drop(&mut self) {
            let _ = self
                .0
                .send(std::thread::current().name().map(str::to_string));
        }
    }

    #[test]
    fn retired_values_are_freed_on_the_retiring_thread() {
        let retirer = Retirer::new("test-retirer");
        let (tx, rx) = mpsc::channel();
        for _ in 0..3 {
            retirer.retire(Noted(tx.clone()));
        }
        for _ in 0..3 {
            let freed_on = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
            assert_eq!(freed_on.as_deref(), Some("test-retirer"));
        }
    }
}
