//! numpy 2's type promotion (NEP 50) over the dtypes expressions compute with: bool, the
//! signed and unsigned integers, float32 and float64. Python scalars are "weak": they take
//! the kind of the array they meet (`int8_array + 1` is int8, `int8_array + 1.5` float64,
//! `float32_array * 2.0` float32).

use crate::dtype::DType;

/// The type of an expression's node: a dtype, and whether it is a Python scalar's (weak).
/// A weak type is `Bool`, `I64` (Python's int) or `F64` (Python's float).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ty {
    /// The dtype the values have.
    pub dtype: DType,
    /// Whether it is a Python scalar's type (takes the array's type in mixed operations).
    pub weak: bool,
}

impl Ty {
    /// An array's type.
    pub(crate) fn strong(dtype: DType) -> Ty {
        Ty { dtype, weak: false }
    }
}

/// Whether expressions compute with `dtype`.
pub(crate) fn supported(dtype: DType) -> bool {
    dtype == DType::Bool || dtype.is_integer() || matches!(dtype, DType::F32 | DType::F64)
}

/// The integer type of a kind and size.
fn int(signed: bool, size: usize) -> DType {
    match (signed, size) {
        (true, 1) => DType::I8,
        (true, 2) => DType::I16,
        (true, 4) => DType::I32,
        (true, _) => DType::I64,
        (false, 1) => DType::U8,
        (false, 2) => DType::U16,
        (false, 4) => DType::U32,
        (false, _) => DType::U64,
    }
}

fn signed(d: DType) -> bool {
    matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64)
}

/// numpy's `promote_types` for two arrays' dtypes (both of those expressions compute with:
/// bool, the integers, float32 and float64).
pub fn promote(a: DType, b: DType) -> DType {
    use DType::*;
    if a == b {
        return a;
    }
    match (a, b) {
        (Bool, x) | (x, Bool) => x,
        (F64, _) | (_, F64) => F64,
        (F32, x) | (x, F32) => {
            if x.itemsize() <= 2 {
                F32
            } else {
                F64
            }
        }
        (x, y) if signed(x) == signed(y) => {
            if x.itemsize() >= y.itemsize() {
                x
            } else {
                y
            }
        }
        (x, y) => {
            let (s, u) = if signed(x) { (x, y) } else { (y, x) };
            if u.itemsize() < s.itemsize() {
                s
            } else if u == U64 {
                F64
            } else {
                int(true, u.itemsize() * 2)
            }
        }
    }
}

/// The kind rank of a weak type: bool < int < float.
fn rank(d: DType) -> u8 {
    match d {
        DType::Bool => 0,
        DType::F32 | DType::F64 => 2,
        _ => 1,
    }
}

/// numpy 2's `result_type` of two operands.
pub(crate) fn result_type(a: Ty, b: Ty) -> Ty {
    match (a.weak, b.weak) {
        (false, false) => Ty::strong(promote(a.dtype, b.dtype)),
        (true, false) => Ty::strong(with_weak(b.dtype, a.dtype)),
        (false, true) => Ty::strong(with_weak(a.dtype, b.dtype)),
        (true, true) => {
            if rank(a.dtype) >= rank(b.dtype) {
                a
            } else {
                b
            }
        }
    }
}

/// The type of an array of `strong` meeting a Python scalar of weak type `weak`.
fn with_weak(strong: DType, weak: DType) -> DType {
    if rank(weak) > rank(strong) {
        weak
    } else {
        strong
    }
}

/// The float type numpy's float loops take for `t` (`sin(int16)` is float32), or `None`
/// for float16 (bool and 8-bit integers), which blz does not hold.
pub(crate) fn float_of(t: Ty) -> Option<DType> {
    if t.weak {
        return Some(DType::F64);
    }
    match t.dtype {
        DType::F32 => Some(DType::F32),
        DType::F64 => Some(DType::F64),
        d if d.itemsize() == 1 => None,
        d if d.itemsize() == 2 => Some(DType::F32),
        _ => Some(DType::F64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;

    #[test]
    fn promotion_matches_numpy() {
        assert_eq!(promote(I8, U8), I16);
        assert_eq!(promote(I32, U32), I64);
        assert_eq!(promote(I64, U64), F64);
        assert_eq!(promote(U8, I64), I64);
        assert_eq!(promote(I16, F32), F32);
        assert_eq!(promote(I32, F32), F64);
        assert_eq!(promote(Bool, F32), F32);
        assert_eq!(promote(U16, U32), U32);
        let w = |d| Ty {
            dtype: d,
            weak: true,
        };
        assert_eq!(result_type(Ty::strong(I8), w(I64)).dtype, I8);
        assert_eq!(result_type(Ty::strong(I8), w(F64)).dtype, F64);
        assert_eq!(result_type(Ty::strong(F32), w(F64)).dtype, F32);
        assert_eq!(result_type(Ty::strong(Bool), w(I64)).dtype, I64);
        assert_eq!(result_type(w(I64), w(F64)), w(F64));
        assert_eq!(float_of(Ty::strong(I16)), Some(F32));
        assert_eq!(float_of(Ty::strong(U8)), None);
    }
}
