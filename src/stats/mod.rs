//! Per-chunk statistics: the minimum, maximum and NaN count of the values a reader can see in
//! each chunk of an N-d array or a fixed-size numeric (or bool) table column, written with
//! the chunk in the same commit (`spec/dataset.md` §14). Reading them decodes nothing: they
//! live in the metadata section of the superchunk files, which opening a file reads anyway.
//!
//! Statistics *bound* the visible values: every value a reader can see in chunk `k` lies in
//! `[min, max]` and at most `nan_count` of them are NaN. They are exact when the chunk was
//! last written (an append, a grow, a modification touching it); a shrink that cuts into a
//! chunk leaves its statistics as they were, a bound of what remains.

mod record;
pub(crate) mod sums;

use crate::dtype::DType;
pub(crate) use record::{le_word, record_bytes, record_hex, set_slot, slot, unknown_records};
pub use sums::ChunkSum;

/// One statistic value, in the widest type of the column's kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StatValue {
    /// A bool column's value.
    Bool(bool),
    /// A signed integer column's value (`int8` .. `int64`).
    Int(i64),
    /// An unsigned integer column's value (`uint8` .. `uint64`).
    UInt(u64),
    /// A float column's value (`float32` widened exactly, or `float64`); never NaN.
    Float(f64),
}

/// What is known of the values of one chunk.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChunkStats {
    /// The smallest non-NaN value; `None` when the chunk holds no non-NaN value.
    pub min: Option<StatValue>,
    /// The largest non-NaN value; `None` when the chunk holds no non-NaN value.
    pub max: Option<StatValue>,
    /// How many values are NaN (always 0 for integers and bools).
    pub nan_count: u64,
    /// The chunk's sums (`spec/dataset.md` §14.5); `None` when unknown (a file written
    /// before sums were recorded). A sum describes the visible values only while its
    /// `count` equals the chunk's visible element count (a shrink leaves it as it was).
    pub sum: Option<ChunkSum>,
}

/// The dtypes that have statistics, by the type their values are widened to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatKind {
    Bool,
    Int,
    UInt,
    Float,
}

impl StatKind {
    /// The kind of `dtype`'s statistics; `None` for dtypes without (complex, strings).
    pub(crate) fn of(dtype: DType) -> Option<StatKind> {
        Some(match dtype {
            DType::Bool => StatKind::Bool,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => StatKind::Int,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => StatKind::UInt,
            DType::F16 | DType::F32 | DType::F64 => StatKind::Float,
            // Counts of a unit; NaT is left out of the bounds and counted as `nan_count`.
            DType::DateTime(_) | DType::TimeDelta(_) => StatKind::Int,
            _ => return None,
        })
    }

    fn value(self, bits: u64) -> StatValue {
        match self {
            StatKind::Bool => StatValue::Bool(bits != 0),
            StatKind::Int => StatValue::Int(bits as i64),
            StatKind::UInt => StatValue::UInt(bits),
            StatKind::Float => StatValue::Float(f64::from_bits(bits)),
        }
    }
}

impl StatValue {
    fn bits(self) -> u64 {
        match self {
            StatValue::Bool(b) => u64::from(b),
            StatValue::Int(i) => i as u64,
            StatValue::UInt(u) => u,
            StatValue::Float(f) => f.to_bits(),
        }
    }

    /// The value as a float (for comparisons across kinds).
    pub fn as_f64(self) -> f64 {
        match self {
            StatValue::Bool(b) => f64::from(u8::from(b)),
            StatValue::Int(i) => i as f64,
            StatValue::UInt(u) => u as f64,
            StatValue::Float(f) => f,
        }
    }
}

/// The key, inside the `blz` object of a superchunk file's metadata document, of the file's
/// statistics records.
pub(crate) const STATS_KEY: &str = "stats";
/// Encodes a chunk's statistics as its record (`spec/dataset.md` §14): 25 bytes written as
/// 50 lowercase hex digits; flags bit 0 = known, bit 1 = min and max present.
pub(crate) fn encode_record(stats: Option<&ChunkStats>) -> String {
    let mut b = [0u8; 25];
    if let Some(s) = stats {
        b[0] = 1;
        if let (Some(lo), Some(hi)) = (s.min, s.max) {
            b[0] |= 2;
            b[1..9].copy_from_slice(&lo.bits().to_le_bytes());
            b[9..17].copy_from_slice(&hi.bits().to_le_bytes());
        }
        b[17..25].copy_from_slice(&s.nan_count.to_le_bytes());
    }
    record_hex(&b)
}

/// Decodes one record; `None` for an unknown or malformed one.
pub(crate) fn decode_record(kind: StatKind, hex: &str) -> Option<ChunkStats> {
    let b = record_bytes(hex)?;
    if b[0] & 1 == 0 || b[0] & !3 != 0 {
        return None;
    }
    let (min, max) = if b[0] & 2 != 0 {
        let (lo, hi) = (kind.value(le_word(&b, 1)), kind.value(le_word(&b, 9)));
        if let (StatValue::Float(l), StatValue::Float(h)) = (lo, hi) {
            if l.is_nan() || h.is_nan() {
                return None;
            }
        }
        (Some(lo), Some(hi))
    } else {
        (None, None)
    };
    Some(ChunkStats {
        min,
        max,
        nan_count: le_word(&b, 17),
        sum: None,
    })
}

/// The records of a file's first `n` chunks from its metadata document; `None` when the
/// document has none (a file written before statistics existed).
pub(crate) fn file_records(
    kind: StatKind,
    doc: Option<&serde_json::Value>,
    n: u64,
) -> Option<Vec<Option<ChunkStats>>> {
    // No records at all (rather than unknown ones) when the document has no `stats` string.
    doc?.get("blz")?.get(STATS_KEY)?.as_str()?;
    Some(
        (0..n as usize)
            .map(|j| {
                slot(doc, STATS_KEY, j)
                    .and_then(|h| decode_record(kind, h))
                    .map(|r| ChunkStats {
                        sum: sums::doc_sum(doc, j),
                        ..r
                    })
            })
            .collect(),
    )
}

/// Running statistics over values of one kind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Acc<T> {
    min: T,
    max: T,
    any: bool,
    nan: u64,
}

macro_rules! int_stats {
    ($name:ident, $t:ty, $wt:ty) => {
        fn $name(bytes: &[u8], acc: &mut Acc<$wt>) {
            let mut lo = <$t>::MAX;
            let mut hi = <$t>::MIN;
            let mut any = false;
            for c in bytes.chunks_exact(std::mem::size_of::<$t>()) {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(c);
                let v = <$t>::from_ne_bytes(a);
                lo = lo.min(v);
                hi = hi.max(v);
                any = true;
            }
            if any {
                let (lo, hi) = (lo as $wt, hi as $wt);
                if !acc.any || lo < acc.min {
                    acc.min = lo;
                }
                if !acc.any || hi > acc.max {
                    acc.max = hi;
                }
                acc.any = true;
            }
        }
    };
}
int_stats!(stats_i8, i8, i64);
int_stats!(stats_i16, i16, i64);
int_stats!(stats_i32, i32, i64);
int_stats!(stats_i64, i64, i64);
int_stats!(stats_u8, u8, u64);
int_stats!(stats_u16, u16, u64);
int_stats!(stats_u32, u32, u64);
int_stats!(stats_u64, u64, u64);

macro_rules! float_stats {
    ($name:ident, $t:ty) => {
        fn $name(bytes: &[u8], acc: &mut Acc<f64>) {
            let mut lo = <$t>::INFINITY;
            let mut hi = <$t>::NEG_INFINITY;
            let mut nan = 0u64;
            let mut n = 0u64;
            for c in bytes.chunks_exact(std::mem::size_of::<$t>()) {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(c);
                let v = <$t>::from_ne_bytes(a);
                // `min`/`max` ignore a NaN operand, so NaNs leave the bounds alone.
                lo = lo.min(v);
                hi = hi.max(v);
                nan += u64::from(v.is_nan());
                n += 1;
            }
            acc.nan += nan;
            if n > nan {
                let (lo, hi) = (f64::from(lo), f64::from(hi));
                if !acc.any || lo < acc.min {
                    acc.min = lo;
                }
                if !acc.any || hi > acc.max {
                    acc.max = hi;
                }
                acc.any = true;
            }
        }
    };
}
float_stats!(stats_f16, half::f16);
float_stats!(stats_f32, f32);
float_stats!(stats_f64, f64);

/// The bounds of `datetime64`/`timedelta64` counts without NaT, and the NaT count.
fn stats_time(bytes: &[u8], acc: &mut Acc<i64>) {
    for c in bytes.chunks_exact(8) {
        let v = i64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        if v == crate::dtype::NAT {
            acc.nan += 1;
            continue;
        }
        if !acc.any || v < acc.min {
            acc.min = v;
        }
        if !acc.any || v > acc.max {
            acc.max = v;
        }
        acc.any = true;
    }
}

/// Accumulates statistics over runs of native-order elements of one dtype.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stats {
    /// Signed integers (and bools, as 0/1).
    Int(Acc<i64>, bool),
    /// Unsigned integers.
    UInt(Acc<u64>),
    /// Floats.
    Float(Acc<f64>),
}

impl Stats {
    /// An empty accumulator for `dtype`; `None` for dtypes without statistics.
    pub(crate) fn new(dtype: DType) -> Option<Stats> {
        Some(match StatKind::of(dtype)? {
            StatKind::Bool => Stats::Int(acc(0), true),
            StatKind::Int => Stats::Int(acc(0), false),
            StatKind::UInt => Stats::UInt(acc(0)),
            StatKind::Float => Stats::Float(acc(0.0)),
        })
    }

    /// Adds a run of native-order elements of `dtype` (the dtype this was made for).
    pub(crate) fn add(&mut self, dtype: DType, bytes: &[u8]) {
        match (self, dtype) {
            (Stats::Int(a, _), DType::Bool) => {
                // Any non-zero byte reads as true.
                let mut any = [false; 2];
                for &b in bytes {
                    any[usize::from(b != 0)] = true;
                }
                let mut one = |v: i64| {
                    if !a.any || v < a.min {
                        a.min = v;
                    }
                    if !a.any || v > a.max {
                        a.max = v;
                    }
                    a.any = true;
                };
                if any[0] {
                    one(0);
                }
                if any[1] {
                    one(1);
                }
            }
            (Stats::Int(a, _), DType::I8) => stats_i8(bytes, a),
            (Stats::Int(a, _), DType::I16) => stats_i16(bytes, a),
            (Stats::Int(a, _), DType::I32) => stats_i32(bytes, a),
            (Stats::Int(a, _), DType::I64) => stats_i64(bytes, a),
            (Stats::UInt(a), DType::U8) => stats_u8(bytes, a),
            (Stats::UInt(a), DType::U16) => stats_u16(bytes, a),
            (Stats::UInt(a), DType::U32) => stats_u32(bytes, a),
            (Stats::UInt(a), DType::U64) => stats_u64(bytes, a),
            (Stats::Float(a), DType::F16) => stats_f16(bytes, a),
            (Stats::Float(a), DType::F32) => stats_f32(bytes, a),
            (Stats::Int(a, _), DType::DateTime(_) | DType::TimeDelta(_)) => stats_time(bytes, a),
            (Stats::Float(a), DType::F64) => stats_f64(bytes, a),
            _ => {}
        }
    }

    /// Adds `n` copies of one element (a fill value).
    pub(crate) fn add_repeated(&mut self, dtype: DType, element: &[u8], n: u64) {
        if n == 0 {
            return;
        }
        self.add(dtype, element);
        match self {
            Stats::Float(a) if a.nan > 0 => a.nan = n,
            Stats::Int(a, _) if a.nan > 0 => a.nan = n,
            _ => {}
        }
    }

    /// The statistics gathered.
    pub(crate) fn finish(self) -> ChunkStats {
        fn mm<T: Copy>(
            a: &Acc<T>,
            f: impl Fn(T) -> StatValue,
        ) -> (Option<StatValue>, Option<StatValue>) {
            if a.any {
                (Some(f(a.min)), Some(f(a.max)))
            } else {
                (None, None)
            }
        }
        let ((min, max), nan_count) = match self {
            Stats::Int(a, true) => (mm(&a, |v| StatValue::Bool(v != 0)), 0),
            // Integers count no NaN; datetime64/timedelta64 count their NaTs here.
            Stats::Int(a, false) => (mm(&a, StatValue::Int), a.nan),
            Stats::UInt(a) => (mm(&a, StatValue::UInt), 0),
            Stats::Float(a) => (mm(&a, StatValue::Float), a.nan),
        };
        ChunkStats {
            min,
            max,
            nan_count,
            sum: None,
        }
    }
}

fn acc<T: Copy>(zero: T) -> Acc<T> {
    Acc {
        min: zero,
        max: zero,
        any: false,
        nan: 0,
    }
}

/// The statistics of the elements of a whole chunk (native order, C order over `chunkshape`)
/// that lie inside its `valid` extents; `None` for dtypes without statistics.
pub(crate) fn chunk_stats(
    dtype: DType,
    chunk: &[u8],
    chunkshape: &[u64],
    valid: &[u64],
) -> Option<ChunkStats> {
    let sum = sums::chunk_sum_bytes(dtype, chunk, chunkshape, valid);
    chunk_minmax(dtype, chunk, chunkshape, valid).map(|s| ChunkStats { sum, ..s })
}

/// [`chunk_stats`] without the sums.
fn chunk_minmax(
    dtype: DType,
    chunk: &[u8],
    chunkshape: &[u64],
    valid: &[u64],
) -> Option<ChunkStats> {
    let mut s = Stats::new(dtype)?;
    let isz = dtype.itemsize();
    let nd = chunkshape.len();
    if nd == 0 || valid.contains(&0) {
        return Some(s.finish());
    }
    let row = chunkshape[nd - 1] as usize * isz;
    let valid_row = valid[nd - 1] as usize * isz;
    if valid[1..] == chunkshape[1..] {
        // Only rows along axis 0 are cut: the visible elements are a prefix of the chunk.
        let n: u64 = valid.iter().product();
        s.add(dtype, chunk.get(..n as usize * isz).unwrap_or(chunk));
        return Some(s.finish());
    }
    if row == 0 {
        return Some(s.finish());
    }
    for (r, bytes) in chunk.chunks_exact(row).enumerate() {
        let mut rem = r as u64;
        let mut inside = true;
        for ax in (0..nd - 1).rev() {
            let c = rem % chunkshape[ax];
            rem /= chunkshape[ax];
            inside &= c < valid[ax];
        }
        if inside {
            s.add(dtype, &bytes[..valid_row]);
        }
    }
    Some(s.finish())
}

/// The statistics of a chunk whose `n` visible elements all hold `fill` (native order).
pub(crate) fn fill_stats(dtype: DType, fill: &[u8], n: u64) -> Option<ChunkStats> {
    let mut s = Stats::new(dtype)?;
    s.add_repeated(dtype, fill, n);
    Some(ChunkStats {
        sum: sums::fill_sum(dtype, fill, n),
        ..s.finish()
    })
}

fn le(a: StatValue, b: StatValue) -> bool {
    match (a, b) {
        (StatValue::Bool(x), StatValue::Bool(y)) => x <= y,
        (StatValue::Int(x), StatValue::Int(y)) => x <= y,
        (StatValue::UInt(x), StatValue::UInt(y)) => x <= y,
        _ => a.as_f64() <= b.as_f64(),
    }
}

/// Whether `recorded` bounds the statistics `actual` computed from a chunk's values.
pub(crate) fn bounds(recorded: &ChunkStats, actual: &ChunkStats) -> bool {
    let lo = match (recorded.min, actual.min) {
        (_, None) => true,
        (Some(r), Some(a)) => le(r, a),
        (None, Some(_)) => false,
    };
    let hi = match (recorded.max, actual.max) {
        (_, None) => true,
        (Some(r), Some(a)) => le(a, r),
        (None, Some(_)) => false,
    };
    // A sum that covers as many values as the chunk shows must be theirs, bit for bit (one
    // covering another count is left by a shrink and never used).
    let sum = match (recorded.sum, actual.sum) {
        (Some(r), Some(a)) if r.count == a.count => r.same(&a),
        _ => true,
    };
    lo && hi && sum && recorded.nan_count >= actual.nan_count
}

#[cfg(test)]
mod tests {
    use super::record::RECORD_HEX;
    use super::*;

    #[test]
    fn records_round_trip() {
        let s = ChunkStats {
            min: Some(StatValue::Float(-1.5)),
            max: Some(StatValue::Float(f64::INFINITY)),
            nan_count: 3,
            sum: None,
        };
        let r = encode_record(Some(&s));
        assert_eq!(r.len(), RECORD_HEX);
        assert_eq!(decode_record(StatKind::Float, &r), Some(s));
        assert_eq!(decode_record(StatKind::Float, &encode_record(None)), None);
        let e = ChunkStats {
            min: None,
            max: None,
            nan_count: 7,
            sum: None,
        };
        assert_eq!(
            decode_record(StatKind::Float, &encode_record(Some(&e))),
            Some(e)
        );
        let i = ChunkStats {
            min: Some(StatValue::Int(-5)),
            max: Some(StatValue::Int(i64::MAX)),
            nan_count: 0,
            sum: None,
        };
        assert_eq!(
            decode_record(StatKind::Int, &encode_record(Some(&i))),
            Some(i)
        );
    }

    #[test]
    fn partial_chunk_ignores_padding() {
        // 2 x 3 chunk of i32, valid 2 x 2: the last column is padding.
        let v: Vec<i32> = vec![1, 2, 100, 3, 4, -100];
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
        let s = chunk_stats(DType::I32, &bytes, &[2, 3], &[2, 2]).unwrap();
        assert_eq!(s.min, Some(StatValue::Int(1)));
        assert_eq!(s.max, Some(StatValue::Int(4)));
        let s = chunk_stats(DType::I32, &bytes, &[2, 3], &[1, 3]).unwrap();
        assert_eq!(s.max, Some(StatValue::Int(100)));
        assert_eq!(s.min, Some(StatValue::Int(1)));
    }

    #[test]
    fn bounds_compare_within_a_kind() {
        let r = ChunkStats {
            min: Some(StatValue::Int(-3)),
            max: Some(StatValue::Int(i64::MAX)),
            nan_count: 0,
            sum: None,
        };
        let inside = ChunkStats {
            min: Some(StatValue::Int(-3)),
            max: Some(StatValue::Int(i64::MAX - 1)),
            nan_count: 0,
            sum: None,
        };
        assert!(bounds(&r, &inside));
        assert!(!bounds(&inside, &r));
        let none = ChunkStats {
            min: None,
            max: None,
            nan_count: 2,
            sum: None,
        };
        assert!(!bounds(&r, &none), "NaNs the record does not count");
        assert!(bounds(
            &none,
            &ChunkStats {
                nan_count: 1,
                ..none
            }
        ));
    }

    #[test]
    fn floats_count_nans() {
        let v = [f64::NAN, 2.0, -0.5, f64::NAN];
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
        let s = chunk_stats(DType::F64, &bytes, &[4], &[4]).unwrap();
        assert_eq!(s.nan_count, 2);
        assert_eq!(s.min, Some(StatValue::Float(-0.5)));
        let s = fill_stats(DType::F64, &f64::NAN.to_ne_bytes(), 9).unwrap();
        assert_eq!((s.min, s.nan_count), (None, 9));
    }
}
