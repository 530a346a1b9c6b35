//! Kopf's on-object state formats: handler progress and the diff-base ("last handled
//! configuration"), byte-compatible with Python Kopf 1.45.
//!
//! A kopf-rs operator and a Python Kopf operator can take turns on the same objects: both read
//! and write the same annotation keys (V1 and V2 key forming, hashed suffixes), the same JSON
//! (keys in the same order, Python's compact `json.dumps` with `\uXXXX` escapes) and the same
//! timestamps (`2026-03-01T12:34:56.123456+00:00`).
//!
//! - [`ProgressStorage`] keeps one [`ProgressRecord`] per handler while a cause is being
//!   handled: [`AnnotationsProgressStorage`] (`kopf.zalando.org/<handler-id>`),
//!   [`StatusProgressStorage`] (the legacy `status.kopf.progress`, read-only by default) and
//!   [`SmartProgressStorage`] (both; Kopf's default), and [`MultiProgressStorage`] (any
//!   of them together).
//! - [`DiffBaseStorage`] keeps the essence of the object as last handled, from which changes
//!   are detected: [`AnnotationsDiffBaseStorage`]
//!   (`kopf.zalando.org/last-handled-configuration`, Kopf's default),
//!   [`StatusDiffBaseStorage`] and [`MultiDiffBaseStorage`].
//!
//! An operator uses the storages of its
//! [`PersistenceSettings`](crate::settings::PersistenceSettings): annotations (Kopf's default),
//! `status`, or both. All writes go into a JSON merge-patch being built for the object; nothing
//! here talks to the API server (the operator sends the `status` part to `/status` when the
//! resource has a status subresource).
//!
//! # Annotation keys
//!
//! A handler id `parent/child` is kept under `kopf.zalando.org/parent.child` (`/` becomes `.`,
//! `<` and `>` become `_`). A name longer than Kubernetes' 63 characters is cut and ends in a
//! hash of the id (`-` and 6 base64 characters of a 4-byte blake2b digest). Kopf has two forms
//! and, with `v1` on (its default), writes both, reads either and purges both: V2 limits the
//! name part to 63 characters, V1 the whole key including the prefix. On ReplicaSets owned by
//! a Deployment, ids get `-ofDRS` appended, because Kubernetes copies the Deployment's
//! annotations onto them.
//!
//! Storages whose prefix does not start with `kopf.` also write `<prefix>/kopf-managed: "yes"`:
//! annotations under `kopf.zalando.org`, its subdomains and marked prefixes belong to
//! Kopf-based operators and are left out of every operator's essence, so that two operators on
//! one object do not wake each other up forever.
//!
//! Kopf does the same in `kopf/_cogs/configs/{conventions,progress,diffbase}.py` and
//! `kopf/_core/actions/progression.py`.

mod diffbase;
mod fields;
pub(crate) mod keys;
mod progress;
pub(crate) mod pyjson;
pub(crate) mod timestamps;

pub use diffbase::{
    AnnotationsDiffBaseStorage, DiffBaseStorage, MultiDiffBaseStorage, StatusDiffBaseStorage,
    build_essence,
};
pub use progress::{
    AnnotationsProgressStorage, HandlerId, MultiProgressStorage, ProgressRecord, ProgressStorage,
    SmartProgressStorage, StatusProgressStorage,
};
