//! `blz import SRC DST`: a bcolz carray becomes a blz dataset, a bcolz ctable a blz table.
//! Everything goes through blz's public `bcolz` module.

use crate::failure::{describe, Failure};
use crate::report::{human, progress};
use blz::bcolz::{self, ImportOptions, Kind};
use blz::blosc::Codec;
use blz::meta::{Compression, FilterName};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

const IMPORT_EXAMPLES: &str = "\
SRC is a bcolz root directory, as given to bcolz.carray(rootdir=...) or
bcolz.ctable(rootdir=...): a carray (meta/, data/) becomes a blz dataset with the same
shape, dtype, chunk length, compression, default value and attributes; a ctable
(__rootdirs__ and one directory per column) becomes a blz table with one column per
bcolz column. bcolz's meta/sizes is its commit point: rows appended after the last
flush() are not there, and are not imported. bcolz itself is not needed.

Every file is checked as it is read; on any error (a missing or corrupt chunk file, an
unsupported dtype such as object) the message names the file and chunk, and DST is
removed. Memory stays at a few chunks whatever the size of SRC.

Examples:
  blz import prices.bcolz prices.blz
  blz import trades.bcolz trades.blz --overwrite
  blz import prices.bcolz prices.blz --codec zstd --clevel 5 --chunklen 65536";

/// Arguments of `blz import`.
#[derive(Args, Debug)]
#[command(after_help = IMPORT_EXAMPLES)]
pub struct ImportArgs {
    /// The bcolz carray or ctable directory.
    pub src: PathBuf,
    /// The blz dataset or table to create.
    pub dst: PathBuf,
    /// Replace an existing blz dataset at DST.
    #[arg(long)]
    pub overwrite: bool,
    /// Rows per chunk (default: bcolz's chunklen, per column for a ctable).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub chunklen: Option<u64>,
    /// Recompress with this codec (default: bcolz's); with byte shuffle.
    #[arg(long, value_parser = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"])]
    pub codec: Option<String>,
    /// Recompress at this level, 0-9 (default: bcolz's; 5 with --codec alone).
    #[arg(long, value_name = "0-9", value_parser = clap::value_parser!(u8).range(0..=9))]
    pub clevel: Option<u8>,
}

/// Runs `blz import`.
pub fn run(a: &ImportArgs) -> Result<(), Failure> {
    let compression = match (&a.codec, a.clevel) {
        (None, None) => None,
        (codec, clevel) => Some(Compression {
            codec: match codec {
                Some(c) => c
                    .parse::<Codec>()
                    .map_err(|e| Failure::new(e.to_string()))?,
                None => Codec::Lz4,
            },
            clevel: clevel.unwrap_or(5),
            filters: vec![FilterName::Shuffle],
            mantissa_bits: None,
            blocksize: 0,
        }),
    };
    let opts = ImportOptions {
        overwrite: a.overwrite,
        chunklen: a.chunklen,
        compression,
        ..Default::default()
    };
    let kind = bcolz::detect(&a.src)?;
    let pb = progress(0, "import", "rows");
    let tick = |done: u64, total: u64| {
        pb.set_length(total);
        pb.set_position(done);
    };
    let line = match kind {
        Kind::Carray => {
            let ds = bcolz::import_carray_with(&a.src, &a.dst, &opts, tick);
            pb.finish_and_clear();
            let ds = ds.map_err(|e| Failure::new(describe(&e)))?;
            let s = ds.sizes();
            format!(
                "imported bcolz carray {} -> {}: {} {:?}, chunkshape {:?}, {} -> {}",
                a.src.display(),
                a.dst.display(),
                ds.dtype(),
                ds.shape(),
                ds.chunkshape(),
                human(s.nbytes),
                human(s.cbytes)
            )
        }
        Kind::Ctable => {
            let t = bcolz::import_ctable_with(&a.src, &a.dst, &opts, tick);
            pb.finish_and_clear();
            let t = t.map_err(|e| Failure::new(describe(&e)))?;
            let cols: Vec<String> = t
                .leaves()
                .iter()
                .map(|l| format!("{}:{}", l.path, l.kind.name()))
                .collect();
            let s = t.sizes();
            format!(
                "imported bcolz ctable {} -> {}: {} rows, columns {}, {} -> {}",
                a.src.display(),
                a.dst.display(),
                t.nrows(),
                cols.join(","),
                human(s.nbytes),
                human(s.cbytes)
            )
        }
    };
    writeln!(std::io::stdout().lock(), "{line}").map_err(crate::failure::out_err)?;
    Ok(())
}
