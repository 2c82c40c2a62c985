//! A dataset is named by a local path (plain, or a `file://` URL), an `s3://` URL or a
//! `memory://` URL (`tests/in_memory.rs`); a URL of any other scheme is refused with a clear
//! error at every entry point, never taken for a local directory named `gs:` (or `https:`,
//! `mem:`) in the working directory.
//!
//! The one test here changes the working directory (to a scratch one, so that a URL taken
//! for a relative path would land there): it is alone in its binary for that reason.

use blz::layer::{ColumnDef, LayerSchema};
use blz::table::{Field, TableOptions};
use blz::{CreateOptions, DType, Dataset, Error, Table};
use ndarray::ArrayD;
use std::path::Path;

fn unsupported_scheme(e: &Error, scheme: &str) -> bool {
    matches!(e, Error::Unsupported { reason, .. }
        if reason.contains(&format!("{scheme}://")) && reason.contains("s3://"))
}

#[test]
fn urls_of_schemes_blz_does_not_serve_are_refused_and_file_urls_are_local_paths() {
    let scratch = tempfile::tempdir().unwrap();
    let cwd = scratch.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    std::env::set_current_dir(&cwd).unwrap();

    for (url, scheme) in [
        ("gs://bucket/x.blz", "gs"),
        ("mem://x.blz", "mem"),
        ("https://example.com/x.blz", "https"),
        ("az+blob://c/x.blz", "az+blob"),
    ] {
        let e = Dataset::create(url, DType::F64, &[0]).err().unwrap();
        assert!(unsupported_scheme(&e, scheme), "{url}: {e}");
        let e = Table::create(
            url,
            vec![Field::new("x", DType::I64)],
            &TableOptions::default(),
        )
        .err()
        .unwrap();
        assert!(unsupported_scheme(&e, scheme), "{url}: {e}");
        let schema = LayerSchema::new(vec![ColumnDef::new("k", DType::I64)]);
        let e = blz::layer::LayerWriter::create(url, schema).err().unwrap();
        assert!(unsupported_scheme(&e, scheme), "{url}: {e}");
        for e in [
            blz::open(url).err().unwrap(),
            blz::open_rw(url).err().unwrap(),
            Dataset::open(url).err().unwrap(),
            Table::open(url).err().unwrap(),
            blz::Layer::open(url).err().unwrap(),
        ] {
            assert!(unsupported_scheme(&e, scheme), "{url}: {e}");
        }
        let e = blz::copy::copy_dataset(Path::new("anything.blz"), Path::new(url), false)
            .err()
            .unwrap();
        assert!(unsupported_scheme(&e, scheme), "{url}: {e}");
    }
    // Nothing was made in the working directory.
    assert_eq!(std::fs::read_dir(&cwd).unwrap().count(), 0);
    // A memory:// URL is served from memory, never from a directory named `memory:`.
    let m = Dataset::create("memory://url_schemes.blz", DType::F64, &[4]).unwrap();
    assert_eq!(m.path(), Path::new("memory://url_schemes.blz"));
    drop(m);
    assert_eq!(std::fs::read_dir(&cwd).unwrap().count(), 0);
    blz::storage::memory::remove(Path::new("memory://url_schemes.blz")).unwrap();

    // file:// URLs name local paths: absolute (with or without `localhost`), relative,
    // and with percent escapes as `pathlib.Path.as_uri` writes them.
    let abs = scratch.path().join("a b.blz");
    let url = format!("file://{}", abs.display()).replace(' ', "%20");
    let mut ds = Dataset::create_with(&url, DType::I64, &[0], &CreateOptions::default()).unwrap();
    ds.append(
        &ArrayD::from_shape_vec(vec![3], vec![1i64, 2, 3])
            .unwrap()
            .view(),
    )
    .unwrap();
    drop(ds);
    assert!(abs.join("meta/sizes").is_file());
    let read = |u: &str| match blz::open(u).unwrap() {
        blz::AnyDataset::Array(d) => d.read::<i64>().unwrap().into_raw_vec_and_offset().0,
        _ => panic!("{u}: not an array"),
    };
    assert_eq!(read(&url), [1, 2, 3]);
    let localhost = format!("file://localhost{}", abs.display()).replace(' ', "%20");
    assert_eq!(read(&localhost), [1, 2, 3]);
    assert_eq!(read(&format!("FILE://{}", abs.display())), [1, 2, 3]);
    Table::create(
        "file://rel.blz",
        vec![Field::new("x", DType::I64)],
        &TableOptions::default(),
    )
    .unwrap();
    assert!(cwd.join("rel.blz/meta/sizes").is_file());
    assert!(matches!(
        blz::open("file://rel.blz").unwrap(),
        blz::AnyDataset::Table(_)
    ));
    let e = blz::open("file://").err().unwrap();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let e = blz::open("file:///x%2").err().unwrap();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    // A plain path that merely contains `://` past a slash is still a path.
    let e = blz::open("no/such://x.blz").err().unwrap();
    assert!(!matches!(e, Error::Unsupported { .. }), "{e}");
}
