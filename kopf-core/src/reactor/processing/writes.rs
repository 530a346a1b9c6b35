//! The processor's writes: a patch and the finalizer's change sent through the [`Writer`], the
//! versions they made awaited (the consistency rule), and what could not be written kept to
//! write again (a failure) or to lay over the object's state (a rejection for good).
//!
//! [`Writer`]: crate::reactor::writing::Writer

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::Processor;
use crate::aiokits::tasks::Tasks;
use crate::clients::patching;
use crate::reactor::memories::Memory;
use crate::reactor::writing::Unwritten;
use crate::structs::patch::Patch;

impl Processor {
    /// Sends a patch (and the framework's JSON-patch operation on the finalizers) to the
    /// object and remembers the versions to wait for; `Ok(Some(delay))` when the object must
    /// be processed again within that delay even without a new event (the handlers' JSON-patch
    /// operations met a newer version: they run again once it comes). On failure, what was
    /// not written comes back with the delay before trying again (see [`Writer::write`]).
    ///
    /// [`Writer::write`]: crate::reactor::writing::Writer::write
    pub(crate) async fn write(
        &self,
        uid: &str,
        body: &Value,
        patch: Patch,
        finalizer: Option<Value>,
        tasks: &Tasks,
    ) -> Result<Option<Duration>, Unwritten> {
        if patch.is_empty() && finalizer.is_none() {
            return Ok(None);
        }
        let failed = || {
            self.memory(uid, |m| {
                m.failures += 1;
                m.failures
            })
        };
        // The object's events may be observed while it writes: the versions that come back
        // meanwhile are not awaited after it.
        self.memory(uid, Memory::writes);
        let writing = Writing {
            processor: self,
            uid,
            ended: false,
        };
        let written = self
            .writer
            .write(uid, body, patch, finalizer, tasks, failed)
            .await;
        let timeout = self.settings.persistence.consistency_timeout;
        let written = written.inspect(|_| self.memory(uid, |m| m.failures = 0))?;
        let until = (!timeout.is_zero()).then(|| Instant::now() + timeout);
        let replaced = body["metadata"]["resourceVersion"].as_str();
        writing.end(written.versions, until, replaced.unwrap_or_default());
        Ok(written.outdated.then_some(timeout))
    }

    /// Keeps what a write of the object's worker could not write: to write it again before
    /// any handler runs (a failure), or, for what handlers finished (`handled`), to lay it
    /// over the object's state as if written (a rejection for good, which is not tried
    /// again and was reported). `Err` with the delay before the worker goes on.
    pub(super) fn remember(
        &self,
        uid: &str,
        written: Result<Option<Duration>, Unwritten>,
        handled: bool,
    ) -> Result<Option<Duration>, Duration> {
        let unwritten = match written {
            Ok(again) => return Ok(again),
            Err(unwritten) => unwritten,
        };
        if unwritten.patch.is_empty() {
            return Err(unwritten.delay);
        }
        self.memory(uid, |m| {
            let kept = if !unwritten.rejected {
                &mut m.unwritten
            } else if handled {
                &mut m.rejected
            } else {
                return;
            };
            let mut all = kept.take().unwrap_or_default();
            all.merge(unwritten.patch);
            *kept = Some(all);
        });
        Err(unwritten.delay)
    }

    /// Whether the object carries the operator's finalizer.
    pub(super) fn has_finalizer(&self, body: &Value) -> bool {
        let finalizer = &self.settings.persistence.finalizer;
        body["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| x == finalizer.as_str()))
    }

    /// The JSON-patch operation that adds (or removes) the finalizer on the object's newest
    /// state, when it is still needed (not on an object in deletion for an addition).
    pub(super) fn finalizer_change(&self, body: &Value, adding: bool) -> Option<Value> {
        let finalizer = &self.settings.persistence.finalizer;
        let finalizers = body["metadata"].get("finalizers");
        let has = self.has_finalizer(body);
        let deleting = !body["metadata"]["deletionTimestamp"].is_null();
        match (adding, has) {
            (true, false) if !deleting => Some(patching::add_finalizer(finalizers, finalizer)),
            (false, true) => patching::remove_finalizer(finalizers, finalizer),
            _ => None,
        }
    }
}

/// A write of an object in flight, until it ends in the object's memory (also when dropped:
/// then it made no version to wait for).
struct Writing<'a> {
    processor: &'a Processor,
    uid: &'a str,
    ended: bool,
}

impl Writing<'_> {
    /// The write made these versions: those not come back yet are awaited until `until`.
    fn end(mut self, versions: Vec<String>, until: Option<Instant>, replaced: &str) {
        self.ended = true;
        let memories = &self.processor.memories;
        memories.with_existing(self.uid, |m| m.written(versions, until, replaced));
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        if !self.ended {
            let memories = &self.processor.memories;
            memories.with_existing(self.uid, |m| m.written(Vec::new(), None, ""));
        }
    }
}
