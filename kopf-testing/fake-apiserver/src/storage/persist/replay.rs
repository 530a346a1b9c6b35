//! Reading the state file back: the log's sealed batches replayed in order (a torn tail
//! dropped with a warning), or a snapshot of the older format; then the objects restored into
//! the state, CRDs first.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::Value;

use super::error::StateFileError;
use super::format::{FORMAT, Header, Record, VERSION};
use crate::storage::catalog::{ResourceDef, ResourceKey};
use crate::storage::object::{self, ObjectKey};
use crate::storage::state::{State, key_of};

/// What a state file holds.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Contents {
    /// The objects of each resource.
    pub(crate) objects: HashMap<ResourceKey, BTreeMap<ObjectKey, Value>>,
    /// The global resourceVersion the file reached.
    pub(crate) resource_version: u64,
}

impl Contents {
    fn apply(&mut self, record: Record<'_>) {
        match record {
            Record::Put {
                group,
                resource,
                object,
            } => {
                let object = object.into_owned();
                self.objects
                    .entry((group.into_owned(), resource.into_owned()))
                    .or_default()
                    .insert(key_of(&object), object);
            }
            Record::Delete {
                group,
                resource,
                namespace,
                name,
            } => {
                let resource = (group.into_owned(), resource.into_owned());
                if let Some(objects) = self.objects.get_mut(&resource) {
                    objects.remove(&(namespace.into_owned(), name.into_owned()));
                }
            }
            Record::Drop { group, resource } => {
                self.objects
                    .remove(&(group.into_owned(), resource.into_owned()));
            }
            Record::Commit(seal) => {
                self.resource_version = self.resource_version.max(seal.resource_version);
            }
        }
    }
}

/// Reads a state file; a missing or empty file is an empty cluster.
pub(crate) fn read(path: &Path) -> Result<Contents, StateFileError> {
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Contents::default());
        }
        Err(error) => {
            return Err(StateFileError::Unreadable {
                path: path.to_owned(),
                error,
            });
        }
    };
    if text.iter().all(u8::is_ascii_whitespace) {
        return Ok(Contents::default());
    }
    let first_line = text.split(|&b| b == b'\n').next().unwrap_or_default();
    match serde_json::from_slice::<Header<'_>>(first_line) {
        Ok(header) if header.format == FORMAT => {
            if header.version > VERSION {
                return Err(StateFileError::TooNew {
                    path: path.to_owned(),
                    version: header.version,
                });
            }
            read_log(path, &text, first_line.len() + 1)
        }
        _ => read_snapshot(path, &text),
    }
}

/// Replays the sealed batches after the header (which ends at `start`). Only the last one may
/// be unfinished (a torn tail, dropped); never the first, the snapshot of a compaction.
fn read_log(path: &Path, text: &[u8], start: usize) -> Result<Contents, StateFileError> {
    let corrupt = |line, reason| StateFileError::Corrupt {
        path: path.to_owned(),
        line,
        reason,
    };
    let mut contents = Contents::default();
    // The records of the batch being read, and where that batch starts.
    let mut batch = Vec::new();
    let mut batch_start = (start, 2);
    // The first line that broke a batch: a torn tail unless a sealed batch follows.
    let mut broken: Option<(usize, String)> = None;
    let mut at = start;
    let mut line = 1;
    while let Some(length) = text[at..].iter().position(|&b| b == b'\n') {
        line += 1;
        let end = at + length + 1;
        match serde_json::from_slice::<Record<'_>>(&text[at..end - 1]) {
            Ok(Record::Commit(seal)) => match (seal.batch_start(text, at), &broken) {
                (Some(sealed), None) if sealed == batch_start.0 => {
                    for record in batch.drain(..) {
                        contents.apply(record);
                    }
                    contents.apply(Record::Commit(seal));
                    batch_start = (end, line + 1);
                }
                (Some(_), None) => {
                    return Err(corrupt(
                        batch_start.1,
                        "lines that belong to no batch (its seal does not cover them)".into(),
                    ));
                }
                (Some(_), Some((line, reason))) => return Err(corrupt(*line, reason.clone())),
                (None, None) => {
                    let reason = format!(
                        "the batch of lines {}-{line} does not match the CRC-32 of its seal",
                        batch_start.1
                    );
                    broken = Some((batch_start.1, reason));
                }
                (None, Some(_)) => {}
            },
            Ok(record) => batch.push(record),
            Err(error) => {
                broken.get_or_insert_with(|| (line, format!("not a record: {error}")));
            }
        }
        at = end;
    }
    if batch_start.0 < text.len() && batch_start.0 == start {
        // The first batch is the snapshot a compaction wrote and fsync'd before renaming the
        // file into place: no crash leaves it unfinished.
        let (line, reason) = broken.unwrap_or_else(|| (2, "the snapshot is unfinished".into()));
        return Err(corrupt(line, reason));
    }
    if batch_start.0 < text.len() {
        tracing::warn!(
            path = %path.display(),
            line = batch_start.1,
            bytes = text.len() - batch_start.0,
            "the state file ends with an unfinished batch (the server stopped while writing it, \
             before answering for it): dropping it",
        );
    }
    Ok(contents)
}

/// Reads a snapshot of the older format: `{"resourceVersion": N, "objects": [{"group",
/// "resource", "object"}, ...]}`.
fn read_snapshot(path: &Path, text: &[u8]) -> Result<Contents, StateFileError> {
    let unrecognized = |reason: String| StateFileError::Unrecognized {
        path: path.to_owned(),
        reason,
    };
    let snapshot: Value = serde_json::from_slice(text).map_err(|e| unrecognized(e.to_string()))?;
    let entries = snapshot["objects"]
        .as_array()
        .ok_or_else(|| unrecognized("it has no list of `objects`".into()))?;
    let mut contents = Contents {
        resource_version: snapshot["resourceVersion"].as_u64().unwrap_or(0),
        ..Contents::default()
    };
    for entry in entries {
        let object = entry["object"].clone();
        let rv = object::resource_version(&object).parse().unwrap_or(0);
        contents.resource_version = contents.resource_version.max(rv);
        let group = entry["group"].as_str().unwrap_or_default();
        let resource = entry["resource"].as_str().unwrap_or_default();
        contents.apply(Record::Put {
            group: group.into(),
            resource: resource.into(),
            object: std::borrow::Cow::Owned(object),
        });
    }
    Ok(contents)
}

/// Puts what a state file holds into a fresh state: CRDs first, so that their resources are
/// served when their objects come; objects of resources no CRD serves are skipped.
pub(crate) fn restore(state: &mut State, contents: Contents) {
    let crds = (
        "apiextensions.k8s.io".to_string(),
        "customresourcedefinitions".to_string(),
    );
    let mut objects = contents.objects;
    let crd_objects = objects.remove(&crds).unwrap_or_default();
    let resources = std::iter::once((crds, crd_objects)).chain(objects);
    for ((group, plural), objects) in resources {
        let Some(def) = state.catalog.get(&group, &plural).cloned() else {
            if !objects.is_empty() {
                tracing::warn!(
                    group,
                    plural,
                    count = objects.len(),
                    "state file: skipping objects of a resource no CRD serves"
                );
            }
            continue;
        };
        for object in objects.into_values() {
            if def.group == "apiextensions.k8s.io"
                && let Ok(crd_def) = ResourceDef::from_crd(&object)
            {
                state.catalog.insert(crd_def);
            }
            state.restore_object(&def, object);
        }
    }
    state.restore_resource_version(contents.resource_version);
}
