//! `blz sql`: a SQL query over tables and layer datasets (the library's `blz::sql`), its rows
//! printed as an aligned table, CSV or JSON lines.

//!
//! Built with the `sql` feature (on by default); without it `blz sql` says how to get it.

use crate::failure::Failure;
#[cfg(feature = "sql")]
use arrow::array::{Array, AsArray};
#[cfg(feature = "sql")]
use arrow::datatypes::{DataType, FieldRef, Float16Type, Float32Type, Float64Type};
#[cfg(feature = "sql")]
use arrow::error::ArrowError;
#[cfg(feature = "sql")]
use arrow::json::writer::NullableEncoder;
#[cfg(feature = "sql")]
use arrow::json::{Encoder, EncoderFactory, EncoderOptions};
#[cfg(feature = "sql")]
use arrow::record_batch::RecordBatch;
#[cfg(feature = "sql")]
use std::io::Write;
#[cfg(feature = "sql")]
use std::sync::Arc;

/// How `blz sql` prints rows.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqlFormat {
    /// An aligned text table.
    Table,
    /// CSV with a header line.
    Csv,
    /// One JSON object per row, one per line. JSON has no infinities or NaN: those are
    /// written as the strings "inf", "-inf" and "NaN" (a missing value is null).
    Json,
}

/// Arguments of `blz sql`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Tables and layer datasets are named with --table NAME=PATH, or by their path in double quotes.\n\nExamples:\n  blz sql \"SELECT g, avg(x) FROM t GROUP BY g ORDER BY g\" --table t=pts.blz\n  blz sql 'SELECT count(*) FROM \"data/pts.blz\" WHERE k BETWEEN 10 AND 20'\n  blz sql \"SELECT * FROM t LIMIT 5\" -t t=s3://bucket/pts.blz --format csv"
)]
pub struct SqlArgs {
    /// The query (DataFusion's SQL dialect, close to PostgreSQL's).
    pub query: String,
    /// A table or layer dataset the query names: NAME=PATH, PATH a directory or an
    /// s3://bucket/key URL (repeatable).
    #[arg(long = "table", short = 't', value_name = "NAME=PATH")]
    pub tables: Vec<String>,
    /// How to print the rows.
    #[arg(long, value_enum, default_value_t = SqlFormat::Table)]
    pub format: SqlFormat,
}

/// `blz sql` in a build without the `sql` feature: what to build instead.
#[cfg(not(feature = "sql"))]
pub fn run(_: &SqlArgs) -> Result<(), Failure> {
    Err(Failure::new(
        "this blz was built without SQL (the `sql` feature, which compiles DataFusion, \
         left out of the quick build examples/demo.sh makes): build the whole command line \
         with `cargo install --path cli` (or `cargo build --release -p blz-cli`)",
    ))
}

/// Runs `blz sql`.
#[cfg(feature = "sql")]
pub fn run(a: &SqlArgs) -> Result<(), Failure> {
    let ctx = blz::sql::SqlContext::new()?;
    for t in &a.tables {
        let (name, path) = t.split_once('=').ok_or_else(|| {
            Failure::new(format!("--table {t:?}: expected NAME=PATH (t=pts.blz)"))
        })?;
        if name.is_empty() || path.is_empty() {
            return Err(Failure::new(format!(
                "--table {t:?}: expected NAME=PATH (t=pts.blz)"
            )));
        }
        ctx.register_path(name, path)?;
    }
    let result = ctx.query(&a.query)?;
    let schema = result.schema();
    let out = std::io::stdout();
    let mut out = out.lock();
    let batches = result.map(|b| b.map_err(|e| Failure::from(blz::sql::from_arrow(e))));
    let written = match a.format {
        SqlFormat::Table => {
            let all = batches.collect::<Result<Vec<RecordBatch>, Failure>>()?;
            let text = if all.is_empty() {
                arrow::util::pretty::pretty_format_batches(&[RecordBatch::new_empty(schema)])
            } else {
                arrow::util::pretty::pretty_format_batches(&all)
            }
            .map_err(|e| Failure::new(e.to_string()))?;
            writeln!(out, "{text}")
        }
        SqlFormat::Csv => {
            let mut w = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut out);
            let mut any = false;
            for b in batches {
                any = true;
                w.write(&b?).map_err(|e| Failure::new(e.to_string()))?;
            }
            if !any {
                w.write(&RecordBatch::new_empty(schema))
                    .map_err(|e| Failure::new(e.to_string()))?;
            }
            Ok(())
        }
        SqlFormat::Json => {
            let mut w = arrow::json::WriterBuilder::new()
                .with_encoder_factory(Arc::new(NonFinite))
                .build::<_, arrow::json::writer::LineDelimited>(&mut out);
            for b in batches {
                w.write(&b?).map_err(|e| Failure::new(e.to_string()))?;
            }
            w.finish().map_err(|e| Failure::new(e.to_string()))?;
            Ok(())
        }
    };
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.map_err(|e| Failure::new(format!("writing the rows: {e}"))),
    }
}

/// Writes floating-point values to JSON as numbers, and the values JSON has no number for as
/// the strings `"inf"`, `"-inf"` and `"NaN"` (Arrow's writer makes them all `null`, which
/// is a missing value's).
#[cfg(feature = "sql")]
#[derive(Debug)]
struct NonFinite;

#[cfg(feature = "sql")]
impl EncoderFactory for NonFinite {
    fn make_default_encoder<'a>(
        &self,
        _field: &'a FieldRef,
        array: &'a dyn Array,
        _options: &'a EncoderOptions,
    ) -> Result<Option<NullableEncoder<'a>>, ArrowError> {
        let values: Box<dyn Fn(usize) -> f64 + 'a> = match array.data_type() {
            DataType::Float16 => {
                let a = array.as_primitive::<Float16Type>();
                Box::new(move |i| f64::from(a.value(i)))
            }
            DataType::Float32 => {
                let a = array.as_primitive::<Float32Type>();
                Box::new(move |i| f64::from(a.value(i)))
            }
            DataType::Float64 => {
                let a = array.as_primitive::<Float64Type>();
                Box::new(move |i| a.value(i))
            }
            _ => return Ok(None),
        };
        let single = array.data_type() != &DataType::Float64;
        let encoder = FloatEncoder { values, single };
        Ok(Some(NullableEncoder::new(
            Box::new(encoder),
            array.logical_nulls(),
        )))
    }
}

/// One float column's values, as [`NonFinite`] writes them.
#[cfg(feature = "sql")]
struct FloatEncoder<'a> {
    values: Box<dyn Fn(usize) -> f64 + 'a>,
    /// Narrower than f64: written with the shortest digits of its own width.
    single: bool,
}

#[cfg(feature = "sql")]
impl Encoder for FloatEncoder<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        let v = (self.values)(idx);
        let text = if v.is_nan() {
            "\"NaN\"".to_string()
        } else if v.is_infinite() {
            if v > 0.0 { "\"inf\"" } else { "\"-inf\"" }.to_string()
        } else if self.single {
            // f32 (and f16, which f32 holds exactly) in its own shortest form.
            serde_json::to_string(&(v as f32)).unwrap_or_else(|_| v.to_string())
        } else {
            serde_json::to_string(&v).unwrap_or_else(|_| v.to_string())
        };
        out.extend_from_slice(text.as_bytes());
    }
}
