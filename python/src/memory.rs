//! In-memory datasets from Python (`blz.array`, `blz.create(None, ...)`, `memory://` URLs,
//! `ds.save`, `blz.open(..., in_memory=True)`): the library's `memory` storage
//! (`blz::storage::memory`) reached through the same entrances as disk. An anonymous
//! dataset (no path given) lives while a handle on it does.

use crate::{detached, open, FResult};
use blz::storage::memory;
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::Arc;

/// Loads the dataset at `path` (a local path, an `s3://` or a `memory://` URL) into a new
/// anonymous in-memory dataset and opens it (for writing when `write`), as `_blz.open` does:
/// `(kind, handle)`.
#[pyfunction]
fn load(py: Python<'_>, path: PathBuf, write: bool) -> PyResult<(&'static str, Py<PyAny>)> {
    let (storage, root) = memory::anonymous();
    let (into, r) = (Arc::clone(&storage), root.clone());
    detached(py, move || -> FResult<()> {
        blz::copy::copy_into(&path, &into, &r, false)?;
        Ok(())
    })?;
    // `storage` keeps the tree until the handle opened on it holds it.
    let opened = open(py, root, write);
    drop(storage);
    opened
}

/// Copies the dataset at `src` to `dst` (each a local path, an `s3://` or a `memory://`
/// URL), appearing whole or not at all; an existing `dst` is replaced only with
/// `overwrite`: `(files, bytes)` copied.
#[pyfunction]
fn copy_dataset(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    overwrite: bool,
) -> PyResult<(u64, u64)> {
    detached(py, move || {
        let c = blz::copy::copy_dataset(&src, &dst, overwrite)?;
        Ok((c.files, c.bytes))
    })
}

/// Removes the in-memory dataset at the `memory://` URL `url` (`blz::storage::memory::remove`).
#[pyfunction]
fn remove_memory(py: Python<'_>, url: PathBuf) -> PyResult<()> {
    memory::remove(&url).map_err(|e| crate::Fail::from(e).into_py(py))
}

/// The bytes the files of the in-memory dataset at `url` take (0 when none is there).
#[pyfunction]
fn memory_bytes(url: PathBuf) -> u64 {
    memory::bytes_held(&url)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(copy_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(remove_memory, m)?)?;
    m.add_function(wrap_pyfunction!(memory_bytes, m)?)?;
    Ok(())
}
