//! The chunks of one array (or one table column): which superchunk file holds chunk `k`,
//! verified reads through cached [`SuperchunkReader`]s, and writes planned into a [`Txn`].

use super::block_cache::BlockCache;
use crate::blpk::{
    offsets_digest, Checksum, MetaCodec, MetadataParams, SuperchunkReader, SuperchunkWriter,
    WriterOptions, OFFSETS_KEY,
};
use crate::error::{Error, Result};
use crate::stats::{self, ChunkStats, StatKind};
use crate::storage::{OpenMode, Storage};
use crate::txn::Txn;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Superchunk readers (each holding an open file) cached across all stores of the process;
/// past [`MAX_CACHED_READERS`] a reader serves its read and is closed, so reading a table of
/// 20,000 columns does not run out of file descriptors.
static CACHED_READERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
const MAX_CACHED_READERS: usize = 512;

fn uncache(n: usize) {
    CACHED_READERS.fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
}

/// The metadata document binding superchunk file `f` (0-based) of store `store` to dataset
/// `dataset`, and its chunks to their slots through the offsets digest, which the superchunk
/// writer keeps current (`spec/dataset.md` §12).
pub(crate) fn identity_doc(dataset: &str, store: &str, f: u64) -> serde_json::Value {
    serde_json::json!({ IDENTITY_KEY: {
        "dataset": dataset,
        "store": store,
        "file": f + 1,
        OFFSETS_KEY: offsets_digest(&[]),
    } })
}

/// The keys of the identity that say where a file belongs (the offsets digest, checked by
/// the superchunk reader, changes with the file).
const IDENTITY_FIELDS: [&str; 3] = ["dataset", "store", "file"];

/// How that document is stored: small, plain, with its own digest, never grown.
pub(crate) fn identity_params() -> MetadataParams {
    MetadataParams {
        checksum: Checksum::Adler32,
        codec: MetaCodec::None,
        level: 0,
        growth_factor: 1,
    }
}

/// Where and how the chunks of one array are stored.
pub(crate) struct ChunkStore {
    storage: Arc<dyn Storage>,
    root: PathBuf,
    /// Data directory relative to the root (`data`, or `data/<column>`).
    dir: PathBuf,
    superchunksize: u64,
    checksum: Checksum,
    slack: u32,
    typesize: u8,
    varlen: bool,
    /// The dataset's identity and this store's key (`data`, or a table column's id), which
    /// every superchunk file of the store records; `None` for datasets made before files
    /// were bound to them.
    identity: Option<(String, String)>,
    /// The kind of the per-chunk statistics new files of the store record (`spec/dataset.md`
    /// §14); `None` for stores without (variable-length, complex, strings, layers).
    stats: Option<StatKind>,
    readers: Mutex<HashMap<u64, Arc<SuperchunkReader>>>,
    /// Decoded blocks kept for short reads near each other (off unless the dataset kind
    /// turns it on: an array does, a table's many columns do not).
    blocks: BlockCache,
}

/// The key under which a superchunk file's metadata records what it belongs to.
const IDENTITY_KEY: &str = "blz";

impl Drop for ChunkStore {
    fn drop(&mut self) {
        self.invalidate();
    }
}

impl std::fmt::Debug for ChunkStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkStore")
            .field("dir", &self.dir)
            .finish()
    }
}

/// The superchunk file name of file number `f` (0-based): `__{f+1}__.bin`.
pub(crate) fn superchunk_name(f: u64) -> String {
    format!("__{}__.bin", f + 1)
}

impl ChunkStore {
    pub(crate) fn new(
        storage: Arc<dyn Storage>,
        root: &Path,
        dir: PathBuf,
        superchunksize: u64,
        checksum: Checksum,
        slack: u32,
        typesize: u8,
    ) -> ChunkStore {
        ChunkStore {
            storage,
            root: root.to_path_buf(),
            dir,
            superchunksize: superchunksize.max(1),
            checksum,
            slack,
            typesize,
            varlen: false,
            identity: None,
            stats: None,
            readers: Mutex::new(HashMap::new()),
            blocks: BlockCache::new(0),
        }
    }

    /// Binds the store's files to dataset `dataset` and store `store`: files written record
    /// it, files read must carry it.
    pub(crate) fn bind(&mut self, dataset: &str, store: &str) {
        self.identity = Some((dataset.to_string(), store.to_string()));
    }

    /// Makes new files of a bound store record per-chunk statistics of kind `kind`.
    pub(crate) fn set_stats(&mut self, kind: Option<StatKind>) {
        self.stats = kind;
    }

    /// The kind of statistics the store's files record, if any.
    pub(crate) fn stats_kind(&self) -> Option<StatKind> {
        self.stats
    }

    /// What superchunk file `f` records about where it belongs, and, for a store with
    /// statistics, room for one statistics record per offsets slot (all unknown).
    fn identity_doc(&self, f: u64) -> Option<serde_json::Value> {
        self.identity.as_ref().map(|(dataset, store)| {
            let mut doc = identity_doc(dataset, store, f);
            if let (Some(_), Some(serde_json::Value::Object(b))) =
                (self.stats, doc.get_mut(IDENTITY_KEY))
            {
                b.insert(
                    stats::STATS_KEY.into(),
                    stats::unknown_records(self.superchunksize).into(),
                );
                b.insert(
                    stats::sums::SUMS_KEY.into(),
                    stats::unknown_records(self.superchunksize).into(),
                );
            }
            doc
        })
    }

    /// The statistics of the chunks of file `f` (its first `n` chunks), as its metadata
    /// records them: `None` for a file without records (written before statistics
    /// existed) or a store without statistics.
    ///
    /// # Errors
    /// Opening the file's reader (I/O, a damaged header or metadata section, a file that
    /// belongs elsewhere).
    pub(crate) fn file_stats(&self, f: u64, n: u64) -> Result<Option<Vec<Option<ChunkStats>>>> {
        let Some(kind) = self.stats else {
            return Ok(None);
        };
        let r = self.reader(f)?;
        Ok(stats::file_records(kind, r.metadata(), n.min(r.nchunks())))
    }

    /// The statistics of the store's first `n` chunks, file by file; all unknown when the
    /// dataset's `meta/sizes` does not vouch for them (`trusted` false) or the store has none.
    ///
    /// The records are gathered file by file, and a file that cannot be opened ends it with
    /// its error before anything is sized by `n`: a `meta/sizes` claiming more chunks than its
    /// files hold (what `verify` is given to examine) never sizes an allocation.
    ///
    /// # Errors
    /// Opening a superchunk file (I/O, damage, a file that belongs elsewhere).
    pub(crate) fn chunk_stats(&self, n: u64, trusted: bool) -> Result<Vec<Option<ChunkStats>>> {
        let mut out: Vec<Option<ChunkStats>> = Vec::new();
        if trusted && self.stats.is_some() {
            let ss = self.superchunksize;
            for f in 0..self.nfiles(n) {
                let first = f * ss;
                let count = ss.min(n - first);
                let recs = self.file_stats(f, count)?;
                let end = (first + count) as usize;
                if let Some(recs) = recs {
                    out.extend(recs.into_iter().take(count as usize));
                }
                out.resize(end, None);
            }
        }
        out.resize(n as usize, None);
        Ok(out)
    }

    /// Checks that superchunk file `f` belongs where it is: this dataset, this store, this
    /// position.
    fn check_identity(&self, r: &SuperchunkReader, f: u64) -> Result<()> {
        let Some(want) = self.identity_doc(f) else {
            return Ok(());
        };
        let got = r.metadata().and_then(|m| m.get(IDENTITY_KEY));
        if let (Some(g), Some(w)) = (got, want.get(IDENTITY_KEY)) {
            if IDENTITY_FIELDS.iter().all(|k| g.get(k) == w.get(k)) {
                return Ok(());
            }
        }
        let what = |v: Option<&serde_json::Value>| match v {
            Some(v) => format!(
                "dataset {}, store {}, file {}",
                v["dataset"], v["store"], v["file"]
            ),
            None => "nothing (no identity)".to_string(),
        };
        Err(Error::header(
            self.file_path(f),
            format!(
                "this file belongs to {}, not here ({})",
                what(got),
                what(want.get(IDENTITY_KEY))
            ),
        ))
    }

    /// Marks the store as holding variable-length items (superchunk option bit 2).
    pub(crate) fn set_varlen(&mut self, varlen: bool) {
        self.varlen = varlen;
    }

    /// The data directory, relative to the root.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Chunks per superchunk file.
    pub(crate) fn superchunksize(&self) -> u64 {
        self.superchunksize
    }

    /// Path of superchunk file `f`, relative to the root.
    pub(crate) fn file_rel(&self, f: u64) -> PathBuf {
        self.dir.join(superchunk_name(f))
    }

    /// Absolute path of superchunk file `f`.
    pub(crate) fn file_path(&self, f: u64) -> PathBuf {
        self.root.join(self.file_rel(f))
    }

    /// Number of superchunk files `n` chunks occupy.
    pub(crate) fn nfiles(&self, n: u64) -> u64 {
        n.div_ceil(self.superchunksize)
    }

    /// Removes what an interrupted writer can leave in the store's directory: superchunk
    /// files past the `nchunks` committed chunks (an operation that crashed before its
    /// commit) and `*.tmp` files (a compaction that crashed before its rename). Only a
    /// writer may call this: a reader must not touch the files. A storage whose publish is
    /// the commit (an object store) has none to remove: a writer that stopped before it left
    /// nothing in the dataset, and a commit publishes a shrink's removals with its sizes. So
    /// there the open lists nothing (a listing of a dataset with manifests reads them all).
    pub(crate) fn remove_strays(&self, nchunks: u64) -> Result<()> {
        let dir = self.root.join(&self.dir);
        if self.storage.commits_by_publish() || !self.storage.is_dir(&dir) {
            return Ok(());
        }
        let nfiles = self.nfiles(nchunks);
        for name in self.storage.list(&dir)? {
            let stray = match name
                .strip_prefix("__")
                .and_then(|s| s.strip_suffix("__.bin"))
                .and_then(|s| s.parse::<u64>().ok())
            {
                Some(num) => num > nfiles || num == 0,
                None => name.ends_with(".tmp"),
            };
            let path = dir.join(&name);
            if stray && !self.storage.is_dir(&path) {
                self.storage.remove_file(&path)?;
            }
        }
        Ok(())
    }

    /// The numbers (0-based) of the superchunk files present in the store's directory, from
    /// one listing: what a walk over a store checks against, so that a shape naming far
    /// more files than exist costs a listing, not a look-up per missing file.
    ///
    /// # Errors
    /// An I/O error listing the directory.
    pub(crate) fn present_files(&self) -> Result<std::collections::BTreeSet<u64>> {
        let dir = self.root.join(&self.dir);
        if !self.storage.is_dir(&dir) {
            return Ok(Default::default());
        }
        Ok(self
            .storage
            .list(&dir)?
            .iter()
            .filter_map(|name| {
                name.strip_prefix("__")
                    .and_then(|s| s.strip_suffix("__.bin"))
                    .and_then(|s| s.parse::<u64>().ok())
                    .and_then(|n| n.checked_sub(1))
            })
            .collect())
    }

    /// Compacts the files holding the first `nchunks` chunks: writes a compacted copy of
    /// each beside it (`__<n>__.bin.tmp`) and renames it over the original. Each rename is
    /// atomic and both versions hold the same chunks, so a crash leaves every file readable
    /// and needs no journal; a writer's next open removes a leftover copy
    /// ([`remove_strays`](Self::remove_strays)). Returns the bytes saved.
    pub(crate) fn compact(&self, nchunks: u64) -> Result<u64> {
        let nfiles = self.nfiles(nchunks);
        let mut saved = 0;
        for f in 0..nfiles {
            let path = self.file_path(f);
            let r = self.reader(f)?;
            let before = r.layout().file_len;
            let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
            tmp_name.push(".tmp");
            let tmp = path.with_file_name(tmp_name);
            let copied = self
                .storage
                .open(&tmp, OpenMode::Create)
                .and_then(|out| crate::blpk::compact(&r, out, self.slack))
                .and_then(|after| self.storage.rename(&tmp, &path).map(|()| after));
            let after = match copied {
                Ok(after) => after,
                Err(e) => {
                    // A full disk should not stay full because of the copy: remove it.
                    let _ = self.storage.remove_file(&tmp);
                    return Err(e);
                }
            };
            saved += before.saturating_sub(after);
        }
        if nfiles > 0 {
            self.storage.sync_dir(&self.root.join(&self.dir))?;
        }
        self.invalidate();
        Ok(saved)
    }

    /// Drops cached readers and decoded blocks (after a commit changed the files).
    pub(crate) fn invalidate(&self) {
        self.blocks.clear();
        if let Ok(mut r) = self.readers.lock() {
            uncache(r.len());
            r.clear();
        }
    }

    fn forget_reader(&self, f: u64) {
        if let Ok(mut m) = self.readers.lock() {
            if m.remove(&f).is_some() {
                uncache(1);
            }
        }
    }

    /// How many requests to keep in flight where each unit of work is a few of them (an
    /// object store's [`Storage::concurrent_reads`], for [`on_io_threads`]); elsewhere the
    /// CPU threads.
    pub(crate) fn io_threads(&self) -> usize {
        self.storage
            .concurrent_reads()
            .unwrap_or_else(rayon::current_num_threads)
            .max(1)
    }

    /// Runs `work` on every item of `items`, in parallel, as `par_iter().try_for_each_init`
    /// would; `chunk_of` says which chunk an item reads, `span_of` which of its
    /// uncompressed bytes when the item decodes only those (`None`: the whole chunk). Where
    /// every read is a request (an object store), the items are taken file by file (files
    /// in parallel): the bytes a file's items need are fetched first, together (one request
    /// per run of chunks lying close, `spec/object-store.md` §4): of a chunk whose items
    /// all decode a few bytes and whose blocks the storage indexes, just the Blosc blocks
    /// holding them ([`SuperchunkReader::block_read_range`]); of the others, the whole
    /// chunk. `work` gets them in its [`Fetched`] to decode from. Elsewhere `work` gets
    /// nothing fetched and reads each chunk itself.
    pub(crate) fn for_each_fetched<T, S>(
        &self,
        items: &[T],
        chunk_of: impl Fn(&T) -> u64 + Sync,
        span_of: impl Fn(&T) -> Option<std::ops::Range<usize>> + Sync,
        init: impl Fn() -> S + Sync + Send,
        work: impl Fn(&mut S, &T, &Fetched) -> Result<()> + Sync + Send,
    ) -> Result<()>
    where
        T: Sync,
    {
        use rayon::prelude::*;
        if !self.batches_reads() {
            let none = Fetched::default();
            return items
                .par_iter()
                .try_for_each_init(&init, |s, it| work(s, it, &none));
        }
        let mut by_file: BTreeMap<u64, BTreeMap<u64, Vec<&T>>> = BTreeMap::new();
        for it in items {
            let (f, j) = self.locate(chunk_of(it));
            by_file.entry(f).or_default().entry(j).or_default().push(it);
        }
        let files: Vec<(u64, BTreeMap<u64, Vec<&T>>)> = by_file.into_iter().collect();
        let part = self.storage.read_part_size().unwrap_or(u64::MAX).max(1);
        let inflight = self.io_threads();
        // First each file's plan: what each chunk's items need read (its blocks holding the
        // bytes they decode, or all of it), in groups of about one request's bytes. A
        // file's reader may need a request of its own (a file without a front copy).
        let plans = on_io_threads(&files, inflight, |(f, by_chunk)| {
            let r = self.reader(*f)?;
            let mut reads: Vec<(u64, Read)> = Vec::new();
            // Chunks left to their items: those whose items lie in a block the block cache
            // holds (read from there), and those the file cannot place (the items report
            // why).
            let mut left: Vec<&T> = Vec::new();
            for (&j, its) in by_chunk {
                let need = its
                    .iter()
                    .try_fold(None, |acc: Option<std::ops::Range<usize>>, it| {
                        let s = span_of(it)?;
                        Some(Some(match acc {
                            Some(a) => a.start.min(s.start)..a.end.max(s.end),
                            None => s,
                        }))
                    });
                let need = need.flatten();
                let k = f * self.superchunksize + j;
                if need.as_ref().is_some_and(|n| self.block_cached(k, n)) {
                    left.extend(its);
                    continue;
                }
                let blocks =
                    need.and_then(|n| r.block_read_range(j, n.start, n.len()).ok().flatten());
                match (blocks, r.chunk_read_range(j)) {
                    (Some(b), _) => reads.push((j, Read::Blocks(b))),
                    (None, Ok(c)) => reads.push((j, Read::Chunk(c))),
                    (None, Err(_)) => left.extend(its),
                }
            }
            let mut groups: Vec<Vec<(u64, Read)>> = Vec::new();
            let mut bytes = 0u64;
            for (j, rd) in reads {
                let len = rd.range().end - rd.range().start;
                if groups.is_empty() || (bytes > 0 && bytes.saturating_add(len) > part) {
                    groups.push(Vec::new());
                    bytes = 0;
                }
                bytes += len;
                if let Some(g) = groups.last_mut() {
                    g.push((j, rd));
                }
            }
            Ok((r, groups, left))
        })?;
        // Then every group of every file, as many in flight as the storage keeps: each
        // fetched apart, its chunks decoded (on the CPU threads) as soon as their bytes are
        // in, while the rest of the group and the other groups still stream in.
        let groups: Vec<(usize, &Vec<(u64, Read)>)> = plans
            .iter()
            .enumerate()
            .flat_map(|(i, (_, gs, _))| gs.iter().map(move |g| (i, g)))
            .collect();
        on_io_threads(&groups, inflight, |&(i, g)| {
            let by_chunk = &files[i].1;
            let r = &plans[i].0;
            let failed: Mutex<Option<Error>> = Mutex::new(None);
            let fail = |e: Error| {
                failed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get_or_insert(e);
            };
            let do_chunk = |j: u64, fetched: &Fetched| {
                let mut state = init();
                for it in by_chunk.get(&j).into_iter().flatten() {
                    if let Err(e) = work(&mut state, it, fetched) {
                        fail(e);
                        return;
                    }
                }
            };
            let ranges: Vec<std::ops::Range<u64>> =
                g.iter().map(|(_, rd)| rd.range().clone()).collect();
            decode_pool()?.in_place_scope(|s| {
                let got = r.fetch_ranges_each(&ranges, &|n, bytes| {
                    let (j, rd) = &g[n];
                    let mut fetched = Fetched {
                        reader: Some(Arc::clone(r)),
                        ..Fetched::default()
                    };
                    match rd {
                        Read::Chunk(_) => fetched.chunks.insert(*j, bytes),
                        Read::Blocks(b) => fetched.blocks.insert(*j, (b.start, bytes)).map(|x| x.1),
                    };
                    let (do_chunk, j) = (&do_chunk, *j);
                    s.spawn(move |_| do_chunk(j, &fetched));
                });
                if let Err(e) = got {
                    fail(e);
                }
            });
            match failed
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
            {
                Some(e) => Err(e),
                None => Ok(()),
            }
        })?;
        // The items left out of the reads, by themselves.
        plans
            .iter()
            .flat_map(|(r, _, left)| left.iter().map(move |it| (r, *it)))
            .collect::<Vec<_>>()
            .par_iter()
            .try_for_each_init(&init, |s, (r, it)| {
                let none = Fetched {
                    reader: Some(Arc::clone(r)),
                    ..Fetched::default()
                };
                work(s, it, &none)
            })
    }

    /// Whether many chunks are better fetched together than read one by one (every read is
    /// a request: an object store).
    fn batches_reads(&self) -> bool {
        self.storage.concurrent_reads().is_some()
    }

    /// Where every read is a request (an object store): the reads worth keeping in flight
    /// and the bytes one request should carry ([`Storage::read_part_size`]); `None`
    /// elsewhere, where chunks are best read one by one.
    pub(crate) fn read_batching(&self) -> Option<(usize, u64)> {
        let n = self.storage.concurrent_reads()?;
        Some((n, self.storage.read_part_size().unwrap_or(u64::MAX).max(1)))
    }

    /// The bytes of chunks `k0..k1` (of one file), fetched together: one request per run
    /// lying close (see [`SuperchunkReader::fetch_chunks`]), for
    /// [`decompress_fetched`](Self::decompress_fetched).
    pub(crate) fn fetch_run(&self, k0: u64, k1: u64) -> Result<Fetched> {
        let (f, j0) = self.locate(k0);
        let r = self.reader(f)?;
        let ks: Vec<u64> = (j0..j0 + k1.saturating_sub(k0)).collect();
        Ok(Fetched {
            chunks: r.fetch_chunks(&ks)?.into_iter().collect(),
            reader: Some(r),
            blocks: HashMap::new(),
        })
    }

    pub(crate) fn reader(&self, f: u64) -> Result<Arc<SuperchunkReader>> {
        use std::sync::atomic::Ordering;
        if let Some(r) = self.readers.lock().ok().and_then(|m| m.get(&f).cloned()) {
            return Ok(r);
        }
        let file = self.storage.open(&self.file_path(f), OpenMode::Read)?;
        let r = Arc::new(SuperchunkReader::open(file)?);
        self.check_identity(&r, f)?;
        let budget = crate::storage::descriptor_budget(MAX_CACHED_READERS);
        if CACHED_READERS.fetch_add(1, Ordering::Relaxed) < budget {
            match self.readers.lock() {
                Ok(mut m) => {
                    if m.insert(f, r.clone()).is_some() {
                        uncache(1);
                    }
                }
                Err(_) => uncache(1),
            }
        } else {
            uncache(1);
        }
        Ok(r)
    }

    /// Chunk `k`'s superchunk file and its index there.
    pub(crate) fn locate(&self, k: u64) -> (u64, u64) {
        (k / self.superchunksize, k % self.superchunksize)
    }

    /// Runs `op` on the reader of chunk `k`'s file with `k`'s index in it. A reader whose
    /// cached layout went stale (another handle committed since) is reloaded once before an
    /// error is reported.
    fn with_reader<T>(
        &self,
        k: u64,
        op: impl FnMut(&SuperchunkReader, u64) -> Result<T>,
    ) -> Result<T> {
        let r = self.reader(self.locate(k).0)?;
        self.stale_retried(k, &r, op)
    }

    /// [`with_reader`](Self::with_reader), starting from the reader `fetched`'s bytes came
    /// through when there is one (the cache may hold another by now: the bytes are its
    /// file's, placed by its layout), so that what was fetched is what is decoded.
    fn with_fetched_reader<T>(
        &self,
        k: u64,
        fetched: &Fetched,
        op: impl FnMut(&SuperchunkReader, u64) -> Result<T>,
    ) -> Result<T> {
        match fetched.reader.as_deref() {
            Some(r) => self.stale_retried(k, r, op),
            None => self.with_reader(k, op),
        }
    }

    /// `op` on `r` (the reader of chunk `k`'s file) and `k`'s index in it; on a corrupt or
    /// missing chunk, once more on the file's reader loaded afresh.
    fn stale_retried<T>(
        &self,
        k: u64,
        r: &SuperchunkReader,
        mut op: impl FnMut(&SuperchunkReader, u64) -> Result<T>,
    ) -> Result<T> {
        let (f, j) = self.locate(k);
        match op(r, j) {
            Err(e) if e.is_corruption() || matches!(e, Error::ChunkOutOfRange { .. }) => {
                self.forget_reader(f);
                let fresh = self.reader(f)?;
                op(&fresh, j)
            }
            done => done,
        }
    }

    /// Reads chunk `k`'s verified compressed bytes into `buf` (see
    /// [`with_reader`](Self::with_reader) for stale readers).
    pub(crate) fn read_chunk(&self, k: u64, buf: &mut Vec<u8>) -> Result<()> {
        self.with_reader(k, |r, j| r.read_chunk_into(j, buf))
    }

    /// Reads and decompresses chunk `k` into `dst` (exactly a chunk's bytes), with
    /// [`SuperchunkReader::decompress_chunk_into`].
    pub(crate) fn decompress_chunk(
        &self,
        k: u64,
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        self.with_reader(k, |r, j| r.decompress_chunk_into(j, dst, scratch, 1))
    }

    /// [`decompress_chunk`](Self::decompress_chunk) from the chunk's bytes in `fetched`
    /// when they are there (decoded through the reader they came through), else read now.
    pub(crate) fn decompress_fetched(
        &self,
        k: u64,
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
        fetched: &Fetched,
    ) -> Result<()> {
        self.with_fetched_reader(k, fetched, |r, j| match fetched.first(r, j) {
            Some(b) => r.decompress_chunk_from(j, b, dst, scratch),
            None => r.decompress_chunk_into(j, dst, scratch, 1),
        })
    }

    /// [`getitem`](Self::getitem) from the chunk's bytes in `fetched` when they are there.
    pub(crate) fn getitem_fetched(
        &self,
        k: u64,
        byte_start: usize,
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
        fetched: &Fetched,
    ) -> Result<()> {
        // Nothing fetched for it (the block cache holds it, or it is unreadable): read it
        // through the cache.
        let j = self.locate(k).1;
        if fetched.reader.is_none()
            || !(fetched.chunks.contains_key(&j) || fetched.blocks.contains_key(&j))
        {
            return self.getitem(k, byte_start, dst, scratch);
        }
        self.with_fetched_reader(k, fetched, |r, j| {
            if let Some((at, b)) = fetched.blocks(r, j) {
                if self.keep_fetched_block(k, r, j, (at, b), byte_start, dst, scratch)? {
                    return Ok(());
                }
                return r.getitem_blocks(j, at, b, byte_start, dst, scratch);
            }
            match fetched.first(r, j) {
                Some(b) => r.getitem_from(j, b, byte_start, dst, scratch),
                None => r.getitem_into(j, byte_start, dst, scratch),
            }
        })
    }

    /// Whether the block cache holds the one block of chunk `k` that its uncompressed bytes
    /// `span` lie in.
    fn block_cached(&self, k: u64, span: &std::ops::Range<usize>) -> bool {
        self.blocks.geometry(k).is_some_and(|g| {
            one_block(g, span.start, span.len()).is_some_and(|b| self.blocks.holds(k, b))
        })
    }

    /// For a short read of chunk `k` (`j` of the file `r` reads) inside one block, whose
    /// fetched blocks `fetched` hold: [`keep_block`](Self::keep_block), decoding the block
    /// from those bytes (the geometry from the storage's block index).
    #[allow(clippy::too_many_arguments)]
    fn keep_fetched_block(
        &self,
        k: u64,
        r: &SuperchunkReader,
        j: u64,
        fetched: (u64, &[u8]),
        byte_start: usize,
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<bool> {
        let Some(h) = r.indexed_header(j).filter(|_| self.blocks.max_bytes() > 0) else {
            return Ok(false);
        };
        let g = (h.blocksize as usize, h.nbytes as usize);
        let Some(b) = one_block(g, byte_start, dst.len()) else {
            return Ok(false);
        };
        self.blocks.set_geometry(k, g);
        self.keep_block(k, g, b, byte_start, dst, |first, block| {
            r.getitem_blocks(j, fetched.0, fetched.1, first, block, scratch)
        })
    }

    /// For a short read of bytes `byte_start..byte_start + dst.len()` of chunk `k` (of block
    /// size and uncompressed size `g`) inside its block `b` ([`one_block`]): when a recent
    /// short read touched the block too, decodes it whole with `decode(first byte, block)`,
    /// keeps it in the block cache and answers from it (`true`).
    fn keep_block(
        &self,
        k: u64,
        g: (usize, usize),
        b: usize,
        byte_start: usize,
        dst: &mut [u8],
        decode: impl FnOnce(usize, &mut [u8]) -> Result<()>,
    ) -> Result<bool> {
        let cache = &self.blocks;
        let (bs, nbytes) = g;
        let first = b * bs;
        let len = bs.min(nbytes - first);
        if len > cache.max_bytes() || !cache.touch(k, b) {
            return Ok(false);
        }
        let mut block = vec![0u8; len];
        decode(first, &mut block)?;
        dst.copy_from_slice(&block[byte_start - first..byte_start - first + dst.len()]);
        cache.put(k, b, block);
        Ok(true)
    }

    /// Reads only bytes `byte_start..byte_start + dst.len()` of chunk `k`, decoded (c-blosc
    /// decodes the blocks holding them).
    pub(crate) fn getitem(
        &self,
        k: u64,
        byte_start: usize,
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        if self.cached_getitem(k, byte_start, dst, scratch)? {
            return Ok(());
        }
        self.with_reader(k, |r, j| r.getitem_into(j, byte_start, dst, scratch))
    }

    /// [`getitem`](Self::getitem) through the cache of decoded blocks, when the bytes lie in
    /// one block: from the cache, or by decoding the block whole and keeping it when a
    /// recent short read touched it too (`engine::block_cache`). `false` when the caller
    /// should read the bytes straight from the chunk.
    fn cached_getitem(
        &self,
        k: u64,
        byte_start: usize,
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<bool> {
        let cache = &self.blocks;
        if dst.is_empty() || cache.max_bytes() == 0 {
            return Ok(false);
        }
        let (bs, nbytes) = match cache.geometry(k) {
            Some(g) => g,
            None => {
                // Where every read is a request (an object store), the header comes from the
                // block index the storage keeps; without one, a header of its own would cost
                // a request: no cache there.
                let h = self.with_reader(k, |r, j| {
                    if r.small_reads_are_cheap() {
                        r.chunk_header(j).map(Some)
                    } else {
                        Ok(r.indexed_header(j))
                    }
                })?;
                let Some(h) = h else {
                    return Ok(false);
                };
                let g = (h.blocksize as usize, h.nbytes as usize);
                cache.set_geometry(k, g);
                g
            }
        };
        // The geometry only chooses which bytes to decode together: the bytes themselves
        // always come from the chunk, checked, so a header read wrong cannot change them.
        let Some(j) = one_block((bs, nbytes), byte_start, dst.len()) else {
            return Ok(false);
        };
        if cache.get(k, j, byte_start - j * bs, dst) {
            return Ok(true);
        }
        self.keep_block(k, (bs, nbytes), j, byte_start, dst, |first, block| {
            self.with_reader(k, |r, i| r.getitem_into(i, first, block, scratch))
        })
    }

    /// The bound of this store's cache of decoded blocks, in bytes (0: off).
    pub(crate) fn block_cache_bytes(&self) -> usize {
        self.blocks.max_bytes()
    }

    /// Sets the bound of this store's cache of decoded blocks (0 turns it off and empties
    /// it).
    pub(crate) fn set_block_cache_bytes(&self, max_bytes: usize) {
        self.blocks.set_max_bytes(max_bytes);
    }

    fn writer_options(&self, f: u64) -> WriterOptions {
        WriterOptions {
            checksum: self.checksum,
            typesize: self.typesize,
            offsets: true,
            max_app_chunks: self.superchunksize,
            slack: self.slack,
            scattered: self.slack > 0,
            varlen: self.varlen,
            metadata: self.identity_doc(f).map(|doc| (doc, identity_params())),
        }
    }
}

/// The block holding uncompressed bytes `byte_start..byte_start + len` of a chunk of block
/// size and uncompressed size `g`, when they lie in one block (and `len` is not 0).
fn one_block(g: (usize, usize), byte_start: usize, len: usize) -> Option<usize> {
    let (bs, nbytes) = g;
    let end = byte_start.checked_add(len)?;
    (bs > 0 && len > 0 && end <= nbytes && (end - 1) / bs == byte_start / bs)
        .then(|| byte_start / bs)
}

/// The stored bytes of chunks of one superchunk file, fetched together
/// ([`ChunkStore::for_each_fetched`]): by chunk index in the file, the bytes of its
/// [`SuperchunkReader::chunk_read_range`], as read through `reader`.
#[derive(Default)]
pub(crate) struct Fetched {
    reader: Option<Arc<SuperchunkReader>>,
    chunks: HashMap<u64, crate::storage::Bytes>,
    /// Chunks of which only some Blosc blocks were fetched: where in the file the bytes
    /// start, and the bytes ([`SuperchunkReader::block_read_range`]).
    blocks: HashMap<u64, (u64, crate::storage::Bytes)>,
}

/// The pool fetched chunks decode on: as many threads as the global pool's, and none of
/// them ever waits for a fetch. A read may run on every thread of the global pool at once
/// (a table's columns side by side, a caller's own `par_iter`), each waiting for its
/// fetching threads, which wait for their chunks' decoding: on the global pool that would
/// wait for itself.
fn decode_pool() -> Result<&'static rayon::ThreadPool> {
    // One per process: a forked child has none of its parent's pool's threads.
    static POOL: blz_format::process::PerProcess<rayon::ThreadPool> =
        blz_format::process::PerProcess::new();
    POOL.get_or_try_init(|| {
        // The global pool's size, as a thread outside every pool sees it (the caller may be
        // in a pool of its own): the threads this process decodes and encodes with
        // (`BLZ_NUM_THREADS`, one in a dask worker).
        let n = std::thread::scope(|s| {
            std::thread::Builder::new()
                .spawn_scoped(s, rayon::current_num_threads)
                .ok()
                .and_then(|t| t.join().ok())
        })
        .unwrap_or(1)
        .max(1);
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("blz-decode-{i}"))
            .build()
            .map_err(|e| Error::InvalidArgument(format!("cannot start {n} decoding threads: {e}")))
    })
}

/// Runs `f` on a pool of this process's own, of the global pool's size, when this process
/// is not `home` (a child forked from it, whose copy of rayon's global pool has no threads:
/// any parallel work there would wait for ever); else runs it as it is. Python's module
/// runs every call this way, `home` the process that imported it.
///
/// # Errors
/// [`Error::InvalidArgument`] when the child's threads cannot be started.
pub fn in_this_process<R: Send>(home: u32, f: impl FnOnce() -> R + Send) -> Result<R> {
    if !blz_format::process::forked_since(home) {
        return Ok(f());
    }
    static POOL: blz_format::process::PerProcess<rayon::ThreadPool> =
        blz_format::process::PerProcess::new();
    let pool = POOL.get_or_try_init(|| {
        let n = rayon::current_num_threads().max(1);
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("blz-{i}"))
            .build()
            .map_err(|e| Error::InvalidArgument(format!("cannot start {n} threads: {e}")))
    })?;
    Ok(pool.install(f))
}

/// `each` of every unit of `units`, on up to `threads` threads of their own (blocking
/// threads: they wait on requests, and what they hand to rayon is decoded on the CPU
/// threads), in order of the units taken; the results in the units' order. The first
/// error stops the threads taking more units and is returned. One unit runs on the calling
/// thread.
pub(crate) fn on_io_threads<U: Sync, R: Send>(
    units: &[U],
    threads: usize,
    each: impl Fn(&U) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    if units.len() <= 1 || threads <= 1 {
        return units.iter().map(&each).collect();
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let out: Vec<Mutex<Option<Result<R>>>> = units.iter().map(|_| Mutex::new(None)).collect();
    let take = || {
        while !stop.load(Ordering::Relaxed) {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(u) = units.get(i) else { return };
            let got = each(u);
            if got.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            *out[i]
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(got);
        }
    };
    std::thread::scope(|sc| {
        for _ in 1..threads.min(units.len()) {
            // A thread the system refuses (a process at its limit) is one fewer in flight:
            // the others, and this one, take its units.
            if std::thread::Builder::new()
                .name("blz-fetch".into())
                .spawn_scoped(sc, take)
                .is_err()
            {
                break;
            }
        }
        take();
    });
    let mut results = Vec::with_capacity(units.len());
    let mut first_err = None;
    for slot in out {
        match slot
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            Some(Ok(r)) => results.push(r),
            Some(Err(e)) => {
                first_err.get_or_insert(e);
            }
            None => {}
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(results),
    }
}

/// What [`ChunkStore::for_each_fetched`] reads of a chunk: the file's bytes of the whole
/// chunk, or of its blocks a short read decodes.
enum Read {
    Chunk(std::ops::Range<u64>),
    Blocks(std::ops::Range<u64>),
}

impl Read {
    fn range(&self) -> &std::ops::Range<u64> {
        match self {
            Read::Chunk(r) | Read::Blocks(r) => r,
        }
    }
}

impl Fetched {
    /// The fetched bytes of chunk `j` of the file `r` reads, if any: only when `r` is the
    /// reader they were fetched through (a reader reloaded since may place the chunk
    /// elsewhere).
    fn first(&self, r: &SuperchunkReader, j: u64) -> Option<&[u8]> {
        self.mine(r)
            .then(|| self.chunks.get(&j).map(|b| &b[..]))
            .flatten()
    }

    /// The fetched blocks of chunk `j` (where they start in the file, and their bytes), on
    /// the terms of [`first`](Self::first).
    fn blocks(&self, r: &SuperchunkReader, j: u64) -> Option<(u64, &[u8])> {
        self.mine(r)
            .then(|| self.blocks.get(&j).map(|(at, b)| (*at, &b[..])))
            .flatten()
    }

    fn mine(&self, r: &SuperchunkReader) -> bool {
        self.reader.as_deref().is_some_and(|m| std::ptr::eq(m, r))
    }
}

/// The writes of one operation to one [`ChunkStore`], inside a [`Txn`].
pub(crate) struct ChunkWrites<'s> {
    store: &'s ChunkStore,
    /// Chunks committed before the operation.
    committed: u64,
    /// Chunks after the operation so far.
    count: u64,
    /// From this chunk on, every chunk is rewritten in order (truncate, then append), which
    /// keeps plain files plain.
    rewrite_from: Option<u64>,
    writers: BTreeMap<u64, (SuperchunkWriter, u64, u64)>,
    /// Change in stored bytes.
    pub(crate) cbytes_delta: i64,
    /// Change in uncompressed chunk bytes.
    pub(crate) nbytes_delta: i64,
}

impl<'s> ChunkWrites<'s> {
    /// Starts writing to a store that holds `committed` chunks. With `rewrite_from`, every
    /// chunk from that index on will be put again, in order.
    pub(crate) fn new(store: &'s ChunkStore, committed: u64, rewrite_from: Option<u64>) -> Self {
        ChunkWrites {
            store,
            committed,
            count: rewrite_from.map_or(committed, |r| r.min(committed)),
            rewrite_from,
            writers: BTreeMap::new(),
            cbytes_delta: 0,
            nbytes_delta: 0,
        }
    }

    fn writer(&mut self, txn: &mut Txn<'_>, f: u64) -> Result<&mut SuperchunkWriter> {
        if !self.writers.contains_key(&f) {
            let s = self.store;
            let rel = s.file_rel(f);
            let exists = f * s.superchunksize < self.committed;
            let w = if exists {
                // Nothing is written into a file that is not this store's file `f`.
                s.reader(f)?;
                let file = txn.storage().open(&s.root.join(&rel), OpenMode::Read)?;
                let mut w = SuperchunkWriter::open(file.as_ref(), s.slack)?;
                let local_committed = (self.committed - f * s.superchunksize).min(s.superchunksize);
                if w.nchunks() != local_committed {
                    return Err(Error::header(
                        s.root.join(&rel),
                        format!(
                            "file holds {} chunks, the dataset's committed size needs {local_committed}",
                            w.nchunks()
                        ),
                    ));
                }
                txn.open_existing(&rel, w.alloc_end())?;
                let before = w.stored_bytes();
                let nbefore = w.uncompressed_bytes();
                if let Some(r) = self.rewrite_from {
                    let first = f * s.superchunksize;
                    if r < first + local_committed {
                        let keep = r.saturating_sub(first);
                        for wr in w.plan_truncate(keep) {
                            txn.write(&rel, wr.offset, wr.data)?;
                        }
                    }
                }
                (w, before, nbefore)
            } else {
                txn.create(&rel)?;
                let (w, writes) = SuperchunkWriter::create(&s.file_path(f), &s.writer_options(f))?;
                for wr in writes {
                    txn.write(&rel, wr.offset, wr.data)?;
                }
                (w, 0, 0)
            };
            self.writers.insert(f, w);
        }
        self.writers
            .get_mut(&f)
            .map(|(w, _, _)| w)
            .ok_or_else(|| Error::InvalidArgument("superchunk writer missing".into()))
    }

    /// Puts compressed chunk `k`: replaces it if it exists (and is not being rewritten), or
    /// appends it (`k` must then be the next chunk). Returns the chunk's buffer, emptied, for
    /// the caller to compress the next chunk into.
    ///
    /// `stats` are the chunk's statistics (`None`: unknown), recorded in the file's metadata
    /// when the file has room for them; the record goes out with the operation's seal, in the
    /// same transaction as the chunk.
    pub(crate) fn put(
        &mut self,
        txn: &mut Txn<'_>,
        k: u64,
        chunk: Vec<u8>,
        stats: Option<&ChunkStats>,
    ) -> Result<Vec<u8>> {
        let s = self.store;
        let (f, j) = (k / s.superchunksize, k % s.superchunksize);
        let rel = s.file_rel(f);
        let rewriting = self.rewrite_from.is_some_and(|r| k >= r);
        let exists = k < self.committed && !rewriting;
        let count = self.count;
        let w = self.writer(txn, f)?;
        let writes = if exists {
            w.plan_replace(j, chunk)?.1
        } else {
            if k != count {
                return Err(Error::InvalidArgument(format!(
                    "chunk {k} written out of order (next is {count})"
                )));
            }
            w.plan_append(chunk)?.ok_or_else(|| {
                Error::header(s.file_path(f), "superchunk file has no free offsets slot")
            })?
        };
        if s.stats.is_some()
            && w.document()
                .and_then(|d| d.get(IDENTITY_KEY))
                .is_some_and(|b| b.get(stats::STATS_KEY).is_some())
        {
            let record = stats::encode_record(stats);
            w.update_document(|d| stats::set_slot(d, stats::STATS_KEY, j, &record));
            // Files made before sums existed have no room for them (§14.5).
            if stats::sums::has_sums(w.document()) {
                let sum = stats::sums::encode_sum(stats.and_then(|s| s.sum.as_ref()));
                w.update_document(|d| stats::set_slot(d, stats::sums::SUMS_KEY, j, &sum));
            }
        }
        let mut spare = Vec::new();
        for wr in writes {
            txn.write_slice(&rel, wr.offset, &wr.data)?;
            if wr.data.capacity() > spare.capacity() {
                spare = wr.data;
            }
        }
        if !exists {
            self.count += 1;
            if j + 1 == s.superchunksize {
                // The file is full: nothing more is appended to it in this operation.
                self.seal(txn, f)?;
                txn.done_with(&rel)?;
            }
        }
        spare.clear();
        Ok(spare)
    }

    /// Drops every chunk from `n` on (files past the last one are removed at commit): the
    /// chunks put so far, and committed chunks not rewritten yet (with `rewrite_from`).
    pub(crate) fn truncate(&mut self, txn: &mut Txn<'_>, n: u64) -> Result<()> {
        let s = self.store;
        let end = self.count.max(self.committed);
        if n >= end {
            return Ok(());
        }
        let keep_files = s.nfiles(n);
        for f in keep_files..s.nfiles(end) {
            if f * s.superchunksize < self.committed {
                // A committed file: count its bytes out, remove it at commit.
                let (before, nbefore) = match self.writers.remove(&f) {
                    Some((_, b, nb)) => (b, nb),
                    None => {
                        let file = txn.storage().open(&s.file_path(f), OpenMode::Read)?;
                        let w = SuperchunkWriter::open(file.as_ref(), s.slack)?;
                        (w.stored_bytes(), w.uncompressed_bytes())
                    }
                };
                self.cbytes_delta -= before as i64;
                self.nbytes_delta -= nbefore as i64;
            } else {
                self.writers.remove(&f);
            }
            txn.remove(&s.file_rel(f));
        }
        if !n.is_multiple_of(s.superchunksize) {
            let f = n / s.superchunksize;
            let rel = s.file_rel(f);
            let w = self.writer(txn, f)?;
            for wr in w.plan_truncate(n % s.superchunksize) {
                txn.write(&rel, wr.offset, wr.data)?;
            }
        }
        self.count = n;
        Ok(())
    }

    /// Writes file `f`'s offsets digest if its table changed (after the writes that changed
    /// it, so the journal applies them in that order).
    fn seal(&mut self, txn: &mut Txn<'_>, f: u64) -> Result<()> {
        if let Some((w, _, _)) = self.writers.get_mut(&f) {
            if let Some(wr) = w.plan_seal()? {
                txn.write(&self.store.file_rel(f), wr.offset, wr.data)?;
            }
        }
        Ok(())
    }

    /// Finishes: records the stored-bytes change and trims files whose tail was freed.
    /// Returns the change in stored bytes.
    pub(crate) fn finish(self, txn: &mut Txn<'_>) -> Result<i64> {
        self.finish_both(txn).map(|(c, _)| c)
    }

    /// As [`finish`](Self::finish), returning the changes in stored and in uncompressed
    /// chunk bytes.
    pub(crate) fn finish_both(mut self, txn: &mut Txn<'_>) -> Result<(i64, i64)> {
        let s = self.store;
        for (f, (mut w, before, nbefore)) in std::mem::take(&mut self.writers) {
            self.cbytes_delta += w.stored_bytes() as i64 - before as i64;
            self.nbytes_delta += w.uncompressed_bytes() as i64 - nbefore as i64;
            let rel = s.file_rel(f);
            if let Some(wr) = w.plan_seal()? {
                txn.write(&rel, wr.offset, wr.data)?;
            }
            if f * s.superchunksize < self.committed {
                let len = txn.file(&rel)?.len()?;
                if w.alloc_end() < len {
                    txn.set_len(&rel, w.alloc_end());
                }
            }
        }
        Ok((self.cbytes_delta, self.nbytes_delta))
    }
}
