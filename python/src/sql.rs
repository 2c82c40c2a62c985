//! `blz.sql`: a SQL query over tables and layer datasets (the library's `blz::sql`), its
//! rows handed to Python as an Arrow C stream (the Arrow PyCapsule protocol), which pyarrow,
//! polars and duckdb read directly.

use crate::{detached, lock_err, Fail};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use blz::sql::QueryResult;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use std::sync::Mutex;

/// The rows of a query, not yet read: handed over once, as an Arrow C stream.
#[pyclass(module = "blz._blz")]
pub(crate) struct RawQuery {
    result: Mutex<Option<QueryResult>>,
    columns: Vec<String>,
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
        let stream = FFI_ArrowArrayStream::new(Box::new(result));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
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
    })
}
