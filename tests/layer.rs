//! Layer datasets: bad input leaves no dataset, corrupt chunks give checksum errors, the
//! filter's measured false-positive rate, and chunk reads per query.

mod common;

use blz::layer::LeafKind;
use blz::layer::{ColumnDef, FilterKind, FilterSetting, Layer, LayerSchema, LayerWriter, Value};
use blz::{DType, Error};
use common::flip_byte_in_chunk;
use std::path::Path;

fn two_cols() -> LayerSchema {
    LayerSchema::new(vec![
        ColumnDef::new("k", LeafKind::Fixed(DType::I64)),
        ColumnDef::new("v", LeafKind::VarStr),
    ])
    .with_weight("w", DType::I64)
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn unsorted_or_duplicate_input_is_an_error_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.blz");
    for bad in [
        vec![(1, "b"), (1, "a")], // unsorted within a row group
        vec![(2, "a"), (1, "z")], // unsorted first column
        vec![(1, "a"), (1, "a")], // duplicate
    ] {
        let mut w = LayerWriter::create(&path, two_cols()).unwrap();
        let mut err = None;
        for (k, v) in bad {
            if let Err(e) = w.push(&[Value::Int(k), v.into()], Some(Value::Int(1))) {
                err = Some(e);
                break;
            }
        }
        let e = err.expect("bad input accepted");
        let msg = e.to_string();
        assert!(
            msg.contains("unsorted") || msg.contains("duplicate"),
            "{msg}"
        );
        assert!(w.finish().is_err());
        assert!(
            leftovers(dir.path()).is_empty(),
            "{:?}",
            leftovers(dir.path())
        );
    }
    // An abandoned (dropped) build leaves nothing either.
    let mut w = LayerWriter::create(&path, two_cols()).unwrap();
    w.push(&[Value::Int(1), "a".into()], Some(Value::Int(1)))
        .unwrap();
    drop(w);
    assert!(leftovers(dir.path()).is_empty());
    // A leftover of a killed build is not a dataset and is replaced by the next build.
    std::fs::create_dir_all(dir.path().join("l.blz.tmp-build/meta")).unwrap();
    assert!(Layer::open(&path).is_err());
    let w = LayerWriter::create(&path, two_cols()).unwrap();
    w.finish().unwrap();
    assert_eq!(leftovers(dir.path()), vec!["l.blz".to_string()]);
    assert_eq!(Layer::open(&path).unwrap().rows(0), 0);
    // Wrong arity, weights and types are errors too.
    let p2 = dir.path().join("m.blz");
    let mut w = LayerWriter::create(&p2, two_cols()).unwrap();
    assert!(w.push(&[Value::Int(1)], Some(Value::Int(1))).is_err());
    let mut w = LayerWriter::create(&p2, two_cols()).unwrap();
    assert!(w.push(&[Value::Int(1), "a".into()], None).is_err());
    let mut w = LayerWriter::create(&p2, two_cols()).unwrap();
    assert!(w
        .push(&["x".into(), "a".into()], Some(Value::Int(1)))
        .is_err());
    assert!(!p2.exists());
    // An existing dataset is not replaced unless asked.
    assert!(LayerWriter::create(&path, two_cols()).is_err());
    let mut s = two_cols();
    s.overwrite = true;
    let mut w = LayerWriter::create(&path, s).unwrap();
    w.push(&[Value::Int(3), "c".into()], Some(Value::Int(9)))
        .unwrap();
    w.finish().unwrap();
    assert_eq!(Layer::open(&path).unwrap().rows(1), 1);
}

/// A one-column dataset of `n` even numbers, with Bloom filters (exact filters, which the
/// automatic choice would take for these keys, are `tests/layer_exact.rs`'s).
fn evens(path: &Path, n: i64, filter: FilterSetting) -> Layer {
    let schema = LayerSchema::new(vec![ColumnDef::new("k", LeafKind::Fixed(DType::I64))
        .with_filter(filter)
        .with_filter_kind(FilterKind::Bloom)]);
    let mut w = LayerWriter::create(path, schema).unwrap();
    for i in 0..n {
        w.push(&[Value::Int(2 * i)], None).unwrap();
    }
    w.finish().unwrap();
    Layer::open(path).unwrap()
}

#[test]
fn filter_rate_is_near_the_prediction_and_needs_no_data_reads() {
    let dir = tempfile::tempdir().unwrap();
    let n = 200_000i64;
    let layer = evens(&dir.path().join("e.blz"), n, FilterSetting::Fpr(1e-3));
    let predicted = layer.storage_meta().columns[0]
        .filter
        .unwrap()
        .predicted_fpr;
    assert!(predicted <= 1e-3);
    for i in (0..n).step_by(97) {
        assert!(layer.may_contain(&Value::Int(2 * i)).unwrap());
    }
    layer.clear_cache();
    layer.reset_stats();
    let probes = 200_000;
    let fp = (0..probes)
        .filter(|i| layer.may_contain(&Value::Int(2 * (i % n) + 1)).unwrap())
        .count();
    let rate = fp as f64 / probes as f64;
    assert!(
        rate < 2.0 * predicted + 1e-4,
        "measured {rate}, predicted {predicted}"
    );
    let s = layer.stats();
    assert_eq!(s.data_chunks, 0, "{s:?}");
    assert!(s.filter_chunks > 0);
    // Values past either end are answered from the index alone.
    layer.reset_stats();
    layer.clear_cache();
    assert!(!layer.may_contain(&Value::Int(-1)).unwrap());
    assert!(!layer.may_contain(&Value::Int(2 * n + 1)).unwrap());
    assert_eq!(layer.stats().filter_chunks, 0);
    assert_eq!(layer.stats().data_chunks, 0);
}

#[test]
fn a_seek_reads_one_data_chunk_and_one_index_chunk_per_level() {
    let dir = tempfile::tempdir().unwrap();
    let layer = evens(&dir.path().join("e.blz"), 300_000, FilterSetting::Off);
    let levels = layer.index_levels(0) as u64;
    for v in [0i64, 1, 12345, 299_999 * 2, 700_000] {
        layer.clear_cache();
        layer.reset_stats();
        let mut c = layer.cursor();
        c.seek_ge(&Value::Int(v)).unwrap();
        c.value().unwrap();
        let s = layer.stats();
        assert_eq!(s.data_chunks, 1, "{v}: {s:?}");
        assert!(s.index_chunks <= 2 * levels, "{v}: {s:?}");
    }
}

#[test]
fn a_walk_through_child_cursors_decodes_each_chunk_once() {
    // 20000 keys with 3 values each: a cursor per row group (as a scan of an IndexedZSet
    // makes) finds the data and weight chunks the previous row group's cursor decoded.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.blz");
    let schema = LayerSchema::new(vec![
        ColumnDef::new("k", LeafKind::Fixed(DType::U64)),
        ColumnDef::new("v", LeafKind::Fixed(DType::U64)),
    ])
    .with_weight("w", DType::I64);
    let mut w = LayerWriter::create(&path, schema).unwrap();
    for k in 0..20_000u64 {
        for v in 0..3u64 {
            let r = (k + v) as i64 % 5 - 2;
            w.push(&[Value::UInt(3 * k), Value::UInt(v)], Some(Value::Int(r)))
                .unwrap();
        }
    }
    w.finish().unwrap();
    let layer = Layer::open(&path).unwrap();
    layer.clear_cache();
    layer.reset_stats();
    let (mut rows, mut sum) = (0u64, 0i64);
    let mut c = layer.cursor();
    let mut on = c.first();
    while on {
        let mut g = c.child().unwrap().unwrap();
        let mut more = g.first();
        while more {
            let Some(Value::Int(r)) = g.weight().unwrap() else {
                panic!("no weight")
            };
            assert_eq!(g.value().unwrap(), Some(Value::UInt(g.index().unwrap())));
            sum += r;
            rows += 1;
            more = g.next();
        }
        on = c.next();
    }
    assert_eq!(rows, 60_000);
    let want: i64 = (0..20_000i64)
        .flat_map(|k| (0..3).map(move |v| (k + v) % 5 - 2))
        .sum();
    assert_eq!(sum, want);
    let chunks = |rows: u64| rows.div_ceil(blz::layer::DEFAULT_FIXED_CHUNKLEN);
    let s = layer.stats();
    // The keys' cursor moves by the row-group index alone: only column 2's data is read.
    assert_eq!(s.data_chunks, chunks(60_000), "{s:?}");
    assert_eq!(s.weight_chunks, chunks(60_000), "{s:?}");
    // Seeks from fresh cursors decode each of column 1's chunks once, then find them.
    for want in [chunks(20_000), 0] {
        layer.reset_stats();
        for k in (0..20_000u64).step_by(7) {
            let mut c = layer.cursor();
            assert!(c.seek_ge(&Value::UInt(3 * k)).unwrap());
            assert_eq!(c.value().unwrap(), Some(Value::UInt(3 * k)));
        }
        assert_eq!(layer.stats().data_chunks, want);
    }
}

fn is_checksum(e: &Error) -> bool {
    matches!(e, Error::ChecksumMismatch { .. })
}

#[test]
fn corrupt_index_filter_or_data_chunks_are_errors_not_answers() {
    for (what, rel) in [
        ("index", "data/k/index/0/__1__.bin"),
        ("filter", "data/k/filter/__1__.bin"),
        ("data", "data/k/__1__.bin"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.blz");
        drop(evens(&path, 50_000, FilterSetting::Fpr(1e-4)));
        flip_byte_in_chunk(&path.join(rel), 0);
        let layer = Layer::open(&path).unwrap();
        let v = Value::Int(101);
        let errs = layer.verify();
        assert!(errs.iter().any(is_checksum), "{what}: {errs:?}");
        match what {
            "index" => {
                assert!(is_checksum(&layer.cursor().seek_ge(&v).unwrap_err()));
                assert!(is_checksum(&layer.may_contain(&v).unwrap_err()));
            }
            "filter" => {
                assert!(is_checksum(&layer.may_contain(&v).unwrap_err()));
                assert!(is_checksum(&layer.contains(&Value::Int(100)).unwrap_err()));
            }
            _ => {
                let mut c = layer.cursor();
                assert!(is_checksum(&c.value().unwrap_err()));
                assert!(is_checksum(&c.seek_ge(&v).unwrap_err()));
            }
        }
    }
}

#[test]
fn array_and_table_opens_refuse_a_layer_dataset_and_leave_it_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.blz");
    let mut w = LayerWriter::create(&path, two_cols()).unwrap();
    w.push(&[Value::Int(1), "a".into()], Some(Value::Int(1)))
        .unwrap();
    w.finish().unwrap();
    let meta_files = || {
        let mut v = leftovers(&path.join("meta"));
        v.sort();
        v
    };
    let before = meta_files();
    for (what, r) in [
        ("array rw", blz::Dataset::open_rw(&path).map(drop)),
        ("array", blz::Dataset::open(&path).map(drop)),
        ("table rw", blz::table::Table::open_rw(&path).map(drop)),
        ("table", blz::table::Table::open(&path).map(drop)),
    ] {
        let msg = r.unwrap_err().to_string();
        assert!(
            msg.contains("this is a layer dataset") && msg.contains("layer API"),
            "{what}: {msg}"
        );
    }
    // No writer lock file was left behind in the write-once dataset.
    assert_eq!(meta_files(), before);
    assert!(Layer::open(&path).unwrap().verify().is_empty());

    // An array opened as a table names what it is.
    let a = dir.path().join("a.blz");
    blz::Dataset::create(&a, DType::I32, &[4]).unwrap();
    let msg = blz::table::Table::open_rw(&a).unwrap_err().to_string();
    assert!(
        msg.contains("this is an array dataset, not a table"),
        "{msg}"
    );
}

/// Rows `2i` for `i < n` in one fixed-size column of small chunks and a small fanout, so
/// that the value index has several levels.
fn deep_index(path: &Path, n: i64) -> Layer {
    let schema = LayerSchema::new(vec![ColumnDef::new("k", LeafKind::Fixed(DType::I64))
        .with_chunklen(16)
        .with_fanout(4)]);
    let mut w = LayerWriter::create(path, schema).unwrap();
    for i in 0..n {
        w.push(&[Value::Int(2 * i)], None).unwrap();
    }
    w.finish().unwrap();
    Layer::open(path).unwrap()
}

#[test]
fn a_damaged_upper_index_level_is_reported_with_its_file_and_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.blz");
    // 768 rows: 48 data chunks; index levels of 12, 3 and 1 chunks.
    let layer = deep_index(&path, 768);
    assert_eq!(layer.index_levels(0), 3);
    assert!(layer.verify().is_empty());
    drop(layer);
    let names = |errs: &[Error], file: &Path, k: u64| {
        errs.iter().any(|e| {
            matches!(e, Error::ChecksumMismatch { path, chunk, .. } if path == file && *chunk == k)
        })
    };
    for (level, k) in [(1, 1), (2, 0)] {
        // The damaged level alone, and together with damage in the data, which verify reads
        // first: neither hides the other.
        for with_data in [false, true] {
            let damaged = dir.path().join(format!("damaged{level}{with_data}.blz"));
            common::copy_dir(&path, &damaged);
            let index = damaged.join(format!("data/k/index/{level}/__1__.bin"));
            flip_byte_in_chunk(&index, k);
            let data = damaged.join("data/k/__1__.bin");
            if with_data {
                flip_byte_in_chunk(&data, 5);
            }
            let errs = Layer::open(&damaged).unwrap().verify();
            assert!(names(&errs, &index, k), "level {level}: {errs:?}");
            assert_eq!(names(&errs, &data, 5), with_data, "{errs:?}");
        }
    }
}
