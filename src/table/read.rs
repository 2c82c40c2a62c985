//! Reading a table's rows: one column or several, a range of rows, rows by index.

use super::values::Values;
use super::{Column, Engine, Table};
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::meta::MetaPaths;
use crate::selection::AxisSel;
use ndarray::Array1;

/// Reads of more rows than this first check that the file holding the last of them exists.
pub(super) const LARGE_READ_ROWS: u64 = 1 << 20;

impl Table {
    /// Reads rows `start..end` of one column; only that column's files are opened.
    ///
    /// # Errors
    /// Unknown column, rows out of range, corrupt chunks.
    pub fn column_rows(&self, name: &str, start: u64, end: u64) -> Result<Values> {
        self.check_range(start, end)?;
        let c = self.col(name)?;
        self.unless_changed(self.read_column(c, start, end))
    }

    /// Reads rows `start..end` of a fixed-size column into a buffer the caller allocated
    /// (native-endian elements, `(end - start) * itemsize` bytes), decoding the chunks in
    /// parallel straight into it; only that column's files are opened. A client that owns its
    /// arrays (numpy, Arrow) allocates the result once and has blz fill it.
    ///
    /// # Errors
    /// As [`Table::column_rows`]; [`Error::InvalidArgument`] for a variable-length column;
    /// [`Error::Mismatch`] when `out` is not exactly the rows' size in bytes.
    pub fn column_rows_into(&self, name: &str, start: u64, end: u64, out: &mut [u8]) -> Result<()> {
        self.check_range(start, end)?;
        let core = self.fixed_core(name)?;
        let want = (end - start).saturating_mul(core.itemsize() as u64);
        if out.len() as u64 != want {
            return Err(Error::Mismatch {
                dataset: self.root.to_path_buf(),
                reason: format!(
                    "a buffer of {} bytes given for {} rows of column {name} ({want} bytes)",
                    out.len(),
                    end - start
                ),
            });
        }
        if start == end {
            return Ok(());
        }
        let sel = [AxisSel {
            start,
            step: 1,
            count: end - start,
            reversed: false,
            keep: true,
        }];
        self.unless_changed(core.read_into(&sel, &[self.nrows()], out))
    }

    /// Reads rows `start..end` of several columns at once: each fixed-size column of `into`
    /// straight into its caller's buffer (as [`Table::column_rows_into`]), and returns the
    /// values of the columns of `values` (any kind, in that order). Every column's chunks
    /// are decoded in one parallel pass: the columns run side by side on the rayon pool, and
    /// so do the chunks of each, so a table of several small columns reads as fast as one
    /// large column.
    ///
    /// # Errors
    /// As [`Table::column_rows_into`] and [`Table::column_rows`]; the first error met.
    pub fn read_columns(
        &self,
        start: u64,
        end: u64,
        into: &mut [(&str, &mut [u8])],
        values: &[&str],
    ) -> Result<Vec<Values>> {
        use rayon::prelude::*;
        let (filled, read) = rayon::join(
            || {
                into.par_iter_mut()
                    .try_for_each(|(name, out)| self.column_rows_into(name, start, end, out))
            },
            || {
                values
                    .par_iter()
                    .map(|name| self.column_rows(name, start, end))
                    .collect::<Result<Vec<Values>>>()
            },
        );
        filled?;
        read
    }

    pub(super) fn read_column(&self, c: &Column, start: u64, end: u64) -> Result<Values> {
        if c.leaf.is_dictionary() {
            return self.dict_rows(c, start, end);
        }
        let n = self.nrows();
        if end - start > LARGE_READ_ROWS {
            // Before a buffer as large as the rows is made: the file holding the last of
            // them exists (a row count read from disk is not trusted to size memory).
            if let Some(last) = c.missing_file_of_row(self.root.storage.as_ref(), end - 1) {
                return Err(Error::metadata(
                    MetaPaths::new(&self.root).sizes(),
                    format!(
                        "{n} rows need {}, which does not exist",
                        last.strip_prefix(&self.root).unwrap_or(&last).display()
                    ),
                ));
            }
        }
        match &c.engine {
            Engine::Fixed(core) => {
                let sel = [AxisSel {
                    start,
                    step: 1,
                    count: end - start,
                    reversed: false,
                    keep: true,
                }];
                let mut data = vec![0u8; ((end - start) as usize) * core.itemsize()];
                core.read_into(&sel, &[n], &mut data)?;
                Ok(Values::Fixed {
                    dtype: core.dtype,
                    data,
                })
            }
            Engine::Var(v) => Ok(Values::Var(v.read_rows(n, start, end)?)),
        }
    }

    /// Reads rows `start..end` of a variable-length column as, per chunk in row order, the
    /// items' lengths and their bytes back to back: no allocation per item (Arrow's string
    /// arrays are built from these).
    ///
    /// # Errors
    /// As [`Table::column_rows`]; [`Error::InvalidArgument`] for a fixed-size column.
    #[cfg(feature = "arrow")]
    pub(crate) fn var_rows_flat(
        &self,
        name: &str,
        start: u64,
        end: u64,
    ) -> Result<Vec<(Vec<u32>, Vec<u8>)>> {
        self.check_range(start, end)?;
        let c = self.col(name)?;
        if c.leaf.is_dictionary() {
            return self.dict_rows_flat(c, start, end);
        }
        match &c.engine {
            Engine::Var(v) => self.unless_changed(v.read_rows_flat(self.nrows(), start, end)),
            Engine::Fixed(_) => Err(Error::InvalidArgument(format!(
                "column {name} holds fixed-size values, not variable-length ones"
            ))),
        }
    }

    /// Reads a whole column.
    ///
    /// # Errors
    /// As [`Table::column_rows`].
    pub fn column(&self, name: &str) -> Result<Values> {
        self.column_rows(name, 0, self.nrows())
    }

    /// Reads a whole fixed-size column as an array.
    ///
    /// # Errors
    /// As [`Table::column_rows`], and a type mismatch.
    pub fn column_array<T: Element>(&self, name: &str) -> Result<Array1<T>> {
        Ok(Array1::from(self.column(name)?.to_vec::<T>()?))
    }

    /// Reads rows `start..end` of several columns (all when `names` is `None`), as records in
    /// column form.
    ///
    /// # Errors
    /// As [`Table::column_rows`].
    pub fn rows(
        &self,
        start: u64,
        end: u64,
        names: Option<&[&str]>,
    ) -> Result<Vec<(String, Values)>> {
        let names: Vec<&str> = names.map_or_else(|| self.column_names(), |n| n.to_vec());
        let values = self.read_columns(start, end, &mut [], &names)?;
        Ok(names.iter().map(|n| n.to_string()).zip(values).collect())
    }

    /// Reads the rows at `indices` (any order, repeats allowed) of several columns. A
    /// fixed-size column decodes only the chunks holding them, in parallel, straight into
    /// its result; [`Table::put`] writes rows by index.
    ///
    /// # Errors
    /// As [`Table::column_rows`].
    pub fn take(&self, indices: &[u64], names: Option<&[&str]>) -> Result<Vec<(String, Values)>> {
        let n = self.nrows();
        if let Some(&bad) = indices.iter().find(|&&i| i >= n) {
            return Err(Error::OutOfBounds {
                dataset: self.root.to_path_buf(),
                reason: format!("row {bad} outside 0..{n}"),
            });
        }
        let names: Vec<&str> = names.map_or_else(|| self.column_names(), |n| n.to_vec());
        let taken = names
            .iter()
            .map(|name| {
                let c = self.col(name)?;
                let v = match &c.engine {
                    _ if c.leaf.is_dictionary() => self.dict_take(c, indices)?,
                    Engine::Fixed(core) => Values::Fixed {
                        dtype: core.dtype,
                        data: core.take_rows(n, indices)?,
                    },
                    Engine::Var(v) => Values::Var(v.take(n, indices)?),
                };
                Ok((name.to_string(), v))
            })
            .collect();
        self.unless_changed(taken)
    }
}
