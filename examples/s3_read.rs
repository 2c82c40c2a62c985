//! Times a whole read of a float64 dataset on an S3 server, best of three, and counts the
//! requests of one (`spec/object-store.md` §4): the data and layout of
//! `benches/compare_s3.py` (chunks of 1e6 elements, Blosc lz4 clevel 5 with byte shuffle,
//! superchunk files of the default size), for measuring the read path without building the
//! Python package.
//!
//! ```text
//! # INPUT: raw native-endian float64 (compare_s3.py's random walk, saved with tofile)
//! bash tests/s3/run.sh cargo run --release --features s3 --example s3_read -- INPUT
//! ```
//!
//! Prints, for a whole read and for the same read chunk by chunk (one GET per chunk, 16 at
//! once, as blz read many chunks before it fetched them together): the best time of three,
//! GB/s and the requests of one.

use blz::meta::{Compression, FilterName};
use blz::storage::{ObjectStorage, Storage};
use blz::{CreateOptions, DType, Dataset, Mode};
use blz_format::blosc::Codec;
use ndarray::ArrayView1;
use std::sync::Arc;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let input = std::env::args().nth(1).ok_or("usage: s3_read INPUT")?;
    let raw = std::fs::read(&input)?;
    let data: Vec<f64> = raw
        .chunks_exact(8)
        .map(|b| f64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))
        .collect();
    let bucket = std::env::var("BLZ_S3_TEST_BUCKET")
        .map_err(|_| "BLZ_S3_TEST_BUCKET is unset (tests/s3/run.sh sets it)")?;
    let url = format!("s3://{bucket}/bench-{}/x.blz", std::process::id());
    let s = Arc::new(ObjectStorage::open_url(&url)?);
    let root = s.root().to_path_buf();
    let opts = CreateOptions {
        chunkshape: Some(vec![1_000_000]),
        compression: Compression {
            codec: Codec::Lz4,
            clevel: 5,
            filters: vec![FilterName::Shuffle],
            mantissa_bits: None,
            blocksize: 0,
        },
        ..Default::default()
    };
    let mut ds = Dataset::create_in(s as Arc<dyn Storage>, &root, DType::F64, &[0], &opts)?;
    ds.append(&ArrayView1::from(&data[..]).into_dyn())?;
    drop(ds);
    let mut best = f64::INFINITY;
    let mut gets = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let s = Arc::new(ObjectStorage::open_url(&url)?);
        let ds = Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly)?;
        let got = ds.read::<f64>()?;
        best = best.min(t.elapsed().as_secs_f64());
        gets = s.requests();
        if got.as_slice() != Some(&data[..]) {
            return Err("the read differs from the data".into());
        }
    }
    // The same read chunk by chunk, 16 at once: one ranged GET per chunk, as every read
    // of many chunks made before they were fetched together.
    let chunk = 1_000_000usize;
    let mut best_each = f64::INFINITY;
    let mut gets_each = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let s = Arc::new(ObjectStorage::open_url(&url)?);
        let ds = Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly)?;
        let pool = rayon::ThreadPoolBuilder::new().num_threads(16).build()?;
        let parts: Vec<Vec<f64>> = pool.install(|| {
            use rayon::prelude::*;
            (0..data.len().div_ceil(chunk))
                .into_par_iter()
                .map(|k| {
                    let end = ((k + 1) * chunk).min(data.len());
                    let sel = blz::Selection::parse(&format!("{}:{end}", k * chunk))?;
                    Ok(ds.read_selection::<f64>(&sel)?.into_iter().collect())
                })
                .collect::<blz::Result<_>>()
        })?;
        best_each = best_each.min(t.elapsed().as_secs_f64());
        gets_each = s.requests();
        if parts.concat() != data {
            return Err("the read differs from the data".into());
        }
    }
    let mb = data.len() as f64 * 8.0 / 1e6;
    for (what, t, n) in [
        ("whole read", best, gets),
        ("chunk by chunk", best_each, gets_each),
    ] {
        println!(
            "{what:>14}: {} float64 ({mb:.0} MB) in {t:.3} s, {:.3} GB/s, {n} requests (open \
             + read)",
            data.len(),
            mb / 1e3 / t
        );
    }
    Ok(())
}
