//! `RawLayer`: a sorted layer dataset (read-only), its cursors, and layer builds.

use crate::convert::parse_dtype;
use crate::errors::{detached, errors_list, lock_err, FResult, Fail, Problem};
use crate::handle::Handle;
use blz::layer::{
    ColumnDef, Cursor, Layer, LayerSchema, LayerWriter, SortOptions, SortingLayerWriter, Value,
    ValueType,
};
use blz::table::LeafKind;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub(crate) fn value_from_py(v: &Bound<'_, PyAny>) -> PyResult<Value> {
    if let Ok(t) = v.cast::<pyo3::types::PyTuple>() {
        return Ok(Value::Tuple(
            t.iter()
                .map(|x| value_from_py(&x))
                .collect::<PyResult<_>>()?,
        ));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(Value::Str(s.to_str()?.to_string()));
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    if v.is_instance_of::<pyo3::types::PyFloat>() {
        return Ok(Value::Float(v.extract()?));
    }
    if let Ok(i) = v.extract::<i64>() {
        return Ok(Value::Int(i));
    }
    if let Ok(u) = v.extract::<u64>() {
        return Ok(Value::UInt(u));
    }
    if let Ok(f) = v.extract::<f64>() {
        return Ok(Value::Float(f));
    }
    Err(PyValueError::new_err(format!(
        "a layer value is an int, float, str, bytes or a tuple of these, not {}",
        v.get_type().name()?
    )))
}

pub(crate) fn value_to_py<'py>(py: Python<'py>, v: Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::UInt(u) => u.into_pyobject(py)?.into_any(),
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        Value::Str(s) => PyString::new(py, &s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, &b).into_any(),
        Value::Tuple(f) => pyo3::types::PyTuple::new(
            py,
            f.into_iter()
                .map(|x| value_to_py(py, x))
                .collect::<PyResult<Vec<_>>>()?,
        )?
        .into_any(),
    })
}

/// A layer build: from sorted records, or from records in any order.
enum LayerBuild {
    Sorted(Box<LayerWriter>),
    Sorting(Box<SortingLayerWriter>),
}

impl LayerBuild {
    fn push(&mut self, keys: &[Value], weight: Option<Value>) -> blz::Result<()> {
        match self {
            LayerBuild::Sorted(w) => w.push(keys, weight),
            LayerBuild::Sorting(w) => w.push(keys, weight),
        }
    }
}

/// An open layer dataset. Cursors are kept in Python as `(column, parent row, position)` and
/// rebuilt here for each step (a cursor costs nothing to make; data chunks are cached by the
/// layer).
#[pyclass(module = "blz._blz", frozen)]
pub(crate) struct RawLayer {
    h: Handle<Arc<Layer>>,
}

/// The cursor over a row group of `layer`: column 0's single group, or the group of column
/// `col` owned by row `parent` of column `col - 1`.
fn cursor(layer: &Layer, col: usize, parent: Option<u64>) -> FResult<Cursor<'_>> {
    Ok(match parent {
        None if col == 0 => layer.cursor(),
        Some(p) => layer.group(col, p)?,
        None => {
            return Err(Fail::Blz(blz::Error::InvalidArgument(format!(
                "column {col} has one row group per row of column {}",
                col.saturating_sub(1)
            ))))
        }
    })
}

impl RawLayer {
    pub(crate) fn wrap(layer: Layer) -> RawLayer {
        let path = layer.path().to_path_buf();
        RawLayer {
            h: Handle::new(Arc::new(layer), &path, false),
        }
    }

    /// The layer as this process has it (opened again in a forked child).
    fn layer(&self) -> FResult<Arc<Layer>> {
        self.h.read(|l| Ok(Arc::clone(l)))
    }

    /// [`Self::layer`] from a call that holds the GIL (opening may read and decode).
    fn here_py(&self, py: Python<'_>) -> PyResult<Arc<Layer>> {
        detached(py, || self.layer())
    }
}

#[pymethods]
impl RawLayer {
    /// Merges the layer datasets at `inputs` into a new one at `output` (the first input's
    /// settings): equal key paths add their weights, zero sums are left out. Returns
    /// `(paths read, paths written, paths cancelled)`.
    #[staticmethod]
    #[pyo3(signature = (inputs, output, overwrite))]
    fn merge(
        py: Python<'_>,
        inputs: Vec<PathBuf>,
        output: PathBuf,
        overwrite: bool,
    ) -> PyResult<(u64, u64, u64)> {
        detached(py, || {
            let r = Layer::merge(&inputs, &output, overwrite)?;
            Ok((r.paths_read, r.paths_written, r.paths_cancelled))
        })
    }

    /// Builds a layer dataset from records: each a tuple of one key per column, plus the
    /// weight last when the schema has one. `columns`: `(name, kind)` with kind a dtype
    /// name, `varstr`, `varbytes` or a tuple type such as `(int64,varstr)`; `weight`: `(name, dtype)`; `filter`: `auto`, `bloom`,
    /// `exact` or `off` for every column. Without `sort_memory` the records must be sorted
    /// by whole key path; with it they may come in any order and are sorted with that many
    /// bytes of buffer (repeated paths add their weights).
    #[staticmethod]
    #[pyo3(signature = (path, columns, weight, records, overwrite, filter="auto", sort_memory=None, shape=None))]
    #[expect(clippy::too_many_arguments, reason = "build_layer's keyword arguments")]
    fn build(
        py: Python<'_>,
        path: PathBuf,
        columns: Vec<(String, String)>,
        weight: Option<(String, String)>,
        records: &Bound<'_, PyAny>,
        overwrite: bool,
        filter: &str,
        sort_memory: Option<u64>,
        shape: Option<&str>,
    ) -> PyResult<u64> {
        let shape = shape
            .map(blz::layer::Shape::parse)
            .transpose()
            .map_err(|e| Fail::from(e).into_py(py))?;
        let filter_kind = match filter {
            "off" => None,
            f => Some(blz::layer::FilterKind::parse(f).map_err(|e| Fail::from(e).into_py(py))?),
        };
        let mut defs = Vec::new();
        for (name, kind) in &columns {
            let k: ValueType = match kind.as_str() {
                "varstr" | "str" => LeafKind::VarStr.into(),
                "varbytes" | "bytes" => LeafKind::VarBytes.into(),
                t if t.trim_start().starts_with('(') => {
                    ValueType::parse(t).map_err(|e| Fail::from(e).into_py(py))?
                }
                d => LeafKind::Fixed(parse_dtype(d)?.0).into(),
            };
            let mut def = ColumnDef::new(name, k);
            match filter_kind {
                Some(fk) => def.filter_kind = fk,
                None => def.filter = blz::layer::FilterSetting::Off,
            }
            defs.push(def);
        }
        let mut schema = LayerSchema::new(defs);
        if let Some((name, d)) = &weight {
            schema = schema.with_weight(name, parse_dtype(d)?.0);
        }
        schema.overwrite = overwrite;
        schema.shape = shape;
        let n = columns.len();
        let has_weight = weight.is_some();
        let writer = detached(py, || {
            Ok(match sort_memory {
                None => LayerBuild::Sorted(Box::new(LayerWriter::create(&path, schema)?)),
                Some(m) => LayerBuild::Sorting(Box::new(LayerWriter::create_unsorted(
                    &path,
                    schema,
                    SortOptions::with_memory(m),
                )?)),
            })
        })?;
        let writer = Mutex::new(Some(writer));
        let mut batch: Vec<(Vec<Value>, Option<Value>)> = Vec::new();
        let mut count = 0u64;
        let push = |py: Python<'_>, batch: &mut Vec<(Vec<Value>, Option<Value>)>| -> PyResult<()> {
            let items = std::mem::take(batch);
            detached(py, || {
                let mut g = writer.lock().map_err(|_| lock_err("layer writer"))?;
                let w = g
                    .as_mut()
                    .ok_or_else(|| Fail::Panic("writer gone".into()))?;
                for (keys, wt) in items {
                    w.push(&keys, wt)?;
                }
                Ok(())
            })
        };
        for rec in records.try_iter()? {
            let rec = rec?;
            let items: Vec<Bound<'_, PyAny>> = rec.try_iter()?.collect::<PyResult<_>>()?;
            let want = n + usize::from(has_weight);
            if items.len() != want {
                return Err(PyValueError::new_err(format!(
                    "record {count} has {} items, {want} expected ({n} keys{})",
                    items.len(),
                    if has_weight { " and a weight" } else { "" }
                )));
            }
            let keys = items[..n]
                .iter()
                .map(value_from_py)
                .collect::<PyResult<Vec<_>>>()?;
            let wt = if has_weight {
                Some(value_from_py(&items[n])?)
            } else {
                None
            };
            batch.push((keys, wt));
            count += 1;
            if batch.len() >= 8192 {
                push(py, &mut batch)?;
            }
        }
        push(py, &mut batch)?;
        detached(py, || {
            let w = writer
                .lock()
                .map_err(|_| lock_err("layer writer"))?
                .take()
                .ok_or_else(|| Fail::Panic("writer gone".into()))?;
            match w {
                LayerBuild::Sorted(w) => {
                    (*w).finish()?;
                }
                LayerBuild::Sorting(w) => {
                    w.finish()?;
                }
            }
            Ok(())
        })?;
        Ok(count)
    }

    /// The path as given (a `str`: a URL's `//` kept, which `pathlib` would fold).
    #[getter]
    fn path(&self) -> std::ffi::OsString {
        self.h.path().as_os_str().to_owned()
    }

    /// `(name, kind, rows)` per column, outermost first.
    fn columns(&self, py: Python<'_>) -> PyResult<Vec<(String, String, u64)>> {
        let layer = self.here_py(py)?;
        Ok(layer
            .storage_meta()
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.clone(), c.dtype.clone(), layer.rows(i)))
            .collect())
    }

    /// The layer's named shape (`wset`, `indexed_zset`, `val_batch`), if it has one.
    fn shape(&self, py: Python<'_>) -> PyResult<Option<&'static str>> {
        Ok(self.here_py(py)?.shape().map(|s| s.name()))
    }

    /// The weight's `(name, dtype)`, if the layer has one.
    fn weight(&self, py: Python<'_>) -> PyResult<Option<(String, String)>> {
        Ok(self
            .here_py(py)?
            .storage_meta()
            .weight
            .as_ref()
            .map(|w| (w.name.clone(), w.dtype.name())))
    }

    /// `info()` as JSON.
    fn info_json(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.here_py(py)?.info().to_string())
    }

    /// The rows (in the whole column) of a row group.
    fn group_rows(&self, py: Python<'_>, col: usize, parent: Option<u64>) -> PyResult<(u64, u64)> {
        detached(py, || {
            let layer = self.layer()?;
            let c = cursor(&layer, col, parent)?;
            let r = c.rows();
            Ok((r.start, r.end))
        })
    }

    /// Seeks in a row group: the first row `>= value` (`ge`) or the last `<= value`.
    /// Returns the position: 1 + the row's index in the group, or 0 (before the first) or
    /// count + 1 (after the last) when there is none.
    fn seek(
        &self,
        py: Python<'_>,
        col: usize,
        parent: Option<u64>,
        value: &Bound<'_, PyAny>,
        ge: bool,
    ) -> PyResult<u64> {
        let v = value_from_py(value)?;
        detached(py, || {
            let layer = self.layer()?;
            let mut c = cursor(&layer, col, parent)?;
            let found = if ge { c.seek_ge(&v)? } else { c.seek_le(&v)? };
            Ok(match (found, c.index()) {
                (true, Some(i)) => i + 1,
                _ if ge => c.count() + 1,
                _ => 0,
            })
        })
    }

    /// Values (and weights, when `weights` and this is the last column) of positions
    /// `index..index + n` of a row group (fewer at its end).
    fn values<'py>(
        &self,
        py: Python<'py>,
        col: usize,
        parent: Option<u64>,
        index: u64,
        n: u64,
        weights: bool,
    ) -> PyResult<(Bound<'py, PyList>, Option<Bound<'py, PyList>>)> {
        let (vals, ws) = detached(py, || {
            let layer = self.layer()?;
            let mut c = cursor(&layer, col, parent)?;
            let mut vals = Vec::new();
            let mut ws = Vec::new();
            let mut ok = c.nth(index);
            while ok && (vals.len() as u64) < n {
                if let Some(v) = c.value()? {
                    vals.push(v);
                }
                if weights {
                    if let Some(w) = c.weight()? {
                        ws.push(w);
                    }
                }
                ok = c.next();
            }
            Ok((vals, ws))
        })?;
        let lv = PyList::empty(py);
        for v in vals {
            lv.append(value_to_py(py, v)?)?;
        }
        let lw = if weights {
            let l = PyList::empty(py);
            for w in ws {
                l.append(value_to_py(py, w)?)?;
            }
            Some(l)
        } else {
            None
        };
        Ok((lv, lw))
    }

    /// Whether `value` is in a row group (exact).
    fn contains(
        &self,
        py: Python<'_>,
        col: usize,
        parent: Option<u64>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let v = value_from_py(value)?;
        detached(py, || {
            let layer = self.layer()?;
            let found = cursor(&layer, col, parent)?.contains(&v)?;
            Ok(found)
        })
    }

    /// Checks every chunk of every column.
    fn verify(&self, py: Python<'_>) -> PyResult<Vec<Problem>> {
        detached(py, || Ok(errors_list(self.layer()?.verify())))
    }
}
