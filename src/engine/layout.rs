//! The layout of one chunked store (`meta/storage` of an array or a table column): the
//! options a user gives, the defaults blz picks, checks of a stored layout, and the
//! [`ArrayCore`] that serves it.

use super::chunks::ChunkStore;
use super::core::ArrayCore;
use crate::blpk::Checksum;
use crate::dtype::{value_to_bytes, DType, Endianness};
use crate::error::{Error, Result};
use crate::meta::{self, ArrayStorage, Compression, FORMAT_NAME, FORMAT_VERSION};
use crate::storage::Storage;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Chunk size blz aims for when the caller gives no chunkshape.
pub const DEFAULT_CHUNK_BYTES: u64 = 1 << 20;

/// Smallest chunk blz picks by itself, however small the data: tiny chunks cost a Blosc
/// header, a digest and an offset each and compress poorly, and a small dataset may be
/// appended to later. (zarr's own guess never goes below 128 KiB.)
pub const MIN_DEFAULT_CHUNK_BYTES: u64 = 64 << 10;

/// Superchunk file size blz aims for (large enough that a distributed filesystem spreads
/// files, small enough that a modify or shrink touches little).
pub const DEFAULT_SUPERCHUNK_BYTES: u64 = 64 << 20;

/// The most bytes the elements of an array (or a table column) may take: numpy's own limit,
/// an `intp` (signed 64-bit) count of bytes. Shapes past it are refused when they are
/// given (create, append, resize) and when they are read from `meta/sizes`.
pub const MAX_ARRAY_BYTES: u64 = i64::MAX as u64;

/// The most chunks one operation writes to fill new elements (a create with a shape, a
/// resize that grows). blz stores every chunk, those holding only the fill value too (it
/// keeps no sparse chunks), so a grow costs time and disk in proportion to the chunks it
/// adds: past this many (about 50 MB of stored fill chunks and a few seconds), it is
/// refused with an error that says so, rather than running for hours.
pub const MAX_FILL_CHUNKS: u64 = 1 << 20;

/// Elements in `shape` and the bytes they take at `itemsize`, or an error naming `what`
/// (a file, or the operation) when numpy could not hold the shape: as numpy's own check
/// (`PyArray_NewFromDescr`), the itemsize times the product of the *nonzero* extents must
/// fit in an `intp` ([`MAX_ARRAY_BYTES`]), so an extent past `i64::MAX` is refused even
/// beside a zero (`np.empty((0, 2**63))` raises), and so is `(0, 2**40, 2**40)`.
pub(crate) fn shape_bytes(shape: &[u64], itemsize: u64, what: &str) -> Result<(u64, u64)> {
    let nonzero = shape
        .iter()
        .filter(|&&n| n != 0)
        .try_fold(itemsize.max(1), |a, &n| a.checked_mul(n));
    let elems = shape.iter().try_fold(1u64, |a, &n| a.checked_mul(n));
    let bytes = elems.and_then(|e| e.checked_mul(itemsize));
    match (nonzero, elems, bytes) {
        (Some(nz), Some(e), Some(b)) if nz <= MAX_ARRAY_BYTES => Ok((e, b)),
        _ => Err(Error::InvalidArgument(format!(
            "{what}: shape {shape:?} of {itemsize}-byte elements is more than an array can \
             hold: its itemsize times the product of its nonzero extents is {} bytes, past \
             numpy's limit of {MAX_ARRAY_BYTES}",
            shape
                .iter()
                .filter(|&&n| n != 0)
                .fold(u128::from(itemsize.max(1)), |a, &n| a
                    .saturating_mul(u128::from(n)))
        ))),
    }
}

/// Chunks of `chunkshape` that cover `shape`, or `None` when the count overflows.
pub(crate) fn chunk_count(shape: &[u64], chunkshape: &[u64]) -> Option<u64> {
    shape
        .iter()
        .zip(chunkshape)
        .try_fold(1u64, |a, (&n, &c)| a.checked_mul(n.div_ceil(c.max(1))))
}

/// Checks that growing a store from `old` to `new` chunks (filling them) stays within
/// [`MAX_FILL_CHUNKS`]; `what` names the operation and the dataset.
pub(crate) fn check_fill_chunks(old: u64, new: Option<u64>, what: &str) -> Result<()> {
    match new.map(|n| n.saturating_sub(old)) {
        Some(add) if add <= MAX_FILL_CHUNKS => Ok(()),
        add => Err(Error::InvalidArgument(format!(
            "{what} would write {} new chunks of the fill value; blz stores every chunk \
             (it keeps no sparse chunks) and writes at most {MAX_FILL_CHUNKS} in one \
             operation: choose larger chunks, or grow in steps",
            add.map_or_else(|| "more than 2^64".to_string(), |a| a.to_string())
        ))),
    }
}

/// The most rows one table resize adds (each column's new rows are built in memory, as
/// the fill value's items for a variable-length column): about 100 MB at most.
pub const MAX_TABLE_FILL_ROWS: u64 = 1 << 22;

/// Chunks a grow fills per step of one transaction (see `Dataset::resize`): the list of
/// chunks one step writes is built whole, so steps keep it small.
pub(crate) const GROW_STEP_CHUNKS: u64 = 4096;

/// Checks that an array of `dtype` and `shape` can exist: its elements take at most
/// [`MAX_ARRAY_BYTES`]. Returns the bytes they take.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the shape and the limit.
pub fn check_shape(dtype: DType, shape: &[u64]) -> Result<u64> {
    shape_bytes(shape, dtype.itemsize() as u64, "shape").map(|(_, b)| b)
}

/// How a new dataset is laid out. `Default` gives good choices for most data.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// Extent of a chunk on each axis; `None` picks one near [`DEFAULT_CHUNK_BYTES`].
    pub chunkshape: Option<Vec<u64>>,
    /// Chunks per superchunk file; `None` picks files near [`DEFAULT_SUPERCHUNK_BYTES`] (on
    /// an object store, near its [`file_bytes`](crate::storage::Storage::file_bytes)).
    pub superchunksize: Option<u64>,
    /// Compression (default: lz4, clevel 5, shuffle).
    pub compression: Compression,
    /// Digest after each chunk (default crc32: hardware-accelerated).
    pub checksum: Checksum,
    /// Bytes reserved after each chunk so modified chunks can be rewritten in place (default
    /// 0: plain files bloscpack can read).
    pub slack: u32,
    /// Fill value for padding and growth (default: zero, false or empty).
    pub fill: serde_json::Value,
    /// Byte order of the stored elements (default: this machine's).
    pub endianness: Endianness,
    /// Expected number of rows (axis 0); sizes chunks and files when the initial shape is
    /// small.
    pub expectedlen: Option<u64>,
    /// Initial user attributes.
    pub attributes: serde_json::Map<String, serde_json::Value>,
    /// Replace an existing dataset at the path.
    pub overwrite: bool,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            chunkshape: None,
            superchunksize: None,
            compression: Compression::default(),
            checksum: Checksum::Crc32,
            slack: 0,
            fill: serde_json::Value::Null,
            endianness: Endianness::native(),
            expectedlen: None,
            attributes: serde_json::Map::new(),
            overwrite: false,
        }
    }
}

/// Chooses a chunkshape of about `target` bytes: inner axes are kept whole while a row fits,
/// otherwise halved from the outermost inner axis; axis 0 takes the rest, but no more than
/// the expected rows (rounded up to a power of two) when they are known (non-zero), and
/// never fewer rows than make [`MIN_DEFAULT_CHUNK_BYTES`]: a dataset created small and then
/// appended to must not be left with chunks of a few bytes each.
fn default_chunkshape(shape: &[u64], itemsize: u64, expected_rows: u64, target: u64) -> Vec<u64> {
    let mut cs: Vec<u64> = shape.iter().map(|&n| n.max(1)).collect();
    let budget = (target / itemsize.max(1)).max(1);
    // Shrink inner axes until one row of chunks fits in the budget.
    let mut inner: u64 = cs[1..].iter().product();
    let mut ax = 1;
    while inner > budget && ax < cs.len() {
        while cs[ax] > 1 && inner > budget {
            cs[ax] = cs[ax].div_ceil(2);
            inner = cs[1..].iter().product();
        }
        ax += 1;
    }
    let rows = (budget / inner.max(1)).max(1);
    // With no expected length the dataset is assumed to grow: chunks get the full budget.
    let want = match expected_rows.max(shape[0]) {
        0 => u64::MAX,
        n => n.checked_next_power_of_two().unwrap_or(u64::MAX),
    };
    let floor = (MIN_DEFAULT_CHUNK_BYTES / (inner.max(1) * itemsize.max(1))).max(1);
    cs[0] = rows.min(want).max(floor.min(rows));
    cs
}

pub(crate) fn validate_storage_meta(meta: &ArrayStorage, path: &Path) -> Result<()> {
    let bad = |r: String| Err(Error::metadata(path, r));
    if meta.format != FORMAT_NAME {
        return bad(format!("format {:?} is not {FORMAT_NAME:?}", meta.format));
    }
    if meta.version != FORMAT_VERSION {
        return bad(format!(
            "layout version {} (blz reads {FORMAT_VERSION})",
            meta.version
        ));
    }
    if meta.order != "C" {
        return bad(format!("order {:?} (blz stores C order)", meta.order));
    }
    if meta.chunkshape.is_empty() || meta.chunkshape.contains(&0) {
        return bad(format!(
            "chunkshape {:?} has an empty axis",
            meta.chunkshape
        ));
    }
    let chunk_bytes = meta
        .chunkshape
        .iter()
        .try_fold(meta.dtype.itemsize() as u64, |a, &c| a.checked_mul(c));
    if chunk_bytes.is_none_or(|b| b > crate::blosc::MAX_BUFFERSIZE as u64) {
        return bad(format!(
            "chunks of {:?} elements exceed Blosc's 2 GB limit",
            meta.chunkshape
        ));
    }
    if meta.superchunksize == 0 || meta.superchunksize > 1 << 24 {
        return bad(format!(
            "superchunksize {} out of range",
            meta.superchunksize
        ));
    }
    meta.compression
        .validate(meta.dtype)
        .map_err(|e| Error::metadata(path, e.to_string()))?;
    value_to_bytes(&meta.dflt, meta.dtype, meta.endianness)
        .map_err(|e| Error::metadata(path, e.to_string()))?;
    Ok(())
}

/// The superchunk file size a new dataset on `storage` aims for when its creator names no
/// superchunk size.
pub(crate) fn file_bytes(storage: &dyn Storage) -> u64 {
    storage
        .file_bytes()
        .unwrap_or(DEFAULT_SUPERCHUNK_BYTES)
        .max(1)
}

/// The layout of a new array dataset from `opts`; `file_bytes` is the superchunk file size
/// aimed for when `opts` names no superchunk size (the storage's
/// [`file_bytes`](crate::storage::Storage::file_bytes), else [`DEFAULT_SUPERCHUNK_BYTES`]).
pub(crate) fn build_storage_meta(
    dtype: DType,
    shape: &[u64],
    opts: &CreateOptions,
    file_bytes: u64,
) -> Result<ArrayStorage> {
    if shape.is_empty() {
        return Err(Error::InvalidArgument(
            "a dataset needs at least one axis".into(),
        ));
    }
    let itemsize = dtype.itemsize() as u64;
    let expected = opts.expectedlen.unwrap_or(shape[0]).max(shape[0]);
    let chunkshape = match &opts.chunkshape {
        Some(c) => {
            if c.len() != shape.len() || c.contains(&0) {
                return Err(Error::InvalidArgument(format!(
                    "chunkshape {c:?} does not fit shape {shape:?} (same rank, no zero)"
                )));
            }
            c.clone()
        }
        None => {
            let small = expected > 0
                && expected * shape[1..].iter().product::<u64>() * itemsize
                    < DEFAULT_CHUNK_BYTES * 4;
            let target = if small {
                (DEFAULT_CHUNK_BYTES / 16).max(itemsize)
            } else {
                DEFAULT_CHUNK_BYTES
            };
            default_chunkshape(shape, itemsize, expected, target)
        }
    };
    if shape[1..].contains(&0) {
        return Err(Error::InvalidArgument(format!(
            "shape {shape:?}: only axis 0 may be empty"
        )));
    }
    let chunk_bytes = chunkshape.iter().product::<u64>() * itemsize;
    let superchunksize = opts
        .superchunksize
        .unwrap_or_else(|| (file_bytes / chunk_bytes.max(1)).clamp(1, 4096));
    let fill = if opts.fill.is_null() {
        match dtype {
            DType::Bool => serde_json::json!(false),
            DType::Bytes(_) | DType::Str(_) => serde_json::json!(""),
            DType::F16 | DType::F32 | DType::F64 => serde_json::json!(0.0),
            DType::C64 | DType::C128 => serde_json::json!([0.0, 0.0]),
            _ => serde_json::json!(0),
        }
    } else {
        opts.fill.clone()
    };
    let meta = ArrayStorage {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        dtype,
        endianness: opts.endianness,
        order: "C".into(),
        chunkshape,
        superchunksize,
        compression: opts.compression.clone(),
        checksum: opts.checksum,
        slack: opts.slack,
        dflt: fill,
        expectedlen: expected,
        id: Some(meta::new_id()),
    };
    validate_storage_meta(&meta, Path::new("meta/storage"))
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    Ok(meta)
}

pub(crate) fn make_core(
    storage: Arc<dyn Storage>,
    root: &Path,
    dir: PathBuf,
    meta: &ArrayStorage,
) -> Result<ArrayCore> {
    let fill = value_to_bytes(&meta.dflt, meta.dtype, Endianness::native())?;
    let mut store = ChunkStore::new(
        storage,
        root,
        dir,
        meta.superchunksize,
        meta.checksum,
        meta.slack,
        meta.dtype.typesize() as u8,
    );
    if let Some(id) = &meta.id {
        store.bind(id, "data");
        store.set_stats(crate::stats::StatKind::of(meta.dtype));
    }
    Ok(ArrayCore {
        store,
        dtype: meta.dtype,
        endian: meta.endianness,
        chunkshape: meta.chunkshape.clone(),
        compression: meta.compression.clone(),
        fill,
    })
}

/// Reads every chunk of a store, collecting errors (see [`verify_files`]).
///
/// With `stats` (the store's shape, when `meta/sizes` vouches for its statistics), each
/// chunk's recorded statistics are checked to bound its visible values.
pub(crate) fn verify_store(
    core: &ArrayCore,
    n: u64,
    stats: Option<&[u64]>,
    progress: &mut dyn FnMut(u64, u64),
) -> Vec<Error> {
    let recorded = stats
        .filter(|_| core.store.stats_kind().is_some())
        .map(|shape| (shape, core.store.chunk_stats(n, true).unwrap_or_default()));
    verify_files(&core.store, n, progress, &mut |chunks, errors, progress| {
        verify_chunks(core, chunks, n, recorded.as_ref(), errors, progress)
    })
}

/// Checks that chunk `k`'s recorded statistics bound the visible values of `chunk` (decoded,
/// native order) in a store of `shape`.
fn check_stats(
    core: &ArrayCore,
    k: u64,
    chunk: &[u8],
    shape: &[u64],
    recorded: Option<&crate::stats::ChunkStats>,
) -> Option<Error> {
    let recorded = recorded?;
    let grid = core.grid(shape);
    let mut rem = k;
    let mut valid = vec![0u64; grid.len()];
    for ax in (0..grid.len()).rev() {
        let c = rem % grid[ax].max(1);
        rem /= grid[ax].max(1);
        let cs = core.chunkshape[ax];
        valid[ax] = shape[ax].saturating_sub(c * cs).min(cs);
    }
    let actual = crate::stats::chunk_stats(core.dtype, chunk, &core.chunkshape, &valid)?;
    let (f, j) = (
        k / core.store.superchunksize(),
        k % core.store.superchunksize(),
    );
    // The sums record how many values the chunk showed when it was written; every write
    // that adds visible elements to a chunk writes it again, so fewer than the size shows
    // means `meta/sizes` claims elements no writer wrote (the chunk's padding). More is a
    // shrink's: it leaves the chunk as it was.
    if let (Some(r), Some(a)) = (recorded.sum, actual.sum) {
        if r.count < a.count {
            return Some(Error::chunk(
                core.store.file_path(f),
                j,
                format!(
                    "its statistics count {} values, but meta/sizes makes {} of its elements \
                     visible: the size claims elements no writer wrote",
                    r.count, a.count
                ),
            ));
        }
    }
    (!crate::stats::bounds(recorded, &actual)).then(|| {
        Error::chunk(
            core.store.file_path(f),
            j,
            format!("recorded statistics {recorded:?} do not bound the chunk's values {actual:?}"),
        )
    })
}

/// Checks the chunks `range` (of one superchunk file) into the errors, reporting progress.
pub(crate) type FileCheck<'a> =
    dyn FnMut(std::ops::Range<u64>, &mut Vec<Error>, &mut dyn FnMut(u64, u64)) + 'a;

/// Runs `file` (which checks a range of one superchunk file's chunks into the errors) over
/// the files holding a store's `n` chunks. Files are taken from one listing of the store's
/// directory: of a run of files the listing does not show, the first is checked (its own
/// error is reported) and the rest are one error naming the next and how many follow; a
/// file holding fewer chunks than the size needs is one error, and only the chunks it holds
/// are checked. So a store whose sizes name far more chunks than it has is reported at once.
pub(crate) fn verify_files(
    store: &ChunkStore,
    n: u64,
    progress: &mut dyn FnMut(u64, u64),
    file: &mut FileCheck<'_>,
) -> Vec<Error> {
    let ss = store.superchunksize();
    let nfiles = store.nfiles(n);
    let present = match store.present_files() {
        Ok(p) => p,
        Err(e) => return vec![e],
    };
    let mut errors = Vec::new();
    let mut f = 0;
    while f < nfiles {
        let next = if present.contains(&f) {
            f + 1
        } else {
            present
                .range(f..)
                .next()
                .copied()
                .unwrap_or(nfiles)
                .min(nfiles)
        };
        let first = f * ss;
        let mut end = (first + ss).min(n);
        if let Ok(r) = store.reader(f) {
            let held = r.nchunks();
            if held < end - first {
                errors.push(Error::header(
                    store.file_path(f),
                    format!(
                        "holds {held} chunks, the dataset's size needs {}",
                        end - first
                    ),
                ));
                end = first + held;
            }
        }
        file(first..end, &mut errors, progress);
        if next - f > 1 {
            errors.push(Error::header(
                store.file_path(f + 1),
                format!("missing, and the {} files after it", next - f - 2),
            ));
        }
        progress(next.saturating_mul(ss).min(n), n);
        f = next;
    }
    errors
}

/// Reads the chunks `chunks` (of one superchunk file) of a store holding `n` chunks into
/// `errors`.
fn verify_chunks(
    core: &ArrayCore,
    chunks: std::ops::Range<u64>,
    n: u64,
    stats: Option<&(&[u64], Vec<Option<crate::stats::ChunkStats>>)>,
    errors: &mut Vec<Error>,
    progress: &mut dyn FnMut(u64, u64),
) {
    use rayon::prelude::*;
    let mut k = chunks.start;
    let end = chunks.end.min(n);
    while k < end {
        let stop = (k + 64).min(end);
        let errs: Vec<Error> = (k..stop)
            .into_par_iter()
            .filter_map(|i| {
                let mut buf = Vec::new();
                let mut out = vec![0u8; core.chunk_len() * core.itemsize()];
                match core.decode_chunk_into(i, &mut out, &mut buf) {
                    Err(e) => Some(e),
                    Ok(()) => stats.and_then(|(shape, rec)| {
                        check_stats(core, i, &out, shape, rec.get(i as usize)?.as_ref())
                    }),
                }
            })
            .collect();
        // A file that does not open fails every chunk the same way: report it once.
        let whole_file = errs.len() as u64 == stop - k
            && errs.iter().all(|e| {
                !matches!(
                    e,
                    Error::InvalidChunk { .. }
                        | Error::ChecksumMismatch { .. }
                        | Error::ChunkOutOfRange { .. }
                )
            });
        if whole_file {
            errors.extend(errs.into_iter().take(1));
            progress(end, n);
            return;
        }
        errors.extend(errs);
        progress(stop, n);
        k = stop;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunkshape(dtype: DType, shape: &[u64], expectedlen: Option<u64>) -> Vec<u64> {
        let opts = CreateOptions {
            expectedlen,
            ..Default::default()
        };
        build_storage_meta(dtype, shape, &opts, DEFAULT_SUPERCHUNK_BYTES)
            .unwrap()
            .chunkshape
    }

    #[test]
    fn default_chunks_are_about_a_mebibyte_unless_the_data_stays_small() {
        // Unknown length: rows will be appended, so full-size chunks.
        assert_eq!(chunkshape(DType::F64, &[0], None), vec![131_072]);
        assert_eq!(chunkshape(DType::F64, &[0, 1000], None), vec![131, 1000]);
        assert_eq!(chunkshape(DType::U8, &[0], Some(0)), vec![1 << 20]);
        // Known and large.
        assert_eq!(
            chunkshape(DType::F64, &[0], Some(100_000_000)),
            vec![131_072]
        );
        // Known and small: small chunks, but never below 64 KiB, so that a dataset created
        // small and appended to later does not get chunks of a few bytes.
        assert_eq!(chunkshape(DType::F64, &[0], Some(1000)), vec![8192]);
        assert_eq!(chunkshape(DType::F64, &[10], None), vec![8192]);
        assert_eq!(chunkshape(DType::F64, &[1], None), vec![8192]);
        assert_eq!(chunkshape(DType::F64, &[0], Some(100_000)), vec![8192]);
        assert_eq!(chunkshape(DType::F64, &[3, 100], None), vec![81, 100]);
        assert_eq!(chunkshape(DType::U8, &[2, 100_000], None), vec![1, 50_000]);
    }
}
