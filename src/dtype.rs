//! Element types: the dtypes a dataset can hold, their names in metadata (numpy's), and the
//! [`Element`] trait that maps Rust types onto them.

pub use crate::datetime::{TimeUnit, NAT};
use crate::error::{Error, Result};
use num_complex::Complex;
use std::fmt;
use std::str::FromStr;

/// Byte order of the elements as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Endianness {
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
}

impl Endianness {
    /// The byte order of this machine.
    pub fn native() -> Endianness {
        if cfg!(target_endian = "little") {
            Endianness::Little
        } else {
            Endianness::Big
        }
    }
}

/// The type of one element of a dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// One byte, 0 or 1.
    Bool,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// IEEE 754 binary16 (numpy `float16`).
    F16,
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary64.
    F64,
    /// Two binary32 (real, imaginary).
    C64,
    /// Two binary64 (real, imaginary).
    C128,
    /// Fixed-length byte string of n bytes, zero-padded (numpy `S<n>`).
    Bytes(usize),
    /// Fixed-length Unicode string of n code points, UCS-4, zero-padded (numpy `U<n>`).
    Str(usize),
    /// numpy `datetime64[unit]`: a signed 64-bit count of units since 1970-01-01T00:00
    /// (UTC, no zone); [`NAT`] is NaT.
    DateTime(TimeUnit),
    /// numpy `timedelta64[unit]`: a signed 64-bit count of units; [`NAT`] is NaT.
    TimeDelta(TimeUnit),
}

/// Largest fixed-length string or bytes element blz accepts (bytes per element).
pub(crate) const MAX_ITEMSIZE: usize = 1 << 20;

impl DType {
    /// Bytes per element.
    pub fn itemsize(&self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 | DType::F16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64
            | DType::U64
            | DType::F64
            | DType::C64
            | DType::DateTime(_)
            | DType::TimeDelta(_) => 8,
            DType::C128 => 16,
            DType::Bytes(n) => *n,
            DType::Str(n) => 4 * n,
        }
    }

    /// Size of the unit whose bytes are reversed to change byte order (1: nothing to swap).
    pub fn swap_unit(&self) -> usize {
        match self {
            DType::C64 => 4,
            DType::C128 => 8,
            DType::Str(_) => 4,
            DType::Bytes(_) => 1,
            other => other.itemsize(),
        }
    }

    /// The size c-blosc's shuffle filter works on (the scalar size; 1 for byte strings).
    pub fn typesize(&self) -> usize {
        self.swap_unit().clamp(1, 255)
    }

    /// True for the signed and unsigned integer types (not bool).
    pub fn is_integer(&self) -> bool {
        matches!(
            self,
            DType::I8
                | DType::I16
                | DType::I32
                | DType::I64
                | DType::U8
                | DType::U16
                | DType::U32
                | DType::U64
        )
    }

    /// True for f32, f64 and the complex types (the mantissa-truncation filter applies).
    /// float16 is apart: see [`DType::is_real_float`].
    pub fn is_float(&self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::C64 | DType::C128)
    }

    /// True for the real floating-point types: float16, float32 and float64.
    pub fn is_real_float(&self) -> bool {
        matches!(self, DType::F16 | DType::F32 | DType::F64)
    }

    /// The unit of a `datetime64` or `timedelta64` type.
    pub fn time_unit(&self) -> Option<TimeUnit> {
        match self {
            DType::DateTime(u) | DType::TimeDelta(u) => Some(*u),
            _ => None,
        }
    }

    /// True for `datetime64` and `timedelta64` types (64-bit counts with NaT).
    pub fn is_time(&self) -> bool {
        self.time_unit().is_some()
    }

    /// The name stored in metadata: `bool`, `int8`...`uint64`, `float16`, `float32`,
    /// `float64`, `complex64`, `complex128`, `S<n>`, `U<n>`, `datetime64[<unit>]`,
    /// `timedelta64[<unit>]` (numpy's names).
    pub fn name(&self) -> String {
        match self {
            DType::Bool => "bool".into(),
            DType::I8 => "int8".into(),
            DType::I16 => "int16".into(),
            DType::I32 => "int32".into(),
            DType::I64 => "int64".into(),
            DType::U8 => "uint8".into(),
            DType::U16 => "uint16".into(),
            DType::U32 => "uint32".into(),
            DType::U64 => "uint64".into(),
            DType::F16 => "float16".into(),
            DType::F32 => "float32".into(),
            DType::F64 => "float64".into(),
            DType::C64 => "complex64".into(),
            DType::C128 => "complex128".into(),
            DType::Bytes(n) => format!("S{n}"),
            DType::Str(n) => format!("U{n}"),
            DType::DateTime(u) => format!("datetime64[{u}]"),
            DType::TimeDelta(u) => format!("timedelta64[{u}]"),
        }
    }

    /// The numpy array-protocol descriptor (`<f8`, `|b1`, `>i4`, `|S10`, `<U5`) for a byte
    /// order.
    pub fn descr(&self, endian: Endianness) -> String {
        let e = if self.swap_unit() == 1 {
            '|'
        } else if endian == Endianness::Little {
            '<'
        } else {
            '>'
        };
        let code = match self {
            DType::Bool => "b1".to_string(),
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => format!("i{}", self.itemsize()),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => format!("u{}", self.itemsize()),
            DType::F16 | DType::F32 | DType::F64 => format!("f{}", self.itemsize()),
            DType::C64 | DType::C128 => format!("c{}", self.itemsize()),
            DType::Bytes(n) => format!("S{n}"),
            DType::Str(n) => format!("U{n}"),
            DType::DateTime(u) => format!("M8[{u}]"),
            DType::TimeDelta(u) => format!("m8[{u}]"),
        };
        format!("{e}{code}")
    }

    /// Parses a dtype name (`float64`, `f8`, `<f8`, `>i4`, `S10`, `|S10`, `<U5`, `int`,
    /// `float`, `str`, `float16`, `f2`, `e`, `half`, `datetime64[ns]`, `<M8[ns]`,
    /// `timedelta64[D]`, `m8[D]`...), returning the dtype and the byte order the name
    /// states, if any.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unknown name, and for the `datetime64` and
    /// `timedelta64` forms blz does not keep: a generic one without a unit (`M8`) and a
    /// multiple of a unit (`M8[5s]`).
    pub fn parse_descr(s: &str) -> Result<(DType, Option<Endianness>)> {
        let bad = || Error::InvalidArgument(format!("unknown dtype {s:?}"));
        let too_big = || {
            Error::InvalidArgument(format!(
                "dtype {s:?}: element size must be 1..={MAX_ITEMSIZE} bytes"
            ))
        };
        let (endian, body) = match s.chars().next() {
            Some('<') => (Some(Endianness::Little), &s[1..]),
            Some('>') => (Some(Endianness::Big), &s[1..]),
            Some('|') | Some('=') => (None, &s[1..]),
            _ => (None, s),
        };
        let sized = |prefix: &str| -> Option<usize> {
            body.strip_prefix(prefix)
                .and_then(|n| n.parse::<usize>().ok())
        };
        let dt = match body {
            "bool" | "b1" | "?" => DType::Bool,
            "int8" | "i1" => DType::I8,
            "int16" | "i2" => DType::I16,
            "int32" | "i4" => DType::I32,
            "int64" | "i8" | "int" => DType::I64,
            "uint8" | "u1" => DType::U8,
            "uint16" | "u2" => DType::U16,
            "uint32" | "u4" => DType::U32,
            "uint64" | "u8" => DType::U64,
            "float16" | "f2" | "e" | "half" => DType::F16,
            "float32" | "f4" => DType::F32,
            "float64" | "f8" | "float" => DType::F64,
            "complex64" | "c8" => DType::C64,
            "complex128" | "c16" | "complex" => DType::C128,
            _ if body.starts_with("datetime64")
                || body.starts_with("timedelta64")
                || body.starts_with("M8")
                || body.starts_with("m8") =>
            {
                return parse_time(s, body);
            }
            _ => {
                if let Some(n) = sized("S").or_else(|| sized("bytes")) {
                    DType::Bytes(n)
                } else if let Some(n) = sized("U").or_else(|| sized("str")) {
                    // Four bytes a character: refuse lengths whose size would overflow.
                    if n > MAX_ITEMSIZE / 4 {
                        return Err(too_big());
                    }
                    DType::Str(n)
                } else {
                    return Err(bad());
                }
            }
        };
        if dt.itemsize() == 0 || dt.itemsize() > MAX_ITEMSIZE {
            return Err(too_big());
        }
        Ok((dt, endian))
    }
}

/// Parses the body of a `datetime64`/`timedelta64` descriptor (`M8[ns]`, `timedelta64[D]`).
fn parse_time(s: &str, body: &str) -> Result<(DType, Option<Endianness>)> {
    let (endian, _) = match s.chars().next() {
        Some('<') => (Some(Endianness::Little), ()),
        Some('>') => (Some(Endianness::Big), ()),
        _ => (None, ()),
    };
    let (date, rest) = if let Some(r) = body.strip_prefix("datetime64") {
        (true, r)
    } else if let Some(r) = body.strip_prefix("timedelta64") {
        (false, r)
    } else if let Some(r) = body.strip_prefix("M8") {
        (true, r)
    } else if let Some(r) = body.strip_prefix("m8") {
        (false, r)
    } else {
        return Err(Error::InvalidArgument(format!("unknown dtype {s:?}")));
    };
    let kind = if date { "datetime64" } else { "timedelta64" };
    if rest.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "dtype {s:?}: a generic {kind} without a unit cannot be stored; give one, as in {kind}[ns]"
        )));
    }
    let unit = rest
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or_else(|| Error::InvalidArgument(format!("unknown dtype {s:?}")))?;
    let digits = unit.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 {
        return Err(Error::InvalidArgument(format!(
            "dtype {s:?}: multiples of a unit ({unit}) are not kept; convert to {kind}[{}] first",
            &unit[digits..]
        )));
    }
    let u = TimeUnit::from_code(unit).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "dtype {s:?}: unknown {kind} unit {unit:?} (one of Y, M, W, D, h, m, s, ms, us, ns, ps, fs, as)"
        ))
    })?;
    Ok((
        if date {
            DType::DateTime(u)
        } else {
            DType::TimeDelta(u)
        },
        endian,
    ))
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for DType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        DType::parse_descr(s).map(|(d, _)| d)
    }
}

impl serde::Serialize for DType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> serde::Deserialize<'de> for DType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Reverses the byte order of every `unit`-byte group of `bytes` in place.
pub fn swap_bytes(bytes: &mut [u8], unit: usize) {
    if unit > 1 {
        for c in bytes.chunks_exact_mut(unit) {
            c.reverse();
        }
    }
}

/// A Rust type that can be read from and written to a dataset of a matching dtype.
///
/// # Safety
/// When [`Element::POD`] is true the type must have no padding, no invalid bit patterns, and
/// the same size as `Self::itemsize()`, with its in-memory bytes equal to the dtype's
/// native-endian encoding: blz then copies bytes straight into `[Self]` buffers.
pub unsafe trait Element: Copy + Default + Send + Sync + 'static {
    /// True when values may be reinterpreted from native-endian bytes (see the trait's
    /// safety section).
    const POD: bool;
    /// True when this type can hold elements of `dtype`.
    fn accepts(dtype: &DType) -> bool;
    /// The dtype a new dataset of this type gets.
    fn dtype() -> DType;
    /// Decodes one element from native-endian bytes.
    fn from_ne_bytes(b: &[u8]) -> Self;
    /// Encodes one element as native-endian bytes into `out` (exactly the itemsize).
    fn write_ne_bytes(&self, out: &mut [u8]);
}

macro_rules! pod_element {
    ($t:ty, $d:expr) => {
        // SAFETY: a primitive numeric type: no padding, every bit pattern valid, size equal
        // to the dtype's itemsize, native-endian layout.
        unsafe impl Element for $t {
            const POD: bool = true;
            fn accepts(dtype: &DType) -> bool {
                *dtype == $d
            }
            fn dtype() -> DType {
                $d
            }
            fn from_ne_bytes(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..std::mem::size_of::<$t>()]);
                <$t>::from_ne_bytes(a)
            }
            fn write_ne_bytes(&self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_ne_bytes());
            }
        }
    };
}

pod_element!(i8, DType::I8);
pod_element!(i16, DType::I16);
pod_element!(i32, DType::I32);
pod_element!(i64, DType::I64);
pod_element!(u8, DType::U8);
pod_element!(u16, DType::U16);
pod_element!(u32, DType::U32);
pod_element!(u64, DType::U64);
pod_element!(f32, DType::F32);
pod_element!(f64, DType::F64);
pod_element!(half::f16, DType::F16);

macro_rules! time_element {
    ($t:ident, $variant:ident, $kind:literal) => {
        #[doc = concat!("One numpy `", $kind, "` element of any unit: the signed 64-bit count ")]
        #[doc = "of units as stored ([`NAT`] is NaT). numpy never mixes these with plain"]
        #[doc = "integers, so neither does blz: `i64` does not read or write them, this type"]
        #[doc = "does, whatever the unit (the dataset's dtype says which). A dataset created"]
        #[doc = "from values of this type without a dtype gets nanoseconds."]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        #[repr(transparent)]
        pub struct $t(pub i64);

        impl $t {
            /// NaT: not a time.
            pub const NAT: $t = $t(NAT);

            /// True for NaT.
            pub fn is_nat(self) -> bool {
                self.0 == NAT
            }
        }

        // SAFETY: a transparent wrapper of i64: no padding, every bit pattern valid, 8 bytes
        // in native byte order.
        unsafe impl Element for $t {
            const POD: bool = true;
            fn accepts(dtype: &DType) -> bool {
                matches!(dtype, DType::$variant(_))
            }
            fn dtype() -> DType {
                DType::$variant(TimeUnit::Nanosecond)
            }
            fn from_ne_bytes(b: &[u8]) -> Self {
                $t(<i64 as Element>::from_ne_bytes(b))
            }
            fn write_ne_bytes(&self, out: &mut [u8]) {
                self.0.write_ne_bytes(out)
            }
        }
    };
}

time_element!(Datetime64, DateTime, "datetime64");
time_element!(Timedelta64, TimeDelta, "timedelta64");

// SAFETY: bool has invalid bit patterns, so POD is false and elements go through
// from_ne_bytes, which maps any non-zero byte to true.
unsafe impl Element for bool {
    const POD: bool = false;
    fn accepts(dtype: &DType) -> bool {
        *dtype == DType::Bool
    }
    fn dtype() -> DType {
        DType::Bool
    }
    fn from_ne_bytes(b: &[u8]) -> Self {
        b[0] != 0
    }
    fn write_ne_bytes(&self, out: &mut [u8]) {
        out[0] = u8::from(*self);
    }
}

macro_rules! complex_element {
    ($t:ty, $d:expr) => {
        // SAFETY: Complex<T> is #[repr(C)] {re, im} of a float type: no padding, every bit
        // pattern valid, size twice the float's.
        unsafe impl Element for Complex<$t> {
            const POD: bool = true;
            fn accepts(dtype: &DType) -> bool {
                *dtype == $d
            }
            fn dtype() -> DType {
                $d
            }
            fn from_ne_bytes(b: &[u8]) -> Self {
                let n = std::mem::size_of::<$t>();
                Complex::new(
                    <$t as Element>::from_ne_bytes(&b[..n]),
                    <$t as Element>::from_ne_bytes(&b[n..2 * n]),
                )
            }
            fn write_ne_bytes(&self, out: &mut [u8]) {
                let n = std::mem::size_of::<$t>();
                self.re.write_ne_bytes(&mut out[..n]);
                self.im.write_ne_bytes(&mut out[n..2 * n]);
            }
        }
    };
}

complex_element!(f32, DType::C64);
complex_element!(f64, DType::C128);

// SAFETY: a byte array: no padding, every bit pattern valid, size N.
unsafe impl<const N: usize> Element for [u8; N]
where
    [u8; N]: Default,
{
    const POD: bool = true;
    fn accepts(dtype: &DType) -> bool {
        *dtype == DType::Bytes(N)
    }
    fn dtype() -> DType {
        DType::Bytes(N)
    }
    fn from_ne_bytes(b: &[u8]) -> Self {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[..N]);
        a
    }
    fn write_ne_bytes(&self, out: &mut [u8]) {
        out.copy_from_slice(self);
    }
}

/// Writes the integer `x` as one native-endian element of an integer `dtype` into `out`
/// (exactly the itemsize). Returns `None` when `x` is outside the type's range or `dtype` is
/// not an integer type.
pub(crate) fn put_int(x: i128, dtype: DType, out: &mut [u8]) -> Option<()> {
    macro_rules! int {
        ($t:ty) => {
            out.copy_from_slice(&<$t>::try_from(x).ok()?.to_ne_bytes())
        };
    }
    match dtype {
        DType::I8 => int!(i8),
        DType::I16 => int!(i16),
        DType::I32 => int!(i32),
        DType::I64 => int!(i64),
        DType::U8 => int!(u8),
        DType::U16 => int!(u16),
        DType::U32 => int!(u32),
        DType::U64 => int!(u64),
        _ => return None,
    }
    Some(())
}

/// Writes the number `re + im·i` as one native-endian element of a float or complex `dtype`
/// into `out` (exactly the itemsize); real types drop `im`. Returns `None` when `dtype` is
/// not a float or complex type.
pub(crate) fn put_float(re: f64, im: f64, dtype: DType, out: &mut [u8]) -> Option<()> {
    match dtype {
        DType::F16 => out.copy_from_slice(&half::f16::from_f64(re).to_ne_bytes()),
        DType::F32 => out.copy_from_slice(&(re as f32).to_ne_bytes()),
        DType::F64 => out.copy_from_slice(&re.to_ne_bytes()),
        DType::C64 => {
            out[..4].copy_from_slice(&(re as f32).to_ne_bytes());
            out[4..].copy_from_slice(&(im as f32).to_ne_bytes());
        }
        DType::C128 => {
            out[..8].copy_from_slice(&re.to_ne_bytes());
            out[8..].copy_from_slice(&im.to_ne_bytes());
        }
        _ => return None,
    }
    Some(())
}

/// One value on its way into an element of a dtype, as a parser found it: what
/// [`put_scalar`] takes. JSON fill values, CSV cells and layer keys all become one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar<'a> {
    /// An integer.
    Int(i128),
    /// A floating-point number.
    Float(f64),
    /// A complex number (real and imaginary parts).
    Complex(f64, f64),
    /// A truth value.
    Bool(bool),
    /// Text (for `S<n>` and `U<n>` dtypes).
    Text(&'a str),
}

impl fmt::Display for Scalar<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x}"),
            Scalar::Complex(re, im) => write!(f, "{re}{im:+}j"),
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Text(s) => write!(f, "{s:?}"),
        }
    }
}

/// Writes `v` as one native-endian element of `dtype` into `out` (exactly the itemsize):
/// the one conversion of a value into a dtype. Integers must fit the type, and floats
/// stored into integer types must be whole numbers that fit; bool takes true/false or the
/// integers 0 and 1; float and complex types take any number (a real one has no imaginary
/// part; float32 and float16 round); `S<n>` takes text of at most `n` bytes, `U<n>` of at
/// most `n` characters, padded with zeros; `datetime64` takes ISO 8601 text
/// ([`crate::datetime::parse_datetime`]), `NaT`, or an integer count of its unit;
/// `timedelta64` takes an integer count of its unit or `NaT`.
///
/// # Errors
/// [`Error::InvalidArgument`] saying why `v` does not fit `dtype`.
pub fn put_scalar(v: Scalar<'_>, dtype: DType, out: &mut [u8]) -> Result<()> {
    let fail = |why: String| Err(Error::InvalidArgument(why));
    if out.len() != dtype.itemsize() {
        return fail(format!(
            "{} bytes given for one {dtype} element of {}",
            out.len(),
            dtype.itemsize()
        ));
    }
    let not_number = || fail(format!("{v} is not a number"));
    match dtype {
        DType::Bool => {
            out[0] = match v {
                Scalar::Bool(b) => u8::from(b),
                Scalar::Int(0) => 0,
                Scalar::Int(1) => 1,
                _ => return fail(format!("{v} is not a truth value (true/false, 1/0)")),
            }
        }
        DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64 => {
            let i: i128 = match v {
                Scalar::Int(i) => i,
                Scalar::Float(x) if x.fract() == 0.0 && x.abs() < 1e38 => x as i128,
                Scalar::Float(_) | Scalar::Complex(..) => {
                    return fail(format!("{v} is not a whole number ({dtype})"))
                }
                Scalar::Bool(b) => i128::from(b),
                Scalar::Text(_) => return not_number(),
            };
            if put_int(i, dtype, out).is_none() {
                return fail(format!("{v} does not fit {dtype}"));
            }
        }
        DType::DateTime(_) | DType::TimeDelta(_) => {
            let x: i64 = match v {
                Scalar::Text(t) if t.trim().eq_ignore_ascii_case("nat") => NAT,
                Scalar::Text(t) => match dtype {
                    DType::DateTime(u) => crate::datetime::parse_datetime(t, u)?,
                    _ => return fail(format!("{v} is not a count of {dtype}'s unit")),
                },
                Scalar::Int(i) => match i64::try_from(i) {
                    Ok(x) if x != NAT => x,
                    _ => return fail(format!("{v} does not fit {dtype}")),
                },
                Scalar::Float(x) if x.fract() == 0.0 && x.abs() < 9.2e18 => x as i64,
                _ => return fail(format!("{v} is not a {dtype}")),
            };
            out.copy_from_slice(&x.to_ne_bytes());
        }
        DType::F16 | DType::F32 | DType::F64 | DType::C64 | DType::C128 => {
            let (re, im) = match v {
                Scalar::Int(i) => (i as f64, 0.0),
                Scalar::Float(x) => (x, 0.0),
                Scalar::Complex(re, im) if matches!(dtype, DType::C64 | DType::C128) => (re, im),
                Scalar::Complex(..) => return fail(format!("{v} is not a real number")),
                Scalar::Bool(b) => (f64::from(u8::from(b)), 0.0),
                Scalar::Text(_) => return not_number(),
            };
            if put_float(re, im, dtype, out).is_none() {
                return fail(format!("{v} does not fit {dtype}"));
            }
        }
        DType::Bytes(n) | DType::Str(n) => {
            let Scalar::Text(s) = v else {
                return fail(format!("{v} is not text ({dtype})"));
            };
            let long = if matches!(dtype, DType::Bytes(_)) {
                s.len() > n
            } else {
                s.chars().count() > n
            };
            if long {
                return fail(format!("{v} is longer than {dtype} allows"));
            }
            out.fill(0);
            if matches!(dtype, DType::Bytes(_)) {
                out[..s.len()].copy_from_slice(s.as_bytes());
            } else {
                for (c, o) in s.chars().zip(out.chunks_exact_mut(4)) {
                    o.copy_from_slice(&(c as u32).to_ne_bytes());
                }
            }
        }
    }
    Ok(())
}

/// Converts a JSON value to one element's bytes in the given byte order (for fill values):
/// numbers, `true`/`false` (a non-zero number is true), `null` for zero, `"nan"`, `"inf"` and
/// `"-inf"` for floats, `[re, im]` for complex numbers, strings for `S<n>` and `U<n>`, ISO
/// 8601 strings or integer counts for `datetime64`, integer counts for `timedelta64`, and
/// `"NaT"` for both; then [`put_scalar`].
///
/// # Errors
/// [`Error::InvalidArgument`] when the value does not fit the dtype.
pub fn value_to_bytes(v: &serde_json::Value, dtype: DType, endian: Endianness) -> Result<Vec<u8>> {
    use serde_json::Value;
    let bad = || Error::InvalidArgument(format!("fill value {v} does not fit dtype {dtype}"));
    let float = |v: &Value| -> Result<f64> {
        match v {
            Value::Number(n) => n.as_f64().ok_or_else(bad),
            Value::Null => Ok(0.0),
            Value::String(s) if s.eq_ignore_ascii_case("nan") => Ok(f64::NAN),
            Value::String(s) if s.eq_ignore_ascii_case("inf") => Ok(f64::INFINITY),
            Value::String(s) if s.eq_ignore_ascii_case("-inf") => Ok(f64::NEG_INFINITY),
            _ => Err(bad()),
        }
    };
    let scalar = match dtype {
        DType::Bool => Scalar::Bool(match v {
            Value::Bool(b) => *b,
            Value::Number(n) => n.as_f64() != Some(0.0),
            Value::Null => false,
            _ => return Err(bad()),
        }),
        DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64 => Scalar::Int(match v {
            // JSON integers only: a fill value of 1.0 for an integer dtype is refused.
            Value::Number(n) => n
                .as_i64()
                .map(i128::from)
                .or_else(|| n.as_u64().map(i128::from))
                .ok_or_else(bad)?,
            Value::Bool(b) => i128::from(*b),
            Value::Null => 0,
            _ => return Err(bad()),
        }),
        DType::DateTime(_) | DType::TimeDelta(_) => match v {
            Value::Number(n) => Scalar::Int(n.as_i64().map(i128::from).ok_or_else(bad)?),
            Value::String(s) => Scalar::Text(s.as_str()),
            Value::Null => Scalar::Int(0),
            _ => return Err(bad()),
        },
        DType::F16 | DType::F32 | DType::F64 | DType::C64 | DType::C128 => match v {
            Value::Array(a) if a.len() == 2 && matches!(dtype, DType::C64 | DType::C128) => {
                Scalar::Complex(float(&a[0])?, float(&a[1])?)
            }
            other => Scalar::Float(float(other)?),
        },
        DType::Bytes(_) | DType::Str(_) => Scalar::Text(match v {
            Value::String(s) => s.as_str(),
            Value::Null => "",
            _ => return Err(bad()),
        }),
    };
    let mut out = vec![0u8; dtype.itemsize()];
    put_scalar(scalar, dtype, &mut out).map_err(|_| bad())?;
    if endian != Endianness::native() {
        swap_bytes(&mut out, dtype.swap_unit());
    }
    Ok(out)
}

/// Decodes one element's bytes (in the given byte order) to a JSON value, for display:
/// `datetime64` as numpy's ISO text, `timedelta64` as its integer count, NaT as `"NaT"`.
pub fn bytes_to_value(b: &[u8], dtype: DType, endian: Endianness) -> serde_json::Value {
    use serde_json::{json, Value};
    let mut v = b[..dtype.itemsize()].to_vec();
    if endian != Endianness::native() {
        swap_bytes(&mut v, dtype.swap_unit());
    }
    let f = |x: f64| {
        serde_json::Number::from_f64(x).map_or_else(|| json!(x.to_string()), Value::Number)
    };
    match dtype {
        DType::Bool => json!(v[0] != 0),
        DType::I8 => json!(i8::from_ne_bytes(v[..1].try_into().unwrap_or_default())),
        DType::I16 => json!(i16::from_ne_bytes(v[..2].try_into().unwrap_or_default())),
        DType::I32 => json!(i32::from_ne_bytes(v[..4].try_into().unwrap_or_default())),
        DType::I64 => json!(i64::from_ne_bytes(v[..8].try_into().unwrap_or_default())),
        DType::U8 => json!(v[0]),
        DType::U16 => json!(u16::from_ne_bytes(v[..2].try_into().unwrap_or_default())),
        DType::U32 => json!(u32::from_ne_bytes(v[..4].try_into().unwrap_or_default())),
        DType::U64 => json!(u64::from_ne_bytes(v[..8].try_into().unwrap_or_default())),
        DType::F16 => f(half::f16::from_ne_bytes(v[..2].try_into().unwrap_or_default()).to_f64()),
        DType::F32 => f(f64::from(f32::from_ne_bytes(
            v[..4].try_into().unwrap_or_default(),
        ))),
        DType::DateTime(u) => json!(crate::datetime::format_datetime(
            i64::from_ne_bytes(v[..8].try_into().unwrap_or_default()),
            u
        )),
        DType::TimeDelta(u) => {
            let x = i64::from_ne_bytes(v[..8].try_into().unwrap_or_default());
            if x == NAT {
                json!("NaT")
            } else {
                let _ = u;
                json!(x)
            }
        }
        DType::F64 => f(f64::from_ne_bytes(v[..8].try_into().unwrap_or_default())),
        DType::C64 => json!([
            f(f64::from(f32::from_ne_bytes(
                v[..4].try_into().unwrap_or_default()
            ))),
            f(f64::from(f32::from_ne_bytes(
                v[4..8].try_into().unwrap_or_default()
            )))
        ]),
        DType::C128 => json!([
            f(f64::from_ne_bytes(v[..8].try_into().unwrap_or_default())),
            f(f64::from_ne_bytes(v[8..16].try_into().unwrap_or_default()))
        ]),
        DType::Bytes(_) => {
            let end = v.iter().rposition(|&c| c != 0).map_or(0, |p| p + 1);
            json!(String::from_utf8_lossy(&v[..end]))
        }
        DType::Str(_) => {
            let s: String = v
                .chunks_exact(4)
                .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .take_while(|&u| u != 0)
                .map(|u| char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect();
            json!(s)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_into_dtypes() {
        let mut b = [0u8; 1];
        assert!(put_scalar(Scalar::Int(300), DType::U8, &mut b).is_err());
        assert!(put_scalar(Scalar::Float(1.5), DType::I8, &mut b).is_err());
        assert!(put_scalar(Scalar::Text("7"), DType::I8, &mut b).is_err());
        put_scalar(Scalar::Float(7.0), DType::I8, &mut b).unwrap();
        assert_eq!(b, [7]);
        put_scalar(Scalar::Int(1), DType::Bool, &mut b).unwrap();
        assert_eq!(b, [1]);
        assert!(put_scalar(Scalar::Int(2), DType::Bool, &mut b).is_err());
        let mut s = [0xffu8; 8];
        put_scalar(Scalar::Text("hi"), DType::Str(2), &mut s).unwrap();
        assert_eq!(
            bytes_to_value(&s, DType::Str(2), Endianness::native()),
            "hi"
        );
        assert!(put_scalar(Scalar::Text("hey"), DType::Str(2), &mut s).is_err());
        let mut s = [0xffu8; 3];
        put_scalar(Scalar::Text("ab"), DType::Bytes(3), &mut s).unwrap();
        assert_eq!(s, *b"ab\0");
        let mut f = [0u8; 4];
        put_scalar(Scalar::Int(3), DType::F32, &mut f).unwrap();
        assert_eq!(f, 3f32.to_ne_bytes());
        assert!(put_scalar(Scalar::Complex(1.0, 2.0), DType::F32, &mut f).is_err());
        let mut c = [0u8; 8];
        put_scalar(Scalar::Complex(1.0, 2.0), DType::C64, &mut c).unwrap();
        assert_eq!(c[4..], 2f32.to_ne_bytes());
        // The wrong number of bytes is an error, not a panic.
        assert!(put_scalar(Scalar::Int(1), DType::I32, &mut c).is_err());
    }

    #[test]
    fn names_roundtrip() {
        let all = [
            DType::Bool,
            DType::I8,
            DType::I16,
            DType::I32,
            DType::I64,
            DType::U8,
            DType::U16,
            DType::U32,
            DType::U64,
            DType::F32,
            DType::F64,
            DType::C64,
            DType::C128,
            DType::Bytes(7),
            DType::Str(3),
            DType::F16,
            DType::DateTime(TimeUnit::Nanosecond),
            DType::TimeDelta(TimeUnit::Day),
        ];
        let all = all.into_iter().chain(
            TimeUnit::ALL
                .into_iter()
                .flat_map(|u| [DType::DateTime(u), DType::TimeDelta(u)]),
        );
        for d in all {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
            for e in [Endianness::Little, Endianness::Big] {
                let (p, pe) = DType::parse_descr(&d.descr(e)).unwrap();
                assert_eq!(p, d);
                if d.swap_unit() > 1 {
                    assert_eq!(pe, Some(e));
                }
            }
        }
        assert_eq!(DType::Str(3).itemsize(), 12);
        assert!("float128".parse::<DType>().is_err());
        assert!("S0".parse::<DType>().is_err());
        // Sizes past the limit, or past usize once multiplied by four, are errors.
        assert!("S1048577".parse::<DType>().is_err());
        assert!("U262145".parse::<DType>().is_err());
        assert!(DType::parse_descr("<U4611686018427387904").is_err());
        assert!(DType::parse_descr("<U18446744073709551615").is_err());
        assert_eq!("U262144".parse::<DType>().unwrap().itemsize(), MAX_ITEMSIZE);
    }

    #[test]
    fn numpy_time_and_half_names() {
        // numpy's names and descriptors: np.dtype(x).name / .str.
        let ns = DType::DateTime(TimeUnit::Nanosecond);
        assert_eq!(ns.name(), "datetime64[ns]");
        assert_eq!(ns.descr(Endianness::Little), "<M8[ns]");
        assert_eq!(
            DType::TimeDelta(TimeUnit::Day).descr(Endianness::Big),
            ">m8[D]"
        );
        assert_eq!(DType::F16.descr(Endianness::Little), "<f2");
        assert_eq!((DType::F16.itemsize(), DType::F16.typesize()), (2, 2));
        assert_eq!((ns.itemsize(), ns.typesize()), (8, 8));
        for (s, d) in [
            ("M8[ns]", ns),
            ("<M8[ns]", ns),
            ("datetime64[ns]", ns),
            ("=M8[ns]", ns),
            ("m8[us]", DType::TimeDelta(TimeUnit::Microsecond)),
            ("timedelta64[as]", DType::TimeDelta(TimeUnit::Attosecond)),
            ("M8[Y]", DType::DateTime(TimeUnit::Year)),
            ("M8[m]", DType::DateTime(TimeUnit::Minute)),
            ("M8[M]", DType::DateTime(TimeUnit::Month)),
            ("f2", DType::F16),
            ("e", DType::F16),
            ("half", DType::F16),
            ("<f2", DType::F16),
        ] {
            assert_eq!(s.parse::<DType>().unwrap(), d, "{s}");
        }
        for (s, why) in [
            ("M8", "generic"),
            ("datetime64", "generic"),
            ("m8", "generic"),
            ("M8[5s]", "multiples"),
            ("M8[xs]", "unknown datetime64 unit"),
            ("M8[ns", "unknown dtype"),
        ] {
            let e = s.parse::<DType>().unwrap_err().to_string();
            assert!(e.contains(why), "{s}: {e}");
        }
    }

    #[test]
    fn time_and_half_fill_values() {
        let d = DType::DateTime(TimeUnit::Day);
        let le = Endianness::Little;
        let b = value_to_bytes(&serde_json::json!("2020-01-01"), d, le).unwrap();
        assert_eq!(b, 18_262i64.to_le_bytes());
        assert_eq!(bytes_to_value(&b, d, le), "2020-01-01");
        let b = value_to_bytes(&serde_json::json!(18_262), d, le).unwrap();
        assert_eq!(b, 18_262i64.to_le_bytes());
        let b = value_to_bytes(&serde_json::json!("NaT"), d, le).unwrap();
        assert_eq!(b, NAT.to_le_bytes());
        assert_eq!(bytes_to_value(&b, d, le), "NaT");
        assert!(value_to_bytes(&serde_json::json!("2020-02-30"), d, le).is_err());
        let t = DType::TimeDelta(TimeUnit::Second);
        let b = value_to_bytes(&serde_json::json!(-5), t, Endianness::Big).unwrap();
        assert_eq!(b, (-5i64).to_be_bytes());
        assert_eq!(bytes_to_value(&b, t, Endianness::Big), -5);
        assert!(value_to_bytes(&serde_json::json!("2020-01-01"), t, le).is_err());
        let b = value_to_bytes(&serde_json::json!(1.5), DType::F16, le).unwrap();
        assert_eq!(b, half::f16::from_f32(1.5).to_le_bytes());
        assert_eq!(bytes_to_value(&b, DType::F16, le), 1.5);
        let b = value_to_bytes(&serde_json::json!("nan"), DType::F16, le).unwrap();
        assert!(half::f16::from_le_bytes([b[0], b[1]]).is_nan());
        // Newtypes accept every unit; i64 does not read dates.
        assert!(Datetime64::accepts(&DType::DateTime(TimeUnit::Year)));
        assert!(!Datetime64::accepts(&DType::TimeDelta(TimeUnit::Year)));
        assert!(!i64::accepts(&d));
        assert!(Timedelta64::NAT.is_nat());
    }

    #[test]
    fn fill_values() {
        let b = value_to_bytes(&serde_json::json!(1.5), DType::F64, Endianness::Big).unwrap();
        assert_eq!(b, 1.5f64.to_be_bytes());
        assert!(value_to_bytes(&serde_json::json!(300), DType::U8, Endianness::Little).is_err());
        let s =
            value_to_bytes(&serde_json::json!("hé"), DType::Str(3), Endianness::Little).unwrap();
        assert_eq!(bytes_to_value(&s, DType::Str(3), Endianness::Little), "hé");
        let c = value_to_bytes(
            &serde_json::json!([1.0, -2.0]),
            DType::C64,
            Endianness::Little,
        )
        .unwrap();
        assert_eq!(
            bytes_to_value(&c, DType::C64, Endianness::Little),
            serde_json::json!([1.0, -2.0])
        );
    }
}
