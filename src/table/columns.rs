//! A table's columns built from its schema: the `meta/storage` specs of new fields, the chunk
//! engine of each column opened and bound to its files, and the row count of `meta/sizes`
//! checked before it sizes anything.

use super::schema::{
    leaf_storage, pick, ColumnOptions, Field, FieldKind, FieldSpec, FieldType, Leaf, LeafKind,
};
use super::{dict, nulls, schema, Column, Engine};
use crate::column::varlen::VarCore;
use crate::dtype::{value_to_bytes, Endianness};
use crate::engine::{ArrayCore, ChunkStore};
use crate::error::{Error, Result};
use crate::meta::{MetaPaths, Sizes};
use crate::storage::Storage;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Checks the row count read from `meta/sizes` (at `path`) before it sizes anything: every
/// fixed-size column's bytes within [`crate::MAX_ARRAY_BYTES`], and the document's other
/// counts agreeing with it: `shape` is `[nrows]`, each fixed-size column's `nbytes` is its
/// rows' bytes and `nbytes` the sum of the columns' (every commit writes them together, so
/// they disagree only in a document no writer wrote: rows added by hand within a last chunk
/// would otherwise show its padding as rows). (Whether the files it needs exist is checked
/// per column, when a large read of it is about to size a buffer, so that opening a table
/// reads no column's files.)
pub(super) fn check_sizes(columns: &[Column], sizes: &Sizes, path: &Path) -> Result<()> {
    let bad = |reason: String| Err(Error::metadata(path, reason));
    let nrows = sizes.nrows.unwrap_or(0);
    for c in columns {
        if let crate::column::LeafKind::Fixed(d) = c.leaf.stored_kind() {
            crate::engine::limits::shape_bytes(&[nrows], d.itemsize() as u64, "nrows")
                .map_err(|e| Error::metadata(path, e.to_string()))?;
        }
    }
    if sizes.shape != [nrows] {
        return bad(format!(
            "shape {:?} is not [nrows], and nrows is {nrows}",
            sizes.shape
        ));
    }
    let Some(cols) = &sizes.columns else {
        return Ok(());
    };
    for c in columns {
        let (crate::column::LeafKind::Fixed(d), Some(cs)) =
            (c.leaf.stored_kind(), cols.get(&c.leaf.path))
        else {
            continue;
        };
        let want = nrows * d.itemsize() as u64;
        if cs.nbytes != want {
            return bad(format!(
                "column {:?} has nbytes {}, but {nrows} rows of {}-byte values take {want}",
                c.leaf.path,
                cs.nbytes,
                d.itemsize()
            ));
        }
    }
    let sum = cols.values().try_fold(0u64, |a, c| a.checked_add(c.nbytes));
    if sum != Some(sizes.nbytes) {
        return bad(format!(
            "nbytes is {}, but its columns' nbytes add up to {}",
            sizes.nbytes,
            sum.map_or_else(|| "more than 2^64".to_string(), |s| s.to_string())
        ));
    }
    Ok(())
}

/// The columns' specs; `file_bytes` as [`build_storage_meta`] takes it.
pub(super) fn to_specs(
    fields: &[Field],
    defaults: &ColumnOptions,
    expected: u64,
    file_bytes: u64,
) -> Result<Vec<FieldSpec>> {
    fields
        .iter()
        .map(|f| {
            let mut dictionary = None;
            let (dtype, storage) = match &f.kind {
                FieldKind::Struct(sub) => (
                    FieldType::Struct(to_specs(sub, defaults, expected, file_bytes)?),
                    None,
                ),
                k => {
                    let lk = match k {
                        FieldKind::Scalar(d) => LeafKind::Fixed(*d),
                        FieldKind::VarStr => LeafKind::VarStr,
                        _ => LeafKind::VarBytes,
                    };
                    if let Some((codes, d)) = dict::new_spec(f, defaults, expected, file_bytes)? {
                        dictionary = Some(d);
                        (FieldType::Leaf(lk.name()), Some(codes))
                    } else {
                        (
                            FieldType::Leaf(lk.name()),
                            Some(leaf_storage(
                                lk, &f.options, defaults, expected, file_bytes,
                            )?),
                        )
                    }
                }
            };
            let nullable =
                storage.is_some() && pick(&f.options.nullable, &defaults.nullable).unwrap_or(false);
            let validity = storage
                .as_ref()
                .filter(|_| nullable)
                .map(nulls::validity_storage);
            Ok(FieldSpec {
                name: f.name.clone(),
                dtype,
                pandas: storage.as_ref().and(f.options.pandas.clone()),
                timezone: schema::field_zone(f)?,
                storage,
                validity,
                dictionary,
            })
        })
        .collect()
}

/// The column `leaf` of the table at `root`; with `table_id` (the table's identity) and the
/// column's own, its superchunk files are checked to be this column's.
pub(super) fn build_column(
    storage: Arc<dyn Storage>,
    root: &Path,
    leaf: Leaf,
    table_id: Option<&str>,
) -> Result<Column> {
    let dir = PathBuf::from("data").join(&leaf.path);
    let st = &leaf.storage;
    if st.chunklen == 0 || st.superchunksize == 0 {
        return Err(Error::metadata(
            MetaPaths::new(root).storage(),
            format!(
                "column {}: chunklen and superchunksize must be positive",
                leaf.path
            ),
        ));
    }
    let engine = match leaf.stored_kind() {
        LeafKind::Fixed(dtype) => {
            st.compression.validate(dtype).map_err(|e| {
                Error::metadata(
                    MetaPaths::new(root).storage(),
                    format!("column {}: {e}", leaf.path),
                )
            })?;
            if (st.chunklen as u128) * (dtype.itemsize() as u128)
                > crate::blosc::MAX_BUFFERSIZE as u128
            {
                return Err(Error::metadata(
                    MetaPaths::new(root).storage(),
                    format!("column {}: chunks exceed Blosc's 2 GB limit", leaf.path),
                ));
            }
            Engine::Fixed(ArrayCore {
                store: ChunkStore::new(
                    storage,
                    root,
                    dir,
                    st.superchunksize,
                    st.checksum,
                    st.slack,
                    dtype.typesize() as u8,
                ),
                dtype,
                endian: st.endianness,
                chunkshape: vec![st.chunklen],
                compression: st.compression.clone(),
                fill: value_to_bytes(&st.dflt, dtype, Endianness::native())?,
            })
        }
        LeafKind::VarStr | LeafKind::VarBytes => {
            let mut store = ChunkStore::new(
                storage,
                root,
                dir,
                st.superchunksize,
                st.checksum,
                st.slack,
                1,
            );
            store.set_varlen(true);
            Engine::Var(VarCore {
                store,
                chunklen: st.chunklen,
                compression: st.compression.clone(),
            })
        }
    };
    let mut column = Column {
        leaf,
        engine,
        entries: dict::EntriesCache::default(),
    };
    if let (Some(t), Some(c)) = (table_id, column.leaf.storage.id.clone()) {
        match &mut column.engine {
            Engine::Fixed(core) => {
                core.store.bind(t, &c);
                core.store.set_stats(crate::stats::StatKind::of(core.dtype));
            }
            Engine::Var(v) => v.store.bind(t, &c),
        }
    }
    Ok(column)
}

pub(super) fn fill_items(leaf: &Leaf, n: usize) -> Vec<Vec<u8>> {
    let s = leaf.storage.dflt.as_str().unwrap_or("").as_bytes().to_vec();
    vec![s; n]
}
