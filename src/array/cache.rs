//! The bound of a dataset's cache of decoded Blosc blocks (`engine::block_cache`): short
//! reads near each other are served from blocks decoded once.

use super::Dataset;

impl Dataset {
    /// Bytes of decoded Blosc blocks this handle keeps for short reads near each other
    /// (0: none). A block is kept when a short read lands in a block one of the last two
    /// short reads touched; reads at random places take their items straight from the
    /// compressed block instead and keep nothing. 2 MiB unless set.
    pub fn block_cache_bytes(&self) -> usize {
        self.core.store.block_cache_bytes()
    }

    /// Sets the bound of [`block_cache_bytes`](Self::block_cache_bytes); 0 turns the cache
    /// off and empties it. The cache is this handle's: emptied by each of its commits,
    /// started afresh (with this bound) when [`refresh`](Self::refresh) shows a new commit,
    /// so no read returns a block from before a change.
    pub fn set_block_cache_bytes(&self, max_bytes: usize) {
        self.core.store.set_block_cache_bytes(max_bytes);
    }
}
