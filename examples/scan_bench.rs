//! Scan throughput: sums a float64 dataset with 1 and 2 (or more) threads and prints GB/s of
//! uncompressed data. Creates the dataset (a random walk) first when it does not exist.
//!
//! ```sh
//! cargo run --release --example scan_bench -- /mnt/blztest/walk.blz   # on the Gluster mount
//! cargo run --release --example scan_bench -- /var/tmp/walk.blz       # on the local disk
//! # options: --n 100000000 --threads 1,2 --repeat 3
//! ```

use blz::scan::{reduce, Reduction, ScanOptions};
use blz::{DType, Dataset};
use ndarray::Array1;
use std::path::PathBuf;
use std::time::Instant;

fn main() -> blz::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut path: Option<PathBuf> = None;
    let mut n: u64 = 100_000_000;
    let mut threads: Vec<usize> = vec![1, 2];
    let mut repeat = 3;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--n" => n = args.next().and_then(|v| v.parse().ok()).expect("--n N"),
            "--threads" => {
                threads = args
                    .next()
                    .expect("--threads 1,2")
                    .split(',')
                    .map(|t| t.parse().expect("thread count"))
                    .collect();
            }
            "--repeat" => {
                repeat = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--repeat R")
            }
            p => path = Some(PathBuf::from(p)),
        }
    }
    let path = path.expect("usage: scan_bench DATASET [--n N] [--threads 1,2] [--repeat R]");
    let have = Dataset::open(&path).ok().filter(|d| d.shape() == [n]);
    if have.is_none() {
        let t0 = Instant::now();
        let opts = blz::CreateOptions {
            overwrite: true,
            expectedlen: Some(n),
            ..Default::default()
        };
        let mut ds = Dataset::create_with(&path, DType::F64, &[0], &opts)?;
        let block = 1 << 22;
        let mut x = 0.0f64;
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut done = 0;
        while done < n {
            let m = block.min(n - done) as usize;
            let v: Vec<f64> = (0..m)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    x += (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
                    x
                })
                .collect();
            ds.append(&Array1::from(v).into_dyn().view())?;
            done += m as u64;
        }
        let s = ds.sizes();
        println!(
            "created {} in {:.1} s: {} elements, {} files, {:.0} MB stored, ratio {:.2}",
            path.display(),
            t0.elapsed().as_secs_f64(),
            n,
            ds.nfiles(),
            s.cbytes as f64 / 1e6,
            s.nbytes as f64 / s.cbytes.max(1) as f64
        );
    }
    let ds = Dataset::open(&path)?;
    let bytes = ds.shape()[0] as f64 * 8.0;
    for &t in &threads {
        let opts = ScanOptions::with_threads(t);
        for r in 0..repeat {
            let t0 = Instant::now();
            let res = reduce(&ds, &opts, Reduction::Sum)?;
            let secs = t0.elapsed().as_secs_f64();
            println!(
                "{}  threads {t}  run {}  sum {:.6e}  {:.3} s  {:.2} GB/s",
                path.display(),
                r + 1,
                res.value.map_or(f64::NAN, |v| v.as_f64()),
                secs,
                bytes / secs / 1e9
            );
        }
    }
    Ok(())
}
