//! The objects that a queue knows, by what identifies each (the queue's invariant 3): those
//! that a completed new listing lacks reach their workers as [`Event::Vanished`], also after a
//! pause, when a later queue of the same watch takes them over.

use std::sync::{Arc, Mutex};

use foldhash::{HashMap, HashSet};
use serde_json::{Value, json};

use crate::clients::watching::Event;
use crate::helpers::freeing::FreedApart;
use crate::helpers::sync::lock;
use crate::structs::bodies::Body;

/// The objects that a queue knows (invariant 3), shared with whoever hands them to a later
/// queue of the same watch.
#[derive(Debug, Clone, Default)]
pub(crate) struct KnownObjects(pub(super) Arc<Mutex<Known>>);

impl KnownObjects {
    /// Takes what is known now, for a later queue (this one knows nothing more); a listing
    /// cut short is forgotten, the later queue lists anew.
    pub(crate) fn hand_over(&self) -> KnownObjects {
        let mut known = std::mem::take(&mut *lock(&self.0));
        known.listed.clear();
        KnownObjects(Arc::new(Mutex::new(known)))
    }

    /// The uids of the objects known.
    pub(crate) fn uids(&self) -> Vec<String> {
        lock(&self.0).objects.keys().cloned().collect()
    }
}

/// The identities of the objects that one watcher reported, and of those in its current
/// listing.
#[derive(Debug, Default)]
pub(super) struct Known {
    /// By uid, what identifies each object that exists as far as the watcher knows: a few
    /// strings per object, as this is kept for every object, at rest or not.
    objects: FreedApart<HashMap<String, Identity>>,
    /// The uids listed since the last listing was done.
    listed: HashSet<String>,
    /// The `apiVersion`, `kind` and namespaces seen, shared by the identities.
    names: Names,
}

impl Known {
    /// Follows one event; at the end of a listing, returns the known objects it lacked (and
    /// forgets them), as what identifies them.
    pub(super) fn see(&mut self, event: &Event) -> Vec<Arc<Body>> {
        match event {
            Event::Listed(object) => {
                let uid = uid_of(object);
                self.listed.insert(uid.clone());
                let identity = Identity::of(object, &mut self.names);
                self.objects.insert(uid, identity);
            }
            Event::Changed(kind, object) => {
                let uid = uid_of(object);
                if *kind == "DELETED" {
                    self.objects.remove(&uid);
                } else if !self.objects.contains_key(&uid) {
                    let identity = Identity::of(object, &mut self.names);
                    self.objects.insert(uid, identity);
                }
            }
            Event::Vanished(object) => {
                self.objects.remove(&uid_of(object));
            }
            Event::ListingDone => {
                let listed = std::mem::take(&mut self.listed);
                let gone: Vec<String> = self
                    .objects
                    .keys()
                    .filter(|uid| !listed.contains(*uid))
                    .cloned()
                    .collect();
                return gone
                    .into_iter()
                    .filter_map(|uid| {
                        let identity = self.objects.remove(&uid)?;
                        Some(identity.body(&uid))
                    })
                    .collect();
            }
        }
        Vec::new()
    }
}

pub(super) fn uid_of(object: &Value) -> String {
    object["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// What identifies an object besides its uid, for [`Event::Vanished`].
#[derive(Debug)]
struct Identity {
    api_version: Option<Arc<str>>,
    kind: Option<Arc<str>>,
    name: Option<Box<str>>,
    namespace: Option<Arc<str>>,
}

/// Strings that many objects share, kept once.
#[derive(Debug, Default)]
struct Names(HashSet<Arc<str>>);

impl Names {
    fn shared(&mut self, value: &Value) -> Option<Arc<str>> {
        let text = value.as_str()?;
        if let Some(known) = self.0.get(text) {
            return Some(known.clone());
        }
        let new: Arc<str> = Arc::from(text);
        self.0.insert(new.clone());
        Some(new)
    }
}

impl Identity {
    fn of(object: &Value, names: &mut Names) -> Identity {
        let meta = &object["metadata"];
        Identity {
            api_version: names.shared(&object["apiVersion"]),
            kind: names.shared(&object["kind"]),
            name: meta["name"].as_str().map(Box::from),
            namespace: names.shared(&meta["namespace"]),
        }
    }

    /// The object as far as it is known: `apiVersion`, `kind`, and `metadata`'s `name`,
    /// `namespace` and `uid`.
    fn body(&self, uid: &str) -> Arc<Body> {
        Arc::new(Body::from(json!({
            "apiVersion": self.api_version.as_deref(),
            "kind": self.kind.as_deref(),
            "metadata": {
                "name": self.name.as_deref(),
                "namespace": self.namespace.as_deref(),
                "uid": uid,
            },
        })))
    }
}
