//! Tables: scanning one column of a 10-column table against scanning all ten (it should cost
//! about a tenth, since each column is stored apart), and reading variable-length strings.
//!
//! Run: `cargo bench --bench table`
#![expect(
    missing_docs,
    reason = "criterion_group! defines an undocumented function"
)]

use blz::table::{Field, Table, TableOptions, Values};
use blz::DType;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

const ROWS: usize = 2_000_000;

fn build(dir: &std::path::Path) -> Table {
    let fields: Vec<Field> = (0..10)
        .map(|i| Field::new(&format!("c{i}"), DType::F64))
        .collect();
    let mut t = Table::create(dir.join("t10"), fields, &TableOptions::default()).unwrap();
    let mut x = 0.0f64;
    let cols: Vec<Vec<f64>> = (0..10)
        .map(|c| {
            (0..ROWS)
                .map(|i| {
                    x += (((i * 2654435761 + c) % 1000) as f64 - 499.5) * 1e-3;
                    x
                })
                .collect()
        })
        .collect();
    let names: Vec<String> = (0..10).map(|i| format!("c{i}")).collect();
    let vals: Vec<(&str, Values)> = names
        .iter()
        .zip(&cols)
        .map(|(n, c)| (n.as_str(), Values::from_slice(c)))
        .collect();
    t.append(&vals).unwrap();
    t
}

fn scans(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let t = build(dir.path());
    let names: Vec<String> = (0..10).map(|i| format!("c{i}")).collect();
    let mut g = c.benchmark_group("table_scan");
    g.sample_size(10);
    g.throughput(Throughput::Bytes((ROWS * 8) as u64));
    g.bench_function("one_column_of_10", |b| {
        b.iter(|| black_box(t.column("c3").unwrap().len()))
    });
    g.throughput(Throughput::Bytes((ROWS * 80) as u64));
    g.bench_function("all_10_columns", |b| {
        b.iter(|| {
            let n: usize = names.iter().map(|n| t.column(n).unwrap().len()).sum();
            black_box(n)
        })
    });
    g.finish();

    let mut s = Table::create(
        dir.path().join("s"),
        vec![Field::varstr("s")],
        &TableOptions::default(),
    )
    .unwrap();
    let strings: Vec<String> = (0..1_000_000)
        .map(|i| format!("item-{i}-{}", "v".repeat(i % 40)))
        .collect();
    let raw: usize = strings.iter().map(String::len).sum();
    s.append(&[("s", Values::strings(&strings))]).unwrap();
    let mut g = c.benchmark_group("varstr");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(raw as u64));
    g.bench_function("read_1e6_strings", |b| {
        b.iter(|| black_box(s.column("s").unwrap().len()))
    });
    g.finish();
}

criterion_group!(benches, scans);
criterion_main!(benches);
