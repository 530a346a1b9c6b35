//! Locks that survive a panicking test.

use std::sync::Mutex;

/// Locks a mutex, recovering the data if a panicking test poisoned it.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
