//! The 16-byte header at the start of every Blosc 1.x chunk.

use super::CodecError;

/// Length of a Blosc 1.x chunk header.
pub const HEADER_LEN: usize = 16;
/// Flag: byte shuffle was applied.
pub const FLAG_SHUFFLE: u8 = 0x01;
/// Flag: the data is stored uncompressed after the header.
pub const FLAG_MEMCPYED: u8 = 0x02;
/// Flag: bit shuffle was applied.
pub const FLAG_BITSHUFFLE: u8 = 0x04;
const FLAG_RESERVED: u8 = 0x08;
/// The only chunk format version c-blosc 1.x reads.
const VERSION_FORMAT: u8 = 2;

/// A parsed Blosc chunk header (all integers little-endian on disk).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Byte 0: Blosc format version (2 for c-blosc 1.x).
    pub version: u8,
    /// Byte 1: the codec's format version.
    pub versionlz: u8,
    /// Byte 2: flags (shuffle, memcpyed, bitshuffle; bits 5-7 are the codec format).
    pub flags: u8,
    /// Byte 3: element size in bytes.
    pub typesize: u8,
    /// Bytes 4-7: uncompressed size.
    pub nbytes: u32,
    /// Bytes 8-11: block size.
    pub blocksize: u32,
    /// Bytes 12-15: compressed size including this header.
    pub cbytes: u32,
}

impl ChunkHeader {
    /// Reads the header fields from the first 16 bytes of `buf`.
    ///
    /// # Errors
    /// A [`CodecError`] when `buf` is shorter than a header.
    pub fn parse(buf: &[u8]) -> Result<ChunkHeader, CodecError> {
        let h: &[u8; HEADER_LEN] = buf
            .get(..HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| {
                CodecError(format!(
                    "{} bytes is too short for a Blosc header",
                    buf.len()
                ))
            })?;
        let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        Ok(ChunkHeader {
            version: h[0],
            versionlz: h[1],
            flags: h[2],
            typesize: h[3],
            nbytes: u32_at(4),
            blocksize: u32_at(8),
            cbytes: u32_at(12),
        })
    }

    /// The codec format stored in the flags' top three bits.
    pub fn codec_format(&self) -> u8 {
        self.flags >> 5
    }

    /// Checks the header's claims against a buffer of `len` bytes and c-blosc 1.x's rules.
    ///
    /// # Errors
    /// A [`CodecError`] naming the first field that cannot be right.
    pub(crate) fn check_against(&self, len: usize) -> Result<(), CodecError> {
        let bad = |m: String| Err(CodecError(m));
        if self.version != VERSION_FORMAT {
            return bad(format!(
                "Blosc format version {} (c-blosc 1.x reads version {VERSION_FORMAT})",
                self.version
            ));
        }
        if self.cbytes as usize != len {
            return bad(format!(
                "header says {} compressed bytes, chunk has {len}",
                self.cbytes
            ));
        }
        if self.nbytes as usize > super::MAX_BUFFERSIZE {
            return bad(format!("uncompressed size {} too large", self.nbytes));
        }
        if self.nbytes == 0 {
            return Ok(());
        }
        if self.flags & FLAG_RESERVED != 0 {
            return bad(format!("reserved flag bit set (flags {:#04x})", self.flags));
        }
        if self.flags & FLAG_SHUFFLE != 0 && self.flags & FLAG_BITSHUFFLE != 0 {
            return bad("both shuffle and bitshuffle flags set".into());
        }
        if self.typesize == 0 {
            return bad("typesize 0".into());
        }
        if self.blocksize == 0 || self.blocksize > self.nbytes.max(1) {
            return bad(format!(
                "block size {} invalid for {} bytes",
                self.blocksize, self.nbytes
            ));
        }
        if self.flags & FLAG_MEMCPYED != 0 {
            if self.cbytes as u64 != self.nbytes as u64 + HEADER_LEN as u64 {
                return bad("stored chunk's size does not match its header".into());
            }
        } else {
            if super::Codec::from_format(self.codec_format()).is_none() {
                return bad(format!("unknown codec format {}", self.codec_format()));
            }
            let nblocks = (self.nbytes as u64).div_ceil(self.blocksize as u64);
            if (HEADER_LEN as u64) + 4 * nblocks > self.cbytes as u64 {
                return bad(format!(
                    "{nblocks} blocks do not fit in {} bytes",
                    self.cbytes
                ));
            }
        }
        Ok(())
    }
}
