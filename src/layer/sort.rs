//! Building a layer dataset from rows in any order: an external sort with bounded memory.
//!
//! [`SortingLayerWriter`] keeps the rows pushed into it in memory up to a budget
//! ([`SortOptions::memory`], counting the bytes of variable-length values). A full buffer is
//! sorted by whole key path, consolidated (equal paths add their weights, a zero sum drops
//! out; without a weight, equal paths collapse into one) and written as a *sorted run*: a
//! temporary layer dataset. [`finish`](SortingLayerWriter::finish) merges the runs into the
//! output with the consolidating merge of [`super::merge`], at most
//! [`SortOptions::fan_in`] runs at a time (more runs are first merged in passes into larger
//! runs). Rows that fit in one buffer are sorted and written straight to the output, with
//! no run.
//!
//! The runs live in `sort-runs/` inside the output's staging directory
//! (`<path>.tmp-build/sort-runs/run-<n>`), on the output's filesystem: they go with it when
//! the build ends, fails, is dropped, or is killed (the next build of the path removes a
//! killed build's staging directory, which no open accepts). The output appears whole, by
//! the one rename of a normal build.
//!
//! Memory: the buffer (the budget, plus the sort's index of rows), then during the merge one
//! decoded data chunk (and index, row-group and weight chunk) per column per run merged:
//! `fan_in` times a few chunks.

use super::merge::{add, is_zero, merge_into};
use super::reader::Layer;
use super::value::{self, Value, ValueType};
use super::{FilterSetting, LayerSchema, LayerSizes, LayerWriter, LeafKind};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::storage::Storage;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Default memory budget of a sorting build: 256 MiB.
pub const DEFAULT_SORT_MEMORY: u64 = 256 << 20;
/// Default number of runs merged at once.
pub const DEFAULT_FAN_IN: usize = 64;
/// Name of the directory of sorted runs inside a build's staging directory.
pub const SORT_RUNS_DIR: &str = "sort-runs";

/// How a [`SortingLayerWriter`] uses memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortOptions {
    /// Bytes of buffered rows (keys, weights and the bytes of variable-length values) at
    /// which the buffer is sorted and written out as a run.
    pub memory: u64,
    /// Runs merged at once (at least 2); more runs are merged in passes.
    pub fan_in: usize,
}

impl Default for SortOptions {
    fn default() -> SortOptions {
        SortOptions {
            memory: DEFAULT_SORT_MEMORY,
            fan_in: DEFAULT_FAN_IN,
        }
    }
}

impl SortOptions {
    /// The default options with a memory budget of `bytes`.
    pub fn with_memory(bytes: u64) -> SortOptions {
        SortOptions {
            memory: bytes,
            ..SortOptions::default()
        }
    }
}

/// What a sorting build read and wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortReport {
    /// Rows pushed.
    pub rows_pushed: u64,
    /// Sorted runs written (0 when the rows fit in memory).
    pub runs: u64,
    /// Merge passes over the runs before the last one into the output.
    pub merge_passes: u64,
    /// Whole key paths written to the output.
    pub paths_written: u64,
    /// The output's counts, as in its `meta/sizes`.
    pub sizes: LayerSizes,
}

/// One buffered row: a whole key path and its weight.
struct Row {
    keys: Vec<Value>,
    weight: Option<Value>,
}

/// The bytes a buffered row takes, near enough: the row, its values, and the bytes of its
/// variable-length values.
fn row_cost(keys: &[Value]) -> u64 {
    let heap: usize = keys
        .iter()
        .map(|k| match k {
            Value::Str(_) | Value::Bytes(_) | Value::Tuple(_) => heap_bytes(k),
            _ => 0,
        })
        .sum();
    (std::mem::size_of::<Row>() + std::mem::size_of_val(keys) + heap) as u64
}

/// The heap bytes a value holds (its own, and its fields').
fn heap_bytes(v: &Value) -> usize {
    match v {
        Value::Str(s) => s.len(),
        Value::Bytes(b) => b.len(),
        Value::Tuple(f) => {
            std::mem::size_of_val(f.as_slice()) + f.iter().map(heap_bytes).sum::<usize>()
        }
        _ => 0,
    }
}

/// Builds a layer dataset from rows pushed in any order, by an external sort (see the
/// module's documentation). Made by [`LayerWriter::create_unsorted`].
pub struct SortingLayerWriter {
    /// The output's build (holding its staging directory, where the runs live).
    out: Option<LayerWriter>,
    /// The storage the output is built through.
    storage: Arc<dyn Storage>,
    /// `<staging>/sort-runs`.
    runs_dir: PathBuf,
    /// The output's schema with the filters off (runs are only walked, never searched).
    run_schema: LayerSchema,
    kinds: Vec<ValueType>,
    weight: Option<DType>,
    opts: SortOptions,
    buf: Vec<Row>,
    buf_bytes: u64,
    /// Runs written and not yet merged, oldest first.
    runs: Vec<PathBuf>,
    runs_made: u64,
    merge_passes: u64,
    rows_pushed: u64,
    failed: bool,
}

impl LayerWriter {
    /// Starts building a layer dataset at `path` (on the local filesystem) from rows in any
    /// order: see [`SortingLayerWriter`].
    ///
    /// # Errors
    /// As [`LayerWriter::create`]; [`Error::InvalidArgument`] for a fan-in below 2 or a
    /// memory budget of 0.
    pub fn create_unsorted(
        path: impl AsRef<Path>,
        schema: LayerSchema,
        opts: SortOptions,
    ) -> Result<SortingLayerWriter> {
        let (s, root) = crate::storage::for_path(path.as_ref())?;
        SortingLayerWriter::create_in(s, &root, schema, opts)
    }
}

impl SortingLayerWriter {
    /// Starts building a layer dataset at `path` in `storage` from rows in any order.
    ///
    /// # Errors
    /// As [`LayerWriter::create_in`]; [`Error::InvalidArgument`] for a fan-in below 2 or a
    /// memory budget of 0.
    pub fn create_in(
        storage: Arc<dyn Storage>,
        path: &Path,
        schema: LayerSchema,
        opts: SortOptions,
    ) -> Result<SortingLayerWriter> {
        if opts.fan_in < 2 {
            return Err(Error::InvalidArgument(
                "a sorting build merges at least 2 runs at once".into(),
            ));
        }
        if opts.memory == 0 {
            return Err(Error::InvalidArgument(
                "a sorting build needs a memory budget above 0 bytes".into(),
            ));
        }
        let mut run_schema = schema.clone();
        run_schema.overwrite = false;
        for c in &mut run_schema.columns {
            c.filter = FilterSetting::Off;
        }
        let kinds = schema.columns.iter().map(|c| c.kind.clone()).collect();
        let weight = schema.weight.as_ref().map(|w| w.1);
        let out = LayerWriter::create_in(storage, path, schema)?;
        let (dir, build) = out.build_dir();
        let runs_dir = dir.join(SORT_RUNS_DIR);
        let storage = Arc::clone(build);
        Ok(SortingLayerWriter {
            out: Some(out),
            storage,
            runs_dir,
            run_schema,
            kinds,
            weight,
            opts,
            buf: Vec::new(),
            buf_bytes: 0,
            runs: Vec::new(),
            runs_made: 0,
            merge_passes: 0,
            rows_pushed: 0,
            failed: false,
        })
    }

    /// Rows pushed so far.
    pub fn rows_pushed(&self) -> u64 {
        self.rows_pushed
    }

    /// Sorted runs written so far.
    pub fn runs(&self) -> u64 {
        self.runs_made
    }

    /// Adds one path of keys (one per column) and its weight, in any order. A path pushed
    /// again adds its weight to the earlier ones (without a weight, it is kept once); a
    /// path whose weights add up to zero is left out of the dataset.
    ///
    /// On any error the build is abandoned and everything it wrote removed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a wrong number of keys, a key or weight that does not
    /// fit its column, a missing or unexpected weight; when the buffer is written out, as
    /// [`finish`](Self::finish).
    pub fn push(&mut self, keys: &[Value], weight: Option<Value>) -> Result<()> {
        if self.failed || self.out.is_none() {
            return Err(Error::InvalidArgument(
                "the layer build was already abandoned or finished".into(),
            ));
        }
        let r = self.push_inner(keys, weight);
        if r.is_err() {
            self.abandon();
        }
        r
    }

    fn push_inner(&mut self, keys: &[Value], weight: Option<Value>) -> Result<()> {
        if keys.len() != self.kinds.len() {
            return Err(Error::InvalidArgument(format!(
                "{} keys given for {} columns",
                keys.len(),
                self.kinds.len()
            )));
        }
        let keys: Vec<Value> = keys
            .iter()
            .zip(&self.kinds)
            .map(|(k, kind)| value::coerce(kind, k))
            .collect::<Result<_>>()?;
        let weight = match (self.weight, weight) {
            (Some(d), Some(v)) => Some(value::coerce_leaf(LeafKind::Fixed(d), &v)?),
            (None, None) => None,
            (Some(_), None) => {
                return Err(Error::InvalidArgument(
                    "the dataset has a weight; give one with every row".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(Error::InvalidArgument(
                    "the dataset has no weight column".into(),
                ))
            }
        };
        self.buf_bytes += row_cost(&keys);
        self.buf.push(Row { keys, weight });
        self.rows_pushed += 1;
        if self.buf_bytes >= self.opts.memory {
            self.spill()?;
        }
        Ok(())
    }

    /// Sorts the buffer and writes it out as a new run.
    fn spill(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let mut w = self.new_run()?;
        write_sorted(&mut self.buf, &mut w)?;
        self.buf = Vec::new();
        self.buf_bytes = 0;
        w.finish()?;
        Ok(())
    }

    /// The writer of the next run (its path recorded in `runs`).
    fn new_run(&mut self) -> Result<LayerWriter> {
        if self.runs_made == 0 {
            self.storage.create_dir_all(&self.runs_dir)?;
        }
        let path = self.runs_dir.join(format!("run-{}", self.runs_made));
        self.runs_made += 1;
        let w = LayerWriter::create_in(Arc::clone(&self.storage), &path, self.run_schema.clone())?;
        self.runs.push(path);
        Ok(w)
    }

    /// Merges the runs at `paths` into `w`, then removes them.
    fn merge_runs(&self, paths: &[PathBuf], w: &mut LayerWriter) -> Result<u64> {
        let layers = paths
            .iter()
            .map(|p| Layer::open_in(Arc::clone(&self.storage), p))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Layer> = layers.iter().collect();
        let counts = merge_into(&refs, w)?;
        drop(layers);
        for p in paths {
            self.storage.remove_dir_all(p)?;
        }
        Ok(counts.written)
    }

    /// Completes the dataset: merges the runs (or sorts the rows that fit in memory) into
    /// it, removes the runs, and puts it in place as [`LayerWriter::finish`] does.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the weights of a path overflow their type; I/O
    /// errors. On any error everything the build wrote is removed.
    pub fn finish(mut self) -> Result<SortReport> {
        if self.failed || self.out.is_none() {
            return Err(Error::InvalidArgument(
                "the layer build was already abandoned or finished".into(),
            ));
        }
        let r = self.finish_inner();
        if r.is_err() {
            self.abandon();
        }
        r
    }

    fn finish_inner(&mut self) -> Result<SortReport> {
        let mut out = self
            .out
            .take()
            .ok_or_else(|| Error::InvalidArgument("the layer build was already finished".into()))?;
        let paths_written = if self.runs.is_empty() {
            let n = write_sorted(&mut self.buf, &mut out)?;
            self.buf = Vec::new();
            n
        } else {
            self.spill()?;
            while self.runs.len() > self.opts.fan_in {
                // One pass: every group of `fan_in` runs becomes one run.
                let old = std::mem::take(&mut self.runs);
                for group in old.chunks(self.opts.fan_in) {
                    if let [one] = group {
                        self.runs.push(one.clone());
                        continue;
                    }
                    let mut w = self.new_run()?;
                    self.merge_runs(group, &mut w)?;
                    w.finish()?;
                }
                self.merge_passes += 1;
            }
            let runs = std::mem::take(&mut self.runs);
            self.merge_runs(&runs, &mut out)?
        };
        if self.runs_made > 0 {
            self.storage.remove_dir_all(&self.runs_dir)?;
        }
        let sizes = out.finish()?;
        Ok(SortReport {
            rows_pushed: self.rows_pushed,
            runs: self.runs_made,
            merge_passes: self.merge_passes,
            paths_written,
            sizes,
        })
    }

    /// Abandons the build: removes the staging directory with its runs. Dropping an
    /// unfinished writer does the same.
    pub fn abandon(&mut self) {
        self.failed = true;
        self.buf = Vec::new();
        // The output's staging directory, runs and all, goes with its writer.
        self.out = None;
    }
}

/// Sorts `rows` by whole key path and pushes them, consolidated, into `w`; empties `rows`.
/// Returns the paths written.
fn write_sorted(rows: &mut Vec<Row>, w: &mut LayerWriter) -> Result<u64> {
    rows.sort_unstable_by(|a, b| a.keys.cmp(&b.keys));
    let weighted = w.storage_meta().weight.is_some();
    let mut written = 0u64;
    let mut emit = |r: Row, w: &mut LayerWriter| -> Result<()> {
        if !(weighted && r.weight.as_ref().is_some_and(is_zero)) {
            w.push(&r.keys, r.weight)?;
            written += 1;
        }
        Ok(())
    };
    let mut it = rows.drain(..);
    let Some(mut cur) = it.next() else {
        return Ok(0);
    };
    for r in it {
        if r.keys == cur.keys {
            if let (Some(a), Some(b)) = (&cur.weight, &r.weight) {
                cur.weight = Some(add(a, b).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "the weights of path {:?} overflow their type",
                        cur.keys
                    ))
                })?);
            }
        } else {
            emit(std::mem::replace(&mut cur, r), w)?;
        }
    }
    emit(cur, w)?;
    Ok(written)
}
