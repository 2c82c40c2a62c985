//! numpy `.npy` files in and out (the `npy` feature, on by default): datasets from `.npy`
//! arrays, tables from `.npy` records, and selections of either written back as `.npy`.
//!
//! A `.npy` file is a magic string, a version (1.0, 2.0 and 3.0 are read), a Python-literal
//! header dict (`{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }`, latin-1 in
//! versions 1 and 2, UTF-8 in 3) padded to a multiple of 64 bytes, then the raw elements in
//! C or Fortran order. blz parses the header itself so that every dtype it stores (numbers,
//! bool, complex, fixed-size `S<n>` and `U<n>` strings) is handled the same way in either
//! byte order, and object, datetime or float16 dtypes are refused with a clear message.
//! Records (structured dtypes, nested ones included) make tables, a column per leaf field.
//!
//! Files are read and written in bounded batches, so memory stays small whatever their
//! size; every failure is an [`Error`] naming the file.
//!
//! ```no_run
//! # fn main() -> blz::Result<()> {
//! use blz::{npy, CreateOptions};
//! let mut ds = npy::create_dataset("temps.npy", "temps.blz", &CreateOptions::default())?;
//! npy::append_dataset(&mut ds, "more_temps.npy")?;
//! npy::write_dataset(&ds, &blz::Selection::parse("::10")?.to_slice_info(ds.shape())?, "tenth.npy")?;
//! # Ok(())
//! # }
//! ```

mod header;
mod read;
mod write;

pub use header::{NpyHeader, RecordField};
pub use read::{read_all, NpyReader, RecordReader};
pub(crate) use write::NpyWriter;

use crate::error::{Error, Result};
use crate::ingest::{check_rows_fit, fields_from_leaves, reason};
use crate::ordered::{SelectionReader, TableRows, DEFAULT_BATCH_BYTES};
use crate::storage::{self, Storage};
use crate::table::{Field, LeafKind, Table, TableOptions, Values};
use crate::{CreateOptions, DType, Dataset, Endianness};
use ndarray::SliceInfoElem;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows of a table read at a time when writing `.npy` files.
const TABLE_BATCH_ROWS: u64 = 65536;

impl NpyReader {
    /// Checks that the file's array fits the dataset `ds`: the same dtype, and the same shape
    /// but for axis 0.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the file, saying what differs.
    pub fn check_fits(&self, ds: &Dataset) -> Result<()> {
        let dtype = ds.dtype();
        if self.dtype() != dtype {
            return Err(Error::input(
                self.path(),
                format!(
                    "holds {}, the dataset holds {dtype}; convert it first, e.g. arr.astype('{}')",
                    self.dtype(),
                    dtype.name()
                ),
            ));
        }
        check_rows_fit(self.path(), &self.header().shape, ds)
    }

    /// Creates a dataset at `root` on `storage` holding the file's array, as one step (see
    /// [`Dataset::create_from`]): reads `batch_bytes` at a time, telling `progress` the rows
    /// of each batch.
    ///
    /// # Errors
    /// As [`Dataset::create_from`] and [`NpyReader::next_rows`].
    pub fn create_dataset(
        mut self,
        storage: Arc<dyn Storage>,
        root: &Path,
        opts: &CreateOptions,
        batch_bytes: u64,
        progress: impl FnMut(u64),
    ) -> Result<Dataset> {
        let mut shape = vec![0u64];
        shape.extend_from_slice(self.row_shape());
        let dtype = self.dtype();
        Dataset::create_from(
            storage,
            root,
            dtype,
            &shape,
            opts,
            self.batches(batch_bytes, progress),
        )
    }

    /// Appends the file's rows to `ds` in one transaction, `batch_bytes` at a time, telling
    /// `progress` the rows of each batch. Returns the number of rows appended.
    ///
    /// # Errors
    /// As [`NpyReader::check_fits`] and [`Dataset::append_batches`].
    pub fn append_to(
        mut self,
        ds: &mut Dataset,
        batch_bytes: u64,
        progress: impl FnMut(u64),
    ) -> Result<u64> {
        self.check_fits(ds)?;
        ds.append_batches(self.batches(batch_bytes, progress))
    }
}

/// Creates a dataset at `root` (local storage) holding the array of the `.npy` file `npy`,
/// in one step: a failure leaves no dataset behind.
///
/// # Errors
/// As [`NpyReader::open`] and [`NpyReader::create_dataset`].
pub fn create_dataset(
    npy: impl AsRef<Path>,
    root: impl AsRef<Path>,
    opts: &CreateOptions,
) -> Result<Dataset> {
    let (s, root) = storage::for_path(root.as_ref())?;
    NpyReader::open(npy)?.create_dataset(s, &root, opts, DEFAULT_BATCH_BYTES, |_| {})
}

/// Appends the rows of the `.npy` file `npy` to `ds` in one transaction; returns how many.
///
/// # Errors
/// As [`NpyReader::open`] and [`NpyReader::append_to`].
pub fn append_dataset(ds: &mut Dataset, npy: impl AsRef<Path>) -> Result<u64> {
    NpyReader::open(npy)?.append_to(ds, DEFAULT_BATCH_BYTES, |_| {})
}

impl RecordReader {
    /// The table columns the fields make: their paths and types.
    pub fn leaves(&self) -> Vec<(String, LeafKind)> {
        self.fields()
            .iter()
            .map(|f| (f.path.clone(), LeafKind::Fixed(f.dtype)))
            .collect()
    }

    /// The fields of a table with a column per leaf field (nested records as nested fields).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the file for a field name a table cannot take.
    pub fn table_fields(&self) -> Result<Vec<Field>> {
        fields_from_leaves(&self.leaves()).map_err(|e| Error::input(self.path(), reason(e)))
    }

    /// Creates a table at `root` on `storage` with a column per field and every record, as
    /// one step (see [`Table::create_from`]): reads `batch_bytes` at a time, telling
    /// `progress` the records of each batch.
    ///
    /// # Errors
    /// As [`RecordReader::table_fields`], [`Table::create_from`] and
    /// [`RecordReader::next_records`].
    pub fn create_table(
        mut self,
        storage: Arc<dyn Storage>,
        root: &Path,
        opts: &TableOptions,
        batch_bytes: u64,
        progress: impl FnMut(u64),
    ) -> Result<Table> {
        let fields = self.table_fields()?;
        Table::create_from(
            storage,
            root,
            fields,
            opts,
            self.batches(batch_bytes, progress),
        )
    }

    /// Checks that the fields are the columns of `t` with the same types (in any order).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the file, listing both.
    pub fn check_fits(&self, t: &Table) -> Result<()> {
        let leaves: Vec<(String, LeafKind)> = t
            .leaves()
            .iter()
            .map(|l| (l.path.clone(), l.kind))
            .collect();
        let got = self.leaves();
        let mut sorted_leaves = leaves.clone();
        let mut sorted_got = got.clone();
        sorted_leaves.sort_by(|x, y| x.0.cmp(&y.0));
        sorted_got.sort_by(|x, y| x.0.cmp(&y.0));
        if sorted_leaves == sorted_got {
            return Ok(());
        }
        let show = |v: &[(String, LeafKind)]| {
            v.iter()
                .map(|(p, k)| format!("{p}: {}", k.name()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        Err(Error::input(
            self.path(),
            format!(
                "its fields ({}) are not the columns of {} ({})",
                show(&got),
                t.path().display(),
                show(&leaves)
            ),
        ))
    }

    /// Appends every record to `t` in one transaction, `batch_bytes` at a time, telling
    /// `progress` the records of each batch. Returns the number of records appended.
    ///
    /// # Errors
    /// As [`RecordReader::check_fits`] and [`Table::append_batches`].
    pub fn append_to(
        mut self,
        t: &mut Table,
        batch_bytes: u64,
        progress: impl FnMut(u64),
    ) -> Result<u64> {
        self.check_fits(t)?;
        t.append_batches(self.batches(batch_bytes, progress))
    }
}

/// Opens `npy` as records for a table with the columns `columns`.
fn records_for(npy: &Path, columns: &[&str]) -> Result<RecordReader> {
    RecordReader::open(npy)?.ok_or_else(|| {
        Error::input(
            npy,
            format!(
                "a table appends records (a structured dtype with a field per column: {})",
                columns.join(", ")
            ),
        )
    })
}

/// Creates a table at `root` (local storage) from the `.npy` file of records `npy`: a column
/// per field, every record, in one step.
///
/// # Errors
/// [`Error::InvalidInput`] when the file does not hold records; as
/// [`RecordReader::open`] and [`RecordReader::create_table`].
pub fn create_table(
    npy: impl AsRef<Path>,
    root: impl AsRef<Path>,
    opts: &TableOptions,
) -> Result<Table> {
    let npy = npy.as_ref();
    let Some(rec) = RecordReader::open(npy)? else {
        // Not records: say why, as a reader of one array would.
        NpyReader::open(npy)?;
        return Err(Error::input(
            npy,
            "a table is made from records (a structured dtype)",
        ));
    };
    let (s, root) = storage::for_path(root.as_ref())?;
    rec.create_table(s, &root, opts, DEFAULT_BATCH_BYTES, |_| {})
}

/// Appends the records of the `.npy` file `npy` to the table `t` in one transaction; returns
/// how many. The file's fields must be the table's columns with the same types.
///
/// # Errors
/// [`Error::InvalidInput`] naming the file when it does not hold records or they do not
/// fit; as [`RecordReader::append_to`].
pub fn append_table(t: &mut Table, npy: impl AsRef<Path>) -> Result<u64> {
    let rec = records_for(npy.as_ref(), &t.column_names())?;
    rec.append_to(t, DEFAULT_BATCH_BYTES, |_| {})
}

/// Runs `body` on a new writer; removes the file when `body` or the final sync fails.
fn write_file(w: NpyWriter, body: impl FnOnce(&mut NpyWriter) -> Result<()>) -> Result<()> {
    let mut w = w;
    match body(&mut w) {
        Ok(()) => w.finish(),
        Err(e) => {
            w.abandon();
            Err(e)
        }
    }
}

/// Writes the selection `sel` of `ds` to the `.npy` file `out`, in the dataset's dtype and
/// byte order and the selection's output shape, reading `batch_bytes` at a time in order
/// and telling `progress` the bytes of each batch. A failure removes the file.
///
/// # Errors
/// [`Error::Io`] naming `out`; as [`SelectionReader::batches`].
pub fn write_selection(
    ds: &Dataset,
    sel: &SelectionReader<'_>,
    out: &Path,
    batch_bytes: u64,
    mut progress: impl FnMut(u64),
) -> Result<()> {
    let m = ds.storage_meta();
    let (dtype, endian) = (m.dtype, m.endianness);
    let w = NpyWriter::create(out, dtype, endian, sel.shape())?;
    write_file(w, |w| {
        for batch in sel.batches(batch_bytes) {
            let mut data = batch?.data;
            if endian != Endianness::native() {
                crate::dtype::swap_bytes(&mut data, dtype.swap_unit());
            }
            progress(data.len() as u64);
            w.write(&data)?;
        }
        Ok(())
    })
}

/// Writes the selection `sel` (as [`Dataset::slice`] takes it) of `ds` to the `.npy` file
/// `out`; returns the shape written.
///
/// # Errors
/// As [`SelectionReader::new`] and [`write_selection`].
pub fn write_dataset(
    ds: &Dataset,
    sel: &[SliceInfoElem],
    out: impl AsRef<Path>,
) -> Result<Vec<u64>> {
    let reader = SelectionReader::new(ds, sel)?;
    write_selection(ds, &reader, out.as_ref(), DEFAULT_BATCH_BYTES, |_| {})?;
    Ok(reader.shape().to_vec())
}

/// The types of the columns `names`, all fixed-size: `.npy` has no variable-length form.
fn npy_types(t: &Table, names: &[&str]) -> Result<Vec<DType>> {
    let leaves = t.leaves();
    names
        .iter()
        .map(
            |n| match leaves.iter().find(|l| l.path == *n).map(|l| l.kind) {
                Some(LeafKind::Fixed(d)) => Ok(d),
                Some(_) => Err(Error::InvalidArgument(format!(
                    "column {n} holds variable-length values, which .npy cannot store; \
                     leave it out of the columns or write CSV"
                ))),
                None => Err(Error::InvalidArgument(format!(
                    "{}: no column {n:?} (columns: {})",
                    t.path().display(),
                    t.column_names().join(", ")
                ))),
            },
        )
        .collect()
}

/// Writes rows `rows` of the columns `names` of `t` to the `.npy` file `out` as numpy
/// records, a field per column (nested paths as nested records, fields in the table's column
/// order), `rows_per_batch` rows at a time, telling `progress` the rows of each batch.
/// Returns the columns written, in the file's order. A failure removes the file.
///
/// # Errors
/// [`Error::InvalidArgument`] for a variable-length or unknown column; [`Error::Io`] naming
/// `out`; as [`TableRows::read`].
pub fn write_records(
    t: &Table,
    names: &[&str],
    rows: &TableRows,
    out: &Path,
    rows_per_batch: u64,
    mut progress: impl FnMut(u64),
) -> Result<Vec<String>> {
    npy_types(t, names)?;
    // Fields in the table's order, which keeps the leaves of a nested field together.
    let ordered: Vec<&str> = t
        .leaves()
        .iter()
        .map(|l| l.path.as_str())
        .filter(|p| names.contains(p))
        .collect();
    let kinds = npy_types(t, &ordered)?;
    let fields: Vec<(&str, DType)> = ordered.iter().copied().zip(kinds.iter().copied()).collect();
    let size: usize = kinds.iter().map(DType::itemsize).sum();
    let w = NpyWriter::create_records(out, &fields, rows.len())?;
    write_file(w, |w| {
        for batch in rows.batches(t, &ordered, rows_per_batch) {
            let (_, cols) = batch?;
            let n = cols.first().map_or(0, Values::len);
            let mut recs = vec![0u8; n * size];
            let mut at = 0;
            for (c, d) in cols.iter().zip(&kinds) {
                let Values::Fixed { data, .. } = c else {
                    return Err(Error::InvalidArgument(
                        "unexpected variable-length values".into(),
                    ));
                };
                let isz = d.itemsize();
                for (i, v) in data.chunks_exact(isz).enumerate() {
                    recs[i * size + at..i * size + at + isz].copy_from_slice(v);
                }
                at += isz;
            }
            w.write(&recs)?;
            progress(n as u64);
        }
        Ok(())
    })?;
    Ok(ordered.iter().map(|s| (*s).to_string()).collect())
}

/// Writes rows `rows` of each column of `names` of `t` to its own `.npy` file in `dir`
/// (created if needed), named by the column's path with `/` as `.` (`pos/x` in
/// `pos.x.npy`), `rows_per_batch` rows at a time, telling `progress` the values of each
/// batch. Returns the files written. A failure removes the file being written.
///
/// # Errors
/// [`Error::InvalidArgument`] for a variable-length or unknown column; [`Error::Io`] naming
/// the directory or file; as [`TableRows::read`].
pub fn write_columns(
    t: &Table,
    names: &[&str],
    rows: &TableRows,
    dir: &Path,
    rows_per_batch: u64,
    mut progress: impl FnMut(u64),
) -> Result<Vec<PathBuf>> {
    let kinds = npy_types(t, names)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
    let mut files = Vec::new();
    for (n, dtype) in names.iter().zip(kinds) {
        let path = dir.join(format!("{}.npy", n.replace('/', ".")));
        let w = NpyWriter::create(&path, dtype, Endianness::native(), &[rows.len()])?;
        let one = [*n];
        write_file(w, |w| {
            for batch in rows.batches(t, &one, rows_per_batch) {
                let (_, mut cols) = batch?;
                match cols.pop() {
                    Some(Values::Fixed { data, .. }) => {
                        w.write(&data)?;
                        progress((data.len() / dtype.itemsize().max(1)) as u64);
                    }
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "column {n}: unexpected values"
                        )))
                    }
                }
            }
            Ok(())
        })?;
        files.push(path);
    }
    Ok(files)
}

/// [`write_records`] of every column and row of `t`, in one call.
///
/// # Errors
/// As [`write_records`].
pub fn write_table(t: &Table, out: impl AsRef<Path>) -> Result<Vec<String>> {
    let names = t.column_names();
    let rows = TableRows::Range(0, t.nrows());
    write_records(t, &names, &rows, out.as_ref(), TABLE_BATCH_ROWS, |_| {})
}
