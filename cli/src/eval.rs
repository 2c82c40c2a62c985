//! `blz eval`: an array expression over datasets, table columns and numbers, computed chunk
//! by chunk in parallel into a new dataset (`--out`), or reduced and printed (`--reduce`).

use crate::args::LayoutArgs;
use crate::failure::{say, Failure};
use blz::expr::{Expression, Lit, Operand, Reduce};
use blz::{AnyDataset, Endianness};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `blz eval`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  blz eval 'a * b + sin(c)' --var a=x.blz --var b=y.blz --var c=z.blz --out r.blz\n  \
blz eval '(a * b)' --var a=x.blz --var b=y.blz --reduce sum\n  \
blz eval 'where(p > 10, p, 0)' --var p=trades.blz::price --reduce mean\n\n\
Operators: + - * / // % ** & | ~ < <= == != >= > and unary minus, with Python's precedence;\n\
functions: numpy's (sin, cos, tan, arcsin, ..., exp, log, log10, sqrt, abs, floor, ceil,\n\
maximum, minimum, where(cond, x, y), ...). numpy's broadcasting and type promotion."
)]
pub struct EvalArgs {
    /// The expression, e.g. 'a * b + sin(c)'.
    expr: String,
    /// An operand: NAME=PATH (an array dataset, a directory or s3:// URL),
    /// NAME=PATH::COLUMN (a table's column) or NAME=NUMBER.
    #[arg(long = "var", value_name = "NAME=SOURCE")]
    vars: Vec<String>,
    /// Write the result into a new dataset here (a directory or s3:// URL).
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
    /// Print a reduction of the result instead: sum, prod, mean, std, var, min, max, any, all.
    #[arg(long, value_name = "OP", conflicts_with = "out")]
    reduce: Option<String>,
    /// Reduce along this axis only (repeat for several); default all axes.
    #[arg(long, requires = "reduce")]
    axis: Vec<usize>,
    /// Delta degrees of freedom of std and var.
    #[arg(long, default_value_t = 0.0, requires = "reduce")]
    ddof: f64,
    #[command(flatten)]
    layout: LayoutArgs,
}

/// What a `--var` names, opened.
enum Source {
    Data(Box<AnyDataset>, Option<String>),
    Number(Lit),
}

/// A `--var`'s source, borrowed.
enum Source2<'a> {
    Data(&'a AnyDataset, &'a Option<String>),
    Number(Lit),
}

fn parse_var(s: &str) -> Result<(String, Source), Failure> {
    let (name, src) = s
        .split_once('=')
        .ok_or_else(|| Failure::new(format!("--var {s}: expected NAME=SOURCE")))?;
    if let Ok(i) = src.parse::<i128>() {
        return Ok((name.to_string(), Source::Number(Lit::Int(i))));
    }
    if let Ok(f) = src.parse::<f64>() {
        return Ok((name.to_string(), Source::Number(Lit::Float(f))));
    }
    let (path, column) = match src.rsplit_once("::") {
        Some((p, c)) => (p, Some(c.to_string())),
        None => (src, None),
    };
    let ds = blz::open(path).map_err(|e| Failure::new(format!("--var {name}: {path}: {e}")))?;
    Ok((name.to_string(), Source::Data(Box::new(ds), column)))
}

/// `blz eval`.
pub fn run(a: &EvalArgs) -> Result<(), Failure> {
    if a.out.is_none() && a.reduce.is_none() {
        return Err(Failure::new(
            "give --out PATH (a new dataset) or --reduce OP",
        ));
    }
    let reduce = a.reduce.as_deref().map(str::parse::<Reduce>).transpose()?;
    let sources = a
        .vars
        .iter()
        .map(|v| parse_var(v))
        .collect::<Result<Vec<_>, _>>()?;
    let mut operands = Vec::with_capacity(sources.len());
    for (name, src) in &sources {
        let src = match src {
            Source::Data(d, c) => Source2::Data(d.as_ref(), c),
            Source::Number(l) => Source2::Number(*l),
        };
        let op = match src {
            Source2::Number(l) => Operand::Scalar(l),
            Source2::Data(AnyDataset::Array(d), None) => Operand::Array(d),
            Source2::Data(AnyDataset::Table(t), Some(c)) => Operand::Column(t, c.clone()),
            Source2::Data(AnyDataset::Table(t), None) => {
                return Err(Failure::new(format!(
                    "--var {name}: {} is a table: name a column, {name}={}::COLUMN (columns: {})",
                    t.path().display(),
                    t.path().display(),
                    t.column_names().join(", ")
                )))
            }
            Source2::Data(_, _) => {
                return Err(Failure::new(format!(
                    "--var {name}: not an array dataset or a table's column"
                )))
            }
        };
        operands.push((name.as_str(), op));
    }
    let e = Expression::new(&a.expr, operands)?;
    if let Some(op) = reduce {
        let axes = (!a.axis.is_empty()).then_some(a.axis.as_slice());
        let r = e.reduce(op, axes, a.ddof)?;
        let isz = r.dtype.itemsize();
        let vals: Vec<String> = r
            .data
            .chunks_exact(isz)
            .map(|b| blz::dtype::bytes_to_value(b, r.dtype, Endianness::native()).to_string())
            .collect();
        if r.shape.is_empty() {
            say!("{}", vals.join(""));
        } else {
            say!("shape {:?} {}: [{}]", r.shape, r.dtype, vals.join(", "));
        }
        return Ok(());
    }
    let out = a
        .out
        .as_ref()
        .ok_or_else(|| Failure::new("--out is missing"))?;
    let rows = e.shape().first().copied().unwrap_or(0);
    let opts = crate::dataset::create_options(&a.layout, e.dtype(), e.shape().len(), rows)?;
    let ds = e.compute(out, &opts)?;
    say!(
        "wrote {}: shape {:?}, {}",
        out.display(),
        ds.shape(),
        ds.dtype()
    );
    Ok(())
}
