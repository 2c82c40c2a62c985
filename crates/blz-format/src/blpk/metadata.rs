//! The optional metadata section that follows the file header: a 32-byte section header, the
//! JSON document (raw or zlib-compressed), zero bytes reserved for it to grow, and a digest.

use super::Checksum;
use crate::error::{Error, Result};
use std::io::{Read, Write};
use std::path::Path;

/// Length of the metadata section header.
pub(crate) const META_HEADER_LEN: usize = 32;
/// The only serializer bloscpack defines.
pub(crate) const MAGIC_JSON: &[u8; 4] = b"JSON";
/// Largest metadata document blz will read (uncompressed and stored).
pub(crate) const MAX_METADATA_LEN: u32 = 64 * 1024 * 1024;

/// How the JSON document is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaCodec {
    /// Stored as is (codec id 0, `None`).
    None,
    /// zlib stream (codec id 1).
    Zlib,
}

/// How to write a metadata section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetadataParams {
    /// Digest over the stored document bytes.
    pub checksum: Checksum,
    /// Compression of the document (dropped when it does not make it smaller).
    pub codec: MetaCodec,
    /// zlib level 0-9.
    pub level: u8,
    /// Bytes reserved for the stored document, as a multiple of its uncompressed size
    /// (bloscpack's default is 10), so it can be rewritten in place when it grows.
    pub growth_factor: u32,
}

impl Default for MetadataParams {
    fn default() -> Self {
        MetadataParams {
            checksum: Checksum::Adler32,
            codec: MetaCodec::Zlib,
            level: 6,
            growth_factor: 10,
        }
    }
}

/// The decoded 32-byte metadata section header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetadataHeader {
    /// Digest stored after the reserved space.
    pub checksum: Checksum,
    /// Codec of the stored document.
    pub codec: MetaCodec,
    /// Compression level used.
    pub level: u8,
    /// Length of the uncompressed JSON.
    pub meta_size: u32,
    /// Bytes reserved for the stored document.
    pub max_meta_size: u32,
    /// Length of the stored (possibly compressed) document.
    pub meta_comp_size: u32,
}

impl MetadataHeader {
    /// Total bytes of the section: header, reserved space and digest.
    pub(crate) fn section_len(&self) -> u64 {
        META_HEADER_LEN as u64 + u64::from(self.max_meta_size) + self.checksum.len() as u64
    }

    /// The 32 bytes of the section header.
    pub fn encode(&self) -> [u8; META_HEADER_LEN] {
        let mut b = [0u8; META_HEADER_LEN];
        b[0..4].copy_from_slice(MAGIC_JSON);
        b[8] = 0;
        b[9] = self.checksum.id();
        b[10] = match self.codec {
            MetaCodec::None => 0,
            MetaCodec::Zlib => 1,
        };
        b[11] = self.level;
        b[12..16].copy_from_slice(&self.meta_size.to_le_bytes());
        b[16..20].copy_from_slice(&self.max_meta_size.to_le_bytes());
        b[20..24].copy_from_slice(&self.meta_comp_size.to_le_bytes());
        b
    }

    /// Decodes and checks a section header read from `path`.
    ///
    /// # Errors
    /// [`Error::InvalidMetadata`] for an unknown serializer, codec or checksum, or sizes
    /// that contradict each other or exceed [`MAX_METADATA_LEN`].
    pub fn decode(b: &[u8], path: &Path) -> Result<MetadataHeader> {
        let b: &[u8; META_HEADER_LEN] = b
            .get(..META_HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| Error::metadata(path, "truncated metadata section header"))?;
        let magic_end = b[..8].iter().position(|&c| c == 0).unwrap_or(8);
        if &b[..magic_end] != MAGIC_JSON || b[magic_end..8].iter().any(|&c| c != 0) {
            return Err(Error::metadata(
                path,
                format!("unknown metadata serializer {:?}", &b[..8]),
            ));
        }
        if b[8] != 0 {
            return Err(Error::metadata(
                path,
                format!("unknown metadata options {:#04x}", b[8]),
            ));
        }
        let checksum = Checksum::from_id(b[9])
            .ok_or_else(|| Error::metadata(path, format!("unknown checksum id {}", b[9])))?;
        let codec = match b[10] {
            0 => MetaCodec::None,
            1 => MetaCodec::Zlib,
            c => return Err(Error::metadata(path, format!("unknown codec id {c}"))),
        };
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let h = MetadataHeader {
            checksum,
            codec,
            level: b[11],
            meta_size: u32_at(12),
            max_meta_size: u32_at(16),
            meta_comp_size: u32_at(20),
        };
        if h.meta_comp_size > h.max_meta_size {
            return Err(Error::metadata(
                path,
                format!(
                    "stored metadata ({} bytes) larger than its reserved space ({})",
                    h.meta_comp_size, h.max_meta_size
                ),
            ));
        }
        if h.meta_size > MAX_METADATA_LEN || h.max_meta_size > MAX_METADATA_LEN {
            return Err(Error::metadata(
                path,
                format!(
                    "metadata of {} bytes (reserved {}) exceeds the {MAX_METADATA_LEN}-byte limit",
                    h.meta_size, h.max_meta_size
                ),
            ));
        }
        if h.codec == MetaCodec::None && h.meta_size != h.meta_comp_size {
            return Err(Error::metadata(
                path,
                "uncompressed metadata whose stored size differs from its size",
            ));
        }
        Ok(h)
    }
}

/// Encodes a whole metadata section for `doc`: header, stored document, reserved zeros and
/// digest.
///
/// # Errors
/// [`Error::InvalidArgument`] when the document is larger than [`MAX_METADATA_LEN`].
pub(crate) fn encode_section(doc: &serde_json::Value, params: &MetadataParams) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(doc).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    let meta_size = u32::try_from(json.len())
        .ok()
        .filter(|&n| n <= MAX_METADATA_LEN)
        .ok_or_else(|| {
            Error::InvalidArgument(format!("metadata of {} bytes is too large", json.len()))
        })?;
    let (codec, stored) = match params.codec {
        MetaCodec::Zlib => {
            let mut enc = flate2::write::ZlibEncoder::new(
                Vec::new(),
                flate2::Compression::new(u32::from(params.level.min(9))),
            );
            enc.write_all(&json)
                .and_then(|_| enc.finish())
                .map(|z| {
                    if z.len() <= json.len() {
                        (MetaCodec::Zlib, z)
                    } else {
                        (MetaCodec::None, json.clone())
                    }
                })
                .map_err(|e| Error::InvalidArgument(format!("zlib: {e}")))?
        }
        MetaCodec::None => (MetaCodec::None, json.clone()),
    };
    let max_meta_size = meta_size
        .saturating_mul(params.growth_factor.max(1))
        .min(MAX_METADATA_LEN)
        .max(stored.len() as u32);
    let header = MetadataHeader {
        checksum: params.checksum,
        codec,
        level: if codec == MetaCodec::None {
            0
        } else {
            params.level
        },
        meta_size,
        max_meta_size,
        meta_comp_size: stored.len() as u32,
    };
    Ok(section_bytes(&header, &stored))
}

/// The bytes of a section: its header, the stored document, zeros up to `max_meta_size`, the
/// digest.
fn section_bytes(header: &MetadataHeader, stored: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(header.section_len() as usize);
    out.extend_from_slice(&header.encode());
    out.extend_from_slice(stored);
    out.resize(META_HEADER_LEN + header.max_meta_size as usize, 0);
    out.extend_from_slice(header.checksum.digest(stored).as_slice());
    out
}

/// Encodes `doc` into the room of an existing section whose header is `old`: same digest,
/// codec (stored as is when zlib would not fit), level and `max_meta_size`, so the section
/// keeps its length and can be rewritten in place. Returns the new section header and bytes.
///
/// # Errors
/// [`Error::InvalidMetadata`] naming `path` when the document no longer fits the room.
pub(crate) fn reencode_section(
    doc: &serde_json::Value,
    old: &MetadataHeader,
    path: &Path,
) -> Result<(MetadataHeader, Vec<u8>)> {
    let json = serde_json::to_vec(doc).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    let room = old.max_meta_size as usize;
    let too_large = || {
        Error::metadata(
            path,
            format!(
                "the rewritten metadata document ({} bytes) no longer fits its {room}-byte room",
                json.len()
            ),
        )
    };
    let meta_size = u32::try_from(json.len()).map_err(|_| too_large())?;
    let zipped = match old.codec {
        MetaCodec::Zlib => {
            let mut enc = flate2::write::ZlibEncoder::new(
                Vec::new(),
                flate2::Compression::new(u32::from(old.level.min(9))),
            );
            Some(
                enc.write_all(&json)
                    .and_then(|_| enc.finish())
                    .map_err(|e| Error::InvalidArgument(format!("zlib: {e}")))?,
            )
        }
        MetaCodec::None => None,
    };
    let (codec, stored) = match zipped {
        Some(z) if z.len() <= room => (MetaCodec::Zlib, z),
        _ => (MetaCodec::None, json.clone()),
    };
    if stored.len() > room {
        return Err(too_large());
    }
    let header = MetadataHeader {
        codec,
        level: if codec == MetaCodec::None {
            0
        } else {
            old.level
        },
        meta_size,
        meta_comp_size: stored.len() as u32,
        ..*old
    };
    let bytes = section_bytes(&header, &stored);
    Ok((header, bytes))
}

/// Decodes the document of a metadata section given its header and the bytes that follow the
/// header (`max_meta_size` reserved bytes and the digest).
///
/// # Errors
/// [`Error::ChecksumMismatch`] (chunk `u64::MAX`) when the digest does not match, and
/// [`Error::InvalidMetadata`] when the document does not decompress or parse.
pub(crate) fn decode_body(
    header: &MetadataHeader,
    body: &[u8],
    path: &Path,
) -> Result<serde_json::Value> {
    let stored_len = header.meta_comp_size as usize;
    let digest_at = header.max_meta_size as usize;
    let stored = body
        .get(..stored_len)
        .ok_or_else(|| Error::metadata(path, "truncated metadata"))?;
    let digest = body
        .get(digest_at..digest_at + header.checksum.len())
        .ok_or_else(|| Error::metadata(path, "truncated metadata digest"))?;
    let got = header.checksum.digest(stored);
    if got.as_slice() != digest {
        return Err(Error::ChecksumMismatch {
            path: path.to_path_buf(),
            chunk: u64::MAX,
            algorithm: header.checksum.name(),
            expected: super::checksum::hex(digest),
            got: super::checksum::hex(got.as_slice()),
        });
    }
    let json = match header.codec {
        MetaCodec::None => stored.to_vec(),
        MetaCodec::Zlib => {
            // meta_size is untrusted: deflate expands at most 1032-fold, so never reserve more.
            let mut out = Vec::with_capacity(
                (header.meta_size as usize).min(stored.len().saturating_mul(1032)),
            );
            flate2::read::ZlibDecoder::new(stored)
                .take(u64::from(header.meta_size) + 1)
                .read_to_end(&mut out)
                .map_err(|e| Error::metadata(path, format!("metadata does not decompress: {e}")))?;
            if out.len() != header.meta_size as usize {
                return Err(Error::metadata(
                    path,
                    format!(
                        "metadata decompresses to {} bytes, header says {}",
                        out.len(),
                        header.meta_size
                    ),
                ));
            }
            out
        }
    };
    serde_json::from_slice(&json)
        .map_err(|e| Error::metadata(path, format!("metadata is not JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_compressed_and_not() {
        let doc = serde_json::json!({"dtype": "<f8", "shape": [1024], "container": "numpy"});
        for codec in [MetaCodec::None, MetaCodec::Zlib] {
            for checksum in Checksum::ALL {
                let p = MetadataParams {
                    checksum,
                    codec,
                    ..Default::default()
                };
                let s = encode_section(&doc, &p).unwrap();
                let h = MetadataHeader::decode(&s, Path::new("m")).unwrap();
                assert_eq!(s.len() as u64, h.section_len());
                assert_eq!(
                    decode_body(&h, &s[META_HEADER_LEN..], Path::new("m")).unwrap(),
                    doc
                );
            }
        }
    }

    #[test]
    fn a_reencoded_document_keeps_the_section_length() {
        let path = Path::new("m");
        let doc = |d: &str| serde_json::json!({"blz": {"file": 1, "offsets": d}});
        for (codec, growth) in [
            (MetaCodec::None, 1),
            (MetaCodec::Zlib, 1),
            (MetaCodec::Zlib, 10),
        ] {
            let p = MetadataParams {
                codec,
                growth_factor: growth,
                ..Default::default()
            };
            let s = encode_section(&doc(&"0".repeat(64)), &p).unwrap();
            let h = MetadataHeader::decode(&s, path).unwrap();
            let new = doc(&"7f".repeat(32));
            let (h2, s2) = reencode_section(&new, &h, path).unwrap();
            assert_eq!(s2.len(), s.len());
            assert_eq!(h2.max_meta_size, h.max_meta_size);
            assert_eq!(MetadataHeader::decode(&s2, path).unwrap(), h2);
            assert_eq!(decode_body(&h2, &s2[META_HEADER_LEN..], path).unwrap(), new);
            // A document that outgrows the room is refused, not truncated.
            let big = doc(&"7f".repeat(40 * growth as usize));
            if codec == MetaCodec::None {
                assert!(reencode_section(&big, &h, path).is_err());
            }
        }
    }

    #[test]
    fn corrupt_metadata_is_caught() {
        let doc = serde_json::json!({"a": 1});
        let s = encode_section(
            &doc,
            &MetadataParams {
                codec: MetaCodec::None,
                ..Default::default()
            },
        )
        .unwrap();
        let h = MetadataHeader::decode(&s, Path::new("m")).unwrap();
        let mut bad = s.clone();
        bad[META_HEADER_LEN] ^= 1;
        assert!(matches!(
            decode_body(&h, &bad[META_HEADER_LEN..], Path::new("m")),
            Err(Error::ChecksumMismatch { .. })
        ));
        let mut huge = s.clone();
        huge[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(MetadataHeader::decode(&huge, Path::new("m")).is_err());
    }
}
