//! `where` queries over tables and arrays, as bcolz's `ctable.where`: an expression in
//! numexpr's syntax ([`expr`]) selects rows; blz evaluates it range by range of rows aligned
//! to the columns' chunks, in parallel (rayon), reading only the columns the expression
//! names, and the output columns only for ranges with a match. A range whose chunk
//! statistics ([`crate::stats`]) prove that no row can match is skipped without reading
//! anything; one whose statistics prove that every row matches reads no expression column.
//!
//! - [`Table::where_rows`]: the matching rows' indices and the chosen columns' values;
//!   [`Table::where_batches`] yields them in batches (memory bounded by a batch);
//!   [`Table::where_rows_in`] queries a range of rows.
//! - [`Dataset::where_mask`] (numpy's `x > 5` on the whole array) and
//!   [`Dataset::where_elements`] (numpy's `a[a > 5]`, with the elements' flat indices):
//!   the array's elements are named `x` in the expression.

mod eval;
pub mod expr;
mod proof;
mod time;

pub use expr::{parse, BinOp, Expr, Literal, MAX_DEPTH, MAX_LEN, MAX_NODES, MAX_PARENS};

use self::eval::{check, eval_mask, Frame, Raw, Ty};
use self::proof::{abs_eval, merge, Abs};
use crate::dtype::DType;
use crate::engine::{as_bytes, as_bytes_mut};
use crate::error::{Error, Result};
use crate::stats::ChunkStats;
use crate::table::{LeafKind, Values};
use crate::{Dataset, Table};
use ndarray::{ArrayD, IxDyn};
use rayon::prelude::*;
use std::collections::HashMap;

/// The rows a table query matched.
#[derive(Debug, Clone, PartialEq)]
pub struct Matches {
    /// The matching rows' indices, ascending.
    pub rows: Vec<u64>,
    /// The values of the requested columns at those rows, in the order requested.
    pub columns: Vec<(String, Values)>,
}

/// How a range of elements matched.
enum Sel {
    None,
    All,
    Mask(Vec<bool>),
}

/// One range's result: its first element, its length, which elements matched and the output
/// columns' values at those elements.
struct Part {
    start: u64,
    n: usize,
    sel: Sel,
    outputs: Vec<Raw>,
}

/// Reads a column's elements over a range of units.
type ReadFn<'a> = Box<dyn Fn(&str, u64, u64) -> Result<Raw> + Sync + 'a>;
/// A nullable column's validity over a range of units (`None`: no nulls there).
type ValidFn<'a> = Box<dyn Fn(&str, u64, u64) -> Result<Option<Vec<bool>>> + Sync + 'a>;
/// A column's statistics over a range of units.
type StatsFn<'a> = Box<dyn Fn(&str, u64, u64) -> Option<ChunkStats> + Sync + 'a>;

/// What a query reads: the columns' types, how to read a column's elements over a range of
/// units (table rows, or array chunk-rows), and their statistics over it.
struct Source<'a> {
    tys: HashMap<String, Ty>,
    /// Reads a column to evaluate the expression with (a dictionary-encoded column as
    /// codes).
    read: ReadFn<'a>,
    /// Reads a column's values to return (`None`: as `read`).
    read_out: Option<ReadFn<'a>>,
    /// The validity of a nullable column (tables only).
    valid: Option<ValidFn<'a>>,
    stats: StatsFn<'a>,
    /// Elements per unit.
    scale: u64,
    /// Elements in all.
    total: u64,
}

/// A checked query.
struct Query<'a> {
    expr: Expr,
    src: Source<'a>,
}

impl<'a> Query<'a> {
    fn new(text: &str, names: &[&str], src: Source<'a>) -> Result<Query<'a>> {
        let mut expr = parse(text, names)?;
        let col_ty = |n: &str| src.tys.get(n).copied();
        dates_from_strings(text, &mut expr, &col_ty)?;
        let ty = check(text, &expr, &col_ty)?;
        if ty != Ty::Bool {
            return Err(expr::error(
                text,
                0,
                "the expression must be a condition (a boolean), e.g. `x > 0`".to_string(),
            ));
        }
        Ok(Query { expr, src })
    }

    /// Evaluates one range of units; reads `outputs` only where rows match.
    fn range(&self, a: u64, b: u64, outputs: &[String]) -> Result<Part> {
        let start = a * self.src.scale;
        let n = ((b - a) * self.src.scale).min(self.src.total.saturating_sub(start)) as usize;
        let abs = abs_eval(&self.expr, &|name| {
            let ty = *self.src.tys.get(name)?;
            (self.src.stats)(name, a, b).map(|s| (s, ty))
        });
        let mut frame = Frame {
            n,
            cols: HashMap::new(),
            valid: HashMap::new(),
        };
        let sel = match abs {
            Abs::Bool { t: false, .. } => Sel::None,
            Abs::Bool { f: false, .. } => Sel::All,
            _ => {
                for name in self.expr.columns() {
                    if let Some(valid) = &self.src.valid {
                        if let Some(v) = valid(&name, a, b)? {
                            frame.valid.insert(name.clone(), v);
                        }
                    }
                    let raw = (self.src.read)(&name, a, b)?;
                    frame.cols.insert(name, raw);
                }
                let mask = eval_mask(&self.expr, &frame);
                match mask.iter().filter(|&&m| m).count() {
                    0 => Sel::None,
                    c if c == n => Sel::All,
                    _ => Sel::Mask(mask),
                }
            }
        };
        let mut outs = Vec::with_capacity(outputs.len());
        if !matches!(sel, Sel::None) {
            for name in outputs {
                let raw = match (frame.cols.remove(name), &self.src.read_out) {
                    (Some(r), None) => r,
                    (Some(r @ (Raw::I64(_) | Raw::F64(_) | Raw::Fixed(..) | Raw::Var(_))), _) => r,
                    (_, Some(out)) => out(name, a, b)?,
                    (_, None) => (self.src.read)(name, a, b)?,
                };
                outs.push(match &sel {
                    Sel::Mask(m) => filter(raw, m),
                    _ => raw,
                });
            }
        }
        Ok(Part {
            start,
            n,
            sel,
            outputs: outs,
        })
    }

    /// Evaluates ranges in parallel, results in order.
    fn ranges(&self, ranges: &[(u64, u64)], outputs: &[String]) -> Result<Vec<Part>> {
        ranges
            .par_iter()
            .map(|&(a, b)| self.range(a, b, outputs))
            .collect()
    }
}

/// Reads each string literal compared with a `datetime64` as a date of the unit its text
/// has (`day >= '2020-01-01'`, as pandas' `query` reads it), so that the evaluator and the
/// statistics' proof see a `datetime64` literal.
fn dates_from_strings(text: &str, e: &mut Expr, col_ty: &dyn Fn(&str) -> Option<Ty>) -> Result<()> {
    match e {
        Expr::Neg { arg, .. } | Expr::Not { arg, .. } => dates_from_strings(text, arg, col_ty),
        Expr::Bin {
            op, left, right, ..
        } => {
            dates_from_strings(text, left, col_ty)?;
            dates_from_strings(text, right, col_ty)?;
            if op.is_comparison() {
                date_literal(text, right, left, col_ty)?;
                date_literal(text, left, right, col_ty)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `lit` as a `datetime64` literal when it is a string and `other` a date.
fn date_literal(
    text: &str,
    lit: &mut Expr,
    other: &Expr,
    col_ty: &dyn Fn(&str) -> Option<Ty>,
) -> Result<()> {
    let Expr::Lit {
        value: Literal::Str(s),
        pos,
    } = lit
    else {
        return Ok(());
    };
    if !matches!(
        check(text, other, col_ty),
        Ok(Ty::Time { delta: false, .. })
    ) {
        return Ok(());
    }
    let date = String::from_utf8_lossy(s).into_owned();
    let unit = crate::datetime::natural_unit(&date);
    let value = crate::datetime::parse_datetime(&date, unit)
        .map_err(|e| expr::error(text, *pos, format!("{e}, compared with a datetime64")))?;
    *lit = Expr::Lit {
        value: Literal::Time {
            delta: false,
            unit,
            value,
        },
        pos: *pos,
    };
    Ok(())
}

/// The elements of `raw` where `mask` is set.
fn filter(raw: Raw, mask: &[bool]) -> Raw {
    fn pick<T: Copy>(v: &[T], mask: &[bool]) -> Vec<T> {
        v.iter()
            .zip(mask)
            .filter_map(|(x, &m)| m.then_some(*x))
            .collect()
    }
    match raw {
        Raw::I64(v) => Raw::I64(pick(&v, mask)),
        Raw::F64(v) => Raw::F64(pick(&v, mask)),
        Raw::Var(v) => Raw::Var(
            v.into_iter()
                .zip(mask)
                .filter_map(|(x, &m)| m.then_some(x))
                .collect(),
        ),
        Raw::Fixed(d, b) => {
            let isz = d.itemsize().max(1);
            let mut out = Vec::with_capacity(b.len() / 4);
            for (c, &m) in b.chunks_exact(isz).zip(mask) {
                if m {
                    out.extend_from_slice(c);
                }
            }
            Raw::Fixed(d, out)
        }
        Raw::Codes(c, d) => Raw::Codes(pick(&c, mask), d),
    }
}

/// Appends `raw` to `values`.
fn append_raw(values: &mut Values, raw: Raw) {
    match (values, raw) {
        (Values::Fixed { data, .. }, Raw::I64(v)) => {
            data.extend_from_slice(as_bytes(&v).unwrap_or(&[]))
        }
        (Values::Fixed { data, .. }, Raw::F64(v)) => {
            data.extend_from_slice(as_bytes(&v).unwrap_or(&[]))
        }
        (Values::Fixed { data, .. }, Raw::Fixed(_, b)) => data.extend_from_slice(&b),
        (Values::Var(items), Raw::Var(v)) => items.extend(v),
        _ => {}
    }
}

/// Reads `n` elements of `dtype` through `fill` (which fills native-order bytes).
fn read_fixed(dtype: DType, n: usize, fill: impl FnOnce(&mut [u8]) -> Result<()>) -> Result<Raw> {
    Ok(match dtype {
        DType::I64 => {
            let mut v = vec![0i64; n];
            fill(as_bytes_mut(&mut v).unwrap_or(&mut []))?;
            Raw::I64(v)
        }
        DType::F64 => {
            let mut v = vec![0f64; n];
            fill(as_bytes_mut(&mut v).unwrap_or(&mut []))?;
            Raw::F64(v)
        }
        d => {
            let mut v = vec![0u8; n * d.itemsize()];
            fill(&mut v)?;
            Raw::Fixed(d, v)
        }
    })
}

/// Row ranges `[a, b)` of `step` rows (aligned to multiples of `step`) covering `rows`.
fn aligned_ranges(rows: std::ops::Range<u64>, step: u64) -> Vec<(u64, u64)> {
    let step = step.max(1);
    let mut out = Vec::new();
    let mut a = rows.start;
    while a < rows.end {
        let b = ((a / step + 1) * step).min(rows.end);
        out.push((a, b));
        a = b;
    }
    out
}

/// A table query, planned.
struct TablePlan<'t> {
    query: Query<'t>,
    outputs: Vec<String>,
    kinds: Vec<Values>,
    step: u64,
}

impl Table {
    fn plan_where(&self, expr: &str, columns: &[&str]) -> Result<TablePlan<'_>> {
        let leaves = self.leaves();
        let names: Vec<&str> = leaves.iter().map(|l| l.path.as_str()).collect();
        let mut tys = HashMap::new();
        let mut kinds = HashMap::new();
        for l in &leaves {
            match l.kind {
                LeafKind::Fixed(d) => {
                    if let Some(t) = Ty::of_dtype(d) {
                        tys.insert(l.path.clone(), t);
                    }
                }
                _ => {
                    tys.insert(l.path.clone(), Ty::Str);
                }
            }
            kinds.insert(l.path.clone(), l.kind);
        }
        let outputs: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
        for c in &outputs {
            if !kinds.contains_key(c) {
                return Err(Error::InvalidArgument(format!(
                    "no column {c:?} in {} (columns: {})",
                    self.path().display(),
                    names.join(", ")
                )));
            }
        }
        let parsed = parse(expr, &names)?;
        let mut stats = HashMap::new();
        let mut step = 1;
        for name in parsed.columns().iter().chain(&outputs) {
            step = step.max(self.column_chunklen(name)?);
        }
        for name in parsed.columns() {
            if matches!(kinds.get(&name), Some(LeafKind::Fixed(_))) {
                let mut s = self.column_stats(&name)?;
                if self.is_nullable(&name)? {
                    // A chunk with nulls: its bounds hold for its values, but a null row
                    // matches nothing, so they cannot prove that every row matches.
                    let nulls = self.column_null_counts(&name)?;
                    for (st, n) in s.iter_mut().zip(nulls) {
                        if n != Some(0) {
                            *st = None;
                        }
                    }
                }
                stats.insert(name.clone(), (s, self.column_chunklen(&name)?));
            }
        }
        let kinds2 = kinds.clone();
        let read_values =
            std::sync::Arc::new(move |name: &str, a: u64, b: u64| match kinds2.get(name) {
                Some(LeafKind::Fixed(d)) => read_fixed(*d, (b - a) as usize, |out| {
                    self.column_rows_into(name, a, b, out)
                }),
                _ => match self.column_rows(name, a, b)? {
                    Values::Var(v) => Ok(Raw::Var(v)),
                    Values::Fixed { dtype, data } => Ok(Raw::Fixed(dtype, data)),
                },
            });
        let read_out = std::sync::Arc::clone(&read_values);
        // A dictionary-encoded column is compared by its codes: a string literal once per
        // dictionary entry, not once per row.
        let dicts: Vec<String> = leaves
            .iter()
            .filter(|l| l.is_dictionary())
            .map(|l| l.path.clone())
            .collect();
        let src = Source {
            tys,
            read: Box::new(move |name, a, b| {
                if dicts.iter().any(|d| d == name) {
                    let dv = self.column_codes(name, a, b)?;
                    return Ok(Raw::Codes(dv.codes, dv.dictionary));
                }
                read_values(name, a, b)
            }),
            read_out: Some(Box::new(move |name, a, b| read_out(name, a, b))),
            stats: Box::new(move |name, a, b| {
                let (s, cl) = stats.get(name)?;
                let (first, last) = (a / cl, (b.max(a + 1) - 1) / cl);
                merge(s.get(first as usize..=last as usize)?)
            }),
            valid: Some(Box::new(move |name, a, b| self.column_validity(name, a, b))),
            scale: 1,
            total: self.nrows(),
        };
        let kinds = outputs
            .iter()
            .map(|c| match kinds.get(c) {
                Some(LeafKind::Fixed(d)) => Values::Fixed {
                    dtype: *d,
                    data: Vec::new(),
                },
                _ => Values::Var(Vec::new()),
            })
            .collect();
        Ok(TablePlan {
            query: Query::new(expr, &names, src)?,
            outputs,
            kinds,
            step,
        })
    }

    /// The rows where boolean expression `expr` holds (numexpr syntax, see
    /// [`crate::query::expr`]), with the values of `columns` (leaf paths) at those rows.
    /// Evaluated over ranges of rows aligned to the columns' chunks, in parallel; only the
    /// columns the expression names are read, the output columns only where rows match,
    /// and ranges whose chunk statistics prove that no row matches are skipped.
    ///
    /// # Errors
    /// [`Error::InvalidExpression`] (with the position of the fault) for an expression that
    /// does not parse, names an unknown column or mixes types; an unknown output column;
    /// read errors.
    pub fn where_rows(&self, expr: &str, columns: &[&str]) -> Result<Matches> {
        self.where_rows_in(expr, columns, 0..self.nrows())
    }

    /// As [`Table::where_rows`], over rows `rows` only.
    ///
    /// # Errors
    /// As [`Table::where_rows`]; [`Error::OutOfBounds`] for rows past the table's end.
    pub fn where_rows_in(
        &self,
        expr: &str,
        columns: &[&str],
        rows: std::ops::Range<u64>,
    ) -> Result<Matches> {
        if rows.start > rows.end || rows.end > self.nrows() {
            return Err(Error::OutOfBounds {
                dataset: self.path().to_path_buf(),
                reason: format!(
                    "rows {}..{} outside 0..{}",
                    rows.start,
                    rows.end,
                    self.nrows()
                ),
            });
        }
        let plan = self.plan_where(expr, columns)?;
        plan.run(&aligned_ranges(rows, plan.step))
    }

    /// The rows [`Table::where_rows`] finds, in batches: each batch covers about
    /// `batch_rows` rows of the table (rounded up to whole chunks) and holds their matches;
    /// batches without a match are not yielded. Memory stays at one batch.
    ///
    /// # Errors
    /// As [`Table::where_rows`], for the expression at once and for reads per batch.
    pub fn where_batches<'t>(
        &'t self,
        expr: &str,
        columns: &[&str],
        batch_rows: u64,
    ) -> Result<impl Iterator<Item = Result<Matches>> + 't> {
        let plan = self.plan_where(expr, columns)?;
        let ranges = aligned_ranges(0..self.nrows(), plan.step);
        let per = (batch_rows.div_ceil(plan.step)).max(1) as usize;
        let mut at = 0;
        Ok(std::iter::from_fn(move || {
            while at < ranges.len() {
                let end = (at + per).min(ranges.len());
                let r = plan.run(&ranges[at..end]);
                at = end;
                match r {
                    Ok(m) if m.rows.is_empty() => continue,
                    r => return Some(r),
                }
            }
            None
        }))
    }

    /// How many rows `expr` matches (reads only the expression's columns).
    ///
    /// # Errors
    /// As [`Table::where_rows`].
    pub fn where_count(&self, expr: &str) -> Result<u64> {
        Ok(self.where_rows(expr, &[])?.rows.len() as u64)
    }
}

impl TablePlan<'_> {
    fn run(&self, ranges: &[(u64, u64)]) -> Result<Matches> {
        let parts = self.query.ranges(ranges, &self.outputs)?;
        let mut rows = Vec::new();
        let mut cols: Vec<Values> = self.kinds.clone();
        for p in parts {
            match &p.sel {
                Sel::None => continue,
                Sel::All => rows.extend(p.start..p.start + p.n as u64),
                Sel::Mask(m) => rows.extend(
                    m.iter()
                        .enumerate()
                        .filter_map(|(i, &x)| x.then_some(p.start + i as u64)),
                ),
            }
            for (c, raw) in cols.iter_mut().zip(p.outputs) {
                append_raw(c, raw);
            }
        }
        Ok(Matches {
            rows,
            columns: self.outputs.iter().cloned().zip(cols).collect(),
        })
    }
}

/// The elements of an array that a query matched.
#[derive(Debug, Clone, PartialEq)]
pub struct ElementMatches {
    /// The matching elements' flat indices (C order), ascending.
    pub indices: Vec<u64>,
    /// Their values (native order), in the same order.
    pub values: Values,
}

/// The name of an array's elements in a query.
pub(crate) const ARRAY_NAME: &str = "x";

impl Dataset {
    fn plan_where(&self, expr: &str) -> Result<(Query<'_>, Vec<(u64, u64)>)> {
        let dtype = self.dtype();
        let ty = Ty::of_dtype(dtype).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: a query cannot compare {} elements",
                self.path().display(),
                dtype.name()
            ))
        })?;
        let shape = self.shape().to_vec();
        let c0 = self.chunkshape()[0];
        let inner: u64 = shape[1..].iter().product();
        let row_chunks: u64 = shape[1..]
            .iter()
            .zip(&self.chunkshape()[1..])
            .map(|(&n, &c)| n.div_ceil(c))
            .product();
        let stats = self.chunk_stats()?;
        let src = Source {
            tys: HashMap::from([(ARRAY_NAME.to_string(), ty)]),
            valid: None,
            read_out: None,
            read: Box::new(move |_, a, b| {
                let n = ((b - a) * c0).min(shape[0] - a * c0);
                let mut sel: Vec<crate::selection::AxisSel> = shape
                    .iter()
                    .map(|&n| crate::selection::AxisSel::full(n))
                    .collect();
                sel[0] = crate::selection::AxisSel {
                    start: a * c0,
                    step: 1,
                    count: n,
                    reversed: false,
                    keep: true,
                };
                read_fixed(dtype, (n * inner) as usize, |out| self.read_into(&sel, out))
            }),
            stats: Box::new(move |_, a, b| {
                merge(stats.get((a * row_chunks) as usize..(b * row_chunks) as usize)?)
            }),
            scale: c0 * inner,
            total: self.shape().iter().product(),
        };
        let q = Query::new(expr, &[ARRAY_NAME], src)?;
        let ranges = (0..self.shape()[0].div_ceil(c0))
            .map(|r| (r, r + 1))
            .collect();
        Ok((q, ranges))
    }

    /// Numpy's boolean array for `expr` over this array, its elements named `x`
    /// (`x > 5`, `(x % 2 == 0) & (x != 10)`): the dataset's shape. Evaluated chunk-row by
    /// chunk-row in parallel; chunk-rows whose statistics decide the answer are not read.
    ///
    /// # Errors
    /// [`Error::InvalidExpression`]; a dtype queries cannot compare (complex); read errors.
    pub fn where_mask(&self, expr: &str) -> Result<ArrayD<bool>> {
        let (q, ranges) = self.plan_where(expr)?;
        let total: u64 = self.shape().iter().product();
        let parts = q.ranges(&ranges, &[])?;
        let mut out = Vec::with_capacity(total as usize);
        for p in parts {
            match p.sel {
                Sel::None => out.extend(std::iter::repeat_n(false, p.n)),
                Sel::All => out.extend(std::iter::repeat_n(true, p.n)),
                Sel::Mask(m) => out.extend_from_slice(&m),
            }
        }
        let shape: Vec<usize> = self.shape().iter().map(|&n| n as usize).collect();
        ArrayD::from_shape_vec(IxDyn(&shape), out)
            .map_err(|e| Error::InvalidArgument(format!("mask shape: {e}")))
    }

    /// The elements where `expr` holds (numpy's `a[x > 5]`), with their flat indices.
    ///
    /// # Errors
    /// As [`Dataset::where_mask`].
    pub fn where_elements(&self, expr: &str) -> Result<ElementMatches> {
        let (q, ranges) = self.plan_where(expr)?;
        let parts = q.ranges(&ranges, &[ARRAY_NAME.to_string()])?;
        let mut indices = Vec::new();
        let mut values = Values::Fixed {
            dtype: self.dtype(),
            data: Vec::new(),
        };
        for p in parts {
            match &p.sel {
                Sel::None => continue,
                Sel::All => indices.extend(p.start..p.start + p.n as u64),
                Sel::Mask(m) => indices.extend(
                    m.iter()
                        .enumerate()
                        .filter_map(|(i, &x)| x.then_some(p.start + i as u64)),
                ),
            }
            for raw in p.outputs {
                append_raw(&mut values, raw);
            }
        }
        Ok(ElementMatches { indices, values })
    }
}
