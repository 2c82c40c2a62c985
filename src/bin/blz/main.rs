//! The `blz` command line: works on single superchunk files (`pack`, `unpack`, `info`) and
//! on datasets. It only calls blz's public library API.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// blz: chunked, compressed, persistent arrays (Blosc chunks in bloscpack superchunk files).
#[derive(Parser, Debug)]
#[command(name = "blz", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {}

#[expect(
    unreachable_code,
    reason = "Command has no variants until the subcommands land"
)]
fn main() -> ExitCode {
    match Cli::parse().command {}
}
