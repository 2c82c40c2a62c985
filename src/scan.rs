//! Parallel scans: fold every element of a dataset (or of a fixed-size table column) without
//! ever loading the whole of it.
//!
//! The work is split into units of consecutive chunks of one superchunk file. Units are
//! grouped by the location of their file ([`crate::locate`]: GlusterFS brick or local
//! device), so that the files one host stores are read together; groups and the units within
//! them run in parallel on a pool of [`ScanOptions::threads`] threads (default: all cores).
//! Each unit decodes its chunks one at a time into a buffer it reuses, and folds only the
//! valid elements: padding of edge chunks is dropped, and for N-d datasets whose inner axes
//! end inside a chunk the valid region is compacted first. Memory is therefore about one
//! chunk per thread, whatever the dataset's size.
//!
//! ```no_run
//! use blz::scan::{scan, reduce, Reduction, ScanOptions};
//! # fn main() -> blz::Result<()> {
//! let ds = blz::Dataset::open("temps.blz")?;
//! let opts = ScanOptions::default();
//! // closure form: count of elements above 0.5
//! let n = scan::<f64, u64>(&ds, &opts, || 0, |a, v| a + v.iter().filter(|&&x| x > 0.5).count() as u64, |a, b| a + b)?;
//! // built-in reduction
//! let mean = reduce(&ds, &opts, Reduction::Mean)?;
//! println!("{n} above 0.5, mean {:?}", mean.value);
//! # Ok(()) }
//! ```
//!
//! For a multi-host deployment, [`ScanOptions::hosts`] restricts a scan to the files stored
//! on some hosts: run one worker per host with its own host name, then combine the partial
//! results ([`Reduced::combine`] for the built-in reductions).

use crate::array::Dataset;
use crate::dtype::{DType, Element};
use crate::engine::{ArrayCore, Fetched};
use crate::error::{Error, Result};
use crate::locate::{locate_file, LocationKey};
use crate::table::Table;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

mod axis;
pub use axis::{reduce_axis, reduce_axis_column, ReduceOutput};

/// How a scan runs.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Worker threads; `None` uses every core.
    pub threads: Option<usize>,
    /// Group the work by file location (default true). Without it (and without `hosts`) no
    /// file is located, which saves one `getxattr` per file.
    pub group_by_location: bool,
    /// Only scan files stored on these hosts (host names as [`crate::locate`] reports them).
    pub hosts: Option<Vec<String>>,
    /// Let [`reduce_axis`] answer from the per-chunk statistics and sums where they decide
    /// the result (default true); false decodes every chunk (the same result, slower).
    pub statistics: bool,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            threads: None,
            group_by_location: true,
            hosts: None,
            statistics: true,
        }
    }
}

impl ScanOptions {
    /// Options with a given number of threads.
    pub fn with_threads(threads: usize) -> Self {
        ScanOptions {
            threads: Some(threads),
            ..Default::default()
        }
    }

    /// The number of threads the scan uses.
    pub fn thread_count(&self) -> usize {
        self.threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
    }
}

/// A pool of `n` threads for scans, kept for the process (the first few sizes asked; a
/// pool of any other size is made for the one scan): a scan on an object store runs on as
/// many threads as it keeps requests in flight, and starting 32 threads anew for every
/// reduction cost more than a small one takes.
///
/// # Errors
/// [`Error::InvalidArgument`] when the threads cannot be started.
pub(crate) fn pool_of(n: usize) -> Result<std::sync::Arc<rayon::ThreadPool>> {
    use std::sync::{Arc, Mutex, PoisonError};
    const KEPT: usize = 8;
    // By size, one map per process: a forked child has none of its parent's pools' threads
    // (their map stays, never dropped there).
    static POOLS: blz_format::process::PerProcess<Mutex<BTreeMap<usize, Arc<rayon::ThreadPool>>>> =
        blz_format::process::PerProcess::new();
    let mut pools = POOLS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(p) = pools.get(&n) {
        return Ok(Arc::clone(p));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(move |i| format!("blz-scan-{n}-{i}"))
        .build()
        .map_err(|e| Error::InvalidArgument(format!("cannot start {n} threads: {e}")))?;
    let pool = Arc::new(pool);
    if pools.len() < KEPT {
        pools.insert(n, Arc::clone(&pool));
    }
    Ok(pool)
}

/// The pool a reduction of `core` runs on, `None` for the caller's own: `opts`'s threads
/// when it names them, and on a storage that batches reads (an object store) as many as it
/// keeps reads in flight when that is more (each thread waits on its request more than it
/// decodes).
///
/// # Errors
/// As [`pool_of`].
pub(crate) fn reduction_pool(
    core: &ArrayCore,
    opts: &ScanOptions,
) -> Result<Option<std::sync::Arc<rayon::ThreadPool>>> {
    let threads = match (opts.threads, core.store.read_batching()) {
        (None, None) => return Ok(None),
        (_, Some((inflight, _))) => opts.thread_count().max(1).max(inflight),
        (Some(n), None) => n.max(1),
    };
    pool_of(threads).map(Some)
}

/// Consecutive chunks `k0..k1` of one superchunk file.
#[derive(Debug, Clone, Copy)]
struct Unit {
    k0: u64,
    k1: u64,
}

/// The work of a scan, grouped by location (`None`: the location could not be determined).
type Plan = Vec<(Option<LocationKey>, Vec<Unit>)>;

/// # Errors
/// Under a host filter: a file whose location cannot be read (it would be left out of
/// every host's part), and a host that holds none of the files (a misspelt name would
/// otherwise drop its part of the result without a word).
fn plan(core: &ArrayCore, shape: &[u64], opts: &ScanOptions) -> Result<Plan> {
    let n = core.nchunks(shape);
    let sc = core.store.superchunksize();
    let nfiles = core.store.nfiles(n);
    let locate = opts.group_by_location || opts.hosts.is_some();
    // Split files into several units when there are few files, so every thread has work.
    let target = (opts.thread_count() as u64 * 4).max(1);
    let pieces_per_file = target.div_ceil(nfiles.max(1)).max(1);
    let mut groups: BTreeMap<Option<LocationKey>, Vec<Unit>> = BTreeMap::new();
    let mut seen_hosts: Vec<String> = Vec::new();
    for f in 0..nfiles {
        let key = if locate {
            match locate_file(core.store.file_path(f)) {
                Ok(l) => Some(l.key()),
                Err(e) if opts.hosts.is_some() => return Err(e),
                Err(_) => None,
            }
        } else {
            None
        };
        if let Some(k) = &key {
            if !seen_hosts.contains(&k.host) {
                seen_hosts.push(k.host.clone());
            }
        }
        if let Some(hosts) = &opts.hosts {
            if !key.as_ref().is_some_and(|k| hosts.contains(&k.host)) {
                continue;
            }
        }
        let first = f * sc;
        let last = ((f + 1) * sc).min(n);
        let per = (last - first).div_ceil(pieces_per_file).max(1);
        let units = groups.entry(key).or_default();
        let mut k = first;
        while k < last {
            units.push(Unit {
                k0: k,
                k1: (k + per).min(last),
            });
            k += per;
        }
    }
    if let Some(hosts) = &opts.hosts {
        if let Some(h) = hosts.iter().find(|h| !seen_hosts.contains(h)) {
            return Err(Error::InvalidArgument(format!(
                "host {h:?} holds none of the files of {} (hosts that do: {})",
                core.store
                    .file_path(0)
                    .parent()
                    .map_or_else(String::new, |p| p.display().to_string()),
                if seen_hosts.is_empty() {
                    "none".to_string()
                } else {
                    seen_hosts.join(", ")
                }
            )));
        }
    }
    Ok(groups.into_iter().collect())
}

/// Per-thread buffers: one decoded chunk.
struct Bufs<T> {
    elems: Vec<T>,
    bytes: Vec<u8>,
    scratch: Vec<u8>,
}

/// Coordinates of chunk `k` in the chunk grid (C order).
fn chunk_coords(k: u64, grid: &[u64]) -> Vec<u64> {
    let mut c = vec![0; grid.len()];
    let mut rem = k;
    for i in (0..grid.len()).rev() {
        let g = grid[i].max(1);
        c[i] = rem % g;
        rem /= g;
    }
    c
}

/// Moves the valid region (`valid` extents of a chunk of `cs`) to the front of `buf`, in C
/// order; returns its length.
fn compact_valid<T: Copy>(buf: &mut [T], cs: &[u64], valid: &[u64]) -> usize {
    let nd = cs.len();
    let total: u64 = valid.iter().product();
    if valid[1..] == cs[1..] {
        return total as usize;
    }
    let run = valid[nd - 1] as usize;
    let mut strides = vec![1u64; nd];
    for i in (0..nd - 1).rev() {
        strides[i] = strides[i + 1] * cs[i + 1];
    }
    let outer: u64 = valid[..nd - 1].iter().product();
    let mut idx = vec![0u64; nd - 1];
    let mut dst = 0usize;
    for _ in 0..outer {
        let src: u64 = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
        // dst <= src always: the valid region is a sub-box read in the same order.
        buf.copy_within(src as usize..src as usize + run, dst);
        dst += run;
        for ax in (0..nd - 1).rev() {
            idx[ax] += 1;
            if idx[ax] < valid[ax] {
                break;
            }
            idx[ax] = 0;
        }
    }
    dst
}

fn check_type<T: Element>(path: &Path, dtype: DType) -> Result<()> {
    if T::accepts(&dtype) {
        Ok(())
    } else {
        Err(Error::Mismatch {
            dataset: path.to_path_buf(),
            reason: format!(
                "dataset holds {dtype}, the Rust element type is {}",
                std::any::type_name::<T>()
            ),
        })
    }
}

/// Decodes chunk `k` into the buffers and returns its valid elements.
fn decode_valid<'b, T: Element>(
    core: &ArrayCore,
    shape: &[u64],
    grid: &[u64],
    k: u64,
    b: &'b mut Bufs<T>,
    fetched: Option<&Fetched>,
) -> Result<&'b [T]> {
    let isz = core.itemsize();
    let decode = |dst: &mut [u8], scratch: &mut Vec<u8>| match fetched {
        Some(f) => core.decode_fetched_into(k, dst, scratch, f),
        None => core.decode_chunk_into(k, dst, scratch),
    };
    if T::POD {
        // SAFETY: POD elements have no padding and every bit pattern is valid (Element's
        // contract), so the element buffer may be filled as bytes.
        let dst = unsafe {
            std::slice::from_raw_parts_mut(
                b.elems.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(b.elems.as_slice()),
            )
        };
        decode(dst, &mut b.scratch)?;
    } else {
        decode(&mut b.bytes, &mut b.scratch)?;
        for (x, c) in b.elems.iter_mut().zip(b.bytes.chunks_exact(isz)) {
            *x = T::from_ne_bytes(c);
        }
    }
    let coords = chunk_coords(k, grid);
    let valid: Vec<u64> = coords
        .iter()
        .zip(&core.chunkshape)
        .zip(shape)
        .map(|((&c, &cs), &n)| (n - c * cs).min(cs))
        .collect();
    let len = compact_valid(&mut b.elems, &core.chunkshape, &valid);
    Ok(&b.elems[..len])
}

fn scan_core<T, A>(
    core: &ArrayCore,
    shape: &[u64],
    path: &Path,
    opts: &ScanOptions,
    init: &(impl Fn() -> A + Sync),
    fold: &(impl Fn(A, &[T]) -> A + Sync),
    combine: &(impl Fn(A, A) -> A + Sync),
) -> Result<A>
where
    T: Element,
    A: Send,
{
    check_type::<T>(path, core.dtype)?;
    let threads = opts.thread_count();
    if threads == 0 {
        return Err(Error::InvalidArgument(
            "a scan needs at least one thread".into(),
        ));
    }
    let plan = plan(core, shape, opts)?;
    let grid = core.grid(shape);
    let chunk_len = core.chunk_len();
    let isz = core.itemsize();
    let new_bufs = || Bufs::<T> {
        elems: vec![T::default(); chunk_len],
        bytes: if T::POD {
            Vec::new()
        } else {
            vec![0u8; chunk_len * isz]
        },
        scratch: Vec::new(),
    };
    // Where every read is a request (an object store), each unit's chunks are fetched
    // together, about one request's bytes at a time, and many units are in flight at once
    // (they wait on the network more than they decode).
    let batching = core.store.read_batching();
    let (threads, per_fetch) = match batching {
        Some((inflight, part)) => {
            let chunk_bytes = (chunk_len * isz).max(1) as u64;
            (threads.max(inflight), (part / chunk_bytes).max(1))
        }
        None => (threads, 0),
    };
    let pool = pool_of(threads)?;
    let plan: Plan = if per_fetch > 0 {
        plan.into_iter()
            .map(|(key, us)| {
                let split = us
                    .iter()
                    .flat_map(|u| {
                        (u.k0..u.k1).step_by(per_fetch as usize).map(move |k| Unit {
                            k0: k,
                            k1: (k + per_fetch).min(u.k1),
                        })
                    })
                    .collect();
                (key, split)
            })
            .collect()
    } else {
        plan
    };
    pool.install(|| {
        plan.par_iter()
            .map(|(_, units)| {
                units
                    .par_iter()
                    .map_init(new_bufs, |b, u| -> Result<A> {
                        let mut acc = init();
                        let fetched = match batching {
                            Some(_) if u.k1 > u.k0 + 1 => Some(core.store.fetch_run(u.k0, u.k1)?),
                            _ => None,
                        };
                        for k in u.k0..u.k1 {
                            let v = decode_valid(core, shape, &grid, k, b, fetched.as_ref())?;
                            acc = fold(acc, v);
                        }
                        Ok(acc)
                    })
                    .try_reduce(init, |a, b| Ok(combine(a, b)))
            })
            .try_reduce(init, |a, b| Ok(combine(a, b)))
    })
}

/// What a scan runs over: a dataset, or one fixed-size column of a table. Both are one
/// chunked store ([`ArrayCore`]) of a known shape; [`Target::run`] hands those to a scan and
/// turns an error met after another handle's commit into [`Error::Changed`].
enum Target<'a> {
    Dataset(&'a Dataset),
    Column(&'a Table, &'a str),
}

impl Target<'_> {
    fn run<A>(&self, f: impl FnOnce(&ArrayCore, &[u64], &Path) -> Result<A>) -> Result<A> {
        match *self {
            Target::Dataset(ds) => ds.unless_changed(f(ds.core(), ds.shape(), ds.path())),
            Target::Column(table, column) => {
                let core = table.fixed_core(column)?;
                let path = table.path().join(column);
                table.unless_changed(f(core, &[table.nrows()], &path))
            }
        }
    }

    fn scan<T, A>(
        &self,
        opts: &ScanOptions,
        init: impl Fn() -> A + Sync,
        fold: impl Fn(A, &[T]) -> A + Sync,
        combine: impl Fn(A, A) -> A + Sync,
    ) -> Result<A>
    where
        T: Element,
        A: Send,
    {
        self.run(|core, shape, path| scan_core(core, shape, path, opts, &init, &fold, &combine))
    }
}

/// Folds every element of a dataset, in parallel: `fold` gets the accumulator and a slice of
/// consecutive valid elements (C order within one chunk), partial accumulators (each started
/// with `init`) are merged with `combine`. The order in which slices are folded and partial
/// results combined is unspecified.
///
/// # Errors
/// [`Error::Mismatch`] when `T` does not hold the dataset's dtype; corrupt chunks and I/O
/// errors naming the file.
pub fn scan<T, A>(
    ds: &Dataset,
    opts: &ScanOptions,
    init: impl Fn() -> A + Sync,
    fold: impl Fn(A, &[T]) -> A + Sync,
    combine: impl Fn(A, A) -> A + Sync,
) -> Result<A>
where
    T: Element,
    A: Send,
{
    Target::Dataset(ds).scan(opts, init, fold, combine)
}

/// As [`scan`], over one fixed-size column of a table.
///
/// # Errors
/// As [`scan`]; [`Error::InvalidArgument`] for an unknown or variable-length column.
pub fn scan_column<T, A>(
    table: &Table,
    column: &str,
    opts: &ScanOptions,
    init: impl Fn() -> A + Sync,
    fold: impl Fn(A, &[T]) -> A + Sync,
    combine: impl Fn(A, A) -> A + Sync,
) -> Result<A>
where
    T: Element,
    A: Send,
{
    Target::Column(table, column).scan(opts, init, fold, combine)
}

/// A built-in reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reduction {
    /// Number of elements.
    Count,
    /// Sum.
    Sum,
    /// Smallest element.
    Min,
    /// Largest element.
    Max,
    /// Arithmetic mean.
    Mean,
    /// Variance (divisor `n - ddof`; [`reduce`] uses `ddof` 0).
    Var,
    /// Standard deviation (the square root of [`Reduction::Var`]).
    Std,
    /// Index of the first smallest element (the first NaN, if any).
    ArgMin,
    /// Index of the first largest element (the first NaN, if any).
    ArgMax,
    /// Whether any element is nonzero.
    Any,
    /// Whether every element is nonzero.
    All,
    /// Number of nonzero elements.
    #[serde(rename = "count_nonzero")]
    CountNonzero,
}

impl Reduction {
    /// Every reduction, in the order of their names in [`Reduction::NAMES`].
    pub const ALL: [Reduction; 12] = [
        Reduction::Count,
        Reduction::Sum,
        Reduction::Min,
        Reduction::Max,
        Reduction::Mean,
        Reduction::Var,
        Reduction::Std,
        Reduction::ArgMin,
        Reduction::ArgMax,
        Reduction::Any,
        Reduction::All,
        Reduction::CountNonzero,
    ];
    /// The names [`Reduction`] parses from and prints as (numpy's function names).
    pub const NAMES: [&'static str; 12] = [
        "count",
        "sum",
        "min",
        "max",
        "mean",
        "var",
        "std",
        "argmin",
        "argmax",
        "any",
        "all",
        "count_nonzero",
    ];
}

impl std::str::FromStr for Reduction {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.to_ascii_lowercase().replace('-', "_");
        Reduction::NAMES
            .iter()
            .position(|n| *n == lower)
            .and_then(|i| Reduction::ALL.get(i).copied())
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "unknown reduction {s:?} ({})",
                    Reduction::NAMES.join(", ")
                ))
            })
    }
}

impl std::fmt::Display for Reduction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = Reduction::ALL.iter().position(|r| r == self).unwrap_or(0);
        f.write_str(Reduction::NAMES.get(i).copied().unwrap_or("count"))
    }
}

/// A reduction's value: integers exactly (signed in `i128`, unsigned in `u128`), floats as
/// `f64`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum Scalar {
    /// From a signed integer dtype.
    Int(i128),
    /// From an unsigned integer dtype, or a count.
    UInt(u128),
    /// From a float dtype, or a mean.
    Float(f64),
}

impl Scalar {
    /// The value as `f64` (rounded for large integers).
    pub fn as_f64(&self) -> f64 {
        match *self {
            Scalar::Int(v) => v as f64,
            Scalar::UInt(v) => v as f64,
            Scalar::Float(v) => v,
        }
    }
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Int(v) => write!(f, "{v}"),
            Scalar::UInt(v) => write!(f, "{v}"),
            Scalar::Float(v) => write!(f, "{v}"),
        }
    }
}

/// The result of a built-in reduction.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Reduced {
    /// Which reduction.
    pub op: Reduction,
    /// The dtype scanned.
    pub dtype: DType,
    /// Elements scanned.
    pub count: u64,
    /// The result; `None` for the min, max or mean of no elements.
    pub value: Option<Scalar>,
}

impl Reduced {
    /// Merges the results of the same reduction over disjoint parts of a dataset (e.g. one
    /// per host).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the two are different reductions or dtypes.
    pub fn combine(self, other: Reduced) -> Result<Reduced> {
        if self.op != other.op || self.dtype != other.dtype {
            return Err(Error::InvalidArgument(format!(
                "cannot combine {} of {} with {} of {}",
                self.op, self.dtype, other.op, other.dtype
            )));
        }
        let count = self.count + other.count;
        let value = match (self.value, other.value) {
            (None, v) | (v, None) => v,
            (Some(a), Some(b)) => Some(match self.op {
                Reduction::Count | Reduction::Sum => match (a, b) {
                    (Scalar::Int(x), Scalar::Int(y)) => Scalar::Int(x + y),
                    (Scalar::UInt(x), Scalar::UInt(y)) => Scalar::UInt(x + y),
                    _ => Scalar::Float(a.as_f64() + b.as_f64()),
                },
                Reduction::Min | Reduction::Max => {
                    let (x, y) = (a.as_f64(), b.as_f64());
                    if x.is_nan() {
                        a
                    } else if y.is_nan() {
                        b
                    } else if (self.op == Reduction::Min) == (lt(&a, &b)) {
                        a
                    } else {
                        b
                    }
                }
                Reduction::Mean => Scalar::Float(
                    (a.as_f64() * self.count as f64 + b.as_f64() * other.count as f64)
                        / count as f64,
                ),
                Reduction::Any => Scalar::UInt(u128::from(a.as_f64() != 0.0 || b.as_f64() != 0.0)),
                Reduction::All => Scalar::UInt(u128::from(a.as_f64() != 0.0 && b.as_f64() != 0.0)),
                Reduction::CountNonzero => match (a, b) {
                    (Scalar::Int(x), Scalar::Int(y)) => Scalar::Int(x + y),
                    _ => Scalar::Float(a.as_f64() + b.as_f64()),
                },
                Reduction::Var | Reduction::Std | Reduction::ArgMin | Reduction::ArgMax => {
                    return Err(Error::InvalidArgument(format!(
                        "results of {} over parts cannot be combined (their values alone do \
                         not determine the whole's)",
                        self.op
                    )))
                }
            }),
        };
        Ok(Reduced {
            op: self.op,
            dtype: self.dtype,
            count,
            value,
        })
    }
}

fn lt(a: &Scalar, b: &Scalar) -> bool {
    match (a, b) {
        (Scalar::Int(x), Scalar::Int(y)) => x < y,
        (Scalar::UInt(x), Scalar::UInt(y)) => x < y,
        _ => a.as_f64() < b.as_f64(),
    }
}

/// Numeric element types the built-in reductions handle.
trait Num: Element + PartialOrd {
    /// The sum's accumulator: `i128`, `u128` or `f64`.
    type Sum: Copy + Send + Default + std::ops::Add<Output = Self::Sum>;
    fn sum_slice(v: &[Self]) -> Self::Sum;
    fn sum_scalar(s: Self::Sum) -> Scalar;
    fn scalar(self) -> Scalar;
    fn is_nan(self) -> bool {
        false
    }
}

macro_rules! int_num {
    ($t:ty, $acc:ty, $var:ident) => {
        impl Num for $t {
            type Sum = $acc;
            fn sum_slice(v: &[Self]) -> $acc {
                // Within a chunk (at most 2^31 elements) an i64/u64 cannot overflow for
                // 32-bit and narrower types; 64-bit types go straight to 128 bits.
                if std::mem::size_of::<$t>() <= 4 {
                    v.iter().map(|&x| x as i64).sum::<i64>() as $acc
                } else {
                    v.iter().map(|&x| x as $acc).sum()
                }
            }
            fn sum_scalar(s: $acc) -> Scalar {
                Scalar::$var(s)
            }
            fn scalar(self) -> Scalar {
                Scalar::$var(self as $acc)
            }
        }
    };
}
int_num!(i8, i128, Int);
int_num!(i16, i128, Int);
int_num!(i32, i128, Int);
int_num!(i64, i128, Int);
int_num!(u8, u128, UInt);
int_num!(u16, u128, UInt);
int_num!(u32, u128, UInt);
int_num!(u64, u128, UInt);

/// Sums in eight independent `f64` lanes (faster, and more accurate than one running sum).
fn sum_f64_lanes(v: impl ExactSizeIterator<Item = f64> + Clone) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut it = v;
    loop {
        let mut done = false;
        for l in &mut lanes {
            match it.next() {
                Some(x) => *l += x,
                None => {
                    done = true;
                    break;
                }
            }
        }
        if done {
            break;
        }
    }
    ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
}

macro_rules! float_num {
    ($t:ty) => {
        impl Num for $t {
            type Sum = f64;
            fn sum_slice(v: &[Self]) -> f64 {
                let mut lanes = [0.0f64; 8];
                let mut chunks = v.chunks_exact(8);
                for c in &mut chunks {
                    for (l, &x) in lanes.iter_mut().zip(c) {
                        *l += x as f64;
                    }
                }
                let tail = sum_f64_lanes(chunks.remainder().iter().map(|&x| x as f64));
                ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
                    + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
                    + tail
            }
            fn sum_scalar(s: f64) -> Scalar {
                Scalar::Float(s)
            }
            fn scalar(self) -> Scalar {
                Scalar::Float(self as f64)
            }
            fn is_nan(self) -> bool {
                self.is_nan()
            }
        }
    };
}
float_num!(f32);
float_num!(f64);

/// A partial result of a built-in reduction.
struct Acc<T: Num> {
    count: u64,
    sum: T::Sum,
    best: Option<T>,
    nan: bool,
}

fn reduce_typed<T: Num>(
    core: &ArrayCore,
    shape: &[u64],
    path: &Path,
    opts: &ScanOptions,
    op: Reduction,
) -> Result<Reduced> {
    let init = || Acc::<T> {
        count: 0,
        sum: T::Sum::default(),
        best: None,
        nan: false,
    };
    let better = move |x: T, b: T| match op {
        Reduction::Min => x < b,
        _ => x > b,
    };
    let fold = move |mut a: Acc<T>, v: &[T]| {
        a.count += v.len() as u64;
        match op {
            Reduction::Sum | Reduction::Mean => a.sum = a.sum + T::sum_slice(v),
            Reduction::Min | Reduction::Max => {
                for &x in v {
                    if x.is_nan() {
                        a.nan = true;
                    } else if a.best.is_none_or(|b| better(x, b)) {
                        a.best = Some(x);
                    }
                }
            }
            // The others go through `axis::reduce_core` (see `reduce_core`).
            _ => {}
        }
        a
    };
    let combine = move |a: Acc<T>, b: Acc<T>| Acc {
        count: a.count + b.count,
        sum: a.sum + b.sum,
        best: match (a.best, b.best) {
            (Some(x), Some(y)) => Some(if better(y, x) { y } else { x }),
            (x, y) => x.or(y),
        },
        nan: a.nan || b.nan,
    };
    let a = scan_core(core, shape, path, opts, &init, &fold, &combine)?;
    let value = match op {
        Reduction::Sum => Some(T::sum_scalar(a.sum)),
        Reduction::Mean => {
            (a.count > 0).then(|| Scalar::Float(T::sum_scalar(a.sum).as_f64() / a.count as f64))
        }
        Reduction::Min | Reduction::Max => {
            if a.nan {
                Some(Scalar::Float(f64::NAN))
            } else {
                a.best.map(T::scalar)
            }
        }
        _ => Some(Scalar::UInt(u128::from(a.count))),
    };
    Ok(Reduced {
        op,
        dtype: core.dtype,
        count: a.count,
        value,
    })
}

fn reduce_core(
    core: &ArrayCore,
    shape: &[u64],
    path: &Path,
    opts: &ScanOptions,
    op: Reduction,
) -> Result<Reduced> {
    if matches!(
        op,
        Reduction::Var
            | Reduction::Std
            | Reduction::ArgMin
            | Reduction::ArgMax
            | Reduction::Any
            | Reduction::All
            | Reduction::CountNonzero
    ) {
        let out = axis::reduce_core(core, shape, path, opts, op, None, 0.0, false)?;
        return Ok(Reduced {
            op,
            dtype: core.dtype,
            count: shape.iter().product(),
            value: out.scalar(),
        });
    }
    match core.dtype {
        DType::I8 => reduce_typed::<i8>(core, shape, path, opts, op),
        DType::I16 => reduce_typed::<i16>(core, shape, path, opts, op),
        DType::I32 => reduce_typed::<i32>(core, shape, path, opts, op),
        DType::I64 => reduce_typed::<i64>(core, shape, path, opts, op),
        DType::U8 => reduce_typed::<u8>(core, shape, path, opts, op),
        DType::U16 => reduce_typed::<u16>(core, shape, path, opts, op),
        DType::U32 => reduce_typed::<u32>(core, shape, path, opts, op),
        DType::U64 => reduce_typed::<u64>(core, shape, path, opts, op),
        DType::F32 => reduce_typed::<f32>(core, shape, path, opts, op),
        DType::F64 => reduce_typed::<f64>(core, shape, path, opts, op),
        other if op == Reduction::Count => {
            // Not numeric: count by reading every chunk as bytes of the right size.
            let count = match other {
                DType::Bool => scan_core::<bool, u64>(
                    core,
                    shape,
                    path,
                    opts,
                    &|| 0,
                    &|a, v| a + v.len() as u64,
                    &|a, b| a + b,
                )?,
                _ => shape.iter().product(),
            };
            Ok(Reduced {
                op,
                dtype: other,
                count,
                value: Some(Scalar::UInt(u128::from(count))),
            })
        }
        other => Err(Error::InvalidArgument(format!(
            "{op} needs a numeric dtype, {} holds {other}",
            path.display()
        ))),
    }
}

/// Runs a built-in reduction over a dataset of any numeric dtype (`count` works on every
/// dtype). Sums of integers are exact (`i128`/`u128`); floats are summed in `f64`. Min and
/// max of floats are NaN when any element is NaN (as NumPy's `min`/`max`).
///
/// # Errors
/// As [`scan`]; [`Error::InvalidArgument`] for sum, min, max or mean of a non-numeric dtype.
pub fn reduce(ds: &Dataset, opts: &ScanOptions, op: Reduction) -> Result<Reduced> {
    Target::Dataset(ds).run(|core, shape, path| reduce_core(core, shape, path, opts, op))
}

/// As [`reduce`], over one fixed-size column of a table.
///
/// # Errors
/// As [`reduce`] and [`scan_column`]; [`Error::InvalidArgument`] for a nullable column
/// holding nulls.
pub fn reduce_column(
    table: &Table,
    column: &str,
    opts: &ScanOptions,
    op: Reduction,
) -> Result<Reduced> {
    if table.is_nullable(column)?
        && table
            .column_null_counts(column)?
            .iter()
            .any(|n| *n != Some(0))
    {
        // The values of null rows are the fill value: a reduction would count them.
        return Err(Error::InvalidArgument(format!(
            "column {column} of {} holds nulls, which a reduction of its values would count \
             as its fill value: reduce it with blz::sql (nulls skipped) or a where filter",
            table.path().display()
        )));
    }
    Target::Column(table, column).run(|core, shape, path| reduce_core(core, shape, path, opts, op))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_keeps_the_valid_box() {
        // chunk 3x4, valid 2x3
        let mut b: Vec<u32> = (0..12).collect();
        let n = compact_valid(&mut b, &[3, 4], &[2, 3]);
        assert_eq!(&b[..n], &[0, 1, 2, 4, 5, 6]);
        // 3-d: chunk 2x2x3, valid 2x1x2
        let mut b: Vec<u32> = (0..12).collect();
        let n = compact_valid(&mut b, &[2, 2, 3], &[2, 1, 2]);
        assert_eq!(&b[..n], &[0, 1, 6, 7]);
        // only axis 0 short: a prefix
        let mut b: Vec<u32> = (0..12).collect();
        assert_eq!(compact_valid(&mut b, &[3, 4], &[1, 4]), 4);
    }

    #[test]
    fn coords_in_c_order() {
        assert_eq!(chunk_coords(5, &[2, 3]), vec![1, 2]);
        assert_eq!(chunk_coords(0, &[1]), vec![0]);
    }

    #[test]
    fn reductions_parse_and_combine() {
        assert_eq!("SUM".parse::<Reduction>().unwrap(), Reduction::Sum);
        assert!("median".parse::<Reduction>().is_err());
        let a = Reduced {
            op: Reduction::Min,
            dtype: DType::I64,
            count: 2,
            value: Some(Scalar::Int(-3)),
        };
        let b = Reduced {
            value: Some(Scalar::Int(5)),
            ..a.clone()
        };
        assert_eq!(a.clone().combine(b).unwrap().value, Some(Scalar::Int(-3)));
        let m1 = Reduced {
            op: Reduction::Mean,
            dtype: DType::F64,
            count: 1,
            value: Some(Scalar::Float(1.0)),
        };
        let m2 = Reduced {
            count: 3,
            value: Some(Scalar::Float(3.0)),
            ..m1.clone()
        };
        assert_eq!(
            m1.clone().combine(m2).unwrap().value,
            Some(Scalar::Float(2.5))
        );
        assert!(a.combine(m1).is_err());
    }
}
