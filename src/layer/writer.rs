//! The single-pass layer writer.
//!
//! Memory is bounded by one data chunk per column (plus one weight chunk and one row-group
//! chunk), one pending index chunk per index level, and the hashes of one filter block:
//! independent of the number of rows. Every chunk is written once, in order. The dataset is
//! built under `<path>.tmp-build` and renamed to `<path>` only when complete (see
//! [`crate::staging`]: a second build of the same path is refused while one runs).

use super::filter;
use super::sink::ChunkSink;
use super::value::{self, hash64, Value, ValueType};
use super::{data_dir, ColumnCounts, LayerSchema, LayerSizes, LayerStorage};
use crate::blosc::{self, CompressParams, Filter};
use crate::column::varlen::encode_items;
use crate::column::LeafKind;
use crate::error::{Error, Result};
use crate::meta::{self, MetaPaths};
use crate::staging::Staging;
use crate::storage::{self, Storage};
use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Builds a layer dataset from rows pushed in sorted order.
pub struct LayerWriter {
    storage: Arc<dyn Storage>,
    /// The staging directory (holding its lock until published or dropped).
    staging: Option<Staging>,
    tmp: PathBuf,
    meta: LayerStorage,
    cols: Vec<ColWriter>,
    weight: Option<FixedWriter>,
    prev: Option<Vec<Value>>,
    /// Reused per row: the coerced keys (swapped with `prev`), and encoded bytes.
    scratch: Vec<Value>,
    buf: Vec<u8>,
    failed: bool,
    done: bool,
}

/// A chunked fixed-size u64 or weight column being written.
struct FixedWriter {
    chunklen: u64,
    params: CompressParams,
    buf: Vec<u8>,
    n: u64,
    sink: ChunkSink,
}

impl FixedWriter {
    fn push(&mut self, bytes: &[u8]) -> Result<()> {
        self.buf.extend_from_slice(bytes);
        self.n += 1;
        if self.n.is_multiple_of(self.chunklen) {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            let c = blosc::compress(&self.params, &self.buf).map_err(|e| Error::Compress(e.0))?;
            self.sink.append(c)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        self.flush()?;
        self.sink.close()
    }
}

struct Level {
    sink: ChunkSink,
    items: Vec<Vec<u8>>,
    entries: u64,
}

struct FilterWriter {
    meta: super::FilterMeta,
    choice: filter::Choice,
    /// Hashes of the block's values (unless every block is exact).
    hashes: Vec<u64>,
    /// Keys of the block's values (integer columns, unless every block is Bloom).
    keys: Vec<u64>,
    chunks: u64,
    /// Exact filter chunks written.
    exact: u64,
    sink: ChunkSink,
}

/// The data chunks of one leaf of a column: the column's own, or one field's of a tuple
/// column.
struct Part {
    kind: LeafKind,
    params: CompressParams,
    fixed: Vec<u8>,
    items: Vec<Vec<u8>>,
    sink: ChunkSink,
}

impl Part {
    fn push(&mut self, v: &[u8]) {
        match self.kind {
            LeafKind::Fixed(_) => self.fixed.extend_from_slice(v),
            _ => self.items.push(v.to_vec()),
        }
    }

    fn flush(&mut self) -> Result<()> {
        let payload = match self.kind {
            LeafKind::Fixed(_) => std::mem::take(&mut self.fixed),
            _ => encode_items(&std::mem::take(&mut self.items))?,
        };
        let c = blosc::compress(&self.params, &payload).map_err(|e| Error::Compress(e.0))?;
        self.sink.append(c)
    }
}

struct ColWriter {
    kind: ValueType,
    /// The leaf fields of a tuple column (empty for a leaf column).
    leaves: Vec<LeafKind>,
    chunklen: u64,
    fanout: u64,
    index_params: CompressParams,
    root: PathBuf,
    /// The dataset's identity, recorded in the index files it creates.
    dataset_id: Option<String>,
    name: String,
    superchunksize: u64,
    checksum: crate::blpk::Checksum,
    rows: u64,
    nbuf: u64,
    first: Vec<u8>,
    last: Vec<u8>,
    /// The data: one part for a leaf column, one per leaf field for a tuple column.
    parts: Vec<Part>,
    levels: Vec<Level>,
    rowgroups: Option<FixedWriter>,
    filter: Option<FilterWriter>,
    storage: Arc<dyn Storage>,
}

fn params(c: &super::LayerColumn, typesize: usize) -> CompressParams {
    CompressParams {
        codec: c.compression.codec,
        clevel: c.compression.clevel,
        filter: if typesize > 1 {
            c.compression.blosc_filter()
        } else {
            Filter::NoShuffle
        },
        typesize,
        blocksize: c.compression.blocksize,
        nthreads: 1,
    }
}

impl ColWriter {
    fn push(&mut self, v: &[u8]) -> Result<()> {
        if self.nbuf == 0 {
            self.first.clear();
            self.first.extend_from_slice(v);
        }
        self.last.clear();
        self.last.extend_from_slice(v);
        if self.leaves.is_empty() {
            self.parts[0].push(v);
        } else {
            let mut fields = Vec::with_capacity(self.leaves.len());
            value::split_leaves(&self.leaves, v, &mut fields).map_err(Error::InvalidArgument)?;
            for (p, b) in self.parts.iter_mut().zip(fields) {
                p.push(b);
            }
        }
        if let Some(f) = self.filter.as_mut() {
            if f.choice != filter::Choice::Exact {
                f.hashes.push(hash64(v));
            }
            if f.choice != filter::Choice::Bloom {
                if let Some(k) = value::exact_key(&self.kind, v) {
                    f.keys.push(k);
                }
            }
        }
        self.nbuf += 1;
        self.rows += 1;
        if self.nbuf == self.chunklen {
            self.flush_chunk()?;
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> Result<()> {
        if self.nbuf == 0 {
            return Ok(());
        }
        for p in &mut self.parts {
            p.flush()?;
        }
        self.nbuf = 0;
        let entry = vec![
            std::mem::take(&mut self.first),
            std::mem::take(&mut self.last),
        ];
        self.push_entry(0, entry)?;
        if let Some(f) = self.filter.as_mut() {
            f.chunks += 1;
            if f.chunks == f.meta.chunks_per_block {
                Self::flush_filter(f)?;
            }
        }
        Ok(())
    }

    fn flush_filter(f: &mut FilterWriter) -> Result<()> {
        if f.chunks == 0 {
            return Ok(());
        }
        let (payload, exact) = filter::choose(
            f.choice,
            &f.hashes,
            &mut f.keys,
            f.meta.bits_per_value,
            f.meta.hashes,
        );
        f.exact += u64::from(exact);
        // Filter bits do not compress: store them (clevel 0), still digest-checked.
        let p = CompressParams {
            clevel: 0,
            typesize: 8,
            filter: Filter::NoShuffle,
            ..CompressParams::default()
        };
        let c = blosc::compress(&p, &payload).map_err(|e| Error::Compress(e.0))?;
        f.sink.append(c)?;
        f.hashes.clear();
        f.keys.clear();
        f.chunks = 0;
        Ok(())
    }

    fn level_dir(&self, level: usize) -> PathBuf {
        self.root
            .join(data_dir(&self.name))
            .join("index")
            .join(level.to_string())
    }

    /// Adds one entry (its items) to index level `level`, emitting the level's chunk when it
    /// holds `fanout` entries.
    fn push_entry(&mut self, level: usize, items: Vec<Vec<u8>>) -> Result<()> {
        if level == self.levels.len() {
            let sink = ChunkSink::new(
                self.storage.clone(),
                self.level_dir(level),
                self.superchunksize,
                self.checksum,
                1,
                true,
                self.dataset_id
                    .as_deref()
                    .map(|id| (id, self.root.as_path())),
            )?;
            self.levels.push(Level {
                sink,
                items: Vec::new(),
                entries: 0,
            });
        }
        let l = &mut self.levels[level];
        l.items.extend(items);
        l.entries += 1;
        if l.entries == self.fanout {
            self.emit_level(level, true)?;
        }
        Ok(())
    }

    fn emit_level(&mut self, level: usize, push_up: bool) -> Result<()> {
        let l = &mut self.levels[level];
        if l.entries == 0 {
            return Ok(());
        }
        let items = std::mem::take(&mut l.items);
        l.entries = 0;
        let c = blosc::compress(&self.index_params, &encode_items(&items)?)
            .map_err(|e| Error::Compress(e.0))?;
        l.sink.append(c)?;
        if push_up {
            let first = items.into_iter().next().unwrap_or_default();
            self.push_entry(level + 1, vec![first])?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<ColumnCounts> {
        self.flush_chunk()?;
        if let Some(f) = self.filter.as_mut() {
            Self::flush_filter(f)?;
            f.sink.close()?;
        }
        for p in &mut self.parts {
            p.sink.close()?;
        }
        let mut l = 0;
        while l < self.levels.len() {
            let top = l + 1 == self.levels.len() && self.levels[l].sink.nchunks == 0;
            self.emit_level(l, !top)?;
            self.levels[l].sink.close()?;
            l += 1;
        }
        let mut nbytes: u64 = self.parts.iter().map(|p| p.sink.nbytes).sum();
        let mut cbytes: u64 = self.parts.iter().map(|p| p.sink.stored).sum();
        if let Some(r) = self.rowgroups.as_mut() {
            r.finish()?;
            nbytes += r.sink.nbytes;
            cbytes += r.sink.stored;
        }
        for l in &self.levels {
            nbytes += l.sink.nbytes;
            cbytes += l.sink.stored;
        }
        let filter_chunks = self.filter.as_ref().map_or(0, |f| f.sink.nchunks);
        let exact_filter_chunks = self.filter.as_ref().map_or(0, |f| f.exact);
        let filter_bytes = self.filter.as_ref().map_or(0, |f| f.sink.stored);
        if let Some(f) = &self.filter {
            nbytes += f.sink.nbytes;
            cbytes += f.sink.stored;
        }
        Ok(ColumnCounts {
            rows: self.rows,
            index_chunks: self.levels.iter().map(|l| l.sink.nchunks).collect(),
            filter_chunks,
            exact_filter_chunks: Some(exact_filter_chunks),
            filter_bytes: Some(filter_bytes),
            nbytes,
            cbytes,
        })
    }
}

impl ColWriter {
    /// The writer of column `i` of a layer being built in `tmp`, and the writer of the
    /// layer's weight when this is the last column of a weighted layer.
    fn open(
        storage: &Arc<dyn Storage>,
        tmp: &Path,
        meta: &LayerStorage,
        i: usize,
    ) -> Result<(ColWriter, Option<FixedWriter>)> {
        let c = &meta.columns[i];
        let last = i + 1 == meta.columns.len();
        let kind = ValueType::parse(&c.dtype)?;
        let dir = tmp.join(data_dir(&c.name));
        let binding = meta.id.as_deref().map(|id| (id, tmp));
        let sink = |d: PathBuf, ts: u8, varlen: bool| {
            ChunkSink::new(
                storage.clone(),
                d,
                c.superchunksize,
                c.checksum,
                ts,
                varlen,
                binding,
            )
        };
        let fixed = |name: &str, ts: usize| -> Result<FixedWriter> {
            Ok(FixedWriter {
                chunklen: c.chunklen,
                params: params(c, ts),
                buf: Vec::new(),
                n: 0,
                sink: sink(dir.join(name), ts as u8, false)?,
            })
        };
        let part = |leaf: LeafKind, d: PathBuf| -> Result<Part> {
            let typesize = match leaf {
                LeafKind::Fixed(d) => d.typesize(),
                _ => 1,
            };
            Ok(Part {
                kind: leaf,
                params: params(c, typesize),
                fixed: Vec::new(),
                items: Vec::new(),
                sink: sink(d, typesize as u8, !matches!(leaf, LeafKind::Fixed(_)))?,
            })
        };
        let (leaves, parts) = match &kind {
            ValueType::Leaf(k) => (Vec::new(), vec![part(*k, dir.clone())?]),
            ValueType::Tuple(_) => {
                let leaves = kind.leaves();
                let parts = leaves
                    .iter()
                    .enumerate()
                    .map(|(j, k)| part(*k, tmp.join(super::field_dir(&c.name, j))))
                    .collect::<Result<_>>()?;
                (leaves, parts)
            }
        };
        let rowgroups = if last {
            None
        } else {
            Some(fixed("rowgroups", 8)?)
        };
        let filter = match c.filter {
            Some(f) => Some(FilterWriter {
                meta: f,
                // The schema refuses exact filters on other columns than integers.
                choice: match (f.kind, value::exact_capable(&kind)) {
                    (super::FilterKind::Bloom, _) | (_, false) => filter::Choice::Bloom,
                    (super::FilterKind::Exact, true) => filter::Choice::Exact,
                    (super::FilterKind::Auto, true) => filter::Choice::Smaller,
                },
                hashes: Vec::new(),
                keys: Vec::new(),
                chunks: 0,
                exact: 0,
                sink: sink(dir.join("filter"), 8, false)?,
            }),
            None => None,
        };
        let weight = match (&meta.weight, last) {
            (Some(wm), true) => Some(fixed("weight", wm.dtype.typesize())?),
            _ => None,
        };
        let col = ColWriter {
            kind,
            leaves,
            chunklen: c.chunklen,
            fanout: c.fanout,
            index_params: params(c, 1),
            root: tmp.to_path_buf(),
            dataset_id: meta.id.clone(),
            name: c.name.clone(),
            superchunksize: c.superchunksize,
            checksum: c.checksum,
            rows: 0,
            nbuf: 0,
            first: Vec::new(),
            last: Vec::new(),
            parts,
            levels: Vec::new(),
            rowgroups,
            filter,
            storage: storage.clone(),
        };
        Ok((col, weight))
    }
}

impl LayerWriter {
    /// Starts building a layer dataset at `path` (on the local filesystem).
    ///
    /// # Errors
    /// As [`LayerWriter::create_in`].
    pub fn create(path: impl AsRef<Path>, schema: LayerSchema) -> Result<LayerWriter> {
        let (s, root) = storage::for_path(path.as_ref())?;
        Self::create_in(s, &root, schema)
    }

    /// Starts building a layer dataset at `path`. The files are written under
    /// `<path>.tmp-build` (a leftover of a killed build there is removed) and renamed into
    /// place by [`finish`](Self::finish).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad schema, or when `path` exists and the schema does
    /// not allow overwriting a layer dataset there; I/O errors.
    pub fn create_in(
        storage: Arc<dyn Storage>,
        path: &Path,
        schema: LayerSchema,
    ) -> Result<LayerWriter> {
        let meta = schema.to_storage()?;
        let is_layer =
            |p: &Path| meta::dataset_kind(storage.as_ref(), p) == Some(meta::Kind::Layer);
        let staging = Staging::begin(
            &storage,
            path,
            schema.overwrite,
            &is_layer,
            "a layer dataset",
        )?;
        let tmp = staging.dir().to_path_buf();
        // Built through the staging's storage: everything is synced at once when it publishes.
        let storage = Arc::clone(staging.build_storage());
        let mut w = LayerWriter {
            storage: storage.clone(),
            staging: Some(staging),
            tmp: tmp.clone(),
            meta: meta.clone(),
            cols: Vec::new(),
            weight: None,
            prev: None,
            scratch: Vec::new(),
            buf: Vec::new(),
            failed: false,
            done: false,
        };
        for i in 0..meta.columns.len() {
            let (col, weight) = ColWriter::open(&storage, &tmp, &meta, i)?;
            w.cols.push(col);
            if weight.is_some() {
                w.weight = weight;
            }
        }
        Ok(w)
    }

    /// The `meta/storage` document being written.
    pub fn storage_meta(&self) -> &LayerStorage {
        &self.meta
    }

    /// The directory the dataset is built in (`<path>.tmp-build`, removed with everything
    /// in it when the build is abandoned or killed) and the storage it is built through.
    pub(crate) fn build_dir(&self) -> (&Path, &Arc<dyn Storage>) {
        (&self.tmp, &self.storage)
    }

    /// Rows pushed so far into each column.
    pub fn rows(&self) -> Vec<u64> {
        self.cols.iter().map(|c| c.rows).collect()
    }

    /// Adds one path of keys (one per column) and the weight of the last column's row. Keys
    /// must come in strictly increasing order of the whole path: a key that differs from the
    /// previous path in column `i` starts a new row there, and new rows (new row groups) in
    /// every later column.
    ///
    /// On any error the build is abandoned and its temporary directory removed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a wrong number of keys, a key or weight that does not
    /// fit its column, a missing or unexpected weight, a path equal to the previous one
    /// (duplicate) or smaller (unsorted input); I/O errors.
    pub fn push(&mut self, keys: &[Value], weight: Option<Value>) -> Result<()> {
        self.guarded(|w| w.push_inner(keys, weight))
    }

    /// Runs `step` on a build still under way; on an error abandons the build.
    fn guarded<T>(&mut self, step: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if self.failed || self.done {
            return Err(Error::InvalidArgument(
                "the layer build was already abandoned or finished".into(),
            ));
        }
        let r = step(self);
        if r.is_err() {
            self.abandon();
        }
        r
    }

    fn push_inner(&mut self, keys_in: &[Value], weight: Option<Value>) -> Result<()> {
        let n = self.cols.len();
        if keys_in.len() != n {
            return Err(Error::InvalidArgument(format!(
                "{} keys given for {n} columns",
                keys_in.len()
            )));
        }
        let mut keys = std::mem::take(&mut self.scratch);
        keys.clear();
        for (k, c) in keys_in.iter().zip(&self.cols) {
            keys.push(value::coerce(&c.kind, k)?);
        }
        let wdtype = self.meta.weight.as_ref().map(|w| w.dtype);
        let mut wb = [0u8; 8];
        let wbytes = match (wdtype, weight) {
            (Some(d), Some(v)) => {
                let kind = LeafKind::Fixed(d);
                let n = d.itemsize().min(8);
                value::encode_fixed(d, &value::coerce_leaf(kind, &v)?, &mut wb[..n]);
                Some(&wb[..n])
            }
            (None, None) => None,
            (has, _) => return Err(weight_presence(has.is_some())),
        };
        let d = match &self.prev {
            None => 0,
            Some(prev) => self.first_change(prev, &keys)?,
        };
        let mut buf = std::mem::take(&mut self.buf);
        for (i, key) in keys.iter().enumerate().skip(d) {
            self.close_group(i)?;
            buf.clear();
            value::encode(&self.cols[i].kind, key, &mut buf);
            self.cols[i].push(&buf)?;
        }
        self.buf = buf;
        if let (Some(w), Some(b)) = (self.weight.as_mut(), wbytes) {
            w.push(b)?;
        }
        // The old path's vector holds the next row's keys.
        self.scratch = self.prev.replace(keys).unwrap_or_default();
        Ok(())
    }

    /// Before a new row of column `i`: the row group of its previous row (in column
    /// `i + 1`) ends where column `i + 1` is now.
    fn close_group(&mut self, i: usize) -> Result<()> {
        if i + 1 < self.cols.len() && self.cols[i].rows > 0 {
            let end = self.cols[i + 1].rows;
            if let Some(r) = self.cols[i].rowgroups.as_mut() {
                r.push(&end.to_le_bytes())?;
            }
        }
        Ok(())
    }

    /// Adds `n` whole key paths at once from typed columns: path `r` is row `r` of every
    /// column of `keys` (one per layer column, each of the column's own dtype and `n` long)
    /// and its weight row `r` of `weights`. The same as `n` calls of [`push`](Self::push),
    /// in order and with the same checks, without a [`Value`] per key: the fast way to
    /// write numbers.
    ///
    /// On any error the build is abandoned and its temporary directory removed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a wrong number of columns, columns of different
    /// lengths, a column whose type is not the layer column's (or a layer column that does
    /// not hold numbers: use [`push`](Self::push)), a missing or unexpected weight, and
    /// duplicate or unsorted paths (as [`push`](Self::push)); I/O errors.
    pub fn push_columns(
        &mut self,
        keys: &[Numbers<'_>],
        weights: Option<Numbers<'_>>,
    ) -> Result<()> {
        self.guarded(|w| w.push_columns_inner(keys, weights))
    }

    fn push_columns_inner(
        &mut self,
        keys: &[Numbers<'_>],
        weights: Option<Numbers<'_>>,
    ) -> Result<()> {
        let ncols = self.cols.len();
        if keys.len() != ncols {
            return Err(Error::InvalidArgument(format!(
                "{} key columns given for {ncols} columns",
                keys.len()
            )));
        }
        let n = keys.first().map_or(0, Numbers::len);
        for (i, (k, c)) in keys.iter().zip(&self.cols).enumerate() {
            if c.kind != ValueType::Leaf(LeafKind::Fixed(k.dtype())) {
                return Err(Error::InvalidArgument(format!(
                    "column {} ({:?}) holds {}, given {}",
                    i + 1,
                    self.meta.columns[i].name,
                    c.kind,
                    k.dtype()
                )));
            }
            if k.len() != n {
                return Err(Error::InvalidArgument(format!(
                    "key columns of {} and {} rows",
                    n,
                    k.len()
                )));
            }
        }
        match (self.meta.weight.as_ref().map(|w| w.dtype), &weights) {
            (Some(d), Some(w)) if w.dtype() == d && w.len() == n => {}
            (Some(d), Some(w)) => {
                return Err(Error::InvalidArgument(format!(
                    "{} weights of {} given; the dataset's are {d}, one per path ({n})",
                    w.len(),
                    w.dtype()
                )))
            }
            (None, None) => {}
            (has, _) => return Err(weight_presence(has.is_some())),
        }
        if n == 0 {
            return Ok(());
        }
        let path = |r: usize| -> Vec<Value> { keys.iter().map(|k| k.value(r)).collect() };
        let mut buf = [0u8; 8];
        for r in 0..n {
            // The first column that differs from the previous path, which must be smaller.
            let d = if r == 0 {
                match &self.prev {
                    None => 0,
                    Some(prev) => self.first_change(prev, &path(0))?,
                }
            } else {
                let mut d = None;
                for (c, k) in keys.iter().enumerate() {
                    match k.cmp_rows(r - 1, r) {
                        Ordering::Equal => {}
                        Ordering::Less => {
                            d = Some(c);
                            break;
                        }
                        Ordering::Greater => break,
                    }
                }
                match d {
                    Some(d) => d,
                    None => return Err(self.order_error(&path(r - 1), &path(r))),
                }
            };
            for (c, k) in keys.iter().enumerate().skip(d) {
                self.close_group(c)?;
                let b = k.le_bytes(r, &mut buf);
                self.cols[c].push(b)?;
            }
            if let (Some(w), Some(ws)) = (self.weight.as_mut(), &weights) {
                w.push(ws.le_bytes(r, &mut buf))?;
            }
        }
        self.prev = Some(path(n - 1));
        Ok(())
    }

    /// The first column where path `next` differs from `prev`, the path before it; an
    /// error unless `next` is the larger there.
    fn first_change(&self, prev: &[Value], next: &[Value]) -> Result<usize> {
        match prev.iter().zip(next).position(|(a, b)| a != b) {
            Some(d) if next[d] > prev[d] => Ok(d),
            _ => Err(self.order_error(prev, next)),
        }
    }

    /// The error for path `next` pushed after `prev`: a duplicate, or out of order.
    fn order_error(&self, prev: &[Value], next: &[Value]) -> Error {
        match prev.iter().zip(next).position(|(a, b)| a != b) {
            None => Error::InvalidArgument(format!(
                "duplicate input: {} repeats the previous row",
                show(next)
            )),
            Some(d) => Error::InvalidArgument(format!(
                "unsorted input: {} comes after {} (column {} = {:?} must increase{})",
                show(next),
                show(prev),
                d + 1,
                self.meta.columns[d].name,
                if d > 0 { " within its row group" } else { "" }
            )),
        }
    }

    /// Completes the dataset: flushes every column, writes `meta/storage` and then
    /// `meta/sizes`, syncs, and renames the build directory to the dataset path (replacing a
    /// previous layer dataset there when the schema allows overwriting).
    ///
    /// # Errors
    /// I/O errors; the build directory is then removed.
    pub fn finish(mut self) -> Result<LayerSizes> {
        let sizes = self.guarded(Self::finish_inner)?;
        self.done = true;
        Ok(sizes)
    }

    fn finish_inner(&mut self) -> Result<LayerSizes> {
        let n = self.cols.len();
        for i in 0..n.saturating_sub(1) {
            if self.cols[i].rows > 0 {
                let end = self.cols[i + 1].rows;
                if let Some(r) = self.cols[i].rowgroups.as_mut() {
                    r.push(&end.to_le_bytes())?;
                }
            }
        }
        let mut counts = Vec::new();
        for c in &mut self.cols {
            counts.push(c.finish()?);
        }
        if let Some(w) = self.weight.as_mut() {
            w.finish()?;
            if let Some(last) = counts.last_mut() {
                last.nbytes += w.sink.nbytes;
                last.cbytes += w.sink.stored;
            }
        }
        let sizes = LayerSizes {
            kind: super::LAYER_KIND.into(),
            columns: counts,
        };
        let mp = MetaPaths::new(&self.tmp);
        meta::write_json(self.storage.as_ref(), &mp.storage(), &self.meta)?;
        meta::write_json(self.storage.as_ref(), &mp.sizes(), &sizes)?;
        self.staging
            .take()
            .ok_or_else(|| Error::InvalidArgument("the layer build was already published".into()))?
            .publish()
            .map(drop)?;
        Ok(sizes)
    }

    /// Abandons the build: removes the temporary directory. Dropping an unfinished writer
    /// does the same.
    pub fn abandon(&mut self) {
        if !self.failed && !self.done {
            self.failed = true;
            for c in &mut self.cols {
                c.levels.clear();
            }
            // Removes the staging directory, then lets its lock go.
            self.staging = None;
        }
    }
}

impl Drop for LayerWriter {
    fn drop(&mut self) {
        self.abandon();
    }
}

/// The error for a weight given to a dataset without one (`has_weight` false), or missing
/// for a dataset with one.
fn weight_presence(has_weight: bool) -> Error {
    Error::InvalidArgument(if has_weight {
        "the dataset has a weight; give one with every row".into()
    } else {
        "the dataset has no weight column".into()
    })
}

/// A column of numbers of one dtype, for [`LayerWriter::push_columns`].
#[derive(Debug, Clone, Copy)]
pub enum Numbers<'a> {
    /// `int8` values.
    I8(&'a [i8]),
    /// `int16` values.
    I16(&'a [i16]),
    /// `int32` values.
    I32(&'a [i32]),
    /// `int64` values.
    I64(&'a [i64]),
    /// `uint8` values.
    U8(&'a [u8]),
    /// `uint16` values.
    U16(&'a [u16]),
    /// `uint32` values.
    U32(&'a [u32]),
    /// `uint64` values.
    U64(&'a [u64]),
    /// `float32` values (ordered by IEEE 754 total order, as in a layer).
    F32(&'a [f32]),
    /// `float64` values (ordered by IEEE 754 total order).
    F64(&'a [f64]),
}

macro_rules! numbers {
    ($self:ident, $x:ident => $e:expr) => {
        match $self {
            Numbers::I8($x) => $e,
            Numbers::I16($x) => $e,
            Numbers::I32($x) => $e,
            Numbers::I64($x) => $e,
            Numbers::U8($x) => $e,
            Numbers::U16($x) => $e,
            Numbers::U32($x) => $e,
            Numbers::U64($x) => $e,
            Numbers::F32($x) => $e,
            Numbers::F64($x) => $e,
        }
    };
}

impl Numbers<'_> {
    /// Values in the column.
    pub fn len(&self) -> usize {
        numbers!(self, x => x.len())
    }

    /// True for an empty column.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The dtype of the values.
    pub fn dtype(&self) -> crate::dtype::DType {
        use crate::dtype::DType;
        match self {
            Numbers::I8(_) => DType::I8,
            Numbers::I16(_) => DType::I16,
            Numbers::I32(_) => DType::I32,
            Numbers::I64(_) => DType::I64,
            Numbers::U8(_) => DType::U8,
            Numbers::U16(_) => DType::U16,
            Numbers::U32(_) => DType::U32,
            Numbers::U64(_) => DType::U64,
            Numbers::F32(_) => DType::F32,
            Numbers::F64(_) => DType::F64,
        }
    }

    /// Value `r` as a [`Value`].
    fn value(&self, r: usize) -> Value {
        match self {
            Numbers::F32(x) => Value::Float(f64::from(x[r])),
            Numbers::F64(x) => Value::Float(x[r]),
            Numbers::I8(x) => Value::Int(x[r].into()),
            Numbers::I16(x) => Value::Int(x[r].into()),
            Numbers::I32(x) => Value::Int(x[r].into()),
            Numbers::I64(x) => Value::Int(x[r]),
            Numbers::U8(x) => Value::UInt(x[r].into()),
            Numbers::U16(x) => Value::UInt(x[r].into()),
            Numbers::U32(x) => Value::UInt(x[r].into()),
            Numbers::U64(x) => Value::UInt(x[r]),
        }
    }

    /// Row `a` against row `b`, in a layer's order.
    fn cmp_rows(&self, a: usize, b: usize) -> Ordering {
        match self {
            Numbers::F32(x) => x[a].total_cmp(&x[b]),
            Numbers::F64(x) => x[a].total_cmp(&x[b]),
            Numbers::I8(x) => x[a].cmp(&x[b]),
            Numbers::I16(x) => x[a].cmp(&x[b]),
            Numbers::I32(x) => x[a].cmp(&x[b]),
            Numbers::I64(x) => x[a].cmp(&x[b]),
            Numbers::U8(x) => x[a].cmp(&x[b]),
            Numbers::U16(x) => x[a].cmp(&x[b]),
            Numbers::U32(x) => x[a].cmp(&x[b]),
            Numbers::U64(x) => x[a].cmp(&x[b]),
        }
    }

    /// The stored (little-endian) bytes of value `r`, in `buf`.
    fn le_bytes<'b>(&self, r: usize, buf: &'b mut [u8; 8]) -> &'b [u8] {
        numbers!(self, x => {
            let b = x[r].to_le_bytes();
            buf[..b.len()].copy_from_slice(&b);
            &buf[..b.len()]
        })
    }
}

fn show(keys: &[Value]) -> String {
    let parts: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    format!("({})", parts.join(", "))
}
