//! Arbitrary bytes as a superchunk file: opening, reading every chunk, unpacking, and taking
//! the file up for writing must return an error or work, never crash or allocate hugely. When
//! the file reads cleanly, a planned replace, append and truncate applied to it must leave a
//! file that reads back as expected.

#![no_main]

use blz::blosc::{self, CompressParams};
use blz::blpk::{self, SuperchunkReader, SuperchunkWriter, Write};
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

fuzz_target!(|data: &[u8]| {
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
        file.apply(&writes);
        chunks[k as usize] = plain;
        let r = SuperchunkReader::open(Box::new(file.clone())).unwrap();
        assert_eq!(read_all(&r).unwrap(), chunks);
    }
    // Append, if a slot is free.
    let c = new_chunk(knob, 300);
    let plain = blosc::decompress(&c, 1).unwrap();
    if let Some(writes) = w.plan_append(c).unwrap() {
        file.apply(&writes);
        chunks.push(plain);
        let r = SuperchunkReader::open(Box::new(file.clone())).unwrap();
        assert_eq!(read_all(&r).unwrap(), chunks);
    }
    // Truncate.
    let keep = u64::from(knob >> 5) % (w.nchunks() + 1);
    let writes = w.plan_truncate(keep);
    file.apply(&writes);
    chunks.truncate(keep as usize);
    let r = SuperchunkReader::open(Box::new(file.clone())).unwrap();
    assert_eq!(read_all(&r).unwrap(), chunks);
});
