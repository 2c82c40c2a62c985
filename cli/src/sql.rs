//! `blz sql`: a SQL query over tables and layer datasets (the library's `blz::sql`), its rows
//! printed as an aligned table, CSV or JSON lines.

use crate::failure::Failure;
use arrow::record_batch::RecordBatch;
use std::io::Write;

/// How `blz sql` prints rows.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqlFormat {
    /// An aligned text table.
    Table,
    /// CSV with a header line.
    Csv,
    /// One JSON object per row, one per line.
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

/// Runs `blz sql`.
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
    let batches = result.map(|b| b.map_err(|e| Failure::new(e.to_string())));
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
            let mut w = arrow::json::LineDelimitedWriter::new(&mut out);
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
