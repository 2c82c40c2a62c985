//! `LayerWriter::push_columns` (typed columns of numbers, many paths at once) against
//! `push` (one `Value` path at a time): the same paths split into random batches give the
//! same dataset, and the same inputs are refused the same way.

mod common;

use blz::layer::{Layer, LayerSchema, LayerWriter, Numbers, Value};
use blz::{DType, Error};
use proptest::prelude::*;

type Paths = Vec<(Vec<Value>, Option<Value>)>;

fn read(p: &std::path::Path) -> (Paths, blz::layer::LayerSizes) {
    let l = Layer::open(p).unwrap();
    assert!(l.verify().is_empty());
    (
        l.paths().collect::<blz::Result<_>>().unwrap(),
        l.sizes().clone(),
    )
}

fn schema() -> LayerSchema {
    let mut s = LayerSchema::indexed_zset(DType::I32, DType::F64, DType::I64);
    for c in &mut s.columns {
        c.chunklen = Some(7);
        c.fanout = 3;
    }
    s
}

proptest! {
    #![proptest_config(common::config(24))]

    #[test]
    fn batches_build_what_single_pushes_build(
        m in prop::collection::btree_map((-50i32..50, -8i32..8), any::<i64>(), 0..200),
        cuts in prop::collection::vec(0usize..200, 0..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let rows: Vec<(i32, f64, i64)> = m.iter().map(|((k, v), r)| (*k, f64::from(*v) / 4.0, *r)).collect();
        // One path at a time.
        let a = dir.path().join("a.blz");
        let mut w = LayerWriter::create(&a, schema()).unwrap();
        for (k, v, r) in &rows {
            w.push(&[Value::from(*k), Value::from(*v)], Some(Value::Int(*r))).unwrap();
        }
        w.finish().unwrap();
        // In batches cut at random places.
        let b = dir.path().join("b.blz");
        let mut w = LayerWriter::create(&b, schema()).unwrap();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(rows.len())).collect();
        cuts.push(0);
        cuts.push(rows.len());
        cuts.sort_unstable();
        for win in cuts.windows(2) {
            let part = &rows[win[0]..win[1]];
            let ks: Vec<i32> = part.iter().map(|r| r.0).collect();
            let vs: Vec<f64> = part.iter().map(|r| r.1).collect();
            let rs: Vec<i64> = part.iter().map(|r| r.2).collect();
            w.push_columns(&[Numbers::I32(&ks), Numbers::F64(&vs)], Some(Numbers::I64(&rs))).unwrap();
        }
        w.finish().unwrap();
        let (pa, sa) = read(&a);
        let (pb, sb) = read(&b);
        prop_assert_eq!(&pa, &pb);
        prop_assert_eq!(sa, sb);
        prop_assert_eq!(pa.len(), rows.len());
    }
}

#[test]
fn bad_batches_are_refused_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.blz");
    let k = [1i32, 2, 3];
    let v = [0.5f64, 0.5, 0.5];
    let r = [1i64, 1, 1];
    let cases: Vec<(Vec<Numbers<'_>>, Option<Numbers<'_>>, &str)> = vec![
        (
            vec![Numbers::I32(&k)],
            Some(Numbers::I64(&r)),
            "1 key columns given for 2",
        ),
        (
            vec![Numbers::I64(&r), Numbers::F64(&v)],
            Some(Numbers::I64(&r)),
            "holds int32, given int64",
        ),
        (
            vec![Numbers::I32(&k), Numbers::F64(&v[..2])],
            Some(Numbers::I64(&r)),
            "key columns of 3 and 2 rows",
        ),
        (
            vec![Numbers::I32(&k), Numbers::F64(&v)],
            Some(Numbers::I32(&k)),
            "3 weights of int32 given",
        ),
        (
            vec![Numbers::I32(&k), Numbers::F64(&v)],
            None,
            "give one with every row",
        ),
        (
            vec![Numbers::I32(&[1, 1]), Numbers::F64(&[0.5, 0.5])],
            Some(Numbers::I64(&[1, 1])),
            "duplicate input",
        ),
        (
            vec![Numbers::I32(&[1, 1]), Numbers::F64(&[0.5, -0.0])],
            Some(Numbers::I64(&[1, 1])),
            "unsorted input",
        ),
        (
            vec![Numbers::I32(&[2, 1]), Numbers::F64(&[0.5, 0.5])],
            Some(Numbers::I64(&[1, 1])),
            "unsorted input",
        ),
    ];
    for (keys, weights, want) in cases {
        let mut w = LayerWriter::create(&p, schema()).unwrap();
        match w.push_columns(&keys, weights) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains(want), "{m} / {want}"),
            other => panic!("{want}: {other:?}"),
        }
        // Abandoned: nothing more goes in, and nothing is left.
        assert!(w
            .push(&[1i32.into(), 0.5.into()], Some(1i64.into()))
            .is_err());
        drop(w);
        assert!(!p.exists());
    }
    // Order is checked across batches and against single pushes.
    let mut w = LayerWriter::create(&p, schema()).unwrap();
    w.push(&[5i32.into(), 1.0.into()], Some(1i64.into()))
        .unwrap();
    w.push_columns(
        &[Numbers::I32(&[5, 6]), Numbers::F64(&[2.0, -1.0])],
        Some(Numbers::I64(&[2, 3])),
    )
    .unwrap();
    match w.push_columns(
        &[Numbers::I32(&[6]), Numbers::F64(&[-1.0])],
        Some(Numbers::I64(&[1])),
    ) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("duplicate"), "{m}"),
        other => panic!("{other:?}"),
    }
    // Columns of strings or tuples are for push.
    let s = LayerSchema::wset(blz::layer::LeafKind::VarStr, DType::I64);
    let mut w = LayerWriter::create(dir.path().join("s.blz"), s).unwrap();
    assert!(w
        .push_columns(&[Numbers::U8(b"ab")], Some(Numbers::I64(&[1, 2])))
        .is_err());
    // An empty batch is nothing.
    let mut w = LayerWriter::create(&p, schema()).unwrap();
    w.push_columns(
        &[Numbers::I32(&[]), Numbers::F64(&[])],
        Some(Numbers::I64(&[])),
    )
    .unwrap();
    w.push_columns(
        &[Numbers::I32(&[3]), Numbers::F64(&[0.0])],
        Some(Numbers::I64(&[9])),
    )
    .unwrap();
    w.finish().unwrap();
    assert_eq!(
        read(&p).0,
        vec![(vec![Value::Int(3), Value::Float(0.0)], Some(Value::Int(9)))]
    );
}
