//! DBSP's named batch shapes as layer datasets: WSet `(K, R)`, IndexedZSet `K -> (V, R)`
//! and ValBatch `K -> V -> [(T, R)]`, built from random `BTreeMap` models (with tuple keys
//! among them), read back path by path, kept by sorts and merges, and checked against the
//! columns when built and opened.

mod common;

use blz::layer::{
    schema_of, ColumnDef, Layer, LayerSchema, LayerWriter, Shape, SortOptions, Value, ValueType,
};
use blz::{DType, Error};
use proptest::prelude::*;
use std::collections::BTreeMap;

type Path = (Vec<Value>, Option<Value>);

fn build(path: &std::path::Path, schema: LayerSchema, paths: &[Path]) -> Layer {
    let mut w = LayerWriter::create(path, schema).unwrap();
    for (p, wt) in paths {
        w.push(p, wt.clone()).unwrap();
    }
    w.finish().unwrap();
    Layer::open(path).unwrap()
}

fn read(layer: &Layer) -> Vec<Path> {
    layer.paths().collect::<blz::Result<_>>().unwrap()
}

proptest! {
    #![proptest_config(common::config(16))]

    /// WSet `(u64, i64)`, as the dbsp bench has it.
    #[test]
    fn wsets_read_back_as_the_model(m in prop::collection::btree_map(any::<u64>(), any::<i64>(), 0..80)) {
        let dir = tempfile::tempdir().unwrap();
        let want: Vec<Path> = m.iter().map(|(k, r)| (vec![Value::UInt(*k)], Some(Value::Int(*r)))).collect();
        let layer = build(&dir.path().join("w.blz"), LayerSchema::wset(DType::U64, DType::I64), &want);
        prop_assert_eq!(layer.shape(), Some(Shape::WSet));
        prop_assert_eq!(layer.storage_meta().columns[0].name.as_str(), "key");
        prop_assert_eq!(read(&layer), want);
    }

    /// IndexedZSet `(int64, varstr) -> float64` with `i32` weights.
    #[test]
    fn indexed_zsets_with_tuple_keys(m in prop::collection::btree_map((-5i64..5, "[a-c]{0,2}"), prop::collection::btree_map(-4i32..4, -3i32..3, 1..4), 1..30)) {
        let dir = tempfile::tempdir().unwrap();
        let mut want = Vec::new();
        for (k, vs) in &m {
            for (v, r) in vs {
                want.push((vec![Value::from(k.clone()), Value::Float(f64::from(*v) / 4.0)], Some(Value::Int(i64::from(*r)))));
            }
        }
        let schema = LayerSchema::indexed_zset(ValueType::parse("(int64,varstr)").unwrap(), DType::F64, DType::I32);
        let layer = build(&dir.path().join("z.blz"), schema, &want);
        prop_assert_eq!(layer.shape(), Some(Shape::IndexedZSet));
        prop_assert_eq!(read(&layer), want);
    }

    /// ValBatch `K -> V -> [(T, R)]`: varstr keys, (u8, i16) values, u32 times.
    #[test]
    fn val_batches_read_back_as_the_model(m in prop::collection::btree_map("[a-d]{0,3}", prop::collection::btree_map((0u8..3, -2i16..2), prop::collection::btree_map(0u32..5, -3i64..3, 1..4), 1..4), 0..15)) {
        let dir = tempfile::tempdir().unwrap();
        let mut want = Vec::new();
        for (k, vs) in &m {
            for (v, ts) in vs {
                for (t, r) in ts {
                    want.push((vec![Value::from(k.clone()), Value::from(*v), Value::UInt(u64::from(*t))], Some(Value::Int(*r))));
                }
            }
        }
        let schema = LayerSchema::val_batch(
            blz::layer::LeafKind::VarStr,
            ValueType::tuple([DType::U8, DType::I16]),
            DType::U32,
            DType::I64,
        );
        let layer = build(&dir.path().join("v.blz"), schema, &want);
        prop_assert_eq!(layer.shape(), Some(Shape::ValBatch));
        prop_assert_eq!(layer.storage_meta().columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), vec!["key", "val", "time"]);
        prop_assert_eq!(read(&layer), want);
    }
}

#[test]
fn shapes_survive_sorts_and_merges() {
    let dir = tempfile::tempdir().unwrap();
    let schema = LayerSchema::indexed_zset(DType::I64, DType::I64, DType::I64);
    let mut w =
        LayerWriter::create_unsorted(dir.path().join("a.blz"), schema, SortOptions::default())
            .unwrap();
    let mut model: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    for i in 0..500i64 {
        let (k, v, r) = ((i * 37) % 23, (i * 11) % 7, i % 5 - 2);
        w.push(&[k.into(), v.into()], Some(r.into())).unwrap();
        *model.entry((k, v)).or_default() += r;
    }
    w.finish().unwrap();
    let a = Layer::open(dir.path().join("a.blz")).unwrap();
    assert_eq!(a.shape(), Some(Shape::IndexedZSet));
    let want: Vec<Path> = model
        .iter()
        .filter(|(_, r)| **r != 0)
        .map(|((k, v), r)| (vec![Value::Int(*k), Value::Int(*v)], Some(Value::Int(*r))))
        .collect();
    assert_eq!(read(&a), want);
    assert_eq!(schema_of(&a).unwrap().shape, Some(Shape::IndexedZSet));
    let out = dir.path().join("m.blz");
    Layer::merge(&[dir.path().join("a.blz")], &out, false).unwrap();
    let m = Layer::open(&out).unwrap();
    assert_eq!(m.shape(), Some(Shape::IndexedZSet));
    assert_eq!(read(&m), want);
}

#[test]
fn a_shape_must_match_the_columns() {
    let dir = tempfile::tempdir().unwrap();
    let two = || {
        LayerSchema::new(vec![
            ColumnDef::new("a", DType::I64),
            ColumnDef::new("b", DType::I64),
        ])
    };
    for (schema, why) in [
        (
            two().with_weight("w", DType::I64).with_shape(Shape::WSet),
            "a wset has 1 column",
        ),
        (two().with_shape(Shape::IndexedZSet), "no weight"),
        (
            two()
                .with_weight("w", DType::I64)
                .with_shape(Shape::ValBatch),
            "a val_batch has 3 columns",
        ),
    ] {
        match LayerWriter::create(dir.path().join("x.blz"), schema) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains(why), "{m}"),
            other => panic!("{:?}", other.map(|_| ())),
        }
        assert!(!dir.path().join("x.blz").exists());
    }
    // A recorded shape that does not match the columns is damaged metadata.
    let p = dir.path().join("w.blz");
    build(
        &p,
        LayerSchema::wset(DType::I64, DType::I64),
        &[(vec![Value::Int(1)], Some(Value::Int(1)))],
    );
    let sp = p.join("meta/storage");
    let text = std::fs::read_to_string(&sp).unwrap();
    assert!(text.contains("\"wset\""), "{text}");
    std::fs::write(&sp, text.replace("\"wset\"", "\"val_batch\"")).unwrap();
    match Layer::open(&p) {
        Err(Error::InvalidMetadata { path, .. }) => assert_eq!(path, sp),
        other => panic!("{:?}", other.map(|_| ())),
    }
    std::fs::write(&sp, text.replace("\"wset\"", "\"bag\"")).unwrap();
    assert!(Layer::open(&p).is_err());
}

#[test]
fn shape_names_round_trip() {
    for s in [Shape::WSet, Shape::IndexedZSet, Shape::ValBatch] {
        assert_eq!(Shape::parse(s.name()).unwrap(), s);
        assert_eq!(s.column_names().len(), s.ncolumns());
    }
    assert!(Shape::parse("zset").is_err());
}
