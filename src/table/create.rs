//! Creating a table: [`TableOptions`], [`Table::create`] and [`Table::create_from`] (built in a
//! staging directory and renamed into place).

use super::columns::to_specs;
use super::schema::{ColumnOptions, Field, TableStorage};
use super::values::Values;
use super::{schema, NullableValues, Table};
use crate::engine::Mode;
use crate::error::Result;
use crate::meta::{self, ColumnSizes, MetaPaths, Sizes, FORMAT_NAME, FORMAT_VERSION};
use crate::staging::Staging;
use crate::storage::{self, Storage};
use std::path::Path;
use std::sync::Arc;

/// How a new table is laid out.
#[derive(Debug, Clone, Default)]
pub struct TableOptions {
    /// Options for columns that give none of their own.
    pub defaults: ColumnOptions,
    /// Expected number of rows (sizes chunks).
    pub expectedlen: Option<u64>,
    /// Initial user attributes.
    pub attributes: serde_json::Map<String, serde_json::Value>,
    /// Replace an existing dataset at the path.
    pub overwrite: bool,
}

impl Table {
    /// Creates an empty table.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for bad or duplicate column names or options; I/O errors.
    pub fn create(
        path: impl AsRef<Path>,
        fields: Vec<Field>,
        opts: &TableOptions,
    ) -> Result<Table> {
        let (s, root) = storage::for_new_path(path.as_ref(), opts.overwrite)?;
        Self::create_in(s, &root, fields, opts)
    }

    /// As [`Table::create`], on a given storage backend.
    ///
    /// # Errors
    /// As [`Table::create`].
    pub fn create_in(
        storage: Arc<dyn Storage>,
        root: &Path,
        fields: Vec<Field>,
        opts: &TableOptions,
    ) -> Result<Table> {
        Self::create_from(
            storage,
            root,
            fields,
            opts,
            std::iter::empty::<Result<Vec<(String, Values)>>>(),
        )
    }

    /// Creates a table at `root` and appends every batch (as
    /// [`append_batches`](Self::append_batches) takes them), as one step: the table is built
    /// in a staging directory beside `root` and renamed into place when complete, so a
    /// failure or a kill leaves no table behind. Returns the table, open for writing.
    ///
    /// # Errors
    /// As [`Table::create_in`] and [`Table::append_batches`]; [`Error::Locked`] while another
    /// process creates a dataset at `root`.
    pub fn create_from<I, V>(
        storage: Arc<dyn Storage>,
        root: &Path,
        fields: Vec<Field>,
        opts: &TableOptions,
        batches: I,
    ) -> Result<Table>
    where
        I: IntoIterator<Item = Result<Vec<(String, V)>>>,
        V: Into<NullableValues>,
    {
        schema::check_fields(&fields)?;
        let expected = opts.expectedlen.unwrap_or(0);
        let meta = TableStorage {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            kind: "table".into(),
            dtype: to_specs(
                &fields,
                &opts.defaults,
                expected,
                crate::engine::file_bytes(storage.as_ref()),
            )?,
            expectedlen: expected,
            id: Some(meta::new_id()),
        };
        let leaves = schema::leaves(&meta.dtype)?;
        let is_table =
            |p: &Path| meta::dataset_kind(storage.as_ref(), p) == Some(meta::Kind::Table);
        let staging = Staging::begin(&storage, root, opts.overwrite, &is_table, "a table")?;
        let dir = staging.dir().to_path_buf();
        let build = staging.build_storage();
        let mp = MetaPaths::new(&dir);
        build.create_dir_all(&dir.join("data"))?;
        meta::write_json(build.as_ref(), &mp.storage(), &meta)?;
        meta::write_json(
            build.as_ref(),
            &mp.attributes(),
            &serde_json::Value::Object(opts.attributes.clone()),
        )?;
        let sizes = Sizes {
            shape: vec![0],
            nbytes: 0,
            cbytes: 0,
            generation: 0,
            rewritten: Some(0),
            stats: Some(0),
            nrows: Some(0),
            columns: Some(
                leaves
                    .iter()
                    .map(|l| {
                        (
                            l.path.clone(),
                            ColumnSizes {
                                nbytes: 0,
                                cbytes: 0,
                                rows: (l.dict == schema::DictPart::Entries).then_some(0),
                            },
                        )
                    })
                    .collect(),
            ),
        };
        meta::write_json(build.as_ref(), &mp.sizes(), &sizes)?;
        let mut staged = Self::open_with(build.clone(), &dir, Mode::ReadWrite, true)?;
        staged.seed_dictionaries(&fields, "")?;
        staged.append_batches(batches)?;
        let lock = staging.publish()?;
        let mut table = Self::open_with(storage, root, Mode::ReadWrite, true)?;
        table.root.hold(lock);
        Ok(table)
    }
}
