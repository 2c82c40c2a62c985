//! Nulls (missing values) in tables. A nullable leaf column keeps, beside its values, a
//! hidden `bool` column `data/<path>/__validity__/` with one flag per row (true: the row
//! holds a value), chunked exactly as the column is (`spec/table.md` §3.5). Being an
//! ordinary column inside the table, it is carried by every operation (append, write, resize,
//! schema changes, compaction, verification, sizes, the journal) with no code of its own;
//! this module turns values with validity into the pairs of columns the table writes, and
//! gives the validity's statistics as null counts.

use super::schema::{validity_path, ColumnStorage, Leaf};
use super::Values;
use crate::blpk::Checksum;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::meta::{self, Compression, FilterName};
use crate::stats::{ChunkStats, StatValue};
use std::borrow::Cow;

/// A column's values with the rows that hold none: `validity[i]` is false where row `i` is
/// null. What a null row holds in `values` is ignored on writing (blz stores the column's
/// fill value there) and is the column's fill value on reading.
#[derive(Debug, Clone, PartialEq)]
pub struct NullableValues {
    /// The values, one per row.
    pub values: Values,
    /// One flag per row, true where the row holds a value; `None`: every row does.
    pub validity: Option<Vec<bool>>,
}

impl NullableValues {
    /// Values with validity (`None`: no nulls).
    pub fn new(values: Values, validity: Option<Vec<bool>>) -> NullableValues {
        NullableValues { values, validity }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Number of null rows.
    pub fn null_count(&self) -> usize {
        self.validity
            .as_ref()
            .map_or(0, |v| v.iter().filter(|&&b| !b).count())
    }

    /// Whether row `i` is null.
    pub fn is_null(&self, i: usize) -> bool {
        self.validity
            .as_ref()
            .is_some_and(|v| v.get(i).is_some_and(|&b| !b))
    }
}

impl From<Values> for NullableValues {
    fn from(values: Values) -> NullableValues {
        NullableValues {
            values,
            validity: None,
        }
    }
}

/// What the table's writing calls take for a column: plain [`Values`] (no nulls) or
/// [`NullableValues`].
pub trait ColumnValues {
    /// The values, one per row.
    fn values(&self) -> &Values;
    /// One flag per row, true where the row holds a value; `None`: every row does.
    fn validity(&self) -> Option<&[bool]>;
}

impl ColumnValues for Values {
    fn values(&self) -> &Values {
        self
    }
    fn validity(&self) -> Option<&[bool]> {
        None
    }
}

impl ColumnValues for NullableValues {
    fn values(&self) -> &Values {
        &self.values
    }
    fn validity(&self) -> Option<&[bool]> {
        self.validity.as_deref()
    }
}

/// How a validity column is stored: as its column for rows and files (so that chunk `k` of
/// both covers the same rows), compressed with bitshuffle and lz4 (a chunk without nulls
/// takes a few dozen bytes), fill `false` (rows added without a value are null).
pub(crate) fn validity_storage(of: &ColumnStorage) -> ColumnStorage {
    ColumnStorage {
        endianness: of.endianness,
        chunklen: of.chunklen,
        superchunksize: of.superchunksize,
        compression: Compression {
            codec: crate::blosc::Codec::Lz4,
            clevel: 5,
            filters: vec![FilterName::Bitshuffle],
            mantissa_bits: None,
            blocksize: 0,
        },
        checksum: if of.checksum == Checksum::None {
            Checksum::None
        } else {
            Checksum::Crc32
        },
        slack: 0,
        dflt: serde_json::Value::Bool(false),
        id: Some(meta::new_id()),
    }
}

/// The validity flags as a `bool` column's values.
pub(crate) fn validity_values(flags: &[bool]) -> Values {
    Values::Fixed {
        dtype: DType::Bool,
        data: flags.iter().map(|&b| u8::from(b)).collect(),
    }
}

/// `values` with every null row holding the fill value (`fixed_fill`: the fill's bytes for
/// a fixed-size column; `var_fill` a variable-length one's item), so that what a null reads
/// as does not depend on what the writer left there.
pub(crate) fn normalize<'v>(
    values: &'v Values,
    validity: &[bool],
    fixed_fill: &[u8],
    var_fill: &[u8],
) -> Cow<'v, Values> {
    if !validity.contains(&false) {
        return Cow::Borrowed(values);
    }
    match values {
        Values::Fixed { dtype, data } => {
            let isz = dtype.itemsize();
            let mut data = data.clone();
            for (cell, _) in data
                .chunks_exact_mut(isz.max(1))
                .zip(validity)
                .filter(|(_, &ok)| !ok)
            {
                if fixed_fill.len() == cell.len() {
                    cell.copy_from_slice(fixed_fill);
                } else {
                    cell.fill(0);
                }
            }
            Cow::Owned(Values::Fixed {
                dtype: *dtype,
                data,
            })
        }
        Values::Var(items) => Cow::Owned(Values::Var(
            items
                .iter()
                .zip(validity)
                .map(|(it, &ok)| if ok { it.clone() } else { var_fill.to_vec() })
                .collect(),
        )),
    }
}

/// The error for nulls given to a column that holds none.
pub(crate) fn not_nullable(leaf: &Leaf, row: usize) -> Error {
    Error::InvalidArgument(format!(
        "column {} is not nullable, and row {row} of the values given is null (declare the \
         column nullable to store nulls)",
        leaf.path
    ))
}

/// The error for validity flags of another length than the values.
pub(crate) fn validity_length(leaf: &Leaf, flags: usize, values: usize) -> Error {
    Error::InvalidArgument(format!(
        "column {}: {flags} validity flags given for {values} values",
        leaf.path
    ))
}

/// The number of nulls among the `rows` visible rows of a chunk, from its validity
/// column's statistics; `None` when they do not tell it exactly.
pub(crate) fn null_count(stats: Option<&ChunkStats>, rows: u64) -> Option<u64> {
    let s = stats?;
    match (s.min, s.max) {
        // Every flag set (a shrink keeps a bound, and no more rows than were written).
        (Some(StatValue::Bool(true)), _) => return Some(0),
        (_, Some(StatValue::Bool(false))) => return Some(rows),
        _ => {}
    }
    let sum = s.sum?;
    (sum.count == rows).then(|| rows.saturating_sub(sum.int as u64))
}

impl super::Table {
    /// The validity column of nullable column `name`; `None` for a column without nulls.
    fn validity_core(&self, name: &str) -> Result<Option<&crate::engine::ArrayCore>> {
        let c = self.col(name)?;
        if !c.leaf.nullable {
            return Ok(None);
        }
        match &self.col_any(&validity_path(name))?.engine {
            super::Engine::Fixed(core) => Ok(Some(core)),
            super::Engine::Var(_) => Err(Error::InvalidArgument(format!(
                "the validity column of {name} is not a bool column"
            ))),
        }
    }

    /// Whether column `name` may hold nulls.
    ///
    /// # Errors
    /// An unknown column.
    pub fn is_nullable(&self, name: &str) -> Result<bool> {
        Ok(self.col(name)?.leaf.nullable)
    }

    /// The validity of rows `start..end` of column `name` into `out` (one byte per row: 1
    /// where the row holds a value, 0 where it is null); only the validity column's files
    /// are read. Returns whether the column is nullable: when it is not, `out` is set to 1s.
    ///
    /// # Errors
    /// As [`Table::column_rows_into`](super::Table::column_rows_into).
    pub fn validity_into(&self, name: &str, start: u64, end: u64, out: &mut [u8]) -> Result<bool> {
        self.check_range(start, end)?;
        if out.len() as u64 != end - start {
            return Err(Error::Mismatch {
                dataset: self.root.to_path_buf(),
                reason: format!(
                    "a buffer of {} bytes given for the validity of {} rows of column {name}",
                    out.len(),
                    end - start
                ),
            });
        }
        let Some(core) = self.validity_core(name)? else {
            out.fill(1);
            return Ok(false);
        };
        if start < end {
            let sel = [crate::selection::AxisSel {
                start,
                step: 1,
                count: end - start,
                reversed: false,
                keep: true,
            }];
            self.unless_changed(core.read_into(&sel, &[self.nrows()], out))?;
        }
        Ok(true)
    }

    /// The validity of rows `start..end` of column `name` (true where a row holds a value);
    /// `None` when none of them is null (always for a column that is not nullable).
    ///
    /// # Errors
    /// As [`Table::column_rows`](super::Table::column_rows).
    pub fn column_validity(&self, name: &str, start: u64, end: u64) -> Result<Option<Vec<bool>>> {
        self.check_range(start, end)?;
        if !self.is_nullable(name)? {
            return Ok(None);
        }
        let mut bytes = vec![0u8; (end - start) as usize];
        self.validity_into(name, start, end, &mut bytes)?;
        Ok(bytes
            .contains(&0)
            .then(|| bytes.iter().map(|&b| b != 0).collect()))
    }

    /// Rows `start..end` of column `name` with their validity (as
    /// [`Table::column_rows`](super::Table::column_rows); a null row holds the column's
    /// fill value).
    ///
    /// # Errors
    /// As [`Table::column_rows`](super::Table::column_rows).
    pub fn column_rows_nullable(&self, name: &str, start: u64, end: u64) -> Result<NullableValues> {
        Ok(NullableValues {
            values: self.column_rows(name, start, end)?,
            validity: self.column_validity(name, start, end)?,
        })
    }

    /// The validity of the rows at `indices` of column `name` (as
    /// [`Table::take`](super::Table::take) reads values); `None` when none of them is null.
    ///
    /// # Errors
    /// As [`Table::take`](super::Table::take).
    pub fn take_validity(&self, indices: &[u64], name: &str) -> Result<Option<Vec<bool>>> {
        let n = self.nrows();
        if let Some(&bad) = indices.iter().find(|&&i| i >= n) {
            return Err(Error::OutOfBounds {
                dataset: self.root.to_path_buf(),
                reason: format!("row {bad} outside 0..{n}"),
            });
        }
        let Some(core) = self.validity_core(name)? else {
            return Ok(None);
        };
        let bytes = self.unless_changed(core.take_rows(n, indices))?;
        Ok(bytes
            .contains(&0)
            .then(|| bytes.iter().map(|&b| b != 0).collect()))
    }

    /// The number of nulls in each chunk of column `name` (entry `k` covers the rows of
    /// chunk `k`, as [`Table::column_stats`](super::Table::column_stats)), from the
    /// validity column's statistics: nothing is decoded. `Some(0)` for every chunk of a
    /// column that is not nullable; `None` where the statistics do not tell.
    ///
    /// # Errors
    /// An unknown column; opening a superchunk file.
    pub fn column_null_counts(&self, name: &str) -> Result<Vec<Option<u64>>> {
        let c = self.col(name)?;
        let cl = c.leaf.storage.chunklen.max(1);
        let nrows = self.nrows();
        let nchunks = nrows.div_ceil(cl);
        let Some(core) = self.validity_core(name)? else {
            return Ok(vec![Some(0); nchunks as usize]);
        };
        let stats = core
            .store
            .chunk_stats(nchunks, self.sizes.stats_current())?;
        Ok(stats
            .iter()
            .enumerate()
            .map(|(k, s)| {
                let rows = (nrows - k as u64 * cl).min(cl);
                null_count(s.as_ref(), rows)
            })
            .collect())
    }
}
