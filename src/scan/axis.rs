//! Reductions along axes, as numpy's `sum`, `min`, `max`, `mean`, `std`, `var`, `argmin`,
//! `argmax`, `any`, `all` and `count_nonzero` with `axis=`: [`reduce_axis`] and
//! [`reduce_axis_column`].
//!
//! The chunks are grouped by their position along the kept axes: every chunk of a group adds
//! to the same box of the output (the chunk's box without the reduced axes, its *tile*).
//! A group's chunks are split into units that run in parallel on rayon's pool; a unit
//! decodes its chunks one at a time into a buffer its thread reuses (each chunk once) and
//! folds the chunk's valid elements into a tile of accumulators; the tiles are then merged
//! into the output at their position. Memory is a chunk per thread plus the tiles in flight
//! (at most the output's size), never the whole array.
//!
//! The inner loop walks the valid box of a chunk in runs of contiguous elements: a run along
//! reduced axes folds into one accumulator (float sums are pairwise, as numpy's, in `f64`;
//! min and max keep eight lanes), a run along kept axes folds element by element into
//! consecutive accumulators. Variances are per-run two-pass sums merged by Chan's formula,
//! or Welford updates, so they stay exact to a few ulps whatever the mean.
//!
//! ```no_run
//! use blz::scan::{reduce_axis, ReduceOutput, Reduction, ScanOptions};
//! # fn main() -> blz::Result<()> {
//! let ds = blz::Dataset::open("temps.blz")?; // float64, shape (days, stations)
//! let per_station = reduce_axis(&ds, &ScanOptions::default(), Reduction::Mean, Some(&[0]), 0.0)?;
//! if let ReduceOutput::F64(a) = per_station {
//!     println!("{}", a); // shape (stations,)
//! }
//! # Ok(()) }
//! ```

use super::{Reduction, ScanOptions, Target};
use crate::array::Dataset;
use crate::dtype::{DType, Element};
use crate::engine::ArrayCore;
use crate::error::{Error, Result};
use crate::stats::ChunkStats;
use crate::table::Table;
use ndarray::{ArrayD, IxDyn};
use rayon::prelude::*;
use std::path::Path;

mod chunkwise;

/// The result of [`reduce_axis`]: an array of the reduction's result type, shaped as the
/// input without the reduced axes (0-d for `axis = None`).
///
/// The result types are numpy's: `sum` gives `I64` for signed integers and booleans (with
/// numpy's wrap-around on overflow), `U64` for unsigned integers, the input's float type
/// for floats (summed in `f64`); `min` and `max` the input's type; `argmin`, `argmax`,
/// `count_nonzero` and `count` give `I64`; `any` and `all` give `Bool`; `mean`, `std` and
/// `var` give `F64` (numpy gives `float32` for `float32` input: cast the result).
#[derive(Debug, Clone, PartialEq)]
pub enum ReduceOutput {
    /// Booleans.
    Bool(ArrayD<bool>),
    /// Signed 8-bit integers.
    I8(ArrayD<i8>),
    /// Signed 16-bit integers.
    I16(ArrayD<i16>),
    /// Signed 32-bit integers.
    I32(ArrayD<i32>),
    /// Signed 64-bit integers.
    I64(ArrayD<i64>),
    /// Unsigned 8-bit integers.
    U8(ArrayD<u8>),
    /// Unsigned 16-bit integers.
    U16(ArrayD<u16>),
    /// Unsigned 32-bit integers.
    U32(ArrayD<u32>),
    /// Unsigned 64-bit integers.
    U64(ArrayD<u64>),
    /// binary16 floats (min, max and sum of float16, as numpy's).
    F16(ArrayD<half::f16>),
    /// binary32 floats.
    F32(ArrayD<f32>),
    /// binary64 floats.
    F64(ArrayD<f64>),
}

macro_rules! each_output {
    ($self:expr, $a:ident => $e:expr) => {
        match $self {
            ReduceOutput::Bool($a) => $e,
            ReduceOutput::I8($a) => $e,
            ReduceOutput::I16($a) => $e,
            ReduceOutput::I32($a) => $e,
            ReduceOutput::I64($a) => $e,
            ReduceOutput::U8($a) => $e,
            ReduceOutput::U16($a) => $e,
            ReduceOutput::U32($a) => $e,
            ReduceOutput::U64($a) => $e,
            ReduceOutput::F16($a) => $e,
            ReduceOutput::F32($a) => $e,
            ReduceOutput::F64($a) => $e,
        }
    };
}

impl ReduceOutput {
    /// The element type of the result.
    pub fn dtype(&self) -> DType {
        match self {
            ReduceOutput::Bool(_) => DType::Bool,
            ReduceOutput::I8(_) => DType::I8,
            ReduceOutput::I16(_) => DType::I16,
            ReduceOutput::I32(_) => DType::I32,
            ReduceOutput::I64(_) => DType::I64,
            ReduceOutput::U8(_) => DType::U8,
            ReduceOutput::U16(_) => DType::U16,
            ReduceOutput::U32(_) => DType::U32,
            ReduceOutput::U64(_) => DType::U64,
            ReduceOutput::F16(_) => DType::F16,
            ReduceOutput::F32(_) => DType::F32,
            ReduceOutput::F64(_) => DType::F64,
        }
    }

    /// The shape of the result.
    pub fn shape(&self) -> &[usize] {
        each_output!(self, a => a.shape())
    }

    /// The elements in C order as native-endian bytes (booleans as 0 or 1), for clients
    /// that hand the result on as a buffer.
    pub fn to_ne_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.shape().iter().product::<usize>() * 8);
        match self {
            ReduceOutput::Bool(a) => out.extend(a.iter().map(|&b| u8::from(b))),
            ReduceOutput::I8(a) => a.iter().for_each(|v| out.extend(v.to_ne_bytes())),
            ReduceOutput::I16(a) => a.iter().for_each(|v| out.extend(v.to_ne_bytes())),
            ReduceOutput::I32(a) => a.iter().for_each(|v| out.extend(v.to_ne_bytes())),
            ReduceOutput::I64(a) => a.iter().for_each(|v| out.extend(v.to_ne_bytes())),
            ReduceOutput::U8(a) => out.extend(a.iter().copied()),
            ReduceOutput::U16(a) => a.iter().for_each(|v| out.extend(v.to_ne_bytes())),
            ReduceOutput::U32(a) => a.iter().for_each(|v| out.extend(v.to_ne_bytes())),
            ReduceOutput::U64(a) => a.iter().for_each(|v| out.extend(v.to_ne_bytes())),
            ReduceOutput::F16(a) => a.iter().for_each(|v| out.extend(v.to_ne_bytes())),
            ReduceOutput::F32(a) => a.iter().for_each(|v| out.extend(v.to_ne_bytes())),
            ReduceOutput::F64(a) => a.iter().for_each(|v| out.extend(v.to_ne_bytes())),
        }
        out
    }

    /// The single value of a 0-d result (`axis = None`) as a [`super::Scalar`].
    pub fn scalar(&self) -> Option<super::Scalar> {
        use super::Scalar as S;
        if !self.shape().is_empty() {
            return None;
        }
        let first = |v: Option<S>| v;
        match self {
            ReduceOutput::Bool(a) => first(a.iter().next().map(|&b| S::UInt(u128::from(b)))),
            ReduceOutput::I8(a) => first(a.iter().next().map(|&v| S::Int(v.into()))),
            ReduceOutput::I16(a) => first(a.iter().next().map(|&v| S::Int(v.into()))),
            ReduceOutput::I32(a) => first(a.iter().next().map(|&v| S::Int(v.into()))),
            ReduceOutput::I64(a) => first(a.iter().next().map(|&v| S::Int(v.into()))),
            ReduceOutput::U8(a) => first(a.iter().next().map(|&v| S::UInt(v.into()))),
            ReduceOutput::U16(a) => first(a.iter().next().map(|&v| S::UInt(v.into()))),
            ReduceOutput::U32(a) => first(a.iter().next().map(|&v| S::UInt(v.into()))),
            ReduceOutput::U64(a) => first(a.iter().next().map(|&v| S::UInt(v.into()))),
            ReduceOutput::F16(a) => first(a.iter().next().map(|&v| S::Float(v.into()))),
            ReduceOutput::F32(a) => first(a.iter().next().map(|&v| S::Float(v.into()))),
            ReduceOutput::F64(a) => first(a.iter().next().map(|&v| S::Float(v))),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Element types

/// The element types reductions run on (booleans are read as `u8` 0/1).
trait Num: Element + Summand + Copy + PartialOrd + Default + Send + Sync + 'static {
    /// Smallest and largest values: the identities of max and min.
    const LOWEST: Self;
    const HIGHEST: Self;
    #[inline(always)]
    #[expect(clippy::eq_op, reason = "x != x is the NaN test; false for integers")]
    fn nan(self) -> bool {
        self != self
    }
    #[inline(always)]
    fn nonzero(self) -> bool {
        self != Self::default()
    }
}

macro_rules! num_int {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
        }
    )*};
}
num_int!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! num_float {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
        }
    )*};
}
num_float!(half::f16, f32, f64);

use crate::stats::sums::{pairwise, Summand};

/// Sum of squared deviations from `m`, in eight lanes.
fn sq_dev<T: Num>(v: &[T], m: f64) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            let d = x.f() - m;
            *l += d * d;
        }
    }
    let mut tail = 0.0;
    for &x in chunks.remainder() {
        let d = x.f() - m;
        tail += d * d;
    }
    lanes.iter().sum::<f64>() + tail
}

// ---------------------------------------------------------------------------------------
// Kernels: how one reduction folds elements into accumulators

/// One reduction over one element type.
trait Kernel: Sync {
    type T: Num;
    type Acc: Copy + Send + Sync;
    /// Whether runs may span several axes (not for arg reductions, whose index is per axis).
    const MERGE_AXES: bool = true;
    fn init(&self) -> Self::Acc;
    /// Folds a run of consecutive elements of the reduced axes into one accumulator; `idx0`
    /// is the index of `run[0]` (arg reductions only; the next elements follow it).
    fn fold_run(&self, acc: &mut Self::Acc, run: &[Self::T], idx0: i64);
    /// Folds `run[i]` into `accs[i]`; every element has index `idx` along the reduction.
    fn fold_each(&self, accs: &mut [Self::Acc], run: &[Self::T], idx: i64);
    /// Merges `b`, computed over other elements, into `a`.
    fn merge(&self, a: &mut Self::Acc, b: &Self::Acc);
}

/// Integer sums, wrapping as numpy's int64/uint64 sums do.
struct IntSum<T>(std::marker::PhantomData<T>);
impl<T: Num> Kernel for IntSum<T> {
    type T = T;
    type Acc = i64;
    fn init(&self) -> i64 {
        0
    }
    #[inline]
    fn fold_run(&self, acc: &mut i64, run: &[T], _: i64) {
        let mut lanes = [0i64; 8];
        let mut chunks = run.chunks_exact(8);
        for c in &mut chunks {
            for (l, &x) in lanes.iter_mut().zip(c) {
                *l = l.wrapping_add(x.wrap());
            }
        }
        let mut s = lanes.iter().fold(*acc, |a, &l| a.wrapping_add(l));
        for &x in chunks.remainder() {
            s = s.wrapping_add(x.wrap());
        }
        *acc = s;
    }
    #[inline]
    fn fold_each(&self, accs: &mut [i64], run: &[T], _: i64) {
        for (a, &x) in accs.iter_mut().zip(run) {
            *a = a.wrapping_add(x.wrap());
        }
    }
    fn merge(&self, a: &mut i64, b: &i64) {
        *a = a.wrapping_add(*b);
    }
}

/// Sums in `f64` (float sums and means).
struct FloatSum<T>(std::marker::PhantomData<T>);
impl<T: Num> Kernel for FloatSum<T> {
    type T = T;
    type Acc = f64;
    fn init(&self) -> f64 {
        0.0
    }
    #[inline]
    fn fold_run(&self, acc: &mut f64, run: &[T], _: i64) {
        *acc += pairwise(run);
    }
    #[inline]
    fn fold_each(&self, accs: &mut [f64], run: &[T], _: i64) {
        for (a, &x) in accs.iter_mut().zip(run) {
            *a += x.f();
        }
    }
    fn merge(&self, a: &mut f64, b: &f64) {
        *a += *b;
    }
}

/// Min (`MAX = false`) or max; NaN wins, as in numpy.
struct Extreme<T, const MAX: bool>(std::marker::PhantomData<T>);
impl<T: Num, const MAX: bool> Extreme<T, MAX> {
    #[inline(always)]
    fn better(x: T, than: T) -> bool {
        if MAX {
            x > than
        } else {
            x < than
        }
    }
}
impl<T: Num, const MAX: bool> Kernel for Extreme<T, MAX> {
    type T = T;
    type Acc = T;
    fn init(&self) -> T {
        if MAX {
            T::LOWEST
        } else {
            T::HIGHEST
        }
    }
    #[inline]
    fn fold_run(&self, acc: &mut T, run: &[T], _: i64) {
        let mut lanes = [self.init(); 8];
        let mut nan = [false; 8];
        let mut chunks = run.chunks_exact(8);
        for c in &mut chunks {
            for ((l, n), &x) in lanes.iter_mut().zip(nan.iter_mut()).zip(c) {
                *n |= x.nan();
                *l = if Self::better(x, *l) { x } else { *l };
            }
        }
        if nan.iter().any(|&n| n) {
            if let Some(&x) = run.iter().find(|x| x.nan()) {
                *acc = x;
            }
            return;
        }
        for &x in chunks.remainder() {
            if x.nan() {
                *acc = x;
                return;
            }
            lanes[0] = if Self::better(x, lanes[0]) {
                x
            } else {
                lanes[0]
            };
        }
        for l in lanes {
            self.merge(acc, &l);
        }
    }
    #[inline]
    fn fold_each(&self, accs: &mut [T], run: &[T], _: i64) {
        for (a, &x) in accs.iter_mut().zip(run) {
            if !a.nan() && (x.nan() || Self::better(x, *a)) {
                *a = x;
            }
        }
    }
    fn merge(&self, a: &mut T, b: &T) {
        if !a.nan() && (b.nan() || Self::better(*b, *a)) {
            *a = *b;
        }
    }
}

/// A best value and its index (`i < 0`: none yet).
#[derive(Clone, Copy)]
struct Best<T> {
    v: T,
    i: i64,
}

/// Argmin (`MAX = false`) or argmax: the first occurrence; the first NaN wins, as in numpy.
struct Arg<T, const MAX: bool>(std::marker::PhantomData<T>);
impl<T: Num, const MAX: bool> Arg<T, MAX> {
    /// Whether `x` at index `i` replaces `b`. Chunks are not folded in index order (with
    /// no axis, a chunk's later rows have higher flat indices than the next chunk's first),
    /// so equal values (and NaNs) go to the smaller index.
    #[inline(always)]
    fn takes(x: T, i: i64, b: &Best<T>) -> bool {
        if b.i < 0 {
            return true;
        }
        match (b.v.nan(), x.nan()) {
            (true, true) => i < b.i,
            (true, false) => false,
            (false, true) => true,
            (false, false) => Extreme::<T, MAX>::better(x, b.v) || (x == b.v && i < b.i),
        }
    }
}
impl<T: Num, const MAX: bool> Kernel for Arg<T, MAX> {
    type T = T;
    type Acc = Best<T>;
    const MERGE_AXES: bool = false;
    fn init(&self) -> Best<T> {
        Best {
            v: T::default(),
            i: -1,
        }
    }
    #[inline]
    fn fold_run(&self, acc: &mut Best<T>, run: &[T], idx0: i64) {
        for (n, &x) in run.iter().enumerate() {
            let i = idx0 + n as i64;
            if Self::takes(x, i, acc) {
                *acc = Best { v: x, i };
            }
        }
    }
    #[inline]
    fn fold_each(&self, accs: &mut [Best<T>], run: &[T], idx: i64) {
        for (a, &x) in accs.iter_mut().zip(run) {
            if Self::takes(x, idx, a) {
                *a = Best { v: x, i: idx };
            }
        }
    }
    fn merge(&self, a: &mut Best<T>, b: &Best<T>) {
        if b.i >= 0 && Self::takes(b.v, b.i, a) {
            *a = *b;
        }
    }
}

/// Count, mean and sum of squared deviations.
#[derive(Clone, Copy, Default)]
struct Moments {
    n: f64,
    mean: f64,
    m2: f64,
}

impl Moments {
    /// Chan et al.'s pairwise merge.
    #[inline]
    fn merge(&mut self, b: &Moments) {
        if b.n == 0.0 {
            return;
        }
        if self.n == 0.0 {
            *self = *b;
            return;
        }
        let n = self.n + b.n;
        let d = b.mean - self.mean;
        self.mean += d * (b.n / n);
        self.m2 += b.m2 + d * d * (self.n * b.n / n);
        self.n = n;
    }
}

/// Variance (and standard deviation) moments.
struct Var<T>(std::marker::PhantomData<T>);
impl<T: Num> Kernel for Var<T> {
    type T = T;
    type Acc = Moments;
    fn init(&self) -> Moments {
        Moments::default()
    }
    #[inline]
    fn fold_run(&self, acc: &mut Moments, run: &[T], _: i64) {
        if run.is_empty() {
            return;
        }
        let n = run.len() as f64;
        let mean = pairwise(run) / n;
        acc.merge(&Moments {
            n,
            mean,
            m2: sq_dev(run, mean),
        });
    }
    #[inline]
    fn fold_each(&self, accs: &mut [Moments], run: &[T], _: i64) {
        // Every accumulator of a run has seen the same number of elements.
        let Some(n) = accs.first().map(|a| a.n + 1.0) else {
            return;
        };
        let inv = 1.0 / n;
        for (a, &x) in accs.iter_mut().zip(run) {
            let x = x.f();
            let d = x - a.mean;
            a.mean += d * inv;
            a.m2 += d * (x - a.mean);
            a.n = n;
        }
    }
    fn merge(&self, a: &mut Moments, b: &Moments) {
        a.merge(b);
    }
}

/// `any` (`ALL = false`) or `all`.
struct Truth<T, const ALL: bool>(std::marker::PhantomData<T>);
impl<T: Num, const ALL: bool> Kernel for Truth<T, ALL> {
    type T = T;
    type Acc = bool;
    fn init(&self) -> bool {
        ALL
    }
    #[inline]
    fn fold_run(&self, acc: &mut bool, run: &[T], _: i64) {
        if ALL {
            *acc = *acc && run.iter().all(|x| x.nonzero());
        } else {
            *acc = *acc || run.iter().any(|x| x.nonzero());
        }
    }
    #[inline]
    fn fold_each(&self, accs: &mut [bool], run: &[T], _: i64) {
        for (a, &x) in accs.iter_mut().zip(run) {
            if ALL {
                *a &= x.nonzero();
            } else {
                *a |= x.nonzero();
            }
        }
    }
    fn merge(&self, a: &mut bool, b: &bool) {
        if ALL {
            *a &= *b;
        } else {
            *a |= *b;
        }
    }
}

/// Count of nonzero elements.
struct NonZero<T>(std::marker::PhantomData<T>);
impl<T: Num> Kernel for NonZero<T> {
    type T = T;
    type Acc = i64;
    fn init(&self) -> i64 {
        0
    }
    #[inline]
    fn fold_run(&self, acc: &mut i64, run: &[T], _: i64) {
        *acc += run.iter().map(|x| i64::from(x.nonzero())).sum::<i64>();
    }
    #[inline]
    fn fold_each(&self, accs: &mut [i64], run: &[T], _: i64) {
        for (a, &x) in accs.iter_mut().zip(run) {
            *a += i64::from(x.nonzero());
        }
    }
    fn merge(&self, a: &mut i64, b: &i64) {
        *a += *b;
    }
}

// ---------------------------------------------------------------------------------------
// Geometry and the parallel driver

/// The shapes of one reduction.
struct Geom {
    shape: Vec<u64>,
    cs: Vec<u64>,
    grid: Vec<u64>,
    /// Per axis: reduced?
    reduced: Vec<bool>,
    kept: Vec<usize>,
    red: Vec<usize>,
    out_shape: Vec<usize>,
    /// Per axis: the output's stride (0 for reduced axes).
    out_strides: Vec<u64>,
    /// Per axis: the stride of the chunk buffer.
    chunk_strides: Vec<u64>,
    /// Per axis: the array's own C strides (flat indices of argmin/argmax with no axis).
    flat_strides: Vec<u64>,
    /// Arg reductions: the axis whose index is reported (`None`: the flat index).
    arg_axis: Option<usize>,
    /// Elements folded into each output element.
    n_reduced: u64,
}

fn c_strides(ext: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; ext.len()];
    for i in (0..ext.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * ext[i + 1];
    }
    s
}

impl Geom {
    fn new(core: &ArrayCore, shape: &[u64], axes: Option<&[usize]>, path: &Path) -> Result<Geom> {
        let nd = shape.len();
        let mut reduced = vec![axes.is_none(); nd];
        for &a in axes.unwrap_or(&[]) {
            match reduced.get_mut(a) {
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "axis {a} is out of bounds for {} of {nd} dimensions",
                        path.display()
                    )))
                }
                Some(true) => {
                    return Err(Error::InvalidArgument(format!(
                        "axis {a} is repeated in the axes of a reduction of {}",
                        path.display()
                    )))
                }
                Some(r) => *r = true,
            }
        }
        let kept: Vec<usize> = (0..nd).filter(|&i| !reduced[i]).collect();
        let red: Vec<usize> = (0..nd).filter(|&i| reduced[i]).collect();
        let out_ext: Vec<u64> = kept.iter().map(|&i| shape[i]).collect();
        let os = c_strides(&out_ext);
        let mut out_strides = vec![0u64; nd];
        for (j, &i) in kept.iter().enumerate() {
            out_strides[i] = os[j];
        }
        Ok(Geom {
            shape: shape.to_vec(),
            cs: core.chunkshape.clone(),
            grid: core.grid(shape),
            n_reduced: red.iter().map(|&i| shape[i]).product(),
            out_shape: out_ext.iter().map(|&n| n as usize).collect(),
            chunk_strides: c_strides(&core.chunkshape),
            flat_strides: c_strides(shape),
            arg_axis: axes.and_then(|a| a.first().copied()),
            reduced,
            kept,
            red,
            out_strides,
        })
    }

    fn out_len(&self) -> usize {
        self.out_shape.iter().product()
    }
}

/// Consecutive chunks `r0..r1` (in C order over the reduced axes) of group `g` (in C order
/// over the kept axes).
#[derive(Clone, Copy)]
struct Unit {
    g: u64,
    r0: u64,
    r1: u64,
}

/// Splits `n` into its coordinates over the grid extents of `axes`.
fn coords_over(mut n: u64, axes: &[usize], grid: &[u64], out: &mut [u64]) {
    for &a in axes.iter().rev() {
        let g = grid[a].max(1);
        out[a] = n % g;
        n /= g;
    }
}

/// Folds the valid elements of one decoded chunk at `coords` into `tile` (the accumulators of
/// the chunk's box over the kept axes, C order).
fn fold_chunk<K: Kernel>(
    k: &K,
    g: &Geom,
    coords: &[u64],
    buf: &[K::T],
    tile: &mut [K::Acc],
    work: &mut Vec<u64>,
) -> Result<()> {
    let nd = g.shape.len();
    // Four vectors of `nd` in the thread's work area: no allocation per chunk.
    work.clear();
    work.resize(4 * nd, 0);
    let (valid, rest) = work.split_at_mut(nd);
    let (origin, rest) = rest.split_at_mut(nd);
    let (tstr, c) = rest.split_at_mut(nd);
    for i in 0..nd {
        valid[i] = (g.shape[i] - coords[i] * g.cs[i]).min(g.cs[i]);
        origin[i] = coords[i] * g.cs[i];
    }
    // Tile strides over the array's axes (0 for reduced ones).
    let mut acc = 1u64;
    for &i in g.kept.iter().rev() {
        tstr[i] = acc;
        acc *= valid[i];
    }
    let last = nd - 1;
    let kind = g.reduced[last];
    let mut j = last;
    if K::MERGE_AXES {
        while j > 0 && g.reduced[j - 1] == kind && valid[j] == g.cs[j] {
            j -= 1;
        }
    }
    let run_len = (valid[j] * g.chunk_strides[j]) as usize;
    let c = &mut c[..j];
    let bad = || Error::InvalidArgument("reduction: a run outside its chunk".into());
    loop {
        let src: u64 = (0..j).map(|i| c[i] * g.chunk_strides[i]).sum();
        let toff: u64 = (0..j).map(|i| c[i] * tstr[i]).sum();
        let idx = match g.arg_axis {
            None => (0..nd)
                .map(|i| (origin[i] + c.get(i).copied().unwrap_or(0)) * g.flat_strides[i])
                .sum::<u64>() as i64,
            Some(a) => (origin[a] + c.get(a).copied().unwrap_or(0)) as i64,
        };
        let run = buf
            .get(src as usize..src as usize + run_len)
            .ok_or_else(bad)?;
        if kind {
            let a = tile.get_mut(toff as usize).ok_or_else(bad)?;
            k.fold_run(a, run, idx);
        } else {
            let a = tile
                .get_mut(toff as usize..toff as usize + run_len)
                .ok_or_else(bad)?;
            k.fold_each(a, run, idx);
        }
        // Next outer position (odometer over axes 0..j).
        let mut ax = j;
        loop {
            if ax == 0 {
                return Ok(());
            }
            ax -= 1;
            c[ax] += 1;
            if c[ax] < valid[ax] {
                break;
            }
            c[ax] = 0;
        }
    }
}

/// Per-thread buffers: one decoded chunk, the codec's scratch and the chunk walk's indices.
struct Bufs<T> {
    elems: Vec<T>,
    scratch: Vec<u8>,
    work: Vec<u64>,
}

/// Decodes chunk `k` into `b.elems` (native byte order).
fn decode<T: Num>(core: &ArrayCore, k: u64, b: &mut Bufs<T>) -> Result<()> {
    decode_from(core, k, b, None)
}

/// [`decode`], from the chunk's bytes in `fetched` when they are there.
fn decode_from<T: Num>(
    core: &ArrayCore,
    k: u64,
    b: &mut Bufs<T>,
    fetched: Option<&crate::engine::Fetched>,
) -> Result<()> {
    if !T::POD || std::mem::size_of::<T>() != core.itemsize() {
        return Err(Error::InvalidArgument(format!(
            "reduction: {} elements cannot be read as {}",
            core.dtype,
            std::any::type_name::<T>()
        )));
    }
    // SAFETY: `T` is a POD element (checked above: no padding, every bit pattern valid) of
    // the chunk's item size, so its buffer may be filled as bytes.
    let dst = unsafe {
        std::slice::from_raw_parts_mut(
            b.elems.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(b.elems.as_slice()),
        )
    };
    match fetched {
        Some(f) => core.decode_fetched_into(k, dst, &mut b.scratch, f),
        None => core.decode_chunk_into(k, dst, &mut b.scratch),
    }
}

/// Runs kernel `k` over the whole store; returns one accumulator per output element.
fn drive<K: Kernel>(core: &ArrayCore, g: &Geom, opts: &ScanOptions, k: &K) -> Result<Vec<K::Acc>> {
    let mut out = vec![k.init(); g.out_len()];
    if g.grid.contains(&0) {
        return Ok(out);
    }
    let ngroups: u64 = g.kept.iter().map(|&i| g.grid[i]).product();
    let per_group: u64 = g.red.iter().map(|&i| g.grid[i]).product();
    // On an object store, as many threads as requests in flight, each reading its chunks.
    let pool = super::reduction_pool(core, opts)?;
    let batching = core.store.read_batching();
    let step = match batching {
        // Where every read is a request, a unit's chunks are fetched together (one request
        // per run of a file, at most a request's bytes), in about four units per CPU.
        Some((_, part)) => {
            let chunk_bytes = (core.chunk_len() * core.itemsize()).max(1) as u64;
            let per_fetch = (part / chunk_bytes).max(1);
            let cpus = opts.thread_count().max(1) as u64;
            let pieces = (cpus * 4).div_ceil(ngroups).clamp(1, per_group);
            per_group.div_ceil(pieces).min(per_fetch)
        }
        None => {
            let threads = pool
                .as_ref()
                .map_or_else(rayon::current_num_threads, |p| p.current_num_threads())
                .max(1) as u64;
            let pieces = (threads * 4).div_ceil(ngroups).clamp(1, per_group);
            per_group.div_ceil(pieces)
        }
    };
    let mut units = Vec::new();
    for gi in 0..ngroups {
        let mut r = 0;
        while r < per_group {
            units.push(Unit {
                g: gi,
                r0: r,
                r1: (r + step).min(per_group),
            });
            r += step;
        }
    }
    let chunk_len = core.chunk_len();
    let new_bufs = || Bufs::<K::T> {
        elems: vec![K::T::default(); chunk_len],
        scratch: Vec::new(),
        work: Vec::new(),
    };
    let chunk_grid_strides = c_strides(&g.grid);
    let run = || -> Result<Vec<(Unit, Vec<K::Acc>)>> {
        units
            .par_iter()
            .map_init(new_bufs, |b, u| {
                let mut coords = vec![0u64; g.shape.len()];
                coords_over(u.g, &g.kept, &g.grid, &mut coords);
                let tile_len: u64 = g
                    .kept
                    .iter()
                    .map(|&i| (g.shape[i] - coords[i] * g.cs[i]).min(g.cs[i]))
                    .product();
                let mut tile = vec![k.init(); tile_len as usize];
                let chunk_of = |r: u64, coords: &mut Vec<u64>| -> u64 {
                    coords_over(r, &g.red, &g.grid, coords);
                    coords
                        .iter()
                        .zip(&chunk_grid_strides)
                        .map(|(c, s)| c * s)
                        .sum()
                };
                // The unit's chunks in one request when they are a run of one file.
                let fetched = match batching {
                    Some(_) if u.r1 > u.r0 + 1 => {
                        let mut c = coords.clone();
                        let first = chunk_of(u.r0, &mut c);
                        let last = chunk_of(u.r1 - 1, &mut c);
                        let run = last.checked_sub(first) == Some(u.r1 - 1 - u.r0)
                            && core.store.locate(first).0 == core.store.locate(last).0;
                        if run {
                            Some(core.store.fetch_run(first, last + 1)?)
                        } else {
                            None
                        }
                    }
                    _ => None,
                };
                for r in u.r0..u.r1 {
                    let kk = chunk_of(r, &mut coords);
                    decode_from(core, kk, b, fetched.as_ref())?;
                    fold_chunk(k, g, &coords, &b.elems, &mut tile, &mut b.work)?;
                }
                Ok((*u, tile))
            })
            .collect()
    };
    let parts = match pool {
        None => run()?,
        Some(pool) => pool.install(run)?,
    };
    // Merge every tile into the output at its chunk's position.
    let nd = g.shape.len();
    let mut coords = vec![0u64; nd];
    for (u, tile) in parts {
        coords_over(u.g, &g.kept, &g.grid, &mut coords);
        let ext: Vec<u64> = g
            .kept
            .iter()
            .map(|&i| (g.shape[i] - coords[i] * g.cs[i]).min(g.cs[i]))
            .collect();
        let base: u64 = g
            .kept
            .iter()
            .map(|&i| coords[i] * g.cs[i] * g.out_strides[i])
            .sum();
        let mut pos = vec![0u64; g.kept.len()];
        for t in &tile {
            let off = base
                + g.kept
                    .iter()
                    .zip(&pos)
                    .map(|(&i, p)| p * g.out_strides[i])
                    .sum::<u64>();
            if let Some(o) = out.get_mut(off as usize) {
                k.merge(o, t);
            }
            for d in (0..pos.len()).rev() {
                pos[d] += 1;
                if pos[d] < ext[d] {
                    break;
                }
                pos[d] = 0;
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Dispatch

/// Builds the result array.
fn arr<X>(g: &Geom, v: Vec<X>) -> Result<ArrayD<X>> {
    ArrayD::from_shape_vec(IxDyn(&g.out_shape), v)
        .map_err(|e| Error::InvalidArgument(format!("reduction result: {e}")))
}

/// Wraps an array of `T` as the output variant of `dt` (min and max keep the input type).
trait Wrap: Sized {
    fn wrap_out(a: ArrayD<Self>, dt: DType) -> ReduceOutput;
}
macro_rules! wrap {
    ($t:ty, $v:ident) => {
        impl Wrap for $t {
            fn wrap_out(a: ArrayD<$t>, _: DType) -> ReduceOutput {
                ReduceOutput::$v(a)
            }
        }
    };
}
wrap!(i8, I8);
wrap!(i16, I16);
wrap!(i32, I32);
wrap!(i64, I64);
wrap!(u16, U16);
wrap!(u32, U32);
wrap!(u64, U64);
wrap!(half::f16, F16);
wrap!(f32, F32);
wrap!(f64, F64);
impl Wrap for u8 {
    fn wrap_out(a: ArrayD<u8>, dt: DType) -> ReduceOutput {
        if dt == DType::Bool {
            ReduceOutput::Bool(a.mapv(|x| x != 0))
        } else {
            ReduceOutput::U8(a)
        }
    }
}

fn typed<T: chunkwise::FromStat + Wrap>(
    core: &ArrayCore,
    g: &Geom,
    opts: &ScanOptions,
    op: Reduction,
    ddof: f64,
    recs: &[Option<ChunkStats>],
) -> Result<ReduceOutput> {
    use std::marker::PhantomData as P;
    if chunkwise::applies(g, op) {
        return chunkwise::reduce::<T>(core, g, opts, op, recs);
    }
    let dt = core.dtype;
    let float = matches!(dt, DType::F16 | DType::F32 | DType::F64);
    let signed = matches!(
        dt,
        DType::Bool | DType::I8 | DType::I16 | DType::I32 | DType::I64
    );
    let n = g.n_reduced as f64;
    Ok(match op {
        Reduction::Count => ReduceOutput::I64(arr(g, vec![g.n_reduced as i64; g.out_len()])?),
        Reduction::Sum if !float => {
            let v = drive(core, g, opts, &IntSum::<T>(P))?;
            if signed {
                ReduceOutput::I64(arr(g, v)?)
            } else {
                ReduceOutput::U64(arr(g, v.into_iter().map(|x| x as u64).collect())?)
            }
        }
        Reduction::Sum => {
            let v = drive(core, g, opts, &FloatSum::<T>(P))?;
            if dt == DType::F32 {
                ReduceOutput::F32(arr(g, v.into_iter().map(|x| x as f32).collect())?)
            } else if dt == DType::F16 {
                // numpy sums float16 in float32 and rounds the result to float16.
                ReduceOutput::F16(arr(g, v.into_iter().map(half::f16::from_f64).collect())?)
            } else {
                ReduceOutput::F64(arr(g, v)?)
            }
        }
        Reduction::Mean => {
            let v = drive(core, g, opts, &FloatSum::<T>(P))?;
            ReduceOutput::F64(arr(g, v.into_iter().map(|s| s / n).collect())?)
        }
        Reduction::Var | Reduction::Std => {
            let v = drive(core, g, opts, &Var::<T>(P))?;
            let den = (n - ddof).max(0.0);
            let std = op == Reduction::Std;
            ReduceOutput::F64(arr(
                g,
                v.into_iter()
                    .map(|m| {
                        // numpy: the mean of no elements is NaN, and so is their variance.
                        let var = if m.n == 0.0 { f64::NAN } else { m.m2 / den };
                        if std {
                            var.sqrt()
                        } else {
                            var
                        }
                    })
                    .collect(),
            )?)
        }
        Reduction::Min => T::wrap_out(arr(g, drive(core, g, opts, &Extreme::<T, false>(P))?)?, dt),
        Reduction::Max => T::wrap_out(arr(g, drive(core, g, opts, &Extreme::<T, true>(P))?)?, dt),
        Reduction::ArgMin => ReduceOutput::I64(arr(
            g,
            drive(core, g, opts, &Arg::<T, false>(P))?
                .into_iter()
                .map(|b| b.i)
                .collect(),
        )?),
        Reduction::ArgMax => ReduceOutput::I64(arr(
            g,
            drive(core, g, opts, &Arg::<T, true>(P))?
                .into_iter()
                .map(|b| b.i)
                .collect(),
        )?),
        Reduction::Any => ReduceOutput::Bool(arr(g, drive(core, g, opts, &Truth::<T, false>(P))?)?),
        Reduction::All => ReduceOutput::Bool(arr(g, drive(core, g, opts, &Truth::<T, true>(P))?)?),
        Reduction::CountNonzero => {
            ReduceOutput::I64(arr(g, drive(core, g, opts, &NonZero::<T>(P))?)?)
        }
    })
}

/// `trusted`: whether the store's statistics are current (`meta/sizes`, §14.4).
#[expect(
    clippy::too_many_arguments,
    reason = "the reduction's parameters, passed through"
)]
pub(super) fn reduce_core(
    core: &ArrayCore,
    shape: &[u64],
    path: &Path,
    opts: &ScanOptions,
    op: Reduction,
    axes: Option<&[usize]>,
    ddof: f64,
    trusted: bool,
) -> Result<ReduceOutput> {
    if opts.hosts.is_some() {
        return Err(Error::InvalidArgument(format!(
            "{op} along axes of {} cannot be restricted to hosts (use blz::scan::reduce)",
            path.display()
        )));
    }
    if opts.threads == Some(0) {
        return Err(Error::InvalidArgument(
            "a reduction needs at least one thread".into(),
        ));
    }
    let arg = matches!(op, Reduction::ArgMin | Reduction::ArgMax);
    if arg && axes.is_some_and(|a| a.len() != 1) {
        return Err(Error::InvalidArgument(format!(
            "{op} of {} takes one axis or none",
            path.display()
        )));
    }
    if !ddof.is_finite() {
        return Err(Error::InvalidArgument(format!("ddof {ddof} is not finite")));
    }
    let g = Geom::new(core, shape, axes, path)?;
    if g.n_reduced == 0
        && matches!(
            op,
            Reduction::Min | Reduction::Max | Reduction::ArgMin | Reduction::ArgMax
        )
    {
        return Err(Error::InvalidArgument(format!(
            "{op} of {}: a zero-size reduction has no identity",
            path.display()
        )));
    }
    // The records, when this reduction can use them (nothing is decoded to read them).
    let recs = if opts.statistics && trusted && chunkwise::applies(&g, op) {
        core.store.chunk_stats(g.grid.iter().product(), true)?
    } else {
        Vec::new()
    };
    let r = &recs;
    match core.dtype {
        DType::Bool | DType::U8 => typed::<u8>(core, &g, opts, op, ddof, r),
        DType::I8 => typed::<i8>(core, &g, opts, op, ddof, r),
        DType::I16 => typed::<i16>(core, &g, opts, op, ddof, r),
        DType::I32 => typed::<i32>(core, &g, opts, op, ddof, r),
        DType::I64 => typed::<i64>(core, &g, opts, op, ddof, r),
        DType::U16 => typed::<u16>(core, &g, opts, op, ddof, r),
        DType::U32 => typed::<u32>(core, &g, opts, op, ddof, r),
        DType::U64 => typed::<u64>(core, &g, opts, op, ddof, r),
        DType::F16 => typed::<half::f16>(core, &g, opts, op, ddof, r),
        DType::F32 => typed::<f32>(core, &g, opts, op, ddof, r),
        DType::F64 => typed::<f64>(core, &g, opts, op, ddof, r),
        other => Err(Error::InvalidArgument(format!(
            "{op} needs a numeric or boolean dtype, {} holds {other}",
            path.display()
        ))),
    }
}

/// Reduces a dataset along `axes` (`None`: all of them, a 0-d result) with numpy's
/// semantics: see [`ReduceOutput`] for the result types. `ddof` is the delta degrees of
/// freedom of `var` and `std` (the divisor is `n - ddof`; ignored by the others).
///
/// * Float `sum`, `mean`, `var` and `std` accumulate in `f64` (pairwise within runs of a
///   chunk); `min`, `max` and `sum` are NaN when a reduced element is NaN; `argmin` and
///   `argmax` give the first occurrence (of the first NaN, if any), along their axis or, with
///   no axis, as a flat C-order index.
/// * Empty reductions: `sum` 0, `any` false, `all` true, `count_nonzero` 0, `mean`, `var`
///   and `std` NaN; `min`, `max`, `argmin` and `argmax` fail, as numpy's do.
/// * `Reduction::Count` gives the number of reduced elements per output element.
///
/// Chunks are decoded once each, in parallel on rayon's pool (or on a pool of
/// `opts.threads`); memory is a chunk per thread plus the output.
///
/// # Errors
/// [`Error::InvalidArgument`] for an axis out of range or repeated, several axes for
/// `argmin`/`argmax`, a non-numeric dtype, a zero-size `min`/`max`/`argmin`/`argmax`, or
/// `opts.hosts` (a host filter would give a partial array; use [`super::reduce`]); corrupt
/// chunks and I/O errors naming the file; [`Error::Changed`] when a writer committed during
/// the read.
pub fn reduce_axis(
    ds: &Dataset,
    opts: &ScanOptions,
    op: Reduction,
    axes: Option<&[usize]>,
    ddof: f64,
) -> Result<ReduceOutput> {
    let trusted = ds.sizes().stats_current();
    Target::Dataset(ds)
        .run(|core, shape, path| reduce_core(core, shape, path, opts, op, axes, ddof, trusted))
}

/// As [`reduce_axis`], over one fixed-size column of a table (1-d: `axes` is `None` or
/// `Some(&[0])`).
///
/// # Errors
/// As [`reduce_axis`]; [`Error::InvalidArgument`] for an unknown or variable-length column.
pub fn reduce_axis_column(
    table: &Table,
    column: &str,
    opts: &ScanOptions,
    op: Reduction,
    axes: Option<&[usize]>,
    ddof: f64,
) -> Result<ReduceOutput> {
    let trusted = table.sizes().stats_current();
    Target::Column(table, column)
        .run(|core, shape, path| reduce_core(core, shape, path, opts, op, axes, ddof, trusted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairwise_matches_a_plain_sum_of_small_integers() {
        let v: Vec<f64> = (0..1000).map(f64::from).collect();
        assert_eq!(pairwise(&v), 499_500.0);
        let v: Vec<i32> = (0..7).collect();
        assert_eq!(pairwise(&v), 21.0);
    }

    #[test]
    fn moments_merge_as_one_pass() {
        let xs = [1.0f64, 2.0, 4.0, 8.0, 16.0];
        let k = Var::<f64>(std::marker::PhantomData);
        let mut a = k.init();
        k.fold_run(&mut a, &xs[..2], 0);
        let mut b = k.init();
        k.fold_run(&mut b, &xs[2..], 0);
        k.merge(&mut a, &b);
        let mean = 31.0 / 5.0;
        let m2: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
        assert!((a.m2 - m2).abs() < 1e-12 && (a.mean - mean).abs() < 1e-12);
    }

    #[test]
    fn arg_merge_keeps_the_first_occurrence_and_nan() {
        let k = Arg::<f64, true>(std::marker::PhantomData);
        let mut a = Best { v: 3.0, i: 5 };
        k.merge(&mut a, &Best { v: 3.0, i: 2 });
        assert_eq!(a.i, 2);
        k.merge(&mut a, &Best { v: f64::NAN, i: 9 });
        assert_eq!(a.i, 9);
        k.merge(&mut a, &Best { v: 100.0, i: 0 });
        assert_eq!(a.i, 9);
    }
}
