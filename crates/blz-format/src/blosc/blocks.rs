//! Block indexes: for chunks of a superchunk file, what a reader needs to fetch and check
//! only the Blosc blocks a short read decodes, without first reading the chunk: its Blosc
//! header, where each block starts, and a CRC-32 of each block's compressed bytes. A storage
//! backend where each read is a request keeps a file's index where opening the dataset
//! finds it (the object store: in its state object, `spec/object-store.md` §3), so that a
//! short read of a chunk is one request of just those blocks, checked as a whole chunk is
//! checked by its digest.
//!
//! The encoding is a run of records, one per indexed chunk, in increasing offset order
//! (all integers little-endian): the chunk's offset in the file (u64), its 16-byte Blosc
//! header, its number of blocks `n` (u32), then `n` block starts (u32, from the chunk's
//! start, as in the chunk's own block-start table) and `n` CRC-32s (u32, ISO-HDLC as zlib
//! computes it) of the blocks' bytes: block `i` runs from its start to the next block's
//! start, the last to the chunk's compressed size. A chunk Blosc stored as is (memcpyed:
//! its bytes follow the header) has no block-start table; its record cuts those bytes into
//! pieces of the header's block size, piece `i` starting at `16 + i × blocksize`, and
//! lists those starts and the pieces' CRC-32s.

use super::header::{ChunkHeader, FLAG_MEMCPYED, HEADER_LEN};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

/// The index of one chunk: its header and its blocks' starts and CRC-32s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkBlocks {
    header: [u8; HEADER_LEN],
    nbytes: usize,
    blocksize: usize,
    cbytes: usize,
    /// Stored as is (memcpyed): the starts are of pieces of its bytes, not blocks.
    stored: bool,
    starts: Vec<u32>,
    crcs: Vec<u32>,
}

impl ChunkBlocks {
    /// The index of the chunk whose compressed bytes are `chunk` (exactly its Blosc
    /// `cbytes`); `None` for an empty chunk, which has no blocks, and for one whose header
    /// is damaged or whose block starts are not ascending inside it.
    pub(crate) fn of_chunk(chunk: &[u8]) -> Option<ChunkBlocks> {
        let header: [u8; HEADER_LEN] = chunk.get(..HEADER_LEN)?.try_into().ok()?;
        let n = Self::block_count(&header, chunk.len())?;
        let starts = match Self::stored_pieces(&header, n) {
            Some(pieces) => pieces,
            None => u32s(chunk.get(HEADER_LEN..HEADER_LEN + 4 * n)?),
        };
        let mut cb = ChunkBlocks {
            header,
            nbytes: 0,
            blocksize: 0,
            cbytes: chunk.len(),
            stored: false,
            starts,
            crcs: Vec::new(),
        };
        cb.check().ok()?;
        cb.crcs = (0..n)
            .map(|i| {
                let (a, b) = cb.block(i);
                crc32fast::hash(&chunk[a..b])
            })
            .collect();
        Some(cb)
    }

    /// The number of blocks of a chunk with this header whose compressed size is `cbytes`
    /// (of pieces of the block size, for a chunk stored as is); `None` when the header is
    /// damaged or does not match, or the chunk is empty.
    fn block_count(header: &[u8; HEADER_LEN], cbytes: usize) -> Option<usize> {
        let ch = ChunkHeader::parse(header).ok()?;
        ch.check_against(cbytes).ok()?;
        let bs = ch.blocksize as usize;
        let n = (ch.nbytes as usize).div_ceil(bs.max(1));
        (ch.cbytes as usize == cbytes && bs > 0 && n > 0).then_some(n)
    }

    /// For a chunk stored as is (memcpyed) with this header, of `n` pieces: where its
    /// pieces start (`16 + i × blocksize`); `None` for a compressed chunk.
    fn stored_pieces(header: &[u8; HEADER_LEN], n: usize) -> Option<Vec<u32>> {
        let ch = ChunkHeader::parse(header).ok()?;
        if ch.flags & FLAG_MEMCPYED == 0 {
            return None;
        }
        let bs = u64::from(ch.blocksize);
        (0..n as u64)
            .map(|i| u32::try_from(HEADER_LEN as u64 + i * bs).ok())
            .collect()
    }

    /// Checks the starts against the header and fills the sizes.
    fn check(&mut self) -> Result<(), String> {
        let ch = ChunkHeader::parse(&self.header).map_err(|e| e.0)?;
        let n = Self::block_count(&self.header, ch.cbytes as usize)
            .ok_or("a header of a chunk no block index covers")?;
        if self.starts.len() != n {
            return Err(format!("{} block starts for {n} blocks", self.starts.len()));
        }
        match Self::stored_pieces(&self.header, n) {
            Some(pieces) if pieces != self.starts => {
                return Err("piece starts of a chunk stored as is not at its block size".into())
            }
            Some(_) => {}
            None if !starts_fit(&self.starts, ch.cbytes as usize) => {
                return Err("block starts not ascending inside the chunk".into())
            }
            None => {}
        }
        self.nbytes = ch.nbytes as usize;
        self.blocksize = ch.blocksize as usize;
        self.cbytes = ch.cbytes as usize;
        self.stored = ch.flags & FLAG_MEMCPYED != 0;
        Ok(())
    }

    /// Block `i`'s compressed bytes within the chunk.
    fn block(&self, i: usize) -> (usize, usize) {
        let r = blocks_run(&self.starts, self.cbytes, i, i).unwrap_or(0..0);
        (r.start, r.end)
    }

    /// The chunk's compressed size (its Blosc `cbytes`).
    pub fn cbytes(&self) -> usize {
        self.cbytes
    }

    /// The chunk's Blosc header.
    pub fn header(&self) -> &[u8; HEADER_LEN] {
        &self.header
    }

    /// The chunk's bytes (from its start) that hold uncompressed bytes
    /// `byte_start..byte_start + len`: the blocks holding them, one run. `None` when the
    /// bytes are not inside the chunk or `len` is 0.
    pub fn span(&self, byte_start: usize, len: usize) -> Option<std::ops::Range<usize>> {
        let end = byte_start.checked_add(len)?;
        if len == 0 || end > self.nbytes || self.starts.is_empty() {
            return None;
        }
        let (b0, b1) = (byte_start / self.blocksize, (end - 1) / self.blocksize);
        blocks_run(&self.starts, self.cbytes, b0, b1)
    }

    /// Lays out in `buf` (resized to the chunk's compressed size) the chunk as far as a
    /// short read of uncompressed bytes `byte_start..byte_start + len` needs it: header,
    /// block starts, and the blocks `bytes` holds (the chunk's bytes from `from`, at least
    /// the [`span`](Self::span) of the read), each checked against its CRC-32. What else
    /// `buf` holds is not looked at by the decoder ([`getitem`](super::getitem)).
    ///
    /// # Errors
    /// [`BlockFault::Crc`] when a block's CRC-32 differs, [`BlockFault::Misfit`] when
    /// `bytes` does not cover the blocks.
    pub(crate) fn assemble(
        &self,
        from: usize,
        bytes: &[u8],
        byte_start: usize,
        len: usize,
        buf: &mut Vec<u8>,
    ) -> Result<(), BlockFault> {
        let span = self.span(byte_start, len).ok_or_else(|| {
            BlockFault::Misfit(format!("bytes {byte_start}+{len} outside the chunk"))
        })?;
        let to = from.saturating_add(bytes.len());
        if span.start < from || span.end > to {
            return Err(BlockFault::Misfit(format!(
                "blocks at {}..{} not inside the bytes read ({from}..{to})",
                span.start, span.end
            )));
        }
        if buf.len() < self.cbytes {
            buf.resize(self.cbytes, 0);
        }
        buf.truncate(self.cbytes);
        buf[..HEADER_LEN].copy_from_slice(&self.header);
        // A compressed chunk's block-start table (a chunk stored as is has none: its
        // bytes follow the header).
        if !self.stored {
            for (i, s) in self.starts.iter().enumerate() {
                let at = HEADER_LEN + 4 * i;
                buf[at..at + 4].copy_from_slice(&s.to_le_bytes());
            }
        }
        let (b0, b1) = (
            byte_start / self.blocksize,
            (byte_start + len - 1) / self.blocksize,
        );
        for i in b0..=b1 {
            let (a, b) = self.block(i);
            let got = crc32fast::hash(&bytes[a - from..b - from]);
            if got != self.crcs[i] {
                return Err(BlockFault::Crc {
                    expected: self.crcs[i],
                    got,
                });
            }
        }
        buf[span.clone()].copy_from_slice(&bytes[span.start - from..span.end - from]);
        Ok(())
    }
}

/// Little-endian `u32`s, as a chunk's block-start table holds them (a last partial one left
/// out).
pub(crate) fn u32s(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
        .collect()
}

/// Whether a chunk's block-start table `starts` can be read by: not empty, strictly
/// ascending, the first block after the table (`16 + 4 × starts.len()`), the last starting
/// inside the chunk's `cbytes` bytes.
pub(crate) fn starts_fit(starts: &[u32], cbytes: usize) -> bool {
    let first = HEADER_LEN + 4 * starts.len();
    starts.first().is_some_and(|&s| s as usize >= first)
        && starts.windows(2).all(|w| w[0] < w[1])
        && starts.last().is_some_and(|&s| (s as usize) < cbytes)
}

/// The bytes (from the chunk's first) of blocks `b0..=b1` of a chunk of `cbytes` bytes
/// whose block starts are `starts` (as [`starts_fit`] accepts them): from block `b0`'s
/// start to the next block's after `b1`, or the chunk's end. `None` past the last block.
pub(crate) fn blocks_run(
    starts: &[u32],
    cbytes: usize,
    b0: usize,
    b1: usize,
) -> Option<Range<usize>> {
    let from = *starts.get(b0)? as usize;
    let to = starts.get(b1 + 1).map_or(cbytes, |&s| s as usize);
    (b1 < starts.len()).then_some(from..to)
}

/// Why [`ChunkBlocks::assemble`] refused the bytes it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BlockFault {
    /// A block's bytes do not match its CRC-32 in the index.
    Crc {
        /// The CRC-32 the index holds.
        expected: u32,
        /// The CRC-32 of the bytes read.
        got: u32,
    },
    /// The bytes do not hold the blocks the read needs.
    Misfit(String),
}

/// The block index of a file: by chunk offset in the file.
pub type BlockIndex = BTreeMap<u64, Arc<ChunkBlocks>>;

/// The encoding of `index` (module docs).
pub fn encode_index(index: &BlockIndex) -> Vec<u8> {
    let mut out = Vec::new();
    for (off, cb) in index {
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&cb.header);
        out.extend_from_slice(&(cb.starts.len() as u32).to_le_bytes());
        for s in &cb.starts {
            out.extend_from_slice(&s.to_le_bytes());
        }
        for c in &cb.crcs {
            out.extend_from_slice(&c.to_le_bytes());
        }
    }
    out
}

/// The length of [`encode_index`]'s encoding of `index`, without making it: each record is
/// its offset, header and count, then a start and a CRC-32 per block.
pub fn encoded_len(index: &BlockIndex) -> u64 {
    index
        .values()
        .map(|cb| (8 + HEADER_LEN + 4 + 8 * cb.starts.len()) as u64)
        .sum()
}

/// [`encode_index`], compressed with zlib (RFC 1950): how a block index is stored.
pub fn compress_index(index: &BlockIndex) -> Vec<u8> {
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec does not fail.
    let _ = z.write_all(&encode_index(index));
    z.finish().unwrap_or_default()
}

/// Decodes an encoded index, checking every record (offsets increasing, each chunk's
/// header one the index covers, its starts ascending inside it).
///
/// # Errors
/// What is wrong, naming the record.
pub fn decode_index(mut bytes: &[u8]) -> Result<BlockIndex, String> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (b.len() >= n).then(|| b.split_at(n))?;
        *b = rest;
        Some(head)
    }
    let mut index = BlockIndex::new();
    let mut last: Option<u64> = None;
    let mut rec = 0usize;
    while !bytes.is_empty() {
        let bad = |why: &str| format!("block index record {rec}: {why}");
        let fixed = take(&mut bytes, 8 + HEADER_LEN + 4).ok_or_else(|| bad("cut short"))?;
        let off = u64::from_le_bytes(fixed[..8].try_into().unwrap_or_default());
        let header: [u8; HEADER_LEN] = fixed[8..8 + HEADER_LEN]
            .try_into()
            .map_err(|_| bad("cut short"))?;
        let n = u32::from_le_bytes(fixed[8 + HEADER_LEN..].try_into().unwrap_or_default());
        // The count is checked against what is left before it sizes anything.
        let table = (n as usize)
            .checked_mul(8)
            .and_then(|len| take(&mut bytes, len))
            .ok_or_else(|| bad("cut short"))?;
        if last.is_some_and(|l| off <= l) {
            return Err(bad("offsets not increasing"));
        }
        let (starts, crcs) = table.split_at(4 * n as usize);
        let mut cb = ChunkBlocks {
            header,
            nbytes: 0,
            blocksize: 0,
            cbytes: 0,
            stored: false,
            starts: u32s(starts),
            crcs: u32s(crcs),
        };
        cb.check().map_err(|e| bad(&e))?;
        index.insert(off, Arc::new(cb));
        last = Some(off);
        rec += 1;
    }
    Ok(index)
}
