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

use super::reader::Layout;
use crate::blosc::{self, ChunkHeader, HEADER_LEN};
use crate::storage::StorageFile;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
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
    pub fn of_chunk(chunk: &[u8]) -> Option<ChunkBlocks> {
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
        if ch.flags & blosc::FLAG_MEMCPYED == 0 {
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
        self.stored = ch.flags & blosc::FLAG_MEMCPYED != 0;
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
    /// `buf` holds is not looked at by the decoder ([`blosc::getitem`]).
    ///
    /// # Errors
    /// [`BlockFault::Crc`] when a block's CRC-32 differs, [`BlockFault::Misfit`] when
    /// `bytes` does not cover the blocks.
    pub fn assemble(
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
pub(super) fn u32s(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
        .collect()
}

/// Whether a chunk's block-start table `starts` can be read by: not empty, strictly
/// ascending, the first block after the table (`16 + 4 × starts.len()`), the last starting
/// inside the chunk's `cbytes` bytes.
pub(super) fn starts_fit(starts: &[u32], cbytes: usize) -> bool {
    let first = HEADER_LEN + 4 * starts.len();
    starts.first().is_some_and(|&s| s as usize >= first)
        && starts.windows(2).all(|w| w[0] < w[1])
        && starts.last().is_some_and(|&s| (s as usize) < cbytes)
}

/// The bytes (from the chunk's first) of blocks `b0..=b1` of a chunk of `cbytes` bytes
/// whose block starts are `starts` (as [`starts_fit`] accepts them): from block `b0`'s
/// start to the next block's after `b1`, or the chunk's end. `None` past the last block.
pub(super) fn blocks_run(
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
pub enum BlockFault {
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

/// The block index of the superchunk file `file` (`None` when it does not open as one):
/// chunks whose bytes were all written (`written` holds them; `None`: the whole file is
/// new) are read and indexed; chunks none of whose bytes were written keep their entry in
/// `old`, unread; the others (and chunks no index covers) get none. Nothing outside
/// `written` is read but the file's front (header, metadata, offsets table).
pub fn block_index(
    file: &dyn StorageFile,
    written: Option<&[Range<u64>]>,
    old: Option<&BlockIndex>,
) -> Option<BlockIndex> {
    let layout = Layout::read(file).ok()?;
    let inside = |r: Range<u64>| {
        written.is_none_or(|w| w.iter().any(|x| x.start <= r.start && r.end <= x.end))
    };
    let apart = |r: Range<u64>| {
        written.is_some_and(|w| w.iter().all(|x| x.end <= r.start || r.end <= x.start))
    };
    let mut offsets = layout.offsets.clone();
    offsets.sort_unstable();
    offsets.dedup();
    let mut index = BlockIndex::new();
    let mut buf = Vec::new();
    for off in offsets {
        if inside(off..off + HEADER_LEN as u64) {
            let mut head = [0u8; HEADER_LEN];
            if file.read_at(off, &mut head).is_err() {
                continue;
            }
            let Ok(ch) = ChunkHeader::parse(&head) else {
                continue;
            };
            let cbytes = u64::from(ch.cbytes);
            if !inside(off..off + cbytes) || off.saturating_add(cbytes) > layout.file_len {
                continue;
            }
            buf.resize(cbytes as usize, 0);
            if file.read_at(off, &mut buf).is_ok() {
                if let Some(cb) = ChunkBlocks::of_chunk(&buf) {
                    index.insert(off, Arc::new(cb));
                }
            }
        } else if let Some(cb) = old.and_then(|o| o.get(&off)) {
            if apart(off..off + cb.cbytes as u64) {
                index.insert(off, Arc::clone(cb));
            }
        }
    }
    Some(index)
}

/// [`block_index`] of a whole superchunk file held in memory.
pub fn block_index_of_bytes(bytes: &[u8], path: &Path) -> Option<BlockIndex> {
    block_index(&InMemory { bytes, path }, None, None)
}

/// A file held in memory, read only.
struct InMemory<'a> {
    bytes: &'a [u8],
    path: &'a Path,
}

impl StorageFile for InMemory<'_> {
    fn len(&self) -> crate::error::Result<u64> {
        Ok(self.bytes.len() as u64)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> crate::error::Result<()> {
        let got = usize::try_from(offset)
            .ok()
            .and_then(|a| self.bytes.get(a..a.checked_add(buf.len())?));
        match got {
            Some(b) => {
                buf.copy_from_slice(b);
                Ok(())
            }
            None => Err(crate::error::Error::io(
                "read",
                self.path,
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            )),
        }
    }
    fn write_at(&self, _offset: u64, _data: &[u8]) -> crate::error::Result<()> {
        Err(crate::error::Error::io(
            "write",
            self.path,
            std::io::Error::new(std::io::ErrorKind::PermissionDenied, "read only"),
        ))
    }
    fn set_len(&self, _len: u64) -> crate::error::Result<()> {
        self.write_at(0, &[])
    }
    fn sync(&self) -> crate::error::Result<()> {
        Ok(())
    }
    fn path(&self) -> &Path {
        self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blosc::{compress, CompressParams};

    fn chunk() -> Vec<u8> {
        // A random walk: noisy data, which gets blocks of 128 KiB.
        let mut x = 0f64;
        let mut seed = 7u64;
        let data: Vec<u8> = (0..1_000_000)
            .flat_map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                x += (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
                x.to_le_bytes()
            })
            .collect();
        compress(&CompressParams::default(), &data).unwrap()
    }

    #[test]
    fn a_short_read_decodes_from_its_blocks_alone() {
        let c = chunk();
        let cb = ChunkBlocks::of_chunk(&c).unwrap();
        let idx: BlockIndex = [(4096u64, Arc::new(cb))].into_iter().collect();
        let back = decode_index(&encode_index(&idx)).unwrap();
        assert_eq!(back, idx);
        let cb = &back[&4096];
        let (start, len) = (500_003 * 8, 80);
        let span = cb.span(start, len).unwrap();
        assert!(span.len() < c.len() / 8);
        let mut buf = Vec::new();
        cb.assemble(span.start, &c[span.clone()], start, len, &mut buf)
            .unwrap();
        let mut got = vec![0u8; len];
        blosc::getitem(&buf, start, &mut got).unwrap();
        let mut want = vec![0u8; len];
        blosc::getitem(&c, start, &mut want).unwrap();
        assert_eq!(got, want);
        // One flipped bit in a block read is caught.
        let mut bent = c[span.clone()].to_vec();
        let mid = bent.len() / 2;
        bent[mid] ^= 4;
        let err = cb
            .assemble(span.start, &bent, start, len, &mut buf)
            .unwrap_err();
        assert!(matches!(err, BlockFault::Crc { .. }), "{err:?}");
        let short = cb.assemble(
            span.start + 1,
            &c[span.start + 1..span.end],
            start,
            len,
            &mut buf,
        );
        assert!(matches!(short, Err(BlockFault::Misfit(_))));
    }

    /// Incompressible bytes (8 MB of them), which Blosc stores as is.
    fn stored_chunk() -> (Vec<u8>, Vec<u8>) {
        let mut seed = 3u64;
        let data: Vec<u8> = (0..1_000_000)
            .flat_map(|_| {
                // splitmix64: every byte noise.
                seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = seed;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                (z ^ (z >> 31)).to_le_bytes()
            })
            .collect();
        let c = compress(&CompressParams::default(), &data).unwrap();
        (data, c)
    }

    /// A chunk Blosc stored as is is indexed by pieces of its block size: a short read takes
    /// just the pieces holding its bytes, each checked by its CRC-32.
    #[test]
    fn a_chunk_stored_as_is_is_read_by_pieces() {
        let (data, c) = stored_chunk();
        let h = ChunkHeader::parse(&c).unwrap();
        assert_ne!(h.flags & blosc::FLAG_MEMCPYED, 0, "stored as is");
        let bs = h.blocksize as usize;
        let idx: BlockIndex = [(64u64, Arc::new(ChunkBlocks::of_chunk(&c).unwrap()))]
            .into_iter()
            .collect();
        let enc = encode_index(&idx);
        assert_eq!(encoded_len(&idx), enc.len() as u64);
        let back = decode_index(&enc).unwrap();
        assert_eq!(back, idx);
        let cb = &back[&64];
        let mut buf = Vec::new();
        for (start, len) in [(0, 8), (500_003 * 8, 80), (bs - 8, 16), (8_000_000 - 8, 8)] {
            let span = cb.span(start, len).unwrap();
            assert!(span.len() <= 2 * bs, "{start}: {span:?}");
            assert!(span.start <= HEADER_LEN + start, "{start}: {span:?}");
            assert!(HEADER_LEN + start + len <= span.end, "{start}: {span:?}");
            cb.assemble(span.start, &c[span.clone()], start, len, &mut buf)
                .unwrap();
            let mut got = vec![0u8; len];
            blosc::getitem(&buf, start, &mut got).unwrap();
            assert_eq!(got, &data[start..start + len], "{start}");
            let mut bent = c[span.clone()].to_vec();
            bent[HEADER_LEN + start - span.start] ^= 1;
            let err = cb
                .assemble(span.start, &bent, start, len, &mut buf)
                .unwrap_err();
            assert!(matches!(err, BlockFault::Crc { .. }), "{start}: {err:?}");
        }
        // A record whose pieces do not start at the block size is refused.
        let mut bent = enc.clone();
        let second = 8 + HEADER_LEN + 4 + 4;
        bent[second..second + 4]
            .copy_from_slice(&(HEADER_LEN as u32 + bs as u32 + 1).to_le_bytes());
        assert!(decode_index(&bent).unwrap_err().contains("block size"));
    }

    #[test]
    fn damaged_indexes_are_refused() {
        let c = chunk();
        let idx: BlockIndex = [(0u64, Arc::new(ChunkBlocks::of_chunk(&c).unwrap()))]
            .into_iter()
            .collect();
        let enc = encode_index(&idx);
        assert_eq!(encoded_len(&idx), enc.len() as u64);
        assert!(decode_index(&enc[..enc.len() - 1]).is_err());
        let mut huge = enc.clone();
        huge[8 + HEADER_LEN..8 + HEADER_LEN + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_index(&huge).is_err());
        let mut bent = enc.clone();
        // Block 1 starting before block 0.
        bent[8 + HEADER_LEN + 8..8 + HEADER_LEN + 12].copy_from_slice(&20u32.to_le_bytes());
        assert!(decode_index(&bent).is_err());
        let twice = [enc.clone(), enc].concat();
        assert!(decode_index(&twice).unwrap_err().contains("increasing"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            cases: 64,
            rng_seed: proptest::test_runner::RngSeed::Fixed(24),
            failure_persistence: None,
            ..Default::default()
        })]

        /// A chunk (compressed, or stored as is) damaged anywhere (header, block starts,
        /// blocks), indexed as it is (so
        /// that its CRC-32s match the damage) and read by block, decodes or fails cleanly:
        /// never a crash, an out-of-bounds access or a huge allocation. So does a short
        /// read through any record that decodes from a damaged encoding.
        #[test]
        fn damaged_chunks_and_indexes_fail_cleanly(
            flips in proptest::collection::vec(
                (proptest::prop_oneof![0usize..300, 0usize..1 << 23], 1u8..=255),
                1..6,
            ),
            at in 0usize..1_000_000,
            n in 1usize..300,
            stored in proptest::bool::ANY,
        ) {
            let fresh = || if stored { stored_chunk().1 } else { chunk() };
            let mut c = fresh();
            for &(i, x) in &flips {
                let i = i % c.len();
                c[i] ^= x;
            }
            let (start, len) = (at.min(999_999) * 8, n.min(1_000_000 - at.min(999_999)) * 8);
            let mut buf = Vec::new();
            let mut got = vec![0u8; len];
            if let Some(cb) = ChunkBlocks::of_chunk(&c) {
                if let Some(span) = cb.span(start, len) {
                    if cb.assemble(span.start, &c[span.clone()], start, len, &mut buf).is_ok() {
                        let _ = blosc::getitem(&buf, start, &mut got);
                    }
                }
            }
            let good = ChunkBlocks::of_chunk(&fresh()).unwrap();
            let idx: BlockIndex = [(0u64, Arc::new(good))].into_iter().collect();
            let mut enc = encode_index(&idx);
            for &(i, x) in &flips {
                let i = i % enc.len();
                enc[i] ^= x;
            }
            if let Ok(back) = decode_index(&enc) {
                for cb in back.values() {
                    if let Some(span) = cb.span(start, len) {
                        let bytes = c.get(span.clone()).unwrap_or(&[]);
                        if cb.assemble(span.start, bytes, start, len, &mut buf).is_ok() {
                            let _ = blosc::getitem(&buf, start, &mut got);
                        }
                    }
                }
            }
        }
    }
}
