//! The state file: a development cluster survives a restart, and a crash (`kill -9`, a power
//! cut) takes back no write a client saw answered.
//!
//! # A log, not a database
//!
//! The server serves everything from memory (lists, watches and the history they replay); the
//! file only has to bring that memory back after a restart. So it is a redo log: an
//! append-only file of JSON lines, one per change, replayed at start. An embedded store such
//! as `redb` would bring transactions the server does not need (its one mutex already orders
//! every change), a second index of the objects that nothing reads but the start, and a file
//! nobody can read; a log costs one `write` and one `fdatasync` per group of writes, and stays
//! a file a developer can open, `grep` and `jq`.
//!
//! # Format
//!
//! ```text
//! {"format":"kopf-fake-apiserver state log","version":1}
//! {"put":{"group":"","resource":"configmaps","object":{"apiVersion":"v1","kind":"ConfigMap",...}}}
//! {"delete":{"group":"","resource":"configmaps","namespace":"default","name":"old"}}
//! {"commit":{"resourceVersion":42,"bytes":1234,"crc32":3735928559}}
//! ```
//!
//! The first line names the format. Records come in batches, each sealed by a `commit` line
//! with the resourceVersion reached, the batch's length in bytes and its CRC-32; a batch counts
//! only once its seal checks out. Each batch is fsync'd before the next one is written, so a
//! crash can leave only the last one unfinished: an unsealed last batch is a torn tail, dropped
//! with a warning (nobody was answered for it). A bad batch followed by a sealed one is
//! corruption, and so is a bad first batch (the snapshot a compaction wrote, which is in place
//! only once complete): an error that names the file and the line.
//!
//! # Durability
//!
//! Every write queues its mutations ([`State::take_unsaved`]) under the state's lock, so they
//! queue in resourceVersion order. One task (`server::saving`) takes whatever queued while
//! the previous group was being written, writes it as one batch and fsyncs it: a burst of
//! writes from many clients costs one fsync (group commit). The lock is never held across the
//! fsync. Answers wait until the file holds everything they may show ([`Durability::saved`]),
//! and watches send only changes the file holds, so no client sees a resourceVersion that a
//! crash could take back: versions never go backwards across restarts. Without a state file
//! none of this runs: nothing is queued and nothing waits.
//!
//! # Compaction
//!
//! At start the file is rewritten as a snapshot: one batch with every object, CRDs first. This
//! drops a torn tail, and turns a file of the older format (one JSON document with
//! `resourceVersion` and `objects`, which earlier versions saved every few seconds) into a log.
//! While serving, the file is rewritten the same way once it grows beyond twice the size of
//! its live objects (and beyond 1 MiB), so its size stays proportional to the cluster's. A
//! rewrite goes to a temporary file, which replaces the log by a rename only once fsync'd.
//!
//! [`State::take_unsaved`]: super::state::State::take_unsaved

mod durability;
mod error;
mod format;
mod log_file;
mod replay;

#[cfg(test)]
mod tests;

pub(crate) use durability::{Backlog, Durability, channel};
pub(crate) use error::StateFileError;
pub(crate) use log_file::LogFile;
pub(crate) use replay::{read, restore};
