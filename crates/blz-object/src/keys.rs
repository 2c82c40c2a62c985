//! The names and bounds of a dataset's objects: the state object's key, format and versions, the
//! size bounds a state and its files keep, one object holding part of a file ([`ExtentObject`]),
//! and which keys and names are plain.

use serde::Deserialize;
use serde::Serialize;
/// The `format` value of a state object.
pub const STATE_FORMAT: &str = "blz-object-state";

/// The state object's newest layout version, which this build reads and writes when the
/// state names manifests ([`State::manifests`](crate::State::manifests)); a state without them is
/// written as
/// [`STATE_VERSION_EXTENTS`] when a file is held in extents, else as
/// [`STATE_VERSION_WHOLE`], so that earlier builds read it.
pub const STATE_VERSION: u32 = 3;

/// The state object's layout version that holds files in extents
/// ([`StateFile::Extents`](crate::StateFile::Extents)).
pub const STATE_VERSION_EXTENTS: u32 = 2;

/// The state object's first layout version: every file whole in one object, or inline.
pub const STATE_VERSION_WHOLE: u32 = 1;

/// Most extents a file's entry lists: a commit that would list more rewrites the file whole
/// as one object (`spec/object-store.md` §4).
pub const MAX_EXTENTS: usize = 16;

/// Where the state object lives, relative to the dataset's prefix.
pub const STATE_KEY: &str = "meta/state";

/// The first bytes of an object read (and kept) on its first read: a superchunk's header,
/// metadata and offsets table come with one request.
pub(crate) const HEAD_BLOCK: u64 = 64 << 10;

/// Meta documents up to this size are kept inline in the state object.
pub(crate) const INLINE_MAX: usize = 16 << 10;

/// Uploads (and deletions) in flight at once.
pub(crate) const PARALLEL: usize = 16;

/// The most bytes, in MiB, that this process's uploads in flight hold in memory at once (an
/// upload holds its object's bytes, up to all of this for a larger one).
pub(crate) const UPLOAD_BUDGET_MIB: u32 = 256;

/// The superchunk file size a new dataset on an object store aims for when its creator
/// names none ([`Storage::file_bytes`](blz_format::storage::Storage::file_bytes)): 16 MiB, the size
/// of part an S3 client is advised to
/// move per request, against 64 MiB on a filesystem. One 8 MB chunk of a 1e7-element
/// float64 array then goes up and comes down with its neighbour, five objects in flight
/// where 64 MiB files gave two.
pub const OBJECT_FILE_BYTES: u64 = 16 << 20;

/// Largest state object blz reads.
pub(crate) const MAX_STATE: u64 = 64 << 20;

/// Largest front matter of one file kept in the state object ([`Front`](crate::Front)): a larger
/// one is
/// read from the file's object.
pub const MAX_FRONT: u64 = 1 << 20;

/// Most bytes of block indexes ([`Front::blocks`](crate::Front::blocks)) one state carries, unless
/// a handle sets
/// another bound
/// ([`ObjectStorage::set_inline_block_indexes`](crate::ObjectStorage::set_inline_block_indexes)):
/// past it, files (in path
/// order) keep theirs in an object of their own
/// ([`Front::blocks_object`](crate::Front::blocks_object)).
pub const MAX_BLOCK_INDEXES: u64 = 1 << 20;

/// An object a file held in extents reads from ([`StateFile::Extents`](crate::StateFile::Extents)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtentObject {
    /// The object's key below the dataset's prefix.
    pub key: String,
    /// The object's size in bytes.
    pub size: u64,
}

/// Whether `rel` names an upload of a dataset's first commit (`<file path>.1-<tag>`, §2),
/// which a create killed before its state write leaves behind.
pub(crate) fn first_commit_upload(rel: &str) -> bool {
    rel.rsplit_once(".1-").is_some_and(|(path, tag)| {
        !path.is_empty()
            && tag.len() == 16
            && tag.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// Whether `key` (a file path or object key relative to the dataset's prefix) is plain:
/// each of its components a [`plain_name`].
pub(crate) fn plain_key(key: &str) -> bool {
    key.split('/').all(plain_name)
}

/// Whether `name` is one plain component of a key: not empty, `.` or `..`, no `/`.
pub(crate) fn plain_name(name: &str) -> bool {
    !(name.is_empty() || name.contains('/') || name == "." || name == "..")
}
