//! `where` queries (`blz::query`): the matching rows of a table, or elements of an array,
//! handed to Python as raw bytes that `blz/_where.py` turns into numpy arrays.

use super::{detached, var_list, RawArray, RawTable};
use blz::table::{LeafKind, Values};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Native-endian bytes of `v`.
fn u64_bytes(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// Matching row indices (native uint64 bytes) and one `(path, values)` per column.
type TableMatches<'py> = (Bound<'py, PyBytes>, Vec<(String, Py<PyAny>)>);

/// The rows of `table` (rows `start..end`) where `expr` holds: `(rows, columns)`, `rows`
/// the matching row indices as native uint64 bytes, `columns` one `(path, values)` per
/// requested column: bytes of native elements for a fixed-size column, a list of `str` or
/// `bytes` for a variable-length one.
#[pyfunction]
pub(crate) fn table_where<'py>(
    py: Python<'py>,
    table: &Bound<'py, RawTable>,
    expr: &str,
    columns: Vec<String>,
    start: u64,
    end: u64,
) -> PyResult<TableMatches<'py>> {
    let raw = table.get();
    let (m, var_str) = detached(py, || {
        raw.read(|t| {
            let refs: Vec<&str> = columns.iter().map(String::as_str).collect();
            let m = t.where_rows_in(expr, &refs, start..end)?;
            let var_str: Vec<bool> = columns
                .iter()
                .map(|c| {
                    t.leaves()
                        .iter()
                        .any(|l| &l.path == c && l.kind == LeafKind::VarStr)
                })
                .collect();
            Ok((m, var_str))
        })
    })?;
    let rows = PyBytes::new(py, &u64_bytes(&m.rows));
    let mut out = Vec::with_capacity(m.columns.len());
    for ((name, values), is_str) in m.columns.into_iter().zip(var_str) {
        let obj: Py<PyAny> = match values {
            Values::Fixed { data, .. } => PyBytes::new(py, &data).into_any().unbind(),
            v => var_list(py, &name, v, is_str)?.into_any().unbind(),
        };
        out.push((name, obj));
    }
    Ok((rows, out))
}

/// The elements of `array` where `expr` (the elements named `x`) holds: `(indices,
/// values)`, the flat C-order indices as native uint64 bytes and the elements' native bytes.
#[pyfunction]
pub(crate) fn array_where<'py>(
    py: Python<'py>,
    array: &Bound<'py, RawArray>,
    expr: &str,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let raw = array.get();
    let m = detached(py, || raw.read(|d| Ok(d.where_elements(expr)?)))?;
    let data = match m.values {
        Values::Fixed { data, .. } => data,
        Values::Var(_) => Vec::new(),
    };
    Ok((
        PyBytes::new(py, &u64_bytes(&m.indices)),
        PyBytes::new(py, &data),
    ))
}

/// Numpy's boolean array of `expr` over `array`, as one byte (0 or 1) per element in C
/// order.
#[pyfunction]
pub(crate) fn array_where_mask<'py>(
    py: Python<'py>,
    array: &Bound<'py, RawArray>,
    expr: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let raw = array.get();
    let mask = detached(py, || raw.read(|d| Ok(d.where_mask(expr)?)))?;
    let bytes: Vec<u8> = mask.iter().map(|&b| u8::from(b)).collect();
    Ok(PyBytes::new(py, &bytes))
}

/// Registers the functions in the `_blz` module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(table_where, m)?)?;
    m.add_function(wrap_pyfunction!(array_where, m)?)?;
    m.add_function(wrap_pyfunction!(array_where_mask, m)?)?;
    Ok(())
}
