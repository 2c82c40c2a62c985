//! Consolidating merges of layer datasets (`blz::layer::merge`) against a model: random
//! batches as `BTreeMap`s from key path to weight, built as layer datasets with random chunk
//! lengths and fan-outs, merged; the result holds every path whose weights add up to
//! something other than zero, with that sum, and nothing else (so no key is left without
//! rows), and it seeks and filters like any layer dataset. Also: merges without weights
//! (the union), float weights, inputs that differ, weights that overflow, and an output
//! that appears whole or not at all.

mod common;

use blz::layer::{
    schema_of, ColumnDef, FilterSetting, Layer, LayerSchema, LayerWriter, LeafKind, Value,
    ValueType,
};
use blz::DType;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type Batch = BTreeMap<Vec<Value>, Option<Value>>;

fn schema(
    kinds: &[impl Into<ValueType> + Clone],
    weight: Option<DType>,
    chunklen: u64,
    fanout: u64,
) -> LayerSchema {
    let cols = kinds
        .iter()
        .enumerate()
        .map(|(i, k)| {
            ColumnDef::new(&format!("c{i}"), k.clone())
                .with_chunklen(chunklen + i as u64)
                .with_fanout(fanout)
                .with_filter(FilterSetting::BitsPerValue(12))
        })
        .collect();
    let mut s = LayerSchema::new(cols);
    if let Some(d) = weight {
        s = s.with_weight("w", d);
    }
    s.superchunksize = 3;
    s
}

fn build(path: &Path, schema: LayerSchema, batch: &Batch) -> Layer {
    let mut w = LayerWriter::create(path, schema).unwrap();
    for (p, wt) in batch {
        w.push(p, wt.clone()).unwrap();
    }
    w.finish().unwrap();
    Layer::open(path).unwrap()
}

/// Every whole path of `layer` with its weight, in the order a walk of its cursors gives.
fn paths(layer: &Layer) -> Vec<(Vec<Value>, Option<Value>)> {
    fn walk(
        layer: &Layer,
        mut c: blz::layer::Cursor<'_>,
        prefix: &mut Vec<Value>,
        out: &mut Vec<(Vec<Value>, Option<Value>)>,
    ) {
        assert!(c.first(), "a row group with no rows");
        loop {
            prefix.push(c.value().unwrap().unwrap());
            match c.child().unwrap() {
                Some(child) => walk(layer, child, prefix, out),
                None => {
                    let w = if layer.storage_meta().weight.is_some() {
                        c.weight().unwrap()
                    } else {
                        None
                    };
                    out.push((prefix.clone(), w));
                }
            }
            prefix.pop();
            if !c.next() {
                break;
            }
        }
    }
    let mut out = Vec::new();
    if layer.rows(0) > 0 {
        walk(layer, layer.cursor(), &mut Vec::new(), &mut out);
    }
    out
}

/// The model's merge: weights of equal paths added, zero sums left out.
fn model_merge(batches: &[Batch]) -> Vec<(Vec<Value>, Option<Value>)> {
    let mut m: BTreeMap<Vec<Value>, Option<i64>> = BTreeMap::new();
    for b in batches {
        for (p, w) in b {
            let e = m.entry(p.clone()).or_insert(w.as_ref().map(|_| 0));
            if let (Some(acc), Some(Value::Int(x))) = (e.as_mut(), w) {
                *acc += x;
            }
        }
    }
    m.into_iter()
        .filter(|(_, w)| *w != Some(0))
        .map(|(p, w)| (p, w.map(Value::Int)))
        .collect()
}

fn inputs(
    dir: &Path,
    kinds: &[impl Into<ValueType> + Clone],
    weight: Option<DType>,
    batches: &[Batch],
    cl: u64,
    fan: u64,
) -> Vec<Layer> {
    batches
        .iter()
        .enumerate()
        .map(|(i, b)| {
            build(
                &dir.join(format!("in{i}.blz")),
                schema(kinds, weight, cl + i as u64, fan),
                b,
            )
        })
        .collect()
}

fn check_merge(
    kinds: &[impl Into<ValueType> + Clone],
    weight: Option<DType>,
    batches: &[Batch],
    cl: u64,
    fan: u64,
) {
    let dir = tempfile::tempdir().unwrap();
    let layers = inputs(dir.path(), kinds, weight, batches, cl, fan);
    let refs: Vec<&Layer> = layers.iter().collect();
    let out = dir.path().join("out.blz");
    let report = blz::layer::merge(&refs, &out, schema(kinds, weight, cl, fan)).unwrap();
    let want = model_merge(batches);
    let merged = Layer::open(&out).unwrap();
    let got = paths(&merged);
    assert_eq!(got, want);
    let read: u64 = batches.iter().map(|b| b.len() as u64).sum();
    assert_eq!(report.paths_read, read);
    assert_eq!(report.paths_written, want.len() as u64);
    assert_eq!(report.sizes, merged.sizes().clone());
    assert!(merged.verify().is_empty(), "{:?}", merged.verify());
    // It seeks and filters like any layer: every first key is found, and a key every path
    // of which cancelled out is not.
    let mut keys: BTreeMap<Value, bool> = BTreeMap::new();
    for b in batches {
        for p in b.keys() {
            keys.insert(p[0].clone(), false);
        }
    }
    for (p, _) in &want {
        keys.insert(p[0].clone(), true);
    }
    for (k, present) in keys {
        assert_eq!(merged.contains(&k).unwrap(), present, "{k:?}");
        let mut c = merged.cursor();
        if present {
            assert!(c.seek_ge(&k).unwrap());
            assert_eq!(c.value().unwrap(), Some(k));
        }
    }
    // Layer::merge by paths, with the first input's settings, gives the same paths.
    let again = dir.path().join("again.blz");
    let names: Vec<PathBuf> = (0..batches.len())
        .map(|i| dir.path().join(format!("in{i}.blz")))
        .collect();
    if !names.is_empty() {
        Layer::merge(&names, &again, false).unwrap();
        assert_eq!(paths(&Layer::open(&again).unwrap()), want);
    }
}

fn int_batch(max_key: i64, inner: bool) -> impl Strategy<Value = Batch> {
    let key = -max_key..max_key;
    if inner {
        prop::collection::btree_map((key.clone(), 0i64..4), -2i64..3, 0..40)
            .prop_map(|m| {
                m.into_iter()
                    .map(|((a, b), w)| (vec![Value::Int(a), Value::Int(b)], Some(Value::Int(w))))
                    .collect()
            })
            .boxed()
    } else {
        prop::collection::btree_map(key, -2i64..3, 0..60)
            .prop_map(|m| {
                m.into_iter()
                    .map(|(a, w)| (vec![Value::Int(a)], Some(Value::Int(w))))
                    .collect()
            })
            .boxed()
    }
}

fn str_batch() -> impl Strategy<Value = Batch> {
    prop::collection::btree_map(("[a-c]{0,3}", -3i64..3, 0u64..3), -2i64..3, 0..40).prop_map(|m| {
        m.into_iter()
            .map(|((a, b, c), w)| {
                (
                    vec![Value::Str(a), Value::Int(b), Value::UInt(c)],
                    Some(Value::Int(w)),
                )
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(common::config(24))]

    /// WSet `(K, R)`: one key column, an integer weight; weights of -2..=2 make many sums
    /// cancel.
    #[test]
    fn wsets_merge_as_the_model(batches in prop::collection::vec(int_batch(30, false), 1..5), cl in 1u64..5, fan in 2u64..4) {
        check_merge(&[LeafKind::Fixed(DType::I64)], Some(DType::I64), &batches, cl, fan);
    }

    /// IndexedZSet `K -> (V, R)`: a row group per key; a key whose values all cancel drops.
    #[test]
    fn indexed_zsets_merge_as_the_model(batches in prop::collection::vec(int_batch(12, true), 1..5), cl in 1u64..5, fan in 2u64..4) {
        check_merge(&[LeafKind::Fixed(DType::I64), LeafKind::Fixed(DType::I64)], Some(DType::I64), &batches, cl, fan);
    }

    /// Three columns, strings on the outside.
    #[test]
    fn three_columns_merge_as_the_model(batches in prop::collection::vec(str_batch(), 1..4), cl in 1u64..5, fan in 2u64..4) {
        check_merge(&[LeafKind::VarStr, LeafKind::Fixed(DType::I64), LeafKind::Fixed(DType::U64)], Some(DType::I64), &batches, cl, fan);
    }

    /// Without weights a merge is the union of the paths.
    #[test]
    fn unweighted_merge_is_the_union(batches in prop::collection::vec(int_batch(20, true), 1..4), cl in 1u64..5) {
        let batches: Vec<Batch> = batches.into_iter().map(|b| b.into_keys().map(|p| (p, None)).collect()).collect();
        check_merge(&[LeafKind::Fixed(DType::I64), LeafKind::Fixed(DType::I64)], None, &batches, cl, 2);
    }
}

fn tuple_batch() -> impl Strategy<Value = Batch> {
    prop::collection::btree_map(
        ((-3i64..3, "[a-b]{0,2}"), (0u8..3, -1i32..1)),
        -2i64..3,
        0..40,
    )
    .prop_map(|m| {
        m.into_iter()
            .map(|(((a, b), (c, d)), w)| {
                (
                    vec![Value::from((a, b)), Value::from((c, d))],
                    Some(Value::Int(w)),
                )
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(common::config(16))]

    /// IndexedZSet of tuples `(int64, varstr) -> (uint8, int32)`.
    #[test]
    fn tuple_columns_merge_as_the_model(batches in prop::collection::vec(tuple_batch(), 1..4), cl in 1u64..5, fan in 2u64..4) {
        let kinds = [ValueType::parse("(int64,varstr)").unwrap(), ValueType::parse("(uint8,int32)").unwrap()];
        check_merge(&kinds, Some(DType::I64), &batches, cl, fan);
    }
}

fn wset(pairs: &[(i64, Value)]) -> Batch {
    pairs
        .iter()
        .map(|(k, w)| (vec![Value::Int(*k)], Some(w.clone())))
        .collect()
}

#[test]
fn float_weights_add_and_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let s = || schema(&[LeafKind::Fixed(DType::I64)], Some(DType::F64), 2, 2);
    let a = build(
        &dir.path().join("a.blz"),
        s(),
        &wset(&[
            (1, Value::Float(0.5)),
            (2, Value::Float(1.5)),
            (4, Value::Float(-1.0)),
        ]),
    );
    let b = build(
        &dir.path().join("b.blz"),
        s(),
        &wset(&[
            (2, Value::Float(-1.5)),
            (3, Value::Float(2.0)),
            (4, Value::Float(3.0)),
        ]),
    );
    let out = dir.path().join("o.blz");
    let r = blz::layer::merge(&[&a, &b], &out, s()).unwrap();
    assert_eq!(
        (r.paths_read, r.paths_written, r.paths_cancelled),
        (6, 3, 1)
    );
    assert_eq!(
        paths(&Layer::open(&out).unwrap()),
        vec![
            (vec![Value::Int(1)], Some(Value::Float(0.5))),
            (vec![Value::Int(3)], Some(Value::Float(2.0))),
            (vec![Value::Int(4)], Some(Value::Float(2.0))),
        ]
    );
}

#[test]
fn everything_cancelling_leaves_an_empty_layer() {
    let dir = tempfile::tempdir().unwrap();
    let s = || {
        schema(
            &[LeafKind::Fixed(DType::I64), LeafKind::VarStr],
            Some(DType::I32),
            2,
            2,
        )
    };
    let p = |k: i64, v: &str, w: i64| {
        (
            vec![Value::Int(k), Value::Str(v.into())],
            Some(Value::Int(w)),
        )
    };
    let a = build(
        &dir.path().join("a.blz"),
        s(),
        &[p(1, "x", 2), p(1, "y", 1)].into_iter().collect(),
    );
    let b = build(
        &dir.path().join("b.blz"),
        s(),
        &[p(1, "x", -2), p(1, "y", -1)].into_iter().collect(),
    );
    let out = dir.path().join("o.blz");
    let r = blz::layer::merge(&[&a, &b], &out, s()).unwrap();
    assert_eq!(r.paths_written, 0);
    let l = Layer::open(&out).unwrap();
    assert_eq!((l.rows(0), l.rows(1)), (0, 0));
    assert!(!l.contains(&Value::Int(1)).unwrap());
}

#[test]
fn what_cannot_be_merged_is_refused_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let i64w = || schema(&[LeafKind::Fixed(DType::I64)], Some(DType::I64), 4, 2);
    let a = build(
        &d.join("a.blz"),
        i64w(),
        &wset(&[(1, Value::Int(i64::MAX)), (2, Value::Int(1))]),
    );
    let b = build(&d.join("b.blz"), i64w(), &wset(&[(1, Value::Int(1))]));
    let out = d.join("o.blz");
    // No inputs.
    assert!(matches!(
        blz::layer::merge(&[], &out, i64w()),
        Err(blz::Error::InvalidArgument(_))
    ));
    // Weights that overflow: an error naming the path, and no output.
    let e = blz::layer::merge(&[&a, &b], &out, i64w()).unwrap_err();
    assert!(e.to_string().contains("overflow"), "{e}");
    assert!(!out.exists());
    // Other columns, another weight type, no weight.
    let u = build(
        &d.join("u.blz"),
        schema(&[LeafKind::Fixed(DType::U64)], Some(DType::I64), 4, 2),
        &BTreeMap::new(),
    );
    let f = build(
        &d.join("f.blz"),
        schema(&[LeafKind::Fixed(DType::I64)], Some(DType::F64), 4, 2),
        &BTreeMap::new(),
    );
    let n = build(
        &d.join("n.blz"),
        schema(&[LeafKind::Fixed(DType::I64)], None, 4, 2),
        &BTreeMap::new(),
    );
    for other in [&u, &f, &n] {
        let e = blz::layer::merge(&[&b, other], &out, i64w()).unwrap_err();
        assert!(e.to_string().contains("cannot be merged"), "{e}");
    }
    // A schema unlike the inputs'.
    let e = blz::layer::merge(
        &[&b],
        &out,
        schema(&[LeafKind::Fixed(DType::U64)], Some(DType::I64), 4, 2),
    )
    .unwrap_err();
    assert!(e.to_string().contains("schema"), "{e}");
    assert!(!out.exists());
    // A sum that does not fit a narrower weight type is refused by the writer, whole.
    let narrow = || schema(&[LeafKind::Fixed(DType::I64)], Some(DType::I8), 4, 2);
    let x = build(
        &d.join("x.blz"),
        narrow(),
        &wset(&[(1, Value::Int(100)), (2, Value::Int(1))]),
    );
    let y = build(&d.join("y.blz"), narrow(), &wset(&[(1, Value::Int(100))]));
    assert!(blz::layer::merge(&[&x, &y], &out, narrow()).is_err());
    assert!(!out.exists());
    // An existing output is replaced only with overwrite, and only by a finished merge.
    let kept = d.join("kept.blz");
    build(&kept, i64w(), &wset(&[(9, Value::Int(9))]));
    assert!(blz::layer::merge(&[&b], &kept, i64w()).is_err());
    assert!(Layer::merge(&[d.join("a.blz"), d.join("b.blz")], &kept, true).is_err());
    assert_eq!(
        paths(&Layer::open(&kept).unwrap()),
        vec![(vec![Value::Int(9)], Some(Value::Int(9)))]
    );
    let mut s = schema_of(&b).unwrap();
    s.overwrite = true;
    blz::layer::merge(&[&b], &kept, s).unwrap();
    assert_eq!(
        paths(&Layer::open(&kept).unwrap()),
        vec![(vec![Value::Int(1)], Some(Value::Int(1)))]
    );
}

/// The schema read back from a layer builds one with the same settings.
#[test]
fn schema_of_gives_the_settings_back() {
    let dir = tempfile::tempdir().unwrap();
    let s = schema(
        &[LeafKind::VarStr, LeafKind::Fixed(DType::U32)],
        Some(DType::F32),
        3,
        5,
    );
    let l = build(&dir.path().join("a.blz"), s.clone(), &BTreeMap::new());
    let back = schema_of(&l).unwrap();
    let (m1, m2) = (s.to_storage().unwrap(), back.to_storage().unwrap());
    assert_eq!(m1.columns, m2.columns);
    assert_eq!(m1.weight, m2.weight);
}
