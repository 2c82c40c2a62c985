//! Writer handles of one process share one writer.
//!
//! The writer lock (`meta/lock`) keeps two *processes* from writing a dataset at once. Within
//! one process, every handle opened for writing on the same dataset joins one
//! [`SharedWriter`], found in a process-wide registry by the identity of the dataset's lock
//! file (device and inode, from [`Storage::stamp`]): the operating system's lock is taken
//! once, by the first handle, and released when the last one is dropped. The handles take
//! turns ([`SharedWriter::turn`]): one write at a time, each still one transaction with the
//! same crash guarantees, and a handle whose turn comes after another handle's commit first
//! catches up with it. The writer counts the commits made through it; a handle remembers
//! the count it shows, so telling whether it is behind costs one atomic load.
//!
//! A backend that cannot tell a file's identity (an object store: its lock lives in the
//! process only and the conditional commit keeps writers apart) shares nothing: a second
//! writer handle there gets [`Error::Locked`] as before.

use super::lock::WriterLock;
use crate::error::{Error, Result};
use crate::storage::Storage;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::ThreadId;

/// The live shared writers of this process, by the identity of their lock file.
fn registry() -> MutexGuard<'static, HashMap<[u64; 2], Weak<SharedWriter>>> {
    // One per process: a forked child shares no writer (nor its turn) with its parent.
    static REGISTRY: blz_format::process::PerProcess<Mutex<HashMap<[u64; 2], Weak<SharedWriter>>>> =
        blz_format::process::PerProcess::new();
    REGISTRY
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// A new number for a handle: what tells the handles of one writer apart in
/// [`SharedWriter::turn`].
pub(crate) fn new_handle_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Who is writing now: the thread and the handle, and how deeply (a write that calls
/// another write of the same handle takes the turn again).
#[derive(Default)]
struct TurnState {
    holder: Option<(ThreadId, u64)>,
    depth: usize,
}

/// The one writer of a dataset in this process, shared by its writing handles: the
/// writer lock, the turn its handles take to write, and the count of commits made.
pub(crate) struct SharedWriter {
    _lock: WriterLock,
    path: PathBuf,
    state: Mutex<TurnState>,
    free: Condvar,
    commits: AtomicU64,
}

impl std::fmt::Debug for SharedWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedWriter")
            .field("path", &self.path)
            .field("commits", &self.commits())
            .finish()
    }
}

/// The identity of the lock file of the dataset at `root`, when the backend tells it.
fn lock_identity(storage: &dyn Storage, root: &Path) -> Option<[u64; 2]> {
    storage
        .stamp(&root.join("meta").join("lock"))
        .map(|s| [s[0], s[1]])
}

impl SharedWriter {
    fn new(lock: WriterLock, root: &Path) -> SharedWriter {
        SharedWriter {
            _lock: lock,
            path: root.to_path_buf(),
            state: Mutex::new(TurnState::default()),
            free: Condvar::new(),
            commits: AtomicU64::new(0),
        }
    }

    /// The writer of the dataset at `root` for a new writing handle: the one this process
    /// already has, or a new one holding the writer lock it takes. `true` with a new one
    /// (the caller, first writer, clears what earlier writers left).
    ///
    /// # Errors
    /// As [`WriterLock::acquire`]: [`Error::Locked`] while another process writes.
    pub(crate) fn join(storage: &dyn Storage, root: &Path) -> Result<(Arc<SharedWriter>, bool)> {
        // Held while the lock is taken, so two threads opening the same dataset at once
        // meet here rather than at the operating system's lock.
        let mut reg = registry();
        if let Some(w) = lock_identity(storage, root).and_then(|id| reg.get(&id)?.upgrade()) {
            return Ok((w, false));
        }
        let lock = WriterLock::acquire(storage, root)?;
        Ok((Self::register(&mut reg, storage, root, lock), true))
    }

    /// Makes `lock`, the writer lock of the dataset at `root` (a create hands it over
    /// once the dataset is in place), the writer other handles of this process join.
    pub(crate) fn adopt(storage: &dyn Storage, root: &Path, lock: WriterLock) -> Arc<SharedWriter> {
        Self::register(&mut registry(), storage, root, lock)
    }

    fn register(
        reg: &mut HashMap<[u64; 2], Weak<SharedWriter>>,
        storage: &dyn Storage,
        root: &Path,
        lock: WriterLock,
    ) -> Arc<SharedWriter> {
        let w = Arc::new(SharedWriter::new(lock, root));
        reg.retain(|_, v| v.strong_count() > 0);
        if let Some(id) = lock_identity(storage, root) {
            reg.insert(id, Arc::downgrade(&w));
        }
        w
    }

    /// How many commits were made through this writer (failed ones included: a handle
    /// that saw another count reads the committed state again).
    pub(crate) fn commits(&self) -> u64 {
        self.commits.load(Ordering::SeqCst)
    }

    /// Counts a commit, before it starts changing files: a read through another handle
    /// that overlaps it then finds the count changed when it ends.
    pub(crate) fn count_commit(&self) {
        self.commits.fetch_add(1, Ordering::SeqCst);
    }

    /// Waits for the turn of handle `handle` to write (at once when this thread already
    /// has it for that handle). The turn is held until the returned guard is dropped.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when this thread is writing through another handle of
    /// the dataset (a write started inside another's, which would wait for itself).
    pub(crate) fn turn(self: &Arc<Self>, handle: u64) -> Result<Turn> {
        let me = std::thread::current().id();
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match st.holder {
                None => {
                    st.holder = Some((me, handle));
                    st.depth = 1;
                    break;
                }
                Some((t, h)) if t == me && h == handle => {
                    st.depth += 1;
                    break;
                }
                Some((t, _)) if t == me => {
                    return Err(Error::InvalidArgument(format!(
                        "{}: a write through one handle started inside a write through \
                         another handle of the same dataset, on the same thread",
                        self.path.display()
                    )));
                }
                Some(_) => {
                    st = self.free.wait(st).unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
        Ok(Turn {
            writer: Arc::clone(self),
        })
    }
}

/// A handle's turn to write ([`SharedWriter::turn`]); dropping it ends the turn.
pub(crate) struct Turn {
    writer: Arc<SharedWriter>,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Turn")
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut st = self
            .writer
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        st.depth = st.depth.saturating_sub(1);
        if st.depth == 0 {
            st.holder = None;
            self.writer.free.notify_all();
        }
    }
}
