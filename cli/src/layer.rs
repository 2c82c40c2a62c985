//! `blz layer ...`: build layer datasets from CSV (sorted, or sorted here), seek, ask for membership, describe
//! and verify them. Everything goes through `blz::layer`.

use crate::failure::Failure;
use blz::layer::{
    ColumnDef, Cursor, FilterKind, FilterSetting, Layer, LayerSchema, LayerSizes, LayerWriter,
    SortOptions, SortingLayerWriter, Value, ValueType, DEFAULT_SORT_MEMORY,
};
use blz::table::LeafKind;
use std::path::{Path, PathBuf};

/// Arguments of `blz layer`.
#[derive(clap::Args, Debug)]
pub struct LayerArgs {
    #[command(subcommand)]
    command: LayerCommand,
}

#[derive(clap::Subcommand, Debug)]
enum LayerCommand {
    /// Build a layer dataset from a CSV file sorted by its key columns (or in any order,
    /// with --sort).
    Build(BuildArgs),
    /// Find the first value >= (or the last value <=) VALUE in a row group.
    Seek(SeekArgs),
    /// Ask whether a value is present: the filter answers "no" without reading data.
    Contains(ContainsArgs),
    /// Describe a layer dataset: columns, rows, chunks, index levels, filters, bytes.
    Info(InfoArgs),
    /// Read and check every chunk of a layer dataset.
    Verify(VerifyArgs),
    /// Merge layer datasets with the same columns into a new one: equal key paths add
    /// their weights, paths whose weights add up to zero are left out.
    Merge(MergeArgs),
    /// Print every key path in order, with its weight, as CSV (what `build` reads: a tuple
    /// as one field per leaf field) or as JSON lines.
    Dump(DumpArgs),
}

/// Arguments of `blz layer dump`.
#[derive(clap::Args, Debug)]
struct DumpArgs {
    /// The layer dataset.
    dataset: PathBuf,
    /// One JSON array per path (tuples as arrays) instead of CSV.
    #[arg(long)]
    json: bool,
    /// Print at most N paths.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
}

/// Arguments of `blz layer build`.
#[derive(clap::Args, Debug)]
struct BuildArgs {
    /// Key columns, outermost first, as NAME:TYPE (int8..uint64, float32, float64, varstr,
    /// varbytes, or a tuple of types such as (int64,varstr)), comma-separated. A tuple
    /// column takes one CSV field per leaf field.
    #[arg(long, required = true)]
    columns: String,
    /// The last column's auxiliary value, as NAME:TYPE (integer or float); it is the CSV
    /// field after the keys.
    #[arg(long)]
    weight: Option<String>,
    /// One of DBSP's batch shapes, recorded with the dataset and checked against the
    /// columns: wset (one column and a weight), indexed_zset (two and a weight) or
    /// val_batch (three and a weight).
    #[arg(long, value_parser = ["wset", "indexed_zset", "val_batch"])]
    shape: Option<String>,
    /// Target false-positive rate of the membership filters.
    #[arg(long, default_value_t = blz::layer::DEFAULT_FPR)]
    fpr: f64,
    /// Columns (comma-separated names) built without a filter.
    #[arg(long)]
    no_filter: Option<String>,
    /// Kind of membership filter: auto (per filter block, an exact Roaring filter for
    /// integer columns when no larger than the Bloom filter), bloom, exact (integer
    /// columns only), or off.
    #[arg(long, default_value = "auto", value_parser = ["auto", "bloom", "exact", "off"])]
    filter: String,
    /// Rows per data chunk (default: 8192 fixed-size, 1024 variable-length).
    #[arg(long)]
    chunklen: Option<u64>,
    /// The CSV file's first line is a header.
    #[arg(long)]
    header: bool,
    /// Replace an existing layer dataset.
    #[arg(long)]
    overwrite: bool,
    /// The input is in any order: sort it (an external sort in bounded memory, with sorted
    /// runs in OUTPUT.tmp-build/sort-runs/). Repeated key paths add their weights and paths
    /// whose weights add up to zero are left out; without a weight, a repeated path is
    /// kept once.
    #[arg(long)]
    sort: bool,
    /// Memory for --sort's buffer of rows, such as 64M or 1G (default 256M).
    #[arg(long, value_name = "SIZE", value_parser = size_arg, requires = "sort")]
    sort_memory: Option<u64>,
    /// CSV input: one line per key path, sorted by the whole path unless --sort.
    input: PathBuf,
    /// The dataset directory to create.
    output: PathBuf,
}

/// Where a query looks: a column and the keys of its row group's ancestors.
#[derive(clap::Args, Debug)]
struct Target {
    /// Column to search (default: the first).
    #[arg(long)]
    column: Option<String>,
    /// Keys of the enclosing rows, outermost first (one per column before --column).
    #[arg(long = "in", value_name = "KEY", allow_negative_numbers = true)]
    parents: Vec<String>,
}

/// Arguments of `blz layer seek`.
#[derive(clap::Args, Debug)]
struct SeekArgs {
    /// The layer dataset.
    dataset: PathBuf,
    /// The value sought.
    #[arg(allow_negative_numbers = true)]
    value: String,
    #[command(flatten)]
    target: Target,
    /// First value >= VALUE (the default).
    #[arg(long, conflicts_with = "le")]
    ge: bool,
    /// Last value <= VALUE.
    #[arg(long)]
    le: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `blz layer contains`.
#[derive(clap::Args, Debug)]
struct ContainsArgs {
    /// The layer dataset.
    dataset: PathBuf,
    /// The value.
    #[arg(allow_negative_numbers = true)]
    value: String,
    #[command(flatten)]
    target: Target,
    /// Stop at the filter's answer ("no" or "maybe") instead of reading data on a "maybe".
    #[arg(long)]
    filter_only: bool,
}

/// Arguments of `blz layer info`.
#[derive(clap::Args, Debug)]
struct InfoArgs {
    /// The layer dataset.
    dataset: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `blz layer verify`.
#[derive(clap::Args, Debug)]
struct VerifyArgs {
    /// The layer dataset.
    dataset: PathBuf,
}

/// Arguments of `blz layer merge`.
#[derive(clap::Args, Debug)]
struct MergeArgs {
    /// The layer datasets to merge (the same columns and weight).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The layer dataset to create, with the first input's settings.
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing layer dataset at the output (when the merge is done).
    #[arg(long)]
    overwrite: bool,
}

/// Runs `blz layer ...`.
pub fn run(a: &LayerArgs) -> Result<(), Failure> {
    match &a.command {
        LayerCommand::Build(b) => build(b),
        LayerCommand::Seek(s) => seek(s),
        LayerCommand::Contains(c) => contains(c),
        LayerCommand::Info(i) => layer_info(&i.dataset, i.json, Layer::open(&i.dataset)?),
        LayerCommand::Verify(v) => layer_verify(&v.dataset, Layer::open(&v.dataset)?),
        LayerCommand::Merge(m) => merge(m),
        LayerCommand::Dump(d) => dump(d),
    }
}

fn dump(a: &DumpArgs) -> Result<(), Failure> {
    use std::io::Write;
    let layer = Layer::open(&a.dataset)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let paths = layer
        .paths()
        .take(usize::try_from(a.limit.unwrap_or(u64::MAX)).unwrap_or(usize::MAX));
    // A closed pipe (`| head`) ends the dump quietly.
    let io_err = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Ok(())
        } else {
            Err(Failure::new(format!("stdout: {e}")))
        }
    };
    if a.json {
        for p in paths {
            let (keys, weight) = p?;
            let mut row: Vec<serde_json::Value> = keys.iter().map(Value::to_json).collect();
            row.extend(weight.as_ref().map(Value::to_json));
            if let Err(e) = writeln!(out, "{}", serde_json::Value::Array(row)) {
                return io_err(e);
            }
        }
        return out.flush().or_else(io_err);
    }
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(&mut out);
    let mut fields = Vec::new();
    for p in paths {
        let (keys, weight) = p?;
        fields.clear();
        for k in keys.iter().chain(weight.as_ref()) {
            csv_fields(k, &mut fields);
        }
        if let Err(e) = w.write_record(&fields) {
            return match e.into_kind() {
                csv::ErrorKind::Io(e) => io_err(e),
                other => Err(Failure::new(format!("{other:?}"))),
            };
        }
    }
    w.flush().or_else(io_err)?;
    drop(w);
    out.flush().or_else(io_err)
}

/// The CSV fields of a value: one per leaf (a tuple's fields in order, depth first).
fn csv_fields(v: &Value, out: &mut Vec<Vec<u8>>) {
    match v {
        Value::Tuple(f) => f.iter().for_each(|x| csv_fields(x, out)),
        Value::Str(s) => out.push(s.as_bytes().to_vec()),
        Value::Bytes(b) => out.push(b.clone()),
        other => out.push(other.to_string().into_bytes()),
    }
}

fn merge(m: &MergeArgs) -> Result<(), Failure> {
    let r = Layer::merge(&m.inputs, &m.output, m.overwrite)?;
    let rows: Vec<String> = r.sizes.columns.iter().map(|c| c.rows.to_string()).collect();
    println!(
        "{}: {} paths from {} read in {} dataset(s), {} cancelled ({} rows)",
        m.output.display(),
        r.paths_written,
        r.paths_read,
        m.inputs.len(),
        r.paths_cancelled,
        rows.join(" / ")
    );
    Ok(())
}

fn size_arg(s: &str) -> Result<u64, String> {
    crate::parse::parse_size(s).map_err(|e| match e {
        blz::Error::InvalidArgument(m) => m,
        other => other.to_string(),
    })
}

/// The build of `blz layer build`: from sorted rows, or from rows in any order.
enum Builder {
    Sorted(Box<LayerWriter>),
    Sorting(Box<SortingLayerWriter>),
}

impl Builder {
    fn push(&mut self, keys: &[Value], weight: Option<Value>) -> blz::Result<()> {
        match self {
            Builder::Sorted(w) => w.push(keys, weight),
            Builder::Sorting(w) => w.push(keys, weight),
        }
    }

    /// Finishes the build: the output's counts, and the sorted runs written.
    fn finish(self) -> blz::Result<(LayerSizes, Option<u64>)> {
        match self {
            Builder::Sorted(w) => Ok(((*w).finish()?, None)),
            Builder::Sorting(w) => {
                let r = w.finish()?;
                Ok((r.sizes, Some(r.runs)))
            }
        }
    }
}

fn parse_type(t: &str) -> Result<ValueType, Failure> {
    let k = ValueType::parse(t).map_err(Failure::from)?;
    blz::layer::value::check_type(&k)?;
    Ok(k)
}

fn name_type(s: &str) -> Result<(String, ValueType), Failure> {
    let (n, t) = s
        .split_once(':')
        .ok_or_else(|| Failure::new(format!("{s:?}: expected NAME:TYPE")))?;
    Ok((n.trim().to_string(), parse_type(t.trim())?))
}

/// Splits `s` at the commas outside parentheses and brackets.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// Parses a command-line field as a value of `ty`: a leaf value as for a CSV field; a tuple
/// as its fields in parentheses, `(5,abc)` (nested tuples nest), or as a JSON array,
/// `[5,"abc"]`.
fn parse_value(ty: &ValueType, s: &str) -> Result<Value, Failure> {
    match ty {
        ValueType::Leaf(k) => parse_leaf(*k, s),
        ValueType::Tuple(fields) => {
            let bad =
                |why: &str| Failure::new(format!("{s:?} is not a {} value: {why}", ty.name()));
            let t = s.trim();
            if t.starts_with('[') {
                let j: serde_json::Value =
                    serde_json::from_str(t).map_err(|e| bad(&e.to_string()))?;
                return json_value(ty, &j).map_err(|w| bad(&w));
            }
            let inner = t
                .strip_prefix('(')
                .and_then(|t| t.strip_suffix(')'))
                .ok_or_else(|| bad("write a tuple as (a,b,...) or [a,b,...]"))?;
            let mut parts = split_top(inner);
            // `(5,)`: a one-field tuple written with its trailing comma.
            if parts.len() == fields.len() + 1 && parts.last().is_some_and(|p| p.trim().is_empty())
            {
                parts.pop();
            }
            if parts.len() != fields.len() {
                return Err(bad(&format!(
                    "{} fields given for {}",
                    parts.len(),
                    fields.len()
                )));
            }
            let vals = fields
                .iter()
                .zip(parts)
                .map(|(f, p)| match f {
                    ValueType::Leaf(LeafKind::VarStr | LeafKind::VarBytes) => {
                        parse_value(f, p.trim())
                    }
                    _ => parse_value(f, p),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Value::Tuple(vals))
        }
    }
}

/// A JSON value as a value of `ty` (tuples as arrays).
fn json_value(ty: &ValueType, j: &serde_json::Value) -> Result<Value, String> {
    let v = match (ty, j) {
        (ValueType::Tuple(f), serde_json::Value::Array(a)) if f.len() == a.len() => Value::Tuple(
            f.iter()
                .zip(a)
                .map(|(t, x)| json_value(t, x))
                .collect::<Result<_, _>>()?,
        ),
        (ValueType::Leaf(_), serde_json::Value::String(s)) => Value::Str(s.clone()),
        (ValueType::Leaf(_), serde_json::Value::Number(n)) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::UInt(u)
            } else {
                Value::Float(n.as_f64().ok_or("not a number")?)
            }
        }
        _ => return Err(format!("{j} does not fit {}", ty.name())),
    };
    blz::layer::value::coerce(ty, &v).map_err(|e| e.to_string())
}

/// A value of `ty` from CSV fields: a leaf from one field, a tuple from one field per leaf.
fn csv_value<'r>(
    ty: &ValueType,
    fields: &mut impl Iterator<Item = &'r str>,
) -> Result<Value, Failure> {
    match ty {
        ValueType::Leaf(k) => parse_leaf(*k, fields.next().unwrap_or_default()),
        ValueType::Tuple(f) => Ok(Value::Tuple(
            f.iter()
                .map(|t| csv_value(t, fields))
                .collect::<Result<_, _>>()?,
        )),
    }
}

/// Parses a command-line or CSV field as a value of `kind`.
fn parse_leaf(kind: LeafKind, s: &str) -> Result<Value, Failure> {
    let bad = || Failure::new(format!("{s:?} is not a {} value", kind.name()));
    let v = match kind {
        LeafKind::VarStr => Value::Str(s.to_string()),
        LeafKind::VarBytes => Value::Bytes(s.as_bytes().to_vec()),
        LeafKind::Fixed(d) if d.is_float() => Value::Float(s.trim().parse().map_err(|_| bad())?),
        LeafKind::Fixed(_) => {
            let t = s.trim();
            match t.parse::<i64>() {
                Ok(i) => Value::Int(i),
                Err(_) => Value::UInt(t.parse().map_err(|_| bad())?),
            }
        }
    };
    blz::layer::value::coerce_leaf(kind, &v).map_err(|_| bad())
}

fn build(a: &BuildArgs) -> Result<(), Failure> {
    let no_filter: Vec<&str> = a
        .no_filter
        .as_deref()
        .map(|s| s.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let mut cols = Vec::new();
    let mut kinds = Vec::new();
    for spec in split_top(&a.columns) {
        let (name, kind) = name_type(spec)?;
        let mut c = ColumnDef::new(&name, kind.clone()).with_filter(
            if a.filter == "off" || no_filter.contains(&name.as_str()) {
                FilterSetting::Off
            } else {
                FilterSetting::Fpr(a.fpr)
            },
        );
        if a.filter != "off" {
            c.filter_kind = FilterKind::parse(&a.filter)?;
        }
        c.chunklen = a.chunklen;
        kinds.push(kind);
        cols.push(c);
    }
    for n in &no_filter {
        if !cols.iter().any(|c| c.name == *n) {
            return Err(Failure::new(format!(
                "--no-filter names unknown column {n:?}"
            )));
        }
    }
    let mut schema = LayerSchema::new(cols);
    schema.overwrite = a.overwrite;
    schema.shape = a
        .shape
        .as_deref()
        .map(blz::layer::Shape::parse)
        .transpose()?;
    let mut wkind = None;
    if let Some(w) = &a.weight {
        let (name, kind) = name_type(w)?;
        let Some(LeafKind::Fixed(d)) = kind.leaf() else {
            return Err(Failure::new("the weight must be an integer or float type"));
        };
        schema = schema.with_weight(&name, d);
        wkind = Some(LeafKind::Fixed(d));
    }
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(a.header)
        .flexible(false)
        .from_path(&a.input)
        .map_err(|e| Failure::new(format!("{}: {e}", a.input.display())))?;
    let mut w = if a.sort {
        let opts = SortOptions::with_memory(a.sort_memory.unwrap_or(DEFAULT_SORT_MEMORY));
        Builder::Sorting(Box::new(LayerWriter::create_unsorted(
            &a.output, schema, opts,
        )?))
    } else {
        Builder::Sorted(Box::new(LayerWriter::create(&a.output, schema)?))
    };
    let nkeys: usize = kinds.iter().map(|k| k.leaves().len()).sum();
    let nf = nkeys + usize::from(wkind.is_some());
    let mut rows = 0u64;
    for (line, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| Failure::new(format!("{}: {e}", a.input.display())))?;
        let at =
            |m: String| Failure::new(format!("{}: record {}: {m}", a.input.display(), line + 1));
        if rec.len() != nf {
            return Err(at(format!("{} fields, expected {nf}", rec.len())));
        }
        let mut fields = rec.iter();
        let keys = kinds
            .iter()
            .map(|k| csv_value(k, &mut fields))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|f| at(f.message))?;
        let weight = match wkind {
            Some(k) => Some(parse_leaf(k, &rec[nkeys]).map_err(|f| at(f.message))?),
            None => None,
        };
        w.push(&keys, weight).map_err(|e| at(e.to_string()))?;
        rows += 1;
    }
    let (sizes, runs) = w.finish()?;
    let per: Vec<String> = sizes.columns.iter().map(|c| c.rows.to_string()).collect();
    let runs = match runs {
        Some(n) => format!(", {n} sorted runs"),
        None => String::new(),
    };
    println!(
        "{}: {rows} input rows, column rows {}{runs}",
        a.output.display(),
        per.join(" / ")
    );
    Ok(())
}

/// Opens a cursor on `target`'s column, descending through the `--in` keys.
fn locate<'a>(layer: &'a Layer, t: &Target) -> Result<(usize, Cursor<'a>), Failure> {
    let col = match &t.column {
        Some(n) => layer
            .column_index(n)
            .ok_or_else(|| Failure::new(format!("no column {n:?}")))?,
        None => t.parents.len(),
    };
    if col >= layer.ncolumns() {
        return Err(Failure::new(format!(
            "the dataset has {} columns",
            layer.ncolumns()
        )));
    }
    if t.parents.len() != col {
        return Err(Failure::new(format!(
            "column {} needs {col} --in keys (one per enclosing column), {} given",
            col + 1,
            t.parents.len()
        )));
    }
    let mut c = layer.cursor();
    for (i, p) in t.parents.iter().enumerate() {
        let kind = layer.kind(i).ok_or_else(|| Failure::new("bad column"))?;
        let v = parse_value(kind, p)?;
        if !c.seek_ge(&v)? || c.value()? != Some(v) {
            return Err(Failure::new(format!("{p:?} is not in column {}", i + 1)));
        }
        c = c
            .child()?
            .ok_or_else(|| Failure::new("no child row group"))?;
    }
    Ok((col, c))
}

fn seek(a: &SeekArgs) -> Result<(), Failure> {
    let layer = Layer::open(&a.dataset)?;
    let (col, mut c) = locate(&layer, &a.target)?;
    let kind = layer.kind(col).ok_or_else(|| Failure::new("bad column"))?;
    let v = parse_value(kind, &a.value)?;
    layer.reset_stats();
    let found = if a.le { c.seek_le(&v)? } else { c.seek_ge(&v)? };
    let value = c.value()?;
    let weight = if found && col + 1 == layer.ncolumns() && layer.storage_meta().weight.is_some() {
        c.weight()?
    } else {
        None
    };
    let children = c.child()?.map(|ch| ch.count());
    let s = layer.stats();
    if a.json {
        let out = serde_json::json!({
            "found": found,
            "row": c.row(),
            "index": c.index(),
            "value": value.as_ref().map(Value::to_json),
            "weight": weight.as_ref().map(Value::to_json),
            "children": children,
            "group_rows": c.count(),
            "reads": {"index": s.index_chunks, "data": s.data_chunks, "rowgroup": s.rowgroup_chunks},
        });
        println!("{out}");
    } else if let (true, Some(v)) = (found, value) {
        print!(
            "{} (row {} of the column, {} of {} in its group)",
            v,
            c.row().unwrap_or(0),
            c.index().unwrap_or(0),
            c.count()
        );
        if let Some(w) = weight {
            print!(", weight {w}");
        }
        if let Some(n) = children {
            print!(", {n} child rows");
        }
        println!();
    } else {
        println!(
            "none: no value {} {} in the row group",
            if a.le { "<=" } else { ">=" },
            a.value
        );
    }
    Ok(())
}

fn contains(a: &ContainsArgs) -> Result<(), Failure> {
    let layer = Layer::open(&a.dataset)?;
    let (col, c) = locate(&layer, &a.target)?;
    let kind = layer.kind(col).ok_or_else(|| Failure::new("bad column"))?;
    let v = parse_value(kind, &a.value)?;
    layer.reset_stats();
    let maybe = c.may_contain(&v)?;
    let answer = if !maybe {
        "no"
    } else if a.filter_only {
        "maybe"
    } else if c.contains(&v)? {
        "yes"
    } else {
        "no (filter false positive)"
    };
    let s = layer.stats();
    println!(
        "{answer} (read {} index, {} filter, {} data chunks)",
        s.index_chunks, s.filter_chunks, s.data_chunks
    );
    Ok(())
}

/// `blz layer info` (and `blz info` on a layer dataset): prints a description.
///
/// # Errors
/// When the dataset cannot be opened.
pub fn layer_info(path: &Path, json: bool, layer: Layer) -> Result<(), Failure> {
    let info = layer.info();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&info).unwrap_or_default()
        );
        return Ok(());
    }
    println!("layer dataset {}", path.display());
    if let Some(s) = layer.shape() {
        println!("shape: {}", s.name());
    }
    if let Some(w) = &layer.storage_meta().weight {
        println!("weight: {} ({})", w.name, w.dtype);
    }
    let cols = info["columns"].as_array().cloned().unwrap_or_default();
    for (i, c) in cols.iter().enumerate() {
        let filter = match &c["filter"] {
            serde_json::Value::Null => "off".to_string(),
            f => {
                let exact = f["exact_chunks"].as_u64();
                let chunks = f["chunks"].as_u64().unwrap_or(0);
                let kind = f["kind"].as_str().unwrap_or("bloom");
                let bloom = format!(
                    "{} bits/value, {} hashes, fpr {:.1e}",
                    f["bits_per_value"],
                    f["hashes"],
                    f["predicted_fpr"].as_f64().unwrap_or(0.0),
                );
                let blocks = match exact {
                    Some(e) if e == chunks => format!("{chunks} exact chunks"),
                    Some(0) => format!("{bloom}, {chunks} Bloom chunks"),
                    Some(e) => format!("{e} exact and {} Bloom chunks ({bloom})", chunks - e),
                    None => format!("{bloom}, {chunks} chunks"),
                };
                match f["bytes"].as_u64() {
                    Some(b) => format!("{kind}: {blocks}, {b} bytes"),
                    None => format!("{kind}: {blocks}"),
                }
            }
        };
        println!(
            "column {} {} ({}): {} rows, {} data chunks of {} rows, index levels {} {}, filter {}, {} / {} bytes stored / raw",
            i + 1,
            c["name"].as_str().unwrap_or(""),
            c["dtype"].as_str().unwrap_or(""),
            c["rows"],
            c["data_chunks"],
            c["chunklen"],
            c["index_levels"],
            c["index_chunks"],
            filter,
            c["cbytes"],
            c["nbytes"],
        );
    }
    Ok(())
}

/// `blz layer verify` (and `blz verify` on a layer dataset): reads and checks every chunk.
///
/// # Errors
/// When the dataset cannot be opened or a problem is found (exit status 1).
pub fn layer_verify(path: &Path, layer: Layer) -> Result<(), Failure> {
    let errors = layer.verify();
    if errors.is_empty() {
        let rows: Vec<String> = (0..layer.ncolumns())
            .map(|c| layer.rows(c).to_string())
            .collect();
        println!("{}: ok ({} rows)", path.display(), rows.join(" / "));
        Ok(())
    } else {
        for e in &errors {
            eprintln!("blz: {e}");
        }
        Err(Failure::new(format!(
            "{}: {} problem(s) found",
            path.display(),
            errors.len()
        )))
    }
}
