//! The `blz` binary on single superchunk files: `pack`, `unpack` and `info`, run as a user
//! would run them.

mod common;

use common::run as blz;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Output;

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "blz failed ({:?}): {}",
        o.status,
        stderr(o)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// Asserts a clean failure: non-zero exit, a `blz: ` message, no panic. Returns stderr.
#[track_caller]
fn fails(o: &Output) -> String {
    let e = stderr(o);
    assert!(!o.status.success(), "expected a failure, got success");
    assert!(o.status.code().is_some(), "killed by a signal: {e}");
    assert!(e.starts_with("blz: "), "message not prefixed: {e}");
    assert!(!e.contains("panicked"), "panic: {e}");
    e
}

fn sample(n: usize) -> Vec<u8> {
    let mut x = 0i64;
    (0..n)
        .flat_map(|i| {
            x += (i as i64 * 7919) % 17 - 8;
            x.to_le_bytes()
        })
        .collect()
}

fn sha256_hex(b: &[u8]) -> String {
    blz_format::blpk::hex(&Sha256::digest(b))
}

struct Dir {
    tmp: tempfile::TempDir,
}

impl Dir {
    fn new() -> Dir {
        Dir {
            tmp: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }
    fn write(&self, name: &str, data: &[u8]) -> PathBuf {
        let f = self.path(name);
        std::fs::write(&f, data).unwrap();
        f
    }
}

fn info_json(file: &Path) -> Value {
    let out = ok(&blz(&["info", "--json", p(file)]));
    serde_json::from_str(&out).unwrap()
}

#[test]
fn pack_unpack_round_trips() {
    let d = Dir::new();
    let src = sample(200_000); // 1.6 MB
    let input = d.write("in.bin", &src);
    let meta = d.write(
        "m.json",
        br#"{"name": "blz", "shape": [200000], "dtype": "<i8"}"#,
    );
    let cases: &[&[&str]] = &[
        &[],
        &[
            "--codec",
            "lz4",
            "--checksum",
            "crc32",
            "--chunk-size",
            "256K",
        ],
        &["-c", "lz4hc", "-k", "sha256", "-z", "100000", "-l", "9"],
        &[
            "--codec",
            "zlib",
            "--checksum",
            "md5",
            "--shuffle",
            "bitshuffle",
        ],
        &[
            "--codec",
            "zstd",
            "--checksum",
            "None",
            "--no-offsets",
            "-z",
            "64K",
        ],
        &[
            "--codec",
            "ZSTD",
            "--filter",
            "noshuffle",
            "--typesize",
            "4",
            "-k",
            "sha512",
        ],
        &["--metadata", p(&meta), "-z", "300K", "-k", "sha1"],
        &[
            "--metadata",
            p(&meta),
            "--metadata-codec",
            "none",
            "--no-offsets",
        ],
        &["--clevel", "0", "--checksum", "sha384", "--threads", "1"],
        &["--slack", "4K", "-z", "512K", "-k", "sha224", "-n", "2"],
    ];
    for (i, args) in cases.iter().enumerate() {
        let blp = d.path(&format!("{i}.blp"));
        let back = d.path(&format!("{i}.out"));
        let mut a = vec!["pack", p(&input), p(&blp)];
        a.extend_from_slice(args);
        ok(&blz(&a));
        ok(&blz(&["unpack", p(&blp), p(&back)]));
        assert_eq!(std::fs::read(&back).unwrap(), src, "case {args:?}");
        let info = info_json(&blp);
        let h = &info["header"];
        let cs = h["chunk_size"].as_u64().unwrap();
        assert_eq!(
            h["nchunks"].as_u64().unwrap(),
            (src.len() as u64).div_ceil(cs),
            "{args:?}"
        );
        assert_eq!(info["totals"]["nbytes"].as_u64().unwrap(), src.len() as u64);
        let names: Vec<&str> = h["option_names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(names.contains(&"offsets"), !args.contains(&"--no-offsets"));
        assert_eq!(
            names.contains(&"metadata"),
            args.contains(&"--metadata"),
            "{args:?}"
        );
        assert_eq!(names.contains(&"scattered"), args.contains(&"--slack"));
        if args.contains(&"--metadata") {
            assert_eq!(info["metadata"]["name"], "blz");
            let m = d.path(&format!("{i}.json"));
            ok(&blz(&[
                "unpack",
                "--force",
                p(&blp),
                p(&back),
                "--metadata-out",
                p(&m),
            ]));
            let doc: Value = serde_json::from_slice(&std::fs::read(&m).unwrap()).unwrap();
            assert_eq!(doc["shape"][0], 200_000);
        }
    }
}

#[test]
fn empty_and_tiny_inputs() {
    let d = Dir::new();
    for len in [0usize, 1, 7, 8] {
        let src = vec![42u8; len];
        let input = d.write(&format!("{len}.bin"), &src);
        let blp = d.path(&format!("{len}.blp"));
        let back = d.path(&format!("{len}.out"));
        ok(&blz(&["pack", p(&input), p(&blp)]));
        ok(&blz(&["unpack", p(&blp), p(&back)]));
        assert_eq!(std::fs::read(&back).unwrap(), src);
        let info = info_json(&blp);
        assert_eq!(info["header"]["nchunks"], 1);
        assert_eq!(info["header"]["chunk_size"], len);
    }
}

#[test]
fn info_shows_header_and_chunks() {
    let d = Dir::new();
    let input = d.write("in.bin", &sample(10_000)); // 80000 bytes
    let meta = d.write("m.json", br#"{"unit": "m"}"#);
    let blp = d.path("a.blp");
    ok(&blz(&[
        "pack",
        p(&input),
        p(&blp),
        "-z",
        "16K",
        "-k",
        "sha256",
        "-c",
        "lz4",
        "-m",
        p(&meta),
    ]));
    let text = ok(&blz(&["info", p(&blp)]));
    for want in [
        "format version:  3",
        "options:         0x03 (offsets, metadata)",
        "checksum:        sha256 (id 6, 32-byte digests)",
        "typesize:        8",
        "chunk_size:      16384",
        "last_chunk:      14464",
        "nchunks:         5",
        "max_app_chunks:  50",
        "\"unit\": \"m\"",
        "lz4",
        "total:           80000 bytes in 5 chunks",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    let rows = text
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .count();
    assert_eq!(rows, 5, "{text}");

    let j = info_json(&blp);
    assert_eq!(j["header"]["format_version"], 3);
    assert_eq!(j["header"]["nchunks"], 5);
    assert_eq!(j["header"]["checksum"], "sha256");
    assert_eq!(j["header"]["checksum_id"], 6);
    assert_eq!(j["metadata"], serde_json::json!({"unit": "m"}));
    assert_eq!(j["metadata_header"]["checksum"], "adler32");
    assert_eq!(j["offsets_slots"], 55);
    let chunks = j["chunks"].as_array().unwrap();
    assert_eq!(chunks.len(), 5);
    let off0 = j["offsets_position"].as_u64().unwrap() + 55 * 8;
    assert_eq!(chunks[0]["offset"].as_u64().unwrap(), off0);
    for (k, c) in chunks.iter().enumerate() {
        assert_eq!(c["index"], k);
        assert_eq!(c["codec"], "lz4");
        assert_eq!(c["nbytes"], if k < 4 { 16384 } else { 14464 });
        if k > 0 {
            let prev = &chunks[k - 1];
            assert_eq!(
                c["offset"].as_u64().unwrap(),
                prev["offset"].as_u64().unwrap() + prev["cbytes"].as_u64().unwrap() + 32
            );
        }
    }
    assert_eq!(
        j["file_size"].as_u64().unwrap(),
        std::fs::metadata(&blp).unwrap().len()
    );

    // Scattered files say so.
    let s = d.path("s.blp");
    ok(&blz(&["pack", p(&input), p(&s), "--slack", "100"]));
    let text = ok(&blz(&["info", p(&s)]));
    assert!(text.contains("0x09 (offsets, scattered)"), "{text}");
}

#[test]
fn info_on_a_directory_that_is_no_dataset_says_so() {
    let d = Dir::new();
    let o = blz(&["info", p(d.tmp.path())]);
    let e = fails(&o);
    assert!(e.contains("not a blz dataset"), "{e}");
    assert!(!e.contains("panicked"));
}

#[test]
fn corrupt_chunk_fails_and_leaves_no_output() {
    let d = Dir::new();
    let input = d.write("in.bin", &sample(50_000));
    for checksum in ["adler32", "crc32", "sha1"] {
        let blp = d.path(&format!("{checksum}.blp"));
        ok(&blz(&[
            "pack",
            p(&input),
            p(&blp),
            "-z",
            "64K",
            "-k",
            checksum,
        ]));
        let j = info_json(&blp);
        let c = &j["chunks"][3];
        let at = c["offset"].as_u64().unwrap() + c["cbytes"].as_u64().unwrap() / 2;
        let mut bytes = std::fs::read(&blp).unwrap();
        bytes[at as usize] ^= 0x10;
        std::fs::write(&blp, &bytes).unwrap();
        let out = d.path(&format!("{checksum}.out"));
        let e = fails(&blz(&["unpack", p(&blp), p(&out)]));
        assert!(e.contains(p(&blp)), "file not named: {e}");
        assert!(e.contains("chunk 3"), "chunk not named: {e}");
        assert!(e.contains("checksum mismatch"), "{e}");
        assert!(!out.exists(), "partial output left behind");
        let leftovers: Vec<_> = std::fs::read_dir(d.tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("blz-tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        // The same with --force over an existing output: the old content stays.
        std::fs::write(&out, b"old").unwrap();
        fails(&blz(&["unpack", "--force", p(&blp), p(&out)]));
        assert_eq!(std::fs::read(&out).unwrap(), b"old");
    }
}

#[test]
fn corrupt_metadata_is_reported_as_such() {
    let d = Dir::new();
    let input = d.write("in.bin", &sample(100));
    let meta = d.write("m.json", br#"{"k": "some value"}"#);
    let blp = d.path("m.blp");
    ok(&blz(&[
        "pack",
        p(&input),
        p(&blp),
        "-m",
        p(&meta),
        "--metadata-codec",
        "none",
    ]));
    let mut bytes = std::fs::read(&blp).unwrap();
    bytes[64 + 3] ^= 1;
    std::fs::write(&blp, &bytes).unwrap();
    let e = fails(&blz(&["unpack", p(&blp), p(&d.path("o"))]));
    assert!(e.contains("metadata section: checksum mismatch"), "{e}");
    assert!(!d.path("o").exists());
}

#[test]
fn bad_arguments_are_refused_clearly() {
    let d = Dir::new();
    let input = d.write("in.bin", &sample(100));
    let out = d.path("o.blp");
    let cases: &[(&[&str], &str)] = &[
        (&["--codec", "snappy"], "snappy"),
        (&["--clevel", "12"], "12"),
        (&["--chunk-size", "0"], "chunk size 0"),
        (&["--chunk-size", "12Q"], "12Q"),
        (&["--chunk-size", "3G"], "chunk size"),
        (&["--typesize", "0"], "typesize"),
        (&["--typesize", "256"], "typesize"),
        (&["--checksum", "sha3"], "sha3"),
        (&["--shuffle", "twice"], "twice"),
        (&["--threads", "0"], "thread"),
        (&["--slack", "10", "--no-offsets"], "--no-offsets"),
        (&["--metadata", "/nonexistent/m.json"], "m.json"),
    ];
    for (args, want) in cases {
        let mut a = vec!["pack", p(&input), p(&out)];
        a.extend_from_slice(args);
        let e = fails(&blz(&a));
        assert!(e.contains(want), "{args:?}: {e}");
        assert!(!out.exists(), "{args:?} created the output");
    }
    let bad_json = d.write("bad.json", b"{not json");
    let e = fails(&blz(&["pack", p(&input), p(&out), "-m", p(&bad_json)]));
    assert!(e.contains("not valid JSON"), "{e}");

    let e = fails(&blz(&["pack", "/dev/null", p(&out)]));
    assert!(e.contains("not a regular file"), "{e}");
    let e = fails(&blz(&["pack", p(d.tmp.path()), p(&out)]));
    assert!(e.contains("not a regular file"), "{e}");
    let e = fails(&blz(&["pack", p(&d.path("missing.bin")), p(&out)]));
    assert!(e.contains("missing.bin"), "{e}");
    let e = fails(&blz(&["unpack", p(&d.path("missing.blp")), p(&out)]));
    assert!(e.contains("missing.blp"), "{e}");
    let e = fails(&blz(&["info", p(&d.path("missing.blp"))]));
    assert!(e.contains("missing.blp"), "{e}");
    // Not a superchunk file.
    let e = fails(&blz(&["unpack", p(&input), p(&out)]));
    assert!(e.contains("not a blpk file"), "{e}");
    let e = fails(&blz(&["info", p(&input)]));
    assert!(e.contains("in.bin"), "{e}");
    fails(&blz(&["pack", p(&input)]));
    fails(&blz(&["frobnicate"]));
    assert!(!out.exists());
    // A file without metadata has none to write out.
    let blp = d.path("plain.blp");
    ok(&blz(&["pack", p(&input), p(&blp)]));
    let e = fails(&blz(&[
        "unpack",
        p(&blp),
        p(&out),
        "--metadata-out",
        p(&d.path("m.json")),
    ]));
    assert!(e.contains("no metadata"), "{e}");
    assert!(!out.exists());
}

#[test]
fn refuses_to_overwrite_without_force() {
    let d = Dir::new();
    let src = sample(1000);
    let input = d.write("in.bin", &src);
    let blp = d.write("a.blp", b"precious");
    let e = fails(&blz(&["pack", p(&input), p(&blp)]));
    assert!(e.contains("already exists") && e.contains("--force"), "{e}");
    assert_eq!(std::fs::read(&blp).unwrap(), b"precious");
    ok(&blz(&["pack", "--force", p(&input), p(&blp)]));
    let out = d.write("a.out", b"also precious");
    let e = fails(&blz(&["unpack", p(&blp), p(&out)]));
    assert!(e.contains("already exists"), "{e}");
    assert_eq!(std::fs::read(&out).unwrap(), b"also precious");
    ok(&blz(&["unpack", "-f", p(&blp), p(&out)]));
    assert_eq!(std::fs::read(&out).unwrap(), src);
}

#[test]
fn help_explains_every_subcommand() {
    for sub in ["pack", "unpack", "info"] {
        let h = ok(&blz(&[sub, "--help"]));
        assert!(h.contains("Usage: blz"), "{h}");
    }
    let h = ok(&blz(&["pack", "--help"]));
    for want in [
        "[default: blosclz]",
        "[default: 7]",
        "[default: shuffle]",
        "[default: 8]",
        "[default: 1M]",
        "[default: adler32]",
        "bloscpack cannot read it",
    ] {
        assert!(h.contains(want), "pack --help lacks {want:?}");
    }
}

fn manifest(dir: &Path) -> Vec<Value> {
    let m: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    m["files"].as_array().unwrap().clone()
}

#[test]
fn unpacks_every_bloscpack_fixture() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/bloscpack");
    let d = Dir::new();
    let files = manifest(&fixtures);
    assert!(files.len() >= 30);
    for e in &files {
        let name = e["name"].as_str().unwrap();
        let out = d.path(&format!("{name}.out"));
        ok(&blz(&["unpack", p(&fixtures.join(name)), p(&out)]));
        let got = std::fs::read(&out).unwrap();
        assert_eq!(got.len() as u64, e["raw_len"].as_u64().unwrap(), "{name}");
        assert_eq!(sha256_hex(&got), e["raw_sha256"], "{name}");
        let info = info_json(&fixtures.join(name));
        assert_eq!(info["header"]["nchunks"], e["header"]["nchunks"], "{name}");
        assert_eq!(
            info["totals"]["trailing_bytes"], e["trailing_bytes"],
            "{name}"
        );
    }
}
