//! Consolidating merges of layer datasets, as DBSP merges its batches.
//!
//! [`merge`] reads k layer datasets with the same columns and weight, each in the order of
//! its whole key paths, and writes one new layer dataset holding every path of any input
//! once. Where several inputs hold the same path, their weights are added; a path whose
//! weight adds up to zero is left out, and so is a row group left with no rows (a key whose
//! every path dropped out). Without a weight column the result is the union of the paths.
//!
//! One streaming pass: each input is walked by one cursor per column, which holds one
//! decoded data chunk (and one weight chunk), so memory is k times a few chunks, whatever
//! the sizes. The output is built by [`LayerWriter`] beside its path and appears whole, by
//! one rename, when the merge ends; an error or a kill leaves the path as it was.

use super::reader::{Cursor, Layer};
use super::value::Value;
use super::{ColumnDef, FilterSetting, LayerSchema, LayerSizes, LayerStorage, LayerWriter};
use crate::error::{Error, Result};
use std::cmp::Ordering;
use std::path::Path;

/// The whole key paths of one layer dataset, in order, with their weights.
struct Paths<'a> {
    layer: &'a Layer,
    /// One cursor per column, each on the row of the current path.
    cursors: Vec<Cursor<'a>>,
    /// The current path's values, one per column.
    path: Vec<Value>,
    /// The current path's weight (when the dataset has weights).
    weight: Option<Value>,
    done: bool,
}

impl<'a> Paths<'a> {
    /// The paths of `layer`, on the first (or done, when it has none).
    fn new(layer: &'a Layer) -> Result<Paths<'a>> {
        let mut p = Paths {
            layer,
            cursors: Vec::with_capacity(layer.ncolumns()),
            path: Vec::with_capacity(layer.ncolumns()),
            weight: None,
            done: false,
        };
        let mut c0 = layer.cursor();
        if c0.first() {
            p.path.push(value_of(&mut c0, layer)?);
            p.cursors.push(c0);
            p.descend()?;
        } else {
            p.done = true;
        }
        Ok(p)
    }

    /// From the row of the last cursor, down to the last column along first rows.
    fn descend(&mut self) -> Result<()> {
        while self.cursors.len() < self.layer.ncolumns() {
            let Some(mut child) = self
                .cursors
                .last()
                .map(Cursor::child)
                .transpose()?
                .flatten()
            else {
                break;
            };
            if !child.first() {
                return Err(damaged(
                    self.layer,
                    format!(
                        "a row of column {} owns no rows in column {}",
                        self.cursors.len(),
                        self.cursors.len() + 1
                    ),
                ));
            }
            self.path.push(value_of(&mut child, self.layer)?);
            self.cursors.push(child);
        }
        self.weight = match self.cursors.last_mut() {
            Some(last) if self.layer.storage_meta().weight.is_some() => last.weight()?,
            _ => None,
        };
        Ok(())
    }

    /// Moves to the next path (or done).
    fn advance(&mut self) -> Result<()> {
        while let Some(top) = self.cursors.last_mut() {
            if top.next() {
                let v = value_of(top, self.layer)?;
                self.path.pop();
                self.path.push(v);
                return self.descend();
            }
            self.cursors.pop();
            self.path.pop();
        }
        self.done = true;
        Ok(())
    }
}

fn value_of(c: &mut Cursor<'_>, layer: &Layer) -> Result<Value> {
    c.value()?
        .ok_or_else(|| damaged(layer, "a cursor on a row read no value".into()))
}

fn damaged(layer: &Layer, reason: String) -> Error {
    Error::metadata(layer.path().join("meta/sizes"), reason)
}

/// The schema `layer` was built with, to build another like it: its columns, their
/// chunking, fan-out, compression, digests and filters (a filter as its kind and bits per
/// value),
/// its weight and its superchunk size.
///
/// # Errors
/// [`Error::InvalidMetadata`] for a column type blz does not know.
pub fn schema_of(layer: &Layer) -> Result<LayerSchema> {
    let meta = layer.storage_meta();
    let columns = meta
        .columns
        .iter()
        .map(|c| {
            let kind = super::ValueType::parse(&c.dtype)
                .map_err(|e| Error::metadata(layer.path().join("meta/storage"), e.to_string()))?;
            let mut d = ColumnDef::new(&c.name, kind).with_chunklen(c.chunklen);
            d.fanout = c.fanout;
            d.compression = c.compression.clone();
            d.checksum = c.checksum;
            d.filter = match &c.filter {
                Some(f) => {
                    d.filter_kind = f.kind;
                    FilterSetting::BitsPerValue(f.bits_per_value)
                }
                None => FilterSetting::Off,
            };
            Ok(d)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut schema = LayerSchema::new(columns);
    if let Some(w) = &meta.weight {
        schema = schema.with_weight(&w.name, w.dtype);
    }
    schema.superchunksize = meta
        .columns
        .first()
        .map_or(schema.superchunksize, |c| c.superchunksize);
    schema.shape = meta.shape;
    Ok(schema)
}

/// Whether two layers can be merged: the same columns (names and value types, in order)
/// and the same weight (name and type, or none).
fn check_same(first: &Layer, other: &Layer) -> Result<()> {
    /// Column names and types, then the weight's (`-` for none).
    fn shape(m: &LayerStorage) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = m
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.dtype.clone()))
            .collect();
        v.push(m.weight.as_ref().map_or(("-".into(), "-".into()), |w| {
            (w.name.clone(), w.dtype.name())
        }));
        v
    }
    let (a, b) = (shape(first.storage_meta()), shape(other.storage_meta()));
    if a != b {
        return Err(Error::InvalidArgument(format!(
            "{} and {} cannot be merged: columns and weight {:?} and {:?} differ",
            first.path().display(),
            other.path().display(),
            a,
            b
        )));
    }
    Ok(())
}

/// The sum of two weights of one column type, `None` when it overflows.
pub(crate) fn add(a: &Value, b: &Value) -> Option<Value> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.checked_add(*y).map(Value::Int),
        (Value::UInt(x), Value::UInt(y)) => x.checked_add(*y).map(Value::UInt),
        (Value::Float(x), Value::Float(y)) => Some(Value::Float(x + y)),
        _ => None,
    }
}

pub(crate) fn is_zero(w: &Value) -> bool {
    match w {
        Value::Int(x) => *x == 0,
        Value::UInt(x) => *x == 0,
        Value::Float(x) => *x == 0.0,
        Value::Str(_) | Value::Bytes(_) | Value::Tuple(_) => false,
    }
}

/// What a merge read and wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeReport {
    /// Whole key paths read from all the inputs together.
    pub paths_read: u64,
    /// Paths written (after adding up equal paths and leaving out zero weights).
    pub paths_written: u64,
    /// Paths left out because their weights added up to zero.
    pub paths_cancelled: u64,
    /// The output's counts, as in its `meta/sizes`.
    pub sizes: LayerSizes,
}

/// Merges the layer datasets `inputs` (at least one; the same columns and weight) into a
/// new layer dataset at `output`, with `schema`'s settings: equal paths add their weights,
/// paths whose weights add up to zero are left out (see the module's documentation).
/// `schema` must have the inputs' columns and weight; [`schema_of`] gives the first
/// input's (set its `overwrite` to replace a dataset at `output`).
///
/// # Errors
/// [`Error::InvalidArgument`] for no inputs, inputs or a schema that differ, or weights
/// whose sum overflows or does not fit the weight's type; an input that is not sorted as a
/// layer is (a damaged dataset) is [`Error::InvalidMetadata`]; read and write errors. On
/// any error nothing is left at `output` but what was there.
pub fn merge(
    inputs: &[&Layer],
    output: impl AsRef<Path>,
    schema: LayerSchema,
) -> Result<MergeReport> {
    let Some(first) = inputs.first() else {
        return Err(Error::InvalidArgument(
            "a merge needs at least one input".into(),
        ));
    };
    for other in &inputs[1..] {
        check_same(first, other)?;
    }
    let out_meta = schema.to_storage()?;
    let same_as_out = LayerStorage {
        id: None,
        ..out_meta.clone()
    };
    {
        // The schema must describe the inputs' paths: the same columns and weight.
        let m = first.storage_meta();
        let cols_ok = m.columns.len() == same_as_out.columns.len()
            && m.columns
                .iter()
                .zip(&same_as_out.columns)
                .all(|(a, b)| a.name == b.name && a.dtype == b.dtype);
        let weight_ok = m.weight.as_ref().map(|w| (&w.name, w.dtype))
            == same_as_out.weight.as_ref().map(|w| (&w.name, w.dtype));
        if !cols_ok || !weight_ok {
            return Err(Error::InvalidArgument(format!(
                "the output's schema has other columns or another weight than {}",
                first.path().display()
            )));
        }
    }
    let mut writer = LayerWriter::create(output.as_ref(), schema)?;
    let counts = merge_into(inputs, &mut writer)?;
    let sizes = writer.finish()?;
    Ok(MergeReport {
        paths_read: counts.read,
        paths_written: counts.written,
        paths_cancelled: counts.cancelled,
        sizes,
    })
}

/// Paths a merge read, wrote and left out (their weights added up to zero).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MergeCounts {
    pub(crate) read: u64,
    pub(crate) written: u64,
    pub(crate) cancelled: u64,
}

/// Paths an input is walked before its layer's decoded index and row-group chunks are let
/// go: a walk visits each once, so keeping them only grows the memory of a long merge.
const CLEAR_CACHE_EVERY: u64 = 1 << 16;

/// The merge proper: pushes the consolidated paths of `inputs` (checked to be like the
/// writer's schema by the caller) into `writer`, which the caller finishes.
pub(crate) fn merge_into(inputs: &[&Layer], writer: &mut LayerWriter) -> Result<MergeCounts> {
    let weighted = writer.storage_meta().weight.is_some();
    let mut walks = inputs
        .iter()
        .map(|l| Paths::new(l))
        .collect::<Result<Vec<_>>>()?;
    let mut advanced = vec![0u64; walks.len()];
    let (mut paths_read, mut paths_written, mut paths_cancelled) = (0u64, 0u64, 0u64);
    // The smallest current path among the inputs, each round; k is small (a handful of
    // batches), so a scan of the k heads costs less than keeping a heap.
    let mut least: Vec<usize> = Vec::with_capacity(walks.len());
    loop {
        least.clear();
        for (i, w) in walks.iter().enumerate() {
            if w.done {
                continue;
            }
            match least.first().map(|&j| w.path.cmp(&walks[j].path)) {
                None | Some(Ordering::Equal) => least.push(i),
                Some(Ordering::Less) => {
                    least.clear();
                    least.push(i);
                }
                Some(Ordering::Greater) => {}
            }
        }
        let Some(&head) = least.first() else {
            break;
        };
        paths_read += least.len() as u64;
        let mut weight = walks[head].weight.clone();
        for &i in &least[1..] {
            if let (Some(a), Some(b)) = (&weight, &walks[i].weight) {
                weight = Some(add(a, b).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "the weights of path {:?} overflow their type",
                        walks[head].path
                    ))
                })?);
            }
        }
        if weighted && weight.as_ref().is_some_and(is_zero) {
            paths_cancelled += 1;
        } else {
            writer.push(&walks[head].path, weight)?;
            paths_written += 1;
        }
        // An input out of order (damaged) shows as a path the writer refuses: not after
        // the one it wrote last.
        for &i in &least {
            walks[i].advance()?;
            advanced[i] += 1;
            if advanced[i].is_multiple_of(CLEAR_CACHE_EVERY) {
                walks[i].layer.clear_cache();
            }
        }
    }
    Ok(MergeCounts {
        read: paths_read,
        written: paths_written,
        cancelled: paths_cancelled,
    })
}

impl Layer {
    /// Merges the layer datasets at `inputs` into a new one at `output` with the first
    /// input's settings ([`schema_of`]): [`merge`]. `overwrite` replaces a dataset at
    /// `output` (atomically, when the merge ends).
    ///
    /// # Errors
    /// As [`Layer::open`] for each input, and as [`merge`].
    pub fn merge(
        inputs: &[impl AsRef<Path>],
        output: impl AsRef<Path>,
        overwrite: bool,
    ) -> Result<MergeReport> {
        let layers = inputs.iter().map(Layer::open).collect::<Result<Vec<_>>>()?;
        let Some(first) = layers.first() else {
            return Err(Error::InvalidArgument(
                "a merge needs at least one input".into(),
            ));
        };
        let mut schema = schema_of(first)?;
        schema.overwrite = overwrite;
        let refs: Vec<&Layer> = layers.iter().collect();
        merge(&refs, output, schema)
    }
}

/// The whole key paths of a layer, in order, each with its weight (`None` without a weight
/// column): `(k, r)` for a WSet, `(k, v, r)` for an IndexedZSet, `(k, v, t, r)` for a
/// ValBatch. Made by [`Layer::paths`]; memory is one cursor per column. After an error the
/// iterator ends.
pub struct LayerPaths<'a> {
    layer: &'a Layer,
    inner: Option<Paths<'a>>,
    started: bool,
    failed: bool,
}

impl Iterator for LayerPaths<'_> {
    type Item = Result<(Vec<Value>, Option<Value>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let step = if self.started {
            match self.inner.as_mut() {
                Some(p) if !p.done => p.advance(),
                _ => return None,
            }
        } else {
            self.started = true;
            Paths::new(self.layer).map(|p| self.inner = Some(p))
        };
        if let Err(e) = step {
            self.failed = true;
            return Some(Err(e));
        }
        let p = self.inner.as_ref()?;
        (!p.done).then(|| Ok((p.path.clone(), p.weight.clone())))
    }
}

impl Layer {
    /// Every whole key path of the layer, in order, with its weight: see [`LayerPaths`].
    pub fn paths(&self) -> LayerPaths<'_> {
        LayerPaths {
            layer: self,
            inner: None,
            started: false,
            failed: false,
        }
    }
}
