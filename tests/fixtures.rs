//! Files written by the real peers (bloscpack 0.16, python-blosc 1.11 over c-blosc 1.21),
//! checked field by field against what the peers themselves read from them
//! (`tests/fixtures/*/manifest.json`, described in `tests/fixtures/README.md`).

use blz::storage::{LocalStorage, OpenMode, Storage};
use blz_format::blosc::{self, ChunkHeader, Codec};
use blz_format::blpk::{
    self, Checksum, MetaCodec, SuperchunkReader, FORMAT_VERSION, OPT_METADATA, OPT_OFFSETS,
};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn fixtures(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(kind)
}

fn manifest(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    let m: Value = serde_json::from_str(&text).unwrap();
    assert!(m["written_by"].is_object());
    let files = m["files"].as_array().unwrap().clone();
    assert!(!files.is_empty());
    files
}

fn sha256_hex(b: &[u8]) -> String {
    blpk::hex(&Sha256::digest(b))
}

fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{v} is not an unsigned integer"))
}

fn i(v: &Value) -> i64 {
    v.as_i64()
        .unwrap_or_else(|| panic!("{v} is not an integer"))
}

/// Checks decoded bytes against the entry's length, SHA-256 and `.raw` file.
fn check_decoded(dir: &Path, e: &Value, got: &[u8]) {
    let name = e["name"].as_str().unwrap();
    assert_eq!(got.len() as u64, u(&e["raw_len"]), "{name}: length");
    assert_eq!(sha256_hex(got), e["raw_sha256"], "{name}: sha256");
    if let Some(raw) = e["raw"].as_str() {
        let want = std::fs::read(dir.join(raw)).unwrap();
        assert!(got == want.as_slice(), "{name}: differs from {raw}");
    }
}

/// The Blosc header fields of a chunk against the manifest's decoded header (bloscpack's
/// `chunks` rows carry a subset of them).
fn check_chunk_header(what: &str, h: &ChunkHeader, m: &Value) {
    let field = |k: &str| m.get(k).map(u);
    assert_eq!(Some(u64::from(h.nbytes)), field("nbytes"), "{what}: nbytes");
    assert_eq!(
        Some(u64::from(h.blocksize)),
        field("blocksize"),
        "{what}: blocksize"
    );
    assert_eq!(Some(u64::from(h.cbytes)), field("cbytes"), "{what}: cbytes");
    assert_eq!(Some(u64::from(h.flags)), field("flags"), "{what}: flags");
    assert_eq!(
        Some(u64::from(h.typesize)),
        field("typesize"),
        "{what}: typesize"
    );
    if let Some(v) = field("version") {
        assert_eq!(u64::from(h.version), v, "{what}: version");
    }
    if let Some(v) = field("versionlz") {
        assert_eq!(u64::from(h.versionlz), v, "{what}: versionlz");
    }
    if let Some(v) = field("format_code") {
        assert_eq!(u64::from(h.codec_format()), v, "{what}: codec format");
        assert!(
            Codec::from_format(h.codec_format()).is_some(),
            "{what}: unknown codec"
        );
    }
    let bit = |k: &str, mask: u8| {
        if let Some(b) = m.get(k).and_then(Value::as_bool) {
            assert_eq!(h.flags & mask != 0, b, "{what}: {k}");
        }
    };
    bit("byte_shuffle", blosc::FLAG_SHUFFLE);
    bit("memcpyed", blosc::FLAG_MEMCPYED);
    bit("bit_shuffle", blosc::FLAG_BITSHUFFLE);
    bit("no_split", 0x10);
}

#[test]
fn python_blosc_chunks() {
    let dir = fixtures("blosc");
    let files = manifest(&dir);
    let mut n = 0;
    for e in &files {
        assert_eq!(e["kind"], "chunk");
        let name = e["name"].as_str().unwrap();
        let bytes = std::fs::read(dir.join(name)).unwrap();
        assert_eq!(bytes.len() as u64, u(&e["compressed_len"]), "{name}");
        let h = blosc::validate(&bytes).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(ChunkHeader::parse(&bytes).unwrap(), h);
        check_chunk_header(name, &h, &e["header"]);
        for threads in [1, 3] {
            let got =
                blosc::decompress(&bytes, threads).unwrap_or_else(|err| panic!("{name}: {err}"));
            check_decoded(&dir, e, &got);
        }
        // Decoding into a buffer of the wrong size is refused.
        if h.nbytes > 0 {
            let mut short = vec![0u8; h.nbytes as usize - 1];
            assert!(blosc::decompress_into(&bytes, &mut short, 1).is_err());
        }
        n += 1;
    }
    assert_eq!(n, files.len());
    assert!(n >= 80, "only {n} chunk fixtures");
}

fn checksum_by_name(name: &str) -> Checksum {
    Checksum::from_name(name).unwrap_or_else(|| panic!("unknown checksum {name}"))
}

#[test]
fn bloscpack_files() {
    let dir = fixtures("bloscpack");
    let files = manifest(&dir);
    for e in &files {
        assert_eq!(e["kind"], "blpk");
        let name = e["name"].as_str().unwrap();
        let path = dir.join(name);
        let raw_file = std::fs::read(&path).unwrap();
        let r = SuperchunkReader::open(LocalStorage.open(&path, OpenMode::Read).unwrap())
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        let layout = r.layout();
        let h = r.header();
        let mh = &e["header"];

        // The 32-byte header.
        assert_eq!(mh["magic"], "blpk");
        assert_eq!(&raw_file[..4], blpk::MAGIC);
        assert_eq!(
            u(&mh["format_version"]),
            u64::from(FORMAT_VERSION),
            "{name}"
        );
        assert_eq!(raw_file[4], FORMAT_VERSION);
        assert_eq!(
            u(&mh["options_byte"]),
            u64::from(h.options),
            "{name}: options"
        );
        assert_eq!(mh["offsets"].as_bool(), Some(h.has(OPT_OFFSETS)), "{name}");
        assert_eq!(
            mh["metadata"].as_bool(),
            Some(h.has(OPT_METADATA)),
            "{name}"
        );
        assert_eq!(
            h.checksum,
            checksum_by_name(mh["checksum"].as_str().unwrap())
        );
        assert_eq!(u(&mh["checksum_id"]), u64::from(h.checksum.id()), "{name}");
        assert_eq!(u(&mh["digest_size"]), h.checksum.len() as u64, "{name}");
        assert_eq!(
            u(&mh["typesize"]),
            u64::from(h.typesize),
            "{name}: typesize"
        );
        assert_eq!(i(&mh["chunk_size"]), i64::from(h.chunk_size), "{name}");
        assert_eq!(i(&mh["last_chunk"]), i64::from(h.last_chunk), "{name}");
        assert_eq!(i(&mh["nchunks"]), h.nchunks, "{name}: nchunks");
        assert_eq!(i(&mh["max_app_chunks"]), h.max_app_chunks, "{name}");

        // The metadata section.
        match (&layout.metadata, e.get("metadata_header")) {
            (None, None) => assert!(e.get("metadata").is_none(), "{name}"),
            (Some((m, doc)), Some(want)) => {
                assert_eq!(want["magic_format"], "JSON");
                assert_eq!(want["meta_options"], "00000000", "{name}");
                assert_eq!(want["user_codec"], "", "{name}");
                assert_eq!(
                    m.checksum,
                    checksum_by_name(want["meta_checksum"].as_str().unwrap())
                );
                assert_eq!(u(&want["meta_checksum_id"]), u64::from(m.checksum.id()));
                let (codec_name, codec_id) = match m.codec {
                    MetaCodec::None => ("None", 0),
                    MetaCodec::Zlib => ("zlib", 1),
                };
                assert_eq!(want["meta_codec"], codec_name, "{name}");
                assert_eq!(u(&want["meta_codec_id"]), codec_id, "{name}");
                assert_eq!(u(&want["meta_level"]), u64::from(m.level), "{name}");
                assert_eq!(u(&want["meta_size"]), u64::from(m.meta_size), "{name}");
                assert_eq!(u(&want["max_meta_size"]), u64::from(m.max_meta_size));
                assert_eq!(u(&want["meta_comp_size"]), u64::from(m.meta_comp_size));
                assert_eq!(doc, &e["metadata"], "{name}: metadata document");
                assert_eq!(r.metadata(), Some(&e["metadata"]));
            }
            (got, want) => panic!("{name}: metadata {got:?}, manifest {want:?}"),
        }

        // The offsets table.
        let nchunks = u(&mh["nchunks"]);
        assert_eq!(r.nchunks(), nchunks, "{name}");
        if h.has(OPT_OFFSETS) {
            assert_eq!(u(&e["offsets_position"]), layout.offsets_pos, "{name}");
            assert_eq!(u(&e["offsets_slots"]), h.offset_slots(), "{name}");
            assert_eq!(
                layout.data_start,
                layout.offsets_pos + 8 * h.offset_slots(),
                "{name}"
            );
            let want: Vec<u64> = e["offsets"].as_array().unwrap().iter().map(u).collect();
            assert_eq!(layout.offsets, want, "{name}: offsets");
        } else {
            assert!(e["offsets_position"].is_null(), "{name}");
            assert!(e.get("offsets").is_none(), "{name}");
        }

        // Every chunk: where it is, its Blosc header, its digest, its bytes.
        let rows = e["chunks"].as_array().unwrap();
        assert_eq!(rows.len() as u64, nchunks, "{name}");
        let cbytes: Vec<u64> = e["chunk_cbytes"]
            .as_array()
            .unwrap()
            .iter()
            .map(u)
            .collect();
        let mut decoded = Vec::new();
        let mut data_end = layout.data_start;
        for (k, row) in rows.iter().enumerate() {
            let what = format!("{name} chunk {k}");
            let k = k as u64;
            let info = r.chunk_info(k).unwrap();
            assert_eq!(info.offset, u(&row["offset"]), "{what}: offset");
            assert_eq!(layout.offsets[k as usize], info.offset, "{what}");
            check_chunk_header(&what, &info.header, row);
            assert_eq!(u64::from(info.header.cbytes), cbytes[k as usize], "{what}");
            let chunk = r
                .read_chunk(k)
                .unwrap_or_else(|err| panic!("{what}: {err}"));
            assert_eq!(chunk.len() as u64, u(&row["cbytes"]), "{what}");
            assert_eq!(blosc::validate(&chunk).unwrap(), info.header, "{what}");
            // The stored digest is the one the checksum computes over the chunk.
            let at = (info.offset + chunk.len() as u64) as usize;
            let dlen = h.checksum.len();
            assert_eq!(
                h.checksum.digest(&chunk).as_slice(),
                &raw_file[at..at + dlen],
                "{what}: digest"
            );
            data_end = data_end.max((at + dlen) as u64);
            let part = r.decompress_chunk(k).unwrap();
            assert_eq!(part.len() as u64, u(&row["nbytes"]), "{what}");
            decoded.extend_from_slice(&part);
        }
        assert_eq!(layout.file_len, u(&e["file_size"]), "{name}");
        assert_eq!(layout.file_len, raw_file.len() as u64);
        assert_eq!(
            layout.file_len - data_end,
            u(&e["trailing_bytes"]),
            "{name}: trailing bytes"
        );
        check_decoded(&dir, e, &decoded);

        // The same bytes through blpk::unpack.
        let mut out = Vec::new();
        let n = blpk::unpack(&r, &mut out, |_| {}).unwrap();
        assert_eq!(n, out.len() as u64);
        check_decoded(&dir, e, &out);

        // ndarray files: the metadata bloscpack's reader needs, in its own quoting.
        if let Some(nd) = e.get("ndarray") {
            let doc = r.metadata().unwrap();
            assert_eq!(doc["container"], "numpy", "{name}");
            let dtype = nd["dtype"].as_str().unwrap();
            let quoted = doc["dtype"].as_str().unwrap();
            assert!(
                quoted == format!("'{dtype}'") || quoted == dtype,
                "{name}: dtype {quoted} vs {dtype}"
            );
            assert_eq!(doc["shape"], nd["shape"], "{name}");
            assert_eq!(doc["order"], nd["order"], "{name}");
        }
    }
    assert!(files.len() >= 30);
}

#[test]
fn every_fixture_is_listed() {
    for kind in ["blosc", "bloscpack"] {
        let dir = fixtures(kind);
        let files = manifest(&dir);
        let mut listed: Vec<String> = files
            .iter()
            .flat_map(|e| {
                let mut v = vec![e["name"].as_str().unwrap().to_string()];
                if let Some(r) = e["raw"].as_str() {
                    v.push(r.to_string());
                }
                v
            })
            .collect();
        listed.push("manifest.json".into());
        listed.sort();
        listed.dedup();
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        assert_eq!(listed, on_disk, "{kind}");
    }
}
