//! Reductions over every axis answered from the per-chunk statistics and sums
//! (`spec/dataset.md` §14, `blz::scan::reduce_axis`): after random appends, grows, shrinks
//! that cut chunks, slice and point writes and reopens, every reduction equals the one that
//! decodes every chunk (`ScanOptions::statistics` false: the same bits) and an in-memory
//! model; the records are really used (a corrupt chunk the records decide is never read);
//! datasets whose statistics are not vouched for, or whose files carry no sums, reduce the
//! same.

mod common;

use blz::fancy::Fancy;
use blz::scan::{reduce_axis, ReduceOutput, Reduction, ScanOptions};
use blz::storage::{LocalStorage, OpenMode, Storage};
use blz::{CreateOptions, DType, Dataset, Element};
use ndarray::{ArrayD, IxDyn};
use proptest::prelude::*;
use std::path::Path;

const W: u64 = 5;
/// 3 x 2 chunks over (rows, 5): the last chunk column shows 1 of its 2 columns.
const CS: [u64; 2] = [3, 2];

const OPS: [Reduction; 9] = [
    Reduction::Sum,
    Reduction::Mean,
    Reduction::Min,
    Reduction::Max,
    Reduction::ArgMin,
    Reduction::ArgMax,
    Reduction::Any,
    Reduction::All,
    Reduction::CountNonzero,
];

/// Values of one dtype made from random bits (many zeros, so any/all vary).
trait Val: Element + Copy + Default + PartialOrd + std::fmt::Debug {
    const DT: DType;
    fn make(r: u64) -> Self;
    fn f(self) -> f64;
    fn wrap(self) -> i64;
    fn nan(self) -> bool {
        false
    }
}
impl Val for f64 {
    const DT: DType = DType::F64;
    fn make(r: u64) -> f64 {
        match r % 23 {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            3 => -0.0,
            4..=9 => 0.0,
            _ => (r >> 8) as i64 as f64 / 1024.0 - 1e3,
        }
    }
    fn f(self) -> f64 {
        self
    }
    fn wrap(self) -> i64 {
        0
    }
    fn nan(self) -> bool {
        self.is_nan()
    }
}
impl Val for i32 {
    const DT: DType = DType::I32;
    fn make(r: u64) -> i32 {
        if r.is_multiple_of(3) {
            0
        } else {
            (r >> 4) as i32
        }
    }
    fn f(self) -> f64 {
        f64::from(self)
    }
    fn wrap(self) -> i64 {
        i64::from(self)
    }
}
impl Val for u64 {
    const DT: DType = DType::U64;
    fn make(r: u64) -> u64 {
        if r.is_multiple_of(3) {
            0
        } else {
            r.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        }
    }
    fn f(self) -> f64 {
        self as f64
    }
    fn wrap(self) -> i64 {
        self as i64
    }
}
impl Val for bool {
    const DT: DType = DType::Bool;
    fn make(r: u64) -> bool {
        !r.is_multiple_of(3)
    }
    fn f(self) -> f64 {
        f64::from(u8::from(self))
    }
    fn wrap(self) -> i64 {
        i64::from(self)
    }
}

fn data<T: Val>(rows: u64, seed: u64) -> ArrayD<T> {
    let mut x = seed | 1;
    ArrayD::from_shape_fn(IxDyn(&[rows as usize, W as usize]), |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        T::make(x)
    })
}

#[derive(Debug, Clone)]
enum Op {
    Append(u64, u64),
    Resize(u64),
    Write(u64, u64, u64),
    Points(Vec<(u64, u64)>, u64),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..8, any::<u64>()).prop_map(|(n, s)| Op::Append(n, s)),
        2 => (0u64..16).prop_map(Op::Resize),
        2 => (0u64..12, 1u64..6, any::<u64>()).prop_map(|(a, n, s)| Op::Write(a, n, s)),
        1 => (proptest::collection::vec((0u64..16, 0u64..W), 1..5), any::<u64>())
            .prop_map(|(p, s)| Op::Points(p, s)),
        1 => Just(Op::Reopen),
    ]
}

/// Whether two results are the same (floats: the same bits, or both NaN).
fn same(a: &ReduceOutput, b: &ReduceOutput) -> bool {
    match (a, b) {
        (ReduceOutput::F64(x), ReduceOutput::F64(y)) => x
            .iter()
            .zip(y)
            .all(|(p, q)| p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan())),
        _ => a == b,
    }
}

fn scalar_f(r: &ReduceOutput) -> f64 {
    match r {
        ReduceOutput::F64(a) => a[[]],
        ReduceOutput::I64(a) => a[[]] as f64,
        ReduceOutput::U64(a) => a[[]] as f64,
        ReduceOutput::I32(a) => f64::from(a[[]]),
        ReduceOutput::Bool(a) => f64::from(u8::from(a[[]])),
        other => panic!("unexpected {other:?}"),
    }
}

/// The model's answer to `op` (floats: sums and means within a relative 1e-9).
fn check_model<T: Val>(m: &ArrayD<T>, op: Reduction, got: &ReduceOutput) {
    let v: Vec<T> = m.iter().copied().collect();
    let what = format!("{op} of {v:?}: {got:?}");
    if v.is_empty() {
        return;
    }
    let any_nan = v.iter().any(|x| x.nan());
    let nz = |x: &T| x.nan() || x.f() != 0.0;
    let first = |better: &dyn Fn(T, T) -> bool| {
        if let Some(i) = v.iter().position(|x| x.nan()) {
            return i;
        }
        let mut b = 0;
        for (i, &x) in v.iter().enumerate() {
            if better(x, v[b]) {
                b = i;
            }
        }
        b
    };
    match op {
        Reduction::Sum | Reduction::Mean => {
            if T::DT == DType::F64 || op == Reduction::Mean {
                let s: f64 = v.iter().map(|x| x.f()).sum();
                let want = if op == Reduction::Mean {
                    s / v.len() as f64
                } else {
                    s
                };
                let g = scalar_f(got);
                let ok = (g.is_nan() && want.is_nan())
                    || g == want
                    || (g - want).abs() <= 1e-9 * want.abs().max(1.0);
                assert!(ok, "{what}: want {want}");
            } else {
                let s = v.iter().fold(0i64, |a, x| a.wrapping_add(x.wrap()));
                let g = match got {
                    ReduceOutput::I64(a) => a[[]],
                    ReduceOutput::U64(a) => a[[]] as i64,
                    other => panic!("{what}: {other:?}"),
                };
                assert_eq!(g, s, "{what}");
            }
        }
        Reduction::Min | Reduction::Max => {
            let i = first(&|x, b| if op == Reduction::Min { x < b } else { x > b });
            let want = v[i].f();
            let g = scalar_f(got);
            assert!((any_nan && g.is_nan()) || g == want, "{what}: want {want}");
        }
        Reduction::ArgMin | Reduction::ArgMax => {
            let i = first(&|x, b| {
                if op == Reduction::ArgMin {
                    x < b
                } else {
                    x > b
                }
            });
            assert_eq!(
                got,
                &ReduceOutput::I64(ArrayD::from_elem(IxDyn(&[]), i as i64)),
                "{what}"
            );
        }
        Reduction::Any => assert_eq!(
            scalar_f(got),
            f64::from(u8::from(v.iter().any(nz))),
            "{what}"
        ),
        Reduction::All => assert_eq!(
            scalar_f(got),
            f64::from(u8::from(v.iter().all(nz))),
            "{what}"
        ),
        _ => assert_eq!(
            scalar_f(got),
            v.iter().filter(|x| nz(x)).count() as f64,
            "{what}"
        ),
    }
}

/// Every reduction: from the records, by decoding every chunk, and by the model.
fn check_all<T: Val>(ds: &Dataset, m: &ArrayD<T>) {
    let on = ScanOptions::default();
    let off = ScanOptions {
        statistics: false,
        ..Default::default()
    };
    for op in OPS {
        let a = reduce_axis(ds, &on, op, None, 0.0);
        let b = reduce_axis(ds, &off, op, None, 0.0);
        match (a, b) {
            (Ok(a), Ok(b)) => {
                assert!(same(&a, &b), "{op}: records {a:?}, decoded {b:?}");
                check_model(m, op, &a);
            }
            (Err(_), Err(_)) => assert!(m.is_empty(), "{op} failed on a non-empty array"),
            (a, b) => panic!("{op}: {a:?} vs {b:?}"),
        }
    }
}

fn run<T: Val>(ops: Vec<Op>) {
    let dir = common::Dir::new();
    let path = dir.p("a");
    let opts = CreateOptions {
        chunkshape: Some(CS.to_vec()),
        superchunksize: Some(3),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&path, T::DT, &[0, W], &opts).unwrap();
    let mut m: ArrayD<T> = ArrayD::default(IxDyn(&[0, W as usize]));
    for op in ops {
        let rows = m.shape()[0] as u64;
        match op {
            Op::Append(n, seed) => {
                let d = data::<T>(n, seed);
                ds.append(&d.view()).unwrap();
                m.append(ndarray::Axis(0), d.view()).unwrap();
            }
            Op::Resize(n) => {
                ds.resize(n).unwrap();
                if n < rows {
                    m = m
                        .slice_axis(ndarray::Axis(0), (0..n as usize).into())
                        .to_owned();
                } else {
                    let z = ArrayD::<T>::default(IxDyn(&[(n - rows) as usize, W as usize]));
                    m.append(ndarray::Axis(0), z.view()).unwrap();
                }
            }
            Op::Write(a, n, seed) => {
                let a = a.min(rows);
                let b = (a + n).min(rows);
                if a == b {
                    continue;
                }
                let d = data::<T>(b - a, seed);
                ds.write_slice(ndarray::s![a as isize..b as isize, ..], &d.view())
                    .unwrap();
                m.slice_mut(ndarray::s![a as usize..b as usize, ..])
                    .assign(&d);
            }
            Op::Points(pts, seed) => {
                let mut pts: Vec<(u64, u64)> = pts.into_iter().filter(|p| p.0 < rows).collect();
                pts.sort_unstable();
                pts.dedup();
                if pts.is_empty() {
                    continue;
                }
                let d = data::<T>(1, seed);
                let vals: Vec<T> = (0..pts.len()).map(|i| d[[0, i % W as usize]]).collect();
                let sel = Fancy::points(vec![
                    pts.iter().map(|p| p.0).collect(),
                    pts.iter().map(|p| p.1).collect(),
                ]);
                let arr = ArrayD::from_shape_vec(IxDyn(&[vals.len()]), vals.clone()).unwrap();
                ds.write_fancy(&sel, &arr.view()).unwrap();
                for (p, v) in pts.iter().zip(vals) {
                    m[[p.0 as usize, p.1 as usize]] = v;
                }
            }
            Op::Reopen => {
                drop(ds);
                ds = Dataset::open_rw(&path).unwrap();
            }
        }
        check_all(&ds, &m);
    }
    drop(ds);
    check_all(&Dataset::open(&path).unwrap(), &m);
    // Untrusted statistics (as after an older writer, §14.4): the same results.
    strip_key(&path.join("meta/sizes"), "stats");
    let ds = Dataset::open(&path).unwrap();
    assert!(!ds.sizes().stats_current());
    check_all(&ds, &m);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn float_reductions_follow_the_model(ops in proptest::collection::vec(op(), 1..12)) {
        run::<f64>(ops);
    }

    #[test]
    fn int_reductions_follow_the_model(ops in proptest::collection::vec(op(), 1..12)) {
        run::<i32>(ops);
    }

    #[test]
    fn uint_reductions_follow_the_model(ops in proptest::collection::vec(op(), 1..12)) {
        run::<u64>(ops);
    }

    #[test]
    fn bool_reductions_follow_the_model(ops in proptest::collection::vec(op(), 1..12)) {
        run::<bool>(ops);
    }
}

fn strip_key(file: &Path, key: &str) {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove(key);
    std::fs::write(file, serde_json::to_vec(&v).unwrap()).unwrap();
}

fn walk(n: usize) -> ArrayD<f64> {
    // The minimum at 300 (chunk 3), the maximum at the end (chunk 9).
    let v: Vec<f64> = (0..n)
        .map(|i| (i as f64 - 300.0).powi(2) * 0.37 + (i % 7) as f64 * 0.01)
        .collect();
    ArrayD::from_shape_vec(IxDyn(&[n]), v).unwrap()
}

fn one_d(dir: &common::Dir, name: &str) -> (std::path::PathBuf, ArrayD<f64>) {
    let path = dir.p(name);
    let opts = CreateOptions {
        chunkshape: Some(vec![100]),
        superchunksize: Some(4),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&path, DType::F64, &[0], &opts).unwrap();
    let v = walk(1000);
    ds.append(&v.view()).unwrap();
    (path, v)
}

/// The records are used: a chunk whose bytes are damaged is never decoded by the
/// reductions its records decide, while a reduction that decodes every chunk reports it.
#[test]
fn records_answer_without_decoding() {
    let dir = common::Dir::new();
    let (path, v) = one_d(&dir, "a");
    let ds = Dataset::open(&path).unwrap();
    let on = ScanOptions::default();
    let want_sum = reduce_axis(&ds, &on, Reduction::Sum, None, 0.0).unwrap();
    // Chunk 5 (file 1, slot 1) holds neither the minimum nor the maximum.
    let (lo, hi) = (
        v.iter().copied().fold(f64::INFINITY, f64::min),
        v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    let chunk5 = v.slice(ndarray::s![500..600]);
    assert!(chunk5.iter().all(|&x| x != lo && x != hi));
    common::flip_byte_in_chunk(&ds.superchunk_path(1), 1);
    let ds = Dataset::open(&path).unwrap();
    let off = ScanOptions {
        statistics: false,
        ..Default::default()
    };
    let err = reduce_axis(&ds, &off, Reduction::Sum, None, 0.0).unwrap_err();
    assert!(err.to_string().contains("chunk"), "{err}");
    assert_eq!(
        reduce_axis(&ds, &on, Reduction::Sum, None, 0.0).unwrap(),
        want_sum
    );
    for (op, want) in [
        (Reduction::Min, lo),
        (Reduction::Max, hi),
        (Reduction::Mean, v.sum() / 1000.0),
    ] {
        let got = scalar_f(&reduce_axis(&ds, &on, op, None, 0.0).unwrap());
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{op}: {got} vs {want}"
        );
    }
    // argmin decodes only the chunk holding the minimum.
    let i = v.iter().position(|&x| x == lo).unwrap();
    assert_eq!(
        reduce_axis(&ds, &on, Reduction::ArgMin, None, 0.0).unwrap(),
        ReduceOutput::I64(ArrayD::from_elem(IxDyn(&[]), i as i64))
    );
}

/// Files written before sums existed (their metadata has `stats` but no `sums`): every
/// reduction decodes what it needs and gives the same results.
#[test]
fn files_without_sums_reduce_the_same() {
    let dir = common::Dir::new();
    let (path, v) = one_d(&dir, "old");
    let ds = Dataset::open(&path).unwrap();
    let before: Vec<ReduceOutput> = OPS
        .iter()
        .map(|&op| reduce_axis(&ds, &ScanOptions::default(), op, None, 0.0).unwrap())
        .collect();
    for f in 0..3 {
        let file = LocalStorage
            .open(&ds.superchunk_path(f), OpenMode::ReadWrite)
            .unwrap();
        let mut w = blz_format::blpk::SuperchunkWriter::open(file.as_ref(), 0).unwrap();
        let removed = w
            .update_document(|d| d["blz"].as_object_mut().unwrap().remove("sums"))
            .unwrap();
        assert!(removed.is_some(), "file {f} had sums");
        let seal = w.plan_seal().unwrap().unwrap();
        file.write_at(seal.offset, &seal.data).unwrap();
        file.sync().unwrap();
    }
    let ds = Dataset::open(&path).unwrap();
    assert!(ds
        .chunk_stats()
        .unwrap()
        .iter()
        .all(|s| s.is_some_and(|s| s.sum.is_none())));
    let m = v.clone();
    check_all(&ds, &m);
    for (op, b) in OPS.iter().zip(&before) {
        let got = reduce_axis(&ds, &ScanOptions::default(), *op, None, 0.0).unwrap();
        assert!(same(&got, b), "{op}: {got:?} vs {b:?}");
    }
}
