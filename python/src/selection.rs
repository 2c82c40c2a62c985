//! numpy's basic indexing keys as library selections (`blz::Selection`), resolved and
//! checked by the library; and the numpy result a read's buffer becomes.

use crate::errors::{FResult, Fail};
use blz::selection::{Item, Resolved, Selection};
use pyo3::exceptions::{PyIndexError, PyOverflowError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyEllipsis, PyInt, PyList, PySlice, PyString, PyTuple, PyType};
use std::path::{Path, PathBuf};

/// The error numpy's basic indexing gives a key it does not take (advanced indexing: arrays,
/// lists, booleans), as blz raised it before selections reached Rust.
pub(crate) fn not_basic(k: &Bound<'_, PyAny>) -> PyErr {
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
pub(crate) fn py_index(v: &Bound<'_, PyAny>) -> PyResult<i128> {
    match v.extract::<i128>() {
        Ok(i) => Ok(i),
        Err(e) if e.is_instance_of::<PyOverflowError>(v.py()) => {
            Ok(if v.lt(0)? { i128::MIN } else { i128::MAX })
        }
        Err(e) => Err(e),
    }
}

/// One item of a numpy key as a selection item: an integer, a slice, `...` or `None`.
pub(crate) fn item_of(k: &Bound<'_, PyAny>) -> PyResult<Item> {
    let py = k.py();
    if k.is_none() {
        return Ok(Item::NewAxis);
    }
    if k.is(PyEllipsis::get(py)) {
        return Ok(Item::Ellipsis);
    }
    if let Ok(s) = k.cast::<PySlice>() {
        let part = |name: &Bound<'_, PyString>| -> PyResult<Option<i128>> {
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
            start: part(intern!(py, "start"))?,
            stop: part(intern!(py, "stop"))?,
            step: part(intern!(py, "step"))?,
        });
    }
    // numpy takes booleans and arrays (even 0-d ones) as advanced indices, which blz does
    // not support.
    if k.is_instance_of::<PyBool>() {
        return Err(not_basic(k));
    }
    if !k.is_instance_of::<PyInt>() && k.is_instance(NDARRAY.import(py, "numpy", "ndarray")?)? {
        return Err(not_basic(k));
    }
    match py_index(k) {
        Ok(i) => Ok(Item::Index(i)),
        Err(e) if e.is_instance_of::<PyTypeError>(py) => Err(not_basic(k)),
        Err(e) => Err(e),
    }
}

static NDARRAY: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static NUMPY_BOOL: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Whether numpy indexes by advanced indexing with `k`, one item of a key: a list, a tuple
/// inside a key, a boolean (Python's or numpy's) or a numpy array.
fn is_advanced(k: &Bound<'_, PyAny>) -> PyResult<bool> {
    if k.is_instance_of::<PyBool>() || k.is_instance_of::<PyList>() || k.is_instance_of::<PyTuple>()
    {
        return Ok(true);
    }
    if k.is_instance_of::<PyInt>() || k.is_instance_of::<PySlice>() || k.is_none() {
        return Ok(false);
    }
    let py = k.py();
    Ok(k.is_instance(NDARRAY.import(py, "numpy", "ndarray")?)?
        || k.is_instance(NUMPY_BOOL.import(py, "numpy", "bool_")?)?)
}

/// A numpy key as a selection, or `None` when numpy would index with it by advanced
/// indexing (any item an array, a list or a boolean), which blz reads its own way.
pub(crate) fn selection_or_advanced(key: &Bound<'_, PyAny>) -> PyResult<Option<Selection>> {
    let items: Vec<Item> = match key.cast::<PyTuple>() {
        Ok(t) => {
            for k in t.iter() {
                if is_advanced(&k)? {
                    return Ok(None);
                }
            }
            t.iter().map(|k| item_of(&k)).collect::<PyResult<_>>()?
        }
        Err(_) => {
            if is_advanced(key)? {
                return Ok(None);
            }
            vec![item_of(key)?]
        }
    };
    Ok(Some(Selection::new(items)))
}

/// A numpy key (an item or a tuple of items) as a selection.
pub(crate) fn selection_of(key: &Bound<'_, PyAny>) -> PyResult<Selection> {
    let items = match key.cast::<PyTuple>() {
        Ok(t) => t.iter().map(|k| item_of(&k)).collect::<PyResult<_>>()?,
        Err(_) => vec![item_of(key)?],
    };
    Ok(Selection::new(items))
}

/// A numpy key resolved by the library against a dataset's shape (`blz::Selection::resolve`,
/// where it is checked): what a read fills, what a write takes, and how numpy sees it.
#[pyclass(module = "blz._blz", frozen)]
pub(crate) struct RawSelection {
    pub(crate) resolved: Resolved,
    /// The shape it was resolved against.
    pub(crate) against: Vec<u64>,
    /// numpy gives a scalar: every axis indexed, no `...`, no new axis.
    scalar: bool,
}

impl RawSelection {
    pub(crate) fn new(sel: &Selection, resolved: Resolved, against: Vec<u64>) -> RawSelection {
        RawSelection {
            scalar: !sel.has_ellipsis() && resolved.shape.is_empty(),
            resolved,
            against,
        }
    }

    /// The selection's axes, or `Error::Changed` when the dataset's shape is no longer the
    /// one it was resolved against (a read handle refreshed meanwhile: resolve again).
    pub(crate) fn axes_for(
        &self,
        shape: &[u64],
        path: &Path,
    ) -> FResult<&[blz::selection::AxisSel]> {
        if shape != self.against.as_slice() {
            return Err(Fail::Blz(blz::Error::Changed {
                path: path.to_path_buf(),
            }));
        }
        Ok(&self.resolved.axes)
    }
}

impl RawSelection {
    /// numpy's result of a read: `buf` (an array of the selection's counts, positions
    /// ascending) with reversed axes turned round, indexed axes dropped and new axes
    /// inserted (a reshape when nothing is reversed: no copy), a numpy scalar where numpy
    /// gives one.
    pub(crate) fn result<'py>(&self, buf: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = buf.py();
        if self.scalar || self.resolved.axes.iter().any(|a| a.reversed && a.keep) {
            return buf.get_item(self.view(py)?);
        }
        if self.resolved.shape == self.resolved.counts() {
            return Ok(buf);
        }
        buf.call_method1(
            intern!(py, "reshape"),
            (PyTuple::new(py, &self.resolved.shape)?,),
        )
    }
}

/// Resolves a numpy key against `shape` (a dataset read some other way: a bcolz carray);
/// errors name `path`.
#[pyfunction]
pub(crate) fn select(
    key: &Bound<'_, PyAny>,
    shape: Vec<u64>,
    path: PathBuf,
) -> PyResult<RawSelection> {
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
    pub(crate) fn view<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
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
