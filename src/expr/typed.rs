//! Type checking (numpy 2's result types for every node, before anything is read) and the
//! evaluation of a checked tree over one block of values.

use super::func::Func;
use super::kernel::{self as k, cast, map1, phys, zip, zip_same, Val};
use super::parse::{error, BinOp, Lit, Node, UnOp};
use super::types::{float_of, result_type, Ty};
use crate::dtype::DType;
use crate::error::Result;

/// What a checked node does.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    Var(usize),
    Lit(Lit),
    Un(UnOp),
    Bin(BinOp),
    Call(Func),
}

/// A checked node: its operation, arguments, result type, and the dtype its arguments are
/// converted to before the operation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TNode {
    pub op: Op,
    pub args: Vec<TNode>,
    pub ty: Ty,
    pub cty: DType,
}

fn weak_lit(l: Lit) -> Ty {
    let dtype = match l {
        Lit::Bool(_) => DType::Bool,
        Lit::Int(_) => DType::I64,
        Lit::Float(_) => DType::F64,
    };
    Ty { dtype, weak: true }
}

/// Whether integer `v` fits `dtype` (an integer type).
fn fits(v: i128, dtype: DType) -> bool {
    let (lo, hi): (i128, i128) = match dtype {
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::I64 => (i64::MIN.into(), i64::MAX.into()),
        DType::U8 => (0, u8::MAX.into()),
        DType::U16 => (0, u16::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::U64 => (0, u64::MAX.into()),
        _ => return true,
    };
    (lo..=hi).contains(&v)
}

/// What an operand is to the checker: an array of a dtype, or a Python scalar (weak).
#[derive(Debug, Clone, Copy)]
pub(crate) enum VarKind {
    Typed(DType),
    Scalar(Lit),
}

/// Checks `node` of `text`, the operands of types `vars`.
pub(crate) fn check(text: &str, node: &Node, vars: &[VarKind]) -> Result<TNode> {
    let err = |pos: usize, r: String| error(text, pos, r);
    let t = match node {
        Node::Var { index, pos } => match vars.get(*index) {
            Some(VarKind::Typed(d)) => TNode {
                op: Op::Var(*index),
                args: vec![],
                ty: Ty::strong(*d),
                cty: *d,
            },
            Some(VarKind::Scalar(l)) => {
                return check(
                    text,
                    &Node::Lit {
                        value: *l,
                        pos: *pos,
                    },
                    vars,
                );
            }
            None => return Err(err(*pos, "operand missing".into())),
        },
        Node::Lit { value, pos } => {
            if let Lit::Int(i) = value {
                if i64::try_from(*i).is_err() && u64::try_from(*i).is_err() {
                    return Err(err(*pos, format!("integer {i} does not fit 64 bits")));
                }
            }
            let ty = weak_lit(*value);
            TNode {
                op: Op::Lit(*value),
                args: vec![],
                ty,
                cty: ty.dtype,
            }
        }
        Node::Unary { op, arg, pos } => {
            let a = check(text, arg, vars)?;
            let d = a.ty.dtype;
            match op {
                UnOp::Neg if d == DType::Bool => {
                    return Err(err(
                        *pos,
                        "`-` of booleans is not supported (numpy refuses it); use `~`".into(),
                    ))
                }
                UnOp::Not if phys(d) == 3 => {
                    return Err(err(
                        *pos,
                        format!("`~` of {d} is not supported (booleans and integers only)"),
                    ))
                }
                _ => {}
            }
            TNode {
                op: Op::Un(*op),
                ty: a.ty,
                cty: d,
                args: vec![a],
            }
        }
        Node::Binary {
            op,
            left,
            right,
            pos,
        } => {
            let l = check(text, left, vars)?;
            let r = check(text, right, vars)?;
            let c = result_type(l.ty, r.ty);
            let both_weak = l.ty.weak && r.ty.weak;
            let (ty, cty) = match op {
                _ if op.is_comparison() => (
                    Ty {
                        dtype: DType::Bool,
                        weak: both_weak,
                    },
                    c.dtype,
                ),
                BinOp::And | BinOp::Or => {
                    if phys(c.dtype) == 3 {
                        return Err(err(
                            *pos,
                            format!(
                                "`{}` of {} is not supported (booleans and integers only)",
                                op.symbol(),
                                c.dtype
                            ),
                        ));
                    }
                    (c, c.dtype)
                }
                BinOp::Sub if c.dtype == DType::Bool => {
                    return Err(err(
                        *pos,
                        "`-` of booleans is not supported (numpy refuses it); use `^` or `!=`"
                            .into(),
                    ))
                }
                BinOp::Div => {
                    let f = if phys(c.dtype) == 3 {
                        c.dtype
                    } else {
                        DType::F64
                    };
                    (
                        Ty {
                            dtype: f,
                            weak: both_weak,
                        },
                        f,
                    )
                }
                BinOp::FloorDiv | BinOp::Rem | BinOp::Pow if c.dtype == DType::Bool => {
                    let d = if both_weak { DType::I64 } else { DType::I8 };
                    (
                        Ty {
                            dtype: d,
                            weak: both_weak,
                        },
                        d,
                    )
                }
                _ => (c, c.dtype),
            };
            let t = TNode {
                op: Op::Bin(*op),
                args: vec![l, r],
                ty,
                cty,
            };
            check_lits(text, &t)?;
            t
        }
        Node::Call { func, args, pos } => {
            let a = args
                .iter()
                .map(|x| check(text, x, vars))
                .collect::<Result<Vec<_>>>()?;
            let tys: Vec<Ty> = a.iter().map(|x| x.ty).collect();
            let common = |tys: &[Ty]| {
                tys.iter()
                    .copied()
                    .reduce(result_type)
                    .unwrap_or(Ty::strong(DType::F64))
            };
            let float = |t: Ty| {
                float_of(t).ok_or_else(|| {
                    err(*pos, format!("{} of {} gives float16 in numpy, which blz does not hold; convert to float32 first", func.name(), t.dtype))
                })
            };
            let (ty, cty) = match func {
                Func::Where => {
                    let c = common(&tys[1..]);
                    (c, c.dtype)
                }
                Func::Isnan | Func::Isinf | Func::Isfinite => (
                    Ty {
                        dtype: DType::Bool,
                        weak: tys[0].weak,
                    },
                    tys[0].dtype,
                ),
                Func::Negative if tys[0].dtype == DType::Bool => {
                    return Err(err(
                        *pos,
                        "negative of booleans is not supported (numpy refuses it)".into(),
                    ))
                }
                Func::Power if common(&tys).dtype == DType::Bool => {
                    (Ty::strong(DType::I8), DType::I8)
                }
                f if f.is_float_math() => {
                    let c = common(&tys);
                    let d = float(c)?;
                    (
                        Ty {
                            dtype: d,
                            weak: c.weak,
                        },
                        d,
                    )
                }
                _ => {
                    let c = common(&tys);
                    (c, c.dtype)
                }
            };
            let t = TNode {
                op: Op::Call(*func),
                args: a,
                ty,
                cty,
            };
            check_lits(text, &t)?;
            t
        }
    };
    Ok(t)
}

/// numpy 2 refuses a Python integer that does not fit the integer type it meets.
fn check_lits(text: &str, t: &TNode) -> Result<()> {
    let skip = usize::from(t.op == Op::Call(Func::Where));
    for a in t.args.iter().skip(skip) {
        if let Op::Lit(Lit::Int(i)) = a.op {
            let target = if t.cty == DType::F64
                && t.args.iter().all(|x| phys(x.ty.dtype) != 3)
                && matches!(t.op, Op::Bin(b) if b.is_comparison())
            {
                DType::I64
            } else {
                t.cty
            };
            if phys(target) != 3 && target != DType::Bool && !t.ty.weak && !fits(i, target) {
                return Err(error(
                    text,
                    0,
                    format!("Python integer {i} out of bounds for {target}"),
                ));
            }
        }
    }
    Ok(())
}

/// Operand values of a block: each taken by its last use, cloned before.
pub(crate) struct Vars {
    pub vals: Vec<Option<Val>>,
    pub uses: Vec<usize>,
}

impl Vars {
    fn get(&mut self, i: usize) -> Val {
        let last = self.uses[i] <= 1;
        self.uses[i] = self.uses[i].saturating_sub(1);
        if last {
            self.vals[i].take().unwrap_or(Val::F(Vec::new()))
        } else {
            self.vals[i].clone().unwrap_or(Val::F(Vec::new()))
        }
    }
}

/// How many times each operand appears in `t`.
pub(crate) fn count_uses(t: &TNode, uses: &mut [usize]) {
    if let Op::Var(i) = t.op {
        uses[i] += 1;
    }
    for a in &t.args {
        count_uses(a, uses);
    }
}

fn to_i128(v: &Val) -> Vec<i128> {
    match v {
        Val::B(x) => map1(x, i128::from),
        Val::I(x) => map1(x, i128::from),
        Val::U(x) => map1(x, i128::from),
        Val::F(x) => map1(x, |a| a as i128),
    }
}

fn compare<T: Copy + PartialOrd>(op: BinOp, a: &[T], b: &[T]) -> Vec<bool> {
    match op {
        BinOp::Lt => zip(a, b, |x, y| x < y),
        BinOp::Le => zip(a, b, |x, y| x <= y),
        BinOp::Gt => zip(a, b, |x, y| x > y),
        BinOp::Ge => zip(a, b, |x, y| x >= y),
        BinOp::Eq => zip(a, b, |x, y| x == y),
        _ => zip(a, b, |x, y| x != y),
    }
}

/// Evaluates `t` over a block; an error is a value no numpy result exists for (an integer
/// to a negative power).
pub(crate) fn eval(t: &TNode, vars: &mut Vars) -> std::result::Result<Val, String> {
    let args = |vars: &mut Vars| -> std::result::Result<Vec<Val>, String> {
        t.args.iter().map(|a| eval(a, vars)).collect()
    };
    let v = match &t.op {
        Op::Var(i) => vars.get(*i),
        Op::Lit(l) => match l {
            Lit::Bool(b) => Val::B(vec![*b]),
            Lit::Int(i) => match i64::try_from(*i) {
                Ok(x) => Val::I(vec![x]),
                Err(_) => Val::U(vec![*i as u64]),
            },
            Lit::Float(f) => Val::F(vec![*f]),
        },
        Op::Un(op) => {
            let a = cast(eval(&t.args[0], vars)?, t.cty);
            unary(*op, a)
        }
        Op::Bin(op) => {
            let mut a = args(vars)?;
            let b = a.pop().unwrap_or(Val::B(vec![]));
            let a = a.pop().unwrap_or(Val::B(vec![]));
            let int_args = t.args.iter().all(|x| phys(x.ty.dtype) != 3);
            if op.is_comparison() && int_args && t.cty == DType::F64 {
                // int64 against uint64: numpy compares them exactly.
                Val::B(compare(*op, &to_i128(&a), &to_i128(&b)))
            } else {
                binary(*op, cast(a, t.cty), cast(b, t.cty))?
            }
        }
        Op::Call(f) => {
            let mut a = args(vars)?;
            call(*f, &mut a, t.cty)?
        }
    };
    Ok(cast(v, t.ty.dtype))
}

fn unary(op: UnOp, a: Val) -> Val {
    match (op, a) {
        (UnOp::Neg, Val::I(x)) => Val::I(map1(&x, i64::wrapping_neg)),
        (UnOp::Neg, Val::U(x)) => Val::U(map1(&x, u64::wrapping_neg)),
        (UnOp::Neg, Val::F(x)) => Val::F(map1(&x, |v| -v)),
        (UnOp::Not, Val::B(x)) => Val::B(map1(&x, |v| !v)),
        (UnOp::Not, Val::I(x)) => Val::I(map1(&x, |v| !v)),
        (UnOp::Not, Val::U(x)) => Val::U(map1(&x, |v| !v)),
        (_, v) => v,
    }
}

fn binary(op: BinOp, a: Val, b: Val) -> std::result::Result<Val, String> {
    use BinOp::*;
    Ok(match (a, b) {
        (Val::F(a), Val::F(b)) => match op {
            Add => Val::F(zip_same(a, b, |x, y| x + y)),
            Sub => Val::F(zip_same(a, b, |x, y| x - y)),
            Mul => Val::F(zip_same(a, b, |x, y| x * y)),
            Div => Val::F(zip_same(a, b, |x, y| x / y)),
            FloorDiv => Val::F(zip_same(a, b, k::floordiv_f)),
            Rem => Val::F(zip_same(a, b, k::rem_f)),
            Pow => Val::F(zip_same(a, b, f64::powf)),
            And | Or => return Err(format!("`{}` of floats", op.symbol())),
            _ => Val::B(compare(op, &a, &b)),
        },
        (Val::I(a), Val::I(b)) => match op {
            Add => Val::I(zip_same(a, b, i64::wrapping_add)),
            Sub => Val::I(zip_same(a, b, i64::wrapping_sub)),
            Mul => Val::I(zip_same(a, b, i64::wrapping_mul)),
            Div => Val::F(zip(&a, &b, |x, y| x as f64 / y as f64)),
            FloorDiv => Val::I(zip_same(a, b, k::floordiv_i)),
            Rem => Val::I(zip_same(a, b, k::rem_i)),
            Pow => {
                if b.iter().any(|&e| e < 0) {
                    return Err("integers to negative integer powers are not allowed".into());
                }
                Val::I(zip_same(a, b, |x, y| k::pow_i(x, y).unwrap_or(0)))
            }
            And => Val::I(zip_same(a, b, |x, y| x & y)),
            Or => Val::I(zip_same(a, b, |x, y| x | y)),
            _ => Val::B(compare(op, &a, &b)),
        },
        (Val::U(a), Val::U(b)) => match op {
            Add => Val::U(zip_same(a, b, u64::wrapping_add)),
            Sub => Val::U(zip_same(a, b, u64::wrapping_sub)),
            Mul => Val::U(zip_same(a, b, u64::wrapping_mul)),
            Div => Val::F(zip(&a, &b, |x, y| x as f64 / y as f64)),
            FloorDiv => Val::U(zip_same(a, b, |x, y| x.checked_div(y).unwrap_or(0))),
            Rem => Val::U(zip_same(a, b, |x, y| x.checked_rem(y).unwrap_or(0))),
            Pow => Val::U(zip_same(a, b, |x, y| {
                x.wrapping_pow(u32::try_from(y).unwrap_or(u32::MAX))
            })),
            And => Val::U(zip_same(a, b, |x, y| x & y)),
            Or => Val::U(zip_same(a, b, |x, y| x | y)),
            _ => Val::B(compare(op, &a, &b)),
        },
        (Val::B(a), Val::B(b)) => match op {
            Add | Or => Val::B(zip_same(a, b, |x, y| x | y)),
            Mul | And => Val::B(zip_same(a, b, |x, y| x & y)),
            _ if op.is_comparison() => Val::B(compare(op, &a, &b)),
            _ => return Err(format!("`{}` of booleans", op.symbol())),
        },
        _ => return Err("operands of different kinds".into()),
    })
}

fn call(f: Func, a: &mut Vec<Val>, cty: DType) -> std::result::Result<Val, String> {
    if f == Func::Where {
        let y = cast(a.pop().unwrap_or(Val::B(vec![])), cty);
        let x = cast(a.pop().unwrap_or(Val::B(vec![])), cty);
        let Val::B(c) = cast(a.pop().unwrap_or(Val::B(vec![])), DType::Bool) else {
            return Err("where: condition".into());
        };
        return Ok(select(&c, x, y));
    }
    let mut args: Vec<Val> = if matches!(f, Func::Isnan | Func::Isinf | Func::Isfinite) {
        std::mem::take(a)
    } else {
        a.drain(..).map(|v| cast(v, cty)).collect()
    };
    if f.is_float_math() {
        return Ok(match (args.pop(), args.pop()) {
            (Some(Val::F(x)), None) => Val::F({
                let g = f.float1();
                let mut x = x;
                x.iter_mut().for_each(|v| *v = g(*v));
                x
            }),
            (Some(Val::F(y)), Some(Val::F(x))) => Val::F(zip_same(x, y, f.float2())),
            _ => return Err(format!("{} of non-floats", f.name())),
        });
    }
    if matches!(f, Func::Maximum | Func::Minimum | Func::Power) {
        let b = args.pop().unwrap_or(Val::B(vec![]));
        let a = args.pop().unwrap_or(Val::B(vec![]));
        let max = f == Func::Maximum;
        return Ok(match (a, b) {
            (a, b) if f == Func::Power => binary(BinOp::Pow, a, b)?,
            (Val::F(a), Val::F(b)) => Val::F(zip_same(a, b, if max { k::max_f } else { k::min_f })),
            (Val::I(a), Val::I(b)) => Val::I(zip_same(a, b, if max { i64::max } else { i64::min })),
            (Val::U(a), Val::U(b)) => Val::U(zip_same(a, b, if max { u64::max } else { u64::min })),
            (Val::B(a), Val::B(b)) => Val::B(zip_same(
                a,
                b,
                if max {
                    |x: bool, y: bool| x | y
                } else {
                    |x: bool, y: bool| x & y
                },
            )),
            _ => return Err("operands of different kinds".into()),
        });
    }
    let x = args.pop().unwrap_or(Val::B(vec![]));
    Ok(match (f, x) {
        (Func::Isnan, Val::F(x)) => Val::B(map1(&x, f64::is_nan)),
        (Func::Isinf, Val::F(x)) => Val::B(map1(&x, f64::is_infinite)),
        (Func::Isfinite, Val::F(x)) => Val::B(map1(&x, f64::is_finite)),
        (Func::Isnan | Func::Isinf, x) => Val::B(vec![false; x.len()]),
        (Func::Isfinite, x) => Val::B(vec![true; x.len()]),
        (Func::Abs, Val::I(x)) => Val::I(map1(&x, i64::wrapping_abs)),
        (Func::Abs, Val::F(x)) => Val::F(map1(&x, f64::abs)),
        (Func::Negative, x) => unary(UnOp::Neg, x),
        (Func::Square, Val::I(x)) => Val::I(map1(&x, |v| v.wrapping_mul(v))),
        (Func::Square, Val::U(x)) => Val::U(map1(&x, |v| v.wrapping_mul(v))),
        (Func::Square, Val::F(x)) => Val::F(map1(&x, |v| v * v)),
        (Func::Floor, Val::F(x)) => Val::F(map1(&x, f64::floor)),
        (Func::Ceil, Val::F(x)) => Val::F(map1(&x, f64::ceil)),
        (Func::Trunc, Val::F(x)) => Val::F(map1(&x, f64::trunc)),
        (_, x) => x,
    })
}

/// `x` where `c`, else `y`; each of length 1 or the block's.
fn select(c: &[bool], x: Val, y: Val) -> Val {
    fn sel<T: Copy>(c: &[bool], x: &[T], y: &[T]) -> Vec<T> {
        let n = c.len().max(x.len()).max(y.len());
        let at = |v: &[T], i: usize| if v.len() == 1 { v[0] } else { v[i] };
        (0..n)
            .map(|i| {
                if c[if c.len() == 1 { 0 } else { i }] {
                    at(x, i)
                } else {
                    at(y, i)
                }
            })
            .collect()
    }
    match (x, y) {
        (Val::F(x), Val::F(y)) => Val::F(sel(c, &x, &y)),
        (Val::I(x), Val::I(y)) => Val::I(sel(c, &x, &y)),
        (Val::U(x), Val::U(y)) => Val::U(sel(c, &x, &y)),
        (Val::B(x), Val::B(y)) => Val::B(sel(c, &x, &y)),
        (x, _) => x,
    }
}
