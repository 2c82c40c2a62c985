//! `meta/sizes` is checked against everything else that knows a dataset's size: at open,
//! `nbytes` (and a table's per-column byte counts) against the shape, and shapes numpy could
//! not hold refused; in `verify`, each chunk's recorded statistics against the number of
//! elements the shape makes visible in it. A size grown by hand within the last chunk
//! would otherwise show the chunk's padding as elements no writer wrote.

mod common;

use blz::table::{Field, TableOptions, Values};
use blz::{CreateOptions, DType, Dataset, Error, Table};
use ndarray::ArrayD;
use serde_json::{json, Value};
use std::path::Path;

/// Applies `edit` to the dataset's `meta/sizes` document.
fn edit_sizes(ds: &Path, edit: impl FnOnce(&mut Value)) {
    let p = ds.join("meta/sizes");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
}

/// An array of 0..1000 (i64) in one chunk.
fn arange_1000(path: &Path) {
    let mut ds = Dataset::create_with(path, DType::I64, &[0], &CreateOptions::default()).unwrap();
    let x: Vec<i64> = (0..1000).collect();
    ds.append(&ArrayD::from_shape_vec(vec![1000], x).unwrap().view())
        .unwrap();
}

fn is_sizes_error(e: &Error, needle: &str) -> bool {
    matches!(e, Error::InvalidMetadata { path, reason }
        if path.ends_with("meta/sizes") && reason.contains(needle))
}

#[test]
fn an_array_shape_grown_within_its_last_chunk_is_refused_at_open() {
    let d = common::Dir::new();
    let p = d.p("a.blz");
    arange_1000(&p);
    edit_sizes(&p, |v| v["shape"] = json!([1001]));
    for e in [
        Dataset::open(&p).err().unwrap(),
        blz::open(&p).err().unwrap(),
        Dataset::open_rw(&p).err().unwrap(),
    ] {
        assert!(is_sizes_error(&e, "nbytes is 8000"), "{e}");
    }
}

#[test]
fn verify_finds_an_array_shape_and_nbytes_grown_together() {
    let d = common::Dir::new();
    let p = d.p("a.blz");
    arange_1000(&p);
    assert!(Dataset::open(&p).unwrap().verify(|_, _| {}).is_empty());
    edit_sizes(&p, |v| {
        v["shape"] = json!([1001]);
        v["nbytes"] = json!(8008);
    });
    let ds = Dataset::open(&p).unwrap();
    let errors = ds.verify(|_, _| {});
    assert_eq!(errors.len(), 1, "{errors:?}");
    let text = errors[0].to_string();
    assert!(
        text.contains("__1__.bin") && text.contains("count 1000 values") && text.contains("1001"),
        "{text}"
    );
}

#[test]
fn legitimate_grows_shrinks_and_appends_within_a_chunk_stay_intact() {
    let d = common::Dir::new();
    let p = d.p("a.blz");
    arange_1000(&p);
    let mut ds = Dataset::open_rw(&p).unwrap();
    ds.resize(900).unwrap();
    ds.resize(1001).unwrap();
    ds.append(
        &ArrayD::from_shape_vec(vec![3], vec![7i64, 8, 9])
            .unwrap()
            .view(),
    )
    .unwrap();
    ds.resize(950).unwrap();
    ds.compact().unwrap();
    drop(ds);
    let ds = Dataset::open(&p).unwrap();
    assert_eq!(ds.shape(), &[950]);
    assert!(ds.verify(|_, _| {}).is_empty());
}

/// A table of 1000 rows: `x` (i64) and `s` (variable-length strings), one chunk each.
fn table_1000(path: &Path) {
    let mut t = Table::create(
        path,
        vec![Field::new("x", DType::I64), Field::varstr("s")],
        &TableOptions::default(),
    )
    .unwrap();
    let x: Vec<i64> = (0..1000).collect();
    let s: Vec<String> = x.iter().map(|i| format!("r{i}")).collect();
    t.append(&[("x", Values::from_slice(&x)), ("s", Values::strings(&s))])
        .unwrap();
}

#[test]
fn a_tables_rows_grown_within_the_last_chunk_are_refused_at_open() {
    let d = common::Dir::new();
    let p = d.p("t.blz");
    table_1000(&p);
    // nrows and shape moved together: the fixed-size column's nbytes says 1000 rows.
    edit_sizes(&p, |v| {
        v["shape"] = json!([1001]);
        v["nrows"] = json!(1001);
    });
    let e = Table::open(&p).err().unwrap();
    assert!(is_sizes_error(&e, "\"x\" has nbytes 8000"), "{e}");
    // The column's nbytes moved too, but not the total.
    edit_sizes(&p, |v| v["columns"]["x"]["nbytes"] = json!(8008));
    let e = blz::open(&p).err().unwrap();
    assert!(is_sizes_error(&e, "add up to"), "{e}");
    // nrows alone.
    table_1000(&d.p("u.blz"));
    edit_sizes(&d.p("u.blz"), |v| v["nrows"] = json!(1001));
    let e = Table::open(d.p("u.blz")).err().unwrap();
    assert!(is_sizes_error(&e, "not [nrows]"), "{e}");
}

#[test]
fn verify_finds_a_tables_counts_grown_together() {
    let d = common::Dir::new();
    let p = d.p("t.blz");
    table_1000(&p);
    assert!(Table::open(&p).unwrap().verify(|_, _| {}).is_empty());
    edit_sizes(&p, |v| {
        v["shape"] = json!([1001]);
        v["nrows"] = json!(1001);
        v["columns"]["x"]["nbytes"] = json!(8008);
        v["nbytes"] = json!(v["nbytes"].as_u64().unwrap() + 8);
    });
    let t = Table::open(&p).unwrap();
    let text: Vec<String> = t.verify(|_, _| {}).iter().map(|e| e.to_string()).collect();
    assert_eq!(text.len(), 2, "{text:?}");
    assert!(
        text.iter().any(|e| e.contains("count 1000 values")),
        "{text:?}"
    );
    assert!(
        text.iter().any(|e| e.contains("holds 1000 items")),
        "{text:?}"
    );
}

#[test]
fn shapes_numpy_cannot_hold_are_refused_at_create_even_beside_a_zero() {
    let d = common::Dir::new();
    for shape in [
        vec![0, 1 << 63],
        vec![0, u64::MAX],
        vec![0, 1 << 40, 1 << 40],
        vec![1 << 63, 0],
    ] {
        let p = d.p("z.blz");
        let e = Dataset::create(&p, DType::U8, &shape).err().unwrap();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("numpy's limit")),
            "{shape:?}: {e}"
        );
        assert!(blz::check_shape(DType::U8, &shape).is_err(), "{shape:?}");
        assert!(!p.exists(), "{shape:?}");
    }
    // The itemsize counts: 2^60 nonzero elements of 8 bytes pass numpy's limit.
    assert!(blz::check_shape(DType::F64, &[0, 1 << 60]).is_err());
    assert!(blz::check_shape(DType::U8, &[0, 1 << 60]).is_ok());
    // Shapes numpy holds are fine.
    let p = d.p("ok.blz");
    let ds = Dataset::create(&p, DType::F64, &[0, 1 << 20, 3]).unwrap();
    assert_eq!(ds.shape(), &[0, 1 << 20, 3]);
}

#[test]
fn a_shape_numpy_cannot_hold_is_refused_at_open() {
    let d = common::Dir::new();
    let p = d.p("z.blz");
    Dataset::create_with(
        &p,
        DType::F64,
        &[0, 4],
        &CreateOptions {
            chunkshape: Some(vec![4, 4]),
            ..Default::default()
        },
    )
    .unwrap();
    edit_sizes(&p, |v| v["shape"] = json!([0u64, 1u64 << 63]));
    let e = Dataset::open(&p).err().unwrap();
    assert!(is_sizes_error(&e, "numpy's limit"), "{e}");
}
