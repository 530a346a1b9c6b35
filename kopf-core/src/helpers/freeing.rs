//! Freeing large structures off the caller's thread.

use std::time::Duration;

/// How long the freeing thread waits before it frees: past the exit that caused it, usually.
const FREED_AFTER: Duration = Duration::from_millis(200);

/// Drops `value` on a thread of its own, which holds nothing else, a moment later: a
/// structure of many small allocations (every object's memory, at the operator's exit) takes
/// milliseconds of a core to free, and nothing needs to wait for that. Freed at once, it took
/// a core from the exit's last steps; an exiting process ends before the moment has passed,
/// and its memory goes with it. When no thread can be started, `value` is dropped here.
pub(crate) fn free_apart<T: Send + 'static>(value: T) {
    let freeing = std::thread::Builder::new()
        .name("kopf-free".into())
        .spawn(move || {
            std::thread::sleep(FREED_AFTER);
            drop(value);
        });
    // On failure, the closure, and `value` with it, was dropped by `spawn` already.
    drop(freeing);
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
    fn the_value_is_dropped_on_another_thread() {
        let (sender, dropped) = mpsc::channel();
        free_apart(Dropped(sender));
        let by = dropped
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the value is dropped");
        assert_ne!(by, thread::current().id());
    }
}
