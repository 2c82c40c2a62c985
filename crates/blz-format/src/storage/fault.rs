//! A storage wrapper that simulates a crash: the `n`-th mutating operation is torn (a write
//! lands only half of its bytes) and fails, and every mutating operation after it fails too,
//! as if the process had been killed. Crash-consistency tests run an operation with a crash
//! injected at every step, then reopen the dataset with the real storage.
//!
//! [`FaultyStorage::failing_once`] injects a failure the process survives instead (a full
//! disk, a transient I/O error): only the `n`-th mutating operation fails (a write landing
//! half of its bytes), and every operation after it succeeds, so tests can check what an
//! operation's error path leaves behind.

use super::{OpenMode, Storage, StorageFile};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A [`Storage`] that crashes at the `fail_at`-th mutating operation (counting from 0).
#[derive(Debug)]
pub struct FaultyStorage {
    inner: Arc<dyn Storage>,
    state: Arc<FaultState>,
}

#[derive(Debug)]
struct FaultState {
    fail_at: u64,
    count: AtomicU64,
    /// Operations after the failing one proceed (a failure the process survives) instead of
    /// failing too (a crash).
    survive: bool,
}

impl FaultState {
    /// Returns Ok(true) when this operation should proceed, Ok(false) when it is the torn one.
    fn step(&self, what: &Path) -> Result<bool> {
        let n = self.count.fetch_add(1, Ordering::SeqCst);
        if n < self.fail_at || (n > self.fail_at && self.survive) {
            Ok(true)
        } else if n == self.fail_at {
            Ok(false)
        } else {
            Err(crashed(what))
        }
    }
}

fn crashed(path: &Path) -> Error {
    Error::io(
        "write",
        path,
        std::io::Error::other("simulated crash (fault injection)"),
    )
}

impl FaultyStorage {
    /// Wraps `inner`; the `fail_at`-th mutating call (0-based) crashes.
    pub fn new(inner: Arc<dyn Storage>, fail_at: u64) -> Self {
        FaultyStorage {
            inner,
            state: Arc::new(FaultState {
                fail_at,
                count: AtomicU64::new(0),
                survive: false,
            }),
        }
    }

    /// Wraps `inner`; the `fail_at`-th mutating call (0-based) fails (a write lands half of
    /// its bytes) and every later call goes through, as after a full disk the process
    /// survives.
    pub fn failing_once(inner: Arc<dyn Storage>, fail_at: u64) -> Self {
        FaultyStorage {
            inner,
            state: Arc::new(FaultState {
                fail_at,
                count: AtomicU64::new(0),
                survive: true,
            }),
        }
    }

    /// How many mutating operations were attempted (to learn how many steps an operation has).
    pub fn operations(&self) -> u64 {
        self.state.count.load(Ordering::SeqCst)
    }

    /// True once the simulated crash (or failure) has happened.
    pub fn crashed(&self) -> bool {
        self.operations() > self.state.fail_at
    }
}

struct FaultyFile {
    inner: Box<dyn StorageFile>,
    state: Arc<FaultState>,
    path: PathBuf,
}

impl StorageFile for FaultyFile {
    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        if self.state.step(&self.path)? {
            self.inner.write_at(offset, data)
        } else {
            // A torn write: only the first half reaches the file.
            self.inner.write_at(offset, &data[..data.len() / 2])?;
            Err(crashed(&self.path))
        }
    }
    fn set_len(&self, len: u64) -> Result<()> {
        if self.state.step(&self.path)? {
            self.inner.set_len(len)
        } else {
            Err(crashed(&self.path))
        }
    }
    fn sync(&self) -> Result<()> {
        if self.state.step(&self.path)? {
            self.inner.sync()
        } else {
            Err(crashed(&self.path))
        }
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

impl Storage for FaultyStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn StorageFile>> {
        if mode == OpenMode::Create && !self.state.step(path)? {
            return Err(crashed(path));
        }
        Ok(Box::new(FaultyFile {
            inner: self.inner.open(path, mode)?,
            state: self.state.clone(),
            path: path.to_path_buf(),
        }))
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        if self.state.step(from)? {
            self.inner.rename(from, to)
        } else {
            Err(crashed(from))
        }
    }

    fn exchange(&self, a: &Path, b: &Path) -> Result<()> {
        if self.state.step(a)? {
            self.inner.exchange(a, b)
        } else {
            Err(crashed(a))
        }
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        if self.state.step(path)? {
            self.inner.remove_file(path)
        } else {
            Err(crashed(path))
        }
    }
    fn remove_dir_all(&self, path: &Path) -> Result<()> {
        if self.state.step(path)? {
            self.inner.remove_dir_all(path)
        } else {
            Err(crashed(path))
        }
    }
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        if self.state.step(path)? {
            self.inner.create_dir_all(path)
        } else {
            Err(crashed(path))
        }
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn is_symlink(&self, path: &Path) -> bool {
        self.inner.is_symlink(path)
    }
    fn entry_kind(&self, path: &Path) -> Option<super::EntryKind> {
        self.inner.entry_kind(path)
    }
    fn create_dir_new(&self, path: &Path) -> Result<()> {
        if self.state.step(path)? {
            self.inner.create_dir_new(path)
        } else {
            Err(crashed(path))
        }
    }

    fn lock(&self, path: &Path) -> Result<super::LockGuard> {
        self.inner.lock(path)
    }

    fn publish(&self, root: &Path) -> Result<()> {
        self.inner.publish(root)
    }
    fn publish_with_front(&self, root: &Path, front: &super::FrontRanges<'_>) -> Result<()> {
        self.inner.publish_with_front(root, front)
    }
    fn commits_by_publish(&self) -> bool {
        self.inner.commits_by_publish()
    }
    fn discard_unpublished(&self, root: &Path) {
        self.inner.discard_unpublished(root)
    }
    fn shared_dir(&self, root: &Path, id: &str) -> Result<Option<Arc<dyn super::SharedDir>>> {
        self.inner.shared_dir(root, id)
    }
    fn adopt(
        &self,
        dir: &dyn super::SharedDir,
        name: &str,
        size: u64,
        blocks: Option<&str>,
        path: &Path,
    ) -> Result<()> {
        self.inner.adopt(dir, name, size, blocks, path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.inner.is_dir(path)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        if self.state.step(dir)? {
            self.inner.sync_dir(dir)
        } else {
            Err(crashed(dir))
        }
    }
}
