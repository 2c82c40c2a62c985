//! Reductions of an expression: each block is computed and reduced on its own (in
//! parallel), and the blocks' partial results merged, so the whole result never exists.

use super::kernel::{cast, phys, to_bytes, Val};
use super::Expression;
use crate::dtype::DType;
use crate::error::{Error, Result};
use rayon::prelude::*;

/// A reduction, by numpy's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduce {
    /// `sum` (integers in 64 bits, wrapping as numpy's)
    Sum,
    /// `prod`
    Prod,
    /// `mean`
    Mean,
    /// `var` (with `ddof`)
    Var,
    /// `std` (with `ddof`)
    Std,
    /// `min` (NaN wins)
    Min,
    /// `max` (NaN wins)
    Max,
    /// `any`
    Any,
    /// `all`
    All,
}

impl std::str::FromStr for Reduce {
    type Err = Error;
    fn from_str(s: &str) -> Result<Reduce> {
        Ok(match s {
            "sum" => Reduce::Sum,
            "prod" => Reduce::Prod,
            "mean" => Reduce::Mean,
            "var" => Reduce::Var,
            "std" => Reduce::Std,
            "min" => Reduce::Min,
            "max" => Reduce::Max,
            "any" => Reduce::Any,
            "all" => Reduce::All,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "unknown reduction {s:?} (sum, prod, mean, var, std, min, max, any, all)"
                )))
            }
        })
    }
}

/// A reduction's result: native-endian elements of `dtype` in C order.
#[derive(Debug, Clone, PartialEq)]
pub struct Reduced {
    /// The result's dtype (numpy's for the reduction and the expression's dtype).
    pub dtype: DType,
    /// The result's shape: the expression's without the reduced axes.
    pub shape: Vec<u64>,
    /// The elements.
    pub data: Vec<u8>,
}

/// A block's partial result for each output element.
enum Acc {
    Simple(Val),
    /// Count, mean and sum of squared deviations (Chan et al.'s parallel merge).
    Moments {
        n: Vec<f64>,
        mean: Vec<f64>,
        m2: Vec<f64>,
    },
}

fn moments(op: Reduce) -> bool {
    matches!(op, Reduce::Mean | Reduce::Var | Reduce::Std)
}

/// The dtype a reduction of `d` computes in, and its result's.
fn dtypes(op: Reduce, d: DType) -> (DType, DType) {
    match op {
        Reduce::Sum | Reduce::Prod => {
            let acc = match phys(d) {
                0 | 1 => DType::I64,
                2 => DType::U64,
                _ => DType::F64,
            };
            (acc, if phys(d) == 3 { d } else { acc })
        }
        Reduce::Min | Reduce::Max => (d, d),
        Reduce::Any | Reduce::All => (DType::Bool, DType::Bool),
        _ => (
            DType::F64,
            if d == DType::F32 {
                DType::F32
            } else {
                DType::F64
            },
        ),
    }
}

/// Folds `v` (of `shape`) over the axes marked in `red` into the kept axes' C order.
fn fold<T: Copy>(v: &[T], shape: &[usize], red: &[bool], init: T, f: impl Fn(T, T) -> T) -> Vec<T> {
    let kept: usize = shape
        .iter()
        .zip(red)
        .filter(|(_, &r)| !r)
        .map(|(&s, _)| s)
        .product();
    if kept == 1 {
        return vec![chunked_fold(v, init, &f)];
    }
    let mut out = vec![init; kept];
    let n = shape.len();
    let mut ostride = vec![0usize; n];
    let mut acc = 1;
    for ax in (0..n).rev() {
        if !red[ax] {
            ostride[ax] = acc;
            acc *= shape[ax];
        }
    }
    let mut idx = vec![0usize; n];
    let mut o = 0usize;
    for &x in v {
        out[o] = f(out[o], x);
        let mut ax = n;
        while ax > 0 {
            ax -= 1;
            idx[ax] += 1;
            o += ostride[ax];
            if idx[ax] < shape[ax] {
                break;
            }
            o -= ostride[ax] * shape[ax];
            idx[ax] = 0;
        }
    }
    out
}

/// Folds a whole slice in 8 lanes (so that the compiler vectorises sums).
fn chunked_fold<T: Copy>(v: &[T], init: T, f: &impl Fn(T, T) -> T) -> T {
    let mut lanes = [init; 8];
    let mut it = v.chunks_exact(8);
    for c in &mut it {
        for i in 0..8 {
            lanes[i] = f(lanes[i], c[i]);
        }
    }
    let mut r = init;
    for x in it.remainder() {
        r = f(r, *x);
    }
    lanes.iter().fold(r, |a, &b| f(a, b))
}

fn simple_fold(op: Reduce, v: Val, shape: &[usize], red: &[bool]) -> Val {
    use super::kernel::{max_f, min_f};
    match (op, v) {
        (Reduce::Sum, Val::F(x)) => Val::F(fold(&x, shape, red, 0.0, |a, b| a + b)),
        (Reduce::Sum, Val::I(x)) => Val::I(fold(&x, shape, red, 0, i64::wrapping_add)),
        (Reduce::Sum, Val::U(x)) => Val::U(fold(&x, shape, red, 0, u64::wrapping_add)),
        (Reduce::Prod, Val::F(x)) => Val::F(fold(&x, shape, red, 1.0, |a, b| a * b)),
        (Reduce::Prod, Val::I(x)) => Val::I(fold(&x, shape, red, 1, i64::wrapping_mul)),
        (Reduce::Prod, Val::U(x)) => Val::U(fold(&x, shape, red, 1, u64::wrapping_mul)),
        (Reduce::Min, Val::F(x)) => Val::F(fold(&x, shape, red, f64::INFINITY, min_f)),
        (Reduce::Min, Val::I(x)) => Val::I(fold(&x, shape, red, i64::MAX, i64::min)),
        (Reduce::Min, Val::U(x)) => Val::U(fold(&x, shape, red, u64::MAX, u64::min)),
        (Reduce::Max, Val::F(x)) => Val::F(fold(&x, shape, red, f64::NEG_INFINITY, max_f)),
        (Reduce::Max, Val::I(x)) => Val::I(fold(&x, shape, red, i64::MIN, i64::max)),
        (Reduce::Max, Val::U(x)) => Val::U(fold(&x, shape, red, 0, u64::max)),
        (Reduce::Min | Reduce::All, Val::B(x)) => Val::B(fold(&x, shape, red, true, |a, b| a & b)),
        (_, Val::B(x)) => Val::B(fold(&x, shape, red, false, |a, b| a | b)),
        (_, v) => v,
    }
}

fn merge_simple(op: Reduce, a: Val, b: Val) -> Val {
    use super::kernel::{max_f, min_f, zip_same};
    match (op, a, b) {
        (Reduce::Sum, Val::F(x), Val::F(y)) => Val::F(zip_same(x, y, |a, b| a + b)),
        (Reduce::Sum, Val::I(x), Val::I(y)) => Val::I(zip_same(x, y, i64::wrapping_add)),
        (Reduce::Sum, Val::U(x), Val::U(y)) => Val::U(zip_same(x, y, u64::wrapping_add)),
        (Reduce::Prod, Val::F(x), Val::F(y)) => Val::F(zip_same(x, y, |a, b| a * b)),
        (Reduce::Prod, Val::I(x), Val::I(y)) => Val::I(zip_same(x, y, i64::wrapping_mul)),
        (Reduce::Prod, Val::U(x), Val::U(y)) => Val::U(zip_same(x, y, u64::wrapping_mul)),
        (Reduce::Min, Val::F(x), Val::F(y)) => Val::F(zip_same(x, y, min_f)),
        (Reduce::Min, Val::I(x), Val::I(y)) => Val::I(zip_same(x, y, i64::min)),
        (Reduce::Min, Val::U(x), Val::U(y)) => Val::U(zip_same(x, y, u64::min)),
        (Reduce::Max, Val::F(x), Val::F(y)) => Val::F(zip_same(x, y, max_f)),
        (Reduce::Max, Val::I(x), Val::I(y)) => Val::I(zip_same(x, y, i64::max)),
        (Reduce::Max, Val::U(x), Val::U(y)) => Val::U(zip_same(x, y, u64::max)),
        (Reduce::Min | Reduce::All, Val::B(x), Val::B(y)) => Val::B(zip_same(x, y, |a, b| a & b)),
        (_, Val::B(x), Val::B(y)) => Val::B(zip_same(x, y, |a, b| a | b)),
        (_, a, _) => a,
    }
}

fn block_moments(x: &[f64], shape: &[usize], red: &[bool]) -> Acc {
    let kept: usize = shape
        .iter()
        .zip(red)
        .filter(|(_, &r)| !r)
        .map(|(&s, _)| s)
        .product();
    let cnt = (x.len() / kept.max(1)) as f64;
    let sums = fold(x, shape, red, 0.0, |a, b| a + b);
    let mean: Vec<f64> = sums.iter().map(|s| s / cnt).collect();
    let m2 = if kept == 1 {
        let m = mean[0];
        // In 8 lanes, summed at the end (squared deviations, then a plain sum).
        let mut lanes = [0.0f64; 8];
        let mut it = x.chunks_exact(8);
        for c in &mut it {
            for (l, v) in lanes.iter_mut().zip(c) {
                *l += (v - m) * (v - m);
            }
        }
        let rest: f64 = it.remainder().iter().map(|v| (v - m) * (v - m)).sum();
        vec![lanes.iter().sum::<f64>() + rest]
    } else {
        // Deviations from each output element's mean, summed the same way.
        let n = shape.len();
        let mut ostride = vec![0usize; n];
        let mut acc = 1;
        for ax in (0..n).rev() {
            if !red[ax] {
                ostride[ax] = acc;
                acc *= shape[ax];
            }
        }
        let mut out = vec![0.0; kept];
        let mut idx = vec![0usize; n];
        let mut o = 0usize;
        for &v in x {
            let d = v - mean[o];
            out[o] += d * d;
            let mut ax = n;
            while ax > 0 {
                ax -= 1;
                idx[ax] += 1;
                o += ostride[ax];
                if idx[ax] < shape[ax] {
                    break;
                }
                o -= ostride[ax] * shape[ax];
                idx[ax] = 0;
            }
        }
        out
    };
    Acc::Moments {
        n: vec![cnt; kept],
        mean,
        m2,
    }
}

fn merge(op: Reduce, a: Acc, b: Acc) -> Acc {
    match (a, b) {
        (Acc::Simple(x), Acc::Simple(y)) => Acc::Simple(merge_simple(op, x, y)),
        (
            Acc::Moments {
                n: na,
                mean: ma,
                m2: sa,
            },
            Acc::Moments {
                n: nb,
                mean: mb,
                m2: sb,
            },
        ) => {
            let k = na.len();
            let mut n = Vec::with_capacity(k);
            let mut mean = Vec::with_capacity(k);
            let mut m2 = Vec::with_capacity(k);
            for i in 0..k {
                let t = na[i] + nb[i];
                let d = mb[i] - ma[i];
                n.push(t);
                if t == 0.0 {
                    mean.push(0.0);
                    m2.push(0.0);
                } else {
                    mean.push(ma[i] + d * nb[i] / t);
                    m2.push(sa[i] + sb[i] + d * d * na[i] * nb[i] / t);
                }
            }
            Acc::Moments { n, mean, m2 }
        }
        (a, _) => a,
    }
}

/// Joins blocks' partial results that cover consecutive output elements.
fn concat(parts: Vec<Acc>) -> Acc {
    let mut it = parts.into_iter();
    let Some(first) = it.next() else {
        return Acc::Simple(Val::F(vec![]));
    };
    it.fold(first, |a, b| match (a, b) {
        (Acc::Simple(x), Acc::Simple(y)) => Acc::Simple(match (x, y) {
            (Val::F(mut x), Val::F(y)) => {
                x.extend(y);
                Val::F(x)
            }
            (Val::I(mut x), Val::I(y)) => {
                x.extend(y);
                Val::I(x)
            }
            (Val::U(mut x), Val::U(y)) => {
                x.extend(y);
                Val::U(x)
            }
            (Val::B(mut x), Val::B(y)) => {
                x.extend(y);
                Val::B(x)
            }
            (x, _) => x,
        }),
        (
            Acc::Moments {
                mut n,
                mut mean,
                mut m2,
            },
            Acc::Moments {
                n: n2,
                mean: e2,
                m2: s2,
            },
        ) => {
            n.extend(n2);
            mean.extend(e2);
            m2.extend(s2);
            Acc::Moments { n, mean, m2 }
        }
        (a, _) => a,
    })
}

pub(super) fn run(
    e: &Expression<'_>,
    op: Reduce,
    axes: Option<&[usize]>,
    ddof: f64,
) -> Result<Reduced> {
    let nd = e.shape.len();
    let mut red = vec![axes.is_none(); nd];
    for &ax in axes.unwrap_or(&[]) {
        if ax >= nd || red[ax] {
            return Err(Error::InvalidArgument(format!(
                "{}: axis {ax} out of range or repeated for a result of {nd} axes",
                e.text
            )));
        }
        red[ax] = true;
    }
    let (acc_ty, out_ty) = dtypes(op, e.dtype);
    let out_shape: Vec<u64> = e
        .shape
        .iter()
        .zip(&red)
        .filter(|(_, &r)| !r)
        .map(|(&s, _)| s)
        .collect();
    let total: u64 = e.shape.iter().product();
    let reduced: u64 = e
        .shape
        .iter()
        .zip(&red)
        .filter(|(_, &r)| r)
        .map(|(&s, _)| s)
        .product();
    let kept: u64 = out_shape.iter().product();
    if reduced == 0 && matches!(op, Reduce::Min | Reduce::Max) && kept > 0 {
        return Err(Error::InvalidArgument(format!(
            "{}: zero-size array to reduction operation {} which has no identity",
            e.text,
            if op == Reduce::Min {
                "minimum"
            } else {
                "maximum"
            }
        )));
    }
    let region = e.full();
    let acc = if total == 0 {
        empty(op, acc_ty, kept as usize)
    } else {
        let (axis, blocks) = e.blocks(&region);
        let split_reduced = red.get(axis).copied().unwrap_or(true);
        let parts: Vec<Acc> = blocks
            .par_iter()
            .map(|&(a, b)| -> Result<Acc> {
                let v = e.block(&region, axis, a, b)?;
                let mut shape: Vec<usize> = e.shape.iter().map(|&s| s as usize).collect();
                if let Some(s) = shape.get_mut(axis) {
                    *s = (b - a) as usize;
                }
                let n: usize = shape.iter().product();
                let v = widen(cast(v, acc_ty), n);
                Ok(if moments(op) {
                    match v {
                        Val::F(x) => block_moments(&x, &shape, &red),
                        _ => Acc::Simple(Val::F(vec![])),
                    }
                } else {
                    Acc::Simple(simple_fold(op, v, &shape, &red))
                })
            })
            .collect::<Result<_>>()?;
        if split_reduced || nd == 0 {
            let mut it = parts.into_iter();
            let first = it
                .next()
                .unwrap_or_else(|| empty(op, acc_ty, kept as usize));
            it.fold(first, |a, b| merge(op, a, b))
        } else {
            concat(parts)
        }
    };
    let v = match acc {
        Acc::Simple(v) => v,
        Acc::Moments { n, mean, m2 } => Val::F(match op {
            Reduce::Mean => mean
                .iter()
                .zip(&n)
                .map(|(&m, &c)| if c == 0.0 { f64::NAN } else { m })
                .collect(),
            Reduce::Var => m2
                .iter()
                .zip(&n)
                .map(|(&s, &c)| s / (c - ddof).max(0.0))
                .collect(),
            _ => m2
                .iter()
                .zip(&n)
                .map(|(&s, &c)| (s / (c - ddof).max(0.0)).sqrt())
                .collect(),
        }),
    };
    let v = cast(v, out_ty);
    let mut data = vec![0u8; kept as usize * out_ty.itemsize()];
    to_bytes(&v, out_ty, &mut data);
    Ok(Reduced {
        dtype: out_ty,
        shape: out_shape,
        data,
    })
}

/// A length-1 block's values repeated to `n`.
fn widen(v: Val, n: usize) -> Val {
    if v.len() == n {
        return v;
    }
    match v {
        Val::F(x) => Val::F(vec![x.first().copied().unwrap_or(0.0); n]),
        Val::I(x) => Val::I(vec![x.first().copied().unwrap_or(0); n]),
        Val::U(x) => Val::U(vec![x.first().copied().unwrap_or(0); n]),
        Val::B(x) => Val::B(vec![x.first().copied().unwrap_or(false); n]),
    }
}

/// The partial result of no elements.
fn empty(op: Reduce, acc: DType, kept: usize) -> Acc {
    if moments(op) {
        return Acc::Moments {
            n: vec![0.0; kept],
            mean: vec![0.0; kept],
            m2: vec![0.0; kept],
        };
    }
    let one = matches!(op, Reduce::Prod | Reduce::All);
    Acc::Simple(match phys(acc) {
        0 => Val::B(vec![one; kept]),
        1 => Val::I(vec![i64::from(one); kept]),
        2 => Val::U(vec![u64::from(one); kept]),
        _ => Val::F(vec![if one { 1.0 } else { 0.0 }; kept]),
    })
}
