//! Appending a dataset much larger than one batch keeps memory at about one batch and a few
//! chunks: the peak resident size (`VmHWM`) grows by less than three batches over ten
//! appends. This file holds a single test so that nothing else runs in the process.

use blz::{CreateOptions, DType, Dataset};
use ndarray::ArrayView1;

/// Peak resident memory of this process so far, in bytes.
fn vm_hwm() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = s
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kb * 1024)
}

fn fill(batch: &mut [f64], b: usize, acc: &mut f64) {
    let start = b * batch.len();
    for (i, x) in batch.iter_mut().enumerate() {
        // A walk with irregular steps: compresses about as badly as real measurements.
        let h = ((start + i) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
        *acc += h as f64 / (1u64 << 24) as f64 - 0.5;
        *x = *acc;
    }
}

#[test]
fn append_memory_is_bounded_by_the_batch() {
    let Some(_) = vm_hwm() else {
        eprintln!("no /proc/self/status: skipped");
        return;
    };
    const BATCH: usize = 5_000_000; // 40 MB
    const BATCHES: usize = 10;
    let dir = tempfile::tempdir().unwrap();
    let opts = CreateOptions {
        chunkshape: Some(vec![1_000_000]),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(dir.path().join("m.blz"), DType::F64, &[0], &opts).unwrap();
    let mut batch = vec![0.0f64; BATCH];
    let mut acc = 0.0;
    fill(&mut batch, 0, &mut acc);
    let before = vm_hwm().unwrap();
    for b in 0..BATCHES {
        if b > 0 {
            fill(&mut batch, b, &mut acc);
        }
        ds.append(&ArrayView1::from(&batch[..]).into_dyn()).unwrap();
    }
    let growth = vm_hwm().unwrap().saturating_sub(before);
    let batch_bytes = (BATCH * 8) as u64;
    assert_eq!(ds.shape(), &[(BATCH * BATCHES) as u64]);
    assert!(
        growth < 3 * batch_bytes,
        "peak memory grew by {growth} bytes appending {BATCHES} batches of {batch_bytes} bytes"
    );
    eprintln!(
        "peak memory grew by {:.1} MB appending {BATCHES} x {:.0} MB",
        growth as f64 / 1e6,
        batch_bytes as f64 / 1e6
    );
}
