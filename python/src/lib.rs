//! `blz._blz`: the native half of blz's Python package.
//!
//! A thin client of the blz library: every class here wraps one of the library's datasets
//! (`Dataset`, `Table`, `Layer`, a bcolz reader) and takes what Python hands it in the
//! simplest form (selections as `blz::Selection`, contiguous native-endian buffers, JSON text for
//! attributes). numpy's conventions (indexing, broadcasting, dtypes) live in the Python
//! package `blz`, which is what users import.
//!
//! Decoding and encoding run with the GIL released, on the library's rayon pool; a read
//! decodes straight into the buffer of the numpy array the caller allocated. A panic never
//! crosses into Python: it becomes a `blz.Error`.

use blz::array::staged::{StagedCreate, StagedWrite};
use blz::bcolz::{CarrayReader, CtableReader, Kind as BcolzKind};
use blz::layer::{
    ColumnDef, Cursor, Layer, LayerSchema, LayerWriter, SortOptions, SortingLayerWriter, Value,
    ValueType,
};
use blz::selection::{Item, Resolved, Selection};
use blz::table::{
    ColumnOptions, Field, FieldSpec, FieldType, LeafKind, NullableValues, Table, TableOptions,
    Values,
};
use blz::{CreateOptions, DType, Dataset, Endianness};
mod arrow;
mod block_cache;
mod buffers;
mod expr;
mod fancy;
mod memory;
mod paths;
mod query;
mod reduce;
mod sql;

use blz::process::PerProcess;
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyIndexError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyBytes, PyCapsule, PyEllipsis, PyInt, PyIterator, PyList, PySlice, PyString, PyTuple,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

// ---------------------------------------------------------------------------------------
// Errors

/// The `blz` exception class for a library error (classes are defined in `blz/_errors.py`).
fn error_class(e: &blz::Error) -> &'static str {
    use blz::Error as E;
    match e {
        E::InvalidHeader { .. }
        | E::InvalidChunk { .. }
        | E::ChecksumMismatch { .. }
        | E::InvalidMetadata { .. }
        | E::ChunkOutOfRange { .. } => "CorruptionError",
        E::Locked { .. } => "LockedError",
        E::ReadOnly { .. } => "ReadOnlyError",
        E::Changed { .. } => "ChangedError",
        E::Conflict { .. } => "ConflictError",
        E::OutOfBounds { .. } => "OutOfBoundsError",
        E::Mismatch { .. } => "MismatchError",
        E::InvalidArgument(_) | E::InvalidExpression { .. } | E::DictionaryFull { .. } => {
            "InvalidArgumentError"
        }
        E::Sql(_) => "SqlError",
        E::Unsupported { .. } => "UnsupportedError",
        E::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => "NotFoundError",
        _ => "Error",
    }
}

/// The file and chunk an error names, when it names them.
fn error_place(e: &blz::Error) -> (Option<PathBuf>, Option<u64>) {
    use blz::Error as E;
    match e {
        E::InvalidChunk { path, chunk, .. } | E::ChecksumMismatch { path, chunk, .. } => {
            (Some(path.clone()), (*chunk != u64::MAX).then_some(*chunk))
        }
        E::ChunkOutOfRange { path, chunk, .. } => (Some(path.clone()), Some(*chunk)),
        E::Io { path, .. }
        | E::InvalidHeader { path, .. }
        | E::InvalidMetadata { path, .. }
        | E::Locked { path, .. }
        | E::ReadOnly { path }
        | E::Unsupported { path, .. }
        | E::Changed { path }
        | E::Conflict { path } => (Some(path.clone()), None),
        E::OutOfBounds { dataset, .. }
        | E::Mismatch { dataset, .. }
        | E::DictionaryFull { dataset, .. } => (Some(dataset.clone()), None),
        _ => (None, None),
    }
}

/// Builds the Python exception for a library error: the class by kind, the library's message
/// (which names the file and the chunk), and `filename` and `chunk` attributes.
fn raise(py: Python<'_>, class: &str, msg: String, place: (Option<PathBuf>, Option<u64>)) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = py.import("blz._errors")?.getattr(class)?;
        let exc = cls.call1((msg.clone(),))?;
        let (path, chunk) = place;
        exc.setattr("filename", path.map(|p| p.display().to_string()))?;
        exc.setattr("chunk", chunk)?;
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|e| e)
}

/// A failure on the Rust side, before it becomes a Python exception (which needs the GIL).
enum Fail {
    Blz(blz::Error),
    Panic(String),
    Py(PyErr),
}

impl From<blz::Error> for Fail {
    fn from(e: blz::Error) -> Fail {
        Fail::Blz(e)
    }
}

impl From<PyErr> for Fail {
    fn from(e: PyErr) -> Fail {
        Fail::Py(e)
    }
}

impl Fail {
    fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Fail::Blz(e) => {
                let class = error_class(&e);
                let place = error_place(&e);
                raise(py, class, e.to_string(), place)
            }
            Fail::Panic(m) => raise(
                py,
                "Error",
                format!("internal error in blz: {m}"),
                (None, None),
            ),
            Fail::Py(e) => e,
        }
    }
}

type FResult<T> = std::result::Result<T, Fail>;

/// The process that imported the module: a call in another (a child forked from it) runs
/// on threads of that process's own ([`blz::in_this_process`]).
static HOME: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// Runs `f` with the GIL released; a panic inside becomes a `blz.Error`.
fn detached<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce() -> FResult<T> + Send,
    T: Send,
{
    let r = py.detach(|| {
        let run = || std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        // In a child forked from the process that imported blz, on threads of its own.
        let home = *HOME.get_or_init(std::process::id);
        let ran = match blz::in_this_process(home, run) {
            Ok(ran) => ran,
            Err(e) => return Err(Fail::from(e)),
        };
        ran.unwrap_or_else(|p| Err(Fail::Panic(panic_message(p.as_ref()))))
    });
    r.map_err(|e| e.into_py(py))
}

/// The message a panic carried (`panic!`'s text), or "a panic".
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string())
}

fn lock_err(what: &str) -> Fail {
    Fail::Panic(format!("the {what} lock was poisoned by an earlier panic"))
}

// ---------------------------------------------------------------------------------------
// Buffers

/// A contiguous buffer exported by a Python object (a numpy array), held for the duration of
/// one call. Holding the `PyUntypedBuffer` keeps the export (and the memory) alive.
struct Buf {
    buf: PyUntypedBuffer,
}

impl Buf {
    fn get(obj: &Bound<'_, PyAny>, writable: bool) -> PyResult<Buf> {
        let buf = match PyUntypedBuffer::get(obj) {
            Ok(b) => b,
            // numpy exports no buffer of datetime64/timedelta64 arrays: their int64 view has
            // the same bytes (the buffer holds the view, and the view the array).
            Err(e) => match obj.getattr("dtype").and_then(|d| d.getattr("kind")) {
                Ok(k) if matches!(k.extract::<String>().as_deref(), Ok("M" | "m")) => {
                    PyUntypedBuffer::get(&obj.call_method1("view", ("i8",))?)?
                }
                _ => return Err(e),
            },
        };
        if !buf.is_c_contiguous() {
            return Err(PyValueError::new_err("blz needs a C-contiguous buffer"));
        }
        if writable && buf.readonly() {
            return Err(PyValueError::new_err("blz needs a writable buffer"));
        }
        Ok(Buf { buf })
    }

    fn bytes(&self) -> &[u8] {
        let len = self.buf.len_bytes();
        if len == 0 {
            return &[];
        }
        // SAFETY: the buffer is C-contiguous (checked in `get`) and `len_bytes` long, and the
        // export stays alive (numpy cannot free or resize the memory) while `self` does. The
        // bytes are only read. Another Python thread could write to the same array while the
        // GIL is released, as it could during any numpy operation that releases the GIL;
        // blz then reads some old and some new values, and nothing else.
        unsafe { std::slice::from_raw_parts(self.buf.buf_ptr() as *const u8, len) }
    }

    #[expect(
        clippy::mut_from_ref,
        reason = "the memory is Python's, not self's: exclusivity is the caller's contract"
    )]
    fn bytes_mut(&self) -> &mut [u8] {
        let len = self.buf.len_bytes();
        if len == 0 {
            return &mut [];
        }
        // SAFETY: as in `bytes`; the buffer is writable (checked in `get`), and the arrays
        // blz fills are freshly allocated by the calling Python function, which hands them
        // to no one before this call returns, so this is the only reference to the memory.
        unsafe { std::slice::from_raw_parts_mut(self.buf.buf_ptr() as *mut u8, len) }
    }
}

// ---------------------------------------------------------------------------------------
// Options and types

fn parse_dtype(descr: &str) -> PyResult<(DType, Option<Endianness>)> {
    DType::parse_descr(descr).map_err(|e| PyValueError::new_err(e.to_string()))
}

fn json_map(text: Option<&str>) -> PyResult<serde_json::Map<String, serde_json::Value>> {
    match text {
        None => Ok(serde_json::Map::new()),
        Some(t) => match blz::meta::parse_json_exact(t) {
            Ok(serde_json::Value::Object(m)) => Ok(m),
            // An integer past 64 bits, which JSON would keep only as a float, named.
            Err(blz::Error::InvalidArgument(m))
                if serde_json::from_str::<serde_json::Value>(t).is_ok() =>
            {
                Err(PyValueError::new_err(format!("attribute {m}")))
            }
            _ => Err(PyValueError::new_err("attributes must be a JSON object")),
        },
    }
}

fn json_value(text: Option<&str>) -> PyResult<serde_json::Value> {
    match text {
        None => Ok(serde_json::Value::Null),
        Some(t) => blz::meta::parse_json_exact(t).map_err(|e| PyValueError::new_err(e.to_string())),
    }
}

/// Compression settings from the Python names (`codec`, `clevel`, `filter`).
fn compression(codec: &str, clevel: u8, filter: &str) -> PyResult<blz::meta::Compression> {
    let filters: Vec<&str> = match filter {
        "none" | "" => vec![],
        "shuffle" => vec!["shuffle"],
        "bitshuffle" => vec!["bitshuffle"],
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown filter {other:?} (shuffle, bitshuffle or none)"
            )))
        }
    };
    serde_json::from_value(serde_json::json!({
        "codec": codec, "clevel": clevel, "filters": filters,
    }))
    .map_err(|_| {
        PyValueError::new_err(format!(
            "unknown codec {codec:?} (blosclz, lz4, lz4hc, zlib or zstd)"
        ))
    })
}

fn checksum(name: &str) -> PyResult<blz::blpk::Checksum> {
    blz::blpk::Checksum::from_name(name)
        .ok_or_else(|| PyValueError::new_err(format!("unknown checksum {name:?}")))
}

// ---------------------------------------------------------------------------------------
// Selections

/// The error numpy's basic indexing gives a key it does not take (advanced indexing: arrays,
/// lists, booleans), as blz raised it before selections reached Rust.
fn not_basic(k: &Bound<'_, PyAny>) -> PyErr {
    let shown = k
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "?".into());
    PyIndexError::new_err(format!(
        "blz supports numpy's basic indexing: integers, slices (`:`), ellipsis (`...`) and \
         numpy.newaxis (`None`); got {shown}"
    ))
}

/// A Python integer (anything with `__index__`). One beyond `i128` saturates: every use
/// clamps it (a slice bound or step) or finds it out of bounds (an index) all the same.
fn py_index(v: &Bound<'_, PyAny>) -> PyResult<i128> {
    match v.extract::<i128>() {
        Ok(i) => Ok(i),
        Err(e) if e.is_instance_of::<PyOverflowError>(v.py()) => {
            Ok(if v.lt(0)? { i128::MIN } else { i128::MAX })
        }
        Err(e) => Err(e),
    }
}

/// One item of a numpy key as a selection item: an integer, a slice, `...` or `None`.
fn item_of(k: &Bound<'_, PyAny>) -> PyResult<Item> {
    let py = k.py();
    if k.is_none() {
        return Ok(Item::NewAxis);
    }
    if k.is(PyEllipsis::get(py)) {
        return Ok(Item::Ellipsis);
    }
    if let Ok(s) = k.cast::<PySlice>() {
        let part = |name: &str| -> PyResult<Option<i128>> {
            let v = s.getattr(name)?;
            if v.is_none() {
                return Ok(None);
            }
            py_index(&v).map(Some).map_err(|e| {
                if e.is_instance_of::<PyTypeError>(py) {
                    PyTypeError::new_err(
                        "slice indices must be integers or None or have an __index__ method",
                    )
                } else {
                    e
                }
            })
        };
        return Ok(Item::Slice {
            start: part("start")?,
            stop: part("stop")?,
            step: part("step")?,
        });
    }
    // numpy takes booleans and arrays (even 0-d ones) as advanced indices, which blz does
    // not support.
    if k.is_instance_of::<PyBool>() {
        return Err(not_basic(k));
    }
    if !k.is_instance_of::<PyInt>() {
        let ndarray = py.import("numpy")?.getattr("ndarray")?;
        if k.is_instance(&ndarray)? {
            return Err(not_basic(k));
        }
    }
    match py_index(k) {
        Ok(i) => Ok(Item::Index(i)),
        Err(e) if e.is_instance_of::<PyTypeError>(py) => Err(not_basic(k)),
        Err(e) => Err(e),
    }
}

/// A numpy key (an item or a tuple of items) as a selection.
fn selection_of(key: &Bound<'_, PyAny>) -> PyResult<Selection> {
    let items = match key.cast::<PyTuple>() {
        Ok(t) => t.iter().map(|k| item_of(&k)).collect::<PyResult<_>>()?,
        Err(_) => vec![item_of(key)?],
    };
    Ok(Selection::new(items))
}

/// A numpy key resolved by the library against a dataset's shape (`blz::Selection::resolve`,
/// where it is checked): what a read fills, what a write takes, and how numpy sees it.
#[pyclass(module = "blz._blz", frozen)]
struct RawSelection {
    resolved: Resolved,
    /// The shape it was resolved against.
    against: Vec<u64>,
    /// numpy gives a scalar: every axis indexed, no `...`, no new axis.
    scalar: bool,
}

impl RawSelection {
    fn new(sel: &Selection, resolved: Resolved, against: Vec<u64>) -> RawSelection {
        RawSelection {
            scalar: !sel.has_ellipsis() && resolved.shape.is_empty(),
            resolved,
            against,
        }
    }

    /// The selection's axes, or `Error::Changed` when the dataset's shape is no longer the
    /// one it was resolved against (a read handle refreshed meanwhile: resolve again).
    fn axes_for(&self, shape: &[u64], path: &Path) -> FResult<&[blz::selection::AxisSel]> {
        if shape != self.against.as_slice() {
            return Err(Fail::Blz(blz::Error::Changed {
                path: path.to_path_buf(),
            }));
        }
        Ok(&self.resolved.axes)
    }
}

/// Resolves a numpy key against `shape` (a dataset read some other way: a bcolz carray);
/// errors name `path`.
#[pyfunction]
fn select(key: &Bound<'_, PyAny>, shape: Vec<u64>, path: PathBuf) -> PyResult<RawSelection> {
    let sel = selection_of(key)?;
    let r = sel
        .resolve(&shape, &path)
        .map_err(|e| Fail::Blz(e).into_py(key.py()))?;
    Ok(RawSelection::new(&sel, r, shape))
}

#[pymethods]
impl RawSelection {
    /// The shape of the buffer a read fills and a write takes: every axis's count, in
    /// ascending positions.
    #[getter]
    fn counts(&self) -> Vec<u64> {
        self.resolved.counts()
    }

    /// The result's shape (indexed axes dropped, new axes of 1 added).
    #[getter]
    fn shape(&self) -> Vec<u64> {
        self.resolved.shape.clone()
    }

    /// Per axis `(start, step, count, reversed, keep)`: positions `start, start + step, ...`
    /// (ascending), delivered largest first when `reversed`, dropped when not `keep`.
    #[getter]
    fn axes(&self) -> Vec<(u64, u64, u64, bool, bool)> {
        self.resolved
            .axes
            .iter()
            .map(|s| (s.start, s.step, s.count, s.reversed, s.keep))
            .collect()
    }

    /// The numpy key that turns the buffer (`counts`) into numpy's result: reverses
    /// reversed axes, drops indexed ones, inserts new ones, and gives a scalar where numpy
    /// would (a 0-d array after a `...`).
    #[getter]
    fn view<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let whole = PySlice::full(py).into_any();
        let backwards =
            py.import("builtins")?
                .getattr("slice")?
                .call1((py.None(), py.None(), -1))?;
        let none = py.None().into_bound(py);
        let mut out: Vec<Bound<'py, PyAny>> = Vec::new();
        let mut new_axes = self.resolved.new_axes.iter().peekable();
        let mut dim = 0;
        for s in &self.resolved.axes {
            while new_axes.next_if(|&&k| k == dim).is_some() {
                out.push(none.clone());
                dim += 1;
            }
            if s.keep {
                out.push(if s.reversed {
                    backwards.clone()
                } else {
                    whole.clone()
                });
                dim += 1;
            } else {
                out.push(0i64.into_pyobject(py)?.into_any());
            }
        }
        out.extend(new_axes.map(|_| none.clone()));
        if !self.scalar {
            out.push(PyEllipsis::get(py).to_owned().into_any());
        }
        PyTuple::new(py, out)
    }
}

/// One problem `verify` found: the `blz` exception class, the message, the file, the chunk.
type Problem = (String, String, Option<String>, Option<u64>);

/// `(shape, descr, chunks, nbytes, cbytes, nchunks, nfiles)` of an array.
type ArrayState = (Vec<u64>, String, Vec<u64>, u64, u64, u64, u64);

/// `(path, nbytes, cbytes, chunklen, codec, clevel)` of a table column.
type ColumnInfo = (String, u64, u64, u64, String, u8);

/// `RawTable::layout`'s answer.
type TableLayout = (String, u64, Vec<(String, u64, u64)>);

/// `locate`'s answer per file: `(path, host, location, kind)`.
type Located = (PathBuf, String, String, String);

fn errors_list(errors: Vec<blz::Error>) -> Vec<Problem> {
    errors
        .into_iter()
        .map(|e| {
            let (p, c) = error_place(&e);
            (
                error_class(&e).to_string(),
                e.to_string(),
                p.map(|p| p.display().to_string()),
                c,
            )
        })
        .collect()
}

impl AsRef<[u8]> for Buf {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

/// The next buffer of a Python iterator, for a library call that takes batches; the GIL is
/// taken for the call into Python only. A Python exception is kept in `failed` (for the
/// caller to re-raise) and ends the batches with an error, so the library call fails.
fn next_batch(it: &Py<PyIterator>, failed: &Mutex<Option<PyErr>>) -> Option<blz::Result<Buf>> {
    Python::attach(|py| {
        let mut it = it.bind(py).clone();
        let got = it
            .next()?
            .and_then(|obj| Buf::get(&obj, false))
            .map_err(|e| {
                let msg = format!("a batch could not be read: {e}");
                if let Ok(mut f) = failed.lock() {
                    *f = Some(e);
                }
                blz::Error::InvalidArgument(msg)
            });
        Some(got)
    })
}

// ---------------------------------------------------------------------------------------
// Arrays

/// A dataset opened again in a forked child ([`RawArray::here`]): for writing when the
/// handle was writable, unless another process holds the writer lock, then for reading.
fn reopen<D>(
    writable: bool,
    open_rw: impl FnOnce() -> blz::Result<D>,
    open: impl FnOnce() -> blz::Result<D>,
) -> FResult<D> {
    if writable {
        match open_rw() {
            Err(blz::Error::Locked { .. }) => {}
            r => return Ok(r?),
        }
    }
    Ok(open()?)
}

/// An open N-d dataset.
#[pyclass(module = "blz._blz", frozen)]
struct RawArray {
    /// The dataset, per process: see [`RawArray::here`].
    ds: PerProcess<RwLock<Dataset>>,
    path: PathBuf,
    /// Whether the handle writes (until `close`).
    writable: AtomicBool,
}

impl RawArray {
    /// The dataset as this process has it. In a child forked since the handle was opened
    /// (`multiprocessing`, PyTorch's data loaders), the dataset is opened again there on
    /// first use: the parent's handle may be locked by one of the parent's threads, which
    /// the child does not have (a read in progress at the fork). A read-write handle opens
    /// for writing again, or, while another process (the parent) holds the writer lock,
    /// read-only: the child reads, and each write tries for the lock ([`Self::write`]).
    fn here(&self) -> FResult<&RwLock<Dataset>> {
        self.ds.get_or_try_init(|| {
            let writable = self.writable.load(Ordering::Relaxed);
            Ok(RwLock::new(reopen(
                writable,
                || Dataset::open_rw(&self.path),
                || Dataset::open(&self.path),
            )?))
        })
    }

    fn read<T>(&self, f: impl FnOnce(&Dataset) -> FResult<T>) -> FResult<T> {
        let ds = self.here()?.read().map_err(|_| lock_err("dataset"))?;
        f(&ds)
    }

    /// Runs a write. A writable handle that a forked child opened read-only (its parent
    /// held the writer lock, [`Self::here`]) takes the lock first: `LockedError` naming the
    /// holder while it is held.
    fn write<T>(&self, f: impl FnOnce(&mut Dataset) -> FResult<T>) -> FResult<T> {
        self.handle_mut(|ds| {
            if self.writable.load(Ordering::Relaxed) && ds.mode() == blz::Mode::ReadOnly {
                *ds = Dataset::open_rw(&self.path)?;
            }
            f(ds)
        })
    }

    /// The handle itself, to refresh or close it (no writer lock taken).
    fn handle_mut<T>(&self, f: impl FnOnce(&mut Dataset) -> FResult<T>) -> FResult<T> {
        let mut ds = self.here()?.write().map_err(|_| lock_err("dataset"))?;
        f(&mut ds)
    }

    fn wrap(ds: Dataset, writable: bool) -> RawArray {
        RawArray {
            path: ds.path().to_path_buf(),
            ds: PerProcess::with(RwLock::new(ds)),
            writable: AtomicBool::new(writable),
        }
    }
}

#[pymethods]
impl RawArray {
    /// Opens the dataset at `path`, for writing when `write`.
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf, write: bool) -> PyResult<RawArray> {
        let ds = detached(py, || {
            Ok(if write {
                Dataset::open_rw(&path)?
            } else {
                Dataset::open(&path)?
            })
        })?;
        Ok(RawArray::wrap(ds, write))
    }

    /// Creates a dataset of `descr` and `shape`; with `data` (native-endian C-order bytes of
    /// `shape[0]` rows), the rows are written in the same step (the dataset appears whole).
    #[staticmethod]
    ///
    /// With `batches` instead (an iterable of such buffers, each whole rows of the shape's
    /// other axes), the rows of every batch are appended in order, and the dataset appears
    /// only when the last is written: an exception raised by the iterable (re-raised here)
    /// or a bad batch leaves no dataset behind.
    #[pyo3(signature = (path, descr, shape, chunks, codec, clevel, filter, checksum_name, fill, attrs, overwrite, data=None, superchunksize=None, batches=None))]
    #[expect(clippy::too_many_arguments, reason = "blz.create's keyword arguments")]
    fn create(
        py: Python<'_>,
        path: Option<PathBuf>,
        descr: &str,
        shape: Vec<u64>,
        chunks: Option<Vec<u64>>,
        codec: &str,
        clevel: u8,
        filter: &str,
        checksum_name: &str,
        fill: Option<&str>,
        attrs: Option<&str>,
        overwrite: bool,
        data: Option<&Bound<'_, PyAny>>,
        superchunksize: Option<u64>,
        batches: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<RawArray> {
        let (dtype, endian) = parse_dtype(descr)?;
        let opts = CreateOptions {
            chunkshape: chunks,
            superchunksize,
            compression: compression(codec, clevel, filter)?,
            checksum: checksum(checksum_name)?,
            fill: json_value(fill)?,
            endianness: endian.unwrap_or_else(Endianness::native),
            attributes: json_map(attrs)?,
            overwrite,
            expectedlen: shape.first().copied().filter(|&n| n > 0),
            ..Default::default()
        };
        if shape.is_empty() {
            return Err(PyValueError::new_err(
                "blz arrays have at least one axis (a 0-d value: use shape (1,))",
            ));
        }
        let buf = data.map(|d| Buf::get(d, false)).transpose()?;
        let pulled = batches
            .map(|b| b.try_iter().map(Bound::unbind))
            .transpose()?;
        let failed: Mutex<Option<PyErr>> = Mutex::new(None);
        let made = detached(py, || {
            let (storage, path) = memory::for_new(path.as_deref(), overwrite)?;
            let mut s = shape.clone();
            s[0] = 0;
            Ok(match (&buf, &pulled) {
                (_, Some(it)) => {
                    let batches = std::iter::from_fn(|| next_batch(it, &failed));
                    Dataset::create_from(storage, &path, dtype, &s, &opts, batches)?
                }
                (Some(b), None) => {
                    let batches = [Ok::<&[u8], blz::Error>(b.bytes())];
                    Dataset::create_from(storage, &path, dtype, &s, &opts, batches)?
                }
                (None, None) => Dataset::create_in(storage, &path, dtype, &shape, &opts)?,
            })
        });
        let kept = failed.lock().ok().and_then(|mut f| f.take());
        match (made, kept) {
            (Err(_), Some(e)) => Err(e),
            (made, _) => Ok(RawArray::wrap(made?, true)),
        }
    }

    /// The path as given (a `str`: a URL's `//` kept, which `pathlib` would fold).
    #[getter]
    fn path(&self) -> std::ffi::OsString {
        self.path.clone().into_os_string()
    }

    #[getter]
    fn writable(&self) -> bool {
        self.writable.load(Ordering::Relaxed)
    }

    /// Brings a read-only handle to the dataset's latest commit (`blz::Dataset::refresh`);
    /// whether it changed.
    fn refresh(&self, py: Python<'_>) -> PyResult<bool> {
        detached(py, || self.handle_mut(|ds| Ok(ds.refresh()?)))
    }

    /// `(shape, descr, chunks, nbytes, cbytes, nchunks, nfiles)` in one call.
    fn state(&self, py: Python<'_>) -> PyResult<ArrayState> {
        detached(py, || {
            self.read(|ds| {
                let m = ds.storage_meta();
                Ok((
                    ds.shape().to_vec(),
                    ds.dtype().descr(m.endianness),
                    ds.chunkshape().to_vec(),
                    ds.sizes().nbytes,
                    ds.sizes().cbytes,
                    ds.nchunks(),
                    ds.nfiles(),
                ))
            })
        })
    }

    /// `(id, generation, superchunksize)`: the dataset's identity (empty when it predates
    /// identities), its commit generation and its chunks per superchunk file, which is what
    /// a dask graph over it is named and split by.
    fn layout(&self, py: Python<'_>) -> PyResult<(String, u64, u64)> {
        detached(py, || {
            self.read(|ds| {
                let m = ds.storage_meta();
                Ok((
                    m.id.clone().unwrap_or_default(),
                    ds.sizes().generation,
                    m.superchunksize,
                ))
            })
        })
    }

    /// The `meta/storage` document as JSON.
    fn storage_json(&self, py: Python<'_>) -> PyResult<String> {
        detached(py, || {
            self.read(|ds| {
                serde_json::to_string(ds.storage_meta()).map_err(|e| Fail::Panic(e.to_string()))
            })
        })
    }

    /// Resolves a numpy key (an int, a slice, `...`, `None` or a tuple of them) against the
    /// dataset's shape: the library checks it.
    fn select(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<RawSelection> {
        let sel = selection_of(key)?;
        detached(py, || {
            self.read(|ds| {
                let r = ds.select(&sel)?;
                Ok(RawSelection::new(&sel, r, ds.shape().to_vec()))
            })
        })
    }

    /// Decodes a selection into `out` (a C-contiguous buffer of exactly its counts: native
    /// byte order, ascending indices on every axis).
    fn read_into(
        &self,
        py: Python<'_>,
        sel: &Bound<'_, RawSelection>,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let out = Buf::get(out, true)?;
        let sel = sel.get();
        detached(py, || {
            self.read(|ds| {
                ds.read_into(sel.axes_for(ds.shape(), ds.path())?, out.bytes_mut())?;
                Ok(())
            })
        })
    }

    /// Writes `data` (native-endian, C order over the selection's counts, ascending indices)
    /// into a selection, in one transaction.
    fn write_from(
        &self,
        py: Python<'_>,
        sel: &Bound<'_, RawSelection>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let data = Buf::get(data, false)?;
        let sel = sel.get();
        detached(py, || {
            self.write(|ds| {
                let axes = sel.axes_for(ds.shape(), ds.path())?;
                ds.write_bytes_against(axes, &sel.against, data.bytes())?;
                Ok(())
            })
        })
    }

    /// Appends `rows` rows given as native-endian C-order bytes, in one transaction.
    fn append(&self, py: Python<'_>, data: &Bound<'_, PyAny>, rows: u64) -> PyResult<()> {
        let data = Buf::get(data, false)?;
        detached(py, || {
            self.write(|ds| Ok(ds.append_bytes(data.bytes(), rows)?))
        })
    }

    /// Sets the extent of axis 0.
    fn resize(&self, py: Python<'_>, rows: u64) -> PyResult<()> {
        detached(py, || self.write(|ds| Ok(ds.resize(rows)?)))
    }

    /// The user attributes as JSON.
    fn attrs_json(&self, py: Python<'_>) -> PyResult<String> {
        detached(py, || {
            self.read(|ds| Ok(serde_json::Value::Object(ds.attrs()?).to_string()))
        })
    }

    /// Replaces the user attributes (a JSON object).
    fn set_attrs_json(&self, py: Python<'_>, text: &str) -> PyResult<()> {
        let m = json_map(Some(text))?;
        detached(py, || self.write(|ds| Ok(ds.set_attrs(m)?)))
    }

    /// Checks every chunk and digest: `(class, message, file, chunk)` per problem found.
    fn verify(&self, py: Python<'_>) -> PyResult<Vec<Problem>> {
        detached(py, || self.read(|ds| Ok(errors_list(ds.verify(|_, _| {})))))
    }

    /// Rewrites the superchunk files without dead space; returns the bytes reclaimed.
    fn compact(&self, py: Python<'_>) -> PyResult<u64> {
        detached(py, || self.write(|ds| Ok(ds.compact()?)))
    }

    /// Opens a staged write of `rows` rows on this (writable) dataset: workers write most of
    /// them with `staged_write_rows` into its directory, `RawStaged.commit` commits them.
    fn begin_staged(slf: &Bound<'_, Self>, py: Python<'_>, rows: u64) -> PyResult<RawStaged> {
        let this = slf.get();
        let session = detached(py, || this.write(|ds| Ok(ds.begin_staged(rows)?)))?;
        let (dir, geo) = (session.dir().to_path_buf(), geometry(&session));
        Ok(RawStaged::new(
            &dir,
            geo,
            Staged::Append {
                array: slf.clone().unbind(),
                session,
            },
        ))
    }

    /// Creates a dataset at `path` whose `rows` rows (of `row_shape`) workers write with
    /// `staged_write_rows`: nothing appears at `path` before `RawStaged.commit`.
    #[staticmethod]
    #[pyo3(signature = (path, descr, row_shape, chunks, codec, clevel, filter, checksum_name, fill, attrs, overwrite, superchunksize, rows))]
    #[expect(clippy::too_many_arguments, reason = "blz.create's keyword arguments")]
    fn create_staged(
        py: Python<'_>,
        path: PathBuf,
        descr: &str,
        row_shape: Vec<u64>,
        chunks: Option<Vec<u64>>,
        codec: &str,
        clevel: u8,
        filter: &str,
        checksum_name: &str,
        fill: Option<&str>,
        attrs: Option<&str>,
        overwrite: bool,
        superchunksize: Option<u64>,
        rows: u64,
    ) -> PyResult<RawStaged> {
        let (dtype, endian) = parse_dtype(descr)?;
        let opts = CreateOptions {
            chunkshape: chunks,
            superchunksize,
            compression: compression(codec, clevel, filter)?,
            checksum: checksum(checksum_name)?,
            fill: json_value(fill)?,
            endianness: endian.unwrap_or_else(Endianness::native),
            attributes: json_map(attrs)?,
            overwrite,
            ..Default::default()
        };
        let made = detached(py, || {
            // A local path, or an `s3://` URL (the workers then put their files into the
            // session's shared directory on the store).
            let (storage, path) = blz::storage::for_path(&path)?;
            Ok(Dataset::create_staged(
                storage, &path, dtype, &row_shape, &opts, rows,
            )?)
        })?;
        let (dir, geo) = {
            let s = made.session().map_err(|e| Fail::Blz(e).into_py(py))?;
            (s.dir().to_path_buf(), geometry(s))
        };
        Ok(RawStaged::new(&dir, geo, Staged::Create(made)))
    }

    /// Releases the writer lock and every file (the handle is unusable afterwards).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        detached(py, || {
            self.handle_mut(|ds| {
                // Reopen read-only in place of the writer: drops the lock and the open files.
                *ds = Dataset::open(&self.path)?;
                self.writable.store(false, Ordering::Relaxed);
                Ok(())
            })
        })
    }
}

// ---------------------------------------------------------------------------------------
// Staged writes

/// What a staged write commits into.
#[expect(
    clippy::large_enum_variant,
    reason = "one per staged write, held behind a mutex, never in a collection"
)]
enum Staged {
    /// An append to an open dataset, which holds the writer lock.
    Append {
        array: Py<RawArray>,
        session: StagedWrite,
    },
    /// A dataset being created.
    Create(StagedCreate),
}

/// `(head_rows, start, end, unit)` of a staged write.
fn geometry(s: &StagedWrite) -> (u64, u64, u64, u64) {
    let (start, end) = s.worker_rows();
    (s.head_rows(), start, end, s.unit_rows())
}

/// A staged write (`blz::array::staged`): the session directory workers write into, and the
/// commit.
#[pyclass(module = "blz._blz", frozen)]
struct RawStaged {
    inner: Mutex<Option<Staged>>,
    dir: PathBuf,
    geometry: (u64, u64, u64, u64),
}

impl RawStaged {
    fn new(dir: &Path, geometry: (u64, u64, u64, u64), staged: Staged) -> RawStaged {
        RawStaged {
            inner: Mutex::new(Some(staged)),
            dir: dir.to_path_buf(),
            geometry,
        }
    }

    fn take(&self) -> FResult<Staged> {
        self.inner
            .lock()
            .map_err(|_| lock_err("staged write"))?
            .take()
            .ok_or_else(|| {
                Fail::Blz(blz::Error::InvalidArgument(format!(
                    "{}: the staged write is already committed or aborted",
                    self.dir.display()
                )))
            })
    }
}

#[pymethods]
impl RawStaged {
    /// The session directory the workers write into: a path, or an `s3://` URL (a string,
    /// as `pathlib` would fold the URL's `//`).
    #[getter]
    fn dir(&self) -> String {
        self.dir.to_string_lossy().into_owned()
    }

    /// `(head_rows, start, end, unit)`: rows the client writes itself at the commit (from
    /// the dataset's end), the workers' rows `start..end`, and the unit their regions are
    /// whole multiples of (but for the last).
    fn geometry(&self) -> (u64, u64, u64, u64) {
        self.geometry
    }

    /// Commits: `head` holds the client's rows (native-endian, C order). Returns the new
    /// dataset for a staged create, `None` for an append (the array it was opened on holds
    /// the rows).
    fn commit(&self, py: Python<'_>, head: &Bound<'_, PyAny>) -> PyResult<Option<RawArray>> {
        let head = Buf::get(head, false)?;
        let staged = detached(py, || self.take())?;
        match staged {
            Staged::Append { array, session } => {
                let arr = array.get();
                detached(py, || {
                    arr.write(|ds| Ok(ds.commit_staged(session, head.bytes())?))
                })?;
                Ok(None)
            }
            Staged::Create(c) => {
                if !head.bytes().is_empty() {
                    return Err(PyValueError::new_err("a staged create has no head rows"));
                }
                let ds = detached(py, || Ok(c.commit()?))?;
                Ok(Some(RawArray::wrap(ds, true)))
            }
        }
    }

    /// Abandons the write: removes the session directory (and a staged create's build).
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        let Ok(staged) = detached(py, || self.take()) else {
            return Ok(());
        };
        detached(py, || match staged {
            Staged::Append { array, session } => {
                Ok(array.get().write(|ds| Ok(ds.abort_staged(session)?))?)
            }
            Staged::Create(c) => {
                drop(c);
                Ok(())
            }
        })
    }
}

/// Writes rows `first_row..` of a staged write (`data`: native-endian C-order whole rows)
/// as the complete superchunk files holding them, into the session directory `dir`
/// (`blz::array::staged::write_rows`). Returns the files written (0-based numbers).
#[pyfunction]
fn staged_write_rows(
    py: Python<'_>,
    dir: PathBuf,
    first_row: u64,
    data: &Bound<'_, PyAny>,
) -> PyResult<Vec<u64>> {
    let data = Buf::get(data, false)?;
    detached(py, || {
        Ok(blz::array::staged::write_rows(
            &dir,
            first_row,
            data.bytes(),
        )?)
    })
}

// ---------------------------------------------------------------------------------------
// Tables

/// A schema node from Python: `(name, spec)`, `spec` a dtype descriptor, `"varstr"`,
/// `"varbytes"`, or a list of nodes (a nested record).
/// A new table's options from the keyword arguments `blz.create` and `blz.from_csv` share:
/// every column's codec, chunking and checksum, the attributes, and `overwrite`.
#[expect(
    clippy::too_many_arguments,
    reason = "the keyword arguments of blz.create and blz.from_csv"
)]
fn table_options(
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

fn field_from_py(node: &Bound<'_, PyAny>) -> PyResult<Field> {
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
fn spec_to_py<'py>(py: Python<'py>, specs: &[FieldSpec]) -> PyResult<Bound<'py, PyList>> {
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
fn values_from_py(
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

fn leaf_kinds(t: &Table) -> Vec<(String, LeafKind)> {
    t.leaves()
        .iter()
        .map(|l| (l.path.clone(), l.kind))
        .collect()
}

/// A variable-length column's values as a list of `str` (`is_str`) or `bytes`.
fn var_list<'py>(
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
struct RawTable {
    /// The table, per process: see [`RawTable::here`].
    t: PerProcess<RwLock<Table>>,
    path: PathBuf,
    /// Whether the handle writes (until `close`).
    writable: AtomicBool,
}

impl RawTable {
    /// A table handle made in this process.
    fn wrap(t: Table, writable: bool) -> RawTable {
        RawTable {
            path: t.path().to_path_buf(),
            t: PerProcess::with(RwLock::new(t)),
            writable: AtomicBool::new(writable),
        }
    }

    /// The table as this process has it: opened again, in the same mode, in a child forked
    /// since the handle was opened ([`RawArray::here`] says why).
    fn here(&self) -> FResult<&RwLock<Table>> {
        self.t.get_or_try_init(|| {
            let writable = self.writable.load(Ordering::Relaxed);
            Ok(RwLock::new(reopen(
                writable,
                || Table::open_rw(&self.path),
                || Table::open(&self.path),
            )?))
        })
    }

    fn read<T>(&self, f: impl FnOnce(&Table) -> FResult<T>) -> FResult<T> {
        let t = self.here()?.read().map_err(|_| lock_err("table"))?;
        f(&t)
    }

    /// Runs a write ([`RawArray::write`] says how a forked child's copy takes the lock).
    fn write<T>(&self, f: impl FnOnce(&mut Table) -> FResult<T>) -> FResult<T> {
        self.handle_mut(|t| {
            if self.writable.load(Ordering::Relaxed) && t.mode() == blz::Mode::ReadOnly {
                *t = Table::open_rw(&self.path)?;
            }
            f(t)
        })
    }

    /// The handle itself, to refresh or close it (no writer lock taken).
    fn handle_mut<T>(&self, f: impl FnOnce(&mut Table) -> FResult<T>) -> FResult<T> {
        let mut t = self.here()?.write().map_err(|_| lock_err("table"))?;
        f(&mut t)
    }

    fn kinds(&self, py: Python<'_>) -> PyResult<Vec<(String, LeafKind)>> {
        detached(py, || self.read(|t| Ok(leaf_kinds(t))))
    }
}

#[pymethods]
impl RawTable {
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

    /// Opens the table at `path`, for writing when `write`.
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf, write: bool) -> PyResult<RawTable> {
        let t = detached(py, || {
            Ok(if write {
                Table::open_rw(&path)?
            } else {
                Table::open(&path)?
            })
        })?;
        Ok(RawTable::wrap(t, write))
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
            let (storage, path) = memory::for_new(path.as_deref(), overwrite)?;
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
        self.path.clone().into_os_string()
    }

    #[getter]
    fn writable(&self) -> bool {
        self.writable.load(Ordering::Relaxed)
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
        detached(py, || self.handle_mut(|t| Ok(t.refresh()?)))
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
        detached(py, || {
            self.handle_mut(|t| {
                *t = Table::open(&self.path)?;
                self.writable.store(false, Ordering::Relaxed);
                Ok(())
            })
        })
    }
}

// ---------------------------------------------------------------------------------------
// Layers

fn value_from_py(v: &Bound<'_, PyAny>) -> PyResult<Value> {
    if let Ok(t) = v.cast::<pyo3::types::PyTuple>() {
        return Ok(Value::Tuple(
            t.iter()
                .map(|x| value_from_py(&x))
                .collect::<PyResult<_>>()?,
        ));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(Value::Str(s.to_str()?.to_string()));
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    if v.is_instance_of::<pyo3::types::PyFloat>() {
        return Ok(Value::Float(v.extract()?));
    }
    if let Ok(i) = v.extract::<i64>() {
        return Ok(Value::Int(i));
    }
    if let Ok(u) = v.extract::<u64>() {
        return Ok(Value::UInt(u));
    }
    if let Ok(f) = v.extract::<f64>() {
        return Ok(Value::Float(f));
    }
    Err(PyValueError::new_err(format!(
        "a layer value is an int, float, str, bytes or a tuple of these, not {}",
        v.get_type().name()?
    )))
}

fn value_to_py<'py>(py: Python<'py>, v: Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::UInt(u) => u.into_pyobject(py)?.into_any(),
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        Value::Str(s) => PyString::new(py, &s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, &b).into_any(),
        Value::Tuple(f) => pyo3::types::PyTuple::new(
            py,
            f.into_iter()
                .map(|x| value_to_py(py, x))
                .collect::<PyResult<Vec<_>>>()?,
        )?
        .into_any(),
    })
}

/// A layer build: from sorted records, or from records in any order.
enum LayerBuild {
    Sorted(Box<LayerWriter>),
    Sorting(Box<SortingLayerWriter>),
}

impl LayerBuild {
    fn push(&mut self, keys: &[Value], weight: Option<Value>) -> blz::Result<()> {
        match self {
            LayerBuild::Sorted(w) => w.push(keys, weight),
            LayerBuild::Sorting(w) => w.push(keys, weight),
        }
    }
}

/// An open layer dataset. Cursors are kept in Python as `(column, parent row, position)` and
/// rebuilt here for each step (a cursor costs nothing to make; data chunks are cached by the
/// layer).
#[pyclass(module = "blz._blz", frozen)]
struct RawLayer {
    /// The layer, per process: opened again in a child forked since the handle was opened
    /// ([`RawArray::here`] says why: its cache of chunks has a lock).
    layer: PerProcess<Arc<Layer>>,
    path: PathBuf,
}

impl RawLayer {
    fn wrap(layer: Layer) -> RawLayer {
        RawLayer {
            path: layer.path().to_path_buf(),
            layer: PerProcess::with(Arc::new(layer)),
        }
    }

    /// The layer as this process has it.
    fn here(&self) -> FResult<&Arc<Layer>> {
        self.layer
            .get_or_try_init(|| Ok(Arc::new(Layer::open(&self.path)?)))
    }

    /// [`Self::here`] from a call that holds the GIL (opening may read and decode).
    fn here_py(&self, py: Python<'_>) -> PyResult<Arc<Layer>> {
        detached(py, || self.here().map(Arc::clone))
    }

    /// The cursor over a row group: column 0's single group, or the group of column `col`
    /// owned by row `parent` of column `col - 1`.
    fn cursor(&self, col: usize, parent: Option<u64>) -> FResult<Cursor<'_>> {
        Ok(match parent {
            None if col == 0 => self.here()?.cursor(),
            Some(p) => self.here()?.group(col, p)?,
            None => {
                return Err(Fail::Blz(blz::Error::InvalidArgument(format!(
                    "column {col} has one row group per row of column {}",
                    col.saturating_sub(1)
                ))))
            }
        })
    }
}

#[pymethods]
impl RawLayer {
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<RawLayer> {
        let layer = detached(py, || Ok(Layer::open(&path)?))?;
        Ok(RawLayer::wrap(layer))
    }

    /// Merges the layer datasets at `inputs` into a new one at `output` (the first input's
    /// settings): equal key paths add their weights, zero sums are left out. Returns
    /// `(paths read, paths written, paths cancelled)`.
    #[staticmethod]
    #[pyo3(signature = (inputs, output, overwrite))]
    fn merge(
        py: Python<'_>,
        inputs: Vec<PathBuf>,
        output: PathBuf,
        overwrite: bool,
    ) -> PyResult<(u64, u64, u64)> {
        detached(py, || {
            let r = Layer::merge(&inputs, &output, overwrite)?;
            Ok((r.paths_read, r.paths_written, r.paths_cancelled))
        })
    }

    /// Builds a layer dataset from records: each a tuple of one key per column, plus the
    /// weight last when the schema has one. `columns`: `(name, kind)` with kind a dtype
    /// name, `varstr`, `varbytes` or a tuple type such as `(int64,varstr)`; `weight`: `(name, dtype)`; `filter`: `auto`, `bloom`,
    /// `exact` or `off` for every column. Without `sort_memory` the records must be sorted
    /// by whole key path; with it they may come in any order and are sorted with that many
    /// bytes of buffer (repeated paths add their weights).
    #[staticmethod]
    #[pyo3(signature = (path, columns, weight, records, overwrite, filter="auto", sort_memory=None, shape=None))]
    #[expect(clippy::too_many_arguments, reason = "build_layer's keyword arguments")]
    fn build(
        py: Python<'_>,
        path: PathBuf,
        columns: Vec<(String, String)>,
        weight: Option<(String, String)>,
        records: &Bound<'_, PyAny>,
        overwrite: bool,
        filter: &str,
        sort_memory: Option<u64>,
        shape: Option<&str>,
    ) -> PyResult<u64> {
        let shape = shape
            .map(blz::layer::Shape::parse)
            .transpose()
            .map_err(|e| Fail::from(e).into_py(py))?;
        let filter_kind = match filter {
            "off" => None,
            f => Some(blz::layer::FilterKind::parse(f).map_err(|e| Fail::from(e).into_py(py))?),
        };
        let mut defs = Vec::new();
        for (name, kind) in &columns {
            let k: ValueType = match kind.as_str() {
                "varstr" | "str" => LeafKind::VarStr.into(),
                "varbytes" | "bytes" => LeafKind::VarBytes.into(),
                t if t.trim_start().starts_with('(') => {
                    ValueType::parse(t).map_err(|e| Fail::from(e).into_py(py))?
                }
                d => LeafKind::Fixed(parse_dtype(d)?.0).into(),
            };
            let mut def = ColumnDef::new(name, k);
            match filter_kind {
                Some(fk) => def.filter_kind = fk,
                None => def.filter = blz::layer::FilterSetting::Off,
            }
            defs.push(def);
        }
        let mut schema = LayerSchema::new(defs);
        if let Some((name, d)) = &weight {
            schema = schema.with_weight(name, parse_dtype(d)?.0);
        }
        schema.overwrite = overwrite;
        schema.shape = shape;
        let n = columns.len();
        let has_weight = weight.is_some();
        let writer = detached(py, || {
            Ok(match sort_memory {
                None => LayerBuild::Sorted(Box::new(LayerWriter::create(&path, schema)?)),
                Some(m) => LayerBuild::Sorting(Box::new(LayerWriter::create_unsorted(
                    &path,
                    schema,
                    SortOptions::with_memory(m),
                )?)),
            })
        })?;
        let writer = Mutex::new(Some(writer));
        let mut batch: Vec<(Vec<Value>, Option<Value>)> = Vec::new();
        let mut count = 0u64;
        let push = |py: Python<'_>, batch: &mut Vec<(Vec<Value>, Option<Value>)>| -> PyResult<()> {
            let items = std::mem::take(batch);
            detached(py, || {
                let mut g = writer.lock().map_err(|_| lock_err("layer writer"))?;
                let w = g
                    .as_mut()
                    .ok_or_else(|| Fail::Panic("writer gone".into()))?;
                for (keys, wt) in items {
                    w.push(&keys, wt)?;
                }
                Ok(())
            })
        };
        for rec in records.try_iter()? {
            let rec = rec?;
            let items: Vec<Bound<'_, PyAny>> = rec.try_iter()?.collect::<PyResult<_>>()?;
            let want = n + usize::from(has_weight);
            if items.len() != want {
                return Err(PyValueError::new_err(format!(
                    "record {count} has {} items, {want} expected ({n} keys{})",
                    items.len(),
                    if has_weight { " and a weight" } else { "" }
                )));
            }
            let keys = items[..n]
                .iter()
                .map(value_from_py)
                .collect::<PyResult<Vec<_>>>()?;
            let wt = if has_weight {
                Some(value_from_py(&items[n])?)
            } else {
                None
            };
            batch.push((keys, wt));
            count += 1;
            if batch.len() >= 8192 {
                push(py, &mut batch)?;
            }
        }
        push(py, &mut batch)?;
        detached(py, || {
            let w = writer
                .lock()
                .map_err(|_| lock_err("layer writer"))?
                .take()
                .ok_or_else(|| Fail::Panic("writer gone".into()))?;
            match w {
                LayerBuild::Sorted(w) => {
                    (*w).finish()?;
                }
                LayerBuild::Sorting(w) => {
                    w.finish()?;
                }
            }
            Ok(())
        })?;
        Ok(count)
    }

    /// The path as given (a `str`: a URL's `//` kept, which `pathlib` would fold).
    #[getter]
    fn path(&self) -> std::ffi::OsString {
        self.path.clone().into_os_string()
    }

    /// `(name, kind, rows)` per column, outermost first.
    fn columns(&self, py: Python<'_>) -> PyResult<Vec<(String, String, u64)>> {
        let layer = self.here_py(py)?;
        Ok(layer
            .storage_meta()
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.clone(), c.dtype.clone(), layer.rows(i)))
            .collect())
    }

    /// The layer's named shape (`wset`, `indexed_zset`, `val_batch`), if it has one.
    fn shape(&self, py: Python<'_>) -> PyResult<Option<&'static str>> {
        Ok(self.here_py(py)?.shape().map(|s| s.name()))
    }

    /// The weight's `(name, dtype)`, if the layer has one.
    fn weight(&self, py: Python<'_>) -> PyResult<Option<(String, String)>> {
        Ok(self
            .here_py(py)?
            .storage_meta()
            .weight
            .as_ref()
            .map(|w| (w.name.clone(), w.dtype.name())))
    }

    /// `info()` as JSON.
    fn info_json(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.here_py(py)?.info().to_string())
    }

    /// The rows (in the whole column) of a row group.
    fn group_rows(&self, py: Python<'_>, col: usize, parent: Option<u64>) -> PyResult<(u64, u64)> {
        detached(py, || {
            let c = self.cursor(col, parent)?;
            let r = c.rows();
            Ok((r.start, r.end))
        })
    }

    /// Seeks in a row group: the first row `>= value` (`ge`) or the last `<= value`.
    /// Returns the position: 1 + the row's index in the group, or 0 (before the first) or
    /// count + 1 (after the last) when there is none.
    fn seek(
        &self,
        py: Python<'_>,
        col: usize,
        parent: Option<u64>,
        value: &Bound<'_, PyAny>,
        ge: bool,
    ) -> PyResult<u64> {
        let v = value_from_py(value)?;
        detached(py, || {
            let mut c = self.cursor(col, parent)?;
            let found = if ge { c.seek_ge(&v)? } else { c.seek_le(&v)? };
            Ok(match (found, c.index()) {
                (true, Some(i)) => i + 1,
                _ if ge => c.count() + 1,
                _ => 0,
            })
        })
    }

    /// Values (and weights, when `weights` and this is the last column) of positions
    /// `index..index + n` of a row group (fewer at its end).
    fn values<'py>(
        &self,
        py: Python<'py>,
        col: usize,
        parent: Option<u64>,
        index: u64,
        n: u64,
        weights: bool,
    ) -> PyResult<(Bound<'py, PyList>, Option<Bound<'py, PyList>>)> {
        let (vals, ws) = detached(py, || {
            let mut c = self.cursor(col, parent)?;
            let mut vals = Vec::new();
            let mut ws = Vec::new();
            let mut ok = c.nth(index);
            while ok && (vals.len() as u64) < n {
                if let Some(v) = c.value()? {
                    vals.push(v);
                }
                if weights {
                    if let Some(w) = c.weight()? {
                        ws.push(w);
                    }
                }
                ok = c.next();
            }
            Ok((vals, ws))
        })?;
        let lv = PyList::empty(py);
        for v in vals {
            lv.append(value_to_py(py, v)?)?;
        }
        let lw = if weights {
            let l = PyList::empty(py);
            for w in ws {
                l.append(value_to_py(py, w)?)?;
            }
            Some(l)
        } else {
            None
        };
        Ok((lv, lw))
    }

    /// Whether `value` is in a row group (exact).
    fn contains(
        &self,
        py: Python<'_>,
        col: usize,
        parent: Option<u64>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let v = value_from_py(value)?;
        detached(py, || Ok(self.cursor(col, parent)?.contains(&v)?))
    }

    /// Checks every chunk of every column.
    fn verify(&self, py: Python<'_>) -> PyResult<Vec<Problem>> {
        detached(py, || Ok(errors_list(self.here()?.verify())))
    }
}

// ---------------------------------------------------------------------------------------
// bcolz

/// A bcolz carray, read in place.
#[pyclass(module = "blz._blz", frozen)]
struct RawBcolz {
    /// The reader, per process: opened again in a child forked since the handle was opened
    /// ([`RawArray::here`] says why).
    reader: PerProcess<Mutex<CarrayReader>>,
    path: PathBuf,
}

impl RawBcolz {
    fn wrap(reader: CarrayReader) -> RawBcolz {
        RawBcolz {
            path: reader.path().to_path_buf(),
            reader: PerProcess::with(Mutex::new(reader)),
        }
    }

    /// The reader as this process has it.
    fn here(&self) -> FResult<&Mutex<CarrayReader>> {
        self.reader
            .get_or_try_init(|| Ok(Mutex::new(CarrayReader::open(&self.path)?)))
    }
}

#[pymethods]
impl RawBcolz {
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<RawBcolz> {
        let reader = detached(py, || Ok(CarrayReader::open(&path)?))?;
        Ok(RawBcolz::wrap(reader))
    }

    /// `"carray"` or `"ctable"` for a bcolz root directory.
    #[staticmethod]
    fn detect(path: PathBuf) -> Option<&'static str> {
        match blz::bcolz::detect(&path) {
            Ok(BcolzKind::Carray) => Some("carray"),
            Ok(BcolzKind::Ctable) => Some("ctable"),
            Err(_) => None,
        }
    }

    /// The column names of a ctable (each a carray directory beside them).
    #[staticmethod]
    fn ctable_columns(py: Python<'_>, path: PathBuf) -> PyResult<(Vec<(String, String)>, String)> {
        detached(py, || {
            let t = CtableReader::open(&path)?;
            let cols = t
                .names()
                .iter()
                .zip(t.columns())
                .map(|(n, c)| (n.clone(), c.path().display().to_string()))
                .collect();
            Ok((
                cols,
                serde_json::Value::Object(t.attrs().clone()).to_string(),
            ))
        })
    }

    /// The path as given (a `str`: a URL's `//` kept, which `pathlib` would fold).
    #[getter]
    fn path(&self) -> std::ffi::OsString {
        self.path.clone().into_os_string()
    }

    /// `(shape, descr in the stored byte order, chunklen, attrs JSON)`.
    fn state(&self, py: Python<'_>) -> PyResult<(Vec<u64>, String, u64, String)> {
        detached(py, || {
            let r = self.here()?.lock().map_err(|_| lock_err("bcolz reader"))?;
            let m = r.meta();
            Ok((
                m.shape.clone(),
                m.dtype.descr(m.endianness),
                m.chunklen,
                serde_json::Value::Object(r.attrs().clone()).to_string(),
            ))
        })
    }

    /// Rows `start..end` (stored byte order) into `out`.
    fn read_rows_into(
        &self,
        py: Python<'_>,
        start: u64,
        end: u64,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let out = Buf::get(out, true)?;
        detached(py, || {
            let mut r = self.here()?.lock().map_err(|_| lock_err("bcolz reader"))?;
            let rb = r.meta().row_bytes();
            let cl = r.meta().chunklen;
            let end = end.min(r.meta().len());
            let dst = out.bytes_mut();
            if (dst.len() as u64) != end.saturating_sub(start) * rb {
                return Err(Fail::Panic("bcolz read buffer of the wrong size".into()));
            }
            let mut at = start;
            while at < end {
                let c = at / cl;
                let from = at - c * cl;
                let take = (end - at).min(cl - from);
                let bytes = r.read_chunk(c)?;
                let src = bytes
                    .get((from * rb) as usize..((from + take) * rb) as usize)
                    .ok_or_else(|| Fail::Panic("short bcolz chunk".into()))?;
                let o = ((at - start) * rb) as usize;
                dst[o..o + src.len()].copy_from_slice(src);
                at += take;
            }
            Ok(())
        })
    }
}

/// The kind of the blz dataset at `path`: `array`, `table`, `layer`, or `None`.
#[pyfunction]
fn dataset_kind(path: PathBuf) -> Option<&'static str> {
    let (storage, root) = blz::storage::for_path(&path).ok()?;
    blz::meta::dataset_kind(storage.as_ref(), &root).map(blz::Kind::name)
}

/// Opens the dataset at `path` (a directory or an `s3://` URL) as the kind it is, through
/// the library's one entrance (`blz::open`: the kind read once; on an object store, one
/// load of its state): `(kind, handle)`, kind one of `array`, `table`, `layer`,
/// `bcolz carray`, `bcolz ctable`; the handle a `RawArray`, `RawTable`, `RawLayer` or
/// `RawBcolz`, or `None` for a bcolz ctable (its columns open one by one).
#[pyfunction]
fn open(py: Python<'_>, path: PathBuf, write: bool) -> PyResult<(&'static str, Py<PyAny>)> {
    let opened = detached(py, || {
        Ok(if write {
            blz::open_rw(&path)?
        } else {
            blz::open(&path)?
        })
    })?;
    let kind = opened.kind().name();
    let handle = match opened {
        blz::AnyDataset::Array(ds) => Py::new(py, RawArray::wrap(ds, write))?.into_any(),
        blz::AnyDataset::Table(t) => Py::new(py, RawTable::wrap(t, write))?.into_any(),
        blz::AnyDataset::Layer(l) => Py::new(py, RawLayer::wrap(l))?.into_any(),
        blz::AnyDataset::Bcolz(blz::BcolzDataset::Carray(reader)) => {
            Py::new(py, RawBcolz::wrap(reader))?.into_any()
        }
        blz::AnyDataset::Bcolz(_) => py.None(),
        other => {
            let e = blz::Error::Unsupported {
                path: other.path().to_path_buf(),
                reason: format!("a {} dataset has no Python handle", other.kind()),
            };
            return Err(Fail::from(e).into_py(py));
        }
    };
    Ok((kind, handle))
}

/// Where every superchunk file of the dataset at `root` lives (`blz::locate`): per file
/// `(path, host, location, kind)`, host the GlusterFS brick server (or this machine), location
/// the brick directory (or local device), kind `gluster` or `local`.
#[pyfunction]
fn locate(py: Python<'_>, root: PathBuf) -> PyResult<Vec<Located>> {
    detached(py, || {
        Ok(blz::locate::locate_dataset(&root)?
            .into_iter()
            .map(|l| (l.path, l.host, l.location, l.kind.to_string()))
            .collect())
    })
}

/// Removes the objects of the dataset at the `s3://` URL `url` that no reader needs any more
/// (`blz gc`, `blz::storage::object::collect_garbage`): those retired more than `grace`
/// seconds ago, and orphans (uploads of failed, killed or abandoned writes) older than that,
/// by the store's clock. Returns `(deleted keys, objects kept for being younger)`.
#[pyfunction]
fn collect_garbage(py: Python<'_>, url: &str, grace: u64) -> PyResult<(Vec<String>, usize)> {
    detached(py, || {
        let s = blz::storage::ObjectStorage::open_url(url)?;
        let c = blz::storage::object::collect_garbage(&s, std::time::Duration::from_secs(grace))?;
        Ok((c.deleted, c.kept))
    })
}

/// The native module.
/// Waits until the datasets replaced by creates with `overwrite` are removed (blz removes
/// them in the background; `blz` calls this at interpreter exit).
#[pyfunction]
fn finish_removals(py: Python<'_>) {
    py.detach(blz::finish_removals);
}

/// Sizes the pool that decodes and encodes chunks in this process, once, at import:
/// `BLZ_NUM_THREADS` if set, else rayon's own `RAYON_NUM_THREADS` (which rayon reads
/// itself), else `OMP_NUM_THREADS`, the variable by which a process is told how many cores
/// its numeric libraries may use (dask's worker processes get 1, one core per task thread),
/// else every core.
fn size_thread_pool() {
    let var = |k: &str| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
    };
    let n = var("BLZ_NUM_THREADS").or_else(|| {
        if std::env::var_os("RAYON_NUM_THREADS").is_some() {
            None
        } else {
            var("OMP_NUM_THREADS")
        }
    });
    if let Some(n) = n {
        // Fails only when the pool already runs (another extension built it): keep that one.
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global();
    }
}

/// The number of threads blz decodes and encodes with in this process.
#[pyfunction]
fn num_threads() -> usize {
    rayon::current_num_threads()
}

#[pymodule]
fn _blz(m: &Bound<'_, PyModule>) -> PyResult<()> {
    size_thread_pool();
    HOME.get_or_init(std::process::id);
    m.add_function(wrap_pyfunction!(num_threads, m)?)?;
    m.add_class::<RawArray>()?;
    m.add_class::<RawTable>()?;
    m.add_class::<RawLayer>()?;
    m.add_class::<RawBcolz>()?;
    m.add_class::<RawStaged>()?;
    m.add_class::<RawSelection>()?;
    m.add_class::<buffers::ReadBuffer>()?;
    m.add_function(wrap_pyfunction!(buffers::buffer_pool, m)?)?;
    m.add_function(wrap_pyfunction!(block_cache::block_cache, m)?)?;
    m.add_function(wrap_pyfunction!(staged_write_rows, m)?)?;
    m.add_function(wrap_pyfunction!(collect_garbage, m)?)?;
    m.add_function(wrap_pyfunction!(dataset_kind, m)?)?;
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(select, m)?)?;
    m.add_function(wrap_pyfunction!(locate, m)?)?;
    m.add_function(wrap_pyfunction!(finish_removals, m)?)?;
    m.add_class::<sql::RawQuery>()?;
    m.add_function(wrap_pyfunction!(sql::sql, m)?)?;
    fancy::register(m)?;
    paths::register(m)?;
    memory::register(m)?;
    query::register(m)?;
    reduce::register(m)?;
    expr::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
