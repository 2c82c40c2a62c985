//! The one function that opens a dataset for Python ([`open`]), above the classes it
//! builds a handle of.

use crate::array::RawArray;
use crate::bcolz::RawBcolz;
use crate::errors::{detached, Fail};
use crate::layer::RawLayer;
use crate::table::RawTable;
use blz::{AnyDataset, BcolzDataset};
use pyo3::prelude::*;
use std::path::PathBuf;

/// Opens the dataset at `path` (a directory, an `s3://` or a `memory://` URL) as the kind
/// it is, through the library's one entrance (`blz::open`: the kind read once; on an object
/// store, one load of its state): `(kind, handle)`, kind one of `array`, `table`, `layer`,
/// `bcolz carray`, `bcolz ctable`; the handle a `RawArray`, `RawTable`, `RawLayer` or
/// `RawBcolz`, or `None` for a bcolz ctable (its columns open one by one, as carrays).
#[pyfunction]
pub(crate) fn open(
    py: Python<'_>,
    path: PathBuf,
    write: bool,
) -> PyResult<(&'static str, Py<PyAny>)> {
    let opened = detached(py, || {
        Ok(if write {
            blz::open_rw(&path)?
        } else {
            blz::open(&path)?
        })
    })?;
    let kind = opened.kind().name();
    let handle = match opened {
        AnyDataset::Array(ds) => Py::new(py, RawArray::wrap(ds, write))?.into_any(),
        AnyDataset::Table(t) => Py::new(py, RawTable::wrap(t, write))?.into_any(),
        AnyDataset::Layer(l) => Py::new(py, RawLayer::wrap(l))?.into_any(),
        AnyDataset::Bcolz(BcolzDataset::Carray(reader)) => {
            Py::new(py, RawBcolz::wrap(reader))?.into_any()
        }
        AnyDataset::Bcolz(_) => py.None(),
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
