//! Where rows come from when a dataset is created or appended to: `.npy` files, one column of
//! a CSV file, or generated data (`arange`, `linspace`, a random walk, zeros). Every source
//! hands out native-endian bytes in C order, a bounded batch of rows at a time.

use blz::dtype::{put_float, put_int, value_to_bytes};
use blz::npy::NpyReader;
use blz::{DType, Endianness};
use std::path::PathBuf;

/// A stream of rows (positions along axis 0) of one dtype and row shape.
pub trait Rows {
    /// Element type.
    fn dtype(&self) -> DType;
    /// Shape of one row (empty for 1-d data).
    fn row_shape(&self) -> Vec<u64>;
    /// Total number of rows.
    fn rows(&self) -> u64;
    /// Shape of the whole input.
    fn shape(&self) -> Vec<u64> {
        let mut s = vec![self.rows()];
        s.extend(self.row_shape());
        s
    }
    /// Up to `max` further rows as native-endian bytes; `None` when exhausted.
    fn next_rows(&mut self, max: u64) -> Result<Option<(Vec<u8>, u64)>, String>;
}

impl Rows for NpyReader {
    fn dtype(&self) -> DType {
        NpyReader::dtype(self)
    }
    fn row_shape(&self) -> Vec<u64> {
        NpyReader::row_shape(self).to_vec()
    }
    fn rows(&self) -> u64 {
        NpyReader::rows(self)
    }
    fn shape(&self) -> Vec<u64> {
        self.header().shape.clone()
    }
    fn next_rows(&mut self, max: u64) -> Result<Option<(Vec<u8>, u64)>, String> {
        NpyReader::next_rows(self, max).map_err(|e| crate::failure::describe(&e))
    }
}

/// One value before it is encoded for a dtype.
#[derive(Debug, Clone, Copy)]
pub enum Scalar<'a> {
    /// An integer.
    Int(i128),
    /// A floating-point number.
    Float(f64),
    /// A truth value.
    Bool(bool),
    /// Text (for `S<n>` and `U<n>` dtypes).
    Text(&'a str),
}

impl std::fmt::Display for Scalar<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x}"),
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Text(s) => write!(f, "{s:?}"),
        }
    }
}

/// Encodes a value as one native-endian element of `dtype` into `out` (exactly the itemsize).
/// Integers must fit the type; floats stored into integer types must be whole numbers.
pub fn encode(v: Scalar<'_>, dtype: DType, out: &mut [u8]) -> Result<(), String> {
    let float = || -> Result<f64, String> {
        match v {
            Scalar::Int(i) => Ok(i as f64),
            Scalar::Float(x) => Ok(x),
            Scalar::Bool(b) => Ok(f64::from(u8::from(b))),
            Scalar::Text(_) => Err(format!("{v} is not a number")),
        }
    };
    match dtype {
        DType::Bool => {
            out[0] = match v {
                Scalar::Bool(b) => u8::from(b),
                Scalar::Int(0) => 0,
                Scalar::Int(1) => 1,
                _ => return Err(format!("{v} is not a truth value (true/false, 1/0)")),
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
                Scalar::Float(_) => return Err(format!("{v} is not a whole number ({dtype})")),
                Scalar::Bool(b) => i128::from(b),
                Scalar::Text(_) => return Err(format!("{v} is not a number")),
            };
            put_int(i, dtype, out).ok_or_else(|| format!("{v} does not fit {dtype}"))?;
        }
        DType::F32 | DType::F64 | DType::C64 | DType::C128 => {
            put_float(float()?, 0.0, dtype, out)
                .ok_or_else(|| format!("{v} does not fit {dtype}"))?;
        }
        DType::Bytes(_) | DType::Str(_) => {
            let Scalar::Text(s) = v else {
                return Err(format!("{v} is not text ({dtype})"));
            };
            let b = value_to_bytes(
                &serde_json::Value::String(s.to_string()),
                dtype,
                Endianness::native(),
            )
            .map_err(|_| format!("{v} is longer than {dtype} allows"))?;
            out.copy_from_slice(&b);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Generated data

/// Demo data generated on the fly.
#[derive(Debug, Clone)]
pub enum Generated {
    /// 0, 1, ..., n-1.
    Arange { n: u64, dtype: DType },
    /// n evenly spaced values from start to stop, both included.
    Linspace {
        start: f64,
        stop: f64,
        n: u64,
        dtype: DType,
    },
    /// A Gaussian random walk starting at 0.
    RandomWalk {
        n: u64,
        dtype: DType,
        rng: SplitMix,
        pos: f64,
    },
    /// Zeros of any shape and dtype.
    Zeros { shape: Vec<u64>, dtype: DType },
}

/// The SplitMix64 generator: tiny, fast, and fully determined by its seed.
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal value (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.unit(), self.unit());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// Rows produced by a [`Generated`] description.
#[derive(Debug)]
pub struct GenRows {
    gen: Generated,
    done: u64,
}

impl GenRows {
    /// Checks the description (dtype fits the values) and starts at row 0.
    pub fn new(gen: Generated) -> Result<GenRows, String> {
        let numeric = |dtype: DType, what: &str| -> Result<(), String> {
            if matches!(dtype, DType::Bool | DType::Bytes(_) | DType::Str(_)) {
                Err(format!("--{what} makes numbers; {dtype} cannot hold them"))
            } else {
                Ok(())
            }
        };
        match &gen {
            Generated::Arange { n, dtype } => {
                numeric(*dtype, "arange")?;
                if *n > 0 {
                    let mut b = vec![0u8; dtype.itemsize()];
                    encode(Scalar::Int(i128::from(*n - 1)), *dtype, &mut b).map_err(|_| {
                        format!("--arange {n}: values up to {} do not fit {dtype}", n - 1)
                    })?;
                }
            }
            Generated::Linspace {
                start, stop, dtype, ..
            } => {
                if !dtype.is_float() {
                    return Err(format!(
                        "--linspace makes floating-point values; use a float dtype, not {dtype}"
                    ));
                }
                if !start.is_finite() || !stop.is_finite() {
                    return Err("--linspace: START and STOP must be finite".into());
                }
            }
            Generated::RandomWalk { dtype, .. } => {
                if !dtype.is_float() {
                    return Err(format!(
                        "--random-walk makes floating-point values; use a float dtype, not {dtype}"
                    ));
                }
            }
            Generated::Zeros { shape, .. } => {
                if shape.is_empty() || shape[1..].contains(&0) {
                    return Err(format!(
                        "--zeros {}: give at least one axis, and only axis 0 may be 0",
                        shape_text(shape)
                    ));
                }
            }
        }
        Ok(GenRows { gen, done: 0 })
    }
}

/// `1000x20` for a shape.
pub fn shape_text(shape: &[u64]) -> String {
    shape
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join("x")
}

impl Rows for GenRows {
    fn dtype(&self) -> DType {
        match &self.gen {
            Generated::Arange { dtype, .. }
            | Generated::Linspace { dtype, .. }
            | Generated::RandomWalk { dtype, .. }
            | Generated::Zeros { dtype, .. } => *dtype,
        }
    }

    fn row_shape(&self) -> Vec<u64> {
        match &self.gen {
            Generated::Zeros { shape, .. } => shape[1..].to_vec(),
            _ => Vec::new(),
        }
    }

    fn rows(&self) -> u64 {
        match &self.gen {
            Generated::Arange { n, .. }
            | Generated::Linspace { n, .. }
            | Generated::RandomWalk { n, .. } => *n,
            Generated::Zeros { shape, .. } => shape[0],
        }
    }

    fn next_rows(&mut self, max: u64) -> Result<Option<(Vec<u8>, u64)>, String> {
        let k = max.min(self.rows() - self.done);
        if k == 0 {
            return Ok(None);
        }
        let dtype = self.dtype();
        let isz = dtype.itemsize();
        let row_elems: u64 = self.row_shape().iter().product();
        let mut out = vec![0u8; (k * row_elems) as usize * isz];
        let r0 = self.done;
        match &mut self.gen {
            Generated::Zeros { .. } => {}
            Generated::Arange { .. } => {
                for (j, c) in out.chunks_exact_mut(isz).enumerate() {
                    encode(Scalar::Int(i128::from(r0 + j as u64)), dtype, c)?;
                }
            }
            Generated::Linspace { start, stop, n, .. } => {
                let step = if *n > 1 {
                    (*stop - *start) / (*n - 1) as f64
                } else {
                    0.0
                };
                for (j, c) in out.chunks_exact_mut(isz).enumerate() {
                    let i = r0 + j as u64;
                    let x = if *n > 1 && i == *n - 1 {
                        *stop
                    } else {
                        *start + i as f64 * step
                    };
                    encode(Scalar::Float(x), dtype, c)?;
                }
            }
            Generated::RandomWalk { rng, pos, .. } => {
                for c in out.chunks_exact_mut(isz) {
                    encode(Scalar::Float(*pos), dtype, c)?;
                    *pos += rng.normal();
                }
            }
        }
        self.done += k;
        Ok(Some((out, k)))
    }
}

// ---------------------------------------------------------------------------------------------
// CSV

/// Which column of which CSV file, and how the file is laid out.
#[derive(Debug, Clone)]
pub struct CsvSpec {
    /// The file.
    pub path: PathBuf,
    /// Column name (from the header row) or 0-based index.
    pub column: String,
    /// Field separator.
    pub delimiter: u8,
    /// The first row is data even if it does not look like it.
    pub no_header: bool,
}

/// What a first pass over a CSV file found.
#[derive(Debug, Clone)]
pub struct CsvPlan {
    spec: CsvSpec,
    col: usize,
    header: bool,
    rows: u64,
    dtype: DType,
}

fn reader(spec: &CsvSpec) -> Result<csv::Reader<std::fs::File>, String> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(spec.delimiter)
        .from_path(&spec.path)
        .map_err(|e| format!("{}: {e}", spec.path.display()))
}

fn looks_numeric(s: &str) -> bool {
    let t = s.trim();
    t.parse::<f64>().is_ok() || t.parse::<i128>().is_ok()
}

/// Parses one field for `dtype`: integers and floats as numbers (an empty field is NaN for
/// float types), `true`/`false`/`1`/`0` for bool, the raw text for string types.
pub fn parse_field(s: &str, dtype: DType) -> Result<Scalar<'_>, String> {
    let t = s.trim();
    match dtype {
        DType::Bytes(_) | DType::Str(_) => Ok(Scalar::Text(s)),
        DType::Bool => match t.to_ascii_lowercase().as_str() {
            "true" | "1" | "t" | "yes" => Ok(Scalar::Bool(true)),
            "false" | "0" | "f" | "no" => Ok(Scalar::Bool(false)),
            _ => Err(format!("{s:?} is not a truth value (true/false, 1/0)")),
        },
        _ => {
            if t.is_empty() {
                return if dtype.is_float() {
                    Ok(Scalar::Float(f64::NAN))
                } else {
                    Err(format!("empty field cannot be stored as {dtype}"))
                };
            }
            if let Ok(i) = t.parse::<i128>() {
                return Ok(Scalar::Int(i));
            }
            t.parse::<f64>()
                .map(Scalar::Float)
                .map_err(|_| format!("{s:?} is not a number"))
        }
    }
}

fn field<'r>(rec: &'r csv::StringRecord, col: usize, spec: &CsvSpec) -> Result<&'r str, String> {
    rec.get(col).ok_or_else(|| {
        format!(
            "{}: line {}: no column {} (the row has {} fields)",
            spec.path.display(),
            rec.position().map_or(0, csv::Position::line),
            spec.column,
            rec.len()
        )
    })
}

/// First pass: finds the column and the header row, counts the rows, and checks every value
/// (inferring int64 or float64 when `dtype` is `None`).
pub fn scan(spec: &CsvSpec, dtype: Option<DType>) -> Result<CsvPlan, String> {
    let path = spec.path.display();
    let mut rdr = reader(spec)?;
    let mut records = rdr.records();
    let first = match records.next() {
        Some(r) => Some(r.map_err(|e| format!("{path}: {e}"))?),
        None => None,
    };
    let index = spec.column.trim().parse::<usize>().ok();
    let named = first
        .as_ref()
        .filter(|_| !spec.no_header)
        .and_then(|r| r.iter().position(|f| f.trim() == spec.column.trim()));
    let (col, header) = match (named, index) {
        (Some(c), _) => (c, true),
        (None, Some(i)) => {
            let header = !spec.no_header
                && match (&first, dtype) {
                    (None, _) => false,
                    (Some(_), Some(DType::Bytes(_) | DType::Str(_))) => true,
                    (Some(r), _) => r
                        .get(i)
                        .is_some_and(|f| !looks_numeric(f) && !f.trim().is_empty()),
                };
            (i, header)
        }
        (None, None) => {
            let cols = first
                .as_ref()
                .map(|r| {
                    r.iter()
                        .map(|f| format!("{:?}", f.trim()))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            return Err(if spec.no_header {
                format!(
                    "{path}: --no-header needs --column as a 0-based index, not {:?}",
                    spec.column
                )
            } else {
                format!(
                    "{path}: no column {:?} in the header row (columns: {cols})",
                    spec.column
                )
            });
        }
    };
    let mut all_int = true;
    let mut rows = 0u64;
    let mut scratch = vec![0u8; dtype.map_or(8, |d| d.itemsize())];
    let mut check = |rec: &csv::StringRecord| -> Result<(), String> {
        let f = field(rec, col, spec)?;
        let line = rec.position().map_or(0, csv::Position::line);
        let at = |e: String| format!("{path}: line {line}, column {}: {e}", spec.column);
        match dtype {
            Some(d) => encode(parse_field(f, d).map_err(at)?, d, &mut scratch).map_err(at)?,
            None => {
                let t = f.trim();
                if all_int && t.parse::<i64>().is_err() {
                    all_int = false;
                }
                if !all_int && !t.is_empty() && t.parse::<f64>().is_err() {
                    return Err(at(format!(
                        "{f:?} is not a number (give --dtype S<n> or U<n> to store text)"
                    )));
                }
            }
        }
        rows += 1;
        Ok(())
    };
    if let Some(r) = &first {
        if !header {
            check(r)?;
        }
    }
    for r in records {
        check(&r.map_err(|e| format!("{path}: {e}"))?)?;
    }
    let dtype = dtype.unwrap_or(if all_int { DType::I64 } else { DType::F64 });
    Ok(CsvPlan {
        spec: spec.clone(),
        col,
        header,
        rows,
        dtype,
    })
}

/// Second pass: the column's values as rows of a 1-d array.
pub struct CsvRows {
    plan: CsvPlan,
    rdr: csv::Reader<std::fs::File>,
    rec: csv::StringRecord,
    done: u64,
}

impl CsvRows {
    /// Reopens the file for reading the values a [`scan`] checked.
    pub fn new(plan: CsvPlan) -> Result<CsvRows, String> {
        let mut rdr = reader(&plan.spec)?;
        let mut rec = csv::StringRecord::new();
        if plan.header {
            rdr.read_record(&mut rec)
                .map_err(|e| format!("{}: {e}", plan.spec.path.display()))?;
        }
        Ok(CsvRows {
            plan,
            rdr,
            rec,
            done: 0,
        })
    }
}

impl Rows for CsvRows {
    fn dtype(&self) -> DType {
        self.plan.dtype
    }
    fn row_shape(&self) -> Vec<u64> {
        Vec::new()
    }
    fn rows(&self) -> u64 {
        self.plan.rows
    }
    fn next_rows(&mut self, max: u64) -> Result<Option<(Vec<u8>, u64)>, String> {
        let k = max.min(self.plan.rows - self.done);
        if k == 0 {
            return Ok(None);
        }
        let dtype = self.plan.dtype;
        let isz = dtype.itemsize();
        let path = self.plan.spec.path.display().to_string();
        let mut out = vec![0u8; k as usize * isz];
        for c in out.chunks_exact_mut(isz) {
            let more = self
                .rdr
                .read_record(&mut self.rec)
                .map_err(|e| format!("{path}: {e}"))?;
            if !more {
                return Err(format!("{path}: the file changed while it was read"));
            }
            let f = field(&self.rec, self.plan.col, &self.plan.spec)?;
            let line = self.rec.position().map_or(0, csv::Position::line);
            let at = |e: String| format!("{path}: line {line}: {e}");
            encode(parse_field(f, dtype).map_err(at)?, dtype, c).map_err(at)?;
        }
        self.done += k;
        Ok(Some((out, k)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding() {
        let mut b = [0u8; 1];
        assert!(encode(Scalar::Int(300), DType::U8, &mut b).is_err());
        assert!(encode(Scalar::Float(1.5), DType::I8, &mut b).is_err());
        encode(Scalar::Float(7.0), DType::I8, &mut b).unwrap();
        assert_eq!(b, [7]);
        let mut s = [0u8; 8];
        encode(Scalar::Text("hi"), DType::Str(2), &mut s).unwrap();
        assert!(encode(Scalar::Text("hey"), DType::Str(2), &mut s).is_err());
    }

    #[test]
    fn random_walk_is_deterministic() {
        let walk = |seed| {
            let mut g = GenRows::new(Generated::RandomWalk {
                n: 100,
                dtype: DType::F64,
                rng: SplitMix(seed),
                pos: 0.0,
            })
            .unwrap();
            g.next_rows(100).unwrap().unwrap().0
        };
        assert_eq!(walk(7), walk(7));
        assert_ne!(walk(7), walk(8));
    }

    #[test]
    fn linspace_ends_exactly() {
        let mut g = GenRows::new(Generated::Linspace {
            start: 0.0,
            stop: 0.3,
            n: 4,
            dtype: DType::F64,
        })
        .unwrap();
        let (b, n) = g.next_rows(10).unwrap().unwrap();
        assert_eq!(n, 4);
        let last = f64::from_ne_bytes(b[24..32].try_into().unwrap());
        assert_eq!(last, 0.3);
    }
}
