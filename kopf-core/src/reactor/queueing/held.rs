//! What a processing (or an observing) holds of the operator's budget of objects in flight
//! ([`Held`]), and how it sets that aside while it waits for what its own progress does not
//! bring.

use std::future::Future;

use crate::aiokits::budget::Share;

/// What a processing (or an observing) holds of the operator's budget of objects in flight,
/// and a way to set it aside while it waits for what its own progress does not bring.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Held<'a> {
    pub(super) share: Option<&'a Share>,
    pub(super) weight: usize,
}

impl Held<'_> {
    /// Waits for `waiting` with what is held given back meanwhile (taken again after, even past
    /// the budget's limit): for the indexes' first filling, which needs every object listed, so
    /// the listing must not wait for room that only this wait's end would free.
    pub(crate) async fn aside<T>(self, waiting: impl Future<Output = T>) -> T {
        /// Takes the weight back when the wait ends, or is dropped (the worker gives it back
        /// once more when it ends).
        struct Back<'a>(&'a Share, usize);
        impl Drop for Back<'_> {
            fn drop(&mut self) {
                self.0.take(self.1);
            }
        }
        let _back = self.share.filter(|_| self.weight > 0).map(|share| {
            share.give(self.weight);
            Back(share, self.weight)
        });
        waiting.await
    }
}
