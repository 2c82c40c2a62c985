//! Dataset commands: `create`, `info` (for directories), `get`, `append`, `resize`, `attrs`,
//! `verify` and `compact`. Everything goes through blz's public library API.

use crate::failure::{describe, out_err, say, Failure};
use crate::npy::{NpyReader, NpyWriter, RecordReader};
use crate::show::EDGE;
use crate::show::{self, Text};
use crate::sources::{self, CsvRows, CsvSpec, GenRows, Generated, Rows, SplitMix};
use crate::table;
use blz::blosc::Codec;
use blz::blpk::Checksum;
use blz::dtype::swap_bytes;
use blz::meta::{Compression, FilterName};
use blz::selection::AxisSel;
use blz::Selection;
use blz::{CreateOptions, DType, Dataset, Endianness};
use clap::{ArgGroup, Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ndarray::{ArrayViewD, Axis, IxDyn};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

/// Rows are read, converted and appended this many bytes at a time (rounded to whole
/// chunk-rows), so memory stays bounded whatever the size of the input.
const BATCH_BYTES: u64 = 64 << 20;
/// `get` prints every element up to this many; beyond, a summary of the edges.
const SUMMARY_THRESHOLD: u64 = 1000;

// ---------------------------------------------------------------------------------------------
// Command-line arguments

/// The dataset subcommands (`info` is shared with superchunk files and lives in `main`).
#[derive(Subcommand, Debug)]
pub enum DatasetCommand {
    /// Create a dataset from a .npy file, a CSV column, or generated demo data.
    #[command(after_help = CREATE_EXAMPLES)]
    Create(Box<CreateArgs>),
    /// Print values of a dataset, or write them to a .npy file.
    #[command(after_help = GET_EXAMPLES)]
    Get(GetArgs),
    /// Append rows from a .npy file or a CSV column.
    #[command(after_help = APPEND_EXAMPLES)]
    Append(AppendArgs),
    /// Grow (with the fill value) or shrink a dataset along axis 0.
    #[command(after_help = RESIZE_EXAMPLES)]
    Resize(ResizeArgs),
    /// Print, set or delete a dataset's user attributes (JSON).
    #[command(after_help = ATTRS_EXAMPLES)]
    Attrs(AttrsArgs),
    /// Read every chunk and check every digest; exit 1 if anything is corrupt.
    #[command(after_help = VERIFY_EXAMPLES)]
    Verify(PathArgs),
    /// Rewrite the superchunk files without dead space left by modifications.
    #[command(after_help = COMPACT_EXAMPLES)]
    Compact(PathArgs),
}

const CREATE_EXAMPLES: &str = "\
Examples:
  blz create temps.blz --npy temps.npy
  blz create prices.blz --csv trades.csv --column price
  blz create prices.blz --csv trades.csv --column 2 --dtype float32 --no-header
  blz create demo.blz --arange 1000000 --chunkshape 65536
  blz create demo.blz --linspace 0,1,1000001 --codec zstd --clevel 7
  blz create walk.blz --random-walk 10000000 --seed 42 --truncate-bits 20
  blz create grid.blz --zeros 1000x20 --dtype int32 --fill -1 --attr 'units=\"m\"'

Tables (--csv without --column, or --npy of records):
  blz create trades.blz --csv trades.csv
  blz create trades.blz --csv trades.csv --schema 'qty:int32,sym:S8,pos/x:float64'
  blz create points.blz --npy points.npy     # np.save of a structured array

A .npy file of records (a 1-d array of a structured dtype, such as np.zeros(n,
dtype=[('id', 'i8'), ('pos', [('x', 'f8'), ('y', 'f8')])])) makes a table with a column
per field: id, pos/x, pos/y, each in its own files, with the field's type. Sub-array
fields are refused; padding between fields is dropped.

A table takes its column names from the CSV header row (a name such as pos/x makes column
x of the nested field pos). Types are inferred over the whole file unless --schema gives
them: bool when every cell is true/false, int64 when every cell is an integer, float64 when
every non-empty cell is a number (empty cells become NaN), otherwise varstr. --codec,
--clevel, --filter, --checksum, --slack, --superchunk-size and --chunkshape (rows per
chunk) apply to every column.

Exactly one source is given. Large inputs are appended in batches of a few chunk-rows,
so memory stays small; CSV files are read twice (check, then store). If anything fails,
the new dataset is removed.";

const GET_EXAMPLES: &str = "\
Selections use numpy's syntax, one item per axis, separated by commas:
  5        one position (the axis disappears)      -1      the last position
  10:20    positions 10 to 19                      ::2     every other position
  ::-1     all, reversed                           :       the whole axis
  ...      as many whole axes as needed            (none)  everything
Slices are clamped to the axis like numpy's; single positions must exist.

Examples:
  blz get temps.blz                  # a summary with '...' when over 1000 values
  blz get temps.blz 100:110
  blz get grid.blz '2:8:3,::-1'
  blz get grid.blz -1                # the last row
  blz get grid.blz ...,0 --json      # the first column as JSON
  blz get temps.blz ::10 --out every10th.npy

Tables: the selection picks rows (one axis); --rows takes a list of row numbers.
  blz get trades.blz --columns price,qty           # aligned text, '...' beyond 1000 rows
  blz get trades.blz 10:20 --columns sym --json    # {\"sym\": [...]}
  blz get trades.blz --rows 3,7,9
  blz get trades.blz ::5 --out every5th.csv        # header row of column paths, then rows
  blz get points.blz --out points.npy              # numpy records: np.load gives a structured array
  blz get trades.blz --columns price,pos/x --out-dir arrays/   # arrays/price.npy, arrays/pos.x.npy
--out-dir writes one .npy per column (the column path with '/' as '.'); variable-length
columns (varstr, varbytes) have no .npy form and are refused: use --out FILE.csv.
In CSV output a NaN is an empty cell.";

const APPEND_EXAMPLES: &str = "\
The .npy file must hold the dataset's dtype, with shape [n, ...] where '...' is the
dataset's shape without axis 0 (a 1-d dataset takes a 1-d array). A CSV column is read as
the dataset's dtype; the file is checked whole before anything is appended.

Examples:
  blz append temps.blz --npy more_temps.npy
  blz append prices.blz --csv trades-2.csv --column price

Tables take records from --npy: the structured dtype's fields must be the table's
columns with the same types (in any order, either byte order):
  blz append points.blz --npy more_points.npy

Tables: the CSV header row names every column of the table (in any order); values are
read as the columns' types. The whole file is checked before anything is appended, then
appended in batches of 65536 rows, each committed atomically across columns: should
writing fail midway (e.g. a full disk), the batches already committed stay.
  blz append trades.blz --csv more-trades.csv";

const RESIZE_EXAMPLES: &str = "\
Examples:
  blz resize temps.blz 2000000       # grow: new rows hold the fill value
  blz resize temps.blz 10            # shrink: keep the first 10 rows";

const ATTRS_EXAMPLES: &str = "\
Values are JSON: quote strings inside the shell's quotes.

Examples:
  blz attrs temps.blz
  blz attrs temps.blz --set 'units=\"K\"' --set 'scale=0.01' --set 'tags=[\"a\",\"b\"]'
  blz attrs temps.blz --delete scale";

const VERIFY_EXAMPLES: &str = "\
Each corrupt chunk is printed with its superchunk file and its chunk number in that file.

Example:
  blz verify temps.blz && echo intact";

const COMPACT_EXAMPLES: &str = "\
Modifying stored chunks can leave unused bytes in superchunk files; compact rewrites each
file (atomically, one at a time) without them: every file of an array, or of every column
of a table.

Examples:
  blz compact temps.blz
  blz compact people.blz";

/// A dataset path.
#[derive(Args, Debug)]
pub struct PathArgs {
    /// The dataset directory.
    pub path: PathBuf,
}

/// Arguments of `blz create`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("source").required(true).multiple(false)
    .args(["npy", "csv", "arange", "linspace", "random_walk", "zeros"])))]
pub struct CreateArgs {
    /// Directory of the new dataset.
    pub path: PathBuf,

    /// Read the array from a numpy .npy file (any shape; numbers, bool, complex, S<n>, U<n>;
    /// either byte order; C or Fortran order). A 0-d array becomes one element. A 1-d array
    /// of records (a structured dtype) becomes a table with a column per field, nested
    /// records as nested fields.
    #[arg(long, value_name = "FILE.npy", help_heading = "Source")]
    pub npy: Option<PathBuf>,
    /// Read a CSV file: with --column, one column as a 1-d array (int64 or float64 unless
    /// --dtype); without, a table of every column (names from the header row; see --schema).
    #[arg(long, value_name = "FILE", help_heading = "Source")]
    pub csv: Option<PathBuf>,
    /// Table column types, NAME:TYPE separated by commas (any dtype name, varstr or varbytes;
    /// a header name such as pos/x makes a nested field). Columns left out are inferred.
    #[arg(
        long,
        value_name = "NAME:TYPE,...",
        requires = "csv",
        conflicts_with_all = ["column", "dtype"],
        help_heading = "Source"
    )]
    pub schema: Option<String>,
    /// The CSV column: a name from the header row, or a 0-based index.
    #[arg(
        long,
        value_name = "NAME|INDEX",
        requires = "csv",
        help_heading = "Source"
    )]
    pub column: Option<String>,
    /// CSV field separator.
    #[arg(
        long,
        value_name = "CHAR",
        default_value = ",",
        requires = "csv",
        help_heading = "Source"
    )]
    pub delimiter: char,
    /// The CSV file has no header row (otherwise a first row whose field is not a number is
    /// taken as the header).
    #[arg(long, requires = "csv", help_heading = "Source")]
    pub no_header: bool,
    /// Generate 0, 1, ..., N-1 (int64 unless --dtype).
    #[arg(long, value_name = "N", help_heading = "Source")]
    pub arange: Option<u64>,
    /// Generate N evenly spaced values from START to STOP inclusive (float64 unless --dtype).
    #[arg(
        long,
        value_name = "START,STOP,N",
        allow_hyphen_values = true,
        help_heading = "Source"
    )]
    pub linspace: Option<String>,
    /// Generate a Gaussian random walk of N steps starting at 0 (float64 unless --dtype).
    #[arg(long, value_name = "N", help_heading = "Source")]
    pub random_walk: Option<u64>,
    /// Seed of --random-walk (the same seed gives the same walk; default: random).
    #[arg(
        long,
        value_name = "SEED",
        requires = "random_walk",
        help_heading = "Source"
    )]
    pub seed: Option<u64>,
    /// Generate zeros of this shape, e.g. 1000x20 (float64 unless --dtype).
    #[arg(long, value_name = "SHAPE", help_heading = "Source")]
    pub zeros: Option<String>,
    /// Element type: bool, int8..int64, uint8..uint64, float32, float64, complex64,
    /// complex128, S<n> (bytes), U<n> (unicode); numpy codes such as f4 or i8 work too.
    #[arg(
        long,
        value_name = "TYPE",
        conflicts_with = "npy",
        help_heading = "Source"
    )]
    pub dtype: Option<String>,

    #[command(flatten)]
    pub layout: LayoutArgs,
}

/// Layout and compression options of `blz create`.
#[derive(Args, Debug)]
#[command(next_help_heading = "Layout and compression")]
pub struct LayoutArgs {
    /// Extent of a chunk on each axis, e.g. 1000x20 (default: about 1 MiB per chunk).
    #[arg(long, value_name = "SHAPE")]
    pub chunkshape: Option<String>,
    /// Chunks per superchunk file (default: files of about 64 MiB).
    #[arg(long, value_name = "N")]
    pub superchunk_size: Option<u64>,
    /// Blosc codec.
    #[arg(long, default_value = "lz4", value_parser = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"])]
    pub codec: String,
    /// Compression level, 0 (none) to 9.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(0..=9))]
    pub clevel: u8,
    /// Blosc filter applied before compression.
    #[arg(long, default_value = "shuffle", value_parser = ["shuffle", "bitshuffle", "noshuffle"])]
    pub filter: String,
    /// Keep only N mantissa bits of floats (lossy; compresses noisy data much better).
    #[arg(long, value_name = "N")]
    pub truncate_bits: Option<u8>,
    /// Digest stored after each chunk.
    #[arg(long, default_value = "crc32", value_parser = ["none", "adler32", "crc32", "md5", "sha1", "sha224", "sha256", "sha384", "sha512"])]
    pub checksum: String,
    /// Bytes reserved after each chunk so that modified chunks can be rewritten in place.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    pub slack: u32,
    /// Fill value for padding and growth (JSON, or nan/inf/text; default 0, false or "").
    #[arg(long, value_name = "VALUE", allow_hyphen_values = true)]
    pub fill: Option<String>,
    /// Store elements big-endian (default: this machine's byte order).
    #[arg(long)]
    pub big_endian: bool,
    /// A user attribute, KEY=JSON (repeatable).
    #[arg(long = "attr", value_name = "KEY=JSON")]
    pub attrs: Vec<String>,
    /// Replace an existing dataset at PATH.
    #[arg(long)]
    pub overwrite: bool,
}

/// Arguments of `blz get`.
#[derive(Args, Debug)]
pub struct GetArgs {
    /// The dataset directory.
    pub path: PathBuf,
    /// What to read, numpy-style (see below); default: everything.
    #[arg(allow_hyphen_values = true)]
    pub selection: Option<String>,
    /// Write the selection to this .npy file (the dataset's dtype and byte order) instead of
    /// printing it; for a table, to this CSV file, or to a .npy file of records (a field per
    /// column).
    #[arg(long, value_name = "FILE.npy|FILE.csv", conflicts_with_all = ["json", "all"])]
    pub out: Option<PathBuf>,
    /// Tables: the columns to read, by path, separated by commas (default: all).
    #[arg(long, value_name = "A,B,...")]
    pub columns: Option<String>,
    /// Tables: read these rows (numbers separated by commas; negative counts from the end)
    /// instead of a selection.
    #[arg(
        long,
        value_name = "I,J,...",
        conflicts_with = "selection",
        allow_hyphen_values = true
    )]
    pub rows: Option<String>,
    /// Tables: write one .npy file per selected column into this directory.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["json", "all", "out"])]
    pub out_dir: Option<PathBuf>,
    /// Print the values as (nested) JSON arrays.
    #[arg(long)]
    pub json: bool,
    /// Print every value even when there are more than 1000.
    #[arg(long)]
    pub all: bool,
}

/// Arguments of `blz append`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("source").required(true).multiple(false).args(["npy", "csv"])))]
pub struct AppendArgs {
    /// The dataset directory.
    pub path: PathBuf,
    /// Append the rows of a numpy .npy file (to a table: records with a field per column).
    #[arg(long, value_name = "FILE.npy")]
    pub npy: Option<PathBuf>,
    /// Append the values of one column of a CSV file (with --column), or whole rows to a
    /// table.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// The CSV column: a name from the header row, or a 0-based index.
    #[arg(long, value_name = "NAME|INDEX", requires = "csv")]
    pub column: Option<String>,
    /// CSV field separator.
    #[arg(long, value_name = "CHAR", default_value = ",", requires = "csv")]
    pub delimiter: char,
    /// The CSV file has no header row.
    #[arg(long, requires = "csv")]
    pub no_header: bool,
}

/// Arguments of `blz resize`.
#[derive(Args, Debug)]
pub struct ResizeArgs {
    /// The dataset directory.
    pub path: PathBuf,
    /// New extent of axis 0.
    pub rows: u64,
}

/// Arguments of `blz attrs`.
#[derive(Args, Debug)]
pub struct AttrsArgs {
    /// The dataset directory.
    pub path: PathBuf,
    /// Set an attribute, KEY=JSON (repeatable).
    #[arg(long = "set", value_name = "KEY=JSON")]
    pub set: Vec<String>,
    /// Delete an attribute (repeatable).
    #[arg(long = "delete", value_name = "KEY")]
    pub delete: Vec<String>,
}

/// Runs a dataset subcommand.
pub fn run(cmd: &DatasetCommand) -> Result<(), Failure> {
    match cmd {
        DatasetCommand::Create(a) if a.csv.is_some() && a.column.is_none() => table::create(a),
        // A .npy file of records makes a table; any other is an array (whose reader reports
        // a file that is not .npy at all).
        DatasetCommand::Create(a) => match a.npy.as_deref().map(RecordReader::open) {
            Some(Ok(Some(rec))) => table::create_npy(a, rec),
            Some(Err(e)) => Err(Failure::new(e)),
            _ => create(a),
        },
        DatasetCommand::Get(a) if table::is_table(&a.path) => table::get(a),
        DatasetCommand::Get(a) => get(a),
        DatasetCommand::Append(a) if table::is_table(&a.path) => table::append(a),
        DatasetCommand::Append(a) => append(a),
        DatasetCommand::Resize(a) if table::is_table(&a.path) => table::resize(a),
        DatasetCommand::Resize(a) => resize(a),
        DatasetCommand::Attrs(a) if table::is_table(&a.path) => table::attrs(a),
        DatasetCommand::Attrs(a) => attrs(a),
        DatasetCommand::Verify(a) if blz::layer::is_layer(&a.path) => {
            crate::layer::layer_verify(&a.path)
        }
        DatasetCommand::Verify(a) if table::is_table(&a.path) => table::verify(&a.path),
        DatasetCommand::Verify(a) => verify(&a.path),
        DatasetCommand::Compact(a) if table::is_table(&a.path) => table::compact(&a.path),
        DatasetCommand::Compact(a) => compact(&a.path),
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// Opens a dataset, explaining a missing path or a directory that is not a dataset.
fn open(path: &Path, write: bool) -> Result<Dataset, Failure> {
    if !path.exists() {
        return Err(Failure::new(format!("{}: no such dataset", path.display())));
    }
    if !path.is_dir() {
        return Err(Failure::new(format!(
            "{}: not a dataset (datasets are directories)",
            path.display()
        )));
    }
    if !path.join("meta").is_dir() {
        return Err(Failure::new(format!(
            "{}: not a blz dataset (no meta directory)",
            path.display()
        )));
    }
    Ok(if write {
        Dataset::open_rw(path)?
    } else {
        Dataset::open(path)?
    })
}

/// A progress bar on standard error, hidden when standard error is not a terminal.
pub(crate) fn progress(total: u64, what: &str, unit: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let template = format!("{{msg}} [{{bar:40}}] {{human_pos}}/{{human_len}} {unit} ({{eta}})");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    pb
}

/// `1.5 MiB` for a byte count.
pub(crate) fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut x = bytes as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{x:.1} {}", UNITS[u])
    }
}

/// Parses `1000x20` (or `1000,20`, or `1000`).
pub(crate) fn parse_shape(s: &str, what: &str) -> Result<Vec<u64>, Failure> {
    s.split(['x', 'X', ','])
        .map(|p| {
            p.trim().parse::<u64>().map_err(|_| {
                Failure::new(format!(
                    "{what} {s:?}: expected extents separated by 'x', e.g. 1000x20"
                ))
            })
        })
        .collect()
}

pub(crate) fn parse_dtype(s: &str) -> Result<DType, Failure> {
    DType::parse_descr(s).map(|(d, _)| d).map_err(|_| {
        Failure::new(format!(
            "unknown dtype {s:?} (expected bool, int8..int64, uint8..uint64, float32, float64, \
             complex64, complex128, S<n> or U<n>)"
        ))
    })
}

/// Splits `KEY=JSON`.
pub(crate) fn parse_kv(s: &str, opt: &str) -> Result<(String, serde_json::Value), Failure> {
    let (k, v) = s.split_once('=').ok_or_else(|| {
        Failure::new(format!(
            "{opt} {s:?}: expected KEY=JSON, e.g. 'units=\"m\"'"
        ))
    })?;
    if k.is_empty() {
        return Err(Failure::new(format!("{opt} {s:?}: empty key")));
    }
    let value = serde_json::from_str(v).map_err(|e| {
        Failure::new(format!(
            "{opt} {s:?}: the value is not JSON ({e}); quote strings, e.g. '{k}=\"{v}\"'"
        ))
    })?;
    Ok((k.to_string(), value))
}

/// Bytes read, converted and encoded at a time: [`BATCH_BYTES`], or `BLZ_BATCH_BYTES` when
/// set (tests make it small so that a kill lands between batches, as in a large input).
pub(crate) fn batch_bytes() -> u64 {
    std::env::var("BLZ_BATCH_BYTES")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&b| b > 0)
        .unwrap_or(BATCH_BYTES)
}

/// Rows of `row_bytes` per batch: about [`batch_bytes`] (the library carries what does not
/// fill a chunk to the next batch).
fn batch_rows(row_bytes: u64) -> u64 {
    (batch_bytes() / row_bytes.max(1)).max(1)
}

/// Hands `batches`, read from a user's input, to a library append that commits them once;
/// a failure of the input itself (a bad cell, a short file) is reported whole, as the input
/// said it.
pub(crate) fn commit_batches<B, T>(
    batches: impl Iterator<Item = Result<B, Failure>>,
    append: impl FnOnce(&mut dyn Iterator<Item = blz::Result<B>>) -> blz::Result<T>,
) -> Result<T, Failure> {
    let mut failed: Option<Failure> = None;
    let mut it = batches.map(|b| {
        b.map_err(|f| {
            let e = blz::Error::InvalidArgument(f.message.clone());
            failed = Some(f);
            e
        })
    });
    let result = append(&mut it);
    drop(it);
    match (result, failed) {
        (Ok(t), _) => Ok(t),
        (Err(_), Some(f)) => Err(f),
        (Err(e), None) => Err(e.into()),
    }
}

/// Feeds every row of `src` (read in batches, with a progress bar) to `append`, a library
/// call that commits them in one transaction; `shape` is the dataset's (its first extent
/// aside), which sizes the batches.
fn append_all<T>(
    src: &mut dyn Rows,
    shape: &[u64],
    what: &str,
    append: impl FnOnce(&mut dyn Iterator<Item = blz::Result<Vec<u8>>>) -> blz::Result<T>,
) -> Result<T, Failure> {
    let row_bytes = shape[1..].iter().product::<u64>() * src.dtype().itemsize() as u64;
    let batch = batch_rows(row_bytes);
    let pb = progress(src.rows(), what, "rows");
    let batches = std::iter::from_fn(|| match src.next_rows(batch) {
        Ok(Some((bytes, n))) => {
            pb.inc(n);
            Some(Ok(bytes))
        }
        Ok(None) => None,
        Err(e) => Some(Err(Failure::new(e))),
    });
    let result = commit_batches(batches, append);
    pb.finish_and_clear();
    result
}

/// `1 file`, `3 files`.
pub(crate) fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn shape_str(shape: &[u64]) -> String {
    format!(
        "[{}]",
        shape
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

// ---------------------------------------------------------------------------------------------
// create

fn csv_spec(
    path: &Path,
    column: &str,
    delimiter: char,
    no_header: bool,
) -> Result<CsvSpec, Failure> {
    let delimiter = u8::try_from(delimiter)
        .ok()
        .filter(u8::is_ascii)
        .ok_or_else(|| {
            Failure::new(format!(
                "--delimiter {delimiter:?}: use a single ASCII character"
            ))
        })?;
    Ok(CsvSpec {
        path: path.to_path_buf(),
        column: column.to_string(),
        delimiter,
        no_header,
    })
}

fn random_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ u64::from(std::process::id()).rotate_left(32)
}

/// The row source `blz create` reads from.
fn create_source(a: &CreateArgs, seed: u64) -> Result<Box<dyn Rows>, Failure> {
    let dtype = a.dtype.as_deref().map(parse_dtype).transpose()?;
    if let Some(p) = &a.npy {
        return Ok(Box::new(NpyReader::open(p)?));
    }
    if let Some(p) = &a.csv {
        let spec = csv_spec(
            p,
            a.column.as_deref().unwrap_or_default(),
            a.delimiter,
            a.no_header,
        )?;
        let plan = sources::scan(&spec, dtype)?;
        return Ok(Box::new(CsvRows::new(plan)?));
    }
    let gen = if let Some(n) = a.arange {
        Generated::Arange {
            n,
            dtype: dtype.unwrap_or(DType::I64),
        }
    } else if let Some(spec) = &a.linspace {
        let parts: Vec<&str> = spec.split(',').map(str::trim).collect();
        let bad = || {
            Failure::new(format!(
                "--linspace {spec:?}: expected START,STOP,N, e.g. 0,1,101"
            ))
        };
        let [start, stop, n] = parts.as_slice() else {
            return Err(bad());
        };
        Generated::Linspace {
            start: start.parse().map_err(|_| bad())?,
            stop: stop.parse().map_err(|_| bad())?,
            n: n.parse().map_err(|_| bad())?,
            dtype: dtype.unwrap_or(DType::F64),
        }
    } else if let Some(n) = a.random_walk {
        Generated::RandomWalk {
            n,
            dtype: dtype.unwrap_or(DType::F64),
            rng: SplitMix(seed),
            pos: 0.0,
        }
    } else if let Some(s) = &a.zeros {
        Generated::Zeros {
            shape: parse_shape(s, "--zeros")?,
            dtype: dtype.unwrap_or(DType::F64),
        }
    } else {
        return Err(Failure::new(
            "give a source: --npy, --csv, --arange, --linspace, --random-walk or --zeros",
        ));
    };
    Ok(Box::new(GenRows::new(gen)?))
}

/// Dataset creation options from the command line.
fn create_options(
    l: &LayoutArgs,
    dtype: DType,
    rank: usize,
    rows: u64,
) -> Result<CreateOptions, Failure> {
    let chunkshape = l
        .chunkshape
        .as_deref()
        .map(|s| parse_shape(s, "--chunkshape"))
        .transpose()?;
    if let Some(c) = &chunkshape {
        if c.len() != rank {
            return Err(Failure::new(format!(
                "--chunkshape {}: the data has {rank} axes, the chunkshape {}",
                sources::shape_text(c),
                c.len()
            )));
        }
    }
    let codec: Codec = l
        .codec
        .parse()
        .map_err(|e: blz::blosc::CodecError| Failure::new(e.0))?;
    let mut filters = Vec::new();
    let mut mantissa_bits = None;
    if let Some(bits) = l.truncate_bits {
        filters.push(FilterName::Truncate);
        mantissa_bits = Some(bits);
    }
    match l.filter.as_str() {
        "shuffle" => filters.push(FilterName::Shuffle),
        "bitshuffle" => filters.push(FilterName::Bitshuffle),
        _ => {}
    }
    let checksum = Checksum::from_name(&l.checksum)
        .ok_or_else(|| Failure::new(format!("unknown checksum {:?}", l.checksum)))?;
    let fill = match &l.fill {
        None => serde_json::Value::Null,
        Some(s) => serde_json::from_str(s).unwrap_or_else(|_| serde_json::Value::String(s.clone())),
    };
    if !fill.is_null() {
        blz::dtype::value_to_bytes(&fill, dtype, Endianness::native()).map_err(|_| {
            Failure::new(format!(
                "--fill {}: does not fit dtype {dtype}",
                l.fill.as_deref().unwrap_or("")
            ))
        })?;
    }
    let mut attributes = serde_json::Map::new();
    for kv in &l.attrs {
        let (k, v) = parse_kv(kv, "--attr")?;
        attributes.insert(k, v);
    }
    let compression = Compression {
        codec,
        clevel: l.clevel,
        filters,
        mantissa_bits,
        blocksize: 0,
    };
    compression.validate(dtype)?;
    if l.superchunk_size == Some(0) {
        return Err(Failure::new("--superchunk-size must be at least 1"));
    }
    Ok(CreateOptions {
        chunkshape,
        superchunksize: l.superchunk_size,
        compression,
        checksum,
        slack: l.slack,
        fill,
        endianness: if l.big_endian {
            Endianness::Big
        } else {
            Endianness::native()
        },
        expectedlen: Some(rows),
        attributes,
        overwrite: l.overwrite,
    })
}

/// `blz create`.
pub fn create(a: &CreateArgs) -> Result<(), Failure> {
    let seed = a.seed.unwrap_or_else(random_seed);
    let mut src = create_source(a, seed)?;
    let dtype = src.dtype();
    let mut shape = vec![0u64];
    shape.extend(src.row_shape());
    let opts = create_options(&a.layout, dtype, shape.len(), src.rows())?;
    // One step: built beside the path and renamed into place, so a failure or a kill leaves
    // no dataset behind.
    let ds = append_all(src.as_mut(), &shape, "create", |b| {
        Dataset::create_from(blz::storage::local(), &a.path, dtype, &shape, &opts, b)
    })?;
    let s = ds.sizes();
    let ratio = if s.cbytes > 0 {
        format!("{:.2}x", s.nbytes as f64 / s.cbytes as f64)
    } else {
        "-".into()
    };
    say!(
        "created {}: {} {}, {} -> {} ({ratio})",
        a.path.display(),
        dtype,
        shape_str(ds.shape()),
        human(s.nbytes),
        human(s.cbytes)
    );
    if a.random_walk.is_some() && a.seed.is_none() {
        say!("random walk seed: {seed} (pass --seed {seed} to repeat it)");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// info

/// The facts `blz info` shows about a dataset, as JSON.
fn info_json(path: &Path, ds: &Dataset) -> Result<serde_json::Value, Failure> {
    let m = ds.storage_meta();
    let s = ds.sizes();
    let mut files = Vec::new();
    let mut disk = 0u64;
    for f in 0..ds.nfiles() {
        let p = ds.superchunk_path(f);
        let name = p
            .strip_prefix(path)
            .unwrap_or(&p)
            .to_string_lossy()
            .into_owned();
        // A file that cannot be reached (a brick down, a file removed) is described as
        // such; the rest of the dataset still is.
        match std::fs::metadata(&p) {
            Ok(m) => {
                disk += m.len();
                files.push(serde_json::json!({ "name": name, "size": m.len() }));
            }
            Err(e) => {
                let missing = e.kind() == std::io::ErrorKind::NotFound;
                files.push(serde_json::json!({
                    "name": name,
                    "size": null,
                    "problem": if missing { "missing".to_string() } else { e.to_string() },
                }));
            }
        }
    }
    let filters: Vec<&str> = m
        .compression
        .filters
        .iter()
        .map(|f| match f {
            FilterName::Truncate => "truncate",
            FilterName::Shuffle => "shuffle",
            FilterName::Bitshuffle => "bitshuffle",
        })
        .collect();
    let ratio = (s.cbytes > 0).then(|| s.nbytes as f64 / s.cbytes as f64);
    Ok(serde_json::json!({
        "path": path.display().to_string(),
        "shape": ds.shape(),
        "dtype": m.dtype.name(),
        "descr": m.dtype.descr(m.endianness),
        "endianness": m.endianness,
        "chunkshape": m.chunkshape,
        "superchunksize": m.superchunksize,
        "codec": m.compression.codec.name(),
        "clevel": m.compression.clevel,
        "filters": filters,
        "mantissa_bits": m.compression.mantissa_bits,
        "blocksize": m.compression.blocksize,
        "checksum": m.checksum.name(),
        "slack": m.slack,
        "fill": m.dflt,
        "nbytes": s.nbytes,
        "cbytes": s.cbytes,
        "ratio": ratio,
        "chunks": ds.nchunks(),
        "nfiles": ds.nfiles(),
        "disk_bytes": disk,
        "files": files,
        "attributes": ds.attrs()?,
    }))
}

/// `blz info PATH` for a dataset directory: layout, compression, sizes, files, attributes.
pub fn dataset_info(path: &Path, json: bool) -> Result<(), Failure> {
    if table::is_table(path) {
        return table::info(path, json);
    }
    let ds = open(path, false)?;
    let j = info_json(path, &ds)?;
    if json {
        say!("{}", serde_json::to_string_pretty(&j).unwrap_or_default());
        return Ok(());
    }
    let m = ds.storage_meta();
    let s = ds.sizes();
    let mut o = std::io::stdout().lock();
    let mut w = |k: &str, v: String| writeln!(o, "{k:<13}{v}");
    let filters = if m.compression.filters.is_empty() {
        "none".to_string()
    } else {
        j["filters"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    let mut lines = vec![
        ("path", path.display().to_string()),
        ("shape", shape_str(ds.shape())),
        (
            "dtype",
            format!("{} ({})", m.dtype, m.dtype.descr(m.endianness)),
        ),
        (
            "endianness",
            match m.endianness {
                Endianness::Little => "little".into(),
                Endianness::Big => "big".into(),
            },
        ),
        ("chunkshape", shape_str(&m.chunkshape)),
        (
            "superchunk",
            format!("{} chunks per file", m.superchunksize),
        ),
        (
            "codec",
            format!("{} (clevel {})", m.compression.codec, m.compression.clevel),
        ),
        ("filters", filters),
    ];
    if let Some(b) = m.compression.mantissa_bits {
        lines.push(("mantissa", format!("{b} bits kept (lossy)")));
    }
    lines.extend([
        ("checksum", m.checksum.name().to_string()),
        ("slack", format!("{} bytes per chunk", m.slack)),
        ("fill", m.dflt.to_string()),
        ("nbytes", format!("{} ({})", s.nbytes, human(s.nbytes))),
        ("cbytes", format!("{} ({})", s.cbytes, human(s.cbytes))),
        (
            "ratio",
            j["ratio"]
                .as_f64()
                .map_or("-".into(), |r| format!("{r:.2}x")),
        ),
        ("chunks", ds.nchunks().to_string()),
        (
            "files",
            format!(
                "{} ({} on disk)",
                ds.nfiles(),
                human(j["disk_bytes"].as_u64().unwrap_or(0))
            ),
        ),
    ]);
    for (k, v) in lines {
        w(&format!("{k}:"), v).map_err(out_err)?;
    }
    let files = j["files"].as_array().cloned().unwrap_or_default();
    const SHOWN: usize = 20;
    for (i, f) in files.iter().enumerate() {
        if files.len() > SHOWN && i == SHOWN - 5 {
            writeln!(o, "  ... {} more (--json lists all)", files.len() - SHOWN)
                .map_err(out_err)?;
        }
        if files.len() > SHOWN && i >= SHOWN - 5 && i < files.len() - 5 {
            continue;
        }
        let name = f["name"].as_str().unwrap_or("");
        match (f["size"].as_u64(), f["problem"].as_str()) {
            (Some(size), _) => writeln!(o, "  {name}  {size} bytes"),
            (None, problem) => writeln!(o, "  {name}  {}", problem.unwrap_or("unreadable")),
        }
        .map_err(out_err)?;
    }
    let attrs = &j["attributes"];
    let text = if attrs.as_object().is_some_and(serde_json::Map::is_empty) {
        "{}".to_string()
    } else {
        serde_json::to_string(attrs).unwrap_or_default()
    };
    writeln!(o, "{:<13}{text}", "attributes:").map_err(out_err)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// get

/// The sub-selection of output positions `p..q` of one axis.
fn sub_axis(s: &AxisSel, p: u64, q: u64) -> AxisSel {
    let start = if s.reversed {
        s.start + (s.count - q) * s.step
    } else {
        s.start + p * s.step
    };
    AxisSel {
        start,
        step: s.step,
        count: q - p,
        reversed: s.reversed,
        keep: s.keep,
    }
}

/// Reads a resolved selection as native-endian bytes in output order (C order over the
/// counts, reversed axes reversed).
fn read_ordered(ds: &Dataset, sel: &[AxisSel]) -> Result<Vec<u8>, Failure> {
    let bytes = ds.read_bytes(sel)?;
    if !sel.iter().any(|s| s.reversed && s.count > 1) {
        return Ok(bytes);
    }
    let mut shape: Vec<usize> = sel.iter().map(|s| s.count as usize).collect();
    shape.push(ds.dtype().itemsize());
    let mut v = ArrayViewD::from_shape(IxDyn(&shape), &bytes)
        .map_err(|e| Failure::new(format!("internal: {e}")))?;
    for (ax, s) in sel.iter().enumerate() {
        if s.reversed {
            v.invert_axis(Axis(ax));
        }
    }
    Ok(v.iter().copied().collect())
}

/// Reads a selection in batches along its first kept axis, handing each batch (output
/// positions `p..p+n` of that axis) to `f`.
fn for_each_batch(
    ds: &Dataset,
    sel: &[AxisSel],
    mut f: impl FnMut(Vec<u8>, u64, u64) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let Some(a) = sel.iter().position(|s| s.keep) else {
        return f(read_ordered(ds, sel)?, 0, 1);
    };
    let unit: u64 = sel
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != a)
        .map(|(_, s)| s.count)
        .product::<u64>()
        * ds.dtype().itemsize() as u64;
    let per = (BATCH_BYTES / unit.max(1)).max(1);
    let n = sel[a].count;
    let mut p = 0;
    while p < n {
        let q = (p + per).min(n);
        let mut sub = sel.to_vec();
        sub[a] = sub_axis(&sel[a], p, q);
        f(read_ordered(ds, &sub)?, p, q - p)?;
        p = q;
    }
    Ok(())
}

/// The edges of a large selection, ready to print.
struct Edges {
    /// Native-endian elements in C order over `shape`.
    data: Vec<u8>,
    /// Shown extent of each kept axis.
    shape: Vec<usize>,
    /// Per kept axis: the shown position before which positions are skipped.
    gaps: Vec<Option<usize>>,
}

/// Reads the edges of a large selection (up to [`EDGE`] positions at each end of every axis).
/// Returns the data, its shape over the kept axes and where each axis skips positions.
fn read_edges(ds: &Dataset, sel: &[AxisSel]) -> Result<Edges, Failure> {
    let isz = ds.dtype().itemsize();
    // Per axis: the segments (output positions p..q, placed at offset o of the shown block).
    let segs: Vec<Vec<(u64, u64, u64)>> = sel
        .iter()
        .map(|s| {
            if s.keep && s.count > 2 * EDGE {
                vec![(0, EDGE, 0), (s.count - EDGE, s.count, EDGE)]
            } else {
                vec![(0, s.count, 0)]
            }
        })
        .collect();
    let shown: Vec<u64> = segs
        .iter()
        .map(|v| v.iter().map(|(p, q, _)| q - p).sum())
        .collect();
    let total: u64 = shown.iter().product();
    let mut out = vec![0u8; total as usize * isz];
    let bst = strides(&shown);
    let mut pick = vec![0usize; sel.len()];
    loop {
        let sub: Vec<AxisSel> = sel
            .iter()
            .zip(&pick)
            .zip(&segs)
            .map(|((s, &i), v)| sub_axis(s, v[i].0, v[i].1))
            .collect();
        let block = read_ordered(ds, &sub)?;
        let bshape: Vec<u64> = sub.iter().map(|s| s.count).collect();
        let offs: Vec<u64> = pick.iter().zip(&segs).map(|(&i, v)| v[i].2).collect();
        // Scatter the block into the shown array.
        let n: u64 = bshape.iter().product();
        let mut idx = vec![0u64; bshape.len()];
        for e in 0..n as usize {
            let pos: u64 = idx
                .iter()
                .zip(&offs)
                .zip(&bst)
                .map(|((&i, &o), &st)| (i + o) * st)
                .sum();
            let dst = pos as usize * isz;
            out[dst..dst + isz].copy_from_slice(&block[e * isz..(e + 1) * isz]);
            for ax in (0..idx.len()).rev() {
                idx[ax] += 1;
                if idx[ax] < bshape[ax] {
                    break;
                }
                idx[ax] = 0;
            }
        }
        // Next combination of segments.
        let mut ax = sel.len();
        loop {
            if ax == 0 {
                let kept: Vec<usize> = sel
                    .iter()
                    .zip(&shown)
                    .filter(|(s, _)| s.keep)
                    .map(|(_, &n)| n as usize)
                    .collect();
                let gaps = sel
                    .iter()
                    .zip(&segs)
                    .filter(|(s, _)| s.keep)
                    .map(|(_, v)| (v.len() > 1).then_some(EDGE as usize))
                    .collect();
                return Ok(Edges {
                    data: out,
                    shape: kept,
                    gaps,
                });
            }
            ax -= 1;
            pick[ax] += 1;
            if pick[ax] < segs[ax].len() {
                break;
            }
            pick[ax] = 0;
        }
    }
}

fn strides(shape: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// `blz get`.
pub fn get(a: &GetArgs) -> Result<(), Failure> {
    let ds = open(&a.path, false)?;
    if a.columns.is_some() || a.rows.is_some() || a.out_dir.is_some() {
        return Err(Failure::new(format!(
            "{}: --columns, --rows and --out-dir apply to tables; this dataset is an array",
            a.path.display()
        )));
    }
    let elems =
        Selection::parse(a.selection.as_deref().unwrap_or(""))?.to_slice_info(ds.shape())?;
    let sel = ds.resolve(&elems)?;
    let out_shape: Vec<u64> = sel.iter().filter(|s| s.keep).map(|s| s.count).collect();
    let total: u64 = out_shape.iter().product();
    let dtype = ds.dtype();
    let isz = dtype.itemsize();
    if let Some(out) = &a.out {
        return write_npy(&ds, &sel, &out_shape, out);
    }
    if a.json {
        if total > SUMMARY_THRESHOLD && !a.all {
            return Err(Failure::new(format!(
                "the selection holds {total} values; add --all to print them all as JSON, \
                 or use --out FILE.npy"
            )));
        }
        let data = read_ordered(&ds, &sel)?;
        let shape: Vec<usize> = out_shape.iter().map(|&n| n as usize).collect();
        say!("{}", show::to_json(&data, &shape, dtype));
        return Ok(());
    }
    if total == 0 {
        // Nothing on stdout (it holds values only), but say why.
        eprintln!("blz: the selection is empty (shape {out_shape:?})");
        return Ok(());
    }
    let stdout = std::io::stdout();
    let mut lock = std::io::BufWriter::new(stdout.lock());
    let mut text = Text {
        out: &mut lock,
        dtype,
        rank: out_shape.len(),
        printed: 0,
    };
    if total > SUMMARY_THRESHOLD && !a.all {
        let e = read_edges(&ds, &sel)?;
        text.entries(&e.data, &e.shape, &e.gaps, 0)
            .map_err(out_err)?;
        lock.flush().map_err(out_err)?;
        drop(lock);
        let _ = writeln!(
            std::io::stderr(),
            "({total} values of shape {}: showing the edges; --all prints everything, \
             --out FILE.npy saves them)",
            shape_str(&out_shape)
        );
        return Ok(());
    }
    let rest: Vec<usize> = out_shape.iter().skip(1).map(|&n| n as usize).collect();
    let gaps = vec![None; out_shape.len().max(1)];
    for_each_batch(&ds, &sel, |data, p, n| {
        let mut shape = vec![n as usize];
        shape.extend(&rest);
        debug_assert_eq!(data.len(), shape.iter().product::<usize>() * isz);
        text.entries(&data, &shape, &gaps, p as usize)
            .map_err(out_err)
    })?;
    lock.flush().map_err(out_err)?;
    Ok(())
}

/// `blz get --out FILE.npy`: the selection, with the dataset's dtype and byte order.
fn write_npy(ds: &Dataset, sel: &[AxisSel], shape: &[u64], out: &Path) -> Result<(), Failure> {
    let m = ds.storage_meta();
    let (dtype, endian) = (m.dtype, m.endianness);
    let mut w = NpyWriter::create(out, dtype, endian, shape)?;
    let total: u64 = shape.iter().product();
    let pb = progress(total * dtype.itemsize() as u64, "get", "bytes");
    let res = for_each_batch(ds, sel, |mut data, _, _| {
        if endian != Endianness::native() {
            swap_bytes(&mut data, dtype.swap_unit());
        }
        pb.inc(data.len() as u64);
        w.write(&data).map_err(Failure::new)
    });
    pb.finish_and_clear();
    match res {
        Ok(()) => Ok(w.finish()?),
        Err(e) => {
            w.abandon();
            Err(e)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// append, resize

/// `blz append`.
pub fn append(a: &AppendArgs) -> Result<(), Failure> {
    let mut ds = open(&a.path, true)?;
    let dtype = ds.dtype();
    let (mut src, name): (Box<dyn Rows>, PathBuf) = if let Some(p) = &a.npy {
        let r = NpyReader::open(p)?;
        if r.header.dtype != dtype {
            return Err(Failure::new(format!(
                "{}: holds {}, the dataset holds {dtype}; convert it first, e.g. arr.astype('{}')",
                p.display(),
                r.header.dtype,
                dtype.name()
            )));
        }
        (Box::new(r), p.clone())
    } else if let Some(p) = &a.csv {
        let Some(column) = a.column.as_deref() else {
            return Err(Failure::new(format!(
                "{}: an array takes one CSV column: give --column NAME|INDEX",
                a.path.display()
            )));
        };
        let spec = csv_spec(p, column, a.delimiter, a.no_header)?;
        let plan = sources::scan(&spec, Some(dtype))?;
        (Box::new(CsvRows::new(plan)?), p.clone())
    } else {
        return Err(Failure::new("give a source: --npy or --csv"));
    };
    if src.row_shape() != ds.shape()[1..] {
        let mut want = vec!["n".to_string()];
        want.extend(ds.shape()[1..].iter().map(u64::to_string));
        return Err(Failure::new(format!(
            "{}: an array of shape {} does not fit the dataset's shape {}: expected shape [{}]",
            name.display(),
            shape_str(&src.shape()),
            shape_str(ds.shape()),
            want.join(", ")
        )));
    }
    let before = ds.shape().to_vec();
    let n = append_all(src.as_mut(), &before, "append", |b| ds.append_batches(b))?;
    say!(
        "appended {n} rows to {}: {} -> {}",
        a.path.display(),
        shape_str(&before),
        shape_str(ds.shape())
    );
    Ok(())
}

/// `blz resize`.
pub fn resize(a: &ResizeArgs) -> Result<(), Failure> {
    let mut ds = open(&a.path, true)?;
    let before = ds.shape().to_vec();
    ds.resize(a.rows)?;
    say!(
        "resized {}: {} -> {}",
        a.path.display(),
        shape_str(&before),
        shape_str(ds.shape())
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// attrs

/// `blz attrs`.
pub fn attrs(a: &AttrsArgs) -> Result<(), Failure> {
    edit_attrs(a, open)
}

/// A dataset with user attributes (an array or a table).
pub(crate) trait Attributes {
    /// The user attributes.
    fn get(&self) -> blz::Result<serde_json::Map<String, serde_json::Value>>;
    /// Replaces the user attributes.
    fn set(&mut self, attrs: serde_json::Map<String, serde_json::Value>) -> blz::Result<()>;
}

impl Attributes for Dataset {
    fn get(&self) -> blz::Result<serde_json::Map<String, serde_json::Value>> {
        self.attrs()
    }
    fn set(&mut self, attrs: serde_json::Map<String, serde_json::Value>) -> blz::Result<()> {
        self.set_attrs(attrs)
    }
}

/// `blz attrs` on a dataset that `open(path, write)` opens: prints the attributes, or
/// applies `--delete` and `--set`.
pub(crate) fn edit_attrs<D: Attributes>(
    a: &AttrsArgs,
    open: impl Fn(&Path, bool) -> Result<D, Failure>,
) -> Result<(), Failure> {
    if a.set.is_empty() && a.delete.is_empty() {
        let ds = open(&a.path, false)?;
        let attrs = serde_json::Value::Object(ds.get()?);
        say!(
            "{}",
            serde_json::to_string_pretty(&attrs).unwrap_or_default()
        );
        return Ok(());
    }
    let sets = a
        .set
        .iter()
        .map(|kv| parse_kv(kv, "--set"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ds = open(&a.path, true)?;
    let mut attrs = ds.get()?;
    for k in &a.delete {
        if attrs.shift_remove(k).is_none() {
            return Err(Failure::new(format!(
                "{}: no attribute {k:?} to delete",
                a.path.display()
            )));
        }
    }
    for (k, v) in sets {
        attrs.insert(k, v);
    }
    ds.set(attrs)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// verify, compact

/// `blz verify`.
pub fn verify(path: &Path) -> Result<(), Failure> {
    let ds = open(path, false)?;
    let n = ds.nchunks();
    let pb = progress(n, "verify", "chunks");
    let errors = ds.verify(|done, total| {
        pb.set_length(total);
        pb.set_position(done);
    });
    pb.finish_and_clear();
    let digests = ds.storage_meta().checksum;
    let digests = (digests != blz::blpk::Checksum::None).then(|| digests.name());
    report_verify(path, &errors, n, &plural(ds.nfiles(), "file"), digests)
}

/// What a problem `verify` found is: damage, a file that is not there (a GlusterFS brick
/// that is down, a file removed by hand), or one that cannot be read.
fn problem_kind(e: &blz::Error) -> &'static str {
    match e {
        blz::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => "missing",
        blz::Error::Io { .. } => "unreadable",
        blz::Error::InvalidMetadata { .. } => "corrupt meta",
        _ => "corrupt",
    }
}

/// Prints what `verify` found in the `chunks` chunks of the dataset at `path` (held in
/// `place`: "3 files", "5 columns"), and fails when `errors` is not empty. `digests`: what
/// the chunks' checksums are ("crc32"), `None` when they have none (then only decoding
/// was checked, and `verify` says so).
pub(crate) fn report_verify(
    path: &Path,
    errors: &[blz::Error],
    chunks: u64,
    place: &str,
    digests: Option<&str>,
) -> Result<(), Failure> {
    // A writer's commit met while reading: the caller verifies the new state.
    if let Some(e @ blz::Error::Changed { .. }) = errors.first() {
        return Err(Failure::from(blz::Error::Changed {
            path: match e {
                blz::Error::Changed { path } => path.clone(),
                _ => path.to_path_buf(),
            },
        }));
    }
    // A damaged file header makes every chunk of the file fail the same way: say it once.
    let mut seen: Vec<(String, &str, u64)> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for e in errors {
        let m = describe(e);
        match index.get(&m) {
            Some(&i) => seen[i].2 += 1,
            None => {
                index.insert(m.clone(), seen.len());
                seen.push((m, problem_kind(e), 1));
            }
        }
    }
    for (m, kind, c) in &seen {
        if *c > 1 {
            say!("{kind}: {m} ({c} chunks)");
        } else {
            say!("{kind}: {m}");
        }
    }
    let checked = match digests {
        Some(d) => format!("verified ({d} digests)"),
        None => {
            "decoded (no digests are stored: damage that still decodes cannot be seen)".to_string()
        }
    };
    if errors.is_empty() {
        say!(
            "{}: {} in {place} {checked}, all intact",
            path.display(),
            plural(chunks, "chunk"),
        );
        Ok(())
    } else {
        let count = |k: &str| errors.iter().filter(|e| problem_kind(e) == k).count();
        let parts: Vec<String> = ["corrupt", "corrupt meta", "missing", "unreadable"]
            .iter()
            .map(|k| (k, count(k)))
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        say!(
            "{}: {} in {place} {checked}, {}",
            path.display(),
            plural(chunks, "chunk"),
            parts.join(", ")
        );
        Err(Failure::new(format!(
            "{}: {}",
            path.display(),
            if count("corrupt") == errors.len() {
                format!("{} of {chunks} chunks are corrupt", errors.len())
            } else {
                format!("not intact ({})", parts.join(", "))
            }
        )))
    }
}

/// Bytes on disk of the given files (missing ones count 0).
pub(crate) fn disk_bytes(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum()
}

/// Runs a compaction of the superchunk `files` of the dataset at `path` behind a spinner and
/// says what it saved.
pub(crate) fn run_compaction(
    path: &Path,
    files: &[PathBuf],
    compact: impl FnOnce() -> blz::Result<u64>,
) -> Result<(), Failure> {
    let before = disk_bytes(files);
    let pb = if std::io::stderr().is_terminal() {
        let pb = ProgressBar::new_spinner();
        pb.set_message(format!("compacting {}", plural(files.len() as u64, "file")));
        pb.enable_steady_tick(std::time::Duration::from_millis(120));
        pb
    } else {
        ProgressBar::hidden()
    };
    let saved = compact();
    pb.finish_and_clear();
    let saved = saved?;
    say!(
        "compacted {} of {}: saved {saved} bytes ({} -> {})",
        plural(files.len() as u64, "file"),
        path.display(),
        human(before),
        human(disk_bytes(files))
    );
    Ok(())
}

/// `blz compact`.
pub fn compact(path: &Path) -> Result<(), Failure> {
    let mut ds = open(path, true)?;
    let files: Vec<PathBuf> = (0..ds.nfiles()).map(|f| ds.superchunk_path(f)).collect();
    run_compaction(path, &files, || ds.compact())
}
