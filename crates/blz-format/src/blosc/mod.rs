//! Blosc 1.x chunks: compression and decompression through c-blosc 1.21 (vendored by
//! `blosc-src`), using the context API only (no global state, a thread count per call), and
//! validation of the 16-byte chunk header before any buffer is sized from it.
//!
//! Nothing here knows about files: callers wrap a [`CodecError`] with the file and chunk it
//! came from.

pub(crate) mod blocks;
mod header;
mod lz4;
mod lz4_seek;

pub(crate) use blocks::BlockFault;
pub use blocks::{
    compress_index, decode_index, encode_index, encoded_len, BlockIndex, ChunkBlocks,
};
pub use header::{ChunkHeader, FLAG_BITSHUFFLE, FLAG_MEMCPYED, FLAG_SHUFFLE, HEADER_LEN};

use std::ffi::c_void;
use std::fmt;
use std::str::FromStr;

/// Largest uncompressed chunk c-blosc 1.x accepts.
pub const MAX_BUFFERSIZE: usize = blosc_src::BLOSC_MAX_BUFFERSIZE as usize;
/// Bytes c-blosc may add to a chunk beyond its uncompressed size (the header).
pub const MAX_OVERHEAD: usize = blosc_src::BLOSC_MAX_OVERHEAD as usize;

/// Why a chunk could not be compressed or decompressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CodecError(pub String);

/// The compressors c-blosc 1.x offers (all compiled in by blz).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    /// Blosc's own LZ77 codec: fast, modest ratios.
    Blosclz,
    /// LZ4: very fast; the default.
    Lz4,
    /// LZ4 high-compression: slower to write, same read speed as LZ4.
    Lz4hc,
    /// zlib (deflate).
    Zlib,
    /// Zstandard. c-blosc maps clevel `c` to zstd level `2c - 1`, so clevel 5 is zstd 9.
    Zstd,
}

impl Codec {
    /// Every codec.
    pub const ALL: [Codec; 5] = [
        Codec::Blosclz,
        Codec::Lz4,
        Codec::Lz4hc,
        Codec::Zlib,
        Codec::Zstd,
    ];

    /// The name c-blosc uses for the codec.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Blosclz => "blosclz",
            Codec::Lz4 => "lz4",
            Codec::Lz4hc => "lz4hc",
            Codec::Zlib => "zlib",
            Codec::Zstd => "zstd",
        }
    }

    fn c_name(self) -> &'static [u8] {
        match self {
            Codec::Blosclz => b"blosclz\0",
            Codec::Lz4 => b"lz4\0",
            Codec::Lz4hc => b"lz4hc\0",
            Codec::Zlib => b"zlib\0",
            Codec::Zstd => b"zstd\0",
        }
    }

    /// The codec named by the "compressor format" bits of a chunk header (lz4 and lz4hc share
    /// a format, reported as lz4).
    pub fn from_format(format: u8) -> Option<Codec> {
        match format {
            0 => Some(Codec::Blosclz),
            1 => Some(Codec::Lz4),
            3 => Some(Codec::Zlib),
            4 => Some(Codec::Zstd),
            _ => None,
        }
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Codec {
    type Err = CodecError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Codec::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                CodecError(format!(
                    "unknown codec {s:?} (expected blosclz, lz4, lz4hc, zlib or zstd)"
                ))
            })
    }
}

/// The byte-reordering filter Blosc applies before compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Filter {
    /// No reordering.
    #[serde(rename = "noshuffle")]
    NoShuffle,
    /// Byte shuffle: groups the i-th byte of every element together.
    Shuffle,
    /// Bit shuffle: groups the i-th bit of every element together.
    Bitshuffle,
}

impl Filter {
    /// Every filter.
    pub const ALL: [Filter; 3] = [Filter::NoShuffle, Filter::Shuffle, Filter::Bitshuffle];

    /// The name used in metadata and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Filter::NoShuffle => "noshuffle",
            Filter::Shuffle => "shuffle",
            Filter::Bitshuffle => "bitshuffle",
        }
    }

    fn c_code(self) -> i32 {
        match self {
            Filter::NoShuffle => blosc_src::BLOSC_NOSHUFFLE as i32,
            Filter::Shuffle => blosc_src::BLOSC_SHUFFLE as i32,
            Filter::Bitshuffle => blosc_src::BLOSC_BITSHUFFLE as i32,
        }
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Filter {
    type Err = CodecError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "noshuffle" | "none" => Ok(Filter::NoShuffle),
            "shuffle" | "byteshuffle" => Ok(Filter::Shuffle),
            "bitshuffle" => Ok(Filter::Bitshuffle),
            _ => Err(CodecError(format!(
                "unknown filter {s:?} (expected noshuffle, shuffle or bitshuffle)"
            ))),
        }
    }
}

/// How to compress a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompressParams {
    /// The compressor.
    pub codec: Codec,
    /// Compression level 0 (store only) to 9.
    pub clevel: u8,
    /// The shuffle filter.
    pub filter: Filter,
    /// Element size in bytes (1-255); the shuffle filters work on elements of this size.
    pub typesize: usize,
    /// Block size asked of c-blosc, in bytes; 0 lets blz choose (see [`compress_into`]).
    pub blocksize: usize,
    /// Threads c-blosc uses inside this one chunk.
    pub nthreads: usize,
}

impl Default for CompressParams {
    fn default() -> Self {
        CompressParams {
            codec: Codec::Lz4,
            clevel: 5,
            filter: Filter::Shuffle,
            typesize: 8,
            blocksize: 0,
            nthreads: 1,
        }
    }
}

impl CompressParams {
    /// Checks the parameters c-blosc would otherwise silently adjust or refuse.
    ///
    /// # Errors
    /// A [`CodecError`] naming the bad parameter.
    pub fn validate(&self) -> Result<(), CodecError> {
        if self.clevel > 9 {
            return Err(CodecError(format!(
                "clevel {} out of range 0-9",
                self.clevel
            )));
        }
        if !(1..=255).contains(&self.typesize) {
            return Err(CodecError(format!(
                "typesize {} out of range 1-255",
                self.typesize
            )));
        }
        if self.blocksize > blosc_src::BLOSC_MAX_BLOCKSIZE as usize {
            return Err(CodecError(format!(
                "blocksize {} too large",
                self.blocksize
            )));
        }
        Ok(())
    }
}

/// The c-blosc version compiled into blz.
pub fn c_blosc_version() -> &'static str {
    "1.21.6"
}

/// Compresses `src` into a new Blosc chunk.
///
/// # Errors
/// A [`CodecError`] when the parameters are invalid or `src` is larger than
/// [`MAX_BUFFERSIZE`].
pub fn compress(params: &CompressParams, src: &[u8]) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    compress_into(params, src, &mut out)?;
    Ok(out)
}

/// Uncompressed bytes per block that blz asks for in chunks of poorly compressible data.
pub(crate) const SMALL_BLOCK: usize = 128 * 1024;
/// Leading bytes of a chunk compressed on their own to judge how compressible it is.
const PROBE_BYTES: usize = 32 * 1024;
/// Below this compression ratio of the probe, a chunk gets [`SMALL_BLOCK`] blocks.
const NOISY_RATIO: usize = 16; // tenths: 1.6:1

thread_local! {
    /// Per thread: the compressed probe of [`auto_blocksize`].
    static PROBE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether c-blosc stores the blocks of a chunk as one stream per byte of the element (its
/// default split mode): every codec but zstd, for elements of at most 16 bytes.
fn splits(codec: Codec, typesize: usize) -> bool {
    codec != Codec::Zstd && typesize <= 16
}

/// The block size c-blosc 1.x chooses for `nbytes` bytes when none is forced
/// (`compute_blocksize` in its blosc.c): 32 KiB (64 KiB for the codecs it counts as
/// high-compression) scaled by the level, then, where blocks split into streams, at most
/// 256 KiB times the element size, kept within 64 KiB..1 MiB; never more than `nbytes`, and
/// a whole number of elements.
fn c_blosc_blocksize(codec: Codec, clevel: u8, typesize: usize, nbytes: usize) -> usize {
    const L1: usize = 32 * 1024;
    if nbytes < typesize {
        return 1;
    }
    let mut bs = nbytes;
    if nbytes >= L1 {
        let hcr = matches!(codec, Codec::Lz4hc | Codec::Zlib | Codec::Zstd);
        bs = if hcr { 2 * L1 } else { L1 };
        bs = match clevel {
            0 => bs / 4,
            1 => bs / 2,
            2 => bs,
            3 => bs * 2,
            4 | 5 => bs * 4,
            6..=8 => bs * 8,
            _ => bs * if hcr { 16 } else { 8 },
        };
    }
    if clevel > 0 && splits(codec, typesize) && bs / typesize >= 128 {
        bs = (bs.min(1 << 18) * typesize).clamp(1 << 16, 1 << 20);
    }
    bs = bs.min(nbytes);
    if bs > typesize {
        bs = bs / typesize * typesize;
    }
    bs
}

/// The block size to ask c-blosc for when the caller left it to blz (`params.blocksize` 0).
///
/// c-blosc 1.x gives LZ4 and BloscLZ chunks blocks of up to 1 MiB (at clevel 5, 128 KiB
/// times the element size, at most 1 MiB). A read of a few elements decodes a whole block, so
/// such blocks make small reads slow; they pay off only where the codec finds matches far
/// apart, in compressible data (an arithmetic progression loses half its ratio in 128 KiB
/// blocks). So blz compresses the chunk's first 32 KiB on their own first: if they shrink
/// less than 1.6:1 the data is mostly noise (float measurements, random walks, hashes),
/// larger blocks gain under about 2% of ratio, and the chunk gets blocks of 128 KiB;
/// otherwise c-blosc chooses. The probe costs one compression of 32 KiB per chunk. Where
/// c-blosc would choose blocks of 128 KiB or less, for other codecs (their users chose ratio
/// over speed) and at clevel 0, c-blosc chooses with no probe. The choice depends on the
/// chunk's bytes alone, so chunks stay reproducible.
fn auto_blocksize(params: &CompressParams, src: &[u8]) -> Result<usize, CodecError> {
    if params.blocksize != 0
        || params.clevel == 0
        || !matches!(params.codec, Codec::Lz4 | Codec::Blosclz)
        || c_blosc_blocksize(params.codec, params.clevel, params.typesize, src.len()) <= SMALL_BLOCK
    {
        return Ok(params.blocksize);
    }
    let probe = &src[..PROBE_BYTES / params.typesize * params.typesize];
    if probe.is_empty() {
        return Ok(0);
    }
    let clen = PROBE.with(|p| {
        let mut p = p.borrow_mut();
        let one = CompressParams {
            blocksize: probe.len(),
            nthreads: 1,
            ..*params
        };
        raw_compress(&one, probe, &mut p)
    })?;
    if probe.len() * 10 >= clen * NOISY_RATIO {
        return Ok(0);
    }
    // When it splits blocks into streams, c-blosc multiplies a forced block size by the
    // element size (`compute_blocksize` in blosc.c).
    Ok(if splits(params.codec, params.typesize) {
        SMALL_BLOCK / params.typesize
    } else {
        SMALL_BLOCK
    })
}

/// Compresses `src` into `dst` (cleared first; its allocation is reused). Returns the chunk
/// length.
///
/// With `params.blocksize` 0 blz chooses the block size: blocks of [`SMALL_BLOCK`] bytes
/// for LZ4 and BloscLZ chunks whose data compresses poorly, c-blosc's choice otherwise (see
/// `spec/blosc.md`). Any other value is handed to c-blosc as its forced block size.
///
/// # Errors
/// As [`compress`].
pub fn compress_into(
    params: &CompressParams,
    src: &[u8],
    dst: &mut Vec<u8>,
) -> Result<usize, CodecError> {
    params.validate()?;
    if src.len() > MAX_BUFFERSIZE {
        return Err(CodecError(format!(
            "chunk of {} bytes exceeds Blosc's limit of {MAX_BUFFERSIZE}",
            src.len()
        )));
    }
    let blocksize = auto_blocksize(params, src)?;
    raw_compress(
        &CompressParams {
            blocksize,
            ..*params
        },
        src,
        dst,
    )
}

/// [`compress_into`] with `params.blocksize` passed to c-blosc as it is (0: c-blosc chooses).
fn raw_compress(
    params: &CompressParams,
    src: &[u8],
    dst: &mut Vec<u8>,
) -> Result<usize, CodecError> {
    let cap = src.len() + MAX_OVERHEAD;
    dst.clear();
    dst.reserve(cap);
    // SAFETY: `dst` has capacity for `cap` bytes and c-blosc writes at most `destsize` bytes
    // (it returns 0 when the output would not fit, which cannot happen with this capacity);
    // `src` is a valid slice of `src.len()` bytes; the codec name is NUL-terminated. We set
    // the length only to the number of bytes c-blosc reports as written.
    let n = unsafe {
        blosc_src::blosc_compress_ctx(
            i32::from(params.clevel),
            params.filter.c_code(),
            params.typesize,
            src.len(),
            src.as_ptr().cast::<c_void>(),
            dst.as_mut_ptr().cast::<c_void>(),
            cap,
            params.codec.c_name().as_ptr().cast(),
            params.blocksize,
            params.nthreads.clamp(1, 256) as i32,
        )
    };
    if n <= 0 {
        return Err(CodecError(format!(
            "c-blosc refused to compress {} bytes with {:?} (code {n})",
            src.len(),
            params
        )));
    }
    let n = n as usize;
    // SAFETY: c-blosc initialised the first `n <= cap` bytes.
    unsafe { dst.set_len(n) };
    Ok(n)
}

/// Checks that `chunk` is a well-formed Blosc 1.x chunk exactly `chunk.len()` bytes long and
/// returns its header. Run before trusting any size in the header.
///
/// # Errors
/// A [`CodecError`] describing the first inconsistency found.
pub fn validate(chunk: &[u8]) -> Result<ChunkHeader, CodecError> {
    let header = ChunkHeader::parse(chunk)?;
    header.check_against(chunk.len())?;
    let mut nbytes = 0usize;
    // SAFETY: `chunk` is at least HEADER_LEN bytes (checked by parse) and c-blosc only reads
    // the header; `nbytes` is a valid out-pointer.
    let rc = unsafe {
        blosc_src::blosc_cbuffer_validate(chunk.as_ptr().cast::<c_void>(), chunk.len(), &mut nbytes)
    };
    if rc != 0 || nbytes != header.nbytes as usize {
        return Err(CodecError("c-blosc rejects the chunk header".into()));
    }
    Ok(header)
}

/// Decompresses a chunk into `dst`, which must be exactly the chunk's uncompressed size.
///
/// # Errors
/// A [`CodecError`] when the chunk is malformed, `dst` has the wrong size or the compressed
/// stream is corrupt.
pub fn decompress_into(chunk: &[u8], dst: &mut [u8], nthreads: usize) -> Result<(), CodecError> {
    let header = validate(chunk)?;
    if dst.len() != header.nbytes as usize {
        return Err(CodecError(format!(
            "chunk holds {} bytes, destination has room for {}",
            header.nbytes,
            dst.len()
        )));
    }
    if header.nbytes == 0 || (nthreads <= 1 && lz4::decode(&header, chunk, dst.as_mut_ptr())?) {
        return Ok(());
    }
    // SAFETY: the header was validated against the buffer (cbytes equals the buffer length,
    // so c-blosc's own bounds checks are against real memory); `dst` is writable for exactly
    // `nbytes` bytes and c-blosc writes at most `destsize`.
    let n = unsafe {
        blosc_src::blosc_decompress_ctx(
            chunk.as_ptr().cast::<c_void>(),
            dst.as_mut_ptr().cast::<c_void>(),
            dst.len(),
            nthreads.clamp(1, 256) as i32,
        )
    };
    if n < 0 || n as usize != dst.len() {
        return Err(CodecError(format!(
            "c-blosc failed to decompress the chunk (code {n})"
        )));
    }
    Ok(())
}

/// Decompresses a chunk into a new buffer.
///
/// # Errors
/// As [`decompress_into`].
pub fn decompress(chunk: &[u8], nthreads: usize) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    decompress_to_vec(chunk, &mut out, nthreads)?;
    Ok(out)
}

/// Decompresses a chunk into `out`, replacing its contents (its allocation is reused). Unlike
/// resizing a buffer and calling [`decompress_into`], nothing is zero-filled first: c-blosc
/// writes every byte.
///
/// # Errors
/// As [`decompress_into`]; `out` is left empty on error.
pub fn decompress_to_vec(
    chunk: &[u8],
    out: &mut Vec<u8>,
    nthreads: usize,
) -> Result<(), CodecError> {
    let header = validate(chunk)?;
    let nbytes = header.nbytes as usize;
    out.clear();
    if nbytes == 0 {
        return Ok(());
    }
    out.reserve(nbytes);
    if nthreads <= 1 && lz4::decode(&header, chunk, out.as_mut_ptr())? {
        // SAFETY: the decoder wrote every one of the `nbytes <= capacity` bytes.
        unsafe { out.set_len(nbytes) };
        return Ok(());
    }
    // SAFETY: the header was validated against the buffer (see `decompress_into`); `out` has
    // capacity for `nbytes` bytes and c-blosc writes at most `destsize = nbytes` bytes through
    // the raw pointer (no reference to uninitialised memory is formed). The length is set only
    // once c-blosc reports having written all `nbytes` bytes.
    let n = unsafe {
        blosc_src::blosc_decompress_ctx(
            chunk.as_ptr().cast::<c_void>(),
            out.as_mut_ptr().cast::<c_void>(),
            nbytes,
            nthreads.clamp(1, 256) as i32,
        )
    };
    if n < 0 || n as usize != nbytes {
        return Err(CodecError(format!(
            "c-blosc failed to decompress the chunk (code {n})"
        )));
    }
    // SAFETY: c-blosc initialised exactly `nbytes <= capacity` bytes.
    unsafe { out.set_len(nbytes) };
    Ok(())
}

/// Decompresses only the bytes `byte_start..byte_start + dst.len()` of a chunk (c-blosc
/// decodes just the blocks that hold them). Both ends must fall on the chunk's Blosc items
/// (its typesize, which can be smaller than an element: 8 for complex128, 1 for `S<n>`).
///
/// # Errors
/// A [`CodecError`] when the chunk is malformed, the range is outside it or does not fall on
/// whole items.
pub fn getitem(chunk: &[u8], byte_start: usize, dst: &mut [u8]) -> Result<(), CodecError> {
    let header = validate(chunk)?;
    let ts = header.typesize.max(1) as usize;
    if !dst.len().is_multiple_of(ts) || !byte_start.is_multiple_of(ts) {
        return Err(CodecError(format!(
            "bytes {byte_start}..{} do not fall on the chunk's {ts}-byte items",
            byte_start.saturating_add(dst.len())
        )));
    }
    let start = byte_start / ts;
    let nitems = dst.len() / ts;
    let end = start
        .checked_add(nitems)
        .and_then(|e| e.checked_mul(ts))
        .ok_or_else(|| CodecError("item range overflows".into()))?;
    if end > header.nbytes as usize {
        return Err(CodecError(format!(
            "items {start}..{} are outside the chunk of {} bytes",
            start + nitems,
            header.nbytes
        )));
    }
    if nitems == 0 || lz4::getitem(&header, chunk, byte_start, dst)? {
        return Ok(());
    }
    // SAFETY: the header was validated against the buffer; the item range lies within the
    // uncompressed size; `dst` has room for exactly `nitems * typesize` bytes.
    let n = unsafe {
        blosc_src::blosc_getitem(
            chunk.as_ptr().cast::<c_void>(),
            start as i32,
            nitems as i32,
            dst.as_mut_ptr().cast::<c_void>(),
        )
    };
    if n < 0 || n as usize != dst.len() {
        return Err(CodecError(format!(
            "c-blosc failed to extract items (code {n})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize) -> Vec<u8> {
        (0..n as u64)
            .flat_map(|i| ((i as f64) * 0.25).to_le_bytes())
            .collect()
    }

    #[test]
    fn roundtrip_every_codec_and_filter() {
        let src = sample(10_000);
        for codec in Codec::ALL {
            for filter in Filter::ALL {
                for clevel in [0, 1, 5, 9] {
                    let p = CompressParams {
                        codec,
                        clevel,
                        filter,
                        typesize: 8,
                        ..Default::default()
                    };
                    let c = compress(&p, &src).unwrap();
                    let h = validate(&c).unwrap();
                    assert_eq!(h.nbytes as usize, src.len());
                    assert_eq!(decompress(&c, 1).unwrap(), src, "{p:?}");
                    assert_eq!(decompress(&c, 2).unwrap(), src, "{p:?}");
                }
            }
        }
    }

    #[test]
    fn decompress_to_vec_reuses_and_replaces() {
        let a = sample(50_000);
        let b = sample(300);
        let p = CompressParams::default();
        let mut out = vec![9u8; 7];
        decompress_to_vec(&compress(&p, &a).unwrap(), &mut out, 1).unwrap();
        assert_eq!(out, a);
        decompress_to_vec(&compress(&p, &b).unwrap(), &mut out, 1).unwrap();
        assert_eq!(out, b);
        decompress_to_vec(&compress(&p, &[]).unwrap(), &mut out, 1).unwrap();
        assert!(out.is_empty());
        let mut bad = compress(&p, &a).unwrap();
        let last = bad.len() - 1;
        bad[40..last].fill(0);
        assert!(decompress_to_vec(&bad, &mut out, 1).is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn empty_chunk() {
        let c = compress(&CompressParams::default(), &[]).unwrap();
        assert_eq!(c.len(), HEADER_LEN);
        assert_eq!(decompress(&c, 1).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn getitem_reads_a_range() {
        let src = sample(100_000);
        let c = compress(&CompressParams::default(), &src).unwrap();
        let mut out = vec![0u8; 8 * 10];
        getitem(&c, 54_321 * 8, &mut out).unwrap();
        assert_eq!(out, &src[54_321 * 8..54_331 * 8]);
        assert!(getitem(&c, 99_995 * 8, &mut out).is_err());
        assert!(getitem(&c, 54_321 * 8 + 4, &mut out).is_err());
        // Elements of two Blosc items (complex128 is shuffled as 8-byte floats): the range is
        // in bytes, not in items.
        let mut two = vec![0u8; 16 * 3];
        getitem(&c, 1_000 * 16, &mut two).unwrap();
        assert_eq!(two, &src[16_000..16_048]);
    }

    #[test]
    fn forced_blocksize_is_used() {
        let src = sample(100_000);
        // zstd does not split blocks per byte stream, so the forced size is stored as given
        // (lz4 and blosclz multiply it by the typesize when they split).
        let p = CompressParams {
            codec: Codec::Zstd,
            blocksize: 64 * 1024,
            ..Default::default()
        };
        let c = compress(&p, &src).unwrap();
        assert_eq!(validate(&c).unwrap().blocksize, 64 * 1024);
        assert_eq!(decompress(&c, 1).unwrap(), src);
    }

    /// Bytes that compress about as badly as float measurements: splitmix64 noise in the low
    /// bytes of each element, a slowly changing value in its high bytes.
    fn noisy(n: usize, typesize: usize) -> Vec<u8> {
        (0..n)
            .map(|i| {
                let elem = i / typesize;
                if i % typesize < typesize - typesize / 4 {
                    let mut z = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    (z ^ (z >> 31)) as u8
                } else {
                    (elem >> 12) as u8
                }
            })
            .collect()
    }

    fn blocksize_of(params: &CompressParams, src: &[u8]) -> usize {
        let c = compress(params, src).unwrap();
        assert_eq!(decompress(&c, 1).unwrap(), src, "{params:?}");
        validate(&c).unwrap().blocksize as usize
    }

    #[test]
    fn poorly_compressible_chunks_get_small_blocks() {
        for codec in [Codec::Lz4, Codec::Blosclz] {
            for typesize in 1..=20 {
                let src = noisy(1 << 20, typesize);
                for clevel in [1, 5, 9] {
                    let p = CompressParams {
                        codec,
                        clevel,
                        typesize,
                        ..Default::default()
                    };
                    let bs = blocksize_of(&p, &src);
                    let own = c_blosc_blocksize(codec, clevel, typesize, src.len());
                    if own > SMALL_BLOCK {
                        assert!(
                            bs <= SMALL_BLOCK
                                && bs > SMALL_BLOCK - typesize
                                && bs.is_multiple_of(typesize),
                            "{p:?}: block size {bs}"
                        );
                    } else {
                        assert_eq!(bs, own, "{p:?}");
                    }
                    if clevel == 5 && (2..=16).contains(&typesize) {
                        assert!(own > SMALL_BLOCK, "{p:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn compressible_chunks_and_other_codecs_keep_c_blosc_blocks() {
        let c_blosc = |p: &CompressParams, src: &[u8]| {
            let mut out = Vec::new();
            raw_compress(p, src, &mut out).unwrap();
            validate(&out).unwrap().blocksize as usize
        };
        // An arithmetic progression: half its ratio would be lost in 128 KiB blocks.
        let smooth = sample(1 << 17);
        let p = CompressParams::default();
        assert_eq!(blocksize_of(&p, &smooth), c_blosc(&p, &smooth));
        assert_eq!(blocksize_of(&p, &smooth), 1 << 20);
        let src = noisy(1 << 20, 8);
        for codec in [Codec::Lz4hc, Codec::Zlib, Codec::Zstd] {
            let p = CompressParams {
                codec,
                ..Default::default()
            };
            assert_eq!(blocksize_of(&p, &src), c_blosc(&p, &src), "{codec:?}");
        }
        // clevel 0, a chunk of one small block, and a block size the caller chose.
        for p in [
            CompressParams {
                clevel: 0,
                ..Default::default()
            },
            CompressParams {
                blocksize: 1 << 14,
                typesize: 1,
                ..Default::default()
            },
        ] {
            assert_eq!(blocksize_of(&p, &src), c_blosc(&p, &src), "{p:?}");
        }
        assert_eq!(blocksize_of(&p, &src[..SMALL_BLOCK]), SMALL_BLOCK);
        assert_eq!(blocksize_of(&p, &src[..SMALL_BLOCK + 8]), SMALL_BLOCK);
        // Where c-blosc chooses small blocks itself, they stay (never made larger).
        let p1 = CompressParams {
            clevel: 1,
            typesize: 1,
            ..Default::default()
        };
        assert_eq!(blocksize_of(&p1, &src), 1 << 16);
    }

    #[test]
    fn c_blosc_block_size_is_predicted() {
        let mut out = Vec::new();
        for codec in Codec::ALL {
            for clevel in 0..=9 {
                for typesize in [1, 2, 3, 4, 7, 8, 12, 16, 17, 32, 255] {
                    for nbytes in [1usize, 100, 1 << 15, 100_000, (1 << 20) + 8] {
                        let src = vec![0u8; nbytes];
                        let p = CompressParams {
                            codec,
                            clevel,
                            typesize,
                            ..Default::default()
                        };
                        raw_compress(&p, &src, &mut out).unwrap();
                        let got = validate(&out).unwrap().blocksize as usize;
                        assert_eq!(
                            c_blosc_blocksize(codec, clevel, typesize, nbytes),
                            got,
                            "{p:?} nbytes {nbytes}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn bad_params_are_refused() {
        let src = sample(10);
        for p in [
            CompressParams {
                clevel: 10,
                ..Default::default()
            },
            CompressParams {
                typesize: 0,
                ..Default::default()
            },
            CompressParams {
                typesize: 256,
                ..Default::default()
            },
        ] {
            assert!(compress(&p, &src).is_err());
        }
    }

    #[test]
    fn truncated_or_altered_chunks_are_errors() {
        let src = sample(10_000);
        let c = compress(&CompressParams::default(), &src).unwrap();
        assert!(decompress(&c[..c.len() - 1], 1).is_err());
        assert!(decompress(&c[..10], 1).is_err());
        let mut big = c.clone();
        big[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decompress(&big, 1).is_err());
        let mut v = c.clone();
        v[0] = 3;
        assert!(decompress(&v, 1).is_err());
        let mut both = c.clone();
        both[2] |= FLAG_SHUFFLE | FLAG_BITSHUFFLE;
        assert!(decompress(&both, 1).is_err());
        let mut wrong = vec![0u8; src.len() - 8];
        assert!(decompress_into(&c, &mut wrong, 1).is_err());
    }

    #[test]
    fn names_parse() {
        for c in Codec::ALL {
            assert_eq!(c.name().parse::<Codec>().unwrap(), c);
        }
        for f in Filter::ALL {
            assert_eq!(f.name().parse::<Filter>().unwrap(), f);
        }
        assert!("snappy".parse::<Codec>().is_err());
    }
}
