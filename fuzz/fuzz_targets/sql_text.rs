//! Arbitrary text as a SQL query over a small table and a small layer dataset: `blz::sql`
//! must answer or refuse it with an error, never crash (a stack overflow, an abort, a panic
//! that reaches the caller), and never write a file: the target runs in an empty directory
//! of its own, which must stay empty, beside the datasets it queries, which must read back
//! as they were written.
//!
//! The engine's own panics, which blz turns into errors, are not findings: the target
//! keeps Rust's default panic hook rather than libFuzzer's, which would abort on them. A
//! panic that reaches the target is re-raised as an abort.
//!
//! Queries that only ask for much work (`generate_series`, `range`, `repeat` and the like,
//! with huge arguments) are skipped: the engine runs them as asked, and a time or memory
//! limit is not what this target looks for.

#![no_main]

#[path = "../common/mod.rs"]
mod common;

use blz::layer::{ColumnDef, LayerSchema, LayerWriter, LeafKind, Value};
use blz::sql::SqlContext;
use blz::table::{Field, Table, TableOptions, Values};
use blz::DType;
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The functions whose work grows with a number in the query, not with the data.
const HEAVY: [&str; 12] = [
    "generate_series",
    "range",
    "repeat",
    "lpad",
    "rpad",
    "array_repeat",
    "unnest",
    "make_array",
    "array_resize",
    "overlay",
    "to_char",
    "string_to_array",
];

/// Starting inputs: queries of each kind the engine takes and refuses, over `t` and `l`.
const SEEDS: [&str; 16] = [
    "SELECT k, x, u, s FROM t WHERE k > 0 AND x < 3.5 ORDER BY u DESC LIMIT 5",
    "SELECT s, count(*), min(x), max(x), sum(k) FROM t GROUP BY s",
    "SELECT a, b FROM l WHERE a = 0 OR a BETWEEN -1 AND 1.5",
    "SELECT * FROM l WHERE a >= -0.0 AND b IN (1, 2, 21)",
    "WITH w AS (SELECT k FROM t WHERE u > 18446744073709551600) SELECT count(*) FROM w",
    "SELECT t.k, l.b FROM t JOIN l ON t.k = l.b",
    "SELECT CAST(s AS INT) FROM t",
    "SELECT k + k * k - k / (k - 3) FROM t WHERE NOT (x IS NULL) AND x <> x",
    "EXPLAIN SELECT count(*) FROM t WHERE k = 3",
    "VALUES (1, 'a'), (2, NULL)",
    "DESCRIBE t",
    "COPY (SELECT 1) TO 'x.csv' STORED AS CSV",
    "CREATE EXTERNAL TABLE e (a INT) STORED AS CSV LOCATION 'x.csv'",
    "SELECT * INTO z FROM t",
    "SELECT * FROM \"t.blz\"",
    "SELECT substr(s, 2), upper(s), s LIKE 's1%' FROM t",
];

/// At most this many rows are read of an answer.
const ROWS: usize = 100_000;

struct World {
    ctx: SqlContext,
    empty: PathBuf,
    table: PathBuf,
    rows: usize,
    _dir: tempfile::TempDir,
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        // libFuzzer's hook aborts on any panic, even one the engine turns into an error.
        let _ = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("t.blz");
        let fields = vec![
            Field::new("k", DType::I64),
            Field::new("x", DType::F64),
            Field::new("u", DType::U64),
            Field::varstr("s"),
        ];
        let mut t = Table::create(&table, fields, &TableOptions::default()).unwrap();
        let n = 50usize;
        let k: Vec<i64> = (0..n as i64).map(|i| i * 3 - 60).collect();
        let x: Vec<f64> = (0..n)
            .map(|i| match i % 7 {
                0 => f64::NAN,
                1 => -0.0,
                2 => f64::INFINITY,
                _ => i as f64 / 4.0,
            })
            .collect();
        let u: Vec<u64> = (0..n as u64).map(|i| u64::MAX - i).collect();
        let s: Vec<String> = (0..n).map(|i| format!("s{}\u{0}é", i % 5)).collect();
        t.append(&[
            ("k", Values::from_slice(&k)),
            ("x", Values::from_slice(&x)),
            ("u", Values::from_slice(&u)),
            ("s", Values::strings(&s)),
        ])
        .unwrap();
        drop(t);
        let layer = dir.path().join("l.blz");
        let schema = LayerSchema::new(vec![
            ColumnDef::new("a", LeafKind::Fixed(DType::F64)),
            ColumnDef::new("b", LeafKind::Fixed(DType::I64)),
        ]);
        let mut w = LayerWriter::create(&layer, schema).unwrap();
        for (i, a) in [-0.0f64, 0.0, 1.5, f64::INFINITY, f64::NAN]
            .iter()
            .enumerate()
        {
            for b in 0..3i64 {
                w.push(&[Value::Float(*a), Value::Int(b * 10 + i as i64)], None)
                    .unwrap();
            }
        }
        w.finish().unwrap();
        let empty = dir.path().join("cwd");
        std::fs::create_dir(&empty).unwrap();
        std::env::set_current_dir(&empty).unwrap();
        let ctx = SqlContext::new().unwrap();
        ctx.register_path("t", table.to_str().unwrap()).unwrap();
        ctx.register_path("l", layer.to_str().unwrap()).unwrap();
        World {
            ctx,
            empty,
            table,
            rows: n,
            _dir: dir,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    common::write_seeds(|| {
        SEEDS
            .iter()
            .enumerate()
            .map(|(i, q)| (format!("seed-{i}"), q.as_bytes().to_vec()))
            .collect()
    });
    let Ok(sql) = std::str::from_utf8(data) else {
        return;
    };
    let lower = sql.to_ascii_lowercase();
    if HEAVY.iter().any(|f| lower.contains(f)) {
        return;
    }
    let w = world();
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Ok(result) = w.ctx.query(sql) {
            let mut seen = 0;
            for batch in result {
                match batch {
                    Ok(b) => seen += b.num_rows(),
                    Err(_) => break,
                }
                if seen > ROWS {
                    break;
                }
            }
        }
    }));
    if ran.is_err() {
        // A panic that blz let through to its caller.
        std::process::abort();
    }
    let left: Vec<_> = std::fs::read_dir(&w.empty).unwrap().collect();
    assert!(left.is_empty(), "the query {sql:?} wrote {left:?}");
    let t = Table::open(&w.table).unwrap();
    assert_eq!(
        t.nrows() as usize,
        w.rows,
        "the query {sql:?} changed the table"
    );
});
