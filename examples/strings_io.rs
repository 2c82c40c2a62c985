//! Times writing and reading variable-length strings in a blz table, for
//! `benches/compare_strings.py`: reads one string per line from INPUT, writes them as a
//! `varstr` column at OUT (one append), reads the column back, and prints JSON with the
//! timings and sizes.
//!
//! Run: `cargo run --release --example strings_io -- INPUT OUT`

use blz::table::{Field, Table, TableOptions, Values};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (input, out) = match (args.next(), args.next()) {
        (Some(i), Some(o)) => (i, o),
        _ => return Err("usage: strings_io INPUT OUT".into()),
    };
    let text = std::fs::read_to_string(&input)?;
    let strings: Vec<&str> = text.lines().collect();
    let raw: usize = strings.iter().map(|s| s.len()).sum();
    let values = Values::strings(&strings);
    let opts = TableOptions {
        overwrite: true,
        ..Default::default()
    };
    let t0 = Instant::now();
    let mut t = Table::create(&out, vec![Field::varstr("s")], &opts)?;
    t.append(&[("s", values)])?;
    let write_s = t0.elapsed().as_secs_f64();
    drop(t);
    let t1 = Instant::now();
    let t = Table::open(&out)?;
    let back = t.column("s")?;
    let read_s = t1.elapsed().as_secs_f64();
    if back.len() != strings.len() {
        return Err("read back a different number of strings".into());
    }
    let cbytes = t.sizes().cbytes;
    println!(
        "{}",
        serde_json::json!({"n": strings.len(), "raw_bytes": raw, "cbytes": cbytes, "write_s": write_s, "read_s": read_s})
    );
    Ok(())
}
