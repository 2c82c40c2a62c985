//! Printing elements for people (plain text, numpy-like summaries with `...`) and as JSON.

use blz::DType;
use num_complex::Complex;
use std::io::Write;

/// Positions shown at each end of a summarised axis (rows of a table, or any axis of an
/// array), as numpy's `edgeitems`.
pub(crate) const EDGE: u64 = 3;

fn float_text(x: f64, shortest: impl Fn() -> String) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x.is_infinite() {
        if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else {
        shortest()
    }
}

fn ne<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

fn complex_text(re: String, im: String) -> String {
    if im.starts_with('-') {
        format!("{re}{im}j")
    } else {
        format!("{re}+{im}j")
    }
}

/// Decodes a native-endian string element (`S<n>` or `U<n>`).
pub fn text_of(b: &[u8], dtype: DType) -> String {
    match dtype {
        DType::Bytes(n) => {
            let v = &b[..n];
            let end = v.iter().rposition(|&c| c != 0).map_or(0, |p| p + 1);
            String::from_utf8_lossy(&v[..end]).into_owned()
        }
        DType::Str(n) => b[..4 * n]
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .take_while(|&u| u != 0)
            .map(|u| char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect(),
        _ => String::new(),
    }
}

/// The shortest decimal text that reads back as the same float16 (numpy's repr: `0.1`
/// for the float16 nearest 0.1).
fn f16_shortest(x: half::f16) -> String {
    let v = x.to_f64();
    for digits in 1..=5 {
        let s = format!("{v:.*e}", digits - 1);
        if let Ok(p) = s.parse::<f64>() {
            if half::f16::from_f64(p) == x {
                return format!("{p:?}");
            }
        }
    }
    format!("{v:?}")
}

/// One native-endian element as text: integers plainly, floats in their shortest exact form
/// (`0.1`, `1e-7`, `nan`, `inf`), complex as `1.0+2.0j`, bool as `true`/`false`, strings raw
/// (or JSON-quoted when `quote`).
pub fn element_text(b: &[u8], dtype: DType, quote: bool) -> String {
    let f32s = |x: f32| float_text(f64::from(x), || format!("{x:?}"));
    let f64s = |x: f64| float_text(x, || format!("{x:?}"));
    match dtype {
        DType::Bool => (b[0] != 0).to_string(),
        DType::I8 => i8::from_ne_bytes(ne(b)).to_string(),
        DType::I16 => i16::from_ne_bytes(ne(b)).to_string(),
        DType::I32 => i32::from_ne_bytes(ne(b)).to_string(),
        DType::I64 => i64::from_ne_bytes(ne(b)).to_string(),
        DType::U8 => b[0].to_string(),
        DType::U16 => u16::from_ne_bytes(ne(b)).to_string(),
        DType::U32 => u32::from_ne_bytes(ne(b)).to_string(),
        DType::U64 => u64::from_ne_bytes(ne(b)).to_string(),
        DType::F16 => {
            let x = half::f16::from_ne_bytes(ne(b));
            float_text(x.to_f64(), || f16_shortest(x))
        }
        DType::F32 => f32s(f32::from_ne_bytes(ne(b))),
        DType::F64 => f64s(f64::from_ne_bytes(ne(b))),
        // numpy's str of the element: ISO 8601 text, `5 days`, `NaT`.
        DType::DateTime(u) => blz::datetime::format_datetime(i64::from_ne_bytes(ne(b)), u),
        DType::TimeDelta(u) => blz::datetime::format_timedelta(i64::from_ne_bytes(ne(b)), u),
        DType::C64 => {
            let c = Complex::new(f32::from_ne_bytes(ne(b)), f32::from_ne_bytes(ne(&b[4..])));
            complex_text(f32s(c.re), f32s(c.im))
        }
        DType::C128 => {
            let c = Complex::new(f64::from_ne_bytes(ne(b)), f64::from_ne_bytes(ne(&b[8..])));
            complex_text(f64s(c.re), f64s(c.im))
        }
        DType::Bytes(_) | DType::Str(_) => {
            let s = text_of(b, dtype);
            if quote {
                serde_json::Value::String(s).to_string()
            } else {
                s
            }
        }
    }
}

/// One native-endian element as JSON. Floats keep their shortest form (a float32 0.1 is
/// `0.1`); NaN and infinities, which JSON lacks, become the strings `"nan"`, `"inf"`,
/// `"-inf"` (which blz also accepts as fill values); complex numbers are `[re, im]`.
pub fn element_json(b: &[u8], dtype: DType) -> serde_json::Value {
    use serde_json::Value;
    let num = |x: f64, text: String| {
        if x.is_finite() {
            text.parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map_or(Value::String(text), Value::Number)
        } else {
            Value::String(float_text(x, String::new))
        }
    };
    let f32v = |x: f32| num(f64::from(x), format!("{x:?}"));
    let f64v = |x: f64| num(x, format!("{x:?}"));
    match dtype {
        DType::Bool => Value::Bool(b[0] != 0),
        DType::I8 => i8::from_ne_bytes(ne(b)).into(),
        DType::I16 => i16::from_ne_bytes(ne(b)).into(),
        DType::I32 => i32::from_ne_bytes(ne(b)).into(),
        DType::I64 => i64::from_ne_bytes(ne(b)).into(),
        DType::U8 => b[0].into(),
        DType::U16 => u16::from_ne_bytes(ne(b)).into(),
        DType::U32 => u32::from_ne_bytes(ne(b)).into(),
        DType::U64 => u64::from_ne_bytes(ne(b)).into(),
        DType::F16 => {
            let x = half::f16::from_ne_bytes(ne(b));
            num(x.to_f64(), f16_shortest(x))
        }
        DType::F32 => f32v(f32::from_ne_bytes(ne(b))),
        DType::F64 => f64v(f64::from_ne_bytes(ne(b))),
        // Dates as ISO 8601 text, durations as their count of the unit; NaT as "NaT".
        DType::DateTime(u) => {
            Value::String(blz::datetime::format_datetime(i64::from_ne_bytes(ne(b)), u))
        }
        DType::TimeDelta(_) => match i64::from_ne_bytes(ne(b)) {
            blz::dtype::NAT => Value::String("NaT".into()),
            x => x.into(),
        },
        DType::C64 => Value::Array(vec![
            f32v(f32::from_ne_bytes(ne(b))),
            f32v(f32::from_ne_bytes(ne(&b[4..]))),
        ]),
        DType::C128 => Value::Array(vec![
            f64v(f64::from_ne_bytes(ne(b))),
            f64v(f64::from_ne_bytes(ne(&b[8..]))),
        ]),
        DType::Bytes(_) | DType::Str(_) => Value::String(text_of(b, dtype)),
    }
}

/// Nested JSON arrays for native-endian elements in C order over `shape`.
pub fn to_json(data: &[u8], shape: &[usize], dtype: DType) -> serde_json::Value {
    let isz = dtype.itemsize();
    match shape {
        [] => element_json(data, dtype),
        [n, rest @ ..] => {
            let sub = rest.iter().product::<usize>() * isz;
            serde_json::Value::Array(
                (0..*n)
                    .map(|i| to_json(&data[i * sub..(i + 1) * sub], rest, dtype))
                    .collect(),
            )
        }
    }
}

/// Renders elements as lines of text. `shape` is the shape of the block held by `data`;
/// `gaps[ax] == Some(g)` marks that the values shown on axis `ax` skip some before position
/// `g` (printed as `...`).
pub struct Text<'w, W: Write> {
    /// Where the lines go.
    pub out: &'w mut W,
    /// Element type.
    pub dtype: DType,
    /// Rank of the whole output (0 for one element).
    pub rank: usize,
    /// Entries of axis 0 printed so far (for separators between blocks).
    pub printed: u64,
}

impl<W: Write> Text<'_, W> {
    /// Prints a batch of entries along axis 0 (for rank 0: the element). `shape[0]` is the
    /// number of entries in `data`; `first` is the position of the first of them among the
    /// shown entries, which is where a gap on axis 0 is detected.
    pub fn entries(
        &mut self,
        data: &[u8],
        shape: &[usize],
        gaps: &[Option<usize>],
        first: usize,
    ) -> std::io::Result<()> {
        let isz = self.dtype.itemsize();
        if self.rank == 0 {
            writeln!(self.out, "{}", element_text(data, self.dtype, false))?;
            return Ok(());
        }
        let sub = shape[1..].iter().product::<usize>() * isz;
        for i in 0..shape[0] {
            let pos = first + i;
            if gaps[0] == Some(pos) {
                writeln!(self.out, "...")?;
                if self.rank >= 3 {
                    writeln!(self.out)?;
                }
            } else if self.rank >= 3 && self.printed > 0 {
                writeln!(self.out)?;
            }
            let part = &data[i * sub..(i + 1) * sub];
            if self.rank == 1 {
                writeln!(self.out, "{}", element_text(part, self.dtype, false))?;
            } else {
                self.block(part, &shape[1..], &gaps[1..])?;
            }
            self.printed += 1;
        }
        Ok(())
    }

    /// A block of rank >= 1: one line for rank 1, one line per row for rank 2, blocks
    /// separated by blank lines above.
    fn block(
        &mut self,
        data: &[u8],
        shape: &[usize],
        gaps: &[Option<usize>],
    ) -> std::io::Result<()> {
        let isz = self.dtype.itemsize();
        let sub = shape[1..].iter().product::<usize>() * isz;
        if shape.len() == 1 {
            let mut line = String::new();
            for i in 0..shape[0] {
                if i > 0 {
                    line.push(' ');
                }
                if gaps[0] == Some(i) {
                    line.push_str("... ");
                }
                line.push_str(&element_text(
                    &data[i * isz..(i + 1) * isz],
                    self.dtype,
                    true,
                ));
            }
            return writeln!(self.out, "{line}");
        }
        for i in 0..shape[0] {
            if gaps[0] == Some(i) {
                writeln!(self.out, "...")?;
                if shape.len() >= 3 {
                    writeln!(self.out)?;
                }
            } else if shape.len() >= 3 && i > 0 {
                writeln!(self.out)?;
            }
            self.block(&data[i * sub..(i + 1) * sub], &shape[1..], &gaps[1..])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts() {
        assert_eq!(
            element_text(&half::f16::from_f64(0.1).to_ne_bytes(), DType::F16, false),
            "0.1"
        );
        assert_eq!(
            element_text(
                &18_262i64.to_ne_bytes(),
                DType::DateTime(blz::dtype::TimeUnit::Day),
                false
            ),
            "2020-01-01"
        );
        assert_eq!(
            element_text(
                &i64::MIN.to_ne_bytes(),
                DType::DateTime(blz::dtype::TimeUnit::Nanosecond),
                false
            ),
            "NaT"
        );
        assert_eq!(
            element_text(&0.1f32.to_ne_bytes(), DType::F32, false),
            "0.1"
        );
        assert_eq!(
            element_text(&1e300f64.to_ne_bytes(), DType::F64, false),
            "1e300"
        );
        assert_eq!(
            element_text(&f64::NAN.to_ne_bytes(), DType::F64, false),
            "nan"
        );
        let mut c = Vec::new();
        c.extend_from_slice(&1.5f64.to_ne_bytes());
        c.extend_from_slice(&(-2.0f64).to_ne_bytes());
        assert_eq!(element_text(&c, DType::C128, false), "1.5-2.0j");
        assert_eq!(
            element_json(&0.1f32.to_ne_bytes(), DType::F32).to_string(),
            "0.1"
        );
        assert_eq!(
            element_json(&f64::NEG_INFINITY.to_ne_bytes(), DType::F64),
            serde_json::json!("-inf")
        );
    }

    #[test]
    fn summary_layout() {
        let data: Vec<u8> = (0..12i32).flat_map(|x| x.to_ne_bytes()).collect();
        let mut out = Vec::new();
        let mut t = Text {
            out: &mut out,
            dtype: DType::I32,
            rank: 2,
            printed: 0,
        };
        t.entries(&data, &[3, 4], &[Some(2), Some(2)], 0).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert_eq!(s, "0 1 ... 2 3\n4 5 ... 6 7\n...\n8 9 ... 10 11\n");
    }
}
