//! Importing bcolz carrays and ctables written by the real bcolz (1.13.0, the bcolz-zipline
//! wheel; `tests/fixtures/bcolz/make.py` regenerates them). Each fixture is compared exactly
//! with the values bcolz itself read back (`<name>.npy`, written by numpy) and with the
//! settings bcolz reported (`manifest.json`). Then the corruptions a bcolz directory can
//! suffer, each of which must give a typed error naming the file (and chunk), never a panic.

mod common;

use blz::bcolz::{self, CarrayReader, CtableReader, ImportOptions, Kind};
use blz::blosc::Codec;
use blz::meta::FilterName;
use blz::selection::AxisSel;
use blz::table::Values;
use blz::{DType, Dataset, Endianness, Error};
use common::copy_dir;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bcolz")
}

fn manifest() -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures().join("manifest.json")).unwrap();
    let m: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(m["written_by"]["bcolz"], "1.13.0");
    m["fixtures"].as_array().unwrap().clone()
}

fn entry(name: &str) -> Value {
    manifest()
        .into_iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in manifest.json"))
}

/// A `.npy` file: its dtype, shape, and data converted to this machine's byte order.
struct Npy {
    dtype: DType,
    shape: Vec<u64>,
    data: Vec<u8>,
}

/// Reads a C-order `.npy` file (version 1 to 3) of any dtype blz holds.
fn read_npy(path: &Path) -> Npy {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..6], b"\x93NUMPY", "{}", path.display());
    let (hlen, start) = if b[6] == 1 {
        (u16::from_le_bytes([b[8], b[9]]) as usize, 10)
    } else {
        (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
    };
    let header = std::str::from_utf8(&b[start..start + hlen]).unwrap();
    let field = |k: &str| {
        let at = header.find(&format!("'{k}': ")).unwrap() + k.len() + 4;
        &header[at..]
    };
    let descr = field("descr");
    let descr = &descr[1..descr[1..].find('\'').unwrap() + 1];
    assert!(field("fortran_order").starts_with("False"));
    let shape_text = field("shape");
    let shape_text = &shape_text[1..shape_text.find(')').unwrap()];
    let shape: Vec<u64> = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let (dtype, endian) = DType::parse_descr(descr).unwrap();
    let mut data = b[start + hlen..].to_vec();
    if endian.unwrap_or(Endianness::Little) != Endianness::native() {
        blz::dtype::swap_bytes(&mut data, dtype.swap_unit());
    }
    Npy { dtype, shape, data }
}

fn all_bytes(ds: &Dataset) -> Vec<u8> {
    let sel: Vec<AxisSel> = ds.shape().iter().map(|&n| AxisSel::full(n)).collect();
    ds.read_bytes(&sel).unwrap()
}

fn codec_of(name: &str) -> Codec {
    name.parse().unwrap()
}

fn filters_of(shuffle: &Value) -> Vec<FilterName> {
    match shuffle.as_u64().unwrap() {
        0 => vec![],
        1 => vec![FilterName::Shuffle],
        2 => vec![FilterName::Bitshuffle],
        s => panic!("shuffle {s}"),
    }
}

fn scratch(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join(name);
    copy_dir(&fixtures().join(name), &src);
    (dir, src)
}

fn import_err(src: &Path) -> Error {
    let dst = src.parent().unwrap().join("out.blz");
    let err = match bcolz::detect(src) {
        Ok(Kind::Ctable) => bcolz::import_ctable(src, &dst, &ImportOptions::default())
            .map(|_| ())
            .unwrap_err(),
        _ => bcolz::import_carray(src, &dst, &ImportOptions::default())
            .map(|_| ())
            .unwrap_err(),
    };
    assert!(!dst.exists(), "a failed import left {}", dst.display());
    err
}

#[test]
fn every_carray_fixture_imports_exactly() {
    let out = tempfile::tempdir().unwrap();
    let mut seen = 0;
    for e in manifest() {
        let name = e["name"].as_str().unwrap();
        if e["kind"] != "carray" || name == "object_refused" {
            continue;
        }
        seen += 1;
        let dst = out.path().join(format!("{name}.blz"));
        let ds = bcolz::import_carray(fixtures().join(name), &dst, &ImportOptions::default())
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        let want = read_npy(&fixtures().join(format!("{name}.npy")));
        let shape: Vec<u64> = e["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(ds.shape(), shape.as_slice(), "{name}: shape");
        assert_eq!(want.shape, shape, "{name}: npy shape");
        assert_eq!(ds.dtype(), want.dtype, "{name}: dtype");
        let (dtype, endian) = DType::parse_descr(e["dtype"].as_str().unwrap()).unwrap();
        assert_eq!(ds.dtype(), dtype, "{name}: dtype from bcolz");
        let meta = ds.storage_meta();
        assert_eq!(
            meta.endianness,
            endian.unwrap_or(Endianness::Little),
            "{name}: byte order"
        );
        assert_eq!(
            meta.chunkshape[0],
            e["chunklen"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            &meta.chunkshape[1..],
            &shape[1..],
            "{name}: inner axes whole"
        );
        let cp = &e["cparams"];
        assert_eq!(
            meta.compression.codec,
            codec_of(cp["cname"].as_str().unwrap())
        );
        assert_eq!(
            u64::from(meta.compression.clevel),
            cp["clevel"].as_u64().unwrap()
        );
        assert_eq!(
            meta.compression.filters,
            filters_of(&cp["shuffle"]),
            "{name}"
        );
        assert_eq!(meta.dflt, e["dflt"], "{name}: fill value");
        assert_eq!(
            Value::Object(ds.attrs().unwrap()),
            e["attrs"],
            "{name}: attributes"
        );
        assert!(all_bytes(&ds) == want.data, "{name}: values differ");
        assert!(ds.verify(|_, _| {}).is_empty(), "{name}: verify");
        // Reopened from disk, the dataset is the same.
        drop(ds);
        let again = Dataset::open(&dst).unwrap();
        assert!(
            all_bytes(&again) == want.data,
            "{name}: values after reopening"
        );
    }
    assert!(seen >= 14, "only {seen} carray fixtures");
}

#[test]
fn values_read_through_the_typed_api_match_bcolz() {
    let out = tempfile::tempdir().unwrap();
    let ds = bcolz::import_carray(
        fixtures().join("int32_leftover"),
        out.path().join("a.blz"),
        &ImportOptions::default(),
    )
    .unwrap();
    let v = ds.read::<i32>().unwrap();
    assert_eq!(v.len(), 1000);
    assert!(v.iter().copied().eq(0..1000));
    assert_eq!(
        Value::Object(ds.attrs().unwrap()),
        json!({"unit": "metre", "scale": 0.5, "tags": ["a", "b"], "nested": {"k": 1}})
    );
    let be = bcolz::import_carray(
        fixtures().join("int32_bigendian"),
        out.path().join("be.blz"),
        &ImportOptions::default(),
    )
    .unwrap();
    assert_eq!(be.storage_meta().endianness, Endianness::Big);
    assert!(be.read::<i32>().unwrap().iter().copied().eq(-50..250));
}

#[test]
fn the_leftover_is_its_own_chunk_file_and_read_as_a_partial_chunk() {
    let mut r = CarrayReader::open(fixtures().join("int32_leftover")).unwrap();
    let m = r.meta().clone();
    assert_eq!((m.len(), m.chunklen, m.nchunks()), (1000, 300, 4));
    assert_eq!(m.chunk_rows(3), 100);
    assert!(r.chunk_path(3).is_file());
    assert!(!r.chunk_path(4).exists());
    let last = r.read_chunk(3).unwrap().to_vec();
    assert_eq!(last.len(), 400);
    assert_eq!(i32::from_le_bytes(last[..4].try_into().unwrap()), 900);
    assert!(matches!(
        r.read_chunk(4),
        Err(Error::ChunkOutOfRange { .. })
    ));
    // Rows in order, across chunk boundaries, in batches that do not align with chunks.
    let mut all = Vec::new();
    while r.read_rows(77, &mut all).unwrap() > 0 {}
    let v: Vec<i32> = all
        .chunks_exact(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert!(v.iter().copied().eq(0..1000));
}

#[test]
fn rows_appended_after_the_last_flush_are_not_imported() {
    // meta/sizes says 1000; __3.blp holds a full chunk of 300 written by the unflushed append.
    let mut r = CarrayReader::open(fixtures().join("unflushed_append")).unwrap();
    assert_eq!(r.meta().len(), 1000);
    assert_eq!(r.read_chunk(3).unwrap().len(), 400);
    let out = tempfile::tempdir().unwrap();
    let ds = bcolz::import_carray(
        fixtures().join("unflushed_append"),
        out.path().join("u.blz"),
        &ImportOptions::default(),
    )
    .unwrap();
    assert!(ds.read::<i32>().unwrap().iter().copied().eq(0..1000));
}

#[test]
fn empty_carray_and_carray_shorter_than_a_chunk() {
    let out = tempfile::tempdir().unwrap();
    let e = bcolz::import_carray(
        fixtures().join("empty"),
        out.path().join("e.blz"),
        &ImportOptions::default(),
    )
    .unwrap();
    assert_eq!(e.shape(), &[0]);
    assert_eq!(e.dtype(), DType::F64);
    let s = bcolz::import_carray(
        fixtures().join("leftover_only"),
        out.path().join("s.blz"),
        &ImportOptions::default(),
    )
    .unwrap();
    assert!(s.read::<i8>().unwrap().iter().copied().eq(0..10));
}

#[test]
fn ctable_fixture_imports_exactly() {
    let e = entry("ctable");
    let out = tempfile::tempdir().unwrap();
    let mut calls = Vec::new();
    let t = bcolz::import_ctable_with(
        fixtures().join("ctable"),
        out.path().join("t.blz"),
        &ImportOptions {
            batch_bytes: 1000, // several batches
            ..Default::default()
        },
        |done, total| calls.push((done, total)),
    )
    .unwrap();
    let names: Vec<&str> = e["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(t.column_names(), names);
    assert_eq!(t.nrows(), e["len"].as_u64().unwrap());
    assert_eq!(Value::Object(t.attrs().unwrap()), e["attrs"]);
    for name in &names {
        let want = read_npy(&fixtures().join(format!("ctable.{name}.npy")));
        match t.column(name).unwrap() {
            Values::Fixed { dtype, data } => {
                assert_eq!(dtype, want.dtype, "{name}");
                assert!(data == want.data, "{name}: values differ");
            }
            other => panic!("{name}: {other:?}"),
        }
        let leaf = t.leaves().into_iter().find(|l| l.path == *name).unwrap();
        assert_eq!(
            leaf.storage.chunklen,
            e["chunklen"][name].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(leaf.storage.compression.codec, Codec::Zstd);
    }
    assert!(t.verify(|_, _| {}).is_empty());
    assert!(calls.len() > 2, "{calls:?}");
    assert_eq!(calls.last(), Some(&(300, 300)));
}

#[test]
fn empty_ctable_imports_with_its_columns() {
    let out = tempfile::tempdir().unwrap();
    let t = bcolz::import_ctable(
        fixtures().join("ctable_empty"),
        out.path().join("t.blz"),
        &ImportOptions::default(),
    )
    .unwrap();
    assert_eq!(t.nrows(), 0);
    assert_eq!(t.column_names(), vec!["a", "b"]);
    let r = CtableReader::open(fixtures().join("ctable_empty")).unwrap();
    assert_eq!(r.columns()[1].meta().dtype, DType::F32);
}

#[test]
fn detect_tells_carrays_from_ctables() {
    assert_eq!(
        bcolz::detect(&fixtures().join("ctable")).unwrap(),
        Kind::Ctable
    );
    assert_eq!(
        bcolz::detect(&fixtures().join("float64_2d")).unwrap(),
        Kind::Carray
    );
    assert_eq!(
        bcolz::detect(&fixtures().join("ctable/x")).unwrap(),
        Kind::Carray
    );
    assert!(matches!(
        bcolz::detect(&fixtures()),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn object_dtype_is_refused_by_name() {
    let err = import_err(&fixtures().join("object_refused"));
    match &err {
        Error::Unsupported { path, reason } => {
            assert!(path.ends_with("object_refused/meta/storage"), "{err}");
            assert!(reason.contains("object"), "{err}");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn options_override_chunklen_and_compression() {
    let out = tempfile::tempdir().unwrap();
    let ds = bcolz::import_carray(
        fixtures().join("float64_2d"),
        out.path().join("o.blz"),
        &ImportOptions {
            chunklen: Some(7),
            compression: Some(blz::meta::Compression {
                codec: Codec::Zlib,
                clevel: 2,
                filters: vec![],
                mantissa_bits: None,
                blocksize: 0,
            }),
            batch_bytes: 1,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(ds.chunkshape(), &[7, 3]);
    assert_eq!(ds.storage_meta().compression.codec, Codec::Zlib);
    let want = read_npy(&fixtures().join("float64_2d.npy"));
    assert!(all_bytes(&ds) == want.data);
}

#[test]
fn an_existing_destination_needs_overwrite_and_the_source_is_never_the_destination() {
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("d.blz");
    let src = fixtures().join("uint16_exact");
    bcolz::import_carray(&src, &dst, &ImportOptions::default()).unwrap();
    let err = bcolz::import_carray(&src, &dst, &ImportOptions::default()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(dst.join("meta").is_dir(), "the existing dataset is kept");
    let overwrite = ImportOptions {
        overwrite: true,
        ..Default::default()
    };
    bcolz::import_carray(&src, &dst, &overwrite).unwrap();

    let (_dir, copy) = scratch("uint16_exact");
    for bad in [
        copy.clone(),
        copy.join("inside.blz"),
        copy.parent().unwrap().to_path_buf(),
    ] {
        let err = bcolz::import_carray(&copy, &bad, &overwrite).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
    assert!(
        copy.join("data/__1.blp").is_file(),
        "the source is untouched"
    );
}

// ---------------------------------------------------------------------------------------
// Corruption

fn expect_chunk_error(err: &Error, file: &str, want_chunk: u64) {
    match err {
        Error::InvalidChunk { path, chunk, .. } => {
            assert!(path.ends_with(file), "{err}");
            assert_eq!(*chunk, want_chunk, "{err}");
        }
        other => panic!("expected InvalidChunk for {file}, got {other}"),
    }
    assert!(err.is_corruption());
}

#[test]
fn a_truncated_chunk_file_is_named() {
    let (_d, src) = scratch("int32_leftover");
    let f = src.join("data/__1.blp");
    let len = std::fs::metadata(&f).unwrap().len();
    for keep in [len - 1, 40, 20, 0] {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&f)
            .unwrap()
            .set_len(keep)
            .unwrap();
        let err = import_err(&src);
        expect_chunk_error(&err, "data/__1.blp", 1);
    }
}

#[test]
fn a_missing_chunk_file_is_named() {
    for (name, file, chunk) in [
        ("int32_leftover", "__2.blp", 2),
        ("int32_leftover", "__3.blp", 3), // the leftover
        ("leftover_only", "__0.blp", 0),
    ] {
        let (_d, src) = scratch(name);
        std::fs::remove_file(src.join("data").join(file)).unwrap();
        let err = import_err(&src);
        expect_chunk_error(&err, &format!("data/{file}"), chunk);
        assert!(err.to_string().contains("missing"), "{err}");
    }
}

#[test]
fn a_bad_blpk_header_is_named() {
    for (at, byte, what) in [(0, b'x', "magic"), (4, 2, "version"), (8, 2, "nchunks")] {
        let (_d, src) = scratch("int32_leftover");
        let f = src.join("data/__0.blp");
        let mut b = std::fs::read(&f).unwrap();
        b[at] = byte;
        std::fs::write(&f, b).unwrap();
        let err = import_err(&src);
        match &err {
            Error::InvalidHeader { path, reason } => {
                assert!(path.ends_with("data/__0.blp"), "{err}");
                assert!(reason.contains(what), "{err}");
            }
            other => panic!("{what}: {other}"),
        }
    }
}

#[test]
fn a_bad_blosc_header_is_named() {
    let (_d, src) = scratch("int32_leftover");
    let f = src.join("data/__2.blp");
    let mut b = std::fs::read(&f).unwrap();
    b[16] = 9; // Blosc format version
    std::fs::write(&f, &b).unwrap();
    expect_chunk_error(&import_err(&src), "data/__2.blp", 2);
    b[16] = 2;
    b[16 + 4] ^= 0x40; // nbytes
    std::fs::write(&f, &b).unwrap();
    expect_chunk_error(&import_err(&src), "data/__2.blp", 2);
}

#[test]
fn bad_sizes_json_is_named() {
    for text in [
        "{\"shape\": [1000], \"nbytes\"",
        "{\"nbytes\": 4000}",
        "{\"shape\": [-5]}",
        "{\"shape\": []}",
        "{\"shape\": \"1000\"}",
        "[1000]",
    ] {
        let (_d, src) = scratch("int32_leftover");
        std::fs::write(src.join("meta/sizes"), text).unwrap();
        match import_err(&src) {
            Error::InvalidMetadata { path, .. } => assert!(path.ends_with("meta/sizes"), "{text}"),
            other => panic!("{text}: {other}"),
        }
    }
    let (_d, src) = scratch("int32_leftover");
    std::fs::remove_file(src.join("meta/sizes")).unwrap();
    match import_err(&src) {
        Error::InvalidMetadata { path, reason } => {
            assert!(path.ends_with("meta/sizes"));
            assert!(reason.contains("missing"), "{reason}");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn sizes_counting_more_rows_than_stored_names_the_missing_chunk() {
    let (_d, src) = scratch("int32_leftover");
    std::fs::write(
        src.join("meta/sizes"),
        r#"{"shape": [1500], "nbytes": 6000, "cbytes": 1}"#,
    )
    .unwrap();
    // Chunk 3 is the old leftover (100 rows) where 300 are now needed; chunk 4 is missing.
    expect_chunk_error(&import_err(&src), "data/__3.blp", 3);
}

#[test]
fn bad_storage_json_is_named() {
    let good = std::fs::read_to_string(fixtures().join("int32_leftover/meta/storage")).unwrap();
    for (from, to) in [
        ("\"chunklen\": 300", "\"chunklen\": 0"),
        ("\"chunklen\": 300", "\"chunklen\": 1e300"),
        ("\"chunklen\": 300", "\"chunklen\": 9223372036854775807"),
        ("\"clevel\": 5", "\"clevel\": 12"),
        ("\"shuffle\": 1", "\"shuffle\": 7"),
        ("\"dtype\": \"int32\"", "\"dtype\": 5"),
        ("\"dflt\": 0", "\"dflt\": \"zero\""),
    ] {
        let (_d, src) = scratch("int32_leftover");
        assert!(good.contains(from));
        std::fs::write(src.join("meta/storage"), good.replace(from, to)).unwrap();
        match import_err(&src) {
            Error::InvalidMetadata { path, .. } => assert!(path.ends_with("meta/storage"), "{to}"),
            other => panic!("{to}: {other}"),
        }
    }
    for (from, to) in [
        ("\"cname\": \"lz4\"", "\"cname\": \"snappy\""),
        // float16 and datetime64[unit] are read now; generic and multiple units are not.
        ("\"dtype\": \"int32\"", "\"dtype\": \"datetime64\""),
        ("\"dtype\": \"int32\"", "\"dtype\": \"<M8[5s]\""),
    ] {
        let (_d, src) = scratch("int32_leftover");
        std::fs::write(src.join("meta/storage"), good.replace(from, to)).unwrap();
        match import_err(&src) {
            Error::Unsupported { path, .. } => assert!(path.ends_with("meta/storage"), "{to}"),
            other => panic!("{to}: {other}"),
        }
    }
}

#[test]
fn a_dtype_that_does_not_match_the_chunks_is_caught_at_the_first_chunk() {
    let good = std::fs::read_to_string(fixtures().join("int32_leftover/meta/storage")).unwrap();
    for (from, to) in [
        ("\"dtype\": \"int32\"", "\"dtype\": \"int64\""),
        ("\"dtype\": \"int32\"", "\"dtype\": \"int16\""),
        ("\"chunklen\": 300", "\"chunklen\": 250"),
    ] {
        let (_d, src) = scratch("int32_leftover");
        std::fs::write(src.join("meta/storage"), good.replace(from, to)).unwrap();
        let err = import_err(&src);
        expect_chunk_error(&err, "data/__0.blp", 0);
        assert!(err.to_string().contains("dtype"), "{err}");
    }
}

#[test]
fn bad_ctable_metadata_is_named() {
    for text in [
        r#"{"names": []}"#,
        r#"{"names": ["id", "id"]}"#,
        r#"{"names": ["../int32_leftover"]}"#,
        r#"{"names": [3]}"#,
        r#"{"cols": ["id"]}"#,
    ] {
        let (_d, src) = scratch("ctable");
        std::fs::write(src.join("__rootdirs__"), text).unwrap();
        match import_err(&src) {
            Error::InvalidMetadata { path, .. } => {
                assert!(path.ends_with("__rootdirs__"), "{text}")
            }
            other => panic!("{text}: {other}"),
        }
    }
    // A column shorter than the others.
    let (_d, src) = scratch("ctable");
    std::fs::write(
        src.join("x/meta/sizes"),
        r#"{"shape": [299], "nbytes": 0, "cbytes": 0}"#,
    )
    .unwrap();
    match import_err(&src) {
        Error::InvalidMetadata { path, reason } => {
            assert!(path.ends_with("x/meta/sizes"));
            assert!(reason.contains("299"), "{reason}");
        }
        other => panic!("{other}"),
    }
    // A missing chunk in one column.
    let (_d, src) = scratch("ctable");
    std::fs::remove_file(src.join("code/data/__2.blp")).unwrap();
    expect_chunk_error(&import_err(&src), "code/data/__2.blp", 2);
    // A column name blz reserves.
    let (_d, src) = scratch("ctable");
    std::fs::rename(src.join("id"), src.join("__id")).unwrap();
    std::fs::write(
        src.join("__rootdirs__"),
        r#"{"names": ["__id", "x", "code", "flag", "level"]}"#,
    )
    .unwrap();
    assert!(matches!(import_err(&src), Error::Unsupported { .. }));
}

/// Every single-byte change to a chunk file or a meta file gives values or an error, never a
/// panic; a change to the fields of a chunk file's headers that blz checks is always caught.
/// (bcolz stores no checksums: a change inside the compressed stream, or to the Blosc flags
/// and typesize, may decode to other values.)
#[test]
fn flipped_bytes_never_panic() {
    let (_d, src) = scratch("int32_leftover");
    let read_all = |src: &Path| -> blz::Result<Vec<u8>> {
        let mut r = CarrayReader::open(src)?;
        let mut out = Vec::new();
        while r.read_rows(128, &mut out)? > 0 {}
        Ok(out)
    };
    for file in [
        "data/__0.blp",
        "data/__3.blp",
        "meta/sizes",
        "meta/storage",
        "__attrs__",
    ] {
        let f = src.join(file);
        let good = std::fs::read(&f).unwrap();
        for at in 0..good.len() {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut b = good.clone();
                b[at] ^= mask;
                std::fs::write(&f, &b).unwrap();
                let r = read_all(&src);
                // blpk magic, version and nchunks; Blosc version, nbytes and cbytes.
                let checked = (0..5).contains(&at)
                    || (8..17).contains(&at)
                    || (20..24).contains(&at)
                    || (28..32).contains(&at);
                if file.starts_with("data/") && checked {
                    let e = r.expect_err(&format!("{file} byte {at} ^ {mask:#x} accepted"));
                    assert!(e.is_corruption(), "{e}");
                }
            }
        }
        std::fs::write(&f, &good).unwrap();
    }
    assert_eq!(read_all(&src).unwrap().len(), 4000);
}
