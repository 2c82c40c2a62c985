//! The dataset commands on arrays: `create` (from a .npy file, a CSV column or generated
//! data), `info`, `get`, `append`, `resize`, `attrs`, `verify` and `compact`. `main`
//! sends tables to `table`; both take their arguments from `args` and report through
//! `report`. Everything goes through blz's public library API.

use crate::args::{AppendArgs, AttrsArgs, CreateArgs, GetArgs, LayoutArgs, ResizeArgs};
use crate::attrs::edit_attrs;
use crate::failure::{out_err, say, Failure};
use crate::parse::{batch_bytes, delimiter_byte, parse_dtype, parse_kv, parse_shape, BATCH_BYTES};
use crate::report::{human, plural, progress, report_verify, run_compaction, shape_str};
use crate::show::EDGE;
use crate::show::{self, Text};
use crate::sources::{self, GenRows, Generated, Rows, SplitMix};
use blz::blosc::Codec;
use blz::blpk::Checksum;
use blz::csv::{ColumnReader, ColumnSpec};
use blz::meta::{Compression, FilterName};
use blz::npy::NpyReader;
use blz::ordered::SelectionReader;
use blz::{CreateOptions, DType, Dataset, Endianness, Mode};
use std::io::Write;
use std::path::{Path, PathBuf};

/// `get` prints every element up to this many; beyond, a summary of the edges.
const SUMMARY_THRESHOLD: u64 = 1000;

// ---------------------------------------------------------------------------------------------
// Helpers

/// Opens the dataset at `path` as the kind it is (`blz::open_in`: its kind read once),
/// explaining a missing path or a directory that is not a dataset.
pub fn open_any(path: &Path, write: bool) -> Result<blz::AnyDataset, Failure> {
    // A local path or an s3:// URL.
    let (storage, root) = blz::storage::for_path(path)?;
    if !storage.exists(&root) {
        return Err(Failure::new(format!("{}: no such dataset", path.display())));
    }
    if !storage.is_dir(&root) {
        return Err(Failure::new(format!(
            "{}: not a dataset (datasets are directories)",
            path.display()
        )));
    }
    if !storage.is_dir(&root.join("meta")) {
        return Err(Failure::new(format!(
            "{}: not a blz dataset (no meta directory)",
            path.display()
        )));
    }
    let mode = if write {
        Mode::ReadWrite
    } else {
        Mode::ReadOnly
    };
    match blz::open_in(std::sync::Arc::clone(&storage), &root, mode) {
        Ok(d) => Ok(d),
        // A dataset that is only ever read (a layer): say what it is.
        Err(blz::Error::ReadOnly { .. }) if write => {
            let kind = blz::open_in(storage, &root, Mode::ReadOnly)?.kind();
            Err(Failure::new(format!(
                "{}: this is a {kind} dataset, not an array or a table: it is only read",
                path.display()
            )))
        }
        Err(e) => Err(e.into()),
    }
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

// ---------------------------------------------------------------------------------------------
// create

fn csv_spec(
    path: &Path,
    column: &str,
    delimiter: char,
    no_header: bool,
) -> Result<ColumnSpec, Failure> {
    if no_header && column.trim().parse::<usize>().is_err() {
        return Err(Failure::new(format!(
            "{}: --no-header needs --column as a 0-based index, not {column:?}",
            path.display()
        )));
    }
    Ok(ColumnSpec {
        path: path.to_path_buf(),
        column: column.to_string(),
        delimiter: delimiter_byte(delimiter)?,
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
        let plan = blz::csv::scan_column(&spec, dtype)?;
        return Ok(Box::new(ColumnReader::new(plan)?));
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
pub(crate) fn create_options(
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

/// The largest row a generated source makes in memory.
const MAX_ROW_BYTES: u64 = 1 << 30;

/// `blz create`.
pub fn create(a: &CreateArgs) -> Result<(), Failure> {
    let seed = a.seed.unwrap_or_else(random_seed);
    let mut src = create_source(a, seed)?;
    let dtype = src.dtype();
    let mut shape = vec![0u64];
    shape.extend(src.row_shape());
    let opts = create_options(&a.layout, dtype, shape.len(), src.rows())?;
    // The whole shape is checked before a row is made: a shape past what an array can hold
    // is refused at once, not found by allocating it.
    let mut whole = shape.clone();
    whole[0] = src.rows();
    blz::check_shape(dtype, &whole)?;
    // One step: built beside the path and renamed into place, so a failure or a kill leaves
    // no dataset behind.
    let (storage, root) = blz::storage::for_new_path(&a.path, opts.overwrite)?;
    let ds = if a.zeros.is_some() && a.layout.fill.is_none() {
        // Zeros are the fill value: the dataset is created with its shape, filled as a
        // resize fills (one encoded chunk written again and again, within the limit of
        // chunks one operation fills), instead of from rows of zeros made in memory.
        Dataset::create_in(storage, &root, dtype, &whole, &opts)?
    } else {
        // Rows are made in memory a batch at a time, at least one row each.
        let row = whole[1..]
            .iter()
            .try_fold(dtype.itemsize() as u64, |a, &n| a.checked_mul(n));
        if row.is_none_or(|b| b > MAX_ROW_BYTES) {
            return Err(Failure::new(format!(
                "one row of {} elements is more than the {MAX_ROW_BYTES} bytes blz makes in \
                 memory at once (--zeros without --fill makes no rows: they are the fill value)",
                crate::sources::shape_text(&whole[1..])
            )));
        }
        append_all(src.as_mut(), &shape, "create", |b| {
            Dataset::create_from(storage, &root, dtype, &shape, &opts, b)
        })?
    };
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
    let present = ds.present_files()?;
    let mut f = 0;
    while f < ds.nfiles() {
        let p = ds.superchunk_path(f);
        let at = present.partition_point(|&x| x < f);
        // Files the listing does not show after this one: described with it in one entry
        // (a shape naming far more files than the dataset holds is described at once).
        let absent_after = match present.get(at) {
            Some(&x) if x == f => 0,
            next => next.copied().unwrap_or(ds.nfiles()) - f - 1,
        };
        f += 1 + absent_after;
        let name = p
            .strip_prefix(path)
            .unwrap_or(&p)
            .to_string_lossy()
            .into_owned();
        // A file that cannot be reached (a brick down, a file removed) is described as
        // such; the rest of the dataset still is.
        match ds
            .storage()
            .open(&p, blz::storage::OpenMode::Read)
            .and_then(|f| f.len())
        {
            Ok(len) => {
                disk += len;
                files.push(serde_json::json!({ "name": name, "size": len }));
            }
            Err(e) => {
                let missing = matches!(&e, blz::Error::Io { source, .. }
                    if source.kind() == std::io::ErrorKind::NotFound);
                let mut problem = if missing {
                    "missing".to_string()
                } else {
                    e.to_string()
                };
                if absent_after > 0 {
                    problem += &format!(", and the {absent_after} files after it are missing");
                }
                files.push(serde_json::json!({
                    "name": name,
                    "size": null,
                    "problem": problem,
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
pub fn dataset_info(path: &Path, json: bool, ds: Dataset) -> Result<(), Failure> {
    let j = info_json(path, &ds)?;
    if json {
        say!("{}", serde_json::to_string_pretty(&j).unwrap_or_default());
        return Ok(());
    }
    let mut o = std::io::stdout().lock();
    for (k, v) in info_lines(path, &ds, &j) {
        writeln!(o, "{:<13}{v}", format!("{k}:")).map_err(out_err)?;
    }
    let files = j["files"].as_array().cloned().unwrap_or_default();
    print_files(&mut o, &files).map_err(out_err)?;
    let attrs = &j["attributes"];
    let text = if attrs.as_object().is_some_and(serde_json::Map::is_empty) {
        "{}".to_string()
    } else {
        serde_json::to_string(attrs).unwrap_or_default()
    };
    writeln!(o, "{:<13}{text}", "attributes:").map_err(out_err)?;
    Ok(())
}

/// The `key: value` lines `blz info` prints about a dataset (`j`: its [`info_json`]), from
/// its path to its files.
fn info_lines(path: &Path, ds: &Dataset, j: &serde_json::Value) -> Vec<(&'static str, String)> {
    let m = ds.storage_meta();
    let s = ds.sizes();
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
    lines
}

/// The superchunk files `blz info` lists (`files`: their JSON entries): all of up to 20,
/// else the first 15 and the last 5, each with its size or its problem.
fn print_files(o: &mut dyn Write, files: &[serde_json::Value]) -> std::io::Result<()> {
    const SHOWN: usize = 20;
    for (i, f) in files.iter().enumerate() {
        if files.len() > SHOWN && i == SHOWN - 5 {
            writeln!(o, "  ... {} more (--json lists all)", files.len() - SHOWN)?;
        }
        if files.len() > SHOWN && i >= SHOWN - 5 && i < files.len() - 5 {
            continue;
        }
        let name = f["name"].as_str().unwrap_or("");
        match (f["size"].as_u64(), f["problem"].as_str()) {
            (Some(size), _) => writeln!(o, "  {name}  {size} bytes"),
            (None, problem) => writeln!(o, "  {name}  {}", problem.unwrap_or("unreadable")),
        }?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// get

/// `blz get`.
pub fn get(a: &GetArgs, ds: Dataset) -> Result<(), Failure> {
    if a.columns.is_some() || a.rows.is_some() || a.out_dir.is_some() {
        return Err(Failure::new(format!(
            "{}: --columns, --rows and --out-dir apply to tables; this dataset is an array",
            a.path.display()
        )));
    }
    let sel = SelectionReader::parse(&ds, a.selection.as_deref().unwrap_or(""))?;
    let out_shape = sel.shape().to_vec();
    let total = sel.elements();
    let dtype = ds.dtype();
    let isz = dtype.itemsize();
    if let Some(out) = &a.out {
        return write_npy(&ds, &sel, out);
    }
    if a.json {
        if total > SUMMARY_THRESHOLD && !a.all {
            return Err(Failure::new(format!(
                "the selection holds {total} values; add --all to print them all as JSON, \
                 or use --out FILE.npy"
            )));
        }
        let data = sel.read_all()?;
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
        let e = sel.edges(EDGE)?;
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
    for batch in sel.batches(BATCH_BYTES) {
        let batch = batch?;
        let mut shape = vec![batch.rows as usize];
        shape.extend(&rest);
        debug_assert_eq!(batch.data.len(), shape.iter().product::<usize>() * isz);
        text.entries(&batch.data, &shape, &gaps, batch.start as usize)
            .map_err(out_err)?;
    }
    lock.flush().map_err(out_err)?;
    Ok(())
}

/// `blz get --out FILE.npy`: the selection, with the dataset's dtype and byte order.
fn write_npy(ds: &Dataset, sel: &SelectionReader<'_>, out: &Path) -> Result<(), Failure> {
    let total = sel.elements() * ds.dtype().itemsize() as u64;
    let pb = progress(total, "get", "bytes");
    let res = blz::npy::write_selection(ds, sel, out, BATCH_BYTES, |n| pb.inc(n));
    pb.finish_and_clear();
    Ok(res?)
}

// ---------------------------------------------------------------------------------------------
// append, resize

/// `blz append`.
pub fn append(a: &AppendArgs, mut ds: Dataset) -> Result<(), Failure> {
    let dtype = ds.dtype();
    let before = ds.shape().to_vec();
    let n = if let Some(p) = &a.npy {
        let r = NpyReader::open(p)?;
        r.check_fits(&ds)?;
        let pb = progress(r.rows(), "append", "rows");
        let n = r.append_to(&mut ds, batch_bytes(), |k| pb.inc(k));
        pb.finish_and_clear();
        n?
    } else if let Some(p) = &a.csv {
        let Some(column) = a.column.as_deref() else {
            return Err(Failure::new(format!(
                "{}: an array takes one CSV column: give --column NAME|INDEX",
                a.path.display()
            )));
        };
        let spec = csv_spec(p, column, a.delimiter, a.no_header)?;
        let plan = blz::csv::scan_column(&spec, Some(dtype))?;
        let src = ColumnReader::new(plan)?;
        let pb = progress(src.plan().rows(), "append", "rows");
        let n = src.append_to(&mut ds, batch_bytes(), |k| pb.inc(k));
        pb.finish_and_clear();
        n?
    } else {
        return Err(Failure::new("give a source: --npy or --csv"));
    };
    say!(
        "appended {n} rows to {}: {} -> {}",
        a.path.display(),
        shape_str(&before),
        shape_str(ds.shape())
    );
    Ok(())
}

/// `blz resize`.
pub fn resize(a: &ResizeArgs, mut ds: Dataset) -> Result<(), Failure> {
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
pub fn attrs(a: &AttrsArgs, ds: Dataset) -> Result<(), Failure> {
    edit_attrs(a, ds)
}

// ---------------------------------------------------------------------------------------------
// verify, compact

/// `blz verify`.
pub fn verify(path: &Path, ds: Dataset) -> Result<(), Failure> {
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

/// `blz compact`.
pub fn compact(path: &Path, mut ds: Dataset) -> Result<(), Failure> {
    let files: Vec<PathBuf> = (0..ds.nfiles()).map(|f| ds.superchunk_path(f)).collect();
    let storage = std::sync::Arc::clone(ds.storage());
    run_compaction(path, storage.as_ref(), &files, || ds.compact())
}
