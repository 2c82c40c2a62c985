//! Short reads of a dataset: taken from the block that holds them (walked back through a
//! compressible stream's LZ4 matches), or from the handle's cache of decoded blocks when
//! reads land near each other. They must equal the elements written, with the cache on
//! and off, and no handle may serve a cached block after its chunk changed: not the
//! writing handle after its own commit, not a read handle after it refreshed.

use blz::{CreateOptions, DType, Dataset};
use ndarray::{s, Array1};

const N: usize = 3_000_000;

/// A float64 linspace: chunks of 1e6 elements in 1 MiB Blosc blocks whose byte streams
/// compress ~20:1.
fn linspace() -> Array1<f64> {
    Array1::from_shape_fn(N, |i| i as f64 / (N - 1) as f64)
}

/// Fixed pseudo-random places.
fn places(count: usize, seed: u64) -> Vec<usize> {
    let mut x = seed;
    (0..count)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) as usize % (N - 200)
        })
        .collect()
}

fn create(dir: &tempfile::TempDir, data: &Array1<f64>) -> std::path::PathBuf {
    let p = dir.path().join("a.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![1_000_000]),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&p, DType::F64, &[0], &opts).unwrap();
    ds.append(&data.view().into_dyn()).unwrap();
    p
}

/// Reads 100 elements at each place, then at two places beside it in the same block (the
/// second read of a block keeps it in the cache), each checked against `model`.
fn check(ds: &Dataset, model: &Array1<f64>, at: &[usize]) {
    for &p in at {
        for q in [p, p + 50, p + 1] {
            let got = ds
                .slice::<f64, _>(s![q as isize..q as isize + 100])
                .unwrap();
            assert_eq!(got, model.slice(s![q..q + 100]).into_dyn(), "at {q}");
        }
    }
}

#[test]
fn short_reads_are_the_elements_written_with_the_cache_on_and_off() {
    let dir = tempfile::tempdir().unwrap();
    let data = linspace();
    let p = create(&dir, &data);
    let ds = Dataset::open(&p).unwrap();
    assert_eq!(ds.block_cache_bytes(), 2 << 20);
    for bytes in [0, 2 << 20, 1 << 30] {
        ds.set_block_cache_bytes(bytes);
        let mut at = places(200, 7 + bytes as u64);
        // Block and chunk edges: 131,072 float64 to a 1 MiB block.
        at.extend([
            0,
            131_072 - 50,
            131_072 - 1,
            999_950,
            1_000_000 - 100,
            N - 200,
        ]);
        check(&ds, &data, &at);
        // Stepping through a block in short reads.
        let steps: Vec<usize> = (262_000..266_000).step_by(97).collect();
        check(&ds, &data, &steps);
    }
}

#[test]
fn no_handle_serves_a_cached_block_after_its_chunk_changed() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = linspace();
    let p = create(&dir, &model);
    let mut r = Dataset::open(&p).unwrap();
    let mut w = Dataset::open_rw(&p).unwrap();
    r.set_block_cache_bytes(64 << 20);
    w.set_block_cache_bytes(64 << 20);
    let at = places(15, 3);
    check(&r, &model, &at);
    check(&w, &model, &at);
    for round in 0..3 {
        for &q in &at {
            let v = Array1::from_shape_fn(100, |i| -(i as f64) - 1000.0 * round as f64 - q as f64);
            w.write_slice(s![q as isize..q as isize + 100], &v.view().into_dyn())
                .unwrap();
            model.slice_mut(s![q..q + 100]).assign(&v);
        }
        // The writing handle reads its own commits.
        check(&w, &model, &at);
        // A read handle that has not looked is told its view changed, never given old
        // blocks as new; once it refreshes, it reads the new elements.
        let q = at[0];
        match r.slice::<f64, _>(s![q as isize..q as isize + 100]) {
            Err(blz::Error::Changed { .. }) => {}
            other => panic!("a read across a commit gave {other:?}"),
        }
        assert!(r.refresh().unwrap());
        assert_eq!(r.block_cache_bytes(), 64 << 20, "kept across the refresh");
        check(&r, &model, &at);
    }
}

/// Two writing handles of one process share the writer: blocks one handle cached are never
/// served after the other handle rewrote their chunk (its read fails with `Changed` until it
/// catches up; a refresh or a write of its own does that), and a catch-up keeps the handle's
/// cache bound.
#[test]
fn a_handle_does_not_serve_blocks_another_handle_rewrote() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = linspace();
    let p = create(&dir, &model);
    let mut a = Dataset::open_rw(&p).unwrap();
    let mut b = Dataset::open_rw(&p).unwrap();
    b.set_block_cache_bytes(8 << 20);
    let at = places(20, 7);
    check(&b, &model, &at);
    let new = Array1::from_shape_fn(150, |i| -(i as f64));
    for &q in &at[..5] {
        a.write_slice(s![q as isize..q as isize + 150], &new.view().into_dyn())
            .unwrap();
        model.slice_mut(s![q..q + 150]).assign(&new);
    }
    let err = b.slice::<f64, _>(s![at[0] as isize..at[0] as isize + 100]);
    assert!(matches!(err, Err(blz::Error::Changed { .. })), "{err:?}");
    assert!(b.refresh().unwrap());
    assert_eq!(b.block_cache_bytes(), 8 << 20);
    check(&b, &model, &at);
    // Now b writes (no refresh needed for a write) and a, behind, catches up on its write.
    b.write_slice(
        s![at[6] as isize..at[6] as isize + 150],
        &new.view().into_dyn(),
    )
    .unwrap();
    model.slice_mut(s![at[6]..at[6] + 150]).assign(&new);
    check(&b, &model, &at);
    a.append(&new.view().into_dyn()).unwrap();
    assert!(a.refresh().is_ok());
    check(&a, &model, &at);
    assert!(b.refresh().unwrap());
    assert_eq!(b.block_cache_bytes(), 8 << 20);
    check(&b, &model, &at);
}
