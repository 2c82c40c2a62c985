//! Reductions over every axis (a 0-d result) answered chunk by chunk: from each chunk's
//! statistics and sums (`spec/dataset.md` §14) where they decide its part, decoding only the
//! chunks they do not decide.
//!
//! * `sum` and `mean`: a chunk's partial is its sum record when the record covers exactly the
//!   chunk's visible elements, else [`crate::stats::sums::chunk_sum`] over the decoded chunk (the
//!   kernel the writer used for the record); partials are added in chunk order, so the
//!   result is the same bits whichever chunks were decoded, and whatever the threads.
//! * `min`, `max`, `argmin`, `argmax`: from *exact* records (those whose sum record covers
//!   the visible count: written with the chunk and not cut by a shrink since); arg
//!   reductions decode only the chunks whose record holds the extreme (or a NaN).
//! * `any`, `all`, `count_nonzero`: a record, even a bound, decides a chunk whose range
//!   excludes 0 (every value nonzero, NaN included) or is `[0, 0]` with no NaN (all zero).
//!
//! With `ScanOptions::statistics` false (or untrusted records) every chunk is decoded, and
//! the result is the same.

use super::{
    arr, decode, decode_from, fold_chunk, Arg, Best, Bufs, Extreme, Geom, Kernel, NonZero, Num,
    ReduceOutput, Reduction, ScanOptions, Wrap,
};
use crate::dtype::DType;
use crate::engine::ArrayCore;
use crate::error::{Error, Result};
use crate::stats::sums::{chunk_sum, ChunkSum};
use crate::stats::{ChunkStats, StatValue};
use rayon::prelude::*;
use std::marker::PhantomData as P;

/// Element types whose statistic values convert back (exactly: they were widened from it).
pub(super) trait FromStat: Num {
    fn from_stat(v: StatValue) -> Self;
    /// A NaN of the type (integers: never asked for).
    fn nan_value() -> Self;
}
macro_rules! from_stat {
    ($nan:ident; $($t:ty),*) => {$(
        impl FromStat for $t {
            #[inline]
            fn from_stat(v: StatValue) -> Self {
                match v {
                    StatValue::Bool(b) => u8::from(b) as $t,
                    StatValue::Int(i) => i as $t,
                    StatValue::UInt(u) => u as $t,
                    StatValue::Float(f) => f as $t,
                }
            }
            #[inline]
            fn nan_value() -> Self {
                $nan::<$t>()
            }
        }
    )*};
}
/// Integers have no NaN (never asked for: their records count none).
fn no_nan<T: Default>() -> T {
    T::default()
}
fn float_nan<T: From<f32>>() -> T {
    T::from(f32::NAN)
}
from_stat!(no_nan; i8, i16, i32, i64, u8, u16, u32, u64);
from_stat!(float_nan; f32, f64);

impl FromStat for half::f16 {
    #[inline]
    fn from_stat(v: StatValue) -> Self {
        match v {
            StatValue::Bool(b) => half::f16::from(u8::from(b)),
            StatValue::Int(i) => half::f16::from_f64(i as f64),
            StatValue::UInt(u) => half::f16::from_f64(u as f64),
            // A float16 statistic is the float16 value widened: narrowing it back is exact.
            StatValue::Float(f) => half::f16::from_f64(f),
        }
    }
    #[inline]
    fn nan_value() -> Self {
        half::f16::NAN
    }
}

/// One chunk of the grid: its coordinates and how many of its elements are visible.
struct Chunk {
    coords: Vec<u64>,
    valid: Vec<u64>,
    visible: u64,
}

fn chunk_at(g: &Geom, k: u64) -> Chunk {
    let coords = crate::scan::chunk_coords(k, &g.grid);
    let valid: Vec<u64> = (0..g.shape.len())
        .map(|i| (g.shape[i] - coords[i] * g.cs[i]).min(g.cs[i]))
        .collect();
    Chunk {
        visible: valid.iter().product(),
        coords,
        valid,
    }
}

/// Whether this path answers `op` over geometry `g`: every axis reduced, no empty axis.
pub(super) fn applies(g: &Geom, op: Reduction) -> bool {
    g.kept.is_empty()
        && !g.grid.contains(&0)
        && !matches!(op, Reduction::Var | Reduction::Std | Reduction::Count)
}

/// Decodes chunks `ks` in parallel and maps each (decoded, native order) with `f`; results in
/// the order of `ks`.
fn decode_each<T: Num, R: Send>(
    core: &ArrayCore,
    g: &Geom,
    opts: &ScanOptions,
    ks: &[u64],
    f: impl Fn(&Chunk, &mut Bufs<T>) -> Result<R> + Sync + Send,
) -> Result<Vec<R>> {
    if ks.is_empty() {
        return Ok(Vec::new());
    }
    let chunk_len = core.chunk_len();
    let batching = core.store.read_batching();
    let new_bufs = || Bufs::<T> {
        elems: vec![T::default(); chunk_len],
        scratch: Vec::new(),
        work: Vec::new(),
    };
    let run = || -> Result<Vec<R>> {
        let Some((_, part)) = batching else {
            return ks
                .par_iter()
                .map_init(new_bufs, |b, &k| {
                    decode(core, k, b)?;
                    f(&chunk_at(g, k), b)
                })
                .collect();
        };
        // Where every read is a request, runs of consecutive chunks of one file (at most a
        // request's bytes) are fetched with one request each.
        let chunk_bytes = (chunk_len * core.itemsize()).max(1) as u64;
        // About four runs per CPU, so that decoding spreads over the cores too.
        let cpus = opts.thread_count().max(1);
        let per_fetch = ((part / chunk_bytes).max(1) as usize)
            .min(ks.len().div_ceil(cpus * 4))
            .max(1);
        let mut runs: Vec<&[u64]> = Vec::new();
        let mut start = 0;
        for i in 1..=ks.len() {
            let ends = i == ks.len()
                || ks[i] != ks[i - 1] + 1
                || core.store.locate(ks[i]).0 != core.store.locate(ks[start]).0
                || i - start == per_fetch;
            if ends {
                runs.push(&ks[start..i]);
                start = i;
            }
        }
        let got: Vec<Vec<R>> = runs
            .par_iter()
            .map_init(new_bufs, |b, run| {
                let fetched = match run {
                    [_, .., last] => Some(core.store.fetch_run(run[0], last + 1)?),
                    _ => None,
                };
                run.iter()
                    .map(|&k| {
                        decode_from(core, k, b, fetched.as_ref())?;
                        f(&chunk_at(g, k), b)
                    })
                    .collect()
            })
            .collect::<Result<_>>()?;
        Ok(got.into_iter().flatten().collect())
    };
    match crate::scan::reduction_pool(core, opts)? {
        None => run(),
        Some(pool) => pool.install(run),
    }
}

/// Folds one decoded chunk with kernel `kern` into a single accumulator.
fn fold_one<K: Kernel>(kern: &K, g: &Geom, c: &Chunk, b: &mut Bufs<K::T>) -> Result<K::Acc> {
    let mut tile = [kern.init()];
    fold_chunk(kern, g, &c.coords, &b.elems, &mut tile, &mut b.work)?;
    Ok(tile[0])
}

/// The record of chunk `k` when it describes exactly the visible values.
fn exact<'a>(recs: &'a [Option<ChunkStats>], g: &Geom, k: u64) -> Option<&'a ChunkStats> {
    recs.get(k as usize)?
        .as_ref()
        .filter(|r| r.sum.is_some_and(|s| s.count == chunk_at(g, k).visible))
}

/// How many of the `visible` values a record (exact or a bound) proves nonzero, when it
/// decides: all (its range excludes 0: NaNs are nonzero too) or none (`[0, 0]`, no NaN).
fn nonzero_decided(r: &ChunkStats, visible: u64) -> Option<u64> {
    let (lo, hi) = match (r.min, r.max) {
        (Some(lo), Some(hi)) => (lo, hi),
        // No non-NaN value: every visible value is NaN.
        _ => return Some(visible),
    };
    // (positive, negative, zero)
    let sign = |v: StatValue| match v {
        StatValue::Bool(b) => (b, false, !b),
        StatValue::Int(i) => (i > 0, i < 0, i == 0),
        StatValue::UInt(u) => (u > 0, false, u == 0),
        StatValue::Float(f) => (f > 0.0, f < 0.0, f == 0.0),
    };
    let ((pos, _, zero), (_, hi_neg, hi_zero)) = (sign(lo), sign(hi));
    if pos || hi_neg {
        Some(visible)
    } else if zero && hi_zero && r.nan_count == 0 {
        Some(0)
    } else {
        None
    }
}

/// Answers `op` (see [`applies`]) from `recs` (the store's records, one per chunk; empty or
/// `None` where unknown) and the chunks they do not decide.
pub(super) fn reduce<T: FromStat + Wrap>(
    core: &ArrayCore,
    g: &Geom,
    opts: &ScanOptions,
    op: Reduction,
    recs: &[Option<ChunkStats>],
) -> Result<ReduceOutput> {
    let dt = core.dtype;
    let n: u64 = g.grid.iter().product();
    let ks = 0..n;
    Ok(match op {
        Reduction::Sum | Reduction::Mean => {
            let mut parts: Vec<Option<ChunkSum>> = ks
                .clone()
                .map(|k| exact(recs, g, k).and_then(|r| r.sum))
                .collect();
            let todo: Vec<u64> = ks.filter(|&k| parts[k as usize].is_none()).collect();
            let got = decode_each::<T, ChunkSum>(core, g, opts, &todo, |c, b| {
                Ok(chunk_sum(&b.elems, &g.cs, &c.valid))
            })?;
            for (k, s) in todo.iter().zip(got) {
                parts[*k as usize] = Some(s);
            }
            let (mut int, mut float) = (0i64, 0.0f64);
            for p in parts.iter().flatten() {
                int = int.wrapping_add(p.int);
                float += p.float;
            }
            let float_dt = matches!(dt, DType::F16 | DType::F32 | DType::F64);
            match (op, float_dt, dt) {
                (Reduction::Mean, _, _) => {
                    ReduceOutput::F64(arr(g, vec![float / g.n_reduced as f64])?)
                }
                (_, true, DType::F32) => ReduceOutput::F32(arr(g, vec![float as f32])?),
                (_, true, DType::F16) => {
                    ReduceOutput::F16(arr(g, vec![half::f16::from_f64(float)])?)
                }
                (_, true, _) => ReduceOutput::F64(arr(g, vec![float])?),
                (_, false, DType::Bool | DType::I8 | DType::I16 | DType::I32 | DType::I64) => {
                    ReduceOutput::I64(arr(g, vec![int])?)
                }
                _ => ReduceOutput::U64(arr(g, vec![int as u64])?),
            }
        }
        Reduction::Min => T::wrap_out(arr(g, vec![extreme::<T, false>(core, g, opts, recs)?])?, dt),
        Reduction::Max => T::wrap_out(arr(g, vec![extreme::<T, true>(core, g, opts, recs)?])?, dt),
        Reduction::ArgMin => {
            ReduceOutput::I64(arr(g, vec![arg::<T, false>(core, g, opts, recs)?])?)
        }
        Reduction::ArgMax => ReduceOutput::I64(arr(g, vec![arg::<T, true>(core, g, opts, recs)?])?),
        Reduction::Any | Reduction::All | Reduction::CountNonzero => {
            let mut decided = 0u64;
            let mut todo = Vec::new();
            for k in ks {
                let c = chunk_at(g, k);
                match recs
                    .get(k as usize)
                    .and_then(Option::as_ref)
                    .and_then(|r| nonzero_decided(r, c.visible))
                {
                    Some(nz) => {
                        if op == Reduction::Any && nz > 0 {
                            return Ok(ReduceOutput::Bool(arr(g, vec![true])?));
                        }
                        if op == Reduction::All && nz < c.visible {
                            return Ok(ReduceOutput::Bool(arr(g, vec![false])?));
                        }
                        decided += nz;
                    }
                    None => todo.push(k),
                }
            }
            let kern = NonZero::<T>(P);
            let got = decode_each::<T, i64>(core, g, opts, &todo, |c, b| fold_one(&kern, g, c, b))?;
            let total = decided as i64 + got.iter().sum::<i64>();
            match op {
                Reduction::Any => ReduceOutput::Bool(arr(g, vec![total > 0])?),
                Reduction::All => ReduceOutput::Bool(arr(g, vec![total as u64 == g.n_reduced])?),
                _ => ReduceOutput::I64(arr(g, vec![total])?),
            }
        }
        Reduction::Var | Reduction::Std | Reduction::Count => {
            return Err(Error::InvalidArgument(format!(
                "{op} is not answered chunk by chunk"
            )))
        }
    })
}

/// Min (`MAX` false) or max: NaN when any value is NaN.
fn extreme<T: FromStat, const MAX: bool>(
    core: &ArrayCore,
    g: &Geom,
    opts: &ScanOptions,
    recs: &[Option<ChunkStats>],
) -> Result<T> {
    let kern = Extreme::<T, MAX>(P);
    let mut acc = kern.init();
    let mut todo = Vec::new();
    for k in 0..g.grid.iter().product::<u64>() {
        match exact(recs, g, k) {
            Some(r) if r.nan_count > 0 => return Ok(T::nan_value()),
            Some(r) => {
                if let Some(v) = if MAX { r.max } else { r.min } {
                    kern.merge(&mut acc, &T::from_stat(v));
                }
            }
            None => todo.push(k),
        }
    }
    for v in decode_each::<T, T>(core, g, opts, &todo, |c, b| fold_one(&kern, g, c, b))? {
        kern.merge(&mut acc, &v);
    }
    Ok(acc)
}

/// Argmin (`MAX` false) or argmax with no axis: the flat index of the first occurrence (of
/// the first NaN, if any). Decodes the chunks without an exact record, then those whose
/// record holds a NaN or, if there is none, the extreme.
fn arg<T: FromStat, const MAX: bool>(
    core: &ArrayCore,
    g: &Geom,
    opts: &ScanOptions,
    recs: &[Option<ChunkStats>],
) -> Result<i64> {
    let kern = Arg::<T, MAX>(P);
    let ext = Extreme::<T, MAX>(P);
    let mut todo = Vec::new();
    let mut nan_ks = Vec::new();
    let mut vals: Vec<(u64, T)> = Vec::new();
    for k in 0..g.grid.iter().product::<u64>() {
        match exact(recs, g, k) {
            Some(r) if r.nan_count > 0 => nan_ks.push(k),
            Some(r) => {
                if let Some(v) = if MAX { r.max } else { r.min } {
                    vals.push((k, T::from_stat(v)));
                }
            }
            None => todo.push(k),
        }
    }
    let decoded: Vec<Best<T>> =
        decode_each::<T, Best<T>>(core, g, opts, &todo, |c, b| fold_one(&kern, g, c, b))?;
    let has_nan = !nan_ks.is_empty() || decoded.iter().any(|b| b.i >= 0 && b.v.nan());
    let more: Vec<u64> = if has_nan {
        nan_ks
    } else {
        let mut best = ext.init();
        for b in decoded.iter().filter(|b| b.i >= 0) {
            ext.merge(&mut best, &b.v);
        }
        for (_, v) in &vals {
            ext.merge(&mut best, v);
        }
        vals.iter()
            .filter(|(_, v)| *v == best)
            .map(|(k, _)| *k)
            .collect()
    };
    let mut acc = kern.init();
    let decoded_more =
        decode_each::<T, Best<T>>(core, g, opts, &more, |c, b| fold_one(&kern, g, c, b))?;
    for b in decoded.iter().chain(&decoded_more) {
        kern.merge(&mut acc, b);
    }
    Ok(acc.i)
}
