//! The `blz` dataset commands, run as a user would: create from every source, read back with
//! `get`, `info --json`, append, resize, attributes, verify (intact and corrupt), compact,
//! and the errors a user can provoke. `.npy` files are written and read with ndarray-npy (an
//! independent implementation) and, where the peer Python environment exists, with numpy.

mod common;

use common::{fails, fails_with, json_of, ok, raw_npy, run, text, Dir};
use ndarray::{array, Array1, Array2, ArrayD, IxDyn};
use ndarray_npy::{read_npy, write_npy};
use num_complex::Complex;
use serde_json::json;
use std::path::Path;
use std::process::Command;

const PEER_PYTHON: &str = "/root/.cache/blz-peers/bin/python";

/// Creates a dataset from `a` through a .npy file, reads it back whole with `get --out`, and
/// checks the two are equal.
fn npy_roundtrip<T>(d: &Dir, name: &str, a: &ArrayD<T>, extra: &[&str])
where
    T: ndarray_npy::WritableElement + ndarray_npy::ReadableElement + PartialEq + std::fmt::Debug,
{
    let src = d.s(&format!("{name}.npy"));
    let ds = d.s(&format!("{name}.blz"));
    let out = d.s(&format!("{name}-out.npy"));
    write_npy(&src, a).expect("write npy");
    let mut args = vec!["create", &ds, "--npy", &src];
    args.extend_from_slice(extra);
    ok(&args);
    ok(&["get", &ds, "--out", &out]);
    let back: ArrayD<T> = read_npy(&out).expect("read npy");
    assert_eq!(&back, a, "{name}");
}

#[test]
fn create_from_npy_of_many_dtypes() {
    let d = Dir::new();
    let n = 5000;
    npy_roundtrip(
        &d,
        "f64",
        &Array1::linspace(-1.0, 1.0, n).into_dyn(),
        &["--chunkshape", "700", "--superchunk-size", "3"],
    );
    npy_roundtrip(
        &d,
        "f32",
        &Array1::from_shape_fn(n, |i| i as f32 * 0.25).into_dyn(),
        &["--codec", "zstd", "--filter", "bitshuffle"],
    );
    npy_roundtrip(
        &d,
        "i8",
        &Array1::from_shape_fn(n, |i| (i % 251) as i8).into_dyn(),
        &["--big-endian"],
    );
    npy_roundtrip(
        &d,
        "u16",
        &Array1::from_shape_fn(n, |i| (i * 13) as u16).into_dyn(),
        &["--big-endian", "--checksum", "sha256"],
    );
    npy_roundtrip(
        &d,
        "u64",
        &Array1::from_shape_fn(10, |i| u64::MAX - i as u64).into_dyn(),
        &[],
    );
    npy_roundtrip(
        &d,
        "bool",
        &Array1::from_shape_fn(999, |i| i % 3 == 0).into_dyn(),
        &[],
    );
    npy_roundtrip(
        &d,
        "c64",
        &Array1::from_shape_fn(100, |i| Complex::new(i as f32, -(i as f32))).into_dyn(),
        &[],
    );
    npy_roundtrip(
        &d,
        "c128",
        &Array1::from_shape_fn(100, |i| Complex::new(0.5, i as f64)).into_dyn(),
        &["--big-endian"],
    );
    // 2-d, chunked on both axes, spread over several files.
    let a2 = Array2::from_shape_fn((1234, 17), |(i, j)| (i * 100 + j) as i32).into_dyn();
    npy_roundtrip(
        &d,
        "i32-2d",
        &a2,
        &["--chunkshape", "100x5", "--superchunk-size", "7"],
    );
    // Fortran order: ndarray-npy writes a transposed view as fortran_order True.
    let f = Array2::from_shape_fn((40, 30), |(i, j)| (i * 1000 + j) as i64);
    let fsrc = d.s("fortran.npy");
    write_npy(&fsrc, &f.t()).expect("write npy");
    ok(&["create", &d.s("fortran.blz"), "--npy", &fsrc]);
    ok(&["get", &d.s("fortran.blz"), "--out", &d.s("fortran-out.npy")]);
    let back: Array2<i64> = read_npy(d.p("fortran-out.npy")).expect("read");
    assert_eq!(back, f.t());
    // A 3-d array.
    let a3 = ArrayD::from_shape_fn(IxDyn(&[6, 4, 3]), |ix| {
        (ix[0] * 100 + ix[1] * 10 + ix[2]) as u8
    });
    npy_roundtrip(&d, "u8-3d", &a3, &["--chunkshape", "4x3x2"]);
}

#[test]
fn create_from_npy_strings_and_big_endian() {
    let d = Dir::new();
    // U3, little-endian UCS-4.
    let words = ["ab", "héé", "", "z"];
    let mut data = Vec::new();
    for w in words {
        let mut cs: Vec<u32> = w.chars().map(|c| c as u32).collect();
        cs.resize(3, 0);
        for c in cs {
            data.extend_from_slice(&c.to_le_bytes());
        }
    }
    std::fs::write(d.p("u.npy"), raw_npy("<U3", "(4,)", &data)).expect("write");
    ok(&["create", &d.s("u.blz"), "--npy", &d.s("u.npy")]);
    assert_eq!(
        json_of(&["get", &d.s("u.blz"), "--json"]),
        json!(["ab", "héé", "", "z"])
    );
    assert_eq!(ok(&["get", &d.s("u.blz"), "1"]), "héé\n");
    // S4 byte strings, 2-d.
    let data = b"abcdxy\0\0q\0\0\0rstu";
    std::fs::write(d.p("s.npy"), raw_npy("|S4", "(2, 2)", data)).expect("write");
    ok(&["create", &d.s("s.blz"), "--npy", &d.s("s.npy")]);
    assert_eq!(
        json_of(&["get", &d.s("s.blz"), "--json"]),
        json!([["abcd", "xy"], ["q", "rstu"]])
    );
    // Round trip through get --out keeps the dtype.
    ok(&["get", &d.s("s.blz"), "--out", &d.s("s-out.npy")]);
    let back = std::fs::read(d.p("s-out.npy")).expect("read");
    assert!(text(&back[..80]).contains("'descr': '|S4'"));
    assert!(back.ends_with(data));
    // A big-endian int32 file, stored natively.
    let vals: Vec<u8> = [1i32, -2, 300_000]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    std::fs::write(d.p("be.npy"), raw_npy(">i4", "(3,)", &vals)).expect("write");
    ok(&["create", &d.s("be.blz"), "--npy", &d.s("be.npy")]);
    assert_eq!(
        json_of(&["get", &d.s("be.blz"), "--json"]),
        json!([1, -2, 300_000])
    );
    // Object arrays are refused with an explanation.
    std::fs::write(d.p("o.npy"), raw_npy("|O", "(2,)", &[0u8; 16])).expect("write");
    let err = fails(&["create", &d.s("o.blz"), "--npy", &d.s("o.npy")]);
    assert!(err.contains("object"), "{err}");
    assert!(!d.p("o.blz").exists());
    // A truncated file is refused before anything is created.
    std::fs::write(d.p("t.npy"), raw_npy("<f8", "(100,)", &[0u8; 80])).expect("write");
    let err = fails(&["create", &d.s("t.blz"), "--npy", &d.s("t.npy")]);
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn create_from_csv_and_append_csv() {
    let d = Dir::new();
    let csv = d.p("trades.csv");
    std::fs::write(
        &csv,
        "time,price,qty,sym\n1,10.5,3,ab\n2,11,4,cd\n3,,5,ef\n4,1e3,6,gh\n",
    )
    .expect("write");
    let c = csv.to_string_lossy().into_owned();
    // Floats (an empty field is NaN), by name.
    ok(&["create", &d.s("p.blz"), "--csv", &c, "--column", "price"]);
    let info = json_of(&["info", &d.s("p.blz"), "--json"]);
    assert_eq!(info["dtype"], "float64");
    assert_eq!(
        json_of(&["get", &d.s("p.blz"), "--json"]),
        json!([10.5, 11.0, "nan", 1000.0])
    );
    // Integers, by index.
    ok(&["create", &d.s("q.blz"), "--csv", &c, "--column", "2"]);
    assert_eq!(
        json_of(&["info", &d.s("q.blz"), "--json"])["dtype"],
        "int64"
    );
    assert_eq!(ok(&["get", &d.s("q.blz")]), "3\n4\n5\n6\n");
    // A forced dtype.
    ok(&[
        "create",
        &d.s("r.blz"),
        "--csv",
        &c,
        "--column",
        "qty",
        "--dtype",
        "uint8",
    ]);
    assert_eq!(
        json_of(&["info", &d.s("r.blz"), "--json"])["dtype"],
        "uint8"
    );
    // Text needs a string dtype.
    let err = fails(&["create", &d.s("t.blz"), "--csv", &c, "--column", "sym"]);
    assert!(
        err.contains("line 2") && err.contains("not a number"),
        "{err}"
    );
    ok(&[
        "create",
        &d.s("t.blz"),
        "--csv",
        &c,
        "--column",
        "sym",
        "--dtype",
        "S2",
    ]);
    assert_eq!(
        json_of(&["get", &d.s("t.blz"), "--json"]),
        json!(["ab", "cd", "ef", "gh"])
    );
    // A file without header, semicolon-separated.
    let raw = d.p("raw.csv");
    std::fs::write(&raw, "7;8\n9;10\n").expect("write");
    ok(&[
        "append",
        &d.s("q.blz"),
        "--csv",
        &raw.to_string_lossy(),
        "--column",
        "1",
        "--delimiter",
        ";",
    ]);
    assert_eq!(
        json_of(&["get", &d.s("q.blz"), "--json"]),
        json!([3, 4, 5, 6, 8, 10])
    );
    // A bad value anywhere leaves the dataset as it was.
    std::fs::write(&raw, "1\n2\nthree\n").expect("write");
    let err = fails(&[
        "append",
        &d.s("q.blz"),
        "--csv",
        &raw.to_string_lossy(),
        "--column",
        "0",
    ]);
    assert!(err.contains("line 3"), "{err}");
    assert_eq!(
        json_of(&["info", &d.s("q.blz"), "--json"])["shape"],
        json!([6])
    );
    let err = fails(&["create", &d.s("x.blz"), "--csv", &c, "--column", "nope"]);
    assert!(
        err.contains("\"nope\"") && err.contains("\"price\""),
        "{err}"
    );
}

#[test]
fn create_generated() {
    let d = Dir::new();
    // arange, larger than one batch of chunks, then read back through a .npy file.
    ok(&[
        "create",
        &d.s("a.blz"),
        "--arange",
        "300000",
        "--chunkshape",
        "4096",
        "--superchunk-size",
        "8",
    ]);
    ok(&["get", &d.s("a.blz"), "--out", &d.s("a.npy")]);
    let a: Array1<i64> = read_npy(d.p("a.npy")).expect("read");
    assert_eq!(a, Array1::from_iter(0..300_000i64));
    // A strided, reversed selection.
    ok(&["get", &d.s("a.blz"), "299999:0:-7", "--out", &d.s("a2.npy")]);
    let a2: Array1<i64> = read_npy(d.p("a2.npy")).expect("read");
    let want: Vec<i64> = (1..=299_999i64).rev().step_by(7).collect();
    assert_eq!(a2.to_vec(), want);
    // linspace, both ends included.
    ok(&[
        "create",
        &d.s("l.blz"),
        "--linspace",
        "-1,1,5",
        "--dtype",
        "float32",
    ]);
    assert_eq!(
        json_of(&["get", &d.s("l.blz"), "--json"]),
        json!([-1.0, -0.5, 0.0, 0.5, 1.0])
    );
    // random walk: deterministic with a seed.
    for name in ["w1.blz", "w2.blz", "w3.blz"] {
        let seed = if name == "w3.blz" { "8" } else { "7" };
        ok(&[
            "create",
            &d.s(name),
            "--random-walk",
            "10000",
            "--seed",
            seed,
        ]);
        ok(&["get", &d.s(name), "--out", &d.s(&format!("{name}.npy"))]);
    }
    let w1: Array1<f64> = read_npy(d.p("w1.blz.npy")).expect("read");
    let w2: Array1<f64> = read_npy(d.p("w2.blz.npy")).expect("read");
    let w3: Array1<f64> = read_npy(d.p("w3.blz.npy")).expect("read");
    assert_eq!(w1, w2);
    assert_ne!(w1, w3);
    assert_eq!(w1[0], 0.0);
    let steps = &w1.slice(ndarray::s![1..]) - &w1.slice(ndarray::s![..-1]);
    let mean = steps.mean().unwrap_or(f64::NAN);
    assert!(
        mean.abs() < 0.1 && steps.std(0.0) > 0.8,
        "steps look like N(0, 1)"
    );
    // zeros, 2-d, with a fill value for later growth and attributes.
    ok(&[
        "create",
        &d.s("z.blz"),
        "--zeros",
        "1000x20",
        "--dtype",
        "int16",
        "--fill",
        "-1",
        "--attr",
        "units=\"m\"",
        "--attr",
        "scale=[1,2]",
    ]);
    ok(&["get", &d.s("z.blz"), "--out", &d.s("z.npy")]);
    let z: Array2<i16> = read_npy(d.p("z.npy")).expect("read");
    assert_eq!(z, Array2::<i16>::zeros((1000, 20)));
    assert_eq!(
        json_of(&["attrs", &d.s("z.blz")]),
        json!({"units": "m", "scale": [1, 2]})
    );
    ok(&["resize", &d.s("z.blz"), "1002"]);
    assert_eq!(
        json_of(&["get", &d.s("z.blz"), "999:, 0:3", "--json"]),
        json!([[0, 0, 0], [-1, -1, -1], [-1, -1, -1]])
    );
    // Lossy truncation keeps the requested mantissa bits.
    ok(&[
        "create",
        &d.s("t.blz"),
        "--linspace",
        "0,1,1001",
        "--truncate-bits",
        "8",
    ]);
    let info = json_of(&["info", &d.s("t.blz"), "--json"]);
    assert_eq!(info["filters"], json!(["truncate", "shuffle"]));
    assert_eq!(info["mantissa_bits"], 8);
    // Sources that cannot make the dtype.
    let err = fails(&[
        "create",
        &d.s("x.blz"),
        "--arange",
        "300",
        "--dtype",
        "uint8",
    ]);
    assert!(err.contains("uint8"), "{err}");
    let err = fails(&[
        "create",
        &d.s("x.blz"),
        "--random-walk",
        "3",
        "--dtype",
        "int32",
    ]);
    assert!(err.contains("float"), "{err}");
    // No source, two sources: usage errors.
    fails_with(2, &["create", &d.s("x.blz")]);
    fails_with(
        2,
        &["create", &d.s("x.blz"), "--arange", "3", "--zeros", "3"],
    );
}

#[test]
fn info_json_fields() {
    let d = Dir::new();
    let ds = d.s("i.blz");
    ok(&[
        "create",
        &ds,
        "--zeros",
        "100x6",
        "--dtype",
        "float32",
        "--chunkshape",
        "10x3",
        "--superchunk-size",
        "5",
        "--codec",
        "zlib",
        "--clevel",
        "7",
        "--filter",
        "noshuffle",
        "--checksum",
        "md5",
        "--slack",
        "64",
        "--fill",
        "nan",
        "--big-endian",
        "--attr",
        "owner=\"lab\"",
    ]);
    let i = json_of(&["info", &ds, "--json"]);
    assert_eq!(i["shape"], json!([100, 6]));
    assert_eq!(i["dtype"], "float32");
    assert_eq!(i["descr"], ">f4");
    assert_eq!(i["endianness"], "big");
    assert_eq!(i["chunkshape"], json!([10, 3]));
    assert_eq!(i["superchunksize"], 5);
    assert_eq!(i["codec"], "zlib");
    assert_eq!(i["clevel"], 7);
    assert_eq!(i["filters"], json!([]));
    assert_eq!(i["checksum"], "md5");
    assert_eq!(i["slack"], 64);
    assert_eq!(i["fill"], "nan");
    assert_eq!(i["nbytes"], 100 * 6 * 4);
    assert!(i["cbytes"].as_u64().unwrap_or(0) > 0);
    let ratio = i["ratio"].as_f64().unwrap_or(0.0);
    assert!((ratio - 2400.0 / i["cbytes"].as_f64().unwrap_or(1.0)).abs() < 1e-9);
    assert_eq!(i["chunks"], 20);
    assert_eq!(i["nfiles"], 4);
    let files = i["files"].as_array().cloned().unwrap_or_default();
    assert_eq!(files.len(), 4);
    assert_eq!(files[0]["name"], "data/__1__.bin");
    let size = std::fs::metadata(d.p("i.blz/data/__1__.bin")).map_or(0, |m| m.len());
    assert_eq!(files[0]["size"], size);
    assert_eq!(i["attributes"], json!({"owner": "lab"}));
    // The table names the same facts.
    let t = ok(&["info", &ds]);
    for want in [
        "[100, 6]",
        "float32 (>f4)",
        "zlib (clevel 7)",
        "md5",
        "data/__4__.bin",
        "lab",
    ] {
        assert!(t.contains(want), "{want} in {t}");
    }
}

#[test]
fn get_prints_like_numpy() {
    let d = Dir::new();
    let src = d.s("m.npy");
    let m = Array2::from_shape_fn((10, 7), |(i, j)| (i * 10 + j) as i64);
    write_npy(&src, &m).expect("write");
    let ds = d.s("m.blz");
    ok(&["create", &ds, "--npy", &src, "--chunkshape", "3x2"]);
    assert_eq!(
        ok(&["get", &ds, "2:8:3,::-1"]),
        "26 25 24 23 22 21 20\n56 55 54 53 52 51 50\n"
    );
    // A 1-d result prints one value per line.
    assert_eq!(ok(&["get", &ds, "5, :3"]), "50\n51\n52\n");
    assert_eq!(ok(&["get", &ds, "-1,-1"]), "96\n");
    assert_eq!(
        ok(&["get", &ds, "...,2", "--json"]),
        "[2,12,22,32,42,52,62,72,82,92]\n"
    );
    assert_eq!(ok(&["get", &ds, "8:2:-3, 1"]), "81\n51\n");
    assert_eq!(ok(&["get", &ds, "100:, 0"]), "");
    let o = run(&["get", &ds, "100:, 0"]);
    assert!(text(&o.stderr).contains("selection is empty (shape [0])"));
    // Steps longer than any axis (even beyond 64 bits) select one element, as in numpy.
    assert_eq!(ok(&["get", &ds, "::1000000000000000000000, 0"]), "0\n");
    assert_eq!(ok(&["get", &ds, "::-1000000000000000000000, -1"]), "96\n");
    assert_eq!(ok(&["get", &ds, "::4,:"]).lines().count(), 3);
    // Over 1000 values: the edges and '...', unless --all.
    ok(&["create", &d.s("big.blz"), "--arange", "5000"]);
    let o = run(&["get", &d.s("big.blz")]);
    assert_eq!(text(&o.stdout), "0\n1\n2\n...\n4997\n4998\n4999\n");
    assert!(text(&o.stderr).contains("--all"));
    assert_eq!(ok(&["get", &d.s("big.blz"), "--all"]).lines().count(), 5000);
    ok(&[
        "create",
        &d.s("big2.blz"),
        "--zeros",
        "400x30",
        "--dtype",
        "uint8",
    ]);
    let s = ok(&["get", &d.s("big2.blz")]);
    assert_eq!(s.lines().count(), 7);
    assert_eq!(s.lines().next(), Some("0 0 0 ... 0 0 0"));
    let err = fails(&["get", &d.s("big.blz"), "--json"]);
    assert!(err.contains("--all"), "{err}");
}

#[test]
fn append_resize_attrs() {
    let d = Dir::new();
    let ds = d.s("a.blz");
    let first = Array2::from_shape_fn((50, 4), |(i, j)| (i * 4 + j) as f64);
    write_npy(d.p("first.npy"), &first).expect("write");
    ok(&[
        "create",
        &ds,
        "--npy",
        &d.s("first.npy"),
        "--chunkshape",
        "16x4",
    ]);
    let more = Array2::from_shape_fn((30, 4), |(i, j)| -((i * 4 + j) as f64));
    write_npy(d.p("more.npy"), &more).expect("write");
    let out = ok(&["append", &ds, "--npy", &d.s("more.npy")]);
    assert!(out.contains("[50, 4] -> [80, 4]"), "{out}");
    ok(&["get", &ds, "--out", &d.s("all.npy")]);
    let all: Array2<f64> = read_npy(d.p("all.npy")).expect("read");
    assert_eq!(
        all,
        ndarray::concatenate(ndarray::Axis(0), &[first.view(), more.view()]).expect("concat")
    );
    // Wrong dtype or shape.
    write_npy(d.p("i.npy"), &Array2::<i32>::zeros((3, 4))).expect("write");
    let err = fails(&["append", &ds, "--npy", &d.s("i.npy")]);
    assert!(err.contains("int32") && err.contains("float64"), "{err}");
    write_npy(d.p("w.npy"), &Array2::<f64>::zeros((3, 5))).expect("write");
    let err = fails(&["append", &ds, "--npy", &d.s("w.npy")]);
    assert!(err.contains("[3, 5]") && err.contains("[n, 4]"), "{err}");
    // Resize: shrink, then grow with the fill value.
    ok(&["resize", &ds, "10"]);
    ok(&["resize", &ds, "12"]);
    assert_eq!(
        json_of(&["get", &ds, "9:", "--json"]),
        json!([
            [36.0, 37.0, 38.0, 39.0],
            [0.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0]
        ])
    );
    // A 1-d dataset takes a 1-d array.
    ok(&["create", &d.s("one.blz"), "--arange", "3"]);
    write_npy(d.p("one.npy"), &array![7i64, 8]).expect("write");
    ok(&["append", &d.s("one.blz"), "--npy", &d.s("one.npy")]);
    assert_eq!(
        json_of(&["get", &d.s("one.blz"), "--json"]),
        json!([0, 1, 2, 7, 8])
    );
    // Attributes.
    assert_eq!(json_of(&["attrs", &ds]), json!({}));
    ok(&[
        "attrs",
        &ds,
        "--set",
        "units=\"K\"",
        "--set",
        "scale=0.5",
        "--set",
        "tags=[\"a\"]",
    ]);
    assert_eq!(
        json_of(&["attrs", &ds]),
        json!({"units": "K", "scale": 0.5, "tags": ["a"]})
    );
    ok(&["attrs", &ds, "--delete", "scale", "--set", "units=\"C\""]);
    assert_eq!(
        json_of(&["attrs", &ds]),
        json!({"units": "C", "tags": ["a"]})
    );
    let err = fails(&["attrs", &ds, "--delete", "nope"]);
    assert!(err.contains("nope"), "{err}");
    let err = fails(&["attrs", &ds, "--set", "x=not json"]);
    assert!(err.contains("not JSON"), "{err}");
    assert_eq!(
        json_of(&["attrs", &ds]),
        json!({"units": "C", "tags": ["a"]})
    );
}

/// Flips one byte in the middle of chunk `k` of a superchunk file.
fn corrupt_chunk(file: &Path, k: u64) {
    let storage = blz::storage::local();
    let f = storage
        .open(file, blz::storage::OpenMode::Read)
        .expect("open");
    let r = blz_format::blpk::SuperchunkReader::open(f).expect("reader");
    let info = r.chunk_info(k).expect("chunk info");
    let at = (info.offset + 16 + u64::from(info.header.cbytes - 16) / 2) as usize;
    drop(r);
    let mut bytes = std::fs::read(file).expect("read");
    bytes[at] ^= 0x5a;
    std::fs::write(file, bytes).expect("write");
}

#[test]
fn verify_finds_corrupt_chunks_and_compact() {
    let d = Dir::new();
    let ds = d.s("v.blz");
    ok(&[
        "create",
        &ds,
        "--random-walk",
        "50000",
        "--seed",
        "3",
        "--chunkshape",
        "1000",
        "--superchunk-size",
        "10",
    ]);
    let out = ok(&["verify", &ds]);
    assert!(
        out.contains("50 chunks in 5 files verified (crc32 digests), all intact"),
        "{out}"
    );
    corrupt_chunk(&d.p("v.blz/data/__2__.bin"), 3);
    let o = run(&["verify", &ds]);
    assert_eq!(o.status.code(), Some(1));
    let out = text(&o.stdout);
    let err = text(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        out.contains("__2__.bin: chunk 3: checksum mismatch"),
        "{out}"
    );
    assert!(out.contains("1 corrupt"), "{out}");
    assert!(err.contains("1 of 50 chunks are corrupt"), "{err}");
    // Reading the damaged chunk fails cleanly, naming it; other parts still read.
    let err = fails(&["get", &ds, "13500"]);
    assert!(err.contains("__2__.bin: chunk 3"), "{err}");
    ok(&["get", &ds, "0:10"]);
    // compact on a healthy dataset keeps the data.
    let ds2 = d.s("c.blz");
    ok(&[
        "create",
        &ds2,
        "--arange",
        "10000",
        "--chunkshape",
        "1000",
        "--slack",
        "256",
    ]);
    let out = ok(&["compact", &ds2]);
    assert!(out.contains("saved"), "{out}");
    ok(&["verify", &ds2]);
    assert_eq!(ok(&["get", &ds2, "9999"]), "9999\n");
}

#[test]
fn bad_input_fails_cleanly() {
    let d = Dir::new();
    let ds = d.s("b.blz");
    ok(&["create", &ds, "--arange", "100"]);
    for sel in ["1:2:0", "abc", "1:2:3:4", "1,,2", "1.5"] {
        let err = fails(&["get", &ds, sel]);
        assert!(err.contains("selection"), "{sel}: {err}");
    }
    let err = fails(&["get", &ds, "100"]);
    assert!(err.contains("out of range"), "{err}");
    let err = fails(&["get", &ds, "-101"]);
    assert!(err.contains("out of range"), "{err}");
    let err = fails(&["get", &ds, "1,2"]);
    assert!(err.contains("too many indices"), "{err}");
    let err = fails(&["get", &d.s("missing.blz")]);
    assert!(err.contains("no such dataset"), "{err}");
    let err = fails(&["info", &d.s("missing.blz")]);
    assert!(err.contains("no such dataset"), "{err}");
    let err = fails(&["verify", &d.s("missing.blz")]);
    assert!(err.contains("no such dataset"), "{err}");
    std::fs::create_dir(d.p("plain")).expect("mkdir");
    let err = fails(&["info", &d.s("plain")]);
    assert!(err.contains("not a blz dataset"), "{err}");
    let err = fails(&["create", &ds, "--arange", "3"]);
    assert!(err.contains("--overwrite"), "{err}");
    ok(&["create", &ds, "--arange", "3", "--overwrite"]);
    let err = fails(&[
        "create",
        &d.s("x.blz"),
        "--arange",
        "3",
        "--truncate-bits",
        "5",
    ]);
    assert!(err.contains("floats"), "{err}");
    let err = fails(&[
        "create",
        &d.s("x.blz"),
        "--arange",
        "3",
        "--chunkshape",
        "2x2",
    ]);
    assert!(err.contains("axes"), "{err}");
    let err = fails(&["create", &d.s("x.blz"), "--arange", "3", "--fill", "1.5"]);
    assert!(err.contains("fill"), "{err}");
    let err = fails(&["create", &d.s("x.blz"), "--npy", &d.s("nope.npy")]);
    assert!(err.contains("nope.npy"), "{err}");
    fails_with(
        2,
        &["create", &d.s("x.blz"), "--arange", "3", "--codec", "nope"],
    );
    fails_with(2, &["get"]);
    fails_with(2, &["resize", &ds, "-3"]);
    // A malformed meta/storage.
    std::fs::write(d.p("b.blz/meta/storage"), "{\"format\": ").expect("write");
    for cmd in ["info", "get", "verify", "compact", "attrs"] {
        let err = fails(&[cmd, &ds]);
        assert!(err.contains("meta/storage"), "{cmd}: {err}");
    }
    let err = fails(&["resize", &ds, "5"]);
    assert!(err.contains("meta/storage"), "{err}");
}

#[test]
fn npy_written_by_get_reads_in_numpy() {
    if !Path::new(PEER_PYTHON).exists() {
        println!("note: {PEER_PYTHON} not found; skipping the numpy check");
        return;
    }
    let d = Dir::new();
    ok(&[
        "create",
        &d.s("f.blz"),
        "--linspace",
        "0,1,11",
        "--big-endian",
    ]);
    ok(&["get", &d.s("f.blz"), "::-2", "--out", &d.s("f.npy")]);
    ok(&[
        "create",
        &d.s("z.blz"),
        "--zeros",
        "3x4",
        "--dtype",
        "complex64",
    ]);
    ok(&["get", &d.s("z.blz"), "1:, ::3", "--out", &d.s("z.npy")]);
    ok(&[
        "create",
        &d.s("i.blz"),
        "--arange",
        "12",
        "--dtype",
        "int16",
    ]);
    ok(&["get", &d.s("i.blz"), "5", "--out", &d.s("i.npy")]);
    let mut s = Vec::new();
    for w in ["ab", "cé"] {
        let mut cs: Vec<u32> = w.chars().map(|c| c as u32).collect();
        cs.resize(2, 0);
        s.extend(cs.iter().flat_map(|c| c.to_le_bytes()));
    }
    std::fs::write(d.p("u.npy"), raw_npy("<U2", "(2,)", &s)).expect("write");
    ok(&["create", &d.s("u.blz"), "--npy", &d.s("u.npy")]);
    ok(&["get", &d.s("u.blz"), "--out", &d.s("u-out.npy")]);
    let script = format!(
        r#"
import numpy as np
f = np.load({f:?})
assert f.dtype == np.dtype('>f8') and f.shape == (6,), (f.dtype, f.shape)
assert np.allclose(f, np.linspace(0, 1, 11)[::-2]), f
z = np.load({z:?})
assert z.dtype == np.complex64 and z.shape == (2, 2), (z.dtype, z.shape)
i = np.load({i:?})
assert i.dtype == np.int16 and i.shape == () and i == 5, (i.dtype, i.shape, i)
u = np.load({u:?})
assert u.dtype == np.dtype('<U2') and list(u) == ['ab', 'cé'], u
print("numpy ok")
"#,
        f = d.s("f.npy"),
        z = d.s("z.npy"),
        i = d.s("i.npy"),
        u = d.s("u-out.npy"),
    );
    let o = Command::new(PEER_PYTHON)
        .args(["-c", &script])
        .output()
        .expect("python runs");
    assert!(
        o.status.success() && text(&o.stdout).contains("numpy ok"),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
}

/// A host filter that matches no file is an error naming the hosts that hold files (a
/// misspelt host would otherwise drop its part of a combined result silently); the real
/// host scans everything.
#[test]
fn scan_of_an_unknown_host_is_an_error() {
    let d = Dir::new();
    let p = d.s("a.blz");
    ok(&["create", &p, "--arange", "10000", "--chunkshape", "1000"]);
    let err = fails(&["scan", &p, "--op", "sum", "--host", "no-such-host"]);
    let me = blz::locate::hostname();
    assert!(
        err.contains("\"no-such-host\" holds none of the files") && err.contains(&me),
        "{err}"
    );
    let out = ok(&["scan", &p, "--op", "sum", "--host", &me]);
    assert!(out.contains("sum: 49995000"), "{out}");
}

/// Issue 21: an integer past 64 bits would come back as a float; `attrs --set` refuses it,
/// naming the key, and sets nothing.
#[test]
fn attrs_refuse_integers_past_64_bits() {
    let d = Dir::new();
    let a = d.s("a.blz");
    ok(&["create", &a, "--arange", "10"]);
    let big = "1606938044258990275541962092341162602522202993782792835301376";
    let err = fails(&["attrs", &a, "--set", &format!("n={big}")]);
    assert!(err.contains("n=") && err.contains("64 bits"), "{err}");
    let err = fails(&[
        "attrs",
        &a,
        "--set",
        &format!("m={{\"deep\": [1, -{big}]}}"),
    ]);
    assert!(err.contains("deep/1") && err.contains("64 bits"), "{err}");
    ok(&[
        "attrs",
        &a,
        "--set",
        "n=18446744073709551615",
        "--set",
        "k=-9223372036854775808",
    ]);
    let attrs = json_of(&["attrs", &a]);
    assert_eq!(attrs["n"], json!(18446744073709551615u64), "{attrs}");
    assert_eq!(attrs["k"], json!(-9223372036854775808i64), "{attrs}");
    assert!(attrs.get("m").is_none(), "{attrs}");
}
