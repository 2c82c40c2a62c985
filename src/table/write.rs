//! Writing a table's rows: the checks every batch passes, nulls and dictionaries expanded into
//! the stored columns, appends streamed chunk by chunk, overwrites, and the one transaction
//! (`run`) every change of the table commits through.

use super::columns::{build_column, fill_items};
use super::schema::{LeafKind, TableStorage};
use super::values::Values;
use super::{
    dict, nulls, schema, values_mismatch, Column, ColumnValues, Engine, NullableValues, Table,
};
use crate::engine::{ChunkWrites, Source};
use crate::error::{Error, Result};
use crate::meta::{self, ColumnSizes, MetaPaths, Sizes};
use crate::selection::AxisSel;
use crate::txn::Txn;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

/// Per column path, the change of its stored and uncompressed bytes in an operation.
pub(super) type ByteDeltas = BTreeMap<String, (i64, i64)>;

/// Per dictionary path, its row count after an operation that extends it.
pub(super) type RowCounts = BTreeMap<String, u64>;

/// The columns' values as the table writes them: each nullable column's values with their
/// null rows holding the fill value, followed by its validity column's; values given with
/// nulls for a column that is not nullable are refused, naming it. Names the table does not
/// have are kept for the checks to refuse.
pub(super) fn expand<'v, V: ColumnValues>(
    root: &Path,
    columns: &[Column],
    enc: &mut dict::Encoder,
    cols: &'v [(&str, V)],
) -> Result<Vec<(String, Cow<'v, Values>)>> {
    let mut out = Vec::with_capacity(cols.len() + 1);
    for (name, v) in cols {
        let values = v.values();
        let Some(c) = columns
            .iter()
            .find(|c| !c.leaf.hidden && c.leaf.path == *name)
        else {
            out.push((name.to_string(), Cow::Borrowed(values)));
            continue;
        };
        let flags = checked_flags(c, values.len(), v.validity())?;
        if let Some(codes) = enc.encode(root, c, values, flags.as_deref())? {
            out.push((name.to_string(), Cow::Owned(codes)));
            if let Some(flags) = flags {
                out.push((
                    schema::validity_path(name),
                    Cow::Owned(nulls::validity_values(&flags)),
                ));
            }
            continue;
        }
        match flags {
            None => out.push((name.to_string(), Cow::Borrowed(values))),
            Some(flags) => {
                let (fixed, var) = fills(c);
                out.push((
                    name.to_string(),
                    nulls::normalize(values, &flags, fixed, var),
                ));
                out.push((
                    schema::validity_path(name),
                    Cow::Owned(nulls::validity_values(&flags)),
                ));
            }
        }
    }
    Ok(out)
}

/// As [`expand`], for owned values.
pub(super) fn expand_owned<V: Into<NullableValues>>(
    root: &Path,
    columns: &[Column],
    enc: &mut dict::Encoder,
    batch: Vec<(String, V)>,
) -> Result<Vec<(String, Values)>> {
    let mut out = Vec::with_capacity(batch.len() + 1);
    for (name, v) in batch {
        let v: NullableValues = v.into();
        let Some(c) = columns
            .iter()
            .find(|c| !c.leaf.hidden && c.leaf.path == name)
        else {
            out.push((name, v.values));
            continue;
        };
        let flags = checked_flags(c, v.values.len(), v.validity.as_deref())?;
        if let Some(codes) = enc.encode(root, c, &v.values, flags.as_deref())? {
            let vpath = schema::validity_path(&name);
            out.push((name, codes));
            if let Some(flags) = flags {
                out.push((vpath, nulls::validity_values(&flags)));
            }
            continue;
        }
        match flags {
            None => out.push((name, v.values)),
            Some(flags) => {
                let (fixed, var) = fills(c);
                let values = match nulls::normalize(&v.values, &flags, fixed, var) {
                    Cow::Borrowed(_) => v.values,
                    Cow::Owned(n) => n,
                };
                let vpath = schema::validity_path(&name);
                out.push((name, values));
                out.push((vpath, nulls::validity_values(&flags)));
            }
        }
    }
    Ok(out)
}

/// The validity flags to write for column `c` (`None`: it is not nullable), checked
/// against the values' length and the column's nullability.
pub(super) fn checked_flags<'f>(
    c: &Column,
    len: usize,
    validity: Option<&'f [bool]>,
) -> Result<Option<Cow<'f, [bool]>>> {
    if let Some(f) = validity {
        if f.len() != len {
            return Err(nulls::validity_length(&c.leaf, f.len(), len));
        }
    }
    if !c.leaf.nullable {
        if let Some(i) = validity.and_then(|f| f.iter().position(|&b| !b)) {
            return Err(nulls::not_nullable(&c.leaf, i));
        }
        return Ok(None);
    }
    Ok(Some(validity.map_or_else(
        || Cow::Owned(vec![true; len]),
        Cow::Borrowed,
    )))
}

/// What a null of column `c` holds: the fill value's bytes (fixed-size) or item
/// (variable-length).
pub(super) fn fills(c: &Column) -> (&[u8], &[u8]) {
    match &c.engine {
        Engine::Fixed(core) => (core.fill.as_slice(), &[]),
        Engine::Var(_) => (&[], c.leaf.storage.dflt.as_str().unwrap_or("").as_bytes()),
    }
}

/// Expanded values as the writing internals take them.
pub(super) fn refs<'a>(expanded: &'a [(String, Cow<'_, Values>)]) -> Vec<(&'a str, &'a Values)> {
    expanded
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_ref()))
        .collect()
}

/// Checks that a batch gives every column once, values of the column's type, all of one
/// length; returns the length.
pub(super) fn check_batch(
    root: &Path,
    columns: &[Column],
    batch: &[(String, Values)],
) -> Result<u64> {
    let mut len = None;
    for c in columns
        .iter()
        .filter(|c| c.leaf.dict != schema::DictPart::Entries)
    {
        let mut given = batch.iter().filter(|(n, _)| *n == c.leaf.path);
        let Some((_, v)) = given.next() else {
            return Err(Error::InvalidArgument(format!(
                "an append needs every column; missing: {}",
                c.leaf.path
            )));
        };
        if given.next().is_some() {
            return Err(Error::InvalidArgument(format!(
                "column {} given twice",
                c.leaf.path
            )));
        }
        if !c.accepts(v) {
            return Err(values_mismatch(root, c));
        }
        let n = v.len() as u64;
        if *len.get_or_insert(n) != n {
            return Err(Error::Mismatch {
                dataset: root.to_path_buf(),
                reason: format!(
                    "column {} has {n} values, others have {}",
                    c.leaf.path,
                    len.unwrap_or(0)
                ),
            });
        }
    }
    if batch.len() > columns.len() {
        let unknown: Vec<&str> = batch
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| !columns.iter().any(|c| c.leaf.path == *n))
            .collect();
        return Err(Error::InvalidArgument(format!(
            "no such column: {}",
            unknown.join(", ")
        )));
    }
    Ok(len.unwrap_or(0))
}

/// The rows appended to one column over many batches of one transaction: whole chunks are
/// written as soon as they are complete, the rest is carried to the next batch.
pub(super) struct ColumnStream<'c> {
    column: &'c Column,
    writes: ChunkWrites<'c>,
    /// Rows written so far (the column's committed rows included).
    written: u64,
    /// Rows after `written`, fewer than reach the next chunk boundary.
    carry: Values,
}

impl<'c> ColumnStream<'c> {
    pub(super) fn new(column: &'c Column, nrows: u64) -> ColumnStream<'c> {
        let cl = column.leaf.storage.chunklen;
        let rewrite_from = (!nrows.is_multiple_of(cl)).then(|| nrows / cl);
        let carry = column.empty_values();
        ColumnStream {
            column,
            writes: ChunkWrites::new(column.store(), column.nchunks(nrows), rewrite_from),
            written: nrows,
            carry,
        }
    }

    /// Takes the next values of the column (`nrows`: the rows committed before).
    pub(super) fn push(&mut self, txn: &mut Txn<'_>, nrows: u64, v: Values) -> Result<()> {
        let cl = self.column.leaf.storage.chunklen.max(1);
        self.carry.extend(v)?;
        let end = self.written + self.carry.len() as u64;
        let boundary = end / cl * cl;
        if boundary > self.written {
            let rest = self.carry.split_off((boundary - self.written) as usize);
            let ready = std::mem::replace(&mut self.carry, rest);
            self.write(txn, nrows, &ready)?;
        }
        Ok(())
    }

    pub(super) fn write(&mut self, txn: &mut Txn<'_>, nrows: u64, v: &Values) -> Result<()> {
        let c = self.column;
        let start = self.written;
        let end = start + v.len() as u64;
        match (&c.engine, v) {
            (Engine::Fixed(core), Values::Fixed { data, .. }) => {
                let sel = [AxisSel {
                    start,
                    step: 1,
                    count: v.len() as u64,
                    reversed: false,
                    keep: true,
                }];
                let committed = c.nchunks(nrows);
                core.write(
                    txn,
                    &mut self.writes,
                    committed,
                    &sel,
                    &[end],
                    Source::Data(data),
                )?;
            }
            (Engine::Var(var), Values::Var(items)) => {
                var.write(txn, &mut self.writes, nrows, start, items)?;
            }
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "values do not fit column {}",
                    c.leaf.path
                )))
            }
        }
        self.written = end;
        Ok(())
    }

    /// Writes what is carried and returns the column's path with its byte deltas.
    pub(super) fn finish(mut self, txn: &mut Txn<'_>, nrows: u64) -> Result<(String, (i64, i64))> {
        if !self.carry.is_empty() {
            let last = std::mem::replace(&mut self.carry, self.column.empty_values());
            self.write(txn, nrows, &last)?;
        }
        Ok((self.column.leaf.path.clone(), self.writes.finish_both(txn)?))
    }
}

impl Table {
    pub(super) fn check_values(&self, c: &Column, v: &Values) -> Result<()> {
        if c.accepts(v) {
            Ok(())
        } else {
            Err(values_mismatch(&self.root, c))
        }
    }

    /// Runs a multi-column operation in one transaction and commits the new sizes (and, for
    /// schema changes, the new storage document).
    /// `rewrites`: the operation changes rows the table already has (see
    /// [`Sizes::rewritten`]); a shrink and a schema change always do.
    pub(super) fn run<F>(
        &mut self,
        nrows: u64,
        new_meta: Option<TableStorage>,
        rewrites: bool,
        f: F,
    ) -> Result<()>
    where
        F: FnOnce(&[Column], &mut Txn<'_>) -> Result<BTreeMap<String, (i64, i64)>>,
    {
        self.run_to(new_meta, rewrites, |columns, txn, _| {
            Ok((f(columns, txn)?, nrows))
        })
    }

    /// As [`run`](Self::run), with the number of rows after the operation returned by `f`,
    /// which also records the new row counts of the dictionaries it extends.
    pub(super) fn run_to<F>(
        &mut self,
        new_meta: Option<TableStorage>,
        rewrites: bool,
        f: F,
    ) -> Result<()>
    where
        F: FnOnce(&[Column], &mut Txn<'_>, &mut RowCounts) -> Result<(ByteDeltas, u64)>,
    {
        // A read-only handle fails here, before anything (nor the handle) is touched.
        self.check_writable()?;
        let result = self.root.transact(|txn| {
            let mut counts = BTreeMap::new();
            let (deltas, nrows) = f(&self.columns, txn, &mut counts)?;
            let mut cols = self.sizes.columns.clone().unwrap_or_default();
            let leaves = match &new_meta {
                Some(m) => schema::leaves(&m.dtype)?,
                None => self.columns.iter().map(|c| c.leaf.clone()).collect(),
            };
            cols.retain(|k, _| leaves.iter().any(|l| &l.path == k));
            for l in &leaves {
                let e = cols.entry(l.path.clone()).or_insert(ColumnSizes {
                    nbytes: 0,
                    cbytes: 0,
                    rows: (l.dict == schema::DictPart::Entries).then_some(0),
                });
                if let Some(&r) = counts.get(&l.path) {
                    e.rows = Some(r);
                }
                let (dc, dn) = deltas.get(&l.path).copied().unwrap_or((0, 0));
                e.cbytes = (e.cbytes as i64 + dc).max(0) as u64;
                e.nbytes = match l.stored_kind() {
                    LeafKind::Fixed(d) => nrows * d.itemsize() as u64,
                    _ => (e.nbytes as i64 + dn).max(0) as u64,
                };
            }
            let sizes = Sizes {
                shape: vec![nrows],
                nbytes: cols.values().map(|c| c.nbytes).sum(),
                cbytes: cols.values().map(|c| c.cbytes).sum(),
                nrows: Some(nrows),
                columns: Some(cols),
                generation: self.sizes.generation + 1,
                stats: self.sizes.next_stats(),
                rewritten: self.sizes.next_rewritten(
                    rewrites || new_meta.is_some() || nrows < self.sizes.nrows.unwrap_or(0),
                ),
            };
            if let Some(m) = &new_meta {
                txn.put_meta(Path::new("meta/storage"), meta::to_json_bytes(m));
            }
            txn.put_meta(Path::new("meta/sizes"), meta::to_json_bytes(&sizes));
            Ok(sizes)
        });
        for c in &self.columns {
            c.store().invalidate();
        }
        match result {
            Ok(sizes) => {
                self.sizes = sizes;
                if let Some(m) = new_meta {
                    self.reload_schema(m)?;
                }
                Ok(())
            }
            Err(e) => {
                if let Some(s) = self.root.resettle::<Sizes>() {
                    self.sizes = s;
                    let mp = MetaPaths::new(&self.root);
                    if let Ok(m) =
                        meta::read_json::<TableStorage>(self.root.storage.as_ref(), &mp.storage())
                    {
                        let _ = self.reload_schema(m);
                    }
                }
                Err(e)
            }
        }
    }

    pub(super) fn reload_schema(&mut self, m: TableStorage) -> Result<()> {
        let leaves = schema::leaves(&m.dtype)?;
        self.columns = leaves
            .into_iter()
            .map(|l| build_column(self.root.storage.clone(), &self.root, l, m.id.as_deref()))
            .collect::<Result<_>>()?;
        self.meta = m;
        Ok(())
    }

    /// Writes rows `start..` of the given columns inside a transaction (appending past
    /// `nrows`). Returns per-column byte deltas.
    pub(super) fn write_columns(
        columns: &[Column],
        txn: &mut Txn<'_>,
        nrows: u64,
        start: u64,
        data: &[(&Column, &Values)],
        fill_rows: u64,
    ) -> Result<BTreeMap<String, (i64, i64)>> {
        let mut deltas = BTreeMap::new();
        let _ = columns;
        for (c, v) in data {
            let committed = c.nchunks(nrows);
            let cl = c.leaf.storage.chunklen;
            let end = start + v.len() as u64 + fill_rows;
            let appending = end > nrows;
            let rewrite_from = (appending && !nrows.is_multiple_of(cl)).then(|| nrows / cl);
            let mut w = ChunkWrites::new(c.store(), committed, rewrite_from);
            let new_rows = end.max(nrows);
            match (&c.engine, v) {
                (Engine::Fixed(core), Values::Fixed { data, .. }) => {
                    let sel = [AxisSel {
                        start,
                        step: 1,
                        count: v.len() as u64 + fill_rows,
                        reversed: false,
                        keep: true,
                    }];
                    let src = if fill_rows > 0 {
                        Source::Fill
                    } else {
                        Source::Data(data)
                    };
                    core.write(txn, &mut w, committed, &sel, &[new_rows], src)?;
                }
                (Engine::Var(var), Values::Var(items)) => {
                    if fill_rows > 0 {
                        let fill = fill_items(&c.leaf, fill_rows as usize);
                        var.write(txn, &mut w, nrows, start, &fill)?;
                    } else {
                        var.write(txn, &mut w, nrows, start, items)?;
                    }
                }
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "values do not fit column {}",
                        c.leaf.path
                    )))
                }
            }
            deltas.insert(c.leaf.path.clone(), w.finish_both(txn)?);
        }
        Ok(deltas)
    }

    pub(super) fn gather<'a>(
        &'a self,
        cols: &'a [(&'a str, &'a Values)],
        all: bool,
    ) -> Result<(Vec<(&'a Column, &'a Values)>, u64)> {
        let mut out = Vec::new();
        let mut len = None;
        let mut seen = std::collections::HashSet::new();
        for &(name, v) in cols {
            let c = self.col_any(name)?;
            if !seen.insert(name) {
                return Err(Error::InvalidArgument(format!("column {name} given twice")));
            }
            self.check_values(c, v)?;
            let n = v.len() as u64;
            if *len.get_or_insert(n) != n {
                return Err(Error::Mismatch {
                    dataset: self.root.to_path_buf(),
                    reason: format!(
                        "column {name} has {n} values, others have {}",
                        len.unwrap_or(0)
                    ),
                });
            }
            out.push((c, v));
        }
        let dictionaries = self
            .columns
            .iter()
            .filter(|c| c.leaf.dict == schema::DictPart::Entries)
            .count();
        if all && out.len() + dictionaries != self.columns.len() {
            let missing: Vec<&str> = self
                .column_names()
                .into_iter()
                .filter(|n| !cols.iter().any(|(m, _)| m == n))
                .collect();
            return Err(Error::InvalidArgument(format!(
                "an append needs every column; missing: {}",
                missing.join(", ")
            )));
        }
        Ok((out, len.unwrap_or(0)))
    }

    /// Turns gathered (column, values) pairs into (column index, values index) pairs, which
    /// outlive the borrow of `self` that [`Table::run`] needs.
    pub(super) fn indices(
        &self,
        data: &[(&Column, &Values)],
        cols: &[(&str, &Values)],
    ) -> Vec<(usize, usize)> {
        data.iter()
            .map(|(c, v)| {
                (
                    self.columns
                        .iter()
                        .position(|x| std::ptr::eq(x, *c))
                        .unwrap_or(0),
                    cols.iter()
                        .position(|(_, x)| std::ptr::eq(*x, *v))
                        .unwrap_or(0),
                )
            })
            .collect()
    }

    /// Writes the gathered columns at row `start` in one transaction; the table then has
    /// `new_rows` rows.
    pub(super) fn write_gathered(
        &mut self,
        data: &[(usize, usize)],
        cols: &[(&str, &Values)],
        start: u64,
        new_rows: u64,
        enc: &dict::Encoder,
    ) -> Result<()> {
        let nrows = self.nrows();
        self.run_to(None, start < nrows, |columns, txn, counts| {
            let pairs: Vec<(&Column, &Values)> = data
                .iter()
                .map(|&(ci, vi)| (&columns[ci], cols[vi].1))
                .collect();
            let mut deltas = Self::write_columns(columns, txn, nrows, start, &pairs, 0)?;
            enc.write_entries(columns, txn, &mut deltas, counts)?;
            Ok((deltas, new_rows))
        })
    }

    /// Appends rows: one [`Values`] per leaf column, all of the same length. Atomic across
    /// columns.
    ///
    /// # Errors
    /// Missing, unknown or duplicate columns, unequal lengths, wrong types; I/O errors (the
    /// table then keeps its last committed state).
    pub fn append<V: ColumnValues>(&mut self, cols: &[(&str, V)]) -> Result<()> {
        let _turn = self.turn()?;
        let mut enc = dict::Encoder::new(self)?;
        let expanded = expand(&self.root, &self.columns, &mut enc, cols)?;
        let cols = &refs(&expanded);
        let (data, n) = self.gather(cols, true)?;
        if n == 0 {
            return Ok(());
        }
        let data = self.indices(&data, cols);
        let nrows = self.nrows();
        self.write_gathered(&data, cols, nrows, nrows + n, &enc)
    }

    /// Appends every batch (one [`Values`] per leaf column, all of one length within a
    /// batch) in one transaction across all columns: readers see none of the rows until the
    /// commit at the end, and a failure or a kill at any point leaves the table as it was.
    /// Memory stays at one batch and less than a chunk of each column besides: whole chunks
    /// are encoded and written as batches arrive. Returns the number of rows appended.
    ///
    /// # Errors
    /// As [`Table::append`] for each batch, and the first error a batch itself carries. On
    /// error nothing of the batches is kept.
    pub fn append_batches<I, V>(&mut self, batches: I) -> Result<u64>
    where
        I: IntoIterator<Item = Result<Vec<(String, V)>>>,
        V: Into<NullableValues>,
    {
        let _turn = self.turn()?;
        self.check_writable()?;
        let nrows = self.nrows();
        let root = self.root.to_path_buf();
        let mut enc = dict::Encoder::new(self)?;
        self.run_to(None, false, |columns, txn, counts| {
            // A dictionary gets its new entries at the end, from the encoder.
            let mut streams: Vec<Option<ColumnStream<'_>>> = columns
                .iter()
                .map(|c| {
                    (c.leaf.dict != schema::DictPart::Entries).then(|| ColumnStream::new(c, nrows))
                })
                .collect();
            let mut rows = nrows;
            for batch in batches {
                let batch = expand_owned(&root, columns, &mut enc, batch?)?;
                let n = check_batch(&root, columns, &batch)?;
                for (name, v) in batch {
                    let i = columns
                        .iter()
                        .position(|c| c.leaf.path == name)
                        .ok_or_else(|| Error::InvalidArgument(format!("no column {name}")))?;
                    if let Some(Some(s)) = streams.get_mut(i) {
                        s.push(txn, nrows, v)?;
                    }
                }
                rows += n;
            }
            let mut deltas = BTreeMap::new();
            for s in streams.into_iter().flatten() {
                let (path, d) = s.finish(txn, nrows)?;
                deltas.insert(path, d);
            }
            enc.write_entries(columns, txn, &mut deltas, counts)?;
            Ok((deltas, rows))
        })?;
        Ok(self.nrows() - nrows)
    }

    /// Overwrites rows `start..start + len` of the given columns (a subset is fine). Atomic
    /// across columns.
    ///
    /// # Errors
    /// As [`Table::append`], and rows outside the table.
    pub fn write_rows<V: ColumnValues>(&mut self, start: u64, cols: &[(&str, V)]) -> Result<()> {
        let _turn = self.turn()?;
        let mut enc = dict::Encoder::new(self)?;
        let expanded = expand(&self.root, &self.columns, &mut enc, cols)?;
        let cols = &refs(&expanded);
        let (data, n) = self.gather(cols, false)?;
        self.check_range(start, start + n)?;
        if n == 0 {
            return Ok(());
        }
        let data = self.indices(&data, cols);
        let nrows = self.nrows();
        self.write_gathered(&data, cols, start, nrows, &enc)
    }
}
