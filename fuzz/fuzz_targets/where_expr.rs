//! Arbitrary text as a `where` expression over a small table, whose columns'
//! dtypes, values and chunk length come from the input: the query must return rows or an
//! error, never crash (a deep or long expression is refused, not a stack overflow); rows it
//! returns must be those a row-at-a-time reference (`tests/where_ref/`) finds, so a chunk
//! that the statistics skip (or take whole) wrongly is a finding.
//!
//! Input: byte 0 and 1 pick the dtypes of columns `a` and `b` (int8 .. uint64, float32,
//! float64), byte 2 the chunk length (1 to 8) and the number of rows (0 to 15); then each row
//! takes 8 bytes of `a`, 8 of `b` (each cut to its dtype's width) and one of bool `d`; the
//! rest is the expression.

#![no_main]

#[path = "../common/mod.rs"]
mod common;
#[path = "../../tests/where_ref/mod.rs"]
mod where_ref;

use blz::table::{ColumnOptions, Field, Table, TableOptions, Values};
use blz::DType;
use libfuzzer_sys::fuzz_target;
use where_ref::Col;

const DTYPES: [DType; 10] = [
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::F32,
    DType::F64,
];

const NAMES: [&str; 3] = ["a", "b", "d"];

fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let exprs = [
        "-a < 0",
        "(a == 9007199254740993) | (b > -1)",
        "(a * 3 + b >= 5) & ~d",
        "(a - b != 0) | (b % 2 == 1)",
        "a / b < 1.5",
        "-(-a) == a",
        "(a > 18446744073709551615) | (b <= -9223372036854775808)",
        "(a + b < nan) | (a != nan)",
    ];
    for (k, e) in exprs.iter().enumerate() {
        let mut b = vec![k as u8 % 10, (k as u8 * 3 + 3) % 10, 0x84];
        for r in 0..8u64 {
            let a = if r < 4 { i64::MIN as u64 } else { 5 };
            b.extend(a.to_le_bytes());
            b.extend((r.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes());
            b.push(r as u8 & 1);
        }
        b.extend(e.as_bytes());
        out.push((format!("where_{k}"), b));
    }
    out
}

/// `raw` (8 bytes) cut to `dtype`'s width, native order.
fn cut(dtype: DType, raw: &[u8]) -> Vec<u8> {
    let v = u64::from_le_bytes(raw.try_into().unwrap());
    match dtype.itemsize() {
        1 => vec![v as u8],
        2 => (v as u16).to_ne_bytes().to_vec(),
        4 => (v as u32).to_ne_bytes().to_vec(),
        _ => v.to_ne_bytes().to_vec(),
    }
}

fuzz_target!(|data: &[u8]| {
    common::write_seeds(seeds);
    if data.len() < 3 {
        return;
    }
    let (da, db) = (DTYPES[data[0] as usize % 10], DTYPES[data[1] as usize % 10]);
    let chunklen = u64::from(data[2] & 7) + 1;
    let n = usize::from(data[2] >> 4);
    let body = &data[3..];
    if body.len() < n * 17 {
        return;
    }
    let (rows, text) = body.split_at(n * 17);
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let (mut a, mut b, mut d) = (Vec::new(), Vec::new(), Vec::new());
    for r in rows.chunks_exact(17) {
        a.extend(cut(da, &r[..8]));
        b.extend(cut(db, &r[8..16]));
        d.push(r[16] & 1 == 1);
    }

    // In a temporary directory: `Table::create` builds the table aside and renames it in
    // place, which the in-memory storage of `fuzz/common` does not do for directories.
    let dir = tempfile::tempdir().unwrap();
    let opts = TableOptions {
        defaults: ColumnOptions {
            chunklen: Some(chunklen),
            superchunksize: Some(2),
            ..Default::default()
        },
        ..Default::default()
    };
    let fields = vec![
        Field::new("a", da),
        Field::new("b", db),
        Field::new("d", DType::Bool),
    ];
    let mut t = Table::create(dir.path().join("t"), fields, &opts).unwrap();
    t.append(&[
        (
            "a",
            Values::Fixed {
                dtype: da,
                data: a.clone(),
            },
        ),
        (
            "b",
            Values::Fixed {
                dtype: db,
                data: b.clone(),
            },
        ),
        ("d", Values::from_slice(&d)),
    ])
    .unwrap();

    let got = t.where_rows(text, &[]);
    let Ok(expr) = blz::query::parse(text, &NAMES) else {
        assert!(got.is_err(), "{text:?}: blz parsed what it refuses");
        return;
    };
    // Every walk of what parsed: it is bounded in depth.
    let _ = expr.to_string();
    let _ = expr.columns();
    let Ok(got) = got else { return };
    let cols = [
        ("a", Col::from_bytes(da, &a)),
        ("b", Col::from_bytes(db, &b)),
        ("d", Col::Bool(d)),
    ];
    if let Some(want) = where_ref::rows(&expr, &cols, n) {
        assert_eq!(
            got.rows, want,
            "{text:?} over a {da:?} {:?}, b {db:?} {:?}, chunks of {chunklen}",
            cols[0].1, cols[1].1
        );
    }
});
