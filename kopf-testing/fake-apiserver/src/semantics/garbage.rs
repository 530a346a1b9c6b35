//! The garbage collector, as the controller manager's: deletes objects whose owners are all
//! gone, and carries out foreground and orphaning deletions of owners.
//!
//! It looks only at what changed (`State::pending.garbage`): objects written with owner
//! references, and owners that were removed, are being deleted, or whose dependents changed;
//! an owner's dependents come from the state's index. So a write costs the same with ten or
//! ten thousand owned objects around.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use super::lifecycle::{
    DeleteOptions, FOREGROUND, KUBE_CONTROLLER_MANAGER, ORPHAN, Propagation, Scope, controller,
    delete, update,
};
use crate::storage::catalog::ResourceDef;
use crate::storage::object;
use crate::storage::state::{State, StoredKey, key_of};

/// Does the work pending since the last round; whether anything changed.
pub(crate) fn collect(state: &mut State) -> bool {
    let work = std::mem::take(&mut state.pending.garbage);
    if work.is_empty() {
        return false;
    }
    let mut progressed = false;
    // Dependents whose owners are all gone: written so, or left so by a removed owner.
    let mut candidates: BTreeSet<StoredKey> = work.dependents;
    for uid in work.owners.iter().filter(|uid| !state.uid_exists(uid)) {
        candidates.extend(state.dependents_of(uid));
    }
    for stored in candidates {
        let Some((def, object)) = lookup(state, &stored) else {
            continue;
        };
        let owners = object::owner_uids(&object);
        if owners.is_empty()
            || object::is_terminating(&object)
            || owners.iter().any(|uid| state.uid_exists(uid))
        {
            continue;
        }
        if delete(state, &def, &stored.1, &DeleteOptions::default()).is_ok() {
            progressed = true;
        }
    }
    // Owners being deleted in the foreground or orphaning their dependents.
    for uid in &work.owners {
        let Some(stored) = state.locate(uid) else {
            continue;
        };
        let Some((def, owner)) = lookup(state, &stored) else {
            continue;
        };
        let finalizers = object::finalizers(&owner);
        let orphaning = finalizers.iter().any(|f| f == ORPHAN);
        let foreground = finalizers.iter().any(|f| f == FOREGROUND);
        if !object::is_terminating(&owner) || !(orphaning || foreground) {
            continue;
        }
        let children: Vec<(Arc<ResourceDef>, Arc<Value>)> = state
            .dependents_of(uid)
            .iter()
            .filter_map(|child| lookup(state, child))
            .collect();
        let done = if orphaning {
            for (child_def, child) in &children {
                let mut released = (**child).clone();
                if let Some(refs) = released["metadata"]["ownerReferences"].as_array_mut() {
                    refs.retain(|r| r["uid"] != **uid);
                }
                // As Go's `omitempty`: no owners left, no list.
                if released["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(Vec::is_empty)
                    && let Some(meta) = released["metadata"].as_object_mut()
                {
                    meta.remove("ownerReferences");
                }
                let updater = controller(child, KUBE_CONTROLLER_MANAGER, "");
                if update(
                    state,
                    child_def,
                    child,
                    released,
                    Scope::Main,
                    Some(&updater),
                )
                .is_ok()
                {
                    progressed = true;
                }
            }
            Some(ORPHAN)
        } else if children.is_empty() {
            Some(FOREGROUND)
        } else {
            for (child_def, child) in &children {
                if !object::is_terminating(child) {
                    let options = DeleteOptions {
                        propagation: Some(Propagation::Foreground),
                        ..Default::default()
                    };
                    if delete(state, child_def, &key_of(child), &options).is_ok() {
                        progressed = true;
                    }
                }
            }
            None
        };
        if let Some(finalizer) = done {
            let Some((_, current)) = lookup(state, &stored) else {
                continue;
            };
            let mut released = (*current).clone();
            object::set_finalizers(
                &mut released,
                finalizers.into_iter().filter(|f| f != finalizer).collect(),
            );
            let updater = controller(&current, KUBE_CONTROLLER_MANAGER, "");
            if update(state, &def, &current, released, Scope::Main, Some(&updater)).is_ok() {
                progressed = true;
            }
        }
    }
    progressed
}

/// A stored object with its resource's definition.
fn lookup(state: &State, (resource, key): &StoredKey) -> Option<(Arc<ResourceDef>, Arc<Value>)> {
    let def = state.catalog.get(&resource.0, &resource.1)?.clone();
    let object = state.get(resource, key)?.clone();
    Some((def, object))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::semantics::cluster;
    use crate::semantics::lifecycle::create;

    fn configmap(name: &str, owners: &[&Value]) -> Value {
        let references: Vec<Value> = owners
            .iter()
            .map(|o| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": object::name(o), "uid": object::uid(o)}))
            .collect();
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default", "ownerReferences": references}})
    }

    /// Runs the collector until it has nothing more to do.
    fn settle(state: &mut State) {
        while collect(state) {}
    }

    fn setup() -> (State, Arc<ResourceDef>) {
        let mut state = State::new(1000);
        cluster::bootstrap(&mut state);
        let def = state.catalog.get("", "configmaps").unwrap().clone();
        (state, def)
    }

    fn exists(state: &State, def: &ResourceDef, name: &str) -> bool {
        state
            .get(&def.key(), &("default".into(), name.into()))
            .is_some()
    }

    #[test]
    fn dependents_go_with_their_last_owner_only() {
        let (mut state, def) = setup();
        let a = create(&mut state, &def, configmap("a", &[]), None).unwrap();
        let b = create(&mut state, &def, configmap("b", &[]), None).unwrap();
        create(&mut state, &def, configmap("both", &[&a, &b]), None).unwrap();
        create(&mut state, &def, configmap("only-a", &[&a]), None).unwrap();
        settle(&mut state);
        delete(
            &mut state,
            &def,
            &("default".into(), "a".into()),
            &DeleteOptions::default(),
        )
        .unwrap();
        settle(&mut state);
        assert!(!exists(&state, &def, "only-a"));
        assert!(exists(&state, &def, "both"), "b still owns it");
        delete(
            &mut state,
            &def,
            &("default".into(), "b".into()),
            &DeleteOptions::default(),
        )
        .unwrap();
        settle(&mut state);
        assert!(!exists(&state, &def, "both"));
    }

    #[test]
    fn the_index_follows_owner_references_as_they_change() {
        let (mut state, def) = setup();
        let owner = create(&mut state, &def, configmap("owner", &[]), None).unwrap();
        let child = create(&mut state, &def, configmap("child", &[&owner]), None).unwrap();
        settle(&mut state);
        // Released: the owner's deletion leaves it alone.
        let released = configmap("child", &[]);
        update(&mut state, &def, &child, released, Scope::Main, None).unwrap();
        let later = create(&mut state, &def, configmap("later", &[]), None).unwrap();
        // Adopted later: the owner's deletion takes it along.
        let adopted = configmap("later", &[&owner]);
        update(&mut state, &def, &later, adopted, Scope::Main, None).unwrap();
        settle(&mut state);
        delete(
            &mut state,
            &def,
            &("default".into(), "owner".into()),
            &DeleteOptions::default(),
        )
        .unwrap();
        settle(&mut state);
        assert!(exists(&state, &def, "child"));
        assert!(!exists(&state, &def, "later"));
        assert!(state.dependents_of(object::uid(&owner)).is_empty());
    }

    #[test]
    fn an_object_written_with_owners_already_gone_is_collected() {
        let (mut state, def) = setup();
        let ghost = json!({"metadata": {"name": "ghost", "uid": "no-such-uid"}});
        create(&mut state, &def, configmap("stray", &[&ghost]), None).unwrap();
        settle(&mut state);
        assert!(!exists(&state, &def, "stray"));
    }
}
