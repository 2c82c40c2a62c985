//! The block index of a superchunk file: [`block_index`] reads a file's chunks (through its
//! offsets table) into a [`BlockIndex`], the encoding of one Blosc chunk's blocks
//! (`crate::blosc::blocks`, `spec/object-store.md` §3).

use super::reader::Layout;
use crate::blosc::blocks::{BlockIndex, ChunkBlocks};
use crate::blosc::{ChunkHeader, HEADER_LEN};
use crate::storage::StorageFile;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

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
            if apart(off..off + cb.cbytes() as u64) {
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
    use crate::blosc::{
        self, compress, decode_index, encode_index, encoded_len, BlockFault, CompressParams,
    };

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
