//! A tour of tables: nested fields stored column-wise, variable-length strings, reading one
//! column, appending atomically, schema changes.
//!
//! Run: `cargo run --release --example table -- /tmp/trips.blz`

use blz::table::{Field, Table, TableOptions, Values};
use blz::DType;

fn main() -> blz::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "trips.blz".into());
    let opts = TableOptions {
        overwrite: true,
        ..Default::default()
    };
    let mut t = Table::create(
        &path,
        vec![
            Field::new("id", DType::U32),
            Field::varstr("city"),
            Field::structure(
                "start",
                vec![Field::new("lat", DType::F64), Field::new("lon", DType::F64)],
            ),
            Field::new("minutes", DType::F32),
        ],
        &opts,
    )?;
    let cities = ["Valencia", "Oslo", "Kyoto", "São Paulo", "Nairobi"];
    for batch in 0..20u32 {
        let n = 50_000u32;
        let ids: Vec<u32> = (batch * n..(batch + 1) * n).collect();
        let city: Vec<&str> = ids
            .iter()
            .map(|i| cities[(*i as usize * 7) % cities.len()])
            .collect();
        let lat: Vec<f64> = ids
            .iter()
            .map(|&i| 40.0 + f64::from(i % 1000) * 1e-3)
            .collect();
        let lon: Vec<f64> = ids
            .iter()
            .map(|&i| -0.3 - f64::from(i % 777) * 1e-3)
            .collect();
        let minutes: Vec<f32> = ids.iter().map(|&i| (i % 90) as f32 + 0.5).collect();
        // One append writes every column and commits them together.
        t.append(&[
            ("id", Values::from_slice(&ids)),
            ("city", Values::strings(&city)),
            ("start/lat", Values::from_slice(&lat)),
            ("start/lon", Values::from_slice(&lon)),
            ("minutes", Values::from_slice(&minutes)),
        ])?;
    }
    println!("{path}: {} rows, columns {:?}", t.nrows(), t.column_names());
    for (name, s) in t.sizes().columns.iter().flatten() {
        println!("  {name:10} {:>10} -> {:>9} bytes", s.nbytes, s.cbytes);
    }
    // Reading one column opens only that column's files.
    let minutes = t.column_array::<f32>("minutes")?;
    println!("mean trip: {:.2} minutes", minutes.mean().unwrap_or(0.0));
    let some = t.take(&[3, 999_999, 12], Some(&["id", "city"]))?;
    println!(
        "rows 3, 999999, 12: ids {:?} cities {:?}",
        some[0].1.to_vec::<u32>()?,
        some[1].1.to_strings()?
    );
    t.add_column(Field::new("rating", DType::U8))?;
    t.rename_column("start/lat", "latitude")?;
    t.drop_column("minutes")?;
    println!("after schema changes: {:?}", t.column_names());
    Ok(())
}
