//! The lines of the state log: the header, the records, and the `commit` line that seals a
//! batch of them.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the header line says the file is.
pub(super) const FORMAT: &str = "kopf-fake-apiserver state log";

/// The version of the format this code writes and reads.
pub(super) const VERSION: u64 = 1;

/// The first line of a log.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Header<'a> {
    pub(super) format: Cow<'a, str>,
    pub(super) version: u64,
}

/// One line after the header.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum Record<'a> {
    /// An object as stored (added or modified).
    Put {
        group: Cow<'a, str>,
        resource: Cow<'a, str>,
        object: Cow<'a, Value>,
    },
    /// An object deleted.
    Delete {
        group: Cow<'a, str>,
        resource: Cow<'a, str>,
        namespace: Cow<'a, str>,
        name: Cow<'a, str>,
    },
    /// Every object of a resource dropped (its CRD is gone).
    Drop {
        group: Cow<'a, str>,
        resource: Cow<'a, str>,
    },
    /// The end of a batch.
    Commit(Seal),
}

/// What a `commit` line says about the batch it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Seal {
    /// The global resourceVersion once the batch is applied.
    pub(super) resource_version: u64,
    /// The length of the batch's records, newlines included, just before this line.
    pub(super) bytes: u64,
    /// The CRC-32 (IEEE) of those bytes.
    pub(super) crc32: u32,
}

impl Seal {
    /// Where the batch this seal ends starts in `text`, if the seal (found at `at`) checks out.
    pub(super) fn batch_start(&self, text: &[u8], at: usize) -> Option<usize> {
        let start = at.checked_sub(usize::try_from(self.bytes).ok()?)?;
        (crc32fast::hash(&text[start..at]) == self.crc32).then_some(start)
    }
}

/// Appends `record` to `out` as a line; returns the line's length.
pub(super) fn push_line(out: &mut Vec<u8>, record: &impl Serialize) -> u64 {
    let start = out.len();
    serde_json::to_writer(&mut *out, record).expect("records are plain JSON values");
    out.push(b'\n');
    (out.len() - start) as u64
}

/// Appends the `commit` line that seals the records in `out[start..]`.
pub(super) fn seal(out: &mut Vec<u8>, start: usize, resource_version: u64) {
    let (bytes, crc32) = ((out.len() - start) as u64, crc32fast::hash(&out[start..]));
    push_seal(out, resource_version, bytes, crc32);
}

/// Appends the `commit` line that seals a batch of `bytes` bytes with this CRC-32.
pub(super) fn push_seal(out: &mut Vec<u8>, resource_version: u64, bytes: u64, crc32: u32) {
    let seal = Seal {
        resource_version,
        bytes,
        crc32,
    };
    push_line(out, &Record::Commit(seal));
}

/// The header line.
pub(super) fn push_header(out: &mut Vec<u8>) {
    push_line(
        out,
        &Header {
            format: FORMAT.into(),
            version: VERSION,
        },
    );
}
