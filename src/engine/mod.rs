//! The chunk engine beneath every dataset kind (N-d arrays, table columns, layer columns):
//! which superchunk file holds chunk k and the verified readers over them ([`ChunkStore`]),
//! one operation's writes to one store inside a transaction ([`ChunkWrites`]), encoding and
//! decoding chunks in parallel ([`ArrayCore`]), the layout of a store (`meta/storage`), the
//! writer lock and the writer that writing handles of one process share (`shared`), and
//! opening a dataset root ([`settle`], [`open_root`]).
//!
//! Nothing here knows what a table or a layer is: they, and [`Dataset`](crate::Dataset),
//! build on it.

mod block_cache;
mod chunks;
mod core;
mod elements;
mod gather;
mod layout;
mod lock;
mod root;
pub(crate) mod select;
mod shared;
pub(crate) mod staging;

pub(crate) use self::block_cache::DEFAULT_BYTES as DEFAULT_BLOCK_CACHE_BYTES;
pub use self::chunks::in_this_process;
pub(crate) use self::chunks::{identity_doc, identity_params, superchunk_name};
pub(crate) use self::chunks::{on_io_threads, ChunkStore, ChunkWrites, Fetched};
pub(crate) use self::core::{ArrayCore, Source};
pub(crate) use self::elements::{as_bytes, as_bytes_mut, elements_to_bytes};
pub(crate) use self::gather::GatherPlan;
pub(crate) use self::layout::{
    build_storage_meta, file_bytes, make_core, validate_storage_meta, verify_files, verify_store,
};
pub(crate) use self::shared::{new_handle_id, SharedWriter};
pub(crate) mod limits {
    pub(crate) use super::layout::{check_fill_chunks, chunk_count, shape_bytes, GROW_STEP_CHUNKS};
}
pub use self::layout::{
    check_shape, CreateOptions, DEFAULT_CHUNK_BYTES, DEFAULT_SUPERCHUNK_BYTES, MAX_ARRAY_BYTES,
    MAX_FILL_CHUNKS, MAX_TABLE_FILL_ROWS, MIN_DEFAULT_CHUNK_BYTES,
};
pub use self::lock::Mode;
pub(crate) use self::lock::WriterLock;
pub(crate) use self::root::STAGED_DIR;
pub(crate) use self::root::{commit_point, Root};
pub(crate) use self::shared::Turn;
