//! Readers of bcolz carray and ctable root directories: chunk by chunk, or rows in order
//! across chunk boundaries, holding one chunk file and one decoded chunk at a time.

use super::chunk::{chunk_file_name, read_chunk_file, BLP_HEADER_LEN};
use super::meta::{self, CarrayMeta};
use crate::blosc;
use crate::dtype::{swap_bytes, Endianness};
use crate::error::{Error, Result};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// What a bcolz root directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A carray: `meta/`, `data/`, `__attrs__`.
    Carray,
    /// A ctable: `__rootdirs__`, `__attrs__` and one carray directory per column.
    Ctable,
}

/// Tells a ctable (it has `__rootdirs__`: the same test as bcolz's own `open`) from a carray
/// (it has `meta/sizes`).
///
/// # Errors
/// [`Error::InvalidArgument`] when `root` is neither.
pub fn detect(root: &Path) -> Result<Kind> {
    if root.join("__rootdirs__").is_file() {
        Ok(Kind::Ctable)
    } else if root.join("meta").join("sizes").is_file() {
        Ok(Kind::Carray)
    } else {
        Err(Error::InvalidArgument(format!(
            "{}: not a bcolz carray or ctable (neither __rootdirs__ nor meta/sizes is there)",
            root.display()
        )))
    }
}

/// A bcolz carray opened for reading.
///
/// `meta/sizes` is bcolz's commit point: the rows it counts are read, and chunk files past
/// them (left by appends that were never flushed, or by a shrink) are ignored.
#[derive(Debug)]
pub struct CarrayReader {
    root: PathBuf,
    meta: CarrayMeta,
    attrs: Map<String, Value>,
    /// The last chunk file read (blpk header and Blosc chunk).
    file: Vec<u8>,
    /// The last chunk decoded.
    decoded: Vec<u8>,
    /// Which chunk `decoded` holds.
    decoded_chunk: Option<u64>,
    /// Rows handed out by [`CarrayReader::read_rows`] so far.
    position: u64,
}

impl CarrayReader {
    /// Opens a carray root directory: reads and checks `meta/sizes`, `meta/storage` and
    /// `__attrs__`. Chunk files are read later, one at a time.
    ///
    /// # Errors
    /// [`Error::InvalidMetadata`] naming a missing or malformed file; [`Error::Unsupported`]
    /// for a dtype or compressor blz cannot handle.
    pub fn open(root: impl AsRef<Path>) -> Result<CarrayReader> {
        let root = root.as_ref().to_path_buf();
        let sizes_path = root.join("meta").join("sizes");
        let storage_path = root.join("meta").join("storage");
        let shape = meta::parse_sizes(&meta::read_json(&sizes_path)?, &sizes_path)?;
        let meta = meta::parse_storage(&meta::read_json(&storage_path)?, shape, &storage_path)?;
        let attrs = meta::read_attrs(&root.join("__attrs__"))?;
        Ok(CarrayReader {
            root,
            meta,
            attrs,
            file: Vec::new(),
            decoded: Vec::new(),
            decoded_chunk: None,
            position: 0,
        })
    }

    /// The carray's root directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Shape, dtype, chunk length, compression and default value.
    pub fn meta(&self) -> &CarrayMeta {
        &self.meta
    }

    /// The user attributes (`__attrs__`).
    pub fn attrs(&self) -> &Map<String, Value> {
        &self.attrs
    }

    /// The path of chunk file `i`.
    pub fn chunk_path(&self, i: u64) -> PathBuf {
        self.root.join("data").join(chunk_file_name(i))
    }

    /// Decodes chunk `i` and returns the bytes of its rows that belong to the carray
    /// (`chunk_rows(i)` rows, in the stored byte order).
    ///
    /// A full chunk must decode to exactly `chunklen` rows. The last, partial chunk (bcolz's
    /// "leftover") may decode to more rows than the carray counts, up to `chunklen`: rows
    /// appended after the last flush land there, and are not part of the carray.
    ///
    /// # Errors
    /// [`Error::ChunkOutOfRange`] for `i` past the last chunk; [`Error::InvalidChunk`] or
    /// [`Error::InvalidHeader`] naming the chunk file when it is missing, corrupt or of the
    /// wrong size.
    pub fn read_chunk(&mut self, i: u64) -> Result<&[u8]> {
        let nchunks = self.meta.nchunks();
        if i >= nchunks {
            return Err(Error::ChunkOutOfRange {
                path: self.root.join("data"),
                chunk: i,
                nchunks,
            });
        }
        let rows = self.meta.chunk_rows(i);
        let want = rows * self.meta.row_bytes();
        if self.decoded_chunk != Some(i) {
            self.decoded_chunk = None;
            let path = self.chunk_path(i);
            let header = read_chunk_file(&path, i, &mut self.file)?;
            let full = self.meta.chunk_bytes();
            let nbytes = u64::from(header.nbytes);
            let ok = if rows == self.meta.chunklen {
                nbytes == full
            } else {
                nbytes >= want && nbytes <= full
            };
            if !ok {
                return Err(Error::chunk(
                    &path,
                    i,
                    format!(
                        "decodes to {nbytes} bytes; {} rows of {} bytes ({}) expected{}",
                        rows,
                        self.meta.row_bytes(),
                        if rows == self.meta.chunklen {
                            format!("{full}")
                        } else {
                            format!("{want} to {full}")
                        },
                        " (does meta/storage name the dtype the chunks were written with?)"
                    ),
                ));
            }
            let chunk = self.file.get(BLP_HEADER_LEN..).unwrap_or_default();
            blosc::decompress_to_vec(chunk, &mut self.decoded, 1)
                .map_err(|e| Error::chunk(&path, i, e.0))?;
            self.decoded_chunk = Some(i);
        }
        Ok(self.decoded.get(..want as usize).unwrap_or_default())
    }

    /// Rows read so far by [`CarrayReader::read_rows`].
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Appends the next `rows` rows (fewer at the end of the carray) to `out`, converted to
    /// this machine's byte order, and returns how many were read. Reads the carray in order
    /// across chunk boundaries, one chunk file at a time.
    ///
    /// # Errors
    /// As [`CarrayReader::read_chunk`].
    pub fn read_rows(&mut self, rows: u64, out: &mut Vec<u8>) -> Result<u64> {
        let rb = self.meta.row_bytes();
        let end = self.position.saturating_add(rows).min(self.meta.len());
        let first = out.len();
        let n = end - self.position;
        out.reserve((n * rb) as usize);
        while self.position < end {
            let c = self.position / self.meta.chunklen;
            let in_chunk = self.position - c * self.meta.chunklen;
            let take = (end - self.position).min(self.meta.chunk_rows(c) - in_chunk);
            let bytes = self.read_chunk(c)?;
            let from = (in_chunk * rb) as usize;
            let to = from + (take * rb) as usize;
            out.extend_from_slice(bytes.get(from..to).unwrap_or_default());
            self.position += take;
        }
        if self.meta.endianness != Endianness::native() {
            if let Some(new) = out.get_mut(first..) {
                swap_bytes(new, self.meta.dtype.swap_unit());
            }
        }
        Ok(n)
    }
}

/// A bcolz ctable opened for reading: one [`CarrayReader`] per column.
#[derive(Debug)]
pub struct CtableReader {
    root: PathBuf,
    names: Vec<String>,
    columns: Vec<CarrayReader>,
    attrs: Map<String, Value>,
}

impl CtableReader {
    /// Opens a ctable root directory: `__rootdirs__`, `__attrs__` and every column's carray
    /// metadata. Every column must be one-dimensional and all must have the same length.
    ///
    /// # Errors
    /// As [`CarrayReader::open`] for each column; [`Error::InvalidMetadata`] for a bad
    /// `__rootdirs__` or columns of different lengths; [`Error::Unsupported`] for a column
    /// of more than one dimension.
    pub fn open(root: impl AsRef<Path>) -> Result<CtableReader> {
        let root = root.as_ref().to_path_buf();
        let rootdirs = root.join("__rootdirs__");
        let names = meta::parse_rootdirs(&meta::read_json(&rootdirs)?, &rootdirs)?;
        let mut columns: Vec<CarrayReader> = Vec::with_capacity(names.len());
        for name in &names {
            let col = CarrayReader::open(root.join(name))?;
            let sizes = col.path().join("meta").join("sizes");
            if col.meta().shape.len() != 1 {
                return Err(Error::unsupported(
                    sizes,
                    format!(
                        "column {name:?} has shape {:?}: blz table columns are one-dimensional",
                        col.meta().shape
                    ),
                ));
            }
            if let Some(first) = columns.first() {
                if first.meta().len() != col.meta().len() {
                    return Err(Error::metadata(
                        sizes,
                        format!(
                            "column {name:?} has {} rows, column {:?} has {}",
                            col.meta().len(),
                            names[0],
                            first.meta().len()
                        ),
                    ));
                }
            }
            columns.push(col);
        }
        let attrs = meta::read_attrs(&root.join("__attrs__"))?;
        Ok(CtableReader {
            root,
            names,
            columns,
            attrs,
        })
    }

    /// The ctable's root directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Column names in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Number of rows (every column has this many).
    pub fn len(&self) -> u64 {
        self.columns.first().map_or(0, |c| c.meta().len())
    }

    /// True when the ctable has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The columns' readers, in the order of [`CtableReader::names`].
    pub fn columns(&self) -> &[CarrayReader] {
        &self.columns
    }

    /// The columns' readers, mutable (to read rows).
    pub fn columns_mut(&mut self) -> &mut [CarrayReader] {
        &mut self.columns
    }

    /// The ctable's user attributes (`__attrs__` at its root).
    pub fn attrs(&self) -> &Map<String, Value> {
        &self.attrs
    }
}
