//! Reductions of arrays and table columns along axes (`blz::scan::reduce_axis`): numpy's
//! `sum`, `min`, `max`, `mean`, `std`, `var`, `argmin`, `argmax`, `any`, `all` and
//! `count_nonzero`, computed in Rust with the GIL released. `blz/_reduce.py` gives them
//! numpy's signatures and `__array_function__`.

use crate::{detached, FResult, RawArray, RawTable};
use blz::scan::{reduce_axis, reduce_axis_column, ReduceOutput, Reduction, ScanOptions};
use blz::Endianness;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyByteArray;

/// A result as `(descr, shape, bytes)`: numpy's dtype string, the shape and a `bytearray` of
/// native-endian C-order elements.
type Out<'py> = (String, Vec<usize>, Bound<'py, PyByteArray>);

fn op_of(name: &str) -> PyResult<Reduction> {
    name.parse::<Reduction>()
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

fn to_py<'py>(py: Python<'py>, out: &ReduceOutput) -> Out<'py> {
    (
        out.dtype().descr(Endianness::native()),
        out.shape().to_vec(),
        PyByteArray::new(py, &out.to_ne_bytes()),
    )
}

/// Reduces an array: `op` a reduction's name, `axes` the axes (non-negative, checked) or
/// `None` for all, `ddof` for `var`/`std`.
#[pyfunction]
#[pyo3(signature = (array, op, axes=None, ddof=0.0))]
pub(crate) fn reduce_array<'py>(
    py: Python<'py>,
    array: &Bound<'py, RawArray>,
    op: &str,
    axes: Option<Vec<usize>>,
    ddof: f64,
) -> PyResult<Out<'py>> {
    let op = op_of(op)?;
    let raw = array.get();
    let out = detached(py, || -> FResult<ReduceOutput> {
        raw.read(|ds| {
            Ok(reduce_axis(
                ds,
                &ScanOptions::default(),
                op,
                axes.as_deref(),
                ddof,
            )?)
        })
    })?;
    Ok(to_py(py, &out))
}

/// As `reduce_array`, over the fixed-size leaf column `column` of a table.
#[pyfunction]
#[pyo3(signature = (table, column, op, axes=None, ddof=0.0))]
pub(crate) fn reduce_column<'py>(
    py: Python<'py>,
    table: &Bound<'py, RawTable>,
    column: &str,
    op: &str,
    axes: Option<Vec<usize>>,
    ddof: f64,
) -> PyResult<Out<'py>> {
    let op = op_of(op)?;
    let raw = table.get();
    let out = detached(py, || -> FResult<ReduceOutput> {
        raw.read(|t| {
            Ok(reduce_axis_column(
                t,
                column,
                &ScanOptions::default(),
                op,
                axes.as_deref(),
                ddof,
            )?)
        })
    })?;
    Ok(to_py(py, &out))
}

/// Adds the functions to the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(reduce_array, m)?)?;
    m.add_function(wrap_pyfunction!(reduce_column, m)?)?;
    Ok(())
}
