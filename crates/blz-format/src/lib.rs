//! The bottom floors of blz, which know nothing of datasets: [`error`] (the one error enum),
//! [`storage`] (where bytes live: the storage interface, the local filesystem, memory, fault
//! injection for crash tests; the object store is the `blz-object` crate above this one),
//! [`blosc`] (one compressed Blosc 1.x chunk) and [`blpk`] (bloscpack superchunk files of
//! many chunks, format 3).
//!
//! The `blz` crate builds datasets on these and re-exports what its users need
//! (`blz::error`, `blz::storage`, the codec and checksum choices); this crate is for code
//! that works on the files themselves, such as the `blz file` commands.

// The library never unwraps, expects or panics on a user's path: errors are values.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod blosc;
pub mod blpk;
pub mod error;
pub mod process;
pub mod storage;

pub use error::{Error, Result};
