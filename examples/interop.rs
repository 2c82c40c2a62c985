//! Live interop with the real peers (bloscpack 0.16, python-blosc 1.11), driven by
//! `tests/interop/run.sh`:
//!
//! ```text
//! cargo run --release --example interop -- write DIR   # blz writes files + DIR/manifest.json
//! cargo run --release --example interop -- read DIR    # blz reads what peer_check.py wrote
//! ```
//!
//! `write` produces the manifest `tests/interop/peer_check.py verify DIR` reads: one entry per
//! file with `path`, `kind` (`blpk` or `chunk`), `raw` (a file holding the expected bytes),
//! `sha256`, and where relevant `metadata`, `ndarray`/`dtype`/`shape`/`order` and
//! `expect_refused`. `read` takes the manifest `peer_check.py write DIR` produces (same keys)
//! and checks that blz decodes every file to the expected bytes.

use blz::storage::{LocalStorage, OpenMode, Storage};
use blz_format::blosc::{self, Codec, CompressParams, Filter};
use blz_format::blpk::{
    self, Checksum, MetaCodec, MetadataParams, PackOptions, SuperchunkFile, SuperchunkReader,
    WriterOptions,
};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn sha256_hex(b: &[u8]) -> String {
    blpk::hex(&Sha256::digest(b))
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next() >> 56) as u8).collect()
    }
}

/// Compressible little-endian integers of `typesize` bytes, a random tail when `nbytes` is
/// not a multiple of it.
fn data(rng: &mut Rng, nbytes: usize, typesize: usize) -> Vec<u8> {
    let n = nbytes / typesize;
    let mut out = Vec::with_capacity(nbytes);
    for i in 0..n as u64 {
        let v = if typesize == 1 {
            (i / 8 + rng.next() % 2) & 0xff
        } else {
            i * 3 + rng.next() % 16
        };
        out.extend_from_slice(&v.to_le_bytes()[..typesize.min(8)]);
        out.resize(out.len() + typesize.saturating_sub(8), 0);
    }
    let tail = nbytes - out.len();
    out.extend(rng.bytes(tail));
    out
}

struct Writer {
    dir: PathBuf,
    files: Vec<Value>,
}

impl Writer {
    /// Writes `raw` beside `path` and records the manifest entry.
    fn add(&mut self, path: &str, kind: &str, raw: &[u8], mut extra: Value) -> Res<()> {
        let stem = path.rsplit_once('.').map_or(path, |(s, _)| s);
        let raw_name = format!("{stem}.raw");
        std::fs::write(self.dir.join(&raw_name), raw)?;
        let mut e = json!({"path": path, "kind": kind, "raw": raw_name, "sha256": sha256_hex(raw)});
        if let (Some(obj), Some(more)) = (e.as_object_mut(), extra.as_object_mut()) {
            obj.append(more);
        }
        self.files.push(e);
        Ok(())
    }

    fn pack(&mut self, path: &str, raw: &[u8], opts: &PackOptions, extra: Value) -> Res<()> {
        let out = LocalStorage.open(&self.dir.join(path), OpenMode::Create)?;
        blpk::pack(&mut &raw[..], raw.len() as u64, out, opts, |_| {})?;
        self.add(path, "blpk", raw, extra)
    }
}

fn params(codec: Codec, filter: Filter, typesize: usize, clevel: u8) -> CompressParams {
    CompressParams {
        codec,
        clevel,
        filter,
        typesize,
        blocksize: 0,
        nthreads: 1,
    }
}

fn pack_opts(chunk_size: usize, blosc: CompressParams, writer: WriterOptions) -> PackOptions {
    PackOptions {
        chunk_size,
        blosc,
        writer: WriterOptions {
            typesize: blosc.typesize as u8,
            ..writer
        },
        ..Default::default()
    }
}

fn write(dir: &Path) -> Res<usize> {
    std::fs::create_dir_all(dir)?;
    let mut w = Writer {
        dir: dir.to_path_buf(),
        files: Vec::new(),
    };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let cycle = [
        (Codec::Blosclz, Filter::Shuffle),
        (Codec::Lz4, Filter::NoShuffle),
        (Codec::Zlib, Filter::Bitshuffle),
        (Codec::Zstd, Filter::Shuffle),
        (Codec::Lz4hc, Filter::Shuffle),
    ];

    // One file per checksum id, offsets on and off: 3 chunks, the last one partial.
    for (i, checksum) in Checksum::ALL.into_iter().enumerate() {
        let (codec, filter) = cycle[i % cycle.len()];
        for offsets in [true, false] {
            let raw = data(&mut rng, 5000, 4);
            let name = format!(
                "checksum-{}{}.blp",
                checksum.name().to_ascii_lowercase(),
                if offsets { "" } else { "-no-offsets" }
            );
            let opts = pack_opts(
                2048,
                params(codec, filter, 4, 5),
                WriterOptions {
                    checksum,
                    offsets,
                    ..Default::default()
                },
            );
            w.pack(&name, &raw, &opts, json!({}))?;
        }
    }

    // bloscpack's defaults (blosclz, clevel 7, shuffle, typesize 8, 1 MiB chunks, adler32)
    // on several chunks with a partial last one.
    let raw = data(&mut rng, 3 * (1 << 20) + 12_345, 8);
    w.pack(
        "defaults-multi.blp",
        &raw,
        &PackOptions::default(),
        json!({}),
    )?;
    // A chunk size that is not a multiple of the typesize.
    let raw = data(&mut rng, 10_000, 4);
    let opts = pack_opts(
        1001,
        params(Codec::Lz4, Filter::Shuffle, 4, 9),
        WriterOptions::default(),
    );
    w.pack("odd-chunk-size.blp", &raw, &opts, json!({}))?;
    // Exact multiple of the chunk size.
    let raw = data(&mut rng, 8192, 8);
    let opts = pack_opts(
        2048,
        params(Codec::Zstd, Filter::Bitshuffle, 8, 9),
        WriterOptions::default(),
    );
    w.pack("exact-multiple.blp", &raw, &opts, json!({}))?;
    // Empty and tiny inputs.
    w.pack("empty.blp", b"", &PackOptions::default(), json!({}))?;
    w.pack(
        "empty-no-offsets.blp",
        b"",
        &pack_opts(
            4096,
            params(Codec::Lz4, Filter::Shuffle, 8, 5),
            WriterOptions {
                offsets: false,
                ..Default::default()
            },
        ),
        json!({}),
    )?;
    w.pack(
        "tiny.blp",
        b"hello world",
        &PackOptions::default(),
        json!({}),
    )?;
    // Incompressible data at clevel 0 and 9 (memcpyed chunks).
    for clevel in [0u8, 9] {
        let raw = rng.bytes(5000);
        let opts = pack_opts(
            2048,
            params(Codec::Blosclz, Filter::Shuffle, 8, clevel),
            WriterOptions::default(),
        );
        w.pack(&format!("random-c{clevel}.blp"), &raw, &opts, json!({}))?;
    }

    // Metadata: uncompressed, zlib, zlib declined, with every offsets/checksum combination
    // that matters.
    let big_doc = json!({
        "name": "meta-zlib",
        "values": (0..40).collect::<Vec<_>>(),
        "text": "z".repeat(60),
        "nested": {"unit": "m", "café": "é"},
    });
    let small_doc = json!({"b": 2, "a": [1, "x"]});
    let metas = [
        (
            "meta-zlib.blp",
            &big_doc,
            MetaCodec::Zlib,
            Checksum::Adler32,
            true,
        ),
        (
            "meta-zlib-sha512.blp",
            &big_doc,
            MetaCodec::Zlib,
            Checksum::Sha512,
            true,
        ),
        (
            "meta-uncompressed.blp",
            &small_doc,
            MetaCodec::None,
            Checksum::Crc32,
            true,
        ),
        (
            "meta-uncompressed-no-offsets.blp",
            &big_doc,
            MetaCodec::None,
            Checksum::None,
            false,
        ),
        (
            "meta-zlib-declined.blp",
            &small_doc,
            MetaCodec::Zlib,
            Checksum::Md5,
            true,
        ),
        (
            "meta-zlib-no-offsets.blp",
            &big_doc,
            MetaCodec::Zlib,
            Checksum::Sha1,
            false,
        ),
    ];
    for (name, doc, codec, meta_checksum, offsets) in metas {
        let raw = data(&mut rng, 5000, 4);
        let opts = pack_opts(
            2048,
            params(Codec::Zstd, Filter::Bitshuffle, 4, 5),
            WriterOptions {
                checksum: Checksum::Sha256,
                offsets,
                metadata: Some((
                    doc.clone(),
                    MetadataParams {
                        checksum: meta_checksum,
                        codec,
                        level: 6,
                        growth_factor: 10,
                    },
                )),
                ..Default::default()
            },
        );
        w.pack(name, &raw, &opts, json!({"metadata": doc}))?;
    }

    // ndarrays, with the metadata bloscpack.pack_ndarray_to_file writes.
    let values: Vec<u8> = (0..1000u32)
        .flat_map(|i| (f64::from(i) * 0.25 + (rng.next() % 16) as f64 / 16.0).to_le_bytes())
        .collect();
    let nd = [
        (
            "ndarray-f8.blp",
            "<f8",
            vec![1000u64],
            "C",
            values,
            8usize,
            2048usize,
        ),
        (
            "ndarray-i4-2d-fortran.blp",
            "<i4",
            vec![20, 15],
            "F",
            (0..300u32)
                .flat_map(|i| (i * 7 % 1000).to_le_bytes())
                .collect(),
            4,
            400,
        ),
    ];
    for (name, dtype, shape, order, raw, typesize, chunk_size) in nd {
        let meta = json!({
            "dtype": format!("'{dtype}'"),
            "shape": shape,
            "order": order,
            "container": "numpy",
        });
        let opts = pack_opts(
            chunk_size,
            params(Codec::Lz4, Filter::Shuffle, typesize, 5),
            WriterOptions {
                metadata: Some((meta, MetadataParams::default())),
                ..Default::default()
            },
        );
        w.pack(
            name,
            &raw,
            &opts,
            json!({"ndarray": true, "dtype": dtype, "shape": shape, "order": order}),
        )?;
    }

    // Packed, then appended to chunk by chunk through SuperchunkFile::append_chunk.
    for (name, first_len) in [
        ("appended.blp", 6144usize),
        ("appended-after-partial.blp", 5000),
    ] {
        let p = params(Codec::Lz4, Filter::Shuffle, 4, 5);
        let mut raw = data(&mut rng, first_len, 4);
        let path = dir.join(name);
        let opts = pack_opts(2048, p, WriterOptions::default());
        blpk::pack(
            &mut &raw[..],
            raw.len() as u64,
            LocalStorage.open(&path, OpenMode::Create)?,
            &opts,
            |_| {},
        )?;
        let mut f = SuperchunkFile::open(LocalStorage.open(&path, OpenMode::ReadWrite)?, 0)?;
        for len in [2048usize, 2048, 700] {
            let part = data(&mut rng, len, 4);
            if !f.append_chunk(blosc::compress(&p, &part)?)? {
                return Err(format!("{name}: no free offsets slot").into());
            }
            raw.extend_from_slice(&part);
        }
        f.sync()?;
        drop(f);
        w.add(name, "blpk", &raw, json!({}))?;
    }

    // Slack makes the file scattered (option bit 3): bloscpack must refuse it.
    let raw = data(&mut rng, 5000, 8);
    let opts = pack_opts(
        2048,
        params(Codec::Lz4, Filter::Shuffle, 8, 5),
        WriterOptions {
            slack: 512,
            ..Default::default()
        },
    );
    w.pack("slack.blp", &raw, &opts, json!({"expect_refused": true}))?;

    // Single Blosc chunks: every codec x filter x typesize x clevel.
    for codec in Codec::ALL {
        for filter in Filter::ALL {
            for typesize in [1usize, 4, 8] {
                for clevel in [0u8, 5, 9] {
                    let raw = data(&mut rng, 10_000 + 3, typesize);
                    let chunk = blosc::compress(&params(codec, filter, typesize, clevel), &raw)?;
                    let name = format!("chunk-{codec}-{filter}-t{typesize}-c{clevel}.blosc");
                    std::fs::write(dir.join(&name), &chunk)?;
                    w.add(&name, "chunk", &raw, json!({}))?;
                }
            }
        }
    }
    // Forced block sizes (kept by c-blosc for zstd and large typesizes), several threads,
    // edge inputs.
    let special: [(&str, CompressParams, Vec<u8>); 6] = [
        (
            "chunk-zstd-blocksize-4096.blosc",
            CompressParams {
                blocksize: 4096,
                ..params(Codec::Zstd, Filter::Shuffle, 8, 5)
            },
            data(&mut rng, 20_000, 8),
        ),
        (
            "chunk-lz4-t32-blocksize-4096.blosc",
            CompressParams {
                blocksize: 4096,
                ..params(Codec::Lz4, Filter::Shuffle, 32, 5)
            },
            data(&mut rng, 20_000, 8),
        ),
        (
            "chunk-zstd-threads-4.blosc",
            CompressParams {
                nthreads: 4,
                blocksize: 16 * 1024,
                ..params(Codec::Zstd, Filter::Shuffle, 8, 5)
            },
            data(&mut rng, 1 << 20, 8),
        ),
        (
            "chunk-empty.blosc",
            params(Codec::Lz4, Filter::Shuffle, 4, 5),
            Vec::new(),
        ),
        (
            "chunk-7bytes.blosc",
            params(Codec::Lz4, Filter::Shuffle, 8, 5),
            b"1234567".to_vec(),
        ),
        (
            "chunk-random.blosc",
            params(Codec::Zstd, Filter::Bitshuffle, 4, 9),
            rng.bytes(3000),
        ),
    ];
    for (name, p, raw) in special {
        let chunk = blosc::compress(&p, &raw)?;
        std::fs::write(dir.join(name), &chunk)?;
        w.add(name, "chunk", &raw, json!({}))?;
    }

    let n = w.files.len();
    let manifest = json!({
        "files": w.files,
        "written_by": {"blz": env!("CARGO_PKG_VERSION"), "c-blosc": blosc::c_blosc_version()},
    });
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_string_pretty(&manifest)? + "\n",
    )?;
    Ok(n)
}

/// Decodes one manifest entry with blz and compares it with the expected bytes.
fn check(dir: &Path, e: &Value) -> Res<()> {
    let path = dir.join(e["path"].as_str().ok_or("entry without a path")?);
    let raw = match e["raw"].as_str() {
        Some(r) => Some(std::fs::read(dir.join(r))?),
        None => None,
    };
    let sha = e["sha256"].as_str();
    if raw.is_none() && sha.is_none() {
        return Err("entry has neither 'raw' nor 'sha256'".into());
    }
    if let (Some(raw), Some(sha)) = (&raw, sha) {
        if sha256_hex(raw) != sha {
            return Err("raw file does not match the entry's sha256".into());
        }
    }
    let got = match e["kind"].as_str() {
        Some("blpk") => {
            let r = SuperchunkReader::open(LocalStorage.open(&path, OpenMode::Read)?)?;
            let mut out = Vec::new();
            blpk::unpack(&r, &mut out, |_| {})?;
            if let Some(want) = e.get("metadata") {
                if r.metadata() != Some(want) {
                    return Err(format!("metadata {:?}, expected {want}", r.metadata()).into());
                }
            }
            if e["ndarray"].as_bool() == Some(true) {
                let m = r.metadata().ok_or("ndarray file without metadata")?;
                if m["container"] != "numpy" {
                    return Err(format!("container {}, expected numpy", m["container"]).into());
                }
                if let Some(dtype) = e["dtype"].as_str() {
                    let stored = m["dtype"].as_str().unwrap_or_default();
                    if stored != format!("'{dtype}'") && stored != dtype {
                        return Err(format!("dtype {stored}, expected {dtype}").into());
                    }
                }
                for key in ["shape", "order"] {
                    if e.get(key).is_some() && m[key] != e[key] {
                        return Err(format!("{key} {}, expected {}", m[key], e[key]).into());
                    }
                }
            }
            out
        }
        Some("chunk") => blosc::decompress(&std::fs::read(&path)?, 1)?,
        other => return Err(format!("unknown kind {other:?}").into()),
    };
    match (&raw, sha) {
        (Some(raw), _) if &got != raw => Err(format!(
            "decoded {} bytes that differ from the {} expected",
            got.len(),
            raw.len()
        )
        .into()),
        (None, Some(sha)) if sha256_hex(&got) != sha => Err(format!(
            "decoded {} bytes whose sha256 differs from the entry's",
            got.len()
        )
        .into()),
        _ => Ok(()),
    }
}

fn read(dir: &Path) -> ExitCode {
    let files = std::fs::read(dir.join("manifest.json"))
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()))
        .and_then(|m| match m.get("files").and_then(Value::as_array) {
            Some(f) if !f.is_empty() => Ok(f.clone()),
            _ => Err("no 'files' list".into()),
        });
    let files = match files {
        Ok(f) => f,
        Err(e) => {
            println!("FAIL manifest.json: {e}");
            println!("0 passed, 1 failed");
            return ExitCode::from(2);
        }
    };
    let (mut passed, mut failed) = (0, 0);
    for e in &files {
        let name = e["path"].as_str().unwrap_or("<entry without path>");
        match check(dir, e) {
            Ok(()) => {
                passed += 1;
                println!("ok {name}");
            }
            Err(err) => {
                failed += 1;
                println!("FAIL {name}: {err}");
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["write", dir] => match write(Path::new(dir)) {
            Ok(n) => {
                println!("wrote {n} files and manifest.json to {dir}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("interop: write failed: {e}");
                ExitCode::FAILURE
            }
        },
        ["read", dir] => read(Path::new(dir)),
        _ => {
            eprintln!("usage: interop write DIR | interop read DIR");
            ExitCode::from(2)
        }
    }
}
