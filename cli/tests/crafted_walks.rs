//! Walks sized by metadata a writer did not write: `meta/storage` and `meta/sizes` edited
//! together so that the files they name all exist but hold far fewer chunks than the sizes
//! claim. `verify` must report the missing chunks of a file at once, in bounded time and
//! memory, not try them one by one (reopening the file for each). Found with the
//! `meta_files` fuzz target's reasoning (a walk that grows with a crafted size); every
//! `blz` here runs as a real process with 4 GiB of address space and a deadline.

mod common;

use std::path::Path;
use std::time::Duration;

/// Sets `key` of the JSON file `meta/<file>` of the dataset at `ds`.
fn set_meta(ds: &Path, file: &str, key: &str, value: serde_json::Value) {
    let p = ds.join("meta").join(file);
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    if file == "sizes" && key == "shape" {
        return common::set_sizes_shape(ds, value);
    }
    v[key] = value;
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
}

#[test]
fn verify_reports_a_file_short_of_chunks_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d.blz");
    let p = d.to_str().unwrap();
    // 10 rows in chunks of 4: three chunks, two files of two.
    common::ok(&[
        "create",
        p,
        "--arange",
        "10",
        "--chunkshape",
        "4",
        "--superchunk-size",
        "2",
    ]);
    // The largest superchunk size blz accepts, and a shape that fills one such file: the
    // first file exists, so opening passes its checks, but it holds two chunks of the
    // 2^24 the sizes claim.
    let ss: u64 = 1 << 24;
    set_meta(&d, "storage", "superchunksize", ss.into());
    set_meta(&d, "sizes", "shape", serde_json::json!([4 * ss]));
    let (code, out) = common::blz_within(60, &["verify", p]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("__1__.bin"), "{out}");
    // One problem for the file, not one per missing chunk.
    assert!(
        out.lines().count() < 20,
        "{} lines: {out:.2000}",
        out.lines().count()
    );
}

/// Sets every `superchunksize` in the JSON value to `ss`.
fn set_superchunksize(v: &mut serde_json::Value, ss: u64) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "superchunksize" {
                    *x = ss.into();
                } else {
                    set_superchunksize(x, ss);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| set_superchunksize(x, ss)),
        _ => {}
    }
}

#[test]
fn table_verify_reports_column_files_short_of_chunks_at_once() {
    use blz::table::{ColumnOptions, Field, Table, TableOptions, Values};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("t.blz");
    let opts = TableOptions {
        defaults: ColumnOptions {
            chunklen: Some(3),
            superchunksize: Some(2),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut t = Table::create(
        &d,
        vec![Field::new("id", blz::DType::I64), Field::varstr("name")],
        &opts,
    )
    .unwrap();
    let ids: Vec<i64> = (0..10).collect();
    let names: Vec<String> = ids.iter().map(|i| format!("n{i}")).collect();
    t.append(&[
        ("id", Values::from_slice(&ids)),
        ("name", Values::strings(&names)),
    ])
    .unwrap();
    drop(t);
    // Every column's first file exists and holds two chunks; the metadata claims 2^24.
    let ss: u64 = 1 << 24;
    let p = d.join("meta/storage");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    set_superchunksize(&mut v, ss);
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    set_meta(&d, "sizes", "shape", serde_json::json!([3 * ss]));

    let t = Table::open(&d).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(t.verify(|_, _| {}));
    });
    let errors = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("verify ends within 60 s");
    let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert!(
        (2..20).contains(&errors.len()),
        "{} errors: {:?}",
        errors.len(),
        &text[..text.len().min(5)]
    );
    for c in ["id", "name"] {
        assert!(
            text.iter()
                .any(|e| e.contains(c) && e.contains("holds 2 chunks")),
            "{c}: {text:?}"
        );
    }
}
