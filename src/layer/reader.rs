//! Reading layer datasets: [`Layer`] opens one, [`Cursor`] walks and searches one row group.
//!
//! Every chunk is read through a verified superchunk read (its digest is checked), so a
//! corrupt index, row-group, filter or data chunk is reported as an error, never used.

use super::filter::BlockFilter;
use super::value::{self, hash64, Value, ValueType};
use super::{data_dir, FilterMeta, LayerColumn, LayerSizes, LayerStorage, LAYER_KIND};
use crate::blosc;
use crate::column::varlen::decode_items;
use crate::column::LeafKind;
use crate::dtype::DType;
use crate::engine::{ChunkStore, Mode, Root};
use crate::error::{Error, Result};
use crate::meta::{self, Kind, MetaPaths};
use crate::storage::{self, Storage};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};

/// Chunks read from storage (cache misses) since the layer was opened or the counters reset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Value-index chunks.
    pub index_chunks: u64,
    /// Data chunks.
    pub data_chunks: u64,
    /// Filter chunks.
    pub filter_chunks: u64,
    /// Row-group index chunks.
    pub rowgroup_chunks: u64,
    /// Weight chunks.
    pub weight_chunks: u64,
}

#[derive(Default)]
struct Counters([AtomicU64; 5]);

const C_INDEX: usize = 0;
const C_DATA: usize = 1;
const C_FILTER: usize = 2;
const C_ROWGROUP: usize = 3;
const C_WEIGHT: usize = 4;

impl Counters {
    fn bump(&self, i: usize) {
        self.0[i].fetch_add(1, AtomicOrdering::Relaxed);
    }
}

#[derive(Clone)]
enum Cached {
    Items(Arc<Vec<Vec<u8>>>),
    Ends(Arc<Vec<u64>>),
    Filter(Arc<BlockFilter>),
}

/// What the index and the filter say about a value, before any data chunk is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// Certainly absent.
    No,
    /// Perhaps present: the data must tell.
    Maybe,
    /// Certainly present (an exact filter covering the whole row group's block).
    Yes,
}

/// Largest number of index, row-group and filter chunks kept decoded.
const CACHE_LIMIT: usize = 4096;

struct ColReader {
    name: String,
    kind: ValueType,
    /// The stored size of every value, when it is fixed.
    fixed_size: Option<usize>,
    /// The sub-columns of a tuple column's leaf fields (empty for a leaf column, whose data
    /// is `data`; for a tuple column `data` is field 0's store, used to name files).
    fields: Vec<(LeafKind, ChunkStore)>,
    chunklen: u64,
    fanout: u64,
    rows: u64,
    /// Entries of each index level (level 0: one per data chunk).
    entries: Vec<u64>,
    data: ChunkStore,
    weight: Option<(ChunkStore, DType)>,
    rowgroups: Option<ChunkStore>,
    index: Vec<ChunkStore>,
    filter: Option<(ChunkStore, FilterMeta)>,
}

/// The entries of each index level of column `c` (level 0: one per data chunk), as its row
/// count implies, checked against the chunk counts `meta/sizes` records (`index_chunks`).
///
/// # Errors
/// A description of the mismatch (the caller names `meta/sizes`).
fn index_entries(
    c: &LayerColumn,
    rows: u64,
    index_chunks: &[u64],
) -> std::result::Result<Vec<u64>, String> {
    let mut entries = Vec::new();
    let mut e = rows.div_ceil(c.chunklen);
    if e > 0 {
        loop {
            entries.push(e);
            if e <= c.fanout {
                break;
            }
            e = e.div_ceil(c.fanout);
        }
    }
    let expect: Vec<u64> = entries.iter().map(|e| e.div_ceil(c.fanout)).collect();
    // A level that filled exactly one chunk during the build may add one more level of a
    // single entry; accept it.
    let ok = index_chunks == expect
        || (index_chunks.len() == expect.len() + 1
            && index_chunks[..expect.len()] == expect[..]
            && index_chunks.last() == Some(&1));
    if !ok {
        return Err(format!(
            "column {}: index chunks {:?} do not match {} rows (expected {:?})",
            c.name, index_chunks, rows, expect
        ));
    }
    if index_chunks.len() > expect.len() {
        entries.push(1);
    }
    Ok(entries)
}

impl ColReader {
    /// The stores of column `i` of the layer at `root`: data, the weight (last column of a
    /// weighted layer), row groups (all but the last column), one per index level, and the
    /// filter; each bound to the layer's identity.
    fn open(
        storage: &Arc<dyn Storage>,
        root: &Path,
        meta: &LayerStorage,
        i: usize,
        kind: ValueType,
        rows: u64,
        entries: Vec<u64>,
    ) -> ColReader {
        let c = &meta.columns[i];
        let last = i + 1 == meta.columns.len();
        let dir = data_dir(&c.name);
        let typesize = |k: LeafKind| match k {
            LeafKind::Fixed(d) => d.typesize() as u8,
            _ => 1,
        };
        let store = |d: PathBuf, ts: u8| {
            let mut s = ChunkStore::new(
                storage.clone(),
                root,
                d.clone(),
                c.superchunksize,
                c.checksum,
                0,
                ts,
            );
            if let Some(id) = &meta.id {
                s.bind(id, &d.to_string_lossy());
            }
            s
        };
        let weight = match (&meta.weight, last) {
            (Some(w), true) => Some((store(dir.join("weight"), w.dtype.typesize() as u8), w.dtype)),
            _ => None,
        };
        let (data, fields) = match &kind {
            ValueType::Leaf(k) => (store(dir.clone(), typesize(*k)), Vec::new()),
            ValueType::Tuple(_) => {
                let fields: Vec<(LeafKind, ChunkStore)> = kind
                    .leaves()
                    .into_iter()
                    .enumerate()
                    .map(|(j, k)| (k, store(super::field_dir(&c.name, j), typesize(k))))
                    .collect();
                let first = kind.leaves()[0];
                (store(super::field_dir(&c.name, 0), typesize(first)), fields)
            }
        };
        ColReader {
            name: c.name.clone(),
            fixed_size: kind.fixed_size(),
            kind,
            fields,
            chunklen: c.chunklen,
            fanout: c.fanout,
            rows,
            data,
            weight,
            rowgroups: (!last).then(|| store(dir.join("rowgroups"), 8)),
            index: (0..entries.len())
                .map(|l| store(dir.join("index").join(l.to_string()), 1))
                .collect(),
            entries,
            filter: c.filter.map(|f| (store(dir.join("filter"), 8), f)),
        }
    }

    fn nchunks(&self) -> u64 {
        self.rows.div_ceil(self.chunklen)
    }

    fn chunk_rows(&self, k: u64) -> u64 {
        (self.rows - k * self.chunklen).min(self.chunklen)
    }
}

/// A decoded data chunk.
#[derive(Debug)]
struct Block {
    kind: ValueType,
    /// The size of every value when fixed (then `fixed` holds them), else 0 (`items`).
    isz: usize,
    fixed: Vec<u8>,
    items: Vec<Vec<u8>>,
    len: usize,
}

impl Block {
    fn bytes(&self, i: usize) -> &[u8] {
        if self.isz > 0 {
            &self.fixed[i * self.isz..(i + 1) * self.isz]
        } else {
            &self.items[i]
        }
    }

    fn get(&self, i: usize) -> Value {
        value::decode(&self.kind, self.bytes(i)).unwrap_or(Value::Int(0))
    }

    fn cmp(&self, i: usize, v: &Value) -> Ordering {
        value::cmp_stored(&self.kind, self.bytes(i), v).unwrap_or(Ordering::Less)
    }
}

/// Chunk `k` of a leaf's data store holding `n` values of `kind`: the fixed-size values'
/// bytes, or the variable-length items (checked: count, and UTF-8 for strings).
fn load_leaf(
    store: &ChunkStore,
    kind: LeafKind,
    k: u64,
    n: usize,
) -> Result<(Vec<u8>, Vec<Vec<u8>>)> {
    let p = payload(store, k)?;
    let bad = |m: String| chunk_err(store, k, m);
    match kind {
        LeafKind::Fixed(d) => {
            if p.len() != n * d.itemsize() {
                return Err(bad(format!(
                    "data chunk holds {} bytes, expected {} values of {} bytes",
                    p.len(),
                    n,
                    d.itemsize()
                )));
            }
            Ok((p, Vec::new()))
        }
        kind => {
            let items = decode_items(&p).map_err(bad)?;
            if items.len() != n {
                return Err(bad(format!(
                    "data chunk holds {} values, expected {n}",
                    items.len()
                )));
            }
            if kind == LeafKind::VarStr && items.iter().any(|i| std::str::from_utf8(i).is_err()) {
                return Err(bad("string value is not UTF-8".into()));
            }
            Ok((Vec::new(), items))
        }
    }
}

/// The hasher of the chunk caches: their keys are a few small integers (column, kind,
/// level, chunk), which SplitMix64 mixes well at a fraction of SipHash's cost (a seek asks
/// the caches a dozen times). Not for keys an adversary chooses.
#[derive(Default, Clone, Copy)]
struct MixHasher(u64);

impl std::hash::Hasher for MixHasher {
    fn finish(&self) -> u64 {
        value::mix(self.0)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = value::mix(self.0 ^ u64::from(*b));
        }
    }

    fn write_u8(&mut self, x: u8) {
        self.write_u64(u64::from(x));
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = value::mix(self.0 ^ x).wrapping_add(x);
    }

    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
}

type MixState = std::hash::BuildHasherDefault<MixHasher>;

/// Decoded index, row-group and filter chunks by (column, kind, level, chunk).
type ChunkCache = HashMap<(usize, u8, usize, u64), Cached, MixState>;

/// The index chunk a binary search used last: (level, chunk number, its items).
type IndexMemo = (usize, u64, Arc<Vec<Vec<u8>>>);

/// An open layer dataset. Shareable across threads; cursors borrow it.
pub struct Layer {
    root: Root,
    meta: LayerStorage,
    sizes: LayerSizes,
    cols: Vec<ColReader>,
    weight_dtype: Option<DType>,
    counters: Counters,
    cache: Mutex<ChunkCache>,
    blocks: Mutex<BlockCache>,
}

/// Bytes of decoded data and weight chunks a layer keeps for its cursors: 256 MiB, the
/// size of dbsp's default buffer cache. Random seeks over a layer larger than the cache
/// decode a whole data chunk each (64 KiB of u64 keys, about 20 µs); at 1e7 u64 keys the
/// decoded keys (80 MB) overflowed the 64 MiB this was before, and seeks ran at a third
/// of their speed with the cache warm.
const BLOCK_CACHE_BYTES: usize = 256 << 20;

/// Decoded data chunks and weight chunks, by (column, weight?, chunk), with the bytes they
/// hold: a cursor made for each seek or each row group (a child cursor) finds the chunk its
/// neighbour decoded. Emptied whole when a chunk would take it past [`BLOCK_CACHE_BYTES`].
#[derive(Default)]
struct BlockCache {
    data: HashMap<(usize, u64), Arc<Block>, MixState>,
    weights: HashMap<u64, Arc<Vec<u8>>, MixState>,
    bytes: usize,
}

impl BlockCache {
    fn make_room(&mut self, size: usize) {
        if self.bytes + size > BLOCK_CACHE_BYTES {
            self.data.clear();
            self.weights.clear();
            self.bytes = 0;
        }
        self.bytes += size;
    }
}

impl std::fmt::Debug for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Layer")
            .field("root", &self.root.path())
            .finish()
    }
}

fn payload(store: &ChunkStore, k: u64) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    store.read_chunk(k, &mut buf)?;
    let f = k / store.superchunksize();
    blosc::decompress(&buf, 1)
        .map_err(|e| Error::chunk(store.file_path(f), k % store.superchunksize(), e.0))
}

fn chunk_err(store: &ChunkStore, k: u64, reason: impl Into<String>) -> Error {
    let f = k / store.superchunksize();
    Error::chunk(store.file_path(f), k % store.superchunksize(), reason)
}

impl Layer {
    /// Opens the layer dataset at `path` on the local filesystem.
    ///
    /// # Errors
    /// As [`Layer::open_in`].
    pub fn open(path: impl AsRef<Path>) -> Result<Layer> {
        let (s, root) = storage::for_path(path.as_ref())?;
        Self::open_in(s, &root)
    }

    /// Opens the layer dataset at `root`, checking that its meta files agree with each other.
    ///
    /// # Errors
    /// [`Error::InvalidMetadata`] when `meta/storage` or `meta/sizes` is missing, not a layer
    /// dataset's, or inconsistent; I/O errors.
    pub fn open_in(storage: Arc<dyn Storage>, root: &Path) -> Result<Layer> {
        let (root, _, raw) = Root::open(&storage, root, Mode::ReadOnly, Some(Kind::Layer), false)?;
        Self::from_root(root, raw)
    }

    /// The layer at an opened root whose `meta/storage` document is `raw`.
    pub(crate) fn from_root(root: Root, raw: serde_json::Value) -> Result<Layer> {
        let mp = MetaPaths::new(&root);
        let storage = Arc::clone(&root.storage);
        let meta: LayerStorage = serde_json::from_value(raw)
            .map_err(|e| Error::metadata(mp.storage(), e.to_string()))?;
        if meta.kind != LAYER_KIND {
            return Err(Error::metadata(
                mp.storage(),
                format!("kind is {:?}, not a layer dataset", meta.kind),
            ));
        }
        meta.check_shape()
            .map_err(|why| Error::metadata(mp.storage(), why))?;
        let sizes: LayerSizes = meta::read_json(storage.as_ref(), &mp.sizes())?;
        let bad = |why: String| Error::metadata(mp.sizes(), why);
        if sizes.columns.len() != meta.columns.len() || meta.columns.is_empty() {
            return Err(bad(format!(
                "{} column counts for {} columns",
                sizes.columns.len(),
                meta.columns.len()
            )));
        }
        let mut cols = Vec::new();
        for (i, (c, s)) in meta.columns.iter().zip(&sizes.columns).enumerate() {
            crate::column::check_name(&c.name)?;
            // Two columns of one name would share one data directory.
            if meta.columns.iter().take(i).any(|p| p.name == c.name) {
                return Err(Error::metadata(
                    mp.storage(),
                    format!("two columns are named {:?}", c.name),
                ));
            }
            let kind = ValueType::parse(&c.dtype)
                .and_then(|t| value::check_type(&t).map(|()| t))
                .map_err(|e| Error::metadata(mp.storage(), e.to_string()))?;
            if c.chunklen == 0 || c.fanout < 2 {
                return Err(Error::metadata(
                    mp.storage(),
                    format!("column {}: chunklen and fanout must be positive", c.name),
                ));
            }
            let entries = index_entries(c, s.rows, &s.index_chunks).map_err(bad)?;
            cols.push(ColReader::open(
                &storage, &root, &meta, i, kind, s.rows, entries,
            ));
        }
        Ok(Layer {
            root,
            weight_dtype: meta.weight.as_ref().map(|w| w.dtype),
            meta,
            sizes,
            cols,
            counters: Counters::default(),
            cache: Mutex::new(HashMap::default()),
            blocks: Mutex::new(BlockCache::default()),
        })
    }

    /// The dataset directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// `meta/storage`.
    pub fn storage_meta(&self) -> &LayerStorage {
        &self.meta
    }

    /// `meta/sizes`.
    pub fn sizes(&self) -> &LayerSizes {
        &self.sizes
    }

    /// Number of columns.
    pub fn ncolumns(&self) -> usize {
        self.cols.len()
    }

    /// Index of the column named `name`.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.cols.iter().position(|c| c.name == name)
    }

    /// Rows of column `col`.
    pub fn rows(&self, col: usize) -> u64 {
        self.cols.get(col).map_or(0, |c| c.rows)
    }

    /// Value type of column `col`.
    /// The layer's named shape, when it has one.
    pub fn shape(&self) -> Option<super::Shape> {
        self.meta.shape
    }

    /// The value type of column `col`.
    pub fn kind(&self, col: usize) -> Option<&ValueType> {
        self.cols.get(col).map(|c| &c.kind)
    }

    /// Index levels of column `col` (0 for an empty column).
    pub fn index_levels(&self, col: usize) -> usize {
        self.cols.get(col).map_or(0, |c| c.entries.len())
    }

    /// Chunks read from storage so far.
    pub fn stats(&self) -> ReadStats {
        let g = |i: usize| self.counters.0[i].load(AtomicOrdering::Relaxed);
        ReadStats {
            index_chunks: g(C_INDEX),
            data_chunks: g(C_DATA),
            filter_chunks: g(C_FILTER),
            rowgroup_chunks: g(C_ROWGROUP),
            weight_chunks: g(C_WEIGHT),
        }
    }

    /// Sets the read counters to zero.
    pub fn reset_stats(&self) {
        for c in &self.counters.0 {
            c.store(0, AtomicOrdering::Relaxed);
        }
    }

    /// Drops the decoded index, row-group, filter, data and weight chunks kept in memory.
    pub fn clear_cache(&self) {
        if let Ok(mut c) = self.cache.lock() {
            c.clear();
        }
        if let Ok(mut b) = self.blocks.lock() {
            *b = BlockCache::default();
        }
    }

    /// A cursor over column 1 (its single row group), on its first row.
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor::new(self, 0, 0, self.rows(0))
    }

    /// A cursor over the row group of column `col` (1-based columns are `col + 1`) owned by
    /// row `parent_row` of column `col - 1`, on its first row.
    ///
    /// # Errors
    /// [`Error::OutOfBounds`] for column 0, a column or row past the end; read errors.
    pub fn group(&self, col: usize, parent_row: u64) -> Result<Cursor<'_>> {
        if col == 0 || col >= self.cols.len() || parent_row >= self.rows(col - 1) {
            return Err(Error::OutOfBounds {
                dataset: self.root.to_path_buf(),
                reason: format!("no row group {parent_row} in column {}", col + 1),
            });
        }
        let (a, b) = self.child_range(col - 1, parent_row)?;
        Ok(Cursor::new(self, col, a, b))
    }

    /// Whether `v` may be in column 1: `false` is certain (answered from the index and the
    /// filter without reading a data chunk); `true` means "maybe" (and "yes" where the
    /// column's filter block is exact).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `v` does not fit the column; read errors.
    pub fn may_contain(&self, v: &Value) -> Result<bool> {
        self.cursor().may_contain(v)
    }

    /// Whether `v` is in column 1 (exact: reads a data chunk unless the filter says no, or,
    /// being an exact filter, yes).
    ///
    /// # Errors
    /// As [`Layer::may_contain`].
    pub fn contains(&self, v: &Value) -> Result<bool> {
        self.cursor().contains(v)
    }

    fn cached(&self, key: (usize, u8, usize, u64)) -> Option<Cached> {
        self.cache.lock().ok().and_then(|c| c.get(&key).cloned())
    }

    fn remember(&self, key: (usize, u8, usize, u64), v: Cached) {
        if let Ok(mut c) = self.cache.lock() {
            if c.len() >= CACHE_LIMIT {
                c.clear();
            }
            c.insert(key, v);
        }
    }

    /// Index chunk `c` of level `level` of column `col`, checked to hold its entries.
    fn index_chunk(&self, col: usize, level: usize, c: u64) -> Result<Arc<Vec<Vec<u8>>>> {
        let key = (col, 0, level, c);
        if let Some(Cached::Items(v)) = self.cached(key) {
            return Ok(v);
        }
        let cr = &self.cols[col];
        let store = &cr.index[level];
        self.counters.bump(C_INDEX);
        let p = payload(store, c)?;
        let items = decode_items(&p).map_err(|e| chunk_err(store, c, e))?;
        let total = cr.entries[level];
        let n = total.saturating_sub(c * cr.fanout).min(cr.fanout);
        let per = if level == 0 { 2 } else { 1 };
        if items.len() as u64 != n * per {
            return Err(chunk_err(
                store,
                c,
                format!(
                    "index chunk holds {} items, expected {}",
                    items.len(),
                    n * per
                ),
            ));
        }
        let v = Arc::new(items);
        self.remember(key, Cached::Items(v.clone()));
        Ok(v)
    }

    /// Entry `e` of index level `level`: the first value of data chunk `e * fanout^level`
    /// (and at level 0, the chunk's last value at `.1 + 1`). Returns the chunk and the item
    /// position.
    fn entry(&self, col: usize, level: usize, e: u64) -> Result<(Arc<Vec<Vec<u8>>>, usize)> {
        let f = self.cols[col].fanout;
        let chunk = self.index_chunk(col, level, e / f)?;
        let per = if level == 0 { 2 } else { 1 };
        Ok((chunk, ((e % f) * per) as usize))
    }

    fn entry_cmp(&self, col: usize, level: usize, e: u64, v: &Value) -> Result<Ordering> {
        self.entry_cmp_memo(col, level, e, v, &mut None)
    }

    /// As [`entry_cmp`](Self::entry_cmp), keeping the index chunk last used in `memo`
    /// (level, chunk number, chunk): a binary search asks for the same chunk again and
    /// again, and this spares it the cache's lock each time.
    fn entry_cmp_memo(
        &self,
        col: usize,
        level: usize,
        e: u64,
        v: &Value,
        memo: &mut Option<IndexMemo>,
    ) -> Result<Ordering> {
        let cr = &self.cols[col];
        let c = e / cr.fanout;
        let i = ((e % cr.fanout) * if level == 0 { 2 } else { 1 }) as usize;
        let chunk = match memo {
            Some((l, mc, chunk)) if *l == level && *mc == c => chunk,
            _ => &memo.insert((level, c, self.index_chunk(col, level, c)?)).2,
        };
        value::cmp_stored(&cr.kind, &chunk[i], v).map_err(|m| chunk_err(&cr.index[level], c, m))
    }

    /// The data chunk of column `col` that may hold `v` within the row group `a..b`: the
    /// last chunk starting inside the group whose first value is `<= v`, or the chunk holding
    /// row `a`. Descends the index levels, reading at most two index chunks per level.
    fn find_chunk(&self, col: usize, a: u64, b: u64, v: &Value) -> Result<u64> {
        let cr = &self.cols[col];
        let k0 = a / cr.chunklen;
        let k1 = (b - 1) / cr.chunklen;
        let (mut lo, mut hi) = (k0 + 1, k1);
        let mut memo = None;
        for level in (0..cr.entries.len()).rev() {
            if lo > hi {
                return Ok(k0);
            }
            let Some(span) = cr.fanout.checked_pow(level as u32) else {
                continue;
            };
            let e_lo = lo.div_ceil(span);
            let e_hi = hi / span;
            if e_lo > e_hi {
                continue;
            }
            let (mut l, mut r) = (e_lo, e_hi + 1);
            while l < r {
                let m = l + (r - l) / 2;
                if self.entry_cmp_memo(col, level, m, v, &mut memo)? != Ordering::Greater {
                    l = m + 1;
                } else {
                    r = m;
                }
            }
            if l == e_lo {
                hi = e_lo * span - 1;
            } else {
                let e = l - 1;
                lo = e * span;
                hi = hi.min((e + 1).saturating_mul(span) - 1);
            }
        }
        Ok(if lo > hi { k0 } else { lo })
    }

    /// Data chunk `k` of column `col`, decoded, from the block cache or storage.
    fn data_block(&self, col: usize, k: u64) -> Result<Arc<Block>> {
        if let Some(b) = self
            .blocks
            .lock()
            .ok()
            .and_then(|c| c.data.get(&(col, k)).cloned())
        {
            return Ok(b);
        }
        let b = self.load_data_block(col, k)?;
        if let Ok(mut c) = self.blocks.lock() {
            let size = b.fixed.len() + b.items.iter().map(|i| i.len() + 24).sum::<usize>();
            c.make_room(size);
            c.data.insert((col, k), b.clone());
        }
        Ok(b)
    }

    /// Weight chunk `k` (of the last column), from the block cache or storage.
    fn weight_chunk(&self, k: u64) -> Result<Arc<Vec<u8>>> {
        if let Some(w) = self
            .blocks
            .lock()
            .ok()
            .and_then(|c| c.weights.get(&k).cloned())
        {
            return Ok(w);
        }
        let w = Arc::new(self.load_weight_chunk(k)?);
        if let Ok(mut c) = self.blocks.lock() {
            c.make_room(w.len());
            c.weights.insert(k, w.clone());
        }
        Ok(w)
    }

    /// Data chunk `k` of column `col`, read from storage and decoded.
    fn load_data_block(&self, col: usize, k: u64) -> Result<Arc<Block>> {
        let cr = &self.cols[col];
        self.counters.bump(C_DATA);
        let n = cr.chunk_rows(k) as usize;
        let block = match &cr.kind {
            ValueType::Leaf(kind) => {
                let (fixed, items) = load_leaf(&cr.data, *kind, k, n)?;
                Block {
                    kind: cr.kind.clone(),
                    isz: cr.fixed_size.unwrap_or(0),
                    fixed,
                    items,
                    len: n,
                }
            }
            ValueType::Tuple(_) => {
                // Each field's chunk k, then each row's encoding joined from its fields.
                let fields = cr
                    .fields
                    .iter()
                    .map(|(kind, store)| load_leaf(store, *kind, k, n).map(|d| (*kind, d)))
                    .collect::<Result<Vec<_>>>()?;
                fn field(f: &(LeafKind, (Vec<u8>, Vec<Vec<u8>>)), r: usize) -> (LeafKind, &[u8]) {
                    let (kind, (fixed, items)) = f;
                    match kind {
                        LeafKind::Fixed(d) => {
                            (*kind, &fixed[r * d.itemsize()..(r + 1) * d.itemsize()])
                        }
                        _ => (*kind, items[r].as_slice()),
                    }
                }
                let mut fixed = Vec::new();
                let mut items = Vec::new();
                if let Some(isz) = cr.fixed_size {
                    fixed.reserve(n * isz);
                    for r in 0..n {
                        for f in &fields {
                            let (kind, b) = field(f, r);
                            value::join_leaf(kind, b, &mut fixed);
                        }
                    }
                } else {
                    items.reserve(n);
                    for r in 0..n {
                        let mut e = Vec::new();
                        for f in &fields {
                            let (kind, b) = field(f, r);
                            value::join_leaf(kind, b, &mut e);
                        }
                        items.push(e);
                    }
                }
                Block {
                    kind: cr.kind.clone(),
                    isz: cr.fixed_size.unwrap_or(0),
                    fixed,
                    items,
                    len: n,
                }
            }
        };
        Ok(Arc::new(block))
    }

    /// Weight chunk `k` (of the last column), read from storage.
    fn load_weight_chunk(&self, k: u64) -> Result<Vec<u8>> {
        let cr = self
            .cols
            .last()
            .ok_or_else(|| Error::InvalidArgument("no columns".into()))?;
        let Some((store, dtype)) = &cr.weight else {
            return Err(Error::InvalidArgument("the dataset has no weight".into()));
        };
        self.counters.bump(C_WEIGHT);
        let p = payload(store, k)?;
        let n = cr.chunk_rows(k) as usize;
        if p.len() != n * dtype.itemsize() {
            return Err(chunk_err(
                store,
                k,
                format!(
                    "weight chunk holds {} bytes, expected {}",
                    p.len(),
                    n * dtype.itemsize()
                ),
            ));
        }
        Ok(p)
    }

    /// End of the row group of row `j` of column `col` (the exclusive end row in `col + 1`).
    fn group_end(&self, col: usize, j: u64) -> Result<u64> {
        let cr = &self.cols[col];
        let store = cr.rowgroups.as_ref().ok_or_else(|| {
            Error::InvalidArgument(format!("column {} has no row groups", cr.name))
        })?;
        let k = j / cr.chunklen;
        let key = (col, 1, 0, k);
        let ends = match self.cached(key) {
            Some(Cached::Ends(e)) => e,
            _ => {
                self.counters.bump(C_ROWGROUP);
                let p = payload(store, k)?;
                let n = cr.chunk_rows(k) as usize;
                if p.len() != n * 8 {
                    return Err(chunk_err(
                        store,
                        k,
                        format!(
                            "row-group chunk holds {} bytes, expected {}",
                            p.len(),
                            n * 8
                        ),
                    ));
                }
                let e: Vec<u64> = p
                    .chunks_exact(8)
                    .map(|c| {
                        let mut a = [0u8; 8];
                        a.copy_from_slice(c);
                        u64::from_le_bytes(a)
                    })
                    .collect();
                let e = Arc::new(e);
                self.remember(key, Cached::Ends(e.clone()));
                e
            }
        };
        let end = ends[(j % cr.chunklen) as usize];
        if end > self.cols[col + 1].rows {
            return Err(chunk_err(
                store,
                k,
                format!(
                    "row group end {end} past the {} rows of the next column",
                    self.cols[col + 1].rows
                ),
            ));
        }
        Ok(end)
    }

    /// Rows `a..b` of column `col + 1` owned by row `j` of column `col`.
    fn child_range(&self, col: usize, j: u64) -> Result<(u64, u64)> {
        let a = if j == 0 {
            0
        } else {
            self.group_end(col, j - 1)?
        };
        let b = self.group_end(col, j)?;
        if a > b {
            return Err(Error::chunk(
                self.cols[col].data.dir(),
                j / self.cols[col].chunklen,
                format!("row-group ends decrease at row {j}"),
            ));
        }
        Ok((a, b))
    }

    fn filter(&self, col: usize, blk: u64) -> Result<Arc<BlockFilter>> {
        let key = (col, 2, 0, blk);
        if let Some(Cached::Filter(b)) = self.cached(key) {
            return Ok(b);
        }
        let Some((store, _)) = &self.cols[col].filter else {
            return Err(Error::InvalidArgument("column has no filter".into()));
        };
        self.counters.bump(C_FILTER);
        let p = payload(store, blk)?;
        let b = Arc::new(BlockFilter::parse(&p).map_err(|m| chunk_err(store, blk, m))?);
        self.remember(key, Cached::Filter(b.clone()));
        Ok(b)
    }

    /// Reads every chunk of the dataset and checks it: digests, sizes, order of values
    /// within each row group, index entries against the data and every upper index level
    /// against the level below, row-group ends, and that each filter answers "maybe" for
    /// every value it covers. Returns the problems found (empty when the dataset is sound):
    /// for each column, the first problem of its data (with index level 0 and filters), of
    /// each upper index level, and of its row groups, so that damage in one place does not
    /// hide damage in another.
    pub fn verify(&self) -> Vec<Error> {
        (0..self.cols.len())
            .flat_map(|col| self.verify_column(col))
            .collect()
    }

    fn verify_column(&self, col: usize) -> Vec<Error> {
        let mut checks = vec![self.verify_rows(col)];
        checks.extend((1..self.cols[col].entries.len()).map(|l| self.verify_index_level(col, l)));
        checks.push(self.verify_row_groups(col));
        checks.push(self.verify_filter_count(col));
        checks.into_iter().filter_map(Result::err).collect()
    }

    /// Every data chunk of column `col` in order: its level-0 index entry (first and last
    /// value), the order of values within each row group, the filter covering each value,
    /// and the weight chunk beside it.
    fn verify_rows(&self, col: usize) -> Result<()> {
        let cr = &self.cols[col];
        // Group boundaries come from the previous column's row-group ends.
        let mut group = 0u64;
        let mut group_end = if col == 0 { cr.rows } else { 0 };
        let mut prev: Option<Vec<u8>> = None;
        for k in 0..cr.nchunks() {
            let block = self.load_data_block(col, k)?;
            self.verify_level0_entry(col, k, &block)?;
            let bloom = match &cr.filter {
                Some((_, f)) => Some((
                    self.filter(col, k / f.chunks_per_block)?,
                    k / f.chunks_per_block,
                )),
                None => None,
            };
            for i in 0..block.len {
                let row = k * cr.chunklen + i as u64;
                while col > 0 && row >= group_end {
                    let (_, e) = self.child_range(col - 1, group)?;
                    group_end = e;
                    group += 1;
                    prev = None;
                }
                let b = block.bytes(i);
                if let Some(p) = &prev {
                    let v = value::decode(&cr.kind, b).map_err(|m| chunk_err(&cr.data, k, m))?;
                    if value::cmp_stored(&cr.kind, p, &v).map_err(|m| chunk_err(&cr.data, k, m))?
                        != Ordering::Less
                    {
                        return Err(chunk_err(
                            &cr.data,
                            k,
                            format!("row {row} is not greater than the row before it in its group"),
                        ));
                    }
                }
                if let Some((bl, blk)) = &bloom {
                    if !bl.may_contain(hash64(b), value::exact_key(&cr.kind, b)) {
                        return Err(chunk_err(
                            &cr.data,
                            k,
                            format!("filter chunk {blk} does not cover row {row}"),
                        ));
                    }
                }
                prev = Some(b.to_vec());
            }
            if cr.weight.is_some() {
                self.load_weight_chunk(k)?;
            }
        }
        Ok(())
    }

    /// The level-0 index entry of data chunk `k` holds the chunk's first and last values.
    fn verify_level0_entry(&self, col: usize, k: u64, block: &Block) -> Result<()> {
        let cr = &self.cols[col];
        let (entries, i) = self.entry(col, 0, k)?;
        if entries[i] != block.bytes(0) || entries[i + 1] != block.bytes(block.len - 1) {
            return Err(chunk_err(
                &cr.index[0],
                k / cr.fanout,
                format!("index entry of data chunk {k} does not match its first and last values"),
            ));
        }
        Ok(())
    }

    /// Index level `level` (1 and up) of column `col`: every chunk reads and holds its
    /// entries, and entry `e` is the first entry of chunk `e` of the level below. A chunk of
    /// the level below that cannot be read is that level's problem, reported there.
    fn verify_index_level(&self, col: usize, level: usize) -> Result<()> {
        let cr = &self.cols[col];
        for e in 0..cr.entries[level] {
            let (up, i) = self.entry(col, level, e)?;
            let Ok((down, j)) = self.entry(col, level - 1, e * cr.fanout) else {
                continue;
            };
            if up[i] != down[j] {
                return Err(chunk_err(
                    &cr.index[level],
                    e / cr.fanout,
                    format!("level {level} entry {e} does not match the level below"),
                ));
            }
        }
        Ok(())
    }

    /// The row groups column `col` owns in the next column: each non-empty, in order, and
    /// together covering the next column's rows.
    fn verify_row_groups(&self, col: usize) -> Result<()> {
        let cr = &self.cols[col];
        if col + 1 == self.cols.len() {
            return Ok(());
        }
        let mut last = 0;
        for j in 0..cr.rows {
            let e = self.group_end(col, j)?;
            if e <= last {
                return Err(Error::chunk(
                    cr.data.dir(),
                    j / cr.chunklen,
                    format!(
                        "row {j} of column {} owns an empty or negative row group",
                        cr.name
                    ),
                ));
            }
            last = e;
        }
        if last != self.cols[col + 1].rows {
            return Err(Error::metadata(
                MetaPaths::new(&self.root).sizes(),
                format!(
                    "column {} row groups end at {last}, column {} has {} rows",
                    cr.name,
                    self.cols[col + 1].name,
                    self.cols[col + 1].rows
                ),
            ));
        }
        Ok(())
    }

    /// `meta/sizes` counts one filter chunk per block of data chunks.
    fn verify_filter_count(&self, col: usize) -> Result<()> {
        let cr = &self.cols[col];
        if let Some((_, f)) = &cr.filter {
            let blocks = cr.nchunks().div_ceil(f.chunks_per_block);
            if self.sizes.columns[col].filter_chunks != blocks {
                return Err(Error::metadata(
                    MetaPaths::new(&self.root).sizes(),
                    format!(
                        "column {}: {} filter chunks, expected {blocks}",
                        cr.name, self.sizes.columns[col].filter_chunks
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A JSON description: columns, rows, chunk counts, index levels, filters and bytes.
    pub fn info(&self) -> serde_json::Value {
        let cols: Vec<serde_json::Value> = self
            .meta
            .columns
            .iter()
            .zip(&self.sizes.columns)
            .zip(&self.cols)
            .map(|((m, s), c)| {
                serde_json::json!({
                    "name": m.name,
                    "dtype": m.dtype,
                    "rows": s.rows,
                    "chunklen": m.chunklen,
                    "data_chunks": c.nchunks(),
                    "fanout": m.fanout,
                    "index_levels": s.index_chunks.len(),
                    "index_chunks": s.index_chunks,
                    "filter": m.filter.map(|f| serde_json::json!({
                        "bits_per_value": f.bits_per_value,
                        "hashes": f.hashes,
                        "chunks_per_block": f.chunks_per_block,
                        "predicted_fpr": f.predicted_fpr,
                        "kind": f.kind.name(),
                        "chunks": s.filter_chunks,
                        "exact_chunks": s.exact_filter_chunks,
                        "bytes": s.filter_bytes,
                    })),
                    "codec": m.compression.codec.name(),
                    "clevel": m.compression.clevel,
                    "checksum": m.checksum.name(),
                    "nbytes": s.nbytes,
                    "cbytes": s.cbytes,
                })
            })
            .collect();
        serde_json::json!({
            "path": self.root.display().to_string(),
            "kind": LAYER_KIND,
            "shape": self.meta.shape.map(|s| s.name()),
            "columns": cols,
            "weight": self.meta.weight.as_ref().map(|w| serde_json::json!({"name": w.name, "dtype": w.dtype.name()})),
        })
    }
}

/// A position in one row group of one column. Positions run from "before the first row"
/// through the rows to "after the last row"; [`next`](Cursor::next) from before the first
/// row lands on the first row and [`prev`](Cursor::prev) from after the last on the last.
/// Moving costs nothing; the data chunk under the cursor is read when a value is asked for
/// and kept while the cursor stays in it.
pub struct Cursor<'a> {
    layer: &'a Layer,
    col: usize,
    start: u64,
    end: u64,
    /// 0: before the first row; 1..=count: row `start + at - 1`; count + 1: after the last.
    at: u64,
    block: Option<(u64, Arc<Block>)>,
    weights: Option<(u64, Arc<Vec<u8>>)>,
}

impl std::fmt::Debug for Cursor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("column", &self.col)
            .field("rows", &(self.start..self.end))
            .field("at", &self.at)
            .finish()
    }
}

impl<'a> Cursor<'a> {
    fn new(layer: &'a Layer, col: usize, start: u64, end: u64) -> Cursor<'a> {
        Cursor {
            layer,
            col,
            start,
            end,
            at: 1,
            block: None,
            weights: None,
        }
    }

    /// The column (0-based) this cursor walks.
    pub fn column(&self) -> usize {
        self.col
    }

    /// Rows in the row group.
    pub fn count(&self) -> u64 {
        self.end - self.start
    }

    /// The row group's rows in its column.
    pub fn rows(&self) -> std::ops::Range<u64> {
        self.start..self.end
    }

    /// True when the cursor is on a row.
    pub fn is_valid(&self) -> bool {
        self.at >= 1 && self.at <= self.count()
    }

    /// The row under the cursor (its row number in the whole column).
    pub fn row(&self) -> Option<u64> {
        self.is_valid().then(|| self.start + self.at - 1)
    }

    /// The position of the row under the cursor within its row group.
    pub fn index(&self) -> Option<u64> {
        self.is_valid().then(|| self.at - 1)
    }

    /// Moves to the first row; false when the group is empty.
    pub fn first(&mut self) -> bool {
        self.at = 1;
        self.is_valid()
    }

    /// Moves to the last row; false when the group is empty.
    pub fn last(&mut self) -> bool {
        self.at = self.count();
        self.is_valid()
    }

    /// Moves to row `n` of the group (0-based); past the end, to "after the last row".
    pub fn nth(&mut self, n: u64) -> bool {
        self.at = n.saturating_add(1).min(self.count() + 1);
        self.is_valid()
    }

    /// Moves forward one row; false when it leaves the group.
    #[expect(
        clippy::should_implement_trait,
        reason = "a cursor move, not an iterator: it yields no item"
    )]
    pub fn next(&mut self) -> bool {
        if self.at <= self.count() {
            self.at += 1;
        }
        self.is_valid()
    }

    /// Moves back one row; false when it leaves the group.
    pub fn prev(&mut self) -> bool {
        if self.at > 0 {
            self.at -= 1;
        }
        self.is_valid()
    }

    fn coerce(&self, v: &Value) -> Result<Value> {
        value::coerce(&self.layer.cols[self.col].kind, v)
    }

    fn block(&mut self, k: u64) -> Result<Arc<Block>> {
        if let Some((bk, b)) = &self.block {
            if *bk == k {
                return Ok(b.clone());
            }
        }
        let b = self.layer.data_block(self.col, k)?;
        self.block = Some((k, b.clone()));
        Ok(b)
    }

    /// Moves to the first row whose value is `>= v`; false (cursor after the last row) when
    /// there is none. Reads O(log n) index chunks and one data chunk.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `v` does not fit the column; read errors.
    pub fn seek_ge(&mut self, v: &Value) -> Result<bool> {
        let v = self.coerce(v)?;
        let r = self.bound(&v, false)?;
        self.at = r - self.start + 1;
        Ok(self.is_valid())
    }

    /// Moves to the last row whose value is `<= v`; false (cursor before the first row) when
    /// there is none.
    ///
    /// # Errors
    /// As [`Cursor::seek_ge`].
    pub fn seek_le(&mut self, v: &Value) -> Result<bool> {
        let v = self.coerce(v)?;
        let r = self.bound(&v, true)?;
        self.at = r - self.start;
        Ok(self.is_valid())
    }

    /// The first row of the group whose value is `> v` (`upper`) or `>= v`, or the group's
    /// end.
    fn bound(&mut self, v: &Value, upper: bool) -> Result<u64> {
        if self.count() == 0 {
            return Ok(self.end);
        }
        let layer = self.layer;
        let cl = layer.cols[self.col].chunklen;
        let k = layer.find_chunk(self.col, self.start, self.end, v)?;
        let block = self.block(k)?;
        let base = k * cl;
        let (mut l, mut r) = (
            (self.start.max(base) - base) as usize,
            (self.end.min(base + block.len as u64) - base) as usize,
        );
        while l < r {
            let m = l + (r - l) / 2;
            let c = block.cmp(m, v);
            if c == Ordering::Less || (upper && c == Ordering::Equal) {
                l = m + 1;
            } else {
                r = m;
            }
        }
        Ok(base + l as u64)
    }

    /// The value under the cursor (`None` when it is not on a row).
    ///
    /// # Errors
    /// Read errors.
    pub fn value(&mut self) -> Result<Option<Value>> {
        let Some(row) = self.row() else {
            return Ok(None);
        };
        let cl = self.layer.cols[self.col].chunklen;
        // The cursor's own block when it holds the row (no division, no reference count
        // touched).
        if let Some((bk, b)) = &self.block {
            let base = bk * cl;
            if row >= base && row - base < cl {
                return Ok(Some(b.get((row - base) as usize)));
            }
        }
        let k = row / cl;
        let b = self.block(k)?;
        Ok(Some(b.get((row % cl) as usize)))
    }

    /// The weight of the row under the cursor (last column only).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the cursor's column has no weight; read errors.
    pub fn weight(&mut self) -> Result<Option<Value>> {
        let dtype = match (
            self.layer.weight_dtype,
            self.col + 1 == self.layer.cols.len(),
        ) {
            (Some(d), true) => d,
            _ => {
                return Err(Error::InvalidArgument(
                    "only the last column's rows have a weight".into(),
                ))
            }
        };
        let Some(row) = self.row() else {
            return Ok(None);
        };
        let cl = self.layer.cols[self.col].chunklen;
        // In the chunk already held (a scan's common case): no division.
        if let Some((k, w)) = &self.weights {
            let base = k * cl;
            if row >= base && row - base < cl {
                let i = (row - base) as usize * dtype.itemsize();
                if let Some(b) = w.get(i..i + dtype.itemsize()) {
                    if let Ok(v) = value::decode_leaf(LeafKind::Fixed(dtype), b) {
                        return Ok(Some(v));
                    }
                }
            }
        }
        let k = row / cl;
        if self.weights.as_ref().map(|w| w.0) != Some(k) {
            self.weights = Some((k, self.layer.weight_chunk(k)?));
        }
        let Some((_, w)) = &self.weights else {
            return Ok(None);
        };
        let i = (row % cl) as usize * dtype.itemsize();
        let store = &self.layer.cols[self.col].weight;
        value::decode_leaf(LeafKind::Fixed(dtype), &w[i..i + dtype.itemsize()])
            .map(Some)
            .map_err(|m| match store {
                Some((s, _)) => chunk_err(s, k, m),
                None => Error::InvalidArgument(m),
            })
    }

    /// A cursor over the row group the current row owns in the next column (on its first
    /// row); `None` on the last column or when the cursor is not on a row.
    ///
    /// # Errors
    /// Read errors.
    pub fn child(&self) -> Result<Option<Cursor<'a>>> {
        let Some(row) = self.row() else {
            return Ok(None);
        };
        if self.col + 1 >= self.layer.cols.len() {
            return Ok(None);
        }
        let (a, b) = self.layer.child_range(self.col, row)?;
        Ok(Some(Cursor::new(self.layer, self.col + 1, a, b)))
    }

    /// Whether `v` may be in this row group: `false` is certain and is answered from the
    /// value index and the filter alone, without reading a data chunk. With the column's
    /// filter off, only the index's first and last values of the candidate chunk can say no.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `v` does not fit the column; read errors.
    pub fn may_contain(&self, v: &Value) -> Result<bool> {
        Ok(self.probe(v)? != Probe::No)
    }

    /// What the value index and the filter say about `v` in this row group, without reading
    /// a data chunk.
    fn probe(&self, v: &Value) -> Result<Probe> {
        let v = self.coerce(v)?;
        if self.count() == 0 {
            return Ok(Probe::No);
        }
        let layer = self.layer;
        let cr = &layer.cols[self.col];
        let k = layer.find_chunk(self.col, self.start, self.end, &v)?;
        let chunk_start = k * cr.chunklen;
        let chunk_end = (chunk_start + cr.chunklen).min(cr.rows);
        if chunk_start >= self.start && layer.entry_cmp(self.col, 0, k, &v)? == Ordering::Greater {
            return Ok(Probe::No);
        }
        if chunk_end <= self.end {
            let (entries, i) = layer.entry(self.col, 0, k)?;
            let last = value::cmp_stored(&cr.kind, &entries[i + 1], &v)
                .map_err(|m| chunk_err(&cr.index[0], k / cr.fanout, m))?;
            if last == Ordering::Less {
                return Ok(Probe::No);
            }
        }
        let Some((_, f)) = &cr.filter else {
            return Ok(Probe::Maybe);
        };
        let mut b = Vec::new();
        let mut fixed = [0u8; 8];
        let b: &[u8] = match (&cr.kind, &v) {
            // Integers and floats encode on the stack.
            (
                ValueType::Leaf(LeafKind::Fixed(d)),
                Value::Int(_) | Value::UInt(_) | Value::Float(_),
            ) if d.itemsize() <= 8 => {
                let n = d.itemsize();
                value::encode_fixed(*d, &v, &mut fixed[..n]);
                &fixed[..n]
            }
            _ => {
                value::encode(&cr.kind, &v, &mut b);
                &b
            }
        };
        let blk = k / f.chunks_per_block;
        let bf = layer.filter(self.col, blk)?;
        if !bf.may_contain(hash64(b), value::exact_key(&cr.kind, b)) {
            return Ok(Probe::No);
        }
        // An exact filter's "yes" is certain when this row group holds every row the
        // filter block covers (always so in column 1); the value is then in the group.
        let block_rows = f.chunks_per_block * cr.chunklen;
        let covered =
            self.start <= blk * block_rows && ((blk + 1) * block_rows).min(cr.rows) <= self.end;
        Ok(if bf.is_exact() && covered {
            Probe::Yes
        } else {
            Probe::Maybe
        })
    }

    /// Whether `v` is in this row group (exact). The cursor does not move.
    ///
    /// # Errors
    /// As [`Cursor::may_contain`].
    pub fn contains(&self, v: &Value) -> Result<bool> {
        match self.probe(v)? {
            Probe::No => return Ok(false),
            Probe::Yes => return Ok(true),
            Probe::Maybe => {}
        }
        let mut c = Cursor::new(self.layer, self.col, self.start, self.end);
        c.block = self.block.clone();
        if !c.seek_ge(v)? {
            return Ok(false);
        }
        let v = self.coerce(v)?;
        Ok(c.value()? == Some(v))
    }
}
