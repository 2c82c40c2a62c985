//! Times writing and reading one float64 dataset, for `benches/compare.py` (which runs the
//! peers on the same data in the same run) and for measuring append memory.
//!
//! ```text
//! # write and read a raw native-endian float64 file (what compare.py does)
//! cargo run --release --example bench_io -- --input walk.f64 --out /tmp/walk.blz
//! # or generate the data (same formulas as compare.py)
//! cargo run --release --example bench_io -- --generate walk --n 20000000 --out /tmp/w.blz
//! # append 10 batches of 5e6 elements and report peak memory
//! cargo run --release --example bench_io -- --append-batches 10 --batch 5000000 --out /tmp/m.blz
//! ```
//!
//! Prints one JSON object. Write times run from data already in memory to a committed
//! (fsynced) dataset; read times run from opening the dataset to holding the whole array.

#[path = "../benches/common/data.rs"]
mod data;

use blz::meta::{Compression, FilterName};
use blz::storage::OpenMode;
use blz::{CreateOptions, DType, Dataset};
use blz_format::blosc::{ChunkHeader, Codec};
use blz_format::blpk::SuperchunkReader;
use clap::Parser;
use data::generate;
use ndarray::{ArrayView1, SliceInfoElem};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser)]
struct Args {
    /// Raw native-endian float64 input file.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Generate the data instead: `walk` or `linspace`.
    #[arg(long)]
    generate: Option<String>,
    /// Elements to generate.
    #[arg(long, default_value_t = 100_000_000)]
    n: usize,
    /// Dataset directory (replaced).
    #[arg(long)]
    out: PathBuf,
    /// Elements per chunk (0: blz's default chunking).
    #[arg(long, default_value_t = 1_000_000)]
    chunk: u64,
    /// Codec.
    #[arg(long, default_value = "lz4")]
    codec: String,
    /// Compression level.
    #[arg(long, default_value_t = 5)]
    clevel: u8,
    /// Blosc block size in bytes (0: c-blosc chooses).
    #[arg(long, default_value_t = 0)]
    blocksize: usize,
    /// Write and read this many times, reporting each time.
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// Only write (`write`), only read an existing dataset (`read`), or both.
    #[arg(long, default_value = "both")]
    phase: String,
    /// Touch and free as much memory as the data before each timed phase (compare.py's
    /// `warm`: on a VM that hands freed memory back to its host, fresh pages are slow).
    #[arg(long)]
    warm: bool,
    /// After each read, time this many reads of 100 consecutive elements at random places
    /// (fixed seed) through the opened dataset, as compare_python.py's random reads do.
    #[arg(long, default_value_t = 0)]
    random_reads: usize,
    /// Memory mode: append this many batches.
    #[arg(long)]
    append_batches: Option<usize>,
    /// Memory mode: elements per batch.
    #[arg(long, default_value_t = 5_000_000)]
    batch: usize,
}

fn read_raw(path: &Path) -> Vec<f64> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).expect("open input");
    let len = file.metadata().expect("stat input").len() as usize;
    assert!(len.is_multiple_of(8), "input is not whole float64s");
    // One allocation, read into in place (as numpy's `fromfile` does).
    let mut data = vec![0.0f64; len / 8];
    let bytes = as_bytes_mut(&mut data);
    file.read_exact(bytes).expect("read input");
    data
}

fn as_bytes_mut(v: &mut [f64]) -> &mut [u8] {
    // SAFETY: any byte pattern is a valid f64, and the slice covers exactly `v`'s memory.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
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

/// Wall-clock and CPU time of a stretch of work (CPU time tells more on a loaded machine).
struct Clock(Instant, f64);

impl Clock {
    fn start() -> Clock {
        Clock(Instant::now(), cpu_time())
    }
    fn stop(self) -> (f64, f64) {
        (self.0.elapsed().as_secs_f64(), cpu_time() - self.1)
    }
}

/// Peak resident memory of this process so far, in bytes (`VmHWM`).
fn vm_hwm() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Touches `nbytes` of fresh memory, in huge pages where the system gives them (as numpy
/// asks for its large arrays, and as blz's read buffers do), and frees it (see
/// `Args::warm`).
fn warm(nbytes: usize) {
    let mut w: Vec<u8> = Vec::with_capacity(nbytes);
    #[cfg(target_os = "linux")]
    // SAFETY: the range is the vector's own allocation; the advice changes only how the
    // kernel backs it.
    unsafe {
        // madvise wants a page-aligned start; the allocator's pointer is not.
        let start = (w.as_mut_ptr() as usize).next_multiple_of(4096);
        let end = (w.as_mut_ptr() as usize + nbytes) / 4096 * 4096;
        if end > start {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
    w.resize(nbytes, 1);
    drop(std::hint::black_box(w));
}

fn options(a: &Args, expected: u64) -> CreateOptions {
    CreateOptions {
        chunkshape: (a.chunk > 0).then(|| vec![a.chunk]),
        compression: Compression {
            codec: a.codec.parse::<Codec>().expect("codec"),
            clevel: a.clevel,
            filters: vec![FilterName::Shuffle],
            mantissa_bits: None,
            blocksize: a.blocksize,
        },
        expectedlen: Some(expected),
        overwrite: true,
        ..Default::default()
    }
}

/// The Blosc block size c-blosc chose for the first chunk.
fn first_blocksize(ds: &Dataset) -> u32 {
    let file = blz::storage::local()
        .open(&ds.superchunk_path(0), OpenMode::Read)
        .expect("open first superchunk");
    let r = SuperchunkReader::open(file).expect("read superchunk");
    let c = r.read_chunk(0).expect("read chunk 0");
    ChunkHeader::parse(&c).expect("chunk header").blocksize
}

fn write_read(a: &Args) {
    let data = match (&a.input, &a.generate) {
        (Some(p), _) => read_raw(p),
        (None, Some(kind)) => data::dataset(kind, a.n),
        (None, None) => panic!("give --input or --generate"),
    };
    let nbytes = data.len() as u64 * 8;
    for _ in 0..a.reps {
        let (mut write, mut read) = ((0.0, 0.0), (0.0, 0.0));
        if a.phase != "read" {
            // Remove an earlier dataset outside the timed part (the peers' runs do the same).
            let _ = std::fs::remove_dir_all(&a.out);
            if a.warm {
                warm(nbytes as usize);
            }
            let t = Clock::start();
            let mut ds =
                Dataset::create_with(&a.out, DType::F64, &[0], &options(a, data.len() as u64))
                    .expect("create");
            ds.append(&ArrayView1::from(&data[..]).into_dyn())
                .expect("append");
            write = t.stop();
        }
        if a.phase != "write" {
            if a.warm {
                warm(nbytes as usize);
            }
            let t = Clock::start();
            let ds = Dataset::open(&a.out).expect("open");
            let back = ds.read::<f64>().expect("read");
            read = t.stop();
            let same = back.as_slice().is_some_and(|s| s == &data[..]);
            assert!(same, "read back differs from what was written");
        }
        let ds = Dataset::open(&a.out).expect("open");
        let per_read = random_reads(&ds, a.random_reads);
        println!(
            "{{\"write_s\": {:.6}, \"read_s\": {:.6}, \"write_cpu_s\": {:.6}, \
             \"read_cpu_s\": {:.6}, \"random_read_us\": {:.2}, \"nbytes\": {nbytes}, \
             \"cbytes\": {}, \"blocksize\": {}, \"chunk\": {}}}",
            write.0,
            read.0,
            write.1,
            read.1,
            per_read * 1e6,
            ds.sizes().cbytes,
            first_blocksize(&ds),
            ds.chunkshape()[0]
        );
    }
}

/// Seconds per read of 100 consecutive elements at `count` random places (SplitMix64 from a
/// fixed seed), after one untimed read that pays the opening costs; 0 when `count` is 0.
fn random_reads(ds: &Dataset, count: usize) -> f64 {
    const WIDTH: u64 = 100;
    let n = ds.shape()[0];
    if count == 0 || n <= WIDTH {
        return 0.0;
    }
    let read = |s: u64| {
        let v = ds
            .slice::<f64, _>([SliceInfoElem::from(s as isize..(s + WIDTH) as isize)])
            .expect("random read");
        std::hint::black_box(v);
    };
    read(0);
    let t = Instant::now();
    for i in 0..count {
        read(data::splitmix(1 << 40 | i as u64) % (n - WIDTH));
    }
    t.elapsed().as_secs_f64() / count as f64
}

fn append_memory(a: &Args, batches: usize) {
    let total = batches * a.batch;
    let mut batch = vec![0.0f64; a.batch];
    let mut acc = 0.0;
    generate("walk", 0, total, &mut acc, &mut batch);
    let mut ds =
        Dataset::create_with(&a.out, DType::F64, &[0], &options(a, total as u64)).expect("create");
    let base = vm_hwm();
    let t = Instant::now();
    let mut after_first = 0;
    for b in 0..batches {
        if b > 0 {
            generate("walk", b * a.batch, total, &mut acc, &mut batch);
        }
        ds.append(&ArrayView1::from(&batch[..]).into_dyn())
            .expect("append");
        if b == 0 {
            after_first = vm_hwm();
        }
    }
    let write_s = t.elapsed().as_secs_f64();
    let peak = vm_hwm();
    let chunk_bytes = ds.chunkshape()[0] * 8;
    println!(
        "{{\"batches\": {batches}, \"batch_bytes\": {}, \"dataset_bytes\": {}, \
         \"chunk_bytes\": {chunk_bytes}, \"hwm_before\": {base}, \"hwm_after_first\": {after_first}, \
         \"hwm_after\": {peak}, \"growth\": {}, \"growth_after_first\": {}, \"write_s\": {write_s:.6}}}",
        a.batch * 8,
        total * 8,
        peak - base,
        peak - after_first,
    );
}

fn main() {
    let a = Args::parse();
    match a.append_batches {
        Some(k) => append_memory(&a, k),
        None => write_read(&a),
    }
}
