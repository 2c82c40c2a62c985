//! Where a create builds ([`for_new`]: a path, a URL, or a new anonymous in-memory dataset),
//! and whole directories swapped in one step, for groups of datasets the Python package writes
//! (`blz.xarray.to_blz` replacing a group): the local storage's atomic exchange
//! (`renameat2(RENAME_EXCHANGE)` on Linux), so that a reader of the path sees the old
//! directory or the new one and never neither.

use crate::{detached, FResult};
use blz::storage::{memory, LocalStorage, Storage};
use pyo3::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// The storage and root a create builds in: a new anonymous in-memory dataset when no path
/// is given, else what `path` names (a local path, an `s3://` or a `memory://` URL).
pub(crate) fn for_new(
    path: Option<&Path>,
    overwrite: bool,
) -> blz::Result<(Arc<dyn Storage>, PathBuf)> {
    match path {
        None => Ok(memory::anonymous()),
        Some(p) => blz::storage::for_new_path(p, overwrite),
    }
}
