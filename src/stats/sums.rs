//! Per-chunk sums: what `sum` and `mean` need of each chunk, recorded next to its statistics
//! (`spec/dataset.md` §14.5), and the one kernel that computes a chunk's partial sum, used
//! alike by writers (for the record) and by reductions that decode the chunk, so that a sum
//! answered from the records and a sum answered by decoding are the same bits.
//!
//! A record carries the number of values it covers: a shrink that cuts into a chunk leaves
//! the chunk's records as they were (§14.2), and a sum is used only while that number equals
//! the chunk's visible element count.

use super::record::{le_word, record_bytes, record_hex, slot};
use crate::dtype::DType;

/// The sums of the values a reader can see in one chunk.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChunkSum {
    /// How many values the sums cover (the chunk's visible element count when written).
    pub count: u64,
    /// The wrapping 64-bit sum of the values (bools as 0/1; for unsigned dtypes the same bits
    /// read as `u64`); 0 for floats.
    pub int: i64,
    /// The values converted to `f64` and summed pairwise within runs, runs added in order
    /// (the partial `sum` of floats and `mean` of every dtype; NaN when a value is NaN).
    pub float: f64,
}

impl ChunkSum {
    /// Whether two sums are the same bits (NaNs of any payload are the same).
    pub fn same(&self, other: &ChunkSum) -> bool {
        self.count == other.count
            && self.int == other.int
            && (self.float.to_bits() == other.float.to_bits()
                || (self.float.is_nan() && other.float.is_nan()))
    }
}

/// The key, inside the `blz` object of a superchunk file's metadata document, of the file's
/// sum records.
pub(crate) const SUMS_KEY: &str = "sums";
/// Encodes a chunk's sums as its record: 25 bytes as 50 lowercase hex digits.
pub(crate) fn encode_sum(sum: Option<&ChunkSum>) -> String {
    let mut b = [0u8; 25];
    if let Some(s) = sum {
        b[0] = 1;
        b[1..9].copy_from_slice(&s.count.to_le_bytes());
        b[9..17].copy_from_slice(&s.int.to_le_bytes());
        b[17..25].copy_from_slice(&s.float.to_bits().to_le_bytes());
    }
    record_hex(&b)
}

/// Decodes one sum record; `None` for an unknown or malformed one.
pub(crate) fn decode_sum(hex: &str) -> Option<ChunkSum> {
    let b = record_bytes(hex)?;
    if b[0] != 1 {
        return None;
    }
    Some(ChunkSum {
        count: le_word(&b, 1),
        int: le_word(&b, 9) as i64,
        float: f64::from_bits(le_word(&b, 17)),
    })
}

/// The sum record of slot `j` in a metadata document; `None` when it has none.
pub(crate) fn doc_sum(doc: Option<&serde_json::Value>, j: usize) -> Option<ChunkSum> {
    decode_sum(slot(doc, SUMS_KEY, j)?)
}

/// Whether a metadata document has room for sum records.
pub(crate) fn has_sums(doc: Option<&serde_json::Value>) -> bool {
    doc.and_then(|d| d.get("blz"))
        .is_some_and(|b| b.get(SUMS_KEY).is_some())
}

/// Element types a sum folds.
pub(crate) trait Summand: Copy + Default + 'static {
    /// The value as `f64`.
    fn f(self) -> f64;
    /// Wrapping conversion for integer sums (the bits of an `u64` sum are the same).
    fn wrap(self) -> i64;
    /// Whether values of this type are integers (they have an integer sum).
    const INT: bool;
}

macro_rules! summand {
    ($int:expr; $($t:ty),*) => {$(
        impl Summand for $t {
            #[inline(always)]
            fn f(self) -> f64 { self as f64 }
            #[inline(always)]
            fn wrap(self) -> i64 { self as i64 }
            const INT: bool = $int;
        }
    )*};
}
summand!(true; i8, i16, i32, i64, u8, u16, u32, u64);
summand!(false; f32, f64);

impl Summand for half::f16 {
    #[inline(always)]
    fn f(self) -> f64 {
        self.to_f64()
    }
    #[inline(always)]
    fn wrap(self) -> i64 {
        self.to_f64() as i64
    }
    const INT: bool = false;
}

/// Pairwise sum in `f64` (numpy's scheme: blocks of up to 128 summed in eight lanes, halves
/// added recursively), so the error grows with the log of the length.
pub(crate) fn pairwise<T: Summand>(v: &[T]) -> f64 {
    if v.len() <= 128 {
        let mut lanes = [0.0f64; 8];
        let mut chunks = v.chunks_exact(8);
        for c in &mut chunks {
            for (l, &x) in lanes.iter_mut().zip(c) {
                *l += x.f();
            }
        }
        let mut tail = 0.0;
        for &x in chunks.remainder() {
            tail += x.f();
        }
        ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
            + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
            + tail
    } else {
        let half = (v.len() / 2) & !7;
        let (a, b) = v.split_at(half);
        pairwise(a) + pairwise(b)
    }
}

/// The wrapping integer sum of a run, in eight lanes.
pub(crate) fn wrapping_sum<T: Summand>(run: &[T]) -> i64 {
    let mut lanes = [0i64; 8];
    let mut chunks = run.chunks_exact(8);
    for c in &mut chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l = l.wrapping_add(x.wrap());
        }
    }
    let mut s = lanes.iter().fold(0i64, |a, &l| a.wrapping_add(l));
    for &x in chunks.remainder() {
        s = s.wrapping_add(x.wrap());
    }
    s
}

/// The partial sum of one chunk (`chunk`: the whole chunk, C order over `cs`) over the
/// elements inside its `valid` extents: the one kernel of writers and reductions. The runs
/// are the visible prefix when only axis 0 is cut, otherwise the visible part of each row
/// of the last axis; `float` adds each run's pairwise sum to 0.0 in order.
pub(crate) fn chunk_sum<T: Summand>(chunk: &[T], cs: &[u64], valid: &[u64]) -> ChunkSum {
    let count: u64 = valid.iter().product();
    let mut out = ChunkSum {
        count,
        int: 0,
        float: 0.0,
    };
    let nd = cs.len();
    if nd == 0 || count == 0 {
        return out;
    }
    let mut add = |run: &[T]| {
        if T::INT {
            out.int = out.int.wrapping_add(wrapping_sum(run));
        }
        out.float += pairwise(run);
    };
    if valid[1..] == cs[1..] {
        add(chunk.get(..count as usize).unwrap_or(chunk));
        return out;
    }
    let row = cs[nd - 1] as usize;
    let vrow = valid[nd - 1] as usize;
    if row == 0 {
        return out;
    }
    for (r, bytes) in chunk.chunks_exact(row).enumerate() {
        let mut rem = r as u64;
        let mut inside = true;
        for ax in (0..nd - 1).rev() {
            let c = rem % cs[ax];
            rem /= cs[ax];
            inside &= c < valid[ax];
        }
        if inside {
            add(&bytes[..vrow]);
        }
    }
    out
}

fn typed_sum<T: Summand + crate::dtype::Element>(
    bytes: &[u8],
    cs: &[u64],
    valid: &[u64],
) -> ChunkSum {
    let isz = std::mem::size_of::<T>();
    // SAFETY: `T` is a plain numeric type (every bit pattern valid, no padding); `align_to`
    // only hands out the correctly aligned middle.
    let (pre, mid, post) = unsafe { bytes.align_to::<T>() };
    if pre.is_empty() && post.is_empty() {
        return chunk_sum(mid, cs, valid);
    }
    let v: Vec<T> = bytes
        .chunks_exact(isz)
        .map(|c| {
            let mut t = T::default();
            // SAFETY: as above; `c` holds exactly `size_of::<T>()` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    c.as_ptr(),
                    std::ptr::addr_of_mut!(t).cast::<u8>(),
                    isz,
                );
            }
            t
        })
        .collect();
    chunk_sum(&v, cs, valid)
}

/// [`chunk_sum`] over a chunk's native-order bytes of `dtype`; `None` for dtypes without
/// sums (complex, strings). Bools are summed as their bytes (0 or 1).
pub(crate) fn chunk_sum_bytes(
    dtype: DType,
    bytes: &[u8],
    cs: &[u64],
    valid: &[u64],
) -> Option<ChunkSum> {
    Some(match dtype {
        DType::Bool | DType::U8 => typed_sum::<u8>(bytes, cs, valid),
        DType::I8 => typed_sum::<i8>(bytes, cs, valid),
        DType::I16 => typed_sum::<i16>(bytes, cs, valid),
        DType::I32 => typed_sum::<i32>(bytes, cs, valid),
        DType::I64 => typed_sum::<i64>(bytes, cs, valid),
        DType::U16 => typed_sum::<u16>(bytes, cs, valid),
        DType::U32 => typed_sum::<u32>(bytes, cs, valid),
        DType::U64 => typed_sum::<u64>(bytes, cs, valid),
        DType::F32 => typed_sum::<f32>(bytes, cs, valid),
        DType::F64 => typed_sum::<f64>(bytes, cs, valid),
        _ => return None,
    })
}

/// The sums of `n` copies of `fill` (native order), when they do not depend on how the
/// copies are grouped into runs: a zero, NaN or infinite float, or an integer whose `n`
/// copies sum exactly in `f64`. `None` otherwise (the chunk is decoded when summed).
pub(crate) fn fill_sum(dtype: DType, fill: &[u8], n: u64) -> Option<ChunkSum> {
    let one = chunk_sum_bytes(dtype, fill, &[1], &[1])?;
    if n == 0 {
        return Some(ChunkSum {
            count: 0,
            int: 0,
            float: 0.0,
        });
    }
    let x = one.float;
    let float = if matches!(dtype, DType::F32 | DType::F64) {
        if x == 0.0 {
            0.0
        } else if x.is_nan() || x.is_infinite() {
            x
        } else {
            return None;
        }
    } else {
        // Every partial sum is an integer multiple of `x` no larger than `n * |x|`.
        let total = (x.abs() as u128).checked_mul(u128::from(n))?;
        if total > 1u128 << 53 {
            return None;
        }
        x * n as f64
    };
    Some(ChunkSum {
        count: n,
        int: one.int.wrapping_mul(n as i64),
        float,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let s = ChunkSum {
            count: 7,
            int: -3,
            float: -0.25,
        };
        let r = encode_sum(Some(&s));
        assert_eq!(r.len(), super::super::record::RECORD_HEX);
        assert_eq!(
            &r[..34],
            "010700000000000000fdffffffffffffff",
            "flags, then count 7 LE, then int -3 LE"
        );
        assert_eq!(decode_sum(&r), Some(s));
        assert_eq!(decode_sum(&encode_sum(None)), None);
    }

    #[test]
    fn cut_chunks_sum_their_visible_runs() {
        // 2 x 3 chunk, valid 2 x 2: the last column is padding.
        let v = [1i32, 2, 100, 3, 4, -100];
        let s = chunk_sum(&v, &[2, 3], &[2, 2]);
        assert_eq!((s.count, s.int, s.float), (4, 10, 10.0));
        let s = chunk_sum(&v, &[2, 3], &[1, 3]);
        assert_eq!((s.count, s.int), (3, 103));
    }

    #[test]
    fn fills_sum_only_when_exact() {
        let f = fill_sum(DType::I64, &3i64.to_ne_bytes(), 10).unwrap();
        assert_eq!((f.int, f.float), (30, 30.0));
        assert!(fill_sum(DType::F64, &0.1f64.to_ne_bytes(), 10).is_none());
        let z = fill_sum(DType::F64, &(-0.0f64).to_ne_bytes(), 10).unwrap();
        assert_eq!(z.float.to_bits(), 0.0f64.to_bits());
    }
}
