//! `blz locate` and `blz scan`: where a dataset's superchunk files live, and parallel
//! reductions over a dataset or a table column.

use crate::failure::Failure;
use blz::locate::{group_by_location, locate_dataset};
use blz::scan::{
    reduce, reduce_axis, reduce_axis_column, reduce_column, ReduceOutput, Reduction, ScanOptions,
};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Arguments of `blz locate`.
#[derive(clap::Args, Debug)]
pub struct LocateArgs {
    /// The dataset directory (array or table).
    pub path: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A built-in reduction for `blz scan`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum OpArg {
    /// Number of elements.
    Count,
    /// Sum (exact for integers, f64 for floats).
    Sum,
    /// Smallest element.
    Min,
    /// Largest element.
    Max,
    /// Arithmetic mean.
    Mean,
    /// Variance (divisor n - ddof).
    Var,
    /// Standard deviation (divisor n - ddof).
    Std,
    /// Index of the first smallest element (flat C-order index without --axis).
    Argmin,
    /// Index of the first largest element (flat C-order index without --axis).
    Argmax,
    /// Whether any element is nonzero.
    Any,
    /// Whether every element is nonzero.
    All,
    /// Number of nonzero elements.
    CountNonzero,
}

impl From<OpArg> for Reduction {
    fn from(o: OpArg) -> Reduction {
        match o {
            OpArg::Count => Reduction::Count,
            OpArg::Sum => Reduction::Sum,
            OpArg::Min => Reduction::Min,
            OpArg::Max => Reduction::Max,
            OpArg::Mean => Reduction::Mean,
            OpArg::Var => Reduction::Var,
            OpArg::Std => Reduction::Std,
            OpArg::Argmin => Reduction::ArgMin,
            OpArg::Argmax => Reduction::ArgMax,
            OpArg::Any => Reduction::Any,
            OpArg::All => Reduction::All,
            OpArg::CountNonzero => Reduction::CountNonzero,
        }
    }
}

/// Arguments of `blz scan`.
#[derive(clap::Args, Debug)]
pub struct ScanArgs {
    /// The dataset directory (array or table).
    pub path: PathBuf,
    /// The column to scan (tables; a fixed-size column).
    #[arg(long)]
    pub column: Option<String>,
    /// The reduction.
    #[arg(long, value_enum)]
    pub op: OpArg,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Only scan the files stored on this host (repeatable); for one worker per host.
    #[arg(long = "host")]
    pub hosts: Vec<String>,
    /// Reduce along this axis only (repeatable: several axes); prints an array of the
    /// other axes' shape, numpy's result type (sum of int32 is int64).
    #[arg(long = "axis", conflicts_with = "hosts")]
    pub axes: Vec<usize>,
    /// Delta degrees of freedom of var and std (divisor n - ddof).
    #[arg(long, default_value_t = 0.0)]
    pub ddof: f64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `blz locate PATH`.
pub fn locate(a: &LocateArgs) -> Result<(), Failure> {
    let locs = locate_dataset(&a.path)?;
    let root = &a.path;
    let rel = |p: &Path| {
        p.strip_prefix(root)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    let groups = group_by_location(&locs);
    if a.json {
        let files: Vec<serde_json::Value> = locs
            .iter()
            .map(|l| {
                serde_json::json!({
                    "file": rel(&l.path),
                    "host": l.host,
                    "location": l.location,
                    "kind": l.kind.to_string(),
                    "detail": l.detail,
                })
            })
            .collect();
        let summary: Vec<serde_json::Value> = groups
            .iter()
            .map(|(k, idx)| {
                serde_json::json!({"host": k.host, "location": k.location, "files": idx.len()})
            })
            .collect();
        let out = serde_json::json!({"files": files, "locations": summary});
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| Failure::new(e.to_string()))?
        );
        return Ok(());
    }
    let w = locs
        .iter()
        .map(|l| rel(&l.path).len())
        .max()
        .unwrap_or(4)
        .max(4);
    let hw = locs.iter().map(|l| l.host.len()).max().unwrap_or(4).max(4);
    println!(
        "{:<w$}  {:<hw$}  {:<7}  BRICK/DEVICE",
        "FILE", "HOST", "KIND"
    );
    for l in &locs {
        println!(
            "{:<w$}  {:<hw$}  {:<7}  {}",
            rel(&l.path),
            l.host,
            l.kind.to_string(),
            l.location
        );
    }
    println!();
    println!(
        "{} files on {} location{}:",
        locs.len(),
        groups.len(),
        if groups.len() == 1 { "" } else { "s" }
    );
    for (k, idx) in &groups {
        println!("  {:>6}  {k}", idx.len());
    }
    Ok(())
}

/// `blz scan PATH --op OP`.
pub fn scan(a: &ScanArgs) -> Result<(), Failure> {
    let opts = ScanOptions {
        threads: a.threads,
        group_by_location: true,
        hosts: (!a.hosts.is_empty()).then(|| a.hosts.clone()),
        ..ScanOptions::default()
    };
    if opts.thread_count() == 0 {
        return Err(Failure::new("--threads must be at least 1"));
    }
    let op = Reduction::from(a.op);
    let t0 = Instant::now();
    if !a.axes.is_empty() || a.ddof != 0.0 {
        return scan_axes(a, &opts, op, t0);
    }
    let r = match &a.column {
        Some(c) => {
            let t = blz::table::Table::open(&a.path)?;
            reduce_column(&t, c, &opts, op)?
        }
        None => {
            let ds = blz::Dataset::open(&a.path)?;
            reduce(&ds, &opts, op)?
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    let bytes = r.count as f64 * r.dtype.itemsize() as f64;
    let gbps = if secs > 0.0 { bytes / secs / 1e9 } else { 0.0 };
    let text = if a.json {
        let out = serde_json::json!({
            "op": op.to_string(),
            "dtype": r.dtype.to_string(),
            "value": r.value,
            "elements": r.count,
            "seconds": secs,
            "gb_per_s": gbps,
            "threads": opts.thread_count(),
        });
        format!("{out}\n")
    } else {
        let v = r
            .value
            .map_or_else(|| "none".to_string(), |v| v.to_string());
        format!(
            "{op}: {v}\nelements: {} ({})\nelapsed: {secs:.3} s, {gbps:.3} GB/s uncompressed, {} threads\n",
            r.count,
            r.dtype,
            opts.thread_count()
        )
    };
    // A reader that stops early (`| head`) is not an error.
    std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes())
        .map_err(crate::failure::out_err)
}

/// `blz scan PATH --op OP --axis N...`: a reduction along axes, through
/// `blz::scan::reduce_axis`.
fn scan_axes(a: &ScanArgs, opts: &ScanOptions, op: Reduction, t0: Instant) -> Result<(), Failure> {
    let axes = (!a.axes.is_empty()).then_some(a.axes.as_slice());
    let r = match &a.column {
        Some(c) => {
            let t = blz::table::Table::open(&a.path)?;
            reduce_axis_column(&t, c, opts, op, axes, a.ddof)?
        }
        None => {
            let ds = blz::Dataset::open(&a.path)?;
            reduce_axis(&ds, opts, op, axes, a.ddof)?
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    let text = if a.json {
        let out = serde_json::json!({
            "op": op.to_string(),
            "axis": a.axes,
            "dtype": r.dtype().to_string(),
            "shape": r.shape(),
            "values": json_values(&r),
            "seconds": secs,
            "threads": opts.thread_count(),
        });
        format!("{out}\n")
    } else {
        let body = match &r {
            ReduceOutput::Bool(x) => format!("{x}"),
            ReduceOutput::I8(x) => format!("{x}"),
            ReduceOutput::I16(x) => format!("{x}"),
            ReduceOutput::I32(x) => format!("{x}"),
            ReduceOutput::I64(x) => format!("{x}"),
            ReduceOutput::U8(x) => format!("{x}"),
            ReduceOutput::U16(x) => format!("{x}"),
            ReduceOutput::U32(x) => format!("{x}"),
            ReduceOutput::U64(x) => format!("{x}"),
            ReduceOutput::F16(x) => format!("{x}"),
            ReduceOutput::F32(x) => format!("{x}"),
            ReduceOutput::F64(x) => format!("{x}"),
        };
        format!(
            "{op} along axis {:?}: {} {:?}\n{body}\nelapsed: {secs:.3} s, {} threads\n",
            a.axes,
            r.dtype(),
            r.shape(),
            opts.thread_count()
        )
    };
    std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes())
        .map_err(crate::failure::out_err)
}

/// The values of a reduction in C order (NaN and infinities as null).
fn json_values(r: &ReduceOutput) -> Vec<serde_json::Value> {
    use serde_json::Value as V;
    match r {
        ReduceOutput::Bool(x) => x.iter().map(|&v| V::from(v)).collect(),
        ReduceOutput::I8(x) => x.iter().map(|&v| V::from(v)).collect(),
        ReduceOutput::I16(x) => x.iter().map(|&v| V::from(v)).collect(),
        ReduceOutput::I32(x) => x.iter().map(|&v| V::from(v)).collect(),
        ReduceOutput::I64(x) => x.iter().map(|&v| V::from(v)).collect(),
        ReduceOutput::U8(x) => x.iter().map(|&v| V::from(v)).collect(),
        ReduceOutput::U16(x) => x.iter().map(|&v| V::from(v)).collect(),
        ReduceOutput::U32(x) => x.iter().map(|&v| V::from(v)).collect(),
        ReduceOutput::U64(x) => x.iter().map(|&v| V::from(v)).collect(),
        ReduceOutput::F16(x) => x.iter().map(|&v| V::from(v.to_f64())).collect(),
        ReduceOutput::F32(x) => x.iter().map(|&v| V::from(f64::from(v))).collect(),
        ReduceOutput::F64(x) => x.iter().map(|&v| V::from(v)).collect(),
    }
}
