//! `blz pack`, `blz unpack` and `blz info`: single superchunk files.

use crate::failure::Failure;
use crate::parse::parse_size;
use blz::storage::{LocalStorage, OpenMode, Storage};
use blz_format::blosc::{self, ChunkHeader, Codec, CompressParams, Filter};
use blz_format::blpk::{
    self, Checksum, MetaCodec, MetadataParams, PackOptions, SuperchunkReader, WriterOptions,
    FORMAT_VERSION, OPT_METADATA, OPT_OFFSETS, OPT_SCATTERED, OPT_VARLEN,
};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};

/// Inputs larger than this get a progress bar (when stderr is a terminal).
const PROGRESS_THRESHOLD: u64 = 64 << 20;

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum CodecArg {
    Blosclz,
    Lz4,
    Lz4hc,
    Zlib,
    Zstd,
}

impl From<CodecArg> for Codec {
    fn from(c: CodecArg) -> Codec {
        match c {
            CodecArg::Blosclz => Codec::Blosclz,
            CodecArg::Lz4 => Codec::Lz4,
            CodecArg::Lz4hc => Codec::Lz4hc,
            CodecArg::Zlib => Codec::Zlib,
            CodecArg::Zstd => Codec::Zstd,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum FilterArg {
    Noshuffle,
    Shuffle,
    Bitshuffle,
}

impl From<FilterArg> for Filter {
    fn from(f: FilterArg) -> Filter {
        match f {
            FilterArg::Noshuffle => Filter::NoShuffle,
            FilterArg::Shuffle => Filter::Shuffle,
            FilterArg::Bitshuffle => Filter::Bitshuffle,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ChecksumArg {
    #[value(name = "None")]
    None,
    Adler32,
    Crc32,
    Md5,
    Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
}

impl From<ChecksumArg> for Checksum {
    fn from(c: ChecksumArg) -> Checksum {
        match c {
            ChecksumArg::None => Checksum::None,
            ChecksumArg::Adler32 => Checksum::Adler32,
            ChecksumArg::Crc32 => Checksum::Crc32,
            ChecksumArg::Md5 => Checksum::Md5,
            ChecksumArg::Sha1 => Checksum::Sha1,
            ChecksumArg::Sha224 => Checksum::Sha224,
            ChecksumArg::Sha256 => Checksum::Sha256,
            ChecksumArg::Sha384 => Checksum::Sha384,
            ChecksumArg::Sha512 => Checksum::Sha512,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum MetaCodecArg {
    None,
    Zlib,
}

fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| match e {
        blz::Error::InvalidArgument(m) => m,
        other => other.to_string(),
    })
}

fn typesize_arg(s: &str) -> Result<u8, String> {
    match s.parse::<u16>() {
        Ok(n @ 1..=255) => Ok(n as u8),
        _ => Err(format!("typesize {s:?} out of range 1-255")),
    }
}

fn threads_arg(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n @ 1..=1024) => Ok(n),
        _ => Err(format!("thread count {s:?} out of range 1-1024")),
    }
}

/// Arguments of `blz pack`.
#[derive(Args, Debug)]
#[command(after_help = "\
The output is a bloscpack format-3 file: bloscpack 0.16 reads it (`blpk d OUT`, or \
bloscpack.unpack_bytes_from_file) unless --slack is given. The input is cut into chunks of \
--chunk-size bytes, each compressed with Blosc and followed by a digest.")]
pub struct PackArgs {
    /// File to compress.
    pub input: PathBuf,
    /// Superchunk file to write (refused if it exists, unless --force).
    pub output: PathBuf,
    /// Compressor used inside Blosc.
    #[arg(
        short = 'c',
        long,
        value_enum,
        ignore_case = true,
        default_value = "blosclz"
    )]
    pub codec: CodecArg,
    /// Compression level, 0 (store only) to 9 (slowest, smallest).
    #[arg(short = 'l', long, default_value_t = 7,
          value_parser = clap::value_parser!(u8).range(0..=9))]
    pub clevel: u8,
    /// Filter applied before compression: shuffle regroups the bytes of each --typesize
    /// element, bitshuffle their bits; both help on numeric data.
    #[arg(
        long = "shuffle",
        visible_alias = "filter",
        value_enum,
        ignore_case = true,
        default_value = "shuffle",
        value_name = "FILTER"
    )]
    pub filter: FilterArg,
    /// Size in bytes of one element of the data (8 for float64, 4 for int32, 1 for text);
    /// the shuffle filters work on elements of this size. 1 to 255.
    #[arg(short = 't', long, default_value = "8", value_parser = typesize_arg)]
    pub typesize: u8,
    /// Uncompressed bytes per chunk, such as 4096, 256K or 1M (powers of 1024). A smaller
    /// chunk makes random access cheaper; a larger one compresses better.
    #[arg(short = 'z', long, default_value = "1M", value_parser = size_arg, value_name = "SIZE")]
    pub chunk_size: u64,
    /// Digest stored after each chunk and checked on unpack (None: no digest).
    #[arg(
        short = 'k',
        long,
        value_enum,
        ignore_case = true,
        default_value = "adler32"
    )]
    pub checksum: ChecksumArg,
    /// Write no offsets table. The file is then read sequentially only and cannot be
    /// appended to.
    #[arg(short = 'o', long)]
    pub no_offsets: bool,
    /// Embed the JSON document in this file as the superchunk's metadata.
    #[arg(short = 'm', long, value_name = "FILE.json")]
    pub metadata: Option<PathBuf>,
    /// How the metadata is stored: zlib-compressed (kept uncompressed when that is not
    /// smaller) or as is.
    #[arg(
        long,
        value_enum,
        ignore_case = true,
        default_value = "zlib",
        requires = "metadata"
    )]
    pub metadata_codec: MetaCodecArg,
    /// Reserve this many zero bytes after each chunk (such as 4K) so a chunk rewritten later
    /// can grow in place. Such a file is marked "scattered": blz reads it, but bloscpack
    /// cannot read it.
    #[arg(long, value_parser = size_arg, value_name = "BYTES", conflicts_with = "no_offsets")]
    pub slack: Option<u64>,
    /// Threads compressing chunks in parallel [default: one per core].
    #[arg(short = 'n', long, value_parser = threads_arg, value_name = "N")]
    pub threads: Option<usize>,
    /// Overwrite OUTPUT if it exists.
    #[arg(short = 'f', long)]
    pub force: bool,
    /// Print a summary (sizes, chunks, ratio) on stderr when done.
    #[arg(short = 'v', long)]
    pub verbose: bool,
}

/// Arguments of `blz unpack`.
#[derive(Args, Debug)]
#[command(after_help = "\
Reads files written by blz or by bloscpack. Every chunk's digest is checked; on the first \
corrupt chunk blz stops, names the file and the chunk, and leaves no OUTPUT behind.")]
pub struct UnpackArgs {
    /// Superchunk file (.blp) to decompress.
    pub input: PathBuf,
    /// File to write the decompressed bytes to (refused if it exists, unless --force).
    pub output: PathBuf,
    /// Also write the file's embedded JSON metadata to this file (an error if the file has
    /// none).
    #[arg(long, value_name = "FILE")]
    pub metadata_out: Option<PathBuf>,
    /// Threads decompressing chunks in parallel [default: one per core].
    #[arg(short = 'n', long, value_parser = threads_arg, value_name = "N")]
    pub threads: Option<usize>,
    /// Overwrite OUTPUT (and the --metadata-out file) if they exist.
    #[arg(short = 'f', long)]
    pub force: bool,
    /// Print a summary on stderr when done.
    #[arg(short = 'v', long)]
    pub verbose: bool,
}

/// Runs `f` in a rayon pool of `threads` threads, or in the global pool.
fn with_threads<T>(threads: Option<usize>, f: impl FnOnce() -> T + Send) -> Result<T, Failure>
where
    T: Send,
{
    match threads {
        None => Ok(f()),
        Some(n) => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .map_err(|e| Failure::new(format!("cannot start {n} threads: {e}")))?;
            Ok(pool.install(f))
        }
    }
}

fn progress_bar(total: u64, show: bool) -> Option<ProgressBar> {
    if !show || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
    ) {
        pb.set_style(style);
    }
    Some(pb)
}

/// Refuses to replace `path` unless `force`, and refuses directories always.
fn check_output(path: &Path, force: bool) -> Result<(), Failure> {
    if path.is_dir() {
        return Err(Failure::new(format!("{} is a directory", path.display())));
    }
    if !force && path.symlink_metadata().is_ok() {
        return Err(Failure::new(format!(
            "{} already exists (use --force to overwrite it)",
            path.display()
        )));
    }
    Ok(())
}

/// A file written under a temporary name beside its destination and renamed over it only on
/// success; dropped without [`TempOutput::commit`], it is removed.
struct TempOutput {
    tmp: PathBuf,
    dest: PathBuf,
    committed: bool,
}

impl TempOutput {
    fn new(dest: &Path) -> Result<TempOutput, Failure> {
        let name = dest
            .file_name()
            .ok_or_else(|| Failure::new(format!("{} is not a file name", dest.display())))?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".blz-tmp-{}", std::process::id()));
        Ok(TempOutput {
            tmp: dest.with_file_name(tmp_name),
            dest: dest.to_path_buf(),
            committed: false,
        })
    }

    fn commit(mut self) -> Result<(), Failure> {
        LocalStorage.rename(&self.tmp, &self.dest)?;
        self.committed = true;
        let dir = match self.dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        LocalStorage.sync_dir(dir)?;
        Ok(())
    }
}

impl Drop for TempOutput {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

fn read_metadata_file(path: &Path) -> Result<serde_json::Value, Failure> {
    let bytes = std::fs::read(path).map_err(|e| blz::Error::io("read", path, e))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| Failure::new(format!("{}: not valid JSON: {e}", path.display())))
}

/// `blz pack`.
pub fn pack(a: &PackArgs) -> Result<(), Failure> {
    let chunk_size = usize::try_from(a.chunk_size)
        .ok()
        .filter(|&c| (1..=blosc::MAX_BUFFERSIZE).contains(&c))
        .ok_or_else(|| {
            Failure::new(format!(
                "chunk size {} out of range: it must be 1 to {} bytes",
                a.chunk_size,
                blosc::MAX_BUFFERSIZE
            ))
        })?;
    let slack = match a.slack {
        None => 0,
        Some(s) => u32::try_from(s)
            .map_err(|_| Failure::new(format!("slack of {s} bytes is too large")))?,
    };
    let metadata = match &a.metadata {
        None => None,
        Some(p) => {
            let doc = read_metadata_file(p)?;
            let params = MetadataParams {
                codec: match a.metadata_codec {
                    MetaCodecArg::None => MetaCodec::None,
                    MetaCodecArg::Zlib => MetaCodec::Zlib,
                },
                ..Default::default()
            };
            Some((doc, params))
        }
    };
    let input = File::open(&a.input).map_err(|e| blz::Error::io("open", &a.input, e))?;
    let meta = input
        .metadata()
        .map_err(|e| blz::Error::io("stat", &a.input, e))?;
    if !meta.is_file() {
        return Err(Failure::new(format!(
            "{} is not a regular file (blz needs the input's size before packing)",
            a.input.display()
        )));
    }
    let len = meta.len();
    check_output(&a.output, a.force)?;

    let opts = PackOptions {
        chunk_size,
        blosc: CompressParams {
            codec: a.codec.into(),
            clevel: a.clevel,
            filter: a.filter.into(),
            typesize: usize::from(a.typesize),
            blocksize: 0,
            nthreads: 1,
        },
        writer: WriterOptions {
            checksum: a.checksum.into(),
            typesize: a.typesize,
            offsets: !a.no_offsets,
            max_app_chunks: 0,
            slack,
            metadata,
            ..Default::default()
        },
        ..Default::default()
    };
    let tmp = TempOutput::new(&a.output)?;
    let out = LocalStorage.open(&tmp.tmp, OpenMode::Create)?;
    let pb = progress_bar(len, len > PROGRESS_THRESHOLD);
    let mut reader = std::io::BufReader::with_capacity(1 << 20, input);
    let summary = with_threads(a.threads, || {
        blpk::pack(&mut reader, len, out, &opts, |done| {
            if let Some(pb) = &pb {
                pb.set_position(done);
            }
        })
    })??;
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    tmp.commit()?;
    if a.verbose {
        eprintln!(
            "packed {} bytes into {} ({} chunks, {} bytes, ratio {:.2})",
            summary.nbytes,
            a.output.display(),
            summary.nchunks,
            summary.file_len,
            ratio(summary.nbytes, summary.file_len)
        );
    }
    Ok(())
}

fn open_reader(path: &Path) -> Result<SuperchunkReader, Failure> {
    if path.is_dir() {
        return Err(Failure::new(format!("{} is a directory", path.display())));
    }
    Ok(SuperchunkReader::open(
        LocalStorage.open(path, OpenMode::Read)?,
    )?)
}

/// Uncompressed size the header announces, or the sum of the chunk headers' sizes.
fn expected_len(r: &SuperchunkReader) -> Result<u64, Failure> {
    let h = r.header();
    let n = r.nchunks();
    if n == 0 {
        return Ok(0);
    }
    if h.chunk_size >= 0 && h.last_chunk >= 0 {
        return Ok((n - 1) * h.chunk_size as u64 + h.last_chunk as u64);
    }
    let mut total = 0u64;
    for k in 0..n {
        total += u64::from(r.chunk_info(k)?.header.nbytes);
    }
    Ok(total)
}

/// `blz unpack`.
pub fn unpack(a: &UnpackArgs) -> Result<(), Failure> {
    let reader = open_reader(&a.input)?;
    check_output(&a.output, a.force)?;
    let metadata_json = match &a.metadata_out {
        None => None,
        Some(p) => {
            check_output(p, a.force)?;
            let doc = reader.metadata().ok_or_else(|| {
                Failure::new(format!("{} has no metadata to write", a.input.display()))
            })?;
            let mut s = serde_json::to_string_pretty(doc)
                .map_err(|e| Failure::new(format!("cannot format the metadata: {e}")))?;
            s.push('\n');
            Some((p, s))
        }
    };
    let file_len = reader.layout().file_len;
    let total = if file_len > PROGRESS_THRESHOLD {
        expected_len(&reader)?
    } else {
        0
    };
    let tmp = TempOutput::new(&a.output)?;
    let file = File::create(&tmp.tmp).map_err(|e| blz::Error::io("create", &tmp.tmp, e))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let pb = progress_bar(total, file_len > PROGRESS_THRESHOLD);
    let written = with_threads(a.threads, || {
        blpk::unpack(&reader, &mut w, |done| {
            if let Some(pb) = &pb {
                pb.set_position(done);
            }
        })
    })??;
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let file = w
        .into_inner()
        .map_err(|e| blz::Error::io("write", &tmp.tmp, e.into_error()))?;
    file.sync_all()
        .map_err(|e| blz::Error::io("sync", &tmp.tmp, e))?;
    drop(file);
    let meta_tmp = match metadata_json {
        None => None,
        Some((p, s)) => {
            let t = TempOutput::new(p)?;
            std::fs::write(&t.tmp, s).map_err(|e| blz::Error::io("write", &t.tmp, e))?;
            Some(t)
        }
    };
    tmp.commit()?;
    if let Some(t) = meta_tmp {
        t.commit()?;
    }
    if a.verbose {
        eprintln!(
            "unpacked {} bytes from {} chunks into {}",
            written,
            reader.nchunks(),
            a.output.display()
        );
    }
    Ok(())
}

#[derive(Serialize)]
struct HeaderInfo {
    format_version: u8,
    options: u8,
    option_names: Vec<&'static str>,
    checksum: &'static str,
    checksum_id: u8,
    digest_size: usize,
    typesize: u8,
    chunk_size: i32,
    last_chunk: i32,
    nchunks: i64,
    max_app_chunks: i64,
}

#[derive(Serialize)]
struct MetaInfo {
    magic_format: &'static str,
    checksum: &'static str,
    checksum_id: u8,
    codec: &'static str,
    level: u8,
    meta_size: u32,
    max_meta_size: u32,
    meta_comp_size: u32,
}

#[derive(Serialize)]
struct ChunkRow {
    index: u64,
    offset: u64,
    cbytes: u32,
    nbytes: u32,
    ratio: f64,
    blocksize: u32,
    typesize: u8,
    codec: String,
    flags: u8,
    filter: &'static str,
    memcpyed: bool,
}

#[derive(Serialize)]
struct Totals {
    nbytes: u64,
    cbytes: u64,
    digest_bytes: u64,
    ratio: f64,
    /// Bytes after the end of the last chunk (and its digest) in file order.
    trailing_bytes: u64,
}

#[derive(Serialize)]
struct FileInfo {
    file: String,
    file_size: u64,
    header: HeaderInfo,
    metadata_header: Option<MetaInfo>,
    metadata: Option<serde_json::Value>,
    offsets_position: Option<u64>,
    offsets_slots: u64,
    data_start: u64,
    chunks: Vec<ChunkRow>,
    totals: Totals,
}

fn option_names(options: u8) -> Vec<&'static str> {
    [
        (OPT_OFFSETS, "offsets"),
        (OPT_METADATA, "metadata"),
        (OPT_VARLEN, "varlen"),
        (OPT_SCATTERED, "scattered"),
    ]
    .into_iter()
    .filter(|&(bit, _)| options & bit != 0)
    .map(|(_, name)| name)
    .collect()
}

fn ratio(nbytes: u64, cbytes: u64) -> f64 {
    if cbytes == 0 {
        0.0
    } else {
        nbytes as f64 / cbytes as f64
    }
}

fn chunk_row(k: u64, offset: u64, h: &ChunkHeader) -> ChunkRow {
    let codec = match Codec::from_format(h.codec_format()) {
        Some(c) => c.name().to_string(),
        None => format!("format {}", h.codec_format()),
    };
    let filter = if h.flags & blosc::FLAG_BITSHUFFLE != 0 {
        "bitshuffle"
    } else if h.flags & blosc::FLAG_SHUFFLE != 0 {
        "shuffle"
    } else {
        "noshuffle"
    };
    ChunkRow {
        index: k,
        offset,
        cbytes: h.cbytes,
        nbytes: h.nbytes,
        ratio: ratio(u64::from(h.nbytes), u64::from(h.cbytes)),
        blocksize: h.blocksize,
        typesize: h.typesize,
        codec,
        flags: h.flags,
        filter,
        memcpyed: h.flags & blosc::FLAG_MEMCPYED != 0,
    }
}

fn gather(path: &Path) -> Result<FileInfo, Failure> {
    let r = open_reader(path)?;
    let layout = r.layout();
    let h = r.header();
    let dlen = h.checksum.len() as u64;
    let mut chunks = Vec::with_capacity(r.nchunks() as usize);
    let mut data_end = layout.data_start;
    for k in 0..r.nchunks() {
        let ci = r.chunk_info(k)?;
        data_end = data_end.max(ci.offset + u64::from(ci.header.cbytes) + dlen);
        chunks.push(chunk_row(k, ci.offset, &ci.header));
    }
    let nbytes: u64 = chunks.iter().map(|c| u64::from(c.nbytes)).sum();
    let cbytes: u64 = chunks.iter().map(|c| u64::from(c.cbytes)).sum();
    Ok(FileInfo {
        file: path.display().to_string(),
        file_size: layout.file_len,
        header: HeaderInfo {
            format_version: FORMAT_VERSION,
            options: h.options,
            option_names: option_names(h.options),
            checksum: h.checksum.name(),
            checksum_id: h.checksum.id(),
            digest_size: h.checksum.len(),
            typesize: h.typesize,
            chunk_size: h.chunk_size,
            last_chunk: h.last_chunk,
            nchunks: h.nchunks,
            max_app_chunks: h.max_app_chunks,
        },
        metadata_header: layout.metadata.as_ref().map(|(mh, _)| MetaInfo {
            magic_format: "JSON",
            checksum: mh.checksum.name(),
            checksum_id: mh.checksum.id(),
            codec: match mh.codec {
                MetaCodec::None => "None",
                MetaCodec::Zlib => "zlib",
            },
            level: mh.level,
            meta_size: mh.meta_size,
            max_meta_size: mh.max_meta_size,
            meta_comp_size: mh.meta_comp_size,
        }),
        metadata: r.metadata().cloned(),
        offsets_position: h.has(OPT_OFFSETS).then_some(layout.offsets_pos),
        offsets_slots: h.offset_slots(),
        data_start: layout.data_start,
        totals: Totals {
            nbytes,
            cbytes,
            digest_bytes: dlen * r.nchunks(),
            ratio: ratio(nbytes, cbytes),
            trailing_bytes: layout.file_len.saturating_sub(data_end),
        },
        chunks,
    })
}

fn print_text(i: &FileInfo, out: &mut dyn Write) -> std::io::Result<()> {
    let h = &i.header;
    let names = if h.option_names.is_empty() {
        "none".to_string()
    } else {
        h.option_names.join(", ")
    };
    writeln!(out, "file:            {} ({} bytes)", i.file, i.file_size)?;
    writeln!(out, "format version:  {}", h.format_version)?;
    writeln!(out, "options:         {:#04x} ({names})", h.options)?;
    writeln!(
        out,
        "checksum:        {} (id {}, {}-byte digests)",
        h.checksum, h.checksum_id, h.digest_size
    )?;
    writeln!(out, "typesize:        {}", h.typesize)?;
    writeln!(out, "chunk_size:      {}", h.chunk_size)?;
    writeln!(out, "last_chunk:      {}", h.last_chunk)?;
    writeln!(out, "nchunks:         {}", h.nchunks)?;
    writeln!(out, "max_app_chunks:  {}", h.max_app_chunks)?;
    match (&i.metadata_header, &i.metadata) {
        (Some(m), Some(doc)) => {
            writeln!(
                out,
                "metadata:        {}, codec {} (level {}), checksum {} (id {}), meta_size {}, \
                 max_meta_size {}, meta_comp_size {}",
                m.magic_format,
                m.codec,
                m.level,
                m.checksum,
                m.checksum_id,
                m.meta_size,
                m.max_meta_size,
                m.meta_comp_size
            )?;
            let json = serde_json::to_string_pretty(doc).unwrap_or_else(|_| doc.to_string());
            for line in json.lines() {
                writeln!(out, "  {line}")?;
            }
        }
        _ => writeln!(out, "metadata:        none")?,
    }
    match i.offsets_position {
        Some(p) => writeln!(
            out,
            "offsets:         at byte {p}, {} slots ({} used); chunk data from byte {}",
            i.offsets_slots, h.nchunks, i.data_start
        )?,
        None => writeln!(
            out,
            "offsets:         none; chunk data from byte {}",
            i.data_start
        )?,
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:>8} {:>14} {:>10} {:>10} {:>7} {:>10} {:>8} {:<10} flags",
        "chunk", "offset", "cbytes", "nbytes", "ratio", "blocksize", "codec", "filter"
    )?;
    for c in &i.chunks {
        writeln!(
            out,
            "{:>8} {:>14} {:>10} {:>10} {:>7.2} {:>10} {:>8} {:<10} {:#04x}{}",
            c.index,
            c.offset,
            c.cbytes,
            c.nbytes,
            c.ratio,
            c.blocksize,
            c.codec,
            c.filter,
            c.flags,
            if c.memcpyed { " memcpyed" } else { "" }
        )?;
    }
    let t = &i.totals;
    writeln!(out)?;
    writeln!(
        out,
        "total:           {} bytes in {} chunks, {} compressed (+{} of digests), ratio {:.2}",
        t.nbytes,
        i.chunks.len(),
        t.cbytes,
        t.digest_bytes,
        t.ratio
    )?;
    if t.trailing_bytes > 0 {
        writeln!(
            out,
            "trailing bytes:  {} after the last chunk (left by an append; ignored)",
            t.trailing_bytes
        )?;
    }
    Ok(())
}

/// `blz info` on a superchunk file.
pub fn info(path: &Path, json: bool) -> Result<(), Failure> {
    let i = gather(path)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let r = if json {
        serde_json::to_writer(&mut out, &i)
            .map_err(std::io::Error::from)
            .and_then(|_| writeln!(out))
    } else {
        print_text(&i, &mut out)
    };
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::new(format!("write stdout: {e}"))),
        Ok(()) => Ok(()),
    }
}
