//! `blz.sql`: a SQL query over tables and layer datasets (the library's `blz::sql`), its
//! rows handed to Python as an Arrow C stream (the Arrow PyCapsule protocol), which pyarrow,
//! polars and duckdb read directly.

use crate::{detached, lock_err, panic_message, Fail};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use blz::sql::QueryResult;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use std::sync::{Arc, Mutex};

/// The rows of a query, not yet read: handed over once, as an Arrow C stream.
#[pyclass(module = "blz._blz")]
pub(crate) struct RawQuery {
    result: Mutex<Option<QueryResult>>,
    columns: Vec<String>,
    /// The blz error that ended the stream, for `take_error`.
    last_error: Arc<Mutex<Option<blz::Error>>>,
}

#[pymethods]
impl RawQuery {
    /// The names of the result's columns.
    #[getter]
    fn columns(&self) -> Vec<String> {
        self.columns.clone()
    }

    /// The rows as an Arrow C stream in a PyCapsule named `arrow_array_stream`. A query's
    /// rows are computed as they are read: they can be taken once.
    #[pyo3(signature = (requested_schema=None))]
    fn arrow_stream<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        // The protocol lets a producer keep its own schema; the consumer checks.
        let _ = requested_schema;
        let result = self
            .result
            .lock()
            .map_err(|_| lock_err("query").into_py(py))?
            .take()
            .ok_or_else(|| {
                PyValueError::new_err("the rows of this query were already read (run it again)")
            })?;
        let reader = Guarded {
            schema: result.schema(),
            inner: result,
            last_error: Arc::clone(&self.last_error),
        };
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// The blz exception for the error that ended the rows (once), or `None`: what a
    /// consumer of the Arrow stream saw only as its message.
    fn take_error(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let taken = self
            .last_error
            .lock()
            .map_err(|_| lock_err("query").into_py(py))?
            .take();
        Ok(taken.map(|e| Fail::Blz(e).into_py(py).into_value(py).into_any()))
    }
}

/// A query's rows as the Arrow C stream hands them over. The stream's C functions cannot
/// unwind and turn an error's message into a C string, so here a panic becomes an error, a
/// message holds no NUL byte, and the blz error itself is kept for `take_error`.
struct Guarded {
    schema: SchemaRef,
    inner: QueryResult,
    last_error: Arc<Mutex<Option<blz::Error>>>,
}

impl Iterator for Guarded {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.inner.next()));
        let e = match next {
            Ok(Some(Err(e))) => blz::sql::from_arrow(e),
            Ok(other) => return other,
            Err(p) => blz::Error::Sql(format!(
                "internal error in blz: {}",
                panic_message(p.as_ref())
            )),
        };
        let message = e.to_string().replace('\0', "\\0");
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(e);
        }
        Some(Err(ArrowError::ExternalError(message.into())))
    }
}

impl RecordBatchReader for Guarded {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

/// Plans and starts `query` over `tables` (`(name, path or URL)` pairs; tables named by a
/// path in double quotes in the query are opened too), with the GIL released.
#[pyfunction]
pub(crate) fn sql(
    py: Python<'_>,
    query: String,
    tables: Vec<(String, String)>,
) -> PyResult<RawQuery> {
    let result = detached(py, || {
        let pairs: Vec<(&str, &str)> = tables
            .iter()
            .map(|(n, p)| (n.as_str(), p.as_str()))
            .collect();
        blz::sql::query(&query, &pairs).map_err(Fail::Blz)
    })?;
    let columns = result
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    Ok(RawQuery {
        result: Mutex::new(Some(result)),
        columns,
        last_error: Arc::new(Mutex::new(None)),
    })
}
