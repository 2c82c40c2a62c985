//! CSV files into datasets and tables, with type inference (the `csv` feature).
//!
//! Two shapes of input:
//!
//! - **One column as a 1-d dataset**: [`scan_column`] finds the column (by header name or
//!   0-based index), decides whether the first row is a header, counts the rows and checks
//!   every value (inferring int64 or float64 when no dtype is given); a [`ColumnReader`]
//!   then streams the values in batches.
//! - **Every column as a table**: [`scan_table`] takes the column names (paths: `pos/x` is
//!   column `x` of the nested field `pos`) from the header row and infers each column's type
//!   over the whole file, unless a schema gives it. An **empty field** (nothing, or only
//!   spaces, between the separators, quoted or not) is **missing**, as pandas and duckdb
//!   read it: a column with one is nullable (`spec/table.md` §3.5) and the field is null.
//!   Types are inferred from the other fields: bool when every one is true/false, int64
//!   when every one is an integer, float64 when every one is a number, a date when every
//!   one is an ISO date `YYYY-MM-DD` (`datetime64[D]`), a timestamp when every one is an
//!   ISO date or `YYYY-MM-DD[T ]HH:MM[:SS[.f…]]` (`datetime64` of seconds, or of ms, us
//!   or ns as the longest fraction needs), and with `Z` or an offset (`+02:00`) on every
//!   one a zoned timestamp (the UTC instants, zone `"UTC"`); otherwise varstr. Dates are
//!   not recognised with [`CsvOptions::dates`] off. [`TablePlan::create_table`] and
//!   [`append_table`] then load the file in batches, in one transaction.
//!
//! Files are read twice (check, then store), a bounded batch at a time, so memory stays
//! small whatever their size. Every failure is an [`Error`] naming the file, and the line
//! and column for a bad cell.
//!
//! ```no_run
//! # fn main() -> blz::Result<()> {
//! let t = blz::csv::create_table("trades.csv", "trades.blz", &Default::default())?;
//! println!("{} rows", t.nrows());
//! # Ok(())
//! # }
//! ```

use crate::dtype::{put_scalar, DType, Scalar};
use crate::error::{Error, Result};
use crate::ingest::{check_path, check_rows_fit, fields_from_leaves, reason};
use crate::ordered::DEFAULT_BATCH_BYTES;
use crate::storage::{self, Storage};
use crate::table::{
    ColumnOptions, Field, FieldKind, LeafKind, NullableValues, Table, TableOptions, Values,
};
use crate::{CreateOptions, Dataset};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod dates;
mod schema;

pub use schema::{parse_schema, CsvColumn, CsvOptions};

/// Rows of a table read per batch at most.
const MAX_BATCH_ROWS: u64 = 65536;

/// Rows of CSV input per batch for about `batch_bytes` bytes (a row counted as 1 KiB), at
/// most 65536.
pub fn table_batch_rows(batch_bytes: u64) -> u64 {
    (batch_bytes / 1024).clamp(1, MAX_BATCH_ROWS)
}

fn open_reader(path: &Path, delimiter: u8) -> Result<::csv::Reader<std::fs::File>> {
    ::csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(delimiter)
        .from_path(path)
        .map_err(|e| csv_error(path, e))
}

/// A CSV error naming the file (an I/O error stays one).
fn csv_error(path: &Path, e: ::csv::Error) -> Error {
    if e.is_io_error() {
        if let ::csv::ErrorKind::Io(io) = e.into_kind() {
            return Error::io("read", path, io);
        }
        return Error::input(path, "read error");
    }
    Error::input(path, e.to_string())
}

fn line_of(rec: &::csv::StringRecord) -> u64 {
    rec.position().map_or(0, ::csv::Position::line)
}

fn looks_numeric(s: &str) -> bool {
    let t = s.trim();
    t.parse::<f64>().is_ok() || t.parse::<i128>().is_ok()
}

/// Parses one CSV cell for `dtype`: integers and floats as numbers (an empty cell is NaN for
/// float types), `true`/`false`/`1`/`0`/`t`/`f`/`yes`/`no` for bool, the raw text for string
/// types. [`put_scalar`] then stores it.
///
/// # Errors
/// [`Error::InvalidArgument`] saying why the cell is not a value of `dtype`.
pub(crate) fn parse_cell(s: &str, dtype: DType) -> Result<Scalar<'_>> {
    let t = s.trim();
    let fail = |m: String| Err(Error::InvalidArgument(m));
    match dtype {
        DType::Bytes(_) | DType::Str(_) => Ok(Scalar::Text(s)),
        // An empty field is NaT; an integer a count of the unit; other text an ISO 8601
        // date or date-time (checked when stored).
        DType::DateTime(_) | DType::TimeDelta(_) => Ok(match t.parse::<i128>() {
            _ if t.is_empty() => Scalar::Text("NaT"),
            Ok(i) => Scalar::Int(i),
            Err(_) => Scalar::Text(t),
        }),
        DType::Bool => match t.to_ascii_lowercase().as_str() {
            "true" | "1" | "t" | "yes" => Ok(Scalar::Bool(true)),
            "false" | "0" | "f" | "no" => Ok(Scalar::Bool(false)),
            _ => fail(format!("{s:?} is not a truth value (true/false, 1/0)")),
        },
        _ => {
            if t.is_empty() {
                return if dtype.is_float() || dtype == DType::F16 {
                    Ok(Scalar::Float(f64::NAN))
                } else {
                    fail(format!("empty field cannot be stored as {dtype}"))
                };
            }
            if let Ok(i) = t.parse::<i128>() {
                return Ok(Scalar::Int(i));
            }
            match t.parse::<f64>() {
                Ok(x) => Ok(Scalar::Float(x)),
                Err(_) => fail(format!("{s:?} is not a number")),
            }
        }
    }
}

/// Parses a cell and stores it as one native-endian element of `dtype` in `out`; the error
/// says why, for the caller to place.
fn store_cell(cell: &str, dtype: DType, out: &mut [u8]) -> std::result::Result<(), String> {
    if let DType::DateTime(unit) = dtype {
        let t = cell.trim();
        // ISO text with an offset (`+02:00`) is the UTC instant it names.
        if !t.is_empty() && t.parse::<i128>().is_err() {
            let v = dates::parse_instant(t, unit).map_err(reason)?;
            out.copy_from_slice(&v.to_ne_bytes());
            return Ok(());
        }
    }
    let v = parse_cell(cell, dtype).map_err(reason)?;
    put_scalar(v, dtype, out).map_err(reason)
}

// ---------------------------------------------------------------------------------------------
// One column as a 1-d dataset

/// Which column of which CSV file, and how the file is laid out.
#[derive(Debug, Clone)]
pub struct ColumnSpec {
    /// The file.
    pub path: PathBuf,
    /// Column name (from the header row) or 0-based index.
    pub column: String,
    /// Field separator.
    pub delimiter: u8,
    /// The first row is data even if it does not look like it.
    pub no_header: bool,
}

/// What a first pass over a CSV file found about one column: where it is, whether the file
/// has a header row, how many values, and their dtype.
#[derive(Debug, Clone)]
pub struct ColumnPlan {
    spec: ColumnSpec,
    col: usize,
    header: bool,
    rows: u64,
    dtype: DType,
}

impl ColumnPlan {
    /// The dtype the values are stored as.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// The number of values.
    pub fn rows(&self) -> u64 {
        self.rows
    }
    /// The column's 0-based index.
    pub fn column_index(&self) -> usize {
        self.col
    }
    /// True when the first row is a header row (not stored).
    pub fn has_header(&self) -> bool {
        self.header
    }
}

/// Finds `spec`'s column and the header row: a name is looked up in the first row; with an
/// index, the first row is a header unless `no_header`, unless its field there is a number
/// (or empty) and the dtype is not a string type.
fn find_column(
    spec: &ColumnSpec,
    first: Option<&::csv::StringRecord>,
    dtype: Option<DType>,
) -> Result<(usize, bool)> {
    let index = spec.column.trim().parse::<usize>().ok();
    let named = first
        .filter(|_| !spec.no_header)
        .and_then(|r| r.iter().position(|f| f.trim() == spec.column.trim()));
    match (named, index) {
        (Some(c), _) => Ok((c, true)),
        (None, Some(i)) => {
            let header = !spec.no_header
                && match (first, dtype) {
                    (None, _) => false,
                    (Some(_), Some(DType::Bytes(_) | DType::Str(_))) => true,
                    (Some(r), _) => r
                        .get(i)
                        .is_some_and(|f| !looks_numeric(f) && !f.trim().is_empty()),
                };
            Ok((i, header))
        }
        (None, None) => {
            let cols = first
                .map(|r| {
                    r.iter()
                        .map(|f| format!("{:?}", f.trim()))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            Err(Error::input(
                &spec.path,
                if spec.no_header {
                    format!(
                        "without a header row, the column is a 0-based index, not {:?}",
                        spec.column
                    )
                } else {
                    format!(
                        "no column {:?} in the header row (columns: {cols})",
                        spec.column
                    )
                },
            ))
        }
    }
}

/// The cell of column `col` of `rec`.
fn field<'r>(rec: &'r ::csv::StringRecord, col: usize, spec: &ColumnSpec) -> Result<&'r str> {
    rec.get(col).ok_or_else(|| {
        Error::input(
            &spec.path,
            format!(
                "line {}: no column {} (the row has {} fields)",
                line_of(rec),
                spec.column,
                rec.len()
            ),
        )
    })
}

/// First pass over a CSV file for one column: finds the column and the header row, counts
/// the rows, and checks every value (inferring int64, or float64 when some value is not an
/// integer, when `dtype` is `None`).
///
/// # Errors
/// [`Error::InvalidInput`] naming the file (and the line and column of a bad value): no
/// such column, a row without it, a value that does not fit; [`Error::Io`].
pub fn scan_column(spec: &ColumnSpec, dtype: Option<DType>) -> Result<ColumnPlan> {
    let path = &spec.path;
    let mut rdr = open_reader(path, spec.delimiter)?;
    let mut records = rdr.records();
    let first = records.next().transpose().map_err(|e| csv_error(path, e))?;
    let (col, header) = find_column(spec, first.as_ref(), dtype)?;
    let mut all_int = true;
    let mut rows = 0u64;
    let mut scratch = vec![0u8; dtype.map_or(8, |d| d.itemsize())];
    let mut check = |rec: &::csv::StringRecord| -> Result<()> {
        let f = field(rec, col, spec)?;
        let at = |e: String| {
            Error::input(
                path,
                format!("line {}, column {}: {e}", line_of(rec), spec.column),
            )
        };
        match dtype {
            Some(d) => store_cell(f, d, &mut scratch).map_err(at)?,
            None => {
                let t = f.trim();
                if all_int && t.parse::<i64>().is_err() {
                    all_int = false;
                }
                if !all_int && !t.is_empty() && t.parse::<f64>().is_err() {
                    return Err(at(format!(
                        "{f:?} is not a number (store text with an S<n> or U<n> dtype)"
                    )));
                }
            }
        }
        rows += 1;
        Ok(())
    };
    if let Some(r) = &first {
        if !header {
            check(r)?;
        }
    }
    for r in records {
        check(&r.map_err(|e| csv_error(path, e))?)?;
    }
    let dtype = dtype.unwrap_or(if all_int { DType::I64 } else { DType::F64 });
    Ok(ColumnPlan {
        spec: spec.clone(),
        col,
        header,
        rows,
        dtype,
    })
}

/// Second pass: the values of a [`scan_column`]ned column as rows of a 1-d array.
#[derive(Debug)]
pub struct ColumnReader {
    plan: ColumnPlan,
    rdr: ::csv::Reader<std::fs::File>,
    rec: ::csv::StringRecord,
    done: u64,
}

impl ColumnReader {
    /// Reopens the file for reading the values `plan` checked.
    ///
    /// # Errors
    /// [`Error::Io`] or [`Error::InvalidInput`] naming the file.
    pub fn new(plan: ColumnPlan) -> Result<ColumnReader> {
        let mut rdr = open_reader(&plan.spec.path, plan.spec.delimiter)?;
        let mut rec = ::csv::StringRecord::new();
        if plan.header {
            rdr.read_record(&mut rec)
                .map_err(|e| csv_error(&plan.spec.path, e))?;
        }
        Ok(ColumnReader {
            plan,
            rdr,
            rec,
            done: 0,
        })
    }

    /// What the first pass found.
    pub fn plan(&self) -> &ColumnPlan {
        &self.plan
    }

    /// Reads up to `max` further values as native-endian elements of the plan's dtype, with
    /// their number; `None` at the end.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the file, line and problem (the file changed since
    /// the first pass); [`Error::Io`].
    pub fn next_rows(&mut self, max: u64) -> Result<Option<(Vec<u8>, u64)>> {
        let k = max.min(self.plan.rows - self.done);
        if k == 0 {
            return Ok(None);
        }
        let dtype = self.plan.dtype;
        let isz = dtype.itemsize();
        let path = &self.plan.spec.path;
        let mut out = vec![0u8; k as usize * isz];
        for c in out.chunks_exact_mut(isz) {
            let more = self
                .rdr
                .read_record(&mut self.rec)
                .map_err(|e| csv_error(path, e))?;
            if !more {
                return Err(Error::input(path, "the file changed while it was read"));
            }
            let f = field(&self.rec, self.plan.col, &self.plan.spec)?;
            let line = line_of(&self.rec);
            store_cell(f, dtype, c).map_err(|e| Error::input(path, format!("line {line}: {e}")))?;
        }
        self.done += k;
        Ok(Some((out, k)))
    }

    /// The remaining values in batches of about `batch_bytes` bytes (at least one value),
    /// each handed to `progress` by its number of values.
    pub fn batches<'a>(
        &'a mut self,
        batch_bytes: u64,
        mut progress: impl FnMut(u64) + 'a,
    ) -> impl Iterator<Item = Result<Vec<u8>>> + 'a {
        let per = (batch_bytes / self.plan.dtype.itemsize().max(1) as u64).max(1);
        std::iter::from_fn(move || match self.next_rows(per) {
            Ok(Some((bytes, n))) => {
                progress(n);
                Some(Ok(bytes))
            }
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        })
    }

    /// Creates a 1-d dataset at `root` on `storage` holding the values, as one step (see
    /// [`Dataset::create_from`]).
    ///
    /// # Errors
    /// As [`Dataset::create_from`] and [`ColumnReader::next_rows`].
    pub fn create_dataset(
        mut self,
        storage: Arc<dyn Storage>,
        root: &Path,
        opts: &CreateOptions,
        batch_bytes: u64,
        progress: impl FnMut(u64),
    ) -> Result<Dataset> {
        let dtype = self.plan.dtype;
        Dataset::create_from(
            storage,
            root,
            dtype,
            &[0],
            opts,
            self.batches(batch_bytes, progress),
        )
    }

    /// Appends the values to the 1-d dataset `ds` in one transaction; returns how many.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `ds` is not 1-d or does not hold the plan's dtype; as
    /// [`Dataset::append_batches`] and [`ColumnReader::next_rows`].
    pub fn append_to(
        mut self,
        ds: &mut Dataset,
        batch_bytes: u64,
        progress: impl FnMut(u64),
    ) -> Result<u64> {
        let path = self.plan.spec.path.clone();
        if ds.dtype() != self.plan.dtype {
            return Err(Error::input(
                &path,
                format!(
                    "column {} is read as {}, the dataset holds {}",
                    self.plan.spec.column,
                    self.plan.dtype,
                    ds.dtype()
                ),
            ));
        }
        check_rows_fit(&path, &[self.plan.rows], ds)?;
        ds.append_batches(self.batches(batch_bytes, progress))
    }
}

// ---------------------------------------------------------------------------------------------
// Every column as a table

/// A CSV file read record by record, after its header row.
struct CsvFile {
    path: PathBuf,
    rdr: ::csv::Reader<std::fs::File>,
    header: Vec<String>,
    rec: ::csv::StringRecord,
}

impl CsvFile {
    fn open(path: &Path, delimiter: u8) -> Result<CsvFile> {
        let mut rdr = open_reader(path, delimiter)?;
        let mut rec = ::csv::StringRecord::new();
        let more = rdr.read_record(&mut rec).map_err(|e| csv_error(path, e))?;
        if !more {
            return Err(Error::input(
                path,
                "empty file (a header row naming the columns is needed)",
            ));
        }
        let header = rec.iter().map(|f| f.trim().to_string()).collect();
        Ok(CsvFile {
            path: path.to_path_buf(),
            rdr,
            header,
            rec,
        })
    }

    /// The next record (checked to have one field per header column), or `None` at the end.
    fn next(&mut self) -> Result<Option<&::csv::StringRecord>> {
        let more = self
            .rdr
            .read_record(&mut self.rec)
            .map_err(|e| csv_error(&self.path, e))?;
        if !more {
            return Ok(None);
        }
        if self.rec.len() != self.header.len() {
            return Err(Error::input(
                &self.path,
                format!(
                    "line {}: {} fields, the header row has {}",
                    line_of(&self.rec),
                    self.rec.len(),
                    self.header.len()
                ),
            ));
        }
        Ok(Some(&self.rec))
    }
}

/// What an empty field is in a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Empty {
    /// Null (a nullable column).
    Null,
    /// An error, but the empty string in a string column (a column declared not null).
    Refused,
    /// What [`parse_cell`] makes of it: NaN, NaT, the empty string, an error for integers and
    /// bools (a table column, made before CSV files had nulls, that is not nullable).
    Parsed,
}

/// A table column a CSV column goes to: its path, kind, and what an empty field is.
#[derive(Clone, Debug)]
struct Target {
    name: String,
    kind: LeafKind,
    empty: Empty,
}

/// Values of one column being gathered for an append.
enum BufValues {
    Fixed { dtype: DType, data: Vec<u8> },
    Var(Vec<Vec<u8>>),
}

struct Buf {
    values: BufValues,
    /// One flag per row of a nullable column.
    valid: Option<Vec<bool>>,
    empty: Empty,
}

impl Buf {
    fn new(kind: LeafKind, empty: Empty) -> Buf {
        let values = match kind {
            LeafKind::Fixed(dtype) => BufValues::Fixed {
                dtype,
                data: Vec::new(),
            },
            LeafKind::VarStr | LeafKind::VarBytes => BufValues::Var(Vec::new()),
        };
        Buf {
            values,
            valid: (empty == Empty::Null).then(Vec::new),
            empty,
        }
    }

    fn push(&mut self, cell: &str) -> std::result::Result<(), String> {
        let text = matches!(
            self.values,
            BufValues::Var(_)
                | BufValues::Fixed {
                    dtype: DType::Str(_) | DType::Bytes(_),
                    ..
                }
        );
        let null = cell.trim().is_empty() && self.empty == Empty::Null;
        if cell.trim().is_empty() && self.empty == Empty::Refused && !text {
            return Err("empty field in a column that is not nullable".into());
        }
        if let Some(v) = &mut self.valid {
            v.push(!null);
        }
        match &mut self.values {
            BufValues::Fixed { dtype, data } => {
                let n = data.len();
                data.resize(n + dtype.itemsize(), 0);
                if null {
                    return Ok(());
                }
                store_cell(cell, *dtype, &mut data[n..])
            }
            BufValues::Var(v) => {
                v.push(cell.as_bytes().to_vec());
                Ok(())
            }
        }
    }

    fn take(&mut self) -> NullableValues {
        let values = match &mut self.values {
            BufValues::Fixed { dtype, data } => Values::Fixed {
                dtype: *dtype,
                data: std::mem::take(data),
            },
            BufValues::Var(v) => Values::Var(std::mem::take(v)),
        };
        let validity = self.valid.as_mut().map(std::mem::take);
        NullableValues::new(values, validity)
    }

    fn clear(&mut self) {
        match &mut self.values {
            BufValues::Fixed { data, .. } => data.clear(),
            BufValues::Var(v) => v.clear(),
        }
        if let Some(v) = &mut self.valid {
            v.clear();
        }
    }
}

/// The error for a cell of column `name` at `line` of `path`.
fn cell_error(path: &Path, line: u64, name: &str, e: String) -> Error {
    Error::input(path, format!("line {line}, column {name}: {e}"))
}

/// The records of `csv` (whose column `i` goes to table column `targets[i]`), parsed and
/// checked, in batches of up to `per` rows: one value list per column.
fn csv_batches<'a>(
    csv: &'a mut CsvFile,
    targets: &'a [Target],
    per: u64,
    mut progress: impl FnMut(u64) + 'a,
) -> impl Iterator<Item = Result<Vec<(String, NullableValues)>>> + 'a {
    let mut bufs: Vec<Buf> = targets.iter().map(|t| Buf::new(t.kind, t.empty)).collect();
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let mut pending = 0u64;
        let mut read = || -> Result<()> {
            while pending < per {
                let path = csv.path.clone();
                let Some(rec) = csv.next()? else {
                    done = true;
                    break;
                };
                let line = line_of(rec);
                for ((cell, buf), t) in rec.iter().zip(bufs.iter_mut()).zip(targets) {
                    buf.push(cell)
                        .map_err(|e| cell_error(&path, line, &t.name, e))?;
                }
                pending += 1;
            }
            Ok(())
        };
        match read() {
            Err(e) => {
                done = true;
                Some(Err(e))
            }
            Ok(()) if pending == 0 => None,
            Ok(()) => {
                progress(pending);
                Some(Ok(targets
                    .iter()
                    .map(|t| t.name.clone())
                    .zip(bufs.iter_mut().map(Buf::take))
                    .collect()))
            }
        }
    })
}

/// What the cells of one CSV column could be stored as.
#[derive(Clone, Copy, Debug)]
struct Infer {
    empty: bool,
    nonempty: bool,
    bool_ok: bool,
    int_ok: bool,
    float_ok: bool,
    /// Every non-empty cell is an ISO date or timestamp (when dates are recognised).
    date_ok: bool,
    /// Some cell has a time of day; the longest fraction of a second.
    time: bool,
    frac: u8,
    /// Some cells have an offset (`Z`, `+02:00`), some have none.
    zoned: bool,
    naive: bool,
}

impl Infer {
    fn new(dates: bool) -> Infer {
        Infer {
            empty: false,
            nonempty: false,
            bool_ok: true,
            int_ok: true,
            float_ok: true,
            date_ok: dates,
            time: false,
            frac: 0,
            zoned: false,
            naive: false,
        }
    }

    fn see(&mut self, cell: &str) {
        let t = cell.trim();
        if t.is_empty() {
            self.empty = true;
            return;
        }
        self.nonempty = true;
        if self.bool_ok && !t.eq_ignore_ascii_case("true") && !t.eq_ignore_ascii_case("false") {
            self.bool_ok = false;
        }
        if self.int_ok && t.parse::<i64>().is_err() {
            self.int_ok = false;
        }
        if self.float_ok && t.parse::<f64>().is_err() {
            self.float_ok = false;
        }
        if self.date_ok {
            match dates::shape(t) {
                Some(s) if dates::parse_instant(t, dates::unit_for(s.time, s.frac)).is_ok() => {
                    self.time |= s.time;
                    self.frac = self.frac.max(s.frac);
                    self.zoned |= s.zoned;
                    self.naive |= !s.zoned;
                }
                _ => self.date_ok = false,
            }
        }
    }

    /// The column's type (and zone, for timestamps with offsets); empty cells do not count
    /// (they are nulls). A column with no value at all is a variable-length string.
    fn kind(&self) -> (LeafKind, Option<String>) {
        let kind = if !self.nonempty {
            LeafKind::VarStr
        } else if self.bool_ok {
            LeafKind::Fixed(DType::Bool)
        } else if self.int_ok {
            LeafKind::Fixed(DType::I64)
        } else if self.float_ok {
            LeafKind::Fixed(DType::F64)
        } else if self.date_ok && !(self.zoned && self.naive) {
            let unit = dates::unit_for(self.time, self.frac);
            return (
                LeafKind::Fixed(DType::DateTime(unit)),
                self.zoned.then(|| "UTC".to_string()),
            );
        } else {
            LeafKind::VarStr
        };
        (kind, None)
    }
}

/// What a first pass over a CSV file found for a table: a column per header field with its
/// type (given or inferred), whether it is nullable and its zone, every value checked, and
/// the number of rows.
#[derive(Debug, Clone)]
pub struct TablePlan {
    path: PathBuf,
    delimiter: u8,
    leaves: Vec<(String, LeafKind)>,
    /// Per column: nullable, zone.
    extras: Vec<(bool, Option<String>)>,
    rows: u64,
}

/// First pass over a CSV file for a table: column paths from the header row (checked, none
/// twice), each column's type from `schema` when it names the column, inferred over the
/// whole file otherwise (see the [module documentation](self)); every value of a given type
/// is checked. A column is nullable when it has an empty field.
///
/// # Errors
/// As [`scan_table_with`].
pub fn scan_table(path: &Path, delimiter: u8, schema: &[(String, LeafKind)]) -> Result<TablePlan> {
    let opts = CsvOptions {
        delimiter,
        schema: schema.iter().map(|(n, k)| CsvColumn::new(n, *k)).collect(),
        ..CsvOptions::default()
    };
    scan_table_with(path, &opts)
}

/// First pass over a CSV file for a table, with options: as [`scan_table`], the schema's
/// columns with their nullability and zone (a column declared not nullable refuses an
/// empty field, but a string column's, which is the empty string), and dates recognised
/// or not.
///
/// # Errors
/// [`Error::InvalidInput`] naming the file: an empty file, a bad or repeated column name, a
/// schema column that is not in the header row, a row of the wrong length, a value that does
/// not fit its column or an empty field in a column declared not nullable (with its line
/// and column); [`Error::Io`].
pub fn scan_table_with(path: &Path, opts: &CsvOptions) -> Result<TablePlan> {
    let mut csv = CsvFile::open(path, opts.delimiter)?;
    let header = csv.header.clone();
    let at = |m: String| Error::input(path, format!("header row: {m}"));
    let mut seen = HashSet::new();
    for h in &header {
        check_path(h).map_err(|e| at(reason(e)))?;
        if !seen.insert(h.as_str()) {
            return Err(at(format!("column {h:?} appears twice")));
        }
    }
    for c in &opts.schema {
        if !seen.contains(c.path.as_str()) {
            return Err(Error::InvalidArgument(format!(
                "the schema names column {:?}, which is not in the header row of {} \
                 (columns: {})",
                c.path,
                path.display(),
                header.join(", ")
            )));
        }
    }
    let given: HashMap<&str, &CsvColumn> =
        opts.schema.iter().map(|c| (c.path.as_str(), c)).collect();
    let mut infer = vec![Infer::new(opts.dates); header.len()];
    let mut checks: Vec<Option<Buf>> = header
        .iter()
        .map(|h| {
            given.get(h.as_str()).map(|c| {
                let empty = if c.nullable == Some(false) {
                    Empty::Refused
                } else {
                    Empty::Null
                };
                Buf::new(c.kind, empty)
            })
        })
        .collect();
    let mut rows = 0u64;
    while let Some(rec) = csv.next()? {
        let line = line_of(rec);
        for (i, cell) in rec.iter().enumerate() {
            if let Some(inf) = infer.get_mut(i) {
                if cell.trim().is_empty() {
                    inf.empty = true;
                }
            }
            match checks.get_mut(i) {
                Some(Some(b)) => {
                    b.push(cell)
                        .map_err(|e| cell_error(path, line, &header[i], e))?;
                    b.clear();
                }
                _ => {
                    if let Some(inf) = infer.get_mut(i) {
                        inf.see(cell);
                    }
                }
            }
        }
        rows += 1;
    }
    let mut leaves = Vec::with_capacity(header.len());
    let mut extras = Vec::with_capacity(header.len());
    for (h, inf) in header.iter().zip(&infer) {
        let (kind, zone, nullable) = match given.get(h.as_str()) {
            Some(c) => (c.kind, c.timezone.clone(), c.nullable.unwrap_or(inf.empty)),
            None => {
                let (k, z) = inf.kind();
                (k, z, inf.empty)
            }
        };
        leaves.push((h.clone(), kind));
        extras.push((nullable, zone));
    }
    let plan = TablePlan {
        path: path.to_path_buf(),
        delimiter: opts.delimiter,
        leaves,
        extras,
        rows,
    };
    plan.fields()?;
    Ok(plan)
}

/// The column types of a CSV file (header row of names, `,` between fields), inferred over
/// the whole file: see [`scan_table`].
///
/// # Errors
/// As [`scan_table`].
pub fn infer_types(path: impl AsRef<Path>) -> Result<Vec<(String, LeafKind)>> {
    Ok(scan_table(path.as_ref(), b',', &[])?.leaves)
}

impl TablePlan {
    /// The columns, in the file's order: their paths and types.
    pub fn leaves(&self) -> &[(String, LeafKind)] {
        &self.leaves
    }

    /// Whether column `i` (in the file's order) is nullable: it has an empty field, or the
    /// schema made it so.
    pub fn is_nullable(&self, i: usize) -> bool {
        self.extras.get(i).is_some_and(|e| e.0)
    }

    /// The time zone of column `i`: a timestamp column whose fields have offsets (`"UTC"`),
    /// or the schema's.
    pub fn timezone(&self, i: usize) -> Option<&str> {
        self.extras.get(i).and_then(|e| e.1.as_deref())
    }

    fn targets(&self) -> Vec<Target> {
        self.leaves
            .iter()
            .zip(&self.extras)
            .map(|((name, kind), (nullable, _))| Target {
                name: name.clone(),
                kind: *kind,
                empty: if *nullable {
                    Empty::Null
                } else {
                    Empty::Refused
                },
            })
            .collect()
    }

    /// The number of data rows.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The table's fields (nested by path).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the file for column paths a table cannot take.
    pub fn fields(&self) -> Result<Vec<Field>> {
        let mut fields = fields_from_leaves(&self.leaves)
            .map_err(|e| Error::input(&self.path, format!("header row: {}", reason(e))))?;
        for ((path, _), (nullable, zone)) in self.leaves.iter().zip(&self.extras) {
            if let Some(o) = leaf_options(&mut fields, path) {
                o.nullable = Some(*nullable).filter(|&n| n);
                o.timezone = zone.clone();
            }
        }
        Ok(fields)
    }

    /// Creates the table at `root` on `storage` and stores every row, as one step (see
    /// [`Table::create_from`]): reads `rows_per_batch` rows at a time, telling `progress`
    /// the rows of each batch.
    ///
    /// # Errors
    /// As [`Table::create_from`]; [`Error::InvalidInput`] naming the file when it changed
    /// since the first pass and a value no longer fits.
    pub fn create_table(
        &self,
        storage: Arc<dyn Storage>,
        root: &Path,
        opts: &TableOptions,
        rows_per_batch: u64,
        progress: impl FnMut(u64),
    ) -> Result<Table> {
        let fields = self.fields()?;
        let mut csv = CsvFile::open(&self.path, self.delimiter)?;
        Table::create_from(
            storage,
            root,
            fields,
            opts,
            csv_batches(&mut csv, &self.targets(), rows_per_batch.max(1), progress),
        )
    }
}

/// The options of leaf `path` (`pos/x`) among `fields`.
fn leaf_options<'f>(fields: &'f mut [Field], path: &str) -> Option<&'f mut ColumnOptions> {
    let (head, rest) = match path.split_once('/') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    let f = fields.iter_mut().find(|f| f.name == head)?;
    match (&mut f.kind, rest) {
        (FieldKind::Struct(sub), Some(rest)) => leaf_options(sub, rest),
        (FieldKind::Struct(_), None) | (_, Some(_)) => None,
        (_, None) => Some(&mut f.options),
    }
}

/// Creates a table at `root` (local storage) from a CSV file with a header row (`,` between
/// fields), every column's type inferred: see [`scan_table`] and [`TablePlan::create_table`].
/// Options that give no expected length take the file's row count.
///
/// # Errors
/// As [`scan_table`] and [`TablePlan::create_table`].
pub fn create_table(
    csv: impl AsRef<Path>,
    root: impl AsRef<Path>,
    opts: &TableOptions,
) -> Result<Table> {
    let plan = scan_table(csv.as_ref(), b',', &[])?;
    let mut opts = opts.clone();
    opts.expectedlen = opts.expectedlen.or(Some(plan.rows));
    let (s, root) = storage::for_path(root.as_ref())?;
    plan.create_table(
        s,
        &root,
        &opts,
        table_batch_rows(DEFAULT_BATCH_BYTES),
        |_| {},
    )
}

/// Appends the rows of a CSV file to the table `t` in one transaction, `rows_per_batch` rows
/// at a time, telling `progress` the rows of each batch: the header row names every column
/// of the table (in any order), and values are read as the columns' types. Returns the
/// number of rows appended; on error, none are.
///
/// # Errors
/// [`Error::InvalidInput`] naming the file: a header row naming a column the table lacks,
/// twice, or lacking one; a row of the wrong length; a value that does not fit its column
/// (with its line and column); as [`Table::append_batches`].
pub fn append_table_with(
    t: &mut Table,
    csv: &Path,
    delimiter: u8,
    rows_per_batch: u64,
    progress: impl FnMut(u64),
) -> Result<u64> {
    let leaves: Vec<Target> = t
        .leaves()
        .iter()
        .map(|l| Target {
            name: l.path.clone(),
            kind: l.kind,
            empty: if l.nullable {
                Empty::Null
            } else {
                Empty::Parsed
            },
        })
        .collect();
    let mut file = CsvFile::open(csv, delimiter)?;
    let mut targets: Vec<Target> = Vec::new();
    for h in &file.header {
        let Some(l) = leaves.iter().find(|l| &l.name == h) else {
            return Err(Error::input(
                csv,
                format!(
                    "header row: no column {h:?} in {} (columns: {})",
                    t.path().display(),
                    t.column_names().join(", ")
                ),
            ));
        };
        if targets.iter().any(|t| &t.name == h) {
            return Err(Error::input(
                csv,
                format!("header row: column {h:?} appears twice"),
            ));
        }
        targets.push(l.clone());
    }
    let missing: Vec<&str> = leaves
        .iter()
        .filter(|l| !file.header.contains(&l.name))
        .map(|l| l.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(Error::input(
            csv,
            format!(
                "header row lacks columns of {}: {}",
                t.path().display(),
                missing.join(", ")
            ),
        ));
    }
    t.append_batches(csv_batches(
        &mut file,
        &targets,
        rows_per_batch.max(1),
        progress,
    ))
}

/// [`append_table_with`] a `,`-separated file, in batches of the default size.
///
/// # Errors
/// As [`append_table_with`].
pub fn append_table(t: &mut Table, csv: impl AsRef<Path>) -> Result<u64> {
    append_table_with(
        t,
        csv.as_ref(),
        b',',
        table_batch_rows(DEFAULT_BATCH_BYTES),
        |_| {},
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells() {
        assert_eq!(parse_cell(" 7 ", DType::I8).unwrap(), Scalar::Int(7));
        assert!(parse_cell("", DType::F64).unwrap() != parse_cell("", DType::F64).unwrap());
        assert!(parse_cell("", DType::I64).is_err());
        assert_eq!(parse_cell("Yes", DType::Bool).unwrap(), Scalar::Bool(true));
        assert!(parse_cell("maybe", DType::Bool).is_err());
        // Into a declared datetime64/timedelta64/float16 column.
        let day = DType::DateTime(crate::dtype::TimeUnit::Day);
        let mut b = [0u8; 8];
        for (cell, want) in [("2020-01-01", 18_262i64), ("", crate::dtype::NAT), ("5", 5)] {
            crate::dtype::put_scalar(parse_cell(cell, day).unwrap(), day, &mut b).unwrap();
            assert_eq!(i64::from_ne_bytes(b), want, "{cell:?}");
        }
        let bad = parse_cell("2020-13-01", day).unwrap();
        assert!(crate::dtype::put_scalar(bad, day, &mut b).is_err());
        assert!(matches!(parse_cell("", DType::F16).unwrap(), Scalar::Float(x) if x.is_nan()));
        assert_eq!(
            parse_cell(" a ", DType::Str(3)).unwrap(),
            Scalar::Text(" a ")
        );
        let mut b = [0u8; 1];
        assert!(store_cell("300", DType::U8, &mut b).is_err());
        assert!(store_cell("1.5", DType::I8, &mut b).is_err());
    }

    #[test]
    fn inference() {
        let kinds = |cells: &[&str]| {
            let mut i = Infer::new(true);
            cells.iter().for_each(|c| i.see(c));
            (i.kind().0, i.empty)
        };
        let fixed = |d| LeafKind::Fixed(d);
        assert_eq!(kinds(&["true", "False"]), (fixed(DType::Bool), false));
        assert_eq!(kinds(&["1", "-2"]), (fixed(DType::I64), false));
        // An empty field is a null: the type comes from the others.
        assert_eq!(kinds(&["1", ""]), (fixed(DType::I64), true));
        assert_eq!(kinds(&["true", " "]), (fixed(DType::Bool), true));
        assert_eq!(kinds(&["1", "2.5"]), (fixed(DType::F64), false));
        assert_eq!(kinds(&["1", "x"]), (LeafKind::VarStr, false));
        assert_eq!(kinds(&["", ""]), (LeafKind::VarStr, true));
        use crate::dtype::TimeUnit as U;
        let dt = |u| fixed(DType::DateTime(u));
        assert_eq!(kinds(&["2020-01-02", ""]), (dt(U::Day), true));
        assert_eq!(
            kinds(&["2020-01-02", "2020-01-02 10:00"]),
            (dt(U::Second), false)
        );
        assert_eq!(
            kinds(&["2020-01-02T10:00:00.5", "2020-01-02T10:00:00.1234"]),
            (dt(U::Microsecond), false)
        );
        assert_eq!(kinds(&["2020-02-30"]), (LeafKind::VarStr, false));
        let mut z = Infer::new(true);
        for c in ["2020-01-02T10:00Z", "2020-01-02T11:00+01:00"] {
            z.see(c);
        }
        assert_eq!(z.kind(), (dt(U::Second), Some("UTC".to_string())));
        z.see("2020-01-02T10:00");
        assert_eq!(z.kind().0, LeafKind::VarStr, "zoned and naive mixed");
        let mut off = Infer::new(false);
        off.see("2020-01-02");
        assert_eq!(off.kind().0, LeafKind::VarStr, "dates off");
    }
}
