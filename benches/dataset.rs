//! Dataset benchmarks on a float64 random walk (lz4, clevel 5, shuffle, default chunking):
//! appending in batches, reading everything, one chunk, one element, and a strided slice.
//!
//! `cargo bench --bench dataset`; set `BLZ_BENCH_N` to change the size (default 2e7
//! elements, 160 MB).
#![expect(
    missing_docs,
    reason = "criterion_group! defines an undocumented function"
)]

#[path = "common/data.rs"]
mod data;

use blz::{CreateOptions, DType, Dataset};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, SamplingMode, Throughput};
use ndarray::{s, ArrayView1};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn n_elements() -> usize {
    std::env::var("BLZ_BENCH_N")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(20_000_000, |v| v as usize)
}

/// Elements per append call.
const BATCH: usize = 2_000_000;

fn append_all(path: &std::path::Path, data: &[f64]) -> Dataset {
    let opts = CreateOptions {
        overwrite: true,
        ..Default::default()
    };
    let mut ds = Dataset::create_with(path, DType::F64, &[0], &opts).expect("create");
    for batch in data.chunks(BATCH) {
        ds.append(&ArrayView1::from(batch).into_dyn())
            .expect("append");
    }
    ds
}

/// A tiny deterministic generator for the random positions.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }
}

fn benches(c: &mut Criterion) {
    let n = n_elements();
    let data = data::dataset("walk", n);
    let nbytes = (n * 8) as u64;
    let dir = tempfile::tempdir().expect("tempdir");

    // Flat sampling: every sample runs the same few iterations (the default linear mode would
    // run 1 + 2 + ... + 10 of these long ones).
    let mut g = c.benchmark_group("append");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(15))
        .throughput(Throughput::Bytes(nbytes));
    let path = dir.path().join("append.blz");
    g.bench_function(format!("walk_{n}_in_batches_of_{BATCH}"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let _ = std::fs::remove_dir_all(&path);
                let t = Instant::now();
                black_box(append_all(&path, &data));
                total += t.elapsed();
            }
            total
        });
    });
    g.finish();

    let path = dir.path().join("read.blz");
    let ds = append_all(&path, &data);
    let chunk = ds.chunkshape()[0];
    let nchunks = ds.nchunks();
    let mut g = c.benchmark_group("read");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Bytes(nbytes));
    g.bench_function("full", |b| {
        b.iter_batched(
            || (),
            |()| ds.read::<f64>().expect("read"),
            BatchSize::PerIteration,
        );
    });
    g.throughput(Throughput::Bytes(chunk * 8));
    let mut rng = Lcg(1);
    g.sampling_mode(SamplingMode::Auto)
        .sample_size(50)
        .measurement_time(Duration::from_secs(5));
    g.bench_function(format!("one_chunk_of_{chunk}"), |b| {
        b.iter_batched(
            || rng.below(nchunks) * chunk,
            |start| {
                let end = (start + chunk).min(n as u64);
                ds.slice::<f64, _>(s![start as isize..end as isize])
                    .expect("slice")
            },
            BatchSize::PerIteration,
        );
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("get_one_element", |b| {
        b.iter_batched(
            || rng.below(n as u64),
            |i| ds.get::<f64>(&[i]).expect("get"),
            BatchSize::SmallInput,
        );
    });
    let step = 100;
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Bytes(nbytes / step));
    g.bench_function(format!("strided_every_{step}th"), |b| {
        b.iter_batched(
            || (),
            |()| ds.slice::<f64, _>(s![..;step as isize]).expect("slice"),
            BatchSize::PerIteration,
        );
    });
    g.finish();
}

criterion_group!(dataset, benches);
criterion_main!(dataset);
