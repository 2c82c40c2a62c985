//! Importing bcolz carrays into blz datasets and ctables into blz tables, through blz's
//! ordinary create and append calls (so every batch is committed by blz's journal).

use super::reader::{CarrayReader, CtableReader};
use crate::array::{CreateOptions, Dataset};
use crate::blpk::Checksum;
use crate::error::{Error, Result};
use crate::meta::Compression;
use crate::storage;
use crate::table::{check_name, ColumnOptions, Field, Table, TableOptions, Values};
use std::path::{Path, PathBuf};

/// Bytes of rows read and appended at a time unless [`ImportOptions::batch_bytes`] says
/// otherwise.
pub const DEFAULT_BATCH_BYTES: u64 = 16 << 20;

/// How an import lays out the new dataset. `Default` carries over bcolz's own settings.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Replace an existing blz dataset at the destination.
    pub overwrite: bool,
    /// Rows per chunk (default: bcolz's `chunklen`, per column for a ctable).
    pub chunklen: Option<u64>,
    /// Compression (default: bcolz's codec, level and shuffle).
    pub compression: Option<Compression>,
    /// Digest after each chunk (default crc32).
    pub checksum: Checksum,
    /// Uncompressed bytes read and appended per batch (rounded up to whole chunks); memory
    /// use is about this plus one chunk per column.
    pub batch_bytes: u64,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            overwrite: false,
            chunklen: None,
            compression: None,
            checksum: Checksum::Crc32,
            batch_bytes: DEFAULT_BATCH_BYTES,
        }
    }
}

/// Refuses a destination that is the source, inside it, or holds it: writing there would
/// change (or, with `overwrite`, remove) the data being read.
fn check_apart(src: &Path, dst: &Path) -> Result<()> {
    let src = std::fs::canonicalize(src).map_err(|e| Error::io("open", src, e))?;
    let dst_abs = match std::fs::canonicalize(dst) {
        Ok(p) => p,
        Err(_) => {
            let parent = match dst.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            match (std::fs::canonicalize(parent), dst.file_name()) {
                (Ok(p), Some(name)) => p.join(name),
                _ => return Ok(()),
            }
        }
    };
    if dst_abs.starts_with(&src) || src.starts_with(&dst_abs) {
        return Err(Error::InvalidArgument(format!(
            "{} and {} overlap: import into a directory outside the bcolz directory",
            dst.display(),
            src.display()
        )));
    }
    Ok(())
}

/// Rows per batch: about `batch_bytes`, at least one row, rounded up to whole `chunk` rows.
fn batch_rows(batch_bytes: u64, row_bytes: u64, chunk: u64) -> u64 {
    let rows = (batch_bytes / row_bytes.max(1)).max(1);
    rows.div_ceil(chunk.max(1)).saturating_mul(chunk.max(1))
}

/// Imports the bcolz carray at `src` into a new blz dataset at `dst`, with the same shape,
/// dtype and byte order, bcolz's chunk length as the chunkshape along axis 0 (other axes
/// whole), its compression settings and default value as the fill value, and `__attrs__` as
/// the dataset's attributes.
///
/// # Errors
/// As [`import_carray_with`].
pub fn import_carray(
    src: impl AsRef<Path>,
    dst: impl AsRef<Path>,
    opts: &ImportOptions,
) -> Result<Dataset> {
    import_carray_with(src, dst, opts, |_, _| {})
}

/// As [`import_carray`], calling `progress(rows_done, rows_total)` after every batch.
///
/// Memory stays at about [`ImportOptions::batch_bytes`] plus one chunk, whatever the size of
/// the carray. Everything bcolz wrote is checked first (metadata) or as it is read (chunk
/// files); on any error the new dataset is removed.
///
/// # Errors
/// [`Error::InvalidMetadata`], [`Error::InvalidHeader`] or [`Error::InvalidChunk`] naming
/// the bcolz file at fault; [`Error::Unsupported`] for a dtype or compressor blz cannot
/// hold; [`Error::InvalidArgument`] when `dst` exists (without `overwrite`) or overlaps
/// `src`; I/O errors.
pub fn import_carray_with(
    src: impl AsRef<Path>,
    dst: impl AsRef<Path>,
    opts: &ImportOptions,
    mut progress: impl FnMut(u64, u64),
) -> Result<Dataset> {
    let (src, dst) = (src.as_ref(), dst.as_ref());
    let mut reader = CarrayReader::open(src)?;
    check_apart(src, dst)?;
    let m = reader.meta().clone();
    let chunklen = opts.chunklen.unwrap_or(m.chunklen);
    let mut chunkshape = m.shape.clone();
    chunkshape[0] = chunklen;
    let compression = match &opts.compression {
        Some(c) => c.clone(),
        None => m
            .cparams
            .to_compression(&src.join("meta").join("storage"))?,
    };
    let create = CreateOptions {
        chunkshape: Some(chunkshape),
        compression,
        checksum: opts.checksum,
        fill: m.dflt.clone(),
        endianness: m.endianness,
        expectedlen: Some(m.expectedlen.unwrap_or(0).max(m.len())),
        attributes: reader.attrs().clone(),
        overwrite: opts.overwrite,
        ..Default::default()
    };
    let mut shape0 = m.shape.clone();
    shape0[0] = 0;
    let total = m.len();
    let step = batch_rows(opts.batch_bytes, m.row_bytes(), chunklen);
    progress(0, total);
    let batches = std::iter::from_fn(|| {
        if reader.position() >= total {
            return None;
        }
        let mut buf = Vec::new();
        Some(reader.read_rows(step, &mut buf).map(|_| {
            progress(reader.position(), total);
            buf
        }))
    });
    // One step: built beside `dst` and renamed into place when complete.
    let (s, dst) = storage::for_path(dst)?;
    Dataset::create_from(s, &dst, m.dtype, &shape0, &create, batches)
}

/// Imports the bcolz ctable at `src` into a new blz table at `dst`: one column per bcolz
/// column, in order, each with its dtype, chunk length, compression and default value; the
/// ctable's `__attrs__` become the table's attributes. Attributes set on single columns
/// (each column's own `__attrs__`), when there are any, are kept under the table attribute
/// `bcolz_column_attrs` (an object keyed by column name).
///
/// # Errors
/// As [`import_ctable_with`].
pub fn import_ctable(
    src: impl AsRef<Path>,
    dst: impl AsRef<Path>,
    opts: &ImportOptions,
) -> Result<Table> {
    import_ctable_with(src, dst, opts, |_, _| {})
}

/// As [`import_ctable`], calling `progress(rows_done, rows_total)` after every batch. Each
/// batch is appended to every column in one blz commit.
///
/// # Errors
/// As [`import_carray_with`]; also [`Error::Unsupported`] for a column name blz reserves
/// (starting with `__`) or a column of more than one dimension.
pub fn import_ctable_with(
    src: impl AsRef<Path>,
    dst: impl AsRef<Path>,
    opts: &ImportOptions,
    mut progress: impl FnMut(u64, u64),
) -> Result<Table> {
    let (src, dst) = (src.as_ref(), dst.as_ref());
    let mut reader = CtableReader::open(src)?;
    check_apart(src, dst)?;
    let mut fields = Vec::with_capacity(reader.names().len());
    let mut column_attrs = serde_json::Map::new();
    for (name, col) in reader.names().iter().zip(reader.columns()) {
        check_name(name).map_err(|e| {
            Error::unsupported(
                src.join("__rootdirs__"),
                match e {
                    Error::InvalidArgument(m) => m,
                    other => other.to_string(),
                },
            )
        })?;
        let m = col.meta();
        let compression = match &opts.compression {
            Some(c) => c.clone(),
            None => m
                .cparams
                .to_compression(&col.path().join("meta").join("storage"))?,
        };
        fields.push(Field::new(name, m.dtype).with_options(ColumnOptions {
            compression: Some(compression),
            chunklen: Some(opts.chunklen.unwrap_or(m.chunklen)),
            checksum: Some(opts.checksum),
            fill: Some(m.dflt.clone()),
            ..Default::default()
        }));
        if !col.attrs().is_empty() {
            column_attrs.insert(name.clone(), col.attrs().clone().into());
        }
    }
    let mut attributes = reader.attrs().clone();
    if !column_attrs.is_empty() {
        attributes.insert("bcolz_column_attrs".into(), column_attrs.into());
    }
    let total = reader.len();
    let topts = TableOptions {
        expectedlen: Some(total),
        attributes,
        overwrite: opts.overwrite,
        ..Default::default()
    };
    let row_bytes: u64 = reader.columns().iter().map(|c| c.meta().row_bytes()).sum();
    let widest = reader
        .columns()
        .iter()
        .map(|c| opts.chunklen.unwrap_or(c.meta().chunklen))
        .max()
        .unwrap_or(1);
    let step = batch_rows(opts.batch_bytes, row_bytes, widest);
    let names: Vec<String> = reader.names().to_vec();
    let mut done = 0;
    progress(0, total);
    let batches = std::iter::from_fn(|| {
        if done >= total {
            return None;
        }
        let batch = (|| -> Result<Vec<(String, Values)>> {
            let mut cols = Vec::with_capacity(names.len());
            let mut n = 0;
            for (name, col) in names.iter().zip(reader.columns_mut()) {
                let mut data = Vec::new();
                n = col.read_rows(step, &mut data)?;
                cols.push((
                    name.clone(),
                    Values::Fixed {
                        dtype: col.meta().dtype,
                        data,
                    },
                ));
            }
            if n == 0 {
                return Err(Error::metadata(
                    src.join("__rootdirs__"),
                    format!("the columns end after {done} of {total} rows"),
                ));
            }
            done += n;
            progress(done, total);
            Ok(cols)
        })();
        Some(batch)
    });
    // One step: built beside `dst` and renamed into place when complete.
    let (s, dst) = storage::for_path(dst)?;
    Table::create_from(s, &dst, fields, &topts, batches)
}
