//! What `verify` and `info` say about damage they can and cannot see: a missing file is
//! missing (not corrupt) and `info` still describes the rest; a dataset without digests is
//! said to have been decoded, not verified; a corrupt `meta/attributes` fails `verify` as it
//! fails `info`.

mod common;

use common::{fails, ok, Dir};

fn dataset(dir: &Dir, checksum: &str) -> String {
    let p = dir.p("ds.blz");
    let s = p.to_str().unwrap().to_string();
    ok(&[
        "create",
        &s,
        "--arange",
        "40000",
        "--chunkshape",
        "1000",
        "--superchunk-size",
        "4",
        "--checksum",
        checksum,
    ]);
    s
}

#[test]
fn a_missing_file_is_missing_and_info_still_describes_the_dataset() {
    let dir = Dir::new();
    let p = dataset(&dir, "crc32");
    std::fs::remove_file(dir.p("ds.blz/data/__3__.bin")).unwrap();
    let out = common::run(&["verify", &p]);
    let text = common::text(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text.contains("missing: ") && text.contains("__3__.bin"),
        "{text}"
    );
    assert!(!text.contains("corrupt"), "{text}");
    let err = common::text(&out.stderr);
    // One problem for the file, not one per chunk in it.
    assert!(err.contains("not intact (1 missing)"), "{err}");
    let info = ok(&["info", &p]);
    assert!(info.contains("chunks:") && info.contains("40"), "{info}");
    let j = common::json_of(&["info", &p, "--json"]);
    let files = j["files"].as_array().unwrap();
    let gone = files
        .iter()
        .find(|f| f["name"] == "data/__3__.bin")
        .unwrap();
    assert_eq!(gone["problem"], "missing");
    assert!(files.iter().filter(|f| f["size"].is_u64()).count() == 9);
}

#[test]
fn without_digests_verify_says_it_only_decoded() {
    let dir = Dir::new();
    let p = dataset(&dir, "none");
    let out = ok(&["verify", &p]);
    assert!(out.contains("decoded (no digests are stored"), "{out}");
    let dir2 = Dir::new();
    let p2 = dataset(&dir2, "sha256");
    assert!(ok(&["verify", &p2]).contains("verified (sha256 digests), all intact"));
}

#[test]
fn a_corrupt_attributes_file_fails_verify() {
    let dir = Dir::new();
    let p = dataset(&dir, "crc32");
    std::fs::write(dir.p("ds.blz/meta/attributes"), b"{\"a\": ").unwrap();
    let out = common::run(&["verify", &p]);
    assert_eq!(out.status.code(), Some(1));
    let (text, err) = (common::text(&out.stdout), common::text(&out.stderr));
    assert!(
        text.contains("corrupt meta: ") && text.contains("meta/attributes"),
        "{text}"
    );
    assert!(err.contains("not intact (1 corrupt meta)"), "{err}");
    let err = fails(&["info", &p]);
    assert!(err.contains("attributes"), "{err}");
}
