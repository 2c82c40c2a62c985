//! Superchunk files are bound to their dataset, store and position: a file copied in from
//! another dataset, from another position, or from another column is refused by name instead
//! of being read as this one's data. Datasets made before files carried the binding (no `id`
//! in `meta/storage`) still read.

mod common;

use common::{fails, ok, Dir};

fn array(d: &Dir, name: &str) -> String {
    let p = d.s(name);
    ok(&[
        "create",
        &p,
        "--arange",
        "40000",
        "--chunkshape",
        "1000",
        "--superchunk-size",
        "4",
    ]);
    p
}

fn refused(p: &str, file: &str) {
    let out = common::run(&["verify", p]);
    assert_eq!(out.status.code(), Some(1));
    let text = common::text(&out.stdout);
    assert!(
        text.contains(file) && text.contains("this file belongs to"),
        "{text}"
    );
    let err = fails(&["get", p, "4000:12000:1000"]);
    assert!(err.contains("belongs to"), "{err}");
}

#[test]
fn a_file_from_another_position_is_refused() {
    let d = Dir::new();
    let p = array(&d, "a.blz");
    std::fs::copy(d.p("a.blz/data/__3__.bin"), d.p("a.blz/data/__2__.bin")).unwrap();
    refused(&p, "__2__.bin");
}

#[test]
fn nothing_is_appended_into_a_misplaced_last_file() {
    let d = Dir::new();
    // 38,000 rows: the last file, __10__.bin, holds two whole chunks, so an append reads
    // nothing of it before writing.
    let (p, q) = (d.s("a.blz"), d.s("b.blz"));
    for x in [&p, &q] {
        ok(&["create", x, "--arange", "38000", "--chunkshape", "1000"]);
    }
    let mut chunks = vec![];
    for x in [&p, &q] {
        let ds = blz::Dataset::open(x).unwrap();
        chunks.push((ds.storage_meta().superchunksize, ds.nfiles()));
    }
    assert_eq!(chunks[0], chunks[1]);
    let last = format!("data/__{}__.bin", chunks[0].1);
    std::fs::copy(d.p(&format!("b.blz/{last}")), d.p(&format!("a.blz/{last}"))).unwrap();
    let before = std::fs::read(d.p(&format!("a.blz/{last}"))).unwrap();
    let err = fails(&["resize", &p, "39000"]);
    assert!(err.contains("belongs to"), "{err}");
    assert_eq!(
        std::fs::read(d.p(&format!("a.blz/{last}"))).unwrap(),
        before
    );
}

#[test]
fn a_file_from_another_dataset_is_refused() {
    let d = Dir::new();
    let p = array(&d, "a.blz");
    array(&d, "b.blz");
    std::fs::copy(d.p("b.blz/data/__2__.bin"), d.p("a.blz/data/__2__.bin")).unwrap();
    refused(&p, "__2__.bin");
}

#[test]
fn a_file_from_another_column_is_refused_and_renames_keep_the_binding() {
    let d = Dir::new();
    let csv = d.write("t.csv", "a,b\n1,10\n2,20\n3,30\n");
    let t = d.s("t.blz");
    ok(&["create", &t, "--csv", &csv]);
    // Renaming a column keeps its files bound to it.
    let mut table = blz::table::Table::open_rw(&t).unwrap();
    table.rename_column("b", "c").unwrap();
    drop(table);
    ok(&["verify", &t]);
    std::fs::copy(d.p("t.blz/data/a/__1__.bin"), d.p("t.blz/data/c/__1__.bin")).unwrap();
    let out = common::run(&["verify", &t]);
    assert_eq!(out.status.code(), Some(1));
    assert!(common::text(&out.stdout).contains("belongs to"));
}

#[test]
fn datasets_without_an_identity_still_read() {
    let d = Dir::new();
    let p = array(&d, "a.blz");
    let m = d.p("a.blz/meta/storage");
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&m).unwrap()).unwrap();
    assert!(doc["id"].is_string(), "a new dataset records its identity");
    doc.as_object_mut().unwrap().remove("id");
    std::fs::write(&m, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    ok(&["verify", &p]);
    assert!(ok(&["get", &p, "-1:"]).contains("39999"));
    ok(&["resize", &p, "50000"]);
    ok(&["verify", &p]);
}

#[test]
fn layer_files_are_bound_too() {
    let d = Dir::new();
    let mut csv = String::new();
    for a in 0..50 {
        for b in 0..40 {
            csv.push_str(&format!("{a},{}\n", b * 3));
        }
    }
    let input = d.write("sorted.csv", &csv);
    let l = d.s("l.blz");
    ok(&[
        "layer",
        "build",
        &input,
        &l,
        "--columns",
        "a:int64,b:int64",
        "--chunklen",
        "64",
    ]);
    ok(&["layer", "verify", &l]);
    // An index file of another column, in the same place.
    std::fs::copy(
        d.p("l.blz/data/a/index/0/__1__.bin"),
        d.p("l.blz/data/b/index/0/__1__.bin"),
    )
    .unwrap();
    let err = fails(&["layer", "verify", &l]);
    assert!(err.contains("belongs to"), "{err}");
}
