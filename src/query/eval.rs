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
    /// Computed with as `i64` (int8 .. int64, uint8 .. uint32).
    Int,
    /// `uint64`: compared exactly with integers, a float in arithmetic.
    UInt,
    Float,
    Str,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::Bool => "a boolean",
            Ty::Int | Ty::UInt => "an integer",
            Ty::Float => "a float",
            Ty::Str => "a string",
        }
    }

    fn numeric(self) -> bool {
        matches!(self, Ty::Int | Ty::UInt | Ty::Float)
    }

    /// The type a column of `dtype` evaluates as (complex is refused).
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
            DType::U64 => Ty::UInt,
            DType::F32 | DType::F64 => Ty::Float,
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
        DType::U64 => V::UInt(Cow::Owned(conv!(b, u64, u64))),
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
///
/// Integers are `i64` (wrapping arithmetic, as numpy's int64) or `u64` (a `uint64` column or
/// a literal past `i64::MAX`): comparisons between integers are exact, whatever their
/// signs (numpy's); arithmetic with a `u64` is done in `f64` (numexpr's, and numpy's for
/// uint64 with int64).
#[derive(Debug, Clone)]
pub(crate) enum V<'a> {
    Bool(Cow<'a, [bool]>),
    Int(Cow<'a, [i64]>),
    UInt(Cow<'a, [u64]>),
    Float(Cow<'a, [f64]>),
    Str(Vec<Cow<'a, [u8]>>),
    SBool(bool),
    SInt(i64),
    SUInt(u64),
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
            Literal::UInt(_) => Ty::UInt,
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
            // A uint64 is negated as a float.
            if t == Ty::UInt {
                Ty::Float
            } else {
                t
            }
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
                    if *op != BinOp::Div && a == Ty::Int && b == Ty::Int {
                        Ty::Int
                    } else {
                        Ty::Float
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
            Literal::UInt(u) => V::SUInt(*u),
            Literal::Float(x) => V::SFloat(*x),
            Literal::Str(s) => V::SStr(trim_nul(s).to_vec()),
        },
        Expr::Neg { arg, .. } => match eval(arg, f) {
            V::Int(v) => V::Int(Cow::Owned(v.iter().map(|x| x.wrapping_neg()).collect())),
            V::UInt(v) => V::Float(Cow::Owned(v.iter().map(|&x| -(x as f64)).collect())),
            V::Float(v) => V::Float(Cow::Owned(v.iter().map(|x| -x).collect())),
            V::SInt(i) => V::SInt(i.wrapping_neg()),
            V::SUInt(u) => V::SFloat(-(u as f64)),
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
        V::UInt(x) => F::V(Cow::Owned(x.iter().map(|&i| i as f64).collect())),
        V::SFloat(x) => F::S(x),
        V::SInt(i) => F::S(i as f64),
        V::SUInt(u) => F::S(u as f64),
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
        (V::UInt(x), V::UInt(y)) => cmp_typed::<u64>(op, Ok(&x), Ok(&y)),
        (V::UInt(x), V::SUInt(s)) => cmp_typed::<u64>(op, Ok(&x), Err(s)),
        (V::SUInt(s), V::UInt(y)) => cmp_typed::<u64>(op, Err(s), Ok(&y)),
        (V::UInt(x), V::SInt(s)) if s >= 0 => cmp_typed::<u64>(op, Ok(&x), Err(s as u64)),
        (V::SInt(s), V::UInt(y)) if s >= 0 => cmp_typed::<u64>(op, Err(s as u64), Ok(&y)),
        (a, b) if is_int(&a) && is_int(&b) => {
            // Signed with unsigned: exactly, as numpy compares int64 with uint64.
            let (x, y) = (wide(&a), wide(&b));
            cmp_typed::<i128>(
                op,
                x.as_deref().map_err(|&s| s),
                y.as_deref().map_err(|&s| s),
            )
        }
        (a, b) => match (as_float(a), as_float(b)) {
            (Some(F::V(x)), Some(F::V(y))) => cmp_typed::<f64>(op, Ok(&x), Ok(&y)),
            (Some(F::V(x)), Some(F::S(s))) => cmp_typed::<f64>(op, Ok(&x), Err(s)),
            (Some(F::S(s)), Some(F::V(y))) => cmp_typed::<f64>(op, Err(s), Ok(&y)),
            (Some(F::S(s)), Some(F::S(t))) => V::SBool(cmp_fn::<f64>(op)(s, t)),
            _ => V::Bool(Cow::Owned(vec![false; n])),
        },
    }
}

fn is_int(v: &V<'_>) -> bool {
    matches!(v, V::Int(_) | V::UInt(_) | V::SInt(_) | V::SUInt(_))
}

/// Integers as `i128`, which holds both `i64` and `u64`: a vector, or `Err` of a scalar.
fn wide(v: &V<'_>) -> std::result::Result<Vec<i128>, i128> {
    match v {
        V::Int(x) => Ok(x.iter().map(|&i| i128::from(i)).collect()),
        V::UInt(x) => Ok(x.iter().map(|&i| i128::from(i)).collect()),
        V::SInt(i) => Err(i128::from(*i)),
        V::SUInt(u) => Err(i128::from(*u)),
        _ => Err(0),
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

/// What chunk statistics prove about an expression over a range, following the evaluator
/// exactly: an integer's interval wraps as `i64` arithmetic does (or is unknown when it
/// may wrap only in part), a `u64` turns into a float where the evaluator converts it, a
/// float interval counts NaN apart. Unknown is always a safe answer: it reads the range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Abs {
    /// Whether some row may be true, whether some row may be false.
    Bool { t: bool, f: bool },
    /// Every value is an integer in `[lo, hi]` (no row when `lo > hi`): the evaluator's
    /// `u64` when `unsigned`, else its `i64`.
    Int { lo: i128, hi: i128, unsigned: bool },
    /// Non-NaN values lie in `[lo, hi]` (none when `lo > hi`); `nan`: some may be NaN.
    Float { lo: f64, hi: f64, nan: bool },
    /// Nothing known.
    Any,
}

const ANY_BOOL: Abs = Abs::Bool { t: true, f: true };
const TWO_64: i128 = 1 << 64;

/// The `i64` values of integers in `[lo, hi]` computed without wrapping: the interval
/// shifted by a multiple of 2^64 when the whole of it wraps alike, else unknown.
fn wrap_i64(lo: i128, hi: i128) -> Abs {
    if lo > hi {
        return Abs::Int {
            lo,
            hi,
            unsigned: false,
        };
    }
    let band = |x: i128| (x - i128::from(i64::MIN)).div_euclid(TWO_64);
    let (bl, bh) = (band(lo), band(hi));
    if bl != bh {
        return Abs::Any;
    }
    Abs::Int {
        lo: lo - bl * TWO_64,
        hi: hi - bh * TWO_64,
        unsigned: false,
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
        Ty::Int | Ty::UInt => {
            let unsigned = ty == Ty::UInt;
            if none && s.nan_count == 0 {
                return Abs::Int {
                    lo: 0,
                    hi: -1,
                    unsigned,
                };
            }
            match (s.min.and_then(stat_int), s.max.and_then(stat_int)) {
                (Some(lo), Some(hi)) if s.nan_count == 0 => Abs::Int { lo, hi, unsigned },
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
            Some((s, ty @ (Ty::Int | Ty::UInt | Ty::Float))) => stat_num(&s, ty),
            _ => Abs::Any,
        },
        Expr::Lit { value, .. } => match value {
            Literal::Bool(b) => Abs::Bool { t: *b, f: !*b },
            Literal::Int(i) => Abs::Int {
                lo: i128::from(*i),
                hi: i128::from(*i),
                unsigned: false,
            },
            Literal::UInt(u) => Abs::Int {
                lo: i128::from(*u),
                hi: i128::from(*u),
                unsigned: true,
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
        },
        Expr::Neg { arg, .. } => match abs_eval(arg, stats) {
            // i64 negation wraps: -i64::MIN is i64::MIN.
            Abs::Int {
                lo,
                hi,
                unsigned: false,
            } => wrap_i64(-hi, -lo),
            a => match to_float(a) {
                Some((lo, hi, nan)) => Abs::Float {
                    lo: -hi,
                    hi: -lo,
                    nan,
                },
                None => Abs::Any,
            },
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
                BinOp::Add | BinOp::Sub | BinOp::Mul => abs_arith(*op, a, b),
                // Division and remainder: not worth proving.
                _ => Abs::Any,
            }
        }
    }
}

/// `+`, `-` or `*` over intervals, as the evaluator computes them.
fn abs_arith(op: BinOp, a: Abs, b: Abs) -> Abs {
    if let (
        Abs::Int {
            lo: alo,
            hi: ahi,
            unsigned: false,
        },
        Abs::Int {
            lo: blo,
            hi: bhi,
            unsigned: false,
        },
    ) = (a, b)
    {
        // i64 with i64: exact in i128 (|product| < 2^126), then wrapped.
        if alo > ahi || blo > bhi {
            return Abs::Int {
                lo: 0,
                hi: -1,
                unsigned: false,
            };
        }
        return match op {
            BinOp::Add => wrap_i64(alo + blo, ahi + bhi),
            BinOp::Sub => wrap_i64(alo - bhi, ahi - blo),
            _ => {
                let c = [alo * blo, alo * bhi, ahi * blo, ahi * bhi];
                let lo = c.iter().copied().min().unwrap_or(0);
                let hi = c.iter().copied().max().unwrap_or(0);
                wrap_i64(lo, hi)
            }
        };
    }
    // Anything else with a float or a u64 is computed in f64.
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
