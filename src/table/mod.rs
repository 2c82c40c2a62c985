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

mod dict;
mod fancy;
mod nulls;
mod schema;
mod zone;

pub use dict::{DictionaryValues, FILL_CODE, MAX_DICTIONARY_LIMIT};
pub use nulls::{ColumnValues, NullableValues};
pub use zone::{check_timezone, fixed_offset_seconds};

pub use schema::{
    check_name, ColumnOptions, ColumnStorage, DictionarySpec, Field, FieldKind, FieldSpec,
    FieldType, Leaf, LeafKind, TableStorage,
};

use crate::blpk::Checksum;
use crate::column::varlen::VarCore;
use crate::dtype::{bytes_to_value, value_to_bytes, DType, Element, Endianness};
use crate::engine::{
    build_storage_meta, ArrayCore, ChunkStore, ChunkWrites, CreateOptions, Mode, Root, Source, Turn,
};
use crate::error::{Error, Result};
use crate::meta::{
    self, ColumnSizes, Compression, FilterName, Kind, MetaPaths, Sizes, FORMAT_NAME, FORMAT_VERSION,
};
use crate::selection::AxisSel;
use crate::staging::Staging;
use crate::stats::ChunkStats;
use crate::storage::{self, Storage};
use crate::txn::Txn;
use ndarray::Array1;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Items per chunk of a variable-length column when none is given.
pub const DEFAULT_VAR_CHUNKLEN: u64 = 8192;

/// The values of one column for a range or selection of rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Fixed-size elements as native-endian bytes.
    Fixed {
        /// Element type.
        dtype: DType,
        /// `len * itemsize` bytes.
        data: Vec<u8>,
    },
    /// Variable-length items (UTF-8 for string columns).
    Var(Vec<Vec<u8>>),
}

impl Values {
    /// Fixed-size values from a slice.
    pub fn from_slice<T: Element>(v: &[T]) -> Values {
        let dtype = T::dtype();
        Values::Fixed {
            dtype,
            data: crate::engine::elements_to_bytes(v, dtype.itemsize()),
        }
    }

    /// Variable-length strings.
    pub fn strings<S: AsRef<str>>(v: &[S]) -> Values {
        Values::Var(v.iter().map(|s| s.as_ref().as_bytes().to_vec()).collect())
    }

    /// Variable-length byte strings.
    pub fn bytes<B: AsRef<[u8]>>(v: &[B]) -> Values {
        Values::Var(v.iter().map(|b| b.as_ref().to_vec()).collect())
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Values::Fixed { dtype, data } => data.len() / dtype.itemsize().max(1),
            Values::Var(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `other`'s values (of the same kind and dtype) to these.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the kinds or dtypes differ.
    pub fn extend(&mut self, other: Values) -> Result<()> {
        match (self, other) {
            (
                Values::Fixed { dtype, data },
                Values::Fixed {
                    dtype: d,
                    data: more,
                },
            ) if *dtype == d => {
                if data.is_empty() {
                    *data = more;
                } else {
                    data.extend_from_slice(&more);
                }
                Ok(())
            }
            (Values::Var(items), Values::Var(more)) => {
                if items.is_empty() {
                    *items = more;
                } else {
                    items.extend(more);
                }
                Ok(())
            }
            _ => Err(Error::InvalidArgument(
                "values of different types cannot be joined".into(),
            )),
        }
    }

    /// Splits the values at `at` (clamped to the length): these keep the first `at`, the
    /// rest are returned.
    pub fn split_off(&mut self, at: usize) -> Values {
        match self {
            Values::Fixed { dtype, data } => {
                let at = (at * dtype.itemsize()).min(data.len());
                Values::Fixed {
                    dtype: *dtype,
                    data: data.split_off(at),
                }
            }
            Values::Var(items) => Values::Var(items.split_off(at.min(items.len()))),
        }
    }

    /// The values as a `Vec<T>`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `T` does not hold the values' dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        match self {
            Values::Fixed { dtype, data } if T::accepts(dtype) => Ok(data
                .chunks_exact(dtype.itemsize())
                .map(T::from_ne_bytes)
                .collect()),
            Values::Fixed { dtype, .. } => Err(Error::InvalidArgument(format!(
                "column holds {dtype}, not {}",
                std::any::type_name::<T>()
            ))),
            Values::Var(_) => Err(Error::InvalidArgument(
                "column holds variable-length values; use to_strings or items".into(),
            )),
        }
    }

    /// The values as strings (variable-length columns, and fixed `S<n>`/`U<n>` ones).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for numeric columns or bytes that are not UTF-8.
    pub fn to_strings(&self) -> Result<Vec<String>> {
        match self {
            Values::Var(v) => v
                .iter()
                .map(|b| {
                    String::from_utf8(b.clone())
                        .map_err(|_| Error::InvalidArgument("value is not UTF-8".into()))
                })
                .collect(),
            Values::Fixed {
                dtype: d @ (DType::Bytes(_) | DType::Str(_)),
                data,
            } => Ok(data
                .chunks_exact(d.itemsize())
                .map(|c| match bytes_to_value(c, *d, Endianness::native()) {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                })
                .collect()),
            Values::Fixed { dtype, .. } => Err(Error::InvalidArgument(format!(
                "column holds {dtype}, not strings"
            ))),
        }
    }

    /// Value `i` as JSON (for display and export).
    pub fn json(&self, i: usize) -> serde_json::Value {
        match self {
            Values::Fixed { dtype, data } => {
                let s = dtype.itemsize();
                data.get(i * s..(i + 1) * s)
                    .map_or(serde_json::Value::Null, |b| {
                        bytes_to_value(b, *dtype, Endianness::native())
                    })
            }
            Values::Var(v) => v.get(i).map_or(serde_json::Value::Null, |b| {
                serde_json::Value::String(String::from_utf8_lossy(b).into_owned())
            }),
        }
    }
}

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

/// How a new table is laid out.
#[derive(Debug, Clone, Default)]
pub struct TableOptions {
    /// Options for columns that give none of their own.
    pub defaults: ColumnOptions,
    /// Expected number of rows (sizes chunks).
    pub expectedlen: Option<u64>,
    /// Initial user attributes.
    pub attributes: serde_json::Map<String, serde_json::Value>,
    /// Replace an existing dataset at the path.
    pub overwrite: bool,
}

/// Per column path, the change of its stored and uncompressed bytes in an operation.
type ByteDeltas = BTreeMap<String, (i64, i64)>;

/// Per dictionary path, its row count after an operation that extends it.
type RowCounts = BTreeMap<String, u64>;

/// Reads of more rows than this first check that the file holding the last of them exists.
const LARGE_READ_ROWS: u64 = 1 << 20;

/// Checks the row count read from `meta/sizes` (at `path`) before it sizes anything: every
/// fixed-size column's bytes within [`crate::MAX_ARRAY_BYTES`], and the document's other
/// counts agreeing with it: `shape` is `[nrows]`, each fixed-size column's `nbytes` is its
/// rows' bytes and `nbytes` the sum of the columns' (every commit writes them together, so
/// they disagree only in a document no writer wrote: rows added by hand within a last chunk
/// would otherwise show its padding as rows). (Whether the files it needs exist is checked
/// per column, when a large read of it is about to size a buffer, so that opening a table
/// reads no column's files.)
fn check_sizes(columns: &[Column], sizes: &Sizes, path: &Path) -> Result<()> {
    let bad = |reason: String| Err(Error::metadata(path, reason));
    let nrows = sizes.nrows.unwrap_or(0);
    for c in columns {
        if let crate::column::LeafKind::Fixed(d) = c.leaf.stored_kind() {
            crate::engine::limits::shape_bytes(&[nrows], d.itemsize() as u64, "nrows")
                .map_err(|e| Error::metadata(path, e.to_string()))?;
        }
    }
    if sizes.shape != [nrows] {
        return bad(format!(
            "shape {:?} is not [nrows], and nrows is {nrows}",
            sizes.shape
        ));
    }
    let Some(cols) = &sizes.columns else {
        return Ok(());
    };
    for c in columns {
        let (crate::column::LeafKind::Fixed(d), Some(cs)) =
            (c.leaf.stored_kind(), cols.get(&c.leaf.path))
        else {
            continue;
        };
        let want = nrows * d.itemsize() as u64;
        if cs.nbytes != want {
            return bad(format!(
                "column {:?} has nbytes {}, but {nrows} rows of {}-byte values take {want}",
                c.leaf.path,
                cs.nbytes,
                d.itemsize()
            ));
        }
    }
    let sum = cols.values().try_fold(0u64, |a, c| a.checked_add(c.nbytes));
    if sum != Some(sizes.nbytes) {
        return bad(format!(
            "nbytes is {}, but its columns' nbytes add up to {}",
            sizes.nbytes,
            sum.map_or_else(|| "more than 2^64".to_string(), |s| s.to_string())
        ));
    }
    Ok(())
}

/// The columns' values as the table writes them: each nullable column's values with their
/// null rows holding the fill value, followed by its validity column's; values given with
/// nulls for a column that is not nullable are refused, naming it. Names the table does not
/// have are kept for the checks to refuse.
fn expand<'v, V: ColumnValues>(
    root: &Path,
    columns: &[Column],
    enc: &mut dict::Encoder,
    cols: &'v [(&str, V)],
) -> Result<Vec<(String, Cow<'v, Values>)>> {
    let mut out = Vec::with_capacity(cols.len() + 1);
    for (name, v) in cols {
        let values = v.values();
        let Some(c) = columns
            .iter()
            .find(|c| !c.leaf.hidden && c.leaf.path == *name)
        else {
            out.push((name.to_string(), Cow::Borrowed(values)));
            continue;
        };
        let flags = checked_flags(c, values.len(), v.validity())?;
        if let Some(codes) = enc.encode(root, c, values, flags.as_deref())? {
            out.push((name.to_string(), Cow::Owned(codes)));
            if let Some(flags) = flags {
                out.push((
                    schema::validity_path(name),
                    Cow::Owned(nulls::validity_values(&flags)),
                ));
            }
            continue;
        }
        match flags {
            None => out.push((name.to_string(), Cow::Borrowed(values))),
            Some(flags) => {
                let (fixed, var) = fills(c);
                out.push((
                    name.to_string(),
                    nulls::normalize(values, &flags, fixed, var),
                ));
                out.push((
                    schema::validity_path(name),
                    Cow::Owned(nulls::validity_values(&flags)),
                ));
            }
        }
    }
    Ok(out)
}

/// As [`expand`], for owned values.
fn expand_owned<V: Into<NullableValues>>(
    root: &Path,
    columns: &[Column],
    enc: &mut dict::Encoder,
    batch: Vec<(String, V)>,
) -> Result<Vec<(String, Values)>> {
    let mut out = Vec::with_capacity(batch.len() + 1);
    for (name, v) in batch {
        let v: NullableValues = v.into();
        let Some(c) = columns
            .iter()
            .find(|c| !c.leaf.hidden && c.leaf.path == name)
        else {
            out.push((name, v.values));
            continue;
        };
        let flags = checked_flags(c, v.values.len(), v.validity.as_deref())?;
        if let Some(codes) = enc.encode(root, c, &v.values, flags.as_deref())? {
            let vpath = schema::validity_path(&name);
            out.push((name, codes));
            if let Some(flags) = flags {
                out.push((vpath, nulls::validity_values(&flags)));
            }
            continue;
        }
        match flags {
            None => out.push((name, v.values)),
            Some(flags) => {
                let (fixed, var) = fills(c);
                let values = match nulls::normalize(&v.values, &flags, fixed, var) {
                    Cow::Borrowed(_) => v.values,
                    Cow::Owned(n) => n,
                };
                let vpath = schema::validity_path(&name);
                out.push((name, values));
                out.push((vpath, nulls::validity_values(&flags)));
            }
        }
    }
    Ok(out)
}

/// The validity flags to write for column `c` (`None`: it is not nullable), checked
/// against the values' length and the column's nullability.
fn checked_flags<'f>(
    c: &Column,
    len: usize,
    validity: Option<&'f [bool]>,
) -> Result<Option<Cow<'f, [bool]>>> {
    if let Some(f) = validity {
        if f.len() != len {
            return Err(nulls::validity_length(&c.leaf, f.len(), len));
        }
    }
    if !c.leaf.nullable {
        if let Some(i) = validity.and_then(|f| f.iter().position(|&b| !b)) {
            return Err(nulls::not_nullable(&c.leaf, i));
        }
        return Ok(None);
    }
    Ok(Some(validity.map_or_else(
        || Cow::Owned(vec![true; len]),
        Cow::Borrowed,
    )))
}

/// What a null of column `c` holds: the fill value's bytes (fixed-size) or item
/// (variable-length).
fn fills(c: &Column) -> (&[u8], &[u8]) {
    match &c.engine {
        Engine::Fixed(core) => (core.fill.as_slice(), &[]),
        Engine::Var(_) => (&[], c.leaf.storage.dflt.as_str().unwrap_or("").as_bytes()),
    }
}

/// Expanded values as the writing internals take them.
fn refs<'a>(expanded: &'a [(String, Cow<'_, Values>)]) -> Vec<(&'a str, &'a Values)> {
    expanded
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_ref()))
        .collect()
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

/// Checks that a batch gives every column once, values of the column's type, all of one
/// length; returns the length.
fn check_batch(root: &Path, columns: &[Column], batch: &[(String, Values)]) -> Result<u64> {
    let mut len = None;
    for c in columns
        .iter()
        .filter(|c| c.leaf.dict != schema::DictPart::Entries)
    {
        let mut given = batch.iter().filter(|(n, _)| *n == c.leaf.path);
        let Some((_, v)) = given.next() else {
            return Err(Error::InvalidArgument(format!(
                "an append needs every column; missing: {}",
                c.leaf.path
            )));
        };
        if given.next().is_some() {
            return Err(Error::InvalidArgument(format!(
                "column {} given twice",
                c.leaf.path
            )));
        }
        if !c.accepts(v) {
            return Err(values_mismatch(root, c));
        }
        let n = v.len() as u64;
        if *len.get_or_insert(n) != n {
            return Err(Error::Mismatch {
                dataset: root.to_path_buf(),
                reason: format!(
                    "column {} has {n} values, others have {}",
                    c.leaf.path,
                    len.unwrap_or(0)
                ),
            });
        }
    }
    if batch.len() > columns.len() {
        let unknown: Vec<&str> = batch
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| !columns.iter().any(|c| c.leaf.path == *n))
            .collect();
        return Err(Error::InvalidArgument(format!(
            "no such column: {}",
            unknown.join(", ")
        )));
    }
    Ok(len.unwrap_or(0))
}

/// The rows appended to one column over many batches of one transaction: whole chunks are
/// written as soon as they are complete, the rest is carried to the next batch.
struct ColumnStream<'c> {
    column: &'c Column,
    writes: ChunkWrites<'c>,
    /// Rows written so far (the column's committed rows included).
    written: u64,
    /// Rows after `written`, fewer than reach the next chunk boundary.
    carry: Values,
}

impl<'c> ColumnStream<'c> {
    fn new(column: &'c Column, nrows: u64) -> ColumnStream<'c> {
        let cl = column.leaf.storage.chunklen;
        let rewrite_from = (!nrows.is_multiple_of(cl)).then(|| nrows / cl);
        let carry = column.empty_values();
        ColumnStream {
            column,
            writes: ChunkWrites::new(column.store(), column.nchunks(nrows), rewrite_from),
            written: nrows,
            carry,
        }
    }

    /// Takes the next values of the column (`nrows`: the rows committed before).
    fn push(&mut self, txn: &mut Txn<'_>, nrows: u64, v: Values) -> Result<()> {
        let cl = self.column.leaf.storage.chunklen.max(1);
        self.carry.extend(v)?;
        let end = self.written + self.carry.len() as u64;
        let boundary = end / cl * cl;
        if boundary > self.written {
            let rest = self.carry.split_off((boundary - self.written) as usize);
            let ready = std::mem::replace(&mut self.carry, rest);
            self.write(txn, nrows, &ready)?;
        }
        Ok(())
    }

    fn write(&mut self, txn: &mut Txn<'_>, nrows: u64, v: &Values) -> Result<()> {
        let c = self.column;
        let start = self.written;
        let end = start + v.len() as u64;
        match (&c.engine, v) {
            (Engine::Fixed(core), Values::Fixed { data, .. }) => {
                let sel = [AxisSel {
                    start,
                    step: 1,
                    count: v.len() as u64,
                    reversed: false,
                    keep: true,
                }];
                let committed = c.nchunks(nrows);
                core.write(
                    txn,
                    &mut self.writes,
                    committed,
                    &sel,
                    &[end],
                    Source::Data(data),
                )?;
            }
            (Engine::Var(var), Values::Var(items)) => {
                var.write(txn, &mut self.writes, nrows, start, items)?;
            }
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "values do not fit column {}",
                    c.leaf.path
                )))
            }
        }
        self.written = end;
        Ok(())
    }

    /// Writes what is carried and returns the column's path with its byte deltas.
    fn finish(mut self, txn: &mut Txn<'_>, nrows: u64) -> Result<(String, (i64, i64))> {
        if !self.carry.is_empty() {
            let last = std::mem::replace(&mut self.carry, self.column.empty_values());
            self.write(txn, nrows, &last)?;
        }
        Ok((self.column.leaf.path.clone(), self.writes.finish_both(txn)?))
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

fn pick<T: Clone>(a: &Option<T>, b: &Option<T>) -> Option<T> {
    a.clone().or_else(|| b.clone())
}

fn leaf_storage(
    kind: LeafKind,
    opts: &ColumnOptions,
    defaults: &ColumnOptions,
    expected: u64,
    file_bytes: u64,
) -> Result<ColumnStorage> {
    let (compression, chunklen) = match kind {
        LeafKind::Fixed(dtype) => {
            let probe = CreateOptions {
                chunkshape: pick(&opts.chunklen, &defaults.chunklen).map(|c| vec![c]),
                superchunksize: pick(&opts.superchunksize, &defaults.superchunksize),
                compression: pick(&opts.compression, &defaults.compression).unwrap_or_default(),
                expectedlen: Some(expected),
                fill: pick(&opts.fill, &defaults.fill).unwrap_or(serde_json::Value::Null),
                ..Default::default()
            };
            let m = build_storage_meta(dtype, &[0], &probe, file_bytes)?;
            return Ok(ColumnStorage {
                endianness: Endianness::native(),
                chunklen: m.chunkshape[0],
                superchunksize: m.superchunksize,
                compression: m.compression,
                checksum: pick(&opts.checksum, &defaults.checksum).unwrap_or(Checksum::Crc32),
                slack: pick(&opts.slack, &defaults.slack).unwrap_or(0),
                dflt: m.dflt,
                id: Some(meta::new_id()),
            });
        }
        LeafKind::VarStr | LeafKind::VarBytes => (
            pick(&opts.compression, &defaults.compression).unwrap_or(Compression {
                codec: crate::blosc::Codec::Zstd,
                clevel: 1,
                filters: vec![],
                mantissa_bits: None,
                blocksize: 0,
            }),
            pick(&opts.chunklen, &defaults.chunklen).unwrap_or(DEFAULT_VAR_CHUNKLEN),
        ),
    };
    if chunklen == 0 {
        return Err(Error::InvalidArgument("chunklen must be at least 1".into()));
    }
    if compression.filters.contains(&FilterName::Truncate) {
        return Err(Error::InvalidArgument(
            "the truncate filter applies to float columns only".into(),
        ));
    }
    compression.validate(DType::U8)?;
    let dflt = pick(&opts.fill, &defaults.fill).unwrap_or(serde_json::json!(""));
    if !dflt.is_string() {
        return Err(Error::InvalidArgument(format!(
            "fill value {dflt} of a variable-length column must be a string"
        )));
    }
    Ok(ColumnStorage {
        endianness: Endianness::native(),
        chunklen,
        superchunksize: pick(&opts.superchunksize, &defaults.superchunksize)
            .unwrap_or(256)
            .max(1),
        compression,
        checksum: pick(&opts.checksum, &defaults.checksum).unwrap_or(Checksum::Crc32),
        slack: pick(&opts.slack, &defaults.slack).unwrap_or(0),
        dflt,
        id: Some(meta::new_id()),
    })
}

/// The columns' specs; `file_bytes` as [`build_storage_meta`] takes it.
fn to_specs(
    fields: &[Field],
    defaults: &ColumnOptions,
    expected: u64,
    file_bytes: u64,
) -> Result<Vec<FieldSpec>> {
    fields
        .iter()
        .map(|f| {
            let mut dictionary = None;
            let (dtype, storage) = match &f.kind {
                FieldKind::Struct(sub) => (
                    FieldType::Struct(to_specs(sub, defaults, expected, file_bytes)?),
                    None,
                ),
                k => {
                    let lk = match k {
                        FieldKind::Scalar(d) => LeafKind::Fixed(*d),
                        FieldKind::VarStr => LeafKind::VarStr,
                        _ => LeafKind::VarBytes,
                    };
                    if let Some((codes, d)) = dict::new_spec(f, defaults, expected, file_bytes)? {
                        dictionary = Some(d);
                        (FieldType::Leaf(lk.name()), Some(codes))
                    } else {
                        (
                            FieldType::Leaf(lk.name()),
                            Some(leaf_storage(
                                lk, &f.options, defaults, expected, file_bytes,
                            )?),
                        )
                    }
                }
            };
            let nullable =
                storage.is_some() && pick(&f.options.nullable, &defaults.nullable).unwrap_or(false);
            let validity = storage
                .as_ref()
                .filter(|_| nullable)
                .map(nulls::validity_storage);
            Ok(FieldSpec {
                name: f.name.clone(),
                dtype,
                pandas: storage.as_ref().and(f.options.pandas.clone()),
                timezone: schema::field_zone(f)?,
                storage,
                validity,
                dictionary,
            })
        })
        .collect()
}

/// The column `leaf` of the table at `root`; with `table_id` (the table's identity) and the
/// column's own, its superchunk files are checked to be this column's.
fn build_column(
    storage: Arc<dyn Storage>,
    root: &Path,
    leaf: Leaf,
    table_id: Option<&str>,
) -> Result<Column> {
    let dir = PathBuf::from("data").join(&leaf.path);
    let st = &leaf.storage;
    if st.chunklen == 0 || st.superchunksize == 0 {
        return Err(Error::metadata(
            MetaPaths::new(root).storage(),
            format!(
                "column {}: chunklen and superchunksize must be positive",
                leaf.path
            ),
        ));
    }
    let engine = match leaf.stored_kind() {
        LeafKind::Fixed(dtype) => {
            st.compression.validate(dtype).map_err(|e| {
                Error::metadata(
                    MetaPaths::new(root).storage(),
                    format!("column {}: {e}", leaf.path),
                )
            })?;
            if (st.chunklen as u128) * (dtype.itemsize() as u128)
                > crate::blosc::MAX_BUFFERSIZE as u128
            {
                return Err(Error::metadata(
                    MetaPaths::new(root).storage(),
                    format!("column {}: chunks exceed Blosc's 2 GB limit", leaf.path),
                ));
            }
            Engine::Fixed(ArrayCore {
                store: ChunkStore::new(
                    storage,
                    root,
                    dir,
                    st.superchunksize,
                    st.checksum,
                    st.slack,
                    dtype.typesize() as u8,
                ),
                dtype,
                endian: st.endianness,
                chunkshape: vec![st.chunklen],
                compression: st.compression.clone(),
                fill: value_to_bytes(&st.dflt, dtype, Endianness::native())?,
            })
        }
        LeafKind::VarStr | LeafKind::VarBytes => {
            let mut store = ChunkStore::new(
                storage,
                root,
                dir,
                st.superchunksize,
                st.checksum,
                st.slack,
                1,
            );
            store.set_varlen(true);
            Engine::Var(VarCore {
                store,
                chunklen: st.chunklen,
                compression: st.compression.clone(),
            })
        }
    };
    let mut column = Column {
        leaf,
        engine,
        entries: dict::EntriesCache::default(),
    };
    if let (Some(t), Some(c)) = (table_id, column.leaf.storage.id.clone()) {
        match &mut column.engine {
            Engine::Fixed(core) => {
                core.store.bind(t, &c);
                core.store.set_stats(crate::stats::StatKind::of(core.dtype));
            }
            Engine::Var(v) => v.store.bind(t, &c),
        }
    }
    Ok(column)
}

fn fill_items(leaf: &Leaf, n: usize) -> Vec<Vec<u8>> {
    let s = leaf.storage.dflt.as_str().unwrap_or("").as_bytes().to_vec();
    vec![s; n]
}

impl Table {
    /// Creates an empty table.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for bad or duplicate column names or options; I/O errors.
    pub fn create(
        path: impl AsRef<Path>,
        fields: Vec<Field>,
        opts: &TableOptions,
    ) -> Result<Table> {
        let (s, root) = storage::for_new_path(path.as_ref(), opts.overwrite)?;
        Self::create_in(s, &root, fields, opts)
    }

    /// As [`Table::create`], on a given storage backend.
    ///
    /// # Errors
    /// As [`Table::create`].
    pub fn create_in(
        storage: Arc<dyn Storage>,
        root: &Path,
        fields: Vec<Field>,
        opts: &TableOptions,
    ) -> Result<Table> {
        Self::create_from(
            storage,
            root,
            fields,
            opts,
            std::iter::empty::<Result<Vec<(String, Values)>>>(),
        )
    }

    /// Creates a table at `root` and appends every batch (as
    /// [`append_batches`](Self::append_batches) takes them), as one step: the table is built
    /// in a staging directory beside `root` and renamed into place when complete, so a
    /// failure or a kill leaves no table behind. Returns the table, open for writing.
    ///
    /// # Errors
    /// As [`Table::create_in`] and [`Table::append_batches`]; [`Error::Locked`] while another
    /// process creates a dataset at `root`.
    pub fn create_from<I, V>(
        storage: Arc<dyn Storage>,
        root: &Path,
        fields: Vec<Field>,
        opts: &TableOptions,
        batches: I,
    ) -> Result<Table>
    where
        I: IntoIterator<Item = Result<Vec<(String, V)>>>,
        V: Into<NullableValues>,
    {
        schema::check_fields(&fields)?;
        let expected = opts.expectedlen.unwrap_or(0);
        let meta = TableStorage {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            kind: "table".into(),
            dtype: to_specs(
                &fields,
                &opts.defaults,
                expected,
                crate::engine::file_bytes(storage.as_ref()),
            )?,
            expectedlen: expected,
            id: Some(meta::new_id()),
        };
        let leaves = schema::leaves(&meta.dtype)?;
        let is_table =
            |p: &Path| meta::dataset_kind(storage.as_ref(), p) == Some(meta::Kind::Table);
        let staging = Staging::begin(&storage, root, opts.overwrite, &is_table, "a table")?;
        let dir = staging.dir().to_path_buf();
        let build = staging.build_storage();
        let mp = MetaPaths::new(&dir);
        build.create_dir_all(&dir.join("data"))?;
        meta::write_json(build.as_ref(), &mp.storage(), &meta)?;
        meta::write_json(
            build.as_ref(),
            &mp.attributes(),
            &serde_json::Value::Object(opts.attributes.clone()),
        )?;
        let sizes = Sizes {
            shape: vec![0],
            nbytes: 0,
            cbytes: 0,
            generation: 0,
            rewritten: Some(0),
            stats: Some(0),
            nrows: Some(0),
            columns: Some(
                leaves
                    .iter()
                    .map(|l| {
                        (
                            l.path.clone(),
                            ColumnSizes {
                                nbytes: 0,
                                cbytes: 0,
                                rows: (l.dict == schema::DictPart::Entries).then_some(0),
                            },
                        )
                    })
                    .collect(),
            ),
        };
        meta::write_json(build.as_ref(), &mp.sizes(), &sizes)?;
        let mut staged = Self::open_with(build.clone(), &dir, Mode::ReadWrite, true)?;
        staged.seed_dictionaries(&fields, "")?;
        staged.append_batches(batches)?;
        let lock = staging.publish()?;
        let mut table = Self::open_with(storage, root, Mode::ReadWrite, true)?;
        table.root.hold(lock);
        Ok(table)
    }

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

    /// Reads rows `start..end` of one column; only that column's files are opened.
    ///
    /// # Errors
    /// Unknown column, rows out of range, corrupt chunks.
    pub fn column_rows(&self, name: &str, start: u64, end: u64) -> Result<Values> {
        self.check_range(start, end)?;
        let c = self.col(name)?;
        self.unless_changed(self.read_column(c, start, end))
    }

    /// Reads rows `start..end` of a fixed-size column into a buffer the caller allocated
    /// (native-endian elements, `(end - start) * itemsize` bytes), decoding the chunks in
    /// parallel straight into it; only that column's files are opened. A client that owns its
    /// arrays (numpy, Arrow) allocates the result once and has blz fill it.
    ///
    /// # Errors
    /// As [`Table::column_rows`]; [`Error::InvalidArgument`] for a variable-length column;
    /// [`Error::Mismatch`] when `out` is not exactly the rows' size in bytes.
    pub fn column_rows_into(&self, name: &str, start: u64, end: u64, out: &mut [u8]) -> Result<()> {
        self.check_range(start, end)?;
        let core = self.fixed_core(name)?;
        let want = (end - start).saturating_mul(core.itemsize() as u64);
        if out.len() as u64 != want {
            return Err(Error::Mismatch {
                dataset: self.root.to_path_buf(),
                reason: format!(
                    "a buffer of {} bytes given for {} rows of column {name} ({want} bytes)",
                    out.len(),
                    end - start
                ),
            });
        }
        if start == end {
            return Ok(());
        }
        let sel = [AxisSel {
            start,
            step: 1,
            count: end - start,
            reversed: false,
            keep: true,
        }];
        self.unless_changed(core.read_into(&sel, &[self.nrows()], out))
    }

    /// Reads rows `start..end` of several columns at once: each fixed-size column of `into`
    /// straight into its caller's buffer (as [`Table::column_rows_into`]), and returns the
    /// values of the columns of `values` (any kind, in that order). Every column's chunks
    /// are decoded in one parallel pass: the columns run side by side on the rayon pool, and
    /// so do the chunks of each, so a table of several small columns reads as fast as one
    /// large column.
    ///
    /// # Errors
    /// As [`Table::column_rows_into`] and [`Table::column_rows`]; the first error met.
    pub fn read_columns(
        &self,
        start: u64,
        end: u64,
        into: &mut [(&str, &mut [u8])],
        values: &[&str],
    ) -> Result<Vec<Values>> {
        use rayon::prelude::*;
        let (filled, read) = rayon::join(
            || {
                into.par_iter_mut()
                    .try_for_each(|(name, out)| self.column_rows_into(name, start, end, out))
            },
            || {
                values
                    .par_iter()
                    .map(|name| self.column_rows(name, start, end))
                    .collect::<Result<Vec<Values>>>()
            },
        );
        filled?;
        read
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

    fn read_column(&self, c: &Column, start: u64, end: u64) -> Result<Values> {
        if c.leaf.is_dictionary() {
            return self.dict_rows(c, start, end);
        }
        let n = self.nrows();
        if end - start > LARGE_READ_ROWS {
            // Before a buffer as large as the rows is made: the file holding the last of
            // them exists (a row count read from disk is not trusted to size memory).
            if let Some(last) = c.missing_file_of_row(self.root.storage.as_ref(), end - 1) {
                return Err(Error::metadata(
                    MetaPaths::new(&self.root).sizes(),
                    format!(
                        "{n} rows need {}, which does not exist",
                        last.strip_prefix(&self.root).unwrap_or(&last).display()
                    ),
                ));
            }
        }
        match &c.engine {
            Engine::Fixed(core) => {
                let sel = [AxisSel {
                    start,
                    step: 1,
                    count: end - start,
                    reversed: false,
                    keep: true,
                }];
                let mut data = vec![0u8; ((end - start) as usize) * core.itemsize()];
                core.read_into(&sel, &[n], &mut data)?;
                Ok(Values::Fixed {
                    dtype: core.dtype,
                    data,
                })
            }
            Engine::Var(v) => Ok(Values::Var(v.read_rows(n, start, end)?)),
        }
    }

    /// Reads rows `start..end` of a variable-length column as, per chunk in row order, the
    /// items' lengths and their bytes back to back: no allocation per item (Arrow's string
    /// arrays are built from these).
    ///
    /// # Errors
    /// As [`Table::column_rows`]; [`Error::InvalidArgument`] for a fixed-size column.
    #[cfg(feature = "arrow")]
    pub(crate) fn var_rows_flat(
        &self,
        name: &str,
        start: u64,
        end: u64,
    ) -> Result<Vec<(Vec<u32>, Vec<u8>)>> {
        self.check_range(start, end)?;
        let c = self.col(name)?;
        if c.leaf.is_dictionary() {
            return self.dict_rows_flat(c, start, end);
        }
        match &c.engine {
            Engine::Var(v) => self.unless_changed(v.read_rows_flat(self.nrows(), start, end)),
            Engine::Fixed(_) => Err(Error::InvalidArgument(format!(
                "column {name} holds fixed-size values, not variable-length ones"
            ))),
        }
    }

    /// Reads a whole column.
    ///
    /// # Errors
    /// As [`Table::column_rows`].
    pub fn column(&self, name: &str) -> Result<Values> {
        self.column_rows(name, 0, self.nrows())
    }

    /// Reads a whole fixed-size column as an array.
    ///
    /// # Errors
    /// As [`Table::column_rows`], and a type mismatch.
    pub fn column_array<T: Element>(&self, name: &str) -> Result<Array1<T>> {
        Ok(Array1::from(self.column(name)?.to_vec::<T>()?))
    }

    /// Reads rows `start..end` of several columns (all when `names` is `None`), as records in
    /// column form.
    ///
    /// # Errors
    /// As [`Table::column_rows`].
    pub fn rows(
        &self,
        start: u64,
        end: u64,
        names: Option<&[&str]>,
    ) -> Result<Vec<(String, Values)>> {
        let names: Vec<&str> = names.map_or_else(|| self.column_names(), |n| n.to_vec());
        let values = self.read_columns(start, end, &mut [], &names)?;
        Ok(names.iter().map(|n| n.to_string()).zip(values).collect())
    }

    /// Reads the rows at `indices` (any order, repeats allowed) of several columns. A
    /// fixed-size column decodes only the chunks holding them, in parallel, straight into
    /// its result; [`Table::put`] writes rows by index.
    ///
    /// # Errors
    /// As [`Table::column_rows`].
    pub fn take(&self, indices: &[u64], names: Option<&[&str]>) -> Result<Vec<(String, Values)>> {
        let n = self.nrows();
        if let Some(&bad) = indices.iter().find(|&&i| i >= n) {
            return Err(Error::OutOfBounds {
                dataset: self.root.to_path_buf(),
                reason: format!("row {bad} outside 0..{n}"),
            });
        }
        let names: Vec<&str> = names.map_or_else(|| self.column_names(), |n| n.to_vec());
        let taken = names
            .iter()
            .map(|name| {
                let c = self.col(name)?;
                let v = match &c.engine {
                    _ if c.leaf.is_dictionary() => self.dict_take(c, indices)?,
                    Engine::Fixed(core) => Values::Fixed {
                        dtype: core.dtype,
                        data: core.take_rows(n, indices)?,
                    },
                    Engine::Var(v) => Values::Var(v.take(n, indices)?),
                };
                Ok((name.to_string(), v))
            })
            .collect();
        self.unless_changed(taken)
    }

    fn check_values(&self, c: &Column, v: &Values) -> Result<()> {
        if c.accepts(v) {
            Ok(())
        } else {
            Err(values_mismatch(&self.root, c))
        }
    }

    /// Runs a multi-column operation in one transaction and commits the new sizes (and, for
    /// schema changes, the new storage document).
    /// `rewrites`: the operation changes rows the table already has (see
    /// [`Sizes::rewritten`]); a shrink and a schema change always do.
    fn run<F>(
        &mut self,
        nrows: u64,
        new_meta: Option<TableStorage>,
        rewrites: bool,
        f: F,
    ) -> Result<()>
    where
        F: FnOnce(&[Column], &mut Txn<'_>) -> Result<BTreeMap<String, (i64, i64)>>,
    {
        self.run_to(new_meta, rewrites, |columns, txn, _| {
            Ok((f(columns, txn)?, nrows))
        })
    }

    /// As [`run`](Self::run), with the number of rows after the operation returned by `f`,
    /// which also records the new row counts of the dictionaries it extends.
    fn run_to<F>(&mut self, new_meta: Option<TableStorage>, rewrites: bool, f: F) -> Result<()>
    where
        F: FnOnce(&[Column], &mut Txn<'_>, &mut RowCounts) -> Result<(ByteDeltas, u64)>,
    {
        // A read-only handle fails here, before anything (nor the handle) is touched.
        self.check_writable()?;
        let result = self.root.transact(|txn| {
            let mut counts = BTreeMap::new();
            let (deltas, nrows) = f(&self.columns, txn, &mut counts)?;
            let mut cols = self.sizes.columns.clone().unwrap_or_default();
            let leaves = match &new_meta {
                Some(m) => schema::leaves(&m.dtype)?,
                None => self.columns.iter().map(|c| c.leaf.clone()).collect(),
            };
            cols.retain(|k, _| leaves.iter().any(|l| &l.path == k));
            for l in &leaves {
                let e = cols.entry(l.path.clone()).or_insert(ColumnSizes {
                    nbytes: 0,
                    cbytes: 0,
                    rows: (l.dict == schema::DictPart::Entries).then_some(0),
                });
                if let Some(&r) = counts.get(&l.path) {
                    e.rows = Some(r);
                }
                let (dc, dn) = deltas.get(&l.path).copied().unwrap_or((0, 0));
                e.cbytes = (e.cbytes as i64 + dc).max(0) as u64;
                e.nbytes = match l.stored_kind() {
                    LeafKind::Fixed(d) => nrows * d.itemsize() as u64,
                    _ => (e.nbytes as i64 + dn).max(0) as u64,
                };
            }
            let sizes = Sizes {
                shape: vec![nrows],
                nbytes: cols.values().map(|c| c.nbytes).sum(),
                cbytes: cols.values().map(|c| c.cbytes).sum(),
                nrows: Some(nrows),
                columns: Some(cols),
                generation: self.sizes.generation + 1,
                stats: self.sizes.next_stats(),
                rewritten: self.sizes.next_rewritten(
                    rewrites || new_meta.is_some() || nrows < self.sizes.nrows.unwrap_or(0),
                ),
            };
            if let Some(m) = &new_meta {
                txn.put_meta(Path::new("meta/storage"), meta::to_json_bytes(m));
            }
            txn.put_meta(Path::new("meta/sizes"), meta::to_json_bytes(&sizes));
            Ok(sizes)
        });
        for c in &self.columns {
            c.store().invalidate();
        }
        match result {
            Ok(sizes) => {
                self.sizes = sizes;
                if let Some(m) = new_meta {
                    self.reload_schema(m)?;
                }
                Ok(())
            }
            Err(e) => {
                if let Some(s) = self.root.resettle::<Sizes>() {
                    self.sizes = s;
                    let mp = MetaPaths::new(&self.root);
                    if let Ok(m) =
                        meta::read_json::<TableStorage>(self.root.storage.as_ref(), &mp.storage())
                    {
                        let _ = self.reload_schema(m);
                    }
                }
                Err(e)
            }
        }
    }

    fn reload_schema(&mut self, m: TableStorage) -> Result<()> {
        let leaves = schema::leaves(&m.dtype)?;
        self.columns = leaves
            .into_iter()
            .map(|l| build_column(self.root.storage.clone(), &self.root, l, m.id.as_deref()))
            .collect::<Result<_>>()?;
        self.meta = m;
        Ok(())
    }

    /// Writes rows `start..` of the given columns inside a transaction (appending past
    /// `nrows`). Returns per-column byte deltas.
    fn write_columns(
        columns: &[Column],
        txn: &mut Txn<'_>,
        nrows: u64,
        start: u64,
        data: &[(&Column, &Values)],
        fill_rows: u64,
    ) -> Result<BTreeMap<String, (i64, i64)>> {
        let mut deltas = BTreeMap::new();
        let _ = columns;
        for (c, v) in data {
            let committed = c.nchunks(nrows);
            let cl = c.leaf.storage.chunklen;
            let end = start + v.len() as u64 + fill_rows;
            let appending = end > nrows;
            let rewrite_from = (appending && !nrows.is_multiple_of(cl)).then(|| nrows / cl);
            let mut w = ChunkWrites::new(c.store(), committed, rewrite_from);
            let new_rows = end.max(nrows);
            match (&c.engine, v) {
                (Engine::Fixed(core), Values::Fixed { data, .. }) => {
                    let sel = [AxisSel {
                        start,
                        step: 1,
                        count: v.len() as u64 + fill_rows,
                        reversed: false,
                        keep: true,
                    }];
                    let src = if fill_rows > 0 {
                        Source::Fill
                    } else {
                        Source::Data(data)
                    };
                    core.write(txn, &mut w, committed, &sel, &[new_rows], src)?;
                }
                (Engine::Var(var), Values::Var(items)) => {
                    if fill_rows > 0 {
                        let fill = fill_items(&c.leaf, fill_rows as usize);
                        var.write(txn, &mut w, nrows, start, &fill)?;
                    } else {
                        var.write(txn, &mut w, nrows, start, items)?;
                    }
                }
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "values do not fit column {}",
                        c.leaf.path
                    )))
                }
            }
            deltas.insert(c.leaf.path.clone(), w.finish_both(txn)?);
        }
        Ok(deltas)
    }

    fn gather<'a>(
        &'a self,
        cols: &'a [(&'a str, &'a Values)],
        all: bool,
    ) -> Result<(Vec<(&'a Column, &'a Values)>, u64)> {
        let mut out = Vec::new();
        let mut len = None;
        let mut seen = std::collections::HashSet::new();
        for &(name, v) in cols {
            let c = self.col_any(name)?;
            if !seen.insert(name) {
                return Err(Error::InvalidArgument(format!("column {name} given twice")));
            }
            self.check_values(c, v)?;
            let n = v.len() as u64;
            if *len.get_or_insert(n) != n {
                return Err(Error::Mismatch {
                    dataset: self.root.to_path_buf(),
                    reason: format!(
                        "column {name} has {n} values, others have {}",
                        len.unwrap_or(0)
                    ),
                });
            }
            out.push((c, v));
        }
        let dictionaries = self
            .columns
            .iter()
            .filter(|c| c.leaf.dict == schema::DictPart::Entries)
            .count();
        if all && out.len() + dictionaries != self.columns.len() {
            let missing: Vec<&str> = self
                .column_names()
                .into_iter()
                .filter(|n| !cols.iter().any(|(m, _)| m == n))
                .collect();
            return Err(Error::InvalidArgument(format!(
                "an append needs every column; missing: {}",
                missing.join(", ")
            )));
        }
        Ok((out, len.unwrap_or(0)))
    }

    /// Turns gathered (column, values) pairs into (column index, values index) pairs, which
    /// outlive the borrow of `self` that [`Table::run`] needs.
    fn indices(
        &self,
        data: &[(&Column, &Values)],
        cols: &[(&str, &Values)],
    ) -> Vec<(usize, usize)> {
        data.iter()
            .map(|(c, v)| {
                (
                    self.columns
                        .iter()
                        .position(|x| std::ptr::eq(x, *c))
                        .unwrap_or(0),
                    cols.iter()
                        .position(|(_, x)| std::ptr::eq(*x, *v))
                        .unwrap_or(0),
                )
            })
            .collect()
    }

    /// Writes the gathered columns at row `start` in one transaction; the table then has
    /// `new_rows` rows.
    fn write_gathered(
        &mut self,
        data: &[(usize, usize)],
        cols: &[(&str, &Values)],
        start: u64,
        new_rows: u64,
        enc: &dict::Encoder,
    ) -> Result<()> {
        let nrows = self.nrows();
        self.run_to(None, start < nrows, |columns, txn, counts| {
            let pairs: Vec<(&Column, &Values)> = data
                .iter()
                .map(|&(ci, vi)| (&columns[ci], cols[vi].1))
                .collect();
            let mut deltas = Self::write_columns(columns, txn, nrows, start, &pairs, 0)?;
            enc.write_entries(columns, txn, &mut deltas, counts)?;
            Ok((deltas, new_rows))
        })
    }

    /// Appends rows: one [`Values`] per leaf column, all of the same length. Atomic across
    /// columns.
    ///
    /// # Errors
    /// Missing, unknown or duplicate columns, unequal lengths, wrong types; I/O errors (the
    /// table then keeps its last committed state).
    pub fn append<V: ColumnValues>(&mut self, cols: &[(&str, V)]) -> Result<()> {
        let _turn = self.turn()?;
        let mut enc = dict::Encoder::new(self)?;
        let expanded = expand(&self.root, &self.columns, &mut enc, cols)?;
        let cols = &refs(&expanded);
        let (data, n) = self.gather(cols, true)?;
        if n == 0 {
            return Ok(());
        }
        let data = self.indices(&data, cols);
        let nrows = self.nrows();
        self.write_gathered(&data, cols, nrows, nrows + n, &enc)
    }

    /// Appends every batch (one [`Values`] per leaf column, all of one length within a
    /// batch) in one transaction across all columns: readers see none of the rows until the
    /// commit at the end, and a failure or a kill at any point leaves the table as it was.
    /// Memory stays at one batch and less than a chunk of each column besides: whole chunks
    /// are encoded and written as batches arrive. Returns the number of rows appended.
    ///
    /// # Errors
    /// As [`Table::append`] for each batch, and the first error a batch itself carries. On
    /// error nothing of the batches is kept.
    pub fn append_batches<I, V>(&mut self, batches: I) -> Result<u64>
    where
        I: IntoIterator<Item = Result<Vec<(String, V)>>>,
        V: Into<NullableValues>,
    {
        let _turn = self.turn()?;
        self.check_writable()?;
        let nrows = self.nrows();
        let root = self.root.to_path_buf();
        let mut enc = dict::Encoder::new(self)?;
        self.run_to(None, false, |columns, txn, counts| {
            // A dictionary gets its new entries at the end, from the encoder.
            let mut streams: Vec<Option<ColumnStream<'_>>> = columns
                .iter()
                .map(|c| {
                    (c.leaf.dict != schema::DictPart::Entries).then(|| ColumnStream::new(c, nrows))
                })
                .collect();
            let mut rows = nrows;
            for batch in batches {
                let batch = expand_owned(&root, columns, &mut enc, batch?)?;
                let n = check_batch(&root, columns, &batch)?;
                for (name, v) in batch {
                    let i = columns
                        .iter()
                        .position(|c| c.leaf.path == name)
                        .ok_or_else(|| Error::InvalidArgument(format!("no column {name}")))?;
                    if let Some(Some(s)) = streams.get_mut(i) {
                        s.push(txn, nrows, v)?;
                    }
                }
                rows += n;
            }
            let mut deltas = BTreeMap::new();
            for s in streams.into_iter().flatten() {
                let (path, d) = s.finish(txn, nrows)?;
                deltas.insert(path, d);
            }
            enc.write_entries(columns, txn, &mut deltas, counts)?;
            Ok((deltas, rows))
        })?;
        Ok(self.nrows() - nrows)
    }

    /// Overwrites rows `start..start + len` of the given columns (a subset is fine). Atomic
    /// across columns.
    ///
    /// # Errors
    /// As [`Table::append`], and rows outside the table.
    pub fn write_rows<V: ColumnValues>(&mut self, start: u64, cols: &[(&str, V)]) -> Result<()> {
        let _turn = self.turn()?;
        let mut enc = dict::Encoder::new(self)?;
        let expanded = expand(&self.root, &self.columns, &mut enc, cols)?;
        let cols = &refs(&expanded);
        let (data, n) = self.gather(cols, false)?;
        self.check_range(start, start + n)?;
        if n == 0 {
            return Ok(());
        }
        let data = self.indices(&data, cols);
        let nrows = self.nrows();
        self.write_gathered(&data, cols, start, nrows, &enc)
    }

    /// Sets the number of rows: shrinking drops rows of every column, growing fills every
    /// column with its fill value. Atomic across columns.
    ///
    /// # Errors
    /// [`Error::ReadOnly`], I/O errors.
    pub fn resize(&mut self, rows: u64) -> Result<()> {
        let _turn = self.turn()?;
        let nrows = self.nrows();
        if rows == nrows {
            return Ok(());
        }
        if rows > nrows {
            let what = format!("growing {} to {rows} rows", self.root.display());
            if rows - nrows > crate::MAX_TABLE_FILL_ROWS {
                return Err(Error::InvalidArgument(format!(
                    "{what} would add {} rows of fill values; a table resize adds at most {} \
                     (grow in steps, or append the rows)",
                    rows - nrows,
                    crate::MAX_TABLE_FILL_ROWS
                )));
            }
            for c in &self.columns {
                let isz = match c.leaf.kind {
                    crate::column::LeafKind::Fixed(d) => d.itemsize() as u64,
                    _ => 1,
                };
                crate::engine::limits::shape_bytes(&[rows], isz, &what)?;
            }
        }
        self.run(rows, None, false, |columns, txn| {
            let mut deltas = BTreeMap::new();
            if rows < nrows {
                // A dictionary keeps its entries: codes of the rows kept index them.
                for c in columns
                    .iter()
                    .filter(|c| c.leaf.dict != schema::DictPart::Entries)
                {
                    let cl = c.leaf.storage.chunklen;
                    // A variable-length chunk cut in the middle is written again with only
                    // the rows it keeps, so that no dropped item lingers in it and the
                    // column's nbytes stays the size of its rows.
                    let cut = match &c.engine {
                        Engine::Var(var) if !rows.is_multiple_of(cl) => Some((var, rows / cl)),
                        _ => None,
                    };
                    let mut w = ChunkWrites::new(c.store(), c.nchunks(nrows), cut.map(|(_, k)| k));
                    if let Some((var, k)) = cut {
                        let kept = var.read_rows(nrows, k * cl, rows)?;
                        var.write(txn, &mut w, rows, k * cl, &kept)?;
                    }
                    w.truncate(txn, c.nchunks(rows))?;
                    deltas.insert(c.leaf.path.clone(), w.finish_both(txn)?);
                }
            } else {
                let grown: Vec<&Column> = columns
                    .iter()
                    .filter(|c| c.leaf.dict != schema::DictPart::Entries)
                    .collect();
                let empties: Vec<Values> = grown.iter().map(|c| c.empty_values()).collect();
                let pairs: Vec<(&Column, &Values)> = grown.into_iter().zip(&empties).collect();
                deltas = Self::write_columns(columns, txn, nrows, nrows, &pairs, rows - nrows)?;
            }
            Ok(deltas)
        })
    }

    /// Adds a top-level field (a leaf or a structure), filled with its fill value for the
    /// existing rows.
    ///
    /// # Errors
    /// A bad or duplicate name, bad options, [`Error::ReadOnly`], I/O errors.
    pub fn add_column(&mut self, field: Field) -> Result<()> {
        let _turn = self.turn()?;
        schema::check_fields(std::slice::from_ref(&field))?;
        if self.meta.dtype.iter().any(|f| f.name == field.name) {
            return Err(Error::InvalidArgument(format!(
                "column {:?} already exists",
                field.name
            )));
        }
        let spec = to_specs(
            std::slice::from_ref(&field),
            &ColumnOptions::default(),
            self.nrows().max(self.meta.expectedlen),
            crate::engine::file_bytes(self.storage().as_ref()),
        )?;
        let mut meta = self.meta.clone();
        meta.dtype.extend(spec.iter().cloned());
        let new_leaves = schema::leaves(&spec)?;
        let nrows = self.nrows();
        let storage = self.root.storage.clone();
        let root = self.root.to_path_buf();
        // Leftovers of an earlier failed attempt would be mistaken for data.
        self.root
            .storage
            .remove_dir_all(&root.join("data").join(&field.name))?;
        let table_id = self.meta.id.clone();
        self.run(nrows, Some(meta), true, move |_, txn| {
            // A new dictionary starts empty: the rows hold the fill code.
            let cols: Vec<Column> = new_leaves
                .into_iter()
                .filter(|l| l.dict != schema::DictPart::Entries)
                .map(|l| build_column(storage.clone(), &root, l, table_id.as_deref()))
                .collect::<Result<_>>()?;
            let empties: Vec<Values> = cols.iter().map(Column::empty_values).collect();
            let pairs: Vec<(&Column, &Values)> = cols.iter().zip(&empties).collect();
            Self::write_columns(&cols, txn, 0, 0, &pairs, nrows)
        })
    }

    /// Drops a field (a top-level name, or `parent/name` for a nested one) and its files.
    ///
    /// # Errors
    /// Unknown field, dropping the last field of the table or of a structure,
    /// [`Error::ReadOnly`], I/O errors.
    pub fn drop_column(&mut self, path: &str) -> Result<()> {
        let _turn = self.turn()?;
        let mut meta = self.meta.clone();
        remove_spec(&mut meta.dtype, path)?;
        let nrows = self.nrows();
        let rel = PathBuf::from("data").join(path);
        self.run(nrows, Some(meta), true, move |_, txn| {
            txn.remove_dir(&rel);
            Ok(BTreeMap::new())
        })
    }

    /// Renames a field (a top-level name, or `parent/name` for a nested one) to `new_name`
    /// within its parent.
    ///
    /// # Errors
    /// Unknown field, a bad or taken name, [`Error::ReadOnly`], I/O errors.
    pub fn rename_column(&mut self, path: &str, new_name: &str) -> Result<()> {
        let _turn = self.turn()?;
        check_name(new_name)?;
        let mut meta = self.meta.clone();
        let (parent, old) = path.rsplit_once('/').map_or(("", path), |(p, n)| (p, n));
        let siblings = find_siblings(&mut meta.dtype, parent)?;
        if siblings.iter().any(|f| f.name == new_name) {
            return Err(Error::InvalidArgument(format!(
                "column {new_name:?} already exists"
            )));
        }
        let f = siblings
            .iter_mut()
            .find(|f| f.name == old)
            .ok_or_else(|| Error::InvalidArgument(format!("no field {path:?}")))?;
        f.name = new_name.to_string();
        let from = PathBuf::from("data").join(path);
        let to = PathBuf::from("data").join(parent).join(new_name);
        let nrows = self.nrows();
        let mut sizes_cols = self.sizes.columns.clone().unwrap_or_default();
        let renamed: Vec<(String, ColumnSizes)> = sizes_cols
            .iter()
            .filter(|(k, _)| *k == path || k.starts_with(&format!("{path}/")))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let new_prefix = if parent.is_empty() {
            new_name.to_string()
        } else {
            format!("{parent}/{new_name}")
        };
        for (k, v) in renamed {
            sizes_cols.remove(&k);
            sizes_cols.insert(format!("{new_prefix}{}", &k[path.len()..]), v);
        }
        self.sizes.columns = Some(sizes_cols);
        let exists = self.root.storage.exists(&self.root.join(&from));
        // A directory at the new name is a leftover of a failed operation (no committed
        // column has that name): remove it, or the rename would be skipped at apply.
        self.root.storage.remove_dir_all(&self.root.join(&to))?;
        self.run(nrows, Some(meta), true, move |_, txn| {
            if exists {
                txn.rename(&from, &to);
            }
            Ok(BTreeMap::new())
        })
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

fn find_siblings<'a>(
    specs: &'a mut Vec<FieldSpec>,
    parent: &str,
) -> Result<&'a mut Vec<FieldSpec>> {
    if parent.is_empty() {
        return Ok(specs);
    }
    let (head, rest) = parent.split_once('/').unwrap_or((parent, ""));
    let f = specs
        .iter_mut()
        .find(|f| f.name == head)
        .ok_or_else(|| Error::InvalidArgument(format!("no field {head:?}")))?;
    match &mut f.dtype {
        FieldType::Struct(sub) => find_siblings(sub, rest),
        FieldType::Leaf(_) => Err(Error::InvalidArgument(format!(
            "{head:?} is not a structure"
        ))),
    }
}

fn remove_spec(specs: &mut Vec<FieldSpec>, path: &str) -> Result<()> {
    let (parent, name) = path.rsplit_once('/').map_or(("", path), |(p, n)| (p, n));
    let siblings = find_siblings(specs, parent)?;
    let i = siblings
        .iter()
        .position(|f| f.name == name)
        .ok_or_else(|| Error::InvalidArgument(format!("no field {path:?}")))?;
    if siblings.len() == 1 {
        return Err(Error::InvalidArgument(format!(
            "{path:?} is the last field of {}; drop {} instead",
            if parent.is_empty() {
                "the table"
            } else {
                parent
            },
            if parent.is_empty() {
                "the dataset"
            } else {
                parent
            }
        )));
    }
    siblings.remove(i);
    Ok(())
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
