//! One lock rule for the server's mutexes.

use std::sync::Mutex;

/// Locks a mutex whose holder may have panicked: the data is still the last value written.
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
