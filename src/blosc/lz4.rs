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
//! scratch per call.

use std::cell::RefCell;
use std::ffi::{c_char, c_int};

use super::header::{ChunkHeader, FLAG_BITSHUFFLE, FLAG_MEMCPYED, FLAG_SHUFFLE, HEADER_LEN};
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
            decode_block(header, chunk, j, block.as_mut_ptr(), shuffled)?;
            let (from, to) = (byte_start.max(first), end.min(first + blocksize));
            dst[from - byte_start..to - byte_start]
                .copy_from_slice(&block[from - first..to - first]);
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
    let nbytes = header.nbytes as usize;
    let blocksize = header.blocksize as usize;
    let typesize = usize::from(header.typesize);
    let nblocks = nbytes.div_ceil(blocksize);
    let leftover = nbytes % blocksize;
    let shuffle = header.flags & FLAG_SHUFFLE != 0 && typesize > 1;
    let dont_split = header.flags & FLAG_DONT_SPLIT != 0;
    if shuffle && shuffled.len() < blocksize {
        shuffled.resize(blocksize, 0);
    }
    let last_partial = j == nblocks - 1 && leftover > 0;
    let bsize = if last_partial { leftover } else { blocksize };
    let nsplits = if !dont_split
        && typesize <= MAX_SPLITS
        && blocksize / typesize >= MIN_BUFFERSIZE
        && !last_partial
    {
        typesize
    } else {
        1
    };
    let neblock = bsize / nsplits;
    let start = read_i32(chunk, HEADER_LEN + 4 * j)
        .ok_or_else(|| corrupt(format!("block table cut short at block {j}")))?;
    let mut at =
        usize::try_from(start).map_err(|_| corrupt(format!("block {j} starts at {start}")))?;
    let target: *mut u8 = if shuffle { shuffled.as_mut_ptr() } else { out };
    for s in 0..nsplits {
        let cbytes = read_i32(chunk, at)
            .ok_or_else(|| corrupt(format!("block {j} stream {s} past the chunk's end")))?;
        at += 4;
        let cbytes = usize::try_from(cbytes)
            .ok()
            .filter(|&c| c <= chunk.len() - at)
            .ok_or_else(|| corrupt(format!("block {j} stream {s}: {cbytes} bytes")))?;
        let src = &chunk[at..at + cbytes];
        // SAFETY: the split's output, target + s*neblock .. + neblock, lies inside the block
        // (nsplits * neblock <= bsize), itself inside `out` or `shuffled` (at least
        // blocksize bytes).
        let to = unsafe { target.add(s * neblock) };
        if cbytes == neblock {
            // SAFETY: `src` has neblock bytes; `to` has room for them (above); neither
            // `out` nor `shuffled` overlaps the chunk.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), to, neblock) };
        } else {
            // SAFETY: LZ4_decompress_safe reads at most `cbytes` bytes of `src` and writes
            // at most `neblock` bytes to `to`, which has room for them.
            let n = unsafe {
                lz4_sys::LZ4_decompress_safe(
                    src.as_ptr().cast::<c_char>(),
                    to.cast::<c_char>(),
                    cbytes as c_int,
                    neblock as c_int,
                )
            };
            if n < 0 || n as usize != neblock {
                return Err(corrupt(format!(
                    "block {j} stream {s} decodes to {n} bytes, not {neblock}"
                )));
            }
        }
        at += cbytes;
    }
    if shuffle {
        // SAFETY: `shuffled` holds the block's bsize shuffled bytes; `out` has room for bsize
        // bytes; c-blosc's unshuffle reads and writes exactly bsize bytes.
        unsafe { blosc_internal_unshuffle(typesize, bsize, shuffled.as_ptr(), out) };
    }
    Ok(())
}
