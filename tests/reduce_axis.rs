//! `blz::scan::reduce_axis` against a plain model: random shapes, chunkshapes, dtypes (NaN
//! included), axes (none, one, several) and empty arrays, every reduction, each result
//! compared with one computed element by element from the values written.

use blz::scan::{reduce_axis, reduce_axis_column, ReduceOutput, Reduction, ScanOptions};
use blz::{CreateOptions, DType, Dataset};
use proptest::prelude::*;

const DTYPES: [DType; 10] = [
    DType::Bool,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U32,
    DType::U64,
    DType::F32,
    DType::F64,
];

fn is_float(dt: DType) -> bool {
    matches!(dt, DType::F32 | DType::F64)
}

/// Values as the dtype holds them (rounded to f32, booleans 0/1, unsigned non-negative), in
/// f64, and the dataset's native bytes.
fn typed_values(dt: DType, raw: &[f64]) -> (Vec<f64>, Vec<u8>) {
    let mut bytes = Vec::new();
    let vals = raw
        .iter()
        .map(|&x| match dt {
            DType::Bool => {
                let b = x > 0.0;
                bytes.push(u8::from(b));
                f64::from(u8::from(b))
            }
            DType::I8 => {
                let v = (x as i64).clamp(-128, 127) as i8;
                bytes.extend(v.to_ne_bytes());
                f64::from(v)
            }
            DType::I16 => {
                let v = x as i16;
                bytes.extend(v.to_ne_bytes());
                f64::from(v)
            }
            DType::I32 => {
                let v = x as i32;
                bytes.extend(v.to_ne_bytes());
                f64::from(v)
            }
            DType::I64 => {
                let v = x as i64;
                bytes.extend(v.to_ne_bytes());
                v as f64
            }
            DType::U8 => {
                let v = x.abs().min(255.0) as u8;
                bytes.extend(v.to_ne_bytes());
                f64::from(v)
            }
            DType::U32 => {
                let v = x.abs() as u32;
                bytes.extend(v.to_ne_bytes());
                f64::from(v)
            }
            DType::U64 => {
                let v = x.abs() as u64;
                bytes.extend(v.to_ne_bytes());
                v as f64
            }
            DType::F32 => {
                let v = x as f32;
                bytes.extend(v.to_ne_bytes());
                f64::from(v)
            }
            _ => {
                bytes.extend(x.to_ne_bytes());
                x
            }
        })
        .collect();
    (vals, bytes)
}

/// The model: per output element (C order), its reduced elements in C order, with the
/// index argmin/argmax report for each.
fn groups(shape: &[u64], axes: Option<&[usize]>, vals: &[f64]) -> Vec<Vec<(f64, i64)>> {
    let nd = shape.len();
    let red: Vec<bool> = (0..nd)
        .map(|i| axes.is_none_or(|a| a.contains(&i)))
        .collect();
    let out_len: u64 = (0..nd).filter(|&i| !red[i]).map(|i| shape[i]).product();
    let mut g = vec![Vec::new(); out_len as usize];
    let mut idx = vec![0u64; nd];
    for (flat, &v) in vals.iter().enumerate() {
        let mut o = 0u64;
        for i in 0..nd {
            if !red[i] {
                o = o * shape[i] + idx[i];
            }
        }
        let at = match axes {
            Some(&[a]) => idx[a] as i64,
            _ => flat as i64,
        };
        g[o as usize].push((v, at));
        for i in (0..nd).rev() {
            idx[i] += 1;
            if idx[i] < shape[i] {
                break;
            }
            idx[i] = 0;
        }
    }
    g
}

fn model(op: Reduction, g: &[(f64, i64)], ddof: f64) -> f64 {
    let n = g.len() as f64;
    let nan = g.iter().any(|x| x.0.is_nan());
    match op {
        Reduction::Count => n,
        Reduction::Sum => g.iter().map(|x| x.0).sum(),
        Reduction::Mean => g.iter().map(|x| x.0).sum::<f64>() / n,
        Reduction::Var | Reduction::Std => {
            let m = g.iter().map(|x| x.0).sum::<f64>() / n;
            let v = if g.is_empty() {
                f64::NAN
            } else {
                g.iter().map(|x| (x.0 - m) * (x.0 - m)).sum::<f64>() / (n - ddof).max(0.0)
            };
            if op == Reduction::Std {
                v.sqrt()
            } else {
                v
            }
        }
        Reduction::Min | Reduction::Max if nan => f64::NAN,
        Reduction::Min => g.iter().map(|x| x.0).fold(f64::INFINITY, f64::min),
        Reduction::Max => g.iter().map(|x| x.0).fold(f64::NEG_INFINITY, f64::max),
        Reduction::ArgMin | Reduction::ArgMax => {
            let mut best: Option<(f64, i64)> = None;
            for &(v, i) in g {
                let take = match best {
                    None => true,
                    Some((b, _)) if b.is_nan() => false,
                    Some(_) if v.is_nan() => true,
                    Some((b, _)) => {
                        if op == Reduction::ArgMin {
                            v < b
                        } else {
                            v > b
                        }
                    }
                };
                if take {
                    best = Some((v, i));
                }
            }
            best.map_or(-1.0, |b| b.1 as f64)
        }
        Reduction::Any => f64::from(u8::from(g.iter().any(|x| x.0 != 0.0))),
        Reduction::All => f64::from(u8::from(g.iter().all(|x| x.0 != 0.0))),
        Reduction::CountNonzero => g.iter().filter(|x| x.0 != 0.0).count() as f64,
    }
}

fn expected_dtype(op: Reduction, dt: DType) -> DType {
    match op {
        Reduction::Sum => match dt {
            DType::F32 | DType::F64 => dt,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => DType::U64,
            _ => DType::I64,
        },
        Reduction::Min | Reduction::Max => dt,
        Reduction::Mean | Reduction::Var | Reduction::Std => DType::F64,
        Reduction::Any | Reduction::All => DType::Bool,
        _ => DType::I64,
    }
}

fn as_f64(o: &ReduceOutput) -> Vec<f64> {
    match o {
        ReduceOutput::Bool(a) => a.iter().map(|&b| f64::from(u8::from(b))).collect(),
        ReduceOutput::I8(a) => a.iter().map(|&v| f64::from(v)).collect(),
        ReduceOutput::I16(a) => a.iter().map(|&v| f64::from(v)).collect(),
        ReduceOutput::I32(a) => a.iter().map(|&v| f64::from(v)).collect(),
        ReduceOutput::I64(a) => a.iter().map(|&v| v as f64).collect(),
        ReduceOutput::U8(a) => a.iter().map(|&v| f64::from(v)).collect(),
        ReduceOutput::U16(a) => a.iter().map(|&v| f64::from(v)).collect(),
        ReduceOutput::U32(a) => a.iter().map(|&v| f64::from(v)).collect(),
        ReduceOutput::U64(a) => a.iter().map(|&v| v as f64).collect(),
        ReduceOutput::F16(a) => a.iter().map(|&v| v.to_f64()).collect(),
        ReduceOutput::F32(a) => a.iter().map(|&v| f64::from(v)).collect(),
        ReduceOutput::F64(a) => a.iter().copied().collect(),
    }
}

fn close(got: f64, want: f64, rtol: f64) -> bool {
    (got.is_nan() && want.is_nan())
        || got == want
        || (got - want).abs() <= rtol * want.abs().max(1.0)
}

#[derive(Debug, Clone)]
struct Case {
    dt: DType,
    shape: Vec<u64>,
    chunks: Vec<u64>,
    raw: Vec<f64>,
    axes: Option<Vec<usize>>,
    ddof: f64,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=3, 0usize..DTYPES.len())
        .prop_flat_map(|(nd, d)| {
            (
                Just(DTYPES[d]),
                // Only axis 0 may be empty.
                (0u64..=6, prop::collection::vec(1u64..=6, nd - 1)).prop_map(|(n0, rest)| {
                    let mut s = vec![n0];
                    s.extend(rest);
                    s
                }),
                prop::collection::vec(1u64..=4, nd),
                prop::collection::vec(any::<bool>(), nd),
                any::<bool>(),
                0u8..=2,
            )
        })
        .prop_flat_map(|(dt, shape, chunks, pick, none, ddof)| {
            let n: u64 = shape.iter().product();
            let float = is_float(dt);
            let val = prop_oneof![
                8 => -50.0f64..50.0,
                1 => Just(0.0),
                1 => if float { Just(f64::NAN).boxed() } else { Just(7.0).boxed() },
            ]
            .prop_map(move |x| if float { x } else { x.round() });
            let axes: Option<Vec<usize>> =
                (!none).then(|| (0..shape.len()).filter(|&i| pick[i]).collect::<Vec<_>>());
            (
                Just(dt),
                Just(shape),
                Just(chunks),
                prop::collection::vec(val, n as usize),
                Just(axes),
                Just(f64::from(ddof)),
            )
        })
        .prop_map(|(dt, shape, chunks, raw, axes, ddof)| Case {
            dt,
            shape,
            chunks,
            raw,
            axes,
            ddof,
        })
}

fn write(dir: &std::path::Path, c: &Case) -> (Dataset, Vec<f64>) {
    let (vals, bytes) = typed_values(c.dt, &c.raw);
    let mut start = c.shape.clone();
    start[0] = 0;
    let opts = CreateOptions {
        chunkshape: Some(c.chunks.clone()),
        superchunksize: Some(3),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(dir.join("a.blz"), c.dt, &start, &opts).unwrap();
    if c.shape[0] > 0 {
        ds.append_bytes(&bytes, c.shape[0]).unwrap();
    }
    (ds, vals)
}

fn check(ds: &Dataset, c: &Case, vals: &[f64], threads: Option<usize>) {
    let axes = c.axes.as_deref();
    let g = groups(&c.shape, axes, vals);
    let out_shape: Vec<usize> = (0..c.shape.len())
        .filter(|&i| axes.is_some_and(|a| !a.contains(&i)))
        .map(|i| c.shape[i] as usize)
        .collect();
    let opts = ScanOptions {
        threads,
        ..Default::default()
    };
    for op in Reduction::ALL {
        let arg = matches!(op, Reduction::ArgMin | Reduction::ArgMax);
        let r = reduce_axis(ds, &opts, op, axes, c.ddof);
        if arg && axes.is_some_and(|a| a.len() != 1) {
            assert!(r.is_err(), "{op} over axes {axes:?} must be refused");
            continue;
        }
        let n_red: u64 = (0..c.shape.len())
            .filter(|&i| axes.is_none_or(|a| a.contains(&i)))
            .map(|i| c.shape[i])
            .product();
        let no_identity = matches!(
            op,
            Reduction::Min | Reduction::Max | Reduction::ArgMin | Reduction::ArgMax
        );
        if no_identity && n_red == 0 {
            assert!(r.is_err(), "{op} of a zero-size reduction must fail");
            continue;
        }
        let r = r.unwrap_or_else(|e| panic!("{op} {axes:?}: {e}"));
        assert_eq!(r.dtype(), expected_dtype(op, c.dt), "{op} of {}", c.dt);
        assert_eq!(r.shape(), &out_shape[..], "{op} shape");
        let got = as_f64(&r);
        let rtol = if c.dt == DType::F32 && op == Reduction::Sum {
            1e-5
        } else {
            1e-12
        };
        for (i, (gv, grp)) in got.iter().zip(&g).enumerate() {
            let want = model(op, grp, c.ddof);
            assert!(
                close(*gv, want, rtol),
                "{op} axes {axes:?} of {} at {i}: got {gv}, want {want}",
                c.dt
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn reductions_match_the_model(c in case()) {
        let dir = tempfile::tempdir().unwrap();
        let (ds, vals) = write(dir.path(), &c);
        check(&ds, &c, &vals, None);
        check(&ds, &c, &vals, Some(1));
    }
}

#[test]
fn integer_sums_wrap_as_numpy() {
    let dir = tempfile::tempdir().unwrap();
    let mut ds = Dataset::create(dir.path().join("a.blz"), DType::I64, &[0]).unwrap();
    let v = ndarray::arr1(&[i64::MAX, 1, 5]).into_dyn();
    ds.append(&v.view()).unwrap();
    let r = reduce_axis(&ds, &ScanOptions::default(), Reduction::Sum, None, 0.0).unwrap();
    assert_eq!(r, ReduceOutput::I64(ndarray::arr0(i64::MIN + 5).into_dyn()));
}

#[test]
fn bad_axes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ds = Dataset::create(dir.path().join("a.blz"), DType::F64, &[3, 4]).unwrap();
    let o = ScanOptions::default();
    assert!(reduce_axis(&ds, &o, Reduction::Sum, Some(&[2]), 0.0).is_err());
    assert!(reduce_axis(&ds, &o, Reduction::Sum, Some(&[1, 1]), 0.0).is_err());
    let s = reduce_axis(&ds, &o, Reduction::Sum, Some(&[0, 1]), 0.0).unwrap();
    assert_eq!(s.shape(), &[] as &[usize]);
}

#[test]
fn columns_reduce_as_arrays() {
    use blz::table::{Field, Table, TableOptions, Values};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = Table::create(
        &p,
        vec![Field::new("x", DType::F64)],
        &TableOptions::default(),
    )
    .unwrap();
    let xs: Vec<f64> = (0..1000).map(|i| f64::from(i) * 0.5).collect();
    t.append(&[("x", Values::from_slice(&xs))]).unwrap();
    let r = reduce_axis_column(
        &t,
        "x",
        &ScanOptions::default(),
        Reduction::ArgMax,
        None,
        0.0,
    )
    .unwrap();
    assert_eq!(r, ReduceOutput::I64(ndarray::arr0(999).into_dyn()));
}
