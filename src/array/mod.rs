//! N-d array datasets: a directory `root/` with `data/__N__.bin` superchunk files and
//! `meta/{sizes,storage,attributes}`, opened like an ndarray.
//!
//! ```no_run
//! use blz::{Dataset, DType};
//! use ndarray::{s, Array1};
//! # fn main() -> blz::Result<()> {
//! let mut ds = Dataset::create("temps.blz", DType::F64, &[0])?;
//! ds.append(&Array1::linspace(0.0, 1.0, 1_000_000).into_dyn().view())?;
//! let part = ds.slice::<f64, _>(s![10..20;2])?;
//! assert_eq!(part.len(), 5);
//! # Ok(()) }
//! ```

mod buffer;
pub(crate) mod chunks;
mod core;
pub mod select;

pub use self::chunks::superchunk_name;
pub(crate) use self::chunks::{ChunkStore, ChunkWrites};
pub(crate) use self::core::{ArrayCore, Source};

use crate::blpk::Checksum;
use crate::dtype::{value_to_bytes, DType, Element, Endianness};
use crate::error::{Error, Result};
use crate::meta::{self, ArrayStorage, Compression, MetaPaths, Sizes, FORMAT_NAME, FORMAT_VERSION};
use crate::staging::Staging;
use crate::storage::{self, Storage};
use crate::txn::{self, Txn};
use ndarray::{ArrayD, ArrayViewD, IxDyn, SliceInfoElem};
use select::AxisSel;
use std::borrow::Cow;
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

/// How a new dataset is laid out. `Default` gives good choices for most data.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// Extent of a chunk on each axis; `None` picks one near [`DEFAULT_CHUNK_BYTES`].
    pub chunkshape: Option<Vec<u64>>,
    /// Chunks per superchunk file; `None` picks files near [`DEFAULT_SUPERCHUNK_BYTES`].
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
pub fn default_chunkshape(
    shape: &[u64],
    itemsize: u64,
    expected_rows: u64,
    target: u64,
) -> Vec<u64> {
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

/// Whether a dataset handle may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Reads only; several readers may share a dataset with one writer.
    ReadOnly,
    /// Reads and writes; holds the dataset's writer lock.
    ReadWrite,
}

/// A writer lock on `root/meta/lock`, released when dropped.
#[derive(Debug)]
pub(crate) struct WriterLock {
    _file: std::fs::File,
}

impl WriterLock {
    pub(crate) fn acquire(root: &Path) -> Result<WriterLock> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = root.join("meta").join("lock");
        // A writer works inside the dataset: `meta/` and `data/` may not be links out of it
        // (files below them are opened without following links, see `LocalStorage::open`).
        for dir in ["meta", "data"] {
            let d = root.join(dir);
            if std::fs::symlink_metadata(&d).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(Error::Unsupported {
                    path: d,
                    reason: "a symbolic link inside the dataset: blz writes nothing through links"
                        .into(),
                });
            }
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| Error::io("open", &path, e))?;
        // flock(2) on Unix. The lock goes with the open file, so dropping it unlocks.
        match file.try_lock() {
            Ok(()) => Ok(WriterLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked { path }),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io("lock", &path, e)),
        }
    }
}

/// How long a reader waits for a live writer to finish applying its commit before it gives
/// up with [`Error::Locked`] (only a writer stopped in the middle of applying takes that long).
pub const LIVE_APPLY_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Brings a dataset to its committed state before it is read: replays a journal left by a
/// crashed writer (taking the writer lock to do so), or waits for a live writer to finish
/// applying one. A reader that cannot write to the dataset (read-only filesystem, no
/// permission) gets a read-only view that applies the journal in memory instead: the storage
/// to read through is returned, `None` meaning `storage` itself.
pub(crate) fn settle(
    storage: &Arc<dyn Storage>,
    root: &Path,
    mode: Mode,
) -> Result<Option<Arc<dyn Storage>>> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        if !txn::pending(storage.as_ref(), root) {
            return Ok(None);
        }
        if mode == Mode::ReadWrite {
            txn::recover(storage.as_ref(), root)?;
            return Ok(None);
        }
        match WriterLock::acquire(root) {
            Ok(_lock) => {
                txn::recover(storage.as_ref(), root)?;
                return Ok(None);
            }
            Err(Error::Locked { .. }) if start.elapsed() < LIVE_APPLY_WAIT => {
                // A live writer is applying its commit (a large modification on a slow
                // filesystem can take seconds): check again, less and less often.
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(100));
            }
            Err(Error::Io { source, .. })
                if matches!(
                    source.kind(),
                    std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                return txn::pending_view(storage, root);
            }
            Err(e) => return Err(e),
        }
    }
}

/// The first step of opening any dataset (array or table) at `root`: checks that it has a
/// meta directory and is of the `kind` the caller opens (`None`: an array) before taking the
/// writer lock in read-write mode, brings the dataset to its committed state ([`settle`]),
/// reads `meta/storage` and checks its kind again, and returns it for the caller to
/// interpret, with the storage to read the dataset through ([`settle`]).
///
/// `building`: the dataset is being created in a staging directory whose lock the caller
/// holds ([`crate::staging`]); it opens read-write without taking the lock. Otherwise a
/// staging directory is refused.
pub(crate) fn open_root(
    storage: &Arc<dyn Storage>,
    root: &Path,
    mode: Mode,
    kind: Option<&str>,
    building: bool,
) -> Result<(Option<WriterLock>, serde_json::Value, Arc<dyn Storage>)> {
    let mp = MetaPaths::new(root);
    if !storage.is_dir(&mp.dir) {
        return Err(Error::metadata(
            &mp.dir,
            "not a blz dataset (no meta directory)",
        ));
    }
    if !building {
        crate::staging::refuse_building(storage.as_ref(), root)?;
    }
    meta::refuse_other_kind(storage.as_ref(), &mp, kind)?;
    let lock = match mode {
        Mode::ReadWrite if !building => Some(WriterLock::acquire(root)?),
        _ => None,
    };
    let storage = settle(storage, root, mode)?.unwrap_or_else(|| Arc::clone(storage));
    let raw = meta::read_json(storage.as_ref(), &mp.storage())?;
    meta::check_dataset_kind(&raw, &mp.storage(), kind)?;
    Ok((lock, raw, storage))
}

/// Rows `start..start + rows` along axis 0, whole along the other axes of `shape`.
fn rows_selection(shape: &[u64], start: u64, rows: u64) -> Vec<AxisSel> {
    let mut sel: Vec<AxisSel> = shape.iter().map(|&n| AxisSel::full(n)).collect();
    if let Some(first) = sel.first_mut() {
        *first = AxisSel {
            start,
            step: 1,
            count: rows,
            reversed: false,
            keep: true,
        };
    }
    sel
}

/// An N-d array dataset.
#[derive(Debug)]
pub struct Dataset {
    root: PathBuf,
    storage: Arc<dyn Storage>,
    mode: Mode,
    _lock: Option<WriterLock>,
    meta: ArrayStorage,
    sizes: Sizes,
    core: ArrayCore,
}

fn check_dtype<T: Element>(root: &Path, dtype: DType) -> Result<()> {
    if T::accepts(&dtype) {
        Ok(())
    } else {
        Err(Error::Mismatch {
            dataset: root.to_path_buf(),
            reason: format!(
                "dataset holds {dtype}, the Rust element type is {}",
                std::any::type_name::<T>()
            ),
        })
    }
}

/// Views a slice of POD elements as bytes.
fn as_bytes<T: Element>(v: &[T]) -> Option<&[u8]> {
    if T::POD {
        // SAFETY: POD elements have no padding and every byte is initialised (Element's
        // contract); the byte slice covers exactly the same memory.
        Some(unsafe {
            std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v))
        })
    } else {
        None
    }
}

/// Views a mutable slice of POD elements as bytes.
fn as_bytes_mut<T: Element>(v: &mut [T]) -> Option<&mut [u8]> {
    if T::POD {
        // SAFETY: as in `as_bytes`; in addition every bit pattern is a valid `T`, so any
        // bytes written through the view leave valid elements.
        Some(unsafe {
            std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v))
        })
    } else {
        None
    }
}

/// Encodes elements as native-endian bytes.
pub(crate) fn elements_to_bytes<T: Element>(v: &[T], itemsize: usize) -> Vec<u8> {
    match as_bytes(v) {
        Some(b) => b.to_vec(),
        None => {
            let mut out = vec![0u8; v.len() * itemsize];
            for (x, c) in v.iter().zip(out.chunks_exact_mut(itemsize)) {
                x.write_ne_bytes(c);
            }
            out
        }
    }
}

/// Builds an owned array of the selection's (kept, possibly reversed) axes from a reader that
/// fills native-endian bytes.
pub(crate) fn build_array<T: Element>(
    sel: &[AxisSel],
    itemsize: usize,
    fill: impl FnOnce(&mut [u8]) -> Result<()>,
) -> Result<ArrayD<T>> {
    let total: u64 = sel.iter().map(|s| s.count).product();
    let n =
        usize::try_from(total).map_err(|_| Error::InvalidArgument("selection too large".into()))?;
    let mut v: Vec<T> = if T::POD {
        buffer::zeroed(n)
    } else {
        vec![T::default(); n]
    };
    match as_bytes_mut(&mut v) {
        Some(b) => fill(b)?,
        None => {
            let mut raw = buffer::zeroed::<u8>(n * itemsize);
            fill(&mut raw)?;
            for (x, c) in v.iter_mut().zip(raw.chunks_exact(itemsize)) {
                *x = T::from_ne_bytes(c);
            }
        }
    }
    let shape: Vec<usize> = sel
        .iter()
        .filter(|s| s.keep)
        .map(|s| s.count as usize)
        .collect();
    let mut a = ArrayD::from_shape_vec(IxDyn(&shape), v)
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    for (ax, s) in sel.iter().filter(|s| s.keep).enumerate() {
        if s.reversed {
            a.invert_axis(ndarray::Axis(ax));
        }
    }
    Ok(a)
}

/// Turns a view whose shape equals the selection's kept counts into native-endian bytes in C
/// order over all (un-reversed) counts.
///
/// Borrows the caller's memory when it already is in that form (a contiguous, C-order view
/// of plain elements), so that appending a large batch does not copy it.
pub(crate) fn view_to_bytes<'v, T: Element>(
    root: &Path,
    sel: &[AxisSel],
    data: &'v ArrayViewD<'_, T>,
    itemsize: usize,
) -> Result<Cow<'v, [u8]>> {
    let want: Vec<usize> = sel
        .iter()
        .filter(|s| s.keep)
        .map(|s| s.count as usize)
        .collect();
    if data.shape() != want.as_slice() {
        return Err(Error::Mismatch {
            dataset: root.to_path_buf(),
            reason: format!(
                "data has shape {:?}, the selection has shape {want:?}",
                data.shape()
            ),
        });
    }
    let mut v = data.view();
    for (ax, s) in sel.iter().filter(|s| s.keep).enumerate() {
        if s.reversed {
            v.invert_axis(ndarray::Axis(ax));
        }
    }
    if let Some(bytes) = v.to_slice().and_then(as_bytes) {
        return Ok(Cow::Borrowed(bytes));
    }
    let std = v.as_standard_layout();
    let slice = std
        .as_slice()
        .ok_or_else(|| Error::InvalidArgument("data is not contiguous".into()))?;
    Ok(Cow::Owned(elements_to_bytes(slice, itemsize)))
}

impl Dataset {
    /// Creates a dataset of `dtype` and `shape` at `path` with default options.
    ///
    /// # Errors
    /// As [`Dataset::create_with`].
    pub fn create(path: impl AsRef<Path>, dtype: DType, shape: &[u64]) -> Result<Dataset> {
        Self::create_with(path, dtype, shape, &CreateOptions::default())
    }

    /// Creates a dataset; a non-zero initial shape is filled with the fill value.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty shape, a chunkshape of the wrong rank or with a
    /// zero, bad compression settings or a fill value that does not fit; an I/O error (the
    /// path exists and `overwrite` is off, permissions...).
    pub fn create_with(
        path: impl AsRef<Path>,
        dtype: DType,
        shape: &[u64],
        opts: &CreateOptions,
    ) -> Result<Dataset> {
        Self::create_in(storage::local(), path.as_ref(), dtype, shape, opts)
    }

    /// As [`Dataset::create_with`], on a given storage backend.
    ///
    /// # Errors
    /// As [`Dataset::create_with`].
    pub fn create_in(
        storage: Arc<dyn Storage>,
        root: &Path,
        dtype: DType,
        shape: &[u64],
        opts: &CreateOptions,
    ) -> Result<Dataset> {
        Self::create_from(
            storage,
            root,
            dtype,
            shape,
            opts,
            std::iter::empty::<Result<&[u8]>>(),
        )
    }

    /// Creates a dataset at `root` holding `shape` (its first extent usually 0) and then
    /// every batch (as [`append_batches`](Self::append_batches) takes them), as one step:
    /// the dataset is built in a staging directory beside `root` and renamed into place
    /// when complete, so until then nothing at `root` changes, and a failure or a kill
    /// leaves no dataset behind (see [`CreateOptions::overwrite`] for replacing one). Returns
    /// the dataset, open for writing.
    ///
    /// # Errors
    /// As [`Dataset::create_in`] and [`Dataset::append_batches`]; [`Error::Locked`] while
    /// another process creates a dataset at `root`.
    pub fn create_from<I, B>(
        storage: Arc<dyn Storage>,
        root: &Path,
        dtype: DType,
        shape: &[u64],
        opts: &CreateOptions,
        batches: I,
    ) -> Result<Dataset>
    where
        I: IntoIterator<Item = Result<B>>,
        B: AsRef<[u8]>,
    {
        let meta = build_storage_meta(dtype, shape, opts)?;
        let is_array =
            |p: &Path| meta::dataset_kind(storage.as_ref(), p).as_deref() == Some("array");
        let staging = Staging::begin(
            &storage,
            root,
            opts.overwrite,
            &is_array,
            "an array dataset",
        )?;
        let dir = staging.dir().to_path_buf();
        let mp = MetaPaths::new(&dir);
        storage.create_dir_all(&dir.join("data"))?;
        meta::write_json(storage.as_ref(), &mp.storage(), &meta)?;
        meta::write_json(
            storage.as_ref(),
            &mp.attributes(),
            &serde_json::Value::Object(opts.attributes.clone()),
        )?;
        let sizes = Sizes {
            shape: {
                let mut s = shape.to_vec();
                s[0] = 0;
                s
            },
            nbytes: 0,
            cbytes: 0,
            nrows: None,
            columns: None,
            generation: 0,
        };
        meta::write_json(storage.as_ref(), &mp.sizes(), &sizes)?;
        storage.sync_dir(&dir)?;
        {
            let mut ds = Self::open_with(storage.clone(), &dir, Mode::ReadWrite, true)?;
            if shape[0] > 0 {
                ds.resize(shape[0])?;
            }
            ds.append_batches(batches)?;
        }
        staging.publish()?;
        Self::open_in(storage, root, Mode::ReadWrite)
    }

    /// Opens a dataset read-only.
    ///
    /// # Errors
    /// As [`Dataset::open_in`].
    pub fn open(path: impl AsRef<Path>) -> Result<Dataset> {
        Self::open_in(storage::local(), path.as_ref(), Mode::ReadOnly)
    }

    /// Opens a dataset for reading and writing (takes the writer lock).
    ///
    /// # Errors
    /// As [`Dataset::open_in`].
    pub fn open_rw(path: impl AsRef<Path>) -> Result<Dataset> {
        Self::open_in(storage::local(), path.as_ref(), Mode::ReadWrite)
    }

    /// Opens a dataset on a given storage backend, bringing it to its last committed state
    /// first if a writer crashed.
    ///
    /// # Errors
    /// [`Error::Locked`] when another writer holds the lock (read-write mode);
    /// [`Error::InvalidMetadata`] naming a missing or malformed meta file; I/O errors.
    pub fn open_in(storage: Arc<dyn Storage>, root: &Path, mode: Mode) -> Result<Dataset> {
        Self::open_with(storage, root, mode, false)
    }

    /// As [`open_in`](Self::open_in); `building`: see [`open_root`].
    fn open_with(
        storage: Arc<dyn Storage>,
        root: &Path,
        mode: Mode,
        building: bool,
    ) -> Result<Dataset> {
        let mp = MetaPaths::new(root);
        let (lock, raw, storage) = open_root(&storage, root, mode, None, building)?;
        let meta: ArrayStorage = serde_json::from_value(raw)
            .map_err(|e| Error::metadata(mp.storage(), e.to_string()))?;
        validate_storage_meta(&meta, &mp.storage())?;
        let sizes: Sizes = meta::read_json(storage.as_ref(), &mp.sizes())?;
        if sizes.shape.len() != meta.chunkshape.len() {
            return Err(Error::metadata(
                mp.sizes(),
                format!(
                    "shape has {} axes, chunkshape has {}",
                    sizes.shape.len(),
                    meta.chunkshape.len()
                ),
            ));
        }
        let core = make_core(storage.clone(), root, PathBuf::from("data"), &meta)?;
        let ds = Dataset {
            root: root.to_path_buf(),
            storage,
            mode,
            _lock: lock,
            meta,
            sizes,
            core,
        };
        if mode == Mode::ReadWrite {
            ds.core.store.remove_strays(ds.nchunks())?;
        }
        Ok(ds)
    }

    /// The dataset's directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Extent of each axis.
    pub fn shape(&self) -> &[u64] {
        &self.sizes.shape
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.meta.dtype
    }

    /// Extent of a chunk on each axis.
    pub fn chunkshape(&self) -> &[u64] {
        &self.meta.chunkshape
    }

    /// The `meta/storage` document.
    pub fn storage_meta(&self) -> &ArrayStorage {
        &self.meta
    }

    /// The `meta/sizes` document (shape, nbytes, cbytes).
    pub fn sizes(&self) -> &Sizes {
        &self.sizes
    }

    /// Number of stored chunks.
    pub fn nchunks(&self) -> u64 {
        self.core.nchunks(&self.sizes.shape)
    }

    /// Number of superchunk files.
    pub fn nfiles(&self) -> u64 {
        self.core.store.nfiles(self.nchunks())
    }

    /// Absolute path of superchunk file `f` (0-based; its name is `__{f+1}__.bin`).
    pub fn superchunk_path(&self, f: u64) -> PathBuf {
        self.core.store.file_path(f)
    }

    /// The storage backend.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    fn check_writable(&self) -> Result<()> {
        match self.mode {
            Mode::ReadWrite => Ok(()),
            Mode::ReadOnly => Err(Error::ReadOnly {
                path: self.root.clone(),
            }),
        }
    }

    /// Resolves a selection against the shape.
    ///
    /// # Errors
    /// As [`select::resolve`].
    pub fn resolve(&self, sel: &[SliceInfoElem]) -> Result<Vec<AxisSel>> {
        select::resolve(sel, &self.sizes.shape, &self.root)
    }

    /// Reads the whole dataset.
    ///
    /// # Errors
    /// As [`Dataset::slice`].
    pub fn read<T: Element>(&self) -> Result<ArrayD<T>> {
        self.slice::<T, _>([])
    }

    /// Reads a selection (`ndarray::s![...]`: ranges with steps, negative steps, single
    /// indices) into a new array, decoding only the chunks it touches, in parallel.
    ///
    /// # Errors
    /// [`Error::Mismatch`] when `T` does not hold the dataset's dtype; [`Error::OutOfBounds`]
    /// for a selection outside the shape; corrupt or missing chunks as [`Error`]s naming the
    /// file and chunk.
    pub fn slice<T: Element, S: AsRef<[SliceInfoElem]>>(&self, sel: S) -> Result<ArrayD<T>> {
        check_dtype::<T>(&self.root, self.meta.dtype)?;
        let sel = self.resolve(sel.as_ref())?;
        self.unless_changed(build_array(&sel, self.core.itemsize(), |buf| {
            self.core.read_into(&sel, &self.sizes.shape, buf)
        }))
    }

    /// An error a read met, or [`Error::Changed`] when a writer committed since this handle
    /// opened (see [`meta::unless_changed`]).
    pub(crate) fn unless_changed<T>(&self, r: Result<T>) -> Result<T> {
        meta::unless_changed(self.storage.as_ref(), &self.root, self.sizes.generation, r)
    }

    /// Reads a resolved selection as native-endian bytes (C order over the selection's
    /// counts, reversed axes un-reversed).
    ///
    /// # Errors
    /// As [`Dataset::slice`].
    pub fn read_bytes(&self, sel: &[AxisSel]) -> Result<Vec<u8>> {
        let total: u64 = sel.iter().map(|s| s.count).product();
        let mut buf = buffer::zeroed::<u8>(total as usize * self.core.itemsize());
        self.read_into(sel, &mut buf)?;
        Ok(buf)
    }

    /// Reads a resolved selection into a buffer the caller allocated (as
    /// [`read_bytes`](Self::read_bytes) lays it out: native-endian, C order over the
    /// selection's counts, positions ascending on every axis, so a reversed axis comes
    /// un-reversed), decoding the chunks in parallel straight into it. A client that
    /// owns its arrays (numpy, Arrow) allocates the result once and has blz fill it.
    ///
    /// # Errors
    /// [`Error::Mismatch`] when `out` is not exactly the selection's size in bytes;
    /// otherwise as [`Dataset::slice`].
    pub fn read_into(&self, sel: &[AxisSel], out: &mut [u8]) -> Result<()> {
        let total: u64 = sel.iter().map(|s| s.count).product();
        let want = total.saturating_mul(self.core.itemsize() as u64);
        if sel.len() != self.sizes.shape.len() || out.len() as u64 != want {
            return Err(Error::Mismatch {
                dataset: self.root.clone(),
                reason: format!(
                    "a buffer of {} bytes given for a selection of {want} bytes over {} axes",
                    out.len(),
                    sel.len()
                ),
            });
        }
        if total == 0 {
            return Ok(());
        }
        self.unless_changed(self.core.read_into(sel, &self.sizes.shape, out))
    }

    /// Reads one element.
    ///
    /// # Errors
    /// As [`Dataset::slice`].
    pub fn get<T: Element>(&self, index: &[u64]) -> Result<T> {
        let sel: Vec<SliceInfoElem> = index
            .iter()
            .map(|&i| SliceInfoElem::Index(i as isize))
            .collect();
        if index.len() != self.sizes.shape.len() {
            return Err(Error::InvalidArgument(format!(
                "index has {} coordinates, dataset has {} axes",
                index.len(),
                self.sizes.shape.len()
            )));
        }
        let a = self.slice::<T, _>(sel)?;
        a.iter()
            .next()
            .copied()
            .ok_or_else(|| Error::InvalidArgument("empty selection".into()))
    }

    /// Iterates over blocks of whole rows (axis 0) of about `rows` rows (rounded to whole
    /// chunks), for scans larger than memory.
    pub fn iter_rows<T: Element>(&self, rows: u64) -> impl Iterator<Item = Result<ArrayD<T>>> + '_ {
        let cs0 = self.meta.chunkshape[0];
        let step = rows.max(1).div_ceil(cs0) * cs0;
        let n = self.sizes.shape[0];
        (0..n.div_ceil(step)).map(move |b| {
            let start = b * step;
            let end = (start + step).min(n);
            self.slice::<T, _>([SliceInfoElem::Slice {
                start: start as isize,
                end: Some(end as isize),
                step: 1,
            }])
        })
    }

    fn run<F>(&mut self, new_shape: Vec<u64>, f: F) -> Result<()>
    where
        F: FnOnce(&ArrayCore, &mut Txn<'_>, &[u64]) -> Result<i64>,
    {
        self.run_to(move |core, txn, _| {
            let delta = f(core, txn, &new_shape)?;
            Ok((delta, new_shape))
        })
    }

    /// Runs an operation in one transaction and commits it with the shape it returns (with
    /// the change in stored bytes). `f` gets the committed shape.
    fn run_to<F>(&mut self, f: F) -> Result<()>
    where
        F: FnOnce(&ArrayCore, &mut Txn<'_>, &[u64]) -> Result<(i64, Vec<u64>)>,
    {
        self.check_writable()?;
        let storage = self.storage.clone();
        let mut txn = Txn::new(storage.as_ref(), &self.root);
        let old_shape = self.sizes.shape.clone();
        let result = f(&self.core, &mut txn, &old_shape).and_then(|(delta, new_shape)| {
            let itemsize = self.core.itemsize() as u64;
            let sizes = Sizes {
                nbytes: new_shape.iter().product::<u64>() * itemsize,
                cbytes: (self.sizes.cbytes as i64 + delta).max(0) as u64,
                shape: new_shape.clone(),
                nrows: None,
                columns: None,
                generation: self.sizes.generation + 1,
            };
            txn.put_meta(Path::new("meta/sizes"), meta::to_json_bytes(&sizes));
            txn.commit()?;
            Ok(sizes)
        });
        self.core.store.invalidate();
        match result {
            Ok(sizes) => {
                self.sizes = sizes;
                Ok(())
            }
            Err(e) => {
                // Whatever happened, the disk holds a committed state (or a journal that
                // recovery applies): reload it so this handle stays truthful.
                if let Ok(None) = settle(&self.storage, &self.root, Mode::ReadWrite) {
                    if let Ok(s) = meta::read_json::<Sizes>(
                        self.storage.as_ref(),
                        &MetaPaths::new(&self.root).sizes(),
                    ) {
                        self.sizes = s;
                    }
                }
                Err(e)
            }
        }
    }

    /// Appends rows along axis 0. `data` has the dataset's shape on every other axis (a 1-d
    /// dataset takes a 1-d array).
    ///
    /// # Errors
    /// [`Error::Mismatch`] for a wrong element type or shape, [`Error::ReadOnly`], I/O errors.
    /// On error the dataset keeps its last committed state.
    pub fn append<T: Element>(&mut self, data: &ArrayViewD<'_, T>) -> Result<()> {
        check_dtype::<T>(&self.root, self.meta.dtype)?;
        let rows = data.shape().first().copied().unwrap_or(0) as u64;
        let sel = self.append_selection(rows);
        let bytes = view_to_bytes(&self.root, &sel, data, self.core.itemsize())?;
        self.append_bytes(&bytes, rows)
    }

    fn append_selection(&self, rows: u64) -> Vec<AxisSel> {
        rows_selection(&self.sizes.shape, self.sizes.shape[0], rows)
    }

    /// Appends rows given as native-endian bytes in C order (`rows` times the size of one
    /// row).
    ///
    /// # Errors
    /// As [`Dataset::append`].
    pub fn append_bytes(&mut self, bytes: &[u8], rows: u64) -> Result<()> {
        let row_bytes = self.sizes.shape[1..].iter().product::<u64>() * self.core.itemsize() as u64;
        if bytes.len() as u64 != rows * row_bytes {
            return Err(Error::Mismatch {
                dataset: self.root.clone(),
                reason: format!(
                    "{} bytes given for {rows} rows of {row_bytes} bytes",
                    bytes.len()
                ),
            });
        }
        if rows == 0 {
            return Ok(());
        }
        self.grow(rows, Source::Data(bytes))
    }

    /// Appends every batch (native-endian bytes in C order, whole rows each) in one
    /// transaction: however many batches there are, readers see none of them until the
    /// commit at the end, and a failure or a kill at any point leaves the dataset as it was.
    /// Memory stays at one batch and less than one chunk-row besides: whole chunk-rows are
    /// encoded (in parallel) and written as batches arrive, the rest is carried to the next.
    /// Returns the number of rows appended.
    ///
    /// # Errors
    /// A batch that is not whole rows ([`Error::Mismatch`]), the first error a batch itself
    /// carries, [`Error::ReadOnly`], I/O errors. On error nothing of the batches is kept.
    pub fn append_batches<I, B>(&mut self, batches: I) -> Result<u64>
    where
        I: IntoIterator<Item = Result<B>>,
        B: AsRef<[u8]>,
    {
        let row_bytes = self.sizes.shape[1..].iter().product::<u64>() * self.core.itemsize() as u64;
        let cs0 = self.meta.chunkshape[0];
        let root = self.root.clone();
        let mut appended = 0;
        self.run_to(|core, txn, old| {
            let committed = core.nchunks(old);
            let rewrite_from =
                (!old[0].is_multiple_of(cs0)).then(|| (old[0] / cs0) * core.row_chunks(old));
            let mut w = ChunkWrites::new(&core.store, committed, rewrite_from);
            // Rows `old[0]..written` are written; `carry` holds the rows after them, fewer
            // than reach the next chunk-row boundary.
            let mut written = old[0];
            let mut carry: Vec<u8> = Vec::new();
            let put = |w: &mut ChunkWrites<'_>, txn: &mut Txn<'_>, at: u64, bytes: &[u8]| {
                let rows = bytes.len() as u64 / row_bytes.max(1);
                let mut shape = old.to_vec();
                shape[0] = at + rows;
                let sel = rows_selection(old, at, rows);
                core.write(txn, w, committed, &sel, &shape, Source::Data(bytes))
            };
            for batch in batches {
                let batch = batch?;
                let mut bytes = batch.as_ref();
                if row_bytes == 0 || !(bytes.len() as u64).is_multiple_of(row_bytes) {
                    return Err(Error::Mismatch {
                        dataset: root.clone(),
                        reason: format!(
                            "a batch of {} bytes is not whole rows of {row_bytes} bytes",
                            bytes.len()
                        ),
                    });
                }
                appended += bytes.len() as u64 / row_bytes;
                let carried = carry.len() as u64 / row_bytes;
                let end = written + carried + bytes.len() as u64 / row_bytes;
                let boundary = end / cs0 * cs0;
                if boundary <= written {
                    carry.extend_from_slice(bytes);
                    continue;
                }
                if !carry.is_empty() {
                    // Complete the carried chunk-row first (at most one chunk-row is copied).
                    let first = ((written / cs0 + 1) * cs0).min(boundary);
                    let take = ((first - written - carried) * row_bytes) as usize;
                    carry.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    put(&mut w, txn, written, &carry)?;
                    carry.clear();
                    written = first;
                }
                let whole = ((boundary - written) * row_bytes) as usize;
                if whole > 0 {
                    put(&mut w, txn, written, &bytes[..whole])?;
                    written = boundary;
                }
                carry.extend_from_slice(&bytes[whole..]);
            }
            if !carry.is_empty() {
                put(&mut w, txn, written, &carry)?;
                written += carry.len() as u64 / row_bytes;
            }
            let mut shape = old.to_vec();
            shape[0] = written;
            Ok((w.finish(txn)?, shape))
        })?;
        Ok(appended)
    }

    fn grow(&mut self, rows: u64, src: Source<'_>) -> Result<()> {
        let old = self.sizes.shape.clone();
        let mut new_shape = old.clone();
        new_shape[0] += rows;
        let sel = self.append_selection(rows);
        let committed = self.core.nchunks(&old);
        let cs0 = self.meta.chunkshape[0];
        let rewrite_from =
            (!old[0].is_multiple_of(cs0)).then(|| (old[0] / cs0) * self.core.row_chunks(&old));
        self.run(new_shape, move |core, txn, shape| {
            let mut w = ChunkWrites::new(&core.store, committed, rewrite_from);
            core.write(txn, &mut w, committed, &sel, shape, src)?;
            w.finish(txn)
        })
    }

    /// Sets the extent of axis 0: growing fills new rows with the fill value, shrinking drops
    /// rows (and removes or truncates the superchunk files that held them).
    ///
    /// # Errors
    /// [`Error::ReadOnly`], I/O errors. On error the dataset keeps its last committed state.
    pub fn resize(&mut self, rows: u64) -> Result<()> {
        let old = self.sizes.shape[0];
        if rows > old {
            // Grow in bounded steps so memory stays at a few chunk-rows.
            self.grow(rows - old, Source::Fill)
        } else if rows < old {
            let mut new_shape = self.sizes.shape.clone();
            new_shape[0] = rows;
            let committed = self.nchunks();
            self.run(new_shape, move |core, txn, shape| {
                let mut w = ChunkWrites::new(&core.store, committed, None);
                w.truncate(txn, core.nchunks(shape))?;
                w.finish(txn)
            })
        } else {
            Ok(())
        }
    }

    /// Writes `data` into a selection (same forms as [`Dataset::slice`]); `data`'s shape must
    /// be the selection's. Only the chunks the selection touches are re-encoded; each is
    /// rewritten in place when it fits its slot (see `slack`), else moved to the end of its
    /// file.
    ///
    /// # Errors
    /// As [`Dataset::slice`] and [`Dataset::append`].
    pub fn write_slice<T: Element, S: AsRef<[SliceInfoElem]>>(
        &mut self,
        sel: S,
        data: &ArrayViewD<'_, T>,
    ) -> Result<()> {
        check_dtype::<T>(&self.root, self.meta.dtype)?;
        let sel = self.resolve(sel.as_ref())?;
        let bytes = view_to_bytes(&self.root, &sel, data, self.core.itemsize())?;
        self.write_bytes(&sel, &bytes)
    }

    /// Writes native-endian bytes (C order over the selection's counts) into a resolved
    /// selection.
    ///
    /// # Errors
    /// As [`Dataset::write_slice`].
    pub fn write_bytes(&mut self, sel: &[AxisSel], bytes: &[u8]) -> Result<()> {
        let total: u64 = sel.iter().map(|s| s.count).product();
        if bytes.len() as u64 != total * self.core.itemsize() as u64 {
            return Err(Error::Mismatch {
                dataset: self.root.clone(),
                reason: format!("{} bytes given for {total} elements", bytes.len()),
            });
        }
        if total == 0 {
            return Ok(());
        }
        let shape = self.sizes.shape.clone();
        let committed = self.nchunks();
        let sel = sel.to_vec();
        self.run(shape, move |core, txn, shape| {
            let mut w = ChunkWrites::new(&core.store, committed, None);
            core.write(txn, &mut w, committed, &sel, shape, Source::Data(bytes))?;
            w.finish(txn)
        })
    }

    /// The user attributes (`meta/attributes`).
    ///
    /// # Errors
    /// [`Error::InvalidMetadata`] when the file is not a JSON object; I/O errors.
    pub fn attrs(&self) -> Result<serde_json::Map<String, serde_json::Value>> {
        read_attrs(self.storage.as_ref(), &self.root)
    }

    /// Replaces the user attributes atomically.
    ///
    /// # Errors
    /// [`Error::ReadOnly`], I/O errors.
    pub fn set_attrs(&mut self, attrs: serde_json::Map<String, serde_json::Value>) -> Result<()> {
        self.check_writable()?;
        meta::write_json(
            self.storage.as_ref(),
            &MetaPaths::new(&self.root).attributes(),
            &serde_json::Value::Object(attrs),
        )
    }

    /// Sets one attribute.
    ///
    /// # Errors
    /// As [`Dataset::set_attrs`].
    pub fn set_attr(&mut self, key: &str, value: serde_json::Value) -> Result<()> {
        let mut a = self.attrs()?;
        a.insert(key.to_string(), value);
        self.set_attrs(a)
    }

    /// Reads every chunk and checks every digest, and reads `meta/attributes`; returns the
    /// problems found (empty when the dataset is intact). When a writer committed while it
    /// read, the one problem returned is [`Error::Changed`]: verify again.
    pub fn verify(&self, mut progress: impl FnMut(u64, u64)) -> Vec<Error> {
        let mut errors = verify_store(&self.core, self.nchunks(), &mut progress);
        // Every meta file is part of the dataset too (storage and sizes were read to open it).
        if let Err(e) = self.attrs() {
            errors.push(e);
        }
        meta::verified_unless_changed(
            self.storage.as_ref(),
            &self.root,
            self.sizes.generation,
            errors,
        )
    }

    /// Rewrites every superchunk file without dead space (after many relocating modifies).
    ///
    /// # Errors
    /// [`Error::ReadOnly`], corrupt chunks, I/O errors.
    pub fn compact(&mut self) -> Result<u64> {
        self.check_writable()?;
        self.core.store.compact(self.nchunks())
    }
}

impl Dataset {
    /// The chunk engine (for scans).
    pub(crate) fn core(&self) -> &ArrayCore {
        &self.core
    }
}

/// Reads `meta/attributes` of the dataset at `root`.
pub(crate) fn read_attrs(
    storage: &dyn Storage,
    root: &Path,
) -> Result<serde_json::Map<String, serde_json::Value>> {
    let p = MetaPaths::new(root).attributes();
    if !storage.exists(&p) {
        return Ok(serde_json::Map::new());
    }
    match meta::read_json::<serde_json::Value>(storage, &p)? {
        serde_json::Value::Object(m) => Ok(m),
        _ => Err(Error::metadata(&p, "attributes must be a JSON object")),
    }
}

/// Reads every chunk of a store, collecting errors.
pub(crate) fn verify_store(
    core: &ArrayCore,
    n: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Vec<Error> {
    use rayon::prelude::*;
    let mut errors = Vec::new();
    let batch = 64;
    let mut k = 0;
    while k < n {
        let end = (k + batch).min(n);
        let errs: Vec<Error> = (k..end)
            .into_par_iter()
            .filter_map(|i| {
                let mut buf = Vec::new();
                let mut out = vec![0u8; core.chunk_len() * core.itemsize()];
                core.store.decompress_chunk(i, &mut out, &mut buf).err()
            })
            .collect();
        errors.extend(errs);
        progress(end, n);
        k = end;
    }
    errors
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

pub(crate) fn build_storage_meta(
    dtype: DType,
    shape: &[u64],
    opts: &CreateOptions,
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
        .unwrap_or_else(|| (DEFAULT_SUPERCHUNK_BYTES / chunk_bytes.max(1)).clamp(1, 4096));
    let fill = if opts.fill.is_null() {
        match dtype {
            DType::Bool => serde_json::json!(false),
            DType::Bytes(_) | DType::Str(_) => serde_json::json!(""),
            DType::F32 | DType::F64 => serde_json::json!(0.0),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn chunkshape(dtype: DType, shape: &[u64], expectedlen: Option<u64>) -> Vec<u64> {
        let opts = CreateOptions {
            expectedlen,
            ..Default::default()
        };
        build_storage_meta(dtype, shape, &opts).unwrap().chunkshape
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
