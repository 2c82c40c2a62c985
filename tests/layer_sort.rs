//! Building layer datasets from unsorted input (`LayerWriter::create_unsorted`, an external
//! sort) against a model: random rows in random order, with repeated paths and weights that
//! cancel, pushed with memory budgets small enough to force many sorted runs and merge
//! passes; the dataset holds every path whose weights add up to something other than zero,
//! with that sum (without weights: every path once), like a `BTreeMap` built from the rows.
//! Also: empty input, input that fits in memory (no run), where the runs live and that they
//! go, overflowing weights, and an abandoned build leaving nothing.

mod common;

use blz::layer::{
    ColumnDef, FilterSetting, Layer, LayerSchema, LayerWriter, LeafKind, SortOptions, Value,
};
use blz::DType;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

type Rows = Vec<(Vec<Value>, Option<Value>)>;

fn schema(kinds: &[LeafKind], weight: Option<DType>, chunklen: u64) -> LayerSchema {
    let cols = kinds
        .iter()
        .enumerate()
        .map(|(i, k)| {
            ColumnDef::new(&format!("c{i}"), *k)
                .with_chunklen(chunklen + i as u64)
                .with_fanout(3)
                .with_filter(FilterSetting::BitsPerValue(10))
        })
        .collect();
    let mut s = LayerSchema::new(cols);
    if let Some(d) = weight {
        s = s.with_weight("w", d);
    }
    s.superchunksize = 4;
    s
}

/// Every whole path of `layer` with its weight, in cursor order.
fn paths(layer: &Layer) -> Rows {
    fn walk(layer: &Layer, mut c: blz::layer::Cursor<'_>, prefix: &mut Vec<Value>, out: &mut Rows) {
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

/// The model: weights of equal paths added, zero sums left out; without weights, the set
/// of paths.
fn model(rows: &Rows) -> Rows {
    let mut m: BTreeMap<Vec<Value>, Option<i64>> = BTreeMap::new();
    for (p, w) in rows {
        let e = m.entry(p.clone()).or_insert(w.as_ref().map(|_| 0));
        if let (Some(acc), Some(Value::Int(x))) = (e.as_mut(), w) {
            *acc += x;
        }
    }
    m.into_iter()
        .filter(|(_, w)| *w != Some(0))
        .map(|(p, w)| (p, w.map(Value::Int)))
        .collect()
}

/// Builds `rows` unsorted at `out` and checks the dataset against the model; returns the
/// number of runs written.
fn check(
    out: &Path,
    kinds: &[LeafKind],
    weight: Option<DType>,
    rows: &Rows,
    opts: SortOptions,
    chunklen: u64,
) -> u64 {
    let mut w = LayerWriter::create_unsorted(out, schema(kinds, weight, chunklen), opts).unwrap();
    for (p, wt) in rows {
        w.push(p, wt.clone()).unwrap();
    }
    let report = w.finish().unwrap();
    let want = model(rows);
    let layer = Layer::open(out).unwrap();
    assert_eq!(paths(&layer), want);
    assert_eq!(report.rows_pushed, rows.len() as u64);
    assert_eq!(report.paths_written, want.len() as u64);
    assert_eq!(&report.sizes, layer.sizes());
    assert!(layer.verify().is_empty(), "{:?}", layer.verify());
    // No run is left, in the dataset or beside it.
    assert!(!out.join(blz::layer::SORT_RUNS_DIR).exists());
    let parent = out.parent().unwrap();
    let names: Vec<String> = std::fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains("tmp-build")), "{names:?}");
    // Every first key of the model is found by its filter and index.
    for (p, _) in &want {
        assert!(layer.contains(&p[0]).unwrap());
    }
    report.runs
}

fn int_rows(ncols: usize, max_key: i64, weighted: bool) -> impl Strategy<Value = Rows> {
    prop::collection::vec(
        (prop::collection::vec(-max_key..max_key, ncols), -2i64..3),
        0..300,
    )
    .prop_map(move |v| {
        v.into_iter()
            .map(|(p, w)| {
                (
                    p.into_iter().map(Value::Int).collect(),
                    weighted.then_some(Value::Int(w)),
                )
            })
            .collect()
    })
}

fn str_rows() -> impl Strategy<Value = Rows> {
    prop::collection::vec(("[a-d]{0,4}", -3i64..3, 0u64..3, -2i64..3), 0..200).prop_map(|v| {
        v.into_iter()
            .map(|(a, b, c, w)| {
                (
                    vec![Value::Str(a), Value::Int(b), Value::UInt(c)],
                    Some(Value::Int(w)),
                )
            })
            .collect()
    })
}

fn ints(n: usize) -> Vec<LeafKind> {
    vec![LeafKind::Fixed(DType::I64); n]
}

proptest! {
    #![proptest_config(common::config(24))]

    /// WSet-like and IndexedZSet-like inputs with budgets of a few rows (many runs) and a
    /// fan-in of 2..4 (merge passes).
    #[test]
    fn unsorted_weighted_builds_as_the_model(
        ncols in 1usize..3,
        rows in int_rows(2, 10, true),
        memory in 100u64..3000,
        fan_in in 2usize..5,
        chunklen in 1u64..6,
    ) {
        let rows: Rows = rows.into_iter().map(|(p, w)| (p[..ncols].to_vec(), w)).collect();
        let dir = tempfile::tempdir().unwrap();
        let opts = SortOptions { memory, fan_in };
        check(&dir.path().join("o.blz"), &ints(ncols), Some(DType::I64), &rows, opts, chunklen);
    }

    /// Without weights, repeated paths are kept once.
    #[test]
    fn unsorted_unweighted_builds_the_set(rows in int_rows(2, 6, false), memory in 100u64..2000) {
        let dir = tempfile::tempdir().unwrap();
        let opts = SortOptions { memory, fan_in: 3 };
        check(&dir.path().join("o.blz"), &ints(2), None, &rows, opts, 2);
    }

    /// Three columns, strings outermost (variable-length values count toward the budget).
    #[test]
    fn unsorted_three_columns_build_as_the_model(rows in str_rows(), memory in 200u64..4000) {
        let dir = tempfile::tempdir().unwrap();
        let kinds = [LeafKind::VarStr, LeafKind::Fixed(DType::I64), LeafKind::Fixed(DType::U64)];
        check(&dir.path().join("o.blz"), &kinds, Some(DType::I64), &rows, SortOptions { memory, fan_in: 4 }, 3);
    }
}

fn wrow(k: i64, w: i64) -> (Vec<Value>, Option<Value>) {
    (vec![Value::Int(k)], Some(Value::Int(w)))
}

#[test]
fn empty_input_builds_an_empty_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("e.blz");
    let runs = check(
        &out,
        &ints(2),
        Some(DType::I64),
        &Vec::new(),
        SortOptions::with_memory(10),
        4,
    );
    assert_eq!(runs, 0);
    assert_eq!(Layer::open(&out).unwrap().rows(0), 0);
}

#[test]
fn input_that_fits_is_written_without_runs() {
    let dir = tempfile::tempdir().unwrap();
    let rows: Rows = (0..1000).rev().map(|k| wrow(k % 300, 1)).collect();
    let runs = check(
        &dir.path().join("a.blz"),
        &ints(1),
        Some(DType::I64),
        &rows,
        SortOptions::default(),
        64,
    );
    assert_eq!(runs, 0);
}

#[test]
fn many_runs_merge_in_passes() {
    let dir = tempfile::tempdir().unwrap();
    let rows: Rows = (0..5000i64)
        .map(|i| wrow((i * 7919) % 1013, if i % 3 == 0 { -1 } else { 1 }))
        .collect();
    let out = dir.path().join("m.blz");
    let mut w = LayerWriter::create_unsorted(
        &out,
        schema(&ints(1), Some(DType::I64), 32),
        SortOptions {
            memory: 4096,
            fan_in: 3,
        },
    )
    .unwrap();
    for (p, wt) in &rows {
        w.push(p, wt.clone()).unwrap();
    }
    // The runs live in the staging directory, beside nothing else.
    assert!(w.runs() > 9);
    let staging = dir.path().join("m.blz.tmp-build");
    assert!(staging.join(blz::layer::SORT_RUNS_DIR).is_dir());
    assert!(!out.exists());
    let report = w.finish().unwrap();
    assert!(report.merge_passes >= 2, "{report:?}");
    assert!(!staging.exists());
    assert_eq!(paths(&Layer::open(&out).unwrap()), model(&rows));
}

#[test]
fn a_dropped_or_failed_build_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("d.blz");
    let opts = SortOptions {
        memory: 512,
        fan_in: 2,
    };
    {
        let mut w = LayerWriter::create_unsorted(&out, schema(&ints(1), Some(DType::I64), 4), opts)
            .unwrap();
        for k in 0..500 {
            w.push(&[Value::Int(500 - k)], Some(Value::Int(1))).unwrap();
        }
        assert!(w.runs() > 2);
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // Weights whose sum overflows their type: an error at the merge, and nothing left.
    let mut w =
        LayerWriter::create_unsorted(&out, schema(&ints(1), Some(DType::I8), 4), opts).unwrap();
    for k in 0..300 {
        w.push(&[Value::Int(k % 7)], Some(Value::Int(100))).unwrap();
    }
    let e = w.finish().unwrap_err();
    assert!(
        e.to_string().contains("int8") || e.to_string().contains("overflow"),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // Bad rows are refused with the build abandoned.
    let mut w = LayerWriter::create_unsorted(&out, schema(&ints(2), None, 4), opts).unwrap();
    assert!(w.push(&[Value::Int(1)], None).is_err());
    assert!(w.push(&[Value::Int(1), Value::Int(2)], None).is_err());
    drop(w);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert!(LayerWriter::create_unsorted(
        &out,
        schema(&ints(1), None, 4),
        SortOptions {
            memory: 1,
            fan_in: 1
        }
    )
    .is_err());
}

#[test]
fn float_keys_and_weights() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.blz");
    let mut w = LayerWriter::create_unsorted(
        &out,
        schema(&[LeafKind::Fixed(DType::F32)], Some(DType::F64), 2),
        SortOptions::with_memory(200),
    )
    .unwrap();
    // 0.1 and its float32 rounding are one key of a float32 column.
    let k = f64::from(0.1f32);
    for (key, wt) in [(0.1, 0.5), (-1.0, 1.0), (k, 0.25), (2.0, 1.0), (2.0, -1.0)] {
        w.push(&[Value::Float(key)], Some(Value::Float(wt)))
            .unwrap();
    }
    w.finish().unwrap();
    let got = paths(&Layer::open(&out).unwrap());
    assert_eq!(
        got,
        vec![
            (vec![Value::Float(-1.0)], Some(Value::Float(1.0))),
            (vec![Value::Float(k)], Some(Value::Float(0.75))),
        ]
    );
}
