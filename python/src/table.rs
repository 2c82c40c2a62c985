//! `RawTable`: a table of (nested, variable-length) columns, and the conversions of its
//! schema and column values between Python and the library.

use crate::array::empty_array;
use crate::arrow;
use crate::convert::{checksum, compression, json_map, parse_dtype, Buf};
use crate::errors::{detached, errors_list, FResult, Fail, Problem};
use crate::handle::Handle;
use crate::paths;
use crate::selection::{selection_of, selection_or_advanced, RawSelection};
use blz::table::{
    ColumnOptions, Field, FieldSpec, FieldType, LeafKind, NullableValues, Table, TableOptions,
    Values,
};
use blz::Endianness;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyCapsule, PyDict, PyList, PyString, PyTuple};
use std::path::PathBuf;

/// `(path, nbytes, cbytes, chunklen, codec, clevel)` of a table column.
pub(crate) type ColumnInfo = (String, u64, u64, u64, String, u8);

/// `RawTable::layout`'s answer.
pub(crate) type TableLayout = (String, u64, Vec<(String, u64, u64)>);

/// A schema node from Python: `(name, spec)`, `spec` a dtype descriptor, `"varstr"`,
/// `"varbytes"`, or a list of nodes (a nested record).
/// A new table's options from the keyword arguments `blz.create` and `blz.from_csv` share:
/// every column's codec, chunking and checksum, the attributes, and `overwrite`.
#[expect(
    clippy::too_many_arguments,
    reason = "the keyword arguments of blz.create and blz.from_csv"
)]
pub(crate) fn table_options(
    codec: &str,
    clevel: u8,
    filter: &str,
    chunklen: Option<u64>,
    superchunksize: Option<u64>,
    checksum_name: &str,
    attrs: Option<&str>,
    overwrite: bool,
) -> PyResult<TableOptions> {
    Ok(TableOptions {
        defaults: ColumnOptions {
            compression: Some(compression(codec, clevel, filter)?),
            chunklen,
            superchunksize,
            checksum: Some(checksum(checksum_name)?),
            ..Default::default()
        },
        attributes: json_map(attrs)?,
        overwrite,
        ..Default::default()
    })
}

pub(crate) fn field_from_py(node: &Bound<'_, PyAny>) -> PyResult<Field> {
    // `(name, spec)`, or `(name, spec, {"nullable": bool, "pandas": str, "timezone": str})`
    // for a leaf.
    let (name, spec, extra): (String, Bound<'_, PyAny>, Option<Bound<'_, PyAny>>) =
        match node.extract() {
            Ok((n, s, e)) => (n, s, Some(e)),
            Err(_) => {
                let (n, s) = node.extract()?;
                (n, s, None)
            }
        };
    if let Ok(s) = spec.extract::<String>() {
        let mut f = match s.as_str() {
            "varstr" => Field::varstr(&name),
            "varbytes" => Field::varbytes(&name),
            d => Field::new(&name, parse_dtype(d)?.0),
        };
        if let Some(extra) = extra.filter(|e| !e.is_none()) {
            // Each key of the leaf's options: absent or None leaves the default; a value of
            // the wrong type is an error.
            macro_rules! set {
                ($field:ident, $key:literal, $t:ty) => {
                    let v = match extra.get_item($key) {
                        Ok(v) => v.extract::<Option<$t>>().map_err(Into::<PyErr>::into)?,
                        Err(_) => None,
                    };
                    if v.is_some() {
                        f.options.$field = v;
                    }
                };
            }
            set!(nullable, "nullable", bool);
            set!(pandas, "pandas", String);
            set!(timezone, "timezone", String);
            set!(dictionary, "dictionary", bool);
            set!(dictionary_limit, "dictionary_limit", u64);
            set!(dictionary_entries, "dictionary_entries", Vec<String>);
        }
        return Ok(f);
    }
    let children = spec
        .try_iter()?
        .map(|c| field_from_py(&c?))
        .collect::<PyResult<Vec<Field>>>()?;
    Ok(Field::structure(&name, children))
}

/// The schema for Python, mirroring [`field_from_py`]; leaves carry the kind's name
/// (`float64`, `varstr`, ...).
pub(crate) fn spec_to_py<'py>(
    py: Python<'py>,
    specs: &[FieldSpec],
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for s in specs {
        let item = match &s.dtype {
            FieldType::Leaf(k) => PyTuple::new(
                py,
                [
                    s.name.clone().into_pyobject(py)?.into_any(),
                    PyString::new(py, k).into_any(),
                ],
            )?,
            FieldType::Struct(children) => PyTuple::new(
                py,
                [
                    s.name.clone().into_pyobject(py)?.into_any(),
                    spec_to_py(py, children)?.into_any(),
                ],
            )?,
        };
        list.append(item)?;
    }
    Ok(list)
}

/// Column values from Python: `(path, data)` or `(path, data, validity)`, `data` a
/// C-contiguous native-endian buffer for a fixed-size column, or a sequence of
/// `str`/`bytes` (`None` for a null) for a variable-length one; `validity` `None` or a
/// buffer of one byte per row, nonzero where the row holds a value.
pub(crate) fn values_from_py(
    kinds: &[(String, LeafKind)],
    cols: &Bound<'_, PyAny>,
) -> PyResult<Vec<(String, NullableValues)>> {
    let mut out = Vec::new();
    for item in cols.try_iter()? {
        let item = item?;
        let (name, data, mask): (String, Bound<'_, PyAny>, Option<Bound<'_, PyAny>>) =
            match item.extract() {
                Ok((n, d, m)) => (n, d, m),
                Err(_) => {
                    let (n, d) = item.extract()?;
                    (n, d, None)
                }
            };
        let mut validity: Option<Vec<bool>> = match mask.filter(|m| !m.is_none()) {
            Some(m) => Some(
                Buf::get(&m, false)?
                    .bytes()
                    .iter()
                    .map(|&b| b != 0)
                    .collect(),
            ),
            None => None,
        };
        let kind = kinds
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| *k)
            .ok_or_else(|| PyValueError::new_err(format!("no column {name:?}")))?;
        let v = match kind {
            LeafKind::Fixed(dtype) => {
                let b = Buf::get(&data, false)?;
                Values::Fixed {
                    dtype,
                    data: b.bytes().to_vec(),
                }
            }
            LeafKind::VarStr | LeafKind::VarBytes => {
                let mut items = Vec::new();
                for x in data.try_iter()? {
                    let x = x?;
                    if x.is_none() {
                        let row = items.len();
                        let flags = validity.get_or_insert_with(Vec::new);
                        if flags.len() <= row {
                            flags.resize(row + 1, true);
                        }
                        flags[row] = false;
                        items.push(Vec::new());
                    } else if let Ok(s) = x.cast::<PyString>() {
                        items.push(s.to_str()?.as_bytes().to_vec());
                    } else if let Ok(b) = x.cast::<PyBytes>() {
                        items.push(b.as_bytes().to_vec());
                    } else {
                        return Err(PyValueError::new_err(format!(
                            "column {name}: items must be str or bytes, not {}",
                            x.get_type().name()?
                        )));
                    }
                }
                if let Some(flags) = validity.as_mut() {
                    if flags.len() < items.len() {
                        flags.resize(items.len(), true);
                    }
                }
                Values::Var(items)
            }
        };
        out.push((name, NullableValues::new(v, validity)));
    }
    Ok(out)
}

pub(crate) fn leaf_kinds(t: &Table) -> Vec<(String, LeafKind)> {
    t.leaves()
        .iter()
        .map(|l| (l.path.clone(), l.kind))
        .collect()
}

/// A variable-length column's values as a list of `str` (`is_str`) or `bytes`.
pub(crate) fn var_list<'py>(
    py: Python<'py>,
    name: &str,
    values: Values,
    is_str: bool,
) -> PyResult<Bound<'py, PyList>> {
    let Values::Var(items) = values else {
        return Err(PyValueError::new_err(format!(
            "column {name} holds fixed-size values"
        )));
    };
    let list = PyList::empty(py);
    for it in items {
        if is_str {
            list.append(PyString::new(py, &String::from_utf8_lossy(&it)))?;
        } else {
            list.append(PyBytes::new(py, &it))?;
        }
    }
    Ok(list)
}

/// An open table.
#[pyclass(module = "blz._blz", frozen)]
pub(crate) struct RawTable {
    h: Handle<Table>,
}

impl std::ops::Deref for RawTable {
    type Target = Handle<Table>;
    fn deref(&self) -> &Handle<Table> {
        &self.h
    }
}

impl RawTable {
    /// A table handle made in this process.
    pub(crate) fn wrap(t: Table, writable: bool) -> RawTable {
        let path = t.path().to_path_buf();
        RawTable {
            h: Handle::new(t, &path, writable),
        }
    }

    /// One try of [`RawTable::rows`]: the key resolved against the handle's commit, the
    /// arrays allocated (the GIL taken for that alone), the rows read into them;
    /// `Error::Changed` when a refresh by another thread changed the table in between.
    fn rows_once(&self, sel: &blz::Selection, column: Option<&str>) -> FResult<Rows> {
        let (resolved, nrows, leaves) = self
            .h
            .read(|t| Ok((t.select(sel)?, t.nrows(), leaf_kinds_nullable(t, column))))?;
        let sel = RawSelection::new(sel, resolved, vec![nrows]);
        let (start, stop) = match sel.resolved.axes.first() {
            Some(a) if a.count > 0 => (a.start, a.start + (a.count - 1) * a.step + 1),
            _ => (0, 0),
        };
        let n = stop - start;
        let (fixed, valid) = Python::attach(|py| -> FResult<_> {
            let mut fixed = Vec::new();
            let mut valid = Vec::new();
            for (path, kind, nullable) in &leaves {
                if let LeafKind::Fixed(d) = kind {
                    let dt = numpy_dtype(py, &d.descr(Endianness::native()))?;
                    let a = empty_array(py, &[n], &dt, d.itemsize())?;
                    let b = Buf::get(&a, true)?;
                    fixed.push((path.clone(), a.unbind(), b));
                }
                if *nullable {
                    let dt = numpy_dtype(py, "|u1")?;
                    let a = empty_array(py, &[n], &dt, 1)?;
                    let b = Buf::get(&a, true)?;
                    valid.push((path.clone(), a.unbind(), b));
                }
            }
            Ok((fixed, valid))
        })?;
        let var = self.h.read(|t| {
            if t.nrows() != nrows || leaf_kinds_nullable(t, column) != leaves {
                return Err(Fail::Blz(blz::Error::Changed {
                    path: t.path().to_path_buf(),
                }));
            }
            let names: Vec<&str> = leaves
                .iter()
                .filter(|(_, k, _)| !matches!(k, LeafKind::Fixed(_)))
                .map(|(p, _, _)| p.as_str())
                .collect();
            let var = if n == 0 {
                names.iter().map(|_| Values::Var(Vec::new())).collect()
            } else {
                let mut outs: Vec<(&str, &mut [u8])> = fixed
                    .iter()
                    .map(|(p, _, b)| (p.as_str(), b.bytes_mut()))
                    .collect();
                let var = t.read_columns(start, stop, &mut outs, &names)?;
                for (p, _, b) in &valid {
                    t.validity_into(p, start, stop, b.bytes_mut())?;
                }
                var
            };
            Ok(names
                .iter()
                .zip(var)
                .map(|(p, v)| {
                    let is_str = leaves
                        .iter()
                        .any(|(q, k, _)| q == p && *k == LeafKind::VarStr);
                    (p.to_string(), v, is_str)
                })
                .collect())
        })?;
        Ok(Rows {
            sel,
            start,
            stop,
            fixed,
            valid,
            var,
        })
    }

    fn kinds(&self, py: Python<'_>) -> PyResult<Vec<(String, LeafKind)>> {
        detached(py, || self.read(|t| Ok(leaf_kinds(t))))
    }
}

/// A read of rows made but not yet shown to Python ([`RawTable::rows_once`]).
struct Rows {
    sel: RawSelection,
    start: u64,
    stop: u64,
    /// Per fixed-size leaf: its path, the numpy array filled, the buffer export (released
    /// with the GIL held).
    fixed: Vec<(String, Py<PyAny>, Buf)>,
    /// Per nullable leaf, the same for its validity (`uint8`, 0 at a null).
    valid: Vec<(String, Py<PyAny>, Buf)>,
    /// Per variable-length leaf: its path, its values, whether they are strings.
    var: Vec<(String, Values, bool)>,
}

/// Per leaf column `(path, kind, nullable)`: every one, or those of `column` (a leaf, or a
/// nested record's leaves).
fn leaf_kinds_nullable(t: &Table, column: Option<&str>) -> Vec<(String, LeafKind, bool)> {
    t.leaves()
        .iter()
        .filter(|l| {
            column.is_none_or(|c| {
                l.path == c || l.path.strip_prefix(c).is_some_and(|r| r.starts_with('/'))
            })
        })
        .map(|l| (l.path.clone(), l.kind, l.nullable))
        .collect()
}

/// The numpy dtype of a descriptor.
fn numpy_dtype<'py>(py: Python<'py>, descr: &str) -> PyResult<Bound<'py, PyAny>> {
    static DTYPE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    DTYPE.import(py, "numpy", "dtype")?.call1((descr,))
}

#[pymethods]
impl RawTable {
    /// `t[key]` for a basic key of rows (an int, a slice, `...`, `None` or a tuple of
    /// them), in one call, on the latest commit (made again when it met a writer's commit,
    /// `blz::on_latest_commit`): the key resolved by the library, the rows `start..stop` it
    /// spans read from every leaf column in one parallel pass (fixed-size ones into numpy
    /// arrays allocated here, variable-length ones as lists of `str` or `bytes`), and the
    /// validity of the nullable ones (`uint8` arrays, 0 at a null). `None` for an advanced
    /// key (arrays, lists, booleans); else `(changed, (start, stop, step), view, columns,
    /// validity)`: `changed` whether the handle showed a new commit since Python last
    /// asked, `view` the numpy key that makes the rows `start..stop:step` numpy's result,
    /// `columns` and `validity` dicts by leaf path. With `column` (a leaf's path, or a nested
    /// record's), only its leaves are read.
    #[pyo3(signature = (key, column=None))]
    fn rows<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        column: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let Some(sel) = selection_or_advanced(key)? else {
            return Ok(None);
        };
        let r = detached(py, || self.h.latest(|| self.rows_once(&sel, column)))?;
        let changed = detached(py, || Ok(self.h.take_unseen()))?;
        let step = r.sel.resolved.axes.first().map_or(1, |a| a.step.max(1));
        let columns = PyDict::new(py);
        let validity = PyDict::new(py);
        for (p, a, b) in r.fixed {
            drop(b);
            columns.set_item(p, a)?;
        }
        for (p, v, is_str) in r.var {
            let list = var_list(py, &p, v, is_str)?;
            columns.set_item(p, list)?;
        }
        for (p, a, b) in r.valid {
            drop(b);
            validity.set_item(p, a)?;
        }
        let view = r.sel.view(py)?;
        Ok(Some(PyTuple::new(
            py,
            [
                changed.into_pyobject(py)?.to_owned().into_any(),
                (r.start, r.stop, step).into_pyobject(py)?.into_any(),
                view.into_any(),
                columns.into_any(),
                validity.into_any(),
            ],
        )?))
    }

    /// Resolves a numpy key of rows (an int, a slice, `...`, `None` or a tuple of them)
    /// against the number of rows: the library checks it.
    fn select(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<RawSelection> {
        let sel = selection_of(key)?;
        detached(py, || {
            self.read(|t| {
                let r = t.select(&sel)?;
                Ok(RawSelection::new(&sel, r, vec![t.nrows()]))
            })
        })
    }

    /// Creates a table of `fields` (see [`field_from_py`]) holding `columns` (see
    /// [`values_from_py`]; none for an empty table), as one step.
    #[staticmethod]
    #[pyo3(signature = (path, fields, columns, chunklen, codec, clevel, filter, checksum_name, attrs, overwrite, superchunksize=None))]
    #[expect(clippy::too_many_arguments, reason = "blz.create's keyword arguments")]
    fn create(
        py: Python<'_>,
        path: Option<PathBuf>,
        fields: &Bound<'_, PyAny>,
        columns: Option<&Bound<'_, PyAny>>,
        chunklen: Option<u64>,
        codec: &str,
        clevel: u8,
        filter: &str,
        checksum_name: &str,
        attrs: Option<&str>,
        overwrite: bool,
        superchunksize: Option<u64>,
    ) -> PyResult<RawTable> {
        let fields = fields
            .try_iter()?
            .map(|f| field_from_py(&f?))
            .collect::<PyResult<Vec<Field>>>()?;
        let opts = table_options(
            codec,
            clevel,
            filter,
            chunklen,
            superchunksize,
            checksum_name,
            attrs,
            overwrite,
        )?;
        // The leaf kinds, to convert the columns before the table exists.
        let mut kinds = Vec::new();
        fn walk(prefix: &str, fields: &[Field], out: &mut Vec<(String, LeafKind)>) {
            for f in fields {
                let p = if prefix.is_empty() {
                    f.name.clone()
                } else {
                    format!("{prefix}/{}", f.name)
                };
                match &f.kind {
                    blz::table::FieldKind::Scalar(d) => out.push((p, LeafKind::Fixed(*d))),
                    blz::table::FieldKind::VarStr => out.push((p, LeafKind::VarStr)),
                    blz::table::FieldKind::VarBytes => out.push((p, LeafKind::VarBytes)),
                    blz::table::FieldKind::Struct(c) => walk(&p, c, out),
                }
            }
        }
        walk("", &fields, &mut kinds);
        let batch = columns.map(|c| values_from_py(&kinds, c)).transpose()?;
        let t = detached(py, || {
            let (storage, path) = paths::for_new(path.as_deref(), overwrite)?;
            let batches: Vec<blz::Result<Vec<(String, NullableValues)>>> =
                batch.into_iter().map(Ok).collect();
            Ok(Table::create_from(storage, &path, fields, &opts, batches)?)
        })?;
        Ok(RawTable::wrap(t, true))
    }

    /// Creates a table of the CSV file `csv` (`blz::csv`: a header row of column paths,
    /// types inferred unless `schema` declares them, empty fields missing, ISO dates and
    /// timestamps recognised unless `dates` is false), as one step.
    #[staticmethod]
    #[pyo3(signature = (path, csv, schema, delimiter, dates, chunklen, codec, clevel, filter, checksum_name, attrs, overwrite, superchunksize=None))]
    #[expect(
        clippy::too_many_arguments,
        reason = "blz.from_csv's keyword arguments"
    )]
    fn from_csv(
        py: Python<'_>,
        path: PathBuf,
        csv: PathBuf,
        schema: Option<&str>,
        delimiter: char,
        dates: bool,
        chunklen: Option<u64>,
        codec: &str,
        clevel: u8,
        filter: &str,
        checksum_name: &str,
        attrs: Option<&str>,
        overwrite: bool,
        superchunksize: Option<u64>,
    ) -> PyResult<RawTable> {
        let delimiter = u8::try_from(delimiter)
            .ok()
            .filter(u8::is_ascii)
            .ok_or_else(|| {
                PyValueError::new_err(format!("delimiter {delimiter:?}: one ASCII character"))
            })?;
        let schema = schema.map(str::to_string);
        let mut opts = table_options(
            codec,
            clevel,
            filter,
            chunklen,
            superchunksize,
            checksum_name,
            attrs,
            overwrite,
        )?;
        let t = detached(py, || {
            let csv_opts = blz::csv::CsvOptions {
                delimiter,
                schema: schema
                    .as_deref()
                    .map(blz::csv::parse_schema)
                    .transpose()?
                    .unwrap_or_default(),
                dates,
            };
            let plan = blz::csv::scan_table_with(&csv, &csv_opts)?;
            opts.expectedlen = Some(plan.rows());
            let (storage, path) = blz::storage::for_new_path(&path, overwrite)?;
            let rows = blz::csv::table_batch_rows(blz::ordered::DEFAULT_BATCH_BYTES);
            Ok(plan.create_table(storage, &path, &opts, rows, |_| {})?)
        })?;
        Ok(RawTable::wrap(t, true))
    }

    /// The path as given (a `str`: a URL's `//` kept, which `pathlib` would fold).
    #[getter]
    fn path(&self) -> std::ffi::OsString {
        self.h.path().as_os_str().to_owned()
    }

    #[getter]
    fn writable(&self) -> bool {
        self.h.writable()
    }

    /// Number of rows.
    fn nrows(&self, py: Python<'_>) -> PyResult<u64> {
        detached(py, || self.read(|t| Ok(t.nrows())))
    }

    /// `(nbytes, cbytes)` of the whole table.
    fn sizes(&self, py: Python<'_>) -> PyResult<(u64, u64)> {
        detached(py, || {
            self.read(|t| Ok((t.sizes().nbytes, t.sizes().cbytes)))
        })
    }

    /// The schema (see [`spec_to_py`]).
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let specs = detached(py, || self.read(|t| Ok(t.storage_meta().dtype.clone())))?;
        spec_to_py(py, &specs)
    }

    /// The leaf columns: `(path, kind)`, kind a numpy descriptor in native byte order,
    /// `varstr` or `varbytes`.
    fn leaves(&self, py: Python<'_>) -> PyResult<Vec<(String, String)>> {
        Ok(self
            .kinds(py)?
            .into_iter()
            .map(|(p, k)| {
                let name = match k {
                    LeafKind::Fixed(d) => d.descr(Endianness::native()),
                    other => other.name(),
                };
                (p, name)
            })
            .collect())
    }

    /// `(id, generation, [(path, chunklen, superchunksize)])`: the table's identity (empty
    /// when it predates identities), its commit generation, and per leaf column its rows per
    /// chunk and chunks per superchunk file.
    fn layout(&self, py: Python<'_>) -> PyResult<TableLayout> {
        detached(py, || {
            self.read(|t| {
                Ok((
                    t.storage_meta().id.clone().unwrap_or_default(),
                    t.sizes().generation,
                    t.leaves()
                        .iter()
                        .map(|l| (l.path.clone(), l.storage.chunklen, l.storage.superchunksize))
                        .collect(),
                ))
            })
        })
    }

    /// Per leaf column `(path, nbytes, cbytes, chunklen, codec, clevel)`.
    fn column_info(&self, py: Python<'_>) -> PyResult<Vec<ColumnInfo>> {
        detached(py, || {
            self.read(|t| {
                let cols = t.sizes().columns.clone().unwrap_or_default();
                Ok(t.leaves()
                    .iter()
                    .map(|l| {
                        let (nb, cb) = cols.get(&l.path).map_or((0, 0), |c| (c.nbytes, c.cbytes));
                        (
                            l.path.clone(),
                            nb,
                            cb,
                            l.storage.chunklen,
                            l.storage.compression.codec.name().to_string(),
                            l.storage.compression.clevel,
                        )
                    })
                    .collect())
            })
        })
    }

    /// Brings a read-only handle to the table's latest commit (`blz::Table::refresh`);
    /// whether it changed.
    fn refresh(&self, py: Python<'_>) -> PyResult<bool> {
        detached(py, || self.h.refresh())
    }

    /// Decodes rows `start..end` of a fixed-size column into `out`.
    fn read_column_into(
        &self,
        py: Python<'_>,
        name: &str,
        start: u64,
        end: u64,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let out = Buf::get(out, true)?;
        detached(py, || {
            self.read(|t| Ok(t.column_rows_into(name, start, end, out.bytes_mut())?))
        })
    }

    /// The validity of rows `start..end` of a column into `out` (a `uint8` array: 1 where a
    /// row holds a value, 0 where it is null); whether the column is nullable (when not,
    /// `out` is all 1s). See `blz::Table::validity_into`.
    fn read_validity_into(
        &self,
        py: Python<'_>,
        name: &str,
        start: u64,
        end: u64,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let out = Buf::get(out, true)?;
        detached(py, || {
            self.read(|t| Ok(t.validity_into(name, start, end, out.bytes_mut())?))
        })
    }

    /// The validity of the rows at `indices` (a `uint64` array) of a column, into `out` (as
    /// `read_validity_into`).
    fn take_validity_into(
        &self,
        py: Python<'_>,
        name: &str,
        indices: Vec<u64>,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let out = Buf::get(out, true)?;
        detached(py, || {
            self.read(|t| {
                let dst = out.bytes_mut();
                let nullable = t.is_nullable(name)?;
                match t.take_validity(&indices, name)? {
                    Some(f) => dst.iter_mut().zip(f).for_each(|(d, v)| *d = u8::from(v)),
                    None => dst.fill(1),
                }
                Ok(nullable)
            })
        })
    }

    /// Rows `start..end` of a dictionary-encoded column: their codes into `out` (an `int32`
    /// array; −1 at null rows), and the dictionary they index. See
    /// `blz::Table::column_codes`.
    fn read_codes_into(
        &self,
        py: Python<'_>,
        name: &str,
        start: u64,
        end: u64,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<String>> {
        let out = Buf::get(out, true)?;
        detached(py, || {
            self.read(|t| {
                let v = t.column_codes(name, start, end)?;
                let dst = out.bytes_mut();
                if dst.len() != v.codes.len() * 4 {
                    return Err(Fail::Blz(blz::Error::InvalidArgument(format!(
                        "a buffer of {} bytes given for the codes of {} rows of column {name}",
                        dst.len(),
                        v.codes.len()
                    ))));
                }
                for (d, c) in dst.chunks_exact_mut(4).zip(&v.codes) {
                    d.copy_from_slice(&c.to_ne_bytes());
                }
                Ok(v.dictionary)
            })
        })
    }

    /// Per leaf column `(path, nullable, pandas dtype or None, time zone or None)`.
    #[allow(clippy::type_complexity)]
    fn leaf_extras(
        &self,
        py: Python<'_>,
    ) -> PyResult<Vec<(String, bool, Option<String>, Option<String>)>> {
        detached(py, || {
            self.read(|t| {
                Ok(t.leaves()
                    .iter()
                    .map(|l| {
                        (
                            l.path.clone(),
                            l.nullable,
                            l.pandas.clone(),
                            l.timezone.clone(),
                        )
                    })
                    .collect())
            })
        })
    }

    /// The whole table as an Arrow C stream in a PyCapsule named `arrow_array_stream` (the
    /// Arrow PyCapsule protocol), in the schema of the `arrow_schema` capsule
    /// `requested_schema` when blz can produce it (see the `arrow` module), else its own.
    #[pyo3(signature = (requested_schema=None))]
    fn arrow_stream<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let requested = match requested_schema {
            None => None,
            Some(obj) => {
                let cap = obj.cast::<PyCapsule>().map_err(|_| {
                    PyTypeError::new_err("requested_schema must be an 'arrow_schema' PyCapsule")
                })?;
                let ptr = cap.pointer_checked(Some(c"arrow_schema"))?;
                // SAFETY: a capsule named "arrow_schema" holds a pointer to a valid Arrow C
                // schema (the protocol's contract), owned by the capsule, which outlives this
                // borrow; the schema is only read (converted into an owned `Schema`).
                let ffi = unsafe { ptr.cast::<arrow_schema::ffi::FFI_ArrowSchema>().as_ref() };
                Some(arrow_schema::Schema::try_from(ffi).map_err(|e| {
                    PyValueError::new_err(format!("requested_schema is not a schema: {e}"))
                })?)
            }
        };
        let stream = detached(py, || {
            self.read(|t| match arrow::table_stream(t, requested.as_ref()) {
                Ok(s) => Ok(s),
                Err(arrow_schema::ArrowError::ExternalError(e)) => match e.downcast::<blz::Error>()
                {
                    Ok(e) => Err(Fail::Blz(*e)),
                    Err(e) => Err(Fail::Py(PyValueError::new_err(e.to_string()))),
                },
                Err(e) => Err(Fail::Py(PyValueError::new_err(e.to_string()))),
            })
        })?;
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// Rows `start..end` of several columns in one parallel pass (see
    /// `blz::Table::read_columns`): each fixed-size column of `into` (`(path, array)` pairs)
    /// decoded into its numpy array; returns the values of the variable-length columns of
    /// `var` as lists (as `read_var_column`), in order.
    fn read_columns<'py>(
        &self,
        py: Python<'py>,
        start: u64,
        end: u64,
        into: Vec<(String, Bound<'py, PyAny>)>,
        var: Vec<String>,
    ) -> PyResult<Vec<Bound<'py, PyList>>> {
        let bufs = into
            .iter()
            .map(|(p, o)| Ok((p.as_str(), Buf::get(o, true)?)))
            .collect::<PyResult<Vec<_>>>()?;
        let (values, is_str) = detached(py, || {
            let mut outs: Vec<(&str, &mut [u8])> =
                bufs.iter().map(|(p, b)| (*p, b.bytes_mut())).collect();
            let names: Vec<&str> = var.iter().map(String::as_str).collect();
            self.read(|t| {
                let is_str: Vec<bool> = names
                    .iter()
                    .map(|n| {
                        t.leaves()
                            .iter()
                            .any(|l| l.path == *n && l.kind == LeafKind::VarStr)
                    })
                    .collect();
                Ok((t.read_columns(start, end, &mut outs, &names)?, is_str))
            })
        })?;
        values
            .into_iter()
            .zip(is_str)
            .zip(&var)
            .map(|((v, is_str), name)| var_list(py, name, v, is_str))
            .collect()
    }

    /// Rows `start..end` of a variable-length column, as a list of `str` (string columns) or
    /// `bytes`.
    fn read_var_column<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        start: u64,
        end: u64,
    ) -> PyResult<Bound<'py, PyList>> {
        let (values, is_str) = detached(py, || {
            self.read(|t| {
                let is_str = t
                    .leaves()
                    .iter()
                    .any(|l| l.path == name && l.kind == LeafKind::VarStr);
                Ok((t.column_rows(name, start, end)?, is_str))
            })
        })?;
        var_list(py, name, values, is_str)
    }

    /// Appends rows (every column, see [`values_from_py`]) in one transaction.
    fn append(&self, py: Python<'_>, columns: &Bound<'_, PyAny>) -> PyResult<()> {
        let cols = values_from_py(&self.kinds(py)?, columns)?;
        detached(py, || {
            self.write(|t| {
                let (names, vals): (Vec<String>, Vec<NullableValues>) = cols.into_iter().unzip();
                let refs: Vec<(&str, NullableValues)> =
                    names.iter().map(String::as_str).zip(vals).collect();
                Ok(t.append(&refs)?)
            })
        })
    }

    /// Overwrites rows from `start` (every column given, see [`values_from_py`]).
    fn write_rows(&self, py: Python<'_>, start: u64, columns: &Bound<'_, PyAny>) -> PyResult<()> {
        let cols = values_from_py(&self.kinds(py)?, columns)?;
        detached(py, || {
            self.write(|t| {
                let (names, vals): (Vec<String>, Vec<NullableValues>) = cols.into_iter().unzip();
                let refs: Vec<(&str, NullableValues)> =
                    names.iter().map(String::as_str).zip(vals).collect();
                Ok(t.write_rows(start, &refs)?)
            })
        })
    }

    /// Sets the number of rows.
    fn resize(&self, py: Python<'_>, rows: u64) -> PyResult<()> {
        detached(py, || self.write(|t| Ok(t.resize(rows)?)))
    }

    /// Adds a column (a schema node, see [`field_from_py`]) filled with its default.
    fn add_column(&self, py: Python<'_>, field: &Bound<'_, PyAny>) -> PyResult<()> {
        let f = field_from_py(field)?;
        detached(py, || self.write(|t| Ok(t.add_column(f)?)))
    }

    /// Drops a column (a leaf or a whole nested record).
    fn drop_column(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        detached(py, || self.write(|t| Ok(t.drop_column(path)?)))
    }

    /// Renames a column (its last path component becomes `new_name`).
    fn rename_column(&self, py: Python<'_>, path: &str, new_name: &str) -> PyResult<()> {
        detached(py, || self.write(|t| Ok(t.rename_column(path, new_name)?)))
    }

    /// The user attributes as JSON.
    fn attrs_json(&self, py: Python<'_>) -> PyResult<String> {
        detached(py, || {
            self.read(|t| Ok(serde_json::Value::Object(t.attrs()?).to_string()))
        })
    }

    /// Replaces the user attributes (a JSON object).
    fn set_attrs_json(&self, py: Python<'_>, text: &str) -> PyResult<()> {
        let m = json_map(Some(text))?;
        detached(py, || self.write(|t| Ok(t.set_attrs(m)?)))
    }

    /// Checks every chunk and digest of every column.
    fn verify(&self, py: Python<'_>) -> PyResult<Vec<Problem>> {
        detached(py, || self.read(|t| Ok(errors_list(t.verify(|_, _| {})))))
    }

    /// Releases the writer lock (the handle reads on).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        detached(py, || self.h.close())
    }
}
