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
mod cache;
mod fancy;
pub mod staged;

pub use crate::engine::{
    CreateOptions, Mode, DEFAULT_CHUNK_BYTES, DEFAULT_SUPERCHUNK_BYTES, MIN_DEFAULT_CHUNK_BYTES,
};

use crate::dtype::{DType, Element};
use crate::engine::limits::{self as layout, GROW_STEP_CHUNKS};
use crate::engine::{
    as_bytes, as_bytes_mut, build_storage_meta, elements_to_bytes, file_bytes, make_core,
    validate_storage_meta, verify_store, ArrayCore, ChunkWrites, Root, Source, Turn,
};
use crate::error::{Error, Result};
use crate::meta::{self, ArrayStorage, Kind, MetaPaths, Sizes};
use crate::selection::{self, AxisSel, Resolved, Selection};
use crate::staging::Staging;
use crate::stats::ChunkStats;
use crate::storage::{self, Storage};
use crate::txn::Txn;
use ndarray::{ArrayD, ArrayViewD, IxDyn, SliceInfoElem};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// Checks the sizes read from `meta/sizes` (at `path`) before they size anything: the shape
/// within [`crate::MAX_ARRAY_BYTES`], `nbytes` the bytes of the shape's elements (every
/// commit writes both in one document, so they disagree only in a document no writer
/// wrote: a shape grown by hand within the last chunk would otherwise show the chunk's
/// padding as elements), its chunk count within `u64`, and the last superchunk file it
/// needs present (one look-up), so a shape that names far more data than the dataset
/// holds is refused when the dataset opens, not found chunk by chunk.
fn check_sizes(storage: &dyn Storage, core: &ArrayCore, sizes: &Sizes, path: &Path) -> Result<()> {
    let bad = |reason: String| Err(Error::metadata(path, reason));
    let itemsize = core.itemsize() as u64;
    match layout::shape_bytes(&sizes.shape, itemsize, "shape") {
        Err(e) => return bad(e.to_string()),
        Ok((_, bytes)) if bytes != sizes.nbytes => {
            return bad(format!(
                "nbytes is {}, but shape {:?} of {itemsize}-byte elements takes {bytes} bytes",
                sizes.nbytes, sizes.shape
            ))
        }
        Ok(_) => {}
    }
    let Some(n) = layout::chunk_count(&sizes.shape, &core.chunkshape) else {
        return bad(format!(
            "shape {:?} has more chunks than blz can count",
            sizes.shape
        ));
    };
    let nfiles = core.store.nfiles(n);
    if nfiles > 0 && !storage.exists(&core.store.file_path(nfiles - 1)) {
        return bad(format!(
            "shape {:?} needs {nfiles} superchunk files, but the last, {}, does not exist",
            sizes.shape,
            core.store.file_path(nfiles - 1).display()
        ));
    }
    Ok(())
}

/// An N-d array dataset.
#[derive(Debug)]
pub struct Dataset {
    /// Where it is, the storage, the writer lock, the commit door.
    root: Root,
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
        let (s, root) = storage::for_new_path(path.as_ref(), opts.overwrite)?;
        Self::create_in(s, &root, dtype, shape, opts)
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
        let (staging, mut ds) = Self::begin_create(&storage, root, dtype, shape, opts)?;
        ds.append_batches(batches)?;
        drop(ds);
        let lock = staging.publish()?;
        let mut ds = Self::open_with(storage, root, Mode::ReadWrite, true)?;
        ds.root.hold(lock);
        Ok(ds)
    }

    /// Starts a create: the dataset at `root` built (empty but for `shape[0]` fill rows) in
    /// its staging directory, open for writing there, with the staging that publishes it.
    fn begin_create(
        storage: &Arc<dyn Storage>,
        root: &Path,
        dtype: DType,
        shape: &[u64],
        opts: &CreateOptions,
    ) -> Result<(Staging, Dataset)> {
        let what = format!("creating {}", root.display());
        layout::shape_bytes(shape, dtype.itemsize() as u64, &what)?;
        let meta = build_storage_meta(dtype, shape, opts, file_bytes(storage.as_ref()))?;
        layout::check_fill_chunks(0, layout::chunk_count(shape, &meta.chunkshape), &what)?;
        let is_array =
            |p: &Path| meta::dataset_kind(storage.as_ref(), p) == Some(meta::Kind::Array);
        let staging = Staging::begin(storage, root, opts.overwrite, &is_array, "an array dataset")?;
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
            rewritten: Some(0),
            stats: Some(0),
        };
        meta::write_json(build.as_ref(), &mp.sizes(), &sizes)?;
        let mut ds = Self::open_with(build.clone(), &dir, Mode::ReadWrite, true)?;
        if shape[0] > 0 {
            ds.resize(shape[0])?;
        }
        Ok((staging, ds))
    }

    /// Opens a dataset read-only.
    ///
    /// # Errors
    /// As [`Dataset::open_in`].
    pub fn open(path: impl AsRef<Path>) -> Result<Dataset> {
        let (s, root) = storage::for_path(path.as_ref())?;
        Self::open_in(s, &root, Mode::ReadOnly)
    }

    /// Opens a dataset for reading and writing (takes the writer lock).
    ///
    /// # Errors
    /// As [`Dataset::open_in`].
    pub fn open_rw(path: impl AsRef<Path>) -> Result<Dataset> {
        let (s, root) = storage::for_path(path.as_ref())?;
        Self::open_in(s, &root, Mode::ReadWrite)
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

    /// As [`open_in`](Self::open_in); `building`: see [`Root::open`].
    fn open_with(
        storage: Arc<dyn Storage>,
        root: &Path,
        mode: Mode,
        building: bool,
    ) -> Result<Dataset> {
        let (root, _, raw) = Root::open(&storage, root, mode, Some(Kind::Array), building)?;
        Self::from_root(root, raw)
    }

    /// The array at an opened root whose `meta/storage` document is `raw`.
    pub(crate) fn from_root(root: Root, raw: serde_json::Value) -> Result<Dataset> {
        let mp = MetaPaths::new(&root);
        let meta: ArrayStorage = serde_json::from_value(raw)
            .map_err(|e| Error::metadata(mp.storage(), e.to_string()))?;
        validate_storage_meta(&meta, &mp.storage())?;
        let storage = Arc::clone(&root.storage);
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
        let core = make_core(storage.clone(), &root, PathBuf::from("data"), &meta)?;
        // A writer committing (a shrink removing files) between the read of `meta/sizes` and
        // the look for its last file is not damage: that is `Changed` (open again).
        meta::unless_changed(
            storage.as_ref(),
            root.as_ref(),
            sizes.generation,
            check_sizes(storage.as_ref(), &core, &sizes, &mp.sizes()),
        )?;
        let mode = root.mode;
        let mut ds = Dataset {
            root,
            meta,
            sizes,
            core,
        };
        ds.set_block_cache_bytes(crate::engine::DEFAULT_BLOCK_CACHE_BYTES);
        if mode == Mode::ReadWrite {
            ds.core.store.remove_strays(ds.nchunks())?;
        }
        ds.root.opened();
        Ok(ds)
    }

    /// This handle's turn to write, when other writing handles of this process share its
    /// writer: one write at a time, and this handle caught up first with what the others
    /// committed (so the write starts from the dataset's latest commit). Every write takes
    /// it first; a write inside a write of the same handle takes it again at once.
    pub(crate) fn turn(&mut self) -> Result<Option<Turn>> {
        let turn = self.root.turn()?;
        if self.root.behind() {
            self.catch_up()?;
        }
        Ok(turn)
    }

    /// Reads the dataset's state again, as the other writing handles of this process left
    /// it (in this handle's turn).
    fn catch_up(&mut self) -> Result<()> {
        let cache = self.block_cache_bytes();
        let (root, raw) = self.root.reopen(Kind::Array)?;
        *self = Self::from_root(root, raw)?;
        self.set_block_cache_bytes(cache);
        Ok(())
    }

    /// Whether this handle only reads or also writes (holding the writer lock).
    pub fn mode(&self) -> Mode {
        self.root.mode
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

    /// The numbers of the superchunk files (0-based, below [`nfiles`](Self::nfiles)) present
    /// in `data/`, from one listing: what to walk when files may be missing.
    ///
    /// # Errors
    /// An I/O error listing `data/`.
    pub fn present_files(&self) -> Result<Vec<u64>> {
        let n = self.nfiles();
        Ok(self
            .core
            .store
            .present_files()?
            .range(..n)
            .copied()
            .collect())
    }

    /// Absolute path of superchunk file `f` (0-based; its name is `__{f+1}__.bin`).
    pub fn superchunk_path(&self, f: u64) -> PathBuf {
        self.core.store.file_path(f)
    }

    /// The storage backend.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.root.storage
    }

    fn check_writable(&self) -> Result<()> {
        self.root.check_writable()
    }

    /// Resolves ndarray slice elements against the shape.
    ///
    /// # Errors
    /// As [`selection::resolve`].
    pub fn resolve(&self, sel: &[SliceInfoElem]) -> Result<Vec<AxisSel>> {
        selection::resolve(sel, &self.sizes.shape, &self.root)
    }

    /// Resolves a selection against the shape: what [`Dataset::read_into`] and
    /// [`Dataset::write_bytes`] take (`axes`), and the result's shape.
    ///
    /// # Errors
    /// As [`Selection::resolve`].
    pub fn select(&self, sel: &Selection) -> Result<Resolved> {
        sel.resolve(&self.sizes.shape, &self.root)
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
        self.read_selection(&Selection::from(sel.as_ref()))
    }

    /// Reads a numpy-style selection ([`Selection`]: indices, clamped slices, `...`, new
    /// axes) into a new array of the selection's shape.
    ///
    /// # Errors
    /// As [`Dataset::slice`].
    pub fn read_selection<T: Element>(&self, sel: &Selection) -> Result<ArrayD<T>> {
        check_dtype::<T>(&self.root, self.meta.dtype)?;
        let r = self.select(sel)?;
        let mut a = self.unless_changed(build_array(&r.axes, self.core.itemsize(), |buf| {
            self.core.read_into(&r.axes, &self.sizes.shape, buf)
        }))?;
        for &k in &r.new_axes {
            a.insert_axis_inplace(ndarray::Axis(k));
        }
        Ok(a)
    }

    /// Brings a read-only handle to the dataset's latest commit: when a writer (another
    /// handle, another process) has committed since this handle opened or was last
    /// refreshed, or a create with `overwrite` replaced the dataset, the handle is opened again and shows the new state (shape, data).
    /// Returns whether it changed. A handle sees one commit from one call to the next:
    /// blz never changes what it shows in the middle of a call, and a read that meets files
    /// a later commit rewrote fails with [`Error::Changed`], after which a refresh and the
    /// same read again see the new state. Cheap when nothing changed (one read of
    /// `meta/sizes`). A read-write handle shares the writer lock with the other writing
    /// handles of this process only: it shows what they committed (one atomic load when
    /// nothing was; its writes catch up by themselves, its reads fail with
    /// [`Error::Changed`] until it is refreshed).
    ///
    /// # Errors
    /// As [`Dataset::open_in`] (the dataset was removed or replaced by something else); the
    /// handle is left as it was.
    pub fn refresh(&mut self) -> Result<bool> {
        if self.root.behind() {
            self.catch_up()?;
            return Ok(true);
        }
        let Some(stamp) = self.root.stale(self.sizes.generation, &self.meta.id) else {
            return Ok(false);
        };
        let cache = self.block_cache_bytes();
        *self = Self::open_with(
            Arc::clone(&self.root.base),
            self.root.path(),
            Mode::ReadOnly,
            false,
        )?;
        self.set_block_cache_bytes(cache);
        self.root.set_seen(stamp);
        Ok(true)
    }

    /// An error a read met, or [`Error::Changed`] when a writer committed since this handle
    /// opened (see [`Root::unless_changed`]).
    pub(crate) fn unless_changed<T>(&self, r: Result<T>) -> Result<T> {
        self.root
            .unless_changed(self.sizes.generation, &self.meta.id, r)
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
                dataset: self.root.to_path_buf(),
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

    /// `rewrites`: the operation changes elements the dataset already has (see
    /// [`Sizes::rewritten`]); a shrink always does.
    fn run<F>(&mut self, new_shape: Vec<u64>, rewrites: bool, f: F) -> Result<()>
    where
        F: FnOnce(&ArrayCore, &mut Txn<'_>, &[u64]) -> Result<i64>,
    {
        self.run_to(rewrites, move |core, txn, _| {
            let delta = f(core, txn, &new_shape)?;
            Ok((delta, new_shape))
        })
    }

    /// Runs an operation in one transaction and commits it with the shape it returns (with
    /// the change in stored bytes). `f` gets the committed shape.
    fn run_to<F>(&mut self, rewrites: bool, f: F) -> Result<()>
    where
        F: FnOnce(&ArrayCore, &mut Txn<'_>, &[u64]) -> Result<(i64, Vec<u64>)>,
    {
        // A read-only handle fails here, before anything (nor the handle) is touched.
        self.check_writable()?;
        let old_shape = self.sizes.shape.clone();
        let result = self.root.transact(|txn| {
            let (delta, new_shape) = f(&self.core, txn, &old_shape)?;
            let itemsize = self.core.itemsize() as u64;
            let sizes = Sizes {
                nbytes: new_shape.iter().product::<u64>() * itemsize,
                cbytes: (self.sizes.cbytes as i64 + delta).max(0) as u64,
                shape: new_shape.clone(),
                nrows: None,
                columns: None,
                generation: self.sizes.generation + 1,
                stats: self.sizes.next_stats(),
                rewritten: self
                    .sizes
                    .next_rewritten(rewrites || new_shape[0] < old_shape[0]),
            };
            txn.put_meta(Path::new("meta/sizes"), meta::to_json_bytes(&sizes));
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
                if let Some(s) = self.root.resettle::<Sizes>() {
                    self.sizes = s;
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
        let _turn = self.turn()?;
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
        let _turn = self.turn()?;
        let row_bytes = self.sizes.shape[1..].iter().product::<u64>() * self.core.itemsize() as u64;
        if bytes.len() as u64 != rows * row_bytes {
            return Err(Error::Mismatch {
                dataset: self.root.to_path_buf(),
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
        let _turn = self.turn()?;
        let row_bytes = self.sizes.shape[1..].iter().product::<u64>() * self.core.itemsize() as u64;
        let cs0 = self.meta.chunkshape[0];
        let root = self.root.to_path_buf();
        let mut appended = 0;
        self.run_to(false, |core, txn, old| {
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
        new_shape[0] = old[0].checked_add(rows).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: {rows} more rows overflow",
                self.root.display()
            ))
        })?;
        let what = format!("growing {} to {:?}", self.root.display(), new_shape);
        layout::shape_bytes(&new_shape, self.core.itemsize() as u64, &what)?;
        let committed = self.core.nchunks(&old);
        if matches!(src, Source::Fill) {
            layout::check_fill_chunks(
                committed,
                layout::chunk_count(&new_shape, &self.meta.chunkshape),
                &what,
            )?;
        }
        let cs0 = self.meta.chunkshape[0];
        let rewrite_from =
            (!old[0].is_multiple_of(cs0)).then(|| (old[0] / cs0) * self.core.row_chunks(&old));
        let end = new_shape[0];
        self.run(new_shape, false, move |core, txn, shape| {
            let mut w = ChunkWrites::new(&core.store, committed, rewrite_from);
            // Filling goes in steps of whole chunk-rows, [`GROW_STEP_CHUNKS`] chunks or
            // so each, so that the list of chunks a step writes stays small however far
            // the dataset grows; data comes in one piece, as its caller holds it.
            let step = match src {
                Source::Fill => (GROW_STEP_CHUNKS / core.row_chunks(shape).max(1)).max(1) * cs0,
                Source::Data(_) => u64::MAX,
            };
            let mut r = old[0];
            while r < end {
                let next = (r / step).saturating_add(1).saturating_mul(step).min(end);
                let sel = rows_selection(shape, r, next - r);
                core.write(txn, &mut w, committed, &sel, shape, src)?;
                r = next;
            }
            w.finish(txn)
        })
    }

    /// Sets the extent of axis 0: growing fills new rows with the fill value, shrinking drops
    /// rows (and removes or truncates the superchunk files that held them).
    ///
    /// # Errors
    /// [`Error::ReadOnly`], I/O errors. On error the dataset keeps its last committed state.
    pub fn resize(&mut self, rows: u64) -> Result<()> {
        let _turn = self.turn()?;
        let old = self.sizes.shape[0];
        if rows > old {
            // Grow in bounded steps so memory stays at a few chunk-rows.
            self.grow(rows - old, Source::Fill)
        } else if rows < old {
            let mut new_shape = self.sizes.shape.clone();
            new_shape[0] = rows;
            let committed = self.nchunks();
            self.run(new_shape, true, move |core, txn, shape| {
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
        let _turn = self.turn()?;
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
        let _turn = self.turn()?;
        let total: u64 = sel.iter().map(|s| s.count).product();
        if bytes.len() as u64 != total * self.core.itemsize() as u64 {
            return Err(Error::Mismatch {
                dataset: self.root.to_path_buf(),
                reason: format!("{} bytes given for {total} elements", bytes.len()),
            });
        }
        if total == 0 {
            return Ok(());
        }
        let shape = self.sizes.shape.clone();
        let committed = self.nchunks();
        let sel = sel.to_vec();
        self.run(shape, true, move |core, txn, shape| {
            let mut w = ChunkWrites::new(&core.store, committed, None);
            core.write(txn, &mut w, committed, &sel, shape, Source::Data(bytes))?;
            w.finish(txn)
        })
    }

    /// As [`write_bytes`](Self::write_bytes), for a selection resolved against shape
    /// `against`: written only when that is still the dataset's shape once this handle's
    /// turn to write came (another writing handle of this process may have changed it
    /// since), else [`Error::Changed`] and nothing written (resolve again and retry).
    ///
    /// # Errors
    /// [`Error::Changed`]; as [`Dataset::write_bytes`].
    pub fn write_bytes_against(
        &mut self,
        sel: &[AxisSel],
        against: &[u64],
        bytes: &[u8],
    ) -> Result<()> {
        let _turn = self.turn()?;
        if self.sizes.shape != against {
            return Err(Error::Changed {
                path: self.root.to_path_buf(),
            });
        }
        self.write_bytes(sel, bytes)
    }

    /// The user attributes (`meta/attributes`).
    ///
    /// # Errors
    /// [`Error::InvalidMetadata`] when the file is not a JSON object; I/O errors.
    pub fn attrs(&self) -> Result<serde_json::Map<String, serde_json::Value>> {
        self.root.attrs()
    }

    /// Replaces the user attributes atomically.
    ///
    /// # Errors
    /// [`Error::ReadOnly`], I/O errors.
    pub fn set_attrs(&mut self, attrs: serde_json::Map<String, serde_json::Value>) -> Result<()> {
        let _turn = self.turn()?;
        self.root.set_attrs(attrs)
    }

    /// Sets one attribute.
    ///
    /// # Errors
    /// As [`Dataset::set_attrs`].
    pub fn set_attr(&mut self, key: &str, value: serde_json::Value) -> Result<()> {
        let _turn = self.turn()?;
        let mut a = self.attrs()?;
        a.insert(key.to_string(), value);
        self.set_attrs(a)
    }

    /// Reads every chunk and checks every digest, and reads `meta/attributes`; returns the
    /// problems found (empty when the dataset is intact). When a writer committed while it
    /// read, the one problem returned is [`Error::Changed`]: verify again.
    pub fn verify(&self, mut progress: impl FnMut(u64, u64)) -> Vec<Error> {
        let shape = self.sizes.shape.clone();
        let stats = self.sizes.stats_current().then_some(shape.as_slice());
        let errors = verify_store(&self.core, self.nchunks(), stats, &mut progress);
        self.root.verified(self.sizes.generation, errors)
    }

    /// Rewrites every superchunk file without dead space (after many relocating modifies).
    ///
    /// # Errors
    /// [`Error::ReadOnly`], corrupt chunks, I/O errors.
    pub fn compact(&mut self) -> Result<u64> {
        let _turn = self.turn()?;
        self.check_writable()?;
        let saved = self.core.store.compact(self.nchunks())?;
        // The files now hold the same chunks in less space: a commit like any other
        // (the same shape, a new generation) makes that the dataset's state.
        self.run_to(false, |_, _, shape| Ok((0, shape.to_vec())))?;
        Ok(saved)
    }
}

impl Dataset {
    /// The chunk engine (for scans).
    pub(crate) fn core(&self) -> &ArrayCore {
        &self.core
    }

    /// The statistics of every chunk, in linear chunk order (C order over the chunk grid,
    /// `spec/dataset.md` §6.1); `None` where unknown (a dtype without statistics, a chunk
    /// written by a blz that predates them, or a dataset an older blz has written to since).
    /// Nothing is decoded: the records come from the superchunk files' metadata sections,
    /// which opening a file reads.
    ///
    /// # Errors
    /// Opening a superchunk file (I/O, damage, a file that belongs elsewhere).
    pub fn chunk_stats(&self) -> Result<Vec<Option<ChunkStats>>> {
        self.core
            .store
            .chunk_stats(self.nchunks(), self.sizes().stats_current())
    }
}
