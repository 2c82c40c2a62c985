//! Exact (Roaring) against Bloom filters on one million dense integer keys: the stored
//! filter bytes, the dataset's size, and the time of `contains` for present and absent keys
//! (warm caches), as `spec/layer.md` ("Exact filters") describes.
//!
//! `cargo run --release --example layer_exact` (figures in `benches/README.md`).

use blz::layer::{ColumnDef, FilterKind, Layer, LayerSchema, LayerWriter, LeafKind, Value};
use blz::DType;
use std::path::Path;
use std::time::Instant;

/// The SplitMix64 finalizer: well-spread probes.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn build(path: &Path, kind: FilterKind, keys: impl Iterator<Item = i64>) -> blz::Result<Layer> {
    let schema = LayerSchema::new(vec![
        ColumnDef::new("k", LeafKind::Fixed(DType::I64)).with_filter_kind(kind)
    ]);
    let mut w = LayerWriter::create(path, schema)?;
    for k in keys {
        w.push(&[Value::Int(k)], None)?;
    }
    w.finish()?;
    Layer::open(path)
}

/// Mean nanoseconds per `contains` over `n` probes `probe(i)`, after one warming pass.
fn time(layer: &Layer, n: u64, probe: impl Fn(u64) -> i64, want: bool) -> blz::Result<f64> {
    for i in 0..n {
        assert_eq!(layer.contains(&Value::Int(probe(i)))?, want);
    }
    let t = Instant::now();
    for i in 0..n {
        assert_eq!(layer.contains(&Value::Int(probe(i)))?, want);
    }
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("blz-layer-exact-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let n = 1_000_000u64;
    let probes = 200_000u64;
    for (label, step) in [("consecutive 0..1e6", 1i64), ("even 0..2e6", 2)] {
        for kind in [FilterKind::Auto, FilterKind::Bloom] {
            let path = dir.join(format!("{step}-{}.blz", kind.name()));
            let t = Instant::now();
            let layer = build(&path, kind, (0..n as i64).map(|i| i * step))?;
            let built = t.elapsed().as_secs_f64();
            let info = layer.info();
            let c = &info["columns"][0];
            let f = &c["filter"];
            let present = time(&layer, probes, |i| (mix(i) % n) as i64 * step, true)?;
            layer.reset_stats();
            let absent = if step == 2 {
                let ns = time(&layer, probes, |i| (mix(i) % n) as i64 * 2 + 1, false)?;
                format!("{ns:.0} ns")
            } else {
                "-".into()
            };
            let reads = layer.stats();
            println!(
                "{label}, {}: {} filter chunks ({} exact), filter {} bytes, dataset {} bytes stored; \
                 build {built:.2} s; contains present {present:.0} ns, absent {absent} \
                 (absent pass: {} data chunk reads)",
                kind.name(),
                f["chunks"],
                f["exact_chunks"],
                f["bytes"],
                c["cbytes"],
                reads.data_chunks,
            );
        }
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
