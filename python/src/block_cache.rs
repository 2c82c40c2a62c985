//! `_blz.block_cache`: the bound of an array handle's cache of decoded Blosc blocks
//! (`blz::Dataset::set_block_cache_bytes`), behind `blz.Array.block_cache`.

use pyo3::prelude::*;

use crate::{detached, RawArray};

/// Sets the bound of the handle's cache of decoded blocks when `max_bytes` is given (0
/// turns it off) and returns the bound.
#[pyfunction]
#[pyo3(signature = (raw, max_bytes=None))]
pub(crate) fn block_cache(
    py: Python<'_>,
    raw: &Bound<'_, RawArray>,
    max_bytes: Option<usize>,
) -> PyResult<usize> {
    let raw = raw.get();
    detached(py, || {
        raw.read(|ds| {
            if let Some(m) = max_bytes {
                ds.set_block_cache_bytes(m);
            }
            Ok(ds.block_cache_bytes())
        })
    })
}
