//! Short reads straight from Blosc chunks, no store around them: `--count` reads of
//! `--width` float64 at random places (fixed seed) of a 2e7-element random walk and
//! linspace (the data of `benches/compare_python.py`), compressed as `benches/small_reads.py`
//! does (lz4, clevel 5, byte shuffle, chunks of 1e6 elements, blz's block size), in
//! microseconds of CPU time per read (the thread's own, not wall time: a shared
//! machine's other work does not count). Checks every read against the data.
//!
//!     cargo run --release -p blz-format --example small_reads [-- --count 3000 --width 100 --rounds 5]

/// This thread's CPU time in seconds (a shared machine's other work does not count).
fn cpu_now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

use blz_format::blosc::{compress, getitem, Codec, CompressParams, Filter};

const CHUNK: usize = 1_000_000;

fn splitmix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn generate(kind: &str, n: usize) -> Vec<f64> {
    if kind == "linspace" {
        return (0..n)
            .map(|i| i as f64 * (1.0 / (n.max(2) - 1) as f64))
            .collect();
    }
    let mut acc = 0.0;
    (0..n as u64)
        .map(|i| {
            acc += (splitmix(i) >> 11) as f64 * (1.0 / (1u64 << 53) as f64) - 0.5;
            acc
        })
        .collect()
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

fn main() {
    let n = arg("--n", 20_000_000);
    let count = arg("--count", 3000);
    let width = arg("--width", 100);
    let rounds = arg("--rounds", 5);
    let params = CompressParams {
        codec: Codec::Lz4,
        clevel: 5,
        filter: Filter::Shuffle,
        typesize: 8,
        ..CompressParams::default()
    };
    for kind in ["walk", "linspace"] {
        let data = generate(kind, n);
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        let chunks: Vec<Vec<u8>> = bytes
            .chunks(CHUNK * 8)
            .map(|c| compress(&params, c).expect("compress"))
            .collect();
        let csize: usize = chunks.iter().map(Vec::len).sum();
        let mut z = 7u64;
        let starts: Vec<usize> = (0..count)
            .map(|_| {
                z += 1;
                (splitmix(z) % (n - width) as u64) as usize
            })
            .collect();
        let mut dst = vec![0u8; width * 8];
        let mut times = Vec::new();
        for _ in 0..rounds {
            let t0 = cpu_now();
            for &s in &starts {
                // A read within one chunk, as most are (a read across two is two getitems).
                let (c, off) = (s / CHUNK, s % CHUNK);
                let w = width.min(CHUNK - off);
                getitem(&chunks[c], off * 8, &mut dst[..w * 8]).expect("getitem");
                if w < width {
                    getitem(&chunks[c + 1], 0, &mut dst[w * 8..]).expect("getitem");
                }
            }
            times.push((cpu_now() - t0) / count as f64 * 1e6);
            let s = starts[0];
            let (c, off) = (s / CHUNK, s % CHUNK);
            let w = width.min(CHUNK - off);
            getitem(&chunks[c], off * 8, &mut dst[..w * 8]).expect("getitem");
            assert_eq!(dst[..w * 8], bytes[s * 8..(s + w) * 8]);
        }
        // Every read checked once.
        for &s in &starts {
            let (c, off) = (s / CHUNK, s % CHUNK);
            let w = width.min(CHUNK - off);
            getitem(&chunks[c], off * 8, &mut dst[..w * 8]).expect("getitem");
            assert_eq!(dst[..w * 8], bytes[s * 8..(s + w) * 8], "{kind} at {s}");
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{kind:<9} ratio {:>5.1}  us/read median {:>6.1} [{:.1}-{:.1}]",
            bytes.len() as f64 / csize as f64,
            times[times.len() / 2],
            times[0],
            times[times.len() - 1]
        );
    }
}
