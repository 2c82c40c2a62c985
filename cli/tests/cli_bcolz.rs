//! `blz import`, run as a user would, on carrays and ctables written by the real bcolz
//! (`tests/fixtures/bcolz/`): the summary line, the imported values as `blz get` prints
//! them, `--overwrite`, recompression options, `--help`, and the errors a user can meet.

mod common;

use common::{fails, json_of, ok};
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/bcolz")
        .join(name)
        .display()
        .to_string()
}

fn tmp() -> (tempfile::TempDir, impl Fn(&str) -> String) {
    let d = tempfile::tempdir().unwrap();
    let base: PathBuf = d.path().to_path_buf();
    (d, move |n: &str| base.join(n).display().to_string())
}

#[test]
fn import_a_carray_and_read_it_back() {
    let (_d, p) = tmp();
    let dst = p("a.blz");
    let out = ok(&["import", &fixture("int32_leftover"), &dst]);
    assert!(out.starts_with("imported bcolz carray "), "{out}");
    assert!(out.contains("int32 [1000], chunkshape [300]"), "{out}");
    let v = json_of(&["get", &dst, "995:", "--json"]);
    assert_eq!(v, serde_json::json!([995, 996, 997, 998, 999]));
    let attrs = json_of(&["attrs", &dst]);
    assert_eq!(attrs["unit"], "metre");
    let info = json_of(&["info", &dst, "--json"]);
    assert_eq!(info["codec"], "lz4", "{info}");

    // Again: refused without --overwrite, then replaced with it, recompressed.
    let err = fails(&["import", &fixture("int32_leftover"), &dst]);
    assert!(err.contains("--overwrite"), "{err}");
    ok(&[
        "import",
        &fixture("int32_leftover"),
        &dst,
        "--overwrite",
        "--codec",
        "zstd",
        "--clevel",
        "3",
        "--chunklen",
        "128",
    ]);
    let info = json_of(&["info", &dst, "--json"]);
    assert_eq!(info["codec"], "zstd", "{info}");
    assert_eq!(info["chunkshape"], serde_json::json!([128]), "{info}");
    ok(&["verify", &dst]);
}

#[test]
fn import_a_ctable_and_read_a_column() {
    let (_d, p) = tmp();
    let dst = p("t.blz");
    let out = ok(&["import", &fixture("ctable"), &dst]);
    assert!(
        out.contains("300 rows, columns id:int32,x:float64,code:S4,flag:bool,level:uint8"),
        "{out}"
    );
    let v = json_of(&["get", &dst, "0:5", "--columns", "id,code", "--json"]);
    assert_eq!(v["id"], serde_json::json!([0, 1, 2, 3, 4]));
    assert_eq!(
        v["code"],
        serde_json::json!(["ab", "cdef", "", "xyz", "ab"])
    );
    assert_eq!(json_of(&["attrs", &dst])["source"], "sensor-7");
}

#[test]
fn import_errors_name_the_file_and_leave_nothing_behind() {
    let (_d, p) = tmp();
    let dst = p("o.blz");
    let err = fails(&["import", &fixture("object_refused"), &dst]);
    assert!(err.contains("object_refused/meta/storage"), "{err}");
    assert!(err.contains("object"), "{err}");
    assert!(!Path::new(&dst).exists());

    let err = fails(&["import", env!("CARGO_MANIFEST_DIR"), &dst]);
    assert!(err.contains("not a bcolz carray or ctable"), "{err}");

    let src = p("broken");
    let status = Command::new("cp")
        .args(["-r", &fixture("int32_leftover"), &src])
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::remove_file(Path::new(&src).join("data/__2.blp")).unwrap();
    let err = fails(&["import", &src, &dst]);
    assert!(err.contains("data/__2.blp: chunk 2"), "{err}");
    assert!(!Path::new(&dst).exists());
}

#[test]
fn import_help_has_examples() {
    let out = ok(&["import", "--help"]);
    assert!(out.contains("blz import prices.bcolz prices.blz"), "{out}");
    assert!(out.contains("--overwrite"), "{out}");
    let top = ok(&["--help"]);
    assert!(top.contains("import"), "{top}");
}
