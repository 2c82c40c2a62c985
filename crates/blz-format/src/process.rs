//! Values that belong to one process: thread pools and the object-store runtime, whose
//! threads do not follow a `fork()`. A child forked after one was made (Python's
//! `multiprocessing` and PyTorch's data loaders fork by default on Linux) gets its own,
//! made on first use there, instead of waiting forever on threads it does not have.

use std::sync::Mutex;

/// A value made once per process (`std::process::id()`): the first call in a process makes
/// it, later calls there return it. The value made in a parent is left as it is in a
/// forked child, never dropped there (dropping a pool or runtime would wait for, or signal,
/// threads the child does not have): it is leaked, once per fork.
#[derive(Debug)]
pub struct PerProcess<T: 'static> {
    made: Mutex<Option<(u32, &'static T)>>,
}

impl<T: 'static> PerProcess<T> {
    /// An empty cell, for a `static`.
    pub const fn new() -> Self {
        PerProcess {
            made: Mutex::new(None),
        }
    }

    /// This process's value, made by `make` on the first call in this process.
    ///
    /// # Errors
    /// What `make` returns; the next call tries again.
    pub fn get_or_try_init<E>(&self, make: impl FnOnce() -> Result<T, E>) -> Result<&'static T, E> {
        let pid = std::process::id();
        let mut made = self
            .made
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((p, v)) = *made {
            if p == pid {
                return Ok(v);
            }
        }
        let v: &'static T = Box::leak(Box::new(make()?));
        *made = Some((pid, v));
        Ok(v)
    }
}

impl<T: 'static> Default for PerProcess<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether this process is not the one `pid` names (a child forked from it, or later).
pub fn forked_since(pid: u32) -> bool {
    std::process::id() != pid
}
