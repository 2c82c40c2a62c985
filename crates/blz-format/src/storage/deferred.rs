//! Building where nobody looks: a storage whose syncs are put off until the end.
//!
//! A dataset is created in a staging directory that no reader opens and that a crashed
//! build leaves to be removed; only the rename that puts it in place must find every byte
//! and every directory entry under it durable. Building through [`Deferred`] skips the
//! syncs of small files and of directories that the writing code makes along the way (a
//! create made fifteen, one after another, each a round trip to the disk), and
//! [`sync_tree`] then makes the whole tree durable at once, its files synced side by side.

use super::wrap::{FileWrapper, StorageWrapper};
use super::{OpenMode, Storage, StorageFile};
use crate::error::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Files at least this large are synced when asked (see [`DeferredFile`]'s `sync`).
const SYNC_NOW_BYTES: u64 = 1 << 20;

/// `inner` with [`Storage::sync_dir`] and the [`StorageFile::sync`] of small files doing
/// nothing (writeback hints still pass); everything else is `inner`'s.
#[derive(Debug)]
pub struct Deferred {
    inner: Arc<dyn Storage>,
}

impl Deferred {
    /// `inner` with its syncs of directories and small files put off.
    pub fn new(inner: Arc<dyn Storage>) -> Deferred {
        Deferred { inner }
    }
}

/// A file opened through [`Deferred`].
struct DeferredFile(Box<dyn StorageFile>);

impl FileWrapper for DeferredFile {
    fn inner(&self) -> &dyn StorageFile {
        &*self.0
    }
    fn sync(&self) -> Result<()> {
        // A large file (a superchunk file: the writer syncs each from a background thread
        // as soon as it is complete, while the next ones are compressed) is synced now, so
        // that [`sync_tree`] finds little left to wait for; small ones (the meta files) wait
        // for it, when they are synced side by side.
        if self.0.len()? >= SYNC_NOW_BYTES {
            self.0.sync()
        } else {
            Ok(())
        }
    }
}

impl StorageWrapper for Deferred {
    fn inner(&self) -> &dyn Storage {
        &*self.inner
    }
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn StorageFile>> {
        Ok(Box::new(DeferredFile(self.inner.open(path, mode)?)))
    }
    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
}

/// Makes every file and directory under `dir` (and `dir` itself) durable: the files' data
/// synced by up to eight threads at once (the disk queues them together, and a journaling
/// filesystem commits them as one), then the directories, deepest first.
///
/// # Errors
/// The first I/O error, naming the file or directory.
pub fn sync_tree(storage: &dyn Storage, dir: &Path) -> Result<()> {
    let mut files: Vec<PathBuf> = Vec::new();
    let mut dirs: Vec<PathBuf> = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < dirs.len() {
        let d = dirs[i].clone();
        for name in storage.list(&d)? {
            let p = d.join(name);
            if storage.is_symlink(&p) {
                continue;
            }
            if storage.is_dir(&p) {
                dirs.push(p);
            } else {
                files.push(p);
            }
        }
        i += 1;
    }
    let threads = files.len().clamp(1, 8);
    let per = files.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let jobs: Vec<_> = files
            .chunks(per)
            .map(|part| {
                s.spawn(move || -> Result<()> {
                    for f in part {
                        storage.open(f, OpenMode::Read)?.sync()?;
                    }
                    Ok(())
                })
            })
            .collect();
        jobs.into_iter().try_for_each(|j| {
            j.join().unwrap_or_else(|_| {
                Err(crate::error::Error::io(
                    "sync",
                    dir,
                    std::io::Error::other("a thread syncing its files stopped"),
                ))
            })
        })
    })?;
    for d in dirs.iter().rev() {
        storage.sync_dir(d)?;
    }
    Ok(())
}
