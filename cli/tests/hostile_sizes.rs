//! Huge sizes, asked for or read from disk, are clear errors in bounded time and memory:
//! a create or resize past what an array can hold or what one operation fills is refused
//! before anything is allocated or written, and a `meta/sizes` naming far more data than
//! the dataset holds is refused when the dataset opens (and reported at once by `info`
//! and `verify`), never walked file by file or chunk by chunk. Every `blz` here runs as a
//! real process with its address space capped at 4 GiB and a deadline, so an unbounded
//! allocation or a walk that never ends fails the test instead of the machine.

mod common;

use blz::table::{Field, TableOptions};
use blz::{CreateOptions, DType, Dataset, Error, Table};
use std::path::Path;

fn refused(args: &[&str], needle: &str) -> String {
    let (code, err) = common::blz_within(60, args);
    assert_eq!(code, 1, "blz {args:?}: {err}");
    assert!(
        err.contains(needle),
        "blz {args:?}: {err:?} lacks {needle:?}"
    );
    err
}

fn set_shape(ds: &Path, shape: &str) {
    common::set_sizes_shape(ds, serde_json::from_str(shape).unwrap());
}

#[test]
fn a_resize_or_create_past_the_limits_is_refused_before_it_allocates() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d.blz");
    let p = d.to_str().unwrap();
    common::ok(&["create", p, "--arange", "100"]);
    let before = common::ok(&["get", p, "90:100"]);
    // 10^12 rows of the dataset's chunks: more chunks than one operation fills.
    refused(&["resize", p, "1000000000000"], "1048576");
    // Past numpy's limit of bytes.
    refused(&["resize", p, "9223372036854775807"], "numpy's limit");
    // Nothing changed.
    assert_eq!(common::ok(&["get", p, "90:100"]), before);
    assert_eq!(common::json_of(&["info", p, "--json"])["shape"][0], 100);
    // A zeros source of 10^18 elements: refused as a fill, no row made in memory.
    let z = dir.path().join("z.blz");
    refused(
        &[
            "create",
            z.to_str().unwrap(),
            "--zeros",
            "1000000000x1000000000",
        ],
        "1048576",
    );
    assert!(!z.exists());
    // With a fill value of their own, zeros are made row by row: one row of 8 GB is refused.
    refused(
        &[
            "create",
            z.to_str().unwrap(),
            "--zeros",
            "1000000000x1000000000",
            "--fill",
            "1",
        ],
        "at once",
    );
    refused(
        &[
            "create",
            z.to_str().unwrap(),
            "--zeros",
            "4611686018427387904x4",
        ],
        "numpy's limit",
    );
    assert!(!z.exists());
}

#[test]
fn library_creates_and_resizes_past_the_limits_are_invalid_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let bad = |r: blz::Result<()>| match r {
        Err(Error::InvalidArgument(m)) => m,
        other => panic!("expected InvalidArgument, got {other:?}"),
    };
    let p = dir.path().join("e.blz");
    bad(Dataset::create(&p, DType::F64, &[1 << 60]).map(drop));
    bad(Dataset::create(&p, DType::F64, &[1000, 1 << 40]).map(drop));
    assert!(!p.exists());
    let opts = CreateOptions {
        chunkshape: Some(vec![64, 4]),
        ..Default::default()
    };
    let mut a = Dataset::create_with(dir.path().join("r.blz"), DType::F64, &[2, 6], &opts).unwrap();
    let m = bad(a.resize(1 << 63));
    assert!(m.contains("numpy's limit"), "{m}");
    bad(a.resize(u64::MAX));
    assert_eq!(a.shape(), &[2, 6]);
    // A table: rows past the limit of one resize.
    let mut t = Table::create(
        dir.path().join("t.blz"),
        vec![Field::new("x", DType::I64), Field::varstr("s")],
        &TableOptions::default(),
    )
    .unwrap();
    bad(t.resize(1 << 40));
    assert_eq!(t.nrows(), 0);
}

#[test]
fn a_large_grow_within_the_limits_fills_in_steps() {
    // 300,000 new chunks of 10 elements: written in steps, one encoded chunk reused.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("g.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![10]),
        superchunksize: Some(50_000),
        fill: serde_json::json!(-7),
        ..Default::default()
    };
    let mut a = Dataset::create_with(&p, DType::I32, &[0], &opts).unwrap();
    a.append(&ndarray::arr1(&[1i32, 2, 3]).into_dyn().view())
        .unwrap();
    a.resize(3_000_000).unwrap();
    let r = Dataset::open(&p).unwrap();
    assert_eq!(r.shape(), &[3_000_000]);
    let head = r.slice::<i32, _>(ndarray::s![0..5]).unwrap();
    assert_eq!(head.as_slice().unwrap(), &[1, 2, 3, -7, -7]);
    let all = r.read::<i32>().unwrap();
    assert!(all.iter().skip(3).all(|&x| x == -7));
    assert!(r.verify(|_, _| ()).is_empty());
}

#[test]
fn a_huge_shape_in_meta_sizes_is_refused_when_the_dataset_opens() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d.blz");
    let p = d.to_str().unwrap();
    common::ok(&[
        "create",
        p,
        "--arange",
        "10000",
        "--chunkshape",
        "100",
        "--superchunk-size",
        "10",
    ]);
    set_shape(&d, "[1000000000000000000]");
    for cmd in [
        vec!["info", p],
        vec!["verify", p],
        vec!["get", p, "0:3"],
        vec!["scan", "--op", "sum", p],
    ] {
        refused(&cmd, "meta/sizes");
    }
    let npy = dir.path().join("x.npy");
    std::fs::write(&npy, common::raw_npy("<i8", "(3,)", &[0u8; 24])).unwrap();
    refused(&["append", p, "--npy", npy.to_str().unwrap()], "meta/sizes");
    set_shape(&d, "[18446744073709551615]");
    refused(&["info", p], "meta/sizes");
    // Past numpy's limit: refused as such.
    set_shape(&d, "[4611686018427387904]");
    refused(&["info", p], "numpy's limit");
    // The last file the shape needs planted (a copy of another): the run of missing files
    // between is reported at once.
    set_shape(&d, "[100000000000]");
    let last = d.join("data/__100000000__.bin");
    std::fs::copy(d.join("data/__1__.bin"), &last).unwrap();
    let (code, err) = common::blz_within(60, &["verify", p]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("files after it"), "{err}");
    let (code, err) = common::blz_within(60, &["info", p]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_huge_row_count_in_a_tables_sizes_is_refused_when_it_opens() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.blz");
    let p = t.to_str().unwrap();
    let mut table = Table::create(
        &t,
        vec![Field::new("x", DType::I64), Field::varstr("s")],
        &TableOptions::default(),
    )
    .unwrap();
    table
        .append(&[
            ("x", blz::table::Values::from_slice(&[1i64, 2, 3])),
            ("s", blz::table::Values::strings(&["a", "b", "c"])),
        ])
        .unwrap();
    drop(table);
    // Rows past numpy's limit are refused when the table opens.
    set_shape(&t, "[2000000000000000000]");
    refused(&["info", p], "numpy's limit");
    assert!(matches!(
        Table::open(&t),
        Err(Error::InvalidMetadata { .. })
    ));
    // Rows the files do not hold: a whole read is refused before it sizes a buffer, and
    // verify reports the missing files at once.
    set_shape(&t, "[1000000000000000]");
    let r = Table::open(&t).unwrap();
    assert!(matches!(r.column("x"), Err(Error::InvalidMetadata { .. })));
    assert!(matches!(r.column("s"), Err(Error::InvalidMetadata { .. })));
    let (code, out) = common::blz_within(60, &["verify", p]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("files after it"), "{out}");
    // `get` reads in batches: the first chunk, short of the rows claimed, is named.
    refused(&["get", p], "__1__.bin");
}
