//! The benchmark data sets, shared by `benches/dataset.rs` and `examples/bench_io.rs`, and
//! reproduced bit for bit by `benches/compare.py` (numpy, vectorised uint64 arithmetic).

/// SplitMix64 output number `i` from a fixed seed.
pub fn splitmix(i: u64) -> u64 {
    let mut z = 0x1234_5678_9abc_def0u64.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fills `out` with elements `start..start + out.len()` of the data set `kind` of `total`
/// elements: `walk` (a random walk of uniform steps in [-0.5, 0.5), continued from `*acc`)
/// or `linspace` (`total` evenly spaced values from 0 to 1).
///
/// # Panics
/// For an unknown `kind`.
pub fn generate(kind: &str, start: usize, total: usize, acc: &mut f64, out: &mut [f64]) {
    match kind {
        "walk" => {
            for (i, x) in out.iter_mut().enumerate() {
                let u = (splitmix((start + i) as u64) >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
                *acc += u - 0.5;
                *x = *acc;
            }
        }
        "linspace" => {
            let step = 1.0 / (total.max(2) - 1) as f64;
            for (i, x) in out.iter_mut().enumerate() {
                *x = (start + i) as f64 * step;
            }
        }
        other => panic!("unknown data set {other:?} (walk or linspace)"),
    }
}

/// The whole data set `kind` of `n` elements.
#[allow(dead_code, reason = "not every bench uses every data set")]
pub fn dataset(kind: &str, n: usize) -> Vec<f64> {
    let mut v = vec![0.0; n];
    generate(kind, 0, n, &mut 0.0, &mut v);
    v
}
