//! Tables exported through the Arrow C stream interface, for the Arrow PyCapsule protocol
//! (`Table.__arrow_c_stream__`): pyarrow, polars and duckdb read a table through it
//! directly, with no Python package in between. The batches are the library's
//! (`blz::arrow`); this module only hands them over.

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_schema::{ArrowError, Schema};
use blz::arrow::{Batches, Export};
use blz::table::Table;

/// An Arrow C stream of the whole table (its rows at this moment), in the schema `requested`
/// asks for when blz can produce it (see `blz::arrow::Export::requested`), else in the
/// table's own.
pub(crate) fn table_stream(
    table: &Table,
    requested: Option<&Schema>,
) -> Result<FFI_ArrowArrayStream, ArrowError> {
    let export = requested.and_then(|want| Export::requested(table, want));
    let batches =
        Batches::new(table, export).map_err(|e| ArrowError::ExternalError(Box::new(e)))?;
    Ok(FFI_ArrowArrayStream::new(Box::new(batches)))
}
