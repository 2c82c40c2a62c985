//! What the command line does with sizes no writer wrote and names it cannot serve:
//! a `meta/sizes` grown within the last chunk (its `nbytes`, or the chunk's statistics,
//! still counting the old size) is refused, never read as made-up elements; a shape numpy
//! cannot hold is refused at create and at open; a URL of a scheme blz does not serve is an
//! error, not a local directory named after the scheme.

mod common;

use serde_json::{json, Value};
use std::path::Path;

fn edit_sizes(ds: &Path, edit: impl FnOnce(&mut Value)) {
    let p = ds.join("meta/sizes");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
}

#[test]
fn a_shape_grown_within_the_last_chunk_is_refused_by_get_scan_and_verify() {
    let dir = common::Dir::new();
    let p = dir.s("a.blz");
    common::ok(&["create", &p, "--arange", "1000"]);
    assert!(common::ok(&["verify", &p]).contains("all intact"));
    edit_sizes(&dir.p("a.blz"), |v| v["shape"] = json!([1001]));
    for args in [
        vec!["get", &p, "998:1001"],
        vec!["scan", "--op", "mean", &p],
        vec!["info", &p],
    ] {
        let err = common::fails(&args);
        assert!(
            err.contains("meta/sizes") && err.contains("nbytes is 8000"),
            "{args:?}: {err}"
        );
    }
    let o = common::run(&["verify", &p]);
    let all = format!("{}{}", common::text(&o.stdout), common::text(&o.stderr));
    assert_ne!(o.status.code(), Some(0), "{all}");
    assert!(
        !all.contains("all intact") && all.contains("nbytes is 8000"),
        "{all}"
    );

    // nbytes grown with it: the dataset opens, and verify finds the last chunk's
    // statistics counting the 1,000 values it was written with.
    edit_sizes(&dir.p("a.blz"), |v| v["nbytes"] = json!(8008));
    let o = common::run(&["verify", &p]);
    let all = format!("{}{}", common::text(&o.stdout), common::text(&o.stderr));
    assert_ne!(o.status.code(), Some(0), "{all}");
    assert!(
        !all.contains("all intact")
            && all.contains("count 1000 values")
            && all.contains("__1__.bin"),
        "{all}"
    );
}

#[test]
fn a_tables_rows_grown_within_the_last_chunk_are_refused() {
    let dir = common::Dir::new();
    let csv = dir.write(
        "t.csv",
        &(0..100)
            .map(|i| format!("{i},r{i}\n"))
            .fold("x,s\n".to_string(), |a, l| a + &l),
    );
    let p = dir.s("t.blz");
    common::ok(&["create", &p, "--csv", &csv]);
    edit_sizes(&dir.p("t.blz"), |v| {
        v["shape"] = json!([101]);
        v["nrows"] = json!(101);
    });
    for args in [vec!["get", &p, "98:101"], vec!["verify", &p]] {
        let err = common::fails(&args);
        assert!(
            err.contains("meta/sizes") && err.contains("nbytes"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn shapes_numpy_cannot_hold_are_refused_at_create_and_open() {
    let dir = common::Dir::new();
    let z = dir.s("z.blz");
    for shape in [
        "0x9223372036854775808",
        "0x18446744073709551615",
        "0x1099511627776x1099511627776",
    ] {
        let err = common::fails(&["create", &z, "--zeros", shape]);
        assert!(err.contains("numpy's limit"), "{shape}: {err}");
        assert!(!dir.p("z.blz").exists(), "{shape}");
    }
    // A meta/sizes with such a shape: refused when the dataset opens.
    common::ok(&["create", &z, "--zeros", "0x4"]);
    edit_sizes(&dir.p("z.blz"), |v| v["shape"] = json!([0u64, 1u64 << 63]));
    let err = common::fails(&["info", &z]);
    assert!(
        err.contains("meta/sizes") && err.contains("numpy's limit"),
        "{err}"
    );
}

#[test]
fn urls_of_schemes_blz_does_not_serve_are_errors_and_file_urls_are_paths() {
    let dir = common::Dir::new();
    let cwd = dir.p("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let in_cwd = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_blz"))
            .args(args)
            .current_dir(&cwd)
            .output()
            .unwrap()
    };
    for url in [
        "gs://bucket/x.blz",
        "memory://x.blz",
        "https://example.com/x.blz",
    ] {
        let scheme = url.split("://").next().unwrap();
        for args in [
            vec!["create", url, "--arange", "10"],
            vec!["get", url, "0:3"],
            vec!["info", url],
            vec!["sql", "SELECT * FROM t", "--table", &format!("t={url}")],
        ] {
            let o = in_cwd(&args);
            let err = common::text(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
            // memory:// is served to library callers; the command line refuses it.
            assert!(
                err.contains(&format!("blz does not serve {scheme}:// URLs"))
                    || (scheme == "memory" && err.contains("lives in the process that made it")),
                "{args:?}: {err}"
            );
        }
    }
    assert_eq!(std::fs::read_dir(&cwd).unwrap().count(), 0);
    // file:// URLs are local paths.
    let url = format!("file://{}", dir.p("f.blz").display());
    common::ok(&["create", &url, "--arange", "10"]);
    assert!(dir.p("f.blz/meta/sizes").is_file());
    assert_eq!(
        common::ok(&["get", &url, "7:10"]),
        common::ok(&["get", &dir.s("f.blz"), "7:10"])
    );
    let o = in_cwd(&["create", "file://rel.blz", "--arange", "3"]);
    assert!(o.status.success(), "{}", common::text(&o.stderr));
    assert!(cwd.join("rel.blz/meta/sizes").is_file());
}
