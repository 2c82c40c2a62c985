//! Changing a table's shape and schema: its row count ([`Table::resize`]), and its columns
//! (added, dropped, renamed).

use super::columns::{build_column, to_specs};
use super::schema::{check_name, ColumnOptions, Field, FieldSpec, FieldType};
use super::values::Values;
use super::{schema, Column, Engine, Table};
use crate::engine::ChunkWrites;
use crate::error::{Error, Result};
use crate::meta::ColumnSizes;
use std::collections::BTreeMap;
use std::path::PathBuf;

impl Table {
    /// Sets the number of rows: shrinking drops rows of every column, growing fills every
    /// column with its fill value. Atomic across columns.
    ///
    /// # Errors
    /// [`Error::ReadOnly`], I/O errors.
    pub fn resize(&mut self, rows: u64) -> Result<()> {
        let _turn = self.turn()?;
        let nrows = self.nrows();
        if rows == nrows {
            return Ok(());
        }
        if rows > nrows {
            let what = format!("growing {} to {rows} rows", self.root.display());
            if rows - nrows > crate::MAX_TABLE_FILL_ROWS {
                return Err(Error::InvalidArgument(format!(
                    "{what} would add {} rows of fill values; a table resize adds at most {} \
                     (grow in steps, or append the rows)",
                    rows - nrows,
                    crate::MAX_TABLE_FILL_ROWS
                )));
            }
            for c in &self.columns {
                let isz = match c.leaf.kind {
                    crate::column::LeafKind::Fixed(d) => d.itemsize() as u64,
                    _ => 1,
                };
                crate::engine::limits::shape_bytes(&[rows], isz, &what)?;
            }
        }
        self.run(rows, None, false, |columns, txn| {
            let mut deltas = BTreeMap::new();
            if rows < nrows {
                // A dictionary keeps its entries: codes of the rows kept index them.
                for c in columns
                    .iter()
                    .filter(|c| c.leaf.dict != schema::DictPart::Entries)
                {
                    let cl = c.leaf.storage.chunklen;
                    // A variable-length chunk cut in the middle is written again with only
                    // the rows it keeps, so that no dropped item lingers in it and the
                    // column's nbytes stays the size of its rows.
                    let cut = match &c.engine {
                        Engine::Var(var) if !rows.is_multiple_of(cl) => Some((var, rows / cl)),
                        _ => None,
                    };
                    let mut w = ChunkWrites::new(c.store(), c.nchunks(nrows), cut.map(|(_, k)| k));
                    if let Some((var, k)) = cut {
                        let kept = var.read_rows(nrows, k * cl, rows)?;
                        var.write(txn, &mut w, rows, k * cl, &kept)?;
                    }
                    w.truncate(txn, c.nchunks(rows))?;
                    deltas.insert(c.leaf.path.clone(), w.finish_both(txn)?);
                }
            } else {
                let grown: Vec<&Column> = columns
                    .iter()
                    .filter(|c| c.leaf.dict != schema::DictPart::Entries)
                    .collect();
                let empties: Vec<Values> = grown.iter().map(|c| c.empty_values()).collect();
                let pairs: Vec<(&Column, &Values)> = grown.into_iter().zip(&empties).collect();
                deltas = Self::write_columns(columns, txn, nrows, nrows, &pairs, rows - nrows)?;
            }
            Ok(deltas)
        })
    }

    /// Adds a top-level field (a leaf or a structure), filled with its fill value for the
    /// existing rows.
    ///
    /// # Errors
    /// A bad or duplicate name, bad options, [`Error::ReadOnly`], I/O errors.
    pub fn add_column(&mut self, field: Field) -> Result<()> {
        let _turn = self.turn()?;
        schema::check_fields(std::slice::from_ref(&field))?;
        if self.meta.dtype.iter().any(|f| f.name == field.name) {
            return Err(Error::InvalidArgument(format!(
                "column {:?} already exists",
                field.name
            )));
        }
        let spec = to_specs(
            std::slice::from_ref(&field),
            &ColumnOptions::default(),
            self.nrows().max(self.meta.expectedlen),
            crate::engine::file_bytes(self.storage().as_ref()),
        )?;
        let mut meta = self.meta.clone();
        meta.dtype.extend(spec.iter().cloned());
        let new_leaves = schema::leaves(&spec)?;
        let nrows = self.nrows();
        let storage = self.root.storage.clone();
        let root = self.root.to_path_buf();
        // Leftovers of an earlier failed attempt would be mistaken for data.
        self.root
            .storage
            .remove_dir_all(&root.join("data").join(&field.name))?;
        let table_id = self.meta.id.clone();
        self.run(nrows, Some(meta), true, move |_, txn| {
            // A new dictionary starts empty: the rows hold the fill code.
            let cols: Vec<Column> = new_leaves
                .into_iter()
                .filter(|l| l.dict != schema::DictPart::Entries)
                .map(|l| build_column(storage.clone(), &root, l, table_id.as_deref()))
                .collect::<Result<_>>()?;
            let empties: Vec<Values> = cols.iter().map(Column::empty_values).collect();
            let pairs: Vec<(&Column, &Values)> = cols.iter().zip(&empties).collect();
            Self::write_columns(&cols, txn, 0, 0, &pairs, nrows)
        })
    }

    /// Drops a field (a top-level name, or `parent/name` for a nested one) and its files.
    ///
    /// # Errors
    /// Unknown field, dropping the last field of the table or of a structure,
    /// [`Error::ReadOnly`], I/O errors.
    pub fn drop_column(&mut self, path: &str) -> Result<()> {
        let _turn = self.turn()?;
        let mut meta = self.meta.clone();
        remove_spec(&mut meta.dtype, path)?;
        let nrows = self.nrows();
        let rel = PathBuf::from("data").join(path);
        self.run(nrows, Some(meta), true, move |_, txn| {
            txn.remove_dir(&rel);
            Ok(BTreeMap::new())
        })
    }

    /// Renames a field (a top-level name, or `parent/name` for a nested one) to `new_name`
    /// within its parent.
    ///
    /// # Errors
    /// Unknown field, a bad or taken name, [`Error::ReadOnly`], I/O errors.
    pub fn rename_column(&mut self, path: &str, new_name: &str) -> Result<()> {
        let _turn = self.turn()?;
        check_name(new_name)?;
        let mut meta = self.meta.clone();
        let (parent, old) = path.rsplit_once('/').map_or(("", path), |(p, n)| (p, n));
        let siblings = find_siblings(&mut meta.dtype, parent)?;
        if siblings.iter().any(|f| f.name == new_name) {
            return Err(Error::InvalidArgument(format!(
                "column {new_name:?} already exists"
            )));
        }
        let f = siblings
            .iter_mut()
            .find(|f| f.name == old)
            .ok_or_else(|| Error::InvalidArgument(format!("no field {path:?}")))?;
        f.name = new_name.to_string();
        let from = PathBuf::from("data").join(path);
        let to = PathBuf::from("data").join(parent).join(new_name);
        let nrows = self.nrows();
        let mut sizes_cols = self.sizes.columns.clone().unwrap_or_default();
        let renamed: Vec<(String, ColumnSizes)> = sizes_cols
            .iter()
            .filter(|(k, _)| *k == path || k.starts_with(&format!("{path}/")))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let new_prefix = if parent.is_empty() {
            new_name.to_string()
        } else {
            format!("{parent}/{new_name}")
        };
        for (k, v) in renamed {
            sizes_cols.remove(&k);
            sizes_cols.insert(format!("{new_prefix}{}", &k[path.len()..]), v);
        }
        self.sizes.columns = Some(sizes_cols);
        let exists = self.root.storage.exists(&self.root.join(&from));
        // A directory at the new name is a leftover of a failed operation (no committed
        // column has that name): remove it, or the rename would be skipped at apply.
        self.root.storage.remove_dir_all(&self.root.join(&to))?;
        self.run(nrows, Some(meta), true, move |_, txn| {
            if exists {
                txn.rename(&from, &to);
            }
            Ok(BTreeMap::new())
        })
    }
}

pub(super) fn find_siblings<'a>(
    specs: &'a mut Vec<FieldSpec>,
    parent: &str,
) -> Result<&'a mut Vec<FieldSpec>> {
    if parent.is_empty() {
        return Ok(specs);
    }
    let (head, rest) = parent.split_once('/').unwrap_or((parent, ""));
    let f = specs
        .iter_mut()
        .find(|f| f.name == head)
        .ok_or_else(|| Error::InvalidArgument(format!("no field {head:?}")))?;
    match &mut f.dtype {
        FieldType::Struct(sub) => find_siblings(sub, rest),
        FieldType::Leaf(_) => Err(Error::InvalidArgument(format!(
            "{head:?} is not a structure"
        ))),
    }
}

pub(super) fn remove_spec(specs: &mut Vec<FieldSpec>, path: &str) -> Result<()> {
    let (parent, name) = path.rsplit_once('/').map_or(("", path), |(p, n)| (p, n));
    let siblings = find_siblings(specs, parent)?;
    let i = siblings
        .iter()
        .position(|f| f.name == name)
        .ok_or_else(|| Error::InvalidArgument(format!("no field {path:?}")))?;
    if siblings.len() == 1 {
        return Err(Error::InvalidArgument(format!(
            "{path:?} is the last field of {}; drop {} instead",
            if parent.is_empty() {
                "the table"
            } else {
                parent
            },
            if parent.is_empty() {
                "the dataset"
            } else {
                parent
            }
        )));
    }
    siblings.remove(i);
    Ok(())
}
