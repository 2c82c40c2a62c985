//! `blpk` superchunk files: the bloscpack format version 3 (header, optional metadata
//! section, offsets table with room to append, Blosc chunks each followed by a digest), plus
//! blz's extensions (per-chunk slack and relocated chunks, marked by option bit 3 so that
//! bloscpack refuses such files rather than misreading them).
//!
//! The byte layout is described in `spec/blpk.md`.

mod blocks;
mod checksum;
mod front;
mod header;
mod metadata;
mod pack;
mod reader;
mod seal;
mod writer;

pub use blocks::{block_index, block_index_of_bytes};
pub use checksum::{hex, Checksum, DigestBytes, MAX_DIGEST_LEN};
pub use front::front_ranges;
pub use header::{
    FileHeader, FORMAT_VERSION, HEADER_LEN, MAGIC, OPT_METADATA, OPT_OFFSETS, OPT_SCATTERED,
    OPT_VARLEN,
};
pub use metadata::{MetaCodec, MetadataHeader, MetadataParams};
pub use pack::{compact, pack, unpack, PackOptions, PackSummary, DEFAULT_CHUNK_SIZE};
pub use reader::{ChunkInfo, Layout, SuperchunkReader};
pub use seal::{offsets_digest, OFFSETS_ALGORITHM, OFFSETS_KEY};
pub use writer::{Placement, SuperchunkFile, SuperchunkWriter, Write, WriterOptions};
