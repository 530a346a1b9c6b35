//! Freeing large structures off the caller's thread.

use std::sync::Mutex;
use std::time::Duration;

use crate::helpers::sync::lock;

/// How long the freeing thread waits before it frees: past the exit that caused it, usually.
const FREED_AFTER: Duration = Duration::from_millis(200);

/// How many entries make a collection worth freeing apart ([`FreedApart`]): a thousand
/// objects' entries take a core milliseconds to free, and freeing one large table makes glibc
/// consolidate every small chunk freed before it.
pub(crate) const LARGE: usize = 256;

/// What waits for the freeing thread that is sleeping now, if one is.
static WAITING: Mutex<Option<Vec<Box<dyn Send>>>> = Mutex::new(None);

/// Drops `value` on a thread of its own, which holds nothing else, a moment later: a
/// structure of many small allocations (every object's memory, at the operator's exit) takes
/// milliseconds of a core to free, and nothing needs to wait for that. Freed at once, it took
/// a core from the exit's last steps; an exiting process ends before the moment has passed,
/// and its memory goes with it. What is freed apart within that moment waits for the same
/// thread. When no thread can be started, `value` is dropped here.
pub(crate) fn free_apart<T: Send + 'static>(value: T) {
    let value: Box<dyn Send> = Box::new(value);
    let mut waiting = lock(&WAITING);
    if let Some(batch) = waiting.as_mut() {
        batch.push(value);
        return;
    }
    let started = std::thread::Builder::new()
        .name("kopf-free".into())
        .spawn(|| {
            std::thread::sleep(FREED_AFTER);
            // Taken under the lock, dropped after it: what the batch frees may free apart too.
            let batch = lock(&WAITING).take().unwrap_or_default();
            for value in batch {
                // One value's panicking `Drop` neither stops the others' nor, panicking again
                // as the batch unwinds, aborts the process.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(value)));
            }
        });
    match started {
        Ok(_) => *waiting = Some(vec![value]),
        Err(_) => {
            drop(waiting);
            drop(value);
        }
    }
}

/// A collection that keeps an entry per object: freed apart ([`free_apart`]) when it is
/// dropped with many entries, in place when with few.
#[derive(Debug, Default)]
pub(crate) struct FreedApart<C: Entries>(pub(crate) C);

/// A collection that counts its entries.
pub(crate) trait Entries: Default + Send + 'static {
    fn entries(&self) -> usize;
}

impl<K, V, S> Entries for std::collections::HashMap<K, V, S>
where
    K: Send + 'static,
    V: Send + 'static,
    S: Default + Send + 'static,
{
    fn entries(&self) -> usize {
        self.len()
    }
}

impl<C: Entries> std::ops::Deref for FreedApart<C> {
    type Target = C;

    fn deref(&self) -> &C {
        &self.0
    }
}

impl<C: Entries> std::ops::DerefMut for FreedApart<C> {
    fn deref_mut(&mut self) -> &mut C {
        &mut self.0
    }
}

impl<C: Entries> Drop for FreedApart<C> {
    fn drop(&mut self) {
        if self.0.entries() >= LARGE {
            free_apart(std::mem::take(&mut self.0));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::thread::{self, ThreadId};

    use super::*;

    /// Tells which thread dropped it.
    struct Dropped(mpsc::Sender<ThreadId>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            let _ = self.0.send(thread::current().id());
        }
    }

    #[test]
    fn values_are_dropped_on_another_thread_and_those_freed_together_on_one() {
        let wait = std::time::Duration::from_secs(30);
        // Another test's batch may be freed between the two calls (each then has a thread of
        // its own): that cannot happen three times in a row.
        let together = (0..3).any(|_| {
            let (sender, dropped) = mpsc::channel();
            free_apart(Dropped(sender.clone()));
            free_apart(Dropped(sender));
            let first = dropped.recv_timeout(wait).expect("the value is dropped");
            let second = dropped.recv_timeout(wait).expect("the value is dropped");
            assert_ne!(first, thread::current().id());
            assert_ne!(second, thread::current().id());
            first == second
        });
        assert!(
            together,
            "the values freed together went to different threads"
        );
    }

    impl<T: Send + 'static> Entries for Vec<T> {
        fn entries(&self) -> usize {
            self.len()
        }
    }

    #[test]
    fn a_small_collection_is_freed_in_place_and_a_large_one_apart() {
        let (sender, dropped) = mpsc::channel();
        let small = FreedApart(vec![Dropped(sender.clone())]);
        drop(small);
        let by = dropped.try_recv().expect("dropped at once");
        assert_eq!(by, thread::current().id());
        let large: FreedApart<Vec<Dropped>> =
            FreedApart((0..LARGE).map(|_| Dropped(sender.clone())).collect());
        drop(large);
        let wait = std::time::Duration::from_secs(30);
        let by = dropped.recv_timeout(wait).expect("the entries are dropped");
        assert_ne!(by, thread::current().id());
    }
}
