//! Advanced selections (`blz::fancy`): index lists and points of arrays, rows of tables by
//! index. numpy's and zarr's rules (broadcasting, negative indices, masks, where the
//! broadcast axes go) are applied by `blz/_fancy.py`; this takes the resolved groups.

use super::{
    detached, leaf_kinds, values_from_py, var_list, Buf, FResult, Fail, RawArray, RawTable,
};
use blz::fancy::{AxisIndex, Fancy, Group};
use blz::selection::AxisSel;
use blz::table::{LeafKind, Values};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// Positions from a C-contiguous buffer of native-endian `uint64`.
fn positions(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let b = Buf::get(obj, false)?;
    let bytes = b.bytes();
    if bytes.len() % 8 != 0 {
        return Err(PyValueError::new_err("positions must be a uint64 array"));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

/// A selection from its Python form: a list of groups, each `("s", axis, (start, step,
/// count, reversed, keep))`, `("l", axis, positions)` or `("p", axes, [positions, ...])`,
/// positions being `uint64` arrays.
fn fancy_of(groups: &Bound<'_, PyList>) -> PyResult<Fancy> {
    let mut out = Vec::with_capacity(groups.len());
    for g in groups.iter() {
        let (kind, axes, data): (String, Bound<'_, PyAny>, Bound<'_, PyAny>) = g.extract()?;
        out.push(match kind.as_str() {
            "s" => {
                let (start, step, count, reversed, keep) = data.extract()?;
                Group::Axis {
                    axis: axes.extract()?,
                    index: AxisIndex::Strided(AxisSel {
                        start,
                        step,
                        count,
                        reversed,
                        keep,
                    }),
                }
            }
            "l" => Group::Axis {
                axis: axes.extract()?,
                index: AxisIndex::List(positions(&data)?),
            },
            "p" => Group::Points {
                axes: axes.extract()?,
                coords: data
                    .try_iter()?
                    .map(|c| positions(&c?))
                    .collect::<PyResult<_>>()?,
            },
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown selection group {other:?}"
                )))
            }
        });
    }
    Ok(Fancy::new(out))
}

/// Reads an advanced selection of an array into `out` (C-contiguous, native byte order,
/// C order over one axis per group).
#[pyfunction]
pub(crate) fn fancy_read(
    py: Python<'_>,
    array: &Bound<'_, RawArray>,
    groups: &Bound<'_, PyList>,
    out: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let sel = fancy_of(groups)?;
    let out = Buf::get(out, true)?;
    let raw = array.get();
    detached(py, || {
        raw.read(|ds| {
            ds.read_fancy_into(&sel, out.bytes_mut())?;
            Ok(())
        })
    })
}

/// Writes `data` (laid out as `fancy_read` fills its output) into an advanced selection of
/// an array, in one transaction.
#[pyfunction]
pub(crate) fn fancy_write(
    py: Python<'_>,
    array: &Bound<'_, RawArray>,
    groups: &Bound<'_, PyList>,
    data: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let sel = fancy_of(groups)?;
    let data = Buf::get(data, false)?;
    let raw = array.get();
    detached(py, || {
        raw.write(|ds| {
            ds.write_fancy_bytes(&sel, data.bytes())?;
            Ok(())
        })
    })
}

/// The rows at `indices` (a `uint64` array) of several columns of a table
/// (`blz::Table::take`): each fixed-size column of `into` (`(path, array)` pairs) copied into
/// its numpy array; the values of the variable-length columns of `var` returned as lists.
#[pyfunction]
pub(crate) fn table_take<'py>(
    py: Python<'py>,
    table: &Bound<'py, RawTable>,
    indices: &Bound<'py, PyAny>,
    into: Vec<(String, Bound<'py, PyAny>)>,
    var: Vec<String>,
) -> PyResult<Vec<Bound<'py, PyList>>> {
    let indices = positions(indices)?;
    let bufs = into
        .iter()
        .map(|(p, o)| Ok((p.as_str(), Buf::get(o, true)?)))
        .collect::<PyResult<Vec<_>>>()?;
    let raw = table.get();
    let (values, is_str) = detached(py, || -> FResult<_> {
        raw.read(|t| {
            let mut names: Vec<&str> = bufs.iter().map(|(p, _)| *p).collect();
            names.extend(var.iter().map(String::as_str));
            let taken = t.take(&indices, Some(&names))?;
            let mut var_values = Vec::new();
            let mut is_str = Vec::new();
            for (i, (name, v)) in taken.into_iter().enumerate() {
                match (bufs.get(i), v) {
                    (Some((_, b)), Values::Fixed { data, .. }) => {
                        let dst = b.bytes_mut();
                        if dst.len() != data.len() {
                            return Err(Fail::Py(PyValueError::new_err(format!(
                                "column {name}: a buffer of {} bytes for {} bytes",
                                dst.len(),
                                data.len()
                            ))));
                        }
                        dst.copy_from_slice(&data);
                    }
                    (None, v) => {
                        is_str.push(
                            t.leaves()
                                .iter()
                                .any(|l| l.path == name && l.kind == LeafKind::VarStr),
                        );
                        var_values.push(v);
                    }
                    (Some(_), _) => {
                        return Err(Fail::Py(PyValueError::new_err(format!(
                            "column {name} is not fixed-size"
                        ))))
                    }
                }
            }
            Ok((var_values, is_str))
        })
    })?;
    values
        .into_iter()
        .zip(is_str)
        .zip(&var)
        .map(|((v, is_str), name)| var_list(py, name, v, is_str))
        .collect()
}

/// Overwrites the rows at `indices` (a `uint64` array) of the given columns of a table
/// (`blz::Table::put`), in one transaction.
#[pyfunction]
pub(crate) fn table_put(
    py: Python<'_>,
    table: &Bound<'_, RawTable>,
    indices: &Bound<'_, PyAny>,
    columns: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let indices = positions(indices)?;
    let raw = table.get();
    let kinds = raw.read(|t| Ok(leaf_kinds(t))).map_err(|e| e.into_py(py))?;
    let cols = values_from_py(&kinds, columns)?;
    detached(py, || {
        raw.write(|t| {
            let (names, vals): (Vec<String>, Vec<blz::table::NullableValues>) =
                cols.into_iter().unzip();
            let refs: Vec<(&str, blz::table::NullableValues)> =
                names.iter().map(String::as_str).zip(vals).collect();
            Ok(t.put(&indices, &refs)?)
        })
    })
}

/// Registers the functions in the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fancy_read, m)?)?;
    m.add_function(wrap_pyfunction!(fancy_write, m)?)?;
    m.add_function(wrap_pyfunction!(table_take, m)?)?;
    m.add_function(wrap_pyfunction!(table_put, m)?)?;
    Ok(())
}
