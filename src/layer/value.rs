//! The values a layer column holds, their stored bytes, their order and their hash.
//!
//! Fixed-size values (integers, floats) are stored little-endian in the column's dtype;
//! variable-length values (strings, byte strings) as their bytes. Values compare by number
//! (floats by IEEE total order) or bytewise (UTF-8 byte order is code point order), and
//! hash through [`hash64`] of their stored bytes.

use crate::column::LeafKind;
use crate::dtype::{put_scalar, DType, Scalar};
use crate::error::{Error, Result};
use std::cmp::Ordering;
use std::fmt;

/// One value of a layer column (a key, or an auxiliary value such as a weight).
#[derive(Debug, Clone)]
pub enum Value {
    /// A signed integer (columns of int8..int64).
    Int(i64),
    /// An unsigned integer (columns of uint8..uint64).
    UInt(u64),
    /// A float (float32 and float64 columns), ordered by IEEE 754 total order.
    Float(f64),
    /// A string (`varstr` columns).
    Str(String),
    /// A byte string (`varbytes` columns).
    Bytes(Vec<u8>),
}

impl Value {
    fn rank(&self) -> u8 {
        match self {
            Value::Int(_) => 0,
            Value::UInt(_) => 1,
            Value::Float(_) => 2,
            Value::Str(_) => 3,
            Value::Bytes(_) => 4,
        }
    }

    /// The value as JSON (for display).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Int(v) => (*v).into(),
            Value::UInt(v) => (*v).into(),
            Value::Float(v) => serde_json::Number::from_f64(*v)
                .map_or_else(|| v.to_string().into(), serde_json::Value::Number),
            Value::Str(s) => s.clone().into(),
            Value::Bytes(b) => String::from_utf8_lossy(b).into_owned().into(),
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Value {}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Value) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Value {
    /// Values of one variant compare by content; values of different variants (which never
    /// share a column) by variant.
    fn cmp(&self, other: &Value) -> Ordering {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            (Value::UInt(a), Value::UInt(b)) => a.cmp(b),
            (Value::Float(a), Value::Float(b)) => a.total_cmp(b),
            (Value::Str(a), Value::Str(b)) => a.cmp(b),
            (Value::Bytes(a), Value::Bytes(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::UInt(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Bytes(b) => write!(f, "b{:?}", String::from_utf8_lossy(b)),
        }
    }
}

macro_rules! from_int {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Value {
            fn from(x: $t) -> Value {
                Value::$v(x.into())
            }
        }
    )*};
}
from_int!(i8 => Int, i16 => Int, i32 => Int, i64 => Int, u8 => UInt, u16 => UInt, u32 => UInt,
    u64 => UInt, f32 => Float, f64 => Float);

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}

impl From<&String> for Value {
    fn from(s: &String) -> Value {
        Value::Str(s.clone())
    }
}

impl From<Vec<u8>> for Value {
    fn from(b: Vec<u8>) -> Value {
        Value::Bytes(b)
    }
}

impl From<&[u8]> for Value {
    fn from(b: &[u8]) -> Value {
        Value::Bytes(b.to_vec())
    }
}

/// Checks that a layer column (or weight) can hold `kind`: integers, floats, `varstr`,
/// `varbytes`.
///
/// # Errors
/// [`Error::InvalidArgument`] for bool, complex and fixed-length string dtypes.
pub fn check_kind(kind: LeafKind) -> Result<()> {
    match kind {
        LeafKind::VarStr | LeafKind::VarBytes => Ok(()),
        LeafKind::Fixed(
            DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U16
            | DType::U32
            | DType::U64
            | DType::F32
            | DType::F64,
        ) => Ok(()),
        LeafKind::Fixed(d) => Err(Error::InvalidArgument(format!(
            "layer columns hold integers, floats, varstr or varbytes, not {d}"
        ))),
    }
}

/// Converts `v` to the canonical variant of a column of `kind` (an integer given for a float
/// column becomes a float, ...).
///
/// # Errors
/// [`Error::InvalidArgument`] when `v` does not fit the column.
pub fn coerce(kind: LeafKind, v: &Value) -> Result<Value> {
    let bad = || Error::InvalidArgument(format!("value {v} does not fit a {} column", kind.name()));
    match kind {
        LeafKind::VarStr => match v {
            Value::Str(_) => Ok(v.clone()),
            Value::Bytes(b) => String::from_utf8(b.clone())
                .map(Value::Str)
                .map_err(|_| bad()),
            _ => Err(bad()),
        },
        LeafKind::VarBytes => match v {
            Value::Bytes(_) => Ok(v.clone()),
            Value::Str(s) => Ok(Value::Bytes(s.as_bytes().to_vec())),
            _ => Err(bad()),
        },
        LeafKind::Fixed(d) => {
            // The dtype's own conversion decides what fits (a float32 column rounds).
            let scalar = match v {
                Value::Int(i) => Scalar::Int((*i).into()),
                Value::UInt(u) => Scalar::Int((*u).into()),
                Value::Float(x) => Scalar::Float(*x),
                _ => return Err(bad()),
            };
            let mut buf = [0u8; 16];
            let elem = buf.get_mut(..d.itemsize()).ok_or_else(bad)?;
            put_scalar(scalar, d, elem).map_err(|_| bad())?;
            Ok(match (d, scalar) {
                (DType::F32, Scalar::Int(i)) => Value::Float(f64::from(i as f32)),
                (DType::F32, Scalar::Float(x)) => Value::Float(f64::from(x as f32)),
                (_, Scalar::Int(i)) if d.is_float() => Value::Float(i as f64),
                (_, Scalar::Float(x)) if d.is_float() => Value::Float(x),
                // An integer column: put_scalar checked that the value is whole and fits.
                (_, Scalar::Float(x)) => int_value(d, x as i128),
                (_, Scalar::Int(i)) => int_value(d, i),
                _ => return Err(bad()),
            })
        }
    }
}

/// The canonical variant of an integer that fits the integer dtype `d`.
fn int_value(d: DType, x: i128) -> Value {
    if matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64) {
        Value::Int(x as i64)
    } else {
        Value::UInt(x as u64)
    }
}

/// The stored bytes of a value already in the column's canonical variant (see [`coerce`]).
pub(crate) fn encode(kind: LeafKind, v: &Value, out: &mut Vec<u8>) {
    match (kind, v) {
        (LeafKind::Fixed(d), Value::Int(i)) => {
            out.extend_from_slice(&i.to_le_bytes()[..d.itemsize()]);
        }
        (LeafKind::Fixed(d), Value::UInt(u)) => {
            out.extend_from_slice(&u.to_le_bytes()[..d.itemsize()]);
        }
        (LeafKind::Fixed(DType::F32), Value::Float(x)) => {
            out.extend_from_slice(&(*x as f32).to_le_bytes());
        }
        (LeafKind::Fixed(_), Value::Float(x)) => out.extend_from_slice(&x.to_le_bytes()),
        (_, Value::Str(s)) => out.extend_from_slice(s.as_bytes()),
        (_, Value::Bytes(b)) => out.extend_from_slice(b),
        // Not reached for coerced values; keep the bytes well-defined anyway.
        (_, other) => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

/// Decodes stored bytes (one element of a fixed column, or one item of a variable one).
///
/// # Errors
/// A description of the problem (wrong length, invalid UTF-8); the caller names the chunk.
pub(crate) fn decode(kind: LeafKind, b: &[u8]) -> std::result::Result<Value, String> {
    let fixed = |n: usize| -> std::result::Result<[u8; 8], String> {
        if b.len() != n {
            return Err(format!("value of {} bytes, expected {n}", b.len()));
        }
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(b);
        Ok(a)
    };
    Ok(match kind {
        LeafKind::VarStr => Value::Str(
            String::from_utf8(b.to_vec()).map_err(|_| "string value is not UTF-8".to_string())?,
        ),
        LeafKind::VarBytes => Value::Bytes(b.to_vec()),
        LeafKind::Fixed(d) => {
            let n = d.itemsize();
            let a = fixed(n)?;
            let sign_extend =
                |bits: u32| -> i64 { (i64::from_le_bytes(a) << (64 - bits)) >> (64 - bits) };
            match d {
                DType::I8 | DType::I16 | DType::I32 | DType::I64 => {
                    Value::Int(sign_extend(8 * n as u32))
                }
                DType::F32 => Value::Float(f64::from(f32::from_le_bytes([a[0], a[1], a[2], a[3]]))),
                DType::F64 => Value::Float(f64::from_le_bytes(a)),
                _ => Value::UInt(u64::from_le_bytes(a)),
            }
        }
    })
}

/// Compares stored bytes with a canonical value.
///
/// # Errors
/// As [`decode`].
pub(crate) fn cmp_stored(
    kind: LeafKind,
    b: &[u8],
    v: &Value,
) -> std::result::Result<Ordering, String> {
    match v {
        Value::Str(s) => Ok(b.cmp(s.as_bytes())),
        Value::Bytes(x) => Ok(b.cmp(x.as_slice())),
        _ => Ok(decode(kind, b)?.cmp(v)),
    }
}

/// The 64-bit hash of a value's stored bytes used by the membership filters (its definition
/// is part of the file format, see `spec/layer.md`): start from `SEED ^ len`; for each
/// 8-byte little-endian word of the bytes (the last one zero-padded), `h = mix(h ^ word)`;
/// the hash is `mix(h)`. `mix` is the SplitMix64 finalizer, a bijection on `u64`.
pub(crate) fn hash64(bytes: &[u8]) -> u64 {
    const SEED: u64 = 0x243f_6a88_85a3_08d3;
    let mut h = SEED ^ bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        h = mix(h ^ u64::from_le_bytes(a));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut a = [0u8; 8];
        a[..rest.len()].copy_from_slice(rest);
        h = mix(h ^ u64::from_le_bytes(a));
    }
    mix(h)
}

/// The SplitMix64 finalizer.
pub(crate) fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_order() {
        for (kind, v) in [
            (LeafKind::Fixed(DType::I16), Value::Int(-300)),
            (LeafKind::Fixed(DType::U32), Value::UInt(4_000_000_000)),
            (LeafKind::Fixed(DType::F32), Value::Float(-1.5)),
            (LeafKind::Fixed(DType::F64), Value::Float(0.1)),
            (LeafKind::VarStr, Value::Str("héllo".into())),
            (LeafKind::VarBytes, Value::Bytes(vec![0, 255])),
        ] {
            let c = coerce(kind, &v).unwrap();
            let mut b = Vec::new();
            encode(kind, &c, &mut b);
            assert_eq!(decode(kind, &b).unwrap(), c);
            assert_eq!(cmp_stored(kind, &b, &c).unwrap(), Ordering::Equal);
        }
        assert!(coerce(LeafKind::Fixed(DType::I8), &Value::Int(200)).is_err());
        assert!(coerce(LeafKind::Fixed(DType::U8), &Value::Int(-1)).is_err());
        assert_eq!(
            coerce(LeafKind::Fixed(DType::U8), &Value::Int(7)).unwrap(),
            Value::UInt(7)
        );
        assert!(Value::Float(-0.0) < Value::Float(0.0));
        assert!(Value::Str("a".into()) < Value::Str("ab".into()));
    }

    #[test]
    fn hash_is_fixed() {
        // Golden values: the hash is part of the on-disk format.
        assert_eq!(hash64(b""), mix(0x243f_6a88_85a3_08d3));
        assert_ne!(hash64(b"a"), hash64(b"a\0"));
        assert_ne!(hash64(&1i64.to_le_bytes()), hash64(&2i64.to_le_bytes()));
    }
}
