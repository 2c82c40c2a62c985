//! Layer datasets: seek latency and chunk reads at 1e3, 1e5 and 1e7 rows (cold and warm
//! index cache), negative membership answered from the filter alone, and write throughput.
//!
//! `cargo bench --bench layer`. Figures are recorded in `benches/README.md`.
#![expect(
    missing_docs,
    reason = "criterion_group! defines an undocumented function"
)]

use blz::layer::{ColumnDef, FilterKind, Layer, LayerSchema, LayerWriter, LeafKind, Value};
use blz::DType;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::path::Path;
use std::time::{Duration, Instant};

/// Key of row `i`: even, strictly increasing, with some irregularity (odd values are absent).
/// The SplitMix64 finalizer: scrambles row numbers into well-spread keys and probes.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn key(i: u64) -> i64 {
    (2 * (3 * i + mix(i) % 3)) as i64
}

fn build(path: &Path, n: u64) -> (Duration, u64) {
    // Bloom filters: these keys (one in six) would get exact filters by default, which
    // `examples/layer_exact.rs` measures.
    let schema = LayerSchema::new(vec![
        ColumnDef::new("k", LeafKind::Fixed(DType::I64)).with_filter_kind(FilterKind::Bloom)
    ])
    .with_weight("w", DType::I64);
    let t = Instant::now();
    let mut w = LayerWriter::create(path, schema).unwrap();
    for i in 0..n {
        w.push(
            &[Value::Int(key(i))],
            Some(Value::Int(mix(i ^ 0xabc) as i64)),
        )
        .unwrap();
    }
    let sizes = w.finish().unwrap();
    (t.elapsed(), sizes.columns[0].cbytes)
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut report = Vec::new();
    let mut layers = Vec::new();
    for (label, n) in [("1e3", 1_000u64), ("1e5", 100_000), ("1e7", 10_000_000)] {
        let path = dir.path().join(format!("l{label}.blz"));
        let (t, cbytes) = build(&path, n);
        let raw = n * 16;
        report.push(format!(
            "write {label}: {:.2} s, {:.2} M rows/s, {:.0} MB/s of keys+weights ({:.0} MB/s stored), {} stored bytes",
            t.as_secs_f64(),
            n as f64 / t.as_secs_f64() / 1e6,
            raw as f64 / t.as_secs_f64() / 1e6,
            cbytes as f64 / t.as_secs_f64() / 1e6,
            cbytes
        ));
        let layer = Layer::open(&path).unwrap();
        // Chunk reads per seek with a cold index cache.
        let probes = 1000u64;
        let mut idx = 0;
        let mut data = 0;
        for p in 0..probes {
            layer.clear_cache();
            layer.reset_stats();
            let mut cur = layer.cursor();
            cur.seek_ge(&Value::Int(key(mix(p) % n))).unwrap();
            cur.value().unwrap();
            let s = layer.stats();
            idx += s.index_chunks;
            data += s.data_chunks;
        }
        // Negative membership: absent values (odd) inside the key range.
        let mut maybe = 0u64;
        let neg = 200_000u64;
        layer.clear_cache();
        layer.reset_stats();
        for p in 0..neg {
            if layer
                .may_contain(&Value::Int(key(mix(p ^ 77) % n) + 1))
                .unwrap()
            {
                maybe += 1;
            }
        }
        let s = layer.stats();
        report.push(format!(
            "seek {label}: {} index levels; per cold seek {:.2} index + {:.2} data chunk reads; \
             {neg} negative queries: {} data chunk reads, {} filter chunk reads, measured fpr {:.1e} (predicted {:.1e})",
            layer.index_levels(0),
            idx as f64 / probes as f64,
            data as f64 / probes as f64,
            s.data_chunks,
            s.filter_chunks,
            maybe as f64 / neg as f64,
            layer.storage_meta().columns[0].filter.map_or(0.0, |f| f.predicted_fpr),
        ));
        layers.push((label, n, layer));
    }

    let mut g = c.benchmark_group("layer_seek_cold");
    for (label, n, layer) in &layers {
        let mut p = 0u64;
        g.bench_function(BenchmarkId::from_parameter(label), |b| {
            b.iter(|| {
                p += 1;
                layer.clear_cache();
                let mut cur = layer.cursor();
                cur.seek_ge(&Value::Int(key(mix(p) % n))).unwrap();
                cur.value().unwrap()
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("layer_seek_warm");
    for (label, n, layer) in &layers {
        let mut p = 0u64;
        g.bench_function(BenchmarkId::from_parameter(label), |b| {
            b.iter(|| {
                p += 1;
                let mut cur = layer.cursor();
                cur.seek_ge(&Value::Int(key(mix(p) % n))).unwrap();
                cur.value().unwrap()
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("layer_absent_warm");
    for (label, n, layer) in &layers {
        let mut p = 0u64;
        g.bench_function(BenchmarkId::from_parameter(label), |b| {
            b.iter(|| {
                p += 1;
                layer.may_contain(&Value::Int(key(mix(p) % n) + 1)).unwrap()
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("layer_write");
    g.throughput(Throughput::Elements(100_000));
    g.bench_function("1e5", |b| {
        let mut k = 0;
        b.iter(|| {
            k += 1;
            let p = dir.path().join(format!("w{k}.blz"));
            build(&p, 100_000);
            std::fs::remove_dir_all(&p).unwrap();
        })
    });
    g.finish();
    for r in report {
        println!("{r}");
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
