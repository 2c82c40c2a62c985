//! blz: a chunked, compressed, persistent array store.
//!
//! Layers, from the bottom: the crate `blz_format` ([`storage`]: where bytes live; the Blosc
//! chunk codec; bloscpack superchunk files of many chunks), re-exported here as far as a user
//! of datasets needs it; datasets on top: [`array`], [`table`] and [`layer`] (sorted columns
//! with row groups, value indexes and filters); [`bcolz`] reads bcolz carrays and ctables and
//! imports them.
//!
//! What clients share: [`ordered`] reads selections in output order, whole or in batches;
//! [`ingest`] builds tables from leaf column paths; `npy` (feature `npy`) reads and writes
//! numpy `.npy` files; `csv` (feature `csv`) infers column types and loads CSV files.

// The library never unwraps, expects or panics on a user's path: errors are values.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod array;
#[cfg(feature = "arrow")]
pub mod arrow;
pub mod bcolz;
mod column;
pub mod copy;
#[cfg(feature = "csv")]
pub mod csv;
pub mod datetime;
pub mod dtype;
mod engine;
pub mod expr;
pub mod fancy;
pub mod ingest;
pub mod layer;
pub mod locate;
pub mod meta;
#[cfg(feature = "npy")]
pub mod npy;
mod open;
pub mod ordered;
pub mod query;
pub mod scan;
pub mod selection;
// Not in the library's own unit-test build: the module has no unit tests (tests/sql.rs tests
// it through the library as users link it), and compiling DataFusion's generics a second
// time for that build is minutes of CI.
#[cfg(all(feature = "sql", not(test)))]
pub mod sql;
pub mod stats;
use engine::staging;
pub mod table;
pub(crate) mod txn;

pub use blz_format::{error, process};
pub mod storage;

/// The Blosc codecs and shuffle filters that a dataset's chunks are compressed with
/// ([`CreateOptions`](crate::CreateOptions), [`meta::Compression`](crate::meta::Compression)).
/// The chunk codec itself (compress, decompress, chunk headers) is `blz_format::blosc`.
pub mod blosc {
    pub use blz_format::blosc::{Codec, CodecError, Filter};
    // The rest of the codec, for blz's own modules only.
    pub(crate) use blz_format::blosc::*;
}

/// The digests that a dataset's superchunk files protect their chunks with
/// ([`CreateOptions`](crate::CreateOptions), [`meta::Compression`](crate::meta::Compression)).
/// Reading and writing the files themselves (`SuperchunkReader`, `pack`, `unpack`, ...) is
/// `blz_format::blpk`.
pub mod blpk {
    pub use blz_format::blpk::Checksum;
    // The rest of the superchunk file format, for blz's own modules only.
    pub(crate) use blz_format::blpk::*;
}

/// A dataset left by a writer that stopped while applying its commit: whether a journal is
/// pending ([`recovery::pending`]), replaying it as the next writer would
/// ([`recovery::recover`]), or a read-only view that applies it in memory
/// ([`recovery::pending_view`]: a [`Storage`] to open the dataset through where nothing may
/// be written).
pub mod recovery {
    pub use crate::txn::{pending, pending_view, recover};
}

pub use array::Dataset;
pub use dtype::{DType, Element, Endianness};
pub use engine::{
    check_shape, in_this_process, CreateOptions, Mode, MAX_ARRAY_BYTES, MAX_FILL_CHUNKS,
    MAX_TABLE_FILL_ROWS,
};
pub use error::{Error, Result};
pub use layer::Layer;
pub use meta::Kind;
pub use open::{on_latest_commit, MaybeChanged, CHANGED_RETRIES};
pub use open::{open, open_in, open_rw, AnyDataset, BcolzDataset};
pub use selection::Selection;
pub use staging::finish_removals;
pub use stats::ChunkSum;
pub use stats::{ChunkStats, StatValue};
pub use storage::Storage;
pub use table::Table;

/// The parsers of on-disk bytes that are otherwise internal (the journal, variable-length
/// chunk payloads), for the fuzz targets in `fuzz/`. Not part of the API: built only with the
/// `fuzzing` feature.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::column::varlen::{decode_items, encode_items};
    pub use crate::txn::{decode, encode, Entry};
}

/// The README's code, compiled and run with the doctests so that it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
