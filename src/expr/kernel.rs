//! Vectorised operations on a block of values. Every dtype computes in one of four physical
//! kinds (bool, i64, u64, f64); after each operation the values are brought back to the
//! node's dtype ([`fix`]: integers wrap as numpy's do, float32 rounds), so the results are
//! numpy's. A vector of length 1 broadcasts against any length.

use crate::dtype::DType;

/// A block of values in their physical kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    /// Booleans.
    B(Vec<bool>),
    /// Signed integers.
    I(Vec<i64>),
    /// Unsigned integers.
    U(Vec<u64>),
    /// Floats.
    F(Vec<f64>),
}

impl Val {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Val::B(v) => v.len(),
            Val::I(v) => v.len(),
            Val::U(v) => v.len(),
            Val::F(v) => v.len(),
        }
    }

    /// Whether it holds no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Which physical kind a dtype computes in: 0 bool, 1 signed, 2 unsigned, 3 float.
pub(crate) fn phys(d: DType) -> u8 {
    match d {
        DType::Bool => 0,
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => 2,
        DType::F32 | DType::F64 => 3,
        _ => 1,
    }
}

/// Values from `n` native-endian elements of `dtype` in `bytes`.
pub(crate) fn from_bytes(bytes: &[u8], dtype: DType) -> Val {
    macro_rules! conv {
        ($t:ty, $variant:ident, $as:ty) => {
            Val::$variant(
                bytes
                    .chunks_exact(std::mem::size_of::<$t>())
                    .map(|c| {
                        let mut a = [0u8; std::mem::size_of::<$t>()];
                        a.copy_from_slice(c);
                        <$t>::from_ne_bytes(a) as $as
                    })
                    .collect(),
            )
        };
    }
    match dtype {
        DType::Bool => Val::B(bytes.iter().map(|&b| b != 0).collect()),
        DType::I8 => conv!(i8, I, i64),
        DType::I16 => conv!(i16, I, i64),
        DType::I32 => conv!(i32, I, i64),
        DType::U8 => Val::U(bytes.iter().map(|&b| u64::from(b)).collect()),
        DType::U16 => conv!(u16, U, u64),
        DType::U32 => conv!(u32, U, u64),
        DType::U64 => conv!(u64, U, u64),
        DType::F32 => conv!(f32, F, f64),
        DType::F64 => conv!(f64, F, f64),
        _ => conv!(i64, I, i64),
    }
}

/// Writes the values as native-endian elements of `dtype` into `out` (exactly their size;
/// a length-1 `v` fills it).
pub(crate) fn to_bytes(v: &Val, dtype: DType, out: &mut [u8]) {
    let isz = dtype.itemsize();
    macro_rules! put {
        ($src:expr, $t:ty) => {{
            let src = $src;
            if src.len() == 1 {
                let b = (src[0] as $t).to_ne_bytes();
                for c in out.chunks_exact_mut(isz) {
                    c.copy_from_slice(&b);
                }
            } else {
                for (c, &x) in out.chunks_exact_mut(isz).zip(src.iter()) {
                    c.copy_from_slice(&(x as $t).to_ne_bytes());
                }
            }
        }};
    }
    macro_rules! any {
        ($t:ty) => {
            match v {
                Val::B(s) => {
                    let s: Vec<u8> = s.iter().map(|&b| u8::from(b)).collect();
                    put!(&s, $t)
                }
                Val::I(s) => put!(s, $t),
                Val::U(s) => put!(s, $t),
                Val::F(s) => put!(s, $t),
            }
        };
    }
    match dtype {
        DType::Bool => {
            let b: Vec<u8> = match cast(v.clone(), DType::Bool) {
                Val::B(s) => s.iter().map(|&x| u8::from(x)).collect(),
                _ => Vec::new(),
            };
            if b.len() == 1 {
                out.fill(b[0]);
            } else {
                out.copy_from_slice(&b);
            }
        }
        DType::I8 => any!(i8),
        DType::I16 => any!(i16),
        DType::I32 => any!(i32),
        DType::I64 => any!(i64),
        DType::U8 => any!(u8),
        DType::U16 => any!(u16),
        DType::U32 => any!(u32),
        DType::U64 => any!(u64),
        DType::F32 => any!(f32),
        _ => any!(f64),
    }
}

/// The values converted to `to`'s physical kind and range (numpy's `astype`).
pub(crate) fn cast(v: Val, to: DType) -> Val {
    let v = match (phys(to), v) {
        (0, Val::B(x)) => Val::B(x),
        (0, Val::I(x)) => Val::B(x.iter().map(|&a| a != 0).collect()),
        (0, Val::U(x)) => Val::B(x.iter().map(|&a| a != 0).collect()),
        (0, Val::F(x)) => Val::B(x.iter().map(|&a| a != 0.0).collect()),
        (1, Val::B(x)) => Val::I(x.iter().map(|&a| i64::from(a)).collect()),
        (1, Val::I(x)) => Val::I(x),
        (1, Val::U(x)) => Val::I(x.iter().map(|&a| a as i64).collect()),
        (1, Val::F(x)) => Val::I(x.iter().map(|&a| a as i64).collect()),
        (2, Val::B(x)) => Val::U(x.iter().map(|&a| u64::from(a)).collect()),
        (2, Val::I(x)) => Val::U(x.iter().map(|&a| a as u64).collect()),
        (2, Val::U(x)) => Val::U(x),
        (2, Val::F(x)) => Val::U(x.iter().map(|&a| a as u64).collect()),
        (_, Val::B(x)) => Val::F(x.iter().map(|&a| f64::from(u8::from(a))).collect()),
        (_, Val::I(x)) => Val::F(x.iter().map(|&a| a as f64).collect()),
        (_, Val::U(x)) => Val::F(x.iter().map(|&a| a as f64).collect()),
        (_, Val::F(x)) => Val::F(x),
    };
    fix(v, to)
}

/// Brings values of `dtype`'s physical kind into its range: integers wrap, float32 rounds.
pub(crate) fn fix(v: Val, dtype: DType) -> Val {
    fn map<T: Copy>(mut x: Vec<T>, f: impl Fn(T) -> T) -> Vec<T> {
        x.iter_mut().for_each(|a| *a = f(*a));
        x
    }
    match (dtype, v) {
        (DType::I8, Val::I(x)) => Val::I(map(x, |a| a as i8 as i64)),
        (DType::I16, Val::I(x)) => Val::I(map(x, |a| a as i16 as i64)),
        (DType::I32, Val::I(x)) => Val::I(map(x, |a| a as i32 as i64)),
        (DType::U8, Val::U(x)) => Val::U(map(x, |a| a as u8 as u64)),
        (DType::U16, Val::U(x)) => Val::U(map(x, |a| a as u16 as u64)),
        (DType::U32, Val::U(x)) => Val::U(map(x, |a| a as u32 as u64)),
        (DType::F32, Val::F(x)) => Val::F(map(x, |a| a as f32 as f64)),
        (_, v) => v,
    }
}

/// `f` of each value.
pub(crate) fn map1<T: Copy, R>(a: &[T], f: impl Fn(T) -> R) -> Vec<R> {
    a.iter().map(|&x| f(x)).collect()
}

/// `f` of each pair, a length-1 side broadcast; reuses `a`'s buffer when it can.
pub(crate) fn zip_same<T: Copy>(mut a: Vec<T>, mut b: Vec<T>, f: impl Fn(T, T) -> T) -> Vec<T> {
    if a.len() == b.len() {
        a.iter_mut().zip(&b).for_each(|(x, &y)| *x = f(*x, y));
        a
    } else if b.len() == 1 {
        let y = b[0];
        a.iter_mut().for_each(|x| *x = f(*x, y));
        a
    } else {
        let x = a.first().copied();
        if let Some(x) = x {
            b.iter_mut().for_each(|y| *y = f(x, *y));
        }
        b
    }
}

/// `f` of each pair into a new vector, a length-1 side broadcast.
pub(crate) fn zip<T: Copy, R>(a: &[T], b: &[T], f: impl Fn(T, T) -> R) -> Vec<R> {
    if a.len() == b.len() {
        a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
    } else if b.len() == 1 {
        a.iter().map(|&x| f(x, b[0])).collect()
    } else {
        b.iter().map(|&y| f(a[0], y)).collect()
    }
}

/// numpy's `remainder` of floats: the sign of the divisor.
pub(crate) fn rem_f(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return f64::NAN;
    }
    let m = a % b;
    if m != 0.0 {
        if (b < 0.0) != (m < 0.0) {
            m + b
        } else {
            m
        }
    } else {
        0.0f64.copysign(b)
    }
}

/// numpy's `floor_divide` of floats.
pub(crate) fn floordiv_f(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return a / b;
    }
    let m = a % b;
    let mut div = (a - m) / b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        div -= 1.0;
    }
    if div != 0.0 {
        let fl = div.floor();
        if div - fl > 0.5 {
            fl + 1.0
        } else {
            fl
        }
    } else {
        0.0f64.copysign(a / b)
    }
}

/// numpy's integer `floor_divide` (0 for a zero divisor, as numpy gives with a warning).
pub(crate) fn floordiv_i(a: i64, b: i64) -> i64 {
    if b == 0 {
        return 0;
    }
    let q = a.wrapping_div(b);
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

/// numpy's integer `remainder` (0 for a zero divisor).
pub(crate) fn rem_i(a: i64, b: i64) -> i64 {
    if b == 0 {
        return 0;
    }
    let r = a.wrapping_rem(b);
    if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    }
}

/// numpy's `maximum`/`minimum` of floats: a NaN wins.
pub(crate) fn max_f(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// As [`max_f`], the minimum.
pub(crate) fn min_f(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// `a ** b` of integers, wrapping; `None` for a negative exponent (numpy refuses it).
pub(crate) fn pow_i(a: i64, b: i64) -> Option<i64> {
    if b < 0 {
        return None;
    }
    Some(a.wrapping_pow(u32::try_from(b).unwrap_or(u32::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_division_and_remainder() {
        assert_eq!(rem_i(-7, 3), 2);
        assert_eq!(rem_i(7, -3), -2);
        assert_eq!(floordiv_i(-7, 2), -4);
        assert_eq!(floordiv_i(7, 0), 0);
        assert_eq!(rem_f(-7.5, 2.0), 0.5);
        assert_eq!(floordiv_f(-7.5, 2.0), -4.0);
        assert_eq!(pow_i(3, 4), Some(81));
        assert_eq!(pow_i(3, -1), None);
    }

    #[test]
    fn casts_wrap_as_numpy() {
        assert_eq!(
            cast(Val::I(vec![200, -129]), DType::I8),
            Val::I(vec![-56, 127])
        );
        assert_eq!(cast(Val::I(vec![-1]), DType::U16), Val::U(vec![65535]));
        assert_eq!(
            cast(Val::F(vec![0.0, 2.5]), DType::Bool),
            Val::B(vec![false, true])
        );
        let mut out = [0u8; 8];
        to_bytes(&Val::I(vec![1, -1]), DType::I32, &mut out);
        assert_eq!(from_bytes(&out, DType::I32), Val::I(vec![1, -1]));
    }
}
