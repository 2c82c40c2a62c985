//! Wrappers: a storage (or file) that passes every call on to another but the few it
//! changes. Implementing [`StorageWrapper`] makes a type a [`Storage`] (and
//! [`FileWrapper`] a [`StorageFile`]) by the blanket impls below: its impl names the
//! storage it wraps ([`StorageWrapper::inner`]) and writes only the methods it changes;
//! every other call, the object-store capabilities (`publish`, `shared_dir`, `adopt`, the
//! read hints) included, reaches the inner storage unchanged.
//!
//! Publishing has one door in a wrapper: [`StorageWrapper::publish_with_front`], which a
//! [`Storage::publish`] of the wrapper reaches with no front.
//!
//! A wrapper that changes what a read returns must write every read method it changes
//! the answer of (a file's `read_at`, `read_ranges` and `read_ranges_each`, for example):
//! the others still go to the inner file, not through the wrapper's `read_at`.

use super::{EntryKind, FrontRanges, LockGuard, OpenMode, SharedDir, Storage, StorageFile};
use crate::blosc::ChunkBlocks;
use crate::error::Result;
use bytes::Bytes;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

/// A [`Storage`] made of another: every method but [`inner`](Self::inner) passes the call
/// on to it unless the wrapper writes its own (see the module docs).
#[expect(missing_docs, reason = "each method is the Storage method of its name")]
pub trait StorageWrapper: Send + Sync + std::fmt::Debug {
    /// The storage calls go to.
    fn inner(&self) -> &dyn Storage;

    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn StorageFile>> {
        self.inner().open(path, mode)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner().list(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner().rename(from, to)
    }
    fn exchange(&self, a: &Path, b: &Path) -> Result<()> {
        self.inner().exchange(a, b)
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        self.inner().remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> Result<()> {
        self.inner().remove_dir_all(path)
    }
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.inner().create_dir_all(path)
    }
    fn create_dir_new(&self, path: &Path) -> Result<()> {
        self.inner().create_dir_new(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner().exists(path)
    }
    fn is_symlink(&self, path: &Path) -> bool {
        self.inner().is_symlink(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.inner().is_dir(path)
    }
    fn entry_kind(&self, path: &Path) -> Option<EntryKind> {
        self.inner().entry_kind(path)
    }
    fn stamp(&self, path: &Path) -> Option<[u64; 4]> {
        self.inner().stamp(path)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner().sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> Result<LockGuard> {
        self.inner().lock(path)
    }
    fn concurrent_reads(&self) -> Option<usize> {
        self.inner().concurrent_reads()
    }
    fn read_part_size(&self) -> Option<u64> {
        self.inner().read_part_size()
    }
    fn file_bytes(&self) -> Option<u64> {
        self.inner().file_bytes()
    }
    /// [`Storage::publish`] and [`Storage::publish_with_front`] both: the wrapper's
    /// `publish` is this with no front, so that a wrapper sees every publish in one place.
    fn publish_with_front(&self, root: &Path, front: &FrontRanges<'_>) -> Result<()> {
        self.inner().publish_with_front(root, front)
    }
    fn commits_by_publish(&self) -> bool {
        self.inner().commits_by_publish()
    }
    fn discard_unpublished(&self, root: &Path) {
        self.inner().discard_unpublished(root)
    }
    fn shared_dir(&self, root: &Path, id: &str) -> Result<Option<Arc<dyn SharedDir>>> {
        self.inner().shared_dir(root, id)
    }
    fn adopt(
        &self,
        dir: &dyn SharedDir,
        name: &str,
        size: u64,
        blocks: Option<&str>,
        path: &Path,
    ) -> Result<()> {
        self.inner().adopt(dir, name, size, blocks, path)
    }
}

impl<W: StorageWrapper> Storage for W {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn StorageFile>> {
        StorageWrapper::open(self, path, mode)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        StorageWrapper::list(self, dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        StorageWrapper::rename(self, from, to)
    }
    fn exchange(&self, a: &Path, b: &Path) -> Result<()> {
        StorageWrapper::exchange(self, a, b)
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        StorageWrapper::remove_file(self, path)
    }
    fn remove_dir_all(&self, path: &Path) -> Result<()> {
        StorageWrapper::remove_dir_all(self, path)
    }
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        StorageWrapper::create_dir_all(self, path)
    }
    fn create_dir_new(&self, path: &Path) -> Result<()> {
        StorageWrapper::create_dir_new(self, path)
    }
    fn exists(&self, path: &Path) -> bool {
        StorageWrapper::exists(self, path)
    }
    fn is_symlink(&self, path: &Path) -> bool {
        StorageWrapper::is_symlink(self, path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        StorageWrapper::is_dir(self, path)
    }
    fn entry_kind(&self, path: &Path) -> Option<EntryKind> {
        StorageWrapper::entry_kind(self, path)
    }
    fn stamp(&self, path: &Path) -> Option<[u64; 4]> {
        StorageWrapper::stamp(self, path)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        StorageWrapper::sync_dir(self, dir)
    }
    fn lock(&self, path: &Path) -> Result<LockGuard> {
        StorageWrapper::lock(self, path)
    }
    fn concurrent_reads(&self) -> Option<usize> {
        StorageWrapper::concurrent_reads(self)
    }
    fn read_part_size(&self) -> Option<u64> {
        StorageWrapper::read_part_size(self)
    }
    fn file_bytes(&self) -> Option<u64> {
        StorageWrapper::file_bytes(self)
    }
    fn publish(&self, root: &Path) -> Result<()> {
        StorageWrapper::publish_with_front(self, root, &|_| None)
    }
    fn publish_with_front(&self, root: &Path, front: &FrontRanges<'_>) -> Result<()> {
        StorageWrapper::publish_with_front(self, root, front)
    }
    fn commits_by_publish(&self) -> bool {
        StorageWrapper::commits_by_publish(self)
    }
    fn discard_unpublished(&self, root: &Path) {
        StorageWrapper::discard_unpublished(self, root)
    }
    fn shared_dir(&self, root: &Path, id: &str) -> Result<Option<Arc<dyn SharedDir>>> {
        StorageWrapper::shared_dir(self, root, id)
    }
    fn adopt(
        &self,
        dir: &dyn SharedDir,
        name: &str,
        size: u64,
        blocks: Option<&str>,
        path: &Path,
    ) -> Result<()> {
        StorageWrapper::adopt(self, dir, name, size, blocks, path)
    }
}

/// A [`StorageFile`] made of another: every method but [`inner`](Self::inner) passes the
/// call on to it unless the wrapper writes its own (see the module docs).
#[expect(
    missing_docs,
    reason = "each method is the StorageFile method of its name"
)]
#[expect(
    clippy::len_without_is_empty,
    reason = "as StorageFile: a file's length is read from the backend"
)]
pub trait FileWrapper: Send + Sync {
    /// The file calls go to.
    fn inner(&self) -> &dyn StorageFile;

    fn len(&self) -> Result<u64> {
        self.inner().len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner().read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.inner().write_at(offset, data)
    }
    fn set_len(&self, len: u64) -> Result<()> {
        self.inner().set_len(len)
    }
    fn sync(&self) -> Result<()> {
        self.inner().sync()
    }
    fn start_sync(&self, offset: u64, len: u64) -> Result<()> {
        self.inner().start_sync(offset, len)
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner().read_ranges(ranges)
    }
    fn read_ranges_each(
        &self,
        ranges: &[Range<u64>],
        each: &(dyn Fn(usize, Bytes) + Sync),
    ) -> Result<()> {
        self.inner().read_ranges_each(ranges, each)
    }
    fn path(&self) -> &Path {
        self.inner().path()
    }
    fn small_reads_are_cheap(&self) -> bool {
        self.inner().small_reads_are_cheap()
    }
    fn chunk_blocks(&self, offset: u64) -> Result<Option<Arc<ChunkBlocks>>> {
        self.inner().chunk_blocks(offset)
    }
}

impl<W: FileWrapper> StorageFile for W {
    fn len(&self) -> Result<u64> {
        FileWrapper::len(self)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        FileWrapper::read_at(self, offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        FileWrapper::write_at(self, offset, data)
    }
    fn set_len(&self, len: u64) -> Result<()> {
        FileWrapper::set_len(self, len)
    }
    fn sync(&self) -> Result<()> {
        FileWrapper::sync(self)
    }
    fn start_sync(&self, offset: u64, len: u64) -> Result<()> {
        FileWrapper::start_sync(self, offset, len)
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        FileWrapper::read_ranges(self, ranges)
    }
    fn read_ranges_each(
        &self,
        ranges: &[Range<u64>],
        each: &(dyn Fn(usize, Bytes) + Sync),
    ) -> Result<()> {
        FileWrapper::read_ranges_each(self, ranges, each)
    }
    fn path(&self) -> &Path {
        FileWrapper::path(self)
    }
    fn small_reads_are_cheap(&self) -> bool {
        FileWrapper::small_reads_are_cheap(self)
    }
    fn chunk_blocks(&self, offset: u64) -> Result<Option<Arc<ChunkBlocks>>> {
        FileWrapper::chunk_blocks(self, offset)
    }
}
