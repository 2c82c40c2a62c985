//! A row-at-a-time reference for `where` expressions, written apart from blz's vectorised
//! evaluator and its chunk statistics: the semantics blz documents, one value at a time.
//! `tests/where_pruning.rs` and the fuzz target `where_expr` compare every query's rows
//! with it.
//!
//! The rules are numpy 2's (NEP 50, "Promotion rules for Python scalars"; numpy 2.4 checked),
//! with the expression's literals as the Python scalars numpy would see:
//!
//! - an integer column computes in its own dtype, wrapping at its width (uint8 + 1 of 255 is
//!   0, int8 * 100 wraps in int8, `-u` of a uint64 is 2^64 - u);
//! - two integer columns compute in `np.promote_types` of their dtypes: the smallest
//!   integer dtype holding both ranges (int16 for uint8 with int8), float64 for uint64
//!   with a signed dtype (no integer dtype holds both);
//! - an integer literal is a "weak" Python int: in `+ - * %` with an integer column it takes
//!   the column's dtype, and one out of that dtype's range is refused (numpy 2 raises
//!   `OverflowError: Python integer 300 out of bounds for uint8`); with a float it is a
//!   float64;
//! - comparisons of integers are exact whatever their dtypes and however large a literal
//!   (numpy 2 compares uint64 with int64, and an array with an out-of-range Python int,
//!   exactly); an integer column against a float compares as float64; a literal integer
//!   against a literal float compares exactly (Python's);
//! - literals among themselves compute as Python ints, exactly; past i128 (blz's
//!   documented bound, not Python's) as float64;
//! - `/` is float64 of both operands (numpy's true division of integers, which converts a
//!   Python int operand to float64 with no range check); `%` takes the divisor's sign, an
//!   integer `% 0` is 0 (numpy's, for arrays; Python would raise);
//! - float32 columns compute as float64 (blz's documented simplification, not numpy's);
//! - comparisons with NaN are false, except `!=`.

#![allow(dead_code, reason = "each user takes its own subset")]

use blz::query::{BinOp, Expr, Literal};
use blz::DType;

/// An integer dtype: its width in bits, and whether it is signed.
pub type Int = (u32, bool);

/// One column's values, as the reference computes with them.
#[derive(Debug, Clone)]
pub enum Col {
    /// A bool column.
    Bool(Vec<bool>),
    /// An integer column: its values and dtype.
    Int(Vec<i128>, Int),
    /// A float column (float32 widened).
    Float(Vec<f64>),
}

impl Col {
    /// Column values of `dtype` from native-order bytes.
    pub fn from_bytes(dtype: DType, b: &[u8]) -> Col {
        macro_rules! ints {
            ($t:ty) => {
                Col::Int(
                    b.chunks_exact(std::mem::size_of::<$t>())
                        .map(|c| i128::from(<$t>::from_ne_bytes(c.try_into().unwrap())))
                        .collect(),
                    (<$t>::BITS, <$t>::MIN != 0),
                )
            };
        }
        match dtype {
            DType::Bool => Col::Bool(b.iter().map(|&x| x != 0).collect()),
            DType::I8 => ints!(i8),
            DType::I16 => ints!(i16),
            DType::I32 => ints!(i32),
            DType::I64 => ints!(i64),
            DType::U8 => ints!(u8),
            DType::U16 => ints!(u16),
            DType::U32 => ints!(u32),
            DType::U64 => ints!(u64),
            DType::F32 => Col::Float(
                b.chunks_exact(4)
                    .map(|c| f64::from(f32::from_ne_bytes(c.try_into().unwrap())))
                    .collect(),
            ),
            DType::F64 => Col::Float(
                b.chunks_exact(8)
                    .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
                    .collect(),
            ),
            d => panic!("no reference for {d:?}"),
        }
    }

    fn len(&self) -> usize {
        match self {
            Col::Bool(v) => v.len(),
            Col::Int(v, _) => v.len(),
            Col::Float(v) => v.len(),
        }
    }

    /// Row `r`; past the end, a zero of the column's type (to type-check an expression over
    /// no rows).
    fn at(&self, r: usize) -> Val {
        match self {
            Col::Bool(v) => Val::B(v.get(r).copied().unwrap_or(false)),
            Col::Int(v, k) => Val::I(v.get(r).copied().unwrap_or(0), Some(*k)),
            Col::Float(v) => Val::F(v.get(r).copied().unwrap_or(0.0), false),
        }
    }
}

/// A value: bool, integer (of a dtype; `None`: a Python int, from literals) or float
/// (`true`: a Python float, from literals only; else numpy's float64).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Val {
    B(bool),
    I(i128, Option<Int>),
    F(f64, bool),
}

impl Val {
    fn f(self) -> Option<f64> {
        match self {
            Val::I(i, _) => Some(i as f64),
            Val::F(x, _) => Some(x),
            Val::B(_) => None,
        }
    }

    /// Whether it is a Python scalar (computed from literals only).
    fn py(self) -> bool {
        matches!(self, Val::I(_, None) | Val::F(_, true))
    }
}

/// Why the reference has no rows for an expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum No {
    /// numpy refuses it: a literal out of its column's dtype's range in arithmetic
    /// (`OverflowError`); blz returns `InvalidExpression`.
    Overflow,
    /// Outside the reference (strings, types blz refuses).
    Unknown,
}

fn lo_hi((bits, signed): Int) -> (i128, i128) {
    if signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

/// `v` modulo 2^bits, in the dtype's range (numpy's wrap-around).
fn wrap(v: i128, k: Int) -> i128 {
    let m = v.rem_euclid(1i128 << k.0);
    if k.1 && m > lo_hi(k).1 {
        m - (1i128 << k.0)
    } else {
        m
    }
}

/// `np.promote_types` of two integer dtypes: the smallest one whose range holds both (signed
/// if either is); `None` when none does (uint64 with a signed dtype: float64).
fn promote(a: Int, b: Int) -> Option<Int> {
    let signed = a.1 || b.1;
    [8, 16, 32, 64]
        .into_iter()
        .map(|bits| (bits, signed))
        .find(|&k| {
            let (lo, hi) = lo_hi(k);
            [a, b].iter().all(|&x| lo <= lo_hi(x).0 && lo_hi(x).1 <= hi)
        })
}

fn py_mod(a: f64, b: f64) -> f64 {
    let r = a % b;
    if r != 0.0 && (r < 0.0) != (b < 0.0) {
        r + b
    } else {
        r
    }
}

fn cmp<T: PartialOrd>(op: BinOp, x: T, y: T) -> bool {
    match op {
        BinOp::Lt => x < y,
        BinOp::Le => x <= y,
        BinOp::Gt => x > y,
        BinOp::Ge => x >= y,
        BinOp::Eq => x == y,
        _ => x != y,
    }
}

/// Python's `i op f` for an int and a float: exact.
fn cmp_exact(op: BinOp, i: i128, f: f64) -> bool {
    if f.is_nan() {
        return op == BinOp::Ne;
    }
    // -1, 0, 1: i below, at, above f.
    let ord = if f.is_infinite() || f.abs() >= 2f64.powi(127) {
        if f > 0.0 {
            -1
        } else {
            1
        }
    } else {
        let fl = f.floor();
        let fi = fl as i128;
        if i < fi {
            -1
        } else if i > fi {
            1
        } else if f == fl {
            0
        } else {
            -1
        }
    };
    cmp(op, ord, 0)
}

/// `op` with its operands swapped.
fn swap(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::Le => BinOp::Ge,
        BinOp::Gt => BinOp::Lt,
        BinOp::Ge => BinOp::Le,
        op => op,
    }
}

/// Python's integer arithmetic, or float64 past i128 (blz's bound).
fn py_int(op: BinOp, x: i128, y: i128) -> Val {
    let exact = match op {
        BinOp::Add => x.checked_add(y),
        BinOp::Sub => x.checked_sub(y),
        BinOp::Mul => x.checked_mul(y),
        _ if y == 0 => Some(0),
        _ => Some(
            x.checked_rem_euclid(y)
                .map_or(0, |m| if y < 0 && m != 0 { m + y } else { m }),
        ),
    };
    match exact {
        Some(v) => Val::I(v, None),
        None => float_op(op, x as f64, y as f64, true),
    }
}

fn float_op(op: BinOp, x: f64, y: f64, py: bool) -> Val {
    Val::F(
        match op {
            BinOp::Add => x + y,
            BinOp::Sub => x - y,
            BinOp::Mul => x * y,
            BinOp::Div => x / y,
            _ => py_mod(x, y),
        },
        py,
    )
}

/// `e` at row `r` of columns `cols` (by name); `Err` where numpy refuses it or the
/// reference has no answer.
pub fn eval(e: &Expr, cols: &[(&str, Col)], r: usize) -> Result<Val, No> {
    Ok(match e {
        Expr::Column { name, .. } => cols
            .iter()
            .find(|(n, _)| n == name)
            .ok_or(No::Unknown)?
            .1
            .at(r),
        // The reference's columns hold no nulls.
        Expr::IsNull { negated, .. } => Val::B(*negated),
        Expr::Lit { value, .. } => match value {
            Literal::Bool(b) => Val::B(*b),
            Literal::Int(i) => Val::I(*i, None),
            Literal::Float(x) => Val::F(*x, true),
            _ => return Err(No::Unknown),
        },
        Expr::Neg { arg, .. } => match eval(arg, cols, r)? {
            Val::I(i, Some(k)) => Val::I(wrap(-i, k), Some(k)),
            Val::I(i, None) => i
                .checked_neg()
                .map_or(Val::F(-(i as f64), true), |n| Val::I(n, None)),
            Val::F(x, py) => Val::F(-x, py),
            Val::B(_) => return Err(No::Unknown),
        },
        Expr::Not { arg, .. } => match eval(arg, cols, r)? {
            Val::B(b) => Val::B(!b),
            _ => return Err(No::Unknown),
        },
        Expr::Bin {
            op, left, right, ..
        } => {
            // Both sides always: numpy evaluates (and refuses) both.
            let (a, b) = (eval(left, cols, r)?, eval(right, cols, r)?);
            match op {
                BinOp::And | BinOp::Or => match (a, b) {
                    (Val::B(x), Val::B(y)) => {
                        Val::B(if *op == BinOp::And { x && y } else { x || y })
                    }
                    _ => return Err(No::Unknown),
                },
                op if op.is_comparison() => match (a, b) {
                    (Val::B(x), Val::B(y)) if matches!(op, BinOp::Eq | BinOp::Ne) => {
                        Val::B(cmp(*op, x, y))
                    }
                    (Val::B(_), _) | (_, Val::B(_)) => return Err(No::Unknown),
                    (Val::I(x, _), Val::I(y, _)) => Val::B(cmp(*op, x, y)),
                    // Python's int against Python's float: exact. Against a float64
                    // array, the int is converted to float64 (NEP 50).
                    (Val::I(x, None), Val::F(y, true)) => Val::B(cmp_exact(*op, x, y)),
                    (Val::F(x, true), Val::I(y, None)) => Val::B(cmp_exact(swap(*op), y, x)),
                    (x, y) => Val::B(cmp(*op, x.f().unwrap(), y.f().unwrap())),
                },
                BinOp::Div => float_op(
                    BinOp::Div,
                    a.f().ok_or(No::Unknown)?,
                    b.f().ok_or(No::Unknown)?,
                    a.py() && b.py(),
                ),
                op => match (a, b) {
                    (Val::I(x, None), Val::I(y, None)) => py_int(*op, x, y),
                    (Val::I(x, kx), Val::I(y, ky)) => {
                        // A Python int takes the other side's dtype, and must fit in it.
                        let k = match (kx, ky) {
                            (Some(p), Some(q)) => promote(p, q),
                            (Some(k), None) | (None, Some(k)) => {
                                let lit = if kx.is_none() { x } else { y };
                                let (lo, hi) = lo_hi(k);
                                if lit < lo || lit > hi {
                                    return Err(No::Overflow);
                                }
                                Some(k)
                            }
                            (None, None) => unreachable!(),
                        };
                        match k {
                            Some(k) => Val::I(
                                wrap(
                                    match op {
                                        BinOp::Add => x + y,
                                        BinOp::Sub => x - y,
                                        // Modulo 2^128, so modulo 2^bits too.
                                        BinOp::Mul => x.wrapping_mul(y),
                                        _ if y == 0 => 0,
                                        _ => {
                                            let m = x.rem_euclid(y);
                                            if y < 0 && m != 0 {
                                                m + y
                                            } else {
                                                m
                                            }
                                        }
                                    },
                                    k,
                                ),
                                Some(k),
                            ),
                            None => float_op(*op, x as f64, y as f64, false),
                        }
                    }
                    (x, y) => float_op(
                        *op,
                        x.f().ok_or(No::Unknown)?,
                        y.f().ok_or(No::Unknown)?,
                        x.py() && y.py(),
                    ),
                },
            }
        }
    })
}

/// The rows of `n` where `e` is true, or why there are none: an expression numpy refuses
/// is refused whatever the rows (and with none).
pub fn outcome(e: &Expr, cols: &[(&str, Col)], n: usize) -> Result<Vec<u64>, No> {
    debug_assert!(cols.iter().all(|c| c.1.len() == n));
    if n == 0 {
        eval(e, cols, 0)?;
    }
    let mut out = Vec::new();
    for r in 0..n {
        match eval(e, cols, r)? {
            Val::B(true) => out.push(r as u64),
            Val::B(false) => {}
            _ => return Err(No::Unknown),
        }
    }
    Ok(out)
}

/// The rows of `n` where `e` is true; `None` where the reference has no answer or numpy
/// refuses the expression.
pub fn rows(e: &Expr, cols: &[(&str, Col)], n: usize) -> Option<Vec<u64>> {
    outcome(e, cols, n).ok()
}
