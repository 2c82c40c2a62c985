//! Array expressions (`blz::expr`) for `blz/_expr.py`: an expression's text and its operands
//! (`("array", RawArray)`, `("column", RawTable, path)`, `("memory", descr, shape, buffer)`,
//! `("int" | "float" | "bool", value)`), evaluated in one call with the GIL released.

use crate::{compression, detached, lock_err, parse_dtype, Buf, FResult, RawArray, RawTable};
use blz::expr::{Expression, Lit, Operand, Reduce};
use blz::selection::AxisSel;
use blz::{CreateOptions, Dataset, Endianness, Table};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyTuple};
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::RwLockReadGuard;

/// An operand as Python handed it.
enum PyOperand {
    Array(Py<RawArray>),
    Column(Py<RawTable>, String),
    Memory(blz::DType, Vec<u64>, Buf),
    Scalar(Lit),
}

fn operands(ops: &Bound<'_, PyAny>) -> PyResult<Vec<(String, PyOperand)>> {
    let mut out = Vec::new();
    for item in ops.try_iter()? {
        let item = item?;
        let t = item.cast::<PyTuple>()?;
        let name: String = t.get_item(0)?.extract()?;
        let kind: String = t.get_item(1)?.extract()?;
        let op = match kind.as_str() {
            "array" => PyOperand::Array(t.get_item(2)?.extract()?),
            "column" => PyOperand::Column(t.get_item(2)?.extract()?, t.get_item(3)?.extract()?),
            "memory" => {
                let (dtype, _) = parse_dtype(&t.get_item(2)?.extract::<String>()?)?;
                PyOperand::Memory(
                    dtype,
                    t.get_item(3)?.extract()?,
                    Buf::get(&t.get_item(4)?, false)?,
                )
            }
            "int" => PyOperand::Scalar(Lit::Int(t.get_item(2)?.extract()?)),
            "float" => PyOperand::Scalar(Lit::Float(t.get_item(2)?.extract()?)),
            "bool" => PyOperand::Scalar(Lit::Bool(t.get_item(2)?.extract()?)),
            k => return Err(PyValueError::new_err(format!("unknown operand kind {k:?}"))),
        };
        out.push((name, op));
    }
    Ok(out)
}

/// Read locks on the operands' datasets and tables, held while an expression runs.
struct Held<'a> {
    arrays: Vec<Option<RwLockReadGuard<'a, Dataset>>>,
    tables: Vec<Option<RwLockReadGuard<'a, Table>>>,
}

fn hold(ops: &[(String, PyOperand)]) -> FResult<Held<'_>> {
    let mut arrays = Vec::with_capacity(ops.len());
    let mut tables = Vec::with_capacity(ops.len());
    for (_, op) in ops {
        arrays.push(match op {
            PyOperand::Array(a) => Some(a.get().here()?.read().map_err(|_| lock_err("dataset"))?),
            _ => None,
        });
        tables.push(match op {
            PyOperand::Column(t, _) => Some(t.get().here()?.read().map_err(|_| lock_err("table"))?),
            _ => None,
        });
    }
    Ok(Held { arrays, tables })
}

/// The expression over the held operands.
fn build<'a>(
    text: &str,
    ops: &'a [(String, PyOperand)],
    held: &'a Held<'a>,
) -> FResult<Expression<'a>> {
    let mut bound = Vec::with_capacity(ops.len());
    for (i, (name, op)) in ops.iter().enumerate() {
        let o = match (
            op,
            held.arrays.get(i).and_then(Option::as_ref),
            held.tables.get(i).and_then(Option::as_ref),
        ) {
            (PyOperand::Array(_), Some(d), _) => Operand::Array(d),
            (PyOperand::Column(_, c), _, Some(t)) => Operand::Column(t, c.clone()),
            (PyOperand::Memory(d, s, b), _, _) => Operand::Memory {
                dtype: *d,
                shape: s.clone(),
                data: Cow::Borrowed(b.bytes()),
            },
            (PyOperand::Scalar(l), _, _) => Operand::Scalar(*l),
            _ => {
                return Err(
                    blz::Error::InvalidArgument(format!("operand {name:?} is not held")).into(),
                )
            }
        };
        bound.push((name.as_str(), o));
    }
    Ok(Expression::new(text, bound)?)
}

fn region_of(r: Option<Vec<(u64, u64, u64)>>, e: &Expression<'_>) -> Vec<AxisSel> {
    match r {
        None => e.full(),
        Some(r) => r
            .into_iter()
            .map(|(start, step, count)| AxisSel {
                start,
                step,
                count,
                reversed: false,
                keep: true,
            })
            .collect(),
    }
}

/// The result's dtype (numpy's descr) and shape.
#[pyfunction]
fn expr_meta(py: Python<'_>, text: &str, ops: &Bound<'_, PyAny>) -> PyResult<(String, Vec<u64>)> {
    let ops = operands(ops)?;
    detached(py, || {
        let held = hold(&ops)?;
        let e = build(text, &ops, &held)?;
        Ok((e.dtype().descr(Endianness::native()), e.shape().to_vec()))
    })
}

/// Computes the region (`(start, step, count)` per axis, or all) into `out`, a C-contiguous
/// writable buffer of the region's elements.
#[pyfunction]
#[pyo3(signature = (text, ops, out, region=None))]
fn expr_eval(
    py: Python<'_>,
    text: &str,
    ops: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    region: Option<Vec<(u64, u64, u64)>>,
) -> PyResult<()> {
    let ops = operands(ops)?;
    let buf = Buf::get(out, true)?;
    detached(py, || {
        let held = hold(&ops)?;
        let e = build(text, &ops, &held)?;
        let r = region_of(region, &e);
        Ok(e.eval_into(&r, buf.bytes_mut())?)
    })
}

/// Computes the expression into a new dataset at `path`; returns it, open for writing.
#[pyfunction]
#[pyo3(signature = (text, ops, path, chunks, codec, clevel, filter, overwrite))]
#[expect(
    clippy::too_many_arguments,
    reason = "blz.evaluate's keyword arguments"
)]
fn expr_compute(
    py: Python<'_>,
    text: &str,
    ops: &Bound<'_, PyAny>,
    path: PathBuf,
    chunks: Option<Vec<u64>>,
    codec: &str,
    clevel: u8,
    filter: &str,
    overwrite: bool,
) -> PyResult<RawArray> {
    let ops = operands(ops)?;
    let opts = CreateOptions {
        chunkshape: chunks,
        compression: compression(codec, clevel, filter)?,
        overwrite,
        ..Default::default()
    };
    let ds = detached(py, || {
        let held = hold(&ops)?;
        let e = build(text, &ops, &held)?;
        Ok(e.compute(&path, &opts)?)
    })?;
    Ok(RawArray::wrap(ds, true))
}

/// Reduces the expression: `(descr, shape, bytearray)` of the result.
#[pyfunction]
#[pyo3(signature = (text, ops, op, axes=None, ddof=0.0))]
fn expr_reduce<'py>(
    py: Python<'py>,
    text: &str,
    ops: &Bound<'py, PyAny>,
    op: &str,
    axes: Option<Vec<usize>>,
    ddof: f64,
) -> PyResult<(String, Vec<u64>, Bound<'py, PyByteArray>)> {
    let ops = operands(ops)?;
    let op: Reduce = op
        .parse()
        .map_err(|e: blz::Error| PyValueError::new_err(e.to_string()))?;
    let r = detached(py, || {
        let held = hold(&ops)?;
        let e = build(text, &ops, &held)?;
        Ok(e.reduce(op, axes.as_deref(), ddof)?)
    })?;
    Ok((
        r.dtype.descr(Endianness::native()),
        r.shape,
        PyByteArray::new(py, &r.data),
    ))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(expr_meta, m)?)?;
    m.add_function(wrap_pyfunction!(expr_eval, m)?)?;
    m.add_function(wrap_pyfunction!(expr_compute, m)?)?;
    m.add_function(wrap_pyfunction!(expr_reduce, m)?)?;
    Ok(())
}
