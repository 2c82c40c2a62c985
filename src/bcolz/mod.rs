//! Reading bcolz carrays and ctables, and importing them into blz datasets and tables: the
//! way off bcolz (unmaintained) for the data people already have in it.
//!
//! A bcolz carray is a directory `meta/sizes` (the committed shape: bcolz's commit point),
//! `meta/storage` (numpy dtype, chunk length, compression, default value), `__attrs__`
//! (user attributes) and `data/__<i>.blp`, one file per chunk of `chunklen` rows, the last
//! one holding the "leftover" rows that do not fill a chunk. A ctable is `__rootdirs__` (the
//! column names), `__attrs__`, and one carray directory per column. `spec/bcolz.md` gives
//! every byte and key blz relies on.
//!
//! Everything read is checked before use: a bad file gives an error naming it (and the
//! chunk), never a panic, and no buffer is sized from an unchecked field. Data are read one
//! chunk at a time.
//!
//! ```no_run
//! use blz::bcolz::{self, ImportOptions};
//! # fn main() -> blz::Result<()> {
//! let ds = bcolz::import_carray("prices.bcolz", "prices.blz", &ImportOptions::default())?;
//! println!("{:?} {}", ds.shape(), ds.dtype());
//! let t = bcolz::import_ctable("trades.bcolz", "trades.blz", &ImportOptions::default())?;
//! println!("{} rows, columns {:?}", t.nrows(), t.column_names());
//! # Ok(()) }
//! ```

mod chunk;
mod import;
mod meta;
mod reader;

pub use import::{
    import_carray, import_carray_with, import_ctable, import_ctable_with, ImportOptions,
    DEFAULT_BATCH_BYTES,
};
pub use meta::{CarrayMeta, Cparams};
pub use reader::{detect, CarrayReader, CtableReader, Kind};
