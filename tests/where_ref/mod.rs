//! A row-at-a-time reference for `where` expressions, written apart from blz's vectorised
//! evaluator and its chunk statistics: the semantics blz documents, one value at a time.
//! `tests/where_pruning.rs` and the fuzz target `where_expr` compare every query's rows
//! with it.
//!
//! - int8 .. int64 and uint8 .. uint32 compute as int64, wrapping (numpy's int64);
//! - uint64 (and integer literals past `i64::MAX`) compare exactly with every integer, and
//!   are floats in arithmetic and under unary minus;
//! - an integer meeting a float, and `/`, compute in float64; `%` takes the divisor's sign
//!   (Python's), an integer `% 0` is 0;
//! - comparisons with NaN are false, except `!=`.

#![allow(dead_code, reason = "each user takes its own subset")]

use blz::query::{BinOp, Expr, Literal};
use blz::DType;

/// One column's values, as the reference computes with them.
#[derive(Debug, Clone)]
pub enum Col {
    /// A bool column.
    Bool(Vec<bool>),
    /// An integer column: its values, and whether it is uint64.
    Int(Vec<i128>, bool),
    /// A float column (float32 widened).
    Float(Vec<f64>),
}

impl Col {
    /// Column values of `dtype` from native-order bytes.
    pub fn from_bytes(dtype: DType, b: &[u8]) -> Col {
        macro_rules! ints {
            ($t:ty) => {
                b.chunks_exact(std::mem::size_of::<$t>())
                    .map(|c| i128::from(<$t>::from_ne_bytes(c.try_into().unwrap())))
                    .collect()
            };
        }
        match dtype {
            DType::Bool => Col::Bool(b.iter().map(|&x| x != 0).collect()),
            DType::I8 => Col::Int(ints!(i8), false),
            DType::I16 => Col::Int(ints!(i16), false),
            DType::I32 => Col::Int(ints!(i32), false),
            DType::I64 => Col::Int(ints!(i64), false),
            DType::U8 => Col::Int(ints!(u8), false),
            DType::U16 => Col::Int(ints!(u16), false),
            DType::U32 => Col::Int(ints!(u32), false),
            DType::U64 => Col::Int(ints!(u64), true),
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

    fn at(&self, r: usize) -> Val {
        match self {
            Col::Bool(v) => Val::B(v[r]),
            Col::Int(v, u) => Val::I(v[r], *u),
            Col::Float(v) => Val::F(v[r]),
        }
    }
}

/// A value: bool, integer (`true`: a u64) or float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Val {
    B(bool),
    I(i128, bool),
    F(f64),
}

impl Val {
    fn f(self) -> Option<f64> {
        match self {
            Val::I(i, _) => Some(i as f64),
            Val::F(x) => Some(x),
            Val::B(_) => None,
        }
    }
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

/// `e` at row `r` of columns `cols` (by name); `None` where the reference has
/// no answer (strings) or the types do not fit (blz refuses such a query).
pub fn eval(e: &Expr, cols: &[(&str, Col)], r: usize) -> Option<Val> {
    Some(match e {
        Expr::Column { name, .. } => cols.iter().find(|(n, _)| n == name)?.1.at(r),
        Expr::Lit { value, .. } => match value {
            Literal::Bool(b) => Val::B(*b),
            Literal::Int(i) => Val::I(i128::from(*i), false),
            Literal::UInt(u) => Val::I(i128::from(*u), true),
            Literal::Float(x) => Val::F(*x),
            _ => return None,
        },
        Expr::Neg { arg, .. } => match eval(arg, cols, r)? {
            Val::I(i, false) => Val::I(i128::from((i as i64).wrapping_neg()), false),
            Val::I(i, true) => Val::F(-(i as f64)),
            Val::F(x) => Val::F(-x),
            Val::B(_) => return None,
        },
        Expr::Not { arg, .. } => match eval(arg, cols, r)? {
            Val::B(b) => Val::B(!b),
            _ => return None,
        },
        Expr::Bin {
            op, left, right, ..
        } => {
            let (a, b) = (eval(left, cols, r)?, eval(right, cols, r)?);
            match op {
                BinOp::And | BinOp::Or => match (a, b) {
                    (Val::B(x), Val::B(y)) => {
                        Val::B(if *op == BinOp::And { x && y } else { x || y })
                    }
                    _ => return None,
                },
                op if op.is_comparison() => match (a, b) {
                    (Val::B(x), Val::B(y)) if matches!(op, BinOp::Eq | BinOp::Ne) => {
                        Val::B(cmp(*op, x, y))
                    }
                    (Val::I(x, _), Val::I(y, _)) => Val::B(cmp(*op, x, y)),
                    (x, y) => Val::B(cmp(*op, x.f()?, y.f()?)),
                },
                op => match (a, b) {
                    (Val::I(x, false), Val::I(y, false)) if *op != BinOp::Div => {
                        let (x, y) = (x as i64, y as i64);
                        Val::I(
                            i128::from(match op {
                                BinOp::Add => x.wrapping_add(y),
                                BinOp::Sub => x.wrapping_sub(y),
                                BinOp::Mul => x.wrapping_mul(y),
                                _ if y == 0 => 0,
                                _ => {
                                    let m = x.wrapping_rem(y);
                                    if m != 0 && (m < 0) != (y < 0) {
                                        m + y
                                    } else {
                                        m
                                    }
                                }
                            }),
                            false,
                        )
                    }
                    (x, y) => {
                        let (x, y) = (x.f()?, y.f()?);
                        Val::F(match op {
                            BinOp::Add => x + y,
                            BinOp::Sub => x - y,
                            BinOp::Mul => x * y,
                            BinOp::Div => x / y,
                            _ => py_mod(x, y),
                        })
                    }
                },
            }
        }
    })
}

/// The rows of `n` where `e` is true; `None` where the reference has no answer.
pub fn rows(e: &Expr, cols: &[(&str, Col)], n: usize) -> Option<Vec<u64>> {
    let mut out = Vec::new();
    for r in 0..n {
        match eval(e, cols, r)? {
            Val::B(true) => out.push(r as u64),
            Val::B(false) => {}
            _ => return None,
        }
    }
    Some(out)
}
