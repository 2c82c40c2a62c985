//! The front a state entry carries for a superchunk file: the bytes every reader reads first
//! (header, metadata, offsets) and its block index, packed (zlib, base64) into the state.

use crate::keys::ExtentObject;
use crate::keys::MAX_FRONT;
use blz_format::blosc::BlockIndex;
use bytes::Bytes;
use serde::Deserialize;
use serde::Serialize;
use std::sync::Arc;
use std::sync::OnceLock;

/// A copy of the bytes of a file that every reader of it reads before anything else (a
/// superchunk file's header, metadata section and offsets table), kept in the state object
/// so that reading a chunk of the file is one request (`spec/object-store.md` §3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Front {
    /// The byte ranges copied, each `[start, length]`: in increasing order, apart, none
    /// empty, inside the file, [`MAX_FRONT`] bytes at most in all.
    pub ranges: Vec<[u64; 2]>,
    /// The ranges' bytes, concatenated in order, compressed with zlib (RFC 1950) and
    /// encoded in base64 (RFC 4648, standard alphabet, padded).
    pub zlib: String,
    /// The file's block index ([`blz_format::blosc::encode_index`]: for chunks of a superchunk
    /// file, their Blosc headers, block starts and blocks' CRC-32s), compressed with zlib
    /// and encoded in base64 as `zlib` is; absent when the writer kept none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<String>,
    /// Where the file's block index lies when the state does not carry it (past the
    /// state's budget of block indexes,
    /// [`ObjectStorage::set_inline_block_indexes`](crate::ObjectStorage::set_inline_block_indexes)):
    /// an object, its key below the dataset's prefix and its size, holding what `blocks`
    /// would hold before base64 (the zlib stream). Never beside `blocks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks_object: Option<ExtentObject>,
}

impl Front {
    /// The copy of `ranges` of a file, given their bytes concatenated.
    pub(crate) fn new(ranges: &[std::ops::Range<u64>], bytes: &[u8]) -> Option<Front> {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(bytes).ok()?;
        Some(Front {
            ranges: ranges.iter().map(|r| [r.start, r.end - r.start]).collect(),
            zlib: base64_encode(&z.finish().ok()?),
            blocks: None,
            blocks_object: None,
        })
    }

    /// The front with `index` as its block index (none when it is empty, or encodes to more
    /// than [`MAX_FRONT`] bytes).
    pub(crate) fn with_blocks(mut self, index: Option<&BlockIndex>) -> Front {
        self.blocks_object = None;
        self.blocks = index
            .filter(|i| !i.is_empty() && blz_format::blosc::encoded_len(i) <= MAX_FRONT)
            .map(|i| base64_encode(&blz_format::blosc::compress_index(i)));
        self
    }

    /// What is wrong with it for a file of `len` bytes, if anything.
    pub(crate) fn fault(&self, len: u64) -> Option<String> {
        let mut at = 0u64;
        let mut total = 0u64;
        for (i, &[start, n]) in self.ranges.iter().enumerate() {
            let end = start.checked_add(n).filter(|&e| e <= len);
            if n == 0 || (i > 0 && start <= at) || end.is_none() {
                return Some(format!(
                    "front range {i} ([{start}, {n}]) is empty, out of order or past the \
                     file's {len} bytes"
                ));
            }
            at = end.unwrap_or(len);
            total += n;
        }
        if self.blocks.is_some() && self.blocks_object.is_some() {
            return Some("a front with both blocks and blocks_object".into());
        }
        (total > MAX_FRONT).then(|| format!("front of {total} bytes, over {MAX_FRONT}"))
    }

    pub(crate) fn total(&self) -> u64 {
        self.ranges.iter().map(|r| r[1]).sum()
    }
}

/// A file's [`Front`] as a reader holds it: decoded on its first use.
pub(crate) struct FrontCopy {
    pub(crate) front: Front,
    pub(crate) bytes: OnceLock<std::result::Result<Bytes, String>>,
    pub(crate) blocks: OnceLock<std::result::Result<Option<Arc<BlockIndex>>, String>>,
    /// The block index read from the front's `blocks_object`, decoded, once it was read
    /// (a failed read is not kept: the next use reads again).
    pub(crate) fetched: OnceLock<std::result::Result<Arc<BlockIndex>, String>>,
}

impl FrontCopy {
    pub(crate) fn new(front: Front) -> Arc<FrontCopy> {
        Arc::new(FrontCopy {
            front,
            bytes: OnceLock::new(),
            blocks: OnceLock::new(),
            fetched: OnceLock::new(),
        })
    }

    /// The block index the front carries, decoded (`None` when it carries none; see
    /// [`Backend::front_index`] for one in an object of its own).
    pub(crate) fn block_index(&self) -> std::result::Result<Option<&Arc<BlockIndex>>, String> {
        self.blocks
            .get_or_init(|| {
                let Some(b) = &self.front.blocks else {
                    return Ok(None);
                };
                decode_packed_index(&base64_decode(b).ok_or("a block index that is not base64")?)
                    .map(|i| Some(Arc::new(i)))
            })
            .as_ref()
            .map(Option::as_ref)
            .map_err(String::clone)
    }

    /// Where the file's bytes `start..end` lie in the decoded copy, if they lie in one range.
    pub(crate) fn find(&self, start: u64, end: u64) -> Option<usize> {
        let mut at = 0u64;
        for &[s, n] in &self.front.ranges {
            if s <= start && end <= s + n {
                return usize::try_from(at + (start - s)).ok();
            }
            at += n;
        }
        None
    }

    /// The ranges' bytes, concatenated.
    pub(crate) fn bytes(&self) -> std::result::Result<&Bytes, String> {
        self.bytes
            .get_or_init(|| {
                let total = self.front.total();
                let out = unpack(&self.front.zlib, total, "a front")?;
                if out.len() as u64 != total {
                    return Err(format!(
                        "a front of {} bytes where its ranges hold {total}",
                        out.len()
                    ));
                }
                Ok(Bytes::from(out))
            })
            .as_ref()
            .map_err(String::clone)
    }
}

/// The bytes of `text`, base64 of zlib (as the state keeps fronts and block indexes),
/// decompressed to at most `limit + 1` bytes (one more than allowed tells the caller it was
/// too long); `what` names it in the error.
pub(crate) fn unpack(text: &str, limit: u64, what: &str) -> std::result::Result<Vec<u8>, String> {
    let packed = base64_decode(text).ok_or_else(|| format!("{what} that is not base64"))?;
    inflate(&packed, limit, what)
}

/// The zlib stream `packed` inflated, `limit + 1` bytes at most (so that a caller sees
/// when it was more); `what` names it in the error.
pub(crate) fn inflate(
    packed: &[u8],
    limit: u64,
    what: &str,
) -> std::result::Result<Vec<u8>, String> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(packed)
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("{what} that does not decompress: {e}"))?;
    Ok(out)
}

/// A block index as a front's `blocks` holds it once out of base64, or its
/// `blocks_object` holds it (a zlib stream of at most [`MAX_FRONT`] bytes), decoded.
pub(crate) fn decode_packed_index(packed: &[u8]) -> std::result::Result<BlockIndex, String> {
    let raw = inflate(packed, MAX_FRONT, "a block index")?;
    if raw.len() as u64 > MAX_FRONT {
        return Err(format!("a block index over {MAX_FRONT} bytes"));
    }
    blz_format::blosc::decode_index(&raw)
}

/// Base64 (RFC 4648, standard alphabet, padded), as the state writes fronts.
pub(crate) fn base64_encode(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// The bytes of standard padded base64 text, `None` when it is not that.
pub(crate) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}
