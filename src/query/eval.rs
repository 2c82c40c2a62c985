//! Type checking and evaluation of a parsed expression over one range of rows, and what a
//! range's chunk statistics prove about it.

use super::expr::{error, BinOp, Expr, Literal};
use crate::dtype::DType;
use crate::error::Result;
use crate::stats::{ChunkStats, StatValue};
use std::borrow::Cow;
use std::collections::HashMap;

/// The type of an expression's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Bool,
    Int,
    Float,
    Str,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::Bool => "a boolean",
            Ty::Int => "an integer",
            Ty::Float => "a float",
            Ty::Str => "a string",
        }
    }

    fn numeric(self) -> bool {
        matches!(self, Ty::Int | Ty::Float)
    }

    /// The type a column of `dtype` evaluates as (`uint64` as float, as numexpr does when it
    /// meets int64; complex is refused).
    pub(crate) fn of_dtype(dtype: DType) -> Option<Ty> {
        Some(match dtype {
            DType::Bool => Ty::Bool,
            DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U16
            | DType::U32 => Ty::Int,
            DType::U64 | DType::F32 | DType::F64 => Ty::Float,
            DType::Bytes(_) | DType::Str(_) => Ty::Str,
            DType::C64 | DType::C128 => return None,
        })
    }
}

/// One column's rows of a range, as read.
#[derive(Debug)]
pub(crate) enum Raw {
    /// `int64` elements.
    I64(Vec<i64>),
    /// `float64` elements.
    F64(Vec<f64>),
    /// Other fixed-size elements, native order.
    Fixed(DType, Vec<u8>),
    /// Variable-length items.
    Var(Vec<Vec<u8>>),
}

impl Raw {
    /// The values, as the evaluator computes with them.
    fn value(&self) -> V<'_> {
        match self {
            Raw::I64(v) => V::Int(Cow::Borrowed(v)),
            Raw::F64(v) => V::Float(Cow::Borrowed(v)),
            Raw::Var(v) => V::Str(v.iter().map(|s| Cow::Borrowed(s.as_slice())).collect()),
            Raw::Fixed(d, b) => fixed_value(*d, b),
        }
    }
}

macro_rules! conv {
    ($b:expr, $t:ty, $to:ty) => {
        $b.chunks_exact(std::mem::size_of::<$t>())
            .map(|c| {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(c);
                <$t>::from_ne_bytes(a) as $to
            })
            .collect()
    };
}

fn fixed_value(d: DType, b: &[u8]) -> V<'_> {
    match d {
        DType::Bool => V::Bool(Cow::Owned(b.iter().map(|&x| x != 0).collect())),
        DType::I8 => V::Int(Cow::Owned(conv!(b, i8, i64))),
        DType::I16 => V::Int(Cow::Owned(conv!(b, i16, i64))),
        DType::I32 => V::Int(Cow::Owned(conv!(b, i32, i64))),
        DType::I64 => V::Int(Cow::Owned(conv!(b, i64, i64))),
        DType::U8 => V::Int(Cow::Owned(conv!(b, u8, i64))),
        DType::U16 => V::Int(Cow::Owned(conv!(b, u16, i64))),
        DType::U32 => V::Int(Cow::Owned(conv!(b, u32, i64))),
        DType::U64 => V::Float(Cow::Owned(conv!(b, u64, f64))),
        DType::F32 => V::Float(Cow::Owned(conv!(b, f32, f64))),
        DType::F64 => V::Float(Cow::Owned(conv!(b, f64, f64))),
        // numpy's view of a fixed string: trailing NULs are not part of it.
        DType::Bytes(n) => V::Str(
            b.chunks_exact(n.max(1))
                .map(|s| Cow::Borrowed(trim_nul(s)))
                .collect(),
        ),
        DType::Str(n) => V::Str(
            b.chunks_exact((4 * n).max(1))
                .map(|s| {
                    let text: String = s
                        .chunks_exact(4)
                        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                        .take_while(|&c| c != 0)
                        .map(|c| char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER))
                        .collect();
                    Cow::Owned(text.into_bytes())
                })
                .collect(),
        ),
        DType::C64 | DType::C128 => V::Bool(Cow::Owned(Vec::new())),
    }
}

fn trim_nul(s: &[u8]) -> &[u8] {
    let end = s.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
    &s[..end]
}

/// A value during evaluation: a vector over the range's rows, or a scalar.
#[derive(Debug, Clone)]
pub(crate) enum V<'a> {
    Bool(Cow<'a, [bool]>),
    Int(Cow<'a, [i64]>),
    Float(Cow<'a, [f64]>),
    Str(Vec<Cow<'a, [u8]>>),
    SBool(bool),
    SInt(i64),
    SFloat(f64),
    SStr(Vec<u8>),
}

/// Checks the types of `e` against the columns' types; returns its type.
pub(crate) fn check(text: &str, e: &Expr, col_ty: &dyn Fn(&str) -> Option<Ty>) -> Result<Ty> {
    Ok(match e {
        Expr::Column { name, pos } => col_ty(name).ok_or_else(|| {
            error(
                text,
                *pos,
                format!("column {name:?} holds values a query cannot compare (complex)"),
            )
        })?,
        Expr::Lit { value, .. } => match value {
            Literal::Bool(_) => Ty::Bool,
            Literal::Int(_) => Ty::Int,
            Literal::Float(_) => Ty::Float,
            Literal::Str(_) => Ty::Str,
        },
        Expr::Neg { arg, pos } => {
            let t = check(text, arg, col_ty)?;
            if !t.numeric() {
                return Err(error(
                    text,
                    *pos,
                    format!("unary `-` needs a number, not {}", t.name()),
                ));
            }
            t
        }
        Expr::Not { arg, pos } => {
            let t = check(text, arg, col_ty)?;
            if t != Ty::Bool {
                return Err(error(
                    text,
                    *pos,
                    format!("`~` needs a boolean, not {}", t.name()),
                ));
            }
            Ty::Bool
        }
        Expr::Bin {
            op,
            left,
            right,
            pos,
        } => {
            let (a, b) = (check(text, left, col_ty)?, check(text, right, col_ty)?);
            match op {
                BinOp::And | BinOp::Or => {
                    if a != Ty::Bool || b != Ty::Bool {
                        return Err(error(
                            text,
                            *pos,
                            format!(
                                "`{}` needs booleans on both sides, not {} and {} (comparisons bind looser than `&` and `|`: write `(a > 1) & (b < 2)`)",
                                if *op == BinOp::And { "&" } else { "|" },
                                a.name(),
                                b.name()
                            ),
                        ));
                    }
                    Ty::Bool
                }
                BinOp::Eq | BinOp::Ne => {
                    if !(a == b || a.numeric() && b.numeric()) {
                        return Err(error(
                            text,
                            *pos,
                            format!("cannot compare {} with {}", a.name(), b.name()),
                        ));
                    }
                    Ty::Bool
                }
                BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                    if !(a.numeric() && b.numeric()) {
                        return Err(error(
                            text,
                            *pos,
                            format!(
                                "`<`, `<=`, `>`, `>=` compare numbers, not {} and {}",
                                a.name(),
                                b.name()
                            ),
                        ));
                    }
                    Ty::Bool
                }
                _ => {
                    if !(a.numeric() && b.numeric()) {
                        return Err(error(
                            text,
                            *pos,
                            format!(
                                "arithmetic needs numbers, not {} and {}",
                                a.name(),
                                b.name()
                            ),
                        ));
                    }
                    if *op == BinOp::Div || a == Ty::Float || b == Ty::Float {
                        Ty::Float
                    } else {
                        Ty::Int
                    }
                }
            }
        }
    })
}

/// The columns of one range of `n` elements, read.
pub(crate) struct Frame {
    pub(crate) n: usize,
    pub(crate) cols: HashMap<String, Raw>,
}

/// Evaluates boolean expression `e` over a frame: one flag per row.
pub(crate) fn eval_mask(e: &Expr, f: &Frame) -> Vec<bool> {
    match eval(e, f) {
        V::Bool(b) => b.into_owned(),
        V::SBool(b) => vec![b; f.n],
        _ => vec![false; f.n],
    }
}

fn eval<'a>(e: &Expr, f: &'a Frame) -> V<'a> {
    match e {
        Expr::Column { name, .. } => match f.cols.get(name) {
            Some(r) => r.value(),
            None => V::Bool(Cow::Owned(vec![false; f.n])),
        },
        Expr::Lit { value, .. } => match value {
            Literal::Bool(b) => V::SBool(*b),
            Literal::Int(i) => V::SInt(*i),
            Literal::Float(x) => V::SFloat(*x),
            Literal::Str(s) => V::SStr(trim_nul(s).to_vec()),
        },
        Expr::Neg { arg, .. } => match eval(arg, f) {
            V::Int(v) => V::Int(Cow::Owned(v.iter().map(|x| x.wrapping_neg()).collect())),
            V::Float(v) => V::Float(Cow::Owned(v.iter().map(|x| -x).collect())),
            V::SInt(i) => V::SInt(i.wrapping_neg()),
            V::SFloat(x) => V::SFloat(-x),
            v => v,
        },
        Expr::Not { arg, .. } => match eval(arg, f) {
            V::Bool(v) => V::Bool(Cow::Owned(v.iter().map(|x| !x).collect())),
            V::SBool(b) => V::SBool(!b),
            v => v,
        },
        Expr::Bin {
            op, left, right, ..
        } => {
            let a = eval(left, f);
            if *op == BinOp::And || *op == BinOp::Or {
                // Skip the right side when the left decides every row.
                let decided = match &a {
                    V::SBool(b) => Some(*b == (*op == BinOp::Or)),
                    V::Bool(v) if *op == BinOp::And && !v.contains(&true) => Some(true),
                    V::Bool(v) if *op == BinOp::Or && !v.contains(&false) => Some(true),
                    _ => None,
                };
                if decided == Some(true) {
                    return a;
                }
                let b = eval(right, f);
                return logic(*op, a, b, f.n);
            }
            let b = eval(right, f);
            if op.is_comparison() {
                compare(*op, a, b, f.n)
            } else {
                arith(*op, a, b)
            }
        }
    }
}

fn logic<'a>(op: BinOp, a: V<'a>, b: V<'a>, n: usize) -> V<'a> {
    let and = op == BinOp::And;
    match (a, b) {
        (V::SBool(x), V::SBool(y)) => V::SBool(if and { x && y } else { x || y }),
        (V::SBool(s), v) | (v, V::SBool(s)) => match (and, s) {
            (true, true) | (false, false) => v,
            (true, false) => V::SBool(false),
            (false, true) => V::SBool(true),
        },
        (V::Bool(x), V::Bool(y)) => {
            let mut out = x.into_owned();
            if and {
                out.iter_mut().zip(y.iter()).for_each(|(o, b)| *o &= *b);
            } else {
                out.iter_mut().zip(y.iter()).for_each(|(o, b)| *o |= *b);
            }
            V::Bool(Cow::Owned(out))
        }
        _ => V::Bool(Cow::Owned(vec![false; n])),
    }
}

/// Both operands as floats (numbers only).
enum F<'a> {
    V(Cow<'a, [f64]>),
    S(f64),
}

fn as_float(v: V<'_>) -> Option<F<'_>> {
    Some(match v {
        V::Float(x) => F::V(x),
        V::Int(x) => F::V(Cow::Owned(x.iter().map(|&i| i as f64).collect())),
        V::SFloat(x) => F::S(x),
        V::SInt(i) => F::S(i as f64),
        _ => return None,
    })
}

fn cmp_fn<T: PartialOrd + Copy>(op: BinOp) -> fn(T, T) -> bool {
    match op {
        BinOp::Lt => |a, b| a < b,
        BinOp::Le => |a, b| a <= b,
        BinOp::Gt => |a, b| a > b,
        BinOp::Ge => |a, b| a >= b,
        BinOp::Eq => |a, b| a == b,
        _ => |a, b| a != b,
    }
}

/// `op` over vectors and scalars of one type, specialised per operator so that each loop is
/// a plain comparison the compiler vectorises.
fn cmp_typed<T: PartialOrd + Copy>(
    op: BinOp,
    a: Result<&[T], T>,
    b: Result<&[T], T>,
) -> V<'static> {
    macro_rules! run {
        ($f:expr) => {
            match (a, b) {
                (Ok(x), Ok(y)) => V::Bool(Cow::Owned(
                    x.iter().zip(y).map(|(&p, &q)| $f(p, q)).collect(),
                )),
                (Ok(x), Err(s)) => V::Bool(Cow::Owned(x.iter().map(|&p| $f(p, s)).collect())),
                (Err(s), Ok(y)) => V::Bool(Cow::Owned(y.iter().map(|&q| $f(s, q)).collect())),
                (Err(s), Err(t)) => V::SBool($f(s, t)),
            }
        };
    }
    match op {
        BinOp::Lt => run!(|p: T, q: T| p < q),
        BinOp::Le => run!(|p: T, q: T| p <= q),
        BinOp::Gt => run!(|p: T, q: T| p > q),
        BinOp::Ge => run!(|p: T, q: T| p >= q),
        BinOp::Eq => run!(|p: T, q: T| p == q),
        _ => run!(|p: T, q: T| p != q),
    }
}

fn compare<'a>(op: BinOp, a: V<'a>, b: V<'a>, n: usize) -> V<'a> {
    match (a, b) {
        (V::Int(x), V::Int(y)) => cmp_typed::<i64>(op, Ok(&x), Ok(&y)),
        (V::Int(x), V::SInt(s)) => cmp_typed::<i64>(op, Ok(&x), Err(s)),
        (V::SInt(s), V::Int(y)) => cmp_typed::<i64>(op, Err(s), Ok(&y)),
        (V::SInt(s), V::SInt(t)) => V::SBool(cmp_fn::<i64>(op)(s, t)),
        (V::Bool(x), V::Bool(y)) => cmp_typed::<bool>(op, Ok(&x), Ok(&y)),
        (V::Bool(x), V::SBool(s)) => cmp_typed::<bool>(op, Ok(&x), Err(s)),
        (V::SBool(s), V::Bool(y)) => cmp_typed::<bool>(op, Err(s), Ok(&y)),
        (V::SBool(s), V::SBool(t)) => V::SBool(cmp_fn::<bool>(op)(s, t)),
        (V::Str(x), V::Str(y)) => V::Bool(Cow::Owned(
            x.iter()
                .zip(&y)
                .map(|(p, q)| (p == q) == (op == BinOp::Eq))
                .collect(),
        )),
        (V::Str(x), V::SStr(s)) | (V::SStr(s), V::Str(x)) => V::Bool(Cow::Owned(
            x.iter()
                .map(|p| (p.as_ref() == s.as_slice()) == (op == BinOp::Eq))
                .collect(),
        )),
        (V::SStr(s), V::SStr(t)) => V::SBool((s == t) == (op == BinOp::Eq)),
        (a, b) => match (as_float(a), as_float(b)) {
            (Some(F::V(x)), Some(F::V(y))) => cmp_typed::<f64>(op, Ok(&x), Ok(&y)),
            (Some(F::V(x)), Some(F::S(s))) => cmp_typed::<f64>(op, Ok(&x), Err(s)),
            (Some(F::S(s)), Some(F::V(y))) => cmp_typed::<f64>(op, Err(s), Ok(&y)),
            (Some(F::S(s)), Some(F::S(t))) => V::SBool(cmp_fn::<f64>(op)(s, t)),
            _ => V::Bool(Cow::Owned(vec![false; n])),
        },
    }
}

fn int_op(op: BinOp) -> fn(i64, i64) -> i64 {
    match op {
        BinOp::Add => i64::wrapping_add,
        BinOp::Sub => i64::wrapping_sub,
        BinOp::Mul => i64::wrapping_mul,
        // Python's (and numpy's) remainder takes the divisor's sign; by 0 it is 0.
        _ => |a, b| {
            if b == 0 {
                0
            } else {
                let r = a.wrapping_rem(b);
                if r != 0 && (r < 0) != (b < 0) {
                    r + b
                } else {
                    r
                }
            }
        },
    }
}

fn float_op(op: BinOp) -> fn(f64, f64) -> f64 {
    match op {
        BinOp::Add => |a, b| a + b,
        BinOp::Sub => |a, b| a - b,
        BinOp::Mul => |a, b| a * b,
        BinOp::Div => |a, b| a / b,
        _ => |a, b| {
            let r = a % b;
            if r != 0.0 && (r < 0.0) != (b < 0.0) {
                r + b
            } else {
                r
            }
        },
    }
}

fn arith<'a>(op: BinOp, a: V<'a>, b: V<'a>) -> V<'a> {
    let ints = |v: &V<'_>| matches!(v, V::Int(_) | V::SInt(_));
    if op != BinOp::Div && ints(&a) && ints(&b) {
        let g = int_op(op);
        return match (a, b) {
            (V::Int(x), V::Int(y)) => V::Int(Cow::Owned(
                x.iter().zip(y.iter()).map(|(&p, &q)| g(p, q)).collect(),
            )),
            (V::Int(x), V::SInt(s)) => V::Int(Cow::Owned(x.iter().map(|&p| g(p, s)).collect())),
            (V::SInt(s), V::Int(y)) => V::Int(Cow::Owned(y.iter().map(|&q| g(s, q)).collect())),
            (V::SInt(s), V::SInt(t)) => V::SInt(g(s, t)),
            _ => V::SInt(0),
        };
    }
    let g = float_op(op);
    match (as_float(a), as_float(b)) {
        (Some(F::V(x)), Some(F::V(y))) => V::Float(Cow::Owned(
            x.iter().zip(y.iter()).map(|(&p, &q)| g(p, q)).collect(),
        )),
        (Some(F::V(x)), Some(F::S(s))) => {
            V::Float(Cow::Owned(x.iter().map(|&p| g(p, s)).collect()))
        }
        (Some(F::S(s)), Some(F::V(y))) => {
            V::Float(Cow::Owned(y.iter().map(|&q| g(s, q)).collect()))
        }
        (Some(F::S(s)), Some(F::S(t))) => V::SFloat(g(s, t)),
        _ => V::SFloat(f64::NAN),
    }
}

/// What chunk statistics prove about a boolean expression over a range: whether some row
/// may be true, whether some row may be false.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Abs {
    Bool {
        t: bool,
        f: bool,
    },
    /// Non-NaN values lie in `[lo, hi]` (empty when `lo > hi`); `nan`: some may be NaN.
    Num {
        lo: f64,
        hi: f64,
        nan: bool,
    },
    Any,
}

const ANY_BOOL: Abs = Abs::Bool { t: true, f: true };

/// An integer as a float interval that surely holds it (floats are exact up to 2^53).
fn int_bounds(lo: f64, hi: f64) -> (f64, f64) {
    let big = 9_007_199_254_740_992.0;
    (
        if lo.abs() >= big { lo.next_down() } else { lo },
        if hi.abs() >= big { hi.next_up() } else { hi },
    )
}

fn stat_num(s: &ChunkStats, ty: Ty) -> Abs {
    match (s.min, s.max) {
        (Some(lo), Some(hi)) => {
            let (lo, hi) = (lo.as_f64(), hi.as_f64());
            let (lo, hi) = if ty == Ty::Int {
                int_bounds(lo, hi)
            } else {
                (lo, hi)
            };
            Abs::Num {
                lo,
                hi,
                nan: s.nan_count > 0,
            }
        }
        _ => Abs::Num {
            lo: f64::INFINITY,
            hi: f64::NEG_INFINITY,
            nan: s.nan_count > 0,
        },
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
            Some((s, ty @ (Ty::Int | Ty::Float))) => stat_num(&s, ty),
            _ => Abs::Any,
        },
        Expr::Lit { value, .. } => match value {
            Literal::Bool(b) => Abs::Bool { t: *b, f: !*b },
            Literal::Int(i) => {
                let (lo, hi) = int_bounds(*i as f64, *i as f64);
                Abs::Num { lo, hi, nan: false }
            }
            Literal::Float(x) if x.is_nan() => Abs::Num {
                lo: f64::INFINITY,
                hi: f64::NEG_INFINITY,
                nan: true,
            },
            Literal::Float(x) => Abs::Num {
                lo: *x,
                hi: *x,
                nan: false,
            },
            Literal::Str(_) => Abs::Any,
        },
        Expr::Neg { arg, .. } => match abs_eval(arg, stats) {
            Abs::Num { lo, hi, nan } => Abs::Num {
                lo: -hi,
                hi: -lo,
                nan,
            },
            _ => Abs::Any,
        },
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
                BinOp::Add | BinOp::Sub => match (a, b) {
                    (
                        Abs::Num {
                            lo: alo,
                            hi: ahi,
                            nan: an,
                        },
                        Abs::Num {
                            lo: blo,
                            hi: bhi,
                            nan: bn,
                        },
                    ) => {
                        let small = |x: f64| x.abs() < 4_503_599_627_370_496.0;
                        if ![alo, ahi, blo, bhi].into_iter().all(small) || alo > ahi || blo > bhi {
                            // Infinities (inf - inf is NaN), wrapping integers, empty sides.
                            return Abs::Any;
                        }
                        let (lo, hi) = if *op == BinOp::Add {
                            (alo + blo, ahi + bhi)
                        } else {
                            (alo - bhi, ahi - blo)
                        };
                        // Rounding can move a float sum by an ulp either way.
                        Abs::Num {
                            lo: lo.next_down(),
                            hi: hi.next_up(),
                            nan: an || bn,
                        }
                    }
                    _ => Abs::Any,
                },
                _ => Abs::Any,
            }
        }
    }
}

fn abs_compare(op: BinOp, a: Abs, b: Abs) -> Abs {
    match (a, b) {
        (Abs::Bool { t: at, f: af }, Abs::Bool { t: bt, f: bf }) => {
            let eq_t = at && bt || af && bf;
            let ne_t = at && bf || af && bt;
            match op {
                BinOp::Eq => Abs::Bool { t: eq_t, f: ne_t },
                BinOp::Ne => Abs::Bool { t: ne_t, f: eq_t },
                _ => ANY_BOOL,
            }
        }
        (
            Abs::Num {
                lo: alo,
                hi: ahi,
                nan: an,
            },
            Abs::Num {
                lo: blo,
                hi: bhi,
                nan: bn,
            },
        ) => {
            let empty = alo > ahi || blo > bhi;
            // Some pair of values is unordered (NaN), or a side has no number at all.
            let nan = an || bn;
            if empty {
                // Every comparison involves a NaN: false, except `!=`.
                let any_rows = nan;
                return match op {
                    BinOp::Ne => Abs::Bool {
                        t: any_rows,
                        f: false,
                    },
                    _ => Abs::Bool {
                        t: false,
                        f: any_rows,
                    },
                };
            }
            let (t, f) = match op {
                BinOp::Lt => (alo < bhi, ahi >= blo),
                BinOp::Le => (alo <= bhi, ahi > blo),
                BinOp::Gt => (ahi > blo, alo <= bhi),
                BinOp::Ge => (ahi >= blo, alo < bhi),
                BinOp::Eq => (
                    alo <= bhi && blo <= ahi,
                    !(alo == ahi && blo == bhi && alo == blo),
                ),
                _ => (
                    !(alo == ahi && blo == bhi && alo == blo),
                    alo <= bhi && blo <= ahi,
                ),
            };
            if op == BinOp::Ne {
                Abs::Bool { t: t || nan, f }
            } else {
                Abs::Bool { t, f: f || nan }
            }
        }
        _ => ANY_BOOL,
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
