//! The chunk engine shared by arrays and table columns: reads a selection by decoding only
//! the chunks it touches (in parallel, straight into the output where the layout allows),
//! and writes a selection by re-encoding only the chunks it touches.

use super::chunks::{ChunkStore, ChunkWrites};
use super::select::{chunk_parts, copy_part, strides, ChunkPart, PartAxis};
use crate::blosc::{self, CompressParams};
use crate::blpk::MAX_DIGEST_LEN;
use crate::dtype::{swap_bytes, DType, Endianness};
use crate::error::{Error, Result};
use crate::meta::{Compression, FilterName};
use crate::selection::AxisSel;
use crate::stats::{self, ChunkStats};
use crate::txn::Txn;
use blz_format::process::PerProcess;
use std::sync::{Condvar, Mutex, PoisonError};

/// Everything needed to turn chunks into elements and back.
#[derive(Debug)]
pub(crate) struct ArrayCore {
    pub(crate) store: ChunkStore,
    pub(crate) dtype: DType,
    pub(crate) endian: Endianness,
    pub(crate) chunkshape: Vec<u64>,
    pub(crate) compression: Compression,
    /// One fill element, native byte order.
    pub(crate) fill: Vec<u8>,
}

/// A raw pointer that may be shared between the threads that write disjoint parts of one
/// output buffer.
#[derive(Clone, Copy)]
struct SharedMut(*mut u8);

impl SharedMut {
    /// The pointer. Closures call this rather than reading the field, so that they capture
    /// the whole (`Send`) wrapper and not the bare pointer.
    fn get(self) -> *mut u8 {
        self.0
    }
}
// SAFETY: used only to write disjoint regions (one per chunk part) of a buffer that outlives
// the parallel loop.
unsafe impl Send for SharedMut {}
// SAFETY: as above.
unsafe impl Sync for SharedMut {}

/// What a write puts into the selected elements.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    /// Native-endian elements in C order over the selection's (un-reversed) counts.
    Data(&'a [u8]),
    /// The fill value everywhere.
    Fill,
}

/// What every chunk of one [`ArrayCore::write`] shares: where the write lands, its source,
/// and the buffers reused from chunk to chunk.
struct OneWrite<'w> {
    /// Chunks committed before the write (those below are read back when patched).
    committed: u64,
    /// The dataset's shape after the write.
    shape: &'w [u64],
    /// The selection's extent on each axis (the source's shape).
    counts: &'w [u64],
    src: Source<'w>,
    params: &'w CompressParams,
    /// Chunk buffers, reused.
    chunks: &'w BufferPool,
    /// A new chunk holding only the fill value, compressed once: a grow writes the same
    /// bytes for every chunk it adds.
    fill_chunk: &'w std::sync::OnceLock<Vec<u8>>,
}

impl ArrayCore {
    pub(crate) fn itemsize(&self) -> usize {
        self.dtype.itemsize()
    }

    pub(crate) fn chunk_len(&self) -> usize {
        self.chunkshape.iter().product::<u64>() as usize
    }

    /// Chunks along each axis for `shape`.
    pub(crate) fn grid(&self, shape: &[u64]) -> Vec<u64> {
        shape
            .iter()
            .zip(&self.chunkshape)
            .map(|(&n, &c)| n.div_ceil(c))
            .collect()
    }

    /// Chunks stored for `shape`.
    pub(crate) fn nchunks(&self, shape: &[u64]) -> u64 {
        self.grid(shape).iter().product()
    }

    /// Chunks in one chunk-row (all chunks sharing a position along axis 0).
    pub(crate) fn row_chunks(&self, shape: &[u64]) -> u64 {
        self.grid(shape)[1..].iter().product()
    }

    fn linear(&self, coords: &[u64], shape: &[u64]) -> u64 {
        let g = self.grid(shape);
        let mut k = 0;
        for (c, n) in coords.iter().zip(&g) {
            k = k * n + c;
        }
        k
    }

    pub(super) fn blosc_params(&self) -> CompressParams {
        CompressParams {
            codec: self.compression.codec,
            clevel: self.compression.clevel,
            filter: self.compression.blosc_filter(),
            typesize: self.dtype.typesize(),
            blocksize: self.compression.blocksize,
            nthreads: 1,
        }
    }

    pub(super) fn swap_needed(&self) -> bool {
        self.endian != Endianness::native() && self.dtype.swap_unit() > 1
    }

    /// Reads the selection into `out` (native byte order, C order over the selection's
    /// un-reversed counts, `prod(counts) * itemsize` bytes).
    pub(crate) fn read_into(&self, sel: &[AxisSel], shape: &[u64], out: &mut [u8]) -> Result<()> {
        let isz = self.itemsize();
        let counts: Vec<u64> = sel.iter().map(|s| s.count).collect();
        let total: u64 = counts.iter().product();
        if out.len() as u64 != total * isz as u64 {
            return Err(Error::InvalidArgument(format!(
                "output buffer has {} bytes, selection needs {}",
                out.len(),
                total * isz as u64
            )));
        }
        let parts = chunk_parts(sel, &self.chunkshape);
        let chunk_bytes = self.chunk_len() * isz;
        let inner_chunk: u64 = self.chunkshape[1..].iter().product();
        let direct_ok = counts[1..] == self.chunkshape[1..];
        let out_ptr = SharedMut(out.as_mut_ptr());
        let cs = &self.chunkshape;
        // Rayon calls the init closure for every piece of work it splits off: lease the
        // buffers from the process's pool, so that they are allocated (and faulted in) once
        // per thread, not once per read: a process making many reads (a dask worker, whose
        // allocator returns every freed buffer to the system) reuses them.
        let pool = read_scratch();
        // A part that is a short run of its chunk decodes just the blocks holding it.
        let short_run = |part: &ChunkPart| {
            let full = part
                .axes
                .iter()
                .zip(cs)
                .all(|(a, &c)| a.in_start == 0 && a.step == 1 && a.count == c);
            self.contiguous_run(part)
                .filter(|&(_, n)| !full && n * isz * 4 < chunk_bytes)
        };
        self.store.for_each_fetched(
            &parts,
            |part| self.linear(&part.coords, shape),
            |part| short_run(part).map(|(item, n)| item * isz..(item + n) * isz),
            || pool.lease(),
            |bufs, part, fetched| -> Result<()> {
                let (scratch, chunk) = &mut **bufs;
                let k = self.linear(&part.coords, shape);
                let full = part
                    .axes
                    .iter()
                    .zip(cs)
                    .all(|(a, &c)| a.in_start == 0 && a.step == 1 && a.count == c);
                let out_ptr = out_ptr.get();
                if full && direct_ok {
                    // The chunk lands as one contiguous run of the output: decode in place.
                    let start = part.axes[0].out_start * inner_chunk * isz as u64;
                    // SAFETY: the run [start, start + chunk_bytes) lies inside `out` (the part
                    // is inside the selection) and no other part writes it.
                    let dst = unsafe {
                        std::slice::from_raw_parts_mut(out_ptr.add(start as usize), chunk_bytes)
                    };
                    self.store.decompress_fetched(k, dst, scratch, fetched)?;
                    if self.swap_needed() {
                        swap_bytes(dst, self.dtype.swap_unit());
                    }
                    return Ok(());
                }
                if let Some((item, n)) = short_run(part) {
                    {
                        // A short run: decode only the Blosc blocks that hold it.
                        let mut run = vec![0u8; n * isz];
                        self.store
                            .getitem_fetched(k, item * isz, &mut run, scratch, fetched)?;
                        if self.swap_needed() {
                            swap_bytes(&mut run, self.dtype.swap_unit());
                        }
                        let rpart = ChunkPart {
                            coords: part.coords.clone(),
                            axes: single_run_axes(part, n as u64),
                        };
                        let mut rshape = vec![1u64; cs.len()];
                        *rshape.last_mut().unwrap_or(&mut 0) = n as u64;
                        // SAFETY: `run` holds the part's n elements as a 1 x .. x n chunk;
                        // the output region is the part's and no other part writes it.
                        unsafe {
                            copy_part(
                                &rpart,
                                run.as_mut_ptr(),
                                &rshape,
                                out_ptr,
                                &counts,
                                isz,
                                false,
                            )
                        };
                        return Ok(());
                    }
                }
                chunk.resize(chunk_bytes, 0);
                self.store.decompress_fetched(k, chunk, scratch, fetched)?;
                if self.swap_needed() {
                    swap_bytes(chunk, self.dtype.swap_unit());
                }
                // SAFETY: `chunk` holds a whole chunk; the part lies inside it and inside the
                // selection; parts write disjoint output regions.
                unsafe { copy_part(part, chunk.as_mut_ptr(), cs, out_ptr, &counts, isz, false) };
                Ok(())
            },
        )
    }

    /// Decodes chunk `k` into `dst` (exactly a chunk's bytes), native byte order.
    pub(crate) fn decode_chunk_into(
        &self,
        k: u64,
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        self.store.decompress_chunk(k, dst, scratch)?;
        if self.swap_needed() {
            swap_bytes(dst, self.dtype.swap_unit());
        }
        Ok(())
    }

    /// [`decode_chunk_into`](Self::decode_chunk_into) from the chunk's bytes in `fetched`
    /// when they are there.
    pub(crate) fn decode_fetched_into(
        &self,
        k: u64,
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
        fetched: &super::chunks::Fetched,
    ) -> Result<()> {
        self.store.decompress_fetched(k, dst, scratch, fetched)?;
        if self.swap_needed() {
            swap_bytes(dst, self.dtype.swap_unit());
        }
        Ok(())
    }

    /// When the part's elements are one contiguous run of the chunk, its first item and length.
    fn contiguous_run(&self, part: &ChunkPart) -> Option<(usize, usize)> {
        let nd = part.axes.len();
        if part.axes[..nd - 1].iter().any(|a| a.count != 1)
            || part.axes[nd - 1].step != 1 && part.axes[nd - 1].count > 1
        {
            return None;
        }
        let st = strides(&self.chunkshape);
        let item: u64 = part.axes.iter().zip(&st).map(|(a, s)| a.in_start * s).sum();
        Some((item as usize, part.axes[nd - 1].count as usize))
    }

    /// Writes the selection (of a dataset whose shape after the write is `shape`) into the
    /// store through `writes`. Chunks the selection covers only partly are read, patched and
    /// re-encoded; chunks past `writes`'s committed count start from the fill value.
    ///
    /// Chunks are encoded in order by as many threads as rayon's pool has: helper threads
    /// and the calling thread, which writes each chunk as soon as it and those before it
    /// are ready and encodes one itself whenever there is nothing to write. Nobody waits for
    /// a batch to finish, and no more threads run than there are cores (a third thread
    /// contending for two cores cost more than it gave). At most two chunks per thread are
    /// ahead of the writer, so memory stays at a few chunks whatever the size of the write;
    /// whole chunks that lie in one piece in the source are compressed straight from it.
    ///
    /// The helpers are threads of their own, not rayon tasks, so a caller that is itself a
    /// rayon task cannot starve them.
    pub(crate) fn write(
        &self,
        txn: &mut Txn<'_>,
        writes: &mut ChunkWrites<'_>,
        committed: u64,
        sel: &[AxisSel],
        shape: &[u64],
        src: Source<'_>,
    ) -> Result<()> {
        let counts: Vec<u64> = sel.iter().map(|s| s.count).collect();
        let parts = chunk_parts(sel, &self.chunkshape);
        let params = self.blosc_params();
        let pools = (BufferPool::default(), BufferPool::default());
        let fill_chunk = std::sync::OnceLock::new();
        let write = OneWrite {
            committed,
            shape,
            counts: &counts,
            src,
            params: &params,
            chunks: &pools.1,
            fill_chunk: &fill_chunk,
        };
        type Encoded = (u64, Vec<u8>, Option<ChunkStats>);
        let encode = |part: &ChunkPart, scratch: &mut Vec<u8>| -> Result<Encoded> {
            let k = self.linear(&part.coords, shape);
            let mut out = pools.0.take();
            let stats = self.encode_part(&write, part, k, scratch, &mut out)?;
            Ok((k, out, stats))
        };
        let threads = rayon::current_num_threads().clamp(1, parts.len().max(1));
        let queue = InOrder::new(parts.len(), 2 * threads);
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::channel();
            for _ in 1..threads {
                let tx = tx.clone();
                let (queue, parts, encode) = (&queue, &parts, &encode);
                let helper = move || {
                    let mut scratch = Vec::new();
                    while let Some(i) = queue.claim() {
                        if tx.send((i, encode(&parts[i], &mut scratch))).is_err() {
                            break;
                        }
                    }
                };
                // A helper the system refuses (a process at its thread limit) is one fewer:
                // this thread encodes what the helpers do not claim.
                if std::thread::Builder::new()
                    .name("blz-encode".into())
                    .spawn_scoped(s, helper)
                    .is_err()
                {
                    break;
                }
            }
            drop(tx);
            let mut ready = std::collections::BTreeMap::new();
            let mut next = 0;
            let mut scratch = Vec::new();
            let result = (|| -> Result<()> {
                while next < parts.len() {
                    while let Ok((i, r)) = rx.try_recv() {
                        ready.insert(i, r?);
                    }
                    if let Some((k, c, st)) = ready.remove(&next) {
                        pools.0.give(writes.put(txn, k, c, st.as_ref())?);
                        next += 1;
                        queue.advance();
                    } else if let Some(i) = queue.try_claim() {
                        ready.insert(i, encode(&parts[i], &mut scratch)?);
                    } else {
                        // The chunk to write next is with a helper.
                        let Ok((i, r)) = rx.recv() else { break };
                        ready.insert(i, r?);
                    }
                }
                Ok(())
            })();
            // Stops the helpers early on an error; they have all finished otherwise.
            queue.stop();
            result?;
            if next == parts.len() {
                Ok(())
            } else {
                Err(Error::InvalidArgument(format!(
                    "a chunk encoder stopped after {next} of {} chunks",
                    parts.len()
                )))
            }
        })
    }

    /// Compresses the chunk `k` that `part` of a write touches into `out`; returns the
    /// statistics of its visible elements when the store records them.
    fn encode_part(
        &self,
        w: &OneWrite<'_>,
        part: &ChunkPart,
        k: u64,
        scratch: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<Option<ChunkStats>> {
        let want_stats = self.store.stats_kind().is_some();
        let chunk_bytes = self.chunk_len() * self.itemsize();
        // Room for the chunk and its digest, so framing it does not reallocate.
        out.reserve(chunk_bytes + blosc::MAX_OVERHEAD + MAX_DIGEST_LEN);
        let valid: Vec<u64> = part
            .coords
            .iter()
            .zip(&self.chunkshape)
            .zip(w.shape)
            .map(|((&c, &cs), &n)| (n - c * cs).min(cs))
            .collect();
        let covers = part
            .axes
            .iter()
            .zip(&valid)
            .all(|(a, &v)| a.in_start == 0 && a.step == 1 && a.count == v);
        let whole = covers && valid == self.chunkshape;
        let all_fill = covers && k >= w.committed && matches!(w.src, Source::Fill);
        let fill_stats = || {
            want_stats
                .then(|| stats::fill_stats(self.dtype, &self.stored_fill(), valid.iter().product()))
                .flatten()
        };
        if let Some(c) = w.fill_chunk.get().filter(|_| all_fill) {
            out.clear();
            out.extend_from_slice(c);
            return Ok(fill_stats());
        }
        if let (true, false, Source::Data(data)) = (whole, self.transforms(), w.src) {
            if let Some(first) = source_run(part, w.counts) {
                return self.compress_run(data, first, w.params, out, want_stats);
            }
        }
        // Every byte of the buffer is overwritten below, so a reused one needs no clearing.
        let mut chunk = w.chunks.take();
        chunk.resize(chunk_bytes, 0);
        if k < w.committed && !covers {
            self.decode_chunk_into(k, &mut chunk, scratch)?;
            self.fill_padding(&mut chunk, &valid);
        } else if !covers || matches!(w.src, Source::Fill) {
            fill_with(&mut chunk, &self.fill);
        }
        match w.src {
            Source::Data(data) => {
                // SAFETY: `data` covers the selection (checked by the caller) and `chunk` a
                // whole chunk; the part lies inside both; the source is only read.
                unsafe {
                    copy_part(
                        part,
                        chunk.as_mut_ptr(),
                        &self.chunkshape,
                        data.as_ptr() as *mut u8,
                        w.counts,
                        self.itemsize(),
                        true,
                    )
                }
                if covers {
                    self.fill_padding(&mut chunk, &valid);
                }
            }
            Source::Fill if !covers => self.fill_part(part, &mut chunk),
            Source::Fill => {}
        }
        let r = self.encode(&mut chunk, w.params, out, want_stats.then_some(&valid[..]));
        w.chunks.give(chunk);
        if r.is_ok() && all_fill {
            // Padding holds the fill value too, so every such chunk encodes the same.
            let _ = w.fill_chunk.set(out.clone());
        }
        r
    }

    /// Compresses one whole chunk that lies in one piece in the source, from element `first`
    /// on, straight into `out`.
    fn compress_run(
        &self,
        data: &[u8],
        first: u64,
        params: &CompressParams,
        out: &mut Vec<u8>,
        want_stats: bool,
    ) -> Result<Option<ChunkStats>> {
        let isz = self.itemsize();
        let start = first as usize * isz;
        let run = data
            .get(start..start + self.chunk_len() * isz)
            .ok_or_else(|| Error::InvalidArgument("source shorter than selection".into()))?;
        blosc::compress_into(params, run, out).map_err(|e| Error::Compress(e.0))?;
        Ok(want_stats
            .then(|| stats::chunk_stats(self.dtype, run, &self.chunkshape, &self.chunkshape))
            .flatten())
    }

    /// Sets the elements `part` covers in `chunk` (a whole chunk) to the fill value.
    fn fill_part(&self, part: &ChunkPart, chunk: &mut [u8]) {
        let isz = self.itemsize();
        let n: u64 = part.axes.iter().map(|a| a.count).product();
        let mut fill = vec![0u8; n as usize * isz];
        fill_with(&mut fill, &self.fill);
        let local = ChunkPart {
            coords: part.coords.clone(),
            axes: part
                .axes
                .iter()
                .map(|a| PartAxis { out_start: 0, ..*a })
                .collect(),
        };
        let lshape: Vec<u64> = part.axes.iter().map(|a| a.count).collect();
        // SAFETY: `fill` is laid out over `lshape`, which the local part spans exactly;
        // `chunk` holds a whole chunk.
        unsafe {
            copy_part(
                &local,
                chunk.as_mut_ptr(),
                &self.chunkshape,
                fill.as_mut_ptr(),
                &lshape,
                isz,
                true,
            )
        }
    }

    /// Sets the elements of a chunk outside its valid region (`valid` extents) to the fill.
    fn fill_padding(&self, chunk: &mut [u8], valid: &[u64]) {
        if valid == self.chunkshape.as_slice() {
            return;
        }
        let isz = self.itemsize();
        let nd = self.chunkshape.len();
        let row = self.chunkshape[nd - 1] as usize * isz;
        let valid_row = valid[nd - 1] as usize * isz;
        if row == 0 {
            return;
        }
        for (r, bytes) in chunk.chunks_exact_mut(row).enumerate() {
            // Whether this row (a position on every axis but the last) is inside.
            let mut rem = r as u64;
            let mut inside = true;
            for ax in (0..nd - 1).rev() {
                let c = rem % self.chunkshape[ax];
                rem /= self.chunkshape[ax];
                inside &= c < valid[ax];
            }
            let from = if inside { valid_row } else { 0 };
            fill_with(&mut bytes[from..], &self.fill);
        }
    }

    /// Whether encoding changes the elements (lossy truncation or a byte swap), so a chunk
    /// cannot be compressed straight from the caller's data.
    fn transforms(&self) -> bool {
        self.swap_needed()
            || self.compression.mantissa_bits.is_some()
                && self.compression.filters.contains(&FilterName::Truncate)
    }

    /// Applies the lossy filter, converts to the stored byte order and compresses into
    /// `out`. With `valid` (the chunk's visible extents), returns the statistics of the visible
    /// elements as stored (after the lossy filter).
    pub(super) fn encode(
        &self,
        chunk: &mut [u8],
        params: &CompressParams,
        out: &mut Vec<u8>,
        valid: Option<&[u64]>,
    ) -> Result<Option<ChunkStats>> {
        if let (true, Some(bits)) = (
            self.compression.filters.contains(&FilterName::Truncate),
            self.compression.mantissa_bits,
        ) {
            truncate_mantissa(chunk, self.dtype, bits);
        }
        let st = valid.and_then(|v| stats::chunk_stats(self.dtype, chunk, &self.chunkshape, v));
        if self.swap_needed() {
            swap_bytes(chunk, self.dtype.swap_unit());
        }
        blosc::compress_into(params, chunk, out)
            .map(|_| st)
            .map_err(|e| Error::Compress(e.0))
    }

    /// The fill element as stored chunks hold it (after the lossy filter), native order.
    fn stored_fill(&self) -> Vec<u8> {
        let mut f = self.fill.clone();
        if let (true, Some(bits)) = (
            self.compression.filters.contains(&FilterName::Truncate),
            self.compression.mantissa_bits,
        ) {
            truncate_mantissa(&mut f, self.dtype, bits);
        }
        f
    }
}

/// Hands out the indices `0..n` in order to the threads of a write, never more than
/// `window` ahead of the chunks already written.
struct InOrder {
    state: Mutex<InOrderState>,
    moved: Condvar,
}

struct InOrderState {
    next: usize,
    limit: usize,
    n: usize,
    stopped: bool,
}

impl InOrder {
    fn new(n: usize, window: usize) -> InOrder {
        InOrder {
            state: Mutex::new(InOrderState {
                next: 0,
                limit: window,
                n,
                stopped: false,
            }),
            moved: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InOrderState> {
        // The state stays consistent whatever panicked while holding it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next index to encode, waiting while the window is full; `None` when all are
    /// taken or the write stopped.
    fn claim(&self) -> Option<usize> {
        let mut st = self.lock();
        loop {
            if st.stopped || st.next >= st.n {
                return None;
            }
            if st.next < st.limit {
                st.next += 1;
                return Some(st.next - 1);
            }
            st = self.moved.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// The next index to encode if one may be taken now.
    fn try_claim(&self) -> Option<usize> {
        let mut st = self.lock();
        if st.stopped || st.next >= st.n || st.next >= st.limit {
            return None;
        }
        st.next += 1;
        Some(st.next - 1)
    }

    /// One more chunk was written: the window moves on by one.
    fn advance(&self) {
        self.lock().limit += 1;
        self.moved.notify_one();
    }

    fn stop(&self) {
        self.lock().stopped = true;
        self.moved.notify_all();
    }
}

/// Buffers reused across the chunks of one read or write, so that a long one does not
/// allocate and fault in fresh pages for every chunk.
struct Pool<T> {
    items: Mutex<Vec<T>>,
    /// Whether an item given back is kept (`None`: always): a pool that lives as long as the
    /// process keeps a few buffers of a moderate size, not every buffer it ever saw.
    keep: Option<fn(&T, usize) -> bool>,
}

type BufferPool = Pool<Vec<u8>>;

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool {
            items: Mutex::new(Vec::new()),
            keep: None,
        }
    }
}

/// The scratch buffers of reads (a chunk's stored bytes, and a whole decoded chunk for
/// chunks a selection covers in part), kept between reads: up to 16 pairs (one per thread
/// of the widest pool that reads: the I/O pool of an object store), of at most 64 MiB each.
/// One pool per process: a child forked while a thread of its parent took or gave back a
/// buffer would find the lock held for ever.
fn read_scratch() -> &'static Pool<(Vec<u8>, Vec<u8>)> {
    static READ_SCRATCH: PerProcess<Pool<(Vec<u8>, Vec<u8>)>> = PerProcess::new();
    READ_SCRATCH.get_or_init(|| Pool {
        items: Mutex::new(Vec::new()),
        keep: Some(|(a, b), held| held < 16 && a.capacity() + b.capacity() <= 64 << 20),
    })
}

impl<T: Default> Pool<T> {
    fn take(&self) -> T {
        self.items
            .lock()
            .ok()
            .and_then(|mut v| v.pop())
            .unwrap_or_default()
    }

    fn give(&self, item: T) {
        if let Ok(mut v) = self.items.lock() {
            if self.keep.is_none_or(|keep| keep(&item, v.len())) {
                v.push(item);
            }
        }
    }

    /// Takes an item that goes back to the pool when the lease is dropped.
    fn lease(&self) -> Lease<'_, T> {
        Lease {
            pool: self,
            item: self.take(),
        }
    }
}

/// An item taken from a [`Pool`], returned to it on drop.
struct Lease<'p, T: Default> {
    pool: &'p Pool<T>,
    item: T,
}

impl<T: Default> std::ops::Deref for Lease<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.item
    }
}

impl<T: Default> std::ops::DerefMut for Lease<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.item
    }
}

impl<T: Default> Drop for Lease<'_, T> {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.item));
    }
}

/// Fills `buf` with copies of `pattern` (`buf.len()` is a multiple of its length).
fn fill_with(buf: &mut [u8], pattern: &[u8]) {
    match pattern {
        [] => {}
        [first, rest @ ..] if rest.iter().all(|b| b == first) => buf.fill(*first),
        _ => {
            let n = pattern.len().min(buf.len());
            buf[..n].copy_from_slice(&pattern[..n]);
            let mut done = n;
            while done < buf.len() {
                let m = done.min(buf.len() - done);
                buf.copy_within(..m, done);
                done += m;
            }
        }
    }
}

/// When the whole of `part` lies in one piece of a source laid out in C order over
/// `counts`, the source element it starts at.
fn source_run(part: &ChunkPart, counts: &[u64]) -> Option<u64> {
    // Trailing axes that the part spans entirely, then at most one partial axis, then
    // axes where the part is one position thick.
    let mut p = counts.len() - 1;
    while p > 0 && part.axes[p].count == counts[p] {
        p -= 1;
    }
    if part.axes[..p].iter().any(|a| a.count != 1) {
        return None;
    }
    let st = strides(counts);
    Some(
        part.axes
            .iter()
            .zip(&st)
            .map(|(a, s)| a.out_start * s)
            .sum(),
    )
}

fn single_run_axes(part: &ChunkPart, n: u64) -> Vec<PartAxis> {
    let nd = part.axes.len();
    part.axes
        .iter()
        .enumerate()
        .map(|(i, a)| PartAxis {
            in_start: 0,
            step: 1,
            count: if i == nd - 1 { n } else { 1 },
            out_start: a.out_start,
        })
        .collect()
}

/// Zeroes the low mantissa bits of floats (native byte order), keeping `bits` significant
/// bits, rounding to nearest.
pub(crate) fn truncate_mantissa(buf: &mut [u8], dtype: DType, bits: u8) {
    match dtype {
        DType::F64 | DType::C128 => {
            let drop = 52 - u32::from(bits.min(52));
            if drop == 0 {
                return;
            }
            let mask = !((1u64 << drop) - 1);
            let half = 1u64 << (drop - 1);
            for c in buf.chunks_exact_mut(8) {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                let v = u64::from_ne_bytes(a);
                let exp = (v >> 52) & 0x7ff;
                let r = if exp == 0x7ff {
                    v
                } else {
                    v.wrapping_add(half) & mask
                };
                c.copy_from_slice(&r.to_ne_bytes());
            }
        }
        DType::F32 | DType::C64 => {
            let drop = 23 - u32::from(bits.min(23));
            if drop == 0 {
                return;
            }
            let mask = !((1u32 << drop) - 1);
            let half = 1u32 << (drop - 1);
            for c in buf.chunks_exact_mut(4) {
                let v = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                let exp = (v >> 23) & 0xff;
                let r = if exp == 0xff {
                    v
                } else {
                    v.wrapping_add(half) & mask
                };
                c.copy_from_slice(&r.to_ne_bytes());
            }
        }
        _ => {}
    }
}
