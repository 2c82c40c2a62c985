//! The 32-byte bloscpack (format version 3) file header.

use super::Checksum;
use crate::error::{Error, Result};
use std::path::Path;

/// Magic bytes at the start of every superchunk file.
pub const MAGIC: &[u8; 4] = b"blpk";
/// The bloscpack format version blz reads and writes.
pub const FORMAT_VERSION: u8 = 3;
/// Length of the file header.
pub const HEADER_LEN: usize = 32;

/// Option bit 0: an offsets table follows the header (and metadata section).
pub const OPT_OFFSETS: u8 = 0x01;
/// Option bit 1: a metadata section follows the header.
pub const OPT_METADATA: u8 = 0x02;
/// Option bit 2 (blz extension): the chunks hold variable-length items.
pub const OPT_VARLEN: u8 = 0x04;
/// Option bit 3 (blz extension): chunks are found only through the offsets table; there may
/// be reserved space or dead chunks between them, and file order need not be index order.
/// bloscpack 0.16 refuses files with this bit, so it never misreads one.
pub const OPT_SCATTERED: u8 = 0x08;
/// Every option bit blz understands.
const OPT_KNOWN: u8 = OPT_OFFSETS | OPT_METADATA | OPT_VARLEN | OPT_SCATTERED;

/// The decoded file header. All integers are little-endian on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    /// Byte 5: option bits (`OPT_*`).
    pub options: u8,
    /// Byte 6: the digest stored after each chunk.
    pub checksum: Checksum,
    /// Byte 7: element size of the data in the chunks.
    pub typesize: u8,
    /// Bytes 8-11: uncompressed size of every chunk but the last (-1: unknown).
    pub chunk_size: i32,
    /// Bytes 12-15: uncompressed size of the last chunk (-1: unknown).
    pub last_chunk: i32,
    /// Bytes 16-23: number of chunks in the file.
    pub nchunks: i64,
    /// Bytes 24-31: offsets slots reserved beyond `nchunks` for appends.
    pub max_app_chunks: i64,
}

impl FileHeader {
    /// True when option bit `bit` is set.
    pub fn has(&self, bit: u8) -> bool {
        self.options & bit != 0
    }

    /// The 32 bytes of the header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(MAGIC);
        b[4] = FORMAT_VERSION;
        b[5] = self.options;
        b[6] = self.checksum.id();
        b[7] = self.typesize;
        b[8..12].copy_from_slice(&self.chunk_size.to_le_bytes());
        b[12..16].copy_from_slice(&self.last_chunk.to_le_bytes());
        b[16..24].copy_from_slice(&self.nchunks.to_le_bytes());
        b[24..32].copy_from_slice(&self.max_app_chunks.to_le_bytes());
        b
    }

    /// Decodes and checks a header read from `path`.
    ///
    /// # Errors
    /// [`Error::InvalidHeader`] for a wrong magic or version, unknown option bits or checksum
    /// id, or sizes no file could have.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<FileHeader> {
        let b: &[u8; HEADER_LEN] = bytes
            .get(..HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| {
                Error::header(
                    path,
                    format!(
                        "file is {} bytes, shorter than the {HEADER_LEN}-byte header",
                        bytes.len()
                    ),
                )
            })?;
        if &b[0..4] != MAGIC {
            return Err(Error::header(
                path,
                format!("not a blpk file (magic {:02x?})", &b[0..4]),
            ));
        }
        if b[4] != FORMAT_VERSION {
            return Err(Error::header(
                path,
                format!(
                    "format version {} (blz reads version {FORMAT_VERSION})",
                    b[4]
                ),
            ));
        }
        let options = b[5];
        if options & !OPT_KNOWN != 0 {
            return Err(Error::header(
                path,
                format!("unknown option bits {:#04x}", options & !OPT_KNOWN),
            ));
        }
        let checksum = Checksum::from_id(b[6])
            .ok_or_else(|| Error::header(path, format!("unknown checksum id {}", b[6])))?;
        let i32_at = |i: usize| i32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let i64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            i64::from_le_bytes(a)
        };
        let h = FileHeader {
            options,
            checksum,
            typesize: b[7],
            chunk_size: i32_at(8),
            last_chunk: i32_at(12),
            nchunks: i64_at(16),
            max_app_chunks: i64_at(24),
        };
        if h.chunk_size < -1 || h.last_chunk < -1 {
            return Err(Error::header(
                path,
                format!(
                    "negative chunk size ({}, last {})",
                    h.chunk_size, h.last_chunk
                ),
            ));
        }
        if h.nchunks < 0 {
            return Err(Error::header(
                path,
                format!(
                    "number of chunks {} (unknown counts are not supported)",
                    h.nchunks
                ),
            ));
        }
        if h.max_app_chunks < 0 {
            return Err(Error::header(
                path,
                format!("negative max_app_chunks {}", h.max_app_chunks),
            ));
        }
        if h.has(OPT_SCATTERED) && !h.has(OPT_OFFSETS) {
            return Err(Error::header(
                path,
                "scattered chunks (option bit 3) without an offsets table",
            ));
        }
        if !h.has(OPT_OFFSETS) && h.max_app_chunks != 0 {
            return Err(Error::header(
                path,
                "max_app_chunks without an offsets table",
            ));
        }
        Ok(h)
    }

    /// Number of offsets slots (`nchunks + max_app_chunks`), when the file has the table.
    pub fn offset_slots(&self) -> u64 {
        if self.has(OPT_OFFSETS) {
            (self.nchunks as u64).saturating_add(self.max_app_chunks as u64)
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_bytes() {
        let h = FileHeader {
            options: OPT_OFFSETS | OPT_METADATA,
            checksum: Checksum::Adler32,
            typesize: 8,
            chunk_size: 1 << 20,
            last_chunk: 12345,
            nchunks: 7,
            max_app_chunks: 70,
        };
        let b = h.encode();
        assert_eq!(&b[..4], b"blpk");
        assert_eq!(b[4], 3);
        assert_eq!(b[5], 0x03);
        assert_eq!(b[6], 1);
        assert_eq!(b[7], 8);
        assert_eq!(&b[8..12], &[0x00, 0x00, 0x10, 0x00]);
        assert_eq!(&b[12..16], &[0x39, 0x30, 0x00, 0x00]);
        assert_eq!(&b[16..24], &[7, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[24..32], &[70, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(FileHeader::decode(&b, Path::new("x")).unwrap(), h);
    }

    #[test]
    fn bad_headers() {
        let good = FileHeader {
            options: OPT_OFFSETS,
            checksum: Checksum::None,
            typesize: 1,
            chunk_size: 10,
            last_chunk: 10,
            nchunks: 1,
            max_app_chunks: 0,
        }
        .encode();
        let p = Path::new("f.blp");
        let mutate = |i: usize, v: u8| {
            let mut b = good;
            b[i] = v;
            FileHeader::decode(&b, p)
        };
        assert!(mutate(0, b'x').is_err());
        assert!(mutate(4, 2).is_err());
        assert!(mutate(5, 0x10).is_err());
        assert!(mutate(5, OPT_SCATTERED).is_err());
        assert!(mutate(6, 9).is_err());
        assert!(mutate(23, 0x80).is_err());
        assert!(FileHeader::decode(&good[..31], p).is_err());
        let e = mutate(6, 42).unwrap_err().to_string();
        assert!(e.contains("f.blp") && e.contains("checksum id 42"), "{e}");
    }
}
