//! The `blz` command line: works on single superchunk files (`pack`, `unpack`, `info`) and
//! on datasets. It only calls blz's public library API.

mod args;
mod attrs;
mod dataset;
mod dist;
mod eval;
mod failure;
mod file;
mod import;
mod layer;
mod parse;
mod report;
mod show;
mod sources;
mod sql;
mod table;

use args::DatasetCommand;
use blz::AnyDataset;
use clap::{Parser, Subcommand};
use failure::{say, Failure};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// blz: chunked, compressed, persistent arrays (Blosc chunks in bloscpack superchunk files).
#[derive(Parser, Debug)]
#[command(name = "blz", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compress a file into a superchunk file (.blp) that bloscpack can also read.
    Pack(file::PackArgs),
    /// Decompress a superchunk file back into the original bytes, verifying every digest.
    Unpack(file::UnpackArgs),
    /// Describe a dataset (directory) or a superchunk file (.blp): layout, compression,
    /// sizes, files, attributes; for a file its header, metadata and chunk table.
    Info(InfoArgs),
    #[command(flatten)]
    Dataset(DatasetCommand),
    /// Show the host and brick (or local device) holding each superchunk file of a dataset.
    Locate(dist::LocateArgs),
    /// Reduce a dataset or table column in parallel (sum, min, max, count, mean).
    Scan(dist::ScanArgs),
    /// Layer datasets: sorted columns with row groups, value indexes and filters.
    Layer(layer::LayerArgs),
    /// Import a bcolz carray (as a dataset) or ctable (as a table).
    Import(import::ImportArgs),
    /// Copy a dataset between a local directory and an object store (s3://bucket/key), or
    /// within either: the copy appears whole or not at all.
    Copy(CopyArgs),
    /// Remove the objects of an object-store dataset that no reader can still need.
    Gc(GcArgs),
    /// Run a SQL query over tables and layer datasets.
    Sql(sql::SqlArgs),
    /// Compute an array expression (`a * b + sin(c)`) into a new dataset, or reduce it.
    Eval(eval::EvalArgs),
}

/// Arguments of `blz copy`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  blz copy temps.blz s3://bucket/data/temps.blz\n  blz copy s3://bucket/data/temps.blz local.blz"
)]
struct CopyArgs {
    /// The dataset to copy: a directory or an s3://bucket/key URL.
    src: std::path::PathBuf,
    /// Where the copy goes: a directory or an s3://bucket/key URL.
    dst: std::path::PathBuf,
    /// Replace a dataset at the destination.
    #[arg(long)]
    overwrite: bool,
}

/// Arguments of `blz gc`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  blz gc s3://bucket/data/temps.blz --grace 3600")]
struct GcArgs {
    /// The dataset: an s3://bucket/key URL.
    url: String,
    /// Keep objects retired (or uploaded) less than this many seconds ago: longer than the
    /// longest read of an older state and the longest write.
    #[arg(long, default_value_t = 3600)]
    grace: u64,
}

/// `blz copy`.
fn copy(a: &CopyArgs) -> Result<(), Failure> {
    let c = blz::copy::copy_dataset(&a.src, &a.dst, a.overwrite)?;
    say!(
        "copied {} to {}: {} ({})",
        a.src.display(),
        a.dst.display(),
        report::plural(c.files, "file"),
        report::human(c.bytes)
    );
    Ok(())
}

/// `blz gc` in a build without the `s3` feature.
#[cfg(not(feature = "s3"))]
fn gc(a: &GcArgs) -> Result<(), Failure> {
    Err(Failure::new(format!(
        "{}: this blz was built without object-store support (the `s3` feature, left out \
         of the quick build examples/demo.sh makes): build the whole command line with \
         `cargo install --path cli` (or `cargo build --release -p blz-cli`)",
        a.url
    )))
}

/// `blz gc`.
#[cfg(feature = "s3")]
fn gc(a: &GcArgs) -> Result<(), Failure> {
    let s = blz::storage::ObjectStorage::open_url(&a.url)?;
    let c = blz::storage::object::collect_garbage(&s, std::time::Duration::from_secs(a.grace))?;
    say!(
        "{}: removed {}, kept {} younger than {}s",
        a.url,
        report::plural(c.deleted.len() as u64, "object"),
        report::plural(c.kept as u64, "object"),
        a.grace
    );
    Ok(())
}

/// Arguments of `blz info`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  blz info temps.blz\n  blz info temps.blz --json\n  blz info data.blp"
)]
struct InfoArgs {
    /// A dataset directory or a superchunk file (.blp).
    path: std::path::PathBuf,
    /// Print everything as one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// `blz info PATH`: a directory is a dataset (of the kind it is), a file a superchunk file.
fn info(path: &Path, json: bool) -> Result<(), Failure> {
    if !path.is_dir() && path.exists() {
        return file::info(path, json);
    }
    match dataset::open_any(path, false)? {
        AnyDataset::Array(ds) => dataset::dataset_info(path, json, ds),
        AnyDataset::Table(t) => table::info(path, json, t),
        AnyDataset::Layer(l) => layer::layer_info(path, json, l),
        other => Err(not_for(path, &other, "info")),
    }
}

/// The error for a command that does not apply to the kind of dataset at `path`.
fn not_for(path: &Path, ds: &AnyDataset, command: &str) -> Failure {
    let hint = match ds.kind() {
        blz::Kind::BcolzCarray | blz::Kind::BcolzCtable => {
            " (read it in place from Python with blz.open, or convert it with blz import)"
        }
        blz::Kind::Layer => " (see blz layer --help)",
        _ => "",
    };
    Failure::new(format!(
        "{}: this is a {} dataset, not an array or a table: blz {command} does not apply to \
         it{hint}",
        path.display(),
        ds.kind()
    ))
}

/// Runs a dataset subcommand on the dataset at its path, opened once as the kind it is
/// (`blz::open`): an array, a table, or for `info`/`verify` a layer dataset.
fn run_dataset(cmd: &DatasetCommand) -> Result<(), Failure> {
    use AnyDataset as D;
    let open = dataset::open_any;
    match cmd {
        DatasetCommand::Create(a) if a.csv.is_some() && a.column.is_none() => table::create(a),
        // A .npy file of records makes a table; any other is an array (whose reader reports
        // a file that is not .npy at all).
        DatasetCommand::Create(a) => match a.npy.as_deref().map(blz::npy::RecordReader::open) {
            Some(Ok(Some(rec))) => table::create_npy(a, rec),
            Some(Err(e)) => Err(e.into()),
            _ => dataset::create(a),
        },
        DatasetCommand::Get(a) => match open(&a.path, false)? {
            D::Array(ds) => dataset::get(a, ds),
            D::Table(t) => table::get(a, t),
            other => Err(not_for(&a.path, &other, "get")),
        },
        DatasetCommand::Append(a) => match open(&a.path, true)? {
            D::Array(ds) => dataset::append(a, ds),
            D::Table(t) => table::append(a, t),
            other => Err(not_for(&a.path, &other, "append")),
        },
        DatasetCommand::Resize(a) => match open(&a.path, true)? {
            D::Array(ds) => dataset::resize(a, ds),
            D::Table(t) => table::resize(a, t),
            other => Err(not_for(&a.path, &other, "resize")),
        },
        DatasetCommand::Attrs(a) => match open(&a.path, attrs::writes(a))? {
            D::Array(ds) => dataset::attrs(a, ds),
            D::Table(t) => table::attrs(a, t),
            other => Err(not_for(&a.path, &other, "attrs")),
        },
        DatasetCommand::Verify(a) => match open(&a.path, false)? {
            D::Array(ds) => dataset::verify(&a.path, ds),
            D::Table(t) => table::verify(&a.path, t),
            D::Layer(l) => layer::layer_verify(&a.path, l),
            other => Err(not_for(&a.path, &other, "verify")),
        },
        DatasetCommand::Compact(a) => match open(&a.path, true)? {
            D::Array(ds) => dataset::compact(&a.path, ds),
            D::Table(t) => table::compact(&a.path, t),
            other => Err(not_for(&a.path, &other, "compact")),
        },
    }
}

fn run(cli: &Cli) -> Result<(), Failure> {
    match &cli.command {
        Command::Pack(a) => file::pack(a),
        Command::Unpack(a) => file::unpack(a),
        Command::Info(a) => info(&a.path, a.json),
        Command::Dataset(c) => run_dataset(c),
        Command::Locate(a) => dist::locate(a),
        Command::Scan(a) => dist::scan(a),
        Command::Layer(a) => layer::run(a),
        Command::Import(a) => import::run(a),
        Command::Copy(a) => copy(a),
        Command::Gc(a) => gc(a),
        Command::Sql(a) => sql::run(a),
        Command::Eval(a) => eval::run(a),
    }
}

/// How many times a read that met a writer's commit is started again on the new state.
const RETRIES_AFTER_A_COMMIT: u32 = 5;

/// Runs the command; `info`, `scan` and `verify`, which print only once they have read
/// everything, start again (a few times) when a writer's commit changed the dataset under
/// them, so they report on one committed state, never on a mix or on "corruption" that a
/// commit made.
fn run_retrying(cli: &Cli) -> Result<(), Failure> {
    let retryable = matches!(
        &cli.command,
        Command::Info(_) | Command::Scan(_) | Command::Dataset(DatasetCommand::Verify(_))
    );
    let mut tries = 0;
    loop {
        match run(cli) {
            Err(f)
                if retryable
                    && f.code == failure::EXIT_CHANGED
                    && tries < RETRIES_AFTER_A_COMMIT =>
            {
                tries += 1;
            }
            r => return r,
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    ExitCode::from(2)
                } else {
                    ExitCode::SUCCESS
                };
            }
            let text = e.render().to_string();
            let text = text.strip_prefix("error: ").unwrap_or(&text);
            let _ = write!(std::io::stderr(), "blz: {text}");
            return ExitCode::from(2);
        }
    };
    if let Some(url) = memory_url_argument() {
        let _ = writeln!(
            std::io::stderr(),
            "blz: {url}: a memory:// dataset lives in the process that made it, and each blz \
             command is a process of its own: the command line works with files and s3:// \
             URLs (memory:// URLs are for the library and the Python package)"
        );
        return ExitCode::from(1);
    }
    let result = run_retrying(&cli);
    // A dataset replaced by `--overwrite` is removed in the background; wait for it.
    blz::finish_removals();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            if !f.message.is_empty() {
                let _ = writeln!(std::io::stderr(), "blz: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}

/// The first argument naming an in-memory dataset (`memory://...`, alone or as the value of
/// a `name=URL` pair such as `--table t=memory://x`): what one `blz` process would make and
/// lose at its exit, or never find.
fn memory_url_argument() -> Option<String> {
    // `args_os`: an argument that is not UTF-8 (a local path) is no URL, and no panic.
    std::env::args_os()
        .skip(1)
        .filter_map(|a| a.into_string().ok())
        .find(|a| {
            a.starts_with("memory://")
                || a.split_once('=')
                    .is_some_and(|(_, v)| v.starts_with("memory://"))
        })
}
