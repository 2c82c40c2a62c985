//! Reading selections in output order, whole or in bounded batches: what a client needs to
//! print a selection, write it to a file or hand it on without holding it all in memory.
//!
//! [`Dataset::read_bytes`] delivers a resolved selection's elements in storage order
//! (reversed axes un-reversed); a [`SelectionReader`] delivers them as numpy would, reversed
//! axes reversed, C order over the selection's output shape, in batches along the first kept
//! axis. [`TableRows`] does the same for the rows of a table.

use crate::error::{Error, Result};
use crate::selection::{AxisSel, Item, Selection};
use crate::table::{Table, Values};
use crate::Dataset;
use ndarray::{ArrayViewD, Axis, IxDyn, SliceInfoElem};
use std::path::Path;

/// Bytes a streamed read (or import) handles at a time unless told otherwise: 64 MiB.
pub const DEFAULT_BATCH_BYTES: u64 = 64 << 20;

/// A selection of a dataset, resolved, read in output order.
#[derive(Debug)]
pub struct SelectionReader<'a> {
    ds: &'a Dataset,
    sel: Vec<AxisSel>,
    shape: Vec<u64>,
}

/// One batch of a [`SelectionReader`]: output positions `start..start + rows` of the first
/// kept axis (everything of the others), native-endian, in C order.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// The elements.
    pub data: Vec<u8>,
    /// The first output position of the first kept axis.
    pub start: u64,
    /// How many positions of that axis the batch holds (1 when no axis is kept).
    pub rows: u64,
}

/// The edges of a large selection, for a summary: up to `edge` positions at each end of
/// every kept axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Edges {
    /// Native-endian elements in C order over `shape`.
    pub data: Vec<u8>,
    /// Shown extent of each kept axis.
    pub shape: Vec<usize>,
    /// Per kept axis: the shown position before which positions are skipped, if any are.
    pub gaps: Vec<Option<usize>>,
}

impl<'a> SelectionReader<'a> {
    /// Resolves `sel` (numpy-style, see [`Selection`]) against the dataset's shape.
    ///
    /// # Errors
    /// [`Error::OutOfBounds`] for a selection outside the shape.
    pub fn new(ds: &'a Dataset, sel: &[SliceInfoElem]) -> Result<SelectionReader<'a>> {
        let sel = ds.resolve(sel)?;
        let shape = sel.iter().filter(|s| s.keep).map(|s| s.count).collect();
        Ok(SelectionReader { ds, sel, shape })
    }

    /// Parses a selection's text (`"2:8:3, ::-1"`; empty for everything) and resolves it.
    ///
    /// # Errors
    /// As [`Selection::parse`] and [`Selection::resolve`] (a selection with new axes is
    /// [`Error::InvalidArgument`]).
    pub fn parse(ds: &'a Dataset, text: &str) -> Result<SelectionReader<'a>> {
        Self::select(ds, &Selection::parse(text)?)
    }

    /// Resolves a selection against the dataset's shape.
    ///
    /// # Errors
    /// As [`Selection::resolve`]; [`Error::InvalidArgument`] for a selection with new axes.
    pub fn select(ds: &'a Dataset, sel: &Selection) -> Result<SelectionReader<'a>> {
        let r = ds.select(sel)?;
        if !r.new_axes.is_empty() {
            return Err(Error::InvalidArgument(
                "new axes are not supported in an ordered read".into(),
            ));
        }
        let shape = r.shape;
        Ok(SelectionReader {
            ds,
            sel: r.axes,
            shape,
        })
    }

    /// The output shape (single indices drop their axis).
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// Number of elements selected.
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Reads the whole selection.
    ///
    /// # Errors
    /// As [`Dataset::read_bytes`].
    pub fn read_all(&self) -> Result<Vec<u8>> {
        read_ordered(self.ds, &self.sel)
    }

    /// The selection in batches of about `batch_bytes` bytes along the first kept axis (at
    /// least one position of it per batch), in order.
    pub fn batches(&self, batch_bytes: u64) -> impl Iterator<Item = Result<Batch>> + '_ {
        let kept = self.sel.iter().position(|s| s.keep);
        let (n, per) = match kept {
            None => (1, 1),
            Some(a) => {
                let unit: u64 = self
                    .sel
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != a)
                    .map(|(_, s)| s.count)
                    .product::<u64>()
                    * self.ds.dtype().itemsize() as u64;
                (self.sel[a].count, (batch_bytes / unit.max(1)).max(1))
            }
        };
        let mut p = 0;
        std::iter::from_fn(move || {
            if p >= n {
                return None;
            }
            let q = (p + per).min(n);
            let mut sub = self.sel.clone();
            if let Some(a) = kept {
                sub[a] = sub_axis(&self.sel[a], p, q);
            }
            let batch = read_ordered(self.ds, &sub).map(|data| Batch {
                data,
                start: p,
                rows: q - p,
            });
            p = if batch.is_ok() { q } else { n };
            Some(batch)
        })
    }

    /// Reads the edges of the selection: up to `edge` positions at each end of every kept
    /// axis longer than `2 * edge`, all of the others.
    ///
    /// # Errors
    /// As [`Dataset::read_bytes`].
    pub fn edges(&self, edge: u64) -> Result<Edges> {
        let sel = &self.sel;
        let isz = self.ds.dtype().itemsize();
        // Per axis: the segments (output positions p..q, placed at offset o of the shown block).
        let segs: Vec<Vec<(u64, u64, u64)>> = sel
            .iter()
            .map(|s| {
                if s.keep && s.count > 2 * edge {
                    vec![(0, edge, 0), (s.count - edge, s.count, edge)]
                } else {
                    vec![(0, s.count, 0)]
                }
            })
            .collect();
        let shown: Vec<u64> = segs
            .iter()
            .map(|v| v.iter().map(|(p, q, _)| q - p).sum())
            .collect();
        let total: u64 = shown.iter().product();
        let mut out = vec![0u8; total as usize * isz];
        let bst = strides(&shown);
        let mut pick = vec![0usize; sel.len()];
        loop {
            let sub: Vec<AxisSel> = sel
                .iter()
                .zip(&pick)
                .zip(&segs)
                .map(|((s, &i), v)| sub_axis(s, v[i].0, v[i].1))
                .collect();
            let block = read_ordered(self.ds, &sub)?;
            let bshape: Vec<u64> = sub.iter().map(|s| s.count).collect();
            let offs: Vec<u64> = pick.iter().zip(&segs).map(|(&i, v)| v[i].2).collect();
            // Scatter the block into the shown array.
            let n: u64 = bshape.iter().product();
            let mut idx = vec![0u64; bshape.len()];
            for e in 0..n as usize {
                let pos: u64 = idx
                    .iter()
                    .zip(&offs)
                    .zip(&bst)
                    .map(|((&i, &o), &st)| (i + o) * st)
                    .sum();
                let dst = pos as usize * isz;
                out[dst..dst + isz].copy_from_slice(&block[e * isz..(e + 1) * isz]);
                for ax in (0..idx.len()).rev() {
                    idx[ax] += 1;
                    if idx[ax] < bshape[ax] {
                        break;
                    }
                    idx[ax] = 0;
                }
            }
            // Next combination of segments.
            let mut ax = sel.len();
            loop {
                if ax == 0 {
                    let kept: Vec<usize> = sel
                        .iter()
                        .zip(&shown)
                        .filter(|(s, _)| s.keep)
                        .map(|(_, &n)| n as usize)
                        .collect();
                    let gaps = sel
                        .iter()
                        .zip(&segs)
                        .filter(|(s, _)| s.keep)
                        .map(|(_, v)| (v.len() > 1).then_some(edge as usize))
                        .collect();
                    return Ok(Edges {
                        data: out,
                        shape: kept,
                        gaps,
                    });
                }
                ax -= 1;
                pick[ax] += 1;
                if pick[ax] < segs[ax].len() {
                    break;
                }
                pick[ax] = 0;
            }
        }
    }
}

/// The sub-selection of output positions `p..q` of one axis.
fn sub_axis(s: &AxisSel, p: u64, q: u64) -> AxisSel {
    let start = if s.reversed {
        s.start + (s.count - q) * s.step
    } else {
        s.start + p * s.step
    };
    AxisSel {
        start,
        step: s.step,
        count: q - p,
        reversed: s.reversed,
        keep: s.keep,
    }
}

/// Strides (in elements) of a C-order array of `shape`.
fn strides(shape: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Reads a resolved selection as native-endian bytes in output order (C order over the
/// counts, reversed axes reversed).
fn read_ordered(ds: &Dataset, sel: &[AxisSel]) -> Result<Vec<u8>> {
    let bytes = ds.read_bytes(sel)?;
    if !sel.iter().any(|s| s.reversed && s.count > 1) {
        return Ok(bytes);
    }
    let mut shape: Vec<usize> = sel.iter().map(|s| s.count as usize).collect();
    shape.push(ds.dtype().itemsize());
    let mut v = ArrayViewD::from_shape(IxDyn(&shape), &bytes).map_err(|e| Error::Mismatch {
        dataset: ds.path().to_path_buf(),
        reason: format!("selection read of an unexpected size: {e}"),
    })?;
    for (ax, s) in sel.iter().enumerate() {
        if s.reversed {
            v.invert_axis(Axis(ax));
        }
    }
    Ok(v.iter().copied().collect())
}

/// Which rows of a table a read takes, in output order: a range, or a list of rows (a
/// stepped or reversed selection, or rows picked one by one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableRows {
    /// Rows `start..end`.
    Range(u64, u64),
    /// These rows, in this order.
    Indices(Vec<u64>),
}

impl TableRows {
    /// The rows a numpy-style selection of one axis picks from a table of `nrows` rows
    /// (`"10:20"`, `"::-1"`, `"-1"`; empty for every row).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a malformed selection, one of more than one axis, or a
    /// single row outside the table.
    pub fn parse(text: &str, nrows: u64) -> Result<TableRows> {
        let sel = Selection::parse(text)?;
        if sel.items().contains(&Item::NewAxis) {
            return Err(Error::InvalidArgument(
                "a table selection takes rows only".into(),
            ));
        }
        let r = sel
            .resolve(&[nrows], Path::new("table"))
            .map_err(|e| match e {
                Error::OutOfBounds { reason, .. } | Error::InvalidArgument(reason) => {
                    Error::InvalidArgument(
                        reason.replace("the dataset has 1 axes", "a table has 1 axis"),
                    )
                }
                e => e,
            })?;
        Ok(match r.axes.first() {
            None => TableRows::Range(0, nrows),
            Some(s) if s.step == 1 && !s.reversed => TableRows::Range(s.start, s.start + s.count),
            Some(s) => {
                let rows = (0..s.count).map(|k| s.start + k * s.step);
                TableRows::Indices(if s.reversed {
                    rows.rev().collect()
                } else {
                    rows.collect()
                })
            }
        })
    }

    /// The rows `rows` of a table of `nrows` rows, negative ones counting from the end.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a row outside the table.
    pub fn pick(rows: &[i128], nrows: u64) -> Result<TableRows> {
        let n = i128::from(nrows);
        rows.iter()
            .map(|&i| {
                let j = if i < 0 { i + n } else { i };
                if j < 0 || j >= n {
                    Err(Error::InvalidArgument(format!(
                        "row {i} outside the table's {nrows} rows"
                    )))
                } else {
                    Ok(j as u64)
                }
            })
            .collect::<Result<Vec<u64>>>()
            .map(TableRows::Indices)
    }

    /// Number of rows.
    pub fn len(&self) -> u64 {
        match self {
            TableRows::Range(a, b) => b - a,
            TableRows::Indices(v) => v.len() as u64,
        }
    }

    /// True when no row is taken.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads output positions `p..q` of the columns `names`, in their order.
    ///
    /// # Errors
    /// As [`Table::rows`] and [`Table::take`]; [`Error::InvalidArgument`] when `p..q` is
    /// not within the selection.
    pub fn read(&self, t: &Table, names: &[&str], p: u64, q: u64) -> Result<Vec<Values>> {
        if p > q || q > self.len() {
            return Err(Error::InvalidArgument(format!(
                "rows {p}..{q} of a selection of {}",
                self.len()
            )));
        }
        let cols = match self {
            TableRows::Range(a, _) => t.rows(a + p, a + q, Some(names))?,
            TableRows::Indices(v) => t.take(&v[p as usize..q as usize], Some(names))?,
        };
        Ok(cols.into_iter().map(|(_, v)| v).collect())
    }

    /// The validity of output positions `p..q` of column `name` (true where a row holds a
    /// value); `None` for a column that is not nullable.
    ///
    /// # Errors
    /// As [`TableRows::read`].
    pub fn validity(&self, t: &Table, name: &str, p: u64, q: u64) -> Result<Option<Vec<bool>>> {
        if p > q || q > self.len() {
            return Err(Error::InvalidArgument(format!(
                "rows {p}..{q} of a selection of {}",
                self.len()
            )));
        }
        match self {
            TableRows::Range(a, _) => t.column_validity(name, a + p, a + q),
            TableRows::Indices(v) => t.take_validity(&v[p as usize..q as usize], name),
        }
    }

    /// The rows in batches of up to `rows_per_batch` rows (at least one), in order: the
    /// first output position of each batch and its values, a list per column of `names`.
    pub fn batches<'a>(
        &'a self,
        t: &'a Table,
        names: &'a [&'a str],
        rows_per_batch: u64,
    ) -> impl Iterator<Item = Result<(u64, Vec<Values>)>> + 'a {
        let total = self.len();
        let per = rows_per_batch.max(1);
        let mut p = 0;
        std::iter::from_fn(move || {
            if p >= total {
                return None;
            }
            let q = (p + per).min(total);
            let r = self.read(t, names, p, q).map(|v| (p, v));
            p = if r.is_ok() { q } else { total };
            Some(r)
        })
    }
}
