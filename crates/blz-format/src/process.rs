//! Values that belong to one process: thread pools, the object-store runtime, the caches
//! and locks of an open handle. Threads do not follow a `fork()`, and neither does what
//! they were doing: a lock a parent's thread held at the fork stays held in the child for
//! ever, and a pool's jobs wait for threads the child does not have. A child forked after
//! such a value was made (Python's `multiprocessing` and PyTorch's data loaders fork by
//! default on Linux) gets its own, made on first use there.

use std::sync::atomic::{AtomicPtr, Ordering};

/// A value made once per process (`std::process::id()`): the first call in a process makes
/// it, later calls there return it.
///
/// Finding the value takes no lock (an atomic load and a compare of process ids), so a
/// child never waits on something its parent's threads held at the fork. The value made
/// in a parent is left as it is in a forked child, never dropped there (dropping a pool or
/// runtime would wait for, or signal, threads the child does not have; a handle's locks
/// may be held by them): it is leaked, once per fork and value. The process that made the
/// current value drops it with the cell.
pub struct PerProcess<T> {
    made: AtomicPtr<Made<T>>,
}

struct Made<T> {
    pid: u32,
    value: T,
}

// SAFETY: the cell owns at most one `T` at a time, which it hands out only as `&T`; moving
// the cell moves that ownership, and sharing it shares `&T`, exactly as for `Option<T>`.
unsafe impl<T: Send> Send for PerProcess<T> {}
// SAFETY: as above; `&PerProcess<T>` gives `&T` to any thread and makes `T`s on any thread.
unsafe impl<T: Send + Sync> Sync for PerProcess<T> {}

impl<T> PerProcess<T> {
    /// An empty cell, for a `static`.
    pub const fn new() -> Self {
        PerProcess {
            made: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// A cell holding `value` as this process's.
    pub fn with(value: T) -> Self {
        PerProcess {
            made: AtomicPtr::new(Box::into_raw(Box::new(Made {
                pid: std::process::id(),
                value,
            }))),
        }
    }

    /// This process's value, if it has one yet.
    pub fn get(&self) -> Option<&T> {
        let pid = std::process::id();
        let cur = self.made.load(Ordering::Acquire);
        // SAFETY: a pointer stored in `made` is a leaked `Box` that is freed only by `drop`
        // (which has `&mut self`, so no `&T` from this cell lives): it is valid for `&self`.
        let made = unsafe { cur.as_ref() }?;
        (made.pid == pid).then_some(&made.value)
    }

    /// This process's value, made by `make` on the first call in this process
    /// ([`Self::get_or_try_init`]).
    pub fn get_or_init(&self, make: impl FnOnce() -> T) -> &T {
        match self.get_or_try_init(|| Ok::<_, std::convert::Infallible>(make())) {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }

    /// This process's value, made by `make` on the first call in this process. Threads of
    /// one process that race to make it may each call `make`; one value wins, the others
    /// are dropped.
    ///
    /// # Errors
    /// What `make` returns; the next call tries again.
    pub fn get_or_try_init<E>(&self, make: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        if let Some(v) = self.get() {
            return Ok(v);
        }
        let pid = std::process::id();
        let new = Box::into_raw(Box::new(Made {
            pid,
            value: make()?,
        }));
        let mut cur = self.made.load(Ordering::Acquire);
        loop {
            // SAFETY: as in `get`.
            if let Some(made) = unsafe { cur.as_ref() } {
                if made.pid == pid {
                    // Another thread of this process made one first: keep it.
                    // SAFETY: `new` came from `Box::into_raw` above and was never shared.
                    drop(unsafe { Box::from_raw(new) });
                    return Ok(&made.value);
                }
            }
            match self
                .made
                .compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire)
            {
                // The value that was there (another process's) is leaked: `&T`s to it may
                // live, and dropping it could wait for threads this process does not have.
                // SAFETY: `new` is now owned by the cell, valid until its `drop`.
                Ok(_) => return Ok(unsafe { &(*new).value }),
                Err(now) => cur = now,
            }
        }
    }
}

impl<T> Default for PerProcess<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for PerProcess<T> {
    fn drop(&mut self) {
        let cur = *self.made.get_mut();
        if cur.is_null() {
            return;
        }
        // SAFETY: `cur` is the cell's own leaked `Box`, and `&mut self` means no `&T` from
        // it lives.
        let made = unsafe { Box::from_raw(cur) };
        if made.pid != std::process::id() {
            // Another process's value: left alone, as in `get_or_try_init`.
            std::mem::forget(made);
        }
    }
}

impl<T> std::fmt::Debug for PerProcess<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerProcess")
            .field("made_here", &self.get().is_some())
            .finish()
    }
}

/// Whether this process is not the one `pid` names (a child forked from it, or later).
pub fn forked_since(pid: u32) -> bool {
    std::process::id() != pid
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn one_value_per_process_made_once() {
        let cell: PerProcess<u64> = PerProcess::new();
        assert!(cell.get().is_none());
        let made = AtomicUsize::new(0);
        let make = || {
            made.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ()>(7)
        };
        assert_eq!(cell.get_or_try_init(make), Ok(&7));
        assert_eq!(cell.get_or_try_init(|| Ok::<_, ()>(8)), Ok(&7));
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert_eq!(cell.get(), Some(&7));
    }

    #[test]
    fn a_failed_make_is_tried_again() {
        let cell: PerProcess<u64> = PerProcess::new();
        assert_eq!(cell.get_or_try_init(|| Err("no")), Err("no"));
        assert!(cell.get().is_none());
        assert_eq!(cell.get_or_try_init(|| Ok::<_, &str>(3)), Ok(&3));
    }

    #[test]
    fn racing_threads_share_one_value_and_the_losers_are_dropped() {
        let cell: PerProcess<Arc<()>> = PerProcess::new();
        let token = Arc::new(());
        let got: Vec<usize> = std::thread::scope(|s| {
            let ts: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        let v = cell
                            .get_or_try_init(|| Ok::<_, ()>(Arc::clone(&token)))
                            .unwrap_or_else(|()| unreachable!());
                        Arc::as_ptr(v) as usize
                    })
                })
                .collect();
            ts.into_iter().filter_map(|t| t.join().ok()).collect()
        });
        assert_eq!(got.len(), 8);
        assert!(got.iter().all(|&p| p == got[0]));
        // The token, and the one clone the cell kept: every losing clone was dropped.
        assert_eq!(Arc::strong_count(&token), 2);
        drop(cell);
        assert_eq!(Arc::strong_count(&token), 1);
    }

    #[test]
    fn a_value_made_elsewhere_is_replaced_not_dropped() {
        let token = Arc::new(());
        let cell = PerProcess::with(Arc::clone(&token));
        // As a forked child sees it: the value is another process's.
        // SAFETY: the test's own cell, not shared.
        unsafe { (*cell.made.load(Ordering::Acquire)).pid ^= 1 };
        assert!(cell.get().is_none());
        let fresh = Arc::new(());
        let v = cell.get_or_try_init(|| Ok::<_, ()>(Arc::clone(&fresh)));
        assert_eq!(v.map(|a| Arc::ptr_eq(a, &fresh)), Ok(true));
        drop(cell);
        // This process's value is dropped with the cell; the other one is left as it was.
        assert_eq!(Arc::strong_count(&fresh), 1);
        assert_eq!(Arc::strong_count(&token), 2);
    }
}
