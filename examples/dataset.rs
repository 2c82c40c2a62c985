//! A tour of the dataset API: create, append, slice, modify, grow and shrink, attributes,
//! reopen, verify.
//!
//! Run: `cargo run --release --example dataset -- /tmp/walk.blz`

use blz::meta::{Compression, FilterName};
use blz::{CreateOptions, DType, Dataset};
use ndarray::{s, Array1, Array2};

fn main() -> blz::Result<()> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "walk.blz".into());

    // A 2-d float64 dataset of 3 series, growing along axis 0; lz4 with byte shuffle, and
    // the lossy `truncate` filter keeping 20 mantissa bits (about 6 significant digits).
    let opts = CreateOptions {
        compression: Compression {
            filters: vec![FilterName::Truncate, FilterName::Shuffle],
            mantissa_bits: Some(20),
            ..Default::default()
        },
        expectedlen: Some(3_000_000),
        overwrite: true,
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&path, DType::F64, &[0, 3], &opts)?;
    ds.set_attr("units", serde_json::json!("metres"))?;

    // Append a random walk in batches: memory stays at one batch plus a few chunks.
    let mut x = [0.0f64; 3];
    let mut seed = 42u64;
    for _ in 0..10 {
        let batch = Array2::from_shape_fn((300_000, 3), |(_, j)| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x[j] += ((seed >> 11) as f64 / (1u64 << 53) as f64) - 0.5;
            x[j]
        });
        ds.append(&batch.into_dyn().view())?;
    }
    let sizes = ds.sizes();
    println!(
        "{path}: shape {:?}, chunkshape {:?}, {} files, {} -> {} bytes ({:.2}x)",
        ds.shape(),
        ds.chunkshape(),
        ds.nfiles(),
        sizes.nbytes,
        sizes.cbytes,
        sizes.nbytes as f64 / sizes.cbytes as f64
    );

    // Slices decode only the chunks they touch.
    let every_100k = ds.slice::<f64, _>(s![..;100_000, 0])?;
    println!("series 0 every 100000 rows: {every_100k:.3}");
    let last_rows = ds.slice::<f64, _>(s![-3.., ..])?;
    println!("last rows:\n{last_rows:.3}");

    // Modify a region, grow with the fill value, shrink.
    ds.write_slice(s![10..20, 1], &Array1::from_elem(10, 0.0).into_dyn().view())?;
    ds.resize(3_100_000)?;
    println!(
        "row 3_050_000 after growing: {}",
        ds.slice::<f64, _>(s![3_050_000, ..])?
    );
    ds.resize(2_000_000)?;
    drop(ds);

    // Reopen read-only and check every chunk's digest.
    let ds = Dataset::open(&path)?;
    let problems = ds.verify(|_, _| {});
    println!(
        "reopened: shape {:?}, attrs {}, verify: {}",
        ds.shape(),
        serde_json::Value::Object(ds.attrs()?),
        if problems.is_empty() {
            "ok".to_string()
        } else {
            format!("{} problems", problems.len())
        }
    );
    Ok(())
}
