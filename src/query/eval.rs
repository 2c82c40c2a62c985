//! Type checking and evaluation of a parsed expression over one range of rows (what a
//! range's chunk statistics prove about it is [`super::proof`]).

use super::expr::{error, BinOp, Expr, Literal};
use super::time;
use crate::datetime::TimeUnit;
use crate::dtype::DType;
use crate::error::Result;
use std::borrow::Cow;
use std::collections::HashMap;

/// An integer dtype, as numpy computes with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IK {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
}

impl IK {
    fn of(d: DType) -> Option<IK> {
        Some(match d {
            DType::I8 => IK::I8,
            DType::I16 => IK::I16,
            DType::I32 => IK::I32,
            DType::I64 => IK::I64,
            DType::U8 => IK::U8,
            DType::U16 => IK::U16,
            DType::U32 => IK::U32,
            DType::U64 => IK::U64,
            _ => return None,
        })
    }

    pub(super) fn bits(self) -> u32 {
        match self {
            IK::I8 | IK::U8 => 8,
            IK::I16 | IK::U16 => 16,
            IK::I32 | IK::U32 => 32,
            IK::I64 | IK::U64 => 64,
        }
    }

    fn signed(self) -> bool {
        matches!(self, IK::I8 | IK::I16 | IK::I32 | IK::I64)
    }

    pub(super) fn min(self) -> i128 {
        if self.signed() {
            -(1i128 << (self.bits() - 1))
        } else {
            0
        }
    }

    fn max(self) -> i128 {
        if self.signed() {
            (1i128 << (self.bits() - 1)) - 1
        } else {
            (1i128 << self.bits()) - 1
        }
    }

    fn name(self) -> &'static str {
        match self {
            IK::I8 => "int8",
            IK::I16 => "int16",
            IK::I32 => "int32",
            IK::I64 => "int64",
            IK::U8 => "uint8",
            IK::U16 => "uint16",
            IK::U32 => "uint32",
            IK::U64 => "uint64",
        }
    }

    /// numpy's `promote_types` of two integer dtypes; `None`: float64 (uint64 with a signed
    /// type).
    fn promote(a: IK, b: IK) -> Option<IK> {
        if a.signed() == b.signed() {
            return Some(if a.bits() >= b.bits() { a } else { b });
        }
        let (u, s) = if a.signed() { (b, a) } else { (a, b) };
        if s.bits() > u.bits() {
            return Some(s);
        }
        match u.bits() {
            8 => Some(IK::I16),
            16 => Some(IK::I32),
            32 => Some(IK::I64),
            _ => None,
        }
    }

    /// `v` (an `i64` modulo 2^64) as this type's value: wrapped to its width.
    #[inline]
    fn wrap64(self, v: i64) -> i64 {
        match self {
            IK::I8 => i64::from(v as i8),
            IK::I16 => i64::from(v as i16),
            IK::I32 => i64::from(v as i32),
            IK::U8 => i64::from(v as u8),
            IK::U16 => i64::from(v as u16),
            IK::U32 => i64::from(v as u32),
            IK::I64 | IK::U64 => v,
        }
    }
}

/// The kind of the result of integer arithmetic `op` (not `/`) on integers of kinds `a`
/// and `b` (`None`: a Python int, i.e. a literal), by numpy 2's rules (NEP 50): two
/// literals stay a Python int (`Ok(None)`); a literal takes the other side's type; two
/// columns' types promote (`Err(())`: to float64, uint64 with a signed type).
pub(super) fn int_result(a: Option<IK>, b: Option<IK>) -> std::result::Result<Option<IK>, ()> {
    match (a, b) {
        (None, None) => Ok(None),
        (Some(k), None) | (None, Some(k)) => Ok(Some(k)),
        (Some(x), Some(y)) => IK::promote(x, y).map(Some).ok_or(()),
    }
}

/// Python's integer arithmetic on two literals: exact while it fits in `i128`, else
/// (`Err`) float64 of the operands. `%` by 0 is 0 (numpy's for integers), `/` is float64.
pub(crate) fn py_int(op: BinOp, a: i128, b: i128) -> std::result::Result<i128, f64> {
    let (x, y) = (a as f64, b as f64);
    match op {
        BinOp::Add => a.checked_add(b).ok_or(x + y),
        BinOp::Sub => a.checked_sub(b).ok_or(x - y),
        BinOp::Mul => a.checked_mul(b).ok_or(x * y),
        BinOp::Rem if b == 0 => Ok(0),
        BinOp::Rem => {
            // i128::MIN % -1 is 0.
            let r = a.checked_rem(b).unwrap_or(0);
            Ok(if r != 0 && (r < 0) != (b < 0) {
                r + b
            } else {
                r
            })
        }
        _ => Err(x / y),
    }
}

/// The type of an expression's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Bool,
    /// A column's integer type (or one computed from columns), numpy's.
    Int(IK),
    /// An integer literal (or arithmetic of literals only), whose value is known: Python's
    /// int, which numpy 2 treats as "weak" (NEP 50).
    PyInt(i128),
    Float,
    Str,
    /// A `datetime64` (`delta` false) or `timedelta64` of `unit`.
    Time {
        delta: bool,
        unit: TimeUnit,
    },
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::Bool => "a boolean",
            Ty::Int(_) | Ty::PyInt(_) => "an integer",
            Ty::Float => "a float",
            Ty::Str => "a string",
            Ty::Time { delta: false, .. } => "a datetime64",
            Ty::Time { delta: true, .. } => "a timedelta64",
        }
    }

    fn numeric(self) -> bool {
        matches!(self, Ty::Int(_) | Ty::PyInt(_) | Ty::Float)
    }

    /// The type a column of `dtype` evaluates as (complex is refused).
    pub(crate) fn of_dtype(dtype: DType) -> Option<Ty> {
        Some(match dtype {
            DType::Bool => Ty::Bool,
            DType::F16 | DType::F32 | DType::F64 => Ty::Float,
            DType::Bytes(_) | DType::Str(_) => Ty::Str,
            DType::DateTime(unit) => Ty::Time { delta: false, unit },
            DType::TimeDelta(unit) => Ty::Time { delta: true, unit },
            DType::C64 | DType::C128 => return None,
            d => Ty::Int(IK::of(d)?),
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
    /// A dictionary-encoded column's rows: a code per row into the entries (−1 at a null
    /// row, whose value the validity hides).
    Codes(Vec<i32>, Vec<String>),
}

impl Raw {
    /// The values, as the evaluator computes with them.
    fn value(&self) -> V<'_> {
        match self {
            Raw::I64(v) => V::Int(IK::I64, Cow::Borrowed(v)),
            Raw::F64(v) => V::Float(Cow::Borrowed(v)),
            Raw::Var(v) => V::Str(v.iter().map(|s| Cow::Borrowed(s.as_slice())).collect()),
            Raw::Fixed(d, b) => fixed_value(*d, b),
            Raw::Codes(c, d) => V::Dict(Cow::Borrowed(c), d),
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
        DType::I8 => V::Int(IK::I8, Cow::Owned(conv!(b, i8, i64))),
        DType::I16 => V::Int(IK::I16, Cow::Owned(conv!(b, i16, i64))),
        DType::I32 => V::Int(IK::I32, Cow::Owned(conv!(b, i32, i64))),
        DType::I64 => V::Int(IK::I64, Cow::Owned(conv!(b, i64, i64))),
        DType::U8 => V::Int(IK::U8, Cow::Owned(conv!(b, u8, i64))),
        DType::U16 => V::Int(IK::U16, Cow::Owned(conv!(b, u16, i64))),
        DType::U32 => V::Int(IK::U32, Cow::Owned(conv!(b, u32, i64))),
        DType::U64 => V::UInt(Cow::Owned(conv!(b, u64, u64))),
        DType::F16 => V::Float(Cow::Owned(
            b.chunks_exact(2)
                .map(|c| half::f16::from_ne_bytes([c[0], c[1]]).to_f64())
                .collect(),
        )),
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
        DType::DateTime(u) => V::Time(false, u, Cow::Owned(conv!(b, i64, i64))),
        DType::TimeDelta(u) => V::Time(true, u, Cow::Owned(conv!(b, i64, i64))),
        // Refused by `Ty::of_dtype`: never evaluated.
        DType::C64 | DType::C128 => V::Bool(Cow::Owned(Vec::new())),
    }
}

fn trim_nul(s: &[u8]) -> &[u8] {
    let end = s.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
    &s[..end]
}

/// A value during evaluation: a vector over the range's rows, or a scalar.
///
/// Integer vectors carry numpy's type: int8 .. uint32 and int64 as `i64` values within the
/// type's range (arithmetic wraps at its width), uint64 as `u64`. An integer scalar is a
/// literal: Python's int, exact in `i128`. Comparisons between integers are exact,
/// whatever their types (numpy's); see [`arith`] for arithmetic.
#[derive(Debug, Clone)]
pub(crate) enum V<'a> {
    Bool(Cow<'a, [bool]>),
    /// Never `IK::U64`.
    Int(IK, Cow<'a, [i64]>),
    UInt(Cow<'a, [u64]>),
    Float(Cow<'a, [f64]>),
    Str(Vec<Cow<'a, [u8]>>),
    /// Dates (`false`) or durations (`true`) of a unit ([`crate::datetime::NAT`] for NaT).
    Time(bool, TimeUnit, Cow<'a, [i64]>),
    /// Strings as codes into entries (a dictionary-encoded column; −1 where null).
    Dict(Cow<'a, [i32]>, &'a [String]),
    SBool(bool),
    SInt(i128),
    SFloat(f64),
    SStr(Vec<u8>),
    STime(bool, TimeUnit, i64),
}

/// Checks the types of `e` against the columns' types; returns its type.
pub(crate) fn check(text: &str, e: &Expr, col_ty: &dyn Fn(&str) -> Option<Ty>) -> Result<Ty> {
    Ok(match e {
        Expr::Column { name, pos } => col_ty(name).ok_or_else(|| {
            error(
                text,
                *pos,
                format!("column {name:?} holds values a query cannot compare (complex numbers)"),
            )
        })?,
        Expr::Lit { value, .. } => match value {
            Literal::Bool(_) => Ty::Bool,
            Literal::Int(i) => Ty::PyInt(*i),
            Literal::Float(_) => Ty::Float,
            Literal::Str(_) => Ty::Str,
            Literal::Time { delta, unit, .. } => Ty::Time {
                delta: *delta,
                unit: *unit,
            },
        },
        Expr::Neg { arg, pos } => {
            let t = check(text, arg, col_ty)?;
            if matches!(t, Ty::Time { delta: true, .. }) {
                return Ok(t);
            }
            if !t.numeric() {
                return Err(error(
                    text,
                    *pos,
                    format!("unary `-` needs a number, not {}", t.name()),
                ));
            }
            // numpy's negation wraps in the operand's type (`-u` of a uint64 is 2^64 - u);
            // Python's of a literal is exact.
            match t {
                Ty::PyInt(i) => i.checked_neg().map_or(Ty::Float, Ty::PyInt),
                t => t,
            }
        }
        Expr::IsNull { name, pos, .. } => {
            col_ty(name).ok_or_else(|| {
                error(
                    text,
                    *pos,
                    format!("column {name:?} holds values a query cannot read (complex)"),
                )
            })?;
            Ty::Bool
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
            if let (Ty::Time { .. }, _) | (_, Ty::Time { .. }) = (a, b) {
                if !matches!(op, BinOp::And | BinOp::Or) {
                    return time_ty(text, *pos, *op, a, b);
                }
            }
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
                    arith_ty(text, *op, (a, left), (b, right))?
                }
            }
        }
    })
}

/// The type of `a op b` (comparison or arithmetic) where a side is a date or a duration.
fn time_ty(text: &str, pos: usize, op: BinOp, a: Ty, b: Ty) -> Result<Ty> {
    let (
        Ty::Time {
            delta: da,
            unit: ua,
        },
        Ty::Time {
            delta: db,
            unit: ub,
        },
    ) = (a, b)
    else {
        let hint = if matches!((a, b), (Ty::Str, _) | (_, Ty::Str)) {
            " (a string compares with a datetime64 column when it is a date: \
             'YYYY-MM-DD[Thh:mm:ss]'; elsewhere write datetime64('...'))"
        } else {
            " (write a date as datetime64('2020-01-31'), a duration as timedelta64(3, 'D'))"
        };
        return Err(error(
            text,
            pos,
            format!(
                "cannot use `{}` on {} and {}{hint}",
                op.symbol(),
                a.name(),
                b.name()
            ),
        ));
    };
    if !time::compatible(da, ua, db, ub) {
        return Err(error(
            text,
            pos,
            format!(
                "durations of years or months meet only years or months (numpy refuses \
                 datetime64/timedelta64[{}] with [{}])",
                ua.code(),
                ub.code()
            ),
        ));
    }
    if op.is_comparison() {
        if da != db {
            return Err(error(
                text,
                pos,
                format!("cannot compare {} with {}", a.name(), b.name()),
            ));
        }
        return Ok(Ty::Bool);
    }
    match time::arith_kind(op, da, db) {
        Some(delta) => Ok(Ty::Time {
            delta,
            unit: time::finer(ua, ub),
        }),
        None => Err(error(
            text,
            pos,
            format!(
                "`{}` is not defined on {} and {} (date - date, date ± duration and \
                 duration ± duration are)",
                op.symbol(),
                a.name(),
                b.name()
            ),
        )),
    }
}

/// The type of `left op right` (both numbers, `op` arithmetic), by numpy 2's rules (NEP 50):
/// a literal takes the type of the integer it meets, and one out of that type's range is
/// refused (numpy raises `OverflowError`).
fn arith_ty(text: &str, op: BinOp, (a, l): (Ty, &Expr), (b, r): (Ty, &Expr)) -> Result<Ty> {
    let kind = |t: Ty| match t {
        Ty::Int(k) => Some(Some(k)),
        Ty::PyInt(_) => Some(None),
        _ => None,
    };
    let (Some(ka), Some(kb)) = (kind(a), kind(b)) else {
        return Ok(Ty::Float);
    };
    if op == BinOp::Div {
        // True division of integers is float64 (numpy converts a literal to float64 there).
        return Ok(Ty::Float);
    }
    for (lit, k, e) in [(a, kb, l), (b, ka, r)] {
        if let (Ty::PyInt(v), Some(k)) = (lit, k) {
            if v < k.min() || v > k.max() {
                return Err(error(
                    text,
                    e.pos(),
                    format!(
                        "integer {v} is out of range for {} in `{}` (numpy raises OverflowError): compare with it, or write it as a float to compute in float64",
                        k.name(),
                        op.symbol()
                    ),
                ));
            }
        }
    }
    Ok(match (a, b, int_result(ka, kb)) {
        (Ty::PyInt(x), Ty::PyInt(y), _) => py_int(op, x, y).map_or(Ty::Float, Ty::PyInt),
        (_, _, Ok(Some(k))) => Ty::Int(k),
        _ => Ty::Float,
    })
}

/// The columns of one range of `n` elements, read.
pub(crate) struct Frame {
    pub(crate) n: usize,
    pub(crate) cols: HashMap<String, Raw>,
    /// The validity of the nullable columns read (true where a row holds a value).
    pub(crate) valid: HashMap<String, Vec<bool>>,
}

/// Evaluates boolean expression `e` over a frame: one flag per row, set where `e` is true.
/// With nulls, SQL's (and pandas') logic: a comparison or arithmetic with a null is
/// unknown, `~` of unknown is unknown, `&` and `|` are Kleene's, and only true rows match.
pub(crate) fn eval_mask(e: &Expr, f: &Frame) -> Vec<bool> {
    if f.valid.is_empty() {
        return plain_mask(e, f);
    }
    eval3(e, f).0
}

fn plain_mask(e: &Expr, f: &Frame) -> Vec<bool> {
    match eval(e, f) {
        V::Bool(b) => b.into_owned(),
        V::SBool(b) => vec![b; f.n],
        _ => vec![false; f.n],
    }
}

/// The rows where `e` is true and those where it is false (the rest are unknown).
fn eval3(e: &Expr, f: &Frame) -> (Vec<bool>, Vec<bool>) {
    match e {
        Expr::Not { arg, .. } => {
            let (t, fl) = eval3(arg, f);
            (fl, t)
        }
        Expr::Bin {
            op: op @ (BinOp::And | BinOp::Or),
            left,
            right,
            ..
        } => {
            let (lt, lf) = eval3(left, f);
            let (rt, rf) = eval3(right, f);
            let zip = |a: &[bool], b: &[bool], and: bool| -> Vec<bool> {
                a.iter()
                    .zip(b)
                    .map(|(&x, &y)| if and { x && y } else { x || y })
                    .collect()
            };
            if *op == BinOp::And {
                (zip(&lt, &rt, true), zip(&lf, &rf, false))
            } else {
                (zip(&lt, &rt, false), zip(&lf, &rf, true))
            }
        }
        _ => {
            // A null test, a comparison, a bool column or literal: its value, unknown
            // where a column it reads (beneath any null test) is null.
            let value = plain_mask(e, f);
            let mut known = vec![true; f.n];
            e.walk_values(&mut |name| {
                if let Some(v) = f.valid.get(name) {
                    known.iter_mut().zip(v).for_each(|(k, &ok)| *k &= ok);
                }
            });
            let t = value.iter().zip(&known).map(|(&v, &k)| v && k).collect();
            let fl = value.iter().zip(&known).map(|(&v, &k)| !v && k).collect();
            (t, fl)
        }
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
            Literal::Time { delta, unit, value } => V::STime(*delta, *unit, *value),
        },
        Expr::Neg { arg, .. } => match eval(arg, f) {
            V::Time(d, u, v) => {
                V::Time(d, u, Cow::Owned(v.iter().map(|&x| time::neg(x)).collect()))
            }
            V::STime(d, u, x) => V::STime(d, u, time::neg(x)),
            // numpy's: wraps in the column's type.
            V::Int(k, v) => V::Int(
                k,
                Cow::Owned(v.iter().map(|x| k.wrap64(x.wrapping_neg())).collect()),
            ),
            V::UInt(v) => V::UInt(Cow::Owned(v.iter().map(|x| x.wrapping_neg()).collect())),
            V::Float(v) => V::Float(Cow::Owned(v.iter().map(|x| -x).collect())),
            // Python's: exact.
            V::SInt(i) => match i.checked_neg() {
                Some(n) => V::SInt(n),
                None => V::SFloat(-(i as f64)),
            },
            V::SFloat(x) => V::SFloat(-x),
            v => v,
        },
        Expr::IsNull { name, negated, .. } => {
            let mut missing = match f.valid.get(name) {
                Some(v) => v.iter().map(|&ok| !ok).collect(),
                None => vec![false; f.n],
            };
            // NaT is missing too, as in pandas (`isna`) and SQL (NULL).
            if let Some(V::Time(_, _, x)) = f.cols.get(name).map(Raw::value) {
                missing
                    .iter_mut()
                    .zip(x.iter())
                    .for_each(|(m, &v)| *m |= v == crate::datetime::NAT);
            }
            if *negated {
                missing.iter_mut().for_each(|m| *m = !*m);
            }
            V::Bool(Cow::Owned(missing))
        }
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
        V::Int(_, x) => F::V(Cow::Owned(x.iter().map(|&i| i as f64).collect())),
        V::UInt(x) => F::V(Cow::Owned(x.iter().map(|&i| i as f64).collect())),
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

/// `op` with its operands swapped: `a < b` is `b > a`.
fn flip(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::Le => BinOp::Ge,
        BinOp::Gt => BinOp::Lt,
        BinOp::Ge => BinOp::Le,
        op => op,
    }
}

/// Integer `i` against float `f`, exactly (Python's comparison of an int with a float).
pub(crate) fn cmp_int_float(op: BinOp, i: i128, f: f64) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    if f.is_nan() {
        return op == BinOp::Ne;
    }
    let two127 = 2f64.powi(127);
    let ord = if f >= two127 {
        Less
    } else if f < -two127 {
        Greater
    } else {
        // `t` is an integer in [-2^127, 2^127): exact as i128; `f` lies within 1 of it.
        let t = f.trunc();
        match i.cmp(&(t as i128)) {
            Equal if f > t => Less,
            Equal if f < t => Greater,
            o => o,
        }
    };
    op.holds(ord)
}

/// A comparison of dates or of durations (`None`: not of times).
fn compare_time(op: BinOp, a: &V<'_>, b: &V<'_>) -> Option<V<'static>> {
    Some(match (a, b) {
        (V::Time(d, ux, x), V::Time(_, uy, y)) => {
            V::Bool(Cow::Owned(time::cmp_vectors(op, *d, (*ux, x), (*uy, y))))
        }
        (V::Time(d, u, x), V::STime(_, us, s)) => V::Bool(Cow::Owned(time::cmp_scalar(
            op,
            *d,
            *u,
            x,
            time::key(*d, *us, *s),
        ))),
        (V::STime(_, us, s), V::Time(d, u, x)) => V::Bool(Cow::Owned(time::cmp_scalar(
            flip(op),
            *d,
            *u,
            x,
            time::key(*d, *us, *s),
        ))),
        (V::STime(d, ua, a), V::STime(_, ub, b)) => V::SBool(time::cmp_keys(
            op,
            time::key(*d, *ua, *a),
            time::key(*d, *ub, *b),
        )),
        _ => return None,
    })
}

/// `+` or `-` of dates and durations (`None`: not of times): both sides in the finer unit,
/// then counts of it.
fn arith_time(op: BinOp, a: &V<'_>, b: &V<'_>) -> Option<V<'static>> {
    type Parts<'v> = (bool, TimeUnit, std::result::Result<&'v [i64], i64>);
    fn parts<'v>(v: &'v V<'_>) -> Option<Parts<'v>> {
        match v {
            V::Time(d, u, x) => Some((*d, *u, Ok(x))),
            V::STime(d, u, s) => Some((*d, *u, Err(*s))),
            _ => None,
        }
    }
    let ((da, ua, x), (db, ub, y)) = (parts(a)?, parts(b)?);
    let delta = time::arith_kind(op, da, db)?;
    let unit = time::finer(ua, ub);
    let to = |d: bool, u: TimeUnit, v: i64| time::convert(d, u, unit, v);
    let g = |p: i64, q: i64| time::add_sub(op, to(da, ua, p), to(db, ub, q));
    Some(match (x, y) {
        (Ok(x), Ok(y)) => V::Time(
            delta,
            unit,
            Cow::Owned(x.iter().zip(y.iter()).map(|(&p, &q)| g(p, q)).collect()),
        ),
        (Ok(x), Err(s)) => V::Time(
            delta,
            unit,
            Cow::Owned(x.iter().map(|&p| g(p, s)).collect()),
        ),
        (Err(s), Ok(y)) => V::Time(
            delta,
            unit,
            Cow::Owned(y.iter().map(|&q| g(s, q)).collect()),
        ),
        (Err(s), Err(t)) => V::STime(delta, unit, g(s, t)),
    })
}

/// A dictionary column's strings, each row's.
fn dict_strings<'a>(v: V<'a>) -> V<'a> {
    match v {
        V::Dict(codes, entries) => V::Str(
            codes
                .iter()
                .map(|&c| {
                    let e = usize::try_from(c).ok().and_then(|k| entries.get(k));
                    Cow::Borrowed(e.map_or(&[][..], |e| e.as_bytes()))
                })
                .collect(),
        ),
        v => v,
    }
}

/// `==` or `!=` of a dictionary column with a string: decided once per entry, then each
/// row by its code.
fn compare_codes(op: BinOp, codes: &[i32], entries: &[String], s: &[u8]) -> V<'static> {
    let eq = op == BinOp::Eq;
    let hit: Vec<bool> = entries.iter().map(|e| (e.as_bytes() == s) == eq).collect();
    V::Bool(Cow::Owned(
        codes
            .iter()
            .map(|&c| usize::try_from(c).ok().and_then(|k| hit.get(k).copied()) == Some(true))
            .collect(),
    ))
}

fn compare<'a>(op: BinOp, a: V<'a>, b: V<'a>, n: usize) -> V<'a> {
    if let Some(v) = compare_time(op, &a, &b) {
        return v;
    }
    let (a, b) = match (a, b) {
        (V::Dict(c, e), V::SStr(s)) | (V::SStr(s), V::Dict(c, e)) => {
            return compare_codes(op, &c, e, &s)
        }
        (a, b) => (dict_strings(a), dict_strings(b)),
    };
    let fits_i64 = |s: i128| i64::try_from(s).is_ok();
    let fits_u64 = |s: i128| u64::try_from(s).is_ok();
    match (a, b) {
        (V::Int(_, x), V::Int(_, y)) => cmp_typed::<i64>(op, Ok(&x), Ok(&y)),
        (V::Int(_, x), V::SInt(s)) if fits_i64(s) => cmp_typed::<i64>(op, Ok(&x), Err(s as i64)),
        (V::SInt(s), V::Int(_, y)) if fits_i64(s) => cmp_typed::<i64>(op, Err(s as i64), Ok(&y)),
        (V::SInt(s), V::SInt(t)) => V::SBool(cmp_fn::<i128>(op)(s, t)),
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
        (V::UInt(x), V::SInt(s)) if fits_u64(s) => cmp_typed::<u64>(op, Ok(&x), Err(s as u64)),
        (V::SInt(s), V::UInt(y)) if fits_u64(s) => cmp_typed::<u64>(op, Err(s as u64), Ok(&y)),
        // Two literals: Python compares an int with a float exactly.
        (V::SInt(s), V::SFloat(t)) => V::SBool(cmp_int_float(op, s, t)),
        (V::SFloat(t), V::SInt(s)) => V::SBool(cmp_int_float(flip(op), s, t)),
        (a, b) if is_int(&a) && is_int(&b) => {
            // Signed with unsigned, or a literal past the column's type: exactly, as numpy
            // 2 compares them.
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
    matches!(v, V::Int(..) | V::UInt(_) | V::SInt(_))
}

/// The integer type of a vector (`None` for a literal).
fn int_kind(v: &V<'_>) -> Option<IK> {
    match v {
        V::Int(k, _) => Some(*k),
        V::UInt(_) => Some(IK::U64),
        _ => None,
    }
}

/// Integers as `i128`, which holds both `i64` and `u64`: a vector, or `Err` of a scalar.
fn wide(v: &V<'_>) -> std::result::Result<Vec<i128>, i128> {
    match v {
        V::Int(_, x) => Ok(x.iter().map(|&i| i128::from(i)).collect()),
        V::UInt(x) => Ok(x.iter().map(|&i| i128::from(i)).collect()),
        V::SInt(i) => Err(*i),
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

fn u64_op(op: BinOp) -> fn(u64, u64) -> u64 {
    match op {
        BinOp::Add => u64::wrapping_add,
        BinOp::Sub => u64::wrapping_sub,
        BinOp::Mul => u64::wrapping_mul,
        _ => |a, b| a.checked_rem(b).unwrap_or(0),
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

/// `g` over two operands, one of them a vector (`Err`: a scalar).
fn zip_op<T: Copy>(
    a: std::result::Result<&[T], T>,
    b: std::result::Result<&[T], T>,
    g: fn(T, T) -> T,
) -> Vec<T> {
    match (a, b) {
        (Ok(x), Ok(y)) => x.iter().zip(y).map(|(&p, &q)| g(p, q)).collect(),
        (Ok(x), Err(s)) => x.iter().map(|&p| g(p, s)).collect(),
        (Err(s), Ok(y)) => y.iter().map(|&q| g(s, q)).collect(),
        (Err(_), Err(_)) => Vec::new(),
    }
}

/// An operand of uint64 arithmetic: uint8 .. uint64, or a literal in [0, 2^64).
fn u64s<'v>(v: &'v V<'_>) -> std::result::Result<Cow<'v, [u64]>, u64> {
    match v {
        V::UInt(x) => Ok(Cow::Borrowed(x.as_ref())),
        V::Int(_, x) => Ok(Cow::Owned(x.iter().map(|&i| i as u64).collect())),
        V::SInt(s) => Err(*s as u64),
        _ => Err(0),
    }
}

/// An operand of arithmetic in int8 .. int64 or uint8 .. uint32 (exact in `i64`).
fn i64s<'v>(v: &'v V<'_>) -> std::result::Result<&'v [i64], i64> {
    match v {
        V::Int(_, x) => Ok(x.as_ref()),
        V::SInt(s) => Err(*s as i64),
        _ => Err(0),
    }
}

/// Arithmetic `op`, by numpy 2's rules (NEP 50): integers of one type compute in it,
/// wrapping at its width; of two column types, in their promotion ([`IK::promote`]); a
/// literal takes the type of the integer it meets (`check` refuses one out of its range);
/// two literals compute as Python ints ([`py_int`]). uint64 with a signed type, an integer
/// with a float, and `/` compute in float64.
fn arith<'a>(op: BinOp, a: V<'a>, b: V<'a>) -> V<'a> {
    if let Some(v) = arith_time(op, &a, &b) {
        return v;
    }
    if op != BinOp::Div && is_int(&a) && is_int(&b) {
        if let (V::SInt(s), V::SInt(t)) = (&a, &b) {
            return match py_int(op, *s, *t) {
                Ok(i) => V::SInt(i),
                Err(x) => V::SFloat(x),
            };
        }
        match int_result(int_kind(&a), int_kind(&b)) {
            Ok(Some(IK::U64)) => {
                // The other side is uint8 .. uint64, or a literal in [0, 2^64).
                let (x, y) = (u64s(&a), u64s(&b));
                let out = zip_op(
                    x.as_deref().map_err(|&s| s),
                    y.as_deref().map_err(|&s| s),
                    u64_op(op),
                );
                return V::UInt(Cow::Owned(out));
            }
            Ok(Some(k)) => {
                let mut out = zip_op(i64s(&a), i64s(&b), int_op(op));
                if k != IK::I64 {
                    out.iter_mut().for_each(|v| *v = k.wrap64(*v));
                }
                return V::Int(k, Cow::Owned(out));
            }
            _ => {}
        }
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
