//! The handle every dataset class of the binding holds ([`Handle`]).
//!
//! A handle belongs to the process that opened it. In a child forked since
//! (`multiprocessing`, PyTorch's data loaders), the dataset is opened again there on first
//! use: the parent's handle may be locked by one of the parent's threads, which the child
//! does not have (a read in progress at the fork). A read-write handle opens for writing
//! again, or, while another process (the parent) holds the writer lock, read-only: the
//! child reads, and each write tries for the lock ([`Handle::write`]).

use crate::errors::{detached, lock_err, FResult, Fail};
use blz::bcolz::CarrayReader;
use blz::process::PerProcess;
use blz::{AnyDataset, BcolzDataset, Dataset, Layer, Mode, Table};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// A dataset kind a [`Handle`] holds: taken out of what the library's one entrance
/// (`blz::open`) found, refreshed to the latest commit, written or not.
pub(crate) trait Opened: Sized + Send + Sync {
    /// The kind's name, for the error when a path holds another kind.
    const KIND: &'static str;

    /// The dataset, when `any` is of this kind.
    fn take(any: AnyDataset) -> Option<Self>;

    /// Whether it holds the writer lock.
    fn mode(&self) -> Mode {
        Mode::ReadOnly
    }

    /// Brings it to the latest commit; whether it changed (kinds written once never do).
    fn refresh(&mut self) -> blz::Result<bool> {
        Ok(false)
    }
}

impl Opened for Dataset {
    const KIND: &'static str = "array";
    fn take(any: AnyDataset) -> Option<Self> {
        match any {
            AnyDataset::Array(d) => Some(d),
            _ => None,
        }
    }
    fn mode(&self) -> Mode {
        Dataset::mode(self)
    }
    fn refresh(&mut self) -> blz::Result<bool> {
        Dataset::refresh(self)
    }
}

impl Opened for Table {
    const KIND: &'static str = "table";
    fn take(any: AnyDataset) -> Option<Self> {
        match any {
            AnyDataset::Table(t) => Some(t),
            _ => None,
        }
    }
    fn mode(&self) -> Mode {
        Table::mode(self)
    }
    fn refresh(&mut self) -> blz::Result<bool> {
        Table::refresh(self)
    }
}

/// A layer is shared out of its handle (`Arc`): its cursors outlive one lock of it.
impl Opened for Arc<Layer> {
    const KIND: &'static str = "layer";
    fn take(any: AnyDataset) -> Option<Self> {
        match any {
            AnyDataset::Layer(l) => Some(Arc::new(l)),
            _ => None,
        }
    }
}

impl Opened for CarrayReader {
    const KIND: &'static str = "bcolz carray";
    fn take(any: AnyDataset) -> Option<Self> {
        match any {
            AnyDataset::Bcolz(BcolzDataset::Carray(r)) => Some(r),
            _ => None,
        }
    }
}

/// Opens the dataset at `path` (a directory, an `s3://` or `memory://` URL) as the kind `D`,
/// through the library's one entrance, for writing when `write`.
pub(crate) fn open_as<D: Opened>(path: &Path, write: bool) -> FResult<D> {
    let any = if write {
        blz::open_rw(path)?
    } else {
        blz::open(path)?
    };
    let kind = any.kind();
    D::take(any).ok_or_else(|| {
        Fail::Blz(blz::Error::InvalidArgument(format!(
            "{}: a {kind} dataset, not a {}",
            path.display(),
            D::KIND
        )))
    })
}

/// One open dataset of kind `D`, per process (see the module's documentation).
pub(crate) struct Handle<D> {
    inner: PerProcess<RwLock<D>>,
    /// The path as given (a URL's `//` kept).
    path: PathBuf,
    /// Whether the handle writes (until [`Handle::close`]).
    writable: AtomicBool,
    /// A refresh made inside a call ([`Handle::latest`]) found a commit the Python side has
    /// not been told of yet: the next [`Handle::refresh`] says the handle changed.
    unseen: AtomicBool,
}

impl<D: Opened> Handle<D> {
    /// A handle on `d`, opened in this process.
    pub(crate) fn new(d: D, path: &Path, writable: bool) -> Handle<D> {
        Handle {
            inner: PerProcess::with(RwLock::new(d)),
            path: path.to_path_buf(),
            writable: AtomicBool::new(writable),
            unseen: AtomicBool::new(false),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn writable(&self) -> bool {
        self.writable.load(Ordering::Relaxed)
    }

    /// The dataset as this process has it: opened again in a forked child, for writing
    /// when the handle writes, unless another process holds the writer lock (then for
    /// reading).
    pub(crate) fn here(&self) -> FResult<&RwLock<D>> {
        self.inner.get_or_try_init(|| {
            if self.writable() {
                match open_as(&self.path, true) {
                    Err(Fail::Blz(blz::Error::Locked { .. })) => {}
                    r => return Ok(RwLock::new(r?)),
                }
            }
            Ok(RwLock::new(open_as(&self.path, false)?))
        })
    }

    /// Runs `f` on the dataset, shared with the process's other readers.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&D) -> FResult<T>) -> FResult<T> {
        let d = self.here()?.read().map_err(|_| lock_err(D::KIND))?;
        f(&d)
    }

    /// Runs a write. A writable handle that a forked child opened read-only (its parent
    /// held the writer lock, [`Self::here`]) takes the lock first: `LockedError` naming the
    /// holder while it is held.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&mut D) -> FResult<T>) -> FResult<T> {
        self.handle_mut(|d| {
            if self.writable() && d.mode() == Mode::ReadOnly {
                *d = open_as(&self.path, true)?;
            }
            f(d)
        })
    }

    /// The handle itself, alone, to refresh or close it (no writer lock taken).
    pub(crate) fn handle_mut<T>(&self, f: impl FnOnce(&mut D) -> FResult<T>) -> FResult<T> {
        let mut d = self.here()?.write().map_err(|_| lock_err(D::KIND))?;
        f(&mut d)
    }

    /// Brings the handle to the latest commit; whether it changed since Python last asked
    /// (a read's own refresh included).
    pub(crate) fn refresh(&self) -> FResult<bool> {
        let changed = self.handle_mut(|d| Ok(d.refresh()?))?;
        Ok(self.unseen.swap(false, Ordering::Relaxed) || changed)
    }

    /// Whether a read's own refresh showed a new commit since Python last asked (asking
    /// clears it).
    pub(crate) fn take_unseen(&self) -> bool {
        self.unseen.swap(false, Ordering::Relaxed)
    }

    /// `read` on the latest commit, made again when it met a writer's commit
    /// (`blz::on_latest_commit`, the library's one loop for that).
    pub(crate) fn latest<T>(&self, read: impl FnMut() -> FResult<T>) -> FResult<T> {
        blz::on_latest_commit(
            || {
                if self.handle_mut(|d| Ok(d.refresh()?))? {
                    self.unseen.store(true, Ordering::Relaxed);
                }
                Ok(())
            },
            read,
        )
    }

    /// Releases the writer lock and the open files: the dataset is opened again read-only
    /// in place (the handle reads on).
    pub(crate) fn close(&self) -> FResult<()> {
        self.handle_mut(|d| {
            *d = open_as(&self.path, false)?;
            self.writable.store(false, Ordering::Relaxed);
            Ok(())
        })
    }
}

impl blz::MaybeChanged for Fail {
    fn is_changed(&self) -> bool {
        match self {
            Fail::Blz(e) => e.is_changed(),
            Fail::PyChanged(_) => true,
            Fail::Panic(_) | Fail::Py(_) => false,
        }
    }
}

/// An exception Python code a library loop called raised: a `blz.ChangedError` is a read
/// that met a writer's commit, made again.
pub(crate) fn python_fail(py: Python<'_>, e: PyErr) -> Fail {
    static CHANGED: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let changed = CHANGED
        .import(py, "blz._errors", "ChangedError")
        .is_ok_and(|c| e.is_instance(py, c));
    if changed {
        Fail::PyChanged(e)
    } else {
        Fail::Py(e)
    }
}

/// `read()` on the latest commit, for the reads the Python package composes of several
/// calls (a table's rows, advanced indexing): `follow()` brings its handle (and what Python
/// keeps of it) to the latest commit, then `read()` runs, and a read that raised
/// `blz.ChangedError` is made again, by the library's one loop (`blz::on_latest_commit`),
/// with the GIL released between tries.
#[pyfunction]
pub(crate) fn on_latest_commit(
    py: Python<'_>,
    follow: Py<PyAny>,
    read: Py<PyAny>,
) -> PyResult<Py<PyAny>> {
    let call = |f: &Py<PyAny>| -> FResult<Py<PyAny>> {
        Python::attach(|py| f.call0(py).map_err(|e| python_fail(py, e)))
    };
    detached(py, || {
        blz::on_latest_commit(|| call(&follow).map(drop), || call(&read))
    })
}
