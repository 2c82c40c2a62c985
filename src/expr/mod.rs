//! Array expressions, as python-blosc2's lazy expressions: `a * b + sin(c)` over datasets,
//! table columns, in-memory arrays and scalars, with numpy's broadcasting and type
//! promotion (numpy 2, NEP 50), evaluated block by block in parallel (rayon) with memory
//! bounded by a few chunks per operand:
//!
//! - into a new dataset ([`Expression::compute`], [`Expression::compute_in`]): built beside
//!   its path and renamed into place, so a failure midway leaves nothing there;
//! - into a buffer, whole or any region of the result ([`Expression::eval_into`]): only the
//!   operands' elements the region needs are read;
//! - reduced ([`Expression::reduce`]: `sum`, `prod`, `mean`, `std`, `var`, `min`, `max`,
//!   `any`, `all`, over all axes or some), without writing the intermediate.
//!
//! ```no_run
//! use blz::expr::{Expression, Operand};
//! use blz::{CreateOptions, Dataset};
//! # fn main() -> blz::Result<()> {
//! let (a, b, c) = (Dataset::open("a.blz")?, Dataset::open("b.blz")?, Dataset::open("c.blz")?);
//! let e = Expression::new(
//!     "a * b + sin(c)",
//!     vec![("a", Operand::Array(&a)), ("b", Operand::Array(&b)), ("c", Operand::Array(&c))],
//! )?;
//! e.compute("r.blz", &CreateOptions::default())?;
//! let total = e.reduce(blz::expr::Reduce::Sum, None, 0.0)?;
//! # Ok(()) }
//! ```
//!
//! Every check happens in [`Expression::new`], before anything is read or written: unknown
//! names and functions, bad syntax, dtypes expressions do not compute with (complex, strings)
//! or that do not promote (`-` of booleans, `&` of floats, a Python integer out of range of
//! the integer type it meets), and shapes that do not broadcast.

mod func;
mod kernel;
mod parse;
mod reduce;
mod typed;
mod types;

pub use func::Func;
pub use kernel::Val;
pub use parse::{parse, BinOp, Lit, Node, UnOp, MAX_DEPTH, MAX_LEN};
pub use reduce::{Reduce, Reduced};
pub use types::{promote, Ty};

use self::kernel::{from_bytes, to_bytes};
use self::typed::{check, count_uses, eval, TNode, VarKind, Vars};
use crate::dtype::DType;
use crate::engine::CreateOptions;
use crate::error::{Error, Result};
use crate::selection::AxisSel;
use crate::storage::{self, Storage};
use crate::{Dataset, Table};
use rayon::prelude::*;
use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

/// Most elements a block holds when the operands' chunks do not decide (and at most what
/// one block may hold when they would make it larger): 4 Mi elements, 32 MiB of float64.
const MAX_BLOCK_ELEMENTS: u64 = 1 << 22;
/// Elements of a block when no operand has chunks (in-memory operands only).
const DEFAULT_BLOCK_ELEMENTS: u64 = 1 << 20;

/// An operand of an expression.
#[derive(Debug, Clone)]
pub enum Operand<'a> {
    /// An N-d array dataset.
    Array(&'a Dataset),
    /// A fixed-size leaf column of a table (1-d, one element per row).
    Column(&'a Table, String),
    /// An in-memory array: native-endian elements of `dtype` in C order.
    Memory {
        /// The elements' type.
        dtype: DType,
        /// The shape (empty for a 0-d array).
        shape: Vec<u64>,
        /// The elements.
        data: Cow<'a, [u8]>,
    },
    /// A Python scalar (`bool`, `int` or `float`): weak in numpy 2's promotion, it takes
    /// the type of the arrays it meets.
    Scalar(Lit),
}

/// An operand with what evaluation needs of it.
#[derive(Debug)]
struct Bound<'a> {
    name: String,
    operand: Operand<'a>,
    dtype: DType,
    shape: Vec<u64>,
    chunks: Option<Vec<u64>>,
}

/// A checked expression over bound operands.
#[derive(Debug)]
pub struct Expression<'a> {
    text: String,
    tree: TNode,
    operands: Vec<Bound<'a>>,
    uses: Vec<usize>,
    shape: Vec<u64>,
    dtype: DType,
}

fn valid_name(n: &str) -> bool {
    let mut c = n.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

fn shape_text(s: &[u64]) -> String {
    let parts: Vec<String> = s.iter().map(u64::to_string).collect();
    if parts.len() == 1 {
        format!("({},)", parts[0])
    } else {
        format!("({})", parts.join(", "))
    }
}

impl<'a> Expression<'a> {
    /// Parses and checks `text` with its names bound to `operands`.
    ///
    /// # Errors
    /// [`Error::InvalidExpression`] for bad syntax, unknown names or functions, types that
    /// do not promote; [`Error::InvalidArgument`] for a bad operand name, an operand whose
    /// dtype expressions do not compute with, shapes that do not broadcast, or an in-memory
    /// operand whose bytes are not its shape's.
    pub fn new<S: AsRef<str>>(
        text: &str,
        operands: Vec<(S, Operand<'a>)>,
    ) -> Result<Expression<'a>> {
        let mut bound: Vec<Bound<'a>> = Vec::with_capacity(operands.len());
        for (name, operand) in operands {
            let name = name.as_ref().to_string();
            if !valid_name(&name) || matches!(name.as_str(), "True" | "False" | "inf" | "nan") {
                return Err(Error::InvalidArgument(format!(
                    "operand name {name:?} is not a name an expression can use"
                )));
            }
            if bound.iter().any(|b| b.name == name) {
                return Err(Error::InvalidArgument(format!(
                    "operand {name:?} given twice"
                )));
            }
            let (dtype, shape, chunks) = match &operand {
                Operand::Array(d) => (d.dtype(), d.shape().to_vec(), Some(d.chunkshape().to_vec())),
                Operand::Column(t, c) => {
                    let leaf = t
                        .leaves()
                        .into_iter()
                        .find(|l| l.path == *c)
                        .ok_or_else(|| {
                            Error::InvalidArgument(format!(
                                "operand {name:?}: no column {c:?} in {} (columns: {})",
                                t.path().display(),
                                t.column_names().join(", ")
                            ))
                        })?;
                    let dtype = column_dtype(t, c).ok_or_else(|| Error::InvalidArgument(format!(
                        "operand {name:?}: column {c:?} of {} is not a fixed-size numeric column ({:?})",
                        t.path().display(),
                        leaf.kind
                    )))?;
                    let chunk = t
                        .fixed_core(c)
                        .map(|core| core.chunkshape.first().copied().unwrap_or(1))?;
                    (dtype, vec![t.nrows()], Some(vec![chunk]))
                }
                Operand::Memory { dtype, shape, data } => {
                    let n: u64 = shape.iter().product();
                    if data.len() as u64 != n * dtype.itemsize() as u64 {
                        return Err(Error::InvalidArgument(format!(
                            "operand {name:?}: {} bytes for shape {} of {dtype} ({} bytes)",
                            data.len(),
                            shape_text(shape),
                            n * dtype.itemsize() as u64
                        )));
                    }
                    (*dtype, shape.clone(), None)
                }
                Operand::Scalar(_) => (DType::F64, vec![], None),
            };
            if !types::supported(dtype) {
                return Err(Error::InvalidArgument(format!(
                    "operand {name:?} holds {dtype}; expressions compute with bool, integers, \
                     float32 and float64"
                )));
            }
            bound.push(Bound {
                name,
                operand,
                dtype,
                shape,
                chunks,
            });
        }
        let names: Vec<&str> = bound.iter().map(|b| b.name.as_str()).collect();
        let node = parse(text, &names)?;
        let kinds: Vec<VarKind> = bound
            .iter()
            .map(|b| match b.operand {
                Operand::Scalar(l) => VarKind::Scalar(l),
                _ => VarKind::Typed(b.dtype),
            })
            .collect();
        let tree = check(text, &node, &kinds)?;
        let mut uses = vec![0; bound.len()];
        count_uses(&tree, &mut uses);
        // numpy's broadcasting over the operands the expression uses.
        let mut shape: Vec<u64> = Vec::new();
        for (b, _) in bound.iter().zip(&uses).filter(|(_, &u)| u > 0) {
            let n = shape.len().max(b.shape.len());
            let mut out = vec![1u64; n];
            for (i, o) in out.iter_mut().enumerate() {
                let x = (i + shape.len()).checked_sub(n).map_or(1, |j| shape[j]);
                let y = (i + b.shape.len()).checked_sub(n).map_or(1, |j| b.shape[j]);
                *o = match (x, y) {
                    (x, y) if x == y => x,
                    (1, y) => y,
                    (x, 1) => x,
                    _ => {
                        let others: Vec<String> = bound
                            .iter()
                            .zip(&uses)
                            .filter(|(_, &u)| u > 0)
                            .map(|(b, _)| format!("{} {}", b.name, shape_text(&b.shape)))
                            .collect();
                        return Err(Error::InvalidArgument(format!(
                            "operands could not be broadcast together: {}",
                            others.join(", ")
                        )));
                    }
                };
            }
            shape = out;
        }
        Ok(Expression {
            text: text.to_string(),
            dtype: tree.ty.dtype,
            tree,
            operands: bound,
            uses,
            shape,
        })
    }

    /// The result's shape.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// The result's dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The expression's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Checks a region of the result (one [`AxisSel`] per axis, none reversed).
    fn check_region(&self, region: &[AxisSel]) -> Result<()> {
        let bad = |r: String| Err(Error::InvalidArgument(format!("{}: {r}", self.text)));
        if region.len() != self.shape.len() {
            return bad(format!(
                "a region of {} axes for a result of shape {}",
                region.len(),
                shape_text(&self.shape)
            ));
        }
        for (ax, (s, &n)) in region.iter().zip(&self.shape).enumerate() {
            let last = s
                .start
                .saturating_add(s.count.saturating_sub(1).saturating_mul(s.step.max(1)));
            if s.reversed || s.step == 0 || (s.count > 0 && last >= n) {
                return bad(format!(
                    "axis {ax}: selection {s:?} outside 0..{n} or reversed"
                ));
            }
        }
        Ok(())
    }

    /// The whole result as a region.
    pub fn full(&self) -> Vec<AxisSel> {
        self.shape.iter().map(|&n| AxisSel::full(n)).collect()
    }

    /// The bytes of the result's region `region` (native-endian, C order, the region's
    /// counts on every axis): [`Expression::eval_into`] into a new buffer.
    ///
    /// # Errors
    /// As [`Expression::eval_into`].
    pub fn eval(&self, region: &[AxisSel]) -> Result<Vec<u8>> {
        let n: u64 = region.iter().map(|s| s.count).product();
        let mut out = vec![
            0u8;
            usize::try_from(n * self.dtype.itemsize() as u64)
                .map_err(|_| Error::InvalidArgument("region too large".into()))?
        ];
        self.eval_into(region, &mut out)?;
        Ok(out)
    }

    /// Computes the region `region` of the result (one [`AxisSel`] per axis; `keep` is
    /// ignored: the output has the counts of every axis) into `out`, native-endian elements
    /// of [`Expression::dtype`] in C order; blocks in parallel, each reading only its part
    /// of each operand.
    ///
    /// # Errors
    /// A region outside the result or a buffer of the wrong size ([`Error::InvalidArgument`]);
    /// an operand's read error; a value numpy has no result for (an integer to a negative
    /// power).
    pub fn eval_into(&self, region: &[AxisSel], out: &mut [u8]) -> Result<()> {
        self.check_region(region)?;
        let isz = self.dtype.itemsize();
        let total: u64 = region.iter().map(|s| s.count).product();
        if out.len() as u64 != total * isz as u64 {
            return Err(Error::InvalidArgument(format!(
                "{}: a buffer of {} bytes for {total} elements of {}",
                self.text,
                out.len(),
                self.dtype
            )));
        }
        if total == 0 {
            return Ok(());
        }
        let (axis, blocks) = self.blocks(region);
        let inner: u64 = region.iter().skip(axis + 1).map(|s| s.count).product();
        let mut parts: Vec<(&mut [u8], (u64, u64))> = Vec::with_capacity(blocks.len());
        let mut rest = out;
        for &(a, b) in &blocks {
            let (head, tail) = rest.split_at_mut(((b - a) * inner) as usize * isz);
            parts.push((head, (a, b)));
            rest = tail;
        }
        parts.into_par_iter().try_for_each(|(buf, (a, b))| {
            let v = self.block(region, axis, a, b)?;
            to_bytes(&v, self.dtype, buf);
            Ok(())
        })
    }

    /// Computes the result into a new dataset at `path` (a local path or a URL the storage
    /// layer opens), chunked and compressed as `opts` say. Nothing appears at `path` until
    /// the whole result is written.
    ///
    /// # Errors
    /// As [`Expression::compute_in`]; the path's storage cannot be opened.
    pub fn compute(&self, path: impl AsRef<Path>, opts: &CreateOptions) -> Result<Dataset> {
        let (s, root) = storage::for_new_path(path.as_ref(), opts.overwrite)?;
        self.compute_in(s, &root, opts)
    }

    /// As [`Expression::compute`], on a given storage backend.
    ///
    /// # Errors
    /// A 0-d result (a dataset has at least one axis); as [`Dataset::create_from`] (the
    /// path exists and `overwrite` is off: before anything is computed); as
    /// [`Expression::eval_into`]. On error nothing is left at `root`.
    pub fn compute_in(
        &self,
        storage: Arc<dyn Storage>,
        root: &Path,
        opts: &CreateOptions,
    ) -> Result<Dataset> {
        if self.shape.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{}: the result is a scalar (0-d); a dataset needs at least one axis",
                self.text
            )));
        }
        let region = self.full();
        let (axis, blocks) = self.blocks(&region);
        // Batches of whole rows of axis 0, a few blocks each (all blocks when the blocks
        // split a later axis: then the result is one row).
        let per = if axis == 0 {
            (rayon::current_num_threads() * 2).max(2)
        } else {
            blocks.len().max(1)
        };
        let groups: Vec<Vec<(u64, u64)>> = blocks.chunks(per).map(<[_]>::to_vec).collect();
        let inner: u64 = self.shape.iter().skip(axis + 1).product();
        let isz = self.dtype.itemsize();
        let batches = groups.into_iter().map(|g| -> Result<Vec<u8>> {
            let rows: u64 = g.iter().map(|(a, b)| b - a).sum();
            let mut buf = vec![0u8; (rows * inner) as usize * isz];
            let mut parts = Vec::with_capacity(g.len());
            let mut rest = buf.as_mut_slice();
            for &(a, b) in &g {
                let (head, tail) = rest.split_at_mut(((b - a) * inner) as usize * isz);
                parts.push((head, (a, b)));
                rest = tail;
            }
            parts.into_par_iter().try_for_each(|(out, (a, b))| {
                let v = self.block(&region, axis, a, b)?;
                to_bytes(&v, self.dtype, out);
                Ok::<(), Error>(())
            })?;
            Ok(buf)
        });
        let mut shape = self.shape.clone();
        let mut opts = opts.clone();
        opts.expectedlen = opts.expectedlen.or(Some(shape[0]));
        shape[0] = 0;
        Dataset::create_from(storage, root, self.dtype, &shape, &opts, batches)
    }

    /// Reduces the result over `axes` (all when `None`), as numpy's reductions of the same
    /// name; `ddof` for [`Reduce::Var`] and [`Reduce::Std`]. Blocks are computed and reduced
    /// in parallel; nothing of the whole result is kept.
    ///
    /// # Errors
    /// An axis out of range or given twice; `min`/`max` of no elements; as
    /// [`Expression::eval_into`].
    pub fn reduce(&self, op: Reduce, axes: Option<&[usize]>, ddof: f64) -> Result<Reduced> {
        reduce::run(self, op, axes, ddof)
    }

    /// Splits `region` into blocks along its first axis of more than one element (the
    /// axes before it have one): the axis and the blocks' index ranges in the region. A
    /// block's boundaries fall on the chunk boundaries of the first chunked operand that
    /// spans that axis, so each chunk is read by one block.
    fn blocks(&self, region: &[AxisSel]) -> (usize, Vec<(u64, u64)>) {
        let n = region.len();
        let Some(axis) = region.iter().position(|s| s.count > 1) else {
            return (
                0,
                if n == 0 || region[0].count == 1 {
                    vec![(0, 1)]
                } else {
                    vec![(0, region[0].count)]
                },
            );
        };
        let s = region[axis];
        let inner: u64 = region
            .iter()
            .skip(axis + 1)
            .map(|s| s.count)
            .product::<u64>()
            .max(1);
        let chunk = self
            .operands
            .iter()
            .zip(&self.uses)
            .filter(|(_, &u)| u > 0)
            .find_map(|(b, _)| {
                let k = b.shape.len();
                let j = (axis + k).checked_sub(n)?;
                (b.shape[j] > 1).then(|| b.chunks.as_ref().map(|c| c[j]))?
            });
        let mut rows = match chunk {
            Some(c) => c.div_ceil(s.step).max(1),
            None => (DEFAULT_BLOCK_ELEMENTS / inner).max(1),
        };
        // Bounded memory, even for chunks that span many rows of large rows.
        rows = rows.min((MAX_BLOCK_ELEMENTS / inner).max(1));
        let mut out = Vec::new();
        let mut a = 0;
        // The first block ends at a chunk boundary of the chunked operand.
        if let (Some(c), 1) = (chunk, s.step) {
            let first = (c - s.start % c).min(s.count);
            if first < rows && first > 0 {
                out.push((0, first));
                a = first;
            }
        }
        while a < s.count {
            let b = (a + rows).min(s.count);
            out.push((a, b));
            a = b;
        }
        (axis, out)
    }

    /// The values of block `a..b` (along `axis`) of `region`, one per element of the block
    /// (or one for all).
    fn block(&self, region: &[AxisSel], axis: usize, a: u64, b: u64) -> Result<Val> {
        let mut sel = region.to_vec();
        if let Some(s) = sel.get_mut(axis) {
            s.start += a * s.step;
            s.count = b - a;
        }
        for s in &mut sel {
            s.keep = true;
        }
        let mut vals = Vec::with_capacity(self.operands.len());
        for (b, &u) in self.operands.iter().zip(&self.uses) {
            vals.push(if u == 0 || matches!(b.operand, Operand::Scalar(_)) {
                None
            } else {
                Some(self.read(b, &sel)?)
            });
        }
        let mut vars = Vars {
            vals,
            uses: self.uses.clone(),
        };
        let v = eval(&self.tree, &mut vars)
            .map_err(|e| Error::InvalidArgument(format!("evaluating {}: {e}", self.text)))?;
        Ok(v)
    }

    /// An operand's values over the block `sel` (one per axis of the result), broadcast to
    /// the block's counts (or one value when it has one).
    fn read(&self, b: &Bound<'a>, sel: &[AxisSel]) -> Result<Val> {
        let n = sel.len();
        let k = b.shape.len();
        let counts: Vec<u64> = sel.iter().map(|s| s.count).collect();
        // The operand's own selection: an axis of extent 1 it broadcasts along.
        let own: Vec<AxisSel> = (0..k)
            .map(|j| {
                let s = sel[n - k + j];
                if b.shape[j] == 1 {
                    AxisSel {
                        start: 0,
                        step: 1,
                        count: 1,
                        reversed: false,
                        keep: true,
                    }
                } else {
                    s
                }
            })
            .collect();
        let own_counts: Vec<u64> = own.iter().map(|s| s.count).collect();
        let isz = b.dtype.itemsize();
        let m: u64 = own_counts.iter().product();
        let bytes: Vec<u8> = match &b.operand {
            Operand::Array(d) => {
                if b.dtype == DType::F64 && m == counts.iter().product::<u64>() {
                    // The common case read straight into the values' buffer.
                    let mut v = vec![0f64; m as usize];
                    if let Some(buf) = crate::engine::as_bytes_mut(&mut v) {
                        d.read_into(&own, buf)?;
                    }
                    return Ok(Val::F(v));
                }
                let mut buf = vec![0u8; m as usize * isz];
                d.read_into(&own, &mut buf)?;
                buf
            }
            Operand::Column(t, c) => {
                let s = own[0];
                if s.step == 1 {
                    let mut buf = vec![0u8; s.count as usize * isz];
                    t.column_rows_into(c, s.start, s.start + s.count, &mut buf)?;
                    buf
                } else {
                    let end = s.start + (s.count - 1) * s.step + 1;
                    let mut buf = vec![0u8; (end - s.start) as usize * isz];
                    t.column_rows_into(c, s.start, end, &mut buf)?;
                    gather(&buf, isz, &[s.step as usize], 0, &[s.count as usize])
                }
            }
            Operand::Memory { data, shape, .. } => {
                let mut strides = vec![0usize; k];
                let mut acc = 1usize;
                for j in (0..k).rev() {
                    strides[j] = acc;
                    acc *= shape[j] as usize;
                }
                let base: usize = own
                    .iter()
                    .zip(&strides)
                    .map(|(s, &st)| s.start as usize * st)
                    .sum();
                let st: Vec<usize> = own
                    .iter()
                    .zip(&strides)
                    .map(|(s, &st)| s.step as usize * st)
                    .collect();
                let cn: Vec<usize> = own_counts.iter().map(|&c| c as usize).collect();
                gather(data, isz, &st, base, &cn)
            }
            Operand::Scalar(_) => Vec::new(),
        };
        let total: u64 = counts.iter().product();
        if m == total || m == 1 {
            return Ok(from_bytes(&bytes, b.dtype));
        }
        // Broadcast: stride 0 along the axes of extent 1.
        let mut strides = vec![0usize; n];
        let mut acc = 1usize;
        for j in (0..k).rev() {
            strides[n - k + j] = if own_counts[j] == 1 { 0 } else { acc };
            acc *= own_counts[j] as usize;
        }
        let cn: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
        Ok(from_bytes(&gather(&bytes, isz, &strides, 0, &cn), b.dtype))
    }
}

/// The dtype of a fixed-size numeric column.
fn column_dtype(t: &Table, name: &str) -> Option<DType> {
    let core = t.fixed_core(name).ok()?;
    Some(core.dtype)
}

/// Elements of `isz` bytes from `src` at `base + Σ i_ax * strides[ax]` (strides in
/// elements) for every index of `counts`, in C order.
fn gather(src: &[u8], isz: usize, strides: &[usize], base: usize, counts: &[usize]) -> Vec<u8> {
    let total: usize = counts.iter().product();
    let mut out = Vec::with_capacity(total * isz);
    if total == 0 {
        return out;
    }
    let n = counts.len();
    if n == 0 {
        out.extend_from_slice(&src[base * isz..(base + 1) * isz]);
        return out;
    }
    let last = n - 1;
    let mut idx = vec![0usize; n];
    loop {
        let off: usize = base
            + idx[..last]
                .iter()
                .zip(strides)
                .map(|(i, s)| i * s)
                .sum::<usize>();
        if strides[last] == 1 {
            out.extend_from_slice(&src[off * isz..(off + counts[last]) * isz]);
        } else {
            for i in 0..counts[last] {
                let o = off + i * strides[last];
                out.extend_from_slice(&src[o * isz..(o + 1) * isz]);
            }
        }
        // Next index of the outer axes.
        let mut ax = last;
        loop {
            if ax == 0 {
                return out;
            }
            ax -= 1;
            idx[ax] += 1;
            if idx[ax] < counts[ax] {
                break;
            }
            idx[ax] = 0;
        }
    }
}
