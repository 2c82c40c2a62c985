//! Table commands: `create --csv` without `--column` (every CSV column becomes a table
//! column) and `create --npy` of records (every field becomes one), `info`, `get --columns`,
//! `append --csv|--npy`, `resize`, `attrs` and `verify` on table datasets. Everything goes
//! through blz's public API (`blz::table`, `blz::csv`, `blz::npy`, `blz::ordered`).

use crate::args::{AppendArgs, AttrsArgs, CreateArgs, GetArgs, LayoutArgs, ResizeArgs};
use crate::attrs::edit_attrs;
use crate::failure::{describe, out_err, say, Failure};
use crate::parse::{batch_bytes, delimiter_byte, parse_kv};
use crate::report::{human, plural, progress, report_verify, run_compaction};
use crate::show;
use crate::show::EDGE;
use blz::blosc::Codec;
use blz::blpk::Checksum;
use blz::meta::{Compression, FilterName};
use blz::npy::RecordReader;
use blz::ordered::TableRows;
use blz::table::{ColumnOptions, LeafKind, Table, TableOptions};
use blz::table::{Leaf, Values};
use blz::DType;
use std::io::Write;
use std::path::Path;

/// Rows converted and appended at a time, so a huge CSV never sits in memory.
const BATCH_ROWS: usize = 65536;
/// `get` prints every row up to this many; beyond, the first and last few.
const SUMMARY_THRESHOLD: u64 = 1000;

// ---------------------------------------------------------------------------------------------
// create

/// Column options shared by every column, from the layout flags.
fn table_options(l: &LayoutArgs, rows: u64) -> Result<TableOptions, Failure> {
    if l.truncate_bits.is_some() || l.fill.is_some() || l.big_endian {
        return Err(Failure::new(
            "--truncate-bits, --fill and --big-endian apply to arrays (give --column), not tables",
        ));
    }
    let mut defaults = ColumnOptions::default();
    if let Some(c) = &l.chunkshape {
        let n: u64 = c.trim().parse().map_err(|_| {
            Failure::new(format!(
                "--chunkshape {c:?}: a table takes one number, the rows per chunk"
            ))
        })?;
        if n == 0 {
            return Err(Failure::new("--chunkshape must be at least 1"));
        }
        defaults.chunklen = Some(n);
    }
    if l.superchunk_size == Some(0) {
        return Err(Failure::new("--superchunk-size must be at least 1"));
    }
    defaults.superchunksize = l.superchunk_size;
    // Only an explicit choice replaces the per-kind defaults (variable-length columns get
    // zstd without shuffle otherwise).
    if l.codec != "lz4" || l.clevel != 5 || l.filter != "shuffle" {
        let codec: Codec = l
            .codec
            .parse()
            .map_err(|e: blz::blosc::CodecError| Failure::new(e.0))?;
        let filters = match l.filter.as_str() {
            "shuffle" => vec![FilterName::Shuffle],
            "bitshuffle" => vec![FilterName::Bitshuffle],
            _ => vec![],
        };
        defaults.compression = Some(Compression {
            codec,
            clevel: l.clevel,
            filters,
            mantissa_bits: None,
            blocksize: 0,
        });
    }
    defaults.checksum = Some(
        Checksum::from_name(&l.checksum)
            .ok_or_else(|| Failure::new(format!("unknown checksum {:?}", l.checksum)))?,
    );
    defaults.slack = Some(l.slack);
    let mut attributes = serde_json::Map::new();
    for kv in &l.attrs {
        let (k, v) = parse_kv(kv, "--attr")?;
        attributes.insert(k, v);
    }
    Ok(TableOptions {
        defaults,
        expectedlen: Some(rows),
        attributes,
        overwrite: l.overwrite,
    })
}

/// `blz create PATH --csv FILE` (no `--column`): a table of every CSV column.
pub fn create(a: &CreateArgs) -> Result<(), Failure> {
    let Some(csv_path) = &a.csv else {
        return Err(Failure::new("give --csv FILE"));
    };
    if a.no_header {
        return Err(Failure::new(
            "a table takes its column names from the header row; --no-header needs --column",
        ));
    }
    let schema = a
        .schema
        .as_deref()
        .map(blz::csv::parse_schema)
        .transpose()
        .map_err(|e| Failure::new(format!("--schema: {e}")))?;
    let csv_opts = blz::csv::CsvOptions {
        delimiter: delimiter_byte(a.delimiter)?,
        schema: schema.unwrap_or_default(),
        dates: !a.no_dates,
    };
    // First pass: names, types and every value checked.
    let plan = blz::csv::scan_table_with(csv_path, &csv_opts)?;
    let opts = table_options(&a.layout, plan.rows())?;
    // Second pass: the table and every row, in one step.
    let pb = progress(plan.rows(), "create", "rows");
    let (storage, root) = blz::storage::for_new_path(&a.path, opts.overwrite)?;
    let t = plan.create_table(storage, &root, &opts, batch_rows(), |n| pb.inc(n));
    pb.finish_and_clear();
    let t = t?;
    report_create(&a.path, &t, plan.leaves())
}

/// Rows per batch of CSV input: 65536, fewer when `BLZ_BATCH_BYTES` makes batches small.
fn batch_rows() -> u64 {
    blz::csv::table_batch_rows(batch_bytes())
}

/// Reports a table `blz create` made: its columns and sizes.
fn report_create(path: &Path, t: &Table, targets: &[(String, LeafKind)]) -> Result<(), Failure> {
    let (nb, cb) = totals(t);
    say!(
        "created {}: table of {} and {}, {} -> {} ({})",
        path.display(),
        plural(t.nrows(), "row"),
        plural(t.column_names().len() as u64, "column"),
        human(nb),
        human(cb),
        ratio_text(nb, cb)
    );
    for (p, k) in targets {
        let mut text = k.name();
        if let Ok(Some(z)) = t.timezone(p) {
            text = format!("{}, {z}]", text.trim_end_matches(']'));
        }
        if t.is_nullable(p).unwrap_or(false) {
            text.push_str(" (nullable)");
        }
        say!("  {p}: {text}");
    }
    Ok(())
}

/// Reports an append of `rows` rows to the table at `path`, which had `before`.
fn report_append(path: &Path, rows: u64, before: u64, t: &Table) -> Result<(), Failure> {
    say!(
        "appended {} to {}: {before} -> {} rows",
        plural(rows, "row"),
        path.display(),
        t.nrows()
    );
    Ok(())
}

/// `blz create --npy` of records: a table with a column per field (nested records become
/// nested fields).
pub fn create_npy(a: &CreateArgs, rec: RecordReader) -> Result<(), Failure> {
    if a.schema.is_some() {
        return Err(Failure::new(
            "--schema applies to CSV tables; a .npy file of records carries its own types",
        ));
    }
    let targets = rec.leaves();
    rec.table_fields()?;
    let opts = table_options(&a.layout, rec.rows())?;
    let pb = progress(rec.rows(), "create", "rows");
    let (storage, root) = blz::storage::for_path(&a.path)?;
    let t = rec.create_table(storage, &root, &opts, batch_bytes(), |n| pb.inc(n));
    pb.finish_and_clear();
    report_create(&a.path, &t?, &targets)
}

/// `blz append --npy` on a table: the records' fields must be the table's columns, with
/// the same types.
fn append_npy(a: &AppendArgs, npy_path: &Path, mut t: Table) -> Result<(), Failure> {
    let rec = RecordReader::open(npy_path)?.ok_or_else(|| {
        Failure::new(format!(
            "{}: a table appends records (a structured dtype with a field per column: {})",
            npy_path.display(),
            t.column_names().join(", ")
        ))
    })?;
    rec.check_fits(&t)?;
    let before = t.nrows();
    let rows = rec.rows();
    let pb = progress(rows, "append", "rows");
    let res = rec.append_to(&mut t, batch_bytes(), |n| pb.inc(n));
    pb.finish_and_clear();
    res?;
    report_append(&a.path, rows, before, &t)
}

// ---------------------------------------------------------------------------------------------
// info

fn totals(t: &Table) -> (u64, u64) {
    t.sizes().columns.as_ref().map_or((0, 0), |c| {
        c.values()
            .fold((0, 0), |(n, c), s| (n + s.nbytes, c + s.cbytes))
    })
}

fn ratio_text(nb: u64, cb: u64) -> String {
    if cb > 0 {
        format!("{:.2}x", nb as f64 / cb as f64)
    } else {
        "-".into()
    }
}

fn filter_names(c: &Compression) -> Vec<&'static str> {
    c.filters
        .iter()
        .map(|f| match f {
            FilterName::Truncate => "truncate",
            FilterName::Shuffle => "shuffle",
            FilterName::Bitshuffle => "bitshuffle",
        })
        .collect()
}

fn leaf_json(t: &Table, l: &Leaf) -> serde_json::Value {
    let s = t
        .sizes()
        .columns
        .as_ref()
        .and_then(|c| c.get(&l.path))
        .copied();
    let (nb, cb) = s.map_or((0, 0), |s| (s.nbytes, s.cbytes));
    let st = &l.storage;
    serde_json::json!({
        "path": l.path,
        "type": l.type_name(),
        "timezone": l.timezone,
        "nullable": l.nullable,
        "chunklen": st.chunklen,
        "superchunksize": st.superchunksize,
        "codec": st.compression.codec.name(),
        "clevel": st.compression.clevel,
        "filters": filter_names(&st.compression),
        "checksum": st.checksum.name(),
        "nbytes": nb,
        "cbytes": cb,
        "ratio": (cb > 0).then(|| nb as f64 / cb as f64),
    })
}

/// `blz info PATH` for a table: rows, fields with their sizes, totals, attributes.
pub fn info(path: &Path, json: bool, t: Table) -> Result<(), Failure> {
    let (nb, cb) = totals(&t);
    let fields: Vec<serde_json::Value> = t.leaves().iter().map(|l| leaf_json(&t, l)).collect();
    let attrs = t.attrs()?;
    if json {
        let j = serde_json::json!({
            "path": path.display().to_string(),
            "kind": "table",
            "rows": t.nrows(),
            "fields": fields,
            "nbytes": nb,
            "cbytes": cb,
            "ratio": (cb > 0).then(|| nb as f64 / cb as f64),
            "attributes": attrs,
        });
        say!("{}", serde_json::to_string_pretty(&j).unwrap_or_default());
        return Ok(());
    }
    let mut table: Vec<[String; 7]> = vec![[
        "field".into(),
        "type".into(),
        "chunklen".into(),
        "codec".into(),
        "nbytes".into(),
        "cbytes".into(),
        "ratio".into(),
    ]];
    for (l, f) in t.leaves().iter().zip(&fields) {
        let c = &l.storage.compression;
        let mut codec = format!("{}:{}", c.codec.name(), c.clevel);
        for name in filter_names(c) {
            codec.push('+');
            codec.push_str(name);
        }
        let (n, k) = (
            f["nbytes"].as_u64().unwrap_or(0),
            f["cbytes"].as_u64().unwrap_or(0),
        );
        table.push([
            l.path.clone(),
            leaf_type_text(l),
            l.storage.chunklen.to_string(),
            codec,
            human(n),
            human(k),
            ratio_text(n, k),
        ]);
    }
    table.push([
        "total".into(),
        String::new(),
        String::new(),
        String::new(),
        human(nb),
        human(cb),
        ratio_text(nb, cb),
    ]);
    let mut w = [0usize; 7];
    for r in &table {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut o = std::io::stdout().lock();
    writeln!(o, "{:<13}{}", "path:", path.display()).map_err(out_err)?;
    writeln!(o, "{:<13}table", "kind:").map_err(out_err)?;
    writeln!(o, "{:<13}{}", "rows:", t.nrows()).map_err(out_err)?;
    writeln!(o, "{:<13}{}", "columns:", t.column_names().len()).map_err(out_err)?;
    let last = table.len() - 1;
    for (j, r) in table.iter().enumerate() {
        let mut line = String::from(" ");
        for (i, c) in r.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            line.push(' ');
            if i >= 4 {
                line.push_str(&" ".repeat(pad));
                line.push_str(c);
            } else {
                line.push_str(c);
                line.push_str(&" ".repeat(pad));
            }
        }
        if j == last {
            writeln!(o, "  {}", "-".repeat(line.len().saturating_sub(2))).map_err(out_err)?;
        }
        writeln!(o, "{}", line.trim_end()).map_err(out_err)?;
    }
    let text = if attrs.is_empty() {
        "{}".to_string()
    } else {
        serde_json::to_string(&attrs).unwrap_or_default()
    };
    writeln!(o, "{:<13}{text}", "attributes:").map_err(out_err)?;
    Ok(())
}

/// A column's type as `blz info` shows it: the dtype, with its zone as pandas writes one
/// (`datetime64[ns, Europe/Paris]`).
fn leaf_type_text(l: &blz::table::Leaf) -> String {
    match &l.timezone {
        Some(z) => format!("{}, {z}]", l.kind.name().trim_end_matches(']')),
        None => l.type_name(),
    }
}

// ---------------------------------------------------------------------------------------------
// get

/// The rows `get` reads, in output order: `--rows`, or the selection.
fn row_selection(t: &Table, a: &GetArgs) -> Result<TableRows, Failure> {
    let n = t.nrows();
    if let Some(list) = &a.rows {
        let mut v = Vec::new();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let i: i128 = item.parse().map_err(|_| {
                Failure::new(format!("--rows {list:?}: {item:?} is not a row number"))
            })?;
            v.push(i);
        }
        return TableRows::pick(&v, n)
            .map_err(|e| Failure::new(format!("--rows {list:?}: {}", describe(&e))));
    }
    Ok(TableRows::parse(a.selection.as_deref().unwrap_or(""), n)?)
}

/// Output positions `p..q` of the columns `names`: each one's values and validity (`None`:
/// no nulls).
type NullableCols = Vec<(Values, Option<Vec<bool>>)>;

fn read_cols(
    t: &Table,
    names: &[&str],
    sel: &TableRows,
    p: u64,
    q: u64,
) -> Result<NullableCols, Failure> {
    let cols = sel.read(t, names, p, q)?;
    let mut out = Vec::with_capacity(cols.len());
    for (v, n) in cols.into_iter().zip(names) {
        let valid = sel.validity(t, n, p, q)?;
        out.push((v, valid));
    }
    Ok(out)
}

fn is_null(c: &(Values, Option<Vec<bool>>), i: usize) -> bool {
    c.1.as_ref().is_some_and(|v| v.get(i) == Some(&false))
}

/// The text of row `i` of a column: a null as an empty cell in CSV and `null` in text;
/// `csv` writes NaN as an empty cell too.
fn cell(c: &(Values, Option<Vec<bool>>), i: usize, csv: bool) -> String {
    if is_null(c, i) {
        return if csv { String::new() } else { "null".into() };
    }
    match &c.0 {
        Values::Fixed { dtype, data } => {
            let s = dtype.itemsize();
            let b = &data[i * s..(i + 1) * s];
            if csv && dtype.is_float() {
                let t = show::element_text(b, *dtype, false);
                if t == "nan" {
                    return String::new();
                }
                return t;
            }
            show::element_text(b, *dtype, false)
        }
        Values::Var(items) => String::from_utf8_lossy(&items[i]).into_owned(),
    }
}

/// The columns `--columns` names (all when it is not given), in its order.
fn selected_columns<'t>(t: &'t Table, a: &GetArgs) -> Result<Vec<&'t str>, Failure> {
    let all_names = t.column_names();
    let Some(list) = &a.columns else {
        return Ok(all_names);
    };
    let mut v = Vec::new();
    for c in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some(n) = all_names.iter().find(|n| **n == c) else {
            return Err(Failure::new(format!(
                "{}: no column {c:?} (columns: {})",
                a.path.display(),
                all_names.join(", ")
            )));
        };
        v.push(*n);
    }
    if v.is_empty() {
        return Err(Failure::new("--columns: name at least one column"));
    }
    Ok(v)
}

/// `blz get` on a table.
pub fn get(a: &GetArgs, t: Table) -> Result<(), Failure> {
    let names = selected_columns(&t, a)?;
    let sel = row_selection(&t, a)?;
    let total = sel.len();
    if let Some(dir) = &a.out_dir {
        return write_npy_dir(&t, &names, &sel, dir);
    }
    if let Some(out) = &a.out {
        if out
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
        {
            return write_records(&t, &names, &sel, out);
        }
        return write_csv(&t, &names, &sel, out);
    }
    if a.json {
        if total > SUMMARY_THRESHOLD && !a.all {
            return Err(Failure::new(format!(
                "the selection holds {total} rows; add --all to print them all as JSON, \
                 or use --out FILE.csv"
            )));
        }
        return print_json(&t, &names, &sel);
    }
    let grid = Grid::new(&t, &names);
    let stdout = std::io::stdout();
    let mut o = std::io::BufWriter::new(stdout.lock());
    if total > SUMMARY_THRESHOLD && !a.all {
        let mut rows = grid.rows(&read_cols(&t, &names, &sel, 0, EDGE)?);
        rows.push(Vec::new());
        rows.extend(grid.rows(&read_cols(&t, &names, &sel, total - EDGE, total)?));
        grid.print(&mut o, &rows, true).map_err(out_err)?;
        o.flush().map_err(out_err)?;
        drop(o);
        let _ = writeln!(
            std::io::stderr(),
            "({total} rows: showing the first and last {EDGE}; --all prints everything, \
             --out FILE.csv saves them)"
        );
        return Ok(());
    }
    // The header row even when no row is selected.
    if total == 0 {
        grid.print(&mut o, &[], true).map_err(out_err)?;
    }
    let mut p = 0;
    while p < total {
        let q = (p + BATCH_ROWS as u64).min(total);
        grid.print(
            &mut o,
            &grid.rows(&read_cols(&t, &names, &sel, p, q)?),
            p == 0,
        )
        .map_err(out_err)?;
        p = q;
    }
    o.flush().map_err(out_err)?;
    Ok(())
}

/// `blz get --json` on a table: `{"column": [values...], ...}`.
fn print_json(t: &Table, names: &[&str], sel: &TableRows) -> Result<(), Failure> {
    let cols = read_cols(t, names, sel, 0, sel.len())?;
    let mut m = serde_json::Map::new();
    for (n, c) in names.iter().zip(&cols) {
        let vals: Vec<serde_json::Value> = (0..c.0.len())
            .map(|i| {
                if is_null(c, i) {
                    serde_json::Value::Null
                } else {
                    c.0.json(i)
                }
            })
            .collect();
        m.insert((*n).to_string(), serde_json::Value::Array(vals));
    }
    say!("{}", serde_json::Value::Object(m));
    Ok(())
}

/// Rows of a table as aligned text: numbers right-aligned, text left-aligned, under a header
/// row of column paths.
struct Grid<'a> {
    names: &'a [&'a str],
    /// Per column: align right (a number).
    right: Vec<bool>,
}

impl<'a> Grid<'a> {
    fn new(t: &Table, names: &'a [&'a str]) -> Grid<'a> {
        let leaves = t.leaves();
        let right = names
            .iter()
            .map(|n| {
                leaves.iter().find(|l| l.path == *n).is_some_and(|l| {
                    matches!(l.kind, LeafKind::Fixed(d) if !matches!(d, DType::Bytes(_) | DType::Str(_)))
                })
            })
            .collect();
        Grid { names, right }
    }

    /// The cells of every row of `cols`.
    fn rows(&self, cols: &NullableCols) -> Vec<Vec<String>> {
        let n = cols.first().map_or(0, |c| c.0.len());
        (0..n)
            .map(|i| cols.iter().map(|v| cell(v, i, false)).collect())
            .collect()
    }

    /// Prints `rows` (an empty row as `...`), the header row first when `header`; columns as
    /// wide as their widest cell among these.
    fn print(&self, o: &mut dyn Write, rows: &[Vec<String>], header: bool) -> std::io::Result<()> {
        let mut w: Vec<usize> = self.names.iter().map(|n| n.chars().count()).collect();
        for r in rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i > 0 {
                    s.push_str("  ");
                }
                let pad = " ".repeat(w[i] - c.chars().count());
                if self.right[i] {
                    s.push_str(&pad);
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    s.push_str(&pad);
                }
            }
            s.trim_end().to_string()
        };
        if header {
            let h: Vec<String> = self.names.iter().map(|n| (*n).to_string()).collect();
            writeln!(o, "{}", line(&h))?;
        }
        for r in rows {
            if r.is_empty() {
                writeln!(o, "...")?;
            } else {
                writeln!(o, "{}", line(r))?;
            }
        }
        Ok(())
    }
}

/// `blz get --out FILE.csv`: a header row of column paths, then the selected rows.
fn write_csv(t: &Table, names: &[&str], sel: &TableRows, out: &Path) -> Result<(), Failure> {
    let ctx = |e: csv::Error| Failure::new(format!("{}: {e}", out.display()));
    let mut w = csv::Writer::from_path(out).map_err(ctx)?;
    let total = sel.len();
    let pb = progress(total, "get", "rows");
    let mut body = || -> Result<(), Failure> {
        w.write_record(names).map_err(ctx)?;
        let mut p = 0;
        while p < total {
            let q = (p + BATCH_ROWS as u64).min(total);
            let cols = read_cols(t, names, sel, p, q)?;
            for i in 0..(q - p) as usize {
                w.write_record(cols.iter().map(|v| cell(v, i, true)))
                    .map_err(ctx)?;
            }
            pb.inc(q - p);
            p = q;
        }
        w.flush()
            .map_err(|e| Failure::new(format!("{}: {e}", out.display())))
    };
    let res = body();
    pb.finish_and_clear();
    if res.is_err() {
        let _ = std::fs::remove_file(out);
    }
    res
}

/// `blz get --out FILE.npy`: the selected rows as numpy records, a field per column (nested
/// paths as nested records, fields in the table's column order), written in batches.
fn write_records(t: &Table, names: &[&str], sel: &TableRows, out: &Path) -> Result<(), Failure> {
    let total = sel.len();
    let pb = progress(total, "get", "rows");
    let res = blz::npy::write_records(t, names, sel, out, BATCH_ROWS as u64, |n| pb.inc(n));
    pb.finish_and_clear();
    let written = res?;
    say!(
        "wrote {} of {} columns to {}",
        plural(total, "record"),
        written.len(),
        out.display()
    );
    Ok(())
}

/// `blz get --out-dir DIR`: one `.npy` per column, named by its path with `/` as `.`.
fn write_npy_dir(t: &Table, names: &[&str], sel: &TableRows, dir: &Path) -> Result<(), Failure> {
    let total = sel.len();
    let pb = progress(total * names.len() as u64, "get", "values");
    let res = blz::npy::write_columns(t, names, sel, dir, BATCH_ROWS as u64, |n| pb.inc(n));
    pb.finish_and_clear();
    res?;
    say!(
        "wrote {} of {} to {}",
        plural(names.len() as u64, "column"),
        plural(total, "row"),
        dir.display()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// append, resize, attrs, verify

/// `blz append PATH --csv FILE` on a table: every row in one transaction.
pub fn append(a: &AppendArgs, mut t: Table) -> Result<(), Failure> {
    if let (Some(npy_path), None) = (&a.npy, &a.csv) {
        return append_npy(a, npy_path, t);
    }
    let Some(csv_path) = &a.csv else {
        return Err(Failure::new(
            "a table takes rows from --csv FILE (a header row naming every column) or \
             --npy FILE (records with a field per column)",
        ));
    };
    if a.no_header || a.column.is_some() {
        return Err(Failure::new(
            "a table appends whole rows: the CSV's header row names every column \
             (--column and --no-header do not apply)",
        ));
    }
    let delimiter = delimiter_byte(a.delimiter)?;
    let before = t.nrows();
    let pb = progress(0, "append", "rows");
    let rows =
        blz::csv::append_table_with(&mut t, csv_path, delimiter, batch_rows(), |n| pb.inc(n));
    pb.finish_and_clear();
    report_append(&a.path, rows?, before, &t)
}

/// `blz resize` on a table.
pub fn resize(a: &ResizeArgs, mut t: Table) -> Result<(), Failure> {
    let before = t.nrows();
    t.resize(a.rows)?;
    say!(
        "resized {}: {before} -> {} rows",
        a.path.display(),
        t.nrows()
    );
    Ok(())
}

/// `blz attrs` on a table.
pub fn attrs(a: &AttrsArgs, t: Table) -> Result<(), Failure> {
    edit_attrs(a, t)
}

/// `blz verify` on a table: every chunk of every column.
pub fn verify(path: &Path, t: Table) -> Result<(), Failure> {
    let pb = progress(0, "verify", "chunks");
    let mut chunks = 0;
    let errors = t.verify(|done, total| {
        pb.set_length(total);
        pb.set_position(done);
        chunks = total;
    });
    pb.finish_and_clear();
    let ncols = t.column_names().len() as u64;
    // The digests the columns use ("crc32", or "crc32, sha256" when they differ).
    let mut names: Vec<&str> = t
        .leaves()
        .iter()
        .map(|l| l.storage.checksum)
        .filter(|c| *c != blz::blpk::Checksum::None)
        .map(|c| c.name())
        .collect();
    names.sort_unstable();
    names.dedup();
    let digests = names.join(", ");
    report_verify(
        path,
        &errors,
        chunks,
        &plural(ncols, "column"),
        (!digests.is_empty()).then_some(digests.as_str()),
    )
}

/// `blz compact` on a table: every superchunk file of every column.
pub fn compact(path: &Path, mut t: Table) -> Result<(), Failure> {
    let mut files = Vec::new();
    for c in t.column_names() {
        files.extend(t.column_files(c)?);
    }
    let storage = std::sync::Arc::clone(t.storage());
    run_compaction(path, storage.as_ref(), &files, || t.compact())
}
