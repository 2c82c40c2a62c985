//! `RawArray`: an N-d dataset, and its read `a[key]` made in one call; `RawStaged`, its
//! staged writes (`blz::array::staged`): workers write superchunk files of an array's rows
//! into a session directory, and one commit makes them part of the array.

use crate::buffers::{ReadBuffer, MIN_BYTES};
use crate::convert::{checksum, compression, json_map, json_value, next_batch, parse_dtype, Buf};
use crate::errors::{detached, errors_list, lock_err, FResult, Fail, Problem};
use crate::handle::{python_fail, Handle};
use crate::paths;
use crate::selection::{selection_of, selection_or_advanced, RawSelection};
use blz::array::staged::{StagedCreate, StagedWrite};
use blz::{CreateOptions, DType, Dataset, Endianness};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// `(shape, descr, chunks, nbytes, cbytes, nchunks, nfiles)` of an array.
type ArrayState = (Vec<u64>, String, Vec<u64>, u64, u64, u64, u64);

/// The numpy dtypes of an array's elements: in this machine's byte order (what a read
/// decodes into) and in the stored one (what it returns), and whether they differ.
struct Dtypes {
    of: (DType, Endianness),
    native: Py<PyAny>,
    stored: Py<PyAny>,
    swap: bool,
}

/// An open N-d dataset.
#[pyclass(module = "blz._blz", frozen)]
pub(crate) struct RawArray {
    h: Handle<Dataset>,
    /// The numpy dtypes of the last read (a create with `overwrite` may change the dtype).
    dtypes: Mutex<Option<Dtypes>>,
}

impl std::ops::Deref for RawArray {
    type Target = Handle<Dataset>;
    fn deref(&self) -> &Handle<Dataset> {
        &self.h
    }
}

/// A read made but not yet shown to Python: the selection (how numpy sees the buffer),
/// the numpy array filled, and the dtype to show it in when the stored byte order is not
/// this machine's.
struct Read {
    sel: RawSelection,
    out: Py<PyAny>,
    /// Held until the GIL is: releasing a buffer export needs it.
    _buf: Buf,
    swap_to: Option<Py<PyAny>>,
}

/// An uninitialised numpy array of `shape` and `dtype` for a read to fill. Large ones live
/// in memory from blz's pool ([`ReadBuffer`]): memory a freed result held, its pages already
/// mapped, instead of fresh pages the kernel must fault in and zero before the read writes
/// them.
pub(crate) fn empty_array<'py>(
    py: Python<'py>,
    shape: &[u64],
    dtype: &Bound<'py, PyAny>,
    itemsize: usize,
) -> PyResult<Bound<'py, PyAny>> {
    static EMPTY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static FROMBUFFER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let count = shape.iter().product::<u64>();
    let nbytes = usize::try_from(count)
        .ok()
        .and_then(|c| c.checked_mul(itemsize))
        .ok_or_else(|| PyValueError::new_err(format!("a read of {count} elements is too large")))?;
    let dims = PyTuple::new(py, shape)?;
    if nbytes < MIN_BYTES {
        return EMPTY.import(py, "numpy", "empty")?.call1((dims, dtype));
    }
    let mem = Py::new(py, ReadBuffer::new(nbytes)?)?;
    FROMBUFFER
        .import(py, "numpy", "frombuffer")?
        .call1((mem, dtype, count))?
        .call_method1("reshape", (dims,))
}

impl RawArray {
    pub(crate) fn wrap(ds: Dataset, writable: bool) -> RawArray {
        RawArray {
            h: {
                let path = ds.path().to_path_buf();
                Handle::new(ds, &path, writable)
            },
            dtypes: Mutex::new(None),
        }
    }

    /// The numpy dtypes of `of` (made once per dtype).
    fn dtypes(
        &self,
        py: Python<'_>,
        of: (DType, Endianness),
    ) -> FResult<(Py<PyAny>, Option<Py<PyAny>>)> {
        static DTYPE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        let mut cached = self
            .dtypes
            .lock()
            .map_err(|_| crate::errors::lock_err("dtype"))?;
        if cached.as_ref().map(|d| d.of) != Some(of) {
            let make = DTYPE.import(py, "numpy", "dtype")?;
            let native = make.call1((of.0.descr(Endianness::native()),))?.unbind();
            let stored = make.call1((of.0.descr(of.1),))?.unbind();
            *cached = Some(Dtypes {
                of,
                native,
                stored,
                swap: of.1 != Endianness::native() && of.0.itemsize() > 1,
            });
        }
        let d = cached
            .as_ref()
            .ok_or_else(|| crate::errors::lock_err("dtype"))?;
        Ok((
            d.native.clone_ref(py),
            d.swap.then(|| d.stored.clone_ref(py)),
        ))
    }

    /// One try of a read: the key resolved against the handle's commit, the numpy array
    /// allocated (the GIL taken for that alone), the chunks decoded into it;
    /// `Error::Changed` when a refresh by another thread changed the shape in between.
    fn read_once(&self, sel: &blz::Selection) -> FResult<Read> {
        let (resolved, against, of, itemsize) = self.h.read(|ds| {
            Ok((
                ds.select(sel)?,
                ds.shape().to_vec(),
                (ds.dtype(), ds.storage_meta().endianness),
                ds.dtype().itemsize(),
            ))
        })?;
        let sel = RawSelection::new(sel, resolved, against);
        let counts = sel.resolved.counts();
        let (out, buf, swap_to) = Python::attach(|py| -> FResult<_> {
            let (native, swap_to) = self.dtypes(py, of)?;
            let out = empty_array(py, &counts, native.bind(py), itemsize)?;
            let buf = Buf::get(&out, true)?;
            Ok((out.unbind(), buf, swap_to))
        })?;
        self.h.read(|ds| {
            ds.read_into(sel.axes_for(ds.shape(), ds.path())?, buf.bytes_mut())?;
            Ok(())
        })?;
        Ok(Read {
            sel,
            out,
            _buf: buf,
            swap_to,
        })
    }
}

#[pymethods]
impl RawArray {
    /// `a[key]` for a basic numpy key (an int, a slice, `...`, `None` or a tuple of them),
    /// in one call: the key resolved by the library against the latest commit, the numpy
    /// array allocated once, the chunks decoded into it with the GIL released, numpy's
    /// result made of it (reversed axes, new axes, a scalar where numpy gives one), the read
    /// made again when it met a writer's commit (`blz::on_latest_commit`). An advanced key
    /// (arrays, lists, booleans) is read by `advanced(key, changed)`, Python's reader of
    /// such keys, in the same loop (`changed`: the handle showed a new commit since Python
    /// last asked); without it, `None`.
    #[pyo3(signature = (key, advanced=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        advanced: Option<Py<PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(sel) = selection_or_advanced(key)? else {
            let Some(read) = advanced else {
                return Ok(None);
            };
            let key = key.clone().unbind();
            let out = detached(py, || {
                self.h.latest(|| {
                    Python::attach(|py| {
                        let changed = self.h.take_unseen();
                        read.call1(py, (key.clone_ref(py), changed))
                            .map_err(|e| python_fail(py, e))
                    })
                })
            })?;
            return Ok(Some(out.into_bound(py)));
        };
        let read = detached(py, || self.h.latest(|| self.read_once(&sel)))?;
        let mut out = read.out.into_bound(py);
        drop(read._buf);
        if let Some(stored) = read.swap_to {
            out.call_method1("byteswap", (true,))?;
            out = out.call_method1("view", (stored,))?;
        }
        read.sel.result(out).map(Some)
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
            let (storage, path) = paths::for_new(path.as_deref(), overwrite)?;
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
        self.h.path().as_os_str().to_owned()
    }

    #[getter]
    fn writable(&self) -> bool {
        self.h.writable()
    }

    /// Brings a read-only handle to the dataset's latest commit (`blz::Dataset::refresh`);
    /// whether it changed.
    fn refresh(&self, py: Python<'_>) -> PyResult<bool> {
        detached(py, || self.h.refresh())
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

    /// Releases the writer lock and every file (the handle reads on).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        detached(py, || self.h.close())
    }
}

/// What a staged write commits into.
#[expect(
    clippy::large_enum_variant,
    reason = "one per staged write, held behind a mutex, never in a collection"
)]
pub(crate) enum Staged {
    /// An append to an open dataset, which holds the writer lock.
    Append {
        array: Py<RawArray>,
        session: StagedWrite,
    },
    /// A dataset being created.
    Create(StagedCreate),
}

/// `(head_rows, start, end, unit)` of a staged write.
pub(crate) fn geometry(s: &StagedWrite) -> (u64, u64, u64, u64) {
    let (start, end) = s.worker_rows();
    (s.head_rows(), start, end, s.unit_rows())
}

/// A staged write (`blz::array::staged`): the session directory workers write into, and the
/// commit.
#[pyclass(module = "blz._blz", frozen)]
pub(crate) struct RawStaged {
    inner: Mutex<Option<Staged>>,
    dir: PathBuf,
    geometry: (u64, u64, u64, u64),
}

impl RawStaged {
    pub(crate) fn new(dir: &Path, geometry: (u64, u64, u64, u64), staged: Staged) -> RawStaged {
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
pub(crate) fn staged_write_rows(
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
