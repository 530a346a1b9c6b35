//! The controllers a real cluster runs behind the API, run synchronously after every write
//! (`settle`), so a client sees their effects as ordinary watch events right after its own,
//! and tests need no waiting for them: CRD establishment and cleanup, namespace termination,
//! garbage collection, and the objects every new namespace gets.

use super::{cluster, garbage, lifecycle};
use crate::storage::state::State;

/// Runs the cluster's controllers until nothing more changes.
pub(crate) fn settle(state: &mut State) {
    // Each round makes progress or stops; the bound only guards against a bug looping forever.
    for _ in 0..1000 {
        let progressed = lifecycle::establish_crds(state)
            | lifecycle::terminate_namespaces(state)
            | garbage::collect(state)
            | cluster::seed_new_namespaces(state);
        if !progressed {
            return;
        }
    }
    tracing::error!("the fake cluster's controllers did not settle after 1000 rounds");
}
