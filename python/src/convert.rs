//! What Python hands the library, in the simplest form: contiguous buffers ([`Buf`]),
//! dtype descriptors, JSON text, compression names, batches pulled from an iterator.

use blz::{DType, Endianness};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyIterator;
use std::sync::Mutex;

/// A contiguous buffer exported by a Python object (a numpy array), held for the duration of
/// one call. Holding the `PyUntypedBuffer` keeps the export (and the memory) alive.
pub(crate) struct Buf {
    buf: PyUntypedBuffer,
}

impl Buf {
    pub(crate) fn get(obj: &Bound<'_, PyAny>, writable: bool) -> PyResult<Buf> {
        let buf = match PyUntypedBuffer::get(obj) {
            Ok(b) => b,
            // numpy exports no buffer of datetime64/timedelta64 arrays: their int64 view has
            // the same bytes (the buffer holds the view, and the view the array).
            Err(e) => match obj.getattr("dtype").and_then(|d| d.getattr("kind")) {
                Ok(k) if matches!(k.extract::<String>().as_deref(), Ok("M" | "m")) => {
                    PyUntypedBuffer::get(&obj.call_method1("view", ("i8",))?)?
                }
                _ => return Err(e),
            },
        };
        if !buf.is_c_contiguous() {
            return Err(PyValueError::new_err("blz needs a C-contiguous buffer"));
        }
        if writable && buf.readonly() {
            return Err(PyValueError::new_err("blz needs a writable buffer"));
        }
        Ok(Buf { buf })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        let len = self.buf.len_bytes();
        if len == 0 {
            return &[];
        }
        // SAFETY: the buffer is C-contiguous (checked in `get`) and `len_bytes` long, and the
        // export stays alive (numpy cannot free or resize the memory) while `self` does. The
        // bytes are only read. Another Python thread could write to the same array while the
        // GIL is released, as it could during any numpy operation that releases the GIL;
        // blz then reads some old and some new values, and nothing else.
        unsafe { std::slice::from_raw_parts(self.buf.buf_ptr() as *const u8, len) }
    }

    #[expect(
        clippy::mut_from_ref,
        reason = "the memory is Python's, not self's: exclusivity is the caller's contract"
    )]
    pub(crate) fn bytes_mut(&self) -> &mut [u8] {
        let len = self.buf.len_bytes();
        if len == 0 {
            return &mut [];
        }
        // SAFETY: as in `bytes`; the buffer is writable (checked in `get`), and the arrays
        // blz fills are freshly allocated by the calling Python function, which hands them
        // to no one before this call returns, so this is the only reference to the memory.
        unsafe { std::slice::from_raw_parts_mut(self.buf.buf_ptr() as *mut u8, len) }
    }
}

pub(crate) fn parse_dtype(descr: &str) -> PyResult<(DType, Option<Endianness>)> {
    DType::parse_descr(descr).map_err(|e| PyValueError::new_err(e.to_string()))
}

pub(crate) fn json_map(text: Option<&str>) -> PyResult<serde_json::Map<String, serde_json::Value>> {
    match text {
        None => Ok(serde_json::Map::new()),
        Some(t) => match blz::meta::parse_json_exact(t) {
            Ok(serde_json::Value::Object(m)) => Ok(m),
            // An integer past 64 bits, which JSON would keep only as a float, named.
            Err(blz::Error::InvalidArgument(m))
                if serde_json::from_str::<serde_json::Value>(t).is_ok() =>
            {
                Err(PyValueError::new_err(format!("attribute {m}")))
            }
            _ => Err(PyValueError::new_err("attributes must be a JSON object")),
        },
    }
}

pub(crate) fn json_value(text: Option<&str>) -> PyResult<serde_json::Value> {
    match text {
        None => Ok(serde_json::Value::Null),
        Some(t) => blz::meta::parse_json_exact(t).map_err(|e| PyValueError::new_err(e.to_string())),
    }
}

/// Compression settings from the Python names (`codec`, `clevel`, `filter`).
pub(crate) fn compression(
    codec: &str,
    clevel: u8,
    filter: &str,
) -> PyResult<blz::meta::Compression> {
    let filters: Vec<&str> = match filter {
        "none" | "" => vec![],
        "shuffle" => vec!["shuffle"],
        "bitshuffle" => vec!["bitshuffle"],
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown filter {other:?} (shuffle, bitshuffle or none)"
            )))
        }
    };
    serde_json::from_value(serde_json::json!({
        "codec": codec, "clevel": clevel, "filters": filters,
    }))
    .map_err(|_| {
        PyValueError::new_err(format!(
            "unknown codec {codec:?} (blosclz, lz4, lz4hc, zlib or zstd)"
        ))
    })
}

pub(crate) fn checksum(name: &str) -> PyResult<blz::blpk::Checksum> {
    blz::blpk::Checksum::from_name(name)
        .ok_or_else(|| PyValueError::new_err(format!("unknown checksum {name:?}")))
}

impl AsRef<[u8]> for Buf {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

/// The next buffer of a Python iterator, for a library call that takes batches; the GIL is
/// taken for the call into Python only. A Python exception is kept in `failed` (for the
/// caller to re-raise) and ends the batches with an error, so the library call fails.
pub(crate) fn next_batch(
    it: &Py<PyIterator>,
    failed: &Mutex<Option<PyErr>>,
) -> Option<blz::Result<Buf>> {
    Python::attach(|py| {
        let mut it = it.bind(py).clone();
        let got = it
            .next()?
            .and_then(|obj| Buf::get(&obj, false))
            .map_err(|e| {
                let msg = format!("a batch could not be read: {e}");
                if let Ok(mut f) = failed.lock() {
                    *f = Some(e);
                }
                blz::Error::InvalidArgument(msg)
            });
        Some(got)
    })
}
