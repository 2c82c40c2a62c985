//! Arbitrary bytes as a superchunk file: opening, reading every chunk, unpacking, and taking
//! the file up for writing must return an error or work, never crash or allocate hugely. When
//! the file reads cleanly, a planned replace, append and truncate applied to it must leave a
//! file that reads back as expected. When it reads cleanly and its metadata records an offsets
//! digest, the same file with two offsets slots swapped (or one copied over another) must
//! read each chunk as before or fail: never return another chunk's data.

#![no_main]

use blz_format::blosc::{self, CompressParams};
use blz_format::blpk::{self, SuperchunkReader, SuperchunkWriter, Write, WriterOptions};
use blz::storage::StorageFile;
use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Chunks claiming more than this are not decompressed (a chunk may legitimately hold up to
/// 2 GiB; the file header bounds what the reader accepts).
const MAX_DECOMPRESS: u32 = 16 << 20;

/// A file held in memory.
#[derive(Clone)]
struct MemFile {
    bytes: Arc<Mutex<Vec<u8>>>,
    path: PathBuf,
}

impl MemFile {
    fn new(bytes: Vec<u8>) -> MemFile {
        MemFile {
            bytes: Arc::new(Mutex::new(bytes)),
            path: PathBuf::from("fuzz.blp"),
        }
    }

    fn apply(&self, writes: &[Write]) {
        for w in writes {
            self.write_at(w.offset, &w.data).unwrap();
        }
    }
}

fn eof() -> blz::Error {
    blz::Error::io(
        "read",
        "fuzz.blp",
        std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
    )
}

impl StorageFile for MemFile {
    fn len(&self) -> blz::Result<u64> {
        Ok(self.bytes.lock().unwrap().len() as u64)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> blz::Result<()> {
        let b = self.bytes.lock().unwrap();
        let start = usize::try_from(offset).map_err(|_| eof())?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| b.get(start..end))
            .ok_or_else(eof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> blz::Result<()> {
        let mut b = self.bytes.lock().unwrap();
        let start = offset as usize;
        // The fuzzer's files are small; a write far past the end would be a writer bug.
        assert!(
            start <= b.len() + (1 << 24),
            "write at {start} past a {}-byte file",
            b.len()
        );
        if b.len() < start + data.len() {
            b.resize(start + data.len(), 0);
        }
        b[start..start + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn set_len(&self, len: u64) -> blz::Result<()> {
        self.bytes.lock().unwrap().resize(len as usize, 0);
        Ok(())
    }
    fn sync(&self) -> blz::Result<()> {
        Ok(())
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads every chunk; returns their uncompressed bytes when all of them read cleanly.
fn read_all(r: &SuperchunkReader) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut ok = true;
    let mut scratch = Vec::new();
    for k in 0..r.nchunks() {
        let info = r.chunk_info(k);
        let read = r.read_chunk_into(k, &mut scratch);
        match (info, read) {
            (Ok(info), Ok(())) => {
                assert_eq!(scratch.len(), info.header.cbytes as usize);
                if info.header.nbytes > MAX_DECOMPRESS {
                    ok = false;
                    continue;
                }
                let mut dst = vec![0u8; info.header.nbytes as usize];
                let mut s2 = Vec::new();
                match r.decompress_chunk_into(k, &mut dst, &mut s2, 1) {
                    Ok(()) => out.push(dst),
                    Err(_) => ok = false,
                }
            }
            _ => ok = false,
        }
    }
    assert!(r.chunk_info(r.nchunks()).is_err());
    ok.then_some(out)
}

fn new_chunk(fill: u8, n: usize) -> Vec<u8> {
    let src: Vec<u8> = (0..n).map(|i| fill.wrapping_add((i / 7) as u8)).collect();
    blosc::compress(&CompressParams::default(), &src).unwrap()
}

/// Applies the writes of a plan and then the offsets digest they call for.
fn apply_sealed(file: &MemFile, w: &mut SuperchunkWriter, writes: &[Write]) {
    file.apply(writes);
    if let Some(front) = w.plan_seal().unwrap() {
        file.apply(&[front]);
    }
}

/// Files whose metadata records an offsets digest, as datasets write them: plain and
/// scattered, with chunks of several sizes, one relocated.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, slack) in [0u32, 64].into_iter().enumerate() {
        let file = MemFile::new(Vec::new());
        let doc = serde_json::json!({"blz": {"dataset": "fuzz", "store": "data", "file": 1,
            "offsets": ""}});
        let opts = WriterOptions {
            max_app_chunks: 6,
            slack,
            // As datasets store it: as is, sized to the document, an Adler-32 digest.
            metadata: Some((
                doc,
                blpk::MetadataParams {
                    checksum: blpk::Checksum::Adler32,
                    codec: blpk::MetaCodec::None,
                    level: 0,
                    growth_factor: 1,
                },
            )),
            ..WriterOptions::default()
        };
        let (mut w, front) = SuperchunkWriter::create(&file.path, &opts).unwrap();
        file.apply(&front);
        for (k, n) in [300usize, 300, 300, 120].into_iter().enumerate() {
            let writes = w.plan_append(new_chunk(k as u8 * 40, n)).unwrap().unwrap();
            apply_sealed(&file, &mut w, &writes);
        }
        let (_, writes) = w.plan_replace(1, new_chunk(200, 900)).unwrap();
        apply_sealed(&file, &mut w, &writes);
        let bytes = file.bytes.lock().unwrap().clone();
        for knob in [0x00u8, 0x13, 0x4a, 0xf7] {
            out.push((
                format!("sealed-{i}-{knob:02x}"),
                [&[knob][..], &bytes].concat(),
            ));
        }
    }
    out
}

/// When `BLZ_FUZZ_SEEDS` names a directory, writes [`seeds`] there once (as
/// `fuzz/common`'s `write_seeds` does for the targets that share it; this target keeps to
/// its in-memory file and needs nothing else of it).
fn write_seeds() {
    static DONE: std::sync::Once = std::sync::Once::new();
    if let Some(dir) = std::env::var_os("BLZ_FUZZ_SEEDS") {
        DONE.call_once(|| {
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, bytes) in seeds() {
                std::fs::write(dir.join(name), bytes).unwrap();
            }
        });
    }
}

/// The file with slot `i` set to slot `j`'s value, and (with `swap`) slot `j` to slot `i`'s.
fn permuted(bytes: &[u8], r: &SuperchunkReader, i: u64, j: u64, swap: bool) -> Vec<u8> {
    let mut b = bytes.to_vec();
    let at = |k: u64| (r.layout().offsets_pos + 8 * k) as usize;
    let (si, sj) = (b[at(i)..at(i) + 8].to_vec(), b[at(j)..at(j) + 8].to_vec());
    b[at(i)..at(i) + 8].copy_from_slice(&sj);
    if swap {
        b[at(j)..at(j) + 8].copy_from_slice(&si);
    }
    b
}

fuzz_target!(|data: &[u8]| {
    write_seeds();
    // The first byte steers the write plans; the rest is the file.
    let Some((&knob, file_bytes)) = data.split_first() else {
        return;
    };
    let file = MemFile::new(file_bytes.to_vec());
    let Ok(r) = SuperchunkReader::open(Box::new(file.clone())) else {
        return;
    };
    let _ = r.metadata();
    let chunks = read_all(&r);
    if let Some(chunks) = &chunks {
        let mut out = Vec::new();
        let n = blpk::unpack(&r, &mut out, |_| {}).unwrap();
        assert_eq!(n as usize, out.len());
        assert_eq!(out, chunks.concat());
    }
    // A file that binds its chunks to their slots: slots swapped or copied over each other
    // never read as another chunk.
    let sealed = r.metadata().is_some_and(|m| {
        m.get(blpk::BLZ_KEY)
            .and_then(|b| b.get(blpk::OFFSETS_KEY))
            .is_some()
    });
    if let (true, Some(chunks)) = (sealed && r.header().has(blpk::OPT_OFFSETS), &chunks) {
        let n = r.nchunks();
        if n >= 2 {
            let (i, j) = (u64::from(knob) % n, u64::from(knob >> 3) % n);
            let bad = permuted(file_bytes, &r, i, j, knob & 0x80 != 0);
            if let Ok(r2) = SuperchunkReader::open(Box::new(MemFile::new(bad))) {
                for (k, want) in chunks.iter().enumerate() {
                    if let Ok(got) = r2.decompress_chunk(k as u64) {
                        assert_eq!(&got, want, "chunk {k} read as another chunk");
                    }
                }
            }
        }
    }
    drop(r);

    let slack = u32::from(knob & 0x0f) * 64;
    let Ok(mut w) = SuperchunkWriter::open(&file, slack) else {
        return;
    };
    let n = w.nchunks();
    let Some(mut chunks) = chunks else {
        // Planning on a file whose chunks do not all read must still not crash.
        if n > 0 {
            let _ = w.plan_replace(u64::from(knob) % n, new_chunk(knob, 100));
        }
        let _ = w.plan_truncate(n / 2);
        return;
    };

    // Replace a chunk (keeping the header's size rules), then check the result reads back.
    if n > 0 {
        let k = u64::from(knob) % n;
        let size = chunks[k as usize].len() + if knob & 0x10 != 0 { 0 } else { 5 };
        let c = new_chunk(knob, size);
        let plain = blosc::decompress(&c, 1).unwrap();
        let (_, writes) = w.plan_replace(k, c).unwrap();
        apply_sealed(&file, &mut w, &writes);
        chunks[k as usize] = plain;
        let r = SuperchunkReader::open(Box::new(file.clone())).unwrap();
        assert_eq!(read_all(&r).unwrap(), chunks);
    }
    // Append, if a slot is free.
    let c = new_chunk(knob, 300);
    let plain = blosc::decompress(&c, 1).unwrap();
    if let Some(writes) = w.plan_append(c).unwrap() {
        apply_sealed(&file, &mut w, &writes);
        chunks.push(plain);
        let r = SuperchunkReader::open(Box::new(file.clone())).unwrap();
        assert_eq!(read_all(&r).unwrap(), chunks);
    }
    // Truncate.
    let keep = u64::from(knob >> 5) % (w.nchunks() + 1);
    let writes = w.plan_truncate(keep);
    apply_sealed(&file, &mut w, &writes);
    chunks.truncate(keep as usize);
    let r = SuperchunkReader::open(Box::new(file.clone())).unwrap();
    assert_eq!(read_all(&r).unwrap(), chunks);
});
