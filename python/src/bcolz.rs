//! `RawBcolz`: a bcolz carray, read in place.

use crate::convert::Buf;
use crate::errors::{detached, Fail};
use crate::handle::Handle;
use blz::bcolz::{CarrayReader, CtableReader, Kind as BcolzKind};
use pyo3::prelude::*;
use std::path::PathBuf;

/// A bcolz carray, read in place.
#[pyclass(module = "blz._blz", frozen)]
pub(crate) struct RawBcolz {
    h: Handle<CarrayReader>,
}

impl RawBcolz {
    pub(crate) fn wrap(reader: CarrayReader) -> RawBcolz {
        let path = reader.path().to_path_buf();
        RawBcolz {
            h: Handle::new(reader, &path, false),
        }
    }
}

#[pymethods]
impl RawBcolz {
    /// `"carray"` or `"ctable"` for a bcolz root directory.
    #[staticmethod]
    fn detect(path: PathBuf) -> Option<&'static str> {
        match blz::bcolz::detect(&path) {
            Ok(BcolzKind::Carray) => Some("carray"),
            Ok(BcolzKind::Ctable) => Some("ctable"),
            Err(_) => None,
        }
    }

    /// The column names of a ctable (each a carray directory beside them).
    #[staticmethod]
    fn ctable_columns(py: Python<'_>, path: PathBuf) -> PyResult<(Vec<(String, String)>, String)> {
        detached(py, || {
            let t = CtableReader::open(&path)?;
            let cols = t
                .names()
                .iter()
                .zip(t.columns())
                .map(|(n, c)| (n.clone(), c.path().display().to_string()))
                .collect();
            Ok((
                cols,
                serde_json::Value::Object(t.attrs().clone()).to_string(),
            ))
        })
    }

    /// The path as given (a `str`: a URL's `//` kept, which `pathlib` would fold).
    #[getter]
    fn path(&self) -> std::ffi::OsString {
        self.h.path().as_os_str().to_owned()
    }

    /// `(shape, descr in the stored byte order, chunklen, attrs JSON)`.
    fn state(&self, py: Python<'_>) -> PyResult<(Vec<u64>, String, u64, String)> {
        detached(py, || {
            self.h.read(|r| {
                let m = r.meta();
                Ok((
                    m.shape.clone(),
                    m.dtype.descr(m.endianness),
                    m.chunklen,
                    serde_json::Value::Object(r.attrs().clone()).to_string(),
                ))
            })
        })
    }

    /// Rows `start..end` (stored byte order) into `out`.
    fn read_rows_into(
        &self,
        py: Python<'_>,
        start: u64,
        end: u64,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let out = Buf::get(out, true)?;
        detached(py, || {
            self.h.handle_mut(|r| {
                let rb = r.meta().row_bytes();
                let cl = r.meta().chunklen;
                let end = end.min(r.meta().len());
                let dst = out.bytes_mut();
                if (dst.len() as u64) != end.saturating_sub(start) * rb {
                    return Err(Fail::Panic("bcolz read buffer of the wrong size".into()));
                }
                let mut at = start;
                while at < end {
                    let c = at / cl;
                    let from = at - c * cl;
                    let take = (end - at).min(cl - from);
                    let bytes = r.read_chunk(c)?;
                    let src = bytes
                        .get((from * rb) as usize..((from + take) * rb) as usize)
                        .ok_or_else(|| Fail::Panic("short bcolz chunk".into()))?;
                    let o = ((at - start) * rb) as usize;
                    dst[o..o + src.len()].copy_from_slice(src);
                    at += take;
                }
                Ok(())
            })
        })
    }
}
