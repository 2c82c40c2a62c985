//! The object-store backend (the `s3` feature): one dataset on an S3-compatible object store,
//! seen by the rest of blz as a directory tree.
//!
//! Objects are never modified in place. The dataset's committed state is one small object,
//! `<root>/meta/state`, that lists every file of the dataset (the object holding it and its
//! length, or its text inline for small meta documents). [`ObjectStorage`] loads that state
//! once, when it is made: a reader keeps reading that snapshot (immutable objects) whatever
//! writers commit meanwhile.
//!
//! Everything written through it (the transaction's positioned writes, atomic replacements,
//! renames, removals, whole staged creates) changes only a local overlay: new or changed files are
//! spooled to anonymous temporary files that hold the bytes written (the bytes of an existing file
//! not written stay in its objects, fetched only when read).
//! [`Storage::publish`](blz_format::storage::Storage::publish) of the dataset root uploads, for
//! every spooled file, the bytes written (or the whole file, when it is new or too fragmented)
//! under a new, writer-unique key, in parallel, the file's entry listing its extents, then replaces
//! the state object with a conditional write (If-Match on the ETag it loaded, or create-if-absent
//! for a new dataset): that write is the commit. A writer that lost the race gets
//! [`Error::Conflict`](blz_format::error::Error::Conflict); its uploads are orphans that
//! [`collect_garbage`] removes. The state object and the collection rule are described in
//! `spec/object-store.md`.

// The library never unwraps, expects or panics on a user's path: errors are values.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

// The floors, bottom first: a module imports only modules above it in this list
// (`use crate::...`; the unit tests in `tests.rs` excepted).
mod client;
mod commit;
mod config;
mod entry;
mod extents;
mod fetch;
mod file;
mod front;
mod gc;
mod handle;
mod keys;
mod load;
pub mod manifest;
mod shared;
mod spool;
mod state;
mod storage_impl;
#[cfg(test)]
mod tests;

pub use client::{ReadTuning, INLINE_INDEXES_VAR, MULTIPART_MIN, REQUEST_LOG_VAR, UPLOAD_PART};
pub use config::{parse_s3_url, s3_store, S3Timeouts, MAX_BACKOFF, UNSIGNED_PAYLOAD_VAR};
pub use entry::StateFile;
pub use front::Front;
pub use gc::{collect_garbage, Collected, CLOCK_PROBE};
pub use handle::ObjectStorage;
pub use keys::{
    ExtentObject, MAX_BLOCK_INDEXES, MAX_EXTENTS, MAX_FRONT, OBJECT_FILE_BYTES, STATE_FORMAT,
    STATE_KEY, STATE_VERSION, STATE_VERSION_EXTENTS, STATE_VERSION_WHOLE,
};
pub use shared::SharedPrefix;
pub use state::{Retired, State, EARLIER_WRITE_IDS};
