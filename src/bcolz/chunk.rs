//! bcolz chunk files `data/__<i>.blp`: a 16-byte bloscpack version-1 header, then exactly
//! one Blosc 1.x chunk, and nothing else (no offsets, no metadata, no checksum).

use crate::blosc::{self, ChunkHeader, HEADER_LEN, MAX_BUFFERSIZE, MAX_OVERHEAD};
use crate::error::{Error, Result};
use std::io::Read;
use std::path::Path;

/// Length of the bloscpack version-1 header bcolz writes before each chunk.
pub(crate) const BLP_HEADER_LEN: usize = 16;
/// Magic bytes at the start of a chunk file.
pub(crate) const BLP_MAGIC: &[u8; 4] = b"blpk";
/// The header version bcolz 1.x writes.
pub(crate) const BLP_VERSION: u8 = 1;

/// The file name of chunk `i` (`__0.blp`, `__1.blp`, ...).
pub(crate) fn chunk_file_name(i: u64) -> String {
    format!("__{i}.blp")
}

/// Checks the 16-byte header of a chunk file: `blpk`, version 1, three reserved bytes (not
/// checked: bcolz writes zeros and never reads them), then nchunks as a little-endian i64,
/// which must be 1.
///
/// # Errors
/// [`Error::InvalidHeader`] naming the file.
pub(crate) fn check_blp_header(h: &[u8], path: &Path) -> Result<()> {
    let h: &[u8; BLP_HEADER_LEN] = h
        .get(..BLP_HEADER_LEN)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| Error::header(path, "shorter than the 16-byte blpk header"))?;
    if &h[..4] != BLP_MAGIC {
        return Err(Error::header(
            path,
            format!("magic {:02x?}, expected \"blpk\"", &h[..4]),
        ));
    }
    if h[4] != BLP_VERSION {
        return Err(Error::header(
            path,
            format!("blpk version {}, bcolz chunk files have version 1", h[4]),
        ));
    }
    let mut n = [0u8; 8];
    n.copy_from_slice(&h[8..16]);
    let nchunks = i64::from_le_bytes(n);
    if nchunks != 1 {
        return Err(Error::header(
            path,
            format!("nchunks {nchunks}, bcolz chunk files hold exactly 1"),
        ));
    }
    Ok(())
}

/// Reads chunk file `path` (chunk `index` of its carray) into `buf` (its allocation is
/// reused) and checks it whole: the blpk header, then the Blosc header against the file's
/// length. Returns the Blosc header; the Blosc chunk is `buf[BLP_HEADER_LEN..]`.
///
/// The buffer is sized from the file's length, after that length has been checked against
/// the largest chunk Blosc can hold.
///
/// # Errors
/// [`Error::InvalidChunk`] naming the file and chunk when the file is missing, truncated,
/// too long or not a valid Blosc chunk; [`Error::InvalidHeader`] for a bad blpk header.
pub(crate) fn read_chunk_file(path: &Path, index: u64, buf: &mut Vec<u8>) -> Result<ChunkHeader> {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::chunk(
                path,
                index,
                "chunk file is missing (meta/sizes counts rows stored in it)",
            ))
        }
        Err(e) => return Err(Error::io("open", path, e)),
    };
    let len = file
        .metadata()
        .map_err(|e| Error::io("stat", path, e))?
        .len();
    let min = (BLP_HEADER_LEN + HEADER_LEN) as u64;
    let max = (BLP_HEADER_LEN + MAX_BUFFERSIZE + MAX_OVERHEAD) as u64;
    if len < min {
        return Err(Error::chunk(
            path,
            index,
            format!("file is {len} bytes, shorter than its two 16-byte headers (truncated?)"),
        ));
    }
    if len > max {
        return Err(Error::chunk(
            path,
            index,
            format!("file is {len} bytes, larger than any Blosc chunk"),
        ));
    }
    buf.clear();
    buf.reserve(len as usize);
    file.by_ref()
        .take(len)
        .read_to_end(buf)
        .map_err(|e| Error::io("read", path, e))?;
    if buf.len() as u64 != len {
        return Err(Error::chunk(
            path,
            index,
            format!("file shrank while read ({} of {len} bytes)", buf.len()),
        ));
    }
    check_blp_header(buf, path)?;
    let body = buf.get(BLP_HEADER_LEN..).unwrap_or_default();
    let header = ChunkHeader::parse(body).map_err(|e| Error::chunk(path, index, e.0))?;
    if header.cbytes as usize != body.len() {
        return Err(Error::chunk(
            path,
            index,
            format!(
                "Blosc header says {} compressed bytes, the file holds {} after its blpk header{}",
                header.cbytes,
                body.len(),
                if (header.cbytes as usize) > body.len() {
                    " (truncated?)"
                } else {
                    ""
                }
            ),
        ));
    }
    blosc::validate(body).map_err(|e| Error::chunk(path, index, e.0))
}
