//! Links planted inside a dataset never make blz write outside it: temporary files are
//! created anew (a link at their name is removed, not followed), files are never opened for
//! writing through a link, and a linked `meta/` or `data/` directory is refused.

mod common;

use common::{fails, ok};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

const VICTIM: &[u8] = b"precious, outside the dataset\n";

/// A dataset of 25,000 int64 (chunks of 1000, 4 per file: 7 files) and a victim file
/// outside it.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds.blz");
    ok(&[
        "create",
        ds.to_str().unwrap(),
        "--arange",
        "25000",
        "--chunkshape",
        "1000",
        "--superchunk-size",
        "4",
    ]);
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, VICTIM).unwrap();
    (dir, ds, victim)
}

fn untouched(victim: &Path) {
    assert_eq!(
        std::fs::read(victim).unwrap(),
        VICTIM,
        "the victim was written"
    );
}

fn is_plain_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file())
}

#[test]
fn attrs_through_a_planted_temporary_file() {
    let (_d, ds, victim) = setup();
    symlink(&victim, ds.join("meta/attributes.tmp")).unwrap();
    ok(&["attrs", ds.to_str().unwrap(), "--set", "x=1"]);
    untouched(&victim);
    assert!(is_plain_file(&ds.join("meta/attributes")));
    assert!(ok(&["attrs", ds.to_str().unwrap()]).contains("\"x\": 1"));
}

#[test]
fn resize_through_planted_sizes_and_journal_temporaries() {
    let (_d, ds, victim) = setup();
    symlink(&victim, ds.join("meta/sizes.tmp")).unwrap();
    symlink(&victim, ds.join("meta/journal.tmp")).unwrap();
    let p = ds.to_str().unwrap();
    // A grow commits by replacing meta/sizes; a shrink that cuts a file goes through the
    // journal.
    ok(&["resize", p, "26000"]);
    ok(&["resize", p, "2500"]);
    untouched(&victim);
    assert!(is_plain_file(&ds.join("meta/sizes")));
    assert!(ok(&["get", p, "-1:"]).contains("2499"));
    ok(&["verify", p]);
}

#[test]
fn a_superchunk_file_planted_as_a_link() {
    let (_d, ds, victim) = setup();
    let p = ds.to_str().unwrap();
    // Where an append will create the next file.
    symlink(&victim, ds.join("data/__8__.bin")).unwrap();
    ok(&["append", p, "--npy", &npy(&ds)]);
    untouched(&victim);
    assert!(is_plain_file(&ds.join("data/__8__.bin")));
    ok(&["verify", p]);
    // A committed file replaced by a link to a copy elsewhere: no write goes through it.
    let last = ds.join("data/__8__.bin");
    let copy = ds.parent().unwrap().join("copy.bin");
    std::fs::copy(&last, &copy).unwrap();
    std::fs::remove_file(&last).unwrap();
    symlink(&copy, &last).unwrap();
    let before = std::fs::read(&copy).unwrap();
    let out = fails(&["append", p, "--npy", &npy(&ds)]);
    assert!(out.contains("link"), "{out}");
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        before,
        "written through the link"
    );
}

#[test]
fn linked_meta_or_data_directories_are_refused() {
    for dir in ["meta", "data"] {
        let (d, ds, _victim) = setup();
        let outside = d.path().join("outside");
        std::fs::rename(ds.join(dir), &outside).unwrap();
        symlink(&outside, ds.join(dir)).unwrap();
        let before = common::tree(&blz::storage::LocalStorage, &outside);
        let p = ds.to_str().unwrap();
        let out = fails(&["resize", p, "30000"]);
        assert!(out.contains("symbolic link"), "{dir}: {out}");
        assert_eq!(common::tree(&blz::storage::LocalStorage, &outside), before);
    }
}

/// A .npy of 6000 int64 beside the dataset.
fn npy(ds: &Path) -> String {
    let p = ds.parent().unwrap().join("more.npy");
    let data: Vec<u8> = (0..6000i64).flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(&p, common::raw_npy("<i8", "(6000,)", &data)).unwrap();
    p.to_str().unwrap().to_string()
}
