//! Whether a handle may write, and the writer lock that makes one writer per dataset.

use crate::error::{Error, Result};
use std::path::Path;

/// Whether a dataset handle may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Reads only; several readers may share a dataset with one writer.
    ReadOnly,
    /// Reads and writes; holds the dataset's writer lock.
    ReadWrite,
}

/// A writer lock on `root/meta/lock`, released when dropped.
#[derive(Debug)]
pub(crate) struct WriterLock {
    _file: std::fs::File,
}

impl WriterLock {
    pub(crate) fn acquire(root: &Path) -> Result<WriterLock> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = root.join("meta").join("lock");
        // A writer works inside the dataset: `meta/` and `data/` may not be links out of it
        // (files below them are opened without following links, see `LocalStorage::open`).
        for dir in ["meta", "data"] {
            let d = root.join(dir);
            if std::fs::symlink_metadata(&d).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(Error::Unsupported {
                    path: d,
                    reason: "a symbolic link inside the dataset: blz writes nothing through links"
                        .into(),
                });
            }
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| Error::io("open", &path, e))?;
        // flock(2) on Unix. The lock goes with the open file, so dropping it unlocks.
        match file.try_lock() {
            Ok(()) => Ok(WriterLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked { path }),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io("lock", &path, e)),
        }
    }
}
