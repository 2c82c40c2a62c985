//! Whether a handle may write, and the writer lock that makes one writer per dataset.

use crate::error::{Error, Result};
use crate::storage::{LockGuard, Storage};
use std::path::Path;

/// Whether a dataset handle may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Reads only; several readers may share a dataset with one writer.
    ReadOnly,
    /// Reads and writes; holds the dataset's writer lock.
    ReadWrite,
}

/// A writer lock on `root/meta/lock`, taken through the dataset's [`Storage`], released
/// when dropped.
pub(crate) struct WriterLock {
    _guard: LockGuard,
}

impl std::fmt::Debug for WriterLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WriterLock")
    }
}

impl WriterLock {
    pub(crate) fn acquire(storage: &dyn Storage, root: &Path) -> Result<WriterLock> {
        // A writer works inside the dataset: `meta/` and `data/` may not be links out of it
        // (files below them are opened without following links, see `LocalStorage::open`).
        for dir in ["meta", "data"] {
            let d = root.join(dir);
            if storage.is_symlink(&d) {
                return Err(Error::Unsupported {
                    path: d,
                    reason: "a symbolic link inside the dataset: blz writes nothing through links"
                        .into(),
                });
            }
        }
        let guard = storage.lock(&root.join("meta").join("lock"))?;
        Ok(WriterLock { _guard: guard })
    }
}
