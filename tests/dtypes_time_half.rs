//! float16, datetime64 and timedelta64 datasets: typed reads and writes through
//! `half::f16` and the `Datetime64`/`Timedelta64` newtypes, reopened metadata, NaT-aware
//! statistics, and float16 reductions in numpy's dtypes.

use blz::dtype::{Datetime64, Element, TimeUnit, Timedelta64, NAT};
use blz::scan::{reduce_axis, ReduceOutput, Reduction, ScanOptions};
use blz::{DType, Dataset};
use ndarray::{ArrayD, IxDyn};

#[test]
fn datetimes_roundtrip_in_any_unit_and_i64_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for unit in TimeUnit::ALL {
        let p = dir.path().join(format!("d{unit}.blz"));
        let dt = DType::DateTime(unit);
        let mut ds = Dataset::create(&p, dt, &[0]).unwrap();
        let v: Vec<Datetime64> = [0, -1, NAT, 1_234_567, i64::MAX]
            .into_iter()
            .map(Datetime64)
            .collect();
        ds.append(
            &ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.clone())
                .unwrap()
                .view(),
        )
        .unwrap();
        drop(ds);
        let ds = Dataset::open(&p).unwrap();
        assert_eq!(ds.dtype(), dt);
        assert_eq!(
            ds.storage_meta().dtype.name(),
            format!("datetime64[{unit}]")
        );
        let back: ArrayD<Datetime64> = ds.read().unwrap();
        assert_eq!(back.as_slice().unwrap(), v.as_slice());
        assert!(back[[2]].is_nat());
        // numpy refuses to mix dates with integers, and so do typed reads.
        assert!(ds.read::<i64>().is_err());
        assert!(ds.read::<Timedelta64>().is_err());
    }
    assert_eq!(Datetime64::dtype(), DType::DateTime(TimeUnit::Nanosecond));
}

#[test]
fn float16_reductions_are_numpys() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("h.blz");
    let mut ds = Dataset::create(&p, DType::F16, &[0]).unwrap();
    // 0.1 .. 100.0 as float16; numpy: np.arange(1, 1001, dtype='f2') / 10 sums to 50050 in
    // float32 and rounds to float16 50048.
    let v: Vec<half::f16> = (1..=1000)
        .map(|i| half::f16::from_f64(f64::from(i) / 10.0))
        .collect();
    ds.append(
        &ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.clone())
            .unwrap()
            .view(),
    )
    .unwrap();
    let opts = ScanOptions::default();
    let exact: f64 = v.iter().map(|x| x.to_f64()).sum();
    match reduce_axis(&ds, &opts, Reduction::Sum, None, 0.0).unwrap() {
        ReduceOutput::F16(a) => {
            assert_eq!(a.iter().next().copied(), Some(half::f16::from_f64(exact)))
        }
        other => panic!("sum of float16 gave {:?}", other.dtype()),
    }
    match reduce_axis(&ds, &opts, Reduction::Max, None, 0.0).unwrap() {
        ReduceOutput::F16(a) => {
            assert_eq!(a.iter().next().copied(), Some(half::f16::from_f64(100.0)))
        }
        other => panic!("max of float16 gave {:?}", other.dtype()),
    }
    let am = reduce_axis(&ds, &opts, Reduction::ArgMin, None, 0.0).unwrap();
    assert_eq!(am.scalar(), Some(blz::scan::Scalar::Int(0)));
    // A NaN makes min and max NaN, as numpy's.
    ds.append(
        &ArrayD::from_shape_vec(IxDyn(&[1]), vec![half::f16::NAN])
            .unwrap()
            .view(),
    )
    .unwrap();
    match reduce_axis(&ds, &opts, Reduction::Min, None, 0.0).unwrap() {
        ReduceOutput::F16(a) => assert!(a.iter().next().unwrap().is_nan()),
        other => panic!("min of float16 gave {:?}", other.dtype()),
    }
}

#[test]
fn reductions_of_dates_are_refused_in_rust() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.blz");
    let mut ds = Dataset::create(&p, DType::TimeDelta(TimeUnit::Second), &[0]).unwrap();
    ds.append(
        &ArrayD::from_shape_vec(IxDyn(&[2]), vec![Timedelta64(1), Timedelta64::NAT])
            .unwrap()
            .view(),
    )
    .unwrap();
    let e = reduce_axis(&ds, &ScanOptions::default(), Reduction::Sum, None, 0.0).unwrap_err();
    assert!(e.to_string().contains("timedelta64[s]"), "{e}");
}
