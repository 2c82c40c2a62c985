//! Storage backends: everything blz reads or writes goes through [`Storage`] and
//! [`StorageFile`], so a dataset can live on a local disk, a distributed filesystem mount or
//! (later) an object store without the array code knowing.

mod deferred;
mod fault;
mod local;
pub mod memory;
mod wrap;

// Plumbing for the `blz` crate's staged creates (`staging.rs`), not an API of this crate:
// public only because the crate boundary requires it.
#[doc(hidden)]
pub use deferred::{sync_tree, Deferred};
pub use fault::FaultyStorage;
pub use local::LocalStorage;
pub use memory::MemoryStorage;
pub use wrap::{FileWrapper, StorageWrapper};

use crate::error::{Error, Result};
/// The shared byte buffer [`StorageFile::read_ranges`] returns.
pub use bytes::Bytes;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

/// The suffix of the staging directory a create builds a dataset in, beside its path
/// (`<path>.tmp-build`), renamed to the path when complete.
pub const STAGING_SUFFIX: &str = ".tmp-build";

/// The `n` byte strings that `read` hands, each with its index, to the callback it is
/// given (in any order), in index order: a `read_ranges` made of a `read_ranges_each`.
/// An index never handed over is empty.
///
/// # Errors
/// The error of `read`.
pub fn in_order(
    n: usize,
    read: impl FnOnce(&(dyn Fn(usize, Bytes) + Sync)) -> Result<()>,
) -> Result<Vec<Bytes>> {
    let out = std::sync::Mutex::new(vec![Bytes::new(); n]);
    read(&|i, b| {
        if let Some(slot) = out
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_mut(i)
        {
            *slot = b;
        }
    })?;
    Ok(out
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner))
}

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Existing file, reads only.
    Read,
    /// Existing file, reads and writes.
    ReadWrite,
    /// Create the file (truncating any existing one), reads and writes.
    Create,
}

/// What an entry of a directory is, seen without following a link
/// ([`Storage::entry_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory (not a link to one).
    Dir,
    /// A symbolic link, whatever it points to (or if it points nowhere).
    Symlink,
    /// Anything else (a FIFO, a socket, a device), named for messages: "a FIFO".
    Other(&'static str),
}

impl std::fmt::Display for EntryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EntryKind::File => "a regular file",
            EntryKind::Dir => "a directory",
            EntryKind::Symlink => "a symbolic link",
            EntryKind::Other(what) => what,
        })
    }
}

/// A file opened through a [`Storage`]. Offsets are absolute byte positions.
///
/// A backend writes `len`, `read_at`, `write_at`, `set_len`, `sync` and `path`; the rest
/// are provided. A file that wraps another implements [`FileWrapper`] instead.
#[expect(
    clippy::len_without_is_empty,
    reason = "a file's length is read from the backend; emptiness is never asked on its own"
)]
pub trait StorageFile: Send + Sync {
    /// Current length in bytes.
    ///
    /// # Errors
    /// An I/O error from the backend.
    fn len(&self) -> Result<u64>;
    /// Fills `buf` from `offset`; reading past the end is an error.
    ///
    /// # Errors
    /// An I/O error, or `UnexpectedEof` when the file is shorter than `offset + buf.len()`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Writes all of `data` at `offset`, growing the file if needed.
    ///
    /// # Errors
    /// An I/O error from the backend.
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()>;
    /// Truncates or extends the file to `len` bytes.
    ///
    /// # Errors
    /// An I/O error from the backend.
    fn set_len(&self, len: u64) -> Result<()>;
    /// Makes everything written so far durable.
    ///
    /// # Errors
    /// An I/O error from the backend.
    fn sync(&self) -> Result<()>;
    /// Starts writing `len` bytes from `offset` to stable storage without waiting for them,
    /// so that a later [`sync`](Self::sync) has less left to wait for. Only a hint: it
    /// promises nothing about durability, and the default does nothing.
    ///
    /// # Errors
    /// An I/O error from the backend.
    fn start_sync(&self, offset: u64, len: u64) -> Result<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// Reads several byte ranges at once, returning their bytes in the order asked. The
    /// default reads them one by one with [`read_at`](Self::read_at); a backend where every
    /// read is a request (an object store) fetches them together, merging ranges that lie
    /// close and keeping requests in flight at once.
    ///
    /// # Errors
    /// As [`read_at`](Self::read_at): the first range that cannot be read fails the call.
    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        ranges
            .iter()
            .map(|r| {
                let len = usize::try_from(r.end.saturating_sub(r.start)).map_err(|_| {
                    Error::io(
                        "read",
                        self.path(),
                        std::io::Error::other("a range larger than memory can hold"),
                    )
                })?;
                let mut buf = vec![0u8; len];
                self.read_at(r.start, &mut buf)?;
                Ok(Bytes::from(buf))
            })
            .collect()
    }
    /// [`read_ranges`](Self::read_ranges), each range's bytes handed to `each` (with its
    /// index in `ranges`) as soon as they are in, in any order: a backend whose answers
    /// stream in (an object store) hands a range over while the bytes after it are still
    /// coming, so that its caller decodes one chunk while the next arrives. `each` runs on
    /// the calling thread, between reads: heavy work it is given should go elsewhere. The
    /// default reads them all, then hands them over in order.
    ///
    /// # Errors
    /// As [`read_ranges`](Self::read_ranges); ranges handed over before an error stay so.
    fn read_ranges_each(
        &self,
        ranges: &[Range<u64>],
        each: &(dyn Fn(usize, Bytes) + Sync),
    ) -> Result<()> {
        for (i, b) in self.read_ranges(ranges)?.into_iter().enumerate() {
            each(i, b);
        }
        Ok(())
    }
    /// The path the file was opened with (for error messages).
    fn path(&self) -> &Path;
    /// True (the default) when a small read costs little more than its bytes, as on a
    /// filesystem. False on an object store, where every read is a request: readers then
    /// read a chunk whole in one request rather than its header, digest and blocks apart.
    fn small_reads_are_cheap(&self) -> bool {
        true
    }
    /// The block index of the chunk at `offset` ([`crate::blosc::ChunkBlocks`]), where the
    /// storage keeps one for the file (an object store, in its state): a short read of the
    /// chunk then fetches just the blocks it decodes. `None` (the default) elsewhere.
    ///
    /// # Errors
    /// A kept index that does not decode, naming where it is kept.
    fn chunk_blocks(&self, _offset: u64) -> Result<Option<Arc<crate::blosc::ChunkBlocks>>> {
        Ok(None)
    }
}

/// A place files live: a local directory tree, a distributed filesystem mount, ...
///
/// A backend writes ten methods (`open`, `list`, `rename`, `remove_file`,
/// `remove_dir_all`, `create_dir_all`, `exists`, `is_dir`, `sync_dir`, `lock`); the rest are
/// provided, with defaults for a backend without links, atomic swaps or commits of its own
/// (`exchange`, `create_dir_new`, `is_symlink`, `entry_kind`, `stamp`), and the
/// object-store capabilities (`publish`, `publish_with_front`, `commits_by_publish`,
/// `discard_unpublished`, `shared_dir`, `adopt`, and the hints `concurrent_reads`,
/// `read_part_size`, `file_bytes`) answering as a filesystem does. A storage that wraps
/// another implements [`StorageWrapper`] instead and writes only what it changes.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Opens a file.
    ///
    /// # Errors
    /// An I/O error (not found, permission denied, ...) naming the path.
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn StorageFile>>;
    /// Names of the entries of a directory (files and sub-directories), sorted.
    ///
    /// # Errors
    /// An I/O error naming the directory.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// Atomically replaces `to` with `from`.
    ///
    /// # Errors
    /// An I/O error naming both paths.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Swaps two directories (or files) in one atomic step: afterwards `a` holds what `b`
    /// held and the other way round, and no moment shows neither.
    ///
    /// # Errors
    /// [`Error::Unsupported`] where the backend (or the filesystem under it) cannot swap
    /// atomically (the default); I/O errors naming the paths.
    fn exchange(&self, a: &Path, b: &Path) -> Result<()> {
        let _ = b;
        Err(Error::Unsupported {
            path: a.to_path_buf(),
            reason: "this storage cannot swap two paths atomically".into(),
        })
    }
    /// Removes a file; removing a missing file is not an error.
    ///
    /// # Errors
    /// An I/O error other than not-found.
    fn remove_file(&self, path: &Path) -> Result<()>;
    /// Removes a directory and everything below it; a missing directory is not an error.
    ///
    /// # Errors
    /// An I/O error other than not-found.
    fn remove_dir_all(&self, path: &Path) -> Result<()>;
    /// Creates a directory and its parents.
    ///
    /// # Errors
    /// An I/O error naming the directory.
    fn create_dir_all(&self, path: &Path) -> Result<()>;
    /// Creates the directory `path` itself (its parent must exist), exclusively: anything
    /// already there, a directory or a link included, is an error. The default asks
    /// [`exists`](Self::exists) and then creates it, which suffices for a backend without
    /// links or concurrent creators of one name.
    ///
    /// # Errors
    /// An I/O error of kind `AlreadyExists` when something is at `path`; other I/O errors
    /// naming the directory.
    fn create_dir_new(&self, path: &Path) -> Result<()> {
        if self.exists(path) {
            return Err(Error::io(
                "mkdir",
                path,
                std::io::Error::from(std::io::ErrorKind::AlreadyExists),
            ));
        }
        self.create_dir_all(path)
    }
    /// True when a file or directory exists at `path`.
    fn exists(&self, path: &Path) -> bool;
    /// True when `path` itself is a symbolic link (writers refuse to follow one inside a
    /// dataset). Backends without links answer false (the default).
    fn is_symlink(&self, path: &Path) -> bool {
        let _ = path;
        false
    }
    /// True when `path` is a directory.
    fn is_dir(&self, path: &Path) -> bool;
    /// What is at `path` itself, a link not followed; `None` when nothing is. The default,
    /// for backends without links or special files, answers from
    /// [`is_dir`](Self::is_dir) and [`exists`](Self::exists).
    fn entry_kind(&self, path: &Path) -> Option<EntryKind> {
        if self.is_dir(path) {
            Some(EntryKind::Dir)
        } else if self.exists(path) {
            Some(EntryKind::File)
        } else {
            None
        }
    }
    /// A fingerprint of the file at `path` as it is now (on a local filesystem: device,
    /// inode, modification time and length), which changes when the file is replaced or
    /// written: readers compare it to skip rereading a small file that has not changed
    /// (a handle checking for new commits). `None` when the backend cannot tell (the
    /// default) or the file is missing; callers then read the file.
    fn stamp(&self, path: &Path) -> Option<[u64; 4]> {
        let _ = path;
        None
    }
    /// Makes the directory's entries (creations, renames, removals) durable.
    ///
    /// # Errors
    /// An I/O error naming the directory.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// Takes the exclusive lock kept in the file at `path` (created when missing, never
    /// through a symbolic link) without waiting: [`Error::Locked`] naming `path` while
    /// another holder (another process, or another handle in this one) has it. The lock is
    /// held until the returned guard is dropped. blz's one-writer-at-a-time rule rests on
    /// it (`meta/lock` of a dataset).
    fn lock(&self, path: &Path) -> Result<LockGuard>;
    /// Reads worth keeping in flight at once where the engine reads many chunks: `None`
    /// (the default) leaves it to the CPU threads; an object store, where every read waits
    /// for a round trip, asks for more.
    fn concurrent_reads(&self) -> Option<usize> {
        None
    }
    /// The most bytes one request of a read of many ranges should carry, where reads are
    /// requests (an object store's part size, `BLZ_S3_PART_SIZE`): a reader of many chunks
    /// fetches them in groups of about this size, each decoded as soon as it lands while
    /// the others are still in flight. `None` (the default): no such bound.
    fn read_part_size(&self) -> Option<u64> {
        None
    }
    /// The size of superchunk file a new dataset here aims for when its creator names no
    /// superchunk size: `None` (the default) takes blz's own (64 MiB). An object store asks
    /// for less, since an object is what one PUT or GET stream moves: smaller objects go up
    /// and come down many at once, and cost a server that answers a ranged GET from a
    /// copy of the whole object less.
    fn file_bytes(&self) -> Option<u64> {
        None
    }
    /// Makes what was written under the dataset at `root` visible to every other reader in
    /// one atomic step, after a transaction committed or a staged create was renamed in. On
    /// a filesystem that has already happened (the default does nothing); an object store
    /// uploads the changed files and replaces the dataset's state object with a conditional
    /// write (see `spec/object-store.md`).
    ///
    /// # Errors
    /// I/O errors; [`Error::Conflict`] when another writer committed first.
    fn publish(&self, root: &Path) -> Result<()> {
        let _ = root;
        Ok(())
    }
    /// [`Storage::publish`], told which bytes of a file every reader of it reads first:
    /// `front(file)` gives those byte ranges of a file (a superchunk file's header, metadata
    /// section and offsets table), or `None`. A backend where each read is a request may keep
    /// a copy of them where opening the dataset finds them (the object store keeps them in
    /// its state object, `spec/object-store.md` §3), so that a reader's first read of a chunk
    /// is one request. The default ignores `front` and publishes.
    ///
    /// # Errors
    /// As [`Storage::publish`].
    fn publish_with_front(&self, root: &Path, front: &FrontRanges<'_>) -> Result<()> {
        let _ = front;
        self.publish(root)
    }
    /// True when [`Storage::publish`] is the commit point: nothing written is visible to
    /// other readers before it (an object store). A transaction then applies its change to
    /// the files directly, without a journal; otherwise (the default, a filesystem) the
    /// journal's rename is the commit point and `publish` has nothing left to do.
    fn commits_by_publish(&self) -> bool {
        false
    }
    /// Drops every change made under the dataset at `root` since the last publish (a
    /// transaction failed while applying it on a backend that [commits by
    /// publishing](Storage::commits_by_publish)). The default does nothing.
    fn discard_unpublished(&self, root: &Path) {
        let _ = root;
    }
    /// Where the workers of the staged write `id` on the dataset at `root` leave their files,
    /// when this backend's own files are seen by no other process before a commit (an object
    /// store: a prefix of the dataset's, `spec/object-store.md` §8). `None` (the default, a
    /// filesystem): the session is the directory `root/staged/<id>`, which every process
    /// that mounts the filesystem sees.
    ///
    /// # Errors
    /// As the backend's.
    fn shared_dir(&self, root: &Path, id: &str) -> Result<Option<Arc<dyn SharedDir>>> {
        let _ = (root, id);
        Ok(None)
    }
    /// Makes the file `name` of `dir` (a [`SharedDir`] this handle's
    /// [`Storage::shared_dir`] gave), `size` bytes long, the file at `path` among this
    /// handle's uncommitted changes, without copying its bytes: the next publish names it
    /// where it lies. Only backends with shared directories support it. `blocks` names the
    /// file of `dir` holding the file's block index, if its worker put one
    /// ([`crate::blosc::compress_index`]); one that does not fit the file is left out.
    ///
    /// # Errors
    /// [`Error::Unsupported`] by default; I/O errors reading the file's front.
    fn adopt(
        &self,
        dir: &dyn SharedDir,
        name: &str,
        size: u64,
        blocks: Option<&str>,
        path: &Path,
    ) -> Result<()> {
        let _ = (name, size, blocks);
        Err(Error::Unsupported {
            path: path.to_path_buf(),
            reason: format!(
                "this storage has no shared directories to take {} from",
                dir.location().display()
            ),
        })
    }
}

/// A directory that every process sees as soon as a file is put into it, apart from any
/// dataset's commit: where the workers of a staged write on an object store leave the
/// superchunk files the writer then commits ([`Storage::shared_dir`], [`shared_dir_at`]).
/// Files are written whole (a reader sees all of a file or none of it) and never changed.
pub trait SharedDir: Send + Sync + std::fmt::Debug {
    /// How workers name it: `s3://bucket/prefix/staged/<id>`.
    fn location(&self) -> &Path;
    /// Stores `bytes` as the file `name` (a plain name), whole.
    ///
    /// # Errors
    /// I/O errors naming the file.
    fn put(&self, name: &str, bytes: Bytes) -> Result<()>;
    /// The bytes of the file `name` (at most `limit` of them), or `None` when there is no
    /// such file.
    ///
    /// # Errors
    /// I/O errors naming the file; [`Error::InvalidMetadata`] for a file over `limit` bytes.
    fn get(&self, name: &str, limit: u64) -> Result<Option<Bytes>>;
    /// Every file: its name and size in bytes, by name.
    ///
    /// # Errors
    /// I/O errors naming the directory.
    fn list(&self) -> Result<Vec<(String, u64)>>;
    /// Removes the files `names` (a missing one is no error).
    ///
    /// # Errors
    /// I/O errors naming the directory.
    fn remove(&self, names: &[String]) -> Result<()>;
}

/// Of a file, the byte ranges every reader of it reads before anything else, or `None`
/// ([`Storage::publish_with_front`]).
pub type FrontRanges<'a> =
    dyn Fn(&dyn StorageFile) -> Option<Vec<std::ops::Range<u64>>> + Sync + 'a;

/// Holds a lock taken with [`Storage::lock`]; dropping it releases the lock.
pub type LockGuard = Box<dyn std::any::Any + Send + Sync>;

/// How many files one part of blz (a transaction, the reader cache) may keep open: `max`,
/// or a quarter of the process's descriptor limit when that is smaller (at least 16).
// Plumbing for the `blz` crate (its transactions and reader cache): hidden, no API promise.
#[doc(hidden)]
pub fn descriptor_budget(max: usize) -> usize {
    static LIMIT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let limit = *LIMIT.get_or_init(|| {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `r` is a valid rlimit for getrlimit to fill.
        let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
        if rc == 0 {
            usize::try_from(r.rlim_cur).unwrap_or(usize::MAX)
        } else {
            1024
        }
    });
    (limit / 4).clamp(16, max.max(16))
}

/// The storage used when a caller names none: the local filesystem.
pub fn local() -> Arc<dyn Storage> {
    Arc::new(LocalStorage)
}

/// Reads a whole (small) file, refusing files larger than `limit` bytes.
///
/// # Errors
/// An I/O error, or [`Error::InvalidMetadata`] when the file is larger than `limit`.
pub fn read_small_file(storage: &dyn Storage, path: &Path, limit: u64) -> Result<Vec<u8>> {
    let file = storage.open(path, OpenMode::Read)?;
    let len = file.len()?;
    if len > limit {
        return Err(Error::metadata(
            path,
            format!("file is {len} bytes, more than the {limit} allowed"),
        ));
    }
    let mut buf = vec![0u8; len as usize];
    file.read_at(0, &mut buf)?;
    Ok(buf)
}

/// The temporary file [`write_file_atomic`] writes before renaming it to `path`: the same
/// name with `.tmp` added.
// Plumbing for the `blz` crate (its transactions skip these files): hidden, no API promise.
#[doc(hidden)]
pub fn atomic_tmp_path(path: &Path) -> Option<std::path::PathBuf> {
    let mut tmp_name = path.file_name()?.to_os_string();
    tmp_name.push(".tmp");
    Some(path.with_file_name(tmp_name))
}

/// Replaces `path` with `data` atomically: writes a temporary file beside it, syncs it,
/// renames it over `path` and syncs the directory. A crash at any point leaves either the old
/// or the new content at `path`, never a mix.
///
/// # Errors
/// An I/O error naming the file.
pub fn write_file_atomic(storage: &dyn Storage, path: &Path, data: &[u8]) -> Result<()> {
    let tmp = atomic_tmp_path(path)
        .ok_or_else(|| Error::InvalidArgument(format!("{} has no file name", path.display())))?;
    // Whatever sits at the temporary name (a leftover, or a link planted to make blz write
    // elsewhere) goes; the file is then created anew, never opened through a link.
    storage.remove_file(&tmp)?;
    {
        let file = storage.open(&tmp, OpenMode::Create)?;
        file.write_at(0, data)?;
        file.sync()?;
    }
    storage.rename(&tmp, path)?;
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    storage.sync_dir(dir)
}
