//! Array expressions (`blz::expr`) against values computed element by element: broadcasting,
//! mixed chunkings, regions, reductions, datasets written, and errors before any write.

use blz::expr::{Expression, Lit, Operand, Reduce};
use blz::selection::AxisSel;
use blz::{CreateOptions, DType, Dataset};
use ndarray::{ArrayD, IxDyn};
use std::borrow::Cow;

fn dataset(dir: &std::path::Path, name: &str, a: &ArrayD<f64>, chunks: &[u64]) -> Dataset {
    let opts = CreateOptions {
        chunkshape: Some(chunks.to_vec()),
        ..CreateOptions::default()
    };
    let mut shape: Vec<u64> = a.shape().iter().map(|&s| s as u64).collect();
    shape[0] = 0;
    let mut d = Dataset::create_with(dir.join(name), DType::F64, &shape, &opts).unwrap();
    d.append(&a.view()).unwrap();
    Dataset::open(dir.join(name)).unwrap()
}

fn f64s(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-9 * (1.0 + y.abs()),
            "element {i}: {x} != {y}"
        );
    }
}

#[test]
fn broadcasting_over_mixed_chunkings_into_a_dataset_and_regions() {
    let dir = tempfile::tempdir().unwrap();
    let a = ArrayD::from_shape_fn(IxDyn(&[37, 23]), |i| (i[0] * 23 + i[1]) as f64 * 0.1);
    let b = ArrayD::from_shape_fn(IxDyn(&[37, 23]), |i| {
        1.0 + (i[0] as f64) - (i[1] as f64) * 0.5
    });
    let c = ArrayD::from_shape_fn(IxDyn(&[23]), |i| i[0] as f64 * 0.3);
    let da = dataset(dir.path(), "a.blz", &a, &[5, 7]);
    let db = dataset(dir.path(), "b.blz", &b, &[11, 23]);
    let cm: Vec<u8> = c.iter().flat_map(|x| x.to_ne_bytes()).collect();
    let e = Expression::new(
        "a * b + sin(c) - 2",
        vec![
            ("a", Operand::Array(&da)),
            ("b", Operand::Array(&db)),
            (
                "c",
                Operand::Memory {
                    dtype: DType::F64,
                    shape: vec![23],
                    data: Cow::Owned(cm),
                },
            ),
        ],
    )
    .unwrap();
    assert_eq!(e.shape(), &[37, 23]);
    assert_eq!(e.dtype(), DType::F64);
    let want: Vec<f64> = ndarray::Zip::from(&a)
        .and(&b)
        .and_broadcast(&c)
        .map_collect(|x, y, z| x * y + z.sin() - 2.0)
        .iter()
        .copied()
        .collect();
    close(&f64s(&e.eval(&e.full()).unwrap()), &want);
    // A region: rows 3..30 step 4, columns 5..20.
    let region = [
        AxisSel {
            start: 3,
            step: 4,
            count: 7,
            reversed: false,
            keep: true,
        },
        AxisSel {
            start: 5,
            step: 1,
            count: 15,
            reversed: false,
            keep: true,
        },
    ];
    let got = f64s(&e.eval(&region).unwrap());
    let mut w = Vec::new();
    for i in 0..7 {
        for j in 0..15 {
            w.push(want[(3 + 4 * i) * 23 + 5 + j]);
        }
    }
    close(&got, &w);
    // Into a dataset with its own chunks.
    let opts = CreateOptions {
        chunkshape: Some(vec![9, 4]),
        ..CreateOptions::default()
    };
    let out = e.compute(dir.path().join("r.blz"), &opts).unwrap();
    assert_eq!(out.chunkshape(), &[9, 4]);
    close(out.read::<f64>().unwrap().as_slice().unwrap(), &want);
    // Reductions, whole and along each axis.
    let sum = e.reduce(Reduce::Sum, None, 0.0).unwrap();
    close(&f64s(&sum.data), &[want.iter().sum()]);
    let w2 = ArrayD::from_shape_vec(IxDyn(&[37, 23]), want.clone()).unwrap();
    for ax in 0..2 {
        let r = e.reduce(Reduce::Max, Some(&[ax]), 0.0).unwrap();
        let m = w2.fold_axis(ndarray::Axis(ax), f64::NEG_INFINITY, |a, &b| a.max(b));
        close(&f64s(&r.data), m.as_slice().unwrap());
        let r = e.reduce(Reduce::Var, Some(&[ax]), 1.0).unwrap();
        let v = w2.var_axis(ndarray::Axis(ax), 1.0);
        close(&f64s(&r.data), v.as_slice().unwrap());
    }
}

#[test]
fn integer_types_promote_and_wrap_as_numpy() {
    let dir = tempfile::tempdir().unwrap();
    let opts = CreateOptions {
        chunkshape: Some(vec![3]),
        ..CreateOptions::default()
    };
    let mut d = Dataset::create_with(dir.path().join("i.blz"), DType::I8, &[0], &opts).unwrap();
    d.append(&ndarray::arr1(&[100i8, -100, 7, 0, 127]).into_dyn().view())
        .unwrap();
    // int8 + Python int stays int8 and wraps; int8 / int -> float64; a weak float -> float64.
    let e = Expression::new("x + 100", vec![("x", Operand::Array(&d))]).unwrap();
    assert_eq!(e.dtype(), DType::I8);
    let v: Vec<i8> = e
        .eval(&e.full())
        .unwrap()
        .iter()
        .map(|&b| b as i8)
        .collect();
    assert_eq!(v, vec![-56, 0, 107, 100, -29]);
    assert_eq!(
        Expression::new("x / 2", vec![("x", Operand::Array(&d))])
            .unwrap()
            .dtype(),
        DType::F64
    );
    assert_eq!(
        Expression::new("x % 3 == 1", vec![("x", Operand::Array(&d))])
            .unwrap()
            .dtype(),
        DType::Bool
    );
    let s = Expression::new("x", vec![("x", Operand::Array(&d))])
        .unwrap()
        .reduce(Reduce::Sum, None, 0.0)
        .unwrap();
    assert_eq!(s.dtype, DType::I64);
    assert_eq!(i64::from_ne_bytes(s.data[..8].try_into().unwrap()), 134);
    // A Python integer out of the range of the array's type is refused, as numpy 2 does.
    let err = Expression::new("x + 300", vec![("x", Operand::Array(&d))]).unwrap_err();
    assert!(err.to_string().contains("out of bounds for int8"), "{err}");
    // Scalars bound as operands are weak too.
    let e = Expression::new(
        "x * k",
        vec![
            ("x", Operand::Array(&d)),
            ("k", Operand::Scalar(Lit::Float(0.5))),
        ],
    )
    .unwrap();
    assert_eq!(e.dtype(), DType::F64);
}

#[test]
fn errors_come_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let a = ArrayD::from_shape_fn(IxDyn(&[10]), |i| i[0] as f64);
    let b = ArrayD::from_shape_fn(IxDyn(&[4]), |i| i[0] as f64);
    let da = dataset(dir.path(), "a.blz", &a, &[3]);
    let db = dataset(dir.path(), "b.blz", &b, &[3]);
    let ops = || vec![("a", Operand::Array(&da)), ("b", Operand::Array(&db))];
    let msg = |t: &str| Expression::new(t, ops()).unwrap_err().to_string();
    assert!(msg("a + b").contains("broadcast"), "{}", msg("a + b"));
    assert!(msg("a + zz").contains("unknown name"));
    assert!(msg("frob(a)").contains("unknown function"));
    assert!(msg("a & 1").contains("not supported"));
    assert!(msg("(a > 1) - (a > 2)").contains("booleans"));
    // An output that exists: refused, and the existing dataset is untouched.
    let e = Expression::new("a * 2", vec![("a", Operand::Array(&da))]).unwrap();
    let err = e
        .compute(dir.path().join("b.blz"), &CreateOptions::default())
        .unwrap_err();
    assert!(!err.to_string().is_empty());
    assert_eq!(
        Dataset::open(dir.path().join("b.blz")).unwrap().shape(),
        &[4]
    );
}

#[test]
fn a_failure_midway_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let opts = CreateOptions {
        chunkshape: Some(vec![100]),
        ..CreateOptions::default()
    };
    let mut d = Dataset::create_with(dir.path().join("e.blz"), DType::I64, &[0], &opts).unwrap();
    // A negative exponent in the last chunk only: numpy refuses integers to negative powers.
    let mut v: Vec<i64> = vec![2; 100_000];
    v[99_999] = -1;
    d.append(&ndarray::Array1::from(v).into_dyn().view())
        .unwrap();
    let e = Expression::new("3 ** x", vec![("x", Operand::Array(&d))]).unwrap();
    let out = dir.path().join("out.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![1000]),
        ..CreateOptions::default()
    };
    let err = e.compute(&out, &opts).unwrap_err();
    assert!(err.to_string().contains("negative"), "{err}");
    assert!(!out.exists());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

#[test]
fn whole_reductions_of_moments_match() {
    let dir = tempfile::tempdir().unwrap();
    let a = ArrayD::from_shape_fn(IxDyn(&[300, 40]), |i| {
        ((i[0] * 40 + i[1]) as f64 * 0.37).sin() * 3.0 + 1.0
    });
    let da = dataset(dir.path(), "a.blz", &a, &[64, 40]);
    let e = Expression::new("a * 1.0", vec![("a", Operand::Array(&da))]).unwrap();
    let n = a.len() as f64;
    let mean = a.sum() / n;
    let var = a.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    close(
        &f64s(&e.reduce(Reduce::Mean, None, 0.0).unwrap().data),
        &[mean],
    );
    close(
        &f64s(&e.reduce(Reduce::Var, None, 1.0).unwrap().data),
        &[var],
    );
    close(
        &f64s(&e.reduce(Reduce::Std, Some(&[0, 1]), 1.0).unwrap().data),
        &[var.sqrt()],
    );
}
