//! SQL over dictionary-encoded string columns (`spec/table.md` §3.6, feature `sql`): `=`,
//! `IN`, `LIKE`, `GROUP BY` answer as over the plain strings; a chunk whose codes'
//! statistics exclude a literal is not decoded.

mod common;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::RecordBatch;
use blz::sql::SqlContext;
use blz::table::{ColumnOptions, Field, Table, TableOptions, Values};
use blz::DType;
use std::path::Path;

const CITIES: [&str; 6] = ["Oslo", "Lima", "Pune", "Kyiv", "La Paz", "Lagos"];

/// 1,000 rows in chunks of 100: `city` clustered (each chunk holds two or three cities,
/// so each chunk's codes span a few entries), `x` = i. Written as `plain` too.
fn make(path: &Path) -> Vec<String> {
    let small = ColumnOptions {
        chunklen: Some(100),
        ..Default::default()
    };
    let city: Vec<String> = (0..1000)
        .map(|i| CITIES[(i / 170) % CITIES.len()].to_string())
        .collect();
    let x: Vec<i64> = (0..1000).collect();
    let mut t = Table::create(
        path,
        vec![
            Field::varstr("city")
                .with_options(small.clone())
                .dictionary(),
            Field::varstr("plain").with_options(small.clone()),
            Field::new("x", DType::I64).with_options(small),
        ],
        &TableOptions::default(),
    )
    .unwrap();
    t.append(&[
        ("city", Values::strings(&city)),
        ("plain", Values::strings(&city)),
        ("x", Values::from_slice(&x)),
    ])
    .unwrap();
    city
}

fn rows(b: &[RecordBatch]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for b in b {
        for r in 0..b.num_rows() {
            out.push(
                (0..b.num_columns())
                    .map(|c| {
                        datafusion::arrow::util::display::array_value_to_string(b.column(c), r)
                            .unwrap()
                    })
                    .collect(),
            );
        }
    }
    out
}

#[test]
fn queries_on_a_dictionary_column_answer_as_on_plain_strings() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    make(&p);
    let ctx = SqlContext::new().unwrap();
    ctx.register_path("t", p.to_str().unwrap()).unwrap();
    let schema = ctx.collect("SELECT city FROM t LIMIT 1").unwrap();
    // DataFusion reads it decoded: its string kernels and grouping are faster on plain
    // strings (benches/dict_query.py); the Arrow C stream gives the dictionary.
    assert_eq!(
        schema[0].schema().field(0).data_type(),
        &arrow_schema::DataType::LargeUtf8
    );
    for q in [
        "SELECT count(*), sum(x) FROM t WHERE {c} = 'Lima'",
        "SELECT count(*), sum(x) FROM t WHERE {c} <> 'Lima'",
        "SELECT count(*) FROM t WHERE {c} IN ('Kyiv', 'Pune', 'nowhere')",
        "SELECT count(*) FROM t WHERE {c} LIKE 'La%'",
        "SELECT count(*) FROM t WHERE {c} = 'nowhere'",
        "SELECT count(*) FROM t WHERE {c} > 'M'",
        "SELECT {c}, count(*), min(x) FROM t GROUP BY {c} ORDER BY {c}",
        "SELECT min({c}), max({c}), count(DISTINCT {c}) FROM t",
        "SELECT count(*) FROM t AS a JOIN t AS b ON a.{c} = b.{c} WHERE a.x < 10",
    ] {
        let want = rows(&ctx.collect(&q.replace("{c}", "plain")).unwrap());
        let got = rows(&ctx.collect(&q.replace("{c}", "city")).unwrap());
        assert_eq!(got, want, "{q}");
    }
}

#[test]
fn a_literal_outside_a_chunks_codes_skips_the_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let city = make(&p);
    let t = Table::open(&p).unwrap();
    // Rows 900..1000 (chunk 9) hold only "Lagos" (codes of one entry): damaged, in the
    // codes and in x, a query for another city never decodes them.
    assert!(city[900..1000].iter().all(|c| c == "Lagos"));
    for col in ["city", "x"] {
        let files = t.column_files(col).unwrap();
        common::flip_byte_in_chunk(&files[0], 9);
    }
    drop(t);
    let ctx = SqlContext::new().unwrap();
    ctx.register_path("t", p.to_str().unwrap()).unwrap();
    let out = ctx
        .collect("SELECT count(*), sum(x) FROM t WHERE city = 'Lima'")
        .unwrap();
    let b = out.iter().find(|b| b.num_rows() > 0).unwrap();
    let want = city.iter().filter(|c| *c == "Lima").count() as i64;
    assert_eq!(b.column(0).as_primitive::<Int64Type>().value(0), want);
    let out = ctx
        .collect("SELECT count(*) FROM t WHERE city IN ('Oslo', 'Pune')")
        .unwrap();
    let b = out.iter().find(|b| b.num_rows() > 0).unwrap();
    let want = city.iter().filter(|c| *c == "Oslo" || *c == "Pune").count() as i64;
    assert_eq!(b.column(0).as_primitive::<Int64Type>().value(0), want);
    // A query that needs the chunk meets the damage.
    assert!(ctx
        .collect("SELECT count(*) FROM t WHERE city = 'Lagos'")
        .is_err());
}

/// Filters on a dictionary column alone are decided on its codes (pushed down "exact":
/// DataFusion does not apply them again): every shape of filter, with nulls and empty
/// strings, answers as on the same strings stored plainly, and a range where no code matches
/// reads no other column (a damaged chunk of `x` there is never decoded, though the codes'
/// statistics, spanning the literal's code, cannot rule the range out).
#[test]
fn filters_on_codes_answer_as_on_strings_and_skip_ranges_without_a_match() {
    use blz::table::NullableValues;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let small = ColumnOptions {
        chunklen: Some(100),
        ..Default::default()
    };
    // Codes in first-seen order: Oslo 0, Lima 1, Pune 2, "" 3, Kyiv 4, ...
    let words = [
        "Oslo", "Lima", "Pune", "", "Kyiv", "La Paz", "Lagos", "oslo",
    ];
    let n = 1000usize;
    let city: Vec<String> = (0..n)
        .map(|i| {
            if i >= 900 {
                // Rows 900..1000 hold Oslo and Pune only: codes 0 and 2, around Lima's 1.
                words[if i % 2 == 0 { 0 } else { 2 }].to_string()
            } else {
                words[(i * 7 + i / 13) % words.len()].to_string()
            }
        })
        .collect();
    let valid: Vec<bool> = (0..n).map(|i| i >= 900 || i % 11 != 3).collect();
    let x: Vec<i64> = (0..n as i64).collect();
    let mut t = Table::create(
        &p,
        vec![
            Field::varstr("city")
                .with_options(small.clone())
                .nullable()
                .dictionary(),
            Field::varstr("plain")
                .with_options(small.clone())
                .nullable(),
            Field::new("x", DType::I64).with_options(small),
        ],
        &TableOptions::default(),
    )
    .unwrap();
    let strings = || NullableValues::new(Values::strings(&city), Some(valid.clone()));
    t.append(&[
        ("city", strings()),
        ("plain", strings()),
        ("x", NullableValues::new(Values::from_slice(&x), None)),
    ])
    .unwrap();
    drop(t);
    let ctx = SqlContext::new().unwrap();
    ctx.register_path("t", p.to_str().unwrap()).unwrap();
    let plan = ctx
        .collect("EXPLAIN SELECT x FROM t WHERE city = 'Lima'")
        .unwrap();
    let text = rows(&plan).concat().join("\n");
    assert!(
        !text.contains("FilterExec"),
        "the filter on codes is the scan's:\n{text}"
    );
    for q in [
        "SELECT count(*), sum(x) FROM t WHERE {c} = 'Lima'",
        "SELECT x FROM t WHERE {c} = 'Lima' ORDER BY x",
        "SELECT x FROM t WHERE {c} <> 'Lima' AND x > 500 ORDER BY x",
        "SELECT count(*) FROM t WHERE {c} IN ('Kyiv', 'Pune', 'nowhere')",
        "SELECT count(*) FROM t WHERE {c} NOT IN ('Kyiv', 'Pune')",
        "SELECT count(*) FROM t WHERE {c} LIKE 'La%'",
        "SELECT count(*) FROM t WHERE {c} NOT LIKE '%o%'",
        "SELECT count(*) FROM t WHERE {c} ILIKE 'OSLO'",
        "SELECT count(*) FROM t WHERE {c} = ''",
        "SELECT count(*) FROM t WHERE {c} IS NULL",
        "SELECT count(*) FROM t WHERE {c} IS NOT NULL AND {c} > 'L'",
        "SELECT count(*) FROM t WHERE upper({c}) = 'OSLO'",
        "SELECT count(*) FROM t WHERE coalesce({c}, 'none') = 'none'",
        "SELECT count(*) FROM t WHERE length({c}) = 4 OR {c} = 'Lagos'",
        "SELECT x FROM t WHERE {c} = 'Pune' ORDER BY x LIMIT 3",
        "SELECT {c}, count(*) FROM t WHERE {c} LIKE 'L%' GROUP BY {c} ORDER BY {c}",
        "SELECT count(*) FROM t AS a JOIN t AS b ON a.x = b.x WHERE a.{c} = 'Lima' AND b.{c} = 'Lima'",
        "SELECT count(*) FROM t WHERE {c} IN (SELECT plain FROM t WHERE x < 40)",
        "SELECT count(*) FROM t WHERE {c} = 'Lima' OR now() IS NULL",
        "SELECT count(*) FROM t WHERE CASE WHEN {c} LIKE 'L%' THEN x ELSE 0 END > 100",
    ] {
        let want = rows(&ctx.collect(&q.replace("{c}", "plain")).unwrap());
        let got = rows(&ctx.collect(&q.replace("{c}", "city")).unwrap());
        assert_eq!(got, want, "{q}");
    }
    // Rows 900..1000: damage `x` there; `city = 'Lima'` matches no code of that range.
    let files = Table::open(&p).unwrap().column_files("x").unwrap();
    common::flip_byte_in_chunk(&files[0], 9);
    let out = ctx
        .collect("SELECT count(*), sum(x) FROM t WHERE city = 'Lima'")
        .unwrap();
    let b = out.iter().find(|b| b.num_rows() > 0).unwrap();
    let want = (0..900).filter(|&i| valid[i] && city[i] == "Lima").count() as i64;
    assert_eq!(b.column(0).as_primitive::<Int64Type>().value(0), want);
    // The plain column must read the range, and meets the damage.
    assert!(ctx
        .collect("SELECT sum(x) FROM t WHERE plain = 'Lima'")
        .is_err());
}
