//! A table's rows by index: gathered ([`Table::take`]) and scattered ([`Table::put`]) chunk
//! by chunk, each column's touched chunks decoded once.

use super::write::{expand, refs};
use super::{dict, Column, ColumnValues, Engine, Table, Values};
use crate::engine::{ChunkWrites, GatherPlan};
use crate::error::{Error, Result};
use crate::fancy::{AxisIndex, Fancy};
use std::collections::BTreeMap;

impl Table {
    /// Overwrites the rows at `indices` (any order; of repeated rows the last value wins,
    /// as in numpy) of the given columns (a subset is fine; one [`Values`] per column,
    /// each as long as `indices`), in one transaction across the columns. Each touched
    /// chunk of each column is read, patched and re-encoded once.
    ///
    /// # Errors
    /// [`Error::OutOfBounds`] for a row outside the table; [`Error::Mismatch`] for values
    /// of another length than `indices`; otherwise as [`Table::write_rows`]. On error the
    /// table keeps its last committed state.
    pub fn put<V: ColumnValues>(&mut self, indices: &[u64], cols: &[(&str, V)]) -> Result<()> {
        let _turn = self.turn()?;
        let mut enc = dict::Encoder::new(self)?;
        let expanded = expand(&self.root, &self.columns, &mut enc, cols)?;
        let cols = &refs(&expanded);
        let nrows = self.nrows();
        if let Some(&bad) = indices.iter().find(|&&i| i >= nrows) {
            return Err(Error::OutOfBounds {
                dataset: self.root.to_path_buf(),
                reason: format!("row {bad} outside 0..{nrows}"),
            });
        }
        let (data, n) = self.gather(cols, false)?;
        if !cols.is_empty() && n != indices.len() as u64 {
            return Err(Error::Mismatch {
                dataset: self.root.to_path_buf(),
                reason: format!("{n} values given for {} rows", indices.len()),
            });
        }
        if indices.is_empty() || cols.is_empty() {
            return Ok(());
        }
        let data = self.indices(&data, cols);
        self.run_to(None, true, |columns, txn, counts| {
            let mut deltas = BTreeMap::new();
            for &(ci, vi) in &data {
                let c: &Column = &columns[ci];
                let mut w = ChunkWrites::new(c.store(), c.nchunks(nrows), None);
                match (&c.engine, cols[vi].1) {
                    (Engine::Fixed(core), Values::Fixed { data, .. }) => {
                        let sel = Fancy::orthogonal(vec![AxisIndex::List(indices.to_vec())]);
                        let plan = GatherPlan::new(&sel, &[nrows], &core.chunkshape)?;
                        core.scatter(txn, &mut w, &plan, &[nrows], data)?;
                    }
                    (Engine::Var(var), Values::Var(items)) => {
                        let cl = c.leaf.storage.chunklen.max(1);
                        // Stable: the rows of one chunk keep their order, so the last wins.
                        let mut order: Vec<usize> = (0..indices.len()).collect();
                        order.sort_by_key(|&j| indices[j] / cl);
                        let mut scratch = Vec::new();
                        for group in order.chunk_by(|&a, &b| indices[a] / cl == indices[b] / cl) {
                            let k = indices[group[0]] / cl;
                            let valid = (nrows - k * cl).min(cl);
                            let mut chunk = var.chunk_items(k, valid, &mut scratch)?;
                            for &j in group {
                                if let Some(slot) = chunk.get_mut((indices[j] % cl) as usize) {
                                    slot.clone_from(&items[j]);
                                }
                            }
                            var.write(txn, &mut w, nrows, k * cl, &chunk)?;
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
            enc.write_entries(columns, txn, &mut deltas, counts)?;
            Ok((deltas, nrows))
        })
    }
}
