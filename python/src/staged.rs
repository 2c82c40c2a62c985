//! Staged writes (`blz::array::staged`): workers write superchunk files of an array's rows
//! into a session directory, and one commit makes them part of the array.

use crate::array::RawArray;
use crate::convert::Buf;
use crate::errors::{detached, lock_err, FResult, Fail};
use blz::array::staged::{StagedCreate, StagedWrite};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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
