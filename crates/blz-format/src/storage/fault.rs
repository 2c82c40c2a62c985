//! A storage wrapper that simulates a crash: the `n`-th mutating operation is torn (a write
//! lands only half of its bytes) and fails, and every mutating operation after it fails too,
//! as if the process had been killed. Crash-consistency tests run an operation with a crash
//! injected at every step, then reopen the dataset with the real storage.
//!
//! [`FaultyStorage::failing_once`] injects a failure the process survives instead (a full
//! disk, a transient I/O error): only the `n`-th mutating operation fails (a write landing
//! half of its bytes), and every operation after it succeeds, so tests can check what an
//! operation's error path leaves behind.

use super::wrap::{FileWrapper, StorageWrapper};
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

impl FileWrapper for FaultyFile {
    fn inner(&self) -> &dyn StorageFile {
        &*self.inner
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
        self.step(|| self.inner.set_len(len))
    }
    fn sync(&self) -> Result<()> {
        self.step(|| self.inner.sync())
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

impl FaultyFile {
    /// `op`, unless this is the step that crashes.
    fn step(&self, op: impl FnOnce() -> Result<()>) -> Result<()> {
        if self.state.step(&self.path)? {
            op()
        } else {
            Err(crashed(&self.path))
        }
    }
}

impl FaultyStorage {
    /// `op` on `path`, unless this is the step that crashes.
    fn step(&self, path: &Path, op: impl FnOnce() -> Result<()>) -> Result<()> {
        if self.state.step(path)? {
            op()
        } else {
            Err(crashed(path))
        }
    }
}

/// The mutating calls count and may crash; every other call passes on unchanged.
impl StorageWrapper for FaultyStorage {
    fn inner(&self) -> &dyn Storage {
        &*self.inner
    }
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
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.step(from, || self.inner.rename(from, to))
    }
    fn exchange(&self, a: &Path, b: &Path) -> Result<()> {
        self.step(a, || self.inner.exchange(a, b))
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        self.step(path, || self.inner.remove_file(path))
    }
    fn remove_dir_all(&self, path: &Path) -> Result<()> {
        self.step(path, || self.inner.remove_dir_all(path))
    }
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.step(path, || self.inner.create_dir_all(path))
    }
    fn create_dir_new(&self, path: &Path) -> Result<()> {
        self.step(path, || self.inner.create_dir_new(path))
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.step(dir, || self.inner.sync_dir(dir))
    }
}
