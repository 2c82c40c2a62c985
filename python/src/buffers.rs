//! Memory for the numpy arrays that reads return, reused.
//!
//! A large read decodes into memory the kernel has just handed over: every page of it is
//! faulted in and zeroed before blz writes a byte (glibc maps allocations over 32 MiB
//! afresh each time and unmaps them when freed, and dask's worker processes set
//! `MALLOC_TRIM_THRESHOLD_` so that even smaller blocks go back to the system). Zeroing is
//! a third or more of a whole read's time. A [`ReadBuffer`] is the memory under a numpy
//! array that a read returns; when numpy frees the array, the memory comes back here and
//! the next read of about the same size decodes into it, its pages already mapped.
//!
//! The pool holds at most [`Settings::max_bytes`] (1 GiB unless `BLZ_BUFFER_POOL_MB` or
//! `blz.buffer_pool` says otherwise) and gives memory back to the system when it has
//! not been reused for [`Settings::keep`] (30 s), as a memory allocator's decay does; a
//! thread wakes for that only while the pool holds something.

use blz::process::PerProcess;
use memmap2::{Advice, MmapMut};
use pyo3::ffi;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Reads smaller than this allocate through numpy as usual: its allocator reuses small
/// blocks itself, and their pages are few.
pub(crate) const MIN_BYTES: usize = 1 << 20;

/// Pooled sizes are rounded up to this (a huge page), so reads of nearly the same size
/// (the last block of an array is usually shorter) share buffers.
const GRAIN: usize = 2 << 20;

#[derive(Clone, Copy, Debug)]
struct Settings {
    /// The most the pool holds, in bytes (0: no pooling).
    max_bytes: usize,
    /// How long a buffer nobody reused stays.
    keep: Duration,
}

/// [`Settings::max_bytes`], [`NOT_READ`] until the environment is read. The settings are the
/// process's and its forked children's (atomics: nothing a parent's thread held at a fork
/// can stay held); each process has a pool of its own.
static MAX_BYTES: AtomicUsize = AtomicUsize::new(NOT_READ);
const NOT_READ: usize = usize::MAX;
/// [`Settings::keep`], in nanoseconds.
static KEEP_NS: AtomicU64 = AtomicU64::new(30_000_000_000);

fn settings() -> Settings {
    let mut max_bytes = MAX_BYTES.load(Ordering::Relaxed);
    if max_bytes == NOT_READ {
        let mb = std::env::var("BLZ_BUFFER_POOL_MB")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(1024);
        max_bytes = mb.saturating_mul(1 << 20).min(NOT_READ - 1);
        // A `blz.buffer_pool` call meanwhile wins.
        max_bytes = match MAX_BYTES.compare_exchange(
            NOT_READ,
            max_bytes,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => max_bytes,
            Err(set) => set,
        };
    }
    Settings {
        max_bytes,
        keep: Duration::from_nanos(KEEP_NS.load(Ordering::Relaxed)),
    }
}

#[derive(Default)]
struct Held {
    /// Free buffers, the most recently returned last, with the time each came back.
    free: Vec<(MmapMut, Instant)>,
    bytes: usize,
    /// Takes served from the pool and takes that allocated.
    hits: u64,
    misses: u64,
    /// Whether the thread that gives back stale buffers runs.
    sweeping: bool,
}

#[derive(Default)]
struct Pool {
    held: Mutex<Held>,
    /// Signalled when a buffer comes back (the sweeping thread sleeps on it).
    returned: Condvar,
}

/// This process's pool: a child forked from a process that pooled buffers starts with an
/// empty one (its parent's may have been locked, or swept by a thread, at the fork).
fn pool() -> &'static Pool {
    static POOL: PerProcess<Pool> = PerProcess::new();
    POOL.get_or_init(Pool::default)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The pool's state stays consistent whatever panicked while it was held.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Pool {
    /// A buffer of at least `len` bytes: the smallest free one that is not much larger, or a
    /// new one.
    fn take(&self, len: usize) -> std::io::Result<MmapMut> {
        let size = len.div_ceil(GRAIN).saturating_mul(GRAIN);
        {
            let mut held = lock(&self.held);
            let fits = held
                .free
                .iter()
                .enumerate()
                .filter(|(_, (b, _))| b.len() >= len && b.len() - len <= size / 4 + GRAIN)
                .min_by_key(|(_, (b, _))| b.len())
                .map(|(i, _)| i);
            if let Some(i) = fits {
                let (b, _) = held.free.swap_remove(i);
                held.bytes -= b.len();
                held.hits += 1;
                return Ok(b);
            }
            held.misses += 1;
        }
        fresh(size)
    }

    /// Takes back a buffer numpy no longer uses: kept while the pool has room (oldest
    /// buffers leave first), freed otherwise.
    fn give(&'static self, buf: MmapMut) {
        let settings = settings();
        let mut gone = Vec::new();
        {
            let mut held = lock(&self.held);
            if buf.len() > settings.max_bytes {
                gone.push(buf);
            } else {
                held.bytes += buf.len();
                held.free.push((buf, Instant::now()));
                while held.bytes > settings.max_bytes {
                    let (b, _) = held.free.remove(0);
                    held.bytes -= b.len();
                    gone.push(b);
                }
                if !held.sweeping && !held.free.is_empty() {
                    held.sweeping = std::thread::Builder::new()
                        .name("blz-buffers".into())
                        .spawn(move || self.sweep())
                        .is_ok();
                }
                self.returned.notify_all();
            }
        }
        drop(gone); // unmapped outside the lock
    }

    /// Gives stale buffers back to the system, while the pool holds any.
    fn sweep(&self) {
        let mut held = lock(&self.held);
        loop {
            let keep = settings().keep;
            let now = Instant::now();
            let mut gone = Vec::new();
            let mut i = 0;
            while i < held.free.len() {
                if now.duration_since(held.free[i].1) >= keep {
                    let (b, _) = held.free.remove(i);
                    held.bytes -= b.len();
                    gone.push(b);
                } else {
                    i += 1;
                }
            }
            if held.free.is_empty() {
                held.sweeping = false;
                return;
            }
            drop(held);
            drop(gone);
            let oldest = {
                let h = lock(&self.held);
                h.free.iter().map(|(_, t)| *t).min()
            };
            let wait = oldest
                .map(|t| (t + keep).saturating_duration_since(Instant::now()))
                .unwrap_or(keep)
                .max(Duration::from_millis(50));
            let h = lock(&self.held);
            held = self
                .returned
                .wait_timeout(h, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

/// A new anonymous mapping of `size` bytes (at least one), advised for huge pages as numpy
/// advises its own large arrays: the read that fills it faults in 2 MiB at a time, not
/// 4 KiB (each fault costs far more than zeroing the page, in a virtual machine above all).
fn fresh(size: usize) -> std::io::Result<MmapMut> {
    let m = MmapMut::map_anon(size.max(1))?;
    // Only a hint: a kernel without transparent huge pages maps small ones.
    let _ = m.advise(Advice::HugePage);
    Ok(m)
}

/// Memory under a numpy array a read returns (`numpy.frombuffer` over it), given back to
/// the pool when the array and every view of it are gone.
#[pyclass(module = "blz._blz", frozen)]
pub(crate) struct ReadBuffer {
    /// The mapping (taken back on drop), and its start: the mapping never moves.
    map: Option<MmapMut>,
    ptr: *mut u8,
    /// Bytes exposed.
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this object alone; Python's buffer protocol
// hands out pointers into it, and numpy's own locking rules (none) apply to what is written
// there, as for any numpy array.
unsafe impl Send for ReadBuffer {}
// SAFETY: as above; the object itself is never mutated after construction.
unsafe impl Sync for ReadBuffer {}

#[pymethods]
impl ReadBuffer {
    /// `len` writable bytes, their contents unspecified (a read overwrites all of them).
    #[new]
    pub(crate) fn new(len: usize) -> PyResult<Self> {
        let p = pool();
        let mut map = if settings().max_bytes == 0 || len < MIN_BYTES {
            fresh(len)
        } else {
            p.take(len)
        }
        .map_err(|e| {
            pyo3::exceptions::PyMemoryError::new_err(format!(
                "cannot map {len} bytes for a read's result: {e}"
            ))
        })?;
        Ok(ReadBuffer {
            ptr: map.as_mut_ptr(),
            map: Some(map),
            len,
        })
    }

    fn __len__(&self) -> usize {
        self.len
    }

    /// The buffer protocol: one writable run of `len` bytes.
    ///
    /// # Safety
    /// Called by the interpreter with a valid `view`.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: std::os::raw::c_int,
    ) -> PyResult<()> {
        let me = slf.get();
        let len = isize::try_from(me.len)
            .map_err(|_| pyo3::exceptions::PyOverflowError::new_err("buffer too large"))?;
        // SAFETY: `view` comes from the interpreter; the memory lives as long as `slf`, whose
        // reference the view takes (PyBuffer_FillInfo increments it).
        let rc =
            unsafe { ffi::PyBuffer_FillInfo(view, slf.as_ptr(), me.ptr.cast(), len, 0, flags) };
        if rc == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }
}

impl Drop for ReadBuffer {
    fn drop(&mut self) {
        let p = pool();
        if let Some(map) = self.map.take() {
            if map.len() >= MIN_BYTES && settings().max_bytes > 0 {
                p.give(map);
            }
        }
    }
}

/// `blz.buffer_pool`: changes the pool's limits (either may be None) and returns its
/// state: `(max_bytes, keep_seconds, held_bytes, hits, misses)`.
#[pyfunction]
#[pyo3(signature = (max_bytes=None, keep_seconds=None))]
pub(crate) fn buffer_pool(
    max_bytes: Option<usize>,
    keep_seconds: Option<f64>,
) -> PyResult<(usize, f64, usize, u64, u64)> {
    let p = pool();
    if let Some(k) = keep_seconds {
        let keep = Duration::try_from_secs_f64(k).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "keep_seconds must be a non-negative number of seconds, not {k}"
            ))
        })?;
        KEEP_NS.store(
            u64::try_from(keep.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }
    if let Some(m) = max_bytes {
        MAX_BYTES.store(m.min(NOT_READ - 1), Ordering::Relaxed);
    }
    let s = settings();
    let mut gone = Vec::new();
    let state = {
        let mut held = lock(&p.held);
        while held.bytes > s.max_bytes {
            let (b, _) = held.free.remove(0);
            held.bytes -= b.len();
            gone.push(b);
        }
        p.returned.notify_all();
        (
            s.max_bytes,
            s.keep.as_secs_f64(),
            held.bytes,
            held.hits,
            held.misses,
        )
    };
    drop(gone);
    Ok(state)
}
