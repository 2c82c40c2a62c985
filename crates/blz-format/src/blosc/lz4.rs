//! Decoding of LZ4 (and LZ4HC) Blosc chunks with scratch memory kept per thread.
//!
//! c-blosc 1.x allocates and frees its scratch (about two blocks, 2 MiB at blz's defaults)
//! on every call. Where the C allocator hands such buffers straight back to the system (a
//! dask worker: its nannies set `MALLOC_TRIM_THRESHOLD_`, which also stops glibc from
//! raising its mmap threshold), each decode faulted in 2 MiB of fresh pages, a third of a
//! chunk's decoding time. This is the same loop as c-blosc's `blosc_d` over the chunk's
//! blocks, with the same LZ4 library and c-blosc's own unshuffle, but its scratch block
//! lives in a thread-local buffer reused from one chunk to the next. Every other codec and
//! filter, and anything this decoder does not recognise, goes to c-blosc. Item reads
//! (`getitem`) decode only the blocks they need, here too without c-blosc's three blocks of
//! scratch per call; a short read of a split, shuffled block gathers its items' bytes
//! straight from the streams instead of unshuffling the whole block, and takes them from a
//! well-compressed stream without decoding it (`lz4_seek`).

use std::cell::RefCell;
use std::ffi::{c_char, c_int};

use super::header::{ChunkHeader, FLAG_BITSHUFFLE, FLAG_MEMCPYED, FLAG_SHUFFLE, HEADER_LEN};
use super::lz4_seek;
use super::CodecError;

/// Codec format of LZ4 and LZ4HC chunks (the flags' top three bits).
const LZ4_FORMAT: u8 = 1;
/// The only LZ4 stream version c-blosc 1.x writes and reads.
const LZ4_VERSION_FORMAT: u8 = 1;
/// c-blosc's rule for splitting a block into one stream per byte of the type.
const MAX_SPLITS: usize = 16;
const MIN_BUFFERSIZE: usize = 128;
/// Header flag: the blocks were not split (set by writers newer than the split rule).
const FLAG_DONT_SPLIT: u8 = 0x10;
/// Blocks larger than this are left to c-blosc rather than kept as thread-local scratch.
const MAX_SCRATCH: usize = 16 << 20;

extern "C" {
    /// c-blosc 1.x's byte unshuffle (SSE2/AVX2 where compiled in), from the library that
    /// `blosc-src` builds and links: the function `blosc_d` calls for the same step.
    fn blosc_internal_unshuffle(
        bytesoftype: usize,
        blocksize: usize,
        src: *const u8,
        dest: *mut u8,
    );
}

thread_local! {
    /// Per thread: the shuffled bytes of one block, and one decoded block for item reads.
    static SCRATCH: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    /// Per thread: the sequence table of one stream and the work list of a walk through it
    /// (short reads, `lz4_seek`).
    static SEEK: RefCell<(Vec<lz4_seek::Seq>, Vec<lz4_seek::Work>)> =
        const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Whether this decoder takes the chunk: LZ4 with byte shuffle or no filter, blocks of
/// whole items and of at most [`MAX_SCRATCH`] bytes.
fn handles(header: &ChunkHeader) -> bool {
    let blocksize = header.blocksize as usize;
    header.codec_format() == LZ4_FORMAT
        && header.versionlz == LZ4_VERSION_FORMAT
        && header.flags & (FLAG_MEMCPYED | FLAG_BITSHUFFLE) == 0
        && blocksize <= MAX_SCRATCH
        // A split block of a size that is not a whole number of items would leave its last
        // bytes unwritten (c-blosc never writes one); leave such a chunk to c-blosc.
        && blocksize.is_multiple_of(usize::from(header.typesize.max(1)))
}

/// Decodes `chunk` (its header already validated against its length) into `dst`, exactly
/// `header.nbytes` long, when [`handles`] takes it. Returns `Ok(false)` when the chunk is of
/// another kind, for c-blosc to decode.
///
/// # Errors
/// A [`CodecError`] when the chunk's block table or streams are corrupt.
pub(super) fn decode(header: &ChunkHeader, chunk: &[u8], dst: *mut u8) -> Result<bool, CodecError> {
    if !handles(header) {
        return Ok(false);
    }
    let blocksize = header.blocksize as usize;
    SCRATCH.with(|scratch| {
        let (shuffled, _) = &mut *scratch.borrow_mut();
        for j in 0..header.nbytes.div_ceil(header.blocksize) as usize {
            // SAFETY: block j covers bytes j*blocksize .. j*blocksize + its size of the
            // caller's buffer, which holds `nbytes` bytes.
            let out = unsafe { dst.add(j * blocksize) };
            decode_block(header, chunk, j, out, shuffled)?;
        }
        Ok(())
    })?;
    Ok(true)
}

/// Decodes only the blocks that hold bytes `byte_start .. byte_start + dst.len()` of the
/// chunk (a range the caller checked lies inside it) and copies those bytes to `dst`, when
/// [`handles`] takes the chunk; `Ok(false)` otherwise.
///
/// # Errors
/// As [`decode`].
pub(super) fn getitem(
    header: &ChunkHeader,
    chunk: &[u8],
    byte_start: usize,
    dst: &mut [u8],
) -> Result<bool, CodecError> {
    if !handles(header) {
        return Ok(false);
    }
    let blocksize = header.blocksize as usize;
    let end = byte_start + dst.len();
    SCRATCH.with(|scratch| {
        let (shuffled, block) = &mut *scratch.borrow_mut();
        if block.len() < blocksize {
            block.resize(blocksize, 0);
        }
        for j in byte_start / blocksize..end.div_ceil(blocksize) {
            let first = j * blocksize;
            let (from, to) = (byte_start.max(first), end.min(first + blocksize));
            let out = &mut dst[from - byte_start..to - byte_start];
            if !read_split_items(header, chunk, j, from - first, out, shuffled)? {
                decode_block(header, chunk, j, block.as_mut_ptr(), shuffled)?;
                out.copy_from_slice(&block[from - first..to - first]);
            }
        }
        Ok(())
    })?;
    Ok(true)
}

fn corrupt(what: String) -> CodecError {
    CodecError(format!("corrupt LZ4 chunk: {what}"))
}

fn read_i32(chunk: &[u8], at: usize) -> Option<i32> {
    let b = chunk.get(at..at.checked_add(4)?)?;
    Some(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Where block `j` of a chunk [`handles`] takes lies and how it is stored.
struct Block {
    /// Uncompressed bytes: the chunk's block size, or what is left for the last block.
    bsize: usize,
    /// Streams the block is stored as (the typesize when split, else 1).
    nsplits: usize,
    /// Bytes each stream decodes to.
    neblock: usize,
    /// Whether the streams hold byte-shuffled data.
    shuffle: bool,
    /// Offset of the first stream's length in the chunk.
    at: usize,
}

impl Block {
    fn of(header: &ChunkHeader, chunk: &[u8], j: usize) -> Result<Block, CodecError> {
        let nbytes = header.nbytes as usize;
        let blocksize = header.blocksize as usize;
        let typesize = usize::from(header.typesize);
        let leftover = nbytes % blocksize;
        let last_partial = j == nbytes.div_ceil(blocksize) - 1 && leftover > 0;
        let bsize = if last_partial { leftover } else { blocksize };
        let nsplits = if header.flags & FLAG_DONT_SPLIT == 0
            && typesize <= MAX_SPLITS
            && blocksize / typesize >= MIN_BUFFERSIZE
            && !last_partial
        {
            typesize
        } else {
            1
        };
        let start = read_i32(chunk, HEADER_LEN + 4 * j)
            .ok_or_else(|| corrupt(format!("block table cut short at block {j}")))?;
        let at =
            usize::try_from(start).map_err(|_| corrupt(format!("block {j} starts at {start}")))?;
        Ok(Block {
            bsize,
            nsplits,
            neblock: bsize / nsplits,
            shuffle: header.flags & FLAG_SHUFFLE != 0 && typesize > 1,
            at,
        })
    }

    /// The compressed bytes of the stream whose length prefix is at `*at` (stream `s` of
    /// block `j`), moving `*at` past them.
    fn stream<'c>(
        chunk: &'c [u8],
        at: &mut usize,
        j: usize,
        s: usize,
    ) -> Result<&'c [u8], CodecError> {
        let cbytes = read_i32(chunk, *at)
            .ok_or_else(|| corrupt(format!("block {j} stream {s} past the chunk's end")))?;
        *at += 4;
        let cbytes = usize::try_from(cbytes)
            .ok()
            .filter(|&c| c <= chunk.len() - *at)
            .ok_or_else(|| corrupt(format!("block {j} stream {s}: {cbytes} bytes")))?;
        let src = &chunk[*at..*at + cbytes];
        *at += cbytes;
        Ok(src)
    }
}

/// Decodes block `j` (of a chunk [`handles`] takes) to `out`, which has room for the
/// block's size (the chunk's block size, or what is left for the last block). The block's
/// shuffled bytes pass through `shuffled`.
fn decode_block(
    header: &ChunkHeader,
    chunk: &[u8],
    j: usize,
    out: *mut u8,
    shuffled: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let typesize = usize::from(header.typesize);
    let Block {
        bsize,
        nsplits,
        neblock,
        shuffle,
        mut at,
    } = Block::of(header, chunk, j)?;
    if shuffle && shuffled.len() < header.blocksize as usize {
        shuffled.resize(header.blocksize as usize, 0);
    }
    let target: *mut u8 = if shuffle { shuffled.as_mut_ptr() } else { out };
    // Eight byte-shuffled streams (8-byte items) are unshuffled straight from where each
    // lies: a stream stored raw (noise bytes, most of a float64's mantissa) is read in
    // place in the chunk instead of first being copied next to the others.
    let gather = shuffle && nsplits == 8 && typesize == 8 && cfg!(target_arch = "x86_64");
    let mut planes = [std::ptr::null::<u8>(); 8];
    for s in 0..nsplits {
        let src = Block::stream(chunk, &mut at, j, s)?;
        let cbytes = src.len();
        // SAFETY: the split's output, target + s*neblock .. + neblock, lies inside the block
        // (nsplits * neblock <= bsize), itself inside `out` or `shuffled` (at least
        // blocksize bytes).
        let to = unsafe { target.add(s * neblock) };
        if let (true, Some(plane)) = (gather, planes.get_mut(s)) {
            *plane = if cbytes == neblock { src.as_ptr() } else { to };
        }
        if cbytes == neblock && gather {
            // Read in place by the unshuffle below.
        } else if cbytes == neblock {
            // SAFETY: `src` has neblock bytes; `to` has room for them (above); neither
            // `out` nor `shuffled` overlaps the chunk.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), to, neblock) };
        } else {
            // SAFETY: `to` has room for neblock bytes (above).
            unsafe { decode_stream(src, to, neblock, j, s)? };
        }
    }
    if gather {
        // SAFETY: each of the 8 planes holds `neblock` readable bytes (a raw stream in the
        // chunk, or a decoded one in `shuffled`); `out` has room for bsize = 8 * neblock.
        unsafe { unshuffle8_planes(&planes, neblock, out) };
    } else if shuffle {
        // SAFETY: `shuffled` holds the block's bsize shuffled bytes; `out` has room for bsize
        // bytes; c-blosc's unshuffle reads and writes exactly bsize bytes.
        unsafe { blosc_internal_unshuffle(typesize, bsize, shuffled.as_ptr(), out) };
    }
    Ok(())
}

/// Decodes LZ4 stream `s` of block `j` (its compressed bytes `src`) to `neblock` bytes at
/// `to`; a stream that does not decode to exactly that many bytes is corrupt.
///
/// # Safety
/// `to` must have room for `neblock` bytes and not overlap `src`.
unsafe fn decode_stream(
    src: &[u8],
    to: *mut u8,
    neblock: usize,
    j: usize,
    s: usize,
) -> Result<(), CodecError> {
    // SAFETY: LZ4_decompress_safe reads at most `src.len()` bytes of `src` and writes at
    // most `neblock` bytes to `to`, which the caller gives room for.
    let n = unsafe {
        lz4_sys::LZ4_decompress_safe(
            src.as_ptr().cast::<c_char>(),
            to.cast::<c_char>(),
            src.len() as c_int,
            neblock as c_int,
        )
    };
    if n < 0 || n as usize != neblock {
        return Err(corrupt(format!(
            "block {j} stream {s} decodes to {n} bytes, not {neblock}"
        )));
    }
    Ok(())
}

/// Interleaves eight planes of `n` bytes into `n` items of 8 bytes: byte `s` of item `i`
/// is `planes[s][i]` (Blosc's byte unshuffle for typesize 8, with each plane anywhere).
/// 16 items at a time with SSE2 (three rounds of unpacks: bytes, 2-byte words, 4-byte
/// words), the rest one by one.
///
/// # Safety
/// Every plane must hold `n` readable bytes; `out` must have room for `8 * n` bytes and
/// overlap no plane.
unsafe fn unshuffle8_planes(planes: &[*const u8; 8], n: usize, out: *mut u8) {
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_unpackhi_epi16, _mm_unpackhi_epi32,
            _mm_unpackhi_epi8, _mm_unpacklo_epi16, _mm_unpacklo_epi32, _mm_unpacklo_epi8,
        };
        while i + 16 <= n {
            // SAFETY: i + 16 <= n, so every load reads inside its plane and every store
            // writes inside out[8i .. 8i + 128], within 8n bytes; SSE2 is part of x86_64.
            unsafe {
                let x: [__m128i; 8] =
                    std::array::from_fn(|s| _mm_loadu_si128(planes[s].add(i).cast::<__m128i>()));
                // Vector k < 4 interleaves the low halves of v[2k] and v[2k+1], vector
                // k + 4 their high halves.
                macro_rules! round {
                    ($v:expr, $lo:ident, $hi:ident) => {
                        std::array::from_fn::<__m128i, 8, _>(|k| {
                            let (a, b) = ($v[2 * (k % 4)], $v[2 * (k % 4) + 1]);
                            if k < 4 {
                                $lo(a, b)
                            } else {
                                $hi(a, b)
                            }
                        })
                    };
                }
                // Bytes of planes 2k and 2k+1 side by side; then 2-byte pairs of those (4
                // bytes of each item together); then 4-byte halves: whole items, two per
                // vector.
                let b = round!(x, _mm_unpacklo_epi8, _mm_unpackhi_epi8);
                let w = round!(b, _mm_unpacklo_epi16, _mm_unpackhi_epi16);
                let d = round!(w, _mm_unpacklo_epi32, _mm_unpackhi_epi32);
                let at = out.add(8 * i).cast::<__m128i>();
                for (slot, v) in [0, 4, 2, 6, 1, 5, 3, 7].into_iter().enumerate() {
                    _mm_storeu_si128(at.add(slot), d[v]);
                }
            }
            i += 16;
        }
    }
    for i in i..n {
        for (s, p) in planes.iter().enumerate() {
            // SAFETY: i < n, so the read lies in the plane and the write in `out`.
            unsafe { *out.add(8 * i + s) = *p.add(i) };
        }
    }
}

/// Reads of at most this many bytes of a block gather the items' bytes one by one from the
/// decoded streams; longer reads unshuffle the whole block with c-blosc's SIMD code.
const SHORT_READ: usize = 16 * 1024;

/// A short read walks a stream's matches back (`lz4_seek`) instead of decoding the stream
/// when the stream is at most 1/SEEK_RATIO of its decoded size.
const SEEK_RATIO: usize = 4;

/// Copies bytes `lo .. lo + out.len()` of block `j` to `out` when the block is split into
/// one byte-shuffled stream per byte of the type (c-blosc's layout for LZ4 with shuffle)
/// and the read is short: stream `s` holds byte `s` of every item, so the bytes read are
/// gathered straight from the streams' items, with no unshuffle of the whole block. A
/// stream stored raw is read in place; a compressed one is parsed, and only the items read
/// are fetched from it by following its matches back (`lz4_seek`: no stream is decoded
/// whole, which for compressible data in 1 MiB blocks was most of a short read's time).
/// Of a walked stream, the sequences up to the last item read are checked as LZ4's decoder
/// checks them, the rest is not looked at (as c-blosc's `blosc_getitem` does not look at
/// the blocks it does not need; blz reads a chunk this way once its digest was checked,
/// `SuperchunkReader::getitem_into`). A stream that compresses less than [`SEEK_RATIO`]:1,
/// or whose matches chain back too far for a walk, is decoded whole. `Ok(false)` otherwise,
/// for the caller to decode and unshuffle the whole block.
fn read_split_items(
    header: &ChunkHeader,
    chunk: &[u8],
    j: usize,
    lo: usize,
    out: &mut [u8],
    shuffled: &mut Vec<u8>,
) -> Result<bool, CodecError> {
    let typesize = usize::from(header.typesize);
    if out.len() > SHORT_READ {
        return Ok(false);
    }
    let b = Block::of(header, chunk, j)?;
    if !b.shuffle || b.nsplits != typesize {
        return Ok(false);
    }
    let hi = lo + out.len();
    // Stream positions (items) needed: from the item holding the first byte read up to the
    // one holding the last.
    let (first, need) = (lo / typesize, hi.div_ceil(typesize));
    if need > b.neblock {
        return Err(corrupt(format!("block {j} read past its end")));
    }
    if shuffled.len() < header.blocksize as usize {
        shuffled.resize(header.blocksize as usize, 0);
    }
    let budget = lz4_seek::step_budget(need - first, b.neblock);
    // The parses below follow each stream from its start, one dependent load after
    // another, which leaves the memory system one cache line at a time to fetch (a random
    // read finds the chunk's bytes out of the CPU's caches): first ask for all the lines
    // the parses will read, of all the streams at once.
    let mut at = b.at;
    for s in 0..typesize {
        let src = Block::stream(chunk, &mut at, j, s)?;
        if src.len() != b.neblock && src.len() * SEEK_RATIO <= b.neblock {
            // The parse of a stream stops near its share `need / neblock` of it.
            let upto = (src.len() as u64 * need as u64 / b.neblock as u64) as usize;
            prefetch(&src[..(upto + 512).min(src.len())]);
        }
    }
    SEEK.with(|seek| -> Result<(), CodecError> {
        let (seqs, work) = &mut *seek.borrow_mut();
        let mut at = b.at;
        for s in 0..typesize {
            let src = Block::stream(chunk, &mut at, j, s)?;
            let plane = &mut shuffled[s * b.neblock..(s + 1) * b.neblock];
            if src.len() == b.neblock {
                plane[first..need].copy_from_slice(&src[first..need]);
                continue;
            }
            // A walk costs in proportion to the stream's sequences, a decode to its output:
            // only a stream that compresses well is walked.
            if src.len() * SEEK_RATIO <= b.neblock {
                lz4_seek::parse(src, b.neblock, need - 1, seqs)
                    .map_err(|e| corrupt(format!("block {j} stream {s}: {}", e.0)))?;
                if lz4_seek::read(src, seqs, first, &mut plane[first..need], budget, work) {
                    continue;
                }
            }
            // SAFETY: `plane` holds neblock bytes.
            unsafe { decode_stream(src, plane.as_mut_ptr(), b.neblock, j, s)? };
        }
        Ok(())
    })?;
    for (k, o) in out.iter_mut().enumerate() {
        let byte = lo + k;
        *o = shuffled[(byte % typesize) * b.neblock + byte / typesize];
    }
    Ok(true)
}

/// Asks the CPU to bring the cache lines of `bytes` in, without waiting for them.
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        // SAFETY: a prefetch is a hint: it reads nothing and cannot fault; the address is
        // inside `bytes` anyway. SSE is part of x86_64.
        #[allow(unused_unsafe)]
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast::<i8>(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}
