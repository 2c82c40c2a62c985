//! One run of zarrs for `benches/compare.py`: loads raw float64 from `--input`, writes it as
//! a Zarr v3 array at `--out` (Blosc lz4, byte shuffle, typesize 8, chunks of `--chunk`
//! elements, encoded in parallel by zarrs over rayon), fsyncs the files (timed apart, as
//! compare.py does for the Python peers), reads the whole array back, checks it, and prints
//! one JSON line with the same keys as blz's `bench_io` and compare.py's peers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use zarrs::array::codec::BloscCodec;
use zarrs::array::codec::bytes_to_bytes::blosc::{
    BloscCompressionLevel, BloscCompressor, BloscShuffleMode,
};
use zarrs::array::{ArrayBuilder, ArrayBytesFixedDisjointView, ArraySubset, data_type};
use zarrs::filesystem::FilesystemStore;

struct Args {
    input: PathBuf,
    out: PathBuf,
    chunk: u64,
    clevel: u8,
    blocksize: usize,
    warm: bool,
}

fn parse_args() -> Args {
    let mut a = Args {
        input: PathBuf::new(),
        out: PathBuf::new(),
        chunk: 1_000_000,
        clevel: 5,
        blocksize: 0,
        warm: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--input" => a.input = v().into(),
            "--out" => a.out = v().into(),
            "--chunk" => a.chunk = v().parse().expect("--chunk"),
            "--clevel" => a.clevel = v().parse().expect("--clevel"),
            "--blocksize" => a.blocksize = v().parse().expect("--blocksize"),
            "--warm" => a.warm = true,
            _ => panic!("unknown argument {k}"),
        }
    }
    assert!(!a.input.as_os_str().is_empty() && !a.out.as_os_str().is_empty());
    a
}

fn read_raw(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).expect("read input");
    assert!(bytes.len().is_multiple_of(8), "input is not whole float64s");
    bytes
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// CPU time (user + system, all threads) of this process so far, in seconds.
fn cpu_time() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn clock<T>(f: impl FnOnce() -> T) -> (T, f64, f64) {
    let (t, c) = (Instant::now(), cpu_time());
    let r = f();
    (r, t.elapsed().as_secs_f64(), cpu_time() - c)
}

/// Asks for huge pages on `v`'s spare capacity (as numpy does for large arrays, and as blz's
/// read buffers do).
fn advise_huge(v: &mut Vec<u8>) {
    let base = v.as_mut_ptr() as usize;
    let start = base.next_multiple_of(4096);
    let end = (base + v.capacity()) / 4096 * 4096;
    if end > start {
        // SAFETY: the range lies inside the vector's allocation; the advice changes only how
        // the kernel backs it.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

/// Touches and frees `nbytes` of memory in huge pages, as blz's bench_io and compare.py's
/// peers do before each timed phase (see compare.py's docstring).
fn warm(nbytes: usize) {
    let mut w: Vec<u8> = Vec::with_capacity(nbytes);
    advise_huge(&mut w);
    w.resize(nbytes, 1);
    drop(std::hint::black_box(w));
}

/// Every file under `dir`, with its length.
fn files(dir: &Path, out: &mut Vec<(PathBuf, u64)>) {
    for e in std::fs::read_dir(dir).expect("list") {
        let e = e.expect("entry");
        let md = e.metadata().expect("stat");
        if md.is_dir() {
            files(&e.path(), out);
        } else {
            out.push((e.path(), md.len()));
        }
    }
}

fn main() {
    let a = parse_args();
    let data = read_raw(&a.input);
    let n = data.len() as u64;
    let nbytes = data.len() * 8;
    let _ = std::fs::remove_dir_all(&a.out);
    std::fs::create_dir_all(&a.out).expect("create --out");

    let blosc = BloscCodec::new(
        BloscCompressor::LZ4,
        BloscCompressionLevel::try_from(a.clevel).expect("clevel 0-9"),
        (a.blocksize > 0).then_some(a.blocksize),
        BloscShuffleMode::Shuffle,
        Some(8),
    )
    .expect("blosc codec");

    if a.warm {
        warm(nbytes);
    }
    let (_, write_s, write_cpu_s) = clock(|| {
        let store = Arc::new(FilesystemStore::new(&a.out).expect("store"));
        let array = ArrayBuilder::new(vec![n], vec![a.chunk], data_type::float64(), 0.0f64)
            .bytes_to_bytes_codecs(vec![Arc::new(blosc)])
            .build(store, "/")
            .expect("array");
        array.store_metadata().expect("metadata");
        array
            .store_array_subset(&ArraySubset::new_with_shape(vec![n]), &data[..])
            .expect("write");
    });

    let mut all = Vec::new();
    files(&a.out, &mut all);
    let (_, sync_s, _) = clock(|| {
        for (p, _) in &all {
            std::fs::File::open(p)
                .and_then(|f| f.sync_all())
                .expect("fsync");
        }
        std::fs::File::open(&a.out)
            .and_then(|d| d.sync_all())
            .expect("fsync dir");
    });

    if a.warm {
        warm(nbytes);
    }
    // zarrs' fastest read: decode every chunk in parallel straight into one buffer, allocated
    // and advised like blz's (`retrieve_array_subset::<Vec<f64>>` decodes into bytes and
    // then copies them into the vector, about 10% slower here).
    let (back, read_s, read_cpu_s) = clock(|| {
        let store = Arc::new(FilesystemStore::new(&a.out).expect("store"));
        let array = zarrs::array::Array::open(store, "/").expect("open");
        let mut out: Vec<u8> = Vec::with_capacity(nbytes);
        advise_huge(&mut out);
        let shape = array.shape().to_vec();
        let cells = unsafe_cell_slice::UnsafeCellSlice::new_from_vec_with_spare_capacity(&mut out);
        // SAFETY: one view covers the whole buffer; nothing else writes to it.
        let mut view =
            unsafe { ArrayBytesFixedDisjointView::new(cells, 8, &shape, array.subset_all()) }
                .expect("view");
        array
            .retrieve_array_subset_into(&array.subset_all(), (&mut view).into())
            .expect("read");
        // SAFETY: the read filled all `nbytes` bytes of the spare capacity.
        unsafe { out.set_len(nbytes) };
        out
    });
    let same = back
        .chunks_exact(8)
        .zip(&data)
        .all(|(b, v)| b == v.to_le_bytes());
    assert!(same, "zarrs read back different data");

    // The first chunk's Blosc header: bytes 8..12 hold the block size.
    let first = a.out.join("c").join("0");
    let head = std::fs::read(&first).expect("first chunk");
    let blocksize = u32::from_le_bytes(head[8..12].try_into().unwrap());
    let cbytes: u64 = all
        .iter()
        .filter(|(p, _)| p.starts_with(a.out.join("c")))
        .map(|(_, l)| l)
        .sum();
    println!(
        "{{\"write_s\": {write_s:.6}, \"sync_s\": {sync_s:.6}, \"read_s\": {read_s:.6}, \
         \"write_cpu_s\": {write_cpu_s:.6}, \"read_cpu_s\": {read_cpu_s:.6}, \
         \"cbytes\": {cbytes}, \"blocksize\": {blocksize}}}"
    );
}
