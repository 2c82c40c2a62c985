//! Tuple columns beyond the model tests: each leaf field is a sub-column of its own, read
//! only through its chunks; damage in one field's chunk is an error naming that file and
//! chunk; bad values and settings are refused and leave nothing; an external sort orders
//! tuples as Rust does.

mod common;

use blz::layer::{
    ColumnDef, FilterKind, Layer, LayerSchema, LayerWriter, SortOptions, Value, ValueType,
};
use blz::{DType, Error};
use common::flip_byte_in_chunk;
use std::collections::BTreeMap;

fn key_type() -> ValueType {
    ValueType::parse("(uint32,varstr,(int8,float64))").unwrap()
}

fn key(i: u32) -> Value {
    (
        i / 7,
        format!("s{}", i % 5),
        ((i % 3) as i8 - 1, f64::from(i) / 8.0),
    )
        .into()
}

#[test]
fn fields_are_sub_columns_and_damage_names_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut keys: Vec<Value> = (0..3000).map(key).collect();
    keys.sort();
    let schema = LayerSchema::new(vec![ColumnDef::new("k", key_type()).with_chunklen(100)])
        .with_weight("w", DType::I64);
    let mut w = LayerWriter::create(&p, schema).unwrap();
    for (i, k) in keys.iter().enumerate() {
        w.push(std::slice::from_ref(k), Some(Value::Int(i as i64)))
            .unwrap();
    }
    w.finish().unwrap();
    // One directory per leaf field, none of the column's own data files.
    for j in 0..4 {
        assert!(
            p.join(format!("data/k/fields/{j}/__1__.bin")).is_file(),
            "{j}"
        );
    }
    assert!(!p.join("data/k/__1__.bin").exists());
    let layer = Layer::open(&p).unwrap();
    assert!(layer.verify().is_empty());
    assert_eq!(layer.kind(0), Some(&key_type()));
    let got: Vec<Value> = layer
        .paths()
        .map(|r| r.unwrap().0.into_iter().next().unwrap())
        .collect();
    assert_eq!(got, keys);
    // A flipped byte in field 2's chunk 3 is a checksum error naming that file and chunk.
    let f = p.join("data/k/fields/2/__1__.bin");
    flip_byte_in_chunk(&f, 3);
    let layer = Layer::open(&p).unwrap();
    let errs = layer.verify();
    assert!(!errs.is_empty());
    let msg = errs[0].to_string();
    assert!(
        msg.contains("fields/2/__1__.bin") && msg.contains("chunk 3"),
        "{msg}"
    );
    let mut c = layer.cursor();
    assert!(c.nth(350));
    assert!(c.value().is_err());
    // Rows in other chunks still read.
    assert!(c.nth(50));
    assert_eq!(c.value().unwrap(), Some(keys[50].clone()));
    // A missing field directory is an error, not a panic.
    std::fs::remove_dir_all(p.join("data/k/fields/3")).unwrap();
    let layer = Layer::open(&p).unwrap();
    let mut c = layer.cursor();
    assert!(c.nth(10));
    assert!(c.value().is_err());
}

#[test]
fn bad_tuples_and_settings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.blz");
    let schema = || LayerSchema::new(vec![ColumnDef::new("k", key_type())]);
    for bad in [
        Value::Tuple(vec![1u32.into(), "a".into()]),
        (1u32, 2u32, (0i8, 0.5)).into(),
        (1u32, "a", (300i32, 0.5)).into(),
        Value::UInt(1),
    ] {
        let mut w = LayerWriter::create(&p, schema()).unwrap();
        match w.push(std::slice::from_ref(&bad), None) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("does not fit"), "{m}"),
            other => panic!("{bad}: {other:?}"),
        }
        drop(w);
        assert!(!p.exists());
    }
    // Unsorted tuples.
    let mut w = LayerWriter::create(&p, schema()).unwrap();
    w.push(&[key(10)], None).unwrap();
    assert!(w.push(&[key(3)], None).is_err());
    drop(w);
    assert!(!p.exists());
    // Exact filters need integers; auto picks Bloom for tuples.
    let exact = LayerSchema::new(vec![
        ColumnDef::new("k", key_type()).with_filter_kind(FilterKind::Exact)
    ]);
    assert!(matches!(
        LayerWriter::create(&p, exact),
        Err(Error::InvalidArgument(_))
    ));
    let s = schema().to_storage().unwrap();
    assert_eq!(s.columns[0].filter.unwrap().kind, FilterKind::Bloom);
    assert_eq!(s.columns[0].dtype, "(uint32,varstr,(int8,float64))");
    // A damaged dtype in meta/storage is bad metadata.
    let mut w = LayerWriter::create(&p, schema()).unwrap();
    w.push(&[key(1)], None).unwrap();
    w.finish().unwrap();
    let sp = p.join("meta/storage");
    let text = std::fs::read_to_string(&sp).unwrap();
    for bad in ["(uint32,varstr,(int8,float64)", "()", "(uint32,bool)"] {
        std::fs::write(&sp, text.replace("(uint32,varstr,(int8,float64))", bad)).unwrap();
        assert!(
            matches!(Layer::open(&p), Err(Error::InvalidMetadata { .. })),
            "{bad}"
        );
    }
}

#[test]
fn an_external_sort_orders_tuples_as_rust_does() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.blz");
    let schema = LayerSchema::new(vec![
        ColumnDef::new("k", ValueType::parse("(varstr,int16)").unwrap()),
        ColumnDef::new("v", ValueType::tuple([DType::U8, DType::U8])),
    ])
    .with_weight("w", DType::I64);
    // A small budget: many runs, merged in passes.
    let opts = SortOptions {
        fan_in: 3,
        ..SortOptions::with_memory(4096)
    };
    let mut w = LayerWriter::create_unsorted(&p, schema, opts).unwrap();
    type Path = ((String, i16), (u8, u8));
    let mut model: BTreeMap<Path, i64> = BTreeMap::new();
    for i in 0..2000u32 {
        let k = (format!("{}", (i * 7919) % 13), ((i * 31) % 9) as i16 - 4);
        let v = ((i % 3) as u8, (i % 5) as u8);
        let r = if i % 4 == 0 { -1 } else { 1 };
        w.push(&[k.clone().into(), v.into()], Some(Value::Int(r)))
            .unwrap();
        *model.entry((k, v)).or_default() += r;
    }
    let report = w.finish().unwrap();
    assert!(report.runs > 3, "{report:?}");
    let layer = Layer::open(&p).unwrap();
    let got: Vec<(Vec<Value>, Option<Value>)> = layer.paths().collect::<blz::Result<_>>().unwrap();
    let want: Vec<(Vec<Value>, Option<Value>)> = model
        .into_iter()
        .filter(|(_, r)| *r != 0)
        .map(|((k, v), r)| (vec![k.into(), v.into()], Some(Value::Int(r))))
        .collect();
    assert_eq!(got, want);
}
