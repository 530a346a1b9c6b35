//! The state log, open for appending: each group of writes becomes one sealed batch, fsync'd
//! before it counts; the file is rewritten as a snapshot when it is opened and whenever it has
//! grown beyond twice the size of its live objects.
//!
//! A compaction that fails never costs a write that was, or will be, answered:
//! - before the rename (creating, writing or fsyncing the temporary file, or the rename
//!   itself), the log is as it was: the temporary file goes, the appends go on to the log, and
//!   the next attempt waits until the log has doubled;
//! - after the rename, if the directory cannot be fsync'd, a crash may bring back either file:
//!   no append could be made durable in both, so the log refuses every later one (each write
//!   fails with the reason until the server is restarted), while the batch just appended, in
//!   both files, stands.
//!
//! All of it is blocking file I/O: the server calls it off its runtime.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::durability::Unsaved;
use super::error::StateFileError;
use super::format::{Record, push_header, push_line, push_seal, seal};
use crate::storage::catalog::ResourceKey;
use crate::storage::object::ObjectKey;
use crate::storage::private_files;
use crate::storage::state::{ChangeKind, Mutation, key_of};

/// Below this size, the log is never compacted (rewriting it would cost more than it saves).
const COMPACTION_FLOOR: u64 = 1 << 20;

/// The state log, open for appending.
#[derive(Debug)]
pub(crate) struct LogFile {
    path: PathBuf,
    file: File,
    /// The file's length.
    len: u64,
    /// Every stored object with the length of its `put` line: what a compaction writes.
    live: BTreeMap<ResourceKey, BTreeMap<ObjectKey, Live>>,
    /// The length of those `put` lines together.
    live_len: u64,
    /// The resourceVersion of the last batch.
    resource_version: u64,
    /// No compaction before the file is this long.
    compaction_floor: u64,
    /// Nor before it is this long, after a compaction failed.
    compaction_postponed: u64,
    /// Why nothing more is appended: a write failed (where the file ends is unknown), or a
    /// compaction's rename could not be made durable (which file a crash leaves is unknown).
    broken: Option<String>,
    /// The step at which compactions fail, in tests.
    #[cfg(test)]
    fail_at: Option<Step>,
}

/// The steps of a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Creating the temporary file.
    Create,
    /// Writing the snapshot to it.
    Write,
    /// Fsyncing it.
    Sync,
    /// Renaming it over the log.
    Rename,
    /// Fsyncing the directory, so that the rename survives a crash.
    SyncDirectory,
}

/// Where a compaction failed, and why.
#[derive(Debug)]
struct Failed {
    step: Step,
    error: StateFileError,
}

#[derive(Debug)]
struct Live {
    object: Arc<Value>,
    /// The length of its `put` line.
    len: u64,
}

impl LogFile {
    /// Writes the log anew with these objects (a compaction: a torn tail or the older format
    /// goes) and opens it for appending.
    pub(crate) fn create<'a>(
        path: &Path,
        objects: impl IntoIterator<Item = (&'a ResourceKey, &'a Arc<Value>)>,
        resource_version: u64,
    ) -> Result<LogFile, StateFileError> {
        let mut live: BTreeMap<ResourceKey, BTreeMap<ObjectKey, Live>> = BTreeMap::new();
        for (resource, object) in objects {
            let entry = Live {
                object: object.clone(),
                len: 0,
            };
            live.entry(resource.clone())
                .or_default()
                .insert(key_of(object), entry);
        }
        let (file, len, live_len) =
            write_snapshot(path, &mut live, resource_version, |_| Ok(())).map_err(|f| f.error)?;
        Ok(LogFile {
            path: path.to_owned(),
            file,
            len,
            live,
            live_len,
            resource_version,
            compaction_floor: COMPACTION_FLOOR,
            compaction_postponed: 0,
            broken: None,
            #[cfg(test)]
            fail_at: None,
        })
    }

    /// Makes every compaction fail at `step`.
    #[cfg(test)]
    pub(super) fn failing_compactions_at(mut self, step: Step) -> Self {
        self.fail_at = Some(step);
        self
    }

    /// Compacts from this size on, rather than from 1 MiB.
    #[cfg(test)]
    pub(super) fn with_compaction_floor(mut self, floor: u64) -> Self {
        self.compaction_floor = floor;
        self
    }

    /// Appends the writes of `group` as one batch and fsyncs it; they count once this returns
    /// `Ok`. Compacts the file when it has grown beyond twice its live objects. After an
    /// error, every later call fails: the end of the file is no longer known.
    pub(crate) fn append(&mut self, group: &[Unsaved]) -> Result<(), StateFileError> {
        let unwritable = |path: &Path, error| StateFileError::Unwritable {
            path: path.to_owned(),
            error,
        };
        if let Some(why) = &self.broken {
            return Err(unwritable(&self.path, std::io::Error::other(why.clone())));
        }
        let Some(last) = group.last() else {
            return Ok(());
        };
        let mut out = Vec::new();
        for mutation in group.iter().flat_map(|unsaved| &unsaved.mutations) {
            self.push(&mut out, mutation);
        }
        seal(&mut out, 0, last.resource_version);
        if let Err(error) = self
            .file
            .write_all(&out)
            .and_then(|()| self.file.sync_data())
        {
            self.broken = Some(format!(
                "an earlier write to it failed ({error}); restart the server"
            ));
            return Err(unwritable(&self.path, error));
        }
        self.len += out.len() as u64;
        self.resource_version = last.resource_version;
        let threshold = (2 * self.live_len)
            .max(self.compaction_floor)
            .max(self.compaction_postponed);
        if self.len > threshold {
            self.compact();
        }
        Ok(())
    }

    /// Encodes a mutation into `out` and follows it in the live objects.
    fn push(&mut self, out: &mut Vec<u8>, mutation: &Mutation) {
        match mutation {
            Mutation::Changed(change) => {
                let (group, resource) = &change.resource;
                let key = key_of(&change.object);
                let previous = if change.kind == ChangeKind::Deleted {
                    push_line(
                        out,
                        &Record::Delete {
                            group: group.into(),
                            resource: resource.into(),
                            namespace: Cow::Borrowed(&key.0),
                            name: Cow::Borrowed(&key.1),
                        },
                    );
                    self.live
                        .get_mut(&change.resource)
                        .and_then(|objects| objects.remove(&key))
                } else {
                    let len = push_line(
                        out,
                        &Record::Put {
                            group: group.into(),
                            resource: resource.into(),
                            object: Cow::Borrowed(&change.object),
                        },
                    );
                    self.live_len += len;
                    let live = Live {
                        object: change.object.clone(),
                        len,
                    };
                    match self.live.get_mut(&change.resource) {
                        Some(objects) => objects.insert(key, live),
                        None => {
                            let objects = BTreeMap::from([(key, live)]);
                            self.live.insert(change.resource.clone(), objects);
                            None
                        }
                    }
                };
                self.live_len -= previous.map_or(0, |p| p.len);
            }
            Mutation::Dropped(resource) => {
                push_line(
                    out,
                    &Record::Drop {
                        group: Cow::Borrowed(&resource.0),
                        resource: Cow::Borrowed(&resource.1),
                    },
                );
                let dropped = self.live.remove(resource).unwrap_or_default();
                self.live_len -= dropped.values().map(|live| live.len).sum::<u64>();
            }
        }
    }

    /// Rewrites the file with the live objects only. A failure before the rename leaves the
    /// log in place (it holds every batch already) and postpones the next attempt; one after
    /// it stops the appends (see the module's docs).
    fn compact(&mut self) {
        #[cfg(test)]
        let fail_at = self.fail_at;
        #[cfg(not(test))]
        let fail_at: Option<Step> = None;
        let inject = |step| match fail_at {
            Some(failing) if failing == step => Err(std::io::Error::other(format!(
                "an injected failure at {step:?}"
            ))),
            _ => Ok(()),
        };
        match write_snapshot(&self.path, &mut self.live, self.resource_version, inject) {
            Ok((file, len, live_len)) => {
                self.file = file;
                self.len = len;
                self.live_len = live_len;
                self.compaction_postponed = 0;
            }
            Err(Failed {
                step: Step::SyncDirectory,
                error,
            }) => {
                tracing::error!(
                    %error,
                    "the state file was compacted, but the rename could not be made durable: \
                     writes fail from now on; restart the server"
                );
                self.broken = Some(format!(
                    "a compaction replaced the file, but the rename could not be made durable \
                     ({error}); restart the server"
                ));
            }
            Err(Failed { error, .. }) => {
                tracing::warn!(%error, "compacting the state file failed; it keeps growing for now");
                self.compaction_postponed = self.len.saturating_mul(2);
            }
        }
    }
}

/// Writes a log with only the header and one batch of every object (CRDs first), via a
/// temporary file (readable by its owner only) renamed over `path` once fsync'd. Records each
/// object's line length; returns the file (positioned at its end), its length and the
/// objects' lines' length. `inject` fails steps in tests. A failure before the rename removes
/// the temporary file and leaves `path` as it was.
fn write_snapshot(
    path: &Path,
    live: &mut BTreeMap<ResourceKey, BTreeMap<ObjectKey, Live>>,
    resource_version: u64,
    inject: impl Fn(Step) -> std::io::Result<()>,
) -> Result<(File, u64, u64), Failed> {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".tmp");
    let temporary = path.with_file_name(name);
    let failed = |step, error| {
        if step != Step::SyncDirectory {
            let _ = std::fs::remove_file(&temporary);
        }
        Failed {
            step,
            error: StateFileError::Unwritable {
                path: path.to_owned(),
                error,
            },
        }
    };
    let file = inject(Step::Create)
        .and_then(|()| private_files::create(&temporary))
        .map_err(|error| failed(Step::Create, error))?;
    let written = write_batch(BufWriter::new(file), live, resource_version, &inject)
        .map_err(|error| failed(Step::Write, error))?;
    let (file, len, batch_len) = written;
    inject(Step::Sync)
        .and_then(|()| file.sync_all())
        .map_err(|error| failed(Step::Sync, error))?;
    inject(Step::Rename)
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(|error| failed(Step::Rename, error))?;
    inject(Step::SyncDirectory)
        .and_then(|()| sync_directory(path))
        .map_err(|error| failed(Step::SyncDirectory, error))?;
    Ok((file, len, batch_len))
}

/// Writes the header and the batch of every object to `writer`; returns the file, its length
/// and the objects' lines' length.
fn write_batch(
    mut writer: BufWriter<File>,
    live: &mut BTreeMap<ResourceKey, BTreeMap<ObjectKey, Live>>,
    resource_version: u64,
    inject: impl Fn(Step) -> std::io::Result<()>,
) -> std::io::Result<(File, u64, u64)> {
    let mut line = Vec::new();
    push_header(&mut line);
    let header_len = line.len() as u64;
    writer.write_all(&line)?;
    inject(Step::Write)?;
    // The batch is streamed, and its seal computed on the way.
    let mut crc = crc32fast::Hasher::new();
    let mut batch_len = 0;
    let is_crds = |resource: &ResourceKey| {
        resource.0 == "apiextensions.k8s.io" && resource.1 == "customresourcedefinitions"
    };
    for crds_pass in [true, false] {
        for (resource, objects) in live.iter_mut() {
            if is_crds(resource) != crds_pass {
                continue;
            }
            for entry in objects.values_mut() {
                line.clear();
                entry.len = push_line(
                    &mut line,
                    &Record::Put {
                        group: Cow::Borrowed(&resource.0),
                        resource: Cow::Borrowed(&resource.1),
                        object: Cow::Borrowed(&entry.object),
                    },
                );
                batch_len += entry.len;
                crc.update(&line);
                writer.write_all(&line)?;
            }
        }
    }
    line.clear();
    push_seal(&mut line, resource_version, batch_len, crc.finalize());
    writer.write_all(&line)?;
    let file = writer.into_inner().map_err(|error| error.into_error())?;
    Ok((file, header_len + batch_len + line.len() as u64, batch_len))
}

/// Makes a rename in the file's directory durable.
fn sync_directory(path: &Path) -> std::io::Result<()> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    File::open(directory)?.sync_all()
}
