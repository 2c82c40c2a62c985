//! The values a layer column holds, their stored bytes, their order and their hash.
//!
//! Fixed-size values (integers, floats) are stored little-endian in the column's dtype;
//! variable-length values (strings, byte strings) as their bytes. Values compare by number
//! (floats by IEEE total order) or bytewise (UTF-8 byte order is code point order), and
//! hash through [`hash64`] of their stored bytes.
//!
//! A column may also hold tuples ([`ValueType::Tuple`]): fields of the types above or
//! tuples again, compared field by field as Rust orders its tuples. A tuple's *encoding*
//! (what its index entries hold and its filter hash covers) is its leaf fields in order,
//! depth first: a fixed-size field as its stored bytes, a variable-length one as its length
//! (u32, little-endian) and then its bytes. On disk each leaf field is a sub-column of its
//! own (see `spec/layer.md`).

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
    /// A tuple (tuple columns), ordered field by field.
    Tuple(Vec<Value>),
}

impl Value {
    fn rank(&self) -> u8 {
        match self {
            Value::Int(_) => 0,
            Value::UInt(_) => 1,
            Value::Float(_) => 2,
            Value::Str(_) => 3,
            Value::Bytes(_) => 4,
            Value::Tuple(_) => 5,
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
            Value::Tuple(f) => f.iter().map(Value::to_json).collect::<Vec<_>>().into(),
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
            (Value::Tuple(a), Value::Tuple(b)) => a.cmp(b),
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
            Value::Tuple(fields) => {
                write!(f, "(")?;
                for (i, v) in fields.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{v}")?;
                }
                if fields.len() == 1 {
                    write!(f, ",")?;
                }
                write!(f, ")")
            }
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

macro_rules! from_tuple {
    ($(($($t:ident $i:tt),+)),*) => {$(
        impl<$($t: Into<Value>),+> From<($($t,)+)> for Value {
            fn from(x: ($($t,)+)) -> Value {
                Value::Tuple(vec![$(x.$i.into()),+])
            }
        }
    )*};
}
from_tuple!((A 0, B 1), (A 0, B 1, C 2), (A 0, B 1, C 2, D 3), (A 0, B 1, C 2, D 3, E 4),
    (A 0, B 1, C 2, D 3, E 4, F 5));

/// Most fields a tuple type may have, and deepest nesting: bounds on what a schema (or a
/// damaged `meta/storage`) can ask a reader to build.
pub const MAX_TUPLE_FIELDS: usize = 64;
/// Deepest nesting of tuple types.
pub const MAX_TUPLE_DEPTH: usize = 8;

/// The type of a layer column's values: one leaf type, or a tuple of types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueType {
    /// Integers, floats, `varstr` or `varbytes`.
    Leaf(LeafKind),
    /// A tuple of at least one field, ordered field by field.
    Tuple(Vec<ValueType>),
}

impl From<LeafKind> for ValueType {
    fn from(k: LeafKind) -> ValueType {
        ValueType::Leaf(k)
    }
}

impl From<DType> for ValueType {
    fn from(d: DType) -> ValueType {
        ValueType::Leaf(LeafKind::Fixed(d))
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl ValueType {
    /// A tuple of these fields.
    pub fn tuple(fields: impl IntoIterator<Item = impl Into<ValueType>>) -> ValueType {
        ValueType::Tuple(fields.into_iter().map(Into::into).collect())
    }

    /// The recorded name: a leaf's name (`int64`, `varstr`, ...) or the fields' names in
    /// parentheses, separated by commas, without spaces: `(int64,(uint8,varstr))`.
    pub fn name(&self) -> String {
        match self {
            ValueType::Leaf(k) => k.name(),
            ValueType::Tuple(f) => {
                let names: Vec<String> = f.iter().map(ValueType::name).collect();
                format!("({})", names.join(","))
            }
        }
    }

    /// Parses [`name`](Self::name) (spaces around names and commas are allowed).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unknown leaf name, unbalanced parentheses, an empty
    /// tuple, more than [`MAX_TUPLE_FIELDS`] leaf fields or nesting deeper than
    /// [`MAX_TUPLE_DEPTH`].
    pub fn parse(s: &str) -> Result<ValueType> {
        let bad = |why: &str| Error::InvalidArgument(format!("bad value type {s:?}: {why}"));
        let mut p = TypeParser {
            s: s.as_bytes(),
            i: 0,
        };
        let t = p.parse(0).map_err(|why| bad(&why))?;
        p.skip_spaces();
        if p.i != p.s.len() {
            return Err(bad("unexpected text after the type"));
        }
        if t.leaves().len() > MAX_TUPLE_FIELDS {
            return Err(bad(&format!("more than {MAX_TUPLE_FIELDS} fields")));
        }
        Ok(t)
    }

    /// The leaf type of a non-tuple column.
    pub fn leaf(&self) -> Option<LeafKind> {
        match self {
            ValueType::Leaf(k) => Some(*k),
            ValueType::Tuple(_) => None,
        }
    }

    /// True for tuple types.
    pub fn is_tuple(&self) -> bool {
        matches!(self, ValueType::Tuple(_))
    }

    /// The leaf fields, depth first (a leaf type is its own one leaf): the sub-columns a
    /// tuple column is stored in.
    pub fn leaves(&self) -> Vec<LeafKind> {
        let mut out = Vec::new();
        self.collect_leaves(&mut out);
        out
    }

    fn collect_leaves(&self, out: &mut Vec<LeafKind>) {
        match self {
            ValueType::Leaf(k) => out.push(*k),
            ValueType::Tuple(f) => f.iter().for_each(|t| t.collect_leaves(out)),
        }
    }

    /// The stored size of every value, when it is fixed (leaf numbers, and tuples of them).
    pub fn fixed_size(&self) -> Option<usize> {
        match self {
            ValueType::Leaf(LeafKind::Fixed(d)) => Some(d.itemsize()),
            ValueType::Leaf(_) => None,
            ValueType::Tuple(f) => f.iter().map(ValueType::fixed_size).sum(),
        }
    }
}

struct TypeParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl TypeParser<'_> {
    fn skip_spaces(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn parse(&mut self, depth: usize) -> std::result::Result<ValueType, String> {
        self.skip_spaces();
        if self.s.get(self.i) == Some(&b'(') {
            if depth >= MAX_TUPLE_DEPTH {
                return Err(format!("tuples nested deeper than {MAX_TUPLE_DEPTH}"));
            }
            self.i += 1;
            let mut fields = Vec::new();
            loop {
                fields.push(self.parse(depth + 1)?);
                if fields.len() > MAX_TUPLE_FIELDS {
                    return Err(format!("more than {MAX_TUPLE_FIELDS} fields"));
                }
                self.skip_spaces();
                match self.s.get(self.i) {
                    Some(b',') => self.i += 1,
                    Some(b')') => {
                        self.i += 1;
                        return Ok(ValueType::Tuple(fields));
                    }
                    _ => return Err("expected ',' or ')'".into()),
                }
                // A trailing comma closes a one-field tuple: `(int64,)`.
                self.skip_spaces();
                if self.s.get(self.i) == Some(&b')') {
                    self.i += 1;
                    return Ok(ValueType::Tuple(fields));
                }
            }
        }
        let start = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|c| !matches!(c, b'(' | b')' | b',') && !c.is_ascii_whitespace())
        {
            self.i += 1;
        }
        let name = std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
        if name.is_empty() {
            return Err("expected a type name".into());
        }
        let k = LeafKind::parse(name).map_err(|e| e.to_string())?;
        check_kind(k).map_err(|e| e.to_string())?;
        Ok(ValueType::Leaf(k))
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
        LeafKind::Fixed(d) if d.is_integer() || matches!(d, DType::F32 | DType::F64) => Ok(()),
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
pub fn coerce_leaf(kind: LeafKind, v: &Value) -> Result<Value> {
    // The common cases, already canonical.
    if let (LeafKind::Fixed(DType::I64), Value::Int(_))
    | (LeafKind::Fixed(DType::U64), Value::UInt(_))
    | (LeafKind::Fixed(DType::F64), Value::Float(_)) = (kind, v)
    {
        return Ok(v.clone());
    }
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

/// The stored bytes of a number already in the canonical variant of a column of `d` (see
/// [`coerce`]), into `out` of `d`'s itemsize (at most 8).
pub(crate) fn encode_fixed(d: DType, v: &Value, out: &mut [u8]) {
    let n = out.len();
    match v {
        Value::Int(i) => out.copy_from_slice(&i.to_le_bytes()[..n]),
        Value::UInt(u) => out.copy_from_slice(&u.to_le_bytes()[..n]),
        Value::Float(x) if d == DType::F32 => out.copy_from_slice(&(*x as f32).to_le_bytes()[..n]),
        Value::Float(x) => out.copy_from_slice(&x.to_le_bytes()[..n]),
        _ => out.fill(0),
    }
}

/// The stored bytes of a value already in the column's canonical variant (see [`coerce`]).
pub(crate) fn encode_leaf(kind: LeafKind, v: &Value, out: &mut Vec<u8>) {
    match (kind, v) {
        (LeafKind::Fixed(d), Value::Int(_) | Value::UInt(_) | Value::Float(_))
            if d.itemsize() <= 8 =>
        {
            let at = out.len();
            out.resize(at + d.itemsize(), 0);
            encode_fixed(d, v, &mut out[at..]);
        }
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
pub(crate) fn decode_leaf(kind: LeafKind, b: &[u8]) -> std::result::Result<Value, String> {
    // The common 8-byte numbers directly.
    if let (LeafKind::Fixed(d), Ok(a)) = (kind, <[u8; 8]>::try_from(b)) {
        match d {
            DType::I64 => return Ok(Value::Int(i64::from_le_bytes(a))),
            DType::U64 => return Ok(Value::UInt(u64::from_le_bytes(a))),
            DType::F64 => return Ok(Value::Float(f64::from_le_bytes(a))),
            _ => {}
        }
    }
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
fn cmp_stored_leaf(kind: LeafKind, b: &[u8], v: &Value) -> std::result::Result<Ordering, String> {
    if let (LeafKind::Fixed(DType::U64), Value::UInt(x), Ok(a)) = (kind, v, <[u8; 8]>::try_from(b))
    {
        return Ok(u64::from_le_bytes(a).cmp(x));
    }
    if let (LeafKind::Fixed(DType::I64), Value::Int(x), Ok(a)) = (kind, v, <[u8; 8]>::try_from(b)) {
        return Ok(i64::from_le_bytes(a).cmp(x));
    }
    match v {
        Value::Str(s) => Ok(b.cmp(s.as_bytes())),
        Value::Bytes(x) => Ok(b.cmp(x.as_slice())),
        _ => Ok(decode_leaf(kind, b)?.cmp(v)),
    }
}

/// Checks that a column can hold values of `ty` (see [`check_kind`] for its leaves).
///
/// # Errors
/// [`Error::InvalidArgument`] for an unsupported leaf type, an empty tuple, or more fields
/// or deeper nesting than [`MAX_TUPLE_FIELDS`] and [`MAX_TUPLE_DEPTH`] allow.
pub fn check_type(ty: &ValueType) -> Result<()> {
    fn walk(ty: &ValueType, depth: usize) -> Result<()> {
        match ty {
            ValueType::Leaf(k) => check_kind(*k),
            ValueType::Tuple(f) if f.is_empty() => Err(Error::InvalidArgument(
                "a tuple type needs at least one field".into(),
            )),
            ValueType::Tuple(_) if depth >= MAX_TUPLE_DEPTH => Err(Error::InvalidArgument(
                format!("tuple types nest at most {MAX_TUPLE_DEPTH} deep"),
            )),
            ValueType::Tuple(f) => f.iter().try_for_each(|t| walk(t, depth + 1)),
        }
    }
    walk(ty, 0)?;
    if ty.leaves().len() > MAX_TUPLE_FIELDS {
        return Err(Error::InvalidArgument(format!(
            "a tuple type has at most {MAX_TUPLE_FIELDS} leaf fields"
        )));
    }
    Ok(())
}

/// Converts `v` to the canonical form of a value of `ty` (see [`coerce_leaf`]; a tuple
/// field by field).
///
/// # Errors
/// [`Error::InvalidArgument`] when `v` does not fit: a field that does not fit, a tuple of
/// another length, a tuple for a leaf type or a leaf value for a tuple type.
pub fn coerce(ty: &ValueType, v: &Value) -> Result<Value> {
    match (ty, v) {
        (ValueType::Leaf(k), _) => coerce_leaf(*k, v),
        (ValueType::Tuple(f), Value::Tuple(x)) if f.len() == x.len() => Ok(Value::Tuple(
            f.iter()
                .zip(x)
                .map(|(t, v)| coerce(t, v))
                .collect::<Result<_>>()?,
        )),
        _ => Err(Error::InvalidArgument(format!(
            "value {v} does not fit a {} column",
            ty.name()
        ))),
    }
}

/// The stored bytes of a value already in canonical form (see [`coerce`]): a leaf's
/// stored bytes, or a tuple's encoding (see the module documentation).
pub(crate) fn encode(ty: &ValueType, v: &Value, out: &mut Vec<u8>) {
    match (ty, v) {
        (ValueType::Leaf(k), _) => encode_leaf(*k, v, out),
        (ValueType::Tuple(f), Value::Tuple(x)) => encode_fields(f, x, out),
        // Not reached for coerced values.
        (ValueType::Tuple(_), other) => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

fn encode_fields(types: &[ValueType], vals: &[Value], out: &mut Vec<u8>) {
    for (t, v) in types.iter().zip(vals) {
        match (t, v) {
            (ValueType::Tuple(f), Value::Tuple(x)) => encode_fields(f, x, out),
            (ValueType::Leaf(k @ LeafKind::Fixed(_)), _) => encode_leaf(*k, v, out),
            (ValueType::Leaf(k), _) => {
                let at = out.len();
                out.extend_from_slice(&[0; 4]);
                encode_leaf(*k, v, out);
                let n = (out.len() - at - 4) as u32;
                out[at..at + 4].copy_from_slice(&n.to_le_bytes());
            }
            // Not reached for coerced values.
            (ValueType::Tuple(_), _) => {}
        }
    }
}

/// Decodes stored bytes of a value of `ty` (see [`encode`]).
///
/// # Errors
/// A description of the problem (wrong length, invalid UTF-8); the caller names the chunk.
pub(crate) fn decode(ty: &ValueType, b: &[u8]) -> std::result::Result<Value, String> {
    match ty {
        ValueType::Leaf(k) => decode_leaf(*k, b),
        ValueType::Tuple(f) => {
            let mut pos = 0;
            let v = decode_fields(f, b, &mut pos)?;
            if pos != b.len() {
                return Err(format!(
                    "tuple value of {} bytes holds {} more after its fields",
                    b.len(),
                    b.len() - pos
                ));
            }
            Ok(Value::Tuple(v))
        }
    }
}

fn decode_fields(
    types: &[ValueType],
    b: &[u8],
    pos: &mut usize,
) -> std::result::Result<Vec<Value>, String> {
    let mut out = Vec::with_capacity(types.len());
    for t in types {
        out.push(match t {
            ValueType::Tuple(f) => Value::Tuple(decode_fields(f, b, pos)?),
            ValueType::Leaf(k) => {
                let r = leaf_range(*k, b, *pos)?;
                *pos = r.end;
                decode_leaf(*k, &b[r])?
            }
        });
    }
    Ok(out)
}

/// Where the bytes of a tuple's leaf field of `kind` that starts at `pos` of its encoding
/// lie (after the length of a variable-length field).
fn leaf_range(
    kind: LeafKind,
    b: &[u8],
    pos: usize,
) -> std::result::Result<std::ops::Range<usize>, String> {
    let short = || format!("tuple value of {} bytes ends inside a field", b.len());
    let (start, n) = match kind {
        LeafKind::Fixed(d) => (pos, d.itemsize()),
        _ => {
            let len = b.get(pos..pos + 4).ok_or_else(short)?;
            let n = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            (pos + 4, n)
        }
    };
    let end = start
        .checked_add(n)
        .filter(|&e| e <= b.len())
        .ok_or_else(short)?;
    Ok(start..end)
}

/// The bytes of each leaf field of a tuple's encoding, in order (`leaves` as
/// [`ValueType::leaves`] gives them).
///
/// # Errors
/// As [`decode`].
pub(crate) fn split_leaves<'b>(
    leaves: &[LeafKind],
    b: &'b [u8],
    out: &mut Vec<&'b [u8]>,
) -> std::result::Result<(), String> {
    out.clear();
    let mut pos = 0;
    for k in leaves {
        let r = leaf_range(*k, b, pos)?;
        pos = r.end;
        out.push(&b[r]);
    }
    if pos != b.len() {
        return Err("tuple value holds bytes after its fields".into());
    }
    Ok(())
}

/// Appends one leaf field's stored bytes to a tuple's encoding.
pub(crate) fn join_leaf(kind: LeafKind, field: &[u8], out: &mut Vec<u8>) {
    if !matches!(kind, LeafKind::Fixed(_)) {
        out.extend_from_slice(&(field.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(field);
}

/// Compares stored bytes of a value of `ty` with a canonical value.
///
/// # Errors
/// As [`decode`].
pub(crate) fn cmp_stored(
    ty: &ValueType,
    b: &[u8],
    v: &Value,
) -> std::result::Result<Ordering, String> {
    match ty {
        ValueType::Leaf(k) => cmp_stored_leaf(*k, b, v),
        ValueType::Tuple(_) => Ok(decode(ty, b)?.cmp(v)),
    }
}

/// The key of a value in an exact filter (integer leaf columns only; see
/// [`super::filter::exact_key`]).
pub(crate) fn exact_key(ty: &ValueType, b: &[u8]) -> Option<u64> {
    ty.leaf().and_then(|k| super::filter::exact_key(k, b))
}

/// True when a column of `ty` can have exact filters (integer leaf columns).
pub(crate) fn exact_capable(ty: &ValueType) -> bool {
    ty.leaf().is_some_and(super::filter::exact_capable)
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
            let ty = ValueType::Leaf(kind);
            let c = coerce(&ty, &v).unwrap();
            let mut b = Vec::new();
            encode(&ty, &c, &mut b);
            assert_eq!(decode(&ty, &b).unwrap(), c);
            assert_eq!(cmp_stored(&ty, &b, &c).unwrap(), Ordering::Equal);
        }
        assert!(coerce_leaf(LeafKind::Fixed(DType::I8), &Value::Int(200)).is_err());
        assert!(coerce_leaf(LeafKind::Fixed(DType::U8), &Value::Int(-1)).is_err());
        assert_eq!(
            coerce_leaf(LeafKind::Fixed(DType::U8), &Value::Int(7)).unwrap(),
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

    #[test]
    fn tuple_types_parse_and_name() {
        let t = ValueType::parse(" ( int64 , (uint8,varstr) ,float32) ").unwrap();
        assert_eq!(t.name(), "(int64,(uint8,varstr),float32)");
        assert_eq!(ValueType::parse(&t.name()).unwrap(), t);
        assert_eq!(t.leaves().len(), 4);
        assert_eq!(t.fixed_size(), None);
        assert_eq!(
            ValueType::parse("(int64,uint32)").unwrap().fixed_size(),
            Some(12)
        );
        assert_eq!(
            ValueType::parse("(int64,)").unwrap(),
            ValueType::tuple([DType::I64])
        );
        for bad in [
            "()",
            "(int64",
            "int64)",
            "(int64,,int8)",
            "(bool)",
            "(int64) x",
            "",
            "(S4)",
        ] {
            assert!(ValueType::parse(bad).is_err(), "{bad:?}");
        }
        let deep = format!("{}int8{}", "(".repeat(9), ")".repeat(9));
        assert!(ValueType::parse(&deep).is_err());
        let wide = format!("({})", vec!["int8"; 65].join(","));
        assert!(ValueType::parse(&wide).is_err());
        assert!(check_type(&ValueType::Tuple(vec![])).is_err());
    }

    #[test]
    fn tuples_encode_decode_and_order_as_rust_tuples() {
        let ty = ValueType::parse("(int32,(varstr,uint8),varbytes)").unwrap();
        let vals = [
            (-5i32, ("", 0u8), vec![]),
            (-5, ("", 1), vec![0u8]),
            (-5, ("a", 0), vec![]),
            (0, ("a", 0), vec![1, 2]),
            (0, ("ab", 0), vec![]),
            (7, ("", 255), vec![255]),
        ];
        let mut prev: Option<(Value, Vec<u8>)> = None;
        for (a, (b, c), d) in vals {
            let v = coerce(
                &ty,
                &Value::Tuple(vec![a.into(), (b, c).into(), d.clone().into()]),
            )
            .unwrap();
            let mut enc = Vec::new();
            encode(&ty, &v, &mut enc);
            assert_eq!(decode(&ty, &enc).unwrap(), v);
            assert_eq!(cmp_stored(&ty, &enc, &v).unwrap(), Ordering::Equal);
            let mut parts = Vec::new();
            split_leaves(&ty.leaves(), &enc, &mut parts).unwrap();
            let mut joined = Vec::new();
            for (k, p) in ty.leaves().iter().zip(&parts) {
                join_leaf(*k, p, &mut joined);
            }
            assert_eq!(joined, enc);
            if let Some((pv, penc)) = &prev {
                assert!(pv < &v, "{pv} < {v}");
                assert_eq!(cmp_stored(&ty, penc, &v).unwrap(), Ordering::Less);
            }
            prev = Some((v, enc));
        }
        // Wrong arity, wrong field type, truncated and overlong encodings.
        assert!(coerce(&ty, &Value::Tuple(vec![1i32.into()])).is_err());
        assert!(coerce(&ty, &Value::Int(1)).is_err());
        assert!(coerce(&ValueType::Leaf(LeafKind::VarStr), &(1, 2).into()).is_err());
        let (_, enc) = prev.unwrap();
        assert!(decode(&ty, &enc[..enc.len() - 1]).is_err());
        let mut long = enc.clone();
        long.push(0);
        assert!(decode(&ty, &long).is_err());
        let mut huge = vec![0u8; 4];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&ty, &huge).is_err());
    }
}
