//! Tables: structured (nested) datasets stored column-wise. Each leaf column lives in its own
//! directory `data/<field>/` (a nested field in `data/<field>/<sub>/`) with its own
//! superchunk files and compression, so reading one column touches no other column's files.
//! Every multi-column operation commits through one journal, so after a crash all columns
//! have the same committed length.
//!
//! ```no_run
//! use blz::table::{Field, Table, TableOptions, Values};
//! use blz::DType;
//! # fn main() -> blz::Result<()> {
//! let mut t = Table::create(
//!     "people.blz",
//!     vec![Field::new("age", DType::U8), Field::varstr("name")],
//!     &TableOptions::default(),
//! )?;
//! t.append(&[("age", Values::from_slice(&[31u8, 47])), ("name", Values::strings(&["Ada", "Alan"]))])?;
//! assert_eq!(t.column("name")?.to_strings()?, vec!["Ada", "Alan"]);
//! # Ok(()) }
//! ```
//!
//! This file holds [`Table`] and what every part shares: opening, the accessors, attributes,
//! compaction, `verify`, statistics. The rest by concern: `schema.rs` (fields, leaves, their
//! storage options), `columns.rs` (columns built from the schema and opened), `values.rs`
//! ([`Values`]), `create.rs`, `read.rs`, `write.rs` (appends, overwrites, the one
//! transaction), `alter.rs` (resize, columns added, dropped, renamed), and the column kinds
//! with their own storage: `nulls.rs`, `dict.rs`, `zone.rs`; `fancy.rs` reads and writes rows
//! by index.

mod alter;
mod columns;
mod create;
mod dict;
mod fancy;
mod nulls;
mod read;
mod schema;
mod values;
mod write;
mod zone;

use columns::{build_column, check_sizes};
pub use create::TableOptions;
pub use dict::{DictionaryValues, FILL_CODE};
pub use nulls::{ColumnValues, NullableValues};
pub use values::Values;
// CSV type inference checks and parses zones as a column is made with them.
#[cfg(feature = "csv")]
pub(crate) use zone::{check_timezone, fixed_offset_seconds};

pub use schema::{
    check_name, ColumnOptions, ColumnStorage, DictionarySpec, Field, FieldKind, FieldSpec,
    FieldType, Leaf, LeafKind, TableStorage,
};

use crate::column::varlen::VarCore;
use crate::engine::{ArrayCore, ChunkStore, Mode, Root, Turn};
use crate::error::{Error, Result};
use crate::meta::{self, Kind, MetaPaths, Sizes, FORMAT_NAME, FORMAT_VERSION};
use crate::stats::ChunkStats;
use crate::storage::{self, Storage};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Items per chunk of a variable-length column when none is given.
pub const DEFAULT_VAR_CHUNKLEN: u64 = 8192;

enum Engine {
    Fixed(ArrayCore),
    Var(VarCore),
}

struct Column {
    leaf: Leaf,
    engine: Engine,
    /// A dictionary's entries as last read (`dict.rs`).
    entries: dict::EntriesCache,
}

impl Column {
    fn store(&self) -> &ChunkStore {
        match &self.engine {
            Engine::Fixed(c) => &c.store,
            Engine::Var(v) => &v.store,
        }
    }

    /// The superchunk file that holds row `row`, when `storage` has no such file: the check
    /// a row count read from disk passes before it sizes a buffer.
    fn missing_file_of_row(&self, storage: &dyn Storage, row: u64) -> Option<PathBuf> {
        let store = self.store();
        let file = store.file_path(row / self.leaf.storage.chunklen / store.superchunksize());
        (!storage.exists(&file)).then_some(file)
    }

    fn nchunks(&self, nrows: u64) -> u64 {
        nrows.div_ceil(self.leaf.storage.chunklen)
    }

    /// Whether `v` holds values this column stores (strings must be UTF-8).
    fn accepts(&self, v: &Values) -> bool {
        match (&self.engine, v) {
            (Engine::Fixed(core), Values::Fixed { dtype, data }) => {
                *dtype == core.dtype && data.len() % core.itemsize() == 0
            }
            (Engine::Var(_), Values::Var(items)) => {
                self.leaf.kind != LeafKind::VarStr
                    || items.iter().all(|b| std::str::from_utf8(b).is_ok())
            }
            _ => false,
        }
    }

    /// No values, of the column's kind (what a fill-only write passes as its data).
    fn empty_values(&self) -> Values {
        match &self.engine {
            Engine::Fixed(core) => Values::Fixed {
                dtype: core.dtype,
                data: Vec::new(),
            },
            Engine::Var(_) => Values::Var(Vec::new()),
        }
    }
}

/// The error for values that a column does not store.
fn values_mismatch(root: &Path, c: &Column) -> Error {
    Error::Mismatch {
        dataset: root.to_path_buf(),
        reason: format!(
            "column {} holds {}; the values given do not fit (strings must be UTF-8)",
            c.leaf.path,
            c.leaf.kind.name()
        ),
    }
}

/// A table dataset.
pub struct Table {
    /// Where it is, the storage, the writer lock, the commit door.
    root: Root,
    meta: TableStorage,
    sizes: Sizes,
    columns: Vec<Column>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("root", &self.root)
            .field("nrows", &self.nrows())
            .field("columns", &self.column_names())
            .finish()
    }
}

impl Table {
    /// Opens a table read-only.
    ///
    /// # Errors
    /// As [`Table::open_in`].
    pub fn open(path: impl AsRef<Path>) -> Result<Table> {
        let (s, root) = storage::for_path(path.as_ref())?;
        Self::open_in(s, &root, Mode::ReadOnly)
    }

    /// Opens a table for reading and writing (takes the writer lock).
    ///
    /// # Errors
    /// As [`Table::open_in`].
    pub fn open_rw(path: impl AsRef<Path>) -> Result<Table> {
        let (s, root) = storage::for_path(path.as_ref())?;
        Self::open_in(s, &root, Mode::ReadWrite)
    }

    /// Opens a table on a given storage backend (recovering from a crashed writer first).
    ///
    /// # Errors
    /// [`Error::Locked`], [`Error::InvalidMetadata`] for missing or malformed meta files or a
    /// dataset that is not a table, I/O errors.
    pub fn open_in(storage: Arc<dyn Storage>, root: &Path, mode: Mode) -> Result<Table> {
        Self::open_with(storage, root, mode, false)
    }

    /// As [`open_in`](Self::open_in); `building`: the table is being created in a staging
    /// directory whose lock the caller holds.
    fn open_with(
        storage: Arc<dyn Storage>,
        root: &Path,
        mode: Mode,
        building: bool,
    ) -> Result<Table> {
        let (root, _, raw) = Root::open(&storage, root, mode, Some(Kind::Table), building)?;
        Self::from_root(root, raw)
    }

    /// The table at an opened root whose `meta/storage` document is `raw`.
    pub(crate) fn from_root(root: Root, raw: serde_json::Value) -> Result<Table> {
        let mp = MetaPaths::new(&root);
        let storage = Arc::clone(&root.storage);
        let meta: TableStorage = serde_json::from_value(raw)
            .map_err(|e| Error::metadata(mp.storage(), e.to_string()))?;
        if meta.format != FORMAT_NAME || meta.version != FORMAT_VERSION {
            return Err(Error::metadata(
                mp.storage(),
                format!(
                    "unsupported format {:?} version {}",
                    meta.format, meta.version
                ),
            ));
        }
        let leaves = schema::leaves(&meta.dtype)
            .map_err(|e| Error::metadata(mp.storage(), e.to_string()))?;
        let sizes: Sizes = meta::read_json(storage.as_ref(), &mp.sizes())?;
        if sizes.nrows.is_none() || sizes.shape.len() != 1 {
            return Err(Error::metadata(
                mp.sizes(),
                "a table's sizes need nrows and a 1-d shape",
            ));
        }
        let columns = leaves
            .into_iter()
            .map(|l| build_column(storage.clone(), &root, l, meta.id.as_deref()))
            .collect::<Result<Vec<_>>>()?;
        check_sizes(&columns, &sizes, &mp.sizes())?;
        let mode = root.mode;
        let mut t = Table {
            root,
            meta,
            sizes,
            columns,
        };
        if mode == Mode::ReadWrite {
            for c in &t.columns {
                c.store().remove_strays(c.nchunks(t.leaf_rows(c)))?;
            }
        }
        t.root.opened();
        Ok(t)
    }

    /// This handle's turn to write, when other writing handles of this process share its
    /// writer: one write at a time, and this handle caught up first with what the others
    /// committed (as `Dataset`'s).
    pub(crate) fn turn(&mut self) -> Result<Option<Turn>> {
        let turn = self.root.turn()?;
        if self.root.behind() {
            self.catch_up()?;
        }
        Ok(turn)
    }

    /// Reads the table's state again, as the other writing handles of this process left
    /// it (in this handle's turn).
    fn catch_up(&mut self) -> Result<()> {
        let (root, raw) = self.root.reopen(Kind::Table)?;
        *self = Self::from_root(root, raw)?;
        Ok(())
    }

    /// Whether this handle only reads or also writes (holding the writer lock).
    pub fn mode(&self) -> Mode {
        self.root.mode
    }

    /// The table's directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Number of rows.
    pub fn nrows(&self) -> u64 {
        self.sizes.nrows.unwrap_or(0)
    }

    /// Resolves a numpy-style selection of rows (one axis) against the number of rows.
    ///
    /// # Errors
    /// As [`Selection::resolve`](crate::Selection::resolve).
    pub fn select(&self, sel: &crate::Selection) -> Result<crate::selection::Resolved> {
        sel.resolve(&[self.nrows()], self.path())
    }

    /// Paths of the leaf columns, in order (`name`, or `parent/name` for nested fields).
    pub fn column_names(&self) -> Vec<&str> {
        self.columns
            .iter()
            .filter(|c| !c.leaf.hidden)
            .map(|c| c.leaf.path.as_str())
            .collect()
    }

    /// The leaf columns with their kinds and storage (a nullable column's validity column
    /// is not one of them).
    pub fn leaves(&self) -> Vec<&Leaf> {
        self.columns
            .iter()
            .filter(|c| !c.leaf.hidden)
            .map(|c| &c.leaf)
            .collect()
    }

    /// The `meta/storage` document.
    pub fn storage_meta(&self) -> &TableStorage {
        &self.meta
    }

    /// The `meta/sizes` document (with per-column sizes).
    pub fn sizes(&self) -> &Sizes {
        &self.sizes
    }

    /// The storage backend.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.root.storage
    }

    /// Superchunk files of a column, as absolute paths.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unknown column.
    pub fn column_files(&self, name: &str) -> Result<Vec<PathBuf>> {
        let c = self.col(name)?;
        let n = c.nchunks(self.nrows());
        Ok((0..c.store().nfiles(n))
            .map(|f| c.store().file_path(f))
            .collect())
    }

    /// The chunk engine of a fixed-size column.
    pub(crate) fn fixed_core(&self, name: &str) -> Result<&ArrayCore> {
        match &self.col(name)?.engine {
            Engine::Fixed(core) if !self.col(name)?.leaf.is_dictionary() => Ok(core),
            _ => Err(Error::InvalidArgument(format!(
                "column {name:?} holds variable-length items, not fixed-size elements"
            ))),
        }
    }

    fn col(&self, name: &str) -> Result<&Column> {
        self.columns
            .iter()
            .find(|c| c.leaf.path == name && !c.leaf.hidden)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "no column {name:?} in {} (columns: {})",
                    self.root.display(),
                    self.column_names().join(", ")
                ))
            })
    }

    /// Any leaf column by path, a validity column included.
    fn col_any(&self, name: &str) -> Result<&Column> {
        match self.columns.iter().find(|c| c.leaf.path == name) {
            Some(c) => Ok(c),
            None => self.col(name),
        }
    }

    fn check_writable(&self) -> Result<()> {
        self.root.check_writable()
    }

    fn check_range(&self, start: u64, end: u64) -> Result<()> {
        if start > end || end > self.nrows() {
            return Err(Error::OutOfBounds {
                dataset: self.root.to_path_buf(),
                reason: format!("rows {start}..{end} outside 0..{}", self.nrows()),
            });
        }
        Ok(())
    }

    /// Brings a read-only handle to the table's latest commit: when a writer (another
    /// handle, another process) has committed since this handle opened or was last
    /// refreshed, or a create with `overwrite` replaced the table, the handle is opened again and shows the new state (shape, data, columns).
    /// Returns whether it changed. A handle sees one commit from one call to the next:
    /// blz never changes what it shows in the middle of a call, and a read that meets files
    /// a later commit rewrote fails with [`Error::Changed`], after which a refresh and the
    /// same read again see the new state. Cheap when nothing changed (one read of
    /// `meta/sizes`). A read-write handle shares the writer lock with the other writing
    /// handles of this process only: it shows what they committed (one atomic load when
    /// nothing was; its writes catch up by themselves, its reads fail with
    /// [`Error::Changed`] until it is refreshed).
    ///
    /// # Errors
    /// As [`Table::open_in`] (the table was removed or replaced by something else); the
    /// handle is left as it was.
    pub fn refresh(&mut self) -> Result<bool> {
        if self.root.behind() {
            self.catch_up()?;
            return Ok(true);
        }
        let Some(stamp) = self.root.stale(self.sizes.generation, &self.meta.id) else {
            return Ok(false);
        };
        *self = Self::open_with(
            Arc::clone(&self.root.base),
            self.root.path(),
            Mode::ReadOnly,
            false,
        )?;
        self.root.set_seen(stamp);
        Ok(true)
    }

    /// An error a read met, or [`Error::Changed`] when a writer committed since this handle
    /// opened (see [`Root::unless_changed`]).
    pub(crate) fn unless_changed<T>(&self, r: Result<T>) -> Result<T> {
        self.root
            .unless_changed(self.sizes.generation, &self.meta.id, r)
    }

    /// The user attributes.
    ///
    /// # Errors
    /// As [`crate::Dataset::attrs`].
    pub fn attrs(&self) -> Result<serde_json::Map<String, serde_json::Value>> {
        self.root.attrs()
    }

    /// Replaces the user attributes atomically.
    ///
    /// # Errors
    /// [`Error::ReadOnly`], I/O errors.
    pub fn set_attrs(&mut self, attrs: serde_json::Map<String, serde_json::Value>) -> Result<()> {
        let _turn = self.turn()?;
        self.root.set_attrs(attrs)
    }

    /// Rewrites every superchunk file of every column without dead space (after many
    /// relocating writes), as [`crate::Dataset::compact`] does for an array: file by file,
    /// each through an atomic rename, so a crash leaves the table readable and unchanged.
    /// Returns the bytes saved.
    ///
    /// # Errors
    /// [`Error::ReadOnly`], corrupt chunks (naming file and chunk), I/O errors.
    pub fn compact(&mut self) -> Result<u64> {
        let _turn = self.turn()?;
        self.check_writable()?;
        let n = self.nrows();
        let mut saved = 0;
        for c in &self.columns {
            saved += c.store().compact(c.nchunks(self.leaf_rows(c)))?;
        }
        // The files now hold the same chunks in less space: a commit like any other (the
        // same rows, a new generation) makes that the table's state.
        self.run_to(None, false, |_, _, _| Ok((BTreeMap::new(), n)))?;
        Ok(saved)
    }

    /// Reads every chunk of every column and checks every digest; returns the problems.
    pub fn verify(&self, mut progress: impl FnMut(u64, u64)) -> Vec<Error> {
        let total: u64 = self
            .columns
            .iter()
            .map(|c| c.nchunks(self.leaf_rows(c)))
            .sum();
        let mut done = 0;
        let mut errors = Vec::new();
        for c in &self.columns {
            let n = self.leaf_rows(c);
            let k = c.nchunks(n);
            match &c.engine {
                Engine::Fixed(core) => {
                    let shape = [n];
                    let stats = self.sizes.stats_current().then_some(&shape[..]);
                    errors.extend(crate::engine::verify_store(core, k, stats, &mut |d, _| {
                        progress(done + d, total)
                    }));
                }
                Engine::Var(v) => {
                    let mut s = Vec::new();
                    let mut file =
                        |chunks: std::ops::Range<u64>,
                         errs: &mut Vec<Error>,
                         p: &mut dyn FnMut(u64, u64)| {
                            for i in chunks {
                                let valid = (n - i * v.chunklen).min(v.chunklen);
                                if let Err(e) = v.chunk_items(i, valid, &mut s) {
                                    errs.push(e);
                                }
                                p(i + 1, k);
                            }
                        };
                    errors.extend(crate::engine::verify_files(
                        &v.store,
                        k,
                        &mut |d, _| progress(done + d, total),
                        &mut file,
                    ));
                }
            }
            done += k;
        }
        self.root.verified(self.sizes.generation, errors)
    }
}

impl Table {
    /// The statistics of every chunk of leaf column `column` (its path, as
    /// [`Table::column_names`] gives it): entry `k` covers rows `[k * chunklen, (k + 1) *
    /// chunklen)` ([`Table::column_chunklen`]). `None` where unknown, and for every chunk of
    /// a variable-length, string or complex column.
    ///
    /// # Errors
    /// An unknown column; opening a superchunk file.
    pub fn column_stats(&self, column: &str) -> Result<Vec<Option<ChunkStats>>> {
        let chunklen = self.column_chunklen(column)?;
        let n = self.nrows().div_ceil(chunklen);
        match self.leaf(column)?.kind {
            LeafKind::Fixed(_) => self
                .fixed_core(column)?
                .store
                .chunk_stats(n, self.sizes().stats_current()),
            _ => Ok(vec![None; n as usize]),
        }
    }

    /// Rows per chunk of leaf column `column`.
    ///
    /// # Errors
    /// An unknown column.
    pub fn column_chunklen(&self, column: &str) -> Result<u64> {
        Ok(self.leaf(column)?.storage.chunklen)
    }

    fn leaf(&self, column: &str) -> Result<&Leaf> {
        self.leaves()
            .into_iter()
            .find(|l| l.path == column)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "no column {column:?} in {} (columns: {})",
                    self.path().display(),
                    self.column_names().join(", ")
                ))
            })
    }
}
