//! Variable-length columns: each chunk holds up to `chunklen` items, encoded as
//! `u32 n | u32 len[n] | item bytes...` (little-endian) and compressed as one Blosc chunk in a
//! superchunk file marked with option bit 2. Overhead is 4 bytes per item before
//! compression; item `i` lives in chunk `i / chunklen`, so any row is found in O(1).
//! The layout is described in `spec/varlen.md`.

use crate::blosc::{self, CompressParams};
use crate::engine::{ChunkStore, ChunkWrites};
use crate::error::{Error, Result};
use crate::meta::Compression;
use crate::txn::Txn;
use rayon::prelude::*;

/// Largest chunk payload blz writes (c-blosc's limit is 2 GB).
pub(crate) const MAX_PAYLOAD: usize = blosc::MAX_BUFFERSIZE;

/// The engine of one variable-length column.
#[derive(Debug)]
pub(crate) struct VarCore {
    pub(crate) store: ChunkStore,
    pub(crate) chunklen: u64,
    pub(crate) compression: Compression,
}

/// Encodes items as one chunk payload.
///
/// # Errors
/// [`Error::InvalidArgument`] when the payload would exceed [`MAX_PAYLOAD`].
pub fn encode_items<B: AsRef<[u8]>>(items: &[B]) -> Result<Vec<u8>> {
    let body: usize = items.iter().map(|b| b.as_ref().len()).sum();
    let total = 4 + 4 * items.len() + body;
    if total > MAX_PAYLOAD || items.iter().any(|b| b.as_ref().len() > u32::MAX as usize) {
        return Err(Error::InvalidArgument(format!(
            "{} items of {body} bytes do not fit in one chunk (limit {MAX_PAYLOAD} bytes); use a smaller chunklen",
            items.len()
        )));
    }
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&(items.len() as u32).to_le_bytes());
    for b in items {
        out.extend_from_slice(&(b.as_ref().len() as u32).to_le_bytes());
    }
    for b in items {
        out.extend_from_slice(b.as_ref());
    }
    Ok(out)
}

/// Decodes a chunk payload into items, checking every length against the payload.
///
/// # Errors
/// A description of the inconsistency (the caller names file and chunk).
pub fn decode_items(p: &[u8]) -> std::result::Result<Vec<Vec<u8>>, String> {
    let n = p
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or("payload shorter than its item count")?;
    let lens_end = n
        .checked_mul(4)
        .and_then(|x| x.checked_add(4))
        .filter(|&e| e <= p.len())
        .ok_or_else(|| {
            format!(
                "{n} item lengths do not fit in a payload of {} bytes",
                p.len()
            )
        })?;
    let mut items = Vec::with_capacity(n);
    let mut at = lens_end;
    for i in 0..n {
        let o = 4 + 4 * i;
        let len = u32::from_le_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]]) as usize;
        let end = at
            .checked_add(len)
            .filter(|&e| e <= p.len())
            .ok_or_else(|| format!("item {i} of {len} bytes runs past the payload"))?;
        items.push(p[at..end].to_vec());
        at = end;
    }
    if at != p.len() {
        return Err(format!("{} bytes after the last item", p.len() - at));
    }
    Ok(items)
}

/// Items `lo..hi` of a chunk payload as their lengths and their bytes back to back (the
/// payload's own layout, copied in two pieces rather than one allocation per item), checked
/// as [`decode_items`] checks the whole payload.
///
/// # Errors
/// A description of the inconsistency (the caller names file and chunk).
#[cfg(feature = "arrow")]
pub(crate) fn decode_items_flat(
    p: &[u8],
    lo: usize,
    hi: usize,
) -> std::result::Result<(Vec<u32>, Vec<u8>), String> {
    let n = p
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or("payload shorter than its item count")?;
    let lens_end = n
        .checked_mul(4)
        .and_then(|x| x.checked_add(4))
        .filter(|&e| e <= p.len())
        .ok_or_else(|| {
            format!(
                "{n} item lengths do not fit in a payload of {} bytes",
                p.len()
            )
        })?;
    if hi > n || lo > hi {
        return Err(format!("items {lo}..{hi} asked of a chunk of {n}"));
    }
    let lens: Vec<u32> = p[4..lens_end]
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let body = p.len() - lens_end;
    let total: u64 = lens.iter().map(|&l| u64::from(l)).sum();
    if total != body as u64 {
        return Err(format!(
            "item lengths sum to {total} bytes where the payload holds {body}"
        ));
    }
    // Within the body now: every partial sum is at most `body`.
    let skip: usize = lens[..lo].iter().map(|&l| l as usize).sum();
    let take: usize = lens[lo..hi].iter().map(|&l| l as usize).sum();
    let at = lens_end + skip;
    Ok((lens[lo..hi].to_vec(), p[at..at + take].to_vec()))
}

impl VarCore {
    fn params(&self) -> CompressParams {
        CompressParams {
            codec: self.compression.codec,
            clevel: self.compression.clevel,
            filter: self.compression.blosc_filter(),
            typesize: 1,
            blocksize: self.compression.blocksize,
            nthreads: 1,
        }
    }

    /// Chunks holding `nrows` items.
    pub(crate) fn nchunks(&self, nrows: u64) -> u64 {
        nrows.div_ceil(self.chunklen)
    }

    /// Decodes chunk `k`, keeping its first `valid` items.
    pub(crate) fn chunk_items(
        &self,
        k: u64,
        valid: u64,
        scratch: &mut Vec<u8>,
    ) -> Result<Vec<Vec<u8>>> {
        self.store.read_chunk(k, scratch)?;
        let f = k / self.store.superchunksize();
        let path = self.store.file_path(f);
        let j = k % self.store.superchunksize();
        let payload = blosc::decompress(scratch, 1).map_err(|e| Error::chunk(&path, j, e.0))?;
        let mut items = decode_items(&payload).map_err(|e| Error::chunk(&path, j, e))?;
        if (items.len() as u64) < valid {
            return Err(Error::chunk(
                &path,
                j,
                format!(
                    "chunk holds {} items, the column needs {valid}",
                    items.len()
                ),
            ));
        }
        items.truncate(valid as usize);
        Ok(items)
    }

    /// Reads rows `start..end` of a column of `nrows` rows.
    pub(crate) fn read_rows(&self, nrows: u64, start: u64, end: u64) -> Result<Vec<Vec<u8>>> {
        if start >= end {
            return Ok(Vec::new());
        }
        let cl = self.chunklen;
        let parts: Vec<Vec<Vec<u8>>> = (start / cl..end.div_ceil(cl))
            .into_par_iter()
            .map_init(Vec::new, |scratch, k| {
                let valid = (nrows - k * cl).min(cl);
                let mut items = self.chunk_items(k, valid, scratch)?;
                let lo = start.saturating_sub(k * cl) as usize;
                let hi = ((end - k * cl).min(cl)) as usize;
                items.truncate(hi);
                Ok(items.split_off(lo))
            })
            .collect::<Result<_>>()?;
        Ok(parts.into_iter().flatten().collect())
    }

    /// Reads rows `start..end` of a column of `nrows` rows as the items' lengths and their
    /// bytes back to back, per chunk in row order (what Arrow's string and binary arrays are
    /// made of: no allocation per item).
    #[cfg(feature = "arrow")]
    pub(crate) fn read_rows_flat(
        &self,
        nrows: u64,
        start: u64,
        end: u64,
    ) -> Result<Vec<(Vec<u32>, Vec<u8>)>> {
        if start >= end {
            return Ok(Vec::new());
        }
        let cl = self.chunklen;
        (start / cl..end.div_ceil(cl))
            .into_par_iter()
            .map_init(Vec::new, |scratch, k| {
                let valid = (nrows - k * cl).min(cl);
                self.store.read_chunk(k, scratch)?;
                let f = k / self.store.superchunksize();
                let path = self.store.file_path(f);
                let j = k % self.store.superchunksize();
                let payload =
                    blosc::decompress(scratch, 1).map_err(|e| Error::chunk(&path, j, e.0))?;
                let lo = start.saturating_sub(k * cl) as usize;
                let hi = ((end - k * cl).min(valid)) as usize;
                decode_items_flat(&payload, lo, hi).map_err(|e| Error::chunk(&path, j, e))
            })
            .collect()
    }

    /// Reads the rows at `indices` (any order, repeats allowed), decoding each chunk once.
    pub(crate) fn take(&self, nrows: u64, indices: &[u64]) -> Result<Vec<Vec<u8>>> {
        let cl = self.chunklen;
        let mut chunks: Vec<u64> = indices.iter().map(|i| i / cl).collect();
        chunks.sort_unstable();
        chunks.dedup();
        let decoded: Vec<(u64, Vec<Vec<u8>>)> = chunks
            .par_iter()
            .map_init(Vec::new, |scratch, &k| {
                let valid = (nrows - k * cl).min(cl);
                self.chunk_items(k, valid, scratch).map(|v| (k, v))
            })
            .collect::<Result<_>>()?;
        let map: std::collections::HashMap<u64, Vec<Vec<u8>>> = decoded.into_iter().collect();
        indices
            .iter()
            .map(|&i| {
                map.get(&(i / cl))
                    .and_then(|items| items.get((i % cl) as usize))
                    .cloned()
                    .ok_or_else(|| Error::InvalidArgument(format!("row {i} missing")))
            })
            .collect()
    }

    /// Writes `items` at rows `start..start + items.len()` of a column that holds `nrows`
    /// rows (committed in `committed` chunks); rows past `nrows` are appended.
    pub(crate) fn write(
        &self,
        txn: &mut Txn<'_>,
        writes: &mut ChunkWrites<'_>,
        nrows: u64,
        start: u64,
        items: &[Vec<u8>],
    ) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let cl = self.chunklen;
        let end = start + items.len() as u64;
        let committed = self.nchunks(nrows);
        let params = self.params();
        let ks: Vec<u64> = (start / cl..end.div_ceil(cl)).collect();
        let batch = rayon::current_num_threads().max(1) * 4;
        for group in ks.chunks(batch) {
            let encoded: Vec<(u64, Vec<u8>)> = group
                .par_iter()
                .map_init(Vec::new, |scratch, &k| -> Result<(u64, Vec<u8>)> {
                    let lo = k * cl;
                    let valid = nrows.saturating_sub(lo).min(cl);
                    // The old items are needed unless the write replaces all of them.
                    let need_old =
                        k < committed && valid > 0 && !(start <= lo && end >= lo + valid);
                    let mut chunk = if need_old {
                        self.chunk_items(k, valid, scratch)?
                    } else {
                        Vec::new()
                    };
                    let from = start.max(lo);
                    let to = end.min(lo + cl);
                    for r in from..to {
                        let slot = (r - lo) as usize;
                        let item = items[(r - start) as usize].clone();
                        if slot < chunk.len() {
                            chunk[slot] = item;
                        } else {
                            chunk.resize(slot, Vec::new());
                            chunk.push(item);
                        }
                    }
                    let payload = encode_items(&chunk)?;
                    blosc::compress(&params, &payload)
                        .map(|c| (k, c))
                        .map_err(|e| Error::Compress(e.0))
                })
                .collect::<Result<_>>()?;
            for (k, c) in encoded {
                writes.put(txn, k, c, None)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_roundtrip_and_bad_payloads() {
        let items: Vec<&[u8]> = vec![b"", b"a", b"hello world", &[0, 255, 7]];
        let p = encode_items(&items).unwrap();
        assert_eq!(p.len(), 4 + 16 + 15);
        assert_eq!(
            decode_items(&p).unwrap(),
            items.iter().map(|b| b.to_vec()).collect::<Vec<_>>()
        );
        assert!(decode_items(&p[..p.len() - 1]).is_err());
        let mut huge = p.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_items(&huge).is_err());
        let mut long = p.clone();
        long[8..12].copy_from_slice(&1000u32.to_le_bytes());
        assert!(decode_items(&long).is_err());
        assert!(decode_items(&[]).is_err());
        #[cfg(feature = "arrow")]
        flat_items_are_checked_alike(&p, &long, &huge);
    }

    #[cfg(feature = "arrow")]
    fn flat_items_are_checked_alike(p: &[u8], long: &[u8], huge: &[u8]) {
        let (lens, bytes) = decode_items_flat(p, 1, 3).unwrap();
        assert_eq!(lens, vec![1, 11]);
        assert_eq!(bytes, b"ahello world".to_vec());
        assert_eq!(decode_items_flat(p, 0, 4).unwrap().1.len(), 15);
        assert!(decode_items_flat(p, 2, 5).is_err());
        assert!(decode_items_flat(&p[..p.len() - 1], 0, 1).is_err());
        assert!(decode_items_flat(long, 0, 1).is_err());
        assert!(decode_items_flat(huge, 0, 1).is_err());
    }
}
