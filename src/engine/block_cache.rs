//! A small cache of decoded Blosc blocks, one per chunk store, for short reads near each
//! other (a loop of `a[i:i + 100]` stepping through an array).
//!
//! A short read takes its items from the block that holds them without decoding the block
//! (`blosc::getitem`, `spec/blosc.md`), which is the cheapest answer to one read at a random
//! place but is paid again by every read of the same block. So a block is decoded whole
//! and kept only when a short read lands in one of the two blocks the store's last short
//! reads touched: a second read nearby. Random reads over an array much larger than the
//! cache almost never do, and pay nothing for it.
//!
//! The cache belongs to one handle's [`ChunkStore`](super::chunks::ChunkStore): it is
//! emptied by `ChunkStore::invalidate` (after every commit this handle makes, and after a
//! compaction), and dropped with the store when a read handle opens the dataset again on
//! `refresh`. A read handle's reads are checked against the commit they began on
//! (`Root::unless_changed`), so a block cached before another process's commit is never
//! returned as part of a later one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Bytes an array's cache holds unless set otherwise: two of c-blosc's largest blocks.
pub(crate) const DEFAULT_BYTES: usize = 2 << 20;
/// Chunks whose block size is remembered, at most (beyond, the list starts again).
const MAX_GEOMETRIES: usize = 4096;

/// A block: (chunk, block index within it).
type Key = (u64, usize);

/// Decoded blocks of one chunk store, bounded in bytes.
#[derive(Debug)]
pub(crate) struct BlockCache {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    max_bytes: usize,
    used: usize,
    tick: u64,
    /// Decoded blocks and when each was last used.
    blocks: HashMap<Key, (Arc<[u8]>, u64)>,
    /// Chunk -> (block size, uncompressed size), from its Blosc header.
    geometry: HashMap<u64, (usize, usize)>,
    /// The blocks the last two short reads touched that were not cached.
    recent: [Option<Key>; 2],
}

impl BlockCache {
    /// An empty cache of at most `max_bytes` decoded bytes (0: off).
    pub(crate) fn new(max_bytes: usize) -> BlockCache {
        BlockCache {
            inner: Mutex::new(Inner {
                max_bytes,
                used: 0,
                tick: 0,
                blocks: HashMap::new(),
                geometry: HashMap::new(),
                recent: [None; 2],
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The state is a cache: after a panic elsewhere, whatever it holds is still sound.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The bound in bytes (0: the cache is off).
    pub(crate) fn max_bytes(&self) -> usize {
        self.lock().max_bytes
    }

    /// Sets the bound, dropping blocks until it holds.
    pub(crate) fn set_max_bytes(&self, max_bytes: usize) {
        let mut g = self.lock();
        g.max_bytes = max_bytes;
        g.shrink_to(max_bytes);
        if max_bytes == 0 {
            g.geometry.clear();
            g.recent = [None; 2];
        }
    }

    /// Forgets everything (the chunks may have changed).
    pub(crate) fn clear(&self) {
        let mut g = self.lock();
        g.blocks.clear();
        g.used = 0;
        g.geometry.clear();
        g.recent = [None; 2];
    }

    /// Chunk `k`'s (block size, uncompressed size), when known.
    pub(crate) fn geometry(&self, k: u64) -> Option<(usize, usize)> {
        self.lock().geometry.get(&k).copied()
    }

    /// Records chunk `k`'s (block size, uncompressed size).
    pub(crate) fn set_geometry(&self, k: u64, g: (usize, usize)) {
        let mut inner = self.lock();
        if inner.geometry.len() >= MAX_GEOMETRIES {
            inner.geometry.clear();
        }
        inner.geometry.insert(k, g);
    }

    /// Copies bytes `from .. from + dst.len()` of block `j` of chunk `k` to `dst` when the
    /// block is cached (and holds them).
    pub(crate) fn get(&self, k: u64, j: usize, from: usize, dst: &mut [u8]) -> bool {
        let mut g = self.lock();
        g.tick += 1;
        let tick = g.tick;
        let Some((block, used)) = g.blocks.get_mut(&(k, j)) else {
            return false;
        };
        let Some(src) = block.get(from..from + dst.len()) else {
            return false;
        };
        dst.copy_from_slice(src);
        *used = tick;
        true
    }

    /// Whether block `j` of chunk `k` is cached.
    pub(crate) fn holds(&self, k: u64, j: usize) -> bool {
        self.lock().blocks.contains_key(&(k, j))
    }

    /// Notes a short read of block `j` of chunk `k` that missed the cache; whether the
    /// block should be decoded whole and kept (one of the last two short reads touched it).
    pub(crate) fn touch(&self, k: u64, j: usize) -> bool {
        let mut g = self.lock();
        if g.max_bytes == 0 {
            return false;
        }
        let key = Some((k, j));
        if g.recent.contains(&key) {
            return true;
        }
        g.recent = [key, g.recent[0]];
        false
    }

    /// Keeps `block` as block `j` of chunk `k`, dropping the least recently used blocks to
    /// stay within the bound (a block larger than the bound is not kept).
    pub(crate) fn put(&self, k: u64, j: usize, block: Vec<u8>) {
        let mut g = self.lock();
        if block.len() > g.max_bytes {
            return;
        }
        let keep = g.max_bytes - block.len();
        g.shrink_to(keep);
        g.tick += 1;
        let tick = g.tick;
        g.used += block.len();
        if let Some((old, _)) = g.blocks.insert((k, j), (Arc::from(block), tick)) {
            g.used -= old.len();
        }
        g.recent = [None; 2];
    }
}

impl Inner {
    /// Drops least recently used blocks until at most `bytes` are held.
    fn shrink_to(&mut self, bytes: usize) {
        while self.used > bytes {
            let Some(oldest) = self
                .blocks
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(key, _)| *key)
            else {
                self.used = 0;
                return;
            };
            if let Some((b, _)) = self.blocks.remove(&oldest) {
                self.used -= b.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_block_on_the_second_nearby_read_and_within_its_bound() {
        let c = BlockCache::new(3000);
        let mut out = [0u8; 4];
        assert!(!c.get(1, 0, 0, &mut out));
        assert!(!c.touch(1, 0), "a first read decodes nothing whole");
        assert!(!c.touch(2, 5));
        assert!(c.touch(1, 0), "one of the last two blocks: keep it");
        c.put(1, 0, vec![7u8; 1000]);
        assert!(c.get(1, 0, 996, &mut out) && out == [7; 4]);
        assert!(!c.get(1, 0, 997, &mut out), "past the block");
        c.put(1, 1, vec![8u8; 1000]);
        c.put(1, 2, vec![9u8; 1000]);
        assert!(c.get(1, 0, 0, &mut out)); // block 0 now the most recently used
        c.put(1, 3, vec![10u8; 1000]);
        assert!(!c.get(1, 1, 0, &mut out), "the least recently used went");
        assert!(c.get(1, 0, 0, &mut out) && c.get(1, 2, 0, &mut out) && c.get(1, 3, 0, &mut out));
        c.put(2, 0, vec![0u8; 3001]);
        assert!(!c.get(2, 0, 0, &mut out), "larger than the bound");
        c.set_max_bytes(1000);
        assert_eq!(c.lock().used, 1000);
        c.set_geometry(4, (128, 1024));
        c.clear();
        assert!(!c.get(1, 3, 0, &mut out) && c.geometry(4).is_none());
        c.set_max_bytes(0);
        assert!(!c.touch(1, 0) && !c.touch(1, 0), "off");
    }
}
