//! Where rows come from when a dataset is created or appended to: `.npy` files and one
//! column of a CSV file (read by the library), or generated data (`arange`, `linspace`, a
//! random walk, zeros). Every source hands out native-endian bytes in C order, a bounded
//! batch of rows at a time.

use crate::failure::describe;
use blz::csv::ColumnReader;
use blz::dtype::{put_scalar, Scalar};
use blz::npy::NpyReader;
use blz::DType;

/// A stream of rows (positions along axis 0) of one dtype and row shape.
pub trait Rows {
    /// Element type.
    fn dtype(&self) -> DType;
    /// Shape of one row (empty for 1-d data).
    fn row_shape(&self) -> Vec<u64>;
    /// Total number of rows.
    fn rows(&self) -> u64;
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
    fn next_rows(&mut self, max: u64) -> Result<Option<(Vec<u8>, u64)>, String> {
        NpyReader::next_rows(self, max).map_err(|e| describe(&e))
    }
}

impl Rows for ColumnReader {
    fn dtype(&self) -> DType {
        self.plan().dtype()
    }
    fn row_shape(&self) -> Vec<u64> {
        Vec::new()
    }
    fn rows(&self) -> u64 {
        self.plan().rows()
    }
    fn next_rows(&mut self, max: u64) -> Result<Option<(Vec<u8>, u64)>, String> {
        ColumnReader::next_rows(self, max).map_err(|e| describe(&e))
    }
}

/// Encodes a value as one native-endian element of `dtype` into `out`.
fn encode(v: Scalar<'_>, dtype: DType, out: &mut [u8]) -> Result<(), String> {
    put_scalar(v, dtype, out).map_err(|e| describe(&e))
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

#[cfg(test)]
mod tests {
    use super::*;

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
