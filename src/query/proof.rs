//! What a range's chunk statistics prove about an expression: an abstract evaluation that
//! follows the evaluator ([`super::eval`]) exactly, so that a range proven to match no row
//! (or every row) is skipped (or taken) without evaluating it.

use super::eval::{int_result, py_int, Ty, IK};
use super::expr::{BinOp, Expr, Literal};
use super::time;
use crate::datetime::Length;
use crate::stats::{ChunkStats, StatValue};

/// What chunk statistics prove about an expression over a range, following the evaluator
/// exactly: an integer's interval wraps as the evaluator's arithmetic in its type does (or
/// is unknown when it may wrap only in part), an integer turns into a float where the
/// evaluator converts it, a float interval counts NaN apart. Unknown is always a safe
/// answer: it reads the range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Abs {
    /// Whether some row may be true, whether some row may be false.
    Bool { t: bool, f: bool },
    /// Every value is an integer in `[lo, hi]` (no row when `lo > hi`) of type `kind`
    /// (`None`: a literal, whose `lo == hi`).
    Int {
        lo: i128,
        hi: i128,
        kind: Option<IK>,
    },
    /// Non-NaN values lie in `[lo, hi]` (none when `lo > hi`); `nan`: some may be NaN.
    Float { lo: f64, hi: f64, nan: bool },
    /// Dates or durations whose keys ([`time::key`]) lie in `range` (`None`: no value but
    /// NaT); `nat`: some may be NaT.
    Time {
        range: Option<(Length, Length)>,
        nat: bool,
    },
    /// Nothing known.
    Any,
}

const ANY_BOOL: Abs = Abs::Bool { t: true, f: true };
/// The values of type `k` of integers in `[lo, hi]` computed without wrapping: the interval
/// shifted by a multiple of 2^bits when the whole of it wraps alike, else unknown.
fn wrap_to(k: IK, lo: i128, hi: i128) -> Abs {
    let kind = Some(k);
    if lo > hi {
        return Abs::Int { lo, hi, kind };
    }
    let width = 1i128 << k.bits();
    let band = |x: i128| (x - k.min()).div_euclid(width);
    let (bl, bh) = (band(lo), band(hi));
    if bl != bh {
        return Abs::Any;
    }
    Abs::Int {
        lo: lo - bl * width,
        hi: hi - bh * width,
        kind,
    }
}

/// A number's interval as the evaluator's `f64` values of it (`as f64` is monotonic).
fn to_float(a: Abs) -> Option<(f64, f64, bool)> {
    match a {
        Abs::Int { lo, hi, .. } if lo > hi => Some((f64::INFINITY, f64::NEG_INFINITY, false)),
        Abs::Int { lo, hi, .. } => Some((lo as f64, hi as f64, false)),
        Abs::Float { lo, hi, nan } => Some((lo, hi, nan)),
        _ => None,
    }
}

fn stat_int(v: StatValue) -> Option<i128> {
    match v {
        StatValue::Int(i) => Some(i128::from(i)),
        StatValue::UInt(u) => Some(i128::from(u)),
        _ => None,
    }
}

fn stat_num(s: &ChunkStats, ty: Ty) -> Abs {
    let none = s.min.is_none() && s.max.is_none();
    match ty {
        Ty::Int(k) => {
            let kind = Some(k);
            if none && s.nan_count == 0 {
                return Abs::Int {
                    lo: 0,
                    hi: -1,
                    kind,
                };
            }
            match (s.min.and_then(stat_int), s.max.and_then(stat_int)) {
                (Some(lo), Some(hi)) if s.nan_count == 0 => Abs::Int { lo, hi, kind },
                _ => Abs::Any,
            }
        }
        _ => {
            let nan = s.nan_count > 0;
            if none {
                return Abs::Float {
                    lo: f64::INFINITY,
                    hi: f64::NEG_INFINITY,
                    nan,
                };
            }
            match (s.min, s.max) {
                (Some(lo), Some(hi)) => {
                    let (lo, hi) = (lo.as_f64(), hi.as_f64());
                    if lo.is_nan() || hi.is_nan() {
                        return Abs::Any;
                    }
                    Abs::Float { lo, hi, nan }
                }
                _ => Abs::Any,
            }
        }
    }
}

/// Abstract evaluation of `e` with each column's statistics over the range (`None`:
/// unknown).
pub(crate) fn abs_eval(e: &Expr, stats: &dyn Fn(&str) -> Option<(ChunkStats, Ty)>) -> Abs {
    match e {
        Expr::Column { name, .. } => match stats(name) {
            Some((s, Ty::Bool)) => match (s.min, s.max) {
                (Some(StatValue::Bool(lo)), Some(StatValue::Bool(hi))) => {
                    Abs::Bool { t: hi, f: !lo }
                }
                (None, None) => Abs::Bool { t: false, f: false },
                _ => ANY_BOOL,
            },
            Some((s, ty @ (Ty::Int(_) | Ty::Float))) => stat_num(&s, ty),
            Some((s, Ty::Time { delta, unit })) => {
                let key = |v: Option<StatValue>| match v {
                    Some(StatValue::Int(i)) => time::key(delta, unit, i),
                    _ => None,
                };
                match (s.min, s.max) {
                    (None, None) => Abs::Time {
                        range: None,
                        nat: s.nan_count > 0,
                    },
                    (lo, hi) => match (key(lo), key(hi)) {
                        (Some(lo), Some(hi)) => Abs::Time {
                            range: Some((lo, hi)),
                            nat: s.nan_count > 0,
                        },
                        _ => Abs::Any,
                    },
                }
            }
            _ => Abs::Any,
        },
        Expr::Lit { value, .. } => match value {
            Literal::Bool(b) => Abs::Bool { t: *b, f: !*b },
            Literal::Int(i) => Abs::Int {
                lo: *i,
                hi: *i,
                kind: None,
            },
            Literal::Float(x) if x.is_nan() => Abs::Float {
                lo: f64::INFINITY,
                hi: f64::NEG_INFINITY,
                nan: true,
            },
            Literal::Float(x) => Abs::Float {
                lo: *x,
                hi: *x,
                nan: false,
            },
            Literal::Str(_) => Abs::Any,
            Literal::Time { delta, unit, value } => {
                let k = time::key(*delta, *unit, *value);
                Abs::Time {
                    range: k.map(|k| (k, k)),
                    nat: k.is_none(),
                }
            }
        },
        Expr::Neg { arg, .. } => match abs_eval(arg, stats) {
            // Negation wraps in the type: -i64::MIN is i64::MIN, -u of a uint64 2^64 - u.
            Abs::Int {
                lo,
                hi,
                kind: Some(k),
            } => wrap_to(k, -hi, -lo),
            // A literal's is exact (Python's), or float64 past i128.
            Abs::Int { lo, kind: None, .. } => lit_abs(lo.checked_neg().ok_or(-(lo as f64))),
            a => match to_float(a) {
                Some((lo, hi, nan)) => Abs::Float {
                    lo: -hi,
                    hi: -lo,
                    nan,
                },
                None => Abs::Any,
            },
        },
        // Null counts are not statistics the query reads here.
        Expr::IsNull { .. } => ANY_BOOL,
        Expr::Not { arg, .. } => match abs_eval(arg, stats) {
            Abs::Bool { t, f } => Abs::Bool { t: f, f: t },
            _ => ANY_BOOL,
        },
        Expr::Bin {
            op, left, right, ..
        } => {
            let (a, b) = (abs_eval(left, stats), abs_eval(right, stats));
            match op {
                BinOp::And | BinOp::Or => match (a, b) {
                    (Abs::Bool { t: at, f: af }, Abs::Bool { t: bt, f: bf }) => {
                        if *op == BinOp::And {
                            Abs::Bool {
                                t: at && bt,
                                f: af || bf,
                            }
                        } else {
                            Abs::Bool {
                                t: at || bt,
                                f: af && bf,
                            }
                        }
                    }
                    _ => ANY_BOOL,
                },
                op if op.is_comparison() => abs_compare(*op, a, b),
                BinOp::Add | BinOp::Sub | BinOp::Mul => abs_arith(*op, a, b),
                // Division and remainder: not worth proving.
                _ => Abs::Any,
            }
        }
    }
}

/// A literal's value: an integer, or (`Err`) a float.
fn lit_abs(v: std::result::Result<i128, f64>) -> Abs {
    match v {
        Ok(i) => Abs::Int {
            lo: i,
            hi: i,
            kind: None,
        },
        Err(x) if x.is_nan() => Abs::Float {
            lo: f64::INFINITY,
            hi: f64::NEG_INFINITY,
            nan: true,
        },
        Err(x) => Abs::Float {
            lo: x,
            hi: x,
            nan: false,
        },
    }
}

/// `+`, `-` or `*` over intervals, as the evaluator computes them.
fn abs_arith(op: BinOp, a: Abs, b: Abs) -> Abs {
    if let (
        Abs::Int {
            lo: alo,
            hi: ahi,
            kind: ka,
        },
        Abs::Int {
            lo: blo,
            hi: bhi,
            kind: kb,
        },
    ) = (a, b)
    {
        match int_result(ka, kb) {
            // Two literals: Python's arithmetic, as the evaluator's.
            Ok(None) => return lit_abs(py_int(op, alo, blo)),
            Ok(Some(k)) => {
                if alo > ahi || blo > bhi {
                    return Abs::Int {
                        lo: 0,
                        hi: -1,
                        kind: Some(k),
                    };
                }
                // Exact (operands are within 2^64 of 0, a literal within the type), then
                // wrapped to the type; past i128 (a product of uint64s): unknown.
                let (lo, hi) = match op {
                    BinOp::Add => (alo.checked_add(blo), ahi.checked_add(bhi)),
                    BinOp::Sub => (alo.checked_sub(bhi), ahi.checked_sub(blo)),
                    _ => {
                        let c = [
                            alo.checked_mul(blo),
                            alo.checked_mul(bhi),
                            ahi.checked_mul(blo),
                            ahi.checked_mul(bhi),
                        ];
                        if c.iter().any(Option::is_none) {
                            return Abs::Any;
                        }
                        let c = c.map(|x| x.unwrap_or(0));
                        (c.iter().copied().min(), c.iter().copied().max())
                    }
                };
                return match (lo, hi) {
                    (Some(lo), Some(hi)) => wrap_to(k, lo, hi),
                    _ => Abs::Any,
                };
            }
            // uint64 with a signed type: float64.
            Err(()) => {}
        }
    }
    // Anything else (a float, or uint64 with a signed type) is computed in f64.
    let (Some((alo, ahi, an)), Some((blo, bhi, bn))) = (to_float(a), to_float(b)) else {
        return Abs::Any;
    };
    if alo > ahi || blo > bhi {
        // A side with no number: every row (if any) is NaN.
        return Abs::Float {
            lo: f64::INFINITY,
            hi: f64::NEG_INFINITY,
            nan: an || bn,
        };
    }
    let inf = f64::INFINITY;
    let (lo, hi, nan) = match op {
        // Rounding is monotonic, so the bounds' sums bound every sum; inf - inf is NaN.
        BinOp::Add => (
            alo + blo,
            ahi + bhi,
            alo == -inf && bhi == inf || ahi == inf && blo == -inf,
        ),
        BinOp::Sub => (
            alo - bhi,
            ahi - blo,
            ahi == inf && bhi == inf || alo == -inf && blo == -inf,
        ),
        _ => {
            let c = [alo * blo, alo * bhi, ahi * blo, ahi * bhi];
            let has_zero = |lo: f64, hi: f64| lo <= 0.0 && hi >= 0.0;
            let has_inf = |lo: f64, hi: f64| lo == -inf || hi == inf;
            // 0 * inf is NaN.
            let nan =
                has_zero(alo, ahi) && has_inf(blo, bhi) || has_zero(blo, bhi) && has_inf(alo, ahi);
            if c.iter().any(|x| x.is_nan()) {
                (-inf, inf, true)
            } else {
                (
                    c.iter().copied().fold(inf, f64::min),
                    c.iter().copied().fold(-inf, f64::max),
                    nan,
                )
            }
        }
    };
    Abs::Float {
        lo: if lo.is_nan() { -inf } else { lo },
        hi: if hi.is_nan() { inf } else { hi },
        nan: nan || an || bn,
    }
}

/// Whether `op` may be true, may be false, for some pair of values from `[alo, ahi]` and
/// `[blo, bhi]` (both non-empty, no NaN).
fn cmp_bounds<T: PartialOrd>(op: BinOp, alo: T, ahi: T, blo: T, bhi: T) -> (bool, bool) {
    let single_equal = alo == ahi && blo == bhi && alo == blo;
    let overlap = alo <= bhi && blo <= ahi;
    match op {
        BinOp::Lt => (alo < bhi, ahi >= blo),
        BinOp::Le => (alo <= bhi, ahi > blo),
        BinOp::Gt => (ahi > blo, alo <= bhi),
        BinOp::Ge => (ahi >= blo, alo < bhi),
        BinOp::Eq => (overlap, !single_equal),
        _ => (!single_equal, overlap),
    }
}

fn abs_compare(op: BinOp, a: Abs, b: Abs) -> Abs {
    match (a, b) {
        // Dates with dates, durations with durations; a NaT makes every comparison false
        // but `!=`.
        (Abs::Time { range: ra, nat: na }, Abs::Time { range: rb, nat: nb }) => {
            let (mut t, mut f) = match (ra, rb) {
                (Some((alo, ahi)), Some((blo, bhi))) => cmp_bounds(op, alo, ahi, blo, bhi),
                _ => (false, false),
            };
            if na || nb {
                if op == BinOp::Ne {
                    t = true;
                } else {
                    f = true;
                }
            }
            Abs::Bool { t, f }
        }
        (Abs::Bool { t: at, f: af }, Abs::Bool { t: bt, f: bf }) => {
            let eq_t = at && bt || af && bf;
            let ne_t = at && bf || af && bt;
            match op {
                BinOp::Eq => Abs::Bool { t: eq_t, f: ne_t },
                BinOp::Ne => Abs::Bool { t: ne_t, f: eq_t },
                _ => ANY_BOOL,
            }
        }
        // Integers with integers compare exactly, whatever their signs.
        (
            Abs::Int {
                lo: alo, hi: ahi, ..
            },
            Abs::Int {
                lo: blo, hi: bhi, ..
            },
        ) => {
            if alo > ahi || blo > bhi {
                // No row.
                return Abs::Bool { t: false, f: false };
            }
            let (t, f) = cmp_bounds(op, alo, ahi, blo, bhi);
            Abs::Bool { t, f }
        }
        // A literal integer with a float: Python's exact comparison, a constant the
        // evaluator decides.
        (Abs::Int { kind: None, .. }, Abs::Float { .. })
        | (Abs::Float { .. }, Abs::Int { kind: None, .. }) => ANY_BOOL,
        (a, b) => {
            let (Some((alo, ahi, an)), Some((blo, bhi, bn))) = (to_float(a), to_float(b)) else {
                return ANY_BOOL;
            };
            // Some pair of values is unordered (NaN), or a side has no number at all.
            let nan = an || bn;
            if alo > ahi || blo > bhi {
                // Every comparison involves a NaN: false, except `!=`.
                return match op {
                    BinOp::Ne => Abs::Bool { t: nan, f: false },
                    _ => Abs::Bool { t: false, f: nan },
                };
            }
            let (t, f) = cmp_bounds(op, alo, ahi, blo, bhi);
            if op == BinOp::Ne {
                Abs::Bool { t: t || nan, f }
            } else {
                Abs::Bool { t, f: f || nan }
            }
        }
    }
}

/// Statistics of several chunks together (`None` if any is unknown).
pub(crate) fn merge(stats: &[Option<ChunkStats>]) -> Option<ChunkStats> {
    let mut out: Option<ChunkStats> = None;
    for s in stats {
        let s = (*s)?;
        out = Some(match out {
            None => s,
            Some(o) => {
                let pick = |a: Option<StatValue>, b: Option<StatValue>, lower: bool| match (a, b) {
                    (Some(x), Some(y)) => {
                        let lt = match (x, y) {
                            (StatValue::Int(p), StatValue::Int(q)) => p < q,
                            (StatValue::UInt(p), StatValue::UInt(q)) => p < q,
                            (StatValue::Bool(p), StatValue::Bool(q)) => !p & q,
                            _ => x.as_f64() < y.as_f64(),
                        };
                        Some(if lt == lower { x } else { y })
                    }
                    (x, None) => x,
                    (None, y) => y,
                };
                ChunkStats {
                    min: pick(o.min, s.min, true),
                    max: pick(o.max, s.max, false),
                    nan_count: o.nan_count + s.nan_count,
                    sum: None,
                }
            }
        });
    }
    out
}
