//! blz: a chunked, compressed, persistent array store.
