//! The arguments of the dataset commands (`create`, `get`, `append`, `resize`, `attrs`,
//! `verify`, `compact`) on arrays and tables alike, with their help texts.

use clap::{ArgGroup, Args, Subcommand};
use std::path::PathBuf;

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
  blz create trades.blz --csv trades.csv --schema 'qty:int32 not null,t:datetime64[ns, UTC]'
  blz create trades.blz --csv trades.csv --no-dates        # ISO dates stay strings
  blz create points.blz --npy points.npy     # np.save of a structured array

A .npy file of records (a 1-d array of a structured dtype, such as np.zeros(n,
dtype=[('id', 'i8'), ('pos', [('x', 'f8'), ('y', 'f8')])])) makes a table with a column
per field: id, pos/x, pos/y, each in its own files, with the field's type. Sub-array
fields are refused; padding between fields is dropped.

A table takes its column names from the CSV header row (a name such as pos/x makes column
x of the nested field pos). Types are inferred over the whole file unless --schema gives
them. An empty field is missing (null), as pandas and duckdb read it: a column with one is
nullable, and its type comes from the other fields: bool when every one is true/false,
int64 when every one is an integer, float64 when every one is a number, datetime64[D] when
every one is an ISO date (2020-01-31), datetime64[s] (or ms, us, ns as the fractions need)
when they are ISO timestamps (2020-01-31 12:00:00.250), zoned UTC when every one ends in Z
or an offset (+02:00), otherwise varstr; --no-dates keeps dates as strings. In --schema, a
type may end in 'not null' (an empty field is then an error, or the empty string in a
string column) or 'null', and datetime64[UNIT, ZONE] gives a zone. --codec,
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
appended in one transaction (read and written a batch of rows at a time, so memory stays
small): should writing fail midway (e.g. a full disk), no row is appended and the space
the append took is given back.
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
    /// Do not recognise ISO dates and timestamps when inferring column types (they stay
    /// strings).
    #[arg(
        long,
        requires = "csv",
        conflicts_with = "column",
        help_heading = "Source"
    )]
    pub no_dates: bool,
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
    /// Chunks per superchunk file (default: files of about 64 MiB; 16 MiB on s3://).
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
