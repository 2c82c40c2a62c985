//! Whole directories swapped in one step, for groups of datasets the Python package writes
//! (`blz.xarray.to_blz` replacing a group): the local storage's atomic exchange
//! (`renameat2(RENAME_EXCHANGE)` on Linux), so that a reader of the path sees the old
//! directory or the new one and never neither.

use crate::{detached, FResult};
use blz::storage::{LocalStorage, Storage};
use pyo3::prelude::*;
use std::path::Path;

/// Swaps the directories (or files) `a` and `b` in one atomic step. Raises
/// `blz.UnsupportedError` where the filesystem (or the platform) cannot.
#[pyfunction]
fn exchange_paths(py: Python<'_>, a: &str, b: &str) -> PyResult<()> {
    let (a, b) = (a.to_owned(), b.to_owned());
    detached(py, move || -> FResult<()> {
        Ok(LocalStorage.exchange(Path::new(&a), Path::new(&b))?)
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(exchange_paths, m)?)?;
    Ok(())
}
