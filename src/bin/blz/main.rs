//! The `blz` command line: works on single superchunk files (`pack`, `unpack`, `info`) and
//! on datasets. It only calls blz's public library API.

mod dataset;
mod npy;
mod selection;
mod show;
mod sources;

use clap::{Parser, Subcommand};
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
    /// Show a dataset's layout, compression, sizes, files and attributes.
    Info(InfoArgs),
    #[command(flatten)]
    Dataset(dataset::DatasetCommand),
}

/// Arguments of `blz info`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  blz info temps.blz\n  blz info temps.blz --json")]
struct InfoArgs {
    /// The dataset directory.
    path: std::path::PathBuf,
    /// Print everything as one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// `blz info PATH`: a directory is a dataset.
fn info(path: &Path, json: bool) -> Result<(), dataset::Failure> {
    if path.is_dir() || !path.exists() {
        return dataset::dataset_info(path, json);
    }
    Err(dataset::Failure::new(format!(
        "{}: not a dataset directory",
        path.display()
    )))
}

fn run(cli: Cli) -> Result<(), dataset::Failure> {
    match cli.command {
        Command::Info(a) => info(&a.path, a.json),
        Command::Dataset(c) => dataset::run(&c),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            let text = e.render().to_string();
            let text = text.strip_prefix("error: ").unwrap_or(&text);
            let _ = write!(std::io::stderr(), "blz: {text}");
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            if !f.message.is_empty() {
                let _ = writeln!(std::io::stderr(), "blz: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}
