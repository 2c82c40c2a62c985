//! `blz._blz`: the native half of blz's Python package.
//!
//! A thin client of the blz library: every class here wraps one of the library's datasets
//! (`Dataset`, `Table`, `Layer`, a bcolz reader) in one per-process handle
//! ([`handle::Handle`]), opened through one function ([`opening::open`], the library's
//! `blz::open`). A read `a[key]` is one call ([`array::RawArray`]'s `get`): the key parsed
//! and resolved, the numpy array allocated, the chunks decoded into it with the GIL
//! released, numpy's result made, and the read made again when it met a writer's commit
//! (`blz::on_latest_commit`). numpy's conventions beyond that (advanced indexing,
//! broadcasting in writes) live in the Python package `blz`, which is what users import.
//!
//! Decoding and encoding run with the GIL released, on the library's rayon pool. A panic
//! never crosses into Python: it becomes a `blz.Error`.
//!
//! Modules: `errors` (exceptions, [`errors::detached`]), `convert` (buffers, dtypes, JSON,
//! options), `selection` (numpy keys), `handle` (the handle, `open`), `array` (with its staged writes),
//! `table`, `layer`, `bcolz` (one per class), and the module functions of `arrow`,
//! `block_cache`, `buffers`, `expr`, `fancy`, `memory`, `paths`, `query`, `reduce`, `sql`.

mod array;
mod arrow;
mod bcolz;
mod block_cache;
mod buffers;
mod convert;
mod errors;
mod expr;
mod fancy;
mod handle;
mod layer;
mod memory;
mod opening;
mod paths;
mod query;
mod reduce;
mod selection;
mod sql;
mod table;

// The names the modules of module functions share.
pub(crate) use array::RawArray;
pub(crate) use convert::{compression, parse_dtype, Buf};
pub(crate) use errors::{detached, lock_err, panic_message, FResult, Fail, HOME};
pub(crate) use opening::open;
pub(crate) use table::{leaf_kinds, values_from_py, var_list, RawTable};

use array::RawStaged;
use bcolz::RawBcolz;
use layer::RawLayer;
use pyo3::prelude::*;
use selection::RawSelection;
use std::path::PathBuf;

/// `locate`'s answer per file: `(path, host, location, kind)`.
type Located = (PathBuf, String, String, String);

/// The kind of the blz dataset at `path`: `array`, `table`, `layer`, or `None`.
#[pyfunction]
fn dataset_kind(path: PathBuf) -> Option<&'static str> {
    let (storage, root) = blz::storage::for_path(&path).ok()?;
    blz::meta::dataset_kind(storage.as_ref(), &root).map(blz::Kind::name)
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
    m.add_function(wrap_pyfunction!(array::staged_write_rows, m)?)?;
    m.add_function(wrap_pyfunction!(collect_garbage, m)?)?;
    m.add_function(wrap_pyfunction!(dataset_kind, m)?)?;
    m.add_function(wrap_pyfunction!(opening::open, m)?)?;
    m.add_function(wrap_pyfunction!(handle::on_latest_commit, m)?)?;
    m.add_function(wrap_pyfunction!(selection::select, m)?)?;
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
